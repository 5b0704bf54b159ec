/*
** graph_build.c -- the op builders: parameters, elementwise, dot and conv,
** reductions, data movement, gather/scatter, collectives and custom ops, each
** inferring and checking its output shape before it appends the op.
**
** Separate from graph.c (the object and its tables) and graph_cost.c (the
** formulas): shape rules are the largest part of the graph API and change on
** their own.
*/
#include "graph_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static bool same_shape(const graph_shape *a, const graph_shape *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dim[d] != b->dim[d]) return false;
  return true;
}

int graph_parameter(graph *g, const char *name, graph_shape s, unsigned flags) {
  /* a repeated module's weight: the one its first application made (a
  ** linear scan, paid only while sharing is on: a module's few weights) */
  for (int i = 0; g->share_params && name && i < g->n; i++) {
    const graph_op *o = &g->ops[i];
    if (o->kind == GOP_PARAMETER && o->name && strcmp(o->name, name) == 0 &&
        o->flags == flags && same_shape(&o->out, &s))
      return i;
  }
  int id = graph_add(g, GOP_PARAMETER, s, NULL, 0);
  if (id < 0) return -1;
  g->ops[id].flags = flags;
  if (name) {
    free(g->ops[id].name);
    g->ops[id].name = graph_dupstr(name);
  }
  return id;
}

int graph_constant(graph *g, graph_shape s) { return graph_add(g, GOP_CONSTANT, s, NULL, 0); }
int graph_iota(graph *g, graph_shape s) { return graph_add(g, GOP_IOTA, s, NULL, 0); }

int graph_unary(graph *g, graph_op_kind k, int x) {
  if (GRAPH_OPS[k].cls != C_UNARY) {
    graph_error(g, "%s is not a unary op", GRAPH_OPS[k].name);
    return -1;
  }
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  return graph_add(g, k, *graph_shape_at(g, x), &x, 1);
}

int graph_convert(graph *g, int x, graph_dtype dt) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  graph_shape s = *graph_shape_at(g, x);
  s.dtype = dt;
  return graph_add(g, GOP_CONVERT, s, &x, 1);
}

static bool same_dims(const graph_shape *a, const graph_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

int graph_binary(graph *g, graph_op_kind k, int a, int b) {
  if (GRAPH_OPS[k].cls != C_BINARY) {
    graph_error(g, "%s is not a binary op", GRAPH_OPS[k].name);
    return -1;
  }
  int ins[2] = {a, b};
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = graph_shape_at(g, a), *sb = graph_shape_at(g, b);
  /* HLO semantics: no implicit broadcasting, one dtype */
  if (!graph_shape_eq(sa, sb)) {
    graph_mismatch(g, k, "operand shapes differ", sa, sb);
    return -1;
  }
  graph_shape out = *sa;
  if (k == GOP_COMPARE) out.dtype = GDT_PRED;
  return graph_add(g, k, out, ins, 2);
}

int graph_select(graph *g, int pred, int a, int b) {
  int ins[3] = {pred, a, b};
  if (!graph_inputs_ok(g, ins, 3)) return -1;
  const graph_shape *sp = graph_shape_at(g, pred), *sa = graph_shape_at(g, a),
                    *sb = graph_shape_at(g, b);
  if (!graph_shape_eq(sa, sb)) {
    graph_mismatch(g, GOP_SELECT, "branches differ", sa, sb);
    return -1;
  }
  if (sp->dtype != GDT_PRED || (sp->rank != 0 && !same_dims(sp, sa))) {
    graph_mismatch(g, GOP_SELECT, "predicate must be pred of the same dims (or a scalar)", sp, sa);
    return -1;
  }
  return graph_add(g, GOP_SELECT, *sa, ins, 3);
}

int graph_clamp(graph *g, int lo, int x, int hi) {
  int ins[3] = {lo, x, hi};
  if (!graph_inputs_ok(g, ins, 3)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  for (int i = 0; i < 3; i += 2) {
    const graph_shape *sb = graph_shape_at(g, ins[i]);
    if (sb->dtype != sx->dtype || (sb->rank != 0 && !same_dims(sb, sx))) {
      graph_mismatch(g, GOP_CLAMP, "bounds must be scalars or the operand's shape", sb, sx);
      return -1;
    }
  }
  return graph_add(g, GOP_CLAMP, *sx, ins, 3);
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

/* A mixed-input GEMM: 16- or 32-bit activations times weights stored
** narrow (int4, int8, fp8), widened in registers as they are loaded, so
** HBM streams the narrow bytes and the arithmetic runs in the
** activations' dtype -- weight-only quantization's kernels (CUTLASS
** mixed-input GEMMs; Marlin, Frantar et al. 2024; AWQ's GEMV). */
static bool mixed_input(graph_dtype act, graph_dtype w) {
  bool wide = act == GDT_BF16 || act == GDT_F16 || act == GDT_F32;
  return wide && (w == GDT_S4 || w == GDT_S8 || w == GDT_U8 || w == GDT_F8);
}

int graph_dot(graph *g, int a, int b, graph_dims lb, graph_dims rb, graph_dims lc, graph_dims rc,
              graph_dtype out_dt) {
  int ins[2] = {a, b};
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = graph_shape_at(g, a), *sb = graph_shape_at(g, b);
  if (!dims_valid(&lb, sa->rank) || !dims_valid(&lc, sa->rank) || !dims_valid(&rb, sb->rank) ||
      !dims_valid(&rc, sb->rank) || lb.n != rb.n || lc.n != rc.n) {
    graph_mismatch(g, GOP_DOT, "invalid batch/contracting dimensions", sa, sb);
    return -1;
  }
  for (int i = 0; i < lb.n; i++)
    if (sa->dim[lb.d[i]] != sb->dim[rb.d[i]]) {
      graph_mismatch(g, GOP_DOT, "batch dimensions differ", sa, sb);
      return -1;
    }
  for (int i = 0; i < lc.n; i++)
    if (sa->dim[lc.d[i]] != sb->dim[rc.d[i]]) {
      graph_mismatch(g, GOP_DOT, "contracting dimensions differ", sa, sb);
      return -1;
    }
  if (sa->dtype != sb->dtype && !mixed_input(sa->dtype, sb->dtype)) {
    graph_mismatch(g, GOP_DOT, "operand dtypes differ", sa, sb);
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
  int id = graph_add(g, GOP_DOT, out, ins, 2);
  if (id >= 0) {
    graph_op *op = &g->ops[id];
    op->lhs_batch = lb;
    op->rhs_batch = rb;
    op->lhs_contract = lc;
    op->rhs_contract = rc;
  }
  return id;
too_big:
  graph_mismatch(g, GOP_DOT, "result has more than 8 dimensions", sa, sb);
  return -1;
}

int graph_matmul(graph *g, int a, int w) {
  int ins[2] = {a, w};
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sa = graph_shape_at(g, a), *sw = graph_shape_at(g, w);
  if (sa->rank < 1 || sw->rank != 2) {
    graph_mismatch(g, GOP_DOT, "matmul needs [..., K] x [K, N]", sa, sw);
    return -1;
  }
  return graph_dot(g, a, w, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, sa->rank - 1),
                   graph_dims_of(1, 0), sa->dtype);
}

int graph_conv(graph *g, int input, int kernel, const graph_conv_attrs *c, graph_dtype out_dt) {
  int ins[2] = {input, kernel};
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *si = graph_shape_at(g, input), *sk = graph_shape_at(g, kernel);
  int r = c->spatial + 2;
  if (c->spatial < 1 || c->spatial > 3 || si->rank != r || sk->rank != r) {
    graph_mismatch(g, GOP_CONV, "input and kernel must have spatial+2 dimensions", si, sk);
    return -1;
  }
  int64_t fg = c->feature_groups > 0 ? c->feature_groups : 1;
  int64_t bg = c->batch_groups > 0 ? c->batch_groups : 1;
  if (si->dim[c->in_feature] != sk->dim[c->k_in] * fg || sk->dim[c->k_out] % fg != 0 ||
      sk->dim[c->k_out] % bg != 0 || si->dim[c->in_batch] % bg != 0) {
    graph_mismatch(g, GOP_CONV, "input features must equal kernel input features x feature groups",
                   si, sk);
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
      graph_mismatch(g, GOP_CONV, "window larger than the padded input", si, sk);
      return -1;
    }
    out.dim[c->out_spatial[s]] = (in - k) / stride + 1;
  }
  int id = graph_add(g, GOP_CONV, out, ins, 2);
  if (id >= 0) g->ops[id].conv = *c;
  return id;
}

int graph_reduce(graph *g, int x, graph_dims dims, graph_reduce_kind r) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  if (!dims_valid(&dims, sx->rank)) {
    graph_mismatch(g, GOP_REDUCE, "invalid reduced dimensions", sx, sx);
    return -1;
  }
  graph_shape out = {.dtype = sx->dtype};
  for (int i = 0; i < sx->rank; i++)
    if (!in_dims(&dims, i)) out.dim[out.rank++] = sx->dim[i];
  int id = graph_add(g, GOP_REDUCE, out, &x, 1);
  if (id >= 0) {
    g->ops[id].dims = dims;
    g->ops[id].reduce = r;
  }
  return id;
}

int graph_broadcast(graph *g, int x, graph_shape out, graph_dims map) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  out.dtype = sx->dtype;
  bool ok = map.n == sx->rank && dims_valid(&map, out.rank);
  for (int i = 0; ok && i < map.n; i++)
    if (out.dim[map.d[i]] != sx->dim[i]) ok = false;
  if (!ok) {
    graph_mismatch(g, GOP_BROADCAST,
                   "operand dims must appear in the result at the mapped positions", sx, &out);
    return -1;
  }
  int id = graph_add(g, GOP_BROADCAST, out, &x, 1);
  if (id >= 0) g->ops[id].dims = map;
  return id;
}

int graph_transpose(graph *g, int x, graph_dims perm) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  if (perm.n != sx->rank || !dims_valid(&perm, sx->rank)) {
    graph_mismatch(g, GOP_TRANSPOSE, "not a permutation of the operand's dimensions", sx, sx);
    return -1;
  }
  graph_shape out = {.dtype = sx->dtype, .rank = sx->rank};
  for (int i = 0; i < sx->rank; i++) out.dim[i] = sx->dim[perm.d[i]];
  int id = graph_add(g, GOP_TRANSPOSE, out, &x, 1);
  if (id >= 0) g->ops[id].dims = perm;
  return id;
}

int graph_reshape(graph *g, int x, graph_shape out) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  out.dtype = sx->dtype;
  if (!graph_shape_valid(g, "reshape", &out)) return -1;
  if (graph_elements(&out) != graph_elements(sx)) {
    graph_mismatch(g, GOP_RESHAPE, "element counts differ", sx, &out);
    return -1;
  }
  return graph_add(g, GOP_RESHAPE, out, &x, 1);
}

int graph_concat(graph *g, const int *xs, int n, int dim) {
  if (n < 1) {
    graph_error(g, "concatenate needs at least one operand");
    return -1;
  }
  if (!graph_inputs_ok(g, xs, n)) return -1;
  graph_shape out = *graph_shape_at(g, xs[0]);
  if (dim < 0 || dim >= out.rank) {
    graph_mismatch(g, GOP_CONCAT, "dimension out of range", &out, &out);
    return -1;
  }
  for (int i = 1; i < n; i++) {
    const graph_shape *s = graph_shape_at(g, xs[i]);
    bool ok = s->rank == out.rank && s->dtype == out.dtype;
    for (int d = 0; ok && d < s->rank; d++)
      if (d != dim && s->dim[d] != out.dim[d]) ok = false;
    if (!ok) {
      graph_mismatch(g, GOP_CONCAT, "operands differ outside the concatenated dimension",
               graph_shape_at(g, xs[0]), s);
      return -1;
    }
    out.dim[dim] += s->dim[dim];
  }
  int id = graph_add(g, GOP_CONCAT, out, xs, n);
  if (id >= 0) g->ops[id].dims = graph_dims_of(1, dim);
  return id;
}

int graph_slice(graph *g, int x, const int64_t *start, const int64_t *limit,
                const int64_t *stride) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
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
  int id = graph_add(g, GOP_SLICE, out, &x, 1); /* sx dangles from here on */
  if (id >= 0)
    for (int i = 0; i < out.rank; i++) {
      g->ops[id].lo[i] = start[i];
      g->ops[id].hi[i] = limit[i];
      g->ops[id].step[i] = stride ? stride[i] : 1;
    }
  return id;
}

int graph_dynamic_slice(graph *g, int x, graph_shape out) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  out.dtype = sx->dtype;
  bool ok = out.rank == sx->rank;
  for (int i = 0; ok && i < out.rank; i++)
    if (out.dim[i] > sx->dim[i]) ok = false;
  if (!ok) {
    graph_mismatch(g, GOP_DYNAMIC_SLICE, "slice larger than the operand", sx, &out);
    return -1;
  }
  return graph_add(g, GOP_DYNAMIC_SLICE, out, &x, 1);
}

int graph_dynamic_update_slice(graph *g, int x, int update) {
  int ins[2] = {x, update};
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *sx = graph_shape_at(g, x), *su = graph_shape_at(g, update);
  bool ok = su->rank == sx->rank && su->dtype == sx->dtype;
  for (int i = 0; ok && i < su->rank; i++)
    if (su->dim[i] > sx->dim[i]) ok = false;
  if (!ok) {
    graph_mismatch(g, GOP_DYNAMIC_UPDATE_SLICE, "update must fit in the operand", sx, su);
    return -1;
  }
  return graph_add(g, GOP_DYNAMIC_UPDATE_SLICE, *sx, ins, 2);
}

int graph_pad(graph *g, int x, const int64_t *lo, const int64_t *hi, const int64_t *interior) {
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
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
  int id = graph_add(g, GOP_PAD, out, &x, 1); /* sx dangles from here on */
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
  if (!graph_inputs_ok(g, ins, 2)) return -1;
  const graph_shape *st = graph_shape_at(g, table), *si = graph_shape_at(g, indices);
  if (!is_index_type(si->dtype)) {
    graph_mismatch(g, GOP_GATHER, "indices must be integers", st, si);
    return -1;
  }
  graph_shape out;
  if (given) {
    out = *given;
    out.dtype = st->dtype;
  } else {
    if (st->rank < 1 || si->rank + st->rank - 1 > GRAPH_MAX_RANK) {
      graph_mismatch(g, GOP_GATHER, "embedding lookup needs a table [V, ...] and indices", st, si);
      return -1;
    }
    out = *si;
    out.dtype = st->dtype;
    for (int i = 1; i < st->rank; i++) out.dim[out.rank++] = st->dim[i];
  }
  return graph_add(g, GOP_GATHER, out, ins, 2);
}

bool graph_scatter_fits(const graph_shape *so, const graph_shape *si, const graph_shape *su) {
  return graph_elements(su) / (graph_elements(si) ? graph_elements(si) : 1) <= graph_elements(so);
}

int graph_scatter(graph *g, int operand, int indices, int updates) {
  int ins[3] = {operand, indices, updates};
  if (!graph_inputs_ok(g, ins, 3)) return -1;
  const graph_shape *so = graph_shape_at(g, operand), *si = graph_shape_at(g, indices),
                    *su = graph_shape_at(g, updates);
  if (!is_index_type(si->dtype) || su->dtype != so->dtype || !graph_scatter_fits(so, si, su)) {
    graph_mismatch(g, GOP_SCATTER, "updates must be rows of the operand, indices integers", so, su);
    return -1;
  }
  return graph_add(g, GOP_SCATTER, *so, ins, 3);
}

int graph_collective(graph *g, graph_op_kind k, int x, int64_t group, int dim) {
  if (GRAPH_OPS[k].cls != C_COLL) {
    graph_error(g, "%s is not a collective", GRAPH_OPS[k].name);
    return -1;
  }
  if (!graph_inputs_ok(g, &x, 1)) return -1;
  const graph_shape *sx = graph_shape_at(g, x);
  if (group < 1) {
    graph_error(g, "%s: replica group of %lld chips", GRAPH_OPS[k].name, (long long)group);
    return -1;
  }
  graph_shape out = *sx;
  bool uses_dim = k == GOP_ALL_GATHER || k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL;
  if (uses_dim && (dim < 0 || dim >= sx->rank)) {
    graph_mismatch(g, k, "dimension out of range", sx, sx);
    return -1;
  }
  if (k == GOP_ALL_GATHER) out.dim[dim] *= group;
  if (k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL) {
    if (sx->dim[dim] % group != 0) {
      graph_mismatch(g, k, "dimension not divisible by the group size", sx, sx);
      return -1;
    }
    if (k == GOP_REDUCE_SCATTER) out.dim[dim] /= group;
  }
  int id = graph_add(g, k, out, &x, 1);
  if (id >= 0) {
    g->ops[id].group_size = group;
    g->ops[id].dims = graph_dims_of(1, uses_dim ? dim : 0);
  }
  return id;
}

int graph_custom(graph *g, const char *target, graph_shape out, const int *ins, int n_in,
                 double flops, double trans, double bytes) {
  if (!graph_inputs_ok(g, ins, n_in)) return -1;
  if (!(flops >= 0) || !(trans >= 0) || !(bytes >= 0)) {
    graph_error(g, "custom-call %s: negative or invalid cost", target);
    return -1;
  }
  int id = graph_add(g, GOP_CUSTOM, out, ins, n_in);
  if (id >= 0) {
    graph_op *op = &g->ops[id];
    op->custom_flops = flops;
    op->custom_transcendentals = trans;
    op->custom_bytes = bytes;
    free(op->name);
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", g->scope, *g->scope ? "/" : "", target);
    op->name = graph_dupstr(name);
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

