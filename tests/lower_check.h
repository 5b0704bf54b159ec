/*
** lower_check.h -- shared by the test_lower*.c files: an op's IR count
** checked against graph.c's formula (check_op), values put into and read
** from buffers of every dtype, the C references, and one op lowered and
** JIT'd (jit_op). Static inline, so each file takes only what it uses.
*/
#ifndef TPUSIM_TEST_LOWER_CHECK_H
#define TPUSIM_TEST_LOWER_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"
#include "../sim/lower.h"

#define SHAPE GRAPH_SHAPE
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Lowers op `id`, verifies the module, and asserts that the IR count
** equals graph_op_cost. Returns the bytes the IR touches uncapped. */
static inline double check_op(const graph *g, int id) {
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

static inline double bf16_dec(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* inputs are k/64 with |k| <= 160: exact in bf16 and fp16, so encoding
** truncates nothing */
static inline uint16_t bf16_enc(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static inline double f16_dec(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
  return h & 0x8000 ? -v : v;
}
static inline uint16_t f16_enc(double v) {
  if (v == 0) return 0;
  int e;
  double fr = frexp(fabs(v), &e); /* v = fr * 2^e, fr in [0.5, 1) */
  uint16_t m = (uint16_t)lround((fr * 2 - 1) * 1024);
  return (uint16_t)((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) | m);
}

static inline void put(void *buf, graph_dtype dt, int i, double v) {
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
static inline double get(const void *buf, graph_dtype dt, int i) {
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
static inline double tolerance(graph_dtype dt) {
  if (!graph_dtype_is_float(dt)) return 0; /* integers are exact */
  return dt == GDT_BF16 ? 1.0 / 128 : dt == GDT_F16 ? 1.0 / 1024 : dt == GDT_F32 ? 2e-6 : 1e-13;
}

static inline double ref_logistic(double x) { return 1 / (1 + exp(-x)); }
static inline double ref_gelu_t(double x) {
  return tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
}
static inline double reference(graph_op_kind k, double x, double y) {
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

/* A value exact in every dtype of ALL_DT: k/4 for floats, small integers
** (non-negative for the unsigned ones). */
static inline double rnd(graph_dtype dt) {
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
static inline jitted jit_op(const graph *g, int id) {
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
static inline void jit_done(jitted *r) {
  lower_jit_free(r->j);
  lower_free(r->m);
}

typedef void (*fn1)(void *, void *);
typedef void (*fn2)(void *, void *, void *);
typedef void (*fn3)(void *, void *, void *, void *);

static inline void fill(void *buf, graph_dtype dt, int n) {
  for (int i = 0; i < n; i++) put(buf, dt, i, rnd(dt));
}

#endif
