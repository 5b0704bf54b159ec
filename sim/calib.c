/*
** calib.c -- see calib.h. A calibration run: what this machine is, the
** timing loop (each kernel JIT-run until the clock is trustworthy, the
** fastest of its repeats kept), calib_kernels and calib_measure.
**
** Four parts in four files: the kernel set (calib_set.c: graphs built with
** graph.h, lowered with lower.h, one module for the whole set so the JIT
** compiles once), the timing loop (here), the fit (calib_fit.c) and the host
** file and reports (calib_report.c). The fit is deliberately plain: a handful
** of rates, least squares on log time so a 10 us kernel weighs as much as a
** 10 ms one, minimized one parameter at a time by a grid then a golden
** section search -- no randomness, so a rerun on the same timings gives the
** same model.
*/
#include "calib.h"
#include "calib_int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lower.h"
#include "../base/strutil.h"
#include "../base/units.h"

/* ---- about this machine ---- */

static void read_machine(calib_run *r) {
  str_copy(r->cpu, sizeof r->cpu, "unknown CPU");
  str_copy(r->vendor, sizeof r->vendor, "unknown");
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    if (strncmp(line, "model name", 10) == 0 && strcmp(r->cpu, "unknown CPU") == 0)
      str_copy(r->cpu, sizeof r->cpu, v);
    else if (strncmp(line, "vendor_id", 9) == 0 && strcmp(r->vendor, "unknown") == 0)
      str_copy(r->vendor, sizeof r->vendor,
               strcmp(v, "AuthenticAMD") == 0 ? "AMD" : strcmp(v, "GenuineIntel") == 0 ? "Intel" : v);
    else if (strncmp(line, "cpu MHz", 7) == 0 && r->clock_hz == 0)
      r->clock_hz = atof(v) * 1e6;
  }
  if (f) fclose(f);
  f = fopen("/proc/meminfo", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "MemTotal:", 9) == 0) r->mem_bytes = atof(line + 9) * 1024;
  if (f) fclose(f);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  r->n_cpus = n > 0 ? (int)n : 1;
  r->l1_bytes = 32768;
  r->l2_bytes = 1048576;
  r->l1_ways = 8;
  r->line_bytes = 64;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), ways = sysconf(_SC_LEVEL1_DCACHE_ASSOC),
       l1_line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
  if (l1 > 0 && ways > 0 && l1_line > 0) {
    r->l1_bytes = (double)l1;
    r->l1_ways = (double)ways;
    r->line_bytes = (double)l1_line;
  }
#endif
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) r->l2_bytes = (double)l2;
  r->cache_bytes = l3 > 0 ? (double)l3 : l2 > 0 ? (double)l2 : 0;
#endif
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(r->date, sizeof r->date, "%Y-%m-%d %H:%M UTC", &tm);
}

/* ---- timing ---- */

static void fill(void *buf, graph_dtype dt, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    /* in [0.5, 1.5): safe for log, rsqrt and divide, no overflow in exp */
    float v = 0.5f + (float)((i * 7919) % 1000) / 1000.0f;
    switch (dt) {
    case GDT_F64: ((double *)buf)[i] = v; break;
    case GDT_F32: ((float *)buf)[i] = v; break;
    default: { /* bf16 (the only 16-bit dtype in the set): the top half */
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
    }
    }
  }
}

typedef void (*fn2)(void *, void *);
typedef void (*fn3)(void *, void *, void *);
typedef void (*fn4)(void *, void *, void *, void *);
typedef void (*fn5)(void *, void *, void *, void *, void *);
typedef void (*fn6)(void *, void *, void *, void *, void *, void *);

typedef struct {
  int n_steps;
  void *fp[CALIB_MAX_STEPS];
  void *arg[CALIB_MAX_STEPS][MAX_ARGS];
  int n_args[CALIB_MAX_STEPS];
} runnable;

static void run_once(const runnable *k) {
  for (int s = 0; s < k->n_steps; s++) {
    void *const *a = k->arg[s];
    void *f = k->fp[s];
    switch (k->n_args[s]) {
    case 2: ((fn2)f)(a[0], a[1]); break;
    case 3: ((fn3)f)(a[0], a[1], a[2]); break;
    case 4: ((fn4)f)(a[0], a[1], a[2], a[3]); break;
    case 5: ((fn5)f)(a[0], a[1], a[2], a[3], a[4]); break;
    default: ((fn6)f)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
    }
  }
}

static double run_n(const runnable *k, int64_t iters) {
  double t0 = units_now_s();
  for (int64_t i = 0; i < iters; i++) run_once(k);
  return units_now_s() - t0;
}

int calib_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Warm up (caches, page faults, the branch predictor) for one repeat's
** length, then `repeats` repeats of >= min_s each; returns the fastest
** repeat's per-run time. The minimum, not the median: on a shared VM the
** noise is other tenants taking the core or the memory bus, which only
** ever adds time, so the fastest repeat is the best estimate of what the
** code itself costs. */
static double time_kernel(const runnable *k, double min_s, int repeats) {
  int64_t iters = 1;
  double t = run_n(k, 1);
  while (t < min_s / 4 && iters < (1LL << 40)) {
    iters *= 2;
    t = run_n(k, iters);
  }
  if (t < min_s) iters = (int64_t)ceil((double)iters * min_s / (t > 0 ? t : 1e-9));
  double best = INFINITY;
  for (int r = 0; r < repeats; r++) best = fmin(best, run_n(k, iters) / (double)iters);
  return best;
}

/* Times kernel i: its own buffers, one per graph value its steps touch. */
static int measure_kernel(kset *s, int i, lower_jit *j, const lower_module *m, double min_s,
                          int repeats, char *err, size_t n) {
  kbuild *b = &s->kb[i];
  int nv = graph_count(b->g);
  void **buf = calloc((size_t)nv, sizeof *buf), **raw = calloc((size_t)nv, sizeof *raw);
  if (!buf || !raw) {
    free(buf);
    free(raw);
    snprintf(err, n, "out of memory");
    return -1;
  }
  runnable k = {.n_steps = b->n_steps};
  int rc = 0;
  for (int st = 0; st < b->n_steps && rc == 0; st++) {
    k.fp[st] = lower_jit_lookup(j, m, b->fn[st], err, n);
    if (!k.fp[st]) rc = -1;
    k.n_args[st] = b->n_args[st];
    for (int a = 0; a < b->n_args[st] && rc == 0; a++) {
      int v = b->args[st][a];
      if (!buf[v]) {
        const graph_shape *sh = &graph_get(b->g, v)->out;
        size_t bytes = ((size_t)graph_bytes(sh) + 63) / 64 * 64;
        /* Each buffer starts at its own offset within a page (value v at
        ** 17 v lines, mod 64): large buffers come page-aligned from mmap,
        ** and operands at equal page offsets make the core take a store to
        ** one for a store to the load of another (4K aliasing), which would
        ** slow the kernels whose sizes happen to be powers of two -- a
        ** placement accident, not what the kernel costs. */
        raw[v] = aligned_alloc(64, bytes + 4096);
        buf[v] = raw[v] ? (char *)raw[v] + (size_t)((17 * v) % 64) * 64 : NULL;
        if (!buf[v]) {
          snprintf(err, n, "%s: out of memory for %zu bytes", s->run->kernels[i].name, bytes);
          rc = -1;
          break;
        }
        fill(buf[v], sh->dtype, graph_elements(sh));
      }
      k.arg[st][a] = buf[v];
    }
  }
  if (rc == 0) {
    double t = time_kernel(&k, min_s, repeats), *ms = &s->run->kernels[i].measured_s;
    *ms = *ms > 0 ? fmin(*ms, t) : t; /* the fastest over passes */
  }
  for (int v = 0; v < nv; v++) free(raw[v]);
  free(raw);
  free(buf);
  return rc;
}

/* ---- building a run ---- */

static calib_run *build(const calib_opts *o, kset *s, lower_module **mod, char *err, size_t n) {
  calib_run *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, n, "out of memory");
    return NULL;
  }
  s->run = r;
  r->min_repeat_s = o && o->min_repeat_s > 0 ? o->min_repeat_s : (o && o->quick ? 5e-4 : 2e-3);
  r->repeats = o && o->repeats > 0 ? o->repeats : (o && o->quick ? 3 : 4);
  r->passes = o && o->passes > 0 ? o->passes : (o && o->quick ? 1 : 2);
  read_machine(r);
  calib_build_set(s, o && o->quick);
  lower_module *m = lower_new("calibrate");
  if (!m || calib_lower_set(s, m, err, n) != 0 || lower_optimize(m, 3, err, n) != 0) {
    lower_free(m);
    calib_kset_free(s);
    calib_run_free(r);
    return NULL;
  }
  calib_mark_vectorized(s, m);
  *mod = m;
  return r;
}

calib_run *calib_kernels(const calib_opts *o, char *err, size_t n) {
  kset s = {0};
  lower_module *m = NULL;
  calib_run *r = build(o, &s, &m, err, n);
  lower_free(m);
  calib_kset_free(&s);
  return r;
}

calib_run *calib_measure(const calib_opts *o, char *err, size_t n) {
  double t0 = units_now_s();
  kset s = {0};
  lower_module *m = NULL;
  calib_run *r = build(o, &s, &m, err, n);
  if (!r) return NULL;
  lower_jit *j = NULL;
  int rc = 0; /* build optimized the module */
  if (!(j = lower_jit_new(m, err, n))) rc = -1;
  /* Several passes over the whole set, each kernel's time the fastest of
  ** all its repeats: a burst of noise (another tenant, a page-cache flush)
  ** then hits one pass of a kernel, not all of its repeats, and fit and
  ** holdout kernels, which alternate in the set, share every moment of
  ** the run alike. */
  for (int pass = 0; rc == 0 && pass < r->passes; pass++)
    for (int i = 0; rc == 0 && i < r->n_kernels; i++)
      rc = measure_kernel(&s, i, j, m, r->min_repeat_s, r->repeats, err, n);
  lower_jit_free(j);
  lower_free(m);
  calib_kset_free(&s);
  if (rc == 0 && calib_fit_caches(r->kernels, r->n_kernels, r->l1_bytes, r->l2_bytes, &r->model) < 0) {
    snprintf(err, n, "no fit kernels were timed");
    rc = -1;
  }
  if (rc != 0) {
    calib_run_free(r);
    return NULL;
  }
  r->wall_s = units_now_s() - t0;
  return r;
}

void calib_run_free(calib_run *r) {
  if (!r) return;
  free(r->kernels);
  free(r);
}

