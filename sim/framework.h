/*
** framework.h -- what a training framework does in a step, as named
** features (never a multiplier): its attention kernel, when it syncs
** gradients, whether it shards the optimizer, overlaps its parameter
** gathers and its tensor-parallel collectives, and what its allocator
** keeps. `--framework NAME` applies one to a plan; flags given on the
** command line win over the profile's defaults.
*/
#ifndef TPUSIM_FRAMEWORK_H
#define TPUSIM_FRAMEWORK_H

#include <stdbool.h>

#include "../hw_models/hw.h"
#include "../workloads/wl.h"
#include "plan.h"

typedef struct {
  const char *what;          /* one line: the stack and version it stands for */
  plan_attention attention;  /* the attention kernel */
  plan_grad_sync grad_sync;  /* gradient reduction during or after backward */
  int zero;                  /* the default sharding: 1 distributed optimizer, 3 FSDP */
  bool param_gather_overlap; /* the sharded parameters' all-gather runs under the forward */
  bool tp_overlap;           /* tensor-parallel collectives overlapped with the GEMMs */
  /* without tp_overlap: the backward's input-gradient collective runs
  ** asynchronously under the weight-gradient GEMM of the same column-
  ** parallel linear, and under sequence parallelism the input's re-gather
  ** under the input-gradient GEMM (Megatron-LM's
  ** LinearWithGradAccumulationAndAsyncCommunication; Korthikanti et al.
  ** 2022 sec. 6.2: "we overlap all-reduce communication with the linear
  ** weight's gradient computation") */
  bool tp_bwd_async;
  /* Megatron's optimizer step around the fused Adam: the main gradients
  ** cast to fp32 from a 16-bit buffer, their L2 norm for clip_grad, fp16's
  ** unscale and inf check, the new fp32 parameters copied into the model's
  ** 16-bit weights, and the gradient buffer zeroed for the next step
  ** (step_update_extra_bytes) */
  bool megatron_optimizer;
  plan_recompute recompute;  /* activation recomputation unless the plan says */
  /* what "selective" recomputes: 0, the attention core (Megatron,
  ** Korthikanti et al. 2022); else an op-level policy that recomputes this
  ** share of the matmul calls and replays every other kernel, the
  ** attention core kept (torchtitan's saves its save list's outputs --
  ** aten.mm, SDPA -- but every second mm's): framework_selective_share
  ** weighs the calls by their FLOPs where the layer's matmuls are known */
  double selective_mm_share;
  /* JAX's remat (jax.checkpoint): the backward recomputes only what it
  ** reads of the values the policy did not save -- remat's partial
  ** evaluation dead-code-eliminates the rest. "selective" is
  ** checkpoint_dots_with_no_batch_dims (MaxText's remat_policy
  ** 'minimal'): every weight matmul's output the backward reads is saved,
  ** none recomputed, the attention core (a Pallas call, not a dot) and the
  ** elementwise ops replayed; "full" (policy None) recomputes all but the
  ** matmuls whose outputs only feed the residual sum (framework_full_s) */
  bool jax_remat;
  /* it calls FlashAttention-2 (PyTorch SDPA's flash backend in 2024,
  ** flash-attn 2), not the chip's newest fused kernel */
  bool attention_fa2;
  /* its MoE dispatch sends a token over the scale-out network once per
  ** destination node and forwards it inside the node over NVLink once per
  ** destination rank (DeepEP / HybridEP through Megatron-Core's flex
  ** dispatcher), rather than once per chosen expert (NCCL all-to-all) */
  bool moe_node_dedup;
  /* its context parallelism is PyTorch's experimental context_parallel
  ** (torch.distributed.tensor.experimental._attention, as torchtitan calls
  ** it): K and V move with the query heads (its models repeat them before
  ** SDPA), all-gathered under the first, local block by default (rotate
  ** method allgather; alltoall is a ring); dK and dV go round the ring in
  ** fp32 */
  bool cp_pytorch;
  const char *source;        /* where each feature was read */
  /* memory: gradient buffers in the 16-bit training dtype rather than fp32
  ** (Megatron-Bridge's performance recipes set grad_reduce_in_fp32=False,
  ** perf_recipes/_common.py _perf_precision) */
  bool grads_16bit;
  /* memory: gradient buffers in fp16 when training in fp16 (Megatron-LM's
  ** --accumulate-allreduce-grads-in-fp32 defaults to False and arguments.py
  ** forces it on only for bf16: "bfloat16 requires gradient accumulation and
  ** all-reduce to be done in fp32"; its local DDP sizes main_grad in the
  ** parameters' dtype otherwise) */
  bool fp16_grads_16bit;
  /* memory: parameters kept in fp32 only, cast to the compute dtype where a
  ** layer uses them, no separate 16-bit copy (MaxText weight_dtype float32) */
  bool weights_fp32_only;
  /* gradients reduced in the compute dtype although kept in fp32: each
  ** weight-gradient dot's 16-bit output is reduced where it is made, then
  ** converted to the fp32 parameters' dtype (XLA under JAX: the parameter's
  ** cast to bf16 is what the layer's dot reads) -- the data-parallel
  ** collective's bytes and the unsharded gradient a ZeRO-3 layer holds */
  bool grads_reduced_16bit;
  /* memory: bytes a logit the loss's backward holds beside the stored
  ** logits (0: none beyond them) */
  double logit_grad_bytes;
  /* Expert-parallel all-to-all overlap (Megatron-Core's
  ** --overlap-moe-expert-parallel-comm with --delay-wgrad-compute, MCore
  ** v0.14 "batch-level overlapping to hide EP-A2A communication"): the
  ** forward of one micro-batch and the backward of the previous one run
  ** merged layer by layer, each one's dispatch and combine under the other's
  ** compute. The recipes that set it do so for MXFP8 on an NVL72 domain
  ** only, so the profile applies it there (framework_moe_a2a_overlap). */
  bool moe_a2a_overlap;
  /* the streaming multiprocessors its MoE dispatcher's kernels occupy while
  ** they run (DeepEP / HybridEP communicate from SMs, not copy engines;
  ** Megatron-Bridge's perf recipes set moe_hybridep_num_sms = 32): the
  ** compute an overlapped all-to-all hides behind runs on the rest. 0: the
  ** stack has no such overlap (--ep-overlap is refused) */
  int moe_a2a_sms;
  /* its grouped expert GEMM is Transformer Engine's GroupedLinear, which
  ** issues one cuBLAS GEMM per local expert over 4 streams
  ** (general_grouped_gemm -> nvte_multi_stream_cublas_gemm; gemm.h
  ** num_streams = 4): each expert's GEMM a kernel launch of its own */
  bool moe_gemm_per_expert;
  /* a selective recompute of a list of a layer's submodules
  ** (Megatron-Core's --recompute-modules, TransformerConfig.recompute_modules:
  ** core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts);
  ** false: --recompute selective:LIST is refused */
  bool recompute_modules;
  /* memory: the loss writes its gradient into the stored fp32 softmax in
  ** place (Megatron's vocab-parallel cross entropy, sim/memory.c
  ** loss_grad_bytes) */
  bool loss_grad_in_place;
  /* it runs PyTorch eager, no graph compiler (--compile off): each op its
  ** own kernel except a library's fused ones (sim/fuse.h fuse_graph_eager);
  ** false for a compiled stack (torch.compile, XLA) and for one whose
  ** kernels are fused by hand (Megatron's, Transformer Engine's), which
  ** the XLA-style fusion stands for */
  bool eager;
  /* --compile is meaningful: a PyTorch stack that may run with or without
  ** torch.compile (not XLA, which always compiles, nor Megatron's
  ** hand-fused kernels) */
  bool compile_choice;
  /* it calls a FlashAttention-1-generation kernel (llm-foundry's 2023
  ** benchmark tables: attn_impl triton, the Triton FlashAttention with ALiBi
  ** as a bias): the chip's attention_fa1_efficiency where it has one */
  bool attention_fa1;
  /* memory: under a Transformer Engine recipe (fp8, fp8-cs, mxfp8, nvfp4)
  ** the linear layers' weights are held in the recipe's format only, the
  ** fp32 master in the distributed optimizer the one high-precision copy:
  ** TE's fp8_model_init "will hold only FP8 copies of its parameters, as
  ** opposed to the default behavior where both higher precision and FP8
  ** copies are present", which Megatron-Core applies under
  ** --fp8-param-gather (and --fp4-param-gather for NVFP4), and the
  ** Megatron-Bridge recipes set both (mixed_precision.py
  ** bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_current_scaling_mixed,
  ** bf16_with_mxfp8_mixed: fp8_param_gather=True; bf16_with_nvfp4_mixed:
  ** fp4_param_gather=True) */
  bool lowp_params;
  /* it calls cuDNN's fused attention (Transformer Engine's
  ** DotProductAttention on Hopper: "sm90: cuDNN attention >
  ** flash-attention" in its backend order, docs/examples/attention), not
  ** the chip's fastest published kernel: the chip's attention_cudnn_*
  ** figures where it has them */
  bool attention_cudnn;
  /* the GEMMs fed by a layer norm (attention's QKV, a dense MLP's FC1, a
  ** Mamba-2 or Gated DeltaNet in_proj) take their low-precision operand from the norm
  ** kernel: Transformer Engine's LayerNormLinear quantizes inside the
  ** norm (layernorm_linear.py with_quantized_norm), fully for delayed
  ** scaling, with the amax computed in the norm kernel and one quantize
  ** pass for current scaling, unfused for MXFP8 and NVFP4
  ** (csrc/extensions/normalization.cpp: FULLY_FUSED, FUSED_NORM_AMAX_FP8,
  ** UNFUSED); Megatron-Core builds those GEMMs as TE's
  ** TELayerNormColumnParallelLinear */
  bool norm_quant_fused;
  /* FSDP2's all-gather copy-out: fully_shard gathers a unit's parameters
  ** into one flat buffer, then copies them out to each parameter's own
  ** tensor on the compute stream (torch.distributed.fsdp._fully_shard
  ** _fsdp_collectives.py foreach_all_gather_copy_out: split_with_sizes_copy
  ** after waiting on the all-gather's event), for the forward and again for
  ** the backward's re-gather (reshard_after_forward) -- one read and one
  ** write of the unit's 16-bit parameters each time. FSDP1's flat
  ** parameter is gathered in place (no copy) */
  bool fsdp2_copy_out;
  /* under tensorwise fp8 (--precision fp8) the tensor-parallel
  ** all-gathers move fp8, 1 B an element: torchtitan's apply_tp takes
  ** torchao's Float8ColwiseParallel, Float8RowwiseParallel and
  ** PrepareFloat8ModuleInput when float8 is on and not rowwise
  ** (models/llama3/parallelize_llama.py enable_float8_tensorwise_tp), which
  ** cast a block's input to float8 before its Shard(1) -> Replicate
  ** all-gather and the incoming gradient to float8 (NoopFwToFloat8BwDynamic)
  ** before the backward's all-gather (torchao float8/float8_tensor_parallel.py);
  ** the reduce-scatters of 16-bit outputs and input gradients stay 16-bit */
  bool tp_fp8_gather;
  /* AdamW as torch.optim's foreach implementation (fused=False, foreach=
  ** True): one multi-tensor kernel per step of the update, each a pass
  ** over its tensors (torch/optim/adam.py _multi_tensor_adam: weight decay
  ** mul_, lerp_ of m, mul_ and addcmul_ of v, sqrt, div_, add_ eps,
  ** addcdiv_ of p: 20 tensor reads and writes where the fused kernel makes
  ** 7), after clip_grad_norm_'s foreach norm and foreach mul_ of the
  ** gradients (3 more) */
  bool adam_foreach;
  /* --finetune lora without --lora-targets: the library's default adapter
  ** targets and rank (Megatron-Bridge peft/lora.py LoRA: target_modules
  ** linear_qkv, linear_proj, linear_fc1, linear_fc2, dim 32); NULL: the
  ** model file's, else HF PEFT's (workloads/model.c read_train) */
  const char *lora_targets;
  int lora_rank;
} framework;

/* The profiles, indexed as framework_names (NULL-terminated: the one list
** of names, which --framework and messages read); the first, "plain", is a
** zero-initialized plan's (the planner's and the library's: no framework
** features). */
extern const framework frameworks[];
extern const char *const framework_names[];

/* The index of a profile by name, or -1. */
int framework_find(const char *name);
/* Whether profile f has the --compile choice (framework.compile_choice):
** 0, or -1 with the refusal in msg, which names the profiles that have it. */
int framework_check_compile(int f, char *msg, size_t n);
/* The default profile of a chip kind: megatron-core on GPUs, maxtext on
** TPUs, a plain data-parallel loop on CPUs. */
int framework_default(hw_kind kind);
/* Sets p's framework-owned fields from profile f (p->framework = f). The
** caller then applies the flags the user gave. */
void framework_apply(int f, plan *p);
/* The attention kernel profile f calls on chip c -- or the one kernel
** ak names (--attention-kernel; PLAN_AK_FRAMEWORK: the profile's) --
** where it is not the one the chip's attention_*_efficiency figures hold
** (the FlashAttention-1 generation, FlashAttention-2, cuDNN's), with the
** chip's measured rates for it in *fwd and *bwd, the figure's name in
** *field and, where seq is not NULL, the kernel's own rate-by-keys table in
** *seq (cuDNN's, chip.attention_cudnn_seq, to stand for the chip's
** attention_seq; NULL when the chip's table stands); NULL when the chip's
** own figures stand (no such kernel, no figure for the profile's, or ak
** PLAN_AK_BEST). */
const char *framework_attention_kernel(int f, int ak, const hw_chip *c, double *fwd, double *bwd,
                                       const char **field, const double **seq);
/* 0 when chip hw holds a measured rate for kernel ak (or ak leaves the
** choice to the framework or the chip); else -1 and a message in err
** naming the kernels it has. */
int framework_check_attention_kernel(int ak, const hw_model *hw, char *err, size_t errn);
/* The share of a layer of kind `kind` (WL_LAYER_*) that "selective"
** recomputes under profile f, of its forward less the attention core: 0
** for Megatron's count (the core alone); under torchtitan's op-level policy
** (every second aten.mm in forward order recomputed, the ops between them
** replayed) the FLOP share of those matmuls in a dense layer of d -- wk, wo
** and w3 of wq, wk, wv, wo, w1, w3, w2 (0.365 for Llama 3 8B) -- and the
** profile's count share (selective_mm_share) where the layer's matmuls are
** not that list (MoE, MLA, hybrid sub-blocks). 0 under JAX's dots policy
** (jax_remat): no matmul recomputed. */
double framework_selective_share(int f, const wl_tf_dims *d, int kind);
/* A layer's selective recomputation under profile f, forward time, from
** its forward fw, attention core at and other matmul kernels mm: the core
** (Megatron's count), or the policy's share of the matmuls with every other
** kernel of the forward but the core (torchtitan's: what is not saved is
** replayed), or under the dots policy (MaxText's 'minimal') every kernel
** of the forward but the matmuls. On MoE, MLA and hybrid layers, whose
** saved sets the policies are not written for, the dots policy keeps
** Megatron's count and torchtitan's its count share of the matmuls
** (framework_selective_share). */
double framework_selective_s(int f, const wl_tf_dims *d, int kind, double fw, double at, double mm);
/* A layer's full recomputation under profile f, from its forward fw,
** attention core at and matmul kernels mm: the whole forward again
** (PyTorch's checkpoint reruns the function), or under JAX (jax_remat) the
** forward less the matmuls whose outputs the backward never reads -- the
** MLP's down projection, whose weight gradient reads its input and whose
** output only feeds the residual sum, and in a parallel block the
** attention output projection too -- and less what MaxText's custom
** policy kept (`saved`, PLAN_RN_* bits: the named matmuls' outputs, the
** attention core's with `context`); matmuls by their FLOP share of a
** dense layer's (MoE, MLA and hybrid layers: the whole forward). */
double framework_full_s(int f, const wl_tf_dims *d, int kind, unsigned saved, double fw, double at,
                        double mm);
/* The weights of a layer of kind `kind` whose matmuls full recompute does
** not replay under profile f (framework_full_s): the MLP's down
** projection, a parallel block's output projection and those `saved`
** names, under JAX; 0 otherwise. Unsharded (the model's), for FLOP
** counts. */
double framework_full_unread_weights(int f, const wl_tf_dims *d, int kind, unsigned saved);
/* Whether profile f recomputes as JAX's remat does (jax_remat). */
bool framework_jax_remat(int f);
/* The share of a layer's forward tensor-parallel collectives full
** recompute runs again under profile f: all (1), or under JAX those the
** replayed matmuls need -- not the reduction after the MLP's down
** projection (nor, in a parallel block, after the output projection):
** sequential 1/2 (two all-reduces) or 3/4 with sequence parallelism (its
** two all-gathers and two reduce-scatters), parallel 0 or 1/2. */
double framework_full_comm_share(int f, const wl_tf_dims *d, int kind, bool sp);
/* Whether profile f overlaps the MoE all-to-alls of plan p on hw: as
** p->ep_overlap says, else its recipes' rule (MXFP8 GEMMs, a scale-up
** domain of at least 72 chips). */
bool framework_moe_a2a_overlap(int f, const plan *p, const hw_model *hw);

/* Whether plan p on hw runs the attention core with fp8 operands
** (Transformer Engine's fp8 dot-product attention, cuDNN's fused kernel),
** and its rates then over the bf16 kernel's in *fwd and *bwd (either may be
** NULL; 1 when not): the chip's MXFP8 figures under an MXFP8 recipe
** (Transformer Engine runs MXFP8 attention there unless NVTE_DPA_FP8_RECIPE
** says otherwise: dot_product_attention.py's recipe table), its per-tensor
** fp8 ones under fp8, fp8-cs and nvfp4. On as --fp8-dot-product-attention
** says (framework_check_fp8_attention vets it), else as the profile's recipes
** do: megatron-core-26.08's MXFP8 MoE configs on NVL72 set it with their
** EP overlap (perf_recipes/qwen/common.py _enable_hybridep_full_iteration_mxfp8),
** where the core is cuDNN's flash kernel and the chip has the figures. */
bool framework_fp8_attention(const plan *p, const hw_model *hw, double *fwd, double *bwd);
/* 0 when plan p may run fp8 attention on hw (a low-precision recipe,
** flash attention through cuDNN's kernel, the chip's two figures for the
** recipe); else -1 with what is missing and the nearest choice in err. */
int framework_check_fp8_attention(const plan *p, const hw_model *hw, char *err, size_t errn);
/* Whether plan p's MoE dispatch sends a token once per destination node
** and permutes once on arrival (flex: DeepEP, HybridEP), as
** p->moe_dispatcher says, else as its profile does (moe_node_dedup); false:
** an NCCL all-to-all of a copy per chosen expert, sorted by local expert on
** arrival and unsorted before the combine (alltoall). */
bool framework_moe_node_dedup(const plan *p);
/* Whether framework f runs context parallelism as PyTorch's
** context_parallel does (cp_pytorch above). */
bool framework_cp_pytorch(int f);
/* Plan p's context-parallel exchange: as p->cp_comm says, else as its
** profile does (PyTorch's context_parallel: all-gather; the others: ring). */
plan_cp_comm framework_cp_comm(const plan *p);
/* Whether framework f's context parallelism moves K and V repeated to the
** query heads for a model of dims d (PyTorch's: torchtitan's models repeat
** them before SDPA; an MLA model's keys are per head already). */
bool framework_cp_repeats_kv(int f, const wl_tf_dims *d);
/* 0 when profile f can overlap the MoE all-to-alls (--ep-overlap on), else
** -1 with why in msg. */
int framework_check_ep_overlap(int f, char *msg, size_t n);
/* 0 when framework f recomputes a list of modules (--recompute
** selective:LIST), else -1 with why in msg */
int framework_check_recompute_modules(int f, char *msg, size_t n);
/* Megatron-Core's cheap, output-discarding recompute modules a model has
** (moe_act and layernorm for MoE layers, mla_up_proj and layernorm for
** MLA: what the Megatron-Bridge MoE recipes turn on before anything
** costlier -- Nemotron 3 Super and GPT-OSS: moe_act, layernorm; DeepSeek-V3
** and Kimi K2: mla_up_proj), as PLAN_RM_* bits; 0 without them or under a
** framework without a module list. What the memory fixes and the planner
** offer. */
unsigned framework_cheap_recompute_modules(int f, const wl_tf_dims *d);
/* Whether profile f launches a kernel per local expert for plan p's grouped
** GEMMs on hw (moe_gemm_per_expert, less the paths that fuse them). */
bool framework_moe_gemm_per_expert(int f, const plan *p, const hw_model *hw);

#endif
