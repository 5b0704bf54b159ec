/*
** gbdt.c -- gradient-boosted decision trees, histogram method: the "gbdt"
** family, the classical model that belongs on CPUs.
**
** One step is one boosting round (one tree of "depth" levels, grown level
** by level as XGBoost's hist method does by default). There is no autodiff:
** the builder writes the whole round (info->whole_step), in f32, or f64
** when the training precision is fp64:
**
**   gradients   g, h per row from the margin and the label (squared error:
**               g = m - y, h = 1; logistic: p = sigmoid(m), g = p - y,
**               h = max(p(1-p), eps)), packed as [rows, 2] pairs
**   per level d (2^d nodes):
**     histogram  scatter-add of the [rows', features] gradient pairs into
**                [nodes', features, bins, 2] at node*F*B + f*B + bin.
**                Root: all rows. Below it only the smaller child of each
**                split is scanned (rows' = ceil(rows/2), the balanced case)
**                by gathering its rows; the sibling is parent - child (the
**                histogram subtraction trick of LightGBM, Ke et al. 2017,
**                and XGBoost hist's SubtractionTrick, updater_fast_hist.cc),
**                one kernel per sibling as gpu_hist launches it (op count
**                2^(d-1): a chip's launch cost is paid per node)
**     split      prefix sums over bins (a custom-call "prefix-sum" of exact
**                cost: one add per element, input and output bytes, since
**                the IR has no scan), then per (node, feature, bin) the
**                gain GL^2/(HL+l) + GR^2/(HR+l) - G^2/(H+l) (Chen & Guestrin
**                2016, eq. 7), the best gain per node and its position
**                (the argmax as max, compare, select, min)
**     partition  each row's split feature and bin (gathers), the compare,
**                the child id 2n + right; then the row lists of the smaller
**                children for the next level (a custom-call "row-partition":
**                one compare per row, the ids read and the list written)
**   leaves      scatter-add of the pairs by leaf, weights -eta G/(H + l)
**   update      the margin += the row's leaf weight (gather, add)
**   loss        the training objective on the updated margin, the metric
**               XGBoost prints after each round
**
** Fields, conventions and sources: docs/families.md.
*/
#include <stdio.h>

#include "fam.h"
#include "families.h"

static const char *const GBDT_KEYS[] = {"rows", "features",  "trees", "depth",
                                        "bins", "objective", NULL};
static const char *const OBJECTIVES[] = {"reg:squarederror", "binary:logistic", NULL};

/* x[..., c:c+1] of a [..., 2] pair array, reshaped to drop the last dim. */
static int channel(graph *g, int x, int c) {
  graph_shape s = fam_shape(g, x);
  if (s.rank < 1) return -1;
  int64_t start[GRAPH_MAX_RANK] = {0}, limit[GRAPH_MAX_RANK];
  for (int i = 0; i < s.rank; i++)
    limit[i] = s.dim[i];
  start[s.rank - 1] = c;
  limit[s.rank - 1] = c + 1;
  graph_shape out = s;
  out.rank--;
  return graph_reshape(g, graph_slice(g, x, start, limit, NULL), out);
}

/* Packs two [R] arrays into [R, 2] pairs. */
static int pairs(graph *g, int a, int b) {
  graph_shape s = fam_shape(g, a);
  if (s.rank < 0) return -1;
  graph_shape col = GRAPH_SHAPE(s.dtype, s.dim[0], 1);
  int two[2] = {graph_reshape(g, a, col), graph_reshape(g, b, col)};
  return graph_concat(g, two, 2, 1);
}

typedef struct {
  int64_t rows, features, bins;
  graph_dtype dt;
} gbdt;

/* The split search over one level's histograms hist [n, F, B, 2]: returns
** the best (feature, bin) per node as a flat s32 index, [n]. */
static int find_splits(graph *g, const gbdt *m, int hist, int64_t n) {
  int64_t f = m->features, nb = m->bins;
  graph_shape h = GRAPH_SHAPE(m->dt, n, f, nb, 2);
  double cum_flops = (double)(n * f * (nb - 1) * 2);
  int cum = graph_custom(g, "prefix-sum", h, &hist, 1, cum_flops, 0, 2 * graph_bytes(&h));
  graph_set_custom_axis(g, cum, 2); /* along the bins: with 2 bins the pair axis costs the same */
  int gl = channel(g, cum, 0), hl = channel(g, cum, 1);
  /* node totals: the last prefix of any feature (feature 0) */
  int64_t start[4] = {0, 0, nb - 1, 0}, limit[4] = {n, 1, nb, 2};
  int tot = graph_reshape(g, graph_slice(g, cum, start, limit, NULL), GRAPH_SHAPE(m->dt, n, 2));
  int gt = channel(g, tot, 0), ht = channel(g, tot, 1);
  graph_shape full = GRAPH_SHAPE(m->dt, n, f, nb);
  graph_dims node = graph_dims_of(1, 0);
  int gr = graph_binary(g, GOP_SUB, graph_broadcast(g, gt, full, node), gl);
  int hr = graph_binary(g, GOP_SUB, graph_broadcast(g, ht, full, node), hl);
  int left = graph_binary(g, GOP_DIV, graph_binary(g, GOP_MUL, gl, gl),
                          fam_with_const(g, GOP_ADD, hl)); /* + lambda */
  int right =
      graph_binary(g, GOP_DIV, graph_binary(g, GOP_MUL, gr, gr), fam_with_const(g, GOP_ADD, hr));
  int parent =
      graph_binary(g, GOP_DIV, graph_binary(g, GOP_MUL, gt, gt), fam_with_const(g, GOP_ADD, ht));
  int gain = graph_binary(g, GOP_SUB, graph_binary(g, GOP_ADD, left, right),
                          graph_broadcast(g, parent, full, node));
  graph_dims fb = graph_dims_of(2, 1, 2);
  int best = graph_reduce(g, gain, fb, GRAPH_RED_MAX);
  int is_best = graph_binary(g, GOP_COMPARE, gain, graph_broadcast(g, best, full, node));
  graph_shape pos = GRAPH_SHAPE(GDT_S32, n, f, nb);
  int none = fam_fill(g, pos);
  int cand = graph_select(g, is_best, graph_iota(g, pos), none);
  return graph_reduce(g, cand, fb, GRAPH_RED_MIN);
}

static const char *scope(char *buf, size_t n, int level, const char *part) {
  snprintf(buf, n, "level%d/%s", level, part);
  return buf;
}

/* One node's histogram, [1, F, B, 2], out of a level's [n, F, B, 2]: the
** first's (the nodes are alike in a balanced tree). */
static int first_node(graph *g, const gbdt *m, int h) {
  graph_shape s = fam_shape(g, h);
  if (s.rank != 4) return -1;
  if (s.dim[0] == 1) return h;
  int64_t start[4] = {0}, limit[4] = {1, m->features, m->bins, 2};
  return graph_slice(g, h, start, limit, NULL);
}

/* A level's 2 x nb histograms [2 nb, F, B, 2] from the nb built ones and
** the parents' (the previous level's, [nb, F, B, 2]): each sibling is
** parent - child, one kernel per node as XGBoost launches it
** (dmlc/xgboost src/tree/updater_gpu_hist.cu, BuildHistLeftRight:
** SubtractionTrick(parent, built, sibling) for each node), so a chip with
** a launch cost (chip.op_overhead_s) pays it per node. The histogram
** builds stay one scatter a level: XGBoost launches those per node too,
** but splitting the level's rows would count a copy of them that its
** kernels (reading through the row list) do not make; so the model's
** launch floor is the subtractions', about half of XGBoost's. */
static int level_hists(graph *g, const gbdt *m, int parents, int built, int64_t nb) {
  int64_t f = m->features, b = m->bins;
  int parent = first_node(g, m, parents), child = first_node(g, m, built);
  graph_set_count(g, nb);
  int sibling = graph_binary(g, GOP_SUB, parent, child);
  graph_set_count(g, 1);
  /* the nb siblings lie beside the built ones in the level's buffer */
  int one = graph_reshape(g, sibling, GRAPH_SHAPE(m->dt, f, b, 2));
  int siblings = graph_broadcast(g, one, GRAPH_SHAPE(m->dt, nb, f, b, 2), graph_dims_of(3, 1, 2, 3));
  int both[2] = {built, siblings};
  return graph_concat(g, both, 2, 0);
}

int wl_gbdt(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  int before = j->errors;
  jin_only(j, spec, GBDT_KEYS, wl_common_keys);
  gbdt m = {.bins = 256};
  int64_t trees = 0, depth = 0;
  int objective = 0;
  jin_get_int(j, spec, "rows", 1, 1LL << 40, true, &m.rows);
  jin_get_int(j, spec, "features", 1, 1 << 20, true, &m.features);
  jin_get_int(j, spec, "trees", 1, 1 << 20, true, &trees);
  jin_get_int(j, spec, "depth", 1, 16, true, &depth);
  jin_get_int(j, spec, "bins", 2, 65536, false, &m.bins);
  jin_get_enum(j, spec, "objective", OBJECTIVES, false, &objective);
  if (j->errors > before) return -1;
  /* the gradient pairs of every cell, [rows, features, 2], must be a tensor */
  if ((double)m.rows * (double)m.features * 2 > (double)(1LL << 50)) {
    jin_push_key(j, "features", 0);
    jin_error(j, 0, "%lld rows x %lld features is more than 2^49 cells; not a real table",
              (long long)m.rows, (long long)m.features);
    jin_pop(j);
    return -1;
  }

  /* Histograms accumulate in f32 unless fp64 is asked for (XGBoost and
  ** LightGBM accumulate CPU histograms in double: ask for fp64 to model them). */
  m.dt = t->compute == GDT_F64 ? GDT_F64 : GDT_F32;
  if (m.dt == GDT_F64) info->requires |= WL_REQ_FP64;
  /* the libraries that train these models run on CPUs and NVIDIA GPUs only
  ** (which chips qualify: plan_hw_supports, sim/plan.c) */
  info->requires |= WL_REQ_TREE_LIBS;
  /* bin indices: one byte up to 256 bins (XGBoost and LightGBM both use
  ** uint8 there); the IR has no 16-bit integer, so more bins take s32 */
  graph_dtype bin_dt = m.bins <= 256 ? GDT_U8 : GDT_S32;
  int64_t r = m.rows, f = m.features, nb = m.bins;

  graph_set_scope(g, "data");
  int x = wl_input(g, "bins", GRAPH_SHAPE(bin_dt, r, f));
  int y = wl_input(g, "labels", GRAPH_SHAPE(m.dt, r));
  int margin = wl_input(g, "margin", GRAPH_SHAPE(m.dt, r)); /* the ensemble so far */

  graph_set_scope(g, "gradients");
  int grad, hess;
  if (objective == 1) {
    int p = graph_unary(g, GOP_LOGISTIC, margin);
    grad = graph_binary(g, GOP_SUB, p, y);
    int one_minus = graph_binary(g, GOP_SUB, fam_const_like(g, p), p);
    hess = fam_with_const(g, GOP_MAX, graph_binary(g, GOP_MUL, p, one_minus));
  } else {
    grad = graph_binary(g, GOP_SUB, margin, y);
    hess = fam_const_like(g, grad);
  }
  int gpair = pairs(g, grad, hess); /* [R, 2] */

  /* every row starts at the root */
  int nid = fam_fill(g, GRAPH_SHAPE(GDT_S32, r));
  int hist = -1, rowlist = -1;
  char sc[64];
  for (int d = 0; d < depth; d++) {
    graph_set_layer(g, d);
    graph_set_scope(g, scope(sc, sizeof sc, d, "histogram"));
    int64_t n = 1LL << d, built_nodes = d == 0 ? 1 : n / 2, rs = d == 0 ? r : (r + 1) / 2;
    int xs = x, gs = gpair, slot = -1;
    if (d > 0) {
      xs = graph_gather(g, x, rowlist, NULL);     /* [rs, F] */
      gs = graph_gather(g, gpair, rowlist, NULL); /* [rs, 2] */
      slot = graph_gather(g, nid, rowlist, NULL); /* [rs] */
    }
    graph_shape rf = GRAPH_SHAPE(GDT_S32, rs, f);
    int idx = graph_convert(g, xs, GDT_S32);
    int feat = fam_with_const(g, GOP_MUL, graph_iota(g, GRAPH_SHAPE(GDT_S32, f))); /* f*B */
    idx = graph_binary(g, GOP_ADD, idx, graph_broadcast(g, feat, rf, graph_dims_of(1, 1)));
    if (slot >= 0) {
      int base = fam_with_const(g, GOP_MUL, slot); /* node*F*B */
      idx = graph_binary(g, GOP_ADD, idx, graph_broadcast(g, base, rf, graph_dims_of(1, 0)));
    }
    int upd = graph_broadcast(g, gs, GRAPH_SHAPE(m.dt, rs, f, 2), graph_dims_of(2, 0, 2));
    int zero = graph_constant(g, GRAPH_SHAPE(m.dt, built_nodes, f, nb, 2));
    int built = graph_scatter(g, zero, idx, upd);
    hist = d == 0 ? built : level_hists(g, &m, hist, built, built_nodes);

    graph_set_scope(g, scope(sc, sizeof sc, d, "split"));
    int split = find_splits(g, &m, hist, n);

    graph_set_scope(g, scope(sc, sizeof sc, d, "partition"));
    int row_split = graph_gather(g, split, nid, NULL); /* [R] */
    graph_shape col = GRAPH_SHAPE(bin_dt, r);
    int xv = graph_gather(g, x, row_split, &col); /* the row's bin of that feature */
    int right = graph_binary(g, GOP_COMPARE, graph_convert(g, xv, GDT_S32), row_split);
    nid =
        graph_binary(g, GOP_ADD, fam_with_const(g, GOP_MUL, nid), graph_convert(g, right, GDT_S32));
    if (d + 1 < depth) {
      int64_t next = (r + 1) / 2;
      rowlist = graph_custom(g, "row-partition", GRAPH_SHAPE(GDT_S32, next), &nid, 1, (double)r, 0,
                             4.0 * (double)(r + next));
    }
  }
  graph_set_layer(g, -1);

  graph_set_scope(g, "leaves");
  int64_t leaves = 1LL << depth;
  int sums = graph_scatter(g, graph_constant(g, GRAPH_SHAPE(m.dt, leaves, 2)), nid, gpair);
  int gsum = channel(g, sums, 0), hsum = channel(g, sums, 1);
  int w = wl_scale(
      g, graph_unary(g, GOP_NEG, graph_binary(g, GOP_DIV, gsum, fam_with_const(g, GOP_ADD, hsum))));
  graph_set_scope(g, "update");
  margin = graph_binary(g, GOP_ADD, margin, graph_gather(g, w, nid, NULL));

  graph_set_scope(g, "loss");
  int loss;
  if (objective == 1) {
    graph_shape col = GRAPH_SHAPE(m.dt, r, 1);
    loss = wl_bce(g, graph_reshape(g, margin, col), graph_reshape(g, y, col));
  } else {
    int diff = graph_binary(g, GOP_SUB, margin, y);
    loss = fam_mean(g, graph_binary(g, GOP_MUL, diff, diff), graph_dims_of(1, 0));
  }
  graph_set_scope(g, "");
  if (fam_graph_check(g, j) < 0) return -1;
  info->per_step = (double)r;
  info->unit = "rows";
  info->whole_step = true;
  info->job_steps = trees; /* one boosting round a step */
  return loss;
}
