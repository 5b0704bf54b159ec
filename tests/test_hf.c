/*
** test_hf.c -- today's models through their HuggingFace config.json
** (tests/data/hf/, sources in SOURCES.md): parameter counts against the
** published figures and hand counts, the layer kinds, MLA and sliding-window
** costs by hand, the per-chip shards (context, expert, expert-tensor
** parallel, one layer kind) and bad configs.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/model.h"
#include "helpers.h"

static model *load_o(const char *path, model_opts o) { return th_model_opts(path, o); }

static model *load(const char *name, int64_t seq) {
  return load_o(name, (model_opts){.global_batch = 1, .seq_len = seq});
}

/* The first message of a load that must fail (static storage). */
static const char *load_error(const char *path, int64_t seq) {
  static char msg[2048];
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = seq};
  model *m = model_load(path, &o, d);
  cr_assert_null(m, "%s loaded", path);
  cr_assert_gt(diag_count(d), 0);
  snprintf(msg, sizeof msg, "%s", diag_message(d, 0));
  diag_free(d);
  return msg;
}

/* A tests/data/hf config with `from` replaced by `to`, written to a temp file. */
static const char *mutated(const char *file, const char *from, const char *to) {
  char path[256];
  snprintf(path, sizeof path, "tests/data/hf/%s", file);
  char *text = th_slurp(path, NULL);
  char *t = th_replace(text, from, to);
  const char *out = th_write_temp(file, t);
  free(t);
  free(text);
  return out;
}

/* Forward FLOPs of the decoder layers' dots (layers 0 .. L-1, not the
** head nor an MTP module after them): those with a weight operand (the
** linear layers, experts included) when weights, else the attention
** core's (scores, and probabilities x values). */
static double layer_dot_flops(const model *m, bool weights) {
  const graph *g = m->g;
  double f = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind != GOP_DOT || op->phase != GRAPH_FORWARD || op->layer < 0 ||
        op->layer >= m->info.tf.layers)
      continue;
    bool w = false;
    for (int k = 0; k < op->n_in; k++) {
      const graph_op *in = graph_get(g, op->in[k]);
      w |= in->kind == GOP_PARAMETER && (in->flags & GRAPH_WEIGHT);
    }
    if (w != weights) continue;
    graph_cost c = graph_op_cost(g, i);
    f += graph_cost_flops(&c) * (double)op->count;
  }
  return f;
}

/* x rounded to the published figure's last digit (unit: 1e9 for "8.03B"
** with digit 0.01) equals it: what "within the card's rounding" means. */
static bool rounds_to(double x, double published, double digit) {
  return fabs(x - published) <= digit / 2 * (1 + 1e-12);
}

/* ---- published parameter counts ---- */

/* Dense models, total parameters (all with untied embeddings unless said):
** Llama 3.1 8B / 70B / 405B: 8.03B, 70.6B, 405.9B (HF model cards'
** safetensors counts; ours 8,030,261,248, 70,553,706,496, 405,853,388,800 =
** 2 V h + L (2 h^2 + 2 h kv + 3 h f + 2 h) + h). Mistral 7B: 7.24B (HF card).
** Qwen3-8B: 8.2B, 6.95B without the two embedding tables (Qwen3-8B card).
** Gemma 2 9B: 9.24B (HF card; tied). Gemma 3 27B: "27B" (Google's card;
** ours is the text model, 27.01B; HF's 27.4B adds the 0.4B SigLIP tower).
** Nemotron-4 340B: 9.4B embedding + 331.6B non-embedding parameters
** (NVIDIA, Nemotron-4 340B Technical Report, arXiv:2406.11704, §2).
** Gemma 2B: 2,506,434,560 (Gemma Team 2024, Gemma: Open Models Based on
** Gemini Research and Technology, Table 2: 524,550,144 embedding +
** 1,981,884,416 non-embedding; tied). Gemma 2 27B: 1,179,648,000 embedding
** + 26,047,480,320 non-embedding = 27.2B (Gemma 2 report, Table 2; tied).
** GPT-NeoX-20B: 20,554,567,680 (Black et al. 2022, arXiv:2204.06745).
** RedPajama-INCITE 3B: "2.8B" (Together's card). Qwen2-7B's sizes are
** Qwen2.5-7B's: 6.53B without its two embedding tables (Qwen2.5-7B card). */
Test(hf, dense_configs_match_published_counts) {
  static const struct {
    const char *file;
    double published, digit;
  } rows[] = {{"llama3.1-8b.json", 8.03e9, 0.01e9},   {"llama3.1-70b.json", 70.6e9, 0.1e9},
              {"llama3.1-405b.json", 405.9e9, 0.1e9}, {"mistral-7b.json", 7.24e9, 0.01e9},
              {"qwen3-8b.json", 8.2e9, 0.1e9},         {"gemma2-9b.json", 9.24e9, 0.01e9},
              {"gemma3-27b.json", 27e9, 1e9},          {"nemotron4-340b.json", 341.0e9, 0.1e9},
              {"gemma-2b.json", 2.51e9, 0.01e9},       {"gemma2-27b.json", 27.2e9, 0.1e9},
              {"gpt-neox-20b.json", 20.55e9, 0.01e9},  {"redpajama-3b.json", 2.8e9, 0.1e9},
              {"qwen2-7b.json", 7.6e9, 0.1e9}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char path[128];
    snprintf(path, sizeof path, "tests/data/hf/%s", rows[i].file);
    model *m = load(path, 4096);
    cr_assert(rounds_to((double)m->params, rows[i].published, rows[i].digit), "%s: %lld params",
              rows[i].file, (long long)m->params);
    cr_assert_eq(m->active_params, m->params, "%s is dense", rows[i].file);
    cr_assert_eq(m->expert_params, 0, "%s", rows[i].file);
    model_free(m);
  }
  /* the exact counts, by hand from the configs */
  model *m = load("tests/data/hf/llama3.1-8b.json", 4096);
  int64_t h = 4096, f = 14336, kv = 8 * 128, V = 128256, L = 32;
  cr_assert_eq(m->params, 2 * V * h + L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h);
  model_free(m);
  /* Qwen3-8B without its two 151,936 x 4,096 tables: 6.95B (its card) */
  m = load("tests/data/hf/qwen3-8b.json", 4096);
  cr_assert(rounds_to((double)(m->params - 2 * 151936LL * 4096), 6.95e9, 0.01e9), "%lld",
            (long long)m->params);
  model_free(m);
  /* Qwen2-7B without its two 152,064 x 3,584 tables: 6.53B */
  m = load("tests/data/hf/qwen2-7b.json", 4096);
  cr_assert(rounds_to((double)(m->params - 2 * 152064LL * 3584), 6.53e9, 0.01e9), "%lld",
            (long long)m->params);
  model_free(m);
  /* Nemotron-4 340B: 2 x 256,000 x 18,432 = 9.437B embedding, 331.6B the rest */
  m = load("tests/data/hf/nemotron4-340b.json", 4096);
  int64_t emb = 2 * 256000LL * 18432;
  cr_assert(rounds_to((double)emb, 9.4e9, 0.1e9));
  cr_assert(rounds_to((double)(m->params - emb), 331.6e9, 0.1e9), "%lld", (long long)m->params);
  model_free(m);
}

/* Mixture-of-experts models, total and active (the parameters one token
** passes through; ours counts the input embedding table among them):
** Mixtral 8x7B 46.7B / 12.9B and 8x22B 141B / 39B (Mistral AI's
** announcements; both figures count the embeddings). Qwen3-30B-A3B 30.5B /
** 3.3B and Qwen3-235B-A22B 235B / 22B (Qwen3 cards; the 3.3B is truncated:
** ours 3.35B, as its 30.5B is our 30.53B). GPT-OSS (OpenAI, gpt-oss-120b &
** gpt-oss-20b model card, Table 1): 116.83B / 5.13B and 20.91B / 3.61B, the
** active figures without the 0.58B input embedding table. Llama 4 (Meta's
** cards): Scout 109B / 17B, Maverick 400B / 17B; their totals count the
** ~0.87B vision tower (vision_config: 34 ViT layers of width 1,408, its
** pixel-shuffle adapter and projector), which tpusim does not build:
** ours are the text models', 107.77B and 400.71B. DeepSeek-V2: 236B /
** 21B (DeepSeek-AI 2024, arXiv:2405.04434, abstract); DeepSeek-V2-Lite:
** 15.7B / 2.4B (its card; the 2.4B truncated: ours 2.45B without the
** input embedding, checked after the table). */
Test(hf, moe_configs_match_published_counts) {
  static const struct {
    const char *file;
    double total, total_digit, active, active_digit;
    int64_t active_minus; /* the input embedding when the publisher leaves it out */
    double extra;         /* parts the publisher counts and tpusim does not build */
  } rows[] = {
      {"mixtral-8x7b.json", 46.7e9, 0.1e9, 12.9e9, 0.1e9, 0, 0},
      {"mixtral-8x22b.json", 141e9, 1e9, 39e9, 1e9, 0, 0},
      {"qwen3-30b-a3b.json", 30.5e9, 0.1e9, 3.35e9, 0.1e9, 0, 0},
      {"qwen3-235b-a22b.json", 235e9, 1e9, 22e9, 1e9, 0, 0},
      {"gpt-oss-120b.json", 116.83e9, 0.01e9, 5.13e9, 0.01e9, 201088LL * 2880, 0},
      {"gpt-oss-20b.json", 20.91e9, 0.01e9, 3.61e9, 0.01e9, 201088LL * 2880, 0},
      {"llama4-scout.json", 109e9, 1e9, 17e9, 1e9, 0, 0.87e9},
      {"llama4-maverick.json", 400e9, 10e9, 17e9, 1e9, 0, 0}, /* "400B": two digits */
      {"deepseek-v2.json", 236e9, 1e9, 21e9, 1e9, 0, 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char path[128];
    snprintf(path, sizeof path, "tests/data/hf/%s", rows[i].file);
    model *m = load(path, 4096);
    cr_assert(rounds_to((double)m->params + rows[i].extra, rows[i].total, rows[i].total_digit),
              "%s: %lld params", rows[i].file, (long long)m->params);
    cr_assert(rounds_to((double)(m->active_params - rows[i].active_minus), rows[i].active,
                        rows[i].active_digit),
              "%s: %lld active", rows[i].file, (long long)m->active_params);
    cr_assert_gt(m->expert_params, m->params / 2, "%s: experts hold most weights", rows[i].file);
    model_free(m);
  }
  model *m = load("tests/data/hf/deepseek-v2-lite.json", 4096);
  double active = (double)(m->active_params - 102400LL * 2048);
  cr_assert(rounds_to((double)m->params, 15.7e9, 0.1e9), "%lld", (long long)m->params);
  cr_assert(active >= 2.4e9 && active < 2.5e9, "%.0f active", active);
  model_free(m);
}

/* DeepSeek-V3 by hand from its config: MLA 187,107,328 a layer (below),
** 2 x 7,168 norms, 3 dense layers of 3 x 7,168 x 18,432, 58 MoE layers of
** 256 routed + 1 shared experts of 3 x 7,168 x 2,048 and a 256 x 7,168
** router, two 129,280 x 7,168 tables and the final norm: 671,026,404,352,
** the "671B" of DeepSeek's card, which leaves out the multi-token
** prediction module (README_WEIGHTS.md: "671B" main, MTP "11.5B unique
** parameters" besides the shared embedding and head; HF's "685B" counts
** the checkpoint's copies of those two as well). The module: eh_proj
** 2 x 7,168^2, three norms and one MoE layer, 11,610,067,968 (its layer
** alone 11.51B). Active: the card's 37B and the README's 36.6B both leave
** out the input embedding (ours 37.55B with it, 36.63B without). */
Test(hf, deepseek_v3_counts_by_hand) {
  const int64_t H = 7168, V = 129280;
  const int64_t mla = H * 1536 + 1536 + 1536LL * 128 * 192 + H * 576 + 512 + 512LL * 128 * 256 +
                      128LL * 128 * H;
  cr_assert_eq(mla, 187107328);
  const int64_t expert = 3 * H * 2048, dense = 3 * H * 18432;
  const int64_t moe = 256 * expert + expert + 256 * H;
  const int64_t main = 2 * V * H + 61 * (mla + 2 * H) + 3 * dense + 58 * moe + H;
  const int64_t mtp = 3 * H + 2 * H * H + mla + 2 * H + moe;
  cr_assert_eq(main, 671026404352LL);
  cr_assert_eq(mtp, 11610067968LL);
  model *m = load("tests/data/hf/deepseek-v3.json", 4096);
  cr_assert_eq(m->params, main + mtp, "%lld", (long long)m->params);
  cr_assert_eq(m->expert_params, 59 * 256 * expert); /* 58 layers and the MTP module's */
  cr_assert_eq(m->info.tf.mtp_layers, 1);
  model_free(m);
  m = load(mutated("deepseek-v3.json", "\"num_nextn_predict_layers\": 1",
                   "\"num_nextn_predict_layers\": 0"),
           4096);
  cr_assert_eq(m->params, main);
  cr_assert(rounds_to((double)m->params, 671e9, 1e9));
  int64_t active = main - 58 * 248 * expert;
  cr_assert_eq(m->active_params, active);
  /* without the input table: the card's 37B and the README's 36.6B */
  cr_assert(rounds_to((double)(active - V * H), 37e9, 1e9) &&
                rounds_to((double)(active - V * H), 36.6e9, 0.1e9),
            "%lld", (long long)active);
  model_free(m);
}

/* GLM-5 (zai-org/GLM-5 config.json, tests/data/hf/SOURCES.md): DeepSeek-V3's
** architecture at its own sizes plus DeepSeek sparse attention's lightning
** indexer in every layer: wq_b 2,048 x 32 x 128, wk 6,144 x 128, its
** LayerNorm (weight and bias, 2 x 128), weights_proj 6,144 x 32:
** 9,371,904 a layer. MLA 165,022,208 a layer (below), 3 dense layers of
** 3 x 6,144 x 12,288, 75 MoE layers of 256 routed + 1 shared experts of
** 3 x 6,144 x 2,048 and a 256 x 6,144 router, two 154,880 x 6,144 tables:
** 743,911,199,232, the card's "744B" (its MTP module apart, 9,952,920,320:
** eh_proj, three norms and one DSA MoE layer). Active without the input
** table: 40.83 B, the card's "40B active". */
Test(hf, glm5_counts_by_hand) {
  const int64_t H = 6144, V = 154880;
  const int64_t mla = H * 2048 + 2048 + 2048LL * 64 * 256 + H * 576 + 512 + 512LL * 64 * 448 +
                      64LL * 256 * H;
  cr_assert_eq(mla, 165022208);
  const int64_t idx = 2048LL * 32 * 128 + H * 128 + 2 * 128 + H * 32;
  cr_assert_eq(idx, 9371904);
  const int64_t expert = 3 * H * 2048, dense = 3 * H * 12288;
  const int64_t moe = 256 * expert + expert + 256 * H;
  const int64_t main = 2 * V * H + 78 * (mla + idx + 2 * H) + 3 * dense + 75 * moe + H;
  const int64_t mtp = 3 * H + 2 * H * H + mla + idx + 2 * H + moe;
  cr_assert_eq(main, 743911199232LL);
  cr_assert_eq(mtp, 9952920320LL);
  model *m = load("tests/data/hf/glm-5.json", 4096);
  cr_assert_eq(m->params, main + mtp, "%lld", (long long)m->params);
  cr_assert_eq(m->info.tf.dsa_topk, 2048);
  model_free(m);
  m = load(mutated("glm-5.json", "\"num_nextn_predict_layers\": 1", "\"num_nextn_predict_layers\": 0"),
           4096);
  cr_assert_eq(m->params, main);
  cr_assert(rounds_to((double)m->params, 744e9, 1e9));
  int64_t active = main - 75 * 248 * expert;
  cr_assert_eq(m->active_params, active);
  cr_assert(rounds_to((double)(active - V * H), 40e9, 2e9), "%lld", (long long)active);
  model_free(m);
}

/* DeepSeek sparse attention's cost, one layer at 4,096 tokens: the core
** attends a band of index_topk = 2,048 keys a query -- blocks of 2,048
** queries against 2,048 keys, half the full causal square's dot shapes --
** and the indexer scores each query against the causal half of the keys,
** 4,096 x 2,048.5 pairs, with 32 heads of 128: 2 x pairs x 4,096 FLOPs
** for the dots and 3 x pairs x 32 for the ReLU, the weights and the head
** sum, on the matrix unit (a custom-call, declared). Without index_topk
** the same layer is dense MLA: twice the core's dot FLOPs, no indexer. */
Test(hf, dsa_layer_costs_its_band_and_indexer) {
  model_opts o = {.global_batch = 1, .seq_len = 4096, .forward_only = true, .only_layers = 1};
  model *m = load_o("tests/data/hf/glm-5.json", o);
  char *text = th_slurp("tests/data/hf/glm-5.json", NULL);
  static const char *const IDX[] = {"\"index_topk\": 2048,", "\"index_n_heads\": 32,",
                                    "\"index_head_dim\": 128,"};
  for (int i = 0; i < 3; i++) {
    char *t = th_replace(text, IDX[i], "");
    free(text);
    text = t;
  }
  model *d = load_o(th_write_temp("glm-5-dense.json", text), o);
  free(text);
  cr_assert_eq(d->info.tf.dsa_topk, 0);
  cr_assert_float_eq(layer_dot_flops(d, false), 2 * layer_dot_flops(m, false), 1);
  double pairs = 4096.0 * 4097 / 2, idx = 0;
  int n = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind != GOP_CUSTOM || !strstr(op->name, "dsa-indexer") || op->layer < 0 ||
        op->layer >= m->info.tf.layers) /* the MTP module's is apart */
      continue;
    graph_cost c = graph_op_cost(m->g, i);
    idx += graph_cost_flops(&c);
    n++;
  }
  cr_assert_eq(n, 1);
  cr_assert_float_eq(idx, 2 * pairs * 32 * 128 + 3 * pairs * 32, 1);
  model_free(d);
  model_free(m);
}

/* DSA is refused where it cannot be built: its indexer's sizes without
** index_topk, DSA without MLA, DSA beside a sliding window. */
Test(hf, dsa_refused_where_it_cannot_be) {
  const char *e = load_error(mutated("glm-5.json", "\"index_topk\": 2048,", ""), 4096);
  cr_assert(strstr(e, "index_n_heads") && strstr(e, "needs index_topk"), "%s", e);
  static const char BASE[] =
      "{\"family\": \"transformer\", \"layers\": 2, \"hidden\": 256, \"heads\": 4, "
      "\"vocab\": 1000, \"seq_len\": 256, \"index_topk\": 64, \"index_n_heads\": 4, "
      "\"index_head_dim\": 16%s}";
  char text[512];
  snprintf(text, sizeof text, BASE, "");
  e = load_error(th_write_temp("dsa-no-mla.json", text), 256);
  cr_assert(strstr(e, "index_topk") && strstr(e, "kv_lora_rank"), "%s", e);
  snprintf(text, sizeof text, BASE,
           ", \"kv_lora_rank\": 64, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, "
           "\"v_head_dim\": 32, \"sliding_window\": 128");
  e = load_error(th_write_temp("dsa-window.json", text), 256);
  cr_assert(strstr(e, "sliding window or DeepSeek sparse attention"), "%s", e);
}

/* Kimi K2 (Moonshot's card: 1T total, 32B activated): the DeepSeek-V3
** architecture with 64 heads, 384 experts, one dense layer, a 163,840
** vocabulary and no MTP module. By hand: 1,026,408,209,408 (1.03T), active
** 32.86B with the input embedding, 31.69B without. */
Test(hf, kimi_k2_counts_by_hand) {
  const int64_t H = 7168, V = 163840, nh = 64;
  const int64_t mla = H * 1536 + 1536 + 1536 * nh * 192 + H * 576 + 512 + 512 * nh * 256 +
                      nh * 128 * H;
  const int64_t expert = 3 * H * 2048;
  const int64_t total = 2 * V * H + 61 * (mla + 2 * H) + 3 * H * 18432 +
                        60 * (385 * expert + 384 * H) + H;
  model *m = load("tests/data/hf/kimi-k2.json", 4096);
  cr_assert_eq(m->params, total, "%lld", (long long)m->params);
  cr_assert(rounds_to((double)m->params, 1e12, 0.1e12));
  cr_assert_eq(m->active_params, total - 60 * 376 * expert);
  cr_assert(rounds_to((double)(m->active_params - V * H), 32e9, 1e9), "%lld",
            (long long)m->active_params);
  model_free(m);
}

/* ---- layer kinds ---- */

/* wl_tf_layer_kind from each config: DeepSeek-V3's first 3 layers dense
** (first_k_dense_replace), Llama 4 Maverick's MoE on odd layers
** (interleave_moe_layer_step 2: HF's moe_layers = 1, 3, ...), Qwen3 MoE in
** all; Gemma 3 global every 6th (5, 11, ..., 59: 10 of 62), Gemma 2 and
** GPT-OSS every 2nd, Llama 4 every 4th (its NoPE layers), Mistral 7B none.
** Llama 4's local layers are chunks (attention_chunk_size), the others'
** sliding windows. */
Test(hf, layer_kinds_follow_the_configs) {
  static const struct {
    const char *file;
    int64_t moe, local, first_moe, first_global;
  } rows[] = {{"deepseek-v3.json", 58, 0, 3, 0},    {"llama4-maverick.json", 24, 36, 1, 3},
              {"qwen3-30b-a3b.json", 48, 0, 0, 0},   {"gemma3-27b.json", 0, 52, -1, 5},
              {"gemma2-9b.json", 0, 21, -1, 1},       {"gpt-oss-120b.json", 36, 18, 0, 1},
              {"llama4-scout.json", 48, 36, 0, 3},    {"mistral-7b.json", 0, 32, -1, -1},
              {"llama3.1-8b.json", 0, 0, -1, 0}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char path[128];
    snprintf(path, sizeof path, "tests/data/hf/%s", rows[i].file);
    model *m = load(path, 256);
    const wl_tf_dims *d = &m->info.tf;
    int64_t moe = 0, local = 0, first_moe = -1, first_global = -1;
    for (int64_t l = 0; l < d->layers; l++) {
      int k = wl_tf_layer_kind(d, l);
      moe += (k & WL_LAYER_MOE) != 0;
      local += (k & WL_LAYER_LOCAL) != 0;
      if ((k & WL_LAYER_MOE) && first_moe < 0) first_moe = l;
      if (!(k & WL_LAYER_LOCAL) && first_global < 0) first_global = l;
    }
    cr_assert_eq(moe, rows[i].moe, "%s: %lld MoE layers", rows[i].file, (long long)moe);
    cr_assert_eq(local, rows[i].local, "%s: %lld local layers", rows[i].file, (long long)local);
    cr_assert_eq(first_moe, rows[i].first_moe, "%s", rows[i].file);
    cr_assert_eq(first_global, rows[i].first_global, "%s", rows[i].file);
    cr_assert_eq(d->window_chunked, strncmp(rows[i].file, "llama4", 6) == 0, "%s", rows[i].file);
    model_free(m);
  }
}

/* one_kind builds DeepSeek-V3's dense and MoE layers apart; two layers
** minus one is a layer, by hand: MLA 187,107,328 + two norms + the FFN
** (dense 3 x 7,168 x 18,432; MoE 257 experts of 3 x 7,168 x 2,048 and the
** router). Left alone, a two-layer build is the model's first two layers:
** both dense. */
Test(hf, one_kind_builds_dense_and_moe_layers) {
  const int64_t H = 7168, mla = 187107328, norms = 2 * H;
  const int64_t dense = 3 * H * 18432, moe = 257 * 3 * H * 2048 + 256 * H;
  model *m = load("tests/data/hf/deepseek-v3.json", 512);
  int64_t per[2][2];
  for (int kind = 0; kind < 2; kind++)
    for (int n = 1; n <= 2; n++) {
      diag *d = diag_new();
      model_opts o = {.global_batch = 1, .seq_len = 512, .only_layers = n, .one_kind = true,
                      .layer_kind = kind ? WL_LAYER_MOE : 0};
      model *s = model_derive(m, &o, d);
      cr_assert_not_null(s);
      per[kind][n - 1] = s->params;
      model_free(s);
      diag_free(d);
    }
  cr_assert_eq(per[0][1] - per[0][0], mla + norms + dense);
  cr_assert_eq(per[1][1] - per[1][0], mla + norms + moe);
  cr_assert_eq(per[1][0] - per[0][0], moe - dense);
  diag *d = diag_new();
  model_opts first = {.global_batch = 1, .seq_len = 512, .only_layers = 2};
  model *s = model_derive(m, &first, d);
  cr_assert_eq(s->params, per[0][1], "layers 0 and 1 are dense");
  model_free(s);
  model_opts local = {.global_batch = 1, .seq_len = 512, .only_layers = 1, .one_kind = true,
                      .layer_kind = WL_LAYER_LOCAL};
  cr_assert_null(model_derive(m, &local, d), "DeepSeek-V3 has no sliding window");
  cr_assert(strstr(diag_message(d, 0), "without sliding_window"), "%s", diag_message(d, 0));
  diag_free(d);
  model_free(m);
}

/* ---- attention costs by hand ---- */

/* Gemma 2 9B at seq 8,192, one layer of each kind: the core of a local
** layer (window 4,096) is [S x W], 2 dots of 2 x 16 heads x 8,192 x 4,096
** x 256 FLOPs; a global layer's is [S x S], twice that. The projections
** are the same in both. */
Test(hf, sliding_window_core_is_s_by_w) {
  model *m = load("tests/data/hf/gemma2-9b.json", 8192);
  double core[2], linear[2];
  for (int k = 0; k < 2; k++) {
    diag *d = diag_new();
    model_opts o = {.global_batch = 1, .seq_len = 8192, .only_layers = 1, .one_kind = true,
                    .layer_kind = k ? WL_LAYER_LOCAL : 0, .forward_only = true};
    model *s = model_derive(m, &o, d);
    cr_assert_not_null(s);
    core[k] = layer_dot_flops(s, false);
    linear[k] = layer_dot_flops(s, true);
    model_free(s);
    diag_free(d);
  }
  cr_assert_eq(core[1], 2.0 * 2 * 16 * 8192 * 4096 * 256, "%g", core[1]);
  cr_assert_eq(core[0], 2 * core[1]);
  cr_assert_eq(linear[0], linear[1]);
  model_free(m);
  /* a sequence that is no multiple of the window is padded to one: 5,000
  ** tokens in 2 blocks of 4,096 */
  m = load("tests/data/hf/mistral-7b.json", 5000);
  cr_assert_eq(layer_dot_flops(m, false) / 32, 2.0 * 2 * 32 * 8192 * 4096 * 128);
  model_free(m);
}

/* One MLA layer's attention core at seq 1,024: 128 heads, scores over
** qk_nope + qk_rope = 192 channels and values of 128: 2 x 128 x 1,024^2 x
** (192 + 128) FLOPs. */
Test(hf, mla_core_by_hand) {
  model_opts o = {.global_batch = 1, .seq_len = 1024, .only_layers = 1, .forward_only = true};
  model *m = load_o("tests/data/hf/deepseek-v3.json", o);
  cr_assert_eq(layer_dot_flops(m, false), 2.0 * 128 * 1024 * 1024 * (192 + 128));
  cr_assert_eq(m->info.tf.head_dim, 192);
  cr_assert_eq(m->info.tf.v_head_dim, 128);
  model_free(m);
}

/* ---- shards ---- */

/* Context parallelism at cp 2 (Llama 3.1 8B, one layer, seq 4,096): a chip's
** linear layers see half the tokens, so half the FLOPs; its attention core
** scores its 2,048 queries against all 4,096 keys: the full core / cp. */
Test(hf, shard_cp_halves_linear_and_core) {
  model *m = load("tests/data/hf/llama3.1-8b.json", 4096);
  double core[2], linear[2];
  for (int i = 0; i < 2; i++) {
    diag *d = diag_new();
    model_opts o = {.global_batch = 1, .seq_len = 4096, .only_layers = 1, .shard_cp = i ? 2 : 0};
    model *s = model_derive(m, &o, d);
    cr_assert_not_null(s);
    core[i] = layer_dot_flops(s, false);
    linear[i] = layer_dot_flops(s, true);
    cr_assert_eq(s->info.per_step, i ? 2048 : 4096);
    model_free(s);
    diag_free(d);
  }
  cr_assert_eq(core[0], 2.0 * 2 * 32 * 4096.0 * 4096 * 128, "%g", core[0]);
  cr_assert_eq(core[1], core[0] / 2);
  cr_assert_eq(linear[1], linear[0] / 2);
  model_free(m);
}

/* Local layers under context parallelism, also the full core / cp: Gemma 2
** (window 4,096, seq 8,192) at cp 4, a window wider than a chip's 2,048
** queries, and GPT-OSS (window 128, seq 4,096) at cp 2, blocks of 128
** inside a chip's 2,048; each chip's core is [S/cp x W]. */
Test(hf, shard_cp_of_local_layers) {
  static const struct {
    const char *file;
    int64_t seq, cp, heads, window, head_dim;
  } rows[] = {{"tests/data/hf/gemma2-9b.json", 8192, 4, 16, 4096, 256},
              {"tests/data/hf/gpt-oss-20b.json", 4096, 2, 64, 128, 64}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    model *m = load(rows[i].file, rows[i].seq);
    double core[2];
    for (int k = 0; k < 2; k++) {
      diag *d = diag_new();
      model_opts o = {.global_batch = 1, .seq_len = rows[i].seq, .only_layers = 1,
                      .one_kind = true, .layer_kind = WL_LAYER_LOCAL, .forward_only = true,
                      .shard_cp = k ? rows[i].cp : 0};
      model *s = model_derive(m, &o, d);
      cr_assert_not_null(s, "%s", rows[i].file);
      core[k] = layer_dot_flops(s, false);
      model_free(s);
      diag_free(d);
    }
    cr_assert_eq(core[0], 2.0 * 2 * (double)(rows[i].heads * rows[i].seq * rows[i].window *
                                             rows[i].head_dim), "%s", rows[i].file);
    cr_assert_eq(core[1], core[0] / (double)rows[i].cp, "%s", rows[i].file);
    model_free(m);
  }
}

/* Expert parallelism at ep 2 (Qwen3-30B-A3B, one layer): the chip holds
** half the 128 experts, so half the expert weights, and each takes twice
** the tokens, so the experts' FLOPs stay tokens x top_k x the expert FFN;
** etp 2 then halves each expert's FFN. Given ep, tp no longer splits the
** experts (Megatron-Core: experts use etp); without it (shard_ep 0) the
** old rule holds, experts and their FFN split by tp. */
Test(hf, shard_ep_halves_expert_weights) {
  model *m = load("tests/data/hf/qwen3-30b-a3b.json", 1024);
  const int64_t expert = 3 * 2048 * 768;
  struct {
    int64_t tp, ep, etp, experts, width;
  } rows[] = {{1, 1, 1, 128, 768}, {1, 2, 1, 64, 768}, {1, 2, 2, 64, 384},
              {2, 1, 1, 128, 768}, {2, 0, 0, 64, 384}};
  double flops1 = 0;
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    diag *d = diag_new();
    model_opts o = {.global_batch = 1, .seq_len = 1024, .only_layers = 1, .shard_tp = rows[i].tp,
                    .shard_ep = rows[i].ep, .shard_etp = rows[i].etp, .forward_only = true};
    model *s = model_derive(m, &o, d);
    cr_assert_not_null(s, "row %zu", i);
    cr_assert_eq(s->info.tf.experts, rows[i].experts, "row %zu", i);
    cr_assert_eq(s->info.tf.moe_ffn, rows[i].width, "row %zu", i);
    cr_assert_eq(s->expert_params, rows[i].experts * expert * rows[i].width / 768, "row %zu", i);
    double f = layer_dot_flops(s, true);
    if (i == 0) flops1 = f;
    if (rows[i].tp == 1 && rows[i].etp == 1)
      cr_assert_eq(f, flops1, "row %zu: expert FLOPs per chip stay", i);
    model_free(s);
    diag_free(d);
  }
  diag *d = diag_new();
  model_opts bad = {.global_batch = 1, .seq_len = 1024, .only_layers = 1, .shard_ep = 3};
  cr_assert_null(model_derive(m, &bad, d));
  cr_assert(strstr(diag_message(d, 0), "experts 128 must divide by ep 3"), "%s", diag_message(d, 0));
  diag_free(d);
  model_free(m);
}

/* The routed experts' forward FLOPs of a one-layer shard: the dots whose
** weight is an expert matrix ([E, H, F], named "experts"). */
static double expert_dot_flops(const model *m) {
  const graph *g = m->g;
  double f = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind != GOP_DOT || op->phase != GRAPH_FORWARD) continue;
    bool expert = false;
    for (int k = 0; k < op->n_in; k++) {
      const graph_op *in = graph_get(g, op->in[k]);
      expert |= in->kind == GOP_PARAMETER && in->name && strstr(in->name, ".experts.");
    }
    if (!expert) continue;
    graph_cost c = graph_op_cost(g, i);
    f += graph_cost_flops(&c) * (double)op->count;
  }
  return f;
}

/* Expert parallelism under tensor parallelism (Megatron-Core, which needs
** sequence parallelism with MoE and tp > 1): a tp rank routes only its own
** seq / tp tokens, the dispatcher all-gathers over the expert tensor group
** only, so a chip's routed-expert FLOPs are (seq / tp) x top_k x 3
** matrices x 2 x hidden x moe_ffn whatever ep and etp are. By hand for
** Qwen3-30B-A3B (hidden 2048, moe_ffn 768, top 8) at seq 1024:
** 512 x 8 x 3 x 2 x 2048 x 768 = 38,654,705,664 at tp 2 -- ep 8 with
** etp 1 or 2, and ep 2 with etp 2 -- and twice that at tp 1. The old
** graph gave every tp rank all 1024 tokens at etp 1 (tp times the work). */
Test(hf, experts_under_tp_route_a_ranks_own_tokens) {
  model *m = load("tests/data/hf/qwen3-30b-a3b.json", 1024);
  const double tp2 = 512.0 * 8 * 3 * 2 * 2048 * 768;
  cr_assert_eq(tp2, 38654705664.0);
  struct {
    int64_t tp, ep, etp;
    double flops;
  } rows[] = {{1, 8, 1, 2 * tp2}, {2, 8, 1, tp2}, {2, 8, 2, tp2}, {2, 2, 2, tp2}, {4, 8, 1, tp2 / 2}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    diag *d = diag_new();
    model_opts o = {.global_batch = 1, .seq_len = 1024, .only_layers = 1, .shard_tp = rows[i].tp,
                    .shard_ep = rows[i].ep, .shard_etp = rows[i].etp, .forward_only = true};
    model *s = model_derive(m, &o, d);
    cr_assert_not_null(s, "row %zu", i);
    double f = expert_dot_flops(s);
    cr_assert(fabs(f - rows[i].flops) <= 1e-9 * rows[i].flops, "row %zu: %.6g, expected %.6g", i,
              f, rows[i].flops);
    model_free(s);
    diag_free(d);
  }
  model_free(m);
}

/* Long sequences build: a one-layer chip shard of seq 1,048,576 at cp 32
** (32,768 queries against 1M keys), and one layer at seq 131,072, for the
** widest (Llama 3.1 405B) and MLA (DeepSeek-V3) models, without the graph's
** element or op limits tripping. */
Test(hf, long_sequences_build) {
  static const char *const files[] = {"tests/data/hf/llama3.1-405b.json",
                                      "tests/data/hf/deepseek-v3.json"};
  for (int i = 0; i < 2; i++) {
    model *m = load(files[i], 4096);
    diag *d = diag_new();
    model_opts cp = {.global_batch = 1, .seq_len = 1048576, .only_layers = 1, .shard_cp = 32};
    model_opts one = {.global_batch = 1, .seq_len = 131072, .only_layers = 1};
    model *a = model_derive(m, &cp, d), *b = model_derive(m, &one, d);
    if (diag_count(d)) diag_print(d, stderr);
    cr_assert(a && b, "%s", files[i]);
    cr_assert_eq(a->info.per_step, 32768);
    model_free(a);
    model_free(b);
    diag_free(d);
    model_free(m);
  }
}

/* ---- bad configs ---- */

/* Each refused at the field's own line:col in the file (found here by
** th_where, independently of the loader), saying what was expected. */
Test(hf, bad_configs_are_refused_with_position) {
  static const struct {
    const char *file, *from, *to, *says, *at; /* at: the text the position points to */
  } rows[] = {
      {"qwen3-30b-a3b.json", "\"qwen3_moe\"", "\"qwen3moe\"",
       "model_type: unknown model_type \"qwen3moe\"; did you mean \"qwen3_moe\"?", "\"qwen3moe\""},
      {"deepseek-v3.json", "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2",
       "moe_layer_freq: 2: only 1 is modelled for DeepSeek", "2,\n  \"n_group\""},
      {"gpt-oss-20b.json", "\"full_attention\",\n    \"sliding_attention\",\n    \"full_attention\"",
       "\"full_attention\",\n    \"full_attention\",\n    \"full_attention\"",
       "layer_types[2]: layer 2 breaks the pattern: tpusim models every 2-th layer global", NULL},
      {"mistral-7b.json", "\"silu\"", "\"tanh\"",
       "hidden_act: \"tanh\" in a gated MLP is not modelled; expected silu (SwiGLU)", "\"tanh\""},
      {"gemma3-27b.json", "\"hidden_size\": 5376,", "", "text_config: missing field 'hidden_size'",
       NULL},
      {"llama4-scout.json", "\"model_type\": \"llama4_text\"", "\"model_type\": \"llama\"",
       "text_config.model_type: expected \"llama4_text\" inside a \"llama4\" config, got \"llama\"",
       "\"llama\""},
      {"qwen3-30b-a3b.json", "\"mlp_only_layers\": []", "\"mlp_only_layers\": [2]",
       "mlp_only_layers[0]: expected 0: tpusim models dense layers as the first few", "2]"},
      {"qwen3-next-80b-a3b.json", "\"linear_num_value_heads\": 32", "\"linear_num_value_heads\": 24",
       "linear_num_value_heads: 24 is not a multiple of linear_num_key_heads 16", "24,"},
      {"qwen3-next-80b-a3b.json", "\"full_attention_interval\": 4", "\"full_attention_interval\": 100",
       "full_attention_interval: 100 is past the 48 layers: expected 2 to 48", "100,"},
      /* the builder's checks of translated fields point at the config's
      ** own keys (jin.origin), not into the translated model.json text */
      {"llama3.1-8b.json", "\"num_attention_heads\": 32", "\"num_attention_heads\": 7",
       "num_attention_heads: hidden 4096 is not divisible by heads 7; give head_dim", "7,"},
      {"llama3.1-8b.json", "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5",
       "num_key_value_heads: heads 32 is not a multiple of kv_heads 5", "5,"},
      {"llama3.1-8b.json", "\"num_hidden_layers\": 32", "\"num_hidden_layers\": 100000",
       "num_hidden_layers: 100000 is past tpusim's limit of 1024", "100000,"},
      {"gpt2.json", "\"n_positions\": 1024", "\"n_positions\": 512",
       "n_positions: seq_len 1024 exceeds max_positions 512", "512,"},
      /* and the checks across an object's fields, at the field they name
      ** (they pointed at the translated "moe" object, or the file) */
      {"mixtral-8x7b.json", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9",
       "num_experts_per_tok: top_k 9 exceeds experts 8", "9,"},
      {"deepseek-v3.json", "\"n_group\": 8", "\"n_group\": 7",
       "n_group: n_group 7 does not divide experts 256", "7,"},
      {"nemotron-h-8b.json", "\"mamba_num_heads\": 128", "\"mamba_num_heads\": 100",
       "mamba_num_heads: mamba_num_heads 100 is not a multiple of n_groups 8", "100,"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const char *path = mutated(rows[i].file, rows[i].from, rows[i].to);
    const char *msg = load_error(path, 1024);
    cr_assert(strstr(msg, rows[i].says), "%s: got %s", rows[i].to, msg);
    if (!rows[i].at) continue;
    char *text = th_slurp(path, NULL), where[32], want[300];
    th_where(text, rows[i].at, where, sizeof where);
    snprintf(want, sizeof want, "%s:%s: ", path, where);
    cr_assert(strncmp(msg, want, strlen(want)) == 0, "want %s in %s", want, msg);
    free(text);
  }
}

/* The new model.json fields under their HF names, and their misuse. */
Test(hf, model_json_fields_and_misuse) {
  const char *base = "{\"family\": \"transformer\", \"layers\": 2, \"hidden\": 256, \"heads\": 4, "
                     "\"vocab\": 1000, \"seq_len\": 512, \"ffn\": \"swiglu\", \"ffn_hidden\": 512, "
                     "%s}";
  static const struct {
    const char *extra, *says; /* says NULL: loads */
  } rows[] = {
      {"\"kv_lora_rank\": 64, \"q_lora_rank\": null, \"qk_nope_head_dim\": 32, "
       "\"qk_rope_head_dim\": 16, \"v_head_dim\": 32", NULL},
      {"\"qk_nope_head_dim\": 32", "qk_nope_head_dim: multi-head latent attention needs kv_lora_rank"},
      {"\"kv_lora_rank\": 64, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, "
       "\"v_head_dim\": 32, \"head_dim\": 48", "head_dim: under multi-head latent attention"},
      {"\"sliding_window\": 128, \"sliding_window_pattern\": 2", NULL},
      {"\"sliding_window_pattern\": 2", "sliding_window_pattern: a pattern of local layers needs"},
      {"\"attention_chunk_size\": 128, \"sliding_window_pattern\": 2", NULL},
      {"\"sliding_window\": 128, \"attention_chunk_size\": 128",
       "attention_chunk_size: a layer's local attention is a sliding window or chunks, not both"},
      {"\"moe\": {\"experts\": 8, \"top_k\": 2, \"moe_intermediate_size\": 128, "
       "\"n_shared_experts\": 1, \"first_k_dense_replace\": 1}", NULL},
      {"\"moe\": {\"experts\": 8, \"top_k\": 2, \"first_k_dense_replace\": 3}",
       "first_k_dense_replace: expected an integer in [0, 2], got 3"},
      {"\"num_nextn_predict_layers\": 1, \"ffn\": \"relu2\"", NULL},
      {"\"num_nextn_predict_layers\": 17", "num_nextn_predict_layers: 17 is past tpusim's limit of 16"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char text[1024];
    snprintf(text, sizeof text, base, rows[i].extra);
    /* "ffn" given twice is a duplicate key: drop the base's for relu2 */
    if (strstr(rows[i].extra, "relu2")) {
      char *t = th_replace(text, "\"ffn\": \"swiglu\", ", "");
      snprintf(text, sizeof text, "%s", t);
      free(t);
    }
    const char *path = th_write_temp("hf-fields.json", text);
    if (!rows[i].says) {
      model *m = load(path, 0);
      model_free(m);
      continue;
    }
    const char *msg = load_error(path, 0);
    cr_assert(strstr(msg, rows[i].says), "%s: got %s", rows[i].extra, msg);
  }
}

/* Gemma 4 26B A4B (tests/validation/models/gemma4-26b.json, its published
** text_config): 30 layers, hidden 2816, 16 heads of 256 (8 KV heads), a
** dense GeGLU MLP of 2112 beside 128 routed experts of 704 (top 8), vocab
** 262,144 tied. The routed experts by hand: 30 x 128 x 3 x 2816 x 704 =
** 22,837,985,280; the card's "26B" counts the global layers' wider heads
** (head_dim 512), which are not built: within 5 % of it. Five local
** layers of window 1024 to one global. */
Test(hf, gemma4_moe_block) {
  diag *d = diag_new();
  model_opts o = {.seq_len = 4096};
  model *m = model_load("tests/validation/models/gemma4-26b.json", &o, d);
  if (!m) diag_print(d, stderr);
  cr_assert_not_null(m);
  diag_free(d);
  cr_assert_eq(m->expert_params, 22837985280LL);
  cr_assert(fabs((double)m->params / 26e9 - 1) < 0.05, "%lld", (long long)m->params);
  cr_assert_eq(m->info.tf.experts, 128);
  cr_assert_eq(m->info.tf.top_k, 8);
  cr_assert_eq(m->info.tf.window, 1024);
  cr_assert_eq(wl_tf_layer_kind(&m->info.tf, 5), WL_LAYER_MOE);
  cr_assert_eq(wl_tf_layer_kind(&m->info.tf, 0), WL_LAYER_MOE | WL_LAYER_LOCAL);
  model_free(m);
}

/* --set: one config stands for its family's other sizes. Llama 2 70B is
** the 7B config.json with the 70B's fields (meta-llama/Llama-2-70b-hf
** config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads, FFN 28672);
** its count by hand: embedding and untied head 2 x 32000 x 8192 =
** 524,288,000; a layer's q and o 2 x 8192^2, k and v 2 x 8192 x 1024, MLP
** 3 x 8192 x 28672, two norms 2 x 8192 = 855,654,400, x 80 layers; the
** final norm 8192: 68,976,648,192 (the model card's "70B"). */
Test(hf, set_makes_another_size_of_the_family) {
  const char *sets[] = {"num_hidden_layers=80", "hidden_size=8192", "num_attention_heads=64",
                        "num_key_value_heads=8", "intermediate_size=28672"};
  model *m = load_o("tests/validation/models/llama2-7b.json",
                    (model_opts){.global_batch = 1, .seq_len = 128, .set = sets, .n_set = 5});
  cr_assert_eq(m->params, 68976648192LL, "%lld", (long long)m->params);
  cr_assert_str_eq(m->name, "llama2-7b+set"); /* a changed file says so */
  /* a derived shard is built from the changed tree, not the file */
  diag *dg = diag_new();
  model *d = model_derive(m, &(model_opts){.global_batch = 1, .seq_len = 128, .only_layers = 1},
                          dg);
  cr_assert_not_null(d);
  diag_free(dg);
  cr_assert_eq(d->info.tf.hidden, 8192);
  model_free(d);
  model_free(m);
}

/* The first message of a --set load that must fail. */
static const char *set_error(const char *set) {
  static char msg[512];
  const char *sets[] = {set};
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = 128, .set = sets, .n_set = 1};
  model *m = model_load("tests/validation/models/llama2-7b.json", &o, d);
  cr_assert_null(m, "%s loaded", set);
  snprintf(msg, sizeof msg, "%s", diag_message(d, 0));
  diag_free(d);
  return msg;
}

Test(hf, set_refuses_what_the_file_does_not_have) {
  /* a misspelt field is not added (it would be silently ignored): the nearest */
  cr_assert(strstr(set_error("num_hiden_layers=80"), "did you mean 'num_hidden_layers'"));
  /* a value of another type, or trailing text after a number */
  cr_assert(strstr(set_error("num_hidden_layers=eighty"), "expected a number"));
  cr_assert(strstr(set_error("num_hidden_layers=80x"), "expected a number"));
  cr_assert(strstr(set_error("layers"), "expected FIELD=VALUE"));
  cr_assert(strstr(set_error("hidden_size.x=1"), "is not an object"));
}
