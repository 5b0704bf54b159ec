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

/* energy: joules per run, the chips' TDP x chips x time (price.c) */
typedef enum { PLANNER_TIME, PLANNER_COST, PLANNER_COST_UNDER_DEADLINE, PLANNER_ENERGY } planner_objective;

/* Parts of the plan the user pins with --fix key=value,... (fix.c): the
** search keeps only the plans that match every key given. */
typedef enum {
  PLANNER_FIX_TP, PLANNER_FIX_PP, PLANNER_FIX_DP, PLANNER_FIX_CP, PLANNER_FIX_EP, PLANNER_FIX_ETP,
  PLANNER_FIX_VP, PLANNER_FIX_MBS, PLANNER_FIX_ZERO, PLANNER_FIX_RECOMPUTE, PLANNER_FIX_CHIPS,
  PLANNER_FIX_COUNT
} planner_fix_key;

typedef struct {
  unsigned set;                   /* bit k: key k was given */
  int64_t value[PLANNER_FIX_COUNT]; /* recompute: a plan_recompute */
} planner_fix;

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
  double deadline_s;    /* 0: none; else plans that take longer are turned down, whatever the objective */
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
  /* where a recommender's embedding tables live, fixed (--embeddings);
  ** else each placement is planned and the best kept */
  bool has_embeddings;
  plan_embeddings embeddings;
  int64_t seq;
  /* the MoE all-to-all overlap fixed (--ep-overlap); else both off and on
  ** are searched for expert-parallel plans where the framework has it */
  bool has_ep_overlap;
  plan_ep_overlap ep_overlap;
  /* the MoE token dispatcher of the expert-parallel plans (--moe-dispatcher;
  ** 0: the framework's) */
  plan_moe_dispatcher moe_dispatcher;
  /* uneven routing (--moe-imbalance): the busiest expert chip's tokens over
  ** the even share, given to every expert-parallel plan up to what its ep
  ** allows (plan_moe_imbalance_max); 0 or 1: even */
  double moe_imbalance;
  /* MaxText's weight_dtype bf16 and num_vocab_tiling, fixed (false, 0:
  ** fp32 weights, one tile) */
  bool bf16_weights;
  int64_t vocab_tiles;
  /* Megatron-Core's deferred output-layer weight gradients
  ** (--defer-embedding-wgrad-compute, --wgrad-deferral-limit), for every
  ** plan with a pipeline (pp 1 has no flush to run them in) */
  bool defer_embedding_wgrad;
  int64_t wgrad_deferral_limit;
  /* the attention core in fp8 (--fp8-dot-product-attention), fixed; 0:
  ** the framework's */
  plan_fp8_attn fp8_attention;
  /* every plan of the space scored: no bound prunes (the best plan is the
  ** same either way; the bounds only save time) */
  bool exhaustive;
  /* tests: every scored plan's step time checked against the bounds the
  ** pruned search uses (planner_result.bound_violations) */
  bool check_bounds;
  planner_fix fix; /* --fix: only plans that match (set 0: none) */
  /* the host input pipeline each plan reads through (--input, --storage,
  ** --input-host, --prefetch; zero: simulate's defaults): its stall is
  ** part of every step scored and simulated, as simulate's */
  input_choice input;
  bool pareto;     /* collect the time-versus-cost frontier (planner_result.pareto) */
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
  double energy_j; /* the run's chip energy at TDP (0: the hardware gives no chip.tdp_w) */
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
  PLANNER_CAUSE_FIXED,        /* not what --fix pins */
  PLANNER_CAUSE_COUNT
} planner_cause;

/* "requires", "dtype", "divisibility", "slice", "memory", "budget", "deadline", "fixed" */
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
  int64_t evaluated; /* plans the memory model checked (each distinct plan once) */
  int64_t timed;     /* of them, those that fitted and the fast path timed (step_fast) */
  /* plans the search proved could not enter the kept candidates (a step
  ** time bound) and so never scored; 0 with exhaustive */
  int64_t pruned;
  int64_t cost_builds; /* per-chip cost sets computed (step_costs) */
  int64_t bound_violations; /* check_bounds: plans faster than a bound said (0, or a bug) */
  double search_s;
  /* thread CPU seconds (summed over threads): per-chip cost builds,
  ** analytic scoring (memory model included), event simulations */
  double costs_s, scoring_s, simulate_s;
  char why[1024]; /* what decided it, in sentences */
  /* the cheapest and the fastest plans that fit, before --budget and
  ** --deadline drop any: what was closest when nothing is left */
  planner_cand cheapest, fastest;
  bool any_fit;
  char advice[768]; /* when data parallelism's all-reduce shows: what a Reduction Server buys */
  int64_t advice_reducers;
  double advice_step_s; /* the step with them (closed form), 0 without advice */
  char objective[32];
  /* the uneven pipeline splits the result's plans point into (their
  ** pp_layers): a plan copied out of the result is valid while it is */
  int32_t *stage_splits;
  int64_t *stage_split_at;
  /* with req.pareto: the plans no other beats on both run time and price
  ** (analytic, across hardware), fastest first */
  planner_cand *pareto;
  int n_pareto;
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

/* ---- constraints (fix.c) ---- */

/* Parses --fix text ("tp=8,pp=4,recompute=selective") into out. Returns 0,
** or -1 with err naming the key (and the nearest valid one) or the value
** and what was expected. */
int planner_fix_parse(const char *text, planner_fix *out, char *err, size_t errn);
/* The key's name ("tp") and the fix as text ("tp=8, pp=4") for messages. */
const char *planner_fix_name(planner_fix_key k);
void planner_fix_text(const planner_fix *f, char *buf, size_t n);
/* Does the plan match every key of f? whole: zero and recompute too (the
** search sets them last, so it asks about the split first). */
bool planner_fix_match(const planner_fix *f, const plan *p, bool whole);

/* A --gbs MIN-MAX range: the planner chooses the global batch. The
** candidates are MIN, MAX and the powers of two between; a batch whose
** tokens exceed the critical batch size (planner_critical_batch_tokens)
** is not tried; the tokens to train stay req->tokens (or 20 per
** parameter). Runs planner_run per batch and keeps the best by the
** objective (its frontier is the union's). *gbs_out: the batch chosen.
** Returns 0, or -1 with err (req->steps must be 0). */
int planner_run_gbs(const model *m, const hw_catalog *cat, const planner_req *req, int64_t gbs_min,
                    int64_t gbs_max, planner_result *out, int64_t *gbs_out, char *err, size_t errn);
/* The critical batch size in tokens for training `params` parameters on
** `tokens` tokens: B = 0.2920 C^0.3271, C = 6 params tokens FLOPs
** (DeepSeek LLM, Bi et al. 2024, arXiv:2401.02954, sec. 3.1). */
double planner_critical_batch_tokens(double params, double tokens);

/* ---- objectives and the frontier (price.c, pareto.c) ---- */

/* The objective's figure of a candidate: seconds, dollars or joules. */
double planner_objective_key(const planner_req *req, const planner_cand *c);
/* The run's energy in joules: chips x chip.tdp_w x train_s (0 when the
** hardware file has no tdp_w). */
double planner_energy_j(const hw_model *hw, int64_t chips, double train_s);
/* Would a plan of (train_s, train_usd) join the frontier v[0..n) (sorted
** fastest first, each cheaper than the one before)? Equal points do not. */
bool planner_front_improves(const planner_cand *v, int n, double train_s, double train_usd);
/* Adds c to the frontier, dropping what it dominates. Returns 0, -1 out of
** memory (the frontier is unchanged). */
int planner_front_add(planner_cand **v, int *n, const planner_cand *c);

#endif
