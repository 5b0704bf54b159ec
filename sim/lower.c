/*
** lower.c -- see lower.h. The module side of the lowering: the module and
** its functions, what can be lowered (lower_supported), the counting that
** reads a function's cost off its IR (lower_op_cost), verify/optimize/print
** and the JIT.
**
** The IR emission is in lower_emit.c (types, loops, math, functions,
** indices), lower_ops.c (each op kind's value, the kernels' roots,
** lower_op/lower_fused) and lower_custom.c (the custom-calls tpusim's own
** builders declare).
** The LLVM seam (docs/architecture.md): every LLVM C API call of the program
** is in sim/lower*.c, the only objects the Makefile gives LLVM's include
** flags; sim/lower_int.h, which they share, is included by no other file.
*/
#include "lower.h"
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

void lower_llvm_version(char *buf, size_t n) {
  unsigned major, minor, patch;
  LLVMGetVersion(&major, &minor, &patch);
  snprintf(buf, n, "%u.%u.%u", major, minor, patch);
}
void lower_set_err(char *err, size_t n, const char *fmt, ...) {
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

bool lower_gather_layout_of(const graph_shape *t, const graph_shape *ix, const graph_shape *out,
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

custom_kind lower_custom_of(const graph_op *op) {
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
int lower_prefix_axis(const graph_op *op, const graph_shape *s) {
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
  custom_kind ck = lower_custom_of(op);
  if (ck == CUS_NONE) {
    lower_set_err(why, n, "%s: an opaque kernel with declared costs (not lowered)", op->name);
    return false;
  }
  for (int i = 0; i < op->n_in; i++)
    if (!dtype_lowered(graph_get(g, op->in[i])->out.dtype)) {
      lower_set_err(why, n, "%s: %s operands not lowered (no LLVM type holds them)", op->name,
              graph_dtype_name(graph_get(g, op->in[i])->out.dtype));
      return false;
    }
  if (!dtype_lowered(op->out.dtype) || op->custom_transcendentals != 0) {
    lower_set_err(why, n, "%s: not the custom-call tpusim's builders declare (not lowered)",
                  op->name);
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
         lower_prefix_axis(op, sx) >= 0;
  } else { /* row-partition: [R] node ids -> [M] row numbers */
    const graph_shape *sx = op->n_in == 1 ? &graph_get(g, op->in[0])->out : NULL;
    ok = ok && sx && sx->rank == 1 && op->out.rank == 1 && !is_float(sx->dtype) &&
         sx->dtype != GDT_PRED && !is_float(op->out.dtype) && op->out.dtype != GDT_PRED &&
         op->out.dim[0] >= 1 && op->out.dim[0] <= sx->dim[0] &&
         graph_num_close(op->custom_flops, (double)sx->dim[0]);
  }
  if (!ok) {
    lower_set_err(why, n,
                  "%s: shapes or declared costs unlike the custom-call tpusim's builders "
                  "declare (not lowered)",
                  op->name);
    return false;
  }
  return true;
}

bool lower_supported(const graph *g, int id, char *why, size_t n) {
  const graph_op *op = graph_get(g, id);
  graph_op_kind k = op->kind;
  const char *kn = graph_op_name(k);
  if (graph_op_is_collective(k)) {
    lower_set_err(why, n, "%s: a collective, timed by the network model (not lowered)", kn);
    return false;
  }
  if (k == GOP_CUSTOM) return custom_supported(g, op, why, n);
  if (k == GOP_PARAMETER || k == GOP_CONSTANT) {
    lower_set_err(why, n, "%s: a buffer, not a kernel", kn);
    return false;
  }
  if (k == GOP_REDUCE_PRECISION) {
    lower_set_err(why, n, "%s: not lowered (the graph keeps no exponent and mantissa widths)", kn);
    return false;
  }
  for (int i = 0; i < op->n_in; i++) {
    graph_dtype dt = graph_get(g, op->in[i])->out.dtype;
    if (!dtype_lowered(dt)) {
      lower_set_err(why, n, "%s: %s operands not lowered (no LLVM type holds them)", kn,
              graph_dtype_name(dt));
      return false;
    }
  }
  if (!dtype_lowered(op->out.dtype)) {
    lower_set_err(why, n, "%s: %s result not lowered (no LLVM type holds it)", kn,
            graph_dtype_name(op->out.dtype));
    return false;
  }
  /* the dtype the element function runs in: select's branches, else the first operand */
  graph_dtype dt = k == GOP_SELECT ? op->out.dtype
                   : op->n_in     ? graph_get(g, op->in[0])->out.dtype
                                  : op->out.dtype;
  /* element functions that exist only for floating point */
  if (graph_op_is_transcendental(k) && !is_float(dt)) {
    lower_set_err(why, n, "%s: %s operands (no integer %s)", kn, graph_dtype_name(dt), kn);
    return false;
  }
  if ((k == GOP_NOT || k == GOP_AND || k == GOP_OR) && is_float(dt)) {
    lower_set_err(why, n, "%s: %s operands (a bitwise op needs integers or pred)", kn,
            graph_dtype_name(dt));
    return false;
  }
  if (dt == GDT_PRED && (graph_op_is_elementwise(k) || k == GOP_DOT || k == GOP_CONV ||
                         k == GOP_REDUCE) &&
      k != GOP_NOT && k != GOP_AND && k != GOP_OR && k != GOP_SELECT && k != GOP_CONVERT &&
      k != GOP_COPY && k != GOP_COMPARE) {
    lower_set_err(why, n, "%s: pred operands (arithmetic on pred is not defined)", kn);
    return false;
  }
  if (k == GOP_CONV && op->conv.batch_groups > 1) {
    lower_set_err(why, n, "%s: batch groups (%lld) not lowered", kn,
                  (long long)op->conv.batch_groups);
    return false;
  }
  if (k == GOP_GATHER) {
    gather_layout L;
    if (!lower_gather_layout_of(&graph_get(g, op->in[0])->out, &graph_get(g, op->in[1])->out,
                          &op->out, &L)) {
      lower_set_err(why, n,
                    "%s: a result shape that is not an embedding lookup, a "
                    "take-along-axis gather or a column gather",
                    kn);
      return false;
    }
  }
  if (k == GOP_SCATTER) {
    int64_t on = graph_elements(&op->out), in = graph_elements(&graph_get(g, op->in[1])->out),
            un = graph_elements(&graph_get(g, op->in[2])->out);
    if (in <= 0 || un % in != 0 || un == 0 || on % (un / in) != 0) {
      lower_set_err(why, n, "%s: updates are not whole rows of the operand", kn);
      return false;
    }
  }
  return true;
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
    lower_set_err(err, n, "no function %d", f);
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
    lower_set_err(err, n, "%s: no tpusim.dtype attribute", m->names[f]);
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
      lower_set_err(err, n, "%s: block '%.*s' has no !tpusim.count", m->names[f], (int)bl, bn);
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
          lower_set_err(err, n, "%s: a !tpusim.flop tag without a dtype", m->names[f]);
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
        int cls = lower_callee_class(in);
        if (cls < 0) {
          size_t cl;
          const char *cn = LLVMGetValueName2(LLVMGetCalledValue(in), &cl);
          lower_set_err(err, n, "%s: a call to '%.*s', which the analysis does not know",
                        m->names[f], (int)cl, cn);
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
  if (bad) lower_set_err(err, n, "LLVM verifier: %s", msg ? msg : "(no message)");
  LLVMDisposeMessage(msg);
  return bad ? -1 : 0;
}

int lower_optimize(lower_module *m, int level, char *err, size_t n) {
  if (level < 0 || level > 3) {
    lower_set_err(err, n, "optimization level %d: expected 0 to 3", level);
    return -1;
  }
  if (level == 0) return 0;
  LLVMInitializeNativeTarget();
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    lower_set_err(err, n, "no LLVM target for %s: %s", triple, msg ? msg : "");
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
    lower_set_err(err, n, "LLVM passes: %s", em);
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
  lower_set_err(err, n, "%s: %s", what, em);
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
    lower_set_err(err, n, "copying the module: %s", msg ? msg : "");
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
    lower_set_err(err, n, "no function %d", fn);
    return NULL;
  }
  LLVMOrcExecutorAddress addr = 0;
  if (take_error(LLVMOrcLLJITLookup(j->jit, &addr, m->names[fn]), m->names[fn], err, n))
    return NULL;
  return (void *)(uintptr_t)addr;
}
