/*
** hlo_parse.c -- the HLO text parser: tokens, shapes, operands, attributes
** (kept as raw spans), instructions and computations, with names resolved and
** each computation put in dependency order (cycles reported). hlo_parse.
**
** Separate from the builder (hlo.c): the parse checks syntax only and knows
** nothing of graphs, so tests can look at it alone.
*/
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../base/jin.h"

/* ---------------------------------------------------------------- parser */

typedef struct {
  hlo_module *m;
  const char *t;
  size_t len, pos;
  diag *dg;
  bool failed;
} hlo_parser;

static void report(diag *dg, const hlo_module *m, size_t off, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  int line, col;
  jin_line_col(m->text, off > m->len ? m->len : off, &line, &col);
  diag_error(dg, m->file, line, col, NULL, "%s", msg);
}

/* Reports the first syntax error; the parser stops there, because after a
** malformed line the following messages would only be echoes. */
__attribute__((format(printf, 3, 4))) static bool perr(hlo_parser *p, size_t off, const char *fmt,
                                                       ...) {
  if (p->failed) return false;
  p->failed = true;
  va_list ap;
  va_start(ap, fmt);
  report(p->dg, p->m, off, fmt, ap);
  va_end(ap);
  return false;
}

static int cur(const hlo_parser *p) { return p->pos < p->len ? (unsigned char)p->t[p->pos] : -1; }

static bool at(const hlo_parser *p, const char *lit) {
  size_t l = strlen(lit);
  return p->len - p->pos >= l && memcmp(p->t + p->pos, lit, l) == 0;
}

/* What the text has at pos, for "expected X, found Y". */
static const char *found(const hlo_parser *p, char *buf, size_t n) {
  if (p->pos >= p->len) return "end of file";
  size_t k = 0;
  while (k + 1 < n && k < 16 && p->pos + k < p->len && p->t[p->pos + k] != '\n' &&
         isprint((unsigned char)p->t[p->pos + k]))
    k++;
  if (k == 0) {
    snprintf(buf, n, "byte 0x%02x", (unsigned char)p->t[p->pos]);
    return buf;
  }
  snprintf(buf, n, "'%.*s'", (int)k, p->t + p->pos);
  return buf;
}

static bool expected(hlo_parser *p, const char *what) {
  char buf[48];
  return perr(p, p->pos, "expected %s, found %s", what, found(p, buf, sizeof buf));
}

/* Skips blanks, newlines and comments: the printer marks tuple positions
** with C comments (index=5), people write // notes; XLA reads both. */
static bool skip_ws(hlo_parser *p) {
  for (;;) {
    int c = cur(p);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      p->pos++;
    } else if (at(p, "//")) {
      while (p->pos < p->len && p->t[p->pos] != '\n')
        p->pos++;
    } else if (at(p, "/*")) {
      const char *end = NULL;
      for (size_t i = p->pos + 2; i + 1 < p->len; i++)
        if (p->t[i] == '*' && p->t[i + 1] == '/') {
          end = p->t + i;
          break;
        }
      if (!end) return perr(p, p->pos, "comment is not closed before the end of the file");
      p->pos = (size_t)(end - p->t) + 2;
    } else {
      return true;
    }
  }
}

static bool is_ident(int c) { return c >= 0 && (isalnum(c) || c == '_' || c == '.' || c == '-'); }

static bool ident(hlo_parser *p, hlo_str *s) {
  size_t start = p->pos;
  while (is_ident(cur(p)))
    p->pos++;
  s->s = p->t + start;
  s->n = (int)(p->pos - start);
  return s->n > 0;
}

/* An instruction or computation name; the '%' is optional (newer printers
** drop it). */
static bool name(hlo_parser *p, hlo_str *s, const char *what) {
  if (cur(p) == '%') p->pos++;
  if (!ident(p, s)) return expected(p, what);
  return true;
}

static bool expect(hlo_parser *p, char c, const char *what) {
  if (!skip_ws(p)) return false;
  if (cur(p) != c) return expected(p, what);
  p->pos++;
  return true;
}

static bool read_int(hlo_parser *p, int64_t *v) {
  size_t start = p->pos;
  bool neg = cur(p) == '-';
  if (neg) p->pos++;
  if (!isdigit(cur(p))) {
    p->pos = start;
    return expected(p, "an integer");
  }
  int64_t x = 0;
  while (isdigit(cur(p))) {
    int d = cur(p) - '0';
    if (x > (INT64_MAX - d) / 10) return perr(p, start, "integer is too large");
    x = x * 10 + d;
    p->pos++;
  }
  *v = neg ? -x : x;
  return true;
}

/* Skips a quoted string ("..." or '...', with backslash escapes). */
static bool skip_string(hlo_parser *p) {
  size_t start = p->pos;
  char q = p->t[p->pos++];
  while (p->pos < p->len && p->t[p->pos] != q)
    p->pos += p->t[p->pos] == '\\' ? 2 : 1;
  if (p->pos >= p->len) {
    p->pos = p->len;
    return perr(p, start, "string is not closed before the end of the file");
  }
  p->pos++;
  return true;
}

/* Skips an attribute value or a literal: everything up to a ',' or newline
** outside brackets and strings, or an unmatched closing bracket. */
static bool skip_value(hlo_parser *p) {
  size_t start = p->pos;
  int depth = 0;
  while (p->pos < p->len) {
    char c = p->t[p->pos];
    if (c == '"' || c == '\'') {
      if (!skip_string(p)) return false;
      continue;
    }
    if (c == '{' || c == '[' || c == '(') {
      depth++;
    } else if (c == '}' || c == ']' || c == ')') {
      if (depth == 0) break;
      depth--;
    } else if (depth == 0 && (c == ',' || c == '\n')) {
      break;
    }
    p->pos++;
  }
  if (depth > 0)
    return perr(p, start, "bracket opened here is not closed before the end of the file");
  return true;
}

/* Skips one balanced (...), [...] or {...} group starting at pos. */
static bool skip_group(hlo_parser *p) {
  size_t start = p->pos;
  int depth = 0;
  while (p->pos < p->len) {
    char c = p->t[p->pos];
    if (c == '"' || c == '\'') {
      if (!skip_string(p)) return false;
      continue;
    }
    p->pos++;
    if (c == '{' || c == '[' || c == '(')
      depth++;
    else if ((c == '}' || c == ']' || c == ')') && --depth == 0)
      return true;
  }
  return perr(p, start, "bracket opened here is not closed before the end of the file");
}

/* Element types the graph has; the rest are errors rather than guesses. */
static int parse_dtype(hlo_str s) {
  char buf[24];
  if (s.n <= 0 || s.n >= (int)sizeof buf) return -1;
  memcpy(buf, s.s, (size_t)s.n);
  buf[s.n] = 0;
  if (strcmp(buf, "token") == 0) return GDT_PRED;
  if (strcmp(buf, "u64") == 0) return GDT_S64;
  if (strncmp(buf, "f8e", 3) == 0) return GDT_F8; /* every 8-bit float format */
  if (strcmp(buf, "u4") == 0 || strcmp(buf, "s4") == 0) return GDT_S4;
  static const char *const HLO_NAMES[] = {"pred", "s8",  "u8",   "s32", "u32",
                                          "s64",  "f16", "bf16", "f32", "f64"};
  for (size_t i = 0; i < sizeof HLO_NAMES / sizeof *HLO_NAMES; i++)
    if (strcmp(buf, HLO_NAMES[i]) == 0) return graph_dtype_parse(buf);
  return -1;
}

static bool parse_shape(hlo_parser *p, hlo_shape *s, int depth);

/* Items separated by ',' up to a ')' (consumed), each parsed by `item` into
** `tmp` and pushed to v: the shape of tuple shapes and of operand lists. */
static bool parse_list(hlo_parser *p, hlo_vec *v, void *tmp, bool (*item)(hlo_parser *, void *, int),
                       int depth, const char *what) {
  bool ok = skip_ws(p);
  if (ok && cur(p) != ')') {
    for (;;) {
      if (!(ok = skip_ws(p) && item(p, tmp, depth) && skip_ws(p))) break;
      if (!(ok = hlo_vec_push(v, tmp))) {
        perr(p, p->pos, "out of memory");
        break;
      }
      if (cur(p) == ',') {
        p->pos++;
        continue;
      }
      if (cur(p) != ')') ok = expected(p, what);
      break;
    }
  }
  if (ok) p->pos++;
  return ok;
}

static bool shape_item(hlo_parser *p, void *out, int depth) { return parse_shape(p, out, depth); }

static bool parse_tuple_shape(hlo_parser *p, hlo_shape *s, int depth) {
  p->pos++; /* ( */
  hlo_vec v = {.size = sizeof(hlo_shape)};
  hlo_shape e;
  bool ok = parse_list(p, &v, &e, shape_item, depth + 1, "',' or ')' in a tuple shape");
  s->n = v.n;
  s->el = hlo_vec_done(&v, &p->m->ar, &ok);
  return ok || perr(p, p->pos, "out of memory");
}

/* f32[8,128]{1,0}, s32[], (f32[2], token[]), bf16[<=16,4]. Layouts (any
** {...} right after the dims, tiling included) are skipped: the graph
** has no layouts. */
static bool parse_shape(hlo_parser *p, hlo_shape *s, int depth) {
  memset(s, 0, sizeof *s);
  s->n = -1;
  if (!skip_ws(p)) return false;
  if (depth > 32) return perr(p, p->pos, "tuple shapes nested too deeply");
  if (cur(p) == '(') return parse_tuple_shape(p, s, depth);
  size_t off = p->pos;
  hlo_str dt;
  if (!ident(p, &dt)) return expected(p, "a shape");
  int d = parse_dtype(dt);
  if (d < 0)
    return perr(p, off,
                "element type '%.*s' is not supported (the graph has pred, s4, s8, u8, "
                "s32, u32, s64, f8, f16, bf16, f32, f64)",
                dt.n, dt.s);
  s->arr.dtype = (graph_dtype)d;
  if (cur(p) != '[') return expected(p, "'[' after the element type");
  p->pos++;
  while (skip_ws(p) && cur(p) != ']') {
    if (s->arr.rank == GRAPH_MAX_RANK)
      return perr(p, off, "shape has more than %d dimensions", GRAPH_MAX_RANK);
    if (at(p, "<=")) p->pos += 2; /* a dynamic dimension: its bound */
    if (!read_int(p, &s->arr.dim[s->arr.rank])) return false;
    if (s->arr.dim[s->arr.rank++] < 0) return perr(p, off, "negative dimension in a shape");
    if (!skip_ws(p)) return false;
    if (cur(p) == ',')
      p->pos++;
    else if (cur(p) != ']')
      return expected(p, "',' or ']' in a shape");
  }
  if (p->failed) return false;
  p->pos++;
  if (cur(p) == '{') return skip_group(p);
  return true;
}

/* %x, %x#3, or the old form with the operand's shape first: f32[2] %x. */
static bool parse_operand(hlo_parser *p, hlo_operand *o) {
  memset(o, 0, sizeof *o);
  o->index = -1;
  o->off = p->pos;
  if (cur(p) == '(') {
    hlo_shape ignored;
    if (!parse_shape(p, &ignored, 0) || !skip_ws(p)) return false;
  } else if (cur(p) != '%') {
    size_t save = p->pos;
    hlo_str w;
    ident(p, &w);
    bool typed = cur(p) == '[';
    p->pos = save;
    if (typed) {
      hlo_shape ignored;
      if (!parse_shape(p, &ignored, 0) || !skip_ws(p)) return false;
    }
  }
  o->off = p->pos;
  if (!name(p, &o->name, "an operand name")) return false;
  if (cur(p) == '#') {
    p->pos++;
    int64_t k;
    if (!read_int(p, &k)) return false;
    if (k < 0 || k > 1 << 20)
      return perr(p, o->off, "tuple index %lld is out of range", (long long)k);
    o->index = (int)k;
  }
  return true;
}

static bool operand_item(hlo_parser *p, void *out, int depth) {
  (void)depth;
  return parse_operand(p, out);
}

static bool parse_operands(hlo_parser *p, hlo_inst *in) {
  hlo_vec v = {.size = sizeof(hlo_operand)};
  hlo_operand o;
  bool ok = parse_list(p, &v, &o, operand_item, 0, "',' or ')' after an operand");
  in->n_ops = v.n;
  in->ops = hlo_vec_done(&v, &p->m->ar, &ok);
  return ok || perr(p, p->pos, "out of memory");
}

/* , key=value pairs until something else follows. */
static bool parse_attrs(hlo_parser *p, hlo_vec *v) {
  for (;;) {
    size_t save = p->pos;
    if (!skip_ws(p)) return false;
    if (cur(p) != ',') {
      p->pos = save;
      return true;
    }
    p->pos++;
    if (!skip_ws(p)) return false;
    hlo_attr a = {.off = p->pos};
    if (!ident(p, &a.key)) return expected(p, "an attribute name");
    if (!expect(p, '=', "'=' after the attribute name") || !skip_ws(p)) return false;
    size_t vstart = p->pos;
    if (!skip_value(p)) return false;
    size_t vend = p->pos;
    while (vend > vstart && isspace((unsigned char)p->t[vend - 1]))
      vend--;
    a.val.s = p->t + vstart;
    a.val.n = (int)(vend - vstart);
    if (!hlo_vec_push(v, &a)) return perr(p, p->pos, "out of memory");
  }
}

/* The parenthesised part after the opcode: a literal for constant, the
** number for parameter, operands for everything else. */
static bool parse_call_part(hlo_parser *p, hlo_inst *in) {
  if (!expect(p, '(', "'(' after the opcode")) return false;
  if (!op_is(in, "constant") && !op_is(in, "parameter")) return parse_operands(p, in);
  size_t start = p->pos;
  if (!skip_value(p)) return false;
  if (cur(p) != ')') return expected(p, "')'");
  in->paren.s = p->t + start;
  in->paren.n = (int)(p->pos - start);
  p->pos++;
  if (op_is(in, "parameter")) {
    char *end;
    long long k = strtoll(in->paren.s, &end, 10);
    while (end < in->paren.s + in->paren.n && isspace((unsigned char)*end))
      end++;
    if (end != in->paren.s + in->paren.n || in->paren.n == 0 || k < 0 || k > 1 << 20)
      return perr(p, start, "parameter number must be a non-negative integer");
    in->param_no = (int)k;
  }
  return true;
}

/* [ROOT] %name = shape opcode(operands), attr=value, ... */
static bool parse_inst(hlo_parser *p, hlo_inst *in) {
  memset(in, 0, sizeof *in);
  in->param_no = -1;
  in->off = p->pos;
  if (at(p, "ROOT") && !is_ident((unsigned char)p->t[p->pos + 4])) {
    in->root = true;
    p->pos += 4;
    if (!skip_ws(p)) return false;
    in->off = p->pos;
  }
  if (!name(p, &in->name, "an instruction ('%name = shape opcode(...)') or '}'")) return false;
  if (!expect(p, '=', "'=' after the instruction name")) return false;
  if (!parse_shape(p, &in->shape, 0) || !skip_ws(p)) return false;
  in->op_off = p->pos;
  if (!ident(p, &in->opcode)) return expected(p, "an opcode");
  in->row = hlo_op_lookup(in->opcode);
  if (!in->row) {
    const char *s = hlo_op_suggest(in->opcode);
    return perr(p, in->op_off, "unknown opcode '%.*s'%s%s%s", in->opcode.n, in->opcode.s,
                s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
  }
  if (!parse_call_part(p, in)) return false;
  hlo_vec v = {.size = sizeof(hlo_attr)};
  bool ok = parse_attrs(p, &v);
  in->n_attrs = v.n;
  in->attrs = hlo_vec_done(&v, &p->m->ar, &ok);
  return ok || perr(p, p->pos, "out of memory");
}

/* Operand names -> instruction indices; exactly one ROOT (or the last
** instruction, as XLA's parser allows); parameters numbered 0..n-1. */
static bool resolve_comp(hlo_parser *p, hlo_comp *c) {
  int dup;
  c->table = hlo_name_table(&p->m->ar, c->insts, sizeof *c->insts, offsetof(hlo_inst, name), c->n,
                        &c->tsize, &dup);
  if (!c->table) return perr(p, c->off, "out of memory");
  if (dup >= 0)
    return perr(p, c->insts[dup].off, "instruction %%%.*s is defined twice", c->insts[dup].name.n,
                c->insts[dup].name.s);
  c->root = -1;
  for (int i = 0; i < c->n; i++) {
    hlo_inst *in = &c->insts[i];
    if (in->root && c->root >= 0)
      return perr(p, in->off, "computation %.*s has a second ROOT", c->name.n, c->name.s);
    if (in->root) c->root = i;
    for (int k = 0; k < in->n_ops; k++) {
      hlo_operand *o = &in->ops[k];
      o->inst = hlo_inst_find(c, o->name);
      if (o->inst < 0)
        return perr(p, o->off, "operand %%%.*s of %%%.*s is not defined in computation %.*s",
                    o->name.n, o->name.s, in->name.n, in->name.s, c->name.n, c->name.s);
    }
    if (in->param_no >= 0) c->n_params++;
  }
  if (c->root < 0) c->root = c->n - 1;
  bool *seen = hlo_arena_alloc(&p->m->ar, (size_t)c->n_params + 1);
  if (!seen) return perr(p, c->off, "out of memory");
  for (int i = 0; i < c->n; i++) {
    const hlo_inst *in = &c->insts[i];
    if (in->param_no < 0) continue;
    if (in->param_no >= c->n_params || seen[in->param_no])
      return perr(p, in->off, "parameter(%d) of computation %.*s: numbers must be 0..%d, each once",
                  in->param_no, c->name.n, c->name.s, c->n_params - 1);
    seen[in->param_no] = true;
  }
  return true;
}

/* The text order when every operand comes first (what XLA prints), else a
** topological order; a cycle is an error naming its instructions. */
static bool order_comp(hlo_parser *p, hlo_comp *c) {
  c->order = hlo_arena_alloc(&p->m->ar, (size_t)c->n * sizeof *c->order);
  if (!c->order) return perr(p, c->off, "out of memory");
  bool sorted = true;
  for (int i = 0; i < c->n; i++) {
    c->order[i] = i;
    for (int k = 0; k < c->insts[i].n_ops; k++)
      if (c->insts[i].ops[k].inst >= i) sorted = false;
  }
  if (sorted) return true;
  const int **in = hlo_arena_alloc(&p->m->ar, (size_t)c->n * sizeof *in);
  int *n_in = hlo_arena_alloc(&p->m->ar, (size_t)c->n * sizeof *n_in);
  int *cycle = hlo_arena_alloc(&p->m->ar, (size_t)c->n * sizeof *cycle);
  int **lists = hlo_arena_alloc(&p->m->ar, (size_t)c->n * sizeof *lists);
  if (!in || !n_in || !cycle || !lists) return perr(p, c->off, "out of memory");
  for (int i = 0; i < c->n; i++) {
    n_in[i] = c->insts[i].n_ops;
    lists[i] = hlo_arena_alloc(&p->m->ar, (size_t)(n_in[i] + 1) * sizeof **lists);
    if (!lists[i]) return perr(p, c->off, "out of memory");
    for (int k = 0; k < n_in[i]; k++)
      lists[i][k] = c->insts[i].ops[k].inst;
    in[i] = lists[i];
  }
  int len = 0;
  int rc = graph_toposort(c->n, in, n_in, c->order, cycle, &len);
  if (rc == -2) return perr(p, c->off, "out of memory");
  if (rc == 0) return true;
  if (len <= 0) return perr(p, c->off, "instructions of %.*s form a cycle", c->name.n, c->name.s);
  char msg[512];
  size_t at_ = 0;
  for (int i = 0; i <= len && at_ < sizeof msg; i++) {
    const hlo_inst *x = &c->insts[cycle[i % len]];
    at_ += (size_t)snprintf(msg + at_, sizeof msg - at_, "%s%%%.*s", i ? " -> " : "", x->name.n,
                            x->name.s);
  }
  return perr(p, c->insts[cycle[0]].off, "instructions form a cycle: %s", msg);
}

/* [ENTRY] %name [(params) -> shape] { instructions } [, attrs] */
static bool parse_comp(hlo_parser *p, hlo_vec *comps) {
  hlo_comp c = {.off = p->pos};
  if (at(p, "ENTRY") && !is_ident((unsigned char)p->t[p->pos + 5])) {
    c.entry = true;
    p->pos += 5;
    if (!skip_ws(p)) return false;
  }
  size_t name_off = p->pos;
  if (!name(p, &c.name, "a computation ('%name (params) -> shape {' or 'ENTRY')") || !skip_ws(p))
    return false;
  if (cur(p) == '(') {
    if (!skip_group(p) || !skip_ws(p)) return false;
    if (!at(p, "->")) return expected(p, "'->' after the computation's parameters");
    p->pos += 2;
    hlo_shape ignored;
    if (!parse_shape(p, &ignored, 0)) return false;
  }
  if (!expect(p, '{', "'{' to open the computation")) return false;
  hlo_vec v = {.size = sizeof(hlo_inst)};
  bool ok = true;
  while ((ok = skip_ws(p))) {
    if (cur(p) == '}') break;
    if (cur(p) < 0) {
      ok = perr(p, name_off, "computation %.*s is not closed before the end of the file", c.name.n,
                c.name.s);
      break;
    }
    hlo_inst in;
    if (!(ok = parse_inst(p, &in))) break;
    if (!(ok = hlo_vec_push(&v, &in))) {
      perr(p, p->pos, "out of memory");
      break;
    }
  }
  c.n = v.n;
  c.insts = hlo_vec_done(&v, &p->m->ar, &ok);
  if (!ok) return perr(p, p->pos, "out of memory");
  p->pos++; /* } */
  if (c.n == 0)
    return perr(p, name_off, "computation %.*s has no instructions", c.name.n, c.name.s);
  hlo_vec ignored = {.size = sizeof(hlo_attr)}; /* execution_thread="..." and the like */
  ok = parse_attrs(p, &ignored);
  free(ignored.p);
  if (!ok || !resolve_comp(p, &c) || !order_comp(p, &c)) return false;
  return hlo_vec_push(comps, &c) || perr(p, p->pos, "out of memory");
}

/* HloModule name, key=value, ...: keeps what the collectives need. */
static bool parse_header(hlo_parser *p) {
  p->pos += strlen("HloModule");
  if (!skip_ws(p) || !name(p, &p->m->name, "the module name")) return false;
  p->m->name_z = hlo_arena_alloc(&p->m->ar, (size_t)p->m->name.n + 1);
  if (!p->m->name_z) return perr(p, p->pos, "out of memory");
  memcpy(p->m->name_z, p->m->name.s, (size_t)p->m->name.n);
  hlo_vec v = {.size = sizeof(hlo_attr)};
  bool ok = parse_attrs(p, &v);
  for (int i = 0; ok && i < v.n; i++) {
    const hlo_attr *a = &((const hlo_attr *)v.p)[i];
    int64_t *dst = str_is(a->key, "num_partitions")  ? &p->m->num_partitions
                   : str_is(a->key, "replica_count") ? &p->m->replica_count
                                                     : NULL;
    if (!dst) continue;
    char *end;
    long long x = strtoll(a->val.s, &end, 10);
    if (end != a->val.s + a->val.n || x < 1)
      ok = perr(p, a->off, "%.*s must be a positive integer", a->key.n, a->key.s);
    else
      *dst = x;
  }
  free(v.p);
  return ok;
}

/* FileNames / FunctionNames / FileLocations / StackFrames: numbered lines
** that only feed metadata; skipped. */
static bool skip_table(hlo_parser *p) {
  while (p->pos < p->len && p->t[p->pos] != '\n')
    p->pos++;
  for (;;) {
    size_t line = p->pos + 1, k = line;
    while (k < p->len && (p->t[k] == ' ' || p->t[k] == '\t'))
      k++;
    if (k >= p->len || !isdigit((unsigned char)p->t[k])) return true;
    p->pos = k;
    while (p->pos < p->len && p->t[p->pos] != '\n') {
      if (p->t[p->pos] == '"') {
        if (!skip_string(p)) return false;
      } else {
        p->pos++;
      }
    }
  }
}

static bool is_table_word(const hlo_parser *p) {
  static const char *const WORDS[] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
  for (size_t i = 0; i < sizeof WORDS / sizeof *WORDS; i++)
    if (at(p, WORDS[i]) && !is_ident((unsigned char)p->t[p->pos + strlen(WORDS[i])])) return true;
  return false;
}

/* Every attribute that names a computation must name one of the module's,
** whether or not the builder will read it (reduction lambdas of collectives,
** sort comparators). */
static bool check_called(hlo_parser *p) {
  static const char *const KEYS[] = {"to_apply", "calls", "condition", "body", "select", "scatter"};
  for (int i = 0; i < p->m->n_comps; i++)
    for (int k = 0; k < p->m->comps[i].n; k++) {
      const hlo_inst *in = &p->m->comps[i].insts[k];
      for (int a = 0; a < in->n_attrs; a++)
        for (size_t j = 0; j < sizeof KEYS / sizeof *KEYS; j++) {
          hlo_str v = in->attrs[a].val;
          if (v.n > 1 && v.s[0] == '{' && v.s[v.n - 1] == '}') v.s++, v.n -= 2; /* calls={%f} */
          if (str_is(in->attrs[a].key, KEYS[j]) && hlo_comp_find(p->m, v) < 0)
            return perr(p, in->attrs[a].off, "%s=%.*s: no such computation", KEYS[j],
                        in->attrs[a].val.n, in->attrs[a].val.s);
        }
    }
  return true;
}

/* Names must be unique; without an ENTRY keyword the last computation is
** the entry (XLA's own rule). */
static bool finish_module(hlo_parser *p) {
  hlo_module *m = p->m;
  if (m->n_comps == 0) return perr(p, p->len, "no computation in the file");
  int dup;
  m->table = hlo_name_table(&m->ar, m->comps, sizeof *m->comps, offsetof(hlo_comp, name),
                            m->n_comps, &m->tsize, &dup);
  if (!m->table) return perr(p, 0, "out of memory");
  if (dup >= 0)
    return perr(p, m->comps[dup].off, "computation %.*s is defined twice", m->comps[dup].name.n,
                m->comps[dup].name.s);
  m->entry = -1;
  for (int i = 0; i < m->n_comps; i++) {
    if (!m->comps[i].entry) continue;
    if (m->entry >= 0) return perr(p, m->comps[i].off, "a second ENTRY computation");
    m->entry = i;
  }
  if (m->entry < 0) m->entry = m->n_comps - 1;
  m->jax_phases = strstr(m->text, "jvp(") != NULL;
  return check_called(p);
}

static bool parse_module(hlo_parser *p) {
  hlo_vec comps = {.size = sizeof(hlo_comp)};
  bool ok = true;
  while (ok && (ok = skip_ws(p)) && p->pos < p->len) {
    if (at(p, "HloModule") && !is_ident((unsigned char)p->t[p->pos + 9]))
      ok = parse_header(p);
    else if (is_table_word(p))
      ok = skip_table(p);
    else if (is_ident(cur(p)) || cur(p) == '%')
      ok = parse_comp(p, &comps);
    else
      ok = expected(p, "'HloModule' or a computation");
  }
  p->m->n_comps = comps.n;
  p->m->comps = hlo_vec_done(&comps, &p->m->ar, &ok);
  if (!ok) return perr(p, p->pos, "out of memory");
  return finish_module(p);
}
hlo_module *hlo_parse(const char *file, const char *text, size_t len, diag *dg) {
  hlo_module *m = calloc(1, sizeof *m);
  if (m) {
    m->file = malloc(strlen(file ? file : "<hlo>") + 1);
    m->text = malloc(len + 1);
  }
  if (!m || !m->file || !m->text) {
    diag_error(dg, file, 0, 0, NULL, "out of memory");
    hlo_module_free(m);
    return NULL;
  }
  strcpy(m->file, file ? file : "<hlo>");
  if (len) memcpy(m->text, text, len);
  m->text[len] = 0;
  m->len = len;
  /* HLO is text: a NUL would end the C-string scans (the JAX phase markers
  ** in comments are found with strstr) and cut what they see short */
  const char *nul = len ? memchr(m->text, '\0', len) : NULL;
  if (nul) {
    int line, col;
    jin_line_col(m->text, (size_t)(nul - m->text), &line, &col);
    diag_error(dg, m->file, line, col, NULL, "a NUL byte: expected HLO text");
    hlo_module_free(m);
    return NULL;
  }
  m->num_partitions = m->replica_count = 1;
  hlo_parser p = {.m = m, .t = m->text, .len = len, .dg = dg};
  if (!parse_module(&p)) {
    hlo_module_free(m);
    return NULL;
  }
  return m;
}
