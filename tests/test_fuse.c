/*
** test_fuse.c -- fusion decisions and the HBM bytes they save, against
** hand counts.
*/
#include <criterion/criterion.h>

#include "../sim/fuse.h"
#include "../sim/graph.h"

#define SHAPE GRAPH_SHAPE

Test(fuse, elementwise_chain_is_one_kernel_reading_each_input_once) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1024), 0);
  int y = graph_parameter(g, "y", SHAPE(GDT_F32, 1024), 0);
  int a = graph_binary(g, GOP_MUL, x, x);
  int b = graph_binary(g, GOP_ADD, a, y);
  int c = graph_unary(g, GOP_GELU, b);
  fuse_plan *p = fuse_graph(g, true);
  cr_assert_eq(p->n_groups, 1);
  cr_assert_eq(p->group_of[a], p->group_of[c]);
  cr_assert_eq(p->root[0], c);
  graph_cost f = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(f.flops[GDT_F32], 1024.0 * (1 + 1 + 8), 1e-9);
  cr_assert_float_eq(f.transcendentals, 1024, 1e-9);
  cr_assert_float_eq(f.bytes_read, 2 * 4096, 1e-9);   /* x and y */
  cr_assert_float_eq(f.bytes_written, 4096, 1e-9);    /* gelu's result only */
  fuse_free(p);
  /* --no-fusion: three kernels, each value through HBM */
  p = fuse_graph(g, false);
  cr_assert_eq(p->n_groups, 3);
  graph_cost u = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(u.flops[GDT_F32], f.flops[GDT_F32], 1e-9);
  cr_assert_float_eq(u.bytes_read, 4096 + 8192 + 4096, 1e-9);
  cr_assert_float_eq(u.bytes_written, 3 * 4096, 1e-9);
  fuse_free(p);
  graph_free(g);
}

Test(fuse, dot_takes_bias_and_activation_as_epilogue_and_absorbs_the_broadcast) {
  for (int order = 0; order < 2; order++) {
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 8, 16), 0);
    int w = graph_parameter(g, "w", SHAPE(GDT_BF16, 16, 32), 0);
    int b = graph_parameter(g, "b", SHAPE(GDT_BF16, 32), 0);
    int bb = -1, d;
    if (order == 0) bb = graph_broadcast(g, b, SHAPE(GDT_BF16, 8, 32), graph_dims_of(1, 1));
    d = graph_matmul(g, x, w);
    if (order == 1) bb = graph_broadcast(g, b, SHAPE(GDT_BF16, 8, 32), graph_dims_of(1, 1));
    /* the bias first, so the dot is the second operand: the epilogue rule
    ** still wins over joining the broadcast's kernel */
    int e = graph_binary(g, GOP_ADD, bb, d);
    int f = graph_unary(g, GOP_GELU, e);
    cr_assert(graph_ok(g));
    fuse_plan *p = fuse_graph(g, true);
    int k = p->group_of[f];
    cr_assert_eq(p->group_of[d], k, "order %d", order);
    cr_assert_eq(p->group_of[bb], k, "order %d", order);
    cr_assert_eq(p->size[k], 4);
    graph_cost c = fuse_group_cost(p, g, k);
    cr_assert_float_eq(c.bytes_read, 2.0 * (8 * 16 + 16 * 32 + 32), 1e-9); /* x, w, b */
    cr_assert_float_eq(c.bytes_written, 2.0 * 8 * 32, 1e-9);
    cr_assert_float_eq(c.flops[GDT_BF16], 2.0 * 8 * 32 * 16 + 8 * 32 * (1 + 8), 1e-9);
    graph_cost t = fuse_total_cost(p, g, -1);
    cr_assert_float_eq(t.bytes_read, c.bytes_read, 1e-9); /* nothing else runs */
    fuse_free(p);
    graph_free(g);
  }
}

Test(fuse, reduce_takes_its_elementwise_input) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 64, 128), 0);
  int e = graph_unary(g, GOP_EXP, x);
  int s = graph_reduce(g, e, graph_dims_of(1, 1), GRAPH_RED_ADD);
  fuse_plan *p = fuse_graph(g, true);
  cr_assert_eq(p->group_of[e], p->group_of[s]);
  graph_cost c = fuse_group_cost(p, g, p->group_of[s]);
  cr_assert_float_eq(c.bytes_read, 4.0 * 64 * 128, 1e-9);
  cr_assert_float_eq(c.bytes_written, 4.0 * 64, 1e-9);
  fuse_free(p);
  graph_free(g);
}

Test(fuse, a_value_with_two_users_goes_through_hbm) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 256), 0);
  int a = graph_unary(g, GOP_EXP, x);
  int b = graph_unary(g, GOP_NEG, a);
  int c = graph_unary(g, GOP_SIN, a);
  int d = graph_binary(g, GOP_ADD, b, c);
  fuse_plan *p = fuse_graph(g, true);
  /* a is read by two kernels-to-be: stored once, not recomputed */
  cr_assert_neq(p->group_of[a], p->group_of[b]);
  cr_assert_neq(p->group_of[a], p->group_of[c]);
  /* d joins b's kernel through b (whose one user it is); c is a kernel of
  ** its own, written and read back */
  cr_assert_eq(p->group_of[d], p->group_of[b]);
  graph_cost t = fuse_total_cost(p, g, -1);
  /* exp: read x, write a; sin: read a, write c; {neg, add}: read a and c, write d */
  cr_assert_float_eq(t.bytes_read, 1024.0 * 4, 1e-9);
  cr_assert_float_eq(t.bytes_written, 1024.0 * 3, 1e-9);
  fuse_free(p);
  graph_free(g);
}

/* XLA's producer duplication (fuse_graph_dup): a cheap op with two
** consumers is recomputed in both kernels instead of stored; an expensive
** one (exp) is stored. a = x + y feeds exp(a) and a * x, 128 f32 each
** (512 B a tensor).
**   plain:  {a} reads x, y, writes a; {exp} reads a, writes; {mul} reads
**           a and x, writes: 1536 + 1024 + 1536 = 4096 B; add once.
**   dup:    {exp} reads x, y, writes; {mul} reads x, y, writes: 2 x 1536 =
**           3072 B; the add runs in both kernels (256 flops for it).
** e = exp(a) then feeds two multiplies: exp is expensive, so it is stored
** either way. */
Test(fuse, duplication_recomputes_cheap_producers_and_stores_expensive_ones) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 128), 0);
  int y = graph_parameter(g, "y", SHAPE(GDT_F32, 128), 0);
  int a = graph_binary(g, GOP_ADD, x, y);
  int e = graph_unary(g, GOP_EXP, a);
  int m = graph_binary(g, GOP_MUL, a, x);
  (void)m;
  fuse_plan *p = fuse_graph(g, true);
  graph_cost plain = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(plain.bytes_read + plain.bytes_written, 4096, 1e-9);
  cr_assert_float_eq(plain.flops[GDT_F32], 2 * 128, 1e-9);
  fuse_free(p);
  p = fuse_graph_dup(g);
  cr_assert(p->dup[a]);
  cr_assert_eq(p->group_of[a], -1);
  graph_cost dup = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(dup.bytes_read, 2 * 1024, 1e-9);
  cr_assert_float_eq(dup.bytes_written, 2 * 512, 1e-9);
  cr_assert_float_eq(dup.flops[GDT_F32], 3 * 128, 1e-9);
  cr_assert_float_eq(dup.transcendentals, 128, 1e-9);
  fuse_free(p);
  /* an expensive producer with two consumers stays a stored value */
  int m1 = graph_binary(g, GOP_MUL, e, x), m2 = graph_binary(g, GOP_MUL, e, y);
  (void)m1, (void)m2;
  p = fuse_graph_dup(g);
  cr_assert(!p->dup[e]);
  cr_assert_geq(p->group_of[e], 0);
  cr_assert(p->leaves[e]);
  fuse_free(p);
  graph_free(g);
}

/* A broadcast is never stored when its consumers can compute it, even a
** single consumer that is itself duplicated. */
Test(fuse, duplication_never_stores_a_broadcast_its_consumers_can_compute) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 8, 16), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_F32, 16), 0);
  int bb = graph_broadcast(g, b, SHAPE(GDT_F32, 8, 16), graph_dims_of(1, 1));
  int a = graph_binary(g, GOP_ADD, x, bb); /* cheap, two consumers: duplicated */
  int t = graph_unary(g, GOP_TANH, a), s = graph_binary(g, GOP_MUL, a, a);
  (void)t, (void)s;
  fuse_plan *p = fuse_graph_dup(g);
  cr_assert(p->dup[bb] && p->dup[a]);
  /* two kernels, each reading x (512 B) and b (64 B), writing 512 B */
  graph_cost c = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(c.bytes_read, 2 * (512 + 64), 1e-9);
  cr_assert_float_eq(c.bytes_written, 2 * 512, 1e-9);
  fuse_free(p);
  graph_free(g);
}
