/*
** test_lower.c -- lowering to LLVM IR: the verifier accepts every lowered
** kind and dtype, and the count read off the IR equals graph.c's exact
** formula (flops, transcendentals, bytes) -- two independent derivations
** of the same cost.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
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
  case GDT_PRED: ((uint8_t *)buf)[i] = v != 0; break;
  case GDT_S8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case GDT_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case GDT_S32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case GDT_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case GDT_S64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case GDT_BF16: ((uint16_t *)buf)[i] = bf16_enc(v); break;
  case GDT_F16: ((uint16_t *)buf)[i] = f16_enc(v); break;
  case GDT_F32: ((float *)buf)[i] = (float)v; break;
  default: ((double *)buf)[i] = v; break;
  }
}
static double get(const void *buf, graph_dtype dt, int i) {
  switch (dt) {
  case GDT_PRED: return ((const uint8_t *)buf)[i];
  case GDT_S8: return ((const int8_t *)buf)[i];
  case GDT_U8: return ((const uint8_t *)buf)[i];
  case GDT_S32: return ((const int32_t *)buf)[i];
  case GDT_U32: return ((const uint32_t *)buf)[i];
  case GDT_S64: return (double)((const int64_t *)buf)[i];
  case GDT_BF16: return bf16_dec(((const uint16_t *)buf)[i]);
  case GDT_F16: return f16_dec(((const uint16_t *)buf)[i]);
  case GDT_F32: return ((const float *)buf)[i];
  default: return ((const double *)buf)[i];
  }
}
/* relative error allowed on a result: the output rounding (bf16 keeps 8
** significant bits, fp16 11) and, in f32, libm's float transcendentals */
static double tolerance(graph_dtype dt) {
  if (!graph_dtype_is_float(dt)) return 0; /* integers are exact */
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

/* ---- data movement, integer and predicate ops, convolution: the IR
** count equals the formula, and the JIT'd kernel the C reference ---- */

static const graph_dtype ALL_DT[] = {GDT_S8, GDT_U8, GDT_S32, GDT_U32, GDT_S64,
                                     GDT_BF16, GDT_F16, GDT_F32, GDT_F64};
static const graph_dtype INT_DT[] = {GDT_S8, GDT_U8, GDT_S32, GDT_U32, GDT_S64};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A value exact in every dtype of ALL_DT: k/4 for floats, small integers
** (non-negative for the unsigned ones). */
static double rnd(graph_dtype dt) {
  int k = rand() % 61 - 30;
  if (graph_dtype_is_float(dt)) return k / 4.0;
  if (dt == GDT_PRED) return k & 1;
  return dt == GDT_U8 || dt == GDT_U32 ? abs(k) : k;
}

typedef struct {
  lower_module *m;
  lower_jit *j;
  void *f;
} jitted;

/* check_op (IR count == formula), then the op alone at O2, JIT'd. */
static jitted jit_op(const graph *g, int id) {
  check_op(g, id);
  jitted r = {lower_new("t"), NULL, NULL};
  char err[512] = "";
  int f = lower_op(r.m, g, id, err, sizeof err);
  cr_assert_geq(f, 0, "%s", err);
  cr_assert_eq(lower_optimize(r.m, 2, err, sizeof err), 0, "%s", err);
  r.j = lower_jit_new(r.m, err, sizeof err);
  cr_assert_not_null(r.j, "%s", err);
  r.f = lower_jit_lookup(r.j, r.m, f, err, sizeof err);
  cr_assert_not_null(r.f, "%s", err);
  return r;
}
static void jit_done(jitted *r) {
  lower_jit_free(r->j);
  lower_free(r->m);
}

typedef void (*fn1)(void *, void *);
typedef void (*fn2)(void *, void *, void *);
typedef void (*fn3)(void *, void *, void *, void *);

static void fill(void *buf, graph_dtype dt, int n) {
  for (int i = 0; i < n; i++) put(buf, dt, i, rnd(dt));
}

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

/* ---- the custom-calls tpusim's builders declare: lowered by name ---- */

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
