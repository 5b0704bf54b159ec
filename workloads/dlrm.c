/*
** dlrm.c -- the Deep Learning Recommendation Model (Naumov et al. 2019,
** arXiv:1906.00091): the "dlrm" family.
**
**   dense features [B, d] -> bottom MLP (ReLU after every layer) -> [B, D]
**   each table t: indices [B] (or [B, L] with L lookups, sum-pooled by a
**                 reduce) -> gather from the [rows_t, D] table -> [B, D]
**   interaction "dot": stack the F = tables+1 vectors into [B, F, D], one
**                 batched dot [B, F, D] x [B, F, D] -> [B, F, F], keep the
**                 strict upper triangle (F(F-1)/2 values; F(F+1)/2 with
**                 "interaction_self") with a gather of fixed indices, and
**                 concatenate it after the bottom output, as the reference
**                 implementation (dlrm_s_pytorch.py, interact_features) does
**   interaction "cat": concatenate the bottom output and every vector
**   top MLP (ReLU after every layer but the last) -> [B, 1] logit
**   loss: binary cross-entropy on the logit (wl_bce)
**
** Tables are weights (wl_weight, never quantized); the MLPs are wl_linear
** with bias (LoRA modules "bottom" and "top"). Fields: docs/families.md.
*/
#include <stdio.h>
#include <stdlib.h>

#include "fam.h"
#include "families.h"

static const char *const DLRM_KEYS[] = {
    "dense_features",   "tables",  "table_rows",        "embedding_dim",
    "bottom_mlp",       "top_mlp", "lookups_per_table", "interaction",
    "interaction_self", NULL};
static const char *const TABLE_KEYS[] = {"rows", "dim", NULL};
static const char *const INTERACTIONS[] = {"dot", "cat", NULL};

#define MAX_ROWS (1LL << 40)

typedef struct {
  int n;
  int64_t rows[FAM_MAX_LIST], dim[FAM_MAX_LIST];
} dlrm_tables;

/* "tables": [{"rows", "dim"}] or "table_rows": [...] with "embedding_dim". */
static void read_tables(jin *j, const cJSON *spec, dlrm_tables *tb, int64_t emb_dim) {
  bool has_list = cJSON_HasObjectItem(spec, "tables");
  bool has_rows = cJSON_HasObjectItem(spec, "table_rows");
  if (has_list == has_rows) {
    if (has_list) {
      jin_push_key(j, "table_rows", 0);
      jin_error(j, 1, "give either \"tables\" or \"table_rows\", not both");
      jin_pop(j);
    } else {
      jin_error(j, 0, "a dlrm needs \"tables\" or \"table_rows\" (embedding tables)");
    }
    return;
  }
  if (has_rows) {
    fam_int_list(j, spec, "table_rows", 1, FAM_MAX_LIST, 1, MAX_ROWS, true, tb->rows, &tb->n);
    if (emb_dim <= 0) jin_error(j, 1, "missing field 'embedding_dim' (needed with table_rows)");
    for (int i = 0; i < tb->n; i++)
      tb->dim[i] = emb_dim;
    return;
  }
  const cJSON *arr = jin_get_array(j, spec, "tables", true);
  if (!arr) return;
  tb->n = cJSON_GetArraySize(arr);
  jin_push_key(j, "tables", 0);
  if (tb->n < 1 || tb->n > FAM_MAX_LIST) {
    jin_error(j, 0, "expected 1 to %d tables, got %d", FAM_MAX_LIST, tb->n);
    tb->n = 0;
  }
  int i = 0;
  for (const cJSON *t = arr->child; t && i < tb->n; t = t->next, i++) {
    jin_push_index(j, i);
    if (!cJSON_IsObject(t)) {
      jin_error(j, 0, "a table is an object such as {\"rows\": 1000, \"dim\": 128}");
    } else {
      jin_only(j, t, TABLE_KEYS, NULL);
      jin_get_int(j, t, "rows", 1, MAX_ROWS, true, &tb->rows[i]);
      tb->dim[i] = emb_dim;
      jin_get_int(j, t, "dim", 1, 1 << 16, emb_dim <= 0, &tb->dim[i]);
    }
    jin_pop(j);
  }
  jin_pop(j);
}

/* ReLU MLP over x; relu_last says whether the last layer gets one too. */
static int mlp(graph *g, const wl_train *t, int x, const char *part, const int64_t *w, int n,
               bool relu_last) {
  char name[64];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s.%d", part, i);
    graph_set_scope(g, name);
    x = wl_linear(g, t, x, name, part, w[i], true);
    if (i < n - 1 || relu_last) x = graph_unary(g, GOP_RELU, x);
  }
  graph_set_scope(g, "");
  return x;
}

int wl_dlrm(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  int before = j->errors;
  jin_only(j, spec, DLRM_KEYS, wl_common_keys);
  int64_t dense = 0, emb_dim = 0, lookups = 1;
  jin_get_int(j, spec, "dense_features", 1, 1 << 20, true, &dense);
  jin_get_int(j, spec, "embedding_dim", 1, 1 << 16, false, &emb_dim);
  jin_get_int(j, spec, "lookups_per_table", 1, 1 << 16, false, &lookups);
  int inter = 0;
  bool self = false;
  jin_get_enum(j, spec, "interaction", INTERACTIONS, false, &inter);
  jin_get_bool(j, spec, "interaction_self", false, &self);
  dlrm_tables *tb = calloc(1, sizeof *tb);
  int64_t *bot = malloc(FAM_MAX_LIST * sizeof *bot), *top = malloc(FAM_MAX_LIST * sizeof *top);
  int *vec = malloc((FAM_MAX_LIST + 1) * sizeof *vec);
  int loss = -1;
  if (!tb || !bot || !top || !vec) {
    jin_error(j, 0, "out of memory");
    goto done;
  }
  read_tables(j, spec, tb, emb_dim);
  int n_bot = 0, n_top = 0;
  fam_int_list(j, spec, "bottom_mlp", 1, FAM_MAX_LIST, 1, 1 << 20, true, bot, &n_bot);
  fam_int_list(j, spec, "top_mlp", 1, FAM_MAX_LIST, 1, 1 << 20, true, top, &n_top);
  if (j->errors > before) goto done;
  if (top[n_top - 1] != 1) {
    jin_push_key(j, "top_mlp", 0);
    jin_push_index(j, n_top - 1);
    jin_error(j, 0, "the top MLP ends in the click logit: its last width must be 1, got %lld",
              (long long)top[n_top - 1]);
    jin_pop(j);
    jin_pop(j);
  }
  int64_t d = bot[n_bot - 1];
  for (int i = 0; inter == 0 && i < tb->n; i++)
    if (tb->dim[i] != d) {
      if (cJSON_HasObjectItem(spec, "tables")) {
        jin_push_key(j, "tables", 0);
        jin_push_index(j, i);
      } else {
        jin_push_key(j, "embedding_dim", 0);
      }
      jin_error(j, 0,
                "embedding dim %lld differs from the bottom MLP's output %lld; the dot "
                "interaction needs them equal",
                (long long)tb->dim[i], (long long)d);
      jin_pop(j);
      if (cJSON_HasObjectItem(spec, "tables")) jin_pop(j);
      break;
    }
  if (j->errors > before) goto done;

  int64_t b = t->global_batch;
  int labels = wl_input(g, "labels", GRAPH_SHAPE(GDT_F32, b, 1));
  int x = wl_input(g, "dense", GRAPH_SHAPE(t->compute, b, dense));
  x = mlp(g, t, x, "bottom", bot, n_bot, true);

  /* embedding lookups, sum-pooled over the lookups of each table */
  char name[64];
  for (int i = 0; i < tb->n; i++) {
    snprintf(name, sizeof name, "emb.%d", i);
    graph_set_scope(g, name);
    graph_dtype it = tb->rows[i] > INT32_MAX ? GDT_S64 : GDT_S32;
    snprintf(name, sizeof name, "sparse.%d", i);
    int idx = wl_input(g, name, lookups > 1 ? GRAPH_SHAPE(it, b, lookups) : GRAPH_SHAPE(it, b));
    snprintf(name, sizeof name, "emb.%d", i);
    int table = wl_weight(g, t, name, GRAPH_SHAPE(t->compute, tb->rows[i], tb->dim[i]), WL_W_OTHER);
    int e = graph_gather(g, table, idx, NULL);
    vec[i + 1] = lookups > 1 ? graph_reduce(g, e, graph_dims_of(1, 1), GRAPH_RED_ADD) : e;
  }
  vec[0] = x;
  int nf = tb->n + 1;

  graph_set_scope(g, "interaction");
  int r;
  if (inter == 0) {
    for (int i = 0; i < nf; i++)
      vec[i] = graph_reshape(g, vec[i], GRAPH_SHAPE(t->compute, b, 1, d));
    int stack = graph_concat(g, vec, nf, 1); /* [B, F, D] */
    int z = graph_dot(g, stack, stack, graph_dims_of(1, 0), graph_dims_of(1, 0),
                      graph_dims_of(1, 2), graph_dims_of(1, 2), t->compute); /* [B, F, F] */
    z = graph_reshape(g, z, GRAPH_SHAPE(t->compute, b, (int64_t)nf * nf));
    int64_t pairs = self ? (int64_t)nf * (nf + 1) / 2 : (int64_t)nf * (nf - 1) / 2;
    int tri = graph_constant(g, GRAPH_SHAPE(GDT_S32, pairs)); /* flat (i, j) positions */
    graph_shape picked = GRAPH_SHAPE(t->compute, b, pairs);
    int zs = graph_gather(g, z, tri, &picked);
    int both[2] = {x, zs};
    r = graph_concat(g, both, 2, 1);
  } else {
    r = graph_concat(g, vec, nf, 1);
  }
  int logit = mlp(g, t, r, "top", top, n_top, false);
  graph_set_scope(g, "loss");
  loss = wl_bce(g, logit, labels);
  graph_set_scope(g, "");
  if (fam_graph_check(g, j) < 0) loss = -1;
  info->per_step = (double)b;
  info->unit = "samples";
done:
  free(tb);
  free(bot);
  free(top);
  free(vec);
  return loss;
}
