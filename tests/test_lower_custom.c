/*
** test_lower_custom.c -- the custom-calls tpusim's builders declare:
** lowered by name, checked against C; the ones without their semantics
** stay opaque.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
#include "../sim/lower.h"
#include "lower_check.h"

/* The convolution gradients autodiff builds (workloads/train.c), checked
** against the forward's definition run backwards in plain C: every
** (output position, tap, input feature) of the forward conv adds
** dy * k into dx and x * dy into dk. Stride (2, 1), rhs dilation (1, 2),
** padding on both sides, feature groups 1 and 3. */
Test(lower, conv_backward_input_and_filter_match_c) {
  static const graph_dtype dts[] = {GDT_BF16, GDT_F32, GDT_F64};
  srand(11);
  for (size_t d = 0; d < NELEM(dts); d++)
    for (int fg = 1; fg <= 3; fg += 2) {
      graph_dtype dt = dts[d];
      graph *g = graph_new("t");
      int x = graph_parameter(g, "x", SHAPE(dt, 2, 5, 6, 3), 0);
      int k = graph_parameter(g, "k", SHAPE(dt, 3, 2, 3 / fg, 6), 0);
      graph_conv_attrs a = {.spatial = 2, .in_batch = 0, .in_spatial = {1, 2}, .in_feature = 3,
                            .k_spatial = {0, 1}, .k_in = 2, .k_out = 3, .out_batch = 0,
                            .out_spatial = {1, 2}, .out_feature = 3, .stride = {2, 1},
                            .rhs_dilation = {1, 2}, .pad_lo = {1, 0}, .pad_hi = {1, 1},
                            .feature_groups = fg};
      int y = graph_conv(g, x, k, &a, dt);
      cr_assert(graph_ok(g));
      graph_shape sx = graph_get(g, x)->out, sk = graph_get(g, k)->out, sy = graph_get(g, y)->out;
      cr_assert_eq(sy.dim[1], 3); /* (5 + 2 - 3) / 2 + 1 */
      cr_assert_eq(sy.dim[2], 5); /* 6 + 1 - 3 + 1 */
      int dy = graph_parameter(g, "dy", sy, 0);
      graph_cost fwd = graph_op_cost(g, y);
      double flops = graph_cost_flops(&fwd), bytes = graph_bytes(&sx) + graph_bytes(&sk) + graph_bytes(&sy);
      int in_dy_k[2] = {dy, k}, in_x_dy[2] = {x, dy};
      int dxi = graph_custom(g, "conv-backward-input", sx, in_dy_k, 2, flops, 0, bytes);
      int dki = graph_custom(g, "conv-backward-filter", sk, in_x_dy, 2, flops, 0, bytes);
      graph_set_custom_conv(g, dxi, &a);
      graph_set_custom_conv(g, dki, &a);
      cr_assert(graph_ok(g));
      int cin = 3 / fg, cog = 6 / fg, nk = 3 * 2 * cin * 6;
      uint64_t xb[180], kb[108], yb[180], dxb[180], dkb[108];
      fill(xb, dt, 180), fill(kb, dt, nk), fill(yb, dt, 2 * 3 * 5 * 6);
      double want_dx[180] = {0}, mag_dx[180] = {0}, want_dk[108] = {0}, mag_dk[108] = {0};
      for (int n = 0; n < 2; n++)
        for (int oh = 0; oh < 3; oh++)
          for (int ow = 0; ow < 5; ow++)
            for (int co = 0; co < 6; co++)
              for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 2; kw++)
                  for (int ci = 0; ci < cin; ci++) {
                    int ih = oh * 2 + kh - 1, iw = ow + kw * 2;
                    if (ih < 0 || ih >= 5 || iw >= 6) continue;
                    int xi = ((n * 5 + ih) * 6 + iw) * 3 + co / cog * cin + ci;
                    int ki = ((kh * 2 + kw) * cin + ci) * 6 + co;
                    double yv = get(yb, dt, ((n * 3 + oh) * 5 + ow) * 6 + co);
                    double p = yv * get(kb, dt, ki), q = get(xb, dt, xi) * yv;
                    want_dx[xi] += p, mag_dx[xi] += fabs(p);
                    want_dk[ki] += q, mag_dk[ki] += fabs(q);
                  }
      jitted j = jit_op(g, dxi);
      ((fn2)j.f)(yb, kb, dxb);
      for (int i = 0; i < 180; i++)
        cr_assert(fabs(get(dxb, dt, i) - want_dx[i]) <= tolerance(dt) * (mag_dx[i] + 1e-3),
                  "%s fg %d dx[%d]: %g vs %g", graph_dtype_name(dt), fg, i, get(dxb, dt, i), want_dx[i]);
      jit_done(&j);
      j = jit_op(g, dki);
      ((fn2)j.f)(xb, yb, dkb);
      for (int i = 0; i < nk; i++)
        cr_assert(fabs(get(dkb, dt, i) - want_dk[i]) <= tolerance(dt) * (mag_dk[i] + 1e-3),
                  "%s fg %d dk[%d]: %g vs %g", graph_dtype_name(dt), fg, i, get(dkb, dt, i), want_dk[i]);
      jit_done(&j);
      graph_free(g);
    }
}

/* gbdt's prefix-sum over the bins of [nodes, features, bins, 2]: the scan
** axis is the one the declared flops name (bins, not the pair dim). */
Test(lower, prefix_sum_scans_the_axis_its_cost_names) {
  static const graph_dtype dts[] = {GDT_F32, GDT_BF16, GDT_S32};
  srand(12);
  for (size_t d = 0; d < NELEM(dts); d++) {
    graph_dtype dt = dts[d];
    graph *g = graph_new("t");
    graph_shape h = SHAPE(dt, 2, 3, 5, 2);
    int x = graph_parameter(g, "hist", h, 0);
    int ps = graph_custom(g, "prefix-sum", h, &x, 1, 2.0 * 3 * (5 - 1) * 2, 0, 2 * graph_bytes(&h));
    cr_assert(graph_ok(g));
    uint64_t xb[60], ob[60];
    fill(xb, dt, 60);
    jitted j = jit_op(g, ps);
    ((fn1)j.f)(xb, ob);
    for (int n = 0; n < 6; n++) /* node x feature */
      for (int c = 0; c < 2; c++) {
        double want = 0, mag = 0;
        for (int b = 0; b < 5; b++) {
          int i = (n * 5 + b) * 2 + c;
          want += get(xb, dt, i), mag += fabs(get(xb, dt, i));
          cr_assert(fabs(get(ob, dt, i) - want) <= tolerance(dt) * (mag + 1e-3),
                    "%s [%d,%d,%d]: %g vs %g", graph_dtype_name(dt), n, b, c, get(ob, dt, i), want);
        }
      }
    jit_done(&j);
    graph_free(g);
  }
}

/* With 2 bins, [nodes, features, 2, 2]'s bins and pair axes cost the same
** (n - n/2 adds): the axis gbdt records (graph_set_custom_axis) decides,
** and a recorded axis its declared cost does not match is not lowered. */
Test(lower, prefix_sum_scans_the_axis_its_builder_recorded) {
  graph *g = graph_new("t");
  graph_shape h = SHAPE(GDT_F32, 3, 2, 2, 2);
  int x = graph_parameter(g, "hist", h, 0);
  int ps = graph_custom(g, "prefix-sum", h, &x, 1, 24 - 12, 0, 2 * graph_bytes(&h));
  graph_set_custom_axis(g, ps, 2);
  int bad = graph_custom(g, "prefix-sum", h, &x, 1, 24 - 12 + 1, 0, 2 * graph_bytes(&h));
  graph_set_custom_axis(g, bad, 2);
  cr_assert(graph_ok(g));
  char why[200];
  cr_assert_not(lower_supported(g, bad, why, sizeof why));
  uint64_t xb[24], ob[24];
  fill(xb, GDT_F32, 24);
  jitted j = jit_op(g, ps);
  ((fn1)j.f)(xb, ob);
  for (int n = 0; n < 6; n++)
    for (int c = 0; c < 2; c++) { /* along the bins (dim 2), not the pair (dim 3) */
      double want = 0;
      for (int b = 0; b < 2; b++) {
        int i = (n * 2 + b) * 2 + c;
        want += get(xb, GDT_F32, i);
        cr_assert(fabs(get(ob, GDT_F32, i) - want) <= 1e-6 * (1 + fabs(want)), "[%d,%d,%d]: %g vs %g",
                  n, b, c, get(ob, GDT_F32, i), want);
      }
    }
  jit_done(&j);
  graph_free(g);
}

/* gbdt's row-partition: the rows in even (left-child) nodes, in order, the
** first M of them, -1 past the last -- with fewer, as many as, and more
** such rows than the M slots. */
Test(lower, row_partition_lists_left_child_rows) {
  enum { R = 37, M = 19 };
  srand(13);
  for (int mode = 0; mode < 3; mode++) {
    graph *g = graph_new("t");
    int nid = graph_parameter(g, "nid", SHAPE(GDT_S32, R), 0);
    int rp = graph_custom(g, "row-partition", SHAPE(GDT_S32, M), &nid, 1, R, 0, 4.0 * (R + M));
    cr_assert(graph_ok(g));
    int32_t ids[R], out[M], want[M];
    int evens = 0;
    for (int i = 0; i < R; i++) {
      /* mode 0: random (about half even); 1: every row even; 2: exactly M even */
      ids[i] = mode == 1 ? 2 * (rand() % 8) : mode == 2 ? 2 * (rand() % 8) + (i >= M) : rand() % 16;
      if (ids[i] % 2 == 0 && evens < M) want[evens++] = i;
    }
    for (int s = evens; s < M; s++) want[s] = -1;
    jitted j = jit_op(g, rp);
    ((fn1)j.f)(ids, out);
    for (int s = 0; s < M; s++)
      cr_assert_eq(out[s], want[s], "mode %d slot %d: %d vs %d", mode, s, out[s], want[s]);
    jit_done(&j);
    graph_free(g);
  }
}

/* A custom-call named like a known one but without what its lowering
** needs (no forward conv recorded; costs unlike the declared ones) stays
** opaque, and an unknown target (an HLO import's kernel) too. */
Test(lower, custom_calls_without_their_semantics_stay_opaque) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 2, 5, 6, 3), 0);
  int k = graph_parameter(g, "k", SHAPE(GDT_F32, 3, 2, 3, 6), 0);
  int ins[2] = {x, k};
  int bare = graph_custom(g, "conv-backward-filter", SHAPE(GDT_F32, 3, 2, 3, 6), ins, 2, 100, 0, 10);
  int ps = graph_custom(g, "prefix-sum", SHAPE(GDT_F32, 2, 5, 6, 3), &x, 1, 7, 0, 1440);
  int fa = graph_custom(g, "__cudnn$fmhaSoftmax", SHAPE(GDT_F32, 2, 5, 6, 3), &x, 1, 7, 0, 1440);
  cr_assert(graph_ok(g));
  char why[200];
  cr_assert_not(lower_supported(g, bare, why, sizeof why));
  cr_assert_str_eq(why, "conv-backward-filter: shapes or declared costs unlike the custom-call "
                        "tpusim's builders declare (not lowered)");
  cr_assert_not(lower_supported(g, ps, why, sizeof why));
  cr_assert_not(lower_supported(g, fa, why, sizeof why));
  cr_assert_str_eq(why, "__cudnn$fmhaSoftmax: an opaque kernel with declared costs (not lowered)");
  graph_free(g);
}
