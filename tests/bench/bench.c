/*
** bench.c -- `make bench`: speed targets as rates and ratios, never as
** pass/fail timings in the unit tests (shared 2-core machines are noisy).
**
**   engine events per second (target: >= 5 million on one core)
**   1 GiB all-reduce over 4096 TPU v5p chips (target: simulated in < 1 s)
**   1 GiB all-reduce at 4k, 64k and 1M chips, v5p torus (slices over DCN
**   above 6,144) and H100 NVSwitch + IB: the answer, simulated under the
**   budget (coll.h), closed form above (targets: < 1 s simulated, < 0.1 s
**   closed form, each including net_build)
**   one step of gpt3-175b on 1024 A100s, TP 8, PP 8, DP 16, 1F1B (target: < 1 s)
**   a full-catalog plan for llama3.1-405b (tests/data/hf) up to 4,096 chips
**   over the whole space (target: < 10 s on 2 cores), the analytic path's
**   rate (target: 1,000,000 evaluations per second per core), the example
**   llama3-405b's plan (the same targets), and what costing kernels from
**   their LLVM IR adds over the formulas
**
**   One "evaluation" is one complete, distinct plan (hardware, chips, tp,
**   pp and its stage split, V, dp, cp, ep, etp, micro-batch, recompute,
**   ZeRO stage and HSDP group, offload) checked by the memory model the
**   planner ranks with (sim/memory's peak against the chip's HBM) and,
**   when it fits, timed by the same fast path (step_fast): each plan is
**   counted once; plans a proven bound left out are not counted, nor are
**   repeats. The rate divides by the search threads' CPU time less the
**   per-chip cost builds (reported apart: they are shared by every plan
**   of a size set, and the wall time includes them).
**   lowering and IR-costing every distinct op of llama3-70b's step (target: < 2 s)
*/
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "../../hw_models/hw_catalog.h"
#include "../../cli/cli.h"
#include "../../sim/coll.h"
#include "../../sim/engine.h"
#include "../../sim/net.h"
#include "../../sim/step.h"
#include "../../planner/planner.h"
#include "../../base/units.h"

static double now_s(void) { return units_now_s(); }

/* The process's CPU seconds (every thread): on a shared machine the wall
** time of a search stretches with the load; its CPU time over the cores
** it may use is what it would take alone on them. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* A plan's analytic rate: evaluations (see the top) per CPU second of
** scoring. */
static void print_rate(const planner_result *r) {
  printf("  analytic path: %.0f evaluations per second per core (target >= 1,000,000; an "
         "evaluation: one distinct complete plan through the memory model and, if it fits, the "
         "fast path; %lld of the %lld fitted and were timed): %.3f CPU s scoring, %.2f CPU s "
         "building per-chip costs, %.2f CPU s simulating the top %d\n",
         r->scoring_s > 0 ? (double)r->evaluated / r->scoring_s : 0, (long long)r->timed,
         (long long)r->evaluated, r->scoring_s, r->costs_s, r->simulate_s, r->n_ranked);
}

/* Each event schedules the next a pseudo-random distance ahead, with 1024
** in flight: the heap works at a realistic depth. */
static void hop(eng *e, void *ctx, int64_t arg) {
  int64_t *left = ctx;
  if (--*left <= 0) return;
  uint64_t x = (uint64_t)arg * 6364136223846793005ULL + 1442695040888963407ULL;
  eng_at(e, eng_now(e) + 1e-9 * (double)(x >> 40), hop, ctx, (int64_t)(x >> 1));
}

int main(void) {
  eng *e = eng_new();
  int64_t left = 10 * 1000 * 1000;
  for (int i = 0; i < 1024; i++) eng_at(e, 0, hop, &left, i);
  double t0 = now_s();
  int64_t ran = eng_run(e);
  double dt = now_s() - t0;
  printf("engine: %.2f million events/s (%lld events in %.3f s; target >= 5)\n",
         (double)ran / dt / 1e6, (long long)ran, dt);
  eng_free(e);

  diag *d = diag_new();
  hw_catalog *cat = hw_catalog_new();
  if (hw_catalog_load_builtin(cat, d) != 0) return 1;
  char err[512];
  net *n = net_build(hw_catalog_find(cat, "tpu-v5p"), 4096, 1, err, sizeof err);
  if (!n) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  coll_req r = {.op = COLL_ALL_REDUCE, .algo = COLL_TORUS, .bytes = 1 << 30, .axis = -1};
  coll_result out;
  t0 = now_s();
  if (coll_run(n, &r, &out, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  dt = now_s() - t0;
  printf("all-reduce 1 GiB over 4096 tpu-v5p: simulated in %.3f s (target < 1 s), %lld events "
         "(%.2f million/s); predicted %.3f ms, busbw %.1f GB/s\n",
         dt, (long long)out.events, (double)out.events / dt / 1e6, out.time_s * 1e3,
         out.busbw / 1e9);
  net_free(n);

  static const char *const SCALE_HW[] = {"tpu-v5p", "h100-sxm"};
  static const int64_t SCALE_CHIPS[] = {4096, 65536, 1000000};
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 3; i++) {
      t0 = now_s();
      net *sn = net_build(hw_catalog_find(cat, SCALE_HW[h]), SCALE_CHIPS[i], 1, err, sizeof err);
      coll_req sr_ = {.op = COLL_ALL_REDUCE, .algo = COLL_AUTO, .bytes = 1 << 30, .axis = -1};
      if (!sn || coll_run(sn, &sr_, &out, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
      }
      dt = now_s() - t0;
      bool sim = out.events > 0;
      printf("all-reduce 1 GiB over %lld %s (%lld slices/nodes): %.4f s (target < %s), %s; "
             "predicted %.3f ms\n",
             (long long)SCALE_CHIPS[i], SCALE_HW[h],
             (long long)(net_chips(sn) / net_chips_per_node(sn)), dt, sim ? "1 s" : "0.1 s",
             sim ? "simulated" : "closed form", out.time_s * 1e3);
      net_free(sn);
    }

  t0 = now_s();
  model_opts mo = {.seq_len = 2048};
  model *m = model_load("gpt3-175b", &mo, d);
  plan p = {.chips = 1024, .tp = 8, .pp = 8, .dp = 16, .ep = 1, .mbs = 1, .gbs = 1536, .seq = 2048,
            .vp = 1, .slices = 1, .schedule = PLAN_1F1B, .precision = GDT_BF16};
  step_result sr;
  const hw_model *a100 = hw_catalog_find(cat, "a100-80g");
  if (!m || plan_check(m, a100, &p, err, sizeof err) != 0 ||
      step_simulate(m, a100, &p, NULL, &sr, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", m ? err : "cannot load gpt3-175b");
    return 1;
  }
  dt = now_s() - t0;
  printf("simulate gpt3-175b on 1024 a100-80g (tp 8, pp 8, dp 16, 1f1b): %.3f s (target < 1 s); "
         "predicted step %.2f s, MFU %.1f%%\n",
         dt, sr.step_time_s, 100 * sr.mfu);
  model_free(m);

  /* the whole space (issue 17): every tp, pp, V, micro-batch, ZeRO/HSDP,
  ** offload, pruned by proven bounds (the same best plan as --exhaustive) */
  model *big = model_load("tests/data/hf/llama3.1-405b.json", NULL, d);
  static planner_result pr;
  planner_req req = {.max_chips = 4096, .tokens = 15e12, .top = 5};
  t0 = now_s();
  double c0 = cpu_s();
  if (!big || planner_run(big, cat, &req, &pr, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", big ? err : "cannot load tests/data/hf/llama3.1-405b.json");
    return 1;
  }
  dt = now_s() - t0;
  double dc = cpu_s() - c0;
  printf("plan llama3.1-405b (HF config), whole catalog, up to 4096 chips: %.2f s (target < 10 s on "
         "2 cores; %.2f CPU s: at least %.2f s on 2 free cores), %lld plans evaluated and %lld bounded out, "
         "%lld per-chip cost builds, %d simulations\n",
         dt, dc, dc / 2, (long long)pr.evaluated, (long long)pr.pruned, (long long)pr.cost_builds,
         pr.n_ranked);
  print_rate(&pr);
  {
    model *ex = model_load("llama3-405b", NULL, d);
    static planner_result px;
    double tx = now_s(), cx = cpu_s();
    if (!ex || planner_run(ex, cat, &req, &px, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", ex ? err : "cannot load llama3-405b");
      return 1;
    }
    double dx = cpu_s() - cx;
    printf("plan llama3-405b (the example: 126 layers, gbs 2048), whole catalog, up to 4096 "
           "chips: %.2f s (target < 10 s on 2 cores; %.2f CPU s: at least %.2f s on 2 free cores), %lld "
           "plans evaluated, %lld bounded out\n",
           now_s() - tx, dx, dx / 2, (long long)px.evaluated, (long long)px.pruned);
    print_rate(&px);
    planner_result_free(&px);
    model_free(ex);
  }
  /* the process's peak so far: the plan is the largest thing bench has run */
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("  peak memory of the process after the plan: %.0f MB (target < 200 MB)\n",
         (double)ru.ru_maxrss / 1024);
  /* the same plan from the graph's formulas: what reading costs off the
  ** IR adds (each kernel signature lowered once, shared by every plan) */
  const opcost_stats *st = &pr.best.sim.op_costs;
  printf("  kernel costs from LLVM IR: %lld signatures lowered, %lld kernels served from the "
         "cache, %lld differing from the formulas (target 0)\n",
         (long long)st->lowered, (long long)st->hits, (long long)st->differ);
  static planner_result pf;
  planner_req freq = req;
  freq.op_costs = OPCOST_FORMULA;
  double tf0 = now_s();
  if (planner_run(big, cat, &freq, &pf, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  double dtf = now_s() - tf0;
  printf("  the same plan from the formulas: %.2f s; IR costs take %.2fx its time, same best "
         "plan: %s\n", dtf, dt / dtf,
         pf.best.sim.step_time_s == pr.best.sim.step_time_s ? "yes" : "NO");
  model_free(big);

  /* through the command itself: load, lower each distinct op once, count */
  FILE *sink = fopen("/dev/null", "w");
  char *largv[] = {"tpusim", "lower", "llama3-70b", "--json", NULL};
  t0 = now_s();
  int lrc = sink ? cli_main(4, largv, sink, stderr) : 1;
  dt = now_s() - t0;
  if (sink) fclose(sink);
  if (lrc != 0) {
    fprintf(stderr, "tpusim lower llama3-70b failed (%d)\n", lrc);
    return 1;
  }
  printf("lower llama3-70b: every distinct op lowered to LLVM IR and costed in %.3f s "
         "(target < 2 s)\n", dt);
  hw_catalog_free(cat);
  diag_free(d);
  return 0;
}
