/*
** fixes.c -- pricing the fixes of a plan that does not fit: each fix's plan
** (sim/memory's mem_fixes) simulated for its step time, then ordered.
*/
#include <stdio.h>

#include "step_int.h"

/* Fixes that fit first, cheapest first: chip-seconds a step (a fix that
** adds chips pays for them); then the rest by peak. */
static bool fix_before(const mem_fix *a, const mem_fix *b) {
  if (a->fits != b->fits) return a->fits;
  if (a->fits && a->step_time_s > 0 && b->step_time_s > 0)
    return a->step_time_s * (double)a->p.chips < b->step_time_s * (double)b->p.chips;
  return a->peak < b->peak;
}

int step_price_fixes(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
                     size_t errn) {
  for (int i = 0; i < r->n_fixes; i++) {
    mem_fix *f = &r->fixes[i];
    plan q = f->p;
    q.ep = p->ep; /* the memory model folded ep into dp */
    q.dp = f->p.dp / (p->ep > 0 ? p->ep : 1);
    step_result s;
    char e2[256];
    f->step_time_s = 0;
    /* a fix the plan rules cannot run (e.g. more TP than heads allow) stays unpriced */
    if (plan_check(m, hw, &q, e2, sizeof e2) != 0) continue;
    if (step_simulate(m, hw, &q, NULL, &s, NULL, err, errn) != 0) return -1;
    f->step_time_s = s.step_time_s;
  }
  for (int i = 1; i < r->n_fixes; i++) /* insertion sort: stable, deterministic */
    for (int j = i; j > 0 && fix_before(&r->fixes[j], &r->fixes[j - 1]); j--) {
      mem_fix t = r->fixes[j];
      r->fixes[j] = r->fixes[j - 1];
      r->fixes[j - 1] = t;
    }
  return 0;
}

