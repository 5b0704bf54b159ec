/*
** step_int.h -- what the step's modules share (sim/step.c, stepcost.c,
** stepwhole.c, fixes.c); the rest of the program includes step.h.
*/
#ifndef TPUSIM_STEP_INT_H
#define TPUSIM_STEP_INT_H

#include "step.h"

typedef struct {
  double t[GRAPH_PHASE_COUNT];
  double attn_fwd; /* the attention core: scores to context (for selective recompute) */
  double mm_fwd;   /* the forward's other kernels that hold a matmul (the same) */
  /* the forward's kernels by the layer submodule their root op computes
  ** (graph_module; [GRAPH_MOD_NONE]: the rest): what a recompute of a list
  ** of modules runs again */
  double mod_fwd[GRAPH_MODULES];
  /* of t, the kernels ahead of the layers in the forward and after them in
  ** the backward: the embedding's, which a pipeline's first stage runs (the
  ** final norm, head and loss after the layers are the last stage's) */
  double first[GRAPH_PHASE_COUNT];
} phase_times;

typedef struct {
  step_op *v;
  int n, cap;
} op_times;

/* Times g on hw kernel by kernel (stepcost.c); with `ops`, also lists the
** kernels of layer 0 with their times. */
int step_time_graph_ops(const hw_model *hw, const graph *g, bool flash, opcost *costs,
                        phase_times *out, op_times *ops, char *err, size_t errn);

/* The layer kind timed for `kind` (-1: the model's own, its first layer's). */
int step_layer_kind(const wl_tf_dims *d, int kind);

/* The share of a causal attention core's arithmetic a FlashAttention
** kernel over `keys` keys a query is charged: the causal half where hw
** gives the kernel's measured rate (the rate counts that half and holds the
** diagonal blocks' waste), else the 128-key blocks it computes,
** (n + 1) / 2n of n x n. */
double step_causal_share(const hw_model *hw, double keys);

/* A FlashAttention backward recomputes the scores' product: 5 batched
** GEMMs where the graph's unfused backward has 4 (Dao et al. 2022,
** arXiv:2205.14135). */
#define STEP_FLASH_BWD_DOTS 1.25

/* Whether op m of g is one of a layer's attention-core dots (QK^T, PV
** and their gradients: the dots on the rank-5 [B, kv, S, group, T]
** scores), which a FlashAttention kernel runs at step_flash_share of
** their arithmetic. */
bool step_attention_dot(const graph *g, const graph_op *m);

/* FlashAttention's share of the attention core's arithmetic in a layer of
** `kind` (-1: the model's own) at seq tokens over cp ranks: all of it
** without a mask (an encoder); a causal core's step_causal_share over the
** keys a query sees; a sliding window's band (each query's W keys) where
** the model builds its local layers as causal blocks of W. */
double step_flash_share(const hw_model *hw, const wl_tf_dims *d, int kind, double seq, double cp);

/* The chips a plan's layers are timed on (stepcost.c): hw, or *ah with the
** framework's attention kernel (FlashAttention-2 on Hopper); *ghw the
** low-precision unit for the layers' GEMMs (*gh, or NULL: hw's own). */
const hw_model *step_layer_hw(const hw_model *hw, const plan *p, hw_model *ah, hw_model *gh,
                              const hw_model **ghw);

/* How step_time_graph_gemm runs a graph's kernels. */
typedef struct {
  /* 0 for no FlashAttention, else the share of the attention core's
  ** arithmetic it does (a causal mask's half) */
  double flash;
  /* the layers' attention has no mask (d->unmasked): a fused kernel with a
  ** measured full-mask rate runs at it (chip.attention_unmasked) */
  bool unmasked;
  /* 0: a dense model; else the layers' batched rank-3 dots are grouped
  ** expert GEMMs, timed at the chip's grouped-GEMM rate for their tokens
  ** per expert, reading the weights of moe's share of the local experts
  ** (1: all; fewer when few tokens leave some experts without any: a
  ** decode step) */
  double moe;
  /* the stack runs a grouped GEMM as one library GEMM per expert
  ** (framework_moe_gemm_per_expert), each at its own shape's rate
  ** (hw_grouped_gemm_shape_factor) */
  bool per_expert;
  /* the kernels of PyTorch without a compiler (sim/fuse.h
  ** fuse_graph_eager), else XLA-style fusion */
  bool eager;
} step_kernels;

/* The same, with a low-precision unit (gemm_hw, NULL: hw) for the
** layers' linear GEMMs, the kernels run as k says. */
int step_time_graph_gemm(const hw_model *hw, const hw_model *gemm_hw, const graph *g,
                         const step_kernels *k, opcost *costs, phase_times *out, op_times *ops,
                         char *err, size_t errn);
/* A plan's step_kernels for its layers of kind `kind` (-1: the model's
** own): FlashAttention's share, the MoE flags and eager kernels. */
step_kernels step_kernels_of(const hw_model *hw, const wl_tf_dims *d, const plan *p, int kind);

/* The model as one chip of plan p holds it (stepcost.c): its
** tensor-parallel shard at one micro-batch with `layers` layers (0: all);
** m itself for an HLO module (*owned NULL). NULL with err. */
const model *step_shard_of(const model *m, const plan *p, int64_t layers, model **owned,
                           char *err, size_t errn);

/* The same with `layers` layers all of kind `kind` (WL_LAYER_* bits; -1:
** the model's own first layers). */
const model *step_shard_kind_of(const model *m, const plan *p, int64_t layers, int kind,
                                model **owned, char *err, size_t errn);

/* The plan with a kernel-cost cache: its own, or a new one in *own. */
int step_with_cache(plan *p, opcost **own, char *err, size_t errn);

/* A model the chips replicate, or an imported HLO module: the whole step
** (stepwhole.c); r holds step_costs' pieces. With tl, its timeline. */
int step_simulate_whole(const model *m, const hw_model *hw, const plan *p, step_result *r,
                        step_timeline *tl, char *err, size_t errn);

/* The fix search (fixes.c): a fix of the memory model as a plan, with
** expert parallelism ep (inside dp x cp, as the plan counts it) and its
** chips. False when ep does not divide dp x cp. */
bool step_fix_plan(const plan *mp, int64_t ep, plan *out);

/* The plan rules a fix of the memory search must keep (mem_fixes' ok):
** plan_check's, on the fix as a plan; offload needs a host link to
** offload over. */
typedef struct {
  const model *m;
  const hw_model *hw;
  int64_t ep;
} step_fix_rules;
bool step_fix_runs(void *ctx, const plan *mp);

/* The chips of a group of n that share a node when at most max_per fit:
** the group spread evenly over the fewest nodes it needs (a scheduler's
** placement: 64 ranks on 36-GPU halves of NVL72 racks are 2 x 32), the
** largest divisor of n within max_per, so no node holds a part-group. */
static inline int64_t step_group_per_node(int64_t n, int64_t max_per) {
  if (max_per >= n) return n;
  if (max_per < 1) return 1;
  int64_t per = max_per;
  while (per > 1 && n % per) per--;
  return per;
}

/* The chips of a group of `size` ranks at stride `stride` in Megatron's
** rank order (tp innermost, then cp, then dp/ep) that share a node. */
static inline int64_t step_group_node_members(const hw_model *hw, int64_t size, int64_t stride) {
  int64_t node = hw->chips_per_node;
  return stride >= node ? 1 : step_group_per_node(size, node / stride);
}

/* The TPU slices a group of n chips spans when its members sit `stride`
** chips apart in the plan's rank order (tensor innermost, then context,
** data, pipeline outermost): 1 when the machine is one slice (or a GPU),
** or the group fits within one; n when each member is a slice or more from
** the next; else the slices its n x stride chips cover. 1 when the members
** do not split evenly into slices (a layout tpusim does not place), and
** for the whole machine (net_build splits it into its platform slices). */
int64_t step_group_slices(const hw_model *hw, const plan *p, int64_t n, int64_t stride);
/* A collective of such a group, through memo when there is one: over its
** slices joined by DCN when it spans several (no Reduction Server there),
** else coll_time_s's with `slices` and `per` chips a node. */
double step_group_coll_s(coll_memo *memo, const hw_model *hw, const plan *p, int64_t n,
                         int64_t stride, int64_t per, coll_op op, double bytes, int64_t slices,
                         int64_t reducers, coll_algo algo, bool formula, char *err, size_t errn);

#endif
