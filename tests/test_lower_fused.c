/*
** test_lower_fused.c -- a loop-fused kernel: one function, counted like
** fuse.h's kernel, and what it refuses to compute inside.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
#include "../sim/lower.h"
#include "../sim/fuse.h"
#include "lower_check.h"

Test(lower, fused_chain_is_one_loop_whose_count_matches_the_fusion_pass) {
  for (int bf = 0; bf < 2; bf++) {
    graph_dtype dt = bf ? GDT_BF16 : GDT_F32;
    enum { N = 45 };
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, 5, 9), 0);
    int y = graph_parameter(g, "y", SHAPE(dt, 5, 9), 0);
    int a = graph_binary(g, GOP_MUL, x, x);
    int b = graph_binary(g, GOP_ADD, a, y);
    int c = graph_unary(g, GOP_GELU, b);
    fuse_plan *p = fuse_graph(g, true);
    int k = p->group_of[c], ops[3] = {a, b, c};
    cr_assert_eq(p->size[k], 3);
    lower_module *m = lower_new("t");
    char err[512] = "";
    int f = lower_fused(m, g, ops, 3, err, sizeof err);
    cr_assert_geq(f, 0, "%s", err);
    cr_assert_eq(lower_verify(m, err, sizeof err), 0, "%s", err);
    graph_cost ir, want = fuse_group_cost(p, g, k);
    double accessed;
    cr_assert_eq(lower_op_cost(m, f, &ir, &accessed, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(ir.flops[dt], want.flops[dt], 1e-9, "%g vs %g", ir.flops[dt], want.flops[dt]);
    cr_assert_float_eq(ir.transcendentals, want.transcendentals, 1e-9);
    cr_assert_float_eq(ir.bytes_read, want.bytes_read, 1e-9, "%g vs %g", ir.bytes_read, want.bytes_read);
    cr_assert_float_eq(ir.bytes_written, want.bytes_written, 1e-9);
    /* x is loaded once per element though two operands use it */
    cr_assert_float_eq(accessed, 3.0 * N * graph_dtype_bits(dt) / 8, 1e-9);
    cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
    lower_jit *j = lower_jit_new(m, err, sizeof err);
    cr_assert_not_null(j, "%s", err);
    void *fp = lower_jit_lookup(j, m, f, err, sizeof err);
    cr_assert_not_null(fp, "%s", err);
    uint64_t in0[N], in1[N], out[N];
    for (int e = 0; e < N; e++) {
      put(in0, dt, e, (e - 22) / 16.0);
      put(in1, dt, e, (11 - e) / 32.0);
    }
    ((void (*)(void *, void *, void *))fp)(in0, in1, out);
    for (int e = 0; e < N; e++) {
      double xv = get(in0, dt, e), yv = get(in1, dt, e);
      double w = reference(GOP_GELU, xv * xv + yv, 0);
      cr_assert(fabs(get(out, dt, e) - w) <= tolerance(dt) * (fabs(w) + 1e-2),
                "%s e=%d: %g vs %g", graph_dtype_name(dt), e, get(out, dt, e), w);
    }
    lower_jit_free(j);
    lower_free(m);
    fuse_free(p);
    graph_free(g);
  }
}

Test(lower, fused_kernel_refuses_what_it_cannot_compute_inside) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 4, 8), 0);
  int y = graph_parameter(g, "y", SHAPE(GDT_F32, 4, 8), 0);
  int e = graph_unary(g, GOP_EXP, x);
  int xs[2] = {x, y};
  int c = graph_concat(g, xs, 2, 0);
  int r = graph_unary(g, GOP_RELU, c);
  lower_module *m = lower_new("t");
  char err[256];
  int ops[2] = {c, r};
  cr_assert_eq(lower_fused(m, g, ops, 2, err, sizeof err), -1);
  cr_assert(strstr(err, "a concatenate is computed only as a kernel's root"), "%s", err);
  int lost[2] = {e, r}; /* exp's value is read by nothing in the kernel */
  cr_assert_eq(lower_fused(m, g, lost, 2, err, sizeof err), -1);
  cr_assert(strstr(err, "no later op of the kernel reads it"), "%s", err);
  int back[2] = {r, c};
  cr_assert_eq(lower_fused(m, g, back, 2, err, sizeof err), -1);
  cr_assert(strstr(err, "graph order"), "%s", err);
  cr_assert_eq(lower_fused(m, g, ops, 0, err, sizeof err), -1);
  lower_free(m);
  graph_free(g);
}
