/*
** calib.h -- calibrating the host CPU: time lowered kernels, fit a model.
**
** `tpusim calibrate` is how tpusim learns what this machine does, the way
** XLA's autotuner learns a GPU: it lowers representative kernels through
** sim/lower.h (matmuls in bf16, f32 and f64, elementwise ops, reductions,
** softmax and layernorm as short sequences of kernels), compiles them with
** ORC LLJIT, times them with warm-ups and repeats, and fits a roofline:
**
**   time(step) = overhead + max(compute, memory(bytes))
**   memory(W)  = W x (share in L2 / l2_bw + share in L3 / l3_bw
**                     + rest / mem_bw), share in C = min(1, C / W)
**   compute    = flops / matmul_rate[dtype] + l1_misses x miss_s    (dot)
**              = flops / vector_rate + trans / trans_rate[fn, f32|f64]
**                + conversions / conversion_rate                  (elementwise)
**              = flops / reduce_rate[sum|max] + rows x row_s      (last-dim reduce)
**              = flops / col_rate + l1_misses x col_miss_s        (leading-dim reduce)
**   (conversions: bf16/f16 elements widened or rounded, in every vector
**   and reduce step; l1_misses: loads of a strided walk whose lines crowd
**   more L1 sets than the cache's ways hold, from sysconf's L1 geometry)
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

#include "../workloads/graph.h"

typedef enum { CALIB_FIT, CALIB_HOLDOUT } calib_set;

/* Which rate a step's arithmetic runs at. A sum over the last dimension
** is one serial accumulator chain per output (the adds may not be
** reordered, so LLVM does not vectorize it); a max or min over it is exact
** in any order, so LLVM vectorizes it, with a scalar tail and a horizontal
** reduction per output that short rows pay for; a reduce that keeps the
** last dimension walks each output's column with a stride of a row. */
typedef enum {
  CALIB_MATRIX,
  CALIB_VECTOR,
  CALIB_REDUCE_ROW,    /* sum (or product) over the last dim: serial */
  CALIB_REDUCE_MINMAX, /* max or min over the last dim: vectorized */
  CALIB_REDUCE_COL     /* over a leading dim: a strided column walk */
} calib_unit;

/* Transcendentals by how they run: libm calls of the exp family (exp,
** log, sin, cos, pow, logistic), libm's tanh (gelu), and sqrt/rsqrt, which
** are vector instructions. One rate would be off 7x for some of them; each
** also has an f64 rate (double libm calls and vsqrtpd/vdivpd are 2-3x
** slower than the float ones; bf16 and f16 compute in f32). */
typedef enum { CALIB_TR_EXP, CALIB_TR_TANH, CALIB_TR_SQRT, CALIB_TR_COUNT } calib_trans;

#define CALIB_MAX_STEPS 12

/* One lowered function of a kernel, as the model sees it. */
typedef struct {
  calib_unit unit;
  graph_dtype dtype; /* the operands' dtype: picks the matmul and transcendental rates */
  calib_trans trans; /* the family of its transcendentals (if any) */
  graph_cost cost;   /* counted from the IR */
  /* counted from the step's shapes, what the IR count does not say: */
  double conversions; /* bf16/f16 elements widened to f32 on load or rounded back on store */
  double rows;        /* a reduce: its outputs (one accumulator chain each) */
  double walk_misses; /* loads of a strided walk (a dot's rhs column, a column reduce)
                      ** that miss L1 because its lines crowd too few cache sets */
  double walk_pages;  /* of those misses, the loads that land on a new 4 KiB page */
  /* read off the optimized IR: whether LLVM vectorized the function (a
  ** column reduce whose short leading dim it unrolled, then vectorized
  ** across outputs, runs 10-50x faster than the strided walk it was) */
  bool vectorized;
} calib_step;

typedef struct {
  char name[64];   /* "matmul/f32/128x128x128" */
  char family[16]; /* "matmul", "elementwise", "reduce", "softmax", "layernorm" */
  char shape[64];  /* "f32[128,128]x[128,128]" */
  calib_set set;
  int n_steps;
  calib_step steps[CALIB_MAX_STEPS];
  double measured_s;  /* the fastest repeat's time of one run of all steps */
  double predicted_s; /* by the fitted model */
} calib_kernel;

/* The fitted parameters. A rate of 0 was not fitted (no fit kernel uses it). */
typedef struct {
  double matmul_flops_per_s[GDT_COUNT]; /* by operand dtype, rhs walk in L1 */
  double matmul_miss_s;        /* per rhs load that misses L1 (walk_misses) */
  double vector_flops_per_s;
  double conversions_per_s;    /* bf16/f16 <-> f32 conversions */
  double reduce_row_flops_per_s;    /* serial sums, one row at a time */
  double reduce_overlap_elems;      /* rows of L elements overlap: / (1 + this / L) */
  double reduce_minmax_flops_per_s; /* vectorized max/min */
  double reduce_row_s;              /* per output of a last-dim reduce: tail, horizontal step */
  double reduce_col_flops_per_s;   /* a strided column walk */
  double reduce_vec_flops_per_s;   /* a column reduce LLVM vectorized across outputs */
  double walk_page_s;  /* per missing load of a walk that lands on a new page (dot and reduce) */
  double reduce_miss_s;        /* per column-walk load that misses L1 */
  double transcendentals_per_s[CALIB_TR_COUNT];     /* f32 (and bf16, f16) */
  double transcendentals_f64_per_s[CALIB_TR_COUNT];
  /* Memory: a step streaming W bytes finds a share min(1, C/W) of them
  ** in a cache of C bytes (what a cache of C holds of a W-byte stream it
  ** cannot keep whole, replacement being near random), so the time goes
  ** smoothly from one bandwidth to the next as W passes each capacity. */
  double l1_bw_bytes_per_s;
  double l1_bytes;             /* sysconf's L1d size, not fitted */
  double cache_bw_bytes_per_s; /* L2 */
  double cache_bytes;          /* sysconf's L2 size, not fitted */
  double l3_bw_bytes_per_s;
  double l3_bytes;             /* fitted L3 capacity: this core's share (a VM's sysconf
                               ** reports the whole socket's, shared with other tenants) */
  double bw_bytes_per_s;       /* memory */
  double op_overhead_s;
} calib_model;

typedef struct {
  bool quick;          /* a small kernel set and short repeats (tests: seconds) */
  double min_repeat_s; /* each timed repeat runs at least this long; 0: default */
  int repeats;         /* timed repeats per kernel and pass (the fastest is kept); 0: default */
  int passes;          /* passes over the whole set, interleaving kernels in time; 0: default */
} calib_opts;

typedef struct {
  calib_kernel *kernels;
  int n_kernels;
  calib_model model;
  double min_repeat_s;
  int repeats;
  int passes;
  char date[32];     /* "2026-12-02 14:05 UTC", from the clock */
  char cpu[128];     /* /proc/cpuinfo's model name, or "unknown CPU" */
  char vendor[32];
  int n_cpus;
  double clock_hz;   /* /proc/cpuinfo's cpu MHz; 0 when unknown */
  double mem_bytes;  /* /proc/meminfo's MemTotal; 0 when unknown */
  double cache_bytes; /* the last-level cache sysconf reports; 0 when unknown */
  double l1_bytes, l1_ways, line_bytes; /* L1d geometry (sysconf, else 32 KiB 8-way 64 B) */
  double l2_bytes;   /* sysconf's L2 size, else 1 MiB */
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
/* The same, with the L1 and L2 capacities given (a run passes sysconf's;
** calib_fit assumes 48 KiB and 1 MiB). */
int calib_fit_caches(calib_kernel *k, int n, double l1_bytes, double l2_bytes, calib_model *m);

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
