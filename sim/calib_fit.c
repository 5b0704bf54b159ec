/*
** calib_fit.c -- the host model and its fit: predicted step and kernel
** times from a handful of rates, and the least-squares fit on log time
** (a grid, then a golden-section search, one parameter at a time), with
** the holdout errors.
**
** Separate from the kernels and the timing: the fit reads timings only, so
** tests feed it generated ones (tests/test_calib.c).
*/
#include "calib_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model and its fit ---- */

static double rate_time(double work, double rate) {
  if (work <= 0) return 0;
  return rate > 0 ? work / rate : INFINITY; /* a rate the fit never saw */
}

/* Streaming W bytes through the hierarchy: the share of them a cache of C
** bytes holds is min(1, C / W); each share moves at its level's rate. */
static double memory_time(const calib_model *m, double w) {
  if (w <= 0) return 0;
  double l1 = m->l1_bytes > 0 && m->l1_bw_bytes_per_s > 0 ? fmin(1, m->l1_bytes / w) : 0;
  double l2 = m->cache_bytes > 0 ? fmax(l1, fmin(1, m->cache_bytes / w)) : l1;
  double l3 = m->l3_bytes > 0 ? fmax(l2, fmin(1, m->l3_bytes / w)) : l2;
  return w * ((l1 > 0 ? l1 / m->l1_bw_bytes_per_s : 0) +
              (l2 > l1 ? (l2 - l1) / m->cache_bw_bytes_per_s : 0) +
              (l3 > l2 ? (l3 - l2) / m->l3_bw_bytes_per_s : 0) +
              (l3 < 1 ? (1 - l3) / m->bw_bytes_per_s : 0));
}

double calib_predict_step(const calib_model *m, const calib_step *s) {
  double flops = graph_cost_flops(&s->cost);
  double compute;
  if (s->unit == CALIB_MATRIX) {
    compute = rate_time(flops, m->matmul_flops_per_s[s->dtype]) + s->walk_misses * m->matmul_miss_s +
              s->walk_pages * m->walk_page_s;
  } else {
    const double *tr = s->dtype == GDT_F64 ? m->transcendentals_f64_per_s : m->transcendentals_per_s;
    compute = rate_time(s->cost.transcendentals, tr[s->trans]) +
              rate_time(s->conversions, m->conversions_per_s);
    /* vector code: an f64 lane is two f32 lanes wide, so half the rate */
    double lanes = s->dtype == GDT_F64 ? 2 * flops : flops;
    switch (s->vectorized && s->unit == CALIB_REDUCE_COL ? CALIB_VECTOR : s->unit) {
    case CALIB_VECTOR:
      /* a column reduce LLVM unrolled (a short leading dim of constant
      ** length) and then vectorized across its outputs. A vectorized sum
      ** over rows is still one ordered chain (no reassociation), and a
      ** max over rows is always vectorized: neither changes class. */
      compute += rate_time(lanes, s->unit == CALIB_VECTOR ? m->vector_flops_per_s : m->reduce_vec_flops_per_s);
      break;
    case CALIB_REDUCE_ROW: {
      /* one serial chain per row, but the next rows' chains are
      ** independent: the out-of-order core runs short rows side by side */
      double len = s->rows > 0 ? flops / s->rows + 1 : 1;
      compute += rate_time(flops, m->reduce_row_flops_per_s) / (1 + m->reduce_overlap_elems / len);
      break;
    }
    case CALIB_REDUCE_MINMAX:
      compute += rate_time(lanes, m->reduce_minmax_flops_per_s) + s->rows * m->reduce_row_s;
      break;
    case CALIB_REDUCE_COL:
      compute += rate_time(flops, m->reduce_col_flops_per_s) + s->walk_misses * m->reduce_miss_s +
                 s->walk_pages * m->walk_page_s;
      break;
    default: break;
    }
  }
  return m->op_overhead_s + fmax(compute, memory_time(m, s->cost.bytes_read + s->cost.bytes_written));
}

double calib_predict(const calib_model *m, const calib_kernel *k) {
  double t = 0;
  for (int i = 0; i < k->n_steps; i++) t += calib_predict_step(m, &k->steps[i]);
  return t;
}

/* The fitted parameters, as logs, in this order. */
enum { P_MM_BF16, P_MM_F16, P_MM_F32, P_MM_F64, P_MM_MISS, P_VEC, P_CONV, P_RED_ROW, P_RED_OVERLAP,
       P_RED_MINMAX, P_RED_ROW_S, P_RED_COL, P_RED_VEC, P_RED_MISS, P_PAGE, P_TR, P_TR64 = P_TR + CALIB_TR_COUNT,
       P_BW_L1 = P_TR64 + CALIB_TR_COUNT, P_BW_L2, P_BW_L3, P_L3, P_BW, P_OVH,
       P_L1, P_L2, /* given, not fitted: held in th, never searched */
       NP };
static const graph_dtype MM_OF[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64};

static calib_model model_of(const double *th, const bool *used) {
  calib_model m = {0};
  double v[NP];
  for (int p = 0; p < NP; p++) v[p] = used[p] ? exp(th[p]) : 0;
  for (int p = P_MM_BF16; p <= P_MM_F64; p++) m.matmul_flops_per_s[MM_OF[p]] = v[p];
  m.matmul_miss_s = v[P_MM_MISS];
  m.vector_flops_per_s = v[P_VEC];
  m.conversions_per_s = v[P_CONV];
  m.reduce_row_flops_per_s = v[P_RED_ROW];
  m.reduce_overlap_elems = v[P_RED_OVERLAP];
  m.reduce_vec_flops_per_s = v[P_RED_VEC];
  m.reduce_minmax_flops_per_s = v[P_RED_MINMAX];
  m.reduce_row_s = v[P_RED_ROW_S];
  m.reduce_col_flops_per_s = v[P_RED_COL];
  m.reduce_miss_s = v[P_RED_MISS];
  for (int t = 0; t < CALIB_TR_COUNT; t++) {
    m.transcendentals_per_s[t] = v[P_TR + t];
    m.transcendentals_f64_per_s[t] = v[P_TR64 + t];
  }
  m.walk_page_s = v[P_PAGE];
  m.l1_bytes = exp(th[P_L1]);
  m.cache_bytes = exp(th[P_L2]);
  m.l1_bw_bytes_per_s = v[P_BW_L1];
  m.cache_bw_bytes_per_s = v[P_BW_L2];
  m.l3_bw_bytes_per_s = v[P_BW_L3];
  m.l3_bytes = v[P_L3];
  m.bw_bytes_per_s = v[P_BW];
  m.op_overhead_s = v[P_OVH];
  return m;
}

static double loss(const calib_kernel *k, int n, const double *th, const bool *used) {
  calib_model m = model_of(th, used);
  double sum = 0;
  for (int i = 0; i < n; i++) {
    if (k[i].set != CALIB_FIT || !(k[i].measured_s > 0)) continue;
    double e = log(calib_predict(&m, &k[i]) / k[i].measured_s);
    sum += e * e;
  }
  return sum;
}

/* Minimizes the loss over parameter p in [lo, hi]: a grid to find the
** basin (the max() in the roofline makes the loss flat in places), then a
** golden section search around the best grid point. */
static void line_search(const calib_kernel *k, int n, double *th, const bool *used, int p,
                        double lo, double hi) {
  enum { GRID = 48 };
  double best = th[p], best_l = loss(k, n, th, used), step = (hi - lo) / GRID;
  for (int i = 0; i <= GRID; i++) {
    th[p] = lo + step * i;
    double l = loss(k, n, th, used);
    if (l < best_l) {
      best_l = l;
      best = th[p];
    }
  }
  const double gr = 0.6180339887498949;
  double a = best - step, b = best + step;
  double c = b - gr * (b - a), d = a + gr * (b - a);
  th[p] = c;
  double lc = loss(k, n, th, used);
  th[p] = d;
  double ld = loss(k, n, th, used);
  for (int it = 0; it < 40; it++) {
    if (lc < ld) {
      b = d;
      d = c;
      ld = lc;
      c = b - gr * (b - a);
      th[p] = c;
      lc = loss(k, n, th, used);
    } else {
      a = c;
      c = d;
      lc = ld;
      d = a + gr * (b - a);
      th[p] = d;
      ld = loss(k, n, th, used);
    }
  }
  double mid = lc < ld ? c : d, lm = lc < ld ? lc : ld;
  th[p] = lm < best_l ? mid : best;
}

/* Coordinate descent over every parameter, from a search span that
** halves after the first sweeps. The cache capacities are parameters like
** the rates: the smooth share min(1, C / W) makes the loss continuous in
** them, where a step at C made it flat between the sizes of the set. */
static void descend(const calib_kernel *k, int n, double *th, const bool *used, int sweeps,
                    double span) {
  double prev = loss(k, n, th, used);
  for (int sweep = 0; sweep < sweeps; sweep++) {
    for (int p = 0; p < NP; p++)
      if (used[p]) line_search(k, n, th, used, p, th[p] - span, th[p] + span);
    double l = loss(k, n, th, used);
    if (sweep >= 3 && prev - l <= 1e-9 * (1 + l)) break; /* converged: a finer fit moves no prediction */
    prev = l;
    if (sweep >= 2) span = fmax(0.05, span * 0.5);
  }
}

int calib_fit(calib_kernel *k, int n, calib_model *out) {
  return calib_fit_caches(k, n, 49152, 1048576, out);
}

int calib_fit_caches(calib_kernel *k, int n, double l1_bytes, double l2_bytes, calib_model *out) {
  bool used[NP] = {false};
  int n_fit = 0;
  for (int i = 0; i < n; i++) {
    if (k[i].set != CALIB_FIT || !(k[i].measured_s > 0)) continue;
    n_fit++;
    used[P_OVH] = true;
    for (int s = 0; s < k[i].n_steps; s++) {
      const calib_step *st = &k[i].steps[s];
      bool flops = graph_cost_flops(&st->cost) > 0;
      if (st->unit == CALIB_MATRIX && flops)
        for (int p = P_MM_BF16; p <= P_MM_F64; p++) used[p] |= MM_OF[p] == st->dtype;
      if (st->unit == CALIB_MATRIX && st->walk_misses > 0) used[P_MM_MISS] = true;
      if (st->unit == CALIB_VECTOR && flops) used[P_VEC] = true;
      bool vec = st->vectorized && st->unit == CALIB_REDUCE_COL;
      if (st->unit != CALIB_VECTOR && vec && flops) used[P_RED_VEC] = true;
      if (st->unit == CALIB_REDUCE_ROW && !vec && flops) used[P_RED_ROW] = used[P_RED_OVERLAP] = true;
      if (st->unit == CALIB_REDUCE_MINMAX && flops) used[P_RED_MINMAX] = used[P_RED_ROW_S] = true;
      if (st->unit == CALIB_REDUCE_COL && !vec && flops) used[P_RED_COL] = true;
      if (st->unit == CALIB_REDUCE_COL && !st->vectorized && st->walk_misses > 0) used[P_RED_MISS] = true;
      if (st->conversions > 0) used[P_CONV] = true;
      if (st->cost.transcendentals > 0)
        used[(st->dtype == GDT_F64 ? P_TR64 : P_TR) + (int)st->trans] = true;
      if (st->cost.bytes_read + st->cost.bytes_written > 0)
        used[P_BW] = used[P_BW_L1] = used[P_BW_L2] = used[P_BW_L3] = used[P_L3] = true;
      if (st->walk_pages > 0) used[P_PAGE] = true;
    }
  }
  if (n_fit == 0) return -1;
  /* a start of the order of any current CPU core; the first sweeps search
  ** three decades either side of it */
  double th[NP];
  for (int p = P_MM_BF16; p <= P_MM_F64; p++) th[p] = log(1e9);
  th[P_MM_MISS] = th[P_RED_MISS] = log(1e-9);
  th[P_VEC] = log(1e10);
  th[P_CONV] = log(1e10);
  th[P_RED_ROW] = th[P_RED_MINMAX] = th[P_RED_COL] = log(1e9);
  th[P_RED_ROW_S] = log(1e-8);
  th[P_RED_OVERLAP] = log(64.0);
  th[P_RED_VEC] = log(1e10);
  for (int t = 0; t < CALIB_TR_COUNT; t++) th[P_TR + t] = th[P_TR64 + t] = log(1e8);
  th[P_PAGE] = log(1e-9);
  th[P_BW_L1] = log(3e11);
  th[P_L1] = log(l1_bytes > 0 ? l1_bytes : 49152);
  th[P_L2] = log(l2_bytes > 0 ? l2_bytes : 1048576);
  th[P_BW_L2] = log(1e11);
  th[P_BW_L3] = log(3e10);
  th[P_L3] = log(16777216.0);
  th[P_BW] = log(1e10);
  th[P_OVH] = log(1e-7);
  descend(k, n, th, used, 60, 3 * log(10.0));
  descend(k, n, th, used, 60, 0.5 * log(10.0));
  *out = model_of(th, used);
  for (int i = 0; i < n; i++) k[i].predicted_s = calib_predict(out, &k[i]);
  return n_fit;
}

int calib_errors(const calib_kernel *k, int n, calib_set s, double *median, double *p90) {
  double *e = malloc(sizeof *e * (size_t)(n > 0 ? n : 1));
  int m = 0;
  for (int i = 0; e && i < n; i++)
    if (k[i].set == s && k[i].measured_s > 0) e[m++] = fabs(k[i].predicted_s / k[i].measured_s - 1);
  *median = *p90 = 0;
  if (m > 0) {
    qsort(e, (size_t)m, sizeof *e, calib_cmp_double);
    *median = m % 2 ? e[m / 2] : 0.5 * (e[m / 2 - 1] + e[m / 2]);
    int r = (int)ceil(0.9 * m) - 1; /* nearest rank */
    *p90 = e[r < 0 ? 0 : r];
  }
  free(e);
  return m;
}

