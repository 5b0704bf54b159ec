/*
** graph_cost.c -- the cost formulas: graph_op_cost (flops, transcendentals
** and bytes of one op, from its shapes), totals, comparisons and the op's
** one-line description.
**
** Separate from the builders (graph_build.c): costs read a built graph and
** never change it; the conventions are in docs/workloads.md.
*/
#include "graph_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- costs ---- */

graph_cost graph_op_cost(const graph *g, int id) {
  graph_cost c = {0};
  const graph_op *op = &g->ops[id];
  double out_b = graph_bytes(&op->out);
  double out_n = (double)graph_elements(&op->out);
  double in_b = 0;
  for (int i = 0; i < op->n_in; i++) in_b += graph_bytes(graph_shape_at(g, op->in[i]));
  const graph_shape *s0 = op->n_in ? graph_shape_at(g, op->in[0]) : &op->out;

  switch (GRAPH_OPS[op->kind].cls) {
  case C_SRC:
    if (op->kind == GOP_IOTA) c.bytes_written = out_b;
    break;
  case C_UNARY:
  case C_BINARY:
  case C_TERNARY: {
    /* arithmetic runs in the operands' type (compare's output is pred) */
    graph_dtype dt = op->kind == GOP_SELECT ? op->out.dtype : s0->dtype;
    c.flops[dt] = GRAPH_OPS[op->kind].flops * out_n;
    c.transcendentals = GRAPH_OPS[op->kind].trans * out_n;
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
    const graph_shape *sk = graph_shape_at(g, op->in[1]);
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
      c.bytes_read = graph_bytes(graph_shape_at(g, op->in[1]));
      c.bytes_written = c.bytes_read;
      break;
    case GOP_GATHER: /* the rows fetched, not the table */
      c.bytes_read = out_b + graph_bytes(graph_shape_at(g, op->in[1]));
      c.bytes_written = out_b;
      break;
    case GOP_SCATTER: { /* read-modify-write of the rows touched */
      double upd = graph_bytes(graph_shape_at(g, op->in[2]));
      c.flops[op->out.dtype] = (double)graph_elements(graph_shape_at(g, op->in[2]));
      c.bytes_read = 2 * upd + graph_bytes(graph_shape_at(g, op->in[1]));
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

/* The parameters holding every flag of need: their elements, or their
** bytes (each at its dtype's size, a sub-byte format's fraction kept;
** elements stay exact in a double far past any model's 2^53). */
static double param_sum(const graph *g, unsigned need, bool bytes) {
  double n = 0;
  for (int i = 0; i < g->n; i++) {
    const graph_op *op = &g->ops[i];
    if (op->kind == GOP_PARAMETER && (op->flags & need) == need)
      n += bytes ? graph_bytes(&op->out) : (double)graph_elements(&op->out);
  }
  return n;
}

int64_t graph_param_elements(const graph *g, unsigned need) {
  return (int64_t)param_sum(g, need, false);
}

double graph_param_bytes(const graph *g, unsigned need) { return param_sum(g, need, true); }

void graph_op_str(const graph *g, int id, char *buf, size_t n) {
  const graph_op *op = &g->ops[id];
  char s[160];
  graph_shape_str(&op->out, s, sizeof s);
  snprintf(buf, n, "%s %s (%s)", GRAPH_OPS[op->kind].name, s, op->name);
}

