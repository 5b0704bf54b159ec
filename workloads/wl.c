/*
** wl.c -- see wl.h. Layers are written out as the ops a framework emits
** (JAX/XLA before fusion), so autodiff and the cost formulas see them whole.
*/
#include "wl.h"

#include <stdio.h>
#include <string.h>

const char *const wl_requirement_names[] = {"fp64", "custom_cuda_kernels", "tree_libraries", NULL};

const char *const wl_common_keys[] = {"name", "family", "description", "requires", "train",
                                      "source", NULL};

static const graph_shape *shape_of(graph *g, int id) {
  const graph_op *op = graph_get(g, id);
  return op ? &op->out : NULL;
}

int wl_input(graph *g, const char *name, graph_shape s) {
  return graph_parameter(g, name, s, GRAPH_INPUT);
}

/* Inference with quantized weights: a linear layer's matrix or a
** convolution's filter (role WL_W_LINEAR; embeddings, biases and norm
** gains stay in the compute dtype, as AWQ, GPTQ and TFLite leave them)
** stored in t->weight_dtype and read as it is by the layer's dot or
** convolution, a mixed-input kernel that widens it in registers
** (graph_dot): HBM holds and streams the narrow bytes. 4-bit weights
** carry one 16-bit scale per group of 128 along the input dimension (the
** group size of AWQ, Lin et al. 2024, and GPTQ's common setting); 8-bit
** ones a per-channel scale, negligible beside the matrix and not counted. */
static int quantized_weight(graph *g, const wl_train *t, const char *name, graph_shape s) {
  graph_shape q = s;
  q.dtype = t->weight_dtype;
  int w = graph_parameter(g, name, q, GRAPH_WEIGHT);
  if (t->weight_dtype == GDT_S4) {
    char scale_name[256];
    snprintf(scale_name, sizeof scale_name, "%s.scales", name);
    int64_t groups = (graph_elements(&s) + 127) / 128;
    graph_parameter(g, scale_name, GRAPH_SHAPE(GDT_F16, groups), GRAPH_AUX);
  }
  return w;
}

int wl_weight(graph *g, const wl_train *t, const char *name, graph_shape s, int role) {
  bool frozen = t->method != WL_FULL;
  if (t->method == WL_QLORA && role == WL_W_LINEAR) {
    /* NF4 storage (Dettmers et al. 2023, QLoRA): 4 bits per weight plus an
    ** absmax per block of 64, kept here as one byte per block (the paper's
    ** double quantization brings the constants to ~0.127 bit/param). */
    graph_shape q = s;
    q.dtype = GDT_S4;
    int w = graph_parameter(g, name, q, GRAPH_WEIGHT);
    char scale_name[256];
    snprintf(scale_name, sizeof scale_name, "%s.absmax", name);
    int64_t blocks = (graph_elements(&s) + 63) / 64;
    graph_parameter(g, scale_name, GRAPH_SHAPE(GDT_S8, blocks), GRAPH_AUX);
    return graph_convert(g, w, t->compute);
  }
  if (t->weight_dtype != GDT_PRED && t->weight_dtype != t->compute && role == WL_W_LINEAR &&
      t->method == WL_FULL)
    return quantized_weight(g, t, name, s);
  s.dtype = t->compute;
  return graph_parameter(g, name, s, GRAPH_WEIGHT | (frozen ? 0 : GRAPH_TRAINABLE));
}

/* Target names as the fine-tuning libraries spell them, for the modules
** tpusim names: Megatron-Core's (Megatron-Bridge peft/lora.py
** target_modules: linear_qkv, linear_proj, linear_fc1, linear_fc2) and HF
** PEFT's on Llama-style models (q_proj ... down_proj), so a published
** adapter config can be copied as it is. */
static const struct {
  const char *alias, *modules;
} TARGET_ALIASES[] = {
    {"linear_qkv", ",q,k,v,"},  {"linear_proj", ",o,"},  {"linear_fc1", ",up,gate,"},
    {"linear_fc2", ",down,"},   {"q_proj", ",q,"},       {"k_proj", ",k,"},
    {"v_proj", ",v,"},          {"o_proj", ",o,"},       {"gate_proj", ",gate,"},
    {"up_proj", ",up,"},        {"down_proj", ",down,"},
};

bool wl_target_matches(const char *target, const char *module) {
  if (strcmp(target, module) == 0) return true;
  char pat[40];
  snprintf(pat, sizeof pat, ",%s,", module);
  for (size_t i = 0; i < sizeof TARGET_ALIASES / sizeof *TARGET_ALIASES; i++)
    if (strcmp(TARGET_ALIASES[i].alias, target) == 0) return strstr(TARGET_ALIASES[i].modules, pat);
  return false;
}

bool wl_is_target(const wl_train *t, const char *module) {
  struct wl_lora_log *log = t->lora_log;
  if (log) {
    bool seen = false;
    for (int i = 0; i < log->n_modules && !seen; i++) seen = strcmp(log->modules[i], module) == 0;
    if (!seen && log->n_modules < (int)(sizeof log->modules / sizeof *log->modules))
      snprintf(log->modules[log->n_modules++], sizeof log->modules[0], "%s", module);
  }
  bool hit = false;
  for (int i = 0; i < t->n_targets; i++)
    if (wl_target_matches(t->targets[i], module)) {
      hit = true;
      if (log) log->hits |= 1u << i;
    }
  return hit;
}

/* A scalar constant broadcast to `like`'s shape (eps, 1/N, the LoRA scale). */
static int const_like(graph *g, int like) {
  if (!shape_of(g, like)) return -1;
  graph_shape s = *shape_of(g, like);
  int c = graph_constant(g, (graph_shape){.dtype = s.dtype, .rank = 0});
  return graph_broadcast(g, c, s, graph_dims_of(0));
}

int wl_scale(graph *g, int x) {
  int c = const_like(g, x);
  return graph_binary(g, GOP_MUL, x, c);
}

static int add_const(graph *g, int x) { return graph_binary(g, GOP_ADD, x, const_like(g, x)); }

int wl_add_bias(graph *g, int x, int b) {
  const graph_shape *sx = shape_of(g, x), *sb = shape_of(g, b);
  if (!sx || !sb) return -1;
  graph_dims map = {.n = sb->rank};
  for (int i = 0; i < sb->rank; i++) map.d[i] = (int8_t)(sx->rank - sb->rank + i);
  int bb = graph_broadcast(g, b, *sx, map);
  return graph_binary(g, GOP_ADD, x, bb);
}

int wl_linear(graph *g, const wl_train *t, int x, const char *name, const char *module,
              int64_t out, bool bias) {
  const graph_shape *sx = shape_of(g, x);
  if (!sx) return -1;
  int64_t in = sx->dim[sx->rank - 1];
  char wname[256];
  snprintf(wname, sizeof wname, "%s.w", name);
  int w = wl_weight(g, t, wname, GRAPH_SHAPE(t->compute, in, out), WL_W_LINEAR);
  /* with a bias, one library kernel in eager PyTorch: addmm, the bias in
  ** cuBLAS's epilogue (F.linear) */
  int prev = 0;
  if (bias) graph_begin_composite(g, &prev);
  int y = graph_matmul(g, x, w);
  if (bias) {
    snprintf(wname, sizeof wname, "%s.b", name);
    y = wl_add_bias(g, y, wl_weight(g, t, wname, GRAPH_SHAPE(t->compute, out), WL_W_OTHER));
    graph_set_composite(g, prev);
  }
  if (t->method != WL_FULL && wl_is_target(t, module)) {
    /* LoRA (Hu et al. 2021): y += (x A) B * alpha/r, only A and B train */
    unsigned f = GRAPH_WEIGHT | GRAPH_TRAINABLE | GRAPH_ADAPTER;
    struct wl_lora_log *log = t->lora_log;
    int64_t side = in < out ? in : out;
    if (log && (log->min_side == 0 || side < log->min_side)) {
      log->min_side = side;
      snprintf(log->min_name, sizeof log->min_name, "%s", name);
    }
    snprintf(wname, sizeof wname, "%s.lora_a", name);
    int a = graph_parameter(g, wname, GRAPH_SHAPE(t->compute, in, t->lora_rank), f);
    snprintf(wname, sizeof wname, "%s.lora_b", name);
    int b = graph_parameter(g, wname, GRAPH_SHAPE(t->compute, t->lora_rank, out), f);
    int xab = graph_matmul(g, graph_matmul(g, x, a), b);
    y = graph_binary(g, GOP_ADD, y, wl_scale(g, xab));
  }
  return y;
}

/* Reduces the last dimension and broadcasts the result back over it. */
static int reduce_last(graph *g, int x, graph_reduce_kind r) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  graph_shape full = *s;
  int red = graph_reduce(g, x, graph_dims_of(1, s->rank - 1), r);
  graph_dims map = {.n = full.rank - 1};
  for (int i = 0; i < map.n; i++) map.d[i] = (int8_t)i;
  return graph_broadcast(g, red, full, map);
}

/* Frameworks normalize 16-bit activations in f32 and cast back. */
static int to_f32(graph *g, int x) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  return (s->dtype == GDT_F32 || s->dtype == GDT_F64) ? x : graph_convert(g, x, GDT_F32);
}

static int gain(graph *g, const wl_train *t, int y, const char *name, const char *which) {
  if (!shape_of(g, y)) return -1;
  graph_shape s = *shape_of(g, y); /* a copy: adding ops may move the op array */
  char wname[256];
  snprintf(wname, sizeof wname, "%s.%s", name, which);
  int w = wl_weight(g, t, wname, GRAPH_SHAPE(t->compute, s.dim[s.rank - 1]), WL_W_OTHER);
  graph_dims map = graph_dims_of(1, s.rank - 1);
  int wb = graph_broadcast(g, w, s, map);
  return graph_binary(g, strcmp(which, "bias") == 0 ? GOP_ADD : GOP_MUL, y, wb);
}

int wl_layernorm(graph *g, const wl_train *t, int x, const char *name) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  graph_dtype out_dt = s->dtype;
  /* one library kernel in eager PyTorch (F.layer_norm: f32 inside, the
  ** input's dtype out, scale and bias applied in it) */
  int prev;
  graph_begin_composite(g, &prev);
  int x32 = to_f32(g, x);
  int mean = wl_scale(g, reduce_last(g, x32, GRAPH_RED_ADD));
  int xc = graph_binary(g, GOP_SUB, x32, mean);
  int var = wl_scale(g, reduce_last(g, graph_binary(g, GOP_MUL, xc, xc), GRAPH_RED_ADD));
  int rstd = graph_unary(g, GOP_RSQRT, add_const(g, var));
  int y = graph_binary(g, GOP_MUL, xc, rstd);
  if (out_dt != GDT_F32 && out_dt != GDT_F64) y = graph_convert(g, y, out_dt);
  y = gain(g, t, gain(g, t, y, name, "scale"), name, "bias");
  graph_set_composite(g, prev);
  return y;
}

int wl_rmsnorm(graph *g, const wl_train *t, int x, const char *name) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  graph_dtype out_dt = s->dtype;
  int x32 = to_f32(g, x);
  int ms = wl_scale(g, reduce_last(g, graph_binary(g, GOP_MUL, x32, x32), GRAPH_RED_ADD));
  int y = graph_binary(g, GOP_MUL, x32, graph_unary(g, GOP_RSQRT, add_const(g, ms)));
  if (out_dt != GDT_F32 && out_dt != GDT_F64) y = graph_convert(g, y, out_dt);
  return gain(g, t, y, name, "scale");
}

int wl_l2norm(graph *g, int x) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  graph_dtype out_dt = s->dtype;
  int x32 = to_f32(g, x);
  int ss = reduce_last(g, graph_binary(g, GOP_MUL, x32, x32), GRAPH_RED_ADD);
  int y = graph_binary(g, GOP_MUL, x32, graph_unary(g, GOP_RSQRT, add_const(g, ss)));
  return out_dt != GDT_F32 && out_dt != GDT_F64 ? graph_convert(g, y, out_dt) : y;
}

int wl_softmax(graph *g, int x, graph_dtype out_dt) {
  int prev; /* one library kernel in eager PyTorch (F.softmax) */
  graph_begin_composite(g, &prev);
  int x32 = to_f32(g, x);
  int xs = graph_binary(g, GOP_SUB, x32, reduce_last(g, x32, GRAPH_RED_MAX));
  int e = graph_unary(g, GOP_EXP, xs);
  int y = graph_binary(g, GOP_DIV, e, reduce_last(g, e, GRAPH_RED_ADD));
  const graph_shape *s = shape_of(g, y);
  if (s && s->dtype != out_dt) y = graph_convert(g, y, out_dt);
  graph_set_rule(g, y, GRAPH_RULE_SOFTMAX, x);
  graph_set_composite(g, prev);
  return y;
}

/* Sum of every element, then times 1/N: a scalar. */
static int mean_all(graph *g, int x) {
  const graph_shape *s = shape_of(g, x);
  if (!s) return -1;
  graph_dims all = {.n = s->rank};
  for (int i = 0; i < s->rank; i++) all.d[i] = (int8_t)i;
  return wl_scale(g, graph_reduce(g, x, all, GRAPH_RED_ADD));
}

int wl_cross_entropy(graph *g, int logits, int labels) {
  const graph_shape *sl = shape_of(g, labels);
  if (!sl || !shape_of(g, logits)) return -1;
  graph_shape picked_shape = *sl;
  /* the cast to f32 a kernel of its own (the loss's .float(), or autocast's),
  ** then F.cross_entropy's library kernels (log_softmax, nll_loss) */
  int l32 = to_f32(g, logits), prev;
  graph_begin_composite(g, &prev);
  int xs = graph_binary(g, GOP_SUB, l32, reduce_last(g, l32, GRAPH_RED_MAX));
  const graph_shape *sxs = shape_of(g, xs);
  if (!sxs) {
    graph_set_composite(g, prev);
    return -1;
  }
  /* the rank before adding ops: graph_unary may move the op array sxs
  ** points into */
  int last = sxs->rank - 1;
  int sum = graph_reduce(g, graph_unary(g, GOP_EXP, xs), graph_dims_of(1, last), GRAPH_RED_ADD);
  int lse = graph_unary(g, GOP_LOG, sum);
  picked_shape.dtype = GDT_F32;
  int picked = graph_gather(g, xs, labels, &picked_shape); /* take_along_axis */
  int loss = mean_all(g, graph_binary(g, GOP_SUB, lse, picked));
  graph_set_composite(g, prev);
  return loss;
}

int wl_mse(graph *g, int pred, int target) {
  int d = graph_binary(g, GOP_SUB, pred, target);
  return mean_all(g, graph_binary(g, GOP_MUL, d, d));
}

int wl_bce(graph *g, int logits, int labels) {
  /* max(x, 0) - x y + log(1 + exp(-|x|)): the stable form frameworks use */
  int x = to_f32(g, logits), y = to_f32(g, labels);
  int soft = graph_unary(g, GOP_LOG,
                         add_const(g, graph_unary(g, GOP_EXP,
                                                  graph_unary(g, GOP_NEG,
                                                              graph_unary(g, GOP_ABS, x)))));
  int lin = graph_binary(g, GOP_SUB, graph_unary(g, GOP_RELU, x), graph_binary(g, GOP_MUL, x, y));
  return mean_all(g, graph_binary(g, GOP_ADD, lin, soft));
}

const char *const wl_precision_names[] = {"bf16", "fp16", "fp32", "fp64", "fp8", NULL};
const char *const wl_method_names[] = {"full", "lora", "qlora", NULL};

int wl_method_parse(const char *name, size_t len, wl_method *out) {
  for (int i = 0; name && wl_method_names[i]; i++)
    if (strlen(wl_method_names[i]) == len && strncmp(wl_method_names[i], name, len) == 0) {
      *out = (wl_method)i;
      return 0;
    }
  return -1;
}
static const graph_dtype PRECISION_DT[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64, GDT_F8};

const char *wl_precision_name(graph_dtype dt) {
  for (int i = 0; wl_precision_names[i]; i++)
    if (PRECISION_DT[i] == dt) return wl_precision_names[i];
  return NULL;
}

int wl_precision_parse(const char *name, graph_dtype *out) {
  for (int i = 0; name && wl_precision_names[i]; i++)
    if (strcmp(wl_precision_names[i], name) == 0) {
      *out = PRECISION_DT[i];
      return 0;
    }
  return -1;
}

int wl_hybrid_kind(char ch) {
  switch (ch) {
  case 'M': return WL_LAYER_MAMBA;
  case '*': return WL_LAYER_NO_FFN;
  case 'E': return WL_LAYER_NO_MIXER | WL_LAYER_MOE;
  case '-': return WL_LAYER_NO_MIXER;
  default: return 0; /* past the pattern (not built: checked on reading) */
  }
}

int wl_tf_layer_kind(const wl_tf_dims *d, int64_t i) {
  if (d->hybrid) return wl_hybrid_kind(i >= 0 && i < d->layers ? d->hybrid[i] : 0);
  int k = 0;
  if (d->experts > 0 && i >= d->first_dense &&
      (d->moe_every <= 1 || (i - d->first_dense) % d->moe_every == d->moe_every - 1))
    k |= WL_LAYER_MOE;
  if (d->window > 0 && !(d->global_every > 0 && i % d->global_every == d->global_every - 1))
    k |= WL_LAYER_LOCAL;
  /* Qwen3-Next: layer_types "linear_attention" but every
  ** full_attention_interval-th ((i + 1) % interval == 0: Qwen3NextConfig) */
  if (d->gdn_every > 0 && i % d->gdn_every != d->gdn_every - 1) k |= WL_LAYER_GDN;
  return k;
}

/* Reports character i of the pattern string at obj[key] at its own column:
** the value's position plus the opening quote and i (the pattern's
** characters are ASCII, one byte each, on one line). */
static void hybrid_char_error(jin *j, const char *key, size_t i, char ch, int64_t layer) {
  jin_push_key(j, key, 0);
  int n = j->depth - j->prefix;
  size_t off = jin_locate(j->text, j->len, j->path + j->prefix, n > 0 ? n : 0, 0);
  int line = 0, col = 0;
  if (off != SIZE_MAX) jin_line_col(j->text, off + 1 + i, &line, &col);
  if (j->line0 > 0 && line > 0) { /* a part of a larger file (jin_open_part) */
    if (line == 1) col += j->col0 - 1;
    line += j->line0 - 1;
  }
  char path[256];
  jin_path(j, path, sizeof path);
  diag_error(j->dg, j->file, line, col, path,
             "layer %lld is '%c': expected one of %s (M Mamba-2, * attention, E mixture of "
             "experts, - MLP)", (long long)layer, ch, WL_HYBRID_CHARS);
  j->errors++;
  jin_pop(j);
}

int wl_hybrid_check(jin *j, const cJSON *obj, const char *key, int64_t layers, int64_t counts[4]) {
  const char *pat = NULL;
  int r = jin_get_str(j, obj, key, false, &pat);
  if (r <= 0) return r;
  int64_t n[4] = {0, 0, 0, 0};
  bool ok = true;
  size_t len = strlen(pat);
  for (size_t i = 0; i < len; i++) {
    const char *at = strchr(WL_HYBRID_CHARS, pat[i]);
    if (at && pat[i]) {
      n[at - WL_HYBRID_CHARS]++;
      continue;
    }
    /* Megatron-Core's '|' marks pipeline stages in its own patterns; HF
    ** configs strip it (Megatron-Bridge nemotron_h_bridge.py) */
    hybrid_char_error(j, key, i, pat[i], (int64_t)i);
    ok = false;
    if (j->errors >= 8) break; /* a wrong field, not many typos: a few are enough */
  }
  if (ok && (int64_t)len != layers) {
    jin_push_key(j, key, 0);
    jin_error(j, 0, "%zu characters for %lld layers: the pattern names every layer, one "
                    "character each", len, (long long)layers);
    jin_pop(j);
    ok = false;
  }
  if (counts) memcpy(counts, n, sizeof n);
  return ok ? 1 : -1;
}
