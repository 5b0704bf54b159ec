/*
** cmd_calibrate.c -- `tpusim calibrate`, two modes:
**   - without --runs: time lowered kernels on this CPU, fit its model
**     (sim/calib.h) and write the hardware file 'host';
**   - --runs FILE.csv: a team's own training runs (the columns of the
**     public sets, read by runs.c as `tpusim validate` reads them) fit the
**     few physical efficiencies of one catalog entry -- matmul, attention,
**     the scale-up collective bus, and a per-step overhead -- by least
**     squares on log(simulated / measured), checked by leave-one-out, and
**     the entry is written back with those figures for --hw-file.
*/
#include "cli_int.h"
#include "runs.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "../base/strutil.h"
#include "../sim/calib.h"

/* Times kernels for a minute (--quick: seconds), so the --out path is
** checked first: a typo should not cost the whole run. */
static int run_host(cli_ctx *c) {
  if (c->n_pos > 0) return cli_usage_error(c, "unexpected argument '%s'", c->pos[0]);
  char path[4096], err[512];
  const char *out = cli_opt(c, "--out");
  if (out) {
    if (!*out) return cli_usage_error(c, "%s", "--out needs a FILE");
    str_copy(path, sizeof path, out);
  } else if (calib_default_path(path, sizeof path) != 0) {
    fprintf(c->err, "tpusim calibrate: neither XDG_CACHE_HOME nor HOME is set; give --out FILE\n");
    return CLI_BAD_INPUT;
  }
  if (calib_check_path(path, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim calibrate: %s\n", err);
    return CLI_BAD_INPUT;
  }
  calib_opts o = {.quick = cli_opt(c, "--quick") != NULL};
  calib_run *r = calib_measure(&o, err, sizeof err);
  if (!r) {
    fprintf(c->err, "tpusim calibrate: %s\n", err);
    return CLI_BAD_INPUT;
  }
  int rc = CLI_OK;
  if (calib_write_host(r, path, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim calibrate: %s\n", err);
    rc = CLI_BAD_INPUT;
  } else if (c->json) {
    char *s = calib_report_json(r);
    fprintf(c->out, "%s\n", s);
    free(s);
  } else {
    if (cli_opt(c, "--report")) calib_print_report(r, c->out);
    calib_print_summary(r, path, c->out);
  }
  calib_run_free(r);
  return rc;
}


/* ==== --runs: fitting an entry's efficiencies to a team's own runs ==== */

/* The parameters: three efficiencies of the entry and a per-step
** overhead. Each efficiency is a multiplicative fraction of a peak, so it
** is bounded as the schema bounds it (0..1; 0.05 keeps a fit away from a
** chip at 5 % of its peak, which no published kernel measures). */
enum { P_MATMUL, P_ATTN, P_COLL, P_EFFS = 3, P_OVERHEAD = P_EFFS, NPAR };
static const char *const PAR_FIELD[NPAR] = {"chip.matmul_efficiency",
                                            "chip.attention_fwd_efficiency",
                                            "system.scale_up.efficiency", "overhead_s"};
static const char *const PAR_LABEL[NPAR] = {"matmul", "attention (fwd and bwd)",
                                            "collective bus (scale-up)", "per-step overhead (s)"};
#define EFF_MIN 0.05
#define EFF_MAX 1.0
/* The surrogate's secant step: each efficiency 10 % down (up near the
** bound). Small enough that a kernel rarely changes from compute- to
** memory-bound inside it; large enough to stay far above rounding. */
#define SECANT_STEP 0.1
/* A parameter that moves no row's simulated time by more than this
** (relative) over the secant step is not determined by the rows: kept. */
#define SENSITIVITY_MIN 1e-4
#define MAX_ROUNDS 6

typedef struct {
  cli_ctx *c;
  runs_table *x;
  const hw_model *base; /* the entry as loaded (catalog, then --hw-file) */
  const char *file;     /* --runs */
  char tmp[4096];       /* the candidate hardware file of each evaluation */
  int n;                /* rows that run on the entry */
  int *row;             /* their index in x->r */
  double *measured;     /* [n] */
  double theta0[NPAR];
  bool free_par[NPAR];
  double *sur_a, *sur_b; /* the surrogate: t_i = a_i + sum_k b_ik / e_k */
  int sims;              /* rows simulated, for the report */
  char date[16];
} fitctx;

/* The entry's current value of parameter k (what timing assumes when the
** file leaves it out, as hw_load filled it in). */
static double base_value(const hw_model *m, int k) {
  switch (k) {
  case P_MATMUL: return m->chip.matmul_efficiency;
  case P_ATTN: return m->chip.attention_fwd_efficiency;
  case P_COLL: return m->scale_up.efficiency;
  default: return 0;
  }
}

static double clamp1(double v) { return v > 1 ? 1 : v; }

static void set_present(hw_model *m, const char *path) { m->present[hw_field_find(path)] = true; }
static bool is_present(const hw_model *m, const char *path) {
  return m->present[hw_field_find(path)];
}

/* The other attention kernels' figures (a framework calling an older or
** another kernel than the chip's best, sim/stepcost.c step_layer_hw):
** measured beside the forward figure, they move with it. */
static const struct {
  const char *path;
  size_t off;
} ATTN_KERNELS[] = {
    {"chip.attention_fa2_efficiency", offsetof(hw_chip, attention_fa2_efficiency)},
    {"chip.attention_fa1_efficiency", offsetof(hw_chip, attention_fa1_efficiency)},
    {"chip.attention_cudnn_fwd_efficiency", offsetof(hw_chip, attention_cudnn_fwd_efficiency)},
    {"chip.attention_cudnn_bwd_efficiency", offsetof(hw_chip, attention_cudnn_bwd_efficiency)},
};
#define N_ATTN_KERNELS (sizeof ATTN_KERNELS / sizeof *ATTN_KERNELS)

/* The entry with the efficiencies of th. The figures measured beside a
** fitted one move with it by the same factor: fp8 GEMMs with matmul, the
** backward and FlashAttention-2 kernels with the forward attention. */
static hw_model with_theta(const fitctx *f, const double *th) {
  hw_model m = *f->base; /* shallow: sources, cites, notes stay the base's */
  const hw_chip *b = &f->base->chip;
  if (f->free_par[P_MATMUL]) {
    double r = th[P_MATMUL] / b->matmul_efficiency;
    m.chip.matmul_efficiency = th[P_MATMUL];
    set_present(&m, PAR_FIELD[P_MATMUL]);
    if (is_present(f->base, "chip.fp8_matmul_efficiency"))
      m.chip.fp8_matmul_efficiency = clamp1(b->fp8_matmul_efficiency * r);
  }
  if (f->free_par[P_ATTN]) {
    double r = th[P_ATTN] / b->attention_fwd_efficiency;
    m.chip.attention_fwd_efficiency = th[P_ATTN];
    m.chip.attention_bwd_efficiency = clamp1(b->attention_bwd_efficiency * r);
    /* only a rate the entry gives: marking one present would move an
    ** unmeasured chip's attention off the tile model (sim/stepcost.c), so
    ** there the figure moves nothing and the fit keeps it */
    if (is_present(f->base, "chip.attention_fwd_efficiency")) {
      set_present(&m, "chip.attention_fwd_efficiency");
      set_present(&m, "chip.attention_bwd_efficiency");
    }
    for (size_t i = 0; i < N_ATTN_KERNELS; i++)
      if (is_present(f->base, ATTN_KERNELS[i].path)) {
        double *v = (double *)((char *)&m.chip + ATTN_KERNELS[i].off);
        *v = clamp1(*(const double *)((const char *)b + ATTN_KERNELS[i].off) * r);
      }
  }
  if (f->free_par[P_COLL]) {
    m.scale_up.efficiency = th[P_COLL];
    set_present(&m, PAR_FIELD[P_COLL]);
  }
  return m;
}

/* The fields a free parameter writes. */
static int fitted_fields(const fitctx *f, const char **out) {
  int n = 0;
  if (f->free_par[P_MATMUL]) {
    out[n++] = "chip.matmul_efficiency";
    if (is_present(f->base, "chip.fp8_matmul_efficiency")) out[n++] = "chip.fp8_matmul_efficiency";
  }
  if (f->free_par[P_ATTN]) {
    out[n++] = "chip.attention_fwd_efficiency";
    out[n++] = "chip.attention_bwd_efficiency";
    for (size_t i = 0; i < N_ATTN_KERNELS; i++)
      if (is_present(f->base, ATTN_KERNELS[i].path)) out[n++] = ATTN_KERNELS[i].path;
  }
  if (f->free_par[P_COLL]) out[n++] = "system.scale_up.efficiency";
  return n;
}

/* The hardware file of th: the entry's every other figure with its
** sources, the fitted ones cited to the runs, each with `note` after what
** it was. malloc'd text, or NULL. */
static char *theta_json(const fitctx *f, const double *th, const char *note) {
  hw_model m = with_theta(f, th);
  char *text = hw_to_json(&m);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!root) return NULL;
  cJSON_DeleteItemFromObjectCaseSensitive(root, "origin"); /* where it was read: not a field */
  cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "sources");
  cJSON *cite = cJSON_GetObjectItemCaseSensitive(root, "cite");
  cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes");
  if (!notes) notes = cJSON_AddObjectToObject(root, "notes");
  char buf[1024];
  int n_ids = 0;
  char ids[600] = "";
  for (int i = 0; i < f->n; i++)
    runs_addf(ids, sizeof ids, "%s%s", n_ids++ ? ", " : "", f->x->r[f->row[i]].w.id);
  snprintf(buf, sizeof buf,
           "tpusim calibrate --runs %s, %s: %d measured training runs (%s), simulated with "
           "--op-costs formula; efficiencies fitted by least squares on log(simulated / "
           "measured), golden-section coordinate descent (docs/simulator.md, Calibrating to "
           "your own runs)",
           f->file, f->date, f->n, ids);
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "title", buf);
  cJSON_AddStringToObject(s, "url", "https://en.wikipedia.org/wiki/Golden-section_search");
  cJSON_DeleteItemFromObjectCaseSensitive(src, "calib-runs"); /* a file fitted again */
  cJSON_AddItemToObject(src, "calib-runs", s);
  const char *fields[5 + N_ATTN_KERNELS]; /* matmul 2, attention 2, collective 1 */
  int nf = fitted_fields(f, fields);
  for (int i = 0; i < nf; i++) {
    int idx = hw_field_find(fields[i]);
    const cJSON *old_cite = cJSON_GetObjectItemCaseSensitive(cite, fields[i]);
    char was[400];
    if (f->base->present[idx]) {
      char *c = old_cite ? cJSON_PrintUnformatted(old_cite) : NULL;
      snprintf(was, sizeof was, "was %.4g (cited %s)",
               *(const double *)((const char *)f->base + hw_field_get(idx)->offset),
               c ? c : "by its section");
      free(c);
    } else {
      snprintf(was, sizeof was, "absent before (%s)", hw_field_get(idx)->absent);
    }
    snprintf(buf, sizeof buf, "fitted: %s; %s", note, was);
    cJSON_DeleteItemFromObjectCaseSensitive(cite, fields[i]);
    cJSON_AddStringToObject(cite, fields[i], "calib-runs");
    cJSON_DeleteItemFromObjectCaseSensitive(notes, fields[i]);
    cJSON_AddStringToObject(notes, fields[i], buf);
  }
  char *out = cJSON_Print(root);
  cJSON_Delete(root);
  return out;
}

static int write_text(const char *path, const char *text, char *err, size_t n) {
  FILE *fp = fopen(path, "w");
  int rc = fp && fprintf(fp, "%s\n", text) >= 0 ? 0 : -1;
  if (fp && fclose(fp) != 0) rc = -1;
  if (rc) snprintf(err, n, "cannot write '%s': %s", path, strerror(errno));
  return rc;
}

/* Simulates rows which[0..k) (indices into f->row) on the entry with th,
** --op-costs formula (the kernels' costs from the graph's formulas: equal
** to the IR's, without LLVM work), into s[]. 0, or -1 after a message. */
static int simulate_at(fitctx *f, const double *th, const int *which, int k, double *s) {
  char err[512];
  char *text = theta_json(f, th, "candidate");
  if (!text || write_text(f->tmp, text, err, sizeof err)) {
    fprintf(f->c->err, "tpusim calibrate: %s\n", text ? err : "out of memory");
    free(text);
    return -1;
  }
  free(text);
  for (int j = 0; j < k; j++) {
    runs_result *r = &f->x->r[f->row[which[j]]];
    runs_argv a = {.n = 0};
    if (runs_build_args(f->x, r, &a) == 0) {
      runs_arg(&a, "--hw-file");
      runs_arg(&a, "%s", f->tmp);
      runs_arg(&a, "--op-costs");
      runs_arg(&a, "formula");
      if (a.full) snprintf(r->msg, sizeof r->msg, "the command is too long");
      else runs_simulate(r, &a, false);
    }
    f->sims++;
    if (a.full || (r->status != RUNS_OK && r->status != RUNS_NO_FIT)) {
      fprintf(f->c->err, "tpusim calibrate: row %s does not run with the candidate hardware: %s\n",
              r->w.id, r->msg);
      return -1;
    }
    s[j] = r->simulated_s;
  }
  return 0;
}

static int simulate_all(fitctx *f, const double *th, double *s) {
  int *all = malloc((size_t)f->n * sizeof *all);
  if (!all) return -1;
  for (int i = 0; i < f->n; i++) all[i] = i;
  int rc = simulate_at(f, th, all, f->n, s);
  free(all);
  return rc;
}

/* ---- the fit on a surrogate, refreshed by simulation ---- */

/* Row i's simulated time at th by the surrogate. Where a kernel's time is
** its work at a fraction e of a peak, time is a + b / e exactly; the
** rounds rebuild the surrogate at each new point, so what is left
** (kernels that change from compute- to memory-bound, overlap) is a
** secant's error, checked against a simulation every round. */
static double sur_time(const fitctx *f, int i, const double *th) {
  double t = f->sur_a[i];
  for (int k = 0; k < P_EFFS; k++) t += f->sur_b[i * P_EFFS + k] / th[k];
  return t > 1e-12 ? t : 1e-12;
}

static double objective(const fitctx *f, const double *th, int skip) {
  double sum = 0;
  for (int i = 0; i < f->n; i++) {
    if (i == skip) continue;
    double e = log((sur_time(f, i, th) + th[P_OVERHEAD]) / f->measured[i]);
    sum += e * e;
  }
  return sum;
}

/* Golden-section search of parameter k on [lo, hi], the others held. */
static void golden(const fitctx *f, double *th, int k, double lo, double hi, int skip) {
  const double g = 0.6180339887498949; /* (sqrt 5 - 1) / 2 */
  double a = lo, b = hi, x1 = b - g * (b - a), x2 = a + g * (b - a), f1, f2;
  th[k] = x1, f1 = objective(f, th, skip);
  th[k] = x2, f2 = objective(f, th, skip);
  for (int it = 0; it < 90 && b - a > 1e-12 * (1 + fabs(b)); it++) {
    if (f1 <= f2) b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), th[k] = x1, f1 = objective(f, th, skip);
    else a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), th[k] = x2, f2 = objective(f, th, skip);
  }
  th[k] = f1 <= f2 ? x1 : x2;
  /* golden section never lands on a bound: within its precision of one,
  ** the optimum is the bound (an overhead of 0, an efficiency of 1) */
  if (th[k] - lo < 1e-9 * (hi - lo)) th[k] = lo;
  if (hi - th[k] < 1e-9 * (hi - lo)) th[k] = hi;
}

/* Coordinate descent over the free parameters on the surrogate, leaving
** out row `skip` (-1: none), until a pass gains nothing. */
static void minimise(const fitctx *f, double *th, int skip) {
  double hi_o = 0;
  for (int i = 0; i < f->n; i++) hi_o = fmax(hi_o, f->measured[i]);
  double prev = objective(f, th, skip);
  for (int pass = 0; pass < 200; pass++) {
    for (int k = 0; k < NPAR; k++)
      if (f->free_par[k])
        golden(f, th, k, k == P_OVERHEAD ? 0 : EFF_MIN, k == P_OVERHEAD ? hi_o : EFF_MAX, skip);
    double now = objective(f, th, skip);
    if (prev - now <= 1e-14 * (1 + prev)) break;
    prev = now;
  }
}

/* The surrogate at th from s0 (the rows simulated at th) and one
** simulation per free efficiency, a secant step away. Round 0 also
** decides which efficiencies the rows determine. 0 or -1. */
static int build_surrogate(fitctx *f, const double *th, const double *s0, bool decide) {
  double *s1 = malloc((size_t)f->n * sizeof *s1);
  if (!s1) return -1;
  for (int i = 0; i < f->n; i++) f->sur_a[i] = s0[i];
  for (int k = 0; k < P_EFFS; k++) {
    for (int i = 0; i < f->n; i++) f->sur_b[i * P_EFFS + k] = 0;
    if (!f->free_par[k]) continue;
    double t1[NPAR];
    memcpy(t1, th, sizeof t1);
    t1[k] = th[k] * (1 - SECANT_STEP) >= EFF_MIN ? th[k] * (1 - SECANT_STEP)
                                                 : fmin(EFF_MAX, th[k] * (1 + SECANT_STEP));
    if (simulate_all(f, t1, s1)) {
      free(s1);
      return -1;
    }
    double moved = 0;
    for (int i = 0; i < f->n; i++) {
      double b = (s1[i] - s0[i]) / (1 / t1[k] - 1 / th[k]);
      f->sur_b[i * P_EFFS + k] = b;
      f->sur_a[i] -= b / th[k];
      moved = fmax(moved, fabs(s1[i] / s0[i] - 1));
    }
    if (decide && moved <= SENSITIVITY_MIN) f->free_par[k] = false; /* b is then ~0 */
  }
  free(s1);
  return 0;
}

typedef struct {
  double theta[NPAR];
  double *before, *after, *loo; /* simulated step times [n] (after, loo: with the overhead) */
  double *loo_theta;            /* [n * NPAR] */
  double mape_before, mape_after, mape_file, mape_loo, sur_err;
  int rounds;
  bool converged;
} fitres;

static double mape(const fitctx *f, const double *s, double add) {
  double sum = 0;
  for (int i = 0; i < f->n; i++) sum += fabs((s[i] + add) / f->measured[i] - 1);
  return sum / f->n;
}

/* Rounds of: surrogate at the current point, its minimum, a simulation
** there; until the point stops moving and the surrogate matches the
** simulation. Then the overhead once more against the simulated times. */
static int fit_rounds(fitctx *f, fitres *R) {
  double th[NPAR], *s = malloc((size_t)f->n * sizeof *s);
  if (!s) return -1;
  memcpy(th, f->theta0, sizeof th);
  memcpy(s, R->before, (size_t)f->n * sizeof *s);
  for (R->rounds = 1; R->rounds <= MAX_ROUNDS; R->rounds++) {
    if (build_surrogate(f, th, s, R->rounds == 1)) goto fail;
    double nt[NPAR];
    memcpy(nt, th, sizeof nt);
    minimise(f, nt, -1);
    if (simulate_all(f, nt, s)) goto fail;
    double step = 0, err = 0;
    for (int k = 0; k < P_EFFS; k++) step = fmax(step, fabs(nt[k] / th[k] - 1));
    for (int i = 0; i < f->n; i++) err = fmax(err, fabs(sur_time(f, i, nt) / s[i] - 1));
    memcpy(th, nt, sizeof th);
    R->sur_err = err;
    if (step < 1e-3 && err < 1e-3) {
      R->converged = true;
      break;
    }
  }
  if (R->rounds > MAX_ROUNDS) R->rounds = MAX_ROUNDS;
  /* the surrogate shifted to be exact at th, where the rows were last
  ** simulated: the overhead is then fitted to the simulated times
  ** themselves, and leave-one-out starts from them */
  for (int i = 0; i < f->n; i++) f->sur_a[i] += s[i] - sur_time(f, i, th);
  if (f->free_par[P_OVERHEAD]) {
    bool keep[NPAR];
    memcpy(keep, f->free_par, sizeof keep);
    for (int k = 0; k < P_EFFS; k++) f->free_par[k] = false;
    minimise(f, th, -1);
    memcpy(f->free_par, keep, sizeof keep);
  }
  memcpy(R->theta, th, sizeof th);
  for (int i = 0; i < f->n; i++) R->after[i] = s[i] + th[P_OVERHEAD];
  R->mape_after = mape(f, s, th[P_OVERHEAD]);
  R->mape_file = mape(f, s, 0);
  free(s);
  return 0;
fail:
  free(s);
  return -1;
}

/* Leave-one-out: each row's parameters refitted without it (the other
** rows by the surrogate of the last round, exact at the fit), then the
** row simulated with them: a prediction of a run the fit did not see. */
static int leave_one_out(fitctx *f, fitres *R) {
  double sum = 0;
  for (int j = 0; j < f->n; j++) {
    double *th = &R->loo_theta[j * NPAR];
    memcpy(th, R->theta, NPAR * sizeof *th);
    minimise(f, th, j);
    double s;
    if (simulate_at(f, th, &j, 1, &s)) return -1;
    R->loo[j] = s + th[P_OVERHEAD];
    sum += fabs(R->loo[j] / f->measured[j] - 1);
  }
  R->mape_loo = sum / f->n;
  return 0;
}

/* ---- the command ---- */

/* The entry whose rows are fitted: --hw, else the one entry the rows'
** chips map to. Its name into *name (borrowed), or a usage error naming
** the entries found. */
static int pick_hw(fitctx *f, const char **name) {
  const runs_table *x = f->x;
  const char *found[64];
  int nf = 0;
  char list[1024] = "";
  for (int i = 0; i < x->n; i++) {
    runs_argv a = {.n = 0};
    runs_build_args(x, &x->r[i], &a); /* sets r->hw, through the mapping */
    int k = 0;
    while (k < nf && strcmp(found[k], x->r[i].hw) != 0) k++;
    if (k == nf && nf < 64) {
      found[nf++] = x->r[i].hw;
      runs_addf(list, sizeof list, "%s'%s' (%s)", nf > 1 ? ", " : "", x->r[i].hw, x->r[i].w.chip);
    }
  }
  const char *want = cli_opt(f->c, "--hw");
  if (!want && nf > 1) {
    fprintf(f->c->err, "tpusim calibrate: the rows of %s are on %d entries: %s; fit one with --hw "
                       "NAME (its rows alone are fitted)\n", f->file, nf, list);
    return CLI_USAGE;
  }
  if (!want) want = found[0];
  for (int k = 0; k < nf; k++)
    if (strcmp(found[k], want) == 0) return *name = found[k], CLI_OK;
  const char *near = str_suggest(want, found, nf);
  fprintf(f->c->err, "tpusim calibrate: --hw '%s': no row of %s runs on it; the rows are on %s%s%s%s\n",
          want, f->file, list, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
  return CLI_USAGE;
}

/* The rows on the entry, simulated with it as it stands: the fit's
** starting point and the "before" error. Rows that do not run are said
** and left out. 0, or -1 after a message. */
static int first_pass(fitctx *f, const char *hw, double **before) {
  runs_table *x = f->x;
  f->row = malloc((size_t)x->n * sizeof *f->row);
  f->measured = malloc((size_t)x->n * sizeof *f->measured);
  *before = malloc((size_t)x->n * sizeof **before);
  if (!f->row || !f->measured || !*before) return -1;
  for (int k = 0; k < NPAR; k++) f->free_par[k] = true;
  for (int k = 0; k < P_EFFS; k++) f->theta0[k] = base_value(f->base, k);
  f->theta0[P_OVERHEAD] = 0;
  char err[512];
  char *text = theta_json(f, f->theta0, "candidate");
  if (!text || write_text(f->tmp, text, err, sizeof err)) {
    fprintf(f->c->err, "tpusim calibrate: %s\n", text ? err : "out of memory");
    free(text);
    return -1;
  }
  free(text);
  f->n = 0;
  for (int i = 0; i < x->n; i++) {
    runs_result *r = &x->r[i];
    if (strcmp(r->hw, hw) != 0) continue;
    runs_argv a = {.n = 0};
    if (runs_build_args(x, r, &a) == 0) {
      runs_arg(&a, "--hw-file");
      runs_arg(&a, "%s", f->tmp);
      runs_arg(&a, "--op-costs");
      runs_arg(&a, "formula");
      runs_simulate(r, &a, false);
      f->sims++;
    }
    if (r->status != RUNS_OK && r->status != RUNS_NO_FIT) {
      fprintf(f->c->err, "tpusim calibrate: row %s left out (%s): %s\n", r->w.id,
              r->status == RUNS_FAILS ? "does not run" : "not expressible", r->msg);
      continue;
    }
    f->row[f->n] = i;
    f->measured[f->n] = r->w.measured_s;
    (*before)[f->n++] = r->simulated_s;
  }
  if (f->n < NPAR + 1) {
    fprintf(f->c->err,
            "tpusim calibrate: %s: %d row%s on %s run%s; fitting %d parameters needs at least %d "
            "(one more than the parameters, so leave-one-out has a fit to test)\n",
            f->file, f->n, f->n == 1 ? "" : "s", hw, f->n == 1 ? "s" : "", NPAR, NPAR + 1);
    return -1;
  }
  return 0;
}

static void print_runs_text(const fitctx *f, const fitres *R, const char *hw, const char *out) {
  FILE *o = f->c->out;
  fprintf(o, "calibrate %s from %d runs of %s (%d simulations, --op-costs formula; %d round%s%s)\n",
          hw, f->n, f->file, f->sims, R->rounds, R->rounds == 1 ? "" : "s",
          R->converged ? "" : ", not converged");
  fprintf(o, "%-26s %10s %10s\n", "parameter", "before", "fitted");
  for (int k = 0; k < NPAR; k++) {
    fprintf(o, "%-26s %10.4g %10.4g", PAR_LABEL[k], f->theta0[k], R->theta[k]);
    if (!f->free_par[k])
      fprintf(o, "  kept: no row's time moves by %g%% with it", 100 * SENSITIVITY_MIN);
    else if (k == P_OVERHEAD)
      fprintf(o, "  not in the file: add it to simulate's step time");
    fputc('\n', o);
  }
  if (f->c && cli_opt(f->c, "--report")) {
    fprintf(o, "%-16s %10s %10s %8s %10s %8s %10s %8s\n", "id", "measured", "before", "error",
            "fitted", "error", "held out", "error");
    for (int i = 0; i < f->n; i++) {
      const runs_result *r = &f->x->r[f->row[i]];
      double m = f->measured[i];
      fprintf(o, "%-16s %8.3f s %8.3f s %+7.1f%% %8.3f s %+7.1f%% %8.3f s %+7.1f%%\n", r->w.id, m,
              R->before[i], 100 * (R->before[i] / m - 1), R->after[i], 100 * (R->after[i] / m - 1),
              R->loo[i], 100 * (R->loo[i] / m - 1));
    }
  }
  fprintf(o, "MAPE before %.1f%%, fitted %.1f%% (the file alone, without the overhead: %.1f%%), "
             "leave-one-out %.1f%%\n",
          100 * R->mape_before, 100 * R->mape_after, 100 * R->mape_file, 100 * R->mape_loo);
  fprintf(o, "wrote %s; use it with --hw-file %s\n", out, out);
}

static void print_runs_json(const fitctx *f, const fitres *R, const char *hw, const char *out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "hw", hw);
  cJSON_AddStringToObject(o, "runs", f->file);
  cJSON_AddStringToObject(o, "out", out);
  cJSON_AddStringToObject(o, "op_costs", "formula");
  cJSON_AddNumberToObject(o, "simulations", f->sims);
  cJSON_AddNumberToObject(o, "rounds", R->rounds);
  cJSON_AddBoolToObject(o, "converged", R->converged);
  cJSON_AddNumberToObject(o, "surrogate_error", R->sur_err);
  cJSON *ps = cJSON_AddArrayToObject(o, "parameters");
  for (int k = 0; k < NPAR; k++) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "name", PAR_FIELD[k]);
    cJSON_AddNumberToObject(p, "before", f->theta0[k]);
    cJSON_AddNumberToObject(p, "fitted", R->theta[k]);
    cJSON_AddBoolToObject(p, "determined", f->free_par[k]);
    cJSON_AddBoolToObject(p, "in_file", k != P_OVERHEAD);
    cJSON_AddItemToArray(ps, p);
  }
  cJSON *rows = cJSON_AddArrayToObject(o, "rows");
  for (int i = 0; i < f->n; i++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", f->x->r[f->row[i]].w.id);
    cJSON_AddNumberToObject(r, "measured_step_s", f->measured[i]);
    cJSON_AddNumberToObject(r, "before_step_s", R->before[i]);
    cJSON_AddNumberToObject(r, "fitted_step_s", R->after[i]);
    cJSON_AddNumberToObject(r, "held_out_step_s", R->loo[i]);
    cJSON_AddItemToArray(rows, r);
  }
  cJSON *m = cJSON_AddObjectToObject(o, "mape");
  cJSON_AddNumberToObject(m, "before", R->mape_before);
  cJSON_AddNumberToObject(m, "fitted", R->mape_after);
  cJSON_AddNumberToObject(m, "file_alone", R->mape_file);
  cJSON_AddNumberToObject(m, "leave_one_out", R->mape_loo);
  cli_print_json(f->c, o);
}

/* --out, else the host mode's folder with the entry's name. */
static int runs_out_path(cli_ctx *c, const char *hw, char *path, size_t n) {
  const char *out = cli_opt(c, "--out");
  if (out) {
    if (!*out) return cli_usage_error(c, "%s", "--out needs a FILE");
    str_copy(path, n, out);
    return CLI_OK;
  }
  char dflt[4096];
  if (calib_default_path(dflt, sizeof dflt) != 0) {
    fprintf(c->err, "tpusim calibrate: neither XDG_CACHE_HOME nor HOME is set; give --out FILE\n");
    return CLI_BAD_INPUT;
  }
  char *slash = strrchr(dflt, '/');
  if (slash) *slash = '\0';
  if (snprintf(path, n, "%s/%s.json", dflt, hw) >= (int)n) {
    fprintf(c->err, "tpusim calibrate: the default output path is too long; give --out FILE\n");
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}

/* The note each fitted field carries: from which runs, when, the errors. */
static void fit_note(const fitctx *f, const fitres *R, char *buf, size_t n) {
  snprintf(buf, n,
           "tpusim calibrate --runs %s on %s, %d runs (source calib-runs): MAPE %.1f%% before, "
           "%.1f%% fitted (%.1f%% with this file alone), leave-one-out %.1f%%; the fit's "
           "per-step overhead of %.4g s (what the model does not see: data loading, logging, "
           "host overhead) is not a field of this schema and is not applied by --hw-file",
           f->file, f->date, f->n, 100 * R->mape_before, 100 * R->mape_after, 100 * R->mape_file,
           100 * R->mape_loo, R->theta[P_OVERHEAD]);
}

static int fit_and_write(fitctx *f, const char *hw, const char *path) {
  fitres R = {.converged = false};
  int n = f->x->n, rc = CLI_BAD_INPUT;
  R.after = calloc((size_t)n, sizeof *R.after);
  R.loo = calloc((size_t)n, sizeof *R.loo);
  R.loo_theta = calloc((size_t)n * NPAR, sizeof *R.loo_theta);
  f->sur_a = calloc((size_t)n, sizeof *f->sur_a);
  f->sur_b = calloc((size_t)n * P_EFFS, sizeof *f->sur_b);
  char err[512], note[1024];
  if (!R.after || !R.loo || !R.loo_theta || !f->sur_a || !f->sur_b) {
    fprintf(f->c->err, "tpusim calibrate: out of memory\n");
  } else if (first_pass(f, hw, &R.before) == 0) {
    R.mape_before = mape(f, R.before, 0);
    if (fit_rounds(f, &R) == 0 && leave_one_out(f, &R) == 0) {
      fit_note(f, &R, note, sizeof note);
      char *text = theta_json(f, R.theta, note);
      if (!text) fprintf(f->c->err, "tpusim calibrate: out of memory\n");
      else if (write_text(path, text, err, sizeof err))
        fprintf(f->c->err, "tpusim calibrate: %s\n", err);
      else rc = CLI_OK;
      free(text);
      if (rc == CLI_OK && f->c->json) print_runs_json(f, &R, hw, path);
      else if (rc == CLI_OK) print_runs_text(f, &R, hw, path);
    }
  }
  free(R.before);
  free(R.after);
  free(R.loo);
  free(R.loo_theta);
  return rc;
}

static int run_runs(cli_ctx *c) {
  if (c->n_pos > 0) return cli_usage_error(c, "unexpected argument '%s'", c->pos[0]);
  if (cli_opt(c, "--quick"))
    return cli_usage_error(c, "%s", "--quick times this CPU's kernels: not with --runs");
  fitctx f = {.c = c, .file = cli_opt(c, "--runs")};
  if (!*f.file) return cli_usage_error(c, "%s", "--runs needs a FILE.csv (a table of runs)");
  runs_paths paths;
  if (runs_paths_of(c, &paths) != CLI_OK) return CLI_USAGE;
  const char *mfile = paths.mapping, *models = paths.models;
  time_t now = time(NULL);
  struct tm tm;
  strftime(f.date, sizeof f.date, "%Y-%m-%d", gmtime_r(&now, &tm));
  diag *dg = diag_new();
  runs_table x;
  hw_catalog *cat = NULL;
  const char *hw = NULL;
  char path[4096], err[512];
  int rc = CLI_BAD_INPUT;
  f.x = &x;
  if (!dg) {
    fprintf(c->err, "tpusim calibrate: out of memory\n");
    return CLI_BAD_INPUT;
  }
  int bad_rows = 0;
  int open_rc = runs_open(&x, c, f.file, mfile, models, "nothing to fit", false, &bad_rows, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  if (open_rc == 0 && (rc = pick_hw(&f, &hw)) == CLI_OK &&
      (rc = cli_load_catalog_as(c, "tpusim calibrate", &cat, NULL)) == CLI_OK &&
      (rc = runs_out_path(c, hw, path, sizeof path)) == CLI_OK) {
    rc = CLI_BAD_INPUT;
    f.base = hw_catalog_find(cat, hw);
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int fd = -1;
    if (!f.base) {
      char msg[2048];
      hw_catalog_unknown(cat, hw, msg, sizeof msg);
      fprintf(c->err, "tpusim calibrate: the rows' chip maps to %s\n", msg);
    } else if (calib_check_path(path, err, sizeof err) != 0) {
      fprintf(c->err, "tpusim calibrate: %s\n", err);
    } else if (snprintf(f.tmp, sizeof f.tmp, "%s/tpusim-calib-XXXXXX", tmpdir) >=
                   (int)sizeof f.tmp ||
               (fd = mkstemp(f.tmp)) < 0) {
      fprintf(c->err, "tpusim calibrate: cannot make a temporary file in %s: %s\n", tmpdir,
              strerror(errno));
    } else {
      close(fd);
      rc = fit_and_write(&f, hw, path);
      unlink(f.tmp);
    }
  } else if (open_rc != 0) {
    rc = CLI_BAD_INPUT;
  }
  hw_catalog_free(cat);
  free(f.row);
  free(f.measured);
  free(f.sur_a);
  free(f.sur_b);
  runs_close(&x);
  return rc;
}

static int run_calibrate(cli_ctx *c) {
  if (cli_opt(c, "--runs")) return run_runs(c);
  for (const char *const *o = (const char *const[]){"--hw", "--mapping", "--models", NULL}; *o; o++)
    if (cli_opt(c, *o)) return cli_usage_error(c, "%s needs --runs FILE.csv", *o);
  return run_host(c);
}

static const char *const CALIB_FLAGS[] = {"--report", "--quick", NULL};
static const char *const CALIB_VALUED[] = {"--out", "--runs", "--hw", "--mapping", "--models",
                                           NULL};

const cli_cmd cli_cmd_calibrate = {"calibrate",
    "tpusim calibrate [--out FILE] [--report] [--json] [--quick]\n"
    "  times lowered kernels on this CPU (about a minute; --quick: seconds, fewer\n"
    "  kernels), fits its model and writes the hardware file 'host' to FILE\n"
    "  (default $XDG_CACHE_HOME/tpusim/host.json, else ~/.cache/tpusim/host.json);\n"
    "  use it with --hw-file FILE. --report: predicted against measured per kernel\n"
    "tpusim calibrate --runs FILE.csv [--hw NAME] [--out FILE] [--report] [--json]\n"
    "                 [--models DIR[:DIR...]] [--mapping FILE] [--hw-file FILE]\n"
    "  fits one hardware entry to your own training runs (the columns of\n"
    "  shared/reference/public-runs.csv, each row run as `tpusim validate` runs it,\n"
    "  with --op-costs formula): the matmul, attention (forward and backward\n"
    "  together) and scale-up collective efficiencies (0.05..1) and a per-step\n"
    "  overhead (>= 0 s), by least squares on log(simulated / measured), with\n"
    "  leave-one-out. Needs 5 rows that run. --hw NAME: the entry, when the rows\n"
    "  are on several. Prints the parameters and MAPE before, fitted and\n"
    "  leave-one-out; writes the entry with the fitted figures (the overhead is no\n"
    "  field: it is reported) to FILE (default NAME.json beside host.json).\n"
    "  --report: each row's measured, before, fitted and held-out step time",
    "fit this CPU's model ('host'), or an entry's efficiencies to your own runs (--runs)",
    run_calibrate, NULL, CALIB_FLAGS, CALIB_VALUED, NULL};
