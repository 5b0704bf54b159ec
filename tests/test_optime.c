/*
** test_optime.c -- time of one op on one chip (sim/optime.h).
**
** Hand-derived times from the roofline formulas of docs/machine.md, the
** measured MAMF matmul throughputs of shared/reference A.7 (stas00/
** ml-engineering @ 744d01e1), padding and wave quantization on odd shapes,
** memory-bound elementwise ops, unsupported dtypes, and monotonicity.
** Reference measurements are written out here, not read from the hardware
** files, so a changed figure in a file shows up as a failure.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/optime.h"
#include "helpers.h"

#define SHAPE GRAPH_SHAPE

static hw_catalog *catalog(void) { return th_catalog(); }
static const hw_model *chip(const hw_catalog *c, const char *name) { return th_hw(c, name); }

static void near_rel(double got, double want, double rel, const char *what) {
  cr_assert(fabs(got - want) <= rel * fabs(want), "%s: got %.12g, want %.12g (rel %.3g)", what, got,
            want, rel);
}

static optime_result mm(const hw_model *m, int64_t b, int64_t M, int64_t N, int64_t K,
                        graph_dtype dt) {
  optime_result r;
  char err[256] = "";
  int rc = optime_matmul(m, b, M, N, K, dt, &r, err, sizeof err);
  cr_assert_eq(rc, 0, "%s: %s", m->name, err);
  return r;
}

/* The chip as the tile and wave model times it: without its measured
** table by shape (chip.matmul_shape), as a chip that has none (A100, the
** TPUs) and a grouped expert GEMM are timed. */
static hw_model wave_only(const hw_model *m) {
  hw_model w = *m;
  w.chip.has_matmul_shape = false;
  return w;
}

/* ---- hand-derived times ---- */

/* H100, bf16 8192^3, on the tile and wave model: 8192/128 x 8192/256 = 2048
** output tiles over 132 SMs: 16 waves (15.5 rounded up), so the tensor cores
** are busy 2048/2112 of the time: compute = 2*8192^3 * (16*132/2048) / (989e12
** * 0.803). Memory (3 x 8192^2 x 2 B over 3.35 TB/s x the measured 0.896 =
** 134 us) hides under it; + 3 us launch. With the chip's measured table
** (h100-sxm.json chip.matmul_shape): 8192 columns past the grid's 4096 fold
** into 16384 rows, K clamps at 4096, so the cell 16384 x 4096 x 4096 -- the
** table's b 4 x 4096 x 4096 x 4096 row alone, 788.70 TFLOP/s, over its best
** cell 16384 x 2048 x 4096 (b 4 x 4096 x 2048 x 4096, 804.72) = 0.9801: the
** FLOPs at 989e12 x 0.803 x 0.9801, the launch inside the measured time. */
Test(optime, h100_8192_cubed_bf16_hand_derived) {
  hw_catalog *c = catalog();
  hw_model w = wave_only(chip(c, "h100-sxm"));
  optime_result r = mm(&w, 1, 8192, 8192, 8192, GDT_BF16);
  double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  double compute = flops * (16.0 * 132.0 / 2048.0) / (989e12 * 0.803);
  near_rel(r.flops, flops, 1e-15, "flops");
  near_rel(r.padded_flops, flops, 1e-15, "padded flops (all dims are tile multiples)");
  near_rel(r.compute_s, compute, 1e-9, "compute");
  near_rel(r.memory_s, 3.0 * 8192 * 8192 * 2 / (3.35e12 * 0.896), 1e-9, "memory");
  near_rel(r.time_s, compute + 3e-6, 1e-9, "time");
  cr_assert_str_eq(r.bound, "compute");
  optime_result t = mm(chip(c, "h100-sxm"), 1, 8192, 8192, 8192, GDT_BF16);
  near_rel(788.70 / 804.72, 0.9801, 5e-5, "the cell, from the table's rows");
  near_rel(t.compute_s, flops / (989e12 * 0.803 * 0.9801), 1e-9, "compute, measured table");
  near_rel(t.time_s, t.compute_s, 1e-15, "time: the launch is in the measured kernel time");
  hw_catalog_free(c);
}

/* With the output tiles a whole number of waves (8448/128 x 512/256 = 132
** tiles = one wave on 132 SMs) the wave model's time is exactly 2MNK /
** (peak x MAMF efficiency) + the launch overhead. */
Test(optime, h100_whole_wave_is_peak_times_efficiency) {
  hw_catalog *c = catalog();
  hw_model w = wave_only(chip(c, "h100-sxm"));
  optime_result r = mm(&w, 1, 8448, 512, 8192, GDT_BF16);
  double flops = 2.0 * 8448 * 512 * 8192;
  near_rel(r.time_s, flops / (989e12 * 0.803) + 3e-6, 1e-9, "time");
  near_rel(r.efficiency, flops / (r.time_s * 989e12), 1e-12, "efficiency");
  cr_assert(r.efficiency < 0.803 && r.efficiency > 0.77, "%g", r.efficiency);
  hw_catalog_free(c);
}

/* A100 80GB, bf16 4096^3: 32 x 32 = 1024 tiles (128x128) over 108 SMs = 10
** waves; HBM2e at 2.039 TB/s x the measured 0.883. */
Test(optime, a100_4096_cubed_bf16_hand_derived) {
  hw_catalog *c = catalog();
  optime_result r = mm(chip(c, "a100-80g"), 1, 4096, 4096, 4096, GDT_BF16);
  double compute = 2.0 * 4096.0 * 4096.0 * 4096.0 * (10.0 * 108.0 / 1024.0) / (312e12 * 0.869);
  near_rel(r.compute_s, compute, 1e-9, "compute");
  near_rel(r.memory_s, 3.0 * 4096 * 4096 * 2 / (2.039e12 * 0.883), 1e-9, "memory");
  near_rel(r.time_s, compute + 3e-6, 1e-9, "time");
  hw_catalog_free(c);
}

/* B200, fp8 8192^3: fp8 runs at the fp8 peak (4.5 PFLOP/s) with the
** measured 16-bit efficiency, at the 0.853 of it the part sustains under its
** 1,000 W limit (b200.json sustained_clock_ratio), at the measured table's
** factor of its cell: 8192 columns fold into 16384 rows, K clamps at 4096,
** and 16384 x 4096 x 4096 (b 4 x 4096^3, 1670.47 TFLOP/s) is the B200
** table's best cell, 1. 1-byte operands over 8 TB/s x the measured 0.84.
** On the wave model, 2048 tiles (128x256) over 148 SMs = 14 waves. */
Test(optime, b200_8192_cubed_fp8_hand_derived) {
  hw_catalog *c = catalog();
  optime_result r = mm(chip(c, "b200"), 1, 8192, 8192, 8192, GDT_F8);
  double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  double compute = flops / (4.5e15 * 0.776 * 0.853);
  near_rel(r.compute_s, compute, 1e-9, "compute");
  near_rel(r.memory_s, 3.0 * 8192 * 8192 / (8e12 * 0.84), 1e-9, "memory");
  near_rel(r.time_s, compute, 1e-9, "time");
  hw_model w = wave_only(chip(c, "b200"));
  optime_result v = mm(&w, 1, 8192, 8192, 8192, GDT_F8);
  near_rel(v.time_s, flops * (14.0 * 148.0 / 2048.0) / (4.5e15 * 0.776 * 0.853) + 3e-6, 1e-9,
           "time, wave model");
  hw_catalog_free(c);
}

/* TPU v5p, bf16 4096^3: 8x128 LHS tiles, 2 TensorCores; no overhead, and the
** matmul efficiency v5p borrows from v5e's measurement (181.8 of 197 TFLOP/s,
** rounded to 0.923 in tpu-v5p.json), so exactly 2*4096^3 / (459e12 x 0.923). */
Test(optime, tpu_v5p_4096_cubed_bf16_hand_derived) {
  hw_catalog *c = catalog();
  optime_result r = mm(chip(c, "tpu-v5p"), 1, 4096, 4096, 4096, GDT_BF16);
  near_rel(r.time_s, 2.0 * 4096.0 * 4096.0 * 4096.0 / (459e12 * 0.923), 1e-12, "time");
  near_rel(r.memory_s, 3.0 * 4096 * 4096 * 2 / (2.765e12 * 0.830), 1e-12, "memory");
  cr_assert_eq(r.overhead_s, 0);
  near_rel(r.efficiency, 0.923, 1e-12, "efficiency");
  hw_catalog_free(c);
}

/* The measurement the v5e figure comes from (jax docs, XLA matmul bf16
** 8192^3: 6.047 ms) comes back: no further loss is applied to a matmul
** whose every dimension is a multiple of the MXU tile. */
Test(optime, tpu_v5e_source_measurement_round_trips) {
  hw_catalog *c = catalog();
  optime_result r = mm(chip(c, "tpu-v5e"), 1, 8192, 8192, 8192, GDT_BF16);
  near_rel(r.time_s, 6.047147869830951e-3, 0.001, "time");
  hw_catalog_free(c);
}

/* ---- the MAMF measurements (shared/reference A.7) ---- */

typedef struct {
  const char *hw;
  int64_t m, n, k;
  double tflops, efficiency; /* measured: MAMF TFLOP/s and its fraction of peak */
  double within;             /* the prediction's tolerance */
} mamf_row;

/* B200's best MAMF shape lies past OpenXLA's measured grid (N 16128 of at
** most 4096): its 16128 columns fold into 7056 rows, where the table's own
** rate is 12 % under MAMF's (b 2 x 4096^3: 1466.6 TFLOP/s against 1745.0 at
** 1792 x 16128 x 3072 -- two measurements, two libraries); 20 % there. */
static const mamf_row MAMF[] = {
    {"a100-80g", 1024, 10240, 5120, 271.2, 0.869, 0.15},
    {"a100-40g", 1024, 10240, 5120, 271.2, 0.869, 0.15},
    {"h100-sxm", 2048, 2048, 13312, 794.5, 0.803, 0.15},
    {"h200", 2048, 2048, 13312, 794.5, 0.803, 0.15}, /* "H200 is the same" */
    {"b200", 1792, 16128, 3072, 1745.0, 0.776, 0.20},
};

/* The best shape of each chip, predicted within 15% of its measured TFLOP/s
** (B200: 20 %, above). MAMF times a short burst (about 15 ms of products): a
** chip that throttles under its own power limit when run for longer (b200:
** sustained_clock_ratio 0.853) is compared at the burst clock, the
** prediction over that ratio. */
Test(optime, mamf_best_shapes_within_tolerance) {
  hw_catalog *c = catalog();
  for (size_t i = 0; i < sizeof MAMF / sizeof *MAMF; i++) {
    const mamf_row *w = &MAMF[i];
    const hw_model *hw = chip(c, w->hw);
    optime_result r = mm(hw, 1, w->m, w->n, w->k, GDT_BF16);
    double tflops = r.flops / r.time_s / 1e12 / hw->chip.sustained_clock_ratio;
    cr_log_info("%s %lldx%lldx%lld: predicted %.1f TFLOP/s, measured %.1f (%+.1f%%)", w->hw,
                (long long)w->m, (long long)w->n, (long long)w->k, tflops, w->tflops,
                100 * (tflops / w->tflops - 1));
    cr_assert(fabs(tflops / w->tflops - 1) < w->within, "%s: predicted %.1f TFLOP/s, measured %.1f",
              w->hw, tflops, w->tflops);
  }
  hw_catalog_free(c);
}

/* A sweep of large shapes: every one runs within 15% of the chip's measured
** MAMF efficiency (and never above it: padding, waves and the launch can
** only lose). */
Test(optime, large_shape_sweep_within_15_percent_of_mamf) {
  hw_catalog *c = catalog();
  static const int64_t MN[] = {8192, 12288, 16384}, KS[] = {4096, 8192, 16384};
  for (size_t i = 0; i < sizeof MAMF / sizeof *MAMF; i++) {
    const hw_model *m = chip(c, MAMF[i].hw);
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (int k = 0; k < 3; k++) {
          optime_result r = mm(m, 1, MN[a], MN[b], KS[k], GDT_BF16);
          /* at the burst clock MAMF measured at (the test above) */
          double ratio = r.efficiency / m->chip.sustained_clock_ratio / MAMF[i].efficiency;
          cr_assert(ratio > 0.85 && ratio <= 1.0 + 1e-12,
                    "%s %lldx%lldx%lld: efficiency %.3f vs measured %.3f", m->name,
                    (long long)MN[a], (long long)MN[b], (long long)KS[k], r.efficiency,
                    MAMF[i].efficiency);
        }
  }
  hw_catalog_free(c);
}

/* ---- OpenXLA's measured GEMM tables (hw_models/data) ---- */

/* Every bf16 row of the table a chip's matmul_shape comes from, timed by
** the chip: H100 (sm_90) against its 375 kernel times, B200 (sm_100) at the
** burst clock XLA measured at (the prediction times sustained_clock_ratio).
** What is left: H100's MAMF best-shape rate is 1.3 % under the table's best
** (794.5 against 804.7 TFLOP/s), B200's 4.5 % over (1745 against 1670.5),
** the grid's 4 significant digits, and the cells where a larger shape timed
** faster than a smaller (split-K at a larger K, the smallest shapes' noise),
** whose rate the grid lowers so a larger GEMM is never faster. The wave
** model alone missed these times by about 30 % on average (logged). */
Test(optime, gemm_times_match_openxla_measured_tables) {
  /* mean |error|; the share of rows within `near`; the worst row (H100's:
  ** 256 x 256 x 4096, 5.9 us where 256 x 256 x 2048 took 8.4 -- split-K --
  ** is timed as the smaller, 8.5 us) */
  static const struct {
    const char *hw, *csv;
    double mean, near, share, worst;
  } T[] = {{"h100-sxm", "hw_models/data/xla-matmul-sm_90-bf16.csv", 0.025, 0.05, 0.95, 0.45},
           {"b200", "hw_models/data/xla-matmul-sm_100-bf16.csv", 0.06, 0.10, 0.93, 0.22}};
  hw_catalog *c = catalog();
  for (size_t t = 0; t < sizeof T / sizeof *T; t++) {
    const hw_model *h = chip(c, T[t].hw);
    hw_model w = wave_only(h);
    FILE *f = fopen(T[t].csv, "r");
    cr_assert_not_null(f, "%s", T[t].csv);
    char line[256];
    int rows = 0, close = 0;
    double sum = 0, worst = 0, sum_wave = 0;
    cr_assert_not_null(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
      long long b, m, n, k;
      double flops_per_s;
      char dt[64];
      cr_assert_eq(sscanf(line, "%lld,%lld,%lld,%lld,%63[^,],%lf", &b, &m, &n, &k, dt, &flops_per_s), 6,
                   "%s", line);
      double measured = 2.0 * (double)b * (double)m * (double)n * (double)k / flops_per_s;
      double burst = h->chip.sustained_clock_ratio > 0 ? h->chip.sustained_clock_ratio : 1;
      double e = mm(h, b, m, n, k, GDT_BF16).time_s * burst / measured - 1;
      sum += fabs(e), rows++, close += fabs(e) <= T[t].near;
      if (fabs(e) > worst) worst = fabs(e);
      sum_wave += fabs(mm(&w, b, m, n, k, GDT_BF16).time_s * burst / measured - 1);
      cr_assert_leq(fabs(e), T[t].worst, "%s %lldx%lldx%lldx%lld: %+.1f%%", T[t].hw, b, m, n, k, 100 * e);
    }
    fclose(f);
    cr_assert_eq(rows, 375, "%s: %d rows", T[t].csv, rows);
    cr_log_info("%s: mean |error| %.1f%%, worst %.1f%%; the wave model alone %.1f%%", T[t].hw,
                100 * sum / rows, 100 * worst, 100 * sum_wave / rows);
    cr_assert_leq(sum / rows, T[t].mean, "%s: mean |error| %.3f", T[t].hw, sum / rows);
    cr_assert_geq((double)close / rows, T[t].share, "%s: %d of %d rows within %.0f%%", T[t].hw,
                  close, rows, 100 * T[t].near);
  }
  hw_catalog_free(c);
}

/* ---- padding and wave quantization ---- */

/* TPU v5p pads N to the 128-wide MXU: N = 1025 costs as much as 1152. At
** M = K = 8192 the matmul is compute-bound and v5p has no overhead, so the
** efficiency is exactly the padded fraction times its matmul efficiency
** (0.923, v5e's measured fraction, tpu-v5p.json). */
Test(optime, tpu_padding_costs_the_padded_fraction) {
  hw_catalog *c = catalog();
  const hw_model *m = chip(c, "tpu-v5p");
  optime_result r1024 = mm(m, 1, 8192, 1024, 8192, GDT_BF16);
  optime_result r1025 = mm(m, 1, 8192, 1025, 8192, GDT_BF16);
  optime_result r1152 = mm(m, 1, 8192, 1152, 8192, GDT_BF16);
  near_rel(r1025.padded_flops, 2.0 * 8192 * 1152 * 8192, 1e-15, "padded flops");
  near_rel(r1025.time_s, r1152.time_s, 1e-15, "1025 costs what 1152 does");
  near_rel(r1025.time_s / r1024.time_s, 1152.0 / 1024.0, 1e-12, "time ratio");
  near_rel(r1025.efficiency, 0.923 * 1025.0 / 1152.0, 1e-12, "efficiency = padded fraction");
  cr_assert_str_eq(r1025.bound, "compute");
  /* M pads to the 8-row LHS tile: one row does an eighth of the work paid for */
  optime_result r1 = mm(m, 1, 1, 8192, 8192, GDT_BF16);
  near_rel(r1.padded_flops, 2.0 * 8 * 8192 * 8192, 1e-15, "M=1 padded to 8");
  near_rel(r1.flops / r1.padded_flops, 1.0 / 8, 1e-15, "M=1 padded fraction");
  hw_catalog_free(c);
}

/* A100 128x128 tiles: N = 129 pays for 256 columns (129/256 of the work is
** useful), and K = 33 for the 64 of two 32-deep steps. */
Test(optime, gpu_padding_n129_pays_for_two_tiles) {
  hw_catalog *c = catalog();
  const hw_model *m = chip(c, "a100-80g");
  optime_result r129 = mm(m, 1, 8192, 129, 8192, GDT_BF16);
  optime_result r256 = mm(m, 1, 8192, 256, 8192, GDT_BF16);
  near_rel(r129.padded_flops, 2.0 * 8192 * 256 * 8192, 1e-15, "padded flops");
  near_rel(r129.flops / r129.padded_flops, 129.0 / 256.0, 1e-15, "padded fraction");
  near_rel(r129.compute_s, r256.compute_s, 1e-15, "compute as for N = 256");
  optime_result k33 = mm(m, 1, 8192, 8192, 33, GDT_BF16);
  optime_result k64 = mm(m, 1, 8192, 8192, 64, GDT_BF16);
  near_rel(k33.compute_s, k64.compute_s, 1e-15, "K = 33 computes as K = 64");
  near_rel(k33.flops / k33.padded_flops, 33.0 / 64.0, 1e-15, "K padded fraction");
  hw_catalog_free(c);
}

/* Wave quantization on the tile and wave model of H100 (128x256 tiles, 132 SMs): M = 33792 gives 264
** row tiles; N = 256 is 264 tiles = 2 waves, N = 257 pays for 512 columns
** and 528 tiles = 4 whole waves: exactly twice the compute. Going one row
** tile past a whole wave (M = 33920: 265 tiles) costs a third wave. */
Test(optime, gpu_wave_quantization) {
  hw_catalog *c = catalog();
  hw_model w = wave_only(chip(c, "h100-sxm"));
  const hw_model *m = &w;
  optime_result a = mm(m, 1, 33792, 256, 8192, GDT_BF16);
  optime_result b = mm(m, 1, 33792, 257, 8192, GDT_BF16);
  near_rel(b.compute_s / a.compute_s, 2.0, 1e-12, "N = 257 vs 256");
  near_rel(a.compute_s, 2.0 * 33792 * 256 * 8192 / (989e12 * 0.803), 1e-12, "whole waves");
  optime_result d = mm(m, 1, 33792 + 128, 256, 8192, GDT_BF16);
  near_rel(d.compute_s / a.compute_s, 3.0 / 2.0, 1e-12, "265 tiles take 3 waves");
  /* a lone tile is split along K over min(132, 8192/64) = 128 SMs: one wave
  ** of 1/128-deep slices on 132 SMs */
  optime_result one = mm(m, 1, 128, 256, 8192, GDT_BF16);
  near_rel(one.compute_s, 132 * 2.0 * 128 * 256 * (8192 / 128) / (989e12 * 0.803), 1e-12,
           "one tile, split K");
  /* 34 tiles: floor(132/34) = 3 slices each, 102 of 132 SMs busy */
  optime_result t34 = mm(m, 1, 128 * 34, 256, 8192, GDT_BF16);
  near_rel(t34.compute_s, 132 * 2.0 * 128 * 256 * (8192 / 3.0) / (989e12 * 0.803), 1e-12,
           "34 tiles, 3-way split K");
  hw_catalog_free(c);
}

/* A GEMV (M = 1) is memory-bound: the time is the weight traffic, at the
** H100's measured 0.896 of its 3.35 TB/s (h100-sxm.json: FlashMLA's
** decode kernel, 3000 of 3350 GB/s). */
Test(optime, gemv_is_memory_bound) {
  hw_catalog *c = catalog();
  optime_result r = mm(chip(c, "h100-sxm"), 1, 1, 8192, 8192, GDT_BF16);
  double bytes = (8192.0 + 8192.0 * 8192.0 + 8192.0) * 2;
  near_rel(r.bytes, bytes, 1e-15, "bytes");
  near_rel(r.time_s, bytes / (3.35e12 * 0.896) + 3e-6, 1e-12, "time");
  cr_assert_str_eq(r.bound, "memory");
  cr_assert(r.efficiency < 0.01, "%g", r.efficiency);
  hw_catalog_free(c);
}

/* Small and odd shapes never beat the well-shaped rate: efficiency at
** M = N = K = s stays at or below the large-shape efficiency, and is lowest
** where padding leaves a sliver of a tile. */
Test(optime, small_and_odd_shapes_lose_efficiency) {
  hw_catalog *c = catalog();
  const hw_model *m = chip(c, "a100-80g");
  double best = mm(m, 1, 16384, 16384, 16384, GDT_BF16).efficiency;
  cr_assert(best > 0.85 && best <= 0.869, "%g", best);
  for (int64_t s = 1; s <= 2048; s += 7)
    cr_assert_leq(mm(m, 1, s, s, s, GDT_BF16).efficiency, best + 1e-12, "s = %lld", (long long)s);
  double e128 = mm(m, 1, 128, 8192, 8192, GDT_BF16).efficiency;
  double e129 = mm(m, 1, 129, 8192, 8192, GDT_BF16).efficiency;
  cr_assert(e129 < 0.6 * e128, "M = 129 %g vs M = 128 %g", e129, e128);
  hw_catalog_free(c);
}

/* ---- monotonicity ---- */

/* A bigger matmul is never faster, in any dimension, on any chip. */
Test(optime, bigger_matmul_is_never_faster) {
  hw_catalog *c = catalog();
  for (int i = 0; i < hw_catalog_count(c); i++) {
    const hw_model *m = hw_catalog_at(c, i);
    if (hw_peak_16bit(m) <= 0) continue; /* an int8-only edge part times no 16-bit matmul */
    graph_dtype dt = hw_peak_flops(m, HW_BF16) > 0 ? GDT_BF16 : GDT_F16;
    for (int dim = 0; dim < 4; dim++) {
      double prev = 0;
      for (int64_t x = 1; x <= 1500; x += (x < 300 ? 1 : 13)) {
        int64_t v[4] = {2, 1000, 700, 900};
        v[dim] = x;
        double t = mm(m, v[0], v[1], v[2], v[3], dt).time_s;
        cr_assert_geq(t, prev, "%s: dim %d = %lld is faster than the one before", m->name, dim,
                      (long long)x);
        prev = t;
      }
    }
  }
  hw_catalog_free(c);
}

/* ---- dtypes ---- */

static graph *dot_graph(graph_dtype dt, int *out) {
  graph *g = graph_new("t");
  graph_set_scope(g, "l0/attn");
  int a = graph_parameter(g, "a", SHAPE(dt, 512, 1024), GRAPH_INPUT);
  int b = graph_parameter(g, "b", SHAPE(dt, 1024, 256), GRAPH_WEIGHT);
  *out = graph_matmul(g, a, b);
  cr_assert(graph_ok(g));
  return g;
}

Test(optime, fp64_dot_on_tpu_names_the_op_and_chip) {
  hw_catalog *c = catalog();
  int d;
  graph *g = dot_graph(GDT_F64, &d);
  optime_result r;
  char err[256] = "";
  cr_assert_eq(optime_op(chip(c, "tpu-v4"), g, d, &r, err, sizeof err), -1);
  char want[160];
  snprintf(want, sizeof want, "dot %s f64: tpu-v4 has no fp64 unit", graph_get(g, d)->name);
  cr_assert_str_eq(err, want);
  cr_assert(strstr(err, "l0/attn"), "%s", err);
  /* the same dot runs on a GPU, on the fp64 rate */
  cr_assert_eq(optime_op(chip(c, "a100-80g"), g, d, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.padded_flops, 2.0 * 512 * 256 * 1024, 1e-15, "padded");
  /* and so does optime_matmul's error */
  cr_assert_eq(optime_matmul(chip(c, "tpu-v5p"), 1, 64, 64, 64, GDT_F64, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "tpu-v5p has no fp64 unit"), "%s", err);
  graph_free(g);
  hw_catalog_free(c);
}

Test(optime, unsupported_dtypes_are_errors) {
  hw_catalog *c = catalog();
  int d;
  optime_result r;
  char err[256] = "";
  graph *g = dot_graph(GDT_BF16, &d);
  cr_assert_eq(optime_op(chip(c, "v100"), g, d, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "dot l0/attn/") && strstr(err, "bf16: v100 has no bf16 unit"), "%s", err);
  graph_free(g);
  g = dot_graph(GDT_S32, &d);
  cr_assert_eq(optime_op(chip(c, "h100-sxm"), g, d, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "s32: h100-sxm has no s32 matrix unit"), "%s", err);
  graph_free(g);
  /* elementwise f64 on a TPU: no fp64 unit anywhere on the chip */
  g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F64, 1024), GRAPH_INPUT);
  int y = graph_binary(g, GOP_ADD, x, x);
  cr_assert_eq(optime_op(chip(c, "tpu-v6e"), g, y, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "add ") && strstr(err, "f64: tpu-v6e has no fp64 unit"), "%s", err);
  cr_assert_eq(optime_op(chip(c, "cpu-spr"), g, y, &r, err, sizeof err), 0, "%s", err);
  /* bad requests */
  cr_assert_eq(optime_op(chip(c, "cpu-spr"), g, 99, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "op id 99 out of range"), "%s", err);
  cr_assert_eq(optime_matmul(chip(c, "h100-sxm"), 1, 0, 8, 8, GDT_BF16, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "must be positive"), "%s", err);
  graph_free(g);
  hw_catalog_free(c);
}

/* An f32-accurate dot on a TPU is six bf16 MXU passes (XLA's
** ALG_DOT_BF16_BF16_F32_X6; JAX precision HIGHEST): the hardware files
** list fp32 = bf16 / 6. (JAX's DEFAULT rounds f32 operands to bf16 in one
** pass: that is training in bf16.) A GPU runs it at its fp32 rate. The f32
** operands still move 4 bytes each. */
Test(optime, f32_dot_runs_as_six_bf16_passes_on_tpu) {
  hw_catalog *c = catalog();
  const hw_model *v5p = chip(c, "tpu-v5p");
  optime_result f = mm(v5p, 1, 8192, 8192, 8192, GDT_F32);
  optime_result b = mm(v5p, 1, 8192, 8192, 8192, GDT_BF16);
  near_rel(f.compute_s, 6 * b.compute_s, 1e-12, "compute");
  near_rel(f.bytes, 2 * b.bytes, 1e-15, "bytes");
  optime_result h = mm(chip(c, "h100-sxm"), 1, 8448, 512, 8192, GDT_F32);
  near_rel(h.compute_s, 2.0 * 8448 * 512 * 8192 / (67e12 * 0.803), 1e-12, "H100 fp32");
  hw_catalog_free(c);
}

/* ---- the vector unit and memory ---- */

/* c = a + b on two bf16 [8192, 8192] arrays: 3 x 128 MiB of traffic; the
** add itself is 67 MFLOP, far under the memory time. */
Test(optime, elementwise_add_is_bytes_over_bandwidth) {
  hw_catalog *c = catalog();
  graph *g = graph_new("t");
  int a = graph_parameter(g, "a", SHAPE(GDT_BF16, 8192, 8192), GRAPH_INPUT);
  int b = graph_parameter(g, "b", SHAPE(GDT_BF16, 8192, 8192), GRAPH_INPUT);
  int y = graph_binary(g, GOP_ADD, a, b);
  double bytes = 3.0 * 8192 * 8192 * 2;
  struct {
    const char *hw;
    double bw, overhead;
  } want[] = {{"h100-sxm", 3.35e12 * 0.896, 3e-6}, /* measured 0.896 (FlashMLA) */
              {"b200", 8e12 * 0.84, 3e-6}, /* measured 0.84 */
              {"a100-40g", 1.555e12 * 0.871, 3e-6},
              {"tpu-v5p", 2.765e12 * 0.830, 0}}; /* v6e's measured copy, taken */
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    optime_result r;
    char err[256] = "";
    cr_assert_eq(optime_op(chip(c, want[i].hw), g, y, &r, err, sizeof err), 0, "%s", err);
    near_rel(r.bytes, bytes, 1e-15, "bytes");
    near_rel(r.time_s, bytes / want[i].bw + want[i].overhead, 1e-12, want[i].hw);
    cr_assert_str_eq(r.bound, "memory");
    near_rel(r.flops, 8192.0 * 8192, 1e-15, "flops");
  }
  graph_free(g);
  hw_catalog_free(c);
}

/* Transcendentals run on the GPU's special-function units (16 per clock per
** SM: 4.18e12/s on H100); a chip without that figure charges one vector
** operation each (TPU v5p: 1.43e13/s). */
Test(optime, transcendentals_at_their_rate) {
  hw_catalog *c = catalog();
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1 << 24), GRAPH_INPUT);
  int e = graph_unary(g, GOP_EXP, x);
  int s = graph_unary(g, GOP_SILU, x); /* 1 flop + 1 transcendental per element */
  optime_result r;
  char err[256] = "";
  double n = 1 << 24;
  cr_assert_eq(optime_op(chip(c, "h100-sxm"), g, e, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.compute_s, n / 4.18e12, 1e-12, "exp on H100");
  near_rel(r.time_s, 2 * n * 4 / (3.35e12 * 0.896) + 3e-6, 1e-12, "exp is memory-bound");
  cr_assert_eq(optime_op(chip(c, "tpu-v5p"), g, s, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.compute_s, n / 1.43e13 + n / 1.43e13, 1e-12, "silu on v5p");
  graph_free(g);
  hw_catalog_free(c);
}

/* ---- other op kinds ---- */

/* A 3x3 convolution as an implicit GEMM: M = N*H*W = 32*56*56, N = C_out
** = 64, K = 3*3*64. A100's 128-wide tile pays for 128 output channels. */
Test(optime, convolution_is_an_implicit_gemm) {
  hw_catalog *c = catalog();
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 32, 56, 56, 64), GRAPH_INPUT);
  int k = graph_parameter(g, "k", SHAPE(GDT_BF16, 3, 3, 64, 64), GRAPH_WEIGHT);
  graph_conv_attrs a = {.spatial = 2,
                        .in_feature = 3,
                        .in_spatial = {1, 2},
                        .k_in = 2,
                        .k_out = 3,
                        .k_spatial = {0, 1},
                        .out_feature = 3,
                        .out_spatial = {1, 2},
                        .pad_lo = {1, 1},
                        .pad_hi = {1, 1},
                        .feature_groups = 1};
  int y = graph_conv(g, x, k, &a, GDT_BF16);
  cr_assert(graph_ok(g));
  optime_result r;
  char err[256] = "";
  cr_assert_eq(optime_op(chip(c, "a100-80g"), g, y, &r, err, sizeof err), 0, "%s", err);
  double M = 32.0 * 56 * 56, K = 9 * 64;
  near_rel(r.flops, 2 * M * 64 * K, 1e-15, "flops");
  near_rel(r.padded_flops, 2 * M * 128 * K, 1e-15, "padded to 128 channels");
  /* the same GEMM through optime_matmul computes the same */
  optime_result m = mm(chip(c, "a100-80g"), 1, (int64_t)M, 64, (int64_t)K, GDT_BF16);
  near_rel(r.compute_s, m.compute_s, 1e-15, "compute");
  /* depthwise: 64 groups of [M x 9] x [9 x 1], which as implicit GEMMs pad
  ** K 9 -> 32 and N 1 -> 128 (64 x 2 M x 128 x 32 FLOPs, 455x the real
  ** ones): run directly on the vector unit instead, as cuDNN's depthwise
  ** kernels do, its FLOPs unpadded at A100's 19.5 TFLOP/s */
  int kd = graph_parameter(g, "kd", SHAPE(GDT_BF16, 3, 3, 1, 64), GRAPH_WEIGHT);
  a.feature_groups = 64;
  int yd = graph_conv(g, x, kd, &a, GDT_BF16);
  cr_assert(graph_ok(g));
  cr_assert_eq(optime_op(chip(c, "a100-80g"), g, yd, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.flops, 2 * M * 64 * 9, 1e-15, "depthwise flops");
  near_rel(r.padded_flops, r.flops, 1e-15, "depthwise runs unpadded");
  near_rel(r.compute_s, 2 * M * 64 * 9 / 19.5e12, 1e-12, "on the vector unit");
  optime_result pg = mm(chip(c, "a100-80g"), 64, (int64_t)M, 1, 9, GDT_BF16);
  near_rel(pg.padded_flops, 64 * 2 * M * 128 * 32, 1e-15, "the implicit GEMM's padding");
  cr_assert_gt(pg.compute_s, r.compute_s, "the direct kernel is the faster choice");
  /* a grouped convolution wide enough for the tiles keeps the GEMM: 2
  ** groups of 32 -> 32 channels */
  int kg = graph_parameter(g, "kg", SHAPE(GDT_BF16, 3, 3, 32, 64), GRAPH_WEIGHT);
  a.feature_groups = 2;
  int yg = graph_conv(g, x, kg, &a, GDT_BF16);
  cr_assert(graph_ok(g));
  cr_assert_eq(optime_op(chip(c, "a100-80g"), g, yg, &r, err, sizeof err), 0, "%s", err);
  optime_result gg = mm(chip(c, "a100-80g"), 2, (int64_t)M, 32, 9 * 32, GDT_BF16);
  near_rel(r.compute_s, gg.compute_s, 1e-15, "grouped: the implicit GEMM");
  graph_free(g);
  hw_catalog_free(c);
}

/* Collectives take no chip time here; reshapes and parameters cost nothing;
** a matmul-like custom call runs its declared FLOPs on the matrix unit,
** anything else on the vector unit. */
Test(optime, collectives_no_ops_and_custom_calls) {
  hw_catalog *c = catalog();
  const hw_model *h = chip(c, "h100-sxm");
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 1024, 1024), GRAPH_INPUT);
  int ar = graph_collective(g, GOP_ALL_REDUCE, x, 8, 0);
  int rs = graph_reshape(g, x, SHAPE(GDT_BF16, 1 << 20));
  int ins[1] = {x};
  int cb =
      graph_custom(g, "conv-backward-input", SHAPE(GDT_BF16, 1024, 1024), ins, 1, 1e12, 0, 4e6);
  int tk = graph_custom(g, "top-k", SHAPE(GDT_S32, 1024, 2), ins, 1, 1e9, 0, 2e6);
  cr_assert(graph_ok(g));
  optime_result r;
  char err[256] = "";
  cr_assert_eq(optime_op(h, g, ar, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.time_s, 0);
  cr_assert_str_eq(r.bound, "network");
  cr_assert_eq(optime_op(h, g, rs, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.time_s, 0);
  cr_assert_str_eq(r.bound, "none");
  cr_assert_eq(optime_op(h, g, x, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.time_s, 0);
  cr_assert_eq(optime_op(h, g, cb, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.time_s, 1e12 / (989e12 * 0.803) + 3e-6, 1e-12, "conv-backward-input");
  cr_assert_eq(optime_op(h, g, tk, &r, err, sizeof err), 0, "%s", err);
  near_rel(r.compute_s, 1e9 / 67e12, 1e-12, "top-k on the vector unit");
  graph_free(g);
  hw_catalog_free(c);
}

/* Deterministic: the same op gives the same bits. */
Test(optime, deterministic) {
  hw_catalog *c = catalog();
  optime_result a = mm(chip(c, "b200"), 3, 1000, 777, 4097, GDT_BF16);
  optime_result b = mm(chip(c, "b200"), 3, 1000, 777, 4097, GDT_BF16);
  cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
  hw_catalog_free(c);
}

/* ---- the hardware figures behind it ---- */

/* An absent figure is what the timing model assumes, and `hw show` says so. */
Test(optime_hw, absent_figures_default_and_show) {
  hw_catalog *c = catalog();
  const hw_model *v5p = chip(c, "tpu-v5p");
  cr_assert_eq(v5p->chip.op_overhead_s, 0);
  cr_assert_eq(v5p->chip.transcendentals_per_s, v5p->chip.vector_flops_per_s);
  const hw_model *l4 = chip(c, "l4");
  cr_assert_eq(l4->chip.hbm_efficiency, 1.0);
  cr_assert_not(l4->present[hw_field_find("chip.hbm_efficiency")]);
  const hw_model *h = chip(c, "h100-sxm");
  cr_assert(h->present[hw_field_find("chip.matmul_efficiency")]);
  cr_assert_eq(h->chip.matmul_efficiency, 0.803);
  hw_catalog_free(c);
  th_run r = th_cli("hw", "show", "l4", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  /* on the hbm_efficiency line itself (l4 lacks other figures too) */
  const char *line = strstr(r.out, "hbm_efficiency");
  cr_assert(line, "%s", r.out);
  const char *eol = strchr(line, '\n'), *absent = strstr(line, "absent: timing assumes 1.0");
  cr_assert(absent && (!eol || absent < eol), "%s", r.out);
  th_run_free(&r);
  r = th_cli("hw", "show", "l4", "--json", NULL);
  cr_assert(strstr(r.out, "\"hbm_bw_bytes_per_s\":"), "%s", r.out);
  cr_assert_null(strstr(r.out, "\"hbm_efficiency\":"), "--json lists only given figures");
  th_run_free(&r);
}

/* Every message of d, one per line (malloc'd). */
static char *diag_text(const diag *d) {
  size_t n = 1;
  for (int i = 0; i < diag_count(d); i++)
    n += strlen(diag_message(d, i)) + 1;
  char *s = calloc(n, 1);
  for (int i = 0; i < diag_count(d); i++) {
    strcat(s, diag_message(d, i));
    strcat(s, "\n");
  }
  return s;
}

/* Efficiencies are fractions and every figure needs a source. */
Test(optime_hw, efficiency_bounds_and_sources_are_checked) {
  const char *text = th_builtin_text("h100-sxm");
  cr_assert_not_null(text);
  char *bad = th_replace(text, "\"matmul_efficiency\": 0.803", "\"matmul_efficiency\": 1.5");
  diag *d = diag_new();
  cr_assert_null(hw_load("bad.json", bad, strlen(bad), d));
  char *msg = diag_text(d);
  cr_assert(strstr(msg, "chip.matmul_efficiency: expected a positive number up to 1"), "%s", msg);
  free(msg);
  diag_free(d);
  free(bad);
  bad = th_replace(text, "\"chip.matmul_efficiency\": \"mleng-mamf\",", "");
  d = diag_new();
  cr_assert_null(hw_load("uncited.json", bad, strlen(bad), d));
  msg = diag_text(d);
  cr_assert(strstr(msg, "chip.matmul_efficiency: no source"), "%s", msg);
  free(msg);
  diag_free(d);
  free(bad);
  bad = th_replace(text, "\"op_overhead_s\": 3e-6", "\"op_overhead_s\": 3");
  d = diag_new();
  cr_assert_null(hw_load("units.json", bad, strlen(bad), d));
  diag_free(d);
  free(bad);
}

/* A part held below its rated power clocks its cores down, not its HBM
** (chip.sustained_clock_ratio): h100-96gb's 0.879 (1731 of 1969 MHz at a
** 500 W cap, Ujeniya et al. 2026) stretches a compute-bound GEMM's core
** time by exactly 1/0.879 and leaves a memory-bound op's time as it was.
** The same chip at ratio 1 is the reference, so only the ratio differs. */
Test(optime, power_capped_clock_slows_compute_not_memory) {
  hw_catalog *c = catalog();
  const hw_model *capped = chip(c, "h100-96gb");
  cr_assert_float_eq(capped->chip.sustained_clock_ratio, 0.879, 1e-12);
  hw_model full = *capped;
  full.chip.sustained_clock_ratio = 1;
  optime_result a = mm(capped, 1, 8192, 8192, 8192, GDT_BF16), b = mm(&full, 1, 8192, 8192, 8192, GDT_BF16);
  near_rel(a.compute_s, b.compute_s / 0.879, 1e-12, "compute-bound GEMM core time");
  near_rel(a.memory_s, b.memory_s, 1e-15, "its memory time");
  /* a skinny GEMM (m = 1) streams the weights: memory-bound, unchanged */
  optime_result s = mm(capped, 1, 1, 8192, 8192, GDT_BF16), t = mm(&full, 1, 1, 8192, 8192, GDT_BF16);
  cr_assert_str_eq(s.bound, "memory");
  near_rel(s.time_s, t.time_s, 1e-15, "memory-bound GEMV");
  /* a catalog chip without the figure runs at its rated clock */
  cr_assert_float_eq(chip(c, "h100-sxm")->chip.sustained_clock_ratio, 1.0, 1e-15);
  /* B200 at its own 1,000 W limit, run back to back: a compute-bound kernel
  ** fell from 1450 to 1237 TFLOP/s as the clock went from 1965 to about
  ** 1580 MHz (flashinfer #2899): the rate ratio, 0.853, not the clock's
  ** 0.804. Its 8192^3 GEMM: 2 x 8192^3 FLOPs over 2.25e15 x 0.776 (MAMF)
  ** x 0.853, at its table's best cell (16384 x 4096 x 4096, 1) */
  const hw_model *b200 = chip(c, "b200");
  cr_assert_float_eq(b200->chip.sustained_clock_ratio, 1237.0 / 1450.0, 1e-3);
  optime_result g = mm(b200, 1, 8192, 8192, 8192, GDT_BF16);
  near_rel(g.compute_s, 2.0 * 8192 * 8192 * 8192 / (2.25e15 * 0.776 * 0.853), 1e-9,
           "b200 sustained GEMM");
  /* GB200 is the same die at 1,200 W, with no throttling measurement of its
  ** own: dynamic power as f^3 gives 1580 x (1200/1000)^(1/3) = 1679 MHz
  ** sustained, 0.814 of its 2062 MHz maximum, and the rate moves 0.750 as
  ** much as the clock (B200: 14.7 % for 19.6 %): 0.861 (gb200.json notes) */
  double elasticity = (1 - 1237.0 / 1450.0) / (1 - 1580.0 / 1965.0);
  double gb200_mhz = 1580.0 * cbrt(1200.0 / 1000.0);
  near_rel(gb200_mhz, 1679.0, 1e-3, "gb200 sustained clock");
  cr_assert_float_eq(chip(c, "gb200")->chip.sustained_clock_ratio, 1 - elasticity * (1 - gb200_mhz / 2062.0),
                     1e-3);
  /* another die (Blackwell Ultra) without a measurement keeps its burst rate */
  cr_assert_float_eq(chip(c, "gb300")->chip.sustained_clock_ratio, 1.0, 1e-15);
  hw_catalog_free(c);
}
