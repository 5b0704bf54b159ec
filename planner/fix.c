/*
** fix.c -- the constraints a user puts on `tpusim plan` beyond the
** hardware and the chips: --fix key=value pins parts of the plan (the
** search keeps only plans that match), and a --gbs MIN-MAX range lets the
** planner choose the global batch under a stated convergence rule.
** Declared in planner.h.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/num.h"
#include "../base/strutil.h"
#include "planner_int.h"

/* In planner_fix_key order. */
static const char *const FIX_KEYS[PLANNER_FIX_COUNT + 1] = {
    "tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "zero", "recompute", "chips", NULL};

/* The largest size a key takes: the chips any plan may use, as the
** command line's --chips (cli_int.h's CLI_MAX_CHIPS: 10x the largest
** machines built) */
#define FIX_MAX_SIZE (1LL << 20)

const char *planner_fix_name(planner_fix_key k) {
  return k >= 0 && k < PLANNER_FIX_COUNT ? FIX_KEYS[k] : "?";
}

/* The key nearest to an unknown word: str_suggest's typo match, else the
** smallest edit distance (there is always a nearest valid choice to name). */
static const char *nearest_key(const char *word) {
  const char *s = str_suggest(word, FIX_KEYS, PLANNER_FIX_COUNT);
  if (s) return s;
  int best = -1, best_d = 1 << 30;
  for (int k = 0; k < PLANNER_FIX_COUNT; k++) {
    int d = str_distance(word, FIX_KEYS[k], 64);
    if (d < best_d) best_d = d, best = k;
  }
  return FIX_KEYS[best];
}

/* A value num_parse refused: its message ("tp 0: expected ...") restated
** as the item the user typed. */
static int bad_value(const char *key, const char *val, int col, const char *nerr, char *err, size_t errn) {
  const char *why = strstr(nerr, ": ");
  return str_errf(err, errn, "--fix %s=%s (column %d): %s", key, val, col, why ? why + 2 : nerr);
}

/* One key=value item (len bytes at item; col is its 1-based column). */
static int parse_item(const char *item, size_t len, int col, planner_fix *out, char *err, size_t errn) {
  char buf[96];
  if (len == 0) return str_errf(err, errn, "--fix: empty item at column %d; expected key=value", col);
  if (len >= sizeof buf) return str_errf(err, errn, "--fix: item at column %d is too long", col);
  memcpy(buf, item, len);
  buf[len] = 0;
  char *eq = strchr(buf, '=');
  if (!eq)
    return str_errf(err, errn, "--fix '%s' (column %d): expected key=value, such as tp=8", buf, col);
  *eq = 0;
  const char *key = buf, *val = eq + 1;
  int k = 0;
  while (k < PLANNER_FIX_COUNT && strcmp(FIX_KEYS[k], key) != 0) k++;
  if (k == PLANNER_FIX_COUNT)
    return str_errf(err, errn,
                    "--fix: unknown key '%s' (column %d); expected tp, pp, dp, cp, ep, etp, vp, "
                    "mbs, zero, recompute or chips; nearest: %s",
                    key, col, nearest_key(key));
  if (out->set & (1u << k))
    return str_errf(err, errn, "--fix: %s is given twice (column %d); give each key once", key, col);
  int64_t v;
  char nerr[256];
  if (k == PLANNER_FIX_RECOMPUTE) {
    int r = 0;
    while (plan_recompute_names[r] && strcmp(plan_recompute_names[r], val) != 0) r++;
    if (!plan_recompute_names[r]) {
      const char *s = str_suggest(val, plan_recompute_names, 3);
      return str_errf(err, errn, "--fix recompute=%s (column %d): expected none, selective or full%s%s",
                      val, col, s ? "; nearest: " : "", s ? s : "");
    }
    v = r;
  } else if (k == PLANNER_FIX_ZERO) {
    /* ZeRO stages 0..3 (Rajbhandari et al. 2020); FSDP is stage 3 */
    if (num_parse_int("zero", val, 0, 3, &v, nerr, sizeof nerr) != 0) return bad_value(key, val, col, nerr, err, errn);
  } else if (num_parse_int(key, val, 1, FIX_MAX_SIZE, &v, nerr, sizeof nerr) != 0) {
    return bad_value(key, val, col, nerr, err, errn);
  }
  out->set |= 1u << k;
  out->value[k] = v;
  return 0;
}

int planner_fix_parse(const char *text, planner_fix *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  if (!text || !*text) return str_errf(err, errn, "--fix: expected key=value[,key=value...], such as tp=8,pp=4");
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    if (parse_item(p, len, (int)(p - text) + 1, out, err, errn) != 0) {
      memset(out, 0, sizeof *out);
      return -1;
    }
    p += len;
    if (!*p) return 0;
    p++;
  }
}

void planner_fix_text(const planner_fix *f, char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = 0;
  for (int i = 0; i < PLANNER_FIX_COUNT && k < n; i++) {
    if (!(f->set & (1u << i))) continue;
    if (i == PLANNER_FIX_RECOMPUTE)
      k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", k ? "," : "", FIX_KEYS[i],
                            plan_recompute_word((plan_recompute)f->value[i]));
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%s=%lld", k ? "," : "", FIX_KEYS[i],
                            (long long)f->value[i]);
  }
}

/* A plan's value of key k; cp and etp of 0 mean none (1), as sim/plan.h says. */
static int64_t plan_value(const plan *p, int k) {
  switch (k) {
  case PLANNER_FIX_TP: return p->tp;
  case PLANNER_FIX_PP: return p->pp;
  case PLANNER_FIX_DP: return p->dp;
  case PLANNER_FIX_CP: return p->cp > 0 ? p->cp : 1;
  case PLANNER_FIX_EP: return p->ep > 0 ? p->ep : 1;
  case PLANNER_FIX_ETP: return p->etp > 0 ? p->etp : 1;
  case PLANNER_FIX_VP: return p->vp > 0 ? p->vp : 1;
  case PLANNER_FIX_MBS: return p->mbs;
  case PLANNER_FIX_ZERO: return p->zero;
  case PLANNER_FIX_RECOMPUTE: return (int64_t)p->recompute;
  default: return p->chips;
  }
}

bool planner_fix_match(const planner_fix *f, const plan *p, bool whole) {
  if (!f->set) return true;
  for (int k = 0; k < PLANNER_FIX_COUNT; k++) {
    if (!(f->set & (1u << k))) continue;
    if (!whole && (k == PLANNER_FIX_ZERO || k == PLANNER_FIX_RECOMPUTE)) continue;
    if (plan_value(p, k) != f->value[k]) return false;
  }
  return true;
}

/* ---- a global batch the planner chooses ---- */

double planner_critical_batch_tokens(double params, double tokens) {
  double c_flops = 6.0 * params * tokens; /* Kaplan et al. 2020: C = 6 N D */
  return 0.2920 * pow(c_flops, 0.3271);   /* DeepSeek LLM (arXiv:2401.02954) eq. for B_opt */
}

/* The batches a range offers: its ends and the powers of two between. */
static int range_batches(int64_t lo, int64_t hi, int64_t *out, int max) {
  int n = 0;
  out[n++] = lo;
  int64_t b = 1;
  while (b <= lo) b *= 2;
  for (; b < hi && n < max - 1; b *= 2) out[n++] = b;
  if (hi != lo) out[n++] = hi;
  return n;
}

/* Moves the run's frontier into acc's, then frees the run. */
static void merge_front(planner_result *acc, planner_result *run) {
  for (int i = 0; i < run->n_pareto; i++) planner_front_add(&acc->pareto, &acc->n_pareto, &run->pareto[i]);
  planner_result_free(run);
}

int planner_run_gbs(const model *m, const hw_catalog *cat, const planner_req *req, int64_t gbs_min,
                    int64_t gbs_max, planner_result *out, int64_t *gbs_out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  *gbs_out = 0;
  if (req->steps > 0)
    return str_errf(err, errn, "--gbs %lld-%lld with --steps: a step count means other token counts "
                    "for each batch; give --tokens instead", (long long)gbs_min, (long long)gbs_max);
  if (gbs_min < 1 || gbs_max < gbs_min)
    return str_errf(err, errn, "--gbs %lld-%lld: expected MIN-MAX with 1 <= MIN <= MAX",
                    (long long)gbs_min, (long long)gbs_max);
  int64_t seq = req->seq > 0 ? req->seq : m->train.seq_len;
  double tokens = req->tokens > 0 ? req->tokens : 20.0 * (double)m->params; /* as planner_run */
  double crit = planner_critical_batch_tokens((double)m->params, tokens);
  int64_t batches[64];
  int nb = range_batches(gbs_min, gbs_max, batches, 64);
  planner_req r = *req;
  r.tokens = tokens;
  double best_key = INFINITY;
  int tried = 0;
  char last_err[1024] = "";
  for (int i = 0; i < nb; i++) {
    if ((double)batches[i] * (double)seq > crit) continue; /* above the critical batch */
    tried++;
    model_opts o = {.global_batch = batches[i], .seq_len = seq};
    diag *dg = diag_new();
    model *mb = dg ? model_derive(m, &o, dg) : NULL;
    diag_free(dg);
    if (!mb) {
      snprintf(last_err, sizeof last_err, "cannot rebuild %s at global batch %lld", m->name,
               (long long)batches[i]);
      continue;
    }
    planner_result run;
    int rc = planner_run(mb, cat, &r, &run, last_err, sizeof last_err);
    model_free(mb);
    int64_t evaluated = out->evaluated + run.evaluated, timed = out->timed + run.timed;
    double search_s = out->search_s + run.search_s;
    if (rc == 0 && planner_objective_key(req, &run.best) < best_key) {
      best_key = planner_objective_key(req, &run.best);
      planner_result old = *out; /* keep the frontier so far, drop the rest */
      *out = run;
      run = (planner_result){.pareto = out->pareto, .n_pareto = out->n_pareto};
      out->pareto = old.pareto, out->n_pareto = old.n_pareto;
      old.pareto = NULL, old.n_pareto = 0;
      planner_result_free(&old);
      *gbs_out = batches[i];
    }
    merge_front(out, &run);
    out->evaluated = evaluated;
    out->timed = timed;
    out->search_s = search_s;
  }
  if (tried == 0) {
    int64_t most = (int64_t)floor(crit / (double)seq);
    return str_errf(err, errn,
                    "--gbs %lld-%lld: every batch is over the critical batch size, %.3g tokens "
                    "(%lld sequences of %lld) for %.3g tokens on %.3g parameters; nearest: "
                    "--gbs %lld",
                    (long long)gbs_min, (long long)gbs_max, crit, (long long)most, (long long)seq,
                    tokens, (double)m->params, (long long)(most > 0 ? most : 1));
  }
  if (*gbs_out == 0) {
    snprintf(err, errn, "%s", last_err);
    return -1;
  }
  return 0;
}

/* ---- rejections these constraints cause ---- */

planner_reject *planner_fix_reject_hw(const planner_req *req, const hw_model *hw, planner_result *out,
                                      int64_t fixed_plans) {
  if (!req->fix.set || fixed_plans == 0) return NULL;
  char f[160];
  planner_fix_text(&req->fix, f, sizeof f);
  return planner_add_reject(out, hw->name, PLANNER_CAUSE_FIXED,
                            "no plan it can run matches --fix %s (%lld plans differ from it)", f,
                            (long long)fixed_plans);
}

bool planner_energy_allowed(const planner_req *req, const hw_model *hw, planner_result *out) {
  if (req->objective != PLANNER_ENERGY || hw->chip.tdp_w > 0) return true;
  planner_add_reject(out, hw->name, PLANNER_CAUSE_REQUIRES,
                     "--objective energy needs the chip's power (chip.tdp_w), which %s's hardware "
                     "file does not give",
                     hw->name);
  return false;
}
