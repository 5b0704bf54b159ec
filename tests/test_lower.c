/*
** test_lower.c -- lowering to LLVM IR: the verifier accepts every lowered
** kind and dtype, and the count read off the IR equals graph.c's exact
** formula (flops, transcendentals, bytes) -- two independent derivations
** of the same cost; the elementwise, dot and reduction kernels, JIT'd, match
** a plain C reference. Fused kernels: test_lower_fused.c; data movement,
** integer ops and convolution: test_lower_ops.c; custom-calls:
** test_lower_custom.c; helpers: lower_check.h.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
#include "../sim/lower.h"
#include "lower_check.h"

static const graph_op_kind UNARY[] = {
    GOP_NEG,  GOP_ABS,  GOP_EXP, GOP_LOG, GOP_TANH, GOP_LOGISTIC, GOP_GELU,
    GOP_SILU, GOP_RELU, GOP_RSQRT, GOP_SQRT, GOP_SIN, GOP_COS,     GOP_COPY,
};
static const graph_op_kind BINARY[] = {
    GOP_ADD, GOP_SUB, GOP_MUL, GOP_DIV, GOP_MAX, GOP_MIN, GOP_POW, GOP_GELU_GRAD, GOP_SILU_GRAD,
};
static const graph_dtype DTYPES[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64};

Test(lower, elementwise_count_equals_formula_for_every_kind_and_dtype) {
  for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++) {
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(DTYPES[d], 3, 7, 5), 0);
    int y = graph_parameter(g, "y", SHAPE(DTYPES[d], 3, 7, 5), 0);
    for (size_t k = 0; k < sizeof UNARY / sizeof UNARY[0]; k++) {
      int id = graph_unary(g, UNARY[k], x);
      cr_assert_geq(id, 0);
      /* elementwise: each buffer touched once, so uncapped equals capped */
      cr_assert_float_eq(check_op(g, id), 2.0 * 105 * graph_dtype_bits(DTYPES[d]) / 8, 1e-9);
    }
    for (size_t k = 0; k < sizeof BINARY / sizeof BINARY[0]; k++) {
      int id = graph_binary(g, BINARY[k], x, y);
      cr_assert_geq(id, 0);
      check_op(g, id);
    }
    graph_free(g);
  }
}

Test(lower, convert_changes_storage_without_flops) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 64), 0);
  int c = graph_convert(g, x, GDT_BF16);
  int back = graph_convert(g, c, GDT_F64);
  check_op(g, c);
  check_op(g, back);
  graph_free(g);
}

Test(lower, matmul_count_equals_formula_and_uncapped_bytes_show_no_reuse) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 2, 4, 6), 0);
  int w = graph_parameter(g, "w", SHAPE(GDT_BF16, 6, 5), 0);
  int y = graph_matmul(g, x, w);
  cr_assert(graph_ok(g));
  /* a naive loop nest loads both operands on every multiply-add:
  ** 2*4*5 outputs x 6 k x 2 operands x 2 bytes, plus 40 outputs x 2 bytes */
  cr_assert_float_eq(check_op(g, y), 40.0 * 6 * 2 * 2 + 40 * 2, 1e-9);
  graph_free(g);
}

Test(lower, batched_and_transposed_dots) {
  graph *g = graph_new("t");
  /* attention scores: q [b,h,s,d] x k [b,h,t,d] -> [b,h,s,t] */
  int q = graph_parameter(g, "q", SHAPE(GDT_F32, 2, 3, 4, 8), 0);
  int k = graph_parameter(g, "k", SHAPE(GDT_F32, 2, 3, 5, 8), 0);
  int s = graph_dot(g, q, k, graph_dims_of(2, 0, 1), graph_dims_of(2, 0, 1),
                    graph_dims_of(1, 3), graph_dims_of(1, 3), GDT_F32);
  /* a weight gradient: x^T dy, contracting the leading (token) dim */
  int x = graph_parameter(g, "x", SHAPE(GDT_F64, 9, 4), 0);
  int dy = graph_parameter(g, "dy", SHAPE(GDT_F64, 9, 3), 0);
  int dw = graph_dot(g, x, dy, graph_dims_of(0), graph_dims_of(0), graph_dims_of(1, 0),
                     graph_dims_of(1, 0), GDT_F64);
  cr_assert(graph_ok(g));
  check_op(g, s);
  check_op(g, dw);
  graph_free(g);
}

Test(lower, reductions_count_k_minus_1_combines_per_output) {
  static const graph_reduce_kind kinds[] = {GRAPH_RED_ADD, GRAPH_RED_MAX, GRAPH_RED_MIN,
                                            GRAPH_RED_MUL};
  for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++) {
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(DTYPES[d], 4, 6, 5), 0);
    for (int k = 0; k < 4; k++) {
      check_op(g, graph_reduce(g, x, graph_dims_of(1, 2), kinds[k]));     /* a row sum */
      check_op(g, graph_reduce(g, x, graph_dims_of(2, 2, 0), kinds[k]));  /* two, unsorted */
      check_op(g, graph_reduce(g, x, graph_dims_of(3, 0, 1, 2), kinds[k])); /* to a scalar */
    }
    /* 120 elements to 6 outputs: 114 adds */
    int r = graph_reduce(g, x, graph_dims_of(2, 0, 2), GRAPH_RED_ADD);
    cr_assert_float_eq(graph_op_cost(g, r).flops[DTYPES[d]], 114, 1e-9);
    check_op(g, r);
    graph_free(g);
  }
}

Test(lower, unsupported_ops_say_why) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 4), 0);
  int ar = graph_collective(g, GOP_ALL_REDUCE, x, 8, 0);
  int cc = graph_custom(g, "top-k", SHAPE(GDT_F32, 4), &x, 1, 10, 0, 32);
  int i = graph_parameter(g, "i", SHAPE(GDT_S32, 4), 0);
  int e = graph_unary(g, GOP_EXP, i);
  int a = graph_binary(g, GOP_AND, x, x);
  int q = graph_parameter(g, "q", SHAPE(GDT_S4, 4), 0);
  int c4 = graph_convert(g, q, GDT_F32);
  cr_assert(graph_ok(g));
  char why[160];
  cr_assert_not(lower_supported(g, ar, why, sizeof why));
  cr_assert_str_eq(why, "all-reduce: a collective, timed by the network model (not lowered)");
  cr_assert_not(lower_supported(g, cc, why, sizeof why));
  cr_assert_str_eq(why, "top-k: an opaque kernel with declared costs (not lowered)");
  cr_assert_not(lower_supported(g, e, why, sizeof why));
  cr_assert_str_eq(why, "exponential: s32 operands (no integer exponential)");
  cr_assert_not(lower_supported(g, a, why, sizeof why));
  cr_assert_str_eq(why, "and: f32 operands (a bitwise op needs integers or pred)");
  cr_assert_not(lower_supported(g, c4, why, sizeof why));
  cr_assert_str_eq(why, "convert: s4 operands not lowered (no LLVM type holds them)");
  lower_module *m = lower_new("t");
  cr_assert_eq(lower_op(m, g, ar, why, sizeof why), -1);
  lower_free(m);
  graph_free(g);
}

Test(lower, optimized_module_verifies_and_keeps_named_functions) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 256), 0);
  int y = graph_unary(g, GOP_GELU, x);
  lower_module *m = lower_new("t");
  char err[256] = "";
  int f = lower_op(m, g, y, err, sizeof err);
  cr_assert_geq(f, 0, "%s", err);
  /* "gelu" alone is a C identifier: prefixed, so it cannot shadow libm */
  cr_assert_str_eq(graph_get(g, y)->name, "gelu");
  cr_assert_str_eq(lower_fn_name(m, f), "op.gelu");
  cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
  cr_assert_eq(lower_verify(m, err, sizeof err), 0, "%s", err);
  char *ir = lower_print(m);
  cr_assert_not_null(strstr(ir, graph_get(g, y)->name));
  cr_assert_not_null(strstr(ir, "tanhf"), "gelu calls libm's tanhf:\n%s", ir);
  free(ir);
  cr_assert_eq(lower_optimize(m, 4, err, sizeof err), -1);
  lower_free(m);
  graph_free(g);
}

/* ---- lowered kernels run by the JIT against a plain C reference ---- */

/* log, sqrt, rsqrt and pow's base want positive inputs; divide a divisor
** away from 0 */
static bool positive_domain(graph_op_kind k) {
  return k == GOP_LOG || k == GOP_SQRT || k == GOP_RSQRT || k == GOP_POW || k == GOP_DIV;
}

Test(lower, jit_elementwise_kernels_match_c_reference_in_every_dtype) {
  enum { N = 37 }; /* odd: the vectorized loop's remainder runs too */
  srand(7);
  for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++) {
    graph_dtype dt = DTYPES[d];
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, N), 0);
    int y = graph_parameter(g, "y", SHAPE(dt, N), 0);
    int ids[64], nk = 0;
    for (size_t k = 0; k < sizeof UNARY / sizeof UNARY[0]; k++) ids[nk++] = graph_unary(g, UNARY[k], x);
    for (size_t k = 0; k < sizeof BINARY / sizeof BINARY[0]; k++)
      ids[nk++] = graph_binary(g, BINARY[k], x, y);
    lower_module *m = lower_new("t");
    char err[512] = "";
    for (int i = 0; i < nk; i++) cr_assert_eq(lower_op(m, g, ids[i], err, sizeof err), i, "%s", err);
    cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
    lower_jit *j = lower_jit_new(m, err, sizeof err);
    cr_assert_not_null(j, "%s", err);
    double xin[N], yin[N], xs[N], ys[N];
    uint64_t a[N], b[N], out[N]; /* 8-byte slots hold any dtype */
    for (int i = 0; i < nk; i++) {
      graph_op_kind kind = graph_get(g, ids[i])->kind;
      bool pos = positive_domain(kind);
      for (int e = 0; e < N; e++) {
        int kx = rand() % 321 - 160, ky = rand() % 321 - 160;
        xin[e] = pos ? (abs(kx) + 8) / 64.0 : kx / 64.0;
        yin[e] = kind == GOP_DIV ? (abs(ky) + 8) / 64.0 : kind == GOP_POW ? ky / 128.0 : ky / 64.0;
        put(a, dt, e, xin[e]);
        put(b, dt, e, yin[e]);
        xs[e] = get(a, dt, e);
        ys[e] = get(b, dt, e);
      }
      void *f = lower_jit_lookup(j, m, i, err, sizeof err);
      cr_assert_not_null(f, "%s", err);
      if (graph_get(g, ids[i])->n_in == 1) ((void (*)(void *, void *))f)(a, out);
      else ((void (*)(void *, void *, void *))f)(a, b, out);
      for (int e = 0; e < N; e++) {
        double want = reference(kind, xs[e], ys[e]), got = get(out, dt, e);
        /* the floor: inputs are O(1), and silu-grad, gelu-grad cancel
        ** terms of that size down to ~1e-3 */
        cr_assert(fabs(got - want) <= tolerance(dt) * (fabs(want) + 1e-2),
                  "%s %s x=%g y=%g: got %.9g, want %.9g", graph_op_name(kind),
                  graph_dtype_name(dt), xs[e], ys[e], got, want);
      }
    }
    lower_jit_free(j);
    lower_free(m);
    graph_free(g);
  }
}

Test(lower, jit_dots_match_c_reference) {
  static const graph_dtype dts[] = {GDT_BF16, GDT_F32, GDT_F64};
  for (size_t d = 0; d < 3; d++) {
    graph_dtype dt = dts[d];
    graph *g = graph_new("t");
    /* batched, with the lhs contracting dim first: out[b,i,j] = sum_k A[b,k,i] B[b,k,j] */
    int A = graph_parameter(g, "a", SHAPE(dt, 2, 5, 3), 0);
    int B = graph_parameter(g, "b", SHAPE(dt, 2, 5, 4), 0);
    int D = graph_dot(g, A, B, graph_dims_of(1, 0), graph_dims_of(1, 0), graph_dims_of(1, 1),
                      graph_dims_of(1, 1), dt);
    cr_assert(graph_ok(g));
    lower_module *m = lower_new("t");
    char err[512] = "";
    cr_assert_eq(lower_op(m, g, D, err, sizeof err), 0, "%s", err);
    cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
    lower_jit *j = lower_jit_new(m, err, sizeof err);
    cr_assert_not_null(j, "%s", err);
    uint64_t a[30], b[40], out[24];
    srand(11);
    for (int e = 0; e < 30; e++) put(a, dt, e, (rand() % 257 - 128) / 64.0);
    for (int e = 0; e < 40; e++) put(b, dt, e, (rand() % 257 - 128) / 64.0);
    void *f = lower_jit_lookup(j, m, 0, err, sizeof err);
    cr_assert_not_null(f, "%s", err);
    ((void (*)(void *, void *, void *))f)(a, b, out);
    for (int bb = 0; bb < 2; bb++)
      for (int i = 0; i < 3; i++)
        for (int jj = 0; jj < 4; jj++) {
          double want = 0, mag = 0;
          for (int k = 0; k < 5; k++) {
            double p = get(a, dt, bb * 15 + k * 3 + i) * get(b, dt, bb * 20 + k * 4 + jj);
            want += p;
            mag += fabs(p);
          }
          double got = get(out, dt, bb * 12 + i * 4 + jj);
          cr_assert(fabs(got - want) <= tolerance(dt) * (mag + 1e-3),
                    "%s out[%d,%d,%d]: got %.9g, want %.9g", graph_dtype_name(dt), bb, i, jj, got,
                    want);
        }
    lower_jit_free(j);
    lower_free(m);
    graph_free(g);
  }
}

Test(lower, jit_reductions_match_c_reference) {
  static const graph_dtype dts[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64};
  for (size_t d = 0; d < 4; d++) {
    graph_dtype dt = dts[d];
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, 3, 4, 5), 0);
    /* out[j] = sum over i, k of x[i, j, k]; and the max of each [i, :, k] */
    int s = graph_reduce(g, x, graph_dims_of(2, 2, 0), GRAPH_RED_ADD);
    int mx = graph_reduce(g, x, graph_dims_of(1, 1), GRAPH_RED_MAX);
    lower_module *m = lower_new("t");
    char err[512] = "";
    cr_assert_eq(lower_op(m, g, s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(lower_op(m, g, mx, err, sizeof err), 1, "%s", err);
    cr_assert_eq(lower_optimize(m, 2, err, sizeof err), 0, "%s", err);
    lower_jit *j = lower_jit_new(m, err, sizeof err);
    cr_assert_not_null(j, "%s", err);
    uint64_t in[60], o1[4], o2[15];
    srand(5);
    for (int e = 0; e < 60; e++) put(in, dt, e, (rand() % 257 - 128) / 64.0);
    void *fs = lower_jit_lookup(j, m, 0, err, sizeof err), *fm = lower_jit_lookup(j, m, 1, err, sizeof err);
    cr_assert(fs && fm, "%s", err);
    ((void (*)(void *, void *))fs)(in, o1);
    ((void (*)(void *, void *))fm)(in, o2);
    for (int jj = 0; jj < 4; jj++) {
      double want = 0, mag = 0;
      for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) {
          want += get(in, dt, i * 20 + jj * 5 + k);
          mag += fabs(get(in, dt, i * 20 + jj * 5 + k));
        }
      cr_assert(fabs(get(o1, dt, jj) - want) <= tolerance(dt) * (mag + 1e-3), "%s sum[%d]: %g vs %g",
                graph_dtype_name(dt), jj, get(o1, dt, jj), want);
    }
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 5; k++) {
        double want = -1e300;
        for (int jj = 0; jj < 4; jj++)
          if (get(in, dt, i * 20 + jj * 5 + k) > want) want = get(in, dt, i * 20 + jj * 5 + k);
        cr_assert_eq(get(o2, dt, i * 5 + k), want, "%s max[%d,%d]", graph_dtype_name(dt), i, k);
      }
    lower_jit_free(j);
    lower_free(m);
    graph_free(g);
  }
}
