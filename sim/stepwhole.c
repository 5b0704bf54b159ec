/*
** stepwhole.c -- steps simulated as a whole: a model the chips replicate
** (cnn, mlp, dlrm, gbdt: data parallelism, one chip standing for all) and
** an imported HLO module (one device's compiled program). Their memory is
** read off the graph (footprint_of), not the transformer model of
** sim/memory.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "coll.h"
#include "optime.h"
#include "step_int.h"

/* What a whole-step graph holds and does, read off it: its parameters by
** role (weights and aux, optimizer state, the trainable ones' gradients,
** and parameters with no role -- an HLO module's), the forward values the
** backward reads (each once: a value a loop writes every trip is its
** stacked buffer), and its FLOPs by phase. */
typedef struct {
  double weights, gradients, optimizer, unflagged, saved;
  double flops[GRAPH_PHASE_COUNT];
} footprint;

static int footprint_of(const graph *g, footprint *f, char *err, size_t errn) {
  memset(f, 0, sizeof *f);
  int n = graph_count(g);
  char *used_back = calloc((size_t)n + 1, 1);
  if (!used_back) return str_errf(err, errn, "out of memory");
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    if (op->phase == GRAPH_BACKWARD)
      for (int k = 0; k < op->n_in; k++) used_back[op->in[k]] = 1;
  }
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    double b = graph_bytes(&op->out);
    if (op->kind == GOP_PARAMETER) {
      if (op->flags & GRAPH_OPT_STATE) f->optimizer += b;
      else if (op->flags & (GRAPH_WEIGHT | GRAPH_AUX)) f->weights += b;
      else f->unflagged += b;
      if (op->flags & GRAPH_TRAINABLE) f->gradients += b;
    } else if (op->phase == GRAPH_FORWARD && used_back[i]) {
      f->saved += b;
    }
    graph_cost c = graph_op_cost(g, i);
    f->flops[op->phase] += graph_cost_flops(&c) * (double)op->count;
  }
  free(used_back);
  return 0;
}

/* Data parallelism over a model the chips replicate: M micro-batches of
** forward and backward, the gradient all-reduce of which the part not
** hidden behind the last backward shows, the update. Memory from the graph:
** parameters, gradients, optimizer state, and the forward results the
** backward reads (kept for every micro-batch in flight: one). */
static int simulate_generic(const model *m, const hw_model *hw, const plan *p, step_result *r,
                            char *err, size_t errn) {
  model *own;
  const model *one = step_shard_of(m, p, 0, &own, err, errn);
  if (!one) return -1;
  footprint fp;
  if (footprint_of(one->g, &fp, err, errn) != 0) {
    model_free(own);
    return -1;
  }
  double weights = fp.weights, grads = fp.gradients, opt = fp.optimizer, saved = fp.saved;
  double flops = fp.flops[GRAPH_FORWARD] + fp.flops[GRAPH_BACKWARD];
  double M = m->info.whole_step ? 1 : (double)plan_microbatches(p);
  double compute = M * (r->layer_fwd_s + r->layer_bwd_s) + (M - 1) * r->grad_accum_layer_s;
  double ar = 0;
  if (p->dp > 1) {
    ar = coll_time_s(hw, p->dp, 0, COLL_ALL_REDUCE, grads, p->slices, p->reduction_server,
                     (coll_algo)p->dp_algo, p->coll_costs == PLAN_COLL_FORMULA, err, errn);
    if (ar < 0) {
      model_free(own);
      return -1;
    }
  }
  double exposed = ar > r->layer_bwd_s ? ar - r->layer_bwd_s : 0;
  r->dp_allreduce_s = ar;
  r->microbatches = (int64_t)M;
  r->step_time_s = compute + exposed + r->optimizer_s;
  r->breakdown_s.compute = compute;
  r->breakdown_s.exposed_comm = exposed;
  r->exposed_dp_s = exposed;
  r->breakdown_s.other = r->optimizer_s;
  r->memory = (mem_bytes){.weights = weights, .gradients = grads, .optimizer = opt,
                          .activations = saved, .capacity = (double)hw->chip.hbm_bytes};
  r->memory.peak = weights + grads + opt + saved;
  r->memory.fits = r->memory.peak <= r->memory.capacity;
  r->fits = r->memory.fits;
  r->model_flops_per_step = flops * M * (double)p->dp;
  r->hardware_flops_per_step = r->model_flops_per_step;
  double peak = optime_peak_flops(hw, p->precision) * (double)p->chips;
  r->mfu = r->hfu = peak > 0 ? r->model_flops_per_step / (r->step_time_s * peak) : 0;
  r->tokens_per_s = one->info.per_step * M * (double)p->dp / r->step_time_s;
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p->chips;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
  model_free(own);
  return 0;
}

/* An imported HLO module: one device's compiled program, run once a step
** on every device. Its ops are timed as a model's are (time_graph); its
** collectives -- all-reduce, all-gather, reduce-scatter, all-to-all over
** their replica groups -- by the network model, each where the program
** puts it and in series with the compute (XLA can overlap async
** collectives; this takes none). Memory: every entry parameter (the
** module does not tell weights from optimizer state; all are resident)
** plus the forward values the backward reads. */
static int simulate_hlo(const model *m, const hw_model *hw, const plan *p, step_result *r,
                        char *err, size_t errn) {
  const graph *g = m->g;
  phase_times t;
  if (step_time_graph_ops(hw, g, false, p->cost_cache, &t, NULL, err, errn) != 0) return -1;
  double compute = t.t[GRAPH_FORWARD] + t.t[GRAPH_BACKWARD] + t.t[GRAPH_OPTIMIZER], comm = 0;
  footprint fp;
  if (footprint_of(g, &fp, err, errn) != 0) return -1;
  /* the module does not tell weights from optimizer state: all resident */
  double state = fp.weights + fp.optimizer + fp.unflagged, saved = fp.saved;
  double flops = fp.flops[GRAPH_FORWARD] + fp.flops[GRAPH_BACKWARD] + fp.flops[GRAPH_OPTIMIZER];
  int n = graph_count(g);
  int64_t node = hw->chips_per_node;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    coll_op k;
    double bytes;
    switch (op->kind) {
    case GOP_ALL_REDUCE: k = COLL_ALL_REDUCE, bytes = graph_bytes(&op->out); break;
    case GOP_ALL_GATHER: k = COLL_ALL_GATHER, bytes = graph_bytes(&op->out); break;
    case GOP_REDUCE_SCATTER: k = COLL_REDUCE_SCATTER, bytes = graph_bytes(&graph_get(g, op->in[0])->out); break;
    case GOP_ALL_TO_ALL: k = COLL_ALL_TO_ALL, bytes = graph_bytes(&op->out); break;
    default: continue;
    }
    int64_t grp = op->group_size > 1 ? op->group_size : 1;
    if (grp < 2 || bytes <= 0) continue;
    double ct = coll_time_s(hw, grp, grp <= node ? grp : node, k, bytes, 1, 0, COLL_AUTO,
                            p->coll_costs == PLAN_COLL_FORMULA, err, errn);
    if (ct < 0) return -1;
    comm += ct * (double)op->count;
  }
  r->microbatches = 1;
  r->layer_fwd_s = t.t[GRAPH_FORWARD];
  r->layer_bwd_s = t.t[GRAPH_BACKWARD];
  r->optimizer_s = t.t[GRAPH_OPTIMIZER];
  r->step_time_s = compute + comm;
  r->breakdown_s.compute = t.t[GRAPH_FORWARD] + t.t[GRAPH_BACKWARD];
  r->breakdown_s.exposed_comm = comm;
  r->breakdown_s.other = t.t[GRAPH_OPTIMIZER];
  r->memory = (mem_bytes){.weights = state, .activations = saved, .capacity = (double)hw->chip.hbm_bytes};
  r->memory.peak = state + saved;
  r->memory.fits = r->memory.peak <= r->memory.capacity;
  r->fits = r->memory.fits;
  r->model_flops_per_step = r->hardware_flops_per_step = flops * (double)p->chips;
  double peak = optime_peak_flops(hw, p->precision) * (double)p->chips;
  r->mfu = r->hfu = peak > 0 && r->step_time_s > 0 ? r->model_flops_per_step / (r->step_time_s * peak) : 0;
  r->tokens_per_s = 1 / r->step_time_s;
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p->chips;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
  return 0;
}


int step_simulate_whole(const model *m, const hw_model *hw, const plan *p, step_result *r,
                        step_timeline *tl, char *err, size_t errn) {
  bool hlo = strcmp(m->format, "hlo") == 0;
  int rc = hlo ? simulate_hlo(m, hw, p, r, err, errn) : simulate_generic(m, hw, p, r, err, errn);
  if (rc == 0 && tl) {
    memset(tl, 0, sizeof *tl);
    tl->whole = true;
    tl->hlo = hlo;
  }
  return rc;
}
