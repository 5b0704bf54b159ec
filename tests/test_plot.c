/*
** test_plot.c -- `tpusim plot` (viz/plot.h): every kind writes a valid PNG
** and a valid SVG with its .dat and .gp beside it; bad input is refused with
** a message and exit 1 or 2. Outputs go under tests/out/.
**
** The PNG check reads the file's bytes here: the 8-byte signature, then the
** first chunk, which must be IHDR with a non-zero width and height.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <cjson/cJSON.h>

#include "../hw_models/hw_catalog.h"
#include "../planner/serve.h"
#include "../viz/plot.h"
#include "helpers.h"

#define GIB (1024.0 * 1024 * 1024)

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_png(const char *path) {
  size_t n;
  unsigned char *b = (unsigned char *)th_slurp(path, &n);
  static const unsigned char SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  cr_assert(n > 8 + 8 + 13, "%s: too short for a PNG", path);
  cr_assert(memcmp(b, SIG, 8) == 0, "%s: no PNG signature", path);
  cr_assert(be32(b + 8) == 13, "%s: IHDR length %u", path, be32(b + 8));
  cr_assert(memcmp(b + 12, "IHDR", 4) == 0, "%s: first chunk is not IHDR", path);
  uint32_t w = be32(b + 16), h = be32(b + 20);
  cr_assert(w > 0 && h > 0, "%s: image %ux%u", path, w, h);
  cr_assert(n > 2000, "%s: %zu bytes: looks blank", path, n);
  free(b);
}

static void check_svg(const char *path) {
  size_t n;
  char *b = th_slurp(path, &n);
  const char *s = b;
  while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
  cr_assert(strncmp(s, "<?xml", 5) == 0 || strncmp(s, "<svg", 4) == 0,
            "%s: no XML/SVG header: %.40s", path, s);
  cr_assert(strstr(b, "<svg"), "%s: no <svg element", path);
  cr_assert(strstr(b, "</svg>"), "%s: truncated (no </svg>)", path);
  free(b);
}

/* The data (non-comment rows) and the script that names it. */
static void check_sidecars(const char *stem, int min_rows) {
  char p[256];
  size_t n;
  snprintf(p, sizeof p, "%s.dat", stem);
  char *dat = th_slurp(p, &n);
  int rows = 0;
  for (char *line = dat; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (*line != '#' && *line != '\n') rows++;
  cr_assert(rows >= min_rows, "%s: %d data rows, want >= %d", p, rows, min_rows);
  free(dat);
  snprintf(p, sizeof p, "%s.gp", stem);
  char *gp = th_slurp(p, &n);
  const char *slash = strrchr(stem, '/');
  char want[256];
  snprintf(want, sizeof want, "'%s.dat'", slash ? slash + 1 : stem);
  cr_assert(strstr(gp, want), "%s does not name %s", p, want);
  cr_assert(strstr(gp, "set output"), "%s sets no output", p);
  cr_assert(strstr(gp, "plot "), "%s has no plot command", p);
  free(gp);
}

/* Runs one kind to PNG and SVG and checks all four files. */
static void kind_both(const char *stem, int min_rows, const char *const *args) {
  mkdir("tests/out", 0755);
  for (int svg = 0; svg < 2; svg++) {
    char o[256];
    snprintf(o, sizeof o, "%s.%s", stem, svg ? "svg" : "png");
    const char *a[16] = {0};
    int k = 0;
    for (; args[k]; k++) a[k] = args[k];
    a[k++] = "-o";
    a[k++] = o;
    a[k] = NULL;
    th_run r = th_cli("plot", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
                 a[13], NULL);
    cr_assert_eq(r.rc, 0, "plot %s -> %d: %s", o, r.rc, r.err);
    cr_assert(strstr(r.out, "wrote "), "no report on stdout: %s", r.out);
    if (svg) check_svg(o);
    else check_png(o);
    check_sidecars(stem, min_rows);
    th_run_free(&r);
  }
}

Test(plot, roofline, .timeout = 60) {
  const char *a[] = {"roofline", "llama3-8b", "--hw", "h100-sxm", "--seq", "256", "--gbs", "8", NULL};
  kind_both("tests/out/plot-roofline", 10, a);
  /* the ridge and the roof are in the script; the peak in the data header */
  size_t n;
  char *gp = th_slurp("tests/out/plot-roofline.gp", &n);
  cr_assert(strstr(gp, "RIDGE") && strstr(gp, "roof(x)"));
  free(gp);
}

Test(plot, roofline_mlp, .timeout = 60) {
  const char *a[] = {"roofline", "mlp", "--hw", "a100-80g", NULL};
  kind_both("tests/out/plot-roofline-mlp", 3, a);
}

Test(plot, collective, .timeout = 60) {
  const char *a[] = {"collective", "--hw", "h100-sxm", "--chips", "8", "--op", "all-reduce", NULL};
  kind_both("tests/out/plot-collective", 11, a);
  size_t n;
  char *dat = th_slurp("tests/out/plot-collective.dat", &n);
  cr_assert(strstr(dat, "# algorithm ring"), "no ring series:\n%s", dat);
  free(dat);
}

Test(plot, breakdown, .timeout = 60) {
  const char *a[] = {"breakdown", "llama3-8b", "--hw", "h100-sxm", "--chips", "8",
                     "--seq", "256", "--gbs", "16", NULL};
  kind_both("tests/out/plot-breakdown", 2, a);
}

Test(plot, memory, .timeout = 60) {
  const char *a[] = {"memory", "llama3-8b", "--hw", "h100-sxm", "--chips", "8",
                     "--seq", "256", "--gbs", "16", NULL};
  kind_both("tests/out/plot-memory", 4, a);
  size_t n;
  char *gp = th_slurp("tests/out/plot-memory.gp", &n);
  cr_assert(strstr(gp, "CAP = 80."), "capacity line of an 80 GiB chip missing");
  free(gp);
}

/* The row of `label` in a memory chart's data: the 7 figures after it. */
static int mem_row(const char *dat, const char *label, double v[7]) {
  char key[64];
  snprintf(key, sizeof key, "\n\"%s\" ", label);
  const char *at = strstr(dat, key);
  if (!at) return -1;
  at += strlen(key);
  return sscanf(at, "%lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                &v[6]) == 7 ? 0 : -1;
}

/* `simulate --json`'s memory_bytes of one plan, in GiB: the same order as
** the chart's columns (other = runtime + comm + fragmentation). */
static void sim_mem(const char *zero, const char *rec, double v[7]) {
  th_run r = th_cli("simulate", "llama3-8b", "--hw", "a100-40g", "--chips", "8", "--zero", zero,
                    "--recompute", rec, "--json", NULL);
  cr_assert(r.rc == 0 || r.rc == 3, "simulate -> %d: %s", r.rc, r.err);
  cJSON *o = cJSON_Parse(r.out), *mb = cJSON_GetObjectItem(o, "memory_bytes");
  cr_assert_not_null(mb, "no memory_bytes: %s", r.out);
  const char *keys[] = {"weights", "gradients", "optimizer", "activations", "temporary"};
  for (int k = 0; k < 5; k++) v[k] = cJSON_GetObjectItem(mb, keys[k])->valuedouble / GIB;
  v[5] = (cJSON_GetObjectItem(mb, "runtime")->valuedouble + cJSON_GetObjectItem(mb, "comm")->valuedouble +
          cJSON_GetObjectItem(mb, "fragmentation")->valuedouble) / GIB;
  v[6] = cJSON_GetObjectItem(mb, "peak")->valuedouble / GIB;
  cJSON_Delete(o);
  th_run_free(&r);
}

/* One truth per fact: every bar of the memory chart is the memory model's
** figure for the plan `simulate` runs with the same flags (the chip's
** default framework, megatron-core on a GPU), term by term, and its parts
** add up to its peak. Gradients by hand: megatron-core keeps them in
** bf16 (Megatron-Bridge's performance recipes, grad_reduce_in_fp32=False),
** 2 B a parameter like the bf16 weights: gradients = weights, not twice
** them (the chart's old fp32 count). */
Test(plot, memory_bars_are_simulates_figures, .timeout = 60) {
  mkdir("tests/out", 0755);
  th_run r = th_cli("plot", "memory", "llama3-8b", "--hw", "a100-40g", "--chips", "8", "-o",
                    "tests/out/plot-memory-sim.svg", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  th_run_free(&r);
  size_t n;
  char *dat = th_slurp("tests/out/plot-memory-sim.dat", &n);
  static const struct {
    const char *label, *zero, *rec;
  } PLANS[] = {{"dp8", "0", "none"}, {"dp8 full-rc", "0", "full"}, {"dp8 z3 full-rc", "3", "full"}};
  for (size_t i = 0; i < sizeof PLANS / sizeof *PLANS; i++) {
    double bar[7], sim[7];
    cr_assert_eq(mem_row(dat, PLANS[i].label, bar), 0, "no row '%s' in:\n%s", PLANS[i].label, dat);
    sim_mem(PLANS[i].zero, PLANS[i].rec, sim);
    for (int k = 0; k < 7; k++)
      cr_assert_float_eq(bar[k], sim[k], 1e-5, "%s column %d: chart %.6f, simulate %.6f",
                         PLANS[i].label, k, bar[k], sim[k]);
    double parts = bar[0] + bar[1] + bar[2] + bar[3] + bar[4] + bar[5];
    cr_assert_float_eq(parts, bar[6], 1e-4, "%s: parts %.6f, peak %.6f", PLANS[i].label, parts, bar[6]);
  }
  double dp8[7];
  mem_row(dat, "dp8", dp8);
  cr_assert_float_eq(dp8[1], dp8[0], 1e-6, "gradients %.6f GiB, weights %.6f GiB", dp8[1], dp8[0]);
  cr_assert_gt(dp8[0], 14.9); /* 8.03 G parameters x 2 B = 14.96 GiB */
  free(dat);
}

Test(plot, scaling, .timeout = 60) {
  const char *a[] = {"scaling", "llama3-8b", "--hw", "a100-80g", "--max-chips", "8",
                     "--seq", "256", NULL};
  kind_both("tests/out/plot-scaling", 4, a);
  /* four series: hierarchical all-reduce, flat ring, Reduction Server, FSDP;
  ** past one 8-GPU node the flat ring is no faster than the hierarchical one */
  size_t n;
  char *dat = th_slurp("tests/out/plot-scaling.dat", &n);
  const char *names[] = {"# all-reduce (hierarchical", "# flat ring all-reduce",
                         "# with a Reduction Server", "# FSDP (ZeRO-3)"};
  for (int i = 0; i < 4; i++) cr_assert(strstr(dat, names[i]), "series %s missing", names[i]);
  free(dat);
  char *gp = th_slurp("tests/out/plot-scaling.gp", &n);
  cr_assert(strstr(gp, "title 'throughput, FSDP'") && strstr(gp, "title 'efficiency, flat ring'"));
  free(gp);
}

Test(plot, pareto, .timeout = 60) {
  const char *a[] = {"pareto", "llama3-8b", "--max-chips", "16", "--hw", "a100-80g,h100-sxm,tpu-v5e",
                     NULL};
  kind_both("tests/out/plot-pareto", 3, a);
}

Test(plot, deterministic, .timeout = 60) {
  mkdir("tests/out", 0755);
  th_run r1 = th_cli("plot", "collective", "--hw", "a100-80g", "--chips", "4", "--op", "all-gather", "-o",
                "tests/out/plot-det1.svg", NULL);
  th_run r2 = th_cli("plot", "collective", "--hw", "a100-80g", "--chips", "4", "--op", "all-gather", "-o",
                "tests/out/plot-det2.svg", NULL);
  cr_assert(r1.rc == 0 && r2.rc == 0, "%s%s", r1.err, r2.err);
  size_t n1, n2;
  char *a = th_slurp("tests/out/plot-det1.dat", &n1), *b = th_slurp("tests/out/plot-det2.dat", &n2);
  cr_assert(n1 == n2 && memcmp(a, b, n1) == 0, "the data differ between two runs");
  free(a);
  free(b);
  th_run_free(&r1);
  th_run_free(&r2);
}

static void refused(th_run r, int want_rc, const char *want_msg) {
  cr_assert_eq(r.rc, want_rc, "rc %d, want %d; stderr: %s", r.rc, want_rc, r.err);
  cr_assert(strstr(r.err, want_msg), "stderr lacks '%s': %s", want_msg, r.err);
  th_run_free(&r);
}

Test(plot, bad_input, .timeout = 30) {
  mkdir("tests/out", 0755);
  refused(th_cli("plot", "histogram", "mlp", "-o", "tests/out/x.png", NULL), 2, "unknown kind 'histogram'");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "no-such-chip", "-o", "tests/out/plot-bad.png", NULL), 1,
          "no-such-chip");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "a100-80g", NULL), 2, "-o");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "a100-80g", "-o", "tests/out/plot-bad.jpg", NULL), 1,
          "unsupported extension");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "a100-80g", "-o", "tests/out/plot-bad", NULL), 1,
          "unsupported extension");
  refused(th_cli("plot", "roofline", "--hw", "a100-80g", "-o", "tests/out/plot-bad.png", NULL), 2, "MODEL");
  refused(th_cli("plot", "memory", "mlp", "--hw", "a100-80g", "-o", "tests/out/plot-bad.png", NULL), 2,
          "--chips is required");
  refused(th_cli("plot", "collective", "--hw", "a100-80g", "--chips", "4", "--op", "all-sum", "-o",
              "tests/out/plot-bad.png", NULL),
          2, "unknown --op");
  refused(th_cli("plot", "collective", "--hw", "a100-80g", "--chips", "x4", "--op", "all-reduce", "-o",
              "tests/out/plot-bad.png", NULL),
          2, "--chips x4: expected an integer from 1 to 1048576");
  refused(th_cli("plot", "roofline", "no-such-model", "--hw", "a100-80g", "-o", "tests/out/plot-bad.png", NULL),
          1, "no-such-model");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "a100-80g", "--colour", "red", "-o",
              "tests/out/plot-bad.png", NULL),
          2, "unknown option '--colour'");
  refused(th_cli("plot", "roofline", "mlp", "--hw", "a100-80g", "-o", "tests/out/no-such-dir/x.png", NULL), 1,
          "cannot write");
  refused(th_cli("plot", NULL), 2, "Usage");
}

/* plot reads no file of its own (plot.h): a MODEL and --hw-file go through
** model_load and the catalog, whose size limits bound what /dev/zero costs
** (64 MiB and 1 MiB when this was written: refused in 0.12 s and 0.03 s).
** The messages are the loaders', so only the file's name is asked for. */
Test(plot, inputs_go_through_the_loaders_limits, .timeout = 20) {
  mkdir("tests/out", 0755);
  refused(th_cli("plot", "memory", "/dev/zero", "--hw", "a100-80g", "--chips", "8", "-o",
                 "tests/out/plot-bad.png", NULL),
          1, "/dev/zero");
  refused(th_cli("plot", "roofline", "mlp", "--hw-file", "/dev/zero", "--hw", "a100-80g", "-o",
                 "tests/out/plot-bad.png", NULL),
          1, "/dev/zero");
}

Test(plot, help) {
  th_run r = th_cli("plot", "--help", NULL);
  cr_assert_eq(r.rc, 0);
  cr_assert(strstr(r.out, "roofline") && strstr(r.out, "collective") && strstr(r.out, "gnuplot"));
  th_run_free(&r);
}

/* Without gnuplot on PATH: a clear message and exit 1, and no picture. */
Test(plot, no_gnuplot) {
  mkdir("tests/out", 0755);
  mkdir("tests/out/empty-path", 0755);
  remove("tests/out/plot-nognuplot.png");
  setenv("PATH", "tests/out/empty-path", 1); /* this test's own process */
  refused(th_cli("plot", "collective", "--hw", "a100-80g", "--chips", "4", "--op", "all-reduce", "-o",
              "tests/out/plot-nognuplot.png", NULL),
          1, "gnuplot not found");
  struct stat st;
  cr_assert(stat("tests/out/plot-nognuplot.png", &st) != 0);
}

/* The library's entry points without the command line: where -o's files
** go, and a chart from a plot_req with the catalog already loaded. */
Test(plot, output_and_request, .timeout = 30) {
  mkdir("tests/out", 0755);
  mkdir("tests/out/plot-api", 0755);
  plot_output o;
  char *e = NULL;
  size_t en;
  FILE *err = open_memstream(&e, &en);
  cr_assert_eq(plot_output_init(&o, "tests/out/plot-api/a.b.jpg", err), 1);
  fflush(err);
  cr_assert(strstr(e, "unsupported extension"), "%s", e);
  cr_assert_eq(plot_output_init(&o, "tests/out/plot-api/a.b.svg", err), 0);
  fclose(err);
  free(e);
  cr_assert_str_eq(o.dir, "tests/out/plot-api");
  cr_assert_str_eq(o.name, "a.b");
  cr_assert_str_eq(o.ext, "svg");
  cr_assert(o.svg);
  cr_assert_str_eq(o.dat_path, "tests/out/plot-api/a.b.dat");
  cr_assert_str_eq(o.gp_path, "tests/out/plot-api/a.b.gp");

  cr_assert_eq(plot_kind_parse("collective"), PLOT_COLLECTIVE);
  cr_assert_eq(plot_kind_parse("histogram"), -1);
  cr_assert(plot_kind_needs(PLOT_COLLECTIVE) & PLOT_NEEDS_OP);
  cr_assert(!(plot_kind_needs(PLOT_PARETO) & PLOT_NEEDS_HW));
  hw_catalog *cat = th_catalog();
  char *argv[] = {"plot", "collective", "(by the API)", NULL};
  plot_req req = {.kind = PLOT_COLLECTIVE, .cat = cat, .hw = th_hw(cat, "a100-80g"), .chips = 4,
                  .op = "all-gather", .argc = 3, .argv = argv};
  cr_assert_eq(plot_draw(&req, &o, stdout, stderr), 0);
  check_svg(o.img_path);
  char *gp = th_slurp(o.gp_path, NULL);
  cr_assert(strstr(gp, "# tpusim plot collective (by the API)\n"), "%.200s", gp);
  free(gp);
  req.op = "all-sum";
  err = open_memstream(&e, &en);
  cr_assert_eq(plot_draw(&req, &o, stdout, err), 2, "an --op no collective has");
  fclose(err);
  cr_assert(strstr(e, "unknown --op 'all-sum'"), "%s", e);
  free(e);
  hw_catalog_free(cat);
}

/* One row of plot serve's data: batch, throughput a chip, TPOT (or the
** forward) ms, TTFT ms, p99 ms (NaN for '-'), replicas, chosen. */
typedef struct {
  long long batch, replicas;
  double per_chip, tpot_ms, ttft_ms, p99_ms;
  int chosen;
} serve_row;

/* The rows of block `index` (blocks are separated by two blank lines). */
static int serve_rows(const char *dat, int index, serve_row *rows, int max) {
  int block = 0, n = 0, blank = 0;
  for (const char *l = dat; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (*l == '\n') {
      if (++blank == 2 && n > 0 && block == index) return n;
      if (blank == 2) block++;
      continue;
    }
    blank = 0;
    if (*l == '#' || block != index || n == max) continue;
    serve_row *r = &rows[n];
    char p99[32];
    cr_assert_eq(sscanf(l, "%lld %lf %lf %lf %31s %lld %d", &r->batch, &r->per_chip, &r->tpot_ms,
                        &r->ttft_ms, p99, &r->replicas, &r->chosen), 7, "row: %.80s", l);
    r->p99_ms = strcmp(p99, "-") == 0 ? NAN : atof(p99);
    n++;
  }
  return block == index ? n : 0;
}

static bool close6(double a, double b) { return fabs(a - b) <= 1e-5 * fabs(b); }

/* plot serve draws serve's own numbers: for each candidate `tpusim serve`
** ranks (in-process, the same request), the curve's ringed row is its
** batch, replicas, TPOT, TTFT and p99 (to the data file's 6 digits); along
** a curve the TPOT does not fall as the batch doubles, and the throughput a
** chip is batch / TPOT / tp (its definition). */
Test(plot, serve_is_serves_numbers, .timeout = 60) {
  mkdir("tests/out", 0755);
  th_run r = th_cli("plot", "serve", "llama3-8b", "--qps", "50", "--latency-p99", "500ms", "--hw",
                    "h100-sxm,tpu-v5e", "-o", "tests/out/plot-serve.png", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  th_run_free(&r);
  check_png("tests/out/plot-serve.png");
  check_sidecars("tests/out/plot-serve", 8);
  size_t len;
  char *dat = th_slurp("tests/out/plot-serve.dat", &len);
  hw_catalog *c = th_catalog();
  model *m = th_model("llama3-8b", 0);
  const hw_model *hws[] = {th_hw(c, "h100-sxm"), th_hw(c, "tpu-v5e")};
  serve_req q = {.qps = 50, .latency_p99_s = 0.5, .input_tokens = 1024, .output_tokens = 128};
  serve_plan p;
  char err[512];
  cr_assert_eq(serve_plan_run(m, hws, 2, c, &q, &p, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < p.n; i++) {
    const serve_cand *k = &p.c[i];
    serve_row rows[16];
    int n = serve_rows(dat, i, rows, 16), chosen = 0;
    cr_assert_geq(n, 2, "block %d of\n%s", i, dat);
    for (int j = 0; j < n; j++) {
      const serve_row *w = &rows[j];
      if (j > 0) cr_assert_geq(w->tpot_ms, rows[j - 1].tpot_ms, "%s b%lld", k->hw->name, w->batch);
      cr_assert(close6(w->per_chip * w->tpot_ms / 1e3 * (double)k->tp, (double)w->batch));
      if (!w->chosen) continue;
      chosen++;
      cr_assert_eq(w->batch, k->batch);
      cr_assert_eq(w->replicas, k->replicas);
      cr_assert(close6(w->tpot_ms, k->step.tpot_s * 1e3), "%g vs %g", w->tpot_ms, k->step.tpot_s * 1e3);
      cr_assert(close6(w->ttft_ms, k->step.ttft_s * 1e3));
      cr_assert(close6(w->p99_ms, k->p99_s * 1e3), "%g vs %g", w->p99_ms, k->p99_s * 1e3);
    }
    cr_assert_eq(chosen, 1, "%s: one ringed point", k->hw->name);
  }
  serve_plan_free(&p);
  model_free(m);
  hw_catalog_free(c);
  free(dat);
}

/* A model that does not generate: samples/s against the forward, which
** does not fall as the batch grows either. */
Test(plot, serve_forward_model, .timeout = 60) {
  const char *a[] = {"serve", "resnet50", "--qps", "500", "--latency-p99", "100ms", "--hw", "h100-sxm", NULL};
  kind_both("tests/out/plot-serve-cnn", 4, a);
  size_t len;
  char *dat = th_slurp("tests/out/plot-serve-cnn.dat", &len);
  cr_assert(strstr(dat, "forward_ms"), "%s", dat);
  serve_row rows[16];
  int n = serve_rows(dat, 0, rows, 16);
  for (int j = 1; j < n; j++) cr_assert_geq(rows[j].tpot_ms, rows[j - 1].tpot_ms);
  free(dat);
}

Test(plot, serve_bad_input, .timeout = 30) {
  mkdir("tests/out", 0755);
  refused(th_cli("plot", "serve", "llama3-8b", "--latency-p99", "500ms", "-o", "tests/out/plot-bad.png", NULL),
          2, "--qps N is required");
  refused(th_cli("plot", "serve", "llama3-8b", "--offline", "-o", "tests/out/plot-bad.png", NULL), 2,
          "--offline: the chart is an online endpoint's");
  refused(th_cli("plot", "serve", "llama3-8b", "--qps", "5", NULL), 2, "-o FILE.png");
  refused(th_cli("plot", "serve", "llama3-8b", "--qps", "5", "--colour", "red", "-o", "tests/out/plot-bad.png",
                 NULL), 2, "unknown option '--colour'");
  refused(th_cli("plot", "serve", "llama3-8b", "--qps", "5", "--hw", "no-such-chip", "-o",
                 "tests/out/plot-bad.png", NULL), 1, "no-such-chip");
  refused(th_cli("plot", "serve", "llama3-8b", "--qps", "5", "--precision", "fp9", "-o",
                 "tests/out/plot-bad.png", NULL), 2, "nearest is fp8");
  /* no candidate meets 1 ms to the first token: exit 3, as serve */
  refused(th_cli("plot", "serve", "llama3-8b", "--qps", "5", "--latency-p99", "1ms", "--hw", "h100-sxm", "-o",
                 "tests/out/plot-bad.png", NULL), 3, "s to the first answer alone, over the 0.001 s p99 target");
}
