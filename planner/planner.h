/*
** planner.h -- `tpusim plan`: search hardware x chips x parallel plans for
** the fastest or cheapest way to train a model, confirm the best with the
** event simulation, and say why the rest lost.
**
** Two speeds of one step model: every candidate is scored by the
** simulator's fast path (step_fast, over per-chip costs cached per hardware
** x tp x micro-batch x ep); the best few are re-run through the event
** simulation (step_simulate).
*/
#ifndef TPUSIM_PLANNER_H
#define TPUSIM_PLANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/step.h"
#include "../workloads/model.h"

typedef enum { PLANNER_TIME, PLANNER_COST, PLANNER_COST_UNDER_DEADLINE } planner_objective;

/* How far a run has come, for a progress line (planner_req.progress). */
typedef struct {
  const char *what;   /* "searching" (hardware entries) or "simulating" (candidates) */
  int done, total;    /* entries finished, of all */
  int64_t evaluated;  /* plans scored so far (searching) */
  double best_key;    /* the best plan so far by the objective: training time (s) for
                      ** time, dollars otherwise; INFINITY: none yet */
  char best_hw[32];   /* its hardware */
  double elapsed_s;
  double eta_s;       /* the time left at the pace so far (rough: entries differ); < 0 unknown */
} planner_progress;

typedef struct {
  const char *hw_list;  /* comma list of names; NULL or "all": the catalog */
  int64_t chips;        /* exactly this many (0: search up to max_chips) */
  int64_t max_chips;
  double tokens;        /* to train; 0: use steps */
  int64_t steps;
  planner_objective objective;
  double deadline_s;    /* for cost-under-deadline */
  double budget_usd;    /* 0: none */
  bool spot;
  double preemptions_per_month; /* --spot: share of instances reclaimed a month (0: 0.2) */
  int top;              /* candidates confirmed by simulation */
  int threads;          /* 0: every online core */
  opcost_source op_costs; /* where kernel costs come from (sim/opcost.h): the IR by default */
  /* a kernel-cost cache every plan of the run shares, across threads, so
  ** each kernel signature is lowered once (NULL: planner_run makes one) */
  opcost *cost_cache;
  /* called from the calling thread about every 100 ms while the search
  ** runs, and once when a phase ends (NULL: none) */
  void (*progress)(void *ctx, const planner_progress *pg);
  void *progress_ctx;
  /* what the user fixed instead of the search (0: searched, or the
  ** default): context parallelism, the GEMM recipe, the framework (else
  ** each chip kind's default, sim/framework.h), activation or optimizer
  ** offload, the sequence length */
  int64_t cp;
  plan_gemm gemm;
  bool has_framework;
  int framework;
  plan_offload offload;
  bool has_offload; /* offload fixed to `offload`; else searched where the chip has a host link */
  int64_t seq;
  /* every plan of the space scored: no bound prunes (the best plan is the
  ** same either way; the bounds only save time) */
  bool exhaustive;
  /* tests: every scored plan's step time checked against the bounds the
  ** pruned search uses (planner_result.bound_violations) */
  bool check_bounds;
} planner_req;

typedef struct {
  char hw[32];
  plan p;
  double analytic_step_s;
  step_result sim;       /* filled for the confirmed ones */
  bool simulated;
  double train_s, train_usd;
  int64_t billed_chips; /* whole instances: what the price is paid on */
  /* --spot: checkpoint write time, the Young/Daly interval, the expected
  ** preemptions over the run, and the time they and the checkpoints add */
  double ckpt_write_s, ckpt_interval_s, preemptions, spot_overhead;
} planner_cand;

/* What bound when a plan or a hardware was turned down. */
typedef enum {
  PLANNER_CAUSE_REQUIRES,     /* the model needs what the chip lacks (fp64, CUDA kernels) */
  PLANNER_CAUSE_DTYPE,        /* no unit for the training precision */
  PLANNER_CAUSE_DIVISIBILITY, /* a parallel size that does not divide what it splits */
  PLANNER_CAUSE_SLICE,        /* a group the network cannot form (a TPU slice size) */
  PLANNER_CAUSE_MEMORY,       /* the peak per chip over its HBM */
  PLANNER_CAUSE_BUDGET,       /* over --budget */
  PLANNER_CAUSE_DEADLINE,     /* over --deadline */
  PLANNER_CAUSE_COUNT
} planner_cause;

/* "requires", "dtype", "divisibility", "slice", "memory", "budget", "deadline" */
const char *planner_cause_name(planner_cause c);

/* A hardware with no plan left, and why: the limit that bound its last
** plans, how many plans each limit turned down, and the plan that came
** closest (memory: the smallest peak, with its figures; budget: the
** cheapest; deadline: the fastest). */
typedef struct {
  char hw[32];
  planner_cause cause;
  char reason[256];
  int64_t plans_by[PLANNER_CAUSE_COUNT];
  bool has_closest;
  planner_cand closest;   /* its plan and price (not simulated) */
  double peak_bytes, capacity_bytes; /* memory: the closest plan's peak per chip, the HBM */
} planner_reject;

/* Arrays are malloc'd and sized to what the search found: free with
** planner_result_free (a result that planner_run filled, or all zeros). */
typedef struct {
  planner_cand best;
  planner_cand *ranked; /* the confirmed candidates, best first */
  int n_ranked;
  planner_reject *rejected; /* every hardware the search turned down, in catalog order */
  int n_rejected;
  planner_cand *per_hw; /* the best analytic plan of every hardware that has one */
  int n_per_hw;
  int64_t rejected_by[PLANNER_CAUSE_COUNT]; /* plans turned down, by cause, over all hardware */
  int64_t evaluated;
  /* plans the search proved could not enter the kept candidates (a step
  ** time bound) and so never scored; 0 with exhaustive */
  int64_t pruned;
  int64_t cost_builds; /* per-chip cost sets computed (step_costs) */
  int64_t bound_violations; /* check_bounds: plans faster than a bound said (0, or a bug) */
  double search_s;
  /* thread seconds (summed over threads): per-chip cost builds, analytic
  ** scoring (memory model included), event simulations */
  double costs_s, scoring_s, simulate_s;
  char why[1024]; /* what decided it, in sentences */
  /* the cheapest and the fastest plans that fit, before --budget and
  ** --deadline drop any: what was closest when nothing is left */
  planner_cand cheapest, fastest;
  bool any_fit;
  char advice[512]; /* when data parallelism's all-reduce shows: what a Reduction Server buys */
  int64_t advice_reducers;
  double advice_step_s; /* the step with them (closed form), 0 without advice */
  char objective[32];
  /* the uneven pipeline splits the result's plans point into (their
  ** pp_layers): a plan copied out of the result is valid while it is */
  int32_t *stage_splits;
  int64_t *stage_split_at;
} planner_result;

/* The objective a model is planned for when the user names none: cost for
** the classical families (gbdt, mlp), which usually belong on CPUs and
** whose jobs are short enough that price, not hours, decides; else time. */
planner_objective planner_default_objective(const model *m);

/* The analytic step time of one plan (what the search scores it with):
** the per-chip costs, then step_fast. Returns the time in seconds,
** or -1 with err. The plan must pass plan_check first. */
double planner_analytic_step(const model *m, const hw_model *hw, const plan *p, char *err,
                             size_t errn);

/* Returns 0, or -1 with a message that says what bound and what was
** closest (out->rejected then says it per hardware). out is overwritten:
** free a previous result first. */
int planner_run(const model *m, const hw_catalog *cat, const planner_req *req, planner_result *out,
                char *err, size_t errn);
void planner_result_free(planner_result *r);

#endif
