/*
** plan.h -- a parallel plan: how one training step is split over chips.
**
** Megatron-Core's sizes, so a published configuration is copied as it
** stands: chips = dp x tp x pp x cp. The expert layers regroup a stage's
** tp x dp x cp ranks as etp x ep x edp (Megatron-Core's expert groups;
** etp 1 unless given, as its MoE recipes set it): experts split ep ways,
** each expert's FFN etp ways, their gradients reduced over edp. Context-parallel
** ranks hold 1/cp of each sequence's tokens and share the same sequences,
** so a step is gbs / (dp x mbs) micro-batches per pipeline.
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
/* The attention core's kernel: the framework's (its profile's choice), or
** one the user names (--attention-kernel) whose measured rate the chip
** holds: the FlashAttention-1 generation, FlashAttention-2, cuDNN's fused
** attention, or the chip's fastest (its attention_*_efficiency figures). */
typedef enum { PLAN_AK_FRAMEWORK, PLAN_AK_FA1, PLAN_AK_FA2, PLAN_AK_CUDNN, PLAN_AK_BEST } plan_attn_kernel;
typedef enum { PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL } plan_recompute;
/* Selective recompute of a list of a layer's submodules (Megatron-Core's
** --recompute-modules, TransformerConfig.recompute_modules): bit i is
** plan_recompute_module_names[i]. "moe" holds "moe_act" and
** "shared_experts"; core_attn alone is Megatron-Core's default selective. */
enum {
  PLAN_RM_CORE_ATTN = 1u << 0,
  PLAN_RM_MOE_ACT = 1u << 1,
  PLAN_RM_LAYERNORM = 1u << 2,
  PLAN_RM_MLA_UP_PROJ = 1u << 3,
  PLAN_RM_MLP = 1u << 4,
  PLAN_RM_MOE = 1u << 5,
  PLAN_RM_SHARED_EXPERTS = 1u << 6,
};
/* MaxText's remat_policy custom (its get_save_and_offload_names): a
** layer's named tensors kept on the chip or offloaded to the host, the
** rest recomputed as the backward reads them. Bit i is
** plan_remat_names[i]: decoder_layer_input, query_proj, key_proj,
** value_proj, context (the attention core's output and log-sum-exp),
** out_proj, mlpwi_0 (or an ungated MLP's mlpwi), mlpwi_1, mlpwo; qkv_proj
** (the fused projection) sets the three projections. */
enum {
  PLAN_RN_DECODER_INPUT = 1u << 0,
  PLAN_RN_QUERY = 1u << 1,
  PLAN_RN_KEY = 1u << 2,
  PLAN_RN_VALUE = 1u << 3,
  PLAN_RN_CONTEXT = 1u << 4,
  PLAN_RN_OUT = 1u << 5,
  PLAN_RN_MLPWI_0 = 1u << 6,
  PLAN_RN_MLPWI_1 = 1u << 7,
  PLAN_RN_MLPWO = 1u << 8,
};
extern const char *const plan_remat_names[];
/* How a step's data-parallel collectives are timed: simulated link by link
** (the default of simulate), or by their closed form on an idle network
** (what the planner's fast path uses; sim/coll.h coll_time_s). */
typedef enum { PLAN_COLL_SIMULATE, PLAN_COLL_FORMULA } plan_coll_costs;
/* How context-parallel ranks see the other ranks' keys and values: passed
** round a ring while attention computes (ring attention, Liu et al. 2023;
** Megatron-Core's p2p), or all-gathered before it (Llama 3's CP; PyTorch's
** context_parallel under its first block). 0 is the profile's
** (framework_cp_comm resolves it). */
typedef enum { PLAN_CP_FRAMEWORK, PLAN_CP_RING, PLAN_CP_ALL_GATHER } plan_cp_comm;
/* The GEMM recipe of the transformer layers' linear layers: activations,
** attention and the embedding and head stay in the compute dtype; the
** GEMMs run on the low-precision unit with their operands quantized --
** per-tensor scales from an amax history (Transformer Engine's delayed
** scaling, torchao's tensorwise), per-tensor scales from the tensor itself
** (current scaling: one more pass over each operand), 32-element blocks
** with an e8m0 scale (MXFP8, OCP MX spec), 16-element blocks with an e4m3
** scale (NVFP4), or int8 (AQT on TPUs). */
typedef enum {
  PLAN_GEMM_NATIVE, /* the compute dtype */
  PLAN_GEMM_FP8,    /* fp8, delayed / tensorwise scaling */
  PLAN_GEMM_FP8_CS, /* fp8, current scaling */
  PLAN_GEMM_MXFP8,
  PLAN_GEMM_NVFP4,
  PLAN_GEMM_INT8,
  /* TF32 tensor cores for an fp32 model's matmuls and convolutions (A100
  ** and later): fp32 operands rounded to a 10-bit mantissa inside the
  ** tensor core, fp32 accumulate, nothing stored differently (NVIDIA, "TF32
  ** Tensor Cores", A100 whitepaper); the rest stays fp32 */
  PLAN_GEMM_TF32,
  PLAN_GEMM_COUNT
} plan_gemm;
/* Where a model's embedding tables live (a recommender's: tables of
** millions of rows looked up by index, far larger than its dense layers):
** replicated on every chip with their gradients all-reduced densely (plain
** DDP), sharded row-wise over the chips' memory with the looked-up vectors
** exchanged by all-to-all (TorchRec's model-parallel embeddings, TPUEmbedding
** on a TPU slice's HBM, on SparseCores where the chip has them), or on CPU
** parameter-server hosts' DRAM, the accelerators running the dense layers
** (TensorFlow's ParameterServerStrategy). docs/hardware-choice.md. */
typedef enum { PLAN_EMB_REPLICATED, PLAN_EMB_SHARDED, PLAN_EMB_PS } plan_embeddings;
/* What is kept in host memory instead of HBM (priced in host-link time). */
typedef enum { PLAN_OFFLOAD_NONE, PLAN_OFFLOAD_ACTIVATIONS, PLAN_OFFLOAD_OPTIMIZER } plan_offload;
/* The MoE all-to-alls overlapped with compute (Megatron-Core's
** --overlap-moe-expert-parallel-comm): as the framework profile's recipes
** do, or as --ep-overlap says. 0 is the profile's, so a zeroed plan keeps it. */
typedef enum { PLAN_EP_OVERLAP_FRAMEWORK, PLAN_EP_OVERLAP_OFF, PLAN_EP_OVERLAP_ON } plan_ep_overlap;
/* Megatron-Core's MoE token dispatcher (moe_token_dispatcher_type): the
** framework profile's, alltoall (NCCL all-to-all, a copy of a token per
** chosen expert, sorted by local expert on arrival) or flex (DeepEP /
** HybridEP: a copy per destination node, then per rank over NVLink,
** permuted once on arrival). 0 is
** the profile's. */
typedef enum { PLAN_DISPATCH_FRAMEWORK, PLAN_DISPATCH_ALLTOALL, PLAN_DISPATCH_FLEX } plan_moe_dispatcher;
/* The attention core's operands in fp8 (Transformer Engine's fp8
** dot-product attention, Megatron-Core's --fp8-dot-product-attention):
** as the framework profile's recipes do, off or on. 0 is the profile's. */
typedef enum { PLAN_FP8_ATTN_FRAMEWORK, PLAN_FP8_ATTN_OFF, PLAN_FP8_ATTN_ON } plan_fp8_attn;

typedef struct {
  int64_t chips, dp, tp, pp, ep;
  int64_t cp;      /* context parallel ranks (0 or 1: none) */
  int64_t etp;     /* expert tensor parallel (0 or 1: none) */
  plan_cp_comm cp_comm;
  /* explicit decoder layers per virtual stage, pp x vp numbers (NULL: as
  ** even as the layers allow); not owned */
  const int32_t *pp_layers;
  int n_pp_layers;
  /* the embedding and the output layer with its loss counted as one layer
  ** each in the pipeline split (Megatron-Core's
  ** account-for-embedding/loss-in-pipeline-split) */
  bool pp_split_embedding, pp_split_loss;
  int64_t hsdp;    /* FSDP/ZeRO-3 shard group size (0: the whole dp x cp group) */
  plan_offload offload;
  /* activation offload of only the first N decoder layers of each model
  ** chunk (Megatron-Core's --cpu-offloading-num-layers; the Megatron-Bridge
  ** GB200/GB300 Llama 3.1 405B FSDP recipes offload 92, 40 and 10 of 126):
  ** --offload activations:N; 0: every layer but the two in flight */
  int64_t offload_layers;
  plan_embeddings embeddings; /* where embedding tables live (models that have them) */
  /* the loss computed over the logits in this many tiles of the tokens,
  ** each tile's logits, loss and gradient at a time (MaxText's
  ** num_vocab_tiling): 1/N of the logits held; 0 or 1: all at once */
  int64_t vocab_tiles;
  /* the output layer's weight-gradient GEMM of the first
  ** wgrad_deferral_limit micro-batches (0: of every one) left out of the
  ** last pipeline stage's backward and run in the pipeline's flush, after
  ** its last backward (Megatron-Core's defer_embedding_wgrad_compute, which
  ** needs pp > 1; sim/sched.h) */
  bool defer_embedding_wgrad;
  int64_t wgrad_deferral_limit;
  /* the parameters, their gradients and the optimizer's states all in the
  ** 16-bit compute dtype, no fp32 master copy (MaxText's
  ** weight_dtype=bfloat16; --weight-dtype bf16); false: the framework's */
  bool bf16_weights;
  plan_gemm gemm;  /* the linear layers' GEMM recipe */
  int framework;   /* an index into plan_frameworks (sim/framework.h) */
  plan_attn_kernel attn_kernel; /* the attention kernel, over the framework's */
  /* the framework's features (plan_apply_framework sets them) */
  bool tp_overlap;  /* tensor-parallel collectives overlapped with GEMMs (userbuffers, collective matmul) */
  plan_ep_overlap ep_overlap; /* the MoE all-to-alls under the paired micro-batch's compute */
  plan_moe_dispatcher moe_dispatcher; /* the MoE token dispatcher, over the framework's */
  plan_fp8_attn fp8_attention; /* the attention core in fp8, over the framework's */
  /* uneven routing (--moe-imbalance F): the busiest chip of an expert group
  ** receives F times the even share of the routed tokens, and the group
  ** waits for it at the combine: its expert GEMMs, all-to-alls and expert
  ** activations are F times the even ones (dropless routing); 0 or 1: even,
  ** as routing forced to balance runs (Megatron-Bridge's performance
  ** recipes: moe_router_force_load_balancing) */
  double moe_imbalance;
  bool param_gather_overlap; /* a sharded optimizer's (zero >= 1) parameter all-gather
                             ** overlapped with the next forward */
  /* PyTorch without a graph compiler (no torch.compile): each op its own
  ** kernel but the library's (sim/fuse.h fuse_graph_eager), where
  ** torch.compile and XLA fuse the elementwise chains */
  bool eager;
  int zero;        /* 0..3 (ZeRO stage); FSDP = zero 3 */
  bool sp;         /* sequence parallelism with tp (Korthikanti et al. 2022) */
  int64_t mbs, gbs, seq;
  plan_recompute recompute;
  /* with PLAN_RECOMPUTE_SELECTIVE: the submodules recomputed (PLAN_RM_*
  ** bits; --recompute selective:LIST), 0: the framework's own selective */
  unsigned recompute_modules;
  /* with PLAN_RECOMPUTE_FULL: MaxText's named tensors kept on the chip and
  ** offloaded to the host (PLAN_RN_* bits; --recompute custom:LIST), 0 and
  ** 0: full recompute */
  unsigned remat_device, remat_offload;
  graph_dtype precision;
  plan_schedule schedule;
  int64_t vp;      /* virtual stages per chip (interleaved 1F1B) */
  int64_t slices;  /* TPU slices joined by DCN; dp spans them */
  /* TPU: each slice's torus shape (--topology 4x4x8), one Cloud TPU offers
  ** (net_shape_check) holding chips / slices; all 0: the most cubic one
  ** (net_build). The planner picks it among the offered (planner.c). */
  int64_t slice_shape[3];
  /* the slice wired as a twisted torus (--topology 4x4x8t): a shape the
  ** hardware lists under slice_shapes.twisted; speeds a whole-slice
  ** all-to-all (net_a2a_twist_gain), leaves rings as they are */
  bool slice_twisted;
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
extern const char *const plan_offload_names[];   /* none, activations, optimizer (plan_offload) */
extern const char *const plan_recompute_names[]; /* none, selective, full */
/* core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts: the
** PLAN_RM_* bits in order, Megatron-Core's spellings */
extern const char *const plan_recompute_module_names[];
/* --recompute's value: none, selective, full, selective:M1,M2,... (the
** modules by plan_recompute_module_names, ',' or '+' between them), or
** custom:NAME=device|offload|remat,... (MaxText's named tensors,
** plan_remat_names and qkv_proj; full recompute with those kept). Sets
** p->recompute, p->recompute_modules, p->remat_device and
** p->remat_offload; returns 0, or -1 with err naming the nearest valid
** choice. */
int plan_recompute_parse(const char *s, plan *p, char *err, size_t errn);
/* "none", "selective", "full", "selective:moe_act,layernorm" or
** "custom:decoder_layer_input=offload,key_proj=device" into out */
const char *plan_recompute_label(const plan *p, char *out, size_t n);
extern const char *const plan_grad_sync_names[]; /* overlap, after-backward */
extern const char *const plan_attention_names[]; /* flash, scores */
extern const char *const plan_attn_kernel_names[]; /* framework, fa1, fa2, cudnn, best */
extern const char *const plan_embeddings_names[]; /* replicated, sharded, ps */
extern const char *const plan_moe_dispatcher_names[]; /* framework, alltoall, flex */
extern const char *const plan_cp_comm_names[];        /* framework, ring, all-gather */

/* A model's embedding tables, read off its graph: every weight a gather
** reads rows of. bytes: the tables; largest: the biggest one; rows_bytes:
** the rows a step's graph looks up (the gathers' outputs, before pooling);
** pooled_bytes: one vector per sample and table (what TorchRec's pooled
** all-to-all moves); index_bytes: the indices. Zero when there are none. */
typedef struct {
  int tables;
  double bytes, largest, rows_bytes, pooled_bytes, index_bytes;
} plan_emb_tables;
void plan_embedding_tables(const graph *g, plan_emb_tables *t);
/* "bf16", ... (workloads' precision table); "bf16" for a dtype that is none */
const char *plan_precision_name(graph_dtype dt);
/* --precision's values: the compute dtypes, then the GEMM recipes (fp8,
** fp8-cs, mxfp8, nvfp4, int8, tf32); plan_precision_parse sets
** p->precision and p->gemm from one (tf32 computes in fp32, the others in
** bf16). plan_precision_label names what a plan trains in. */
extern const char *const plan_precision_names[];
int plan_precision_parse(const char *s, plan *p);
const char *plan_precision_label(const plan *p);
/* --pp-layers A,B,...: decoder layers per (virtual) stage into out (room
** for max); their count in *n. Returns 0, or -1 with err. */
int plan_pp_layers_parse(const char *s, int32_t *out, int max, int *n, char *err, size_t errn);
/* --pp-layout: Megatron-Core's --pipeline-model-parallel-layout as a
** recipe writes it ("Et|(tt|)*30mL": stages split by '|', E the embedding,
** t a decoder layer, m a multi-token-prediction layer, L the loss, X*N and
** (...)*N repeats): decoder layers per (virtual) stage into out, as
** --pp-layers, and the m's into *mtp. E must open the first stage and L
** close the last, with the m's in it (where tpusim's head puts them).
** Returns 0, or -1 with err. */
int plan_pp_layout_parse(const char *s, int32_t *out, int max, int *n, int64_t *mtp, char *err,
                         size_t errn);
/* The decoder layers of virtual stage vs (0 .. pp x vp - 1) under p, and
** whether it holds the embedding or the head: the explicit split, else
** Megatron-Core's even one (the embedding and loss counted as layers when
** asked). */
int64_t plan_stage_layers(const plan *p, int64_t layers, int64_t vs);
/* The share of a pipeline stage's decoder layers (stage_layers of them,
** over its model chunks) whose activations activation offload moves to the
** host under p: 1 for every layer, N x vp / stage_layers under --offload
** activations:N (at most 1). Callers ask whether p offloads at all. */
double plan_offload_share(const plan *p, double stage_layers);
struct hw_model;
/* The peak rate of p's linear-layer GEMMs on hw (its recipe's unit; the
** compute dtype's without one); 0 when the chip has none. */
double plan_gemm_peak_flops(const struct hw_model *hw, const plan *p);
/* Whether the expert-parallel group is one whole slice (ep equals the
** chips a slice holds): the all-to-all a twisted slice speeds
** (net_a2a_twist_gain), so the planner wires the slice twisted there. */
bool plan_ep_is_slice(const plan *p);
/* A split of `layers` over p's pp x V virtual stages as even as it goes
** when they do not divide (the embedding and loss counted as layers when
** p says so), the extra layers in the middle stages, into out (room for
** max). Returns the stages, or -1 when the layers divide evenly, are fewer
** than the stages, or do not fit in max. */
int plan_balance_layers(const plan *p, int64_t layers, int32_t *out, int max);
/* The busiest expert chip's routed tokens over the even share under p:
** --moe-imbalance where there is an expert group to be uneven in (ep > 1),
** else 1. */
double plan_moe_load(const plan *p);
/* The most that chip can receive over the even share: its E/ep experts
** take at most min(top_k, E/ep) copies of each of the group's tokens. */
double plan_moe_imbalance_max(const plan *p, const wl_tf_dims *d);
/* --moe-imbalance F against the model alone, whatever the plan: 1 or more,
** a model with experts, and routing that can be uneven (dropless: a model
** padded to moe.capacity_factor holds every expert at its capacity).
** Returns 0 (also for F 0 or 1), or -1 with err naming the flag. */
int plan_check_moe_imbalance_model(const model *m, double f, char *err, size_t errn);
/* --offload o on hw: 0, or -1 with err when the chip has no host link to
** offload over (plan_check's rule, which the planner says once a chip). */
int plan_check_offload_link(const struct hw_model *hw, plan_offload o, char *err, size_t errn);
/* The routed rows that chip computes and exchanges over the even share: a
** model's padded capacity (moe.capacity_factor: every expert at its
** capacity, whatever the routing), else plan_moe_load. */
double plan_moe_rows(const plan *p, const wl_tf_dims *d);
/* The data-parallel size of the expert layers: tp x dp x cp / (ep x etp). */
int64_t plan_expert_dp(const plan *p);
/* The groups the sharded states (ZeRO, FSDP) divide over: dense state over
** dp x cp, or under ZeRO-3 with --hsdp the HSDP group; routed-expert state
** over that group's expert data-parallel ranks, group x tp / (ep x etp)
** (Megatron-Core; Megatron-Bridge's memory estimator,
** _expert_optimizer_shard_size): plan_expert_dp() without HSDP. */
void plan_state_shards(const plan *p, int64_t *dense, int64_t *expert);
/* "none", "selective", "full" recompute as prose: "no", "selective", "full" */
const char *plan_recompute_word(plan_recompute r);
/* --pp-schedule's value: gpipe, 1f1b or interleaved:V (V >= 2), into
** p->schedule and p->vp. Returns 0, or -1 with err naming what it expected. */
int plan_schedule_parse(const char *s, plan *p, char *err, size_t errn);
/* An index into a NULL-terminated name table, or -1. */
int plan_name_index(const char *const *names, const char *s);

/* Micro-batches per step per pipeline: gbs / (dp x mbs). */
int64_t plan_microbatches(const plan *p);
/* The micro-batches whose output-layer weight gradient p defers into the
** flush (--defer-embedding-wgrad-compute): the first wgrad_deferral_limit,
** all when 0; 0 when it does not defer. */
int64_t plan_wgrad_deferred(const plan *p);

struct hw_model;
/* The precision a plan trains in on hw when `want` is asked for: bf16 falls
** back to fp16 (with loss scaling) on a chip without bf16, as on a V100. */
graph_dtype plan_precision_on(const struct hw_model *hw, graph_dtype want);

/* Whether hw can run model m at all, by what the model requires
** (wl_requirement_names): fp64 needs an fp64 unit; custom CUDA kernels an
** NVIDIA GPU; tree-boosting libraries a CPU or an NVIDIA GPU. Returns 0, or
** -1 with err saying what is needed, why, and which chips of the kind
** qualify. plan_check applies it first; the planner asks it per hardware. */
int plan_hw_supports(const model *m, const struct hw_model *hw, char *err, size_t errn);

/* The frameworks' TF32 defaults for an fp32 model on a chip with TF32
** tensor cores: PyTorch runs cuDNN convolutions in TF32
** (torch.backends.cudnn.allow_tf32 = True since 1.7) and matmuls in strict
** fp32 (torch.backends.cuda.matmul.allow_tf32 = False since 1.12), so a
** model whose graph has convolutions gets p->gemm = PLAN_GEMM_TF32 and
** one without keeps fp32 (docs/hardware-choice.md). Returns whether it
** changed p. */
bool plan_default_tf32(const model *m, const struct hw_model *hw, plan *p);

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
  PLAN_FAULT_FAMILY,  /* what the model family or an HLO module does not allow */
  PLAN_FAULT_REQUIRES /* the chip cannot run the model at all (plan_hw_supports) */
} plan_fault;
/* plan_check, saying which kind of rule failed in *fault (may be NULL). */
int plan_check_fault(const model *m, const struct hw_model *hw, plan *p, plan_fault *fault,
                     char *err, size_t errn);

#endif
