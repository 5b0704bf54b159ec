/*
** test_memory.c -- per-chip memory: Korthikanti et al. 2022 Fig. 1 (model
** state and activations for 22B/175B/530B/1T), the ZeRO paper's example,
** the derivation of the per-layer count, schedules, fixes, bad input.
** Published values: shared/reference/measurements-and-formulas.md A.2, C.2, C.3.
*/
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../sim/memory.h"

#define GIB 1073741824.0

static void near(double got, double want, double rel, const char *what) {
  cr_assert(fabs(got - want) <= rel * fabs(want), "%s: got %.6f, want %.6f (%.3f %% off)", what,
            got, want, 100 * (got - want) / want);
}

/* ---- Korthikanti et al. 2022 (arXiv:2205.05198), A.2 ---- */

typedef struct {
  const char *name;
  wl_tf_dims d;
  int64_t pp, gbs, vp;
  double state_gib, act_tp_gib, act_seqsel_gib; /* Fig. 1, per GPU */
} kc_row;

#define GPT(L, H, A, F) \
  {.layers = L, .hidden = H, .heads = A, .ffn_hidden = F, .vocab = 51200, .seq = 2048, .tied = true}

static const kc_row KC[] = {
    /* TP 8 everywhere; micro-batch 4 for 22B (the whole batch), else 1;
    ** interleaving 175B and 530B v = 3, 22B and 1T v = 1 (calculon). */
    {"22B", GPT(48, 6144, 64, 24576), 1, 4, 1, 45.5625, 59.25, 9.5625},
    {"175B", GPT(96, 12288, 96, 49152), 8, 64, 3, 45.5625, 66.84375, 12.3515625},
    {"530B", GPT(105, 20480, 128, 81920), 35, 280, 3, 31.640625, 114.0234375, 23.076171875},
    {"1T", GPT(128, 25600, 160, 102400), 64, 512, 1, 32.958984375, 131.25, 26.5625},
};

static plan kc_plan(const kc_row *k, bool seqsel) {
  plan p = {0};
  p.dp = 1;
  p.tp = 8;
  p.pp = k->pp;
  p.chips = 8 * k->pp;
  p.mbs = k->gbs == 4 ? 4 : 1;
  p.gbs = k->gbs;
  p.seq = 2048;
  p.precision = GDT_F16;
  p.schedule = k->vp > 1 ? PLAN_INTERLEAVED : PLAN_1F1B;
  p.vp = k->vp;
  p.sp = seqsel;
  p.recompute = seqsel ? PLAN_RECOMPUTE_SELECTIVE : PLAN_RECOMPUTE_NONE;
  return p;
}

/* Megatron mixed precision with Adam: 2 + 4 + 12 = 18 B/param; the figure
** counts transformer layers only (reference C.3). */
static mem_opts kc_opts(void) {
  mem_opts o = {0};
  o.master_fp32 = true;
  o.fp32_grads = true;
  o.optimizer_states = 2;
  o.layers_only = true;
  return o;
}

Test(memory, korthikanti_fig1_model_state) {
  mem_opts o = kc_opts();
  for (size_t i = 0; i < sizeof KC / sizeof KC[0]; i++) {
    plan p = kc_plan(&KC[i], false);
    mem_bytes m;
    char err[256];
    cr_assert_eq(mem_transformer(&KC[i].d, &p, &o, &m, err, sizeof err), 0, "%s", err);
    double state = (m.weights + m.gradients + m.optimizer) / GIB;
    near(state, KC[i].state_gib, 0.05, KC[i].name);
    /* the derivation: 18 B x L/p x a GPT layer's 12h^2 + 13h parameters, of
    ** which the two norms (4h) and the two row-parallel biases (2h) are
    ** replicated over t and the rest split */
    double h = (double)KC[i].d.hidden;
    double per_chip = ((12 * h * h + 7 * h) / 8 + 6 * h) * (double)(KC[i].d.layers / KC[i].pp);
    cr_assert_float_eq(m.params, per_chip, 1e-6 * per_chip, "%s params", KC[i].name);
    cr_assert_float_eq(m.weights + m.gradients + m.optimizer, 18 * per_chip, 1e-6 * per_chip);
  }
}

Test(memory, korthikanti_fig1_activations_tp_only) {
  mem_opts o = kc_opts();
  for (size_t i = 0; i < sizeof KC / sizeof KC[0]; i++) {
    plan p = kc_plan(&KC[i], false);
    mem_bytes m;
    char err[256];
    cr_assert_eq(mem_transformer(&KC[i].d, &p, &o, &m, err, sizeof err), 0, "%s", err);
    near(m.activations / GIB, KC[i].act_tp_gib, 0.05, KC[i].name);
    /* the derivation: sbh(10 + 24/t + 5as/(ht)) x L, x (1 + (p-1)/(pv)) when
    ** interleaved */
    double s = 2048, b = (double)p.mbs, h = (double)KC[i].d.hidden, a = (double)KC[i].d.heads;
    double L = (double)KC[i].d.layers, pp = (double)p.pp, v = (double)KC[i].vp;
    double layer = s * b * h * (10 + 24.0 / 8 + 5 * a * s / (h * 8));
    cr_assert_float_eq(m.act_layer, layer, 1e-9 * layer, "%s layer", KC[i].name);
    double want = layer * L * (v > 1 ? 1 + (pp - 1) / (pp * v) : 1);
    cr_assert_float_eq(m.activations, want, 1e-9 * want, "%s", KC[i].name);
    cr_assert_eq(m.stage, 0, "%s: the first stage holds the most", KC[i].name);
  }
}

Test(memory, korthikanti_fig1_activations_seqpar_selective) {
  mem_opts o = kc_opts();
  for (size_t i = 0; i < sizeof KC / sizeof KC[0]; i++) {
    plan p = kc_plan(&KC[i], true);
    mem_bytes m;
    char err[256];
    cr_assert_eq(mem_transformer(&KC[i].d, &p, &o, &m, err, sizeof err), 0, "%s", err);
    near(m.activations / GIB, KC[i].act_seqsel_gib, 0.05, KC[i].name);
    double s = 2048, b = (double)p.mbs, h = (double)KC[i].d.hidden;
    double L = (double)KC[i].d.layers, pp = (double)p.pp, v = (double)KC[i].vp;
    double want = 34 * s * b * h / 8 * L * (v > 1 ? 1 + (pp - 1) / (pp * v) : 1);
    cr_assert_float_eq(m.activations, want, 1e-9 * want, "%s", KC[i].name);
  }
}

/* ---- the per-layer count ---- */

static double layer_bytes(const wl_tf_dims *d, int64_t tp, bool sp, plan_recompute rc,
                          const mem_opts *o) {
  plan p = {.dp = 1, .tp = tp, .pp = 1, .mbs = 2, .gbs = 2, .seq = d->seq, .sp = sp,
            .recompute = rc, .precision = GDT_BF16, .schedule = PLAN_1F1B};
  mem_bytes m;
  char err[256];
  cr_assert_eq(mem_transformer(d, &p, o, &m, err, sizeof err), 0, "%s", err);
  return m.act_layer;
}

Test(memory, gpt_layer_reduces_to_34sbh_plus_5as2b) {
  wl_tf_dims d = GPT(24, 2048, 16, 8192);
  mem_opts o = kc_opts();
  double s = 2048, b = 2, h = 2048, a = 16, t = 4;
  cr_assert_float_eq(layer_bytes(&d, 1, false, PLAN_RECOMPUTE_NONE, &o),
                     34 * s * b * h + 5 * a * s * s * b, 1);
  cr_assert_float_eq(layer_bytes(&d, 4, false, PLAN_RECOMPUTE_NONE, &o),
                     s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1);
  cr_assert_float_eq(layer_bytes(&d, 4, true, PLAN_RECOMPUTE_NONE, &o),
                     s * b * h / t * (34 + 5 * a * s / h), 1);
  cr_assert_float_eq(layer_bytes(&d, 4, true, PLAN_RECOMPUTE_SELECTIVE, &o), 34 * s * b * h / t, 1);
  cr_assert_float_eq(layer_bytes(&d, 4, false, PLAN_RECOMPUTE_SELECTIVE, &o),
                     s * b * h * (10 + 24 / t), 1);
  cr_assert_float_eq(layer_bytes(&d, 4, false, PLAN_RECOMPUTE_FULL, &o), 2 * s * b * h, 1);
  cr_assert_float_eq(layer_bytes(&d, 4, true, PLAN_RECOMPUTE_FULL, &o), 2 * s * b * h / t, 1);
}

/* GQA + SwiGLU + explicit head_dim: count each saved tensor by hand. */
Test(memory, general_layer_gqa_swiglu) {
  wl_tf_dims d = {.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .head_dim = 128,
                  .ffn_hidden = 14336, .vocab = 128256, .seq = 4096, .gated = true};
  double s = 4096, b = 2, h = 4096, q = 32 * 128, kv = 8 * 128, f = 14336, a = 32, t = 4;
  mem_opts o = kc_opts();
  /* replicated: norm inputs 2h + QKV and FFN inputs 2h (2 B) + 2 dropout
  ** masks h (1 B); sharded: Q, K, V, O-input, gate, up, down-input (2 B);
  ** scores: softmax 2 B + mask 1 B + dropout output 2 B per a s entry */
  double rep = 2 * 4 * h + 2 * h;
  double shd = 2 * (2 * q + 2 * kv + 3 * f) / t;
  double sc = 5 * a * s / t;
  cr_assert_float_eq(layer_bytes(&d, 4, false, PLAN_RECOMPUTE_NONE, &o), s * b * (rep + shd + sc),
                     1);
  cr_assert_float_eq(layer_bytes(&d, 4, true, PLAN_RECOMPUTE_SELECTIVE, &o),
                     s * b * (rep / t + shd), 1);
  /* no dropout, FlashAttention: no masks, only an fp32 log-sum-exp per head */
  o.no_dropout = true;
  o.flash_attention = true;
  cr_assert_float_eq(layer_bytes(&d, 4, false, PLAN_RECOMPUTE_NONE, &o),
                     s * b * (8 * h + shd + 4 * a / t), 1);
  /* parameters: Wq, Wk, Wv, Wo with biases, two norms, gate/up/down */
  plan p = {.dp = 1, .tp = 1, .pp = 1, .mbs = 1, .gbs = 1, .precision = GDT_BF16,
            .schedule = PLAN_1F1B};
  mem_bytes m;
  cr_assert_eq(mem_transformer(&d, &p, &o, &m, NULL, 0), 0);
  double layer = 2 * h * q + 2 * h * kv + q + 2 * kv + h + 4 * h + 3 * h * f + 2 * f + h;
  cr_assert_float_eq(m.params, 32 * layer, 1);
}

/* ---- model state ---- */

/* Rajbhandari et al. 2020 Fig. 1: Psi = 7.5B, Nd = 64, K = 12, 16-bit
** gradients: 120 / 31.4 / 16.6 / 1.9 GB (reference C.3). */
Test(memory, zero_paper_example) {
  mem_opts o = {.master_fp32 = true, .optimizer_states = 2};
  const double want[4] = {120, 31.4, 16.6, 1.9};
  const double exact[4] = {16 * 7.5, 4 * 7.5 + 12 * 7.5 / 64, 2 * 7.5 + 14 * 7.5 / 64,
                           16 * 7.5 / 64};
  for (int z = 0; z < 4; z++) {
    mem_bytes m;
    mem_model_state(7.5e9, 64, z, GDT_BF16, &o, &m);
    double gb = (m.weights + m.gradients + m.optimizer) / 1e9;
    near(gb, want[z], 0.05, "ZeRO stage");
    cr_assert_float_eq(gb, exact[z], 1e-9, "stage %d", z);
  }
  /* fp32 training: 4 + 4 + 8 B per parameter, no master copy */
  mem_bytes m;
  mem_model_state(1e9, 1, 0, GDT_F32, &o, &m);
  cr_assert_float_eq(m.weights, 4e9, 1);
  cr_assert_float_eq(m.gradients, 4e9, 1);
  cr_assert_float_eq(m.optimizer, 8e9, 1);
  /* Megatron fp32 main grads: 18 B; LoRA: only the trainable share */
  o.fp32_grads = true;
  mem_model_state(1e9, 1, 0, GDT_BF16, &o, &m);
  cr_assert_float_eq(m.weights + m.gradients + m.optimizer, 18e9, 1);
  o.trainable_fraction = 0.01;
  mem_model_state(1e9, 1, 0, GDT_BF16, &o, &m);
  cr_assert_float_eq(m.weights + m.gradients + m.optimizer, 2e9 + 0.16e9, 1);
}

Test(memory, zero_stages_through_a_plan) {
  wl_tf_dims d = GPT(24, 2048, 16, 8192);
  plan p = {.chips = 64, .dp = 64, .tp = 1, .pp = 1, .mbs = 1, .gbs = 64, .seq = 2048,
            .precision = GDT_BF16, .schedule = PLAN_1F1B};
  mem_opts o = kc_opts();
  o.fp32_grads = false;
  mem_bytes z[4];
  for (int s = 0; s < 4; s++) {
    p.zero = s;
    cr_assert_eq(mem_transformer(&d, &p, &o, &z[s], NULL, 0), 0);
  }
  double P = z[0].params;
  cr_assert_float_eq(z[0].optimizer, 12 * P, 1);
  cr_assert_float_eq(z[1].optimizer, 12 * P / 64, 1);
  cr_assert_float_eq(z[1].gradients, 2 * P, 1);
  cr_assert_float_eq(z[2].gradients, 2 * P / 64, 1);
  cr_assert_float_eq(z[2].weights, 2 * P, 1);
  cr_assert_float_eq(z[3].weights, 2 * P / 64, 1);
  /* ZeRO-3 gathers two layers' weights (FSDP prefetch) into temporary */
  cr_assert_gt(z[3].temporary, z[1].temporary);
}

/* The embedding and LM head: counted on the stage that holds them unless
** layers_only (the Korthikanti basis); the worst stage is reported. */
Test(memory, embedding_and_head_on_their_stages) {
  wl_tf_dims d = KC[0].d; /* 22B, tied */
  plan p = kc_plan(&KC[0], false);
  mem_opts o = kc_opts();
  mem_bytes only, all;
  cr_assert_eq(mem_transformer(&d, &p, &o, &only, NULL, 0), 0);
  o.layers_only = false;
  cr_assert_eq(mem_transformer(&d, &p, &o, &all, NULL, 0), 0);
  double h = 6144, V = 51200, t = 8, s = 2048, b = 4;
  /* pp = 1, tied: one V x h/t matrix + the final norm */
  cr_assert_float_eq(all.params - only.params, V * h / t + 2 * h, 1);
  /* activations: embedding dropout mask sbh, final norm and head inputs
  ** 2 x 2 sbh, fp32 logits 4 s b V/t (Korthikanti §4.3) */
  cr_assert_float_eq(all.activations - only.activations,
                     s * b * h + 4 * s * b * h + 4 * s * b * V / t, 1);
  /* untied: two matrices */
  d.tied = false;
  cr_assert_eq(mem_transformer(&d, &p, &o, &all, NULL, 0), 0);
  cr_assert_float_eq(all.params - only.params, 2 * V * h / t + 2 * h, 1);
  /* pp > 1 (175B): first stage embedding, last stage head; the worst wins */
  plan q = kc_plan(&KC[1], false);
  mem_bytes m;
  cr_assert_eq(mem_transformer(&KC[1].d, &q, &o, &m, NULL, 0), 0);
  cr_assert_eq(m.stage, 0);
  double H = 12288;
  cr_assert_float_eq(m.params, 12 * ((12 * H * H + 7 * H) / 8 + 6 * H) + V * H / 8, 1);
}

/* ---- schedules ---- */

Test(memory, pipeline_schedules_hold_micro_batches) {
  wl_tf_dims d = GPT(32, 2048, 16, 8192);
  plan p = {.chips = 4, .dp = 1, .tp = 1, .pp = 4, .mbs = 1, .gbs = 16, .seq = 2048,
            .precision = GDT_BF16, .schedule = PLAN_GPIPE};
  mem_opts o = kc_opts();
  mem_bytes m;
  cr_assert_eq(mem_transformer(&d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.layer_mbs, 16 * 8, 0); /* GPipe: all m micro-batches x L/p */
  p.schedule = PLAN_1F1B;
  cr_assert_eq(mem_transformer(&d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.layer_mbs, 32, 0); /* 1F1B: p x L/p = L */
  p.gbs = 2;                              /* fewer micro-batches than stages */
  cr_assert_eq(mem_transformer(&d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.layer_mbs, 2 * 8, 0);
  p.gbs = 16;
  p.schedule = PLAN_INTERLEAVED;
  p.vp = 2;
  cr_assert_eq(mem_transformer(&d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.layer_mbs, 32 * (1 + 3.0 / 8), 0); /* L (1 + (p-1)/(pv)) */
}

Test(memory, peak_is_the_sum_and_temporary_rule) {
  plan p = kc_plan(&KC[0], false);
  mem_opts o = kc_opts();
  o.capacity_bytes = 80 * GIB;
  mem_bytes m;
  cr_assert_eq(mem_transformer(&KC[0].d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.peak, m.weights + m.gradients + m.optimizer + m.activations + m.temporary,
                     1);
  /* no recompute, dp = pp = 1, no SP: the largest tensor, the a/t x s x s
  ** softmax of one micro-batch in 16 bits */
  cr_assert_float_eq(m.temporary, 8.0 * 2048 * 2048 * 4 * 2, 1);
  cr_assert_eq(m.fits, false); /* 45.6 + 59.3 GiB > 80 GiB */
  cr_assert_float_eq(m.capacity, 80 * GIB, 0);
  /* full recompute rematerializes one layer during its backward */
  p.recompute = PLAN_RECOMPUTE_FULL;
  cr_assert_eq(mem_transformer(&KC[0].d, &p, &o, &m, NULL, 0), 0);
  cr_assert_float_eq(m.temporary, 8.0 * 2048 * 2048 * 4 * 2 + 2048 * 4 * 6144 * (13 + 40.0 / 3),
                     1);
}

/* ---- fixes ---- */

static void check_fixes(const wl_tf_dims *d, const plan *p, const mem_opts *o, int n,
                        const mem_fix *f, double base) {
  for (int i = 0; i < n; i++) {
    mem_bytes r;
    char err[256];
    cr_assert_eq(mem_transformer(d, &f[i].p, &f[i].o, &r, err, sizeof err), 0, "%s: %s",
                 f[i].what, err);
    cr_assert_float_eq(r.peak, f[i].peak, 1, "%s: peak recomputed", f[i].what);
    cr_assert_lt(f[i].peak, base, "%s", f[i].what);
    cr_assert_float_eq(f[i].saves_bytes, base - f[i].peak, 1);
    cr_assert_eq(f[i].fits, r.fits);
  }
  (void)p;
  (void)o;
}

Test(memory, plan_that_does_not_fit_gets_fixes) {
  /* 22B on 8 x 80 GiB, micro-batch 4, no recompute: 45.6 + 59.3 GiB */
  plan p = kc_plan(&KC[0], false);
  mem_opts o = kc_opts();
  o.capacity_bytes = 80 * GIB;
  mem_bytes base;
  cr_assert_eq(mem_transformer(&KC[0].d, &p, &o, &base, NULL, 0), 0);
  cr_assert_not(base.fits);
  mem_fix f[MEM_MAX_FIXES];
  char err[256];
  int n = mem_fixes(&KC[0].d, &p, &o, NULL, NULL, f, err, sizeof err);
  cr_assert_geq(n, 4, "%s", err);
  check_fixes(&KC[0].d, &p, &o, n, f, base.peak);
  /* ordered by how little they change the plan */
  cr_assert(strstr(f[0].what, "micro-batch 4 -> "), "%s", f[0].what);
  cr_assert_lt(f[0].p.mbs, 4);
  cr_assert_str_eq(f[1].what, "selective recompute (core attention)");
  cr_assert_eq(f[1].p.recompute, PLAN_RECOMPUTE_SELECTIVE);
  cr_assert_str_eq(f[2].what, "full recompute");
  cr_assert_str_eq(f[3].what, "sequence parallelism");
  cr_assert(f[1].fits && f[2].fits);
  /* dp = 1: no ZeRO; heads 64 allow tp 16 (more chips) */
  for (int i = 0; i < n; i++) cr_assert_null(strstr(f[i].what, "ZeRO"), "%s", f[i].what);
  bool tp = false;
  for (int i = 0; i < n; i++)
    if (f[i].p.tp > 8) tp = true;
  cr_assert(tp);
}

Test(memory, fixes_zero_tp_and_bf16) {
  /* a 1.3B GPT in fp32 with Adam, dp 8, on 16 GiB chips: 40 GiB */
  wl_tf_dims d = GPT(24, 2048, 16, 8192);
  plan p = {.chips = 8, .dp = 8, .tp = 1, .pp = 1, .mbs = 1, .gbs = 8, .seq = 2048,
            .precision = GDT_F32, .schedule = PLAN_1F1B};
  mem_opts o = {.optimizer_states = 2, .capacity_bytes = 16 * GIB};
  mem_bytes base;
  cr_assert_eq(mem_transformer(&d, &p, &o, &base, NULL, 0), 0);
  cr_assert_not(base.fits, "peak %.1f GiB", base.peak / GIB);
  mem_fix f[MEM_MAX_FIXES];
  int n = mem_fixes(&d, &p, &o, NULL, NULL, f, NULL, 0);
  cr_assert_gt(n, 0);
  check_fixes(&d, &p, &o, n, f, base.peak);
  bool zero = false, tp = false, bf16 = false;
  for (int i = 0; i < n; i++) {
    if (strstr(f[i].what, "ZeRO")) {
      zero = true; /* no stage alone is enough: the strongest is offered */
      cr_assert_eq(f[i].p.zero, 3);
      cr_assert_not(f[i].fits);
    }
    if (f[i].p.tp > 1) {
      tp = true; /* the chip count is kept: dp shrinks */
      cr_assert(f[i].fits);
      cr_assert_eq(f[i].p.dp * f[i].p.tp, 8);
    }
    if (f[i].p.precision == GDT_BF16) {
      bf16 = true;
      cr_assert(f[i].o.master_fp32);
    }
  }
  cr_assert(zero && tp && bf16);
  /* a plan that fits needs no fixes */
  o.capacity_bytes = 1000 * GIB;
  cr_assert_eq(mem_fixes(&d, &p, &o, NULL, NULL, f, NULL, 0), 0);
}

/* ---- bad input ---- */

static void bad(const wl_tf_dims *d, const plan *p, const char *needle) {
  mem_opts o = kc_opts();
  mem_bytes m;
  char err[256] = "";
  cr_assert_eq(mem_transformer(d, p, &o, &m, err, sizeof err), -1, "expected an error: %s",
               needle);
  cr_assert(strstr(err, needle), "'%s' not in '%s'", needle, err);
}

Test(memory, bad_input_errors) {
  wl_tf_dims d = GPT(24, 2048, 16, 8192);
  plan ok = {.chips = 8, .dp = 2, .tp = 4, .pp = 1, .mbs = 1, .gbs = 8, .seq = 2048,
             .precision = GDT_BF16, .schedule = PLAN_1F1B};
  mem_opts o = kc_opts();
  mem_bytes m;
  cr_assert_eq(mem_transformer(&d, &ok, &o, &m, NULL, 0), 0);
  wl_tf_dims z = d;
  z.layers = 0;
  bad(&z, &ok, "must be positive");
  z = d;
  z.hidden = 0;
  bad(&z, &ok, "must be positive");
  plan p = ok;
  p.chips = 16;
  bad(&d, &p, "not the 16 chips");
  p = ok;
  p.tp = 3;
  p.chips = 6;
  bad(&d, &p, "tp 3 does not divide the 16 heads");
  p = ok;
  p.dp = 0;
  bad(&d, &p, ">= 1");
  p = ok;
  p.pp = 32;
  p.chips = 256;
  bad(&d, &p, "more than the 24 layers");
  p = ok;
  p.gbs = 7;
  bad(&d, &p, "does not divide the global batch 7");
  p = ok;
  p.zero = 4;
  bad(&d, &p, "ZeRO stage 4");
  p = ok;
  p.ep = 2;
  bad(&d, &p, "experts");
  p = ok;
  p.seq = 0;
  z = d;
  z.seq = 0;
  bad(&z, &p, "sequence length");
  p = ok;
  p.precision = GDT_S8;
  bad(&d, &p, "not a floating-point");
  z = d;
  z.ffn_hidden = 8190;
  bad(&z, &ok, "ffn_hidden 8190");
  mem_fix f[MEM_MAX_FIXES];
  char err[128];
  cr_assert_eq(mem_fixes(&z, &ok, &o, NULL, NULL, f, err, sizeof err), -1);
}
