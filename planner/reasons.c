/*
** reasons.c -- why the planner chose and turned down what it did: the
** hardware a model may use, rejections with their causes and nearest
** misses, the closest plan when nothing is left, the ranking.
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../base/units.h"
#include "../sim/input.h"
#include "../sim/memory.h"
#include "../sim/optime.h"
#include "../sim/step.h"
#include "planner_int.h"

bool planner_listed(const char *list, const char *name) {
  if (!list || strcmp(list, "all") == 0) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, name, n) == 0) return true;
    p += k;
    if (*p == ',') p++;
  }
  return false;
}

/* Remembers the cheapest and the fastest plan that fits (first found wins
** ties, so the merge in catalog order stays deterministic). */
void planner_note_closest(planner_result *out, const planner_cand *c) {
  if (!out->any_fit || c->train_usd < out->cheapest.train_usd) out->cheapest = *c;
  if (!out->any_fit || c->train_s < out->fastest.train_s) out->fastest = *c;
  out->any_fit = true;
}

/* What came closest to a request nothing met, in a sentence. */
void planner_closest_text(const planner_result *out, const planner_req *req, char *buf, size_t n) {
  char t[32];
  if (!out->any_fit) {
    /* memory binds everywhere: the plan whose peak came nearest its HBM */
    const planner_reject *near = NULL;
    for (int i = 0; i < out->n_rejected; i++) {
      const planner_reject *r = &out->rejected[i];
      if (r->cause == PLANNER_CAUSE_MEMORY && r->has_closest &&
          (!near || r->peak_bytes / r->capacity_bytes < near->peak_bytes / near->capacity_bytes))
        near = r;
    }
    if (near) {
      const plan *p = &near->closest.p;
      char rw[96];
      snprintf(buf, n, "memory binds: the nearest plan, %lld x %s (dp %lld, tp %lld, pp %lld, "
                       "mbs %lld, %s recompute, zero %d), needs %.1f GiB per chip against %.1f GiB",
               (long long)p->chips, near->hw, (long long)p->dp, (long long)p->tp,
               (long long)p->pp, (long long)p->mbs, recompute_words(p, rw, sizeof rw), p->zero,
               near->peak_bytes / (1 << 30), near->capacity_bytes / (1 << 30));
      return;
    }
    snprintf(buf, n, "%s", out->n_rejected ? out->rejected[0].reason : "no plan fits any hardware");
    return;
  }
  if (req->budget_usd > 0 && out->cheapest.train_usd > req->budget_usd) {
    char u[32], bu[32];
    units_seconds(t, sizeof t, out->cheapest.train_s);
    units_usd(u, sizeof u, out->cheapest.train_usd);
    units_usd(bu, sizeof bu, req->budget_usd);
    snprintf(buf, n, "the cheapest plan, %lld x %s, costs %s (over the %s budget) and takes %s",
             (long long)out->cheapest.p.chips, out->cheapest.hw, u, bu, t);
    return;
  }
  char u[32];
  units_seconds(t, sizeof t, out->fastest.train_s);
  units_usd(u, sizeof u, out->fastest.train_usd);
  snprintf(buf, n, "the fastest plan, %lld x %s, takes %s for %s", (long long)out->fastest.p.chips,
           out->fastest.hw, t, u);
}

/* Room for one more in an array that grows by doubling (its capacity is
** the next power of two of its count). Returns the array, or NULL. */
void *planner_grow(void *v, int n, size_t size) {
  if (n > 0 && (n & (n - 1)) != 0) return v;
  void *w = realloc(v, (size_t)(n ? 2 * n : 1) * size);
  return w;
}

static const char *const CAUSES[PLANNER_CAUSE_COUNT] = {
    "requires", "dtype", "divisibility", "slice", "memory", "budget", "deadline", "fixed"};

const char *planner_cause_name(planner_cause c) {
  return c >= 0 && c < PLANNER_CAUSE_COUNT ? CAUSES[c] : "unknown";
}

planner_reject *planner_add_reject(planner_result *out, const char *hw, planner_cause cause,
                                  const char *fmt, ...) {
  planner_reject *v = planner_grow(out->rejected, out->n_rejected, sizeof *v);
  if (!v) return NULL; /* out of memory: the count below still says it */
  out->rejected = v;
  planner_reject *r = &v[out->n_rejected++];
  memset(r, 0, sizeof *r);
  snprintf(r->hw, sizeof r->hw, "%s", hw);
  r->cause = cause;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  return r;
}

int planner_push_cand(planner_cand **v, int *n, const planner_cand *c) {
  planner_cand *w = planner_grow(*v, *n, sizeof *w);
  if (!w) return -1;
  *v = w;
  w[(*n)++] = *c;
  return 0;
}

void planner_result_free(planner_result *r) {
  if (!r) return;
  free(r->ranked);
  free(r->rejected);
  free(r->per_hw);
  free(r->stage_splits);
  free(r->stage_split_at);
  r->stage_splits = NULL;
  r->stage_split_at = NULL;
  free(r->pareto);
  r->ranked = r->per_hw = r->pareto = NULL;
  r->n_pareto = 0;
  r->rejected = NULL;
  r->n_ranked = r->n_rejected = r->n_per_hw = 0;
}

/* The model's requirements against the chip; a rejection says why. */
/* Insertion sort of the ranked list by the objective (stable, so equal
** keys keep their search order: the output stays deterministic). */
void planner_rank(planner_result *out, const planner_req *req) {
  for (int i = 1; i < out->n_ranked; i++)
    for (int j = i; j > 0; j--) {
      planner_cand *a = &out->ranked[j - 1], *b = &out->ranked[j];
      double ka = planner_objective_key(req, a), kb = planner_objective_key(req, b);
      if (ka <= kb) break;
      planner_cand t = *a;
      *a = *b;
      *b = t;
    }
}

const char *recompute_words(const plan *p, char *buf, size_t n) {
  /* "no", "selective", "full", or Megatron-Core's modules: "selective:moe_act,layernorm" */
  return p->recompute == PLAN_RECOMPUTE_NONE ? "no" : plan_recompute_label(p, buf, n);
}

bool planner_hw_allowed(const model *m, const hw_model *hw, plan_gemm gemm, planner_result *out,
                        graph_dtype *prec) {
  char why[256];
  if (plan_hw_supports(m, hw, why, sizeof why) != 0) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES, "%s", why);
    return false;
  }
  /* --precision tf32 trains in fp32, its GEMMs on TF32 tensor cores, as
  ** simulate reads it (plan_precision_parse) */
  *prec = gemm == PLAN_GEMM_TF32 ? GDT_F32 : plan_precision_on(hw, m->train.compute);
  if (optime_peak_flops(hw, *prec) <= 0) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_DTYPE, "no %s unit", graph_dtype_name(*prec));
    return false;
  }
  /* a GEMM recipe the chip has no unit for (tf32 on a TPU, fp8 on an
  ** A100): said once for the chip, as simulate says it */
  plan q = {.gemm = gemm, .precision = *prec};
  if (gemm != PLAN_GEMM_NATIVE && !(plan_gemm_peak_flops(hw, &q) > 0)) {
    planner_add_reject(out, hw->name, PLANNER_CAUSE_DTYPE, "%s has no unit for %s GEMMs",
                       hw->name, plan_precision_label(&q));
    return false;
  }
  return true;
}

