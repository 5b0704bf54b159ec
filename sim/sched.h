/*
** sched.h -- the pipeline schedule of one training step, and what follows
** its last backward: the data-parallel gradient buckets and the update.
**
** One description (sched_desc: chunk times, the embedding and head on the
** first and last virtual stage, the point-to-point send, the micro-batch
** count, the schedule) and two evaluators of it that agree exactly (up to
** SCHED_SWEEP_TASKS; past it, to its period's extrapolation):
**   - sched_run: on the event engine, recording every task as a span
**     (what the trace and the viewer show);
**   - sched_eval: the same list schedule evaluated directly, task by task
**     in dependency order with no event queue (what the planner scores
**     thousands of plans with). For one stage (pp 1) it is the closed form
**     M (f + b); past SCHED_SWEEP_TASKS, an extrapolation of its period.
** Both take each chip's tasks in Megatron's order (schedules.py): warm-up
** forwards, then one forward and one backward in turn, then the remaining
** backwards; GPipe every forward, then every backward; interleaved 1F1B
** with V chunks a chip. A task starts when its chip is free and its inputs
** are in (the previous stage's forward plus the send; the next stage's
** backward plus the send; its own forward).
*/
#ifndef TPUSIM_SCHED_H
#define TPUSIM_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

typedef struct {
  int64_t pp, vp, M;      /* chips in the pipeline, chunks a chip, micro-batches */
  plan_schedule schedule;
  double f_chunk, b_chunk; /* one micro-batch through one chunk of layers */
  double f_first, b_first; /* added on virtual stage 0 (the embedding) */
  double f_last, b_last;   /* added on the last virtual stage (the head and loss) */
  double p2p_s;            /* a send between consecutive virtual stages */
  /* Megatron-Core's defer_embedding_wgrad_compute: the output layer's
  ** weight-gradient GEMM (b_last_defer of b_last) is left out of the last
  ** virtual stage's backward for the first defer_limit micro-batches (0:
  ** every one; wgrad_deferral_limit) and run after the chip's last
  ** backward, in the pipeline's flush (drain_embedding_wgrad_compute): each
  ** micro-batch's GEMM behind the tensor-parallel all-gather of its input,
  ** drain_ag_s (0 without sequence parallelism), the next gather under the
  ** GEMM. defer false: none of it. */
  bool defer;
  int64_t defer_limit;
  double b_last_defer, drain_ag_s;
  /* per virtual stage (pp x vp entries), when chunks differ (an uneven
  ** split, layers of several kinds): they replace f_chunk and b_chunk.
  ** NULL: every chunk is f_chunk, b_chunk. Not owned. */
  const double *f_vs, *b_vs;
} sched_desc;

/* The most virtual stages a schedule has (pp x V). */
#define SCHED_MAX_VS 2048

/* Whether two descriptions give the same schedule (field by field: a
** struct's padding is not part of it). */
bool sched_desc_same(const sched_desc *a, const sched_desc *b);

/* A task's duration: virtual stage vs, forward or backward (a micro-batch
** whose output-layer weight gradient is deferred takes b_last_defer less:
** sched_deferred). */
double sched_task_s(const sched_desc *d, int64_t vs, bool back);

/* The micro-batches whose output-layer weight gradient d defers (0: none),
** and the drain that runs them after the last chip's last backward:
** gather, then each GEMM with the next gather under it. */
int64_t sched_deferred(const sched_desc *d);
double sched_drain_s(const sched_desc *d);

/* One task as it ran: start, end, chip, +id+1 forward / -(id+1) backward,
** id = vs * M + micro-batch. */
typedef struct {
  double t0, t1;
  int64_t dev, code;
} sched_span;

/* What a schedule gives the rest of the step: per chip, when its last
** backward ended and how long it computed; per virtual stage, its last
** backward (its gradients are ready as it passes them). Arrays malloc'd.
** The deferred output-layer drain (sched_drain_s) is part of the last
** chip's busy time and its last backward's end. */
typedef struct {
  double end_s;           /* the last task's end */
  double *last_b_end;     /* [pp] */
  double *busy_s;         /* [pp] */
  double *vs_b_start, *vs_b_dur; /* [pp * vp] */
  sched_span *spans;      /* sched_run only: every task, in start order */
  int64_t n_spans;
} sched_out;

/* Both return 0, or -1 with err (out of memory; a deadlock would be a bug).
** sched_eval sweeps every task of a schedule up to SCHED_SWEEP_TASKS
** (stages x micro-batches; a millisecond or so) and extrapolates a longer
** one from its period; sched_eval_periodic extrapolates whatever the size
** (what tests check the period against). */
#define SCHED_SWEEP_TASKS 65536.0
int sched_run(const sched_desc *d, sched_out *out, char *err, size_t errn);
int sched_eval(const sched_desc *d, sched_out *out, char *err, size_t errn);
int sched_eval_periodic(const sched_desc *d, sched_out *out, char *err, size_t errn);
void sched_out_free(sched_out *o);

/* The gradient all-reduce after the schedule, per chip: its `buckets`
** buckets (one a layer) are ready as the last backward of their chunk
** passes them (after_backward: all at the chip's last backward's end) and
** queue on the chip's link, dp_s / buckets each; then the update,
** optimizer_s. Fills bucket_t0/t1 [pp * buckets] and opt_t0 [pp] when not
** NULL. Returns the step's end. */
double sched_tail(const sched_desc *d, const sched_out *o, double dp_s, int64_t buckets,
                  bool after_backward, double optimizer_s, double *bucket_t0, double *bucket_t1,
                  double *opt_t0);

#endif
