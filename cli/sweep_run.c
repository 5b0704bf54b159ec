/*
** sweep_run.c -- one point of a study (sweep.h): its hardware with the
** point's overrides, the planner run `tpusim plan` does, and its CSV and
** JSON lines in fixed formats.
*/
#include "sweep_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"
#include "../hw_models/hw_override.h"

struct sweep_worker {
  const sweep_study *s;
  hw_catalog *cat;
  model **models; /* loaded on first use */
  int planner_threads;
};

sweep_worker *sweep_worker_new(const sweep_study *s, int planner_threads) {
  sweep_worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->s = s;
  w->planner_threads = planner_threads;
  w->models = calloc((size_t)s->n_models, sizeof *w->models);
  cli_ctx c = {.n_hw_files = s->n_hw_files};
  for (int i = 0; i < s->n_hw_files && i < CLI_MAX_HW_FILES; i++) c.hw_files[i] = s->hw_files[i];
  FILE *devnull = fopen("/dev/null", "w"); /* the study's load reported any problem */
  c.err = devnull ? devnull : stderr;
  int rc = w->models ? cli_load_catalog_as(&c, "tpusim sweep", &w->cat, NULL) : CLI_BAD_INPUT;
  if (devnull) fclose(devnull);
  if (rc != CLI_OK) {
    sweep_worker_free(w);
    return NULL;
  }
  return w;
}

void sweep_worker_free(sweep_worker *w) {
  if (!w) return;
  for (int i = 0; w->models && i < w->s->n_models; i++) model_free(w->models[i]);
  free(w->models);
  hw_catalog_free(w->cat);
  free(w);
}

/* ---- the lines ---- */

/* A figure in the fixed format of both files: 9 significant digits, enough
** to tell points apart and the same bytes on every run; "" (CSV) or null
** (JSON) when there is none. */
static void put_num(FILE *f, double v, bool json) {
  if (isfinite(v)) fprintf(f, "%.9g", v);
  else if (json) fputs("null", f);
}

/* A CSV field: quoted, with "" for a quote, when it holds , " or a line
** break (RFC 4180); line breaks become spaces so a row stays one line. */
static void put_csv_str(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputs("\"\"", f);
    else fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
  }
  fputc('"', f);
}

static void put_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* What a point gives, whether it ran or not. */
typedef struct {
  bool ok;
  const char *bound;   /* ok: the largest part of the step; failed: the cause */
  char reason[1536];   /* failed: why */
  const planner_cand *best;
  double capacity_bytes;
} point_result;

static const char *const PLAN_COLS[] = {"dp", "tp", "pp", "cp", "ep", "vp", "mbs", "gbs"};
#define N_PLAN_COLS 8

static void plan_values(const plan *p, int64_t v[N_PLAN_COLS]) {
  int64_t x[N_PLAN_COLS] = {p->dp, p->tp, p->pp, p->cp > 0 ? p->cp : 1, p->ep > 0 ? p->ep : 1,
                            p->vp > 0 ? p->vp : 1, p->mbs, p->gbs};
  memcpy(v, x, sizeof x);
}

/* ZeRO as `tpusim plan` prints it: the stage, fsdp, or hsdpN. */
static void zero_str(char *buf, size_t n, const plan *p) {
  if (p->zero >= 3 && p->hsdp > 0) snprintf(buf, n, "hsdp%lld", (long long)p->hsdp);
  else if (p->zero >= 3) snprintf(buf, n, "fsdp");
  else snprintf(buf, n, "%d", p->zero);
}

char *sweep_csv_header(const sweep_study *s) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  fputs("point,model,hw", f);
  for (int k = 0; k < s->n_ov; k++) fprintf(f, ","), put_csv_str(f, s->ov_key[k]);
  fputs(",chips,status", f);
  for (int k = 0; k < N_PLAN_COLS; k++) fprintf(f, ",%s", PLAN_COLS[k]);
  fputs(",recompute,zero,step_s,train_s,train_usd,energy_j,mem_peak_bytes,mem_capacity_bytes,"
        "bound,reason\n", f);
  fclose(f);
  return buf;
}

static void csv_line(FILE *f, const sweep_study *s, int64_t i, const sweep_point *pt,
                     const point_result *r) {
  fprintf(f, "%lld,", (long long)i);
  put_csv_str(f, s->models[pt->model]);
  fputc(',', f);
  put_csv_str(f, s->hw[pt->hw]);
  for (int k = 0; k < s->n_ov; k++) fputc(',', f), put_num(f, pt->ov[k], false);
  fprintf(f, ",%lld,%s", (long long)pt->chips, r->ok ? "ok" : "failed");
  const planner_cand *b = r->best;
  int64_t v[N_PLAN_COLS];
  if (b) plan_values(&b->p, v);
  for (int k = 0; k < N_PLAN_COLS; k++)
    if (b) fprintf(f, ",%lld", (long long)v[k]);
    else fputc(',', f);
  char z[32] = "";
  if (b) zero_str(z, sizeof z, &b->p);
  char rl[96] = "";
  if (b) plan_recompute_label(&b->p, rl, sizeof rl);
  for (char *q = rl; *q; q++) *q = *q == ',' ? '+' : *q; /* one CSV cell: modules joined by + */
  fprintf(f, ",%s,%s", rl, z);
  double nums[] = {b ? b->sim.step_time_s : NAN, b ? b->train_s : NAN, b ? b->train_usd : NAN,
                   b && b->energy_j > 0 ? b->energy_j : NAN, b ? b->sim.memory.peak : NAN,
                   r->capacity_bytes};
  for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) fputc(',', f), put_num(f, nums[k], false);
  fprintf(f, ",%s,", r->bound);
  put_csv_str(f, r->reason);
  fputc('\n', f);
}

static void json_line(FILE *f, const sweep_study *s, int64_t i, const sweep_point *pt,
                      const point_result *r) {
  fprintf(f, "{\"point\":%lld,\"model\":", (long long)i);
  put_json_str(f, s->models[pt->model]);
  fputs(",\"hw\":", f);
  put_json_str(f, s->hw[pt->hw]);
  fputs(",\"overrides\":{", f);
  for (int k = 0; k < s->n_ov; k++) {
    fputs(k ? "," : "", f);
    put_json_str(f, s->ov_key[k]);
    fputc(':', f);
    put_num(f, pt->ov[k], true);
  }
  fprintf(f, "},\"chips\":%lld,\"status\":\"%s\"", (long long)pt->chips, r->ok ? "ok" : "failed");
  const planner_cand *b = r->best;
  if (b) {
    int64_t v[N_PLAN_COLS];
    plan_values(&b->p, v);
    char z[32];
    zero_str(z, sizeof z, &b->p);
    fputs(",\"plan\":{", f);
    for (int k = 0; k < N_PLAN_COLS; k++) fprintf(f, "%s\"%s\":%lld", k ? "," : "", PLAN_COLS[k], (long long)v[k]);
    char rl[96];
    fprintf(f, ",\"recompute\":\"%s\",\"zero\":\"%s\"}", plan_recompute_label(&b->p, rl, sizeof rl), z);
    const struct { const char *k; double v; } nums[] = {
        {"step_s", b->sim.step_time_s}, {"train_s", b->train_s}, {"train_usd", b->train_usd},
        {"energy_j", b->energy_j > 0 ? b->energy_j : NAN}, {"mem_peak_bytes", b->sim.memory.peak}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
      fprintf(f, ",\"%s\":", nums[k].k);
      put_num(f, nums[k].v, true);
    }
  }
  fputs(",\"mem_capacity_bytes\":", f);
  put_num(f, r->capacity_bytes, true);
  fprintf(f, ",\"bound\":\"%s\"", r->bound);
  if (!r->ok) {
    fputs(",\"reason\":", f);
    put_json_str(f, r->reason);
  }
  fputs("}\n", f);
}

/* ---- running a point ---- */

/* What the best plan's step is spent on most: the simulated breakdown's
** largest part (compute, exposed communication, the pipeline bubble, the
** input pipeline, the rest), the limit a faster chip or fabric would move. */
static const char *step_bound(const step_result *r) {
  const step_breakdown *b = &r->breakdown_s;
  const struct { const char *name; double s; } parts[] = {
      {"compute", b->compute}, {"communication", b->exposed_comm}, {"pipeline-bubble", b->pipeline_bubble},
      {"input", b->input_stall}, {"other", b->other}};
  int best = 0;
  for (int k = 1; k < 5; k++)
    if (parts[k].s > parts[best].s) best = k;
  return parts[best].name;
}

/* The model of index k, loaded on first use (the study checked it loads). */
static const model *worker_model(sweep_worker *w, int k) {
  if (!w->models[k]) {
    diag *dg = diag_new();
    w->models[k] = dg ? model_load(w->s->models[k], &(model_opts){0}, dg) : NULL;
    diag_free(dg);
  }
  return w->models[k];
}

/* The planner over the one entry at the point's chip count: what `tpusim
** plan MODEL --hw NAME --chips N` runs, with the study's objective. */
static void plan_point(sweep_worker *w, const model *m, const char *hw, int64_t chips,
                       planner_result *res, point_result *r) {
  const sweep_study *s = w->s;
  planner_req req = {.hw_list = hw, .chips = chips, .max_chips = chips, .top = s->top,
                     .threads = w->planner_threads, .tokens = s->tokens, .fix = s->fix};
  req.objective = s->has_objective ? s->objective : planner_default_objective(m);
  if (planner_run(m, w->cat, &req, res, r->reason, sizeof r->reason) == 0) {
    r->ok = true;
    r->best = &res->best;
    r->bound = step_bound(&res->best.sim);
    r->reason[0] = 0;
  } else {
    r->bound = res->n_rejected > 0 ? planner_cause_name(res->rejected[0].cause) : "error";
  }
}

int sweep_worker_run(sweep_worker *w, int64_t i, char **csv, char **json) {
  const sweep_study *s = w->s;
  sweep_point pt;
  sweep_point_at(s, i, &pt);
  hw_model *hm = hw_catalog_find_mut(w->cat, s->hw[pt.hw]);
  hw_model saved = *hm; /* overrides change scalars only: a copy restores them */
  point_result r = {.bound = "override"};
  planner_result res = {0};
  bool applied = true;
  for (int k = 0; k < s->n_ov && applied; k++)
    if (!isnan(pt.ov[k]) && hw_override(hm, s->ov_key[k], pt.ov[k], r.reason, sizeof r.reason) != 0)
      applied = false;
  r.capacity_bytes = (double)hm->chip.hbm_bytes;
  const model *m = applied ? worker_model(w, pt.model) : NULL;
  if (applied && !m) {
    snprintf(r.reason, sizeof r.reason, "model '%s' did not load (out of memory?)", s->models[pt.model]);
    r.bound = "error";
  }
  if (m) plan_point(w, m, s->hw[pt.hw], pt.chips, &res, &r);
  size_t n1 = 0, n2 = 0;
  *csv = *json = NULL;
  FILE *f1 = open_memstream(csv, &n1), *f2 = f1 ? open_memstream(json, &n2) : NULL;
  if (f1) csv_line(f1, s, i, &pt, &r);
  if (f2) json_line(f2, s, i, &pt, &r);
  int rc = f1 && f2 ? 0 : -1;
  if (f1) rc |= fclose(f1) != 0 ? -1 : 0;
  if (f2) rc |= fclose(f2) != 0 ? -1 : 0;
  planner_result_free(&res);
  *hm = saved;
  if (rc != 0) {
    free(*csv), free(*json);
    *csv = *json = NULL;
  }
  return rc;
}
