/*
** hlo.c -- see hlo.h.
**
** Two passes. The parser turns the text into computations of instructions:
** each instruction keeps its written shape, opcode row, operands (resolved to
** instruction indices) and its attributes as raw text spans, which handlers
** read on demand -- so an attribute nobody needs (metadata, sharding,
** frontend_attributes) costs one skip and can never break the import. The
** builder then walks ENTRY in dependency order, binding each instruction to a
** value (an array = a graph op id, or a tuple of values) through a table of
** opcode handlers, and checks every value against the written shape.
**
** Memory: the parser and the builder each allocate from an arena freed in
** one go, so an error anywhere needs no unwinding.
*/
#include "hlo.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/jin.h"
#include "../base/strutil.h"

#define HLO_MAX_FILE (256u << 20)
/* Deeper nesting of calls than this is a runaway recursion, not a model. */
#define HLO_MAX_DEPTH 64

/* ---------------------------------------------------------------- arena */

typedef struct hlo_chunk {
  struct hlo_chunk *next;
  size_t used, cap;
  max_align_t data[];
} hlo_chunk;

typedef struct {
  hlo_chunk *head;
} hlo_arena;

/* Zeroed memory that lives until arena_free; NULL when out of memory. */
static void *arena_alloc(hlo_arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (n == 0) n = sizeof(max_align_t);
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > (64u << 10) ? n : (64u << 10);
    hlo_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = (char *)a->head->data + a->head->used;
  a->head->used += n;
  memset(p, 0, n);
  return p;
}

static void arena_free(hlo_arena *a) {
  for (hlo_chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  a->head = NULL;
}

/* A growable array while a list is being read; vec_done moves it into the
** arena so the parsed module owns no separate allocations. */
typedef struct {
  char *p;
  int n, cap;
  size_t size;
} hlo_vec;

static bool vec_push(hlo_vec *v, const void *x) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    char *p = realloc(v->p, (size_t)cap * v->size);
    if (!p) return false;
    v->p = p;
    v->cap = cap;
  }
  memcpy(v->p + (size_t)v->n * v->size, x, v->size);
  v->n++;
  return true;
}

static void *vec_done(hlo_vec *v, hlo_arena *a, bool *ok) {
  void *out = NULL;
  if (v->n) {
    out = arena_alloc(a, (size_t)v->n * v->size);
    if (out)
      memcpy(out, v->p, (size_t)v->n * v->size);
    else
      *ok = false;
  }
  free(v->p);
  v->p = NULL;
  return out;
}

/* ---------------------------------------------------------------- module */

typedef struct {
  const char *s;
  int n;
} hlo_str;

static bool str_is(hlo_str a, const char *lit) {
  size_t l = strlen(lit);
  return (size_t)a.n == l && memcmp(a.s, lit, l) == 0;
}

/* A shape as written: an array (n < 0) or a tuple of n shapes. token[] is
** read as a pred scalar: it carries ordering, not data. */
typedef struct hlo_shape {
  int n;
  graph_shape arr;
  struct hlo_shape *el;
} hlo_shape;

typedef struct {
  hlo_str name;
  int inst;  /* index in the computation, after resolution */
  int index; /* the k of the %x#k shorthand, or -1 */
  size_t off;
} hlo_operand;

typedef struct {
  hlo_str key, val;
  size_t off;
} hlo_attr;

typedef struct hlo_op_row hlo_op_row;

typedef struct {
  hlo_str name, opcode;
  const hlo_op_row *row;
  hlo_shape shape;
  bool root;
  hlo_str paren; /* text between constant( ) or parameter( ) */
  hlo_operand *ops;
  int n_ops;
  hlo_attr *attrs;
  int n_attrs;
  int param_no; /* parameter(N), else -1 */
  size_t off, op_off;
} hlo_inst;

typedef struct {
  hlo_str name;
  bool entry;
  size_t off;
  hlo_inst *insts;
  int n;
  int root;
  int n_params;
  int *order; /* a dependency order of insts */
  int *table; /* name -> inst, open addressing, size tsize */
  int tsize;
} hlo_comp;

struct hlo_module {
  char *file;
  char *text; /* owned, NUL-terminated */
  size_t len;
  hlo_str name;
  char *name_z; /* the name, NUL-terminated */
  int64_t num_partitions, replica_count;
  bool jax_phases; /* JAX op_names mark jvp / transpose(jvp): see hlo_phase */
  hlo_comp *comps;
  int n_comps;
  int entry;
  int *table; /* computation name -> index */
  int tsize;
  hlo_arena ar;
};

static uint32_t str_hash(hlo_str s) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < s.n; i++)
    h = (h ^ (unsigned char)s.s[i]) * 16777619u;
  return h;
}

/* Open-addressing name table over items[i].name; returns NULL when out of
** memory, sets *dup to the first duplicate found (or -1). */
static int *name_table(hlo_arena *a, const void *items, size_t stride, size_t name_off, int n,
                       int *tsize, int *dup) {
  int size = 16;
  while (size < 2 * n)
    size *= 2;
  int *t = arena_alloc(a, (size_t)size * sizeof *t);
  if (!t) return NULL;
  for (int i = 0; i < size; i++)
    t[i] = -1;
  *dup = -1;
  for (int i = 0; i < n; i++) {
    hlo_str s = *(const hlo_str *)((const char *)items + (size_t)i * stride + name_off);
    uint32_t h = str_hash(s) & (uint32_t)(size - 1);
    for (;; h = (h + 1) & (uint32_t)(size - 1)) {
      if (t[h] < 0) {
        t[h] = i;
        break;
      }
      hlo_str o = *(const hlo_str *)((const char *)items + (size_t)t[h] * stride + name_off);
      if (o.n == s.n && memcmp(o.s, s.s, (size_t)s.n) == 0) {
        if (*dup < 0) *dup = i;
        break;
      }
    }
  }
  *tsize = size;
  return t;
}

static int name_find(const int *t, int size, const void *items, size_t stride, size_t name_off,
                     hlo_str s) {
  if (!t) return -1;
  for (uint32_t h = str_hash(s) & (uint32_t)(size - 1);; h = (h + 1) & (uint32_t)(size - 1)) {
    if (t[h] < 0) return -1;
    hlo_str o = *(const hlo_str *)((const char *)items + (size_t)t[h] * stride + name_off);
    if (o.n == s.n && memcmp(o.s, s.s, (size_t)s.n) == 0) return t[h];
  }
}

static int inst_find(const hlo_comp *c, hlo_str s) {
  return name_find(c->table, c->tsize, c->insts, sizeof *c->insts, offsetof(hlo_inst, name), s);
}

static int comp_find(const hlo_module *m, hlo_str s) {
  if (s.n > 0 && s.s[0] == '%') s.s++, s.n--;
  return name_find(m->table, m->tsize, m->comps, sizeof *m->comps, offsetof(hlo_comp, name), s);
}

static const hlo_attr *attr_get(const hlo_inst *in, const char *key) {
  for (int i = 0; i < in->n_attrs; i++)
    if (str_is(in->attrs[i].key, key)) return &in->attrs[i];
  return NULL;
}

static bool op_is(const hlo_inst *in, const char *opcode) { return str_is(in->opcode, opcode); }

/* ---------------------------------------------------------------- parser */

typedef struct {
  hlo_module *m;
  const char *t;
  size_t len, pos;
  diag *dg;
  bool failed;
} hlo_parser;

static const hlo_op_row *op_lookup(hlo_str opcode);
static const char *op_suggest(hlo_str opcode);

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
      if (!(ok = vec_push(v, tmp))) {
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
  s->el = vec_done(&v, &p->m->ar, &ok);
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
  in->ops = vec_done(&v, &p->m->ar, &ok);
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
    if (!vec_push(v, &a)) return perr(p, p->pos, "out of memory");
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
  in->row = op_lookup(in->opcode);
  if (!in->row) {
    const char *s = op_suggest(in->opcode);
    return perr(p, in->op_off, "unknown opcode '%.*s'%s%s%s", in->opcode.n, in->opcode.s,
                s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
  }
  if (!parse_call_part(p, in)) return false;
  hlo_vec v = {.size = sizeof(hlo_attr)};
  bool ok = parse_attrs(p, &v);
  in->n_attrs = v.n;
  in->attrs = vec_done(&v, &p->m->ar, &ok);
  return ok || perr(p, p->pos, "out of memory");
}

/* Operand names -> instruction indices; exactly one ROOT (or the last
** instruction, as XLA's parser allows); parameters numbered 0..n-1. */
static bool resolve_comp(hlo_parser *p, hlo_comp *c) {
  int dup;
  c->table = name_table(&p->m->ar, c->insts, sizeof *c->insts, offsetof(hlo_inst, name), c->n,
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
      o->inst = inst_find(c, o->name);
      if (o->inst < 0)
        return perr(p, o->off, "operand %%%.*s of %%%.*s is not defined in computation %.*s",
                    o->name.n, o->name.s, in->name.n, in->name.s, c->name.n, c->name.s);
    }
    if (in->param_no >= 0) c->n_params++;
  }
  if (c->root < 0) c->root = c->n - 1;
  bool *seen = arena_alloc(&p->m->ar, (size_t)c->n_params + 1);
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
  c->order = arena_alloc(&p->m->ar, (size_t)c->n * sizeof *c->order);
  if (!c->order) return perr(p, c->off, "out of memory");
  bool sorted = true;
  for (int i = 0; i < c->n; i++) {
    c->order[i] = i;
    for (int k = 0; k < c->insts[i].n_ops; k++)
      if (c->insts[i].ops[k].inst >= i) sorted = false;
  }
  if (sorted) return true;
  const int **in = arena_alloc(&p->m->ar, (size_t)c->n * sizeof *in);
  int *n_in = arena_alloc(&p->m->ar, (size_t)c->n * sizeof *n_in);
  int *cycle = arena_alloc(&p->m->ar, (size_t)c->n * sizeof *cycle);
  int **lists = arena_alloc(&p->m->ar, (size_t)c->n * sizeof *lists);
  if (!in || !n_in || !cycle || !lists) return perr(p, c->off, "out of memory");
  for (int i = 0; i < c->n; i++) {
    n_in[i] = c->insts[i].n_ops;
    lists[i] = arena_alloc(&p->m->ar, (size_t)(n_in[i] + 1) * sizeof **lists);
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
    if (!(ok = vec_push(&v, &in))) {
      perr(p, p->pos, "out of memory");
      break;
    }
  }
  c.n = v.n;
  c.insts = vec_done(&v, &p->m->ar, &ok);
  if (!ok) return perr(p, p->pos, "out of memory");
  p->pos++; /* } */
  if (c.n == 0)
    return perr(p, name_off, "computation %.*s has no instructions", c.name.n, c.name.s);
  hlo_vec ignored = {.size = sizeof(hlo_attr)}; /* execution_thread="..." and the like */
  ok = parse_attrs(p, &ignored);
  free(ignored.p);
  if (!ok || !resolve_comp(p, &c) || !order_comp(p, &c)) return false;
  return vec_push(comps, &c) || perr(p, p->pos, "out of memory");
}

/* HloModule name, key=value, ...: keeps what the collectives need. */
static bool parse_header(hlo_parser *p) {
  p->pos += strlen("HloModule");
  if (!skip_ws(p) || !name(p, &p->m->name, "the module name")) return false;
  p->m->name_z = arena_alloc(&p->m->ar, (size_t)p->m->name.n + 1);
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
          if (str_is(in->attrs[a].key, KEYS[j]) && comp_find(p->m, v) < 0)
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
  m->table = name_table(&m->ar, m->comps, sizeof *m->comps, offsetof(hlo_comp, name), m->n_comps,
                        &m->tsize, &dup);
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
  p->m->comps = vec_done(&comps, &p->m->ar, &ok);
  if (!ok) return perr(p, p->pos, "out of memory");
  return finish_module(p);
}

void hlo_module_free(hlo_module *m) {
  if (!m) return;
  arena_free(&m->ar);
  free(m->text);
  free(m->file);
  free(m);
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
  m->num_partitions = m->replica_count = 1;
  hlo_parser p = {.m = m, .t = m->text, .len = len, .dg = dg};
  if (!parse_module(&p)) {
    hlo_module_free(m);
    return NULL;
  }
  return m;
}

const char *hlo_module_name(const hlo_module *m) { return m->name_z ? m->name_z : "hlo"; }
int hlo_computation_count(const hlo_module *m) { return m->n_comps; }

int hlo_instruction_count(const hlo_module *m) {
  int n = 0;
  for (int i = 0; i < m->n_comps; i++)
    n += m->comps[i].n;
  return n;
}

int hlo_opcode_count(const hlo_module *m, const char *opcode) {
  int n = 0;
  for (int i = 0; i < m->n_comps; i++)
    for (int k = 0; k < m->comps[i].n; k++)
      n += op_is(&m->comps[i].insts[k], opcode);
  return n;
}

/* ---------------------------------------------------------------- builder */

/* What an instruction evaluates to: an array (a graph op) or a tuple. */
typedef struct hlo_val {
  int id;
  int n; /* tuple: element count; -1 for an array */
  struct hlo_val **el;
  bool known; /* an integer scalar constant, for loop bounds */
  int64_t k;
} hlo_val;

typedef struct {
  const hlo_module *m;
  graph *g;
  diag *dg;
  hlo_arena ar;
  int64_t count; /* executions of the ops being added: enclosing trip counts multiplied */
  int depth;
  bool failed;
  bool *active; /* computations being evaluated: calling one again is recursion */
} hlo_builder;

/* Everything a handler sees. */
typedef struct {
  hlo_builder *b;
  const hlo_comp *c;
  const hlo_inst *in;
  const hlo_op_row *row;
  hlo_val **ops;
  int n;
  hlo_val **args; /* the computation's arguments; NULL in ENTRY */
  int n_args;
  const char *scope;
  graph_phase phase;
} hlo_ctx;

typedef hlo_val *(*hlo_fn)(hlo_ctx *x);

enum {
  F_PAIR = 1u << 0, /* async start: written (operands, results, context...) */
  F_SAME = 1u << 1, /* async done whose result is its operand (all-reduce-done) */
};

struct hlo_op_row {
  const char *opcode;
  hlo_fn fn;
  int kind;             /* graph_op_kind for handlers shared by several opcodes */
  int min_ops, max_ops; /* max -1: any number */
  unsigned flags;
};

/* Reports at the instruction, naming it; the build stops at the first. */
__attribute__((format(printf, 2, 3))) static hlo_val *berr(hlo_ctx *x, const char *fmt, ...) {
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

static hlo_val *val_new(hlo_builder *b, int id) {
  if (id < 0) return NULL;
  hlo_val *v = arena_alloc(&b->ar, sizeof *v);
  if (!v) return NULL;
  v->id = id;
  v->n = -1;
  return v;
}

static hlo_val *val_tuple(hlo_builder *b, int n) {
  hlo_val *v = arena_alloc(&b->ar, sizeof *v);
  if (!v) return NULL;
  v->id = -1;
  v->n = n;
  v->el = arena_alloc(&b->ar, (size_t)(n + 1) * sizeof *v->el);
  return v->el ? v : NULL;
}

static hlo_val *oom(hlo_ctx *x) { return berr(x, "out of memory"); }

/* The graph op of operand i, which must be an array. */
static int leaf(hlo_ctx *x, int i) {
  if (i >= x->n) {
    berr(x, "needs at least %d operands, has %d", i + 1, x->n);
    return -1;
  }
  if (x->ops[i]->n >= 0) {
    berr(x, "operand %d (%%%.*s) is a tuple; an array is needed here", i, x->in->ops[i].name.n,
         x->in->ops[i].name.s);
    return -1;
  }
  return x->ops[i]->id;
}

static const graph_shape *leaf_shape(hlo_ctx *x, int id) { return &graph_get(x->b->g, id)->out; }

/* The written shape, which must be an array for this opcode. */
static const graph_shape *out_array(hlo_ctx *x) {
  if (x->in->shape.n >= 0) {
    berr(x, "the result must be an array, the text gives a tuple");
    return NULL;
  }
  return &x->in->shape.arr;
}

/* ---- shapes in messages ---- */

static size_t put_val(const hlo_builder *b, const hlo_val *v, char *buf, size_t n, size_t at) {
  if (at >= n) return at;
  if (v->n < 0) {
    graph_shape_str(&graph_get(b->g, v->id)->out, buf + at, n - at);
    return at + strlen(buf + at);
  }
  at += (size_t)snprintf(buf + at, n - at, "(");
  for (int i = 0; i < v->n && at < n; i++) {
    if (i) at += (size_t)snprintf(buf + at, n - at, ", ");
    at = put_val(b, v->el[i], buf, n, at);
  }
  if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
  return at;
}

static size_t put_shape(const hlo_shape *s, char *buf, size_t n, size_t at) {
  if (at >= n) return at;
  if (s->n < 0) {
    graph_shape_str(&s->arr, buf + at, n - at);
    return at + strlen(buf + at);
  }
  at += (size_t)snprintf(buf + at, n - at, "(");
  for (int i = 0; i < s->n && at < n; i++) {
    if (i) at += (size_t)snprintf(buf + at, n - at, ", ");
    at = put_shape(&s->el[i], buf, n, at);
  }
  if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
  return at;
}

static bool val_matches(const hlo_builder *b, const hlo_val *v, const hlo_shape *s) {
  if (s->n < 0) return v->n < 0 && graph_shape_eq(&graph_get(b->g, v->id)->out, &s->arr);
  if (v->n != s->n) return false;
  for (int i = 0; i < s->n; i++)
    if (!val_matches(b, v->el[i], &s->el[i])) return false;
  return true;
}

/* ---- attribute values ---- */

/* Position of needle in a span, or NULL. */
static const char *span_find(hlo_str hay, const char *needle) {
  size_t l = strlen(needle);
  for (int i = 0; i + (int)l <= hay.n; i++)
    if (memcmp(hay.s + i, needle, l) == 0) return hay.s + i;
  return NULL;
}

/* {1,2,3} or {} (or a bare 1,2 list): the count, or -1 when malformed. */
static int parse_ints(hlo_str v, int64_t *out, int max) {
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
static bool attr_dims(hlo_ctx *x, const char *key, graph_dims *d, bool required) {
  memset(d, 0, sizeof *d);
  const hlo_attr *a = attr_get(x->in, key);
  if (!a) {
    if (required) berr(x, "the %s={...} attribute is missing", key);
    return !required;
  }
  int64_t v[GRAPH_MAX_RANK];
  int n = parse_ints(a->val, v, GRAPH_MAX_RANK);
  if (n < 0) {
    berr(x, "%s=%.*s is not a list of at most %d dimension numbers", key, a->val.n, a->val.s,
         GRAPH_MAX_RANK);
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= GRAPH_MAX_RANK) {
      berr(x, "%s: dimension %lld is out of range", key, (long long)v[i]);
      return false;
    }
    d->d[i] = (int8_t)v[i];
  }
  d->n = n;
  return true;
}

static bool attr_int(hlo_ctx *x, const char *key, int64_t *v, bool required) {
  const hlo_attr *a = attr_get(x->in, key);
  if (!a) {
    if (required) berr(x, "the %s= attribute is missing", key);
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
  berr(x, "%s=%.*s is not an integer", key, a->val.n, a->val.s);
  return false;
}

/* The computation an attribute (to_apply=, calls=, body=) names. */
static int attr_comp(hlo_ctx *x, const char *key) {
  const hlo_attr *a = attr_get(x->in, key);
  if (!a) {
    berr(x, "the %s= attribute is missing", key);
    return -1;
  }
  hlo_str s = a->val;
  if (s.n > 1 && s.s[0] == '{' && s.s[s.n - 1] == '}') s.s++, s.n -= 2; /* calls={%a} */
  int ci = comp_find(x->b->m, s);
  if (ci < 0) berr(x, "%s=%.*s: no such computation", key, a->val.n, a->val.s);
  return ci;
}

/* A quoted attribute value without its quotes. */
static hlo_str unquote(hlo_str s) {
  if (s.n >= 2 && s.s[0] == '"' && s.s[s.n - 1] == '"') s.s++, s.n -= 2;
  return s;
}

/* backend_config, as JSON ({...} or, in older dumps, an escaped string). */
static cJSON *backend_json(const hlo_inst *in) {
  const hlo_attr *a = attr_get(in, "backend_config");
  if (!a || a->val.n == 0) return NULL;
  if (a->val.s[0] == '{') return cJSON_ParseWithLength(a->val.s, (size_t)a->val.n);
  hlo_str s = unquote(a->val);
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
static bool literal_int(const hlo_inst *in, int64_t *v) {
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

/* how: graph parameters with these flags, or LEAF_CONSTANT */
#define LEAF_CONSTANT (-1)

/* Zero-cost sources shaped like s: constants (ids, tokens, contexts) or
** parameters (ENTRY's, infeed's), named name#i inside tuples. */
static hlo_val *make_leaves(hlo_ctx *x, const hlo_shape *s, int how, const char *name) {
  if (s->n < 0) {
    int id = how == LEAF_CONSTANT ? graph_constant(x->b->g, s->arr)
                                  : graph_parameter(x->b->g, name, s->arr, (unsigned)how);
    return val_new(x->b, id);
  }
  hlo_val *t = val_tuple(x->b, s->n);
  if (!t) return oom(x);
  for (int i = 0; i < s->n; i++) {
    char sub[160];
    snprintf(sub, sizeof sub, "%s#%d", name, i);
    if (!(t->el[i] = make_leaves(x, &s->el[i], how, sub))) return NULL;
  }
  return t;
}

static char *inst_name(const hlo_inst *in, char *buf, size_t n) {
  snprintf(buf, n, "%.*s", in->name.n, in->name.s);
  return buf;
}

/* A tuple shaped like the written one whose first nk elements are known
** values and the rest (async contexts, tokens) zero-cost constants. */
static hlo_val *fill_like(hlo_ctx *x, hlo_val **known, int nk) {
  const hlo_shape *s = &x->in->shape;
  if (s->n < 0) return known[nk - 1];
  hlo_val *t = val_tuple(x->b, s->n);
  if (!t) return oom(x);
  char nm[128];
  for (int i = 0; i < s->n; i++)
    if (!(t->el[i] =
              i < nk ? known[i]
                     : make_leaves(x, &s->el[i], LEAF_CONSTANT, inst_name(x->in, nm, sizeof nm))))
      return NULL;
  return t;
}

/* All array leaves of a value, in order. */
static int flatten(const hlo_val *v, int *ids, int n) {
  if (v->n < 0) {
    if (ids) ids[n] = v->id;
    return n + 1;
  }
  for (int i = 0; i < v->n; i++)
    n = flatten(v->el[i], ids, n);
  return n;
}

static double shape_bytes(const hlo_shape *s) {
  if (s->n < 0) return graph_bytes(&s->arr);
  double t = 0;
  for (int i = 0; i < s->n; i++)
    t += shape_bytes(&s->el[i]);
  return t;
}

static hlo_val *custom_leaves(hlo_ctx *x, const char *name, const hlo_shape *s, const int *ins,
                              int n_in, const double cost[3], int *first) {
  if (s->n < 0) {
    int id = *first < 0 ? graph_custom(x->b->g, name, s->arr, ins, n_in, cost[0], cost[1], cost[2])
                        : graph_custom(x->b->g, name, s->arr, first, 1, 0, 0, 0);
    if (*first < 0) *first = id;
    return val_new(x->b, id);
  }
  hlo_val *t = val_tuple(x->b, s->n);
  if (!t) return oom(x);
  for (int i = 0; i < s->n; i++)
    if (!(t->el[i] = custom_leaves(x, name, &s->el[i], ins, n_in, cost, first))) return NULL;
  return t;
}

/* An op the graph has no kind for, as GOP_CUSTOM ops shaped like the
** written result: the first array output carries the declared cost and reads
** every operand; further outputs are free ops that depend on it. Bytes, when
** the op moves data, are all operands read plus all outputs written (the
** graph splits them as written = the first output, read = the rest). */
static hlo_val *custom_cost(hlo_ctx *x, const char *name, double flops, double trans,
                            bool moves_data) {
  int n_in = 0;
  for (int i = 0; i < x->n; i++)
    n_in = flatten(x->ops[i], NULL, n_in);
  int *ins = arena_alloc(&x->b->ar, (size_t)(n_in + 1) * sizeof *ins);
  if (!ins) return oom(x);
  double bytes = shape_bytes(&x->in->shape);
  for (int i = 0, k = 0; i < x->n; i++)
    k = flatten(x->ops[i], ins, k);
  for (int i = 0; i < n_in; i++)
    bytes += graph_bytes(leaf_shape(x, ins[i]));
  double cost[3] = {flops, trans, moves_data ? bytes : 0};
  int first = -1;
  return custom_leaves(x, name, &x->in->shape, ins, n_in, cost, &first);
}

static hlo_val *custom_out(hlo_ctx *x, const char *name, double flops, double trans) {
  return custom_cost(x, name, flops, trans, true);
}

/* ---- while trip counts ---- */

/* Which element of the computation's parameter operand o reads: k for
** %p#k or get-tuple-element(%p), index=k; -2 for a non-tuple parameter
** itself; -1 for anything else. */
static int param_elem(const hlo_comp *c, const hlo_operand *o) {
  const hlo_inst *d = &c->insts[o->inst];
  if (d->param_no == 0) return o->index >= 0 ? o->index : (d->shape.n < 0 ? -2 : -1);
  if (o->index >= 0 || !op_is(d, "get-tuple-element") || d->n_ops != 1) return -1;
  const hlo_inst *p = &c->insts[d->ops[0].inst];
  const hlo_attr *a = attr_get(d, "index");
  int64_t k;
  if (p->param_no != 0 || d->ops[0].index >= 0 || !a || parse_ints(a->val, &k, 1) != 1) return -1;
  return (int)k;
}

/* An integer scalar constant, possibly through copy/convert/reshape. */
static bool const_of(const hlo_comp *c, const hlo_operand *o, int64_t *v) {
  for (int hops = 0; hops < 8 && o->index < 0; hops++) {
    const hlo_inst *d = &c->insts[o->inst];
    if (literal_int(d, v)) return true;
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
  cJSON *j = backend_json(w);
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
  const hlo_attr *ca = attr_get(w, "condition"), *ba = attr_get(w, "body");
  int ci = ca ? comp_find(m, ca->val) : -1, bi = ba ? comp_find(m, ba->val) : -1;
  if (ci < 0 || bi < 0 || w->n_ops != 1) return -1;
  const hlo_comp *cond = &m->comps[ci], *body = &m->comps[bi];
  const hlo_inst *r = &cond->insts[cond->root];
  const hlo_attr *da = attr_get(r, "direction");
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
    int k = inst_find(&m->comps[i], s);
    if (k >= 0 && op_is(&m->comps[i].insts[k], "while"))
      return trip_count(m, &m->comps[i], &m->comps[i].insts[k], NULL);
  }
  return -1;
}

/* ---- evaluation ---- */

/* JAX names ops jit(f)/jvp(...)/... in the forward pass and
** jit(f)/transpose(jvp(...))/... in the backward pass; what is neither, in a
** module that has both, is the optimizer update. Other producers (TF) give
** no such marks: their ops keep the phase of their caller (forward). */
static graph_phase inst_phase(const hlo_module *m, const hlo_inst *in, graph_phase inherited) {
  const hlo_attr *a = m->jax_phases ? attr_get(in, "metadata") : NULL;
  const char *on = a ? span_find(a->val, "op_name=\"") : NULL;
  if (!on) return inherited;
  hlo_str name = {on + 9, 0};
  while (name.s + name.n < a->val.s + a->val.n && name.s[name.n] != '"')
    name.n++;
  if (span_find(name, "transpose(jvp")) return GRAPH_BACKWARD;
  if (span_find(name, "jvp(")) return GRAPH_FORWARD;
  return GRAPH_OPTIMIZER;
}

static hlo_val *eval_comp(hlo_ctx *site, int ci, hlo_val **args, int n_args);

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
  return berr(x, "%s", msg ? msg : "the graph builder rejected the operands");
}

static hlo_val *eval_inst(hlo_ctx *x) {
  hlo_builder *b = x->b;
  const hlo_inst *in = x->in;
  const hlo_op_row *row = in->row;
  x->row = row;
  if (x->n < row->min_ops || (row->max_ops >= 0 && x->n > row->max_ops)) {
    if (row->min_ops == row->max_ops)
      return berr(x, "takes %d operands, has %d", row->min_ops, x->n);
    return berr(x, "takes at least %d operands, has %d", row->min_ops, x->n);
  }
  char scope[128];
  snprintf(scope, sizeof scope, "%s%s%.*s", x->scope, *x->scope ? "/" : "", in->name.n, in->name.s);
  graph_set_scope(b->g, scope);
  graph_set_phase(b->g, x->phase);
  graph_set_count(b->g, b->count);
  hlo_val *v = row->fn(x);
  if (!graph_ok(b->g)) return relay_graph_error(x);
  if (!v) return b->failed ? NULL : oom(x);
  if (!val_matches(b, v, &in->shape)) {
    char got[512], want[512];
    put_val(b, v, got, sizeof got, 0);
    put_shape(&in->shape, want, sizeof want, 0);
    return berr(x, "the text gives the shape %s, the %s %s", want,
                in->param_no >= 0 && x->args ? "caller passes" : "operands give", got);
  }
  return v;
}

/* Evaluates computation ci with the given arguments (NULL for ENTRY) and
** returns its ROOT's value; site is the calling instruction's context. */
static hlo_val *eval_comp(hlo_ctx *site, int ci, hlo_val **args, int n_args) {
  hlo_builder *b = site->b;
  const hlo_comp *c = &b->m->comps[ci];
  if (b->active[ci])
    return berr(site, "computation %.*s calls itself; recursion has no static graph", c->name.n,
                c->name.s);
  if (b->depth >= HLO_MAX_DEPTH) return berr(site, "calls nested more than %d deep", HLO_MAX_DEPTH);
  if (args && n_args != c->n_params)
    return berr(site, "passes %d operands to %.*s, which has %d parameters", n_args, c->name.n,
                c->name.s, c->n_params);
  hlo_val **vals = arena_alloc(&b->ar, (size_t)c->n * sizeof *vals);
  if (!vals) return oom(site);
  char scope[128];
  if (site->in)
    snprintf(scope, sizeof scope, "%s%s%.*s", site->scope, *site->scope ? "/" : "",
             site->in->name.n, site->in->name.s);
  else
    scope[0] = 0;
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
                 .phase = inst_phase(b->m, in, site->phase)};
    x.ops = arena_alloc(&b->ar, (size_t)(in->n_ops + 1) * sizeof *x.ops);
    if (!x.ops) {
      oom(&x);
      goto out;
    }
    for (int i = 0; i < in->n_ops; i++) {
      const hlo_operand *o = &in->ops[i];
      hlo_val *v = vals[o->inst];
      if (o->index >= 0 && (v->n < 0 || o->index >= v->n)) {
        berr(&x, "%%%.*s#%d: %%%.*s is not a tuple with an element %d", o->name.n, o->name.s,
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
  hlo_val *root = eval_comp(&top, m->entry, NULL, 0);
  /* leave the builder state as graph_new does, for callers that append */
  graph_set_scope(b.g, NULL);
  graph_set_count(b.g, 1);
  graph_set_phase(b.g, GRAPH_FORWARD);
  arena_free(&b.ar);
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
  char *text = jin_read_file(path, HLO_MAX_FILE, &len, dg);
  if (!text) return NULL;
  graph *g = hlo_import(path, text, len, dg);
  free(text);
  return g;
}

/* ---------------------------------------------------------------- handlers */

/* ---- sources, tuples and free ops ---- */

static hlo_val *h_parameter(hlo_ctx *x) {
  if (x->args) {
    int k = x->in->param_no;
    if (k >= x->n_args)
      return berr(x, "parameter(%d) but the caller passes %d operands", k, x->n_args);
    return x->args[k];
  }
  /* ENTRY: what a parameter is (weight, input, optimizer state) is not in
  ** the text, so no role flags; a tuple gives one parameter per array */
  char nm[128];
  return make_leaves(x, &x->in->shape, 0, inst_name(x->in, nm, sizeof nm));
}

static hlo_val *h_constant(hlo_ctx *x) {
  char nm[128];
  hlo_val *v = make_leaves(x, &x->in->shape, LEAF_CONSTANT, inst_name(x->in, nm, sizeof nm));
  if (v && v->n < 0) v->known = literal_int(x->in, &v->k);
  return v;
}

/* partition-id, replica-id, after-all, get-dimension-size, ...: no cost, no
** data the graph needs; a constant of the written shape. */
static hlo_val *h_zero(hlo_ctx *x) {
  char nm[128];
  return make_leaves(x, &x->in->shape, LEAF_CONSTANT, inst_name(x->in, nm, sizeof nm));
}

/* opt-barrier, add-dependency, domain, ...: the operand itself. */
static hlo_val *h_alias(hlo_ctx *x) { return x->ops[0]; }

static hlo_val *h_iota(hlo_ctx *x) {
  const graph_shape *s = out_array(x);
  return s ? val_new(x->b, graph_iota(x->b->g, *s)) : NULL;
}

static hlo_val *h_tuple(hlo_ctx *x) {
  hlo_val *t = val_tuple(x->b, x->n);
  if (!t) return oom(x);
  for (int i = 0; i < x->n; i++)
    t->el[i] = x->ops[i];
  return t;
}

static hlo_val *h_gte(hlo_ctx *x) {
  int64_t k;
  if (!attr_int(x, "index", &k, true)) return NULL;
  const hlo_val *t = x->ops[0];
  if (t->n < 0) return berr(x, "operand is an array, not a tuple");
  if (k < 0 || k >= t->n)
    return berr(x, "index=%lld but the tuple has %d elements", (long long)k, t->n);
  return t->el[k];
}

/* ---- elementwise ---- */

static hlo_val *h_unary(hlo_ctx *x) {
  int a = leaf(x, 0);
  return a < 0 ? NULL : val_new(x->b, graph_unary(x->b->g, (graph_op_kind)x->row->kind, a));
}

static hlo_val *h_binary(hlo_ctx *x) {
  int a = leaf(x, 0), c = a < 0 ? -1 : leaf(x, 1);
  return c < 0 ? NULL : val_new(x->b, graph_binary(x->b->g, (graph_op_kind)x->row->kind, a, c));
}

/* is-finite: one compare per element, pred out. */
static hlo_val *h_self_compare(hlo_ctx *x) {
  int a = leaf(x, 0);
  return a < 0 ? NULL : val_new(x->b, graph_binary(x->b->g, GOP_COMPARE, a, a));
}

static hlo_val *h_select(hlo_ctx *x) {
  int p = leaf(x, 0), a = p < 0 ? -1 : leaf(x, 1), c = a < 0 ? -1 : leaf(x, 2);
  return c < 0 ? NULL : val_new(x->b, graph_select(x->b->g, p, a, c));
}

static hlo_val *h_clamp(hlo_ctx *x) {
  int lo = leaf(x, 0), a = lo < 0 ? -1 : leaf(x, 1), hi = a < 0 ? -1 : leaf(x, 2);
  return hi < 0 ? NULL : val_new(x->b, graph_clamp(x->b->g, lo, a, hi));
}

static hlo_val *h_convert(hlo_ctx *x) {
  int a = leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : out_array(x);
  return s ? val_new(x->b, graph_convert(x->b->g, a, s->dtype)) : NULL;
}

/* A free op of the written shape that depends on the operands (bitcasts
** the graph's reshape cannot express). */
static hlo_val *free_op(hlo_ctx *x, const char *name) { return custom_cost(x, name, 0, 0, false); }

static hlo_val *h_bitcast(hlo_ctx *x) {
  int a = leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : out_array(x);
  if (!s) return NULL;
  const graph_shape *in = leaf_shape(x, a);
  if (in->dtype == s->dtype && graph_elements(in) == graph_elements(s))
    return val_new(x->b, graph_reshape(x->b->g, a, *s)); /* free: a reshape is a bitcast */
  return free_op(x, x->row->opcode);
}

/* ---- data movement ---- */

static hlo_val *h_broadcast(hlo_ctx *x) {
  int a = leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : out_array(x);
  graph_dims d;
  if (!s || !attr_dims(x, "dimensions", &d, leaf_shape(x, a)->rank > 0)) return NULL;
  return val_new(x->b, graph_broadcast(x->b->g, a, *s, d));
}

static hlo_val *h_transpose(hlo_ctx *x) {
  int a = leaf(x, 0);
  graph_dims d;
  if (a < 0 || !attr_dims(x, "dimensions", &d, true)) return NULL;
  return val_new(x->b, graph_transpose(x->b->g, a, d));
}

/* reverse moves every element once, like a transpose that keeps the order
** of dimensions. */
static hlo_val *h_reverse(hlo_ctx *x) {
  int a = leaf(x, 0);
  if (a < 0) return NULL;
  graph_dims id = {.n = leaf_shape(x, a)->rank};
  for (int i = 0; i < id.n; i++)
    id.d[i] = (int8_t)i;
  return val_new(x->b, graph_transpose(x->b->g, a, id));
}

static hlo_val *h_reshape(hlo_ctx *x) {
  int a = leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : out_array(x);
  return s ? val_new(x->b, graph_reshape(x->b->g, a, *s)) : NULL;
}

static hlo_val *h_concat(hlo_ctx *x) {
  graph_dims d;
  if (!attr_dims(x, "dimensions", &d, true)) return NULL;
  if (d.n != 1) return berr(x, "dimensions= must name one dimension");
  int *ids = arena_alloc(&x->b->ar, (size_t)x->n * sizeof *ids);
  if (!ids) return oom(x);
  for (int i = 0; i < x->n; i++)
    if ((ids[i] = leaf(x, i)) < 0) return NULL;
  return val_new(x->b, graph_concat(x->b->g, ids, x->n, d.d[0]));
}

/* slice={[0:4:1], [2:10]} */
static hlo_val *h_slice(hlo_ctx *x) {
  int a = leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = attr_get(x->in, "slice");
  if (!at_) return berr(x, "the slice={...} attribute is missing");
  int64_t lo[GRAPH_MAX_RANK], hi[GRAPH_MAX_RANK], st[GRAPH_MAX_RANK];
  int n = 0, rank = leaf_shape(x, a)->rank;
  const char *s = at_->val.s, *end = s + at_->val.n;
  while (s < end) {
    if (*s != '[') {
      s++;
      continue;
    }
    if (n == rank) return berr(x, "slice= has more ranges than the operand has dimensions");
    long long v[3] = {0, 0, 1};
    int k = 0;
    char *e;
    for (s++; k < 3; k++) {
      v[k] = strtoll(s, &e, 10);
      if (e == s)
        return berr(x, "slice=%.*s: expected [start:limit:stride]", at_->val.n, at_->val.s);
      s = e;
      if (*s != ':') break;
      s++;
    }
    if (*s != ']')
      return berr(x, "slice=%.*s: expected [start:limit:stride]", at_->val.n, at_->val.s);
    lo[n] = v[0], hi[n] = v[1], st[n] = k == 2 ? v[2] : 1;
    n++;
  }
  if (n != rank) return berr(x, "slice= gives %d ranges for an operand of rank %d", n, rank);
  return val_new(x->b, graph_slice(x->b->g, a, lo, hi, st));
}

/* The index operands are scalars whose values only move the window: the
** graph keeps the sliced operand as the one input. */
static hlo_val *h_dynamic_slice(hlo_ctx *x) {
  int a = leaf(x, 0);
  const graph_shape *s = a < 0 ? NULL : out_array(x);
  return s ? val_new(x->b, graph_dynamic_slice(x->b->g, a, *s)) : NULL;
}

static hlo_val *h_dynamic_update_slice(hlo_ctx *x) {
  int a = leaf(x, 0), u = a < 0 ? -1 : leaf(x, 1);
  return u < 0 ? NULL : val_new(x->b, graph_dynamic_update_slice(x->b->g, a, u));
}

/* padding=lo_hi[_interior]x... per dimension */
static hlo_val *h_pad(hlo_ctx *x) {
  int a = leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = attr_get(x->in, "padding");
  int rank = leaf_shape(x, a)->rank, n = 0;
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK] = {0}, in[GRAPH_MAX_RANK] = {0};
  if (!at_ && rank > 0) return berr(x, "the padding= attribute is missing");
  const char *s = at_ ? at_->val.s : "", *end = s + (at_ ? at_->val.n : 0);
  while (s < end) {
    if (n == rank) return berr(x, "padding= has more entries than the operand has dimensions");
    long long v[3] = {0, 0, 0};
    int k = 0;
    char *e;
    for (; k < 3; k++) {
      v[k] = strtoll(s, &e, 10);
      if (e == s)
        return berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                    at_->val.s);
      s = e;
      if (s >= end || *s != '_') break;
      s++;
    }
    if (k < 1)
      return berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                  at_->val.s);
    lo[n] = v[0], hi[n] = v[1], in[n] = v[2];
    n++;
    if (s < end && *s == 'x')
      s++;
    else if (s < end)
      return berr(x, "padding=%.*s: expected low_high[_interior] per dimension", at_->val.n,
                  at_->val.s);
  }
  if (n != rank) return berr(x, "padding= gives %d entries for an operand of rank %d", n, rank);
  return val_new(x->b, graph_pad(x->b->g, a, lo, hi, in));
}

/* The gather's dimension numbers only decide the result shape, which the
** text gives. */
static hlo_val *h_gather(hlo_ctx *x) {
  int a = leaf(x, 0), i = a < 0 ? -1 : leaf(x, 1);
  const graph_shape *s = i < 0 ? NULL : out_array(x);
  return s ? val_new(x->b, graph_gather(x->b->g, a, i, s)) : NULL;
}

/* scatter(operands..., indices, updates...): one graph scatter per pair. */
static hlo_val *h_scatter(hlo_ctx *x) {
  if (x->n % 2 == 0)
    return berr(x, "takes k operands, the indices and k updates; has %d operands", x->n);
  int k = (x->n - 1) / 2, idx = leaf(x, k);
  if (idx < 0) return NULL;
  hlo_val *t = k > 1 ? val_tuple(x->b, k) : NULL;
  if (k > 1 && !t) return oom(x);
  for (int i = 0; i < k; i++) {
    int o = leaf(x, i), u = o < 0 ? -1 : leaf(x, k + 1 + i);
    if (u < 0) return NULL;
    hlo_val *v = val_new(x->b, graph_scatter(x->b->g, o, idx, u));
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
  int a = leaf(x, 0), c = a < 0 ? -1 : leaf(x, 1);
  const graph_shape *s = c < 0 ? NULL : out_array(x);
  graph_dims lb, rb, lc, rc;
  if (!s || !attr_dims(x, "lhs_batch_dims", &lb, false) ||
      !attr_dims(x, "rhs_batch_dims", &rb, false) ||
      !attr_dims(x, "lhs_contracting_dims", &lc, false) ||
      !attr_dims(x, "rhs_contracting_dims", &rc, false))
    return NULL;
  graph_dtype ta = leaf_shape(x, a)->dtype, tc = leaf_shape(x, c)->dtype;
  if (ta != tc) {
    if (graph_dtype_bits(ta) < graph_dtype_bits(tc))
      a = graph_convert(x->b->g, a, tc);
    else
      c = graph_convert(x->b->g, c, ta);
  }
  return val_new(x->b, graph_dot(x->b->g, a, c, lb, rb, lc, rc, s->dtype));
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
  const char *s = span_find(v, k);
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
  const hlo_attr *a = attr_get(x->in, "window");
  if (!a) return true;
  hlo_str v = a->val;
  w->n = window_list(v, "size", w->size, NULL);
  int ns = window_list(v, "stride", w->stride, NULL), np = window_list(v, "pad", w->lo, w->hi),
      nl = window_list(v, "lhs_dilate", w->lhs_dil, NULL),
      nr = window_list(v, "rhs_dilate", w->rhs_dil, NULL);
  if (w->n < 0 || ns < 0 || np < 0 || nl < 0 || nr < 0 || (ns && ns != w->n) ||
      (np && np != w->n) || (nl && nl != w->n) || (nr && nr != w->n) ||
      (rank >= 0 && w->n != rank)) {
    berr(x, "window=%.*s is malformed or does not match the operand's rank", v.n, v.s);
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
  const hlo_attr *a = attr_get(x->in, "dim_labels");
  if (!a) return berr(x, "the dim_labels= attribute is missing"), false;
  const char *s = a->val.s, *u = memchr(s, '_', (size_t)a->val.n);
  const char *arrow = span_find(a->val, "->");
  int sl, sk, so;
  if (!u || !arrow || arrow < u ||
      !read_labels(s, (int)(u - s), 'b', 'f', &c->in_batch, &c->in_feature, c->in_spatial, &sl) ||
      !read_labels(u + 1, (int)(arrow - u - 1), 'i', 'o', &c->k_in, &c->k_out, c->k_spatial, &sk) ||
      !read_labels(arrow + 2, (int)(s + a->val.n - arrow - 2), 'b', 'f', &c->out_batch,
                   &c->out_feature, c->out_spatial, &so) ||
      sl != sk || sl != so) {
    berr(x, "dim_labels=%.*s is malformed", a->val.n, a->val.s);
    return false;
  }
  c->spatial = sl;
  if ((int)(u - s) != ranks[0] || (int)(arrow - u - 1) != ranks[1] ||
      (int)(s + a->val.n - arrow - 2) != ranks[2]) {
    berr(x, "dim_labels=%.*s does not match the operand ranks", a->val.n, a->val.s);
    return false;
  }
  if (sl < 1 || sl > 3) {
    berr(x, "convolutions with %d spatial dimensions are not supported (1 to 3)", sl);
    return false;
  }
  return true;
}

static hlo_val *h_convolution(hlo_ctx *x) {
  int a = leaf(x, 0), k = a < 0 ? -1 : leaf(x, 1);
  const graph_shape *s = k < 0 ? NULL : out_array(x);
  if (!s) return NULL;
  graph_conv_attrs c = {0};
  int ranks[3] = {leaf_shape(x, a)->rank, leaf_shape(x, k)->rank, s->rank};
  hlo_window w;
  int64_t fg = 1, bg = 1;
  if (!parse_dim_labels(x, &c, ranks) || !parse_window(x, &w, -1) ||
      !attr_int(x, "feature_group_count", &fg, false) ||
      !attr_int(x, "batch_group_count", &bg, false))
    return NULL;
  if (w.n != 0 && w.n != c.spatial)
    return berr(x, "window= has %d dimensions, dim_labels %d spatial ones", w.n, c.spatial);
  for (int i = 0; i < c.spatial; i++) {
    c.stride[i] = w.stride[i];
    c.pad_lo[i] = w.lo[i];
    c.pad_hi[i] = w.hi[i];
    c.lhs_dilation[i] = w.lhs_dil[i];
    c.rhs_dilation[i] = w.rhs_dil[i];
  }
  c.feature_groups = fg;
  c.batch_groups = bg;
  return val_new(x->b, graph_conv(x->b->g, a, k, &c, s->dtype));
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
  if (x->n % 2) return berr(x, "takes k inputs and k initial values; has %d operands", x->n);
  int ci = attr_comp(x, "to_apply");
  graph_dims d;
  if (ci < 0 || !attr_dims(x, "dimensions", &d, true)) return NULL;
  graph_reduce_kind kind = lambda_kind(x->b->m, ci);
  int k = x->n / 2;
  hlo_val *t = k > 1 ? val_tuple(x->b, k) : NULL;
  if (k > 1 && !t) return oom(x);
  for (int i = 0; i < k; i++) {
    int a = leaf(x, i);
    hlo_val *v = a < 0 ? NULL : val_new(x->b, graph_reduce(x->b->g, a, d, kind));
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
  if (x->n % 2) return berr(x, "takes k inputs and k initial values; has %d operands", x->n);
  int a = leaf(x, 0);
  hlo_window w;
  if (a < 0 || !parse_window(x, &w, leaf_shape(x, a)->rank) || attr_comp(x, "to_apply") < 0)
    return NULL;
  const hlo_shape *s = &x->in->shape, *first = s->n > 0 ? &s->el[0] : s;
  if (first->n >= 0) return berr(x, "the result must be an array or a tuple of arrays");
  double outs = (double)graph_elements(&first->arr);
  return custom_out(x, "reduce-window", outs * (window_elements(&w) - 1) * (x->n / 2), 0);
}

/* One select per source element and window position, one scatter-add per
** source element. */
static hlo_val *h_select_and_scatter(hlo_ctx *x) {
  int a = leaf(x, 0), src = a < 0 ? -1 : leaf(x, 1);
  hlo_window w;
  if (src < 0 || !parse_window(x, &w, leaf_shape(x, a)->rank)) return NULL;
  double n = (double)graph_elements(leaf_shape(x, src));
  return custom_out(x, "select-and-scatter", n * window_elements(&w) + n, 0);
}

/* n log2(d) comparisons for n elements sorted along a dimension of size d. */
static hlo_val *h_sort(hlo_ctx *x) {
  int a = leaf(x, 0);
  graph_dims d;
  if (a < 0 || !attr_dims(x, "dimensions", &d, true)) return NULL;
  const graph_shape *s = leaf_shape(x, a);
  if (d.n != 1 || d.d[0] >= s->rank)
    return berr(x, "dimensions= must name one dimension of the operand");
  return custom_out(x, "sort", (double)graph_elements(s) * (double)ceil_log2(s->dim[d.d[0]]), 0);
}

/* Selection of the top k: n log2(k) comparisons. */
static hlo_val *h_topk(hlo_ctx *x) {
  int a = leaf(x, 0);
  int64_t k;
  if (a < 0 || !attr_int(x, "k", &k, true)) return NULL;
  return custom_out(x, "topk", (double)graph_elements(leaf_shape(x, a)) * (double)ceil_log2(k + 1),
                    0);
}

/* map applies a scalar computation elementwise: its instructions, per
** element. */
static hlo_val *h_map(hlo_ctx *x) {
  int ci = attr_comp(x, "to_apply");
  const graph_shape *s = ci < 0 ? NULL : out_array(x);
  if (!s) return NULL;
  const hlo_comp *c = &x->b->m->comps[ci];
  int ops = 0;
  for (int i = 0; i < c->n; i++)
    ops += c->insts[i].param_no < 0 && !op_is(&c->insts[i], "constant");
  return custom_out(x, "map", (double)graph_elements(s) * ops, 0);
}

/* Batch norm, per element of the operand: training 8 flops (mean 1,
** variance 3, normalize 2, scale and shift 2), inference 4, grad 11; one
** rsqrt per feature. Counted from the textbook formulas (docs/hlo.md). */
static hlo_val *h_batch_norm(hlo_ctx *x) {
  int a = leaf(x, 0);
  int64_t f;
  if (a < 0 || !attr_int(x, "feature_index", &f, true)) return NULL;
  const graph_shape *s = leaf_shape(x, a);
  if (f < 0 || f >= s->rank) return berr(x, "feature_index=%lld is out of range", (long long)f);
  double per = x->row->kind;
  return custom_out(x, x->row->opcode, (double)graph_elements(s) * per, (double)s->dim[f]);
}

/* Random bits: no arithmetic the graph counts; the bytes written. */
static hlo_val *h_rng(hlo_ctx *x) { return custom_out(x, x->row->opcode, 0, 0); }

/* ---- collectives ---- */

/* Group sizes beyond this are typos, not machines. */
#define HLO_MAX_GROUP (1LL << 32)

/* {{0,1,2,3},{4,5,6,7}}: the size of the first group; {} is 0. */
static int64_t groups_listed(hlo_str v) {
  const char *in = memchr(v.s + 1, '{', (size_t)v.n - 1);
  if (!in) return 0;
  int64_t n = 0;
  for (const char *q = in + 1; q < v.s + v.n; q++) {
    if (*q == '}') return n;
    if (isdigit((unsigned char)*q) && !isdigit((unsigned char)q[-1]))
      n++;
    else if (!isdigit((unsigned char)*q) && *q != ',' && *q != ' ')
      return -1;
  }
  return -1;
}

/* [2,4]<=[8] (or <=[4,2]T(1,0)): groups are the rows, size the last dim. */
static int64_t groups_iota(hlo_str v) {
  const char *close = memchr(v.s, ']', (size_t)v.n);
  int64_t dims[GRAPH_MAX_RANK];
  int n = close ? parse_ints((hlo_str){v.s + 1, (int)(close - v.s - 1)}, dims, GRAPH_MAX_RANK) : -1;
  return n < 1 ? -1 : dims[n - 1];
}

/* mesh['x'=2,'y'=4] {'y'}: the product of the grouped axes' sizes. */
static int64_t groups_mesh(hlo_str v) {
  const char *end = v.s + v.n, *close = memchr(v.s, ']', (size_t)v.n);
  const char *open = close ? memchr(close, '{', (size_t)(end - close)) : NULL;
  if (!open) return -1;
  int64_t size = 1;
  for (const char *q = open; q < end && *q != '}'; q++) {
    const char *e = *q == '\'' ? memchr(q + 1, '\'', (size_t)(end - q - 1)) : NULL;
    if (!e) continue;
    char axis[64];
    snprintf(axis, sizeof axis, "%.*s=", (int)(e - q + 1), q); /* 'axis_0'= */
    const char *def = span_find((hlo_str){v.s, (int)(close - v.s)}, axis);
    int64_t k = def ? strtoll(def + strlen(axis), NULL, 10) : -1;
    if (k < 1 || size > HLO_MAX_GROUP / k) return -1;
    size *= k;
    q = e;
  }
  return size;
}

/* Devices in each replica group, from any of the three forms; 0 when the
** groups are absent or empty, -1 after an error. */
static int64_t group_size(hlo_ctx *x) {
  const hlo_attr *a = attr_get(x->in, "replica_groups");
  if (!a || a->val.n == 0) return 0;
  hlo_str v = a->val;
  int64_t g = v.s[0] == '{'                              ? groups_listed(v)
              : v.s[0] == '['                            ? groups_iota(v)
              : v.n >= 5 && memcmp(v.s, "mesh[", 5) == 0 ? groups_mesh(v)
                                                         : -1;
  if (g < 0 || g > HLO_MAX_GROUP)
    return berr(x, "replica_groups=%.*s: not a list, iota or mesh form this importer reads", v.n,
                v.s),
           -1;
  return g;
}

/* Absent or empty groups mean every participant: the replicas, times the
** partitions when the op crosses partitions (it has a channel_id). */
static int64_t default_group(hlo_ctx *x) {
  const hlo_module *m = x->b->m;
  return m->replica_count * (attr_get(x->in, "channel_id") ? m->num_partitions : 1);
}

/* The written shape of result i of an op with n results (after F_PAIR). */
static const graph_shape *result_shape(hlo_ctx *x, const hlo_shape *s, int i, int n) {
  if (n > 1) s = i < s->n ? &s->el[i] : NULL;
  if (!s || s->n >= 0) {
    berr(x, "the written result does not have an array for operand %d", i);
    return NULL;
  }
  return &s->arr;
}

/* With empty groups, all-gather and reduce-scatter still give their group
** size away: the gathered (scattered) dimension grows (shrinks) by it. */
static int64_t group_from_shapes(graph_op_kind k, const graph_shape *in, const graph_shape *out,
                                 int d) {
  if ((k != GOP_ALL_GATHER && k != GOP_REDUCE_SCATTER) || d >= in->rank || d >= out->rank) return 0;
  int64_t big = k == GOP_ALL_GATHER ? out->dim[d] : in->dim[d];
  int64_t small = k == GOP_ALL_GATHER ? in->dim[d] : out->dim[d];
  return small > 0 && big % small == 0 ? big / small : 0;
}

/* One graph collective per operand, results shaped like out. */
static hlo_val *collective(hlo_ctx *x, graph_op_kind k, const hlo_shape *out) {
  int64_t g = group_size(x);
  if (g < 0) return NULL;
  graph_dims d = {0};
  if ((k == GOP_ALL_GATHER || k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL) &&
      (!attr_dims(x, "dimensions", &d, true) || d.n != 1))
    return x->b->failed ? NULL : berr(x, "dimensions= must name one dimension");
  hlo_val *t = x->n > 1 ? val_tuple(x->b, x->n) : NULL;
  if (x->n > 1 && !t) return oom(x);
  for (int i = 0; i < x->n; i++) {
    int a = leaf(x, i);
    const graph_shape *o = a < 0 ? NULL : result_shape(x, out, i, x->n);
    if (!o) return NULL;
    int64_t gi = g ? g : group_from_shapes(k, leaf_shape(x, a), o, d.d[0]);
    if (gi == 0) gi = default_group(x);
    hlo_val *v = val_new(x->b, graph_collective(x->b->g, k, a, gi, d.d[0]));
    if (!v || x->n == 1) return v;
    t->el[i] = v;
  }
  return t;
}

/* The operands as one value: the array, or a tuple of them. */
static hlo_val *operands_val(hlo_ctx *x) { return x->n == 1 ? x->ops[0] : h_tuple(x); }

/* all-reduce, all-gather, reduce-scatter, all-to-all with dimensions=, and
** their async -start forms (F_PAIR: written (operands, results)). */
static hlo_val *h_collective(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  bool pair = (x->row->flags & F_PAIR) && s->n >= 2;
  graph_op_kind k = (graph_op_kind)x->row->kind;
  /* tuple all-to-all (no dimensions=): each operand is one peer's chunk */
  if (k == GOP_ALL_TO_ALL && !attr_get(x->in, "dimensions")) k = GOP_COLLECTIVE_PERMUTE;
  hlo_val *r = collective(x, k, pair ? &s->el[1] : s);
  if (!r || !pair) return r;
  hlo_val *known[2] = {operands_val(x), r};
  return known[0] ? fill_like(x, known, 2) : NULL;
}

static hlo_val *h_done(hlo_ctx *x) {
  hlo_val *v = x->ops[0];
  if ((x->row->flags & F_SAME) || v->n < 2) return v;
  return v->el[1];
}

/* collective-permute: the group is the devices named in the pairs. */
static hlo_val *h_permute(hlo_ctx *x) {
  int a = leaf(x, 0);
  if (a < 0) return NULL;
  const hlo_attr *at_ = attr_get(x->in, "source_target_pairs");
  int64_t ids[2048];
  int n = 0, distinct = 0;
  if (at_) {
    hlo_str v = at_->val;
    for (int i = 0; i < v.n && n < 2048; i++) {
      if (!isdigit((unsigned char)v.s[i]) || (i && isdigit((unsigned char)v.s[i - 1]))) continue;
      ids[n++] = strtoll(v.s + i, NULL, 10);
    }
  }
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      dup = ids[j] == ids[i];
    distinct += !dup;
  }
  int64_t g = at_ ? (distinct ? distinct : 1) : group_size(x);
  if (g < 0) return NULL;
  if (g == 0) g = default_group(x);
  const hlo_shape *s = &x->in->shape;
  bool pair = (x->row->flags & F_PAIR) && s->n >= 2;
  hlo_val *r = val_new(x->b, graph_collective(x->b->g, GOP_COLLECTIVE_PERMUTE, a, g, 0));
  if (!r || !pair) return r;
  hlo_val *known[2] = {x->ops[0], r};
  return fill_like(x, known, 2);
}

/* send(data, token): the transfer, then context and token. */
static hlo_val *h_send(hlo_ctx *x) {
  int a = leaf(x, 0);
  hlo_val *r = a < 0 ? NULL : val_new(x->b, graph_collective(x->b->g, GOP_SEND, a, 2, 0));
  return r ? fill_like(x, &r, 1) : NULL;
}

/* recv(token): the graph's recv reads a buffer of the received shape. */
static hlo_val *h_recv(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  if (s->n < 1 || s->el[0].n >= 0) return berr(x, "the result must be (array, context, token)");
  int buf = graph_constant(x->b->g, s->el[0].arr);
  hlo_val *r = val_new(x->b, graph_collective(x->b->g, GOP_RECV, buf, 2, 0));
  return r ? fill_like(x, &r, 1) : NULL;
}

static hlo_val *h_recv_done(hlo_ctx *x) {
  hlo_val *v = x->ops[0];
  if (v->n < 1) return berr(x, "operand is not a recv");
  return fill_like(x, &v->el[0], 1);
}

/* infeed: data fed each step, as inputs. */
static hlo_val *h_infeed(hlo_ctx *x) {
  const hlo_shape *s = &x->in->shape;
  char nm[128];
  if (s->n != 2) return berr(x, "the result must be (data, token)");
  hlo_val *data = make_leaves(x, &s->el[0], GRAPH_INPUT, inst_name(x->in, nm, sizeof nm));
  return data ? fill_like(x, &data, 1) : NULL;
}

/* ---- control flow ---- */

/* call (to_apply=) and fusion (calls=): the callee's ops, inlined. */
static hlo_val *h_call(hlo_ctx *x) {
  int ci = attr_comp(x, attr_get(x->in, "calls") ? "calls" : "to_apply");
  return ci < 0 ? NULL : eval_comp(x, ci, x->ops, x->n);
}

/* async-start(ops), calls=%c: written ((operands), result, context...). */
static hlo_val *h_async_start(hlo_ctx *x) {
  int ci = attr_comp(x, "calls");
  hlo_val *r = ci < 0 ? NULL : eval_comp(x, ci, x->ops, x->n);
  hlo_val *known[2] = {h_tuple(x), r};
  return r && known[0] ? fill_like(x, known, 2) : NULL;
}

/* copy-start: written (operand, copy, context). */
static hlo_val *h_copy_start(hlo_ctx *x) {
  int a = leaf(x, 0);
  hlo_val *c = a < 0 ? NULL : val_new(x->b, graph_unary(x->b->g, GOP_COPY, a));
  hlo_val *known[2] = {x->ops[0], c};
  return c ? fill_like(x, known, 2) : NULL;
}

/* The body is imported once; its ops run trip-count times (times the
** counts of enclosing loops). */
static hlo_val *h_while(hlo_ctx *x) {
  hlo_builder *b = x->b;
  int ci = attr_comp(x, "condition"), bi = ci < 0 ? -1 : attr_comp(x, "body");
  if (bi < 0) return NULL;
  int64_t trip = trip_count(b->m, x->c, x->in, x->ops[0]);
  const hlo_comp *cond = &b->m->comps[ci];
  if (trip < 0)
    return berr(x,
                "cannot derive the trip count: the condition %.*s must compare a loop counter "
                "(starting at a constant, stepped by a constant in %.*s) with a constant, as "
                "JAX scans and fori_loops do, or the while must carry "
                "backend_config={\"known_trip_count\":{\"n\":\"N\"}}",
                cond->name.n, cond->name.s, b->m->comps[bi].name.n, b->m->comps[bi].name.s);
  if (trip == 0) return x->ops[0]; /* the body never runs */
  if (trip > INT64_MAX / b->count) return berr(x, "nested trip counts overflow");
  int64_t outer = b->count;
  b->count *= trip;
  hlo_val *r = eval_comp(x, bi, x->ops, 1);
  b->count = outer;
  graph_set_count(b->g, outer);
  return r;
}

static hlo_val *h_unsupported(hlo_ctx *x) {
  static const struct {
    const char *op, *why;
  } WHY[] = {
      {"conditional", "a static graph cannot choose a branch"},
      {"fft", "complex numbers have no graph element type"},
      {"cholesky", "no cost formula yet"},
      {"triangular-solve", "no cost formula yet"},
  };
  for (size_t i = 0; i < sizeof WHY / sizeof *WHY; i++)
    if (op_is(x->in, WHY[i].op)) return berr(x, "not supported: %s", WHY[i].why);
  return berr(x, "not supported");
}

/* ---- custom calls ---- */

/* cuDNN flash attention, the targets XLA's GPU backend and JAX's
** jax.nn.dot_product_attention(implementation="cudnn") emit. */
static const struct {
  const char *target;
  bool backward;
} FMHA[] = {
    {"__cudnn$fmhaSoftmax", false},
    {"__cudnn$fmhaSoftmaxDropout", false},
    {"__cudnn$fmhaScaleBiasSoftmax", false},
    {"__cudnn$fmhaScaleBiasSoftmaxDropout", false},
    {"__cudnn$fmhaScaleMaskSoftmax", false},
    {"__cudnn$fmhaScaleMaskSoftmaxDropout", false},
    {"__cudnn$fmhaScaleBiasMaskSoftmax", false},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxDropout", false},
    {"__cudnn$fmhaSoftmaxF8", false},
    {"__cudnn$fmhaSoftmaxBackward", true},
    {"__cudnn$fmhaSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleBiasSoftmaxBackward", true},
    {"__cudnn$fmhaScaleBiasSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleMaskSoftmaxBackward", true},
    {"__cudnn$fmhaScaleMaskSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxBackward", true},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaSoftmaxBackwardF8", true},
};

/* A JSON list of dimension numbers (["0","2"] or [0,2]) into d. */
static bool json_dims(const cJSON *a, graph_dims *d) {
  d->n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    long long k = cJSON_IsString(e)   ? strtoll(e->valuestring, NULL, 10)
                  : cJSON_IsNumber(e) ? (long long)e->valuedouble
                                      : -1;
    if (k < 0 || k >= GRAPH_MAX_RANK || d->n == GRAPH_MAX_RANK) return false;
    d->d[d->n++] = (int8_t)k;
  }
  return cJSON_IsArray(a);
}

static bool dims_has(const graph_dims *d, int i) {
  for (int k = 0; k < d->n; k++)
    if (d->d[k] == i) return true;
  return false;
}

/* Q [b, s_q, h, d] and K [b, s_kv, h_kv, d] by default (the BTNH layout
** JAX uses), else as bmm1_dot_dimension_numbers says. Forward: two GEMMs
** (QK^T, PV) of 2*b*h*s_q*s_kv*d each = 4bhsSd; backward 2.5x that (five
** GEMMs: S recomputed, dV, dP, dQ, dK), FlashAttention's count. A causal
** mask halves both: the kernels skip the masked tiles. One exp per score. */
static hlo_val *h_fmha(hlo_ctx *x, const char *target, bool backward) {
  int q = leaf(x, 0), k = q < 0 ? -1 : leaf(x, 1);
  if (k < 0) return NULL;
  const graph_shape *sq = leaf_shape(x, q), *sk = leaf_shape(x, k);
  graph_dims qb = {2, {0, 2}}, qc = {1, {3}}, kb = qb, kc = qc;
  cJSON *j = backend_json(x->in);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "cudnn_fmha_backend_config");
  const cJSON *dn = cJSON_GetObjectItemCaseSensitive(cfg, "bmm1_dot_dimension_numbers");
  const cJSON *mask = cJSON_GetObjectItemCaseSensitive(cfg, "mask_type");
  bool causal = cJSON_IsString(mask) && strstr(mask->valuestring, "CAUSAL");
  bool ok =
      !dn || (json_dims(cJSON_GetObjectItemCaseSensitive(dn, "lhs_batch_dimensions"), &qb) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "lhs_contracting_dimensions"), &qc) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "rhs_batch_dimensions"), &kb) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "rhs_contracting_dimensions"), &kc));
  cJSON_Delete(j);
  if (!ok) return berr(x, "backend_config bmm1_dot_dimension_numbers is malformed");
  double bh = 1, d = 1, s_q = 1, s_kv = 1;
  for (int i = 0; i < sq->rank; i++) {
    if (dims_has(&qb, i))
      bh *= (double)sq->dim[i];
    else if (dims_has(&qc, i))
      d *= (double)sq->dim[i];
    else
      s_q *= (double)sq->dim[i];
  }
  for (int i = 0; i < sk->rank; i++)
    if (!dims_has(&kb, i) && !dims_has(&kc, i)) s_kv *= (double)sk->dim[i];
  for (int i = 0; i < qb.n + qc.n; i++)
    if ((i < qb.n ? qb.d[i] : qc.d[i - qb.n]) >= sq->rank)
      return berr(x, "%s: the query operand has rank %d, too small for its dimension numbers",
                  target, sq->rank);
  double scores = bh * s_q * s_kv * (causal ? 0.5 : 1.0);
  double flops = 4.0 * scores * d * (backward ? 2.5 : 1.0);
  return custom_out(x, target, flops, scores);
}

static hlo_val *h_custom_call(hlo_ctx *x) {
  const hlo_attr *a = attr_get(x->in, "custom_call_target");
  if (!a) return berr(x, "the custom_call_target= attribute is missing");
  hlo_str t = unquote(a->val);
  for (size_t i = 0; i < sizeof FMHA / sizeof *FMHA; i++)
    if (str_is(t, FMHA[i].target)) return h_fmha(x, FMHA[i].target, FMHA[i].backward);
  return berr(x,
              "custom-call target \"%.*s\" is not supported: its cost is unknown (supported: "
              "the cuDNN flash-attention targets __cudnn$fmha*, see docs/hlo.md)",
              t.n, t.s);
}

/* ---------------------------------------------------------------- opcodes */

#define ANY -1
/* Opcodes the graph has no kind for map to the nearest one with the same
** cost shape; the rows below say which (docs/hlo.md has the table). */
static const hlo_op_row OPS[] = {
    /* sources and structure */
    {"parameter", h_parameter, 0, 0, 0, 0},
    {"constant", h_constant, 0, 0, 0, 0},
    {"iota", h_iota, 0, 0, 0, 0},
    {"tuple", h_tuple, 0, 0, ANY, 0},
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
    {"all-reduce", h_collective, GOP_ALL_REDUCE, 1, ANY, 0},
    {"all-reduce-start", h_collective, GOP_ALL_REDUCE, 1, ANY, 0},
    {"all-reduce-done", h_done, 0, 1, 1, F_SAME},
    {"all-gather", h_collective, GOP_ALL_GATHER, 1, ANY, 0},
    {"all-gather-start", h_collective, GOP_ALL_GATHER, 1, ANY, F_PAIR},
    {"all-gather-done", h_done, 0, 1, 1, 0},
    {"reduce-scatter", h_collective, GOP_REDUCE_SCATTER, 1, ANY, 0},
    {"all-to-all", h_collective, GOP_ALL_TO_ALL, 1, ANY, 0},
    {"collective-permute", h_permute, 0, 1, ANY, 0},
    {"collective-permute-start", h_permute, 0, 1, ANY, F_PAIR},
    {"collective-permute-done", h_done, 0, 1, 1, 0},
    {"collective-broadcast", h_permute, 0, 1, 1, 0},
    {"send", h_send, 0, 2, 2, 0},
    {"recv", h_recv, 0, 1, 1, 0},
    {"recv-done", h_recv_done, 0, 1, 1, 0},
    {"infeed", h_infeed, 0, 1, 1, 0},
    /* control flow and calls */
    {"call", h_call, 0, 0, ANY, 0},
    {"fusion", h_call, 0, 0, ANY, 0},
    {"while", h_while, 0, 1, 1, 0},
    {"async-start", h_async_start, 0, 0, ANY, 0},
    {"async-done", h_done, 0, 1, 1, 0},
    {"copy-start", h_copy_start, 0, 1, 1, 0},
    {"copy-done", h_done, 0, 1, 1, 0},
    {"custom-call", h_custom_call, 0, 0, ANY, 0},
    {"conditional", h_unsupported, 0, 1, ANY, 0},
    {"fft", h_unsupported, 0, 1, 1, 0},
    {"cholesky", h_unsupported, 0, 1, 1, 0},
    {"triangular-solve", h_unsupported, 0, 2, 2, 0},
};

static const hlo_op_row *op_lookup(hlo_str opcode) {
  for (size_t i = 0; i < sizeof OPS / sizeof *OPS; i++)
    if (str_is(opcode, OPS[i].opcode)) return &OPS[i];
  return NULL;
}

static const char *op_suggest(hlo_str opcode) {
  enum { N = sizeof OPS / sizeof *OPS };
  const char *names[N];
  for (size_t i = 0; i < N; i++)
    names[i] = OPS[i].opcode;
  char word[64];
  snprintf(word, sizeof word, "%.*s", opcode.n, opcode.s);
  return str_suggest(word, names, N);
}
