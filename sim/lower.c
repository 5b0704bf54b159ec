/*
** lower.c -- see lower.h.
*/
#include "lower.h"

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

struct lower_module {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  unsigned count_kind; /* the !tpusim.count metadata kind */
  int nfn;
  LLVMValueRef fns[LOWER_MAX_FNS];
  char *names[LOWER_MAX_FNS];
};

/* One function being written: the builder and the execution count of the
** block it is in. */
typedef struct {
  lower_module *m;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMTypeRef i64;
  int64_t mult;
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

static bool dtype_lowered(graph_dtype dt) {
  return dt == GDT_BF16 || dt == GDT_F16 || dt == GDT_F32 || dt == GDT_F64;
}

static bool kind_lowered(graph_op_kind k) {
  switch (k) {
  case GOP_NEG: case GOP_ABS: case GOP_EXP: case GOP_LOG: case GOP_TANH: case GOP_LOGISTIC:
  case GOP_GELU: case GOP_SILU: case GOP_RELU: case GOP_RSQRT: case GOP_SQRT: case GOP_SIN:
  case GOP_COS: case GOP_CONVERT: case GOP_COPY: case GOP_ADD: case GOP_SUB: case GOP_MUL:
  case GOP_DIV: case GOP_MAX: case GOP_MIN: case GOP_POW: case GOP_GELU_GRAD:
  case GOP_SILU_GRAD: case GOP_DOT: case GOP_REDUCE:
    return true;
  default:
    return false;
  }
}

bool lower_supported(const graph *g, int id, char *why, size_t n) {
  const graph_op *op = graph_get(g, id);
  if (!kind_lowered(op->kind)) {
    set_err(why, n, "%s: not lowered yet", graph_op_name(op->kind));
    return false;
  }
  for (int i = 0; i < op->n_in; i++) {
    graph_dtype dt = graph_get(g, op->in[i])->out.dtype;
    if (!dtype_lowered(dt)) {
      set_err(why, n, "%s: %s operands not lowered yet", graph_op_name(op->kind),
              graph_dtype_name(dt));
      return false;
    }
  }
  if (!dtype_lowered(op->out.dtype)) {
    set_err(why, n, "%s: %s result not lowered yet", graph_op_name(op->kind),
            graph_dtype_name(op->out.dtype));
    return false;
  }
  return true;
}

/* ---- types and elements ---- */

/* The type arithmetic runs in: f64 for f64, else f32 (bf16 and fp16 are
** widened on load and rounded on store). */
static LLVMTypeRef compute_type(LLVMContextRef ctx, graph_dtype dt) {
  return dt == GDT_F64 ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
}

static LLVMTypeRef storage_type(LLVMContextRef ctx, graph_dtype dt) {
  switch (dt) {
  case GDT_BF16: return LLVMInt16TypeInContext(ctx);
  case GDT_F16: return LLVMHalfTypeInContext(ctx);
  case GDT_F64: return LLVMDoubleTypeInContext(ctx);
  default: return LLVMFloatTypeInContext(ctx);
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
  }
  return v;
}

/* Converts a computed value to dtype dt's compute type (f32 <-> f64). */
static LLVMValueRef to_compute(writer *w, LLVMValueRef v, graph_dtype dt) {
  LLVMTypeRef want = compute_type(w->m->ctx, dt);
  if (LLVMTypeOf(v) == want) return v;
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
  }
  LLVMBuildStore(w->b, v, elem_ptr(w, base, idx, dt, "q"));
}

/* ---- loops, with each block's execution count on its terminator ---- */

static void mark(writer *w, LLVMValueRef term, int64_t count) {
  LLVMMetadataRef md = LLVMValueAsMetadata(LLVMConstInt(w->i64, (unsigned long long)count, 0));
  LLVMValueRef node = LLVMMetadataAsValue(w->m->ctx, LLVMMDNodeInContext2(w->m->ctx, &md, 1));
  LLVMSetMetadata(term, w->m->count_kind, node);
}

static LLVMBasicBlockRef block(writer *w, const char *name) {
  return LLVMAppendBasicBlockInContext(w->m->ctx, w->fn, name);
}

/* for (iv = start; iv < n; iv++): leaves the builder in the body. */
static void loop_from(writer *w, loop *l, int64_t start, int64_t n, const char *name) {
  char hn[32], bn[32], en[32];
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

/* ---- math ---- */

static LLVMValueRef call_intrinsic(writer *w, const char *name, LLVMValueRef *args, int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMTypeRef t = LLVMTypeOf(args[0]);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(w->m->mod, id, &t, 1);
  LLVMTypeRef ft = LLVMIntrinsicGetType(w->m->ctx, id, &t, 1);
  return LLVMBuildCall2(w->b, ft, f, args, (unsigned)n, "");
}

static LLVMValueRef fconst(LLVMValueRef like, double v) { return LLVMConstReal(LLVMTypeOf(like), v); }

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
  default: return NULL;
  }
}

/* ---- functions ---- */

/* Starts function `name` over buffers bufs[0..nbuf) (the operands, then
** the result), with flops counted in flop_dt; leaves w's builder in its
** entry block. -1 (err says why) when the module is full. */
static int begin_fn(writer *w, lower_module *m, const char *name, const graph_shape *const *bufs,
                    int nbuf, graph_dtype flop_dt, char *err, size_t n) {
  if (m->nfn == LOWER_MAX_FNS) {
    set_err(err, n, "more than %d functions in one module", LOWER_MAX_FNS);
    return -1;
  }
  LLVMContextRef ctx = m->ctx;
  LLVMTypeRef params[LOWER_MAX_BUFS];
  for (int i = 0; i < nbuf; i++) params[i] = LLVMPointerTypeInContext(ctx, 0);
  /* A name that is a C identifier ("log", "exp") would collide with the
  ** libm symbols that llvm.log and friends lower to, in the JIT's process
  ** lookup: such names get an "op." prefix. Scoped names ("l0/attn/dot")
  ** cannot collide and stay as they are. */
  char fname[288];
  bool ident = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
               strlen(name);
  snprintf(fname, sizeof fname, "%s%s", ident ? "op." : "", name);
  LLVMValueRef fn = LLVMAddFunction(
      m->mod, fname, LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, (unsigned)nbuf, 0));
  unsigned deref = LLVMGetEnumAttributeKindForName("dereferenceable", 15);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < nbuf; i++) {
    char pn[16];
    if (i < nbuf - 1) snprintf(pn, sizeof pn, "in%d", i);
    else snprintf(pn, sizeof pn, "out");
    LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), pn, strlen(pn));
    LLVMAddAttributeAtIndex(fn, (unsigned)i + 1,
                            LLVMCreateEnumAttribute(ctx, deref, (uint64_t)graph_bytes(bufs[i])));
    LLVMAddAttributeAtIndex(fn, (unsigned)i + 1, LLVMCreateEnumAttribute(ctx, noalias, 0));
  }
  const char *dn = graph_dtype_name(flop_dt);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ctx, "tpusim.dtype", 12, dn, (unsigned)strlen(dn)));
  w->m = m;
  w->fn = fn;
  w->i64 = LLVMInt64TypeInContext(ctx);
  w->b = LLVMCreateBuilderInContext(ctx);
  w->mult = 1;
  LLVMPositionBuilderAtEnd(w->b, block(w, "entry"));
  return 0;
}

/* Returns from the function w writes and registers it: its index. */
static int end_fn(writer *w) {
  lower_module *m = w->m;
  mark(w, LLVMBuildRetVoid(w->b), w->mult);
  LLVMDisposeBuilder(w->b);
  size_t len;
  const char *nm = LLVMGetValueName2(w->fn, &len);
  m->fns[m->nfn] = w->fn;
  m->names[m->nfn] = strndup(nm, len);
  return m->nfn++;
}

static void lower_elementwise(writer *w, const graph *g, const graph_op *op) {
  loop l;
  loop_open(w, &l, graph_elements(&op->out), "i");
  LLVMValueRef x[3];
  for (int i = 0; i < op->n_in; i++) {
    graph_dtype dt = graph_get(g, op->in[i])->out.dtype;
    char nm[16];
    snprintf(nm, sizeof nm, "x%d", i);
    x[i] = load_elem(w, LLVMGetParam(w->fn, (unsigned)i), l.iv, dt, nm);
  }
  /* binary operands share a dtype (the graph checks), so x[1] matches x[0] */
  LLVMValueRef y = elementwise(w, op->kind, x);
  store_elem(w, y, LLVMGetParam(w->fn, (unsigned)op->n_in), l.iv, op->out.dtype);
  loop_close(w, &l);
}

/* Linear row-major index of a operand element from its per-dim indices. */
static LLVMValueRef linear_index(writer *w, const graph_shape *s, LLVMValueRef *idx) {
  if (s->rank == 0) return LLVMConstInt(w->i64, 0, 0);
  LLVMValueRef lin = idx[0];
  for (int d = 1; d < s->rank; d++) {
    lin = LLVMBuildMul(w->b, lin, LLVMConstInt(w->i64, (unsigned long long)s->dim[d], 0), "");
    lin = LLVMBuildAdd(w->b, lin, idx[d], "");
  }
  return lin;
}

static bool in_dims(const graph_dims *ds, int d) {
  for (int i = 0; i < ds->n; i++)
    if (ds->d[i] == d) return true;
  return false;
}

/* A dot operand's per-dim indices: a batch dim takes its output index, a
** contracting dim its k, a free dim the next free output index (*next). */
static void operand_index(const graph_shape *s, const graph_dims *batch,
                          const graph_dims *contract, LLVMValueRef *oi, LLVMValueRef *ki,
                          int *next, LLVMValueRef *idx) {
  for (int d = 0; d < s->rank; d++) {
    idx[d] = NULL;
    for (int i = 0; i < batch->n; i++)
      if (batch->d[i] == d) idx[d] = oi[i];
    for (int c = 0; c < contract->n; c++)
      if (contract->d[c] == d) idx[d] = ki[c];
    if (!idx[d]) idx[d] = oi[(*next)++];
  }
}

/* dot: one loop per output dim (batch, lhs free, rhs free: XLA's order),
** then one per contracting dim; multiply-add into an f32 (f64) accumulator. */
static void lower_dot(writer *w, const graph *g, const graph_op *op) {
  const graph_shape *sa = &graph_get(g, op->in[0])->out, *sb = &graph_get(g, op->in[1])->out;
  LLVMTypeRef ct = compute_type(w->m->ctx, sa->dtype == GDT_F64 ? GDT_F64 : GDT_F32);
  LLVMValueRef acc_slot = LLVMBuildAlloca(w->b, ct, "acc.slot");
  loop lo[GRAPH_MAX_RANK], lk[GRAPH_MAX_RANK];
  LLVMValueRef oi[GRAPH_MAX_RANK];
  for (int d = 0; d < op->out.rank; d++) {
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", d);
    loop_open(w, &lo[d], op->out.dim[d], nm);
    oi[d] = lo[d].iv;
  }
  LLVMBuildStore(w->b, LLVMConstReal(ct, 0), acc_slot);
  int nc = op->lhs_contract.n;
  LLVMValueRef ki[GRAPH_MAX_RANK];
  for (int c = 0; c < nc; c++) {
    char nm[16];
    snprintf(nm, sizeof nm, "k%d", c);
    loop_open(w, &lk[c], sa->dim[op->lhs_contract.d[c]], nm);
    ki[c] = lk[c].iv;
  }
  LLVMValueRef ia[GRAPH_MAX_RANK], ib[GRAPH_MAX_RANK];
  int next = op->lhs_batch.n; /* free output dims: lhs's, then rhs's */
  operand_index(sa, &op->lhs_batch, &op->lhs_contract, oi, ki, &next, ia);
  operand_index(sb, &op->rhs_batch, &op->rhs_contract, oi, ki, &next, ib);
  LLVMValueRef a = to_compute(w, load_elem(w, LLVMGetParam(w->fn, 0), linear_index(w, sa, ia), sa->dtype, "a"),
                              sa->dtype == GDT_F64 ? GDT_F64 : GDT_F32);
  LLVMValueRef bv = to_compute(w, load_elem(w, LLVMGetParam(w->fn, 1), linear_index(w, sb, ib), sb->dtype, "b"),
                               sa->dtype == GDT_F64 ? GDT_F64 : GDT_F32);
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
  LLVMValueRef prod = LLVMBuildFMul(w->b, a, bv, "prod");
  LLVMBuildStore(w->b, LLVMBuildFAdd(w->b, acc, prod, "acc.next"), acc_slot);
  for (int c = nc - 1; c >= 0; c--) loop_close(w, &lk[c]);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  store_elem(w, sum, LLVMGetParam(w->fn, 2), linear_index(w, &op->out, oi), op->out.dtype);
  for (int d = op->out.rank - 1; d >= 0; d--) loop_close(w, &lo[d]);
}

static LLVMValueRef combine(writer *w, graph_reduce_kind r, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef x[2] = {a, b};
  switch (r) {
  case GRAPH_RED_ADD: return LLVMBuildFAdd(w->b, a, b, "sum");
  case GRAPH_RED_MUL: return LLVMBuildFMul(w->b, a, b, "prod");
  case GRAPH_RED_MAX: return call_intrinsic(w, "llvm.maximum", x, 2);
  default: return call_intrinsic(w, "llvm.minimum", x, 2);
  }
}

/* reduce: one loop per kept dim, then one loop over the reduced elements
** flattened, starting at the second: the accumulator starts as the first
** element, so K elements take K - 1 combines (the formula's in - out).
** bf16 and fp16 accumulate in f32, as XLA does. */
static void lower_reduce(writer *w, const graph *g, const graph_op *op) {
  const graph_shape *sx = &graph_get(g, op->in[0])->out;
  graph_dtype cdt = sx->dtype == GDT_F64 ? GDT_F64 : GDT_F32;
  LLVMValueRef acc_slot = LLVMBuildAlloca(w->b, compute_type(w->m->ctx, cdt), "acc.slot");
  loop lo[GRAPH_MAX_RANK], lr;
  LLVMValueRef oi[GRAPH_MAX_RANK], idx[GRAPH_MAX_RANK];
  for (int d = 0; d < op->out.rank; d++) {
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", d);
    loop_open(w, &lo[d], op->out.dim[d], nm);
    oi[d] = lo[d].iv;
  }
  int64_t k = 1;
  for (int i = 0; i < op->dims.n; i++) k *= sx->dim[op->dims.d[i]];
  /* the input index of reduced element r: kept dims from the output loops,
  ** reduced dims by decomposing r (last reduced dim fastest) */
  LLVMValueRef zero = LLVMConstInt(w->i64, 0, 0);
  for (int pass = 0; pass < 2; pass++) {
    LLVMValueRef r = zero;
    if (pass == 1) {
      loop_from(w, &lr, 1, k, "r");
      r = lr.iv;
    }
    for (int d = 0, next = 0; d < sx->rank; d++) idx[d] = in_dims(&op->dims, d) ? NULL : oi[next++];
    for (int i = op->dims.n - 1; i >= 0; i--) {
      LLVMValueRef size = LLVMConstInt(w->i64, (unsigned long long)sx->dim[op->dims.d[i]], 0);
      idx[op->dims.d[i]] = pass ? LLVMBuildURem(w->b, r, size, "") : zero;
      if (pass) r = LLVMBuildUDiv(w->b, r, size, "");
    }
    LLVMValueRef v = to_compute(w, load_elem(w, LLVMGetParam(w->fn, 0), linear_index(w, sx, idx),
                                             sx->dtype, "x"), cdt);
    if (pass == 0) {
      LLVMBuildStore(w->b, v, acc_slot);
    } else {
      LLVMValueRef acc = LLVMBuildLoad2(w->b, compute_type(w->m->ctx, cdt), acc_slot, "acc");
      LLVMBuildStore(w->b, combine(w, op->reduce, acc, v), acc_slot);
      loop_close(w, &lr);
    }
  }
  LLVMValueRef res = LLVMBuildLoad2(w->b, compute_type(w->m->ctx, cdt), acc_slot, "result");
  store_elem(w, res, LLVMGetParam(w->fn, 1), linear_index(w, &op->out, oi), op->out.dtype);
  for (int d = op->out.rank - 1; d >= 0; d--) loop_close(w, &lo[d]);
}

/* broadcast: one loop per result dim; operand dim i takes the index of
** result dim dims.d[i]. A copy, no arithmetic: XLA fuses a broadcast into
** its user, and the unfused kernel is what a value read twice costs. */
static void emit_broadcast(writer *w, const graph *g, const graph_op *op) {
  const graph_shape *sx = &graph_get(g, op->in[0])->out;
  loop lo[GRAPH_MAX_RANK];
  LLVMValueRef oi[GRAPH_MAX_RANK], ix[GRAPH_MAX_RANK];
  for (int d = 0; d < op->out.rank; d++) {
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", d);
    loop_open(w, &lo[d], op->out.dim[d], nm);
    oi[d] = lo[d].iv;
  }
  for (int i = 0; i < sx->rank; i++) ix[i] = oi[op->dims.d[i]];
  LLVMValueRef v = load_elem(w, LLVMGetParam(w->fn, 0), linear_index(w, sx, ix), sx->dtype, "x");
  store_elem(w, v, LLVMGetParam(w->fn, 1), linear_index(w, &op->out, oi), op->out.dtype);
  for (int d = op->out.rank - 1; d >= 0; d--) loop_close(w, &lo[d]);
}

int lower_op(lower_module *m, const graph *g, int id, char *err, size_t n) {
  if (!lower_supported(g, id, err, n)) return -1;
  const graph_op *op = graph_get(g, id);
  const graph_shape *bufs[GRAPH_MAX_RANK + 4];
  for (int i = 0; i < op->n_in; i++) bufs[i] = &graph_get(g, op->in[i])->out;
  bufs[op->n_in] = &op->out;
  /* flops in the operands' dtype, as graph.c attributes them */
  writer w;
  if (begin_fn(&w, m, op->name, bufs, op->n_in + 1, bufs[0]->dtype, err, n) != 0) return -1;
  if (op->kind == GOP_DOT) lower_dot(&w, g, op);
  else if (op->kind == GOP_REDUCE) lower_reduce(&w, g, op);
  else lower_elementwise(&w, g, op);
  return end_fn(&w);
}

int lower_broadcast(lower_module *m, const graph *g, int id, char *err, size_t n) {
  const graph_op *op = graph_get(g, id);
  const graph_shape *bufs[2] = {op->n_in == 1 ? &graph_get(g, op->in[0])->out : NULL, &op->out};
  if (op->kind != GOP_BROADCAST || !dtype_lowered(op->out.dtype) || !bufs[0] ||
      bufs[0]->dtype != op->out.dtype) {
    set_err(err, n, "%s: lower_broadcast takes a floating-point broadcast", op->name);
    return -1;
  }
  writer w;
  if (begin_fn(&w, m, op->name, bufs, 2, op->out.dtype, err, n) != 0) return -1;
  emit_broadcast(&w, g, op);
  return end_fn(&w);
}

int lower_fused(lower_module *m, const graph *g, const int *ops, int n_ops, char *err,
                size_t n) {
  if (n_ops < 1 || n_ops > 1024) {
    set_err(err, n, "a fused kernel of %d ops: expected 1 to 1024", n_ops);
    return -1;
  }
  const graph_op *root = graph_get(g, ops[n_ops - 1]);
  int64_t elems = graph_elements(&root->out);
  int outside[LOWER_MAX_BUFS - 1], n_out = 0;
  for (int i = 0; i < n_ops; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    if (!lower_supported(g, ops[i], err, n)) return -1;
    if (!graph_op_is_elementwise(op->kind) || graph_elements(&op->out) != elems) {
      set_err(err, n, "%s: only elementwise ops of %lld elements fuse into one loop here",
              op->name, (long long)elems);
      return -1;
    }
    for (int j = 0; j < op->n_in; j++) {
      int v = op->in[j], k, inside = 0;
      for (k = 0; k < i; k++) inside |= ops[k] == v;
      for (k = 0; k < n_out && outside[k] != v; k++) {}
      if (inside || k < n_out) continue;
      if (n_out == (int)(sizeof outside / sizeof outside[0])) {
        set_err(err, n, "%s: more than %d inputs to one kernel", root->name, n_out);
        return -1;
      }
      outside[n_out++] = v;
    }
  }
  const graph_shape *bufs[LOWER_MAX_BUFS];
  for (int i = 0; i < n_out; i++) bufs[i] = &graph_get(g, outside[i])->out;
  bufs[n_out] = &root->out;
  char fname[272];
  snprintf(fname, sizeof fname, "fusion.%s", root->name);
  writer w;
  if (begin_fn(&w, m, fname, bufs, n_out + 1, graph_get(g, root->in[0])->out.dtype, err, n) != 0)
    return -1;
  LLVMValueRef fn = w.fn;
  loop l;
  loop_open(&w, &l, elems, "i");
  LLVMValueRef loaded[LOWER_MAX_BUFS - 1];
  for (int k = 0; k < n_out; k++) {
    char nm[16];
    snprintf(nm, sizeof nm, "x%d", k);
    loaded[k] = load_elem(&w, LLVMGetParam(fn, (unsigned)k), l.iv, graph_get(g, outside[k])->out.dtype, nm);
  }
  LLVMValueRef *val = malloc(sizeof(LLVMValueRef) * (size_t)n_ops);
  for (int i = 0; i < n_ops; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    LLVMValueRef x[3];
    graph_dtype dt = graph_get(g, op->in[0])->out.dtype;
    for (int j = 0; j < op->n_in; j++) {
      int v = op->in[j], k;
      for (k = 0; k < i && ops[k] != v; k++) {}
      if (k < i) {
        x[j] = to_compute(&w, val[k], dt);
      } else {
        for (k = 0; outside[k] != v; k++) {}
        x[j] = to_compute(&w, loaded[k], dt);
      }
    }
    val[i] = elementwise(&w, op->kind, x);
  }
  store_elem(&w, val[n_ops - 1], LLVMGetParam(fn, (unsigned)n_out), l.iv, root->out.dtype);
  free(val);
  loop_close(&w, &l);
  return end_fn(&w);
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

/* Callees by what the cost analysis counts them as. */
static const struct {
  const char *prefix;
  bool transcendental;
} CALLEES[] = {
    {"llvm.exp.", true},      {"llvm.log.", true},     {"llvm.sqrt.", true},
    {"llvm.sin.", true},      {"llvm.cos.", true},     {"llvm.pow.", true},
    {"tanhf", true},          {"tanh", true},          {"tpusim.logistic.", true},
    {"tpusim.rsqrt.", true},  {"llvm.fabs.", false},   {"llvm.maximum.", false},
    {"llvm.minimum.", false},
};

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
  double rd[GRAPH_MAX_RANK + 4] = {0}, wr[GRAPH_MAX_RANK + 4] = {0};
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
        size_t cl;
        const char *cn = LLVMGetValueName2(LLVMGetCalledValue(in), &cl);
        size_t i, nc = sizeof CALLEES / sizeof CALLEES[0];
        for (i = 0; i < nc; i++) {
          size_t pl = strlen(CALLEES[i].prefix);
          bool prefix = CALLEES[i].prefix[pl - 1] == '.';
          if (prefix ? strncmp(cn, CALLEES[i].prefix, pl) == 0
                     : (cl == pl && memcmp(cn, CALLEES[i].prefix, pl) == 0))
            break;
        }
        if (i == nc) {
          set_err(err, n, "%s: a call to '%.*s', which the analysis does not know", m->names[f],
                  (int)cl, cn);
          return -1;
        }
        if (CALLEES[i].transcendental) c->transcendentals += k;
        else c->flops[dt] += k;
        break;
      }
      default:
        break;
      }
    }
  }
  double acc = 0;
  for (unsigned i = 0; i < np; i++) {
    LLVMAttributeRef at = LLVMGetEnumAttributeAtIndex(fn, i + 1, deref);
    double size = at ? (double)LLVMGetEnumAttributeValue(at) : rd[i] + wr[i];
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
