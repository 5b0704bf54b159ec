/*
** test_requires.c -- which chips may run a model at all (#18): what the
** model requires against what the chip has (plan_hw_supports, the one rule
** for simulate and plan), fp64 training end to end, and the f32 matmul
** rate of a TPU.
*/
#include <criterion/criterion.h>
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
