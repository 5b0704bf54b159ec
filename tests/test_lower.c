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

Test(lower, unsupported_ops_say_why) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 4), 0);
  int r = graph_reduce(g, x, graph_dims_of(1, 0), GRAPH_RED_ADD);
  int i = graph_parameter(g, "i", SHAPE(GDT_S32, 4), 0);
  int n = graph_unary(g, GOP_NEG, i);
  char why[128];
  cr_assert_not(lower_supported(g, r, why, sizeof why));
  cr_assert_str_eq(why, "reduce: not lowered yet");
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
  cr_assert_str_eq(lower_fn_name(m, f), graph_get(g, y)->name);
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
