/*
** test_hw_serving.c -- the inference hardware of issue 19: T4, L4, A10G
** and the Edge TPU load with their published figures; an edge part may be
** int8-only and unpriced, a rented chip may not; training is refused on an
** edge part with its reason.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../base/csv.h"
#include "../hw_models/hw_catalog.h"
#include "../sim/plan.h"
#include "../workloads/model.h"
#include "helpers.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* NVIDIA's T4 launch figures (dense; Turing has no sparsity): 8.1 TFLOPS
** fp32, 65 fp16, 130 TOPS int8, 260 int4; 16 GB GDDR6 at 320 GB/s, 70 W
** (T4 product brief). No bf16, tf32 or fp8 unit on Turing. */
Test(hw_serving, t4_published_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "t4");
  cr_assert_float_eq(hw_peak_flops(m, HW_FP16), 65e12, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_INT8), 130e12, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_INT4), 260e12, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP32), 8.1e12, 1e9);
  cr_assert_eq(hw_peak_flops(m, HW_BF16), 0);
  cr_assert_eq(hw_peak_flops(m, HW_FP8), 0);
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 320e9, 1e6);
  cr_assert_eq(m->chip.hbm_bytes, (int64_t)(16 * GIB)); /* AWS lists 16384 MiB */
  cr_assert_float_eq(m->chip.tdp_w, 70, 1e-9);
  hw_catalog_free(c);
}

/* L4 data sheet: 24 GB at 300 GB/s, 72 W; its tensor rates are quoted
** with 2:4 sparsity, the dense ones are half: fp8 485 -> 242.5 TFLOPS,
** bf16 242 -> 121. AWS lists 22888 MiB = 24.0e9 B for the g6 L4. */
Test(hw_serving, l4_published_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "l4");
  cr_assert_float_eq(hw_peak_flops(m, HW_FP8), 485e12 / 2, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 242e12 / 2, 1e9);
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 300e9, 1e6);
  cr_assert_eq(m->chip.hbm_bytes, 22888LL << 20);
  cr_assert(m->chip.hbm_bytes > 23.99e9 && m->chip.hbm_bytes < 24.01e9); /* "24 GB" */
  cr_assert_float_eq(m->chip.tdp_w, 72, 1e-9);
  hw_catalog_free(c);
}

/* A10G (Baseten's A10 vs A10G): the A10's 24 GB at 600 GB/s, but about 70
** dense fp16 TFLOPS against the A10's 125 (a measured 69.5 TFLOPS fp16
** matmul bounds it from below). */
Test(hw_serving, a10g_published_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "a10g");
  cr_assert_eq(m->chip.hbm_bytes, 22888LL << 20);
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 600e9, 1e6);
  cr_assert_geq(hw_peak_flops(m, HW_FP16), 69.47e12);
  cr_assert_lt(hw_peak_flops(m, HW_FP16), 125e12);
  cr_assert_eq(hw_peak_flops(m, HW_FP8), 0); /* Ampere: no fp8 */
  hw_catalog_free(c);
}

/* The three are rented one GPU per VM (g4dn.xlarge, g6.xlarge,
** g5.xlarge): a one-chip node and instance, on-demand above spot. */
Test(hw_serving, single_gpu_rentals) {
  hw_catalog *c = th_catalog();
  static const char *const names[] = {"t4", "l4", "a10g"};
  static const double on_demand[] = {0.526, 0.8048, 1.006}; /* AWS us-east-1 list */
  for (int i = 0; i < 3; i++) {
    const hw_model *m = th_hw(c, names[i]);
    cr_assert_eq(m->kind, HW_GPU, "%s", names[i]);
    cr_assert_eq(m->price.chips_per_instance, 1, "%s", names[i]);
    cr_assert_eq(m->chips_per_node, 1, "%s", names[i]);
    cr_assert_float_eq(m->price.on_demand_usd_per_chip_hour, on_demand[i], 1e-9, "%s", names[i]);
    cr_assert_lt(m->price.spot_usd_per_chip_hour, m->price.on_demand_usd_per_chip_hour);
  }
  hw_catalog_free(c);
}

/* Coral: 4 TOPS int8 at 2 W (2 TOPS per watt), roughly 8 MB of on-chip
** SRAM for the parameters, nothing but int8; bought, not rented. */
Test(hw_serving, edge_tpu_published_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "edge-tpu");
  cr_assert_eq(m->kind, HW_EDGE);
  cr_assert_str_eq(hw_kind_name(m->kind), "edge");
  cr_assert_float_eq(hw_peak_flops(m, HW_INT8), 4e12, 1e6);
  cr_assert_float_eq(hw_peak_flops(m, HW_INT8) / m->chip.tdp_w, 2e12, 1e6);
  for (int d = 0; d < HW_DTYPE_COUNT; d++)
    if (d != HW_INT8) cr_assert_eq(hw_peak_flops(m, (hw_dtype)d), 0, "%s", hw_dtype_name((hw_dtype)d));
  cr_assert_eq(m->chip.onchip_bytes, 8LL << 20);
  cr_assert_eq(m->price.on_demand_usd_per_chip_hour, 0);
  cr_assert_not(m->present[hw_field_find("price.on_demand_usd_per_chip_hour")]);
  hw_catalog_free(c);
}

/* phone-cpu: the Dimensity 9300's four Cortex-X4 cores, one at 3.25 GHz
** and three at 2.85 GHz (MediaTek launch specs), 4 x 128-bit vector pipes
** each (Arm Cortex-X4 optimization guide). Hand-derived peaks: fp32 FMA =
** 4 pipes x 4 lanes x 2 = 32 FLOP/cycle/core, fp16 twice that, int8 SDOT
** = 4 pipes x 16 MACs x 2 = 128 ops/cycle/core, times the summed core
** clocks 3.25 + 3 x 2.85 = 11.8 GHz. LPDDR5T 9600 MT/s x 64 bit = 76.8
** GB/s; the test device had 16 GB. Bought, not rented. */
Test(hw_serving, phone_cpu_derived_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "phone-cpu");
  const double core_hz = 3.25e9 + 3 * 2.85e9;
  cr_assert_eq(m->kind, HW_EDGE);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP32), 32 * core_hz, 1e6);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP16), 64 * core_hz, 1e6);
  cr_assert_float_eq(hw_peak_flops(m, HW_INT8), 128 * core_hz, 1e6);
  cr_assert_eq(hw_peak_flops(m, HW_FP8), 0);
  cr_assert_eq(m->chip.mu_cores * m->chip.mu_units_per_core, 4 * 4); /* 4 cores x 4 pipes */
  cr_assert_float_eq(m->chip.clock_hz * 4, core_hz, 1e3);            /* the mean clock */
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 9600e6 * 64 / 8, 1e3);
  cr_assert_eq(m->chip.hbm_bytes, 16LL << 30);
  cr_assert_not(m->present[hw_field_find("price.on_demand_usd_per_chip_hour")]);
  hw_catalog_free(c);
}

/* phone-npu: Apple's A17 Pro Neural Engine, "35 trillion operations per
** second" on 16 cores (Apple, Sept. 2023; the A16 had 17). Apple states no
** precision: the entry takes int8 (coremltools: int8-int8 compute on the
** Neural Engine from the iPhone 15 Pro) and enters no other dtype. It
** shares the iPhone 15 Pro's 8 GB LPDDR5 (Xcode 15 RC); 6400 MT/s x 64 bit
** = 51.2 GB/s is the A16's LPDDR5-6400 (die analysis), assumed kept. */
Test(hw_serving, phone_npu_published_figures) {
  hw_catalog *c = th_catalog();
  const hw_model *m = th_hw(c, "phone-npu");
  cr_assert_eq(m->kind, HW_EDGE);
  cr_assert_float_eq(hw_peak_flops(m, HW_INT8), 35e12, 1e6);
  for (int d = 0; d < HW_DTYPE_COUNT; d++)
    if (d != HW_INT8) cr_assert_eq(hw_peak_flops(m, (hw_dtype)d), 0, "%s", hw_dtype_name((hw_dtype)d));
  cr_assert_eq(m->chip.mu_cores, 16);
  /* the assumed 16 x (32x32 MAC) array at the entry's clock gives the 35 TOPS */
  cr_assert_float_eq(16.0 * m->chip.tile_m * m->chip.tile_n * 2 * m->chip.clock_hz, 35e12, 0.01e12);
  cr_assert_eq(m->chip.hbm_bytes, 8LL << 30);
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 6400e6 * 64 / 8, 1e3);
  /* a phone NPU streams weights from the phone's DRAM: decode is bandwidth
  ** bound, far below the int8 peak (ridge 35e12 / 51.2e9 = 684 ops/B) */
  cr_assert_gt(hw_peak_flops(m, HW_INT8) / m->chip.hbm_bw_bytes_per_s, 600);
  cr_assert_not(m->present[hw_field_find("price.on_demand_usd_per_chip_hour")]);
  hw_catalog_free(c);
}

/* The two phone entries describe one class of device: the NPU's int8
** peak is an order of magnitude above the CPU cluster's (35 vs 1.5 TOPS),
** and both have tens of GB/s of LPDDR, not HBM. */
Test(hw_serving, phone_npu_outruns_phone_cpu) {
  hw_catalog *c = th_catalog();
  const hw_model *cpu = th_hw(c, "phone-cpu"), *npu = th_hw(c, "phone-npu");
  cr_assert_gt(hw_peak_flops(npu, HW_INT8), 10 * hw_peak_flops(cpu, HW_INT8));
  cr_assert(cpu->chip.hbm_bw_bytes_per_s < 100e9 && npu->chip.hbm_bw_bytes_per_s < 100e9);
  hw_catalog_free(c);
}

Test(hw_serving, int4_is_a_dtype_key) {
  cr_assert_eq(hw_dtype_parse("int4"), HW_INT4);
  cr_assert_str_eq(hw_dtype_name(HW_INT4), "int4");
  cr_assert_geq(hw_field_find("chip.peak_flops_per_s.int4"), 0);
}

static hw_model *load_text(const char *text, diag **d) {
  *d = diag_new();
  return hw_load("x.json", text, strlen(text), *d);
}

/* Whether any reported message holds want. */
static bool diag_has(const diag *d, const char *want) {
  for (int i = 0; i < diag_count(d); i++)
    if (strstr(diag_message(d, i), want)) return true;
  return false;
}

/* Leaving the price out is an edge part's right only: a rented chip
** without one is refused at the missing field, with the reason. */
Test(hw_serving, only_an_edge_part_may_omit_its_price) {
  char *gpu = th_replace(th_builtin_text("t4"), "\"price\": {", "\"unpriced\": {");
  diag *d;
  hw_model *m = load_text(gpu, &d);
  cr_assert_null(m);
  cr_assert(diag_has(d, "missing section 'price'") || diag_has(d, "only an edge part may leave"),
            "%s", diag_count(d) ? diag_message(d, 0) : "(no message)");
  diag_free(d);
  free(gpu);
}

/* An int8-only file must say it is an edge part: a GPU kind needs a float
** unit (training and the 16-bit ranking read one). */
Test(hw_serving, int8_only_needs_kind_edge) {
  char *k = th_replace(th_builtin_text("edge-tpu"), "\"kind\": \"edge\"", "\"kind\": \"gpu\"");
  /* priced like a rented part, so that only the dtype rule is left to fail */
  char *t = th_replace(k, "\"sources\": {",
                       "\"price\": {\"on_demand_usd_per_chip_hour\": 1, \"spot_usd_per_chip_hour\": 1, "
                       "\"read_on\": \"2026-12-03\", \"basis\": \"test\"}, \"sources\": {");
  free(k);
  diag *d;
  hw_model *m = load_text(t, &d);
  cr_assert_null(m);
  cr_assert(diag_has(d, "an int8-only part is kind \"edge\""), "%s",
            diag_count(d) ? diag_message(d, 0) : "(no message)");
  diag_free(d);
  free(t);
}

/* Coral FAQ: the Edge TPU "is primarily intended for model inferencing";
** no backward pass or optimizer runs on it, so training is refused with
** the reason, and the T4 (fp16 tensor cores) is not. */
Test(hw_serving, training_refused_on_edge_parts) {
  hw_catalog *c = th_catalog();
  model *m = th_model("mlp", 0);
  char why[512];
  cr_assert_eq(plan_hw_supports(m, th_hw(c, "edge-tpu"), why, sizeof why), -1);
  cr_assert(strstr(why, "edge inference part") && strstr(why, "no training support"), "%s", why);
  /* the phone entries are kind "edge" too: refused with the same reason */
  static const char *const phones[] = {"phone-cpu", "phone-npu"};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(plan_hw_supports(m, th_hw(c, phones[i]), why, sizeof why), -1, "%s", phones[i]);
    cr_assert(strstr(why, "edge inference part"), "%s", why);
  }
  cr_assert_eq(plan_hw_supports(m, th_hw(c, "t4"), why, sizeof why), 0, "%s", why);
  model_free(m);
  hw_catalog_free(c);
}

/* ---- tests/validation/serving-runs.csv ---- */

#define SR_FIELDS 15

/* Every row names a catalog chip and a model that loads, one of the six
** metrics with a positive value, a source with an address; chips =
** tp x (data-parallel replicas). The issue asks for at least 12 rows from
** 3 independent sources on 3 chips: counted here by source address. */
Test(hw_serving, serving_runs_csv_is_well_formed, .timeout = 120) {
  csv_table t;
  diag *dg = diag_new();
  const csv_limits lim = {16u << 20, 10000, 64, "test"};
  cr_assert_eq(csv_read(&t, "tests/validation/serving-runs.csv", "serving runs", &lim, dg), 0,
               "run the tests from the repository root: %s", diag_count(dg) ? diag_message(dg, 0) : "");
  diag_free(dg);
  hw_catalog *c = th_catalog();
  static const char *const metrics[] = {"ttft_s", "tpot_s", "prefill_tokens_per_s",
                                        "decode_tokens_per_s", "output_tokens_per_s", "samples_per_s"};
  char hosts[16][64], chips_seen[16][32];
  int n_hosts = 0, n_chips = 0, rows = 0;
  for (int r = 0; r < t.n_recs; r++) {
    const char *f[SR_FIELDS];
    cr_assert_eq(t.recs[r].n, SR_FIELDS, "row %d: %d fields", rows, t.recs[r].n);
    for (int k = 0; k < SR_FIELDS; k++) f[k] = csv_at(&t, r, k)->s;
    if (rows++ == 0) {
      cr_assert_str_eq(f[0], "id");
      cr_assert_str_eq(f[14], "notes");
      continue;
    }
    const hw_model *hw = hw_catalog_find(c, f[2]);
    cr_assert_not_null(hw, "%s: unknown hw %s", f[0], f[2]);
    model *m = th_model(f[1], 0);
    model_free(m);
    int chips = atoi(f[3]), tp = atoi(f[4]);
    cr_assert(chips >= 1 && tp >= 1 && chips % tp == 0, "%s: chips %d, tp %d", f[0], chips, tp);
    int known = 0;
    for (int i = 0; i < 6; i++) known |= strcmp(f[10], metrics[i]) == 0;
    cr_assert(known, "%s: metric %s", f[0], f[10]);
    cr_assert_gt(atof(f[11]), 0, "%s", f[0]);
    cr_assert_geq(hw_dtype_parse(f[5]), 0, "%s: weight_dtype %s", f[0], f[5]);
    const char *url = strstr(f[13], "<http");
    cr_assert_not_null(url, "%s: source has no address", f[0]);
    /* host/owner/repo of the address: the independent source */
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)strcspn(url + 9, " >"), url + 9);
    char *cut = host;
    for (int slash = 0; *cut && slash < 3; cut++) slash += *cut == '/';
    if (*cut) *cut = '\0';
    int seen = 0;
    for (int i = 0; i < n_hosts; i++) seen |= strcmp(hosts[i], host) == 0;
    if (!seen && n_hosts < 16) snprintf(hosts[n_hosts++], 64, "%s", host);
    seen = 0;
    for (int i = 0; i < n_chips; i++) seen |= strcmp(chips_seen[i], f[2]) == 0;
    if (!seen && n_chips < 16) snprintf(chips_seen[n_chips++], 32, "%s", f[2]);
  }
  cr_assert_geq(rows - 1, 12);
  cr_assert_geq(n_hosts, 3, "%d independent sources", n_hosts);
  cr_assert_geq(n_chips, 3, "%d chips", n_chips);
  hw_catalog_free(c);
  csv_free(&t);
}
