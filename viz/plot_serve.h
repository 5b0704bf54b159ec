/*
** plot_serve.h -- `tpusim plot serve MODEL [serve's options]`: latency
** against throughput for the candidates `tpusim serve` ranks, one curve per
** hardware and precision as the batch grows (planner/serve.h serve_curve:
** the planner's own figures, batch by batch).
*/
#ifndef TPUSIM_PLOT_SERVE_H
#define TPUSIM_PLOT_SERVE_H

#include <stdio.h>

#include "../planner/serve.h"
#include "plot.h"

typedef struct {
  const model *m;
  const serve_req *q;       /* an online request: q->qps given */
  const serve_cand *chosen; /* serve's candidates that meet it, best first: a curve each */
  int n_chosen;
  /* the command line after `tpusim`, echoed at the top of the script */
  int argc;
  char **argv;
} plot_serve_req;

/* Writes o's data (a block per candidate: batch, tokens or samples a second
** per chip, time per output token or forward, time to first token, p99,
** replicas, whether it is serve's choice) and script, then runs gnuplot.
** 0, or 1 after a message to err. */
int plot_serve_draw(const plot_serve_req *r, const plot_output *o, FILE *out, FILE *err);

#endif
