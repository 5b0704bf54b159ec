/*
** test_opcost.c -- kernel costs read off the lowered IR, cached by
** signature (sim/opcost.h).
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/diag.h"
#include "../sim/fuse.h"
#include "../sim/opcost.h"
#include "../workloads/model.h"

#define SHAPE(dt, ...) ((graph_shape){dt, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* llama3-8b's training step cut to one layer, sequence 128, micro-batch 1:
** ~500 ops, the kinds of a transformer step. */
static model *one_layer(void) {
  diag *d = diag_new();
  model_opts o = {.seq_len = 128, .global_batch = 1, .only_layers = 1};
  model *m = model_load("llama3-8b", &o, d);
  if (!m) diag_print(d, stderr);
  cr_assert_not_null(m);
  diag_free(d);
  return m;
}

static bool same(const graph_cost *a, const graph_cost *b) {
  for (int t = 0; t < GDT_COUNT; t++)
    if (a->flops[t] != b->flops[t]) return false;
  return a->transcendentals == b->transcendentals && a->bytes_read == b->bytes_read &&
         a->bytes_written == b->bytes_written;
}

/* Distinct kernel signatures of p, counted here with a plain list. */
static int distinct_signatures(const graph *g, const fuse_plan *p) {
  char **seen = calloc((size_t)p->n_groups, sizeof *seen);
  int n = 0, ops[1024];
  char *sig = malloc(65536);
  for (int k = 0; k < p->n_groups; k++) {
    if (p->size[k] == 0) continue;
    int m = fuse_members(p, g, k, ops, 1024);
    cr_assert_gt(m, 0);
    cr_assert(opcost_kernel_signature(g, ops, m, sig, 65536));
    int i;
    for (i = 0; i < n && strcmp(seen[i], sig) != 0; i++) {}
    if (i == n) seen[n++] = strdup(sig);
  }
  for (int i = 0; i < n; i++) free(seen[i]);
  free(seen);
  free(sig);
  return n;
}

/* Every kernel's IR count equals the fusion pass's cost; each signature
** is lowered once, and a second pass over the step is all cache hits. */
Test(opcost, ir_counts_equal_the_pass_and_each_signature_is_lowered_once, .timeout = 60) {
  model *m = one_layer();
  fuse_plan *p = fuse_graph_dup(m->g);
  opcost *c = opcost_new(OPCOST_IR);
  char err[256];
  int kernels = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < p->n_groups; k++) {
      if (p->size[k] == 0) continue;
      graph_cost got, want = fuse_group_cost(p, m->g, k);
      cr_assert_eq(opcost_kernel(c, m->g, p, k, &got, err, sizeof err), 0, "%s", err);
      cr_assert(same(&got, &want), "kernel %d (%s): IR flops %g bytes %g, pass flops %g bytes %g",
                k, graph_get(m->g, p->root[k])->name, graph_cost_flops(&got),
                got.bytes_read + got.bytes_written, graph_cost_flops(&want),
                want.bytes_read + want.bytes_written);
      kernels += pass == 0;
    }
  opcost_stats st = opcost_get_stats(c);
  int sigs = distinct_signatures(m->g, p);
  cr_assert_gt(sigs, 50, "a transformer layer has many kinds of kernel: %d", sigs);
  cr_assert_lt(sigs, kernels, "and repeats some: %d of %d", sigs, kernels);
  cr_assert_eq(st.asked, 2 * kernels);
  cr_assert_eq(st.declared, 0, "the layer has no custom-call");
  cr_assert_eq(st.lowered, sigs);
  cr_assert_eq(st.hits, 2 * kernels - sigs);
  cr_assert_eq(st.differ, 0);
  opcost_free(c);
  fuse_free(p);
  model_free(m);
}

/* The formula source lowers nothing; a custom-call keeps its declared cost. */
Test(opcost, formula_source_and_custom_calls_keep_the_pass_cost) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 64, 64), 0);
  int y = graph_custom(g, "attn/__cudnn$fmha", SHAPE(GDT_F32, 64, 64), &x, 1, 1e6, 0, 32768);
  int z = graph_unary(g, GOP_EXP, y);
  (void)z;
  fuse_plan *p = fuse_graph_dup(g);
  char err[256];
  for (int src = 0; src < 2; src++) {
    opcost *c = opcost_new(src ? OPCOST_FORMULA : OPCOST_IR);
    for (int k = 0; k < p->n_groups; k++) {
      if (p->size[k] == 0) continue;
      graph_cost got, want = fuse_group_cost(p, g, k);
      cr_assert_eq(opcost_kernel(c, g, p, k, &got, err, sizeof err), 0, "%s", err);
      cr_assert(same(&got, &want));
    }
    opcost_stats st = opcost_get_stats(c);
    cr_assert_eq(st.asked, 2);
    cr_assert_eq(st.declared, src ? 2 : 1, "source %d: %lld declared", src, (long long)st.declared);
    cr_assert_eq(st.lowered, src ? 0 : 1);
    opcost_free(c);
  }
  /* the custom-call's kernel carries its declared FLOPs */
  graph_cost cc = fuse_group_cost(p, g, p->group_of[y]);
  cr_assert_float_eq(graph_cost_flops(&cc), 1e6, 1e-9);
  fuse_free(p);
  graph_free(g);
}

/* Same shapes, different contraction: x^T x and x x^T are different
** kernels, and a cache keyed on shapes alone would mix them up. */
Test(opcost, signatures_tell_dimension_numbers_apart) {
  graph *g = graph_new("t");
  int x = graph_parameter(g, "x", SHAPE(GDT_F32, 32, 32), 0);
  graph_dims none = {0};
  int a = graph_dot(g, x, x, none, none, graph_dims_of(1, 0), graph_dims_of(1, 0), GDT_F32);
  int b = graph_dot(g, x, x, none, none, graph_dims_of(1, 1), graph_dims_of(1, 1), GDT_F32);
  char sa[512], sb[512];
  opcost_op_signature(g, a, sa, sizeof sa);
  opcost_op_signature(g, b, sb, sizeof sb);
  cr_assert_str_neq(sa, sb);
  cr_assert(strstr(sa, "f32[32,32] f32[32,32] -> f32[32,32]"), "%s", sa);
  graph_free(g);
}

typedef struct {
  const graph *g;
  const fuse_plan *p;
  opcost *c;
  graph_cost *out;
} job;

static void *cost_all(void *arg) {
  job *j = arg;
  char err[256];
  for (int k = 0; k < j->p->n_groups; k++)
    if (j->p->size[k] && opcost_kernel(j->c, j->g, j->p, k, &j->out[k], err, sizeof err) != 0)
      return (void *)1;
  return NULL;
}

/* Four threads sharing one cache get what one thread gets alone. */
Test(opcost, threads_share_one_cache, .timeout = 60) {
  model *m = one_layer();
  fuse_plan *p = fuse_graph_dup(m->g);
  opcost *alone = opcost_new(OPCOST_IR), *shared = opcost_new(OPCOST_IR);
  graph_cost *want = calloc((size_t)p->n_groups, sizeof *want);
  job j0 = {m->g, p, alone, want};
  cr_assert_null(cost_all(&j0));
  pthread_t t[4];
  job jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (job){m->g, p, shared, calloc((size_t)p->n_groups, sizeof(graph_cost))};
    cr_assert_eq(pthread_create(&t[i], NULL, cost_all, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    cr_assert_null(rc);
    for (int k = 0; k < p->n_groups; k++) cr_assert(same(&jobs[i].out[k], &want[k]), "thread %d kernel %d", i, k);
    free(jobs[i].out);
  }
  opcost_stats a = opcost_get_stats(alone), s = opcost_get_stats(shared);
  cr_assert_eq(s.asked, 4 * a.asked);
  /* two threads may lower one signature at once; it counts once, so the
  ** counts are what one thread alone gives */
  cr_assert_eq(s.lowered, a.lowered);
  cr_assert_eq(s.hits, 4 * a.asked - a.lowered);
  cr_assert_eq(s.differ, 0);
  free(want);
  opcost_free(alone);
  opcost_free(shared);
  fuse_free(p);
  model_free(m);
}
