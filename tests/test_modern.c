/*
** test_modern.c -- the plan and step features of today's training stacks
** (issue 16): Megatron-Core's sizes, uneven pipeline stages, context and
** expert parallelism, low-precision GEMM recipes, framework profiles.
** Each expected figure is derived by hand in its comment from the model's
** published dimensions and the rules the code cites.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/framework.h"
#include "../sim/sched.h"
#include "../sim/step.h"
#include "helpers.h"

static model *load(const char *src, int64_t seq) { return th_model(src, seq); }

static plan base(int64_t chips, int64_t tp, int64_t pp, int64_t gbs, int64_t seq) {
  return (plan){.chips = chips, .tp = tp, .pp = pp, .ep = 1, .cp = 1, .mbs = 1, .vp = 1,
                .slices = 1, .gbs = gbs, .seq = seq, .schedule = PLAN_1F1B,
                .precision = GDT_BF16};
}

/* Megatron-Core: chips = dp x tp x pp x cp, and ep x etp divides tp x dp x cp. */
Test(modern, megatron_core_sizes) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("mixtral-8x7b", 4096);
  char err[512];
  plan p = base(64, 2, 1, 256, 4096);
  p.cp = 2;
  p.ep = 8;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(p.dp, 16); /* 64 / (2 x 1 x 2) */
  cr_assert_eq(plan_expert_dp(&p), 8); /* tp 2 x dp 16 x cp 2 / (ep 8 x etp 1) */
  cr_assert_eq(plan_microbatches(&p), 16); /* 256 / (16 x 1): cp ranks share sequences */
  /* the older form, chips = dp x tp x pp x ep, is refused with the way to write it */
  plan q = base(16, 1, 1, 256, 4096);
  q.dp = 2;
  q.ep = 8;
  cr_assert_eq(plan_check(m, h, &q, err, sizeof err), -1);
  cr_assert(strstr(err, "write --dp 16 --ep 8"), "%s", err);
  /* cp must split the sequence in 2 cp chunks (causal load balance) */
  plan r = base(8, 1, 1, 8, 4096 + 8);
  r.cp = 8;
  r.seq = 4104; /* 4104 / 16 is not whole */
  cr_assert_eq(plan_check(m, h, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "not a multiple of 2 x cp = 16"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* Llama 3.1 405B has 126 decoder layers (its config); on pp 16 they split
** evenly only with the embedding and the loss counted as a layer each:
** (126 + 2) / 16 = 8 a stage, so stage 0 holds 7 decoder layers and the
** embedding, stage 15 holds 7 and the loss, the rest 8 (Megatron-Core's
** account-for-embedding/loss-in-pipeline-split). With V = 8 (128 virtual
** stages) the first and last hold no decoder layer. */
Test(modern, uneven_pipeline_split) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-405b", 2048);
  cr_assert_eq(m->info.tf.layers, 126);
  char err[512];
  plan p = base(128, 8, 16, 64, 2048);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), -1);
  cr_assert(strstr(err, "--pp-split-embedding --pp-split-loss"), "%s", err);
  p = base(128, 8, 16, 64, 2048);
  p.pp_split_embedding = p.pp_split_loss = true;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(plan_stage_layers(&p, 126, 0), 7);
  cr_assert_eq(plan_stage_layers(&p, 126, 1), 8);
  cr_assert_eq(plan_stage_layers(&p, 126, 15), 7);
  p.vp = 8;
  p.schedule = PLAN_INTERLEAVED;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(plan_stage_layers(&p, 126, 0), 0);
  cr_assert_eq(plan_stage_layers(&p, 126, 64), 1);
  cr_assert_eq(plan_stage_layers(&p, 126, 127), 0);
  /* an explicit list must count pp x V stages and add up to the layers */
  static const int32_t bad[4] = {30, 30, 30, 30};
  plan q = base(32, 8, 4, 64, 2048);
  q.pp_layers = bad, q.n_pp_layers = 4;
  cr_assert_eq(plan_check(m, h, &q, err, sizeof err), -1);
  cr_assert(strstr(err, "adds up to 120 layers; llama3-405b has 126"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* An explicit split equal to the even one gives the same step, and an
** uneven split with the same total work is never faster than the even one
** (the slowest stage paces 1F1B); the fast path equals the event engine. */
Test(modern, uneven_stages_schedule_as_given) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-8b", 2048);
  char err[512];
  plan p = base(32, 8, 4, 64, 2048);
  p.op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result even, same, skew;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &even, NULL, err, sizeof err), 0, "%s", err);
  static const int32_t eq[4] = {8, 8, 8, 8}, uneq[4] = {6, 10, 8, 8};
  plan q = p;
  q.pp_layers = eq, q.n_pp_layers = 4;
  cr_assert_eq(step_simulate(m, h, &q, NULL, &same, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(same.step_time_s, even.step_time_s, 1e-12 * even.step_time_s);
  q.pp_layers = uneq;
  cr_assert_eq(step_simulate(m, h, &q, NULL, &skew, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_gt(skew.step_time_s, even.step_time_s);
  step_times t;
  cr_assert_eq(step_fast(m, h, &q, &skew, NULL, &t, err, sizeof err), 0, "%s", err);
  /* the fast path times collectives by their closed form; the pipeline's
  ** own tasks are the same: equal to a part in 1e9 when nothing else differs */
  cr_assert(fabs(t.step_time_s - skew.step_time_s) < 0.02 * skew.step_time_s, "%g vs %g",
            t.step_time_s, skew.step_time_s);
  model_free(m);
  hw_catalog_free(c);
}

/* The quantization passes of a low-precision recipe (stepcost.c): each
** operand read in 2 B and written rowwise and columnwise in the format;
** current scaling reads it once more for its amax. So fp8-cs's layer
** costs fp8's plus 2 B per quantized element over the sustained HBM
** bandwidth. llama3-8b (hidden 4096, 32 heads of 128, 8 KV heads, FFN
** 14336, SwiGLU) at mbs 1, seq 2048, tp 1: forward inputs
** T (H + H + H + F) = 2048 x 26624 = 54,525,952 elements (QKV, proj, FC1,
** FC2); backward output gradients T ((q + 2 kv) + H + 2F + H) = 2048 x
** 43008 = 88,080,384. */
Test(modern, fp8_current_scaling_pays_an_amax_pass) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-8b", 2048);
  char err[512];
  plan p = base(8, 1, 1, 8, 2048);
  p.op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_precision_parse("fp8", &p), 0);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b, n;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(plan_precision_parse("fp8-cs", &p), 0);
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  double bw = h->chip.hbm_bw_bytes_per_s * h->chip.hbm_efficiency;
  cr_assert_float_eq(b.layer_fwd_s - a.layer_fwd_s, 54525952.0 * 2 / bw, 1e-12);
  cr_assert_float_eq(b.layer_bwd_s - a.layer_bwd_s, 88080384.0 * 2 / bw, 1e-12);
  /* and fp8 is faster than bf16, but by less than the 2x of its peak */
  cr_assert_eq(plan_precision_parse("bf16", &p), 0);
  cr_assert_eq(step_costs(m, h, &p, &n, err, sizeof err), 0, "%s", err);
  cr_assert_lt(a.layer_fwd_s, n.layer_fwd_s);
  cr_assert_gt(a.layer_fwd_s, n.layer_fwd_s / 2);
  /* a recipe the chip has no unit for is refused, naming the nearest */
  cr_assert_eq(plan_precision_parse("mxfp8", &p), 0);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), -1);
  cr_assert(strstr(err, "h100-sxm has no unit for mxfp8 GEMMs (nearest: --precision fp8)"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* Under Transformer Engine (the megatron-core profile) the GEMMs a layer
** norm feeds -- QKV and FC1, T H = 2048 x 4096 elements each for
** llama3-8b -- take their operand from the norm kernel
** (layernorm_linear.py with_quantized_norm; normalization.cpp): delayed
** scaling's norm writes fp8 itself (no pass, no kernel), current scaling's
** computes the amax in the norm and quantizes in one pass (2 B read,
** 2 x 1 B written). The other forward operands (proj, FC2: 37,748,736
** elements) and the backward's keep their passes. So under megatron-core
** fp8-cs's forward costs fp8's plus 4 B per norm-fed element, 2 B per
** other, and the two kernels delayed scaling does not launch; the backward
** as in the plain profile above. */
Test(modern, te_quantizes_inside_the_norm) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-8b", 2048);
  char err[512];
  plan p = base(8, 1, 1, 8, 2048);
  framework_apply(framework_find("megatron-core"), &p);
  p.op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_precision_parse("fp8", &p), 0);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(plan_precision_parse("fp8-cs", &p), 0);
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  double bw = h->chip.hbm_bw_bytes_per_s * h->chip.hbm_efficiency;
  double norm = 2.0 * 2048 * 4096, other = 54525952.0 - norm;
  cr_assert_float_eq(b.layer_fwd_s - a.layer_fwd_s,
                     (norm * 4 + other * 2) / bw + 2 * h->chip.op_overhead_s, 1e-12);
  cr_assert_float_eq(b.layer_bwd_s - a.layer_bwd_s, 88080384.0 * 2 / bw, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* Tensor-parallel overlap hides the collectives behind the GEMMs except
** the first of its tp chunks: exposed between comm / tp and comm. */
Test(modern, tp_overlap_hides_all_but_one_chunk) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-8b", 4096);
  char err[512];
  plan p = base(8, 8, 1, 8, 4096);
  p.sp = true;
  p.op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  p.tp_overlap = true;
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  cr_assert_lt(b.tp_comm_fwd_s, a.tp_comm_fwd_s);
  cr_assert_geq(b.tp_comm_fwd_s, a.tp_comm_fwd_s / 8 * (1 - 1e-12));
  model_free(m);
  hw_catalog_free(c);
}

/* Llama 3 8B at 32768 tokens on 8 h100-sxm at cp 8 (formula op costs),
** the plan checked: the context-parallel tests' case. */
static model *llama8b_cp8(const hw_model *h, plan *p) {
  char err[512];
  model *m = load("llama3-8b", 32768);
  *p = base(8, 1, 1, 8, 32768);
  p->cp = 8;
  p->op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_check(m, h, p, err, sizeof err), 0, "%s", err);
  return m;
}

/* Context parallelism: the ring exposes no more of the K/V exchange than
** the all-gather, which exposes all of it; the exchange moves a chip's K
** and V (2 x T/cp x kv heads x 128 x 2 B) to every other rank. */
Test(modern, cp_ring_hides_behind_attention) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  char err[512];
  plan p;
  model *m = llama8b_cp8(h, &p);
  step_result ring, ag;
  cr_assert_eq(step_costs(m, h, &p, &ring, err, sizeof err), 0, "%s", err);
  p.cp_comm = PLAN_CP_ALL_GATHER;
  cr_assert_eq(step_costs(m, h, &p, &ag, err, sizeof err), 0, "%s", err);
  cr_assert_gt(ring.cp_comm_fwd_s, 0);
  cr_assert_float_eq(ring.cp_comm_fwd_s, ag.cp_comm_fwd_s, 1e-15);
  cr_assert_float_eq(ag.tp_comm_fwd_s, ag.cp_comm_fwd_s, 1e-15); /* tp 1: only the exchange */
  cr_assert_leq(ring.tp_comm_fwd_s, ag.tp_comm_fwd_s);
  model_free(m);
  hw_catalog_free(c);
}

/* PyTorch's context_parallel as torchtitan runs it (torch.distributed.
** tensor.experimental._attention; torchtitan@9dec370): its Llama repeats
** K and V to the 32 query heads before SDPA, so the exchange moves 4x
** Megatron-Core's 8 KV heads' bytes; rotate method allgather by default
** (torchtitan's context_parallel_rotate_method), issued with the first
** (local, causal) block and waited for before the second; the backward
** gathers K and V again and passes dK and dV round the ring in fp32, cp
** hops of twice a block (convert_to_f32), the last waited for after the
** loop. By hand, step_cp_pytorch_exposed at cp 8 with a 80 ms attention
** core (10 ms a block forward, 25 backward): a 10 ms gather and 4 ms hops
** hide but the last hop; at cp 4 with a 40 ms core a 30 ms gather shows
** 20 ms forward, 5 + 12 ms backward (the last 12 ms hop), and the ring
** (10 ms a block each way) only that hop. */
Test(modern, pytorch_cp_moves_repeated_heads_in_fp32_back) {
  double f, b;
  step_cp_pytorch_exposed(10e-3, 4e-3, 80e-3, 8, false, &f, &b);
  cr_assert_float_eq(f, 0, 1e-15);
  cr_assert_float_eq(b, 4e-3, 1e-15);
  step_cp_pytorch_exposed(30e-3, 12e-3, 40e-3, 4, false, &f, &b);
  cr_assert_float_eq(f, 20e-3, 1e-15);
  cr_assert_float_eq(b, 17e-3, 1e-15);
  step_cp_pytorch_exposed(30e-3, 12e-3, 40e-3, 4, true, &f, &b);
  cr_assert_float_eq(f, 0, 1e-15);
  cr_assert_float_eq(b, 12e-3, 1e-15);
  plan q = {0};
  framework_apply(framework_find("torchtitan"), &q);
  cr_assert_eq(framework_cp_comm(&q), PLAN_CP_ALL_GATHER);
  framework_apply(framework_find("megatron-core"), &q);
  cr_assert_eq(framework_cp_comm(&q), PLAN_CP_RING);
  q.cp_comm = PLAN_CP_ALL_GATHER; /* --cp-comm all-gather */
  cr_assert_eq(framework_cp_comm(&q), PLAN_CP_ALL_GATHER);

  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  char err[512];
  plan p;
  model *m = llama8b_cp8(h, &p);
  step_result mc, tt;
  p.framework = framework_find("megatron-core");
  cr_assert_eq(step_costs(m, h, &p, &mc, err, sizeof err), 0, "%s", err);
  p.framework = framework_find("torchtitan");
  cr_assert_eq(step_costs(m, h, &p, &tt, err, sizeof err), 0, "%s", err);
  /* the same all-gather with 4x the bytes: a little under 4x the time
  ** (its latency does not grow) */
  double ratio = tt.cp_comm_fwd_s / mc.cp_comm_fwd_s;
  cr_assert(ratio > 3.8 && ratio <= 4.0, "repeated heads: %.3f x the exchange", ratio);
  cr_assert_float_eq(tt.cp_dkv_hop_s, 2 * tt.cp_comm_fwd_s / 7, 1e-15);
  cr_assert_float_eq(tt.cp_comm_bwd_s, tt.cp_comm_fwd_s + 8 * tt.cp_dkv_hop_s, 1e-15);
  cr_assert_float_eq(mc.cp_dkv_hop_s, 0, 0);
  model_free(m);
  hw_catalog_free(c);
}

/* The framework profiles: the default by chip kind, flags over the profile. */
Test(modern, framework_defaults_and_flags) {
  cr_assert_str_eq(framework_names[framework_default(HW_GPU)], "megatron-core");
  cr_assert_str_eq(framework_names[framework_default(HW_TPU)], "maxtext");
  cr_assert_str_eq(framework_names[0], "plain"); /* a zero-initialized plan's */
  th_run r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--json", NULL);
  cr_assert(strstr(r.out, "\"framework\":\t\"megatron-core\""), "%s", r.out);
  cr_assert(strstr(r.out, "\"zero\":\t1"), "%s", r.out);
  th_run_free(&r);
  r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--zero", "0",
             "--framework", "megatron-2021", "--json", NULL);
  cr_assert(strstr(r.out, "\"framework\":\t\"megatron-2021\""), "%s", r.out);
  cr_assert(strstr(r.out, "\"attention\":\t\"scores\""), "%s", r.out);
  cr_assert(strstr(r.out, "\"zero\":\t0"), "%s", r.out);
  th_run_free(&r);
  r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--framework", "megatron",
             NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "megatron-core"), "%s", r.err);
  th_run_free(&r);
}

/* DeepSeek V3's 61 layers on pp 8 x V 4 = 32 virtual stages: 61 = 32 x 1
** + 29, so 29 stages take a second layer, the middle ones from (32 - 29) / 2
** = 1 on: stage 0 and stages 30, 31 hold one. */
Test(modern, uneven_layers_balance_in_the_middle) {
  plan p = base(256, 1, 8, 256, 4096);
  p.vp = 4;
  int32_t out[64];
  cr_assert_eq(plan_balance_layers(&p, 61, out, 64), 32);
  int64_t sum = 0;
  for (int i = 0; i < 32; i++) sum += out[i];
  cr_assert_eq(sum, 61);
  cr_assert_eq(out[0], 1);
  cr_assert_eq(out[1], 2);
  cr_assert_eq(out[29], 2);
  cr_assert_eq(out[30], 1);
  cr_assert_eq(out[31], 1);
  cr_assert_eq(plan_balance_layers(&p, 64, out, 64), -1); /* even: nothing to balance */
}

/* torchtitan's selective recomputation (its op-level policy saves the
** outputs of the odd aten.mm calls in forward order and SDPA's, and replays
** the rest): Llama 3 8B's wk, wo and w3 of wq, wk, wv, wo, w1, w3, w2 --
** (1024 + 4096 + 14336) / (4096 + 2 x 1024 + 4096 + 3 x 14336) = 19456 /
** 53248 of the layer's matmul FLOPs (h 4096 times each width) -- and every
** kernel of the forward but the matmuls and the attention core; Megatron's
** recomputes the core. A GPT layer (6 h^2-multiple matmuls, no gate)
** replays wk, wo and fc2: 6 of 12. */
Test(modern, selective_means_what_the_framework_does) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load("llama3-8b", 4096);
  char err[512];
  plan p = base(8, 1, 1, 8, 4096);
  p.op_costs = OPCOST_FORMULA;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  framework_apply(framework_find("torchtitan"), &p);
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  step_desc none, sel;
  p.recompute = PLAN_RECOMPUTE_NONE;
  cr_assert_eq(step_describe(m, h, &p, &r, NULL, &none, err, sizeof err), 0, "%s", err);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  cr_assert_eq(step_describe(m, h, &p, &r, NULL, &sel, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(framework_selective_share(p.framework, &m->info.tf, 0), 19456.0 / 53248, 1e-12);
  double other = r.layer_fwd_s - r.attn_core_fwd_s - r.layer_mm_fwd_s;
  cr_assert_gt(r.layer_mm_fwd_s, 0);
  cr_assert_gt(other, 0);
  double want = 32 * (19456.0 / 53248 * r.layer_mm_fwd_s + other);
  cr_assert_float_eq(sel.sched.b_chunk - none.sched.b_chunk, want, 1e-12);
  wl_tf_dims gpt = {.layers = 2, .hidden = 1024, .heads = 16, .kv_heads = 16, .ffn_hidden = 4096};
  cr_assert_float_eq(framework_selective_share(p.framework, &gpt, 0), 0.5, 1e-12);
  /* a MoE layer keeps the profile's count share: its experts are not aten.mm */
  gpt.experts = 8;
  cr_assert_float_eq(framework_selective_share(p.framework, &gpt, WL_LAYER_MOE), 0.5, 1e-12);
  framework_apply(framework_find("megatron-core"), &p);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  step_result q;
  cr_assert_eq(step_costs(m, h, &p, &q, err, sizeof err), 0, "%s", err);
  p.recompute = PLAN_RECOMPUTE_NONE;
  cr_assert_eq(step_describe(m, h, &p, &q, NULL, &none, err, sizeof err), 0, "%s", err);
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  cr_assert_eq(step_describe(m, h, &p, &q, NULL, &sel, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(sel.sched.b_chunk - none.sched.b_chunk, 32 * q.attn_core_fwd_s, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* Megatron-Core's --pipeline-model-parallel-layout as Megatron-Bridge's
** DeepSeek-V3 recipes write it (scripts/performance/configs/deepseek/
** deepseek_workload_base_configs.py): 'Et|(tt|)*30mL' is 1 + 30 + 1 = 32
** stages, one layer with the embedding, two each, then the MTP layer and
** the loss alone: 1 + 60 = 61 layers; 'Et*4|(t*4|)*14tmL' is 16 stages of
** 4 and a last of one layer with them: 60 + 1 = 61. */
Test(modern, megatron_layouts_read_as_recipes_write_them) {
  int32_t out[64];
  int n;
  int64_t mtp;
  char err[256];
  cr_assert_eq(plan_pp_layout_parse("Et|(tt|)*30mL", out, 64, &n, &mtp, err, sizeof err), 0, "%s", err);
  cr_assert_eq(n, 32);
  cr_assert_eq(mtp, 1);
  cr_assert_eq(out[0], 1);
  for (int i = 1; i <= 30; i++) cr_assert_eq(out[i], 2);
  cr_assert_eq(out[31], 0);
  cr_assert_eq(plan_pp_layout_parse("Et*4|(t*4|)*14tmL", out, 64, &n, &mtp, err, sizeof err), 0, "%s", err);
  cr_assert_eq(n, 16);
  cr_assert_eq(out[0], 4);
  cr_assert_eq(out[14], 4);
  cr_assert_eq(out[15], 1);
  /* Megatron-Bridge's Llama 3 70B on H100 in FP8 since 2026-08-07
  ** (perf_recipes/llama/h100/llama3.py, commit 56ae11d): commas group, as
  ** Megatron-Core's parser drops them; 40 stages, 2 + 34 x 2 + 3 + 3 x 2 +
  ** 1 = 80 layers, rank 3's stage 35 takes the layer the last stage gives up */
  cr_assert_eq(plan_pp_layout_parse("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", out, 64, &n, &mtp, err,
                                    sizeof err), 0, "%s", err);
  cr_assert_eq(n, 40);
  cr_assert_eq(mtp, 0);
  cr_assert_eq(out[0], 2);
  cr_assert_eq(out[34], 2);
  cr_assert_eq(out[35], 3);
  cr_assert_eq(out[38], 2);
  cr_assert_eq(out[39], 1);
  /* what Megatron-Core would refuse, or tpusim cannot place, is said */
  static const char *const bad[] = {"Et|(tt|)*30m",  "tE|tL", "Et|(tt|*3L", "Et|tt)L", "Et|x|L",
                                    "Et|m|tL",       "Et|L|", "Et*0|L",     "ELL",     "",
                                    "((t*1000)*1000)*1000"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    cr_assert_eq(plan_pp_layout_parse(bad[i], out, 64, &n, &mtp, err, sizeof err), -1, "%s", bad[i]);
    cr_assert(strstr(err, "--pp-layout"), "%s: %s", bad[i], err);
  }
  cr_assert_eq(plan_pp_layout_parse("E|t|t|L", out, 3, &n, &mtp, err, sizeof err), -1);
}
