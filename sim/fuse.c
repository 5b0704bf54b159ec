/*
** fuse.c -- see fuse.h.
*/
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

static bool loop_fusible(graph_op_kind k) {
  return graph_op_is_elementwise(k) || k == GOP_BROADCAST || k == GOP_RESHAPE;
}

/* Whether op may join producer pr's group under one of the three rules. */
static bool rule_allows(const graph *g, const graph_op *op, int pr) {
  const graph_op *po = graph_get(g, pr);
  if (po->phase != op->phase || po->count != op->count) return false;
  bool ew = loop_fusible(op->kind);
  bool same_n = graph_elements(&po->out) == graph_elements(&op->out);
  if (ew && loop_fusible(po->kind) && same_n) return true;                    /* loop */
  if (op->kind == GOP_REDUCE && loop_fusible(po->kind)) return true;          /* input */
  if (ew && (po->kind == GOP_DOT || po->kind == GOP_CONV) && same_n) return true; /* output */
  return false;
}

/* A broadcast (or iota) computed on its own for one user: XLA fuses it
** into that user, so the broadcast value never exists in HBM. */
static bool absorbable(const fuse_plan *p, const graph *g, const int *users, int pr,
                       const graph_op *op) {
  const graph_op *po = graph_get(g, pr);
  int qg = p->group_of[pr];
  return qg >= 0 && p->size[qg] == 1 && users[pr] == 1 &&
         (po->kind == GOP_BROADCAST || po->kind == GOP_IOTA) && po->phase == op->phase &&
         po->count == op->count;
}

fuse_plan *fuse_graph(const graph *g, bool enabled) {
  int n = graph_count(g);
  size_t sz = (size_t)n + 1;
  fuse_plan *p = calloc(1, sizeof *p);
  int *users = calloc(sz, sizeof(int));
  if (!p || !users) goto fail;
  p->n_ops = n;
  p->group_of = malloc(sizeof(int) * sz);
  p->root = malloc(sizeof(int) * sz);
  p->first = malloc(sizeof(int) * sz);
  p->size = calloc(sz, sizeof(int));
  p->leaves = calloc(sz, 1);
  if (!p->group_of || !p->root || !p->first || !p->size || !p->leaves) goto fail;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    for (int j = 0; j < op->n_in; j++) users[op->in[j]]++;
  }
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    p->group_of[i] = -1;
    if (op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT) continue;
    int join = -1;
    /* a dot's or convolution's epilogue first, then loop and input fusion */
    for (int pass = 0; enabled && pass < 2 && join < 0; pass++)
      for (int j = 0; j < op->n_in && join < 0; j++) {
        int pr = op->in[j], pg = p->group_of[pr];
        graph_op_kind pk = graph_get(g, pr)->kind;
        if ((pass == 0) != (pk == GOP_DOT || pk == GOP_CONV)) continue;
        /* Joining only through a producer whose one user is this op keeps
        ** every member but the root consumed inside its group: a group has
        ** one output, so no other group can read it early and kernels can
        ** never form a cycle. */
        if (pg >= 0 && users[pr] == 1 && rule_allows(g, op, pr)) join = pg;
      }
    if (join < 0) {
      join = p->n_groups++;
      p->first[join] = i;
    }
    p->group_of[i] = join;
    p->root[join] = i;
    p->size[join]++;
    for (int j = 0; enabled && j < op->n_in; j++) {
      int q = op->in[j], qg = p->group_of[q];
      if (qg == join || !absorbable(p, g, users, q, op)) continue;
      p->size[qg] = 0; /* emptied: skipped from here on */
      p->group_of[q] = join;
      p->size[join]++;
      if (q < p->first[join]) p->first[join] = q;
    }
  }
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    for (int j = 0; j < op->n_in; j++)
      if (p->group_of[op->in[j]] != p->group_of[i]) p->leaves[op->in[j]] = 1;
    if (users[i] == 0) p->leaves[i] = 1;
  }
  free(users);
  return p;
fail:
  free(users);
  fuse_free(p);
  return NULL;
}

void fuse_free(fuse_plan *p) {
  if (!p) return;
  free(p->group_of);
  free(p->root);
  free(p->first);
  free(p->size);
  free(p->leaves);
  free(p);
}

graph_cost fuse_group_cost(const fuse_plan *p, const graph *g, int k) {
  graph_cost c = {0};
  if (k < 0 || k >= p->n_groups || p->size[k] == 0) return c;
  for (int i = p->first[k]; i <= p->root[k]; i++) {
    if (p->group_of[i] != k) continue;
    const graph_op *op = graph_get(g, i);
    /* arithmetic as the ops alone; the bytes are the kernel's own */
    graph_cost oc = graph_op_cost(g, i);
    oc.bytes_read = oc.bytes_written = 0;
    graph_cost_add(&c, &oc, 1);
    /* a reshape alone is a bitcast; inside a kernel its consumers read
    ** its operand through it */
    if (op->kind == GOP_RESHAPE && p->size[k] == 1) continue;
    /* reads: each value from outside the group once */
    for (int j = 0; j < op->n_in; j++) {
      int pr = op->in[j];
      if (p->group_of[pr] == k) continue;
      bool seen = false;
      for (int j2 = 0; j2 < j; j2++) seen |= op->in[j2] == pr;
      for (int i2 = p->first[k]; i2 < i && !seen; i2++) {
        if (p->group_of[i2] != k) continue;
        const graph_op *o2 = graph_get(g, i2);
        for (int j2 = 0; j2 < o2->n_in; j2++) seen |= o2->in[j2] == pr;
      }
      if (!seen) c.bytes_read += graph_bytes(&graph_get(g, pr)->out);
    }
    if (p->leaves[i]) c.bytes_written += graph_bytes(&op->out);
  }
  return c;
}

graph_cost fuse_total_cost(const fuse_plan *p, const graph *g, int phase) {
  graph_cost t = {0};
  for (int k = 0; k < p->n_groups; k++) {
    if (p->size[k] == 0) continue;
    const graph_op *r = graph_get(g, p->root[k]);
    if (phase >= 0 && (int)r->phase != phase) continue;
    graph_cost c = fuse_group_cost(p, g, k);
    graph_cost_add(&t, &c, (double)r->count);
  }
  return t;
}
