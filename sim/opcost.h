/*
** opcost.h -- what each kernel costs, read off its lowered IR, cached by
** signature.
**
** The simulator times every kernel the fusion pass forms (sim/fuse.h).
** Its flops, transcendentals and HBM bytes come from here: the kernel is
** lowered to LLVM IR (sim/lower.h) and lower_op_cost counts what the IR
** does. Kernels of one structure over one set of shapes and attributes --
** one signature -- are lowered once per cache, however many layers,
** micro-batches, plans or threads ask: a model's step has ~10^4 kernels
** but ~10^2 signatures.
**
** A kernel the lowering does not take -- a custom-call (opaque, with
** declared costs), a collective, a value of a dtype it does not lower --
** keeps the fusion pass's cost (fuse_group_cost), and is counted as such.
** So is every kernel with OPCOST_FORMULA: the graph's exact formulas,
** which the IR count equals for every kind (tests/test_lower.c); an IR
** count that differs from them is counted too (`differ`), as `tpusim
** lower` reports it, so a lowering bug shows instead of moving a number.
**
** An opcost is safe to share between threads: a mutex guards the table,
** and each lowering takes an LLVM module of its own from a pool, so threads
** lower different kernels at once. It owns its entries and modules;
** opcost_free frees them.
*/
#ifndef TPUSIM_OPCOST_H
#define TPUSIM_OPCOST_H

#include <stddef.h>
#include <stdint.h>

#include "fuse.h"
#include "../workloads/graph.h"

typedef enum { OPCOST_IR, OPCOST_FORMULA } opcost_source;

typedef struct opcost opcost;

typedef struct {
  int64_t asked;    /* kernels costed */
  int64_t lowered;  /* distinct signatures lowered and counted */
  int64_t hits;     /* served from the cache (a signature two threads lowered at once
                       counts once as lowered, once as a hit: the counts do not
                       depend on the threads' timing) */
  int64_t declared; /* kept the fusion pass's cost: not lowerable, or OPCOST_FORMULA */
  int64_t differ;   /* lowered kernels whose IR count differs from fuse_group_cost */
} opcost_stats;

opcost *opcost_new(opcost_source src);
void opcost_free(opcost *c);
opcost_source opcost_source_of(const opcost *c);

/* The cost of one execution of kernel k of p over g. 0, or -1 with err
** (out of memory). */
int opcost_kernel(opcost *c, const graph *g, const fuse_plan *p, int k, graph_cost *out,
                  char *err, size_t errn);

opcost_stats opcost_get_stats(opcost *c);

/* "dot bf16[8,4096] bf16[4096,1024] -> bf16[8,1024] {b c1|b c0}": kind,
** operand and result shapes, and the attributes that change what the op
** does (dimension numbers, reduced dims, slice bounds, convolution
** windows, custom-call target and declared costs). */
void opcost_op_signature(const graph *g, int id, char *buf, size_t n);

/* A kernel's signature: its ops' signatures in order, each operand named
** as an op of the kernel (@i) or an outside value ($j, in order of first
** use). false when it does not fit in buf. */
bool opcost_kernel_signature(const graph *g, const int *ops, int n, char *buf, size_t cap);

#endif
