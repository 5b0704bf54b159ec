/*
** test_families.c -- the cnn, mlp, dlrm, gbdt and graph (op list) families:
** published parameter counts and FLOPs, hand-derived costs, and every kind
** of bad input with its message and place.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../base/diag.h"
#include "../workloads/graph.h"
#include "../base/jin.h"
#include "../workloads/families.h"
#include "helpers.h"

typedef struct {
  diag *dg;
  graph *g;
  int loss;
  wl_info info;
} fam_run;

static wl_train train_with(int64_t batch, graph_dtype dt) {
  return (wl_train){.global_batch = batch,
                    .seq_len = 1,
                    .compute = dt,
                    .master_fp32 = dt != GDT_F32 && dt != GDT_F64,
                    .optimizer = WL_ADAMW,
                    .method = WL_FULL};
}

static fam_run run_text(wl_family_fn fn, const char *text, const wl_train *t) {
  fam_run r = {.dg = diag_new(), .g = graph_new("t")};
  jin j;
  int rc = jin_open(&j, "t.json", text, strlen(text), r.dg);
  cr_assert_eq(rc, 0, "test JSON must parse: %s", diag_count(r.dg) ? diag_message(r.dg, 0) : "");
  r.loss = fn(r.g, &j, j.root, t, &r.info);
  jin_close(&j);
  return r;
}

static fam_run run_file(wl_family_fn fn, const char *path, const wl_train *t) {
  diag *d = diag_new();
  size_t len = 0;
  char *text = jin_read_file(path, 1 << 20, &len, d);
  cr_assert_not_null(text, "cannot read %s", path);
  diag_free(d);
  fam_run r = run_text(fn, text, t);
  free(text);
  return r;
}

static void fam_free(fam_run *r) {
  graph_free(r->g);
  diag_free(r->dg);
}

/* The run must have built a graph with a scalar loss. */
static void assert_built(const fam_run *r) {
  if (diag_count(r->dg)) diag_print(r->dg, stderr);
  if (graph_diag(r->g)) diag_print(graph_diag(r->g), stderr);
  cr_assert(graph_ok(r->g));
  cr_assert_eq(diag_count(r->dg), 0);
  cr_assert_geq(r->loss, 0);
  cr_assert_eq(graph_get(r->g, r->loss)->out.rank, 0, "the loss must be a scalar");
}

/* The run must have failed with exactly this first message. */
static void assert_error(const fam_run *r, const char *want) {
  cr_assert_lt(r->loss, 0, "expected a failure");
  cr_assert_gt(diag_count(r->dg), 0, "expected a message");
  cr_assert_str_eq(diag_message(r->dg, 0), want);
}

/* "t.json:L:C: " of the first occurrence of needle in text. */
static const char *at(const char *text, const char *needle) {
  static char buf[64];
  char lc[32];
  th_where(text, needle, lc, sizeof lc);
  snprintf(buf, sizeof buf, "t.json:%s: ", lc);
  return buf;
}

static double flops_of_kind(const graph *g, graph_op_kind k) {
  double s = 0;
  for (int i = 0; i < graph_count(g); i++)
    if (graph_get(g, i)->kind == k) {
      graph_cost c = graph_op_cost(g, i);
      s += graph_cost_flops(&c) * (double)graph_get(g, i)->count;
    }
  return s;
}

static int count_kind(const graph *g, graph_op_kind k) {
  int n = 0;
  for (int i = 0; i < graph_count(g); i++)
    n += graph_get(g, i)->kind == k;
  return n;
}

/* The op whose name is exactly `name`, or -1. */
static int op_named(const graph *g, const char *name) {
  for (int i = 0; i < graph_count(g); i++)
    if (strcmp(graph_get(g, i)->name, name) == 0) return i;
  return -1;
}

static void assert_dims(const graph *g, int id, int rank, const int64_t *want) {
  cr_assert_geq(id, 0);
  const graph_shape *s = &graph_get(g, id)->out;
  cr_assert_eq(s->rank, rank, "rank %d, want %d", s->rank, rank);
  for (int i = 0; i < rank; i++)
    cr_assert_eq(s->dim[i], want[i], "dim %d is %lld, want %lld", i, (long long)s->dim[i],
                 (long long)want[i]);
}

/* ---- cnn ---- */

/* torchvision resnet50 (ResNet50_Weights.IMAGENET1K_V1 metadata): 25,557,032
** parameters, conv kernels + batchnorm scale and bias + fc weight and bias;
** 4.09 GFLOPS, which torchvision reports as multiply-adds per 224x224
** image. The convolutions and the fc layer must come to 2 x 4.09e9 FLOPs
** (within 2%); the count is exact, so we also assert it to the parameter. */
Test(families, resnet50_published_parameters_and_flops) {
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_file(wl_cnn, "workloads/examples/resnet50.json", &t);
  assert_built(&r);
  int64_t p = graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE);
  cr_assert_eq(p, 25557032, "resnet50 has %lld trainable parameters", (long long)p);
  cr_assert_float_eq((double)p, 25557032.0, 25557032.0 * 0.001);
  double macs = (flops_of_kind(r.g, GOP_CONV) + flops_of_kind(r.g, GOP_DOT)) / 2;
  cr_assert_float_eq(macs, 4.09e9, 4.09e9 * 0.02, "resnet50: %.4g multiply-adds", macs);
  cr_assert_eq(count_kind(r.g, GOP_CONV), 53); /* 1 + 16 blocks x 3 + 4 projections */
  cr_assert_eq(r.info.per_step, 1);
  cr_assert_str_eq(r.info.unit, "samples");
  cr_assert(!r.info.whole_step);
  int64_t logits[] = {1, 1000};
  assert_dims(r.g, op_named(r.g, "fc/dot"), 2, logits);
  fam_free(&r);
}

/* The step scales with the batch: twice the images, twice the convolutions. */
Test(families, resnet50_flops_scale_with_batch) {
  wl_train t1 = train_with(1, GDT_BF16), t8 = train_with(8, GDT_BF16);
  fam_run a = run_file(wl_cnn, "workloads/examples/resnet50.json", &t1);
  fam_run b = run_file(wl_cnn, "workloads/examples/resnet50.json", &t8);
  assert_built(&a);
  assert_built(&b);
  cr_assert_float_eq(flops_of_kind(b.g, GOP_CONV), 8 * flops_of_kind(a.g, GOP_CONV), 1);
  cr_assert_eq(b.info.per_step, 8);
  fam_free(&a);
  fam_free(&b);
}

/* torchvision mobilenet_v2: 3,504,872 parameters (within 0.5%); Sandler et
** al. 2018 Table 4: 300M multiply-adds at 224x224, width 1.0 (within 2%). */
Test(families, mobilenet_v2_published_parameters_and_macs) {
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_file(wl_cnn, "workloads/examples/mobilenet_v2.json", &t);
  assert_built(&r);
  double p = (double)graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE);
  cr_assert_float_eq(p, 3504872.0, 3504872.0 * 0.005, "mobilenet_v2: %.0f parameters", p);
  double macs = (flops_of_kind(r.g, GOP_CONV) + flops_of_kind(r.g, GOP_DOT)) / 2;
  cr_assert_float_eq(macs, 300e6, 300e6 * 0.02, "mobilenet_v2: %.4g multiply-adds", macs);
  /* 52 convolutions: the stem, 17 blocks (16 with an expansion), the last 1x1 */
  cr_assert_eq(count_kind(r.g, GOP_CONV), 1 + 17 * 3 - 1 + 1);
  fam_free(&r);
}

static const char SMALL_CNN[] =
    "{\"family\": \"cnn\", \"image\": [8, 8, 3], \"classes\": 10,\n"
    " \"layers\": [\n"
    "  {\"type\": \"conv\", \"kernel\": 3, \"out_channels\": 16, \"name\": \"c1\"},\n"
    "  {\"type\": \"batchnorm\", \"name\": \"bn\"},\n"
    "  {\"type\": \"relu\", \"name\": \"r\"},\n"
    "  {\"type\": \"conv\", \"kernel\": 3, \"out_channels\": 16, \"depthwise\": true},\n"
    "  {\"type\": \"add\", \"with\": \"r\"},\n"
    "  {\"type\": \"pool\", \"mode\": \"max\", \"window\": 3, \"stride\": 2, \"padding\": 1},\n"
    "  {\"type\": \"global_avg_pool\"},\n"
    "  {\"type\": \"dense\", \"name\": \"head\"}\n"
    " ]}\n";

/* Hand-derived for batch 2: conv 3x3x3->16 on 8x8: 2*(2*8*8*16)*27 =
** 110,592 FLOPs; depthwise 3x3 on 16 channels: 2*(2*8*8*16)*9 = 36,864;
** max pool 3x3/2 pad 1 -> 4x4: 9 slices and 8 maximum ops of 2*4*4*16 =
** 512 elements = 4,096 comparisons; dense 16->10: 2*2*16*10 = 640.
** Parameters: 432 + 32 (bn) + 144 (depthwise) + 170 (dense) = 778. */
Test(families, cnn_layer_list_hand_derived) {
  wl_train t = train_with(2, GDT_F32);
  fam_run r = run_text(wl_cnn, SMALL_CNN, &t);
  assert_built(&r);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_CONV), 110592.0 + 36864.0, 0.5);
  cr_assert_eq(count_kind(r.g, GOP_SLICE), 9);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_MAX), 4096.0, 0.5);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_DOT), 640.0, 0.5);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 778);
  int64_t kernel[] = {3, 3, 3, 16};
  assert_dims(r.g, op_named(r.g, "c1.w"), 4, kernel);
  fam_free(&r);
}

/* ---- mlp ---- */

/* 784-512-512-10 with biases: 784*512+512 + 512*512+512 + 512*10+10 =
** 669,706 parameters; at batch 128 the three matmuls are
** 2*128*(784*512 + 512*512 + 512*10) = 171,180,032 FLOPs. */
Test(families, mlp_exact_parameters_and_flops) {
  wl_train t = train_with(128, GDT_F32);
  fam_run r = run_file(wl_mlp, "workloads/examples/mlp.json", &t);
  assert_built(&r);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 669706);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_DOT), 171180032.0, 0.5);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_RELU), 2.0 * 128 * 512, 0.5);
  cr_assert_eq(count_kind(r.g, GOP_DOT), 3);
  cr_assert_eq(r.info.per_step, 128);
  fam_free(&r);
}

Test(families, mlp_gelu_and_mse) {
  const char *text = "{\"inputs\": 4, \"hidden\": [8], \"outputs\": 3, \"activation\": \"gelu\","
                     " \"loss\": \"mse\"}";
  wl_train t = train_with(5, GDT_F32);
  fam_run r = run_text(wl_mlp, text, &t);
  assert_built(&r);
  /* gelu: 8 flops per element (tanh approximation) over [5, 8] */
  cr_assert_float_eq(flops_of_kind(r.g, GOP_GELU), 8.0 * 5 * 8, 0.5);
  int64_t targets[] = {5, 3};
  assert_dims(r.g, op_named(r.g, "targets"), 2, targets);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 4 * 8 + 8 + 8 * 3 + 3);
  fam_free(&r);
}

/* ---- dlrm ---- */

/* MLPerf DLRM (Criteo 1TB, 40M row cap). Hand derivation:
**   the 26 tables hold 187,767,399 rows x 128 = 24,034,227,072 weights;
**   bottom 13-512-256-128: 13*512+512 + 512*256+256 + 256*128+128 = 171,392;
**   interaction: 27 vectors -> 27*26/2 = 351 dots, + 128 = 479 top inputs;
**   top 479-1024-1024-512-256-1: 479*1024+1024 + 1024*1024+1024 +
**     1024*512+512 + 512*256+256 + 256*1+1 = 2,197,505;
**   total 24,036,595,969. */
Test(families, dlrm_mlperf_parameter_count) {
  wl_train t = train_with(4, GDT_F32);
  fam_run r = run_file(wl_dlrm, "workloads/examples/dlrm.json", &t);
  assert_built(&r);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 24036595969LL);
  int64_t top0[] = {479, 1024};
  assert_dims(r.g, op_named(r.g, "top.0.w"), 2, top0);
  /* the interaction: one batched dot [4, 27, 128] x [4, 27, 128] -> [4, 27, 27] */
  int z = op_named(r.g, "interaction/dot");
  int64_t zd[] = {4, 27, 27};
  assert_dims(r.g, z, 3, zd);
  cr_assert_float_eq(graph_op_cost(r.g, z).flops[GDT_F32], 2.0 * 4 * 27 * 27 * 128, 0.5);
  cr_assert_eq(count_kind(r.g, GOP_GATHER), 26 + 1); /* the lookups and the triangle */
  cr_assert_eq(r.info.per_step, 4);
  fam_free(&r);
}

Test(families, dlrm_pooled_lookups_and_cat) {
  const char *text = "{\"dense_features\": 4, \"tables\": [{\"rows\": 100, \"dim\": 8},"
                     " {\"rows\": 50, \"dim\": 8}], \"bottom_mlp\": [16, 8], \"top_mlp\": [1],"
                     " \"lookups_per_table\": 3, \"interaction\": \"cat\"}";
  wl_train t = train_with(2, GDT_F32);
  fam_run r = run_text(wl_dlrm, text, &t);
  assert_built(&r);
  /* the top layer sees 8 + 8 + 8 features */
  int64_t top[] = {24, 1};
  assert_dims(r.g, op_named(r.g, "top.0.w"), 2, top);
  int64_t idx[] = {2, 3};
  assert_dims(r.g, op_named(r.g, "sparse.1"), 2, idx);
  fam_free(&r);
}

/* ---- gbdt ---- */

static const char TINY_GBDT[] =
    "{\"rows\": 1000, \"features\": 10, \"trees\": 5, \"depth\": 2, \"bins\": 16}";

/* Hand-derived, f32, rows 1000, features 10, bins 16, depth 2:
**   root histogram: scatter-add of [1000, 10, 2] pairs: 20,000 adds; reads
**     2 x 80,000 B (read-modify-write) + 40,000 B of s32 indices = 200,000 B,
**     writes 80,000 B
**   level 1: only the smaller child, 500 rows: 10,000 adds, 100,000 B read,
**     40,000 B written; the sibling is parent - child: [1, 10, 16, 2] = 320
**   leaves: [1000, 2] pairs into 4 leaves: 2,000 adds
**   prefix sums: [1,10,16,2] -> 1*10*15*2 = 300 adds, [2,10,16,2] -> 600 */
Test(families, gbdt_histograms_hand_derived) {
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_gbdt, TINY_GBDT, &t);
  assert_built(&r);
  cr_assert(r.info.whole_step);
  cr_assert_eq(r.info.per_step, 1000);
  cr_assert_str_eq(r.info.unit, "rows");
  int h0 = op_named(r.g, "level0/histogram/scatter");
  int h1 = op_named(r.g, "level1/histogram/scatter");
  cr_assert_geq(h0, 0);
  cr_assert_geq(h1, 0);
  graph_cost c0 = graph_op_cost(r.g, h0), c1 = graph_op_cost(r.g, h1);
  cr_assert_float_eq(c0.flops[GDT_F32], 20000.0, 0.5);
  cr_assert_float_eq(c0.bytes_read, 200000.0, 0.5);
  cr_assert_float_eq(c0.bytes_written, 80000.0, 0.5);
  cr_assert_float_eq(c1.flops[GDT_F32], 10000.0, 0.5);
  cr_assert_float_eq(c1.bytes_read, 100000.0, 0.5);
  cr_assert_float_eq(c1.bytes_written, 40000.0, 0.5);
  int sub = op_named(r.g, "level1/histogram/subtract");
  cr_assert_float_eq(graph_op_cost(r.g, sub).flops[GDT_F32], 320.0, 0.5);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_SCATTER), 20000.0 + 10000.0 + 2000.0, 0.5);
  int p0 = op_named(r.g, "level0/split/prefix-sum"), p1 = op_named(r.g, "level1/split/prefix-sum");
  cr_assert_float_eq(graph_op_cost(r.g, p0).flops[GDT_F32], 300.0, 0.5);
  cr_assert_float_eq(graph_op_cost(r.g, p1).flops[GDT_F32], 600.0, 0.5);
  int64_t hist1[] = {2, 10, 16, 2};
  assert_dims(r.g, op_named(r.g, "level1/histogram/concatenate"), 4, hist1);
  /* no 16-bit arithmetic: bf16 training precision does not apply to trees */
  graph_cost all = graph_total_cost(r.g, -1);
  cr_assert_eq(all.flops[GDT_BF16], 0);
  fam_free(&r);
}

/* One subtraction kernel per sibling, as XGBoost's gpu_hist launches them
** (dmlc/xgboost updater_gpu_hist.cu, BuildHistLeftRight: SubtractionTrick
** per node): at depth 4, level d >= 1 has 2^(d-1) siblings, so a tree
** launches 1 + 2 + 4 = 7, each over one node's [1, 10, 16, 2] histogram
** (320 subtractions); the histogram builds stay one scatter a level. */
Test(families, gbdt_one_subtraction_kernel_per_node) {
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_gbdt,
                       "{\"rows\": 1000, \"features\": 10, \"trees\": 5, \"depth\": 4, \"bins\": 16}",
                       &t);
  assert_built(&r);
  static const int64_t siblings[] = {0, 1, 2, 4};
  int64_t subs = 0;
  for (int d = 1; d < 4; d++) {
    char name[64];
    snprintf(name, sizeof name, "level%d/histogram/subtract", d);
    int s = op_named(r.g, name);
    cr_assert_geq(s, 0, "%s", name);
    cr_assert_eq(graph_get(r.g, s)->count, siblings[d], "%s", name);
    cr_assert_float_eq(graph_op_cost(r.g, s).flops[GDT_F32], 320.0, 0.5, "%s", name);
    subs += graph_get(r.g, s)->count;
    snprintf(name, sizeof name, "level%d/histogram/scatter", d);
    cr_assert_eq(graph_get(r.g, op_named(r.g, name))->count, 1, "%s", name);
  }
  cr_assert_eq(subs, 7);
  fam_free(&r);
}

Test(families, gbdt_fp64_requires_fp64) {
  wl_train t = train_with(1, GDT_F64);
  fam_run r = run_text(wl_gbdt, TINY_GBDT, &t);
  assert_built(&r);
  cr_assert(r.info.requires & WL_REQ_FP64);
  graph_cost all = graph_total_cost(r.g, -1);
  cr_assert_eq(all.flops[GDT_F32], 0);
  cr_assert_gt(all.flops[GDT_F64], 32000);
  fam_free(&r);
}

Test(families, gbdt_example_builds) {
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_file(wl_gbdt, "workloads/examples/gbdt.json", &t);
  assert_built(&r);
  /* root: 10M rows x 100 features x 2 = 2e9 adds; 7 levels at half: 7e9 */
  double hist = 0;
  for (int d = 0; d < 8; d++) {
    char name[64];
    snprintf(name, sizeof name, "level%d/histogram/scatter", d);
    int id = op_named(r.g, name);
    cr_assert_geq(id, 0, "missing %s", name);
    hist += graph_op_cost(r.g, id).flops[GDT_F32];
  }
  cr_assert_float_eq(hist, 2e9 + 7 * 1e9, 1);
  cr_assert_eq(r.info.per_step, 1e7);
  fam_free(&r);
}

/* ---- graph (op list) ---- */

Test(families, oplist_example_shapes) {
  wl_train t = train_with(8, GDT_BF16);
  fam_run r = run_file(wl_oplist, "workloads/examples/graph.json", &t);
  assert_built(&r);
  int64_t h[] = {8, 4096}, y[] = {8, 1024};
  assert_dims(r.g, op_named(r.g, "h/dot"), 2, h);
  assert_dims(r.g, op_named(r.g, "y/dot"), 2, y);
  cr_assert_eq(graph_get(r.g, r.loss)->out.dtype, GDT_BF16);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 2 * 1024 * 4096);
  cr_assert_float_eq(flops_of_kind(r.g, GOP_DOT), 2 * (2.0 * 8 * 1024 * 4096), 1);
  fam_free(&r);
}

Test(families, oplist_convolution_by_dim_labels_and_fields) {
  const char *text =
      "{\"ops\": [\n"
      " {\"name\": \"img\", \"op\": \"parameter\", \"shape\": \"f32[1,224,224,3]\"},\n"
      " {\"name\": \"k\", \"op\": \"parameter\", \"shape\": \"f32[7,7,3,64]\", \"role\": "
      "\"weight\"},\n"
      " {\"name\": \"c\", \"op\": \"convolution\", \"inputs\": [\"img\", \"k\"],"
      "  \"dim_labels\": \"b01f_01io->b01f\", \"window_strides\": [2, 2],"
      "  \"padding\": [[3, 3], [3, 3]]},\n"
      " {\"name\": \"c2\", \"op\": \"convolution\", \"inputs\": [\"img\", \"k\"],"
      "  \"input_batch_dimension\": 0, \"input_feature_dimension\": 3,"
      "  \"input_spatial_dimensions\": [1, 2], \"kernel_input_feature_dimension\": 2,"
      "  \"kernel_output_feature_dimension\": 3, \"kernel_spatial_dimensions\": [0, 1],"
      "  \"output_batch_dimension\": 0, \"output_feature_dimension\": 3,"
      "  \"output_spatial_dimensions\": [1, 2], \"window_strides\": [2, 2],"
      "  \"padding\": [[3, 3], [3, 3]]},\n"
      " {\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"c\", \"c2\"]},\n"
      " {\"name\": \"l\", \"op\": \"reduce\", \"inputs\": [\"s\"], \"dimensions\": [0, 1, 2, 3]}\n"
      "], \"loss\": \"l\"}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  assert_built(&r);
  int64_t out[] = {1, 112, 112, 64};
  assert_dims(r.g, op_named(r.g, "c/convolution"), 4, out);
  assert_dims(r.g, op_named(r.g, "c2/convolution"), 4, out);
  /* ResNet-50 conv1: 236,027,904 FLOPs each */
  cr_assert_float_eq(flops_of_kind(r.g, GOP_CONV), 2 * 236027904.0, 1);
  fam_free(&r);
}

Test(families, oplist_data_movement_and_collectives) {
  const char *text =
      "{\"ops\": [\n"
      " {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"bf16[4,6]\"},\n"
      " {\"name\": \"t\", \"op\": \"transpose\", \"inputs\": [\"x\"], \"dimensions\": [1, 0]},\n"
      " {\"name\": \"b\", \"op\": \"broadcast\", \"inputs\": [\"t\"], \"shape\": "
      "\"bf16[2,6,4]\"},\n"
      " {\"name\": \"rs\", \"op\": \"reshape\", \"inputs\": [\"b\"], \"shape\": \"bf16[12,4]\"},\n"
      " {\"name\": \"sl\", \"op\": \"slice\", \"inputs\": [\"rs\"], \"start_indices\": [0, 0],"
      "  \"limit_indices\": [12, 4], \"strides\": [2, 1]},\n"
      " {\"name\": \"cat\", \"op\": \"concatenate\", \"inputs\": [\"sl\", \"sl\"], \"dimension\": "
      "0},\n"
      " {\"name\": \"ag\", \"op\": \"all-gather\", \"inputs\": [\"cat\"], \"group_size\": 4,"
      "  \"dimension\": 1},\n"
      " {\"name\": \"ar\", \"op\": \"all-reduce\", \"inputs\": [\"ag\"], \"group_size\": 8},\n"
      " {\"name\": \"ids\", \"op\": \"parameter\", \"shape\": \"s32[3]\"},\n"
      " {\"name\": \"g\", \"op\": \"gather\", \"inputs\": [\"ar\", \"ids\"]},\n"
      " {\"name\": \"f\", \"op\": \"convert\", \"inputs\": [\"g\"], \"dtype\": \"f32\"},\n"
      " {\"name\": \"l\", \"op\": \"reduce\", \"inputs\": [\"f\"], \"dimensions\": [0, 1],"
      "  \"reducer\": \"maximum\"}\n"
      "], \"loss\": \"l\"}";
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_oplist, text, &t);
  assert_built(&r);
  int64_t b[] = {2, 6, 4}, sl[] = {6, 4}, cat[] = {12, 4}, ag[] = {12, 16}, gth[] = {3, 16};
  assert_dims(r.g, op_named(r.g, "b/broadcast"), 3, b);
  assert_dims(r.g, op_named(r.g, "sl/slice"), 2, sl);
  assert_dims(r.g, op_named(r.g, "cat/concatenate"), 2, cat);
  assert_dims(r.g, op_named(r.g, "ag/all-gather"), 2, ag);
  assert_dims(r.g, op_named(r.g, "g/gather"), 2, gth);
  cr_assert_eq(graph_get(r.g, op_named(r.g, "ar/all-reduce"))->group_size, 8);
  cr_assert_eq(graph_get(r.g, r.loss)->out.dtype, GDT_F32);
  fam_free(&r);
}

/* ---- bad inputs: message and place ---- */

Test(families, unknown_field_suggests_the_right_one) {
  const char *text = "{\"family\": \"cnn\", \"preset\": \"resnet50\",\n \"clases\": 10}";
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_cnn, text, &t);
  char want[256];
  snprintf(want, sizeof want, "%sclases: unknown field (did you mean 'classes'?)",
           at(text, "\"clases\""));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, negative_channels_are_rejected_where_written) {
  const char *text = "{\"layers\": [\n"
                     "  {\"type\": \"conv\", \"kernel\": 3, \"out_channels\": -64}]}";
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_cnn, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%slayers[0].out_channels: expected an integer in [1, 1048576], got -64",
           at(text, "-64"));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, unknown_preset_lists_the_presets) {
  const char *text = "{\"preset\": \"resnet51\"}";
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_cnn, text, &t);
  char want[256];
  snprintf(want, sizeof want, "%spreset: expected one of resnet50, mobilenet_v2, got \"resnet51\"",
           at(text, "\"resnet51\""));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, cnn_unknown_layer_name_and_bad_logits) {
  const char *text = "{\"image\": [8, 8, 3], \"layers\": [\n"
                     "  {\"type\": \"relu\", \"name\": \"stem\"},\n"
                     "  {\"type\": \"add\", \"with\": \"sten\"}]}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_cnn, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%slayers[1].with: no earlier layer is named 'sten' (did you mean 'stem'?)",
           at(text, "\"sten\""));
  assert_error(&r, want);
  fam_free(&r);

  const char *nohead = "{\"image\": [8, 8, 3], \"layers\": [{\"type\": \"relu\"}]}";
  r = run_text(wl_cnn, nohead, &t);
  cr_assert_lt(r.loss, 0);
  cr_assert(strstr(diag_message(r.dg, 0), "layers: the last layer gives f32[1,8,8,3]; it must "
                                          "give the [batch, 1000] logits"),
            "%s", diag_message(r.dg, 0));
  fam_free(&r);
}

/* A shape error inside a layer list points at the layer. */
Test(families, cnn_channel_mismatch_names_the_layer) {
  const char *text =
      "{\"image\": [8, 8, 3], \"layers\": [\n"
      "  {\"type\": \"conv\", \"kernel\": 1, \"out_channels\": 4, \"name\": \"a\"},\n"
      "  {\"type\": \"add\", \"input\": \"image\", \"with\": \"a\"}]}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_cnn, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%slayers[1]: add: operand shapes differ: f32[1,8,8,3] vs "
           "f32[1,8,8,4]",
           at(text, "{\"type\": \"add\""));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, mlp_rejects_bad_widths) {
  const char *text = "{\"inputs\": 4, \"hidden\": [8, 0], \"outputs\": 2}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_mlp, text, &t);
  char want[256];
  snprintf(want, sizeof want, "%shidden[1]: expected an integer in [1, 16777216], got 0",
           at(text, "0]"));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, dlrm_checks_dims_and_the_top_mlp) {
  const char *text = "{\"dense_features\": 13, \"table_rows\": [10, 20], \"embedding_dim\": 64,\n"
                     " \"bottom_mlp\": [128], \"top_mlp\": [16, 2]}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_dlrm, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%stop_mlp[1]: the top MLP ends in the click logit: its last width must be 1, got 2",
           at(text, "2]}"));
  assert_error(&r, want);
  cr_assert_eq(diag_count(r.dg), 2);
  snprintf(want, sizeof want,
           "%sembedding_dim: embedding dim 64 differs from the bottom MLP's output 128; the dot "
           "interaction needs them equal",
           at(text, "64"));
  cr_assert_str_eq(diag_message(r.dg, 1), want);
  fam_free(&r);
}

Test(families, gbdt_rejects_absurd_depth) {
  const char *text = "{\"rows\": 10, \"features\": 2, \"trees\": 1, \"depth\": 40}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_gbdt, text, &t);
  char want[256];
  snprintf(want, sizeof want, "%sdepth: expected an integer in [1, 16], got 40", at(text, "40"));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, oplist_unknown_op_kind) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"f32[2]\"},\n"
                     "  {\"name\": \"y\", \"op\": \"multiplly\", \"inputs\": [\"x\", \"x\"]}],\n"
                     " \"loss\": \"y\"}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%sops[1].op: unknown op kind \"multiplly\" (did you mean \"multiply\"?)",
           at(text, "\"multiplly\""));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, oplist_cycle_names_its_ops) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"f32[2]\"},\n"
                     "  {\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\", \"c\"]},\n"
                     "  {\"name\": \"b\", \"op\": \"negate\", \"inputs\": [\"a\"]},\n"
                     "  {\"name\": \"c\", \"op\": \"exponential\", \"inputs\": [\"b\"]}],\n"
                     " \"loss\": \"a\"}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%sops[1].inputs: the ops form a cycle: 'a' -> 'c' -> 'b' -> 'a' (each takes the "
           "next as an input)",
           at(text, "[\"x\", \"c\"]"));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, oplist_shape_mismatch_names_the_op) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"bf16[8,1024]\"},\n"
                     "  {\"name\": \"w\", \"op\": \"parameter\", \"shape\": \"bf16[512,10]\"},\n"
                     "  {\"name\": \"y\", \"op\": \"dot\", \"inputs\": [\"x\", \"w\"],\n"
                     "   \"lhs_contracting_dims\": [1], \"rhs_contracting_dims\": [0]}],\n"
                     " \"loss\": \"y\"}";
  wl_train t = train_with(1, GDT_BF16);
  fam_run r = run_text(wl_oplist, text, &t);
  cr_assert_lt(r.loss, 0);
  char head[128];
  snprintf(head, sizeof head, "%sops[2]: y/dot: ", at(text, "{\"name\": \"y\""));
  const char *m = diag_message(r.dg, 0);
  cr_assert_eq(strncmp(m, head, strlen(head)), 0, "%s", m);
  cr_assert(strstr(m, "bf16[8,1024] vs bf16[512,10]"), "%s", m);
  fam_free(&r);
}

Test(families, oplist_unknown_input_and_non_scalar_loss) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"logits\", \"op\": \"parameter\", \"shape\": \"f32[2,3]\"},\n"
                     "  {\"name\": \"e\", \"op\": \"exponential\", \"inputs\": [\"logit\"]}],\n"
                     " \"loss\": \"e\"}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  char want[256];
  snprintf(want, sizeof want,
           "%sops[1].inputs[0]: input 'logit' is not the name of any op (did you mean "
           "'logits'?)",
           at(text, "\"logit\"]"));
  assert_error(&r, want);
  fam_free(&r);

  const char *vec = "{\"ops\": [{\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"f32[2,3]\"}],"
                    " \"loss\": \"x\"}";
  r = run_text(wl_oplist, vec, &t);
  snprintf(want, sizeof want, "%sloss: the loss must be a floating-point scalar; 'x' is f32[2,3]",
           at(vec, "\"x\"}"));
  assert_error(&r, want);
  fam_free(&r);
}

Test(families, oplist_bad_shape_and_arity) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"f32[2,-3]\"},\n"
                     "  {\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"x\"]}],\n"
                     " \"loss\": \"y\"}";
  wl_train t = train_with(1, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  char want[256];
  /* inputs are checked before the ops are built */
  snprintf(want, sizeof want, "%sops[1].inputs: add takes 2 inputs, got 1", at(text, "[\"x\"]"));
  assert_error(&r, want);
  fam_free(&r);

  const char *shape = "{\"ops\": [{\"name\": \"x\", \"op\": \"parameter\", \"shape\": "
                      "\"f32[2,-3]\"}], \"loss\": \"x\"}";
  r = run_text(wl_oplist, shape, &t);
  snprintf(want, sizeof want,
           "%sops[0].shape: expected a shape such as \"bf16[8,1024]\" (dtype, then dimensions), "
           "got \"f32[2,-3]\"",
           at(shape, "\"f32[2,-3]\""));
  assert_error(&r, want);
  fam_free(&r);
}

/* A bf16 weight in a model trained in fp32 (train.precision fp32, or
** --precision fp32 on a bf16 op list) has no master copy to take its fp32
** Adam update: refused at the weight's shape, where it used to fail later
** as an internal "opt/add: operand shapes differ", printed twice. An fp32
** weight in a bf16 model (a norm's scale kept wide) still builds. */
Test(families, oplist_weight_narrower_than_the_training_precision) {
  const char *text = "{\"ops\": [\n"
                     "  {\"name\": \"x\", \"op\": \"parameter\", \"shape\": \"f32[2,4]\", \"role\": \"input\"},\n"
                     "  {\"name\": \"w\", \"op\": \"parameter\", \"shape\": \"bf16[4,4]\", \"role\": \"weight\"},\n"
                     "  {\"name\": \"c\", \"op\": \"convert\", \"inputs\": [\"w\"], \"dtype\": \"f32\"},\n"
                     "  {\"name\": \"y\", \"op\": \"dot\", \"inputs\": [\"x\", \"c\"], \"lhs_contracting_dims\": [1], \"rhs_contracting_dims\": [0]},\n"
                     "  {\"name\": \"l\", \"op\": \"reduce\", \"inputs\": [\"y\"], \"dimensions\": [0, 1], \"reducer\": \"add\"}],\n"
                     " \"loss\": \"l\"}";
  wl_train t = train_with(2, GDT_F32);
  fam_run r = run_text(wl_oplist, text, &t);
  char want[512];
  snprintf(want, sizeof want,
           "%sops[1].shape: weight 'w' is bf16[4,4], but the model trains in fp32 (train.precision, "
           "or --precision) with no master copy to update it in; an op list's shapes fix its "
           "dtypes (nearest: train in bf16, or write the weight in f32)",
           at(text, "\"bf16[4,4]\""));
  assert_error(&r, want);
  fam_free(&r);
  /* the same weight under bf16 training: an fp32 master copy takes the update */
  t = train_with(2, GDT_BF16);
  r = run_text(wl_oplist, text, &t);
  assert_built(&r);
  fam_free(&r);
}

/* Every example of these families builds under LoRA too (frozen weights,
** only the dense/fc adapters train). */
Test(families, examples_build_under_lora) {
  wl_train t = train_with(2, GDT_BF16);
  t.method = WL_LORA;
  t.lora_rank = 8;
  t.lora_alpha = 16;
  t.n_targets = 1;
  strcpy(t.targets[0], "fc");
  fam_run r = run_file(wl_cnn, "workloads/examples/resnet50.json", &t);
  assert_built(&r);
  /* only the fc adapters train: 2048*8 + 8*1000 */
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT | GRAPH_TRAINABLE), 2048 * 8 + 8 * 1000);
  cr_assert_eq(graph_param_elements(r.g, GRAPH_WEIGHT), 25557032 + 2048 * 8 + 8 * 1000);
  fam_free(&r);
}
