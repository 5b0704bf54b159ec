/*
** test_memprep.c -- mem_prep (sim/memory.h): one plan's memory under many
** model states from one preparation, as the planner asks it, must be
** mem_transformer's to the bit -- the planner ranks and prunes by these
** figures, and its output must not depend on which path computed them.
** The expected values are mem_transformer's own for the same plan: the
** invariant is equality, over a grid of dense, uneven-split, interleaved,
** MoE, hybrid Mamba/MoE and windowed plans on a GPU and a TPU, every ZeRO
** stage, HSDP group, offload and recompute mode.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/framework.h"
#include "../sim/memory.h"
#include "helpers.h"

/* Every figure of a and b equal (bitwise for the doubles: == on non-NaN). */
static void same(const mem_bytes *a, const mem_bytes *b, const char *what) {
  const double x[] = {a->weights, a->gradients, a->optimizer, a->activations, a->temporary,
                      a->peak, a->capacity, a->params, a->expert_params, a->act_layer,
                      a->layer_mbs, a->weight_copies, a->runtime, a->comm, a->fragmentation,
                      a->host, a->weights_16bit_dropped};
  const double y[] = {b->weights, b->gradients, b->optimizer, b->activations, b->temporary,
                      b->peak, b->capacity, b->params, b->expert_params, b->act_layer,
                      b->layer_mbs, b->weight_copies, b->runtime, b->comm, b->fragmentation,
                      b->host, b->weights_16bit_dropped};
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
    cr_assert(x[i] == y[i], "%s: figure %zu: %.17g vs %.17g", what, i, x[i], y[i]);
  cr_assert_eq(a->fits, b->fits, "%s: fits", what);
  cr_assert_eq(a->lowp_params, b->lowp_params, "%s: fp8 parameters", what);
  cr_assert_eq(a->stage, b->stage, "%s: worst stage", what);
}

/* Plans of model `name` on hw: each (tp, pp, V, mbs, recompute) prepared
** once, then every state compared with mem_transformer, under framework
** profile fw (framework_names) and GEMM recipe gemm. Returns the plans
** compared. */
static int grid_fw(const char *name, const char *hw_name, int64_t chips, int64_t ep, int fw,
                   plan_gemm gemm) {
  hw_catalog *c = th_catalog();
  const hw_model *hw = th_hw(c, hw_name);
  diag *dg = diag_new();
  model *m = model_load(name, NULL, dg);
  cr_assert_not_null(m, "%s", name);
  const wl_tf_dims *d = &m->info.tf;
  mem_prep *mp = mem_prep_new();
  cr_assert_not_null(mp);
  int32_t split[64];
  int compared = 0;
  const int64_t tps[] = {1, 2, 8}, pps[] = {1, 2, 3, 4, 8}, vps[] = {1, 2, 3}, mbss[] = {1, 2};
  for (size_t a = 0; a < 3; a++)
    for (size_t b = 0; b < 5; b++)
      for (size_t v = 0; v < 3; v++)
        for (size_t u = 0; u < 2; u++)
          for (int rec = 0; rec < 3; rec++) {
            int64_t tp = tps[a], pp = pps[b], vp = vps[v];
            if (chips % (tp * pp) || (vp > 1 && pp == 1)) continue;
            plan p = {.chips = chips, .tp = tp, .pp = pp, .dp = chips / (tp * pp), .ep = ep,
                      .mbs = mbss[u], .gbs = m->train.global_batch, .seq = m->train.seq_len,
                      .vp = vp, .schedule = vp > 1 ? PLAN_INTERLEAVED : PLAN_1F1B,
                      .precision = GDT_BF16, .sp = tp > 1, .recompute = (plan_recompute)rec,
                      .attention = PLAN_ATTN_FLASH, .framework = fw, .gemm = gemm,
                      /* activation offload of every layer, or of the first of
                      ** each chunk (--offload activations:1) */
                      .offload_layers = (int64_t)u};
            /* an uneven split where the layers do not divide (the planner's) */
            if (d->layers % (pp * vp) && pp * vp <= 64) {
              plan_balance_layers(&p, d->layers, split, (int)(pp * vp));
              p.pp_layers = split;
              p.n_pp_layers = (int)(pp * vp);
            }
            mem_opts o;
            plan q;
            mem_setup(m, hw, &p, &o, &q);
            mem_prep_set(mp, d, &q, &o);
            for (int z = 0; z <= 3; z++)
              for (int64_t hs = 0; hs <= (z == 3 ? 2 : 0); hs += 2)
                for (int off = 0; off < 3; off++) {
                  mem_state s = {z, hs, (plan_offload)off};
                  plan r = q;
                  r.zero = z, r.hsdp = hs, r.offload = (plan_offload)off;
                  mem_bytes want, got;
                  char e1[256] = "", e2[256] = "";
                  int rc1 = mem_transformer(d, &r, &o, &want, e1, sizeof e1);
                  int rc2 = mem_prep_state(mp, &s, &got, e2, sizeof e2);
                  cr_assert_eq(rc1, rc2, "%s tp %lld pp %lld vp %lld: %s / %s", name,
                               (long long)tp, (long long)pp, (long long)vp, e1, e2);
                  if (rc1 != 0) {
                    cr_assert_str_eq(e1, e2);
                    continue;
                  }
                  char what[160];
                  snprintf(what, sizeof what, "%s on %s: tp %lld pp %lld vp %lld mbs %lld rec %d "
                           "zero %d hsdp %lld offload %d", name, hw_name, (long long)tp,
                           (long long)pp, (long long)vp, (long long)p.mbs, rec, z, (long long)hs,
                           off);
                  same(&want, &got, what);
                  /* the search's figures: the same, to the bit */
                  mem_peak pk;
                  cr_assert_eq(mem_prep_peak(mp, &s, &pk, e2, sizeof e2), 0, "%s", what);
                  cr_assert(pk.peak == want.peak && pk.weights == want.weights &&
                                pk.gradients == want.gradients &&
                                pk.optimizer == want.optimizer && pk.runtime == want.runtime &&
                                pk.comm == want.comm && pk.capacity == want.capacity &&
                                pk.fits == want.fits,
                            "%s: mem_prep_peak %.17g vs %.17g", what, pk.peak, want.peak);
                  compared++;
                }
          }
  mem_prep_free(mp);
  model_free(m);
  diag_free(dg);
  hw_catalog_free(c);
  return compared;
}

static int grid(const char *name, const char *hw_name, int64_t chips, int64_t ep) {
  return grid_fw(name, hw_name, chips, ep, 0, PLAN_GEMM_NATIVE);
}

Test(memprep, dense_uneven_and_interleaved_equal_mem_transformer, .timeout = 120) {
  /* 126 layers: most splits uneven; 96: most even */
  cr_assert_gt(grid("llama3-405b", "h100-sxm", 64, 1), 500);
  cr_assert_gt(grid("gpt3-175b", "tpu-v5p", 64, 1), 500);
}

Test(memprep, moe_equals_mem_transformer, .timeout = 120) {
  cr_assert_gt(grid("mixtral-8x7b", "h100-sxm", 16, 2), 200);
}

/* Models whose layers differ in kind (the per-kind path: no span memo, no
** stage memo): a hybrid Mamba/MoE model and a windowed one. The stage
** pruning (prep_live) runs on every grid. */
Test(memprep, mixed_kinds_equal_mem_transformer, .timeout = 120) {
  cr_assert_gt(grid("tests/data/hf/nemotron3-nano-30b-a3b.json", "h100-sxm", 16, 1), 200);
  cr_assert_gt(grid("tests/data/hf/gemma2-9b.json", "tpu-v5e", 16, 1), 200);
}

/* A state the memory model refuses: the same refusal, word for word. */
Test(memprep, a_bad_state_is_refused_as_mem_transformer_refuses_it) {
  hw_catalog *c = th_catalog();
  diag *dg = diag_new();
  model *m = model_load("llama3-8b", NULL, dg);
  cr_assert_not_null(m);
  plan p = {.chips = 8, .tp = 8, .pp = 1, .dp = 1, .ep = 1, .mbs = 1, .gbs = 8, .seq = 8192,
            .vp = 1, .schedule = PLAN_1F1B, .precision = GDT_BF16, .sp = true};
  mem_opts o;
  plan q;
  mem_setup(m, th_hw(c, "h100-sxm"), &p, &o, &q);
  mem_prep *mp = mem_prep_new();
  mem_prep_set(mp, &m->info.tf, &q, &o);
  mem_state s = {5, 0, PLAN_OFFLOAD_NONE};
  q.zero = 5;
  mem_bytes a, b;
  char e1[256], e2[256];
  cr_assert_eq(mem_transformer(&m->info.tf, &q, &o, &a, e1, sizeof e1), -1);
  cr_assert_eq(mem_prep_state(mp, &s, &b, e2, sizeof e2), -1);
  cr_assert_str_eq(e1, e2);
  mem_peak pk;
  e2[0] = 0;
  cr_assert_eq(mem_prep_peak(mp, &s, &pk, e2, sizeof e2), -1);
  cr_assert_str_eq(e1, e2);
  cr_assert(strstr(e2, "ZeRO stage 5") != NULL, "%s", e2);
  mem_prep_free(mp);
  model_free(m);
  diag_free(dg);
  hw_catalog_free(c);
}

/* Megatron-Core's fp8 parameters (framework lowp_params): the 16-bit
** linear weights dropped under ZeRO < 3 and the gathered layer in the
** recipe's format under ZeRO-3, the same to the bit on both paths, for a
** recipe with two copies (MXFP8), one (fp8 on Blackwell) and a transpose
** (fp8-cs on Hopper); and the drop is there (a plain profile has none). */
Test(memprep, fp8_parameters_equal_mem_transformer, .timeout = 120) {
  int mc = framework_find("megatron-core");
  cr_assert_geq(mc, 0);
  cr_assert_gt(grid_fw("llama3-405b", "b200", 64, 1, mc, PLAN_GEMM_MXFP8), 500);
  cr_assert_gt(grid_fw("mixtral-8x7b", "b200", 16, 2, mc, PLAN_GEMM_FP8), 200);
  cr_assert_gt(grid_fw("tests/data/hf/nemotron3-nano-30b-a3b.json", "h100-sxm", 16, 1, mc,
                       PLAN_GEMM_FP8_CS), 200);
}
