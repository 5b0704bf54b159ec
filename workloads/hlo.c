/*
** hlo.c -- see hlo.h. The builder: hlo_build, hlo_import, hlo_import_file.
**
** Two passes. The parser (hlo_parse.c) turns the text into computations of
** instructions: each instruction keeps its written shape, opcode row,
** operands (resolved to instruction indices) and its attributes as raw text
** spans, which handlers read on demand -- so an attribute nobody needs
** (metadata, sharding, frontend_attributes) costs one skip and can never break
** the import. The builder, here, walks ENTRY in dependency order, binding each
** instruction to a value (an array = a graph op id, or a tuple of values)
** through a table of opcode handlers (hlo_ops.c, hlo_coll.c, hlo_control.c,
** hlo_custom.c), and checks every value against the written shape. This file
** holds the evaluation and what every handler uses: values, errors, attribute
** readers and leaves built from a written shape.
**
** Memory: the parser and the builder each allocate from an arena
** (hlo_module.c) freed in one go, so an error anywhere needs no unwinding.
*/
#include "hlo.h"
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/jin.h"

#define HLO_MAX_FILE (256u << 20)
/* Reports at the instruction, naming it; the build stops at the first. */
__attribute__((format(printf, 2, 3))) hlo_val *hlo_berr(hlo_ctx *x, const char *fmt, ...) {
  hlo_builder *b = x->b;
  if (b->failed) return NULL;
  b->failed = true;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int line, col;
  if (!x->in) { /* the ENTRY computation itself */
    jin_line_col(b->m->text, x->c->off, &line, &col);
    diag_error(b->dg, b->m->file, line, col, NULL, "%s", msg);
    return NULL;
  }
  jin_line_col(b->m->text, x->in->off, &line, &col);
  diag_error(b->dg, b->m->file, line, col, NULL, "%%%.*s (%.*s): %s", x->in->name.n, x->in->name.s,
             x->in->opcode.n, x->in->opcode.s, msg);
  return NULL;
}

hlo_val *hlo_val_new(hlo_builder *b, int id) {
  if (id < 0) return NULL;
  hlo_val *v = hlo_arena_alloc(&b->ar, sizeof *v);
  if (!v) return NULL;
  v->id = id;
  v->n = -1;
  return v;
}

hlo_val *hlo_val_tuple(hlo_builder *b, int n) {
  hlo_val *v = hlo_arena_alloc(&b->ar, sizeof *v);
  if (!v) return NULL;
  v->id = -1;
  v->n = n;
  v->el = hlo_arena_alloc(&b->ar, (size_t)(n + 1) * sizeof *v->el);
  return v->el ? v : NULL;
}

hlo_val *hlo_oom(hlo_ctx *x) { return hlo_berr(x, "out of memory"); }

/* The graph op of operand i, which must be an array. */
int hlo_leaf(hlo_ctx *x, int i) {
  if (i >= x->n) {
    hlo_berr(x, "needs at least %d operands, has %d", i + 1, x->n);
    return -1;
  }
  if (x->ops[i]->n >= 0) {
    hlo_berr(x, "operand %d (%%%.*s) is a tuple; an array is needed here", i, x->in->ops[i].name.n,
         x->in->ops[i].name.s);
    return -1;
  }
  return x->ops[i]->id;
}

const graph_shape *hlo_leaf_shape(hlo_ctx *x, int id) { return &graph_get(x->b->g, id)->out; }

/* The written shape, which must be an array for this opcode. */
const graph_shape *hlo_out_array(hlo_ctx *x) {
  if (x->in->shape.n >= 0) {
    hlo_berr(x, "the result must be an array, the text gives a tuple");
    return NULL;
  }
  return &x->in->shape.arr;
}

/* ---- shapes in messages ---- */

size_t hlo_put_val(const hlo_builder *b, const hlo_val *v, char *buf, size_t n, size_t at) {
  if (at >= n) return at;
  if (v->n < 0) {
    graph_shape_str(&graph_get(b->g, v->id)->out, buf + at, n - at);
    return at + strlen(buf + at);
  }
  at += (size_t)snprintf(buf + at, n - at, "(");
  for (int i = 0; i < v->n && at < n; i++) {
    if (i) at += (size_t)snprintf(buf + at, n - at, ", ");
    at = hlo_put_val(b, v->el[i], buf, n, at);
  }
  if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
  return at;
}

size_t hlo_put_shape(const hlo_shape *s, char *buf, size_t n, size_t at) {
  if (at >= n) return at;
  if (s->n < 0) {
    graph_shape_str(&s->arr, buf + at, n - at);
    return at + strlen(buf + at);
  }
  at += (size_t)snprintf(buf + at, n - at, "(");
  for (int i = 0; i < s->n && at < n; i++) {
    if (i) at += (size_t)snprintf(buf + at, n - at, ", ");
    at = hlo_put_shape(&s->el[i], buf, n, at);
  }
  if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
  return at;
}

bool hlo_val_matches(const hlo_builder *b, const hlo_val *v, const hlo_shape *s) {
  if (s->n < 0) return v->n < 0 && graph_shape_eq(&graph_get(b->g, v->id)->out, &s->arr);
  if (v->n != s->n) return false;
  for (int i = 0; i < s->n; i++)
    if (!hlo_val_matches(b, v->el[i], &s->el[i])) return false;
  return true;
}

/* ---- attribute values ---- */

/* Position of needle in a span, or NULL. */
const char *hlo_span_find(hlo_str hay, const char *needle) {
  size_t l = strlen(needle);
  for (int i = 0; i + (int)l <= hay.n; i++)
    if (memcmp(hay.s + i, needle, l) == 0) return hay.s + i;
  return NULL;
}

/* {1,2,3} or {} (or a bare 1,2 list): the count, or -1 when malformed. */
int hlo_parse_ints(hlo_str v, int64_t *out, int max) {
  const char *s = v.s, *end = v.s + v.n;
  while (s < end && isspace((unsigned char)*s))
    s++;
  bool braced = s < end && *s == '{';
  if (braced) s++;
  int n = 0;
  for (;;) {
    while (s < end && isspace((unsigned char)*s))
      s++;
    if (s < end && *s == '}' && braced) {
      s++;
      break;
    }
    if (s >= end) {
      if (braced) return -1;
      break;
    }
    char *e;
    long long x = strtoll(s, &e, 10);
    if (e == s || e > end || n == max) return -1;
    out[n++] = x;
    s = e;
    while (s < end && isspace((unsigned char)*s))
      s++;
    if (s < end && *s == ',') s++;
  }
  while (s < end && isspace((unsigned char)*s))
    s++;
  return s == end ? n : -1;
}

/* A dimension list attribute; absent is the empty list unless required. */
bool hlo_attr_dims(hlo_ctx *x, const char *key, graph_dims *d, bool required) {
  memset(d, 0, sizeof *d);
  const hlo_attr *a = hlo_attr_get(x->in, key);
  if (!a) {
    if (required) hlo_berr(x, "the %s={...} attribute is missing", key);
    return !required;
  }
  int64_t v[GRAPH_MAX_RANK];
  int n = hlo_parse_ints(a->val, v, GRAPH_MAX_RANK);
  if (n < 0) {
    hlo_berr(x, "%s=%.*s is not a list of at most %d dimension numbers", key, a->val.n, a->val.s,
         GRAPH_MAX_RANK);
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= GRAPH_MAX_RANK) {
      hlo_berr(x, "%s: dimension %lld is out of range", key, (long long)v[i]);
      return false;
    }
    d->d[i] = (int8_t)v[i];
  }
  d->n = n;
  return true;
}

bool hlo_attr_int(hlo_ctx *x, const char *key, int64_t *v, bool required) {
  const hlo_attr *a = hlo_attr_get(x->in, key);
  if (!a) {
    if (required) hlo_berr(x, "the %s= attribute is missing", key);
    return !required;
  }
  char buf[32];
  if (a->val.n <= 0 || a->val.n >= (int)sizeof buf) goto bad;
  memcpy(buf, a->val.s, (size_t)a->val.n);
  buf[a->val.n] = 0;
  char *e;
  long long k = strtoll(buf, &e, 10);
  if (*e) goto bad;
  *v = k;
  return true;
bad:
  hlo_berr(x, "%s=%.*s is not an integer", key, a->val.n, a->val.s);
  return false;
}

/* The computation an attribute (to_apply=, calls=, body=) names. */
int hlo_attr_comp(hlo_ctx *x, const char *key) {
  const hlo_attr *a = hlo_attr_get(x->in, key);
  if (!a) {
    hlo_berr(x, "the %s= attribute is missing", key);
    return -1;
  }
  hlo_str s = a->val;
  if (s.n > 1 && s.s[0] == '{' && s.s[s.n - 1] == '}') s.s++, s.n -= 2; /* calls={%a} */
  int ci = hlo_comp_find(x->b->m, s);
  if (ci < 0) hlo_berr(x, "%s=%.*s: no such computation", key, a->val.n, a->val.s);
  return ci;
}

/* A quoted attribute value without its quotes. */
hlo_str hlo_unquote(hlo_str s) {
  if (s.n >= 2 && s.s[0] == '"' && s.s[s.n - 1] == '"') s.s++, s.n -= 2;
  return s;
}

/* backend_config, as JSON ({...} or, in older dumps, an escaped string). */
cJSON *hlo_backend_json(const hlo_inst *in) {
  const hlo_attr *a = hlo_attr_get(in, "backend_config");
  if (!a || a->val.n == 0) return NULL;
  if (a->val.s[0] == '{') return cJSON_ParseWithLength(a->val.s, (size_t)a->val.n);
  hlo_str s = hlo_unquote(a->val);
  char *buf = malloc((size_t)s.n + 1);
  if (!buf) return NULL;
  size_t n = 0;
  for (int i = 0; i < s.n; i++) {
    if (s.s[i] == '\\' && i + 1 < s.n) i++;
    buf[n++] = s.s[i];
  }
  cJSON *j = cJSON_ParseWithLength(buf, n);
  free(buf);
  return j;
}

/* ---- values built from a written shape ---- */

static bool is_int_type(graph_dtype dt) {
  return dt == GDT_S4 || dt == GDT_S8 || dt == GDT_U8 || dt == GDT_S32 || dt == GDT_U32 ||
         dt == GDT_S64;
}

/* The value of an integer scalar constant(N), for loop bounds. */
bool hlo_literal_int(const hlo_inst *in, int64_t *v) {
  if (!op_is(in, "constant") || in->shape.n >= 0 || in->shape.arr.rank != 0 ||
      !is_int_type(in->shape.arr.dtype))
    return false;
  char buf[32];
  hlo_str s = in->paren;
  while (s.n && isspace((unsigned char)*s.s))
    s.s++, s.n--;
  while (s.n && isspace((unsigned char)s.s[s.n - 1]))
    s.n--;
  if (s.n <= 0 || s.n >= (int)sizeof buf) return false;
  memcpy(buf, s.s, (size_t)s.n);
  buf[s.n] = 0;
  char *e;
  long long k = strtoll(buf, &e, 10);
  if (*e) return false;
  *v = k;
  return true;
}

/* Zero-cost sources shaped like s: constants (ids, tokens, contexts) or
** parameters (ENTRY's, infeed's), named name#i inside tuples. */
hlo_val *hlo_make_leaves(hlo_ctx *x, const hlo_shape *s, int how, const char *name) {
  if (s->n < 0) {
    int id = how == LEAF_CONSTANT ? graph_constant(x->b->g, s->arr)
                                  : graph_parameter(x->b->g, name, s->arr, (unsigned)how);
    return hlo_val_new(x->b, id);
  }
  hlo_val *t = hlo_val_tuple(x->b, s->n);
  if (!t) return hlo_oom(x);
  for (int i = 0; i < s->n; i++) {
    char sub[160];
    snprintf(sub, sizeof sub, "%s#%d", name, i);
    if (!(t->el[i] = hlo_make_leaves(x, &s->el[i], how, sub))) return NULL;
  }
  return t;
}

char *hlo_inst_name(const hlo_inst *in, char *buf, size_t n) {
  snprintf(buf, n, "%.*s", in->name.n, in->name.s);
  return buf;
}

/* A tuple shaped like the written one whose first nk elements are known
** values and the rest (async contexts, tokens) zero-cost constants. */
hlo_val *hlo_fill_like(hlo_ctx *x, hlo_val **known, int nk) {
  const hlo_shape *s = &x->in->shape;
  if (s->n < 0) return known[nk - 1];
  hlo_val *t = hlo_val_tuple(x->b, s->n);
  if (!t) return hlo_oom(x);
  char nm[128];
  for (int i = 0; i < s->n; i++)
    if (!(t->el[i] = i < nk ? known[i]
                            : hlo_make_leaves(x, &s->el[i], LEAF_CONSTANT,
                                              hlo_inst_name(x->in, nm, sizeof nm))))
      return NULL;
  return t;
}

/* All array leaves of a value, in order. */
int hlo_flatten(const hlo_val *v, int *ids, int n) {
  if (v->n < 0) {
    if (ids) ids[n] = v->id;
    return n + 1;
  }
  for (int i = 0; i < v->n; i++)
    n = hlo_flatten(v->el[i], ids, n);
  return n;
}

/* ---- evaluation ---- */

/* JAX names ops jit(f)/jvp(...)/... in the forward pass and
** jit(f)/transpose(jvp(...))/... in the backward pass; what is neither, in a
** module that has both, is the optimizer update. Other producers (TF) give
** no such marks: their ops keep the phase of their caller (forward). */
static graph_phase inst_phase(const hlo_module *m, const hlo_inst *in, graph_phase inherited) {
  const hlo_attr *a = m->jax_phases ? hlo_attr_get(in, "metadata") : NULL;
  const char *on = a ? hlo_span_find(a->val, "op_name=\"") : NULL;
  if (!on) return inherited;
  hlo_str name = {on + 9, 0};
  while (name.s + name.n < a->val.s + a->val.n && name.s[name.n] != '"')
    name.n++;
  if (hlo_span_find(name, "transpose(jvp")) return GRAPH_BACKWARD;
  if (hlo_span_find(name, "jvp(")) return GRAPH_FORWARD;
  return GRAPH_OPTIMIZER;
}

/* The graph's own message for a builder error, placed at the instruction. */
static hlo_val *relay_graph_error(hlo_ctx *x) {
  const diag *d = graph_diag(x->b->g);
  const char *msg = d ? diag_message(d, 0) : NULL;
  const char *gname = graph_name(x->b->g);
  size_t l = strlen(gname);
  if (msg && strncmp(msg, gname, l) == 0 && strncmp(msg + l, ": ", 2) == 0) msg += l + 2;
  /* the graph names the op by its scope ("dot.5/dot: ..."); berr names it already */
  char scope[128];
  snprintf(scope, sizeof scope, "%s%s%.*s/", x->scope, *x->scope ? "/" : "", x->in->name.n,
           x->in->name.s);
  const char *colon = msg ? strstr(msg, ": ") : NULL;
  if (colon && strncmp(msg, scope, strlen(scope)) == 0) msg = colon + 2;
  return hlo_berr(x, "%s", msg ? msg : "the graph builder rejected the operands");
}

static hlo_val *eval_inst(hlo_ctx *x) {
  hlo_builder *b = x->b;
  const hlo_inst *in = x->in;
  const hlo_op_row *row = in->row;
  x->row = row;
  if (x->n < row->min_ops || (row->max_ops >= 0 && x->n > row->max_ops)) {
    if (row->min_ops == row->max_ops)
      return hlo_berr(x, "takes %d operands, has %d", row->min_ops, x->n);
    return hlo_berr(x, "takes at least %d operands, has %d", row->min_ops, x->n);
  }
  char scope[128];
  snprintf(scope, sizeof scope, "%s%s%.*s", x->scope, *x->scope ? "/" : "", in->name.n, in->name.s);
  graph_set_scope(b->g, scope);
  graph_set_phase(b->g, x->phase);
  graph_set_count(b->g, b->count);
  hlo_val *v = row->fn(x);
  if (!graph_ok(b->g)) return relay_graph_error(x);
  if (!v) return b->failed ? NULL : hlo_oom(x);
  if (!hlo_val_matches(b, v, &in->shape)) {
    char got[512], want[512];
    hlo_put_val(b, v, got, sizeof got, 0);
    hlo_put_shape(&in->shape, want, sizeof want, 0);
    return hlo_berr(x, "the text gives the shape %s, the %s %s", want,
                in->param_no >= 0 && x->args ? "caller passes" : "operands give", got);
  }
  return v;
}

/* Evaluates computation ci with the given arguments (NULL for ENTRY) and
** returns its ROOT's value; site is the calling instruction's context. */
hlo_val *hlo_eval_comp(hlo_ctx *site, int ci, hlo_val **args, int n_args) {
  hlo_builder *b = site->b;
  const hlo_comp *c = &b->m->comps[ci];
  if (b->active[ci])
    return hlo_berr(site, "computation %.*s calls itself; recursion has no static graph", c->name.n,
                c->name.s);
  if (b->depth >= HLO_MAX_DEPTH)
    return hlo_berr(site, "calls nested more than %d deep", HLO_MAX_DEPTH);
  if (args && n_args != c->n_params)
    return hlo_berr(site, "passes %d operands to %.*s, which has %d parameters", n_args, c->name.n,
                c->name.s, c->n_params);
  hlo_val **vals = hlo_arena_alloc(&b->ar, (size_t)c->n * sizeof *vals);
  if (!vals) return hlo_oom(site);
  char scope[128];
  if (site->in)
    snprintf(scope, sizeof scope, "%s%s%.*s", site->scope, *site->scope ? "/" : "",
             site->in->name.n, site->in->name.s);
  else
    scope[0] = 0;
  hlo_val **memo = NULL; /* counted callees' results, for this evaluation only */
  if (b->plan[ci].any_counted &&
      !(memo = hlo_arena_alloc(&b->ar, (size_t)b->plan[ci].n * sizeof *memo)))
    return hlo_oom(site);
  b->active[ci] = true;
  b->depth++;
  hlo_val *result = NULL;
  for (int k = 0; k < c->n; k++) {
    const hlo_inst *in = &c->insts[c->order[k]];
    hlo_ctx x = {.b = b,
                 .c = c,
                 .in = in,
                 .n = in->n_ops,
                 .args = args,
                 .n_args = n_args,
                 .scope = scope,
                 .phase = inst_phase(b->m, in, site->phase),
                 .memo = memo};
    x.ops = hlo_arena_alloc(&b->ar, (size_t)(in->n_ops + 1) * sizeof *x.ops);
    if (!x.ops) {
      hlo_oom(&x);
      goto out;
    }
    for (int i = 0; i < in->n_ops; i++) {
      const hlo_operand *o = &in->ops[i];
      hlo_val *v = vals[o->inst];
      if (o->index >= 0 && (v->n < 0 || o->index >= v->n)) {
        hlo_berr(&x, "%%%.*s#%d: %%%.*s is not a tuple with an element %d", o->name.n, o->name.s,
             o->index, o->name.n, o->name.s, o->index);
        goto out;
      }
      x.ops[i] = o->index >= 0 ? v->el[o->index] : v;
    }
    if (!(vals[c->order[k]] = eval_inst(&x))) goto out;
  }
  result = vals[c->root];
out:
  b->depth--;
  b->active[ci] = false;
  return result;
}

graph *hlo_build(const hlo_module *m, diag *dg) {
  hlo_builder b = {.m = m, .dg = dg, .count = 1};
  b.g = graph_new(hlo_module_name(m));
  b.active = calloc((size_t)m->n_comps, sizeof *b.active);
  if (!b.g || !b.active) {
    diag_error(dg, m->file, 0, 0, NULL, "out of memory");
    graph_free(b.g);
    free(b.active);
    return NULL;
  }
  hlo_ctx top = {
      .b = &b, .c = &m->comps[m->entry], .in = NULL, .scope = "", .phase = GRAPH_FORWARD};
  hlo_val *root = hlo_plan_calls(&b) ? hlo_eval_comp(&top, m->entry, NULL, 0) : NULL;
  /* leave the builder state as graph_new does, for callers that append */
  graph_set_scope(b.g, NULL);
  graph_set_count(b.g, 1);
  graph_set_phase(b.g, GRAPH_FORWARD);
  hlo_arena_free(&b.ar);
  free(b.active);
  if (!root) {
    if (!b.failed) diag_error(dg, m->file, 0, 0, NULL, "import stopped without a reason (a bug)");
    graph_free(b.g);
    return NULL;
  }
  return b.g;
}

graph *hlo_import(const char *file, const char *text, size_t len, diag *dg) {
  hlo_module *m = hlo_parse(file, text, len, dg);
  if (!m) return NULL;
  graph *g = hlo_build(m, dg);
  hlo_module_free(m);
  return g;
}

/* The number after "key=" on the HloModule line, or 1. */
static int64_t header_count(const char *line, size_t n, const char *key) {
  size_t k = strlen(key);
  for (size_t i = 0; i + k < n; i++)
    if ((i == 0 || line[i - 1] == ' ' || line[i - 1] == ',') && strncmp(line + i, key, k) == 0 &&
        line[i + k] == '=') {
      int64_t v = 0;
      for (size_t j = i + k + 1; j < n && line[j] >= '0' && line[j] <= '9' && v < (1LL << 40); j++)
        v = v * 10 + (line[j] - '0');
      return v > 0 ? v : 1;
    }
  return 1;
}

int64_t hlo_devices(const char *text, size_t len) {
  const char *nl = memchr(text, '\n', len);
  size_t n = nl ? (size_t)(nl - text) : len;
  return header_count(text, n, "num_partitions") * header_count(text, n, "replica_count");
}

graph *hlo_import_file(const char *path, diag *dg) {
  size_t len;
  char *text = jin_read_regular(path, HLO_MAX_FILE, "an XLA HLO text module",
                                "the largest real dumps are megabytes", &len, dg);
  if (!text) return NULL;
  graph *g = hlo_import(path, text, len, dg);
  free(text);
  return g;
}
