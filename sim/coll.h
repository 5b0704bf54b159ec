/*
** coll.h -- collectives as transfers over the links of a net, timed on the
** event engine: all-reduce, reduce-scatter, all-gather, all-to-all,
** broadcast, send/recv; algorithms ring, bidirectional ring, per-dimension
** torus rings, double binary tree, hierarchical, NVLink SHARP (in-switch
** reduction) and Reduction Server.
**
** Sizes follow nccl-tests: all-reduce and broadcast move a buffer of
** `bytes` per chip; all-gather's `bytes` is the gathered result,
** reduce-scatter's the input; all-to-all's the buffer each chip sends.
*/
#ifndef TPUSIM_COLL_H
#define TPUSIM_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

typedef enum {
  COLL_ALL_REDUCE,
  COLL_REDUCE_SCATTER,
  COLL_ALL_GATHER,
  COLL_ALL_TO_ALL,
  COLL_BROADCAST,
  COLL_SEND_RECV,
  COLL_OP_COUNT
} coll_op;

typedef enum {
  COLL_AUTO, /* what a framework would pick on this network */
  COLL_RING,
  COLL_BIRING,
  COLL_TORUS,
  COLL_TREE,
  COLL_HIERARCHICAL,
  COLL_NVLS,
  COLL_REDUCTION_SERVER,
  COLL_DIRECT, /* all-to-all, send/recv: point to point */
  COLL_ALGO_COUNT
} coll_algo;

typedef struct {
  coll_op op;
  coll_algo algo;
  double bytes;
  int axis;               /* torus only: 0, 1 or 2 runs the collective along that axis
                             (every such ring at once); -1: over all chips */
  int64_t reducers;       /* Reduction Server: reducer hosts (0: as many as chips) */
  double reducer_bw;      /* their NIC, B/s one direction (0: the chips' scale-out NIC) */
  bool formula_only;      /* time_s is the closed form (formula_s): no events run */
  double max_events;      /* the most events this run may simulate, when the command's own
                             budget (a sweep's rows share one) has less left than
                             COLL_SIM_MAX_EVENTS (0: that) */
} coll_req;

typedef struct {
  double time_s;
  double algbw, busbw;  /* bytes / time, and nccl-tests' bus bandwidth */
  coll_algo algo;       /* the algorithm that ran (AUTO resolved) */
  int64_t events;       /* engine events: the simulation's size */
  double formula_s;     /* the closed form on an idle network */
  char formula[768];    /* that formula with its numbers, for --explain */
  /* "closed form: 1000000 chips exceed the simulation's limit of 16384":
  ** set when the simulation was over its budget (COLL_SIM_MAX_CHIPS,
  ** COLL_SIM_MAX_EVENTS) and time_s is formula_s; empty when simulated or
  ** when the caller asked for the closed form (formula_only). Also the
  ** first line of `formula`. */
  char note[128];
} coll_result;

/* The event simulation's budget; above either, coll_run answers with the
** closed form. Chips: the largest run it took before there was a limit
** (16,384 v5p in 4 slices, 9.4 million events, 1.3 s); the 24-bit chip
** field of its events allows 16.7 million. Events: 2^24, about 2 s at the
** engine's 7-8 million events per second on one core (make bench); a
** flat ring's events grow as 2 n^2, so it runs up to about 2,900 chips,
** the torus to 16,384. */
#define COLL_SIM_MAX_CHIPS 16384
#define COLL_SIM_MAX_EVENTS (1LL << 24)

/* Simulates one collective over every chip of n, or above the budget
** (COLL_SIM_MAX_*) answers with its closed form, saying so in `note`: O(n)
** in chips at worst (a flat ring's representative hops), O(ring) for the
** torus and hierarchical forms. Returns 0, or -1 with a message (an
** algorithm the network cannot run, zero bytes). */
int coll_run(const net *n, const coll_req *r, coll_result *out, char *err, size_t errn);

/* Point-to-point flows all started at time 0 (pairs[i] = {from, to}, each
** of `bytes`); *time_s is when the last arrives. For pipeline sends and
** for checking contention. Returns 0 or -1. */
int coll_flows(const net *n, const int64_t (*pairs)[2], int n_pairs, double bytes, double *time_s);

const char *coll_op_name(coll_op op);      /* "all-reduce" */
int coll_op_parse(const char *s);          /* -1 if unknown */
const char *coll_algo_name(coll_algo a);   /* "ring" */
int coll_algo_parse(const char *s);        /* -1 if unknown */
/* A Reduction Server's reducers are CPU VMs (Vertex AI recommends
** n1-highcpu-16): their NIC bandwidth and price an hour are the hardware
** entry's data (system.scale_out.reducer_bw_bytes_per_s and
** reducer_usd_per_hour, with their sources; 0 where the entry has none, and
** then no Reduction Server runs on it). */
double coll_rs_reducer_bw(const hw_model *hw);
double coll_rs_reducer_usd_per_h(const hw_model *hw);

/* The closed form of a Reduction Server all-reduce of `bytes` a worker over
** `chips` workers and `reducers` hosts with NICs of `reducer_bw` B/s (0:
** the entry's reducer VM; -1 when it has none): inside each GPU node (g GPUs) a
** reduce-scatter and an all-gather over NVLink, between them each GPU's
** S/g to the reducers and back: 2 x (g-1)(S/g / B_nvl + a_nvl) +
** max(S/g / B_w, n S/(g k B_r)) x (1 + 1/C) + 4a. The figure coll_run
** reports beside its simulation, for callers that cannot afford one. */
double coll_reduction_server_s(const hw_model *hw, int64_t chips, double bytes, int64_t reducers,
                               double reducer_bw);

/* The reducers (the entry's reducer VM, coll_rs_reducer_bw each) whose NICs
** together match the workers' (chips x their scale-out NIC): fewer and the
** reducers bind, more and they idle -- ceil(chips x B_w / B_r). 4
** a2-highgpu-8g hosts (32 x 1.5625e9 B/s) need 13. */
int64_t coll_rs_reducers_for(const hw_model *hw, int64_t chips);

/* The time of one collective over a group of `chips` of hw's network:
** `per_node` of them a node (0: the hardware's node), `slices` TPU slices
** joined by DCN (1: one), a Reduction Server of `reducers` hosts (0: none;
** it then runs that algorithm). `formula`: its closed form on an idle
** network instead of the link-level simulation (which adds the chunks'
** pipelining and contention between concurrent rings). 0 for fewer than
** 2 chips or no bytes; -1 with err. */
double coll_time_s(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op, double bytes,
                   int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                   size_t errn);

/* coll_time_s of a group spread over `slices` slices of a larger TPU
** machine (net_build_spread: chips / slices of it in each, any shape that
** fits; 1: within one slice or off a TPU), no Reduction Server. */
double coll_group_time_s(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op,
                         double bytes, int64_t slices, coll_algo algo, bool formula, char *err,
                         size_t errn);
/* coll_time_s over the whole machine of `slices` TPU slices of the given
** shape (one Cloud TPU offers: net_build_shaped), all chips one group. */
double coll_time_shaped_s(const hw_model *hw, int64_t chips, int64_t slices,
                          const int64_t shape[3], coll_op op, double bytes, coll_algo algo,
                          bool formula, char *err, size_t errn);
/* The offered slice shape (net_offered_shapes) whose all-reduce of `bytes`
** over all `chips` in `slices` slices takes least by the closed form
** (coll_time_shaped_s; a tie goes to the most cubic) into shape and its
** time into *time_s. Returns how many shapes were compared (0: none, off a
** torus or with no offered shape; shape untouched). */
#define COLL_MAX_SHAPES 64
int coll_best_shape(const hw_model *hw, int64_t chips, int64_t slices, double bytes,
                    coll_algo algo, int64_t shape[3], double *time_s);

/* A memo of coll_time_s for one hardware (a plan search asks the same few
** collectives thousands of times). Not shared between threads. */
typedef struct coll_memo coll_memo;
coll_memo *coll_memo_new(const hw_model *hw);
void coll_memo_free(coll_memo *m);
double coll_memo_time_s(coll_memo *m, int64_t chips, int64_t per_node, coll_op op, double bytes,
                        int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                        size_t errn);
double coll_memo_group_time_s(coll_memo *m, int64_t chips, int64_t per_node, coll_op op,
                              double bytes, int64_t slices, coll_algo algo, bool formula, char *err,
                              size_t errn);

/* The longest path net_path is asked for (a 24-long axis is 12 hops). */
#define COLL_MAX_HOPS 64

/* All-to-all's lower bound: the busiest link's load in seconds when every
** chip of n sends `bytes` to every other, routed as net_path routes them;
** *link is that link (the lowest id on a tie). O(L^3) in the torus axes'
** lengths, O(1) in chips (collcost.c). */
double coll_all_to_all_bound(const net *n, double bytes, int64_t *link);

/* nccl-tests' bus-bandwidth factor for op over n ranks. */
double coll_bus_factor(coll_op op, int64_t n);

#endif
