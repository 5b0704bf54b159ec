/*
** optime.h -- how long one op takes on one chip.
**
** A roofline over the hardware model: the larger of compute time (padded,
** wave-quantized FLOPs on the matrix unit, or FLOPs and transcendentals on
** the vector unit, at the measured sustained efficiency) and memory time
** (bytes over the sustained HBM bandwidth), plus a fixed per-op overhead.
** Every formula, its source, and what is assumed when a hardware figure is
** absent are in docs/machine.md, "Time on a chip".
**
** Pure functions of (hardware, graph, op): no state, deterministic, safe to
** call from many threads. Collectives take no chip time here: the network
** model (sim/net, sim/coll) times them.
*/
#ifndef TPUSIM_OPTIME_H
#define TPUSIM_OPTIME_H

#include <stddef.h>
#include <stdint.h>

#include "../hw_models/hw.h"
#include "fuse.h"
#include "../workloads/graph.h"

typedef struct {
  double time_s;       /* max(compute_s, memory_s) + overhead_s */
  double compute_s;    /* on the matrix or vector unit, efficiency applied */
  double wave_s;       /* compute_s with its matrix part by the tile and wave
                          model alone, chip.matmul_shape not applied (grouped
                          expert GEMMs take their measured rates against it) */
  double memory_s;     /* HBM traffic at the sustained bandwidth */
  double overhead_s;   /* the chip's fixed per-op cost (0 for no-op ops) */
  double flops;        /* useful FLOPs (graph_op_cost) */
  double padded_flops; /* FLOPs the matrix unit executes after tile padding
                          (= flops for vector-unit work) */
  double bytes;        /* HBM bytes read + written */
  double efficiency;   /* flops / (time_s x the unit's peak): achieved fraction */
  const char *bound;   /* "compute", "memory", "overhead", "network", "none" */
  bool shape_table;    /* its matrix part timed by chip.matmul_shape: measured
                          kernel times hold a kernel's fixed cost, so the
                          launch overhead is added to the memory time only */
} optime_result;

/* One execution of op `id` of g on hw (graph_op.count is the caller's).
** Returns 0, or -1 with a message in err naming the op (kind and name) and
** the chip, e.g. "dot l0/attn/dot f64: tpu-v5p has no fp64 unit". */
int optime_op(const hw_model *hw, const graph *g, int id, optime_result *r, char *err, size_t errn);

/* One execution of kernel k of a fusion plan over g, from its cost `cost`
** (sim/opcost.h reads it off the kernel's IR; NULL takes fuse_group_cost:
** each outside value read once, the escaping value written once): its HBM
** traffic, and its arithmetic -- a member dot or convolution on
** the matrix unit as optime_op times it (padding and waves), every other
** member's FLOPs and transcendentals on the vector unit, in series with it
** (an epilogue's math runs on the tile the matrix unit just produced). One
** launch overhead for the kernel. A kernel of only a parameter, constant or
** collective takes no time here. */
int optime_kernel(const hw_model *hw, const graph *g, const fuse_plan *p, int k,
                  const graph_cost *cost, optime_result *r, char *err, size_t errn);

/* The chip's matrix-unit peak for arithmetic in dt (the bf16 rate for a
** dtype the schema has no rate for): what MFU is measured against. */
double optime_peak_flops(const hw_model *hw, graph_dtype dt);

/* batch independent [m x k] x [k x n] products in dtype dt (operands and
** result in dt), as one op: the matrix-unit path of optime_op with the
** operand and result traffic as its bytes. */
int optime_matmul(const hw_model *hw, int64_t batch, int64_t m, int64_t n, int64_t k,
                  graph_dtype dt, optime_result *r, char *err, size_t errn);

#endif
