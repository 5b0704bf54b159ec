/*
** train.c -- see train.h. One vector-Jacobian product rule per op kind,
** applied in reverse construction order (construction order is
** topological); gradients reaching an op from several users are summed.
*/
#include "train.h"

#include <stdlib.h>
#include <string.h>

#define NONE (-2) /* no gradient yet; -1 stays "an error was reported" */

typedef struct {
  graph *g;
  const wl_train *t;
  int *grad;  /* per forward op: its gradient op, or NONE */
  bool *need; /* per forward op: depends on a trainable parameter */
} ad;

static graph_shape shape(graph *g, int id) {
  const graph_op *op = graph_get(g, id);
  return op ? op->out : (graph_shape){0};
}

static int zeros(graph *g, graph_shape s) {
  int c = graph_constant(g, (graph_shape){.dtype = s.dtype, .rank = 0});
  return graph_broadcast(g, c, s, graph_dims_of(0));
}

/* A scalar constant (1, 0.5, beta1, ...) times x, elementwise. */
static int scale(graph *g, int x) { return graph_binary(g, GOP_MUL, x, zeros(g, shape(g, x))); }
static int plus_const(graph *g, int x) {
  return graph_binary(g, GOP_ADD, x, zeros(g, shape(g, x)));
}
static int const_minus(graph *g, int x) {
  return graph_binary(g, GOP_SUB, zeros(g, shape(g, x)), x);
}

static void accum(ad *a, int id, int dg) {
  if (dg == -1 || !a->need[id]) return;
  if (a->grad[id] == NONE) {
    a->grad[id] = dg;
    return;
  }
  /* a value read twice: inside the library kernel whose backward this is,
  ** part of that backward; outside it, autograd's accumulation, a kernel
  ** of its own */
  int cur = graph_set_composite(a->g, -1);
  if (cur >= 0 && graph_get(a->g, id)->composite == cur) graph_set_composite(a->g, cur);
  a->grad[id] = graph_binary(a->g, GOP_ADD, a->grad[id], dg);
  graph_set_composite(a->g, cur);
}

static bool is_identity(const graph_dims *p) {
  for (int i = 0; i < p->n; i++)
    if (p->d[i] != i) return false;
  return true;
}

static int transpose_unless_identity(graph *g, int x, graph_dims perm) {
  return is_identity(&perm) ? x : graph_transpose(g, x, perm);
}

static bool has(const graph_dims *d, int x) {
  for (int i = 0; i < d->n; i++)
    if (d->d[i] == x) return true;
  return false;
}

/* Rank of value v among the entries of d sorted increasingly. */
static int rank_in(const graph_dims *d, int v) {
  int r = 0;
  for (int i = 0; i < d->n; i++)
    if (d->d[i] < v) r++;
  return r;
}

/* dot_general's transpose rules, as JAX's _dot_general_transpose_lhs/rhs:
** the gradient is another dot_general, then a transpose back to the
** operand's dimension order (skipped when already in order, as for a
** weight gradient x^T dy). */
static void vjp_dot(ad *a, const graph_op *op, int dy) {
  graph *g = a->g;
  int A = op->in[0], B = op->in[1];
  graph_shape sa = shape(g, A), sb = shape(g, B);
  int nb = op->lhs_batch.n;
  graph_dims fa = {0}, fb = {0}, batch = {0};
  for (int i = 0; i < sa.rank; i++)
    if (!has(&op->lhs_batch, i) && !has(&op->lhs_contract, i)) fa.d[fa.n++] = (int8_t)i;
  for (int i = 0; i < sb.rank; i++)
    if (!has(&op->rhs_batch, i) && !has(&op->rhs_contract, i)) fb.d[fb.n++] = (int8_t)i;
  for (int i = 0; i < nb; i++) batch.d[batch.n++] = (int8_t)i;
  /* a dot accumulating in f32 from bf16 inputs gets its gradient back in bf16 */
  if (shape(g, dy).dtype != sa.dtype) dy = graph_convert(g, dy, sa.dtype);
  if (a->need[A]) {
    graph_dims dyc = {.n = fb.n};
    for (int k = 0; k < fb.n; k++) dyc.d[k] = (int8_t)(nb + fa.n + k);
    int r = graph_dot(g, dy, B, batch, op->rhs_batch, dyc, fb, sa.dtype);
    graph_dims perm = {.n = sa.rank};
    for (int i = 0; i < sa.rank; i++) {
      int pos = -1;
      for (int k = 0; k < nb; k++)
        if (op->lhs_batch.d[k] == i) pos = k;
      for (int m = 0; m < fa.n; m++)
        if (fa.d[m] == i) pos = nb + m;
      for (int m = 0; m < op->lhs_contract.n; m++)
        if (op->lhs_contract.d[m] == i)
          pos = nb + fa.n + rank_in(&op->rhs_contract, op->rhs_contract.d[m]);
      perm.d[i] = (int8_t)pos;
    }
    accum(a, A, transpose_unless_identity(g, r, perm));
  }
  if (a->need[B]) {
    graph_dims dyc = {.n = fa.n};
    for (int m = 0; m < fa.n; m++) dyc.d[m] = (int8_t)(nb + m);
    int r = graph_dot(g, A, dy, op->lhs_batch, batch, fa, dyc, sb.dtype);
    graph_dims perm = {.n = sb.rank};
    for (int i = 0; i < sb.rank; i++) {
      int pos = -1;
      for (int k = 0; k < nb; k++)
        if (op->rhs_batch.d[k] == i) pos = k;
      for (int m = 0; m < op->rhs_contract.n; m++)
        if (op->rhs_contract.d[m] == i)
          pos = nb + rank_in(&op->lhs_contract, op->lhs_contract.d[m]);
      for (int m = 0; m < fb.n; m++)
        if (fb.d[m] == i) pos = nb + op->lhs_contract.n + m;
      perm.d[i] = (int8_t)pos;
    }
    accum(a, B, transpose_unless_identity(g, r, perm));
  }
}

/* Convolution gradients as cuDNN/XLA run them: a data-gradient and a
** filter-gradient convolution, each with the forward pass's multiply-adds. */
static void vjp_conv(ad *a, int id, const graph_op *op, int dy) {
  graph *g = a->g;
  graph_cost fwd = graph_op_cost(g, id);
  double flops = graph_cost_flops(&fwd);
  int x = op->in[0], k = op->in[1];
  graph_shape sx = shape(g, x), sk = shape(g, k), sy = shape(g, dy);
  if (a->need[x]) {
    int ins[2] = {dy, k};
    int dx = graph_custom(g, "conv-backward-input", sx, ins, 2, flops, 0,
                          graph_bytes(&sy) + graph_bytes(&sk) + graph_bytes(&sx));
    graph_set_custom_conv(g, dx, &op->conv); /* so sim/lower.c can run it */
    accum(a, x, dx);
  }
  if (a->need[k]) {
    int ins[2] = {x, dy};
    int dk = graph_custom(g, "conv-backward-filter", sk, ins, 2, flops, 0,
                          graph_bytes(&sx) + graph_bytes(&sy) + graph_bytes(&sk));
    graph_set_custom_conv(g, dk, &op->conv);
    accum(a, k, dk);
  }
}

/* The kept dimensions of a reduce: where the result's dims sit in x. */
static graph_dims kept_dims(const graph_op *op, int rank) {
  graph_dims k = {0};
  for (int i = 0; i < rank; i++)
    if (!has(&op->dims, i)) k.d[k.n++] = (int8_t)i;
  return k;
}

static void vjp_reduce(ad *a, const graph_op *op, int id, int dy) {
  graph *g = a->g;
  int x = op->in[0];
  graph_shape sx = shape(g, x);
  graph_dims keep = kept_dims(op, sx.rank);
  int dyb = graph_broadcast(g, dy, sx, keep);
  if (op->reduce == GRAPH_RED_ADD) {
    accum(a, x, dyb);
  } else if (op->reduce == GRAPH_RED_MUL) {
    accum(a, x, graph_binary(g, GOP_DIV, graph_broadcast(g, graph_binary(g, GOP_MUL, dy, id),
                                                         sx, keep), x));
  } else { /* max/min: the gradient goes to the elements equal to the result */
    int mask = graph_binary(g, GOP_COMPARE, x, graph_broadcast(g, id, sx, keep));
    accum(a, x, graph_select(g, mask, dyb, zeros(g, sx)));
  }
}

static void vjp_broadcast(ad *a, const graph_op *op, int dy) {
  graph *g = a->g;
  int x = op->in[0];
  graph_shape sy = op->out;
  graph_dims added = {0};
  for (int i = 0; i < sy.rank; i++)
    if (!has(&op->dims, i)) added.d[added.n++] = (int8_t)i;
  int r = added.n ? graph_reduce(g, dy, added, GRAPH_RED_ADD) : dy;
  /* the reduce leaves x's dims in increasing output order; undo a reordering */
  graph_dims perm = {.n = op->dims.n};
  for (int i = 0; i < op->dims.n; i++) perm.d[i] = (int8_t)rank_in(&op->dims, op->dims.d[i]);
  accum(a, x, transpose_unless_identity(g, r, perm));
}

static void vjp_slice(ad *a, const graph_op *op, int dy) {
  graph *g = a->g;
  int x = op->in[0];
  graph_shape sx = shape(g, x);
  int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK], in[GRAPH_MAX_RANK];
  for (int i = 0; i < sx.rank; i++) {
    int64_t n = op->out.dim[i];
    lo[i] = op->lo[i];
    in[i] = op->step[i] - 1;
    hi[i] = sx.dim[i] - op->lo[i] - (n > 0 ? (n - 1) * op->step[i] + 1 : 0);
  }
  accum(a, x, graph_pad(g, dy, lo, hi, in));
}

static void vjp_concat(ad *a, const graph_op *op, int dy) {
  graph *g = a->g;
  int dim = op->dims.d[0];
  int64_t at = 0;
  for (int i = 0; i < op->n_in; i++) {
    graph_shape s = shape(g, op->in[i]);
    if (a->need[op->in[i]]) {
      int64_t st[GRAPH_MAX_RANK] = {0}, lim[GRAPH_MAX_RANK];
      for (int d = 0; d < s.rank; d++) lim[d] = op->out.dim[d];
      st[dim] = at;
      lim[dim] = at + s.dim[dim];
      accum(a, op->in[i], graph_slice(g, dy, st, lim, NULL));
    }
    at += s.dim[dim];
  }
}

static void vjp_pad(ad *a, const graph_op *op, int dy) {
  graph *g = a->g;
  int x = op->in[0];
  graph_shape sx = shape(g, x);
  int64_t st[GRAPH_MAX_RANK], lim[GRAPH_MAX_RANK], stride[GRAPH_MAX_RANK];
  for (int i = 0; i < sx.rank; i++) {
    if (op->lo[i] < 0 || op->hi[i] < 0) {
      graph_error(g, "no gradient rule for pad with negative padding");
      return;
    }
    st[i] = op->lo[i];
    stride[i] = op->step[i] + 1;
    lim[i] = st[i] + (sx.dim[i] > 0 ? (sx.dim[i] - 1) * stride[i] + 1 : 0);
  }
  accum(a, x, graph_slice(g, dy, st, lim, stride));
}

static void vjp_collective(ad *a, const graph_op *op, int dy) {
  graph_op_kind back = op->kind;
  if (op->kind == GOP_ALL_GATHER) back = GOP_REDUCE_SCATTER;
  if (op->kind == GOP_REDUCE_SCATTER) back = GOP_ALL_GATHER;
  accum(a, op->in[0], graph_collective(a->g, back, dy, op->group_size, op->dims.d[0]));
}

/* Appends the gradient contributions of op `id` given its gradient dy. */
static void vjp(ad *a, int id, int dy) {
  graph *g = a->g;
  graph_op op = *graph_get(g, id); /* a copy: the op array grows below */
  int x = op.n_in > 0 ? op.in[0] : -1, y = op.n_in > 1 ? op.in[1] : -1;
  graph_shape sx = x >= 0 ? shape(g, x) : op.out;
  switch (op.kind) {
  case GOP_ADD:
    accum(a, x, dy);
    accum(a, y, dy);
    break;
  case GOP_SUB:
    accum(a, x, dy);
    if (a->need[y]) accum(a, y, graph_unary(g, GOP_NEG, dy));
    break;
  case GOP_MUL:
    if (a->need[x]) accum(a, x, graph_binary(g, GOP_MUL, dy, y));
    if (a->need[y]) accum(a, y, graph_binary(g, GOP_MUL, dy, x));
    break;
  case GOP_DIV:
    if (a->need[x]) accum(a, x, graph_binary(g, GOP_DIV, dy, y));
    if (a->need[y])
      accum(a, y,
            graph_unary(g, GOP_NEG, graph_binary(g, GOP_MUL, dy, graph_binary(g, GOP_DIV, id, y))));
    break;
  case GOP_MAX:
  case GOP_MIN:
    for (int k = 0; k < 2; k++) {
      if (!a->need[op.in[k]]) continue;
      int mask = graph_binary(g, GOP_COMPARE, op.in[k], id);
      accum(a, op.in[k], graph_select(g, mask, dy, zeros(g, op.out)));
    }
    break;
  case GOP_POW:
    if (a->need[x])
      accum(a, x, graph_binary(g, GOP_MUL, dy,
                               graph_binary(g, GOP_MUL, y, graph_binary(g, GOP_DIV, id, x))));
    if (a->need[y])
      accum(a, y, graph_binary(g, GOP_MUL, dy,
                               graph_binary(g, GOP_MUL, id, graph_unary(g, GOP_LOG, x))));
    break;
  case GOP_NEG:
    accum(a, x, graph_unary(g, GOP_NEG, dy));
    break;
  case GOP_ABS: {
    int pos = graph_binary(g, GOP_COMPARE, x, zeros(g, sx));
    accum(a, x, graph_select(g, pos, dy, graph_unary(g, GOP_NEG, dy)));
    break;
  }
  case GOP_EXP:
    accum(a, x, graph_binary(g, GOP_MUL, dy, id));
    break;
  case GOP_LOG:
    accum(a, x, graph_binary(g, GOP_DIV, dy, x));
    break;
  case GOP_TANH:
    accum(a, x, graph_binary(g, GOP_MUL, dy, const_minus(g, graph_binary(g, GOP_MUL, id, id))));
    break;
  case GOP_LOGISTIC:
    accum(a, x,
          graph_binary(g, GOP_MUL, dy, graph_binary(g, GOP_MUL, id, const_minus(g, id))));
    break;
  case GOP_GELU:
    accum(a, x, graph_binary(g, GOP_GELU_GRAD, x, dy));
    break;
  case GOP_SILU:
    accum(a, x, graph_binary(g, GOP_SILU_GRAD, x, dy));
    break;
  case GOP_RELU: {
    int pos = graph_binary(g, GOP_COMPARE, x, zeros(g, sx));
    accum(a, x, graph_select(g, pos, dy, zeros(g, sx)));
    break;
  }
  case GOP_RSQRT: /* d x^-1/2 = -1/2 y^3 */
    accum(a, x, graph_binary(g, GOP_MUL, dy,
                             scale(g, graph_binary(g, GOP_MUL, id, graph_binary(g, GOP_MUL, id, id)))));
    break;
  case GOP_SQRT:
    accum(a, x, scale(g, graph_binary(g, GOP_DIV, dy, id)));
    break;
  case GOP_SIN:
    accum(a, x, graph_binary(g, GOP_MUL, dy, graph_unary(g, GOP_COS, x)));
    break;
  case GOP_COS:
    accum(a, x, graph_binary(g, GOP_MUL, dy, graph_unary(g, GOP_NEG, graph_unary(g, GOP_SIN, x))));
    break;
  case GOP_CONVERT:
    accum(a, x, graph_convert(g, dy, sx.dtype));
    break;
  case GOP_COPY:
  case GOP_REDUCE_PRECISION:
    accum(a, x, dy);
    break;
  case GOP_SELECT:
    if (a->need[op.in[1]]) accum(a, op.in[1], graph_select(g, x, dy, zeros(g, op.out)));
    if (a->need[op.in[2]]) accum(a, op.in[2], graph_select(g, x, zeros(g, op.out), dy));
    break;
  case GOP_CLAMP: { /* passes through where the value was not clamped */
    int v = op.in[1];
    int mask = graph_binary(g, GOP_COMPARE, v, id);
    accum(a, v, graph_select(g, mask, dy, zeros(g, op.out)));
    break;
  }
  case GOP_DOT:
    vjp_dot(a, &op, dy);
    break;
  case GOP_CONV:
    vjp_conv(a, id, &op, dy);
    break;
  case GOP_REDUCE:
    vjp_reduce(a, &op, id, dy);
    break;
  case GOP_BROADCAST:
    vjp_broadcast(a, &op, dy);
    break;
  case GOP_TRANSPOSE: {
    graph_dims inv = {.n = op.dims.n};
    for (int i = 0; i < op.dims.n; i++) inv.d[op.dims.d[i]] = (int8_t)i;
    accum(a, x, graph_transpose(g, dy, inv));
    break;
  }
  case GOP_RESHAPE:
    accum(a, x, graph_reshape(g, dy, sx));
    break;
  case GOP_CONCAT:
    vjp_concat(a, &op, dy);
    break;
  case GOP_SLICE:
    vjp_slice(a, &op, dy);
    break;
  case GOP_PAD:
    vjp_pad(a, &op, dy);
    break;
  case GOP_DYNAMIC_SLICE:
    accum(a, x, graph_dynamic_update_slice(g, zeros(g, sx), dy));
    break;
  case GOP_DYNAMIC_UPDATE_SLICE:
    if (a->need[x]) accum(a, x, graph_dynamic_update_slice(g, dy, zeros(g, shape(g, y))));
    if (a->need[y]) accum(a, y, graph_dynamic_slice(g, dy, shape(g, y)));
    break;
  case GOP_GATHER: { /* scatter-add into zeros: the embedding gradient */
    /* A row gather ([n, rest of x] by a list of m row numbers) padded past
    ** its indices -- an MoE dispatch whose capacity rounds up past the
    ** routed rows of a token or two -- has rows no index fed: where they
    ** would not fit back into x (graph_scatter_fits), only the m indexed
    ** rows flow back. A padded capacity x could still hold keeps its
    ** backward over every row (--moe-imbalance prices that). */
    graph_shape so = op.out, si = shape(g, y);
    int64_t n_idx = graph_elements(&si);
    int dyr = dy;
    bool rows = si.rank == 1 && so.rank == sx.rank && n_idx > 0 && so.dim[0] > n_idx;
    for (int i = 1; rows && i < so.rank; i++) rows = so.dim[i] == sx.dim[i];
    if (rows && !graph_scatter_fits(&sx, &si, &so)) {
      int64_t start[GRAPH_MAX_RANK] = {0}, limit[GRAPH_MAX_RANK];
      for (int i = 0; i < so.rank; i++) limit[i] = so.dim[i];
      limit[0] = n_idx;
      dyr = graph_slice(g, dy, start, limit, NULL);
    }
    accum(a, x, graph_scatter(g, zeros(g, sx), y, dyr));
    break;
  }
  case GOP_SCATTER:
    if (a->need[x]) accum(a, x, dy);
    if (a->need[op.in[2]]) {
      graph_shape su = shape(g, op.in[2]);
      accum(a, op.in[2], graph_gather(g, dy, y, &su));
    }
    break;
  case GOP_ALL_REDUCE:
  case GOP_ALL_GATHER:
  case GOP_REDUCE_SCATTER:
  case GOP_ALL_TO_ALL:
  case GOP_COLLECTIVE_PERMUTE:
    vjp_collective(a, &op, dy);
    break;
  default:
    graph_error(g, "%s (%s): no gradient rule for this op", graph_op_name(op.kind), op.name);
  }
}

static int as_f32(graph *g, int x) {
  graph_dtype dt = shape(g, x).dtype;
  return dt == GDT_F32 || dt == GDT_F64 ? x : graph_convert(g, x, GDT_F32);
}

/* GRAPH_RULE_SOFTMAX (graph.h): dx = y (dy - sum(dy y)) over the last dim,
** in f32, from the composite's output y alone; its exp and sums get no
** gradient of their own, so the backward never reads them. */
static void vjp_softmax(ad *a, int id, int dy) {
  graph *g = a->g;
  int x = graph_get(g, id)->rule_in;
  if (!a->need[x]) return;
  graph_shape sx = shape(g, x);
  int y = as_f32(g, id), d = as_f32(g, dy);
  graph_shape s = shape(g, y);
  int sum = graph_reduce(g, graph_binary(g, GOP_MUL, d, y), graph_dims_of(1, s.rank - 1),
                         GRAPH_RED_ADD);
  graph_dims keep = {.n = s.rank - 1};
  for (int i = 0; i < keep.n; i++) keep.d[i] = (int8_t)i;
  int dx = graph_binary(g, GOP_MUL, y,
                        graph_binary(g, GOP_SUB, d, graph_broadcast(g, sum, s, keep)));
  if (sx.dtype != shape(g, dx).dtype) dx = graph_convert(g, dx, sx.dtype);
  accum(a, x, dx);
}

/* Ops through which nothing differentiable flows. */
static bool blocks_gradient(graph_op_kind k) {
  return k == GOP_COMPARE || k == GOP_AND || k == GOP_OR || k == GOP_NOT || k == GOP_IOTA ||
         k == GOP_CONSTANT;
}

static void mark_needed(graph *g, bool *need, int n) {
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind == GOP_PARAMETER) {
      need[i] = (op->flags & GRAPH_TRAINABLE) != 0;
      continue;
    }
    if (blocks_gradient(op->kind) || !graph_dtype_is_float(op->out.dtype)) continue;
    for (int k = 0; k < op->n_in && !need[i]; k++) need[i] = need[op->in[k]];
  }
}

/* Optimizer state: an fp32 array shaped like weight w (fp64 for an fp64
** weight: a model trained in double keeps its moments in double, as
** PyTorch's Adam keeps them in the parameter's dtype). */
static int state(graph *g, int w, const char *what) {
  const graph_op *op = graph_get(g, w);
  char name[300];
  snprintf(name, sizeof name, "%s.%s", op->name, what);
  graph_shape s = op->out;
  s.dtype = s.dtype == GDT_F64 ? GDT_F64 : GDT_F32;
  int id = graph_parameter(g, name, s, GRAPH_OPT_STATE);
  graph_set_param_of(g, id, w);
  return id;
}

/* The update of one weight, as optax/PyTorch write it (bias corrections as
** scalar multiplies, AdamW's decoupled weight decay). */
static void update(graph *g, const wl_train *t, int w, int grad) {
  graph_shape sw = shape(g, w);
  bool master = t->master_fp32 && sw.dtype != GDT_F32 && sw.dtype != GDT_F64;
  int p = w, gr = grad;
  if (master) {
    p = state(g, w, "master");
    gr = graph_convert(g, grad, GDT_F32);
  }
  int step;
  switch (t->optimizer) {
  case WL_SGD:
    step = scale(g, gr);
    break;
  case WL_MOMENTUM: {
    int m = graph_binary(g, GOP_ADD, scale(g, state(g, w, "momentum")), gr);
    step = scale(g, m);
    break;
  }
  default: {
    int m = graph_binary(g, GOP_ADD, scale(g, state(g, w, "adam_m")), scale(g, gr));
    int v = graph_binary(g, GOP_ADD, scale(g, state(g, w, "adam_v")),
                         scale(g, graph_binary(g, GOP_MUL, gr, gr)));
    int u = graph_binary(g, GOP_DIV, scale(g, m), plus_const(g, graph_unary(g, GOP_SQRT, scale(g, v))));
    if (t->optimizer == WL_ADAMW) u = graph_binary(g, GOP_ADD, u, scale(g, p));
    step = scale(g, u);
  }
  }
  int np = graph_binary(g, GOP_SUB, p, step);
  if (master) np = graph_convert(g, np, sw.dtype);
  graph_set_param_of(g, np, w);
}

int train_build(graph *g, int loss, const wl_train *t) {
  if (!graph_ok(g) || loss < 0) return -1;
  const graph_op *lop = graph_get(g, loss);
  if (!lop || lop->out.rank != 0) {
    graph_error(g, "the loss must be a scalar");
    return -1;
  }
  int n = graph_count(g);
  ad a = {.g = g, .t = t, .grad = malloc((size_t)n * sizeof(int)),
          .need = calloc((size_t)n, sizeof(bool))};
  if (!a.grad || !a.need) {
    free(a.grad), free(a.need);
    graph_error(g, "out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) a.grad[i] = NONE;
  mark_needed(g, a.need, n);
  if (!a.need[loss]) {
    free(a.grad), free(a.need);
    graph_error(g, "nothing to train: the loss depends on no trainable parameter");
    return -1;
  }
  graph_set_phase(g, GRAPH_BACKWARD);
  graph_set_scope(g, "grad");
  a.grad[loss] = zeros(g, lop->out); /* d loss / d loss = 1 */
  for (int i = loss; i >= 0 && graph_ok(g); i--) {
    if (a.grad[i] == NONE || !a.need[i]) continue;
    const graph_op *op = graph_get(g, i);
    graph_set_layer(g, op->layer);
    graph_set_module(g, (graph_module)op->module); /* its gradient: the same submodule's */
    graph_set_composite(g, op->composite); /* a library kernel's backward is one too */
    if (op->kind == GOP_PARAMETER) {
      graph_set_param_of(g, a.grad[i], i);
      continue;
    }
    if (op->rule == GRAPH_RULE_SOFTMAX) vjp_softmax(&a, i, a.grad[i]);
    else vjp(&a, i, a.grad[i]);
  }
  graph_set_layer(g, -1);
  graph_set_module(g, GRAPH_MOD_NONE);
  graph_set_composite(g, -1);
  graph_set_phase(g, GRAPH_OPTIMIZER);
  graph_set_scope(g, "opt");
  for (int i = 0; i < n && graph_ok(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind == GOP_PARAMETER && (op->flags & GRAPH_TRAINABLE) && a.grad[i] >= 0)
      update(g, t, i, a.grad[i]);
  }
  graph_set_scope(g, "");
  graph_set_phase(g, GRAPH_FORWARD);
  free(a.grad);
  free(a.need);
  return graph_ok(g) ? 0 : -1;
}
