/*
** plot.c -- see plot.h: the data of a chart (FILE.dat), its gnuplot
** script (FILE.gp), and the picture gnuplot draws from them.
**
** gnuplot runs as a child process (fork + execv, no shell), in the folder
** of the output, on the script's bare file name; the script refers to its
** data and its picture by bare names too, so the three files move together.
*/
#include "plot.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../hw_models/hw_catalog.h"
#include "../planner/planner.h"
#include "../sim/coll.h"
#include "../sim/framework.h"
#include "../workloads/graph.h"
#include "../sim/input.h"
#include "../sim/net.h"
#include "../sim/optime.h"
#include "../sim/plan.h"
#include "../sim/step.h"
#include "../workloads/model.h"

enum { PLOT_OK = 0, PLOT_BAD = 1, PLOT_USAGE = 2 };

/* One chart being drawn: the request, where it goes, and its streams. */
typedef struct {
  const char *kind, *op, *hw_list;
  int64_t chips, max_chips, seq, gbs, batch_per_chip;
  FILE *out, *err;
  const plot_output *o;
  int argc;
  char **argv;
  const hw_catalog *cat;
  const hw_model *hwm;
  const model *m;
  const planner_cand *front; /* pareto from a saved --json (NULL: search) */
  int n_front;
  const char *front_model;
} pctx;

static int usage(pctx *c, const char *fmt, const char *arg) {
  fprintf(c->err, "tpusim plot: ");
  fprintf(c->err, fmt, arg);
  fprintf(c->err, "\nTry 'tpusim plot --help'.\n");
  return PLOT_USAGE;
}

/* ---------------------------------------------------------------- gnuplot */

/* The gnuplot executable on PATH, or false. */
static bool find_gnuplot(char *buf, size_t n) {
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  const char *s = path;
  for (;;) {
    const char *e = strchr(s, ':');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    int w = len ? snprintf(buf, n, "%.*s/gnuplot", (int)len, s) : snprintf(buf, n, "./gnuplot");
    struct stat st;
    if (w > 0 && (size_t)w < n && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
        access(buf, X_OK) == 0)
      return true;
    if (!e) return false;
    s = e + 1;
  }
}

/* Runs `gnuplot NAME.gp` in the output folder; its messages go to err. */
static int run_gnuplot(pctx *c) {
  char script[PLOT_PATH + 8];
  snprintf(script, sizeof script, "%s.gp", c->o->name);
  int fd[2];
  if (pipe(fd) != 0) {
    fprintf(c->err, "tpusim plot: pipe: %s\n", strerror(errno));
    return PLOT_BAD;
  }
  fflush(c->out);
  fflush(c->err);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    fprintf(c->err, "tpusim plot: fork: %s\n", strerror(errno));
    return PLOT_BAD;
  }
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], STDOUT_FILENO);
    dup2(fd[1], STDERR_FILENO);
    if (fd[1] != STDOUT_FILENO && fd[1] != STDERR_FILENO) close(fd[1]);
    if (chdir(c->o->dir) != 0) _exit(126);
    char *const args[] = {"gnuplot", script, NULL};
    execv(c->o->gnuplot, args);
    _exit(127);
  }
  close(fd[1]);
  char msg[4096];
  size_t used = 0;
  for (;;) {
    char chunk[512];
    ssize_t r = read(fd[0], chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    size_t k = (size_t)r;
    if (k > sizeof msg - 1 - used) k = sizeof msg - 1 - used;
    memcpy(msg + used, chunk, k);
    used += k;
  }
  msg[used] = '\0';
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 126) fprintf(c->err, "tpusim plot: cannot enter %s\n", c->o->dir);
    else fprintf(c->err, "tpusim plot: gnuplot failed (status %d) on %s:\n%s", code, c->o->gp_path, msg);
    return PLOT_BAD;
  }
  if (used) fprintf(c->err, "%s", msg); /* warnings */
  struct stat st;
  if (stat(c->o->img_path, &st) != 0 || st.st_size == 0) {
    fprintf(c->err, "tpusim plot: gnuplot wrote no %s\n", c->o->img_path);
    return PLOT_BAD;
  }
  return PLOT_OK;
}

/* ---------------------------------------------------------------- output */

int plot_output_init(plot_output *o, const char *p, FILE *err) {
  memset(o, 0, sizeof *o);
  for (const char *s = p; *s; s++)
    if (*s == '\n' || *s == '\r' || (unsigned char)*s < 0x20) {
      fprintf(err, "tpusim plot: -o: control characters in the file name\n");
      return PLOT_BAD;
    }
  size_t n = strlen(p);
  if (n >= PLOT_PATH) {
    fprintf(err, "tpusim plot: -o: the path is too long\n");
    return PLOT_BAD;
  }
  const char *slash = strrchr(p, '/');
  const char *base = slash ? slash + 1 : p;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base || (strcmp(dot, ".png") != 0 && strcmp(dot, ".svg") != 0)) {
    fprintf(err, "tpusim plot: -o %s: unsupported extension (expected .png or .svg)\n", p);
    return PLOT_BAD;
  }
  o->svg = strcmp(dot, ".svg") == 0;
  snprintf(o->ext, sizeof o->ext, "%s", dot + 1);
  if (!slash) snprintf(o->dir, sizeof o->dir, ".");
  else if (slash == p) snprintf(o->dir, sizeof o->dir, "/");
  else snprintf(o->dir, sizeof o->dir, "%.*s", (int)(slash - p), p);
  snprintf(o->name, sizeof o->name, "%.*s", (int)(dot - base), base);
  size_t stem = (size_t)(dot - p);
  snprintf(o->dat_path, sizeof o->dat_path, "%.*s.dat", (int)stem, p);
  snprintf(o->gp_path, sizeof o->gp_path, "%.*s.gp", (int)stem, p);
  snprintf(o->img_path, sizeof o->img_path, "%s", p);
  if (!find_gnuplot(o->gnuplot, sizeof o->gnuplot)) {
    fprintf(err, "tpusim plot: gnuplot not found on PATH; install it (Debian: apt-get install "
                 "gnuplot-nox, or `make deps`)\n");
    return PLOT_BAD;
  }
  return PLOT_OK;
}

/* A gnuplot single-quoted string: '' stands for one quote. */
static void gp_quote(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* A data-file string column: double-quoted, with quotes and control
** characters replaced so the line stays one record. */
static void dat_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) fputc(*s == '"' || (unsigned char)*s < 0x20 ? '_' : *s, f);
  fputc('"', f);
}

static void gp_header(pctx *c, FILE *f) {
  fprintf(f, "# tpusim");
  for (int i = 0; i < c->argc; i++) fprintf(f, " %s", c->argv[i]);
  fprintf(f, "\n# Edit and re-draw: cd ");
  fprintf(f, "%s && gnuplot %s.gp\n", c->o->dir, c->o->name);
  fprintf(f, "# The data: %s.dat (columns named in its header).\n", c->o->name);
  if (c->o->svg) {
    fprintf(f, "set terminal svg size 900,560 font 'DejaVu Sans,11' background rgb 'white'\n");
  } else {
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'\n"
               "} else {\n"
               "  set terminal png size 900,560\n"
               "}\n");
  }
  char img[PLOT_PATH + 8];
  snprintf(img, sizeof img, "%s.%s", c->o->name, c->o->ext);
  char dat[PLOT_PATH + 8];
  snprintf(dat, sizeof dat, "%s.dat", c->o->name);
  fprintf(f, "set output ");
  gp_quote(f, img);
  fprintf(f, "\nDAT = ");
  gp_quote(f, dat);
  fprintf(f, "\nset grid\nset key below\n");
}

static void gp_title(FILE *f, const char *fmt, const char *a, const char *b) {
  char t[512];
  snprintf(t, sizeof t, fmt, a, b);
  fprintf(f, "set title ");
  gp_quote(f, t);
  fputc('\n', f);
}

/* A row-stacked histogram, one bar a plan, y from 0 in `ylabel`. */
static void gp_stacked(FILE *f, const char *ylabel) {
  fprintf(f, "set style data histograms\nset style histogram rowstacked\n"
             "set style fill solid 0.85 border -1\nset boxwidth 0.6\n"
             "set ylabel '%s'\nset yrange [0:*]\nset xtics rotate by -20\n"
             "set grid noxtics\n", ylabel);
}

/* ------------------------------------------------------------ inputs */

/* The plan `simulate` starts from on c's chip: its kind's default framework
** profile (megatron-core on GPUs, maxtext on TPUs, plain on CPUs), so that
** a chart's bar and `simulate` count the same bytes for the same plan
** (gradient dtype, attention kernel, overlaps); each chart then sets the
** fields its variants vary. */
static plan base_plan(const pctx *c, int64_t chips) {
  plan p = {.chips = chips, .tp = 1, .pp = 1, .ep = 1, .vp = 1, .slices = 1,
            .schedule = PLAN_1F1B,
            .precision = c->hwm ? plan_precision_on(c->hwm, GDT_BF16) : GDT_BF16, .seq = c->seq,
            .gbs = c->gbs};
  if (c->hwm) framework_apply(framework_default(c->hwm->kind), &p);
  return p;
}

/* plan_check + step_simulate; err holds the reason on failure. */
static int simulate(const pctx *c, plan *p, step_result *r, char *err, size_t errn) {
  if (plan_check(c->m, c->hwm, p, err, errn) != 0) return -1;
  /* the input pipeline simulate assumes by default (none on a CPU) */
  input_cfg in;
  int has = input_for_run(&in, c->hwm, c->m, NULL, p->seq, err, errn);
  if (has < 0) return -1;
  return step_simulate(c->m, c->hwm, p, has == 0 ? &in : NULL, r, NULL, err, errn);
}

static void plan_label(const plan *p, char *buf, size_t n) {
  static const char *const REC[] = {"", " sel-rc", " full-rc"};
  int w = snprintf(buf, n, "dp%lld", (long long)p->dp);
  if (p->tp > 1) w += snprintf(buf + w, n - (size_t)w, " tp%lld", (long long)p->tp);
  if (p->pp > 1) w += snprintf(buf + w, n - (size_t)w, " pp%lld", (long long)p->pp);
  if (p->zero) w += snprintf(buf + w, n - (size_t)w, " z%d", p->zero);
  snprintf(buf + w, n - (size_t)w, "%s", REC[p->recompute]);
}

/* ------------------------------------------------------------ roofline */

typedef struct {
  int id, group, kind, count;
  double flops, bytes, time_s;
} roof_pt;

static int roof_key_cmp(const void *a, const void *b) {
  const roof_pt *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  if (x->flops != y->flops) return x->flops < y->flops ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  if (x->time_s != y->time_s) return x->time_s < y->time_s ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int roof_id_cmp(const void *a, const void *b) {
  const roof_pt *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static int plot_roofline(pctx *c, FILE *dat, FILE *gp) {
  static const char *const GROUP[] = {"matmul (dot, conv)", "vector (elementwise, reduce, ...)",
                                      "optimizer update"};
  const graph *g = c->m->g;
  int n = graph_count(g);
  roof_pt *pts = calloc((size_t)(n > 0 ? n : 1), sizeof *pts);
  if (!pts) {
    fprintf(c->err, "tpusim plot: out of memory\n");
    return PLOT_BAD;
  }
  int np = 0;
  for (int id = 0; id < n; id++) {
    const graph_op *op = graph_get(g, id);
    if (op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT || op->kind == GOP_IOTA ||
        graph_op_is_collective(op->kind))
      continue;
    optime_result r;
    char err[256];
    if (optime_op(c->hwm, g, id, &r, err, sizeof err) != 0) {
      fprintf(c->err, "tpusim plot roofline: %s\n", err);
      free(pts);
      return PLOT_BAD;
    }
    if (!(r.flops > 0) || !(r.bytes > 0) || !(r.time_s > 0)) continue;
    int grp = op->phase == GRAPH_OPTIMIZER ? 2 : (op->kind == GOP_DOT || op->kind == GOP_CONV) ? 0 : 1;
    pts[np++] = (roof_pt){.id = id, .group = grp, .kind = (int)op->kind, .count = 1,
                          .flops = r.flops, .bytes = r.bytes, .time_s = r.time_s};
  }
  /* identical ops (the same layer repeated) become one point with a count */
  qsort(pts, (size_t)np, sizeof *pts, roof_key_cmp);
  int nu = 0;
  for (int i = 0; i < np; i++) {
    if (nu && pts[nu - 1].group == pts[i].group && pts[nu - 1].kind == pts[i].kind &&
        pts[nu - 1].flops == pts[i].flops && pts[nu - 1].bytes == pts[i].bytes &&
        pts[nu - 1].time_s == pts[i].time_s) {
      pts[nu - 1].count++;
      continue;
    }
    pts[nu++] = pts[i];
  }
  qsort(pts, (size_t)nu, sizeof *pts, roof_id_cmp);

  double peak = hw_peak_16bit(c->hwm), bw = c->hwm->chip.hbm_bw_bytes_per_s;
  if (!(peak > 0) || !(bw > 0) || nu == 0) {
    fprintf(c->err, "tpusim plot roofline: %s\n",
            nu == 0 ? "the model has no op that does arithmetic"
                    : "the chip has no 16-bit peak or no HBM bandwidth");
    free(pts);
    return PLOT_BAD;
  }
  double ridge = peak / bw, xmin = ridge, xmax = ridge;
  fprintf(dat, "# tpusim plot roofline: %s on %s (%d ops, %d distinct points)\n", c->m->name,
          c->hwm->name, np, nu);
  fprintf(dat, "# peak_16bit_flops_per_s %.6e  hbm_bytes_per_s %.6e  ridge_flop_per_byte %.6e\n",
          peak, bw, ridge);
  int present[3] = {0, 0, 0};
  for (int grp = 0; grp < 3; grp++) {
    fprintf(dat, "%s# group %d: %s\n", grp ? "\n\n" : "", grp, GROUP[grp]);
    fprintf(dat, "# intensity_flop_per_byte achieved_tflop_per_s time_s count kind first_op\n");
    for (int i = 0; i < nu; i++) {
      if (pts[i].group != grp) continue;
      double ai = pts[i].flops / pts[i].bytes;
      if (ai < xmin) xmin = ai;
      if (ai > xmax) xmax = ai;
      present[grp]++;
      fprintf(dat, "%.6e %.6e %.6e %d %s ", ai, pts[i].flops / pts[i].time_s / 1e12,
              pts[i].time_s, pts[i].count, graph_op_name((graph_op_kind)pts[i].kind));
      dat_str(dat, graph_get(g, pts[i].id)->name ? graph_get(g, pts[i].id)->name : "");
      fputc('\n', dat);
    }
    if (!present[grp]) fprintf(dat, "# (none)\n");
  }
  free(pts);

  gp_header(c, gp);
  gp_title(gp, "Roofline: %s training step on %s", c->m->name, c->hwm->name);
  fprintf(gp, "PEAK = %.6e  # TFLOP/s, 16-bit matrix peak\n", peak / 1e12);
  fprintf(gp, "BW = %.6e    # TB/s, HBM\n", bw / 1e12);
  fprintf(gp, "RIDGE = PEAK / BW  # FLOP/byte\n");
  fprintf(gp, "roof(x) = (x * BW < PEAK) ? x * BW : PEAK\n");
  fprintf(gp, "set key inside top left Left reverse opaque box\nset format x '%%g'\nset format y '%%g'\n");
  fprintf(gp, "set logscale xy\nset xlabel 'arithmetic intensity (FLOP/byte)'\n"
              "set ylabel 'achieved TFLOP/s'\n");
  fprintf(gp, "set xrange [%.6e:%.6e]\n", xmin / 4, xmax * 4);
  fprintf(gp, "set yrange [*:PEAK * 3]\nset samples 400\n");
  fprintf(gp, "set arrow from RIDGE, graph 0 to RIDGE, graph 1 nohead dashtype 2 lc rgb '#888888'\n");
  fprintf(gp, "set label sprintf('ridge %%.0f FLOP/B', RIDGE) at RIDGE * 1.15, PEAK * 1.6 left\n");
  fprintf(gp, "plot roof(x) with lines lw 2 lc rgb '#000000' title sprintf('roofline (%%.0f TFLOP/s, %%.2f TB/s)', PEAK, BW)");
  static const char *const STYLE[] = {"pt 7 ps 1.0 lc rgb '#1f77b4'", "pt 5 ps 0.7 lc rgb '#ff7f0e'",
                                      "pt 9 ps 0.9 lc rgb '#2ca02c'"};
  for (int grp = 0; grp < 3; grp++)
    if (present[grp])
      fprintf(gp, ", \\\n     DAT index %d using 1:2 with points %s title '%s'", grp, STYLE[grp],
              GROUP[grp]);
  fprintf(gp, "\n");
  return PLOT_OK;
}

/* ------------------------------------------------------------ collective */

static int plot_collective(pctx *c, FILE *dat, FILE *gp) {
  int op = coll_op_parse(c->op);
  if (op < 0)
    return usage(c, "unknown --op '%s' (all-reduce, reduce-scatter, all-gather, all-to-all, "
                    "broadcast, send-recv)", c->op);
  char err[512];
  net *n = net_build(c->hwm, c->chips, 1, err, sizeof err);
  if (!n) {
    fprintf(c->err, "tpusim plot collective: %s\n", err);
    return PLOT_BAD;
  }
  char desc[256];
  net_describe(n, desc, sizeof desc);
  fprintf(dat, "# tpusim plot collective: %s over %lld x %s: %s\n", coll_op_name((coll_op)op),
          (long long)c->chips, c->hwm->name, desc);
  int shown[COLL_ALGO_COUNT], ns = 0;
  for (int a = 1; a < COLL_ALGO_COUNT; a++) {
    int rows = 0;
    for (double b = 1024; b <= 1024.0 * 1024 * 1024 * 1.0001; b *= 4) {
      coll_req req = {.op = (coll_op)op, .algo = (coll_algo)a, .bytes = b, .axis = -1};
      coll_result res;
      if (coll_run(n, &req, &res, err, sizeof err) != 0) {
        if (!rows) fprintf(dat, "%s# %s: skipped: %s\n", ns ? "" : "", coll_algo_name((coll_algo)a), err);
        break;
      }
      if (!rows) {
        fprintf(dat, "%s# algorithm %s\n# bytes time_s algbw_GB_per_s busbw_GB_per_s\n",
                ns ? "\n\n" : "", coll_algo_name((coll_algo)a));
      }
      fprintf(dat, "%.0f %.6e %.6e %.6e\n", b, res.time_s, res.algbw / 1e9, res.busbw / 1e9);
      rows++;
    }
    if (rows) shown[ns++] = a;
  }
  net_free(n);
  if (!ns) {
    fprintf(c->err, "tpusim plot collective: no algorithm runs %s on this network\n", c->op);
    return PLOT_BAD;
  }
  gp_header(c, gp);
  char what[128];
  snprintf(what, sizeof what, "%s, %lld chips", coll_op_name((coll_op)op), (long long)c->chips);
  gp_title(gp, "Collective bus bandwidth: %s on %s", what, c->hwm->name);
  fprintf(gp, "set logscale x 2\nset xlabel 'message size (bytes per chip)'\n"
              "set ylabel 'bus bandwidth (GB/s)'\nset yrange [0:*]\n"
              "set xtics ('1K' 1024, '16K' 16384, '256K' 262144, '4M' 4194304, "
              "'64M' 67108864, '1G' 1073741824)\n");
  fprintf(gp, "plot ");
  for (int i = 0; i < ns; i++)
    fprintf(gp, "%sDAT index %d using 1:4 with linespoints lw 2 pt %d title '%s'",
            i ? ", \\\n     " : "", i, 4 + i, coll_algo_name((coll_algo)shown[i]));
  fprintf(gp, "\n");
  return PLOT_OK;
}

/* ------------------------------------------------------------ breakdown, memory */

typedef struct {
  int64_t tp, pp;
  int zero;
  plan_recompute rec;
} plan_var;

/* One data row per plan variant that runs on c's chips (at most max_rows;
** 0: all), labelled with the plan; a variant that fails is a comment in
** the data file. The number of rows, or 0 after a message when none ran. */
typedef void (*row_fn)(FILE *dat, const step_result *r);

static int variant_rows(pctx *c, FILE *dat, const plan_var *vars, size_t n, int max_rows,
                        const char *kind, row_fn row) {
  int rows = 0;
  char last_err[512] = "";
  for (size_t i = 0; i < n && (max_rows == 0 || rows < max_rows); i++) {
    const plan_var *v = &vars[i];
    if (c->chips % (v->tp * v->pp) != 0) continue;
    plan p = base_plan(c, c->chips);
    p.tp = v->tp;
    p.pp = v->pp;
    p.zero = v->zero;
    p.recompute = v->rec;
    step_result r;
    char err[512];
    if (simulate(c, &p, &r, err, sizeof err) != 0) {
      snprintf(last_err, sizeof last_err, "%s", err);
      fprintf(dat, "# skipped tp %lld pp %lld: %s\n", (long long)v->tp, (long long)v->pp, err);
      continue;
    }
    char label[64];
    plan_label(&p, label, sizeof label);
    dat_str(dat, label);
    row(dat, &r);
    rows++;
  }
  if (!rows) fprintf(c->err, "tpusim plot %s: no plan runs: %s\n", kind, last_err);
  return rows;
}

static void breakdown_row(FILE *dat, const step_result *r) {
  fprintf(dat, " %.6f %.6f %.6f %.6f %.6f %.6f\n", r->breakdown_s.compute * 1e3,
          r->breakdown_s.exposed_comm * 1e3, r->breakdown_s.pipeline_bubble * 1e3,
          r->breakdown_s.input_stall * 1e3, r->breakdown_s.other * 1e3, r->step_time_s * 1e3);
}

#define GIB (1024.0 * 1024 * 1024)

/* Every term of the memory model's peak (sim/memory.h mem_bytes), so that
** a bar's parts add up to the peak `simulate` prints: "other" is the
** runtime's reserve, the communicators' buffers and the allocator's
** fragmentation (mem_bytes' peak_of). */
static void memory_row(FILE *dat, const step_result *r) {
  const mem_bytes *mb = &r->memory;
  double other = mb->runtime + mb->comm + mb->fragmentation;
  fprintf(dat, " %.6f %.6f %.6f %.6f %.6f %.6f %.6f %d\n", mb->weights / GIB, mb->gradients / GIB,
          mb->optimizer / GIB, mb->activations / GIB, mb->temporary / GIB, other / GIB,
          mb->peak / GIB, r->fits ? 1 : 0);
}

static int plot_breakdown(pctx *c, FILE *dat, FILE *gp) {
  static const plan_var VARS[] = {
      {1, 1, 0, PLAN_RECOMPUTE_NONE}, {1, 1, 0, PLAN_RECOMPUTE_FULL}, {2, 1, 0, PLAN_RECOMPUTE_NONE},
      {4, 1, 0, PLAN_RECOMPUTE_NONE}, {1, 2, 0, PLAN_RECOMPUTE_NONE}, {2, 2, 0, PLAN_RECOMPUTE_NONE},
      {8, 1, 0, PLAN_RECOMPUTE_NONE}, {1, 4, 0, PLAN_RECOMPUTE_NONE}};
  fprintf(dat, "# tpusim plot breakdown: %s on %lld x %s (milliseconds per step)\n", c->m->name,
          (long long)c->chips, c->hwm->name);
  fprintf(dat, "# plan compute exposed_comm pipeline_bubble input_stall other step_time\n");
  if (variant_rows(c, dat, VARS, sizeof VARS / sizeof VARS[0], 6, "breakdown", breakdown_row) <= 0)
    return PLOT_BAD;
  gp_header(c, gp);
  char what[128];
  snprintf(what, sizeof what, "%s, %lld x", c->m->name, (long long)c->chips);
  gp_title(gp, "Step-time breakdown: %s %s", what, c->hwm->name);
  gp_stacked(gp, "milliseconds per step");
  fprintf(gp, "plot DAT using 2:xtic(1) title 'compute' lc rgb '#1f77b4', \\\n"
              "     '' using 3 title 'exposed comm' lc rgb '#d62728', \\\n"
              "     '' using 4 title 'pipeline bubble' lc rgb '#7f7f7f', \\\n"
              "     '' using 5 title 'input stall' lc rgb '#bcbd22', \\\n"
              "     '' using 6 title 'other' lc rgb '#9467bd'\n");
  return PLOT_OK;
}

static int plot_memory(pctx *c, FILE *dat, FILE *gp) {
  static const plan_var VARS[] = {
      {1, 1, 0, PLAN_RECOMPUTE_NONE}, {1, 1, 0, PLAN_RECOMPUTE_SELECTIVE},
      {1, 1, 0, PLAN_RECOMPUTE_FULL}, {1, 1, 1, PLAN_RECOMPUTE_NONE},
      {1, 1, 3, PLAN_RECOMPUTE_NONE}, {1, 1, 3, PLAN_RECOMPUTE_FULL}};
  fprintf(dat, "# tpusim plot memory: %s on %lld x %s (GiB per chip, worst stage)\n", c->m->name,
          (long long)c->chips, c->hwm->name);
  fprintf(dat, "# capacity_gib %.6f\n", (double)c->hwm->chip.hbm_bytes / GIB);
  fprintf(dat, "# plan weights gradients optimizer activations temporary other peak fits\n");
  if (variant_rows(c, dat, VARS, sizeof VARS / sizeof VARS[0], 0, "memory", memory_row) <= 0)
    return PLOT_BAD;
  gp_header(c, gp);
  char what[128];
  snprintf(what, sizeof what, "%s, %lld x", c->m->name, (long long)c->chips);
  gp_title(gp, "Memory per chip: %s %s", what, c->hwm->name);
  fprintf(gp, "CAP = %.6f  # GiB of HBM per chip\n", (double)c->hwm->chip.hbm_bytes / GIB);
  gp_stacked(gp, "GiB per chip");
  fprintf(gp, "set arrow from graph 0, first CAP to graph 1, first CAP nohead lw 2 lc rgb '#d62728' front\n"
              "set label sprintf('capacity %%.0f GiB', CAP) at graph 0.01, first CAP offset 0,0.7 "
              "tc rgb '#d62728' front\n");
  fprintf(gp, "plot DAT using 2:xtic(1) title 'weights' lc rgb '#1f77b4', \\\n"
              "     '' using 3 title 'gradients' lc rgb '#ff7f0e', \\\n"
              "     '' using 4 title 'optimizer' lc rgb '#2ca02c', \\\n"
              "     '' using 5 title 'activations' lc rgb '#9467bd', \\\n"
              "     '' using 6 title 'temporary' lc rgb '#8c564b', \\\n"
              "     '' using 7 title 'runtime, comms, fragmentation' lc rgb '#7f7f7f', \\\n"
              "     NaN with lines lw 2 lc rgb '#d62728' title 'capacity'\n");
  return PLOT_OK;
}

/* ------------------------------------------------------------ scaling */

/* Data-parallel scaling four ways (docs/visualization.md): the all-reduce
** the network suits (hierarchical across GPU nodes), a flat ring over every
** chip, a Reduction Server with a reducer host per chip, and FSDP (ZeRO-3:
** weights gathered every micro-batch, gradients reduce-scattered). Each
** series stops where its plan stops running (memory, or the model). */
static int plot_scaling(pctx *c, FILE *dat, FILE *gp) {
  static const struct {
    const char *name, *title, *color;
    int pt;
  } SERIES[] = {
      {"all-reduce (hierarchical where the network has nodes)", "all-reduce", "#1f77b4", 7},
      {"flat ring all-reduce over every chip", "flat ring", "#2ca02c", 9},
      {"with a Reduction Server (reducers = chips)", "Reduction Server", "#ff7f0e", 5},
      {"FSDP (ZeRO-3)", "FSDP", "#d62728", 11},
  };
  enum { NS = 4 };
  int64_t per = c->batch_per_chip ? c->batch_per_chip : 4;
  bool tokens = c->m->train.seq_len > 1;
  fprintf(dat, "# tpusim plot scaling: %s on %s, data parallel, global batch = %lld x chips\n",
          c->m->name, c->hwm->name, (long long)per);
  double base = 0;
  int index[NS], series = 0;
  char last_err[512] = "";
  for (int s = 0; s < NS; s++) {
    int rows = 0;
    index[s] = -1;
    for (int64_t n = s == 2 || s == 3 ? 2 : 1; n <= c->max_chips; n *= 2) {
      plan p = base_plan(c, n);
      p.dp = n;
      p.gbs = per * n;
      p.reduction_server = s == 2 ? n : 0;
      p.dp_algo = s == 1 ? COLL_RING : COLL_AUTO;
      p.zero = s == 3 ? 3 : 0;
      step_result r;
      char err[512];
      if (simulate(c, &p, &r, err, sizeof err) != 0) {
        snprintf(last_err, sizeof last_err, "%s", err);
        fprintf(dat, "# %s: stops at %lld chips: %s\n", SERIES[s].title, (long long)n, err);
        break;
      }
      double rate = r.tokens_per_s; /* units of work: tokens, or samples without a sequence */
      if (s == 0 && n == 1) base = rate;
      if (!rows)
        fprintf(dat, "%s# %s\n# chips %s efficiency step_time_s\n", series ? "\n\n" : "",
                SERIES[s].name, tokens ? "tokens_per_s" : "samples_per_s");
      fprintf(dat, "%lld %.6e %.6f %.6e\n", (long long)n, rate,
              base > 0 ? rate / ((double)n * base) : 0.0, r.step_time_s);
      rows++;
    }
    if (rows) index[s] = series++;
    if (s == 0 && !rows) break;
  }
  if (!series) {
    fprintf(c->err, "tpusim plot scaling: no plan runs: %s\n", last_err);
    return PLOT_BAD;
  }
  gp_header(c, gp);
  gp_title(gp, "Data-parallel scaling: %s on %s", c->m->name, c->hwm->name);
  fprintf(gp, "set logscale x 2\nset xlabel 'chips (data parallel)'\n"
              "set ylabel '%s'\nset y2label 'scaling efficiency (%%)'\n"
              "set yrange [0:*]\nset y2range [0:110]\nset ytics nomirror\nset y2tics\n"
              "set key left\n",
          tokens ? "tokens/s" : "samples/s");
  const char *sep = "plot ";
  for (int s = 0; s < NS; s++) {
    if (index[s] < 0) continue;
    fprintf(gp, "%sDAT index %d using 1:2 with linespoints lw 2 pt %d lc rgb '%s' "
                "title 'throughput, %s', \\\n"
                "     DAT index %d using 1:($3*100) axes x1y2 with linespoints dt 2 pt %d "
                "lc rgb '%s' title 'efficiency, %s'",
            sep, index[s], SERIES[s].pt, SERIES[s].color, SERIES[s].title, index[s],
            SERIES[s].pt - 1, SERIES[s].color, SERIES[s].title);
    sep = ", \\\n     ";
  }
  fprintf(gp, "\n");
  return PLOT_OK;
}

/* ------------------------------------------------------------ pareto */

/* The plans of one data block: time in days, price, and a label. */
static void pareto_rows(FILE *dat, const planner_cand *v, int n, bool label_plan) {
  for (int i = 0; i < n; i++) {
    const planner_cand *k = &v[i];
    fprintf(dat, "%.6e %.6e ", k->train_s / 86400, k->train_usd);
    if (label_plan) {
      char l[96];
      snprintf(l, sizeof l, "%s x%lld tp%lld pp%lld", k->hw, (long long)k->p.chips, (long long)k->p.tp,
               (long long)k->p.pp);
      dat_str(dat, l);
    } else {
      dat_str(dat, k->hw);
    }
    fprintf(dat, " %lld %lld %lld\n", (long long)k->p.chips, (long long)k->p.tp, (long long)k->p.pp);
  }
}

/* The time-versus-cost frontier (planner/pareto.c: every plan the search
** scored, across hardware and chip counts, that no other beats on both)
** over each hardware's best plan by the objective. From a search here, or
** from a saved `plan --pareto --json` (r->front). */
static int plot_pareto(pctx *c, FILE *dat, FILE *gp) {
  planner_req req = {.hw_list = c->hw_list, .max_chips = c->max_chips ? c->max_chips : 64,
                     .top = 1, .chips = c->chips, .pareto = true};
  planner_result *r = calloc(1, sizeof *r);
  char err[1024];
  const char *name = c->m ? c->m->name : c->front_model;
  if (!r) {
    fprintf(c->err, "tpusim plot pareto: out of memory\n");
    return PLOT_BAD;
  }
  if (c->front) {
    fprintf(dat, "# tpusim plot pareto: %s, the frontier of a saved plan --pareto --json\n", name);
  } else {
    if (planner_run(c->m, c->cat, &req, r, err, sizeof err) != 0) {
      fprintf(c->err, "tpusim plot pareto: %s\n", err);
      planner_result_free(r);
      free(r);
      return PLOT_BAD;
    }
    fprintf(dat, "# tpusim plot pareto: %s, best analytic plan per hardware, up to %lld chips\n",
            name, (long long)req.max_chips);
    fprintf(dat, "# train_days train_usd hw chips tp pp\n");
    pareto_rows(dat, r->per_hw, r->n_per_hw, false);
    fprintf(dat, "\n\n");
  }
  fprintf(dat, "# Pareto frontier: no plan is both faster and cheaper (fastest first)\n"
               "# train_days train_usd plan chips tp pp\n");
  const planner_cand *front = c->front ? c->front : r->pareto;
  int n = c->front ? c->n_front : r->n_pareto;
  pareto_rows(dat, front, n, true);
  planner_result_free(r);
  free(r);
  if (!n) {
    fprintf(c->err, "tpusim plot pareto: no plan on the frontier (no hardware has a plan)\n");
    return PLOT_BAD;
  }
  gp_header(c, gp);
  gp_title(gp, "Cost vs time to train %s%s", name, " (Pareto frontier of plans)");
  fprintf(gp, "set format x '%%g'\nset format y '%%g'\n");
  fprintf(gp, "set logscale xy\nset xlabel 'days to train'\nset ylabel 'US dollars'\n"
              "set offsets graph 0.05, graph 0.3, graph 0.1, graph 0.1\n");
  /* the frontier is the data's first block when read back, its second after a search */
  int fi = c->front ? 0 : 1;
  fprintf(gp, "plot %sDAT index %d using 1:2 with linespoints lw 2 pt 6 ps 1.5 lc rgb '#d62728' "
              "title 'Pareto frontier', \\\n"
              "     DAT index %d using 1:2:3 with labels rotate by 30 offset 0.6,0.6 left font ',8' notitle\n",
          c->front ? ""
                   : "DAT index 0 using 1:2 with points pt 7 ps 1.3 lc rgb '#1f77b4' title "
                     "'best plan per hardware', \\\n"
                     "     DAT index 0 using 1:2:3 with labels offset 0.8,-0.8 left font ',8' "
                     "tc rgb '#1f77b4' notitle, \\\n     ",
          fi, fi);
  return PLOT_OK;
}

/* ------------------------------------------------------------ main */

typedef int (*plot_fn)(pctx *c, FILE *dat, FILE *gp);

static const struct {
  const char *name;
  plot_fn fn;
  unsigned needs;
} KINDS[PLOT_KIND_COUNT] = {
    [PLOT_ROOFLINE] = {"roofline", plot_roofline, PLOT_NEEDS_MODEL | PLOT_NEEDS_HW},
    [PLOT_SCALING] = {"scaling", plot_scaling,
                      PLOT_NEEDS_MODEL | PLOT_NEEDS_HW | PLOT_NEEDS_MAX_CHIPS},
    [PLOT_MEMORY] = {"memory", plot_memory, PLOT_NEEDS_MODEL | PLOT_NEEDS_HW | PLOT_NEEDS_CHIPS},
    [PLOT_PARETO] = {"pareto", plot_pareto, PLOT_NEEDS_MODEL},
    [PLOT_BREAKDOWN] = {"breakdown", plot_breakdown,
                        PLOT_NEEDS_MODEL | PLOT_NEEDS_HW | PLOT_NEEDS_CHIPS},
    [PLOT_COLLECTIVE] = {"collective", plot_collective,
                         PLOT_NEEDS_HW | PLOT_NEEDS_CHIPS | PLOT_NEEDS_OP},
};

int plot_kind_parse(const char *name) {
  for (int k = 0; k < PLOT_KIND_COUNT; k++)
    if (strcmp(KINDS[k].name, name) == 0) return k;
  return -1;
}

const char *plot_kind_name(plot_kind k) { return KINDS[k].name; }
unsigned plot_kind_needs(plot_kind k) { return KINDS[k].needs; }

int plot_draw(const plot_req *r, const plot_output *o, FILE *out, FILE *err) {
  pctx ctx = {.kind = KINDS[r->kind].name, .op = r->op, .hw_list = r->hw_list,
              .chips = r->chips, .max_chips = r->max_chips, .seq = r->seq, .gbs = r->gbs,
              .batch_per_chip = r->batch_per_chip, .out = out, .err = err, .o = o,
              .argc = r->argc, .argv = r->argv, .cat = r->cat, .hwm = r->hw, .m = r->m,
              .front = r->front, .n_front = r->n_front, .front_model = r->front_model};
  pctx *c = &ctx;
  int rc = PLOT_OK;
  FILE *dat = fopen(o->dat_path, "w");
  FILE *gp = dat ? fopen(o->gp_path, "w") : NULL;
  if (!gp) {
    fprintf(err, "tpusim plot: cannot write %s: %s\n", dat ? o->gp_path : o->dat_path,
            strerror(errno));
    rc = PLOT_BAD;
  }
  if (rc == PLOT_OK) rc = KINDS[r->kind].fn(c, dat, gp);
  if (dat && fclose(dat) != 0 && rc == PLOT_OK) rc = PLOT_BAD;
  if (gp && fclose(gp) != 0 && rc == PLOT_OK) rc = PLOT_BAD;
  if (rc == PLOT_OK) rc = run_gnuplot(c);
  return rc;
}

/* ---------------------------------------------------------------- shared with plot_sweep.c */

void plot_script_header(const plot_output *o, int argc, char **argv, FILE *gp) {
  pctx c = {.o = o, .argc = argc, .argv = argv};
  gp_header(&c, gp);
}

int plot_run_gnuplot(const plot_output *o, FILE *out, FILE *err) {
  pctx c = {.o = o, .out = out, .err = err};
  return run_gnuplot(&c);
}
