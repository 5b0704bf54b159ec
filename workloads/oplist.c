/*
** oplist.c -- an explicit list of HLO-like ops: the "graph" family.
**
**   {"family": "graph",
**    "ops": [{"name": "x", "op": "parameter", "shape": "bf16[8,1024]", "role": "input"},
**            {"name": "y", "op": "dot", "inputs": ["x", "w"],
**             "lhs_contracting_dims": [1], "rhs_contracting_dims": [0]}, ...],
**    "loss": "l"}
**
** Op kinds are graph_op_name() spellings (HLO opcodes) and attributes take
** the names XLA gives them (lhs_contracting_dims, dim_labels,
** window_strides, start_indices, edge_padding_low, ...). Ops may come in
** any order. The loader works in passes so every problem is reported with
** its place: (1) names and kinds, (2) inputs resolved by name, (3) a
** topological order (a cycle is reported naming its ops), (4) the ops built
** in that order through the graph API, whose shape checks then name the op.
** Attributes: docs/families.md.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "fam.h"
#include "families.h"

static const char *const OPLIST_KEYS[] = {"ops", "loss", NULL};
static const char *const OP_COMMON[] = {"name", "op", "inputs", NULL};

#define MAX_OPS (1 << 20)
#define MAX_INPUTS 64

/* ---- attribute keys and arity by kind ---- */

static const char *const K_NONE[] = {NULL};
static const char *const K_PARAM[] = {"shape", "role", NULL};
static const char *const K_SHAPE[] = {"shape", NULL};
static const char *const K_CONVERT[] = {"dtype", NULL};
static const char *const K_COMPARE[] = {"direction", NULL};
static const char *const K_DOT[] = {"lhs_contracting_dims",
                                    "rhs_contracting_dims",
                                    "lhs_batch_dims",
                                    "rhs_batch_dims",
                                    "dtype",
                                    NULL};
static const char *const K_CONV[] = {"dim_labels",
                                     "input_batch_dimension",
                                     "input_feature_dimension",
                                     "input_spatial_dimensions",
                                     "kernel_input_feature_dimension",
                                     "kernel_output_feature_dimension",
                                     "kernel_spatial_dimensions",
                                     "output_batch_dimension",
                                     "output_feature_dimension",
                                     "output_spatial_dimensions",
                                     "window_strides",
                                     "padding",
                                     "lhs_dilation",
                                     "rhs_dilation",
                                     "feature_group_count",
                                     "batch_group_count",
                                     "dtype",
                                     NULL};
static const char *const K_REDUCE[] = {"dimensions", "reducer", NULL};
static const char *const K_BCAST[] = {"shape", "dimensions", NULL};
static const char *const K_DIMS[] = {"dimensions", NULL};
static const char *const K_CONCAT[] = {"dimension", "dimensions", NULL};
static const char *const K_SLICE[] = {"start_indices", "limit_indices", "strides", NULL};
static const char *const K_DSLICE[] = {"dynamic_slice_sizes", NULL};
static const char *const K_PAD[] = {"edge_padding_low", "edge_padding_high", "interior_padding",
                                    NULL};
static const char *const K_COLL[] = {"group_size", "dimension", NULL};
static const char *const K_CUSTOM[] = {"custom_call_target", "shape", "flops",
                                       "transcendentals",    "bytes", NULL};

typedef struct {
  const char *const *keys;
  int min_in, max_in; /* max -1: any number */
} kind_rule;

static kind_rule rule_of(graph_op_kind k) {
  switch (k) {
  case GOP_PARAMETER:
    return (kind_rule){K_PARAM, 0, 0};
  case GOP_CONSTANT:
  case GOP_IOTA:
    return (kind_rule){K_SHAPE, 0, 0};
  case GOP_CONVERT:
    return (kind_rule){K_CONVERT, 1, 1};
  case GOP_COMPARE:
    return (kind_rule){K_COMPARE, 2, 2};
  case GOP_SELECT:
  case GOP_CLAMP:
    return (kind_rule){K_NONE, 3, 3};
  case GOP_DOT:
    return (kind_rule){K_DOT, 2, 2};
  case GOP_CONV:
    return (kind_rule){K_CONV, 2, 2};
  case GOP_REDUCE: /* HLO's reduce also takes the init value */
    return (kind_rule){K_REDUCE, 1, 2};
  case GOP_BROADCAST:
    return (kind_rule){K_BCAST, 1, 1};
  case GOP_TRANSPOSE:
    return (kind_rule){K_DIMS, 1, 1};
  case GOP_RESHAPE:
    return (kind_rule){K_SHAPE, 1, 1};
  case GOP_CONCAT:
    return (kind_rule){K_CONCAT, 1, -1};
  case GOP_SLICE:
    return (kind_rule){K_SLICE, 1, 1};
  case GOP_DYNAMIC_SLICE: /* operand, then start indices (data, not shape) */
    return (kind_rule){K_DSLICE, 1, -1};
  case GOP_DYNAMIC_UPDATE_SLICE:
    return (kind_rule){K_NONE, 2, -1};
  case GOP_PAD: /* operand and, as in HLO, the padding value */
    return (kind_rule){K_PAD, 1, 2};
  case GOP_GATHER:
    return (kind_rule){K_SHAPE, 2, 2};
  case GOP_SCATTER:
    return (kind_rule){K_NONE, 3, 3};
  case GOP_CUSTOM:
    return (kind_rule){K_CUSTOM, 0, -1};
  default:
    break;
  }
  if (graph_op_is_collective(k)) return (kind_rule){K_COLL, 1, 1};
  if (graph_op_is_elementwise(k)) {
    /* the remaining elementwise kinds: unary or binary by the table */
    bool binary = k >= GOP_ADD && k <= GOP_OR;
    return (kind_rule){K_NONE, binary ? 2 : 1, binary ? 2 : 1};
  }
  return (kind_rule){K_NONE, 0, -1};
}

/* ---- shapes and lists ---- */

/* "bf16[8,1024]", "f32[]", optionally followed by an XLA layout "{1,0}". */
static bool parse_shape(const char *s, graph_shape *out) {
  const char *lb = strchr(s, '[');
  if (!lb || lb == s || lb - s >= 16) return false;
  char dt[16];
  memcpy(dt, s, (size_t)(lb - s));
  dt[lb - s] = '\0';
  int d = graph_dtype_parse(dt);
  if (d < 0) return false;
  graph_shape r = {.dtype = (graph_dtype)d};
  const char *p = lb + 1;
  while (*p == ' ')
    p++;
  if (*p != ']') {
    for (;;) {
      if (*p < '0' || *p > '9' || r.rank == GRAPH_MAX_RANK) return false;
      char *end;
      long long v = strtoll(p, &end, 10);
      if (v < 0 || v > (1LL << 50)) return false;
      r.dim[r.rank++] = v;
      p = end;
      while (*p == ' ')
        p++;
      if (*p == ']') break;
      if (*p != ',') return false;
      p++;
      while (*p == ' ')
        p++;
    }
  }
  p++;
  if (*p == '{') p = strchr(p, '}') ? strchr(p, '}') + 1 : p;
  if (*p) return false;
  *out = r;
  return true;
}

/* Reads obj[key] as a shape string. Returns like jin_get_str. */
static int get_shape(jin *j, const cJSON *obj, const char *key, bool required, graph_shape *out) {
  const char *s;
  int rc = jin_get_str(j, obj, key, required, &s);
  if (rc != 1) return rc;
  if (!parse_shape(s, out)) {
    jin_push_key(j, key, 0);
    jin_error(j, 0,
              "expected a shape such as \"bf16[8,1024]\" (dtype, then dimensions), got \"%s\"", s);
    jin_pop(j);
    return -1;
  }
  return 1;
}

static int get_dtype(jin *j, const cJSON *obj, const char *key, bool required, graph_dtype *out) {
  const char *s;
  int rc = jin_get_str(j, obj, key, required, &s);
  if (rc != 1) return rc;
  int d = graph_dtype_parse(s);
  if (d < 0) {
    jin_push_key(j, key, 0);
    jin_error(j, 0, "unknown dtype \"%s\" (bf16, f16, f32, f64, s32, u8, pred, ...)", s);
    jin_pop(j);
    return -1;
  }
  *out = (graph_dtype)d;
  return 1;
}

/* A list of dimension indices. */
static int get_dims(jin *j, const cJSON *obj, const char *key, bool required, graph_dims *out) {
  int64_t v[GRAPH_MAX_RANK];
  int n = 0;
  int rc = fam_int_list(j, obj, key, 0, GRAPH_MAX_RANK, 0, GRAPH_MAX_RANK - 1, required, v, &n);
  if (rc != 1) return rc;
  out->n = n;
  for (int i = 0; i < n; i++)
    out->d[i] = (int8_t)v[i];
  return 1;
}

/* A list of exactly `rank` integers (one per operand dimension). */
static int get_per_dim(jin *j, const cJSON *obj, const char *key, int rank, int64_t min,
                       int64_t max, bool required, int64_t *out) {
  int n = 0;
  return fam_int_list(j, obj, key, rank, rank, min, max, required, out, &n);
}

/* ---- convolution ---- */

/* One side of "b01f_01io->b01f": a, b are the two lettered dims, digits
** are spatial dims. Every position must be named exactly once. */
static bool label_side(const char *p, size_t n, char ca, char cb, int *da, int *db, int *sp,
                       int nsp) {
  int seen_a = 0, seen_b = 0, seen_sp[3] = {0};
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (ch == ca)
      *da = (int)i, seen_a++;
    else if (ch == cb)
      *db = (int)i, seen_b++;
    else if (ch >= '0' && ch < '0' + nsp)
      sp[ch - '0'] = (int)i, seen_sp[ch - '0']++;
    else
      return false;
  }
  if (seen_a != 1 || seen_b != 1) return false;
  for (int s = 0; s < nsp; s++)
    if (seen_sp[s] != 1) return false;
  return true;
}

static bool parse_labels(const char *s, graph_conv_attrs *a) {
  const char *us = strchr(s, '_'), *ar = strstr(s, "->");
  if (!us || !ar || ar < us) return false;
  size_t nl = (size_t)(us - s), nr = (size_t)(ar - us - 1), no = strlen(ar + 2);
  if (nl < 3 || nl > 5 || nr != nl || no != nl) return false;
  int nsp = (int)nl - 2;
  a->spatial = nsp;
  return label_side(s, nl, 'b', 'f', &a->in_batch, &a->in_feature, a->in_spatial, nsp) &&
         label_side(us + 1, nr, 'i', 'o', &a->k_in, &a->k_out, a->k_spatial, nsp) &&
         label_side(ar + 2, no, 'b', 'f', &a->out_batch, &a->out_feature, a->out_spatial, nsp);
}

/* "padding": [[lo, hi], ...], one pair per spatial dimension. */
static void get_padding(jin *j, const cJSON *op, int nsp, graph_conv_attrs *a) {
  const cJSON *arr = jin_get_array(j, op, "padding", false);
  if (!arr) return;
  jin_push_key(j, "padding", 0);
  if (cJSON_GetArraySize(arr) != nsp) {
    jin_error(j, 0, "expected %d [low, high] pairs (one per spatial dimension), got %d", nsp,
              cJSON_GetArraySize(arr));
  } else {
    int i = 0;
    for (const cJSON *p = arr->child; p; p = p->next, i++) {
      jin_push_index(j, i);
      const cJSON *lo = cJSON_GetArrayItem(p, 0), *hi = cJSON_GetArrayItem(p, 1);
      if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(lo) ||
          !cJSON_IsNumber(hi) || lo->valuedouble != (double)(int64_t)lo->valuedouble ||
          hi->valuedouble != (double)(int64_t)hi->valuedouble || lo->valuedouble < -(1 << 20) ||
          hi->valuedouble < -(1 << 20) || lo->valuedouble > (1 << 20) ||
          hi->valuedouble > (1 << 20)) {
        jin_error(j, 0, "expected a pair of integers [low, high]");
      } else {
        a->pad_lo[i] = (int64_t)lo->valuedouble;
        a->pad_hi[i] = (int64_t)hi->valuedouble;
      }
      jin_pop(j);
    }
  }
  jin_pop(j);
}

static int read_conv(jin *j, const cJSON *op, graph_conv_attrs *a) {
  int before = j->errors;
  const char *labels;
  if (jin_get_str(j, op, "dim_labels", false, &labels) == 1) {
    if (!parse_labels(labels, a)) {
      jin_push_key(j, "dim_labels", 0);
      jin_error(j, 0, "expected dimension labels such as \"b01f_01io->b01f\", got \"%s\"", labels);
      jin_pop(j);
      return -1;
    }
  } else if (j->errors == before) {
    /* XLA's ConvolutionDimensionNumbers, field by field */
    int64_t v = 0, sp[3];
    int n = 0, m = 0;
#define ONE(key, field)                                                                            \
  if (jin_get_int(j, op, key, 0, GRAPH_MAX_RANK - 1, true, &v) == 1) a->field = (int)v
#define LIST(key, field)                                                                           \
  if (fam_int_list(j, op, key, 1, 3, 0, GRAPH_MAX_RANK - 1, true, sp, &m) == 1) {                  \
    if (n && m != n) {                                                                             \
      jin_push_key(j, key, 0);                                                                     \
      jin_error(j, 0, "expected %d spatial dimensions, like input_spatial_dimensions", n);         \
      jin_pop(j);                                                                                  \
    }                                                                                              \
    n = m;                                                                                         \
    for (int s = 0; s < m; s++)                                                                    \
      a->field[s] = (int)sp[s];                                                                    \
  }
    ONE("input_batch_dimension", in_batch);
    ONE("input_feature_dimension", in_feature);
    LIST("input_spatial_dimensions", in_spatial);
    ONE("kernel_input_feature_dimension", k_in);
    ONE("kernel_output_feature_dimension", k_out);
    LIST("kernel_spatial_dimensions", k_spatial);
    ONE("output_batch_dimension", out_batch);
    ONE("output_feature_dimension", out_feature);
    LIST("output_spatial_dimensions", out_spatial);
#undef ONE
#undef LIST
    a->spatial = n;
  }
  if (j->errors > before) return -1;
  int nsp = a->spatial;
  int64_t v[3];
  for (int s = 0; s < 3; s++)
    v[s] = 1;
  if (get_per_dim(j, op, "window_strides", nsp, 1, 1 << 20, false, v) == 1)
    for (int s = 0; s < nsp; s++)
      a->stride[s] = v[s];
  if (get_per_dim(j, op, "lhs_dilation", nsp, 1, 1 << 20, false, v) == 1)
    for (int s = 0; s < nsp; s++)
      a->lhs_dilation[s] = v[s];
  if (get_per_dim(j, op, "rhs_dilation", nsp, 1, 1 << 20, false, v) == 1)
    for (int s = 0; s < nsp; s++)
      a->rhs_dilation[s] = v[s];
  get_padding(j, op, nsp, a);
  a->feature_groups = 1;
  a->batch_groups = 1;
  jin_get_int(j, op, "feature_group_count", 1, 1 << 20, false, &a->feature_groups);
  jin_get_int(j, op, "batch_group_count", 1, 1 << 20, false, &a->batch_groups);
  return j->errors > before ? -1 : 0;
}

/* ---- the list ---- */

typedef struct {
  const char *name;
  int idx;
} name_ix;

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

typedef struct {
  graph *g;
  jin *j;
  const wl_train *t;
  int n;
  const cJSON **item;
  const char **name;
  int *kind;
  int **in; /* op indices in the list */
  int *n_in;
  int *id; /* graph op ids, -1 until built */
  name_ix *sorted;
} oplist;

static int find(const oplist *o, const char *name) {
  name_ix key = {name, 0};
  const name_ix *hit = bsearch(&key, o->sorted, (size_t)o->n, sizeof key, cmp_name);
  return hit ? hit->idx : -1;
}

/* Reports an unknown name with the closest known one. */
static void unknown_name(oplist *o, const char *what, const char *name) {
  const char *s = str_suggest(name, o->name, o->n);
  if (s)
    jin_error(o->j, 0, "%s '%s' is not the name of any op (did you mean '%s'?)", what, name, s);
  else
    jin_error(o->j, 0, "%s '%s' is not the name of any op", what, name);
}

static const char *const ROLES[] = {"input", "weight", "frozen", NULL};
static const char *const REDUCERS[] = {"add", "maximum", "minimum", "multiply", NULL};
static const graph_reduce_kind REDUCE_KINDS[] = {GRAPH_RED_ADD, GRAPH_RED_MAX, GRAPH_RED_MIN,
                                                 GRAPH_RED_MUL};
static const char *const DIRECTIONS[] = {"EQ", "NE", "LT", "LE", "GT", "GE", NULL};

/* Builds op i (its inputs are built). Field errors are reported here;
** graph errors by the caller. Returns the graph id or -1. */
static int build(oplist *o, int i) {
  graph *g = o->g;
  jin *j = o->j;
  const cJSON *op = o->item[i];
  graph_op_kind k = (graph_op_kind)o->kind[i];
  int before = j->errors;
  jin_only(j, op, rule_of(k).keys, OP_COMMON);
  int x[MAX_INPUTS], nx = o->n_in[i];
  for (int a = 0; a < nx; a++)
    x[a] = o->id[o->in[i][a]];
  graph_shape s0 = nx > 0 ? fam_shape(g, x[0]) : (graph_shape){.rank = 0};
  graph_shape shp = {0};
  graph_dims d1 = {0}, d2 = {0}, d3 = {0}, d4 = {0};
  int64_t lo[GRAPH_MAX_RANK] = {0}, hi[GRAPH_MAX_RANK] = {0}, st[GRAPH_MAX_RANK];
  for (int r = 0; r < GRAPH_MAX_RANK; r++)
    st[r] = 1;
  int e = 0;
  graph_set_scope(g, o->name[i]);
  int id = -1;
  switch (k) {
  case GOP_PARAMETER: {
    get_shape(j, op, "shape", true, &shp);
    jin_get_enum(j, op, "role", ROLES, false, &e);
    if (j->errors > before) break;
    /* a trained weight narrower than the training precision, which keeps
    ** no master copy (fp32, fp64): its wide update has nothing wide to
    ** apply to; an op list's shapes carry its dtypes, so the precision
    ** cannot change them (a bf16 model keeps an fp32 master: train.c) */
    if (e == 1 && o->t->method == WL_FULL && !o->t->master_fp32 &&
        graph_dtype_bits(shp.dtype) < graph_dtype_bits(o->t->compute)) {
      char ss[128], near[64] = "";
      graph_shape_str(&shp, ss, sizeof ss);
      const char *own = wl_precision_name(shp.dtype), *now = wl_precision_name(o->t->compute);
      if (own) snprintf(near, sizeof near, "train in %s, or ", own);
      jin_push_key(j, "shape", 0);
      jin_error(j, 0, "weight '%s' is %s, but the model trains in %s (train.precision, or "
                "--precision) with no master copy to update it in; an op list's shapes fix its "
                "dtypes (nearest: %swrite the weight in %s)", o->name[i], ss,
                now ? now : graph_dtype_name(o->t->compute), near, graph_dtype_name(o->t->compute));
      jin_pop(j);
      break;
    }
    if (e == 0) {
      id = wl_input(g, o->name[i], shp);
    } else if (e == 1 && shp.dtype == o->t->compute) {
      id = wl_weight(g, o->t, o->name[i], shp, shp.rank == 2 ? WL_W_LINEAR : WL_W_OTHER);
    } else {
      bool train = e == 1 && o->t->method == WL_FULL;
      id = graph_parameter(g, o->name[i], shp, GRAPH_WEIGHT | (train ? GRAPH_TRAINABLE : 0));
    }
    break;
  }
  case GOP_CONSTANT:
  case GOP_IOTA:
    if (get_shape(j, op, "shape", true, &shp) == 1)
      id = k == GOP_CONSTANT ? graph_constant(g, shp) : graph_iota(g, shp);
    break;
  case GOP_CONVERT: {
    graph_dtype dt = GDT_F32;
    if (get_dtype(j, op, "dtype", true, &dt) == 1) id = graph_convert(g, x[0], dt);
    break;
  }
  case GOP_DOT: {
    graph_dtype dt = s0.dtype;
    get_dims(j, op, "lhs_contracting_dims", true, &d3);
    get_dims(j, op, "rhs_contracting_dims", true, &d4);
    get_dims(j, op, "lhs_batch_dims", false, &d1);
    get_dims(j, op, "rhs_batch_dims", false, &d2);
    get_dtype(j, op, "dtype", false, &dt);
    if (j->errors == before) id = graph_dot(g, x[0], x[1], d1, d2, d3, d4, dt);
    break;
  }
  case GOP_CONV: {
    graph_conv_attrs a = {0};
    graph_dtype dt = s0.dtype;
    get_dtype(j, op, "dtype", false, &dt);
    if (read_conv(j, op, &a) == 0 && j->errors == before) id = graph_conv(g, x[0], x[1], &a, dt);
    break;
  }
  case GOP_REDUCE:
    get_dims(j, op, "dimensions", true, &d1);
    jin_get_enum(j, op, "reducer", REDUCERS, false, &e);
    if (j->errors == before) id = graph_reduce(g, x[0], d1, REDUCE_KINDS[e]);
    break;
  case GOP_BROADCAST:
    get_shape(j, op, "shape", true, &shp);
    d1.n = s0.rank; /* default: the operand's dims are the trailing ones */
    for (int r = 0; r < s0.rank; r++)
      d1.d[r] = (int8_t)(shp.rank - s0.rank + r);
    get_dims(j, op, "dimensions", false, &d1);
    if (j->errors == before) id = graph_broadcast(g, x[0], shp, d1);
    break;
  case GOP_TRANSPOSE:
    if (get_dims(j, op, "dimensions", true, &d1) == 1) id = graph_transpose(g, x[0], d1);
    break;
  case GOP_RESHAPE:
    if (get_shape(j, op, "shape", true, &shp) == 1) id = graph_reshape(g, x[0], shp);
    break;
  case GOP_CONCAT: {
    int64_t dim = 0;
    if (cJSON_HasObjectItem(op, "dimensions")) {
      get_dims(j, op, "dimensions", true, &d1);
      if (j->errors == before && d1.n != 1) {
        jin_push_key(j, "dimensions", 0);
        jin_error(j, 0, "expected one dimension");
        jin_pop(j);
      }
      dim = d1.d[0];
    } else {
      jin_get_int(j, op, "dimension", 0, GRAPH_MAX_RANK - 1, true, &dim);
    }
    if (j->errors == before) id = graph_concat(g, x, nx, (int)dim);
    break;
  }
  case GOP_SLICE:
    get_per_dim(j, op, "start_indices", s0.rank, 0, 1LL << 50, true, lo);
    get_per_dim(j, op, "limit_indices", s0.rank, 0, 1LL << 50, true, hi);
    get_per_dim(j, op, "strides", s0.rank, 1, 1LL << 50, false, st);
    if (j->errors == before) id = graph_slice(g, x[0], lo, hi, st);
    break;
  case GOP_DYNAMIC_SLICE:
    if (get_per_dim(j, op, "dynamic_slice_sizes", s0.rank, 0, 1LL << 50, true, hi) == 1)
      id = graph_dynamic_slice(g, x[0], graph_shape_make(s0.dtype, s0.rank, hi));
    break;
  case GOP_DYNAMIC_UPDATE_SLICE:
    id = graph_dynamic_update_slice(g, x[0], x[1]);
    break;
  case GOP_PAD: {
    int64_t in[GRAPH_MAX_RANK] = {0};
    get_per_dim(j, op, "edge_padding_low", s0.rank, -(1LL << 40), 1LL << 40, false, lo);
    get_per_dim(j, op, "edge_padding_high", s0.rank, -(1LL << 40), 1LL << 40, false, hi);
    get_per_dim(j, op, "interior_padding", s0.rank, 0, 1LL << 40, false, in);
    if (j->errors == before) id = graph_pad(g, x[0], lo, hi, in);
    break;
  }
  case GOP_GATHER: {
    int rc = get_shape(j, op, "shape", false, &shp);
    if (rc >= 0) id = graph_gather(g, x[0], x[1], rc == 1 ? &shp : NULL);
    break;
  }
  case GOP_SCATTER:
    id = graph_scatter(g, x[0], x[1], x[2]);
    break;
  case GOP_CUSTOM: {
    const char *target = "custom-call";
    double fl = 0, tr = 0, by = 0;
    jin_get_str(j, op, "custom_call_target", false, &target);
    get_shape(j, op, "shape", true, &shp);
    jin_get_num(j, op, "flops", 0, 1e30, false, &fl);
    jin_get_num(j, op, "transcendentals", 0, 1e30, false, &tr);
    jin_get_num(j, op, "bytes", 0, 1e30, false, &by);
    if (j->errors == before) id = graph_custom(g, target, shp, x, nx, fl, tr, by);
    break;
  }
  case GOP_SELECT:
    id = graph_select(g, x[0], x[1], x[2]);
    break;
  case GOP_CLAMP:
    id = graph_clamp(g, x[0], x[1], x[2]);
    break;
  default:
    if (graph_op_is_collective(k)) {
      int64_t group = 1, dim = 0;
      bool uses_dim = k == GOP_ALL_GATHER || k == GOP_REDUCE_SCATTER || k == GOP_ALL_TO_ALL;
      jin_get_int(j, op, "group_size", 1, 1 << 24, true, &group);
      jin_get_int(j, op, "dimension", 0, GRAPH_MAX_RANK - 1, uses_dim, &dim);
      if (j->errors == before) id = graph_collective(g, k, x[0], group, (int)dim);
    } else if (k == GOP_COMPARE) {
      jin_get_enum(j, op, "direction", DIRECTIONS, false, &e);
      if (j->errors == before) id = graph_binary(g, k, x[0], x[1]);
    } else if (rule_of(k).min_in == 2) {
      id = graph_binary(g, k, x[0], x[1]);
    } else {
      id = graph_unary(g, k, x[0]);
    }
    break;
  }
  graph_set_scope(g, "");
  return j->errors > before ? -1 : id;
}

/* Pass 1: names and kinds; pass 2: inputs. Returns -1 after reporting. */
static int read_list(oplist *o, const cJSON *ops) {
  jin *j = o->j;
  int before = j->errors;
  const char *kinds[GOP_COUNT];
  for (int k = 0; k < GOP_COUNT; k++)
    kinds[k] = graph_op_name((graph_op_kind)k);
  int i = 0;
  for (const cJSON *op = ops->child; op; op = op->next, i++) {
    o->item[i] = op;
    o->name[i] = "";
    o->kind[i] = -1;
    jin_push_index(j, i);
    const char *kind = NULL;
    if (!cJSON_IsObject(op)) {
      jin_error(j, 0, "an op is an object such as {\"name\": \"y\", \"op\": \"dot\", ...}");
    } else {
      jin_get_str(j, op, "name", true, &o->name[i]);
      if (jin_get_str(j, op, "op", true, &kind) == 1) {
        o->kind[i] = graph_op_parse(kind);
        if (o->kind[i] < 0) {
          const char *s = str_suggest(kind, kinds, GOP_COUNT);
          jin_push_key(j, "op", 0);
          if (s)
            jin_error(j, 0, "unknown op kind \"%s\" (did you mean \"%s\"?)", kind, s);
          else
            jin_error(j, 0,
                      "unknown op kind \"%s\" (HLO opcodes: parameter, add, dot, "
                      "convolution, reduce, ...)",
                      kind);
          jin_pop(j);
        }
      }
    }
    o->sorted[i] = (name_ix){o->name[i], i};
    jin_pop(j);
  }
  qsort(o->sorted, (size_t)o->n, sizeof *o->sorted, cmp_name);
  for (int k = 1; k < o->n; k++)
    if (*o->sorted[k].name && strcmp(o->sorted[k].name, o->sorted[k - 1].name) == 0) {
      int later = o->sorted[k].idx > o->sorted[k - 1].idx ? o->sorted[k].idx : o->sorted[k - 1].idx;
      jin_push_index(j, later);
      jin_push_key(j, "name", 0);
      jin_error(j, 0, "op name '%s' is already used", o->sorted[k].name);
      jin_pop(j);
      jin_pop(j);
    }
  if (j->errors > before) return -1;

  for (i = 0; i < o->n; i++) {
    jin_push_index(j, i);
    const cJSON *ins = jin_get_array(j, o->item[i], "inputs", false);
    int n = ins ? cJSON_GetArraySize(ins) : 0;
    kind_rule r = rule_of((graph_op_kind)o->kind[i]);
    if (n < r.min_in || (r.max_in >= 0 && n > r.max_in) || n > MAX_INPUTS) {
      /* at the inputs, or at the op kind when there are none */
      jin_push_key(j, ins ? "inputs" : "op", 0);
      const char *kn = graph_op_name(o->kind[i]);
      if (n > MAX_INPUTS)
        jin_error(j, 0, "at most %d inputs, got %d", MAX_INPUTS, n);
      else if (r.max_in == r.min_in)
        jin_error(j, 0, "%s takes %d input%s, got %d", kn, r.min_in, r.min_in == 1 ? "" : "s", n);
      else
        jin_error(j, 0, "%s takes at least %d input%s, got %d", kn, r.min_in,
                  r.min_in == 1 ? "" : "s", n);
      jin_pop(j);
    }
    o->in[i] = calloc((size_t)n + 1, sizeof **o->in);
    o->n_in[i] = 0;
    if (ins && o->in[i]) {
      jin_push_key(j, "inputs", 0);
      int a = 0;
      for (const cJSON *v = ins->child; v; v = v->next, a++) {
        jin_push_index(j, a);
        int at = cJSON_IsString(v) ? find(o, v->valuestring) : -1;
        if (!cJSON_IsString(v))
          jin_error(j, 0, "expected the name of an op");
        else if (at < 0)
          unknown_name(o, "input", v->valuestring);
        else
          o->in[i][o->n_in[i]++] = at;
        jin_pop(j);
      }
      jin_pop(j);
    }
    jin_pop(j);
  }
  return j->errors > before ? -1 : 0;
}

/* Pass 3: an order (or the cycle); pass 4: build. Returns -1 after reporting. */
static int build_all(oplist *o) {
  jin *j = o->j;
  int *order = malloc((size_t)o->n * sizeof *order), *cycle = malloc((size_t)o->n * sizeof *cycle);
  int rc = -1, len = 0;
  if (!order || !cycle) {
    jin_error(j, 0, "out of memory");
    goto done;
  }
  int top = graph_toposort(o->n, (const int *const *)o->in, o->n_in, order, cycle, &len);
  if (top == -1) {
    char msg[768];
    size_t at = 0;
    for (int c = 0; c <= len && at < sizeof msg; c++)
      at += (size_t)snprintf(msg + at, sizeof msg - at, "%s'%s'", c ? " -> " : "",
                             o->name[cycle[c % len]]);
    jin_push_index(j, cycle[0]);
    jin_push_key(j, "inputs", 0);
    jin_error(j, 0, "the ops form a cycle: %s (each takes the next as an input)", msg);
    jin_pop(j);
    jin_pop(j);
    goto done;
  }
  if (top < 0) {
    jin_error(j, 0, "out of memory");
    goto done;
  }
  for (int k = 0; k < o->n; k++) {
    int i = order[k];
    int e0 = j->errors;
    jin_push_index(j, i);
    o->id[i] = build(o, i);
    bool bad = fam_graph_check(o->g, j) < 0 || o->id[i] < 0;
    if (bad && j->errors == e0) jin_error(j, 0, "could not build this op");
    jin_pop(j);
    if (bad) goto done;
  }
  rc = 0;
done:
  free(order);
  free(cycle);
  return rc;
}

int wl_oplist(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  int before = j->errors;
  jin_only(j, spec, OPLIST_KEYS, wl_common_keys);
  const cJSON *ops = jin_get_array(j, spec, "ops", true);
  const char *loss_name = NULL;
  jin_get_str(j, spec, "loss", true, &loss_name);
  if (j->errors > before) return -1;
  oplist o = {.g = g, .j = j, .t = t, .n = cJSON_GetArraySize(ops)};
  if (o.n < 1 || o.n > MAX_OPS) {
    jin_push_key(j, "ops", 0);
    jin_error(j, 0, "expected 1 to %d ops, got %d", MAX_OPS, o.n);
    jin_pop(j);
    return -1;
  }
  size_t n = (size_t)o.n;
  o.item = calloc(n, sizeof *o.item);
  o.name = calloc(n, sizeof *o.name);
  o.kind = calloc(n, sizeof *o.kind);
  o.in = calloc(n, sizeof *o.in);
  o.n_in = calloc(n, sizeof *o.n_in);
  o.id = calloc(n, sizeof *o.id);
  o.sorted = calloc(n, sizeof *o.sorted);
  int loss = -1;
  if (!o.item || !o.name || !o.kind || !o.in || !o.n_in || !o.id || !o.sorted) {
    jin_error(j, 0, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    o.id[i] = -1;
  jin_push_key(j, "ops", 0);
  int bad = read_list(&o, ops);
  if (!bad) bad = build_all(&o);
  jin_pop(j);
  if (bad) goto done;

  int at = find(&o, loss_name);
  jin_push_key(j, "loss", 0);
  if (at < 0) {
    unknown_name(&o, "loss", loss_name);
  } else {
    graph_shape s = fam_shape(g, o.id[at]);
    if (s.rank != 0 || !graph_dtype_is_float(s.dtype)) {
      char ss[128];
      graph_shape_str(&s, ss, sizeof ss);
      jin_error(j, 0, "the loss must be a floating-point scalar; '%s' is %s", loss_name, ss);
    } else {
      loss = o.id[at];
    }
  }
  jin_pop(j);
  info->per_step = (double)t->global_batch;
  info->unit = "samples";
done:
  for (size_t i = 0; o.in && i < n; i++)
    free(o.in[i]);
  free(o.item);
  free(o.name);
  free(o.kind);
  free(o.in);
  free(o.n_in);
  free(o.id);
  free(o.sorted);
  return loss;
}
