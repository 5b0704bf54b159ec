/*
** test_fuse.c -- fusion decisions and the HBM bytes they save, against
** hand counts.
*/
#include <criterion/criterion.h>

#include "../sim/fuse.h"
#include "../workloads/graph.h"

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
** e = exp(a) then feeds two multiplies: an f32 exp is one fast GPU
** instruction (XLA's GPU rule), so it is recomputed too; l = log(a) feeding
** two multiplies is expensive, so it is stored either way. */
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
  /* an f32 exp with two consumers is recomputed (XLA's GPU rule)... */
  int m1 = graph_binary(g, GOP_MUL, e, x), m2 = graph_binary(g, GOP_MUL, e, y);
  (void)m1, (void)m2;
  p = fuse_graph_dup(g);
  cr_assert(p->dup[e]);
  fuse_free(p);
  /* ... an expensive producer (log) stays a stored value */
  int l = graph_unary(g, GOP_LOG, a);
  int m3 = graph_binary(g, GOP_MUL, l, x), m4 = graph_binary(g, GOP_MUL, l, y);
  (void)m3, (void)m4;
  p = fuse_graph_dup(g);
  cr_assert(!p->dup[l]);
  cr_assert_geq(p->group_of[l], 0);
  cr_assert(p->leaves[l]);
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

/* ---- fused kernels beyond loop fusion, lowered as one function each:
** the IR count equals fuse_group_cost (and the hand count), and the JIT'd
** kernel equals the composed C reference ---- */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../sim/lower.h"

/* group k's members in graph order */
static int members(const fuse_plan *p, int k, int *ops) {
  int n = 0;
  for (int i = p->first[k]; i <= p->root[k]; i++)
    if (p->group_of[i] == k) ops[n++] = i;
  return n;
}

/* Lowers group k, asserts its IR count equals fuse_group_cost and `hand`
** (flops in dt, transcendentals, bytes), and returns the O2 JIT's kernel. */
static void *lower_group(const fuse_plan *p, const graph *g, int k, graph_dtype dt,
                         graph_cost hand, lower_module **m, lower_jit **j) {
  int ops[64], n = members(p, k, ops);
  *m = lower_new("t");
  char err[512] = "";
  int f = lower_fused(*m, g, ops, n, err, sizeof err);
  cr_assert_geq(f, 0, "%s", err);
  cr_assert_eq(lower_verify(*m, err, sizeof err), 0, "%s", err);
  graph_cost ir, want = fuse_group_cost(p, g, k);
  cr_assert_eq(lower_op_cost(*m, f, &ir, NULL, err, sizeof err), 0, "%s", err);
  for (int d = 0; d < GDT_COUNT; d++)
    cr_assert_float_eq(ir.flops[d], want.flops[d], 1e-9, "flops[%s]: IR %g, fusion %g",
                       graph_dtype_name(d), ir.flops[d], want.flops[d]);
  cr_assert_float_eq(ir.transcendentals, want.transcendentals, 1e-9);
  cr_assert_float_eq(ir.bytes_read, want.bytes_read, 1e-9, "read: IR %g, fusion %g", ir.bytes_read, want.bytes_read);
  cr_assert_float_eq(ir.bytes_written, want.bytes_written, 1e-9);
  cr_assert_float_eq(want.flops[dt], hand.flops[dt], 1e-9, "hand flops %g vs %g", want.flops[dt], hand.flops[dt]);
  cr_assert_float_eq(want.transcendentals, hand.transcendentals, 1e-9);
  cr_assert_float_eq(want.bytes_read, hand.bytes_read, 1e-9);
  cr_assert_float_eq(want.bytes_written, hand.bytes_written, 1e-9);
  cr_assert_eq(lower_optimize(*m, 2, err, sizeof err), 0, "%s", err);
  *j = lower_jit_new(*m, err, sizeof err);
  cr_assert_not_null(*j, "%s", err);
  void *fp = lower_jit_lookup(*j, *m, f, err, sizeof err);
  cr_assert_not_null(fp, "%s", err);
  return fp;
}

static float bf(float v) { /* round to bf16 and back, nearest even */
  uint32_t u;
  memcpy(&u, &v, 4);
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  memcpy(&v, &u, 4);
  return v;
}

Test(fuse, dot_with_absorbed_bias_and_gelu_lowers_as_one_kernel) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 8, 16), 0);
  int w = graph_parameter(g, "w", SHAPE(GDT_F32, 16, 32), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_F32, 32), 0);
  int d = graph_matmul(g, x, w);
  int bb = graph_broadcast(g, b, SHAPE(GDT_F32, 8, 32), graph_dims_of(1, 1));
  int e = graph_binary(g, GOP_ADD, d, bb);
  int y = graph_unary(g, GOP_GELU, e);
  fuse_plan *p = fuse_graph(g, true);
  int k = p->group_of[y];
  cr_assert_eq(p->size[k], 4);
  /* by hand: 2*8*32*16 multiply-adds + 256 adds + 256 gelus (8 flops, 1 tanh);
  ** x, w and b read once, y written */
  graph_cost hand = {.transcendentals = 256, .bytes_read = 4.0 * (128 + 512 + 32),
                     .bytes_written = 4.0 * 256};
  hand.flops[GDT_F32] = 2.0 * 8 * 32 * 16 + 256 * 9;
  lower_module *m;
  lower_jit *j;
  void *fp = lower_group(p, g, k, GDT_F32, hand, &m, &j);
  float xs[128], ws[512], bs[32], out[256];
  for (int i = 0; i < 128; i++) xs[i] = (float)((i * 7 % 13) - 6) / 8;
  for (int i = 0; i < 512; i++) ws[i] = (float)((i * 5 % 11) - 5) / 16;
  for (int i = 0; i < 32; i++) bs[i] = (float)(i - 16) / 32;
  /* arguments: outside values in order of first use -- x, w, b -- then y */
  ((void (*)(void *, void *, void *, void *))fp)(xs, ws, bs, out);
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 32; c++) {
      double s = bs[c];
      for (int i = 0; i < 16; i++) s += (double)xs[r * 16 + i] * ws[i * 32 + c];
      double want = 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
      cr_assert(fabs(out[r * 32 + c] - want) <= 1e-5 * (fabs(want) + 1), "[%d,%d] %g vs %g", r, c,
                out[r * 32 + c], want);
    }
  lower_jit_free(j);
  lower_free(m);
  fuse_free(p);
  graph_free(g);
}

/* softmax's denominator: sum(exp(x - broadcast(max))) -- the broadcast is
** absorbed, subtract and exp loop-fuse, the reduce takes them as its input */
Test(fuse, reduce_root_computes_its_fused_input_per_element) {
  for (int half = 0; half < 2; half++) {
    graph_dtype dt = half ? GDT_BF16 : GDT_F32;
    enum { R = 6, C = 40 };
    graph *g = graph_new("t");
    int x = graph_parameter(g, "x", SHAPE(dt, R, C), 0);
    int mx = graph_reduce(g, x, graph_dims_of(1, 1), GRAPH_RED_MAX);
    int mb = graph_broadcast(g, mx, SHAPE(dt, R, C), graph_dims_of(1, 0));
    int sh = graph_binary(g, GOP_SUB, x, mb);
    int ex = graph_unary(g, GOP_EXP, sh);
    int sm = graph_reduce(g, ex, graph_dims_of(1, 1), GRAPH_RED_ADD);
    fuse_plan *p = fuse_graph(g, true);
    int k = p->group_of[sm];
    cr_assert_eq(p->group_of[mb], k);
    cr_assert_eq(p->group_of[ex], k);
    cr_assert_eq(p->size[k], 4);
    double eb = graph_dtype_bits(dt) / 8.0;
    /* by hand: 240 subtracts + 6 x 39 adds, 240 exps; x (240) and the max (6) read once, 6 sums written */
    graph_cost hand = {.transcendentals = R * C, .bytes_read = eb * (R * C + R), .bytes_written = eb * R};
    hand.flops[dt] = R * C + R * (C - 1);
    lower_module *m;
    lower_jit *j;
    void *fp = lower_group(p, g, k, dt, hand, &m, &j);
    float xs[R * C], ms[R];
    uint16_t xh[R * C], mh[R], oh[R];
    float out[R];
    for (int r = 0; r < R; r++) {
      ms[r] = -1e30f;
      for (int c = 0; c < C; c++) {
        float v = bf((float)((r * 31 + c * 17) % 23 - 11) / 4);
        xs[r * C + c] = v;
        ms[r] = v > ms[r] ? v : ms[r];
      }
    }
    for (int i = 0; i < R * C; i++) {
      uint32_t u;
      memcpy(&u, &xs[i], 4);
      xh[i] = (uint16_t)(u >> 16);
    }
    for (int r = 0; r < R; r++) {
      uint32_t u;
      memcpy(&u, &ms[r], 4);
      mh[r] = (uint16_t)(u >> 16);
    }
    /* outside values in order of first use: the broadcast (first member) reads the max */
    if (half) ((void (*)(void *, void *, void *))fp)(mh, xh, oh);
    else ((void (*)(void *, void *, void *))fp)(ms, xs, out);
    for (int r = 0; r < R; r++) {
      double want = 0;
      for (int c = 0; c < C; c++) want += exp((double)xs[r * C + c] - ms[r]);
      double got = out[r];
      if (half) {
        uint32_t u = (uint32_t)oh[r] << 16;
        float f;
        memcpy(&f, &u, 4);
        got = f;
      }
      cr_assert(fabs(got - want) <= (half ? 1.0 / 128 : 1e-5) * want, "%s row %d: %g vs %g",
                graph_dtype_name(dt), r, got, want);
    }
    lower_jit_free(j);
    lower_free(m);
    fuse_free(p);
    graph_free(g);
  }
}

/* A kernel with producers duplicated into it (fuse_graph_dup), as
** simulate times it: d = x - broadcast(mu) is read twice by d * d, so it
** is recomputed, not stored, and the kernel is sum((x - mu)^2) over rows.
** d is computed once per element (the emitter caches a value per index,
** as XLA's does): 240 subtracts + 240 multiplies + 6 x 39 adds = 714
** flops; x and mu read once, the 6 sums written. A scalar product s t
** under a broadcast to [6, 40] is recomputed for each of the 240 elements
** it reaches: 240 multiplies for it, not 1. */
Test(fuse, duplicated_producers_lower_into_the_kernel_with_the_pass_count) {
  enum { R = 6, C = 40 };
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, R, C), 0);
  int mu = graph_parameter(g, "mu", SHAPE(GDT_F32, R), 0);
  int d = graph_binary(g, GOP_SUB, x, graph_broadcast(g, mu, SHAPE(GDT_F32, R, C), graph_dims_of(1, 0)));
  int sq = graph_binary(g, GOP_MUL, d, d);
  int r = graph_reduce(g, sq, graph_dims_of(1, 1), GRAPH_RED_ADD);
  int s = graph_parameter(g, "s", SHAPE(GDT_F32), 0), t = graph_parameter(g, "t", SHAPE(GDT_F32), 0);
  int st = graph_binary(g, GOP_MUL, s, t);
  int y = graph_binary(g, GOP_ADD, x, graph_broadcast(g, st, SHAPE(GDT_F32, R, C), graph_dims_of(0)));
  int z = graph_binary(g, GOP_MUL, y, graph_broadcast(g, st, SHAPE(GDT_F32, R, C), graph_dims_of(0)));
  fuse_plan *p = fuse_graph_dup(g);
  cr_assert(p->dup[d] && p->dup[st]);
  int k = p->group_of[r], ops[16];
  cr_assert_eq(fuse_members(p, g, k, ops, 16), 4); /* broadcast, d, d * d, the sum */
  graph_cost hand = {.bytes_read = 4 * (R * C + R), .bytes_written = 4 * R};
  hand.flops[GDT_F32] = 2 * R * C + R * (C - 1);
  graph_cost got = fuse_group_cost(p, g, k);
  cr_assert_float_eq(got.flops[GDT_F32], hand.flops[GDT_F32], 1e-9, "%g", got.flops[GDT_F32]);
  char err[512] = "";
  for (int pass = 0; pass < 2; pass++) {
    int kk = pass ? p->group_of[z] : k, n = fuse_members(p, g, kk, ops, 16);
    lower_module *m = lower_new("t");
    int f = lower_fused(m, g, ops, n, err, sizeof err);
    cr_assert_geq(f, 0, "%s", err);
    graph_cost ir, want = fuse_group_cost(p, g, kk);
    cr_assert_eq(lower_op_cost(m, f, &ir, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(ir.flops[GDT_F32], want.flops[GDT_F32], 1e-9, "pass %d: IR %g, fusion %g",
                       pass, ir.flops[GDT_F32], want.flops[GDT_F32]);
    cr_assert_float_eq(ir.bytes_read, want.bytes_read, 1e-9);
    cr_assert_float_eq(ir.bytes_written, want.bytes_written, 1e-9);
    lower_free(m);
  }
  /* y + z's kernel: the add, the multiply, and s t at each of 240 elements
  ** (once: both broadcasts read it at the same scalar index) */
  graph_cost yz = fuse_group_cost(p, g, p->group_of[z]);
  cr_assert_float_eq(yz.flops[GDT_F32], 3 * R * C, 1e-9, "%g", yz.flops[GDT_F32]);
  fuse_free(p);
  graph_free(g);
}

/* What fusion saves, summed: kernels and ops as fuse_graph gives them, and
** the unfused HBM bytes never below the fused ones. */
Test(fuse, summary_counts_kernels_and_ops_and_the_bytes_saved) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1024), 0);
  int y = graph_parameter(g, "y", SHAPE(GDT_F32, 1024), 0);
  int a = graph_binary(g, GOP_MUL, x, x);
  int b = graph_binary(g, GOP_ADD, a, y);
  int c = graph_unary(g, GOP_GELU, b);
  int d = graph_unary(g, GOP_EXP, c);
  (void)d;
  fuse_plan *on = fuse_graph(g, true), *dup = fuse_graph_dup(g), *off = fuse_graph(g, false);
  int k_on = 0, k_dup = 0, k_off = 0;
  for (int k = 0; k < on->n_groups; k++) k_on += on->size[k] > 0;
  for (int k = 0; k < dup->n_groups; k++) k_dup += dup->size[k] > 0;
  for (int k = 0; k < off->n_groups; k++) k_off += off->size[k] > 0;
  cr_assert_eq(k_off, 4, "one kernel per op but the parameters");
  graph_cost fon = fuse_total_cost(on, g, -1), foff = fuse_total_cost(off, g, -1);

  fuse_summary s = fuse_summarize(g, on);
  cr_assert_eq(s.kernels, k_on);
  cr_assert_eq(s.ops, k_off);
  cr_assert_float_eq(s.hbm_bytes, fon.bytes_read + fon.bytes_written, 1e-9);
  cr_assert_float_eq(s.unfused_hbm_bytes, foff.bytes_read + foff.bytes_written, 1e-9);
  cr_assert_float_eq(s.hbm_bytes, 3 * 4096, 1e-9); /* x and y in, exp's result out */
  cr_assert_float_eq(s.unfused_hbm_bytes, (1 + 2 + 1 + 1) * 4096 + 4 * 4096, 1e-9);
  cr_assert_geq(s.unfused_hbm_bytes, s.hbm_bytes);

  s = fuse_summarize(g, dup);
  cr_assert_eq(s.kernels, k_dup);
  cr_assert_eq(s.ops, k_off);
  cr_assert_geq(s.unfused_hbm_bytes, s.hbm_bytes);

  /* unfused: every op its own kernel, nothing saved */
  s = fuse_summarize(g, NULL);
  cr_assert_eq(s.kernels, k_off);
  cr_assert_eq(s.ops, k_off);
  cr_assert_float_eq(s.hbm_bytes, s.unfused_hbm_bytes, 1e-9);
  fuse_free(on);
  fuse_free(dup);
  fuse_free(off);
  graph_free(g);
}

/* Eager PyTorch (fuse_graph_eager): ops of one library kernel (a
** composite) fuse, nothing fuses across composites, views stay free. x, y
** f32[1024] (4096 B each): a = x * x and b = a + y in one composite, then
** gelu(b) outside it.
**   XLA:   one kernel: reads x, y (8192 B), writes gelu (4096 B).
**   eager: {a, b} reads x, y and writes b; {gelu} reads b and writes:
**          12288 B read, 8192 B written, two kernels. */
Test(fuse, eager_fuses_inside_a_library_kernel_only) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 1024), 0);
  int y = graph_parameter(g, "y", SHAPE(GDT_F32, 1024), 0);
  int prev, c = graph_begin_composite(g, &prev);
  int a = graph_binary(g, GOP_MUL, x, x);
  int b = graph_binary(g, GOP_ADD, a, y);
  graph_set_composite(g, prev);
  int d = graph_unary(g, GOP_GELU, b);
  cr_assert_eq(graph_get(g, a)->composite, c);
  cr_assert_eq(graph_get(g, d)->composite, -1);
  fuse_plan *p = fuse_graph_dup(g);
  cr_assert_eq(p->group_of[a], p->group_of[d]);
  graph_cost f = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(f.bytes_read, 8192, 1e-9);
  cr_assert_float_eq(f.bytes_written, 4096, 1e-9);
  fuse_free(p);
  p = fuse_graph_eager(g);
  cr_assert_eq(p->group_of[a], p->group_of[b]);
  cr_assert_neq(p->group_of[b], p->group_of[d]);
  graph_cost e = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(e.bytes_read, 12288, 1e-9);
  cr_assert_float_eq(e.bytes_written, 8192, 1e-9);
  cr_assert_float_eq(e.flops[GDT_F32], f.flops[GDT_F32], 1e-9);
  fuse_free(p);
  graph_free(g);
}

/* A linear layer with a bias is addmm, one kernel (the bias in cuBLAS's
** epilogue, its broadcast never stored); the activation after it is a
** kernel of its own in eager mode, where XLA makes it the epilogue too.
** x bf16[8,16], w [16,32], b [32]: the eager GELU reads and writes the
** [8,32] product (512 B each) that XLA keeps on chip. */
Test(fuse, eager_keeps_addmm_whole_and_the_activation_apart) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_BF16, 8, 16), 0);
  int w = graph_parameter(g, "w", SHAPE(GDT_BF16, 16, 32), 0);
  int b = graph_parameter(g, "b", SHAPE(GDT_BF16, 32), 0);
  int prev;
  graph_begin_composite(g, &prev);
  int d = graph_matmul(g, x, w);
  int bb = graph_broadcast(g, b, SHAPE(GDT_BF16, 8, 32), graph_dims_of(1, 1));
  int e = graph_binary(g, GOP_ADD, d, bb);
  graph_set_composite(g, prev);
  int f = graph_unary(g, GOP_GELU, e);
  cr_assert(graph_ok(g));
  fuse_plan *p = fuse_graph_eager(g);
  cr_assert_eq(p->group_of[d], p->group_of[e]);
  cr_assert(p->dup[bb] || p->group_of[bb] == p->group_of[e], "the broadcast is never stored");
  cr_assert_neq(p->group_of[f], p->group_of[e]);
  graph_cost t = fuse_total_cost(p, g, -1);
  fuse_free(p);
  p = fuse_graph_dup(g);
  graph_cost u = fuse_total_cost(p, g, -1);
  cr_assert_float_eq(t.bytes_read - u.bytes_read, 2.0 * 8 * 32, 1e-9);
  cr_assert_float_eq(t.bytes_written - u.bytes_written, 2.0 * 8 * 32, 1e-9);
  fuse_free(p);
  graph_free(g);
}
