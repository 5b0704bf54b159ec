/*
** serve_step.c -- see serve_step.h. The graphs are the training step's
** builders with forward_only (no backward, no optimizer) and, for decode,
** kv_cache; they are timed by step_time_graph_gemm, the function that
** times a training step's layers (the step's own module: step_int.h).
*/
#include "serve_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "coll.h"
#include "step_int.h"

/* Names and what they mean; sources in docs/serving.md. */
const serve_precision serve_precisions[] = {
    {"bf16", "bf16", GDT_BF16, GDT_PRED, HW_BF16, "bf16 weights and activations (the checkpoint as trained)"},
    {"fp16", "fp16", GDT_F16, GDT_PRED, HW_FP16,
     "fp16 weights and activations (chips without bf16: V100, T4)"},
    {"fp8", "bf16", GDT_F8, GDT_F8, HW_FP8,
     "W8A8 fp8: e4m3 weights, activations and KV cache, GEMMs on the fp8 unit (TensorRT-LLM "
     "ModelOpt checkpoints)"},
    {"int8", "bf16", GDT_S8, GDT_S8, HW_INT8,
     "W8A8 int8: int8 weights, activations and KV cache, GEMMs on the int8 unit (SmoothQuant)"},
    {"int8-wo", "bf16", GDT_S8, GDT_PRED, HW_BF16,
     "weight-only int8: int8 weights dequantized to bf16 on load, bf16 GEMMs"},
    {"int4", "bf16", GDT_S4, GDT_PRED, HW_BF16,
     "weight-only int4 (AWQ/GPTQ, groups of 128): dequantized to bf16 on load, bf16 GEMMs"},
    {NULL, NULL, GDT_PRED, GDT_PRED, HW_BF16, NULL},
};

const serve_precision *serve_precision_find(const char *name) {
  for (int i = 0; name && serve_precisions[i].name; i++)
    if (strcmp(serve_precisions[i].name, name) == 0) return &serve_precisions[i];
  return NULL;
}

void serve_precision_names(char *buf, size_t n) {
  size_t used = 0;
  if (n) buf[0] = 0;
  for (int i = 0; serve_precisions[i].name && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", serve_precisions[i].name);
}

double serve_spec_tokens(int64_t k, double a) {
  if (k <= 0) return 1;
  if (a >= 1) return (double)(k + 1);
  if (a <= 0) return 1;
  return (1 - pow(a, (double)(k + 1))) / (1 - a);
}

double serve_kv_bytes(const model *m, int64_t tp, int64_t pp, int64_t tokens, double elem_bytes) {
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers == 0 || d->encoder) return 0;
  tp = tp > 1 ? tp : 1, pp = pp > 1 ? pp : 1;
  double paged = ceil((double)tokens / SERVE_PAGE_TOKENS) * SERVE_PAGE_TOKENS;
  /* MLA caches the compressed latent and the shared rotary key (DeepSeek-V2
  ** sec. 2.1.2: (d_c + d_h^R) per token and layer), whole on every chip */
  double per_layer = d->kv_lora_rank > 0 ? (double)(d->kv_lora_rank + d->qk_rope_head_dim)
                                         : 2.0 * (double)(d->kv_heads >= tp ? d->kv_heads / tp : 1) *
                                               (double)d->head_dim;
  /* a recurrent layer keeps one state a sequence instead, whatever its
  ** length: Mamba-2's heads x head_dim x ssm_state, a Gated DeltaNet's
  ** value heads x dk x dv, in fp32 (the scans' final state: HF's
  ** torch_chunk_gated_delta_rule and Mamba's chunk scan return it in
  ** float32), and the causal conv's last K - 1 inputs in the cache's dtype */
  double t_ = (double)tp;
  double mamba = (double)(d->mamba_heads * d->mamba_head_dim * d->ssm_state) / t_ * 4 +
                 (double)(d->conv_kernel - 1) *
                     (double)(d->mamba_heads * d->mamba_head_dim + 2 * d->ssm_groups * d->ssm_state) /
                     t_ * elem_bytes;
  double gdn = (double)(d->gdn_v_heads * d->gdn_k_dim * d->gdn_v_dim) / t_ * 4 +
               (double)(d->gdn_conv - 1) *
                   (double)(2 * d->gdn_k_heads * d->gdn_k_dim + d->gdn_v_heads * d->gdn_v_dim) / t_ *
                   elem_bytes;
  double bytes = 0;
  for (int64_t i = 0; i < d->layers; i++) {
    int k = wl_tf_layer_kind(d, i);
    if (k & WL_LAYER_MAMBA) bytes += mamba;
    if (k & WL_LAYER_GDN) bytes += gdn;
    if (k & (WL_LAYER_MAMBA | WL_LAYER_GDN | WL_LAYER_NO_MIXER)) continue; /* no keys, no values */
    /* a sliding-window layer keeps only its window; a sparse-attention
    ** one every key (its indexer may pick any), and the indexer's own key */
    bool local = (k & WL_LAYER_LOCAL) && d->window > 0 && d->dsa_topk == 0;
    double t = local && (double)d->window < paged ? (double)d->window : paged;
    bytes += (per_layer + (double)d->dsa_dim) * t * elem_bytes;
  }
  return bytes / (double)pp;
}

/* ---- timing one graph ---- */

typedef struct {
  double t;      /* forward time on one chip */
  double attn;   /* of which the attention core */
  double bytes;  /* weights and their scales held (GRAPH_WEIGHT | GRAPH_AUX) */
  double act;    /* the largest forward value, x2 (its input alive beside it) */
  double hbm, flops; /* layer 0's kernels: traffic and arithmetic (for the bound) */
} fwd_cost;

/* The head's ops (final norm, LM head, loss: scope "head", transformer.c). */
static bool in_head(const graph_op *op) {
  return op->name && strncmp(op->name, "head/", 5) == 0;
}

/* The weights held, and the largest forward value in *largest; without
** the head's values when skip_head (a prefill computes the head on each
** prompt's last token only: see tf_forward), and without the attention
** scores under a fused attention kernel (flash > 0): FlashAttention keeps
** them in on-chip memory a block at a time (Dao et al. 2022, sec. 3.1),
** never a whole [B, kv, S, group, T] tensor in HBM -- the rank-5 values the
** step's timing takes as the attention core (stepcost.c). */
static double weight_bytes(const graph *g, bool skip_head, double flash, double *largest) {
  double w = 0;
  *largest = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    double b = graph_bytes(&op->out);
    if (op->kind == GOP_PARAMETER && (op->flags & (GRAPH_WEIGHT | GRAPH_AUX))) w += b;
    else if (op->kind != GOP_PARAMETER && op->kind != GOP_CONSTANT && b > *largest &&
             !(skip_head && in_head(op)) && !(flash > 0 && op->out.rank == 5))
      *largest = b;
  }
  return w;
}

/* The share of a MoE layer's experts that `tokens` tokens reach, each
** routed to top_k of E experts: an expert is missed when every token's k
** picks avoid it, (1 - k/E)^tokens under uniform, independent routing (the
** balance the router's auxiliary loss trains for); 0 for a dense model. A
** decode step of a few sequences reads those experts' weights only: at
** batch 1, Mixtral's 2 of 8. */
static double experts_hit(const model *m, double tokens) {
  const wl_tf_dims *d = &m->info.tf;
  if (d->experts <= 0) return 0;
  double k = d->top_k > 0 ? (double)d->top_k : 1, e = (double)d->experts;
  if (k >= e) return 1;
  return 1 - pow(1 - k / e, tokens);
}

static int time_fwd(const hw_model *hw, const hw_model *ghw, const model *one, double flash,
                    bool skip_head, double tokens, opcost *cache, fwd_cost *f, char *err,
                    size_t errn) {
  phase_times t;
  op_times ops = {0};
  double moe = experts_hit(one, tokens);
  step_kernels sk = {.flash = flash, .moe = moe};
  int rc = step_time_graph_gemm(hw, ghw, one->g, &sk, cache, &t, &ops, err, errn);
  if (rc != 0) {
    free(ops.v);
    return -1;
  }
  f->t = t.t[GRAPH_FORWARD];
  f->attn = t.attn_fwd;
  double largest;
  f->bytes = weight_bytes(one->g, skip_head, flash, &largest);
  f->act = 2 * largest;
  f->hbm = f->flops = 0;
  for (int i = 0; i < ops.n; i++) f->hbm += ops.v[i].bytes, f->flops += ops.v[i].flops;
  free(ops.v);
  return 0;
}

graph_dtype serve_act_dtype(const serve_precision *p) {
  return p->gemm == HW_INT8 || p->gemm == HW_FP8 ? p->weight_dt : GDT_PRED;
}

/* The model as one chip holds it: `layers` layers (0: all) of kind `kind`
** (-1: its own), tp shard, forward only, seq new tokens after kv_cache
** cached ones a sequence, batch sequences, weights in c's precision. */
static model *derive(const model *m, const serve_cfg *c, int64_t layers, int kind, int64_t seq,
                     int64_t kv_cache, int64_t batch, char *err, size_t errn) {
  diag *d = diag_new();
  bool tf = m->info.tf.layers > 0;
  model_opts o = {.seq_len = tf ? seq : 0, .global_batch = batch, .precision = c->prec->compute,
                  .forward_only = true, .shard_tp = c->tp, .only_layers = layers,
                  .one_kind = kind >= 0, .layer_kind = kind >= 0 ? kind : 0,
                  /* experts split by tp as vLLM and TensorRT-LLM do by
                  ** default (tensor-parallel MoE; expert parallelism is opt-in) */
                  .shard_ep = m->info.tf.experts > 0 ? 1 : 0,
                  .shard_etp = m->info.tf.experts > 0 ? c->tp : 0, .kv_cache = tf ? kv_cache : 0,
                  .kv_dtype = c->prec->kv_dt,
                  .weight_dtype = c->prec->weight_dt == GDT_BF16 || c->prec->weight_dt == GDT_F16
                                      ? GDT_PRED : c->prec->weight_dt,
                  .inference = true, .act_dtype = serve_act_dtype(c->prec)};
  model *r = d ? model_derive(m, &o, d) : NULL;
  if (!r) snprintf(err, errn, "%s", d && diag_count(d) ? diag_message(d, 0) : "cannot rebuild the model");
  diag_free(d);
  return r;
}

/* The chip as a GEMM of m rows sees it. The timing model pads M to the
** chip's tile (matrix_unit.tile_m, the largest cuBLAS tile); a GEMM of few
** rows -- a decode step's, m = the batch -- gets a kernel whose tile fits
** it: on tensor cores the smallest power of two from 16, the M of the
** smallest 16-bit MMA instruction (PTX ISA, mma.sync m16n8k16), as
** skinny-GEMM kernels use (Marlin, Frantar et al. 2024: M tiles of 16).
** A systolic array (TPU MXU) streams rows through a weight-stationary
** array whose fill takes its width whatever M is: its tile stays. */
static void skinny_chip(const hw_model *in, int64_t m, hw_model *out) {
  *out = *in;
  if (in->chip.mu_kind != HW_MU_TENSOR_CORE) return;
  int64_t t = 16;
  while (t < m && t < in->chip.tile_m) t *= 2;
  if (t < out->chip.tile_m) out->chip.tile_m = t;
}

/* The bytes one decode kernel reads in a layer of kind `kind` on one chip:
** the cached keys and values of `batch` sequences of `keys` tokens (a
** sliding-window layer's window at most, a sparse-attention layer's top-k
** and its indexer's key of every token), in the cache's dtype. */
static double decode_kv_bytes(const model *m, const serve_cfg *c, int kind, int64_t keys, int64_t batch) {
  const wl_tf_dims *d = &m->info.tf;
  int64_t tp = c->tp > 1 ? c->tp : 1;
  double t = (double)keys;
  if ((kind & WL_LAYER_LOCAL) && d->window > 0 && (double)d->window < t) t = (double)d->window;
  double elem = c->prec->kv_dt == GDT_PRED ? 2 : graph_bytes(&(graph_shape){c->prec->kv_dt, 0, {0}});
  double per_token = d->kv_lora_rank > 0 ? (double)(d->kv_lora_rank + d->qk_rope_head_dim)
                                         : 2.0 * (double)(d->kv_heads >= tp ? d->kv_heads / tp : 1) *
                                               (double)d->head_dim;
  return (double)batch * (t * per_token + (double)keys * (double)d->dsa_dim) * elem;
}

/* One layer's fused decode attention on one chip: a roofline of its
** useful arithmetic -- the two dots, 4 x batch x heads x queries x keys x
** head_dim FLOPs, on the 16-bit matrix unit at its large-GEMM efficiency
** -- against its reads of the cache, plus one launch. The step model's
** GEMM padding is not applied: its query rows per KV head (the GQA group)
** are far fewer than a GEMM tile, and the decode kernels pack the group's
** heads or the split KV blocks into the tile instead (Flash-Decoding;
** TensorRT-LLM's XQA kernel). */
static double decode_attention_s(const model *m, const hw_model *hw, const serve_cfg *c, int kind,
                                 int64_t queries, int64_t keys, int64_t batch) {
  const wl_tf_dims *d = &m->info.tf;
  int64_t tp = c->tp > 1 ? c->tp : 1;
  double t = (double)keys;
  if ((kind & WL_LAYER_LOCAL) && d->window > 0 && (double)d->window < t) t = (double)d->window;
  double heads = (double)(d->heads / tp), dh = (double)(d->v_head_dim > 0 ? d->v_head_dim : d->head_dim);
  double flops = 2.0 * (double)batch * heads * (double)queries * t * ((double)d->head_dim + dh);
  /* a sparse-attention layer's indexer scores every cached key first
  ** (transformer.c dsa_indexer: 2 x heads x dim a pair), at the same rate */
  if (d->dsa_topk > 0)
    flops += 2.0 * (double)batch * (double)queries * (double)keys * (double)(d->dsa_heads * d->dsa_dim) /
             (double)(d->dsa_every > 0 ? d->dsa_every : 1);
  double eff = hw->chip.matmul_efficiency > 0 ? hw->chip.matmul_efficiency : 1;
  double compute_s = flops / hw_clocked(&hw->chip, hw_peak_16bit(hw) * eff);
  double bw = hw->chip.hbm_bw_bytes_per_s * (hw->chip.hbm_efficiency > 0 ? hw->chip.hbm_efficiency : 1);
  double read_s = decode_kv_bytes(m, c, kind, keys, batch) / bw;
  return fmax(compute_s, read_s) + (hw->chip.op_overhead_s > 0 ? hw->chip.op_overhead_s : 0);
}

/* The embedding and head of a forward of one token for each of batch
** sequences, layers of kind `kind` (-1: the model's one kind): shards of
** one and two layers at one token, less their difference. */
static int head_one_token(const model *m, const hw_model *hw, const hw_model *ghw,
                          const serve_cfg *c, int kind, int64_t batch, opcost *cache,
                          double *head_s, char *err, size_t errn) {
  hw_model sh, sg;
  skinny_chip(hw, batch, &sh);
  if (ghw) skinny_chip(ghw, batch, &sg);
  model *one = derive(m, c, 1, kind, 1, 0, batch, err, errn);
  model *two = one ? derive(m, c, 2, kind, 1, 0, batch, err, errn) : NULL;
  fwd_cost f1, f2;
  double tokens = (double)batch;
  int rc = two ? time_fwd(&sh, ghw ? &sg : NULL, one, 1, true, tokens, cache, &f1, err, errn) : -1;
  if (rc == 0) rc = time_fwd(&sh, ghw ? &sg : NULL, two, 1, true, tokens, cache, &f2, err, errn);
  model_free(one);
  model_free(two);
  if (rc == 0) *head_s = f1.t - (f2.t - f1.t);
  return rc;
}

/* One transformer forward on one chip of the replica, every layer: seq
** new tokens for each of batch sequences after kv_cache cached ones.
** Each kind of layer is timed as the training step times it (time_kind
** in stepcost.c): shards of one and of two such layers, the difference
** one layer, the rest the embedding, head and loss. */
static int tf_forward(const model *m, const hw_model *hw, const hw_model *ghw, const serve_cfg *c,
                      int64_t seq, int64_t kv_cache, int64_t batch, opcost *cache, fwd_cost *out,
                      char *err, size_t errn) {
  const wl_tf_dims *d = &m->info.tf;
  int64_t kind_n[WL_LAYER_KINDS] = {0};
  for (int64_t i = 0; i < d->layers; i++) kind_n[wl_tf_layer_kind(d, i)]++;
  int kinds = 0;
  for (int k = 0; k < WL_LAYER_KINDS; k++) kinds += kind_n[k] > 0;
  /* FlashAttention over a prompt skips the blocks a causal mask leaves out
  ** (as the training step, stepcost.c). A decode step's attention is one
  ** fused kernel too (Flash-Decoding, Dao et al. 2023; vLLM's and
  ** TensorRT-LLM's paged decode kernels): its scores stay on chip, its
  ** arithmetic is the core's (flash 1), and it reads every cached key and
  ** value once -- the memory side of its roofline, added below */
  memset(out, 0, sizeof *out);
  const hw_model *hw_in = hw, *ghw_in = ghw;
  hw_model sh, sg;
  skinny_chip(hw, seq * batch, &sh);
  if (ghw) skinny_chip(ghw, seq * batch, &sg);
  hw = &sh, ghw = ghw ? &sg : NULL;
  double head_t = 0, head_b = 0;
  int last_kind = -1;
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    if (kind_n[k] == 0) continue;
    int kind = kinds == 1 ? -1 : k;
    model *one = derive(m, c, 1, kind, seq, kv_cache, batch, err, errn);
    model *two = one ? derive(m, c, 2, kind, seq, kv_cache, batch, err, errn) : NULL;
    fwd_cost f1, f2;
    bool prefill = kv_cache == 0 && !d->encoder;
    /* over a prompt, the causal (or band) share the training step charges;
    ** a decode step's core is the whole (replaced below) */
    double flash = kv_cache == 0 ? step_flash_share(hw_in, d, kind, (double)seq, 1) : 1;
    double tokens = (double)seq * (double)batch;
    int rc = two ? time_fwd(hw, ghw, one, flash, prefill, tokens, cache, &f1, err, errn) : -1;
    if (rc == 0) rc = time_fwd(hw, ghw, two, flash, prefill, tokens, cache, &f2, err, errn);
    model_free(one);
    model_free(two);
    if (rc != 0) return -1;
    double n = (double)kind_n[k];
    double layer = f2.t - f1.t;
    if (kv_cache > 0) /* the graph's attention core, replaced by the fused decode kernel */
      layer += decode_attention_s(m, hw, c, k, seq, seq + kv_cache, batch) - (f2.attn - f1.attn);
    out->t += n * layer;
    out->bytes += n * (f2.bytes - f1.bytes);
    out->hbm += n * f1.hbm; /* layer 0's kernels: one layer of this kind */
    out->flops += n * f1.flops;
    head_t = f1.t - (f2.t - f1.t), head_b = f1.bytes - (f2.bytes - f1.bytes);
    out->act = fmax(out->act, f2.act);
    last_kind = kind;
  }
  /* A prefill needs the logits of each prompt's last token only, to sample
  ** the first output token: serving engines apply the final norm and LM
  ** head to those rows alone (vLLM's LogitsProcessor takes the last
  ** position of each prompt; TensorRT-LLM's gather_context_logits is off
  ** by default). The graph builds the head over every token, as training
  ** does; the prefill takes it at one token a prompt instead, and its
  ** values (the [tokens, vocab] logits) are left out of the activation
  ** memory above. The embedding, a gather of seq x hidden values, is then
  ** also timed at one token: under 0.1 % of a prefill. */
  if (kv_cache == 0 && !d->encoder && seq > 1 &&
      head_one_token(m, hw_in, ghw_in, c, last_kind, batch, cache, &head_t, err, errn) != 0)
    return -1;
  out->t += head_t, out->bytes += head_b; /* the layers' traffic and arithmetic only */
  return 0;
}

/* The chip for the layers' GEMMs: hw with its bf16 rate replaced by the
** precision's unit (the training step's low-precision recipe does the
** same, stepcost.c). -1 with the reason when the chip has no such unit. */
static int gemm_chip(const hw_model *hw, const serve_precision *pr, hw_model *gh, char *err,
                     size_t errn) {
  double peak = hw_peak_flops(hw, pr->gemm);
  if (peak <= 0)
    return str_errf(err, errn,
                    "%s has no %s unit (no chip.peak_flops_per_s.%s in its file): precision %s "
                    "cannot run there; bf16 or a weight-only format (int8-wo, int4) can",
                    hw->name, hw_dtype_name(pr->gemm), hw_dtype_name(pr->gemm), pr->name);
  *gh = *hw;
  gh->chip.peak_flops_per_s[HW_BF16] = gh->chip.peak_flops_per_s[HW_FP16] = peak;
  if (pr->gemm != HW_BF16 && hw->chip.fp8_matmul_efficiency > 0)
    gh->chip.matmul_efficiency = hw->chip.fp8_matmul_efficiency;
  return 0;
}

/* The tensor-parallel all-reduces of one forward: two a layer (after the
** attention and after the MLP: Megatron-LM, Shoeybi et al. 2019) of the
** tokens' hidden states in bf16, in closed form on an idle network. */
static double tp_comm(const model *m, const hw_model *hw, const serve_cfg *c, double tokens,
                      char *err, size_t errn) {
  if (c->tp <= 1) return 0;
  double bytes = tokens * (double)m->info.tf.hidden * 2;
  double one = coll_time_s(hw, c->tp, 0, COLL_ALL_REDUCE, bytes, 1, 0, COLL_AUTO, true, err, errn);
  return one < 0 ? -1 : one * 2 * (double)m->info.tf.layers;
}

/* The pipeline's hand-offs: pp - 1 sends of the tokens' hidden states. */
static double pp_p2p(const model *m, const hw_model *hw, const serve_cfg *c, double tokens,
                     char *err, size_t errn) {
  if (c->pp <= 1) return 0;
  double bytes = tokens * (double)m->info.tf.hidden * 2;
  double one = coll_time_s(hw, 2, 0, COLL_SEND_RECV, bytes, 1, 0, COLL_AUTO, true, err, errn);
  return one < 0 ? -1 : one * (double)(c->pp - 1);
}

/* Memory: vLLM reserves a fraction of the device for the CUDA context,
** the framework and fragmentation; its default gpu_memory_utilization is
** 0.9 (vLLM engine arguments), so 90 % is usable for weights, activations
** and the KV cache. */
#define SERVE_USABLE_FRACTION 0.9

static void size_memory(const model *m, const hw_model *hw, const serve_cfg *c, double weights,
                        double act, serve_result *r) {
  r->weights_bytes = weights / (double)(c->pp > 1 ? c->pp : 1);
  r->activation_bytes = act;
  r->capacity_bytes = (double)hw->chip.hbm_bytes;
  r->usable_bytes = r->capacity_bytes * SERVE_USABLE_FRACTION;
  double left = r->usable_bytes - r->weights_bytes - r->activation_bytes;
  if (r->generative) {
    /* the model's 16 bits (vLLM's kv_cache_dtype "auto"), or the 8 bits of a W8A8 precision */
    double elem = c->prec->kv_dt == GDT_PRED ? 2 : graph_bytes(&(graph_shape){c->prec->kv_dt, 0, {0}});
    r->kv_bytes_per_seq = serve_kv_bytes(m, c->tp, c->pp, c->input_tokens + c->output_tokens, elem);
    /* pages are taken as a sequence grows (PagedAttention, Kwon et al. 2023,
    ** sec. 4), and under continuous batching the sequences in flight are
    ** spread over their generation: on average each holds its prompt and
    ** half its output, which is what bounds the batch */
    r->kv_mean_bytes_per_seq = serve_kv_bytes(m, c->tp, c->pp, c->input_tokens + c->output_tokens / 2, elem);
    r->max_batch = left > 0 && r->kv_mean_bytes_per_seq > 0 ? (int64_t)floor(left / r->kv_mean_bytes_per_seq) : 0;
  } else {
    /* activations were sized at c->batch: samples scale them */
    double per = act / (double)(c->batch > 0 ? c->batch : 1);
    r->max_batch = left + act > 0 && per > 0 ? (int64_t)floor((left + act) / per) : 0;
  }
  r->fits = left >= 0 && r->max_batch >= c->batch;
}

static int serve_generative(const model *m, const hw_model *hw, const hw_model *ghw,
                            const serve_cfg *c, opcost *cache, serve_result *r, char *err,
                            size_t errn) {
  fwd_cost pre, dec;
  /* TTFT: one request's prompt alone */
  int64_t pb = c->prefill_batch > 0 ? c->prefill_batch : 1;
  if (tf_forward(m, hw, ghw, c, c->input_tokens, 0, pb, cache, &pre, err, errn) != 0) return -1;
  double pre_tokens = (double)(c->input_tokens * pb);
  double pre_comm = tp_comm(m, hw, c, pre_tokens, err, errn);
  double pre_p2p = pp_p2p(m, hw, c, pre_tokens, err, errn);
  if (pre_comm < 0 || pre_p2p < 0) return -1;
  r->ttft_s = pre.t + pre_comm + pre_p2p;
  r->prefill_tokens_per_s = pre_tokens / r->ttft_s;
  /* decode: batch sequences, each one new token (k + 1 under speculative
  ** decoding: the target verifies the drafted tokens in one pass) at the
  ** mean context over the generation */
  int64_t q = c->spec_k > 0 ? c->spec_k + 1 : 1;
  int64_t ctx = c->input_tokens + c->output_tokens / 2;
  if (tf_forward(m, hw, ghw, c, q, ctx, c->batch, cache, &dec, err, errn) != 0) return -1;
  double toks = (double)(c->batch * q);
  r->tp_comm_decode_s = tp_comm(m, hw, c, toks, err, errn);
  r->pp_p2p_decode_s = pp_p2p(m, hw, c, toks, err, errn);
  if (r->tp_comm_decode_s < 0 || r->pp_p2p_decode_s < 0) return -1;
  r->decode_step_s = dec.t + r->tp_comm_decode_s + r->pp_p2p_decode_s;
  r->decode_bytes = dec.hbm, r->decode_flops = dec.flops;
  double peak = hw_peak_flops(ghw ? ghw : hw, HW_BF16);
  double bw = hw->chip.hbm_bw_bytes_per_s;
  r->decode_bound = peak > 0 && dec.flops / peak > dec.hbm / bw ? "compute" : "memory";
  double step = r->decode_step_s;
  r->spec_tokens_per_step = serve_spec_tokens(c->spec_k, c->spec_accept);
  if (c->spec_k > 0 && c->draft) {
    /* the draft proposes k tokens one decode step at a time, on the same chips */
    serve_cfg dc = *c;
    dc.spec_k = 0, dc.draft = NULL;
    serve_result dr;
    if (serve_step(c->draft, hw, &dc, cache, &dr, err, errn) != 0) return -1;
    step += (double)c->spec_k * dr.decode_step_s;
  }
  r->tpot_s = step / r->spec_tokens_per_step;
  r->decode_tokens_per_s = (double)c->batch / r->tpot_s;
  size_memory(m, hw, c, dec.bytes, pre.act, r);
  return 0;
}

/* The bytes of the model's inputs (parameters that are not weights): what
** the host sends for one forward pass. */
static double io_bytes(const graph *g) {
  double b = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind == GOP_PARAMETER && !(op->flags & (GRAPH_WEIGHT | GRAPH_AUX)))
      b += graph_bytes(&op->out);
  }
  return b;
}

/* An edge part whose parameters fit in its on-chip SRAM runs out of it: the Edge TPU compiler caches the parameter data in the
** chip's ~8 MB SRAM and fetches from host memory, over USB, only what does
** not fit (Coral, Edge TPU Compiler, "parameter data caching"). The
** traffic is then on chip, fed to the systolic array one activation row
** and one weight column a cycle, (tile_m + tile_n) 8-bit operands a clock
** (the weight-stationary array of Jouppi et al. 2017, ISCA, sec. 2): that
** feed, not the USB link, is the memory side of each op's roofline. The
** input and output tensors still cross the host link once. */
static const hw_model *sram_resident(const hw_model *hw, const fwd_cost *f, hw_model *out) {
  if (hw->kind != HW_EDGE || hw->chip.onchip_bytes <= 0 ||
      strcmp(hw_onchip_kind_name(hw->chip.onchip_kind), "sram") != 0 ||
      f->bytes > (double)hw->chip.onchip_bytes || hw->chip.clock_hz <= 0 ||
      hw->chip.tile_m <= 0 || hw->chip.tile_n <= 0)
    return NULL;
  *out = *hw;
  out->chip.hbm_bw_bytes_per_s = (double)(hw->chip.tile_m + hw->chip.tile_n) * hw->chip.clock_hz;
  out->chip.hbm_efficiency = 1;
  return out;
}

static int serve_forward(const model *m, const hw_model *hw, const hw_model *ghw,
                         const serve_cfg *c, opcost *cache, serve_result *r, char *err,
                         size_t errn) {
  if (m->info.whole_step)
    return str_errf(err, errn,
                    "%s: family %s builds its whole training round (no forward pass to serve); "
                    "serving it is not modelled yet", m->name, m->family);
  int64_t seq = m->info.tf.encoder && c->encoder_seq > 0 ? c->encoder_seq : 0;
  model *one = derive(m, c, 0, -1, seq, 0, c->batch, err, errn);
  if (!one) return -1;
  /* an encoder's attention is served by a fused kernel, scores kept on
  ** chip (TensorRT's fused multi-head attention plugin, which NVIDIA's
  ** BERT engines and MLPerf Inference harness use; FlashAttention
  ** elsewhere): its arithmetic is the whole core's, no mask to skip (flash
  ** 1), and the scores never go to HBM */
  double flash = m->info.tf.layers > 0 && m->info.tf.encoder ? 1 : 0;
  fwd_cost f;
  /* whole samples (an encoder's sequences, a CNN's images): a MoE
  ** encoder's tokens reach every expert, taken as all */
  int rc = time_fwd(hw, ghw, one, flash, false, INFINITY, cache, &f, err, errn);
  hw_model on_chip;
  const hw_model *sram = rc == 0 ? sram_resident(hw, &f, &on_chip) : NULL;
  if (sram) {
    if (ghw == hw) ghw = sram;
    hw = sram;
    rc = time_fwd(hw, ghw, one, flash, false, INFINITY, cache, &f, err, errn);
    if (rc == 0 && hw->chip.host_link_bw_bytes_per_s > 0)
      f.t += io_bytes(one->g) / hw->chip.host_link_bw_bytes_per_s;
  }
  model_free(one);
  if (rc != 0) return -1;
  r->forward_s = r->ttft_s = f.t;
  r->samples_per_s = (double)c->batch / f.t;
  r->decode_bytes = f.hbm, r->decode_flops = f.flops;
  double peak = hw_peak_flops(ghw ? ghw : hw, HW_BF16);
  r->decode_bound = peak > 0 && f.flops / peak > f.hbm / hw->chip.hbm_bw_bytes_per_s ? "compute"
                                                                                       : "memory";
  r->spec_tokens_per_step = 1;
  size_memory(m, hw, c, f.bytes, f.act, r);
  return 0;
}

bool serve_generates(const model *m) { return m->info.tf.layers > 0 && !m->info.tf.encoder; }

int serve_encoder_takes(const model *m, int64_t seq, char *err, size_t errn) {
  model_opts o = {.seq_len = seq};
  diag *dg = diag_new();
  model *e = dg ? model_derive(m, &o, dg) : NULL;
  if (!e) snprintf(err, errn, "%s", dg && diag_count(dg) ? diag_message(dg, 0) : "out of memory");
  diag_free(dg);
  if (!e) return -1;
  model_free(e);
  return 0;
}

int serve_step(const model *m, const hw_model *hw, const serve_cfg *c, opcost *cache,
               serve_result *r, char *err, size_t errn) {
  memset(r, 0, sizeof *r);
  if (!m->spec) return str_errf(err, errn, "%s: an imported HLO module cannot be rebuilt for serving", m->name);
  if (!c->prec || c->batch < 1 || c->tp < 1 || c->pp < 1)
    return str_errf(err, errn, "serve: a precision, batch >= 1, tp >= 1 and pp >= 1 are needed");
  const wl_tf_dims *d = &m->info.tf;
  if (c->pp > 1 && (d->layers == 0 || d->layers % c->pp != 0))
    return str_errf(err, errn, "pp %lld must divide the model's %lld layers", (long long)c->pp,
                    (long long)d->layers);
  /* activations in fp16 where the chip has no bf16 unit (V100, T4, NPUs):
  ** what their runtimes compute in */
  serve_precision pc = *c->prec;
  serve_cfg cc = *c;
  if (strcmp(pc.compute, "bf16") == 0 && hw_peak_flops(hw, HW_BF16) <= 0 && hw_peak_flops(hw, HW_FP16) > 0) {
    pc.compute = "fp16";
    if (pc.gemm == HW_BF16) pc.gemm = HW_FP16;
    cc.prec = &pc;
    c = &cc;
  }
  hw_model gh;
  if (gemm_chip(hw, c->prec, &gh, err, errn) != 0) return -1;
  const hw_model *ghw = c->prec->gemm == HW_BF16 || c->prec->gemm == HW_FP16 ? NULL : &gh;
  /* a part with no 16-bit unit at all (the Edge TPU: int8 only) runs the
  ** whole model in the precision's unit, as full-integer quantization
  ** compiles it (TensorFlow Lite: every op int8) */
  if (ghw && hw_peak_16bit(hw) <= 0) hw = ghw;
  opcost *own = cache ? NULL : opcost_new(OPCOST_FORMULA);
  if (!cache && !own) return str_errf(err, errn, "out of memory");
  r->generative = serve_generates(m);
  int rc = r->generative ? serve_generative(m, hw, ghw, c, cache ? cache : own, r, err, errn)
                         : serve_forward(m, hw, ghw, c, cache ? cache : own, r, err, errn);
  opcost_free(own);
  return rc;
}
