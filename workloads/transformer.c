/*
** transformer.c -- the transformer family: decoder-only (GPT, Llama,
** Mixtral, Qwen, DeepSeek, GPT-OSS, Gemma, Nemotron) and encoder (BERT)
** stacks, written out as the ops JAX/XLA emits before fusion. Attention is
** computed in full (S x T scores, then the causal mask), which is what
** Megatron's and PaLM's FLOP formulas count; a sliding-window layer
** computes S x W. Layers may differ (wl_tf_layer_kind): a dense or a
** mixture-of-experts FFN, local or global attention. The builder also
** writes one chip's shard: tensor, context and expert parallel.
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "families.h"

static const char *const KEYS[] = {
    "kind",  "layers",  "hidden",         "heads",         "kv_heads", "head_dim",
    "ffn_hidden", "ffn", "norm",          "parallel_block", "vocab",   "seq_len",
    "tied_embeddings", "moe", "positions", "bias",       "max_positions", "type_vocab",
    "rope_theta", "qkv_bias", "dropout",
    /* newer models, under their HuggingFace names */
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "sliding_window", "sliding_window_pattern", "attention_chunk_size", "num_nextn_predict_layers",
    "attention_sinks", "qk_norm", "sandwich_norm",
    /* DeepSeek sparse attention (DeepSeek-V3.2, GLM-5), under their HF names */
    "index_topk", "index_n_heads", "index_head_dim", "index_topk_freq",
    /* a training recipe's MTP depth, under Megatron-Core's names */
    "mtp_num_layers", "mtp_use_repeated_layer",
    /* hybrid Mamba-2 models (Nemotron-H), under NemotronHConfig's names */
    "hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
    "conv_kernel", "chunk_size", "mtp_hybrid_override_pattern",
    /* Gated DeltaNet hybrids (Qwen3-Next), under Qwen3NextConfig's names */
    "full_attention_interval", "layer_types", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "attn_output_gate",
    "partial_rotary_factor",
    /* a decoder whose attention skips no key (MaxText of 2023 called its flash
    ** kernel with causal=False), under the name HF configs use */
    "is_causal", NULL};
static const char *const MOE_KEYS[] = {
    "experts", "top_k", "capacity_factor", "moe_intermediate_size", "n_shared_experts",
    "shared_expert_intermediate_size", "first_k_dense_replace", "moe_layer_freq", "n_group",
    "topk_group", "moe_latent_size", "shared_expert_gate", NULL};
static const char *const KIND[] = {"decoder", "encoder", NULL};
static const char *const FFN[] = {"gelu", "relu", "swiglu", "geglu", "relu2", NULL};
static const char *const NORM[] = {"layernorm", "rmsnorm", NULL};
static const char *const POS[] = {"rotary", "learned", "none", NULL};
enum { FFN_GELU, FFN_RELU, FFN_SWIGLU, FFN_GEGLU, FFN_RELU2 };
enum { POS_ROTARY, POS_LEARNED, POS_NONE };

typedef struct {
  int kind; /* 0 decoder, 1 encoder */
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq;
  int ffn, norm, pos;
  bool parallel, tied, bias, qkv_bias;
  bool causal; /* a decoder's causal mask (is_causal, default true) */
  int64_t experts, top_k, max_positions, type_vocab;
  double capacity; /* moe.capacity_factor: each expert padded to it; 0: dropless */
  double dropout; /* attention and hidden dropout probability (Megatron: 0.1) */
  int64_t model_layers; /* the model's layers; `layers` is how many are built */
  /* mixture of experts: `experts` are those this graph holds, the router
  ** chooses among router_experts (all of them; experts/tp under the old
  ** tp split); each held expert takes capacity_mult times the tokens this
  ** graph holds (the tokens of its expert group's chips, shard_ep) */
  int64_t router_experts;
  double capacity_mult;
  int64_t moe_ffn, shared_ffn; /* expert FFN width; shared experts' total width (0: none) */
  int64_t first_dense, moe_every;
  int64_t groups, topk_groups; /* group-limited routing (DeepSeek-V3's n_group, topk_group; 0: none) */
  /* multi-head latent attention (kv_lora > 0; q_lora 0: a plain q projection) */
  int64_t q_lora, kv_lora, qk_nope, qk_rope, v_dim;
  int64_t window, global_every; /* sliding-window attention (0: none) */
  /* DeepSeek sparse attention: each query attends the dsa_topk keys its
  ** lightning indexer (dsa_heads heads of dsa_dim) picks, the indexer run
  ** on every dsa_every-th layer and its choice reused between (0: none) */
  int64_t dsa_topk, dsa_heads, dsa_dim, dsa_every;
  bool chunked;                 /* the window is Llama 4's chunks, not a sliding band */
  int64_t mtp;                  /* multi-token prediction modules */
  int64_t mtp_depth;            /* MTP depths run: mtp, or Megatron-Core's mtp_num_layers
                                ** passes through the modules' weights in turn
                                ** (mtp_use_repeated_layer) */
  bool mtp_repeated;
  bool sinks, qk_norm, sandwich;
  /* hybrid models: the pattern (NULL: every layer attention + FFN) and the
  ** Mamba-2 mixer's sizes (heads and groups this chip's under tp); latent
  ** MoE's expert width (0: hidden) */
  const char *hybrid, *mtp_hybrid; /* the MTP module's layers (Nemotron 3 Super: "*E") */
  int64_t m_heads, m_hdim, m_state, m_groups, m_conv, m_chunk, latent;
  /* Gated DeltaNet layers (Qwen3-Next): every layer but each gdn_every-th;
  ** key and value heads (this chip's under tp), their widths, conv taps,
  ** the delta rule's chunk */
  int64_t gdn_every, g_kh, g_vh, g_kd, g_vd, g_conv, g_chunk;
  bool attn_gate, shared_gate;
  double rotary_frac; /* the share of a head's channels RoPE turns (1: all) */
  int64_t seq_local; /* this chip's query tokens: seq / cp */
  int64_t kv_cache;  /* inference: keys and values already cached per sequence */
} tf_cfg;

/* The largest transformer tpusim accepts: each bound a generous margin over
** the largest published configuration, checked before the graph is built so
** that a typo (100000 layers) is refused at once, with the reason, instead of
** building ~55M ops until the kernel kills the process. docs/limits.md. */
static const struct {
  const char *key; /* under "moe" when in_moe */
  bool in_moe;
  int64_t max;
  const char *why;
} LIMITS[] = {
    {"layers", false, 1024,
     "published models have at most 126 layers (Llama 3.1 405B; PaLM 118, GPT-3 96); each layer "
     "adds ~640 ops to the training graph, so 1,024 layers is ~655k ops and ~0.4 GB"},
    {"hidden", false, 1 << 17,
     "published models are at most ~25k wide (Llama 3.1 405B 16,384, PaLM 18,432)"},
    {"ffn_hidden", false, 1 << 19,
     "4 x the hidden limit; the widest published FFN is 73,728 (PaLM)"},
    {"vocab", false, 1 << 21, "published vocabularies are at most ~256k (PaLM, Gemma)"},
    {"experts", true, 4096,
     "published MoE layers have at most 2,048 experts (Switch-C), 256 in recent models "
     "(DeepSeek-V3)"},
    {"moe_intermediate_size", true, 1 << 19,
     "as ffn_hidden; published experts are at most 16,384 wide (Mixtral 8x22B)"},
    {"num_nextn_predict_layers", false, 16,
     "DeepSeek-V3 predicts 1 extra token (its paper tries depths up to 2); each module is a "
     "whole layer and an output head"},
};

/* Reports each field of s (or s.moe) past its limit; false if any. */
static bool within_limits(jin *j, const cJSON *s, const cJSON *moe) {
  bool ok = true;
  for (size_t i = 0; i < sizeof LIMITS / sizeof *LIMITS; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(LIMITS[i].in_moe ? moe : s, LIMITS[i].key);
    if (!cJSON_IsNumber(v) || v->valuedouble <= (double)LIMITS[i].max) continue;
    if (LIMITS[i].in_moe) jin_push_key(j, "moe", 0);
    jin_push_key(j, LIMITS[i].key, 0);
    jin_error(j, 0, "%.0f is past tpusim's limit of %lld: %s (docs/limits.md)", v->valuedouble,
              (long long)LIMITS[i].max, LIMITS[i].why);
    jin_pop(j);
    if (LIMITS[i].in_moe) jin_pop(j);
    ok = false;
  }
  return ok;
}

/* A relation between two root fields broken, reported at the first of a, b
** the file gives (either may be a default it left out), else on the file. */
static void pair_error(jin *j, const cJSON *s, const char *a, const char *b, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void pair_error(jin *j, const cJSON *s, const char *a, const char *b, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *at = cJSON_GetObjectItemCaseSensitive(s, a) ? a : cJSON_GetObjectItemCaseSensitive(s, b) ? b : NULL;
  if (at) jin_error_at(j, at, 0, "%s", msg);
  else jin_error(j, 1, "%s", msg);
}

/* jin_get_int, with null read as absent: HuggingFace writes "q_lora_rank":
** null (DeepSeek-V2-Lite) and "sliding_window": null (Mistral v0.3). */
static int get_int_or_null(jin *j, const cJSON *s, const char *key, int64_t min, int64_t max,
                           int64_t *out) {
  if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(s, key))) return 0;
  return jin_get_int(j, s, key, min, max, false, out);
}

/* Reports `key`, when present, with `why` it does not belong; false then. */
static bool refuse(jin *j, const cJSON *s, const char *key, const char *why) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
  if (!v || cJSON_IsNull(v)) return true;
  jin_push_key(j, key, 0);
  jin_error(j, 0, "%s", why);
  jin_pop(j);
  return false;
}

static const int64_t BIG = 1LL << 24; /* 16M: any real width or count */

/* Group-limited routing (DeepSeek-V3 sec. 2.1.2; DeepseekV3Config n_group,
** topk_group): experts in n_group equal groups, each token's top_k chosen
** inside its best topk_group groups. What the dispatch's traffic depends on
** (sim/stepcost.c); the graph's FLOPs do not change. */
static bool read_groups(jin *j, const cJSON *moe, tf_cfg *c) {
  bool ok = jin_get_int(j, moe, "n_group", 0, c->experts, false, &c->groups) >= 0;
  ok &= jin_get_int(j, moe, "topk_group", 0, c->experts, false, &c->topk_groups) >= 0;
  if (!ok) return false;
  if (c->groups > 0 && c->experts % c->groups) {
    jin_error_at(j, "moe.n_group", 0, "n_group %lld does not divide experts %lld (each group holds experts / n_group)",
              (long long)c->groups, (long long)c->experts);
    return false;
  }
  if (c->topk_groups > 0 && (c->groups == 0 || c->topk_groups > c->groups)) {
    jin_error_at(j, "moe.topk_group", 0, "topk_group %lld needs n_group of at least that many groups (n_group %lld)",
              (long long)c->topk_groups, (long long)c->groups);
    return false;
  }
  return true;
}

/* The "moe" object: experts, routing, expert widths, which layers. */
static bool read_moe(jin *j, const cJSON *moe, tf_cfg *c) {
  jin_push_key(j, "moe", 0);
  bool ok = jin_only(j, moe, MOE_KEYS, NULL) == 0;
  ok &= jin_get_int(j, moe, "experts", 1, 1 << 16, true, &c->experts) > 0;
  ok &= jin_get_int(j, moe, "top_k", 1, 1 << 16, true, &c->top_k) > 0;
  ok &= jin_get_num(j, moe, "capacity_factor", 0.01, 1000, false, &c->capacity) >= 0;
  ok &= jin_get_int(j, moe, "moe_intermediate_size", 1, BIG, false, &c->moe_ffn) >= 0;
  int64_t n_shared = 0;
  ok &= jin_get_int(j, moe, "n_shared_experts", 0, 1 << 10, false, &n_shared) >= 0;
  ok &= jin_get_int(j, moe, "shared_expert_intermediate_size", 0, BIG, false, &c->shared_ffn) >= 0;
  ok &= jin_get_int(j, moe, "first_k_dense_replace", 0, c->layers, false, &c->first_dense) >= 0;
  c->moe_every = 1;
  ok &= jin_get_int(j, moe, "moe_layer_freq", 1, c->layers, false, &c->moe_every) >= 0;
  if (ok && c->top_k > c->experts) jin_error_at(j, "moe.top_k", 0, "top_k %lld exceeds experts %lld",
                                             (long long)c->top_k, (long long)c->experts), ok = false;
  ok &= read_groups(j, moe, c);
  ok &= jin_get_int(j, moe, "moe_latent_size", 1, BIG, false, &c->latent) >= 0;
  ok &= jin_get_bool(j, moe, "shared_expert_gate", false, &c->shared_gate) >= 0;
  jin_pop(j);
  if (c->moe_ffn == 0) c->moe_ffn = c->ffn_hidden;
  /* DeepSeek's shared experts are one MLP n_shared x the expert width wide
  ** (DeepseekV3MoE); Qwen2-MoE and Llama 4 give the width itself */
  if (c->shared_ffn == 0) c->shared_ffn = n_shared * c->moe_ffn;
  c->router_experts = c->experts;
  c->capacity_mult = 1;
  return ok;
}

/* Multi-head latent attention (DeepSeek-V2 §2.1): on when kv_lora_rank is given. */
static bool read_mla(jin *j, const cJSON *s, tf_cfg *c) {
  bool ok = get_int_or_null(j, s, "kv_lora_rank", 1, BIG, &c->kv_lora) >= 0;
  if (c->kv_lora == 0) {
    static const char *const MLA[] = {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                      "v_head_dim", NULL};
    for (int i = 0; MLA[i]; i++)
      ok &= refuse(j, s, MLA[i], "multi-head latent attention needs kv_lora_rank as well");
    return ok;
  }
  ok &= get_int_or_null(j, s, "q_lora_rank", 1, BIG, &c->q_lora) >= 0;
  ok &= jin_get_int(j, s, "qk_nope_head_dim", 0, BIG, true, &c->qk_nope) > 0;
  ok &= jin_get_int(j, s, "qk_rope_head_dim", 0, BIG, true, &c->qk_rope) > 0;
  ok &= jin_get_int(j, s, "v_head_dim", 1, BIG, true, &c->v_dim) > 0;
  ok &= refuse(j, s, "head_dim", "under multi-head latent attention a head is qk_nope_head_dim + "
                                 "qk_rope_head_dim wide; leave head_dim out");
  if (ok && c->qk_nope + c->qk_rope == 0) {
    jin_error_at(j, "qk_rope_head_dim", 0, "qk_nope_head_dim + qk_rope_head_dim is 0: a query head needs a width");
    ok = false;
  }
  c->head_dim = c->qk_nope + c->qk_rope;
  c->kv_heads = c->heads; /* every head has its own keys, decompressed from the latent */
  return ok;
}

/* Local attention, and which layers keep global attention: a sliding
** window (each query sees the W keys before it: Mistral, Gemma, gpt-oss)
** or chunks (each query sees its own W-token chunk up to itself: Llama 4's
** attention_chunk_size). */
static bool read_window(jin *j, const cJSON *s, tf_cfg *c) {
  bool ok = get_int_or_null(j, s, "sliding_window", 1, BIG, &c->window) >= 0;
  if (c->window > 0)
    ok &= refuse(j, s, "attention_chunk_size",
                 "a layer's local attention is a sliding window or chunks, not both");
  else if (ok) {
    ok &= get_int_or_null(j, s, "attention_chunk_size", 1, BIG, &c->window) >= 0;
    c->chunked = c->window > 0;
  }
  if (c->window == 0)
    return ok && refuse(j, s, "sliding_window_pattern",
                        "a pattern of local layers needs sliding_window or attention_chunk_size");
  ok &= jin_get_int(j, s, "sliding_window_pattern", 1, c->layers, false, &c->global_every) >= 0;
  return ok;
}

/* DeepSeek sparse attention (the DeepSeek-V3.2-Exp technical report,
** DeepSeek_V3_2.pdf in deepseek-ai/DeepSeek-V3.2-Exp, sec. 2.1; GLM-5): a
** lightning indexer scores every earlier token for each query
** with index_n_heads small heads of index_head_dim, and the MLA core
** attends only the index_topk tokens it picks. Costed as a sliding band of
** index_topk keys a query (the core's FLOPs and its kernel rate) plus the
** indexer (dsa_indexer). It rides on MLA, as both published models do. */
static bool read_dsa(jin *j, const cJSON *s, tf_cfg *c) {
  bool ok = get_int_or_null(j, s, "index_topk", 1, BIG, &c->dsa_topk) >= 0;
  if (c->dsa_topk == 0) {
    static const char *const DSA[] = {"index_n_heads", "index_head_dim", "index_topk_freq", NULL};
    for (int i = 0; DSA[i]; i++)
      ok &= refuse(j, s, DSA[i], "DeepSeek sparse attention's indexer needs index_topk as well");
    return ok;
  }
  if (c->kv_lora == 0)
    ok &= refuse(j, s, "index_topk", "DeepSeek sparse attention is built on multi-head latent "
                                     "attention here, as DeepSeek-V3.2 and GLM-5 are: give "
                                     "kv_lora_rank too");
  if (c->window > 0)
    ok &= refuse(j, s, "index_topk", "a layer attends a sliding window or DeepSeek sparse "
                                     "attention's top-k, not both");
  ok &= jin_get_int(j, s, "index_n_heads", 1, 1024, true, &c->dsa_heads) > 0;
  ok &= jin_get_int(j, s, "index_head_dim", 1, 4096, true, &c->dsa_dim) > 0;
  c->dsa_every = 1;
  ok &= get_int_or_null(j, s, "index_topk_freq", 1, c->layers, &c->dsa_every) >= 0;
  if (c->dsa_every == 0) c->dsa_every = 1;
  if (ok) { /* every layer attends its top-k: a band of that many keys */
    c->window = c->dsa_topk;
    c->global_every = 0;
    c->chunked = false;
  }
  return ok;
}

/* A hybrid pattern (Nemotron-H's hybrid_override_pattern) and, when it has
** Mamba-2 layers, the mixer's sizes (NemotronHConfig: mamba_num_heads,
** mamba_head_dim, ssm_state_size, n_groups, conv_kernel, chunk_size; the
** defaults are NemotronHConfig's). */
static bool read_hybrid(jin *j, const cJSON *s, tf_cfg *c, const cJSON *moe) {
  int64_t n[4];
  int r = wl_hybrid_check(j, s, "hybrid_override_pattern", c->layers, n);
  if (r <= 0) {
    static const char *const MAMBA[] = {"mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                                        "n_groups", "conv_kernel", "chunk_size", NULL};
    bool ok = r == 0;
    for (int i = 0; MAMBA[i] && r == 0; i++)
      ok &= refuse(j, s, MAMBA[i], "Mamba-2 sizes need a hybrid_override_pattern with M layers");
    return ok;
  }
  c->hybrid = cJSON_GetObjectItemCaseSensitive(s, "hybrid_override_pattern")->valuestring;
  bool need = n[0] > 0, ok = true; /* 'M' layers */
  c->m_heads = 128, c->m_hdim = 64, c->m_state = 128, c->m_groups = 8, c->m_conv = 4, c->m_chunk = 128;
  ok &= jin_get_int(j, s, "mamba_num_heads", 1, BIG, need, &c->m_heads) >= 0;
  ok &= jin_get_int(j, s, "mamba_head_dim", 1, BIG, need, &c->m_hdim) >= 0;
  ok &= jin_get_int(j, s, "ssm_state_size", 1, BIG, need, &c->m_state) >= 0;
  ok &= jin_get_int(j, s, "n_groups", 1, BIG, false, &c->m_groups) >= 0;
  ok &= jin_get_int(j, s, "conv_kernel", 1, 64, false, &c->m_conv) >= 0;
  ok &= jin_get_int(j, s, "chunk_size", 1, BIG, false, &c->m_chunk) >= 0;
  if (ok && c->m_heads % c->m_groups) {
    pair_error(j, s, "mamba_num_heads", "n_groups", "mamba_num_heads %lld is not a multiple of n_groups %lld (each group's B "
                    "and C serve mamba_num_heads / n_groups heads)",
              (long long)c->m_heads, (long long)c->m_groups);
    ok = false;
  }
  if (ok && n[2] > 0 && !moe) {
    jin_error_at(j, "hybrid_override_pattern", 0, "hybrid_override_pattern has %lld E (mixture-of-experts) layers and the "
                    "model has no experts; give \"moe\"", (long long)n[2]);
    ok = false;
  }
  /* Nemotron 3 Super's MTP module: its own pattern of hybrid layers
  ** (NemotronHConfig mtp_hybrid_override_pattern; Megatron-Bridge
  ** nemotron_h_bridge.py maps it to the MTP block's layers) */
  const cJSON *mp = cJSON_GetObjectItemCaseSensitive(s, "mtp_hybrid_override_pattern");
  int64_t mlen = cJSON_IsString(mp) ? (int64_t)strlen(mp->valuestring) : 0;
  if (ok && c->mtp > 0 && mlen == 0) {
    pair_error(j, s, "num_nextn_predict_layers", "mtp_num_layers", "num_nextn_predict_layers %lld on a hybrid model needs "
                    "mtp_hybrid_override_pattern (the MTP module's layers, one of %s each)",
              (long long)c->mtp, WL_HYBRID_CHARS);
    ok = false;
  }
  if (ok && mp && wl_hybrid_check(j, s, "mtp_hybrid_override_pattern", mlen, NULL) < 0) ok = false;
  if (ok && mlen > 0) c->mtp_hybrid = mp->valuestring;
  if (!need) c->m_heads = c->m_hdim = c->m_state = c->m_groups = c->m_conv = c->m_chunk = 0;
  return ok;
}

/* Gated DeltaNet layers (Yang et al. 2024, "Gated Delta Networks"; Qwen3-Next,
** Qwen3NextConfig's names and defaults): full_attention_interval N makes
** every layer but each N-th a Gated DeltaNet mixer; layer_types, where
** given, must spell that pattern ("linear_attention" x (N - 1), then
** "full_attention"). The delta rule runs in chunks of 64 tokens (FLA's
** chunk_gated_delta_rule, the kernel Qwen3-Next and Megatron-Core call). */
static bool read_gdn(jin *j, const cJSON *s, tf_cfg *c) {
  static const char *const GDN[] = {"linear_num_key_heads", "linear_num_value_heads",
                                    "linear_key_head_dim", "linear_value_head_dim",
                                    "linear_conv_kernel_dim", NULL};
  bool ok = jin_get_int(j, s, "full_attention_interval", 1, c->layers, false, &c->gdn_every) >= 0;
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(s, "layer_types");
  if (ok && lt) {
    jin_push_key(j, "layer_types", 0);
    int64_t n = cJSON_IsArray(lt) ? cJSON_GetArraySize(lt) : -1, first_full = -1;
    for (int64_t i = 0; ok && i < n; i++) {
      const cJSON *v = cJSON_GetArrayItem(lt, (int)i);
      bool full = cJSON_IsString(v) && strcmp(v->valuestring, "full_attention") == 0;
      bool lin = cJSON_IsString(v) && strcmp(v->valuestring, "linear_attention") == 0;
      if (!full && !lin) {
        jin_error(j, 1, "layer %lld: expected \"linear_attention\" or \"full_attention\"",
                  (long long)i);
        ok = false;
      } else if (full && first_full < 0) {
        first_full = i;
      }
    }
    if (ok && n != c->layers) {
      jin_error(j, 1, "%lld entries for %lld layers: expected one a layer", (long long)n,
                (long long)c->layers);
      ok = false;
    }
    int64_t every = first_full >= 0 ? first_full + 1 : 0;
    for (int64_t i = 0; ok && every > 0 && i < n; i++) {
      bool full = strcmp(cJSON_GetArrayItem(lt, (int)i)->valuestring, "full_attention") == 0;
      if (full != (i % every == every - 1)) {
        jin_error(j, 1, "layer %lld breaks the pattern of its first %lld (linear_attention x "
                        "%lld, then full_attention): tpusim reads only a repeating pattern, "
                        "as full_attention_interval gives it",
                  (long long)i, (long long)every, (long long)(every - 1));
        ok = false;
      }
    }
    if (ok && every == 0) {
      jin_error(j, 1, "no full_attention layer: tpusim reads Gated DeltaNet hybrids whose every "
                      "N-th layer is attention");
      ok = false;
    }
    if (ok && c->gdn_every > 0 && c->gdn_every != every) {
      jin_error(j, 1, "the pattern repeats every %lld layers, full_attention_interval says %lld",
                (long long)every, (long long)c->gdn_every);
      ok = false;
    }
    jin_pop(j);
    if (ok) c->gdn_every = every;
  }
  if (!ok) return false;
  if (c->gdn_every <= 1) { /* no linear-attention layer */
    for (int i = 0; GDN[i]; i++)
      ok &= refuse(j, s, GDN[i], "Gated DeltaNet sizes need full_attention_interval of 2 or "
                                 "more (or layer_types with linear_attention layers)");
    c->gdn_every = 0;
    return ok;
  }
  if (c->hybrid) {
    pair_error(j, s, "full_attention_interval", "layer_types", "full_attention_interval with hybrid_override_pattern: a model is a Mamba-2 "
                    "hybrid or a Gated DeltaNet one, not both");
    return false;
  }
  c->g_kh = 16, c->g_vh = 32, c->g_kd = 128, c->g_vd = 128, c->g_conv = 4, c->g_chunk = 64;
  ok &= jin_get_int(j, s, "linear_num_key_heads", 1, BIG, false, &c->g_kh) >= 0;
  ok &= jin_get_int(j, s, "linear_num_value_heads", 1, BIG, false, &c->g_vh) >= 0;
  ok &= jin_get_int(j, s, "linear_key_head_dim", 1, BIG, false, &c->g_kd) >= 0;
  ok &= jin_get_int(j, s, "linear_value_head_dim", 1, BIG, false, &c->g_vd) >= 0;
  ok &= jin_get_int(j, s, "linear_conv_kernel_dim", 1, 64, false, &c->g_conv) >= 0;
  if (ok && c->g_vh % c->g_kh) {
    pair_error(j, s, "linear_num_value_heads", "linear_num_key_heads", "linear_num_value_heads %lld is not a multiple of linear_num_key_heads %lld "
                    "(each key head serves value heads / key heads value heads)",
              (long long)c->g_vh, (long long)c->g_kh);
    ok = false;
  }
  return ok;
}

/* The fields as the file gives them; false after reporting. */
static bool read_fields(jin *j, const cJSON *s, const wl_train *t, tf_cfg *c) {
  bool ok = jin_only(j, s, KEYS, wl_common_keys) == 0;
  memset(c, 0, sizeof *c);
  c->ffn = FFN_GELU;
  c->pos = POS_ROTARY;
  ok &= jin_get_enum(j, s, "kind", KIND, false, &c->kind) >= 0;
  ok &= jin_get_int(j, s, "layers", 1, BIG, true, &c->layers) > 0;
  ok &= jin_get_int(j, s, "hidden", 1, BIG, true, &c->hidden) > 0;
  ok &= jin_get_int(j, s, "heads", 1, BIG, true, &c->heads) > 0;
  c->kv_heads = c->heads;
  ok &= jin_get_int(j, s, "kv_heads", 1, BIG, false, &c->kv_heads) >= 0;
  ok &= jin_get_int(j, s, "head_dim", 1, BIG, false, &c->head_dim) >= 0;
  ok &= jin_get_int(j, s, "ffn_hidden", 1, BIG, false, &c->ffn_hidden) >= 0;
  ok &= jin_get_enum(j, s, "ffn", FFN, false, &c->ffn) >= 0;
  c->norm = c->kind == 1 ? 0 : 1;
  ok &= jin_get_enum(j, s, "norm", NORM, false, &c->norm) >= 0;
  ok &= jin_get_bool(j, s, "parallel_block", false, &c->parallel) >= 0;
  c->causal = c->kind == 0;
  ok &= jin_get_bool(j, s, "is_causal", false, &c->causal) >= 0;
  ok &= jin_get_int(j, s, "vocab", 1, BIG, true, &c->vocab) > 0;
  c->seq = t->seq_len;
  c->kv_cache = t->kv_cache;
  ok &= jin_get_bool(j, s, "tied_embeddings", false, &c->tied) >= 0;
  ok &= jin_get_enum(j, s, "positions", POS, false, &c->pos) >= 0;
  ok &= jin_get_bool(j, s, "bias", false, &c->bias) >= 0;
  c->qkv_bias = c->bias;
  ok &= jin_get_bool(j, s, "qkv_bias", false, &c->qkv_bias) >= 0;
  ok &= jin_get_int(j, s, "type_vocab", 0, BIG, false, &c->type_vocab) >= 0;
  double theta;
  ok &= jin_get_num(j, s, "rope_theta", 1, 1e12, false, &theta) >= 0;
  ok &= jin_get_num(j, s, "dropout", 0, 0.99, false, &c->dropout) >= 0;
  c->max_positions = c->seq;
  ok &= jin_get_int(j, s, "max_positions", 1, BIG, false, &c->max_positions) >= 0;
  ok &= jin_get_int(j, s, "num_nextn_predict_layers", 0, BIG, false, &c->mtp) >= 0;
  /* Megatron-Core's --mtp-num-layers with --mtp-use-repeated-layer: the
  ** depth the recipe predicts to, through the config's modules applied in
  ** turn with their own weights (Megatron-Bridge's Nemotron 3 Super recipe:
  ** "HF config has num_nextn_predict_layers=1 for the shared block;
  ** mtp_num_layers=2 controls forward-pass repetitions") */
  c->mtp_depth = c->mtp;
  ok &= jin_get_int(j, s, "mtp_num_layers", 0, BIG, false, &c->mtp_depth) >= 0;
  ok &= jin_get_bool(j, s, "mtp_use_repeated_layer", false, &c->mtp_repeated) >= 0;
  ok &= jin_get_bool(j, s, "attention_sinks", false, &c->sinks) >= 0;
  ok &= jin_get_bool(j, s, "qk_norm", false, &c->qk_norm) >= 0;
  ok &= jin_get_bool(j, s, "sandwich_norm", false, &c->sandwich) >= 0;
  ok &= jin_get_bool(j, s, "attn_output_gate", false, &c->attn_gate) >= 0;
  c->rotary_frac = 1;
  ok &= jin_get_num(j, s, "partial_rotary_factor", 0.01, 1, false, &c->rotary_frac) >= 0;
  if (c->ffn_hidden == 0) c->ffn_hidden = 4 * c->hidden;
  if (!ok) return false; /* the rest reads bounds from these */
  ok &= read_mla(j, s, c);
  ok &= read_window(j, s, c);
  if (ok) ok = read_dsa(j, s, c); /* it reads MLA's and the window's */
  const cJSON *moe = jin_get_object(j, s, "moe", false);
  if (moe) ok &= read_moe(j, moe, c);
  ok &= read_hybrid(j, s, c, moe);
  if (ok) ok = read_gdn(j, s, c); /* it reads hybrid's pattern */
  return ok && within_limits(j, s, moe);
}

/* Widths that must agree with one another and with the sequence. */
static bool check_dims(jin *j, const wl_train *t, tf_cfg *c) {
  if (c->seq > WL_MAX_SEQ) { /* from --seq: the file's seq_len is checked on reading */
    jin_error(j, 1, "--seq %lld is past tpusim's limit of %lld tokens: %s (docs/limits.md)",
              (long long)c->seq, WL_MAX_SEQ, WL_MAX_SEQ_WHY);
    return false;
  }
  if (c->head_dim == 0) {
    if (c->hidden % c->heads != 0) {
      jin_error_at(j, "heads", 0, "hidden %lld is not divisible by heads %lld; give head_dim",
                   (long long)c->hidden, (long long)c->heads);
      return false;
    }
    c->head_dim = c->hidden / c->heads;
  }
  if (c->heads % c->kv_heads != 0) {
    jin_error_at(j, "kv_heads", 0, "heads %lld is not a multiple of kv_heads %lld",
                 (long long)c->heads, (long long)c->kv_heads);
    return false;
  }
  if (c->causal && c->kind == 1) {
    jin_error_at(j, "is_causal", 0, "an encoder attends to every key (kind \"encoder\"); a "
                                     "causal mask needs kind \"decoder\"");
    return false;
  }
  if (c->mtp > 0 && c->kind == 1) {
    pair_error(j, j->root, "num_nextn_predict_layers", "mtp_num_layers", "multi-token prediction needs a decoder");
    return false;
  }
  if (c->mtp_depth != c->mtp && !(c->mtp_repeated && c->mtp > 0 && c->mtp_depth > c->mtp)) {
    pair_error(j, j->root, "mtp_num_layers", "num_nextn_predict_layers", "mtp_num_layers %lld with num_nextn_predict_layers %lld: a depth other than "
                    "the modules' needs \"mtp_use_repeated_layer\": true and a depth above "
                    "them (each further depth reuses a module's weights)",
              (long long)c->mtp_depth, (long long)c->mtp);
    return false;
  }
  if (c->mtp > 0 && !c->tied && t->method != WL_FULL && wl_is_target(t, "lm_head")) {
    jin_error(j, 1, "LoRA on lm_head with multi-token prediction is not modelled (the MTP heads "
                    "share the output head); leave lm_head out of train.lora.targets");
    return false;
  }
  if (c->pos == POS_LEARNED && c->max_positions < c->seq) {
    jin_error_at(j, "max_positions", 0, "seq_len %lld exceeds max_positions %lld: the learned "
                 "position table has that many rows (nearest: a sequence of %lld)",
                 (long long)c->seq, (long long)c->max_positions, (long long)c->max_positions);
    return false;
  }
  return true;
}

/* Reports "what N must divide by the P" and returns false when n % by. */
static bool divides(jin *j, const char *what, int64_t n, const char *by_what, int64_t by) {
  if (n % by == 0) return true;
  jin_error(j, 1, "%s %lld must divide by %s %lld", what, (long long)n, by_what, (long long)by);
  return false;
}

/* Megatron's tensor-parallel split: heads, FFN columns, vocabulary. With
** no expert parallelism given, experts and their FFN split by tp too (the
** simulator's first MoE rule, kept). */
static bool shard_tp(jin *j, const wl_train *t, tf_cfg *c) {
  int64_t tp = t->shard_tp;
  if (!divides(j, "heads", c->heads, "tp", tp) || !divides(j, "ffn_hidden", c->ffn_hidden, "tp", tp))
    return false;
  if (!divides(j, "the shared experts' width", c->shared_ffn, "tp", tp)) return false;
  c->heads /= tp;
  c->kv_heads = c->kv_lora ? c->heads
                : c->kv_heads >= tp ? c->kv_heads / tp : 1; /* fewer KV heads are replicated */
  c->ffn_hidden /= tp;
  c->shared_ffn /= tp;
  c->vocab = (c->vocab + tp - 1) / tp;
  /* Mamba-2 under tp (Megatron-Core MambaMixer): in_proj column-parallel
  ** by heads and groups, out_proj row-parallel, as attention */
  if (c->m_heads > 0) {
    if (!divides(j, "mamba_num_heads", c->m_heads, "tp", tp) ||
        !divides(j, "n_groups", c->m_groups, "tp", tp))
      return false;
    c->m_heads /= tp;
    c->m_groups /= tp;
  }
  /* Gated DeltaNet under tp (Megatron-Core GatedDeltaNet): its projections
  ** column-parallel by key and value heads, out_proj row-parallel */
  if (c->gdn_every > 0) {
    if (!divides(j, "linear_num_key_heads", c->g_kh, "tp", tp) ||
        !divides(j, "linear_num_value_heads", c->g_vh, "tp", tp))
      return false;
    c->g_kh /= tp;
    c->g_vh /= tp;
  }
  if (t->shard_ep > 0 || c->experts == 0) return true;
  if (!divides(j, "moe_intermediate_size", c->moe_ffn, "tp", tp)) return false;
  c->moe_ffn /= tp;
  if (c->experts % tp == 0) c->router_experts = c->experts /= tp;
  return true;
}

/* Expert parallelism (Megatron-Core): experts/ep experts on this chip, each
** taking the tokens routed to it from the ep x etp chips of its group;
** expert tensor parallelism splits each expert's FFN etp ways (etp 1
** unless given). Under tensor parallelism a chip routes only its own 1/tp
** of the tokens this graph holds: Megatron-Core requires sequence
** parallelism with MoE and tp > 1 (moe_layer.py: "During training,
** performance may degrade if MoE and tensor parallelism are enabled
** without also enabling sequence parallelism" is raised, not warned), and
** its dispatcher all-gathers over the expert tensor group only. So a
** chip's expert FLOPs are tokens / tp x top_k x the expert FFN whatever
** ep and etp are (sim/memory.c counts the routed copies the same way);
** inference keeps etp = tp, every token on every tp chip. */
static bool shard_ep(jin *j, const wl_train *t, tf_cfg *c) {
  int64_t ep = t->shard_ep, etp = t->shard_etp > 1 ? t->shard_etp : 1,
          tp = t->shard_tp > 1 ? t->shard_tp : 1;
  if (c->experts == 0) {
    if (ep <= 1 && etp == 1) return true;
    jin_error(j, 1, "expert parallelism (ep %lld, etp %lld) on a model without experts",
              (long long)ep, (long long)etp);
    return false;
  }
  if (!divides(j, "experts", c->experts, "ep", ep) ||
      !divides(j, "moe_intermediate_size", c->moe_ffn, "etp", etp))
    return false;
  c->experts /= ep;
  /* the busiest chip of the group sets the step: its experts take
  ** ep_load times the even share (dropless; a padded capacity holds every
  ** expert at its capacity whatever the routing, so it is left alone) */
  double load = t->ep_load > 1 && !(c->capacity > 0) ? t->ep_load : 1;
  c->capacity_mult = (double)ep * (double)etp / (double)tp * load;
  c->moe_ffn /= etp;
  return true;
}

/* Context parallelism: this chip's queries are seq/cp tokens. */
static bool shard_cp(jin *j, const wl_train *t, tf_cfg *c) {
  int64_t cp = t->shard_cp > 1 ? t->shard_cp : 1;
  c->seq_local = c->seq / cp;
  return divides(j, "the sequence", c->seq, "cp", cp);
}

/* The attention scores of one global layer, B x heads x queries x keys,
** within what one graph tensor may hold (2^50 elements, workloads/graph.c):
** Llama 4 Scout's default sequence, its 10,485,760-token context, is past
** it at batch 1 (4.4e15), and gets this message rather than the graph's. */
static bool scores_fit(jin *j, const wl_train *t, const tf_cfg *c) {
  const double MAX_ELEMENTS = 1125899906842624.0; /* 2^50, graph.c's MAX_ELEMENTS */
  double all_keys = (double)(c->seq + c->kv_cache);
  bool all_local = c->window > 0 && c->window < all_keys && c->global_every == 0;
  double keys = all_local ? (double)c->window : all_keys;
  double n = (double)t->global_batch * (double)c->heads * (double)c->seq_local * keys;
  if (n <= MAX_ELEMENTS) return true;
  jin_error(j, 1, "seq %lld: one layer's attention scores would hold %.2g elements (batch %lld x "
                  "%lld heads x %lld queries x %.0f keys), past the 2^50 a graph tensor may hold; "
                  "pass a shorter --seq or shard the sequence (context parallelism)",
            (long long)c->seq, n, (long long)t->global_batch, (long long)c->heads,
            (long long)c->seq_local, keys);
  return false;
}

/* Reads, checks and shards the fields; returns false after reporting. */
static bool read_cfg(jin *j, const cJSON *s, const wl_train *t, tf_cfg *c) {
  if (!read_fields(j, s, t, c) || !check_dims(j, t, c)) return false;
  c->model_layers = c->layers;
  if (t->only_layers > 0 && t->only_layers < c->layers) c->layers = t->only_layers;
  if (t->one_kind && (t->layer_kind < 0 || t->layer_kind >= WL_LAYER_KINDS)) {
    jin_error(j, 1, "layer kind %d: expected a sum of WL_LAYER_* bits (wl.h), below %d",
              t->layer_kind, WL_LAYER_KINDS);
    return false;
  }
  if (t->one_kind && (t->layer_kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER)) &&
      !c->hybrid) {
    jin_error(j, 1, "a hybrid layer (kind %d) was asked of a model without hybrid_override_pattern",
              t->layer_kind);
    return false;
  }
  if (t->one_kind && (t->layer_kind & WL_LAYER_GDN) && c->gdn_every == 0) {
    jin_error(j, 1, "a Gated DeltaNet layer was asked of a model without full_attention_interval");
    return false;
  }
  if (t->one_kind && (t->layer_kind & WL_LAYER_MOE) && c->experts == 0) {
    jin_error(j, 1, "a mixture-of-experts layer was asked of a model without experts");
    return false;
  }
  if (t->one_kind && (t->layer_kind & WL_LAYER_LOCAL) && c->window == 0) {
    jin_error(j, 1, "a local-attention layer was asked of a model without sliding_window");
    return false;
  }
  if (t->shard_tp > 1 && !shard_tp(j, t, c)) return false;
  if (t->shard_ep > 0 && !shard_ep(j, t, c)) return false;
  return shard_cp(j, t, c) && scores_fit(j, t, c);
}

/* What the step model and the memory model read (wl.h). */
static wl_tf_dims dims_of(const tf_cfg *c) {
  bool mla = c->kv_lora > 0, moe = c->experts > 0;
  return (wl_tf_dims){.layers = c->layers, .hidden = c->hidden, .heads = c->heads,
                      .kv_heads = c->kv_heads, .head_dim = c->head_dim,
                      .ffn_hidden = c->ffn_hidden, .vocab = c->vocab, .seq = c->seq,
                      .experts = c->experts, .top_k = c->top_k,
                      .route_groups = moe ? c->groups : 0,
                      .route_topk_groups = moe ? c->topk_groups : 0,
                      .gated = c->ffn == FFN_SWIGLU || c->ffn == FFN_GEGLU, .tied = c->tied,
                      .parallel_block = c->parallel, .encoder = c->kind == 1,
                      .unmasked = !c->causal,
                      .dropout = c->dropout, .first_dense = moe ? c->first_dense : 0,
                      .moe_every = moe ? c->moe_every : 0, .window = c->window,
                      .window_chunked = c->window > 0 && c->chunked,
                      .global_every = c->window ? c->global_every : 0,
                      .moe_ffn = moe ? c->moe_ffn : 0,
                      .capacity_factor = moe ? c->capacity : 0,
                      .shared_ffn_hidden = moe ? c->shared_ffn : 0,
                      .q_lora_rank = c->q_lora, .kv_lora_rank = c->kv_lora,
                      .qk_rope_head_dim = mla ? c->qk_rope : 0, .v_head_dim = mla ? c->v_dim : 0,
                      .mtp_layers = c->mtp, .mtp_depth = c->mtp_depth, .hybrid = c->hybrid, .mamba_heads = c->m_heads,
                      .mamba_head_dim = c->m_hdim, .ssm_state = c->m_state,
                      .ssm_groups = c->m_groups, .conv_kernel = c->m_conv,
                      .ssm_chunk = c->m_chunk, .moe_latent = moe ? c->latent : 0,
                      .gdn_every = c->gdn_every, .gdn_k_heads = c->g_kh, .gdn_v_heads = c->g_vh,
                      .gdn_k_dim = c->g_kd, .gdn_v_dim = c->g_vd, .gdn_conv = c->g_conv,
                      .gdn_chunk = c->g_chunk, .attn_gate = c->attn_gate,
                      .shared_gate = moe && c->shared_gate && c->shared_ffn > 0,
                      .dsa_topk = c->dsa_topk, .dsa_heads = c->dsa_heads,
                      .dsa_dim = c->dsa_dim, .dsa_every = c->dsa_every};
}

/* ---- building ---- */

static graph_shape shape_of(graph *g, int id) {
  const graph_op *op = graph_get(g, id);
  return op ? op->out : (graph_shape){0};
}

/* Rotary embedding (Su et al. 2021) on x [B, S, n, d]: x cos + rotate_half(x) sin,
** with cos and sin tables [S, d] precomputed outside the step. */
static int rotary(graph *g, int x) {
  graph_shape s = shape_of(g, x);
  if (s.rank != 4) return -1;
  int64_t half = s.dim[3] / 2;
  int cosv = graph_constant(g, GRAPH_SHAPE(s.dtype, s.dim[1], s.dim[3]));
  int sinv = graph_constant(g, GRAPH_SHAPE(s.dtype, s.dim[1], s.dim[3]));
  graph_dims map = graph_dims_of(2, 1, 3);
  int64_t z[4] = {0, 0, 0, 0}, mid[4] = {0, 0, 0, half};
  int64_t lim1[4] = {s.dim[0], s.dim[1], s.dim[2], half};
  int64_t lim2[4] = {s.dim[0], s.dim[1], s.dim[2], s.dim[3]};
  int lo = graph_slice(g, x, z, lim1, NULL), hi = graph_slice(g, x, mid, lim2, NULL);
  int parts[2] = {graph_unary(g, GOP_NEG, hi), lo};
  int rot = graph_concat(g, parts, 2, 3);
  int a = graph_binary(g, GOP_MUL, x, graph_broadcast(g, cosv, s, map));
  int b = graph_binary(g, GOP_MUL, rot, graph_broadcast(g, sinv, s, map));
  return graph_binary(g, GOP_ADD, a, b);
}

/* x[..., lo:hi] along the last dimension. */
static int slice_last(graph *g, int x, int64_t lo, int64_t hi) {
  graph_shape s = shape_of(g, x);
  if (s.rank < 1) return -1;
  int64_t start[GRAPH_MAX_RANK] = {0}, lim[GRAPH_MAX_RANK];
  for (int i = 0; i < s.rank; i++) lim[i] = s.dim[i];
  start[s.rank - 1] = lo;
  lim[s.rank - 1] = hi;
  return graph_slice(g, x, start, lim, NULL);
}

/* RoPE on the first partial_rotary_factor of a head's channels of x
** [B, S, n, d] (Qwen3-Next: a quarter), the rest passed through. */
static int rotary_part(graph *g, const tf_cfg *c, int x) {
  graph_shape s = shape_of(g, x);
  int64_t rd = (int64_t)((double)s.dim[3] * c->rotary_frac) / 2 * 2;
  if (rd >= s.dim[3] || rd < 2) return rotary(g, x);
  int parts[2] = {rotary(g, slice_last(g, x, 0, rd)), slice_last(g, x, rd, s.dim[3])};
  return graph_concat(g, parts, 2, 3);
}

/* x [B, S, ...] zero-padded (or cut) to len along the sequence. */
static int fit_seq(graph *g, int x, int64_t len) {
  graph_shape s = shape_of(g, x);
  if (s.rank < 2 || s.dim[1] == len) return s.rank < 2 ? -1 : x;
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK] = {0}, in[GRAPH_MAX_RANK] = {0};
  if (len > s.dim[1]) {
    hi[1] = len - s.dim[1];
    return graph_pad(g, x, lo, hi, in);
  }
  for (int i = 0; i < s.rank; i++) hi[i] = s.dim[i];
  hi[1] = len;
  return graph_slice(g, x, lo, hi, NULL);
}

/* Dropout as frameworks run it: random bits the size of x, a compare
** against p giving the kept mask (saved for backward: Korthikanti's 1-byte
** masks), and x / (1 - p) where kept. */
static int dropout(graph *g, const tf_cfg *c, int x) {
  if (c->dropout <= 0 || x < 0) return x;
  graph_shape s = shape_of(g, x);
  int bits = graph_custom(g, "rng-bit-generator", s, &x, 0, 0, 0, graph_bytes(&s));
  int thr = graph_broadcast(g, graph_constant(g, (graph_shape){s.dtype, 0, {0}}), s,
                            graph_dims_of(0));
  int keep = graph_binary(g, GOP_COMPARE, bits, thr);
  int zero = graph_broadcast(g, graph_constant(g, (graph_shape){s.dtype, 0, {0}}), s,
                             graph_dims_of(0));
  return graph_select(g, keep, wl_scale(g, x), zero);
}

static int norm(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *name) {
  return c->norm == 1 ? wl_rmsnorm(g, t, x, name) : wl_layernorm(g, t, x, name);
}

/* ---- attention ---- */

/* Keys or values [B, n, heads, d] of this chip's n tokens, standing for len
** tokens (len > n under context parallelism): ring attention receives the
** other chips' blocks one by one, each of this block's shape; the
** transfer itself is the simulator's (sim/). Kept below rank 5, which is
** the attention core's. */
static int kv_extend(graph *g, const wl_train *t, int kv, int64_t len) {
  (void)t; /* the dtype is kv's own: a KV cache may be narrower than the compute dtype */
  graph_shape s = shape_of(g, kv);
  if (s.rank != 4) return -1;
  int64_t B = s.dim[0], n = s.dim[1], hd = s.dim[2] * s.dim[3], r = (len + n - 1) / n;
  int flat = graph_reshape(g, kv, GRAPH_SHAPE(s.dtype, B, n, hd));
  int rep = graph_broadcast(g, flat, GRAPH_SHAPE(s.dtype, B, r, n, hd), graph_dims_of(3, 0, 2, 3));
  rep = graph_reshape(g, rep, GRAPH_SHAPE(s.dtype, B, r * n, s.dim[2], s.dim[3]));
  return fit_seq(g, rep, len);
}

/* GPT-OSS's attention sinks: a learned logit per head joins each row of
** scores [B, nk, S, grp, T] before the softmax (its probability is then
** dropped), so a head may attend to nothing (HF GptOssAttention, "sinks"). */
static int with_sinks(graph *g, const wl_train *t, int sc, const char *p) {
  graph_shape s = shape_of(g, sc);
  if (s.rank != 5) return -1;
  char n[128];
  snprintf(n, sizeof n, "%s.sinks", p);
  int w = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, s.dim[1] * s.dim[3]), WL_W_OTHER);
  w = graph_reshape(g, graph_convert(g, w, GDT_F32), GRAPH_SHAPE(GDT_F32, s.dim[1], s.dim[3]));
  graph_shape col = s;
  col.dtype = GDT_F32;
  col.dim[4] = 1;
  int parts[2] = {sc, graph_broadcast(g, w, col, graph_dims_of(2, 1, 3))};
  return graph_concat(g, parts, 2, 4);
}

/* The attention core on q [B, Sq, nq, dqk], k [B, Sq, nk, dqk] and
** v [B, Sq, nk, dv] of this chip's Sq tokens: scores, mask, softmax and
** the weighted sum of values; returns [B, Sq, nq dv]. Grouped-query
** attention splits the query heads [nk, group], as JAX implementations do,
** so K and V are never materialized per query head. A global layer scores
** each query against all seq keys (Sq = seq, or seq/cp with the other
** chips' keys); a local layer with window W < seq against W keys: blocks
** of W queries, each against W keys -- the band's dot shapes, which a
** sliding-window kernel computes (FlashAttention-2's window_size; Llama 4's
** chunked attention is exactly these blocks). */
static int attention_core(graph *g, const wl_train *t, const tf_cfg *c, int q, int k, int v,
                          bool local, const char *p) {
  graph_shape sq = shape_of(g, q), sk = shape_of(g, k), sv = shape_of(g, v);
  if (sq.rank != 4 || sk.rank != 4 || sv.rank != 4) return -1;
  int64_t keys = c->seq + c->kv_cache; /* the sequence's keys, cached ones included */
  int64_t B = sq.dim[0], Sq = sq.dim[1], nq = sq.dim[2], dqk = sq.dim[3], nk = sk.dim[2],
          dv = sv.dim[3], grp = nq / nk, W = local && c->window < keys ? c->window : 0;
  int64_t Bb = B, rows = Sq, T, padded = Sq;
  if (W == 0 || W > Sq) { /* whole sequence, or a window wider than this chip's block */
    T = W ? W : keys;
    if (T != sk.dim[1]) {
      k = kv_extend(g, t, k, T);
      v = kv_extend(g, t, v, T);
    }
  } else {
    padded = (Sq + W - 1) / W * W;
    q = fit_seq(g, q, padded);
    k = fit_seq(g, k, padded);
    v = fit_seq(g, v, padded);
    Bb = B * (padded / W);
    rows = T = W;
    k = graph_reshape(g, k, GRAPH_SHAPE(t->compute, Bb, W, nk, dqk));
    v = graph_reshape(g, v, GRAPH_SHAPE(t->compute, Bb, W, nk, dv));
  }
  q = graph_reshape(g, q, GRAPH_SHAPE(t->compute, Bb, rows, nk, grp, dqk));
  /* scores [Bb, nk, rows, grp, T] = q . k over dqk, batched over Bb and kv
  ** heads, in the compute dtype as a framework's GEMM writes them (f32
  ** inside); scale, mask and softmax then run in f32 and give the compute
  ** dtype back, as Megatron's fused scale-mask-softmax does */
  int sc = graph_dot(g, q, k, graph_dims_of(2, 0, 2), graph_dims_of(2, 0, 2),
                     graph_dims_of(1, 4), graph_dims_of(1, 3), t->compute);
  if (sc < 0) return -1; /* reported (too many elements, say): no mask for a shape it lacks */
  sc = wl_scale(g, graph_convert(g, sc, GDT_F32)); /* 1/sqrt(d) */
  if (c->causal) {   /* causal mask: a constant [rows, T] broadcast, then select */
    graph_shape ss = shape_of(g, sc);
    int mask = graph_constant(g, GRAPH_SHAPE(GDT_PRED, rows, T));
    graph_shape ms = ss;
    ms.dtype = GDT_PRED;
    mask = graph_broadcast(g, mask, ms, graph_dims_of(2, 2, 4));
    int neg = graph_broadcast(g, graph_constant(g, (graph_shape){GDT_F32, 0, {0}}), ss,
                              graph_dims_of(0));
    sc = graph_select(g, mask, sc, neg);
  }
  if (c->sinks) sc = with_sinks(g, t, sc, p);
  int pr = wl_softmax(g, sc, t->compute);
  if (c->sinks) pr = slice_last(g, pr, 0, T);
  pr = dropout(g, c, pr);
  /* out [Bb, nk, rows, grp, dv] = probs . v over T */
  int o = graph_dot(g, pr, v, graph_dims_of(2, 0, 1), graph_dims_of(2, 0, 2),
                    graph_dims_of(1, 4), graph_dims_of(1, 1), t->compute);
  o = graph_transpose(g, o, graph_dims_of(5, 0, 2, 1, 3, 4));
  o = graph_reshape(g, o, GRAPH_SHAPE(t->compute, B, padded, nq * dv));
  return fit_seq(g, o, Sq);
}

/* Inference: the keys (or values) of x [B, S, n, d], this step's S
** tokens, after the c->kv_cache ones the cache holds: the cache itself
** after this step's append, [B, kv_cache + S, n, d], read from HBM once
** by the attention (a parameter of no role: neither weight nor input), as
** a paged-attention kernel reads the cached blocks in place; x's own
** write into the cache is its projection's output, already counted. The
** cache is in t->kv_dtype when one is given. */
static int with_cache(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *name) {
  graph_shape s = shape_of(g, x);
  if (s.rank != 4) return -1;
  /* an 8-bit cache (fp8, int8) is read by the attention's dots as they
  ** read quantized weights: widened on load (graph_dot's mixed input) */
  graph_dtype dt = t->kv_dtype != GDT_PRED ? t->kv_dtype : t->compute;
  return graph_parameter(g, name, GRAPH_SHAPE(dt, s.dim[0], c->kv_cache + s.dim[1], s.dim[2], s.dim[3]), 0);
}

/* Self-attention on x [B, S, H]: q, k, v projections (with per-head RMSNorm
** on q and k for Qwen3 and Gemma 3), RoPE, the core, the output projection. */
static int attention(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p,
                     bool local) {
  int64_t B = shape_of(g, x).dim[0], S = c->seq_local, nq = c->heads, nk = c->kv_heads,
          d = c->head_dim;
  char n[128];
  snprintf(n, sizeof n, "%s.q", p);
  /* a gated attention's q projection also writes the output gate
  ** (Qwen3NextAttention: q_proj heads x head_dim x 2, chunked in two) */
  int q = wl_linear(g, t, x, n, "q", nq * d * (c->attn_gate ? 2 : 1), c->qkv_bias), gate = -1;
  if (c->attn_gate) {
    gate = slice_last(g, q, nq * d, 2 * nq * d);
    q = slice_last(g, q, 0, nq * d);
  }
  snprintf(n, sizeof n, "%s.k", p);
  int k = wl_linear(g, t, x, n, "k", nk * d, c->qkv_bias);
  snprintf(n, sizeof n, "%s.v", p);
  int v = wl_linear(g, t, x, n, "v", nk * d, c->qkv_bias);
  q = graph_reshape(g, q, GRAPH_SHAPE(t->compute, B, S, nq, d));
  k = graph_reshape(g, k, GRAPH_SHAPE(t->compute, B, S, nk, d));
  v = graph_reshape(g, v, GRAPH_SHAPE(t->compute, B, S, nk, d));
  if (c->qk_norm) {
    snprintf(n, sizeof n, "%s.q_norm", p);
    q = wl_rmsnorm(g, t, q, n);
    snprintf(n, sizeof n, "%s.k_norm", p);
    k = wl_rmsnorm(g, t, k, n);
  }
  if (c->pos == POS_ROTARY) {
    q = rotary_part(g, c, q);
    k = rotary_part(g, c, k);
  }
  if (c->kv_cache > 0) {
    snprintf(n, sizeof n, "%s.k_cache", p);
    k = with_cache(g, t, c, k, n);
    snprintf(n, sizeof n, "%s.v_cache", p);
    v = with_cache(g, t, c, v, n);
  }
  int o = attention_core(g, t, c, q, k, v, local, p);
  if (gate >= 0) o = graph_binary(g, GOP_MUL, o, graph_unary(g, GOP_LOGISTIC, gate));
  snprintf(n, sizeof n, "%s.o", p);
  return dropout(g, c, wl_linear(g, t, o, n, "o", c->hidden, c->bias));
}

/* RoPE on the last d - keep channels of x [B, S, n, d]: MLA's decoupled
** rotary part (DeepSeek-V2 §2.1.3). */
static int rope_tail(graph *g, const tf_cfg *c, int x, int64_t keep) {
  if (c->pos != POS_ROTARY) return x;
  graph_shape s = shape_of(g, x);
  int parts[2] = {slice_last(g, x, 0, keep), rotary(g, slice_last(g, x, keep, s.dim[3]))};
  return graph_concat(g, parts, 2, 3);
}

/* DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2,
** its technical report sec. 2.1, eq. 1; HF GlmMoeDsaIndexer): index queries
** from the query latent (wq_b: q_lora_rank -> heads x dim), one index key
** from the hidden state (wk, then LayerNorm), a weight a head (weights_proj);
** a token's score against each earlier one is sum_h w_h ReLU(q_h . k). The
** scores and the top-k are one kernel (DeepGEMM's fp8_mqa_logits, the
** top-k over its fp32 logits): a custom-call on the matrix unit with the
** scores' FLOPs -- every query against every earlier key, the causal
** half -- and its bytes: the operands, the fp32 logits written and read
** back by the top-k, the int32 indices out. Run on every dsa_every-th
** layer, its choice reused between (GLM-5.2's index_topk_freq): its cost
** is spread over them. Its own training (a KL loss to the core's scores
** over the chosen keys) is not built. */
static void dsa_indexer(graph *g, const wl_train *t, const tf_cfg *c, int x, int qlat,
                        const char *p) {
  int64_t B = shape_of(g, x).dim[0], S = c->seq_local, keys = c->seq + c->kv_cache;
  char n[128];
  snprintf(n, sizeof n, "%s.idx_q", p);
  int qi = wl_linear(g, t, qlat, n, "idx_q", c->dsa_heads * c->dsa_dim, false);
  snprintf(n, sizeof n, "%s.idx_k", p);
  int ki = wl_linear(g, t, x, n, "idx_k", c->dsa_dim, false);
  snprintf(n, sizeof n, "%s.idx_k_norm", p);
  ki = wl_layernorm(g, t, ki, n);
  snprintf(n, sizeof n, "%s.idx_w", p);
  int wi = wl_linear(g, t, x, n, "idx_w", c->dsa_heads, false);
  /* the keys a query scores: the cached ones and the causal half of this
  ** sequence's (under context parallelism each chip's queries see half the
  ** sequence on average, its keys all-gathered) */
  double seen = (double)c->kv_cache + ((double)c->seq + 1) / 2;
  double q_keys = (double)B * (double)S * seen / (double)c->dsa_every;
  double hd = (double)(c->dsa_heads * c->dsa_dim);
  double flops = 2 * q_keys * hd + 3 * q_keys * (double)c->dsa_heads;
  graph_shape sq = shape_of(g, qi), sk = shape_of(g, ki), sw = shape_of(g, wi);
  double bytes = (graph_bytes(&sq) + graph_bytes(&sw) +
                  graph_bytes(&sk) * (double)keys / (double)S) / (double)c->dsa_every +
                 8 * q_keys + 4.0 * (double)B * (double)S * (double)c->dsa_topk;
  int ins[3] = {qi, ki, wi};
  graph_custom(g, "dsa-indexer", GRAPH_SHAPE(GDT_S32, B, S, c->dsa_topk), ins, 3, flops, 0, bytes);
}

/* Multi-head latent attention, as DeepSeek-V3's modeling code writes it
** (DeepseekV3Attention): q through a low-rank q_a (RMSNorm) q_b pair, or one
** q projection without q_lora_rank; keys and values decompressed from a
** kv_lora_rank latent (kv_a, RMSNorm, kv_b) plus one rotary key part shared
** by all heads; the core with query/key width qk_nope + qk_rope and value
** width v_head_dim. The down projections are replicated under tp (q_b,
** kv_b and o split by heads, as Megatron-Core's MLA does). */
static int mla_attention(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p,
                         bool local) {
  int64_t B = shape_of(g, x).dim[0], S = c->seq_local, nh = c->heads, dn = c->qk_nope,
          dr = c->qk_rope, dv = c->v_dim;
  char n[128];
  int q;
  /* the up projections with their latents' norms (fused into them as
  ** Megatron-Core's LayerNormColumnParallelLinear) and the RoPE applied
  ** to q and k: Megatron-Core's "mla_up_proj" */
  graph_module was = graph_module_of(g);
  if (c->q_lora > 0) {
    snprintf(n, sizeof n, "%s.q_a", p);
    q = wl_linear(g, t, x, n, "q_a", c->q_lora, c->qkv_bias);
    graph_set_module(g, GRAPH_MOD_MLA_UP);
    snprintf(n, sizeof n, "%s.q_a_norm", p);
    q = wl_rmsnorm(g, t, q, n);
    graph_set_module(g, was);
    if (c->dsa_topk > 0 && local) dsa_indexer(g, t, c, x, q, p);
    graph_set_module(g, GRAPH_MOD_MLA_UP);
    snprintf(n, sizeof n, "%s.q_b", p);
    q = wl_linear(g, t, q, n, "q_b", nh * (dn + dr), false);
  } else {
    if (c->dsa_topk > 0 && local) dsa_indexer(g, t, c, x, x, p);
    snprintf(n, sizeof n, "%s.q", p);
    q = wl_linear(g, t, x, n, "q", nh * (dn + dr), c->qkv_bias);
    graph_set_module(g, GRAPH_MOD_MLA_UP);
  }
  q = rope_tail(g, c, graph_reshape(g, q, GRAPH_SHAPE(t->compute, B, S, nh, dn + dr)), dn);
  graph_set_module(g, was);
  snprintf(n, sizeof n, "%s.kv_a", p);
  int kva = wl_linear(g, t, x, n, "kv_a", c->kv_lora + dr, c->qkv_bias);
  graph_set_module(g, GRAPH_MOD_MLA_UP);
  snprintf(n, sizeof n, "%s.kv_a_norm", p);
  int latent = wl_rmsnorm(g, t, slice_last(g, kva, 0, c->kv_lora), n);
  snprintf(n, sizeof n, "%s.kv_b", p);
  int kv = wl_linear(g, t, latent, n, "kv_b", nh * (dn + dv), false);
  kv = graph_reshape(g, kv, GRAPH_SHAPE(t->compute, B, S, nh, dn + dv));
  int kr = graph_reshape(g, slice_last(g, kva, c->kv_lora, c->kv_lora + dr),
                         GRAPH_SHAPE(t->compute, B, S, 1, dr));
  if (c->pos == POS_ROTARY) kr = rotary(g, kr);
  kr = graph_reshape(g, kr, GRAPH_SHAPE(t->compute, B, S, dr));
  int parts[2] = {slice_last(g, kv, 0, dn), graph_broadcast(g, kr, GRAPH_SHAPE(t->compute, B, S, nh, dr),
                                                              graph_dims_of(3, 0, 1, 3))};
  int k = graph_concat(g, parts, 2, 3);
  int v = slice_last(g, kv, dn, dn + dv);
  graph_set_module(g, was);
  int o = attention_core(g, t, c, q, k, v, local, p);
  snprintf(n, sizeof n, "%s.o", p);
  return dropout(g, c, wl_linear(g, t, o, n, "o", c->hidden, c->bias));
}

/* ---- feed-forward ---- */

static bool gated(const tf_cfg *c) { return c->ffn == FFN_SWIGLU || c->ffn == FFN_GEGLU; }

/* The FFN's nonlinearity on up (and on gate when gated): SwiGLU and GeGLU
** (Shazeer 2020), GELU, ReLU, squared ReLU (So et al. 2021, Primer; the
** activation of Nemotron-4, not gated). */
static int ffn_act(graph *g, const tf_cfg *c, int up, int gate) {
  switch (c->ffn) {
  case FFN_SWIGLU: return graph_binary(g, GOP_MUL, graph_unary(g, GOP_SILU, gate), up);
  case FFN_GEGLU: return graph_binary(g, GOP_MUL, graph_unary(g, GOP_GELU, gate), up);
  case FFN_RELU: return graph_unary(g, GOP_RELU, up);
  case FFN_RELU2: {
    int r = graph_unary(g, GOP_RELU, up);
    return graph_binary(g, GOP_MUL, r, r);
  }
  default: return graph_unary(g, GOP_GELU, up);
  }
}

static int dense_ffn(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p,
                     int64_t width) {
  char n[128];
  snprintf(n, sizeof n, "%s.up", p);
  int up = wl_linear(g, t, x, n, "up", width, c->bias), gate = -1;
  if (gated(c)) {
    snprintf(n, sizeof n, "%s.gate", p);
    gate = wl_linear(g, t, x, n, "gate", width, c->bias);
  }
  snprintf(n, sizeof n, "%s.down", p);
  return dropout(g, c, wl_linear(g, t, ffn_act(g, c, up, gate), n, "down", c->hidden, c->bias));
}

/* xe [E, C, in] times the held experts' weights [E, in, out] (plus a bias
** [E, out] per expert, as GPT-OSS has), batched over experts. */
static int expert_linear(graph *g, const wl_train *t, const tf_cfg *c, int xe, const char *p,
                         const char *which, int64_t out) {
  graph_shape sx = shape_of(g, xe);
  char n[128];
  snprintf(n, sizeof n, "%s.experts.%s.w", p, which);
  int w = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, c->experts, sx.dim[2], out), WL_W_LINEAR);
  graph_dims b0 = graph_dims_of(1, 0);
  int y = graph_dot(g, xe, w, b0, b0, graph_dims_of(1, 2), graph_dims_of(1, 1), t->compute);
  if (!c->bias) return y;
  snprintf(n, sizeof n, "%s.experts.%s.b", p, which);
  int b = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, c->experts, out), WL_W_OTHER);
  return graph_binary(g, GOP_ADD, y, graph_broadcast(g, b, shape_of(g, y), graph_dims_of(2, 0, 2)));
}

/* Mixture of experts (Shazeer et al. 2017; Mixtral): a router picks top_k
** of E experts per token; each expert gets capacity C = T k cf / E tokens
** (times capacity_mult under expert parallelism: shard_ep), gathered
** into [E, C, H] and run as batched matmuls with expert weights [E, H, F];
** results are weighted and scatter-added back to [T, H]. Shared experts
** (DeepSeek, Llama 4) are a dense FFN every token passes through. Latent
** MoE (Nemotron 3 Super; Megatron-Core MoELayer with moe_latent_size):
** the router and the shared experts read the hidden state, the routed
** tokens go down to the latent width (fc1_latent_proj) before the
** dispatch, the experts work in it, and the combined result comes back
** up (fc2_latent_proj). */
static int moe_ffn(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  graph_shape sx = shape_of(g, x);
  int64_t T = sx.dim[0] * sx.dim[1], H = c->latent > 0 ? c->latent : c->hidden, E = c->experts,
          R = c->router_experts;
  double cf = c->capacity > 0 ? c->capacity : 1; /* dropless: the even share */
  int64_t C = (int64_t)ceil((double)T * (double)c->top_k * cf * c->capacity_mult /
                            (double)R);
  char n[128];
  int xt = graph_reshape(g, x, GRAPH_SHAPE(t->compute, T, c->hidden));
  snprintf(n, sizeof n, "%s.router", p);
  int logits = wl_linear(g, t, xt, n, "router", R, c->bias);
  if (c->latent > 0) {
    snprintf(n, sizeof n, "%s.fc1_latent_proj", p);
    xt = wl_linear(g, t, xt, n, "fc1_latent_proj", H, c->bias);
  }
  int probs = wl_softmax(g, logits, GDT_F32);
  /* top-k selection: k passes of max over E per token */
  int sel = graph_custom(g, "top-k", GRAPH_SHAPE(GDT_S32, T, c->top_k), &probs, 1,
                         (double)T * (double)R * (double)c->top_k, 0,
                         (double)T * (double)R * 4 + (double)T * (double)c->top_k * 4);
  int idx = graph_reshape(g, sel, GRAPH_SHAPE(GDT_S32, T * c->top_k));
  graph_shape disp = GRAPH_SHAPE(t->compute, E * C, H);
  int xe = graph_gather(g, xt, idx, &disp);
  xe = graph_reshape(g, xe, GRAPH_SHAPE(t->compute, E, C, H));
  int up = expert_linear(g, t, c, xe, p, "up", c->moe_ffn);
  int gate = gated(c) ? expert_linear(g, t, c, xe, p, "gate", c->moe_ffn) : -1;
  graph_module was = graph_set_module(g, GRAPH_MOD_MOE_ACT); /* "moe_act" */
  int act = ffn_act(g, c, up, gate);
  graph_set_module(g, was);
  int y = expert_linear(g, t, c, act, p, "down", H);
  y = graph_reshape(g, y, GRAPH_SHAPE(t->compute, E * C, H));
  /* capacity rounded up past the routed rows (few tokens: a decode step's
  ** T k < E): the padding rows are computed but combine nothing */
  int64_t rows = E * C;
  if (rows > T * c->top_k) {
    rows = T * c->top_k;
    const int64_t start[2] = {0, 0}, limit[2] = {rows, H};
    y = graph_slice(g, y, start, limit, NULL);
  }
  /* weight each routed row by its gate probability, then combine */
  graph_shape ws = GRAPH_SHAPE(GDT_F32, rows);
  int gw = graph_convert(g, graph_gather(g, probs, idx, &ws), t->compute);
  y = graph_binary(g, GOP_MUL, y,
                   graph_broadcast(g, gw, GRAPH_SHAPE(t->compute, rows, H), graph_dims_of(1, 0)));
  int zero = graph_broadcast(g, graph_constant(g, (graph_shape){t->compute, 0, {0}}),
                             GRAPH_SHAPE(t->compute, T, H), graph_dims_of(0));
  int out = graph_scatter(g, zero, idx, y);
  if (c->latent > 0) {
    snprintf(n, sizeof n, "%s.fc2_latent_proj", p);
    out = wl_linear(g, t, out, n, "fc2_latent_proj", c->hidden, c->bias);
  }
  out = graph_reshape(g, out, sx);
  if (c->shared_ffn == 0) return out;
  snprintf(n, sizeof n, "%s.shared", p);
  was = graph_set_module(g, GRAPH_MOD_SHARED); /* "shared_experts" */
  int sh = dense_ffn(g, t, c, x, n, c->shared_ffn);
  if (c->shared_gate) { /* Qwen2MoeSparseMoeBlock: sigmoid(x w) x the shared expert */
    snprintf(n, sizeof n, "%s.shared_gate", p);
    int sg = graph_unary(g, GOP_LOGISTIC, wl_linear(g, t, x, n, "shared_gate", 1, false));
    sg = graph_reshape(g, sg, GRAPH_SHAPE(t->compute, sx.dim[0], sx.dim[1]));
    sh = graph_binary(g, GOP_MUL, sh, graph_broadcast(g, sg, shape_of(g, sh), graph_dims_of(2, 0, 1)));
  }
  graph_set_module(g, was);
  return graph_binary(g, GOP_ADD, out, sh);
}

/* ---- Mamba-2 ---- */

/* A weight of shape s in the compute dtype (not a linear layer's matrix). */
static int small_weight(graph *g, const wl_train *t, const char *p, const char *what, graph_shape s) {
  char n[128];
  snprintf(n, sizeof n, "%s.%s", p, what);
  return wl_weight(g, t, n, s, WL_W_OTHER);
}

/* The depthwise causal conv1d over the sequence (Mamba-2's conv1d on x, B
** and C; Gated DeltaNet's on q, k and v: kernel K per channel, K - 1 tokens
** of left padding), with its bias where it has one, then SiLU.
** xbc [B, S, D] -> [B, S, D]. */
static int causal_conv(graph *g, const wl_train *t, int64_t K, bool bias, int xbc, const char *p) {
  int64_t D = shape_of(g, xbc).dim[2];
  int w = small_weight(g, t, p, "conv1d.w", GRAPH_SHAPE(t->compute, K, 1, D));
  graph_conv_attrs a = {.spatial = 1, .in_batch = 0, .in_feature = 2, .in_spatial = {1},
                        .k_in = 1, .k_out = 2, .k_spatial = {0},
                        .out_batch = 0, .out_feature = 2, .out_spatial = {1},
                        .stride = {1}, .pad_lo = {K - 1}, .pad_hi = {0}, .feature_groups = D};
  int y = graph_conv(g, xbc, w, &a, t->compute);
  if (bias) y = wl_add_bias(g, y, small_weight(g, t, p, "conv1d.b", GRAPH_SHAPE(t->compute, D)));
  return graph_unary(g, GOP_SILU, y);
}

/* x [..., Q] summed cumulatively over its last dimension, as a product
** with the Q x Q lower-triangular ones (2 Q^2 flops a row; the scan
** kernel's cumsum is Q adds -- negligible beside the SSD matmuls). */
static int chunk_cumsum(graph *g, int x) {
  graph_shape s = shape_of(g, x);
  int64_t Q = s.dim[s.rank - 1];
  int tril = graph_constant(g, GRAPH_SHAPE(s.dtype, Q, Q));
  return graph_dot(g, x, tril, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, s.rank - 1),
                   graph_dims_of(1, 1), s.dtype);
}

/* The SSD scan of Mamba-2 in chunks of Q tokens (Dao & Gu 2024, "Transformers
** are SSMs", sec. 6 and Listing 1, ssd_minimal_discrete), on this chip's
** heads: x [BG, Q, hg, P] (BG = batch x chunks x the G groups, hg heads a
** group), Bm and Cm [BG, Q, N], dA [BG, hg, Q] (dt x A). The four steps:
** 1. within each chunk, Y_diag = (L o C B^T) X with L the decay mask
** exp(segsum(dA)) -- 2 Q^2 N a group and 2 Q^2 P a head, per chunk; 2. each
** chunk's state B^T (decay o X) -- 2 Q N P a head; 3. the states passed
** along the chunks -- a multiply-add per state element; 4. each chunk's
** output from the state entering it, Y_off = C h (decay) -- 2 Q N P a
** head. Returns Y_diag + Y_off [BG, Q, hg, P]. Every tensor is kept below
** rank 5, the attention scores' rank, by which the step model finds the
** attention core (sim/stepcost.c): this is no FlashAttention kernel. */
static int ssd_scan(graph *g, graph_dtype dt_c, int x, int Bm, int Cm, int dA) {
  graph_shape sx = shape_of(g, x);
  int64_t BG = sx.dim[0], Q = sx.dim[1], hg = sx.dim[2];
  int cs = chunk_cumsum(g, dA); /* [BG, hg, Q] */
  graph_shape sq = GRAPH_SHAPE(dt_c, BG, hg, Q, Q);
  /* 1. L[l, s] = exp(cs[l] - cs[s]) for s <= l, 0 above the diagonal */
  int seg = graph_binary(g, GOP_SUB, graph_broadcast(g, cs, sq, graph_dims_of(3, 0, 1, 2)),
                         graph_broadcast(g, cs, sq, graph_dims_of(3, 0, 1, 3)));
  graph_shape sm = GRAPH_SHAPE(GDT_PRED, BG, hg, Q, Q);
  int mask = graph_broadcast(g, graph_constant(g, GRAPH_SHAPE(GDT_PRED, Q, Q)), sm,
                             graph_dims_of(2, 2, 3));
  int zero = graph_broadcast(g, graph_constant(g, (graph_shape){dt_c, 0, {0}}), sq, graph_dims_of(0));
  int L = graph_select(g, mask, graph_unary(g, GOP_EXP, seg), zero);
  int cb = graph_dot(g, Cm, Bm, graph_dims_of(1, 0), graph_dims_of(1, 0), graph_dims_of(1, 2),
                     graph_dims_of(1, 2), dt_c); /* [BG, Ql, Qs] */
  int M = graph_binary(g, GOP_MUL, L, graph_broadcast(g, cb, sq, graph_dims_of(3, 0, 2, 3)));
  int yd = graph_dot(g, M, x, graph_dims_of(2, 0, 1), graph_dims_of(2, 0, 2), graph_dims_of(1, 3),
                     graph_dims_of(1, 1), dt_c); /* [BG, hg, Ql, P] */
  yd = graph_transpose(g, yd, graph_dims_of(4, 0, 2, 1, 3));
  /* 2. chunk states: B^T (exp(cs_last - cs) o X) */
  int64_t lo[3] = {0, 0, Q - 1}, hi[3] = {BG, hg, Q};
  int last = graph_reshape(g, graph_slice(g, cs, lo, hi, NULL), GRAPH_SHAPE(dt_c, BG, hg));
  graph_shape s3 = GRAPH_SHAPE(dt_c, BG, hg, Q);
  int ds = graph_unary(g, GOP_EXP, graph_binary(g, GOP_SUB, graph_broadcast(g, last, s3, graph_dims_of(2, 0, 1)), cs));
  ds = graph_transpose(g, ds, graph_dims_of(3, 0, 2, 1)); /* [BG, Q, hg] */
  int xd = graph_binary(g, GOP_MUL, x, graph_broadcast(g, ds, sx, graph_dims_of(3, 0, 1, 2)));
  int st = graph_dot(g, Bm, xd, graph_dims_of(1, 0), graph_dims_of(1, 0), graph_dims_of(1, 1),
                     graph_dims_of(1, 1), dt_c); /* [BG, N, hg, P] */
  /* 3. state passing: each chunk's state decays by exp(cs_last) and adds
  ** the previous chunk's (the kernel's sequential scan over chunks) */
  int dc = graph_unary(g, GOP_EXP, last);
  st = graph_binary(g, GOP_ADD, graph_binary(g, GOP_MUL, st, graph_broadcast(g, dc, shape_of(g, st), graph_dims_of(2, 0, 2))), st);
  /* 4. Y_off = (C h) o exp(cs) */
  int yo = graph_dot(g, Cm, st, graph_dims_of(1, 0), graph_dims_of(1, 0), graph_dims_of(1, 2),
                     graph_dims_of(1, 1), dt_c); /* [BG, Q, hg, P] */
  int dout = graph_transpose(g, graph_unary(g, GOP_EXP, cs), graph_dims_of(3, 0, 2, 1));
  yo = graph_binary(g, GOP_MUL, yo, graph_broadcast(g, dout, sx, graph_dims_of(3, 0, 1, 2)));
  return graph_binary(g, GOP_ADD, yd, yo);
}

/* x [B, Sp, G, w] (Sp = c Q tokens) regrouped by chunk and group for the
** scan: [B c G, Q, w / inner, inner] (inner 0: [B c G, Q, w]). */
static int to_chunks(graph *g, int x, int64_t Q, int64_t inner) {
  graph_shape s = shape_of(g, x);
  int64_t B = s.dim[0], c = s.dim[1] / Q, G = s.dim[2], w = s.dim[3];
  x = graph_reshape(g, x, GRAPH_SHAPE(s.dtype, B * c, Q, G, w));
  x = graph_transpose(g, x, graph_dims_of(4, 0, 2, 1, 3)); /* [Bc, G, Q, w] */
  return inner > 0 ? graph_reshape(g, x, GRAPH_SHAPE(s.dtype, B * c * G, Q, w / inner, inner))
                   : graph_reshape(g, x, GRAPH_SHAPE(s.dtype, B * c * G, Q, w));
}

/* A Mamba-2 mixer on x [B, S, H] as Megatron-Core's MambaMixer (and
** NemotronHMamba2Mixer) computes it: in_proj to z, x, B, C and dt
** (2 d_inner + 2 G N + heads wide), the causal conv1d + SiLU on x, B and C,
** dt = softplus(dt + dt_bias), A = -exp(A_log), the SSD scan plus the D
** skip, the gate y silu(z) and an RMSNorm over d_inner, out_proj. */
static int mamba_mixer(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  graph_dtype dt_c = t->compute;
  int64_t B = shape_of(g, x).dim[0], S = c->seq_local, nh = c->m_heads, P = c->m_hdim,
          G = c->m_groups, N = c->m_state, hg = nh / G, din = nh * P, cd = din + 2 * G * N;
  int64_t Q = c->m_chunk < S ? c->m_chunk : S, Sp = (S + Q - 1) / Q * Q;
  char n[128];
  snprintf(n, sizeof n, "%s.in_proj", p);
  int zx = wl_linear(g, t, x, n, "in_proj", cd + din + nh, c->bias);
  int z = slice_last(g, zx, 0, din);
  int xbc = causal_conv(g, t, c->m_conv, true, slice_last(g, zx, din, din + cd), p);
  int dt = wl_add_bias(g, slice_last(g, zx, din + cd, din + cd + nh),
                       small_weight(g, t, p, "dt_bias", GRAPH_SHAPE(dt_c, nh)));
  graph_shape sdt = shape_of(g, dt);
  int one = graph_broadcast(g, graph_constant(g, (graph_shape){dt_c, 0, {0}}), sdt, graph_dims_of(0));
  dt = graph_unary(g, GOP_LOG, graph_binary(g, GOP_ADD, graph_unary(g, GOP_EXP, dt), one)); /* softplus */
  int A = graph_unary(g, GOP_NEG, graph_unary(g, GOP_EXP, small_weight(g, t, p, "A_log", GRAPH_SHAPE(dt_c, nh))));
  int dA = graph_binary(g, GOP_MUL, dt, graph_broadcast(g, A, sdt, graph_dims_of(1, 2)));
  /* x, B and C by chunk (the sequence padded to whole chunks) and group */
  int xs = graph_reshape(g, slice_last(g, xbc, 0, din), GRAPH_SHAPE(dt_c, B, S, nh, P));
  int skip = graph_binary(g, GOP_MUL, xs, graph_broadcast(g, small_weight(g, t, p, "D", GRAPH_SHAPE(dt_c, nh)),
                                                          shape_of(g, xs), graph_dims_of(1, 2)));
  xs = graph_reshape(g, fit_seq(g, slice_last(g, xbc, 0, din), Sp), GRAPH_SHAPE(dt_c, B, Sp, G, hg * P));
  int Bm = graph_reshape(g, fit_seq(g, slice_last(g, xbc, din, din + G * N), Sp), GRAPH_SHAPE(dt_c, B, Sp, G, N));
  int Cm = graph_reshape(g, fit_seq(g, slice_last(g, xbc, din + G * N, cd), Sp), GRAPH_SHAPE(dt_c, B, Sp, G, N));
  dA = graph_reshape(g, fit_seq(g, dA, Sp), GRAPH_SHAPE(dt_c, B, Sp, G, hg));
  dA = graph_transpose(g, to_chunks(g, dA, Q, 0), graph_dims_of(3, 0, 2, 1)); /* [BG, hg, Q] */
  int y = ssd_scan(g, dt_c, to_chunks(g, xs, Q, P), to_chunks(g, Bm, Q, 0), to_chunks(g, Cm, Q, 0), dA);
  /* back to [B, S, d_inner]: [BG, Q, hg, P] -> [Bc, G, Q, hg P] -> [Bc, Q, G, hg P] */
  y = graph_reshape(g, y, GRAPH_SHAPE(dt_c, B * (Sp / Q), G, Q, hg * P));
  y = graph_transpose(g, y, graph_dims_of(4, 0, 2, 1, 3));
  y = fit_seq(g, graph_reshape(g, y, GRAPH_SHAPE(dt_c, B, Sp, din)), S);
  y = graph_binary(g, GOP_ADD, y, graph_reshape(g, skip, GRAPH_SHAPE(dt_c, B, S, din)));
  y = graph_binary(g, GOP_MUL, y, graph_unary(g, GOP_SILU, z));
  snprintf(n, sizeof n, "%s.mixer_norm", p);
  y = wl_rmsnorm(g, t, y, n);
  snprintf(n, sizeof n, "%s.out_proj", p);
  return wl_linear(g, t, y, n, "out_proj", c->hidden, c->bias);
}

/* ---- Gated DeltaNet ---- */

/* x [Bc, n, Q, w] times y [Bc, n, Q, w'] contracting dim cx of x and cy of
** y (w, or Q): batched over the chunks and heads. Two batch dims, where a
** grouped expert GEMM has one (the step model tells them apart so). */
static int bdot(graph *g, graph_dtype dt, int x, int y, int cx, int cy) {
  graph_dims b = graph_dims_of(2, 0, 1);
  return graph_dot(g, x, y, b, b, graph_dims_of(1, cx), graph_dims_of(1, cy), dt);
}

/* x [Bc, n, Q, w] scaled row by row by s [Bc, n, Q]. */
static int row_scale(graph *g, int x, int s) {
  return graph_binary(g, GOP_MUL, x, graph_broadcast(g, s, shape_of(g, x), graph_dims_of(3, 0, 1, 2)));
}

/* The chunked gated delta rule (Yang, Kautz, Hatamizadeh 2024, "Gated Delta
** Networks", sec. 3.3; FLA's chunk_gated_delta_rule, whose reference
** torch_chunk_gated_delta_rule HF's Qwen3-Next carries) on chunks of Q
** tokens, batched over (batch x chunk) and value heads: q and k
** [Bc, n, Q, dk], v [Bc, n, Q, dv], beta and the log decay gl [Bc, n, Q].
** Within a chunk, with cs the decay's cumsum and L = exp(cs_i - cs_j) on
** and below the diagonal: A = (beta k k^T) o L (2 Q^2 dk), its triangular
** solve T = (I + A)^-1 (a forward substitution of about Q^3 / 3
** multiply-adds, counted as one Q x Q x Q product), u = T (beta v)
** (2 Q^2 dv) and w = T (beta k o e^cs) (2 Q^2 dk); across chunks, from the
** state S entering it [dk, dv]: v_new = u - w S (2 Q dk dv), o = (q o e^cs) S
** (2 Q dk dv) + ((q k^T) o L) v_new (2 Q^2 dk + 2 Q^2 dv), and the state
** passed on, S e^cs_last + (k o e^(cs_last - cs))^T v_new (2 Q dk dv). The
** state each chunk receives is the previous chunk's, a sequential scan the
** kernel runs in order; here each chunk's own stands in for it (the same
** shapes and FLOPs, no chain of Q-token steps). Every tensor stays below
** rank 5, the attention core's (sim/stepcost.c): no FlashAttention kernel. */
static int gdn_scan(graph *g, graph_dtype dt, int q, int k, int v, int beta, int gl) {
  graph_shape sq = shape_of(g, q);
  int64_t Bc = sq.dim[0], n = sq.dim[1], Q = sq.dim[2];
  int cs = chunk_cumsum(g, gl); /* [Bc, n, Q] */
  graph_shape qq = GRAPH_SHAPE(dt, Bc, n, Q, Q);
  int seg = graph_binary(g, GOP_SUB, graph_broadcast(g, cs, qq, graph_dims_of(3, 0, 1, 2)),
                         graph_broadcast(g, cs, qq, graph_dims_of(3, 0, 1, 3)));
  int mask = graph_broadcast(g, graph_constant(g, GRAPH_SHAPE(GDT_PRED, Q, Q)),
                             GRAPH_SHAPE(GDT_PRED, Bc, n, Q, Q), graph_dims_of(2, 2, 3));
  int zero = graph_broadcast(g, graph_constant(g, (graph_shape){dt, 0, {0}}), qq, graph_dims_of(0));
  int L = graph_select(g, mask, graph_unary(g, GOP_EXP, seg), zero);
  int kb = row_scale(g, k, beta), vb = row_scale(g, v, beta);
  int A = graph_binary(g, GOP_MUL, bdot(g, dt, kb, k, 3, 3), L); /* [Bc, n, Q, Q] */
  int T = graph_binary(g, GOP_ADD, A, bdot(g, dt, A, A, 3, 2));
  int ecs = graph_unary(g, GOP_EXP, cs);
  int u = bdot(g, dt, T, vb, 3, 2);                    /* [Bc, n, Q, dv] */
  int w = bdot(g, dt, T, row_scale(g, kb, ecs), 3, 2); /* [Bc, n, Q, dk] */
  /* the chunk's state: (k o e^(cs_last - cs))^T u, and its decay */
  int64_t lo[3] = {0, 0, Q - 1}, hi[3] = {Bc, n, Q};
  int last = graph_reshape(g, graph_slice(g, cs, lo, hi, NULL), GRAPH_SHAPE(dt, Bc, n));
  int dl = graph_unary(g, GOP_EXP, graph_binary(g, GOP_SUB,
                                                 graph_broadcast(g, last, shape_of(g, cs), graph_dims_of(2, 0, 1)), cs));
  int st = bdot(g, dt, row_scale(g, k, dl), u, 2, 2); /* [Bc, n, dk, dv] */
  int decay = graph_broadcast(g, graph_unary(g, GOP_EXP, last), shape_of(g, st), graph_dims_of(2, 0, 1));
  st = graph_binary(g, GOP_ADD, graph_binary(g, GOP_MUL, st, decay), st);
  int vn = graph_binary(g, GOP_SUB, u, bdot(g, dt, w, st, 3, 2));
  int oi = bdot(g, dt, row_scale(g, q, ecs), st, 3, 2);
  int qk = graph_binary(g, GOP_MUL, bdot(g, dt, q, k, 3, 3), L);
  return graph_binary(g, GOP_ADD, oi, bdot(g, dt, qk, vn, 3, 2));
}

/* x [B, Sp, n, w] (Sp = c Q tokens) by chunk and head: [B c, n, Q, w]. */
static int head_chunks(graph *g, int x, int64_t Q) {
  graph_shape s = shape_of(g, x);
  int64_t B = s.dim[0], c = s.dim[1] / Q, n = s.dim[2], w = s.dim[3];
  x = graph_reshape(g, x, GRAPH_SHAPE(s.dtype, B * c, Q, n, w));
  return graph_transpose(g, x, graph_dims_of(4, 0, 2, 1, 3));
}

/* A Gated DeltaNet mixer on x [B, S, H] as Qwen3NextGatedDeltaNet computes
** it: in_proj_qkvz to q, k (key heads x dk each), v and the output gate z
** (value heads x dv each), in_proj_ba to beta and the decay's input a (a
** value a head); the causal conv1d + SiLU on q, k and v (no bias);
** q and k L2-normalized and repeated to the value heads; beta = sigmoid(b),
** g = -exp(A_log) softplus(a + dt_bias); the chunked delta rule; an RMSNorm
** over each head's dv gated by silu(z); out_proj. */
static int gdn_mixer(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  graph_dtype dt = t->compute;
  int64_t B = shape_of(g, x).dim[0], S = c->seq_local, nk = c->g_kh, nv = c->g_vh, dk = c->g_kd,
          dv = c->g_vd, kd = nk * dk, vd = nv * dv, cd = 2 * kd + vd, r = nv / nk;
  int64_t Q = c->g_chunk < S ? c->g_chunk : S, Sp = (S + Q - 1) / Q * Q;
  char n[128];
  snprintf(n, sizeof n, "%s.in_proj_qkvz", p);
  int qkvz = wl_linear(g, t, x, n, "in_proj_qkvz", cd + vd, false);
  snprintf(n, sizeof n, "%s.in_proj_ba", p);
  int ba = wl_linear(g, t, x, n, "in_proj_ba", 2 * nv, false);
  int qkv = causal_conv(g, t, c->g_conv, false, slice_last(g, qkvz, 0, cd), p);
  int z = graph_reshape(g, slice_last(g, qkvz, cd, cd + vd), GRAPH_SHAPE(dt, B, S, nv, dv));
  int beta = graph_unary(g, GOP_LOGISTIC, slice_last(g, ba, 0, nv)); /* [B, S, nv] */
  int a = wl_add_bias(g, slice_last(g, ba, nv, 2 * nv),
                      small_weight(g, t, p, "dt_bias", GRAPH_SHAPE(dt, nv)));
  graph_shape sa = shape_of(g, a);
  int one = graph_broadcast(g, graph_constant(g, (graph_shape){dt, 0, {0}}), sa, graph_dims_of(0));
  a = graph_unary(g, GOP_LOG, graph_binary(g, GOP_ADD, graph_unary(g, GOP_EXP, a), one)); /* softplus */
  int A = graph_unary(g, GOP_NEG, graph_unary(g, GOP_EXP, small_weight(g, t, p, "A_log", GRAPH_SHAPE(dt, nv))));
  int gl = graph_binary(g, GOP_MUL, a, graph_broadcast(g, A, sa, graph_dims_of(1, 2)));
  /* q and k: normalized per key head, then each key head's to its r value heads */
  int qk[2];
  for (int i = 0; i < 2; i++) {
    int y = graph_reshape(g, slice_last(g, qkv, i * kd, (i + 1) * kd), GRAPH_SHAPE(dt, B, S, nk, dk));
    y = wl_l2norm(g, y);
    if (r > 1) {
      y = graph_reshape(g, y, GRAPH_SHAPE(dt, B * S, nk, dk));
      y = graph_broadcast(g, y, GRAPH_SHAPE(dt, B * S, nk, r, dk), graph_dims_of(3, 0, 1, 3));
      y = graph_reshape(g, y, GRAPH_SHAPE(dt, B, S, nv, dk));
    }
    qk[i] = head_chunks(g, fit_seq(g, y, Sp), Q);
  }
  int v = graph_reshape(g, slice_last(g, qkv, 2 * kd, cd), GRAPH_SHAPE(dt, B, S, nv, dv));
  v = head_chunks(g, fit_seq(g, v, Sp), Q);
  /* beta and g by chunk and head: [B, Sp, nv] -> [B c, nv, Q] */
  int bg[2] = {beta, gl};
  for (int i = 0; i < 2; i++) {
    int y = graph_reshape(g, fit_seq(g, bg[i], Sp), GRAPH_SHAPE(dt, B * (Sp / Q), Q, nv));
    bg[i] = graph_transpose(g, y, graph_dims_of(3, 0, 2, 1));
  }
  int y = gdn_scan(g, dt, qk[0], qk[1], v, bg[0], bg[1]); /* [B c, nv, Q, dv] */
  y = graph_transpose(g, y, graph_dims_of(4, 0, 2, 1, 3));
  y = fit_seq(g, graph_reshape(g, y, GRAPH_SHAPE(dt, B, Sp, nv, dv)), S);
  snprintf(n, sizeof n, "%s.gdn_norm", p);
  y = graph_binary(g, GOP_MUL, wl_rmsnorm(g, t, y, n), graph_unary(g, GOP_SILU, z));
  y = graph_reshape(g, y, GRAPH_SHAPE(dt, B, S, vd));
  snprintf(n, sizeof n, "%s.out_proj", p);
  return wl_linear(g, t, y, n, "out_proj", c->hidden, false);
}

/* ---- layers ---- */

static int attn_of(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p, int kind) {
  if (kind & WL_LAYER_GDN) return gdn_mixer(g, t, c, x, p);
  bool local = kind & WL_LAYER_LOCAL;
  return c->kv_lora ? mla_attention(g, t, c, x, p, local) : attention(g, t, c, x, p, local);
}

/* The FFN, its ops tagged with the submodule Megatron-Core recomputes it
** as ("mlp" for a dense layer's, "moe" for a MoE layer's). */
static int ffn_of(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p, bool moe) {
  graph_module was = graph_set_module(g, moe ? GRAPH_MOD_MOE : GRAPH_MOD_MLP);
  int y = moe ? moe_ffn(g, t, c, x, p) : dense_ffn(g, t, c, x, p, c->ffn_hidden);
  graph_set_module(g, was);
  return y;
}

/* A pre-norm layer's input or pre-MLP norm, tagged "layernorm" (Megatron-
** Core's recompute_modules) where it is a module of its own: the input norm
** before MLA (its down projections are plain linears), the pre-MLP norm
** before a MoE block (the router reads it). Elsewhere Transformer Engine
** fuses the norm into the next GEMM (LayerNormLinear: Megatron-Core's
** layer holds an IdentityOp there, which recomputes nothing). */
static int layer_norm(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *name,
                      bool own) {
  graph_module was = graph_module_of(g);
  graph_set_module(g, own ? GRAPH_MOD_NORM : was);
  int y = norm(g, t, c, x, name);
  graph_set_module(g, was);
  return y;
}

/* x + f(norm(x)), with Gemma's second norm on f's output (sandwich_norm). */
static int residual(graph *g, const wl_train *t, const tf_cfg *c, int x, int f, const char *name) {
  if (c->sandwich) {
    char n[128];
    snprintf(n, sizeof n, "%s_post", name);
    f = norm(g, t, c, f, n);
  }
  return graph_binary(g, GOP_ADD, x, f);
}

/* One layer of kind `kind` (WL_LAYER_*), its ops named and numbered layer. */
static int block(graph *g, const wl_train *t, const tf_cfg *c, int x, int layer, const char *p,
                 int kind) {
  char n[96];
  graph_set_layer(g, layer);
  graph_set_scope(g, p);
  bool moe = kind & WL_LAYER_MOE;
  if (kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER)) {
    /* a hybrid layer (Nemotron-H's NemotronHBlock): norm, one mixer or
    ** FFN, residual */
    snprintf(n, sizeof n, "%s.norm", p);
    int h = layer_norm(g, t, c, x, n, moe && (kind & WL_LAYER_NO_MIXER));
    int f = kind & WL_LAYER_MAMBA    ? mamba_mixer(g, t, c, h, p)
            : kind & WL_LAYER_NO_FFN ? attn_of(g, t, c, h, p, kind)
                                     : ffn_of(g, t, c, h, p, moe);
    return graph_binary(g, GOP_ADD, x, f);
  }
  if (c->kind == 1) { /* BERT: post-norm */
    snprintf(n, sizeof n, "%s.ln1", p);
    x = norm(g, t, c, graph_binary(g, GOP_ADD, x, attn_of(g, t, c, x, p, kind)), n);
    snprintf(n, sizeof n, "%s.ln2", p);
    return norm(g, t, c, graph_binary(g, GOP_ADD, x, ffn_of(g, t, c, x, p, moe)), n);
  }
  snprintf(n, sizeof n, "%s.ln1", p);
  int h = layer_norm(g, t, c, x, n, c->kv_lora > 0 && !(kind & WL_LAYER_GDN));
  if (c->parallel) { /* PaLM: x + attn(ln(x)) + mlp(ln(x)) */
    int a = attn_of(g, t, c, h, p, kind), f = ffn_of(g, t, c, h, p, moe);
    return graph_binary(g, GOP_ADD, x, graph_binary(g, GOP_ADD, a, f));
  }
  x = residual(g, t, c, x, attn_of(g, t, c, h, p, kind), n);
  snprintf(n, sizeof n, "%s.ln2", p);
  return residual(g, t, c, x, ffn_of(g, t, c, layer_norm(g, t, c, x, n, moe), p, moe), n);
}

/* ---- embedding, head, multi-token prediction ---- */

/* Logits of x through the output head: the embedding table when tied, else
** head_w ([H, V], shared with the MTP modules) or a linear layer of its own. */
static int lm_head(graph *g, const wl_train *t, const tf_cfg *c, int x, int table, int head_w) {
  if (c->tied) { /* x . E^T: contract H with the table's second dim */
    int logits = graph_dot(g, x, table, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, 2),
                           graph_dims_of(1, 1), t->compute);
    if (c->kind == 1)
      logits = wl_add_bias(
          g, logits, wl_weight(g, t, "head.bias", GRAPH_SHAPE(t->compute, c->vocab), WL_W_OTHER));
    return logits;
  }
  if (head_w >= 0) return graph_matmul(g, x, head_w);
  return wl_linear(g, t, x, "head.lm", "lm_head", c->vocab, false);
}

typedef struct {
  int table, head_w, tokens, labels;
} tf_io;

/* DeepSeek-V3's multi-token prediction (DeepSeek-AI 2024, arXiv:2412.19437
** §2.2): module k joins the previous depth's hidden state h with the
** embedding of the token k ahead -- each RMS-normalized, concatenated,
** projected 2H -> H (eh_proj) -- runs one more transformer layer, of the
** kind layer L + k - 1 would have, and predicts through the shared output
** head; its loss joins the main one with a weight. Embedding and head are
** shared, so a module's parameters are its layer, eh_proj and three norms. */
static int mtp_modules(graph *g, const wl_train *t, const tf_cfg *c, const wl_tf_dims *d, int h,
                       const tf_io *io, int loss) {
  /* depths past the modules run them again in turn with the same weights
  ** (Megatron-Core's repeated MTP layer): the same names, shared */
  for (int64_t k = 0; k < c->mtp_depth; k++) {
    char p[32], n[64];
    bool shared = graph_set_share_params(g, k >= c->mtp);
    snprintf(p, sizeof p, "mtp%lld", (long long)(k % c->mtp));
    graph_set_layer(g, (int)(c->layers + k));
    graph_set_scope(g, p);
    snprintf(n, sizeof n, "%s.hnorm", p);
    int hn = wl_rmsnorm(g, t, h, n);
    snprintf(n, sizeof n, "%s.enorm", p);
    int parts[2] = {wl_rmsnorm(g, t, graph_gather(g, io->table, io->tokens, NULL), n), hn};
    snprintf(n, sizeof n, "%s.eh_proj", p);
    h = wl_linear(g, t, graph_concat(g, parts, 2, 2), n, "eh_proj", c->hidden, false);
    if (c->mtp_hybrid) { /* a hybrid model's MTP module: its own pattern's layers */
      for (const char *ch = c->mtp_hybrid; *ch; ch++) {
        snprintf(n, sizeof n, "%s.%d", p, (int)(ch - c->mtp_hybrid));
        h = block(g, t, c, h, (int)(c->layers + k), n, wl_hybrid_kind(*ch));
      }
      graph_set_scope(g, p);
    } else {
      h = block(g, t, c, h, (int)(c->layers + k), p,
                wl_tf_layer_kind(d, c->model_layers + k % c->mtp));
    }
    snprintf(n, sizeof n, "%s.norm", p);
    int logits = lm_head(g, t, c, norm(g, t, c, h, n), io->table, io->head_w);
    loss = graph_binary(g, GOP_ADD, loss, wl_scale(g, wl_cross_entropy(g, logits, io->labels)));
    graph_set_share_params(g, shared);
  }
  return loss;
}

/* Elements of the weights inside routed experts (named "*.experts.*"). */
static int64_t expert_elements(const graph *g) {
  int64_t n = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind == GOP_PARAMETER && (op->flags & GRAPH_WEIGHT) && !(op->flags & GRAPH_ADAPTER) &&
        op->name && strstr(op->name, ".experts."))
      n += graph_elements(&op->out);
  }
  return n;
}

/* Token (and position, token-type) embeddings of this chip's tokens. */
static int embed(graph *g, const wl_train *t, const tf_cfg *c, tf_io *io) {
  int64_t B = t->global_batch, S = c->seq_local, H = c->hidden;
  graph_set_scope(g, "embed");
  io->tokens = wl_input(g, "tokens", GRAPH_SHAPE(GDT_S32, B, S));
  io->labels = wl_input(g, "labels", GRAPH_SHAPE(GDT_S32, B, S));
  io->table = wl_weight(g, t, "embed.tokens", GRAPH_SHAPE(t->compute, c->vocab, H), WL_W_OTHER);
  int x = graph_gather(g, io->table, io->tokens, NULL);
  graph_shape sx = GRAPH_SHAPE(t->compute, B, S, H);
  if (c->pos == POS_LEARNED) {
    int pos = wl_weight(g, t, "embed.positions", GRAPH_SHAPE(t->compute, c->max_positions, H),
                        WL_W_OTHER);
    int64_t z[2] = {0, 0}, lim[2] = {S, H};
    int pe = graph_slice(g, pos, z, lim, NULL);
    x = graph_binary(g, GOP_ADD, x, graph_broadcast(g, pe, sx, graph_dims_of(2, 1, 2)));
  }
  if (c->type_vocab > 0) {
    int types = wl_input(g, "token_types", GRAPH_SHAPE(GDT_S32, B, S));
    int tt = wl_weight(g, t, "embed.types", GRAPH_SHAPE(t->compute, c->type_vocab, H), WL_W_OTHER);
    x = graph_binary(g, GOP_ADD, x, graph_gather(g, tt, types, NULL));
  }
  if (c->kind == 1) x = norm(g, t, c, x, "embed.ln");
  return x;
}

int wl_transformer(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  tf_cfg c;
  if (!read_cfg(j, spec, t, &c)) return -1;
  wl_tf_dims d = dims_of(&c);
  tf_io io = {.head_w = -1};
  int x = embed(g, t, &c, &io);
  for (int l = 0; l < c.layers; l++) {
    char p[32];
    snprintf(p, sizeof p, "l%d", l);
    x = block(g, t, &c, x, l, p, t->one_kind ? t->layer_kind : wl_tf_layer_kind(&d, l));
  }
  graph_set_layer(g, -1);
  graph_set_scope(g, "head");
  int h = x;
  if (c.kind == 1) { /* BERT MLM transform: dense + gelu + layernorm */
    x = graph_unary(g, GOP_GELU, wl_linear(g, t, x, "head.transform", "head", c.hidden, true));
    x = norm(g, t, &c, x, "head.ln");
  } else {
    x = norm(g, t, &c, x, "final_norm");
  }
  if (c.mtp > 0 && !c.tied)
    io.head_w = wl_weight(g, t, "head.lm.w", GRAPH_SHAPE(t->compute, c.hidden, c.vocab), WL_W_LINEAR);
  int loss = wl_cross_entropy(g, lm_head(g, t, &c, x, io.table, io.head_w), io.labels);
  if (c.mtp > 0) loss = mtp_modules(g, t, &c, &d, h, &io, loss);
  graph_set_layer(g, -1);
  graph_set_scope(g, "");

  info->per_step = (double)t->global_batch * (double)c.seq_local;
  info->unit = "tokens";
  d.expert_params = expert_elements(g);
  info->tf = d;
  if (c.experts > 0) {
    /* parameters a token passes through: all but the unchosen experts (of
    ** router_experts, top_k are chosen; every held expert is the same size) */
    double unchosen = (double)d.expert_params * (double)(c.router_experts - c.top_k) /
                      (double)c.router_experts;
    info->active_params = graph_param_elements(g, GRAPH_WEIGHT) - (int64_t)llround(unchosen);
  }
  return loss;
}
