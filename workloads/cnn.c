/*
** cnn.c -- convolutional image classifiers: the "cnn" family.
**
** A model is either a preset (ResNet-50 v1.5, MobileNetV2 1.0/224, written
** out below exactly as published) or an explicit "layers" list. Activations
** are NHWC, kernels HWIO; every layer is decomposed into the graph ops a
** framework emits before fusion:
**
**   conv        one convolution (feature groups for grouped/depthwise)
**   batchnorm   training mode: mean and variance over N,H,W in f32 (reduce,
**               subtract, multiply, rsqrt), learned scale and bias per
**               channel; the running statistics are buffers, not parameters
**   relu        GOP_RELU; relu6 is a clamp to [0, 6]
**   pool        pad, then one strided slice per window position combined
**               with maximum (max pool) or add and a 1/window scale (avg
**               pool): (window-1) x out comparisons, as a reduce-window
**               would do, and differentiable by the ordinary slice rules
**   add         residual add
**   global_avg_pool   reduce over H and W, times 1/(H*W)
**   dense       wl_linear with bias (LoRA module "fc")
**
** The loss is softmax cross-entropy of the [batch, classes] logits against
** integer labels (wl_cross_entropy). Fields and sources: docs/families.md.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "fam.h"
#include "families.h"

typedef struct {
  graph *g;
  const wl_train *t;
  int64_t classes;
} cnn;

typedef struct {
  int64_t k[2], s[2], p[2]; /* kernel, stride, padding (both sides) per spatial dim */
  int64_t cout, groups;
  bool bias;
} conv_spec;

/* ---- layers ---- */

static int conv(cnn *c, int x, const char *name, const conv_spec *cs) {
  graph *g = c->g;
  graph_shape s = fam_shape(g, x);
  if (s.rank < 0) return -1;
  if (s.rank != 4) {
    graph_error(g, "%s: a convolution needs [batch, height, width, channels] input", name);
    return -1;
  }
  int64_t cin = s.dim[3];
  if (cin % cs->groups != 0 || cs->cout % cs->groups != 0) {
    graph_error(g, "%s: %lld input and %lld output channels must both divide into %lld groups",
                name, (long long)cin, (long long)cs->cout, (long long)cs->groups);
    return -1;
  }
  char wname[256];
  graph_set_scope(g, name);
  snprintf(wname, sizeof wname, "%s.w", name);
  int k = wl_weight(g, c->t, wname,
                    GRAPH_SHAPE(c->t->compute, cs->k[0], cs->k[1], cin / cs->groups, cs->cout),
                    WL_W_LINEAR);
  graph_conv_attrs a = {.spatial = 2,
                        .in_batch = 0,
                        .in_feature = 3,
                        .in_spatial = {1, 2},
                        .k_in = 2,
                        .k_out = 3,
                        .k_spatial = {0, 1},
                        .out_batch = 0,
                        .out_feature = 3,
                        .out_spatial = {1, 2},
                        .stride = {cs->s[0], cs->s[1]},
                        .pad_lo = {cs->p[0], cs->p[1]},
                        .pad_hi = {cs->p[0], cs->p[1]},
                        .feature_groups = cs->groups};
  int y = graph_conv(g, x, k, &a, s.dtype);
  if (cs->bias) {
    snprintf(wname, sizeof wname, "%s.b", name);
    y = wl_add_bias(g, y,
                    wl_weight(g, c->t, wname, GRAPH_SHAPE(c->t->compute, cs->cout), WL_W_OTHER));
  }
  graph_set_scope(g, "");
  return y;
}

/* Per-channel [C] vector broadcast over NHWC. */
static int over_channels(graph *g, int v, graph_shape like) {
  return graph_broadcast(g, v, like, graph_dims_of(1, 3));
}

/* Inference-mode batch normalization: the running statistics are fixed,
** so the layer is a per-channel affine, x * scale + shift (Ioffe & Szegedy
** 2015, sec. 3.1). Standing alone (a "batchnorm" layer of a list) it is
** two elementwise ops, which fusion puts in the producing convolution's
** epilogue when that convolution has no other user. */
static int batchnorm_affine(cnn *c, int x, const char *name, graph_shape s) {
  graph *g = c->g;
  graph_set_scope(g, name);
  char wname[256];
  snprintf(wname, sizeof wname, "%s.scale", name);
  int gamma = wl_weight(g, c->t, wname, GRAPH_SHAPE(c->t->compute, s.dim[3]), WL_W_OTHER);
  snprintf(wname, sizeof wname, "%s.bias", name);
  int beta = wl_weight(g, c->t, wname, GRAPH_SHAPE(c->t->compute, s.dim[3]), WL_W_OTHER);
  int y = graph_binary(g, GOP_MUL, x, over_channels(g, gamma, s));
  y = graph_binary(g, GOP_ADD, y, over_channels(g, beta, s));
  graph_set_scope(g, "");
  return y;
}

/* Training-mode batch normalization (Ioffe & Szegedy 2015): statistics of
** the batch over N, H, W, computed in f32 as frameworks do for 16-bit
** activations, then the learned per-channel scale and bias. An inference
** graph takes the affine above instead. */
static int batchnorm(cnn *c, int x, const char *name) {
  graph *g = c->g;
  graph_shape s = fam_shape(g, x);
  if (s.rank < 0) return -1;
  if (s.rank != 4) {
    graph_error(g, "%s: batchnorm needs [batch, height, width, channels] input", name);
    return -1;
  }
  if (c->t->inference) return batchnorm_affine(c, x, name, s);
  graph_set_scope(g, name);
  /* one library kernel in eager PyTorch (cuDNN's batch norm: statistics,
  ** normalization, scale and bias) */
  int prev;
  graph_begin_composite(g, &prev);
  graph_dtype dt = s.dtype;
  bool wide = dt == GDT_F32 || dt == GDT_F64;
  int x32 = wide ? x : graph_convert(g, x, GDT_F32);
  graph_shape s32 = s;
  if (!wide) s32.dtype = GDT_F32;
  graph_dims nhw = graph_dims_of(3, 0, 1, 2);
  int mean = fam_mean(g, x32, nhw);
  int xc = graph_binary(g, GOP_SUB, x32, over_channels(g, mean, s32));
  int var = fam_mean(g, graph_binary(g, GOP_MUL, xc, xc), nhw);
  int rstd = graph_unary(g, GOP_RSQRT, fam_with_const(g, GOP_ADD, var)); /* + eps */
  int y = graph_binary(g, GOP_MUL, xc, over_channels(g, rstd, s32));
  if (!wide) y = graph_convert(g, y, dt);
  char wname[256];
  snprintf(wname, sizeof wname, "%s.scale", name);
  int gamma = wl_weight(g, c->t, wname, GRAPH_SHAPE(c->t->compute, s.dim[3]), WL_W_OTHER);
  snprintf(wname, sizeof wname, "%s.bias", name);
  int beta = wl_weight(g, c->t, wname, GRAPH_SHAPE(c->t->compute, s.dim[3]), WL_W_OTHER);
  y = graph_binary(g, GOP_MUL, y, over_channels(g, gamma, s));
  y = graph_binary(g, GOP_ADD, y, over_channels(g, beta, s));
  graph_set_composite(g, prev);
  graph_set_scope(g, "");
  return y;
}

static int relu(cnn *c, int x) { return graph_unary(c->g, GOP_RELU, x); }

static int relu6(cnn *c, int x) {
  graph_shape s = fam_shape(c->g, x);
  if (s.rank < 0) return -1;
  graph_shape scalar = {.dtype = s.dtype, .rank = 0};
  int lo = graph_constant(c->g, scalar), hi = graph_constant(c->g, scalar);
  return graph_clamp(c->g, lo, x, hi);
}

/* An inference engine's pooling layer: one kernel (TensorRT's IPoolingLayer,
** cuDNN's cudnnPoolingForward) that reads each input element once -- the
** windows' overlap is served from on-chip caches -- and writes the pooled
** output, with (window - 1) comparisons or additions per output element,
** the same arithmetic as the slices below; the padding is never stored.
** Training keeps the slices, which autodiff differentiates. */
static int pool_kernel(cnn *c, int x, bool is_max, const int64_t win[2], const int64_t out[2]) {
  graph_shape s = fam_shape(c->g, x);
  graph_shape o = GRAPH_SHAPE(s.dtype, s.dim[0], out[0], out[1], s.dim[3]);
  double n_out = (double)graph_elements(&o);
  double flops = n_out * (double)(win[0] * win[1] - 1) + (is_max ? 0 : n_out);
  return graph_custom(c->g, is_max ? "max-pool" : "avg-pool", o, &x, 1, flops, 0,
                      graph_bytes(&s) + graph_bytes(&o));
}

/* Max or average pooling over a window (see the file comment). Average
** pooling divides by the full window, padding included (PyTorch's
** count_include_pad default). */
static int pool(cnn *c, int x, bool is_max, const int64_t win[2], const int64_t st[2],
                const int64_t pad[2]) {
  graph *g = c->g;
  graph_shape s = fam_shape(g, x);
  if (s.rank < 0) return -1;
  if (s.rank != 4) {
    graph_error(g, "pooling needs [batch, height, width, channels] input");
    return -1;
  }
  int64_t out[2];
  for (int d = 0; d < 2; d++) {
    int64_t padded = s.dim[1 + d] + 2 * pad[d];
    if (padded < win[d]) {
      char ss[128];
      graph_shape_str(&s, ss, sizeof ss);
      graph_error(g, "pool: window %lld is larger than the padded input %s", (long long)win[d], ss);
      return -1;
    }
    out[d] = (padded - win[d]) / st[d] + 1;
  }
  if (c->t->inference) return pool_kernel(c, x, is_max, win, out);
  int xp = x;
  if (pad[0] || pad[1]) {
    int64_t lo[4] = {0, pad[0], pad[1], 0};
    xp = graph_pad(g, x, lo, lo, NULL);
  }
  int acc = -1;
  for (int64_t i = 0; i < win[0]; i++)
    for (int64_t k = 0; k < win[1]; k++) {
      int64_t start[4] = {0, i, k, 0};
      int64_t limit[4] = {s.dim[0], i + (out[0] - 1) * st[0] + 1, k + (out[1] - 1) * st[1] + 1,
                          s.dim[3]};
      int64_t stride[4] = {1, st[0], st[1], 1};
      int sl = graph_slice(g, xp, start, limit, stride);
      acc = (i == 0 && k == 0) ? sl : graph_binary(g, is_max ? GOP_MAX : GOP_ADD, acc, sl);
    }
  return is_max ? acc : wl_scale(g, acc);
}

static int global_avg_pool(cnn *c, int x) {
  graph_shape s = fam_shape(c->g, x);
  if (s.rank < 0) return -1;
  if (s.rank != 4) {
    graph_error(c->g, "global_avg_pool needs [batch, height, width, channels] input");
    return -1;
  }
  return fam_mean(c->g, x, graph_dims_of(2, 1, 2));
}

static int flatten(cnn *c, int x) {
  graph_shape s = fam_shape(c->g, x);
  if (s.rank < 0) return -1;
  int64_t n = graph_elements(&s) / (s.dim[0] ? s.dim[0] : 1);
  return graph_reshape(c->g, x, GRAPH_SHAPE(s.dtype, s.dim[0], n));
}

static int dense(cnn *c, int x, const char *name, int64_t units, bool bias) {
  graph_set_scope(c->g, name);
  int y = wl_linear(c->g, c->t, x, name, "fc", units, bias);
  graph_set_scope(c->g, "");
  return y;
}

static conv_spec square(int64_t k, int64_t s, int64_t cout, int64_t groups) {
  int64_t p = (k - 1) / 2;
  return (conv_spec){{k, k}, {s, s}, {p, p}, cout, groups, false};
}

/* conv (no bias) followed by batchnorm: the building block of both presets.
** An inference graph folds the batch norm into the convolution: its scale
** into the filter, its shift into a bias added in the convolution's
** epilogue, where the activation that follows is fused as well (NVIDIA
** TensorRT Developer Guide, "Layer Fusion": Convolution and Scale fusion,
** Convolution and ReLU activation; ONNX Runtime's ConvBNFusion and XLA's
** batchnorm folding do the same). The folded bias is named after the
** norm, whose shift it is. */
static int conv_bn(cnn *c, int x, const char *conv_name, const char *bn_name, conv_spec cs) {
  if (!c->t->inference) return batchnorm(c, conv(c, x, conv_name, &cs), bn_name);
  int y = conv(c, x, conv_name, &cs);
  graph_shape s = fam_shape(c->g, y);
  if (s.rank != 4) return -1;
  char wname[256];
  snprintf(wname, sizeof wname, "%s.bias", bn_name);
  graph_set_scope(c->g, bn_name);
  y = wl_add_bias(c->g, y, wl_weight(c->g, c->t, wname, GRAPH_SHAPE(c->t->compute, s.dim[3]), WL_W_OTHER));
  graph_set_scope(c->g, "");
  return y;
}

/* ---- presets ---- */

/* ResNet-50 v1.5 (He et al. 2016, "Deep Residual Learning", Table 1; the
** v1.5 variant puts the stride on the 3x3 convolution, as torchvision's
** resnet50 does). Names follow torchvision's state dict. */
static int resnet50(cnn *c, int x) {
  static const int blocks[4] = {3, 4, 6, 3};
  static const int64_t widths[4] = {64, 128, 256, 512};
  x = relu(c, conv_bn(c, x, "conv1", "bn1", square(7, 2, 64, 1)));
  x = pool(c, x, true, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1});
  int layer = 0;
  for (int st = 0; st < 4; st++)
    for (int b = 0; b < blocks[st]; b++) {
      graph_set_layer(c->g, layer++);
      int64_t w = widths[st], stride = (st > 0 && b == 0) ? 2 : 1;
      char p[64], n1[96], n2[96];
      snprintf(p, sizeof p, "layer%d.%d", st + 1, b);
#define NAMES(cv, bn) (snprintf(n1, sizeof n1, "%s." cv, p), snprintf(n2, sizeof n2, "%s." bn, p))
      NAMES("conv1", "bn1");
      int y = relu(c, conv_bn(c, x, n1, n2, square(1, 1, w, 1)));
      NAMES("conv2", "bn2");
      y = relu(c, conv_bn(c, y, n1, n2, square(3, stride, w, 1)));
      NAMES("conv3", "bn3");
      y = conv_bn(c, y, n1, n2, square(1, 1, 4 * w, 1));
      int shortcut = x;
      if (b == 0) {
        NAMES("downsample.0", "downsample.1");
        shortcut = conv_bn(c, x, n1, n2, square(1, stride, 4 * w, 1));
      }
#undef NAMES
      x = relu(c, graph_binary(c->g, GOP_ADD, y, shortcut));
    }
  graph_set_layer(c->g, -1);
  return dense(c, global_avg_pool(c, x), "fc", c->classes, true);
}

/* MobileNetV2, width 1.0 (Sandler et al. 2018, "MobileNetV2: Inverted
** Residuals and Linear Bottlenecks", Table 2: t, c, n, s per stage). The
** classifier's dropout does no arithmetic worth counting and is left out. */
static int mobilenet_v2(cnn *c, int x) {
  static const int64_t cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                    {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  char n1[96], n2[96];
  x = relu6(c, conv_bn(c, x, "features.0.conv", "features.0.bn", square(3, 2, 32, 1)));
  int64_t cin = 32;
  int block = 1;
  for (int st = 0; st < 7; st++)
    for (int i = 0; i < cfg[st][2]; i++, block++) {
      graph_set_layer(c->g, block - 1);
      int64_t t = cfg[st][0], cout = cfg[st][1], stride = i == 0 ? cfg[st][3] : 1;
      int64_t hidden = cin * t;
      int y = x;
#define NAMES(part)                                                                                \
  (snprintf(n1, sizeof n1, "features.%d.%s", block, part),                                         \
   snprintf(n2, sizeof n2, "features.%d.%s.bn", block, part))
      if (t != 1) {
        NAMES("expand");
        y = relu6(c, conv_bn(c, y, n1, n2, square(1, 1, hidden, 1)));
      }
      NAMES("depthwise");
      y = relu6(c, conv_bn(c, y, n1, n2, square(3, stride, hidden, hidden)));
      NAMES("project");
      y = conv_bn(c, y, n1, n2, square(1, 1, cout, 1)); /* linear bottleneck: no activation */
#undef NAMES
      x = (stride == 1 && cin == cout) ? graph_binary(c->g, GOP_ADD, x, y) : y;
      cin = cout;
    }
  graph_set_layer(c->g, -1);
  x = relu6(c, conv_bn(c, x, "features.18.conv", "features.18.bn", square(1, 1, 1280, 1)));
  return dense(c, global_avg_pool(c, x), "classifier", c->classes, true);
}

/* ---- the layer list ---- */

enum { L_CONV, L_BN, L_RELU, L_RELU6, L_POOL, L_ADD, L_GAP, L_FLATTEN, L_DENSE };
static const char *const LAYER_TYPES[] = {"conv", "batchnorm",       "relu",    "relu6", "pool",
                                          "add",  "global_avg_pool", "flatten", "dense", NULL};
static const char *const K_CONV[] = {"type",    "name",         "input",  "kernel",    "stride",
                                     "padding", "out_channels", "groups", "depthwise", "bias",
                                     NULL};
static const char *const K_PLAIN[] = {"type", "name", "input", NULL};
static const char *const K_POOL[] = {"type",   "name",   "input",   "mode",
                                     "window", "stride", "padding", NULL};
static const char *const K_ADD[] = {"type", "name", "input", "with", NULL};
static const char *const K_DENSE[] = {"type", "name", "input", "units", "bias", NULL};
static const char *const *const LAYER_KEYS[] = {K_CONV, K_PLAIN, K_PLAIN, K_PLAIN, K_POOL,
                                                K_ADD,  K_PLAIN, K_PLAIN, K_DENSE};

/* An integer, or a pair [height, width]. Returns like jin_get_int. */
static int get_pair(jin *j, const cJSON *obj, const char *key, int64_t min, int64_t max,
                    int64_t out[2]) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (cJSON_IsArray(v)) {
    int n = 0;
    int64_t two[2];
    int rc = fam_int_list(j, obj, key, 2, 2, min, max, false, two, &n);
    if (rc == 1) out[0] = two[0], out[1] = two[1];
    return rc;
  }
  int64_t one;
  int rc = jin_get_int(j, obj, key, min, max, false, &one);
  if (rc == 1) out[0] = out[1] = one;
  return rc;
}

typedef struct {
  const char *name;
  int id;
} named;

/* Finds an earlier layer's output by name; reports at obj[key] otherwise. */
static int lookup(jin *j, const char *key, const char *want, const named *tab, int n, int *id) {
  for (int i = 0; i < n; i++)
    if (strcmp(tab[i].name, want) == 0) {
      *id = tab[i].id;
      return 0;
    }
  const char *cand[256];
  int nc = 0;
  for (int i = 0; i < n && nc < 256; i++)
    cand[nc++] = tab[i].name;
  const char *s = str_suggest(want, cand, nc);
  jin_push_key(j, key, 0);
  if (s)
    jin_error(j, 0, "no earlier layer is named '%s' (did you mean '%s'?)", want, s);
  else
    jin_error(j, 0,
              "no earlier layer is named '%s' (name a layer with \"name\"; \"image\" is "
              "the input)",
              want);
  jin_pop(j);
  return -1;
}

/* One entry of "layers": reads and checks its fields, then (when building)
** appends its ops to cur. Returns the new output, or -1 after an error. */
static int layer(cnn *c, jin *j, const cJSON *item, int idx, int cur, const named *tab, int nt,
                 bool build) {
  int before = j->errors;
  if (!cJSON_IsObject(item)) {
    jin_error(j, 0, "a layer is an object such as {\"type\": \"conv\", ...}");
    return -1;
  }
  int type;
  if (jin_get_enum(j, item, "type", LAYER_TYPES, true, &type) < 0) return -1;
  jin_only(j, item, LAYER_KEYS[type], NULL);
  const char *name = NULL, *input = NULL, *with = NULL;
  char defname[32];
  snprintf(defname, sizeof defname, "layers.%d", idx);
  jin_get_str(j, item, "name", false, &name);
  if (!name) name = defname;
  int x = cur, other = -1;
  if (jin_get_str(j, item, "input", false, &input) == 1) lookup(j, "input", input, tab, nt, &x);

  conv_spec cs = {{1, 1}, {1, 1}, {0, 0}, 1, 1, false};
  int64_t win[2] = {1, 1}, st[2] = {0, 0}, pad[2] = {0, 0}, units = c->classes;
  int mode = 0;
  bool bias = true, depthwise = false;
  static const char *const MODES[] = {"max", "avg", NULL};
  switch (type) {
  case L_CONV:
    get_pair(j, item, "kernel", 1, 1024, cs.k);
    if (!cJSON_HasObjectItem(item, "kernel")) jin_error(j, 1, "missing field 'kernel'");
    cs.p[0] = (cs.k[0] - 1) / 2, cs.p[1] = (cs.k[1] - 1) / 2; /* "same" for odd kernels */
    get_pair(j, item, "stride", 1, 1024, cs.s);
    get_pair(j, item, "padding", 0, 1024, cs.p);
    jin_get_int(j, item, "out_channels", 1, 1 << 20, true, &cs.cout);
    jin_get_int(j, item, "groups", 1, 1 << 20, false, &cs.groups);
    jin_get_bool(j, item, "depthwise", false, &depthwise);
    cs.bias = false;
    jin_get_bool(j, item, "bias", false, &cs.bias);
    if (depthwise && cJSON_HasObjectItem(item, "groups")) {
      jin_push_key(j, "depthwise", 0);
      jin_error(j, 1, "give either \"depthwise\" or \"groups\", not both");
      jin_pop(j);
    }
    break;
  case L_POOL:
    jin_get_enum(j, item, "mode", MODES, true, &mode);
    get_pair(j, item, "window", 1, 32, win);
    if (!cJSON_HasObjectItem(item, "window")) jin_error(j, 1, "missing field 'window'");
    st[0] = win[0], st[1] = win[1];
    get_pair(j, item, "stride", 1, 1024, st);
    get_pair(j, item, "padding", 0, 1024, pad);
    break;
  case L_ADD:
    if (jin_get_str(j, item, "with", true, &with) == 1) lookup(j, "with", with, tab, nt, &other);
    break;
  case L_DENSE:
    jin_get_int(j, item, "units", 1, 1 << 24, false, &units);
    jin_get_bool(j, item, "bias", false, &bias);
    break;
  default:
    break;
  }
  if (j->errors > before || !build) return -1;

  graph_set_layer(c->g, idx);
  int y = -1;
  switch (type) {
  case L_CONV:
    if (depthwise) {
      graph_shape sx = fam_shape(c->g, x);
      cs.groups = sx.rank == 4 && sx.dim[3] > 0 ? sx.dim[3] : 1;
    }
    y = conv(c, x, name, &cs);
    break;
  case L_BN:
    y = batchnorm(c, x, name);
    break;
  case L_RELU:
    y = relu(c, x);
    break;
  case L_RELU6:
    y = relu6(c, x);
    break;
  case L_POOL:
    y = pool(c, x, mode == 0, win, st, pad);
    break;
  case L_ADD:
    y = graph_binary(c->g, GOP_ADD, x, other);
    break;
  case L_GAP:
    y = global_avg_pool(c, x);
    break;
  case L_FLATTEN:
    y = flatten(c, x);
    break;
  case L_DENSE:
    y = dense(c, x, name, units, bias);
    break;
  }
  graph_set_layer(c->g, -1);
  if (fam_graph_check(c->g, j) < 0) return -1;
  return y;
}

static int layer_list(cnn *c, jin *j, const cJSON *layers, int img) {
  int n = cJSON_GetArraySize(layers);
  jin_push_key(j, "layers", 0);
  if (n == 0) {
    jin_error(j, 0, "expected at least one layer");
    jin_pop(j);
    return -1;
  }
  named *tab = calloc((size_t)n + 1, sizeof *tab);
  if (!tab) {
    jin_error(j, 0, "out of memory");
    jin_pop(j);
    return -1;
  }
  int nt = 0, cur = img;
  tab[nt++] = (named){"image", img};
  bool build = true;
  int i = 0;
  for (const cJSON *item = layers->child; item; item = item->next, i++) {
    jin_push_index(j, i);
    int y = layer(c, j, item, i, cur, tab, nt, build);
    if (y < 0) build = false;
    cur = y;
    const cJSON *nm = cJSON_IsObject(item) ? cJSON_GetObjectItemCaseSensitive(item, "name") : NULL;
    if (cJSON_IsString(nm) && *nm->valuestring) {
      bool dup = false;
      for (int k = 0; k < nt; k++)
        dup |= strcmp(tab[k].name, nm->valuestring) == 0;
      if (dup) {
        jin_push_key(j, "name", 0);
        jin_error(j, 0, "layer name '%s' is already used", nm->valuestring);
        jin_pop(j);
        build = false;
      } else {
        tab[nt++] = (named){nm->valuestring, y};
      }
    }
    jin_pop(j);
  }
  free(tab);
  if (!build) {
    jin_pop(j);
    return -1;
  }
  graph_shape s = fam_shape(c->g, cur);
  if (s.rank != 2 || s.dim[1] != c->classes) {
    char ss[128];
    graph_shape_str(&s, ss, sizeof ss);
    jin_error(j, 0,
              "the last layer gives %s; it must give the [batch, %lld] logits (end with "
              "global_avg_pool and a dense layer of 'classes' units)",
              ss, (long long)c->classes);
    cur = -1;
  }
  jin_pop(j);
  return cur;
}

/* ---- the family ---- */

static const char *const CNN_KEYS[] = {"preset", "layers", "image", "classes", NULL};
static const char *const PRESETS[] = {"resnet50", "mobilenet_v2", NULL};

int wl_cnn(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  int before = j->errors;
  jin_only(j, spec, CNN_KEYS, wl_common_keys);
  int preset = -1;
  jin_get_enum(j, spec, "preset", PRESETS, false, &preset);
  const cJSON *layers = jin_get_array(j, spec, "layers", false);
  bool has_preset = cJSON_HasObjectItem(spec, "preset");
  bool has_layers = cJSON_HasObjectItem(spec, "layers");
  if (has_preset == has_layers) {
    if (has_preset) {
      jin_push_key(j, "layers", 0);
      jin_error(j, 1, "give either \"preset\" or \"layers\", not both");
      jin_pop(j);
    } else {
      jin_error(j, 0, "a cnn needs \"preset\" (resnet50, mobilenet_v2) or a \"layers\" list");
    }
  }
  int64_t image[3] = {224, 224, 3};
  int n = 0;
  fam_int_list(j, spec, "image", 3, 3, 1, 1 << 16, false, image, &n);
  /* an int8 (or fp8) engine keeps the values between its kernels in the
  ** narrow dtype, each kernel requantizing its output in its epilogue
  ** (TensorRT's INT8 I/O layers; MLPerf's ResNet-50 engines take int8
  ** images): the builder's compute dtype becomes the activations'. The
  ** per-channel biases and scales are then counted at that width too --
  ** TensorRT keeps them in fp32, C x 4 bytes a layer, under 0.1 % of
  ** ResNet-50's filters. */
  wl_train ti = *t;
  if (t->inference && t->act_dtype != GDT_PRED) ti.compute = t->act_dtype;
  cnn c = {.g = g, .t = &ti, .classes = 1000};
  jin_get_int(j, spec, "classes", 1, 1 << 24, false, &c.classes);
  if (j->errors > before) return -1;

  int64_t b = t->global_batch;
  int img = wl_input(g, "images", GRAPH_SHAPE(ti.compute, b, image[0], image[1], image[2]));
  int labels = t->inference ? -1 : wl_input(g, "labels", GRAPH_SHAPE(GDT_S32, b));
  int logits;
  if (has_preset) {
    logits = preset == 0 ? resnet50(&c, img) : mobilenet_v2(&c, img);
    jin_push_key(j, cJSON_HasObjectItem(spec, "image") ? "image" : "preset", 0);
    int bad = fam_graph_check(g, j);
    jin_pop(j);
    if (bad) return -1;
  } else {
    logits = layer_list(&c, j, layers, img);
    if (logits < 0) return -1;
  }
  /* an inference engine returns the logits (or their top class): no loss */
  if (t->inference) {
    info->per_step = (double)b;
    info->unit = "samples";
    return logits;
  }
  graph_set_scope(g, "loss");
  int loss = wl_cross_entropy(g, logits, labels);
  graph_set_scope(g, "");
  if (fam_graph_check(g, j) < 0) return -1;
  info->per_step = (double)b;
  info->unit = "samples";
  return loss;
}
