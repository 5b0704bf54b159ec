/*
** calib.c -- see calib.h.
**
** Three parts: the kernel set (graphs built with graph.h, lowered with
** lower.h, one module for the whole set so the JIT compiles once), the
** timing loop, and the fit. The fit is deliberately plain: a handful of
** rates, least squares on log time so a 10 us kernel weighs as much as a
** 10 ms one, minimized one parameter at a time by a grid then a golden
** section search -- no randomness, so a rerun on the same timings gives the
** same model.
*/
#include "calib.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "lower.h"
#include "../base/strutil.h"
#include "../base/units.h"

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


/* ---- the kernel set ---- */

static calib_kernel *add_kernel(kset *s, const char *family, const char *name, const char *shape,
                                calib_set set, graph *g) {
  calib_run *r = s->run;
  if (r->n_kernels == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    calib_kernel *nk = realloc(r->kernels, (size_t)cap * sizeof *nk);
    kbuild *nb = nk ? realloc(s->kb, (size_t)cap * sizeof *nb) : NULL;
    if (nk) r->kernels = nk;
    if (!nk || !nb) return NULL;
    s->kb = nb;
    s->cap = cap;
  }
  calib_kernel *k = &r->kernels[r->n_kernels];
  kbuild *b = &s->kb[r->n_kernels];
  memset(k, 0, sizeof *k);
  memset(b, 0, sizeof *b);
  str_copy(k->family, sizeof k->family, family);
  str_copy(k->name, sizeof k->name, name);
  str_copy(k->shape, sizeof k->shape, shape);
  k->set = set;
  b->g = g;
  r->n_kernels++;
  return k;
}

/* Appends a step of ops[0..n) (one op, or an elementwise chain fused into
** one loop) to the kernel just added. */
static void add_step(kset *s, const int *ops, int n) {
  kbuild *b = &s->kb[s->run->n_kernels - 1];
  if (b->n_steps == CALIB_MAX_STEPS || n > MAX_FUSED) return; /* the set below stays within */
  for (int i = 0; i < n; i++) b->ops[b->n_steps][i] = ops[i];
  b->n_ops[b->n_steps++] = n;
}
static void step1(kset *s, int op) { add_step(s, &op, 1); }

static const char *dt_name(graph_dtype dt) { return graph_dtype_name(dt); }

static void matmul(kset *s, graph_dtype dt, int64_t m, int64_t n, int64_t k, calib_set set) {
  graph *g = graph_new("calib");
  char name[64], shape[64];
  snprintf(name, sizeof name, "matmul/%s/%lldx%lldx%lld", dt_name(dt), (long long)m,
           (long long)n, (long long)k);
  snprintf(shape, sizeof shape, "%s[%lld,%lld]x[%lld,%lld]", dt_name(dt), (long long)m,
           (long long)k, (long long)k, (long long)n);
  graph_set_scope(g, name);
  int a = graph_parameter(g, "a", GRAPH_SHAPE(dt, m, k), 0);
  int w = graph_parameter(g, "w", GRAPH_SHAPE(dt, k, n), 0);
  int y = graph_matmul(g, a, w);
  if (!add_kernel(s, "matmul", name, shape, set, g)) {
    graph_free(g);
    return;
  }
  step1(s, y);
}

/* The elementwise kernels: single kinds and one fused polynomial chain
** ("poly": ((x*x + y) * x) + y, four flops per element in one loop). */
typedef enum { EW_ADD, EW_MUL, EW_DIV, EW_EXP, EW_TANH, EW_GELU, EW_RELU, EW_RSQRT, EW_POLY } ew_kind;
static const char *const EW_NAMES[] = {"add",  "multiply", "divide", "exponential", "tanh",
                                       "gelu", "relu",     "rsqrt",  "poly"};
static const graph_op_kind EW_OPS[] = {GOP_ADD,  GOP_MUL,  GOP_DIV,   GOP_EXP, GOP_TANH,
                                       GOP_GELU, GOP_RELU, GOP_RSQRT, GOP_ADD};

static void elementwise(kset *s, ew_kind kind, graph_dtype dt, int64_t n, calib_set set) {
  graph *g = graph_new("calib");
  char name[64], shape[64];
  snprintf(name, sizeof name, "elementwise/%s/%s/%lld", EW_NAMES[kind], dt_name(dt), (long long)n);
  snprintf(shape, sizeof shape, "%s[%lld]", dt_name(dt), (long long)n);
  graph_set_scope(g, name);
  int x = graph_parameter(g, "x", GRAPH_SHAPE(dt, n), 0);
  int y = graph_parameter(g, "y", GRAPH_SHAPE(dt, n), 0);
  int ops[MAX_FUSED], nops = 1;
  if (kind == EW_POLY) {
    ops[0] = graph_binary(g, GOP_MUL, x, x);
    ops[1] = graph_binary(g, GOP_ADD, ops[0], y);
    ops[2] = graph_binary(g, GOP_MUL, ops[1], x);
    ops[3] = graph_binary(g, GOP_ADD, ops[2], y);
    nops = 4;
  } else if (kind == EW_ADD || kind == EW_MUL || kind == EW_DIV) {
    ops[0] = graph_binary(g, EW_OPS[kind], x, y);
  } else {
    ops[0] = graph_unary(g, EW_OPS[kind], x);
  }
  if (!add_kernel(s, "elementwise", name, shape, set, g)) {
    graph_free(g);
    return;
  }
  add_step(s, ops, nops);
}

/* A row-wise kernel's report name ("softmax/bf16/512x2048") and shape
** ("bf16[512,2048]"), and a fresh graph scoped by the name. */
static graph *rows_kernel(const char *family, graph_dtype dt, int64_t rows, int64_t cols,
                          char name[64], char shape[64]) {
  graph *g = graph_new("calib");
  snprintf(name, 64, "%s/%s/%lldx%lld", family, dt_name(dt), (long long)rows, (long long)cols);
  snprintf(shape, 64, "%s[%lld,%lld]", dt_name(dt), (long long)rows, (long long)cols);
  graph_set_scope(g, name);
  return g;
}

typedef enum { RED_SUM_ROWS, RED_MAX_ROWS, RED_SUM_COLS } red_kind;
static const char *const RED_NAMES[] = {"sum-rows", "max-rows", "sum-cols"};

static void reduction(kset *s, red_kind kind, graph_dtype dt, int64_t rows, int64_t cols,
                      calib_set set) {
  char name[64], shape[64], family[32];
  snprintf(family, sizeof family, "reduce/%s", RED_NAMES[kind]);
  graph *g = rows_kernel(family, dt, rows, cols, name, shape);
  int x = graph_parameter(g, "x", GRAPH_SHAPE(dt, rows, cols), 0);
  int r = graph_reduce(g, x, graph_dims_of(1, kind == RED_SUM_COLS ? 0 : 1),
                       kind == RED_MAX_ROWS ? GRAPH_RED_MAX : GRAPH_RED_ADD);
  if (!add_kernel(s, "reduce", name, shape, set, g)) {
    graph_free(g);
    return;
  }
  step1(s, r);
}

/* softmax over rows, as an unfused XLA program runs it: max, broadcast,
** exp(x - max) (one fused loop), sum, broadcast, divide. */
static void softmax(kset *s, graph_dtype dt, int64_t rows, int64_t cols, calib_set set) {
  char name[64], shape[64];
  graph *g = rows_kernel("softmax", dt, rows, cols, name, shape);
  graph_shape full = GRAPH_SHAPE(dt, rows, cols);
  int x = graph_parameter(g, "x", full, 0);
  int mx = graph_reduce(g, x, graph_dims_of(1, 1), GRAPH_RED_MAX);
  int mb = graph_broadcast(g, mx, full, graph_dims_of(1, 0));
  int d = graph_binary(g, GOP_SUB, x, mb);
  int e = graph_unary(g, GOP_EXP, d);
  int sum = graph_reduce(g, e, graph_dims_of(1, 1), GRAPH_RED_ADD);
  int sb = graph_broadcast(g, sum, full, graph_dims_of(1, 0));
  int y = graph_binary(g, GOP_DIV, e, sb);
  if (!add_kernel(s, "softmax", name, shape, set, g)) {
    graph_free(g);
    return;
  }
  int de[2] = {d, e};
  step1(s, mx);
  step1(s, mb);
  add_step(s, de, 2);
  step1(s, sum);
  step1(s, sb);
  step1(s, y);
}

/* layernorm over rows with a scale and a bias, unfused but for the
** elementwise chains: mean, x - mean, variance, rsqrt(var + eps), then
** (d * rstd) * gamma + beta in one loop. */
static void layernorm(kset *s, graph_dtype dt, int64_t rows, int64_t cols, calib_set set) {
  char name[64], shape[64];
  graph *g = rows_kernel("layernorm", dt, rows, cols, name, shape);
  graph_shape full = GRAPH_SHAPE(dt, rows, cols), row = GRAPH_SHAPE(dt, rows),
              col = GRAPH_SHAPE(dt, cols);
  int x = graph_parameter(g, "x", full, 0);
  int inv_n = graph_parameter(g, "inv_n", row, 0); /* 1/cols, broadcast to a row */
  int eps = graph_parameter(g, "eps", row, 0);
  int gamma = graph_parameter(g, "gamma", col, 0);
  int beta = graph_parameter(g, "beta", col, 0);
  int sum = graph_reduce(g, x, graph_dims_of(1, 1), GRAPH_RED_ADD);
  int mean = graph_binary(g, GOP_MUL, sum, inv_n);
  int mb = graph_broadcast(g, mean, full, graph_dims_of(1, 0));
  int d = graph_binary(g, GOP_SUB, x, mb);
  int sq = graph_binary(g, GOP_MUL, d, d);
  int vs = graph_reduce(g, sq, graph_dims_of(1, 1), GRAPH_RED_ADD);
  int var = graph_binary(g, GOP_MUL, vs, inv_n);
  int ve = graph_binary(g, GOP_ADD, var, eps);
  int rstd = graph_unary(g, GOP_RSQRT, ve);
  int rb = graph_broadcast(g, rstd, full, graph_dims_of(1, 0));
  int gb = graph_broadcast(g, gamma, full, graph_dims_of(1, 1));
  int bb = graph_broadcast(g, beta, full, graph_dims_of(1, 1));
  int n1 = graph_binary(g, GOP_MUL, d, rb);
  int n2 = graph_binary(g, GOP_MUL, n1, gb);
  int y = graph_binary(g, GOP_ADD, n2, bb);
  if (!add_kernel(s, "layernorm", name, shape, set, g)) {
    graph_free(g);
    return;
  }
  int rs[3] = {var, ve, rstd}, out[3] = {n1, n2, y};
  step1(s, sum);
  step1(s, mean);
  step1(s, mb);
  step1(s, d);
  step1(s, sq);
  step1(s, vs);
  add_step(s, rs, 3);
  step1(s, rb);
  step1(s, gb);
  step1(s, bb);
  add_step(s, out, 3);
}

typedef struct {
  int64_t m, n, k;
} mnk;

/* The kernel set. Holdout shapes sit between and beside the fit shapes
** (never equal to one), so the holdout error measures interpolation and a
** little extrapolation, as a real workload's ops would need. */
static void build_set(kset *s, bool quick) {
  static const graph_dtype MM_DT[] = {GDT_F32, GDT_BF16, GDT_F64};
  /* K >= 64 throughout: with a constant K of 32 or less LLVM unrolls the
  ** dot's inner loop and vectorizes across outputs, 10-30x faster than
  ** the loop nest at training sizes -- a different kernel, not a shape */
  static const mnk MM_FIT[] = {{16, 16, 64},   {32, 64, 64},    {64, 64, 64},  {128, 128, 128},
                               {256, 256, 256}, {64, 512, 128}, {512, 64, 64}};
  static const mnk MM_HOLD[] = {{24, 24, 96},    {48, 96, 80},    {96, 96, 96},
                                {160, 160, 160}, {200, 120, 80}, {384, 64, 192}};
  static const mnk MM_FIT_Q[] = {{16, 16, 64}, {32, 64, 64}, {64, 64, 64}};
  static const mnk MM_HOLD_Q[] = {{24, 24, 96}, {48, 40, 72}};
  static const graph_dtype EW_DT[] = {GDT_F32, GDT_BF16, GDT_F64};
  static const int64_t EW_FIT[] = {256, 16384, 1 << 20, 1 << 22};
  static const int64_t EW_HOLD[] = {1000, 50000, 2500000};
  static const int64_t EW_FIT_Q[] = {256, 16384};
  static const int64_t EW_HOLD_Q[] = {1000, 50000};
  static const mnk RED_FIT[] = {{64, 64, 0}, {256, 1024, 0}, {1024, 256, 0}, {16, 16384, 0}};
  static const mnk RED_HOLD[] = {{100, 300, 0}, {512, 512, 0}, {2000, 50, 0}};
  static const mnk RED_FIT_Q[] = {{64, 64, 0}, {16, 1024, 0}};
  static const mnk RED_HOLD_Q[] = {{100, 30, 0}};
  static const mnk ROW_FIT[] = {{64, 128, 0}, {256, 1024, 0}, {1024, 1024, 0}};
  static const mnk ROW_HOLD[] = {{128, 256, 0}, {512, 2048, 0}};
  static const mnk ROW_FIT_Q[] = {{16, 64, 0}};
  static const mnk ROW_HOLD_Q[] = {{24, 48, 0}};
#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
  const mnk *mf = quick ? MM_FIT_Q : MM_FIT, *mh = quick ? MM_HOLD_Q : MM_HOLD;
  int nmf = quick ? N(MM_FIT_Q) : N(MM_FIT), nmh = quick ? N(MM_HOLD_Q) : N(MM_HOLD);
  for (int d = 0; d < N(MM_DT); d++) {
    for (int i = 0; i < nmf; i++) matmul(s, MM_DT[d], mf[i].m, mf[i].n, mf[i].k, CALIB_FIT);
    for (int i = 0; i < nmh; i++) matmul(s, MM_DT[d], mh[i].m, mh[i].n, mh[i].k, CALIB_HOLDOUT);
  }
  const int64_t *ef = quick ? EW_FIT_Q : EW_FIT, *eh = quick ? EW_HOLD_Q : EW_HOLD;
  int nef = quick ? N(EW_FIT_Q) : N(EW_FIT), neh = quick ? N(EW_HOLD_Q) : N(EW_HOLD);
  for (int d = 0; d < N(EW_DT); d++)
    for (int kind = 0; kind <= EW_POLY; kind++) {
      /* transcendentals run ~10 ns an element: 4M of them would take the
      ** time of the rest of the set */
      bool slow = kind == EW_EXP || kind == EW_TANH || kind == EW_GELU;
      for (int i = 0; i < nef; i++)
        if (!(slow && ef[i] > (1 << 20))) elementwise(s, (ew_kind)kind, EW_DT[d], ef[i], CALIB_FIT);
      for (int i = 0; i < neh; i++)
        if (!(slow && eh[i] > (1 << 20)))
          elementwise(s, (ew_kind)kind, EW_DT[d], eh[i], CALIB_HOLDOUT);
    }
  const mnk *rf = quick ? RED_FIT_Q : RED_FIT, *rh = quick ? RED_HOLD_Q : RED_HOLD;
  int nrf = quick ? N(RED_FIT_Q) : N(RED_FIT), nrh = quick ? N(RED_HOLD_Q) : N(RED_HOLD);
  for (int d = 0; d < N(EW_DT); d++)
    for (int kind = 0; kind <= RED_SUM_COLS; kind++) {
      for (int i = 0; i < nrf; i++) reduction(s, (red_kind)kind, EW_DT[d], rf[i].m, rf[i].n, CALIB_FIT);
      for (int i = 0; i < nrh; i++)
        reduction(s, (red_kind)kind, EW_DT[d], rh[i].m, rh[i].n, CALIB_HOLDOUT);
    }
  const mnk *wf = quick ? ROW_FIT_Q : ROW_FIT, *wh = quick ? ROW_HOLD_Q : ROW_HOLD;
  int nwf = quick ? N(ROW_FIT_Q) : N(ROW_FIT), nwh = quick ? N(ROW_HOLD_Q) : N(ROW_HOLD);
  for (int d = 0; d < 2; d++) { /* f32 and bf16: what softmax and layernorm run in */
    graph_dtype dt = d ? GDT_BF16 : GDT_F32;
    for (int i = 0; i < nwf; i++) softmax(s, dt, wf[i].m, wf[i].n, CALIB_FIT);
    for (int i = 0; i < nwh; i++) softmax(s, dt, wh[i].m, wh[i].n, CALIB_HOLDOUT);
    for (int i = 0; i < nwf; i++) layernorm(s, dt, wf[i].m, wf[i].n, CALIB_FIT);
    for (int i = 0; i < nwh; i++) layernorm(s, dt, wh[i].m, wh[i].n, CALIB_HOLDOUT);
  }
#undef N
}

/* The values a fused step reads from outside, in order of first use and
** each once (the argument order lower_fused gives its function), then its
** result. */
static int step_args(const graph *g, const int *ops, int n, int *args) {
  int na = 0;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    for (int j = 0; j < op->n_in; j++) {
      int v = op->in[j], seen = 0;
      for (int k = 0; k < i; k++) seen |= ops[k] == v;
      for (int k = 0; k < na; k++) seen |= args[k] == v;
      if (!seen && na < MAX_ARGS - 1) args[na++] = v;
    }
  }
  args[na++] = ops[n - 1];
  return na;
}

static bool in_dims(const graph_dims *d, int dim) {
  for (int i = 0; i < d->n; i++)
    if (d->d[i] == dim) return true;
  return false;
}

static calib_trans trans_of(graph_op_kind k, calib_trans other) {
  switch (k) {
  case GOP_TANH: case GOP_GELU: case GOP_GELU_GRAD: return CALIB_TR_TANH;
  case GOP_SQRT: case GOP_RSQRT: return CALIB_TR_SQRT;
  case GOP_EXP: case GOP_LOG: case GOP_SIN: case GOP_COS: case GOP_POW: case GOP_LOGISTIC:
  case GOP_SILU: case GOP_SILU_GRAD: return CALIB_TR_EXP;
  default: return other;
  }
}

/* Loads of one walk of n elements, stride_bytes apart, that miss L1 each
** time the walk is repeated: line i of the walk lands in set (line mod
** sets); a set given more of the walk's lines than it has ways evicts each
** of them before the next walk comes back for it (LRU over a cyclic
** pattern), so all of those lines miss, while the lines of a set within
** its ways stay. A power-of-two stride crowds the walk into a few sets:
** this is why a 128x128 f32 dot runs 2x slower per flop than a 160x160 one. */
static double walk_l1_misses(const calib_run *r, int64_t n, double stride_bytes, double *pages) {
  int sets = (int)(r->l1_bytes / (r->l1_ways * r->line_bytes));
  if (sets < 1 || sets > 4096 || n <= 1 || stride_bytes <= 0) return 0;
  int count[4096] = {0};
  int64_t prev = -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t line = (int64_t)floor((double)i * stride_bytes / r->line_bytes);
    if (line != prev) count[line % sets]++; /* a line read twice in a row hits */
    prev = line;
  }
  double miss = 0;
  for (int j = 0; j < sets; j++)
    if (count[j] > r->l1_ways) miss += count[j];
  /* a stride of S bytes lands on a new page every 4096 / S loads */
  *pages = miss * fmin(1, stride_bytes / 4096);
  return miss;
}

/* The strided walk of a step, if it has one: a dot's loop nest reads its
** right operand down a column (one contracting dim, row-major: a stride
** of the dims after it) once per output element; a reduce over one leading
** dim reads down a column once per output. */
static void walk_of(const calib_run *r, const graph *g, const graph_op *op, calib_step *cs) {
  const graph_shape *x;
  int dim;
  if (op->kind == GOP_DOT && op->rhs_contract.n == 1) {
    x = &graph_get(g, op->in[1])->out;
    dim = op->rhs_contract.d[0];
  } else if (op->kind == GOP_REDUCE && op->dims.n == 1 && op->dims.d[0] < graph_get(g, op->in[0])->out.rank - 1) {
    x = &graph_get(g, op->in[0])->out;
    dim = op->dims.d[0];
  } else {
    return;
  }
  double stride = graph_dtype_bits(x->dtype) / 8.0;
  for (int d = dim + 1; d < x->rank; d++) stride *= (double)x->dim[d];
  double pages = 0, walks = (double)graph_elements(&op->out);
  cs->walk_misses = walks * walk_l1_misses(r, x->dim[dim], stride, &pages);
  cs->walk_pages = walks * pages;
}

/* Lowers every step into m and reads its cost off the IR (before
** optimization, which drops the counts). */
static int lower_set(kset *s, lower_module *m, char *err, size_t n) {
  for (int i = 0; i < s->run->n_kernels; i++) {
    calib_kernel *k = &s->run->kernels[i];
    kbuild *b = &s->kb[i];
    if (!graph_ok(b->g)) {
      snprintf(err, n, "%s: the kernel's graph is invalid", k->name);
      return -1;
    }
    for (int st = 0; st < b->n_steps; st++) {
      const int *ops = b->ops[st];
      int f = b->n_ops[st] > 1 ? lower_fused(m, b->g, ops, b->n_ops[st], err, n)
              : graph_get(b->g, ops[0])->kind == GOP_BROADCAST ? lower_broadcast(m, b->g, ops[0], err, n)
                                                                 : lower_op(m, b->g, ops[0], err, n);
      if (f < 0) return -1;
      b->fn[st] = f;
      b->n_args[st] = step_args(b->g, ops, b->n_ops[st], b->args[st]);
      if (b->n_ops[st] == 1) { /* lower_op takes every operand, repeats too: mul(d, d) */
        const graph_op *op = graph_get(b->g, ops[0]);
        b->n_args[st] = 0;
        for (int a = 0; a < op->n_in && a < MAX_ARGS - 1; a++) b->args[st][b->n_args[st]++] = op->in[a];
        b->args[st][b->n_args[st]++] = ops[0];
      }
      calib_step *cs = &k->steps[st];
      const graph_op *root = graph_get(b->g, ops[b->n_ops[st] - 1]);
      const graph_shape *in0 = &graph_get(b->g, root->in[0])->out;
      bool last = root->kind == GOP_REDUCE && in_dims(&root->dims, in0->rank - 1);
      cs->unit = root->kind == GOP_DOT      ? CALIB_MATRIX
                 : root->kind != GOP_REDUCE ? CALIB_VECTOR
                 : !last                    ? CALIB_REDUCE_COL
                 : root->reduce == GRAPH_RED_MAX || root->reduce == GRAPH_RED_MIN ? CALIB_REDUCE_MINMAX
                                                                                  : CALIB_REDUCE_ROW;
      cs->dtype = in0->dtype;
      cs->trans = CALIB_TR_EXP;
      for (int o = b->n_ops[st] - 1; o >= 0; o--) cs->trans = trans_of(graph_get(b->g, ops[o])->kind, cs->trans);
      if (lower_op_cost(m, f, &cs->cost, NULL, err, n) != 0) return -1;
      walk_of(s->run, b->g, root, cs);
      /* every element a 16-bit step loads or stores is converted once
      ** (widened to f32 for the arithmetic, rounded back); a dot's are in
      ** its per-dtype rate, a broadcast copies bits and converts none */
      int bits = graph_dtype_bits(in0->dtype);
      bool arith = graph_cost_flops(&cs->cost) > 0 || cs->cost.transcendentals > 0;
      if (cs->unit != CALIB_MATRIX && arith && bits == 16 && graph_dtype_is_float(in0->dtype))
        cs->conversions = (cs->cost.bytes_read + cs->cost.bytes_written) / 2;
      if (root->kind == GOP_REDUCE) cs->rows = (double)graph_elements(&root->out);
    }
    k->n_steps = b->n_steps;
  }
  return 0;
}

/* Marks each step whose optimized function has vector types in it. The
** module's text is searched function by function ("define ... @name(" to
** the closing brace): what LLVM chose to vectorize is a fact of the code
** that runs, where the IR count before optimization cannot tell. */
static void mark_vectorized(kset *s, const lower_module *m) {
  char *text = lower_print(m);
  if (!text) return;
  for (int i = 0; i < s->run->n_kernels; i++) {
    calib_kernel *k = &s->run->kernels[i];
    for (int st = 0; st < k->n_steps; st++) {
      char key[2][160]; /* LLVM quotes a name that is not an identifier */
      snprintf(key[0], sizeof key[0], "@%s(", lower_fn_name(m, s->kb[i].fn[st]));
      snprintf(key[1], sizeof key[1], "@\"%s\"(", lower_fn_name(m, s->kb[i].fn[st]));
      const char *def = NULL;
      for (int q = 0; q < 2 && !def; q++)
        for (def = strstr(text, key[q]); def; def = strstr(def + strlen(key[q]), key[q])) {
          const char *line = def;
          while (line > text && line[-1] != '\n') line--;
          if (strncmp(line, "define", 6) == 0) break;
        }
      if (!def) continue;
      const char *end = strstr(def, "\n}");
      size_t len = end ? (size_t)(end - def) : strlen(def);
      static const char *const VEC[] = {" x float>", " x double>", " x bfloat>", " x half>", " x i16>"};
      for (size_t v = 0; v < sizeof VEC / sizeof VEC[0] && !k->steps[st].vectorized; v++) {
        const char *hit = strstr(def, VEC[v]);
        k->steps[st].vectorized = hit && (size_t)(hit - def) < len;
      }
    }
  }
  free(text);
}

static void kset_free(kset *s) {
  if (!s->run) return;
  for (int i = 0; i < s->run->n_kernels; i++) graph_free(s->kb[i].g);
  free(s->kb);
  s->kb = NULL;
}

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

static int cmp_double(const void *a, const void *b) {
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
  build_set(s, o && o->quick);
  lower_module *m = lower_new("calibrate");
  if (!m || lower_set(s, m, err, n) != 0 || lower_optimize(m, 3, err, n) != 0) {
    lower_free(m);
    kset_free(s);
    calib_run_free(r);
    return NULL;
  }
  mark_vectorized(s, m);
  *mod = m;
  return r;
}

calib_run *calib_kernels(const calib_opts *o, char *err, size_t n) {
  kset s = {0};
  lower_module *m = NULL;
  calib_run *r = build(o, &s, &m, err, n);
  lower_free(m);
  kset_free(&s);
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
  kset_free(&s);
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

/* ---- the model and its fit ---- */

static double rate_time(double work, double rate) {
  if (work <= 0) return 0;
  return rate > 0 ? work / rate : INFINITY; /* a rate the fit never saw */
}

/* Streaming W bytes through the hierarchy: the share of them a cache of C
** bytes holds is min(1, C / W); each share moves at its level's rate. */
static double memory_time(const calib_model *m, double w) {
  if (w <= 0) return 0;
  double l1 = m->l1_bytes > 0 && m->l1_bw_bytes_per_s > 0 ? fmin(1, m->l1_bytes / w) : 0;
  double l2 = m->cache_bytes > 0 ? fmax(l1, fmin(1, m->cache_bytes / w)) : l1;
  double l3 = m->l3_bytes > 0 ? fmax(l2, fmin(1, m->l3_bytes / w)) : l2;
  return w * ((l1 > 0 ? l1 / m->l1_bw_bytes_per_s : 0) +
              (l2 > l1 ? (l2 - l1) / m->cache_bw_bytes_per_s : 0) +
              (l3 > l2 ? (l3 - l2) / m->l3_bw_bytes_per_s : 0) +
              (l3 < 1 ? (1 - l3) / m->bw_bytes_per_s : 0));
}

double calib_predict_step(const calib_model *m, const calib_step *s) {
  double flops = graph_cost_flops(&s->cost);
  double compute;
  if (s->unit == CALIB_MATRIX) {
    compute = rate_time(flops, m->matmul_flops_per_s[s->dtype]) + s->walk_misses * m->matmul_miss_s +
              s->walk_pages * m->walk_page_s;
  } else {
    const double *tr = s->dtype == GDT_F64 ? m->transcendentals_f64_per_s : m->transcendentals_per_s;
    compute = rate_time(s->cost.transcendentals, tr[s->trans]) +
              rate_time(s->conversions, m->conversions_per_s);
    /* vector code: an f64 lane is two f32 lanes wide, so half the rate */
    double lanes = s->dtype == GDT_F64 ? 2 * flops : flops;
    switch (s->vectorized && s->unit == CALIB_REDUCE_COL ? CALIB_VECTOR : s->unit) {
    case CALIB_VECTOR:
      /* a column reduce LLVM unrolled (a short leading dim of constant
      ** length) and then vectorized across its outputs. A vectorized sum
      ** over rows is still one ordered chain (no reassociation), and a
      ** max over rows is always vectorized: neither changes class. */
      compute += rate_time(lanes, s->unit == CALIB_VECTOR ? m->vector_flops_per_s : m->reduce_vec_flops_per_s);
      break;
    case CALIB_REDUCE_ROW: {
      /* one serial chain per row, but the next rows' chains are
      ** independent: the out-of-order core runs short rows side by side */
      double len = s->rows > 0 ? flops / s->rows + 1 : 1;
      compute += rate_time(flops, m->reduce_row_flops_per_s) / (1 + m->reduce_overlap_elems / len);
      break;
    }
    case CALIB_REDUCE_MINMAX:
      compute += rate_time(lanes, m->reduce_minmax_flops_per_s) + s->rows * m->reduce_row_s;
      break;
    case CALIB_REDUCE_COL:
      compute += rate_time(flops, m->reduce_col_flops_per_s) + s->walk_misses * m->reduce_miss_s +
                 s->walk_pages * m->walk_page_s;
      break;
    default: break;
    }
  }
  return m->op_overhead_s + fmax(compute, memory_time(m, s->cost.bytes_read + s->cost.bytes_written));
}

double calib_predict(const calib_model *m, const calib_kernel *k) {
  double t = 0;
  for (int i = 0; i < k->n_steps; i++) t += calib_predict_step(m, &k->steps[i]);
  return t;
}

/* The fitted parameters, as logs, in this order. */
enum { P_MM_BF16, P_MM_F16, P_MM_F32, P_MM_F64, P_MM_MISS, P_VEC, P_CONV, P_RED_ROW, P_RED_OVERLAP,
       P_RED_MINMAX, P_RED_ROW_S, P_RED_COL, P_RED_VEC, P_RED_MISS, P_PAGE, P_TR, P_TR64 = P_TR + CALIB_TR_COUNT,
       P_BW_L1 = P_TR64 + CALIB_TR_COUNT, P_BW_L2, P_BW_L3, P_L3, P_BW, P_OVH,
       P_L1, P_L2, /* given, not fitted: held in th, never searched */
       NP };
static const graph_dtype MM_OF[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64};

static calib_model model_of(const double *th, const bool *used) {
  calib_model m = {0};
  double v[NP];
  for (int p = 0; p < NP; p++) v[p] = used[p] ? exp(th[p]) : 0;
  for (int p = P_MM_BF16; p <= P_MM_F64; p++) m.matmul_flops_per_s[MM_OF[p]] = v[p];
  m.matmul_miss_s = v[P_MM_MISS];
  m.vector_flops_per_s = v[P_VEC];
  m.conversions_per_s = v[P_CONV];
  m.reduce_row_flops_per_s = v[P_RED_ROW];
  m.reduce_overlap_elems = v[P_RED_OVERLAP];
  m.reduce_vec_flops_per_s = v[P_RED_VEC];
  m.reduce_minmax_flops_per_s = v[P_RED_MINMAX];
  m.reduce_row_s = v[P_RED_ROW_S];
  m.reduce_col_flops_per_s = v[P_RED_COL];
  m.reduce_miss_s = v[P_RED_MISS];
  for (int t = 0; t < CALIB_TR_COUNT; t++) {
    m.transcendentals_per_s[t] = v[P_TR + t];
    m.transcendentals_f64_per_s[t] = v[P_TR64 + t];
  }
  m.walk_page_s = v[P_PAGE];
  m.l1_bytes = exp(th[P_L1]);
  m.cache_bytes = exp(th[P_L2]);
  m.l1_bw_bytes_per_s = v[P_BW_L1];
  m.cache_bw_bytes_per_s = v[P_BW_L2];
  m.l3_bw_bytes_per_s = v[P_BW_L3];
  m.l3_bytes = v[P_L3];
  m.bw_bytes_per_s = v[P_BW];
  m.op_overhead_s = v[P_OVH];
  return m;
}

static double loss(const calib_kernel *k, int n, const double *th, const bool *used) {
  calib_model m = model_of(th, used);
  double sum = 0;
  for (int i = 0; i < n; i++) {
    if (k[i].set != CALIB_FIT || !(k[i].measured_s > 0)) continue;
    double e = log(calib_predict(&m, &k[i]) / k[i].measured_s);
    sum += e * e;
  }
  return sum;
}

/* Minimizes the loss over parameter p in [lo, hi]: a grid to find the
** basin (the max() in the roofline makes the loss flat in places), then a
** golden section search around the best grid point. */
static void line_search(const calib_kernel *k, int n, double *th, const bool *used, int p,
                        double lo, double hi) {
  enum { GRID = 48 };
  double best = th[p], best_l = loss(k, n, th, used), step = (hi - lo) / GRID;
  for (int i = 0; i <= GRID; i++) {
    th[p] = lo + step * i;
    double l = loss(k, n, th, used);
    if (l < best_l) {
      best_l = l;
      best = th[p];
    }
  }
  const double gr = 0.6180339887498949;
  double a = best - step, b = best + step;
  double c = b - gr * (b - a), d = a + gr * (b - a);
  th[p] = c;
  double lc = loss(k, n, th, used);
  th[p] = d;
  double ld = loss(k, n, th, used);
  for (int it = 0; it < 40; it++) {
    if (lc < ld) {
      b = d;
      d = c;
      ld = lc;
      c = b - gr * (b - a);
      th[p] = c;
      lc = loss(k, n, th, used);
    } else {
      a = c;
      c = d;
      lc = ld;
      d = a + gr * (b - a);
      th[p] = d;
      ld = loss(k, n, th, used);
    }
  }
  double mid = lc < ld ? c : d, lm = lc < ld ? lc : ld;
  th[p] = lm < best_l ? mid : best;
}

/* Coordinate descent over every parameter, from a search span that
** halves after the first sweeps. The cache capacities are parameters like
** the rates: the smooth share min(1, C / W) makes the loss continuous in
** them, where a step at C made it flat between the sizes of the set. */
static void descend(const calib_kernel *k, int n, double *th, const bool *used, int sweeps,
                    double span) {
  double prev = loss(k, n, th, used);
  for (int sweep = 0; sweep < sweeps; sweep++) {
    for (int p = 0; p < NP; p++)
      if (used[p]) line_search(k, n, th, used, p, th[p] - span, th[p] + span);
    double l = loss(k, n, th, used);
    if (sweep >= 3 && prev - l <= 1e-9 * (1 + l)) break; /* converged: a finer fit moves no prediction */
    prev = l;
    if (sweep >= 2) span = fmax(0.05, span * 0.5);
  }
}

int calib_fit(calib_kernel *k, int n, calib_model *out) {
  return calib_fit_caches(k, n, 49152, 1048576, out);
}

int calib_fit_caches(calib_kernel *k, int n, double l1_bytes, double l2_bytes, calib_model *out) {
  bool used[NP] = {false};
  int n_fit = 0;
  for (int i = 0; i < n; i++) {
    if (k[i].set != CALIB_FIT || !(k[i].measured_s > 0)) continue;
    n_fit++;
    used[P_OVH] = true;
    for (int s = 0; s < k[i].n_steps; s++) {
      const calib_step *st = &k[i].steps[s];
      bool flops = graph_cost_flops(&st->cost) > 0;
      if (st->unit == CALIB_MATRIX && flops)
        for (int p = P_MM_BF16; p <= P_MM_F64; p++) used[p] |= MM_OF[p] == st->dtype;
      if (st->unit == CALIB_MATRIX && st->walk_misses > 0) used[P_MM_MISS] = true;
      if (st->unit == CALIB_VECTOR && flops) used[P_VEC] = true;
      bool vec = st->vectorized && st->unit == CALIB_REDUCE_COL;
      if (st->unit != CALIB_VECTOR && vec && flops) used[P_RED_VEC] = true;
      if (st->unit == CALIB_REDUCE_ROW && !vec && flops) used[P_RED_ROW] = used[P_RED_OVERLAP] = true;
      if (st->unit == CALIB_REDUCE_MINMAX && flops) used[P_RED_MINMAX] = used[P_RED_ROW_S] = true;
      if (st->unit == CALIB_REDUCE_COL && !vec && flops) used[P_RED_COL] = true;
      if (st->unit == CALIB_REDUCE_COL && !st->vectorized && st->walk_misses > 0) used[P_RED_MISS] = true;
      if (st->conversions > 0) used[P_CONV] = true;
      if (st->cost.transcendentals > 0)
        used[(st->dtype == GDT_F64 ? P_TR64 : P_TR) + (int)st->trans] = true;
      if (st->cost.bytes_read + st->cost.bytes_written > 0)
        used[P_BW] = used[P_BW_L1] = used[P_BW_L2] = used[P_BW_L3] = used[P_L3] = true;
      if (st->walk_pages > 0) used[P_PAGE] = true;
    }
  }
  if (n_fit == 0) return -1;
  /* a start of the order of any current CPU core; the first sweeps search
  ** three decades either side of it */
  double th[NP];
  for (int p = P_MM_BF16; p <= P_MM_F64; p++) th[p] = log(1e9);
  th[P_MM_MISS] = th[P_RED_MISS] = log(1e-9);
  th[P_VEC] = log(1e10);
  th[P_CONV] = log(1e10);
  th[P_RED_ROW] = th[P_RED_MINMAX] = th[P_RED_COL] = log(1e9);
  th[P_RED_ROW_S] = log(1e-8);
  th[P_RED_OVERLAP] = log(64.0);
  th[P_RED_VEC] = log(1e10);
  for (int t = 0; t < CALIB_TR_COUNT; t++) th[P_TR + t] = th[P_TR64 + t] = log(1e8);
  th[P_PAGE] = log(1e-9);
  th[P_BW_L1] = log(3e11);
  th[P_L1] = log(l1_bytes > 0 ? l1_bytes : 49152);
  th[P_L2] = log(l2_bytes > 0 ? l2_bytes : 1048576);
  th[P_BW_L2] = log(1e11);
  th[P_BW_L3] = log(3e10);
  th[P_L3] = log(16777216.0);
  th[P_BW] = log(1e10);
  th[P_OVH] = log(1e-7);
  descend(k, n, th, used, 60, 3 * log(10.0));
  descend(k, n, th, used, 60, 0.5 * log(10.0));
  *out = model_of(th, used);
  for (int i = 0; i < n; i++) k[i].predicted_s = calib_predict(out, &k[i]);
  return n_fit;
}

int calib_errors(const calib_kernel *k, int n, calib_set s, double *median, double *p90) {
  double *e = malloc(sizeof *e * (size_t)(n > 0 ? n : 1));
  int m = 0;
  for (int i = 0; e && i < n; i++)
    if (k[i].set == s && k[i].measured_s > 0) e[m++] = fabs(k[i].predicted_s / k[i].measured_s - 1);
  *median = *p90 = 0;
  if (m > 0) {
    qsort(e, (size_t)m, sizeof *e, cmp_double);
    *median = m % 2 ? e[m / 2] : 0.5 * (e[m / 2 - 1] + e[m / 2]);
    int r = (int)ceil(0.9 * m) - 1; /* nearest rank */
    *p90 = e[r < 0 ? 0 : r];
  }
  free(e);
  return m;
}

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
