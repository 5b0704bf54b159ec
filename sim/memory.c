/*
** memory.c -- see memory.h; every formula and its source is in docs/memory.md.
**
** Notation (Korthikanti et al. 2022, arXiv:2205.05198, §4): s sequence,
** b micro-batch, h hidden, a heads, t tensor-parallel size, p pipeline
** stages, v virtual stages, m micro-batches per step, L layers; with
** context parallelism a chip holds s / cp tokens of each sequence.
*/
#include "memory.h"

#include "../base/strutil.h"
#include "framework.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Bytes of a weight or a saved activation element in the compute dtype
** (16 or 32 bits; a GEMM recipe's 8- and 4-bit copies are counted apart). */
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
  /* one fp32 copy: it is the weights, and the optimizer holds no master */
  bool one_copy = master && o->fp32_weights_only;
  double opt = (master && !one_copy ? 4 : 0) + o->optimizer_states * state;
  if (one_copy) w = 4;
  double frac = o->trainable_fraction > 0 ? o->trainable_fraction : 1;
  double n = dp > 1 ? (double)dp : 1;
  memset(out, 0, sizeof *out);
  /* frozen weights (LoRA's base) in their own format; the trained ones in w */
  double fw = o->frozen_weight_bytes > 0 ? o->frozen_weight_bytes : w;
  out->weights = params * (frac * w + (1 - frac) * fw) / (zero >= 3 ? n : 1);
  out->gradients = params * frac * g / (zero >= 2 ? n : 1);
  out->optimizer = params * frac * opt / (zero >= 1 ? n : 1);
}

/* ---- low-precision GEMM recipes (plan.gemm) ----
** Transformer Engine keeps the 16-bit weight and quantizes it before each
** GEMM; Megatron caches the quantized weight across micro-batches (TE's
** is_first_microbatch workspace). A Linear layer needs each weight rowwise
** (forward) and columnwise (dgrad), and saves its input quantized for the
** wgrad GEMM: "2 MB (weight) + 1 MB (weight in FP8) + 1 MB (input in FP8
** saved for backward)" (TE docs, Low precision training, Performance
** considerations, Memory usage). Hopper reads fp8 only rowwise, so the
** columnwise copy is a transpose; Blackwell reads both layouts from one
** copy (same page, Architecture differences). */

/* TE DelayedScaling: amax_history_len = 1024 by default (TE docs, Common
** API); 5 scaled tensors per GEMM, input, weight and output forward and
** grad_output and grad_input backward (TE pytorch/module/base.py,
** set_meta_tensor), each with an fp32 amax history, scale and scale_inv. */
#define TE_AMAX_HISTORY 1024.0
#define TE_TENSORS_PER_GEMM 5.0
/* MXFP8: e4m3 data with one e8m0 (1-byte) scale per 32 elements (TE docs,
** MXFP8); NVFP4: e2m1 (half a byte) with one e4m3 scale per 16 elements
** and one fp32 scale per tensor (TE docs, NVFP4). */
#define MXFP8_BLOCK 32.0
#define NVFP4_BLOCK 16.0

/* Bytes per element of one quantized copy (data + block scales). */
static double quant_bytes(plan_gemm g) {
  switch (g) {
  case PLAN_GEMM_FP8:
  case PLAN_GEMM_FP8_CS: return 1;
  case PLAN_GEMM_MXFP8: return 1 + 1 / MXFP8_BLOCK;
  case PLAN_GEMM_NVFP4: return 0.5 + 1 / NVFP4_BLOCK;
  default: return 0;
  }
}

/* Bytes a linear layer saves per input element for its backward: the
** quantized input under a Transformer Engine recipe, else the activation.
** INT8 (AQT on TPUs) quantizes inside the compiled step and saves the
** 16-bit input: counted as the compute dtype. */
static double saved_linear_bytes(plan_gemm g, double e) {
  double q = quant_bytes(g);
  return q > 0 ? q : e;
}

/* Persistent quantized weight bytes per linear-layer weight: rowwise and
** columnwise copies, one when the GEMM reads both layouts from one copy
** (fp8 on Blackwell); MXFP8 and NVFP4 scale along different axes for the
** two usages, so they keep two (TE docs, MXFP8 and NVFP4, Handling
** transposes). INT8: none kept (AQT quantizes in the step). */
static double weight_copy_bytes(plan_gemm g, bool any_layout) {
  double q = quant_bytes(g);
  bool tensor_scaled = g == PLAN_GEMM_FP8 || g == PLAN_GEMM_FP8_CS;
  return q * (tensor_scaled && any_layout ? 1 : 2);
}

/* Bytes a linear weight does not keep in 16 bits: all of them when its
** copies are the weights (mem_opts.lowp_params), else none. */
static double lowp_drop_bytes(const plan *p, const mem_opts *o) {
  return o->lowp_params ? elem_bytes(p->precision) : 0;
}

/* Scaling state per GEMM: delayed scaling's amax histories; the other
** recipes derive scales from the tensor itself (NVFP4's per-tensor fp32
** scales are 8 bytes a weight, left out). */
static double gemm_meta_bytes(plan_gemm g) {
  return g == PLAN_GEMM_FP8 ? TE_TENSORS_PER_GEMM * (TE_AMAX_HISTORY + 2) * 4 : 0;
}

/* ---- one chip's shard ---- */

/* The resolved shape of one chip's shard. */
typedef struct {
  double h, s, b, t, r;     /* s: this chip's tokens of a sequence (seq / cp); r: 1/t with SP */
  double s_all;             /* the whole sequence: the keys each query attends */
  double qc, kvc, fc, ac;   /* per-chip query width, K/V width, FFN width, heads */
  double kvw;               /* K and V elements per token of one layer on a chip */
  double sfc;               /* a MoE layer's shared experts' width on this chip */
  /* multi-head latent attention (0 when not MLA): the replicated latents'
  ** ranks, the rotary key part, a head's query/key and value widths */
  double q_lora, kv_lora, rope, qk_head, v_head;
  /* DeepSeek sparse attention's lightning indexer (0 without): its
  ** matrices (wq_b from the query latent, wk, weights_proj; replicated, as
  ** the latents' down projections) and its key's LayerNorm */
  double dsa_w, dsa_norm;
  double experts, topk, cf; /* experts 0 for a dense model; cf: capacity factor */
  double efc;               /* a routed expert's FFN width on this chip: moe_ffn / etp */
  double routed;            /* expert token-copies this chip computes per token of its tp group */
  double local_experts;     /* experts / ep */
  double expert_layer;      /* one MoE layer's routed-expert parameters on this chip */
  double e, mask;           /* activation and weight bytes; dropout mask bytes */
  double lin;               /* bytes of a linear layer's saved input (the GEMM recipe's) */
  double vc;                /* vocabulary rows per chip */
  double vl;                /* of them, the logits' columns held at once: vc / the loss's tiles */
  /* hybrid models' Mamba-2 mixer on this chip (0 without): d_inner, the
  ** groups' B and C width (2 G N), heads, the conv kernel; latent MoE's width */
  double m_din, m_bc, m_nh, m_conv, latent;
  /* Gated DeltaNet mixers on this chip (0 without): key and value widths
  ** (heads x dim), value heads, conv taps; a gated attention's gate width */
  double g_kd, g_vd, g_nv, g_conv, qgate;
  double norms;             /* layer norms per layer (1 with a parallel block) */
  double window;            /* sliding-window span of local layers (0: none) */
} shard;

/* Parameters of one layer's attention and norms on one chip (the MLP is
** mlp_params). Linear layers carry biases (GPT convention: 12h^2 + 13h for
** a GPT layer; bias-free models differ by < 0.01 %); norms gain + bias.
** Column-parallel matrices and their biases split over t, row-parallel
** biases and norms replicated (Shoeybi et al. 2019). K/V heads fewer than t
** are replicated. */
static double attn_params(const shard *c) {
  double h = c->h;
  return 2 * h * c->qc + 2 * h * c->kvc + c->qc + 2 * c->kvc + h + c->norms * 2 * h + h * c->qgate;
}

/* A Gated DeltaNet mixer on one chip (Qwen3NextGatedDeltaNet, split over t
** by heads as Megatron-Core's GatedDeltaNet): in_proj_qkvz h x (2 kd + 2 vd)
** and in_proj_ba h x 2 nv, the conv's taps on q, k and v (no bias), A_log
** and dt_bias (a value a value head), the gated norm's dv gains, out_proj
** vd x h; no biases. Its linear weights, and its parameters; what it saves
** per token: in_proj's outputs, the conv's, the delta rule's output (the
** chunk states are recomputed in its backward) and out_proj's input. */
static double gdn_matrices(const shard *c) {
  return c->h * (2 * c->g_kd + 2 * c->g_vd + 2 * c->g_nv) + c->g_vd * c->h;
}

static double gdn_params(const shard *c) {
  double dv = c->g_nv > 0 ? c->g_vd / c->g_nv : 0;
  return gdn_matrices(c) + (2 * c->g_kd + c->g_vd) * c->g_conv + 2 * c->g_nv + dv;
}

static double gdn_tokens(const shard *c) {
  return c->e * (2 * c->g_kd + 2 * c->g_vd + 2 * c->g_nv) + c->e * (2 * c->g_kd + c->g_vd) +
         c->e * c->g_vd + c->lin * c->g_vd;
}

/* Multi-head latent attention (DeepSeek-V2 §2.1, as the transformer builder
** writes DeepSeek-V3's): the down projections q_a (h x q_lora) and kv_a
** (h x (kv_lora + rope)) with their RMSNorms replicated over t; q_b (or q),
** kv_b and o split by heads (Megatron-Core's MLA). Its matrices, and its
** parameters with the layer's two norms (no biases). */
static double mla_matrices(const shard *c) {
  double h = c->h, heads_q = c->ac * c->qk_head;
  double q = c->q_lora > 0 ? h * c->q_lora + c->q_lora * heads_q : h * heads_q;
  return q + h * (c->kv_lora + c->rope) + c->kv_lora * c->ac * (c->qk_head - c->rope + c->v_head) +
         c->ac * c->v_head * h + c->dsa_w;
}

static double mla_params(const shard *c) {
  return mla_matrices(c) + c->q_lora + c->kv_lora + c->norms * 2 * c->h + c->dsa_norm;
}

static double mlp_params(const shard *c, bool gated) {
  double h = c->h;
  return gated ? 3 * h * c->fc + 2 * c->fc + h : 2 * h * c->fc + c->fc + h;
}

/* What one layer of a kind (WL_LAYER_* bits) holds on one chip. */
typedef struct {
  double dense, expert;   /* parameters: attention, norms, dense MLP or router; routed experts */
  double linw;            /* of them, linear-layer weights (what a GEMM recipe copies) */
  double gemms;           /* linear GEMMs (the recipe's scaling state) */
  double act;             /* saved bytes of one micro-batch under the plan's recompute */
  double act_dev;         /* of them, what stays on the chip under activation offload
                          ** (MaxText's tensors named device; 0: all may go) */
  double act_none;        /* the same without recompute (what full recompute rematerializes) */
  double scores;          /* its attention-score tensors (what selective rematerializes) */
  double big;             /* its largest single tensor of one micro-batch */
} layer_mem;

/* Saved activation bytes per token of one layer (docs/memory.md, "One
** layer"): replicated tensors (x r), tensor-parallel shards, routed-expert
** tensors, the s x s attention tensors. For GPT (q = kv = h, f = 4h, e = 2)
** this is 10h + 24h/t + 5as/t bytes, Korthikanti eq. (2). */
typedef struct {
  double rep, sharded, routed, scores;
} tok_bytes;

/* Keys a query attends: the sequence, or a local layer's window. */
static double attn_keys(const shard *c, int kind) {
  return (kind & WL_LAYER_LOCAL) && c->window > 0 && c->window < c->s_all ? c->window : c->s_all;
}

static tok_bytes layer_tokens(const shard *c, const wl_tf_dims *d, bool flash, int kind) {
  tok_bytes k;
  double h = c->h, e = c->e, lin = c->lin;
  bool moe = (kind & WL_LAYER_MOE) && c->experts > 0;
  /* norm inputs (e); the QKV input and the FFN input (norm outputs, saved
  ** quantized by a linear layer; a MoE layer's router reads it in e); a
  ** parallel block shares one norm and one input */
  double ffn_in = moe ? e : lin;
  k.rep = d->parallel_block ? e * h + lin * h : 2 * e * h + lin * h + ffn_in * h;
  k.rep += c->mask * 2 * h; /* dropout masks after attention and the MLP */
  if (moe) k.rep += 4 * c->experts; /* fp32 router probabilities */
  /* Q, K, V in e; the output projection's input as a linear input */
  if (c->kv_lora > 0) {
    /* MLA: the latents' norm inputs (e) and the up projections' inputs
    ** (linear inputs), replicated; Q and K of qk_head and V of v_head a
    ** head; o's input */
    k.sharded = e * (c->q_lora + c->kv_lora + c->rope) + lin * (c->q_lora + c->kv_lora) +
                e * c->ac * (2 * c->qk_head + c->v_head) + lin * c->ac * c->v_head;
  } else {
    k.sharded = e * (c->qc + 2 * c->kvc + c->qgate) + lin * c->qc; /* the gate's input too */
  }
  /* MLP: its activation's input(s) in e, FC2's input as a linear input */
  if (!moe) k.sharded += (d->gated ? 2 : 1) * e * c->fc + lin * c->fc;
  /* a MoE layer's shared experts: a dense MLP of their width beside it */
  if (moe) k.sharded += (d->gated ? 2 : 1) * e * c->sfc + lin * c->sfc;
  /* routed experts: each token-copy's dispatched hidden (FC1's input), the
  ** activation's input(s) and FC2's input, at the expert's width here */
  k.routed = moe ? c->routed * (lin * h + (d->gated ? 2 : 1) * e * c->efc + lin * c->efc) : 0;
  double keys = attn_keys(c, kind);
  if (flash)
    k.scores = 4 * c->ac; /* fp32 log-sum-exp per head and row */
  else
    k.scores = c->ac * keys * (e + c->mask + (c->mask > 0 ? e : 0));
  return k;
}

/* An op-level policy (torchtitan's, or JAX's dots policy), on the layers it
** is written for: dense ones with multi-head (or grouped-query) attention;
** a MoE, MLA or hybrid layer keeps Korthikanti's selective count here (its
** matmuls are not the lists below; framework_selective_s times the dots
** policy on them by Megatron's count, torchtitan's by its share of the
** matmul calls). */
static bool op_selective_layer(const shard *c, int kind) {
  return !((kind & WL_LAYER_MOE) && c->experts > 0) && c->kv_lora <= 0 &&
         !(kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER | WL_LAYER_GDN));
}

static bool op_selective(const mem_opts *o, const shard *c, int kind) {
  return (o->op_selective || o->dots_selective) && op_selective_layer(c, kind);
}

/* Saved bytes per token of one dense layer under torchtitan's op-level
** selective checkpointing (torchtitan@9dec370 parallelize_llama.py:214-262,
** _save_list and _custom_policy): the block's input (the checkpoint's),
** the outputs of the odd-numbered aten.mm calls in forward order -- wq, wk,
** wv, wo, then w1, w3, w2 (models/llama/model.py:189, :253), so q, v, w1's
** and w2's -- and SDPA's output with its fp32 log-sum-exp; every other op
** is recomputed from them. A 2-matrix MLP (fc1, fc2) saves q, v and fc1. */
static double op_selective_tokens(const shard *c, const wl_tf_dims *d) {
  double mm[7] = {c->qc, c->kvc, c->kvc, c->h, c->fc, d->gated ? c->fc : c->h, c->h};
  int n = d->gated ? 7 : 6;
  double saved = c->r * c->h + c->qc; /* the layer input; SDPA's output */
  for (int i = 0; i < n; i += 2) saved += mm[i];
  return c->e * saved + 4 * c->ac;
}

/* Saved bytes per token of one dense layer under JAX's
** checkpoint_dots_with_no_batch_dims (MaxText remat_policy 'minimal',
** layers/models.py @ 76bd53b0f): the layer input (the scanned layer's
** argument) and, of the weight matmuls' outputs, those the backward reads
** -- q, k and v (RoPE and the attention core replayed from them), the
** MLP's first matmul or two (the activation's input) and, in a sequential
** block, the output projection's (the second norm reads its sum with the
** input). The attention core is a Pallas call, not a dot: replayed, none
** of it kept. The down projection's output, and a parallel block's output
** projection's, only feed the residual sum: not read, not kept. */
static double dots_selective_tokens(const shard *c, const wl_tf_dims *d) {
  double saved = c->r * c->h + c->qc + c->qgate + 2 * c->kvc + (d->gated ? 2 : 1) * c->fc;
  if (!d->parallel_block) saved += c->r * c->h;
  return c->e * saved;
}

/* Saved bytes per token of one layer under MaxText's custom remat policy
** (maxtext_utils.get_save_and_offload_names): the layer input (the
** scanned layer's argument: on the chip unless decoder_layer_input is
** offloaded) and each named tensor kept on the chip or offloaded, where
** the backward reads it -- as the dots policy counts them
** (dots_selective_tokens): q, k and v, the attention core's output with
** its fp32 log-sum-exp (context), the output projection's in a sequential
** block, the MLP's first matmul or two; the down projection's output
** (mlpwo), and a parallel block's output projection's, only feed the
** residual sum, so JAX keeps them nowhere. On a MoE, MLA or hybrid layer
** (listed false) only the input is counted. *dev stays on the chip, *off
** goes to the host. */
static void named_tokens(const shard *c, const wl_tf_dims *d, const plan *p, bool listed,
                         double *dev, double *off) {
  unsigned keep = p->remat_device, host = p->remat_offload;
  double in = c->r * c->h * c->e;
  *dev = host & PLAN_RN_DECODER_INPUT ? 0 : in;
  *off = host & PLAN_RN_DECODER_INPUT ? in : 0;
  if (!listed) return;
  const struct {
    unsigned bit;
    double bytes;
  } T[] = {{PLAN_RN_QUERY, c->e * (c->qc + c->qgate)},
           {PLAN_RN_KEY, c->e * c->kvc},
           {PLAN_RN_VALUE, c->e * c->kvc},
           {PLAN_RN_CONTEXT, c->e * c->qc + 4 * c->ac},
           {PLAN_RN_OUT, d->parallel_block ? 0 : c->r * c->h * c->e},
           {PLAN_RN_MLPWI_0, c->e * c->fc},
           {PLAN_RN_MLPWI_1, d->gated ? c->e * c->fc : 0}};
  for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
    if (keep & T[i].bit) *dev += T[i].bytes;
    if (host & T[i].bit) *off += T[i].bytes;
  }
}

/* A hybrid layer's (wl.h: WL_LAYER_MAMBA, _NO_FFN, _NO_MIXER) parameters
** and saved bytes per token: one norm and one sub-block -- a Mamba-2
** mixer, attention, or an MLP / MoE -- counted as the sub-block's part of
** a full layer above. A Mamba-2 mixer (Megatron-Core MambaMixer, its
** in_proj and out_proj split over t like attention's) keeps in_proj's
** input and its output (z, x, B, C, dt: what mamba_chunk_scan_combined
** saves; the chunk states are recomputed in its backward), the conv's
** output, the scan's output and out_proj's input. */
static void hybrid_parts(const shard *c, const wl_tf_dims *d, bool flash, int kind, layer_mem *l,
                         tok_bytes *k) {
  double h = c->h, e = c->e, lin = c->lin, mats = d->gated ? 3 : 2;
  bool moe = (kind & WL_LAYER_MOE) && c->experts > 0;
  *k = (tok_bytes){.rep = e * h}; /* the norm's input */
  l->expert = 0;
  if (kind & WL_LAYER_MAMBA) {
    double in = 2 * c->m_din + c->m_bc + c->m_nh, conv = c->m_din + c->m_bc;
    l->linw = h * in + c->m_din * h;
    l->dense = l->linw + conv * (c->m_conv + 1) + 3 * c->m_nh + c->m_din + h;
    l->gemms = 2;
    k->rep += lin * h;
    k->sharded = e * in + e * conv + e * c->m_din + lin * c->m_din;
  } else if (kind & WL_LAYER_NO_FFN) { /* attention, one norm */
    l->linw = 2 * h * c->qc + 2 * h * c->kvc;
    l->dense = attn_params(c) - (c->norms - 1) * 2 * h;
    l->gemms = 2;
    tok_bytes a = layer_tokens(c, d, flash, kind & WL_LAYER_LOCAL);
    k->rep += lin * h;
    k->sharded = e * (c->qc + 2 * c->kvc) + lin * c->qc;
    k->scores = a.scores;
  } else if (moe) { /* router, shared experts, latent projections, routed experts */
    double shared = c->sfc > 0 ? mats * h * c->sfc + (mats - 1) * c->sfc : 0;
    double lat = c->latent > 0 ? 2 * h * c->latent : 0;
    l->expert = c->expert_layer;
    l->dense = h * c->experts + shared + lat + h;
    l->linw = l->expert + mats * h * c->sfc + lat;
    l->gemms = 2 * c->local_experts + (c->sfc > 0 ? 2 : 0) + (lat > 0 ? 2 : 0);
    double w = c->latent > 0 ? c->latent : h;
    k->rep += e * h + 4 * c->experts + (c->latent > 0 ? lin * h : 0);
    k->sharded = (mats - 1) * e * c->sfc + lin * c->sfc + (c->latent > 0 ? lin * c->latent : 0);
    k->routed = c->routed * (lin * w + (mats - 1) * e * c->efc + lin * c->efc);
  } else { /* a dense MLP */
    l->dense = mlp_params(c, d->gated) + h;
    l->linw = mats * h * c->fc;
    l->gemms = 2;
    k->rep += lin * h;
    k->sharded = (mats - 1) * e * c->fc + lin * c->fc;
  }
}

/* Saved bytes per token a selective recompute of Megatron-Core's modules
** (plan.h PLAN_RM_*) frees in a layer of `kind` whose saved bytes are k
** (replicated ones counted r times, as layer_of does). Each module's own
** tensors, its input kept (the checkpoint's): "layernorm" the outputs of
** the norms that are modules of their own -- a MoE layer's pre-MLP norm
** (the router's input) and MLA's input norm (its down projections are
** plain linears); the others are fused into the next linear
** (LayerNormLinear) and recompute nothing; "mla_up_proj" the up
** projections' inputs (their norms fused in) and Q, K, V; "moe_act" each
** routed copy's FC2 input; "mlp" a dense MLP's FC1 input, outputs and FC2
** input; "shared_experts" theirs; "moe" every routed copy's tensors, the
** shared experts' and the router's probabilities; "core_attn" the
** attention's scores (selective's own count). */
static double modules_freed(const shard *c, const wl_tf_dims *d, int kind, const tok_bytes *k,
                            unsigned m) {
  double h = c->h, e = c->e, lin = c->lin, mats = d->gated ? 3 : 2, r = c->r;
  bool moe = (kind & WL_LAYER_MOE) && c->experts > 0;
  bool hybrid = kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER);
  bool mixer = !hybrid || (kind & WL_LAYER_NO_FFN), ffn = !hybrid || (kind & WL_LAYER_NO_MIXER);
  bool mla = c->kv_lora > 0 && mixer && !(kind & (WL_LAYER_MAMBA | WL_LAYER_GDN));
  double shared = c->sfc > 0 ? (mats - 1) * e * c->sfc + lin * c->sfc : 0;
  double f = 0;
  if (m & PLAN_RM_CORE_ATTN) f += k->scores;
  if ((m & PLAN_RM_LAYERNORM) && moe && ffn) f += r * e * h;
  if ((m & PLAN_RM_LAYERNORM) && mla) f += r * lin * h;
  if ((m & PLAN_RM_MLA_UP_PROJ) && mla)
    f += lin * (c->q_lora + c->kv_lora) + e * c->ac * (2 * c->qk_head + c->v_head);
  if ((m & PLAN_RM_MLP) && ffn && !moe) f += (mats - 1) * e * c->fc + lin * c->fc + r * lin * h;
  if (moe && ffn && (m & PLAN_RM_MOE)) {
    f += k->routed + shared + r * 4 * c->experts;
  } else if (moe && ffn) {
    if (m & PLAN_RM_MOE_ACT) f += c->routed * lin * c->efc;
    if (m & PLAN_RM_SHARED_EXPERTS) f += shared;
  }
  return f;
}

static layer_mem layer_of(const shard *c, const wl_tf_dims *d, const plan *p, const mem_opts *o,
                          int kind) {
  bool flash = o->flash_attention;
  layer_mem l;
  bool moe = (kind & WL_LAYER_MOE) && c->experts > 0;
  double h = c->h, sb = c->s * c->b;
  double mats = d->gated ? 3 : 2;
  double shared = moe && c->sfc > 0 ? mats * h * c->sfc + (mats - 1) * c->sfc + h : 0;
  l.dense = (c->kv_lora > 0 ? mla_params(c) : attn_params(c)) +
            (moe ? h * c->experts + shared : mlp_params(c, d->gated));
  l.expert = moe ? c->expert_layer : 0;
  l.linw = (c->kv_lora > 0 ? mla_matrices(c) : 2 * h * c->qc + 2 * h * c->kvc + h * c->qgate) +
           (moe ? l.expert + mats * h * c->sfc : mats * h * c->fc);
  l.gemms = (c->kv_lora > 0 ? 3 + (c->q_lora > 0) : 2) +
            (moe ? 2 * c->local_experts + (c->sfc > 0 ? 2 : 0) : 2);
  tok_bytes k;
  if (kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER))
    hybrid_parts(c, d, flash, kind, &l, &k);
  else
    k = layer_tokens(c, d, flash, kind);
  if (kind & WL_LAYER_GDN) { /* a Gated DeltaNet mixer where attention was, the norms kept */
    l.dense += gdn_params(c) - (attn_params(c) - c->norms * 2 * h);
    l.linw += gdn_matrices(c) - (2 * h * c->qc + 2 * h * c->kvc + h * c->qgate);
    l.gemms += 1; /* in_proj_qkvz, in_proj_ba, out_proj for q, k, v, o */
    k.sharded += gdn_tokens(c) - (c->e * (c->qc + 2 * c->kvc + c->qgate) + c->lin * c->qc);
    k.scores = 0;
  }
  double kept = c->r * k.rep + k.sharded + k.routed;
  l.act_none = sb * (kept + k.scores);
  l.scores = sb * k.scores;
  l.act_dev = 0;
  if (p->recompute == PLAN_RECOMPUTE_FULL && (p->remat_device | p->remat_offload)) {
    double dev, off;
    named_tokens(c, d, p, op_selective_layer(c, kind), &dev, &off);
    l.act = sb * (dev + off);
    l.act_dev = sb * dev;
  } else if (p->recompute == PLAN_RECOMPUTE_FULL)
    l.act = sb * c->r * c->e * h; /* the layer input */
  else if (p->recompute == PLAN_RECOMPUTE_SELECTIVE && p->recompute_modules) {
    double left = kept + k.scores - modules_freed(c, d, kind, &k, p->recompute_modules);
    l.act = sb * (left > c->r * c->e * h ? left : c->r * c->e * h);
  } else if (p->recompute == PLAN_RECOMPUTE_SELECTIVE && op_selective(o, c, kind))
    l.act = sb * (o->dots_selective ? dots_selective_tokens(c, d) : op_selective_tokens(c, d));
  else
    l.act = p->recompute == PLAN_RECOMPUTE_SELECTIVE ? sb * kept : l.act_none;
  /* the largest tensor: the layer output, the MLP's (or an expert's)
  ** intermediate, the a/t x s x keys softmax without FlashAttention */
  l.big = sb * c->e * h;
  double mid = moe ? sb * c->routed * c->e * c->efc : sb * c->e * c->fc;
  if (mid > l.big) l.big = mid;
  double softmax = sb * c->ac * attn_keys(c, kind) * c->e;
  if (!flash && softmax > l.big) l.big = softmax;
  return l;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t pos(int64_t x) { return x > 0 ? x : 1; }

/* ---- pipeline stages ---- */

/* Decoder layers [*a, *a + n) of virtual stage vs: plan_stage_layers for a
** plan that splits (an explicit --pp-layers, or L plus the counted
** embedding/loss a multiple of pp x v); otherwise (a fix's candidate, before
** plan_check) ceil((L + e + l) / S) a stage from the front. */
static int64_t stage_range(const plan *p, int64_t v, int64_t L, int64_t vs, const int64_t *starts,
                           int64_t *a) {
  int64_t S = p->pp * v;
  if (p->pp_layers && p->n_pp_layers == S) {
    int64_t start = 0;
    if (starts) start = starts[vs]; /* summed once per call (mem_transformer) */
    else
      for (int64_t j = 0; j < vs; j++) start += p->pp_layers[j];
    *a = start;
    return p->pp_layers[vs];
  }
  int64_t e = p->pp_split_embedding, l = p->pp_split_loss;
  int64_t per = (L + e + l) % S == 0 ? (L + e + l) / S : ceil_div(L + e + l, S);
  int64_t start = vs * per - (vs > 0 ? e : 0);
  bool even = (L + e + l) % S == 0 && pos(p->vp) == v;
  int64_t n = even ? plan_stage_layers(p, L, vs) : per - (vs == 0 ? e : 0) - (vs == S - 1 ? l : 0);
  if (start > L) start = L;
  if (n > L - start) n = L - start;
  *a = start;
  return n > 0 ? n : 0;
}

/* Sums over a range of layers. */
typedef struct {
  double layers, dense, expert, linw, gemms, act, act_dev;
  double act_max, none_max, scores_max, big_max, weights_max; /* of one layer */
} span;

/* What the memory of one plan reads, resolved once per call. */
typedef struct {
  const wl_tf_dims *d;
  const plan *p;
  const mem_opts *o;
  shard c;
  layer_mem kind[WL_LAYER_KINDS];
  int uniform;              /* the kind of every layer, or -1 when they differ */
  int64_t v, m;             /* virtual stages per chip, micro-batches per step */
  const int64_t *starts;    /* an explicit split's first layer per virtual stage, or NULL */
  /* one kind for all layers: the spans of the few chunk lengths a split
  ** has (as even as it goes: two), worked out once per call */
  struct span_memo *memo;
  struct stage_memo *stages; /* and the stages' sums of them (stage_sum) */
} memctx;

#define SPAN_MEMO 4
struct span_memo {
  int n;
  int64_t layers[SPAN_MEMO];
  span s[SPAN_MEMO];
};

/* The most chunks a stage keeps the spans of (88 bytes each). */
#define MEM_KEPT_CHUNKS 64

/* One kind for all layers: a stage's sum of its chunks' spans depends
** only on which chunk length (span_memo's entry) each chunk has, in
** order; the stages of an uneven split have two or three such sequences
** among up to 126 stages, so each sum is merged once per call and the
** others copied: the same additions in the same order, so the same
** doubles. */
#define STAGE_MEMO 4
struct stage_memo {
  int n;
  unsigned char seq[STAGE_MEMO][MEM_KEPT_CHUNKS]; /* span_memo entry of each chunk */
  span t[STAGE_MEMO];
};

static void span_add(span *s, const layer_mem *l, double n) {
  if (n <= 0) return;
  s->layers += n;
  s->dense += n * l->dense;
  s->expert += n * l->expert;
  s->linw += n * l->linw;
  s->gemms += n * l->gemms;
  s->act += n * l->act;
  s->act_dev += n * l->act_dev;
  if (l->act > s->act_max) s->act_max = l->act;
  if (l->act_none > s->none_max) s->none_max = l->act_none;
  if (l->scores > s->scores_max) s->scores_max = l->scores;
  if (l->big > s->big_max) s->big_max = l->big;
  if (l->dense + l->expert > s->weights_max) s->weights_max = l->dense + l->expert;
}

/* MoE layers among the first n (wl_tf_layer_kind's rule, counted in closed
** form: past first_dense, every moe_every-th). */
static int64_t moe_below(const wl_tf_dims *d, int64_t n) {
  if (d->hybrid && d->experts > 0) { /* the pattern's E layers */
    int64_t k = 0;
    for (int64_t i = 0; i < n && i < d->layers; i++) k += d->hybrid[i] == 'E';
    return k;
  }
  if (d->experts <= 0 || n <= d->first_dense) return 0;
  return d->moe_every <= 1 ? n - d->first_dense : (n - d->first_dense) / d->moe_every;
}

/* Global-attention layers among the first n of a windowed model. */
static int64_t global_below(const wl_tf_dims *d, int64_t n) {
  return d->global_every > 0 ? n / d->global_every : 0;
}

/* Layers [a, a + n): by kind, in closed form when one pattern varies,
** counted one by one when both do. */
static void span_of(const memctx *x, int64_t a, int64_t n, span *s) {
  const wl_tf_dims *d = x->d;
  memset(s, 0, sizeof *s);
  if (x->uniform >= 0) {
    span_add(s, &x->kind[x->uniform], (double)n);
    return;
  }
  double cnt[WL_LAYER_KINDS] = {0};
  if (d->window <= 0 && !d->hybrid) {
    cnt[WL_LAYER_MOE] = (double)(moe_below(d, a + n) - moe_below(d, a));
    cnt[0] = (double)n - cnt[WL_LAYER_MOE];
  } else if (d->experts <= 0 && !d->hybrid) { /* a hybrid's pattern is read layer by layer */
    cnt[0] = (double)(global_below(d, a + n) - global_below(d, a));
    cnt[WL_LAYER_LOCAL] = (double)n - cnt[0];
  } else {
    for (int64_t i = a; i < a + n; i++) cnt[wl_tf_layer_kind(d, i)] += 1;
  }
  for (int k = 0; k < WL_LAYER_KINDS; k++) span_add(s, &x->kind[k], cnt[k]);
}

static void span_merge(span *s, const span *t) {
  s->layers += t->layers;
  s->dense += t->dense;
  s->expert += t->expert;
  s->linw += t->linw;
  s->gemms += t->gemms;
  s->act += t->act;
  s->act_dev += t->act_dev;
  if (t->act_max > s->act_max) s->act_max = t->act_max;
  if (t->none_max > s->none_max) s->none_max = t->none_max;
  if (t->scores_max > s->scores_max) s->scores_max = t->scores_max;
  if (t->big_max > s->big_max) s->big_max = t->big_max;
  if (t->weights_max > s->weights_max) s->weights_max = t->weights_max;
}

/* Chunk k of physical stage i's entry in the span memo (worked out on
** first use), or -1 when the model mixes kinds or the memo is full. */
static int chunk_entry(const memctx *x, int64_t i, int64_t k) {
  struct span_memo *m = x->memo;
  if (x->uniform < 0 || !m) return -1;
  int64_t vs = k * x->p->pp + i, a, n;
  /* an explicit split's length is stage_range's (its start is needed only
  ** to work a new length's span out, and then taken from stage_range) */
  if (x->starts) {
    n = x->p->pp_layers[vs];
    for (int j = 0; j < m->n; j++)
      if (m->layers[j] == n) return j;
  }
  n = stage_range(x->p, x->v, x->d->layers, vs, x->starts, &a);
  for (int j = 0; j < m->n; j++)
    if (m->layers[j] == n) return j;
  if (m->n == SPAN_MEMO) return -1;
  span_of(x, a, n, &m->s[m->n]);
  m->layers[m->n] = n;
  return m->n++;
}

/* Chunk k of physical stage i is virtual stage k x pp + i (Megatron-Core). */
static void chunk_span(const memctx *x, int64_t i, int64_t k, span *s) {
  int64_t a, n = stage_range(x->p, x->v, x->d->layers, k * x->p->pp + i, x->starts, &a);
  struct span_memo *m = x->uniform >= 0 ? x->memo : NULL;
  for (int j = 0; m && j < m->n; j++)
    if (m->layers[j] == n) {
      *s = m->s[j];
      return;
    }
  span_of(x, a, n, s);
  if (m && m->n < SPAN_MEMO) m->layers[m->n] = n, m->s[m->n++] = *s;
}

/* Activations in flight on stage i at the first backward, in bytes, and
** the micro-batches of its first and last chunk among them (Narayanan et
** al. 2021 §2.2; Megatron-Core schedules.py warm-up counts): GPipe all m;
** 1F1B min(m, p - i); interleaved the first 2(p - 1 - i) + (v - 1)p + 1
** forward passes (at most m v), issued p at a time to chunks 0, 1, ..,
** v - 1 in turn. */
/* chunks: stage i's v chunk spans when stage_mem has them (NULL: worked
** out again). */
static double in_flight(const memctx *x, int64_t i, const span *const *chunks, double *first_mbs,
                        double *sets) {
  int64_t pp = x->p->pp, m = x->m, v = x->v;
  span s;
  if (v == 1) {
    double mbs = x->p->schedule == PLAN_GPIPE ? (double)m : (double)(pp - i < m ? pp - i : m);
    if (chunks) s = *chunks[0];
    else chunk_span(x, i, 0, &s);
    *first_mbs = mbs;
    *sets = mbs * s.layers;
    return mbs * s.act;
  }
  int64_t w = 2 * (pp - 1 - i) + (v - 1) * pp + 1;
  if (w > m * v) w = m * v;
  double act = 0, first = 0, n_sets = 0; /* summed in registers, not through the pointers */
  for (int64_t g = 0, k = 0; g * pp < w; g++, k = k + 1 < v ? k + 1 : 0) { /* k = g mod v */
    double passes = (double)(w - g * pp < pp ? w - g * pp : pp);
    const span *c = chunks ? chunks[k] : (chunk_span(x, i, k, &s), &s);
    act += passes * c->act;
    n_sets += passes * c->layers;
    if (k == 0) first += passes;
  }
  *first_mbs = first;
  *sets = n_sets;
  return act;
}

/* ---- one stage ---- */

/* Weights, gradients, optimizer and the recipe's weight copies of what
** stage i holds (t: the chunks' sums, embedding and head included). */
static void stage_state(const memctx *x, const span *t, double embed, mem_bytes *out) {
  const plan *p = x->p;
  int64_t gd, ge;
  plan_state_shards(p, &gd, &ge);
  mem_bytes st;
  mem_model_state(t->dense + embed, gd, p->zero, p->precision, x->o, out);
  mem_model_state(t->expert, ge, p->zero, p->precision, x->o, &st);
  out->weights += st.weights;
  out->gradients += st.gradients;
  out->optimizer += st.optimizer;
  out->params = t->dense + embed + t->expert;
  out->expert_params = t->expert;
  /* quantized copies persist only for whole weights: under ZeRO-3 they are
  ** made per gather (counted with the gathered layers) */
  double copies = p->zero >= 3 ? 0 : t->linw * weight_copy_bytes(p->gemm, x->o->gemm_any_layout);
  out->weight_copies = copies + t->gemms * gemm_meta_bytes(p->gemm);
  /* parameters in the recipe's format (mem_opts.lowp_params): the copies
  ** are the weights, and their 16-bit form is not kept. Under ZeRO-3 the
  ** shards stay counted at 16 bits (what the gather brings is counted in
  ** the temporary, stage_temporary) */
  out->lowp_params = x->o->lowp_params;
  out->weights_16bit_dropped = p->zero < 3 ? t->linw * lowp_drop_bytes(p, x->o) : 0;
  out->weights += out->weight_copies - out->weights_16bit_dropped;
  if (p->offload == PLAN_OFFLOAD_OPTIMIZER) { /* fp32 master + Adam states on the host */
    out->host += out->optimizer;
    out->optimizer = 0;
  }
}

/* Bytes of a stored logit and of its gradient: fp32 where the loss runs in
** fp32 on materialized logits (Megatron-LM's vocab_parallel_cross_entropy,
** torchtitan's cross_entropy(pred.float())), or mem_setup's figure. */
static double logit_bytes(const mem_opts *o) { return o->logit_bytes > 0 ? o->logit_bytes : 4; }

/* What the loss's backward holds beside the stored logits, per logit: one
** gradient of the logit's bytes, or the framework's figure; written in
** place into the stored fp32 softmax by Megatron's vocab-parallel cross
** entropy (megatron/core/tensor_parallel/cross_entropy.py @ d98e8a6:
** backward sets grad_input = softmax, :88, and scales it with mul_, :114),
** whose input is the logits cast by .float() (calculate_logits_max, :25):
** that cast's backward returns the gradient in the logits' own dtype, a
** new e-byte tensor beside the fp32 one, and nothing when they are fp32. */
static double loss_grad_bytes(const mem_opts *o, double e) {
  if (o->logit_grad_in_place) return logit_bytes(o) > e ? e : 0;
  return o->logit_grad_bytes > 0 ? o->logit_grad_bytes : logit_bytes(o);
}

/* Buffers of one layer's step: its largest tensor's gradient, what
** recompute rematerializes, collective buffers (docs/memory.md).
** On the last stage the backward starts with the loss: the logits'
** gradient lives beside the saved logits (counted in the activations);
** both are freed once the LM head's backward has used them, before the
** first layer's backward rematerializes anything. So the two phases do
** not add: the temporary is the larger of the logits' gradient and the
** layer's buffers less the logits freed by then. */
/* The temporary's part that does not depend on the model state: the
** layer's buffers (*big) and the collective buffers before ZeRO's (*coll);
** stage_temporary adds ZeRO's, in the same order as one sum. */
static void stage_temporary_base(const memctx *x, const span *t, bool last, double *big_out,
                                 double *coll_out) {
  const plan *p = x->p;
  const shard *c = &x->c;
  double sb = c->s * c->b;
  /* what recompute rematerializes for the layer in backward: all of it
  ** (full), what the op-level policy did not save, or the attention core */
  double remat = p->recompute == PLAN_RECOMPUTE_FULL ? t->none_max
                 : p->recompute != PLAN_RECOMPUTE_SELECTIVE ? 0
                 : x->o->op_selective || x->o->dots_selective ||
                           (p->recompute_modules & ~PLAN_RM_CORE_ATTN)
                     ? t->none_max - t->act_max
                     : t->scores_max;
  /* context parallelism: K and V of the other ranks' tokens for the layer
  ** computing -- two blocks in a ring (the one used, the one arriving:
  ** Liu et al. 2023, ring attention), all of them when all-gathered. They
  ** live while a layer's attention runs, not during the loss's backward:
  ** a layer's buffer, not a collective's held through the step */
  double cp_kv = 0;
  if (pos(p->cp) > 1) {
    /* PyTorch's context_parallel gathers them repeated to the query heads
    ** (framework_cp_pytorch) */
    bool torch_cp = framework_cp_repeats_kv(p->framework, x->d);
    double kvw = torch_cp ? 2 * c->qc : c->kvw;
    double kv = kvw * c->b * c->e;
    cp_kv = framework_cp_comm(p) == PLAN_CP_ALL_GATHER ? kv * c->s_all : 2 * kv * c->s;
    /* and its backward accumulates dQ, dK and dV of the chip's own tokens
    ** in fp32 beside the dK, dV pair arriving round the ring
    ** (_templated_ring_attention_backward, convert_to_f32) */
    if (torch_cp) cp_kv += (2 * kvw + c->qc) * c->b * c->s * 4;
  }
  double layer = t->big_max + remat + cp_kv, big = layer;
  if (!x->o->layers_only && last) {
    double saved = logit_bytes(x->o) * sb * c->vl; /* one micro-batch's logits */
    double grad = loss_grad_bytes(x->o, c->e) * sb * c->vl;
    big = layer - saved > grad ? layer - saved : grad;
  }
  double coll = 0;
  if (p->sp && p->tp > 1) coll += sb * c->e * c->h; /* all-gathered input */
  if (p->pp > 1) coll += 2 * sb * c->r * c->e * c->h; /* p2p send + receive */
  /* MoE: the all-to-all's buffer of dispatched token-copies */
  if (t->expert > 0) coll += sb * c->routed * c->e * c->h;
  *big_out = big;
  *coll_out = coll;
}

static double stage_temporary(const memctx *x, const span *t, double big, double coll) {
  const plan *p = x->p;
  /* ZeRO-3 gathers one layer's weights, two with prefetch (FSDP's default
  ** of one unit in flight, Zhao et al. 2023 §3.3), with the recipe's
  ** copies; ZeRO-2 and 3 reduce-scatter one layer's unsharded gradients */
  double lw = t->weights_max;
  bool dp_shards = p->dp * pos(p->cp) > 1;
  if (dp_shards && p->zero >= 3) {
    double per = elem_bytes(p->precision) - lowp_drop_bytes(p, x->o) +
                 weight_copy_bytes(p->gemm, x->o->gemm_any_layout);
    coll += (p->param_gather_overlap ? 2 : 1) * lw * per;
  }
  if (dp_shards && p->zero >= 2)
    coll += lw * (x->o->grads_reduced_16bit ? elem_bytes(p->precision) : grad_bytes(p->precision, x->o));
  return big + coll;
}

/* DeepSeek-V3's multi-token prediction modules (§2.2; Megatron-Core's MTP),
** on the last stage: each an eh_proj (2h -> h, column-parallel), two
** RMSNorms and one transformer block of the last layer's kind, sharing the
** embedding and head; one micro-batch in flight there (1F1B's last stage)
** keeps the block's activations, eh_proj's input and its own logits, for
** each depth run. */
static void mtp_add(const memctx *x, span *t, double *act) {
  const shard *c = &x->c;
  double n = (double)x->d->mtp_layers;
  if (n <= 0) return;
  const layer_mem *l = &x->kind[wl_tf_layer_kind(x->d, x->d->layers - 1)];
  span m = {0};
  span_add(&m, l, n);
  m.dense += n * (2 * c->h * c->h / c->t + 2 * c->h);
  m.linw += n * 2 * c->h * c->h / c->t;
  m.gemms += n;
  span_merge(t, &m);
  /* each depth run keeps its own activations, a repeated module's too
  ** (Megatron-Core's mtp_use_repeated_layer: the weights once, the depths
  ** each) */
  double depth = x->d->mtp_depth > n ? (double)x->d->mtp_depth : n;
  double sb = c->s * c->b;
  *act = depth * (l->act + sb * (2 * c->r * c->e * c->h + 2 * c->r * c->e * c->h +
                                 logit_bytes(x->o) * c->vl));
}

/* What stage i holds whatever the model state (ZeRO stage, shard group,
** offload): its layers' sums, the activations in flight and at the ends,
** the temporary's state-free part. */
typedef struct {
  span t;
  double embed, mtp_act, act, sets, ends, big, coll;
} stage_pre;

/* Stage i's chunks as span memo entries, into seq and their spans into
** refs; false when one has none (chunk_entry). */
static bool chunk_entries(const memctx *x, int64_t i, unsigned char *seq, const span **refs) {
  if (x->uniform < 0 || !x->stages || x->v > MEM_KEPT_CHUNKS) return false;
  for (int64_t j = 0; j < x->v; j++) {
    int e = chunk_entry(x, i, j);
    if (e < 0) return false;
    seq[j] = (unsigned char)e;
    refs[j] = &x->memo->s[e];
  }
  return true;
}

/* span_merge of the memo's entries seq[0..n) into t (zero), in order:
** the sums chunk by chunk as span_merge adds them, kept in registers;
** the largest of each per-layer figure over the entries used (a maximum
** does not depend on the order, and starts from t's 0 as span_merge's). */
static void merge_entries(const struct span_memo *m, const unsigned char *seq, size_t n, span *t) {
  double layers = t->layers, dense = t->dense, expert = t->expert, linw = t->linw,
         gemms = t->gemms, act = t->act, act_dev = t->act_dev;
  unsigned used = 0;
  for (size_t j = 0; j < n; j++) {
    const span *e = &m->s[seq[j]];
    layers += e->layers, dense += e->dense, expert += e->expert;
    linw += e->linw, gemms += e->gemms, act += e->act, act_dev += e->act_dev;
    used |= 1u << seq[j];
  }
  t->layers = layers, t->dense = dense, t->expert = expert;
  t->linw = linw, t->gemms = gemms, t->act = act, t->act_dev = act_dev;
  for (int e = 0; e < m->n; e++)
    if (used & (1u << e)) {
      const span *u = &m->s[e];
      if (u->act_max > t->act_max) t->act_max = u->act_max;
      if (u->none_max > t->none_max) t->none_max = u->none_max;
      if (u->scores_max > t->scores_max) t->scores_max = u->scores_max;
      if (u->big_max > t->big_max) t->big_max = u->big_max;
      if (u->weights_max > t->weights_max) t->weights_max = u->weights_max;
    }
}

/* Stage i's sum of its chunks' spans into t, and refs to each chunk's span
** (for in_flight) when they are few enough to keep; false when not. The
** sum is merged chunk by chunk from zero, or copied from a stage whose
** chunks have the same lengths in the same order (stage_memo). */
static bool stage_sum(const memctx *x, int64_t i, span *t, const span **refs, span *kept) {
  unsigned char seq[MEM_KEPT_CHUNKS];
  struct stage_memo *sm = x->stages;
  memset(t, 0, sizeof *t);
  if (chunk_entries(x, i, seq, refs)) {
    size_t n = (size_t)x->v;
    for (int j = 0; j < sm->n; j++)
      if (memcmp(sm->seq[j], seq, n) == 0) {
        *t = sm->t[j];
        return true;
      }
    merge_entries(x->memo, seq, n, t);
    if (sm->n < STAGE_MEMO) memcpy(sm->seq[sm->n], seq, n), sm->t[sm->n++] = *t;
    return true;
  }
  bool keep = x->v <= MEM_KEPT_CHUNKS;
  span k;
  for (int64_t j = 0; j < x->v; j++) {
    chunk_span(x, i, j, &k);
    span_merge(t, &k);
    if (keep) kept[j] = k, refs[j] = &kept[j];
  }
  return keep;
}

static void stage_pre_of(const memctx *x, int64_t i, stage_pre *s) {
  const plan *p = x->p;
  const shard *c = &x->c;
  bool first = i == 0, last = i == p->pp - 1;
  /* the chunks' spans, kept for in_flight (which reads each again) when
  ** they are few enough to keep on the stack */
  span kept[MEM_KEPT_CHUNKS];
  const span *refs[MEM_KEPT_CHUNKS];
  bool keep = stage_sum(x, i, &s->t, refs, kept);
  /* the embedding on the first stage; the final norm and the LM head on
  ** the last (its own copy of a tied head when pp > 1, as Megatron-LM) */
  double embed = 0, mtp_act = 0;
  if (!x->o->layers_only) {
    double emb = c->vc * c->h;
    if (first) embed += emb;
    if (last) embed += 2 * c->h + (p->pp > 1 || !x->d->tied ? emb : 0);
    if (last) mtp_add(x, &s->t, &mtp_act);
  }
  s->embed = embed;
  s->mtp_act = mtp_act;
  double first_mbs;
  s->act = in_flight(x, i, keep ? refs : NULL, &first_mbs, &s->sets);
  double ends = 0, sb = c->s * c->b;
  if (!x->o->layers_only) {
    /* Korthikanti §4.3: the embedding's dropout mask per micro-batch in
    ** flight on the first stage; the final norm and LM head inputs and the
    ** fp32 logits of the loss on the last */
    if (first) ends += first_mbs * sb * c->r * c->mask * c->h;
    double out_mbs = p->schedule == PLAN_GPIPE ? (double)x->m : 1;
    if (last) ends += out_mbs * sb * (2 * c->r * c->e * c->h + logit_bytes(x->o) * c->vl);
    /* the deferred output-layer weight gradients' operands, kept until the
    ** flush: each deferred micro-batch's input to the output layer (its
    ** sequence-parallel shard) and the gradient of its logits in the
    ** input's dtype (Megatron-Core's embedding_activation_buffer and
    ** grad_output_buffer, tensor_parallel/layers.py). The drain's two
    ** gather buffers come after the activations are freed: not at the peak */
    if (last && p->defer_embedding_wgrad) {
      /* the inputs beyond those the schedule holds anyway (GPipe's every
      ** one, 1F1B's one in flight: out_mbs above) */
      double n = (double)plan_wgrad_deferred(p);
      ends += sb * c->e * (fmax(0, n - out_mbs) * c->r * c->h + n * c->vc);
    }
  }
  s->ends = ends;
  stage_temporary_base(x, &s->t, last, &s->big, &s->coll);
}

/* Fragmentation where its measurement names the cause: recompute and
** offload make the allocation pattern irregular (GMLake, Guo et al. 2024,
** §2); a plain step repeats the same sizes layer after layer, and
** llm-foundry's MPT-1B, FSDP without checkpointing, ran with 76 GiB
** allocated of 80. Korthikanti's selective recompute under a fused
** attention kernel rematerializes only that kernel's output (Megatron-Core
** recompute_modules "core_attn" re-runs the flash forward; its saved
** statistics are the 4 B a head and row counted as scores): the same
** buffer every layer, as without recompute, so no fragmentation. Without
** the fused kernel it rematerializes the s x s score tensors, and the
** op-level policy (torchtitan) and full recompute a layer's set: those
** count it. Without this a selective plan under flash attention peaked
** above the same plan without recompute, whose activations it equals. */
static bool selective_remats_tensors(const mem_opts *o) {
  return o->op_selective || o->dots_selective || !o->flash_attention;
}

static bool irregular_alloc(const plan *p, const mem_opts *o) {
  if (p->offload != PLAN_OFFLOAD_NONE || p->recompute == PLAN_RECOMPUTE_FULL) return true;
  /* of Megatron-Core's modules, those that rematerialize the bulk of
  ** every layer as full recompute does: a MoE layer's whole MoE block, a
  ** dense model's MLP. The output-discarding ones (moe_act, layernorm,
  ** mla_up_proj) give their storage back and take the same size again in
  ** the backward, and a MoE model's few dense MLPs or its shared experts
  ** are a small part of its layers: the pattern stays regular */
  unsigned m = p->recompute_modules;
  bool bulk = (m & PLAN_RM_MOE) || ((m & PLAN_RM_MLP) && !(o->expert_params > 0));
  return p->recompute == PLAN_RECOMPUTE_SELECTIVE &&
         (bulk || (!m && selective_remats_tensors(o)));
}

/* The activations a stage of t's layers keeps on the chip under
** activation offload, of act in all: all but the layer computing and one
** in transfer; when p offloads only part of the layers (--offload
** activations:N), the rest's too, beside the one in transfer. */
static double act_kept(const plan *p, const span *t, double act) {
  /* MaxText's tensors named device stay (their share of the stage's layers,
  ** the same in every micro-batch in flight); the offloadable rest as below */
  double dev = t->act > 0 ? t->act_dev / t->act : 0, off = act * (1 - dev);
  double max = t->act_max * (1 - dev);
  double keep = off > 2 * max ? 2 * max : off;
  double f = plan_offload_share(p, t->layers);
  if (f < 1) {
    double part = off * (1 - f) + max;
    if (part > keep) keep = part < off ? part : off;
  }
  return act * dev + keep;
}

/* Stage i's memory under the model state of x->p, from its state-free
** part s, without the runtime's (the same on every stage). */
static void stage_finish(const memctx *x, const stage_pre *s, int64_t i, mem_bytes *out) {
  const plan *p = x->p;
  memset(out, 0, sizeof *out);
  stage_state(x, &s->t, s->embed, out);
  double act = s->act;
  out->act_layer = s->t.act_max;
  out->layer_mbs = s->sets;
  /* activation offload: the host keeps what act_kept leaves off the chip */
  if (p->offload == PLAN_OFFLOAD_ACTIVATIONS) {
    double keep = act_kept(p, &s->t, act);
    out->host += act - keep;
    act = keep;
  }
  out->activations = act + s->ends + s->mtp_act;
  out->temporary = stage_temporary(x, &s->t, s->big, s->coll);
  double f = irregular_alloc(p, x->o) ? x->o->fragmentation : 0;
  out->fragmentation = f / (1 - f) * (out->activations + out->temporary);
  out->stage = (int)i;
}

/* ---- checks ---- */

/* Parallel sizes up to 2^24 each (16.7 M chips), so products of four stay
** far inside int64 and double's exact integers. */
#define MEM_MAX_SIZE (1LL << 24)

static int check_sizes(const plan *p, char *err, size_t errn) {
  const struct {
    const char *name;
    int64_t v;
  } s[] = {{"dp", p->dp}, {"tp", p->tp}, {"pp", p->pp}, {"cp", p->cp}, {"ep", p->ep},
           {"etp", p->etp}, {"hsdp", p->hsdp}, {"mbs", p->mbs}, {"vp", p->vp}};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    if (s[i].v > MEM_MAX_SIZE || s[i].v < 0)
      return str_errf(err, errn, "memory: %s %lld is outside 0..%lld", s[i].name, (long long)s[i].v,
                      (long long)MEM_MAX_SIZE);
  if (p->offload > PLAN_OFFLOAD_OPTIMIZER || p->gemm >= PLAN_GEMM_COUNT)
    return str_errf(err, errn, "memory: unknown offload (%d) or GEMM recipe (%d)", (int)p->offload,
                    (int)p->gemm);
  if (p->pp_layers && p->n_pp_layers == p->pp * pos(p->vp))
    for (int i = 0; i < p->n_pp_layers; i++)
      if (p->pp_layers[i] < 0)
        return str_errf(err, errn, "memory: pp_layers[%d] = %d is negative", i, p->pp_layers[i]);
  return 0;
}

/* a x b, refused past int64 (the sizes are checked one by one first) */
static bool mul64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

static int check_dims(const wl_tf_dims *d, char *err, size_t errn) {
  if (d->layers <= 0 || d->hidden <= 0 || d->heads <= 0 || d->ffn_hidden <= 0)
    return str_errf(err, errn,
                "memory: transformer dimensions must be positive (layers %lld, hidden %lld, "
                "heads %lld, ffn_hidden %lld)",
                (long long)d->layers, (long long)d->hidden, (long long)d->heads,
                (long long)d->ffn_hidden);
  if (d->kv_heads < 0 || d->head_dim < 0 || d->vocab < 0 || d->experts < 0 || d->top_k < 0 ||
      d->moe_ffn < 0 || d->window < 0 || d->first_dense < 0 || d->moe_every < 0 ||
      d->global_every < 0)
    return str_errf(err, errn, "memory: negative transformer dimension");
  if (d->head_dim == 0 && d->hidden % d->heads != 0)
    return str_errf(err, errn, "memory: hidden %lld is not a multiple of heads %lld (give head_dim)",
                (long long)d->hidden, (long long)d->heads);
  int64_t kvh = d->kv_heads ? d->kv_heads : d->heads;
  if (d->heads % kvh != 0)
    return str_errf(err, errn, "memory: heads %lld not a multiple of kv_heads %lld",
                (long long)d->heads, (long long)kvh);
  return 0;
}

static int check_options(const mem_opts *o, char *err, size_t errn) {
  if (o->optimizer_states < 0 || o->trainable_fraction < 0 || o->trainable_fraction > 1 ||
      o->capacity_bytes < 0)
    return str_errf(err, errn, "memory: bad options (optimizer_states %d, trainable_fraction %g, "
                "capacity %g)", o->optimizer_states, o->trainable_fraction, o->capacity_bytes);
  if (!(o->fragmentation >= 0 && o->fragmentation < 1) || !(o->runtime_bytes >= 0) ||
      !(o->comm_group_bytes >= 0) || !(o->comm_pair_bytes >= 0) || !(o->expert_params >= 0) ||
      !(o->capacity_factor >= 0) || !(o->logit_bytes >= 0) || !(o->logit_grad_bytes >= 0))
    return str_errf(err, errn, "memory: bad runtime options (fragmentation %g of 0..1, runtime %g, "
                "communicators %g and %g, expert parameters %g, capacity factor %g, logit bytes "
                "%g: none negative)",
                o->fragmentation, o->runtime_bytes, o->comm_group_bytes, o->comm_pair_bytes,
                o->expert_params, o->capacity_factor, o->logit_bytes);
  return 0;
}

static int check(const wl_tf_dims *d, const plan *p, const mem_opts *o, char *err, size_t errn) {
  if (!d || !p || !o) return str_errf(err, errn, "memory: missing model, plan or options");
  if (check_dims(d, err, errn) != 0 || check_options(o, err, errn) != 0) return -1;
  int64_t kvh = d->kv_heads ? d->kv_heads : d->heads;
  int64_t seq = p->seq > 0 ? p->seq : d->seq;
  if (seq <= 0) return str_errf(err, errn, "memory: sequence length must be positive");
  if (p->dp < 1 || p->tp < 1 || p->pp < 1 || p->mbs < 1)
    return str_errf(err, errn, "memory: dp, tp, pp and mbs must be >= 1 (dp %lld, tp %lld, pp %lld, "
                "mbs %lld)", (long long)p->dp, (long long)p->tp, (long long)p->pp,
                (long long)p->mbs);
  if (check_sizes(p, err, errn) != 0) return -1;
  int64_t ep = pos(p->ep), cp = pos(p->cp), dpcp, chips, dpmbs;
  if (!mul64(p->dp, cp, &dpcp) || !mul64(dpcp, p->tp, &chips) || !mul64(chips, p->pp, &chips) ||
      !mul64(p->dp, p->mbs, &dpmbs))
    return str_errf(err, errn, "memory: dp x tp x pp x cp or dp x mbs exceeds 64 bits");
  if (p->chips > 0 && p->chips != chips)
    return str_errf(err, errn, "memory: dp x tp x pp x cp = %lld x %lld x %lld x %lld = %lld, not the %lld chips",
                (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)cp,
                (long long)chips, (long long)p->chips);
  /* the expert layers regroup tp x dp x cp ranks as etp x ep x edp (plan.h) */
  int64_t etp = pos(p->etp) > 1 ? pos(p->etp) : 1;
  if ((p->tp * dpcp) % (ep * etp) != 0)
    return str_errf(err, errn, "memory: ep %lld x etp %lld does not divide tp x dp x cp %lld",
                (long long)ep, (long long)etp, (long long)(p->tp * dpcp));
  if ((ep > 1 || pos(p->etp) > 1) && (d->experts <= 1 || d->experts % ep != 0))
    return str_errf(err, errn,
                    "memory: ep %lld x etp %lld: the model's %lld experts are not split %lld ways",
                    (long long)ep, (long long)pos(p->etp), (long long)d->experts, (long long)ep);
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
  if (seq % cp != 0)
    return str_errf(err, errn, "memory: cp %lld does not divide seq %lld", (long long)cp,
                (long long)seq);
  int64_t ends = p->pp_split_embedding + p->pp_split_loss;
  if (p->pp > d->layers + ends)
    return str_errf(err, errn, "memory: pp %lld is more than the %lld layers", (long long)p->pp,
                (long long)d->layers);
  if (p->zero < 0 || p->zero > 3)
    return str_errf(err, errn, "memory: ZeRO stage %d (0..3)", p->zero);
  if (p->gbs < dpmbs || p->gbs % dpmbs != 0)
    return str_errf(err, errn, "memory: dp x mbs = %lld x %lld does not divide the global batch %lld",
                (long long)p->dp, (long long)p->mbs, (long long)p->gbs);
  if (p->schedule == PLAN_INTERLEAVED && p->vp < 1)
    return str_errf(err, errn, "memory: interleaved schedule needs vp >= 1");
  if (!graph_dtype_is_float(p->precision))
    return str_errf(err, errn, "memory: precision %s is not a floating-point type",
                graph_dtype_name(p->precision));
  return 0;
}

/* ---- the memory of one chip ---- */

/* Routed-expert parameters of one MoE layer of the whole model: the
** model's count (mem_opts, or the dimensions' own) over its MoE layers, or,
** when the builder left both 0, experts x (3 gated, else 2) x h x moe_ffn
** (the expert matrices; their biases, under 0.1 %, left out). */
static double expert_layer_params(const wl_tf_dims *d, const mem_opts *o) {
  if (d->experts <= 1) return 0;
  /* the model's count holds its MTP modules' experts too, which mtp_add
  ** counts as layers of the last layer's kind */
  int64_t moe_layers = moe_below(d, d->layers);
  if (d->mtp_layers > 0 && d->layers > 0 && (wl_tf_layer_kind(d, d->layers - 1) & WL_LAYER_MOE))
    moe_layers += d->mtp_layers;
  double given = o->expert_params > 0 ? o->expert_params : (double)d->expert_params;
  if (given > 0 && moe_layers > 0) return given / (double)moe_layers;
  double effn = (double)(d->moe_ffn > 0 ? d->moe_ffn : d->ffn_hidden);
  return (double)d->experts * (d->gated ? 3 : 2) * (double)d->hidden * effn;
}

static void shard_of(const wl_tf_dims *d, const plan *p, const mem_opts *o, shard *c) {
  int64_t t = p->tp, cp = pos(p->cp), ep = pos(p->ep), etp = pos(p->etp);
  int64_t hd = d->head_dim ? d->head_dim : d->hidden / d->heads;
  int64_t kvh = d->kv_heads ? d->kv_heads : d->heads;
  double seq = (double)(p->seq > 0 ? p->seq : d->seq);
  c->h = (double)d->hidden;
  c->s_all = seq;
  c->s = seq / (double)cp;
  c->b = (double)p->mbs;
  c->t = (double)t;
  c->r = p->sp && t > 1 ? 1.0 / (double)t : 1.0;
  c->qc = (double)(d->heads / t * hd);
  c->kvc = (double)((kvh >= t ? kvh / t : 1) * hd);
  c->kvw = 2 * c->kvc;
  c->sfc = (double)d->shared_ffn_hidden / (double)t;
  c->q_lora = c->kv_lora = c->rope = c->qk_head = c->v_head = 0;
  if (d->kv_lora_rank > 0) { /* MLA: head_dim is the query/key width */
    c->q_lora = (double)d->q_lora_rank;
    c->kv_lora = (double)d->kv_lora_rank;
    c->rope = (double)d->qk_rope_head_dim;
    c->qk_head = (double)hd;
    c->v_head = (double)(d->v_head_dim > 0 ? d->v_head_dim : hd);
    c->kvw = (double)(d->heads / t) * (c->qk_head + c->v_head);
  }
  c->dsa_w = c->dsa_norm = 0;
  if (d->dsa_topk > 0 && d->kv_lora_rank > 0) {
    double hi = (double)d->dsa_heads, di = (double)d->dsa_dim, h = (double)d->hidden;
    c->dsa_w = (c->q_lora > 0 ? c->q_lora : h) * hi * di + h * di + h * hi;
    c->dsa_norm = 2 * di;
  }
  c->fc = (double)(d->ffn_hidden / t);
  c->ac = (double)(d->heads / t);
  c->experts = d->experts > 1 ? (double)d->experts : 0;
  c->topk = d->top_k > 0 ? (double)d->top_k : 1;
  c->cf = o->capacity_factor > 0 ? o->capacity_factor : 1;
  c->efc = (double)(d->moe_ffn > 0 ? d->moe_ffn : d->ffn_hidden) / (double)etp;
  /* tokens are dealt to experts evenly: the tp group's tokens, top_k copies
  ** each, computed by etp chips each at 1/etp of the width; the tp / etp
  ** groups take a share each (Megatron-LM asserts "When using MoE and tensor
  ** parallelism, sequence parallelism must be used", so a tp rank routes
  ** only its own tokens) */
  c->routed = c->topk * c->cf * (double)etp / (double)t;
  c->local_experts = c->experts / (double)ep;
  c->expert_layer = expert_layer_params(d, o) / (double)(ep * etp);
  c->e = elem_bytes(p->precision);
  c->lin = saved_linear_bytes(p->gemm, c->e);
  c->mask = o->no_dropout ? 0 : 1;
  c->vc = (double)ceil_div(d->vocab, t);
  c->vl = c->vc / (double)(p->vocab_tiles > 1 ? p->vocab_tiles : 1);
  c->norms = d->parallel_block ? 1 : 2;
  c->window = (double)d->window;
  c->m_din = (double)(d->mamba_heads / t * d->mamba_head_dim);
  c->m_bc = (double)(2 * (d->ssm_groups / t) * d->ssm_state);
  c->m_nh = (double)(d->mamba_heads / t);
  c->m_conv = (double)d->conv_kernel;
  c->latent = (double)d->moe_latent;
  c->g_kd = (double)(d->gdn_k_heads / t * d->gdn_k_dim);
  c->g_vd = (double)(d->gdn_v_heads / t * d->gdn_v_dim);
  c->g_nv = (double)(d->gdn_v_heads / t);
  c->g_conv = (double)d->gdn_conv;
  c->qgate = d->attn_gate ? c->qc : 0;
}

/* Communicators: one per parallel group of more than one chip (tp, pp,
** the data-parallel dp x cp, cp's attention, ep's all-to-all). */
static double comm_bytes(const plan *p, const mem_opts *o) {
  int64_t g[] = {p->tp, p->pp, p->dp * pos(p->cp), pos(p->cp), pos(p->ep)};
  double sum = 0;
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
    if (g[i] > 1) sum += g[i] == 2 ? o->comm_pair_bytes : o->comm_group_bytes;
  return sum;
}

static double peak_of(const mem_bytes *a) {
  return a->weights + a->gradients + a->optimizer + a->activations + a->temporary + a->runtime +
         a->comm + a->fragmentation;
}

/* The longest explicit split whose starts are summed up front (longer
** ones are summed per chunk). */
#define MEM_MAX_STARTS 1024

/* What every model state of plan p shares, resolved once (mem_transformer
** and mem_transformer_states): the shard, the layers, the split. */
typedef struct {
  memctx x;
  struct span_memo memo;
  struct stage_memo stages;
  int64_t starts[MEM_MAX_STARTS];
  int64_t step; /* stages computed: every step-th (and the last) */
} memrun;

double mem_layer_saved_bytes(const wl_tf_dims *d, const plan *p, const mem_opts *o, int kind) {
  shard c;
  memset(&c, 0, sizeof c);
  shard_of(d, p, o, &c);
  layer_mem l = layer_of(&c, d, p, o, kind);
  return l.act - l.act_dev;
}

static void memrun_init(memrun *r, const wl_tf_dims *d, const plan *p, const mem_opts *o) {
  r->memo.n = 0, r->stages.n = 0;
  memctx *x = &r->x;
  /* field by field: the kinds' table (32 layer_mem, 2 KB) is only read
  ** for the kinds set below, so it is not zeroed on each of the planner's
  ** hundreds of thousands of calls */
  x->d = d, x->p = p, x->o = o, x->memo = &r->memo, x->stages = &r->stages, x->starts = NULL;
  memset(&x->c, 0, sizeof x->c);
  shard_of(d, p, o, &x->c);
  x->v = p->schedule == PLAN_INTERLEAVED && p->pp > 1 ? p->vp : 1;
  x->m = p->gbs / (p->dp * p->mbs);
  /* an explicit split's stage starts, summed once: every chunk of every
  ** stage reads one (the planner asks this for splits of hundreds) */
  if (p->pp_layers && p->n_pp_layers == p->pp * x->v && p->n_pp_layers <= MEM_MAX_STARTS) {
    r->starts[0] = 0;
    for (int j = 1; j < p->n_pp_layers; j++) r->starts[j] = r->starts[j - 1] + p->pp_layers[j - 1];
    x->starts = r->starts;
  }
  /* one kind for all layers unless the model mixes them: only its layer
  ** is worked out (the planner asks this a million times a second) */
  bool mixed = d->window > 0 || d->hybrid ||
               (x->c.experts > 0 && (d->first_dense > 0 || d->moe_every > 1));
  x->uniform = mixed ? -1 : wl_tf_layer_kind(d, 0);
  if (!mixed) x->kind[x->uniform] = layer_of(&x->c, d, p, o, x->uniform);
  for (int k = d->hybrid ? 4 : 0; mixed && k < (d->hybrid ? WL_LAYER_KINDS : 4); k++)
    x->kind[k] = layer_of(&x->c, d, p, o, k); /* hybrid kinds: wl.h */
  /* stages differ in layers and kinds only when the split or the model
  ** makes them: then every stage is computed, else the first and the last
  ** (a middle stage holds the first's layers with fewer in flight) */
  bool uneven = p->pp_layers || p->pp_split_embedding || p->pp_split_loss ||
                d->layers % (p->pp * x->v) != 0;
  r->step = mixed || uneven ? 1 : (p->pp > 1 ? p->pp - 1 : 1);
}

/* Stage i's memory under x->p's model state into z, kept in *a when it is
** the worst stage yet. */
static void stage_whole(const memctx *x, const stage_pre *s, int64_t i, mem_bytes *z) {
  stage_finish(x, s, i, z);
  z->runtime = x->o->runtime_bytes;
  z->comm = comm_bytes(x->p, x->o);
  z->peak = peak_of(z);
}

static void stage_worst(const memctx *x, const stage_pre *s, int64_t i, mem_bytes *a) {
  mem_bytes z;
  stage_whole(x, s, i, &z);
  if (i == 0 || z.peak > a->peak) *a = z;
}

static void mem_done(const mem_opts *o, mem_bytes *a) {
  a->capacity = o->capacity_bytes;
  a->fits = o->capacity_bytes <= 0 || a->peak <= o->capacity_bytes;
}

int mem_transformer(const wl_tf_dims *d, const plan *p, const mem_opts *o, mem_bytes *out,
                    char *err, size_t errn) {
  if (check(d, p, o, err, errn) != 0) return -1;
  if (!out) return str_errf(err, errn, "memory: no output");
  memrun r;
  memrun_init(&r, d, p, o);
  mem_bytes a;
  stage_pre s;
  for (int64_t i = 0; i < p->pp; i += r.step) {
    stage_pre_of(&r.x, i, &s);
    stage_worst(&r.x, &s, i, &a);
  }
  mem_done(o, &a);
  *out = a;
  return 0;
}

/* ---- one plan's model states ---- */

/* What one model state makes of every stage alike, worked out once per
** state: each figure the same expression stage_state, stage_temporary and
** stage_finish evaluate, so a stage's peak below is theirs to the bit. */
typedef struct {
  int zero;
  double wf, frac, g, opt, n_dense, n_expert; /* mem_model_state's, per shard group */
  double copy_bytes, meta_bytes;             /* stage_state's recipe copies */
  double drop;                               /* lowp_drop_bytes */
  bool offload_opt, offload_act;
  double z3_per, z2_per;                     /* stage_temporary's ZeRO buffers, per byte of a layer */
  bool dp_shards;
  double frag;                               /* f / (1 - f) */
  double runtime, comm;
} state_k;

/* The most stages a preparation keeps; a plan with more is worked out
** whole for each state (mem_transformer). */
#define MEM_PREP_STAGES 512

struct mem_prep {
  const wl_tf_dims *d;
  plan q;    /* the plan; its model state set per call */
  mem_opts o;
  bool ready; /* the stages below are q's (else each state goes through mem_transformer) */
  memrun r;   /* its memctx points into this struct: a mem_prep does not move */
  int n;      /* stages kept: 0, r.step, 2 r.step, .. below q.pp */
  stage_pre s[MEM_PREP_STAGES];
  /* per stage, the peak's terms that no model state changes, as the
  ** stage's figures compute them (mem_prep_set: stage_terms) */
  bool experts; /* any stage holds routed experts */
  state_k k0;   /* the factors of the state it was set with (state_k_now updates them) */
  double pw[MEM_PREP_STAGES], pg[MEM_PREP_STAGES], po[MEM_PREP_STAGES]; /* dense + embedding */
  double ew[MEM_PREP_STAGES], eg[MEM_PREP_STAGES], eo[MEM_PREP_STAGES]; /* routed experts */
  double cw[MEM_PREP_STAGES], cw3[MEM_PREP_STAGES]; /* recipe copies: ZeRO < 3, ZeRO-3 */
  double act[MEM_PREP_STAGES], act_off[MEM_PREP_STAGES]; /* activations: kept, offloaded */
  double tmp[MEM_PREP_STAGES], tmp2[MEM_PREP_STAGES], tmp3[MEM_PREP_STAGES]; /* by ZeRO stage */
  /* the stages that can be the worst under some state (prep_live), in order */
  int n_live;
  short live[MEM_PREP_STAGES];
};

mem_prep *mem_prep_new(void) { return calloc(1, sizeof(mem_prep)); }

void mem_prep_free(mem_prep *mp) { free(mp); }


static void state_k_of(const memctx *x, state_k *k) {
  const plan *p = x->p;
  const mem_opts *o = x->o;
  /* mem_model_state's factors */
  double w = elem_bytes(p->precision);
  bool master = o->master_fp32 && w < 4;
  double g = grad_bytes(p->precision, o);
  double state = master ? 4 : w;
  bool one_copy = master && o->fp32_weights_only;
  k->opt = (master && !one_copy ? 4 : 0) + o->optimizer_states * state;
  if (one_copy) w = 4;
  k->frac = o->trainable_fraction > 0 ? o->trainable_fraction : 1;
  double fw = o->frozen_weight_bytes > 0 ? o->frozen_weight_bytes : w;
  k->wf = k->frac * w + (1 - k->frac) * fw;
  k->g = g;
  int64_t gd, ge;
  plan_state_shards(p, &gd, &ge);
  k->n_dense = gd > 1 ? (double)gd : 1;
  k->n_expert = ge > 1 ? (double)ge : 1;
  k->zero = p->zero;
  k->copy_bytes = weight_copy_bytes(p->gemm, o->gemm_any_layout);
  k->meta_bytes = gemm_meta_bytes(p->gemm);
  k->drop = lowp_drop_bytes(p, o);
  k->offload_opt = p->offload == PLAN_OFFLOAD_OPTIMIZER;
  k->offload_act = p->offload == PLAN_OFFLOAD_ACTIVATIONS;
  k->dp_shards = p->dp * pos(p->cp) > 1;
  k->z3_per = (p->param_gather_overlap ? 2 : 1);
  k->z2_per = grad_bytes(p->precision, o);
  double f = irregular_alloc(p, o) ? o->fragmentation : 0;
  k->frag = f / (1 - f);
  k->runtime = o->runtime_bytes;
  k->comm = comm_bytes(p, o);
}

/* k0's factors with those of the model state x->p has now: the shard
** groups, the stage, the offload and the fragmentation it brings (the
** same expressions as state_k_of). */
static void state_k_now(const memctx *x, const state_k *k0, state_k *k) {
  const plan *p = x->p;
  *k = *k0;
  int64_t gd, ge;
  plan_state_shards(p, &gd, &ge);
  k->n_dense = gd > 1 ? (double)gd : 1;
  k->n_expert = ge > 1 ? (double)ge : 1;
  k->zero = p->zero;
  k->offload_opt = p->offload == PLAN_OFFLOAD_OPTIMIZER;
  k->offload_act = p->offload == PLAN_OFFLOAD_ACTIVATIONS;
  double f = irregular_alloc(p, x->o) ? x->o->fragmentation : 0;
  k->frag = f / (1 - f);
}

/* Stage i's terms of the peak that no model state changes (k: any state
** of the prepared plan, for the factors that do not depend on it), each
** computed as stage_state, stage_finish and stage_temporary compute it:
** (P f) g rather than P (f g), and so on. */
static void stage_terms(mem_prep *mp, const state_k *k, int i) {
  const stage_pre *s = &mp->s[i];
  double P = s->t.dense + s->embed, E = s->t.expert;
  mp->pw[i] = P * k->wf, mp->pg[i] = P * k->frac * k->g, mp->po[i] = P * k->frac * k->opt;
  mp->ew[i] = E * k->wf, mp->eg[i] = E * k->frac * k->g, mp->eo[i] = E * k->frac * k->opt;
  mp->experts = mp->experts || E != 0;
  mp->cw[i] = s->t.linw * k->copy_bytes + s->t.gemms * k->meta_bytes - s->t.linw * k->drop;
  mp->cw3[i] = 0 + s->t.gemms * k->meta_bytes;
  mp->act[i] = s->act + s->ends + s->mtp_act;
  mp->act_off[i] = act_kept(&mp->q, &s->t, s->act) + s->ends + s->mtp_act;
  double lw = s->t.weights_max;
  double per = elem_bytes(mp->q.precision) - k->drop + k->copy_bytes;
  mp->tmp[i] = s->big + s->coll;
  mp->tmp2[i] = s->big + (s->coll + lw * k->z2_per);
  mp->tmp3[i] = s->big + (s->coll + k->z3_per * lw * per + lw * k->z2_per);
}

/* Stage i's peak under state k: peak_of(stage_whole's figures), the same
** operations in the same order. x / 1 is x and x + 0 is x (x >= 0) in
** IEEE arithmetic: the divisions by an unsharded group and a dense
** model's expert terms are skipped. */
static double prep_peak(const mem_prep *mp, const state_k *k, int i, double *wgo) {
  int z = k->zero;
  double weights = mp->pw[i], gradients = mp->pg[i], optimizer = mp->po[i];
  if (z >= 3) weights /= k->n_dense;
  if (z >= 2) gradients /= k->n_dense;
  if (z >= 1) optimizer /= k->n_dense;
  if (mp->experts) {
    weights += mp->ew[i] / (z >= 3 ? k->n_expert : 1);
    gradients += mp->eg[i] / (z >= 2 ? k->n_expert : 1);
    optimizer += mp->eo[i] / (z >= 1 ? k->n_expert : 1);
  }
  weights += z >= 3 ? mp->cw3[i] : mp->cw[i];
  if (k->offload_opt) optimizer = 0;
  double activations = k->offload_act ? mp->act_off[i] : mp->act[i];
  double temporary = !k->dp_shards || z < 2 ? mp->tmp[i] : z < 3 ? mp->tmp2[i] : mp->tmp3[i];
  double frag = k->frag * (activations + temporary);
  if (wgo) wgo[0] = weights, wgo[1] = gradients, wgo[2] = optimizer;
  return weights + gradients + optimizer + activations + temporary + k->runtime + k->comm + frag;
}

/* Whether stage b's every term is at most stage a's. */
static bool terms_below(const mem_prep *mp, int b, int a) {
  return mp->pw[b] <= mp->pw[a] && mp->pg[b] <= mp->pg[a] && mp->po[b] <= mp->po[a] &&
         mp->ew[b] <= mp->ew[a] && mp->eg[b] <= mp->eg[a] && mp->eo[b] <= mp->eo[a] &&
         mp->cw[b] <= mp->cw[a] && mp->cw3[b] <= mp->cw3[a] && mp->act[b] <= mp->act[a] &&
         mp->act_off[b] <= mp->act_off[a] && mp->tmp[b] <= mp->tmp[a] &&
         mp->tmp2[b] <= mp->tmp2[a] && mp->tmp3[b] <= mp->tmp3[a];
}

/* The stages prep_worst needs to look at: a stage none of whose terms is
** above those of an earlier stage kept can never be the worst, under any
** state. prep_peak is monotone in each term: it adds them, divides by
** group sizes >= 1 and multiplies by a fragmentation factor f / (1 - f)
** >= 0 (check: 0 <= f < 1), and IEEE rounding is monotone (a <= b gives
** fl(a + x) <= fl(b + x)), so its peak is at most the earlier stage's,
** and the worst stage is the first of the largest peaks (the strict > of
** prep_worst): the earlier one, or one before it. A NaN term compares
** false and keeps its stage. Each stage is compared with the last few kept
** only, which keeps this linear. */
#define PREP_LIVE_CMP 4
static void prep_live(mem_prep *mp) {
  mp->n_live = 0;
  for (int i = 0; i < mp->n; i++) {
    bool below = false;
    for (int j = mp->n_live - 1; j >= 0 && j >= mp->n_live - PREP_LIVE_CMP && !below; j--)
      below = terms_below(mp, i, mp->live[j]);
    if (!below) mp->live[mp->n_live++] = (short)i;
  }
}

void mem_prep_set(mem_prep *mp, const wl_tf_dims *d, const plan *p, const mem_opts *o) {
  mp->d = d;
  mp->q = *p;
  mp->o = *o;
  /* a plan refused whatever its state, or too long to keep: each state
  ** goes through mem_transformer (which says why) */
  mp->ready = check(d, &mp->q, &mp->o, NULL, 0) == 0;
  if (!mp->ready) return;
  memrun_init(&mp->r, d, &mp->q, &mp->o);
  if ((p->pp - 1) / mp->r.step >= MEM_PREP_STAGES) {
    mp->ready = false;
    return;
  }
  mp->n = 0;
  for (int64_t i = 0; i < p->pp; i += mp->r.step) stage_pre_of(&mp->r.x, i, &mp->s[mp->n++]);
  state_k_of(&mp->r.x, &mp->k0);
  mp->experts = false;
  for (int i = 0; i < mp->n; i++) stage_terms(mp, &mp->k0, i);
  prep_live(mp);
}

/* The state's fields as check() takes them (the rest of the plan passed
** check in mem_prep_set). */
static bool state_valid(const mem_state *st) {
  return st->zero >= 0 && st->zero <= 3 && st->hsdp >= 0 && st->hsdp <= MEM_MAX_SIZE &&
         st->offload <= PLAN_OFFLOAD_OPTIMIZER;
}

/* The worst stage of the prepared plan under state st (the first of the
** largest peaks, as mem_transformer keeps it), into *worst with its peak,
** weights, gradients and optimizer; 0, or -1 with err (check's message)
** when the state is refused. Not ready: -2 (mem_transformer's turn). */
static int prep_worst(mem_prep *mp, const mem_state *st, int *worst, double *top, double *wgo,
                      char *err, size_t errn) {
  plan *q = &mp->q;
  q->zero = st->zero, q->hsdp = st->hsdp, q->offload = st->offload;
  if (!mp->ready) return -2;
  if (!state_valid(st) && check(mp->d, q, &mp->o, err, errn) != 0) return -1;
  state_k k;
  state_k_now(&mp->r.x, &mp->k0, &k);
  *worst = 0;
  for (int l = 0; l < mp->n_live; l++) { /* stage 0 is always live */
    int i = mp->live[l];
    double w3[3], pk = prep_peak(mp, &k, i, w3);
    if (l == 0 || pk > *top) *top = pk, *worst = i, wgo[0] = w3[0], wgo[1] = w3[1], wgo[2] = w3[2];
  }
  return 0;
}

int mem_prep_state(mem_prep *mp, const mem_state *st, mem_bytes *out, char *err, size_t errn) {
  int worst;
  double top = 0, wgo[3];
  int rc = out ? prep_worst(mp, st, &worst, &top, wgo, err, errn) : -2;
  if (rc == -2) return mem_transformer(mp->d, &mp->q, &mp->o, out, err, errn);
  if (rc != 0) return -1;
  stage_whole(&mp->r.x, &mp->s[worst], (int64_t)worst * mp->r.step, out);
  mem_done(&mp->o, out);
  return 0;
}

int mem_prep_peak(mem_prep *mp, const mem_state *st, mem_peak *out, char *err, size_t errn) {
  int worst;
  double top = 0, wgo[3];
  int rc = prep_worst(mp, st, &worst, &top, wgo, err, errn);
  if (rc == -1) return -1;
  if (rc == -2) {
    mem_bytes a;
    if (mem_transformer(mp->d, &mp->q, &mp->o, &a, err, errn) != 0) return -1;
    *out = (mem_peak){a.peak, a.weights, a.gradients, a.optimizer, a.runtime, a.comm, a.capacity,
                      a.fits};
    return 0;
  }
  *out = (mem_peak){top, wgo[0], wgo[1], wgo[2], mp->k0.runtime, mp->k0.comm,
                    mp->o.capacity_bytes, mp->o.capacity_bytes <= 0 || top <= mp->o.capacity_bytes};
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
    if (p->dp % k == 0) q.dp = p->dp / k; /* plan_check (the fixes' rule) keeps ep x etp whole */
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
  /* 2, 3. recompute; selective only where it rematerializes more than a
  ** fused attention kernel's output (irregular_alloc): else it saves the
  ** kernel's 4 B a head and row, no fix worth a line */
  if (p->recompute == PLAN_RECOMPUTE_NONE && selective_remats_tensors(o)) {
    plan q = *p;
    q.recompute = PLAN_RECOMPUTE_SELECTIVE;
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, "selective recompute (core attention)");
  }
  /* 2b. Megatron-Core's output-discarding recompute modules, which free a
  ** MoE layer's expert activations and norm output or MLA's up-projected
  ** Q, K, V for little work (framework_cheap_recompute_modules) */
  unsigned cheap = framework_cheap_recompute_modules(p->framework, f.d);
  unsigned have = p->recompute == PLAN_RECOMPUTE_SELECTIVE
                      ? (p->recompute_modules ? p->recompute_modules : PLAN_RM_CORE_ATTN)
                      : 0;
  if (cheap && (have & cheap) != cheap && p->recompute != PLAN_RECOMPUTE_FULL) {
    plan q = *p;
    q.recompute = PLAN_RECOMPUTE_SELECTIVE;
    q.recompute_modules = have | cheap;
    char label[96], what[128];
    snprintf(what, sizeof what, "recompute those modules (--recompute %s)",
             plan_recompute_label(&q, label, sizeof label));
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, what);
  }
  if (p->recompute != PLAN_RECOMPUTE_FULL) {
    plan q = *p;
    q.recompute = PLAN_RECOMPUTE_FULL;
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, "full recompute");
  }
  /* 3b. activation offload: the fewest of each model chunk's first layers
  ** whose activations on the host make it fit (--offload activations:N,
  ** Megatron-Core's --cpu-offloading-num-layers, fewer than the model's
  ** layers), else every layer's; the chip needs a host link (the caller's
  ** ok says) */
  if (p->offload == PLAN_OFFLOAD_NONE && d->layers > 1) {
    plan q = *p;
    q.offload = PLAN_OFFLOAD_ACTIVATIONS;
    int64_t chunk = d->layers / (pos(p->pp) * pos(p->vp));
    if (chunk >= d->layers) chunk = d->layers - 1;
    bool fits_some = false;
    if (chunk >= 1) {
      q.offload_layers = chunk;
      fits_some = try_plan(&f, &q, o, &r) && r.fits;
    }
    if (fits_some) { /* the least N that fits: the peak falls as N grows */
      int64_t lo = 1, hi = chunk;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        q.offload_layers = mid;
        if (try_plan(&f, &q, o, &r) && r.fits) hi = mid;
        else lo = mid + 1;
      }
      q.offload_layers = lo;
      /* a chunk's layers: the model's, well under 2^31 (graph limits) */
      snprintf(what, sizeof what, "offload %d layers' activations a chunk (--offload activations:%d)",
               (int)lo, (int)lo);
    } else {
      q.offload_layers = 0;
      snprintf(what, sizeof what, "offload the activations (--offload activations)");
    }
    if (try_plan(&f, &q, o, &r)) add_fix(&f, &q, o, &r, what);
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

/* ---- what the software stack holds, by chip kind ---- */

#define MIB 1048576.0
/* GPU: the CUDA context with its loaded kernels, measured at the first CUDA
** call of a PyTorch process: 723 MiB (discuss.pytorch.org, "What is the
** reason for pytorch's GPU memory floor?", t/73021; ~700-800 MB in t/81330).
** CUDA 11.7+ lazy module loading can lower it: an upper figure. */
#define GPU_CONTEXT_BYTES (723 * MIB)
/* cuBLAS workspaces: Transformer Engine keeps one per stream, 4 streams, of
** 32 MiB on Hopper and later, 4 MiB before (TE pytorch/module/base.py,
** get_cublas_workspace_size_bytes, get_num_cublas_streams). */
#define GPU_CUBLAS_STREAMS 4
#define GPU_CUBLAS_WS_HOPPER (32 * MIB)
#define GPU_CUBLAS_WS_OLDER (4 * MIB)
/* NCCL: one communicator's buffers, measured on 4 A100s over NVLink after a
** 4 MB all-reduce in each group: 688 MB for a group of more than 2 GPUs,
** 544 MB for 2 (NVIDIA/nccl issue #964, 2023; MiB as nvidia-smi prints). */
#define GPU_NCCL_GROUP_BYTES (688 * MIB)
#define GPU_NCCL_PAIR_BYTES (544 * MIB)
/* PyTorch's caching allocator: on eight LLM fine-tuning and training setups
** on A100-80GB (recompute, ZeRO, offload, LoRA) GMLake removes 15 % of
** fragmentation on average (up to 33 %), i.e. the caching allocator left
** that share of its reserved memory unusable (Guo et al., ASPLOS 2024,
** arXiv:2401.08156, abstract and §6). Applied to what a step allocates and
** frees (activations, temporaries) when the plan recomputes or offloads
** (stage_mem); the states live in buffers allocated once (Megatron-Core's
** contiguous param_and_grad_buffer). */
#define GPU_FRAGMENTATION 0.15
/* TPU: the runtime keeps HBM outside XLA's allocator: memory_stats()
** bytes_limit was 34,088,157,184 B of a 32 GiB chip (259 MiB held back;
** pytorch/xla PR #7086, 2024; 1.25 GiB on a v4 with the 2023 runtime,
** jax issue #1491). XLA assigns every buffer when it compiles the step
** (buffer assignment), so no caching allocator fragments at run time. */
#define TPU_RUNTIME_BYTES (259 * MIB)

static void runtime_for(const hw_model *hw, mem_opts *o) {
  if (hw->kind == HW_GPU) {
    /* Hopper and later: the chips with fp8 units (TE keys its workspace on
    ** compute capability >= 9.0, the generation that added fp8) */
    bool hopper = hw_peak_flops(hw, HW_FP8) > 0;
    o->runtime_bytes = GPU_CONTEXT_BYTES +
                       GPU_CUBLAS_STREAMS * (hopper ? GPU_CUBLAS_WS_HOPPER : GPU_CUBLAS_WS_OLDER);
    o->comm_group_bytes = GPU_NCCL_GROUP_BYTES;
    o->comm_pair_bytes = GPU_NCCL_PAIR_BYTES;
    o->fragmentation = GPU_FRAGMENTATION;
    /* Blackwell reads fp8 operands in either layout (TE's
    ** is_gemm_with_all_layouts_supported: compute capability >= 10.0, the
    ** generation that added the MX formats) */
    o->gemm_any_layout = hw_peak_flops(hw, HW_MXFP8) > 0;
  } else if (hw->kind == HW_TPU) {
    o->runtime_bytes = TPU_RUNTIME_BYTES;
  }
}

void mem_setup(const model *m, const hw_model *hw, const plan *p, mem_opts *o, plan *mp) {
  *o = mem_opts_from_train(&m->train, (double)m->trainable_params / (double)m->params,
                           (double)hw->chip.hbm_bytes);
  o->no_dropout = m->info.tf.dropout <= 0;
  o->flash_attention = p->attention == PLAN_ATTN_FLASH;
  o->expert_params = (double)m->expert_params;
  /* the busiest expert chip's routed rows: a padded capacity, or uneven
  ** routing's share (plan_moe_rows) */
  o->capacity_factor = plan_moe_rows(p, &m->info.tf);
  runtime_for(hw, o);
  /* the framework's memory features (framework.c, each with its source):
  ** torchtitan's "selective" is its op-level policy; MaxText keeps its
  ** parameters in weight_dtype float32 and casts them to dtype bfloat16
  ** where a layer uses them, Adam's mu inheriting weight_dtype
  ** (configs/base.yml: weight_dtype, dtype, mu_dtype; grad_dtype float32):
  ** 4 + 4 + 8 B a parameter; torchtitan's loss is
  ** F.cross_entropy(pred.flatten(0, 1).float(), ..), eager and unfused
  ** (torchtitan@9dec370 train.py:131-138): log_softmax saves its fp32
  ** output (the stored logits, 4 B) and its backward holds the fp32
  ** gradient it is given and the fp32 one it returns, 8 B a logit beside
  ** them; Megatron-Bridge keeps its gradient buffers in bf16 */
  int f = p->framework, nf = 0;
  while (framework_names[nf]) nf++;
  if (f >= 0 && f < nf) {
    const framework *fw = &frameworks[f];
    o->fp32_weights_only = fw->weights_fp32_only;
    o->grads_reduced_16bit = fw->grads_reduced_16bit;
    o->op_selective = fw->selective_mm_share > 0;
    o->dots_selective = fw->jax_remat;
    if (fw->logit_grad_bytes > 0) o->logit_grad_bytes = fw->logit_grad_bytes;
    /* Megatron's vocab-parallel cross entropy writes its gradient in place
    ** (loss_grad_bytes) */
    o->logit_grad_in_place = fw->loss_grad_in_place;
    if (fw->grads_16bit || (fw->fp16_grads_16bit && p->precision == GDT_F16))
      o->fp32_grads = false;
    /* fp8 parameters: a Transformer Engine recipe's, under full training
    ** with an fp32 master (a LoRA base keeps its own format) */
    o->lowp_params = fw->lowp_params && quant_bytes(p->gemm) > 0 && o->master_fp32 &&
                     !o->fp32_weights_only &&
                     (o->trainable_fraction <= 0 || o->trainable_fraction >= 1);
  }
  /* --weight-dtype bf16 (MaxText weight_dtype=bfloat16): the parameters in
  ** the compute dtype and no fp32 master; optax's Adam keeps its moments
  ** in the parameters' dtype (mu_dtype unset), the gradients are theirs:
  ** 2 + 2 + 2 x 2 = 8 B a parameter */
  if (p->bf16_weights) {
    o->master_fp32 = o->fp32_grads = o->fp32_weights_only = o->lowp_params = false;
  }
  /* XLA (every TPU stack) keeps the logits in the dot's dtype: MaxText
  ** computes them in bf16 (base.yml logits_dot_in_fp32: False) and its
  ** fp32 cast (cast_logits_to_fp32: True) is elementwise, fused by XLA
  ** into the loss's reductions rather than stored; the cast's transpose
  ** in JAX's autodiff turns the fp32 cotangent back to bf16 before the
  ** two backward dots, so the logits' gradient is stored in bf16 too */
  if (hw->kind == HW_TPU) o->logit_bytes = elem_bytes(p->precision);
  *mp = *p;
}

double mem_checkpoint_bytes(const model *m) { return (double)m->trainable_params * (2 + 4 + 4 + 4); }
