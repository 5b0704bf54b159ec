/*
** calib_set.c -- the calibration kernel set: matmuls, elementwise ops,
** reductions, softmax and layernorm at fit and holdout shapes, built as
** graphs (graph.h) and lowered into one module (lower.h) so the JIT compiles
** the whole set once; each step's arguments, transcendentals and memory walk
** are recorded for the model.
**
** Separate from the timing (calib.c) and the fit (calib_fit.c): which
** kernels exist and what each one does is its own job, and the largest.
*/
#include "calib_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "../base/strutil.h"

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
void calib_build_set(kset *s, bool quick) {
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
int calib_lower_set(kset *s, lower_module *m, char *err, size_t n) {
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
void calib_mark_vectorized(kset *s, const lower_module *m) {
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

void calib_kset_free(kset *s) {
  if (!s->run) return;
  for (int i = 0; i < s->run->n_kernels; i++) graph_free(s->kb[i].g);
  free(s->kb);
  s->kb = NULL;
}

