/*
** calib_report.c -- what a run is written as: the host file (a hardware
** entry in the catalog's JSON, with its sources), where it goes, the text
** and JSON reports and the summary.
**
** Separate from the fit (calib_fit.c): output formats change with their
** readers, the model does not.
*/
#include "calib_int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../base/strutil.h"
#include "../base/units.h"

/* ---- the host file ---- */

static int count_set(const calib_run *r, calib_set s) {
  int c = 0;
  for (int i = 0; i < r->n_kernels; i++) c += r->kernels[i].set == s;
  return c;
}

static void add_num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }

static void add_source(cJSON *src, const char *id, const char *title, const char *url) {
  cJSON *s = cJSON_AddObjectToObject(src, id);
  cJSON_AddStringToObject(s, "title", title);
  cJSON_AddStringToObject(s, "url", url);
}

/* The schema's one transcendental rate: the exp family's (softmax and
** silu's), else whichever family was fitted. */
static double host_trans_rate(const calib_model *m) {
  for (int t = 0; t < CALIB_TR_COUNT; t++)
    if (m->transcendentals_per_s[t] > 0) return m->transcendentals_per_s[t];
  return 0;
}

char *calib_host_json(const calib_run *r) {
  const calib_model *m = &r->model;
  char buf[1024];
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", "tpusim-hw/1");
  cJSON_AddStringToObject(root, "name", "host");
  cJSON_AddStringToObject(root, "kind", "cpu");
  cJSON_AddStringToObject(root, "vendor", r->vendor);
  snprintf(buf, sizeof buf,
           "This machine (%.80s, %d CPUs): one core running tpusim's lowered kernels, "
           "calibrated by tpusim calibrate on %s",
           r->cpu, r->n_cpus, r->date);
  cJSON_AddStringToObject(root, "description", buf);

  cJSON *chip = cJSON_AddObjectToObject(root, "chip");
  cJSON *peak = cJSON_AddObjectToObject(chip, "peak_flops_per_s");
  static const struct {
    const char *hw;
    graph_dtype dt;
  } PEAKS[] = {{"fp64", GDT_F64}, {"fp32", GDT_F32}, {"bf16", GDT_BF16}, {"fp16", GDT_F16}};
  for (size_t i = 0; i < sizeof PEAKS / sizeof PEAKS[0]; i++)
    if (m->matmul_flops_per_s[PEAKS[i].dt] > 0) add_num(peak, PEAKS[i].hw, m->matmul_flops_per_s[PEAKS[i].dt]);
  add_num(chip, "vector_flops_per_s",
          m->vector_flops_per_s > 0 ? m->vector_flops_per_s : m->reduce_row_flops_per_s);
  add_num(chip, "clock_hz", r->clock_hz > 0 ? r->clock_hz : 1e9);
  cJSON *mu = cJSON_AddObjectToObject(chip, "matrix_unit");
  cJSON_AddStringToObject(mu, "kind", "simd");
  add_num(mu, "cores", 1);
  add_num(mu, "units_per_core", 1);
  add_num(mu, "tile_m", 1);
  add_num(mu, "tile_n", 1);
  add_num(mu, "tile_k", 1);
  add_num(chip, "hbm_bytes", r->mem_bytes > 0 ? floor(r->mem_bytes) : 1073741824.0);
  add_num(chip, "hbm_bw_bytes_per_s", m->bw_bytes_per_s);
  cJSON *oc = cJSON_AddObjectToObject(chip, "onchip");
  cJSON_AddStringToObject(oc, "kind", "l3");
  add_num(oc, "bytes", r->cache_bytes > 0 ? r->cache_bytes : 1048576.0);
  cJSON *hl = cJSON_AddObjectToObject(chip, "host_link");
  cJSON_AddStringToObject(hl, "kind", "none");
  add_num(hl, "bw_bytes_per_s", 0);
  double trans = host_trans_rate(m);
  if (trans > 0) add_num(chip, "transcendentals_per_s", trans);
  /* the schema's bounds: (0, 1 ms] */
  add_num(chip, "op_overhead_s", fmin(1e-3, fmax(1e-12, m->op_overhead_s)));

  cJSON *sys = cJSON_AddObjectToObject(root, "system");
  add_num(sys, "chips_per_node", r->n_cpus);
  cJSON *up = cJSON_AddObjectToObject(sys, "scale_up");
  cJSON_AddStringToObject(up, "kind", "socket-link");
  add_num(up, "domain_chips", r->n_cpus);
  add_num(up, "links_per_chip", 1);
  add_num(up, "link_bw_bytes_per_s", m->bw_bytes_per_s);
  add_num(up, "bw_per_chip_bytes_per_s", m->bw_bytes_per_s);
  add_num(up, "latency_s", 1e-7);
  cJSON *out = cJSON_AddObjectToObject(sys, "scale_out");
  cJSON_AddStringToObject(out, "kind", "ethernet");
  add_num(out, "bw_per_chip_bytes_per_s", 1.25e9);
  add_num(out, "latency_s", 5e-5);
  cJSON_AddStringToObject(out, "topology", "fat-tree");

  cJSON *price = cJSON_AddObjectToObject(root, "price");
  add_num(price, "on_demand_usd_per_chip_hour", 0.0580);
  add_num(price, "spot_usd_per_chip_hour", 0.0181);
  cJSON_AddStringToObject(price, "read_on", "2026-12-02");
  cJSON_AddStringToObject(price, "basis",
                          "not this machine's price: one core-hour of an AWS m7a (cpu-genoa's "
                          "entry: $5.5642 and $1.7345 per 96-core socket-hour, / 96)");

  cJSON *src = cJSON_AddObjectToObject(root, "sources");
  snprintf(buf, sizeof buf,
           "tpusim calibrate on this machine, %s: %d fit and %d holdout kernels lowered to LLVM "
           "IR, compiled by ORC LLJIT (default<O3>, vectorized), the fastest of %d passes x %d "
           "repeats of >= %g s each; fitted by least squares on log time (docs/op-models.md, "
           "Calibration)",
           r->date, count_set(r, CALIB_FIT), count_set(r, CALIB_HOLDOUT), r->passes, r->repeats,
           r->min_repeat_s);
  add_source(src, "calibration", buf, "https://llvm.org/docs/ORCv2.html");
  add_source(src, "proc-5",
             "Linux proc(5): /proc/cpuinfo (model name, cpu MHz) and /proc/meminfo (MemTotal), "
             "read on this machine by tpusim calibrate",
             "https://man7.org/linux/man-pages/man5/proc.5.html");
  add_source(src, "sysconf-3", "sysconf(3): _SC_LEVEL3_CACHE_SIZE (else level 2), read on this machine",
             "https://man7.org/linux/man-pages/man3/sysconf.3.html");
  add_source(src, "skypilot-aws",
             "skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv @ 00148f2a (AWS on-demand Price "
             "and SpotPrice per instance and zone)",
             "https://github.com/skypilot-org/skypilot-catalog/blob/"
             "00148f2af3672e2229b4f7bf8157d5a3f36e3c35/catalogs/v8/aws/vms.csv");

  cJSON *cite = cJSON_AddObjectToObject(root, "cite");
  static const char *const CAL[] = {"chip.peak_flops_per_s", "chip.vector_flops_per_s",
                                    "chip.matrix_unit",      "chip.hbm_bw_bytes_per_s",
                                    "chip.host_link",        "chip.op_overhead_s",
                                    "system"};
  for (size_t i = 0; i < sizeof CAL / sizeof CAL[0]; i++) cJSON_AddStringToObject(cite, CAL[i], "calibration");
  if (trans > 0) cJSON_AddStringToObject(cite, "chip.transcendentals_per_s", "calibration");
  cJSON_AddStringToObject(cite, "chip.clock_hz", "proc-5");
  cJSON_AddStringToObject(cite, "chip.hbm_bytes", "proc-5");
  cJSON_AddStringToObject(cite, "chip.onchip", "sysconf-3");
  cJSON_AddStringToObject(cite, "price", "skypilot-aws");

  cJSON *notes = cJSON_AddObjectToObject(root, "notes");
  snprintf(buf, sizeof buf,
           "measured, not a datasheet peak: the sustained rate of tpusim's lowered dot (a scalar "
           "loop nest, one core) while the strided walk down its right operand's columns stays in "
           "L1; each load of that walk that misses L1 (its lines crowding too few sets) cost %.3g s "
           "more, and %.3g s more again when it lands on a new 4 KiB page",
           m->matmul_miss_s, m->walk_page_s);
  cJSON_AddStringToObject(notes, "chip.peak_flops_per_s", buf);
  snprintf(buf, sizeof buf,
           "fitted elementwise rate (f32 lanes; f64 at half). bf16/f16 conversions ran at %.4g /s. "
           "Reductions as lowered: sums over the last dim %.4g FLOP/s (one serial chain per row; "
           "rows overlap, / (1 + %.3g / row length)), max/min over it %.4g FLOP/s + %.3g s per row, "
           "over a leading dim %.4g FLOP/s strided (+ %.3g s per load missing L1) or %.4g FLOP/s "
           "when LLVM vectorized it; the schema has one vector rate, so the simulator times them "
           "at this one",
           m->conversions_per_s, m->reduce_row_flops_per_s, m->reduce_overlap_elems,
           m->reduce_minmax_flops_per_s, m->reduce_row_s, m->reduce_col_flops_per_s,
           m->reduce_miss_s, m->reduce_vec_flops_per_s);
  cJSON_AddStringToObject(notes, "chip.vector_flops_per_s", buf);
  if (trans > 0) {
    snprintf(buf, sizeof buf,
             "the exp family's fitted f32 rate (libm expf calls: softmax, logistic, silu). "
             "tanh (gelu) ran at %.4g /s and sqrt/rsqrt (vector instructions) at %.4g /s; in "
             "f64, exp %.4g, tanh %.4g, sqrt %.4g /s; the schema has one rate",
             m->transcendentals_per_s[CALIB_TR_TANH], m->transcendentals_per_s[CALIB_TR_SQRT],
             m->transcendentals_f64_per_s[CALIB_TR_EXP], m->transcendentals_f64_per_s[CALIB_TR_TANH],
             m->transcendentals_f64_per_s[CALIB_TR_SQRT]);
    cJSON_AddStringToObject(notes, "chip.transcendentals_per_s", buf);
  }
  cJSON_AddStringToObject(notes, "chip.matrix_unit",
                          "no matrix unit: the kernels are loop nests on one core; tiles of 1 so "
                          "no padding is charged");
  snprintf(buf, sizeof buf,
           "memory, not HBM: fitted one-core bandwidth of the bytes a step's stream finds in no "
           "cache; of W bytes a cache of C holds min(1, C/W): L1 (%.3g B) ran at %.4g B/s, L2 "
           "(%.3g B) at %.4g B/s, L3 (fitted: %.3g B) at %.4g B/s",
           m->l1_bytes, m->l1_bw_bytes_per_s, m->cache_bytes, m->cache_bw_bytes_per_s, m->l3_bytes,
           m->l3_bw_bytes_per_s);
  cJSON_AddStringToObject(notes, "chip.hbm_bw_bytes_per_s", buf);
  cJSON_AddStringToObject(notes, "chip.op_overhead_s",
                          "fitted fixed cost of one lowered kernel call (loop setup, no launch)");
  cJSON_AddStringToObject(notes, "chip.clock_hz",
                          r->clock_hz > 0 ? "cpu MHz of the first processor in /proc/cpuinfo"
                                          : "unknown: /proc/cpuinfo had no cpu MHz; 1 GHz assumed");
  cJSON_AddStringToObject(notes, "chip.hbm_bytes",
                          r->mem_bytes > 0 ? "MemTotal of the machine: memory, not HBM"
                                           : "unknown: no /proc/meminfo; 1 GiB assumed");
  cJSON_AddStringToObject(notes, "chip.onchip",
                          r->cache_bytes > 0 ? "the last-level cache size sysconf reports"
                                             : "unknown: sysconf reports no cache size; 1 MiB assumed");
  cJSON_AddStringToObject(notes, "system",
                          "not measured: a chip is one core, the node is this machine's CPUs; the "
                          "cores' link is taken as the fitted memory bandwidth, 100 ns latency; "
                          "scale_out is a 10 GbE assumption (calibrate times no network)");
  cJSON_AddStringToObject(notes, "price",
                          "an assumption for planning only: this machine's own cost is unknown");
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  return s;
}

static int mkdirs(const char *path) {
  char tmp[4096];
  if (strlen(path) >= sizeof tmp) return -1;
  str_copy(tmp, sizeof tmp, path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return 0;
}

int calib_write_host(const calib_run *r, const char *path, char *err, size_t n) {
  char *text = calib_host_json(r);
  if (!text) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  int rc = 0;
  FILE *f = NULL;
  if (mkdirs(path) != 0 || !(f = fopen(path, "w"))) {
    snprintf(err, n, "cannot write '%s': %s", path, strerror(errno));
    rc = -1;
  } else {
    if (fprintf(f, "%s\n", text) < 0) rc = -1;
    if (fclose(f) != 0) rc = -1;
    if (rc) snprintf(err, n, "cannot write '%s': %s", path, strerror(errno));
  }
  free(text);
  return rc;
}

int calib_check_path(const char *path, char *err, size_t n) {
  struct stat st;
  bool existed = stat(path, &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    snprintf(err, n, "cannot write '%s': it is a directory", path);
    return -1;
  }
  FILE *f = NULL;
  if (mkdirs(path) != 0 || !(f = fopen(path, "a"))) {
    snprintf(err, n, "cannot write '%s': %s", path, strerror(errno));
    return -1;
  }
  fclose(f);
  if (!existed) remove(path);
  return 0;
}

int calib_default_path(char *buf, size_t n) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int k;
  if (xdg && *xdg) k = snprintf(buf, n, "%s/tpusim/host.json", xdg);
  else if (home && *home) k = snprintf(buf, n, "%s/.cache/tpusim/host.json", home);
  else return -1;
  return k > 0 && (size_t)k < n ? 0 : -1;
}

/* ---- reports ---- */

static const char *set_name(calib_set s) { return s == CALIB_FIT ? "fit" : "holdout"; }

void calib_print_report(const calib_run *r, FILE *f) {
  fprintf(f, "%-36s %-7s %-26s %12s %12s %8s\n", "kernel", "set", "shape", "predicted",
          "measured", "error");
  for (int i = 0; i < r->n_kernels; i++) {
    const calib_kernel *k = &r->kernels[i];
    fprintf(f, "%-36s %-7s %-26s %10.3f us %10.3f us %+7.1f%%\n", k->name, set_name(k->set),
            k->shape, k->predicted_s * 1e6, k->measured_s * 1e6,
            100 * (k->predicted_s / k->measured_s - 1));
  }
  for (int s = CALIB_FIT; s <= CALIB_HOLDOUT; s++) {
    double med, p90;
    int m = calib_errors(r->kernels, r->n_kernels, (calib_set)s, &med, &p90);
    fprintf(f, "%-7s %3d kernels: median |error| %.1f%%, 90th percentile %.1f%%\n",
            set_name((calib_set)s), m, 100 * med, 100 * p90);
  }
  const calib_model *m = &r->model;
  fprintf(f,
          "model: matmul bf16 %.3g, f32 %.3g, f64 %.3g FLOP/s, + %.3g s per rhs load missing L1;\n"
          "       elementwise %.3g FLOP/s; bf16/f16 conversions %.3g /s;\n"
          "       reduce over the last dim: sum %.3g, max/min %.3g FLOP/s, + %.3g s per output;\n"
          "       reduce over a leading dim %.3g FLOP/s, + %.3g s per load missing L1;\n"
          "       transcendentals f32 exp %.3g, tanh %.3g, sqrt %.3g /s; f64 %.3g, %.3g, %.3g /s;\n"
          "       L2 %.3g B/s (%.3g B), L3 %.3g B/s (%.3g B), memory %.3g B/s;\n"
          "       overhead %.3g s per kernel call\n",
          m->matmul_flops_per_s[GDT_BF16], m->matmul_flops_per_s[GDT_F32],
          m->matmul_flops_per_s[GDT_F64], m->matmul_miss_s, m->vector_flops_per_s,
          m->conversions_per_s, m->reduce_row_flops_per_s, m->reduce_minmax_flops_per_s,
          m->reduce_row_s, m->reduce_col_flops_per_s, m->reduce_miss_s,
          m->transcendentals_per_s[CALIB_TR_EXP], m->transcendentals_per_s[CALIB_TR_TANH],
          m->transcendentals_per_s[CALIB_TR_SQRT], m->transcendentals_f64_per_s[CALIB_TR_EXP],
          m->transcendentals_f64_per_s[CALIB_TR_TANH], m->transcendentals_f64_per_s[CALIB_TR_SQRT],
          m->cache_bw_bytes_per_s, m->cache_bytes, m->l3_bw_bytes_per_s, m->l3_bytes,
          m->bw_bytes_per_s, m->op_overhead_s);
}

char *calib_report_json(const calib_run *r) {
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(root, "kernels");
  for (int i = 0; i < r->n_kernels; i++) {
    const calib_kernel *k = &r->kernels[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddStringToObject(o, "set", set_name(k->set));
    add_num(o, "predicted_s", k->predicted_s);
    add_num(o, "measured_s", k->measured_s);
    cJSON_AddStringToObject(o, "family", k->family);
    cJSON_AddStringToObject(o, "shape", k->shape);
    add_num(o, "steps", k->n_steps);
    cJSON_AddItemToArray(arr, o);
  }
  double med, p90;
  calib_errors(r->kernels, r->n_kernels, CALIB_HOLDOUT, &med, &p90);
  add_num(root, "median_abs_err_holdout", med);
  add_num(root, "p90_abs_err_holdout", p90);
  calib_errors(r->kernels, r->n_kernels, CALIB_FIT, &med, &p90);
  add_num(root, "median_abs_err_fit", med);
  add_num(root, "p90_abs_err_fit", p90);
  const calib_model *m = &r->model;
  cJSON *mo = cJSON_AddObjectToObject(root, "model");
  cJSON *mm = cJSON_AddObjectToObject(mo, "matmul_flops_per_s");
  static const graph_dtype DTS[] = {GDT_BF16, GDT_F32, GDT_F64};
  for (int i = 0; i < 3; i++)
    if (m->matmul_flops_per_s[DTS[i]] > 0)
      add_num(mm, graph_dtype_name(DTS[i]), m->matmul_flops_per_s[DTS[i]]);
  add_num(mo, "matmul_miss_s", m->matmul_miss_s);
  add_num(mo, "walk_page_s", m->walk_page_s);
  add_num(mo, "conversions_per_s", m->conversions_per_s);
  add_num(mo, "reduce_overlap_elems", m->reduce_overlap_elems);
  add_num(mo, "reduce_minmax_flops_per_s", m->reduce_minmax_flops_per_s);
  add_num(mo, "reduce_row_s", m->reduce_row_s);
  add_num(mo, "reduce_vec_flops_per_s", m->reduce_vec_flops_per_s);
  add_num(mo, "reduce_miss_s", m->reduce_miss_s);
  add_num(mo, "l1_bw_bytes_per_s", m->l1_bw_bytes_per_s);
  add_num(mo, "l1_bytes", m->l1_bytes);
  add_num(mo, "l3_bw_bytes_per_s", m->l3_bw_bytes_per_s);
  add_num(mo, "l3_bytes", m->l3_bytes);
  add_num(mo, "vector_flops_per_s", m->vector_flops_per_s);
  add_num(mo, "reduce_row_flops_per_s", m->reduce_row_flops_per_s);
  add_num(mo, "reduce_col_flops_per_s", m->reduce_col_flops_per_s);
  cJSON *tr = cJSON_AddObjectToObject(mo, "transcendentals_per_s");
  static const char *const TR[] = {"exp", "tanh", "sqrt"};
  for (int t = 0; t < CALIB_TR_COUNT; t++) add_num(tr, TR[t], m->transcendentals_per_s[t]);
  cJSON *tr64 = cJSON_AddObjectToObject(mo, "transcendentals_f64_per_s");
  for (int t = 0; t < CALIB_TR_COUNT; t++) add_num(tr64, TR[t], m->transcendentals_f64_per_s[t]);
  add_num(mo, "bw_bytes_per_s", m->bw_bytes_per_s);
  add_num(mo, "cache_bw_bytes_per_s", m->cache_bw_bytes_per_s);
  add_num(mo, "cache_bytes", m->cache_bytes);
  add_num(mo, "op_overhead_s", m->op_overhead_s);
  cJSON_AddStringToObject(root, "date", r->date);
  cJSON_AddStringToObject(root, "cpu", r->cpu);
  add_num(root, "wall_s", r->wall_s);
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  return s;
}

void calib_print_summary(const calib_run *r, const char *path, FILE *f) {
  double med, p90;
  int n = calib_errors(r->kernels, r->n_kernels, CALIB_HOLDOUT, &med, &p90);
  fprintf(f,
          "calibrated %s on %d kernels (%d fit, %d holdout) in %.1f s; holdout error median "
          "%.1f%%, p90 %.1f%% (targets 25%%, 50%%)\nwrote %s (use it with --hw-file %s --hw host)\n",
          r->cpu, r->n_kernels, count_set(r, CALIB_FIT), n, r->wall_s, 100 * med, 100 * p90, path,
          path);
}
