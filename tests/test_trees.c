/*
** test_trees.c -- issue #18, "Tree models": where a gradient-boosted model
** trains. Tree libraries run on CPUs and NVIDIA GPUs, never on TPUs; the
** histogram pass is memory-bound; a small job goes to the cheapest VM (the
** clouds bill a minute at least), a large one to a GPU's bandwidth.
** Nothing here codes a threshold: each lesson is read off the planner's own
** ranking and checked against the catalog's figures.
*/
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <criterion/criterion.h>

#include "../planner/planner.h"
#include "../planner/planner_int.h" /* planner_price_of, planner_min_billed_s */
#include "helpers.h"

/* a model at its own sequence length (helpers.c) */
static model *load(const char *src) { return th_model(src, 0); }

/* The default (cost) plan of a model file over the whole catalog. */
static void plan_of(const char *src, const hw_catalog *c, planner_result *r) {
  char err[512];
  model *m = load(src);
  planner_req q = {.max_chips = 64, .top = 5, .objective = planner_default_objective(m)};
  cr_assert_eq(q.objective, PLANNER_COST, "a gbdt plan minimises cost by default");
  cr_assert_eq(planner_run(m, c, &q, r, err, sizeof err), 0, "%s", err);
  model_free(m);
}

static const planner_cand *cand(const planner_result *r, const char *hw) {
  for (int i = 0; i < r->n_per_hw; i++)
    if (strcmp(r->per_hw[i].hw, hw) == 0) return &r->per_hw[i];
  cr_assert_fail("%s was not planned", hw);
  return NULL;
}

/* No TPU is a candidate: each is rejected as a chip the libraries lack. */
static void no_tpu(const planner_result *r, const hw_catalog *c) {
  for (int i = 0; i < r->n_per_hw; i++)
    cr_assert_neq(hw_catalog_find(c, r->per_hw[i].hw)->kind, HW_TPU, "%s", r->per_hw[i].hw);
  int tpus = 0;
  for (int i = 0; i < r->n_rejected; i++)
    if (strncmp(r->rejected[i].hw, "tpu-", 4) == 0) {
      tpus++;
      cr_assert(strstr(r->rejected[i].reason, "tree-boosting libraries"), "%s",
                r->rejected[i].reason);
    }
  cr_assert_geq(tpus, 5, "the catalog's five Cloud TPU generations are turned down");
}

/* 1M rows x 50 features x 100 trees (tests/data/models/gbdt-small.json)
** trains in seconds anywhere; billed a minute at least (AWS and GCP bill
** per second with a 60 s minimum), the VM with the lowest hourly price wins:
** cpu-m7i-2xl at $0.4032/h pays 0.4032 x 60/3600 = $0.00672. */
Test(trees, small_model_lands_on_the_cheapest_cpu_vm) {
  static planner_result r;
  hw_catalog *c = th_catalog();
  plan_of("tests/data/models/gbdt-small.json", c, &r);
  const hw_model *h = hw_catalog_find(c, r.best.hw);
  cr_assert_eq(h->kind, HW_CPU, "best %s", r.best.hw);
  cr_assert_lt(r.best.train_s, planner_min_billed_s(), "a run of seconds");
  cr_assert_float_eq(r.best.train_usd, h->price.on_demand_usd_per_chip_hour * 60 / 3600, 1e-9);
  /* the winner is the lowest price an hour among the candidates that also
  ** finish inside the minute: the threshold is the bill, not a coded size */
  for (int i = 0; i < r.n_per_hw; i++) {
    const planner_cand *o = &r.per_hw[i];
    const hw_model *oh = hw_catalog_find(c, o->hw);
    if (o->train_s < planner_min_billed_s())
      cr_assert_geq(oh->price.on_demand_usd_per_chip_hour * (double)o->billed_chips,
                    h->price.on_demand_usd_per_chip_hour, "%s", o->hw);
  }
  cr_assert(strstr(r.why, "A CPU is recommended"), "%s", r.why);
  cr_assert(strstr(r.why, "under the 60 s the clouds bill a VM at least"), "%s", r.why);
  no_tpu(&r, c);
  planner_result_free(&r);
  hw_catalog_free(c);
}

/* 50M rows x 200 features x 1000 trees (gbdt-large.json, the job issue
** #18 saw sent to a TPU v5e) runs for minutes to hours: then the bill is
** time x price and the histogram pass is memory-bound, so a GPU's memory
** bandwidth per dollar wins: a T4 (320 GB/s, $0.526/h) against the m7i VM's
** 25.6 GB/s share for $0.4032/h. */
Test(trees, large_model_lands_on_an_nvidia_gpu) {
  static planner_result r;
  hw_catalog *c = th_catalog();
  plan_of("tests/data/models/gbdt-large.json", c, &r);
  const hw_model *h = hw_catalog_find(c, r.best.hw);
  cr_assert_eq(h->kind, HW_GPU, "best %s", r.best.hw);
  cr_assert_str_eq(h->vendor, "NVIDIA");
  cr_assert_gt(r.best.train_s, planner_min_billed_s());
  /* the fastest candidate is an NVIDIA GPU too */
  const planner_cand *fast = &r.per_hw[0];
  for (int i = 0; i < r.n_per_hw; i++)
    if (r.per_hw[i].train_s < fast->train_s) fast = &r.per_hw[i];
  cr_assert_eq(hw_catalog_find(c, fast->hw)->kind, HW_GPU, "fastest %s", fast->hw);
  /* memory-bound: the CPU VM's time over the T4's is their bandwidth ratio,
  ** 3.2e11 / 2.56e10 = 12.5 (hw_models t4.json, cpu-m7i-2xl.json), within 10 % */
  const hw_model *t4 = hw_catalog_find(c, "t4"), *vm = hw_catalog_find(c, "cpu-m7i-2xl");
  double bw_ratio = t4->chip.hbm_bw_bytes_per_s / vm->chip.hbm_bw_bytes_per_s;
  double t_ratio = cand(&r, "cpu-m7i-2xl")->train_s / cand(&r, "t4")->train_s;
  cr_assert(t_ratio > 0.9 * bw_ratio && t_ratio < 1.1 * bw_ratio, "time ratio %g, bw %g", t_ratio,
            bw_ratio);
  cr_assert(strstr(r.why, "Building the histograms is memory-bound"), "%s", r.why);
  cr_assert(strstr(r.why, "t4 has 320 GB/s for $0.526 an hour"), "%s", r.why);
  no_tpu(&r, c);
  planner_result_free(&r);
  hw_catalog_free(c);
}

/* The minute minimum: a 10 s run is billed 60 s, a 600 s run 600 s
** (cpu-m7i-2xl, $0.4032/h, one VM). */
Test(trees, a_vm_is_billed_a_minute_at_least) {
  hw_catalog *c = th_catalog();
  model *m = load("tests/data/models/gbdt-small.json");
  const hw_model *vm = hw_catalog_find(c, "cpu-m7i-2xl");
  planner_req q = {.objective = PLANNER_COST};
  run_price shortp = planner_price_of(m, vm, &q, 1, 0.1, 100);
  run_price longp = planner_price_of(m, vm, &q, 1, 6.0, 100);
  cr_assert_float_eq(shortp.train_s, 10.0, 1e-9, "the time is not padded, only the bill");
  cr_assert_float_eq(shortp.train_usd, 0.4032 * 60 / 3600, 1e-12);
  cr_assert_float_eq(longp.train_usd, 0.4032 * 600 / 3600, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* ---- the rate model against published XGBoost timings ----
**
** szilard/GBM-perf times XGBoost (`tree_method=hist`, on CPU; `device=cuda`
** on GPU) on 10M rows of the airline data set, 100 trees of depth 10,
** binary:logistic (GBM-perf README, 2024-06; its issues #57 and #59). The
** data is one-hot encoded into ~670 sparse columns with 8 nonzeros a row
** (Month, DayofMonth, DayOfWeek, DepTime, UniqueCarrier, Origin, Dest,
** Distance): XGBoost's histograms visit the nonzeros only, so its dense
** equivalent here is 8 features of 256 bins (the model's 2048 bins a node
** against the data's ~1200 overstate only the small split search).
**
** The model is the histogram method's memory traffic plus, on a GPU, a
** launch per kernel at the chip's op_overhead_s, the sibling subtraction
** once per node as dmlc/xgboost src/tree/updater_gpu_hist.cu launches it.
** The published runs also pay what the model leaves out: quantizing the
** matrix (inside xgb.train's timer), XGBoost's histogram build per node
** (the model runs a level's as one kernel), the host round trip per batch
** of 32 nodes, atomics contending for the one-hot columns'
** few bins, and on the CPU a serial part (GBM-perf issues #56/#59: 16
** cores of the same 8488C take 22 s, 48 cores 19 s). So each published
** time is an upper bound on the model's; the model sits 1.4x (L4) to 6x
** (H100) below them at 10M rows. The other side, a tenth of each published
** time, is the stated tolerance that catches a model grown an order of
** magnitude too fast. */
/* The model's time for the 100 rounds over `rows` airline rows on one chip
** of hw. */
static double airline_rows_s(const char *hw, long rows) {
  char text[512];
  snprintf(text, sizeof text,
           "{\"name\": \"airline\", \"family\": \"gbdt\", \"rows\": %ld, \"features\": 8,"
           " \"trees\": 100, \"depth\": 10, \"bins\": 256, \"objective\": \"binary:logistic\","
           " \"train\": {\"global_batch\": %ld, \"precision\": \"fp32\", \"optimizer\": \"sgd\"}}",
           rows, rows);
  char name[96]; /* one file per test process: criterion runs tests in parallel */
  snprintf(name, sizeof name, "gbdt-airline-%ld-%s-%ld.json", (long)getpid(), hw, rows);
  const char *path = th_write_temp(name, text);
  th_run r = th_cli("simulate", path, "--hw", hw, "--chips", "1", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cJSON *j = cJSON_Parse(r.out);
  cr_assert_not_null(j, "simulate --json: %s", r.out);
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "step_time_s");
  cr_assert(cJSON_IsNumber(st), "no step_time_s");
  double s = st->valuedouble * 100; /* one step is one boosting round */
  cJSON_Delete(j);
  th_run_free(&r);
  return s;
}

static double airline_s(const char *hw) { return airline_rows_s(hw, 10000000); }

static void below_published_rows(const char *hw, long rows, double published_s,
                                 const char *where) {
  double s = airline_rows_s(hw, rows);
  cr_assert(s <= published_s && s >= published_s / 10,
            "%s: model %.3g s, published %.3g s (%s): the model must not be slower, "
            "nor 10x faster",
            hw, s, published_s, where);
}

static void below_published(const char *hw, double published_s, const char *where) {
  below_published_rows(hw, 10000000, published_s, where);
}

/* GBM-perf issue #59 (2024-06-17): c7i.metal-48xl, one socket of the Xeon
** Platinum 8488C, 48 cores: 19 s. cpu-spr is the 8480+ socket (56 cores)
** with the same eight DDR5-4800 channels, which set a memory-bound time. */
Test(trees, published_xgboost_hist_on_a_sapphire_rapids_socket) {
  below_published("cpu-spr", 19, "GBM-perf #59, c7i.metal-48xl 48 cores");
}

/* GBM-perf README, p3.2xlarge (V100), software of 2024-06-06, CUDA 12.5:
** 100K rows 0.7 s, 1M 1.3 s, 10M 5 s. */
Test(trees, published_xgboost_gpu_on_v100) {
  below_published_rows("v100", 100000, 0.7, "GBM-perf README, p3.2xlarge, 100K rows");
  below_published_rows("v100", 1000000, 1.3, "GBM-perf README, p3.2xlarge, 1M rows");
  below_published("v100", 5, "GBM-perf README, p3.2xlarge");
}

/* The same issue's smaller sizes on the 48-core socket: 100K rows 0.3 s,
** 1M 1.2 s. */
Test(trees, published_xgboost_hist_small_on_a_sapphire_rapids_socket) {
  below_published_rows("cpu-spr", 100000, 0.3, "GBM-perf #59, 100K rows");
  below_published_rows("cpu-spr", 1000000, 1.2, "GBM-perf #59, 1M rows");
}

/* The GPU's floor on small data: a depth-10 tree launches a subtraction
** kernel for each of its 1 + 2 + ... + 256 = 511 siblings (XGBoost's
** SubtractionTrick per node), each paying the V100's 3 us launch
** (hw_models/v100.json op_overhead_s): 511 x 3 us = 1.53 ms a round however
** few the rows, so 100 rounds of 1,000 rows take at least 0.153 s on the
** V100; the level-wide kernels (a few dozen a level) add less than as much
** again. A CPU socket has no launch cost in the catalog (XGBoost's CPU hist
** builds a level's nodes in one parallel loop): under half the floor.
** GBM-perf's V100 runs show such a floor: 100K rows 0.7 s, 10M rows 5 s. */
Test(trees, gpu_launch_floor_per_tree_node) {
  hw_catalog *c = th_catalog();
  double launch_s = th_hw(c, "v100")->chip.op_overhead_s;
  cr_assert_float_eq(launch_s, 3e-6, 1e-12, "the V100's launch cost changed: rederive");
  double floor_s = 100 * 511 * launch_s;
  double gpu = airline_rows_s("v100", 1000), cpu = airline_rows_s("cpu-spr", 1000);
  cr_assert(gpu >= floor_s && gpu < 2 * floor_s, "v100 %g s, launch floor %g s", gpu, floor_s);
  cr_assert_lt(cpu, floor_s / 2, "cpu-spr %g s", cpu);
  hw_catalog_free(c);
}

/* GBM-perf issue #57 (2024-06-08): A10 5 s, L4 6 s, A100 3.7 s, H100 3.6 s. */
Test(trees, published_xgboost_gpu_on_a10g_l4_a100_h100) {
  below_published("a10g", 5, "GBM-perf #57, g5 A10G");
  below_published("l4", 6, "GBM-perf #57, g6 L4");
  below_published("a100-40g", 3.7, "GBM-perf #57, p4d A100");
  below_published("h100-sxm", 3.6, "GBM-perf #57, p5 H100");
}

/* What the published set teaches that the model reproduces only in part:
** GPU time barely follows memory bandwidth (H100 3.35 TB/s against V100's
** 0.9 TB/s: 3.6 s against 5 s, 1.4x), so per-node work, not bandwidth,
** dominates at this size. The model's launches per node (half of
** XGBoost's) pull its ratio below the bandwidth ratio; this test bounds it
** between the published ratio and the bandwidth ratio x 1.1 (modelling
** the rest of the per-node costs would lower it toward 1.4, still passing). */
Test(trees, gpu_speedup_between_published_and_bandwidth_ratio) {
  hw_catalog *c = th_catalog();
  double bw = th_hw(c, "h100-sxm")->chip.hbm_bw_bytes_per_s / th_hw(c, "v100")->chip.hbm_bw_bytes_per_s;
  double model = airline_s("v100") / airline_s("h100-sxm");
  cr_assert(model >= 5.0 / 3.6 && model <= 1.1 * bw, "model V100/H100 %.3g, published %.3g, bw %.3g",
            model, 5.0 / 3.6, bw);
  hw_catalog_free(c);
}
