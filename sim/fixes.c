/*
** fixes.c -- pricing the fixes of a plan that does not fit: each fix's plan
** (sim/memory's mem_fixes) simulated for its step time, then ordered.
*/
#include <stdio.h>

#include "step_int.h"

bool step_fix_plan(const plan *mp, int64_t ep, plan *out) {
  int64_t cp = mp->cp > 0 ? mp->cp : 1;
  if (ep < 1 || (mp->dp * cp) % ep) return false;
  *out = *mp;
  out->ep = ep;
  out->chips = out->dp * out->tp * out->pp * cp;
  return true;
}

bool step_fix_runs(void *ctx, const plan *mp) {
  const step_fix_rules *fr = ctx;
  plan q;
  if (mp->offload != PLAN_OFFLOAD_NONE && !(fr->hw->chip.host_link_bw_bytes_per_s > 0)) return false;
  return step_fix_plan(mp, fr->ep, &q) && plan_check(fr->m, fr->hw, &q, NULL, 0) == 0;
}

/* How far a fix moves from the plan: 0 on the same chips and layout (a
** smaller micro-batch with accumulation, recompute, a ZeRO stage, sequence
** parallelism, precision), 1 the same chips re-partitioned (more tp or pp,
** less dp), 2 more chips. A user tries them in that order: the first costs
** nothing but some step time, the last a bigger bill. */
static int fix_reach(const mem_fix *f, const plan *p) {
  if (f->p.chips != p->chips) return 2;
  return f->p.tp != p->tp || f->p.pp != p->pp || f->p.cp != p->cp ? 1 : 0;
}

/* Fixes that fit first; then the nearest (fix_reach); then the fastest
** (chip-seconds a step, so a fix that adds chips pays for them); the rest
** by peak. */
static bool fix_before(const mem_fix *a, const mem_fix *b, const plan *p) {
  if (a->fits != b->fits) return a->fits;
  int ra = fix_reach(a, p), rb = fix_reach(b, p);
  if (ra != rb) return ra < rb;
  if (a->fits && a->step_time_s > 0 && b->step_time_s > 0)
    return a->step_time_s * (double)a->p.chips < b->step_time_s * (double)b->p.chips;
  return a->peak < b->peak;
}

int step_price_fixes(const model *m, const hw_model *hw, const plan *p, const input_cfg *in,
                     step_result *r, char *err, size_t errn) {
  (void)err, (void)errn; /* nothing here fails the report: an unpriced fix stays unpriced */
  for (int i = 0; i < r->n_fixes; i++) {
    mem_fix *f = &r->fixes[i];
    plan q;
    step_result s;
    char e2[256];
    f->step_time_s = 0;
    /* a fix the plan rules cannot run stays unpriced (simulate's fix search
    ** offers none: it asks step_fix_runs; a caller's own list may) */
    if (!step_fix_plan(&f->p, p->ep > 0 ? p->ep : 1, &q) || plan_check(m, hw, &q, e2, sizeof e2) != 0)
      continue;
    /* a fix the network cannot form (a TPU group of 2) stays unpriced too:
    ** the plan's own report stands */
    if (step_simulate(m, hw, &q, in, &s, NULL, e2, sizeof e2) != 0) continue;
    f->step_time_s = s.step_time_s;
  }
  for (int i = 1; i < r->n_fixes; i++) /* insertion sort: stable, deterministic */
    for (int j = i; j > 0 && fix_before(&r->fixes[j], &r->fixes[j - 1], p); j--) {
      mem_fix t = r->fixes[j];
      r->fixes[j] = r->fixes[j - 1];
      r->fixes[j - 1] = t;
    }
  return 0;
}

