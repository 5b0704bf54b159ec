/*
** test_lower.c -- lowering to LLVM IR: the verifier accepts every lowered
** kind and dtype, and the count read off the IR equals graph.c's exact
** formula (flops, transcendentals, bytes) -- two independent derivations
** of the same cost.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../sim/graph.h"
#include "../sim/lower.h"

#define SHAPE GRAPH_SHAPE

static const graph_op_kind UNARY[] = {
    GOP_NEG,  GOP_ABS,  GOP_EXP, GOP_LOG, GOP_TANH, GOP_LOGISTIC, GOP_GELU,
    GOP_SILU, GOP_RELU, GOP_RSQRT, GOP_SQRT, GOP_SIN, GOP_COS,     GOP_COPY,
};
static const graph_op_kind BINARY[] = {
    GOP_ADD, GOP_SUB, GOP_MUL, GOP_DIV, GOP_MAX, GOP_MIN, GOP_POW, GOP_GELU_GRAD, GOP_SILU_GRAD,
};
static const graph_dtype DTYPES[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F64};

/* Lowers op `id`, verifies the module, and asserts that the IR count
** equals graph_op_cost. Returns the bytes the IR touches uncapped. */
static double check_op(const graph *g, int id) {
  lower_module *m = lower_new("t");
  char err[256] = "";
  int f = lower_op(m, g, id, err, sizeof err);
  cr_assert_geq(f, 0, "%s", err);
  cr_assert_eq(lower_verify(m, err, sizeof err), 0, "%s", err);
  graph_cost ir, formula = graph_op_cost(g, id);
  double accessed = -1;
  cr_assert_eq(lower_op_cost(m, f, &ir, &accessed, err, sizeof err), 0, "%s", err);
  const graph_op *op = graph_get(g, id);
  for (int d = 0; d < GDT_COUNT; d++)
    cr_assert_float_eq(ir.flops[d], formula.flops[d], 1e-9 * (1 + formula.flops[d]),
                       "%s %s: flops[%s] IR %.17g, formula %.17g", graph_op_name(op->kind),
                       graph_dtype_name(op->out.dtype), graph_dtype_name(d), ir.flops[d],
                       formula.flops[d]);
  cr_assert_float_eq(ir.transcendentals, formula.transcendentals, 1e-9, "%s transcendentals",
                     graph_op_name(op->kind));
  cr_assert_float_eq(ir.bytes_read, formula.bytes_read, 1e-9, "%s bytes read %g vs %g",
                     graph_op_name(op->kind), ir.bytes_read, formula.bytes_read);
  cr_assert_float_eq(ir.bytes_written, formula.bytes_written, 1e-9, "%s bytes written",
                     graph_op_name(op->kind));
  lower_free(m);
  return accessed;
}

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
  int r = graph_transpose(g, graph_reshape(g, x, SHAPE(GDT_F32, 2, 2)), graph_dims_of(2, 1, 0));
  int i = graph_parameter(g, "i", SHAPE(GDT_S32, 4), 0);
  int n = graph_unary(g, GOP_NEG, i);
  char why[128];
  cr_assert_not(lower_supported(g, r, why, sizeof why));
  cr_assert_str_eq(why, "transpose: not lowered yet");
  cr_assert_not(lower_supported(g, n, why, sizeof why));
  cr_assert_str_eq(why, "negate: s32 operands not lowered yet");
  lower_module *m = lower_new("t");
  cr_assert_eq(lower_op(m, g, r, why, sizeof why), -1);
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

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static double bf16_dec(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* inputs are k/64 with |k| <= 160: exact in bf16 and fp16, so encoding
** truncates nothing */
static uint16_t bf16_enc(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static double f16_dec(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
  return h & 0x8000 ? -v : v;
}
static uint16_t f16_enc(double v) {
  if (v == 0) return 0;
  int e;
  double fr = frexp(fabs(v), &e); /* v = fr * 2^e, fr in [0.5, 1) */
  uint16_t m = (uint16_t)lround((fr * 2 - 1) * 1024);
  return (uint16_t)((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) | m);
}

static void put(void *buf, graph_dtype dt, int i, double v) {
  switch (dt) {
  case GDT_BF16: ((uint16_t *)buf)[i] = bf16_enc(v); break;
  case GDT_F16: ((uint16_t *)buf)[i] = f16_enc(v); break;
  case GDT_F32: ((float *)buf)[i] = (float)v; break;
  default: ((double *)buf)[i] = v; break;
  }
}
static double get(const void *buf, graph_dtype dt, int i) {
  switch (dt) {
  case GDT_BF16: return bf16_dec(((const uint16_t *)buf)[i]);
  case GDT_F16: return f16_dec(((const uint16_t *)buf)[i]);
  case GDT_F32: return ((const float *)buf)[i];
  default: return ((const double *)buf)[i];
  }
}
/* relative error allowed on a result: the output rounding (bf16 keeps 8
** significant bits, fp16 11) and, in f32, libm's float transcendentals */
static double tolerance(graph_dtype dt) {
  return dt == GDT_BF16 ? 1.0 / 128 : dt == GDT_F16 ? 1.0 / 1024 : dt == GDT_F32 ? 2e-6 : 1e-13;
}

static double ref_logistic(double x) { return 1 / (1 + exp(-x)); }
static double ref_gelu_t(double x) {
  return tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
}
static double reference(graph_op_kind k, double x, double y) {
  switch (k) {
  case GOP_NEG: return -x;
  case GOP_ABS: return fabs(x);
  case GOP_EXP: return exp(x);
  case GOP_LOG: return log(x);
  case GOP_TANH: return tanh(x);
  case GOP_LOGISTIC: return ref_logistic(x);
  case GOP_GELU: return 0.5 * x * (1 + ref_gelu_t(x));
  case GOP_SILU: return x * ref_logistic(x);
  case GOP_RELU: return x > 0 ? x : 0;
  case GOP_RSQRT: return 1 / sqrt(x);
  case GOP_SQRT: return sqrt(x);
  case GOP_SIN: return sin(x);
  case GOP_COS: return cos(x);
  case GOP_COPY: return x;
  case GOP_ADD: return x + y;
  case GOP_SUB: return x - y;
  case GOP_MUL: return x * y;
  case GOP_DIV: return x / y;
  case GOP_MAX: return x > y ? x : y;
  case GOP_MIN: return x < y ? x : y;
  case GOP_POW: return pow(x, y);
  case GOP_GELU_GRAD: {
    double t = ref_gelu_t(x);
    double d = 0.5 * (1 + t) +
               0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    return d * y;
  }
  case GOP_SILU_GRAD: {
    double s = ref_logistic(x);
    return s * (1 + x * (1 - s)) * y;
  }
  default: cr_assert_fail("no reference for %s", graph_op_name(k)); return 0;
  }
}

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

/* ---- a loop-fused kernel: one function, counted like fuse.h's kernel ---- */

#include "../sim/fuse.h"

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

Test(lower, fused_kernel_refuses_what_one_loop_cannot_hold) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 4, 8), 0);
  int w = graph_parameter(g, "w", SHAPE(GDT_F32, 8, 2), 0);
  int d = graph_matmul(g, x, w);
  int r = graph_unary(g, GOP_RELU, d);
  int ops[2] = {d, r};
  lower_module *m = lower_new("t");
  char err[256];
  cr_assert_eq(lower_fused(m, g, ops, 2, err, sizeof err), -1);
  cr_assert(strstr(err, "only elementwise ops"), "%s", err);
  cr_assert_eq(lower_fused(m, g, ops, 0, err, sizeof err), -1);
  lower_free(m);
  graph_free(g);
}
