/*
** memory.h -- per-chip memory of a transformer training step under a
** parallel plan: model state (weights, gradients, optimizer; ZeRO),
** activations (Korthikanti et al. 2022, generalized), temporary and
** collective buffers, the peak against the chip's capacity, and the
** cheapest fixes for a plan that does not fit. Pure functions: no state,
** callable from many threads. Formulas and sources: docs/memory.md.
*/
#ifndef TPUSIM_MEMORY_H
#define TPUSIM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../hw_models/hw.h"
#include "../workloads/model.h"
#include "../workloads/wl.h"
#include "plan.h"

/* How the framework holds state; the plan holds the rest. A zeroed struct
** is plain 16-bit training with SGD, Korthikanti's activation accounting
** (dropout masks, stored softmax), the embedding/LM head counted, and no
** runtime reserve or fragmentation (mem_setup fills those per chip kind). */
typedef struct {
  bool master_fp32;        /* 16-bit weights + an fp32 master copy in the optimizer */
  bool fp32_weights_only;  /* with master_fp32: the fp32 weights are the only copy, cast
                           ** to 16 bits per use inside the step (MaxText's weight_dtype) */
  bool fp32_grads;         /* gradients kept in fp32 (Megatron's main_grad) */
  bool grads_reduced_16bit; /* reduced in the compute dtype all the same (framework.h) */
  int optimizer_states;    /* per parameter: 2 Adam(W), 1 momentum, 0 SGD */
  double trainable_fraction; /* trainable / all parameters (LoRA); 0 means 1 */
  double frozen_weight_bytes; /* per frozen parameter when the base is quantized
                              ** (QLoRA's 4-bit NF4); 0: the precision's bytes */
  bool layers_only;        /* transformer layers only: no embedding, LM head,
                           ** final norm or loss (Korthikanti's Fig. 1 basis) */
  bool flash_attention;    /* the attention kernel keeps no s x s tensor */
  bool no_dropout;         /* no dropout masks */
  double capacity_bytes;   /* HBM per chip; 0: unlimited (fits is always true) */
  /* routed-expert parameters of the whole model (model.expert_params); 0 on
  ** a MoE model: estimated from the dimensions (docs/memory.md) */
  double expert_params;
  double capacity_factor;  /* MoE: tokens the busiest expert chip's experts take over the even share; 0: 1 */
  /* what the software stack holds outside the tensors (mem_setup, by chip
  ** kind, each figure with its measurement in memory.c) */
  double runtime_bytes;    /* context, kernels and library workspaces per chip */
  double comm_group_bytes; /* one collective communicator of more than 2 chips */
  double comm_pair_bytes;  /* one communicator of 2 chips */
  double fragmentation;    /* the allocator's lost share of reserved memory, 0 <= f < 1,
                           ** on what is allocated and freed within a step */
  bool gemm_any_layout;    /* low-precision GEMMs read either operand layout, so one
                           ** quantized copy serves forward and backward (Blackwell) */
  bool lowp_params;        /* the linear layers' weights are held in the GEMM recipe's
                           ** format only, no 16-bit copy (Transformer Engine's
                           ** fp8_model_init under Megatron's --fp8-param-gather): the
                           ** fp32 master in the optimizer is the high-precision copy */
  bool op_selective;       /* "selective" recompute is torchtitan's op-level policy
                           ** (every second matmul's output, attention's kept), not
                           ** Korthikanti's (the attention core recomputed) */
  bool dots_selective;     /* "selective" is JAX's dots policy (MaxText 'minimal'): the
                           ** weight matmuls' outputs the backward reads are kept */
  double logit_bytes;      /* a stored logit (and its gradient); 0: 4 (fp32 loss) */
  double logit_grad_bytes; /* what the loss's backward holds beside the stored logits,
                           ** per logit; 0: logit_bytes (one gradient) */
  bool logit_grad_in_place; /* the loss writes its gradient into the stored logits
                           ** (Megatron's vocab-parallel cross entropy): beside them
                           ** only its cast to the compute dtype, when narrower */
} mem_opts;

/* Per chip, bytes, on the worst pipeline stage (every stage is computed
** when their layers differ; else the larger of the first and the last).
** peak = weights + gradients + optimizer + activations + temporary +
** runtime + comm + fragmentation: all held at once at the start of the
** backward of the last warm-up micro-batch (docs/memory.md, "The peak"). */
typedef struct {
  double weights, gradients, optimizer, activations, temporary, peak, capacity;
  bool fits;               /* peak <= capacity (or capacity 0) */
  int stage;               /* the worst stage, 0 .. pp - 1 */
  double params;           /* parameters held by this chip before ZeRO sharding */
  double expert_params;    /* of which routed-expert parameters */
  double act_layer;        /* the largest layer, one micro-batch, under the plan's recompute */
  double layer_mbs;        /* layer x micro-batch activation sets resident */
  double weight_copies;    /* low-precision GEMM copies of the weights and their
                           ** scaling state (part of weights) */
  double weights_16bit_dropped; /* the 16-bit linear weights the copies replace
                           ** (mem_opts.lowp_params; subtracted from weights) */
  bool lowp_params;        /* mem_opts.lowp_params: the weights were counted so */
  double runtime;          /* context, kernels, library workspaces */
  double comm;             /* collective communicators' buffers */
  double fragmentation;    /* reserved by the caching allocator but unusable */
  double host;             /* kept in host memory by offloading (not in peak) */
} mem_bytes;

/* Options from a model's training settings: Adam/AdamW 2 states, momentum 1,
** SGD 0; fp32_grads follows master_fp32 (Megatron's default); LoRA trains
** `trainable_fraction` of the parameters (0 or 1: all), and QLoRA keeps the
** frozen base in 4-bit NF4 with double-quantized constants: 4.127 bits a
** parameter (Dettmers et al. 2023, arXiv:2305.14314, §3). */
mem_opts mem_opts_from_train(const wl_train *t, double trainable_fraction, double capacity_bytes);

/* Weights, gradients and optimizer (the other fields zero) for `params`
** parameters replicated over a data-parallel group of dp under ZeRO stage
** `zero` (Rajbhandari et al. 2020). precision: the dtype of the weights. */
void mem_model_state(double params, int64_t dp, int zero, graph_dtype precision,
                     const mem_opts *o, mem_bytes *out);

/* What the memory model reads for plan p of transformer m on hw, the one
** setup simulate and the planner share: the options (the model's training
** settings and expert parameters, dropout, the attention kernel, hw's HBM,
** the runtime's reserve and the allocator by chip kind) and the plan as the
** memory model counts it (Megatron-Core's sizes, as plan.h: copied). */
void mem_setup(const model *m, const hw_model *hw, const plan *p, mem_opts *o, plan *mp);

/* A checkpoint of m's trainable state: 16-bit weights, the fp32 master
** copy, Adam's m and v -- 14 B per trainable parameter. */
double mem_checkpoint_bytes(const model *m);

/* The memory of one chip. Returns 0, or -1 with a message in err. */
int mem_transformer(const wl_tf_dims *d, const plan *p, const mem_opts *o, mem_bytes *out,
                    char *err, size_t errn);

/* The activations one layer of kind `kind` (WL_LAYER_*) saves for its
** backward that activation offload sends to the host and brings back,
** bytes per micro-batch on one chip, under the plan's recompute (the count
** mem_transformer holds, less MaxText's tensors named device). p and o as
** mem_setup made them. */
double mem_layer_saved_bytes(const wl_tf_dims *d, const plan *p, const mem_opts *o, int kind);

/* A model state: the ZeRO stage, its HSDP shard group and the offload --
** the parts of a plan mem_transformer_states varies. */
typedef struct {
  int zero;
  int64_t hsdp;
  plan_offload offload;
} mem_state;

/* One plan under several model states: what the states share -- the
** layers, the activations in flight, the split, the temporaries but
** ZeRO's -- worked out once by mem_prep_set, then each state's memory by
** mem_prep_state, exactly what mem_transformer gives for the plan with
** that state (the same operations in the same order) at a fraction of
** its work (the planner checks dozens of states per plan). A mem_prep
** belongs to one thread; it reads d, and p's pp_layers, while in use. */
typedef struct mem_prep mem_prep;
mem_prep *mem_prep_new(void); /* NULL when out of memory */
void mem_prep_free(mem_prep *mp);
/* p's model state (zero, hsdp, offload) is not read */
void mem_prep_set(mem_prep *mp, const wl_tf_dims *d, const plan *p, const mem_opts *o);
/* mem_transformer of the set plan with model state st: 0, or -1 with err */
int mem_prep_state(mem_prep *mp, const mem_state *st, mem_bytes *out, char *err, size_t errn);
/* The same, only the figures a search reads, of the worst stage: its
** peak, weights, gradients, optimizer, runtime and communicators (as
** mem_bytes has them) and whether it fits; the stage's other figures are
** not built. */
typedef struct {
  double peak, weights, gradients, optimizer, runtime, comm, capacity;
  bool fits;
} mem_peak;
int mem_prep_peak(mem_prep *mp, const mem_state *st, mem_peak *out, char *err, size_t errn);

typedef struct {
  char what[96];        /* "micro-batch 4 -> 1 (accumulation 1 -> 4)" */
  double saves_bytes;   /* old peak - new peak */
  double peak;          /* the new peak, recomputed with the changed plan */
  bool fits;            /* the change alone is enough */
  plan p;               /* the changed plan and options */
  mem_opts o;
  double step_time_s;   /* the changed plan's step, when a caller simulated it (else 0) */
} mem_fix;

enum { MEM_MAX_FIXES = 10 };

/* For a plan that does not fit, the fixes that lower its peak, ordered by how
** little they change the plan: smaller micro-batch (more accumulation),
** selective recompute, full recompute, a higher ZeRO stage, sequence
** parallelism, more TP, more PP, bf16 instead of fp32. Each kind appears at
** most once, with the smallest change of that kind that fits, or else the
** strongest one. Returns the count (0 when the plan fits), or -1 with err. */
/* ok (may be NULL): the plan rules a candidate must also keep, asked of
** each before it is priced (simulate passes plan_check's, so a fix is a
** plan that can run); mp is the plan as mem_setup gives it. */
typedef bool (*mem_plan_ok)(void *ctx, const plan *mp);
int mem_fixes(const wl_tf_dims *d, const plan *p, const mem_opts *o, mem_plan_ok ok, void *ctx,
              mem_fix out[MEM_MAX_FIXES], char *err, size_t errn);

#endif
