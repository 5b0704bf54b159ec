/*
** plan.h -- a parallel plan: how one training step is split over chips.
**
** dp x tp x pp x ep = chips (ep shares chips with dp: experts are sharded
** over the data-parallel group, as in Megatron/DeepSpeed-MoE). Micro-batch
** mbs sequences per chip per pipeline pass; the global batch gbs is
** dp x ep x mbs x (micro-batches per step), so gradient accumulation is
** gbs / (dp x ep x mbs) micro-batches (expert-parallel ranks take
** different data, as in Megatron and DeepSpeed-MoE).
*/
#ifndef TPUSIM_PLAN_H
#define TPUSIM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../workloads/graph.h"
#include "../workloads/model.h"
#include "opcost.h"

typedef enum { PLAN_GPIPE, PLAN_1F1B, PLAN_INTERLEAVED } plan_schedule;
/* When the data-parallel gradient reduction runs: bucket by bucket while
** backward still runs (PyTorch DDP, Megatron's --overlap-grad-reduce), or
** once after the whole backward (Megatron-LM's local DDP until 2023, the
** framework of the SC21 and Korthikanti runs). */
typedef enum { PLAN_GRAD_OVERLAP, PLAN_GRAD_AFTER_BACKWARD } plan_grad_sync;
/* The attention kernel: FlashAttention (Dao et al. 2022; cuDNN's fused
** attention, XLA/Pallas splash attention on TPUs), which keeps the s x s
** scores on chip and recomputes them in the backward -- what training
** frameworks use since 2022 -- or the scores written to HBM between a
** batched GEMM and a (fused) softmax, as Megatron-LM did before it. */
typedef enum { PLAN_ATTN_FLASH, PLAN_ATTN_SCORES } plan_attention;
typedef enum { PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL } plan_recompute;
/* How a step's data-parallel collectives are timed: simulated link by link
** (the default of simulate), or by their closed form on an idle network
** (what the planner's fast path uses; sim/coll.h coll_time_s). */
typedef enum { PLAN_COLL_SIMULATE, PLAN_COLL_FORMULA } plan_coll_costs;

typedef struct {
  int64_t chips, dp, tp, pp, ep;
  int zero;        /* 0..3 (ZeRO stage); FSDP = zero 3 */
  bool sp;         /* sequence parallelism with tp (Korthikanti et al. 2022) */
  int64_t mbs, gbs, seq;
  plan_recompute recompute;
  graph_dtype precision;
  plan_schedule schedule;
  int64_t vp;      /* virtual stages per chip (interleaved 1F1B) */
  int64_t slices;  /* TPU slices joined by DCN; dp spans them */
  int64_t reduction_server; /* reducer hosts for the gradient all-reduce; 0 = none */
  plan_grad_sync grad_sync;
  plan_attention attention;
  int dp_algo; /* the gradient all-reduce's coll_algo (sim/coll.h); 0: what the network suits */
  /* --full: every data-parallel group's all-reduce at once over the whole
  ** network, instead of one group taken as standing for all */
  bool full;
  /* where each kernel's flops and bytes come from: its lowered LLVM IR,
  ** counted (the default), or the graph's formulas, which the IR count
  ** equals (`tpusim lower` and the tests check it) */
  opcost_source op_costs;
  plan_coll_costs coll_costs;
  /* a kernel-cost cache to share between calls and threads (the planner's);
  ** NULL: each simulation makes its own. Not owned by the plan. */
  opcost *cost_cache;
} plan;

/* ---- names: the one table of each, for flags, JSON, messages ----
** NULL-terminated, indexed by the enum (the order messages list them). */
extern const char *const plan_schedule_names[];  /* gpipe, 1f1b, interleaved */
extern const char *const plan_recompute_names[]; /* none, selective, full */
extern const char *const plan_grad_sync_names[]; /* overlap, after-backward */
extern const char *const plan_attention_names[]; /* flash, scores */
/* "bf16", ... (workloads' precision table); "bf16" for a dtype that is none */
const char *plan_precision_name(graph_dtype dt);
/* "none", "selective", "full" recompute as prose: "no", "selective", "full" */
const char *plan_recompute_word(plan_recompute r);
/* --pp-schedule's value: gpipe, 1f1b or interleaved:V (V >= 2), into
** p->schedule and p->vp. Returns 0, or -1 with err naming what it expected. */
int plan_schedule_parse(const char *s, plan *p, char *err, size_t errn);
/* An index into a NULL-terminated name table, or -1. */
int plan_name_index(const char *const *names, const char *s);

/* Micro-batches per step per pipeline: gbs / (dp x ep x mbs). */
int64_t plan_microbatches(const plan *p);

struct hw_model;
/* The precision a plan trains in on hw when `want` is asked for: bf16 falls
** back to fp16 (with loss scaling) on a chip without bf16, as on a V100. */
graph_dtype plan_precision_on(const struct hw_model *hw, graph_dtype want);

/* The one validator of a plan against a model and a machine, used by
** simulate, plan (the search and its fixes): every rule a plan must keep
** (tp divides the attention heads, and the KV heads divide tp or tp them;
** tp divides ffn_hidden; chips = dp x tp x pp x ep; pp x V divides the
** layers; ep divides the experts; mbs x dp x ep divides the global batch;
** interleaving needs V >= 2 and micro-batches a multiple of pp; ZeRO 0..3;
** the chip has a unit for the precision; non-transformer families train
** data-parallel; an HLO module runs on the devices it was compiled for).
** Fills in defaults: mbs 1, gbs and seq from the model, dp from chips /
** (tp pp ep) when 0, vp 1, slices 1; sp off without tp. Returns 0, or -1
** with err naming what does not divide what. */
int plan_check(const model *m, const struct hw_model *hw, plan *p, char *err, size_t errn);

/* Which kind of rule a plan broke, for callers that count causes (the
** planner's rejections). */
typedef enum {
  PLAN_FAULT_NONE,
  PLAN_FAULT_RANGE,   /* a size below 1, ZeRO out of 0..3, interleaving without V >= 2 */
  PLAN_FAULT_DIVIDES, /* a parallel size that does not divide what it splits */
  PLAN_FAULT_DTYPE,   /* the chip has no unit for the precision */
  PLAN_FAULT_FAMILY   /* what the model family or an HLO module does not allow */
} plan_fault;
/* plan_check, saying which kind of rule failed in *fault (may be NULL). */
int plan_check_fault(const model *m, const struct hw_model *hw, plan *p, plan_fault *fault,
                     char *err, size_t errn);

#endif
