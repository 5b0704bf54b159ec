/*
** pareto.c -- the time-versus-cost frontier of `plan --pareto`: the plans
** that no other plan beats on both the run's time and its price. Declared
** in planner.h.
**
** The frontier is kept sorted by time, fastest first; along it each plan
** is strictly cheaper than the one before (else the faster one dominates
** it). So whether a new point joins is one binary search: the slowest
** point at or under its time must cost more than it.
*/
#include <string.h>

#include "planner_int.h"

/* The number of frontier points with train_s <= t (they come first). */
static int at_or_faster(const planner_cand *v, int n, double t) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (v[mid].train_s <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

bool planner_front_improves(const planner_cand *v, int n, double train_s, double train_usd) {
  int k = at_or_faster(v, n, train_s);
  /* v[k-1] is the cheapest of those at least as fast: it dominates the new
  ** point (or equals it) when it costs no more */
  return k == 0 || v[k - 1].train_usd > train_usd;
}

int planner_front_add(planner_cand **v, int *n, const planner_cand *c) {
  if (!planner_front_improves(*v, *n, c->train_s, c->train_usd)) return 0;
  int k = at_or_faster(*v, *n, c->train_s);
  /* a point at the same time but dearer is the one before: it goes */
  int from = k > 0 && (*v)[k - 1].train_s == c->train_s ? k - 1 : k;
  /* the slower points that cost as much or more are dominated */
  int to = k;
  while (to < *n && (*v)[to].train_usd >= c->train_usd) to++;
  int removed = to - from;
  if (removed == 0) {
    planner_cand *w = planner_grow(*v, *n, sizeof *w);
    if (!w) return -1;
    *v = w;
  }
  planner_cand *a = *v;
  /* [from, to) becomes the one new point */
  memmove(&a[from + 1], &a[to], (size_t)(*n - to) * sizeof *a);
  a[from] = *c;
  *n += 1 - removed;
  return 0;
}
