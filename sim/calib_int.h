/*
** calib_int.h -- private to the calibration (sim/calib*.c): the kernel set
** while it is built and timed, and the functions its files share. The rest
** of the program includes calib.h only.
*/
#ifndef TPUSIM_CALIB_INT_H
#define TPUSIM_CALIB_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "calib.h"
#include "lower.h"
#include "../workloads/graph.h"

#define MAX_FUSED 4 /* ops in one fused step */
#define MAX_ARGS 6  /* buffers of one step: inputs, then the output */

/* A kernel while it is built and timed: its graph, and per step the ops,
** the lowered function and the graph values its arguments are. */
typedef struct {
  graph *g;
  int n_steps;
  int ops[CALIB_MAX_STEPS][MAX_FUSED];
  int n_ops[CALIB_MAX_STEPS];
  int fn[CALIB_MAX_STEPS];
  int args[CALIB_MAX_STEPS][MAX_ARGS];
  int n_args[CALIB_MAX_STEPS];
} kbuild;

typedef struct {
  calib_run *run;
  kbuild *kb; /* one per run->kernels[i] */
  int cap;
} kset;

/* calib_set.c */

void calib_build_set(kset *s, bool quick);
int calib_lower_set(kset *s, lower_module *m, char *err, size_t n);
void calib_mark_vectorized(kset *s, const lower_module *m);
void calib_kset_free(kset *s);

/* calib.c */

int calib_cmp_double(const void *a, const void *b);

#endif
