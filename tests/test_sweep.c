/*
** test_sweep.c -- hardware overrides (hw_models/hw_override.h) against the
** published figures they scale, and a study's values and points
** (cli/sweep.h): ranges, the enumeration order, the point limit.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../cli/sweep_int.h"
#include "../hw_models/hw_catalog.h"
#include "../hw_models/hw_override.h"
#include "helpers.h"

/* A writable copy of a built-in entry (scalars only change). */
static hw_model entry(const char *name) {
  hw_catalog *c = th_catalog();
  hw_model m = *th_hw(c, name);
  /* the copy shares the entry's sources; nothing here frees them */
  m.sources = NULL, m.cites = NULL, m.notes = NULL;
  m.n_sources = m.n_cites = m.n_notes = 0;
  hw_catalog_free(c);
  return m;
}

/* tpu-v5p.json: HBM 2,765 GB/s (Cloud TPU v5p doc); ICI 9e10 B/s a link
** one way, 5.4e11 per chip (scaling-book); DCN 6.25e9 B/s a chip (Cloud
** doc, 50 Gbps); bf16 459 TFLOP/s, int8 918 TOP/s. */
Test(hw_override, scales_multiply_the_named_figures) {
  hw_model m = entry("tpu-v5p");
  char err[512];
  cr_assert_eq(hw_override(&m, "hbm_bw_scale", 2, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(m.chip.hbm_bw_bytes_per_s, 5.53e12, 1e3);
  cr_assert_eq(hw_override(&m, "ici_bw_scale", 1.5, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(m.scale_up.link_bw_bytes_per_s, 1.35e11, 1e3);
  cr_assert_float_eq(m.scale_up.bw_per_chip_bytes_per_s, 8.1e11, 1e3);
  cr_assert_eq(hw_override(&m, "dcn_bw_scale", 4, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(m.scale_out.bw_per_chip_bytes_per_s, 2.5e10, 1);
  cr_assert_eq(hw_override(&m, "flops_scale", 2, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(m.chip.peak_flops_per_s[HW_BF16], 9.18e14, 1e3);
  cr_assert_float_eq(m.chip.peak_flops_per_s[HW_INT8], 1.836e15, 1e3);
  cr_assert_eq(m.chip.peak_flops_per_s[HW_FP64], 0); /* no unit stays no unit */
}

/* 95 GiB (Cloud TPU v5p doc) x 2, a whole number of bytes. */
Test(hw_override, bytes_scale_and_dotted_path) {
  hw_model m = entry("tpu-v5p");
  char err[512];
  cr_assert_eq(hw_override(&m, "hbm_bytes_scale", 2, err, sizeof err), 0, "%s", err);
  cr_assert_eq(m.chip.hbm_bytes, 2 * 95LL * 1024 * 1024 * 1024);
  cr_assert_eq(hw_override(&m, "chip.hbm_bytes", 1e10, err, sizeof err), 0, "%s", err);
  cr_assert_eq(m.chip.hbm_bytes, 10000000000LL);
  cr_assert_eq(hw_override(&m, "system.scale_up.latency_s", 2e-6, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(m.scale_up.latency_s, 2e-6, 1e-15);
}

/* A refused override says why and leaves the entry as it was. */
Test(hw_override, refusals_change_nothing) {
  hw_model m = entry("tpu-v5p"), before = m;
  char err[512];
  cr_assert_eq(hw_override(&m, "hbm_bw_scale", 0, err, sizeof err), -1);
  cr_assert(strstr(err, "expected a factor over 0"), "%s", err);
  cr_assert_eq(hw_override(&m, "hbm_bw_scale", 1e6, err, sizeof err), -1); /* past 1e15 B/s */
  cr_assert(strstr(err, "chip.hbm_bw_bytes_per_s"), "%s", err);
  cr_assert_eq(hw_override(&m, "chip.hbm_bytes", 1.5, err, sizeof err), -1);
  cr_assert(strstr(err, "a whole number"), "%s", err);
  cr_assert_eq(hw_override(&m, "name", 1, err, sizeof err), -1); /* a string: not settable */
  cr_assert_eq(hw_override(&m, "ici_bw_scal", 2, err, sizeof err), -1);
  cr_assert(strstr(err, "did you mean 'ici_bw_scale'"), "%s", err);
  cr_assert_eq(memcmp(&m, &before, sizeof m), 0);
}

/* Each test's study file its own: Criterion runs the tests in parallel
** processes (make unit: --jobs 2), and one writing study.json while another
** read it failed them now and then. */
static const char *study_file(const char *text) {
  char name[64];
  snprintf(name, sizeof name, "study-%ld.json", (long)getpid());
  return th_write_temp(name, text);
}

static sweep_study *load(const char *text) {
  diag *dg = diag_new();
  sweep_study *s = sweep_study_load(study_file(text), NULL, 0, dg);
  if (!s) diag_print(dg, stderr);
  diag_free(dg);
  return s;
}

/* {"from": 1, "to": 2, "step": 0.25}: 1, 1.25, 1.5, 1.75, 2 (2 included
** despite binary fractions); chips 8 x 2^k up to 64: 8, 16, 32, 64. */
Test(sweep_study, ranges_and_order) {
  sweep_study *s = load("{\"models\": [\"mlp\"], \"hw\": [\"tpu-v5p\", \"h100-sxm\"],"
                        " \"overrides\": {\"hbm_bw_scale\": {\"from\": 1, \"to\": 2, \"step\": 0.25}},"
                        " \"chips\": {\"from\": 8, \"to\": 64, \"factor\": 2}}");
  cr_assert_not_null(s);
  cr_assert_eq(sweep_study_points(s), 2 * 5 * 4);
  sweep_point p;
  sweep_point_at(s, 0, &p);
  cr_assert(p.hw == 0 && p.ov[0] == 1 && p.chips == 8);
  sweep_point_at(s, 3, &p); /* chips vary fastest */
  cr_assert(p.hw == 0 && p.ov[0] == 1 && p.chips == 64);
  sweep_point_at(s, 4 * 4 + 1, &p);
  cr_assert(p.hw == 0 && p.ov[0] == 2 && p.chips == 16);
  sweep_point_at(s, 39, &p);
  cr_assert(p.hw == 1 && p.ov[0] == 2 && p.chips == 64);
  sweep_study_free(s);
}

/* A point that leaves an override out of an explicit list has NaN there. */
Test(sweep_study, explicit_points) {
  sweep_study *s = load("{\"points\": [{\"model\": \"mlp\", \"hw\": \"tpu-v5p\", \"chips\": 4},"
                        " {\"model\": \"mlp\", \"hw\": \"tpu-v5p\", \"chips\": 8,"
                        "  \"overrides\": {\"flops_scale\": 2}}]}");
  cr_assert_not_null(s);
  cr_assert_eq(sweep_study_points(s), 2);
  sweep_point p;
  sweep_point_at(s, 0, &p);
  cr_assert(isnan(p.ov[0]) && p.chips == 4);
  sweep_point_at(s, 1, &p);
  cr_assert(p.ov[0] == 2 && p.chips == 8);
  sweep_study_free(s);
}

/* chips 1..10,000 (10,000 values) x 101 scales = 1,010,000 > SWEEP_MAX_POINTS:
** refused before any work, with the limit in the message. */
Test(sweep_study, point_limit) {
  diag *dg = diag_new();
  const char *path = study_file(
      "{\"models\": [\"mlp\"], \"hw\": [\"tpu-v5p\"], \"chips\": {\"from\": 1, \"to\": 10000, \"step\": 1},"
      " \"overrides\": {\"hbm_bw_scale\": {\"from\": 1, \"to\": 2, \"step\": 0.01}}}");
  cr_assert_null(sweep_study_load(path, NULL, 0, dg));
  cr_assert_eq(diag_count(dg), 1);
  cr_assert(strstr(diag_message(dg, 0), "over 1000000 points"), "%s", diag_message(dg, 0));
  diag_free(dg);
}

/* A what-if on the collective library's CTAs (what if NCCL ran on copy
** engines: 1) keeps the loader's rule: fewer than h100-sxm's 132 SMs. */
Test(hw_override, collective_ctas_stay_under_the_sms) {
  hw_model m = entry("h100-sxm");
  char err[512];
  cr_assert_eq(hw_override(&m, "system.scale_up.collective_ctas", 1, err, sizeof err), 0, "%s",
               err);
  cr_assert_eq(m.scale_up.collective_ctas, 1);
  cr_assert_neq(hw_override(&m, "system.scale_out.collective_ctas", 132, err, sizeof err), 0);
  cr_assert(strstr(err, "expected fewer CTAs than the chip's 132 cores"), "%s", err);
  cr_assert_eq(m.scale_out.collective_ctas, 16);
  /* fewer cores than the CTAs already there is the same mistake */
  cr_assert_neq(hw_override(&m, "chip.matrix_unit.cores", 16, err, sizeof err), 0);
  cr_assert(strstr(err, "leaves system.scale_out.collective_ctas at 16"), "%s", err);
  cr_assert_eq(m.chip.mu_cores, 132);
}
