/*
** graph.h -- the workload graph: HLO-like ops on typed arrays.
**
** Every model family, the HuggingFace and HLO importers, and autodiff build
** a graph through this API; sharding, fusion, lowering and the simulator
** read it. Ops are appended in a valid order (an op's inputs already exist),
** so construction order is a topological order and a built graph has no
** cycle. Loaders of explicit op lists check their input with graph_toposort
** first.
**
** Errors are sticky, like NaN: a builder call that gets a bad shape records
** one message naming the op and returns -1, and any call given a -1 operand
** returns -1 without a further message. A builder can chain calls and check
** graph_ok() once at the end.
**
** Costs (graph_op_cost) come from exact formulas over shapes; the rules, and
** the conventions they follow (XLA's HloCostAnalysis where it has one), are
** in docs/workloads.md.
*/
#ifndef TPUSIM_GRAPH_H
#define TPUSIM_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/diag.h"

#define GRAPH_MAX_RANK 8

typedef enum {
  GDT_PRED,
  GDT_S4, /* 4-bit weights (QLoRA NF4 and int4): half a byte */
  GDT_S8,
  GDT_U8,
  GDT_S32,
  GDT_U32,
  GDT_S64,
  GDT_F8,
  GDT_F16,
  GDT_BF16,
  GDT_F32,
  GDT_F64,
  GDT_COUNT
} graph_dtype;

typedef struct {
  graph_dtype dtype;
  int rank;
  int64_t dim[GRAPH_MAX_RANK];
} graph_shape;

/* A list of dimension indices: contracting dims, reduced dims, a permutation. */
typedef struct {
  int n;
  int8_t d[GRAPH_MAX_RANK];
} graph_dims;

typedef enum {
  /* sources */
  GOP_PARAMETER,
  GOP_CONSTANT,
  GOP_IOTA,
  /* elementwise, one operand */
  GOP_NEG,
  GOP_ABS,
  GOP_EXP,
  GOP_LOG,
  GOP_TANH,
  GOP_LOGISTIC,
  GOP_GELU,
  GOP_SILU,
  GOP_RELU,
  GOP_RSQRT,
  GOP_SQRT,
  GOP_SIN,
  GOP_COS,
  GOP_NOT,
  GOP_CONVERT,
  GOP_COPY,
  GOP_REDUCE_PRECISION,
  /* elementwise, two operands of one shape */
  GOP_ADD,
  GOP_SUB,
  GOP_MUL,
  GOP_DIV,
  GOP_MAX,
  GOP_MIN,
  GOP_POW,
  GOP_COMPARE,
  GOP_AND,
  GOP_OR,
  GOP_GELU_GRAD, /* (x, dy) -> dy * gelu'(x): what autodiff emits, fusible */
  GOP_SILU_GRAD, /* (x, dy) -> dy * silu'(x) */
  /* elementwise, three operands */
  GOP_SELECT,
  GOP_CLAMP,
  /* contractions */
  GOP_DOT,
  GOP_CONV,
  /* reductions and data movement */
  GOP_REDUCE,
  GOP_BROADCAST,
  GOP_TRANSPOSE,
  GOP_RESHAPE,
  GOP_CONCAT,
  GOP_SLICE,
  GOP_DYNAMIC_SLICE,
  GOP_DYNAMIC_UPDATE_SLICE,
  GOP_PAD,
  GOP_GATHER,
  GOP_SCATTER,
  /* collectives */
  GOP_ALL_REDUCE,
  GOP_ALL_GATHER,
  GOP_REDUCE_SCATTER,
  GOP_ALL_TO_ALL,
  GOP_COLLECTIVE_PERMUTE,
  GOP_SEND,
  GOP_RECV,
  /* an opaque kernel with declared costs (HLO custom-call, fused attention) */
  GOP_CUSTOM,
  GOP_COUNT
} graph_op_kind;

typedef enum { GRAPH_FORWARD, GRAPH_BACKWARD, GRAPH_OPTIMIZER, GRAPH_PHASE_COUNT } graph_phase;

typedef enum { GRAPH_RED_ADD, GRAPH_RED_MAX, GRAPH_RED_MIN, GRAPH_RED_MUL } graph_reduce_kind;

/* Roles of a parameter, for memory accounting and autodiff. */
enum {
  GRAPH_WEIGHT = 1u << 0,    /* a model weight */
  GRAPH_TRAINABLE = 1u << 1, /* gets a gradient and optimizer state */
  GRAPH_INPUT = 1u << 2,     /* data fed each step (tokens, images, labels) */
  GRAPH_OPT_STATE = 1u << 3, /* optimizer moment or fp32 master copy */
  GRAPH_ADAPTER = 1u << 4,   /* a LoRA adapter matrix */
  GRAPH_AUX = 1u << 5,       /* weight-side data that is not a parameter (quantization scales) */
};

typedef struct {
  int spatial;                    /* 1, 2 or 3 */
  int in_batch, in_feature;       /* dimension indices in the input */
  int in_spatial[3];
  int k_in, k_out;                /* kernel input/output feature dims */
  int k_spatial[3];
  int out_batch, out_feature;
  int out_spatial[3];
  int64_t stride[3], pad_lo[3], pad_hi[3], lhs_dilation[3], rhs_dilation[3];
  int64_t feature_groups, batch_groups;
} graph_conv_attrs;

typedef struct {
  graph_op_kind kind;
  graph_shape out;
  int n_in;
  int *in; /* operand op ids, each < this op's id */
  char *name;
  graph_phase phase;
  unsigned flags;
  int64_t count; /* executions per step: 1, or a while loop's trip count */
  int layer;     /* transformer/cnn layer index, -1 when none */
  /* the layer's submodule this op computes (graph_module): what
  ** Megatron-Core's recompute_modules name, for a selective recompute of
  ** a list of them; GRAPH_MOD_NONE for the rest */
  unsigned char module;

  graph_dims lhs_batch, rhs_batch, lhs_contract, rhs_contract; /* DOT */
  graph_dims dims; /* REDUCE: reduced; BROADCAST: operand dim i -> out dim d[i];
                      TRANSPOSE: permutation; CONCAT, ALL_GATHER, REDUCE_SCATTER,
                      ALL_TO_ALL: d[0] */
  union { /* by kind, to keep ops small: big graphs have ~10^5 of them */
    struct {
      int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK], step[GRAPH_MAX_RANK];
    }; /* SLICE: start, limit, stride; PAD: low, high, interior */
    graph_conv_attrs conv; /* CONV; a conv-backward-* CUSTOM: its forward conv's */
  };
  graph_reduce_kind reduce;
  int64_t group_size; /* collectives: chips in each replica group */
  double custom_flops, custom_transcendentals, custom_bytes; /* CUSTOM */
  int param_of;       /* gradients and optimizer states: the weight they belong to, or -1 */
  /* the library kernel this op is part of when a framework runs without a
  ** graph compiler (PyTorch eager: F.layer_norm, F.softmax, F.cross_entropy,
  ** a linear layer's addmm), or -1: an op of its own. Its gradient ops carry
  ** the same id (the library's backward kernel). sim/fuse.h fuse_graph_eager */
  int composite;
  int rule;           /* a graph_rule: this op ends a composite with its own gradient rule */
  int rule_in;        /* ... whose input is this op (-1 when rule is GRAPH_RULE_NONE) */
} graph_op;

/* Gradient rules for composites the builders write (workloads/train.c).
** GRAPH_RULE_SOFTMAX: the op is softmax(rule_in), perhaps converted to a
** narrower dtype; its gradient is y (dy - sum(dy y)) over the last dim,
** from the op's own value y -- what PyTorch's softmax backward, Megatron's
** fused scale-mask-softmax and jax.nn.softmax's custom JVP read -- rather
** than autodiff through the exp and the sum, which would keep their f32
** intermediates for the backward. */
typedef enum { GRAPH_RULE_NONE, GRAPH_RULE_SOFTMAX } graph_rule;

typedef struct {
  double flops[GDT_COUNT]; /* by the dtype the arithmetic runs in */
  double transcendentals;
  double bytes_read, bytes_written;
} graph_cost;

typedef struct graph graph;

/* The most ops one graph holds. A graph costs ~500 bytes an op (the op, its
** name and inputs) and the simulator keeps a few times that, so 2^22 ops is
** ~2 GB for the graph alone: 6x the largest model tpusim accepts (1,024
** transformer layers, ~655k training ops) and ~3,000x the Llama-3-8B HLO
** dump. Past it graph_add reports an error instead of growing until the
** kernel kills the process. docs/limits.md. */
#define GRAPH_MAX_OPS (1 << 22)

graph *graph_new(const char *name);
void graph_free(graph *g);

const char *graph_name(const graph *g);
int graph_count(const graph *g);
/* The pointer is valid until the next op is added (the array may move):
** copy what you need before building further. */
const graph_op *graph_get(const graph *g, int id);
bool graph_ok(const graph *g);
/* Where builder errors go; NULL until the first error. The graph owns it. */
const diag *graph_diag(const graph *g);
/* Reports an error in the graph's own words (for builders' validations). */
void graph_error(graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* State applied to ops as they are created. */
void graph_set_phase(graph *g, graph_phase p);
void graph_set_scope(graph *g, const char *scope); /* op names become "scope/kind" */
void graph_set_layer(graph *g, int layer);
/* The submodules of a transformer layer that Megatron-Core can recompute
** one by one (TransformerConfig.recompute_modules), as ops are tagged:
** the input and pre-MLP norms ("layernorm"), MLA's up projections with
** the RoPE applied to them ("mla_up_proj"), a dense layer's MLP ("mlp"),
** a MoE layer's router, dispatch, routed experts and combine ("moe"), of
** them the experts' activation function ("moe_act"), and its shared
** experts ("shared_experts"; "moe" holds both). The attention core is
** found by its shape (sim/stepcost.c), not tagged. */
typedef enum {
  GRAPH_MOD_NONE,
  GRAPH_MOD_NORM,
  GRAPH_MOD_MLA_UP,
  GRAPH_MOD_MLP,
  GRAPH_MOD_MOE,
  GRAPH_MOD_MOE_ACT,
  GRAPH_MOD_SHARED,
  GRAPH_MODULES
} graph_module;
/* Ops added from here on carry module m; returns the one in force before.
** graph_module_of: the one in force. */
graph_module graph_set_module(graph *g, graph_module m);
graph_module graph_module_of(const graph *g);
void graph_set_count(graph *g, int64_t count);
/* While on, graph_parameter returns the parameter already named so (with
** the same shape and flags) instead of adding one: a module applied again
** with the weights of its first application (Megatron-Core's repeated MTP
** layer). Returns the setting in force before. */
bool graph_set_share_params(graph *g, bool on);
/* Ops added from here on are one library kernel: a new composite id,
** returned, and the one in force before in *previous (graph_set_composite
** restores it when the kernel's ops are in). */
int graph_begin_composite(graph *g, int *previous);
/* Ops added from here on carry composite c (-1: none); returns the one in
** force before. */
int graph_set_composite(graph *g, int c);
void graph_set_flags(graph *g, int id, unsigned flags);
void graph_set_param_of(graph *g, int id, int weight);

/* ---- shapes ---- */

graph_shape graph_shape_make(graph_dtype dt, int rank, const int64_t *dims);
/* GRAPH_SHAPE(GDT_BF16, 8, 2048, 4096): the dims convert to int64_t, so
** plain int arguments are safe (a variadic function would not be). */
#define GRAPH_SHAPE(dt, ...)                                                          \
  graph_shape_make((dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                   (int64_t[]){__VA_ARGS__})
int64_t graph_elements(const graph_shape *s);
/* Bits per element: 4 for S4, 1 byte-rounded for PRED (8). */
int graph_dtype_bits(graph_dtype dt);
double graph_bytes(const graph_shape *s);
const char *graph_dtype_name(graph_dtype dt); /* HLO spelling: "bf16", "f32", "s4" */
int graph_dtype_parse(const char *s);         /* -1 if unknown */
bool graph_dtype_is_float(graph_dtype dt);
/* "bf16[8,2048,4096]" */
void graph_shape_str(const graph_shape *s, char *buf, size_t n);
bool graph_shape_eq(const graph_shape *a, const graph_shape *b);
graph_dims graph_dims_of(int n, ...);

const char *graph_op_name(graph_op_kind k); /* HLO opcode: "dot", "all-reduce" */
int graph_op_parse(const char *s);          /* -1 if unknown */
bool graph_op_is_elementwise(graph_op_kind k);
/* An elementwise function with a transcendental in it (exp, log, tanh,
** logistic, gelu, silu, rsqrt, sqrt, sin, cos, pow and the gelu/silu
** gradients): floating point only, and what XLA calls expensive. */
bool graph_op_is_transcendental(graph_op_kind k);
bool graph_op_is_collective(graph_op_kind k);

/* ---- building (each returns the new op's id, or -1) ---- */

int graph_parameter(graph *g, const char *name, graph_shape s, unsigned flags);
int graph_constant(graph *g, graph_shape s);
int graph_iota(graph *g, graph_shape s);
int graph_unary(graph *g, graph_op_kind k, int x);
int graph_binary(graph *g, graph_op_kind k, int a, int b);
int graph_select(graph *g, int pred, int a, int b);
int graph_clamp(graph *g, int lo, int x, int hi);
int graph_convert(graph *g, int x, graph_dtype dt);
int graph_dot(graph *g, int a, int b, graph_dims lhs_batch, graph_dims rhs_batch,
              graph_dims lhs_contract, graph_dims rhs_contract, graph_dtype out);
/* [..., K] x [K, N] -> [..., N]: the common weight multiply. */
int graph_matmul(graph *g, int a, int w);
int graph_conv(graph *g, int input, int kernel, const graph_conv_attrs *c, graph_dtype out);
int graph_reduce(graph *g, int x, graph_dims dims, graph_reduce_kind r);
/* out must contain x's dims at positions map.d[i] (map.n == rank of x). */
int graph_broadcast(graph *g, int x, graph_shape out, graph_dims map);
int graph_transpose(graph *g, int x, graph_dims perm);
int graph_reshape(graph *g, int x, graph_shape out);
int graph_concat(graph *g, const int *xs, int n, int dim);
int graph_slice(graph *g, int x, const int64_t *start, const int64_t *limit,
                const int64_t *stride);
int graph_dynamic_slice(graph *g, int x, graph_shape out);
int graph_dynamic_update_slice(graph *g, int x, int update);
int graph_pad(graph *g, int x, const int64_t *lo, const int64_t *hi, const int64_t *interior);
/* Embedding lookup when out is NULL: table [V, H...], indices [N...] ->
** [N..., H...]. Otherwise a general gather whose result shape is given. */
int graph_gather(graph *g, int table, int indices, const graph_shape *out);
/* Scatter-add of updates into an array shaped like operand (embedding gradient). */
int graph_scatter(graph *g, int operand, int indices, int updates);
/* Whether updates hold no more than one operand's worth a row index (the
** size rule graph_scatter checks; the autodiff of a padded gather reads it). */
bool graph_scatter_fits(const graph_shape *operand, const graph_shape *indices,
                        const graph_shape *updates);
/* dim: the gathered / scattered / exchanged dimension (ignored for all-reduce,
** permute, send, recv). */
int graph_collective(graph *g, graph_op_kind k, int x, int64_t group_size, int dim);
int graph_custom(graph *g, const char *target, graph_shape out, const int *ins, int n_in,
                 double flops, double transcendentals, double bytes);
/* Records on custom-call `id` the attributes of the convolution it is a
** gradient of ("conv-backward-input", "conv-backward-filter"), so the
** lowering can run it as that convolution's transposed / weight-gradient
** form; a custom-call without them (spatial == 0) stays opaque. */
void graph_set_custom_conv(graph *g, int id, const graph_conv_attrs *c);
/* The axis a custom-call works along (a "prefix-sum"'s scan), kept in
** its dims: its builder knows it; its shape alone may not say. */
void graph_set_custom_axis(graph *g, int id, int axis);
/* Marks op id as the end of a composite with gradient rule `rule` over
** input `in` (an earlier op). */
void graph_set_rule(graph *g, int id, graph_rule rule, int in);

/* ---- reading ---- */

graph_cost graph_op_cost(const graph *g, int id); /* one execution */
/* Sum over ops of cost x count, for one phase (or all when phase < 0). */
graph_cost graph_total_cost(const graph *g, int phase);
double graph_cost_flops(const graph_cost *c); /* all dtypes */
/* t += k * c, field by field. */
void graph_cost_add(graph_cost *t, const graph_cost *c, double k);
/* Each field (flops dtype by dtype, transcendentals, bytes read, written)
** equal to a part in 10^9: two derivations of one kernel's cost (its IR
** count, the formulas) add the same terms in different orders. */
bool graph_cost_close(const graph_cost *a, const graph_cost *b);
/* |a - b| <= 1e-9 (1 + |b|): the tolerance graph_cost_close applies per field. */
bool graph_num_close(double a, double b);

/* Whether op id reads one value through two operands (x * x): a kernel
** loads it once. */
bool graph_op_reads_twice(const graph *g, int id);

/* Elements of trainable / all weight parameters (frozen included). */
int64_t graph_param_elements(const graph *g, unsigned need_flags);
/* The same parameters' bytes (their dtypes' sizes): with GRAPH_INPUT, what
** one step reads. */
double graph_param_bytes(const graph *g, unsigned need_flags);

/* Topological order of n nodes given each node's inputs (in[i][0..n_in[i])).
** Fills order; on a cycle returns -1 and writes the nodes of one cycle to
** cycle (at most n), their count to *cycle_len. */
int graph_toposort(int n, const int *const *in, const int *n_in, int *order, int *cycle,
                   int *cycle_len);

/* Human-readable op description: "dot bf16[8,2048,4096] (l3/attn/q)". */
void graph_op_str(const graph *g, int id, char *buf, size_t n);

#endif
