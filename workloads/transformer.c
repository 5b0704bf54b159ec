/*
** transformer.c -- the transformer family: decoder-only (GPT, Llama,
** Mixtral) and encoder (BERT) stacks, written out as the ops JAX/XLA emits
** before fusion. Attention is computed in full (S x T scores, then the
** causal mask), which is what Megatron's and PaLM's FLOP formulas count.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "families.h"

static const char *const KEYS[] = {
    "kind",  "layers",  "hidden",         "heads",         "kv_heads", "head_dim",
    "ffn_hidden", "ffn", "norm",          "parallel_block", "vocab",   "seq_len",
    "tied_embeddings", "moe", "positions", "bias",       "max_positions", "type_vocab",
    "rope_theta", "qkv_bias", "dropout", NULL};
static const char *const KIND[] = {"decoder", "encoder", NULL};
static const char *const FFN[] = {"gelu", "relu", "swiglu", "geglu", NULL};
static const char *const NORM[] = {"layernorm", "rmsnorm", NULL};
static const char *const POS[] = {"rotary", "learned", "none", NULL};
enum { FFN_GELU, FFN_RELU, FFN_SWIGLU, FFN_GEGLU };
enum { POS_ROTARY, POS_LEARNED, POS_NONE };

typedef struct {
  int kind; /* 0 decoder, 1 encoder */
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq;
  int ffn, norm, pos;
  bool parallel, tied, bias, qkv_bias;
  int64_t experts, top_k, max_positions, type_vocab;
  double capacity;
  double dropout; /* attention and hidden dropout probability (Megatron: 0.1) */
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

/* Reads and checks the fields; returns false after reporting. */
static bool read_cfg(jin *j, const cJSON *s, const wl_train *t, tf_cfg *c) {
  bool ok = jin_only(j, s, KEYS, wl_common_keys) == 0;
  const int64_t BIG = 1LL << 24; /* 16M: any real width or count */
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
  ok &= jin_get_int(j, s, "vocab", 1, BIG, true, &c->vocab) > 0;
  c->seq = t->seq_len;
  c->tied = false;
  ok &= jin_get_bool(j, s, "tied_embeddings", false, &c->tied) >= 0;
  ok &= jin_get_enum(j, s, "positions", POS, false, &c->pos) >= 0;
  c->bias = false;
  ok &= jin_get_bool(j, s, "bias", false, &c->bias) >= 0;
  c->qkv_bias = c->bias;
  ok &= jin_get_bool(j, s, "qkv_bias", false, &c->qkv_bias) >= 0;
  ok &= jin_get_int(j, s, "type_vocab", 0, BIG, false, &c->type_vocab) >= 0;
  double theta;
  ok &= jin_get_num(j, s, "rope_theta", 1, 1e12, false, &theta) >= 0;
  ok &= jin_get_num(j, s, "dropout", 0, 0.99, false, &c->dropout) >= 0;
  c->max_positions = c->seq;
  ok &= jin_get_int(j, s, "max_positions", 1, BIG, false, &c->max_positions) >= 0;
  const cJSON *moe = jin_get_object(j, s, "moe", false);
  if (moe) {
    static const char *const MOE_KEYS[] = {"experts", "top_k", "capacity_factor", NULL};
    jin_push_key(j, "moe", 0);
    ok &= jin_only(j, moe, MOE_KEYS, NULL) == 0;
    ok &= jin_get_int(j, moe, "experts", 1, 1 << 16, true, &c->experts) > 0;
    ok &= jin_get_int(j, moe, "top_k", 1, 1 << 16, true, &c->top_k) > 0;
    c->capacity = 1.0;
    ok &= jin_get_num(j, moe, "capacity_factor", 0.01, 1000, false, &c->capacity) >= 0;
    if (ok && c->top_k > c->experts) jin_error(j, 1, "top_k %lld exceeds experts %lld",
                                               (long long)c->top_k, (long long)c->experts), ok = false;
    jin_pop(j);
  }
  if (!ok || !within_limits(j, s, moe)) return false;
  if (c->seq > WL_MAX_SEQ) { /* from --seq: the file's seq_len is checked on reading */
    jin_error(j, 1, "--seq %lld is past tpusim's limit of %lld tokens: %s (docs/limits.md)",
              (long long)c->seq, WL_MAX_SEQ, WL_MAX_SEQ_WHY);
    return false;
  }
  if (c->head_dim == 0) {
    if (c->hidden % c->heads != 0) {
      jin_error(j, 1, "hidden %lld is not divisible by heads %lld; give head_dim",
                (long long)c->hidden, (long long)c->heads);
      return false;
    }
    c->head_dim = c->hidden / c->heads;
  }
  if (c->heads % c->kv_heads != 0) {
    jin_error(j, 1, "heads %lld is not a multiple of kv_heads %lld", (long long)c->heads,
              (long long)c->kv_heads);
    return false;
  }
  if (c->ffn_hidden == 0) c->ffn_hidden = 4 * c->hidden;
  if (t->only_layers > 0 && t->only_layers < c->layers) c->layers = t->only_layers;
  if (t->shard_tp > 1) { /* Megatron's split: heads, FFN columns, vocabulary */
    int64_t tp = t->shard_tp;
    if (c->heads % tp || c->ffn_hidden % tp) {
      jin_error(j, 1, "heads %lld and ffn_hidden %lld must divide by tp %lld", (long long)c->heads,
                (long long)c->ffn_hidden, (long long)tp);
      return false;
    }
    c->heads /= tp;
    c->kv_heads = c->kv_heads >= tp ? c->kv_heads / tp : 1; /* fewer KV heads are replicated */
    c->ffn_hidden /= tp;
    c->vocab = (c->vocab + tp - 1) / tp;
    if (c->experts > 0 && c->experts % tp == 0) c->experts /= tp;
  }
  if (c->pos == POS_LEARNED && c->max_positions < c->seq) {
    jin_error(j, 1, "seq_len %lld exceeds max_positions %lld", (long long)c->seq,
              (long long)c->max_positions);
    return false;
  }
  return true;
}

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

/* Self-attention on x [B, S, H]. Grouped-query attention is written with
** the query heads split into [kv_heads, group], as JAX implementations do,
** so K and V are never materialized per query head. */
static int attention(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  int64_t B = shape_of(g, x).dim[0], S = c->seq, nq = c->heads, nk = c->kv_heads,
          d = c->head_dim, grp = nq / nk;
  char n[128];
  snprintf(n, sizeof n, "%s.q", p);
  int q = wl_linear(g, t, x, n, "q", nq * d, c->qkv_bias);
  snprintf(n, sizeof n, "%s.k", p);
  int k = wl_linear(g, t, x, n, "k", nk * d, c->qkv_bias);
  snprintf(n, sizeof n, "%s.v", p);
  int v = wl_linear(g, t, x, n, "v", nk * d, c->qkv_bias);
  q = graph_reshape(g, q, GRAPH_SHAPE(t->compute, B, S, nq, d));
  k = graph_reshape(g, k, GRAPH_SHAPE(t->compute, B, S, nk, d));
  v = graph_reshape(g, v, GRAPH_SHAPE(t->compute, B, S, nk, d));
  if (c->pos == POS_ROTARY) {
    q = rotary(g, q);
    k = rotary(g, k);
  }
  q = graph_reshape(g, q, GRAPH_SHAPE(t->compute, B, S, nk, grp, d));
  /* scores [B, nk, S, grp, T] = q . k over d, batched over B and kv heads,
  ** in the compute dtype as a framework's GEMM writes them (f32 inside);
  ** scale, mask and softmax then run in f32 and give the compute dtype
  ** back, as Megatron's fused scale-mask-softmax does */
  int sc = graph_dot(g, q, k, graph_dims_of(2, 0, 2), graph_dims_of(2, 0, 2),
                     graph_dims_of(1, 4), graph_dims_of(1, 3), t->compute);
  sc = wl_scale(g, graph_convert(g, sc, GDT_F32)); /* 1/sqrt(d) */
  if (c->kind == 0) {   /* causal mask: a constant [S, T] broadcast, then select */
    graph_shape ss = shape_of(g, sc);
    int mask = graph_constant(g, GRAPH_SHAPE(GDT_PRED, S, S));
    graph_shape ms = ss;
    ms.dtype = GDT_PRED;
    mask = graph_broadcast(g, mask, ms, graph_dims_of(2, 2, 4));
    int neg = graph_broadcast(g, graph_constant(g, (graph_shape){GDT_F32, 0, {0}}), ss,
                              graph_dims_of(0));
    sc = graph_select(g, mask, sc, neg);
  }
  int pr = dropout(g, c, wl_softmax(g, sc, t->compute));
  /* out [B, nk, S, grp, d] = probs . v over T */
  int o = graph_dot(g, pr, v, graph_dims_of(2, 0, 1), graph_dims_of(2, 0, 2),
                    graph_dims_of(1, 4), graph_dims_of(1, 1), t->compute);
  o = graph_transpose(g, o, graph_dims_of(5, 0, 2, 1, 3, 4));
  o = graph_reshape(g, o, GRAPH_SHAPE(t->compute, B, S, nq * d));
  snprintf(n, sizeof n, "%s.o", p);
  return dropout(g, c, wl_linear(g, t, o, n, "o", c->hidden, c->bias));
}

static int dense_ffn(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  char n[128];
  bool gated = c->ffn == FFN_SWIGLU || c->ffn == FFN_GEGLU;
  snprintf(n, sizeof n, "%s.up", p);
  int up = wl_linear(g, t, x, n, "up", c->ffn_hidden, c->bias);
  int h;
  if (gated) {
    snprintf(n, sizeof n, "%s.gate", p);
    int gate = wl_linear(g, t, x, n, "gate", c->ffn_hidden, c->bias);
    gate = graph_unary(g, c->ffn == FFN_SWIGLU ? GOP_SILU : GOP_GELU, gate);
    h = graph_binary(g, GOP_MUL, gate, up);
  } else {
    h = graph_unary(g, c->ffn == FFN_RELU ? GOP_RELU : GOP_GELU, up);
  }
  snprintf(n, sizeof n, "%s.down", p);
  return dropout(g, c, wl_linear(g, t, h, n, "down", c->hidden, c->bias));
}

/* Mixture of experts (Shazeer et al. 2017; Mixtral): a router picks top_k
** of E experts per token; each expert gets capacity C = T k cf / E tokens,
** gathered into [E, C, H] and run as batched matmuls with expert weights
** [E, H, F]; results are weighted and scatter-added back to [T, H]. */
static int moe_ffn(graph *g, const wl_train *t, const tf_cfg *c, int x, const char *p) {
  graph_shape sx = shape_of(g, x);
  int64_t T = sx.dim[0] * sx.dim[1], H = c->hidden, F = c->ffn_hidden, E = c->experts;
  int64_t C = (int64_t)ceil((double)T * (double)c->top_k * c->capacity / (double)E);
  char n[128];
  int xt = graph_reshape(g, x, GRAPH_SHAPE(t->compute, T, H));
  snprintf(n, sizeof n, "%s.router", p);
  int logits = wl_linear(g, t, xt, n, "router", E, false);
  int probs = wl_softmax(g, logits, GDT_F32);
  /* top-k selection: k passes of max over E per token */
  int sel = graph_custom(g, "top-k", GRAPH_SHAPE(GDT_S32, T, c->top_k), &probs, 1,
                         (double)T * (double)E * (double)c->top_k, 0,
                         (double)T * (double)E * 4 + (double)T * (double)c->top_k * 4);
  int idx = graph_reshape(g, sel, GRAPH_SHAPE(GDT_S32, T * c->top_k));
  graph_shape disp = GRAPH_SHAPE(t->compute, E * C, H);
  int xe = graph_gather(g, xt, idx, &disp);
  xe = graph_reshape(g, xe, GRAPH_SHAPE(t->compute, E, C, H));
  graph_dims b0 = graph_dims_of(1, 0), c2 = graph_dims_of(1, 2), c1 = graph_dims_of(1, 1);
  snprintf(n, sizeof n, "%s.experts.up.w", p);
  int wu = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, E, H, F), WL_W_LINEAR);
  int up = graph_dot(g, xe, wu, b0, b0, c2, c1, t->compute);
  int h;
  if (c->ffn == FFN_SWIGLU || c->ffn == FFN_GEGLU) {
    snprintf(n, sizeof n, "%s.experts.gate.w", p);
    int wg = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, E, H, F), WL_W_LINEAR);
    int gate = graph_dot(g, xe, wg, b0, b0, c2, c1, t->compute);
    gate = graph_unary(g, c->ffn == FFN_SWIGLU ? GOP_SILU : GOP_GELU, gate);
    h = graph_binary(g, GOP_MUL, gate, up);
  } else {
    h = graph_unary(g, c->ffn == FFN_RELU ? GOP_RELU : GOP_GELU, up);
  }
  snprintf(n, sizeof n, "%s.experts.down.w", p);
  int wd = wl_weight(g, t, n, GRAPH_SHAPE(t->compute, E, F, H), WL_W_LINEAR);
  int y = graph_dot(g, h, wd, b0, b0, c2, c1, t->compute);
  y = graph_reshape(g, y, GRAPH_SHAPE(t->compute, E * C, H));
  /* weight each routed row by its gate probability, then combine */
  graph_shape ws = GRAPH_SHAPE(GDT_F32, E * C);
  int gw = graph_convert(g, graph_gather(g, probs, idx, &ws), t->compute);
  y = graph_binary(g, GOP_MUL, y,
                   graph_broadcast(g, gw, GRAPH_SHAPE(t->compute, E * C, H), graph_dims_of(1, 0)));
  int zero = graph_broadcast(g, graph_constant(g, (graph_shape){t->compute, 0, {0}}),
                             GRAPH_SHAPE(t->compute, T, H), graph_dims_of(0));
  int out = graph_scatter(g, zero, idx, y);
  return graph_reshape(g, out, sx);
}

static int block(graph *g, const wl_train *t, const tf_cfg *c, int x, int layer) {
  char p[64], n[96];
  snprintf(p, sizeof p, "l%d", layer);
  graph_set_layer(g, layer);
  graph_set_scope(g, p);
  bool moe = c->experts > 0;
  if (c->kind == 1) { /* BERT: post-norm */
    snprintf(n, sizeof n, "%s.ln1", p);
    x = norm(g, t, c, graph_binary(g, GOP_ADD, x, attention(g, t, c, x, p)), n);
    snprintf(n, sizeof n, "%s.ln2", p);
    int f = moe ? moe_ffn(g, t, c, x, p) : dense_ffn(g, t, c, x, p);
    return norm(g, t, c, graph_binary(g, GOP_ADD, x, f), n);
  }
  snprintf(n, sizeof n, "%s.ln1", p);
  int h = norm(g, t, c, x, n);
  if (c->parallel) { /* PaLM: x + attn(ln(x)) + mlp(ln(x)) */
    int a = attention(g, t, c, h, p);
    int f = moe ? moe_ffn(g, t, c, h, p) : dense_ffn(g, t, c, h, p);
    return graph_binary(g, GOP_ADD, x, graph_binary(g, GOP_ADD, a, f));
  }
  x = graph_binary(g, GOP_ADD, x, attention(g, t, c, h, p));
  snprintf(n, sizeof n, "%s.ln2", p);
  h = norm(g, t, c, x, n);
  return graph_binary(g, GOP_ADD, x, moe ? moe_ffn(g, t, c, h, p) : dense_ffn(g, t, c, h, p));
}

int wl_transformer(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  tf_cfg c;
  if (!read_cfg(j, spec, t, &c)) return -1;
  int64_t B = t->global_batch, S = c.seq, H = c.hidden;
  graph_set_scope(g, "embed");
  int tokens = wl_input(g, "tokens", GRAPH_SHAPE(GDT_S32, B, S));
  int labels = wl_input(g, "labels", GRAPH_SHAPE(GDT_S32, B, S));
  int table = wl_weight(g, t, "embed.tokens", GRAPH_SHAPE(t->compute, c.vocab, H), WL_W_OTHER);
  int x = graph_gather(g, table, tokens, NULL);
  graph_shape sx = GRAPH_SHAPE(t->compute, B, S, H);
  if (c.pos == POS_LEARNED) {
    int pos = wl_weight(g, t, "embed.positions", GRAPH_SHAPE(t->compute, c.max_positions, H),
                        WL_W_OTHER);
    int64_t z[2] = {0, 0}, lim[2] = {S, H};
    int pe = graph_slice(g, pos, z, lim, NULL);
    x = graph_binary(g, GOP_ADD, x, graph_broadcast(g, pe, sx, graph_dims_of(2, 1, 2)));
  }
  if (c.type_vocab > 0) {
    int types = wl_input(g, "token_types", GRAPH_SHAPE(GDT_S32, B, S));
    int tt = wl_weight(g, t, "embed.types", GRAPH_SHAPE(t->compute, c.type_vocab, H), WL_W_OTHER);
    x = graph_binary(g, GOP_ADD, x, graph_gather(g, tt, types, NULL));
  }
  if (c.kind == 1) x = norm(g, t, &c, x, "embed.ln");
  for (int l = 0; l < c.layers; l++) x = block(g, t, &c, x, l);
  graph_set_layer(g, -1);
  graph_set_scope(g, "head");
  if (c.kind == 1) { /* BERT MLM transform: dense + gelu + layernorm */
    x = graph_unary(g, GOP_GELU, wl_linear(g, t, x, "head.transform", "head", H, true));
    x = norm(g, t, &c, x, "head.ln");
  } else {
    x = norm(g, t, &c, x, "final_norm");
  }
  int logits;
  if (c.tied) { /* x . E^T: contract H with the table's second dim */
    logits = graph_dot(g, x, table, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, 2),
                       graph_dims_of(1, 1), t->compute);
    if (c.kind == 1)
      logits = wl_add_bias(
          g, logits, wl_weight(g, t, "head.bias", GRAPH_SHAPE(t->compute, c.vocab), WL_W_OTHER));
  } else {
    logits = wl_linear(g, t, x, "head.lm", "lm_head", c.vocab, false);
  }
  int loss = wl_cross_entropy(g, logits, labels);
  graph_set_scope(g, "");

  info->per_step = (double)B * (double)S;
  info->unit = "tokens";
  info->tf = (wl_tf_dims){.layers = c.layers, .hidden = H, .heads = c.heads,
                          .kv_heads = c.kv_heads, .head_dim = c.head_dim,
                          .ffn_hidden = c.ffn_hidden, .vocab = c.vocab, .seq = S,
                          .experts = c.experts, .top_k = c.top_k,
                          .gated = c.ffn == FFN_SWIGLU || c.ffn == FFN_GEGLU, .tied = c.tied,
                          .parallel_block = c.parallel, .encoder = c.kind == 1,
                          .dropout = c.dropout};
  if (c.experts > 0) {
    /* parameters a token passes through: all but the unchosen experts */
    int64_t per_expert = (c.ffn == FFN_SWIGLU || c.ffn == FFN_GEGLU ? 3 : 2) * H * c.ffn_hidden;
    int64_t all = graph_param_elements(g, GRAPH_WEIGHT);
    info->active_params = all - c.layers * (c.experts - c.top_k) * per_expert;
  }
  return loss;
}
