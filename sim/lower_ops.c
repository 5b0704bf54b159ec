/*
** lower_ops.c -- the per-op IR: each op's value at an element (elementwise,
** dot, conv, reduce, pad, gather, slices), the roots whose loops are not the
** output's (concatenate, dynamic-update-slice, scatter), and the entry
** points lower_op, lower_broadcast and lower_fused.
**
** Separate from the writer's tools (lower_emit.c) and the module side
** (lower.c): one function per op kind, the part that grows with the graph.
** The LLVM seam (docs/architecture.md): every LLVM C API call of the program
** is in sim/lower*.c, the only objects the Makefile gives LLVM's include
** flags; sim/lower_int.h, which they share, is included by no other file.
*/
#include "lower_int.h"

#include "../base/strutil.h"

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
  LLVMValueRef v = lower_load_elem(w, LLVMGetParam(w->fn, (unsigned)arg), idx, dt, name);
  if (w->n_cache < LOWER_CACHE)
    w->cache[w->n_cache++] = (load_memo){.arg = arg, .idx = idx, .v = v, .bb = bb};
  return v;
}

static LLVMValueRef emit_op(writer *w, int id, ix *o);

/* The value of operand j of op `id` at index x, in its compute type. */
LLVMValueRef lower_operand_at(writer *w, int id, int j, ix *x, const char *hint) {
  const kernel *k = w->k;
  const graph_op *op = graph_get(k->g, id);
  int v = op->in[j];
  const graph_op *vo = graph_get(k->g, v);
  if (member(k, v) >= 0) {
    /* a member read twice at one index in one block is computed once, as
    ** XLA's fused emitter caches a value per (instruction, index) */
    LLVMValueRef lin = lower_get_lin(w, x);
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
  return load_arg(w, arg, vo->out.dtype, lower_get_lin(w, x), nm);
}

/* Names an op's result after the op, for reading the IR. */
LLVMValueRef lower_named(LLVMValueRef v, const graph_op *op, LLVMValueRef *ins, int n_in) {
  if (!LLVMIsAInstruction(v)) return v;
  for (int i = 0; i < n_in; i++)
    if (ins[i] == v) return v;
  LLVMSetValueName2(v, op->name, strlen(op->name));
  return v;
}

graph_dtype lower_acc_dtype(graph_dtype dt) {
  switch (dt) {
  case GDT_F64: return GDT_F64;
  case GDT_S64: return GDT_S64;
  case GDT_BF16: case GDT_F16: case GDT_F32: return GDT_F32;
  case GDT_U8: case GDT_U32: return GDT_U32;
  default: return GDT_S32;
  }
}

LLVMValueRef lower_zero_of(LLVMTypeRef t) {
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMConstInt(t, 0, 0) : LLVMConstReal(t, 0);
}

static LLVMValueRef emit_elementwise(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  graph_dtype dt = op->kind == GOP_SELECT ? op->out.dtype : graph_get(g, op->in[0])->out.dtype;
  LLVMValueRef x[3];
  int64_t n = graph_elements(&op->out);
  if (op->n_in > 1)
    lower_get_lin(w, o); /* one index value: operands read at it share the member cache */
  for (int j = 0; j < op->n_in; j++) {
    const graph_shape *s = &graph_get(g, op->in[j])->out;
    ix xi = *o;
    xi.s = s;
    if (graph_elements(s) != n)
      xi = lower_ix_lin(s, lower_i64c(w, 0)); /* a scalar operand (select, clamp) */
    x[j] = lower_operand_at(w, id, j, &xi, NULL);
  }
  LLVMValueRef r;
  if (op->kind == GOP_CONVERT) {
    r = lower_convert_value(w, x[0], dt, op->out.dtype);
  } else if (is_float(dt)) {
    for (int j = 0; j < op->n_in; j++)
      if (!(op->kind == GOP_SELECT && j == 0)) x[j] = lower_to_compute(w, x[j], dt);
    LLVMValueRef last = LLVMGetLastInstruction(LLVMGetInsertBlock(w->b));
    r = lower_elementwise(w, op->kind, x);
    lower_tag_since(w, last, dt);
    if (op->kind == GOP_SELECT) lower_flop(w, r, dt);
  } else {
    r = lower_int_elementwise(w, op->kind, x, dt);
  }
  return lower_named(r, op, x, op->n_in);
}

/* dot: one loop per contracting dim; multiply-add into an f32 (f64,
** i32, i64) accumulator. */
static LLVMValueRef emit_dot(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  const graph_shape *sa = &graph_get(g, op->in[0])->out, *sb = &graph_get(g, op->in[1])->out;
  graph_dtype adt = lower_acc_dtype(sa->dtype);
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
  lower_get_dims(w, o);
  LLVMBuildStore(w->b, lower_zero_of(ct), acc_slot);
  loop lk[GRAPH_MAX_RANK];
  LLVMValueRef ki[GRAPH_MAX_RANK];
  int nc = op->lhs_contract.n;
  for (int c = 0; c < nc; c++) {
    char nm[16];
    snprintf(nm, sizeof nm, "k%d", c);
    lower_loop_open(w, &lk[c], sa->dim[op->lhs_contract.d[c]], nm);
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
  ix xa = lower_ix_dims(sa, ia), xb = lower_ix_dims(sb, ib);
  LLVMValueRef a = lower_convert_value(w, lower_operand_at(w, id, 0, &xa, "a"), sa->dtype, adt);
  LLVMValueRef bv = lower_convert_value(w, lower_operand_at(w, id, 1, &xb, "b"), sb->dtype, adt);
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
  bool fl = is_float(adt);
  LLVMValueRef prod = lower_flop(
      w, fl ? LLVMBuildFMul(w->b, a, bv, "prod") : LLVMBuildMul(w->b, a, bv, "prod"), sa->dtype);
  LLVMValueRef nx = lower_flop(w,
                               fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next")
                                  : LLVMBuildAdd(w->b, acc, prod, "acc.next"),
                               sa->dtype);
  LLVMBuildStore(w->b, nx, acc_slot);
  for (int c = nc - 1; c >= 0; c--) lower_loop_close(w, &lk[c]);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  LLVMValueRef r = lower_convert_value(w, sum, adt, op->out.dtype);
  return lower_named(r, op, NULL, 0);
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
  graph_dtype adt = lower_acc_dtype(si->dtype);
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
  lower_get_dims(w, o);
  LLVMBuildStore(w->b, lower_zero_of(ct), acc_slot);
  int64_t fg = c->feature_groups > 0 ? c->feature_groups : 1;
  int64_t cin = sk->dim[c->k_in], cout_g = sk->dim[c->k_out] / fg;
  LLVMValueRef grp = LLVMBuildUDiv(w->b, o->d[c->out_feature], lower_i64c(w, cout_g), "group");
  loop lw[3], lc;
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", s);
    lower_loop_open(w, &lw[s], sk->dim[c->k_spatial[s]], nm);
  }
  lower_loop_open(w, &lc, cin, "ci");
  LLVMValueRef ii[GRAPH_MAX_RANK], kk[GRAPH_MAX_RANK];
  LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 1, 0);
  ii[c->in_batch] = o->d[c->out_batch];
  ii[c->in_feature] =
      LLVMBuildAdd(w->b, LLVMBuildMul(w->b, grp, lower_i64c(w, cin), ""), lc.iv, "");
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = c->stride[s] > 0 ? c->stride[s] : 1, ld = c->lhs_dilation[s] > 0 ? c->lhs_dilation[s] : 1,
            rd = c->rhs_dilation[s] > 0 ? c->rhs_dilation[s] : 1, n = si->dim[c->in_spatial[s]];
    /* position in the dilated, padded input */
    LLVMValueRef pos = LLVMBuildAdd(
        w->b, LLVMBuildMul(w->b, o->d[c->out_spatial[s]], lower_i64c(w, st), ""),
        LLVMBuildMul(w->b, lw[s].iv, lower_i64c(w, rd), ""), "");
    pos = LLVMBuildSub(w->b, pos, lower_i64c(w, c->pad_lo[s]), "");
    LLVMValueRef p = ld > 1 ? LLVMBuildSDiv(w->b, pos, lower_i64c(w, ld), "") : pos;
    LLVMValueRef ok = LLVMBuildAnd(w->b, LLVMBuildICmp(w->b, LLVMIntSGE, pos, lower_i64c(w, 0), ""),
                                   LLVMBuildICmp(w->b, LLVMIntSLT, p, lower_i64c(w, n), ""), "");
    if (ld > 1)
      ok = LLVMBuildAnd(w->b, ok,
                        LLVMBuildICmp(w->b, LLVMIntEQ,
                                      LLVMBuildSRem(w->b, pos, lower_i64c(w, ld), ""),
                                      lower_i64c(w, 0), ""),
                        "");
    valid = LLVMBuildAnd(w->b, valid, ok, "");
    ii[c->in_spatial[s]] = lower_clamp_index(w, p, n - 1);
    kk[c->k_spatial[s]] = lw[s].iv;
  }
  kk[c->k_in] = lc.iv;
  kk[c->k_out] = o->d[c->out_feature];
  LLVMValueRef inb = valid;
  LLVMSetValueName2(inb, "inside", 6);
  ix xi = lower_ix_dims(si, ii), xk = lower_ix_dims(sk, kk);
  LLVMValueRef x = lower_convert_value(w, lower_operand_at(w, id, 0, &xi, "x"), si->dtype, adt);
  LLVMValueRef kv = lower_convert_value(w, lower_operand_at(w, id, 1, &xk, "k"), sk->dtype, adt);
  x = LLVMBuildSelect(w->b, inb, x, lower_zero_of(ct), "x.or0");
  LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
  bool fl = is_float(adt);
  LLVMValueRef prod = lower_flop(
      w, fl ? LLVMBuildFMul(w->b, x, kv, "prod") : LLVMBuildMul(w->b, x, kv, "prod"), si->dtype);
  LLVMValueRef nx = lower_flop(w,
                               fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next")
                                  : LLVMBuildAdd(w->b, acc, prod, "acc.next"),
                               si->dtype);
  LLVMBuildStore(w->b, nx, acc_slot);
  lower_loop_close(w, &lc);
  for (int s = c->spatial - 1; s >= 0; s--) lower_loop_close(w, &lw[s]);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  return lower_named(lower_convert_value(w, sum, adt, op->out.dtype), op, NULL, 0);
}

LLVMValueRef lower_combine(writer *w, graph_reduce_kind r, LLVMValueRef a, LLVMValueRef b,
                           graph_dtype adt, graph_dtype dt) {
  LLVMValueRef x[2] = {a, b};
  bool fl = is_float(adt), u = is_unsigned(adt);
  switch (r) {
  case GRAPH_RED_ADD:
    return lower_flop(w, fl ? LLVMBuildFAdd(w->b, a, b, "sum") : LLVMBuildAdd(w->b, a, b, "sum"),
                      dt);
  case GRAPH_RED_MUL:
    return lower_flop(w, fl ? LLVMBuildFMul(w->b, a, b, "prod") : LLVMBuildMul(w->b, a, b, "prod"),
                      dt);
  case GRAPH_RED_MAX:
    return lower_flop(w,
                      lower_call_intrinsic(w,
                                           fl  ? "llvm.maximum"
                                           : u ? "llvm.umax"
                                               : "llvm.smax",
                                           x, 2),
                      dt);
  default:
    return lower_flop(w,
                      lower_call_intrinsic(w,
                                           fl  ? "llvm.minimum"
                                           : u ? "llvm.umin"
                                               : "llvm.smin",
                                           x, 2),
                      dt);
  }
}

/* reduce: one loop over the reduced elements flattened, starting at the
** second: the accumulator starts as the first element, so K elements take
** K - 1 combines (the formula's in - out). bf16 and fp16 accumulate in
** f32, as XLA does; integers in their own width (wrapping). */
static LLVMValueRef emit_reduce(writer *w, int id, const graph_op *op, ix *o) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  graph_dtype adt = is_float(sx->dtype) ? lower_acc_dtype(sx->dtype) : sx->dtype;
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
  lower_get_dims(w, o);
  int64_t k = 1;
  for (int i = 0; i < op->dims.n; i++) k *= sx->dim[op->dims.d[i]];
  LLVMValueRef zero = lower_i64c(w, 0), idx[GRAPH_MAX_RANK];
  loop lr;
  /* the input index of reduced element r: kept dims from the output index,
  ** reduced dims by decomposing r (last reduced dim fastest) */
  for (int pass = 0; pass < 2; pass++) {
    LLVMValueRef r = zero;
    if (pass == 1) {
      lower_loop_from(w, &lr, 1, k, "r");
      r = lr.iv;
    }
    for (int d = 0, next = 0; d < sx->rank; d++)
      idx[d] = lower_in_dims(&op->dims, d) ? NULL : o->d[next++];
    for (int i = op->dims.n - 1; i >= 0; i--) {
      LLVMValueRef size = lower_i64c(w, sx->dim[op->dims.d[i]]);
      idx[op->dims.d[i]] = pass && i > 0 ? LLVMBuildURem(w->b, r, size, "") : r;
      if (pass && i > 0) r = LLVMBuildUDiv(w->b, r, size, "");
    }
    ix xi = lower_ix_dims(sx, idx);
    LLVMValueRef v = lower_convert_value(w, lower_operand_at(w, id, 0, &xi, "x"), sx->dtype, adt);
    if (pass == 0) {
      LLVMBuildStore(w->b, v, acc_slot);
    } else {
      LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
      LLVMBuildStore(w->b, lower_combine(w, op->reduce, acc, v, adt, sx->dtype), acc_slot);
      lower_loop_close(w, &lr);
    }
  }
  LLVMValueRef res = LLVMBuildLoad2(w->b, ct, acc_slot, "result");
  return lower_named(lower_convert_value(w, res, adt, op->out.dtype), op, NULL, 0);
}

/* pad: output position p of a dim comes from operand element (p - lo) /
** (interior + 1) when that divides and lands inside; elsewhere it is the
** padding value 0. The load is from a clamped index and a select keeps
** the zero: no branch, each output element loads once (capped at the
** operand's size: the formula's bytes). */
static LLVMValueRef emit_pad(writer *w, int id, const graph_op *op, ix *o) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  lower_get_dims(w, o);
  LLVMValueRef idx[GRAPH_MAX_RANK];
  LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(w->m->ctx), 1, 0);
  for (int d = 0; d < sx->rank; d++) {
    int64_t step = op->step[d] + 1;
    LLVMValueRef q = LLVMBuildSub(w->b, o->d[d], lower_i64c(w, op->lo[d]), "");
    LLVMValueRef p = step > 1 ? LLVMBuildSDiv(w->b, q, lower_i64c(w, step), "") : q;
    LLVMValueRef ok =
        LLVMBuildAnd(w->b, LLVMBuildICmp(w->b, LLVMIntSGE, q, lower_i64c(w, 0), ""),
                     LLVMBuildICmp(w->b, LLVMIntSLT, p, lower_i64c(w, sx->dim[d]), ""), "");
    if (step > 1)
      ok = LLVMBuildAnd(w->b, ok,
                        LLVMBuildICmp(w->b, LLVMIntEQ,
                                      LLVMBuildSRem(w->b, q, lower_i64c(w, step), ""),
                                      lower_i64c(w, 0), ""),
                        "");
    valid = LLVMBuildAnd(w->b, valid, ok, "");
    idx[d] = lower_clamp_index(w, p, sx->dim[d] - 1);
  }
  ix xi = lower_ix_dims(sx, idx);
  LLVMValueRef x = lower_operand_at(w, id, 0, &xi, NULL);
  return lower_named(LLVMBuildSelect(w->b, valid, x, lower_zero_of(LLVMTypeOf(x)), ""), op, NULL,
                     0);
}

/* gather: output element (n, j) is element j of the row index n picks
** (clamped into range, as XLA clamps). */
static LLVMValueRef emit_gather(writer *w, int id, const graph_op *op, ix *o) {
  const graph *g = w->k->g;
  const graph_shape *st = &graph_get(g, op->in[0])->out, *si = &graph_get(g, op->in[1])->out;
  gather_layout L;
  lower_gather_layout_of(st, si, &op->out, &L);
  LLVMValueRef lin = lower_get_lin(w, o);
  if (L.columns) { /* out[b, k] = table[b, idx[k]] */
    int64_t K = graph_elements(si);
    LLVMValueRef b = LLVMBuildUDiv(w->b, lin, lower_i64c(w, K), "b");
    ix xk = lower_ix_lin(si, LLVMBuildURem(w->b, lin, lower_i64c(w, K), "k"));
    LLVMValueRef col = lower_clamp_index(
        w, lower_as_index(w, lower_operand_at(w, id, 1, &xk, "index"), si->dtype), L.per - 1);
    ix xt = lower_ix_lin(
        st, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, b, lower_i64c(w, L.per), ""), col, "elem"));
    return lower_named(lower_operand_at(w, id, 0, &xt, "col"), op, NULL, 0);
  }
  LLVMValueRef nidx = LLVMBuildUDiv(w->b, lin, lower_i64c(w, L.rs), "n");
  LLVMValueRef j = LLVMBuildURem(w->b, lin, lower_i64c(w, L.rs), "j");
  ix xi = lower_ix_lin(si, nidx);
  LLVMValueRef row = lower_clamp_index(
      w, lower_as_index(w, lower_operand_at(w, id, 1, &xi, "index"), si->dtype), L.per - 1);
  if (L.along)
    row = LLVMBuildAdd(w->b, LLVMBuildMul(w->b, nidx, lower_i64c(w, L.per), ""), row, "");
  ix xt = lower_ix_lin(
      st, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, row, lower_i64c(w, L.rs), ""), j, "row.elem"));
  return lower_named(lower_operand_at(w, id, 0, &xt, "row"), op, NULL, 0);
}

/* The start of dim d of a dynamic slice of `size` out of `dim`: the
** argument, clamped so the slice fits (XLA's rule). */
static LLVMValueRef start_of(writer *w, int d, int64_t dim, int64_t size) {
  int base = w->k->n_outside + 1;
  return lower_clamp_index(w, LLVMGetParam(w->fn, (unsigned)(base + d)), dim - size);
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
    ix xi = lower_ix_lin(&graph_get(g, op->in[0])->out, lower_get_lin(w, o));
    return lower_operand_at(w, id, 0, &xi, NULL);
  }
  case GOP_BROADCAST:
  case GOP_TRANSPOSE:
  case GOP_SLICE:
  case GOP_DYNAMIC_SLICE: {
    const graph_shape *sx = &graph_get(g, op->in[0])->out;
    lower_get_dims(w, o);
    LLVMValueRef idx[GRAPH_MAX_RANK];
    for (int d = 0; d < sx->rank; d++) {
      if (op->kind == GOP_BROADCAST) idx[d] = o->d[op->dims.d[d]];
      else if (op->kind == GOP_TRANSPOSE) idx[op->dims.d[d]] = o->d[d];
      else if (op->kind == GOP_SLICE)
        idx[d] = LLVMBuildAdd(w->b, lower_i64c(w, op->lo[d]),
                              LLVMBuildMul(w->b, o->d[d], lower_i64c(w, op->step[d]), ""), "");
      else
        idx[d] = LLVMBuildAdd(w->b, start_of(w, d, sx->dim[d], op->out.dim[d]), o->d[d], "");
    }
    ix xi = lower_ix_dims(sx, idx);
    return lower_operand_at(w, id, 0, &xi, NULL);
  }
  case GOP_IOTA: { /* the graph keeps no iota dimension: 0 */
    lower_get_dims(w, o);
    LLVMValueRef v = op->out.rank ? o->d[0] : lower_i64c(w, 0);
    return lower_named(lower_convert_value(w, v, GDT_S64, op->out.dtype), op, NULL, 0);
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

LLVMValueRef lower_out_arg(writer *w) { return LLVMGetParam(w->fn, (unsigned)w->k->n_outside); }

/* The argument an outside operand j of op `id` is read from, or -1 when
** the kernel computes it. */
static int arg_of_operand(const kernel *k, int id, int j) {
  int v = graph_get(k->g, id)->in[j];
  if (member(k, v) >= 0) return -1;
  return k->single ? j : outside_arg(k, v);
}

void lower_loops_open(writer *w, loop *l, const graph_shape *s, const char *prefix,
                      LLVMValueRef *d) {
  for (int i = 0; i < s->rank; i++) {
    char nm[24];
    snprintf(nm, sizeof nm, "%s%d", prefix, i);
    lower_loop_open(w, &l[i], s->dim[i], nm);
    d[i] = l[i].iv;
  }
}

void lower_loops_close(writer *w, loop *l, int rank) {
  for (int d = rank - 1; d >= 0; d--) lower_loop_close(w, &l[d]);
}

/* Stores operand j of the root into every element of the result: a
** dynamic-update-slice or scatter whose operand the kernel computes (a
** broadcast zero) writes it before updating in place. */
static void fill_from_operand(writer *w, int root, int j) {
  const graph_op *op = graph_get(w->k->g, root);
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK];
  lower_loops_open(w, l, &op->out, "f", d);
  ix o = lower_ix_dims(&op->out, d);
  lower_store_elem(w, lower_operand_at(w, root, j, &o, NULL), lower_out_arg(w),
                   lower_get_lin(w, &o), op->out.dtype);
  lower_loops_close(w, l, op->out.rank);
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
    lower_loops_open(w, l, s, pre, d);
    ix xi = lower_ix_dims(s, d);
    LLVMValueRef v = lower_operand_at(w, root, j, &xi, NULL);
    for (int i = 0; i < s->rank; i++)
      od[i] = i == dim && off ? LLVMBuildAdd(w->b, d[i], lower_i64c(w, off), "") : d[i];
    lower_store_elem(w, v, lower_out_arg(w), lower_linear_index(w, &op->out, od), op->out.dtype);
    lower_loops_close(w, l, s->rank);
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
  lower_loops_open(w, l, su, "u", d);
  ix xu = lower_ix_dims(su, d);
  LLVMValueRef v = lower_operand_at(w, root, 1, &xu, "update");
  for (int i = 0; i < su->rank; i++)
    od[i] = LLVMBuildAdd(w->b, start_of(w, i, op->out.dim[i], su->dim[i]), d[i], "");
  lower_store_elem(w, v, lower_out_arg(w), lower_linear_index(w, &op->out, od), op->out.dtype);
  lower_loops_close(w, l, su->rank);
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
    lower_uncapped(w, w->k->n_outside);
  }
  graph_dtype dt = op->out.dtype, adt = is_float(dt) ? lower_acc_dtype(dt) : dt;
  loop ln, lj;
  lower_loop_open(w, &ln, nidx, "n");
  ix xi = lower_ix_lin(si, ln.iv);
  LLVMValueRef row = lower_clamp_index(
      w, lower_as_index(w, lower_operand_at(w, root, 1, &xi, "index"), si->dtype), rows - 1);
  lower_loop_open(w, &lj, rs, "j");
  ix xu = lower_ix_lin(
      su, LLVMBuildAdd(w->b, LLVMBuildMul(w->b, ln.iv, lower_i64c(w, rs), ""), lj.iv, ""));
  LLVMValueRef u = lower_convert_value(w, lower_operand_at(w, root, 2, &xu, "update"), dt, adt);
  LLVMValueRef pos =
      LLVMBuildAdd(w->b, LLVMBuildMul(w->b, row, lower_i64c(w, rs), ""), lj.iv, "pos");
  LLVMValueRef cur =
      lower_convert_value(w, lower_load_elem(w, lower_out_arg(w), pos, dt, "cur"), dt, adt);
  LLVMValueRef sum = lower_flop(w,
                                is_float(adt) ? LLVMBuildFAdd(w->b, cur, u, op->name)
                                              : LLVMBuildAdd(w->b, cur, u, op->name),
                                dt);
  lower_store_elem(w, lower_convert_value(w, sum, adt, dt), lower_out_arg(w), pos, dt);
  lower_loop_close(w, &lj);
  lower_loop_close(w, &ln);
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
    if (t >= 0 && k->single) lower_uncapped(w, t);
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
    lower_loop_open(w, &lf, graph_elements(&op->out), "i");
    o = lower_ix_lin(&op->out, lf.iv);
  } else {
    lower_loops_open(w, l, &op->out, "o", d);
    o = lower_ix_dims(&op->out, d);
  }
  LLVMValueRef v = emit_op(w, root, &o);
  lower_store_elem(w, v, lower_out_arg(w), lower_get_lin(w, &o), op->out.dtype);
  if (flat) lower_loop_close(w, &lf);
  else lower_loops_close(w, l, op->out.rank);
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
    lower_set_err(err, n, "out of memory");
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
        lower_set_err(err, n, "%s: more than %d inputs to one kernel", root->name, k->n_outside);
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
  if (lower_begin_fn(&w, m, k, name, bufs, k->n_outside + 1, flop_dtype(g, root), err, n) == 0) {
    lower_root(&w, ops[n_ops - 1]);
    f = lower_end_fn(&w);
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
    lower_set_err(err, n, "%s: lower_broadcast takes a floating-point broadcast", op->name);
    return -1;
  }
  return lower_op(m, g, id, err, n);
}

int lower_fused(lower_module *m, const graph *g, const int *ops, int n_ops, char *err,
                size_t n) {
  if (n_ops < 1 || n_ops > 1024) {
    lower_set_err(err, n, "a fused kernel of %d ops: expected 1 to 1024", n_ops);
    return -1;
  }
  for (int i = 0; i < n_ops; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    if (!op) {
      lower_set_err(err, n, "a fused kernel names op %d, which does not exist", ops[i]);
      return -1;
    }
    if (!lower_supported(g, ops[i], err, n)) return -1;
    if (i > 0 && ops[i - 1] >= ops[i]) {
      lower_set_err(err, n, "%s: a fused kernel's ops must be in graph order, each once", op->name);
      return -1;
    }
  }
  for (int i = 0; i < n_ops - 1; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    if (!computable(op->kind)) {
      lower_set_err(err, n,
                    "%s: %s %s is computed only as a kernel's root (the last op), not inside "
                    "it",
                    op->name, str_article(graph_op_name(op->kind)), graph_op_name(op->kind));
      return -1;
    }
    bool used = false; /* by a later member: else its value would be lost */
    for (int i2 = i + 1; i2 < n_ops && !used; i2++) {
      const graph_op *o2 = graph_get(g, ops[i2]);
      for (int j = 0; j < o2->n_in; j++) used |= o2->in[j] == ops[i];
    }
    if (!used) {
      lower_set_err(err, n,
                    "%s: no later op of the kernel reads it (a kernel has one output, its "
                    "last op)",
                    op->name);
      return -1;
    }
  }
  char fname[272];
  snprintf(fname, sizeof fname, "fusion.%s", graph_get(g, ops[n_ops - 1])->name);
  return lower_kernel(m, g, ops, n_ops, false, fname, err, n);
}

