/*
** test_graph.c -- the graph IR: shape inference, hand-derived costs, sticky
** errors, topological order and cycles.
*/
#include <string.h>

#include <criterion/criterion.h>

#include "../workloads/graph.h"

#define SHAPE GRAPH_SHAPE

static const char *first_error(const graph *g) {
  cr_assert_not_null(graph_diag(g), "expected an error");
  return diag_message(graph_diag(g), 0);
}

Test(graph, matmul_shape_and_flops) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 8, 2048, 4096), GRAPH_INPUT);
  int w = graph_parameter(g, "w", SHAPE(GDT_BF16, 4096, 11008),
                          GRAPH_WEIGHT | GRAPH_TRAINABLE);
  int y = graph_matmul(g, x, w);
  cr_assert(graph_ok(g));
  const graph_op *op = graph_get(g, y);
  cr_assert_eq(op->out.rank, 3);
  cr_assert_eq(op->out.dim[2], 11008);
  graph_cost c = graph_op_cost(g, y);
  /* 2 x (8*2048) x 4096 x 11008 */
  cr_assert_float_eq(c.flops[GDT_BF16], 2.0 * 8 * 2048 * 4096 * 11008, 1);
  cr_assert_float_eq(c.bytes_read, 2.0 * (8 * 2048 * 4096 + 4096.0 * 11008), 1);
  cr_assert_float_eq(c.bytes_written, 2.0 * 8 * 2048 * 11008, 1);
  cr_assert_eq(graph_param_elements(g, GRAPH_TRAINABLE), 4096LL * 11008);
  graph_free(g);
}

Test(graph, batched_dot_follows_hlo_result_order) {
  /* attention scores: q [b,h,s,d] x k [b,h,t,d] -> [b,h,s,t] */
  graph *g = graph_new("t");
  int q = graph_parameter(g, "q", SHAPE(GDT_BF16, 2, 32, 128, 64), 0);
  int k = graph_parameter(g, "k", SHAPE(GDT_BF16, 2, 32, 256, 64), 0);
  int s = graph_dot(g, q, k, graph_dims_of(2, 0, 1), graph_dims_of(2, 0, 1), graph_dims_of(1, 3),
                    graph_dims_of(1, 3), GDT_F32);
  const graph_op *op = graph_get(g, s);
  int64_t want[] = {2, 32, 128, 256};
  for (int i = 0; i < 4; i++) cr_assert_eq(op->out.dim[i], want[i]);
  cr_assert_eq(op->out.dtype, GDT_F32);
  cr_assert_float_eq(graph_op_cost(g, s).flops[GDT_BF16], 2.0 * 2 * 32 * 128 * 256 * 64, 1);
  graph_free(g);
}

/* ResNet-50 conv1: 224x224x3 input, 7x7x3x64 kernel, stride 2, pad 3 ->
** 112x112x64; 2 x 112*112*64 x 7*7*3 = 236,027,904 FLOPs per image. */
Test(graph, convolution_output_and_flops) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "img", SHAPE(GDT_BF16, 1, 224, 224, 3), 0);
  int k = graph_parameter(g, "k", SHAPE(GDT_BF16, 7, 7, 3, 64), 0);
  graph_conv_attrs c = {.spatial = 2, .in_batch = 0, .in_feature = 3, .in_spatial = {1, 2},
                        .k_in = 2, .k_out = 3, .k_spatial = {0, 1}, .out_batch = 0,
                        .out_feature = 3, .out_spatial = {1, 2}, .stride = {2, 2},
                        .pad_lo = {3, 3}, .pad_hi = {3, 3}, .feature_groups = 1};
  int y = graph_conv(g, x, k, &c, GDT_BF16);
  cr_assert(graph_ok(g), "%s", graph_ok(g) ? "" : first_error(g));
  const graph_op *op = graph_get(g, y);
  cr_assert_eq(op->out.dim[1], 112);
  cr_assert_eq(op->out.dim[3], 64);
  cr_assert_float_eq(graph_op_cost(g, y).flops[GDT_BF16], 236027904.0, 1);
  graph_free(g);
}

/* Depthwise: groups = channels, each output sees one input channel. */
Test(graph, depthwise_convolution) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1, 150, 150, 32), 0);
  int k = graph_parameter(g, "k", SHAPE(GDT_F32, 3, 3, 1, 32), 0);
  graph_conv_attrs c = {.spatial = 2, .in_feature = 3, .in_spatial = {1, 2}, .k_in = 2,
                        .k_out = 3, .k_spatial = {0, 1}, .out_feature = 3, .out_spatial = {1, 2},
                        .pad_lo = {1, 1}, .pad_hi = {1, 1}, .feature_groups = 32};
  int y = graph_conv(g, x, k, &c, GDT_F32);
  cr_assert(graph_ok(g));
  cr_assert_eq(graph_get(g, y)->out.dim[1], 150);
  cr_assert_float_eq(graph_op_cost(g, y).flops[GDT_F32], 2.0 * 150 * 150 * 32 * 9, 1);
  graph_free(g);
}

Test(graph, elementwise_costs_follow_the_table) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1000), 0);
  int e = graph_unary(g, GOP_EXP, x);
  int a = graph_binary(g, GOP_ADD, x, e);
  int r = graph_reduce(g, a, graph_dims_of(1, 0), GRAPH_RED_ADD);
  int gl = graph_unary(g, GOP_GELU, x);
  cr_assert_float_eq(graph_op_cost(g, e).transcendentals, 1000, 0);
  cr_assert_float_eq(graph_op_cost(g, e).flops[GDT_F32], 0, 0);
  cr_assert_float_eq(graph_op_cost(g, a).flops[GDT_F32], 1000, 0);
  cr_assert_float_eq(graph_op_cost(g, r).flops[GDT_F32], 999, 0);
  cr_assert_eq(graph_get(g, r)->out.rank, 0);
  cr_assert_float_eq(graph_op_cost(g, gl).flops[GDT_F32], 8000, 0);
  graph_cost t = graph_total_cost(g, -1);
  cr_assert_float_eq(graph_cost_flops(&t), 1000 + 999 + 8000, 0);
  graph_free(g);
}

Test(graph, embedding_gather_and_scatter_touch_rows_only) {
  graph *g = graph_new("t");
  int tab = graph_parameter(g, "emb", SHAPE(GDT_BF16, 128256, 4096), GRAPH_WEIGHT);
  int ids = graph_parameter(g, "ids", SHAPE(GDT_S32, 8, 2048), GRAPH_INPUT);
  int e = graph_gather(g, tab, ids, NULL);
  const graph_op *op = graph_get(g, e);
  cr_assert_eq(op->out.rank, 3);
  cr_assert_eq(op->out.dim[2], 4096);
  graph_cost c = graph_op_cost(g, e);
  cr_assert_float_eq(c.bytes_written, 2.0 * 8 * 2048 * 4096, 1);
  cr_assert_float_eq(c.bytes_read, 2.0 * 8 * 2048 * 4096 + 4.0 * 8 * 2048, 1);
  int grad = graph_scatter(g, tab, ids, e);
  cr_assert(graph_ok(g));
  cr_assert_float_eq(graph_op_cost(g, grad).flops[GDT_BF16], 8.0 * 2048 * 4096, 1);
  graph_free(g);
}

Test(graph, collectives_change_the_shape_as_hlo_does) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 1024, 512), 0);
  int ag = graph_collective(g, GOP_ALL_GATHER, x, 8, 0);
  int rs = graph_collective(g, GOP_REDUCE_SCATTER, x, 8, 1);
  int ar = graph_collective(g, GOP_ALL_REDUCE, x, 8, 0);
  cr_assert_eq(graph_get(g, ag)->out.dim[0], 8192);
  cr_assert_eq(graph_get(g, rs)->out.dim[1], 64);
  cr_assert(graph_shape_eq(&graph_get(g, ar)->out, &graph_get(g, x)->out));
  graph_collective(g, GOP_REDUCE_SCATTER, x, 3, 1);
  cr_assert(!graph_ok(g));
  cr_assert(strstr(first_error(g), "not divisible"));
  graph_free(g);
}

Test(graph, shape_mismatch_is_reported_once_and_sticks) {
  graph *g = graph_new("m");
  graph_set_scope(g, "l0/mlp");
  int a = graph_parameter(g, "a", SHAPE(GDT_BF16, 4, 8), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_BF16, 8, 4), 0);
  int bad = graph_binary(g, GOP_ADD, a, b);
  cr_assert_eq(bad, -1);
  int after = graph_unary(g, GOP_EXP, bad);
  cr_assert_eq(after, -1);
  cr_assert_eq(diag_count(graph_diag(g)), 1);
  cr_assert_str_eq(first_error(g), "m: l0/mlp/add: operand shapes differ: bf16[4,8] vs bf16[8,4]");
  graph_free(g);
}

Test(graph, invalid_shapes_are_errors) {
  graph *g = graph_new("neg");
  cr_assert_eq(graph_parameter(g, "w", SHAPE(GDT_F32, -5, 3), 0), -1);
  cr_assert(strstr(first_error(g), "dimension 0 is -5"));
  graph_free(g);
  g = graph_new("huge");
  cr_assert_eq(graph_parameter(g, "w", SHAPE(GDT_F32, 1LL << 40, 1 << 20), 0), -1);
  cr_assert(strstr(first_error(g), "2^50"));
  graph_free(g);
  g = graph_new("dot");
  int a = graph_parameter(g, "a", SHAPE(GDT_BF16, 4, 8), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_BF16, 7, 4), 0);
  cr_assert_eq(graph_matmul(g, a, b), -1);
  cr_assert(strstr(first_error(g), "contracting dimensions differ: bf16[4,8] vs bf16[7,4]"));
  graph_free(g);
}

Test(graph, reshape_transpose_broadcast_slice_concat) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 6, 4), 0);
  int t = graph_transpose(g, x, graph_dims_of(2, 1, 0));
  cr_assert_eq(graph_get(g, t)->out.dim[0], 4);
  int r = graph_reshape(g, x, SHAPE(GDT_F32, 24));
  cr_assert_float_eq(graph_op_cost(g, r).bytes_read, 0, 0); /* bitcast */
  int bc = graph_broadcast(g, r, SHAPE(GDT_F32, 3, 24), graph_dims_of(1, 1));
  cr_assert_eq(graph_get(g, bc)->out.dim[0], 3);
  int64_t st[] = {1, 0}, lim[] = {6, 4}, stride[] = {2, 1};
  int sl = graph_slice(g, x, st, lim, stride);
  cr_assert_eq(graph_get(g, sl)->out.dim[0], 3);
  int parts[] = {x, x, x};
  int c = graph_concat(g, parts, 3, 0);
  cr_assert_eq(graph_get(g, c)->out.dim[0], 18);
  cr_assert_eq(graph_reshape(g, x, SHAPE(GDT_F32, 25)), -1);
  graph_free(g);
}

Test(graph, toposort_orders_and_finds_cycles) {
  /* 0 <- 2, 1 <- 0, 2 <- (none), 3 <- 1,2 */
  int i0[] = {2}, i1[] = {0}, i3[] = {1, 2};
  const int *in[] = {i0, i1, NULL, i3};
  int n_in[] = {1, 1, 0, 2};
  int order[4], cyc[4], clen;
  cr_assert_eq(graph_toposort(4, in, n_in, order, cyc, &clen), 0);
  cr_assert(order[0] == 2 && order[1] == 0 && order[2] == 1 && order[3] == 3);
  /* 0 <- 1, 1 <- 2, 2 <- 0: a cycle of three, 3 hangs off it */
  int c0[] = {1}, c1[] = {2}, c2[] = {0}, c3[] = {0};
  const int *cin[] = {c0, c1, c2, c3};
  int cn[] = {1, 1, 1, 1};
  cr_assert_eq(graph_toposort(4, cin, cn, order, cyc, &clen), -1);
  cr_assert_eq(clen, 3);
  int self[] = {0};
  const int *sin[] = {self};
  int sn[] = {1};
  cr_assert_eq(graph_toposort(1, sin, sn, order, cyc, &clen), -1);
  cr_assert(clen == 1 && cyc[0] == 0);
}

Test(graph, dtype_and_op_names_round_trip) {
  for (int d = 0; d < GDT_COUNT; d++) cr_assert_eq(graph_dtype_parse(graph_dtype_name(d)), d);
  for (int k = 0; k < GOP_COUNT; k++) cr_assert_eq(graph_op_parse(graph_op_name(k)), k);
  cr_assert_eq(graph_dtype_parse("nf4"), GDT_S4);
  cr_assert_float_eq(graph_bytes(&(graph_shape){GDT_S4, 1, {1000}}), 500, 0);
}
