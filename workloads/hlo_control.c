/*
** hlo_control.c -- control flow: call and fusion (the callee inlined),
** async wrappers, while loops (the body imported once, its ops counted
** trip-count times) and the trip-count derivation, hlo_while_trip_count.
**
** Separate from the array handlers (hlo_ops.c): these evaluate other
** computations, and the trip count reads the loop's condition and body.
*/
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* ---- while trip counts ---- */

/* Which element of the computation's parameter operand o reads: k for
** %p#k or get-tuple-element(%p), index=k; -2 for a non-tuple parameter
** itself; -1 for anything else. */
static int param_elem(const hlo_comp *c, const hlo_operand *o) {
  const hlo_inst *d = &c->insts[o->inst];
  if (d->param_no == 0) return o->index >= 0 ? o->index : (d->shape.n < 0 ? -2 : -1);
  if (o->index >= 0 || !op_is(d, "get-tuple-element") || d->n_ops != 1) return -1;
  const hlo_inst *p = &c->insts[d->ops[0].inst];
  const hlo_attr *a = hlo_attr_get(d, "index");
  int64_t k;
  if (p->param_no != 0 || d->ops[0].index >= 0 || !a || hlo_parse_ints(a->val, &k, 1) != 1)
    return -1;
  return (int)k;
}

/* An integer scalar constant, possibly through copy/convert/reshape. */
static bool const_of(const hlo_comp *c, const hlo_operand *o, int64_t *v) {
  for (int hops = 0; hops < 8 && o->index < 0; hops++) {
    const hlo_inst *d = &c->insts[o->inst];
    if (hlo_literal_int(d, v)) return true;
    if (d->n_ops != 1 ||
        !(op_is(d, "copy") || op_is(d, "convert") || op_is(d, "reshape") || op_is(d, "bitcast")))
      return false;
    o = &d->ops[0];
  }
  return false;
}

/* The per-iteration step of element k in the body: its ROOT (tuple) slot k
** must be add(counter, constant) or subtract(counter, constant). */
static bool loop_step(const hlo_comp *body, int k, int64_t *step) {
  const hlo_inst *r = &body->insts[body->root];
  const hlo_inst *u = r;
  if (k >= 0) {
    if (!op_is(r, "tuple") || k >= r->n_ops || r->ops[k].index >= 0) return false;
    u = &body->insts[r->ops[k].inst];
  }
  bool sub = op_is(u, "subtract");
  if ((!op_is(u, "add") && !sub) || u->n_ops != 2) return false;
  for (int i = 0; i < 2; i++) {
    if (param_elem(body, &u->ops[i]) != k || !const_of(body, &u->ops[1 - i], step)) continue;
    if (sub && i == 1) return false; /* constant - counter */
    if (sub) *step = -*step;
    return true;
  }
  return false;
}

/* Iterations of `for (i = start; i DIR limit; i += step)`, or -1 when it
** never ends. In unsigned arithmetic: the text may hold any int64. */
static int64_t iterations(int64_t start, int64_t limit, int64_t step, hlo_str dir) {
  if (step == 0) return -1;
  bool up = step > 0, ne = str_is(dir, "NE");
  bool incl = str_is(dir, "LE") || str_is(dir, "GE");
  if (!ne && !incl && !str_is(dir, up ? "LT" : "GT")) return -1;
  if (incl && !str_is(dir, up ? "LE" : "GE")) return -1;
  uint64_t s = up ? (uint64_t)step : 0 - (uint64_t)step;
  int64_t from = up ? start : limit, to = up ? limit : start; /* the distance to travel */
  if (to < from) return ne ? -1 : 0;
  uint64_t d = (uint64_t)to - (uint64_t)from;
  if (ne && d % s != 0) return -1; /* steps over the limit: never equal */
  uint64_t n = incl ? d / s + 1 : d / s + (d % s != 0);
  return n > INT64_MAX ? -1 : (int64_t)n;
}

static hlo_str flip(hlo_str dir) {
  static const char *const PAIRS[][2] = {{"LT", "GT"}, {"GT", "LT"}, {"LE", "GE"}, {"GE", "LE"}};
  for (int i = 0; i < 4; i++)
    if (str_is(dir, PAIRS[i][0])) return (hlo_str){PAIRS[i][1], 2};
  return dir;
}

/* known_trip_count={"n":"32"} in the while's backend_config, or -1. */
static int64_t known_trip(const hlo_inst *w) {
  cJSON *j = hlo_backend_json(w);
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(j, "known_trip_count"), "n");
  int64_t t = -1;
  if (cJSON_IsString(n) && n->valuestring[0]) {
    char *e;
    long long k = strtoll(n->valuestring, &e, 10);
    if (!*e && k >= 0) t = k;
  } else if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 9e18) {
    t = (int64_t)n->valuedouble;
  }
  cJSON_Delete(j);
  return t;
}

/* The trip count of while w: XLA's known_trip_count if given, else from the
** condition `counter DIR limit`, the body's `counter + step` and the
** counter's initial constant. init is the loop state's value when building;
** NULL to read the initial value from the text of site instead. */
static int64_t trip_count(const hlo_module *m, const hlo_comp *site, const hlo_inst *w,
                          const hlo_val *init) {
  int64_t t = known_trip(w);
  if (t >= 0) return t;
  const hlo_attr *ca = hlo_attr_get(w, "condition"), *ba = hlo_attr_get(w, "body");
  int ci = ca ? hlo_comp_find(m, ca->val) : -1, bi = ba ? hlo_comp_find(m, ba->val) : -1;
  if (ci < 0 || bi < 0 || w->n_ops != 1) return -1;
  const hlo_comp *cond = &m->comps[ci], *body = &m->comps[bi];
  const hlo_inst *r = &cond->insts[cond->root];
  const hlo_attr *da = hlo_attr_get(r, "direction");
  if (!op_is(r, "compare") || r->n_ops != 2 || !da) return -1;
  int k = -1;
  int64_t limit = 0, start, step;
  hlo_str dir = da->val;
  for (int i = 0; i < 2 && k == -1; i++) {
    int e = param_elem(cond, &r->ops[i]);
    if (e != -1 && const_of(cond, &r->ops[1 - i], &limit)) {
      k = e;
      if (i == 1) dir = flip(dir);
    }
  }
  if (k == -1 || !loop_step(body, k, &step)) return -1;
  if (init) {
    const hlo_val *v = k >= 0 ? (init->n > k ? init->el[k] : NULL) : init;
    if (!v || !v->known) return -1;
    start = v->k;
  } else {
    const hlo_operand *o = &w->ops[0];
    const hlo_inst *tup = &site->insts[o->inst];
    if (k >= 0) {
      if (o->index >= 0 || !op_is(tup, "tuple") || k >= tup->n_ops) return -1;
      o = &tup->ops[k];
    }
    if (!const_of(site, o, &start)) return -1;
  }
  return iterations(start, limit, step, dir);
}

int64_t hlo_while_trip_count(const hlo_module *m, const char *name) {
  hlo_str s = {name, (int)strlen(name)};
  for (int i = 0; i < m->n_comps; i++) {
    int k = hlo_inst_find(&m->comps[i], s);
    if (k >= 0 && op_is(&m->comps[i].insts[k], "while"))
      return trip_count(m, &m->comps[i], &m->comps[i].insts[k], NULL);
  }
  return -1;
}
/* ---- control flow ---- */

/* call (to_apply=) and fusion (calls=): the callee's ops, inlined (or
** counted, when this caller repeats a large callee: hlo_call). */
hlo_val *hlo_h_call(hlo_ctx *x) {
  int ci = hlo_attr_comp(x, hlo_attr_get(x->in, "calls") ? "calls" : "to_apply");
  return ci < 0 ? NULL : hlo_call(x, ci, x->ops, x->n);
}

/* async-start(ops), calls=%c: written ((operands), result, context...). */
hlo_val *hlo_h_async_start(hlo_ctx *x) {
  int ci = hlo_attr_comp(x, "calls");
  hlo_val *r = ci < 0 ? NULL : hlo_call(x, ci, x->ops, x->n);
  hlo_val *known[2] = {hlo_h_tuple(x), r};
  return r && known[0] ? hlo_fill_like(x, known, 2) : NULL;
}

/* copy-start: written (operand, copy, context). */
hlo_val *hlo_h_copy_start(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  hlo_val *c = a < 0 ? NULL : hlo_val_new(x->b, graph_unary(x->b->g, GOP_COPY, a));
  hlo_val *known[2] = {x->ops[0], c};
  return c ? hlo_fill_like(x, known, 2) : NULL;
}

/* The body is imported once; its ops run trip-count times (times the
** counts of enclosing loops). */
hlo_val *hlo_h_while(hlo_ctx *x) {
  hlo_builder *b = x->b;
  int ci = hlo_attr_comp(x, "condition"), bi = ci < 0 ? -1 : hlo_attr_comp(x, "body");
  if (bi < 0) return NULL;
  int64_t trip = trip_count(b->m, x->c, x->in, x->ops[0]);
  const hlo_comp *cond = &b->m->comps[ci];
  if (trip < 0)
    return hlo_berr(x,
                "cannot derive the trip count: the condition %.*s must compare a loop counter "
                "(starting at a constant, stepped by a constant in %.*s) with a constant, as "
                "JAX scans and fori_loops do, or the while must carry "
                "backend_config={\"known_trip_count\":{\"n\":\"N\"}}",
                cond->name.n, cond->name.s, b->m->comps[bi].name.n, b->m->comps[bi].name.s);
  if (trip == 0) return x->ops[0]; /* the body never runs */
  if (trip > INT64_MAX / b->count) return hlo_berr(x, "nested trip counts overflow");
  int64_t outer = b->count;
  b->count *= trip;
  hlo_val *r = hlo_eval_comp(x, bi, x->ops, 1);
  b->count = outer;
  graph_set_count(b->g, outer);
  return r;
}

hlo_val *hlo_h_unsupported(hlo_ctx *x) {
  static const struct {
    const char *op, *why;
  } WHY[] = {
      {"conditional", "a static graph cannot choose a branch"},
      {"fft", "complex numbers have no graph element type"},
      {"cholesky", "no cost formula yet"},
      {"triangular-solve", "no cost formula yet"},
  };
  for (size_t i = 0; i < sizeof WHY / sizeof *WHY; i++)
    if (op_is(x->in, WHY[i].op)) return hlo_berr(x, "not supported: %s", WHY[i].why);
  return hlo_berr(x, "not supported");
}

