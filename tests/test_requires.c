/*
** test_requires.c -- which chips may run a model at all (#18): what the
** model requires against what the chip has (plan_hw_supports, the one rule
** for simulate and plan), fp64 training end to end, and the f32 matmul
** rate of a TPU.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/optime.h"
#include "../sim/plan.h"
#include "../workloads/model.h"
#include "helpers.h"

static int supports(const char *model_src, const char *hw, char *why, size_t n) {
  hw_catalog *c = th_catalog();
  model *m = th_model(model_src, 0);
  int rc = plan_hw_supports(m, th_hw(c, hw), why, n);
  model_free(m);
  hw_catalog_free(c);
  return rc;
}

/* XGBoost, LightGBM and CatBoost have CPU and CUDA back ends only (their
** GPU docs); no TPU back end exists. */
Test(requires, trees_run_on_cpus_and_nvidia_gpus_only) {
  char why[256];
  cr_assert_eq(supports("gbdt", "cpu-genoa", why, sizeof why), 0, "%s", why);
  cr_assert_eq(supports("gbdt", "h100-sxm", why, sizeof why), 0, "%s", why);
  cr_assert_eq(supports("gbdt", "tpu-v5e", why, sizeof why), -1);
  cr_assert(strstr(why, "tree-boosting libraries") && strstr(why, "CPUs and NVIDIA GPUs"), "%s", why);
}

/* TPUs have no fp64 unit (Cloud TPU docs list none); A100 has 19.5
** TFLOP/s of fp64 tensor cores. */
Test(requires, fp64_needs_an_fp64_unit) {
  char why[256];
  cr_assert_eq(supports("tests/data/models/needs-fp64.json", "a100-80g", why, sizeof why), 0, "%s", why);
  cr_assert_eq(supports("tests/data/models/needs-fp64.json", "tpu-v5p", why, sizeof why), -1);
  cr_assert(strstr(why, "tpu-v5p has no fp64 unit"), "%s", why);
}

/* plan_check refuses the plan with the same words, before any other rule:
** simulate cannot run a model on a chip that cannot run it. */
Test(requires, plan_check_applies_it_first) {
  hw_catalog *c = th_catalog();
  model *m = th_model("gbdt", 0);
  plan p = {.chips = 1, .dp = 1, .tp = 1, .pp = 1, .ep = 1, .mbs = 0};
  plan_fault f;
  char err[256];
  cr_assert_eq(plan_check_fault(m, th_hw(c, "tpu-v4"), &p, &f, err, sizeof err), -1);
  cr_assert_eq(f, PLAN_FAULT_REQUIRES);
  cr_assert(strstr(err, "tree-boosting"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* An fp64 model with Adam: weights, gradients and both moments in f64, so
** the optimizer state is twice the weights' bytes (PyTorch keeps Adam's
** exp_avg and exp_avg_sq in the parameter's dtype). The MNIST MLP
** 784-512-512-10 has 784*512+512 + 512*512+512 + 512*10+10 = 669,706
** parameters: 5,357,648 bytes in f64. */
Test(requires, fp64_adam_builds_with_f64_moments) {
  const char *src = th_write_temp("mlp64.json",
      "{\"name\": \"mlp64\", \"family\": \"mlp\", \"inputs\": 784, \"hidden\": [512, 512],"
      " \"outputs\": 10, \"activation\": \"relu\", \"loss\": \"cross_entropy\","
      " \"train\": {\"global_batch\": 128, \"precision\": \"fp64\", \"optimizer\": \"adam\"}}");
  model *m = th_model(src, 0);
  cr_assert_eq(m->params, 669706);
  int64_t f64_state = 0, other_state = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind != GOP_PARAMETER || !(op->flags & GRAPH_OPT_STATE)) continue;
    int64_t n = graph_elements(&op->out);
    if (op->out.dtype == GDT_F64) f64_state += n;
    else other_state += n;
  }
  cr_assert_eq(f64_state, 2 * 669706LL, "Adam's two moments of every weight, in f64");
  cr_assert_eq(other_state, 0);
  cr_assert(m->info.requires & WL_REQ_FP64);
  model_free(m);
}

/* An f32-accurate matmul on a TPU is six bf16 passes on the MXU (XLA's
** ALG_DOT_BF16_BF16_F32_X6): v5e's 197 TFLOP/s bf16 gives 32.83 f32. */
Test(requires, tpu_f32_matmul_is_six_bf16_passes) {
  hw_catalog *c = th_catalog();
  const hw_model *hw = th_hw(c, "tpu-v5e");
  cr_assert_float_eq(hw_peak_flops(hw, HW_FP32), 1.97e14 / 6, 1e11);
  cr_assert_float_eq(optime_peak_flops(hw, GDT_F32), 1.97e14 / 6, 1e11);
  hw_catalog_free(c);
}

/* ---- embedding tables: where they live (#18; sim/embed.h) ---- */

#include "../sim/embed.h"
#include "../sim/step.h"

/* The MLPerf DLRM (workloads/examples/dlrm.json): 26 tables of 187,767,399
** rows in all (the sum of its table_rows) x 128 = 24,034,227,072 fp32
** parameters, 96,136,908,288 bytes. */
#define DLRM_TABLE_PARAMS 24034227072.0

static int dlrm_step(const char *hw_name, int64_t chips, plan_embeddings e, step_result *r,
                     char *err, size_t n) {
  hw_catalog *c = th_catalog();
  model *m = th_model("workloads/examples/dlrm.json", 0);
  plan p = {.chips = chips, .tp = 1, .pp = 1, .ep = 1, .vp = 1, .slices = 1,
            .schedule = PLAN_1F1B, .precision = GDT_F32, .embeddings = e};
  const hw_model *hw = th_hw(c, hw_name);
  int rc = plan_check(m, hw, &p, err, n);
  if (rc == 0) rc = step_simulate(m, hw, &p, NULL, r, NULL, err, n);
  model_free(m);
  hw_catalog_free(c);
  return rc;
}

/* The tables are read off the graph: every weight a gather reads. At the
** global batch of 65,536 one lookup per table: 65,536 x 26 x 128 x 4 B of
** rows and 65,536 x 26 int32 indices. */
Test(embeddings, tables_read_off_the_graph) {
  model *m = th_model("workloads/examples/dlrm.json", 0);
  plan_emb_tables t;
  plan_embedding_tables(m->g, &t);
  cr_assert_eq(t.tables, 26);
  cr_assert_float_eq(t.bytes, DLRM_TABLE_PARAMS * 4, 1);
  cr_assert_float_eq(t.largest, 39979771.0 * 128 * 4, 1, "the 39,979,771-row table");
  cr_assert_float_eq(t.rows_bytes, 65536.0 * 26 * 128 * 4, 1);
  cr_assert_float_eq(t.pooled_bytes, t.rows_bytes, 1, "one lookup a table: nothing to pool");
  cr_assert_float_eq(t.index_bytes, 65536.0 * 26 * 4, 1);
  model_free(m);
}

/* Replicated, every H100 holds the 96 GB of tables and as much again of
** dense gradient: no fit in 80 GiB, and the fixes offer the placements.
** Sharded row-wise over 8 chips, a chip holds 1/8 of the tables
** (12,017,113,536 B) plus the dense layers, and only its looked-up rows'
** gradients (8,192 samples x 26 x 128 x 4 B). */
Test(embeddings, sharding_fits_a_24g_dlrm_where_replicas_do_not) {
  char err[512];
  step_result r;
  cr_assert_eq(dlrm_step("h100-sxm", 8, PLAN_EMB_REPLICATED, &r, err, sizeof err), 0, "%s", err);
  cr_assert(!r.fits);
  cr_assert_geq(r.memory.weights, DLRM_TABLE_PARAMS * 4);
  bool offered = false;
  for (int i = 0; i < r.n_fixes; i++)
    offered |= r.fixes[i].p.embeddings == PLAN_EMB_SHARDED && r.fixes[i].fits;
  cr_assert(offered, "a fix shards the tables");
  double dense_params = 0;
  {
    model *m = th_model("workloads/examples/dlrm.json", 0);
    dense_params = (double)m->params - DLRM_TABLE_PARAMS;
    model_free(m);
  }
  cr_assert_eq(dlrm_step("h100-sxm", 8, PLAN_EMB_SHARDED, &r, err, sizeof err), 0, "%s", err);
  cr_assert(r.fits);
  cr_assert_float_eq(r.memory.weights, (dense_params + DLRM_TABLE_PARAMS / 8) * 4, 1e3);
  cr_assert_float_eq(r.memory.gradients, dense_params * 4 + 8192.0 * 26 * 128 * 4, 1e3);
  cr_assert_gt(r.emb_exchange_s, 0, "the pooled all-to-all is priced");
}

/* TPUEmbedding on SparseCores (v5p: four a chip, Cloud TPU architecture
** docs) runs the exchange beside the TensorCores: none of it is exposed
** while it is shorter than the dense compute. v5e has no SparseCores
** (Cloud TPU v6e docs, v5e column): the same exchange is in series. */
Test(embeddings, sparsecores_hide_the_exchange) {
  char err[512];
  step_result a, b;
  cr_assert_eq(dlrm_step("tpu-v5p", 8, PLAN_EMB_SHARDED, &a, err, sizeof err), 0, "%s", err);
  cr_assert_gt(a.emb_exchange_s, 0);
  cr_assert_lt(a.emb_exchange_s, a.breakdown_s.compute);
  cr_assert_float_eq(a.breakdown_s.exposed_comm - a.exposed_dp_s, 0, 1e-12);
  cr_assert_eq(dlrm_step("tpu-v5e", 8, PLAN_EMB_SHARDED, &b, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(b.breakdown_s.exposed_comm - b.exposed_dp_s, b.emb_exchange_s, 1e-12);
}

/* Parameter-server hosts (n2-highmem-32: 256 GB, 4e9 B/s): enough DRAM
** for the tables, and enough NIC to match the workers'. 96 GB of tables fit
** one host's DRAM, but one H100's 5e10 B/s needs ceil(5e10 / 4e9) = 13
** hosts' NICs; 600 GB on one slow worker needs ceil(600/256) = 3. */
Test(embeddings, parameter_server_hosts) {
  cr_assert_eq(emb_ps_hosts(96e9, 1, 5e10), 13);
  cr_assert_eq(emb_ps_hosts(600e9, 1, 1e9), 3);
  char err[512];
  step_result r;
  cr_assert_eq(dlrm_step("h100-sxm", 1, PLAN_EMB_PS, &r, err, sizeof err), 0, "%s", err);
  cr_assert(r.fits, "one H100 keeps only the dense layers");
  cr_assert_eq(r.ps_hosts, 13);
  cr_assert_float_eq(r.host_usd_per_hour, 13 * EMB_PS_HOST_USD_PER_H, 1e-9);
}

/* The validator: a parameter server feeds CPU or GPU workers, not a TPU
** (nearest: sharded); a model without tables has nothing to place. */
Test(embeddings, plan_check_rules) {
  char err[512];
  step_result r;
  cr_assert_eq(dlrm_step("tpu-v5p", 8, PLAN_EMB_PS, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "nearest: --embeddings sharded") && strstr(err, "SparseCores"), "%s", err);
  hw_catalog *c = th_catalog();
  model *m = th_model("workloads/examples/resnet50.json", 0);
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 1, .embeddings = PLAN_EMB_SHARDED};
  plan_fault f;
  cr_assert_eq(plan_check_fault(m, th_hw(c, "a100-80g"), &p, &f, err, sizeof err), -1);
  cr_assert_eq(f, PLAN_FAULT_FAMILY);
  cr_assert(strstr(err, "has none a gather reads"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* ---- TF32 (#18) ---- */

/* --precision tf32 computes in fp32 with the GEMMs on the TF32 unit. */
Test(tf32, parses_as_an_fp32_recipe) {
  plan p = {0};
  cr_assert_eq(plan_precision_parse("tf32", &p), 0);
  cr_assert_eq(p.precision, GDT_F32);
  cr_assert_eq(p.gemm, PLAN_GEMM_TF32);
  cr_assert_str_eq(plan_precision_label(&p), "tf32");
}

static double mlp_step(const char *hw_name, const char *prec, char *err, size_t n) {
  /* 8192-wide layers at 8192 samples: matmul-bound */
  const char *src = th_write_temp("mlp-wide.json",
      "{\"name\": \"mlp-wide\", \"family\": \"mlp\", \"inputs\": 8192, \"hidden\": [8192, 8192],"
      " \"outputs\": 8192, \"activation\": \"relu\", \"loss\": \"mse\","
      " \"train\": {\"global_batch\": 8192, \"precision\": \"fp32\", \"optimizer\": \"sgd\"}}");
  hw_catalog *c = th_catalog();
  model *m = th_model(src, 0);
  plan p = {.chips = 1, .tp = 1, .pp = 1, .ep = 1, .vp = 1, .slices = 1, .schedule = PLAN_1F1B};
  plan_precision_parse(prec, &p);
  step_result r;
  double t = -1;
  const hw_model *hw = th_hw(c, hw_name);
  if (plan_check(m, hw, &p, err, n) == 0 && step_simulate(m, hw, &p, NULL, &r, NULL, err, n) == 0)
    t = r.breakdown_s.compute;
  model_free(m);
  hw_catalog_free(c);
  return t;
}

/* A100: 19.5 TFLOP/s fp32 against 156 TFLOP/s TF32 dense (A100
** datasheet; the a100-80g entry): an fp32 MLP of 8192-wide layers, whose
** step is its matmuls, runs close to 8x faster on TF32 -- more than 4x,
** at most 8x (the elementwise ops do not speed up). */
Test(tf32, matmuls_run_at_the_tf32_rate) {
  char err[512];
  double f32 = mlp_step("a100-80g", "fp32", err, sizeof err);
  cr_assert_gt(f32, 0, "%s", err);
  double tf = mlp_step("a100-80g", "tf32", err, sizeof err);
  cr_assert_gt(tf, 0, "%s", err);
  cr_assert_gt(f32 / tf, 4, "fp32 %g s, tf32 %g s", f32, tf);
  cr_assert_leq(f32 / tf, 156.0 / 19.5 * 1.0001, "fp32 %g s, tf32 %g s", f32, tf);
  /* V100 has no TF32 unit (Volta): refused, nearest strict fp32 */
  cr_assert_lt(mlp_step("v100", "tf32", err, sizeof err), 0);
  cr_assert(strstr(err, "nearest: --precision fp32"), "%s", err);
}

/* PyTorch's defaults: cuDNN convolutions in TF32
** (torch.backends.cudnn.allow_tf32 = True), matmuls in strict fp32
** (torch.backends.cuda.matmul.allow_tf32 = False since 1.12). An fp32 CNN
** on an A100 gets TF32; an fp32 MLP does not; a chip without TF32 (V100, a
** TPU) keeps fp32. */
Test(tf32, pytorch_defaults) {
  hw_catalog *c = th_catalog();
  size_t len;
  char *orig = th_slurp("workloads/examples/resnet50.json", &len);
  char *cnn_text = th_replace(orig, "\"bf16\"", "\"fp32\"");
  free(orig);
  model *cnn = th_model(th_write_temp("resnet50-fp32.json", cnn_text), 0);
  model *mlp = th_model("mlp", 0);
  plan p = {.precision = GDT_F32};
  cr_assert(plan_default_tf32(cnn, th_hw(c, "a100-80g"), &p));
  cr_assert_eq(p.gemm, PLAN_GEMM_TF32);
  p = (plan){.precision = GDT_F32};
  cr_assert(!plan_default_tf32(mlp, th_hw(c, "a100-80g"), &p));
  cr_assert(!plan_default_tf32(cnn, th_hw(c, "v100"), &p));
  cr_assert(!plan_default_tf32(cnn, th_hw(c, "tpu-v5p"), &p));
  cr_assert_eq(p.gemm, PLAN_GEMM_NATIVE);
  model_free(cnn);
  model_free(mlp);
  free(cnn_text);
  hw_catalog_free(c);
}
