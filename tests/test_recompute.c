/*
** test_recompute.c -- selective recompute of a list of a layer's
** submodules (Megatron-Core's --recompute-modules: plan.h PLAN_RM_*): the
** spelling, the check against the model, the time it adds (the forward
** kernels of the modules, as the graph tags them) and the activation bytes
** it frees, each derived in its comment.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/framework.h"
#include "../sim/memory.h"
#include "../sim/step.h"
#include "helpers.h"

/* The spellings: Megatron-Core's module names after selective:, joined by
** ',' or '+', in any order; printed back in the table's order. */
Test(recompute, parse_and_label) {
  plan p = {0};
  char err[256], out[128];
  cr_assert_eq(plan_recompute_parse("selective:layernorm+moe_act", &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(p.recompute, PLAN_RECOMPUTE_SELECTIVE);
  cr_assert_eq(p.recompute_modules, PLAN_RM_MOE_ACT | PLAN_RM_LAYERNORM);
  cr_assert_str_eq(plan_recompute_label(&p, out, sizeof out), "selective:moe_act,layernorm");
  cr_assert_eq(plan_recompute_parse("full", &p, err, sizeof err), 0);
  cr_assert_eq(p.recompute_modules, 0u);
  cr_assert_str_eq(plan_recompute_label(&p, out, sizeof out), "full");
  cr_assert_neq(plan_recompute_parse("selective:mla_up,mlp", &p, err, sizeof err), 0);
  cr_assert(strstr(err, "expected mla_up_proj"), "%s", err);
  cr_assert_neq(plan_recompute_parse("full:mlp", &p, err, sizeof err), 0);
  cr_assert(strstr(err, "only selective takes a list"), "%s", err);
  cr_assert_neq(plan_recompute_parse("selective:moe_act,", &p, err, sizeof err), 0);
  cr_assert(strstr(err, "a module name is missing"), "%s", err);
  cr_assert_neq(plan_recompute_parse("selectiv", &p, err, sizeof err), 0);
  cr_assert(strstr(err, "nearest: selective"), "%s", err);
}

/* A module the model does not have is refused with the ones it has:
** Llama 3.1 8B has no experts, no MLA. */
Test(recompute, modules_the_model_lacks) {
  hw_catalog *c = th_catalog();
  model *m = th_model("tests/data/hf/llama3.1-8b.json", 4096);
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 1, .cp = 1, .mbs = 1, .vp = 1, .slices = 1,
            .gbs = 8, .seq = 4096, .schedule = PLAN_1F1B};
  framework_apply(framework_find("megatron-core"), &p);
  char err[512];
  cr_assert_eq(plan_recompute_parse("selective:mlp,layernorm", &p, err, sizeof err), 0);
  cr_assert_eq(plan_check(m, th_hw(c, "h100-sxm"), &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(plan_recompute_parse("selective:mla_up_proj", &p, err, sizeof err), 0);
  cr_assert_neq(plan_check(m, th_hw(c, "h100-sxm"), &p, err, sizeof err), 0);
  cr_assert(strstr(err, "no multi-latent attention"), "%s", err);
  cr_assert(strstr(err, "core_attn, layernorm, mlp"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* The plan both checks below run: Qwen3-30B-A3B (seq 4096) on 8 H100s,
** ep 8, tp 1, mbs 1, bf16, megatron-core, checked. */
static plan qwen_ep8(const model *m, const hw_model *h) {
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 1, .vp = 1, .slices = 1,
            .gbs = 64, .seq = 4096, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA};
  cr_assert_eq(plan_precision_parse("bf16", &p), 0);
  framework_apply(framework_find("megatron-core"), &p);
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  return p;
}

/* Time: each module's recomputation is its forward kernels again (the
** layer's forward split by the modules the graph tags); "moe" is the MoE
** layer's router, dispatch, experts (with their activation) and combine
** again with its forward all-to-alls; core_attn alone is the framework's
** selective (Megatron: the attention core). Qwen3-30B-A3B, one MoE kind,
** on 8 H100s at ep 8. The SwiGLU between the expert GEMMs is two
** memory-bound kernels in the graph (the silu's output is saved for the
** backward, so it is stored): silu reads gate and writes its output, the
** product reads that and up and writes the result -- 5 passes of 2 bytes
** over each of the E x C rows' 768 values, E x C = 16 local experts x 2048
** = 32,768 rows at mbs 1 (ep 8: each expert takes the top-8 copies of the
** ep group's 8 x 4096 tokens over 128 experts): 32,768 x 768 x 10 = 252 MB
** at the H100's memory rate (hbm_bw x hbm_efficiency), plus two launches. */
Test(recompute, time_is_the_modules_forward) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  plan p = qwen_ep8(m, h);
  char err[512];
  step_result r;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  int k = 0;
  while (k < WL_LAYER_KINDS && !r.kind_n[k]) k++;
  cr_assert(k < WL_LAYER_KINDS && (k & WL_LAYER_MOE));
  const double *mod = r.kind_mod_fwd_s[k];
  double act = 32768.0 * 768 * 10 / (h->chip.hbm_bw_bytes_per_s * h->chip.hbm_efficiency) +
               2 * h->chip.op_overhead_s;
  cr_assert_float_eq(mod[GRAPH_MOD_MOE_ACT], act, 1e-9 * act, "moe_act %.6g s, by hand %.6g s",
                     mod[GRAPH_MOD_MOE_ACT], act);
  cr_assert_gt(mod[GRAPH_MOD_NORM], 0);
  cr_assert_gt(mod[GRAPH_MOD_MOE], mod[GRAPH_MOD_MOE_ACT]);
  cr_assert_eq(mod[GRAPH_MOD_MLP], 0); /* no dense MLP, no MLA */
  cr_assert_eq(mod[GRAPH_MOD_MLA_UP], 0);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  double sel = step_recompute_s(&r, &p, &m->info.tf, k);
  p.recompute_modules = PLAN_RM_CORE_ATTN;
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k), sel, 1e-15);
  cr_assert_float_eq(sel, r.kind_attn_fwd_s[k], 1e-15);
  p.recompute_modules = PLAN_RM_MOE_ACT | PLAN_RM_LAYERNORM;
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k),
                     mod[GRAPH_MOD_MOE_ACT] + mod[GRAPH_MOD_NORM], 1e-15);
  p.recompute_modules = PLAN_RM_MOE | PLAN_RM_MOE_ACT;
  cr_assert_gt(r.ep_a2a_fwd_s, 0);
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k),
                     mod[GRAPH_MOD_MOE] + mod[GRAPH_MOD_MOE_ACT] + mod[GRAPH_MOD_SHARED] +
                         r.ep_a2a_fwd_s,
                     1e-15, "moe holds moe_act once, and its all-to-alls");
  model_free(m);
  hw_catalog_free(c);
}

/* Memory: moe_act frees each routed copy's FC2 input, the activation's
** output, at the expert's width -- top-8 copies of each token at tp 1, 768
** values of 2 bytes: 12,288 bytes a token, 4096 x 12,288 = 50,331,648 a
** layer at mbs 1; layernorm frees the pre-MLP norm's output (the router's
** input: 2048 x 2 bytes a token), the input norm being fused into the QKV
** GEMM (LayerNormLinear) -- 4096 x 4096 = 16,777,216 more. */
Test(recompute, memory_freed_by_hand) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  plan p = qwen_ep8(m, h);
  char err[512];
  double act[3];
  const unsigned mods[3] = {PLAN_RM_CORE_ATTN, PLAN_RM_CORE_ATTN | PLAN_RM_MOE_ACT,
                            PLAN_RM_CORE_ATTN | PLAN_RM_MOE_ACT | PLAN_RM_LAYERNORM};
  for (int i = 0; i < 3; i++) {
    plan q = p, mp;
    q.recompute = PLAN_RECOMPUTE_SELECTIVE;
    q.recompute_modules = mods[i];
    mem_opts o;
    mem_setup(m, h, &q, &o, &mp);
    mem_bytes b;
    cr_assert_eq(mem_transformer(&m->info.tf, &mp, &o, &b, err, sizeof err), 0, "%s", err);
    act[i] = b.act_layer;
  }
  cr_assert_float_eq(act[0] - act[1], 50331648.0, 1);
  cr_assert_float_eq(act[1] - act[2], 16777216.0, 1);
  model_free(m);
  hw_catalog_free(c);
}

/* MaxText's 'minimal' (the maxtext profile's selective) saves every weight
** matmul output the backward reads and recomputes none of them: the
** recomputation is the layer's forward less its matmul kernels -- the
** attention core (a Pallas call) and the elementwise ops; torchtitan's
** op-level policy adds back its share of the matmuls (wk, wo, w3: 0.365 of
** Llama 3 8B's matmul FLOPs, framework_selective_share). */
Test(recompute, maxtext_replays_what_the_backward_reads) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "tpu-v5p");
  model *m = th_model("llama3-8b", 8192);
  plan p = {.chips = 8, .dp = 8, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .vp = 1, .slices = 1, .gbs = 8,
            .seq = 8192, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA};
  cr_assert_eq(plan_precision_parse("bf16", &p), 0);
  framework_apply(framework_find("maxtext"), &p);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  int k = 0;
  while (k < WL_LAYER_KINDS && !r.kind_n[k]) k++;
  cr_assert(k < WL_LAYER_KINDS);
  double fw = r.kind_fwd_s[k], mm = r.kind_mm_fwd_s[k], at = r.kind_attn_fwd_s[k];
  cr_assert(mm > 0 && at > 0 && fw > mm + at, "fwd %g, matmuls %g, core %g", fw, mm, at);
  double rec = step_recompute_s(&r, &p, &m->info.tf, k);
  cr_assert_float_eq(rec, fw - mm, 1e-15 * fw, "recompute %g, fwd - matmuls %g", rec, fw - mm);
  /* full: JAX's remat recomputes what its backward reads (jax/_src/
  ** ad_checkpoint.py remat_partial_eval: the staged recomputation DCE'd to
  ** the residuals used), so not w2, whose output only feeds the residual
  ** sum: 14336 x 4096 of Llama 3 8B's 218,103,808 matmul weights a layer
  ** (4096^2 x 2 + 4096 x 1024 x 2 + 4096 x 14336 x 3), 0.2692 */
  p.recompute = PLAN_RECOMPUTE_FULL;
  double w2 = 14336.0 * 4096 / (2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336);
  cr_assert_float_eq(w2, 0.2692, 1e-4);
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k), fw - w2 * mm, 1e-15 * fw);
  /* PyTorch's checkpoint reruns the whole forward */
  p.framework = framework_find("torchtitan");
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k), fw, 1e-15 * fw);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  cr_assert_float_eq(framework_selective_share(p.framework, &m->info.tf, k), 0.365, 0.001);
  cr_assert_float_eq(step_recompute_s(&r, &p, &m->info.tf, k),
                     fw - mm + framework_selective_share(p.framework, &m->info.tf, k) * mm - at,
                     1e-15 * fw);
  model_free(m);
  hw_catalog_free(c);
}

/* In a parallel block (GPT-J style: MaxText's 2023 test models) the
** attention output projection only feeds the residual sum too: JAX's full
** remat recomputes neither it nor fc2. maxtext2312.json (h 10240, 32 heads
** of 256 for q, k and v, a ReLU MLP of 32768): of 4 x 10240 x 8192 + 2 x
** 10240 x 32768 matmul weights, o's 10240 x 8192 and fc2's 32768 x 10240
** are not replayed, 0.4167 of the layer's matmul time. */
Test(recompute, jax_full_remat_skips_what_feeds_the_sum) {
  model *m = th_model("tests/validation/models/maxtext2312.json", 2048);
  const wl_tf_dims *d = &m->info.tf;
  cr_assert(d->parallel_block && !d->gated);
  int k = wl_tf_layer_kind(d, 0);
  double all = 4 * 10240.0 * 8192 + 2 * 10240.0 * 32768;
  double unread = (10240.0 * 8192 + 32768.0 * 10240) / all;
  cr_assert_float_eq(unread, 0.4167, 1e-4);
  cr_assert_float_eq(framework_full_s(framework_find("maxtext"), d, k, 0, 3.0, 0.5, 2.0), 3 - 2 * unread,
                     1e-12);
  cr_assert_float_eq(framework_full_s(framework_find("megatron-core"), d, k, 0, 3.0, 0.5, 2.0), 3, 1e-12);
  /* the weights, for HFU's FLOPs: o's and fc2's */
  cr_assert_float_eq(framework_full_unread_weights(framework_find("maxtext"), d, k, 0),
                     10240.0 * 8192 + 32768.0 * 10240, 1);
  /* the tensor-parallel collectives replayed: a parallel block's
  ** all-gather of its input (with SP) but not the reduction after the
  ** summed outputs; a sequential block all but the one after fc2 */
  cr_assert_float_eq(framework_full_comm_share(framework_find("maxtext"), d, k, true), 0.5, 1e-12);
  cr_assert_float_eq(framework_full_comm_share(framework_find("maxtext"), d, k, false), 0, 1e-12);
  cr_assert_float_eq(framework_full_comm_share(framework_find("megatron-core"), d, k, true), 1, 1e-12);
  model *l = th_model("llama3-8b", 2048);
  int kl = wl_tf_layer_kind(&l->info.tf, 0);
  cr_assert_float_eq(framework_full_comm_share(framework_find("maxtext"), &l->info.tf, kl, true), 0.75,
                     1e-12);
  cr_assert_float_eq(framework_full_comm_share(framework_find("maxtext"), &l->info.tf, kl, false), 0.5,
                     1e-12);
  model_free(l);
  model_free(m);
}

/* MaxText's custom remat: the kept projections are not replayed, and a
** kept context (the core's output and log-sum-exp) leaves the attention
** core's forward out. Llama 3 8B with q, k and v kept: of its 218,103,808
** matmul weights a layer, q's 4096^2, k's and v's 4096 x 1024 and w2's
** 14336 x 4096 (unread anyway) are not replayed, 0.3846 of the matmul time. */
Test(recompute, maxtext_named_tensors_are_not_replayed) {
  model *m = th_model("llama3-8b", 4096);
  const wl_tf_dims *d = &m->info.tf;
  int k = wl_tf_layer_kind(d, 0), f = framework_find("maxtext");
  double all = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336;
  double qkv = (4096.0 * 4096 + 2 * 4096.0 * 1024 + 14336.0 * 4096) / all;
  cr_assert_float_eq(qkv, 0.3846, 1e-4);
  unsigned s = PLAN_RN_QUERY | PLAN_RN_KEY | PLAN_RN_VALUE;
  cr_assert_float_eq(framework_full_s(f, d, k, s, 3.0, 0.5, 2.0), 3 - 2 * qkv, 1e-12);
  cr_assert_float_eq(framework_full_s(f, d, k, s | PLAN_RN_CONTEXT, 3.0, 0.5, 2.0), 3 - 2 * qkv - 0.5,
                     1e-12);
  /* mlpwo names nothing the backward reads: the same as full */
  cr_assert_float_eq(framework_full_s(f, d, k, PLAN_RN_MLPWO, 3.0, 0.5, 2.0),
                     framework_full_s(f, d, k, 0, 3.0, 0.5, 2.0), 1e-12);
  model_free(m);
}
