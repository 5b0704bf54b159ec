/*
** test_lower_ops.c -- data movement, integer and predicate ops,
** convolution: the IR count equals the formula, and the JIT'd kernel the
** C reference.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
#include "../sim/lower.h"
#include "lower_check.h"

static const graph_dtype ALL_DT[] = {GDT_S8, GDT_U8, GDT_S32, GDT_U32, GDT_S64,
                                     GDT_BF16, GDT_F16, GDT_F32, GDT_F64};
static const graph_dtype INT_DT[] = {GDT_S8, GDT_U8, GDT_S32, GDT_U32, GDT_S64};

Test(lower, data_movement_matches_c_reference_in_every_dtype) {
  srand(3);
  for (size_t d = 0; d < NELEM(ALL_DT); d++) {
    graph_dtype dt = ALL_DT[d];
    const char *dn = graph_dtype_name(dt);
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, 2, 3, 4), 0);
    int v = graph_parameter(g, "v", SHAPE(dt, 3), 0);
    int a = graph_parameter(g, "a", SHAPE(dt, 5, 6), 0);
    int b = graph_parameter(g, "b", SHAPE(dt, 5, 2), 0);
    int tr = graph_transpose(g, x, graph_dims_of(3, 2, 0, 1)); /* [4, 2, 3] */
    int bc = graph_broadcast(g, v, SHAPE(dt, 2, 3, 4), graph_dims_of(1, 1));
    int sl = graph_slice(g, a, (int64_t[]){1, 0}, (int64_t[]){5, 6}, (int64_t[]){2, 3}); /* [2, 2] */
    int cat[2] = {a, b};
    int cc = graph_concat(g, cat, 2, 1); /* [5, 8] */
    int pd = graph_pad(g, b, (int64_t[]){1, 0}, (int64_t[]){0, 2}, (int64_t[]){1, 0}); /* [10, 4] */
    int rs = graph_reshape(g, a, SHAPE(dt, 3, 10));
    cr_assert(graph_ok(g), "%s", dn);
    uint64_t xb[24], vb[3], ab[30], bb[10], out[64];
    fill(xb, dt, 24), fill(vb, dt, 3), fill(ab, dt, 30), fill(bb, dt, 10);

    jitted j = jit_op(g, tr);
    ((fn1)j.f)(xb, out);
    for (int i = 0; i < 4; i++)
      for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
          cr_assert_eq(get(out, dt, (i * 2 + p) * 3 + q), get(xb, dt, (p * 3 + q) * 4 + i), "%s transpose", dn);
    jit_done(&j);

    j = jit_op(g, bc);
    ((fn1)j.f)(vb, out);
    for (int e = 0; e < 24; e++) cr_assert_eq(get(out, dt, e), get(vb, dt, e / 4 % 3), "%s broadcast", dn);
    jit_done(&j);

    j = jit_op(g, sl);
    ((fn1)j.f)(ab, out);
    for (int p = 0; p < 2; p++)
      for (int q = 0; q < 2; q++)
        cr_assert_eq(get(out, dt, p * 2 + q), get(ab, dt, (1 + 2 * p) * 6 + 3 * q), "%s slice", dn);
    jit_done(&j);

    j = jit_op(g, cc);
    ((fn2)j.f)(ab, bb, out);
    for (int p = 0; p < 5; p++)
      for (int q = 0; q < 8; q++)
        cr_assert_eq(get(out, dt, p * 8 + q), q < 6 ? get(ab, dt, p * 6 + q) : get(bb, dt, p * 2 + q - 6),
                     "%s concatenate [%d,%d]", dn, p, q);
    jit_done(&j);

    /* rows: 1 low, interior 1 between the 5 -> 1 + 9 = 10; columns: 2 high */
    j = jit_op(g, pd);
    ((fn1)j.f)(bb, out);
    for (int p = 0; p < 10; p++)
      for (int q = 0; q < 4; q++) {
        bool from = p >= 1 && (p - 1) % 2 == 0 && q < 2;
        double want = from ? get(bb, dt, (p - 1) / 2 * 2 + q) : 0;
        cr_assert_eq(get(out, dt, p * 4 + q), want, "%s pad [%d,%d]", dn, p, q);
      }
    jit_done(&j);

    /* a reshape is a bitcast: no loads, no stores, an empty function */
    cr_assert_float_eq(check_op(g, rs), 0, 1e-9);
    graph_free(g);
  }
}

Test(lower, dynamic_slices_clamp_their_starts_and_update_in_place) {
  srand(4);
  for (size_t d = 0; d < NELEM(ALL_DT); d++) {
    graph_dtype dt = ALL_DT[d];
    graph *g = graph_new("t");
    int a = graph_parameter(g, "a", SHAPE(dt, 5, 6), 0);
    int u = graph_parameter(g, "u", SHAPE(dt, 2, 3), 0);
    int ds = graph_dynamic_slice(g, a, SHAPE(dt, 2, 3));
    int dus = graph_dynamic_update_slice(g, a, u);
    cr_assert(graph_ok(g));
    uint64_t ab[30], ub[6], out[30];
    fill(ab, dt, 30), fill(ub, dt, 6);
    jitted j = jit_op(g, ds);
    /* start (1, 4): the column start clamps to 6 - 3 = 3 */
    ((void (*)(void *, void *, int64_t, int64_t))j.f)(ab, out, 1, 4);
    for (int p = 0; p < 2; p++)
      for (int q = 0; q < 3; q++)
        cr_assert_eq(get(out, dt, p * 3 + q), get(ab, dt, (1 + p) * 6 + 3 + q), "%s", graph_dtype_name(dt));
    jit_done(&j);
    j = jit_op(g, dus);
    memcpy(out, ab, sizeof ab); /* in place: the result holds the operand on entry */
    ((void (*)(void *, void *, void *, int64_t, int64_t))j.f)(ab, ub, out, 9, -2); /* -> (3, 0) */
    for (int p = 0; p < 5; p++)
      for (int q = 0; q < 6; q++) {
        bool in = p >= 3 && q < 3;
        double want = in ? get(ub, dt, (p - 3) * 3 + q) : get(ab, dt, p * 6 + q);
        cr_assert_eq(get(out, dt, p * 6 + q), want, "%s dus [%d,%d]", graph_dtype_name(dt), p, q);
      }
    jit_done(&j);
    graph_free(g);
  }
}

Test(lower, gathers_and_scatter_add_match_c_reference) {
  srand(5);
  for (size_t d = 0; d < NELEM(ALL_DT); d++) {
    graph_dtype dt = ALL_DT[d];
    const char *dn = graph_dtype_name(dt);
    graph *g = graph_new("t");
    int t = graph_parameter(g, "t", SHAPE(dt, 5, 3), 0);
    int i4 = graph_parameter(g, "i", SHAPE(GDT_S32, 4), 0);
    int emb = graph_gather(g, t, i4, NULL); /* [4, 3]: rows of t */
    int t2 = graph_parameter(g, "t2", SHAPE(dt, 4, 5), 0);
    graph_shape s4 = SHAPE(dt, 4);
    int along = graph_gather(g, t2, i4, &s4); /* t2[n, i[n]] */
    graph_shape s34 = SHAPE(dt, 3, 4);
    int tt = graph_parameter(g, "tt", SHAPE(dt, 3, 5), 0);
    int cols = graph_gather(g, tt, i4, &s34); /* tt[b, i[k]] */
    int upd = graph_parameter(g, "u", SHAPE(dt, 4, 3), 0);
    int sc = graph_scatter(g, t, i4, upd);
    cr_assert(graph_ok(g), "%s", dn);
    /* the formula's bytes: the rows fetched, not the table */
    cr_assert_float_eq(graph_op_cost(g, emb).bytes_read, 12.0 * graph_dtype_bits(dt) / 8 + 16, 1e-9);
    uint64_t tb[15], t2b[20], ttb[15], ub[12], out[15];
    int32_t ib[4] = {4, 0, 4, 2}; /* a repeated row: scatter-add adds both */
    fill(tb, dt, 15), fill(t2b, dt, 20), fill(ttb, dt, 15), fill(ub, dt, 12);
    jitted j = jit_op(g, emb);
    ((fn2)j.f)(tb, ib, out);
    for (int n = 0; n < 4; n++)
      for (int h = 0; h < 3; h++) cr_assert_eq(get(out, dt, n * 3 + h), get(tb, dt, ib[n] * 3 + h), "%s", dn);
    jit_done(&j);
    j = jit_op(g, along);
    ((fn2)j.f)(t2b, ib, out);
    for (int n = 0; n < 4; n++) cr_assert_eq(get(out, dt, n), get(t2b, dt, n * 5 + ib[n]), "%s along", dn);
    jit_done(&j);
    j = jit_op(g, cols);
    ((fn2)j.f)(ttb, ib, out);
    for (int b2 = 0; b2 < 3; b2++)
      for (int k = 0; k < 4; k++)
        cr_assert_eq(get(out, dt, b2 * 4 + k), get(ttb, dt, b2 * 5 + ib[k]), "%s columns", dn);
    jit_done(&j);
    j = jit_op(g, sc);
    memcpy(out, tb, sizeof tb);
    ((fn3)j.f)(tb, ib, ub, out);
    for (int r = 0; r < 5; r++)
      for (int h = 0; h < 3; h++) {
        double want = get(tb, dt, r * 3 + h), mag = fabs(want);
        for (int n = 0; n < 4; n++)
          if (ib[n] == r) want += get(ub, dt, n * 3 + h), mag += fabs(get(ub, dt, n * 3 + h));
        if (dt == GDT_S8) want = (int8_t)(int)want; /* wraps, as the kernel's i8 add does */
        if (dt == GDT_U8) want = (uint8_t)(int)want;
        cr_assert(fabs(get(out, dt, r * 3 + h) - want) <= tolerance(dt) * mag, "%s scatter [%d,%d]: %g vs %g",
                  dn, r, h, get(out, dt, r * 3 + h), want);
      }
    jit_done(&j);
    graph_free(g);
  }
}

static double ref_int(graph_op_kind k, double a, double b, graph_dtype dt) {
  int64_t x = (int64_t)a, y = (int64_t)b, r;
  switch (k) {
  case GOP_ADD: r = x + y; break;
  case GOP_SUB: r = x - y; break;
  case GOP_MUL: r = x * y; break;
  case GOP_DIV: r = y == 0 ? -1 : x / y; break;
  case GOP_MAX: r = x > y ? x : y; break;
  case GOP_MIN: r = x < y ? x : y; break;
  case GOP_AND: r = x & y; break;
  case GOP_OR: r = x | y; break;
  case GOP_NEG: r = -x; break;
  case GOP_ABS: r = x < 0 ? -x : x; break;
  case GOP_NOT: r = ~x; break;
  default: cr_assert_fail("no reference for %s", graph_op_name(k)); return 0;
  }
  switch (dt) { /* the dtype's wrap-around */
  case GDT_S8: return (int8_t)r;
  case GDT_U8: return (uint8_t)r;
  case GDT_S32: return (int32_t)r;
  case GDT_U32: return (uint32_t)r;
  default: return (double)r;
  }
}

Test(lower, integer_and_predicate_ops_count_in_their_dtype_and_match_c) {
  static const graph_op_kind bin[] = {GOP_ADD, GOP_SUB, GOP_MUL, GOP_DIV, GOP_MAX,
                                      GOP_MIN, GOP_AND, GOP_OR};
  static const graph_op_kind un[] = {GOP_NEG, GOP_ABS, GOP_NOT};
  enum { N = 19 };
  srand(6);
  for (size_t d = 0; d < NELEM(INT_DT); d++) {
    graph_dtype dt = INT_DT[d];
    const char *dn = graph_dtype_name(dt);
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, N), 0), y = graph_parameter(g, "y", SHAPE(dt, N), 0);
    uint64_t xb[N], yb[N], out[N];
    fill(xb, dt, N), fill(yb, dt, N);
    put(yb, dt, 0, 0); /* x / 0 is -1, as XLA defines it */
    for (size_t k = 0; k < NELEM(bin) + NELEM(un); k++) {
      bool b2 = k < NELEM(bin);
      graph_op_kind kind = b2 ? bin[k] : un[k - NELEM(bin)];
      if (kind == GOP_NEG && (dt == GDT_U8 || dt == GDT_U32)) continue;
      int id = b2 ? graph_binary(g, kind, x, y) : graph_unary(g, kind, x);
      /* one instruction per element, counted in the integer dtype */
      cr_assert_float_eq(graph_op_cost(g, id).flops[dt], N, 1e-9);
      jitted j = jit_op(g, id);
      if (b2) ((fn2)j.f)(xb, yb, out);
      else ((fn1)j.f)(xb, out);
      for (int e = 0; e < N; e++) {
        double want = ref_int(kind, get(xb, dt, e), get(yb, dt, e), dt);
        cr_assert_eq(get(out, dt, e), want, "%s %s(%g, %g): %g", dn, graph_op_name(kind),
                     get(xb, dt, e), get(yb, dt, e), get(out, dt, e));
      }
      jit_done(&j);
    }
    graph_free(g);
  }
}

Test(lower, compare_select_convert_and_iota_in_every_dtype) {
  enum { N = 21 };
  srand(8);
  for (size_t d = 0; d < NELEM(ALL_DT); d++) {
    graph_dtype dt = ALL_DT[d];
    const char *dn = graph_dtype_name(dt);
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, N), 0), y = graph_parameter(g, "y", SHAPE(dt, N), 0);
    int p = graph_parameter(g, "p", SHAPE(GDT_PRED, N), 0);
    int cmp = graph_binary(g, GOP_COMPARE, x, y);
    int sel = graph_select(g, p, x, y);
    int io = graph_iota(g, SHAPE(dt, 3, 4));
    cr_assert(graph_ok(g));
    uint64_t xb[N], yb[N], pb[N], out[N];
    fill(xb, dt, N), fill(yb, dt, N), fill(pb, GDT_PRED, N);
    put(yb, dt, 1, get(xb, dt, 1)); /* equal operands: not less-than */
    /* compare counts its one flop in the operands' dtype, select in its result's */
    cr_assert_float_eq(graph_op_cost(g, cmp).flops[dt], N, 1e-9);
    jitted j = jit_op(g, cmp);
    ((fn2)j.f)(xb, yb, out);
    for (int e = 0; e < N; e++)
      cr_assert_eq(get(out, GDT_PRED, e), get(xb, dt, e) < get(yb, dt, e), "%s compare %d", dn, e);
    jit_done(&j);
    j = jit_op(g, sel);
    ((fn3)j.f)(pb, xb, yb, out);
    for (int e = 0; e < N; e++)
      cr_assert_eq(get(out, dt, e), get(pb, GDT_PRED, e) ? get(xb, dt, e) : get(yb, dt, e), "%s select", dn);
    jit_done(&j);
    j = jit_op(g, io);
    ((void (*)(void *))j.f)(out);
    for (int e = 0; e < 12; e++) cr_assert_eq(get(out, dt, e), e / 4, "%s iota", dn); /* along dim 0 */
    jit_done(&j);
    /* convert to every other dtype and to pred */
    for (size_t d2 = 0; d2 <= NELEM(ALL_DT); d2++) {
      graph_dtype to = d2 < NELEM(ALL_DT) ? ALL_DT[d2] : GDT_PRED;
      int cv = graph_convert(g, x, to);
      j = jit_op(g, cv);
      ((fn1)j.f)(xb, out);
      for (int e = 0; e < N; e++) {
        double v = get(xb, dt, e), want;
        if (to == GDT_PRED) want = v != 0;
        else if (graph_dtype_is_float(to)) want = v;            /* k/4 and small ints are exact */
        else if (to == GDT_U8 || to == GDT_U32) want = v < 0 ? (graph_dtype_is_float(dt) ? 0 : get((uint64_t[]){0}, to, 0) + (to == GDT_U8 ? (uint8_t)(int64_t)v : (uint32_t)(int64_t)v)) : trunc(v);
        else want = trunc(v);
        cr_assert_eq(get(out, to, e), want, "convert %s -> %s of %g: %g", dn, graph_dtype_name(to), v,
                     get(out, to, e));
      }
      jit_done(&j);
    }
    graph_free(g);
  }
}

/* y[n, oh, ow, co] = sum over kh, kw, ci of x[n, oh*s + kh - p, ...] k[kh, kw, ci, co] */
Test(lower, conv2d_nhwc_hwio_with_stride_padding_and_groups_matches_c) {
  static const graph_dtype dts[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64, GDT_S8};
  srand(9);
  for (size_t d = 0; d < NELEM(dts); d++)
    for (int fg = 1; fg <= 3; fg += 2) {
      graph_dtype dt = dts[d], odt = dt == GDT_S8 ? GDT_S32 : dt;
      graph *g = graph_new("t");
      int x = graph_parameter(g, "x", SHAPE(dt, 2, 5, 6, 3), 0);
      int k = graph_parameter(g, "k", SHAPE(dt, 3, 2, 3 / fg, 6), 0);
      graph_conv_attrs a = {.spatial = 2, .in_batch = 0, .in_spatial = {1, 2}, .in_feature = 3,
                            .k_spatial = {0, 1}, .k_in = 2, .k_out = 3, .out_batch = 0,
                            .out_spatial = {1, 2}, .out_feature = 3, .stride = {2, 1},
                            .pad_lo = {1, 0}, .pad_hi = {1, 1}, .feature_groups = fg};
      int y = graph_conv(g, x, k, &a, odt);
      cr_assert(graph_ok(g));
      const graph_shape *so = &graph_get(g, y)->out; /* [2, 3, 6, 6] */
      cr_assert_eq(so->dim[1], 3);
      cr_assert_eq(so->dim[2], 6);
      uint64_t xb[180], kb[108], out[216];
      fill(xb, dt, 180), fill(kb, dt, 18 * 6 / fg);
      jitted j = jit_op(g, y);
      ((fn2)j.f)(xb, kb, out);
      int cin = 3 / fg, cog = 6 / fg;
      for (int n = 0; n < 2; n++)
        for (int oh = 0; oh < 3; oh++)
          for (int ow = 0; ow < 6; ow++)
            for (int co = 0; co < 6; co++) {
              double want = 0, mag = 0;
              for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 2; kw++)
                  for (int ci = 0; ci < cin; ci++) {
                    int ih = oh * 2 + kh - 1, iw = ow + kw;
                    if (ih < 0 || ih >= 5 || iw >= 6) continue;
                    double pv = get(xb, dt, ((n * 5 + ih) * 6 + iw) * 3 + co / cog * cin + ci) *
                                get(kb, dt, ((kh * 2 + kw) * cin + ci) * 6 + co);
                    want += pv, mag += fabs(pv);
                  }
              double got = get(out, odt, ((n * 3 + oh) * 6 + ow) * 6 + co);
              cr_assert(fabs(got - want) <= tolerance(odt) * (mag + 1e-3), "%s fg %d [%d,%d,%d,%d]: %g vs %g",
                        graph_dtype_name(dt), fg, n, oh, ow, co, got, want);
            }
      jit_done(&j);
      graph_free(g);
    }
}

Test(lower, int8_dot_accumulates_in_s32_and_integer_reduce) {
  graph *g = graph_new("t");
  int a = graph_parameter(g, "a", SHAPE(GDT_S8, 3, 40), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_S8, 40, 2), 0);
  int d = graph_dot(g, a, b, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, 1),
                    graph_dims_of(1, 0), GDT_S32);
  int s = graph_parameter(g, "s", SHAPE(GDT_S32, 3, 7), 0);
  int r = graph_reduce(g, s, graph_dims_of(1, 1), GRAPH_RED_ADD);
  int mx = graph_reduce(g, s, graph_dims_of(1, 0), GRAPH_RED_MAX);
  cr_assert(graph_ok(g));
  /* 2 x 6 outputs x 40: counted as s8 operations */
  cr_assert_float_eq(graph_op_cost(g, d).flops[GDT_S8], 480, 1e-9);
  int8_t ab[120], bb[80];
  int32_t out[6], sb[21], ro[7];
  for (int i = 0; i < 120; i++) ab[i] = (int8_t)(rand() % 255 - 127);
  for (int i = 0; i < 80; i++) bb[i] = (int8_t)(rand() % 255 - 127);
  for (int i = 0; i < 21; i++) sb[i] = rand() % 2001 - 1000;
  jitted j = jit_op(g, d);
  ((fn2)j.f)(ab, bb, out);
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 2; c++) {
      int32_t want = 0; /* 40 x 127^2 overflows an int8 or int16 sum, not an int32 one */
      for (int k = 0; k < 40; k++) want += ab[i * 40 + k] * bb[k * 2 + c];
      cr_assert_eq(out[i * 2 + c], want);
    }
  jit_done(&j);
  j = jit_op(g, r);
  ((fn1)j.f)(sb, ro);
  for (int i = 0; i < 3; i++) {
    int32_t want = 0;
    for (int k = 0; k < 7; k++) want += sb[i * 7 + k];
    cr_assert_eq(ro[i], want);
  }
  jit_done(&j);
  j = jit_op(g, mx);
  ((fn1)j.f)(sb, ro);
  for (int k = 0; k < 7; k++) {
    int32_t want = sb[k];
    for (int i = 1; i < 3; i++) want = sb[i * 7 + k] > want ? sb[i * 7 + k] : want;
    cr_assert_eq(ro[k], want);
  }
  jit_done(&j);
  graph_free(g);
}
