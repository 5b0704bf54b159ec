/*
** test_gdn.c -- Gated DeltaNet hybrids (Qwen3-Next): the published
** config's parameter count against a hand count and the model card, the
** layer pattern (every full_attention_interval-th layer attention), one
** Gated DeltaNet layer's forward FLOPs from the chunked delta rule's
** products, and the tensor-parallel split of its heads refused where it
** does not divide.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/model.h"
#include "helpers.h"

#define NEXT "tests/data/hf/qwen3-next-80b-a3b.json"

/* Qwen3-Next-80B-A3B by hand (Qwen3NextGatedDeltaNet, Qwen3NextAttention,
** Qwen3NextSparseMoeBlock in transformers' modeling_qwen3_next.py; no
** biases): a Gated DeltaNet mixer -- in_proj_qkvz h x (2 kd + 2 vd),
** in_proj_ba h x 2 nv, the depthwise conv's K taps on 2 kd + vd channels
** (no bias), A_log and dt_bias (one a value head), the gated norm's dv
** gains, out_proj vd x h; a gated attention -- q_proj h x 2 heads hd
** (query and gate), k and v h x kv hd, o heads hd x h, q_norm and k_norm
** (hd each); each layer's MoE -- the router h x E, E experts of three
** h x F matrices, the shared expert's three h x F_s and its gate h x 1;
** two RMSNorms a layer, untied 151,936 x 2048 embedding and head, the final
** norm. h 2048, 16 key and 32 value heads of 128, K 4; 16 heads of 256 with
** 2 KV heads; 512 experts of 512, top 10, shared 512. Published: the
** card's "80B in total and 3B activated"; the hub's safetensors hold
** 79,674,391,296 (a third-party loader's test of Qwen3-Coder-Next, the same
** architecture, quotes that total and 3,874,929,408 active with 10 routed
** and the shared expert). */
Test(gdn, qwen3_next_parameters_match_card_and_hand_count) {
  model *m = th_model_opts(NEXT, (model_opts){.global_batch = 1, .seq_len = 4096, .forward_only = true});
  double h = 2048, kd = 16 * 128, vd = 32 * 128, nv = 32, dv = 128, K = 4;
  double gdn = h * (2 * kd + 2 * vd) + h * 2 * nv + (2 * kd + vd) * K + 2 * nv + dv + vd * h + h;
  double att = h * 2 * 16 * 256 + 2 * h * 2 * 256 + 16 * 256 * h + 2 * 256 + h;
  double E = 512, F = 512, Fs = 512;
  double moe = h * E + E * 3 * h * F + 3 * h * Fs + h + h;
  double hand = 36 * gdn + 12 * att + 48 * moe + 2 * 151936 * h + h;
  cr_assert_eq((int64_t)hand, 79674391296LL);
  cr_assert_eq((double)m->params, hand, "params %lld, by hand %.0f", (long long)m->params, hand);
  double active = hand - 48 * (E - 10) * 3 * h * F;
  cr_assert_eq((int64_t)active, 3874929408LL);
  cr_assert(fabs((double)m->active_params - active) < 1, "active %lld, by hand %.0f",
            (long long)m->active_params, active);
  cr_assert(fabs((double)m->params / 80e9 - 1) < 0.01, "%.2f B, published 80 B", (double)m->params / 1e9);
  model_free(m);
}

/* Qwen3NextConfig: layer i is "linear_attention" unless (i + 1) %
** full_attention_interval == 0 -- with 4, layers 3, 7, ..., 47 attend: 12
** of 48; every layer is MoE (decoder_sparse_step 1, no mlp_only_layers). */
Test(gdn, qwen3_next_layer_pattern) {
  model *m = th_model_opts(NEXT, (model_opts){.global_batch = 1, .seq_len = 256, .forward_only = true});
  const wl_tf_dims *d = &m->info.tf;
  int64_t n = 0;
  for (int64_t i = 0; i < d->layers; i++) {
    int k = wl_tf_layer_kind(d, i);
    cr_assert(k & WL_LAYER_MOE, "layer %lld is MoE", (long long)i);
    bool want = (i + 1) % 4 != 0;
    cr_assert_eq((k & WL_LAYER_GDN) != 0, want, "layer %lld", (long long)i);
    n += want;
  }
  cr_assert_eq(n, 36);
  cr_assert(d->attn_gate && d->shared_gate);
  model_free(m);
}

/* One Gated DeltaNet layer (with the config's dense MLP, 5120 wide, as a
** one-kind layer without experts) on S = 1024 tokens, batch 1: c = 16
** chunks of Q = 64, 32 value heads (dk = dv = 128). By hand: in_proj
** 2 S h (2 kd + 2 vd + 2 nv), out_proj 2 S vd h, the conv 2 S K (2 kd + vd),
** the MLP 3 x 2 S h 5120; the delta rule a chunk and head: A 2 Q^2 dk, the
** solve as one product 2 Q^3, u 2 Q^2 dv, w 2 Q^2 dk, the chunk state
** 2 Q dk dv, w S and q S 2 Q dk dv each, q k^T 2 Q^2 dk, its product with
** v_new 2 Q^2 dv, and the decay's cumsum as a product with a Q x Q
** triangle 2 Q^2: 6 Q^2 dk + 4 Q^2 dv + 6 Q dk dv + 2 Q^3 + 2 Q^2. The
** rule's share of the layer is small beside the projections (here 5 %),
** as FLA's own FLOP count has it (the chunk form is O(S Q d + S d^2)). */
Test(gdn, one_layer_forward_flops_from_the_chunked_delta_rule) {
  model *m = th_model_opts(NEXT, (model_opts){.global_batch = 1, .seq_len = 1024, .forward_only = true,
                                              .only_layers = 1, .one_kind = true,
                                              .layer_kind = WL_LAYER_GDN});
  double S = 1024, h = 2048, kd = 2048, vd = 4096, nv = 32, dk = 128, dv = 128, K = 4, Q = 64;
  double c = S / Q;
  double proj = 2 * S * h * (2 * kd + 2 * vd + 2 * nv) + 2 * S * vd * h;
  double conv = 2 * S * K * (2 * kd + vd);
  double mlp = 3 * 2 * S * h * 5120;
  double rule = c * nv * (6 * Q * Q * dk + 4 * Q * Q * dv + 6 * Q * dk * dv + 2 * Q * Q * Q + 2 * Q * Q);
  double got = th_layer0_flops(m, GRAPH_FORWARD), want = proj + conv + mlp + rule;
  cr_assert(fabs(got - want) <= 1e-9 * got, "%.6g FLOPs, by hand %.6g", got, want);
  cr_assert(rule / got > 0.03 && rule / got < 0.08, "the delta rule is %.3f of the layer", rule / got);
  model_free(m);
}

/* Training builds the rule's backward by autodiff: the layer's backward is
** about twice its forward, as for attention layers. */
Test(gdn, backward_is_about_twice_forward) { th_assert_backward_about_twice(NEXT, WL_LAYER_GDN); }

/* Tensor parallelism splits the mixer's heads: with 8 key heads, tp 16
** (which the 16 attention heads allow) cannot split them, and says so
** naming the field. */
Test(gdn, tp_must_divide_the_key_heads) {
  th_run r = th_cli("simulate", NEXT, "--set", "linear_num_key_heads=8", "--hw", "h100-sxm",
                    "--chips", "16", "--tp", "16", "--gbs", "1", "--seq", "4096", NULL);
  cr_assert_neq(r.rc, 0);
  cr_assert(strstr(r.err, "linear_num_key_heads 8 must divide by tp 16"), "%s", r.err);
  th_run_free(&r);
}

/* Under context parallelism a Gated DeltaNet layer scans the whole
** sequence for 1/cp of its heads (Megatron-Core's GatedDeltaNet through
** mamba_context_parallel's all-to-alls): in_proj's outputs go from sequence
** to head shards, 2 kd + 2 vd + 2 nv = 12,352 values a token, and the scan's
** vd = 4096 come back, 16-bit, forward and again backward. With tp 1 and
** no expert parallelism those are all of such a layer's collectives; at
** cp 1 it has none. */
Test(gdn, cp_all_to_alls) {
  th_assert_cp2_a2as(NEXT, WL_LAYER_GDN | WL_LAYER_MOE, 36, 12352, 4096);
}
