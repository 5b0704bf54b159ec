/*
** step.h -- one training step of a model on a machine under a plan: the
** per-chip programs timed op by op, the pipeline and the gradient
** all-reduce scheduled on the event engine, and memory per chip.
**
** Equivalent chips are simulated once: the tensor-parallel ranks of a
** stage and the data-parallel replicas run the same program, so one chip
** per pipeline stage stands for its group.
*/
#ifndef TPUSIM_STEP_H
#define TPUSIM_STEP_H

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "../hw_models/hw.h"
#include "../workloads/model.h"
#include "input.h"
#include "memory.h"
#include "opcost.h"
#include "plan.h"

typedef struct {
  double step_time_s, tokens_per_s, mfu, hfu;
  double model_flops_per_step, hardware_flops_per_step;
  struct {
    double compute, exposed_comm, pipeline_bubble, input_stall, other;
  } breakdown_s;
  mem_bytes memory;
  bool fits;
  mem_fix fixes[MEM_MAX_FIXES]; /* when it does not fit: the cheapest changes first */
  int n_fixes;
  double usd_per_hour, usd_per_step;
  /* the pieces, for --explain */
  double layer_fwd_s, layer_bwd_s, attn_core_fwd_s, head_fwd_s, head_bwd_s;
  double tp_comm_fwd_s, tp_comm_bwd_s, p2p_s, dp_allreduce_s, optimizer_s;
  /* adding one micro-batch's weight gradients into the step's gradient
  ** buffer, per layer and for the embedding and head (paid by every
  ** micro-batch after the first) */
  double grad_accum_layer_s, grad_accum_head_s;
  /* ZeRO-3: gathering one stage's weights (per micro-batch, forward and backward) */
  double zero3_gather_s;
  double exposed_dp_s; /* of the step: the gradient all-reduce not hidden behind backward */
  /* --full: the data-parallel rings of every (stage, tensor rank) at once
  ** against one alone, on the whole machine's network; chips simulated */
  double full_contention;
  int64_t full_chips, full_groups;
  int64_t microbatches, layers_per_stage;
  char network[160];
  /* where the kernels' costs came from (sim/opcost.h); a shared cache's
  ** figures count every call that used it */
  opcost_stats op_costs;
} step_result;

/* For a plan that does not fit (r->fits false, r->fixes listed by
** step_simulate): simulates each fix's plan for its step time, then orders
** the fixes: those that fit alone first, cheapest first (chips x step
** time), then the rest by peak. p is the plan r was simulated with. Returns 0 or -1. */
int step_price_fixes(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
                     size_t errn);

/* The contract's simulate object (shared/design.md): model, hw, chips,
** plan, step_time_s, ..., memory_bytes, fits, cost; fixes when it does not fit. */
cJSON *step_json(const model *m, const hw_model *hw, const plan *p, const step_result *r);

/* The per-chip pieces of a step under plan p (the layer_*, tp_comm_* and
** p2p_s fields of r): what does not depend on pp, dp or the schedule, so a
** search can compute it once per (hardware, tp, ep, mbs, sp, recompute). */
int step_costs(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
               size_t errn);

/* Simulates one step; `in` describes the host input pipeline of each host
** (NULL: data is assumed to be there). With `trace` non-NULL, writes the
** step as Chrome/Perfetto trace JSON there: a process per pipeline stage
** with its compute and network tracks, and its HBM in use as a counter.
** Returns 0, or -1 with err. */
int step_simulate(const model *m, const hw_model *hw, const plan *p, const input_cfg *in,
                  step_result *r, FILE *trace, char *err, size_t errn);

#endif
