/*
** lower_emit.c -- the IR writer's tools: LLVM types of element types,
** element loads and stores, conversions, counted loops (each block's
** execution count on its terminator, flops tagged), math helpers and the
** elementwise kinds, function begin/end, and index arithmetic.
**
** Separate from the per-op emission (lower_ops.c): these know nothing of
** graph ops beyond an element type and a shape.
** The LLVM seam (docs/architecture.md): every LLVM C API call of the program
** is in sim/lower*.c, the only objects the Makefile gives LLVM's include
** flags; sim/lower_int.h, which they share, is included by no other file.
*/
#include "lower_int.h"

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

/* ---- types and elements ---- */

/* The type a value is computed in: f64 for f64, f32 for the other floats
** (bf16 and fp16 are widened on load and rounded on store), the integer of
** the dtype's width, i1 for pred. */
LLVMTypeRef lower_compute_type(LLVMContextRef ctx, graph_dtype dt) {
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
  default: return lower_compute_type(ctx, dt);
  }
}

static LLVMValueRef elem_ptr(writer *w, LLVMValueRef base, LLVMValueRef idx, graph_dtype dt,
                             const char *name) {
  return LLVMBuildGEP2(w->b, storage_type(w->m->ctx, dt), base, &idx, 1, name);
}

LLVMValueRef lower_load_elem(writer *w, LLVMValueRef base, LLVMValueRef idx, graph_dtype dt,
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
LLVMValueRef lower_to_compute(writer *w, LLVMValueRef v, graph_dtype dt) {
  LLVMTypeRef want = lower_compute_type(w->m->ctx, dt);
  if (LLVMTypeOf(v) == want || !is_float(dt)) return v;
  return dt == GDT_F64 ? LLVMBuildFPExt(w->b, v, want, "") : LLVMBuildFPTrunc(w->b, v, want, "");
}

void lower_store_elem(writer *w, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx,
                      graph_dtype dt) {
  LLVMContextRef ctx = w->m->ctx;
  v = lower_to_compute(w, v, dt);
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

LLVMValueRef lower_convert_value(writer *w, LLVMValueRef v, graph_dtype from, graph_dtype to) {
  LLVMContextRef ctx = w->m->ctx;
  LLVMTypeRef t = lower_compute_type(ctx, to);
  if (is_float(from) && is_float(to)) return lower_to_compute(w, v, to);
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

void lower_mark(writer *w, LLVMValueRef term, int64_t count) {
  LLVMMetadataRef md = LLVMValueAsMetadata(LLVMConstInt(w->i64, (unsigned long long)count, 0));
  LLVMValueRef node = LLVMMetadataAsValue(w->m->ctx, LLVMMDNodeInContext2(w->m->ctx, &md, 1));
  LLVMSetMetadata(term, w->m->count_kind, node);
}

/* Marks instruction v as arithmetic the formula counts, in dtype dt:
** !tpusim.flop !{!"s32"}. Integer instructions and selects count only
** with it -- the index arithmetic around them is the loop's, not the op's. */
LLVMValueRef lower_flop(writer *w, LLVMValueRef v, graph_dtype dt) {
  if (!LLVMIsAInstruction(v)) return v; /* folded to a constant */
  const char *dn = graph_dtype_name(dt);
  LLVMMetadataRef s = LLVMMDStringInContext2(w->m->ctx, dn, strlen(dn));
  LLVMSetMetadata(v, w->m->flop_kind,
                  LLVMMetadataAsValue(w->m->ctx, LLVMMDNodeInContext2(w->m->ctx, &s, 1)));
  return v;
}

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

int lower_callee_class(LLVMValueRef call) {
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
void lower_tag_since(writer *w, LLVMValueRef after, graph_dtype dt) {
  LLVMValueRef in = after ? LLVMGetNextInstruction(after)
                          : LLVMGetFirstInstruction(LLVMGetInsertBlock(w->b));
  for (; in; in = LLVMGetNextInstruction(in)) {
    switch (LLVMGetInstructionOpcode(in)) {
    case LLVMFAdd: case LLVMFSub: case LLVMFMul: case LLVMFDiv: case LLVMFRem: case LLVMFNeg:
    case LLVMFCmp:
      lower_flop(w, in, dt);
      break;
    case LLVMCall:
      if (lower_callee_class(in) == CALL_FLOP) lower_flop(w, in, dt);
      break;
    default:
      break;
    }
  }
}

LLVMBasicBlockRef lower_block(writer *w, const char *name) {
  return LLVMAppendBasicBlockInContext(w->m->ctx, w->fn, name);
}

/* for (iv = start; iv < n; iv++): leaves the builder in the body. */
void lower_loop_from(writer *w, loop *l, int64_t start, int64_t n, const char *name) {
  char hn[40], bn[40], en[40];
  snprintf(hn, sizeof hn, "%s.head", name);
  snprintf(bn, sizeof bn, "%s.body", name);
  snprintf(en, sizeof en, "%s.exit", name);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(w->b);
  l->header = lower_block(w, hn);
  LLVMBasicBlockRef body = lower_block(w, bn);
  l->exit = lower_block(w, en);
  lower_mark(w, LLVMBuildBr(w->b, l->header), w->mult);
  LLVMPositionBuilderAtEnd(w->b, l->header);
  l->iv = LLVMBuildPhi(w->b, w->i64, name);
  LLVMValueRef first = LLVMConstInt(w->i64, (unsigned long long)start, 0);
  LLVMAddIncoming(l->iv, &first, &pre, 1);
  LLVMValueRef more =
      LLVMBuildICmp(w->b, LLVMIntULT, l->iv, LLVMConstInt(w->i64, (unsigned long long)n, 0), "");
  int64_t trips = n > start ? n - start : 0;
  lower_mark(w, LLVMBuildCondBr(w->b, more, body, l->exit), w->mult * (trips + 1));
  LLVMPositionBuilderAtEnd(w->b, body);
  l->saved_mult = w->mult;
  w->mult *= trips;
}

void lower_loop_open(writer *w, loop *l, int64_t n, const char *name) {
  lower_loop_from(w, l, 0, n, name);
}

void lower_loop_close(writer *w, loop *l) {
  LLVMValueRef next = LLVMBuildNUWAdd(w->b, l->iv, LLVMConstInt(w->i64, 1, 0), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(w->b);
  lower_mark(w, LLVMBuildBr(w->b, l->header), w->mult);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  w->mult = l->saved_mult;
  LLVMPositionBuilderAtEnd(w->b, l->exit);
}

/* An accumulator slot, in the entry block so a loop does not grow the stack. */
LLVMValueRef lower_entry_alloca(writer *w, LLVMTypeRef t, const char *name) {
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

LLVMValueRef lower_call_intrinsic(writer *w, const char *name, LLVMValueRef *args, int n) {
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
        LLVMValueRef e = lower_call_intrinsic(w, "llvm.exp", &neg, 1);
        r = LLVMBuildFDiv(hb, fconst(a, 1), LLVMBuildFAdd(hb, fconst(a, 1), e, ""), "");
      } else { /* rsqrt */
        r = LLVMBuildFDiv(hb, fconst(a, 1), lower_call_intrinsic(w, "llvm.sqrt", &a, 1), "");
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
LLVMValueRef lower_elementwise(writer *w, graph_op_kind k, LLVMValueRef *x) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef a = x[0];
  switch (k) {
  case GOP_NEG: return LLVMBuildFNeg(b, a, "neg");
  case GOP_ABS: return lower_call_intrinsic(w, "llvm.fabs", x, 1);
  case GOP_EXP: return lower_call_intrinsic(w, "llvm.exp", x, 1);
  case GOP_LOG: return lower_call_intrinsic(w, "llvm.log", x, 1);
  case GOP_SQRT: return lower_call_intrinsic(w, "llvm.sqrt", x, 1);
  case GOP_SIN: return lower_call_intrinsic(w, "llvm.sin", x, 1);
  case GOP_COS: return lower_call_intrinsic(w, "llvm.cos", x, 1);
  case GOP_TANH: return helper(w, "tanh", a);
  case GOP_LOGISTIC: return helper(w, "logistic", a);
  case GOP_RSQRT: return helper(w, "rsqrt", a);
  case GOP_RELU: {
    LLVMValueRef args[2] = {a, fconst(a, 0)};
    return lower_call_intrinsic(w, "llvm.maximum", args, 2);
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
  case GOP_MAX: return lower_call_intrinsic(w, "llvm.maximum", x, 2);
  case GOP_MIN: return lower_call_intrinsic(w, "llvm.minimum", x, 2);
  case GOP_POW: return lower_call_intrinsic(w, "llvm.pow", x, 2);
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
    LLVMValueRef hi[2] = {lower_call_intrinsic(w, "llvm.maximum", lo, 2), x[2]};
    return lower_call_intrinsic(w, "llvm.minimum", hi, 2);
  }
  default: return NULL;
  }
}

/* The element function on integers (and pred), every instruction the
** formula counts tagged in dtype dt. Division by zero gives -1 and
** INT_MIN / -1 gives INT_MIN, as XLA defines them, without LLVM's
** undefined behaviour (the guards are untagged: not the op's arithmetic). */
LLVMValueRef lower_int_elementwise(writer *w, graph_op_kind k, LLVMValueRef *x, graph_dtype dt) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef a = x[0];
  bool u = is_unsigned(dt);
  switch (k) {
  case GOP_NEG: return lower_flop(w, LLVMBuildSub(b, iconst(a, 0), a, "neg"), dt);
  case GOP_ABS: {
    LLVMValueRef args[2] = {a, LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 0, 0)};
    LLVMValueRef zero[2] = {a, iconst(a, 0)};
    /* unsigned: abs is the value itself, max(x, 0) -- still the formula's one op */
    if (u) return lower_flop(w, lower_call_intrinsic(w, "llvm.umax", zero, 2), dt);
    return lower_flop(w, lower_call_intrinsic(w, "llvm.abs", args, 2), dt);
  }
  case GOP_RELU: {
    LLVMValueRef args[2] = {a, iconst(a, 0)};
    return lower_flop(w, lower_call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", args, 2), dt);
  }
  case GOP_NOT: return lower_flop(w, LLVMBuildXor(b, a, iconst(a, -1), "not"), dt);
  case GOP_CONVERT:
  case GOP_COPY: return a;
  case GOP_ADD: return lower_flop(w, LLVMBuildAdd(b, a, x[1], "add"), dt);
  case GOP_SUB: return lower_flop(w, LLVMBuildSub(b, a, x[1], "sub"), dt);
  case GOP_MUL: return lower_flop(w, LLVMBuildMul(b, a, x[1], "mul"), dt);
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
    LLVMValueRef q =
        lower_flop(w, u ? LLVMBuildUDiv(b, a, d, "div") : LLVMBuildSDiv(b, a, d, "div"), dt);
    LLVMValueRef q_ovf = u ? q : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x[1], iconst(a, -1), ""),
                                                 LLVMBuildSub(b, iconst(a, 0), a, ""), q, "");
    return LLVMBuildSelect(b, zero, iconst(a, -1), q_ovf, "");
  }
  case GOP_MAX:
    return lower_flop(w, lower_call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", x, 2), dt);
  case GOP_MIN:
    return lower_flop(w, lower_call_intrinsic(w, u ? "llvm.umin" : "llvm.smin", x, 2), dt);
  case GOP_AND: return lower_flop(w, LLVMBuildAnd(b, a, x[1], "and"), dt);
  case GOP_OR: return lower_flop(w, LLVMBuildOr(b, a, x[1], "or"), dt);
  case GOP_COMPARE: /* less-than, as for floats */
    return lower_flop(w, LLVMBuildICmp(b, u ? LLVMIntULT : LLVMIntSLT, a, x[1], "lt"), dt);
  case GOP_SELECT: return lower_flop(w, LLVMBuildSelect(b, a, x[1], x[2], "select"), dt);
  case GOP_CLAMP: {
    LLVMValueRef lo[2] = {x[1], a};
    LLVMValueRef hi[2] = {
        lower_flop(w, lower_call_intrinsic(w, u ? "llvm.umax" : "llvm.smax", lo, 2), dt), x[2]};
    return lower_flop(w, lower_call_intrinsic(w, u ? "llvm.umin" : "llvm.smin", hi, 2), dt);
  }
  default: return NULL;
  }
}

/* ---- functions ---- */

/* Starts function `name` over buffers bufs[0..nbuf) (the operands, then
** the result) and n_starts i64 start indices, with untagged flops counted
** in flop_dt; leaves w's builder in its entry block. -1 (err says why)
** when the module is full. */
int lower_begin_fn(writer *w, lower_module *m, const kernel *k, const char *name,
                   const graph_shape *const *bufs, int nbuf, graph_dtype flop_dt, char *err,
                   size_t n) {
  if (m->nfn == LOWER_MAX_FNS) {
    lower_set_err(err, n, "more than %d functions in one module", LOWER_MAX_FNS);
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
  LLVMPositionBuilderAtEnd(w->b, lower_block(w, "entry"));
  return 0;
}

/* Argument i's loads and stores are counted as accessed, not capped at
** its size: the rows a gather fetches and a scatter updates depend on the
** indices, and the formula charges each one (docs/op-models.md). */
void lower_uncapped(writer *w, int arg) {
  LLVMAddAttributeAtIndex(w->fn, (unsigned)arg + 1,
                          LLVMCreateStringAttribute(w->m->ctx, "tpusim.uncapped", 15, "", 0));
}

/* Returns from the function w writes and registers it: its index. */
int lower_end_fn(writer *w) {
  lower_module *m = w->m;
  lower_mark(w, LLVMBuildRetVoid(w->b), w->mult);
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

LLVMValueRef lower_i64c(writer *w, int64_t v) {
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

LLVMValueRef lower_linear_index(writer *w, const graph_shape *s, LLVMValueRef *idx) {
  if (s->rank == 0) return lower_i64c(w, 0);
  struct ix_memo *e = ix_find(w, s, NULL, idx);
  if (e) return e->lin;
  LLVMValueRef lin = idx[0];
  for (int d = 1; d < s->rank; d++) {
    lin = LLVMBuildMul(w->b, lin, lower_i64c(w, s->dim[d]), "");
    lin = LLVMBuildAdd(w->b, lin, idx[d], "");
  }
  ix_keep(w, s, lin, idx);
  return lin;
}

ix lower_ix_lin(const graph_shape *s, LLVMValueRef lin) {
  ix x = {.s = s, .lin = lin};
  return x;
}

ix lower_ix_dims(const graph_shape *s, const LLVMValueRef *d) {
  ix x = {.s = s, .has_d = true};
  for (int i = 0; i < s->rank; i++) x.d[i] = d[i];
  return x;
}

LLVMValueRef lower_get_lin(writer *w, ix *x) {
  if (!x->lin) x->lin = lower_linear_index(w, x->s, x->d);
  return x->lin;
}

void lower_get_dims(writer *w, ix *x) {
  if (x->has_d) return;
  struct ix_memo *e = x->s->rank ? ix_find(w, x->s, x->lin, NULL) : NULL;
  if (e) {
    for (int d = 0; d < x->s->rank; d++) x->d[d] = e->d[d];
    x->has_d = true;
    return;
  }
  LLVMValueRef r = x->lin;
  for (int d = x->s->rank - 1; d > 0; d--) {
    LLVMValueRef size = lower_i64c(w, x->s->dim[d]);
    x->d[d] = LLVMBuildURem(w->b, r, size, "");
    r = LLVMBuildUDiv(w->b, r, size, "");
  }
  if (x->s->rank > 0) x->d[0] = r;
  x->has_d = true;
  if (x->s->rank > 0) ix_keep(w, x->s, x->lin, x->d);
}

bool lower_in_dims(const graph_dims *ds, int d) {
  for (int i = 0; i < ds->n; i++)
    if (ds->d[i] == d) return true;
  return false;
}

/* v clamped to [0, hi] (signed): an index the data chose, kept in bounds
** as XLA clamps gather and dynamic-slice starts. */
LLVMValueRef lower_clamp_index(writer *w, LLVMValueRef v, int64_t hi) {
  if (hi < 0) hi = 0;
  LLVMValueRef lo[2] = {v, lower_i64c(w, 0)};
  LLVMValueRef up[2] = {lower_call_intrinsic(w, "llvm.smax", lo, 2), lower_i64c(w, hi)};
  return lower_call_intrinsic(w, "llvm.smin", up, 2);
}

/* An integer element of dtype dt, as an i64 index. */
LLVMValueRef lower_as_index(writer *w, LLVMValueRef v, graph_dtype dt) {
  unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(v));
  if (bits == 64) return v;
  return is_unsigned(dt) ? LLVMBuildZExt(w->b, v, w->i64, "") : LLVMBuildSExt(w->b, v, w->i64, "");
}

