/*
** planner.c -- see planner.h.
**
** The planner has no step model of its own. Per candidate (hardware,
** chips, tp, pp, dp, ep, mbs, interleaving, recompute, ZeRO): memory first
** (sim/memory, as simulate sets it up: mem_setup), a plan that does not fit
** is not scored; then the simulator's fast path (step_fast: the same step
** description the event simulation runs, evaluated directly, collectives
** in closed form through a memo per hardware) over per-chip costs computed
** once per (hardware, tp, mbs, ep) by step_costs. The best
** few are confirmed by the event simulation (step_simulate).
*/
#include "planner_int.h"

#include "../sim/opcost.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "../sim/framework.h"
#include "../sim/coll.h"
#include "../sim/input.h"
#include "../sim/memory.h"
#include "../sim/step.h"
#include "../sim/optime.h"
#include "../base/strutil.h"
#include "../base/units.h"

#define MAX_KEEP 64

/* This thread's CPU seconds: what the result's per-thread figures
** (costs_s, scoring_s, simulate_s) count, so a rate "per core" does not
** depend on how many other processes share the cores. */
static double thread_cpu_s(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return units_now_s();
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  bool done, ok;
  step_result c;
  /* the layer kinds step_floor_s reads: 0 (the default layer's figures
  ** when no kind is counted) and each kind with layers, ascending; worked
  ** out once per cost set instead of looking at all WL_LAYER_KINDS slots
  ** for each of a million plans */
  int n_kinds;
  signed char kinds[WL_LAYER_KINDS];
} cost_entry;


/* Chip counts to try: whole nodes (GPU, CPU) or TPU slices of powers of two. */
static int chip_counts(const hw_model *hw, const planner_req *req, int64_t *out, int max) {
  int n = 0;
  if (req->chips > 0) {
    out[n++] = req->chips;
    return n;
  }
  /* a TPU slice from 4 chips; a GPU node whole, but an NVL72 rack's
  ** jobs come in 4-GPU trays (published runs use 8 to 256 of its GPUs):
  ** counts from 8 there */
  int64_t start = hw->kind == HW_TPU ? 4 : hw->chips_per_node > 8 ? 8 : hw->chips_per_node;
  int64_t limit = req->max_chips;
  if (hw->kind == HW_TPU && limit > hw->scale_up.max_slice_chips) limit = hw->scale_up.max_slice_chips;
  for (int64_t c = start; c <= limit && n < max; c *= 2) out[n++] = c;
  return n;
}

planner_objective planner_default_objective(const model *m) {
  return strcmp(m->family, "gbdt") == 0 || strcmp(m->family, "mlp") == 0 ? PLANNER_COST
                                                                         : PLANNER_TIME;
}

double planner_analytic_step(const model *m, const hw_model *hw, const plan *p, char *err,
                             size_t errn) {
  step_result c;
  step_times f;
  if (step_costs(m, hw, p, &c, err, errn) != 0) return -1;
  if (step_fast(m, hw, p, &c, NULL, &f, err, errn) != 0) return -1;
  return f.step_time_s;
}


/* The candidates a run confirms by simulation: req->top, 5 by default,
** at most the MAX_KEEP kept. */
static int planner_top(const planner_req *req) {
  int top = req->top > 0 ? req->top : 5;
  return top < MAX_KEEP ? top : MAX_KEEP;
}

/* Keeps the best `MAX_KEEP` by objective (smaller first), sorted. */
static void keep(planner_cand *kept, int *n, const planner_cand *c, double key, double *keys) {
  int at = *n < MAX_KEEP ? (*n)++ : MAX_KEEP;
  if (at == MAX_KEEP) {
    if (key >= keys[MAX_KEEP - 1]) return;
    at = MAX_KEEP - 1;
  }
  while (at > 0 && keys[at - 1] > key) {
    kept[at] = kept[at - 1];
    keys[at] = keys[at - 1];
    at--;
  }
  kept[at] = *c;
  keys[at] = key;
}

/* One hardware's search, on its own: its candidates (the best MAX_KEEP
** by objective), its best plan, its rejection, its counts -- all in `out`
** and `kept`, which belong to this hardware alone, so hardware entries
** search in parallel and merge in catalog order (the output stays the same
** whatever the thread count). */
/* What the hardware searches share while they run, for the progress
** line: plans evaluated so far, the best key and its hardware. */
typedef struct {
  atomic_llong evaluated;
  pthread_mutex_t lock;
  double best_key;
  char best_hw[32];
} search_shared;

typedef struct {
  const model *m;
  const hw_catalog *cat;
  const planner_req *req;
  int64_t gbs, seq, steps;
  /* the uneven stage splits: split_at[S] indexes splits for S stages */
  const int32_t *splits;
  const int64_t *split_at;
  search_shared *shared;
} search_ctx;

static void search_note_best(const search_ctx *sc, double key, const char *hw) {
  pthread_mutex_lock(&sc->shared->lock);
  if (key < sc->shared->best_key) {
    sc->shared->best_key = key;
    snprintf(sc->shared->best_hw, sizeof sc->shared->best_hw, "%s", hw);
  }
  pthread_mutex_unlock(&sc->shared->lock);
}

typedef struct {
  planner_result out; /* evaluated, costs_s, per_hw, rejected of one hardware */
  planner_cand kept[MAX_KEEP + 1];
  double keys[MAX_KEEP + 1];
  int n_kept;
  double busy_s; /* thread CPU time spent on this hardware */
} hw_search;

/* What one hardware's search turned down, by cause, and the nearest miss of
** each cause that has one. */
typedef struct {
  int64_t by[PLANNER_CAUSE_COUNT];
  char first[PLANNER_CAUSE_COUNT][200]; /* the first message of a cause */
  double best_peak;                     /* memory: the smallest peak over HBM */
  planner_cand peak_plan;
  bool over_budget, over_deadline;      /* budget / deadline: the cheapest / fastest of those */
  planner_cand cheapest, fastest;
} rejections;

static void reject(rejections *rj, planner_cause c, const char *msg) {
  rj->by[c]++;
  if (msg && !rj->first[c][0]) str_copy(rj->first[c], sizeof rj->first[c], msg);
}

/* The hardware's rejection when it has no plan left: the limit that bound
** its last plans (budget or deadline after memory; memory before the
** network's and the plan rules), with the nearest miss. */
static void reject_hw(planner_result *out, const hw_model *hw, const planner_req *req,
                      const rejections *rj, int fitted) {
  planner_reject *r = NULL;
  char t[32];
  if (fitted && rj->over_budget) {
    char u[32], bu[32];
    units_seconds(t, sizeof t, rj->cheapest.train_s);
    units_usd(u, sizeof u, rj->cheapest.train_usd);
    units_usd(bu, sizeof bu, req->budget_usd);
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_BUDGET,
                   "its cheapest plan (%lld chips) costs %s, over the %s budget, and takes %s",
                   (long long)rj->cheapest.p.chips, u, bu, t);
    if (r) r->has_closest = true, r->closest = rj->cheapest;
  } else if (fitted && rj->over_deadline) {
    units_seconds(t, sizeof t, rj->fastest.train_s);
    char dl[32];
    units_seconds(dl, sizeof dl, req->deadline_s);
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_DEADLINE,
                   "its fastest plan (%lld chips) takes %s, past the %s deadline",
                   (long long)rj->fastest.p.chips, t, dl);
    if (r) r->has_closest = true, r->closest = rj->fastest;
  } else if (isfinite(rj->best_peak)) {
    const plan *p = &rj->peak_plan.p;
    char rw[96];
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_MEMORY,
                   "no plan fits: the smallest peak is %.1f GiB per chip against %.1f GiB "
                   "(%lld chip%s, tp %lld, pp %lld, zero %d, %s recompute)",
                   rj->best_peak / (1 << 30), (double)hw->chip.hbm_bytes / (1 << 30),
                   (long long)p->chips, p->chips == 1 ? "" : "s", (long long)p->tp,
                   (long long)p->pp, p->zero, recompute_words(p, rw, sizeof rw));
    if (r) {
      r->has_closest = true;
      r->closest = rj->peak_plan;
      r->peak_bytes = rj->best_peak;
      r->capacity_bytes = (double)hw->chip.hbm_bytes;
    }
  } else if ((r = planner_fix_reject_hw(req, hw, out, rj->by[PLANNER_CAUSE_FIXED]))) {
    /* --fix turned down the plans that could run (fix.c says so) */
  } else if (rj->by[PLANNER_CAUSE_SLICE]) {
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_SLICE, "no plan the network can form: %s",
                   rj->first[PLANNER_CAUSE_SLICE]);
  } else if ((rj->by[PLANNER_CAUSE_REQUIRES] || rj->by[PLANNER_CAUSE_DTYPE]) &&
             rj->by[PLANNER_CAUSE_REQUIRES] + rj->by[PLANNER_CAUSE_DTYPE] >= rj->by[PLANNER_CAUSE_DIVISIBILITY]) {
    /* most plans fell to what the chip lacks: that is the reason, not a size rule */
    planner_cause c = rj->by[PLANNER_CAUSE_REQUIRES] >= rj->by[PLANNER_CAUSE_DTYPE] ? PLANNER_CAUSE_REQUIRES
                                                                                 : PLANNER_CAUSE_DTYPE;
    r = planner_add_reject(out, hw->name, c, "no valid plan: %s",
                           rj->first[c][0] ? rj->first[c] : "(no reason given)");
  } else {
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_DIVISIBILITY, "no valid plan up to %lld chips%s%s",
                   (long long)(req->chips ? req->chips : req->max_chips),
                   rj->first[PLANNER_CAUSE_DIVISIBILITY][0] ? ": " : "",
                   rj->first[PLANNER_CAUSE_DIVISIBILITY]);
  }
  if (r) memcpy(r->plans_by, rj->by, sizeof r->plans_by);
}

/* ---- the space of one hardware ---- */

/* Divisors of n from 1 up to lim, increasing, into out (room for max):
** pairs up to sqrt(n), so a global batch of millions costs a few thousand
** steps. Returns the count. */
static int divisors(int64_t n, int64_t lim, int64_t *out, int max) {
  int lo = 0, hi = 0;
  int64_t high[256];
  for (int64_t i = 1; i * i <= n; i++) {
    if (n % i) continue;
    if (i <= lim && lo < max) out[lo++] = i;
    if (n / i != i && n / i <= lim && hi < 256) high[hi++] = n / i;
  }
  for (int k = hi - 1; k >= 0 && lo < max; k--) out[lo++] = high[k];
  return lo;
}

/* The chips one tensor-parallel group may span: the scale-up domain (a
** GPU node's NVLink, an NVL72 rack, a CPU node's sockets), a TPU's whole
** slice (its ICI torus joins every chip of it). */
static int64_t tp_domain(const hw_model *hw, int64_t chips) {
  int64_t dom = hw->kind == HW_TPU ? chips
                : hw->scale_up.domain_chips > 0 ? hw->scale_up.domain_chips
                                                : hw->chips_per_node;
  if (dom < 1) dom = 1;
  return dom < chips ? dom : chips;
}

/* The choices that do not change a plan's per-chip costs, a plan's
** "variant": recompute x ZeRO (with the FSDP/HSDP shard group) x offload.
** For fixed sizes a variant's memory grows with the micro-batch (every
** term of sim/memory's peak is the same or grows: activations in flight
** are mbs x min(warm-up, micro-batches) layer sets, and mbs x
** micro-batches is gbs / dp; the temporaries and fragmentation scale with
** them; state, runtime and communicators do not depend on it), so a
** variant that does not fit at one micro-batch does not fit at a larger
** one: the search drops it for the rest of the micro-batches. */
enum { MAX_HSDP = 12, RECOMPUTE_MODES = 4, MAX_VARIANTS = RECOMPUTE_MODES * 4 * (MAX_HSDP + 1) * 3 };
typedef struct {
  plan_recompute rec;
  unsigned rmods; /* with selective: Megatron-Core's recompute modules (0: its own) */
  int zero;
  int64_t hsdp;
  plan_offload offload;
  short rec_end; /* the first variant of the next recompute mode */
  short state;   /* the first variant of its model state (state_dead's) */
} variant;

/* The recompute modes searched: none, selective, full, and where the
** framework recomputes a list of modules and the model has MoE or MLA
** layers, those of the cheap output-discarding ones it has (moe_act and
** layernorm, mla_up_proj: what the Megatron-Bridge MoE recipes turn on),
** which free a MoE layer's expert activations for a little elementwise
** work. The index is the memory preparation's (mem_of). */
static int recompute_modes(unsigned cheap, plan_recompute rec[RECOMPUTE_MODES],
                           unsigned mods[RECOMPUTE_MODES]) {
  int n = 0;
  rec[n] = PLAN_RECOMPUTE_NONE, mods[n++] = 0;
  rec[n] = PLAN_RECOMPUTE_SELECTIVE, mods[n++] = 0;
  rec[n] = PLAN_RECOMPUTE_FULL, mods[n++] = 0;
  if (cheap) rec[n] = PLAN_RECOMPUTE_SELECTIVE, mods[n++] = cheap;
  return n;
}

/* A plan's recompute mode, the index recompute_modes gives it. */
static int recompute_mode(const plan *p) {
  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE && p->recompute_modules) return 3;
  return (int)p->recompute;
}

/* The variants of a plan with dp x cp = group ranks, ordered recompute
** first (the bound below is per recompute mode), then offload, then ZeRO
** (consecutive ZeRO stages often share a schedule, which step_fast's memo
** then evaluates once): ZeRO 1 and 2 and 3 only
** with something to shard over, HSDP groups (the proper divisors of the
** group, up to MAX_HSDP) under ZeRO-3, offload where it is searched. */
static int variants_of(int64_t group, const plan_offload *offs, int n_off, unsigned cheap,
                       variant *out) {
  plan_recompute recs[RECOMPUTE_MODES];
  unsigned mods[RECOMPUTE_MODES];
  int n_rec = recompute_modes(cheap, recs, mods);
  int64_t hs[MAX_HSDP + 1] = {0}, div[64];
  int n_hs = 1, nd = divisors(group, group - 1, div, 64);
  for (int i = 0; i < nd && n_hs <= MAX_HSDP; i++)
    if (div[i] > 1) hs[n_hs++] = div[i];
  /* per recompute mode n_off offload blocks of the same per_o (ZeRO
  ** stage, shard group) pairs, all distinct: a variant's model state
  ** (state_dead's: the pair and whether the optimizer is offloaded) first
  ** appears in mode 0, at the first offload of its kind, the same pair.
  ** Set here, once per dp x cp, rather than searched per set of sizes. */
  int per_o = group > 1 ? 3 + n_hs : 1, per_rec = n_off * per_o, n = 0;
  for (int rec = 0; rec < n_rec; rec++)
    for (int o = 0; o < n_off; o++) {
      int f = 0;
      while ((offs[f] == PLAN_OFFLOAD_OPTIMIZER) != (offs[o] == PLAN_OFFLOAD_OPTIMIZER)) f++;
      for (int z = 0, zh = 0; z <= (group > 1 ? 3 : 0); z++)
        for (int h = 0; h < (z == 3 ? n_hs : 1); h++, zh++)
          out[n++] = (variant){recs[rec], mods[rec], z, hs[h], offs[o],
                               (short)((rec + 1) * per_rec), (short)(f * per_o + zh)};
    }
  return n;
}

/* ---- per-chip costs, cached by what they depend on ---- */

/* step_costs reads tp, mbs, ep, etp, cp, whether there is a pipeline (its
** send), and with activation offload whether the layer is fully
** recomputed (what goes to the host); the rest of a plan it does not
** (sim/stepcost.c), but for --moe-imbalance, which one search gives every
** plan of an ep alike (search_chips), so ep stands for it here. */
typedef struct {
  int64_t tp, mbs, ep, etp, cp;
  int piped, offmode, epo;
} cost_key;

typedef struct {
  cost_key k;
  cost_entry *e; /* NULL: an empty slot */
} cost_slot;

typedef struct {
  cost_slot *slots;
  size_t cap, n;
} cost_map;

static uint64_t cost_hash(const cost_key *k) {
  uint64_t h = 1469598103934665603ULL;
  const int64_t v[] = {k->tp, k->mbs, k->ep, k->etp, k->cp, k->piped, k->offmode, k->epo};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ULL;
  return h;
}

static bool cost_key_eq(const cost_key *a, const cost_key *b) {
  return a->tp == b->tp && a->mbs == b->mbs && a->ep == b->ep && a->etp == b->etp &&
         a->cp == b->cp && a->piped == b->piped && a->offmode == b->offmode && a->epo == b->epo;
}

static cost_slot *cost_find(cost_map *cm, const cost_key *k) {
  size_t i = cost_hash(k) & (cm->cap - 1);
  while (cm->slots[i].e && !cost_key_eq(&cm->slots[i].k, k)) i = (i + 1) & (cm->cap - 1);
  return &cm->slots[i];
}

/* The entry of key k, made (not yet computed) when new; NULL when out of
** memory. Grows the table at half full. */
static cost_entry *cost_get(cost_map *cm, const cost_key *k) {
  if (2 * (cm->n + 1) > cm->cap) {
    size_t cap = cm->cap ? 2 * cm->cap : 256;
    cost_slot *old = cm->slots, *s = calloc(cap, sizeof *s);
    if (!s) return NULL;
    size_t ocap = cm->cap;
    cm->slots = s, cm->cap = cap;
    for (size_t i = 0; i < ocap; i++)
      if (old[i].e) *cost_find(cm, &old[i].k) = old[i];
    free(old);
  }
  cost_slot *s = cost_find(cm, k);
  if (!s->e) {
    if (!(s->e = calloc(1, sizeof *s->e))) return NULL;
    s->k = *k;
    cm->n++;
  }
  return s->e;
}

static void cost_map_free(cost_map *cm) {
  for (size_t i = 0; i < cm->cap; i++) free(cm->slots[i].e);
  free(cm->slots);
}

/* ---- the bound ---- */

/* A lower bound on step_fast's step time for plan p, from costs c of its
** (tp, mbs, ep, etp, cp): the last pipeline chip runs V x M forward and
** backward chunks, one at a time, none before the first micro-batch's
** forward has crossed the pp - 1 stages ahead of it, and the step ends no
** sooner than the last micro-batch's backward has crossed them back to the
** first chip (Narayanan et al. 2021 §2.2: the bubble's pp - 1 chunks).
** Each chunk holds at least floor(layers / (pp V)) layers (even and
** balanced splits alike), each at least the fastest kind's forward and
** backward as step_describe times them (sim/step.c layer_times: the
** collectives that show, the recomputation, the gradient accumulation).
** ZeRO-3's gathers, the head, the sends, the gradient reduction and the
** optimizer only add to the time (step_describe, sched_eval, sched_tail),
** so they are left out; a millionth is taken off against rounding in the
** schedule's extrapolation. tests/test_planner.c checks the bound against
** every plan of a brute-force search. */
static double step_floor_s(const wl_tf_dims *d, const plan *p, const cost_entry *ce) {
  const step_result *c = &ce->c;
  int64_t V = p->vp > 0 ? p->vp : 1, n = d->layers / (p->pp * V), M = plan_microbatches(p);
  double accum = (double)(M - 1) / (double)M;
  bool full = p->recompute == PLAN_RECOMPUTE_FULL;
  double f = INFINITY, b = INFINITY;
  for (int ki = 0; ki < ce->n_kinds; ki++) { /* the kinds with layers, and 0 */
    int k = ce->kinds[ki];
    bool kinds = c->kind_n[k] > 0;
    double fw = kinds ? c->kind_fwd_s[k] : c->layer_fwd_s, bw = kinds ? c->kind_bwd_s[k] : c->layer_bwd_s;
    double cf = kinds ? c->kind_comm_fwd_s[k] : c->tp_comm_fwd_s;
    double cb = kinds ? c->kind_comm_bwd_s[k] : c->tp_comm_bwd_s;
    double ac = kinds ? c->kind_accum_s[k] : c->grad_accum_layer_s;
    double rec = step_recompute_s(c, p, d, kinds ? k : -1); /* as step.c's layer_times */
    double rep = full ? (kinds ? c->kind_comm_replay_s[k] : c->comm_replay_s) : 0;
    double fk = fw + cf, bk = bw + rec + cb + rep + accum * ac;
    if (fk < f) f = fk;
    if (bk < b) b = bk;
  }
  return (double)(M * V + p->pp - 1) * (double)n * (f + b) * (1 - 1e-6);
}

/* ---- one hardware's search ---- */

/* What one hardware's search carries from plan to plan. */
typedef struct {
  const search_ctx *sc;
  const hw_model *hw;
  hw_search *hs;
  rejections rj;
  int fitted;
  planner_cand best;
  double best_key;
  step_memo *memo;
  cost_map costs;
  int64_t reported; /* plans already added to the run's shared count */
  bool seeding;     /* the first pass: only seed_plan's plans */
  coll_memo *coll;  /* the bound's collectives (step_memo keeps its own) */
  /* the per-chip costs' tensor- and context-parallel collectives: many
  ** cost sets share one (the same tp and micro-batch with and without a
  ** pipeline or offload); apart from coll, whose short list every
  ** description scans */
  coll_memo *cost_coll;
  step_desc *desc;  /* the bound's step description (large: on the heap) */
  /* the memory of the plans of one set of sizes and micro-batch, per
  ** recompute mode (their model states differ): worked out once each
  ** (mem_prep) for generation gen, which search_sizes moves on */
  mem_prep *prep[RECOMPUTE_MODES];
  int64_t gen, prep_gen[RECOMPUTE_MODES];
  /* the host input pipeline (req->input on this chip; NULL: none, a CPU) */
  input_cfg in;
  const input_cfg *inp;
} hw_state;

/* The entry of key k, computed on first use from plan p; NULL when out of
** memory. */
static cost_entry *cost_entry_of(hw_state *st, const cost_key *k, const plan *p, char *err,
                                 size_t errn) {
  cost_entry *ce = cost_get(&st->costs, k);
  if (!ce) {
    snprintf(err, errn, "out of memory");
    return NULL;
  }
  if (!ce->done) {
    plan q = *p;
    if (k->piped && q.pp < 2) q.pp = 2; /* the send timed too; nothing else differs */
    double tc = thread_cpu_s();
    ce->ok = step_costs_memo(st->sc->m, st->hw, &q, st->cost_coll, &ce->c, err, errn) == 0;
    ce->n_kinds = 0;
    for (int kd = 0; kd < WL_LAYER_KINDS; kd++)
      if (kd == 0 || ce->c.kind_n[kd] > 0) ce->kinds[ce->n_kinds++] = (signed char)kd;
    st->hs->out.costs_s += thread_cpu_s() - tc;
    st->hs->out.cost_builds++;
    ce->done = true;
  } else if (!ce->ok && errn) {
    err[0] = 0;
  }
  return ce;
}

/* The per-chip costs of plan p (computed on first use), or NULL when they
** cannot be (a group the network cannot form), with the reason in err.
** step_costs reads pp only to time the pipeline's send (sim/stepcost.c),
** which a plan without a pipeline never uses (one stage: sched_eval's
** closed form), so such a plan shares the costs of its sizes with a
** pipeline: built once, unless the send's group is one the network cannot
** form (a TPU's 2 x tp chips), where it gets its own. */
static const cost_entry *costs_of(hw_state *st, const plan *p, char *err, size_t errn) {
  cost_key k = {p->tp, p->mbs, p->ep, p->etp, p->cp, 1,
                p->offload != PLAN_OFFLOAD_ACTIVATIONS ? 0 : p->recompute == PLAN_RECOMPUTE_FULL ? 2 : 1,
                (int)p->ep_overlap};
  cost_entry *ce = cost_entry_of(st, &k, p, err, errn);
  if (ce && !ce->ok && p->pp < 2) {
    k.piped = 0;
    ce = cost_entry_of(st, &k, p, err, errn);
  }
  return ce && ce->ok ? ce : NULL;
}

/* Whether plan p's per-chip costs are computed (or known not to be). */
static bool costs_known(hw_state *st, const plan *p) {
  cost_key k = {p->tp, p->mbs, p->ep, p->etp, p->cp, 1, 0, (int)p->ep_overlap};
  if (!st->costs.cap) return false;
  const cost_slot *s = cost_find(&st->costs, &k);
  return s->e && s->e->done;
}

/* Megatron-Core refuses the all-to-all overlap with full recompute, and
** with FSDP over several model chunks (plan.c's check_ep_overlap); the
** cheap modules never hold "moe". */
static bool variant_allowed(const plan *p, const variant *v) {
  return p->ep_overlap != PLAN_EP_OVERLAP_ON ||
         (v->rec != PLAN_RECOMPUTE_FULL && !(p->vp > 1 && v->zero >= 3));
}

static void set_variant(plan *p, const variant *v) {
  p->recompute = v->rec, p->recompute_modules = v->rmods;
  p->zero = v->zero, p->hsdp = v->hsdp, p->offload = v->offload;
}

/* The bound of step_floor_s made tighter for one plan from its step's
** description (step_describe, as step_fast makes it): the last pipeline
** chip's chunks, M of each forward and backward, after micro-batch 0's
** forward through the pp - 1 chunks ahead of it (its first task) and
** before the last micro-batch's backward back through them (its last
** task is chunk 0's backward when M is a multiple of pp, as interleaving
** needs), then the optimizer, which every chip runs after its last
** backward (sched_tail). The gradient reduction, the sends and the bubble
** beyond these only add. Returns the chunks' part (busy + chain) and sets
** *opt_s to the optimizer's; -1 when the description fails. */
static double desc_chunks_s(hw_state *st, const plan *p, const step_result *c, double *opt_s) {
  plan q = *p;
  q.coll_costs = PLAN_COLL_FORMULA; /* as step_fast times the collectives */
  step_desc *sd = st->desc;
  char e[8];
  if (step_describe(st->sc->m, st->hw, &q, c, st->coll, sd, e, 0) != 0) return -1;
  const sched_desc *d = &sd->sched;
  int64_t pp = d->pp, V = d->vp;
  double busy = 0, chain = 0;
  for (int64_t k = 0; k < V; k++)
    busy += (double)d->M * (sched_task_s(d, k * pp + pp - 1, false) + sched_task_s(d, k * pp + pp - 1, true));
  /* the deferred output-layer weight gradients leave the last stage's
  ** backwards; their drain may run beside the cooldown of the stages
  ** before, so none of it is in the floor */
  busy -= (double)sched_deferred(d) * d->b_last_defer;
  for (int64_t vs = 0; vs + 1 < pp; vs++) chain += sched_task_s(d, vs, false) + sched_task_s(d, vs, true);
  *opt_s = sd->optimizer_s;
  return busy + chain;
}

/* desc_chunks_s's floor: 0 (no bound) when the description fails, which
** *failed (when not NULL) says. */
static double desc_floor_checked_s(hw_state *st, const plan *p, const step_result *c, bool *failed) {
  double opt_s, chunks_s = desc_chunks_s(st, p, c, &opt_s);
  if (failed) *failed = chunks_s < 0;
  return chunks_s < 0 ? 0 : (chunks_s + opt_s) * (1 - 1e-6);
}

static double desc_floor_s(hw_state *st, const plan *p, const step_result *c) {
  return desc_floor_checked_s(st, p, c, NULL);
}

/* Whether the descriptions of one set of sizes' ZeRO-3 variants succeed,
** by their collectives' signature (the HSDP shard group): step_describe
** fails only where a collective's group cannot be formed, and those
** groups (chips, chips a node, slices) depend on the sizes and the shard
** group alone, not on the micro-batch or the recompute mode. */
typedef struct {
  int n;
  int64_t hsdp[MAX_HSDP + 1];
  signed char ok[MAX_HSDP + 1]; /* 1 succeeds, 0 fails */
} desc_status;

/* The status of shard group hsdp: 1, 0, or -1 when not known yet. */
static int desc_status_of(const desc_status *ds, int64_t hsdp) {
  for (int i = 0; i < ds->n; i++)
    if (ds->hsdp[i] == hsdp) return ds->ok[i];
  return -1;
}

static void desc_status_note(desc_status *ds, int64_t hsdp, bool failed) {
  if (desc_status_of(ds, hsdp) >= 0 || ds->n > MAX_HSDP) return;
  ds->hsdp[ds->n] = hsdp, ds->ok[ds->n++] = !failed;
}

/* A floor under desc_floor_s for every variant of one recompute mode (the
** same sizes, micro-batch and costs c), from one description: the plan
** without ZeRO (no gathers) and without the optimizer's time. ZeRO-3's
** gathers only lengthen a chunk (step_describe's gathered: max(f + min(f,
** g) x share, g) + g / n >= f; the collectives' SMs add to the step after),
** the chunks are summed in the same order, and the optimizer's time is
** not negative, so each variant's desc_floor_s is at least this one in
** floating point too (rounding is monotone: a >= b gives fl(a + x) >=
** fl(b + x)). The price is monotone in the step time (planner_price_of),
** so where this floor prunes, desc_floor_s prunes too: the search skips
** describing each variant, the same plans left out. 0 when the
** description fails. */
static double desc_group_floor_s(hw_state *st, const plan *p, const step_result *c) {
  plan q = *p;
  q.zero = 0, q.hsdp = 0, q.offload = PLAN_OFFLOAD_NONE;
  double opt_s, chunks_s = desc_chunks_s(st, &q, c, &opt_s);
  return chunks_s < 0 ? 0 : chunks_s * (1 - 1e-6);
}

/* For the tests: both floors of a scored plan against its step time, and
** its recompute mode's group floor against its own floor, counted in the
** result when one is above the other. */
static void check_floors(hw_state *st, const plan *p, const cost_entry *ce, double step_s) {
  const step_result *c = &ce->c;
  double desc_s = desc_floor_s(st, p, c);
  if (step_floor_s(&st->sc->m->info.tf, p, ce) > step_s || desc_s > step_s ||
      desc_group_floor_s(st, p, c) > desc_s)
    st->hs->out.bound_violations++;
}

/* Whether a plan no faster than `floor_s` can be left out: the
** hardware's kept list already holds `top` plans (those the run confirms
** by simulation: planner_run merges every hardware's kept list in catalog
** order and simulates the first `top`) whose keys are all at or below the
** floor's, so the plan could enter neither them nor the hardware's best
** (their first). */
static bool bound_prunes(const hw_state *st, const plan *p, double floor_s) {
  const hw_search *hs = st->hs;
  const planner_req *req = st->sc->req;
  int top = planner_top(req);
  /* --pareto wants the slow-but-cheap plans too: no time bound */
  if (req->exhaustive || req->pareto || hs->n_kept < top) return false;
  run_price pr = planner_price_of(st->sc->m, st->hw, req, p->chips, floor_s, st->sc->steps);
  return planner_price_key(req, &pr) >= hs->keys[top - 1];
}

/* Scores plan p (valid under plan_check): memory, then the fast path,
** then the price, kept when among the best. Returns 1 when it does not
** fit, else 0. */
/* Plan p's memory (a plan evaluated): 1 when it fits, 0 when not (a
** memory rejection, the closest yet remembered), -1 when the memory model
** refuses it. */
/* Plan p's memory (mem_transformer's figures), from the preparation of
** its sizes, micro-batch and recompute mode, made first when it is not. */
static int mem_of(hw_state *st, const plan *p, mem_peak *mb, char *err, size_t errn) {
  int r = recompute_mode(p);
  if (r < 0 || r >= RECOMPUTE_MODES) { /* not a mode the search makes: worked out whole */
    mem_opts mo;
    plan mp;
    mem_setup(st->sc->m, st->hw, p, &mo, &mp);
    mem_bytes a;
    if (mem_transformer(&st->sc->m->info.tf, &mp, &mo, &a, err, errn) != 0) return -1;
    *mb = (mem_peak){a.peak, a.weights, a.gradients, a.optimizer, a.runtime, a.comm, a.capacity,
                     a.fits};
    return 0;
  }
  if (st->prep_gen[r] != st->gen) {
    mem_opts mo;
    plan mp;
    mem_setup(st->sc->m, st->hw, p, &mo, &mp);
    mem_prep_set(st->prep[r], &st->sc->m->info.tf, &mp, &mo);
    st->prep_gen[r] = st->gen;
  }
  mem_state s = {p->zero, p->hsdp, p->offload};
  return mem_prep_peak(st->prep[r], &s, mb, err, errn);
}

static int mem_fits(hw_state *st, const plan *p) {
  const hw_model *hw = st->hw;
  rejections *rj = &st->rj;
  st->hs->out.evaluated++;
  mem_peak mb;
  char merr[256];
  if (mem_of(st, p, &mb, merr, sizeof merr) != 0) {
    reject(rj, PLANNER_CAUSE_DIVISIBILITY, merr);
    return -1;
  }
  if (!mb.fits) {
    reject(rj, PLANNER_CAUSE_MEMORY, NULL);
    if (mb.peak < rj->best_peak) {
      rj->best_peak = mb.peak;
      rj->peak_plan = (planner_cand){.p = *p};
      snprintf(rj->peak_plan.hw, sizeof rj->peak_plan.hw, "%s", hw->name);
    }
    return 0;
  }
  st->fitted++;
  return 1;
}

/* Scores plan p (valid under plan_check; its memory checked first unless
** `fits` says it fits): the fast path, then the price, kept when among
** the best. Returns 1 when it does not fit, else 0. */
static int score_plan(hw_state *st, const plan *p, bool fits, double *step_s) {
  const model *m = st->sc->m;
  const hw_model *hw = st->hw;
  const planner_req *req = st->sc->req;
  planner_result *out = &st->hs->out;
  rejections *rj = &st->rj;
  *step_s = -1;
  if (!fits) {
    int f = mem_fits(st, p);
    if (f <= 0) return f == 0;
  }
  char cerr[256] = "";
  const cost_entry *ce = costs_of(st, p, cerr, sizeof cerr);
  if (!ce) { /* a group the network cannot form: a TPU slice of 2 */
    reject(rj, PLANNER_CAUSE_SLICE, cerr[0] ? cerr : NULL);
    return 0;
  }
  step_times fr;
  out->timed++;
  if (step_fast(m, hw, p, &ce->c, st->memo, &fr, cerr, sizeof cerr) != 0) {
    reject(rj, PLANNER_CAUSE_SLICE, cerr);
    return 0;
  }
  /* price first; build a whole candidate only for one that is kept, the
  ** hardware's best, or the closest yet (most are none) */
  hw_search *hs = st->hs;
  /* the host input pipeline's stall, in closed form, as the simulation
  ** adds it (sim/input.h) */
  double stall = 0;
  if (st->inp && input_stall_closed(st->inp, p->chips, hw->chips_per_node, p->gbs, fr.step_time_s,
                                    &stall, cerr, sizeof cerr) != 0) {
    reject(rj, PLANNER_CAUSE_REQUIRES, cerr);
    return 0;
  }
  double a = *step_s = fr.step_time_s + stall;
  run_price pr = planner_price_of(m, hw, req, p->chips, a, st->sc->steps);
  bool closer = !out->any_fit || pr.train_usd < out->cheapest.train_usd ||
                pr.train_s < out->fastest.train_s;
  bool over_budget = req->budget_usd > 0 && pr.train_usd > req->budget_usd;
  /* a deadline bounds every objective (--deadline with energy too) */
  bool over_deadline = req->deadline_s > 0 && pr.train_s > req->deadline_s;
  bool passes = !over_budget && !over_deadline;
  double key = planner_price_key(req, &pr);
  /* --pareto: a plan that joins the time-versus-cost frontier (pareto.c) */
  bool front = passes && req->pareto &&
               planner_front_improves(out->pareto, out->n_pareto, pr.train_s, pr.train_usd);
  bool kept_now = passes && (hs->n_kept < MAX_KEEP || key < hs->keys[MAX_KEEP - 1]);
  bool nearer = (over_budget && (!rj->over_budget || pr.train_usd < rj->cheapest.train_usd)) ||
                (over_deadline && !over_budget && (!rj->over_deadline || pr.train_s < rj->fastest.train_s));
  if (!passes) reject(rj, over_budget ? PLANNER_CAUSE_BUDGET : PLANNER_CAUSE_DEADLINE, NULL);
  if (!closer && !kept_now && !nearer && !front && !(passes && key < st->best_key)) return 0;
  planner_cand cand = {.p = *p, .analytic_step_s = a};
  snprintf(cand.hw, sizeof cand.hw, "%s", hw->name);
  planner_set_price(&cand, &pr);
  if (closer) planner_note_closest(out, &cand);
  if (nearer && over_budget) rj->over_budget = true, rj->cheapest = cand;
  else if (nearer) rj->over_deadline = true, rj->fastest = cand;
  if (!passes) return 0;
  if (front) planner_front_add(&out->pareto, &out->n_pareto, &cand);
  if (kept_now) keep(hs->kept, &hs->n_kept, &cand, key, hs->keys);
  if (key < st->best_key) {
    st->best_key = key, st->best = cand;
    search_note_best(st->sc, key, hw->name);
  }
  return 0;
}

/* The plans a search scores first: the sizes most published runs use
** (interleaving 1, 2 or 4 over an even split, micro-batches of 1, 2 or
** 4), so the kept list fills with good plans and the bound bites early in
** the rest of the space, which the second pass covers (without them). */
static bool seed_plan(const plan *p) {
  return (p->vp == 1 || p->vp == 2 || p->vp == 4) && !p->pp_layers &&
         (p->mbs == 1 || p->mbs == 2 || p->mbs == 4);
}

/* Adds the plans scored since the last report to the run's count (the
** progress line's). */
static void search_report(hw_state *st) {
  int64_t n = st->hs->out.evaluated - st->reported;
  if (n > 0) atomic_fetch_add(&st->sc->shared->evaluated, n);
  st->reported = st->hs->out.evaluated;
}

/* Marks in dead the variants whose model state alone is over the chip's
** memory for plan p's sizes; returns how many. The state -- weights,
** gradients, optimizer, the runtime's reserve, the communicators -- is
** what sim/memory's peak holds whatever the micro-batch and the
** recompute mode: it depends on the sizes, the ZeRO stage with its shard
** group and whether the optimizer is offloaded, so one memory check of
** each such state (its stage's state is a floor on every variant's peak
** that shares it) stands for all the variants and micro-batches that
** share it. */
static int state_dead(hw_state *st, plan *p, const variant *vs, int n_vs, bool *dead) {
  int n = 0;
  /* each state checked once (a few dozen of the variants' hundreds), its
  ** verdict kept at its first variant (variants_of): -1 not checked
  ** yet, 0 within the memory, 1 over; a variant takes its state's */
  signed char over[MAX_VARIANTS];
  memset(over, -1, (size_t)n_vs);
  double capacity = (double)st->hw->chip.hbm_bytes; /* mem_setup's capacity */
  for (int i = 0; i < n_vs; i++) {
    int f = vs[i].state;
    if (over[f] < 0) {
      set_variant(p, &vs[i]);
      mem_peak mb;
      if (mem_of(st, p, &mb, NULL, 0) != 0) continue; /* not checked: a later one tries again */
      double state = mb.weights + mb.gradients + mb.optimizer + mb.runtime + mb.comm;
      over[f] = capacity > 0 && state > capacity;
    }
    if (over[f] && !dead[i]) dead[i] = true, n++, st->hs->out.pruned++;
  }
  return n;
}

/* Every micro-batch and variant of one set of sizes (chips, tp, cp, pp,
** ep, etp, V and the stage split in p): micro-batches smallest first,
** so a variant that stops fitting is dropped for the larger ones, and
** per recompute mode the bound skips what cannot enter the kept list. */
static void search_sizes(hw_state *st, plan p, const variant *vs, int n_vs) {
  const model *m = st->sc->m;
  bool exhaustive = st->sc->req->exhaustive;
  rejections *rj = &st->rj;
  bool dead[MAX_VARIANTS] = {false}, state_checked = false;
  desc_status status = {0}; /* learnt from the variants' own descriptions */
  int n_dead = 0;
  int64_t mbs[256];
  int n_mbs = divisors(p.gbs / p.dp, p.gbs / p.dp, mbs, 256);
  bool defer = p.defer_embedding_wgrad;
  for (int mi = 0; mi < n_mbs && n_dead < n_vs; mi++) {
    p.mbs = mbs[mi];
    /* the deferral asked for where its drain has two micro-batches or more
    ** (Megatron-Core's needs them: plan_check) */
    p.defer_embedding_wgrad = defer;
    if (defer && plan_wgrad_deferred(&p) < 2) p.defer_embedding_wgrad = false;
    st->gen++; /* new sizes or micro-batch: the memory's preparation is stale */
    if (st->seeding && p.mbs > 4) break;
    if (seed_plan(&p) != st->seeding) continue;
    p.recompute = PLAN_RECOMPUTE_NONE, p.recompute_modules = 0;
    p.zero = 0, p.hsdp = 0, p.offload = PLAN_OFFLOAD_NONE;
    plan_fault fault;
    char perr[200];
    /* the message only for the first plan a rule turns down: the search
    ** asks millions */
    size_t n = rj->first[PLANNER_CAUSE_DIVISIBILITY][0] ? 0 : sizeof perr;
    if (plan_check_fault(m, st->hw, &p, &fault, perr, n) != 0) {
      reject(rj, fault == PLAN_FAULT_DTYPE ? PLANNER_CAUSE_DTYPE : PLANNER_CAUSE_DIVISIBILITY,
             n ? perr : NULL);
      continue;
    }
    if (!planner_fix_match(&st->sc->req->fix, &p, false)) { /* --fix: fix.c */
      reject(rj, PLANNER_CAUSE_FIXED, NULL);
      continue;
    }
    /* only once the hardware has a plan: until then a plan that does not
    ** fit may be the one its rejection names (the smallest peak), which
    ** must be the same as brute force's */
    if (!exhaustive && !state_checked && st->hs->n_kept > 0) {
      state_checked = true;
      n_dead += state_dead(st, &p, vs, n_vs, dead);
    }
    /* per-chip costs not built yet for these sizes: first is anything
    ** left that fits (a build costs milliseconds, a memory check one) */
    int known = -1;
    if (!exhaustive && !costs_known(st, &p)) {
      for (int i = 0; i < n_vs && known < 0; i++) {
        if (dead[i] || !variant_allowed(&p, &vs[i])) continue;
        set_variant(&p, &vs[i]);
        int f = mem_fits(st, &p);
        if (f == 1) known = i;
        else if (f == 0) dead[i] = true, n_dead++;
      }
      if (known < 0) continue;
    }
    p.recompute = PLAN_RECOMPUTE_NONE, p.recompute_modules = 0;
    p.zero = 0, p.hsdp = 0, p.offload = PLAN_OFFLOAD_NONE;
    char cerr[256];
    const cost_entry *ce = costs_of(st, &p, cerr, sizeof cerr);
    const step_result *c = ce ? &ce->c : NULL;
    for (int i = 0; i < n_vs;) {
      /* the variants of one recompute mode: one bound for all of them */
      int j = vs[i].rec_end;
      p.recompute = vs[i].rec, p.recompute_modules = vs[i].rmods;
      if (c && bound_prunes(st, &p, step_floor_s(&m->info.tf, &p, ce))) {
        st->hs->out.pruned += j - i;
        i = j;
        continue;
      }
      /* desc_group_floor_s, worked out when a variant first needs it */
      bool group_known = false, group_prunes = false;
      for (; i < j; i++) {
        if (dead[i] || !variant_allowed(&p, &vs[i])) continue;
        set_variant(&p, &vs[i]);
        if (!planner_fix_match(&st->sc->req->fix, &p, true)) {
          reject(rj, PLANNER_CAUSE_FIXED, NULL);
          continue;
        }
        /* the group's floor stands for a variant whose description fails
        ** (no bound) where the group's does: one that makes the same
        ** collectives (each an all-reduce over dp x cp chips, a
        ** reduce-scatter timed as half of one), or a ZeRO-3 one whose own
        ** collectives (HSDP's shard and replica groups, the gather beside a
        ** Reduction Server) a description of these sizes has formed */
        bool own = vs[i].zero >= 3 && (vs[i].hsdp > 0 || p.reduction_server);
        bool stands = !own || desc_status_of(&status, vs[i].hsdp) == 1;
        if (c && i != known && stands && !group_known && !exhaustive) {
          group_known = true;
          group_prunes = bound_prunes(st, &p, desc_group_floor_s(st, &p, c));
        }
        bool prune = false;
        if (c && i != known && stands && group_prunes) {
          prune = true;
        } else if (c && i != known) {
          bool failed;
          prune = bound_prunes(st, &p, desc_floor_checked_s(st, &p, c, &failed));
          if (own) desc_status_note(&status, vs[i].hsdp, failed);
        }
        if (prune) {
          st->hs->out.pruned++;
          continue;
        }
        double step_s;
        if (score_plan(st, &p, i == known, &step_s) == 1 && !exhaustive) dead[i] = true, n_dead++;
        if (st->sc->req->check_bounds && c && step_s >= 0) check_floors(st, &p, ce, step_s);
      }
    }
    search_report(st);
  }
}

/* What a hardware's search fixes for all its plans. */
typedef struct {
  int64_t cps[6];
  int n_cp;
  plan_offload offs[3];
  int n_off;
  int fw;
  unsigned cheap; /* the recompute modules of recompute_modes' fourth mode (0: none) */
  plan_ep_overlap epos[2]; /* an expert-parallel plan's all-to-all overlap: each searched */
  int n_epo;
  graph_dtype prec;
  variant *var; /* room for MAX_VARIANTS, filled per dp x cp */
} hw_fixed;

/* The space on `chips` chips (chips = dp x tp x pp x cp; sim/plan.c's
** plan_check is the one judge of which plans are valid): every tp
** dividing the heads within the tensor-parallel domain, cp for long
** sequences, every pp up to the layers, ep over the experts' divisors and
** etp over tp's, every interleaving V the layers allow (an uneven split,
** as even as it goes, where they do not divide), then search_sizes. */
static void search_chips(hw_state *st, const hw_fixed *fx, int64_t chips) {
  const search_ctx *sc = st->sc;
  const planner_req *req = sc->req;
  const wl_tf_dims *d = &sc->m->info.tf;
  int64_t tps[64];
  int n_tp = divisors(d->heads, tp_domain(st->hw, chips), tps, 64);
  for (int ti = 0; ti < n_tp; ti++)
    for (int xi = 0; xi < fx->n_cp; xi++) {
      int64_t tp = tps[ti], cp = fx->cps[xi];
      for (int64_t pp = 1; pp <= d->layers && tp * pp * cp <= chips; pp++) {
        if (chips % (tp * pp * cp)) continue;
        int64_t dp = chips / (tp * pp * cp), ranks = tp * dp * cp;
        int n_vs = variants_of(dp * cp, fx->offs, fx->n_off, fx->cheap, fx->var);
        int64_t eps[64] = {1}, etps[64] = {1};
        int n_ep = d->experts > 1 ? divisors(d->experts, ranks, eps, 64) : 1;
        int n_etp = d->experts > 1 ? divisors(tp, tp, etps, 64) : 1;
        for (int ei = 0; ei < n_ep; ei++)
          for (int ki = 0; ki < n_etp; ki++) {
            if (ranks % (eps[ei] * etps[ki])) continue;
            for (int64_t vp = 1; pp * vp <= d->layers && pp * vp <= SCHED_MAX_VS && (vp == 1 || pp > 1); vp++) {
              bool uneven = d->layers % (pp * vp) != 0;
              if (st->seeding && (uneven || (vp != 1 && vp != 2 && vp != 4))) continue;
              plan p = {.chips = chips, .dp = dp, .tp = tp, .pp = pp, .ep = eps[ei],
                        .etp = etps[ki], .cp = cp, .gbs = sc->gbs, .seq = sc->seq, .vp = vp,
                        .slices = 1, .schedule = vp > 1 ? PLAN_INTERLEAVED : PLAN_1F1B,
                        .precision = fx->prec, .sp = tp > 1, .op_costs = req->op_costs,
                        .cost_cache = req->cost_cache};
              framework_apply(fx->fw, &p);
              p.gemm = req->gemm;
              p.bf16_weights = req->bf16_weights, p.vocab_tiles = req->vocab_tiles;
              p.defer_embedding_wgrad = req->defer_embedding_wgrad && pp > 1;
              p.wgrad_deferral_limit = req->wgrad_deferral_limit;
              p.fp8_attention = req->fp8_attention;
              if (uneven) { /* as even as it goes (plan_balance_layers) */
                p.pp_layers = sc->splits + sc->split_at[pp * vp];
                p.n_pp_layers = (int)(pp * vp);
              }
              /* the overlap pairs a micro-batch's forward with another's
              ** backward: with a pipeline, only interleaved (plan.c) */
              for (int oi = 0; oi < (eps[ei] > 1 ? fx->n_epo : 1); oi++) {
                p.ep_overlap = eps[ei] > 1 ? fx->epos[oi] : PLAN_EP_OVERLAP_FRAMEWORK;
                p.moe_dispatcher = eps[ei] > 1 ? req->moe_dispatcher : PLAN_DISPATCH_FRAMEWORK;
                p.moe_imbalance = eps[ei] > 1 && req->moe_imbalance > 1
                                      ? fmin(req->moe_imbalance, plan_moe_imbalance_max(&p, d))
                                      : 0;
                if (p.ep_overlap == PLAN_EP_OVERLAP_ON && pp > 1 && vp < 2) continue;
                search_sizes(st, p, fx->var, n_vs);
              }
            }
          }
      }
    }
}

static void search_hw(const search_ctx *sc, int h, hw_search *hs) {
  const model *m = sc->m;
  const planner_req *req = sc->req;
  double t_start = thread_cpu_s();
  hw_state st = {.sc = sc, .hs = hs, .rj = {.best_peak = INFINITY}, .best_key = INFINITY};
  planner_result *out = &hs->out;
  const hw_model *hw = st.hw = hw_catalog_at(sc->cat, h);
  hw_fixed fx = {.cps = {1}, .n_cp = 1, .offs = {req->offload}, .n_off = 1};
  if (!planner_hw_allowed(m, hw, req->gemm, out, &fx.prec) || !planner_energy_allowed(req, hw, out)) return;
  char why[256];
  int has_in = input_for_run(&st.in, hw, m, &req->input, sc->seq, why, sizeof why);
  if (has_in < 0) { /* a remote input host where the chip has no network to it */
    planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES, "%s", why);
    return;
  }
  st.inp = has_in == 0 ? &st.in : NULL;
  if (req->bf16_weights && fx.prec != GDT_BF16) { /* plan_check's rule, said once for the chip */
    planner_add_reject(out, hw->name, PLANNER_CAUSE_DTYPE,
                       "--weight-dtype bf16: the model trains in %s here; bf16 weights are a bf16 "
                       "model's (nearest: --weight-dtype fp32)", plan_precision_name(fx.prec));
    return;
  }
  fx.fw = req->has_framework ? req->framework : framework_default(hw->kind);
  fx.cheap = framework_cheap_recompute_modules(fx.fw, &m->info.tf);
  if (req->fp8_attention == PLAN_FP8_ATTN_ON) { /* plan_check's rule, said once for the chip */
    plan probe = {.gemm = req->gemm, .fp8_attention = PLAN_FP8_ATTN_ON};
    framework_apply(fx.fw, &probe);
    if (framework_check_fp8_attention(&probe, hw, why, sizeof why) != 0) {
      planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES, "%s", why);
      return;
    }
  }
  /* the all-to-all overlap: as fixed, or off and on where the framework
  ** has it for the model's precision (plan_check's rules) */
  bool has_epo = framework_check_ep_overlap(fx.fw, why, sizeof why) == 0;
  fx.epos[0] = req->has_ep_overlap ? req->ep_overlap : PLAN_EP_OVERLAP_FRAMEWORK, fx.n_epo = 1;
  if (!req->has_ep_overlap && has_epo && (fx.prec == GDT_BF16 || fx.prec == GDT_F16))
    fx.epos[0] = PLAN_EP_OVERLAP_OFF, fx.epos[1] = PLAN_EP_OVERLAP_ON, fx.n_epo = 2;
  if (req->has_ep_overlap && req->ep_overlap == PLAN_EP_OVERLAP_ON && !has_epo) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES, "--ep-overlap on: %s", why);
    return;
  }
  /* plan_check's rule, said once for the chip: the search's sizes are
  ** checked without the offload its variants add later */
  if (plan_check_offload_link(hw, req->offload, why, sizeof why) != 0) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES, "%s", why);
    return;
  }
  int64_t counts[32];
  int nc = chip_counts(hw, req, counts, 32);
  st.memo = step_memo_new(hw);
  st.coll = coll_memo_new(hw);
  st.cost_coll = coll_memo_new(hw);
  st.desc = malloc(sizeof *st.desc);
  bool preps = true;
  for (int r = 0; r < RECOMPUTE_MODES; r++) {
    st.prep[r] = mem_prep_new();
    st.prep_gen[r] = -1;
    preps = preps && st.prep[r];
  }
  fx.var = malloc(MAX_VARIANTS * sizeof *fx.var);
  if (!st.memo || !st.coll || !st.cost_coll || !st.desc || !fx.var || !preps) {
    for (int r = 0; r < RECOMPUTE_MODES; r++) mem_prep_free(st.prep[r]);
    step_memo_free(st.memo);
    coll_memo_free(st.coll);
    coll_memo_free(st.cost_coll);
    free(st.desc);
    free(fx.var);
    planner_add_reject(out, hw->name, PLANNER_CAUSE_SLICE, "out of memory");
    return;
  }
  /* context parallelism where a sequence is long enough to want it (32k
  ** tokens and more: below that, a rank's share of attention is small
  ** against its linear layers), unless the request fixes it */
  if (req->cp > 0) fx.cps[0] = req->cp;
  else if (sc->seq >= 32768)
    for (int64_t cp = 2; cp <= 32; cp *= 2) fx.cps[fx.n_cp++] = cp;
  /* offload where the chip has a host link to offload over (without one
  ** the step model would charge nothing for it), unless fixed */
  if (!req->has_offload && hw->chip.host_link_bw_bytes_per_s > 0)
    fx.offs[fx.n_off++] = PLAN_OFFLOAD_ACTIVATIONS, fx.offs[fx.n_off++] = PLAN_OFFLOAD_OPTIMIZER;
  /* two passes, the seeds then the rest; chip counts largest first for
  ** time (most often the fastest, so the bound bites early), smallest
  ** first for cost */
  bool down = req->objective == PLANNER_TIME;
  for (int pass = 0; pass < 2; pass++) {
    st.seeding = pass == 0;
    for (int ci = 0; ci < nc; ci++) search_chips(&st, &fx, counts[down ? nc - 1 - ci : ci]);
  }
  free(fx.var);
  free(st.desc);
  for (int r = 0; r < RECOMPUTE_MODES; r++) mem_prep_free(st.prep[r]);
  coll_memo_free(st.coll);
  coll_memo_free(st.cost_coll);
  step_memo_free(st.memo);
  cost_map_free(&st.costs);
  search_report(&st);
  for (int c = 0; c < PLANNER_CAUSE_COUNT; c++) out->rejected_by[c] += st.rj.by[c];
  if (isfinite(st.best_key)) planner_push_cand(&out->per_hw, &out->n_per_hw, &st.best);
  else reject_hw(out, hw, req, &st.rj, st.fitted);
  hs->busy_s = thread_cpu_s() - t_start;
}

typedef struct {
  const search_ctx *sc;
  hw_search *hs; /* one per catalog entry */
  int n;
  atomic_int next, done;
} search_pool;

static void *search_worker(void *arg) {
  search_pool *sp = arg;
  for (int h; (h = atomic_fetch_add(&sp->next, 1)) < sp->n;) {
    if (planner_listed(sp->sc->req->hw_list, hw_catalog_at(sp->sc->cat, h)->name))
      search_hw(sp->sc, h, &sp->hs[h]);
    atomic_fetch_add(&sp->done, 1);
  }
  return NULL;
}

/* Runs fn over the pool on up to `threads` threads (the calling one
** included), calling progress every 100 ms until all are done, with the
** search's shared figures when sh is not NULL. */
static void run_pool(void *(*fn)(void *), void *arg, int threads, atomic_int *done, int total,
                     const planner_req *req, const char *what, search_shared *sh) {
  pthread_t tid[64];
  int started = 0;
  for (int i = 1; i < threads && i < 64; i++)
    if (pthread_create(&tid[started], NULL, fn, arg) == 0) started++;
  if (!req->progress) {
    fn(arg);
  } else {
    /* the calling thread reports; the workers do the work (and it joins
    ** in when no thread could be started) */
    if (started == 0) fn(arg);
    double t0 = units_now_s();
    for (bool last = false; !last;) {
      last = atomic_load(done) >= total;
      planner_progress pg = {.what = what, .done = atomic_load(done), .total = total,
                             .best_key = INFINITY, .elapsed_s = units_now_s() - t0, .eta_s = -1};
      if (sh) {
        pg.evaluated = atomic_load(&sh->evaluated);
        pthread_mutex_lock(&sh->lock);
        pg.best_key = sh->best_key;
        snprintf(pg.best_hw, sizeof pg.best_hw, "%s", sh->best_hw);
        pthread_mutex_unlock(&sh->lock);
      }
      /* the entries left at the pace of those done (they differ in size:
      ** a rough figure) */
      if (pg.done > 0) pg.eta_s = pg.elapsed_s * (double)(total - pg.done) / (double)pg.done;
      req->progress(req->progress_ctx, &pg);
      if (!last) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
    }
  }
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
}

static int planner_threads(const planner_req *req) {
  if (req->threads > 0) return req->threads;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)(n < 64 ? n : 64) : 1;
}

typedef struct {
  const model *m;
  const hw_catalog *cat;
  const planner_req *req;
  planner_cand *c;
  int n;
  int64_t steps;
  int *ok;
  double *sim_s;
  char (*why)[256]; /* each candidate's reason when it did not simulate */
  atomic_int next, done;
} sim_pool;

/* The slice shape a TPU plan runs on: of the shapes Cloud TPU offers for
** its chips a slice, the one whose all-reduce of the plan's gradients over
** every chip is quickest by the closed form (coll_best_shape; the most
** cubic on a tie), so the plan and its printout carry it. Off a torus, or
** with more chips than a slice and no --slices, the plan keeps none. */
static void choose_slice_shape(const model *m, const hw_model *hw, plan *p) {
  if (hw->scale_up.kind != HW_UP_ICI_TORUS || p->slice_shape[0] > 0) return;
  int64_t shape[3];
  if (coll_best_shape(hw, p->chips, p->slices > 0 ? p->slices : 1, step_grad_bytes(m, hw, p),
                      (coll_algo)p->dp_algo, shape, NULL) > 0)
    memcpy(p->slice_shape, shape, sizeof shape);
  /* twisted where offered and it changes the step: an expert group that is
  ** the whole slice (its all-to-all gains, net_a2a_twist_gain); the rings
  ** are the same either way, so elsewhere the regular torus is kept */
  p->slice_twisted = p->slice_shape[0] > 0 && plan_ep_is_slice(p) &&
                     net_twist_offered(hw, p->slice_shape);
}

static void *sim_worker(void *arg) {
  sim_pool *sp = arg;
  for (int i; (i = atomic_fetch_add(&sp->next, 1)) < sp->n;) {
    planner_cand *c = &sp->c[i];
    const hw_model *hw = hw_catalog_find(sp->cat, c->hw);
    char *e = sp->why[i];
    double ts = thread_cpu_s();
    choose_slice_shape(sp->m, hw, &c->p);
    input_cfg in; /* as the search scored it (search_hw) */
    int has_in = input_for_run(&in, hw, sp->m, &sp->req->input, c->p.seq, e, sizeof *sp->why);
    sp->ok[i] = has_in >= 0 &&
                step_simulate(sp->m, hw, &c->p, has_in == 0 ? &in : NULL, &c->sim, NULL, e,
                              sizeof *sp->why) == 0;
    sp->sim_s[i] = thread_cpu_s() - ts;
    if (sp->ok[i]) {
      c->simulated = true;
      planner_price_cand(sp->m, hw, sp->req, c, c->sim.step_time_s, sp->steps);
    }
    atomic_fetch_add(&sp->done, 1);
  }
  return NULL;
}

static int run_cached(const model *m, const hw_catalog *cat, const planner_req *req,
                      planner_result *out, char *err, size_t errn);

/* A candidate's plans, its fixes' too, without the run's cache; its kernel
** counts the whole run's (a count taken mid-run would depend on how the
** threads interleaved). */
static void drop_cache(planner_cand *c, opcost *keep, const opcost_stats *run) {
  c->p.cost_cache = keep;
  for (int i = 0; i < c->sim.n_fixes; i++) c->sim.fixes[i].p.cost_cache = keep;
  c->sim.op_costs = *run;
}

int planner_run(const model *m, const hw_catalog *cat, const planner_req *req, planner_result *out,
                char *err, size_t errn) {
  planner_req r = *req;
  opcost *own = NULL;
  if (!r.cost_cache) {
    own = opcost_new(r.op_costs);
    if (!own) {
      memset(out, 0, sizeof *out);
      snprintf(err, errn, "out of memory");
      return -1;
    }
    r.cost_cache = own;
  }
  int rc = run_cached(m, cat, &r, out, err, errn);
  /* the result's plans outlive this run's cache: they go back without it */
  opcost_stats st = opcost_get_stats(r.cost_cache);
  drop_cache(&out->best, req->cost_cache, &st);
  drop_cache(&out->cheapest, req->cost_cache, &st);
  drop_cache(&out->fastest, req->cost_cache, &st);
  for (int i = 0; i < out->n_ranked; i++) drop_cache(&out->ranked[i], req->cost_cache, &st);
  for (int i = 0; i < out->n_per_hw; i++) drop_cache(&out->per_hw[i], req->cost_cache, &st);
  for (int i = 0; i < out->n_pareto; i++) drop_cache(&out->pareto[i], req->cost_cache, &st);
  for (int i = 0; i < out->n_rejected; i++)
    if (out->rejected[i].has_closest) drop_cache(&out->rejected[i].closest, req->cost_cache, &st);
  opcost_free(own);
  return rc;
}

/* The uneven stage splits a search may use, into out (which owns them:
** the plans of the result point into them): for S = 1 .. min(layers,
** SCHED_MAX_VS) stages, plan_balance_layers' split as even as it goes (S
** numbers at split_at[S]; unused where the layers divide). */
/* The Reduction Server weighed against the plan's all-reduce, for the
** advice: the step with `reducers` reducer VMs (step_with_reducers_s), the
** run's time and bill with them billed beside the chips, and whether it
** wins on the objective, with the reason -- the hosts' NICs binding (it
** moves S over each host's NIC where a ring moves 2(H-1)/H S), or the
** fabric being faster than the reducers together (docs/network.md). */
static void rs_advice(const model *m, const hw_model *hw, const planner_req *req,
                      const planner_cand *b, int64_t reducers, planner_result *out) {
  const step_result *r = &b->sim;
  double rs, step = step_with_reducers_s(m, hw, &b->p, r, reducers, &rs);
  if (!(rs > 0) || !(step > 0)) return;
  double usd_h = (double)reducers * coll_rs_reducer_usd_per_h(hw);
  double train_s = b->train_s * step / r->step_time_s;
  double usd = b->train_usd * step / r->step_time_s + usd_h * train_s / 3600;
  bool faster = step < r->step_time_s, cheaper = usd < b->train_usd;
  bool wins = req->objective == PLANNER_TIME ? faster : cheaper;
  double hosts = (double)b->p.chips / (double)(hw->chips_per_node > 0 ? hw->chips_per_node : 1);
  double host_bw = hw->scale_out.bw_per_chip_bytes_per_s * (double)hw->chips_per_node;
  double red_bw = (double)reducers * coll_rs_reducer_bw(hw);
  char why[256];
  if (faster)
    snprintf(why, sizeof why, "the hosts' NICs bind (%.3g GB/s each): the reducers' %.3g GB/s "
             "together take half the traffic off them", host_bw / 1e9, red_bw / 1e9);
  else
    snprintf(why, sizeof why, "the %.0f hosts' network (%.3g GB/s each) is faster than the "
             "reducers' %.3g GB/s together", hosts, host_bw / 1e9, red_bw / 1e9);
  out->advice_reducers = reducers;
  out->advice_step_s = step;
  char usd_h_s[32], usd_s[32], base_s[32];
  units_usd(usd_h_s, sizeof usd_h_s, usd_h);
  units_usd(usd_s, sizeof usd_s, usd);
  units_usd(base_s, sizeof base_s, b->train_usd);
  snprintf(out->advice, sizeof out->advice,
           "the gradient all-reduce shows for %.0f%% of the step (it takes %.3g s and the last "
           "backward hides the rest): data-parallel scaling is flattening. A Reduction Server "
           "with %lld reducer VMs (sized to the hosts' NICs) would take about %.3g s for it, "
           "%.3g s a step (%+.1f%%), for %s an hour more: %s for the run against %s. "
           "It %s: %s%s",
           100 * r->exposed_dp_s / r->step_time_s, r->dp_allreduce_s, (long long)reducers, rs,
           step, 100 * (step / r->step_time_s - 1), usd_h_s, usd_s, base_s,
           wins ? "wins" : "loses", why, wins ? " (simulate --reduction-server " : "; the all-reduce stays hierarchical.");
  if (wins) {
    size_t l = strlen(out->advice);
    snprintf(out->advice + l, sizeof out->advice - l, "%lld).", (long long)reducers);
  }
}

static int stage_splits(int64_t layers, planner_result *out) {
  int64_t top = layers < SCHED_MAX_VS ? layers : SCHED_MAX_VS;
  out->stage_split_at = calloc((size_t)top + 1, sizeof *out->stage_split_at);
  out->stage_splits = calloc((size_t)(top * (top + 1) / 2 + 1), sizeof *out->stage_splits);
  if (!out->stage_split_at || !out->stage_splits) return -1;
  int64_t at = 0;
  for (int64_t S = 1; S <= top; S++) {
    plan q = {.pp = S, .vp = 1};
    out->stage_split_at[S] = at;
    plan_balance_layers(&q, layers, out->stage_splits + at, (int)S);
    at += S;
  }
  return 0;
}

static int run_cached(const model *m, const hw_catalog *cat, const planner_req *req,
                      planner_result *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  double t0 = units_now_s();
  const wl_tf_dims *d = &m->info.tf;
  static const char *const OBJ[] = {"time", "cost", "cost-under-deadline", "energy"};
  snprintf(out->objective, sizeof out->objective, "%s", OBJ[req->objective]);
  if (d->layers == 0) return planner_generic(m, cat, req, out, err, errn, t0);
  int64_t gbs = m->train.global_batch, seq = req->seq > 0 ? req->seq : m->train.seq_len;
  double tokens = req->tokens > 0 ? req->tokens : 20.0 * (double)m->params; /* Hoffmann et al. 2022 */
  int64_t steps = req->steps > 0 ? req->steps
                                 : (int64_t)ceil(tokens / ((double)gbs * (double)seq));
  int nh = hw_catalog_count(cat);
  planner_cand *kept = calloc(MAX_KEEP + 1, sizeof *kept);
  double *keys = calloc(MAX_KEEP + 1, sizeof *keys);
  hw_search *hs = calloc((size_t)(nh > 0 ? nh : 1), sizeof *hs);
  if (!kept || !keys || !hs) {
    free(kept), free(keys), free(hs);
    snprintf(err, errn, "out of memory");
    return -1;
  }
  if (stage_splits(d->layers, out) != 0) {
    free(kept), free(keys), free(hs);
    return str_errf(err, errn, "out of memory");
  }
  search_shared sh = {.best_key = INFINITY};
  atomic_init(&sh.evaluated, 0);
  pthread_mutex_init(&sh.lock, NULL);
  search_ctx sc = {m, cat, req, gbs, seq, steps, out->stage_splits, out->stage_split_at, &sh};
  search_pool sp = {.sc = &sc, .hs = hs, .n = nh};
  atomic_init(&sp.next, 0);
  atomic_init(&sp.done, 0);
  run_pool(search_worker, &sp, planner_threads(req), &sp.done, nh, req, "searching", &sh);
  pthread_mutex_destroy(&sh.lock);
  /* merge in catalog order: the result does not depend on the threads */
  int n_kept = 0;
  for (int h = 0; h < nh; h++) {
    const planner_result *o = &hs[h].out;
    out->evaluated += o->evaluated;
    out->timed += o->timed;
    out->pruned += o->pruned;
    out->cost_builds += o->cost_builds;
    out->bound_violations += o->bound_violations;
    if (o->any_fit) {
      planner_note_closest(out, &o->cheapest);
      planner_note_closest(out, &o->fastest);
    }
    out->costs_s += o->costs_s;
    out->scoring_s += hs[h].busy_s - o->costs_s;
    for (int i = 0; i < o->n_per_hw; i++) planner_push_cand(&out->per_hw, &out->n_per_hw, &o->per_hw[i]);
    for (int i = 0; i < o->n_pareto; i++) planner_front_add(&out->pareto, &out->n_pareto, &o->pareto[i]);
    for (int i = 0; i < o->n_rejected; i++) {
      planner_reject *v = planner_grow(out->rejected, out->n_rejected, sizeof *v);
      if (v) out->rejected = v, v[out->n_rejected++] = o->rejected[i];
    }
    for (int c = 0; c < PLANNER_CAUSE_COUNT; c++) out->rejected_by[c] += o->rejected_by[c];
    for (int i = 0; i < hs[h].n_kept; i++) keep(kept, &n_kept, &hs[h].kept[i], hs[h].keys[i], keys);
    planner_result_free(&hs[h].out);
  }
  free(hs);
  if (n_kept == 0) {
    char near[512];
    planner_closest_text(out, req, near, sizeof near);
    snprintf(err, errn, "no hardware can train %s within the limits%s (closest: %s)", m->name,
             req->deadline_s > 0 ? " and the deadline" : "", near);
    free(kept), free(keys);
    return -1;
  }
  /* confirm the best few with the event simulation, then rank by it */
  int top = planner_top(req);
  if (top > n_kept) top = n_kept;
  int ok[MAX_KEEP] = {0};
  double sim_s[MAX_KEEP] = {0};
  out->ranked = calloc((size_t)top, sizeof *out->ranked);
  if (!out->ranked) {
    free(kept), free(keys);
    return str_errf(err, errn, "out of memory");
  }
  char why[MAX_KEEP][256];
  for (int i = 0; i < top; i++) why[i][0] = 0;
  sim_pool pp = {.m = m, .cat = cat, .req = req, .c = kept, .n = top, .steps = steps, .ok = ok,
                 .sim_s = sim_s, .why = why};
  atomic_init(&pp.next, 0);
  atomic_init(&pp.done, 0);
  run_pool(sim_worker, &pp, planner_threads(req), &pp.done, top, req, "simulating", NULL);
  for (int i = 0; i < top; i++) {
    out->simulate_s += sim_s[i];
    if (ok[i]) out->ranked[out->n_ranked++] = kept[i];
  }
  planner_rank(out, req);
  free(kept);
  free(keys);
  if (out->n_ranked == 0) /* the fast path kept plans the simulation could not run */
    return str_errf(err, errn, "no candidate plan could be simulated: %s",
                    why[0][0] ? why[0] : "(no reason given)");
  out->best = out->ranked[0];
  const planner_cand *b = &out->best;
  const step_result *r = &b->sim;
  /* Scaling that flattens: the gradient all-reduce shows. The all-reduce is
  ** already hierarchical where the network has nodes (coll's auto choice);
  ** weigh a Reduction Server instead (Vertex AI, GPU hosts): its reducers
  ** sized to the hosts' NICs (coll_rs_reducers_for) and billed at the
  ** entry's reducer VM price, its closed form in place of the all-reduce,
  ** the part the backward hid staying hidden (simulating one at 16,384
  ** chips would cost more than the whole search). */
  const hw_model *bhw = hw_catalog_find(cat, b->hw);
  int64_t reducers = bhw && bhw->kind == HW_GPU ? coll_rs_reducers_for(bhw, b->p.dp * (b->p.cp > 0 ? b->p.cp : 1)) : 0;
  if (b->p.dp > 1 && r->dp_allreduce_s > 0 && r->exposed_dp_s > 0.10 * r->step_time_s &&
      reducers > 0)
    rs_advice(m, bhw, req, b, reducers, out);
  const char *bound = r->breakdown_s.pipeline_bubble + r->breakdown_s.exposed_comm <
                                  0.01 * r->step_time_s
                          ? "the optimizer and overheads cost most"
                      : r->breakdown_s.pipeline_bubble > r->breakdown_s.exposed_comm
                          ? "the pipeline bubble costs most"
                          : "communication costs most";
  char dur[32], mem[400], usd[32];
  units_seconds(dur, sizeof dur, b->train_s);
  units_usd(usd, sizeof usd, b->train_usd);
  char rw[96];
  const char *rec = recompute_words(&b->p, rw, sizeof rw);
  if (r->memory.peak > 0.8 * r->memory.capacity)
    snprintf(mem, sizeof mem,
             "Memory binds: %.1f of %.1f GiB per chip, so tp %lld x pp %lld with %s recompute%s "
             "is what fits at this size.",
             r->memory.peak / (1 << 30), r->memory.capacity / (1 << 30), (long long)b->p.tp,
             (long long)b->p.pp, rec, b->p.zero ? " and ZeRO" : "");
  else
    snprintf(mem, sizeof mem,
             "Memory does not bind (%.1f of %.1f GiB per chip): tp %lld x pp %lld with %s "
             "recompute%s is the %s split.",
             r->memory.peak / (1 << 30), r->memory.capacity / (1 << 30), (long long)b->p.tp,
             (long long)b->p.pp, rec, b->p.zero ? " and ZeRO" : "",
             req->objective == PLANNER_TIME     ? "fastest"
             : req->objective == PLANNER_ENERGY ? "least energy"
                                                : "cheapest");
  snprintf(out->why, sizeof out->why,
           "%s on %lld chip%s trains %.3g tokens in %s for %s (%s prices). Compute is "
           "%.0f%% of the step (MFU %.0f%%); after it, %s. %s",
           b->hw, (long long)b->p.chips, b->p.chips == 1 ? "" : "s",
           (double)steps * (double)gbs * (double)seq, dur,
           usd, req->spot ? "spot" : "on-demand",
           100 * r->breakdown_s.compute / r->step_time_s, 100 * r->mfu, bound, mem);
  out->search_s = units_now_s() - t0;
  return 0;
}

