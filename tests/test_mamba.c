/*
** test_mamba.c -- hybrid Mamba-2 / attention / MoE models (Nemotron-H,
** Nemotron 3): the two published configs' parameter counts against the
** model cards and a hand count, one Mamba-2 layer's forward FLOPs from the
** SSD algorithm's four steps, the hybrid pattern read layer by layer, and
** a bad pattern refused at the character's own line:column.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../sim/memory.h"
#include "../workloads/model.h"
#include "helpers.h"

#define NANO "tests/data/hf/nemotron3-nano-30b-a3b.json"
#define SUPER "tests/data/hf/nemotron3-super-120b-a12b.json"

static model *load_o(const char *path, model_opts o) { return th_model_opts(path, o); }

/* A Nemotron-H layer's parameters by hand, each sub-block with its RMSNorm
** (h): a Mamba-2 mixer -- in_proj h x (2 d_inner + 2 G N + heads), the
** depthwise conv (K taps and a bias on d_inner + 2 G N channels), A_log,
** D and dt_bias (a value a head), the gated norm's d_inner gains, out_proj
** d_inner x h (Megatron-Core MambaMixer; NemotronHMamba2Mixer); attention
** -- q and o h x heads hd, k and v h x kv hd, no biases; a MoE layer --
** E experts of two matrices (squared ReLU: up and down) in width w (the
** hidden size, or the latent size with its down and up projections h x w
** each), the shared expert's two h x F_s matrices, the router h x E. */
typedef struct {
  double h, heads, kv, hd, m_heads, m_hd, groups, state, conv, experts, top_k, ffn, shared, latent;
} nh_dims;

static double mamba_params(const nh_dims *d) {
  double din = d->m_heads * d->m_hd, cd = din + 2 * d->groups * d->state;
  return d->h * (2 * din + 2 * d->groups * d->state + d->m_heads) + cd * (d->conv + 1) +
         3 * d->m_heads + din + din * d->h + d->h;
}

static double attn_params(const nh_dims *d) {
  return 2 * d->h * d->heads * d->hd + 2 * d->h * d->kv * d->hd + d->h;
}

static double expert_params(const nh_dims *d) {
  return 2 * (d->latent > 0 ? d->latent : d->h) * d->ffn;
}

static double moe_params(const nh_dims *d) {
  return d->experts * expert_params(d) + 2 * d->h * d->shared + d->h * d->experts +
         (d->latent > 0 ? 2 * d->h * d->latent : 0) + d->h;
}

/* Nemotron 3 Nano 30B-A3B: 23 Mamba-2, 23 MoE and 6 attention layers
** (Megatron-Bridge docs, "Nemotron 3 Nano": "23 Mamba-2 and MoE layers,
** along with 6 Attention layers ... 128 experts plus 1 shared expert";
** the config's hybrid_override_pattern), untied 131,072 x 2688 embedding
** and output layer. Published: "31.6B-parameter" (the BF16 checkpoint as
** counted by basecompute/NVIDIA-Nemotron-3-Nano-30B-A3B on HF; the card's
** "30B total"), 3.5B active (Megatron-Bridge docs). The hand count is
** 31,577,937,344; active = total less the 122 unchosen experts of 128 in
** each MoE layer. */
Test(mamba, nano_parameters_match_card_and_hand_count) {
  model *m = load_o(NANO, (model_opts){.global_batch = 1, .seq_len = 8192, .forward_only = true});
  nh_dims d = {.h = 2688, .heads = 32, .kv = 2, .hd = 128, .m_heads = 64, .m_hd = 64, .groups = 8,
               .state = 128, .conv = 4, .experts = 128, .top_k = 6, .ffn = 1856, .shared = 3712};
  double hand = 23 * mamba_params(&d) + 23 * moe_params(&d) + 6 * attn_params(&d) +
                2 * 131072.0 * 2688 + 2688;
  cr_assert_eq((double)m->params, hand, "params %lld, by hand %.0f", (long long)m->params, hand);
  cr_assert_eq((int64_t)hand, 31577937344LL);
  cr_assert(fabs((double)m->params / 1e9 - 31.6) < 0.05, "%.3f B, published 31.6 B",
            (double)m->params / 1e9);
  double active = hand - 23 * (d.experts - d.top_k) * expert_params(&d);
  cr_assert(fabs((double)m->active_params - active) < 1e3, "active %lld, by hand %.0f",
            (long long)m->active_params, active);
  cr_assert(m->active_params > 3.5e9 && m->active_params < 3.65e9, "active %.3f B, published 3.5 B",
            (double)m->active_params / 1e9);
  model_free(m);
}

/* Nemotron 3 Super 120B-A12B: 40 Mamba-2, 40 latent MoE (512 experts of
** 2688 in a 1024-wide latent, top 22, a 5376-wide shared expert) and 8
** attention layers, hidden 4096. Published: "12B active 120B total"
** (research.nvidia.com/labs/nemotron/Nemotron-3-Super), the main stack:
** 120,668,687,360 by hand. The config's one MTP module
** (num_nextn_predict_layers 1, mtp_hybrid_override_pattern "*E") adds an
** attention and a MoE layer, eh_proj (2h x h) and three RMSNorms:
** 2,942,324,736, which the card's 120B leaves out. Active without the
** input embedding's 0.54 B (a lookup, no compute) and the MTP module:
** 12.23 B. */
Test(mamba, super_parameters_match_card_and_hand_count) {
  model *m = load_o(SUPER, (model_opts){.global_batch = 1, .seq_len = 8192, .forward_only = true});
  nh_dims d = {.h = 4096, .heads = 32, .kv = 2, .hd = 128, .m_heads = 128, .m_hd = 64,
               .groups = 8, .state = 128, .conv = 4, .experts = 512, .top_k = 22, .ffn = 2688,
               .shared = 5376, .latent = 1024};
  double hand = 40 * mamba_params(&d) + 40 * moe_params(&d) + 8 * attn_params(&d) +
                2 * 131072.0 * 4096 + 4096;
  cr_assert_eq((int64_t)hand, 120668687360LL);
  double mtp = attn_params(&d) + moe_params(&d) + 2 * d.h * d.h + 3 * d.h;
  cr_assert_eq((double)m->params, hand + mtp, "params %lld, by hand %.0f + MTP %.0f",
               (long long)m->params, hand, mtp);
  cr_assert(fabs(hand / 120e9 - 1) < 0.01, "%.2f B, published 120 B", hand / 1e9);
  double unchosen = 41 * (d.experts - d.top_k) * expert_params(&d); /* the MTP's MoE too */
  cr_assert(fabs((double)m->active_params - (hand + mtp - unchosen)) < 1e3);
  double mtp_active = mtp - (d.experts - d.top_k) * expert_params(&d);
  double compute = (double)m->active_params - mtp_active - 131072.0 * 4096; /* main stack, less the input embedding */
  cr_assert(compute > 12.0e9 && compute < 12.5e9, "active %.2f B, published 12 B", compute / 1e9);
  model_free(m);
}

/* Nemotron-H 8B, 47B and 56B (arXiv:2504.03624) and Nemotron Nano 9B and
** 12B v2 (Megatron-Bridge's nemotronh recipes, tests/data/hf/SOURCES.md):
** dense hybrids, Mamba-2, attention and squared-ReLU MLP layers (two h x F
** matrices, no bias). Published: the names' 8, 47, 56, 9 and 12 B, which
** round (12.31 B is "12B"). The hand counts: 8,100,852,736,
** 46,791,554,816, 56,324,350,464, 8,888,227,328 and 12,310,001,152. */
static double mlp_params(const nh_dims *d) { return 2 * d->h * d->ffn + d->h; }

Test(mamba, dense_family_parameters_match_names_and_hand_count) {
  static const struct {
    const char *file;
    double m, mlp, attn, h, heads, m_heads, m_hd, state, ffn, published;
    int64_t hand;
  } f[] = {
      {"tests/data/hf/nemotron-h-8b.json", 24, 24, 4, 4096, 32, 128, 64, 128, 21504, 8e9, 8100852736LL},
      {"tests/data/hf/nemotron-h-47b.json", 45, 48, 5, 8192, 64, 256, 64, 256, 30720, 47e9, 46791554816LL},
      {"tests/data/hf/nemotron-h-56b.json", 54, 54, 10, 8192, 64, 256, 64, 256, 32768, 56e9, 56324350464LL},
      {"tests/data/hf/nemotron-nano-9b-v2.json", 27, 25, 4, 4480, 40, 128, 80, 128, 15680, 9e9, 8888227328LL},
      {"tests/data/hf/nemotron-nano-12b-v2.json", 28, 28, 6, 5120, 40, 128, 80, 128, 20480, 12e9, 12310001152LL},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    model *m = load_o(f[i].file, (model_opts){.global_batch = 1, .seq_len = 8192, .forward_only = true});
    nh_dims d = {.h = f[i].h, .heads = f[i].heads, .kv = 8, .hd = 128, .m_heads = f[i].m_heads,
                 .m_hd = f[i].m_hd, .groups = 8, .state = f[i].state, .conv = 4, .ffn = f[i].ffn};
    double hand = f[i].m * mamba_params(&d) + f[i].mlp * mlp_params(&d) +
                  f[i].attn * attn_params(&d) + 2 * 131072.0 * d.h + d.h;
    cr_assert_eq((int64_t)hand, f[i].hand, "%s: by hand %.0f", f[i].file, hand);
    cr_assert_eq((double)m->params, hand, "%s: params %lld", f[i].file, (long long)m->params);
    cr_assert_eq(m->active_params, m->params, "%s: dense", f[i].file);
    cr_assert(fabs(hand / f[i].published - 1) < 0.03, "%s: %.2f B", f[i].file, hand / 1e9);
    model_free(m);
  }
}

/* The pattern read layer by layer: Nano's 52 characters are 23 M, 23 E,
** 6 * (Megatron-Bridge docs above); layer 0 is M, 1 E, 5 * (the pattern
** "MEMEM*E..."), and each kind is the sub-block it names. Super: 40, 40, 8
** in 88 (the HF config's count, also checked by the public MLX converter
** that verifies it). */
Test(mamba, hybrid_pattern_counts) {
  static const struct {
    const char *file;
    int64_t layers, m, e, a;
  } rows[] = {{NANO, 52, 23, 23, 6}, {SUPER, 88, 40, 40, 8}};
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    model *m = load_o(rows[r].file, (model_opts){.global_batch = 1, .seq_len = 256, .forward_only = true});
    const wl_tf_dims *d = &m->info.tf;
    cr_assert_eq(d->layers, rows[r].layers);
    int64_t n[WL_LAYER_KINDS] = {0};
    for (int64_t i = 0; i < d->layers; i++) n[wl_tf_layer_kind(d, i)]++;
    cr_assert_eq(n[WL_LAYER_MAMBA], rows[r].m, "%s: %lld Mamba", rows[r].file, (long long)n[4]);
    cr_assert_eq(n[WL_LAYER_NO_MIXER | WL_LAYER_MOE], rows[r].e);
    cr_assert_eq(n[WL_LAYER_NO_FFN], rows[r].a);
    cr_assert_eq(n[WL_LAYER_MAMBA] + n[WL_LAYER_NO_MIXER | WL_LAYER_MOE] + n[WL_LAYER_NO_FFN],
                 d->layers, "no other kind");
    model_free(m);
  }
  model *m = load_o(NANO, (model_opts){.global_batch = 1, .seq_len = 256, .forward_only = true});
  cr_assert_eq(wl_tf_layer_kind(&m->info.tf, 0), WL_LAYER_MAMBA);
  cr_assert_eq(wl_tf_layer_kind(&m->info.tf, 1), WL_LAYER_NO_MIXER | WL_LAYER_MOE);
  cr_assert_eq(wl_tf_layer_kind(&m->info.tf, 5), WL_LAYER_NO_FFN);
  model_free(m);
}

/* One Mamba-2 layer of Nano (h 2688, 64 heads of P = 64, G = 8 groups of
** N = 128, conv K = 4, chunk Q = 128) on S = 1024 tokens (c = 8 chunks),
** batch 1. By hand: in_proj 2 S h (2 d_in + 2 G N + heads) and out_proj
** 2 S d_in h (d_in = 4096); the conv 2 S K (d_in + 2 G N); the SSD scan's
** matmuls (Dao & Gu 2024 sec. 6, Listing 1): 1. C B^T 2 c G Q^2 N and
** (L o C B^T) X 2 c heads Q^2 P, 2. the chunk states B^T X 2 c heads Q N P,
** 4. C h 2 c heads Q N P (3., the state passing, is elementwise); and the
** chunk cumsum written as a product with a Q x Q triangle, 2 c heads Q^2.
** Megatron-LM's estimate of the scan, 7 S d_in N (num_floating_point_
** operations, mamba_layer_flops), is within 10 % of the SSD count here. */
Test(mamba, one_layer_forward_flops_from_ssd) {
  model *m = load_o(NANO, (model_opts){.global_batch = 1, .seq_len = 1024, .forward_only = true,
                                       .only_layers = 1, .one_kind = true,
                                       .layer_kind = WL_LAYER_MAMBA});
  double S = 1024, h = 2688, nh = 64, P = 64, G = 8, N = 128, K = 4, Q = 128, c = S / Q;
  double din = nh * P;
  double proj = 2 * S * h * (2 * din + 2 * G * N + nh) + 2 * S * din * h;
  double conv = 2 * S * K * (din + 2 * G * N);
  double ssd = 2 * c * G * Q * Q * N + 2 * c * nh * Q * Q * P + 2 * (2 * c * nh * Q * N * P);
  double cumsum = 2 * c * nh * Q * Q;
  double got = th_layer0_flops(m, GRAPH_FORWARD);
  cr_assert(fabs(got - (proj + conv + ssd + cumsum)) <= 1e-9 * got, "%.6g FLOPs, by hand %.6g", got,
            proj + conv + ssd + cumsum);
  cr_assert(fabs(ssd / (7 * S * din * N) - 1) < 0.10, "SSD %.4g vs Megatron's 7 S d N %.4g", ssd,
            7 * S * din * N);
  model_free(m);
}

/* Training builds the backward of every Mamba-2 op (the graph's autodiff):
** the step's FLOPs are about 3x the forward's, as for a transformer. */
Test(mamba, backward_is_about_twice_forward) { th_assert_backward_about_twice(NANO, WL_LAYER_MAMBA); }

/* Forward matmul FLOPs of the ops at layers >= from (the MTP depths sit
** past the main stack's layers), every phase's count kept. */
static double fwd_dot_flops_from(const model *m, int from) {
  double f = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if ((op->kind != GOP_DOT && op->kind != GOP_CONV) || op->phase != GRAPH_FORWARD ||
        op->layer < from)
      continue;
    graph_cost c = graph_op_cost(m->g, i);
    f += graph_cost_flops(&c) * (double)op->count;
  }
  return f;
}

/* Megatron-Bridge's Nemotron 3 Super recipe runs the config's one MTP
** module to depth 2 through the same weights (mtp_num_layers 2,
** mtp_use_repeated_layer True; tests/validation/models/SOURCES.md): the
** parameters are the plain config's, to the one; the second depth's
** forward is the first's again (the same shapes: h and the embedding of the
** token one further ahead), so the matmul FLOPs past the main stack's 88
** layers double. A depth above the modules without the repeated layer is
** refused, naming the field to set. */
Test(mamba, super_mtp_depth_two_shares_the_module) {
  model_opts o = {.global_batch = 1, .seq_len = 1024, .forward_only = true};
  model *one = load_o(SUPER, o);
  model *two = load_o("tests/validation/models/nemotron3-super-mbridge.json", o);
  cr_assert_eq(two->params, one->params);
  cr_assert_eq(two->info.tf.mtp_depth, 2);
  double f1 = fwd_dot_flops_from(one, 88), f2 = fwd_dot_flops_from(two, 88);
  cr_assert_gt(f1, 0);
  cr_assert(fabs(f2 - 2 * f1) <= 1e-9 * f2, "MTP forward %.6g at depth 2, %.6g at depth 1", f2, f1);
  model_free(one);
  model_free(two);
  char *text = th_slurp(SUPER, NULL);
  char *t = th_replace(text, "\"num_nextn_predict_layers\": 1,",
                       "\"num_nextn_predict_layers\": 1, \"mtp_num_layers\": 2,");
  const char *path = th_write_temp("super-mtp2.json", t);
  diag *d = diag_new();
  cr_assert_null(model_load(path, &o, d));
  cr_assert(strstr(diag_message(d, 0), "mtp_use_repeated_layer"), "%s", diag_message(d, 0));
  diag_free(d);
  free(t);
  free(text);
}

/* A bad character is refused at its own line and column, with the valid
** set: the pattern is on line 10 of the Nano config, its value opening at
** column 30 ("  \"hybrid_override_pattern\": \""), so character i is at
** column 31 + i; 'X' replaces the third character (i = 2). */
Test(mamba, bad_pattern_character_refused_at_its_column) {
  char *text = th_slurp(NANO, NULL);
  char *t = th_replace(text, "\"MEMEM*EMEMEM*", "\"MEXEM*EMEMEM*");
  const char *path = th_write_temp("nemotron-bad.json", t);
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = 256};
  model *m = model_load(path, &o, d);
  cr_assert_null(m);
  cr_assert_gt(diag_count(d), 0);
  const char *msg = diag_message(d, 0);
  char where[64];
  snprintf(where, sizeof where, "%s:10:33", path);
  cr_assert(strstr(msg, where), "%s", msg);
  cr_assert(strstr(msg, "layer 2 is 'X'"), "%s", msg);
  cr_assert(strstr(msg, "M*E-"), "the valid set: %s", msg);
  diag_free(d);
  free(t);
  free(text);
}

/* A pattern of the wrong length is refused, naming both counts. */
Test(mamba, pattern_length_must_equal_layers) {
  char *text = th_slurp(NANO, NULL);
  char *t = th_replace(text, "\"num_hidden_layers\": 52", "\"num_hidden_layers\": 50");
  const char *path = th_write_temp("nemotron-len.json", t);
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = 256};
  cr_assert_null(model_load(path, &o, d));
  cr_assert(strstr(diag_message(d, 0), "52 characters for 50 layers"), "%s", diag_message(d, 0));
  diag_free(d);
  free(t);
  free(text);
}

/* Model FLOPs of one training step against NVIDIA's own figures for the
** public runs (shared/reference/public-runs-modern.csv, Megatron-Bridge
** perf tables): tflops_model_per_gpu x step time x GPUs / sequences is the
** FLOPs of one 8192-token sequence by Megatron-Bridge's hybrid formula
** (flop_utils.py num_floating_point_operations: in_proj, scan, out_proj,
** attention, experts). Nano, B200: 726e12 x 16.0 s x 8 / 512 = 1.815e14;
** Super, B200: 542e12 x 10.24 s x 64 / 512 = 6.94e13 x 10 = 6.94e14, its
** recipe running the MTP module twice (mtp_num_layers 2) where the config
** builds one depth, so ours is lower by about one depth (~3.5 %). */
static double step_flops(const model *m) {
  double f = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->phase != GRAPH_FORWARD && op->phase != GRAPH_BACKWARD) continue;
    graph_cost c = graph_op_cost(m->g, i);
    f += graph_cost_flops(&c) * (double)op->count;
  }
  return f;
}

Test(mamba, step_flops_match_nvidia_model_tflops) {
  model *m = load_o(NANO, (model_opts){.global_batch = 1, .seq_len = 8192});
  double nano = step_flops(m), nvidia = 726e12 * 16.0 * 8 / 512;
  cr_assert(fabs(nano / nvidia - 1) < 0.02, "Nano %.4g FLOPs a sequence, NVIDIA's %.4g", nano, nvidia);
  model_free(m);
  m = load_o(SUPER, (model_opts){.global_batch = 1, .seq_len = 8192});
  double super = step_flops(m);
  nvidia = 542e12 * 10.24 * 64 / 512;
  cr_assert(super < nvidia && super / nvidia > 0.94, "Super %.4g FLOPs a sequence, NVIDIA's %.4g "
            "with a second MTP depth", super, nvidia);
  model_free(m);
}

/* The step model finds the attention core by its rank-5 scores
** (sim/stepcost.c) and prices it as one FlashAttention kernel that skips
** the masked half; the SSD scan is no such kernel, so none of a Mamba-2
** layer's tensors, forward or backward, may be of rank 5. */
Test(mamba, no_rank5_tensor_in_a_mamba_layer) {
  model *m = load_o(NANO, (model_opts){.global_batch = 2, .seq_len = 512, .only_layers = 1,
                                       .one_kind = true, .layer_kind = WL_LAYER_MAMBA});
  int n5 = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    n5 += op->layer == 0 && op->out.rank == 5;
  }
  cr_assert_eq(n5, 0, "%d rank-5 ops in the Mamba-2 layer", n5);
  model_free(m);
}

/* Context parallelism on a Mamba-2 layer (Megatron-Core's MambaMixer with
** mamba_context_parallel): in_proj's z, x, B, C and dt -- 2 d_inner + 2 G N
** + heads = 2 x 4096 + 2 x 8 x 128 + 64 = 10,304 values a token for Nano --
** go to head shards in an all-to-all, and the scan's d_inner = 4096 come
** back, 16-bit, forward and backward; at tp 1 a Mamba layer has no other
** collective. */
Test(mamba, cp_all_to_alls) {
  th_assert_cp2_a2as(NANO, WL_LAYER_MAMBA, 23, 10304, 4096);
}

/* A dense hybrid's memory counts its layers by kind, as a MoE hybrid's:
** the weights at tp 1 are the model's parameters at 2 B (bf16), to the
** biases memory.c assumes on MLPs (F + h a layer, 0.03 % here), and tp 8
** divides them by about 8 (norms and conv taps partly replicated). A
** pattern without E layers was once counted as all local-attention layers
** (2.0 GiB of weights and a 61 TiB temporary). */
Test(mamba, dense_hybrid_memory_by_layer_kind) {
  model *m = load_o("tests/data/hf/nemotron-h-8b.json",
                    (model_opts){.global_batch = 1, .seq_len = 8192, .forward_only = true});
  const wl_tf_dims *d = &m->info.tf;
  mem_opts o = {.flash_attention = true, .no_dropout = true};
  plan p = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .chips = 1, .mbs = 1, .gbs = 1, .seq = 8192,
            .precision = GDT_BF16, .schedule = PLAN_1F1B};
  mem_bytes one, eight;
  char err[256] = "";
  cr_assert_eq(mem_transformer(d, &p, &o, &one, err, sizeof err), 0, "%s", err);
  cr_assert(fabs(one.params / (double)m->params - 1) < 5e-4, "memory %.4g, model %lld", one.params,
            (long long)m->params);
  cr_assert(fabs(one.weights / (2.0 * m->params) - 1) < 5e-4, "weights %.4g B", one.weights);
  p.tp = p.chips = 8;
  p.sp = true;
  cr_assert_eq(mem_transformer(d, &p, &o, &eight, err, sizeof err), 0, "%s", err);
  cr_assert(eight.weights > one.weights / 8 && eight.weights < one.weights / 7.5, "tp 8: %.4g of %.4g",
            eight.weights, one.weights);
  cr_assert_lt(eight.temporary, 1.5 * (double)(1 << 30), "temporary %.4g B", eight.temporary);
  model_free(m);
}

/* The routed experts' parameters per MoE layer come from the model's count
** over its MoE layers; that count holds the MTP module's experts too, so
** the module's MoE layer is one of them (memory.c expert_layer_params): a
** 4-layer DeepSeek-V3 with its MTP module counted 49.3 G where the model
** has 26.7 G. Memory's total equals the model's, to the biases memory.c
** assumes, for DeepSeek-V3, Kimi K2, Nemotron 3 Super and GLM-5. */
Test(mamba, mtp_experts_counted_once_in_memory) {
  static const char *const F[] = {"tests/data/hf/deepseek-v3.json", "tests/data/hf/kimi-k2.json",
                                  SUPER, "tests/data/hf/glm-5.json"};
  for (size_t i = 0; i < sizeof F / sizeof *F; i++) {
    model *m = load_o(F[i], (model_opts){.global_batch = 1, .seq_len = 4096, .forward_only = true});
    mem_opts o = {.flash_attention = true, .no_dropout = true,
                  .expert_params = (double)m->expert_params};
    plan p = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .chips = 1, .mbs = 1, .gbs = 1, .seq = 4096,
              .precision = GDT_BF16, .schedule = PLAN_1F1B};
    mem_bytes b;
    char err[256] = "";
    cr_assert_eq(mem_transformer(&m->info.tf, &p, &o, &b, err, sizeof err), 0, "%s", err);
    cr_assert(fabs(b.params / (double)m->params - 1) < 1e-3, "%s: memory %.5g, model %lld", F[i],
              b.params, (long long)m->params);
    cr_assert(fabs(b.expert_params / (double)m->expert_params - 1) < 1e-9, "%s: experts %.5g of %lld",
              F[i], b.expert_params, (long long)m->expert_params);
    model_free(m);
  }
}
