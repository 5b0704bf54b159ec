/*
** step.c -- see step.h: a transformer step described (step_describe) and
** evaluated two ways, on the event engine (step_simulate) or directly
** (step_fast); then the input pipeline, memory per chip and the rates.
** The per-chip pieces are stepcost.c's, whole-step models stepwhole.c's,
** the pipeline schedule sim/sched's, the fixes' pricing fixes.c's, and the
** trace viz/trace.c's (from the timeline filled here).
*/
#include "step.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "coll.h"
#include "net.h"
#include "opcost.h"
#include "optime.h"
#include "framework.h"
#include "step_int.h"

#include <cjson/cJSON.h>

/* --full: every chip of the machine on one network. The data-parallel
** group of (stage s, tensor rank t) is Megatron's rank layout's
** ((s x dp) + d) x tp + t for d = 0..dp-1 (expert-parallel ranks inside
** it); each runs a ring all-reduce, 2 (n - 1) steps of S/n to its
** neighbour. One step of every group's ring at once against one group's
** alone gives the contention the symmetric simulation leaves out; the
** all-reduce (and ZeRO-3's gathers) are scaled by it. Returns the factor
** (>= 1 within rounding), or -1 with err. */
static double full_contention(const hw_model *hw, const plan *p, double bytes, step_desc *r,
                              char *err, size_t errn) {
  int64_t n = p->dp * (p->cp > 0 ? p->cp : 1), groups = p->pp * p->tp, chips = p->chips;
  bool shaped = p->slice_shape[0] > 0;
  net *nt = shaped ? net_build_shaped(hw, chips, p->slices, p->slice_shape, true, err, errn)
                   : net_build(hw, chips, p->slices, err, errn);
  if (!nt) return -1;
  int64_t (*pairs)[2] = malloc((size_t)(n * groups) * sizeof *pairs);
  if (!pairs) {
    net_free(nt);
    return str_errf(err, errn, "out of memory");
  }
  int np = 0;
  for (int64_t s = 0; s < p->pp; s++)
    for (int64_t t = 0; t < p->tp; t++)
      for (int64_t d = 0; d < n; d++) {
        pairs[np][0] = (s * n + d) * p->tp + t;
        pairs[np][1] = (s * n + (d + 1) % n) * p->tp + t;
        np++;
      }
  double all = 0, one = 0;
  int rc = coll_flows(nt, (const int64_t(*)[2])pairs, np, bytes / (double)n, &all);
  if (rc == 0) rc = coll_flows(nt, (const int64_t(*)[2])pairs, (int)n, bytes / (double)n, &one);
  free(pairs);
  net_free(nt);
  if (rc != 0 || !(one > 0)) return str_errf(err, errn, "the full-machine all-reduce failed");
  r->full_contention = all / one;
  r->full_chips = chips;
  r->full_groups = groups;
  return r->full_contention > 1 ? r->full_contention : 1;
}


/* The reduce moves the gradients in the dtype they are kept in, the memory
** model's gradient buffers (mem_setup's fp32_grads, from the framework
** profile's grads_16bit): PyTorch DDP all-reduces the .grad tensors in
** their own dtype, fp32 under autocast (DDP docs, "gradient bucketing");
** FSDP's MixedPrecision reduce_dtype defaults to the parameters' dtype
** (torch.distributed.fsdp.MixedPrecision docs); Megatron-Core reduces its
** main_grad buffer, fp32 unless grad_reduce_in_fp32=False (Megatron-Bridge's
** performance recipes: bf16). MaxText keeps fp32 gradients (grad_dtype
** float32, a cast after value_and_grad) but XLA reduces each weight
** gradient in the dot's bf16 where it is made (framework.h
** grads_reduced_16bit). */
/* Bytes of a weight in the training dtype (16-bit, or fp32; fp8 recipes keep
** 16-bit weights and gradients): what the distributed optimizer all-gathers
** after its update. */
static double param_bytes(const plan *p) { return graph_dtype_bits(p->precision) >= 32 ? 4 : 2; }

static double grad_elem_bytes(const model *m, const hw_model *hw, const plan *p) {
  mem_opts o;
  plan mp;
  mem_setup(m, hw, p, &o, &mp);
  double w = param_bytes(p);
  return o.fp32_grads && w < 4 && !o.grads_reduced_16bit ? 4 : w;
}

/* The share of the weights that get gradients: 1 under full training; under
** LoRA/QLoRA only the adapters do (model.trainable_params), so the gradient
** reduce moves the adapters' gradients alone (PEFT under DDP/FSDP registers
** gradient hooks on requires_grad parameters only; frozen weights are not
** reduced). */
static double grad_share(const model *m) {
  return m->params > 0 && m->trainable_params < m->params
             ? (double)m->trainable_params / (double)m->params
             : 1;
}

double step_grad_bytes(const model *m, const hw_model *hw, const plan *p) {
  return ((double)m->params - (double)m->expert_params) / (double)(p->tp * p->pp) *
         grad_share(m) * grad_elem_bytes(m, hw, p);
}

double step_with_reducers_s(const model *m, const hw_model *hw, const plan *p,
                            const step_result *r, int64_t reducers, double *allreduce_s) {
  double rs = coll_reduction_server_s(hw, p->dp * (p->cp > 0 ? p->cp : 1), step_grad_bytes(m, hw, p), reducers, 0);
  double hidden = r->dp_allreduce_s - r->exposed_dp_s;
  if (allreduce_s) *allreduce_s = rs;
  return r->step_time_s - r->exposed_dp_s + (rs > hidden ? rs - hidden : 0);
}

/* A collective of the step: through the memo when there is one. */
static double coll_of(coll_memo *memo, const hw_model *hw, int64_t chips, int64_t per, coll_op op,
                      double bytes, int64_t slices, int64_t reducers, coll_algo algo, bool formula,
                      char *err, size_t errn) {
  if (memo)
    return coll_memo_time_s(memo, chips, per, op, bytes, slices, reducers, algo, formula, err, errn);
  return coll_time_s(hw, chips, per, op, bytes, slices, reducers, algo, formula, err, errn);
}

int64_t step_group_slices(const hw_model *hw, const plan *p, int64_t n, int64_t stride) {
  int64_t S = net_machine_slices(hw, p->chips, p->slices);
  if (S <= 1 || n <= 1 || n >= p->chips || stride < 1 || p->chips % S) return 1;
  int64_t slice = p->chips / S;
  if (stride >= slice) return n <= S ? n : 1;
  if (n * stride <= slice || slice % stride) return 1;
  int64_t in_one = slice / stride; /* members a slice holds */
  return n % in_one == 0 ? n / in_one : 1;
}

double step_group_coll_s(coll_memo *memo, const hw_model *hw, const plan *p, int64_t n,
                         int64_t stride, int64_t per, coll_op op, double bytes, int64_t slices,
                         int64_t reducers, coll_algo algo, bool formula, char *err, size_t errn) {
  int64_t gs = reducers ? 1 : step_group_slices(hw, p, n, stride);
  if (gs > 1) /* its part in each slice, the parts joined by DCN */
    return memo ? coll_memo_group_time_s(memo, n, 0, op, bytes, gs, algo, formula, err, errn)
                : coll_group_time_s(hw, n, 0, op, bytes, gs, algo, formula, err, errn);
  return coll_of(memo, hw, n, per, op, bytes, slices, reducers, algo, formula, err, errn);
}

/* The gradients' reduction over n chips: an all-reduce, or a
** reduce-scatter -- the first half of the all-reduce's algorithm (ring,
** tree or hierarchical across nodes alike), so half of it. */
static double grad_sync_s(coll_memo *memo, const hw_model *hw, int64_t n, int64_t per, coll_op op,
                          double bytes, const plan *p, int64_t stride, bool formula, char *err,
                          size_t errn) {
  /* a group that is the whole machine runs on the plan's slice shape when
  ** it names one (the memo's key has no shape: it is not asked) */
  if (p->slice_shape[0] > 0 && n == p->chips && !p->reduction_server) {
    double ar = coll_time_shaped_s(hw, n, p->slices, p->slice_shape, COLL_ALL_REDUCE, bytes,
                                   (coll_algo)p->dp_algo, formula, err, errn);
    return ar < 0 || op == COLL_ALL_REDUCE ? ar : ar / 2;
  }
  double ar = step_group_coll_s(memo, hw, p, n, stride, per, COLL_ALL_REDUCE, bytes, p->slices,
                                p->reduction_server, (coll_algo)p->dp_algo, formula, err, errn);
  return ar < 0 || op == COLL_ALL_REDUCE ? ar : ar / 2;
}

/* Megatron-Core's recompute_modules, each as the graph tags its ops
** (graph_module): "moe" holds its activation and shared experts. */
static double modules_fwd_s(const double mod[GRAPH_MODULES], unsigned m) {
  static const struct {
    unsigned bit;
    graph_module mod;
  } MAP[] = {{PLAN_RM_LAYERNORM, GRAPH_MOD_NORM},  {PLAN_RM_MLA_UP_PROJ, GRAPH_MOD_MLA_UP},
             {PLAN_RM_MLP, GRAPH_MOD_MLP},         {PLAN_RM_MOE, GRAPH_MOD_MOE},
             {PLAN_RM_MOE_ACT, GRAPH_MOD_MOE_ACT}, {PLAN_RM_SHARED_EXPERTS, GRAPH_MOD_SHARED}};
  if (m & PLAN_RM_MOE) m |= PLAN_RM_MOE_ACT | PLAN_RM_SHARED_EXPERTS;
  double t = 0;
  for (size_t i = 0; i < sizeof MAP / sizeof *MAP; i++)
    if (m & MAP[i].bit) t += mod[MAP[i].mod];
  return t;
}

double step_adam_bytes(const plan *p) {
  /* 16-bit weights, gradients and moments, no master (--weight-dtype
  ** bf16): the weight and both moments read and written, the gradient
  ** read, 2 B each; else 28 B with the fp32 master (or MaxText's one fp32
  ** copy: weight 4 + 4, gradient 4, moments 16) */
  return p->bf16_weights ? 14 : 28;
}

double step_recompute_s(const step_result *r, const plan *p, const wl_tf_dims *d, int k) {
  if (k < 0) { /* the layers' average */
    double sum = 0, n = 0;
    for (int j = 0; j < WL_LAYER_KINDS; j++)
      if (r->kind_n[j] > 0)
        sum += (double)r->kind_n[j] * step_recompute_s(r, p, d, j), n += (double)r->kind_n[j];
    if (n > 0) return sum / n;
    if (p->recompute == PLAN_RECOMPUTE_FULL)
      return framework_full_s(p->framework, d, 0, p->remat_device | p->remat_offload, r->layer_fwd_s,
                              r->attn_core_fwd_s, r->layer_mm_fwd_s);
    return p->recompute == PLAN_RECOMPUTE_SELECTIVE
               ? framework_selective_s(p->framework, d, 0, r->layer_fwd_s, r->attn_core_fwd_s,
                                       r->layer_mm_fwd_s)
               : 0;
  }
  double fw = r->kind_fwd_s[k], at = r->kind_attn_fwd_s[k], mm = r->kind_mm_fwd_s[k];
  if (p->recompute == PLAN_RECOMPUTE_FULL)
    return framework_full_s(p->framework, d, k, p->remat_device | p->remat_offload, fw, at, mm);
  if (p->recompute != PLAN_RECOMPUTE_SELECTIVE) return 0;
  unsigned m = p->recompute_modules;
  /* selective alone: the framework's count (framework_selective_s) */
  if (!m) return framework_selective_s(p->framework, d, k, fw, at, mm);
  /* a list (Megatron-Core's recompute_modules): the attention core's
  ** forward for core_attn, the tagged kernels of the others; "moe" runs
  ** its dispatch and combine again (the forward's all-to-alls) */
  double t = (m & PLAN_RM_CORE_ATTN ? at : 0) + modules_fwd_s(r->kind_mod_fwd_s[k], m);
  if ((m & PLAN_RM_MOE) && (k & WL_LAYER_MOE)) t += r->ep_a2a_fwd_s;
  return t;
}

double step_ep_unpaired(const plan *p) {
  double m = (double)plan_microbatches(p), v = (double)(p->vp > 1 ? p->vp : 1);
  if (!(m >= 1)) return 1;
  if (p->pp <= 1) return 1 / m;
  double w = 2 * (double)(p->pp - 1) + (v - 1) * (double)p->pp + 1;
  return w < m * v ? w / (m * v) : 1;
}

/* One layer of kind k, forward and backward, on one chip per micro-batch,
** with its collectives and (backward) its recomputation and gradient
** accumulation. A result without per-kind figures uses the averages. */
static void layer_times(const step_result *r, const plan *p, const wl_tf_dims *d, int k,
                        double accum, double *f, double *b, double *comm) {
  bool kinds = r->kind_n[k] > 0;
  double fw = kinds ? r->kind_fwd_s[k] : r->layer_fwd_s;
  double bw = kinds ? r->kind_bwd_s[k] : r->layer_bwd_s;
  double cf = kinds ? r->kind_comm_fwd_s[k] : r->tp_comm_fwd_s;
  double cb = kinds ? r->kind_comm_bwd_s[k] : r->tp_comm_bwd_s;
  double ac = kinds ? r->kind_accum_s[k] : r->grad_accum_layer_s;
  /* the overlapped all-to-alls of the passes nothing pairs with */
  double u = step_ep_unpaired(p);
  cf += u * (kinds ? r->kind_a2a_hidden_fwd_s[k] : r->a2a_hidden_fwd_s);
  cb += u * (kinds ? r->kind_a2a_hidden_bwd_s[k] : r->a2a_hidden_bwd_s);
  bool full = p->recompute == PLAN_RECOMPUTE_FULL;
  /* full recompute runs each layer's forward again in the backward, its
  ** collectives with it (step_costs times them without recompute, so one
  ** set of per-chip costs serves every recompute mode) */
  double rec = step_recompute_s(r, p, d, kinds ? k : -1);
  double rep = full ? (kinds ? r->kind_comm_replay_s[k] : r->comm_replay_s) : 0;
  *f = fw + cf;
  *b = bw + rec + cb + rep + accum * ac;
  *comm = cf + cb + rep; /* of which collectives */
}

/* A chip's parameters under p: the dense ones (split by tp and pp) and the
** routed experts' (split by ep x etp and pp). */
static void chip_params(const model *m, const plan *p, double *dense, double *expert) {
  double e = (double)m->expert_params, pp = (double)p->pp;
  double ep = (double)(p->ep > 0 ? p->ep : 1) * (double)(p->etp > 0 ? p->etp : 1);
  *dense = ((double)m->params - e) / ((double)p->tp * pp);
  *expert = e / (ep * pp);
}

/* step_update_extra_bytes with the gradient buffer's element size g given
** (step_describe has it) */
static double update_extra_bytes(const model *m, const plan *p, double g, double *per_chip_param) {
  *per_chip_param = 0;
  /* torch.optim's foreach AdamW and clip_grad_norm_ (framework.h
  ** adam_foreach): 13 + 3 tensor passes beyond the fused kernel's 7, of
  ** the optimizer's own tensors (fp32, or 16-bit without a master) */
  if (p->framework >= 0 && frameworks[p->framework].adam_foreach && p->precision != GDT_F64)
    return 16.0 * (p->bf16_weights ? 2 : 4);
  if (p->framework < 0 || !frameworks[p->framework].megatron_optimizer || p->bf16_weights ||
      p->precision == GDT_F32 || p->precision == GDT_F64)
    return 0;
  /* Megatron-LM megatron/core/optimizer/optimizer.py @ d98e8a6 around the
  ** fused Adam (MixedPrecisionOptimizer.step): prepare_grads casts the
  ** main gradients to fp32 from a 16-bit buffer (2 B read, 4 written) and,
  ** training in fp16, unscales them and checks them for inf in place
  ** (torch._amp_foreach_non_finite_check_and_unscale_: 4 B read, 4
  ** written); clip_grad_norm reads them for their L2 norm (get_grad_norm_fp32,
  ** clip_grad 1.0 by default: 4 B); step_with_ready_grads copies the new
  ** fp32 parameters into the model's 16-bit ones (4 B read, 2 written) --
  ** under an fp8/fp4 recipe the weight cast (stepcost.c weight_cast_s) is
  ** that copy. Each pass over the optimizer's shard; then the next step
  ** zeroes the chip's whole gradient buffer (training.py zero_grad_buffer:
  ** its 2 or 4 B a parameter, written) */
  double b = (g < 4 ? g + 4 : 0) + (p->precision == GDT_F16 ? 8 : 0) + 4 +
             (p->gemm == PLAN_GEMM_NATIVE ? 4 + param_bytes(p) : 0);
  *per_chip_param = g * grad_share(m);
  return b;
}

double step_update_extra_bytes(const model *m, const hw_model *hw, const plan *p,
                               double *per_chip_param) {
  return update_extra_bytes(m, p, grad_elem_bytes(m, hw, p), per_chip_param);
}

double step_grad_buffer_params(const model *m, const plan *p) {
  if (p->zero >= 3) return step_optimizer_params(m, p);
  double dense, expert;
  chip_params(m, p, &dense, &expert);
  return dense + expert;
}

double step_optimizer_params(const model *m, const plan *p) {
  double dense, expert;
  chip_params(m, p, &dense, &expert);
  if (p->zero < 1) return dense + expert;
  /* the states' shard groups, as the memory model holds them: the experts'
  ** over their data-parallel ranks inside the group (an HSDP group's) */
  int64_t gd, ge;
  plan_state_shards(p, &gd, &ge);
  return dense / (double)gd + expert / (double)ge;
}

/* ZeRO-3's gather of a chunk of n layers (ag_t a stage's, V chunks a
** stage), a layer ahead of compute: only the first layer's shows. */
static void gathered(double ag_t, int64_t vp, int64_t n, double share, double *f, double *b) {
  if (!(ag_t > 0 && n > 0)) return;
  double g = ag_t / (double)vp;
  /* the compute under the gather runs on the SMs it leaves */
  double sf = *f + (*f < g ? *f : g) * share, sb = *b + (*b < g ? *b : g) * share;
  *f = (sf > g ? sf : g) + g / (double)n;
  *b = (sb > g ? sb : g) + g / (double)n;
}

/* A chunk of n layers of one kind: its forward, backward (gather
** included) and collectives, summed layer by layer as step_describe's
** loop sums them. */
typedef struct {
  int64_t n;
  double f, b, c;
} chunk_memo;

static void chunk_sums(double lf, double lb, double lc, int64_t n, double ag_t, int64_t vp,
                       double share, chunk_memo *out) {
  double f = 0, b = 0, c = 0;
  for (int64_t i = 0; i < n; i++) f += lf, b += lb, c += lc;
  gathered(ag_t, vp, n, share, &f, &b);
  *out = (chunk_memo){n, f, b, c};
}

/* The distributed optimizer's parameter all-gather (ZeRO-1/2 with
** --overlap-param-gather) taking `ag` seconds on a chip, the part of it the
** next step's first forward does not hide. Megatron-Core dispatches it bucket
** by bucket from forward pre-hooks: the first bucket's gather when the first
** micro-batch reaches the chip, each next one when the previous finishes
** (megatron/core/distributed/param_and_grad_buffer.py finish_param_sync;
** distributed_data_parallel.py _make_forward_pre_hook, Megatron-LM d98e8a6),
** so a chip's first forward waits for the first bucket and for whatever of
** the gathers outlasts it: max(0, ag - F) + ag / buckets (a bucket a layer,
** as the gradient buckets). Without interleaving each stage starts its own
** gathers when micro-batch 0 arrives (align_param_gather is forced off,
** megatron/training/arguments.py), so the stages' waits add along the
** warm-up: pp times one stage's. Interleaved, every stage launches its first
** chunks' gathers together at the step's start (align_param_gather,
** schedules.py param_sync_func), so only chip 0's first chunk waits. */
/* The embedding sits with the first stage; the final norm, head, loss and
** multi-token prediction with the last (Megatron-Core's pre_process and
** post_process stages). The gradients accumulated are the embedding
** table's and the head's, half each (a tied table: a copy on each). */
void step_edges(const step_result *r, double accum, double *f_first, double *b_first,
                double *f_last, double *b_last) {
  double ha = 0.5 * accum * r->grad_accum_head_s;
  *f_first = r->embed_fwd_s, *b_first = r->embed_bwd_s + ha;
  *f_last = r->head_fwd_s - r->embed_fwd_s, *b_last = r->head_bwd_s - r->embed_bwd_s + ha;
}

static double gather_exposed_s(const plan *p, const wl_tf_dims *d, const step_desc *sd,
                               double ag, double *hidden) {
  /* chip 0's first (virtual) stage, with its share of the chip's gathers:
  ** the embedding's forward, and the head's where that stage is the last */
  double f = sd->vs_f[0] + sd->sched.f_first + (p->pp * p->vp == 1 ? sd->sched.f_last : 0);
  int64_t n = plan_stage_layers(p, d->layers, 0);
  if (p->vp > 1) ag /= (double)p->vp;
  double e = (ag > f ? ag - f : 0) + ag / (double)(n > 0 ? n : 1);
  /* the forward the gather runs under, added along the warm-up as the waits */
  *hidden = (ag < f ? ag : f) * (p->vp > 1 ? 1 : (double)p->pp);
  return p->vp > 1 ? e : e * (double)p->pp;
}

int step_describe(const model *m, const hw_model *hw, const plan *p, const step_result *r,
                  coll_memo *memo, step_desc *sd, char *err, size_t errn) {
  const wl_tf_dims *d = &m->info.tf;
  memset(sd, 0, offsetof(step_desc, vs_f)); /* the per-stage arrays are written as used */
  bool formula = p->coll_costs == PLAN_COLL_FORMULA;
  int64_t cp = p->cp > 0 ? p->cp : 1, S = p->pp * p->vp;
  if (S > SCHED_MAX_VS)
    return str_errf(err, errn, "pp %lld x V %lld: more than %d virtual stages", (long long)p->pp,
                    (long long)p->vp, SCHED_MAX_VS);
  double dense, expert;
  chip_params(m, p, &dense, &expert);
  int64_t dpcp = p->dp * cp, edp = plan_expert_dp(p);
  double ge = grad_elem_bytes(m, hw, p); /* what step_grad_bytes multiplies by, once */
  double grad_bytes = dense * grad_share(m) * ge, expert_bytes = expert * grad_share(m) * ge;
  double dp_t = 0, ag_t = 0;
  bool z3 = p->zero >= 3;
  /* the data-parallel group: one chip per node (rails), or the slices */
  int64_t per = step_group_node_members(hw, dpcp, p->tp * p->pp);
  if (hw->scale_up.kind == HW_UP_ICI_TORUS) per = 0;
  /* the sharded optimizer reduce-scatters gradients and all-gathers the
  ** updated parameters: with the gather under the next forward (or
  ** ZeRO-3's gathers) only the reduce-scatter is the step's */
  bool rs_only = z3 || (p->zero >= 1 && p->param_gather_overlap);
  coll_op grad_op = rs_only ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
  int64_t shard, eshard; /* HSDP: shard within groups (the experts reduce over edp below) */
  plan_state_shards(p, &shard, &eshard);
  double own_rs = 0; /* the chips' own reduce-scatter time: what their parameter gather takes */
  /* each group's time x the share of the SMs its kernel holds, summed */
  double dense_share = step_coll_sm_share(hw, shard, per), share_t = 0;
  if (dpcp > 1) {
    dp_t = grad_sync_s(memo, hw, shard, per, grad_op, grad_bytes, p, p->tp, formula, err, errn);
    if (dp_t < 0) return -1;
    share_t = dp_t * dense_share;
    own_rs = dp_t;
    if (p->reduction_server && rs_only && !z3) { /* the reducers reduce; the gather is the chips' */
      plan q = *p;
      q.reduction_server = 0;
      own_rs = grad_sync_s(memo, hw, shard, per, grad_op, grad_bytes, &q, p->tp, formula, err, errn);
      if (own_rs < 0) return -1;
    }
    /* half the shard group's all-reduce (ZeRO-3's gathers, below) */
    double sd_rs_half = grad_op == COLL_ALL_REDUCE ? dp_t / 2 : dp_t;
    if (shard < dpcp) { /* HSDP: the shards' all-reduce across the replicas */
      /* its members are a shard group apart: on a TPU machine of several
      ** slices, groups of a slice or more (MaxText's dcn_data_parallelism)
      ** hold their members in different slices, so it crosses DCN */
      double x = step_group_coll_s(memo, hw, p, dpcp / shard, p->tp * shard, 1, COLL_ALL_REDUCE,
                                   grad_bytes / (double)shard, p->slices, 0, COLL_AUTO, formula,
                                   err, errn);
      if (x < 0) return -1;
      dp_t += x;
      share_t += x * step_coll_sm_share(hw, dpcp / shard,
                                        step_group_node_members(hw, dpcp / shard, p->tp * shard));
    }
    /* the routed experts' gradients, over the expert data-parallel group */
    if (expert_bytes > 0 && edp > 1) {
      plan q = *p;
      q.reduction_server = 0, q.dp_algo = 0;
      /* the expert data-parallel group: stride etp x ep in the expert layers' order */
      int64_t estride = (p->ep > 0 ? p->ep : 1) * (p->etp > 0 ? p->etp : 1);
      int64_t eper = step_group_node_members(hw, edp, estride);
      if (hw->scale_up.kind == HW_UP_ICI_TORUS) eper = 0;
      double x = grad_sync_s(memo, hw, edp, eper, grad_op, expert_bytes, &q, estride, formula, err,
                             errn);
      if (x < 0) return -1;
      dp_t += x;
      own_rs += x;
      share_t += x * step_coll_sm_share(hw, edp, eper);
    }
    /* ZeRO-3 / FSDP keeps 1/dp of the stage's weights: every micro-batch
    ** gathers them for its forward and again for its backward (FSDP frees
    ** them after use). A gather is the second half of the same algorithm's
    ** all-reduce (hierarchical across nodes: NVLink inside, the rails
    ** between), so half its time */
    if (z3) {
      /* the gradients' reduce-scatter is the other half: the same all-reduce
      ** (a Reduction Server reduces, but the gather is the chips' own) */
      ag_t = p->reduction_server ? coll_of(memo, hw, shard, per, COLL_ALL_REDUCE, grad_bytes,
                                           p->slices, 0, COLL_AUTO, formula, err, errn) / 2
                                 : sd_rs_half;
      if (ag_t < 0) return -1;
    }
  }
  /* the groups' time-weighted share (before --full scales every group's time alike) */
  sd->coll_share = dp_t > 0 ? share_t / dp_t : 0;
  /* --full: contention between every group's all-reduce, simulated */
  if (p->full && dp_t > 0 && !formula) {
    double f = full_contention(hw, p, grad_bytes, sd, err, errn);
    if (f < 0) return -1;
    dp_t *= f;
    ag_t *= f;
  }
  sd->dp_allreduce_s = dp_t;
  sd->zero3_gather_s = ag_t;
  /* fused Adam (apex FusedAdam): read weight, grad, master, m, v; write
  ** them back; the sharded optimizer updates its shard. Then a
  ** low-precision recipe quantizes the new weights once for the step. */
  double local = step_optimizer_params(m, p);
  double bw = hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency;
  double zero_b, extra_b = update_extra_bytes(m, p, ge, &zero_b);
  double chip = step_grad_buffer_params(m, p);
  sd->optimizer_s = (local * (step_adam_bytes(p) + extra_b) + chip * zero_b) / bw +
                    r->weight_cast_s / (double)p->pp;
  /* optimizer offload (ZeRO-Offload, Ren et al. 2021): the fp32 master and
  ** Adam states live in host memory; the update streams them over the host
  ** link both ways (12 B a parameter each way) with the gradient down and
  ** the new weights up (4 + 2 B) */
  if (p->offload == PLAN_OFFLOAD_OPTIMIZER && hw->chip.host_link_bw_bytes_per_s > 0)
    sd->optimizer_s = local * (24 + 6) / hw->chip.host_link_bw_bytes_per_s + r->weight_cast_s / (double)p->pp;
  sd->tp_comm_bwd_s = r->tp_comm_bwd_s + (p->recompute == PLAN_RECOMPUTE_FULL ? r->comm_replay_s : 0);
  int64_t M = plan_microbatches(p);
  sd->microbatches = M;
  if (M < 1)
    return str_errf(err, errn, "no micro-batches: gbs %lld < dp %lld x mbs %lld", (long long)p->gbs,
                    (long long)p->dp, (long long)p->mbs);
  /* the accumulation pass, averaged over the micro-batches (the first has none) */
  double accum = (double)(M - 1) / (double)M;
  sd->sched = (sched_desc){.pp = p->pp, .vp = p->vp, .M = M, .schedule = p->schedule,
                           .p2p_s = r->p2p_s};
  step_edges(r, accum, &sd->sched.f_first, &sd->sched.b_first, &sd->sched.f_last,
             &sd->sched.b_last);
  sd->sched.defer = p->defer_embedding_wgrad;
  sd->sched.defer_limit = p->wgrad_deferral_limit;
  sd->sched.b_last_defer = r->head_wgrad_s, sd->sched.drain_ag_s = r->head_wgrad_ag_s;
  /* the layers of each virtual stage, in order, and their kinds */
  /* the kinds the model has (r counted every layer's): only theirs are
  ** worked out, the rest of the WL_LAYER_KINDS slots never read; with no
  ** count at all every slot takes the whole-layer figures */
  double lf[WL_LAYER_KINDS], lb[WL_LAYER_KINDS], lc[WL_LAYER_KINDS];
  int kinds = 0;
  for (int k = 0; k < WL_LAYER_KINDS; k++)
    if (r->kind_n[k] > 0) layer_times(r, p, d, k, accum, &lf[k], &lb[k], &lc[k]), kinds++;
  for (int k = 0; kinds == 0 && k < WL_LAYER_KINDS; k++)
    layer_times(r, p, d, k, accum, &lf[k], &lb[k], &lc[k]);
  bool even = true;
  int64_t first = 0, n0 = plan_stage_layers(p, d->layers, 0), most = 0;
  double comm0 = 0;
  int k0 = wl_tf_layer_kind(d, 0);
  /* one kind of layer split evenly (most plans a search asks): every
  ** virtual stage is the first */
  bool uniform = kinds <= 1 && !p->pp_layers && !p->pp_split_embedding && !p->pp_split_loss;
  /* every layer of kind k0 (r counted them all so): a chunk's sums depend
  ** on its length alone, and a split as even as it goes has two lengths,
  ** so each length's sums are added up once (the same additions in the
  ** same order, so the same values) and reused (the planner describes
  ** hundreds of thousands of uneven splits a second) */
  bool one_kind = kinds == 1 && r->kind_n[k0] == d->layers;
  chunk_memo cm[2] = {{.n = -1}, {.n = -1}};
  /* an explicit split's lengths read in place (plan_stage_layers' first case) */
  const int32_t *split = p->pp_layers && p->n_pp_layers == S ? p->pp_layers : NULL;
  /* rank: vs mod pp, counted (a division per stage costs more than the rest) */
  for (int64_t vs = 0, rank = 0; vs < (uniform ? 1 : S); vs++, rank = rank + 1 < p->pp ? rank + 1 : 0) {
    int64_t n = split ? split[vs] : plan_stage_layers(p, d->layers, vs);
    chunk_memo *hit = NULL;
    if (one_kind && first + n <= d->layers) {
      hit = cm[0].n == n ? &cm[0] : cm[1].n == n ? &cm[1] : NULL;
      if (!hit) {
        hit = cm[0].n < 0 ? &cm[0] : &cm[1];
        chunk_sums(lf[k0], lb[k0], lc[k0], n, ag_t, p->vp, dense_share, hit);
      }
    }
    double f = 0, b = 0, c = 0;
    if (hit) {
      f = hit->f, b = hit->b, c = hit->c;
    } else {
      for (int64_t i = first; i < first + n; i++) {
        int k = wl_tf_layer_kind(d, i);
        even &= k == k0;
        f += lf[k], b += lb[k], c += lc[k];
      }
      gathered(ag_t, p->vp, n, dense_share, &f, &b);
    }
    even &= n == n0;
    first += n;
    sd->vs_f[vs] = f, sd->vs_b[vs] = b;
    if (rank == 0) comm0 += c;
    if (n > most) most = n;
  }
  if (uniform) comm0 *= (double)p->vp;
  if (rs_only && !z3 && own_rs > 0)
    sd->param_gather_s =
        gather_exposed_s(p, d, sd, own_rs * param_bytes(p) / ge, &sd->param_gather_hidden_s);
  sd->sched.f_chunk = sd->vs_f[0], sd->sched.b_chunk = sd->vs_b[0];
  if (!even && !uniform) sd->sched.f_vs = sd->vs_f, sd->sched.b_vs = sd->vs_b;
  sd->layers_per_stage = most * p->vp;
  sd->buckets = sd->layers_per_stage > 0 ? sd->layers_per_stage : 1;
  sd->after_backward = p->grad_sync == PLAN_GRAD_AFTER_BACKWARD;
  sd->tp_comm_s = (double)M * comm0;
  return 0;
}

/* The step's time and its breakdown from an evaluated schedule; the same
** arithmetic for both evaluators. Chip 0 (the first stage) stands for the
** breakdown: it runs the last backward. */
static void finish(const step_desc *sd, const sched_out *so, double end, step_times *r) {
  double exposed_dp = end - sd->optimizer_s;
  exposed_dp = exposed_dp > so->last_b_end[0] ? exposed_dp - so->last_b_end[0] : 0;
  /* the compute under the hidden reduction and gather, on the SMs they leave */
  double hidden_dp = sd->dp_allreduce_s > exposed_dp ? sd->dp_allreduce_s - exposed_dp : 0;
  r->coll_hidden_s = hidden_dp + sd->param_gather_hidden_s, r->coll_share = sd->coll_share;
  r->coll_sm_s = r->coll_hidden_s * r->coll_share;
  /* the parameter gather's wait at the first forward delays the whole step */
  r->step_time_s = end + sd->param_gather_s + r->coll_sm_s;
  r->param_gather_exposed_s = sd->param_gather_s;
  r->breakdown_s.compute = so->busy_s[0] - sd->tp_comm_s + r->coll_sm_s;
  r->breakdown_s.exposed_comm = sd->tp_comm_s + exposed_dp + sd->param_gather_s;
  r->exposed_dp_s = exposed_dp;
  r->breakdown_s.other = sd->optimizer_s;
  r->breakdown_s.input_stall = 0;
  double bubble = end - so->busy_s[0] - exposed_dp - sd->optimizer_s;
  r->breakdown_s.pipeline_bubble = bubble > 0 ? bubble : 0;
}

struct step_memo {
  coll_memo *coll;
  bool have;
  sched_desc last;
  sched_out out;
  double vs_f[SCHED_MAX_VS], vs_b[SCHED_MAX_VS]; /* last's stage times, when it has them */
};

step_memo *step_memo_new(const hw_model *hw) {
  step_memo *m = calloc(1, sizeof *m);
  if (m && !(m->coll = coll_memo_new(hw))) {
    free(m);
    return NULL;
  }
  return m;
}

void step_memo_free(step_memo *m) {
  if (!m) return;
  coll_memo_free(m->coll);
  if (m->have) sched_out_free(&m->out);
  free(m);
}

int step_fast(const model *m, const hw_model *hw, const plan *pl, const step_result *costs,
              step_memo *memo, step_times *r, char *err, size_t errn) {
  plan p = *pl;
  p.coll_costs = PLAN_COLL_FORMULA; /* the fast path's collectives: their closed forms */
  step_desc sd;
  if (step_describe(m, hw, &p, costs, memo ? memo->coll : NULL, &sd, err, errn) != 0) return -1;
  sched_out so;
  if (memo && memo->have && sched_desc_same(&memo->last, &sd.sched)) {
    so = memo->out; /* the same schedule as the last plan's */
  } else {
    if (sched_eval(&sd.sched, &so, err, errn) != 0) return -1;
    if (memo) {
      if (memo->have) sched_out_free(&memo->out);
      memo->last = sd.sched;
      memo->out = so;
      memo->have = true;
      /* the description's stage times live in sd: keep a copy */
      if (sd.sched.f_vs) {
        int64_t S = sd.sched.pp * sd.sched.vp;
        memcpy(memo->vs_f, sd.vs_f, (size_t)S * sizeof *sd.vs_f);
        memcpy(memo->vs_b, sd.vs_b, (size_t)S * sizeof *sd.vs_b);
        memo->last.f_vs = memo->vs_f, memo->last.b_vs = memo->vs_b;
      }
    }
  }
  double end = sched_tail(&sd.sched, &so, sd.dp_allreduce_s, sd.buckets, sd.after_backward,
                          sd.optimizer_s, NULL, NULL, NULL);
  finish(&sd, &so, end, r);
  if (!memo) sched_out_free(&so);
  return 0;
}

void step_timeline_free(step_timeline *t) {
  if (!t) return;
  free(t->spans);
  free(t->bucket_t0);
  free(t->bucket_t1);
  free(t->opt_t0);
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    model_free(t->layer[k]);
    free(t->ops[k]);
  }
  free(t->layer_kind);
  free(t->vs_first);
  memset(t, 0, sizeof *t);
}

/* The input pipeline of each host (sim/input.c) fed by this step's compute
** time: its stall is added to the step and shown in the breakdown. Every
** family reads its batches through it: a CNN's JPEGs starve a chip as
** readily as a transformer's tokens. */
static int input_stall(const hw_model *hw, const plan *p, const input_cfg *in, step_result *r,
                       char *err, size_t errn) {
  input_cfg c = *in;
  input_per_host(&c, p->chips, hw->chips_per_node, p->gbs);
  double stall;
  if (input_run_stall(&c, r->step_time_s, &stall, &r->input_steps, err, errn) != 0) return -1;
  r->breakdown_s.input_stall = stall;
  r->step_time_s += stall;
  return 0;
}

/* The trace's detail of micro-batch 0: one layer of each kind the model
** has, its kernels timed as step_costs times that kind (the same chips,
** attention share and expert GEMMs; a model of one kind its own first
** layer, as step_costs), and where each layer sits: its kind, and the
** first layer of each virtual stage. */
static int timeline_layers(const model *m, const hw_model *hw, const plan *p, const step_result *r,
                           step_timeline *tl, char *err, size_t errn) {
  const wl_tf_dims *d = &m->info.tf;
  int64_t S = p->pp * (p->vp > 0 ? p->vp : 1);
  tl->layers = d->layers;
  tl->layer_kind = malloc((size_t)(d->layers > 0 ? d->layers : 1));
  tl->vs_first = malloc((size_t)(S + 1) * sizeof *tl->vs_first);
  if (!tl->layer_kind || !tl->vs_first) return str_errf(err, errn, "out of memory");
  for (int64_t i = 0; i < d->layers; i++) tl->layer_kind[i] = (unsigned char)wl_tf_layer_kind(d, i);
  tl->vs_first[0] = 0;
  for (int64_t vs = 0; vs < S; vs++) tl->vs_first[vs + 1] = tl->vs_first[vs] + plan_stage_layers(p, d->layers, vs);
  int kinds = 0;
  for (int k = 0; k < WL_LAYER_KINDS; k++) kinds += r->kind_n[k] > 0;
  hw_model ah, gh;
  const hw_model *ghw, *lhw = step_layer_hw(hw, p, &ah, &gh, &ghw);
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    /* no count at all (a result without kinds): the first layer's kind */
    if (kinds ? r->kind_n[k] == 0 : k != wl_tf_layer_kind(d, 0)) continue;
    int kind = kinds > 1 ? k : -1;
    step_kernels sk = step_kernels_of(lhw, d, p, kind);
    op_times ops = {0};
    phase_times pt;
    if (!step_shard_kind_of(m, p, 1, kind, &tl->layer[k], err, errn)) return -1;
    int rc = step_time_graph_gemm(lhw, ghw, tl->layer[k]->g, &sk, p->cost_cache, &pt, &ops, err,
                                  errn);
    tl->ops[k] = ops.v, tl->n_ops[k] = ops.n;
    if (rc != 0) return -1;
  }
  return 0;
}

static int simulate_cached(const model *m, const hw_model *hw, const plan *pl,
                           const input_cfg *in, step_result *r, step_timeline *tl, char *err,
                           size_t errn);

int step_simulate(const model *m, const hw_model *hw, const plan *pl, const input_cfg *in,
                  step_result *r, step_timeline *tl, char *err, size_t errn) {
  plan p = *pl;
  opcost *own;
  if (tl) memset(tl, 0, sizeof *tl);
  if (step_with_cache(&p, &own, err, errn) != 0) return -1;
  int rc = simulate_cached(m, hw, &p, in, r, tl, err, errn);
  r->op_costs = opcost_get_stats(p.cost_cache);
  /* the fixes' plans are the caller's to simulate: not with a freed cache */
  for (int i = 0; i < r->n_fixes; i++) r->fixes[i].p.cost_cache = pl->cost_cache;
  opcost_free(own);
  if (rc != 0 && tl) step_timeline_free(tl);
  return rc;
}

/* What the attention core's dots of g do beyond the graph's count of
** them, forward and backward (into adj, per step of g): a FlashAttention
** kernel does its share of the unmasked arithmetic the graph counts (a
** causal mask's half, a window's band: step_flash_share), and its backward
** recomputes the scores' product (STEP_FLASH_BWD_DOTS). */
static void flash_adjust(const graph *g, const hw_model *hw, const wl_tf_dims *d, const plan *p,
                         double adj[2], double kept[2]) {
  adj[0] = adj[1] = kept[0] = kept[1] = 0;
  /* kept: the forward attention dots of the layers a kept MaxText context
  ** spares from full recompute (a JAX profile's dense layers,
  ** framework_full_s) -- their FLOPs as the graph counts them and their
  ** share of adj[0] */
  bool ctx = p->recompute == PLAN_RECOMPUTE_FULL &&
             ((p->remat_device | p->remat_offload) & PLAN_RN_CONTEXT);
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    bool back = op->phase == GRAPH_BACKWARD;
    if ((op->phase != GRAPH_FORWARD && !back) || !step_attention_dot(g, op)) continue;
    int kind = op->layer < d->layers ? wl_tf_layer_kind(d, op->layer) : -1;
    graph_cost c = graph_op_cost(g, i);
    double f = graph_cost_flops(&c) * (double)op->count;
    double a = p->attention == PLAN_ATTN_FLASH
                   ? f * (step_kernels_of(hw, d, p, kind).flash * (back ? STEP_FLASH_BWD_DOTS : 1) - 1)
                   : 0;
    adj[back] += a;
    if (ctx && !back && kind >= 0 && framework_full_unread_weights(p->framework, d, kind, 0) > 0)
      kept[0] += f, kept[1] += a;
  }
}

/* The model's FLOPs a step, and the hardware's (with recomputation, and
** the attention kernel's own arithmetic in place of the graph's). */
static int rates(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
                 size_t errn) {
  const wl_tf_dims *d = &m->info.tf;
  /* the model as loaded already is the step when batch and sequence
  ** match (a 405B graph takes a third of a second to build again) */
  model *full = NULL;
  if (p->gbs != m->train.global_batch || p->seq != m->train.seq_len) {
    diag *dg = diag_new();
    model_opts o = {.seq_len = p->seq, .global_batch = p->gbs, .forward_only = false};
    full = dg ? model_derive(m, &o, dg) : NULL;
    diag_free(dg);
    if (!full) return str_errf(err, errn, "cannot rebuild %s", m->name);
  }
  const graph *fg = full ? full->g : m->g;
  graph_cost f = graph_total_cost(fg, GRAPH_FORWARD), b = graph_total_cost(fg, GRAPH_BACKWARD);
  r->model_flops_per_step = graph_cost_flops(&f) + graph_cost_flops(&b);
  double layer_f = graph_cost_flops(&f) / (double)d->layers; /* close enough for HFU */
  /* full: the forward again, less under JAX the matmuls its backward never
  ** reads (framework_full_unread_weights: 2 FLOPs a weight a token);
  ** selective: the recomputed share of a layer's forward -- under JAX's
  ** dots policy the attention core alone (its elementwise ops hold no
  ** matmul FLOPs), else in the layers' time's proportion */
  bool jax = p->framework >= 0 && frameworks[p->framework].jax_remat;
  double rec = 0;
  if (p->recompute == PLAN_RECOMPUTE_FULL) {
    rec = graph_cost_flops(&f);
    double tokens = (double)p->gbs * (double)p->seq;
    unsigned saved = p->remat_device | p->remat_offload;
    for (int k = 0; k < WL_LAYER_KINDS; k++)
      rec -= (double)r->kind_n[k] * 2 * tokens * framework_full_unread_weights(p->framework, d, k, saved);
  } else if (p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    double share = jax && !p->recompute_modules ? r->attn_core_fwd_s : step_recompute_s(r, p, d, -1);
    rec = layer_f * (double)d->layers * share / (r->layer_fwd_s > 0 ? r->layer_fwd_s : 1);
  }
  hw_model ah, gh;
  const hw_model *ghw, *lhw = step_layer_hw(hw, p, &ah, &gh, &ghw);
  double adj[2], kept[2];
  flash_adjust(fg, lhw, d, p, adj, kept);
  /* a full recompute runs the forward's core again */
  /* a full recompute runs the forward's core again, but where MaxText
  ** kept its context (the core's output and log-sum-exp) */
  double again = p->recompute == PLAN_RECOMPUTE_FULL ? adj[0] - kept[1] : 0;
  rec -= kept[0];
  r->hardware_flops_per_step = r->model_flops_per_step + rec + adj[0] + adj[1] + again;
  model_free(full);
  return 0;
}

static int simulate_cached(const model *m, const hw_model *hw, const plan *pl,
                           const input_cfg *in, step_result *r, step_timeline *tl, char *err,
                           size_t errn) {
  plan p = *pl;
  const wl_tf_dims *d = &m->info.tf;
  if (step_costs(m, hw, &p, r, err, errn) != 0) return -1;
  if (strcmp(m->format, "hlo") == 0 || d->layers == 0) {
    if (step_simulate_whole(m, hw, &p, r, tl, err, errn) != 0) return -1;
    double compute_s = r->step_time_s;
    /* a family that writes its whole step (gbdt) reads its table once, not
    ** a batch a step; an HLO module's inputs are its own */
    if (!in || compute_s <= 0 || m->info.whole_step || strcmp(m->format, "hlo") == 0) return 0;
    if (input_stall(hw, &p, in, r, err, errn) != 0) return -1;
    /* the rates per second fall with the stall */
    double k = compute_s / r->step_time_s;
    r->mfu *= k, r->hfu *= k, r->tokens_per_s *= k;
    r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
    return 0;
  }
  step_desc sd;
  if (step_describe(m, hw, &p, r, NULL, &sd, err, errn) != 0) return -1;
  r->layers_per_stage = sd.layers_per_stage;
  r->microbatches = sd.microbatches;
  r->dp_allreduce_s = sd.dp_allreduce_s;
  r->zero3_gather_s = sd.zero3_gather_s;
  r->optimizer_s = sd.optimizer_s;
  r->tp_comm_bwd_s = sd.tp_comm_bwd_s;
  r->full_contention = sd.full_contention;
  r->full_chips = sd.full_chips;
  r->full_groups = sd.full_groups;
  /* 3. the pipeline on the event engine */
  sched_out so;
  if (sched_run(&sd.sched, &so, err, errn) != 0) return -1;
  /* 4. gradient buckets all-reduce while the backward runs: a layer's
  ** bucket is ready when the last micro-batch's backward of its chunk has
  ** passed it (interleaved: each chunk when its own last backward does, as
  ** Megatron's overlap_grad_reduce launches a chunk's buckets), and the
  ** buckets queue on the stage's network link in the order they are ready */
  int rc = 0;
  int64_t nbk = sd.buckets;
  double *bk0 = calloc((size_t)(p.pp * nbk), sizeof *bk0);
  double *bk1 = calloc((size_t)(p.pp * nbk), sizeof *bk1);
  double *opt_t0 = calloc((size_t)p.pp, sizeof *opt_t0);
  if (!bk0 || !bk1 || !opt_t0) {
    rc = str_errf(err, errn, "out of memory");
    goto done;
  }
  double end = sched_tail(&sd.sched, &so, sd.dp_allreduce_s, nbk, sd.after_backward,
                          sd.optimizer_s, bk0, bk1, opt_t0);
  step_times st;
  finish(&sd, &so, end, &st);
  r->step_time_s = st.step_time_s;
  r->breakdown_s = st.breakdown_s;
  r->exposed_dp_s = st.exposed_dp_s;
  r->param_gather_exposed_s = st.param_gather_exposed_s;
  r->coll_sm_s = st.coll_sm_s, r->coll_hidden_s = st.coll_hidden_s, r->coll_share = st.coll_share;
  /* 5. the input pipeline of each host feeds this step time of compute */
  if (in && input_stall(hw, &p, in, r, err, errn) != 0) {
    rc = -1;
    goto done;
  }
  /* 6. memory per chip (Korthikanti et al. 2022 activations, ZeRO) */
  {
    mem_opts mo;
    plan mp;
    mem_setup(m, hw, &p, &mo, &mp);
    if (mem_transformer(d, &mp, &mo, &r->memory, err, errn) != 0) {
      rc = -1;
      goto done;
    }
    r->fits = r->memory.fits;
    if (!r->fits) {
      step_fix_rules fr = {m, hw, p.ep > 0 ? p.ep : 1};
      r->n_fixes = mem_fixes(d, &mp, &mo, step_fix_runs, &fr, r->fixes, err, errn);
      if (r->n_fixes < 0) r->n_fixes = 0;
    }
  }
  /* 7. rates */
  if (rates(m, hw, &p, r, err, errn) != 0) {
    rc = -1;
    goto done;
  }
  if (tl) {
    *tl = (step_timeline){.pp = p.pp, .vp = p.vp, .M = sd.sched.M, .spans = so.spans,
                          .n_spans = so.n_spans, .bucket_t0 = bk0, .bucket_t1 = bk1,
                          .buckets = sd.dp_allreduce_s > 0 ? nbk : 0, .opt_t0 = opt_t0,
                          .drain_s = sched_drain_s(&sd.sched)};
    tl->drain_t0 = so.last_b_end[p.pp - 1] - tl->drain_s;
    so.spans = NULL; /* the timeline's now */
    bk0 = bk1 = opt_t0 = NULL;
    if (timeline_layers(m, hw, &p, r, tl, err, errn) != 0) {
      step_timeline_free(tl);
      rc = -1;
      goto done;
    }
  }
  /* TF32: against the tensor cores' rate the GEMMs ran at, not fp32's */
  double peak = (p.gemm == PLAN_GEMM_TF32 ? plan_gemm_peak_flops(hw, &p)
                                          : optime_peak_flops(hw, p.precision)) * (double)p.chips;
  r->mfu = r->model_flops_per_step / (r->step_time_s * peak);
  r->hfu = r->hardware_flops_per_step / (r->step_time_s * peak);
  r->tokens_per_s = (double)p.gbs * (double)p.seq / r->step_time_s;
  /* a Reduction Server's reducer VMs are billed beside the chips */
  r->host_usd_per_hour = (double)p.reduction_server * coll_rs_reducer_usd_per_h(hw);
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p.chips + r->host_usd_per_hour;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
done:
  free(bk0);
  free(bk1);
  free(opt_t0);
  sched_out_free(&so);
  return rc;
}

cJSON *step_json(const model *m, const hw_model *hw, const plan *p, const step_result *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->name);
  cJSON_AddStringToObject(o, "hw", hw->name);
  cJSON_AddNumberToObject(o, "chips", (double)p->chips);
  cJSON *pj = cJSON_AddObjectToObject(o, "plan");
  cJSON_AddNumberToObject(pj, "dp", (double)p->dp);
  cJSON_AddNumberToObject(pj, "tp", (double)p->tp);
  cJSON_AddNumberToObject(pj, "pp", (double)p->pp);
  cJSON_AddNumberToObject(pj, "cp", (double)(p->cp > 0 ? p->cp : 1));
  cJSON_AddNumberToObject(pj, "ep", (double)p->ep);
  cJSON_AddNumberToObject(pj, "etp", (double)(p->etp > 0 ? p->etp : 1));
  cJSON_AddNumberToObject(pj, "zero", p->zero);
  cJSON_AddStringToObject(pj, "embeddings", plan_embeddings_names[p->embeddings]);
  if (p->hsdp > 0) cJSON_AddNumberToObject(pj, "hsdp", (double)p->hsdp);
  if (p->slice_shape[0] > 0) { /* "4x4x8", as --topology takes it */
    char sh[64];
    hw_shape_text(p->slice_shape, 3, p->slice_twisted, sh, sizeof sh);
    cJSON_AddStringToObject(pj, "slice_shape", sh);
  }
  cJSON_AddNumberToObject(pj, "mbs", (double)p->mbs);
  cJSON_AddNumberToObject(pj, "gbs", (double)p->gbs);
  cJSON_AddNumberToObject(pj, "seq", (double)p->seq);
  char rl[256];
  cJSON_AddStringToObject(pj, "recompute", plan_recompute_label(p, rl, sizeof rl));
  cJSON_AddStringToObject(pj, "precision", plan_precision_label(p));
  cJSON_AddStringToObject(pj, "pp_schedule", plan_schedule_names[p->schedule]);
  cJSON_AddNumberToObject(pj, "vp", (double)p->vp);
  cJSON_AddBoolToObject(pj, "sp", p->sp);
  cJSON_AddStringToObject(pj, "grad_sync", plan_grad_sync_names[p->grad_sync]);
  cJSON_AddStringToObject(pj, "attention", plan_attention_names[p->attention]);
  cJSON_AddStringToObject(pj, "framework", framework_names[p->framework]);
  if (p->attn_kernel) cJSON_AddStringToObject(pj, "attention_kernel", plan_attn_kernel_names[p->attn_kernel]);
  cJSON_AddBoolToObject(pj, "eager", p->eager);
  if (p->cp > 1) cJSON_AddStringToObject(pj, "cp_comm", plan_cp_comm_names[framework_cp_comm(p)]);
  if (p->pp_layers) {
    cJSON *a = cJSON_AddArrayToObject(pj, "pp_layers");
    for (int i = 0; a && i < p->n_pp_layers; i++)
      cJSON_AddItemToArray(a, cJSON_CreateNumber(p->pp_layers[i]));
  }
  if (p->ep > 1) cJSON_AddBoolToObject(pj, "ep_overlap", framework_moe_a2a_overlap(p->framework, p, hw));
  if (p->ep > 1)
    cJSON_AddStringToObject(pj, "moe_dispatcher", framework_moe_node_dedup(p) ? "flex" : "alltoall");
  if (plan_moe_load(p) > 1) cJSON_AddNumberToObject(pj, "moe_imbalance", plan_moe_load(p));
  if (p->bf16_weights) cJSON_AddStringToObject(pj, "weight_dtype", "bf16");
  if (p->vocab_tiles > 1) cJSON_AddNumberToObject(pj, "vocab_tiling", (double)p->vocab_tiles);
  if (p->defer_embedding_wgrad)
    cJSON_AddNumberToObject(pj, "wgrad_deferral_limit", (double)p->wgrad_deferral_limit);
  if (framework_fp8_attention(p, hw, NULL, NULL))
    cJSON_AddBoolToObject(pj, "fp8_dot_product_attention", true);
  if (p->pp_split_embedding) cJSON_AddBoolToObject(pj, "pp_split_embedding", true);
  if (p->pp_split_loss) cJSON_AddBoolToObject(pj, "pp_split_loss", true);
  if (p->full) {
    cJSON *fu = cJSON_AddObjectToObject(o, "full");
    cJSON_AddNumberToObject(fu, "chips", (double)r->full_chips);
    cJSON_AddNumberToObject(fu, "dp_groups", (double)r->full_groups);
    cJSON_AddNumberToObject(fu, "allreduce_contention", r->full_contention);
  }
  cJSON_AddNumberToObject(o, "step_time_s", r->step_time_s);
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "mfu", r->mfu);
  cJSON_AddNumberToObject(o, "hfu", r->hfu);
  cJSON_AddNumberToObject(o, "model_flops_per_step", r->model_flops_per_step);
  cJSON *b = cJSON_AddObjectToObject(o, "breakdown_s");
  cJSON_AddNumberToObject(b, "compute", r->breakdown_s.compute);
  cJSON_AddNumberToObject(b, "exposed_comm", r->breakdown_s.exposed_comm);
  cJSON_AddNumberToObject(b, "pipeline_bubble", r->breakdown_s.pipeline_bubble);
  cJSON_AddNumberToObject(b, "input_stall", r->breakdown_s.input_stall);
  cJSON_AddNumberToObject(b, "other", r->breakdown_s.other);
  /* inside compute: what the hidden data-parallel collectives' SMs cost it */
  cJSON_AddNumberToObject(o, "collectives_sm_s", r->coll_sm_s);
  if (p->defer_embedding_wgrad) { /* the drain as the schedule ran it (sim/sched.h) */
    sched_desc dd = {.M = r->microbatches, .defer = true, .defer_limit = p->wgrad_deferral_limit,
                     .b_last_defer = r->head_wgrad_s, .drain_ag_s = r->head_wgrad_ag_s};
    cJSON *w = cJSON_AddObjectToObject(o, "deferred_wgrad");
    cJSON_AddNumberToObject(w, "microbatches", (double)sched_deferred(&dd));
    cJSON_AddNumberToObject(w, "gemm_s", r->head_wgrad_s);
    cJSON_AddNumberToObject(w, "drain_s", sched_drain_s(&dd));
  }
  cJSON *mem = cJSON_AddObjectToObject(o, "memory_bytes");
  cJSON_AddNumberToObject(mem, "weights", r->memory.weights);
  cJSON_AddNumberToObject(mem, "gradients", r->memory.gradients);
  cJSON_AddNumberToObject(mem, "optimizer", r->memory.optimizer);
  cJSON_AddNumberToObject(mem, "activations", r->memory.activations);
  cJSON_AddNumberToObject(mem, "temporary", r->memory.temporary);
  cJSON_AddNumberToObject(mem, "weight_copies", r->memory.weight_copies);
  cJSON_AddNumberToObject(mem, "runtime", r->memory.runtime);
  cJSON_AddNumberToObject(mem, "comm", r->memory.comm);
  cJSON_AddNumberToObject(mem, "fragmentation", r->memory.fragmentation);
  cJSON_AddNumberToObject(mem, "host", r->memory.host);
  cJSON_AddNumberToObject(mem, "peak", r->memory.peak);
  cJSON_AddNumberToObject(mem, "capacity", r->memory.capacity);
  cJSON_AddBoolToObject(o, "fits", r->fits);
  if (!r->fits) {
    cJSON *fx = cJSON_AddArrayToObject(o, "fixes");
    for (int i = 0; i < r->n_fixes; i++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "change", r->fixes[i].what);
      cJSON_AddNumberToObject(x, "peak_bytes", r->fixes[i].peak);
      cJSON_AddBoolToObject(x, "fits", r->fixes[i].fits);
      if (r->fixes[i].step_time_s > 0)
        cJSON_AddNumberToObject(x, "step_time_s", r->fixes[i].step_time_s);
      cJSON_AddItemToArray(fx, x);
    }
  }
  cJSON *cost = cJSON_AddObjectToObject(o, "cost");
  cJSON_AddNumberToObject(cost, "usd_per_hour", r->usd_per_hour);
  cJSON_AddNumberToObject(cost, "usd_per_step", r->usd_per_step);
  cJSON *oc = cJSON_AddObjectToObject(o, "op_costs");
  cJSON_AddStringToObject(oc, "source", p->op_costs == OPCOST_FORMULA ? "formula" : "ir");
  cJSON_AddNumberToObject(oc, "kernels", (double)r->op_costs.asked);
  cJSON_AddNumberToObject(oc, "signatures_lowered", (double)r->op_costs.lowered);
  cJSON_AddNumberToObject(oc, "cache_hits", (double)r->op_costs.hits);
  cJSON_AddNumberToObject(oc, "declared", (double)r->op_costs.declared);
  cJSON_AddNumberToObject(oc, "ir_differs", (double)r->op_costs.differ);
  return o;
}
