/*
** test_hlo.c -- the HLO text importer: hand-written modules with
** hand-derived FLOPs and shapes, the four real XLA dumps checked against an
** independent scan of their text, and bad input with file:line:col.
**
** The scan below (scan_*) reads HLO lines with plain string handling and
** shares no code with workloads/hlo.c, so a parser bug cannot cancel out.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../base/jin.h"
#include "../workloads/hlo.h"
#include "helpers.h"

#define DATA "tests/data/hlo/"
/* A real XLA dump of shared/reference/hlo/ (th_shared: TPUSIM_SHARED). */
#define REF(name) th_shared("reference/hlo/%s", name)

/* ---------------------------------------------------------------- helpers */


static graph *import_ok(const char *path) {
  diag *d = diag_new();
  graph *g = hlo_import_file(path, d);
  cr_assert_not_null(g, "%s: %s", path, diag_count(d) ? diag_message(d, 0) : "no message");
  cr_assert_eq(diag_count(d), 0);
  diag_free(d);
  return g;
}

/* FLOPs of all ops of one kind (kind < 0: all), times their counts. */
static double kind_flops(const graph *g, int kind) {
  double t = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (kind >= 0 && (int)op->kind != kind) continue;
    graph_cost c = graph_op_cost(g, i);
    t += graph_cost_flops(&c) * (double)op->count;
  }
  return t;
}

static int kind_count(const graph *g, graph_op_kind kind) {
  int n = 0;
  for (int i = 0; i < graph_count(g); i++)
    n += graph_get(g, i)->kind == kind;
  return n;
}

/* The op named exactly name ("y/dot": HLO instruction / graph kind). */
static const graph_op *op_named(const graph *g, const char *name) {
  for (int i = 0; i < graph_count(g); i++)
    if (strcmp(graph_get(g, i)->name, name) == 0) return graph_get(g, i);
  cr_assert_fail("no op named %s", name);
  return NULL;
}

static int op_id(const graph *g, const char *name) {
  for (int i = 0; i < graph_count(g); i++)
    if (strcmp(graph_get(g, i)->name, name) == 0) return i;
  cr_assert_fail("no op named %s", name);
  return -1;
}

static void assert_shape(const graph_op *op, graph_dtype dt, int rank, const int64_t *dims) {
  char s[128];
  graph_shape_str(&op->out, s, sizeof s);
  cr_assert_eq(op->out.dtype, dt, "%s: %s", op->name, s);
  cr_assert_eq(op->out.rank, rank, "%s: %s", op->name, s);
  for (int i = 0; i < rank; i++)
    cr_assert_eq(op->out.dim[i], dims[i], "%s: %s", op->name, s);
}
#define SHAPE_IS(op, dt, ...)                                                                      \
  assert_shape((op), (dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),              \
               (int64_t[]){__VA_ARGS__})

/* ---------------------------------------------------------------- hand-written modules */

Test(hlo, dot_flops_and_shapes) {
  graph *g = import_ok(DATA "dots.hlo");
  const graph_op *y = op_named(g, "y/dot"), *s = op_named(g, "s/dot");
  SHAPE_IS(y, GDT_BF16, 8, 4096);
  SHAPE_IS(s, GDT_F32, 4, 16, 128, 256);
  cr_assert_eq(s->lhs_batch.n, 2);
  cr_assert_eq(s->lhs_contract.d[0], 3);
  /* 2*8*1024*4096 and 2*(4*16*128*256)*64, in bf16 */
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "y/dot")).flops[GDT_BF16], 67108864.0, 0.5);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "s/dot")).flops[GDT_BF16], 268435456.0, 0.5);
  cr_assert_float_eq(kind_flops(g, -1), 335544320.0, 0.5);
  cr_assert_str_eq(graph_name(g), "dots");
  graph_free(g);
}

Test(hlo, convolutions_from_dim_labels_and_windows) {
  graph *g = import_ok(DATA "conv.hlo");
  const graph_op *stem = op_named(g, "stem/convolution");
  SHAPE_IS(stem, GDT_BF16, 1, 112, 112, 64);
  cr_assert_eq(stem->conv.stride[0], 2);
  cr_assert_eq(stem->conv.pad_lo[1], 3);
  cr_assert_eq(stem->conv.k_in, 2);
  SHAPE_IS(op_named(g, "nchw/convolution"), GDT_F32, 2, 16, 32, 32);
  cr_assert_eq(op_named(g, "nchw/convolution")->conv.in_feature, 1);
  cr_assert_eq(op_named(g, "dw/convolution")->conv.feature_groups, 64);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "stem/convolution")).flops[GDT_BF16], 236027904.0,
                     0.5);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "dw/convolution")).flops[GDT_BF16], 14450688.0, 0.5);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "nchw/convolution")).flops[GDT_F32], 1769472.0, 0.5);
  cr_assert_float_eq(kind_flops(g, GOP_CONV), 252248064.0, 0.5);
  graph_free(g);
}

Test(hlo, while_trip_counts_multiply_when_nested) {
  graph *g = import_ok(DATA "loops.hlo");
  cr_assert_eq(op_named(g, "outer/dot.outer/dot")->count, 4);
  cr_assert_eq(op_named(g, "outer/inner/dot.inner/dot")->count, 12);
  cr_assert_eq(op_named(g, "fixed/dot.fixed/dot")->count, 7);
  cr_assert_eq(kind_count(g, GOP_DOT), 3); /* each body imported once */
  cr_assert_float_eq(kind_flops(g, GOP_DOT), 32768.0 * (4 + 12 + 7), 0.5);
  /* ops outside loops keep count 1 */
  cr_assert_eq(op_named(g, "x")->count, 1);

  size_t len;
  char *t = th_slurp(DATA "loops.hlo", &len);
  diag *d = diag_new();
  hlo_module *m = hlo_parse("loops.hlo", t, len, d);
  cr_assert_not_null(m);
  cr_assert_eq(hlo_while_trip_count(m, "outer"), 4);
  cr_assert_eq(hlo_while_trip_count(m, "inner"), 3); /* 3 >= j, j from 1 */
  cr_assert_eq(hlo_while_trip_count(m, "fixed"), 7); /* known_trip_count */
  cr_assert_eq(hlo_while_trip_count(m, "x"), -1);
  hlo_module_free(m);
  diag_free(d);
  free(t);
  graph_free(g);
}

/* Forward 4*b*h*s_q*s_kv*d; backward 2.5x; causal halves (docs/hlo.md). */
Test(hlo, flash_attention_custom_calls) {
  graph *g = import_ok(DATA "fmha.hlo");
  double fwd = 4.0 * 2 * 8 * 512 * 1024 * 64;
  int f = op_id(g, "fwd/__cudnn$fmhaSoftmax"), b = op_id(g, "bwd/__cudnn$fmhaSoftmaxBackward");
  cr_assert_float_eq(graph_op_cost(g, f).flops[GDT_BF16], fwd, 0.5);
  cr_assert_float_eq(graph_op_cost(g, f).transcendentals, 2.0 * 8 * 512 * 1024, 0.5);
  cr_assert_float_eq(graph_op_cost(g, b).flops[GDT_BF16], fwd * 2.5 / 2, 0.5);
  cr_assert_float_eq(graph_op_cost(g, b).transcendentals, 2.0 * 8 * 512 * 1024 / 2, 0.5);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "fwd2/__cudnn$fmhaSoftmax")).flops[GDT_BF16], fwd,
                     0.5);
  cr_assert_float_eq(kind_flops(g, GOP_CUSTOM), 6979321856.0, 0.5);
  /* the first output carries the cost; the others are free and depend on it */
  SHAPE_IS(graph_get(g, f), GDT_BF16, 2, 8, 512, 64);
  SHAPE_IS(graph_get(g, f + 1), GDT_F32, 2, 8, 512);
  cr_assert_eq(graph_get(g, f + 1)->in[0], f);
  graph_cost stats = graph_op_cost(g, f + 1);
  cr_assert_float_eq(graph_cost_flops(&stats) + stats.bytes_read + stats.bytes_written, 0, 0);
  graph_free(g);
}

static void assert_group(const graph *g, const char *name, graph_op_kind k, int64_t group) {
  const graph_op *op = op_named(g, name);
  cr_assert_eq(op->kind, k, "%s", name);
  cr_assert_eq(op->group_size, group, "%s: group %lld", name, (long long)op->group_size);
}

Test(hlo, collective_groups_in_every_form) {
  graph *g = import_ok(DATA "collectives.hlo");
  assert_group(g, "ag.list/all-gather", GOP_ALL_GATHER, 4);
  SHAPE_IS(op_named(g, "ag.list/all-gather"), GDT_F32, 512, 64);
  assert_group(g, "ag.iota/all-gather", GOP_ALL_GATHER, 2);
  cr_assert_eq(op_named(g, "ag.iota/all-gather")->dims.d[0], 1);
  assert_group(g, "ar.mesh/all-reduce", GOP_ALL_REDUCE, 4);
  assert_group(g, "rs/reduce-scatter", GOP_REDUCE_SCATTER, 4);
  SHAPE_IS(op_named(g, "rs/reduce-scatter"), GDT_F32, 256, 16);
  assert_group(g, "a2a/all-to-all", GOP_ALL_TO_ALL, 8);
  assert_group(g, "cp/collective-permute", GOP_COLLECTIVE_PERMUTE, 4);
  assert_group(g, "ag.empty/all-gather", GOP_ALL_GATHER, 8);
  assert_group(g, "ar.none/all-reduce", GOP_ALL_REDUCE, 8);
  assert_group(g, "ags/all-gather", GOP_ALL_GATHER, 8);
  SHAPE_IS(op_named(g, "ags/all-gather"), GDT_F32, 256, 4);
  assert_group(g, "ars/all-reduce", GOP_ALL_REDUCE, 8);
  cr_assert_eq(kind_count(g, GOP_ALL_GATHER), 4); /* the -done ops add nothing */
  graph_free(g);
}

Test(hlo, calls_fusions_tuples_and_metadata_tables) {
  size_t len;
  char *t = th_slurp(DATA "structure.hlo", &len);
  diag *d = diag_new();
  hlo_module *m = hlo_parse("structure.hlo", t, len, d);
  cr_assert_not_null(m, "%s", diag_count(d) ? diag_message(d, 0) : "");
  cr_assert_str_eq(hlo_module_name(m), "jit_structure");
  cr_assert_eq(hlo_computation_count(m), 5);
  cr_assert_eq(hlo_instruction_count(m), 28);
  cr_assert_eq(hlo_opcode_count(m, "call"), 3);
  cr_assert_eq(hlo_opcode_count(m, "parameter"), 9);
  graph *g = hlo_build(m, d);
  cr_assert_not_null(g);
  /* the relu computation, called twice, is inlined twice */
  cr_assert_eq(kind_count(g, GOP_MAX), 2);
  cr_assert_not_null(op_named(g, "r.2/max.1/maximum"));
  cr_assert_not_null(op_named(g, "call.1/dot.1/dot"));
  cr_assert_eq(kind_count(g, GOP_PARAMETER), 2); /* sub-computation parameters bind operands */
  cr_assert_float_eq(kind_flops(g, -1), 32768.0 + 2 * 8192 + 4194304 + 8191, 0.5);
  graph_free(g);
  hlo_module_free(m);
  diag_free(d);
  free(t);
}

Test(hlo, old_syntax_without_percent_and_with_operand_shapes) {
  graph *g = import_ok(DATA "old_syntax.hlo");
  cr_assert_float_eq(kind_flops(g, GOP_DOT), 128.0, 0);
  cr_assert_float_eq(kind_flops(g, -1), 142.0, 0);
  SHAPE_IS(op_named(g, "total/reduce"), GDT_F32, 2);
  graph_free(g);
}

Test(hlo, remaining_opcodes_agree_with_written_shapes) {
  graph *g = import_ok(DATA "misc.hlo");
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "rmax/reduce")).flops[GDT_F32], 8128.0, 0);
  cr_assert_eq(op_named(g, "rmax/reduce")->reduce, GRAPH_RED_MAX);
  cr_assert_eq(op_named(g, "total/reduce")->reduce, GRAPH_RED_ADD);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "pool/reduce-window")).flops[GDT_F32], 14400.0, 0);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "srt/sort")).flops[GDT_S32], 57344.0, 0);
  SHAPE_IS(op_named(g, "pd/pad"), GDT_F32, 65, 128);
  SHAPE_IS(op_named(g, "emb/gather"), GDT_BF16, 16, 32);
  SHAPE_IS(op_named(g, "grad/scatter"), GDT_BF16, 1000, 32);
  SHAPE_IS(op_named(g, "cs/copy"), GDT_F32, 64, 128); /* copy-start makes the copy */
  /* bitcast in the same type is a free reshape; across types a free custom op */
  cr_assert_eq(op_named(g, "bc/reshape")->kind, GOP_RESHAPE);
  cr_assert_float_eq(graph_op_cost(g, op_id(g, "bcv/bitcast-convert")).bytes_read, 0, 0);
  cr_assert_eq(op_named(g, "pid/constant")->out.dtype, GDT_U32);
  graph_free(g);
}

/* The example model: a JAX train step, phases from the op names. */
Test(hlo, mlp_train_step_example) {
  graph *g = import_ok("workloads/examples/mlp_train_step.hlo");
  cr_assert_eq(kind_count(g, GOP_DOT), 5);
  cr_assert_eq(kind_count(g, GOP_PARAMETER), 6);
  graph_cost fwd = graph_total_cost(g, GRAPH_FORWARD), bwd = graph_total_cost(g, GRAPH_BACKWARD);
  /* dots: forward 2*128*784*512 + 2*128*512*10, backward 2*512*10*128 +
  ** 2*128*512*10 + 2*784*512*128 */
  double dot_fwd = 102760448.0 + 1310720, dot_bwd = 1310720.0 + 1310720 + 102760448;
  cr_assert_float_eq(kind_flops(g, GOP_DOT), dot_fwd + dot_bwd, 0.5);
  cr_assert(graph_cost_flops(&fwd) > dot_fwd && graph_cost_flops(&fwd) < dot_fwd * 1.01);
  cr_assert(graph_cost_flops(&bwd) > dot_bwd && graph_cost_flops(&bwd) < dot_bwd * 1.01);
  cr_assert_eq(op_named(g, "sub.48/subtract")->phase, GRAPH_OPTIMIZER);
  cr_assert_eq(op_named(g, "dot_general.44/dot")->phase, GRAPH_BACKWARD);
  cr_assert_eq(op_named(g, "relu.10/max.1/maximum")->phase, GRAPH_FORWARD);
  graph_free(g);
}

/* ---------------------------------------------------------------- independent scan */

/* Each instruction line "  [ROOT] %name = shape opcode(operands), attrs",
** as spans of the text, with the computation it is in. */
typedef struct {
  const char *s;
  int n;
} span;

typedef struct {
  int comp;
  bool root;
  span name, shape, opcode, rest; /* rest: from the '(' after the opcode to the end of line */
} sc_inst;

typedef struct {
  sc_inst *v;
  int n, cap;
  span comps[512];
  int n_comps, entry;
} scan;

static bool span_eq(span a, span b) { return a.n == b.n && memcmp(a.s, b.s, (size_t)a.n) == 0; }
static bool span_is(span a, const char *lit) { return span_eq(a, (span){lit, (int)strlen(lit)}); }

/* The end of a balanced (...) group starting at s. */
static const char *close_paren(const char *s, const char *end) {
  int depth = 0;
  for (; s < end; s++) {
    if (*s == '(') depth++;
    if (*s == ')' && --depth == 0) return s + 1;
  }
  return end;
}

static void scan_text(scan *sc, const char *text) {
  memset(sc, 0, sizeof *sc);
  sc->entry = -1;
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    if (!eol) eol = line + strlen(line);
    const char *last = eol;
    while (last > line && (last[-1] == ' ' || last[-1] == '\r'))
      last--;
    if (line[0] != ' ' && last > line && last[-1] == '{' && strncmp(line, "HloModule", 9) != 0) {
      const char *p = line;
      bool entry = strncmp(p, "ENTRY ", 6) == 0;
      if (entry) p += 6;
      if (*p == '%') p++;
      const char *e = p;
      while (*e != ' ' && *e != '(')
        e++;
      cr_assert_lt(sc->n_comps, 512);
      if (entry) sc->entry = sc->n_comps;
      sc->comps[sc->n_comps++] = (span){p, (int)(e - p)};
    } else if (line[0] == ' ' && sc->n_comps > 0) {
      const char *p = line;
      while (*p == ' ')
        p++;
      const char *eq = strstr(p, " = ");
      if (eq && eq < eol) {
        sc_inst in = {.comp = sc->n_comps - 1};
        if (strncmp(p, "ROOT ", 5) == 0) in.root = true, p += 5;
        if (*p == '%') p++;
        in.name = (span){p, (int)(eq - p)};
        const char *s = eq + 3, *se = *s == '(' ? close_paren(s, eol) : strchr(s, ' ');
        in.shape = (span){s, (int)(se - s)};
        const char *o = se + 1, *oe = strchr(o, '(');
        in.opcode = (span){o, (int)(oe - o)};
        in.rest = (span){oe, (int)(eol - oe)};
        if (sc->n == sc->cap) {
          sc->cap = sc->cap ? 2 * sc->cap : 256;
          sc->v = realloc(sc->v, (size_t)sc->cap * sizeof *sc->v);
          cr_assert_not_null(sc->v);
        }
        sc->v[sc->n++] = in;
      }
    }
    line = *eol ? eol + 1 : eol;
  }
}

/* Operand i of an instruction: its name (no '%') and tuple index or -1. */
static span sc_operand(const sc_inst *in, int i, int *index) {
  const char *s = in->rest.s + 1, *end = close_paren(in->rest.s, in->rest.s + in->rest.n) - 1;
  for (int k = 0;; k++) {
    while (s < end && (*s == ' ' || *s == ','))
      s++;
    if (strncmp(s, "/*", 2) == 0) s = strstr(s, "*/") + 2;
    if (*s == '%') s++;
    const char *e = s;
    while (e < end && *e != ',' && *e != '#')
      e++;
    *index = *e == '#' ? atoi(e + 1) : -1;
    if (k == i) return (span){s, (int)(e - s)};
    while (e < end && *e != ',')
      e++;
    cr_assert_lt(e, end, "operand %d of %.*s", i, in->name.n, in->name.s);
    s = e;
  }
}

static const sc_inst *sc_find(const scan *sc, int comp, span name) {
  for (int i = 0; i < sc->n; i++)
    if (sc->v[i].comp == comp && span_eq(sc->v[i].name, name)) return &sc->v[i];
  cr_assert_fail("%.*s not found", name.n, name.s);
  return NULL;
}

/* Dimensions of an array shape "bf16[1,4096]{1,0}", or of element k of a
** tuple shape. */
static int sc_dims(span shape, int k, int64_t *d) {
  const char *s = shape.s, *end = shape.s + shape.n;
  if (k >= 0) {
    s++; /* ( */
    for (int i = 0; i < k; i++) {
      int depth = 0;
      for (; s < end && !(depth == 0 && *s == ','); s++) {
        if (*s == '[' || *s == '{' || *s == '(') depth++;
        if (*s == ']' || *s == '}' || *s == ')') depth--;
      }
      s++;
    }
  }
  s = memchr(s, '[', (size_t)(end - s));
  int n = 0;
  for (s++; *s != ']'; n++) {
    d[n] = strtoll(s, (char **)&s, 10);
    if (*s == ',') s++;
  }
  return n;
}

static int sc_operand_dims(const scan *sc, const sc_inst *in, int i, int64_t *d) {
  int k;
  span name = sc_operand(in, i, &k);
  return sc_dims(sc_find(sc, in->comp, name)->shape, k, d);
}

static int64_t product(const int64_t *d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    p *= d[i];
  return p;
}

static const char *sc_attr(const sc_inst *in, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "%s=", key);
  const char *a = strstr(in->rest.s, k);
  return a && a < in->rest.s + in->rest.n ? a + strlen(k) : NULL;
}

static int64_t sc_constant(const scan *sc, int comp, span name) {
  const sc_inst *c = sc_find(sc, comp, name);
  cr_assert(span_is(c->opcode, "constant"), "%.*s is not a constant", name.n, name.s);
  return strtoll(c->rest.s + 1, NULL, 10);
}

/* How many times computation comp runs per step: 1 for ENTRY; for a while
** body, the loop's `i = c0; i < N; i += 1` count times its caller's. */
static int64_t sc_multiplier(const scan *sc, int comp) {
  if (comp == sc->entry) return 1;
  span body = sc->comps[comp];
  for (int i = 0; i < sc->n; i++) {
    const sc_inst *w = &sc->v[i];
    const char *b = span_is(w->opcode, "while") ? sc_attr(w, "body") : NULL;
    if (!b || strncmp(b + 1, body.s, (size_t)body.n) != 0 ||
        (b[1 + body.n] != ',' && b[1 + body.n] != '\n'))
      continue;
    const char *cn = sc_attr(w, "condition") + 1;
    int cond = -1;
    for (int c = 0; c < sc->n_comps; c++)
      if (strncmp(cn, sc->comps[c].s, (size_t)sc->comps[c].n) == 0 && cn[sc->comps[c].n] == ',')
        cond = c;
    cr_assert_geq(cond, 0);
    const sc_inst *cmp = NULL;
    for (int k = 0; k < sc->n; k++)
      if (sc->v[k].comp == cond && sc->v[k].root) cmp = &sc->v[k];
    cr_assert(strstr(cmp->rest.s, "direction=LT") < cmp->rest.s + cmp->rest.n);
    int idx;
    int64_t limit = sc_constant(sc, cond, sc_operand(cmp, 1, &idx));
    const sc_inst *init = sc_find(sc, w->comp, sc_operand(w, 0, &idx));
    int64_t start = sc_constant(sc, w->comp, sc_operand(init, 0, &idx));
    /* the body's ROOT tuple: element 0 = add(counter, constant(1)) */
    const sc_inst *root = NULL;
    for (int k = 0; k < sc->n; k++)
      if (sc->v[k].comp == comp && sc->v[k].root) root = &sc->v[k];
    const sc_inst *inc = sc_find(sc, comp, sc_operand(root, 0, &idx));
    cr_assert(span_is(inc->opcode, "add"));
    cr_assert_eq(sc_constant(sc, comp, sc_operand(inc, 1, &idx)), 1);
    return (limit - start) * sc_multiplier(sc, w->comp);
  }
  cr_assert_fail("computation %.*s holds a dot but is neither ENTRY nor a while body", body.n,
                 body.s);
  return 0;
}

/* 2 x output elements x contracted elements, per dot, times its loop count. */
static double sc_dot_flops(const scan *sc) {
  double total = 0;
  for (int i = 0; i < sc->n; i++) {
    const sc_inst *in = &sc->v[i];
    if (!span_is(in->opcode, "dot")) continue;
    int64_t out[8], lhs[8];
    int no = sc_dims(in->shape, -1, out);
    sc_operand_dims(sc, in, 0, lhs);
    const char *c = sc_attr(in, "lhs_contracting_dims") + 1;
    double k = 1;
    while (*c != '}') {
      k *= (double)lhs[strtol(c, (char **)&c, 10)];
      if (*c == ',') c++;
    }
    total += 2.0 * (double)product(out, no) * k * (double)sc_multiplier(sc, in->comp);
  }
  return total;
}

/* 2 x output elements x kernel window x kernel input features. */
static double sc_conv_flops(const scan *sc) {
  double total = 0;
  for (int i = 0; i < sc->n; i++) {
    const sc_inst *in = &sc->v[i];
    if (!span_is(in->opcode, "convolution")) continue;
    int64_t out[8], k[8];
    int no = sc_dims(in->shape, -1, out);
    sc_operand_dims(sc, in, 1, k);
    const char *lab = strchr(sc_attr(in, "dim_labels"), '_') + 1;
    double w = 1;
    for (int j = 0; lab[j] != '-'; j++) {
      if (lab[j] >= '0' && lab[j] <= '9') w *= (double)k[j];
      if (lab[j] == 'i') w *= (double)k[j];
    }
    total += 2.0 * (double)product(out, no) * w * (double)sc_multiplier(sc, in->comp);
  }
  return total;
}

/* cuDNN attention with Q [b,s,h,d], K [b,s_kv,h,d]: 4bhsSd, /2 causal, x2.5 backward. */
static double sc_fmha_flops(const scan *sc) {
  double total = 0;
  for (int i = 0; i < sc->n; i++) {
    const sc_inst *in = &sc->v[i];
    const char *t = span_is(in->opcode, "custom-call") ? sc_attr(in, "custom_call_target") : NULL;
    if (!t || strncmp(t, "\"__cudnn$fmha", 13) != 0) continue;
    int64_t q[8], k[8];
    cr_assert_eq(sc_operand_dims(sc, in, 0, q), 4);
    sc_operand_dims(sc, in, 1, k);
    double f = 4.0 * (double)(q[0] * q[2] * q[1] * k[1] * q[3]);
    const char *end = in->rest.s + in->rest.n,
               *causal = strstr(in->rest.s, "\"mask_type\":\"CAUSAL\"");
    if (causal && causal < end) f /= 2;
    if (strncmp(t, "\"__cudnn$fmhaSoftmaxBackward\"", 29) == 0) f *= 2.5;
    total += f * (double)sc_multiplier(sc, in->comp);
  }
  return total;
}

/* Every opcode the scan sees is counted the same by the parser. */
static void assert_opcode_counts(const scan *sc, const hlo_module *m) {
  for (int i = 0; i < sc->n; i++) {
    span op = sc->v[i].opcode;
    bool first = true;
    for (int j = 0; j < i && first; j++)
      first = !span_eq(sc->v[j].opcode, op);
    if (!first) continue;
    int n = 0;
    for (int j = 0; j < sc->n; j++)
      n += span_eq(sc->v[j].opcode, op);
    char name[64];
    snprintf(name, sizeof name, "%.*s", op.n, op.s);
    cr_assert_eq(hlo_opcode_count(m, name), n, "%s: parser %d, scan %d", name,
                 hlo_opcode_count(m, name), n);
  }
  cr_assert_eq(hlo_instruction_count(m), sc->n);
  cr_assert_eq(hlo_computation_count(m), sc->n_comps);
}

typedef struct {
  const char *file;
  int computations, instructions;
  const char *opcode[3];
  int count[3];
  double dot_flops, conv_flops, fmha_flops; /* also derived by sc_*; these pin them */
} real_dump;

static void check_real_dump(const real_dump *r) {
  char path[256];
  snprintf(path, sizeof path, "%s", REF(r->file));
  size_t len;
  char *text = th_slurp(path, &len);
  scan sc;
  scan_text(&sc, text);
  diag *d = diag_new();
  hlo_module *m = hlo_parse(path, text, len, d);
  cr_assert_not_null(m, "%s", diag_count(d) ? diag_message(d, 0) : "");
  assert_opcode_counts(&sc, m);
  cr_assert_eq(hlo_computation_count(m), r->computations);
  cr_assert_eq(hlo_instruction_count(m), r->instructions);
  for (int i = 0; i < 3 && r->opcode[i]; i++)
    cr_assert_eq(hlo_opcode_count(m, r->opcode[i]), r->count[i], "%s", r->opcode[i]);

  graph *g = hlo_build(m, d);
  cr_assert_not_null(g, "%s", diag_count(d) ? diag_message(d, 0) : "");
  double dot = sc_dot_flops(&sc), conv = sc_conv_flops(&sc), fmha = sc_fmha_flops(&sc);
  cr_assert_float_eq(dot, r->dot_flops, 0.5, "scan: dot %.17g", dot);
  cr_assert_float_eq(conv, r->conv_flops, 0.5, "scan: conv %.17g", conv);
  cr_assert_float_eq(fmha, r->fmha_flops, 0.5, "scan: fmha %.17g", fmha);
  cr_assert_float_eq(kind_flops(g, GOP_DOT), dot, 0.5, "graph dot %.17g", kind_flops(g, GOP_DOT));
  cr_assert_float_eq(kind_flops(g, GOP_CONV), conv, 0.5);
  cr_assert_float_eq(kind_flops(g, GOP_CUSTOM), fmha, 0.5);
  /* each dot and convolution instruction becomes exactly one graph op */
  cr_assert_eq(kind_count(g, GOP_DOT), hlo_opcode_count(m, "dot"));
  cr_assert_eq(kind_count(g, GOP_CONV), hlo_opcode_count(m, "convolution"));
  graph_free(g);
  hlo_module_free(m);
  diag_free(d);
  free(sc.v);
  free(text);
}

Test(hlo_real, ssd_mobilenet_tf) {
  check_real_dump(&(real_dump){"ssd_mobilenet_tf.hlo",
                               1,
                               508,
                               {"convolution", "constant", "clamp"},
                               {47, 177, 35},
                               0,
                               2474258816.0,
                               0});
}

Test(hlo_real, graphsage_tf) {
  check_real_dump(&(real_dump){"graphsage_tf.hlo",
                               5,
                               138,
                               {"dot", "gather", "get-tuple-element"},
                               {7, 3, 1},
                               474624.0,
                               0,
                               0});
}

Test(hlo_real, dlrm_keras_jax_train_step) {
  check_real_dump(&(real_dump){"dlrm_keras_jax_f32_train_step.hlo",
                               74,
                               1386,
                               {"dot", "call", "scatter"},
                               {20, 63, 6},
                               2904387584.0,
                               0,
                               0});
}

/* The forward and backward scans over 32 decoder layers: each body's ops
** count 32 times. */
Test(hlo_real, llama3_8b_train_step_with_while_loops) {
  check_real_dump(&(real_dump){"nv_maxtext_llama3_8b_1n8g_after_spmd_partitioner.hlo",
                               118,
                               1493,
                               {"dot", "while", "custom-call"},
                               {29, 2, 3},
                               193043781124096.0,
                               0,
                               19791209299968.0});
  size_t len;
  char *text = th_slurp(REF("nv_maxtext_llama3_8b_1n8g_after_spmd_partitioner.hlo"), &len);
  diag *d = diag_new();
  hlo_module *m = hlo_parse("llama", text, len, d);
  cr_assert_eq(hlo_while_trip_count(m, "while.50"), 32);
  cr_assert_eq(hlo_while_trip_count(m, "while.51"), 32);
  graph *g = hlo_build(m, d);
  const graph_op *ag = op_named(g, "while.50/all-gather/all-gather");
  cr_assert_eq(ag->count, 32);
  cr_assert_eq(ag->group_size, 8); /* mesh['axis_0'=8] {'axis_0'} */
  cr_assert_eq(
      op_named(g, "while.51/dot_product_attention_bwd.8/__cudnn$fmhaSoftmaxBackward")->phase,
      GRAPH_BACKWARD);
  graph_free(g);
  hlo_module_free(m);
  diag_free(d);
  free(text);
}

/* ---------------------------------------------------------------- bad input */

/* "line:col" of the end of the text, counted here. */
static void where_end(const char *text, char *buf, size_t n) {
  int line = 1, col = 1;
  for (const char *p = text; *p; p++) {
    if (*p == '\n')
      line++, col = 1;
    else
      col++;
  }
  snprintf(buf, n, "%d:%d", line, col);
}

static const struct {
  const char *file;
  const char *at; /* the error's place: first occurrence; NULL = end of file */
  const char *says;
} BAD[] = {
    {"bad-truncated.hlo", NULL, "found end of file"},
    {"bad-truncated-string.hlo", "\"jit(f)/exp", "string is not closed"},
    {"bad-unclosed.hlo", "%main (", "computation main is not closed before the end of the file"},
    {"bad-unknown-op.hlo", "frobnicate", "unknown opcode 'frobnicate'"},
    {"bad-typo-op.hlo", "multiplly", "unknown opcode 'multiplly' (did you mean 'multiply'?)"},
    {"bad-undefined.hlo", "%nothere", "operand %nothere of %y is not defined in computation main"},
    {"bad-cycle.hlo", "%a = ", "instructions form a cycle: %a -> %b -> %a"},
    {"bad-shape.hlo",
     "%y = ", "%y (dot): the text gives the shape f32[8,4095], the operands give f32[8,4096]"},
    {"bad-operands.hlo", "%s = ", "%s (add): operand shapes differ: f32[8,16] vs f32[16,8]"},
    {"bad-garbage.hlo", "\x01", "expected 'HloModule' or a computation, found byte 0x01"},
    {"bad-custom-call.hlo", "%k = ", "custom-call target \"my_fused_kernel\" is not supported"},
    {"bad-while.hlo",
     "%loop = ", "%loop (while): cannot derive the trip count: the condition cond"},
    {"bad-duplicate.hlo", "%y = f32[4]{0} exponential", "instruction %y is defined twice"},
    {"bad-recursion.hlo", "%again", "computation f calls itself"},
    {"bad-dtype.hlo", "c64[4] {", "element type 'c64' is not supported"},
    {"bad-tuple-index.hlo", "%z = ", "%t#5: %t is not a tuple with an element 5"},
    {"bad-arity.hlo", "%y = ", "%y (add): takes 2 operands, has 3"},
    {"bad-no-computation.hlo", NULL, "no computation in the file"},
    {"bad-window.hlo", "%c = ", "window={size=3x3 pad=1_1} is malformed"},
    {"bad-call-fanout.hlo", "%x = f32[4]{0} call(%a), to_apply=%c10",
     "%x (call): importing the module would make about 496740422 graph ops"},
    {"bad-call-shape.hlo",
     "%a = ", "%a (parameter): the text gives the shape f32[8], the caller passes f32[4]"},
    {"bad-lambda.hlo", "to_apply=", "to_apply=%sum_missing: no such computation"},
    {"bad-groups.hlo", "%ar = ", "replica_groups=mesh['x'=2] {'y'}: not a list, iota or mesh"},
};

/* Each bad file fails with one message "file:line:col: text" at the place
** the table names. */
Test(hlo_bad, each_error_names_its_place) {
  for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
    char path[128], want[256], place[32];
    snprintf(path, sizeof path, DATA "%s", BAD[i].file);
    size_t len;
    char *text = th_slurp(path, &len);
    if (BAD[i].at)
      th_where(text, BAD[i].at, place, sizeof place);
    else
      where_end(text, place, sizeof place);
    snprintf(want, sizeof want, "%s:%s: ", path, place);
    diag *d = diag_new();
    graph *g = hlo_import_file(path, d);
    cr_assert_null(g, "%s imported", BAD[i].file);
    cr_assert_eq(diag_count(d), 1, "%s: %d messages", BAD[i].file, diag_count(d));
    const char *msg = diag_message(d, 0);
    cr_assert_eq(strncmp(msg, want, strlen(want)), 0, "%s: got \"%s\", want \"%s...\"", BAD[i].file,
                 msg, want);
    cr_assert_not_null(strstr(msg, BAD[i].says), "%s: got \"%s\"", BAD[i].file, msg);
    diag_free(d);
    free(text);
  }
}

Test(hlo_bad, empty_text_and_missing_file) {
  diag *d = diag_new();
  cr_assert_null(hlo_import("empty.hlo", "", 0, d));
  cr_assert_str_eq(diag_message(d, 0), "empty.hlo:1:1: no computation in the file");
  diag_clear(d);
  cr_assert_null(hlo_import_file(DATA "no-such-file.hlo", d));
  cr_assert_eq(diag_count(d), 1);
  cr_assert_not_null(strstr(diag_message(d, 0), "no-such-file.hlo"));
  diag_free(d);
}

/* Every prefix of a real module either imports or fails with a placed
** message; none crashes (the sanitizer build runs this too). */
static void truncations(const char *path, size_t step) {
  size_t len;
  char *text = th_slurp(path, &len);
  int failed = 0;
  for (size_t n = 0; n < len; n += step) {
    diag *d = diag_new();
    graph *g = hlo_import("cut.hlo", text, n, d);
    if (!g) {
      failed++;
      cr_assert_geq(diag_count(d), 1, "prefix %zu: no message", n);
      cr_assert_eq(strncmp(diag_message(d, 0), "cut.hlo:", 8), 0, "%s", diag_message(d, 0));
    }
    graph_free(g);
    diag_free(d);
  }
  cr_assert_gt(failed, (int)(len / step) / 2);
  free(text);
}

Test(hlo_bad, truncated_real_modules) {
  truncations(REF("graphsage_tf.hlo"), 13);
  truncations("workloads/examples/mlp_train_step.hlo", 7);
  truncations(REF("nv_maxtext_llama3_8b_1n8g_after_spmd_partitioner.hlo"), 3001);
}

/* Single bytes replaced by characters the syntax cares about. */
Test(hlo_bad, corrupted_bytes_never_crash) {
  size_t len;
  char *text = th_slurp(REF("graphsage_tf.hlo"), &len);
  static const char BYTES[] = "{}()[]%#=,\"'\n/*0x";
  uint32_t seed = 12345;
  for (int i = 0; i < 400; i++) {
    seed = seed * 1103515245u + 12345u;
    size_t at = (seed >> 8) % len;
    char saved = text[at];
    text[at] = BYTES[(seed >> 4) % (sizeof BYTES - 1)];
    diag *d = diag_new();
    graph *g = hlo_import("mut.hlo", text, len, d);
    if (!g) cr_assert_geq(diag_count(d), 1);
    graph_free(g);
    diag_free(d);
    text[at] = saved;
  }
  free(text);
}
