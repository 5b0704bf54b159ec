/*
** stepcost.c -- the per-chip pieces of a step (step_costs): the model
** rebuilt as one tensor-parallel shard with one and with two layers
** (forward + backward), the difference one layer, the rest the embedding,
** head and loss. Every kernel the fusion pass forms (sim/fuse) is timed on
** the chip (sim/optime), its flops and bytes read off its lowered IR
** (sim/opcost). Then the collectives inside a layer (tensor-parallel
** all-reduces or reduce-scatter/all-gather pairs, MoE all-to-alls) and the
** point-to-point send between stages, on the network (sim/coll).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "coll.h"
#include "fuse.h"
#include "net.h"
#include "framework.h"
#include "optime.h"
#include "step_int.h"

/* ---- per-chip op times ---- */

static int push_op(op_times *ops, step_op o, char *err, size_t errn) {
  if (ops->n == ops->cap) {
    int cap = ops->cap ? 2 * ops->cap : 128;
    step_op *v = realloc(ops->v, (size_t)cap * sizeof *v);
    if (!v) return str_errf(err, errn, "out of memory");
    ops->v = v, ops->cap = cap;
  }
  ops->v[ops->n++] = o;
  return 0;
}

/* Times g on hw kernel by kernel, as the fusion pass groups its ops
** (sim/fuse.h, with XLA's producer duplication): each kernel's HBM traffic
** is what crosses its boundary, its arithmetic on the matrix or vector
** unit (optime_kernel).
** With `flash`, the attention core (the ops on the [B, kv, S, group, T]
** scores and the batched dots around them) runs as one FlashAttention
** kernel: the scores never reach HBM, so those kernels cost their
** arithmetic only, and the backward recomputes the scores' product: 5
** batched GEMMs where the unfused backward has 4 (Dao et al. 2022,
** arXiv:2205.14135).
** With `ops`, also lists the kernels of layer 0 with their times. */
/* Whether the chip's file gives a measured fused-attention rate. */
static bool measured_attention(const hw_model *hw) {
  int field = hw_field_find("chip.attention_fwd_efficiency");
  return field >= 0 && hw->present[field];
}

int step_layer_kind(const wl_tf_dims *d, int kind) {
  return kind >= 0 ? kind : wl_tf_layer_kind(d, 0);
}

double step_causal_share(const hw_model *hw, double keys) {
  /* a measured rate counts the causal half, as the kernel papers do, and
  ** holds the diagonal blocks' waste in its time */
  if (measured_attention(hw)) return 0.5;
  /* else the blocks computed: of n x n blocks of 128 keys, n (n + 1) / 2
  ** (Dao 2023, FlashAttention-2 sec. 3.1.1) */
  double nb = ceil(keys / 128);
  return nb > 0 ? (nb + 1) / (2 * nb) : 1;
}

double step_flash_share(const hw_model *hw, const wl_tf_dims *d, int kind, double seq, double cp) {
  if (d->unmasked || d->layers == 0) return 1; /* no mask: the whole core */
  bool local = (step_layer_kind(d, kind) & WL_LAYER_LOCAL) && d->window > 0 && (double)d->window < seq;
  double w = (double)d->window, share = step_causal_share(hw, local ? w : seq);
  if (!local || d->window_chunked) return share;
  /* The model builds a local layer as blocks of W queries against W keys
  ** (workloads/transformer.c attention_core), which under a causal mask is
  ** Llama 4's chunked attention. A sliding window instead shows each query
  ** the W keys before it, a band of W x W per W queries: the blocks'
  ** arithmetic whole (no causal half; the kernel's block waste as the
  ** causal share counts it), less the sequence start's triangle, over the
  ** padded queries the blocks hold (this chip's seq / cp). */
  double sq = seq / (cp > 1 ? cp : 1);
  /* only the rank holding the sequence start has the triangle; under
  ** context parallelism the step waits for a rank whose queries all see W
  ** keys */
  double start = cp > 1 ? 0 : w / 2;
  double band = w > sq ? 1 : (sq - start) / (ceil(sq / w) * w);
  return 2 * share * band;
}

int step_time_graph_ops(const hw_model *hw, const graph *g, bool flash, opcost *costs,
                        phase_times *out, op_times *ops, char *err, size_t errn) {
  step_kernels k = {.flash = flash ? 1 : 0};
  return step_time_graph_gemm(hw, NULL, g, &k, costs, out, ops, err, errn);
}

/* Kernel k's grouped expert GEMM, or NULL. The MoE builder's expert dots
** and their two gradients (autodiff's transpose rule) all take [E, C, *]
** as their left operand, batched over the E experts: C is the tokens a
** group. Nothing else in a transformer layer is a rank-3 dot with one
** batch dimension (the attention's are rank 4 and 5, the linear layers'
** unbatched), and a kernel holds at most one dot. */
static const graph_op *grouped_dot(const graph *g, const fuse_plan *fp, int k) {
  for (int i = fp->first[k]; i <= fp->root[k]; i++) {
    const graph_op *op = graph_get(g, i);
    if (fp->group_of[i] != k || op->kind != GOP_DOT || op->layer < 0) continue;
    const graph_shape *l = &graph_get(g, op->in[0])->out;
    if (l->rank == 3 && op->lhs_batch.n == 1 && op->lhs_batch.d[0] == 0 && l->dim[1] > 0) return op;
  }
  return NULL;
}

/* Op m's rank-5 attention tensors ([B, kv, S, group, T] scores, [B, kv, S,
** group, D] queries and context): the widest last dim (the keys, where
** the op touches the scores) and the narrowest past 1 (the head dim; 1 is
** a per-head column, gpt-oss's sinks). 0 where it has none. */
static void op_last_dims(const graph *g, const graph_op *m, double *widest, double *narrowest) {
  *widest = *narrowest = 0;
  for (int a = -1; a < m->n_in; a++) {
    const graph_shape *sh = a < 0 ? &m->out : &graph_get(g, m->in[a])->out;
    double d = sh->rank == 5 ? (double)sh->dim[4] : 0;
    if (d > *widest) *widest = d;
    if (d > 1 && (*narrowest == 0 || d < *narrowest)) *narrowest = d;
  }
}

/* The attention core kernel k's keys a query sees: the widest last dim of
** its ops' rank-5 tensors. */
static double core_keys(const graph *g, const fuse_plan *fp, int k) {
  double keys = 0;
  for (int i = fp->first[k]; i <= fp->root[k]; i++) {
    double w, n;
    if (fp->group_of[i] != k) continue;
    op_last_dims(g, graph_get(g, i), &w, &n);
    if (w > keys) keys = w;
  }
  return keys;
}

/* Whether op m reads or writes a rank-5 attention tensor ([B, kv, S,
** group, T] scores, [B, kv, S, group, D] queries and context). */
static bool rank5(const graph *g, const graph_op *m) {
  bool r = m->out.rank == 5;
  for (int a = 0; a < m->n_in && !r; a++) r = graph_get(g, m->in[a])->out.rank == 5;
  return r;
}

bool step_attention_dot(const graph *g, const graph_op *m) {
  return m->kind == GOP_DOT && m->layer >= 0 && rank5(g, m);
}

/* A head dim of d on a systolic array w wide: the padded width over d. */
static double mxu_pad(double d, double w) { return ceil(d / w) * w / d; }

/* The head dim one of the attention core's dots spans (op_last_dims'
** narrowest). Each dot has its own: MLA's scores contract its query and key
** width (192 in DeepSeek-V3) and its context is the value width (128) */
static double dot_head_dim(const graph *g, const graph_op *m) {
  double w, n;
  op_last_dims(g, m, &w, &n);
  return n;
}

/* A measured attention kernel's time at head dim d over its time at 128 per
** FLOP: the chip's measured rates by head dim (hw_attention_head_factor),
** else on a systolic array the padding of the head to the array's width */
static double core_pad(const hw_model *hw, double d) {
  double hd = hw_attention_head_factor(hw, d);
  if (hd > 0) return 1 / hd;
  if (hw->chip.mu_kind == HW_MU_MXU && d > 0 && hw->chip.tile_n > 0)
    return mxu_pad(d, (double)hw->chip.tile_n) / mxu_pad(128, (double)hw->chip.tile_n);
  return 1;
}

/* Fused kernel k's first dot or convolution (a matrix kernel), or NULL. */
static const graph_op *kernel_dot(const graph *g, const fuse_plan *fp, int k) {
  for (int i = fp->first[k]; i <= fp->root[k]; i++) {
    const graph_op *op = graph_get(g, i);
    if (fp->group_of[i] == k && (op->kind == GOP_DOT || op->kind == GOP_CONV)) return op;
  }
  return NULL;
}

/* A forward kernel's time t by the layer submodule it computes (graph.h
** graph_module), into mod: a kernel holding a GEMM counts for the GEMM's
** module (an elementwise epilogue fused into it is that GEMM's), any other
** for its root's. The graph saves what the backward reads, so a module's
** kernels are its own: the SwiGLU of a MoE layer's experts is its silu
** and its product, two kernels the forward runs and "moe_act" runs again. */
static void module_times(const graph *g, const fuse_plan *fp, int k, const graph_op *mat,
                         double t, double mod[GRAPH_MODULES]) {
  int m = (mat ? mat : graph_get(g, fp->root[k]))->module;
  mod[m < GRAPH_MODULES ? m : GRAPH_MOD_NONE] += t;
}

step_kernels step_kernels_of(const hw_model *hw, const wl_tf_dims *d, const plan *p, int kind) {
  step_kernels k = {0};
  if (p->attention == PLAN_ATTN_FLASH)
    k.flash = step_flash_share(hw, d, kind, (double)p->seq, (double)(p->cp > 1 ? p->cp : 1));
  k.unmasked = d->unmasked && d->layers > 0;
  /* the layers timed are MoE layers: of that kind, or the model's own when
  ** every layer is MoE (a single kind) */
  k.moe = d->experts > 0 && (step_layer_kind(d, kind) & WL_LAYER_MOE) ? 1 : 0;
  k.per_expert = k.moe > 0 && framework_moe_gemm_per_expert(p->framework, p, hw);
  k.eager = p->eager;
  return k;
}

int step_time_graph_gemm(const hw_model *hw, const hw_model *gemm_hw, const graph *g,
                         const step_kernels *sk, opcost *costs, phase_times *out, op_times *ops,
                         char *err, size_t errn) {
  double flash = sk->flash, moe = sk->moe;
  bool per_expert = sk->per_expert;
  fuse_plan *fp = sk->eager ? fuse_graph_eager(g) : fuse_graph_dup(g);
  if (!fp) return str_errf(err, errn, "out of memory");
  bool measured = measured_attention(hw);
  memset(out, 0, sizeof *out);
  /* the embedding's kernels: before the first layer's forward op, after
  ** the last layer's backward op (autodiff walks the forward in reverse) */
  int first_layer_fwd = -1, last_layer_bwd = -1;
  for (int i = 0, n = graph_count(g); i < n; i++) {
    const graph_op *o = graph_get(g, i);
    if (o->layer < 0) continue;
    if (o->phase == GRAPH_FORWARD && first_layer_fwd < 0) first_layer_fwd = i;
    if (o->phase == GRAPH_BACKWARD) last_layer_bwd = i;
  }
  int rc = 0;
  for (int k = 0; k < fp->n_groups && rc == 0; k++) {
    if (fp->size[k] == 0) continue;
    int root = fp->root[k];
    const graph_op *op = graph_get(g, root);
    /* the attention core: a kernel that touches the [B, kv, S, group, T]
    ** scores -- its root (the batched dots, the elementwise softmax) or a
    ** member (the softmax's max and sum reduce them to rank 4) */
    bool core = false;
    for (int i = fp->first[k]; i <= root && !core && op->layer >= 0; i++)
      core = fp->group_of[i] == k && rank5(g, graph_get(g, i));
    graph_cost kc;
    if ((rc = opcost_kernel(costs, g, fp, k, &kc, err, errn)) != 0) break;
    optime_result r;
    /* a low-precision recipe runs the layers' linear GEMMs on its unit; the
    ** attention core and the embedding and head stay in the compute dtype */
    const hw_model *kh = gemm_hw && op->layer >= 0 && !core ? gemm_hw : hw;
    if ((rc = optime_kernel(kh, g, fp, k, &kc, &r, err, errn)) != 0) break;
    double t = r.time_s;
    /* a grouped expert GEMM at few tokens per expert streams each expert's
    ** weights for little arithmetic: its matrix time at the chip's measured
    ** grouped rate (hw_grouped_gemm_factor), the roofline kept. Those rates
    ** are measured against the tile and wave model (wave_s), not against a
    ** plain GEMM's table by shape */
    const graph_op *gd = moe > 0 && !core ? grouped_dot(g, fp, k) : NULL;
    if (gd) {
      const graph_shape *lhs = &graph_get(g, gd->in[0])->out;
      double m_grp = (double)lhs->dim[1]; /* tokens a group */
      double rhs_bytes = graph_bytes(&graph_get(g, gd->in[1])->out); /* the experts' weights */
      /* the kernel skips an expert no token reached (a grouped GEMM's
      ** problem list holds the experts with tokens: vLLM's fused_moe,
      ** TE's GroupedLinear split by tokens per expert): of the weights
      ** [E, *, *] it reads moe's share */
      double mem = r.memory_s;
      if (moe < 1 && r.bytes > 0) mem -= (1 - moe) * fmin(rhs_bytes, r.bytes) * (r.memory_s / r.bytes);
      /* and below a plain GEMM's rate even at large groups where the
      ** stack's grouped kernel is measured so (hw_grouped_gemm_ceiling, the
      ** bf16 chip's figures: a relative rate for every unit). Each device
      ** runs the kernel on its share of the rows (TPU7x: a JAX device a
      ** TensorCore, chip.devices 2), so a group there holds that share; a
      ** megacore (v5p) is one device, whose measured rates hold both cores */
      double per_device = hw->chip.devices > 1 ? m_grp / (double)hw->chip.devices : m_grp;
      /* and its expert's widths: [E, C, w] in, [E, *, w'] out -- the
      ** forward's K and N, the input gradient's N and K, the weight
      ** gradient's K and N (the tokens C contracted) */
      int64_t w_in = lhs->dim[2], w_out = gd->out.dim[gd->out.rank - 1];
      /* one expert's GEMM: the forward and the input gradient contract the
      ** width (C rows), the weight gradient the tokens (w_in rows, C deep) */
      bool wgrad = gd->lhs_contract.n == 1 && gd->lhs_contract.d[0] == 1;
      double rows = wgrad ? (double)w_in : m_grp, depth = wgrad ? m_grp : (double)w_in;
      double rate = hw_grouped_gemm_factor(kh, per_device, op->phase == GRAPH_BACKWARD) *
                    (per_expert ? hw_grouped_gemm_shape_factor(kh, rows, (double)w_out, depth) : 1) *
                    hw_grouped_gemm_ceiling(hw, op->phase == GRAPH_BACKWARD) *
                    hw_grouped_gemm_width_factor(hw, w_in, w_out);
      t = fmax(r.wave_s / rate, mem) + r.overhead_s;
    }
    if (flash > 0 && core) {
      t = 0;
      /* a measured rate holds the kernel's own tiling at the length and
      ** head dim it was measured at: its dots cost their FLOPs at that rate
      ** (the tile model's padding is in it already), read at the keys a
      ** query sees (chip.attention_seq), and at a head dim other than 128
      ** at its measured rate there (chip.attention_head_dim), else on a
      ** systolic array at the padding of the head to the array's width */
      double core_seq = 1;
      if (measured) {
        double keys = core_keys(g, fp, k);
        core_seq = hw_attention_seq_factor(hw, keys);
        /* an unmasked layer's core at the kernel's full-mask rate where the
        ** chip measured it (a sliding window's band keeps the causal table:
        ** its blocks along the diagonal are masked) */
        double full = sk->unmasked ? hw_attention_unmasked_factor(hw, keys) : 0;
        if (full > 0) core_seq = full;
      }
      for (int i = fp->first[k]; i <= root && rc == 0; i++) {
        if (fp->group_of[i] != k) continue;
        const graph_op *m = graph_get(g, i);
        bool dot = m->kind == GOP_DOT;
        /* a measured kernel rate already holds its softmax: only the dots
        ** count; without one, the softmax's arithmetic is added to them */
        if (!dot && measured) continue;
        optime_result mr;
        if ((rc = optime_op(hw, g, i, &mr, err, errn)) != 0) break;
        /* a dot fused in beside the core that does not touch the scores
        ** (the backward's output-projection gradient, joined to the core's
        ** transpose) is a plain GEMM: its own time, no mask, no rate */
        if (dot && !rank5(g, m)) {
          t += mr.time_s;
          continue;
        }
        /* the kernel's dots at its measured fraction of the peak, not a
        ** plain GEMM's */
        const hw_chip *c = &hw->chip;
        bool back = m->phase == GRAPH_BACKWARD;
        double eff = back ? c->attention_bwd_efficiency : c->attention_fwd_efficiency;
        /* without a measured rate the dots run on the tile model, at the
        ** chip's large-GEMM fraction: a head narrower than the tile pads */
        double dot_s = mr.compute_s;
        if (dot && measured && eff > 0 && m->n_in > 0)
          dot_s = mr.flops * core_pad(hw, dot_head_dim(g, m)) /
                  hw_clocked(c, optime_peak_flops(hw, graph_get(g, m->in[0])->out.dtype) * eff *
                                    core_seq);
        t += flash * dot_s * (dot && back ? STEP_FLASH_BWD_DOTS : 1) + (dot ? mr.overhead_s : 0);
      }
    }
    double n = (double)op->count;
    out->t[op->phase] += t * n;
    if (op->layer < 0 && ((op->phase == GRAPH_FORWARD && root < first_layer_fwd) ||
                          (op->phase == GRAPH_BACKWARD && last_layer_bwd >= 0 && root > last_layer_bwd)))
      out->first[op->phase] += t * n;
    /* a matrix kernel: the forward's other than the core (what an op-level
    ** recompute picks from), and the trace's category */
    const graph_op *mat = kernel_dot(g, fp, k);
    bool matrix = mat != NULL;
    if (op->phase == GRAPH_FORWARD) module_times(g, fp, k, mat, t * n, out->mod_fwd);
    if (op->phase == GRAPH_FORWARD && core) out->attn_fwd += t * n;
    if (op->phase == GRAPH_FORWARD && !core && matrix) out->mm_fwd += t * n;
    if (rc == 0 && ops && op->layer == 0 && t > 0 && op->phase != GRAPH_OPTIMIZER) {
      rc = push_op(ops, (step_op){root, fp->size[k], matrix, op->phase, t * n, r.flops * n,
                                         r.bytes * n},
                   err, errn);
    }
  }
  fuse_free(fp);
  return rc;
}


/* A non-transformer model's per-chip costs: its whole graph at one
** micro-batch (layer_fwd_s, layer_bwd_s: forward and backward of the
** micro-batch; optimizer_s: the update), and the bytes of its gradients. */
static int costs_generic(const model *m, const hw_model *hw, const plan *p, step_result *r,
                         char *err, size_t errn) {
  model *own;
  const model *one = step_shard_of(m, p, 0, &own, err, errn);
  if (!one) return -1;
  phase_times t;
  /* TF32: every fp32 matmul and convolution on the tensor cores (a CNN's
  ** classifier matmul too, which PyTorch's default would keep in fp32: a
  ** small part of its work) */
  hw_model th;
  if (p->gemm == PLAN_GEMM_TF32) {
    th = *hw;
    th.chip.peak_flops_per_s[HW_FP32] = plan_gemm_peak_flops(hw, p);
    hw = &th;
  }
  step_kernels k = {.eager = p->eager};
  int rc = step_time_graph_gemm(hw, NULL, one->g, &k, p->cost_cache, &t, NULL, err, errn);
  if (rc == 0) {
    r->layer_fwd_s = t.t[GRAPH_FORWARD];
    r->layer_bwd_s = t.t[GRAPH_BACKWARD];
    r->optimizer_s = t.t[GRAPH_OPTIMIZER];
    r->layers_per_stage = 1;
    /* gradient accumulation, as for transformers (step_costs) */
    r->grad_accum_layer_s = (double)one->trainable_params * 6 /
                            (hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency);
  }
  model_free(own);
  return rc;
}

/* The model as one chip of plan p holds it: its tensor-parallel shard at
** one micro-batch, with `layers` layers (0: all), built from the model in
** memory (model_derive: no file is read). An HLO module is its own shard:
** *owned stays NULL and m itself comes back. */
const model *step_shard_of(const model *m, const plan *p, int64_t layers, model **owned,
                           char *err, size_t errn) {
  return step_shard_kind_of(m, p, layers, -1, owned, err, errn);
}

const model *step_shard_kind_of(const model *m, const plan *p, int64_t layers, int kind,
                                model **owned, char *err, size_t errn) {
  *owned = NULL;
  if (!m->spec) return m;
  diag *d = diag_new();
  model_opts o = {.seq_len = p->seq > 0 ? p->seq : 0, /* 1 too: a given --seq 1 is used */
                  .global_batch = m->info.whole_step ? 0 : p->mbs, .shard_tp = p->tp,
                  .only_layers = layers, .precision = plan_precision_name(p->precision),
                  .one_kind = kind >= 0, .layer_kind = kind >= 0 ? kind : 0,
                  .shard_cp = p->cp > 1 ? p->cp : 0,
                  /* always given for a MoE model: the expert layers are
                  ** split by ep and etp, not by tp (Megatron-Core) */
                  .shard_ep = m->info.tf.experts > 0 ? (p->ep > 1 ? p->ep : 1) : 0,
                  .shard_etp = p->etp > 1 ? p->etp : 0,
                  .ep_load = plan_moe_load(p)};
  *owned = d ? model_derive(m, &o, d) : NULL;
  if (!*owned) snprintf(err, errn, "%s", d && diag_count(d) ? diag_message(d, 0) : "cannot rebuild the model");
  diag_free(d);
  return *owned;
}

/* The plan with a kernel-cost cache: its own, or a new one in *own (the
** caller frees it) for this call's timings to share. */
int step_with_cache(plan *p, opcost **own, char *err, size_t errn) {
  *own = NULL;
  if (p->cost_cache) return 0;
  *own = opcost_new(p->op_costs);
  if (!*own) return str_errf(err, errn, "out of memory");
  p->cost_cache = *own;
  return 0;
}

const hw_model *step_layer_hw(const hw_model *hw, const plan *p, hw_model *ah, hw_model *gh,
                              const hw_model **ghw) {
  /* a framework calling another kernel than the chip's best
  ** (FlashAttention-1's generation, FlashAttention-2 or cuDNN on Hopper):
  ** that kernel's measured rates (framework_attention_kernel) */
  double fe, be;
  const char *field;
  const double *seq;
  if (framework_attention_kernel(p->framework, p->attn_kernel, &hw->chip, &fe, &be, &field, &seq)) {
    *ah = *hw;
    ah->chip.attention_fwd_efficiency = fe;
    ah->chip.attention_bwd_efficiency = be;
    /* and its rates by sequence length, where the chip holds them apart */
    if (seq) memcpy(ah->chip.attention_seq_eff, seq, sizeof ah->chip.attention_seq_eff);
    hw = ah;
  }
  /* the core in fp8: cuDNN's fp8 (or MXFP8) kernel over its bf16 one,
  ** measured (chip.attention_fp8_*_speedup, attention_mxfp8_*); the
  ** framework's kernel is cuDNN's then (framework_check_fp8_attention) */
  double f8, b8;
  if (framework_fp8_attention(p, hw, &f8, &b8)) {
    if (hw != ah) *ah = *hw;
    ah->chip.attention_fwd_efficiency *= f8;
    ah->chip.attention_bwd_efficiency *= b8;
    hw = ah;
  }
  /* the low-precision unit for the layers' GEMMs */
  *ghw = NULL;
  if (p->gemm == PLAN_GEMM_TF32) { /* an fp32 model's GEMMs on the TF32 tensor cores */
    *gh = *hw;
    gh->chip.peak_flops_per_s[HW_FP32] = plan_gemm_peak_flops(hw, p);
    *ghw = gh;
  } else if (p->gemm != PLAN_GEMM_NATIVE) {
    *gh = *hw;
    gh->chip.peak_flops_per_s[HW_BF16] = gh->chip.peak_flops_per_s[HW_FP16] =
        plan_gemm_peak_flops(hw, p);
    if (hw->chip.fp8_matmul_efficiency > 0) gh->chip.matmul_efficiency = hw->chip.fp8_matmul_efficiency;
    *ghw = gh;
  }
  return hw;
}

static int costs_cached(const model *m, const hw_model *hw, const plan *pl, coll_memo *memo,
                        step_result *r, char *err, size_t errn);

int step_costs(const model *m, const hw_model *hw, const plan *pl, step_result *r, char *err,
               size_t errn) {
  return step_costs_memo(m, hw, pl, NULL, r, err, errn);
}

int step_costs_memo(const model *m, const hw_model *hw, const plan *pl, coll_memo *memo,
                    step_result *r, char *err, size_t errn) {
  plan p = *pl;
  opcost *own;
  if (step_with_cache(&p, &own, err, errn) != 0) return -1;
  int rc = costs_cached(m, hw, &p, memo, r, err, errn);
  r->op_costs = opcost_get_stats(p.cost_cache);
  opcost_free(own);
  return rc;
}

/* One layer of kind `kind` (-1: the model's own first layers) timed on one
** chip: the shards of one and two such layers, the difference one layer,
** the rest (of the one-layer shard) the embedding, head and loss. */
typedef struct {
  phase_times layer, head;
  double layer_params, head_params;
  double layer_weights, head_weights; /* all of them, trainable or frozen */
  /* one layer's grouped expert GEMMs, summed over them: the experts a
  ** kernel holds less one (what a per-expert loop launches beyond the one
  ** kernel the graph counts), per phase */
  double extra_launches[GRAPH_PHASE_COUNT];
} kind_cost;

/* For each phase, sum over g's grouped expert GEMM kernels (grouped_dot)
** of their experts (the batch dimension of [E, C, *]) less one. */
static int grouped_extra(const graph *g, double out[GRAPH_PHASE_COUNT], char *err, size_t errn) {
  fuse_plan *fp = fuse_graph_dup(g);
  if (!fp) return str_errf(err, errn, "out of memory");
  memset(out, 0, GRAPH_PHASE_COUNT * sizeof *out);
  for (int k = 0; k < fp->n_groups; k++) {
    const graph_op *gd = fp->size[k] ? grouped_dot(g, fp, k) : NULL;
    if (!gd) continue;
    const graph_op *root = graph_get(g, fp->root[k]);
    double experts = (double)graph_get(g, gd->in[0])->out.dim[0];
    if (experts > 1) out[root->phase] += (experts - 1) * (double)root->count;
  }
  fuse_free(fp);
  return 0;
}

static int time_kind(const model *m, const hw_model *hw, const hw_model *ghw, const plan *p,
                     int kind, kind_cost *kc, char *err, size_t errn) {
  model *one, *two;
  if (!step_shard_kind_of(m, p, 1, kind, &one, err, errn)) return -1;
  if (!step_shard_kind_of(m, p, 2, kind, &two, err, errn)) {
    model_free(one);
    return -1;
  }
  phase_times t1, t2;
  step_kernels sk = step_kernels_of(hw, &m->info.tf, p, kind);
  bool moe = sk.moe > 0;
  int rc = step_time_graph_gemm(hw, ghw, one->g, &sk, p->cost_cache, &t1, NULL, err, errn);
  if (rc == 0) rc = step_time_graph_gemm(hw, ghw, two->g, &sk, p->cost_cache, &t2, NULL, err, errn);
  double x1[GRAPH_PHASE_COUNT], x2[GRAPH_PHASE_COUNT];
  if (rc == 0 && moe) rc = grouped_extra(one->g, x1, err, errn);
  if (rc == 0 && moe) rc = grouped_extra(two->g, x2, err, errn);
  for (int ph = 0; ph < GRAPH_PHASE_COUNT; ph++)
    kc->extra_launches[ph] = rc == 0 && moe ? x2[ph] - x1[ph] : 0;
  kc->layer_params = (double)(two->trainable_params - one->trainable_params);
  kc->head_params = (double)one->trainable_params - kc->layer_params;
  kc->layer_weights = (double)(two->params - one->params);
  kc->head_weights = (double)one->params - kc->layer_weights;
  model_free(one);
  model_free(two);
  if (rc != 0) return -1;
  for (int ph = 0; ph < GRAPH_PHASE_COUNT; ph++) {
    kc->layer.t[ph] = t2.t[ph] - t1.t[ph];
    kc->head.t[ph] = t1.t[ph] - kc->layer.t[ph];
    kc->head.first[ph] = t1.first[ph];
  }
  kc->layer.attn_fwd = t2.attn_fwd - t1.attn_fwd;
  kc->layer.mm_fwd = t2.mm_fwd - t1.mm_fwd;
  for (int mod = 0; mod < GRAPH_MODULES; mod++)
    kc->layer.mod_fwd[mod] = t2.mod_fwd[mod] - t1.mod_fwd[mod];
  return 0;
}

/* The share of a dense layer's linear-GEMM FLOPs in its column-parallel
** linears (Megatron's QKV and FC1, the gate with it; the rest are the
** row-parallel output projection and FC2): the widths they produce, each
** from the hidden size, over all four's. */
static double column_parallel_share(const wl_tf_dims *d) {
  double hd = (double)(d->head_dim ? d->head_dim : d->hidden / (d->heads > 0 ? d->heads : 1));
  double q = (double)d->heads * hd, kv = (double)(d->kv_heads ? d->kv_heads : d->heads) * hd;
  double ffn = (double)d->ffn_hidden, col = q + 2 * kv + (d->gated ? 2 : 1) * ffn;
  double all = col + q + ffn;
  return all > 0 ? col / all : 0;
}

/* Quantizing the operands of a layer's linear GEMMs for a low-precision
** recipe, per micro-batch: elementwise passes over HBM. Forward: each
** GEMM's input; backward: each GEMM's output gradient. Every operand is
** written twice, rowwise and columnwise (the transposed copy the other
** GEMM of the backward reads: Transformer Engine's cast-transpose; MX and
** NVFP4 blocks cannot be transposed, so both are quantized): read 2 B,
** write 2 x the format's bytes. Current scaling (fp8-cs, int8 per-channel,
** NVFP4's per-tensor scale) reads the operand once more for its amax
** (Transformer Engine docs, "FP8 recipes": delayed scaling takes the scale
** from the amax history, current scaling computes it from the tensor). */
static double cast_bytes_per_elem(plan_gemm g) {
  switch (g) {
  case PLAN_GEMM_FP8:
  case PLAN_GEMM_MXFP8:
    return 2 + 2 * 1.0;
  case PLAN_GEMM_FP8_CS:
  case PLAN_GEMM_INT8:
    return 2 + 2 + 2 * 1.0;
  case PLAN_GEMM_NVFP4:
    return 2 + 2 + 2 * 0.5;
  default:
    return 0;
  }
}

/* The bytes an element of a norm-fed GEMM operand costs beyond the norm's
** own output under a stack that quantizes inside the norm
** (framework.norm_quant_fused): none when the norm writes the format
** itself (delayed scaling: the norm's fp8 rowwise and columnwise writes
** replace its 16-bit one), one quantize pass without the amax read when
** the norm kernel computes the amax (current scaling), the full pass
** otherwise (MXFP8, NVFP4, INT8: Transformer Engine quantizes the norm's
** 16-bit output; AQT is no TE stack). */
static double norm_cast_bytes_per_elem(plan_gemm g) {
  switch (g) {
  case PLAN_GEMM_FP8: return 0;
  case PLAN_GEMM_FP8_CS: return 2 + 2 * 1.0;
  default: return cast_bytes_per_elem(g);
  }
}

/* A recurrent mixer's in_proj output and out_proj input widths on one chip
** under tp (a Mamba-2 layer: z, x, B, C, dt in, d_inner out; a Gated
** DeltaNet: q, k, v, z, b, a in, the values out); false for another kind.
** What the quantized GEMM operands and context parallelism's all-to-alls
** both carry. */
static bool mixer_widths(const wl_tf_dims *d, int kind, double tp, double *in, double *out) {
  if (kind & WL_LAYER_MAMBA) {
    double din = (double)(d->mamba_heads * d->mamba_head_dim) / tp;
    *in = 2 * din + (double)(2 * d->ssm_groups * d->ssm_state + d->mamba_heads) / tp;
    *out = din;
    return true;
  }
  if (kind & WL_LAYER_GDN) {
    double kd = (double)(d->gdn_k_heads * d->gdn_k_dim) / tp,
           vd = (double)(d->gdn_v_heads * d->gdn_v_dim) / tp, nv = (double)d->gdn_v_heads / tp;
    *in = 2 * kd + 2 * vd + 2 * nv;
    *out = vd;
    return true;
  }
  return false;
}

/* Whether the plan's sequence-parallel all-gathers move fp8 anywhere
** (framework.h tp_fp8_gather, tensorwise fp8, tp > 1 with sp), and below
** whether a layer part's does: under tensorwise fp8 torchtitan's float8
** tensor-parallel styles cover the attention block and a dense feed-forward
** (models/llama3/parallelize_llama.py apply_tp); a MoE block's input is
** gathered 16-bit (experiments/llama4 apply_moe_tp: PrepareModuleInputOutput),
** as are MLA's (torchtitan's deepseek_v3 does not apply float8 TP) and the
** recurrent mixers, which torchtitan has no float8 plan for. */
static bool tp_fp8_gather_on(const plan *p) {
  return p->sp && p->tp > 1 && frameworks[p->framework].tp_fp8_gather && p->gemm == PLAN_GEMM_FP8;
}

/* ffn: the kind's feed-forward, else its mixer; false where the kind has
** no such part */
static bool tp_gathers_fp8(const plan *p, const wl_tf_dims *d, int kind, bool ffn) {
  if (!tp_fp8_gather_on(p)) return false;
  if (ffn) return !(kind & (WL_LAYER_MOE | WL_LAYER_MAMBA | WL_LAYER_NO_FFN));
  return !(kind & (WL_LAYER_MAMBA | WL_LAYER_GDN | WL_LAYER_NO_MIXER)) && d->kv_lora_rank == 0;
}

/* The elements quantized in one layer of kind k per micro-batch and chip,
** forward and backward, and the kernels that do it; of the forward's, those
** a layer norm feeds (norm: attention's QKV input, a dense MLP's FC1
** input, a Mamba-2 or Gated DeltaNet in_proj's input; not the experts',
** which come from the dispatch, nor MLA's down projections). */
static void cast_elems(const wl_tf_dims *d, const plan *p, int kind, double *fwd, double *bwd,
                       double *norm, int *kernels, int *norm_kernels) {
  double T = (double)p->mbs * (double)p->seq / (double)(p->cp > 1 ? p->cp : 1);
  double tp = (double)p->tp, H = (double)d->hidden;
  double hd = (double)(d->head_dim ? d->head_dim : d->hidden / d->heads);
  double q = (double)d->heads * hd, kv = (double)(d->kv_heads ? d->kv_heads : d->heads) * hd;
  bool moe = kind & WL_LAYER_MOE;
  double F = (double)(moe && d->moe_ffn ? d->moe_ffn : d->ffn_hidden);
  /* the routed copies: top_k a token, times the busiest chip's share
  ** (plan_moe_rows), all of which it quantizes */
  double k = moe && d->top_k ? (double)d->top_k * plan_moe_rows(p, d) : 1;
  double ftp = moe ? (double)(p->etp > 1 ? p->etp : 1) : tp; /* Megatron-Core: experts use etp */
  double up = d->gated ? 2 : 1;
  /* the operands sequence parallelism gathers (QKV's and FC1's inputs;
  ** proj's and FC2's output gradients): the full sequence, or the chip's
  ** shard where the stack casts before an fp8 all-gather (tp_gathers_fp8) */
  double gT = tp_gathers_fp8(p, d, kind, false) ? T / tp : T;
  double gF = tp_gathers_fp8(p, d, kind, true) ? T / tp : k * T;
  /* inputs: QKV, proj, FC1, FC2 */
  double af = gT * H + T * q / tp, ff = gF * H + k * T * F / ftp;
  /* output gradients: QKV (with a gated attention's gate), proj, FC1, FC2 */
  double ab = T * ((d->attn_gate ? 2 : 1) * q + 2 * kv) / tp + gT * H,
         fb = k * T * up * F / ftp + gF * H;
  double in, out; /* a Mamba-2 or Gated DeltaNet mixer: in_proj and out_proj */
  if (mixer_widths(d, kind, tp, &in, &out)) af = T * H + T * out, ab = T * in + T * H;
  if (kind & WL_LAYER_MAMBA) ff = fb = 0; /* a hybrid Mamba-2 layer has no FFN */
  if (kind & WL_LAYER_NO_FFN) ff = fb = 0;    /* a hybrid attention layer */
  if (kind & WL_LAYER_NO_MIXER) af = ab = 0;  /* a hybrid MLP or MoE layer */
  *fwd = af + ff;
  *bwd = ab + fb;
  /* the mixer's input (QKV, a Mamba-2 or Gated DeltaNet in_proj) unless
  ** MLA's (its down projections are plain TE linears in Megatron-Core's
  ** gpt_layer_specs.py; the others column_parallel_layer_norm_linear), and a
  ** dense MLP's FC1 input */
  bool mla = d->kv_lora_rank > 0, mixer = af > 0 && !mla, fc1 = ff > 0 && !moe;
  *norm = (mixer ? gT * H : 0) + (fc1 ? gF * H : 0);
  *norm_kernels = (mixer ? 1 : 0) + (fc1 ? 1 : 0);
  *kernels = (af > 0 ? 2 : 0) + (ff > 0 ? 2 : 0);
}

/* ---- mixture of experts: dispatch traffic and token reordering ---- */

/* C(a, k) / C(b, k) for a <= b: the chance that k distinct picks out of b
** all miss b - a given items. 0 when a < k. */
static double choose_ratio(int64_t a, int64_t b, int64_t k) {
  if (a < k) return 0;
  double q = 1;
  for (int64_t i = 0; i < k; i++) q *= (double)(a - i) / (double)(b - i);
  return q;
}

/* Hypergeometric: of G groups, h marked; M drawn; P(j marked drawn). */
static double hypergeom(int64_t G, int64_t h, int64_t M, int64_t j) {
  if (j > h || j > M || M - j > G - h) return 0;
  /* C(h, j) C(G - h, M - j) / C(G, M), as a product to stay in range */
  double lg = lgamma((double)h + 1) - lgamma((double)j + 1) - lgamma((double)(h - j) + 1) +
              lgamma((double)(G - h) + 1) - lgamma((double)(M - j) + 1) -
              lgamma((double)(G - h - M + j) + 1) - lgamma((double)G + 1) +
              lgamma((double)M + 1) + lgamma((double)(G - M) + 1);
  return exp(lg);
}

double step_moe_nodes_hit(const wl_tf_dims *d, int64_t nodes) {
  int64_t E = d->experts, k = d->top_k > 0 ? d->top_k : 1, N = nodes;
  if (E <= 0 || N <= 1) return 1;
  if (k > E) k = E;
  int64_t G = d->route_groups, M = d->route_topk_groups;
  int64_t per_node_experts = E / N;
  bool limited = G > 1 && M > 0 && M < G && E % G == 0;
  /* uniform balanced routing: a node is missed when all k picks avoid its
  ** E/N experts */
  if (!limited || (G % N != 0 && N % G != 0))
    return (double)N * (1 - choose_ratio(E - per_node_experts, E, k));
  int64_t sel = M * (E / G); /* the experts of the token's M groups */
  if (N % G == 0) /* a group spans N/G nodes: hit only if its group was chosen */
    return (double)N * ((double)M / (double)G) * (1 - choose_ratio(sel - per_node_experts, sel, k));
  /* a node holds h = G/N whole groups; j of them chosen */
  int64_t h = G / N;
  double hit = 0;
  for (int64_t j = 1; j <= h && j <= M; j++)
    hit += hypergeom(G, h, M, j) * (1 - choose_ratio(sel - j * (E / G), sel, k));
  return (double)N * hit;
}

/* A tensor-, context- or expert-parallel collective's time on hw: through memo
** when there is one (the same arguments give the same time:
** coll_memo_time_s calls coll_time_s on the memo's hardware, the caller's
** own, whose network fields are hw's -- costs_cached's copy of it changes
** only the attention kernels' rate, which no network reads). */
static double group_coll_s(const hw_model *hw, coll_memo *memo, const plan *p, int64_t chips,
                           int64_t stride, int64_t per, coll_op op, double bytes, char *err,
                           size_t errn) {
  /* a group whose members sit in several TPU slices: its parts joined by
  ** DCN; else inside one slice or node */
  return step_group_coll_s(memo, hw, p, chips, stride, per, op, bytes, 1, 0, COLL_AUTO, false, err,
                           errn);
}

/* One MoE dispatch (the combine moves the same bytes back) of a chip's
** `tokens` over the expert-parallel group: top_k copies of each token's
** hidden vector (16-bit) to the chips of its experts. The ep group is
** consecutive ranks after etp in the expert layers' order.
** A framework with a node-deduplicating dispatcher (DeepEP's normal
** kernels, HybridEP) sends a token over the scale-out network once per
** destination node and forwards it to that node's expert chips over
** NVLink, the two pipelined (DeepEP docs/legacy.md: EP 64 on H800 with
** CX7 400 Gb/s reaches 51 GB/s RDMA "bottleneck bandwidth" at DeepSeek-V3's
** top-4 groups, top-8 experts): the slower of the deduplicated scale-out
** exchange and the intra-node scatter sets the time. */
static double moe_a2a_s(const hw_model *hw, const wl_tf_dims *d, const plan *p, double tokens,
                        char *err, size_t errn) {
  /* latent MoE dispatches the latent rows (Megatron-Core MoELayer: fc1_latent_proj
  ** runs before the dispatcher) */
  double row_bytes = (double)(d->moe_latent > 0 ? d->moe_latent : d->hidden) * 2,
         k = (double)(d->top_k > 0 ? d->top_k : 1);
  /* the busiest chip receives (and sends back) its rows over the even
  ** share, and the exchange lasts as long as its part: a padded capacity's
  ** buffers, or uneven routing's hot chip (plan_moe_rows) */
  double rows = plan_moe_rows(p, d), hot = row_bytes * rows;
  int64_t g = step_group_node_members(hw, p->ep, p->etp > 1 ? p->etp : 1);
  /* an expert group whose members sit in several TPU slices exchanges over DCN */
  double flat = group_coll_s(hw, NULL, p, p->ep, p->etp > 1 ? p->etp : 1, g, COLL_ALL_TO_ALL,
                             tokens * k * hot, err, errn);
  /* an expert group that is a whole twisted slice: its all-to-all gains the
  ** twisted torus's throughput (sim/net.c net_a2a_twist_gain) */
  if (flat > 0 && p->slice_twisted && plan_ep_is_slice(p))
    flat /= net_a2a_twist_gain_shape(hw, p->slice_shape);
  if (flat < 0 || !framework_moe_node_dedup(p) || hw->kind != HW_GPU || p->ep % g) return flat;
  /* over NVLink the copy is per destination rank, not per expert: DeepEP's
  ** dispatch layout marks a token once for each rank that holds any of its
  ** experts (get_dispatch_layout's is_token_in_rank, deep_ep/buffer.py), the
  ** rank copies it to its own experts, and the combine returns one row a
  ** rank, summed there; HybridEP keeps that layout */
  /* (a padded capacity's buffers are an expert's each: nothing shrinks) */
  bool padded = d->capacity_factor > 0;
  double hit_r = step_moe_nodes_hit(d, p->ep);
  double nvl_bytes = padded ? tokens * k * hot
                            : tokens * hit_r * row_bytes * step_moe_node_load(rows, 1, p->ep, hit_r, false);
  int64_t gn = g < p->ep ? g : p->ep; /* the ranks a node holds of the group */
  double nvl = coll_time_s(hw, gn, gn, COLL_ALL_TO_ALL, nvl_bytes, 1, 0, COLL_AUTO, false, err, errn);
  if (nvl < 0) return -1;
  if (g >= p->ep) return fmin(flat, nvl);
  int64_t nodes = p->ep / g;
  /* one chip a node, each with its own NIC (rail-optimized): the exchange
  ** of a token's copy to each distinct node among its experts', at the
  ** node's load under uneven routing (step_moe_node_load) */
  double hit = step_moe_nodes_hit(d, nodes);
  double node = step_moe_node_load(rows, g, nodes, hit, padded);
  double rdma = coll_time_s(hw, nodes, 1, COLL_ALL_TO_ALL, tokens * hit * row_bytes * node, 1, 0,
                            COLL_AUTO, false, err, errn);
  if (rdma < 0) return -1;
  return fmin(flat, fmax(rdma, nvl));
}

double step_moe_node_load(double rows, int64_t g, int64_t nodes, double hit, bool padded) {
  if (padded || g < 1) return rows;
  double node = (rows + (double)g - 1) / (double)g;
  if (hit > 0 && node > (double)nodes / hit) node = (double)nodes / hit;
  return node > 1 ? node : 1;
}

double step_moe_reorder_bytes(const wl_tf_dims *d, const plan *p) {
  int64_t ep = p->ep > 1 ? p->ep : 1;
  if (d->experts <= 0 || ep == 1 || d->experts / ep <= 1) return 0;
  double cp = (double)(p->cp > 1 ? p->cp : 1), tp = (double)(p->tp > 1 ? p->tp : 1);
  double tokens = (double)p->mbs * (double)p->seq / cp / (p->sp ? tp : 1);
  double k = (double)(d->top_k > 0 ? d->top_k : 1);
  /* two passes (after the dispatch, before the combine), each reading and
  ** writing every received copy: k x tokens rows of hidden 16-bit values,
  ** times the busiest chip's share (plan_moe_rows) */
  return 2 * 2 * tokens * k * plan_moe_rows(p, d) *
         (double)(d->moe_latent > 0 ? d->moe_latent : d->hidden) * 2;
}

double step_coll_sm_share(const hw_model *hw, int64_t n, int64_t per) {
  if (n < 2 || hw->scale_up.kind == HW_UP_ICI_TORUS) return 0;
  int64_t ctas = n > per ? hw->scale_out.collective_ctas : hw->scale_up.collective_ctas;
  int64_t sms = hw->chip.mu_cores;
  return ctas > 0 && sms > ctas ? (double)ctas / (double)sms : 0;
}

void step_cp_pytorch_exposed(double ag_s, double hop_s, double att_s, int64_t cp, bool ring,
                             double *fwd_s, double *bwd_s) {
  *fwd_s = *bwd_s = 0;
  if (cp < 2) return;
  double n = (double)cp, blk_f = att_s / n, blk_b = 2.5 * blk_f;
  if (ring) { /* rotate method alltoall: a K/V block to the neighbour a step */
    double kv = ag_s / (n - 1);
    *fwd_s = (n - 1) * fmax(0, kv - blk_f);
    *bwd_s = (n - 1) * fmax(0, kv + hop_s - blk_b) + hop_s;
    return;
  }
  /* allgather: issued with the first block (step 0, the local causal
  ** block: 1/cp of the core's work under round-robin load balance),
  ** waited for before the second; the backward gathers again the same way */
  *fwd_s = fmax(0, ag_s - blk_f);
  *bwd_s = fmax(0, ag_s - blk_b) + (n - 1) * fmax(0, hop_s - blk_b) + hop_s;
}

double step_moe_a2a_exposed_s(double a2a_s, double other_s, double sm_share) {
  if (!(a2a_s > 0)) return 0;
  double covered = a2a_s < other_s ? a2a_s : (other_s > 0 ? other_s : 0);
  return a2a_s - covered + covered * sm_share;
}


static int costs_cached(const model *m, const hw_model *hw, const plan *pl, coll_memo *memo,
                        step_result *r, char *err, size_t errn) {
  memset(r, 0, sizeof *r);
  plan p = *pl;
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers == 0) return costs_generic(m, hw, &p, r, err, errn);
  hw_model ah, gh;
  const hw_model *ghw;
  hw = step_layer_hw(hw, &p, &ah, &gh, &ghw);
  /* 1. one layer's time on one chip, for each kind of layer the model has */
  for (int64_t i = 0; i < d->layers; i++) r->kind_n[wl_tf_layer_kind(d, i)]++;
  int kinds = 0;
  for (int k = 0; k < WL_LAYER_KINDS; k++) kinds += r->kind_n[k] > 0;
  double bw = hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency;
  double L = (double)d->layers, total_params = 0;
  kind_cost head = {0};
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    if (!r->kind_n[k]) continue;
    kind_cost kc;
    /* one kind: the model's own layers, as built (the shard it always was) */
    if (time_kind(m, hw, ghw, &p, kinds == 1 ? -1 : k, &kc, err, errn) != 0) return -1;
    if (!head.head_params && !head.head.t[GRAPH_FORWARD]) head = kc;
    r->kind_fwd_s[k] = kc.layer.t[GRAPH_FORWARD];
    r->kind_bwd_s[k] = kc.layer.t[GRAPH_BACKWARD];
    r->kind_attn_fwd_s[k] = kc.layer.attn_fwd;
    r->kind_mm_fwd_s[k] = kc.layer.mm_fwd;
    memcpy(r->kind_mod_fwd_s[k], kc.layer.mod_fwd, sizeof r->kind_mod_fwd_s[k]);
    /* a per-expert GEMM loop launches each local expert's GEMM: the
    ** launches beyond the graph's one kernel a grouped GEMM, each the
    ** chip's per-kernel launch overhead (hw op_overhead_s) */
    if (framework_moe_gemm_per_expert(p.framework, &p, hw)) {
      r->kind_fwd_s[k] += kc.extra_launches[GRAPH_FORWARD] * hw->chip.op_overhead_s;
      r->kind_bwd_s[k] += kc.extra_launches[GRAPH_BACKWARD] * hw->chip.op_overhead_s;
    }
    /* Gradient accumulation: each micro-batch after the first adds its
    ** weight gradients into the step's buffer in a pass of its own --
    ** PyTorch's AccumulateGrad, Megatron-LM's main_grad.add_ hook --
    ** reading both and writing the sum: 3 x 2 B per trainable parameter
    ** (the 16-bit dtype the gradients are all-reduced in, as below) */
    r->kind_accum_s[k] = kc.layer_params * 6 / bw;
    /* FSDP2 copies the gathered 16-bit weights out to their tensors on the
    ** compute stream, in the forward and the backward's re-gather: a read
    ** and a write of 2 B each (framework.h fsdp2_copy_out) */
    if (frameworks[p.framework].fsdp2_copy_out && p.zero >= 3) {
      r->kind_fwd_s[k] += kc.layer_weights * 4 / bw;
      r->kind_bwd_s[k] += kc.layer_weights * 4 / bw;
    }
    total_params += kc.layer_params * (double)r->kind_n[k];
    if (p.gemm != PLAN_GEMM_NATIVE) {
      double fe, be;
      int nk;
      double ne;
      int nn;
      cast_elems(d, &p, k, &fe, &be, &ne, &nk, &nn);
      double per = cast_bytes_per_elem(p.gemm) / bw;
      int nkf = nk;
      if (frameworks[p.framework].norm_quant_fused && ne > 0) {
        /* the norm-fed operands at the norm kernel's quantizing cost, and
        ** no kernels of their own where the norm writes the format */
        double nb = norm_cast_bytes_per_elem(p.gemm);
        fe -= ne;
        r->kind_fwd_s[k] += ne * nb / bw;
        if (nb == 0) nkf -= nn;
      }
      r->kind_fwd_s[k] += fe * per + nkf * hw->chip.op_overhead_s;
      r->kind_bwd_s[k] += be * per + nk * hw->chip.op_overhead_s;
    }
    /* Expert parallelism's token reordering over an all-to-all: tokens are
    ** permuted by destination before the dispatch and arrive grouped by
    ** source chip, the grouped GEMM wants them by expert, so a pass sorts
    ** them after the dispatch and one unsorts before the combine
    ** (Megatron-Core MoEAlltoAllTokenDispatcher: sort_chunks_by_idxs when
    ** num_local_experts > 1; MaxText's ragged all-to-all path sorts its
    ** local tokens the same way); the backward moves the gradients through
    ** both again. The graph's gather and scatter are the first permute and
    ** the last unpermute; these two are the rest. A node-deduplicating
    ** dispatcher (DeepEP, HybridEP) reads the tokens where they are and
    ** permutes once after the dispatch: the graph's two passes are all.
    ** Memory-bound: HBM time */
    if ((k & WL_LAYER_MOE) && !framework_moe_node_dedup(&p)) {
      double rb = step_moe_reorder_bytes(d, &p) / bw;
      int nk = rb > 0 ? 2 : 0;
      r->kind_fwd_s[k] += rb + nk * hw->chip.op_overhead_s;
      r->kind_bwd_s[k] += rb + nk * hw->chip.op_overhead_s;
    }
  }
  r->head_fwd_s = head.head.t[GRAPH_FORWARD];
  r->head_bwd_s = head.head.t[GRAPH_BACKWARD];
  r->embed_fwd_s = head.head.first[GRAPH_FORWARD];
  r->embed_bwd_s = head.head.first[GRAPH_BACKWARD];
  if (frameworks[p.framework].fsdp2_copy_out && p.zero >= 3) { /* the root unit's, the same way */
    r->head_fwd_s += head.head_weights * 4 / bw;
    r->head_bwd_s += head.head_weights * 4 / bw;
    /* the root unit holds the embedding and the head: half each, as the
    ** gradient accumulation below */
    r->embed_fwd_s += head.head_weights * 2 / bw;
    r->embed_bwd_s += head.head_weights * 2 / bw;
  }
  r->grad_accum_head_s = head.head_params * 6 / bw;
  /* the weights' low-precision copies, once a step (the first micro-batch's) */
  if (p.gemm != PLAN_GEMM_NATIVE) r->weight_cast_s = total_params * cast_bytes_per_elem(p.gemm) / bw;

  /* 2. collectives */
  int64_t cp = p.cp > 1 ? p.cp : 1;
  double tokens = (double)p.mbs * (double)p.seq / (double)cp; /* a chip's tokens of a micro-batch */
  double act = tokens * (double)d->hidden * 2;                 /* b s h, 16-bit */
  int64_t tpn = step_group_node_members(hw, p.tp, 1);
  double ar = group_coll_s(hw, memo, &p, p.tp, 1, tpn, COLL_ALL_REDUCE, act, err, errn);
  if (ar < 0) return -1;
  double rs = 0, ag = 0, ag8 = 0;
  if (p.sp) { /* a reduce-scatter and an all-gather in place of each all-reduce */
    rs = group_coll_s(hw, memo, &p, p.tp, 1, tpn, COLL_REDUCE_SCATTER, act, err, errn);
    ag = group_coll_s(hw, memo, &p, p.tp, 1, tpn, COLL_ALL_GATHER, act, err, errn);
    /* a gather of the fp8 cast, 1 B an element (tp_gathers_fp8) */
    ag8 = tp_fp8_gather_on(&p)
              ? group_coll_s(hw, memo, &p, p.tp, 1, tpn, COLL_ALL_GATHER, act / 2, err, errn)
              : ag;
    if (rs < 0 || ag < 0 || ag8 < 0) return -1;
    ar = rs + ag;
  }
  /* Megatron-Core's deferred output-layer weight gradient: a GEMM in the
  ** compute dtype, bf16 whatever the layers' recipe (the output layer is
  ** not a Transformer Engine module; fused into the
  ** fp32 main_grad, wgrad_gemm_accum_fp32) of the vocabulary shard by the
  ** hidden size over the tokens of the tensor-parallel group, its input
  ** all-gathered first under sequence parallelism
  ** (utils.py drain_embedding_wgrad_compute). Worked out for every plan
  ** with a trainable head (one cost serves the planner's plans with and
  ** without the deferral); used only with it */
  if (d->vocab > 0 && head.head_params > 0) {
    optime_result g;
    int64_t rows = p.mbs * p.seq / cp, vshard = (d->vocab + p.tp - 1) / p.tp;
    if (optime_matmul(hw, 1, vshard, d->hidden, rows, p.precision, &g, err, errn) != 0) return -1;
    r->head_wgrad_s = g.time_s < r->head_bwd_s - r->embed_bwd_s ? g.time_s : r->head_bwd_s - r->embed_bwd_s;
    r->head_wgrad_ag_s = ag;
  }
  /* Megatron: after attention and after the MLP. A parallel block (PaLM
  ** sec. 2, GPT-J) sums the two branches' partial outputs and reduces once,
  ** and both branches read one gathered input: GPT-NeoX defers the
  ** attention's reduction to the sum (ParallelTransformerLayer with
  ** gpt_j_residual: one reduce_from_model_parallel_region), and GSPMD
  ** carries the partial sums through the add */
  double tp_c = (d->parallel_block ? 1 : 2) * ar;
  /* Context parallelism: each rank's keys and values visit every other
  ** rank -- the bytes of an all-gather of them over the cp group (ring
  ** attention's cp - 1 sends, Liu et al. 2023; Megatron-Core's p2p ring),
  ** and their gradients come back the same way in the backward (K, V and
  ** dK, dV). A ring overlaps with the attention core it feeds; the
  ** all-gather variant (Llama 3) runs before it. */
  if (cp > 1) {
    double hd = (double)(d->head_dim ? d->head_dim : d->hidden / d->heads);
    double kvh = (double)(d->kv_heads ? d->kv_heads : d->heads);
    double kv_tp = kvh >= (double)p.tp ? kvh / (double)p.tp : 1; /* a tp rank's KV heads */
    /* PyTorch's context_parallel (torchtitan) moves K and V repeated to
    ** the query heads: its models repeat them before SDPA */
    if (framework_cp_repeats_kv(p.framework, d)) kv_tp = (double)d->heads / (double)p.tp;
    double kv_bytes = 2 * tokens * kv_tp * hd * 2;              /* K and V, 16-bit */
    double ag = group_coll_s(hw, memo, &p, cp, p.tp, step_group_node_members(hw, cp, p.tp),
                             COLL_ALL_GATHER, kv_bytes * (double)cp, err, errn);
    if (ag < 0) return -1;
    r->cp_comm_fwd_s = ag;
    r->cp_comm_bwd_s = 2 * ag;
    /* PyTorch's backward passes dK and dV round the ring in fp32, cp hops
    ** of twice a K/V block's bytes (its K/V rotater gathers them again):
    ** a hop is one step of the ring all-gather, a block to the neighbour */
    if (framework_cp_pytorch(p.framework)) {
      r->cp_dkv_hop_s = 2 * ag / (double)(cp - 1);
      r->cp_comm_bwd_s = ag + (double)cp * r->cp_dkv_hop_s;
    }
  }
  /* A Mamba-2 or Gated DeltaNet layer under context parallelism scans the
  ** whole sequence for 1/cp of its heads: an all-to-all takes in_proj's
  ** outputs from sequence shards to head shards before the conv and scan,
  ** another brings the scan's output back before out_proj (Megatron-Core
  ** mamba_context_parallel.py _all_to_all_cp2hp / _all_to_all_hp2cp, which
  ** gated_delta_net/common.py calls too); the backward sends their
  ** gradients the same two ways. Not overlapped: the scan waits for them. */
  double cp_mamba = 0, cp_gdn = 0;
  if (cp > 1 && (d->mamba_heads > 0 || d->gdn_every > 0)) {
    double cpn = (double)step_group_node_members(hw, cp, p.tp);
    static const int KINDS[2] = {WL_LAYER_MAMBA, WL_LAYER_GDN};
    double t[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
      double w[2];
      if (!mixer_widths(d, KINDS[i], (double)p.tp, &w[0], &w[1])) continue;
      for (int j = 0; j < 2; j++) {
        if (!(w[j] > 0)) continue;
        double a = group_coll_s(hw, memo, &p, cp, p.tp, (int64_t)cpn, COLL_ALL_TO_ALL, tokens * w[j] * 2,
                                  err, errn);
        if (a < 0) return -1;
        t[i] += a;
      }
    }
    cp_mamba = t[0], cp_gdn = t[1];
  }
  /* MoE: each routed token to its experts' chips and back (dispatch and
  ** combine), forward and again backward; a chip's tokens, 1/tp of them
  ** with sequence parallelism (Megatron-Core's alltoall dispatcher) */
  if (p.ep > 1) {
    double a2a = moe_a2a_s(hw, d, &p, tokens / (p.sp ? (double)p.tp : 1), err, errn);
    if (a2a < 0) return -1;
    r->ep_a2a_fwd_s = 2 * a2a;
  }
  /* activation offload moves what the memory model says a layer saves */
  bool offload = p.offload == PLAN_OFFLOAD_ACTIVATIONS && hw->chip.host_link_bw_bytes_per_s > 0;
  mem_opts mo;
  plan mp;
  if (offload) mem_setup(m, hw, &p, &mo, &mp);
  double sum_f = 0, sum_b = 0, sum_cf = 0, sum_cb = 0, sum_acc = 0, sum_attn = 0, sum_mm = 0;
  double sum_rep = 0, off_sum = 0;
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    if (!r->kind_n[k]) continue;
    /* a hybrid layer (one sub-block) has one of the two collectives */
    double tp_k = k & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER) ? tp_c / 2 : tp_c;
    /* the parts whose input is gathered in fp8 gather half the bytes: the
    ** mixer's and the feed-forward's each, or a parallel block's one shared
    ** gather where both are */
    if (ag8 < ag) {
      bool fm = tp_gathers_fp8(&p, d, k, false), ff = tp_gathers_fp8(&p, d, k, true);
      tp_k -= d->parallel_block ? (fm && ff ? ag - ag8 : 0) : (fm ? ag - ag8 : 0) + (ff ? ag - ag8 : 0);
    }
    double cf = tp_k, cb = tp_k;
    /* tensor-parallel overlap (Transformer Engine userbuffers, XLA's
    ** collective matmul): the collective is split into tp chunks pipelined
    ** with the GEMM that consumes or produces it; the first chunk waits,
    ** the rest hide while the layer's GEMMs last */
    double gemm_f = r->kind_fwd_s[k] - r->kind_attn_fwd_s[k];
    if (p.tp_overlap && p.tp > 1) {
      double hid_f = tp_k - gemm_f > tp_k / (double)p.tp ? tp_k - gemm_f : tp_k / (double)p.tp;
      double gemm_b = r->kind_bwd_s[k] - 2.5 * r->kind_attn_fwd_s[k];
      double hid_b = tp_k - gemm_b > tp_k / (double)p.tp ? tp_k - gemm_b : tp_k / (double)p.tp;
      cf = hid_f, cb = hid_b;
    } else if (frameworks[p.framework].tp_bwd_async && p.tp > 1 &&
               !(k & (WL_LAYER_MOE | WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER |
                      WL_LAYER_GDN))) {
      /* Megatron's asynchronous backward (tp_bwd_async): each column-
      ** parallel linear's (QKV, FC1) input-gradient all-reduce runs under
      ** its weight-gradient GEMM; under sequence parallelism the row-
      ** parallel linear's gradient all-gather waits in front, the column-
      ** parallel's input is gathered again under its input-gradient GEMM
      ** and its input gradient reduce-scattered under the weight
      ** gradient's. Those GEMMs take the forward's FLOPs of the column-
      ** parallel linears, col_share of the layer's linear GEMM time */
      double n_sub = d->parallel_block ? 1 : 2;
      double col = column_parallel_share(d) * r->kind_mm_fwd_s[k];
      double series = !p.sp ? tp_k : n_sub * (2 * ag + rs); /* the same collectives one by one */
      cb = !p.sp ? fmax(0, tp_k - col)
                 : n_sub * ag + fmax(0, n_sub * ag - col) + fmax(0, n_sub * rs - col);
      /* NCCL's kernels hold their CTAs' SMs while they run under those
      ** GEMMs, as the data-parallel collectives' do (step_coll_sm_share):
      ** the GEMMs run on the rest for the hidden part's time */
      cb += (series - cb) * step_coll_sm_share(hw, p.tp, tpn);
    }
    double tp_fwd = cf; /* the forward's tensor-parallel part, before CP, EP and offload */
    if (cp > 1 && !(k & (WL_LAYER_MAMBA | WL_LAYER_NO_MIXER | WL_LAYER_GDN))) { /* layers with attention:
                  ** the ring hides behind the attention core (its backward ~2.5x the forward:
                  ** FlashAttention's backward recomputes the scores) */
      double att = r->kind_attn_fwd_s[k];
      bool ring = framework_cp_comm(&p) == PLAN_CP_RING;
      double ef = ring ? (r->cp_comm_fwd_s > att ? r->cp_comm_fwd_s - att : 0) : r->cp_comm_fwd_s;
      double eb = ring ? (r->cp_comm_bwd_s > 2.5 * att ? r->cp_comm_bwd_s - 2.5 * att : 0)
                       : r->cp_comm_bwd_s;
      if (framework_cp_pytorch(p.framework))
        step_cp_pytorch_exposed(r->cp_comm_fwd_s, r->cp_dkv_hop_s, att, cp, ring, &ef, &eb);
      cf += ef, cb += eb;
    }
    if (k & WL_LAYER_MAMBA) cf += cp_mamba, cb += cp_mamba;
    if (k & WL_LAYER_GDN) cf += cp_gdn, cb += cp_gdn;
    if (k & WL_LAYER_MOE) {
      double a2a = r->ep_a2a_fwd_s, ef = a2a, eb = a2a;
      /* EP overlap: the forward's dispatch and combine under the paired
      ** micro-batch's backward of this layer, the backward's under its
      ** forward */
      if (framework_moe_a2a_overlap(p.framework, &p, hw)) {
        double sms = (double)frameworks[p.framework].moe_a2a_sms;
        double share = hw->chip.mu_cores > 0 && sms < (double)hw->chip.mu_cores
                           ? sms / (double)hw->chip.mu_cores : 0;
        ef = step_moe_a2a_exposed_s(a2a, r->kind_bwd_s[k], share);
        eb = step_moe_a2a_exposed_s(a2a, r->kind_fwd_s[k], share);
        r->kind_a2a_hidden_fwd_s[k] = a2a - ef, r->kind_a2a_hidden_bwd_s[k] = a2a - eb;
      }
      cf += ef, cb += eb;
    }
    /* activation offload: the layer's saved activations go to the host as
    ** its forward runs and come back ahead of its backward, over the host
    ** link, hidden as far as the layer's compute lasts. What a layer of
    ** this kind saves is the memory model's count under the plan's
    ** recompute (mem_layer_saved_bytes: a fully recomputed layer its input,
    ** 1/tp of it under sequence parallelism; a MoE layer its routed
    ** copies too), the bytes the host holds */
    if (offload) {
      double t = mem_layer_saved_bytes(d, &mp, &mo, k) / hw->chip.host_link_bw_bytes_per_s;
      /* only N of each chunk's layers under --offload activations:N: their
      ** share of a stage's (its average layer count) pays the transfer */
      double share = plan_offload_share(&p, (double)d->layers / (double)(p.pp > 0 ? p.pp : 1));
      off_sum += (double)r->kind_n[k] * t;
      cf += share * (t > r->kind_fwd_s[k] ? t - r->kind_fwd_s[k] : 0);
      cb += share * (t > r->kind_bwd_s[k] ? t - r->kind_bwd_s[k] : 0);
    }
    r->kind_comm_fwd_s[k] = cf;
    r->kind_comm_bwd_s[k] = cb;
    /* full recompute runs the forward's collectives again, less under JAX
    ** the tensor-parallel ones of the matmuls it does not replay */
    r->kind_comm_replay_s[k] = cf - (1 - framework_full_comm_share(p.framework, d, k, p.sp)) * tp_fwd;
    double n = (double)r->kind_n[k];
    sum_f += n * r->kind_fwd_s[k], sum_b += n * r->kind_bwd_s[k];
    sum_cf += n * cf, sum_cb += n * cb, sum_rep += n * r->kind_comm_replay_s[k];
    sum_acc += n * r->kind_accum_s[k], sum_attn += n * r->kind_attn_fwd_s[k];
    sum_mm += n * r->kind_mm_fwd_s[k];
    r->a2a_hidden_fwd_s += n * r->kind_a2a_hidden_fwd_s[k] / L;
    r->a2a_hidden_bwd_s += n * r->kind_a2a_hidden_bwd_s[k] / L;
  }
  r->layer_fwd_s = sum_f / L;
  r->layer_bwd_s = sum_b / L;
  r->attn_core_fwd_s = sum_attn / L;
  r->layer_mm_fwd_s = sum_mm / L;
  r->tp_comm_fwd_s = sum_cf / L;
  r->tp_comm_bwd_s = sum_cb / L; /* full recompute's again: step_describe adds them */
  r->comm_replay_s = sum_rep / L;
  r->offload_layer_s = off_sum / L; /* the layers' mean */
  r->grad_accum_layer_s = sum_acc / L;
  if (p.pp > 1) {
    /* each TP rank sends its 1/tp of the activations (Megatron's
    ** scatter-gather), to the next stage's chip: another node when a
    ** stage fills one */
    hw_model h = *hw;
    int64_t node = hw->chips_per_node;
    int64_t stage_chips = p.tp, per = stage_chips < node ? stage_chips : node;
    h.chips_per_node = per;
    /* a TPU's two stages are a group of the torus its slice shapes allow
    ** (net_build_group: 2 chips is no slice of its own), or, stages a slice
    ** or more apart on a machine of several slices, one in each, over DCN */
    bool tpu = hw->scale_up.kind == HW_UP_ICI_TORUS;
    int64_t gs = tpu ? step_group_slices(hw, &p, p.pp, p.chips / p.pp) : 1;
    net *n = gs > 1 ? net_build_spread(&h, 2 * stage_chips, 2, err, errn)
             : tpu  ? net_build_group(&h, 2 * stage_chips, err, errn)
                    : net_build(&h, 2 * stage_chips, 1, err, errn);
    if (!n) return -1;
    int64_t pairs[64][2];
    int np = 0;
    for (int64_t i = 0; i < stage_chips && np < 64; i++, np++) {
      pairs[np][0] = i;
      pairs[np][1] = stage_chips + i;
    }
    double t;
    int rc = coll_flows(n, (const int64_t(*)[2])pairs, np, act / (double)p.tp, &t);
    net_free(n);
    if (rc != 0) {
      snprintf(err, errn, "pipeline send failed");
      return -1;
    }
    r->p2p_s = t;
  }
  return 0;
}

