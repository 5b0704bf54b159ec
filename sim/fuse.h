/*
** fuse.h -- XLA-style fusion decisions over a graph.
**
** Which ops run as one kernel, so that the values passed between them stay
** in registers or on-chip memory instead of making a round trip through
** HBM. The rules follow XLA's (docs/op-models.md):
**
**   loop fusion    an elementwise op (or broadcast) joins the group of an
**                  elementwise producer of the same element count;
**   input fusion   a reduce joins the group of its elementwise producer;
**   output fusion  an elementwise consumer joins a dot's or convolution's
**                  group as its epilogue (bias, activation);
**   broadcasts     a broadcast or iota with one user is computed inside
**                  that user's kernel, never stored.
**
** A producer joins its consumer's group only when that consumer is its one
** user -- otherwise its value must reach HBM anyway, and fusing would
** recompute it. Ops in one group share phase and execution count.
**
** fuse_plan owns its arrays; the graph must outlive it.
*/
#ifndef TPUSIM_FUSE_H
#define TPUSIM_FUSE_H

#include <stdbool.h>

#include "../workloads/graph.h"

typedef struct {
  int n_ops;
  int n_groups;
  /* per op, with duplication on: a cheap op every consumer recomputes
  ** inside its own kernel (never stored; its group_of is -1) */
  unsigned char *dup;
  int *group_of; /* per op: its group, or -1 for parameters and constants */
  int *root;     /* per group: the op whose result the group is named by (its last op) */
  int *first;    /* per group: its first op */
  int *size;     /* per group: how many ops it holds (0: merged away) */
  unsigned char *leaves; /* per op: its value is read outside its group, or by nobody */
} fuse_plan;

/* enabled == false: one group per op (what --no-fusion means). NULL on
** allocation failure. */
fuse_plan *fuse_graph(const graph *g, bool enabled);

/* As fuse_graph, and XLA's producer duplication: a broadcast, iota, or
** cheap elementwise op (not exp, log, tanh, logistic, gelu, silu, rsqrt,
** sqrt, sin, cos, pow -- XLA's "expensive" ones) whose consumers are all
** fusible (elementwise, broadcast, reduce; in any phase) is
** recomputed inside each consumer's kernel instead of being stored: each
** kernel reads the duplicated op's inputs and repeats its arithmetic. */
fuse_plan *fuse_graph_dup(const graph *g);
/* The kernels of PyTorch without a graph compiler (eager mode): every op
** its own kernel, except the ops of one library kernel (graph_op.composite:
** F.layer_norm, F.softmax, F.cross_entropy, a linear layer's addmm, a batch
** norm), which fuse among themselves by the rules above, duplication
** included (what XLA would make of the library call alone: a few kernels
** where the library runs one); views (reshape, expand) are never stored.
** What torch.compile or XLA would fuse across those boundaries (a norm
** written as Python ops, an activation into its GEMM) is a kernel each, its
** values through HBM. */
fuse_plan *fuse_graph_eager(const graph *g);
void fuse_free(fuse_plan *p);

/* The cost of group k run as one kernel, per execution: its ops' flops and
** transcendentals, the bytes of values read from outside the group (each
** once), and the bytes of values the group produces that something outside
** it reads (or that nothing reads: a step output). A duplicated producer
** counts as part of every group that reads it: its arithmetic, and its own
** inputs read in its place. */
graph_cost fuse_group_cost(const fuse_plan *p, const graph *g, int k);

/* The ops kernel k runs, in graph order, its root last: the group's
** members and every duplicated producer it recomputes (through chains of
** them). Writes at most cap ids to out; returns the count, or -1 when they
** do not fit. What sim/lower.h's lower_fused takes. */
int fuse_members(const fuse_plan *p, const graph *g, int k, int *out, int cap);

/* Sum over groups of cost x execution count, for one phase (-1: all). */
graph_cost fuse_total_cost(const fuse_plan *p, const graph *g, int phase);

/* What fusion does to a step: the kernels of `fused` (NULL: unfused, one
** op a kernel, as --no-fusion) and the ops they come from (the groups of
** fuse_graph(g, false)), and the HBM bytes per step (read + written, over
** all phases) of each. All zero when memory runs out. */
typedef struct {
  int kernels, ops;
  double hbm_bytes, unfused_hbm_bytes;
} fuse_summary;

fuse_summary fuse_summarize(const graph *g, const fuse_plan *fused);

#endif
