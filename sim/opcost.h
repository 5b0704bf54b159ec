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
#include "lower.h"
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

/* ---- the listing: every distinct op and kernel of a step, in one module ----
**
** What `tpusim lower` shows: each distinct op signature lowered once, as
** lower_op's function, and each distinct kernel of the fusion pass (two or
** more ops, every one lowerable) once, as one fused function keyed by
** opcost_kernel_signature -- all into one module the caller names, prints
** and optimizes, with the uses per signature. The costs are then read off
** with lower_op_cost(lm, entry.fn) and checked against graph_op_cost
** (ops) or fuse_group_cost(fp, g, entry.group) (kernels). */

typedef struct {
  int fn;          /* the function's index in lm (lower_fn_name, lower_op_cost) */
  int op;          /* an op: the first op of its signature; -1 for a kernel */
  int group;       /* a kernel: the first group (of fp) of its signature; -1 for an op */
  int n_ops;       /* a kernel: fp->size[group]; 1 for an op */
  int64_t uses;    /* executions per step, summed over the signature */
  char *signature; /* owned; NULL for a kernel whose signature did not fit (lowered each time) */
} opcost_entry;

typedef struct {
  opcost_entry *ops, *kernels; /* in order of first use; the ops' functions come first */
  int n_ops, n_kernels;
  /* ops not lowered (none counted with only_op): collectives (the network
  ** model's), custom-calls (declared costs), and others, the first one's
  ** reason in first_why; parameters and constants are not counted */
  int not_lowered, collectives, custom_calls;
  int kernels_not_lowered; /* kernels holding an op not lowered: they keep the pass's cost */
  char first_why[160];
} opcost_listing;

/* Lowers into lm every distinct op signature of g that lower_supported
** takes, then (fp not NULL; NULL is --no-fusion) every distinct kernel of
** fp of two or more ops that are all lowerable. only_op (NULL: all): the
** ops of that name only (lowered whether or not lower_supported takes
** them: the caller checks), and the kernels holding the last of them.
** 0, or -1 with err ("op 'X': ...", "fused kernel 'Y': ...") and *out
** empty; opcost_listing_free frees *out either way. */
int opcost_list(lower_module *lm, const graph *g, const fuse_plan *fp, const char *only_op,
                opcost_listing *out, char *err, size_t errn);
void opcost_listing_free(opcost_listing *l);

#endif
