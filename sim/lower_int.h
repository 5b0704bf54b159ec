/*
** lower_int.h -- private to the lowering (sim/lower*.c): the module, the
** kernel and the function writer, and the functions its files share. It
** includes LLVM's C API, so no file outside the LLVM seam may include it;
** the rest of the program includes lower.h only.
*/
#ifndef TPUSIM_LOWER_INT_H
#define TPUSIM_LOWER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llvm-c/Core.h>

#include "lower.h"
#include "../workloads/graph.h"

#define LOWER_MAX_FNS 4096
#define LOWER_MAX_BUFS 65 /* a fused kernel's inputs, and its output */
#define LOWER_MAX_PARAMS (LOWER_MAX_BUFS + GRAPH_MAX_RANK) /* and dynamic-slice starts */
#define LOWER_CACHE 512

struct lower_module {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  unsigned count_kind; /* the !tpusim.count metadata kind */
  unsigned flop_kind;  /* !tpusim.flop: an instruction the formula counts, and its dtype */
  int nfn;
  LLVMValueRef fns[LOWER_MAX_FNS];
  char *names[LOWER_MAX_FNS];
};

/* What one function computes: ops[0..n_ops) (topological order; the last
** is the root, whose result is stored), reading the values in outside[]
** from buffer arguments. A single op (`single`) takes one argument per
** operand, repeats included (mul(x, x) reads x twice, as its formula
** says); a fused kernel takes each outside value once. */
typedef struct {
  const graph *g;
  const int *ops;
  int n_ops;
  bool single;
  int outside[LOWER_MAX_BUFS];
  int n_outside;
  int n_starts; /* dynamic-slice start indices, i64 arguments after the output */
} kernel;

typedef struct {
  int arg;
  LLVMValueRef idx, v;
  LLVMBasicBlockRef bb;
} load_memo;

/* A linear index and its per-dimension form over one shape, made in one
** block: two broadcasts of one value read it at one index, and the member
** cache (lower_operand_at) can only see that when both compute the same index
** value, so conversions are made once per block and reused. */
struct ix_memo {
  int rank;
  int64_t dim[GRAPH_MAX_RANK];
  LLVMValueRef lin, d[GRAPH_MAX_RANK];
  LLVMBasicBlockRef bb;
};

/* One function being written: the builder, the execution count of the
** block it is in, and the loads already made in it (a value read twice at
** one index in one block is loaded once). */
typedef struct {
  lower_module *m;
  const kernel *k;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMTypeRef i64;
  int64_t mult;
  int n_cache;
  load_memo cache[LOWER_CACHE];
  int n_ixc;
  struct ix_memo *ixc; /* index conversions made (see ix_memo) */
} writer;

typedef struct {
  LLVMBasicBlockRef header, exit;
  LLVMValueRef iv;
  int64_t saved_mult;
} loop;

/* s4 (two per byte) and fp8 have no LLVM type to load them as. */
static inline bool dtype_lowered(graph_dtype dt) { return dt != GDT_S4 && dt != GDT_F8; }
static inline bool is_float(graph_dtype dt) { return graph_dtype_is_float(dt); }
static inline bool is_unsigned(graph_dtype dt) {
  return dt == GDT_U8 || dt == GDT_U32 || dt == GDT_PRED;
}

/* How a gather reads its table: as rows of `rs` elements, index n picking
** a row. An embedding lookup (result = indices' dims ++ the table's dims
** after the first) picks among all rows; a take-along-axis gather (the
** table's leading dims are the indices': wl.c's picked logits, gbdt's bin
** of a row) picks among the `per` rows of its own block. The graph keeps
** no gather dimension numbers, so the shapes decide. */
typedef struct {
  int64_t rs, rows, per;
  bool along, columns;
} gather_layout;

/* Custom-calls lowered by name (the target is the last part of the op's
** name): the convolution gradients autodiff builds (workloads/train.c) and
** gbdt's scan and row partition (workloads/gbdt.c). Anything else -- an
** HLO import's cuDNN or flash-attention call -- stays an opaque kernel with
** declared costs. */
typedef enum { CUS_NONE, CUS_CONV_INPUT, CUS_CONV_FILTER, CUS_PREFIX_SUM, CUS_ROW_PARTITION } custom_kind;

/* The callees whose calls count: transcendentals, or a flop (fabs, max,
** min) -- anything else (the saturating conversions, integer max/min/abs)
** counts only when the lowering tags it with !tpusim.flop. */
typedef enum { CALL_TRANS, CALL_FLOP, CALL_FREE } call_class;

/* An element of a value of shape s: its row-major linear index, its
** per-dimension indices, or both (each made from the other on demand). */
typedef struct {
  const graph_shape *s;
  LLVMValueRef lin;
  LLVMValueRef d[GRAPH_MAX_RANK];
  bool has_d;
} ix;

/* lower.c */

void lower_set_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool lower_gather_layout_of(const graph_shape *t, const graph_shape *ix, const graph_shape *out,
                            gather_layout *L);
custom_kind lower_custom_of(const graph_op *op);
int lower_prefix_axis(const graph_op *op, const graph_shape *s);

/* lower_emit.c */

LLVMTypeRef lower_compute_type(LLVMContextRef ctx, graph_dtype dt);
LLVMValueRef lower_load_elem(writer *w, LLVMValueRef base, LLVMValueRef idx, graph_dtype dt,
                             const char *name);
LLVMValueRef lower_to_compute(writer *w, LLVMValueRef v, graph_dtype dt);
void lower_store_elem(writer *w, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx,
                      graph_dtype dt);
LLVMValueRef lower_convert_value(writer *w, LLVMValueRef v, graph_dtype from, graph_dtype to);
void lower_mark(writer *w, LLVMValueRef term, int64_t count);
LLVMValueRef lower_flop(writer *w, LLVMValueRef v, graph_dtype dt);
int lower_callee_class(LLVMValueRef call);
void lower_tag_since(writer *w, LLVMValueRef after, graph_dtype dt);
LLVMBasicBlockRef lower_block(writer *w, const char *name);
void lower_loop_from(writer *w, loop *l, int64_t start, int64_t n, const char *name);
void lower_loop_open(writer *w, loop *l, int64_t n, const char *name);
void lower_loop_close(writer *w, loop *l);
LLVMValueRef lower_entry_alloca(writer *w, LLVMTypeRef t, const char *name);
LLVMValueRef lower_call_intrinsic(writer *w, const char *name, LLVMValueRef *args, int n);
LLVMValueRef lower_elementwise(writer *w, graph_op_kind k, LLVMValueRef *x);
LLVMValueRef lower_int_elementwise(writer *w, graph_op_kind k, LLVMValueRef *x, graph_dtype dt);
int lower_begin_fn(writer *w, lower_module *m, const kernel *k, const char *name,
                   const graph_shape *const *bufs, int nbuf, graph_dtype flop_dt, char *err,
                   size_t n);
void lower_uncapped(writer *w, int arg);
int lower_end_fn(writer *w);
LLVMValueRef lower_i64c(writer *w, int64_t v);
LLVMValueRef lower_linear_index(writer *w, const graph_shape *s, LLVMValueRef *idx);
ix lower_ix_lin(const graph_shape *s, LLVMValueRef lin);
ix lower_ix_dims(const graph_shape *s, const LLVMValueRef *d);
LLVMValueRef lower_get_lin(writer *w, ix *x);
void lower_get_dims(writer *w, ix *x);
bool lower_in_dims(const graph_dims *ds, int d);
LLVMValueRef lower_clamp_index(writer *w, LLVMValueRef v, int64_t hi);
LLVMValueRef lower_as_index(writer *w, LLVMValueRef v, graph_dtype dt);

/* lower_ops.c */

LLVMValueRef lower_operand_at(writer *w, int id, int j, ix *x, const char *hint);
LLVMValueRef lower_named(LLVMValueRef v, const graph_op *op, LLVMValueRef *ins, int n_in);
graph_dtype lower_acc_dtype(graph_dtype dt);
LLVMValueRef lower_zero_of(LLVMTypeRef t);
LLVMValueRef lower_combine(writer *w, graph_reduce_kind r, LLVMValueRef a, LLVMValueRef b,
                           graph_dtype adt, graph_dtype dt);
LLVMValueRef lower_out_arg(writer *w);
void lower_loops_open(writer *w, loop *l, const graph_shape *s, const char *prefix,
                      LLVMValueRef *d);
void lower_loops_close(writer *w, loop *l, int rank);

/* lower_custom.c */

void lower_custom(writer *w, int root, const graph_op *op);

#endif
