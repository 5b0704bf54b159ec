/*
** graph.c -- see graph.h. Shape inference and the cost formulas live here,
** next to the table of op kinds they are keyed by.
*/
#include "graph.h"

#include <math.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"

/* ---- tables ---- */

static const struct {
  const char *name;
  int bits;
  bool is_float;
} DTYPES[GDT_COUNT] = {
    [GDT_PRED] = {"pred", 8, false}, [GDT_S4] = {"s4", 4, false},
    [GDT_S8] = {"s8", 8, false},     [GDT_U8] = {"u8", 8, false},
    [GDT_S32] = {"s32", 32, false},  [GDT_U32] = {"u32", 32, false},
    [GDT_S64] = {"s64", 64, false},  [GDT_F8] = {"f8e4m3fn", 8, true},
    [GDT_F16] = {"f16", 16, true},   [GDT_BF16] = {"bf16", 16, true},
    [GDT_F32] = {"f32", 32, true},   [GDT_F64] = {"f64", 64, true},
};

typedef enum { C_SRC, C_UNARY, C_BINARY, C_TERNARY, C_DOT, C_CONV, C_REDUCE, C_MOVE, C_COLL, C_CUSTOM } op_class;

/* flops and transcendentals per output element for elementwise kinds. The
** conventions follow XLA's HloCostAnalysis: exp, log, tanh, logistic, rsqrt,
** sqrt, sin, cos, pow count as transcendentals, not flops; conversions and
** copies move data and do no arithmetic. gelu is the tanh approximation
** 0.5x(1 + tanh(c(x + 0.044715x^3))): 8 flops and 1 tanh; silu is x*logistic(x). */
static const struct {
  const char *name;
  op_class cls;
  double flops, trans;
} OPS[GOP_COUNT] = {
    [GOP_PARAMETER] = {"parameter", C_SRC, 0, 0},
    [GOP_CONSTANT] = {"constant", C_SRC, 0, 0},
    [GOP_IOTA] = {"iota", C_SRC, 0, 0},
    [GOP_NEG] = {"negate", C_UNARY, 1, 0},
    [GOP_ABS] = {"abs", C_UNARY, 1, 0},
    [GOP_EXP] = {"exponential", C_UNARY, 0, 1},
    [GOP_LOG] = {"log", C_UNARY, 0, 1},
    [GOP_TANH] = {"tanh", C_UNARY, 0, 1},
    [GOP_LOGISTIC] = {"logistic", C_UNARY, 0, 1},
    [GOP_GELU] = {"gelu", C_UNARY, 8, 1},
    [GOP_SILU] = {"silu", C_UNARY, 1, 1},
    [GOP_RELU] = {"relu", C_UNARY, 1, 0},
    [GOP_RSQRT] = {"rsqrt", C_UNARY, 0, 1},
    [GOP_SQRT] = {"sqrt", C_UNARY, 0, 1},
    [GOP_SIN] = {"sine", C_UNARY, 0, 1},
    [GOP_COS] = {"cosine", C_UNARY, 0, 1},
    [GOP_NOT] = {"not", C_UNARY, 1, 0},
    [GOP_CONVERT] = {"convert", C_UNARY, 0, 0},
    [GOP_COPY] = {"copy", C_UNARY, 0, 0},
    [GOP_REDUCE_PRECISION] = {"reduce-precision", C_UNARY, 0, 0},
    [GOP_ADD] = {"add", C_BINARY, 1, 0},
    [GOP_SUB] = {"subtract", C_BINARY, 1, 0},
    [GOP_MUL] = {"multiply", C_BINARY, 1, 0},
    [GOP_DIV] = {"divide", C_BINARY, 1, 0},
    [GOP_MAX] = {"maximum", C_BINARY, 1, 0},
    [GOP_MIN] = {"minimum", C_BINARY, 1, 0},
    [GOP_POW] = {"power", C_BINARY, 0, 1},
    [GOP_COMPARE] = {"compare", C_BINARY, 1, 0},
    [GOP_AND] = {"and", C_BINARY, 1, 0},
    [GOP_OR] = {"or", C_BINARY, 1, 0},
    /* gelu'(x) = 0.5(1+t) + 0.5x(1-t^2)c(1+3*0.044715x^2), t = tanh(c(x+0.044715x^3)):
    ** 15 flops and a tanh, then times dy; silu'(x) = s(1 + x(1-s)), s = logistic(x). */
    [GOP_GELU_GRAD] = {"gelu-grad", C_BINARY, 16, 1},
    [GOP_SILU_GRAD] = {"silu-grad", C_BINARY, 5, 1},
    [GOP_SELECT] = {"select", C_TERNARY, 1, 0},
    [GOP_CLAMP] = {"clamp", C_TERNARY, 2, 0},
    [GOP_DOT] = {"dot", C_DOT, 0, 0},
    [GOP_CONV] = {"convolution", C_CONV, 0, 0},
    [GOP_REDUCE] = {"reduce", C_REDUCE, 0, 0},
    [GOP_BROADCAST] = {"broadcast", C_MOVE, 0, 0},
    [GOP_TRANSPOSE] = {"transpose", C_MOVE, 0, 0},
    [GOP_RESHAPE] = {"reshape", C_MOVE, 0, 0},
    [GOP_CONCAT] = {"concatenate", C_MOVE, 0, 0},
    [GOP_SLICE] = {"slice", C_MOVE, 0, 0},
    [GOP_DYNAMIC_SLICE] = {"dynamic-slice", C_MOVE, 0, 0},
    [GOP_DYNAMIC_UPDATE_SLICE] = {"dynamic-update-slice", C_MOVE, 0, 0},
    [GOP_PAD] = {"pad", C_MOVE, 0, 0},
    [GOP_GATHER] = {"gather", C_MOVE, 0, 0},
    [GOP_SCATTER] = {"scatter", C_MOVE, 0, 0},
    [GOP_ALL_REDUCE] = {"all-reduce", C_COLL, 0, 0},
    [GOP_ALL_GATHER] = {"all-gather", C_COLL, 0, 0},
    [GOP_REDUCE_SCATTER] = {"reduce-scatter", C_COLL, 0, 0},
    [GOP_ALL_TO_ALL] = {"all-to-all", C_COLL, 0, 0},
    [GOP_COLLECTIVE_PERMUTE] = {"collective-permute", C_COLL, 0, 0},
    [GOP_SEND] = {"send", C_COLL, 0, 0},
    [GOP_RECV] = {"recv", C_COLL, 0, 0},
    [GOP_CUSTOM] = {"custom-call", C_CUSTOM, 0, 0},
};

const char *graph_dtype_name(graph_dtype dt) {
  return (dt >= 0 && dt < GDT_COUNT) ? DTYPES[dt].name : "?";
}

int graph_dtype_parse(const char *s) {
  for (int i = 0; i < GDT_COUNT; i++)
    if (strcmp(DTYPES[i].name, s) == 0) return i;
  /* other spellings people and XLA use */
  static const struct {
    const char *alias;
    graph_dtype dt;
  } ALIAS[] = {{"f8", GDT_F8},     {"f8e5m2", GDT_F8},  {"fp8", GDT_F8},  {"fp16", GDT_F16},
               {"fp32", GDT_F32},  {"fp64", GDT_F64},   {"int8", GDT_S8}, {"int4", GDT_S4},
               {"nf4", GDT_S4},    {"u4", GDT_S4},      {"int32", GDT_S32}, {"int64", GDT_S64}};
  for (size_t i = 0; i < sizeof ALIAS / sizeof *ALIAS; i++)
    if (strcmp(ALIAS[i].alias, s) == 0) return ALIAS[i].dt;
  return -1;
}

int graph_dtype_bits(graph_dtype dt) { return DTYPES[dt].bits; }
bool graph_dtype_is_float(graph_dtype dt) { return DTYPES[dt].is_float; }

const char *graph_op_name(graph_op_kind k) {
  return (k >= 0 && k < GOP_COUNT) ? OPS[k].name : "?";
}

int graph_op_parse(const char *s) {
  for (int i = 0; i < GOP_COUNT; i++)
    if (strcmp(OPS[i].name, s) == 0) return i;
  return -1;
}

bool graph_op_is_elementwise(graph_op_kind k) {
  op_class c = OPS[k].cls;
  return c == C_UNARY || c == C_BINARY || c == C_TERNARY;
}

bool graph_op_is_transcendental(graph_op_kind k) {
  return graph_op_is_elementwise(k) && OPS[k].trans > 0;
}

bool graph_op_is_collective(graph_op_kind k) { return OPS[k].cls == C_COLL; }

/* ---- shapes ---- */

graph_shape graph_shape_make(graph_dtype dt, int rank, const int64_t *dims) {
  graph_shape s = {.dtype = dt, .rank = rank};
  for (int i = 0; i < rank && i < GRAPH_MAX_RANK; i++) s.dim[i] = dims[i];
  return s;
}

graph_dims graph_dims_of(int n, ...) {
  graph_dims d = {.n = n};
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n && i < GRAPH_MAX_RANK; i++) d.d[i] = (int8_t)va_arg(ap, int);
  va_end(ap);
  return d;
}

int64_t graph_elements(const graph_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i];
  return n;
}

double graph_bytes(const graph_shape *s) {
  return (double)graph_elements(s) * DTYPES[s->dtype].bits / 8.0;
}

bool graph_shape_eq(const graph_shape *a, const graph_shape *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

void graph_shape_str(const graph_shape *s, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "%s[", graph_dtype_name(s->dtype));
  for (int i = 0; i < s->rank && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)s->dim[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

/* ---- the graph ---- */

struct graph {
  char *name;
  graph_op *ops;
  int n, cap;
  diag *dg;
  bool failed;
  graph_phase phase;
  char scope[128];
  int layer;
  int64_t count;
};

static char *dupstr(const char *s) {
  size_t l = strlen(s) + 1;
  char *d = malloc(l);
  if (d) memcpy(d, s, l);
  return d;
}

graph *graph_new(const char *name) {
  graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->name = dupstr(name ? name : "graph");
  g->layer = -1;
  g->count = 1;
  return g;
}

void graph_free(graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) {
    free(g->ops[i].in);
    free(g->ops[i].name);
  }
  free(g->ops);
  free(g->name);
  diag_free(g->dg);
  free(g);
}

const char *graph_name(const graph *g) { return g->name; }
int graph_count(const graph *g) { return g->n; }
const graph_op *graph_get(const graph *g, int id) {
  return (id >= 0 && id < g->n) ? &g->ops[id] : NULL;
}
bool graph_ok(const graph *g) { return !g->failed; }
const diag *graph_diag(const graph *g) { return g->dg; }

void graph_error(graph *g, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!g->dg) g->dg = diag_new();
  if (g->dg) diag_error(g->dg, g->name, 0, 0, NULL, "%s", msg);
  g->failed = true;
}

void graph_set_phase(graph *g, graph_phase p) { g->phase = p; }
void graph_set_scope(graph *g, const char *scope) {
  str_copy(g->scope, sizeof g->scope, scope ? scope : "");
}
void graph_set_layer(graph *g, int layer) { g->layer = layer; }
void graph_set_count(graph *g, int64_t count) { g->count = count > 0 ? count : 1; }
void graph_set_flags(graph *g, int id, unsigned flags) {
  if (id >= 0 && id < g->n) g->ops[id].flags = flags;
}
void graph_set_param_of(graph *g, int id, int weight) {
  if (id >= 0 && id < g->n) g->ops[id].param_of = weight;
}

/* Shapes beyond this many elements are input errors, not models: 2^50 is
** ~1e15 elements, a thousand times the largest tensor of a 10^13-parameter
** model, and keeps byte counts far from int64 overflow. */
#define MAX_ELEMENTS (1LL << 50)

static bool shape_valid(graph *g, const char *what, const graph_shape *s) {
  if (s->rank < 0 || s->rank > GRAPH_MAX_RANK) {
    graph_error(g, "%s: rank %d is outside 0..%d", what, s->rank, GRAPH_MAX_RANK);
    return false;
  }
  if (s->dtype < 0 || s->dtype >= GDT_COUNT) {
    graph_error(g, "%s: invalid dtype", what);
    return false;
  }
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0) {
      graph_error(g, "%s: dimension %d is %lld; dimensions cannot be negative", what, i,
                  (long long)s->dim[i]);
      return false;
    }
    if (s->dim[i] > 0 && n > MAX_ELEMENTS / s->dim[i]) {
      graph_error(g, "%s: more than 2^50 elements; not a real tensor", what);
      return false;
    }
    n *= s->dim[i];
  }
  return true;
}

/* Appends an op; `ins` must all be valid ids (checked by the callers). */
static int add(graph *g, graph_op_kind k, graph_shape out, const int *ins, int n_in) {
  if (!shape_valid(g, OPS[k].name, &out)) return -1;
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 256;
    graph_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
    if (!ops) {
      graph_error(g, "out of memory at %d ops", g->n);
      return -1;
    }
    g->ops = ops;
    g->cap = cap;
  }
  graph_op *op = &g->ops[g->n];
  memset(op, 0, sizeof *op);
  op->kind = k;
  op->out = out;
  op->phase = g->phase;
  op->count = g->count;
  op->layer = g->layer;
  op->param_of = -1;
  op->rule = GRAPH_RULE_NONE;
  op->rule_in = -1;
  op->n_in = n_in;
  if (n_in) {
    op->in = malloc((size_t)n_in * sizeof *op->in);
    if (!op->in) {
      graph_error(g, "out of memory");
      return -1;
    }
    memcpy(op->in, ins, (size_t)n_in * sizeof *ins);
  }
  char name[256];
  snprintf(name, sizeof name, "%s%s%s", g->scope, *g->scope ? "/" : "", OPS[k].name);
  op->name = dupstr(name);
  return g->n++;
}

/* A -1 operand means an earlier error was already reported. */
static bool inputs_ok(graph *g, const int *ins, int n) {
  for (int i = 0; i < n; i++) {
    if (ins[i] == -1) return false;
    if (ins[i] < 0 || ins[i] >= g->n) {
      graph_error(g, "operand id %d does not exist", ins[i]);
      return false;
    }
  }
  return true;
}

static const graph_shape *shape(const graph *g, int id) { return &g->ops[id].out; }

static void mismatch(graph *g, graph_op_kind k, const char *what, const graph_shape *a,
                     const graph_shape *b) {
  char sa[128], sb[128];
  graph_shape_str(a, sa, sizeof sa);
  graph_shape_str(b, sb, sizeof sb);
  graph_error(g, "%s%s%s: %s: %s vs %s", g->scope, *g->scope ? "/" : "", OPS[k].name, what, sa,
              sb);
}

int graph_parameter(graph *g, const char *name, graph_shape s, unsigned flags) {
  int id = add(g, GOP_PARAMETER, s, NULL, 0);
  if (id < 0) return -1;
  g->ops[id].flags = flags;
  if (name) {
    free(g->ops[id].name);
    g->ops[id].name = dupstr(name);
  }
  return id;
}

int graph_constant(graph *g, graph_shape s) { return add(g, GOP_CONSTANT, s, NULL, 0); }
int graph_iota(graph *g, graph_shape s) { return add(g, GOP_IOTA, s, NULL, 0); }

int graph_unary(graph *g, graph_op_kind k, int x) {
  if (OPS[k].cls != C_UNARY) {
    graph_error(g, "%s is not a unary op", OPS[k].name);
    return -1;
  }
  if (!inputs_ok(g, &x, 1)) return -1;
  return add(g, k, *shape(g, x), &x, 1);
}

int graph_convert(graph *g, int x, graph_dtype dt) {
  if (!inputs_ok(g, &x, 1)) return -1;
  graph_shape s = *shape(g, x);
  s.dtype = dt;
  return add(g, GOP_CONVERT, s, &x, 1);
}

static bool same_dims(const graph_shape *a, const graph_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

int graph_binary(graph *g, graph_op_kind k, int a, int b) {
  if (OPS[k].cls != C_BINARY) {
    graph_error(g, "%s is not a binary op", OPS[k].name);
    return -1;
  }
  int ins[2] = {a, b};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = shape(g, a), *sb = shape(g, b);
  /* HLO semantics: no implicit broadcasting, one dtype */
  if (!graph_shape_eq(sa, sb)) {
    mismatch(g, k, "operand shapes differ", sa, sb);
    return -1;
  }
  graph_shape out = *sa;
  if (k == GOP_COMPARE) out.dtype = GDT_PRED;
  return add(g, k, out, ins, 2);
}

int graph_select(graph *g, int pred, int a, int b) {
  int ins[3] = {pred, a, b};
  if (!inputs_ok(g, ins, 3)) return -1;
  const graph_shape *sp = shape(g, pred), *sa = shape(g, a), *sb = shape(g, b);
  if (!graph_shape_eq(sa, sb)) {
    mismatch(g, GOP_SELECT, "branches differ", sa, sb);
    return -1;
  }
  if (sp->dtype != GDT_PRED || (sp->rank != 0 && !same_dims(sp, sa))) {
    mismatch(g, GOP_SELECT, "predicate must be pred of the same dims (or a scalar)", sp, sa);
    return -1;
  }
  return add(g, GOP_SELECT, *sa, ins, 3);
}

int graph_clamp(graph *g, int lo, int x, int hi) {
  int ins[3] = {lo, x, hi};
  if (!inputs_ok(g, ins, 3)) return -1;
  const graph_shape *sx = shape(g, x);
  for (int i = 0; i < 3; i += 2) {
    const graph_shape *sb = shape(g, ins[i]);
    if (sb->dtype != sx->dtype || (sb->rank != 0 && !same_dims(sb, sx))) {
      mismatch(g, GOP_CLAMP, "bounds must be scalars or the operand's shape", sb, sx);
      return -1;
    }
  }
  return add(g, GOP_CLAMP, *sx, ins, 3);
}

static bool dims_valid(const graph_dims *d, int rank) {
  if (d->n < 0 || d->n > rank) return false;
  for (int i = 0; i < d->n; i++) {
    if (d->d[i] < 0 || d->d[i] >= rank) return false;
    for (int j = 0; j < i; j++)
      if (d->d[i] == d->d[j]) return false;
  }
  return true;
}

static bool in_dims(const graph_dims *d, int x) {
  for (int i = 0; i < d->n; i++)
    if (d->d[i] == x) return true;
  return false;
}

int graph_dot(graph *g, int a, int b, graph_dims lb, graph_dims rb, graph_dims lc, graph_dims rc,
              graph_dtype out_dt) {
  int ins[2] = {a, b};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = shape(g, a), *sb = shape(g, b);
  if (!dims_valid(&lb, sa->rank) || !dims_valid(&lc, sa->rank) || !dims_valid(&rb, sb->rank) ||
      !dims_valid(&rc, sb->rank) || lb.n != rb.n || lc.n != rc.n) {
    mismatch(g, GOP_DOT, "invalid batch/contracting dimensions", sa, sb);
    return -1;
  }
  for (int i = 0; i < lb.n; i++)
    if (sa->dim[lb.d[i]] != sb->dim[rb.d[i]]) {
      mismatch(g, GOP_DOT, "batch dimensions differ", sa, sb);
      return -1;
    }
  for (int i = 0; i < lc.n; i++)
    if (sa->dim[lc.d[i]] != sb->dim[rc.d[i]]) {
      mismatch(g, GOP_DOT, "contracting dimensions differ", sa, sb);
      return -1;
    }
  if (sa->dtype != sb->dtype) {
    mismatch(g, GOP_DOT, "operand dtypes differ", sa, sb);
    return -1;
  }
  graph_shape out = {.dtype = out_dt};
  for (int i = 0; i < lb.n; i++) out.dim[out.rank++] = sa->dim[lb.d[i]];
  for (int i = 0; i < sa->rank; i++)
    if (!in_dims(&lb, i) && !in_dims(&lc, i)) {
      if (out.rank == GRAPH_MAX_RANK) goto too_big;
      out.dim[out.rank++] = sa->dim[i];
    }
  for (int i = 0; i < sb->rank; i++)
    if (!in_dims(&rb, i) && !in_dims(&rc, i)) {
      if (out.rank == GRAPH_MAX_RANK) goto too_big;
      out.dim[out.rank++] = sb->dim[i];
    }
  int id = add(g, GOP_DOT, out, ins, 2);
  if (id >= 0) {
    graph_op *op = &g->ops[id];
    op->lhs_batch = lb;
    op->rhs_batch = rb;
    op->lhs_contract = lc;
    op->rhs_contract = rc;
  }
  return id;
too_big:
  mismatch(g, GOP_DOT, "result has more than 8 dimensions", sa, sb);
  return -1;
}

int graph_matmul(graph *g, int a, int w) {
  int ins[2] = {a, w};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = shape(g, a), *sw = shape(g, w);
  if (sa->rank < 1 || sw->rank != 2) {
    mismatch(g, GOP_DOT, "matmul needs [..., K] x [K, N]", sa, sw);
    return -1;
  }
  return graph_dot(g, a, w, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, sa->rank - 1),
                   graph_dims_of(1, 0), sa->dtype);
}

int graph_conv(graph *g, int input, int kernel, const graph_conv_attrs *c, graph_dtype out_dt) {
  int ins[2] = {input, kernel};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *si = shape(g, input), *sk = shape(g, kernel);
  int r = c->spatial + 2;
  if (c->spatial < 1 || c->spatial > 3 || si->rank != r || sk->rank != r) {
    mismatch(g, GOP_CONV, "input and kernel must have spatial+2 dimensions", si, sk);
    return -1;
  }
  int64_t fg = c->feature_groups > 0 ? c->feature_groups : 1;
  int64_t bg = c->batch_groups > 0 ? c->batch_groups : 1;
  if (si->dim[c->in_feature] != sk->dim[c->k_in] * fg || sk->dim[c->k_out] % fg != 0 ||
      sk->dim[c->k_out] % bg != 0 || si->dim[c->in_batch] % bg != 0) {
    mismatch(g, GOP_CONV, "input features must equal kernel input features x feature groups", si,
             sk);
    return -1;
  }
  graph_shape out = {.dtype = out_dt, .rank = r};
  out.dim[c->out_batch] = si->dim[c->in_batch] / bg;
  out.dim[c->out_feature] = sk->dim[c->k_out];
  for (int s = 0; s < c->spatial; s++) {
    int64_t stride = c->stride[s] > 0 ? c->stride[s] : 1;
    int64_t ld = c->lhs_dilation[s] > 0 ? c->lhs_dilation[s] : 1;
    int64_t rd = c->rhs_dilation[s] > 0 ? c->rhs_dilation[s] : 1;
    int64_t in = (si->dim[c->in_spatial[s]] - 1) * ld + 1 + c->pad_lo[s] + c->pad_hi[s];
    int64_t k = (sk->dim[c->k_spatial[s]] - 1) * rd + 1;
    if (si->dim[c->in_spatial[s]] == 0 || in < k) {
      mismatch(g, GOP_CONV, "window larger than the padded input", si, sk);
      return -1;
    }
    out.dim[c->out_spatial[s]] = (in - k) / stride + 1;
  }
  int id = add(g, GOP_CONV, out, ins, 2);
  if (id >= 0) g->ops[id].conv = *c;
  return id;
}

int graph_reduce(graph *g, int x, graph_dims dims, graph_reduce_kind r) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  if (!dims_valid(&dims, sx->rank)) {
    mismatch(g, GOP_REDUCE, "invalid reduced dimensions", sx, sx);
    return -1;
  }
  graph_shape out = {.dtype = sx->dtype};
  for (int i = 0; i < sx->rank; i++)
    if (!in_dims(&dims, i)) out.dim[out.rank++] = sx->dim[i];
  int id = add(g, GOP_REDUCE, out, &x, 1);
  if (id >= 0) {
    g->ops[id].dims = dims;
    g->ops[id].reduce = r;
  }
  return id;
}

int graph_broadcast(graph *g, int x, graph_shape out, graph_dims map) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  out.dtype = sx->dtype;
  bool ok = map.n == sx->rank && dims_valid(&map, out.rank);
  for (int i = 0; ok && i < map.n; i++)
    if (out.dim[map.d[i]] != sx->dim[i]) ok = false;
  if (!ok) {
    mismatch(g, GOP_BROADCAST, "operand dims must appear in the result at the mapped positions",
             sx, &out);
    return -1;
  }
  int id = add(g, GOP_BROADCAST, out, &x, 1);
  if (id >= 0) g->ops[id].dims = map;
  return id;
}

int graph_transpose(graph *g, int x, graph_dims perm) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  if (perm.n != sx->rank || !dims_valid(&perm, sx->rank)) {
    mismatch(g, GOP_TRANSPOSE, "not a permutation of the operand's dimensions", sx, sx);
    return -1;
  }
  graph_shape out = {.dtype = sx->dtype, .rank = sx->rank};
  for (int i = 0; i < sx->rank; i++) out.dim[i] = sx->dim[perm.d[i]];
  int id = add(g, GOP_TRANSPOSE, out, &x, 1);
  if (id >= 0) g->ops[id].dims = perm;
  return id;
}

int graph_reshape(graph *g, int x, graph_shape out) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  out.dtype = sx->dtype;
  if (!shape_valid(g, "reshape", &out)) return -1;
  if (graph_elements(&out) != graph_elements(sx)) {
    mismatch(g, GOP_RESHAPE, "element counts differ", sx, &out);
    return -1;
  }
  return add(g, GOP_RESHAPE, out, &x, 1);
}

int graph_concat(graph *g, const int *xs, int n, int dim) {
  if (n < 1) {
    graph_error(g, "concatenate needs at least one operand");
    return -1;
  }
  if (!inputs_ok(g, xs, n)) return -1;
  graph_shape out = *shape(g, xs[0]);
  if (dim < 0 || dim >= out.rank) {
    mismatch(g, GOP_CONCAT, "dimension out of range", &out, &out);
    return -1;
  }
  for (int i = 1; i < n; i++) {
    const graph_shape *s = shape(g, xs[i]);
    bool ok = s->rank == out.rank && s->dtype == out.dtype;
    for (int d = 0; ok && d < s->rank; d++)
      if (d != dim && s->dim[d] != out.dim[d]) ok = false;
    if (!ok) {
      mismatch(g, GOP_CONCAT, "operands differ outside the concatenated dimension",
               shape(g, xs[0]), s);
      return -1;
    }
    out.dim[dim] += s->dim[dim];
  }
  int id = add(g, GOP_CONCAT, out, xs, n);
  if (id >= 0) g->ops[id].dims = graph_dims_of(1, dim);
  return id;
}

int graph_slice(graph *g, int x, const int64_t *start, const int64_t *limit,
                const int64_t *stride) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  graph_shape out = {.dtype = sx->dtype, .rank = sx->rank};
  for (int i = 0; i < sx->rank; i++) {
    int64_t st = stride ? stride[i] : 1;
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > sx->dim[i] || st < 1) {
      graph_error(g, "%s: slice [%lld:%lld:%lld] of dimension %d (size %lld) is out of range",
                  g->scope, (long long)start[i], (long long)limit[i], (long long)st, i,
                  (long long)sx->dim[i]);
      return -1;
    }
    out.dim[i] = (limit[i] - start[i] + st - 1) / st;
  }
  int id = add(g, GOP_SLICE, out, &x, 1); /* sx dangles from here on */
  if (id >= 0)
    for (int i = 0; i < out.rank; i++) {
      g->ops[id].lo[i] = start[i];
      g->ops[id].hi[i] = limit[i];
      g->ops[id].step[i] = stride ? stride[i] : 1;
    }
  return id;
}

int graph_dynamic_slice(graph *g, int x, graph_shape out) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  out.dtype = sx->dtype;
  bool ok = out.rank == sx->rank;
  for (int i = 0; ok && i < out.rank; i++)
    if (out.dim[i] > sx->dim[i]) ok = false;
  if (!ok) {
    mismatch(g, GOP_DYNAMIC_SLICE, "slice larger than the operand", sx, &out);
    return -1;
  }
  return add(g, GOP_DYNAMIC_SLICE, out, &x, 1);
}

int graph_dynamic_update_slice(graph *g, int x, int update) {
  int ins[2] = {x, update};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sx = shape(g, x), *su = shape(g, update);
  bool ok = su->rank == sx->rank && su->dtype == sx->dtype;
  for (int i = 0; ok && i < su->rank; i++)
    if (su->dim[i] > sx->dim[i]) ok = false;
  if (!ok) {
    mismatch(g, GOP_DYNAMIC_UPDATE_SLICE, "update must fit in the operand", sx, su);
    return -1;
  }
  return add(g, GOP_DYNAMIC_UPDATE_SLICE, *sx, ins, 2);
}

int graph_pad(graph *g, int x, const int64_t *lo, const int64_t *hi, const int64_t *interior) {
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  graph_shape out = {.dtype = sx->dtype, .rank = sx->rank};
  for (int i = 0; i < sx->rank; i++) {
    int64_t in = interior ? interior[i] : 0;
    int64_t d = sx->dim[i];
    out.dim[i] = lo[i] + hi[i] + d + (d > 0 ? (d - 1) * in : 0);
    if (in < 0 || out.dim[i] < 0) {
      graph_error(g, "%s: padding of dimension %d gives a negative size", g->scope, i);
      return -1;
    }
  }
  int id = add(g, GOP_PAD, out, &x, 1); /* sx dangles from here on */
  if (id >= 0)
    for (int i = 0; i < out.rank; i++) {
      g->ops[id].lo[i] = lo[i];
      g->ops[id].hi[i] = hi[i];
      g->ops[id].step[i] = interior ? interior[i] : 0;
    }
  return id;
}

static bool is_index_type(graph_dtype dt) {
  return dt == GDT_S32 || dt == GDT_S64 || dt == GDT_U32 || dt == GDT_U8 || dt == GDT_S8;
}

int graph_gather(graph *g, int table, int indices, const graph_shape *given) {
  int ins[2] = {table, indices};
  if (!inputs_ok(g, ins, 2)) return -1;
  const graph_shape *st = shape(g, table), *si = shape(g, indices);
  if (!is_index_type(si->dtype)) {
    mismatch(g, GOP_GATHER, "indices must be integers", st, si);
    return -1;
  }
  graph_shape out;
  if (given) {
    out = *given;
    out.dtype = st->dtype;
  } else {
    if (st->rank < 1 || si->rank + st->rank - 1 > GRAPH_MAX_RANK) {
      mismatch(g, GOP_GATHER, "embedding lookup needs a table [V, ...] and indices", st, si);
      return -1;
    }
    out = *si;
    out.dtype = st->dtype;
    for (int i = 1; i < st->rank; i++) out.dim[out.rank++] = st->dim[i];
  }
  return add(g, GOP_GATHER, out, ins, 2);
}

int graph_scatter(graph *g, int operand, int indices, int updates) {
  int ins[3] = {operand, indices, updates};
  if (!inputs_ok(g, ins, 3)) return -1;
  const graph_shape *so = shape(g, operand), *si = shape(g, indices), *su = shape(g, updates);
  if (!is_index_type(si->dtype) || su->dtype != so->dtype ||
      graph_elements(su) / (graph_elements(si) ? graph_elements(si) : 1) >
          graph_elements(so)) {
    mismatch(g, GOP_SCATTER, "updates must be rows of the operand, indices integers", so, su);
    return -1;
  }
  return add(g, GOP_SCATTER, *so, ins, 3);
}

int graph_collective(graph *g, graph_op_kind k, int x, int64_t group, int dim) {
  if (OPS[k].cls != C_COLL) {
    graph_error(g, "%s is not a collective", OPS[k].name);
    return -1;
  }
  if (!inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = shape(g, x);
  if (group < 1) {
    graph_error(g, "%s: replica group of %lld chips", OPS[k].name, (long long)group);
    return -1;
  }
  graph_shape out = *sx;
  bool uses_dim = k == GOP_ALL_GATHER || k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL;
  if (uses_dim && (dim < 0 || dim >= sx->rank)) {
    mismatch(g, k, "dimension out of range", sx, sx);
    return -1;
  }
  if (k == GOP_ALL_GATHER) out.dim[dim] *= group;
  if (k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL) {
    if (sx->dim[dim] % group != 0) {
      mismatch(g, k, "dimension not divisible by the group size", sx, sx);
      return -1;
    }
    if (k == GOP_REDUCE_SCATTER) out.dim[dim] /= group;
  }
  int id = add(g, k, out, &x, 1);
  if (id >= 0) {
    g->ops[id].group_size = group;
    g->ops[id].dims = graph_dims_of(1, uses_dim ? dim : 0);
  }
  return id;
}

int graph_custom(graph *g, const char *target, graph_shape out, const int *ins, int n_in,
                 double flops, double trans, double bytes) {
  if (!inputs_ok(g, ins, n_in)) return -1;
  if (!(flops >= 0) || !(trans >= 0) || !(bytes >= 0)) {
    graph_error(g, "custom-call %s: negative or invalid cost", target);
    return -1;
  }
  int id = add(g, GOP_CUSTOM, out, ins, n_in);
  if (id >= 0) {
    graph_op *op = &g->ops[id];
    op->custom_flops = flops;
    op->custom_transcendentals = trans;
    op->custom_bytes = bytes;
    free(op->name);
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", g->scope, *g->scope ? "/" : "", target);
    op->name = dupstr(name);
  }
  return id;
}

bool graph_op_reads_twice(const graph *g, int id) {
  const graph_op *op = &g->ops[id];
  for (int i = 0; i < op->n_in; i++)
    for (int j = 0; j < i; j++)
      if (op->in[i] == op->in[j]) return true;
  return false;
}

void graph_set_custom_axis(graph *g, int id, int axis) {
  if (id >= 0 && id < g->n && g->ops[id].kind == GOP_CUSTOM && axis >= 0 &&
      axis < g->ops[id].out.rank)
    g->ops[id].dims = graph_dims_of(1, axis);
}

void graph_set_custom_conv(graph *g, int id, const graph_conv_attrs *c) {
  /* the union's conv member is unused by custom-calls: no other kind's data is lost */
  if (id >= 0 && id < g->n && g->ops[id].kind == GOP_CUSTOM) g->ops[id].conv = *c;
}

void graph_set_rule(graph *g, int id, graph_rule rule, int in) {
  if (id >= 0 && id < g->n && in >= 0 && in < id) {
    g->ops[id].rule = rule;
    g->ops[id].rule_in = in;
  }
}

/* ---- costs ---- */

graph_cost graph_op_cost(const graph *g, int id) {
  graph_cost c = {0};
  const graph_op *op = &g->ops[id];
  double out_b = graph_bytes(&op->out);
  double out_n = (double)graph_elements(&op->out);
  double in_b = 0;
  for (int i = 0; i < op->n_in; i++) in_b += graph_bytes(shape(g, op->in[i]));
  const graph_shape *s0 = op->n_in ? shape(g, op->in[0]) : &op->out;

  switch (OPS[op->kind].cls) {
  case C_SRC:
    if (op->kind == GOP_IOTA) c.bytes_written = out_b;
    break;
  case C_UNARY:
  case C_BINARY:
  case C_TERNARY: {
    /* arithmetic runs in the operands' type (compare's output is pred) */
    graph_dtype dt = op->kind == GOP_SELECT ? op->out.dtype : s0->dtype;
    c.flops[dt] = OPS[op->kind].flops * out_n;
    c.transcendentals = OPS[op->kind].trans * out_n;
    c.bytes_read = in_b;
    c.bytes_written = out_b;
    break;
  }
  case C_DOT: {
    double k = 1;
    for (int i = 0; i < op->lhs_contract.n; i++) k *= (double)s0->dim[op->lhs_contract.d[i]];
    c.flops[s0->dtype] = 2.0 * out_n * k;
    c.bytes_read = in_b;
    c.bytes_written = out_b;
    break;
  }
  case C_CONV: {
    const graph_shape *sk = shape(g, op->in[1]);
    double window = 1;
    for (int s = 0; s < op->conv.spatial; s++) window *= (double)sk->dim[op->conv.k_spatial[s]];
    double per_group_in = (double)sk->dim[op->conv.k_in];
    c.flops[s0->dtype] = 2.0 * out_n * window * per_group_in;
    c.bytes_read = in_b;
    c.bytes_written = out_b;
    break;
  }
  case C_REDUCE: {
    double in_n = (double)graph_elements(s0);
    c.flops[s0->dtype] = in_n - out_n;
    c.bytes_read = in_b;
    c.bytes_written = out_b;
    break;
  }
  case C_MOVE:
    switch (op->kind) {
    case GOP_RESHAPE: /* a bitcast in the default layout: no data moves */
      break;
    case GOP_SLICE:
    case GOP_DYNAMIC_SLICE:
      c.bytes_read = out_b;
      c.bytes_written = out_b;
      break;
    case GOP_DYNAMIC_UPDATE_SLICE: /* in place: only the update is touched */
      c.bytes_read = graph_bytes(shape(g, op->in[1]));
      c.bytes_written = c.bytes_read;
      break;
    case GOP_GATHER: /* the rows fetched, not the table */
      c.bytes_read = out_b + graph_bytes(shape(g, op->in[1]));
      c.bytes_written = out_b;
      break;
    case GOP_SCATTER: { /* read-modify-write of the rows touched */
      double upd = graph_bytes(shape(g, op->in[2]));
      c.flops[op->out.dtype] = (double)graph_elements(shape(g, op->in[2]));
      c.bytes_read = 2 * upd + graph_bytes(shape(g, op->in[1]));
      c.bytes_written = upd;
      break;
    }
    default:
      c.bytes_read = in_b;
      c.bytes_written = out_b;
    }
    break;
  case C_COLL:
    c.bytes_read = in_b;
    c.bytes_written = out_b;
    break;
  case C_CUSTOM:
    c.flops[s0->dtype] = op->custom_flops;
    c.transcendentals = op->custom_transcendentals;
    c.bytes_read = op->custom_bytes > out_b ? op->custom_bytes - out_b : op->custom_bytes;
    c.bytes_written = op->custom_bytes > out_b ? out_b : 0;
    break;
  }
  return c;
}

graph_cost graph_total_cost(const graph *g, int phase) {
  graph_cost t = {0};
  for (int i = 0; i < g->n; i++) {
    if (phase >= 0 && (int)g->ops[i].phase != phase) continue;
    graph_cost c = graph_op_cost(g, i);
    graph_cost_add(&t, &c, (double)g->ops[i].count);
  }
  return t;
}

void graph_cost_add(graph_cost *t, const graph_cost *c, double k) {
  for (int d = 0; d < GDT_COUNT; d++) t->flops[d] += k * c->flops[d];
  t->transcendentals += k * c->transcendentals;
  t->bytes_read += k * c->bytes_read;
  t->bytes_written += k * c->bytes_written;
}

bool graph_num_close(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

bool graph_cost_close(const graph_cost *a, const graph_cost *b) {
  for (int t = 0; t < GDT_COUNT; t++)
    if (!graph_num_close(a->flops[t], b->flops[t])) return false;
  return graph_num_close(a->transcendentals, b->transcendentals) &&
         graph_num_close(a->bytes_read, b->bytes_read) && graph_num_close(a->bytes_written, b->bytes_written);
}

double graph_cost_flops(const graph_cost *c) {
  double s = 0;
  for (int d = 0; d < GDT_COUNT; d++) s += c->flops[d];
  return s;
}

int64_t graph_param_elements(const graph *g, unsigned need) {
  int64_t n = 0;
  for (int i = 0; i < g->n; i++) {
    const graph_op *op = &g->ops[i];
    if (op->kind == GOP_PARAMETER && (op->flags & need) == need) n += graph_elements(&op->out);
  }
  return n;
}

void graph_op_str(const graph *g, int id, char *buf, size_t n) {
  const graph_op *op = &g->ops[id];
  char s[160];
  graph_shape_str(&op->out, s, sizeof s);
  snprintf(buf, n, "%s %s (%s)", OPS[op->kind].name, s, op->name);
}

/* ---- order ---- */

int graph_toposort(int n, const int *const *in, const int *n_in, int *order, int *cycle,
                   int *cycle_len) {
  int *pending = calloc((size_t)n + 1, sizeof *pending); /* inputs not yet placed */
  int *users_start = calloc((size_t)n + 2, sizeof *users_start);
  int edges = 0;
  for (int i = 0; i < n; i++) edges += n_in[i];
  int *users = malloc(((size_t)edges + 1) * sizeof *users);
  int *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!pending || !users_start || !users || !fill) {
    free(pending), free(users_start), free(users), free(fill);
    *cycle_len = 0;
    return -2;
  }
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n_in[i]; k++) users_start[in[i][k] + 1]++;
  for (int i = 0; i < n; i++) users_start[i + 1] += users_start[i];
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n_in[i]; k++) {
      int src = in[i][k];
      users[users_start[src] + fill[src]++] = i;
    }
  int head = 0, tail = 0;
  for (int i = 0; i < n; i++) {
    pending[i] = n_in[i];
    if (pending[i] == 0) order[tail++] = i;
  }
  while (head < tail) {
    int v = order[head++];
    for (int e = users_start[v]; e < users_start[v + 1]; e++)
      if (--pending[users[e]] == 0) order[tail++] = users[e];
  }
  int rc = 0;
  *cycle_len = 0;
  if (tail < n) {
    /* Every unplaced node has an unplaced input: walk inputs until a node
    ** repeats, then the walk from that node back to itself is a cycle. */
    int v = 0;
    while (pending[v] == 0) v++;
    int *seen_at = fill; /* reuse: position in the walk + 1 */
    memset(seen_at, 0, (size_t)n * sizeof *seen_at);
    int *walk = users_start; /* reuse: n+2 ints */
    int len = 0;
    while (!seen_at[v]) {
      seen_at[v] = ++len;
      walk[len - 1] = v;
      int next = -1;
      for (int k = 0; k < n_in[v] && next < 0; k++)
        if (pending[in[v][k]] > 0) next = in[v][k];
      v = next;
    }
    for (int i = seen_at[v] - 1; i < len; i++) cycle[(*cycle_len)++] = walk[i];
    rc = -1;
  }
  free(pending);
  free(users_start);
  free(users);
  free(fill);
  return rc;
}
