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

typedef struct {
  bool done, ok;
  step_result c;
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
typedef struct {
  const model *m;
  const hw_catalog *cat;
  const planner_req *req;
  int64_t gbs, seq, steps;
} search_ctx;

typedef struct {
  planner_result out; /* evaluated, costs_s, per_hw, rejected of one hardware */
  planner_cand kept[MAX_KEEP + 1];
  double keys[MAX_KEEP + 1];
  int n_kept;
  double busy_s; /* thread time spent on this hardware */
} hw_search;

static const int64_t TPS[] = {1, 2, 4, 8, 16}, MBS[] = {1, 2, 4};

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
    units_seconds(t, sizeof t, rj->cheapest.train_s);
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_BUDGET,
                   "its cheapest plan (%lld chips) costs $%.2f, over the $%.2f budget, and takes %s",
                   (long long)rj->cheapest.p.chips, rj->cheapest.train_usd, req->budget_usd, t);
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
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_MEMORY,
                   "no plan fits: the smallest peak is %.1f GiB per chip against %.1f GiB "
                   "(%lld chip%s, tp %lld, pp %lld, zero %d, %s recompute)",
                   rj->best_peak / (1 << 30), (double)hw->chip.hbm_bytes / (1 << 30),
                   (long long)p->chips, p->chips == 1 ? "" : "s", (long long)p->tp,
                   (long long)p->pp, p->zero, plan_recompute_word(p->recompute));
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
  } else {
    r = planner_add_reject(out, hw->name, PLANNER_CAUSE_DIVISIBILITY, "no valid plan up to %lld chips%s%s",
                   (long long)(req->chips ? req->chips : req->max_chips),
                   rj->first[PLANNER_CAUSE_DIVISIBILITY][0] ? ": " : "",
                   rj->first[PLANNER_CAUSE_DIVISIBILITY]);
  }
  if (r) memcpy(r->plans_by, rj->by, sizeof r->plans_by);
}

static void search_hw(const search_ctx *sc, int h, hw_search *hs) {
  const model *m = sc->m;
  const planner_req *req = sc->req;
  const wl_tf_dims *d = &m->info.tf;
  int64_t gbs = sc->gbs, seq = sc->seq, steps = sc->steps;
  planner_result *out = &hs->out;
  planner_cand *kept = hs->kept;
  double *keys = hs->keys;
  int n_kept = 0;
  double t_start = units_now_s();
  const hw_model *hw = hw_catalog_at(sc->cat, h);
  graph_dtype prec;
  if (!planner_hw_allowed(m, hw, out, &prec) || !planner_energy_allowed(req, hw, out)) return;
  int64_t counts[32];
  int nc = chip_counts(hw, req, counts, 32);
  rejections rj = {.best_peak = INFINITY};
  int fitted = 0;
  planner_cand hw_best = {0};
  double hw_best_key = INFINITY;
  /* per-chip costs depend on (tp, mbs, ep, cp) only */
  cost_entry cache[5][3][4][4] = {{{{{0}}}}};
  step_memo *memo = step_memo_new(hw);
  if (!memo) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_SLICE, "out of memory");
    return;
  }
  static const int64_t EPS[] = {1, 2, 4, 8};
  static const int64_t VPS[] = {1, 2, 4};
  static const int ZERO[] = {0, 1, 3};
  int n_ep = d->experts > 1 ? 4 : 1;
  /* context parallelism where a sequence is long enough to want it (32k
  ** tokens and more: below that, a rank's share of attention is small
  ** against its linear layers), unless the request fixes it */
  static const int64_t CPS[] = {1, 2, 4, 8};
  int fw = req->has_framework ? req->framework : framework_default(hw->kind);
  int n_cp = req->cp > 0 || seq < 32768 ? 1 : 4;
  /* The space: tp within a node (a TPU: up to 16), micro-batches 1/2/4, ep
  ** up to 8 for MoE, cp up to 8 for long sequences, pp up to 64,
  ** interleaving 1/2/4, each recompute mode,
  ** ZeRO 0/1/3; dp what is left of the chips. Which of these are valid
  ** plans is plan_check's to say (sim/plan.c), the one validator. */
  for (int ti = 0; ti < 5; ti++) {
    int64_t tp = TPS[ti];
    int64_t tp_limit = hw->kind == HW_TPU ? 16 : hw->chips_per_node;
    if (tp > tp_limit) continue;
    for (int mi = 0; mi < 3; mi++)
      for (int ei = 0; ei < n_ep; ei++)
        for (int xi = 0; xi < n_cp; xi++)
        for (int ci = 0; ci < nc; ci++) {
          int64_t chips = counts[ci], ep = EPS[ei];
          int64_t cp = req->cp > 0 ? req->cp : CPS[xi];
          for (int64_t pp = 1; pp <= 64 && pp * tp * cp <= chips; pp++) {
            /* dp is what is left, a whole number; ep splits dp x cp */
            if (chips % (tp * pp * cp) || (chips / (tp * pp)) % ep) continue;
            for (int vi = 0; vi < 3; vi++) {
              int64_t vp = VPS[vi];
              if (vp > 1 && pp == 1) continue; /* interleaving needs a pipeline */
              plan p = {.chips = chips, .dp = chips / (tp * pp * cp), .tp = tp, .pp = pp, .ep = ep, .cp = cp,
                        .mbs = MBS[mi], .gbs = gbs, .seq = seq, .vp = vp, .slices = 1,
                        .schedule = vp > 1 ? PLAN_INTERLEAVED : PLAN_1F1B, .precision = prec,
                        .sp = tp > 1, .op_costs = req->op_costs, .cost_cache = req->cost_cache};
              framework_apply(fw, &p);
              p.gemm = req->gemm;
              p.offload = req->offload;
              if (!planner_fix_match(&req->fix, &p, false)) { /* --fix: fix.c */
                reject(&rj, PLANNER_CAUSE_FIXED, NULL);
                continue;
              }
              plan_fault fault;
              char perr[200];
              /* the message only for the first plan a rule turns down: the
              ** search asks thousands */
              size_t n = rj.first[PLANNER_CAUSE_DIVISIBILITY][0] ? 0 : sizeof perr;
              if (plan_check_fault(m, hw, &p, &fault, perr, n) != 0) {
                reject(&rj, fault == PLAN_FAULT_DTYPE ? PLANNER_CAUSE_DTYPE : PLANNER_CAUSE_DIVISIBILITY,
                       n ? perr : NULL);
                continue;
              }
              for (int rec = 0; rec < 3; rec++)
                for (int zi = 0; zi < 3; zi++) {
                  p.recompute = (plan_recompute)rec;
                  p.zero = ZERO[zi];
                  if (p.zero > 0 && p.dp == 1) continue; /* nothing to shard over */
                  if (!planner_fix_match(&req->fix, &p, true)) {
                    reject(&rj, PLANNER_CAUSE_FIXED, NULL);
                    continue;
                  }
                  out->evaluated++;
                  mem_opts mo;
                  plan mp;
                  mem_setup(m, hw, &p, &mo, &mp);
                  mem_bytes mb;
                  char merr[256];
                  if (mem_transformer(d, &mp, &mo, &mb, merr, sizeof merr) != 0) {
                    reject(&rj, PLANNER_CAUSE_DIVISIBILITY, merr);
                    continue;
                  }
                  if (!mb.fits) {
                    reject(&rj, PLANNER_CAUSE_MEMORY, NULL);
                    if (mb.peak < rj.best_peak) {
                      rj.best_peak = mb.peak;
                      rj.peak_plan = (planner_cand){.p = p};
                      snprintf(rj.peak_plan.hw, sizeof rj.peak_plan.hw, "%s", hw->name);
                    }
                    continue;
                  }
                  fitted++;
                  cost_entry *ce = &cache[ti][mi][ei][xi];
                  char cerr[256] = "";
                  if (!ce->done) {
                    double tc = units_now_s();
                    ce->ok = step_costs(m, hw, &p, &ce->c, cerr, sizeof cerr) == 0;
                    out->costs_s += units_now_s() - tc;
                    ce->done = true;
                  }
                  if (!ce->ok) { /* a group the network cannot form: a TPU slice of 2 */
                    reject(&rj, PLANNER_CAUSE_SLICE, cerr[0] ? cerr : NULL);
                    continue;
                  }
                  step_times fr;
                  if (step_fast(m, hw, &p, &ce->c, memo, &fr, cerr, sizeof cerr) != 0) {
                    reject(&rj, PLANNER_CAUSE_SLICE, cerr);
                    continue;
                  }
                  /* price first; build a whole candidate only for one that is
                  ** kept, the hardware's best, or the closest yet (most are none) */
                  double a = fr.step_time_s;
                  run_price pr = planner_price_of(m, hw, req, p.chips, a, steps);
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
                  bool kept_now = passes && (n_kept < MAX_KEEP || key < keys[MAX_KEEP - 1]);
                  bool nearer = (over_budget && (!rj.over_budget || pr.train_usd < rj.cheapest.train_usd)) ||
                                (over_deadline && !over_budget &&
                                 (!rj.over_deadline || pr.train_s < rj.fastest.train_s));
                  if (!passes) reject(&rj, over_budget ? PLANNER_CAUSE_BUDGET : PLANNER_CAUSE_DEADLINE, NULL);
                  if (!closer && !kept_now && !nearer && !front && !(passes && key < hw_best_key)) continue;
                  planner_cand c = {.p = p, .analytic_step_s = a};
                  snprintf(c.hw, sizeof c.hw, "%s", hw->name);
                  planner_set_price(&c, &pr);
                  if (closer) planner_note_closest(out, &c);
                  if (nearer && over_budget) rj.over_budget = true, rj.cheapest = c;
                  else if (nearer) rj.over_deadline = true, rj.fastest = c;
                  if (!passes) continue;
                  if (front) planner_front_add(&out->pareto, &out->n_pareto, &c);
                  if (kept_now) keep(kept, &n_kept, &c, key, keys);
                  if (key < hw_best_key) hw_best_key = key, hw_best = c;
                }
            }
          }
        }
  }
  step_memo_free(memo);
  for (int c = 0; c < PLANNER_CAUSE_COUNT; c++) out->rejected_by[c] += rj.by[c];
  if (isfinite(hw_best_key)) planner_push_cand(&out->per_hw, &out->n_per_hw, &hw_best);
  else reject_hw(out, hw, req, &rj, fitted);
  hs->n_kept = n_kept;
  hs->busy_s = units_now_s() - t_start;
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
** included), calling progress every 100 ms until all are done. */
static void run_pool(void *(*fn)(void *), void *arg, int threads, atomic_int *done, int total,
                     const planner_req *req, const char *what) {
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
    while (atomic_load(done) < total) {
      req->progress(req->progress_ctx, what, atomic_load(done), total);
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    req->progress(req->progress_ctx, what, total, total);
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
  atomic_int next, done;
} sim_pool;

static void *sim_worker(void *arg) {
  sim_pool *sp = arg;
  for (int i; (i = atomic_fetch_add(&sp->next, 1)) < sp->n;) {
    planner_cand *c = &sp->c[i];
    const hw_model *hw = hw_catalog_find(sp->cat, c->hw);
    char e[256];
    double ts = units_now_s();
    sp->ok[i] = step_simulate(sp->m, hw, &c->p, NULL, &c->sim, NULL, e, sizeof e) == 0;
    sp->sim_s[i] = units_now_s() - ts;
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
  search_ctx sc = {m, cat, req, gbs, seq, steps};
  search_pool sp = {.sc = &sc, .hs = hs, .n = nh};
  atomic_init(&sp.next, 0);
  atomic_init(&sp.done, 0);
  run_pool(search_worker, &sp, planner_threads(req), &sp.done, nh, req, "searching");
  /* merge in catalog order: the result does not depend on the threads */
  int n_kept = 0;
  for (int h = 0; h < nh; h++) {
    const planner_result *o = &hs[h].out;
    out->evaluated += o->evaluated;
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
  int top = req->top > 0 ? req->top : 5; /* at most the MAX_KEEP kept */
  if (top > n_kept) top = n_kept;
  int ok[MAX_KEEP] = {0};
  double sim_s[MAX_KEEP] = {0};
  out->ranked = calloc((size_t)top, sizeof *out->ranked);
  if (!out->ranked) {
    free(kept), free(keys);
    return str_errf(err, errn, "out of memory");
  }
  sim_pool pp = {.m = m, .cat = cat, .req = req, .c = kept, .n = top, .steps = steps, .ok = ok,
                 .sim_s = sim_s};
  atomic_init(&pp.next, 0);
  atomic_init(&pp.done, 0);
  run_pool(sim_worker, &pp, planner_threads(req), &pp.done, top, req, "simulating");
  for (int i = 0; i < top; i++) {
    out->simulate_s += sim_s[i];
    if (ok[i]) out->ranked[out->n_ranked++] = kept[i];
  }
  planner_rank(out, req);
  free(kept);
  free(keys);
  if (out->n_ranked == 0) return -1;
  out->best = out->ranked[0];
  const planner_cand *b = &out->best;
  const step_result *r = &b->sim;
  /* Scaling that flattens: the gradient all-reduce shows. The all-reduce is
  ** already hierarchical where the network has nodes (coll's auto choice);
  ** say what a Reduction Server (here one reducer host per worker node)
  ** would give instead: its closed form in place of the all-reduce, the
  ** part the backward hid staying hidden (simulating one at 16,384 chips
  ** would cost more than the whole search). */
  if (b->p.dp > 1 && r->dp_allreduce_s > 0 && r->exposed_dp_s > 0.10 * r->step_time_s &&
      hw_catalog_find(cat, b->hw)->kind != HW_TPU) {
    const hw_model *hw = hw_catalog_find(cat, b->hw);
    int64_t nodes = b->p.chips / (hw->chips_per_node > 0 ? hw->chips_per_node : 1);
    if (nodes < 1) nodes = 1;
    double rs;
    double step = step_with_reducers_s(m, hw, &b->p, r, nodes, &rs);
    out->advice_reducers = nodes;
    out->advice_step_s = step;
    snprintf(out->advice, sizeof out->advice,
             "the gradient all-reduce shows for %.0f%% of the step (it takes %.3g s and the "
             "last backward hides the rest): data-parallel scaling is flattening. A "
             "Reduction Server with %lld reducer hosts would take about %.3g s for it, %.3g s a "
             "step (%+.1f%%); the all-reduce is already hierarchical (NVLink inside a node, the "
             "rails between).",
             100 * r->exposed_dp_s / r->step_time_s, r->dp_allreduce_s, (long long)nodes, rs,
             step, 100 * (step / r->step_time_s - 1));
  }
  const char *bound = r->breakdown_s.pipeline_bubble + r->breakdown_s.exposed_comm <
                                  0.01 * r->step_time_s
                          ? "the optimizer and overheads cost most"
                      : r->breakdown_s.pipeline_bubble > r->breakdown_s.exposed_comm
                          ? "the pipeline bubble costs most"
                          : "communication costs most";
  char dur[32], mem[400];
  units_seconds(dur, sizeof dur, b->train_s);
  const char *rec = plan_recompute_word(b->p.recompute);
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
           "%s on %lld chip%s trains %.3g tokens in %s for $%.0f (%s prices). Compute is "
           "%.0f%% of the step (MFU %.0f%%); after it, %s. %s",
           b->hw, (long long)b->p.chips, b->p.chips == 1 ? "" : "s",
           (double)steps * (double)gbs * (double)seq, dur,
           b->train_usd, req->spot ? "spot" : "on-demand",
           100 * r->breakdown_s.compute / r->step_time_s, 100 * r->mfu, bound, mem);
  out->search_s = units_now_s() - t0;
  return 0;
}

