/*
** lower.c -- see lower.h.
*/
#include "lower.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Core.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

void lower_llvm_version(char *buf, size_t n) {
  unsigned major, minor, patch;
  LLVMGetVersion(&major, &minor, &patch);
  snprintf(buf, n, "%u.%u.%u", major, minor, patch);
}

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
** cache (operand_at) can only see that when both compute the same index
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

static void set_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...) {
  if (!err || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

lower_module *lower_new(const char *name) {
  lower_module *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->ctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(name, m->ctx);
  m->count_kind = LLVMGetMDKindIDInContext(m->ctx, "tpusim.count", 12);
  m->flop_kind = LLVMGetMDKindIDInContext(m->ctx, "tpusim.flop", 11);
  return m;
}

void lower_free(lower_module *m) {
  if (!m) return;
  for (int i = 0; i < m->nfn; i++) free(m->names[i]);
  LLVMDisposeModule(m->mod);
  LLVMContextDispose(m->ctx);
  free(m);
}

const char *lower_fn_name(const lower_module *m, int fn) {
  return fn >= 0 && fn < m->nfn ? m->names[fn] : "";
}

/* ---- what is lowered ---- */

/* s4 (two per byte) and fp8 have no LLVM type to load them as. */
static bool dtype_lowered(graph_dtype dt) { return dt != GDT_S4 && dt != GDT_F8; }
static bool is_float(graph_dtype dt) { return graph_dtype_is_float(dt); }
static bool is_unsigned(graph_dtype dt) { return dt == GDT_U8 || dt == GDT_U32 || dt == GDT_PRED; }


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

static bool gather_layout_of(const graph_shape *t, const graph_shape *ix, const graph_shape *out,
                             gather_layout *L) {
  int64_t tn = graph_elements(t), in = graph_elements(ix), on = graph_elements(out);
  if (in <= 0 || on <= 0 || on % in != 0) return false;
  L->rs = on / in;
  if (tn % L->rs != 0 || tn == 0) return false;
  L->rows = tn / L->rs;
  bool emb = t->rank >= 1 && out->rank == ix->rank + t->rank - 1;
  for (int i = 0; emb && i < ix->rank; i++) emb = out->dim[i] == ix->dim[i];
  for (int i = 1; emb && i < t->rank; i++) emb = out->dim[ix->rank + i - 1] == t->dim[i];
  L->columns = false;
  if (emb) {
    L->along = false;
    L->per = L->rows;
    return true;
  }
  /* columns: every row of the table [B..., C] gives the same columns,
  ** out [B..., K] (dlrm's feature interaction picks its pairs so) */
  int64_t C = t->rank ? t->dim[t->rank - 1] : 0;
  bool cols = ix->rank == 1 && t->rank >= 2 && out->rank == t->rank && C > 0 &&
              out->dim[out->rank - 1] == in;
  for (int i = 0; cols && i + 1 < t->rank; i++) cols = out->dim[i] == t->dim[i];
  if (cols) {
    L->along = false;
    L->columns = true;
    L->rs = 1;
    L->per = C;
    L->rows = tn / C;
    return true;
  }
  bool along = t->rank > ix->rank && L->rows % in == 0;
  for (int i = 0; along && i < ix->rank; i++) along = t->dim[i] == ix->dim[i];
  L->along = along;
  L->per = along ? L->rows / in : 0;
  return along;
}

/* ---- the custom-calls tpusim's own builders declare ---- */

/* Custom-calls lowered by name (the target is the last part of the op's
** name): the convolution gradients autodiff builds (workloads/train.c) and
** gbdt's scan and row partition (workloads/gbdt.c). Anything else -- an
** HLO import's cuDNN or flash-attention call -- stays an opaque kernel with
** declared costs. */
typedef enum { CUS_NONE, CUS_CONV_INPUT, CUS_CONV_FILTER, CUS_PREFIX_SUM, CUS_ROW_PARTITION } custom_kind;

static custom_kind custom_of(const graph_op *op) {
  if (op->kind != GOP_CUSTOM || !op->name) return CUS_NONE;
  const char *slash = strrchr(op->name, '/');
  const char *t = slash ? slash + 1 : op->name;
  if (strcmp(t, "conv-backward-input") == 0) return CUS_CONV_INPUT;
  if (strcmp(t, "conv-backward-filter") == 0) return CUS_CONV_FILTER;
  if (strcmp(t, "prefix-sum") == 0) return CUS_PREFIX_SUM;
  if (strcmp(t, "row-partition") == 0) return CUS_ROW_PARTITION;
  return CUS_NONE;
}

/* The axis a prefix-sum scans: the one its builder recorded
** (graph_set_custom_axis; gbdt's [nodes, features, bins, 2] scans bins,
** dim 2), if its declared flops -- one add per element but the first of
** each line, n - n/len -- are that axis's; else, for a custom-call that
** names none (an import), the innermost axis with that cost. -1 when none
** has it. */
static int prefix_axis(const graph_op *op, const graph_shape *s) {
  double n = (double)graph_elements(s), flops = op->custom_flops;
  if (op->dims.n == 1) {
    int d = op->dims.d[0];
    return d >= 0 && d < s->rank && s->dim[d] > 0 && n - n / (double)s->dim[d] == flops ? d : -1;
  }
  for (int d = s->rank - 1; d >= 0; d--)
    if (s->dim[d] > 0 && n - n / (double)s->dim[d] == flops) return d;
  return -1;
}

/* Whether custom-call `op` is one lower_op runs, with shapes and declared
** costs that are the lowering's own count; else why not, in `why`. */
static bool custom_supported(const graph *g, const graph_op *op, char *why, size_t n) {
  custom_kind ck = custom_of(op);
  if (ck == CUS_NONE) {
    set_err(why, n, "%s: an opaque kernel with declared costs (not lowered)", op->name);
    return false;
  }
  for (int i = 0; i < op->n_in; i++)
    if (!dtype_lowered(graph_get(g, op->in[i])->out.dtype)) {
      set_err(why, n, "%s: %s operands not lowered (no LLVM type holds them)", op->name,
              graph_dtype_name(graph_get(g, op->in[i])->out.dtype));
      return false;
    }
  if (!dtype_lowered(op->out.dtype) || op->custom_transcendentals != 0) {
    set_err(why, n, "%s: not the custom-call tpusim's builders declare (not lowered)", op->name);
    return false;
  }
  double in_b = 0, out_b = graph_bytes(&op->out);
  for (int i = 0; i < op->n_in; i++) in_b += graph_bytes(&graph_get(g, op->in[i])->out);
  bool ok = graph_num_close(op->custom_bytes, in_b + out_b);
  if (ck == CUS_CONV_INPUT || ck == CUS_CONV_FILTER) {
    const graph_conv_attrs *c = &op->conv;
    ok = ok && op->n_in == 2 && c->spatial >= 1 && c->spatial <= 3 && c->batch_groups <= 1;
    if (ok) {
      /* operands: (dy, kernel) -> x, or (x, dy) -> kernel */
      const graph_shape *sy = &graph_get(g, op->in[ck == CUS_CONV_INPUT ? 0 : 1])->out;
      const graph_shape *sk = ck == CUS_CONV_INPUT ? &graph_get(g, op->in[1])->out : &op->out;
      const graph_shape *sx = ck == CUS_CONV_INPUT ? &op->out : &graph_get(g, op->in[0])->out;
      int64_t fg = c->feature_groups > 0 ? c->feature_groups : 1;
      int r = c->spatial + 2;
      ok = sy->rank == r && sk->rank == r && sx->rank == r && is_float(sx->dtype) == is_float(sy->dtype) &&
           sk->dim[c->k_out] % fg == 0 && sx->dim[c->in_feature] == fg * sk->dim[c->k_in] &&
           sy->dim[c->out_feature] == sk->dim[c->k_out] && sy->dim[c->out_batch] == sx->dim[c->in_batch];
      double win = 1;
      for (int s = 0; ok && s < c->spatial; s++) win *= (double)sk->dim[c->k_spatial[s]];
      /* the forward's multiply-adds, padding included, as both forms run them */
      ok = ok && graph_num_close(op->custom_flops, 2.0 * (double)graph_elements(sy) * win *
                                                (double)sk->dim[c->k_in]);
    }
  } else if (ck == CUS_PREFIX_SUM) {
    const graph_shape *sx = op->n_in == 1 ? &graph_get(g, op->in[0])->out : NULL;
    ok = ok && sx && graph_shape_eq(sx, &op->out) && sx->dtype != GDT_PRED &&
         prefix_axis(op, sx) >= 0;
  } else { /* row-partition: [R] node ids -> [M] row numbers */
    const graph_shape *sx = op->n_in == 1 ? &graph_get(g, op->in[0])->out : NULL;
    ok = ok && sx && sx->rank == 1 && op->out.rank == 1 && !is_float(sx->dtype) &&
         sx->dtype != GDT_PRED && !is_float(op->out.dtype) && op->out.dtype != GDT_PRED &&
         op->out.dim[0] >= 1 && op->out.dim[0] <= sx->dim[0] &&
         graph_num_close(op->custom_flops, (double)sx->dim[0]);
  }
  if (!ok) {
    set_err(why, n, "%s: shapes or declared costs unlike the custom-call tpusim's builders "
                    "declare (not lowered)", op->name);
    return false;
  }
  return true;
}

bool lower_supported(const graph *g, int id, char *why, size_t n) {
  const graph_op *op = graph_get(g, id);
  graph_op_kind k = op->kind;
  const char *kn = graph_op_name(k);
  if (graph_op_is_collective(k)) {
    set_err(why, n, "%s: a collective, timed by the network model (not lowered)", kn);
    return false;
  }
  if (k == GOP_CUSTOM) return custom_supported(g, op, why, n);
  if (k == GOP_PARAMETER || k == GOP_CONSTANT) {
    set_err(why, n, "%s: a buffer, not a kernel", kn);
    return false;
  }
  if (k == GOP_REDUCE_PRECISION) {
    set_err(why, n, "%s: not lowered (the graph keeps no exponent and mantissa widths)", kn);
    return false;
  }
  for (int i = 0; i < op->n_in; i++) {
    graph_dtype dt = graph_get(g, op->in[i])->out.dtype;
    if (!dtype_lowered(dt)) {
      set_err(why, n, "%s: %s operands not lowered (no LLVM type holds them)", kn,
              graph_dtype_name(dt));
      return false;
    }
  }
  if (!dtype_lowered(op->out.dtype)) {
    set_err(why, n, "%s: %s result not lowered (no LLVM type holds it)", kn,
            graph_dtype_name(op->out.dtype));
    return false;
  }
  /* the dtype the element function runs in: select's branches, else the first operand */
  graph_dtype dt = k == GOP_SELECT ? op->out.dtype
                   : op->n_in     ? graph_get(g, op->in[0])->out.dtype
                                  : op->out.dtype;
  /* element functions that exist only for floating point */
  if (graph_op_is_transcendental(k) && !is_float(dt)) {
    set_err(why, n, "%s: %s operands (no integer %s)", kn, graph_dtype_name(dt), kn);
    return false;
  }
  if ((k == GOP_NOT || k == GOP_AND || k == GOP_OR) && is_float(dt)) {
    set_err(why, n, "%s: %s operands (a bitwise op needs integers or pred)", kn,
            graph_dtype_name(dt));
    return false;
  }
  if (dt == GDT_PRED && (graph_op_is_elementwise(k) || k == GOP_DOT || k == GOP_CONV ||
                         k == GOP_REDUCE) &&
      k != GOP_NOT && k != GOP_AND && k != GOP_OR && k != GOP_SELECT && k != GOP_CONVERT &&
      k != GOP_COPY && k != GOP_COMPARE) {
    set_err(why, n, "%s: pred operands (arithmetic on pred is not defined)", kn);
    return false;
  }
  if (k == GOP_CONV && op->conv.batch_groups > 1) {
    set_err(why, n, "%s: batch groups (%lld) not lowered", kn, (long long)op->conv.batch_groups);
    return false;
  }
  if (k == GOP_GATHER) {
    gather_layout L;
    if (!gather_layout_of(&graph_get(g, op->in[0])->out, &graph_get(g, op->in[1])->out,
                          &op->out, &L)) {
      set_err(why, n, "%s: a result shape that is not an embedding lookup, a "
                      "take-along-axis gather or a column gather", kn);
      return false;
    }
  }
  if (k == GOP_SCATTER) {
    int64_t on = graph_elements(&op->out), in = graph_elements(&graph_get(g, op->in[1])->out),
            un = graph_elements(&graph_get(g, op->in[2])->out);
    if (in <= 0 || un % in != 0 || un == 0 || on % (un / in) != 0) {
      set_err(why, n, "%s: updates are not whole rows of the operand", kn);
      return false;
    }
  }
  return true;
}

/* ---- types and elements ---- */

/* The type a value is computed in: f64 for f64, f32 for the other floats
** (bf16 and fp16 are widened on load and rounded on store), the integer of
** the dtype's width, i1 for pred. */
static LLVMTypeRef compute_type(LLVMContextRef ctx, graph_dtype dt) {
  switch (dt) {
  case GDT_F64: return LLVMDoubleTypeInContext(ctx);
  case GDT_BF16: case GDT_F16: case GDT_F32: return LLVMFloatTypeInContext(ctx);
  case GDT_PRED: return LLVMInt1TypeInContext(ctx);
  case GDT_S8: case GDT_U8: return LLVMInt8TypeInContext(ctx);
  case GDT_S32: case GDT_U32: return LLVMInt32TypeInContext(ctx);
  default: return LLVMInt64TypeInContext(ctx);
  }
}

static LLVMTypeRef storage_type(LLVMContextRef ctx, graph_dtype dt) {
  switch (dt) {
  case GDT_BF16: return LLVMInt16TypeInContext(ctx);
  case GDT_F16: return LLVMHalfTypeInContext(ctx);
  case GDT_PRED: return LLVMInt8TypeInContext(ctx); /* a byte, as XLA stores pred */
  default: return compute_type(ctx, dt);
  }
}

static LLVMValueRef elem_ptr(writer *w, LLVMValueRef base, LLVMValueRef idx, graph_dtype dt,
                             const char *name) {
  return LLVMBuildGEP2(w->b, storage_type(w->m->ctx, dt), base, &idx, 1, name);
}

static LLVMValueRef load_elem(writer *w, LLVMValueRef base, LLVMValueRef idx, graph_dtype dt,
                              const char *name) {
  LLVMContextRef ctx = w->m->ctx;
  LLVMValueRef p = elem_ptr(w, base, idx, dt, "p");
  LLVMValueRef v = LLVMBuildLoad2(w->b, storage_type(ctx, dt), p, name);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx);
  if (dt == GDT_BF16) { /* bf16 is the high half of an f32 */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
    v = LLVMBuildZExt(w->b, v, i32, "");
    v = LLVMBuildShl(w->b, v, LLVMConstInt(i32, 16, 0), "");
    v = LLVMBuildBitCast(w->b, v, f32, name);
  } else if (dt == GDT_F16) {
    v = LLVMBuildFPExt(w->b, v, f32, name);
  } else if (dt == GDT_PRED) { /* any nonzero byte is true */
    v = LLVMBuildICmp(w->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), name);
  }
  return v;
}

/* Converts a computed float to dtype dt's compute type (f32 <-> f64). */
static LLVMValueRef to_compute(writer *w, LLVMValueRef v, graph_dtype dt) {
  LLVMTypeRef want = compute_type(w->m->ctx, dt);
  if (LLVMTypeOf(v) == want || !is_float(dt)) return v;
  return dt == GDT_F64 ? LLVMBuildFPExt(w->b, v, want, "") : LLVMBuildFPTrunc(w->b, v, want, "");
}

static void store_elem(writer *w, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx,
                       graph_dtype dt) {
  LLVMContextRef ctx = w->m->ctx;
  v = to_compute(w, v, dt);
  if (dt == GDT_BF16) {
    /* round to nearest even on the 16 dropped bits, as TPUs and tensor
    ** cores convert (NaN payloads are not special-cased) */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
    LLVMValueRef bits = LLVMBuildBitCast(w->b, v, i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(w->b, LLVMBuildLShr(w->b, bits, LLVMConstInt(i32, 16, 0), ""),
                                    LLVMConstInt(i32, 1, 0), "");
    LLVMValueRef bias = LLVMBuildAdd(w->b, lsb, LLVMConstInt(i32, 0x7fff, 0), "");
    bits = LLVMBuildLShr(w->b, LLVMBuildAdd(w->b, bits, bias, ""), LLVMConstInt(i32, 16, 0), "");
    v = LLVMBuildTrunc(w->b, bits, LLVMInt16TypeInContext(ctx), "bf16");
  } else if (dt == GDT_F16) {
    v = LLVMBuildFPTrunc(w->b, v, LLVMHalfTypeInContext(ctx), "f16");
  } else if (dt == GDT_PRED) {
    v = LLVMBuildZExt(w->b, v, LLVMInt8TypeInContext(ctx), "pred");
  }
  LLVMBuildStore(w->b, v, elem_ptr(w, base, idx, dt, "q"));
}

/* Converts value v of dtype `from` (in its compute type) to dtype `to`:
** what convert does. Float to integer saturates (llvm.fptosi.sat: no
** poison for out-of-range values); to pred is "not zero" (NaN is true),
** read off the bits so no compare is counted as arithmetic. */
static LLVMValueRef call_intrinsic(writer *w, const char *name, LLVMValueRef *args, int n);

static LLVMValueRef convert_value(writer *w, LLVMValueRef v, graph_dtype from, graph_dtype to) {
  LLVMContextRef ctx = w->m->ctx;
  LLVMTypeRef t = compute_type(ctx, to);
  if (is_float(from) && is_float(to)) return to_compute(w, v, to);
  if (to == GDT_PRED) {
    if (is_float(from)) {
      LLVMTypeRef it = LLVMIntTypeInContext(ctx, from == GDT_F64 ? 64 : 32);
      LLVMValueRef bits = LLVMBuildBitCast(w->b, v, it, "");
      unsigned long long mag = from == GDT_F64 ? 0x7fffffffffffffffULL : 0x7fffffffULL;
      v = LLVMBuildAnd(w->b, bits, LLVMConstInt(it, mag, 0), "");
    }
    return LLVMBuildICmp(w->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  }
  if (is_float(to)) /* from an integer or pred */
    return is_unsigned(from) ? LLVMBuildUIToFP(w->b, v, t, "") : LLVMBuildSIToFP(w->b, v, t, "");
  if (is_float(from)) {
    LLVMTypeRef tys[2] = {t, LLVMTypeOf(v)};
    const char *nm = is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat";
    unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(w->m->mod, id, tys, 2);
    return LLVMBuildCall2(w->b, LLVMIntrinsicGetType(ctx, id, tys, 2), f, &v, 1, "");
  }
  unsigned wf = LLVMGetIntTypeWidth(LLVMTypeOf(v)), wt = LLVMGetIntTypeWidth(t);
  if (wf == wt) return v;
  if (wf > wt) return LLVMBuildTrunc(w->b, v, t, "");
  return is_unsigned(from) ? LLVMBuildZExt(w->b, v, t, "") : LLVMBuildSExt(w->b, v, t, "");
}

/* ---- loops, with each block's execution count on its terminator ---- */

static void mark(writer *w, LLVMValueRef term, int64_t count) {
  LLVMMetadataRef md = LLVMValueAsMetadata(LLVMConstInt(w->i64, (unsigned long long)count, 0));
  LLVMValueRef node = LLVMMetadataAsValue(w->m->ctx, LLVMMDNodeInContext2(w->m->ctx, &md, 1));
  LLVMSetMetadata(term, w->m->count_kind, node);
}

/* Marks instruction v as arithmetic the formula counts, in dtype dt:
** !tpusim.flop !{!"s32"}. Integer instructions and selects count only
** with it -- the index arithmetic around them is the loop's, not the op's. */
static LLVMValueRef flop(writer *w, LLVMValueRef v, graph_dtype dt) {
  if (!LLVMIsAInstruction(v)) return v; /* folded to a constant */
  const char *dn = graph_dtype_name(dt);
  LLVMMetadataRef s = LLVMMDStringInContext2(w->m->ctx, dn, strlen(dn));
  LLVMSetMetadata(v, w->m->flop_kind,
                  LLVMMetadataAsValue(w->m->ctx, LLVMMDNodeInContext2(w->m->ctx, &s, 1)));
  return v;
}

/* The callees whose calls count: transcendentals, or a flop (fabs, max,
** min) -- anything else (the saturating conversions, integer max/min/abs)
** counts only when the lowering tags it with !tpusim.flop. */
typedef enum { CALL_TRANS, CALL_FLOP, CALL_FREE } call_class;
static const struct {
  const char *prefix;
  call_class cls;
} CALLEES[] = {
    {"llvm.exp.", CALL_TRANS},       {"llvm.log.", CALL_TRANS},
    {"llvm.sqrt.", CALL_TRANS},      {"llvm.sin.", CALL_TRANS},
    {"llvm.cos.", CALL_TRANS},       {"llvm.pow.", CALL_TRANS},
    {"tanhf", CALL_TRANS},           {"tanh", CALL_TRANS},
    {"tpusim.logistic.", CALL_TRANS}, {"tpusim.rsqrt.", CALL_TRANS},
    {"llvm.fabs.", CALL_FLOP},       {"llvm.maximum.", CALL_FLOP},
    {"llvm.minimum.", CALL_FLOP},    {"llvm.smax.", CALL_FREE},
    {"llvm.smin.", CALL_FREE},       {"llvm.umax.", CALL_FREE},
    {"llvm.umin.", CALL_FREE},       {"llvm.abs.", CALL_FREE},
    {"llvm.fptosi.sat.", CALL_FREE}, {"llvm.fptoui.sat.", CALL_FREE},
};

static int callee_class(LLVMValueRef call) {
  size_t cl;
  const char *cn = LLVMGetValueName2(LLVMGetCalledValue(call), &cl);
  size_t nc = sizeof CALLEES / sizeof CALLEES[0];
  for (size_t i = 0; i < nc; i++) {
    size_t pl = strlen(CALLEES[i].prefix);
    bool prefix = CALLEES[i].prefix[pl - 1] == '.';
    if (prefix ? strncmp(cn, CALLEES[i].prefix, pl) == 0
               : (cl == pl && memcmp(cn, CALLEES[i].prefix, pl) == 0))
      return (int)CALLEES[i].cls;
  }
  return -1;
}

/* Tags the floating-point arithmetic emitted after instruction `after`
** (NULL: from the block's start) with dtype dt: an op's element function
** inside a kernel whose ops run in several dtypes. */
static void tag_since(writer *w, LLVMValueRef after, graph_dtype dt) {
  LLVMValueRef in = after ? LLVMGetNextInstruction(after)
                          : LLVMGetFirstInstruction(LLVMGetInsertBlock(w->b));
  for (; in; in = LLVMGetNextInstruction(in)) {
    switch (LLVMGetInstructionOpcode(in)) {
    case LLVMFAdd: case LLVMFSub: case LLVMFMul: case LLVMFDiv: case LLVMFRem: case LLVMFNeg:
    case LLVMFCmp:
      flop(w, in, dt);
      break;
    case LLVMCall:
      if (callee_class(in) == CALL_FLOP) flop(w, in, dt);
      break;
    default:
      break;
    }
  }
}

static LLVMBasicBlockRef block(writer *w, const char *name) {
  return LLVMAppendBasicBlockInContext(w->m->ctx, w->fn, name);
}

/* for (iv = start; iv < n; iv++): leaves the builder in the body. */
static void loop_from(writer *w, loop *l, int64_t start, int64_t n, const char *name) {
  char hn[40], bn[40], en[40];
  snprintf(hn, sizeof hn, "%s.head", name);
  snprintf(bn, sizeof bn, "%s.body", name);
  snprintf(en, sizeof en, "%s.exit", name);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(w->b);
  l->header = block(w, hn);
  LLVMBasicBlockRef body = block(w, bn);
  l->exit = block(w, en);
  mark(w, LLVMBuildBr(w->b, l->header), w->mult);
  LLVMPositionBuilderAtEnd(w->b, l->header);
  l->iv = LLVMBuildPhi(w->b, w->i64, name);
  LLVMValueRef first = LLVMConstInt(w->i64, (unsigned long long)start, 0);
  LLVMAddIncoming(l->iv, &first, &pre, 1);
  LLVMValueRef more =
      LLVMBuildICmp(w->b, LLVMIntULT, l->iv, LLVMConstInt(w->i64, (unsigned long long)n, 0), "");
  int64_t trips = n > start ? n - start : 0;
  mark(w, LLVMBuildCondBr(w->b, more, body, l->exit), w->mult * (trips + 1));
  LLVMPositionBuilderAtEnd(w->b, body);
  l->saved_mult = w->mult;
  w->mult *= trips;
}

static void loop_open(writer *w, loop *l, int64_t n, const char *name) {
  loop_from(w, l, 0, n, name);
}

static void loop_close(writer *w, loop *l) {
  LLVMValueRef next = LLVMBuildNUWAdd(w->b, l->iv, LLVMConstInt(w->i64, 1, 0), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(w->b);
  mark(w, LLVMBuildBr(w->b, l->header), w->mult);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  w->mult = l->saved_mult;
  LLVMPositionBuilderAtEnd(w->b, l->exit);
}

/* An accumulator slot, in the entry block so a loop does not grow the stack. */
static LLVMValueRef entry_alloca(writer *w, LLVMTypeRef t, const char *name) {
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(w->m->ctx);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(w->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(eb, first);
  else LLVMPositionBuilderAtEnd(eb, entry);
  LLVMValueRef a = LLVMBuildAlloca(eb, t, name);
  LLVMDisposeBuilder(eb);
  return a;
}

/* ---- math ---- */

static LLVMValueRef call_intrinsic(writer *w, const char *name, LLVMValueRef *args, int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMTypeRef t = LLVMTypeOf(args[0]);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(w->m->mod, id, &t, 1);
  LLVMTypeRef ft = LLVMIntrinsicGetType(w->m->ctx, id, &t, 1);
  return LLVMBuildCall2(w->b, ft, f, args, (unsigned)n, "");
}

static LLVMValueRef fconst(LLVMValueRef like, double v) { return LLVMConstReal(LLVMTypeOf(like), v); }
static LLVMValueRef iconst(LLVMValueRef like, long long v) {
  return LLVMConstInt(LLVMTypeOf(like), (unsigned long long)v, 1);
}
/* tanh, and the two functions XLA's cost analysis counts as one
** transcendental each (logistic, rsqrt), are calls: to libm's tanh, and to
** helpers defined once per type in the module. */
static LLVMValueRef helper(writer *w, const char *base, LLVMValueRef x) {
  LLVMContextRef ctx = w->m->ctx;
  LLVMTypeRef t = LLVMTypeOf(x);
  bool dbl = LLVMGetTypeKind(t) == LLVMDoubleTypeKind;
  char name[48];
  if (strcmp(base, "tanh") == 0)
    snprintf(name, sizeof name, "%s", dbl ? "tanh" : "tanhf");
  else
    snprintf(name, sizeof name, "tpusim.%s.%s", base, dbl ? "f64" : "f32");
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  LLVMValueRef f = LLVMGetNamedFunction(w->m->mod, name);
  if (!f) {
    f = LLVMAddFunction(w->m->mod, name, ft);
    if (strncmp(name, "tpusim.", 7) == 0) {
      LLVMSetLinkage(f, LLVMInternalLinkage);
      LLVMBuilderRef hb = LLVMCreateBuilderInContext(ctx);
      LLVMPositionBuilderAtEnd(hb, LLVMAppendBasicBlockInContext(ctx, f, "entry"));
      LLVMValueRef a = LLVMGetParam(f, 0), r;
      LLVMBuilderRef saved = w->b;
      w->b = hb;
      if (strcmp(base, "logistic") == 0) { /* 1 / (1 + exp(-x)) */
        LLVMValueRef neg = LLVMBuildFNeg(hb, a, "");
        LLVMValueRef e = call_intrinsic(w, "llvm.exp", &neg, 1);
        r = LLVMBuildFDiv(hb, fconst(a, 1), LLVMBuildFAdd(hb, fconst(a, 1), e, ""), "");
      } else { /* rsqrt */
        r = LLVMBuildFDiv(hb, fconst(a, 1), call_intrinsic(w, "llvm.sqrt", &a, 1), "");
      }
      w->b = saved;
      LLVMBuildRet(hb, r);
      LLVMDisposeBuilder(hb);
    }
  }
  return LLVMBuildCall2(w->b, ft, f, &x, 1, "");
}

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */

/* The element function of each kind, written to do exactly the arithmetic
** graph.c's formula counts (gelu: 8 flops and a tanh; silu-grad: 5 flops
** and a logistic, ...). */
static LLVMValueRef elementwise(writer *w, graph_op_kind k, LLVMValueRef *x) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef a = x[0];
  switch (k) {
  case GOP_NEG: return LLVMBuildFNeg(b, a, "neg");
  case GOP_ABS: return call_intrinsic(w, "llvm.fabs", x, 1);
  case GOP_EXP: return call_intrinsic(w, "llvm.exp", x, 1);
  case GOP_LOG: return call_intrinsic(w, "llvm.log", x, 1);
  case GOP_SQRT: return call_intrinsic(w, "llvm.sqrt", x, 1);
  case GOP_SIN: return call_intrinsic(w, "llvm.sin", x, 1);
  case GOP_COS: return call_intrinsic(w, "llvm.cos", x, 1);
  case GOP_TANH: return helper(w, "tanh", a);
  case GOP_LOGISTIC: return helper(w, "logistic", a);
  case GOP_RSQRT: return helper(w, "rsqrt", a);
  case GOP_RELU: {
    LLVMValueRef args[2] = {a, fconst(a, 0)};
    return call_intrinsic(w, "llvm.maximum", args, 2);
  }
  case GOP_SILU: return LLVMBuildFMul(b, a, helper(w, "logistic", a), "silu");
  case GOP_GELU: { /* 0.5x(1 + tanh(c(x + 0.044715x^3))) */
    LLVMValueRef x3 = LLVMBuildFMul(b, LLVMBuildFMul(b, a, a, "x2"), a, "x3");
    LLVMValueRef in = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, fconst(a, 0.044715), x3, ""), "");
    LLVMValueRef t = helper(w, "tanh", LLVMBuildFMul(b, fconst(a, GELU_C), in, "u"));
    LLVMValueRef half_x = LLVMBuildFMul(b, fconst(a, 0.5), a, "");
    return LLVMBuildFMul(b, half_x, LLVMBuildFAdd(b, fconst(a, 1), t, ""), "gelu");
  }
  case GOP_CONVERT:
  case GOP_COPY: return a;
  case GOP_ADD: return LLVMBuildFAdd(b, a, x[1], "add");
  case GOP_SUB: return LLVMBuildFSub(b, a, x[1], "sub");
  case GOP_MUL: return LLVMBuildFMul(b, a, x[1], "mul");
  case GOP_DIV: return LLVMBuildFDiv(b, a, x[1], "div");
  /* XLA's max/min propagate NaN: llvm.maximum/minimum, not maxnum */
  case GOP_MAX: return call_intrinsic(w, "llvm.maximum", x, 2);
  case GOP_MIN: return call_intrinsic(w, "llvm.minimum", x, 2);
  case GOP_POW: return call_intrinsic(w, "llvm.pow", x, 2);
  case GOP_SILU_GRAD: { /* dy * s(1 + x(1 - s)), s = logistic(x) */
    LLVMValueRef s = helper(w, "logistic", a);
    LLVMValueRef in = LLVMBuildFMul(b, a, LLVMBuildFSub(b, fconst(a, 1), s, ""), "");
    LLVMValueRef d = LLVMBuildFMul(b, s, LLVMBuildFAdd(b, fconst(a, 1), in, ""), "");
    return LLVMBuildFMul(b, d, x[1], "silu_grad");
  }
  case GOP_GELU_GRAD: {
    /* t = tanh(c(x + 0.044715x^3));
    ** gelu'(x) = 0.5(1 + t) + (0.5c)x(1 - t^2)(1 + 0.134145x^2); times dy */
    LLVMValueRef x2 = LLVMBuildFMul(b, a, a, "x2");
    LLVMValueRef x3 = LLVMBuildFMul(b, x2, a, "x3");
    LLVMValueRef in = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, fconst(a, 0.044715), x3, ""), "");
    LLVMValueRef t = helper(w, "tanh", LLVMBuildFMul(b, fconst(a, GELU_C), in, "u"));
    LLVMValueRef left = LLVMBuildFMul(b, fconst(a, 0.5), LLVMBuildFAdd(b, fconst(a, 1), t, ""), "");
    LLVMValueRef sech2 = LLVMBuildFSub(b, fconst(a, 1), LLVMBuildFMul(b, t, t, ""), "sech2");
    LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildFMul(b, fconst(a, 0.5 * GELU_C), a, ""), sech2, "");
    LLVMValueRef poly =
        LLVMBuildFAdd(b, fconst(a, 1), LLVMBuildFMul(b, fconst(a, 3 * 0.044715), x2, ""), "");
    LLVMValueRef d = LLVMBuildFAdd(b, left, LLVMBuildFMul(b, r, poly, ""), "");
    return LLVMBuildFMul(b, d, x[1], "gelu_grad");
  }
  case GOP_COMPARE: /* the graph keeps no direction: less-than (all six cost one fcmp) */
    return LLVMBuildFCmp(b, LLVMRealOLT, a, x[1], "lt");
  case GOP_SELECT: return LLVMBuildSelect(b, a, x[1], x[2], "select");
  case GOP_CLAMP: { /* clamp(lo, x, hi) = min(max(x, lo), hi): 2 flops */
    LLVMValueRef lo[2] = {x[1], a};
    LLVMValueRef hi[2] = {call_intrinsic(w, "llvm.maximum", lo, 2), x[2]};
    return call_intrinsic(w, "llvm.minimum", hi, 2);
  }
  default: return NULL;
  }
}

/* The element function on integers (and pred), every instruction the
** formula counts tagged in dtype dt. Division by zero gives -1 and
** INT_MIN / -1 gives INT_MIN, as XLA defines them, without LLVM's
** undefined behaviour (the guards are untagged: not the op's arithmetic). */
static LLVMValueRef int_elementwise(writer *w, graph_op_kind k, LLVMValueRef *x, graph_dtype dt) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef a = x[0];
  bool u = is_unsigned(dt);
  switch (k) {
  case GOP_NEG: return flop(w, LLVMBuildSub(b, iconst(a, 0), a, "neg"), dt);
  case GOP_ABS: {
    LLVMValueRef args[2] = {a, LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 0, 0)};
    LLVMValueRef zero[2] = {a, iconst(a, 0)};
    /* unsigned: abs is the value itself, max(x, 0) -- still the formula's one op */
    if (u) return flop(w, call_intrinsic(w, "llvm.umax", zero, 2), dt);
    return flop(w, call_intrinsic(w, "llvm.abs", args, 2), dt);
  }
  case GOP_RELU: {
    LLVMValueRef args[2] = {a, iconst(a, 0)};
    return flop(w, call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", args, 2), dt);
  }
  case GOP_NOT: return flop(w, LLVMBuildXor(b, a, iconst(a, -1), "not"), dt);
  case GOP_CONVERT:
  case GOP_COPY: return a;
  case GOP_ADD: return flop(w, LLVMBuildAdd(b, a, x[1], "add"), dt);
  case GOP_SUB: return flop(w, LLVMBuildSub(b, a, x[1], "sub"), dt);
  case GOP_MUL: return flop(w, LLVMBuildMul(b, a, x[1], "mul"), dt);
  case GOP_DIV: {
    LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, x[1], iconst(a, 0), "");
    LLVMValueRef bad = zero;
    if (!u) {
      unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(a));
      LLVMValueRef minv = LLVMConstInt(LLVMTypeOf(a), 1ULL << (bits - 1), 0);
      LLVMValueRef ovf = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, a, minv, ""),
                                      LLVMBuildICmp(b, LLVMIntEQ, x[1], iconst(a, -1), ""), "");
      bad = LLVMBuildOr(b, zero, ovf, "");
    }
    LLVMValueRef d = LLVMBuildSelect(b, bad, iconst(a, 1), x[1], "");
    LLVMValueRef q = flop(w, u ? LLVMBuildUDiv(b, a, d, "div") : LLVMBuildSDiv(b, a, d, "div"), dt);
    LLVMValueRef q_ovf = u ? q : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x[1], iconst(a, -1), ""),
                                                 LLVMBuildSub(b, iconst(a, 0), a, ""), q, "");
    return LLVMBuildSelect(b, zero, iconst(a, -1), q_ovf, "");
  }
  case GOP_MAX:
    return flop(w, call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", x, 2), dt);
  case GOP_MIN:
    return flop(w, call_intrinsic(w, u ? "llvm.umin" : "llvm.smin", x, 2), dt);
  case GOP_AND: return flop(w, LLVMBuildAnd(b, a, x[1], "and"), dt);
  case GOP_OR: return flop(w, LLVMBuildOr(b, a, x[1], "or"), dt);
  case GOP_COMPARE: /* less-than, as for floats */
    return flop(w, LLVMBuildICmp(b, u ? LLVMIntULT : LLVMIntSLT, a, x[1], "lt"), dt);
  case GOP_SELECT: return flop(w, LLVMBuildSelect(b, a, x[1], x[2], "select"), dt);
  case GOP_CLAMP: {
    LLVMValueRef lo[2] = {x[1], a};
    LLVMValueRef hi[2] = {flop(w, call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", lo, 2), dt), x[2]};
    return flop(w, call_intrinsic(w, u ? "llvm.umin" : "llvm.smin", hi, 2), dt);
  }
  default: return NULL;
  }
}

/* ---- functions ---- */


/* Starts function `name` over buffers bufs[0..nbuf) (the operands, then
** the result) and n_starts i64 start indices, with untagged flops counted
** in flop_dt; leaves w's builder in its entry block. -1 (err says why)
** when the module is full. */
static int begin_fn(writer *w, lower_module *m, const kernel *k, const char *name,
                    const graph_shape *const *bufs, int nbuf, graph_dtype flop_dt, char *err,
                    size_t n) {
  if (m->nfn == LOWER_MAX_FNS) {
    set_err(err, n, "more than %d functions in one module", LOWER_MAX_FNS);
    return -1;
  }
  LLVMContextRef ctx = m->ctx;
  LLVMTypeRef params[LOWER_MAX_PARAMS];
  int ns = k->n_starts;
  for (int i = 0; i < nbuf; i++) params[i] = LLVMPointerTypeInContext(ctx, 0);
  for (int i = 0; i < ns; i++) params[nbuf + i] = LLVMInt64TypeInContext(ctx);
  /* A name that is a C identifier ("log", "exp") would collide with the
  ** libm symbols that llvm.log and friends lower to, in the JIT's process
  ** lookup: such names get an "op." prefix. Scoped names ("l0/attn/dot")
  ** cannot collide and stay as they are. */
  char fname[288];
  bool ident = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
               strlen(name);
  snprintf(fname, sizeof fname, "%s%s", ident ? "op." : "", name);
  LLVMValueRef fn = LLVMAddFunction(
      m->mod, fname,
      LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, (unsigned)(nbuf + ns), 0));
  unsigned deref = LLVMGetEnumAttributeKindForName("dereferenceable", 15);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < nbuf + ns; i++) {
    char pn[16];
    if (i < nbuf - 1) snprintf(pn, sizeof pn, "in%d", i);
    else if (i == nbuf - 1) snprintf(pn, sizeof pn, "out");
    else snprintf(pn, sizeof pn, "start%d", i - nbuf);
    LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), pn, strlen(pn));
    if (i >= nbuf) continue;
    double bytes = graph_bytes(bufs[i]);
    if (bytes > 0)
      LLVMAddAttributeAtIndex(fn, (unsigned)i + 1,
                              LLVMCreateEnumAttribute(ctx, deref, (uint64_t)bytes));
    LLVMAddAttributeAtIndex(fn, (unsigned)i + 1, LLVMCreateEnumAttribute(ctx, noalias, 0));
  }
  const char *dn = graph_dtype_name(flop_dt);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ctx, "tpusim.dtype", 12, dn, (unsigned)strlen(dn)));
  w->m = m;
  w->k = k;
  w->fn = fn;
  w->i64 = LLVMInt64TypeInContext(ctx);
  w->b = LLVMCreateBuilderInContext(ctx);
  w->mult = 1;
  w->n_cache = 0;
  w->n_ixc = 0;
  w->ixc = calloc(LOWER_CACHE, sizeof *w->ixc); /* NULL: no reuse, still correct */
  LLVMPositionBuilderAtEnd(w->b, block(w, "entry"));
  return 0;
}

/* Argument i's loads and stores are counted as accessed, not capped at
** its size: the rows a gather fetches and a scatter updates depend on the
** indices, and the formula charges each one (docs/op-models.md). */
static void uncapped(writer *w, int arg) {
  LLVMAddAttributeAtIndex(w->fn, (unsigned)arg + 1,
                          LLVMCreateStringAttribute(w->m->ctx, "tpusim.uncapped", 15, "", 0));
}

/* Returns from the function w writes and registers it: its index. */
static int end_fn(writer *w) {
  lower_module *m = w->m;
  mark(w, LLVMBuildRetVoid(w->b), w->mult);
  LLVMDisposeBuilder(w->b);
  free(w->ixc);
  w->ixc = NULL;
  size_t len;
  const char *nm = LLVMGetValueName2(w->fn, &len);
  m->fns[m->nfn] = w->fn;
  m->names[m->nfn] = strndup(nm, len);
  return m->nfn++;
}

/* ---- indices ---- */

/* An element of a value of shape s: its row-major linear index, its
** per-dimension indices, or both (each made from the other on demand). */
typedef struct {
  const graph_shape *s;
  LLVMValueRef lin;
  LLVMValueRef d[GRAPH_MAX_RANK];
  bool has_d;
} ix;

static LLVMValueRef i64c(writer *w, int64_t v) {
  return LLVMConstInt(w->i64, (unsigned long long)v, 1);
}


static struct ix_memo *ix_find(writer *w, const graph_shape *s, LLVMValueRef lin,
                               const LLVMValueRef *d) {
  LLVMBasicBlockRef bb = LLVMGetInsertBlock(w->b);
  for (int i = w->n_ixc - 1; w->ixc && i >= 0; i--) {
    struct ix_memo *e = &w->ixc[i];
    if (e->bb != bb || e->rank != s->rank) continue;
    bool same = true;
    for (int k = 0; k < s->rank && same; k++) same = e->dim[k] == s->dim[k] && (!d || e->d[k] == d[k]);
    if (same && (!lin || e->lin == lin)) return e;
  }
  return NULL;
}

static void ix_keep(writer *w, const graph_shape *s, LLVMValueRef lin, const LLVMValueRef *d) {
  if (!w->ixc || w->n_ixc == LOWER_CACHE) return;
  struct ix_memo *e = &w->ixc[w->n_ixc++];
  e->rank = s->rank;
  e->lin = lin;
  e->bb = LLVMGetInsertBlock(w->b);
  for (int k = 0; k < s->rank; k++) e->dim[k] = s->dim[k], e->d[k] = d[k];
}

static LLVMValueRef linear_index(writer *w, const graph_shape *s, LLVMValueRef *idx) {
  if (s->rank == 0) return i64c(w, 0);
  struct ix_memo *e = ix_find(w, s, NULL, idx);
  if (e) return e->lin;
  LLVMValueRef lin = idx[0];
  for (int d = 1; d < s->rank; d++) {
    lin = LLVMBuildMul(w->b, lin, i64c(w, s->dim[d]), "");
    lin = LLVMBuildAdd(w->b, lin, idx[d], "");
  }
  ix_keep(w, s, lin, idx);
  return lin;
}

static ix ix_lin(const graph_shape *s, LLVMValueRef lin) {
  ix x = {.s = s, .lin = lin};
  return x;
}

static ix ix_dims(const graph_shape *s, const LLVMValueRef *d) {
  ix x = {.s = s, .has_d = true};
  for (int i = 0; i < s->rank; i++) x.d[i] = d[i];
  return x;
}

static LLVMValueRef get_lin(writer *w, ix *x) {
  if (!x->lin) x->lin = linear_index(w, x->s, x->d);
  return x->lin;
}

static void get_dims(writer *w, ix *x) {
  if (x->has_d) return;
  struct ix_memo *e = x->s->rank ? ix_find(w, x->s, x->lin, NULL) : NULL;
  if (e) {
    for (int d = 0; d < x->s->rank; d++) x->d[d] = e->d[d];
    x->has_d = true;
    return;
  }
  LLVMValueRef r = x->lin;
  for (int d = x->s->rank - 1; d > 0; d--) {
    LLVMValueRef size = i64c(w, x->s->dim[d]);
    x->d[d] = LLVMBuildURem(w->b, r, size, "");
    r = LLVMBuildUDiv(w->b, r, size, "");
  }
  if (x->s->rank > 0) x->d[0] = r;
  x->has_d = true;
  if (x->s->rank > 0) ix_keep(w, x->s, x->lin, x->d);
}

static bool in_dims(const graph_dims *ds, int d) {
  for (int i = 0; i < ds->n; i++)
    if (ds->d[i] == d) return true;
  return false;
}

/* v clamped to [0, hi] (signed): an index the data chose, kept in bounds
** as XLA clamps gather and dynamic-slice starts. */
static LLVMValueRef clamp_index(writer *w, LLVMValueRef v, int64_t hi) {
  if (hi < 0) hi = 0;
  LLVMValueRef lo[2] = {v, i64c(w, 0)};
  LLVMValueRef up[2] = {call_intrinsic(w, "llvm.smax", lo, 2), i64c(w, hi)};
  return call_intrinsic(w, "llvm.smin", up, 2);
}

/* An integer element of dtype dt, as an i64 index. */
static LLVMValueRef as_index(writer *w, LLVMValueRef v, graph_dtype dt) {
  unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(v));
  if (bits == 64) return v;
  return is_unsigned(dt) ? LLVMBuildZExt(w->b, v, w->i64, "") : LLVMBuildSExt(w->b, v, w->i64, "");
}

/* ---- values: loaded from a buffer, or computed inside the kernel ---- */

static int member(const kernel *k, int v) {
  for (int i = 0; i < k->n_ops; i++)
    if (k->ops[i] == v) return i;
  return -1;
}

/* The argument holding outside value v (a fused kernel: one per value). */
static int outside_arg(const kernel *k, int v) {
  for (int i = 0; i < k->n_outside; i++)
    if (k->outside[i] == v) return i;
  return -1;
}

static LLVMValueRef load_arg(writer *w, int arg, graph_dtype dt, LLVMValueRef idx,
                             const char *name) {
  LLVMBasicBlockRef bb = LLVMGetInsertBlock(w->b);
  for (int i = 0; i < w->n_cache; i++)
    if (w->cache[i].arg == arg && w->cache[i].idx == idx && w->cache[i].bb == bb)
      return w->cache[i].v;
  LLVMValueRef v = load_elem(w, LLVMGetParam(w->fn, (unsigned)arg), idx, dt, name);
  if (w->n_cache < LOWER_CACHE)
    w->cache[w->n_cache++] = (load_memo){.arg = arg, .idx = idx, .v = v, .bb = bb};
  return v;
}

static LLVMValueRef emit_op(writer *w, int id, ix *o);

/* The value of operand j of op `id` at index x, in its compute type. */
static LLVMValueRef operand_at(writer *w, int id, int j, ix *x, const char *hint) {
  const kernel *k = w->k;
  const graph_op *op = graph_get(k->g, id);
  int v = op->in[j];
  const graph_op *vo = graph_get(k->g, v);
  if (member(k, v) >= 0) {
    /* a member read twice at one index in one block is computed once, as
    ** XLA's fused emitter caches a value per (instruction, index) */
    LLVMValueRef lin = get_lin(w, x);
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(w->b);
    int key = -2 - v;
    for (int i = 0; i < w->n_cache; i++)
      if (w->cache[i].arg == key && w->cache[i].idx == lin && w->cache[i].bb == bb)
        return w->cache[i].v;
    LLVMValueRef r = emit_op(w, v, x);
    LLVMBasicBlockRef after = LLVMGetInsertBlock(w->b);
    if (w->n_cache < LOWER_CACHE)
      w->cache[w->n_cache++] = (load_memo){.arg = key, .idx = lin, .v = r, .bb = after};
    return r;
  }
  int arg = k->single ? j : outside_arg(k, v);
  const char *nm = hint ? hint : vo->name;
  return load_arg(w, arg, vo->out.dtype, get_lin(w, x), nm);
}

/* Names an op's result after the op, for reading the IR. */
static LLVMValueRef named(LLVMValueRef v, const graph_op *op, LLVMValueRef *ins, int n_in) {
  if (!LLVMIsAInstruction(v)) return v;
  for (int i = 0; i < n_in; i++)
    if (ins[i] == v) return v;
  LLVMSetValueName2(v, op->name, strlen(op->name));
  return v;
}

static graph_dtype acc_dtype(graph_dtype dt) {
  switch (dt) {
  case GDT_F64: return GDT_F64;
  case GDT_S64: return GDT_S64;
  case GDT_BF16: case GDT_F16: case GDT_F32: return GDT_F32;
  case GDT_U8: case GDT_U32: return GDT_U32;
  default: return GDT_S32;
  }
}

static LLVMValueRef zero_of(LLVMTypeRef t) {
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMConstInt(t, 0, 0) : LLVMConstReal(t, 0);
}

static LLVMValueRef emit_elementwise(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  graph_dtype dt = op->kind == GOP_SELECT ? op->out.dtype : graph_get(g, op->in[0])->out.dtype;
  LLVMValueRef x[3];
  int64_t n = graph_elements(&op->out);
  if (op->n_in > 1) get_lin(w, o); /* one index value: operands read at it share the member cache */
  for (int j = 0; j < op->n_in; j++) {
    const graph_shape *s = &graph_get(g, op->in[j])->out;
    ix xi = *o;
    xi.s = s;
    if (graph_elements(s) != n) xi = ix_lin(s, i64c(w, 0)); /* a scalar operand (select, clamp) */
    x[j] = operand_at(w, id, j, &xi, NULL);
  }
  LLVMValueRef r;
  if (op->kind == GOP_CONVERT) {
    r = convert_value(w, x[0], dt, op->out.dtype);
  } else if (is_float(dt)) {
    for (int j = 0; j < op->n_in; j++)
      if (!(op->kind == GOP_SELECT && j == 0)) x[j] = to_compute(w, x[j], dt);
    LLVMValueRef last = LLVMGetLastInstruction(LLVMGetInsertBlock(w->b));
    r = elementwise(w, op->kind, x);
    tag_since(w, last, dt);
    if (op->kind == GOP_SELECT) flop(w, r, dt);
  } else {
    r = int_elementwise(w, op->kind, x, dt);
  }
  return named(r, op, x, op->n_in);
}

/* dot: one loop per contracting dim; multiply-add into an f32 (f64,
** i32, i64) accumulator. */
static LLVMValueRef emit_dot(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  const graph_shape *sa = &graph_get(g, op->in[0])->out, *sb = &graph_get(g, op->in[1])->out;
  graph_dtype adt = acc_dtype(sa->dtype);
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  get_dims(w, o);
  LLVMBuildStore(w->b, zero_of(ct), acc_slot);
  loop lk[GRAPH_MAX_RANK];
  LLVMValueRef ki[GRAPH_MAX_RANK];
  int nc = op->lhs_contract.n;
  for (int c = 0; c < nc; c++) {
    char nm[16];
    snprintf(nm, sizeof nm, "k%d", c);
    loop_open(w, &lk[c], sa->dim[op->lhs_contract.d[c]], nm);
    ki[c] = lk[c].iv;
  }
  /* operand indices: a batch dim takes its output index, a contracting dim
  ** its k, a free dim the next free output index (batch, lhs free, rhs free) */
  LLVMValueRef ia[GRAPH_MAX_RANK], ib[GRAPH_MAX_RANK];
  int next = op->lhs_batch.n;
  for (int side = 0; side < 2; side++) {
    const graph_shape *s = side ? sb : sa;
    const graph_dims *batch = side ? &op->rhs_batch : &op->lhs_batch;
    const graph_dims *contract = side ? &op->rhs_contract : &op->lhs_contract;
    LLVMValueRef *idx = side ? ib : ia;
    for (int d = 0; d < s->rank; d++) {
      idx[d] = NULL;
      for (int i = 0; i < batch->n; i++)
        if (batch->d[i] == d) idx[d] = o->d[i];
      for (int c = 0; c < contract->n; c++)
        if (contract->d[c] == d) idx[d] = ki[c];
      if (!idx[d]) idx[d] = o->d[next++];
    }
  }
  ix xa = ix_dims(sa, ia), xb = ix_dims(sb, ib);
  LLVMValueRef a = convert_value(w, operand_at(w, id, 0, &xa, "a"), sa->dtype, adt);
  LLVMValueRef bv = convert_value(w, operand_at(w, id, 1, &xb, "b"), sb->dtype, adt);
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
  bool fl = is_float(adt);
  LLVMValueRef prod = flop(w, fl ? LLVMBuildFMul(w->b, a, bv, "prod") : LLVMBuildMul(w->b, a, bv, "prod"), sa->dtype);
  LLVMValueRef nx = flop(w, fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next") : LLVMBuildAdd(w->b, acc, prod, "acc.next"), sa->dtype);
  LLVMBuildStore(w->b, nx, acc_slot);
  for (int c = nc - 1; c >= 0; c--) loop_close(w, &lk[c]);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  LLVMValueRef r = convert_value(w, sum, adt, op->out.dtype);
  return named(r, op, NULL, 0);
}

/* convolution: one loop per window dim, then one over the input features
** of the output feature's group; multiply-add as dot. A window position in
** the padding (or between dilated input elements) still multiplies -- by
** zero, selected in place of a load from a clamped index -- so the flops
** are the formula's 2 x out x window x features, padding included, as
** XLA's cost analysis counts them. */
static LLVMValueRef emit_conv(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  const graph_conv_attrs *c = &op->conv;
  const graph_shape *si = &graph_get(g, op->in[0])->out, *sk = &graph_get(g, op->in[1])->out;
  graph_dtype adt = acc_dtype(si->dtype);
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  get_dims(w, o);
  LLVMBuildStore(w->b, zero_of(ct), acc_slot);
  int64_t fg = c->feature_groups > 0 ? c->feature_groups : 1;
  int64_t cin = sk->dim[c->k_in], cout_g = sk->dim[c->k_out] / fg;
  LLVMValueRef grp = LLVMBuildUDiv(w->b, o->d[c->out_feature], i64c(w, cout_g), "group");
  loop lw[3], lc;
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", s);
    loop_open(w, &lw[s], sk->dim[c->k_spatial[s]], nm);
  }
  loop_open(w, &lc, cin, "ci");
  LLVMValueRef ii[GRAPH_MAX_RANK], kk[GRAPH_MAX_RANK];
  LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 1, 0);
  ii[c->in_batch] = o->d[c->out_batch];
  ii[c->in_feature] = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, grp, i64c(w, cin), ""), lc.iv, "");
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = c->stride[s] > 0 ? c->stride[s] : 1, ld = c->lhs_dilation[s] > 0 ? c->lhs_dilation[s] : 1,
            rd = c->rhs_dilation[s] > 0 ? c->rhs_dilation[s] : 1, n = si->dim[c->in_spatial[s]];
    /* position in the dilated, padded input */
    LLVMValueRef pos = LLVMBuildAdd(
        w->b, LLVMBuildMul(w->b, o->d[c->out_spatial[s]], i64c(w, st), ""),
        LLVMBuildMul(w->b, lw[s].iv, i64c(w, rd), ""), "");
    pos = LLVMBuildSub(w->b, pos, i64c(w, c->pad_lo[s]), "");
    LLVMValueRef p = ld > 1 ? LLVMBuildSDiv(w->b, pos, i64c(w, ld), "") : pos;
    LLVMValueRef ok = LLVMBuildAnd(w->b, LLVMBuildICmp(w->b, LLVMIntSGE, pos, i64c(w, 0), ""),
                                   LLVMBuildICmp(w->b, LLVMIntSLT, p, i64c(w, n), ""), "");
    if (ld > 1)
      ok = LLVMBuildAnd(w->b, ok, LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, pos, i64c(w, ld), ""), i64c(w, 0), ""), "");
    valid = LLVMBuildAnd(w->b, valid, ok, "");
    ii[c->in_spatial[s]] = clamp_index(w, p, n - 1);
    kk[c->k_spatial[s]] = lw[s].iv;
  }
  kk[c->k_in] = lc.iv;
  kk[c->k_out] = o->d[c->out_feature];
  LLVMValueRef inb = valid;
  LLVMSetValueName2(inb, "inside", 6);
  ix xi = ix_dims(si, ii), xk = ix_dims(sk, kk);
  LLVMValueRef x = convert_value(w, operand_at(w, id, 0, &xi, "x"), si->dtype, adt);
  LLVMValueRef kv = convert_value(w, operand_at(w, id, 1, &xk, "k"), sk->dtype, adt);
  x = LLVMBuildSelect(w->b, inb, x, zero_of(ct), "x.or0");
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
  bool fl = is_float(adt);
  LLVMValueRef prod = flop(w, fl ? LLVMBuildFMul(w->b, x, kv, "prod") : LLVMBuildMul(w->b, x, kv, "prod"), si->dtype);
  LLVMValueRef nx = flop(w, fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next") : LLVMBuildAdd(w->b, acc, prod, "acc.next"), si->dtype);
  LLVMBuildStore(w->b, nx, acc_slot);
  loop_close(w, &lc);
  for (int s = c->spatial - 1; s >= 0; s--) loop_close(w, &lw[s]);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  return named(convert_value(w, sum, adt, op->out.dtype), op, NULL, 0);
}

static LLVMValueRef combine(writer *w, graph_reduce_kind r, LLVMValueRef a, LLVMValueRef b,
                            graph_dtype adt, graph_dtype dt) {
  LLVMValueRef x[2] = {a, b};
  bool fl = is_float(adt), u = is_unsigned(adt);
  switch (r) {
  case GRAPH_RED_ADD: return flop(w, fl ? LLVMBuildFAdd(w->b, a, b, "sum") : LLVMBuildAdd(w->b, a, b, "sum"), dt);
  case GRAPH_RED_MUL: return flop(w, fl ? LLVMBuildFMul(w->b, a, b, "prod") : LLVMBuildMul(w->b, a, b, "prod"), dt);
  case GRAPH_RED_MAX:
    return flop(w, call_intrinsic(w, fl ? "llvm.maximum" : u ? "llvm.umax" : "llvm.smax", x, 2), dt);
  default:
    return flop(w, call_intrinsic(w, fl ? "llvm.minimum" : u ? "llvm.umin" : "llvm.smin", x, 2), dt);
  }
}

/* reduce: one loop over the reduced elements flattened, starting at the
** second: the accumulator starts as the first element, so K elements take
** K - 1 combines (the formula's in - out). bf16 and fp16 accumulate in
** f32, as XLA does; integers in their own width (wrapping). */
static LLVMValueRef emit_reduce(writer *w, int id, const graph_op *op, ix *o) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  graph_dtype adt = is_float(sx->dtype) ? acc_dtype(sx->dtype) : sx->dtype;
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  get_dims(w, o);
  int64_t k = 1;
  for (int i = 0; i < op->dims.n; i++) k *= sx->dim[op->dims.d[i]];
  LLVMValueRef zero = i64c(w, 0), idx[GRAPH_MAX_RANK];
  loop lr;
  /* the input index of reduced element r: kept dims from the output index,
  ** reduced dims by decomposing r (last reduced dim fastest) */
  for (int pass = 0; pass < 2; pass++) {
    LLVMValueRef r = zero;
    if (pass == 1) {
      loop_from(w, &lr, 1, k, "r");
      r = lr.iv;
    }
    for (int d = 0, next = 0; d < sx->rank; d++) idx[d] = in_dims(&op->dims, d) ? NULL : o->d[next++];
    for (int i = op->dims.n - 1; i >= 0; i--) {
      LLVMValueRef size = i64c(w, sx->dim[op->dims.d[i]]);
      idx[op->dims.d[i]] = pass && i > 0 ? LLVMBuildURem(w->b, r, size, "") : r;
      if (pass && i > 0) r = LLVMBuildUDiv(w->b, r, size, "");
    }
    ix xi = ix_dims(sx, idx);
    LLVMValueRef v = convert_value(w, operand_at(w, id, 0, &xi, "x"), sx->dtype, adt);
    if (pass == 0) {
      LLVMBuildStore(w->b, v, acc_slot);
    } else {
      LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
      LLVMBuildStore(w->b, combine(w, op->reduce, acc, v, adt, sx->dtype), acc_slot);
      loop_close(w, &lr);
    }
  }
  LLVMValueRef res = LLVMBuildLoad2(w->b, ct, acc_slot, "result");
  return named(convert_value(w, res, adt, op->out.dtype), op, NULL, 0);
}

/* pad: output position p of a dim comes from operand element (p - lo) /
** (interior + 1) when that divides and lands inside; elsewhere it is the
** padding value 0. The load is from a clamped index and a select keeps
** the zero: no branch, each output element loads once (capped at the
** operand's size: the formula's bytes). */
static LLVMValueRef emit_pad(writer *w, int id, const graph_op *op, ix *o) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  get_dims(w, o);
  LLVMValueRef idx[GRAPH_MAX_RANK];
  LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 1, 0);
  for (int d = 0; d < sx->rank; d++) {
    int64_t step = op->step[d] + 1;
    LLVMValueRef q = LLVMBuildSub(w->b, o->d[d], i64c(w, op->lo[d]), "");
    LLVMValueRef p = step > 1 ? LLVMBuildSDiv(w->b, q, i64c(w, step), "") : q;
    LLVMValueRef ok = LLVMBuildAnd(w->b, LLVMBuildICmp(w->b, LLVMIntSGE, q, i64c(w, 0), ""),
                                   LLVMBuildICmp(w->b, LLVMIntSLT, p, i64c(w, sx->dim[d]), ""), "");
    if (step > 1)
      ok = LLVMBuildAnd(w->b, ok, LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, q, i64c(w, step), ""), i64c(w, 0), ""), "");
    valid = LLVMBuildAnd(w->b, valid, ok, "");
    idx[d] = clamp_index(w, p, sx->dim[d] - 1);
  }
  ix xi = ix_dims(sx, idx);
  LLVMValueRef x = operand_at(w, id, 0, &xi, NULL);
  return named(LLVMBuildSelect(w->b, valid, x, zero_of(LLVMTypeOf(x)), ""), op, NULL, 0);
}

/* gather: output element (n, j) is element j of the row index n picks
** (clamped into range, as XLA clamps). */
static LLVMValueRef emit_gather(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  const graph_shape *st = &graph_get(g, op->in[0])->out, *si = &graph_get(g, op->in[1])->out;
  gather_layout L;
  gather_layout_of(st, si, &op->out, &L);
  LLVMValueRef lin = get_lin(w, o);
  if (L.columns) { /* out[b, k] = table[b, idx[k]] */
    int64_t K = graph_elements(si);
    LLVMValueRef b = LLVMBuildUDiv(w->b, lin, i64c(w, K), "b");
    ix xk = ix_lin(si, LLVMBuildURem(w->b, lin, i64c(w, K), "k"));
    LLVMValueRef col = clamp_index(w, as_index(w, operand_at(w, id, 1, &xk, "index"), si->dtype), L.per - 1);
    ix xt = ix_lin(st, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, b, i64c(w, L.per), ""), col, "elem"));
    return named(operand_at(w, id, 0, &xt, "col"), op, NULL, 0);
  }
  LLVMValueRef nidx = LLVMBuildUDiv(w->b, lin, i64c(w, L.rs), "n");
  LLVMValueRef j = LLVMBuildURem(w->b, lin, i64c(w, L.rs), "j");
  ix xi = ix_lin(si, nidx);
  LLVMValueRef row = clamp_index(w, as_index(w, operand_at(w, id, 1, &xi, "index"), si->dtype), L.per - 1);
  if (L.along) row = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, nidx, i64c(w, L.per), ""), row, "");
  ix xt = ix_lin(st, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, row, i64c(w, L.rs), ""), j, "row.elem"));
  return named(operand_at(w, id, 0, &xt, "row"), op, NULL, 0);
}

/* The start of dim d of a dynamic slice of `size` out of `dim`: the
** argument, clamped so the slice fits (XLA's rule). */
static LLVMValueRef start_of(writer *w, int d, int64_t dim, int64_t size) {
  int base = w->k->n_outside + 1;
  return clamp_index(w, LLVMGetParam(w->fn, (unsigned)(base + d)), dim - size);
}

static LLVMValueRef emit_op(writer *w, int id, ix *o) {
  const graph *g = w->k->g;
  const graph_op *op = graph_get(g, id);
  switch (op->kind) {
  case GOP_DOT: return emit_dot(w, id, op, o);
  case GOP_CONV: return emit_conv(w, id, op, o);
  case GOP_REDUCE: return emit_reduce(w, id, op, o);
  case GOP_PAD: return emit_pad(w, id, op, o);
  case GOP_GATHER: return emit_gather(w, id, op, o);
  case GOP_RESHAPE: { /* the same row-major element */
    ix xi = ix_lin(&graph_get(g, op->in[0])->out, get_lin(w, o));
    return operand_at(w, id, 0, &xi, NULL);
  }
  case GOP_BROADCAST:
  case GOP_TRANSPOSE:
  case GOP_SLICE:
  case GOP_DYNAMIC_SLICE: {
    const graph_shape *sx = &graph_get(g, op->in[0])->out;
    get_dims(w, o);
    LLVMValueRef idx[GRAPH_MAX_RANK];
    for (int d = 0; d < sx->rank; d++) {
      if (op->kind == GOP_BROADCAST) idx[d] = o->d[op->dims.d[d]];
      else if (op->kind == GOP_TRANSPOSE) idx[op->dims.d[d]] = o->d[d];
      else if (op->kind == GOP_SLICE)
        idx[d] = LLVMBuildAdd(w->b, i64c(w, op->lo[d]),
                              LLVMBuildMul(w->b, o->d[d], i64c(w, op->step[d]), ""), "");
      else
        idx[d] = LLVMBuildAdd(w->b, start_of(w, d, sx->dim[d], op->out.dim[d]), o->d[d], "");
    }
    ix xi = ix_dims(sx, idx);
    return operand_at(w, id, 0, &xi, NULL);
  }
  case GOP_IOTA: { /* the graph keeps no iota dimension: 0 */
    get_dims(w, o);
    LLVMValueRef v = op->out.rank ? o->d[0] : i64c(w, 0);
    return named(convert_value(w, v, GDT_S64, op->out.dtype), op, NULL, 0);
  }
  default: return emit_elementwise(w, id, op, o);
  }
}

/* ---- kernels: the root's loops, then its value at each element ---- */

/* Kinds emit_op computes at any index: what may sit inside a fused kernel
** below its root. */
static bool computable(graph_op_kind k) {
  return graph_op_is_elementwise(k) || k == GOP_DOT || k == GOP_CONV || k == GOP_REDUCE ||
         k == GOP_PAD || k == GOP_GATHER || k == GOP_RESHAPE || k == GOP_BROADCAST ||
         k == GOP_TRANSPOSE || k == GOP_SLICE || k == GOP_IOTA;
}

static LLVMValueRef out_arg(writer *w) { return LLVMGetParam(w->fn, (unsigned)w->k->n_outside); }

/* The argument an outside operand j of op `id` is read from, or -1 when
** the kernel computes it. */
static int arg_of_operand(const kernel *k, int id, int j) {
  int v = graph_get(k->g, id)->in[j];
  if (member(k, v) >= 0) return -1;
  return k->single ? j : outside_arg(k, v);
}

static void loops_open(writer *w, loop *l, const graph_shape *s, const char *prefix,
                       LLVMValueRef *d) {
  for (int i = 0; i < s->rank; i++) {
    char nm[24];
    snprintf(nm, sizeof nm, "%s%d", prefix, i);
    loop_open(w, &l[i], s->dim[i], nm);
    d[i] = l[i].iv;
  }
}

static void loops_close(writer *w, loop *l, int rank) {
  for (int d = rank - 1; d >= 0; d--) loop_close(w, &l[d]);
}

/* Stores operand j of the root into every element of the result: a
** dynamic-update-slice or scatter whose operand the kernel computes (a
** broadcast zero) writes it before updating in place. */
static void fill_from_operand(writer *w, int root, int j) {
  const graph_op *op = graph_get(w->k->g, root);
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK];
  loops_open(w, l, &op->out, "f", d);
  ix o = ix_dims(&op->out, d);
  store_elem(w, operand_at(w, root, j, &o, NULL), out_arg(w), get_lin(w, &o), op->out.dtype);
  loops_close(w, l, op->out.rank);
}

static void lower_concat(writer *w, int root, const graph_op *op) {
  int dim = op->dims.d[0];
  int64_t off = 0;
  for (int j = 0; j < op->n_in; j++) {
    const graph_shape *s = &graph_get(w->k->g, op->in[j])->out;
    loop l[GRAPH_MAX_RANK];
    LLVMValueRef d[GRAPH_MAX_RANK], od[GRAPH_MAX_RANK];
    char pre[16];
    snprintf(pre, sizeof pre, "c%d.", j);
    loops_open(w, l, s, pre, d);
    ix xi = ix_dims(s, d);
    LLVMValueRef v = operand_at(w, root, j, &xi, NULL);
    for (int i = 0; i < s->rank; i++) od[i] = i == dim && off ? LLVMBuildAdd(w->b, d[i], i64c(w, off), "") : d[i];
    store_elem(w, v, out_arg(w), linear_index(w, &op->out, od), op->out.dtype);
    loops_close(w, l, s->rank);
    off += s->dim[dim];
  }
}

/* dynamic-update-slice, in place: the result buffer holds the operand on
** entry (XLA gives the two one buffer), and only the update is read and
** written -- the formula's bytes. */
static void lower_dus(writer *w, int root, const graph_op *op) {
  const graph_shape *su = &graph_get(w->k->g, op->in[1])->out;
  /* inside a fused kernel the result is a buffer of its own (the fusion
  ** pass reads every outside value once): the operand is copied first */
  if (!w->k->single || arg_of_operand(w->k, root, 0) < 0) fill_from_operand(w, root, 0);
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK], od[GRAPH_MAX_RANK];
  loops_open(w, l, su, "u", d);
  ix xu = ix_dims(su, d);
  LLVMValueRef v = operand_at(w, root, 1, &xu, "update");
  for (int i = 0; i < su->rank; i++)
    od[i] = LLVMBuildAdd(w->b, start_of(w, i, op->out.dim[i], su->dim[i]), d[i], "");
  store_elem(w, v, out_arg(w), linear_index(w, &op->out, od), op->out.dtype);
  loops_close(w, l, su->rank);
}

/* scatter-add, in place as dynamic-update-slice: for each index, its row
** of updates is added into the row it names (clamped). A read-modify-write
** of the rows touched: 2 x updates + indices read, updates written. */
static void lower_scatter(writer *w, int root, const graph_op *op) {
  const graph *g = w->k->g;
  const graph_shape *si = &graph_get(g, op->in[1])->out, *su = &graph_get(g, op->in[2])->out;
  int64_t nidx = graph_elements(si), rs = graph_elements(su) / nidx,
          rows = graph_elements(&op->out) / rs;
  if (!w->k->single || arg_of_operand(w->k, root, 0) < 0) {
    /* a result of its own, as for dynamic-update-slice; reading back what
    ** the kernel wrote is not HBM traffic the fusion pass counts */
    fill_from_operand(w, root, 0);
    LLVMAddAttributeAtIndex(w->fn, (unsigned)w->k->n_outside + 1,
                            LLVMCreateStringAttribute(w->m->ctx, "tpusim.own", 10, "", 0));
  } else {
    uncapped(w, w->k->n_outside);
  }
  graph_dtype dt = op->out.dtype, adt = is_float(dt) ? acc_dtype(dt) : dt;
  loop ln, lj;
  loop_open(w, &ln, nidx, "n");
  ix xi = ix_lin(si, ln.iv);
  LLVMValueRef row = clamp_index(w, as_index(w, operand_at(w, root, 1, &xi, "index"), si->dtype), rows - 1);
  loop_open(w, &lj, rs, "j");
  ix xu = ix_lin(su, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, ln.iv, i64c(w, rs), ""), lj.iv, ""));
  LLVMValueRef u = convert_value(w, operand_at(w, root, 2, &xu, "update"), dt, adt);
  LLVMValueRef pos = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, row, i64c(w, rs), ""), lj.iv, "pos");
  LLVMValueRef cur = convert_value(w, load_elem(w, out_arg(w), pos, dt, "cur"), dt, adt);
  LLVMValueRef sum = flop(w, is_float(adt) ? LLVMBuildFAdd(w->b, cur, u, op->name) : LLVMBuildAdd(w->b, cur, u, op->name), dt);
  store_elem(w, convert_value(w, sum, adt, dt), out_arg(w), pos, dt);
  loop_close(w, &lj);
  loop_close(w, &ln);
}

/* ---- custom-calls: the convolution gradients, prefix-sum, row-partition ---- */

/* A conditional block: branches from the current block (count: w->mult)
** to `then` or `skip`, and leaves the builder in `then`, its count
** `then_count` -- worked out by the caller from the loop bounds, so the
** count stays a property of the IR alone. */
typedef struct {
  LLVMBasicBlockRef skip;
  int64_t saved_mult;
} cond_block;

static void cond_open(writer *w, cond_block *cb, LLVMValueRef cond, int64_t then_count,
                      const char *name) {
  char tn[40], sn[40];
  snprintf(tn, sizeof tn, "%s.then", name);
  snprintf(sn, sizeof sn, "%s.skip", name);
  LLVMBasicBlockRef then = block(w, tn);
  cb->skip = block(w, sn);
  mark(w, LLVMBuildCondBr(w->b, cond, then, cb->skip), w->mult);
  LLVMPositionBuilderAtEnd(w->b, then);
  cb->saved_mult = w->mult;
  w->mult = then_count;
}

static void cond_close(writer *w, cond_block *cb) {
  mark(w, LLVMBuildBr(w->b, cb->skip), w->mult);
  w->mult = cb->saved_mult;
  LLVMPositionBuilderAtEnd(w->b, cb->skip);
}

static LLVMValueRef all_of(writer *w, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAnd(w->b, a, b, "");
}
static LLVMValueRef true_i1(writer *w) {
  return LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 1, 0);
}

/* acc += a * b in the accumulator type, both instructions tagged in dt. */
static void mul_add(writer *w, LLVMValueRef slot, LLVMTypeRef ct, LLVMValueRef a, LLVMValueRef b,
                    graph_dtype adt, graph_dtype dt) {
  bool fl = is_float(adt);
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, slot, "acc");
  LLVMValueRef prod = flop(w, fl ? LLVMBuildFMul(w->b, a, b, "prod") : LLVMBuildMul(w->b, a, b, "prod"), dt);
  LLVMValueRef nx = flop(w, fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next") : LLVMBuildAdd(w->b, acc, prod, "acc.next"), dt);
  LLVMBuildStore(w->b, nx, slot);
}

static int64_t or1(int64_t v) { return v > 0 ? v : 1; }

/* The input-position range a conv-backward-input walks in spatial dim s,
** as offsets q = position in the lhs-dilated input (q = p * lhs_dilation for
** input element p): every q a forward window tap lands on (padding
** included) and every real element. */
static void bwd_input_range(const graph_conv_attrs *c, int s, int64_t n, int64_t out, int64_t win,
                            int64_t *lo, int64_t *hi) {
  int64_t st = or1(c->stride[s]), rd = or1(c->rhs_dilation[s]), ld = or1(c->lhs_dilation[s]);
  int64_t first = -c->pad_lo[s], last = out > 0 ? (out - 1) * st + (win - 1) * rd - c->pad_lo[s] : first;
  int64_t real = n > 0 ? (n - 1) * ld : 0;
  *lo = first < 0 ? first : 0;
  *hi = (last > real ? last : real) + 1;
}

/* conv-backward-input: dx from (dy, kernel), as a gather over the input.
** For each element of dx -- and each position of the padding, where the
** forward's window taps also land -- every window tap w whose output
** position (q + pad_lo - w * rhs_dilation) / stride is whole and in range
** multiplies dy by the kernel over the group's output features. That visits
** each (output position, tap) pair of the forward exactly once, so the
** flops are the forward's 2 x out x window x features, the declared cost
** (XLA's transposed convolution over a stride-dilated dy would multiply
** the zeros between too). Taps into the padding are computed and dropped:
** only real input elements are stored, once each. The tap test is a
** branch; its block's count is the number of (position, tap) pairs that
** pass, worked out here per dimension from the bounds. */
static void lower_conv_bwd_input(writer *w, int root, const graph_op *op) {
  const graph *g = w->k->g;
  const graph_conv_attrs *c = &op->conv;
  const graph_shape *sy = &graph_get(g, op->in[0])->out, *sk = &graph_get(g, op->in[1])->out;
  const graph_shape *sx = &op->out;
  graph_dtype dt = sy->dtype, adt = acc_dtype(dt);
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  int64_t fg = or1(c->feature_groups), cin = sk->dim[c->k_in], cout_g = sk->dim[c->k_out] / fg;
  int64_t lo[3], hi[3], taps = 1, real = 1;
  int spatial_of[GRAPH_MAX_RANK];
  for (int d = 0; d < sx->rank; d++) spatial_of[d] = -1;
  for (int s = 0; s < c->spatial; s++) {
    int64_t win = sk->dim[c->k_spatial[s]], out = sy->dim[c->out_spatial[s]];
    bwd_input_range(c, s, sx->dim[c->in_spatial[s]], out, win, &lo[s], &hi[s]);
    spatial_of[c->in_spatial[s]] = s;
    /* (q, tap) pairs with a whole output position in range: one per forward pair */
    int64_t st = or1(c->stride[s]), rd = or1(c->rhs_dilation[s]), pairs = 0;
    for (int64_t q = lo[s]; q < hi[s]; q++)
      for (int64_t t = 0; t < win; t++) {
        int64_t o = q + c->pad_lo[s] - t * rd;
        pairs += o >= 0 && o % st == 0 && o / st < out;
      }
    taps *= pairs;
    real *= sx->dim[c->in_spatial[s]];
  }
  int64_t base = w->mult; /* the non-spatial dims' product, below */
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK], q[3];
  for (int i = 0; i < sx->rank; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", i);
    int s = spatial_of[i];
    loop_open(w, &l[i], s >= 0 ? hi[s] - lo[s] : sx->dim[i], nm);
    d[i] = l[i].iv;
    if (s >= 0) q[s] = LLVMBuildAdd(w->b, l[i].iv, i64c(w, lo[s]), "q");
    else base *= sx->dim[i];
  }
  LLVMBuildStore(w->b, zero_of(ct), acc_slot);
  LLVMValueRef f = d[c->in_feature];
  LLVMValueRef grp = LLVMBuildUDiv(w->b, f, i64c(w, cin), "group");
  LLVMValueRef ci = LLVMBuildURem(w->b, f, i64c(w, cin), "ci");
  loop lw[3];
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", s);
    loop_open(w, &lw[s], sk->dim[c->k_spatial[s]], nm);
  }
  LLVMValueRef hit = true_i1(w), yi[GRAPH_MAX_RANK], ki[GRAPH_MAX_RANK];
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = or1(c->stride[s]), rd = or1(c->rhs_dilation[s]);
    LLVMValueRef o = LLVMBuildSub(w->b, LLVMBuildAdd(w->b, q[s], i64c(w, c->pad_lo[s]), ""),
                                  LLVMBuildMul(w->b, lw[s].iv, i64c(w, rd), ""), "");
    LLVMValueRef os = LLVMBuildSDiv(w->b, o, i64c(w, st), "");
    hit = all_of(w, hit, LLVMBuildICmp(w->b, LLVMIntSGE, o, i64c(w, 0), ""));
    hit = all_of(w, hit, LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, o, i64c(w, st), ""), i64c(w, 0), ""));
    hit = all_of(w, hit, LLVMBuildICmp(w->b, LLVMIntSLT, os, i64c(w, sy->dim[c->out_spatial[s]]), ""));
    yi[c->out_spatial[s]] = os;
    ki[c->k_spatial[s]] = lw[s].iv;
  }
  cond_block tap;
  cond_open(w, &tap, hit, base * taps, "tap");
  loop lo_;
  loop_open(w, &lo_, cout_g, "co");
  LLVMValueRef fo = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, grp, i64c(w, cout_g), ""), lo_.iv, "fo");
  yi[c->out_batch] = d[c->in_batch];
  yi[c->out_feature] = fo;
  ki[c->k_in] = ci;
  ki[c->k_out] = fo;
  ix xy = ix_dims(sy, yi), xk = ix_dims(sk, ki);
  LLVMValueRef yv = convert_value(w, operand_at(w, root, 0, &xy, "dy"), dt, adt);
  LLVMValueRef kv = convert_value(w, operand_at(w, root, 1, &xk, "k"), sk->dtype, adt);
  mul_add(w, acc_slot, ct, yv, kv, adt, dt);
  loop_close(w, &lo_);
  cond_close(w, &tap);
  for (int s = c->spatial - 1; s >= 0; s--) loop_close(w, &lw[s]);
  /* store only where q is a real input element */
  LLVMValueRef is_real = true_i1(w), xi[GRAPH_MAX_RANK];
  for (int i = 0; i < sx->rank; i++) xi[i] = d[i];
  for (int s = 0; s < c->spatial; s++) {
    int64_t ld = or1(c->lhs_dilation[s]);
    LLVMValueRef p = LLVMBuildSDiv(w->b, q[s], i64c(w, ld), "");
    is_real = all_of(w, is_real, LLVMBuildICmp(w->b, LLVMIntSGE, q[s], i64c(w, 0), ""));
    is_real = all_of(w, is_real, LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, q[s], i64c(w, ld), ""), i64c(w, 0), ""));
    is_real = all_of(w, is_real, LLVMBuildICmp(w->b, LLVMIntSLT, p, i64c(w, sx->dim[c->in_spatial[s]]), ""));
    xi[c->in_spatial[s]] = p;
  }
  cond_block st;
  cond_open(w, &st, is_real, base * real, "real");
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  store_elem(w, named(convert_value(w, sum, adt, sx->dtype), op, NULL, 0), out_arg(w),
             linear_index(w, sx, xi), sx->dtype);
  cond_close(w, &st);
  loops_close(w, l, sx->rank);
}

/* conv-backward-filter: dkernel from (x, dy), a gather over the kernel: for
** each kernel element, the sum over batch and output positions of the
** input element its tap read times dy -- the forward's multiply-adds, so
** its flops, with a tap in the padding multiplying a zero selected in
** place of a load from a clamped index, as emit_conv does. */
static void lower_conv_bwd_filter(writer *w, int root, const graph_op *op) {
  const graph *g = w->k->g;
  const graph_conv_attrs *c = &op->conv;
  const graph_shape *sx = &graph_get(g, op->in[0])->out, *sy = &graph_get(g, op->in[1])->out;
  const graph_shape *sk = &op->out;
  graph_dtype dt = sx->dtype, adt = acc_dtype(dt);
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  int64_t fg = or1(c->feature_groups), cin = sk->dim[c->k_in], cout_g = sk->dim[c->k_out] / fg;
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK];
  loops_open(w, l, sk, "o", d);
  LLVMBuildStore(w->b, zero_of(ct), acc_slot);
  LLVMValueRef fo = d[c->k_out];
  LLVMValueRef fin = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, LLVMBuildUDiv(w->b, fo, i64c(w, cout_g), "group"), i64c(w, cin), ""),
                                  d[c->k_in], "fi");
  loop lb, lp[3];
  loop_open(w, &lb, sy->dim[c->out_batch], "b");
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", s);
    loop_open(w, &lp[s], sy->dim[c->out_spatial[s]], nm);
  }
  LLVMValueRef valid = true_i1(w), xi[GRAPH_MAX_RANK], yi[GRAPH_MAX_RANK];
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = or1(c->stride[s]), ld = or1(c->lhs_dilation[s]), rd = or1(c->rhs_dilation[s]),
            n = sx->dim[c->in_spatial[s]];
    LLVMValueRef pos = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, lp[s].iv, i64c(w, st), ""),
                                    LLVMBuildMul(w->b, d[c->k_spatial[s]], i64c(w, rd), ""), "");
    pos = LLVMBuildSub(w->b, pos, i64c(w, c->pad_lo[s]), "");
    LLVMValueRef p = ld > 1 ? LLVMBuildSDiv(w->b, pos, i64c(w, ld), "") : pos;
    valid = all_of(w, valid, LLVMBuildICmp(w->b, LLVMIntSGE, pos, i64c(w, 0), ""));
    valid = all_of(w, valid, LLVMBuildICmp(w->b, LLVMIntSLT, p, i64c(w, n), ""));
    if (ld > 1)
      valid = all_of(w, valid, LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, pos, i64c(w, ld), ""), i64c(w, 0), ""));
    xi[c->in_spatial[s]] = clamp_index(w, p, n - 1);
    yi[c->out_spatial[s]] = lp[s].iv;
  }
  xi[c->in_batch] = lb.iv;
  xi[c->in_feature] = fin;
  yi[c->out_batch] = lb.iv;
  yi[c->out_feature] = fo;
  ix xx = ix_dims(sx, xi), xy = ix_dims(sy, yi);
  LLVMValueRef xv = convert_value(w, operand_at(w, root, 0, &xx, "x"), dt, adt);
  LLVMValueRef yv = convert_value(w, operand_at(w, root, 1, &xy, "dy"), sy->dtype, adt);
  xv = LLVMBuildSelect(w->b, valid, xv, zero_of(ct), "x.or0");
  mul_add(w, acc_slot, ct, xv, yv, adt, dt);
  for (int s = c->spatial - 1; s >= 0; s--) loop_close(w, &lp[s]);
  loop_close(w, &lb);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  ix o = ix_dims(sk, d);
  store_elem(w, named(convert_value(w, sum, adt, sk->dtype), op, NULL, 0), out_arg(w),
             get_lin(w, &o), sk->dtype);
  loops_close(w, l, sk->rank);
}

/* prefix-sum: the running sum along one axis (prefix_axis), each line
** starting from its first element, so a line of len elements takes len - 1
** adds -- the declared cost; bf16 and fp16 accumulate in f32, integers in
** their own width. Each element is read and written once. */
static void lower_prefix_sum(writer *w, int root, const graph_op *op) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  int ax = prefix_axis(op, sx);
  graph_dtype dt = sx->dtype, adt = is_float(dt) ? acc_dtype(dt) : dt;
  LLVMTypeRef ct = compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = entry_alloca(w, ct, "acc.slot");
  loop l[GRAPH_MAX_RANK], la;
  LLVMValueRef d[GRAPH_MAX_RANK];
  for (int i = 0; i < sx->rank; i++) {
    if (i == ax) continue;
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", i);
    loop_open(w, &l[i], sx->dim[i], nm);
    d[i] = l[i].iv;
  }
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) loop_from(w, &la, 1, sx->dim[ax], "scan");
    d[ax] = pass ? la.iv : i64c(w, 0);
    ix xi = ix_dims(sx, d);
    LLVMValueRef lin = get_lin(w, &xi);
    LLVMValueRef v = convert_value(w, operand_at(w, root, 0, &xi, "x"), dt, adt);
    if (pass == 1) {
      LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
      v = combine(w, GRAPH_RED_ADD, acc, v, adt, dt);
    }
    LLVMBuildStore(w->b, v, acc_slot);
    store_elem(w, named(convert_value(w, v, adt, op->out.dtype), op, NULL, 0), out_arg(w), lin,
               op->out.dtype);
    if (pass == 1) loop_close(w, &la);
  }
  for (int i = sx->rank - 1; i >= 0; i--)
    if (i != ax) loop_close(w, &l[i]);
}

/* row-partition: from each row's node id after a split ([R]), the rows of
** the children the next level scans ([M]): rows whose id is even (a left
** child, taken as the smaller one -- in gbdt's balanced model the two are
** equal), in order, the first M of them; slots past the last such row hold
** -1. One compare per row, the declared cost; no branch on the data, so
** the counts stay static: each row is stored at the next free slot (the
** last slot once all are taken, rewriting what it holds) and a row that
** is not kept is overwritten by the next kept one -- or, after the loop,
** by the -1 that ends the list. Every slot is first set to -1. Stores
** touch more than M slots' bytes; the count caps them at the result's
** size (the roofline rule), the declared M x 4 written. */
static void lower_row_partition(writer *w, int root, const graph_op *op) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  graph_dtype dt = sx->dtype, odt = op->out.dtype;
  LLVMTypeRef ot = compute_type(w->m->ctx, odt), xt = compute_type(w->m->ctx, dt);
  int64_t R = sx->dim[0], M = op->out.dim[0];
  LLVMValueRef k_slot = entry_alloca(w, w->i64, "kept.slot");
  LLVMValueRef last_slot = entry_alloca(w, ot, "last.slot"); /* what slot M - 1 holds once full */
  LLVMValueRef none = LLVMConstInt(ot, (unsigned long long)-1, 1);
  loop lf, lr;
  loop_open(w, &lf, M, "fill");
  store_elem(w, none, out_arg(w), lf.iv, odt);
  loop_close(w, &lf);
  LLVMBuildStore(w->b, i64c(w, 0), k_slot);
  LLVMBuildStore(w->b, none, last_slot);
  loop_open(w, &lr, R, "row");
  ix xi = ix_lin(sx, lr.iv);
  LLVMValueRef id = operand_at(w, root, 0, &xi, "node");
  LLVMValueRef bit = LLVMBuildAnd(w->b, id, LLVMConstInt(xt, 1, 0), "");
  LLVMValueRef left = flop(w, LLVMBuildICmp(w->b, LLVMIntEQ, bit, LLVMConstInt(xt, 0, 0), "left"), dt);
  LLVMValueRef k = LLVMBuildLoad2(w->b, w->i64, k_slot, "kept");
  LLVMValueRef last = LLVMBuildLoad2(w->b, ot, last_slot, "last");
  LLVMValueRef full = LLVMBuildICmp(w->b, LLVMIntUGE, k, i64c(w, M), "full");
  LLVMValueRef row = LLVMBuildTrunc(w->b, lr.iv, ot, "");
  LLVMValueRef pos = LLVMBuildSelect(w->b, full, i64c(w, M - 1), k, "slot");
  store_elem(w, LLVMBuildSelect(w->b, full, last, row, ""), out_arg(w), pos, odt);
  LLVMValueRef fills = all_of(w, left, LLVMBuildICmp(w->b, LLVMIntEQ, k, i64c(w, M - 1), ""));
  LLVMBuildStore(w->b, LLVMBuildSelect(w->b, fills, row, last, ""), last_slot);
  LLVMValueRef inc = LLVMBuildZExt(w->b, all_of(w, left, LLVMBuildNot(w->b, full, "")), w->i64, "");
  LLVMBuildStore(w->b, LLVMBuildAdd(w->b, k, inc, ""), k_slot);
  loop_close(w, &lr);
  LLVMValueRef k_end = LLVMBuildLoad2(w->b, w->i64, k_slot, "kept");
  LLVMValueRef last_end = LLVMBuildLoad2(w->b, ot, last_slot, "last");
  LLVMValueRef full_end = LLVMBuildICmp(w->b, LLVMIntUGE, k_end, i64c(w, M), "");
  store_elem(w, named(LLVMBuildSelect(w->b, full_end, last_end, none, "end"), op, NULL, 0), out_arg(w),
             LLVMBuildSelect(w->b, full_end, i64c(w, M - 1), k_end, ""), odt);
}

static void lower_custom(writer *w, int root, const graph_op *op) {
  switch (custom_of(op)) {
  case CUS_CONV_INPUT: lower_conv_bwd_input(w, root, op); return;
  case CUS_CONV_FILTER: lower_conv_bwd_filter(w, root, op); return;
  case CUS_PREFIX_SUM: lower_prefix_sum(w, root, op); return;
  case CUS_ROW_PARTITION: lower_row_partition(w, root, op); return;
  case CUS_NONE: return; /* lower_supported refused it */
  }
}

static void lower_root(writer *w, int root) {
  const kernel *k = w->k;
  const graph_op *op = graph_get(k->g, root);
  switch (op->kind) {
  case GOP_CONCAT: lower_concat(w, root, op); return;
  case GOP_DYNAMIC_UPDATE_SLICE: lower_dus(w, root, op); return;
  case GOP_SCATTER: lower_scatter(w, root, op); return;
  case GOP_CUSTOM: lower_custom(w, root, op); return;
  case GOP_RESHAPE:
    /* a bitcast: the result is the operand's buffer, nothing moves */
    if (arg_of_operand(k, root, 0) >= 0) return;
    break;
  case GOP_GATHER: {
    int t = arg_of_operand(k, root, 0);
    if (t >= 0 && k->single) uncapped(w, t);
    break;
  }
  default:
    break;
  }
  /* elementwise kernels are one flat loop (vectorizer-friendly); the rest
  ** one loop per result dim, o0 outermost */
  bool flat = graph_op_is_elementwise(op->kind) || op->kind == GOP_RESHAPE || op->kind == GOP_IOTA;
  loop l[GRAPH_MAX_RANK], lf;
  LLVMValueRef d[GRAPH_MAX_RANK];
  ix o;
  if (flat) {
    loop_open(w, &lf, graph_elements(&op->out), "i");
    o = ix_lin(&op->out, lf.iv);
  } else {
    loops_open(w, l, &op->out, "o", d);
    o = ix_dims(&op->out, d);
  }
  LLVMValueRef v = emit_op(w, root, &o);
  store_elem(w, v, out_arg(w), get_lin(w, &o), op->out.dtype);
  if (flat) loop_close(w, &lf);
  else loops_close(w, l, op->out.rank);
}

/* The dtype the formula counts an op's flops in. */
static graph_dtype flop_dtype(const graph *g, const graph_op *op) {
  if (op->kind == GOP_SELECT || op->kind == GOP_SCATTER || op->n_in == 0) return op->out.dtype;
  return graph_get(g, op->in[0])->out.dtype;
}

static int lower_kernel(lower_module *m, const graph *g, const int *ops, int n_ops, bool single,
                        const char *name, char *err, size_t n) {
  kernel *k = calloc(1, sizeof *k);
  if (!k) {
    set_err(err, n, "out of memory");
    return -1;
  }
  k->g = g;
  k->ops = ops;
  k->n_ops = n_ops;
  k->single = single;
  const graph_op *root = graph_get(g, ops[n_ops - 1]);
  for (int i = 0; i < n_ops; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    for (int j = 0; j < op->n_in; j++) {
      int v = op->in[j];
      if (!single && (member(k, v) >= 0 || outside_arg(k, v) >= 0)) continue;
      if (k->n_outside == LOWER_MAX_BUFS - 1) {
        set_err(err, n, "%s: more than %d inputs to one kernel", root->name, k->n_outside);
        free(k);
        return -1;
      }
      k->outside[k->n_outside++] = v;
    }
  }
  if (root->kind == GOP_DYNAMIC_SLICE) k->n_starts = root->out.rank;
  if (root->kind == GOP_DYNAMIC_UPDATE_SLICE) k->n_starts = root->out.rank;
  const graph_shape *bufs[LOWER_MAX_BUFS];
  for (int i = 0; i < k->n_outside; i++) bufs[i] = &graph_get(g, k->outside[i])->out;
  bufs[k->n_outside] = &root->out;
  writer w;
  int f = -1;
  if (begin_fn(&w, m, k, name, bufs, k->n_outside + 1, flop_dtype(g, root), err, n) == 0) {
    lower_root(&w, ops[n_ops - 1]);
    f = end_fn(&w);
  }
  free(k);
  return f;
}

int lower_op(lower_module *m, const graph *g, int id, char *err, size_t n) {
  if (!lower_supported(g, id, err, n)) return -1;
  return lower_kernel(m, g, &id, 1, true, graph_get(g, id)->name, err, n);
}

int lower_broadcast(lower_module *m, const graph *g, int id, char *err, size_t n) {
  const graph_op *op = graph_get(g, id);
  if (op->kind != GOP_BROADCAST || !is_float(op->out.dtype) || !dtype_lowered(op->out.dtype)) {
    set_err(err, n, "%s: lower_broadcast takes a floating-point broadcast", op->name);
    return -1;
  }
  return lower_op(m, g, id, err, n);
}

int lower_fused(lower_module *m, const graph *g, const int *ops, int n_ops, char *err,
                size_t n) {
  if (n_ops < 1 || n_ops > 1024) {
    set_err(err, n, "a fused kernel of %d ops: expected 1 to 1024", n_ops);
    return -1;
  }
  for (int i = 0; i < n_ops; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    if (!op) {
      set_err(err, n, "a fused kernel names op %d, which does not exist", ops[i]);
      return -1;
    }
    if (!lower_supported(g, ops[i], err, n)) return -1;
    if (i > 0 && ops[i - 1] >= ops[i]) {
      set_err(err, n, "%s: a fused kernel's ops must be in graph order, each once", op->name);
      return -1;
    }
  }
  for (int i = 0; i < n_ops - 1; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    if (!computable(op->kind)) {
      set_err(err, n, "%s: a %s is computed only as a kernel's root (the last op), not inside "
                      "it", op->name, graph_op_name(op->kind));
      return -1;
    }
    bool used = false; /* by a later member: else its value would be lost */
    for (int i2 = i + 1; i2 < n_ops && !used; i2++) {
      const graph_op *o2 = graph_get(g, ops[i2]);
      for (int j = 0; j < o2->n_in; j++) used |= o2->in[j] == ops[i];
    }
    if (!used) {
      set_err(err, n, "%s: no later op of the kernel reads it (a kernel has one output, its "
                      "last op)", op->name);
      return -1;
    }
  }
  char fname[272];
  snprintf(fname, sizeof fname, "fusion.%s", graph_get(g, ops[n_ops - 1])->name);
  return lower_kernel(m, g, ops, n_ops, false, fname, err, n);
}

/* ---- counting ---- */

static int64_t block_count(const lower_module *m, LLVMBasicBlockRef bb, bool *ok) {
  LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
  LLVMValueRef md = term ? LLVMGetMetadata(term, m->count_kind) : NULL;
  if (!md || LLVMGetMDNodeNumOperands(md) != 1) {
    *ok = false;
    return 0;
  }
  LLVMValueRef v;
  LLVMGetMDNodeOperands(md, &v);
  return (int64_t)LLVMConstIntGetZExtValue(v);
}

static double type_bytes(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMHalfTypeKind:
  case LLVMBFloatTypeKind: return 2;
  case LLVMFloatTypeKind: return 4;
  case LLVMDoubleTypeKind: return 8;
  case LLVMIntegerTypeKind: return LLVMGetIntTypeWidth(t) / 8.0;
  default: return 0;
  }
}

/* The argument a load or store addresses, or -1 (an alloca). */
static int arg_of(LLVMValueRef fn, LLVMValueRef ptr) {
  if (LLVMIsAGetElementPtrInst(ptr)) ptr = LLVMGetOperand(ptr, 0);
  if (!LLVMIsAArgument(ptr)) return -1;
  unsigned np = LLVMCountParams(fn);
  for (unsigned i = 0; i < np; i++)
    if (LLVMGetParam(fn, i) == ptr) return (int)i;
  return -1;
}

int lower_op_cost(const lower_module *m, int f, graph_cost *c, double *accessed, char *err,
                  size_t n) {
  memset(c, 0, sizeof *c);
  if (f < 0 || f >= m->nfn) {
    set_err(err, n, "no function %d", f);
    return -1;
  }
  LLVMValueRef fn = m->fns[f];
  unsigned len;
  LLVMAttributeRef da = LLVMGetStringAttributeAtIndex(fn, LLVMAttributeFunctionIndex, "tpusim.dtype", 12);
  const char *dn = da ? LLVMGetStringAttributeValue(da, &len) : NULL;
  char dbuf[16] = "";
  if (dn) snprintf(dbuf, sizeof dbuf, "%.*s", (int)len, dn);
  int dt = graph_dtype_parse(dbuf);
  if (dt < 0) {
    set_err(err, n, "%s: no tpusim.dtype attribute", m->names[f]);
    return -1;
  }
  unsigned np = LLVMCountParams(fn);
  double rd[LOWER_MAX_PARAMS] = {0}, wr[LOWER_MAX_PARAMS] = {0};
  unsigned deref = LLVMGetEnumAttributeKindForName("dereferenceable", 15);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
    bool ok = true;
    double k = (double)block_count(m, bb, &ok);
    if (!ok) {
      size_t bl;
      const char *bn = LLVMGetValueName2(LLVMBasicBlockAsValue(bb), &bl);
      set_err(err, n, "%s: block '%.*s' has no !tpusim.count", m->names[f], (int)bl, bn);
      return -1;
    }
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
      /* tagged: arithmetic of the op, in the dtype the tag names */
      LLVMValueRef tag = LLVMGetMetadata(in, m->flop_kind);
      if (tag) {
        LLVMValueRef s;
        unsigned sl = 0;
        if (LLVMGetMDNodeNumOperands(tag) == 1) LLVMGetMDNodeOperands(tag, &s);
        const char *tn = LLVMGetMDNodeNumOperands(tag) == 1 ? LLVMGetMDString(s, &sl) : NULL;
        char tb[16] = "";
        if (tn) snprintf(tb, sizeof tb, "%.*s", (int)sl, tn);
        int tdt = graph_dtype_parse(tb);
        if (tdt < 0) {
          set_err(err, n, "%s: a !tpusim.flop tag without a dtype", m->names[f]);
          return -1;
        }
        c->flops[tdt] += k;
        continue;
      }
      switch (LLVMGetInstructionOpcode(in)) {
      case LLVMFAdd: case LLVMFSub: case LLVMFMul: case LLVMFDiv: case LLVMFRem: case LLVMFNeg:
      case LLVMFCmp:
        c->flops[dt] += k;
        break;
      case LLVMLoad: {
        int a = arg_of(fn, LLVMGetOperand(in, 0));
        if (a >= 0) rd[a] += k * type_bytes(LLVMTypeOf(in));
        break;
      }
      case LLVMStore: {
        int a = arg_of(fn, LLVMGetOperand(in, 1));
        if (a >= 0) wr[a] += k * type_bytes(LLVMTypeOf(LLVMGetOperand(in, 0)));
        break;
      }
      case LLVMCall: {
        int cls = callee_class(in);
        if (cls < 0) {
          size_t cl;
          const char *cn = LLVMGetValueName2(LLVMGetCalledValue(in), &cl);
          set_err(err, n, "%s: a call to '%.*s', which the analysis does not know", m->names[f],
                  (int)cl, cn);
          return -1;
        }
        if (cls == CALL_TRANS) c->transcendentals += k;
        else if (cls == CALL_FLOP) c->flops[dt] += k;
        break;
      }
      default:
        break;
      }
    }
  }
  double acc = 0;
  for (unsigned i = 0; i < np && i < LOWER_MAX_PARAMS; i++) {
    LLVMAttributeRef at = LLVMGetEnumAttributeAtIndex(fn, i + 1, deref);
    bool cap = !LLVMGetStringAttributeAtIndex(fn, i + 1, "tpusim.uncapped", 15);
    if (LLVMGetStringAttributeAtIndex(fn, i + 1, "tpusim.own", 10)) rd[i] = 0;
    double size = at && cap ? (double)LLVMGetEnumAttributeValue(at) : rd[i] + wr[i];
    c->bytes_read += rd[i] < size ? rd[i] : size;
    c->bytes_written += wr[i] < size ? wr[i] : size;
    acc += rd[i] + wr[i];
  }
  if (accessed) *accessed = acc;
  return 0;
}

/* ---- whole module ---- */

int lower_verify(lower_module *m, char *err, size_t n) {
  char *msg = NULL;
  int bad = LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg);
  if (bad) set_err(err, n, "LLVM verifier: %s", msg ? msg : "(no message)");
  LLVMDisposeMessage(msg);
  return bad ? -1 : 0;
}

int lower_optimize(lower_module *m, int level, char *err, size_t n) {
  if (level < 0 || level > 3) {
    set_err(err, n, "optimization level %d: expected 0 to 3", level);
    return -1;
  }
  if (level == 0) return 0;
  LLVMInitializeNativeTarget();
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    set_err(err, n, "no LLVM target for %s: %s", triple, msg ? msg : "");
    LLVMDisposeMessage(msg);
    LLVMDisposeMessage(triple);
    return -1;
  }
  char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features,
                                                    LLVMCodeGenLevelDefault, LLVMRelocDefault,
                                                    LLVMCodeModelDefault);
  LLVMSetTarget(m->mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  char *layout = LLVMCopyStringRepOfTargetData(td);
  LLVMSetDataLayout(m->mod, layout);
  LLVMDisposeMessage(layout);
  LLVMDisposeTargetData(td);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
  char pipeline[16];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", level);
  LLVMErrorRef e = LLVMRunPasses(m->mod, pipeline, tm, opts);
  int rc = 0;
  if (e) {
    char *em = LLVMGetErrorMessage(e);
    set_err(err, n, "LLVM passes: %s", em);
    LLVMDisposeErrorMessage(em);
    rc = -1;
  }
  LLVMDisposePassBuilderOptions(opts);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  LLVMDisposeMessage(triple);
  return rc;
}

char *lower_print(const lower_module *m) {
  char *s = LLVMPrintModuleToString(m->mod);
  char *copy = strdup(s);
  LLVMDisposeMessage(s);
  return copy;
}

/* ---- JIT ---- */

struct lower_jit {
  LLVMOrcLLJITRef jit;
};

/* Consumes e; 0 when there was none. */
static int take_error(LLVMErrorRef e, const char *what, char *err, size_t n) {
  if (!e) return 0;
  char *em = LLVMGetErrorMessage(e);
  set_err(err, n, "%s: %s", what, em);
  LLVMDisposeErrorMessage(em);
  return -1;
}

lower_jit *lower_jit_new(const lower_module *m, char *err, size_t n) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  lower_jit *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  if (take_error(LLVMOrcCreateLLJIT(&j->jit, NULL), "creating the JIT", err, n)) {
    free(j);
    return NULL;
  }
  LLVMOrcDefinitionGeneratorRef gen;
  if (take_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                     &gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL),
                 "process symbols", err, n)) {
    lower_jit_free(j);
    return NULL;
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  LLVMOrcJITDylibAddGenerator(jd, gen);
  /* the JIT owns what it compiles, in its own context: hand it a copy made
  ** through bitcode, so the caller's module and context stay theirs */
  LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
  LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m->mod);
  LLVMModuleRef copy = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(LLVMOrcThreadSafeContextGetContext(tsc), bc, &copy, &msg)) {
    set_err(err, n, "copying the module: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
    LLVMOrcDisposeThreadSafeContext(tsc);
    lower_jit_free(j);
    return NULL;
  }
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(copy, tsc);
  LLVMOrcDisposeThreadSafeContext(tsc); /* the module holds its own reference */
  /* the JIT owns tsm from here, error or not */
  if (take_error(LLVMOrcLLJITAddLLVMIRModule(j->jit, jd, tsm), "adding the module", err, n)) {
    lower_jit_free(j);
    return NULL;
  }
  return j;
}

void lower_jit_free(lower_jit *j) {
  if (!j) return;
  if (j->jit) LLVMConsumeError(LLVMOrcDisposeLLJIT(j->jit));
  free(j);
}

void *lower_jit_lookup(lower_jit *j, const lower_module *m, int fn, char *err, size_t n) {
  if (fn < 0 || fn >= m->nfn) {
    set_err(err, n, "no function %d", fn);
    return NULL;
  }
  LLVMOrcExecutorAddress addr = 0;
  if (take_error(LLVMOrcLLJITLookup(j->jit, &addr, m->names[fn]), m->names[fn], err, n))
    return NULL;
  return (void *)(uintptr_t)addr;
}
