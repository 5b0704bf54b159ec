/*
** test_moe.c -- the mixture-of-experts mechanisms of the step model
** (issue 16): how many nodes a token's experts fall on (what a
** node-deduplicating dispatch sends over the scale-out network), the
** dispatch's time with and without that deduplication, and the token
** reordering passes of an all-to-all dispatch. Each expected figure is
** derived in its comment, or checked against exhaustive enumeration.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../base/diag.h"
#include "../hw_models/hw_catalog.h"
#include "../sim/framework.h"
#include "../sim/step_int.h"
#include "../sim/step.h"
#include "helpers.h"

/* The expected number of distinct nodes hit, by enumerating every choice:
** all C(G, M) group choices, then all C(M E/G, k) expert choices inside
** them, each equally likely (balanced routing); experts numbered so that
** node n holds experts [n E/N, (n + 1) E/N) and group g [g E/G, ...). */
static double enumerate_nodes(int E, int k, int N, int G, int M) {
  if (G < 2 || M >= G) G = 1, M = 1;
  double total = 0, count = 0;
  int pe = E / G;
  for (unsigned gm = 0; gm < 1u << G; gm++) {
    if (__builtin_popcount(gm) != M) continue;
    int sel[64], ns = 0;
    for (int g = 0; g < G; g++)
      if (gm >> g & 1)
        for (int e = 0; e < pe; e++) sel[ns++] = g * pe + e;
    for (unsigned long em = 0; em < 1ul << ns; em++) {
      if (__builtin_popcountl(em) != k) continue;
      unsigned hit = 0;
      for (int i = 0; i < ns; i++)
        if (em >> i & 1) hit |= 1u << (sel[i] / (E / N));
      total += __builtin_popcount(hit);
      count++;
    }
  }
  return total / count;
}

static wl_tf_dims routed(int64_t E, int64_t k, int64_t G, int64_t M) {
  return (wl_tf_dims){.experts = E, .top_k = k, .route_groups = G, .route_topk_groups = M};
}

/* The closed form (uniform, a node holding whole groups, a group spanning
** nodes) against enumeration on configurations small enough to list. */
Test(moe, nodes_hit_matches_enumeration) {
  static const int cases[][5] = {
      /* E, k, N, G, M */
      {8, 2, 4, 0, 0},   /* uniform: 4 (1 - C(6,2)/C(8,2)) = 4 (1 - 15/28) = 1.857 */
      {16, 4, 4, 0, 0},  /* uniform */
      {16, 4, 4, 4, 2},  /* a group a node (DeepSeek-V3's shape, scaled down) */
      {16, 4, 2, 4, 2},  /* two groups a node: the hypergeometric sum */
      {16, 3, 8, 4, 2},  /* a group over two nodes */
      {12, 3, 4, 6, 2},  /* 6 groups on 4 nodes: neither divides, the uniform bound */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const int *c = cases[i];
    wl_tf_dims d = routed(c[0], c[1], c[3], c[4]);
    double got = step_moe_nodes_hit(&d, c[2]);
    if (c[3] && c[3] % c[2] && c[2] % c[3]) { /* the uniform figure bounds the limited one */
      cr_assert_geq(got, enumerate_nodes(c[0], c[1], c[2], c[3], c[4]) - 1e-12, "case %zu", i);
      continue;
    }
    cr_assert_float_eq(got, enumerate_nodes(c[0], c[1], c[2], c[3], c[4]), 1e-12, "case %zu", i);
  }
  wl_tf_dims d = routed(8, 2, 0, 0);
  cr_assert_float_eq(step_moe_nodes_hit(&d, 4), 4 * (1 - 15.0 / 28), 1e-12);
  cr_assert_float_eq(step_moe_nodes_hit(&d, 1), 1, 0); /* one node: always that one */
  d.top_k = 1;
  cr_assert_float_eq(step_moe_nodes_hit(&d, 4), 1, 1e-12); /* one expert, one node */
}

/* DeepSeek-V3's HF config: 256 experts in n_group 8 groups, topk_group 4,
** top-8. On 8 nodes (EP 64, 4 experts a GPU, 8 GPUs a node) a node is one
** group: it is hit when its group is one of the token's 4 (1/2), and then
** unless all 8 picks among the 128 experts of those groups avoid its 32:
** 8 x 1/2 x (1 - C(96,8)/C(128,8)) = 4 x (1 - 0.0927473) = 3.62901.
** Without the group limit, 8 x (1 - C(224,8)/C(256,8)) = 8 x (1 - 0.338168)
** = 5.29465: the limit is what DeepSeek-V3 sec. 2.1.2 introduced it for. */
Test(moe, nodes_hit_deepseek_v3) {
  model *m = th_model("tests/data/hf/deepseek-v3.json", 4096);
  const wl_tf_dims *d = &m->info.tf;
  cr_assert_eq(d->route_groups, 8);
  cr_assert_eq(d->route_topk_groups, 4);
  cr_assert_float_eq(step_moe_nodes_hit(d, 8), 3.6290109, 1e-6);
  wl_tf_dims u = *d;
  u.route_groups = u.route_topk_groups = 0;
  cr_assert_float_eq(step_moe_nodes_hit(&u, 8), 5.2946520, 1e-6);
  model_free(m);
}

/* n_group must divide the experts, and topk_group needs n_group. */
Test(moe, bad_groups_are_refused) {
  static const struct {
    const char *moe, *says;
  } rows[] = {
      {"{\"experts\": 8, \"top_k\": 2, \"n_group\": 3}", "n_group 3 does not divide experts 8"},
      {"{\"experts\": 8, \"top_k\": 2, \"topk_group\": 2}",
       "topk_group 2 needs n_group of at least that many groups (n_group 0)"},
  };
  const char *base = "{\"name\": \"m\", \"family\": \"transformer\", \"layers\": 2, \"hidden\": 64,"
                     " \"heads\": 4, \"ffn_hidden\": 128, \"vocab\": 100, \"seq_len\": 16,"
                     " \"moe\": MOE}";
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char *t = th_replace(base, "MOE", rows[i].moe);
    diag *dg = diag_new();
    model *m = model_load(th_write_temp("bad-groups.json", t), NULL, dg);
    cr_assert_null(m);
    cr_assert_geq(diag_count(dg), 1);
    cr_assert(strstr(diag_message(dg, 0), rows[i].says), "%s", diag_message(dg, 0));
    cr_assert(strstr(diag_message(dg, 0), "bad-groups.json:1:"), "%s", diag_message(dg, 0));
    diag_free(dg);
    free(t);
  }
}

/* The two reorder passes of one MoE layer's forward: Qwen3 235B (hidden
** 4096, top-8, 128 experts) at mbs 1, seq 4096, ep 8 (16 experts a chip):
** 2 passes x (read + write) x 4096 tokens x 8 copies x 4096 x 2 B
** = 1,073,741,824 B. None without ep, none with one expert a chip. */
Test(moe, reorder_bytes_one_layer) {
  model *m = th_model("tests/data/hf/qwen3-235b-a22b.json", 4096);
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 1, .seq = 4096};
  cr_assert_float_eq(step_moe_reorder_bytes(&m->info.tf, &p), 1073741824.0, 0.5);
  p.ep = 1;
  cr_assert_float_eq(step_moe_reorder_bytes(&m->info.tf, &p), 0, 0);
  p.ep = 128;
  cr_assert_float_eq(step_moe_reorder_bytes(&m->info.tf, &p), 0, 0);
  model_free(m);
}

/* The dispatch of DeepSeek-V3 on 128 H100s (tp 2 with sp, ep 64: 8 nodes
** of 8): an NCCL all-to-all sends each of a chip's 2,048 tokens 8 times,
** 7/8 of them off the node over its 50 GB/s NIC; a deduplicating dispatcher
** sends it once per remote node among the token's 3.629 expected ones
** (nodes_hit_deepseek_v3), so the scale-out part shrinks to 3.629 / 8 =
** 0.454 of it, while the NVLink forwarding (8 copies at 900 GB/s) stays far
** shorter. The ratio of the two dispatch times is then at most 0.454: the
** flat exchange's 63 peers a chip reach a lower rate on the simulated
** network than the deduplicated one's 7 (about 44 against 50 GB/s), which
** takes it to about 0.40. The megatron-core-24.07 profile sends it flat. */
Test(moe, dedup_dispatch_deepseek_v3) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model("tests/data/hf/deepseek-v3.json", 4096);
  char err[512];
  plan p = {.chips = 128, .tp = 2, .pp = 1, .ep = 64, .cp = 1, .mbs = 1, .vp = 1, .slices = 1,
            .gbs = 64, .seq = 4096, .sp = true, .schedule = PLAN_1F1B,
            .precision = GDT_BF16, .op_costs = OPCOST_FORMULA};
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result flat, dedup;
  p.framework = framework_find("plain");
  cr_assert_eq(step_costs(m, h, &p, &flat, err, sizeof err), 0, "%s", err);
  p.framework = framework_find("megatron-core");
  cr_assert_eq(step_costs(m, h, &p, &dedup, err, sizeof err), 0, "%s", err);
  double ratio = dedup.ep_a2a_fwd_s / flat.ep_a2a_fwd_s;
  cr_assert(ratio > 0.35 && ratio <= 0.455, "dedup / flat = %.3f", ratio);
  /* NeMo's launcher of 2024 ran the alltoall dispatcher (its Mixtral
  ** configs' moe_token_dispatcher_type): the flat exchange's time */
  step_result nemo;
  p.framework = framework_find("megatron-core-24.07");
  cr_assert_eq(step_costs(m, h, &p, &nemo, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(nemo.ep_a2a_fwd_s, flat.ep_a2a_fwd_s, 1e-15);
  /* inside one node DeepEP sends a token once per rank that holds any of
  ** its experts (get_dispatch_layout's is_token_in_rank), not once per
  ** expert: with one expert group a rank at ep 8, 3.629 of the 8 copies
  ** (nodes_hit_deepseek_v3), the same exchange with 0.454 of its bytes
  ** (its latency does not shrink: a little over 0.454 of its time) */
  p.chips = 16, p.dp = 0, p.ep = 8, p.gbs = 64;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  p.framework = framework_find("plain");
  cr_assert_eq(step_costs(m, h, &p, &flat, err, sizeof err), 0, "%s", err);
  p.framework = framework_find("megatron-core");
  cr_assert_eq(step_costs(m, h, &p, &dedup, err, sizeof err), 0, "%s", err);
  ratio = dedup.ep_a2a_fwd_s / flat.ep_a2a_fwd_s;
  cr_assert(ratio > 3.6290109 / 8 * 0.97 && ratio <= 3.6290109 / 8 * 1.01, "in-node dedup / flat = %.4f",
            ratio);
  model_free(m);
  hw_catalog_free(c);
}

/* One chip, one micro-batch of mbs x seq, the graph's formulas; and the
** per-chip costs of model m on two chips (a hardware file and its copy with
** one figure changed), for the tests that compare them. */
static plan one_chip(int64_t mbs, int64_t seq) {
  return (plan){.chips = 1, .tp = 1, .pp = 1, .ep = 1, .cp = 1, .mbs = mbs, .vp = 1, .slices = 1,
                .gbs = mbs, .seq = seq, .schedule = PLAN_1F1B, .precision = GDT_BF16,
                .op_costs = OPCOST_FORMULA};
}

static void costs_on_both(const model *m, const hw_model *x, const hw_model *y, const plan *p,
                          step_result *a, step_result *b) {
  char err[512];
  cr_assert_eq(step_costs(m, x, p, a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_costs(m, y, p, b, err, sizeof err), 0, "%s", err);
}

/* H100's grouped-GEMM points (DeepGEMM on H800, hw_models/h100-sxm.json
** notes): 0.730 at 256 tokens an expert, 0.818 at 512, 0.896 at 1024,
** 0.994 at 4096, 1 from 8192; linear in log2 between them. At 362 tokens
** (sqrt(256 x 512)) halfway: (0.730 + 0.818) / 2 = 0.774; at 2048 (halfway
** from 1024 to 4096 in log2) (0.896 + 0.994) / 2 = 0.945; at 5793 (halfway
** from 4096 to 8192) (0.994 + 1) / 2 = 0.997. Below 256 the 256 figure;
** a chip without the data (B200) loses nothing. */
Test(moe, grouped_gemm_factor_interpolates_the_measured_points) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 256, false), 0.730, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, sqrt(256.0 * 512), false), 0.774, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 2048, false), 0.945, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, sqrt(4096.0 * 8192), false), 0.997, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 64, false), 0.730, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 8192, false), 1, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 1e6, false), 1, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(th_hw(c, "b200"), 128, false), 1, 0);
  /* a backward product reads the forward's points where the chip measured
  ** none of its own (H100), its own where it did (v5p: tokamax's input and
  ** weight gradients, 0.614 at 256 rows against the forward's 0.659) */
  cr_assert_float_eq(hw_grouped_gemm_factor(h, 2048, true), 0.945, 1e-12);
  const hw_model *v5 = th_hw(c, "tpu-v5p");
  cr_assert_float_eq(hw_grouped_gemm_factor(v5, 256, true), 0.614, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(v5, 256, false), 0.659, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_factor(v5, 2048, true), (0.857 + 1) / 2, 1e-12);
  hw_catalog_free(c);
}

/* Blackwell's grouped rate was measured at one expert GEMM (DeepSeek-V3's
** on GB200: 4,096 tokens, N 2,048, K 7,168; hw_models/b200.json
** grouped_gemm_at), and Transformer Engine's GroupedLinear runs one cuBLAS
** GEMM per expert, so another expert runs at the plain GEMM table's rate
** at its shape over the table's rate at that one. On the grid points the
** interpolation is the table's cell, and K 7,168 clamps to the grid's end
** (4,096): 2,048 tokens at N 2,048, K 4,096 run at b200.json's m2048 cell
** 0.7233 over the m4096 cell 0.8034; 8,192 tokens at the m8192 cell 0.8469
** over it (faster than the measured point). H100 gives measured points by
** tokens a group instead (DeepGEMM's), so the shape does not scale it.
** Qwen3-30B-A3B's experts (2,048 x 768, top-8 of 128) at 4,096 tokens on
** one chip have 256 rows a group: under a per-expert stack (megatron-core)
** its MoE layer is slower than on the same chip without the measured
** shape, and a stack with one fused grouped kernel (the plain profile) is
** timed the same on both. */
Test(moe, per_expert_gemms_run_at_their_shape_rate) {
  hw_catalog *c = th_catalog();
  const hw_model *b = th_hw(c, "b200");
  cr_assert_float_eq(hw_grouped_gemm_shape_factor(b, 4096, 2048, 7168), 1, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_shape_factor(b, 2048, 2048, 4096), 0.7233 / 0.8034, 1e-9);
  cr_assert_float_eq(hw_grouped_gemm_shape_factor(b, 8192, 2048, 7168), 0.8469 / 0.8034, 1e-9);
  cr_assert_float_eq(hw_grouped_gemm_shape_factor(th_hw(c, "h100-sxm"), 256, 768, 2048), 1, 0);
  hw_model flat = *b;
  flat.chip.grouped_gemm_at_m = 0;
  plan p = one_chip(1, 4096);
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  step_result x, y;
  costs_on_both(m, b, &flat, &p, &x, &y);
  cr_assert_float_eq(x.layer_fwd_s, y.layer_fwd_s, 0);
  p.framework = framework_find("megatron-core");
  costs_on_both(m, b, &flat, &p, &x, &y);
  cr_assert_gt(x.layer_fwd_s, y.layer_fwd_s);
  cr_assert_gt(x.layer_bwd_s, y.layer_bwd_s);
  model_free(m);
  hw_catalog_free(c);
}

/* The grouped rate slows only the expert GEMMs, and only where they are
** bound by arithmetic. Mixtral 8x7B (8 experts of 4096 x 14336, top-2) on
** H100 at 2048 tokens: 2048 x 2 / 8 = 512 tokens an expert, the 0.818
** point; an up-projection's 2 x 8 x 512 x 4096 x 14336 = 481 GFLOP take
** 0.61 ms at 989 TFLOP/s x 0.803, against 0.28 ms to stream its 940 MB of
** weights at 3.35 TB/s: compute-bound, so the MoE layer is slower than on
** the same chip without the data, by less than 1 / 0.818 (attention and
** the rest are untouched). At 512 tokens (128 an expert, the 0.730 point)
** the same GEMM's 120 GFLOP take 0.15 ms, / 0.730 = 0.21 ms, still under
** the 0.28 ms of its weights: streaming-bound either way, nothing changes.
** A dense model's layer is timed exactly as before (no dot of it is a
** grouped one). */
Test(moe, grouped_gemm_slows_only_experts) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  hw_model flat = *h;
  memset(flat.chip.grouped_gemm_eff, 0, sizeof flat.chip.grouped_gemm_eff);
  plan p = one_chip(1, 2048);
  model *m = th_model("mixtral-8x7b", 2048);
  step_result a, b;
  costs_on_both(m, h, &flat, &p, &a, &b);
  cr_assert_gt(a.layer_fwd_s, b.layer_fwd_s);
  cr_assert_gt(a.layer_bwd_s, b.layer_bwd_s);
  cr_assert_lt(a.layer_fwd_s, b.layer_fwd_s / 0.818);
  cr_assert_float_eq(a.head_fwd_s, b.head_fwd_s, 1e-15);
  p.seq = 512;
  costs_on_both(m, h, &flat, &p, &a, &b);
  cr_assert_float_eq(a.layer_fwd_s, b.layer_fwd_s, 1e-12);
  model_free(m);
  m = th_model("llama3-8b", 2048);
  p.seq = 2048;
  costs_on_both(m, h, &flat, &p, &a, &b);
  cr_assert_float_eq(a.layer_fwd_s, b.layer_fwd_s, 0);
  cr_assert_float_eq(a.layer_bwd_s, b.layer_bwd_s, 0);
  model_free(m);
  hw_catalog_free(c);
}

/* TPU7x's grouped kernel (tokamax ragged_dot, hw_models/tpu-v7x.json
** notes) stays below a plain GEMM even at 4,096 rows a group: 0.699 of the
** peak forward and 0.594 backward, against matmul_efficiency 0.965, so the
** ceilings are 0.699 / 0.965 and 0.594 / 0.965; a chip without the figures
** (H100: DeepGEMM reaches the plain rate at 8,192 rows) has 1. With
** Qwen3-30B-A3B's experts (128 of 2048 x 768, top-8) at 16,384 tokens,
** 16,384 x 8 / 128 = 1,024 rows a group (512 on each of the two
** TensorCores, the table's 0.594 point in both runs): compute-bound
** (a 2 x 1024 x 2048 x 768 GEMM per expert against its 3 MB of weights), so
** the MoE layer's forward slows against the same chip at ceiling 1, by less
** than 0.965 / 0.699 (attention and the router are untouched), and the
** backward by more than the forward (0.594 < 0.699). */
Test(moe, grouped_gemm_ceiling_slows_tpu7x_experts) {
  hw_catalog *c = th_catalog();
  const hw_model *v7 = th_hw(c, "tpu-v7x");
  cr_assert_float_eq(hw_grouped_gemm_ceiling(v7, false), 0.699 / 0.965, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_ceiling(v7, true), 0.594 / 0.965, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_ceiling(th_hw(c, "h100-sxm"), false), 1, 0);
  cr_assert_float_eq(hw_grouped_gemm_ceiling(th_hw(c, "h100-sxm"), true), 1, 0);
  hw_model flat = *v7;
  flat.chip.grouped_gemm_efficiency = flat.chip.grouped_gemm_bwd_efficiency = flat.chip.matmul_efficiency;
  plan p = one_chip(4, 4096);
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  step_result a, b;
  costs_on_both(m, v7, &flat, &p, &a, &b);
  cr_assert_gt(a.layer_fwd_s, b.layer_fwd_s);
  cr_assert_lt(a.layer_fwd_s, b.layer_fwd_s * 0.965 / 0.699);
  cr_assert_gt(a.layer_bwd_s / b.layer_bwd_s, a.layer_fwd_s / b.layer_fwd_s);
  cr_assert_float_eq(a.head_fwd_s, b.head_fwd_s, 1e-15);
  model_free(m);
  hw_catalog_free(c);
}

/* Blackwell's grouped expert GEMM (Megatron-Core's MXFP8 multi-stream
** cuBLAS GroupedLinear on GB200, hw_models/gb200.json notes): 2,672 TFLOP/s
** at K 7168, N 2048 against the chip's plain fp8 GEMM at 3615.6 (MAMF), so
** a grouped GEMM runs at 2672 / 3615.6 = 0.739 of a plain one, forward and
** backward (no backward measured: the forward's). The other Blackwell chips
** take GB200's ratio over their own matmul_efficiency (rounded to 3
** digits in the files). With Qwen3-30B-A3B on one B200 the MoE layer slows
** against the same chip at the plain rate, by less than 1 / 0.739. */
Test(moe, grouped_gemm_ceiling_on_blackwell_is_the_gb200_measurement) {
  hw_catalog *c = th_catalog();
  const char *chips[] = {"gb200", "b200", "b300", "gb300"};
  for (size_t i = 0; i < 4; i++) {
    const hw_model *h = th_hw(c, chips[i]);
    cr_assert_float_eq(hw_grouped_gemm_ceiling(h, false), 2672 / 3615.6, 1e-3, "%s", chips[i]);
    cr_assert_float_eq(hw_grouped_gemm_ceiling(h, true), 2672 / 3615.6, 1e-3, "%s", chips[i]);
  }
  const hw_model *b = th_hw(c, "b200");
  hw_model flat = *b;
  flat.chip.grouped_gemm_efficiency = flat.chip.grouped_gemm_bwd_efficiency = 0;
  plan p = one_chip(4, 4096);
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  step_result x, y;
  costs_on_both(m, b, &flat, &p, &x, &y);
  cr_assert_gt(x.layer_fwd_s, y.layer_fwd_s);
  cr_assert_lt(x.layer_fwd_s, y.layer_fwd_s / (2672 / 3615.6));
  cr_assert_gt(x.layer_bwd_s, y.layer_bwd_s);
  cr_assert_float_eq(x.head_fwd_s, y.head_fwd_s, 1e-15);
  model_free(m);
  hw_catalog_free(c);
}

/* TPU7x's grouped kernel on widths that are not a multiple of its
** 256-wide MXU (tokamax ragged_dot at gpt-oss's 2880 x 2880 experts,
** hw_models/tpu-v7x.json notes): 0.302, 0.300 and 0.284 of a TensorCore's
** peak for the forward, input and weight gradients at 2,560 rows a group.
** The timing pads such an expert to the tile first (2880 -> 3072 in the
** expert dims a product has beside the rows: K and N forward and for the
** input gradient, 1.138 of the FLOPs; N for the weight gradient, whose K is
** the rows, 1.067), then applies the figure: the measured rates net of that
** padding over the aligned kernel's 0.699 x 0.921 and (by the backward's
** own rows table) 0.594 x 0.897 there, 0.581 as the three products' mean. The rule is by width: either of an
** expert's two dims off the MXU's multiple. */
Test(moe, unaligned_expert_width_factor_is_the_measured_rate) {
  hw_catalog *c = th_catalog();
  const hw_model *v7 = th_hw(c, "tpu-v7x");
  cr_assert_float_eq(hw_grouped_gemm_width_factor(v7, 2880, 2880), 0.581, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_width_factor(v7, 2048, 2880), 0.581, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_width_factor(v7, 704, 2816), 0.581, 1e-12);
  cr_assert_float_eq(hw_grouped_gemm_width_factor(v7, 2048, 768), 1, 0);
  cr_assert_float_eq(hw_grouped_gemm_width_factor(th_hw(c, "h100-sxm"), 2880, 2880), 1, 0);
  double f2560 = 0.767 + (1.0 - 0.767) * (log2(2560.0) - 10) / 2, pad = 3072.0 / 2880;
  double b2560 = 0.695 + (1.0 - 0.695) * (log2(2560.0) - 10) / 2;
  double flops = 2.0 * 327680 * 2880 * 2880, tc = 1153.5e12;
  double fwd = flops / 15.579e-3 / tc * pad * pad / (0.699 * f2560);
  double dlhs = flops / 15.697e-3 / tc * pad * pad / (0.594 * b2560);
  double tgmm = flops / 16.618e-3 / tc * pad / (0.594 * b2560);
  cr_assert(fabs((fwd + dlhs + tgmm) / 3 - 0.581) < 0.0005, "mean %.4f", (fwd + dlhs + tgmm) / 3);
  hw_catalog_free(c);
}

/* The three measured kernels timed as the step times them
** (step_time_graph_gemm's grouped path): 128 experts of 2880 x 2880 on one
** TPU7x chip with 5,120 rows a group, which its two TensorCores split into
** tokamax's 2,560 (a chip's peak is two TensorCores', its FLOPs twice one
** TensorCore's call: the same time). Forward (x W), input gradient (dy W^T)
** and weight gradient (x^T dy): 15.579, 15.697 and 16.618 ms measured; one
** figure for the three (their own figures 0.535, 0.641 and 0.568 about the
** mean 0.581, the input gradient's 10.3 % off it) puts each within 11 % and
** their sum within 1 %. The entry takes tokamax's times at the top clock
** state (p-state 7) and runs a step at libtpu's default
** (chip.sustained_clock_ratio 0.861): the step's time times that ratio
** against each measured time. */
/* The three grouped products of G experts, R rows a group, K wide in and
** N out, as the step times them (step_time_graph_gemm's grouped path):
** forward x[G,R,K] W[G,K,N]; input gradient dy[G,R,N] W[G,K,N]^T; weight
** gradient x^T dy over the rows. */
static void grouped_products(const hw_model *h, int64_t G, int64_t R, int64_t K, int64_t N, double t3[3]) {
  for (int k = 0; k < 3; k++) {
    graph *g = graph_new("t");
    graph_set_layer(g, 0);
    if (k > 0) graph_set_phase(g, GRAPH_BACKWARD);
    int x = graph_parameter(g, "x", GRAPH_SHAPE(GDT_BF16, G, R, k == 1 ? N : K), 0);
    int y = graph_parameter(g, "y", k == 2 ? GRAPH_SHAPE(GDT_BF16, G, R, N) : GRAPH_SHAPE(GDT_BF16, G, K, N),
                            k == 2 ? 0 : GRAPH_WEIGHT);
    graph_dims b = graph_dims_of(1, 0);
    /* forward contracts x's 2 with W's 1, the input gradient dy's 2 with
    ** W's 2, the weight gradient the rows: x's 1 with dy's 1 */
    int d = graph_dot(g, x, y, b, b, graph_dims_of(1, k == 2 ? 1 : 2),
                      graph_dims_of(1, k == 0 ? 1 : k == 1 ? 2 : 1), GDT_BF16);
    cr_assert(graph_ok(g) && d >= 0);
    opcost *oc = opcost_new(OPCOST_FORMULA);
    phase_times t;
    char err[256] = "";
    cr_assert_eq(step_time_graph_gemm(h, NULL, g, &(step_kernels){.moe = 1}, oc, &t, NULL, err, sizeof err), 0,
                 "%s", err);
    t3[k] = t.t[k > 0 ? GRAPH_BACKWARD : GRAPH_FORWARD];
    opcost_free(oc);
    graph_free(g);
  }
}

Test(moe, unaligned_expert_gemms_take_their_measured_time) {
  hw_catalog *c = th_catalog();
  static const double measured[3] = {15.579e-3, 15.697e-3, 16.618e-3};
  double t3[3], sum = 0, msum = 0;
  grouped_products(th_hw(c, "tpu-v7x"), 128, 5120, 2880, 2880, t3);
  for (int k = 0; k < 3; k++) {
    double got = t3[k] * 0.861;
    cr_assert(fabs(got / measured[k] - 1) < 0.11, "product %d: %g s vs %g s", k, got, measured[k]);
    sum += got, msum += measured[k];
  }
  cr_assert(fabs(sum / msum - 1) < 0.01, "sum %g s vs %g s", sum, msum);
  hw_catalog_free(c);
}

/* TPU v5p's grouped kernel (tokamax's ragged_dot on one megacore device,
** the chip one device: chip.devices absent) at 4,096 rows a group, 128
** experts of 4096 -> 1536: measured forward [524288,4096]x[128,4096,1536]
** 31.372 ms, input gradient [524288,1536]x[128,4096,1536] 31.535 ms, weight
** gradient 34.089 ms. By hand: 2 x 524288 x 4096 x 1536 = 6.597 TFLOP at
** 0.457 of 459 TFLOP/s = 31.45 ms forward, at the backward's 0.439
** 32.74 ms each; the sum within 1 % of the measured, each within 5 %. */
Test(moe, v5p_expert_gemms_take_their_measured_time) {
  hw_catalog *c = th_catalog();
  static const double measured[3] = {31.372e-3, 31.535e-3, 34.089e-3};
  double t3[3], sum = 0, msum = 0;
  cr_assert_eq(th_hw(c, "tpu-v5p")->chip.devices, 1);
  cr_assert_eq(th_hw(c, "tpu-v7x")->chip.devices, 2);
  grouped_products(th_hw(c, "tpu-v5p"), 128, 4096, 4096, 1536, t3);
  cr_assert_float_eq(t3[0], 2.0 * 524288 * 4096 * 1536 / (459e12 * 0.457), 31.45e-3 * 0.01, "%g", t3[0]);
  for (int k = 0; k < 3; k++) {
    cr_assert(fabs(t3[k] / measured[k] - 1) < 0.05, "product %d: %g s vs %g s", k, t3[k], measured[k]);
    sum += t3[k], msum += measured[k];
  }
  cr_assert(fabs(sum / msum - 1) < 0.01, "sum %g s vs %g s", sum, msum);
  hw_catalog_free(c);
}

/* Small groups: tokamax's v5p file at 256 rows a group, 256 experts of
** 7168 -> 2048 ([65536,7168]x[256,7168,2048]): forward 13.939 ms, input
** gradient 13.849 ms, weight gradient (tgmm) 17.755 ms. By hand: 2 x 65536
** x 7168 x 2048 = 1.924 TFLOP at 459 TFLOP/s x 0.457 x 0.659 = 13.92 ms
** forward, at 0.439 x 0.614 = 15.55 ms each backward product; the sum
** within 2 % of the measured 45.54 ms (the forward's rows table read for
** the backward, 0.659, would be 5.8 % fast), each within 15 %. */
Test(moe, v5p_small_group_backward_takes_its_measured_time) {
  hw_catalog *c = th_catalog();
  static const double measured[3] = {13.939e-3, 13.849e-3, 17.755e-3};
  double t3[3], sum = 0, msum = 0, flops = 2.0 * 65536 * 7168 * 2048;
  grouped_products(th_hw(c, "tpu-v5p"), 256, 256, 7168, 2048, t3);
  cr_assert_float_eq(t3[0], flops / (459e12 * 0.457 * 0.659), 13.92e-3 * 0.005, "%g", t3[0]);
  cr_assert_float_eq(t3[2], flops / (459e12 * 0.439 * 0.614), 15.55e-3 * 0.005, "%g", t3[2]);
  for (int k = 0; k < 3; k++) {
    cr_assert(fabs(t3[k] / measured[k] - 1) < 0.15, "product %d: %g s vs %g s", k, t3[k], measured[k]);
    sum += t3[k], msum += measured[k];
  }
  cr_assert(fabs(sum / msum - 1) < 0.02, "sum %g s vs %g s", sum, msum);
  hw_catalog_free(c);
}

/* The rule in a step: Qwen3-30B-A3B's experts (2048 x 768, multiples of
** 256) keep their rate to the last bit; gpt-oss 20B's (2880 x 2880) slow,
** its layer by less than the figure's inverse (attention and the router
** unchanged). */
Test(moe, unaligned_expert_width_slows_only_unaligned_experts) {
  hw_catalog *c = th_catalog();
  const hw_model *v7 = th_hw(c, "tpu-v7x");
  hw_model aligned = *v7;
  aligned.chip.grouped_gemm_unaligned = 0;
  plan p = one_chip(4, 4096);
  model *q = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  step_result a, b;
  costs_on_both(q, v7, &aligned, &p, &a, &b);
  cr_assert_float_eq(a.layer_fwd_s, b.layer_fwd_s, 0);
  cr_assert_float_eq(a.layer_bwd_s, b.layer_bwd_s, 0);
  model_free(q);
  model *o = th_model("tests/data/hf/gpt-oss-20b.json", 4096);
  costs_on_both(o, v7, &aligned, &p, &a, &b);
  cr_assert_gt(a.layer_fwd_s, b.layer_fwd_s);
  cr_assert_lt(a.layer_fwd_s, b.layer_fwd_s / 0.581);
  cr_assert_gt(a.layer_bwd_s, b.layer_bwd_s);
  cr_assert_float_eq(a.head_fwd_s, b.head_fwd_s, 1e-15);
  model_free(o);
  hw_catalog_free(c);
}

/* EP all-to-all overlap (Megatron-Core --overlap-moe-expert-parallel-comm):
** what a pass's dispatch and combine add is the part the paired
** micro-batch's opposite pass cannot cover, plus the compute slowed while
** it covers the rest by the dispatcher's share of the SMs.
** - Qwen3-235B's figures on GB200 (simulate --explain, megatron-core):
**   a2a 766 us, backward 3.35 ms: all covered; HybridEP on 32 of the 148
**   SMs (perf_recipes/_common.py moe_hybridep_num_sms = 32; GB200's 148
**   SMs, hw_models/gb200.json) slows the covered 766 us by 32/148:
**   766e-6 x 32 / 148 = 165.62e-6 s.
** - a2a 2 ms under a 1.5 ms pass, a quarter of the SMs: 0.5 ms shows, and
**   1.5 ms x 0.25 = 0.375 ms of slowed compute: 0.875 ms.
** - copy-engine transfers (share 0) under a longer pass: nothing; with no
**   partner (other 0): the whole a2a. */
Test(moe, a2a_overlap_exposed) {
  cr_assert_float_eq(step_moe_a2a_exposed_s(766e-6, 3.35e-3, 32.0 / 148), 766e-6 * 32 / 148,
                     1e-15);
  cr_assert_float_eq(step_moe_a2a_exposed_s(766e-6, 3.35e-3, 32.0 / 148), 165.62e-6, 1e-8);
  cr_assert_float_eq(step_moe_a2a_exposed_s(2e-3, 1.5e-3, 0.25), 0.875e-3, 1e-15);
  cr_assert_float_eq(step_moe_a2a_exposed_s(2e-3, 5e-3, 0), 0, 0);
  cr_assert_float_eq(step_moe_a2a_exposed_s(2e-3, 0, 0.25), 2e-3, 0);
  cr_assert_float_eq(step_moe_a2a_exposed_s(0, 1e-3, 0.25), 0, 0);
}

/* The 26.08 recipes overlap only on their MXFP8 path on NVL72
** (_enable_hybridep_full_iteration_mxfp8, called from the gb200/gb300
** fp8mx configs): not in bf16, not on an 8-GPU B200 node, and never under
** the plain megatron-core profile. */
Test(moe, a2a_overlap_profile_rule) {
  hw_catalog *c = th_catalog();
  int f26 = framework_find("megatron-core-26.08"), mc = framework_find("megatron-core");
  cr_assert_geq(f26, 0);
  plan p = {0};
  cr_assert_eq(plan_precision_parse("mxfp8", &p), 0);
  cr_assert(framework_moe_a2a_overlap(f26, &p, th_hw(c, "gb200")));
  cr_assert(framework_moe_a2a_overlap(f26, &p, th_hw(c, "gb300")));
  cr_assert_not(framework_moe_a2a_overlap(f26, &p, th_hw(c, "b200")));
  cr_assert_not(framework_moe_a2a_overlap(mc, &p, th_hw(c, "gb200")));
  cr_assert_eq(plan_precision_parse("bf16", &p), 0);
  cr_assert_not(framework_moe_a2a_overlap(f26, &p, th_hw(c, "gb200")));
  hw_catalog_free(c);
}

/* The same recipes run the attention core in fp8
** (_enable_hybridep_full_iteration_mxfp8: fp8_dot_product_attention) on the
** same plans: the profile's rule, and the flag either way. Under their MXFP8
** recipe Transformer Engine runs MXFP8 attention: in a step the core's
** forward runs at cuDNN's measured MXFP8 rate over its bf16 one on GB200,
** 1.397 / 1.156 ms = 1.208 at 8k keys (cudnn-frontend's cuDNN 9.22
** benchmark, hw_models/gb200.json), to a percent (the launch is not
** scaled); under fp8 current scaling its per-tensor fp8 rate, 1.397 / 1.074
** = 1.301. Without a flash kernel there is no fp8 attention. */
Test(moe, fp8_attention_profile_rule_and_rate) {
  hw_catalog *c = th_catalog();
  plan p = {.ep = 8};
  framework_apply(framework_find("megatron-core-26.08"), &p);
  cr_assert_eq(plan_precision_parse("mxfp8", &p), 0);
  cr_assert(framework_fp8_attention(&p, th_hw(c, "gb200"), NULL, NULL));
  cr_assert(framework_fp8_attention(&p, th_hw(c, "gb300"), NULL, NULL));
  cr_assert_not(framework_fp8_attention(&p, th_hw(c, "b200"), NULL, NULL));
  p.fp8_attention = PLAN_FP8_ATTN_ON;
  cr_assert(framework_fp8_attention(&p, th_hw(c, "b200"), NULL, NULL));
  p.fp8_attention = PLAN_FP8_ATTN_OFF;
  cr_assert_not(framework_fp8_attention(&p, th_hw(c, "gb200"), NULL, NULL));
  p.fp8_attention = PLAN_FP8_ATTN_FRAMEWORK, p.ep = 1;
  cr_assert_not(framework_fp8_attention(&p, th_hw(c, "gb200"), NULL, NULL));
  p.ep = 8;
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_not(framework_fp8_attention(&p, th_hw(c, "gb200"), NULL, NULL));
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  char err[512];
  plan q = {.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 4, .vp = 1, .slices = 1,
            .gbs = 512, .seq = 4096, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA};
  cr_assert_eq(plan_precision_parse("mxfp8", &q), 0);
  framework_apply(framework_find("megatron-core-26.08"), &q);
  const hw_model *h = th_hw(c, "gb200");
  cr_assert_eq(plan_check(m, h, &q, err, sizeof err), 0, "%s", err);
  step_result on, off;
  cr_assert_eq(step_costs(m, h, &q, &on, err, sizeof err), 0, "%s", err);
  q.fp8_attention = PLAN_FP8_ATTN_OFF;
  cr_assert_eq(step_costs(m, h, &q, &off, err, sizeof err), 0, "%s", err);
  double r = off.attn_core_fwd_s / on.attn_core_fwd_s;
  cr_assert(r > 1.208 * 0.99 && r <= 1.208 * 1.0001, "MXFP8 core forward %.4g x faster", r);
  cr_assert_eq(plan_precision_parse("fp8-cs", &q), 0);
  cr_assert_eq(step_costs(m, h, &q, &off, err, sizeof err), 0, "%s", err);
  q.fp8_attention = PLAN_FP8_ATTN_ON;
  cr_assert_eq(plan_check(m, h, &q, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_costs(m, h, &q, &on, err, sizeof err), 0, "%s", err);
  r = off.attn_core_fwd_s / on.attn_core_fwd_s;
  cr_assert(r > 1.301 * 0.99 && r <= 1.301 * 1.0001, "fp8 core forward %.4g x faster", r);
  q.attention = PLAN_ATTN_SCORES;
  cr_assert_neq(plan_check(m, h, &q, err, sizeof err), 0);
  cr_assert(strstr(err, "not a flash kernel"), "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* In a step: Qwen3-30B-A3B on 8 GB200s, ep 8, MXFP8 (the 26.08 row's
** plan). Every layer is MoE, tp 1 (no tensor-parallel collectives), so a
** layer's exposed communication is its all-to-alls alone: the whole
** ep_a2a_fwd_s each way under megatron-core, and under megatron-core-26.08
** the forward's a2a over the layer's own backward (the paired
** micro-batch's) and the backward's over its forward, with 32 of the 148
** SMs lost while covered. */
Test(moe, a2a_overlap_in_a_step) {
  hw_catalog *c = th_catalog();
  /* the experts at the measured shape's rate, whatever theirs: the two
  ** profiles' GEMMs then differ only by the launches below */
  hw_model flat = *th_hw(c, "gb200");
  flat.chip.grouped_gemm_at_m = 0;
  const hw_model *h = &flat;
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  char err[512];
  /* the attention core in bf16 under both profiles (the 26.08 one's fp8
  ** core is fp8_attention_profile_rule_and_rate's) */
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 4, .vp = 1, .slices = 1,
            .gbs = 512, .seq = 4096, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA,
            .fp8_attention = PLAN_FP8_ATTN_OFF};
  cr_assert_eq(plan_precision_parse("mxfp8", &p), 0);
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  framework_apply(framework_find("megatron-core-26.08"), &p);
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  int k = 0;
  while (k < WL_LAYER_KINDS && !a.kind_n[k]) k++;
  cr_assert(k < WL_LAYER_KINDS && (k & WL_LAYER_MOE));
  cr_assert_gt(a.ep_a2a_fwd_s, 0);
  cr_assert_float_eq(b.ep_a2a_fwd_s, a.ep_a2a_fwd_s, 1e-15);
  /* the layers' compute differs only by the per-expert GEMM launches the
  ** 26.08 MXFP8 path fuses away (per_expert_gemm_launches below) */
  cr_assert_float_eq(a.kind_fwd_s[k] - b.kind_fwd_s[k], 135e-6, 1e-12);
  cr_assert_float_eq(a.kind_comm_fwd_s[k], a.ep_a2a_fwd_s, 1e-15);
  cr_assert_float_eq(a.kind_comm_bwd_s[k], a.ep_a2a_fwd_s, 1e-15);
  double share = 32.0 / 148;
  double want_f = step_moe_a2a_exposed_s(a.ep_a2a_fwd_s, b.kind_bwd_s[k], share);
  double want_b = step_moe_a2a_exposed_s(a.ep_a2a_fwd_s, b.kind_fwd_s[k], share);
  cr_assert_float_eq(b.kind_comm_fwd_s[k], want_f, 1e-15);
  cr_assert_float_eq(b.kind_comm_bwd_s[k], want_b, 1e-15);
  cr_assert_lt(b.kind_comm_fwd_s[k], a.kind_comm_fwd_s[k]);
  model_free(m);
  hw_catalog_free(c);
}

/* Transformer Engine's GroupedLinear issues one cuBLAS GEMM per local
** expert (nvte_multi_stream_cublas_gemm), so a grouped GEMM of E local
** experts launches E kernels where the graph counts one: E - 1 more launches
** at the chip's 3 us each (hw_models/gb200.json op_overhead_s, the NVIDIA
** forum's null-kernel launch figure). Qwen3-30B-A3B (128 experts) on ep 8:
** E = 16. Its expert FFN is SwiGLU: gate, up and down projections, 3
** grouped GEMMs forward and 6 backward (each one's data and weight
** gradients): 15 x 3 = 45 extra launches forward = 135 us, 15 x 6 = 90
** backward = 270 us a layer and micro-batch. The 26.08 MXFP8 path on GB200
** fuses the expert MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): none there, the
** rest of the layer timed alike, so the difference is exactly these. */
Test(moe, per_expert_gemm_launches) {
  hw_catalog *c = th_catalog();
  hw_model flat = *th_hw(c, "gb200"); /* the shape's rate aside, as above */
  flat.chip.grouped_gemm_at_m = 0;
  const hw_model *h = &flat;
  cr_assert_float_eq(h->chip.op_overhead_s, 3e-6, 1e-15);
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  char err[512];
  /* the attention core in bf16 under both profiles (the 26.08 one's fp8
  ** core is fp8_attention_profile_rule_and_rate's) */
  plan p = {.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 4, .vp = 1, .slices = 1,
            .gbs = 512, .seq = 4096, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA,
            .fp8_attention = PLAN_FP8_ATTN_OFF};
  cr_assert_eq(plan_precision_parse("mxfp8", &p), 0);
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert(framework_moe_gemm_per_expert(p.framework, &p, h));
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  framework_apply(framework_find("megatron-core-26.08"), &p);
  cr_assert_not(framework_moe_gemm_per_expert(p.framework, &p, h));
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  int k = 0;
  while (k < WL_LAYER_KINDS && !a.kind_n[k]) k++;
  cr_assert(k < WL_LAYER_KINDS);
  cr_assert_float_eq(a.kind_fwd_s[k] - b.kind_fwd_s[k], 135e-6, 1e-12);
  cr_assert_float_eq(a.kind_bwd_s[k] - b.kind_bwd_s[k], 270e-6, 1e-12);
  /* the 26.08 profile's other paths keep GroupedLinear; torchtitan and
  ** MaxText profiles do not loop over experts */
  cr_assert(framework_moe_gemm_per_expert(framework_find("megatron-core-26.08"), &p,
                                          th_hw(c, "b200")));
  cr_assert_not(framework_moe_gemm_per_expert(framework_find("maxtext"), &p, h));
  cr_assert_not(framework_moe_gemm_per_expert(framework_find("torchtitan"), &p, h));
  model_free(m);
  hw_catalog_free(c);
}

/* One micro-batch of 4096 tokens on 8 chips, all of them one expert group
** (ep 8), for the uneven-routing tests below. */
static plan ep8_plan(void) {
  return (plan){.chips = 8, .tp = 1, .pp = 1, .ep = 8, .cp = 1, .mbs = 1, .vp = 1, .slices = 1,
                .gbs = 8, .seq = 4096, .schedule = PLAN_1F1B, .precision = GDT_BF16,
                .op_costs = OPCOST_FORMULA};
}

/* Uneven routing (--moe-imbalance F): the busiest chip of the expert group
** receives F times the even share of the routed copies, and the group
** waits for it. Qwen3-30B-A3B (hidden 2048, expert FFN 768, SwiGLU, top-8
** of 128) at mbs 1, seq 4096, ep 8: a chip routes 4096 x 8 = 32,768 copies,
** and its 16 experts take that many evenly (2,048 each). Their forward is
** 3 GEMMs x 2 x 32,768 x 2048 x 768 = 309,237,645,312 FLOPs; at F = 2
** they take 65,536 rows, one even share more, so the layer's forward
** FLOPs grow by that figure (the SiLU, the gate product and the combine's
** weighting add under 0.2 % of it). The reorder passes (reorder_bytes_one_layer)
** and the dispatch's bytes grow F-fold; the dispatch's time, all but its
** fixed latency, with them. */
Test(moe, imbalance_loads_the_busiest_chip) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  char err[512];
  plan p = ep8_plan();
  framework_apply(framework_find("plain"), &p);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  double flops[2], a2a[2], reorder[2];
  for (int i = 0; i < 2; i++) {
    p.moe_imbalance = i ? 2 : 0;
    cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
    model *own = NULL;
    const model *s = step_shard_kind_of(m, &p, 1, WL_LAYER_MOE, &own, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    graph_cost fc = graph_total_cost(s->g, GRAPH_FORWARD);
    flops[i] = graph_cost_flops(&fc);
    model_free(own);
    step_result r;
    cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
    a2a[i] = r.ep_a2a_fwd_s;
    reorder[i] = step_moe_reorder_bytes(&m->info.tf, &p);
  }
  double experts = 3.0 * 2 * 32768 * 2048 * 768;
  cr_assert(flops[1] - flops[0] >= experts && flops[1] - flops[0] < 1.002 * experts,
            "forward grows %.6g FLOPs, the experts' even share is %.6g", flops[1] - flops[0], experts);
  cr_assert_float_eq(reorder[1], 2 * reorder[0], 1);
  cr_assert(a2a[0] > 0 && a2a[1] > 1.9 * a2a[0] && a2a[1] <= 2 * a2a[0], "a2a %.6g -> %.6g", a2a[0],
            a2a[1]);
  model_free(m);
  hw_catalog_free(c);
}

/* What the busiest chip can receive: its E/ep experts take at most
** min(top_k, E/ep) of each token's copies, so ep x the even share when it
** holds top_k experts or more (Qwen3-30B-A3B at ep 8: 16 experts, top-8:
** 8), E/top_k when fewer (ep 64: 2 experts a chip, 64 x 2 / 8 = 16). Past
** it, without experts, at ep 1 or under a padded capacity the plan is
** refused, naming the flag. */
Test(moe, imbalance_bounds) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model("tests/data/hf/qwen3-30b-a3b.json", 4096);
  char err[512];
  plan p = ep8_plan();
  cr_assert_float_eq(plan_moe_imbalance_max(&p, &m->info.tf), 8, 1e-12);
  p.moe_imbalance = 8;
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  p.moe_imbalance = 8.5;
  cr_assert_neq(plan_check(m, h, &p, err, sizeof err), 0);
  cr_assert(strstr(err, "--moe-imbalance 8.5") && strstr(err, "nearest: 8"), "%s", err);
  plan q = p;
  q.chips = 64, q.ep = 64, q.gbs = 64, q.dp = 0;
  cr_assert_float_eq(plan_moe_imbalance_max(&q, &m->info.tf), 16, 1e-12);
  p.ep = 1, p.moe_imbalance = 1.5;
  cr_assert_neq(plan_check(m, h, &p, err, sizeof err), 0);
  cr_assert(strstr(err, "ep is 1"), "%s", err);
  cr_assert_float_eq(plan_moe_load(&p), 1, 0); /* nothing to be uneven in */
  model *dense = th_model("tests/data/hf/llama3.1-8b.json", 4096);
  p.ep = 1;
  cr_assert_neq(plan_check(dense, h, &p, err, sizeof err), 0);
  cr_assert(strstr(err, "has no experts"), "%s", err);
  model_free(dense);
  model_free(m);
  hw_catalog_free(c);
}

/* The scale-out share of a deduplicating dispatch under uneven routing: a
** node of 8 GPUs whose busiest takes 2x its share takes (2 + 7) / 8 =
** 1.125x over its NICs; but a node already reached by nearly every token
** cannot take more than one copy of each: Qwen3-30B-A3B (top-8 of 128) on 2
** nodes, a token reaches 2 (1 - C(64,8)/C(128,8)) = 1.99381 of them, so at
** most 2 / 1.99381 = 1.00310x. DeepSeek-V3 on 8 nodes (3.629 hit,
** nodes_hit_deepseek_v3): 1.125 stays under 8 / 3.629. Even routing: 1; a
** padded capacity of 1.25 pads every chip: 1.25. */
Test(moe, imbalance_node_load) {
  wl_tf_dims q = routed(128, 8, 0, 0);
  double hit = step_moe_nodes_hit(&q, 2);
  cr_assert_float_eq(hit, 1.99381, 1e-5);
  cr_assert_float_eq(step_moe_node_load(2, 8, 2, hit, false), 2 / hit, 1e-12);
  cr_assert_float_eq(step_moe_node_load(2, 8, 8, 3.629, false), 1.125, 1e-12);
  cr_assert_float_eq(step_moe_node_load(1, 8, 8, 3.629, false), 1, 0);
  cr_assert_float_eq(step_moe_node_load(1.25, 8, 8, 3.629, true), 1.25, 0);
}
