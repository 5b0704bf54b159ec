/*
** fuse.c -- see fuse.h.
*/
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

/* A broadcast or iota: computed inside its consumers, never stored (XLA's
** and, as an expand, PyTorch's; torch.arange is a small kernel there,
** counted as free). */
static bool never_stored(graph_op_kind k) { return k == GOP_BROADCAST || k == GOP_IOTA; }

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
         never_stored(po->kind) && po->phase == op->phase &&
         po->count == op->count;
}

typedef enum { FUSE_NONE, FUSE_XLA, FUSE_EAGER } fuse_mode;

static fuse_plan *build(const graph *g, fuse_mode mode, bool duplicate);

fuse_plan *fuse_graph(const graph *g, bool enabled) {
  return build(g, enabled ? FUSE_XLA : FUSE_NONE, false);
}

fuse_plan *fuse_graph_dup(const graph *g) { return build(g, FUSE_XLA, true); }

fuse_plan *fuse_graph_eager(const graph *g) { return build(g, FUSE_EAGER, true); }

/* A view in eager PyTorch: a reshape or an expand is a new stride over the
** same storage, no kernel. */
static bool view(graph_op_kind k) { return k == GOP_RESHAPE || never_stored(k); }

/* Eager mode: op may join group k only inside one library kernel. comp[k]
** is the composite of the group's first op that is not a view (-2 while
** it holds views only); a view joins any group, costing nothing there. */
static bool eager_allows(const int *comp, int k, const graph_op *op) {
  if (view(op->kind) || comp[k] == -2) return true;
  return comp[k] >= 0 && comp[k] == op->composite;
}

/* XLA's InstructionFusion::IsExpensive as its GPU backend narrows it
** (GpuInstructionFusion::IsExpensive, openxla xla/service/gpu/transforms/
** instruction_fusion.cc): the transcendentals are expensive, except that
** divide, sqrt, rsqrt and exp on f32 or f16 elements are single fast
** hardware instructions, cheap enough to recompute. */
static bool cheap(const graph_op *op) {
  if (!graph_op_is_elementwise(op->kind)) return false;
  if (!graph_op_is_transcendental(op->kind)) return true;
  bool fast = op->kind == GOP_DIV || op->kind == GOP_SQRT || op->kind == GOP_RSQRT ||
              op->kind == GOP_EXP;
  return fast && (op->out.dtype == GDT_F32 || op->out.dtype == GDT_F16);
}

/* Marks the ops every consumer may recompute: cheap, every consumer a
** fusible op (so each kernel can take it in), and either read twice or
** more, or read only by ops that are recomputed themselves (XLA fuses
** consumers first, so a chain feeding a duplicated op goes with it). */
static void mark_dup(const graph *g, const int *users, unsigned char *dup, bool eager) {
  /* eager: only inside one library kernel, whose own code recomputes what
  ** it needs as XLA's would; an op some consumer outside its composite
  ** reads is stored */
  int n = graph_count(g);
  bool *bad = calloc((size_t)n + 1, sizeof *bad);    /* some consumer cannot take it in */
  bool *stored = calloc((size_t)n + 1, sizeof *stored); /* some consumer is not recomputed */
  if (!bad || !stored) {
    free(bad);
    free(stored);
    return;
  }
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    /* any phase: the backward's kernels recompute it as well */
    bool takes = loop_fusible(op->kind) || op->kind == GOP_REDUCE;
    for (int j = 0; j < op->n_in; j++) {
      const graph_op *q = graph_get(g, op->in[j]);
      bool apart = eager && !never_stored(q->kind) &&
                   (q->composite < 0 || q->composite != op->composite);
      if (!takes || apart) bad[op->in[j]] = true;
    }
  }
  for (int i = n - 1; i >= 0; i--) { /* consumers first */
    const graph_op *op = graph_get(g, i);
    /* a broadcast is never stored when its consumers can compute it; a
    ** cheap op with one consumer is fused the ordinary way */
    bool bcast = never_stored(op->kind);
    dup[i] = !bad[i] && users[i] >= 1 &&
             (bcast || (cheap(op) && (users[i] >= 2 || !stored[i])));
    for (int j = 0; j < op->n_in; j++)
      if (!dup[i]) stored[op->in[j]] = true;
  }
  /* Recomputing is worth it only while it moves no more bytes than
  ** storing would: each of u consumers re-reads the op's stored inputs
  ** R (through those recomputed in turn), u R, against a kernel of its own
  ** that reads R and writes the value V, which the consumers read: R + V +
  ** u V -- XLA's fusion merger weighs bytes the same way. Without this a
  ** chain of recomputed sums (a residual stream's gradient) would be
  ** re-read whole by every kernel downstream. */
  double *reads = calloc((size_t)n + 1, sizeof *reads);
  for (int i = 0; reads && i < n; i++) {
    const graph_op *op = graph_get(g, i);
    for (int j = 0; j < op->n_in; j++) {
      int q = op->in[j];
      reads[i] += dup[q] ? reads[q] : graph_bytes(&graph_get(g, q)->out);
    }
    if (dup[i] && op->kind != GOP_BROADCAST && op->kind != GOP_IOTA &&
        users[i] * reads[i] > reads[i] + (1 + users[i]) * graph_bytes(&op->out))
      dup[i] = 0;
  }
  free(reads);
  free(bad);
  free(stored);
}

static fuse_plan *build(const graph *g, fuse_mode mode, bool duplicate) {
  int n = graph_count(g);
  size_t sz = (size_t)n + 1;
  bool enabled = mode != FUSE_NONE, eager = mode == FUSE_EAGER;
  fuse_plan *p = calloc(1, sizeof *p);
  int *users = calloc(sz, sizeof(int));
  int *comp = eager ? malloc(sizeof(int) * sz) : NULL; /* per group: eager_allows */
  if (!p || !users || (eager && !comp)) goto fail;
  p->n_ops = n;
  p->group_of = malloc(sizeof(int) * sz);
  p->root = malloc(sizeof(int) * sz);
  p->first = malloc(sizeof(int) * sz);
  p->size = calloc(sz, sizeof(int));
  p->leaves = calloc(sz, 1);
  p->dup = calloc(sz, 1);
  if (!p->group_of || !p->root || !p->first || !p->size || !p->leaves || !p->dup) goto fail;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    for (int j = 0; j < op->n_in; j++) users[op->in[j]]++;
  }
  if (duplicate) mark_dup(g, users, p->dup, eager);
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    p->group_of[i] = -1;
    if (op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT || p->dup[i]) continue;
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
        if (pg >= 0 && users[pr] == 1 && rule_allows(g, op, pr) &&
            (!eager || eager_allows(comp, pg, op)))
          join = pg;
      }
    if (join < 0) {
      join = p->n_groups++;
      p->first[join] = i;
      if (eager) comp[join] = -2;
    }
    if (eager && comp[join] == -2 && !view(op->kind)) comp[join] = op->composite;
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
  free(comp);
  return p;
fail:
  free(users);
  free(comp);
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
  free(p->dup);
  free(p);
}

/* The values a kernel reads and the duplicated ops it recomputes, each
** once: a short list (kernels read a handful of values). */
typedef struct {
  int ids[64];
  int n;
  bool overflow;
} seen_set;

static bool seen_add(seen_set *s, int id) {
  for (int i = 0; i < s->n; i++)
    if (s->ids[i] == id) return false;
  if (s->n < 64) s->ids[s->n++] = id;
  else s->overflow = true; /* counted again: an upper bound */
  return true;
}

/* Group k reads value pr: a stored value's bytes, once; a duplicated op's
** arithmetic and, in its place, its own inputs. */
static void group_reads(const fuse_plan *p, const graph *g, int k, int pr, seen_set *s,
                        graph_cost *c) {
  if (p->group_of[pr] == k || !seen_add(s, pr)) return;
  if (p->dup[pr]) {
    graph_cost oc = graph_op_cost(g, pr);
    oc.bytes_read = oc.bytes_written = 0;
    graph_cost_add(c, &oc, 1);
    const graph_op *op = graph_get(g, pr);
    for (int j = 0; j < op->n_in; j++) group_reads(p, g, k, op->in[j], s, c);
    return;
  }
  c->bytes_read += graph_bytes(&graph_get(g, pr)->out);
}

static graph_cost group_cost_once(const fuse_plan *p, const graph *g, int k);

/* A kernel computes each of its ops at every index a consumer inside it
** asks for (once per index: a value two consumers read at one index is
** computed once, as XLA's fused emitter caches it), so an op under a
** broadcast is recomputed for each element the broadcast makes -- the
** price of not storing it. evals(root) = its elements; evals(m) = the
** largest demand of m's consumers c in the kernel: evals(c), times the
** elements c reads per element when c is a reduce. The arithmetic is then
** each op's flops x evals / its elements. */
graph_cost fuse_group_cost(const fuse_plan *p, const graph *g, int k) {
  int ops[1024];
  double evals[1024];
  int n = fuse_members(p, g, k, ops, 1024);
  /* a lone op is its own formula -- a slice or gather reads only what it
  ** takes -- unless it reads one value twice (x * x: loaded once) or is a
  ** bitcast (a reshape) */
  if (n == 1 && !graph_op_reads_twice(g, ops[0]) && graph_get(g, ops[0])->kind != GOP_RESHAPE)
    return graph_op_cost(g, ops[0]);
  graph_cost c = group_cost_once(p, g, k);
  if (n <= 1) return c; /* a lone op as above; or too many to weigh: each op once */
  for (int i = 0; i < n; i++) evals[i] = 0;
  evals[n - 1] = (double)graph_elements(&graph_get(g, ops[n - 1])->out);
  for (int i = n - 1; i >= 0; i--) {
    const graph_op *op = graph_get(g, ops[i]);
    double per = 1;
    if (op->kind == GOP_REDUCE && op->n_in > 0) {
      double out = (double)graph_elements(&op->out);
      per = out > 0 ? (double)graph_elements(&graph_get(g, op->in[0])->out) / out : 0;
    }
    for (int j = 0; j < op->n_in; j++) {
      int q = op->in[j], m;
      for (m = i - 1; m >= 0 && ops[m] != q; m--) {}
      if (m >= 0 && evals[i] * per > evals[m]) evals[m] = evals[i] * per;
    }
  }
  for (int t = 0; t < GDT_COUNT; t++) c.flops[t] = 0;
  c.transcendentals = 0;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    double el = (double)graph_elements(&op->out);
    graph_cost oc = graph_op_cost(g, ops[i]);
    double w = el > 0 ? evals[i] / el : 0;
    for (int t = 0; t < GDT_COUNT; t++) c.flops[t] += oc.flops[t] * w;
    c.transcendentals += oc.transcendentals * w;
  }
  return c;
}

static graph_cost group_cost_once(const fuse_plan *p, const graph *g, int k) {
  graph_cost c = {0};
  if (k < 0 || k >= p->n_groups || p->size[k] == 0) return c;
  seen_set s = {.n = 0};
  for (int i = p->first[k]; i <= p->root[k]; i++) {
    if (p->group_of[i] != k) continue;
    const graph_op *op = graph_get(g, i);
    /* arithmetic as the ops alone; the bytes are the kernel's own */
    graph_cost oc = graph_op_cost(g, i);
    oc.bytes_read = oc.bytes_written = 0;
    graph_cost_add(&c, &oc, 1);
    /* a reshape alone is a bitcast of a stored value; inside a kernel its
    ** consumers read its operand through it; of a recomputed value, it is
    ** where that value is computed and stored */
    if (op->kind == GOP_RESHAPE && p->size[k] == 1 && !p->dup[op->in[0]]) continue;
    /* reads: each value from outside the group once */
    for (int j = 0; j < op->n_in; j++) group_reads(p, g, k, op->in[j], &s, &c);
    if (p->leaves[i]) c.bytes_written += graph_bytes(&op->out);
  }
  return c;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Adds the duplicated producers op v reads, recursively, once each. */
static int add_dup_inputs(const fuse_plan *p, const graph *g, int v, int *out, int n, int cap) {
  const graph_op *op = graph_get(g, v);
  for (int j = 0; j < op->n_in && n >= 0; j++) {
    int q = op->in[j];
    if (!p->dup[q]) continue;
    bool seen = false;
    for (int i = 0; i < n && !seen; i++) seen = out[i] == q;
    if (seen) continue;
    if (n == cap) return -1;
    out[n++] = q;
    n = add_dup_inputs(p, g, q, out, n, cap);
  }
  return n;
}

int fuse_members(const fuse_plan *p, const graph *g, int k, int *out, int cap) {
  if (k < 0 || k >= p->n_groups || p->size[k] == 0) return 0;
  int n = 0;
  for (int i = p->first[k]; i <= p->root[k]; i++) {
    if (p->group_of[i] != k) continue;
    if (n == cap) return -1;
    out[n++] = i;
  }
  int members = n;
  for (int i = 0; i < members && n >= 0; i++) n = add_dup_inputs(p, g, out[i], out, n, cap);
  if (n < 0) return -1;
  qsort(out, (size_t)n, sizeof *out, cmp_int);
  return n;
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

fuse_summary fuse_summarize(const graph *g, const fuse_plan *fused) {
  fuse_summary s = {0};
  fuse_plan *off = fuse_graph(g, false);
  const fuse_plan *on = fused ? fused : off;
  if (on && off) {
    for (int k = 0; k < on->n_groups; k++) s.kernels += on->size[k] > 0;
    for (int k = 0; k < off->n_groups; k++) s.ops += off->size[k] > 0;
    graph_cost a = fuse_total_cost(on, g, -1), b = fuse_total_cost(off, g, -1);
    s.hbm_bytes = a.bytes_read + a.bytes_written;
    s.unfused_hbm_bytes = b.bytes_read + b.bytes_written;
  }
  fuse_free(off);
  return s;
}
