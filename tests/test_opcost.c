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
#include "../sim/lower.h"
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

/* The distinct strings of a list, counted here with a plain search. */
static int add_distinct(char ***seen, int *n, const char *s) {
  for (int i = 0; i < *n; i++)
    if (strcmp((*seen)[i], s) == 0) return i;
  (*seen)[*n] = strdup(s);
  return (*n)++;
}

static void free_distinct(char **seen, int n) {
  for (int i = 0; i < n; i++) free(seen[i]);
  free(seen);
}

/* Whether the lowering takes every op of the list. */
static bool all_lowerable(const graph *g, const int *ops, int n) {
  char why[160];
  for (int i = 0; i < n; i++)
    if (!lower_supported(g, ops[i], why, sizeof why)) return false;
  return true;
}

/* The listing `tpusim lower` prints: one entry per distinct op signature
** and per distinct kernel of two or more lowerable ops, with the uses of
** the step's ops and kernels summed into them -- counted here from the
** graph and the plan directly. */
Test(opcost, listing_lowers_each_distinct_op_and_kernel_once, .timeout = 60) {
  model *m = one_layer();
  const graph *g = m->g;
  int n = graph_count(g);
  fuse_plan *p = fuse_graph_dup(g);
  /* the ops: distinct signatures among those lower_supported takes, and
  ** their executions; the rest (not parameters or constants) not lowered */
  char **seen = calloc((size_t)n, sizeof *seen), sig[1024], why[160];
  int n_sigs = 0, skipped = 0;
  int64_t op_uses = 0;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    if (!lower_supported(g, i, why, sizeof why)) {
      skipped += op->kind != GOP_PARAMETER && op->kind != GOP_CONSTANT;
      continue;
    }
    opcost_op_signature(g, i, sig, sizeof sig);
    add_distinct(&seen, &n_sigs, sig);
    op_uses += op->count;
  }
  free_distinct(seen, n_sigs);
  /* the kernels: groups of two or more lowerable members */
  char **kseen = calloc((size_t)p->n_groups, sizeof *kseen), *ksig = malloc(65536);
  int n_ksigs = 0, *mem = malloc(sizeof(int) * (size_t)n);
  int64_t kernel_uses = 0;
  for (int k = 0; k < p->n_groups; k++) {
    int nm = fuse_members(p, g, k, mem, n);
    if (nm < 2 || !all_lowerable(g, mem, nm)) continue;
    cr_assert(opcost_kernel_signature(g, mem, nm, ksig, 65536));
    add_distinct(&kseen, &n_ksigs, ksig);
    kernel_uses += graph_get(g, p->root[k])->count;
  }
  free_distinct(kseen, n_ksigs);

  lower_module *lm = lower_new("t");
  opcost_listing l;
  char err[512];
  cr_assert_eq(opcost_list(lm, g, p, NULL, &l, err, sizeof err), 0, "%s", err);
  cr_assert_eq(l.n_ops, n_sigs);
  cr_assert_eq(l.n_kernels, n_ksigs);
  cr_assert_gt(l.n_kernels, 10, "a transformer layer fuses: %d kernels", l.n_kernels);
  cr_assert_eq(l.not_lowered + l.collectives + l.custom_calls, skipped);
  cr_assert_eq(l.kernels_not_lowered, 0);
  int64_t u = 0;
  for (int d = 0; d < l.n_ops; d++) {
    const opcost_entry *e = &l.ops[d];
    cr_assert_eq(e->fn, d, "the ops' functions come first, in order");
    cr_assert_eq(e->group, -1);
    cr_assert_eq(e->n_ops, 1);
    opcost_op_signature(g, e->op, sig, sizeof sig);
    cr_assert_str_eq(e->signature, sig);
    graph_cost ir, want = graph_op_cost(g, e->op);
    cr_assert_eq(lower_op_cost(lm, e->fn, &ir, NULL, err, sizeof err), 0, "%s", err);
    cr_assert(graph_cost_close(&ir, &want), "op %s", graph_get(g, e->op)->name);
    u += e->uses;
  }
  cr_assert_eq(u, op_uses, "uses %lld, the graph's lowered op executions %lld", (long long)u,
               (long long)op_uses);
  u = 0;
  for (int d = 0; d < l.n_kernels; d++) {
    const opcost_entry *e = &l.kernels[d];
    cr_assert_eq(e->fn, l.n_ops + d);
    cr_assert_eq(e->op, -1);
    cr_assert_eq(e->n_ops, p->size[e->group]);
    cr_assert_not_null(e->signature);
    cr_assert_not_null(lower_fn_name(lm, e->fn));
    graph_cost ir, want = fuse_group_cost(p, g, e->group);
    cr_assert_eq(lower_op_cost(lm, e->fn, &ir, NULL, err, sizeof err), 0, "%s", err);
    cr_assert(graph_cost_close(&ir, &want), "kernel %s", lower_fn_name(lm, e->fn));
    u += e->uses;
  }
  cr_assert_eq(u, kernel_uses);
  cr_assert_eq(lower_verify(lm, err, sizeof err), 0, "%s", err);
  opcost_listing_free(&l);
  lower_free(lm);

  /* --no-fusion: the same ops, no kernels */
  lm = lower_new("t");
  cr_assert_eq(opcost_list(lm, g, NULL, NULL, &l, err, sizeof err), 0, "%s", err);
  cr_assert_eq(l.n_ops, n_sigs);
  cr_assert_eq(l.n_kernels, 0);
  opcost_listing_free(&l);
  lower_free(lm);

  /* only_op: a member of a fused kernel -- the ops of that name (a
  ** builder may give several the same one: "l0/convert"), and the kernels
  ** holding the last of them */
  int id = -1;
  for (int k = 0; k < p->n_groups && id < 0; k++) {
    int nm = fuse_members(p, g, k, mem, n);
    if (nm >= 2 && all_lowerable(g, mem, nm)) id = mem[0];
  }
  cr_assert_geq(id, 0);
  const graph_op *op = graph_get(g, id);
  seen = calloc((size_t)n, sizeof *seen);
  int named_sigs = 0;
  int64_t named_uses = 0;
  for (int i = 0; i < n; i++)
    if (strcmp(graph_get(g, i)->name, op->name) == 0) {
      opcost_op_signature(g, i, sig, sizeof sig);
      add_distinct(&seen, &named_sigs, sig);
      named_uses += graph_get(g, i)->count;
      id = i;
    }
  free_distinct(seen, named_sigs);
  int holding = 0;
  int64_t holding_uses = 0;
  for (int k = 0; k < p->n_groups; k++) {
    int nm = fuse_members(p, g, k, mem, n);
    bool has = false;
    for (int i = 0; i < nm; i++) has |= mem[i] == id;
    if (!has || nm < 2 || !all_lowerable(g, mem, nm)) continue;
    holding++;
    holding_uses += graph_get(g, p->root[k])->count;
  }
  cr_assert_gt(holding, 0);
  lm = lower_new("t");
  cr_assert_eq(opcost_list(lm, g, p, op->name, &l, err, sizeof err), 0, "%s", err);
  cr_assert_eq(l.n_ops, named_sigs, "%s: %d", op->name, l.n_ops);
  u = 0;
  for (int d = 0; d < l.n_ops; d++) {
    cr_assert_str_eq(graph_get(g, l.ops[d].op)->name, op->name);
    u += l.ops[d].uses;
  }
  cr_assert_eq(u, named_uses);
  cr_assert_eq(l.not_lowered + l.collectives + l.custom_calls, 0);
  cr_assert_geq(l.n_kernels, 1);
  cr_assert_leq(l.n_kernels, holding);
  u = 0;
  for (int d = 0; d < l.n_kernels; d++) {
    int nm = fuse_members(p, g, l.kernels[d].group, mem, n);
    bool has = false;
    for (int i = 0; i < nm; i++) has |= mem[i] == id;
    cr_assert(has, "kernel %d does not hold %s", d, op->name);
    u += l.kernels[d].uses;
  }
  cr_assert_eq(u, holding_uses);
  opcost_listing_free(&l);
  lower_free(lm);

  free(ksig);
  free(mem);
  fuse_free(p);
  model_free(m);
}
