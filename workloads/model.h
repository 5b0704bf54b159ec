/*
** model.h -- loading a model: a model.json, a HuggingFace config.json or an
** XLA HLO text module (a path, or the bare name of an example in
** workloads/examples/), built into one training-step graph.
**
** A loaded model is an in-memory value: the file is read and parsed once,
** by model_load, and kept parsed (model_spec). Another graph of the same
** model -- one tensor-parallel shard, one layer, another batch -- is built
** from that value by model_derive, without touching the file system, so a
** plan search of thousands of plans opens the model file once.
*/
#ifndef TPUSIM_MODEL_H
#define TPUSIM_MODEL_H

#include <stdio.h>

#include "../base/diag.h"
#include "graph.h"
#include "wl.h"

typedef struct {
  int64_t seq_len;      /* 0: from the file */
  int64_t global_batch; /* 0: from the file */
  const char *precision; /* NULL: from the file; else "bf16", "fp32", ... */
  bool forward_only;    /* build no backward pass or optimizer */
  int64_t shard_tp;     /* per-chip shard under tensor parallelism (0 or 1: whole) */
  int64_t only_layers;  /* build this many layers (0: all) */
  /* with only_layers: every layer built is of kind layer_kind (WL_LAYER_*
  ** bits) instead of the model's own first layers */
  bool one_kind;
  int layer_kind;
  /* context parallelism: this chip's queries are seq/cp tokens of each
  ** sequence, and its attention reads keys and values of all seq tokens
  ** (what ring attention computes on a chip in total) (0 or 1: none) */
  int64_t shard_cp;
  /* expert parallelism: this chip holds experts/ep of each MoE layer's
  ** experts, which receive ep times this chip's routed tokens (0 or 1:
  ** all experts); expert tensor parallelism splits each expert's FFN etp ways */
  int64_t shard_ep, shard_etp;
  /* the busiest expert chip's routed tokens over the even share (0 or 1:
  ** even; wl_train.ep_load) */
  double ep_load;
  /* inference: tokens already in each sequence's KV cache (transformers:
  ** attention reads them besides the seq_len new ones; 0: none), and the
  ** storage dtype of weight matrices and filters (GDT_PRED, 0: the compute
  ** dtype; GDT_S4, GDT_S8, GDT_F8 for weight-only quantization) */
  int64_t kv_cache;
  graph_dtype weight_dtype;
  graph_dtype kv_dtype; /* the KV cache's storage (GDT_PRED, 0: the compute dtype; GDT_F8, GDT_S8) */
  /* an inference engine's graph (sim/serve_step.c): builders that know one
  ** (cnn) fold batch norm into the convolution and leave out the loss; and
  ** the dtype of the values between kernels (GDT_PRED, 0: the compute
  ** dtype; GDT_S8 or GDT_F8 for a W8A8 engine) */
  bool inference;
  graph_dtype act_dtype;
  /* `--set FIELD=VALUE` overrides, applied to the file's JSON before it is
  ** read (model_load; model_derive rebuilds from the changed tree):
  ** FIELD a member the file has, at its top level or one object down
  ** ("train.global_batch"); VALUE JSON of the member's type (a bare word
  ** for a string member). n_set of them, borrowed. */
  const char *const *set;
  int n_set;
  /* fine-tuning over the file's train block (--finetune, --lora-rank,
  ** --lora-targets): the method, one of wl_method_names (NULL: the
  ** file's); the adapters' rank (0: the file's); their target modules,
  ** comma-separated ("q,k,v"; NULL: the file's). Each target must name a
  ** linear module of the model, or model_load reports the ones it has. */
  const char *finetune;
  int64_t lora_rank;
  const char *lora_targets;
  /* lora_targets are a framework's defaults (the library's names for all
  ** its linear layers): those the model lacks are skipped, as the library
  ** matches modules by name; one must match */
  bool lora_lenient;
} model_opts;

/* The most --set overrides one command takes. */
#define MODEL_MAX_SETS 32

/* What the file said, parsed (model.c): the JSON tree the family builder
** reads (an HF config translated to model.json fields), the train block as
** the file gives it. Shared read-only by the models derived from it. */
typedef struct model_spec model_spec;

typedef struct {
  char name[64];
  char family[32];
  char format[16]; /* "model.json", "hf-config", "hlo" */
  char *path;      /* the file, or "built-in: workloads/examples/x.json" (any length) */
  model_spec *spec; /* NULL for an HLO module (a compiled program: nothing to rebuild) */
  bool owns_spec;   /* model_load's model owns it; derived ones borrow it */
  graph *g;
  int loss; /* -1 for an imported HLO step */
  wl_train train;
  wl_info info;
  int64_t params;           /* weights, adapters excluded */
  int64_t trainable_params; /* what gets gradients (adapters under LoRA) */
  int64_t active_params;    /* per token (MoE); = params for dense models */
  int64_t expert_params;    /* weights inside routed experts (what ep shards); 0 for dense */
} model;

/* Returns NULL after reporting (file:line:col where it applies) to dg. */
model *model_load(const char *arg, const model_opts *o, diag *dg);

/* The same model built again under other options (a shard, fewer layers,
** another batch, sequence or precision), from m's parsed file: no file is
** read. Options start from what the file said, as model_load's do. The
** result borrows m's spec: free it before m. Safe to call from several
** threads on one m. Returns NULL after reporting to dg (an HLO module
** cannot be rebuilt: use m itself). */
model *model_derive(const model *m, const model_opts *o, diag *dg);
void model_free(model *m);

/* `tpusim graph` output (model_print.c): a readable summary, the JSON
** object of the contract (malloc'd), and Graphviz. */
/* Parameters one item (token or sample) reads: active_params, less the
** embedding rows a sample does not look up (DLRM's tables). */
int64_t model_active_per_item(const model *m);
void model_print_summary(const model *m, FILE *out);
char *model_summary_json(const model *m);
void model_print_dot(const model *m, FILE *out);

/* The names of the built-in examples, for help and errors ("gpt3-175b, ..."). */
void model_example_names(char *buf, size_t n);

#endif
