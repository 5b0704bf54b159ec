/*
** hlo_int.h -- private to the HLO importer (workloads/hlo*.c): the parsed
** module's types, the builder's values and handler context, and the
** functions its files share. The rest of the program includes hlo.h only.
*/
#ifndef TPUSIM_HLO_INT_H
#define TPUSIM_HLO_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "graph.h"
#include "hlo.h"

typedef struct hlo_chunk {
  struct hlo_chunk *next;
  size_t used, cap;
  max_align_t data[];
} hlo_chunk;

typedef struct {
  hlo_chunk *head;
} hlo_arena;

/* A growable array while a list is being read; hlo_vec_done moves it into the
** arena so the parsed module owns no separate allocations. */
typedef struct {
  char *p;
  int n, cap;
  size_t size;
} hlo_vec;

typedef struct {
  const char *s;
  int n;
} hlo_str;

static inline bool str_is(hlo_str a, const char *lit) {
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

static inline bool op_is(const hlo_inst *in, const char *opcode) {
  return str_is(in->opcode, opcode);
}

/* What an instruction evaluates to: an array (a graph op) or a tuple. */
typedef struct hlo_val {
  int id;
  int n; /* tuple: element count; -1 for an array */
  struct hlo_val **el;
  bool known; /* an integer scalar constant, for loop bounds */
  int64_t k;
} hlo_val;

/* Deeper nesting of calls than this is a runaway recursion, not a model. */
#define HLO_MAX_DEPTH 64
/* A computation called from several sites of one caller is inlined at each
** while the copies together stay under this many ops; past it, it is
** imported once with the sites' count (hlo_calls.c, docs/hlo.md). */
#define HLO_INLINE_REPEAT (1 << 14)

/* One computation a caller calls (call, fusion, async-start), and how. */
typedef struct {
  int comp;     /* the callee */
  int sites;    /* call sites in the caller */
  bool counted; /* imported once, its ops counted `sites` times */
} hlo_callee;

/* A computation's callees by index, the ops it imports (estimated: one per
** instruction, with the callees'), and the DFS state computing them. */
typedef struct {
  hlo_callee *callee;
  int n;
  bool any_counted;
  int64_t size;
  int state; /* 0 not seen, 1 being sized, 2 sized */
} hlo_callplan;

typedef struct {
  const hlo_module *m;
  graph *g;
  diag *dg;
  hlo_arena ar;
  int64_t count; /* executions of the ops being added: enclosing trip counts multiplied */
  int depth;
  bool failed;
  bool *active; /* computations being evaluated: calling one again is recursion */
  hlo_callplan *plan; /* per computation, from hlo_plan_calls */
  int over_comp, over_inst; /* where the import first passes GRAPH_MAX_OPS, or -1 */
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
  hlo_val **memo; /* counted callees' results in this evaluation of c, by callee index */
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

/* how: graph parameters with these flags, or LEAF_CONSTANT */
#define LEAF_CONSTANT (-1)

/* hlo_module.c */

void *hlo_arena_alloc(hlo_arena *a, size_t n);
void hlo_arena_free(hlo_arena *a);
bool hlo_vec_push(hlo_vec *v, const void *x);
void *hlo_vec_done(hlo_vec *v, hlo_arena *a, bool *ok);
int *hlo_name_table(hlo_arena *a, const void *items, size_t stride, size_t name_off, int n,
                    int *tsize, int *dup);
int hlo_inst_find(const hlo_comp *c, hlo_str s);
int hlo_comp_find(const hlo_module *m, hlo_str s);
const hlo_attr *hlo_attr_get(const hlo_inst *in, const char *key);

/* hlo.c */

__attribute__((format(printf, 2, 3))) hlo_val *hlo_berr(hlo_ctx *x, const char *fmt, ...);
hlo_val *hlo_val_new(hlo_builder *b, int id);
hlo_val *hlo_val_tuple(hlo_builder *b, int n);
hlo_val *hlo_oom(hlo_ctx *x);
int hlo_leaf(hlo_ctx *x, int i);
const graph_shape *hlo_leaf_shape(hlo_ctx *x, int id);
const graph_shape *hlo_out_array(hlo_ctx *x);
const char *hlo_span_find(hlo_str hay, const char *needle);
int hlo_parse_ints(hlo_str v, int64_t *out, int max);
bool hlo_attr_dims(hlo_ctx *x, const char *key, graph_dims *d, bool required);
bool hlo_attr_int(hlo_ctx *x, const char *key, int64_t *v, bool required);
int hlo_attr_comp(hlo_ctx *x, const char *key);
hlo_str hlo_unquote(hlo_str s);
cJSON *hlo_backend_json(const hlo_inst *in);
bool hlo_literal_int(const hlo_inst *in, int64_t *v);
hlo_val *hlo_make_leaves(hlo_ctx *x, const hlo_shape *s, int how, const char *name);
char *hlo_inst_name(const hlo_inst *in, char *buf, size_t n);
hlo_val *hlo_fill_like(hlo_ctx *x, hlo_val **known, int nk);
int hlo_flatten(const hlo_val *v, int *ids, int n);
hlo_val *hlo_eval_comp(hlo_ctx *site, int ci, hlo_val **args, int n_args);
bool hlo_val_matches(const hlo_builder *b, const hlo_val *v, const hlo_shape *s);
size_t hlo_put_val(const hlo_builder *b, const hlo_val *v, char *buf, size_t n, size_t at);
size_t hlo_put_shape(const hlo_shape *s, char *buf, size_t n, size_t at);

/* hlo_calls.c */

bool hlo_plan_calls(hlo_builder *b);
hlo_val *hlo_call(hlo_ctx *x, int ci, hlo_val **args, int n_args);

/* hlo_ops.c */

hlo_val *hlo_h_tuple(hlo_ctx *x);
const hlo_op_row *hlo_op_lookup(hlo_str opcode);
const char *hlo_op_suggest(hlo_str opcode);

/* hlo_coll.c */

hlo_val *hlo_h_collective(hlo_ctx *x);
hlo_val *hlo_h_done(hlo_ctx *x);
hlo_val *hlo_h_permute(hlo_ctx *x);
hlo_val *hlo_h_send(hlo_ctx *x);
hlo_val *hlo_h_recv(hlo_ctx *x);
hlo_val *hlo_h_recv_done(hlo_ctx *x);
hlo_val *hlo_h_infeed(hlo_ctx *x);

/* hlo_control.c */

hlo_val *hlo_h_call(hlo_ctx *x);
hlo_val *hlo_h_async_start(hlo_ctx *x);
hlo_val *hlo_h_copy_start(hlo_ctx *x);
hlo_val *hlo_h_while(hlo_ctx *x);
hlo_val *hlo_h_unsupported(hlo_ctx *x);

/* hlo_custom.c */

hlo_val *hlo_custom_cost(hlo_ctx *x, const char *name, double flops, double trans,
                         bool moves_data);
hlo_val *hlo_custom_out(hlo_ctx *x, const char *name, double flops, double trans);
hlo_val *hlo_h_custom_call(hlo_ctx *x);

#endif
