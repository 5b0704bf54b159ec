/*
** step.h -- one training step of a model on a machine under a plan.
**
** One step model, two evaluators. step_costs times the per-chip pieces
** (stepcost.c); step_describe turns them and the plan into a description
** of the step (step_desc: the pipeline's tasks, the gradient all-reduce,
** ZeRO-3's gathers, the update); then
**   - step_simulate runs it on the event engine (sim/sched: sched_run),
**     with collectives simulated link by link, contention between every
**     group's all-reduce with --full, the host input pipeline, memory, the
**     fixes and a timeline for the trace;
**   - step_fast evaluates the same description directly (sched_eval):
**     what the planner scores every plan with.
** They differ only where the simulation models more, by name: the
** collectives (link-level simulation vs their closed form on an idle
** network; a plan with coll_costs PLAN_COLL_FORMULA has the simulation use the closed form
** too), --full contention, and the input pipeline's stall. With those
** equal, the two agree to rounding (tests/test_step.c checks it on every
** example model x catalog chip x a grid of plans).
**
** Equivalent chips are simulated once: the tensor-parallel ranks of a
** stage and the data-parallel replicas run the same program, so one chip
** per pipeline stage stands for its group.
*/
#ifndef TPUSIM_STEP_H
#define TPUSIM_STEP_H

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "../hw_models/hw.h"
#include "../workloads/model.h"
#include "coll.h"
#include "input.h"
#include "memory.h"
#include "opcost.h"
#include "plan.h"
#include "sched.h"

/* Where a step's time goes, on the first stage's chip. */
typedef struct {
  double compute, exposed_comm, pipeline_bubble, input_stall, other;
} step_breakdown;

typedef struct {
  double step_time_s, tokens_per_s, mfu, hfu;
  double model_flops_per_step, hardware_flops_per_step;
  step_breakdown breakdown_s;
  /* the steps the input stall was simulated over (input_run_stall): -1
  ** its closed form, 0 no input pipeline (a CPU, a whole-step family) */
  int input_steps;
  mem_bytes memory;
  bool fits;
  mem_fix fixes[MEM_MAX_FIXES]; /* when it does not fit: the cheapest changes first */
  int n_fixes;
  double usd_per_hour, usd_per_step;
  /* the pieces, for --explain */
  double layer_fwd_s, layer_bwd_s, attn_core_fwd_s, head_fwd_s, head_bwd_s;
  /* of head_fwd_s and head_bwd_s, the embedding's: a pipeline's first stage
  ** runs it, the last stage the rest (final norm, head, loss, MTP);
  ** step_edges splits them */
  double embed_fwd_s, embed_bwd_s;
  /* of head_bwd_s, the output layer's weight-gradient GEMM, and the
  ** tensor-parallel all-gather of its input under sequence parallelism:
  ** what --defer-embedding-wgrad-compute moves into the flush (0 without) */
  double head_wgrad_s, head_wgrad_ag_s;
  double layer_mm_fwd_s; /* the layers' forward matmul kernels, average (kind_mm_fwd_s) */
  double tp_comm_fwd_s, tp_comm_bwd_s, p2p_s, dp_allreduce_s, optimizer_s;
  /* adding one micro-batch's weight gradients into the step's gradient
  ** buffer, per layer and for the embedding and head (paid by every
  ** micro-batch after the first) */
  double grad_accum_layer_s, grad_accum_head_s;
  /* per kind of layer (WL_LAYER_* bits; kind_n[k] of the model's layers are
  ** of kind k): one layer's forward and backward, its attention core's
  ** forward, its collectives forward and backward (tensor-parallel,
  ** MoE all-to-alls, context-parallel exchange: the part not overlapped),
  ** its gradient accumulation. The layer_* and tp_comm_* figures above are
  ** their averages over the model's layers. */
  int64_t kind_n[WL_LAYER_KINDS];
  double kind_fwd_s[WL_LAYER_KINDS], kind_bwd_s[WL_LAYER_KINDS], kind_attn_fwd_s[WL_LAYER_KINDS];
  /* its forward's matmul kernels but the attention core's (what an op-level
  ** recompute policy picks from: framework_selective_share) */
  double kind_mm_fwd_s[WL_LAYER_KINDS];
  /* its forward's kernels by layer submodule (graph_module): what a
  ** selective recompute of a list of modules runs again */
  double kind_mod_fwd_s[WL_LAYER_KINDS][GRAPH_MODULES];
  double kind_comm_fwd_s[WL_LAYER_KINDS], kind_comm_bwd_s[WL_LAYER_KINDS];
  /* what full recompute runs again of a layer's forward collectives
  ** (framework_full_comm_share), by kind and on average */
  double kind_comm_replay_s[WL_LAYER_KINDS], comm_replay_s;
  double kind_accum_s[WL_LAYER_KINDS];
  /* a low-precision GEMM recipe: quantizing one step's weights (once a
  ** step: Transformer Engine keeps them across micro-batches) */
  double weight_cast_s;
  /* context parallelism: one layer's key/value exchange forward and
  ** backward, before overlap with the attention */
  double cp_comm_fwd_s, cp_comm_bwd_s;
  /* PyTorch's context parallelism (framework_cp_pytorch): one hop of the
  ** backward's fp32 dK and dV round the ring */
  double cp_dkv_hop_s;
  /* expert parallelism: one MoE layer's all-to-alls forward (dispatch and combine) */
  double ep_a2a_fwd_s;
  /* with the all-to-alls overlapped: what the paired pass hides of a layer's
  ** forward and backward all-to-alls, by kind and averaged over the layers
  ** (kind_comm_* hold the rest); the micro-batches with no partner pay it
  ** (step_ep_unpaired) */
  double kind_a2a_hidden_fwd_s[WL_LAYER_KINDS], kind_a2a_hidden_bwd_s[WL_LAYER_KINDS];
  double a2a_hidden_fwd_s, a2a_hidden_bwd_s;
  /* activation offload: one layer's saved activations over the host link, one way */
  double offload_layer_s;
  /* ZeRO-3: gathering one stage's weights (per micro-batch, forward and backward) */
  double zero3_gather_s;
  double exposed_dp_s; /* of the step: the gradient all-reduce not hidden behind backward */
  /* of the step: the distributed optimizer's parameter all-gather that the
  ** first forward does not hide (sim/step.c gather_exposed_s) */
  double param_gather_exposed_s;
  /* of the step: the compute the data-parallel collectives slow while they
  ** run under it, their kernels holding SMs (step_coll_sm_share): the
  ** gradient reduction the backward hides and the parameter gather the
  ** first forward hides (ZeRO-3's gathers slow the chunks themselves) */
  double coll_sm_s, coll_hidden_s, coll_share; /* coll_sm_s = coll_hidden_s x coll_share */
  /* embedding tables placed off the replicas (--embeddings sharded|ps):
  ** the step's looked-up vectors exchanged (all-to-all, or to and from the
  ** parameter-server hosts), those hosts; and what CPU hosts beside the
  ** chips cost an hour -- parameter servers, Reduction Server reducers
  ** (usd_per_hour includes it) */
  double emb_exchange_s;
  int64_t ps_hosts;
  double host_usd_per_hour;
  /* --full: the data-parallel rings of every (stage, tensor rank) at once
  ** against one alone, on the whole machine's network; chips simulated */
  double full_contention;
  int64_t full_chips, full_groups;
  int64_t microbatches, layers_per_stage;
  char network[160];
  /* where the kernels' costs came from (sim/opcost.h); a shared cache's
  ** figures count every call that used it */
  opcost_stats op_costs;
} step_result;

/* One timed kernel of layer 0, for the trace's detail of a micro-batch. */
typedef struct {
  int id; /* the kernel's root op, which names it */
  int n_ops;
  bool matrix; /* it holds a dot or convolution */
  graph_phase phase;
  double t_s, flops, bytes; /* per step: execution count applied */
} step_op;

/* What ran when, for the trace (viz/trace.c writes it): the pipeline's
** tasks, the gradient buckets and the updates per stage, and the kernels
** of one layer of each kind the model has (slot k of layer, ops, n_ops for
** kind WL_LAYER_* k, named by the ops of layer[k], the one-layer shard of
** that kind they were timed on; the slots of kinds it lacks empty), with
** each layer's kind and each virtual stage's first layer to place them.
** A whole-step model (whole true) has none of these: its trace is drawn
** from step_result alone. */
typedef struct {
  bool whole, hlo;
  int64_t pp, vp, M;
  sched_span *spans;
  int64_t n_spans;
  double *bucket_t0, *bucket_t1; /* [pp * buckets] */
  int64_t buckets;
  double *opt_t0; /* [pp] */
  /* the deferred output-layer weight gradients on the last chip, after its
  ** last backward (drain_s 0: none deferred) */
  double drain_t0, drain_s;
  model *layer[WL_LAYER_KINDS];
  step_op *ops[WL_LAYER_KINDS];
  int n_ops[WL_LAYER_KINDS];
  int64_t layers;
  unsigned char *layer_kind; /* [layers] */
  int64_t *vs_first;         /* [pp * vp + 1]: the last entry is layers */
} step_timeline;

void step_timeline_free(step_timeline *t);

/* For a plan that does not fit (r->fits false, r->fixes listed by
** step_simulate): simulates each fix's plan for its step time, then orders
** the fixes: those that fit alone first, cheapest first (chips x step
** time), then the rest by peak. p is the plan r was simulated with, fed
** by `in` (NULL: none), as the fixes are. Returns 0 or -1. */
int step_price_fixes(const model *m, const hw_model *hw, const plan *p, const input_cfg *in,
                     step_result *r, char *err, size_t errn);

/* The contract's simulate object (shared/design.md): model, hw, chips,
** plan, step_time_s, ..., memory_bytes, fits, cost; fixes when it does not fit. */
cJSON *step_json(const model *m, const hw_model *hw, const plan *p, const step_result *r);

/* Mixture of experts. The expected number of distinct nodes, of `nodes`
** holding E/nodes experts each, that one token's top_k experts fall on
** under balanced routing, with the model's group-limited routing
** (route_groups, route_topk_groups) when it has one: what a
** node-deduplicating dispatch sends over the scale-out network per token. */
double step_moe_nodes_hit(const wl_tf_dims *d, int64_t nodes);

/* What a node-deduplicating dispatch's scale-out exchange carries over the
** even share when the busiest of a node's g chips takes `rows` times its
** share (plan_moe_rows): its copies reach the node over all g NICs (each
** sender's rail) before NVLink, so the node takes the mean of one chip at
** rows and g - 1 at the even share, and never more than one copy of a
** token (nodes / hit, hit the nodes a token reaches on average); a padded
** capacity (`padded`) pads every chip alike: rows. */
double step_moe_node_load(double rows, int64_t g, int64_t nodes, double hit, bool padded);

/* The HBM bytes (read + write) of expert parallelism's two token reorders
** (sort after the dispatch, unsort before the combine) in one MoE layer's
** forward for one micro-batch on one chip; the backward moves as many.
** 0 without ep or with one expert a chip. */
double step_moe_reorder_bytes(const wl_tf_dims *d, const plan *p);

/* The share of a GPU's SMs a data-parallel collective over n chips, per of
** them in a node, holds while it runs (0 on a TPU torus: DMAs): its library's CTAs
** (one an SM: NCCL's channels, system.scale_up / scale_out.collective_ctas
** as the group stays in the node or spans nodes) over the chip's SMs; 0
** where the hardware file gives none. Compute overlapped with the
** collective for t seconds then takes t x share longer (the SMs it loses,
** as step_moe_a2a_exposed_s charges the dispatcher's). */
double step_coll_sm_share(const hw_model *hw, int64_t n, int64_t per);

/* The time one pass's MoE all-to-alls (a2a_s: dispatch and combine of one
** layer) add when the framework overlaps them with another micro-batch's
** opposite pass of the same layer, other_s long (Megatron-Core's merged
** forward/backward of micro-batches i+1 and i): the part the other pass
** cannot cover, max(0, a2a_s - other_s), and the compute slowed while it
** covers the rest, min(a2a_s, other_s) x sm_share (the dispatcher's kernels
** hold sm_share of the chip's SMs; 0 for copy-engine transfers). The steady
** state: the 1F1B warm-up's lone forwards and the cool-down's lone
** backwards are counted by step_ep_unpaired, as step_costs does not know m. */
double step_moe_a2a_exposed_s(double a2a_s, double other_s, double sm_share);
/* The exposed part of one attention layer's context-parallel exchange as
** PyTorch's context_parallel runs it (torch.distributed.tensor.experimental
** _attention: _templated_ring_attention and its backward): ag_s the
** all-gather of K and V over the cp group, hop_s one ring hop of the
** backward's fp32 dK and dV, att_s the layer's attention core forward,
** split in cp equal steps (round-robin load balance). allgather (ring
** false): the gather hides only under the first step, forward and again in
** the backward; dK and dV go round under one step's backward each, the last
** hop waited for after the loop. ring (rotate method alltoall): a K/V block
** a step, beside each hop of dK and dV. */
void step_cp_pytorch_exposed(double ag_s, double hop_s, double att_s, int64_t cp, bool ring,
                             double *fwd_s, double *bwd_s);

/* The share of a chip's forward (and of its backward) chunk passes under
** plan p that no pass of another micro-batch pairs with, so their
** overlapped all-to-alls are exposed after all (Megatron-Core's combined
** 1F1B, pipeline_parallel/combined_1f1b.py): without a pipeline the first
** micro-batch's forward and the last's backward, 1/m; interleaved, the
** first stage's warm-up forwards and cool-down backwards, (pp - 1) x 2 +
** (V - 1) x pp + 1 of its m x V (schedules.py, one warm-up more with the
** overlap), at most all. */
double step_ep_unpaired(const plan *p);

/* The per-chip pieces of a step under plan p (the layer_*, tp_comm_* and
** p2p_s fields of r): what does not depend on pp, dp, the schedule or the
** recompute mode, so a search can compute it once per (hardware, tp, ep,
** mbs, sp). */
int step_costs(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
               size_t errn);
/* The same, the tensor- and context-parallel collectives timed through
** memo (made by coll_memo_new for hw; NULL: none): a search building the
** costs of many sizes meets the same collective many times. */
int step_costs_memo(const model *m, const hw_model *hw, const plan *p, coll_memo *memo,
                    step_result *r, char *err, size_t errn);

/* A transformer step under plan p, described for an evaluator: the
** pipeline (sched), the gradient all-reduce over the data-parallel group
** and ZeRO-3's gathers (timed by coll_time_s, through `memo` when not
** NULL; simulated, or in closed form when p->coll_costs says so), the
** fused-Adam update. `costs` holds step_costs' pieces for p. */
typedef struct {
  sched_desc sched;
  double dp_allreduce_s, zero3_gather_s, optimizer_s;
  /* the distributed optimizer's parameter all-gather after the update
  ** (overlapped with the next step's first forward): the part that forward
  ** does not hide */
  double param_gather_s;
  /* the data-parallel collectives' kernels' share of the chip's SMs (their
  ** groups' times weighting the dense and the expert group's), and the
  ** forward time the parameter gather runs under (chip 0's, pp times
  ** without interleaving: each stage's first forward waits on its own) */
  double coll_share, param_gather_hidden_s;
  int64_t buckets;     /* gradient buckets a chip: one a layer */
  bool after_backward; /* the all-reduce waits for the whole backward */
  int64_t layers_per_stage, microbatches;
  double tp_comm_bwd_s; /* a layer's backward collectives (full recompute repeats the forward's) */
  double tp_comm_s;    /* the layers' tensor-parallel collectives, a chip's whole step */
  /* --full: the all-reduce's contention factor, the chips and groups simulated */
  double full_contention;
  int64_t full_chips, full_groups;
  /* per virtual stage chunk times, when they differ (sched.f_vs points
  ** here); left out of step_describe's clearing: it is large */
  double vs_f[SCHED_MAX_VS], vs_b[SCHED_MAX_VS];
} step_desc;

/* What an evaluation of a description gives. */
typedef struct {
  double step_time_s;
  step_breakdown breakdown_s;
  double exposed_dp_s; /* the gradient all-reduce not hidden behind the backward */
  double param_gather_exposed_s; /* the parameter gather the first forward waits for */
  double coll_sm_s, coll_hidden_s, coll_share; /* as step_result's */
} step_times;

/* costs: step_costs' pieces for p. */
int step_describe(const model *m, const hw_model *hw, const plan *p, const step_result *costs,
                  coll_memo *memo, step_desc *d, char *err, size_t errn);

/* The bytes of one pipeline stage's gradients a data-parallel all-reduce
** moves: its share of the parameters in the dtype the gradients are kept
** in (fp32 or 16-bit, the memory model's rule for p's framework on hw). */
double step_grad_bytes(const model *m, const hw_model *hw, const plan *p);

/* Step r (simulated under p) with a Reduction Server of `reducers` hosts in
** place of the gradient all-reduce, by the server's closed form (simulating
** one at 16,384 chips would cost more than a plan search); the part of the
** all-reduce the backward hid stays hidden. *allreduce_s: the server's
** time. */
double step_with_reducers_s(const model *m, const hw_model *hw, const plan *p,
                            const step_result *r, int64_t reducers, double *allreduce_s);

/* What the fast path remembers between plans of one hardware (not shared
** between threads): the collectives' closed forms, and the last schedule
** evaluated (a search asks the same one for plans that differ only in
** what the schedule does not see, such as ZeRO 0 and 1). */
typedef struct step_memo step_memo;
step_memo *step_memo_new(const hw_model *hw);
void step_memo_free(step_memo *m);

/* The fast path: step_describe, then the description evaluated directly
** (no events), its collectives in closed form. Memory is not computed.
** memo may be NULL. */
int step_fast(const model *m, const hw_model *hw, const plan *p, const step_result *costs,
              step_memo *memo, step_times *t, char *err, size_t errn);

/* Simulates one step; `in` describes the host input pipeline of each host
** (NULL: data is assumed to be there). With `tl` non-NULL, fills in what
** ran when (free it with step_timeline_free), for viz/trace.c to write as
** a Chrome/Perfetto trace. Returns 0, or -1 with err. */
int step_simulate(const model *m, const hw_model *hw, const plan *p, const input_cfg *in,
                  step_result *r, step_timeline *tl, char *err, size_t errn);

/* One layer's recomputation in the backward under p's recompute: the
** forward again (full), the framework's selective count, or the forward
** kernels of the listed recompute_modules; of layer kind k (WL_LAYER_*),
** or the layers' average for k < 0. */
double step_recompute_s(const step_result *r, const plan *p, const wl_tf_dims *d, int k);

/* HBM bytes a parameter of the fused Adam update moves under p: 28, or 14
** with 16-bit weights and moments (--weight-dtype bf16). */
double step_adam_bytes(const plan *p);

/* Megatron's optimizer step beyond the fused Adam (framework
** megatron_optimizer): the HBM bytes it moves for each parameter of the
** chip's optimizer shard, returned, and in *per_chip_param those for each
** parameter of its model shard (the gradient buffer zeroed); 0 for other
** stacks and for 16-bit or fp32 weights without a master copy. */
double step_update_extra_bytes(const model *m, const hw_model *hw, const plan *p,
                               double *per_chip_param);

/* The parameters whose gradients one chip's buffer holds under p: its tp x
** pp shard (its ZeRO-3 shard under FSDP) -- what the Megatron step zeroes. */
double step_grad_buffer_params(const model *m, const plan *p);

/* The parameters one chip's optimizer updates under p: its tp x pp shard,
** and of that its share of the optimizer's shard group (ZeRO-1 and up:
** dp x cp, an HSDP group's hsdp chips; the experts' over their expert
** data-parallel group). */
double step_optimizer_params(const model *m, const plan *p);

/* A pipeline's two ends per micro-batch from r: the first stage's
** embedding forward and backward, the last stage's final norm, head, loss
** and MTP; the gradients' accumulation (a share accum of it, the first
** micro-batch has none) half on each, the embedding table's and the
** head's. At pp 1 one stage runs all four. */
void step_edges(const step_result *r, double accum, double *f_first, double *b_first,
                double *f_last, double *b_last);

#endif
