/*
** memory.c -- see memory.h; every formula and its source is in docs/memory.md.
**
** Notation (Korthikanti et al. 2022, arXiv:2205.05198, §4): s sequence,
** b micro-batch, h hidden, a heads, t tensor-parallel size, p pipeline
** stages, v virtual stages, m micro-batches per step, L layers.
*/
#include "memory.h"

#include "../base/strutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


mem_opts mem_opts_from_train(const wl_train *t, double trainable_fraction, double capacity_bytes) {
  mem_opts o = {0};
  if (t->method != WL_FULL && trainable_fraction > 0 && trainable_fraction < 1)
    o.trainable_fraction = trainable_fraction;
  if (t->method == WL_QLORA) o.frozen_weight_bytes = 4.127 / 8;
  o.master_fp32 = t->master_fp32;
  o.fp32_grads = t->master_fp32;
  o.optimizer_states = t->optimizer == WL_SGD ? 0 : t->optimizer == WL_MOMENTUM ? 1 : 2;
  o.capacity_bytes = capacity_bytes;
  return o;
}

/* Bytes of a weight or a saved activation element. 8-bit compute (fp8)
** keeps 16-bit weights and activations here: conservative (docs). */
static double elem_bytes(graph_dtype dt) {
  int bits = graph_dtype_bits(dt);
  return bits >= 32 ? bits / 8.0 : 2.0;
}

/* Gradient bytes: the weight's, or fp32 when the framework keeps fp32 grads. */
static double grad_bytes(graph_dtype dt, const mem_opts *o) {
  double w = elem_bytes(dt);
  return o->fp32_grads && w < 4 ? 4 : w;
}

/* ZeRO, Rajbhandari et al. 2020 (arXiv:1910.02054) Fig. 1: stage 1 shards
** the optimizer states, 2 also the gradients, 3 also the weights, over the
** data-parallel group. Mixed precision (Micikevicius et al. 2018; Megatron):
** 2 B weights, 2 or 4 B gradients, fp32 master 4 B + 4 B per Adam state. */
void mem_model_state(double params, int64_t dp, int zero, graph_dtype precision,
                     const mem_opts *o, mem_bytes *out) {
  double w = elem_bytes(precision);
  bool master = o->master_fp32 && w < 4;
  double g = grad_bytes(precision, o);
  double state = master ? 4 : w;
  double opt = (master ? 4 : 0) + o->optimizer_states * state;
  double frac = o->trainable_fraction > 0 ? o->trainable_fraction : 1;
  double n = dp > 1 ? (double)dp : 1;
  memset(out, 0, sizeof *out);
  /* frozen weights (LoRA's base) in their own format; the trained ones in w */
  double fw = o->frozen_weight_bytes > 0 ? o->frozen_weight_bytes : w;
  out->weights = params * (frac * w + (1 - frac) * fw) / (zero >= 3 ? n : 1);
  out->gradients = params * frac * g / (zero >= 2 ? n : 1);
  out->optimizer = params * frac * opt / (zero >= 1 ? n : 1);
}

/* The resolved shape of one chip's shard. */
typedef struct {
  double h, s, b, t, r;     /* r: share of the sequence on a chip (1/t with SP) */
  double qc, kvc, fc, ac;   /* per-chip query width, K/V width, FFN width, heads */
  double experts, topk;     /* experts 0 for a dense model */
  double e, mask;           /* activation and weight bytes; dropout mask bytes */
  double vc;                /* vocabulary rows per chip */
  double norms;             /* layer norms per layer (1 with a parallel block) */
} shard;

/* Parameters of one layer's attention and norms on one chip (the MLP is
** mlp_params). Linear layers carry biases (GPT convention: 12h^2 + 13h for
** a GPT layer; bias-free models differ by < 0.01 %); norms gain + bias. Column-parallel matrices and their biases
** split over t, row-parallel biases and norms replicated (Shoeybi et al.
** 2019). K/V heads fewer than t are replicated. */
static double attn_params(const shard *c) {
  double h = c->h;
  return 2 * h * c->qc + 2 * h * c->kvc + c->qc + 2 * c->kvc + h + c->norms * 2 * h;
}

static double mlp_params(const shard *c, bool gated) {
  double h = c->h;
  return gated ? 3 * h * c->fc + 2 * c->fc + h : 2 * h * c->fc + c->fc + h;
}

/* Saved activation bytes per token of one layer (docs/memory.md, "One
** layer"): replicated tensors (x r), tensor-parallel shards, the s x s
** attention tensors. For GPT (q = kv = h, f = 4h, e = 2) this is
** 10h + 24h/t + 5as/t bytes, Korthikanti eq. (2). */
typedef struct {
  double rep, sharded, scores;
} tok_bytes;

static tok_bytes layer_tokens(const shard *c, const wl_tf_dims *d, bool flash) {
  tok_bytes k;
  double h = c->h, e = c->e;
  /* norm inputs, QKV input, FFN input: the parallel block shares one norm */
  double rep_elems = d->parallel_block ? 2 * h : 4 * h;
  k.rep = e * rep_elems + c->mask * 2 * h;
  if (c->experts > 0) k.rep += 4 * c->experts; /* fp32 router probabilities */
  double mlp = (d->gated ? 3 : 2) * c->fc * (c->experts > 0 ? c->topk : 1);
  k.sharded = e * (2 * c->qc + 2 * c->kvc + mlp);
  if (flash)
    k.scores = 4 * c->ac; /* fp32 log-sum-exp per head and row */
  else
    k.scores = c->ac * c->s * (e + c->mask + (c->mask > 0 ? e : 0));
  return k;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int check(const wl_tf_dims *d, const plan *p, const mem_opts *o, char *err, size_t errn) {
  if (!d || !p || !o) return str_errf(err, errn, "memory: missing model, plan or options");
  if (d->layers <= 0 || d->hidden <= 0 || d->heads <= 0 || d->ffn_hidden <= 0)
    return str_errf(err, errn,
                "memory: transformer dimensions must be positive (layers %lld, hidden %lld, "
                "heads %lld, ffn_hidden %lld)",
                (long long)d->layers, (long long)d->hidden, (long long)d->heads,
                (long long)d->ffn_hidden);
  if (d->kv_heads < 0 || d->head_dim < 0 || d->vocab < 0 || d->experts < 0 || d->top_k < 0)
    return str_errf(err, errn, "memory: negative transformer dimension");
  if (d->head_dim == 0 && d->hidden % d->heads != 0)
    return str_errf(err, errn, "memory: hidden %lld is not a multiple of heads %lld (give head_dim)",
                (long long)d->hidden, (long long)d->heads);
  int64_t kvh = d->kv_heads ? d->kv_heads : d->heads;
  if (d->heads % kvh != 0)
    return str_errf(err, errn, "memory: heads %lld not a multiple of kv_heads %lld",
                (long long)d->heads, (long long)kvh);
  int64_t seq = p->seq > 0 ? p->seq : d->seq;
  if (seq <= 0) return str_errf(err, errn, "memory: sequence length must be positive");
  if (p->dp < 1 || p->tp < 1 || p->pp < 1 || p->mbs < 1)
    return str_errf(err, errn, "memory: dp, tp, pp and mbs must be >= 1 (dp %lld, tp %lld, pp %lld, "
                "mbs %lld)", (long long)p->dp, (long long)p->tp, (long long)p->pp,
                (long long)p->mbs);
  int64_t ep = p->ep > 0 ? p->ep : 1;
  int64_t cp = p->cp > 0 ? p->cp : 1;
  if (p->chips > 0 && p->chips != p->dp * p->tp * p->pp * cp)
    return str_errf(err, errn, "memory: dp x tp x pp x cp = %lld x %lld x %lld x %lld = %lld, not the %lld chips",
                (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)cp,
                (long long)(p->dp * p->tp * p->pp * cp), (long long)p->chips);
  if ((p->dp * cp) % ep != 0)
    return str_errf(err, errn, "memory: ep %lld does not divide dp x cp %lld (experts shard over dp x cp)",
                (long long)ep, (long long)(p->dp * cp));
  if (ep > 1 && (d->experts <= 1 || d->experts % ep != 0))
    return str_errf(err, errn, "memory: ep %lld does not divide the %lld experts", (long long)ep,
                (long long)d->experts);
  if (d->heads % p->tp != 0)
    return str_errf(err, errn, "memory: tp %lld does not divide the %lld heads", (long long)p->tp,
                (long long)d->heads);
  if (kvh % p->tp != 0 && p->tp % kvh != 0)
    return str_errf(err, errn, "memory: tp %lld and kv_heads %lld: neither divides the other",
                (long long)p->tp, (long long)kvh);
  if (d->ffn_hidden % p->tp != 0)
    return str_errf(err, errn, "memory: tp %lld does not divide ffn_hidden %lld", (long long)p->tp,
                (long long)d->ffn_hidden);
  if (p->sp && seq % p->tp != 0)
    return str_errf(err, errn, "memory: sequence parallelism: tp %lld does not divide seq %lld",
                (long long)p->tp, (long long)seq);
  if (p->pp > d->layers)
    return str_errf(err, errn, "memory: pp %lld is more than the %lld layers", (long long)p->pp,
                (long long)d->layers);
  if (p->zero < 0 || p->zero > 3)
    return str_errf(err, errn, "memory: ZeRO stage %d (0..3)", p->zero);
  if (p->gbs < p->dp * p->mbs || p->gbs % (p->dp * p->mbs) != 0)
    return str_errf(err, errn, "memory: dp x mbs = %lld x %lld does not divide the global batch %lld",
                (long long)p->dp, (long long)p->mbs, (long long)p->gbs);
  if (p->schedule == PLAN_INTERLEAVED && p->vp < 1)
    return str_errf(err, errn, "memory: interleaved schedule needs vp >= 1");
  if (!graph_dtype_is_float(p->precision))
    return str_errf(err, errn, "memory: precision %s is not a floating-point type",
                graph_dtype_name(p->precision));
  if (o->optimizer_states < 0 || o->trainable_fraction < 0 || o->trainable_fraction > 1 ||
      o->capacity_bytes < 0)
    return str_errf(err, errn, "memory: bad options (optimizer_states %d, trainable_fraction %g, "
                "capacity %g)", o->optimizer_states, o->trainable_fraction, o->capacity_bytes);
  return 0;
}

/* One stage's parts: first (0) or last (pp - 1). */
static void stage_mem(const wl_tf_dims *d, const plan *p, const mem_opts *o, const shard *c,
                      int stage, mem_bytes *out) {
  int64_t pp = p->pp, m = p->gbs / (p->dp * p->mbs);
  int64_t ep = p->ep > 0 ? p->ep : 1;
  bool inter = p->schedule == PLAN_INTERLEAVED && pp > 1;
  int64_t v = inter ? p->vp : 1;
  bool first = stage == 0, last = stage == pp - 1;

  /* layers held: v chunks of ceil(L / (p v)) (uneven splits: the larger) */
  int64_t chunk = ceil_div(d->layers, pp * v);
  double layers = (double)(chunk * v);

  /* micro-batch layer sets in flight (Narayanan et al. 2021 §2.2; Megatron
  ** schedules.py warm-up counts): GPipe all m; 1F1B p - stage; interleaved
  ** 2(p - 1 - stage) + (v - 1)p + 1 chunks. */
  double lmb, mbs_in_flight;
  if (p->schedule == PLAN_GPIPE) {
    mbs_in_flight = (double)m;
    lmb = layers * (double)m;
  } else if (inter) {
    int64_t chunks = 2 * (pp - 1 - stage) + (v - 1) * pp + 1;
    if (chunks > m * v) chunks = m * v;
    lmb = (double)(chunk * chunks);
    mbs_in_flight = (double)(pp - stage < m ? pp - stage : m);
  } else {
    mbs_in_flight = (double)(pp - stage < m ? pp - stage : m);
    lmb = layers * mbs_in_flight;
  }

  /* ---- model state ---- */
  double layer_dense = attn_params(c), layer_expert = 0;
  double mlp = mlp_params(c, d->gated);
  if (c->experts > 0) {
    layer_dense += c->h * c->experts; /* router, replicated */
    layer_expert = c->experts / (double)ep * mlp;
  } else {
    layer_dense += mlp;
  }
  double dense = layer_dense * layers, expert = layer_expert * layers;
  if (!o->layers_only) {
    double emb = c->vc * c->h;
    if (first) dense += emb;
    if (last) dense += 2 * c->h + (pp > 1 || !d->tied ? emb : 0);
  }
  mem_bytes st;
  mem_model_state(dense, p->dp, p->zero, p->precision, o, out);
  mem_model_state(expert, p->dp / ep, p->zero, p->precision, o, &st);
  out->weights += st.weights;
  out->gradients += st.gradients;
  out->optimizer += st.optimizer;
  out->params = dense + expert;

  /* ---- activations ---- */
  tok_bytes k = layer_tokens(c, d, o->flash_attention);
  double sb = c->s * c->b;
  double none = sb * (c->r * k.rep + k.sharded + k.scores);
  double act;
  switch (p->recompute) {
  case PLAN_RECOMPUTE_SELECTIVE: act = sb * (c->r * k.rep + k.sharded); break;
  case PLAN_RECOMPUTE_FULL: act = sb * c->r * c->e * c->h; break; /* the layer input */
  default: act = none; break;
  }
  out->act_layer = act;
  out->layer_mbs = lmb;
  out->activations = act * lmb;
  if (!o->layers_only) {
    /* Korthikanti §4.3: embedding dropout mask sbh/t-with-SP per micro-batch
    ** on the first stage; final norm and LM head inputs (2 + 2) sbh r and the
    ** fp32 logits 4 s b V/t for the loss on the last. */
    if (first) out->activations += mbs_in_flight * sb * c->r * c->mask * c->h;
    double out_mbs = p->schedule == PLAN_GPIPE ? (double)m : 1;
    if (last) out->activations += out_mbs * sb * (2 * c->r * c->e * c->h + 4 * c->vc);
  }

  /* ---- temporary and collective buffers ---- */
  double big = sb * c->e * c->h; /* a full layer input or output */
  double mlp_mid = sb * c->e * c->fc * (c->experts > 0 ? c->topk : 1);
  if (mlp_mid > big) big = mlp_mid;
  if (!o->flash_attention && c->ac * c->s * sb * c->e > big) big = c->ac * c->s * sb * c->e;
  if (!o->layers_only && last && 4 * sb * c->vc > big) big = 4 * sb * c->vc;
  double remat = 0;
  if (p->recompute == PLAN_RECOMPUTE_FULL) remat = none;
  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE) remat = sb * k.scores;
  double coll = 0;
  if (p->sp && p->tp > 1) coll += sb * c->e * c->h;          /* all-gathered input */
  if (pp > 1) coll += 2 * sb * c->r * c->e * c->h;           /* p2p send + receive */
  double layer_w = layer_dense + layer_expert; /* ZeRO-3 gathers, ZeRO-2 reduces, per layer */
  if (p->dp > 1 && p->zero >= 3) coll += 2 * layer_w * elem_bytes(p->precision);
  if (p->dp > 1 && p->zero >= 2) coll += layer_w * grad_bytes(p->precision, o);
  out->temporary = big + remat + coll;
  out->peak = out->weights + out->gradients + out->optimizer + out->activations + out->temporary;
  out->stage = stage;
}

int mem_transformer(const wl_tf_dims *d, const plan *p, const mem_opts *o, mem_bytes *out,
                    char *err, size_t errn) {
  if (check(d, p, o, err, errn) != 0) return -1;
  if (!out) return str_errf(err, errn, "memory: no output");
  shard c;
  int64_t t = p->tp;
  int64_t hd = d->head_dim ? d->head_dim : d->hidden / d->heads;
  int64_t kvh = d->kv_heads ? d->kv_heads : d->heads;
  c.h = (double)d->hidden;
  c.s = (double)(p->seq > 0 ? p->seq : d->seq);
  c.b = (double)p->mbs;
  c.t = (double)t;
  c.r = p->sp && t > 1 ? 1.0 / (double)t : 1.0;
  c.qc = (double)(d->heads / t * hd);
  c.kvc = (double)((kvh >= t ? kvh / t : 1) * hd);
  c.fc = (double)(d->ffn_hidden / t);
  c.ac = (double)(d->heads / t);
  c.experts = d->experts > 1 ? (double)d->experts : 0;
  c.topk = d->top_k > 0 ? (double)d->top_k : 1;
  c.e = elem_bytes(p->precision);
  c.mask = o->no_dropout ? 0 : 1;
  c.vc = (double)ceil_div(d->vocab, t);
  c.norms = d->parallel_block ? 1 : 2;

  mem_bytes a, z;
  stage_mem(d, p, o, &c, 0, &a);
  if (p->pp > 1) {
    stage_mem(d, p, o, &c, (int)(p->pp - 1), &z);
    if (z.peak > a.peak) a = z;
  }
  a.capacity = o->capacity_bytes;
  a.fits = o->capacity_bytes <= 0 || a.peak <= o->capacity_bytes;
  *out = a;
  return 0;
}

/* ---- fixes ---- */

typedef struct {
  const wl_tf_dims *d;
  const mem_opts *o;
  double base;
  mem_fix *out;
  int n;
  mem_plan_ok ok;
  void *ctx;
} fixer;

/* Evaluates a candidate plan; false when it is not a valid plan (skipped). */
static bool try_plan(const fixer *f, const plan *q, const mem_opts *o, mem_bytes *r) {
  char e[8];
  if (f->ok && !f->ok(f->ctx, q)) return false;
  return mem_transformer(f->d, q, o, r, e, sizeof e) == 0;
}

static void add_fix(fixer *f, const plan *q, const mem_opts *o, const mem_bytes *r,
                    const char *what) {
  if (f->n >= MEM_MAX_FIXES || r->peak >= f->base) return;
  mem_fix *x = &f->out[f->n++];
  snprintf(x->what, sizeof x->what, "%s", what);
  x->peak = r->peak;
  x->saves_bytes = f->base - r->peak;
  x->fits = r->fits;
  x->p = *q;
  x->o = *o;
}

/* Scales one plan dimension by k = 2, 4, ...: keeps the chip count by
** shrinking dp when dp allows, else grows it. Takes the first k that fits,
** or the largest valid one. */
static void grow_dim(fixer *f, const plan *p, bool tp) {
  plan best;
  mem_bytes bestr;
  bool have = false;
  int64_t cur = tp ? p->tp : p->pp;
  for (int64_t k = 2; k <= 4096; k *= 2) {
    plan q = *p;
    if (tp) q.tp = p->tp * k; else q.pp = p->pp * k;
    if (p->dp % k == 0 && (p->dp / k) % (p->ep > 0 ? p->ep : 1) == 0) q.dp = p->dp / k;
    q.chips = q.dp * q.tp * q.pp * (q.cp > 0 ? q.cp : 1);
    if (tp && q.tp > 1 && (q.seq > 0 ? q.seq : f->d->seq) % q.tp != 0) q.sp = false;
    mem_bytes r;
    if (!try_plan(f, &q, f->o, &r)) {
      if (tp ? q.tp > f->d->heads : q.pp > f->d->layers) break;
      continue;
    }
    best = q;
    bestr = r;
    have = true;
    if (r.fits) break;
  }
  if (!have) return;
  char what[96];
  int64_t nv = tp ? best.tp : best.pp;
  snprintf(what, sizeof what, "%s %lld -> %lld (dp %lld -> %lld%s)", tp ? "tp" : "pp",
           (long long)cur, (long long)nv, (long long)p->dp, (long long)best.dp,
           best.chips != p->dp * p->tp * p->pp ? ", more chips" : "");
  add_fix(f, &best, f->o, &bestr, what);
}

int mem_fixes(const wl_tf_dims *d, const plan *p, const mem_opts *o, mem_plan_ok ok, void *ctx,
              mem_fix out[MEM_MAX_FIXES], char *err, size_t errn) {
  mem_bytes base;
  if (mem_transformer(d, p, o, &base, err, errn) != 0) return -1;
  if (base.fits) return 0;
  fixer f = {d, o, base.peak, out, 0, ok, ctx};
  char what[96];
  mem_bytes r;
  int64_t m = p->gbs / (p->dp * p->mbs);

  /* 1. smaller micro-batch: the largest divisor of mbs that fits, else 1 */
  if (p->mbs > 1) {
    plan best = *p;
    mem_bytes bestr = base;
    for (int64_t b = p->mbs - 1; b >= 1; b--) {
      if (p->mbs % b != 0) continue;
      plan q = *p;
      q.mbs = b;
      if (!try_plan(&f, &q, o, &r)) continue;
      best = q;
      bestr = r;
      if (r.fits) break;
    }
    snprintf(what, sizeof what, "micro-batch %lld -> %lld (accumulation %lld -> %lld)",
             (long long)p->mbs, (long long)best.mbs, (long long)m,
             (long long)(p->gbs / (p->dp * best.mbs)));
    add_fix(&f, &best, o, &bestr, what);
  }
  /* 2, 3. recompute */
  if (p->recompute == PLAN_RECOMPUTE_NONE) {
    plan q = *p;
    q.recompute = PLAN_RECOMPUTE_SELECTIVE;
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, "selective recompute (core attention)");
  }
  if (p->recompute != PLAN_RECOMPUTE_FULL) {
    plan q = *p;
    q.recompute = PLAN_RECOMPUTE_FULL;
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, "full recompute");
  }
  /* 4. ZeRO: the lowest higher stage that fits, else 3 */
  if (p->dp > 1 && p->zero < 3) {
    plan q = *p;
    for (int z = p->zero + 1; z <= 3; z++) {
      q.zero = z;
      if (try_plan(&f, &q, o, &r) && r.fits) break;
    }
    if (try_plan(&f, &q, o, &r)) {
      snprintf(what, sizeof what, "ZeRO stage %d -> %d", p->zero, q.zero);
      add_fix(&f, &q, o, &r, what);
    }
  }
  /* 5. sequence parallelism */
  if (p->tp > 1 && !p->sp) {
    plan q = *p;
    q.sp = true;
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, "sequence parallelism");
  }
  /* 6, 7. more TP, more PP */
  grow_dim(&f, p, true);
  grow_dim(&f, p, false);
  /* 8. bf16 mixed precision instead of fp32 */
  if (elem_bytes(p->precision) >= 4) {
    plan q = *p;
    mem_opts oo = *o;
    q.precision = GDT_BF16;
    oo.master_fp32 = true; /* fp32 master + Adam, grads as the options say */
    mem_bytes rr;
    if (mem_transformer(d, &q, &oo, &rr, NULL, 0) == 0) {
      fixer g = f;
      g.o = &oo;
      add_fix(&g, &q, &oo, &rr, "bf16 with fp32 master weights instead of fp32");
      f.n = g.n;
    }
  }
  return f.n;
}

void mem_setup(const model *m, const hw_model *hw, const plan *p, mem_opts *o, plan *mp) {
  *o = mem_opts_from_train(&m->train, (double)m->trainable_params / (double)m->params,
                           (double)hw->chip.hbm_bytes);
  o->no_dropout = m->info.tf.dropout <= 0;
  o->flash_attention = p->attention == PLAN_ATTN_FLASH;
  *mp = *p;
}

double mem_checkpoint_bytes(const model *m) { return (double)m->trainable_params * (2 + 4 + 4 + 4); }
