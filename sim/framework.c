/*
** framework.c -- see framework.h. Each profile is written from the
** framework's own documentation and code (the source line of each entry).
*/
#include "framework.h"

#include "../base/strutil.h"

#include <stdio.h>
#include <string.h>

/* What Megatron-Core does in every Megatron-Core profile (the source line
** of "megatron-core" below says where each was read); they differ in the
** attention kernel, the MoE token dispatcher and the MoE recipes' overlap. */
#define MEGATRON_CORE_STACK                                                                        \
  .attention = PLAN_ATTN_FLASH, .grad_sync = PLAN_GRAD_OVERLAP, .zero = 1,                         \
  .param_gather_overlap = true, .tp_overlap = true, .recompute = PLAN_RECOMPUTE_NONE,              \
  .grads_16bit = true, .moe_gemm_per_expert = true, .loss_grad_in_place = true,                    \
  .norm_quant_fused = true,                                                                        \
  .lora_targets = "linear_qkv,linear_proj,linear_fc1,linear_fc2", .lora_rank = 32,                 \
  .recompute_modules = true, .tp_bwd_async = true, .megatron_optimizer = true
/* ... as its 2025-26 recipes run it: Transformer Engine's attention backend
** order on Hopper and Blackwell (cuDNN's fused attention first), the flex
** dispatcher (DeepEP, HybridEP) and the weights held in the fp8/fp4 recipe's
** format only */
#define MEGATRON_CORE_FEATURES                                                                     \
  MEGATRON_CORE_STACK, .attention_cudnn = true, .moe_node_dedup = true, .lowp_params = true

/* torchtitan's stack, shared by its profiles (the whole field list but
** the optimizer form, which changed on 2025-02-24) */
#define TORCHTITAN_STACK                                                                           \
  .attention = PLAN_ATTN_FLASH, .grad_sync = PLAN_GRAD_OVERLAP, .zero = 3,                         \
  .param_gather_overlap = true, .recompute = PLAN_RECOMPUTE_SELECTIVE, .selective_mm_share = 0.5,  \
  .attention_fa2 = true, .logit_grad_bytes = 8, .compile_choice = true, .fsdp2_copy_out = true,    \
  .tp_fp8_gather = true, .cp_pytorch = true
#define TORCHTITAN_SOURCE                                                                          \
  "torchtitan docs: FSDP2 fully_shard with forward/backward prefetch; TP without async-TP by "     \
  "default; scaled_dot_product_attention (its flash backend: FlashAttention-2); "                  \
  "activation_checkpoint mode 'selective' "                                                        \
  "(op) in its Llama 3 train configs, whose policy saves the outputs of its save list "            \
  "(aten.mm, SDPA) but every second mm in forward order and replays the rest "                     \
  "(parallelize.py _save_list, _custom_policy); loss F.cross_entropy on .float() logits, "         \
  "eager (train.py:131-138); torch.compile per transformer block as its published "                \
  "benchmarks run it (training.compile, off by default in its train configs: --compile "           \
  "off for those runs); FSDP2 copies each gathered unit out of the all-gather buffer on "          \
  "the compute stream (_fsdp_collectives.py foreach_all_gather_copy_out), in the forward "         \
  "and the backward's re-gather; under tensorwise float8 the tensor-parallel all-gathers "        \
  "move float8 (parallelize_llama.py apply_tp: torchao's Float8ColwiseParallel, "                  \
  "Float8RowwiseParallel, PrepareFloat8ModuleInput); context parallelism through PyTorch's "      \
  "context_parallel (torch.distributed.tensor.experimental._attention): K and V repeated to the "  \
  "query heads before SDPA (models/llama/model.py repeat_kv), all-gathered once under the first, "  \
  "local block (_ContextParallelOptions.rotate_method ALL_GATHER, torchtitan's default "          \
  "context_parallel_rotate_method 'allgather'; 'alltoall' passes them round a ring: --cp-comm "     \
  "ring), round-robin load balance, dK and dV accumulated and passed round the ring in fp32 "       \
  "(_templated_ring_attention_backward, convert_to_f32)"

const framework frameworks[] = {
    {/* plain */
     .what = "a data-parallel training loop (PyTorch DDP) with fused attention",
     .attention = PLAN_ATTN_FLASH,
     .grad_sync = PLAN_GRAD_OVERLAP,
     .recompute = PLAN_RECOMPUTE_NONE,
     .source = "PyTorch DDP: bucketed all-reduce overlapped with backward; torch SDPA flash attention",
     .compile_choice = true,
    },
    {/* megatron-core */
     .what = "Megatron-Core / NeMo / Megatron-Bridge (2024-26) with Transformer Engine",
     MEGATRON_CORE_FEATURES,
     /* --ep-overlap on: DeepEP's SMs, which HybridEP takes too (Megatron-LM
     ** transformer_config.py moe_deepep_num_sms: 'historical default 20';
     ** moe_hybridep_num_sms: 'None uses the default from DeepEP') */
     .moe_a2a_sms = 20,
     .source = "Megatron-LM docs: distributed optimizer (--use-distributed-optimizer), --overlap-grad-reduce, "
               "--overlap-param-gather; Megatron-Bridge performance recipes set tp_comm_overlap "
               "(Transformer Engine userbuffers) and cuDNN fused attention; no recomputation unless "
               "--recompute-granularity is given; MoE: the flex token dispatcher with DeepEP / HybridEP "
               "(moe_flex_dispatcher_backend in the Megatron-Bridge DeepSeek-V3, Kimi K2 and GB200 Qwen3 "
               "recipes), which sends a token once per destination node, then once per rank; gradient buffers in bf16 "
               "(grad_reduce_in_fp32=False in the performance recipes); grouped expert GEMMs through "
               "Transformer Engine's GroupedLinear (moe_grouped_gemm=True), one cuBLAS GEMM per local "
               "expert (nvte_multi_stream_cublas_gemm); under an fp8/fp4 recipe the linear weights are "
               "held in its format only, the fp32 master the one high-precision copy (Megatron-Bridge "
               "mixed_precision.py: fp8_param_gather=True, fp4_param_gather for NVFP4; TE fp8_model_init)",
    },
    {/* maxtext */
     .what = "MaxText on TPU (JAX/XLA): parameters sharded by fsdp, splash attention",
     .attention = PLAN_ATTN_FLASH,
     .grad_sync = PLAN_GRAD_OVERLAP,
     .zero = 3,
     .param_gather_overlap = true,
     .recompute = PLAN_RECOMPUTE_FULL,
     .source = "MaxText base.yml: ici_fsdp_parallelism shards weights and optimizer state; XLA's latency-hiding "
               "scheduler overlaps the gathers and reduce-scatters with compute; attention: splash (Pallas); "
               "remat_policy 'full' by default (base.yml); weight_dtype float32 with no bf16 copy; "
               "gradients reduced in bf16 where each weight-gradient dot makes them (XLA: "
               "shared/reference/hlo's MaxText Llama 3 8B step), kept in fp32; 'selective' is "
               "remat_policy 'minimal' (layers/models.py: jax.checkpoint_policies."
               "checkpoint_dots_with_no_batch_dims): the weight matmuls' outputs the backward reads "
               "are saved, the attention core and the elementwise ops replayed; JAX's remat "
               "recomputes only what the backward reads (its partial evaluation drops the rest), so "
               "'full' replays all but the MLP's down projection (and a parallel block's output "
               "projection), whose outputs only feed the residual sum",
     .weights_fp32_only = true,
     .jax_remat = true,
     /* shared/reference/hlo/nv_maxtext_llama3_8b_1n8g_after_spmd_partitioner.hlo:
     ** %all-reduce = bf16[4096,14336] all-reduce(%dot.19) inside the scanned
     ** backward's while body, then a dynamic-slice by partition-id (the
     ** reduce-scatter); no fp32 weight-shaped reduction in the module */
     .grads_reduced_16bit = true,
    },
    {/* megatron-2021 */
     .what = "Megatron-LM as in Narayanan et al. SC21 (local DDP, no fused attention)",
     .attention = PLAN_ATTN_SCORES,
     .grad_sync = PLAN_GRAD_AFTER_BACKWARD,
     .recompute = PLAN_RECOMPUTE_NONE,
     .source = "Narayanan et al. 2021 (arXiv:2104.04473); Megatron-LM 2021 local DDP all-reduces after the "
               "backward; attention scores through a fused softmax kernel; fp16 gradients kept and "
               "all-reduced in fp16 (--accumulate-allreduce-grads-in-fp32 is forced only for bf16); "
               "the optimizer step's passes of megatron/core/optimizer/optimizer.py (prepare_grads, "
               "clip_grad_norm, _copy_main_params_to_model_params)",
     .fp16_grads_16bit = true,
     .loss_grad_in_place = true,
     .megatron_optimizer = true,
    },
    {/* megatron-2022 */
     .what = "Megatron-LM as in Korthikanti et al. 2022 (sequence parallelism, selective recompute)",
     .attention = PLAN_ATTN_SCORES,
     .grad_sync = PLAN_GRAD_AFTER_BACKWARD,
     .recompute = PLAN_RECOMPUTE_NONE,
     .source = "Korthikanti et al. 2022 (arXiv:2205.05198): the same DDP and attention as 2021, with --sp "
               "and --recompute selective as flags; the backward's tensor-parallel all-reduce overlapped "
               "with the weight gradient's GEMM (sec. 6.2)",
     .fp16_grads_16bit = true,
     .loss_grad_in_place = true,
     .tp_bwd_async = true,
     .megatron_optimizer = true,
    },
    {/* torchtitan */
     .what = "torchtitan (PyTorch FSDP2, torch.compile, SDPA flash attention)",
     TORCHTITAN_STACK,
     .source = TORCHTITAN_SOURCE "; fused AdamW (optimizer.implementation 'fused' by default since "
               "#881, 2025-02-24)",
    },
    {/* torchtitan-2024 */
     .what = "torchtitan before 2025-02-24 (AdamW in torch.optim's foreach form)",
     TORCHTITAN_STACK,
     .adam_foreach = true,
     .source = TORCHTITAN_SOURCE "; AdamW in torch.optim's foreach form (optimizer.fused off by "
               "default, optimizer.py: foreach = not fused, until #881 made fused the default on "
               "2025-02-24) after clip_grad_norm_ (training.max_norm 1.0)",
    },
    {/* llm-foundry */
     .what = "MosaicML LLM Foundry (PyTorch FSDP FULL_SHARD, flash attention)",
     .attention = PLAN_ATTN_FLASH,
     .grad_sync = PLAN_GRAD_OVERLAP,
     .zero = 3,
     .param_gather_overlap = true,
     .recompute = PLAN_RECOMPUTE_FULL,
     .attention_fa2 = true,
     .source = "llm-foundry train yamls: fsdp_config sharding_strategy FULL_SHARD, "
               "activation_checkpointing true; attention: its benchmark tables (H100 and A100, 2023) "
               "ran submit_benchmarks.py's default attn_impl triton (commit b2a43a1), the Triton "
               "FlashAttention of flash_attn_triton.py with ALiBi as a bias, within 4 % of "
               "FlashAttention-1 on A100 (FlashAttention-2 README benchmark, causal, head dim 128): "
               "FA1's measured rate (chip.attention_fa1_efficiency), where newer releases call "
               "flash-attn 2; PyTorch "
               "eager, no torch.compile (its benchmark runs: scripts/train/benchmarking "
               "submit_benchmarks.py has no compile option, 'rm compile support in profiling', "
               "commit b2a43a1): F.layer_norm, GELU and each residual add a kernel of its own",
     .eager = true,
     .compile_choice = true,
     .attention_fa1 = true,
    },
    {/* megatron-core-26.08 */
     .what = "Megatron-Core as the Megatron-Bridge 26.08 performance recipes run it (EP all-to-all overlap)",
     MEGATRON_CORE_FEATURES,
     .source = "the megatron-core profile, and the 26.08 MoE recipes' MXFP8 path on NVL72 "
               "(Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/qwen/common.py "
               "_enable_hybridep_full_iteration_mxfp8, called by the gb200/gb300 fp8mx Qwen3 recipes): "
               "CommOverlapConfig(overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True) with "
               "full-iteration CUDA graphs and HybridEP; its bf16/fp8-cs recipes and the B200/B300 ones "
               "(moe_a2a_overlap=False, the alltoall dispatcher) do not overlap; HybridEP on 32 SMs "
               "(perf_recipes/_common.py _benchmark_common: moe_hybridep_num_sms = 32); that MXFP8 path "
               "also fuses the expert MLP into one CuTeDSL kernel (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 in "
               "the recipes' env_vars), the others keep GroupedLinear's per-expert GEMMs",
     .moe_a2a_overlap = true,
     .moe_a2a_sms = 32,
    },
    {/* megatron-core-24.07 */
     .what = "Megatron-Core as NeMo's launcher ran it from 24.01 to 24.07 (FlashAttention-2, cuDNN "
             "attention off)",
     MEGATRON_CORE_STACK,
     .attention_fa2 = true,
     /* --ep-overlap on: as megatron-core's */
     .moe_a2a_sms = 20,
     /* the alltoall dispatcher: a token's copy to each expert (the flex
     ** dispatcher's DeepEP was published in February 2025); fp8 with the
     ** bf16 weights kept (fp8_params unset in the launcher's configs) */
     .moe_node_dedup = false,
     .lowp_params = false,
     .source = "the megatron-core profile, with the attention NeMo-Framework-Launcher's releases 24.01 "
               "to 24.07 select: launcher_scripts/conf/config.yaml sets env_vars NVTE_FUSED_ATTN: 0 "
               "('Disable cudnn FA until we've tested it more', commit 562dcb45, 2024-02-13; removed "
               "by 04b8d098 'enable fused attention', 2024-08-29, first released in 24.09), so "
               "Transformer Engine's DotProductAttention, which on sm90 prefers cuDNN's "
               "F16_arbitrary_seqlen backend over flash-attn (TE v1.4 attention.py), runs the "
               "container's flash-attn 2, context-parallel steps included (AttnFuncWithCP); MoE "
               "through the alltoall token dispatcher (the launcher's 24.07 Mixtral configs: "
               "moe_token_dispatcher_type alltoall), each token's copy sent to each of its experts; "
               "fp8 as fp8: True, fp8_hybrid: True with the 16-bit weights kept (no fp8_params in "
               "the launcher's training configs, e.g. llama/llama3_70b.yaml, or its fp8 examples)",
    },
    {.what = NULL}};

const char *const framework_names[] = {"plain", "megatron-core", "maxtext", "megatron-2021",
                                       "megatron-2022", "torchtitan", "torchtitan-2024", "llm-foundry",
                                       "megatron-core-26.08", "megatron-core-24.07", NULL};

_Static_assert(sizeof frameworks / sizeof *frameworks ==
                   sizeof framework_names / sizeof *framework_names,
               "one profile per name, in the same order");

int framework_check_compile(int f, char *msg, size_t n) {
  if (f >= 0 && frameworks[f].compile_choice) return 0;
  char list[128] = "";
  size_t at = 0;
  for (int i = 0; framework_names[i] && at < sizeof list; i++)
    if (frameworks[i].compile_choice) {
      int w = snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", framework_names[i]);
      if (w < 0) break;
      at += (size_t)w;
    }
  snprintf(msg, n, "the %s profile has no eager mode to choose (XLA compiles every step, Megatron's "
           "kernels are fused by hand); --compile applies to the PyTorch profiles: %s",
           f >= 0 ? framework_names[f] : "?", list);
  return -1;
}

/* The fused attention kernels a chip may hold a measured rate for, by
** plan_attn_kernel: what --explain calls it and the chip's figure. */
static const struct {
  const char *label, *field;
} KERNELS[] = {[PLAN_AK_FA1] = {"the FlashAttention-1 generation's", "attention_fa1_efficiency"},
               [PLAN_AK_FA2] = {"FlashAttention-2's", "attention_fa2_efficiency"},
               [PLAN_AK_CUDNN] = {"cuDNN's fused attention", "attention_cudnn_*"}};

/* Chip c's measured rates for kernel ak (PLAN_AK_FA1..PLAN_AK_CUDNN);
** false when it holds none. cuDNN's backward takes the forward's where
** only that is measured; its rate-by-length table goes to *seq where the
** chip holds one apart (chip.attention_cudnn_seq), else NULL. */
static bool kernel_rates(const hw_chip *c, int ak, double *fwd, double *bwd, const double **seq) {
  double f = ak == PLAN_AK_FA1   ? c->attention_fa1_efficiency
             : ak == PLAN_AK_FA2 ? c->attention_fa2_efficiency
             : ak == PLAN_AK_CUDNN ? c->attention_cudnn_fwd_efficiency
                                   : 0;
  *fwd = *bwd = f > 0 ? f : 0;
  *seq = NULL;
  if (ak == PLAN_AK_CUDNN && c->attention_cudnn_bwd_efficiency > 0) *bwd = c->attention_cudnn_bwd_efficiency;
  for (int i = 0; ak == PLAN_AK_CUDNN && i < HW_ATTN_POINTS && !*seq; i++)
    if (c->attention_cudnn_seq_eff[i] > 0) *seq = c->attention_cudnn_seq_eff;
  return f > 0;
}

const char *framework_attention_kernel(int f, int ak, const hw_chip *c, double *fwd, double *bwd,
                                       const char **field, const double **seq) {
  const framework *fw = f >= 0 ? &frameworks[f] : NULL;
  const double *own;
  *fwd = *bwd = 0;
  *field = NULL;
  if (seq) *seq = NULL;
  bool mine = ak == PLAN_AK_FRAMEWORK && fw;
  /* the profile's kernel, in the order its flags were read before */
  const bool calls[] = {[PLAN_AK_FA1] = ak == PLAN_AK_FA1 || (mine && fw->attention_fa1),
                        [PLAN_AK_FA2] = ak == PLAN_AK_FA2 || (mine && fw->attention_fa2),
                        [PLAN_AK_CUDNN] = ak == PLAN_AK_CUDNN || (mine && fw->attention_cudnn)};
  for (int k = PLAN_AK_FA1; k <= PLAN_AK_CUDNN; k++)
    if (calls[k] && kernel_rates(c, k, fwd, bwd, &own)) {
      *field = KERNELS[k].field;
      if (seq) *seq = own;
      return KERNELS[k].label;
    }
  return NULL;
}

int framework_check_attention_kernel(int ak, const hw_model *hw, char *err, size_t errn) {
  double fe, be;
  const double *tab;
  if (ak <= PLAN_AK_FRAMEWORK || ak >= PLAN_AK_BEST || kernel_rates(&hw->chip, ak, &fe, &be, &tab)) return 0;
  char list[96] = "";
  size_t at = 0;
  for (int k = PLAN_AK_FA1; k <= PLAN_AK_CUDNN; k++)
    if (kernel_rates(&hw->chip, k, &fe, &be, &tab)) {
      int w = snprintf(list + at, sizeof list - at, "%s, ", plan_attn_kernel_names[k]);
      if (w > 0 && (size_t)w < sizeof list - at) at += (size_t)w;
    }
  return str_errf(err, errn, "--attention-kernel %s: %s holds no measured rate for it "
                  "(chip.%s); nearest: --attention-kernel %sbest (its own figures) or framework",
                  plan_attn_kernel_names[ak], hw->name,
                  ak == PLAN_AK_CUDNN ? "attention_cudnn_fwd_efficiency" : KERNELS[ak].field, list);
}

/* A layer whose matmuls the op-level policies list: dense, with multi-
** head (or grouped-query) attention and an MLP; not MoE, MLA or a hybrid
** sub-block. */
static bool listed_layer(const wl_tf_dims *d, int kind) {
  return d && d->hidden > 0 && d->heads > 0 && !((kind & WL_LAYER_MOE) && d->experts > 0) &&
         d->kv_lora_rank <= 0 &&
         !(kind & (WL_LAYER_MAMBA | WL_LAYER_NO_FFN | WL_LAYER_NO_MIXER | WL_LAYER_GDN));
}

/* A listed layer's matmuls, in x out each, in forward order (torchtitan's
** models/llama/model.py: wq, wk, wv, then wo; w1, w3, w2, or fc1, fc2
** ungated); returns their count. */
static int layer_matmuls(const wl_tf_dims *d, double mm[7]) {
  double hd = (double)(d->head_dim > 0 ? d->head_dim : d->hidden / d->heads);
  double h = (double)d->hidden, q = (double)d->heads * hd;
  double kv = (double)(d->kv_heads > 0 ? d->kv_heads : d->heads) * hd, ff = (double)d->ffn_hidden;
  mm[0] = h * q, mm[1] = mm[2] = h * kv, mm[3] = q * h, mm[4] = h * ff, mm[5] = h * ff, mm[6] = ff * h;
  return d->gated ? 7 : 6; /* ungated: mm[5] is fc2, ff x h, the same product */
}

double framework_selective_share(int f, const wl_tf_dims *d, int kind) {
  double share = f >= 0 ? frameworks[f].selective_mm_share : 0;
  if (share <= 0 || !listed_layer(d, kind)) return share;
  double mm[7], all = 0, even = 0;
  int n = layer_matmuls(d, mm);
  for (int i = 0; i < n; i++) all += mm[i], even += i % 2 ? mm[i] : 0;
  return all > 0 ? even / all : share;
}

double framework_full_unread_weights(int f, const wl_tf_dims *d, int kind, unsigned saved) {
  if (f < 0 || !frameworks[f].jax_remat || !listed_layer(d, kind)) return 0;
  double w[7];
  int n = layer_matmuls(d, w);
  /* what nothing reads (the down projection; a parallel block's output
  ** projection), and what MaxText's custom policy kept (plan.h PLAN_RN_*:
  ** q, k, v, the output projection, the MLP's first matmuls) */
  bool unread[7] = {saved & PLAN_RN_QUERY, saved & PLAN_RN_KEY, saved & PLAN_RN_VALUE,
                    d->parallel_block || (saved & PLAN_RN_OUT), saved & PLAN_RN_MLPWI_0,
                    d->gated ? (saved & PLAN_RN_MLPWI_1) != 0 : true, true};
  double sum = 0;
  for (int i = 0; i < n; i++) sum += unread[i] ? w[i] : 0;
  return sum;
}

bool framework_jax_remat(int f) { return f >= 0 && frameworks[f].jax_remat; }

double framework_full_comm_share(int f, const wl_tf_dims *d, int kind, bool sp) {
  if (!(framework_full_unread_weights(f, d, kind, 0) > 0)) return 1;
  return d->parallel_block ? (sp ? 0.5 : 0) : (sp ? 0.75 : 0.5);
}

double framework_full_s(int f, const wl_tf_dims *d, int kind, unsigned saved, double fw, double at,
                        double mm) {
  double unread = framework_full_unread_weights(f, d, kind, saved);
  if (!(unread > 0)) return fw;
  double w[7], all = 0;
  int n = layer_matmuls(d, w);
  for (int i = 0; i < n; i++) all += w[i];
  /* a kept context (the core's output and log-sum-exp) leaves the core's
  ** forward out: its backward reads nothing else of it */
  double rec = fw - (mm > 0 ? mm * unread / all : 0) - (saved & PLAN_RN_CONTEXT ? at : 0);
  return rec > 0 ? rec : 0;
}

double framework_selective_s(int f, const wl_tf_dims *d, int kind, double fw, double at, double mm) {
  if (f >= 0 && frameworks[f].jax_remat && listed_layer(d, kind))
    return fw - mm > at ? fw - mm : at;
  double share = framework_selective_share(f, d, kind);
  if (share <= 0) return at;
  double other = fw - at - mm;
  return share * mm + (other > 0 ? other : 0);
}

int framework_find(const char *name) {
  for (int i = 0; name && framework_names[i]; i++)
    if (strcmp(framework_names[i], name) == 0) return i;
  return -1;
}

/* indices into framework_names: megatron-core, maxtext, plain */
int framework_default(hw_kind kind) { return kind == HW_GPU ? 1 : kind == HW_TPU ? 2 : 0; }

void framework_apply(int f, plan *p) {
  const framework *w = &frameworks[f];
  p->framework = f;
  p->attention = w->attention;
  p->grad_sync = w->grad_sync;
  p->zero = w->zero;
  p->param_gather_overlap = w->param_gather_overlap;
  p->tp_overlap = w->tp_overlap;
  p->recompute = w->recompute;
  p->eager = w->eager;
}

bool framework_moe_a2a_overlap(int f, const plan *p, const hw_model *hw) {
  if (f < 0 || p->ep_overlap == PLAN_EP_OVERLAP_OFF) return false;
  if (p->ep_overlap == PLAN_EP_OVERLAP_ON) return frameworks[f].moe_a2a_sms > 0;
  /* the 26.08 recipes call _enable_hybridep_full_iteration_mxfp8 from their
  ** fp8mx configs on GB200/GB300 (NVLINK_DOMAIN_SIZE 72) only */
  return frameworks[f].moe_a2a_overlap && p->gemm == PLAN_GEMM_MXFP8 && hw->chips_per_node >= 72;
}

/* The chip's fp8 attention figures for p's recipe (0 when none). */
static void fp8_attention_figures(const plan *p, const hw_chip *c, double *f, double *b) {
  bool mx = p->gemm == PLAN_GEMM_MXFP8;
  *f = mx ? c->attention_mxfp8_fwd_speedup : c->attention_fp8_fwd_speedup;
  *b = mx ? c->attention_mxfp8_bwd_speedup : c->attention_fp8_bwd_speedup;
}

/* Whether p's attention core is cuDNN's flash kernel on hw. */
static bool cudnn_flash(const plan *p, const hw_model *hw) {
  double fe, be;
  const char *field;
  return p->attention == PLAN_ATTN_FLASH &&
         framework_attention_kernel(p->framework, p->attn_kernel, &hw->chip, &fe, &be, &field, NULL) &&
         field == KERNELS[PLAN_AK_CUDNN].field;
}

bool framework_fp8_attention(const plan *p, const hw_model *hw, double *fwd, double *bwd) {
  double f, b;
  fp8_attention_figures(p, &hw->chip, &f, &b);
  bool on = p->fp8_attention == PLAN_FP8_ATTN_ON;
  if (p->fp8_attention == PLAN_FP8_ATTN_FRAMEWORK) {
    int w = p->framework;
    on = w >= 0 && frameworks[w].moe_a2a_overlap && p->gemm == PLAN_GEMM_MXFP8 && p->ep > 1 &&
         hw->chips_per_node >= 72 && f > 0 && b > 0 && cudnn_flash(p, hw);
  }
  on = on && f > 0 && b > 0;
  if (fwd) *fwd = on ? f : 1;
  if (bwd) *bwd = on ? b : 1;
  return on;
}

int framework_check_fp8_attention(const plan *p, const hw_model *hw, char *err, size_t errn) {
  if (p->fp8_attention != PLAN_FP8_ATTN_ON) return 0;
  if (p->gemm != PLAN_GEMM_FP8 && p->gemm != PLAN_GEMM_FP8_CS && p->gemm != PLAN_GEMM_MXFP8 &&
      p->gemm != PLAN_GEMM_NVFP4)
    return str_errf(err, errn, "--fp8-dot-product-attention on runs the attention core in fp8 "
                    "under a low-precision recipe (Transformer Engine's fp8_dpa); the plan trains "
                    "in %s (nearest: --precision fp8, fp8-cs, mxfp8 or nvfp4)", plan_precision_label(p));
  if (!cudnn_flash(p, hw))
    return str_errf(err, errn, "--fp8-dot-product-attention on: fp8 attention is cuDNN's fused "
                    "kernel, which Transformer Engine calls; this plan's core is %s (nearest: "
                    "--framework megatron-core, or --attention-kernel cudnn with --attention flash)",
                    p->attention != PLAN_ATTN_FLASH ? "not a flash kernel (--attention scores)"
                                                    : "another kernel");
  double f, b;
  fp8_attention_figures(p, &hw->chip, &f, &b);
  if (f <= 0 || b <= 0)
    return str_errf(err, errn, "--fp8-dot-product-attention on: %s has no measured %s attention "
                    "rate forward and backward (chip.attention_%s_fwd_speedup and _bwd_; b200, "
                    "b300, gb200 and gb300 have both%s)", hw->name,
                    p->gemm == PLAN_GEMM_MXFP8 ? "MXFP8" : "fp8",
                    p->gemm == PLAN_GEMM_MXFP8 ? "mxfp8" : "fp8",
                    p->gemm == PLAN_GEMM_MXFP8 ? "" : "; h100-sxm and h200 the per-tensor ones");
  return 0;
}

bool framework_cp_pytorch(int f) { return f >= 0 && frameworks[f].cp_pytorch; }

bool framework_cp_repeats_kv(int f, const wl_tf_dims *d) {
  return framework_cp_pytorch(f) && d->kv_lora_rank <= 0;
}

plan_cp_comm framework_cp_comm(const plan *p) {
  if (p->cp_comm != PLAN_CP_FRAMEWORK) return p->cp_comm;
  /* PyTorch's context_parallel gathers K and V by default (rotate method
  ** allgather); the others pass them round a ring */
  return framework_cp_pytorch(p->framework) ? PLAN_CP_ALL_GATHER : PLAN_CP_RING;
}

bool framework_moe_node_dedup(const plan *p) {
  if (p->moe_dispatcher != PLAN_DISPATCH_FRAMEWORK) return p->moe_dispatcher == PLAN_DISPATCH_FLEX;
  return p->framework >= 0 && frameworks[p->framework].moe_node_dedup;
}

int framework_check_recompute_modules(int f, char *msg, size_t n) {
  if (f < 0 || frameworks[f].recompute_modules) return 0;
  snprintf(msg, n, "framework %s has no list of modules to recompute (selective recompute is its "
           "own policy); the Megatron-Core profiles have one (megatron-core, megatron-core-24.07, "
           "megatron-core-26.08)",
           framework_names[f]);
  return -1;
}

unsigned framework_cheap_recompute_modules(int f, const wl_tf_dims *d) {
  if (f < 0 || !frameworks[f].recompute_modules) return 0;
  return (d->experts > 0 ? PLAN_RM_MOE_ACT | PLAN_RM_LAYERNORM : 0) |
         (d->kv_lora_rank > 0 ? PLAN_RM_MLA_UP_PROJ | PLAN_RM_LAYERNORM : 0);
}

int framework_check_ep_overlap(int f, char *msg, size_t n) {
  if (f >= 0 && frameworks[f].moe_a2a_sms > 0) return 0;
  snprintf(msg, n, "%s%s has no expert-parallel all-to-all overlap; the Megatron-Core "
           "profiles have it (megatron-core, megatron-core-24.07, megatron-core-26.08)",
           f >= 0 ? "framework " : "",
           f >= 0 ? framework_names[f] : "the plain stack (no --framework)");
  return -1;
}

bool framework_moe_gemm_per_expert(int f, const plan *p, const hw_model *hw) {
  /* the recipes that overlap the all-to-alls also set
  ** NVTE_CUTEDSL_FUSED_GROUPED_MLP=1: one fused kernel for the experts */
  return f >= 0 && frameworks[f].moe_gemm_per_expert && !framework_moe_a2a_overlap(f, p, hw);
}
