/*
** test_hlo_calls.c -- call graphs the importer must not inline site by
** site: a generated fan-out (computation k calls k+1 twice, 40 levels:
** 2^40 copies if inlined) imports in milliseconds with exact FLOPs, small
** fan-outs stay inlined as before, a later call site is still checked, and
** a call graph that even counting cannot shrink is refused before the build.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "../workloads/hlo.h"
#include "helpers.h"

/* Appends to a growing text. */
typedef struct {
  char *s;
  size_t n, cap;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (t->n + (size_t)need + 1 > t->cap) {
    t->cap = (t->n + (size_t)need + 1) * 2;
    t->s = realloc(t->s, t->cap);
    cr_assert_not_null(t->s);
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)need;
}

/* ENTRY %c0 ... %c(levels-1) each call %c(k+1) twice in a chain; the leaf
** %c(levels) adds f32[4] to itself (4 FLOPs). So 2^levels leaves, 4 * 2^levels
** FLOPs. bad_site: ENTRY's second call passes an f32[8] (a shape error there). */
static char *fanout(int levels, bool bad_site) {
  text t = {0};
  put(&t, "HloModule fanout_%d\n\n", levels);
  put(&t, "%%c%d (a: f32[4]) -> f32[4] {\n  %%a = f32[4]{0} parameter(0)\n", levels);
  put(&t, "  ROOT %%e = f32[4]{0} add(%%a, %%a)\n}\n\n");
  for (int k = levels - 1; k >= 0; k--) {
    bool entry = k == 0;
    put(&t, "%s%%c%d (a: f32[4]%s) -> f32[4] {\n", entry ? "ENTRY " : "", k,
        entry && bad_site ? ", b: f32[8]" : "");
    put(&t, "  %%a = f32[4]{0} parameter(0)\n");
    if (entry && bad_site) put(&t, "  %%b = f32[8]{0} parameter(1)\n");
    put(&t, "  %%x = f32[4]{0} call(%%a), to_apply=%%c%d\n", k + 1);
    put(&t, "  ROOT %%y = f32[4]{0} call(%%%s), to_apply=%%c%d\n}\n\n",
        entry && bad_site ? "b" : "x", k + 1);
  }
  return t.s;
}

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static double total_flops(const graph *g) {
  double f = 0;
  for (int i = 0; i < graph_count(g); i++) {
    graph_cost c = graph_op_cost(g, i);
    f += graph_cost_flops(&c) * (double)graph_get(g, i)->count;
  }
  return f;
}

/* 40 levels inlined site by site is 2^40 adds; counted, it is a few thousand
** ops (the subtrees under HLO_INLINE_REPEAT stay inlined) with the same
** FLOPs. Before counting, 20 levels took 2.1 s and 866 MB and 40 never
** finished. */
Test(hlo_calls, fanout_40_levels_imports_in_milliseconds) {
  char *t = fanout(40, false);
  diag *d = diag_new();
  double t0 = cpu_s();
  graph *g = hlo_import("fanout.hlo", t, strlen(t), d);
  double took = cpu_s() - t0;
  cr_assert_not_null(g, "%s", diag_count(d) ? diag_message(d, 0) : "");
  cr_assert_lt(took, 0.5, "import took %.3f s of CPU", took);
  cr_assert_lt(graph_count(g), 20000, "%d ops", graph_count(g));
  cr_assert_float_eq(total_flops(g), 4.0 * (double)(1LL << 40), 0.5);
  int64_t most = 0;
  for (int i = 0; i < graph_count(g); i++)
    if (graph_get(g, i)->count > most) most = graph_get(g, i)->count;
  cr_assert_gt(most, 1LL << 20, "no op is counted: the calls were inlined");
  graph_free(g);
  diag_free(d);
  free(t);
}

/* Small repeats stay inlined at each site, exactly as before counting
** existed: one add per leaf call, every count 1. */
Test(hlo_calls, small_fanout_is_inlined_at_every_site) {
  char *t = fanout(8, false);
  diag *d = diag_new();
  graph *g = hlo_import("fanout.hlo", t, strlen(t), d);
  cr_assert_not_null(g, "%s", diag_count(d) ? diag_message(d, 0) : "");
  cr_assert_eq(graph_count(g), 256 + 1); /* the adds and ENTRY's parameter */
  for (int i = 0; i < graph_count(g); i++)
    cr_assert_eq(graph_get(g, i)->count, 1, "op %d counted %lld times", i,
                 (long long)graph_get(g, i)->count);
  cr_assert_float_eq(total_flops(g), 4.0 * 256, 0.5);
  graph_free(g);
  diag_free(d);
  free(t);
}

/* A counted callee's later sites are not evaluated, but their operands are
** still checked against the callee's parameters, at the site. */
Test(hlo_calls, a_later_site_is_still_checked) {
  char *t = fanout(20, true);
  char place[32], want[64];
  th_where(t, "%y = f32[4]{0} call(%b)", place, sizeof place);
  snprintf(want, sizeof want, "fanout.hlo:%s: ", place);
  diag *d = diag_new();
  cr_assert_null(hlo_import("fanout.hlo", t, strlen(t), d));
  cr_assert_eq(diag_count(d), 1);
  const char *msg = diag_message(d, 0);
  cr_assert_eq(strncmp(msg, want, strlen(want)), 0, "got \"%s\", want \"%s...\"", msg, want);
  cr_assert_not_null(strstr(msg, "c1's parameter %a is f32[4], this call passes f32[8]"), "%s",
                     msg);
  diag_free(d);
  free(t);
}

/* tests/data/hlo/bad-call-fanout.hlo: no caller repeats a callee, so counting
** does not help and inlining would make ~5e8 ops. Refused by the size
** estimate, before any op is made: fast, whatever the size. */
Test(hlo_calls, too_large_a_call_graph_is_refused_before_the_build) {
  double t0 = cpu_s();
  diag *d = diag_new();
  cr_assert_null(hlo_import_file("tests/data/hlo/bad-call-fanout.hlo", d));
  double took = cpu_s() - t0;
  cr_assert_lt(took, 0.5, "refusing took %.3f s of CPU", took);
  cr_assert_eq(diag_count(d), 1);
  cr_assert_not_null(strstr(diag_message(d, 0), "past the limit of 4194304 ops"), "%s",
                     diag_message(d, 0));
  diag_free(d);
}
