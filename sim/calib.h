/*
** calib.h -- calibrating the host CPU: time lowered kernels, fit a model.
**
** `tpusim calibrate` is how tpusim learns what this machine does, the way
** XLA's autotuner learns a GPU: it lowers representative kernels through
** sim/lower.h (matmuls in bf16, f32 and f64, elementwise ops, reductions,
** softmax and layernorm as short sequences of kernels), compiles them with
** ORC LLJIT, times them with warm-ups and repeats, and fits a roofline:
**
**   time(step) = overhead + max(compute, bytes / bw)
**   bw         = cache_bw when bytes <= cache_bytes, else memory bw
**   compute    = flops / matmul_rate[dtype]                   (dot; x spill
**                factor when its right operand outgrows a fitted cache size)
**              = flops / vector_rate + trans / trans_rate[fn]  (elementwise)
**              = flops / reduce_rate[row|col]                  (reduce)
**
** A kernel's time is the sum over its steps (a softmax is seven). The cost
** of each step (flops, transcendentals, bytes) is read off its IR with
** lower_op_cost, so the model predicts from the same counts the simulator
** uses. Fitting uses only the kernels of the "fit" set; the "holdout" set
** has shapes never fitted, and its error is the model's honest accuracy.
** The fitted model is written as the hardware file `host` (schema
** tpusim-hw/1); docs/op-models.md, "Calibration", has the details.
**
** Every struct here is owned by this module: calib_run_free frees a run.
*/
#ifndef TPUSIM_CALIB_H
#define TPUSIM_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "graph.h"

typedef enum { CALIB_FIT, CALIB_HOLDOUT } calib_set;

/* Which rate a step's arithmetic runs at. A reduce over the last
** dimension is one serial accumulator chain per output; a reduce that
** keeps the last dimension vectorizes across the outputs: 20x apart. */
typedef enum { CALIB_MATRIX, CALIB_VECTOR, CALIB_REDUCE_ROW, CALIB_REDUCE_COL } calib_unit;

/* Transcendentals by how they run: libm calls of the exp family (exp,
** log, sin, cos, pow, logistic), libm's tanh (gelu), and sqrt/rsqrt, which
** are vector instructions. One rate would be off 7x for some of them. */
typedef enum { CALIB_TR_EXP, CALIB_TR_TANH, CALIB_TR_SQRT, CALIB_TR_COUNT } calib_trans;

#define CALIB_MAX_STEPS 12

/* One lowered function of a kernel, as the model sees it. */
typedef struct {
  calib_unit unit;
  graph_dtype dtype; /* the operands' dtype: picks the matrix rate */
  calib_trans trans; /* the family of its transcendentals (if any) */
  double rhs_bytes;  /* a dot's right operand: the loop nest strides through it */
  graph_cost cost;   /* counted from the IR */
} calib_step;

typedef struct {
  char name[64];   /* "matmul/f32/128x128x128" */
  char family[16]; /* "matmul", "elementwise", "reduce", "softmax", "layernorm" */
  char shape[64];  /* "f32[128,128]x[128,128]" */
  calib_set set;
  int n_steps;
  calib_step steps[CALIB_MAX_STEPS];
  double measured_s;  /* median over repeats of one run of all steps */
  double predicted_s; /* by the fitted model */
} calib_kernel;

/* The fitted parameters. A rate of 0 was not fitted (no fit kernel uses it). */
typedef struct {
  double matmul_flops_per_s[GDT_COUNT]; /* by operand dtype, rhs in cache */
  double matmul_spill_factor;  /* x that rate when the rhs exceeds matmul_cache_bytes */
  double matmul_cache_bytes;   /* fitted */
  double vector_flops_per_s;
  double reduce_row_flops_per_s, reduce_col_flops_per_s;
  double transcendentals_per_s[CALIB_TR_COUNT];
  double bw_bytes_per_s;       /* a step whose buffers exceed cache_bytes: memory */
  double cache_bw_bytes_per_s; /* one whose buffers fit in cache_bytes */
  double cache_bytes;          /* fitted: where the two bandwidths part */
  double op_overhead_s;
} calib_model;

typedef struct {
  bool quick;          /* a small kernel set and short repeats (tests: seconds) */
  double min_repeat_s; /* each timed repeat runs at least this long; 0: default */
  int repeats;         /* timed repeats per kernel (the median is kept); 0: default */
} calib_opts;

typedef struct {
  calib_kernel *kernels;
  int n_kernels;
  calib_model model;
  double min_repeat_s;
  int repeats;
  char date[32];     /* "2026-12-02 14:05 UTC", from the clock */
  char cpu[128];     /* /proc/cpuinfo's model name, or "unknown CPU" */
  char vendor[32];
  int n_cpus;
  double clock_hz;   /* /proc/cpuinfo's cpu MHz; 0 when unknown */
  double mem_bytes;  /* /proc/meminfo's MemTotal; 0 when unknown */
  double cache_bytes; /* the last-level cache sysconf reports; 0 when unknown */
  double wall_s;     /* the whole run: lowering, JIT and timing */
} calib_run;

/* Builds the kernel set (quick or full), without timing it. The kernels'
** steps and costs are filled; measured_s and predicted_s are 0. Returns
** NULL with the reason in err. */
calib_run *calib_kernels(const calib_opts *o, char *err, size_t n);

/* The whole calibration: builds, lowers, JIT-compiles and times the kernel
** set, fits the model on the fit set and predicts every kernel. */
calib_run *calib_measure(const calib_opts *o, char *err, size_t n);
void calib_run_free(calib_run *r);

/* One step's / one kernel's predicted time under model m. */
double calib_predict_step(const calib_model *m, const calib_step *s);
double calib_predict(const calib_model *m, const calib_kernel *k);

/* Fits m to the measured times of the fit-set kernels (least squares on
** log time, coordinate descent from a deterministic start), then fills
** every kernel's predicted_s. Returns the number of fit kernels used, or
** -1 when there are none. Deterministic: the same inputs give the same m. */
int calib_fit(calib_kernel *k, int n, calib_model *m);

/* |predicted / measured - 1| over the kernels of set s: the median and the
** 90th percentile (nearest rank). Both 0 when the set is empty. */
int calib_errors(const calib_kernel *k, int n, calib_set s, double *median, double *p90);

/* The hardware file of this run (`host`, schema tpusim-hw/1): malloc'd. */
char *calib_host_json(const calib_run *r);
/* Writes it to path, creating missing parent directories; -1 with err. */
int calib_write_host(const calib_run *r, const char *path, char *err, size_t n);
/* Whether path can be written (its directories are created; a file that
** did not exist is removed again): 0, or -1 with the reason in err. Run
** before the minute of timing, so a bad --out fails at once. */
int calib_check_path(const char *path, char *err, size_t n);
/* $XDG_CACHE_HOME/tpusim/host.json, else $HOME/.cache/tpusim/host.json;
** -1 when neither variable is set. */
int calib_default_path(char *buf, size_t n);

/* `--report`: one row per kernel, then each set's median and p90 error. */
void calib_print_report(const calib_run *r, FILE *f);
/* `--report --json`: the contract in ../shared/design.md, plus more fields. */
char *calib_report_json(const calib_run *r);
/* One line: how many kernels, the holdout errors, where the model went. */
void calib_print_summary(const calib_run *r, const char *path, FILE *f);

#endif
