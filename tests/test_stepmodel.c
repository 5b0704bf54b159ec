/*
** test_stepmodel.c -- one step model, two evaluators (sim/step.h): the
** planner's fast path (step_fast: the step's description evaluated
** directly) against the event simulation (step_simulate) of the same plan.
**
** They may differ only where the simulation models more, by name: the
** collectives (simulated link by link vs their closed form), --full
** contention, the input pipeline. With the simulation given the closed-form
** collectives too (coll_costs PLAN_COLL_FORMULA) and neither of the others,
** they must agree within 0.5 % (in fact to rounding) on every example
** transformer x every catalog chip x a grid of plans: schedules (1F1B,
** GPipe, interleaved), pipeline depths, tensor and expert parallelism,
** ZeRO 0/1/3, recompute, gradient sync overlapped or after the backward.
** (The other families run whole-step simulations in both the planner and
** simulate: there is no second evaluator to compare.)
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/step.h"
#include "helpers.h"

static model *load(const char *src) {
  diag *d = diag_new();
  model_opts o = {0};
  model *m = model_load(src, &o, d);
  if (!m) diag_print(d, stderr);
  cr_assert_not_null(m, "%s", src);
  diag_free(d);
  return m;
}

typedef struct {
  int64_t chips, tp, pp, ep, vp, mbs, gbs;
  int zero;
  plan_schedule sched;
  plan_recompute rec;
  plan_grad_sync sync;
} grid_plan;

static const grid_plan GRID[] = {
    {8, 1, 1, 1, 1, 1, 64, 0, PLAN_1F1B, PLAN_RECOMPUTE_NONE, PLAN_GRAD_OVERLAP},
    {16, 2, 1, 1, 1, 2, 64, 3, PLAN_1F1B, PLAN_RECOMPUTE_SELECTIVE, PLAN_GRAD_OVERLAP},
    {16, 2, 4, 1, 1, 1, 64, 1, PLAN_1F1B, PLAN_RECOMPUTE_FULL, PLAN_GRAD_OVERLAP},
    {32, 4, 2, 1, 1, 1, 128, 1, PLAN_GPIPE, PLAN_RECOMPUTE_NONE, PLAN_GRAD_AFTER_BACKWARD},
    {32, 2, 4, 1, 2, 1, 64, 1, PLAN_INTERLEAVED, PLAN_RECOMPUTE_SELECTIVE, PLAN_GRAD_OVERLAP},
    {64, 8, 2, 1, 2, 1, 128, 0, PLAN_INTERLEAVED, PLAN_RECOMPUTE_FULL, PLAN_GRAD_AFTER_BACKWARD},
    {64, 4, 2, 2, 1, 1, 128, 1, PLAN_1F1B, PLAN_RECOMPUTE_NONE, PLAN_GRAD_OVERLAP}, /* MoE: ep 2 */
    {128, 1, 8, 1, 1, 1, 256, 3, PLAN_1F1B, PLAN_RECOMPUTE_FULL, PLAN_GRAD_OVERLAP},
};

Test(stepmodel, fast_path_equals_the_event_simulation, .timeout = 600) {
  static const char *const models[] = {"llama3-8b", "llama3-70b", "gpt3-175b", "mixtral-8x7b",
                                       "bert-large", "llama3-8b-hf-config", "llama3-405b"};
  hw_catalog *c = th_catalog();
  opcost *cache = opcost_new(OPCOST_IR);
  int compared = 0;
  double worst = 0, worst_coll = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    model *m = load(models[mi]);
    for (int h = 0; h < hw_catalog_count(c); h++) {
      const hw_model *hw = hw_catalog_at(c, h);
      for (size_t g = 0; g < sizeof GRID / sizeof *GRID; g++) {
        const grid_plan *q = &GRID[g];
        plan p = {.chips = q->chips, .tp = q->tp, .pp = q->pp, .ep = q->ep, .vp = q->vp,
                  .mbs = q->mbs, .gbs = q->gbs, .zero = q->zero, .slices = 1,
                  .schedule = q->sched, .recompute = q->rec, .grad_sync = q->sync,
                  .sp = q->tp > 1, .precision = plan_precision_on(hw, GDT_BF16),
                  .coll_costs = PLAN_COLL_FORMULA, .cost_cache = cache};
        char err[512];
        if (plan_check(m, hw, &p, err, sizeof err) != 0) continue; /* e.g. tp over heads */
        step_result costs, sim;
        step_times fast;
        if (step_costs(m, hw, &p, &costs, err, sizeof err) != 0) {
          /* a group the network cannot form (a TPU slice of 2): neither runs it */
          cr_assert_neq(step_simulate(m, hw, &p, NULL, &sim, NULL, err, sizeof err), 0);
          continue;
        }
        cr_assert_eq(step_fast(m, hw, &p, &costs, NULL, &fast, err, sizeof err), 0, "%s", err);
        cr_assert_eq(step_simulate(m, hw, &p, NULL, &sim, NULL, err, sizeof err), 0, "%s", err);
        double d = fabs(fast.step_time_s - sim.step_time_s) / sim.step_time_s;
        cr_assert(d < 0.005, "%s on %s, plan %zu: fast %.9g s, simulated %.9g s (%.3f%%)",
                  models[mi], hw->name, g, fast.step_time_s, sim.step_time_s, 100 * d);
        cr_assert(fabs(fast.breakdown_s.pipeline_bubble - sim.breakdown_s.pipeline_bubble) <=
                      1e-6 * sim.step_time_s,
                  "%s on %s, plan %zu: bubble", models[mi], hw->name, g);
        if (d > worst) worst = d;
        /* and with the collectives simulated: the one named difference */
        plan ps = p;
        ps.coll_costs = PLAN_COLL_SIMULATE;
        step_result s2;
        cr_assert_eq(step_simulate(m, hw, &ps, NULL, &s2, NULL, err, sizeof err), 0, "%s", err);
        double dc = fabs(fast.step_time_s - s2.step_time_s) / s2.step_time_s;
        if (dc > worst_coll) worst_coll = dc;
        if (getenv("STEPMODEL_VERBOSE") && dc > 0.02)
          fprintf(stderr, "  %s on %s plan %zu (dp %lld): fast %.4g, simulated collectives %.4g "
                          "(%.1f%%; all-reduce %.4g vs %.4g s)\n",
                  models[mi], hw->name, g, (long long)p.dp, fast.step_time_s, s2.step_time_s,
                  100 * dc, sim.dp_allreduce_s, s2.dp_allreduce_s);
        compared++;
      }
    }
    model_free(m);
  }
  opcost_free(cache);
  hw_catalog_free(c);
  cr_log_info("stepmodel: %d plans, fast vs event simulation: worst %.2e; with simulated "
              "collectives: worst %.2f%%", compared, worst, 100 * worst_coll);
  fprintf(stderr, "stepmodel: %d plans compared; fast path vs event simulation: worst %.2e; "
                  "with collectives simulated link by link: worst %.2f%%\n",
          compared, worst, 100 * worst_coll);
  cr_assert_gt(compared, 200, "the grid ran: %d plans", compared);
}

/* The schedule's direct evaluation (closed forms for one stage and GPipe,
** the periodic extrapolation of 1F1B and interleaved 1F1B, the full sweep
** past it) against the event engine, on 3000 random schedules: heavier
** first and last stages, sends from none to longer than a chunk. Every
** chip's last backward, every virtual stage's, and the end agree. */
Test(stepmodel, schedule_evaluation_equals_the_event_engine) {
  uint64_t x = 88172645463325252ull; /* xorshift: the same schedules every run */
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, (double)(x >> 11) / 9007199254740992.0)
  static const int64_t PPS[] = {1, 2, 3, 4, 8, 16};
  int checked = 0;
  for (int t = 0; t < 3000; t++) {
    sched_desc d = {.pp = PPS[(int)(RND() * 6)], .vp = 1};
    int kind = (int)(RND() * 3);
    d.schedule = kind == 0 ? PLAN_GPIPE : kind == 1 ? PLAN_1F1B : PLAN_INTERLEAVED;
    if (d.schedule == PLAN_INTERLEAVED) {
      if (d.pp == 1) continue;
      d.vp = 2 + (int64_t)(RND() * 3);
      d.M = d.pp * (1 + (int64_t)(RND() * 12));
    } else {
      d.M = 1 + (int64_t)(RND() * 60);
    }
    d.f_chunk = 0.1 + RND();
    d.b_chunk = 0.2 + 2 * RND();
    d.f_first = d.f_last = RND();
    d.b_first = d.b_last = 2 * RND();
    double r = RND();
    d.p2p_s = r < 0.2 ? 0 : r < 0.8 ? 0.05 * RND() * d.f_chunk : 2 * RND();
    sched_out a, b;
    char err[256];
    cr_assert_eq(sched_run(&d, &a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sched_eval(&d, &b, err, sizeof err), 0, "%s", err);
    double tol = 1e-9 * a.end_s;
    cr_assert(fabs(a.end_s - b.end_s) <= tol, "schedule %d (pp %lld V %lld M %lld kind %d): %.12g vs %.12g",
              t, (long long)d.pp, (long long)d.vp, (long long)d.M, kind, a.end_s, b.end_s);
    for (int64_t dev = 0; dev < d.pp; dev++) {
      cr_assert(fabs(a.last_b_end[dev] - b.last_b_end[dev]) <= tol, "schedule %d chip %lld", t,
                (long long)dev);
      cr_assert(fabs(a.busy_s[dev] - b.busy_s[dev]) <= tol, "schedule %d chip %lld busy", t,
                (long long)dev);
    }
    for (int64_t vs = 0; vs < d.pp * d.vp; vs++)
      cr_assert(fabs(a.vs_b_start[vs] - b.vs_b_start[vs]) <= tol, "schedule %d stage %lld", t,
                (long long)vs);
    sched_out_free(&a);
    sched_out_free(&b);
    checked++;
  }
  cr_assert_gt(checked, 2500);
#undef RND
}
