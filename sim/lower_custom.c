/*
** lower_custom.c -- the custom-calls tpusim's own builders declare, lowered
** by name: the convolution gradients autodiff builds (input and filter),
** gbdt's prefix sum and row partition.
**
** Separate from the per-op IR (lower_ops.c): each is a whole loop nest of
** its own, not a value at one element.
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
  LLVMBasicBlockRef then = lower_block(w, tn);
  cb->skip = lower_block(w, sn);
  lower_mark(w, LLVMBuildCondBr(w->b, cond, then, cb->skip), w->mult);
  LLVMPositionBuilderAtEnd(w->b, then);
  cb->saved_mult = w->mult;
  w->mult = then_count;
}

static void cond_close(writer *w, cond_block *cb) {
  lower_mark(w, LLVMBuildBr(w->b, cb->skip), w->mult);
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
  LLVMValueRef prod =
      lower_flop(w, fl ? LLVMBuildFMul(w->b, a, b, "prod") : LLVMBuildMul(w->b, a, b, "prod"), dt);
  LLVMValueRef nx = lower_flop(w,
                               fl ? LLVMBuildFAdd(w->b, acc, prod, "acc.next")
                                  : LLVMBuildAdd(w->b, acc, prod, "acc.next"),
                               dt);
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
  graph_dtype dt = sy->dtype, adt = lower_acc_dtype(dt);
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
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
    lower_loop_open(w, &l[i], s >= 0 ? hi[s] - lo[s] : sx->dim[i], nm);
    d[i] = l[i].iv;
    if (s >= 0) q[s] = LLVMBuildAdd(w->b, l[i].iv, lower_i64c(w, lo[s]), "q");
    else base *= sx->dim[i];
  }
  LLVMBuildStore(w->b, lower_zero_of(ct), acc_slot);
  LLVMValueRef f = d[c->in_feature];
  LLVMValueRef grp = LLVMBuildUDiv(w->b, f, lower_i64c(w, cin), "group");
  LLVMValueRef ci = LLVMBuildURem(w->b, f, lower_i64c(w, cin), "ci");
  loop lw[3];
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", s);
    lower_loop_open(w, &lw[s], sk->dim[c->k_spatial[s]], nm);
  }
  LLVMValueRef hit = true_i1(w), yi[GRAPH_MAX_RANK], ki[GRAPH_MAX_RANK];
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = or1(c->stride[s]), rd = or1(c->rhs_dilation[s]);
    LLVMValueRef o = LLVMBuildSub(w->b, LLVMBuildAdd(w->b, q[s], lower_i64c(w, c->pad_lo[s]), ""),
                                  LLVMBuildMul(w->b, lw[s].iv, lower_i64c(w, rd), ""), "");
    LLVMValueRef os = LLVMBuildSDiv(w->b, o, lower_i64c(w, st), "");
    hit = all_of(w, hit, LLVMBuildICmp(w->b, LLVMIntSGE, o, lower_i64c(w, 0), ""));
    hit = all_of(w, hit,
                 LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, o, lower_i64c(w, st), ""),
                               lower_i64c(w, 0), ""));
    hit = all_of(
        w, hit, LLVMBuildICmp(w->b, LLVMIntSLT, os, lower_i64c(w, sy->dim[c->out_spatial[s]]), ""));
    yi[c->out_spatial[s]] = os;
    ki[c->k_spatial[s]] = lw[s].iv;
  }
  cond_block tap;
  cond_open(w, &tap, hit, base * taps, "tap");
  loop lo_;
  lower_loop_open(w, &lo_, cout_g, "co");
  LLVMValueRef fo =
      LLVMBuildAdd(w->b, LLVMBuildMul(w->b, grp, lower_i64c(w, cout_g), ""), lo_.iv, "fo");
  yi[c->out_batch] = d[c->in_batch];
  yi[c->out_feature] = fo;
  ki[c->k_in] = ci;
  ki[c->k_out] = fo;
  ix xy = lower_ix_dims(sy, yi), xk = lower_ix_dims(sk, ki);
  LLVMValueRef yv = lower_convert_value(w, lower_operand_at(w, root, 0, &xy, "dy"), dt, adt);
  LLVMValueRef kv = lower_convert_value(w, lower_operand_at(w, root, 1, &xk, "k"), sk->dtype, adt);
  mul_add(w, acc_slot, ct, yv, kv, adt, dt);
  lower_loop_close(w, &lo_);
  cond_close(w, &tap);
  for (int s = c->spatial - 1; s >= 0; s--) lower_loop_close(w, &lw[s]);
  /* store only where q is a real input element */
  LLVMValueRef is_real = true_i1(w), xi[GRAPH_MAX_RANK];
  for (int i = 0; i < sx->rank; i++) xi[i] = d[i];
  for (int s = 0; s < c->spatial; s++) {
    int64_t ld = or1(c->lhs_dilation[s]);
    LLVMValueRef p = LLVMBuildSDiv(w->b, q[s], lower_i64c(w, ld), "");
    is_real = all_of(w, is_real, LLVMBuildICmp(w->b, LLVMIntSGE, q[s], lower_i64c(w, 0), ""));
    is_real =
        all_of(w, is_real,
               LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, q[s], lower_i64c(w, ld), ""),
                             lower_i64c(w, 0), ""));
    is_real =
        all_of(w, is_real,
               LLVMBuildICmp(w->b, LLVMIntSLT, p, lower_i64c(w, sx->dim[c->in_spatial[s]]), ""));
    xi[c->in_spatial[s]] = p;
  }
  cond_block st;
  cond_open(w, &st, is_real, base * real, "real");
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  lower_store_elem(w, lower_named(lower_convert_value(w, sum, adt, sx->dtype), op, NULL, 0),
                   lower_out_arg(w), lower_linear_index(w, sx, xi), sx->dtype);
  cond_close(w, &st);
  lower_loops_close(w, l, sx->rank);
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
  graph_dtype dt = sx->dtype, adt = lower_acc_dtype(dt);
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
  int64_t fg = or1(c->feature_groups), cin = sk->dim[c->k_in], cout_g = sk->dim[c->k_out] / fg;
  loop l[GRAPH_MAX_RANK];
  LLVMValueRef d[GRAPH_MAX_RANK];
  lower_loops_open(w, l, sk, "o", d);
  LLVMBuildStore(w->b, lower_zero_of(ct), acc_slot);
  LLVMValueRef fo = d[c->k_out];
  LLVMValueRef fin =
      LLVMBuildAdd(w->b,
                   LLVMBuildMul(w->b, LLVMBuildUDiv(w->b, fo, lower_i64c(w, cout_g), "group"),
                                lower_i64c(w, cin), ""),
                   d[c->k_in], "fi");
  loop lb, lp[3];
  lower_loop_open(w, &lb, sy->dim[c->out_batch], "b");
  for (int s = 0; s < c->spatial; s++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", s);
    lower_loop_open(w, &lp[s], sy->dim[c->out_spatial[s]], nm);
  }
  LLVMValueRef valid = true_i1(w), xi[GRAPH_MAX_RANK], yi[GRAPH_MAX_RANK];
  for (int s = 0; s < c->spatial; s++) {
    int64_t st = or1(c->stride[s]), ld = or1(c->lhs_dilation[s]), rd = or1(c->rhs_dilation[s]),
            n = sx->dim[c->in_spatial[s]];
    LLVMValueRef pos =
        LLVMBuildAdd(w->b, LLVMBuildMul(w->b, lp[s].iv, lower_i64c(w, st), ""),
                     LLVMBuildMul(w->b, d[c->k_spatial[s]], lower_i64c(w, rd), ""), "");
    pos = LLVMBuildSub(w->b, pos, lower_i64c(w, c->pad_lo[s]), "");
    LLVMValueRef p = ld > 1 ? LLVMBuildSDiv(w->b, pos, lower_i64c(w, ld), "") : pos;
    valid = all_of(w, valid, LLVMBuildICmp(w->b, LLVMIntSGE, pos, lower_i64c(w, 0), ""));
    valid = all_of(w, valid, LLVMBuildICmp(w->b, LLVMIntSLT, p, lower_i64c(w, n), ""));
    if (ld > 1)
      valid = all_of(w, valid,
                     LLVMBuildICmp(w->b, LLVMIntEQ, LLVMBuildSRem(w->b, pos, lower_i64c(w, ld), ""),
                                   lower_i64c(w, 0), ""));
    xi[c->in_spatial[s]] = lower_clamp_index(w, p, n - 1);
    yi[c->out_spatial[s]] = lp[s].iv;
  }
  xi[c->in_batch] = lb.iv;
  xi[c->in_feature] = fin;
  yi[c->out_batch] = lb.iv;
  yi[c->out_feature] = fo;
  ix xx = lower_ix_dims(sx, xi), xy = lower_ix_dims(sy, yi);
  LLVMValueRef xv = lower_convert_value(w, lower_operand_at(w, root, 0, &xx, "x"), dt, adt);
  LLVMValueRef yv = lower_convert_value(w, lower_operand_at(w, root, 1, &xy, "dy"), sy->dtype, adt);
  xv = LLVMBuildSelect(w->b, valid, xv, lower_zero_of(ct), "x.or0");
  mul_add(w, acc_slot, ct, xv, yv, adt, dt);
  for (int s = c->spatial - 1; s >= 0; s--) lower_loop_close(w, &lp[s]);
  lower_loop_close(w, &lb);
  LLVMValueRef sum = LLVMBuildLoad2(w->b, ct, acc_slot, "sum");
  ix o = lower_ix_dims(sk, d);
  lower_store_elem(w, lower_named(lower_convert_value(w, sum, adt, sk->dtype), op, NULL, 0),
                   lower_out_arg(w), lower_get_lin(w, &o), sk->dtype);
  lower_loops_close(w, l, sk->rank);
}

/* prefix-sum: the running sum along one axis (lower_prefix_axis), each line
** starting from its first element, so a line of len elements takes len - 1
** adds -- the declared cost; bf16 and fp16 accumulate in f32, integers in
** their own width. Each element is read and written once. */
static void lower_prefix_sum(writer *w, int root, const graph_op *op) {
  const graph_shape *sx = &graph_get(w->k->g, op->in[0])->out;
  int ax = lower_prefix_axis(op, sx);
  graph_dtype dt = sx->dtype, adt = is_float(dt) ? lower_acc_dtype(dt) : dt;
  LLVMTypeRef ct = lower_compute_type(w->m->ctx, adt);
  LLVMValueRef acc_slot = lower_entry_alloca(w, ct, "acc.slot");
  loop l[GRAPH_MAX_RANK], la;
  LLVMValueRef d[GRAPH_MAX_RANK];
  for (int i = 0; i < sx->rank; i++) {
    if (i == ax) continue;
    char nm[16];
    snprintf(nm, sizeof nm, "o%d", i);
    lower_loop_open(w, &l[i], sx->dim[i], nm);
    d[i] = l[i].iv;
  }
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) lower_loop_from(w, &la, 1, sx->dim[ax], "scan");
    d[ax] = pass ? la.iv : lower_i64c(w, 0);
    ix xi = lower_ix_dims(sx, d);
    LLVMValueRef lin = lower_get_lin(w, &xi);
    LLVMValueRef v = lower_convert_value(w, lower_operand_at(w, root, 0, &xi, "x"), dt, adt);
    if (pass == 1) {
      LLVMValueRef acc = LLVMBuildLoad2(w->b, ct, acc_slot, "acc");
      v = lower_combine(w, GRAPH_RED_ADD, acc, v, adt, dt);
    }
    LLVMBuildStore(w->b, v, acc_slot);
    lower_store_elem(w, lower_named(lower_convert_value(w, v, adt, op->out.dtype), op, NULL, 0),
                     lower_out_arg(w), lin, op->out.dtype);
    if (pass == 1) lower_loop_close(w, &la);
  }
  for (int i = sx->rank - 1; i >= 0; i--)
    if (i != ax) lower_loop_close(w, &l[i]);
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
  LLVMTypeRef ot = lower_compute_type(w->m->ctx, odt), xt = lower_compute_type(w->m->ctx, dt);
  int64_t R = sx->dim[0], M = op->out.dim[0];
  LLVMValueRef k_slot = lower_entry_alloca(w, w->i64, "kept.slot");
  LLVMValueRef last_slot =
      lower_entry_alloca(w, ot, "last.slot"); /* what slot M - 1 holds once full */
  LLVMValueRef none = LLVMConstInt(ot, (unsigned long long)-1, 1);
  loop lf, lr;
  lower_loop_open(w, &lf, M, "fill");
  lower_store_elem(w, none, lower_out_arg(w), lf.iv, odt);
  lower_loop_close(w, &lf);
  LLVMBuildStore(w->b, lower_i64c(w, 0), k_slot);
  LLVMBuildStore(w->b, none, last_slot);
  lower_loop_open(w, &lr, R, "row");
  ix xi = lower_ix_lin(sx, lr.iv);
  LLVMValueRef id = lower_operand_at(w, root, 0, &xi, "node");
  LLVMValueRef bit = LLVMBuildAnd(w->b, id, LLVMConstInt(xt, 1, 0), "");
  LLVMValueRef left =
      lower_flop(w, LLVMBuildICmp(w->b, LLVMIntEQ, bit, LLVMConstInt(xt, 0, 0), "left"), dt);
  LLVMValueRef k = LLVMBuildLoad2(w->b, w->i64, k_slot, "kept");
  LLVMValueRef last = LLVMBuildLoad2(w->b, ot, last_slot, "last");
  LLVMValueRef full = LLVMBuildICmp(w->b, LLVMIntUGE, k, lower_i64c(w, M), "full");
  LLVMValueRef row = LLVMBuildTrunc(w->b, lr.iv, ot, "");
  LLVMValueRef pos = LLVMBuildSelect(w->b, full, lower_i64c(w, M - 1), k, "slot");
  lower_store_elem(w, LLVMBuildSelect(w->b, full, last, row, ""), lower_out_arg(w), pos, odt);
  LLVMValueRef fills = all_of(w, left, LLVMBuildICmp(w->b, LLVMIntEQ, k, lower_i64c(w, M - 1), ""));
  LLVMBuildStore(w->b, LLVMBuildSelect(w->b, fills, row, last, ""), last_slot);
  LLVMValueRef inc = LLVMBuildZExt(w->b, all_of(w, left, LLVMBuildNot(w->b, full, "")), w->i64, "");
  LLVMBuildStore(w->b, LLVMBuildAdd(w->b, k, inc, ""), k_slot);
  lower_loop_close(w, &lr);
  LLVMValueRef k_end = LLVMBuildLoad2(w->b, w->i64, k_slot, "kept");
  LLVMValueRef last_end = LLVMBuildLoad2(w->b, ot, last_slot, "last");
  LLVMValueRef full_end = LLVMBuildICmp(w->b, LLVMIntUGE, k_end, lower_i64c(w, M), "");
  lower_store_elem(
      w, lower_named(LLVMBuildSelect(w->b, full_end, last_end, none, "end"), op, NULL, 0),
      lower_out_arg(w), LLVMBuildSelect(w->b, full_end, lower_i64c(w, M - 1), k_end, ""), odt);
}

void lower_custom(writer *w, int root, const graph_op *op) {
  switch (lower_custom_of(op)) {
  case CUS_CONV_INPUT: lower_conv_bwd_input(w, root, op); return;
  case CUS_CONV_FILTER: lower_conv_bwd_filter(w, root, op); return;
  case CUS_PREFIX_SUM: lower_prefix_sum(w, root, op); return;
  case CUS_ROW_PARTITION: lower_row_partition(w, root, op); return;
  case CUS_NONE: return; /* lower_supported refused it */
  }
}

