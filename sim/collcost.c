/*
** collcost.c -- a collective's time for the step model (coll.h:
** coll_time_s and its memo): the network built for the group, the
** collective simulated or only its closed form. Apart from coll.c, which
** is the collectives themselves, so the step's callers see one function;
** and all-to-all's busiest-link bound, a closed form of the network alone.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

/* coll_time_s, the group's parts of a slice's platform shape (a whole
** machine) or any shape that fits (spread: a group inside a larger one) */
static double time_on(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op, double bytes,
                      int64_t slices, bool spread, int64_t reducers, coll_algo algo, bool formula,
                      char *err, size_t errn) {
  if (chips < 2 || bytes <= 0) return 0;
  hw_model h = *hw;
  if (per_node > 0) h.chips_per_node = per_node;
  net *n = slices <= 1 ? net_build_group(&h, chips, err, errn)
           : spread    ? net_build_spread(&h, chips, slices, err, errn)
                       : net_build(&h, chips, slices, err, errn);
  if (!n) return -1;
  coll_req r = {.op = op, .bytes = bytes, .axis = -1, .reducers = reducers,
                .algo = reducers ? COLL_REDUCTION_SERVER : algo, .formula_only = formula};
  coll_result out;
  int rc = coll_run(n, &r, &out, err, errn);
  net_free(n);
  return rc == 0 ? out.time_s : -1;
}

double coll_time_s(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op, double bytes,
                   int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                   size_t errn) {
  return time_on(hw, chips, per_node, op, bytes, slices, false, reducers, algo, formula, err, errn);
}

double coll_group_time_s(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op,
                         double bytes, int64_t slices, coll_algo algo, bool formula, char *err,
                         size_t errn) {
  return time_on(hw, chips, per_node, op, bytes, slices, true, 0, algo, formula, err, errn);
}

double coll_time_shaped_s(const hw_model *hw, int64_t chips, int64_t slices,
                          const int64_t shape[3], coll_op op, double bytes, coll_algo algo,
                          bool formula, char *err, size_t errn) {
  if (chips < 2 || bytes <= 0) return 0;
  net *n = net_build_shaped(hw, chips, slices, shape, true, err, errn);
  if (!n) return -1;
  coll_req r = {.op = op, .bytes = bytes, .axis = -1, .algo = algo, .formula_only = formula};
  coll_result out;
  int rc = coll_run(n, &r, &out, err, errn);
  net_free(n);
  return rc == 0 ? out.time_s : -1;
}

int coll_best_shape(const hw_model *hw, int64_t chips, int64_t slices, double bytes,
                    coll_algo algo, int64_t shape[3], double *time_s) {
  int64_t per = slices > 0 && chips % slices == 0 ? chips / slices : 0;
  int64_t offered[COLL_MAX_SHAPES][3];
  int k = net_offered_shapes(hw, per, offered, COLL_MAX_SHAPES), best = -1;
  double best_s = INFINITY;
  for (int i = 0; i < k; i++) {
    char e[256];
    double t = coll_time_shaped_s(hw, chips, slices, offered[i], COLL_ALL_REDUCE, bytes, algo,
                                  true, e, sizeof e);
    if (t >= 0 && t < best_s) best_s = t, best = i; /* ties: the most cubic, listed first */
  }
  if (best < 0) return 0;
  memcpy(shape, offered[best], sizeof offered[best]);
  if (time_s) *time_s = best_s;
  return k;
}

typedef struct {
  int64_t chips, per_node, slices, reducers;
  double bytes;
  int op, algo;
  bool formula, spread;
  double time_s;
} memo_entry;

struct coll_memo {
  const hw_model *hw;
  memo_entry *v;
  int n, cap;
};

coll_memo *coll_memo_new(const hw_model *hw) {
  coll_memo *m = calloc(1, sizeof *m);
  if (m) m->hw = hw;
  return m;
}

void coll_memo_free(coll_memo *m) {
  if (!m) return;
  free(m->v);
  free(m);
}

static double memo_time(coll_memo *m, int64_t chips, int64_t per_node, coll_op op, double bytes,
                        int64_t slices, bool spread, int64_t reducers, coll_algo algo, bool formula,
                        char *err, size_t errn) {
  memo_entry k = {chips, per_node, slices, reducers, bytes, (int)op, (int)algo, formula, spread, 0};
  /* a search asks a few dozen distinct collectives: a linear scan is enough */
  for (int i = 0; i < m->n; i++) {
    const memo_entry *e = &m->v[i];
    if (e->chips == k.chips && e->per_node == k.per_node && e->slices == k.slices &&
        e->reducers == k.reducers && e->bytes == k.bytes && e->op == k.op && e->algo == k.algo &&
        e->formula == k.formula && e->spread == k.spread)
      return e->time_s;
  }
  k.time_s = time_on(m->hw, chips, per_node, op, bytes, slices, spread, reducers, algo, formula, err,
                     errn);
  if (k.time_s < 0) return -1;
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 32;
    memo_entry *v = realloc(m->v, (size_t)cap * sizeof *v);
    if (!v) return k.time_s;
    m->v = v, m->cap = cap;
  }
  m->v[m->n++] = k;
  return k.time_s;
}

double coll_memo_time_s(coll_memo *m, int64_t chips, int64_t per_node, coll_op op, double bytes,
                        int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                        size_t errn) {
  return memo_time(m, chips, per_node, op, bytes, slices, false, reducers, algo, formula, err, errn);
}

double coll_memo_group_time_s(coll_memo *m, int64_t chips, int64_t per_node, coll_op op,
                              double bytes, int64_t slices, coll_algo algo, bool formula, char *err,
                              size_t errn) {
  return memo_time(m, chips, per_node, op, bytes, slices, true, 0, algo, formula, err, errn);
}

/* ---- all-to-all's busiest link ---- */

/* Link loads in seconds, kept as the busiest (ties: the lowest link id,
** the order a scan over every link would meet them in). */
typedef struct {
  double worst;
  int64_t link;
} busiest;

static void load(busiest *b, const net *n, int64_t link, double flows, double bytes) {
  double t = flows * bytes / net_link_bw(n, link);
  if (t > b->worst || (t == b->worst && t > 0 && link < b->link)) b->worst = t, b->link = link;
}

/* On a torus, dimension-order routing makes a link's load a product: a
** flow's hops along axis d run on one line of d (the sender's coordinates
** before d, the receiver's after), and every line of d sees the same
** pairs, each pair (i, j) of positions standing for chips/slices / L_d
** flows. So one line per axis, routed by net_path itself, gives every
** link's load: O(L^3) where routing every pair was O(chips^2). */
static void torus_lines(busiest *b, const net *n, double bytes) {
  int64_t shape[3], path[COLL_MAX_HOPS];
  bool wrap[3];
  net_shape(n, shape, wrap);
  double per = (double)net_chips_per_node(n);
  for (int d = 0; d < 3; d++) {
    int64_t L = shape[d];
    if (L < 2) continue;
    int64_t *cnt = calloc((size_t)(L * NET_SLOTS), sizeof *cnt); /* [position][slot] */
    if (!cnt) continue;
    for (int64_t i = 0; i < L; i++)
      for (int64_t j = 0; j < L; j++) {
        int64_t a[3] = {0, 0, 0}, z[3] = {0, 0, 0};
        a[d] = i, z[d] = j;
        int k = net_path(n, net_chip_at(n, 0, a), net_chip_at(n, 0, z), path, COLL_MAX_HOPS);
        for (int h = 0; h < k; h++) {
          int64_t c[3];
          net_coord(n, path[h] / NET_SLOTS, c);
          cnt[c[d] * NET_SLOTS + path[h] % NET_SLOTS]++;
        }
      }
    for (int64_t i = 0; i < L; i++)
      for (int sl = 0; sl < NET_SLOTS; sl++) {
        if (!cnt[i * NET_SLOTS + sl]) continue;
        int64_t c[3] = {0, 0, 0};
        c[d] = i;
        load(b, n, net_chip_at(n, 0, c) * NET_SLOTS + sl, (double)cnt[i * NET_SLOTS + sl] * per / (double)L,
             bytes);
      }
    free(cnt);
  }
}

/* The busiest link of an all-to-all of `bytes` per pair: the torus lines,
** then the switch and NIC links, which a chip of each node size stands for
** (every node but a partial last one has the same): inside a node (off the
** torus) m - 1 flows leave and arrive on its switch links, the n - m to
** other nodes on its NIC. */
double coll_all_to_all_bound(const net *n, double bytes, int64_t *link) {
  busiest b = {0, -1};
  int64_t chips = net_chips(n), per = net_chips_per_node(n);
  if (net_is_torus(n)) torus_lines(&b, n, bytes);
  int64_t last = (chips - 1) / per * per; /* the last node's first chip */
  int64_t reps[2] = {0, last};
  for (int i = 0; i < (last > 0 ? 2 : 1); i++) {
    int64_t c = reps[i], m = chips - c < per ? chips - c : per;
    if (!net_is_torus(n) && m > 1) {
      load(&b, n, c * NET_SLOTS + NET_SLOT_UP, (double)(m - 1), bytes);
      load(&b, n, c * NET_SLOTS + NET_SLOT_DOWN, (double)(m - 1), bytes);
    }
    if (chips > m) {
      load(&b, n, c * NET_SLOTS + NET_SLOT_NIC_UP, (double)(chips - m), bytes);
      load(&b, n, c * NET_SLOTS + NET_SLOT_NIC_DOWN, (double)(chips - m), bytes);
    }
  }
  *link = b.link;
  return b.worst;
}
