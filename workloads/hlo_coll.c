/*
** hlo_coll.c -- collectives and point-to-point transfers: all-reduce,
** all-gather, reduce-scatter, all-to-all, collective-permute, send/recv,
** infeed, their async start/done pairs, and the replica-group sizes read from
** every notation XLA writes.
**
** Separate from the array handlers (hlo_ops.c): a collective's cost depends
** on its group, which has its own syntax to parse and check.
*/
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- collectives ---- */

/* Group sizes beyond this are typos, not machines. */
#define HLO_MAX_GROUP (1LL << 32)

/* {{0,1,2,3},{4,5,6,7}}: the size of the first group; {} is 0. */
static int64_t groups_listed(hlo_str v) {
  const char *in = memchr(v.s + 1, '{', (size_t)v.n - 1);
  if (!in) return 0;
  int64_t n = 0;
  for (const char *q = in + 1; q < v.s + v.n; q++) {
    if (*q == '}') return n;
    if (isdigit((unsigned char)*q) && !isdigit((unsigned char)q[-1]))
      n++;
    else if (!isdigit((unsigned char)*q) && *q != ',' && *q != ' ')
      return -1;
  }
  return -1;
}

/* [2,4]<=[8] (or <=[4,2]T(1,0)): groups are the rows, size the last dim. */
static int64_t groups_iota(hlo_str v) {
  const char *close = memchr(v.s, ']', (size_t)v.n);
  int64_t dims[GRAPH_MAX_RANK];
  int n =
      close ? hlo_parse_ints((hlo_str){v.s + 1, (int)(close - v.s - 1)}, dims, GRAPH_MAX_RANK) : -1;
  return n < 1 ? -1 : dims[n - 1];
}

/* mesh['x'=2,'y'=4] {'y'}: the product of the grouped axes' sizes. */
static int64_t groups_mesh(hlo_str v) {
  const char *end = v.s + v.n, *close = memchr(v.s, ']', (size_t)v.n);
  const char *open = close ? memchr(close, '{', (size_t)(end - close)) : NULL;
  if (!open) return -1;
  int64_t size = 1;
  for (const char *q = open; q < end && *q != '}'; q++) {
    const char *e = *q == '\'' ? memchr(q + 1, '\'', (size_t)(end - q - 1)) : NULL;
    if (!e) continue;
    char axis[64];
    snprintf(axis, sizeof axis, "%.*s=", (int)(e - q + 1), q); /* 'axis_0'= */
    const char *def = hlo_span_find((hlo_str){v.s, (int)(close - v.s)}, axis);
    int64_t k = def ? strtoll(def + strlen(axis), NULL, 10) : -1;
    if (k < 1 || size > HLO_MAX_GROUP / k) return -1;
    size *= k;
    q = e;
  }
  return size;
}

/* Devices in each replica group, from any of the three forms; 0 when the
** groups are absent or empty, -1 after an error. */
static int64_t group_size(hlo_ctx *x) {
  const hlo_attr *a = hlo_attr_get(x->in, "replica_groups");
  if (!a || a->val.n == 0) return 0;
  hlo_str v = a->val;
  int64_t g = v.s[0] == '{'                              ? groups_listed(v)
              : v.s[0] == '['                            ? groups_iota(v)
              : v.n >= 5 && memcmp(v.s, "mesh[", 5) == 0 ? groups_mesh(v)
                                                         : -1;
  if (g < 0 || g > HLO_MAX_GROUP)
    return hlo_berr(x, "replica_groups=%.*s: not a list, iota or mesh form this importer reads",
                    v.n, v.s),
           -1;
  return g;
}

/* Absent or empty groups mean every participant: the replicas, times the
** partitions when the op crosses partitions (it has a channel_id). */
static int64_t default_group(hlo_ctx *x) {
  const hlo_module *m = x->b->m;
  return m->replica_count * (hlo_attr_get(x->in, "channel_id") ? m->num_partitions : 1);
}

/* The written shape of result i of an op with n results (after F_PAIR). */
static const graph_shape *result_shape(hlo_ctx *x, const hlo_shape *s, int i, int n) {
  if (n > 1) s = i < s->n ? &s->el[i] : NULL;
  if (!s || s->n >= 0) {
    hlo_berr(x, "the written result does not have an array for operand %d", i);
    return NULL;
  }
  return &s->arr;
}

/* With empty groups, all-gather and reduce-scatter still give their group
** size away: the gathered (scattered) dimension grows (shrinks) by it. */
static int64_t group_from_shapes(graph_op_kind k, const graph_shape *in, const graph_shape *out,
                                 int d) {
  if ((k != GOP_ALL_GATHER && k != GOP_REDUCE_SCATTER) || d >= in->rank || d >= out->rank) return 0;
  int64_t big = k == GOP_ALL_GATHER ? out->dim[d] : in->dim[d];
  int64_t small = k == GOP_ALL_GATHER ? in->dim[d] : out->dim[d];
  return small > 0 && big % small == 0 ? big / small : 0;
}

/* One graph collective per operand, results shaped like out. */
static hlo_val *collective(hlo_ctx *x, graph_op_kind k, const hlo_shape *out) {
  int64_t g = group_size(x);
  if (g < 0) return NULL;
  graph_dims d = {0};
  if ((k == GOP_ALL_GATHER || k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL) &&
      (!hlo_attr_dims(x, "dimensions", &d, true) || d.n != 1))
    return x->b->failed ? NULL : hlo_berr(x, "dimensions= must name one dimension");
  hlo_val *t = x->n > 1 ? hlo_val_tuple(x->b, x->n) : NULL;
  if (x->n > 1 && !t) return hlo_oom(x);
  for (int i = 0; i < x->n; i++) {
    int a = hlo_leaf(x, i);
    const graph_shape *o = a < 0 ? NULL : result_shape(x, out, i, x->n);
    if (!o) return NULL;
    int64_t gi = g ? g : group_from_shapes(k, hlo_leaf_shape(x, a), o, d.d[0]);
    if (gi == 0) gi = default_group(x);
    hlo_val *v = hlo_val_new(x->b, graph_collective(x->b->g, k, a, gi, d.d[0]));
    if (!v || x->n == 1) return v;
    t->el[i] = v;
  }
  return t;
}

/* The operands as one value: the array, or a tuple of them. */
static hlo_val *operands_val(hlo_ctx *x) { return x->n == 1 ? x->ops[0] : hlo_h_tuple(x); }

/* all-reduce, all-gather, reduce-scatter, all-to-all with dimensions=, and
** their async -start forms (F_PAIR: written (operands, results)). */
hlo_val *hlo_h_collective(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  bool pair = (x->row->flags & F_PAIR) && s->n >= 2;
  graph_op_kind k = (graph_op_kind)x->row->kind;
  /* tuple all-to-all (no dimensions=): each operand is one peer's chunk */
  if (k == GOP_ALL_TO_ALL && !hlo_attr_get(x->in, "dimensions")) k = GOP_COLLECTIVE_PERMUTE;
  hlo_val *r = collective(x, k, pair ? &s->el[1] : s);
  if (!r || !pair) return r;
  hlo_val *known[2] = {operands_val(x), r};
  return known[0] ? hlo_fill_like(x, known, 2) : NULL;
}

hlo_val *hlo_h_done(hlo_ctx *x) {
  hlo_val *v = x->ops[0];
  if ((x->row->flags & F_SAME) || v->n < 2) return v;
  return v->el[1];
}

/* collective-permute: the group is the devices named in the pairs. */
hlo_val *hlo_h_permute(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = hlo_attr_get(x->in, "source_target_pairs");
  int64_t ids[2048];
  int n = 0, distinct = 0;
  if (at_) {
    hlo_str v = at_->val;
    for (int i = 0; i < v.n && n < 2048; i++) {
      if (!isdigit((unsigned char)v.s[i]) || (i && isdigit((unsigned char)v.s[i - 1]))) continue;
      ids[n++] = strtoll(v.s + i, NULL, 10);
    }
  }
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      dup = ids[j] == ids[i];
    distinct += !dup;
  }
  int64_t g = at_ ? (distinct ? distinct : 1) : group_size(x);
  if (g < 0) return NULL;
  if (g == 0) g = default_group(x);
  const hlo_shape *s = &x->in->shape;
  bool pair = (x->row->flags & F_PAIR) && s->n >= 2;
  hlo_val *r = hlo_val_new(x->b, graph_collective(x->b->g, GOP_COLLECTIVE_PERMUTE, a, g, 0));
  if (!r || !pair) return r;
  hlo_val *known[2] = {x->ops[0], r};
  return hlo_fill_like(x, known, 2);
}

/* send(data, token): the transfer, then context and token. */
hlo_val *hlo_h_send(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  hlo_val *r = a < 0 ? NULL : hlo_val_new(x->b, graph_collective(x->b->g, GOP_SEND, a, 2, 0));
  return r ? hlo_fill_like(x, &r, 1) : NULL;
}

/* recv(token): the graph's recv reads a buffer of the received shape. */
hlo_val *hlo_h_recv(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  if (s->n < 1 || s->el[0].n >= 0) return hlo_berr(x, "the result must be (array, context, token)");
  int buf = graph_constant(x->b->g, s->el[0].arr);
  hlo_val *r = hlo_val_new(x->b, graph_collective(x->b->g, GOP_RECV, buf, 2, 0));
  return r ? hlo_fill_like(x, &r, 1) : NULL;
}

hlo_val *hlo_h_recv_done(hlo_ctx *x) {
  hlo_val *v = x->ops[0];
  if (v->n < 1) return hlo_berr(x, "operand is not a recv");
  return hlo_fill_like(x, &v->el[0], 1);
}

/* infeed: data fed each step, as inputs. */
hlo_val *hlo_h_infeed(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  char nm[128];
  if (s->n != 2) return hlo_berr(x, "the result must be (data, token)");
  hlo_val *data = hlo_make_leaves(x, &s->el[0], GRAPH_INPUT, hlo_inst_name(x->in, nm, sizeof nm));
  return data ? hlo_fill_like(x, &data, 1) : NULL;
}

