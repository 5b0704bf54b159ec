/*
** serve_step.h -- one inference step of a model on one replica: the
** forward half of what training simulates, through the same graph
** builders (forward_only, kv_cache), fusion, op costs and chip timing
** (sim/stepcost.c's step_time_graph_gemm); no second cost model.
**
** A transformer serves in two steps (Pope et al. 2022, "Efficiently
** Scaling Transformer Inference"):
**   prefill -- the forward over a prompt of input_tokens, timed with the
**              training step's FlashAttention rule (causal blocks);
**   decode  -- one new token per sequence for `batch` sequences, each
**              attending to the context its KV cache holds (the graph's
**              kv_cache: the cached keys and values are read from HBM).
** Other families (cnn, mlp, dlrm, gbdt) serve one forward of `batch`
** samples.
**
** Quantization (docs/serving.md): weights stored in weight_dt (bf16, fp8,
** int8, int4) are what HBM holds and streams; the layers' GEMMs run at the
** activation dtype's rate on the chip (bf16, or fp8/int8 for W8A8), which
** the chip must have (hw "peak_flops_per_s" key), else the precision is
** refused with the reason.
*/
#ifndef TPUSIM_SERVE_STEP_H
#define TPUSIM_SERVE_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../hw_models/hw.h"
#include "../workloads/model.h"
#include "opcost.h"

/* A serving precision: how weights are stored and what the GEMMs run in. */
typedef struct {
  const char *name;      /* "bf16", "fp16", "fp8", "int8", "int8-wo", "int4" */
  const char *compute;   /* the activations' dtype (a training precision name) */
  graph_dtype weight_dt; /* storage of matrices and filters */
  graph_dtype kv_dt;     /* the KV cache (GDT_PRED: the compute dtype) */
  hw_dtype gemm;         /* the matrix-unit rate the layers' GEMMs run at */
  const char *what;      /* one line for --explain and the docs */
} serve_precision;

/* The dtype of the values between an inference engine's kernels: the
** weights' 8 bits for W8A8 (int8, fp8), GDT_PRED (the compute dtype)
** otherwise. The graph builders that model it (cnn) take it as
** model_opts.act_dtype, with batch norm folded (model_opts.inference). */
graph_dtype serve_act_dtype(const serve_precision *p);

/* The table, NULL-name terminated, in the order messages list them. */
extern const serve_precision serve_precisions[];
/* The entry named `name`, or NULL. */
const serve_precision *serve_precision_find(const char *name);
/* "bf16, fp16, fp8, int8, int8-wo, int4" into buf. */
void serve_precision_names(char *buf, size_t n);

typedef struct {
  int64_t tp;            /* tensor-parallel chips of one replica (1: none) */
  int64_t pp;            /* pipeline stages of one replica (1: none) */
  const serve_precision *prec;
  int64_t batch;         /* sequences decoded together / samples a forward */
  int64_t input_tokens;  /* prompt length (transformers) */
  int64_t output_tokens; /* tokens generated per request (transformers) */
  int64_t prefill_batch; /* prompts prefilled together for ttft_s (0: 1, one request alone) */
  int64_t encoder_seq;   /* an encoder's tokens a sample (0: the model's seq_len) */
  /* speculative decoding (spec_k 0: none): k tokens drafted per target
  ** step, each accepted with probability spec_accept; the draft model's
  ** decode (NULL: drafting taken as free, e.g. n-gram lookup) */
  int64_t spec_k;
  double spec_accept;
  const model *draft;
} serve_cfg;

typedef struct {
  bool generative;       /* a decoder transformer: prefill and decode */
  /* time to first token: the prefill of prefill_batch prompts (one alone by default) */
  double ttft_s;
  /* time per output token at `batch`, mean context (input + output / 2),
  ** speculative decoding's expected tokens per step applied */
  double tpot_s;
  double decode_step_s;  /* one decode step of the target at `batch` */
  double prefill_tokens_per_s, decode_tokens_per_s; /* per replica */
  double forward_s;      /* non-generative: one forward of `batch` samples */
  double samples_per_s;  /* non-generative */
  double spec_tokens_per_step; /* (1 - a^(k+1)) / (1 - a); 1 without */
  double tp_comm_decode_s;     /* the decode step's tensor-parallel all-reduces */
  double pp_p2p_decode_s;      /* the decode step's pipeline hand-offs */
  const char *decode_bound;    /* "memory" or "compute": the decode step's larger roof */
  double decode_bytes, decode_flops; /* one decode step on one chip */
  /* memory per chip (bytes) */
  double weights_bytes, kv_bytes_per_seq, activation_bytes, usable_bytes, capacity_bytes;
  double kv_mean_bytes_per_seq; /* at the mean context, input + output / 2 */
  /* sequences that fit beside the weights, each at the mean context
  ** (continuous batching with pages taken as sequences grow); samples for
  ** other families */
  int64_t max_batch;
  bool fits;         /* weights + activations + batch x KV fit */
} serve_result;

/* The KV cache of one sequence of `tokens` on one chip: 2 (keys, values)
** x attention layers (of one stage) x kv heads (of one tensor-parallel
** shard) x head_dim x bytes, in pages of SERVE_PAGE_TOKENS tokens
** (PagedAttention, Kwon et al. 2023: at most one partly filled page a
** sequence); a Mamba-2 or Gated DeltaNet layer's recurrent state (fp32) and
** conv window instead, the same at any length; an MLP or MoE sub-layer of a
** hybrid, nothing. */
#define SERVE_PAGE_TOKENS 16
double serve_kv_bytes(const model *m, int64_t tp, int64_t pp, int64_t tokens, double elem_bytes);

/* Whether m generates text one token at a time (a decoder transformer:
** prefill and decode), not one forward per request. */
bool serve_generates(const model *m);

/* Whether encoder m takes a request of seq tokens (a learned position
** table stops at its rows): 0, or -1 with the model builder's message at
** the field that limits it. A length is the request's, not a chip's:
** serve and serve --validate ask once, before any chip is tried. */
int serve_encoder_takes(const model *m, int64_t seq, char *err, size_t errn);

/* Times and sizes one replica under c. cache: a kernel-cost cache shared
** by the caller's calls (NULL: one of its own). 0, or -1 with err
** (precision not on the chip, a shard that does not divide, ...). */
int serve_step(const model *m, const hw_model *hw, const serve_cfg *c, opcost *cache,
               serve_result *r, char *err, size_t errn);

/* Speculative decoding's expected tokens per target step: k drafted
** tokens each accepted with probability a (Leviathan et al. 2023, "Fast
** Inference from Transformers via Speculative Decoding", eq. 1). */
double serve_spec_tokens(int64_t k, double a);

#endif
