/*
** explain.h -- a simulated step shown term by term (`simulate --explain`,
** `plan --explain N`): the step time and the memory peak as sums of named
** terms, each with its formula and the numbers put into it, units on every
** number.
**
** Not a second model: every term's value is a number the step model itself
** recorded in its step_result (sim/step.c, stepwhole.c, memory.c), so the
** terms add up to the step's own total -- the step time is
**   compute + layer collectives + pipeline bubble + exposed gradient sync
**   + optimizer + input stall
** by construction of step.c's finish() (chip 0's busy time, its idle time
** in the schedule, the all-reduce past its last backward, the update) and
** the peak is memory.c's peak_of() sum. The formulas' substituted numbers
** are the step model's pieces (per layer, per micro-batch); where a
** reconstruction from those pieces does not give the term exactly (uneven
** stages, layers of several kinds, ZeRO-3's gathers ahead of compute) the
** text says so rather than showing an equation that does not hold.
**
** Printing: explain_round() rounds the terms so that the printed parts add
** up to the printed total exactly (largest remainders), in one unit chosen
** from the total.
*/
#ifndef TPUSIM_EXPLAIN_H
#define TPUSIM_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "step.h"

enum { EXPLAIN_MAX_TERMS = 12 };

typedef struct {
  const char *name;  /* "compute", "pipeline bubble", ... (static) */
  char formula[160]; /* in symbols: "m x t_mb" */
  char values[320];  /* the numbers put in, with units: "8 micro-batches x 101.2 ms" */
  double value;      /* seconds (time) or bytes (memory) */
} explain_term;

typedef struct {
  explain_term time[EXPLAIN_MAX_TERMS];
  int n_time;
  double step_time_s; /* r->step_time_s: the terms' sum */
  explain_term mem[EXPLAIN_MAX_TERMS];
  int n_mem;
  double peak_bytes; /* r->memory.peak: the terms' sum */
} step_explain;

/* The terms of step r, simulated for model m under plan p. */
void step_explain_fill(const model *m, const hw_model *hw, const plan *p, const step_result *r,
                       step_explain *e);

/* A printing unit for a total: its name, its size in the base unit (s or
** B) and the decimals shown ("ms", 1e-3, 3). */
typedef struct {
  const char *name;
  double scale;
  int decimals;
} explain_unit;
explain_unit explain_time_unit(double total_s);
explain_unit explain_mem_unit(double total_bytes);

/* The n values v[] and their total, in quanta of 10^-decimals units:
** out[i] each rounded so that sum(out) == *total_q, the total rounded
** (largest-remainder rounding). Returns 0, or -1 when the values do not
** add up to the total within half a quantum per term (a bug: the terms
** were not the model's). */
int explain_round(const double *v, int n, double total, explain_unit u, int64_t *out,
                  int64_t *total_q);

/* {"time": [{"term", "formula", "values", "value_s"}...], "step_time_s",
**  "memory": [{"term", "formula", "values", "value_bytes"}...], "peak_bytes"} */
cJSON *step_explain_json(const step_explain *e);

#endif
