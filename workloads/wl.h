/*
** wl.h -- what every model family shares: the training settings read from
** model.json, the builder interface, and layers built from graph ops
** (linear with LoRA, norms, softmax, losses).
**
** A family builder appends the forward pass of one step to a graph and
** returns the scalar loss; workloads/train.c then appends backward and the
** optimizer update. Layers are decomposed into graph ops exactly as a
** framework would emit them, so their costs come from the op formulas.
*/
#ifndef TPUSIM_WL_H
#define TPUSIM_WL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "graph.h"
#include "../base/jin.h"

/* Training precisions by name, as model files, flags and JSON spell them
** (NULL-terminated, in the order messages list them), and their dtypes:
** the one table every reader and writer of a precision name uses. */
extern const char *const wl_precision_names[];
/* "bf16" for GDT_BF16, ...; NULL for a dtype that is no training precision. */
const char *wl_precision_name(graph_dtype dt);
/* Returns 0 and sets *out, or -1 for an unknown name. */
int wl_precision_parse(const char *name, graph_dtype *out);

typedef enum { WL_SGD, WL_MOMENTUM, WL_ADAM, WL_ADAMW } wl_optimizer;
typedef enum { WL_FULL, WL_LORA, WL_QLORA } wl_method;
/* wl_method's names, as model.json's train.method and --finetune spell
** them, NULL-terminated */
extern const char *const wl_method_names[];
/* The method the first len characters of name spell: 0 and *out, or -1. */
int wl_method_parse(const char *name, size_t len, wl_method *out);

/* Requirements a model puts on hardware ("requires" in model.json). */
/* What a model needs of its hardware (model.json "requires", or set by its
** family): bit i is wl_requirement_names[i]. fp64 arithmetic; custom CUDA
** kernels; tree-boosting libraries (XGBoost, LightGBM, CatBoost), which run
** on CPUs and NVIDIA GPUs only. Which chips meet each is sim's rule
** (plan_hw_supports, sim/plan.h). */
enum { WL_REQ_FP64 = 1u << 0, WL_REQ_CUDA = 1u << 1, WL_REQ_TREE_LIBS = 1u << 2 };
extern const char *const wl_requirement_names[]; /* "fp64", "custom_cuda_kernels", "tree_libraries" */

#define WL_MAX_TARGETS 16
/* The longest sequence tpusim accepts (seq_len, --seq): 1.6x the longest
** published context window, Llama 4 Scout's 10,485,760 tokens (its HF
** max_position_embeddings, which becomes the default seq_len). docs/limits.md */
#define WL_MAX_SEQ (1LL << 24)
#define WL_MAX_SEQ_WHY \
  "the longest published context window is 10,485,760 tokens (Llama 4 Scout)"

struct wl_lora_log {
  unsigned hits;
  int n_modules;
  char modules[24][16];
  /* the smallest side of an adapted weight (0: none adapted) and its name:
  ** a rank past it is no low-rank update */
  int64_t min_side;
  char min_name[96];
};

typedef struct {
  int64_t global_batch; /* sequences (or samples) per optimizer step */
  int64_t seq_len;      /* tokens per sequence; 1 for non-sequence models */
  graph_dtype compute;  /* activations and matmul inputs: bf16, f16, f32, f64, f8 */
  bool master_fp32;     /* 16-bit compute with fp32 master weights (mixed precision) */
  wl_optimizer optimizer;
  wl_method method;
  int64_t lora_rank;
  double lora_alpha;
  int n_targets; /* LoRA target modules: "q", "k", "v", "o", "gate", "up", "down", ... */
  char targets[WL_MAX_TARGETS][16];
  bool lora_given; /* the file's train.lora block was there (rank and targets its own) */
  /* while a model builds: which targets matched a module (bit i for
  ** targets[i]) and the modules asked about, for model.c's check (NULL:
  ** not kept) */
  struct wl_lora_log *lora_log;
  bool lora_lenient; /* default targets (a framework's, or q and v): those the model lacks are skipped */
  /* For the simulator's per-chip graphs: build one tensor-parallel shard
  ** (heads, kv heads, FFN and vocabulary divided by shard_tp) of only
  ** `only_layers` layers (0: all). 1 and 0 build the model as written. */
  int64_t shard_tp, only_layers;
  /* with only_layers: every layer built is of kind layer_kind (WL_LAYER_*)
  ** rather than the model's own first layers (model_opts.one_kind) */
  bool one_kind;
  int layer_kind;
  /* context parallelism: queries are seq/shard_cp tokens, keys and values
  ** all seq (0 or 1: none); expert parallelism: experts/shard_ep experts
  ** with ep x the routed tokens, each expert's FFN split shard_etp ways
  ** (shard_ep 0: experts split by tp as before) */
  int64_t shard_cp, shard_ep, shard_etp;
  /* expert parallelism under uneven routing: this chip is the busiest of
  ** its expert group, receiving ep_load times the even share of the
  ** routed tokens (dropless routing; 0 or 1: even) */
  double ep_load;
  /* Inference (sim/serve_step.c): tokens of each sequence already in the
  ** KV cache, which every new token's attention also reads (0: none; a
  ** decode step is seq_len 1 with kv_cache = the context so far); the
  ** dtype matrices and filters are stored in (GDT_PRED, 0: the compute
  ** dtype), dequantized to the compute dtype where they are read */
  int64_t kv_cache;
  graph_dtype weight_dtype;
  graph_dtype kv_dtype; /* the KV cache's dtype (GDT_PRED, 0: the compute dtype) */
  /* model_opts.inference and act_dtype: read by the cnn builder only */
  bool inference;
  graph_dtype act_dtype;
} wl_train;

/* A transformer's dimensions, for the memory model and sharding rules
** (zero for other families). */
typedef struct {
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq;
  int64_t experts, top_k;
  /* group-limited routing: experts in route_groups groups, a token's top_k
  ** inside route_topk_groups of them (0: no limit) */
  int64_t route_groups, route_topk_groups;
  int64_t moe_ffn; /* a routed expert's FFN size (0: ffn_hidden) */
  /* moe.capacity_factor where the model gives one: every expert computes
  ** that many times its even share of the routed tokens, padded, and drops
  ** the rest (GShard's capacity); 0: dropless routing */
  double capacity_factor;
  bool gated; /* swiglu/geglu: three FFN matrices */
  double dropout; /* attention and hidden dropout probability */
  bool tied, parallel_block, encoder;
  bool unmasked; /* attention over every key: an encoder, or a decoder with is_causal false */
  /* Layers that differ (DeepSeek's first dense layers, Llama 4's MoE every
  ** other layer, Gemma's local/global attention): the builders set these,
  ** wl_tf_layer_kind reads them. */
  int64_t first_dense;  /* the first N decoder layers have a dense FFN */
  int64_t moe_every;    /* past those, every moe_every-th layer is MoE (0 or 1: all) */
  int64_t window;       /* sliding-window attention span in tokens (0: none) */
  bool window_chunked;  /* the local span is chunks (Llama 4), not a sliding band */
  int64_t global_every; /* with a window: every global_every-th layer attends globally (0: all local) */
  /* DeepSeek sparse attention (0: none): every layer attends the dsa_topk
  ** keys a lightning indexer of dsa_heads heads of dsa_dim picks (window
  ** is then dsa_topk, all layers local, for the core's cost); the indexer
  ** runs on every dsa_every-th layer. A cache keeps every key still. */
  int64_t dsa_topk, dsa_heads, dsa_dim, dsa_every;
  /* Experts (0 when dense; a routed expert's width is moe_ffn above): the
  ** always-on shared experts' total width; the weights inside routed
  ** experts in this graph (what ep shards) */
  int64_t shared_ffn_hidden, expert_params;
  /* Multi-head latent attention (DeepSeek-V2/V3; 0 when not MLA): head_dim
  ** is then qk_nope + qk_rope, the query and key width per head */
  int64_t q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim;
  int64_t mtp_layers; /* multi-token prediction modules (DeepSeek-V3: 1) */
  int64_t mtp_depth;  /* MTP depths run through them: mtp_layers, or more with a
                      ** repeated module (Megatron-Core mtp_use_repeated_layer) */
  /* Hybrid models (Nemotron-H: hybrid_override_pattern): layer i is
  ** hybrid[i] of WL_HYBRID_CHARS, one sub-block each -- M a Mamba-2 mixer,
  ** * attention, E a mixture of experts, - a dense MLP; NULL for a plain
  ** transformer. It points into the model's parsed file (model_spec), so
  ** it lives as long as the model loaded from it. */
  const char *hybrid;
  /* Mamba-2 (Dao & Gu 2024): heads of head_dim channels (d_inner = heads x
  ** head_dim), B and C in groups of ssm_state wide, the causal conv's
  ** kernel, the SSD scan's chunk (0 when the model has no Mamba layer) */
  int64_t mamba_heads, mamba_head_dim, ssm_state, ssm_groups, conv_kernel, ssm_chunk;
  int64_t moe_latent; /* latent MoE (Nemotron 3 Super): experts work in this width (0: hidden) */
  /* Gated DeltaNet linear attention (Yang et al. 2024; Qwen3-Next, Qwen3NextConfig's
  ** names): every layer but each gdn_every-th has a Gated DeltaNet mixer in
  ** place of attention (full_attention_interval; 0: none), with gdn_k_heads
  ** key and gdn_v_heads value heads of gdn_k_dim and gdn_v_dim, a causal conv
  ** of gdn_conv taps, the chunked delta rule in chunks of gdn_chunk tokens */
  int64_t gdn_every, gdn_k_heads, gdn_v_heads, gdn_k_dim, gdn_v_dim, gdn_conv, gdn_chunk;
  bool attn_gate;   /* attention output gated by sigmoid(x W_g) (Qwen3-Next's q_proj x 2) */
  bool shared_gate; /* a MoE layer's shared expert scaled by sigmoid(x w) (Qwen2-MoE, Qwen3-Next) */
} wl_tf_dims;

/* The kinds of decoder layer, as bits: what the step model times apart. */
#define WL_LAYER_MOE 1   /* its FFN is a mixture of experts */
#define WL_LAYER_LOCAL 2 /* sliding-window (local) attention */
/* Hybrid layers (one sub-block each): a Mamba-2 mixer and nothing else; a
** mixer (attention) with no FFN; an FFN (dense, or MoE with WL_LAYER_MOE)
** with no mixer. */
#define WL_LAYER_MAMBA 4
#define WL_LAYER_NO_FFN 8
#define WL_LAYER_NO_MIXER 16
/* a Gated DeltaNet mixer where attention would be (wl_tf_dims.gdn_every) */
#define WL_LAYER_GDN 32
#define WL_LAYER_KINDS 64
/* hybrid_override_pattern's characters, as Megatron-Core spells them
** (megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols): Mamba,
** attention, MoE, MLP */
#define WL_HYBRID_CHARS "M*E-"
/* Checks the hybrid pattern at obj[key] (a string of WL_HYBRID_CHARS, one a
** layer): each other character reported at its own line:column with the
** valid set, a length other than `layers` at the value. Counts of each
** character go to counts[4] (NULL: not wanted). Returns 1 when valid, 0
** when absent, -1 after reporting. */
int wl_hybrid_check(jin *j, const cJSON *obj, const char *key, int64_t layers, int64_t counts[4]);
/* The layer kind (WL_LAYER_*) a pattern character names; 0 for another. */
int wl_hybrid_kind(char ch);
/* The kind of decoder layer i (0-based) of a transformer with dims d. */
int wl_tf_layer_kind(const wl_tf_dims *d, int64_t i);

typedef struct {
  wl_tf_dims tf;
  double per_step;     /* tokens (or samples, rows) processed per step */
  const char *unit;    /* "tokens", "samples", "rows" */
  unsigned requires;   /* WL_REQ_* */
  bool whole_step;     /* the builder wrote the whole step itself: no autodiff (gbdt) */
  int64_t active_params; /* parameters used per token (MoE); 0 = all */
  int64_t job_steps;     /* steps of the whole job when the family defines it (gbdt: trees); 0 */
  int64_t devices;       /* an imported HLO module: the devices it was compiled for
                            (num_partitions x replica_count); 0 otherwise */
} wl_info;

/* Appends the forward pass for spec (the model.json object, read through
** j for positions) and returns the scalar loss op, or -1 after reporting. */
typedef int (*wl_family_fn)(graph *g, jin *j, const cJSON *spec, const wl_train *t,
                            wl_info *info);

/* Top-level keys every model.json may have; builders pass this to jin_only
** as the second list. */
extern const char *const wl_common_keys[];

/* Roles for wl_weight: QLoRA quantizes linear-layer matrices only. */
enum { WL_W_LINEAR, WL_W_OTHER };

/* A data input fed each step (tokens, images, labels). */
int wl_input(graph *g, const char *name, graph_shape s);
/* A model weight in the compute dtype, trainable under full training and
** frozen under LoRA/QLoRA; under QLoRA a frozen linear matrix is stored in
** 4 bits (plus one 8-bit block scale per 64 weights) and dequantized here.
** Returns the op to compute with. */
int wl_weight(graph *g, const wl_train *t, const char *name, graph_shape s, int role);
/* x [..., in] @ W [in, out] (+ bias) for the layer `name`; `module` ("q",
** "up", ...) decides whether LoRA adapters (x A B * alpha/r) are added. */
int wl_linear(graph *g, const wl_train *t, int x, const char *name, const char *module,
              int64_t out, bool bias);
bool wl_is_target(const wl_train *t, const char *module);
/* Whether one target names module: the module's own name, or a
** library's name for it (Megatron-Core's linear_qkv for q, k and v;
** HF PEFT's q_proj for q; wl.c TARGET_ALIASES) */
bool wl_target_matches(const char *target, const char *module);
/* x + b, broadcasting b over x's trailing dimension(s). */
int wl_add_bias(graph *g, int x, int b);
/* Multiplies every element of x by a scalar constant. */
int wl_scale(graph *g, int x);
/* Normalization over the last dimension, with learned gain (and bias). */
int wl_layernorm(graph *g, const wl_train *t, int x, const char *name);
int wl_rmsnorm(graph *g, const wl_train *t, int x, const char *name);
/* x / ||x|| over the last dimension, in f32, no gain (FLA's l2norm of a
** linear-attention head's queries and keys) */
int wl_l2norm(graph *g, int x);
/* Softmax over the last dimension, computed in f32 (max, subtract, exp,
** sum, divide) and given as out_dt; marked GRAPH_RULE_SOFTMAX, so the
** backward reads only the result. */
int wl_softmax(graph *g, int x, graph_dtype out_dt);
/* Mean cross-entropy of logits [..., V] against integer labels [...], in
** f32: log-softmax plus a one-hot gather. Returns a scalar. */
int wl_cross_entropy(graph *g, int logits, int labels);
/* Mean squared error, a scalar. */
int wl_mse(graph *g, int pred, int target);
/* Binary cross-entropy on logits [N, 1] against labels [N, 1], a scalar. */
int wl_bce(graph *g, int logits, int labels);

#endif
