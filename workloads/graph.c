/*
** graph.c -- see graph.h. The tables of element types and op kinds, shapes,
** the graph object (create, free, accessors, the builder state) with the
** base every op builder appends through, and graph_toposort.
**
** The op builders with their shape inference are in graph_build.c, the cost
** formulas in graph_cost.c; all three read the op-kind table kept here
** (through graph_int.h).
*/
#include "graph.h"
#include "graph_int.h"

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
/* flops and transcendentals per output element for elementwise kinds. The
** conventions follow XLA's HloCostAnalysis: exp, log, tanh, logistic, rsqrt,
** sqrt, sin, cos, pow count as transcendentals, not flops; conversions and
** copies move data and do no arithmetic. gelu is the tanh approximation
** 0.5x(1 + tanh(c(x + 0.044715x^3))): 8 flops and 1 tanh; silu is x*logistic(x). */
const graph_op_info GRAPH_OPS[GOP_COUNT] = {
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
  return (k >= 0 && k < GOP_COUNT) ? GRAPH_OPS[k].name : "?";
}

int graph_op_parse(const char *s) {
  for (int i = 0; i < GOP_COUNT; i++)
    if (strcmp(GRAPH_OPS[i].name, s) == 0) return i;
  return -1;
}

bool graph_op_is_elementwise(graph_op_kind k) {
  op_class c = GRAPH_OPS[k].cls;
  return c == C_UNARY || c == C_BINARY || c == C_TERNARY;
}

bool graph_op_is_transcendental(graph_op_kind k) {
  return graph_op_is_elementwise(k) && GRAPH_OPS[k].trans > 0;
}

bool graph_op_is_collective(graph_op_kind k) { return GRAPH_OPS[k].cls == C_COLL; }

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

/* "scope/name" (name alone without a scope) into out, cut to n - 1 bytes
** as snprintf(out, n, "%s%s%s", scope, "/", name) cuts it: the same
** text, without formatting (graph_add names every op of every shard
** graph the planner builds, a tenth of building them went on snprintf). */
static void scoped_name(char *out, size_t n, const char *scope, const char *name) {
  const char *part[3] = {scope, *scope ? "/" : "", name};
  size_t at = 0;
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(part[i]);
    if (l > n - 1 - at) l = n - 1 - at;
    memcpy(out + at, part[i], l);
    at += l;
  }
  out[at] = 0;
}

char *graph_dupstr(const char *s) {
  size_t l = strlen(s) + 1;
  char *d = malloc(l);
  if (d) memcpy(d, s, l);
  return d;
}

graph *graph_new(const char *name) {
  graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->name = graph_dupstr(name ? name : "graph");
  g->layer = -1;
  g->count = 1;
  g->composite = -1;
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
graph_module graph_module_of(const graph *g) { return g->module; }
graph_module graph_set_module(graph *g, graph_module m) {
  graph_module was = g->module;
  g->module = m;
  return was;
}
void graph_set_count(graph *g, int64_t count) { g->count = count > 0 ? count : 1; }
bool graph_set_share_params(graph *g, bool on) {
  bool was = g->share_params;
  g->share_params = on;
  return was;
}
int graph_set_composite(graph *g, int c) {
  int was = g->composite;
  g->composite = c;
  return was;
}
int graph_begin_composite(graph *g, int *previous) {
  *previous = graph_set_composite(g, g->composites++);
  return g->composite;
}
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

bool graph_shape_valid(graph *g, const char *what, const graph_shape *s) {
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
int graph_add(graph *g, graph_op_kind k, graph_shape out, const int *ins, int n_in) {
  if (!graph_shape_valid(g, GRAPH_OPS[k].name, &out)) return -1;
  if (g->n >= GRAPH_MAX_OPS) { /* once: the builder may go on adding sources */
    if (!g->failed)
      graph_error(g, "more than %d ops: past the limit of ops one graph holds (~2 GB, 6x the "
                   "largest model tpusim accepts; docs/limits.md)",
                  GRAPH_MAX_OPS);
    return -1;
  }
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
  op->module = (unsigned char)g->module;
  op->param_of = -1;
  op->composite = g->composite;
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
  scoped_name(name, sizeof name, g->scope, GRAPH_OPS[k].name);
  op->name = graph_dupstr(name);
  return g->n++;
}

/* A -1 operand means an earlier error was already reported. */
bool graph_inputs_ok(graph *g, const int *ins, int n) {
  for (int i = 0; i < n; i++) {
    if (ins[i] == -1) return false;
    if (ins[i] < 0 || ins[i] >= g->n) {
      graph_error(g, "operand id %d does not exist", ins[i]);
      return false;
    }
  }
  return true;
}

const graph_shape *graph_shape_at(const graph *g, int id) { return &g->ops[id].out; }

void graph_mismatch(graph *g, graph_op_kind k, const char *what, const graph_shape *a,
                    const graph_shape *b) {
  char sa[128], sb[128];
  graph_shape_str(a, sa, sizeof sa);
  graph_shape_str(b, sb, sizeof sb);
  graph_error(g, "%s%s%s: %s: %s vs %s", g->scope, *g->scope ? "/" : "", GRAPH_OPS[k].name, what,
              sa, sb);
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
