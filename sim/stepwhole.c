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
#include "embed.h"
#include "optime.h"
#include "step_int.h"

/* What a whole-step graph holds and does, read off it: its parameters by
** role (weights and aux, optimizer state, the trainable ones' gradients,
** and parameters with no role -- an HLO module's), the forward values the
** backward reads (each once: a value a loop writes every trip is its
** stacked buffer), and its FLOPs by phase. */
typedef struct {
  double weights, gradients, optimizer, unflagged, saved;
  double largest; /* the largest parameter: FSDP's unit gathered whole */
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
      if (!(op->flags & GRAPH_OPT_STATE) && b > f->largest) f->largest = b;
    } else if (op->phase == GRAPH_FORWARD && used_back[i]) {
      f->saved += b;
    }
    graph_cost c = graph_op_cost(g, i);
    f->flops[op->phase] += graph_cost_flops(&c) * (double)op->count;
  }
  free(used_back);
  return 0;
}

/* The fixes of a data-parallel plan that does not fit, same chips first
** (fixes.c orders and prices them): ZeRO-3/FSDP, the embedding tables
** sharded over the chips or on parameter-server hosts, then the fewest
** chips (powers of two) on which sharded tables fit. */
static void generic_fixes(const model *m, const hw_model *hw, const plan *p, const emb_model *em,
                          step_result *r) {
  plan q[4];
  char what[4][96];
  int n = 0;
  bool tables = em->t.tables > 0 && p->embeddings == PLAN_EMB_REPLICATED;
  if (p->dp > 1 && p->zero < 3) {
    q[n] = *p, q[n].zero = 3;
    snprintf(what[n++], 96, "ZeRO stage %d -> 3 (FSDP: weights sharded over dp %lld)", p->zero,
             (long long)p->dp);
  }
  if (tables && p->dp > 1) {
    q[n] = *p, q[n].embeddings = PLAN_EMB_SHARDED;
    snprintf(what[n++], 96, "embeddings replicated -> sharded over the %lld chips (TorchRec%s)",
             (long long)p->dp, hw->chip.sparse_cores > 0 ? ", SparseCores" : " row-wise");
  }
  if (tables && hw->kind != HW_TPU) {
    q[n] = *p, q[n].embeddings = PLAN_EMB_PS;
    snprintf(what[n++], 96, "embeddings replicated -> ps (tables on CPU parameter-server hosts)");
  }
  if (em->t.tables > 0) {
    for (int64_t c = p->chips * 2; c <= (int64_t)1 << 16; c *= 2) {
      plan t = *p;
      t.chips = t.dp = c, t.embeddings = PLAN_EMB_SHARDED;
      emb_state s;
      emb_memory(em, hw, &t, &s);
      if (s.weights + s.gradients + s.optimizer + s.activations + s.temporary >
          (double)hw->chip.hbm_bytes)
        continue;
      if (plan_check(m, hw, &t, NULL, 0) != 0) continue;
      q[n] = t;
      snprintf(what[n++], 96, "chips %lld -> %lld, embeddings sharded over them", (long long)p->chips,
               (long long)c);
      break;
    }
  }
  r->n_fixes = 0;
  for (int i = 0; i < n && r->n_fixes < MEM_MAX_FIXES; i++) {
    if (plan_check(m, hw, &q[i], NULL, 0) != 0) continue;
    emb_state s;
    emb_memory(em, hw, &q[i], &s);
    mem_fix *f = &r->fixes[r->n_fixes++];
    memset(f, 0, sizeof *f);
    snprintf(f->what, sizeof f->what, "%s", what[i]);
    f->peak = s.weights + s.gradients + s.optimizer + s.activations + s.temporary;
    f->saves_bytes = r->memory.peak - f->peak;
    f->fits = f->peak <= (double)hw->chip.hbm_bytes;
    f->p = q[i];
  }
}

/* Data parallelism over a model the chips replicate: M micro-batches of
** forward and backward, the gradient all-reduce of which the part not
** hidden behind the last backward shows, the update. Memory from the graph:
** parameters, gradients, optimizer state, and the forward results the
** backward reads (kept for every micro-batch in flight: one), placed by
** the ZeRO stage and the embedding placement (sim/embed.h). */
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
  emb_model em = {.weights = fp.weights, .gradients = fp.gradients, .optimizer = fp.optimizer,
                  .saved = fp.saved, .largest_param = fp.largest};
  plan_embedding_tables(one->g, &em.t);
  bool formula = p->coll_costs == PLAN_COLL_FORMULA;
  emb_cost ec;
  if (emb_costs(&em, hw, p, formula, &ec, err, errn) != 0) {
    model_free(own);
    return -1;
  }
  double flops = fp.flops[GRAPH_FORWARD] + fp.flops[GRAPH_BACKWARD];
  double M = m->info.whole_step ? 1 : (double)plan_microbatches(p);
  double compute = M * (r->layer_fwd_s + r->layer_bwd_s) + (M - 1) * r->grad_accum_layer_s;
  double ar = 0;
  if (p->dp > 1 && ec.dense_grad_bytes > 0) {
    ar = coll_time_s(hw, p->dp, 0, COLL_ALL_REDUCE, ec.dense_grad_bytes, p->slices,
                     p->reduction_server, (coll_algo)p->dp_algo, formula, err, errn);
    if (ar < 0) {
      model_free(own);
      return -1;
    }
  }
  /* ZeRO-3: every micro-batch gathers the weights for its forward and
  ** again for its backward, each gather half of an all-reduce's traffic;
  ** the gradients' reduce-scatter and the stage 1-2 parameter all-gather
  ** add up to the all-reduce's */
  double gather = p->zero >= 3 && p->dp > 1 ? M * ar : 0;
  /* buckets all-reduced while the last backward runs (DDP's overlap), or
  ** the whole all-reduce after it (--grad-sync after-backward) */
  double hide = p->grad_sync == PLAN_GRAD_OVERLAP ? r->layer_bwd_s : 0;
  double exposed = (ar > hide ? ar - hide : 0) + gather;
  /* the embedding exchange: in series with the layers that need it, or on
  ** SparseCores beside them */
  double emb = M * ec.exchange_s;
  double emb_exposed = ec.exchange_overlapped ? (emb > compute ? emb - compute : 0) : emb;
  double opt = r->optimizer_s * ec.update_fraction;
  /* the backward the all-reduce hides under runs on the SMs its kernel
  ** leaves (step_coll_sm_share; the data-parallel group is every chip) */
  r->coll_share = step_coll_sm_share(hw, p->dp, step_group_node_members(hw, p->dp, 1));
  r->coll_hidden_s = ar < hide ? ar : hide;
  r->coll_sm_s = r->coll_hidden_s * r->coll_share;
  compute += r->coll_sm_s;
  r->dp_allreduce_s = ar;
  r->zero3_gather_s = gather;
  r->emb_exchange_s = emb;
  r->ps_hosts = ec.ps_hosts;
  r->microbatches = (int64_t)M;
  r->optimizer_s = opt;
  r->step_time_s = compute + exposed + emb_exposed + opt;
  r->breakdown_s.compute = compute;
  r->breakdown_s.exposed_comm = exposed + emb_exposed;
  r->exposed_dp_s = exposed;
  r->breakdown_s.other = opt;
  const emb_state *s = &ec.mem;
  r->memory = (mem_bytes){.weights = s->weights, .gradients = s->gradients, .optimizer = s->optimizer,
                          .activations = s->activations, .temporary = s->temporary,
                          .capacity = (double)hw->chip.hbm_bytes};
  r->memory.peak = s->weights + s->gradients + s->optimizer + s->activations + s->temporary;
  r->memory.fits = r->memory.peak <= r->memory.capacity;
  r->fits = r->memory.fits;
  r->model_flops_per_step = flops * M * (double)p->dp;
  r->hardware_flops_per_step = r->model_flops_per_step;
  /* TF32: against the unit the matmuls ran on, as for any recipe */
  double peak = (p->gemm == PLAN_GEMM_TF32 ? plan_gemm_peak_flops(hw, p)
                                           : optime_peak_flops(hw, p->precision)) * (double)p->chips;
  r->mfu = r->hfu = peak > 0 ? r->model_flops_per_step / (r->step_time_s * peak) : 0;
  r->tokens_per_s = one->info.per_step * M * (double)p->dp / r->step_time_s;
  r->host_usd_per_hour = ec.ps_usd_per_hour + (double)p->reduction_server * coll_rs_reducer_usd_per_h(hw);
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p->chips + r->host_usd_per_hour;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
  if (!r->fits) generic_fixes(m, hw, p, &em, r);
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
