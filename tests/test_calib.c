/*
** test_calib.c -- host calibration: the fit recovers a known model from
** synthetic timings, the holdout set never repeats a fit shape, the
** broadcast kernel calibration needs counts and computes right, and a
** quick run end to end writes a host file the hardware loader accepts.
** No wall-clock accuracy is asserted: shared 2-core machines are noisy.
*/
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "../hw_models/hw.h"
#include "../sim/calib.h"
#include "../base/diag.h"
#include "../sim/lower.h"
#include "../sim/optime.h"
#include "helpers.h"

static calib_model known_model(void) {
  calib_model m = {0};
  m.matmul_flops_per_s[GDT_BF16] = 2.5e9;
  m.matmul_flops_per_s[GDT_F32] = 3.5e9;
  m.matmul_flops_per_s[GDT_F64] = 1.5e9;
  m.matmul_miss_s = 1e-9;
  m.walk_page_s = 1.5e-9;
  m.vector_flops_per_s = 2e10;
  m.conversions_per_s = 3e10;
  m.reduce_row_flops_per_s = 1.8e9;
  m.reduce_overlap_elems = 80;
  m.reduce_minmax_flops_per_s = 9e9;
  m.reduce_row_s = 7e-8;
  m.reduce_col_flops_per_s = 2.5e9;
  m.reduce_vec_flops_per_s = 4e10;
  m.reduce_miss_s = 1.2e-9;
  m.transcendentals_per_s[CALIB_TR_EXP] = 3e8;
  m.transcendentals_per_s[CALIB_TR_TANH] = 6e7;
  m.transcendentals_per_s[CALIB_TR_SQRT] = 5e9;
  m.transcendentals_f64_per_s[CALIB_TR_EXP] = 2e8;
  m.transcendentals_f64_per_s[CALIB_TR_TANH] = 5e7;
  m.transcendentals_f64_per_s[CALIB_TR_SQRT] = 2e9;
  m.l1_bw_bytes_per_s = 4e11;
  m.l1_bytes = 49152;
  m.cache_bw_bytes_per_s = 1.6e11;
  m.cache_bytes = 1048576;
  m.l3_bw_bytes_per_s = 6e10;
  m.l3_bytes = 1.6e7;
  m.bw_bytes_per_s = 2e10;
  m.op_overhead_s = 2e-8;
  return m;
}

static double rel(double a, double b) { return fabs(a / b - 1); }

Test(calib, fit_recovers_a_known_model_from_synthetic_timings) {
  char err[256] = "";
  calib_opts o = {.quick = false};
  calib_run *r = calib_kernels(&o, err, sizeof err);
  cr_assert_not_null(r, "%s", err);
  calib_model want = known_model(), got;
  for (int i = 0; i < r->n_kernels; i++) r->kernels[i].measured_s = calib_predict(&want, &r->kernels[i]);
  cr_assert_gt(calib_fit_caches(r->kernels, r->n_kernels, want.l1_bytes, want.cache_bytes, &got), 100);
  /* the fit set binds every parameter, so noiseless timings pin each one */
  static const graph_dtype DT[] = {GDT_BF16, GDT_F32, GDT_F64};
  for (int d = 0; d < 3; d++)
    cr_assert_lt(rel(got.matmul_flops_per_s[DT[d]], want.matmul_flops_per_s[DT[d]]), 1e-2,
                 "matmul %s: %g vs %g", graph_dtype_name(DT[d]), got.matmul_flops_per_s[DT[d]],
                 want.matmul_flops_per_s[DT[d]]);
  cr_assert_eq(got.matmul_flops_per_s[GDT_F16], 0, "no f16 matmul in the set: not fitted");
  static const struct {
    const char *what;
    size_t off;
  } P[] = {
#define F(x) {#x, offsetof(calib_model, x)}
      F(matmul_miss_s),          F(walk_page_s),            F(vector_flops_per_s),
      F(conversions_per_s),      F(reduce_row_flops_per_s), F(reduce_overlap_elems),
      F(reduce_minmax_flops_per_s), F(reduce_row_s),        F(reduce_col_flops_per_s),
      F(reduce_vec_flops_per_s), F(reduce_miss_s),          F(l1_bw_bytes_per_s),
      F(cache_bw_bytes_per_s),   F(l3_bw_bytes_per_s),      F(l3_bytes),
      F(bw_bytes_per_s),
#undef F
  };
  for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
    double g = *(const double *)((const char *)&got + P[p].off), w = *(const double *)((const char *)&want + P[p].off);
    cr_assert_lt(rel(g, w), 2e-2, "%s: %g vs %g", P[p].what, g, w);
  }
  for (int t = 0; t < CALIB_TR_COUNT; t++) {
    cr_assert_lt(rel(got.transcendentals_per_s[t], want.transcendentals_per_s[t]), 1e-2,
                 "trans %d: %g", t, got.transcendentals_per_s[t]);
    cr_assert_lt(rel(got.transcendentals_f64_per_s[t], want.transcendentals_f64_per_s[t]), 1e-2,
                 "f64 trans %d: %g", t, got.transcendentals_f64_per_s[t]);
  }
  cr_assert_float_eq(got.cache_bytes, want.cache_bytes, 1e-6, "given, not fitted");
  cr_assert_lt(rel(got.op_overhead_s, want.op_overhead_s), 5e-2, "overhead %g", got.op_overhead_s);
  double med, p90;
  calib_errors(r->kernels, r->n_kernels, CALIB_HOLDOUT, &med, &p90);
  cr_assert_lt(p90, 1e-2, "holdout p90 %g on noiseless timings", p90);
  /* deterministic: the same timings give the same model */
  calib_model again;
  calib_fit_caches(r->kernels, r->n_kernels, want.l1_bytes, want.cache_bytes, &again);
  cr_assert(memcmp(&again, &got, sizeof got) == 0);
  calib_run_free(r);
}

/* The counts the model's new terms stand on, for shapes whose answer is
** known: a 128x128 f32 dot's rhs column (stride 512 B) crowds 8 of 64 L1
** sets with 16 lines each, over 12 ways: every load misses; at 160x160
** (stride 640 B) the column spreads over 32 sets and stays. bf16 steps
** convert each element loaded and stored; f32 steps convert none. */
Test(calib, steps_count_walk_misses_conversions_and_vectorization) {
  char err[256] = "";
  calib_opts o = {.quick = false};
  calib_run *r = calib_kernels(&o, err, sizeof err);
  cr_assert_not_null(r, "%s", err);
  bool l1_48k_12way = r->l1_bytes == 49152 && r->l1_ways == 12 && r->line_bytes == 64;
  int seen = 0;
  for (int i = 0; i < r->n_kernels; i++) {
    const calib_kernel *k = &r->kernels[i];
    const calib_step *s = &k->steps[0];
    if (l1_48k_12way && strcmp(k->name, "matmul/f32/128x128x128") == 0) {
      cr_assert_float_eq(s->walk_misses, 128.0 * 128 * 128, 1e-9);
      cr_assert_float_eq(s->walk_pages, 128.0 * 128 * 128 * 512 / 4096, 1e-9);
      seen++;
    }
    if (l1_48k_12way && strcmp(k->name, "matmul/f32/160x160x160") == 0) {
      cr_assert_float_eq(s->walk_misses, 0, 1e-9);
      seen++;
    }
    if (strcmp(k->name, "elementwise/add/bf16/16384") == 0) {
      cr_assert_float_eq(s->conversions, 3 * 16384, 1e-9);
      seen++;
    }
    if (strcmp(k->name, "elementwise/add/f32/16384") == 0) {
      cr_assert_float_eq(s->conversions, 0, 1e-9);
      seen++;
    }
    if (strcmp(k->name, "reduce/sum-cols/f32/16x16384") == 0) {
      cr_assert_eq(s->unit, CALIB_REDUCE_COL);
      cr_assert(s->vectorized, "a 16-row column sum unrolls and vectorizes");
      seen++;
    }
    if (strcmp(k->name, "reduce/sum-cols/f32/256x1024") == 0) {
      cr_assert_not(s->vectorized, "a 256-row column sum stays a strided loop");
      cr_assert_gt(s->walk_misses, 0);
      seen++;
    }
    if (strcmp(k->name, "reduce/max-rows/f32/512x512") == 0) {
      cr_assert_eq(s->unit, CALIB_REDUCE_MINMAX);
      cr_assert_float_eq(s->rows, 512, 1e-9);
      seen++;
    }
  }
  cr_assert_eq(seen, l1_48k_12way ? 7 : 5);
  calib_run_free(r);
}

Test(calib, fit_is_robust_to_noise_and_reports_it_as_error) {
  char err[256] = "";
  calib_opts o = {.quick = true};
  calib_run *r = calib_kernels(&o, err, sizeof err);
  cr_assert_not_null(r, "%s", err);
  calib_model want = known_model(), got;
  /* +-10% alternating: the fit lands near the truth, errors near 10% */
  for (int i = 0; i < r->n_kernels; i++)
    r->kernels[i].measured_s = calib_predict(&want, &r->kernels[i]) * (i % 2 ? 1.1 : 0.9);
  cr_assert_geq(calib_fit(r->kernels, r->n_kernels, &got), 1);
  cr_assert_lt(rel(got.matmul_flops_per_s[GDT_F32], want.matmul_flops_per_s[GDT_F32]), 0.12);
  double med, p90;
  calib_errors(r->kernels, r->n_kernels, CALIB_FIT, &med, &p90);
  cr_assert(med > 0.02 && med < 0.2, "fit median %g", med);
  calib_run_free(r);
}

Test(calib, errors_are_median_and_nearest_rank_p90) {
  calib_kernel k[10];
  memset(k, 0, sizeof k);
  for (int i = 0; i < 10; i++) {
    k[i].set = CALIB_HOLDOUT;
    k[i].measured_s = 1;
    k[i].predicted_s = 1 + 0.1 * (i + 1); /* errors 0.1 .. 1.0 */
  }
  k[0].set = CALIB_FIT;
  double med, p90;
  cr_assert_eq(calib_errors(k, 10, CALIB_HOLDOUT, &med, &p90), 9);
  cr_assert_float_eq(med, 0.6, 1e-12);  /* 0.2..1.0: the 5th */
  cr_assert_float_eq(p90, 1.0, 1e-12);  /* ceil(0.9 * 9) = 9th */
  cr_assert_eq(calib_errors(k, 10, CALIB_FIT, &med, &p90), 1);
  cr_assert_float_eq(med, 0.1, 1e-12);
}

static bool same_shape_in(const calib_run *r, int i, calib_set s) {
  for (int j = 0; j < r->n_kernels; j++)
    if (j != i && r->kernels[j].set == s && strcmp(r->kernels[j].name, r->kernels[i].name) == 0)
      return true;
  return false;
}

Test(calib, holdout_never_repeats_a_fit_kernel_and_every_family_has_both) {
  for (int q = 0; q < 2; q++) {
    char err[256] = "";
    calib_opts o = {.quick = q};
    calib_run *r = calib_kernels(&o, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    static const char *const FAM[] = {"matmul", "elementwise", "reduce", "softmax", "layernorm"};
    int fit[5] = {0}, hold[5] = {0};
    /* every family holds out every dtype it fits */
    int fit_dt[5][GDT_COUNT] = {{0}}, hold_dt[5][GDT_COUNT] = {{0}};
    for (int i = 0; i < r->n_kernels; i++) {
      const calib_kernel *k = &r->kernels[i];
      /* names carry kind, dtype and shape: a holdout name never appears in the fit set */
      if (k->set == CALIB_HOLDOUT)
        cr_assert_not(same_shape_in(r, i, CALIB_FIT), "%s is in both sets", k->name);
      cr_assert_not(same_shape_in(r, i, k->set), "%s twice", k->name);
      cr_assert_gt(k->n_steps, 0, "%s", k->name);
      for (int f = 0; f < 5; f++)
        if (strcmp(k->family, FAM[f]) == 0) {
          (k->set == CALIB_FIT ? fit : hold)[f]++;
          (k->set == CALIB_FIT ? fit_dt : hold_dt)[f][k->steps[0].dtype]++;
        }
      for (int s = 0; s < k->n_steps; s++) {
        const graph_cost *c = &k->steps[s].cost;
        cr_assert_gt(c->bytes_read + c->bytes_written, 0, "%s step %d moves nothing", k->name, s);
      }
    }
    for (int f = 0; f < 5; f++) {
      cr_assert(fit[f] > 0 && hold[f] > 0, "%s: %d fit, %d holdout", FAM[f], fit[f], hold[f]);
      for (int d = 0; d < GDT_COUNT; d++)
        cr_assert(fit_dt[f][d] == 0 || hold_dt[f][d] > 0, "%s %s: fitted, never held out", FAM[f],
                  graph_dtype_name((graph_dtype)d));
    }
    calib_run_free(r);
  }
}

Test(calib, softmax_is_seven_ops_in_six_steps_counted_off_the_ir) {
  char err[256] = "";
  calib_opts o = {.quick = true};
  calib_run *r = calib_kernels(&o, err, sizeof err);
  cr_assert_not_null(r, "%s", err);
  const calib_kernel *k = NULL;
  for (int i = 0; i < r->n_kernels; i++)
    if (strcmp(r->kernels[i].name, "softmax/f32/16x64") == 0) k = &r->kernels[i];
  cr_assert_not_null(k);
  cr_assert_eq(k->n_steps, 6);
  /* max: 16 x 63 combines; exp(x - max): 1024 subtracts and 1024 exps;
  ** sum: 16 x 63; divide: 1024 */
  cr_assert_eq(k->steps[0].unit, CALIB_REDUCE_MINMAX); /* the max: vectorized */
  cr_assert_eq(k->steps[3].unit, CALIB_REDUCE_ROW);    /* the sum: a serial chain */
  cr_assert_float_eq(k->steps[0].cost.flops[GDT_F32], 16 * 63, 1e-9);
  cr_assert_float_eq(graph_cost_flops(&k->steps[1].cost), 0, 1e-9); /* the broadcast */
  cr_assert_float_eq(k->steps[1].cost.bytes_written, 1024 * 4, 1e-9);
  cr_assert_float_eq(k->steps[2].cost.flops[GDT_F32], 1024, 1e-9);
  cr_assert_float_eq(k->steps[2].cost.transcendentals, 1024, 1e-9);
  cr_assert_eq(k->steps[2].trans, CALIB_TR_EXP);
  cr_assert_float_eq(k->steps[5].cost.flops[GDT_F32], 1024, 1e-9);
  calib_run_free(r);
}

Test(calib, broadcast_kernel_count_equals_formula_and_jit_copies_right) {
  static const graph_dtype DTS[] = {GDT_F32, GDT_F64, GDT_BF16};
  for (int d = 0; d < 3; d++) {
    graph_dtype dt = DTS[d];
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", GRAPH_SHAPE(dt, 3), 0);
    /* [3] -> [3, 5] along dim 0 (a row statistic) */
    int b = graph_broadcast(g, x, GRAPH_SHAPE(dt, 3, 5), graph_dims_of(1, 0));
    int y = graph_parameter(g, "y", GRAPH_SHAPE(dt, 5), 0);
    int c = graph_broadcast(g, y, GRAPH_SHAPE(dt, 3, 5), graph_dims_of(1, 1)); /* a column */
    cr_assert(graph_ok(g));
    lower_module *m = lower_new("t");
    char err[256] = "";
    int fb = lower_broadcast(m, g, b, err, sizeof err), fc = lower_broadcast(m, g, c, err, sizeof err);
    cr_assert(fb == 0 && fc == 1, "%s", err);
    cr_assert_eq(lower_broadcast(m, g, x, err, sizeof err), -1, "a parameter is not a broadcast");
    cr_assert_eq(lower_verify(m, err, sizeof err), 0, "%s", err);
    graph_cost ir, want = graph_op_cost(g, b);
    cr_assert_eq(lower_op_cost(m, fb, &ir, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(ir.bytes_read, want.bytes_read, 1e-9);
    cr_assert_float_eq(ir.bytes_written, want.bytes_written, 1e-9);
    cr_assert_float_eq(graph_cost_flops(&ir), 0, 1e-9);
    cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
    lower_jit *j = lower_jit_new(m, err, sizeof err);
    cr_assert_not_null(j, "%s", err);
    void *pb = lower_jit_lookup(j, m, fb, err, sizeof err), *pc = lower_jit_lookup(j, m, fc, err, sizeof err);
    cr_assert(pb && pc, "%s", err);
    uint64_t in[5], out[15];
    int bytes = graph_dtype_bits(dt) / 8;
    for (int i = 0; i < 5; i++) { /* distinct bit patterns: exact in every dtype */
      double v = 1 + i;
      if (dt == GDT_F64) ((double *)in)[i] = v;
      else if (dt == GDT_F32) ((float *)in)[i] = (float)v;
      else {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)in)[i] = (uint16_t)(u >> 16);
      }
    }
    ((void (*)(void *, void *))pb)(in, out);
    for (int r = 0; r < 3; r++)
      for (int col = 0; col < 5; col++)
        cr_assert_eq(memcmp((char *)out + (r * 5 + col) * bytes, (char *)in + r * bytes, (size_t)bytes), 0,
                     "%s row broadcast [%d,%d]", graph_dtype_name(dt), r, col);
    ((void (*)(void *, void *))pc)(in, out);
    for (int r = 0; r < 3; r++)
      for (int col = 0; col < 5; col++)
        cr_assert_eq(memcmp((char *)out + (r * 5 + col) * bytes, (char *)in + col * bytes, (size_t)bytes), 0,
                     "%s column broadcast [%d,%d]", graph_dtype_name(dt), r, col);
    lower_jit_free(j);
    lower_free(m);
    graph_free(g);
  }
}


Test(calib, quick_run_measures_every_kernel_and_writes_a_loadable_host_file) {
  char err[512] = "";
  calib_opts o = {.quick = true};
  calib_run *r = calib_measure(&o, err, sizeof err);
  cr_assert_not_null(r, "%s", err);
  for (int i = 0; i < r->n_kernels; i++) {
    cr_assert_gt(r->kernels[i].measured_s, 0, "%s", r->kernels[i].name);
    cr_assert(isfinite(r->kernels[i].predicted_s) && r->kernels[i].predicted_s > 0, "%s",
              r->kernels[i].name);
  }
  /* the report JSON: every contract field, on every kernel */
  char *js = calib_report_json(r);
  cJSON *root = cJSON_Parse(js);
  cr_assert_not_null(root);
  const cJSON *ks = cJSON_GetObjectItem(root, "kernels");
  cr_assert(cJSON_IsArray(ks) && cJSON_GetArraySize(ks) == r->n_kernels);
  int holdout = 0;
  for (const cJSON *k = ks->child; k; k = k->next) {
    const cJSON *set = cJSON_GetObjectItem(k, "set");
    cr_assert(cJSON_IsString(cJSON_GetObjectItem(k, "name")));
    cr_assert(cJSON_IsString(set) &&
              (strcmp(set->valuestring, "fit") == 0 || strcmp(set->valuestring, "holdout") == 0));
    holdout += strcmp(set->valuestring, "holdout") == 0;
    cr_assert_gt(cJSON_GetObjectItem(k, "predicted_s")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(k, "measured_s")->valuedouble, 0);
  }
  cr_assert_gt(holdout, 0);
  cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(root, "median_abs_err_holdout")));
  cJSON_Delete(root);
  free(js);

  /* the host file loads through the hardware loader, and times a dot as
  ** the calibration model does (tiles of 1 on one core: no padding) */
  const char *path = "tests/out/calib/unit-host.json";
  cr_assert_eq(calib_write_host(r, path, err, sizeof err), 0, "%s", err);
  char *text = th_slurp(path, NULL);
  diag *dg = diag_new();
  hw_model *hw = hw_load(path, text, strlen(text), dg);
  if (!hw) diag_print(dg, stderr);
  cr_assert_not_null(hw, "the host file does not load");
  cr_assert_str_eq(hw->name, "host");
  cr_assert_eq(hw->kind, HW_CPU);
  cr_assert_gt(hw->chip.peak_flops_per_s[HW_FP32], 0);
  cr_assert_gt(hw->chip.peak_flops_per_s[HW_BF16], 0);
  cr_assert_gt(hw->chip.vector_flops_per_s, 0);
  cr_assert_gt(hw->chip.hbm_bw_bytes_per_s, 0);
  cr_assert_float_eq(hw->chip.peak_flops_per_s[HW_FP32], r->model.matmul_flops_per_s[GDT_F32],
                     1e-9 * r->model.matmul_flops_per_s[GDT_F32]);
  graph *g = graph_new("t");
  int a = graph_parameter(g, "a", GRAPH_SHAPE(GDT_F32, 256, 512), 0);
  int w = graph_parameter(g, "w", GRAPH_SHAPE(GDT_F32, 512, 384), 0);
  int y = graph_matmul(g, a, w);
  optime_result ot;
  cr_assert_eq(optime_op(hw, g, y, &ot, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(ot.compute_s, 2.0 * 256 * 512 * 384 / r->model.matmul_flops_per_s[GDT_F32],
                     1e-9 * ot.compute_s);
  graph_free(g);
  hw_free(hw);
  diag_free(dg);
  free(text);
  calib_run_free(r);
}

Test(calib, unwritable_paths_are_refused_with_the_path_named) {
  char err[512] = "";
  cr_assert_eq(calib_check_path("/proc/nope/host.json", err, sizeof err), -1);
  cr_assert(strstr(err, "cannot write '/proc/nope/host.json'"), "%s", err);
  cr_assert_eq(calib_check_path("tests", err, sizeof err), -1);
  cr_assert(strstr(err, "is a directory"), "%s", err);
  cr_assert_eq(calib_check_path("tests/out/calib/check/new.json", err, sizeof err), 0, "%s", err);
  FILE *f = fopen("tests/out/calib/check/new.json", "r");
  cr_assert_null(f, "the check left a file behind");
}

Test(calib, default_path_follows_xdg_then_home) {
  char buf[256];
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  cr_assert_eq(calib_default_path(buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "/x/cache/tpusim/host.json");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  cr_assert_eq(calib_default_path(buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "/home/u/.cache/tpusim/host.json");
  unsetenv("HOME");
  cr_assert_eq(calib_default_path(buf, sizeof buf), -1);
}
