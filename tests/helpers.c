/*
** helpers.c -- see helpers.h. Compiled into the unit-test binary only.
*/
#include "helpers.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include "../workloads/model.h"

#include "../hw_models/hw_catalog.h"
#include "../cli/cli.h"
#include "../sim/coll.h"
#include "../sim/framework.h"
#include "../sim/step.h"

th_run th_cli(const char *first, ...) {
  char *argv[64];
  int argc = 0;
  argv[argc++] = "tpusim";
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;

  th_run r = {0};
  size_t on, en;
  FILE *out = open_memstream(&r.out, &on);
  FILE *err = open_memstream(&r.err, &en);
  cr_assert(out && err);
  r.rc = cli_main(argc, argv, out, err);
  fclose(out);
  fclose(err);
  return r;
}

void th_run_free(th_run *r) {
  free(r->out);
  free(r->err);
}

const char *th_builtin_text(const char *name) {
  static const char *const json[] = {".json", NULL};
  const embedded_file *e = embedded_find(hw_files, hw_files_count, name, json);
  return e ? (const char *)e->data : NULL;
}

char *th_replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  cr_assert(at, "mutation target not found: %s", from);
  size_t head = (size_t)(at - text), lf = strlen(from), lt = strlen(to);
  size_t total = strlen(text) - lf + lt;
  char *s = malloc(total + 1);
  memcpy(s, text, head);
  memcpy(s + head, to, lt);
  strcpy(s + head + lt, at + lf);
  return s;
}

void th_where(const char *text, const char *needle, char *buf, size_t n) {
  const char *at = strstr(text, needle);
  cr_assert(at, "needle not found: %s", needle);
  int line = 1, col = 1;
  for (const char *p = text; p < at; p++) {
    if (*p == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  snprintf(buf, n, "%d:%d", line, col);
}

const char *th_write_temp(const char *name, const char *text) {
  static char path[1024]; /* test-only; each Criterion test runs in its own process */
  mkdir("tests/out", 0755);
  snprintf(path, sizeof path, "tests/out/%s", name);
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
  return path;
}

hw_catalog *th_catalog(void) {
  diag *d = diag_new();
  hw_catalog *c = hw_catalog_new();
  int rc = hw_catalog_load_builtin(c, d);
  if (rc != 0) diag_print(d, stderr);
  cr_assert_eq(rc, 0, "built-in hardware files must load cleanly");
  diag_free(d);
  return c;
}

const hw_model *th_hw(const hw_catalog *c, const char *name) {
  const hw_model *m = hw_catalog_find(c, name);
  cr_assert_not_null(m, "missing built-in hardware '%s'", name);
  return m;
}

char *th_slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  cr_assert(len > 0, "%s is empty", path);
  char *b = malloc((size_t)len + 1);
  cr_assert(b);
  cr_assert(fread(b, 1, (size_t)len, f) == (size_t)len, "short read of %s", path);
  b[len] = '\0';
  fclose(f);
  if (n) *n = (size_t)len;
  return b;
}

/* Built without the Makefile: the shared folder beside the current
** directory, which the tests expect to be the repository's root. */
#ifndef TPUSIM_SHARED_DEFAULT
#define TPUSIM_SHARED_DEFAULT "../shared"
#endif

const char *th_shared(const char *fmt, ...) {
  static char path[1024];
  const char *env = getenv("TPUSIM_SHARED");
  bool from_env = env && *env;
  int k = snprintf(path, sizeof path, "%s/", from_env ? env : TPUSIM_SHARED_DEFAULT);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(path + k, sizeof path - (size_t)k, fmt, ap);
  va_end(ap);
  if (access(path, R_OK) != 0)
    cr_assert_fail("shared reference data not found: %s: %s\n  the folder is TPUSIM_SHARED=%s "
                   "(%s); set TPUSIM_SHARED to the folder holding reference/ "
                   "(CI puts shared/ beside the clone)",
                   path, strerror(errno), from_env ? env : TPUSIM_SHARED_DEFAULT,
                   from_env ? "from the environment" : "the default: beside the repository");
  return path;
}

model *th_model_opts(const char *src, model_opts o) {
  diag *d = diag_new();
  model *m = model_load(src, &o, d);
  if (!m) diag_print(d, stderr);
  cr_assert_not_null(m, "%s does not load", src);
  diag_free(d);
  return m;
}

model *th_model(const char *src, int64_t seq) {
  return th_model_opts(src, (model_opts){.seq_len = seq});
}

double th_layer0_flops(const model *m, graph_phase phase) {
  double f = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if ((op->kind != GOP_DOT && op->kind != GOP_CONV) || op->phase != phase || op->layer != 0)
      continue;
    graph_cost c = graph_op_cost(m->g, i);
    f += graph_cost_flops(&c) * (double)op->count;
  }
  return f;
}

void th_assert_backward_about_twice(const char *src, int kind) {
  model *m = th_model_opts(src, (model_opts){.global_batch = 1, .seq_len = 1024, .only_layers = 1,
                                             .one_kind = true, .layer_kind = kind});
  double f = th_layer0_flops(m, GRAPH_FORWARD), b = th_layer0_flops(m, GRAPH_BACKWARD);
  cr_assert(f > 0 && b / f > 1.8 && b / f < 2.2, "%s: backward / forward = %.3f", src, b / f);
  model_free(m);
}

void th_assert_cp2_a2as(const char *src, int kind, int64_t layers, double in_width,
                        double out_width) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = th_model(src, 8192);
  char err[512];
  plan p = {.chips = 16, .tp = 1, .pp = 1, .ep = 1, .cp = 2, .mbs = 1, .vp = 1, .slices = 1,
            .gbs = 8, .seq = 8192, .schedule = PLAN_1F1B, .op_costs = OPCOST_FORMULA,
            .precision = GDT_BF16};
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result a, b;
  cr_assert_eq(step_costs(m, h, &p, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(a.kind_n[kind], layers);
  double tokens = 8192 / 2;
  double in = coll_time_s(h, 2, 2, COLL_ALL_TO_ALL, tokens * in_width * 2, 1, 0, COLL_AUTO, false,
                          err, sizeof err);
  double out = coll_time_s(h, 2, 2, COLL_ALL_TO_ALL, tokens * out_width * 2, 1, 0, COLL_AUTO,
                           false, err, sizeof err);
  cr_assert(in > out && out > 0, "%g %g", in, out);
  cr_assert_float_eq(a.kind_comm_fwd_s[kind], in + out, 1e-15);
  cr_assert_float_eq(a.kind_comm_bwd_s[kind], in + out, 1e-15);
  p.cp = 1, p.chips = 8;
  cr_assert_eq(step_costs(m, h, &p, &b, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(b.kind_comm_fwd_s[kind], 0, 1e-15);
  model_free(m);
  hw_catalog_free(c);
}
