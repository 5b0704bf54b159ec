/*
** hlo_ops.c -- the handlers of array opcodes (sources and tuples,
** elementwise, data movement, contractions, reductions) and the opcode table
** that maps every opcode to its handler.
**
** Separate from the builder (hlo.c): each handler turns one instruction into
** graph ops with their shape inference; the builder only walks and checks.
*/
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"

/* ---------------------------------------------------------------- handlers */

/* ---- sources, tuples and free ops ---- */

static hlo_val *h_parameter(hlo_ctx *x) {
  if (x->args) {
    int k = x->in->param_no;
    if (k >= x->n_args)
      return hlo_berr(x, "parameter(%d) but the caller passes %d operands", k, x->n_args);
    return x->args[k];
  }
  /* ENTRY: what a parameter is (weight, input, optimizer state) is not in
  ** the text, so no role flags; a tuple gives one parameter per array */
  char nm[128];
  return hlo_make_leaves(x, &x->in->shape, 0, hlo_inst_name(x->in, nm, sizeof nm));
}

static hlo_val *h_constant(hlo_ctx *x) {
  char nm[128];
  hlo_val *v =
      hlo_make_leaves(x, &x->in->shape, LEAF_CONSTANT, hlo_inst_name(x->in, nm, sizeof nm));
  if (v && v->n < 0) v->known = hlo_literal_int(x->in, &v->k);
  return v;
}

/* partition-id, replica-id, after-all, get-dimension-size, ...: no cost, no
** data the graph needs; a constant of the written shape. */
static hlo_val *h_zero(hlo_ctx *x) {
  char nm[128];
  return hlo_make_leaves(x, &x->in->shape, LEAF_CONSTANT, hlo_inst_name(x->in, nm, sizeof nm));
}

/* opt-barrier, add-dependency, domain, ...: the operand itself. */
static hlo_val *h_alias(hlo_ctx *x) { return x->ops[0]; }

static hlo_val *h_iota(hlo_ctx *x) {
  const graph_shape *s = hlo_out_array(x);
  return s ? hlo_val_new(x->b, graph_iota(x->b->g, *s)) : NULL;
}

hlo_val *hlo_h_tuple(hlo_ctx *x) {
  hlo_val *t = hlo_val_tuple(x->b, x->n);
  if (!t) return hlo_oom(x);
  for (int i = 0; i < x->n; i++)
    t->el[i] = x->ops[i];
  return t;
}

static hlo_val *h_gte(hlo_ctx *x) {
  int64_t k;
  if (!hlo_attr_int(x, "index", &k, true)) return NULL;
  const hlo_val *t = x->ops[0];
  if (t->n < 0) return hlo_berr(x, "operand is an array, not a tuple");
  if (k < 0 || k >= t->n)
    return hlo_berr(x, "index=%lld but the tuple has %d elements", (long long)k, t->n);
  return t->el[k];
}

/* ---- elementwise ---- */

static hlo_val *h_unary(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  return a < 0 ? NULL : hlo_val_new(x->b, graph_unary(x->b->g, (graph_op_kind)x->row->kind, a));
}

static hlo_val *h_binary(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), c = a < 0 ? -1 : hlo_leaf(x, 1);
  return c < 0 ? NULL : hlo_val_new(x->b, graph_binary(x->b->g, (graph_op_kind)x->row->kind, a, c));
}

/* is-finite: one compare per element, pred out. */
static hlo_val *h_self_compare(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  return a < 0 ? NULL : hlo_val_new(x->b, graph_binary(x->b->g, GOP_COMPARE, a, a));
}

static hlo_val *h_select(hlo_ctx *x) {
  int p = hlo_leaf(x, 0), a = p < 0 ? -1 : hlo_leaf(x, 1), c = a < 0 ? -1 : hlo_leaf(x, 2);
  return c < 0 ? NULL : hlo_val_new(x->b, graph_select(x->b->g, p, a, c));
}

static hlo_val *h_clamp(hlo_ctx *x) {
  int lo = hlo_leaf(x, 0), a = lo < 0 ? -1 : hlo_leaf(x, 1), hi = a < 0 ? -1 : hlo_leaf(x, 2);
  return hi < 0 ? NULL : hlo_val_new(x->b, graph_clamp(x->b->g, lo, a, hi));
}

static hlo_val *h_convert(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : hlo_out_array(x);
  return s ? hlo_val_new(x->b, graph_convert(x->b->g, a, s->dtype)) : NULL;
}

/* A free op of the written shape that depends on the operands (bitcasts
** the graph's reshape cannot express). */
static hlo_val *free_op(hlo_ctx *x, const char *name) {
  return hlo_custom_cost(x, name, 0, 0, false);
}

static hlo_val *h_bitcast(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : hlo_out_array(x);
  if (!s) return NULL;
  const graph_shape *in = hlo_leaf_shape(x, a);
  if (in->dtype == s->dtype && graph_elements(in) == graph_elements(s))
    return hlo_val_new(x->b, graph_reshape(x->b->g, a, *s)); /* free: a reshape is a bitcast */
  return free_op(x, x->row->opcode);
}

/* ---- data movement ---- */

static hlo_val *h_broadcast(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : hlo_out_array(x);
  graph_dims d;
  if (!s || !hlo_attr_dims(x, "dimensions", &d, hlo_leaf_shape(x, a)->rank > 0)) return NULL;
  return hlo_val_new(x->b, graph_broadcast(x->b->g, a, *s, d));
}

static hlo_val *h_transpose(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  graph_dims d;
  if (a < 0 || !hlo_attr_dims(x, "dimensions", &d, true)) return NULL;
  return hlo_val_new(x->b, graph_transpose(x->b->g, a, d));
}

/* reverse moves every element once, like a transpose that keeps the order
** of dimensions. */
static hlo_val *h_reverse(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  if (a < 0) return NULL;
  graph_dims id = {.n = hlo_leaf_shape(x, a)->rank};
  for (int i = 0; i < id.n; i++)
    id.d[i] = (int8_t)i;
  return hlo_val_new(x->b, graph_transpose(x->b->g, a, id));
}

static hlo_val *h_reshape(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : hlo_out_array(x);
  return s ? hlo_val_new(x->b, graph_reshape(x->b->g, a, *s)) : NULL;
}

static hlo_val *h_concat(hlo_ctx *x) {
  graph_dims d;
  if (!hlo_attr_dims(x, "dimensions", &d, true)) return NULL;
  if (d.n != 1) return hlo_berr(x, "dimensions= must name one dimension");
  int *ids = hlo_arena_alloc(&x->b->ar, (size_t)x->n * sizeof *ids);
  if (!ids) return hlo_oom(x);
  for (int i = 0; i < x->n; i++)
    if ((ids[i] = hlo_leaf(x, i)) < 0) return NULL;
  return hlo_val_new(x->b, graph_concat(x->b->g, ids, x->n, d.d[0]));
}

/* slice={[0:4:1], [2:10]} */
static hlo_val *h_slice(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = hlo_attr_get(x->in, "slice");
  if (!at_) return hlo_berr(x, "the slice={...} attribute is missing");
  int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK], st[GRAPH_MAX_RANK];
  int n = 0, rank = hlo_leaf_shape(x, a)->rank;
  const char *s = at_->val.s, *end = s + at_->val.n;
  while (s < end) {
    if (*s != '[') {
      s++;
      continue;
    }
    if (n == rank) return hlo_berr(x, "slice= has more ranges than the operand has dimensions");
    long long v[3] = {0, 0, 1};
    int k = 0;
    char *e;
    for (s++; k < 3; k++) {
      v[k] = strtoll(s, &e, 10);
      if (e == s)
        return hlo_berr(x, "slice=%.*s: expected [start:limit:stride]", at_->val.n, at_->val.s);
      s = e;
      if (*s != ':') break;
      s++;
    }
    if (*s != ']')
      return hlo_berr(x, "slice=%.*s: expected [start:limit:stride]", at_->val.n, at_->val.s);
    lo[n] = v[0], hi[n] = v[1], st[n] = k == 2 ? v[2] : 1;
    n++;
  }
  if (n != rank) return hlo_berr(x, "slice= gives %d ranges for an operand of rank %d", n, rank);
  return hlo_val_new(x->b, graph_slice(x->b->g, a, lo, hi, st));
}

/* The index operands are scalars whose values only move the window: the
** graph keeps the sliced operand as the one input. */
static hlo_val *h_dynamic_slice(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : hlo_out_array(x);
  return s ? hlo_val_new(x->b, graph_dynamic_slice(x->b->g, a, *s)) : NULL;
}

static hlo_val *h_dynamic_update_slice(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), u = a < 0 ? -1 : hlo_leaf(x, 1);
  return u < 0 ? NULL : hlo_val_new(x->b, graph_dynamic_update_slice(x->b->g, a, u));
}

/* padding=lo_hi[_interior]x... per dimension */
static hlo_val *h_pad(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = hlo_attr_get(x->in, "padding");
  int rank = hlo_leaf_shape(x, a)->rank, n = 0;
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK] = {0}, in[GRAPH_MAX_RANK] = {0};
  if (!at_ && rank > 0) return hlo_berr(x, "the padding= attribute is missing");
  const char *s = at_ ? at_->val.s : "", *end = s + (at_ ? at_->val.n : 0);
  while (s < end) {
    if (n == rank) return hlo_berr(x, "padding= has more entries than the operand has dimensions");
    long long v[3] = {0, 0, 0};
    int k = 0;
    char *e;
    for (; k < 3; k++) {
      v[k] = strtoll(s, &e, 10);
      if (e == s)
        return hlo_berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                    at_->val.s);
      s = e;
      if (s >= end || *s != '_') break;
      s++;
    }
    if (k < 1)
      return hlo_berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                  at_->val.s);
    lo[n] = v[0], hi[n] = v[1], in[n] = v[2];
    n++;
    if (s < end && *s == 'x')
      s++;
    else if (s < end)
      return hlo_berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                  at_->val.s);
  }
  if (n != rank) return hlo_berr(x, "padding= gives %d entries for an operand of rank %d", n, rank);
  return hlo_val_new(x->b, graph_pad(x->b->g, a, lo, hi, in));
}

/* The gather's dimension numbers only decide the result shape, which the
** text gives. */
static hlo_val *h_gather(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), i = a < 0 ? -1 : hlo_leaf(x, 1);
  const graph_shape *s = i < 0 ? NULL : hlo_out_array(x);
  return s ? hlo_val_new(x->b, graph_gather(x->b->g, a, i, s)) : NULL;
}

/* scatter(operands..., indices, updates...): one graph scatter per pair. */
static hlo_val *h_scatter(hlo_ctx *x) {
  if (x->n % 2 == 0)
    return hlo_berr(x, "takes k operands, the indices and k updates; has %d operands", x->n);
  int k = (x->n - 1) / 2, idx = hlo_leaf(x, k);
  if (idx < 0) return NULL;
  hlo_val *t = k > 1 ? hlo_val_tuple(x->b, k) : NULL;
  if (k > 1 && !t) return hlo_oom(x);
  for (int i = 0; i < k; i++) {
    int o = hlo_leaf(x, i), u = o < 0 ? -1 : hlo_leaf(x, k + 1 + i);
    if (u < 0) return NULL;
    hlo_val *v = hlo_val_new(x->b, graph_scatter(x->b->g, o, idx, u));
    if (!v) return NULL;
    if (k == 1) return v;
    t->el[i] = v;
  }
  return t;
}

/* ---- contractions ---- */

/* Mixed-precision dots (bf16 x f32) are valid HLO; the graph wants one
** operand type, so the narrower operand is converted first. */
static hlo_val *h_dot(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), c = a < 0 ? -1 : hlo_leaf(x, 1);
  const graph_shape *s = c < 0 ? NULL : hlo_out_array(x);
  graph_dims lb, rb, lc, rc;
  if (!s || !hlo_attr_dims(x, "lhs_batch_dims", &lb, false) ||
      !hlo_attr_dims(x, "rhs_batch_dims", &rb, false) ||
      !hlo_attr_dims(x, "lhs_contracting_dims", &lc, false) ||
      !hlo_attr_dims(x, "rhs_contracting_dims", &rc, false))
    return NULL;
  graph_dtype ta = hlo_leaf_shape(x, a)->dtype, tc = hlo_leaf_shape(x, c)->dtype;
  if (ta != tc) {
    if (graph_dtype_bits(ta) < graph_dtype_bits(tc))
      a = graph_convert(x->b->g, a, tc);
    else
      c = graph_convert(x->b->g, c, ta);
  }
  return hlo_val_new(x->b, graph_dot(x->b->g, a, c, lb, rb, lc, rc, s->dtype));
}

typedef struct {
  int n;
  int64_t size[GRAPH_MAX_RANK], stride[GRAPH_MAX_RANK], lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK],
      lhs_dil[GRAPH_MAX_RANK], rhs_dil[GRAPH_MAX_RANK];
} hlo_window;

/* One key of window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=...}:
** values split by 'x' (pad: low_high). */
static int window_list(hlo_str v, const char *key, int64_t *a, int64_t *b) {
  char k[24];
  snprintf(k, sizeof k, "%s=", key);
  const char *s = hlo_span_find(v, k);
  if (!s || (s > v.s && !isspace((unsigned char)s[-1]) && s[-1] != '{')) return 0;
  s += strlen(k);
  const char *end = v.s + v.n;
  int n = 0;
  while (s < end && n < GRAPH_MAX_RANK) {
    char *e;
    a[n] = strtoll(s, &e, 10);
    if (e == s) return -1;
    s = e;
    if (b) {
      if (*s != '_') return -1;
      b[n] = strtoll(s + 1, &e, 10);
      if (e == s + 1) return -1;
      s = e;
    }
    n++;
    if (s < end && *s == 'x')
      s++;
    else
      break;
  }
  return n;
}

static bool parse_window(hlo_ctx *x, hlo_window *w, int rank) {
  memset(w, 0, sizeof *w);
  for (int i = 0; i < GRAPH_MAX_RANK; i++)
    w->stride[i] = w->lhs_dil[i] = w->rhs_dil[i] = 1;
  const hlo_attr *a = hlo_attr_get(x->in, "window");
  if (!a) return true;
  hlo_str v = a->val;
  w->n = window_list(v, "size", w->size, NULL);
  int ns = window_list(v, "stride", w->stride, NULL), np = window_list(v, "pad", w->lo, w->hi),
      nl = window_list(v, "lhs_dilate", w->lhs_dil, NULL),
      nr = window_list(v, "rhs_dilate", w->rhs_dil, NULL);
  if (w->n < 0 || ns < 0 || np < 0 || nl < 0 || nr < 0 || (ns && ns != w->n) ||
      (np && np != w->n) || (nl && nl != w->n) || (nr && nr != w->n) ||
      (rank >= 0 && w->n != rank)) {
    hlo_berr(x, "window=%.*s is malformed or does not match the operand's rank", v.n, v.s);
    return false;
  }
  return true;
}

/* Positions of the letters of one dim_labels part ("b01f"): batch/feature
** (or input/output feature) and the spatial digits. */
static bool read_labels(const char *s, int n, char c0, char c1, int *p0, int *p1, int sp[3],
                        int *spatial) {
  *p0 = *p1 = -1;
  int seen = 0;
  for (int i = 0; i < 3; i++)
    sp[i] = -1;
  for (int i = 0; i < n; i++) {
    if (s[i] == c0 && *p0 < 0)
      *p0 = i;
    else if (s[i] == c1 && *p1 < 0)
      *p1 = i;
    else if (s[i] >= '0' && s[i] <= '2' && sp[s[i] - '0'] < 0)
      sp[s[i] - '0'] = i, seen++;
    else
      return false;
  }
  *spatial = seen;
  for (int i = 0; i < seen; i++)
    if (sp[i] < 0) return false;
  return *p0 >= 0 && *p1 >= 0;
}

/* dim_labels=b01f_01io->b01f names, per operand, which dimension is batch
** (b), feature (f), kernel input/output feature (i/o) and spatial (digits). */
static bool parse_dim_labels(hlo_ctx *x, graph_conv_attrs *c, int ranks[3]) {
  const hlo_attr *a = hlo_attr_get(x->in, "dim_labels");
  if (!a) return hlo_berr(x, "the dim_labels= attribute is missing"), false;
  const char *s = a->val.s, *u = memchr(s, '_', (size_t)a->val.n);
  const char *arrow = hlo_span_find(a->val, "->");
  int sl, sk, so;
  if (!u || !arrow || arrow < u ||
      !read_labels(s, (int)(u - s), 'b', 'f', &c->in_batch, &c->in_feature, c->in_spatial, &sl) ||
      !read_labels(u + 1, (int)(arrow - u - 1), 'i', 'o', &c->k_in, &c->k_out, c->k_spatial, &sk) ||
      !read_labels(arrow + 2, (int)(s + a->val.n - arrow - 2), 'b', 'f', &c->out_batch,
                   &c->out_feature, c->out_spatial, &so) ||
      sl != sk || sl != so) {
    hlo_berr(x, "dim_labels=%.*s is malformed", a->val.n, a->val.s);
    return false;
  }
  c->spatial = sl;
  if ((int)(u - s) != ranks[0] || (int)(arrow - u - 1) != ranks[1] ||
      (int)(s + a->val.n - arrow - 2) != ranks[2]) {
    hlo_berr(x, "dim_labels=%.*s does not match the operand ranks", a->val.n, a->val.s);
    return false;
  }
  if (sl < 1 || sl > 3) {
    hlo_berr(x, "convolutions with %d spatial dimensions are not supported (1 to 3)", sl);
    return false;
  }
  return true;
}

static hlo_val *h_convolution(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), k = a < 0 ? -1 : hlo_leaf(x, 1);
  const graph_shape *s = k < 0 ? NULL : hlo_out_array(x);
  if (!s) return NULL;
  graph_conv_attrs c = {0};
  int ranks[3] = {hlo_leaf_shape(x, a)->rank, hlo_leaf_shape(x, k)->rank, s->rank};
  hlo_window w;
  int64_t fg = 1, bg = 1;
  if (!parse_dim_labels(x, &c, ranks) || !parse_window(x, &w, -1) ||
      !hlo_attr_int(x, "feature_group_count", &fg, false) ||
      !hlo_attr_int(x, "batch_group_count", &bg, false))
    return NULL;
  if (w.n != 0 && w.n != c.spatial)
    return hlo_berr(x, "window= has %d dimensions, dim_labels %d spatial ones", w.n, c.spatial);
  for (int i = 0; i < c.spatial; i++) {
    c.stride[i] = w.stride[i];
    c.pad_lo[i] = w.lo[i];
    c.pad_hi[i] = w.hi[i];
    c.lhs_dilation[i] = w.lhs_dil[i];
    c.rhs_dilation[i] = w.rhs_dil[i];
  }
  c.feature_groups = fg;
  c.batch_groups = bg;
  return hlo_val_new(x->b, graph_conv(x->b->g, a, k, &c, s->dtype));
}

/* ---- reductions ---- */

/* What a reduction lambda computes, from its ROOT; a tuple ROOT (argmax
** style) is read from its first element, where select means max/min. */
static graph_reduce_kind lambda_kind(const hlo_module *m, int ci) {
  const hlo_comp *c = &m->comps[ci];
  const hlo_inst *r = &c->insts[c->root];
  if (op_is(r, "tuple") && r->n_ops > 0) r = &c->insts[r->ops[0].inst];
  static const struct {
    const char *op;
    graph_reduce_kind k;
  } KINDS[] = {{"add", GRAPH_RED_ADD},      {"maximum", GRAPH_RED_MAX}, {"minimum", GRAPH_RED_MIN},
               {"multiply", GRAPH_RED_MUL}, {"and", GRAPH_RED_MIN},     {"or", GRAPH_RED_MAX},
               {"select", GRAPH_RED_MAX}};
  for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++)
    if (op_is(r, KINDS[i].op)) return KINDS[i].k;
  return GRAPH_RED_ADD;
}

/* reduce(inputs..., inits...), dimensions={...}, to_apply=lambda */
static hlo_val *h_reduce(hlo_ctx *x) {
  if (x->n % 2) return hlo_berr(x, "takes k inputs and k initial values; has %d operands", x->n);
  int ci = hlo_attr_comp(x, "to_apply");
  graph_dims d;
  if (ci < 0 || !hlo_attr_dims(x, "dimensions", &d, true)) return NULL;
  graph_reduce_kind kind = lambda_kind(x->b->m, ci);
  int k = x->n / 2;
  hlo_val *t = k > 1 ? hlo_val_tuple(x->b, k) : NULL;
  if (k > 1 && !t) return hlo_oom(x);
  for (int i = 0; i < k; i++) {
    int a = hlo_leaf(x, i);
    hlo_val *v = a < 0 ? NULL : hlo_val_new(x->b, graph_reduce(x->b->g, a, d, kind));
    if (!v || k == 1) return v;
    t->el[i] = v;
  }
  return t;
}

static int64_t ceil_log2(int64_t n) {
  int64_t k = 0;
  while (n > (int64_t)1 << k && k < 62)
    k++;
  return k;
}

static double window_elements(const hlo_window *w) {
  double n = 1;
  for (int i = 0; i < w->n; i++)
    n *= (double)w->size[i];
  return n;
}

/* HloCostAnalysis: each output element combines window-1 pairs. */
static hlo_val *h_reduce_window(hlo_ctx *x) {
  if (x->n % 2) return hlo_berr(x, "takes k inputs and k initial values; has %d operands", x->n);
  int a = hlo_leaf(x, 0);
  hlo_window w;
  if (a < 0 || !parse_window(x, &w, hlo_leaf_shape(x, a)->rank) || hlo_attr_comp(x, "to_apply") < 0)
    return NULL;
  const hlo_shape *s = &x->in->shape, *first = s->n > 0 ? &s->el[0] : s;
  if (first->n >= 0) return hlo_berr(x, "the result must be an array or a tuple of arrays");
  double outs = (double)graph_elements(&first->arr);
  return hlo_custom_out(x, "reduce-window", outs * (window_elements(&w) - 1) * (x->n / 2), 0);
}

/* One select per source element and window position, one scatter-add per
** source element. */
static hlo_val *h_select_and_scatter(hlo_ctx *x) {
  int a = hlo_leaf(x, 0), src = a < 0 ? -1 : hlo_leaf(x, 1);
  hlo_window w;
  if (src < 0 || !parse_window(x, &w, hlo_leaf_shape(x, a)->rank)) return NULL;
  double n = (double)graph_elements(hlo_leaf_shape(x, src));
  return hlo_custom_out(x, "select-and-scatter", n * window_elements(&w) + n, 0);
}

/* n log2(d) comparisons for n elements sorted along a dimension of size d. */
static hlo_val *h_sort(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  graph_dims d;
  if (a < 0 || !hlo_attr_dims(x, "dimensions", &d, true)) return NULL;
  const graph_shape *s = hlo_leaf_shape(x, a);
  if (d.n != 1 || d.d[0] >= s->rank)
    return hlo_berr(x, "dimensions= must name one dimension of the operand");
  return hlo_custom_out(x, "sort", (double)graph_elements(s) * (double)ceil_log2(s->dim[d.d[0]]),
                        0);
}

/* Selection of the top k: n log2(k) comparisons. */
static hlo_val *h_topk(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  int64_t k;
  if (a < 0 || !hlo_attr_int(x, "k", &k, true)) return NULL;
  return hlo_custom_out(x, "topk",
                        (double)graph_elements(hlo_leaf_shape(x, a)) * (double)ceil_log2(k + 1), 0);
}

/* map applies a scalar computation elementwise: its instructions, per
** element. */
static hlo_val *h_map(hlo_ctx *x) {
  int ci = hlo_attr_comp(x, "to_apply");
  const graph_shape *s = ci < 0 ? NULL : hlo_out_array(x);
  if (!s) return NULL;
  const hlo_comp *c = &x->b->m->comps[ci];
  int ops = 0;
  for (int i = 0; i < c->n; i++)
    ops += c->insts[i].param_no < 0 && !op_is(&c->insts[i], "constant");
  return hlo_custom_out(x, "map", (double)graph_elements(s) * ops, 0);
}

/* Batch norm, per element of the operand: training 8 flops (mean 1,
** variance 3, normalize 2, scale and shift 2), inference 4, grad 11; one
** rsqrt per feature. Counted from the textbook formulas (docs/hlo.md). */
static hlo_val *h_batch_norm(hlo_ctx *x) {
  int a = hlo_leaf(x, 0);
  int64_t f;
  if (a < 0 || !hlo_attr_int(x, "feature_index", &f, true)) return NULL;
  const graph_shape *s = hlo_leaf_shape(x, a);
  if (f < 0 || f >= s->rank) return hlo_berr(x, "feature_index=%lld is out of range", (long long)f);
  double per = x->row->kind;
  return hlo_custom_out(x, x->row->opcode, (double)graph_elements(s) * per, (double)s->dim[f]);
}

/* Random bits: no arithmetic the graph counts; the bytes written. */
static hlo_val *h_rng(hlo_ctx *x) { return hlo_custom_out(x, x->row->opcode, 0, 0); }

/* ---------------------------------------------------------------- opcodes */

#define ANY -1
/* Opcodes the graph has no kind for map to the nearest one with the same
** cost shape; the rows below say which (docs/hlo.md has the table). */
static const hlo_op_row OPS[] = {
    /* sources and structure */
    {"parameter", h_parameter, 0, 0, 0, 0},
    {"constant", h_constant, 0, 0, 0, 0},
    {"iota", h_iota, 0, 0, 0, 0},
    {"tuple", hlo_h_tuple, 0, 0, ANY, 0},
    {"get-tuple-element", h_gte, 0, 1, 1, 0},
    {"partition-id", h_zero, 0, 0, 0, 0},
    {"replica-id", h_zero, 0, 0, 0, 0},
    {"after-all", h_zero, 0, 0, ANY, 0},
    {"get-dimension-size", h_zero, 0, 1, 1, 0},
    {"rng-get-and-update-state", h_zero, 0, 0, 0, 0},
    {"outfeed", h_zero, 0, 1, 2, 0},
    {"send-done", h_zero, 0, 1, 1, 0},
    {"opt-barrier", h_alias, 0, 1, 1, 0},
    {"optimization-barrier", h_alias, 0, 1, 1, 0},
    {"add-dependency", h_alias, 0, 2, 2, 0},
    {"domain", h_alias, 0, 1, 1, 0},
    {"set-dimension-size", h_alias, 0, 2, 2, 0},
    {"async-update", h_alias, 0, 1, 1, 0},
    {"bitcast", h_bitcast, 0, 1, 1, 0},
    {"bitcast-convert", h_bitcast, 0, 1, 1, 0},
    /* elementwise */
    {"abs", h_unary, GOP_ABS, 1, 1, 0},
    {"negate", h_unary, GOP_NEG, 1, 1, 0},
    {"sign", h_unary, GOP_ABS, 1, 1, 0},
    {"floor", h_unary, GOP_ABS, 1, 1, 0},
    {"ceil", h_unary, GOP_ABS, 1, 1, 0},
    {"round-nearest-afz", h_unary, GOP_ABS, 1, 1, 0},
    {"round-nearest-even", h_unary, GOP_ABS, 1, 1, 0},
    {"popcnt", h_unary, GOP_ABS, 1, 1, 0},
    {"count-leading-zeros", h_unary, GOP_ABS, 1, 1, 0},
    {"not", h_unary, GOP_NOT, 1, 1, 0},
    {"exponential", h_unary, GOP_EXP, 1, 1, 0},
    {"exponential-minus-one", h_unary, GOP_EXP, 1, 1, 0},
    {"log", h_unary, GOP_LOG, 1, 1, 0},
    {"log-plus-one", h_unary, GOP_LOG, 1, 1, 0},
    {"tanh", h_unary, GOP_TANH, 1, 1, 0},
    {"tan", h_unary, GOP_TANH, 1, 1, 0},
    {"erf", h_unary, GOP_TANH, 1, 1, 0},
    {"logistic", h_unary, GOP_LOGISTIC, 1, 1, 0},
    {"rsqrt", h_unary, GOP_RSQRT, 1, 1, 0},
    {"sqrt", h_unary, GOP_SQRT, 1, 1, 0},
    {"cbrt", h_unary, GOP_SQRT, 1, 1, 0},
    {"sine", h_unary, GOP_SIN, 1, 1, 0},
    {"cosine", h_unary, GOP_COS, 1, 1, 0},
    {"copy", h_unary, GOP_COPY, 1, 1, 0},
    {"reduce-precision", h_unary, GOP_REDUCE_PRECISION, 1, 1, 0},
    {"convert", h_convert, 0, 1, 1, 0},
    {"stochastic-convert", h_convert, 0, 2, 2, 0},
    {"is-finite", h_self_compare, 0, 1, 1, 0},
    {"add", h_binary, GOP_ADD, 2, 2, 0},
    {"subtract", h_binary, GOP_SUB, 2, 2, 0},
    {"multiply", h_binary, GOP_MUL, 2, 2, 0},
    {"divide", h_binary, GOP_DIV, 2, 2, 0},
    {"remainder", h_binary, GOP_DIV, 2, 2, 0},
    {"maximum", h_binary, GOP_MAX, 2, 2, 0},
    {"minimum", h_binary, GOP_MIN, 2, 2, 0},
    {"power", h_binary, GOP_POW, 2, 2, 0},
    {"atan2", h_binary, GOP_POW, 2, 2, 0},
    {"compare", h_binary, GOP_COMPARE, 2, 2, 0},
    {"and", h_binary, GOP_AND, 2, 2, 0},
    {"or", h_binary, GOP_OR, 2, 2, 0},
    {"xor", h_binary, GOP_OR, 2, 2, 0},
    {"shift-left", h_binary, GOP_MUL, 2, 2, 0},
    {"shift-right-logical", h_binary, GOP_DIV, 2, 2, 0},
    {"shift-right-arithmetic", h_binary, GOP_DIV, 2, 2, 0},
    {"select", h_select, 0, 3, 3, 0},
    {"clamp", h_clamp, 0, 3, 3, 0},
    /* contractions and reductions */
    {"dot", h_dot, 0, 2, 2, 0},
    {"convolution", h_convolution, 0, 2, 2, 0},
    {"reduce", h_reduce, 0, 2, ANY, 0},
    {"reduce-window", h_reduce_window, 0, 2, ANY, 0},
    {"select-and-scatter", h_select_and_scatter, 0, 3, 3, 0},
    {"sort", h_sort, 0, 1, ANY, 0},
    {"topk", h_topk, 0, 1, 1, 0},
    {"map", h_map, 0, 1, ANY, 0},
    {"batch-norm-training", h_batch_norm, 8, 3, 3, 0},
    {"batch-norm-inference", h_batch_norm, 4, 5, 5, 0},
    {"batch-norm-grad", h_batch_norm, 11, 5, 5, 0},
    {"rng", h_rng, 0, 2, 2, 0},
    {"rng-bit-generator", h_rng, 0, 1, 1, 0},
    /* data movement */
    {"broadcast", h_broadcast, 0, 1, 1, 0},
    {"transpose", h_transpose, 0, 1, 1, 0},
    {"reverse", h_reverse, 0, 1, 1, 0},
    {"reshape", h_reshape, 0, 1, 1, 0},
    {"dynamic-reshape", h_reshape, 0, 1, ANY, 0},
    {"concatenate", h_concat, 0, 1, ANY, 0},
    {"slice", h_slice, 0, 1, 1, 0},
    {"dynamic-slice", h_dynamic_slice, 0, 1, ANY, 0},
    {"dynamic-update-slice", h_dynamic_update_slice, 0, 2, ANY, 0},
    {"pad", h_pad, 0, 2, 2, 0},
    {"gather", h_gather, 0, 2, 2, 0},
    {"scatter", h_scatter, 0, 3, ANY, 0},
    /* collectives */
    {"all-reduce", hlo_h_collective, GOP_ALL_REDUCE, 1, ANY, 0},
    {"all-reduce-start", hlo_h_collective, GOP_ALL_REDUCE, 1, ANY, 0},
    {"all-reduce-done", hlo_h_done, 0, 1, 1, F_SAME},
    {"all-gather", hlo_h_collective, GOP_ALL_GATHER, 1, ANY, 0},
    {"all-gather-start", hlo_h_collective, GOP_ALL_GATHER, 1, ANY, F_PAIR},
    {"all-gather-done", hlo_h_done, 0, 1, 1, 0},
    {"reduce-scatter", hlo_h_collective, GOP_REDUCE_SCATTER, 1, ANY, 0},
    {"all-to-all", hlo_h_collective, GOP_ALL_TO_ALL, 1, ANY, 0},
    {"collective-permute", hlo_h_permute, 0, 1, ANY, 0},
    {"collective-permute-start", hlo_h_permute, 0, 1, ANY, F_PAIR},
    {"collective-permute-done", hlo_h_done, 0, 1, 1, 0},
    {"collective-broadcast", hlo_h_permute, 0, 1, 1, 0},
    {"send", hlo_h_send, 0, 2, 2, 0},
    {"recv", hlo_h_recv, 0, 1, 1, 0},
    {"recv-done", hlo_h_recv_done, 0, 1, 1, 0},
    {"infeed", hlo_h_infeed, 0, 1, 1, 0},
    /* control flow and calls */
    {"call", hlo_h_call, 0, 0, ANY, 0},
    {"fusion", hlo_h_call, 0, 0, ANY, 0},
    {"while", hlo_h_while, 0, 1, 1, 0},
    {"async-start", hlo_h_async_start, 0, 0, ANY, 0},
    {"async-done", hlo_h_done, 0, 1, 1, 0},
    {"copy-start", hlo_h_copy_start, 0, 1, 1, 0},
    {"copy-done", hlo_h_done, 0, 1, 1, 0},
    {"custom-call", hlo_h_custom_call, 0, 0, ANY, 0},
    {"conditional", hlo_h_unsupported, 0, 1, ANY, 0},
    {"fft", hlo_h_unsupported, 0, 1, 1, 0},
    {"cholesky", hlo_h_unsupported, 0, 1, 1, 0},
    {"triangular-solve", hlo_h_unsupported, 0, 2, 2, 0},
};

const hlo_op_row *hlo_op_lookup(hlo_str opcode) {
  for (size_t i = 0; i < sizeof OPS / sizeof *OPS; i++)
    if (str_is(opcode, OPS[i].opcode)) return &OPS[i];
  return NULL;
}

const char *hlo_op_suggest(hlo_str opcode) {
  enum { N = sizeof OPS / sizeof *OPS };
  const char *names[N];
  for (size_t i = 0; i < N; i++)
    names[i] = OPS[i].opcode;
  char word[64];
  snprintf(word, sizeof word, "%.*s", opcode.n, opcode.s);
  return str_suggest(word, names, N);
}
