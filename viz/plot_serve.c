/*
** plot_serve.c -- see plot_serve.h. Every figure comes from serve_curve,
** the function the planner keeps its batch from, so the chart's point at
** serve's batch is the row serve prints (tests/test_plot.c holds it so).
*/
#include "plot_serve.h"
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The batches serve_curve tries: 1, 2, 4, ... 1024. */
#define MAX_POINTS 11

/* A curve's name: "tpu-v6e bf16 tp1". */
static void curve_name(const serve_cand *k, char *buf, size_t n) {
  snprintf(buf, n, "%s %s tp%lld", k->hw->name, k->prec->name, (long long)k->tp);
}

/* Throughput a chip: output tokens a second at full batch (batch / TPOT,
** the decode rate) for a generative model, else samples a second. */
static double per_chip(const serve_cand *k) {
  const serve_result *r = &k->step;
  return (r->generative ? r->decode_tokens_per_s : r->samples_per_s) / (double)k->tp;
}

/* One candidate's block: a row a batch. Returns the rows written, or -1. */
static int write_curve(const plot_serve_req *r, const serve_cand *k, int rank, FILE *dat,
                       FILE *err) {
  serve_cand pts[MAX_POINTS];
  char msg[512];
  int n = serve_curve(r->m, k->hw, r->q, k->prec, k->tp, pts, MAX_POINTS, msg, sizeof msg);
  if (n < 0) {
    fprintf(err, "tpusim plot serve: %s on %s: %s\n", r->m->name, k->hw->name, msg);
    return -1;
  }
  char name[128];
  curve_name(k, name, sizeof name);
  fprintf(dat, "# curve %d: %s (serve's rank %d, batch %lld)\n", rank, name, rank, (long long)k->batch);
  fprintf(dat, "# batch per_chip_per_s %s ttft_ms p99_ms replicas chosen\n",
          k->step.generative ? "tpot_ms" : "forward_ms");
  for (int i = 0; i < n; i++) {
    const serve_cand *p = &pts[i];
    const serve_result *s = &p->step;
    fprintf(dat, "%lld %.6g %.6g %.6g ", (long long)p->batch, per_chip(p),
            (s->generative ? s->tpot_s : s->forward_s) * 1e3, (s->generative ? s->ttft_s : s->forward_s) * 1e3);
    if (p->meets) fprintf(dat, "%.6g", p->p99_s * 1e3);
    else fprintf(dat, "-");
    fprintf(dat, " %lld %d\n", (long long)p->replicas, p->batch == k->batch);
  }
  fprintf(dat, "\n\n");
  return n;
}

/* The panel: y column of the data against throughput a chip, a curve per
** candidate and serve's choice ringed. */
static void gp_panel(FILE *gp, const plot_serve_req *r, int ycol, const char *ylabel) {
  fprintf(gp, "set ylabel '%s'\nplot ", ylabel);
  for (int i = 0; i < r->n_chosen; i++) {
    char name[128];
    curve_name(&r->chosen[i], name, sizeof name);
    fprintf(gp, "%sDAT index %d using 2:%d with linespoints lw 2 pt 7 ps 0.8 lc %d title '%s', \\\n"
                "     DAT index %d using 2:($7 == 1 ? $%d : 1/0) with points pt 6 ps 2.5 lw 2 "
                "lc %d notitle",
            i ? ", \\\n     " : "", i, ycol, i + 1, name, i, ycol, i + 1);
  }
  fprintf(gp, "\n");
}

static void write_script(const plot_serve_req *r, const plot_output *o, FILE *gp) {
  bool gen = r->chosen[0].step.generative;
  plot_script_header(o, r->argc, r->argv, gp);
  char t[256];
  snprintf(t, sizeof t, "Serving %s at %.3g requests/s: latency vs throughput as the batch doubles "
                        "(ringed: the batch serve keeps)", r->m->name, r->q->qps);
  fprintf(gp, "set datafile missing '-'\nset multiplot layout 1,2 title '%s'\n", t);
  fprintf(gp, "set logscale x\nset format x '%%g'\nset yrange [0:*]\nset xlabel '%s'\n",
          gen ? "output tokens/s per chip (decode, full batch)" : "samples/s per chip");
  gp_panel(gp, r, 3, gen ? "time per output token (ms)" : "forward of the batch (ms)");
  gp_panel(gp, r, 5, gen ? "p99 time to first token, queueing included (ms)"
                         : "p99 time to the answer, queueing included (ms)");
  fprintf(gp, "unset multiplot\n");
}

int plot_serve_draw(const plot_serve_req *r, const plot_output *o, FILE *out, FILE *err) {
  if (r->n_chosen < 1) {
    fprintf(err, "tpusim plot serve: no candidate meets the request: nothing to draw "
                 "(the reasons above)\n");
    return 1;
  }
  FILE *dat = fopen(o->dat_path, "w");
  if (!dat) {
    fprintf(err, "tpusim plot serve: cannot write %s\n", o->dat_path);
    return 1;
  }
  const serve_req *q = r->q;
  fprintf(dat, "# tpusim plot serve: %s at %.6g requests/s", r->m->name, q->qps);
  if (q->latency_p99_s > 0) fprintf(dat, ", p99 target %.6g ms", q->latency_p99_s * 1e3);
  if (q->tpot_max_s > 0) fprintf(dat, ", TPOT target %.6g ms", q->tpot_max_s * 1e3);
  if (r->chosen[0].step.generative)
    fprintf(dat, "; %lld prompt + %lld output tokens", (long long)q->input_tokens,
            (long long)q->output_tokens);
  fprintf(dat, "\n# p99 '-': no replica count meets the targets at that batch\n");
  int rc = 0;
  for (int i = 0; i < r->n_chosen && rc == 0; i++)
    if (write_curve(r, &r->chosen[i], i + 1, dat, err) < 0) rc = 1;
  if (fclose(dat) != 0 && rc == 0) {
    fprintf(err, "tpusim plot serve: cannot write %s\n", o->dat_path);
    rc = 1;
  }
  if (rc) return rc;
  FILE *gp = fopen(o->gp_path, "w");
  if (!gp) {
    fprintf(err, "tpusim plot serve: cannot write %s\n", o->gp_path);
    return 1;
  }
  write_script(r, o, gp);
  if (fclose(gp) != 0) {
    fprintf(err, "tpusim plot serve: cannot write %s\n", o->gp_path);
    return 1;
  }
  return plot_run_gnuplot(o, out, err);
}
