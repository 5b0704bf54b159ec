/*
** collcost.c -- a collective's time for the step model (coll.h:
** coll_time_s and its memo): the network built for the group, the
** collective simulated or only its closed form. Apart from coll.c, which
** is the collectives themselves, so the step's callers see one function.
*/
#include <stdlib.h>

#include "coll.h"

double coll_time_s(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op, double bytes,
                   int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                   size_t errn) {
  if (chips < 2 || bytes <= 0) return 0;
  hw_model h = *hw;
  if (per_node > 0) h.chips_per_node = per_node;
  net *n = slices > 1 ? net_build(&h, chips, slices, err, errn) : net_build_group(&h, chips, err, errn);
  if (!n) return -1;
  coll_req r = {.op = op, .bytes = bytes, .axis = -1, .reducers = reducers,
                .algo = reducers ? COLL_REDUCTION_SERVER : algo, .formula_only = formula};
  coll_result out;
  int rc = coll_run(n, &r, &out, err, errn);
  net_free(n);
  return rc == 0 ? out.time_s : -1;
}

typedef struct {
  int64_t chips, per_node, slices, reducers;
  double bytes;
  int op, algo;
  bool formula;
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

double coll_memo_time_s(coll_memo *m, int64_t chips, int64_t per_node, coll_op op, double bytes,
                        int64_t slices, int64_t reducers, coll_algo algo, bool formula, char *err,
                        size_t errn) {
  memo_entry k = {chips, per_node, slices, reducers, bytes, (int)op, (int)algo, formula, 0};
  /* a search asks a few dozen distinct collectives: a linear scan is enough */
  for (int i = 0; i < m->n; i++) {
    const memo_entry *e = &m->v[i];
    if (e->chips == k.chips && e->per_node == k.per_node && e->slices == k.slices &&
        e->reducers == k.reducers && e->bytes == k.bytes && e->op == k.op && e->algo == k.algo &&
        e->formula == k.formula)
      return e->time_s;
  }
  k.time_s = coll_time_s(m->hw, chips, per_node, op, bytes, slices, reducers, algo, formula, err, errn);
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
