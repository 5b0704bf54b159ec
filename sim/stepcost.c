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
int step_time_graph_ops(const hw_model *hw, const graph *g, bool flash, opcost *costs,
                        phase_times *out, op_times *ops, char *err, size_t errn) {
  fuse_plan *fp = fuse_graph_dup(g);
  if (!fp) return str_errf(err, errn, "out of memory");
  memset(out, 0, sizeof *out);
  int rc = 0;
  for (int k = 0; k < fp->n_groups && rc == 0; k++) {
    if (fp->size[k] == 0) continue;
    int root = fp->root[k];
    const graph_op *op = graph_get(g, root);
    bool core = op->out.rank == 5 && op->layer >= 0;
    graph_cost kc;
    if ((rc = opcost_kernel(costs, g, fp, k, &kc, err, errn)) != 0) break;
    optime_result r;
    if ((rc = optime_kernel(hw, g, fp, k, &kc, &r, err, errn)) != 0) break;
    double t = r.time_s;
    if (flash && core) {
      t = 0;
      for (int i = fp->first[k]; i <= root && rc == 0; i++) {
        if (fp->group_of[i] != k) continue;
        const graph_op *m = graph_get(g, i);
        optime_result mr;
        rc = optime_op(hw, g, i, &mr, err, errn);
        bool dot = m->kind == GOP_DOT;
        t += mr.compute_s * (dot && m->phase == GRAPH_BACKWARD ? 1.25 : 1) + (dot ? mr.overhead_s : 0);
      }
    }
    double n = (double)op->count;
    out->t[op->phase] += t * n;
    if (op->phase == GRAPH_FORWARD && core) out->attn_fwd += t * n;
    if (rc == 0 && ops && op->layer == 0 && t > 0 && op->phase != GRAPH_OPTIMIZER) {
      bool matrix = false; /* the trace's category: it holds a dot or convolution */
      for (int i = fp->first[k]; i <= root; i++) {
        graph_op_kind mk = graph_get(g, i)->kind;
        matrix |= fp->group_of[i] == k && (mk == GOP_DOT || mk == GOP_CONV);
      }
      rc = push_op(ops, (step_op){root, fp->size[k], matrix, op->phase, t * n, r.flops * n,
                                         r.bytes * n},
                   err, errn);
    }
  }
  fuse_free(fp);
  return rc;
}

static int time_graph(const hw_model *hw, const graph *g, opcost *costs, phase_times *out,
                      char *err, size_t errn) {
  return step_time_graph_ops(hw, g, false, costs, out, NULL, err, errn);
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
  int rc = time_graph(hw, one->g, p->cost_cache, &t, err, errn);
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
  *owned = NULL;
  if (!m->spec) return m;
  diag *d = diag_new();
  model_opts o = {.seq_len = p->seq > 0 ? p->seq : 0, /* 1 too: a given --seq 1 is used */
                  .global_batch = m->info.whole_step ? 0 : p->mbs, .shard_tp = p->tp,
                  .only_layers = layers, .precision = plan_precision_name(p->precision)};
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

static int costs_cached(const model *m, const hw_model *hw, const plan *pl, step_result *r,
                        char *err, size_t errn);

int step_costs(const model *m, const hw_model *hw, const plan *pl, step_result *r, char *err,
               size_t errn) {
  plan p = *pl;
  opcost *own;
  if (step_with_cache(&p, &own, err, errn) != 0) return -1;
  int rc = costs_cached(m, hw, &p, r, err, errn);
  r->op_costs = opcost_get_stats(p.cost_cache);
  opcost_free(own);
  return rc;
}

static int costs_cached(const model *m, const hw_model *hw, const plan *pl, step_result *r,
                        char *err, size_t errn) {
  memset(r, 0, sizeof *r);
  plan p = *pl;
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers == 0) return costs_generic(m, hw, &p, r, err, errn);
  /* 1. one layer's time on one chip */
  model *one, *two;
  if (!step_shard_of(m, &p, 1, &one, err, errn)) return -1;
  if (!step_shard_of(m, &p, 2, &two, err, errn)) {
    model_free(one);
    return -1;
  }
  phase_times t1, t2;
  bool flash = p.attention == PLAN_ATTN_FLASH;
  int rc = step_time_graph_ops(hw, one->g, flash, p.cost_cache, &t1, NULL, err, errn);
  if (rc == 0) rc = step_time_graph_ops(hw, two->g, flash, p.cost_cache, &t2, NULL, err, errn);
  /* Gradient accumulation: each micro-batch after the first adds its weight
  ** gradients into the step's buffer in a pass of its own -- PyTorch's
  ** AccumulateGrad, Megatron-LM's main_grad.add_ hook -- reading both and
  ** writing the sum: 3 x 2 B per trainable parameter (the 16-bit dtype the
  ** gradients are all-reduced in, as below) */
  double bw = hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency;
  double layer_params = (double)(two->trainable_params - one->trainable_params);
  r->grad_accum_layer_s = layer_params * 6 / bw;
  r->grad_accum_head_s = (double)(one->trainable_params - (int64_t)layer_params) * 6 / bw;
  model_free(one);
  model_free(two);
  if (rc != 0) return -1;
  r->layer_fwd_s = t2.t[GRAPH_FORWARD] - t1.t[GRAPH_FORWARD];
  r->layer_bwd_s = t2.t[GRAPH_BACKWARD] - t1.t[GRAPH_BACKWARD];
  r->attn_core_fwd_s = t2.attn_fwd - t1.attn_fwd;
  r->head_fwd_s = t1.t[GRAPH_FORWARD] - r->layer_fwd_s;
  r->head_bwd_s = t1.t[GRAPH_BACKWARD] - r->layer_bwd_s;

  /* 2. collectives */
  double act = (double)p.mbs * (double)p.seq * (double)d->hidden * 2; /* b s h, 16-bit */
  int64_t node = hw->chips_per_node;
  double ar = coll_time_s(hw, p.tp, p.tp <= node ? p.tp : node, COLL_ALL_REDUCE, act, 1, 0, COLL_AUTO, false, err, errn);
  if (ar < 0) return -1;
  if (p.sp) { /* a reduce-scatter and an all-gather in place of each all-reduce */
    double rs = coll_time_s(hw, p.tp, p.tp <= node ? p.tp : node, COLL_REDUCE_SCATTER, act, 1, 0, COLL_AUTO, false, err, errn);
    double ag = coll_time_s(hw, p.tp, p.tp <= node ? p.tp : node, COLL_ALL_GATHER, act, 1, 0, COLL_AUTO, false, err, errn);
    if (rs < 0 || ag < 0) return -1;
    ar = rs + ag;
  }
  r->tp_comm_fwd_s = 2 * ar; /* Megatron: after attention and after the MLP */
  r->tp_comm_bwd_s = 2 * ar; /* full recompute's again: step_describe adds them */
  if (p.ep > 1) { /* MoE: tokens to their experts' chips and back, each way twice */
    double a2a = coll_time_s(hw, p.ep, p.ep <= node ? p.ep : node, COLL_ALL_TO_ALL,
                             act * (double)(d->top_k > 0 ? d->top_k : 1), 1, 0, COLL_AUTO, false,
                             err, errn);
    if (a2a < 0) return -1;
    r->tp_comm_fwd_s += 2 * a2a;
    r->tp_comm_bwd_s += 2 * a2a;
  }
  if (p.pp > 1) {
    /* each TP rank sends its 1/tp of the activations (Megatron's
    ** scatter-gather), to the next stage's chip: another node when a
    ** stage fills one */
    hw_model h = *hw;
    int64_t stage_chips = p.tp, per = stage_chips < node ? stage_chips : node;
    h.chips_per_node = per;
    net *n = net_build(&h, 2 * stage_chips, 1, err, errn);
    if (!n) return -1;
    int64_t pairs[64][2];
    int np = 0;
    for (int64_t i = 0; i < stage_chips && np < 64; i++, np++) {
      pairs[np][0] = i;
      pairs[np][1] = stage_chips + i;
    }
    double t;
    rc = coll_flows(n, (const int64_t(*)[2])pairs, np, act / (double)p.tp, &t);
    net_free(n);
    if (rc != 0) {
      snprintf(err, errn, "pipeline send failed");
      return -1;
    }
    r->p2p_s = t;
  }
  return 0;
}

