/*
** cmd_plan.c -- `tpusim plan`: the planner's search (planner/planner.h)
** over hardware, chip counts and parallel plans, printed as the best plan,
** why, the ranked candidates and the other hardware; or as JSON.
*/
#include "cli_int.h"

#include "../sim/explain.h"
#include "../sim/framework.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "../base/units.h"
#include "../planner/planner.h"

static const char *const PLAN_FLAGS[] = {"--spot", "--exhaustive", "--pareto",
                                         "--defer-embedding-wgrad-compute", NULL};
static const char *const PLAN_VALUED[] = {"--hw",     "--chips",     "--max-chips", "--tokens",
                                          "--steps",  "--deadline",  "--budget",    "--objective",
                                          "--top",    "--preemption-rate", "--explain", "--op-costs",
                                          "--cp",     "--seq",       "--precision", "--framework",
                                          "--offload", "--fix",      "--gbs",       "--embeddings", "--set",
                                          "--finetune", "--lora-rank", "--lora-targets", "--ep-overlap",
                                          "--weight-dtype", "--vocab-tiling", "--moe-dispatcher",
                                          "--moe-imbalance", "--input", "--storage", "--prefetch",
                                          "--input-host", "--wgrad-deferral-limit",
                                          "--fp8-dot-product-attention", NULL};

/* The ranges of plan's numbers. Tokens stop at 1e18 so that the steps
** the planner derives (tokens / (gbs x seq), an int64) cannot overflow;
** 1e18 is 50,000x the largest runs published (15T tokens). */
static const num_range TOKENS = {NUM_REAL, 1, 1e18, false};
/* a cent to a trillion dollars: below a cent no bill is that small */
static const num_range BUDGET = {NUM_REAL, 0.01, 1e12, false};
static const num_range DEADLINE = {NUM_SECONDS, 0, 36500.0 * 86400, true};
/* a share of the instances: a probability */
static const num_range PREEMPTION = {NUM_REAL, 0, 1, true};
#define MAX_STEPS 1000000000000000LL /* 1e15: steps x gbs x seq stays a double's exact range */
#define MAX_TOP 16                   /* the candidates table's rows (planner_result's size) */

/* Dollars for people: three significant figures (base/units.h). */
static void usd_str(char *buf, size_t n, double usd) { units_usd(buf, n, usd); }

/* The search's progress on stderr: only on a terminal, and only once the
** search has run a second (a quick plan prints nothing extra): the phase,
** its entries done, plans scored, the best so far and the time left. */
typedef struct {
  FILE *err;
  double t0_s;
  bool shown;
  bool time_objective; /* the best key is seconds of training, else dollars */
} plan_progress;

static void plan_progress_cb(void *ctx, const planner_progress *pg) {
  plan_progress *pp = ctx;
  double t = units_now_s() - pp->t0_s;
  if (t < 1.0 && !pp->shown) return;
  int width = 20, fill = pg->total > 0 ? width * pg->done / pg->total : width;
  char bar[64], best[128] = "none yet", eta[32] = "?", n[48];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  if (isfinite(pg->best_key) && pp->time_objective) {
    char d[32];
    units_seconds(d, sizeof d, pg->best_key);
    snprintf(best, sizeof best, "%s on %s", d, pg->best_hw);
  } else if (isfinite(pg->best_key)) {
    char u[32];
    usd_str(u, sizeof u, pg->best_key);
    snprintf(best, sizeof best, "%s on %s", u, pg->best_hw);
  }
  if (pg->eta_s >= 0) snprintf(eta, sizeof eta, "%.0f s", pg->eta_s);
  if (strcmp(pg->what, "simulating") == 0) { /* the event simulation of the best few */
    fprintf(pp->err, "\r  %-10s [%s] %d/%d candidates, ETA %s%40s", pg->what, bar, pg->done,
            pg->total, eta, "");
  } else {
    units_si(n, sizeof n, (double)pg->evaluated, " plans");
    fprintf(pp->err, "\r  %-10s [%s] %d/%d hardware, %s, best %s, ETA %s   ", pg->what, bar,
            pg->done, pg->total, n, best, eta);
  }
  fflush(pp->err);
  pp->shown = true;
}

/* ZeRO as a plan states it: the stage, FSDP for ZeRO-3 over the whole
** data-parallel group, HSDP with its shard group. */
static void zero_str(char *buf, size_t n, const plan *p) {
  if (p->zero >= 3 && p->hsdp > 0) snprintf(buf, n, "hsdp%lld", (long long)p->hsdp);
  else if (p->zero >= 3) snprintf(buf, n, "fsdp");
  else snprintf(buf, n, "%d", p->zero);
}

/* The candidates table. Each column is as wide as its widest cell (the
** header's, or the default below when narrower), so that a long hardware
** name (a100-40g-aws) or a huge micro-batch (gbdt's 10000000 rows) widens
** its column instead of pushing the row's later cells out of line. */
enum { PT_COLS = 18, PT_CELL = 32 };

/* A plan's recompute for a table's column: none, selective, full, or its
** module list without the "selective:" (the column says recompute). */
static const char *rec_short(const plan *p, char *out, size_t n) {
  const char *lab = plan_recompute_label(p, out, n), *colon = strchr(lab, ':');
  return colon ? colon + 1 : lab;
}

static void plan_cells(char cells[PT_COLS][PT_CELL], int rank, const planner_cand *c) {
  static const char *const OFF[] = {"-", "act", "opt"};
  const plan *p = &c->p;
  long long ints[] = {rank, 0, (long long)p->chips, (long long)p->dp, (long long)p->tp,
                      (long long)p->pp, (long long)(p->cp > 0 ? p->cp : 1), (long long)p->vp,
                      (long long)p->ep, (long long)(p->etp > 0 ? p->etp : 1), (long long)p->mbs};
  for (int k = 0; k < 11; k++) snprintf(cells[k], PT_CELL, "%lld", ints[k]);
  snprintf(cells[1], PT_CELL, "%s", c->hw);
  /* the planner's plans name the overlap (off or on), never the default */
  if (p->ep_overlap == PLAN_EP_OVERLAP_ON) snprintf(cells[8], PT_CELL, "%lld+ov", (long long)p->ep);
  char rl[96];
  snprintf(cells[11], PT_CELL, "%s", rec_short(p, rl, sizeof rl));
  zero_str(cells[12], PT_CELL, p);
  snprintf(cells[13], PT_CELL, "%s", OFF[p->offload]);
  snprintf(cells[14], PT_CELL, "%.3f", c->sim.step_time_s);
  snprintf(cells[15], PT_CELL, "%.3f", c->analytic_step_s);
  units_seconds(cells[16], PT_CELL, c->train_s);
  usd_str(cells[17], PT_CELL, c->train_usd);
}

static void plan_table_line(FILE *f, char cells[PT_COLS][PT_CELL], const int *w) {
  /* text columns (hw, recompute, zero) left-aligned, numbers right */
  static const bool LEFT[PT_COLS] = {[1] = true, [11] = true, [12] = true};
  fprintf(f, "  %*s ", w[0], cells[0]);
  for (int k = 1; k < PT_COLS; k++)
    fprintf(f, " %*s", LEFT[k] ? -w[k] : w[k], cells[k]);
  fputc('\n', f);
}

static void print_candidates(FILE *f, const planner_result *r) {
  static const char *const HEAD[PT_COLS] = {"rank", "hw", "chips", "dp", "tp", "pp", "cp", "V",
                                            "ep", "etp", "mbs", "recompute", "zero", "off",
                                            "step(s)", "analytic", "time", "cost"};
  /* the widths the table had before it sized itself: unchanged for usual data */
  static const int MIN_W[PT_COLS] = {4, 9, 6, 4, 3, 3, 2, 2, 2, 3, 4, 9, 7, 3, 9, 9, 9, 12};
  int w[PT_COLS];
  char cells[PT_COLS][PT_CELL];
  for (int k = 0; k < PT_COLS; k++) {
    int h = (int)strlen(HEAD[k]);
    w[k] = h > MIN_W[k] ? h : MIN_W[k];
  }
  for (int i = 0; i < r->n_ranked; i++) {
    plan_cells(cells, i + 1, &r->ranked[i]);
    for (int k = 0; k < PT_COLS; k++) {
      int l = (int)strlen(cells[k]);
      if (l > w[k]) w[k] = l;
    }
  }
  fprintf(f, "\ncandidates (event-simulated, best first):\n");
  for (int k = 0; k < PT_COLS; k++) snprintf(cells[k], PT_CELL, "%s", HEAD[k]);
  plan_table_line(f, cells, w);
  for (int i = 0; i < r->n_ranked; i++) {
    plan_cells(cells, i + 1, &r->ranked[i]);
    plan_table_line(f, cells, w);
  }
}

/* The plans the search turned down, by the limit that bound: one line. */
static void print_causes(FILE *f, const planner_result *r) {
  int64_t total = 0;
  for (int k = 0; k < PLANNER_CAUSE_COUNT; k++) total += r->rejected_by[k];
  if (total == 0) return;
  fprintf(f, "  plans turned down:");
  const char *sep = " ";
  for (int k = 0; k < PLANNER_CAUSE_COUNT; k++)
    if (r->rejected_by[k]) {
      fprintf(f, "%s%lld by %s", sep, (long long)r->rejected_by[k], planner_cause_name((planner_cause)k));
      sep = ", ";
    }
  fprintf(f, "\n");
}

/* Every name in --hw LIST must be in the catalog ("all" is all of it): a
** misspelled name would otherwise shrink the search without a word. */
static int check_hw_list(cli_ctx *c, const hw_catalog *cat, const char *list) {
  if (!list || strcmp(list, "all") == 0) return CLI_OK;
  for (const char *p = list;; p++) {
    size_t k = strcspn(p, ",");
    char name[128];
    if (k == 0 || k >= sizeof name)
      return cli_usage_error(c, "--hw '%s': expected hardware names separated by commas, or all", list);
    memcpy(name, p, k);
    name[k] = 0;
    if (!hw_catalog_find(cat, name)) {
      char msg[2048];
      hw_catalog_unknown(cat, name, msg, sizeof msg);
      fprintf(c->err, "tpusim plan: --hw %s: %s\n", list, msg);
      return CLI_BAD_INPUT;
    }
    p += k;
    if (!*p) return CLI_OK;
  }
}

/* --gbs N or --gbs MIN-MAX: *lo = *hi for a fixed batch. */
static int parse_gbs(cli_ctx *c, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  const char *v = cli_opt(c, "--gbs");
  if (!v) return CLI_OK;
  const char *dash = strchr(v + (v[0] == '-' ? 1 : 0), '-');
  char a[64], e[256];
  size_t k = dash ? (size_t)(dash - v) : strlen(v);
  if (k >= sizeof a) return cli_usage_error(c, "--gbs '%s': expected N or MIN-MAX (global batches)", v);
  memcpy(a, v, k);
  a[k] = 0;
  if (num_parse_int("--gbs", a, 1, CLI_MAX_BATCH, lo, e, sizeof e) != 0 ||
      (dash && num_parse_int("--gbs", dash + 1, 1, CLI_MAX_BATCH, hi, e, sizeof e) != 0))
    return cli_usage_error(c, "%s (give N or MIN-MAX)", e);
  if (!dash) *hi = *lo;
  if (*hi < *lo) {
    snprintf(e, sizeof e, "--gbs %s: MIN is over MAX; nearest: --gbs %lld-%lld", v, (long long)*hi,
             (long long)*lo);
    return cli_usage_error(c, "%s", e);
  }
  return CLI_OK;
}

/* --fix, against the flags that say the same thing: each key's value must
** agree with them; chips and cp also become the search's (so a count that
** is not a power of two is tried). */
static int parse_fix(cli_ctx *c, planner_req *req) {
  const char *v = cli_opt(c, "--fix");
  if (!v) return CLI_OK;
  char e[512];
  if (planner_fix_parse(v, &req->fix, e, sizeof e) != 0) return cli_usage_error(c, "%s", e);
  const planner_fix *f = &req->fix;
  struct { planner_fix_key k; const char *flag; int64_t *field; } same[] = {
      {PLANNER_FIX_CHIPS, "--chips", &req->chips}, {PLANNER_FIX_CP, "--cp", &req->cp}};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    if (!(f->set & (1u << same[i].k))) continue;
    int64_t want = f->value[same[i].k];
    if (cli_opt(c, same[i].flag) && *same[i].field != want) {
      snprintf(e, sizeof e, "--fix %s=%lld and %s %lld disagree; give one", planner_fix_name(same[i].k),
               (long long)want, same[i].flag, (long long)*same[i].field);
      return cli_usage_error(c, "%s", e);
    }
    *same[i].field = want;
  }
  if ((f->set & (1u << PLANNER_FIX_CHIPS)) && cli_opt(c, "--max-chips") &&
      f->value[PLANNER_FIX_CHIPS] > req->max_chips) {
    snprintf(e, sizeof e, "--fix chips=%lld is over --max-chips %lld", (long long)f->value[PLANNER_FIX_CHIPS],
             (long long)req->max_chips);
    return cli_usage_error(c, "%s", e);
  }
  return CLI_OK;
}

/* Energy for people: kWh below a megawatt-hour, MWh above. */
static void energy_str(char *buf, size_t n, double j) {
  if (j <= 0) snprintf(buf, n, "unknown");
  else if (j < 3.6e9) snprintf(buf, n, "%.3g kWh", j / 3.6e6);
  else snprintf(buf, n, "%.3g MWh", j / 3.6e9);
}

/* The frontier as a table: each row a plan no other beats on time and price. */
static void print_pareto(FILE *f, const planner_result *r) {
  fprintf(f, "\npareto frontier (time versus cost, analytic; %d plan%s that no other beats on both):\n"
             "  hw         chips   dp  tp  pp cp  V ep  mbs recompute zero  step(s)        time         cost      energy\n",
          r->n_pareto, r->n_pareto == 1 ? "" : "s");
  for (int i = 0; i < r->n_pareto; i++) {
    char rl[96];
    const planner_cand *x = &r->pareto[i];
    char t[32], u[32], en[32];
    units_seconds(t, sizeof t, x->train_s);
    usd_str(u, sizeof u, x->train_usd);
    energy_str(en, sizeof en, x->energy_j);
    fprintf(f, "  %-9s %6lld %4lld %3lld %3lld %2lld %2lld %2lld %4lld %-9s %4d %8.3f %11s %12s %11s\n",
            x->hw, (long long)x->p.chips, (long long)x->p.dp, (long long)x->p.tp, (long long)x->p.pp,
            (long long)(x->p.cp > 0 ? x->p.cp : 1), (long long)x->p.vp, (long long)x->p.ep,
            (long long)x->p.mbs, rec_short(&x->p, rl, sizeof rl), x->p.zero,
            x->analytic_step_s > 0 ? x->analytic_step_s : x->sim.step_time_s, t,
            u, en);
  }
}

/* The frontier for --json: the fields `tpusim plot pareto` reads back. */
static cJSON *pareto_json(const planner_result *r) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < r->n_pareto; i++) {
    const planner_cand *x = &r->pareto[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hw", x->hw);
    const struct { const char *k; double v; } nums[] = {
        {"chips", (double)x->p.chips}, {"tp", (double)x->p.tp}, {"pp", (double)x->p.pp},
        {"dp", (double)x->p.dp}, {"cp", (double)(x->p.cp > 0 ? x->p.cp : 1)},
        {"ep", (double)(x->p.ep > 0 ? x->p.ep : 1)}, {"mbs", (double)x->p.mbs},
        {"vp", (double)(x->p.vp > 0 ? x->p.vp : 1)}, {"zero", x->p.zero}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) cJSON_AddNumberToObject(o, nums[k].k, nums[k].v);
    char rl[96];
    cJSON_AddStringToObject(o, "recompute", plan_recompute_label(&x->p, rl, sizeof rl));
    cJSON_AddNumberToObject(o, "gbs", (double)x->p.gbs);
    /* the fast path's step; the data-parallel families are simulated outright */
    cJSON_AddNumberToObject(o, "step_s", x->analytic_step_s > 0 ? x->analytic_step_s : x->sim.step_time_s);
    cJSON_AddNumberToObject(o, "train_s", x->train_s);
    cJSON_AddNumberToObject(o, "train_usd", x->train_usd);
    if (x->energy_j > 0) cJSON_AddNumberToObject(o, "energy_j", x->energy_j);
    else cJSON_AddNullToObject(o, "energy_j");
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

static int run_plan(cli_ctx *c) {
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one MODEL");
  planner_req req = {.hw_list = cli_opt(c, "--hw"), .max_chips = 1024, .top = 5};
  int64_t top = req.top, explain = 0;
  if (cli_opt_int(c, "--chips", 1, CLI_MAX_CHIPS, &req.chips) ||
      cli_opt_int(c, "--max-chips", 1, CLI_MAX_CHIPS, &req.max_chips) ||
      cli_opt_int(c, "--steps", 1, MAX_STEPS, &req.steps) ||
      cli_opt_int(c, "--top", 1, MAX_TOP, &top) || cli_opt_int(c, "--explain", 1, MAX_TOP, &explain) ||
      cli_opt_num(c, "--tokens", TOKENS, &req.tokens) ||
      cli_opt_num(c, "--budget", BUDGET, &req.budget_usd) ||
      cli_opt_num(c, "--preemption-rate", PREEMPTION, &req.preemptions_per_month))
    return CLI_USAGE;
  req.top = (int)top;
  /* one figure a question: a fixed count has no ceiling, a step count no token count */
  if (cli_opt(c, "--chips") && cli_opt(c, "--max-chips"))
    return cli_usage_error(c, "%s", "--chips N fixes the count and --max-chips bounds a search "
                                    "of it: give one of the two");
  if (cli_opt(c, "--tokens") && cli_opt(c, "--steps"))
    return cli_usage_error(c, "%s", "--tokens and --steps both size the run (steps x the global "
                                    "batch x the sequence are its tokens): give one of the two");
  int64_t gbs_lo, gbs_hi;
  if (parse_gbs(c, &gbs_lo, &gbs_hi) || parse_fix(c, &req)) return CLI_USAGE;
  req.pareto = cli_opt(c, "--pareto") != NULL;
  if (gbs_hi > gbs_lo && cli_opt(c, "--steps"))
    return cli_usage_error(c, "%s", "--gbs MIN-MAX with --steps: a step count is a different number of "
                                    "tokens at each batch; give --tokens instead");
  /* what the search keeps fixed: the flags of simulate that name a
  ** stack rather than a split (sizes are what plan chooses) */
  int prec, fw, off, emb;
  if (cli_opt_int(c, "--cp", 1, CLI_MAX_CHIPS, &req.cp) ||
      cli_opt_int(c, "--seq", 1, CLI_MAX_SEQ, &req.seq) ||
      cli_enum_opt(c, "--precision", plan_precision_names, 0, &prec) ||
      cli_enum_opt(c, "--framework", framework_names, 0, &fw) ||
      cli_enum_opt(c, "--offload", plan_offload_names, 0, &off) ||
      cli_enum_opt(c, "--embeddings", plan_embeddings_names, 0, &emb))
    return CLI_USAGE;
  static const char *const ONOFF[] = {"off", "on", NULL};
  int epo, disp;
  plan wt = {0};
  if (cli_enum_opt(c, "--ep-overlap", ONOFF, 0, &epo) || cli_weight_opts(c, &wt) != CLI_OK ||
      cli_enum_opt(c, "--moe-dispatcher", plan_moe_dispatcher_names + 1, 0, &disp) ||
      cli_opt_num(c, "--moe-imbalance", CLI_MOE_IMBALANCE, &req.moe_imbalance))
    return CLI_USAGE;
  if (cli_opt(c, "--moe-dispatcher")) req.moe_dispatcher = (plan_moe_dispatcher)(disp + 1);
  req.has_ep_overlap = cli_opt(c, "--ep-overlap") != NULL;
  req.ep_overlap = epo == 1 ? PLAN_EP_OVERLAP_ON : PLAN_EP_OVERLAP_OFF;
  req.bf16_weights = wt.bf16_weights, req.vocab_tiles = wt.vocab_tiles;
  req.defer_embedding_wgrad = wt.defer_embedding_wgrad;
  req.fp8_attention = wt.fp8_attention;
  req.wgrad_deferral_limit = wt.wgrad_deferral_limit;
  req.has_embeddings = cli_opt(c, "--embeddings") != NULL;
  req.embeddings = (plan_embeddings)emb;
  plan pp = {0};
  if (cli_opt(c, "--precision")) {
    plan_precision_parse(plan_precision_names[prec], &pp);
    if (pp.gemm == PLAN_GEMM_NATIVE)
      return cli_usage_error(c, "%s", "plan --precision takes a GEMM recipe (fp8, fp8-cs, mxfp8, "
                                      "nvfp4, int8, tf32); the compute dtype is the model file's");
    req.gemm = pp.gemm;
  }
  if (cli_input_choice(c, &req.input) != CLI_OK) return CLI_USAGE;
  req.has_framework = cli_opt(c, "--framework") != NULL;
  req.framework = fw;
  req.offload = (plan_offload)off;
  req.has_offload = cli_opt(c, "--offload") != NULL;
  req.exhaustive = cli_opt(c, "--exhaustive") != NULL;
  req.spot = cli_opt(c, "--spot") != NULL;
  if (explain > req.top)
    return cli_usage_error(c, "%s", "--explain N takes a rank of the candidates table (at most --top)");
  if (cli_opt(c, "--preemption-rate") && !req.spot)
    return cli_usage_error(c, "%s", "--preemption-rate applies to --spot plans");
  static const char *const OBJ[] = {"time", "cost", "cost-under-deadline", "energy", NULL};
  int obj, costs;
  if (cli_enum_opt(c, "--objective", OBJ, 0, &obj) || cli_enum_opt(c, "--op-costs", CLI_OP_COSTS, 0, &costs))
    return CLI_USAGE;
  req.objective = (planner_objective)obj;
  req.op_costs = (opcost_source)costs;
  if (cli_opt(c, "--deadline")) {
    if (cli_opt_num(c, "--deadline", DEADLINE, &req.deadline_s)) return CLI_USAGE;
    if (!cli_opt(c, "--objective")) req.objective = PLANNER_COST_UNDER_DEADLINE;
  }
  if (req.objective == PLANNER_COST_UNDER_DEADLINE && req.deadline_s <= 0)
    return cli_usage_error(c, "%s", "cost-under-deadline needs --deadline");
  hw_catalog *cat;
  int rc = cli_load_catalog(c, &cat, NULL);
  if (rc == CLI_OK) rc = check_hw_list(c, cat, req.hw_list);
  if (rc != CLI_OK) {
    hw_catalog_free(cat);
    return rc;
  }
  diag *dg = diag_new();
  /* a fixed --gbs is the model's batch and --seq its sequence, as
  ** simulate reads them (a model whose default is its longest context,
  ** Llama 4's 10 M tokens, is built at the sequence asked) */
  model_opts mo = {.global_batch = gbs_lo == gbs_hi ? gbs_lo : 0, .seq_len = req.seq};
  const char *sets[MODEL_MAX_SETS];
  if (cli_model_sets(c, &mo, sets) != CLI_OK ||
      cli_model_finetune(c, &mo, req.has_framework ? req.framework : -1) != CLI_OK) {
    diag_free(dg);
    hw_catalog_free(cat);
    return CLI_USAGE;
  }
  model *m = model_load(c->pos[0], &mo, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  if (!m || cli_model_flags(c, m) != CLI_OK) {
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  bool uneven = req.moe_imbalance > 1;
  if ((req.has_ep_overlap || req.moe_dispatcher || uneven) && m->info.tf.experts == 0) {
    fprintf(c->err, "tpusim plan: %s: %s has no experts, so there are no expert-parallel "
                    "all-to-alls (nearest: drop the flag)\n",
            req.has_ep_overlap ? "--ep-overlap" : req.moe_dispatcher ? "--moe-dispatcher" : "--moe-imbalance",
            m->name);
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  /* what every plan would refuse (a padded model), said once */
  char ierr[320];
  if (plan_check_moe_imbalance_model(m, req.moe_imbalance, ierr, sizeof ierr) != 0) {
    fprintf(c->err, "tpusim plan: %s\n", ierr);
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  if (req.has_embeddings && req.embeddings != PLAN_EMB_REPLICATED) {
    /* the tables sim/plan.c's check places: a data-parallel family's */
    plan_emb_tables et;
    plan_embedding_tables(m->info.tf.layers == 0 ? m->g : NULL, &et);
    if (et.tables == 0) {
      fprintf(c->err,
              "tpusim plan: --embeddings %s places embedding tables; %s has none a gather reads "
              "(a recommender such as dlrm has; nearest: --embeddings replicated, or drop the "
              "flag)\n",
              plan_embeddings_names[req.embeddings], m->name);
      model_free(m);
      hw_catalog_free(cat);
      return CLI_BAD_INPUT;
    }
  }
  if (!cli_opt(c, "--objective") && !cli_opt(c, "--deadline")) req.objective = planner_default_objective(m);
  planner_result *r = calloc(1, sizeof *r);
  char err[1024] = "";
  plan_progress pg = {.err = c->err, .t0_s = units_now_s(),
                      .time_objective = req.objective == PLANNER_TIME};
  if (isatty(fileno(c->err)) && !c->json) {
    req.progress = plan_progress_cb;
    req.progress_ctx = &pg;
  }
  int64_t gbs_chosen = 0;
  int prc = !r ? -1
            : gbs_hi > gbs_lo ? planner_run_gbs(m, cat, &req, gbs_lo, gbs_hi, r, &gbs_chosen, err, sizeof err)
                              : planner_run(m, cat, &req, r, err, sizeof err);
  if (prc == 0 && gbs_chosen > 0) {
    /* print the plan against the model at the batch chosen */
    model_opts o = {.global_batch = gbs_chosen};
    diag *dg2 = diag_new();
    model *mb = dg2 ? model_derive(m, &o, dg2) : NULL;
    diag_free(dg2);
    if (mb) model_free(m), m = mb;
  }
  if (pg.shown) fprintf(c->err, "\n");
  if (prc != 0) {
    fprintf(c->err, "tpusim plan: %s\n", r ? err : "out of memory");
    for (int i = 0; r && i < r->n_rejected; i++)
      fprintf(c->err, "  %s: %s [%s]\n", r->rejected[i].hw, r->rejected[i].reason,
              planner_cause_name(r->rejected[i].cause));
    if (r) print_causes(c->err, r);
    rc = CLI_BAD_INPUT;
  } else if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok"); /* failures print no JSON: exit 1, stderr */
    cJSON_AddStringToObject(o, "model", m->name);
    cJSON_AddStringToObject(o, "objective", r->objective);
    cJSON *best = step_json(m, hw_catalog_find(cat, r->best.hw), &r->best.p, &r->best.sim);
    cJSON_AddStringToObject(best, "why", r->why);
    if (r->advice[0]) cJSON_AddStringToObject(best, "advice", r->advice);
    cJSON_AddNumberToObject(best, "analytic_step_time_s", r->best.analytic_step_s);
    cJSON_AddNumberToObject(best, "train_days", r->best.train_s / 86400);
    cJSON_AddNumberToObject(best, "train_usd", r->best.train_usd);
    cJSON_AddNumberToObject(best, "billed_chips", (double)r->best.billed_chips);
    if (r->best.energy_j > 0) cJSON_AddNumberToObject(best, "energy_j", r->best.energy_j);
    if (req.spot) {
      cJSON *sp = cJSON_AddObjectToObject(best, "spot");
      cJSON_AddNumberToObject(sp, "checkpoint_write_s", r->best.ckpt_write_s);
      cJSON_AddNumberToObject(sp, "checkpoint_interval_s", r->best.ckpt_interval_s);
      cJSON_AddNumberToObject(sp, "expected_preemptions", r->best.preemptions);
      cJSON_AddNumberToObject(sp, "overhead", r->best.spot_overhead);
    }
    /* --explain N: candidate N's terms (sim/explain.h) beside its figures */
    const hw_model *bh = hw_catalog_find(cat, r->best.hw);
    step_explain ex;
    if (explain == 1 && bh) {
      step_explain_fill(m, bh, &r->best.p, &r->best.sim, &ex);
      cJSON_AddItemToObject(best, "explain", step_explain_json(&ex));
    }
    cJSON_AddItemToObject(o, "best", best);
    cJSON *cands = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 1; i < r->n_ranked; i++) {
      cJSON *x = step_json(m, hw_catalog_find(cat, r->ranked[i].hw), &r->ranked[i].p, &r->ranked[i].sim);
      cJSON_AddNumberToObject(x, "analytic_step_time_s", r->ranked[i].analytic_step_s);
      cJSON_AddNumberToObject(x, "train_days", r->ranked[i].train_s / 86400);
      cJSON_AddNumberToObject(x, "train_usd", r->ranked[i].train_usd);
      const hw_model *xh = hw_catalog_find(cat, r->ranked[i].hw);
      if (explain == i + 1 && xh) {
        step_explain_fill(m, xh, &r->ranked[i].p, &r->ranked[i].sim, &ex);
        cJSON_AddItemToObject(x, "explain", step_explain_json(&ex));
      }
      cJSON_AddItemToArray(cands, x);
    }
    cJSON *rej = cJSON_AddArrayToObject(o, "rejected");
    for (int i = 0; i < r->n_rejected; i++) {
      const planner_reject *rr = &r->rejected[i];
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "hw", rr->hw);
      cJSON_AddStringToObject(x, "reason", rr->reason);
      cJSON_AddStringToObject(x, "cause", planner_cause_name(rr->cause));
      if (rr->cause == PLANNER_CAUSE_MEMORY && rr->peak_bytes > 0) {
        cJSON_AddNumberToObject(x, "peak_bytes", rr->peak_bytes);
        cJSON_AddNumberToObject(x, "capacity_bytes", rr->capacity_bytes);
      }
      cJSON_AddItemToArray(rej, x);
    }
    cJSON *by = cJSON_AddObjectToObject(o, "rejected_plans");
    for (int k = 0; k < PLANNER_CAUSE_COUNT; k++)
      cJSON_AddNumberToObject(by, planner_cause_name((planner_cause)k), (double)r->rejected_by[k]);
    if (req.pareto) cJSON_AddItemToObject(o, "pareto", pareto_json(r));
    cJSON_AddNumberToObject(o, "evaluated", (double)r->evaluated);
    cJSON_AddNumberToObject(o, "pruned", (double)r->pruned);
    cJSON_AddNumberToObject(o, "search_s", r->search_s);
    cli_print_json(c, o);
  } else {
    const planner_cand *b = &r->best;
    char mp[32];
    units_si(mp, sizeof mp, (double)m->params, " parameters");
    fprintf(c->out, "plan for %s (%s), objective: %s\n", m->name,
            m->params > 0 ? mp : "no weight parameters", r->objective);
    char vps[48] = "", eps[160] = "", z[32], more[96] = "", note[96] = "";
    if (b->p.vp > 1) snprintf(vps, sizeof vps, " (interleaved x%lld)", (long long)b->p.vp);
    size_t k = 0;
    if (b->p.cp > 1) k += (size_t)snprintf(eps, sizeof eps, ", cp %lld", (long long)b->p.cp);
    /* the expert-parallel notes: the overlap, and uneven routing's busiest
    ** chip share, which the plan's ep may cap */
    if (framework_moe_a2a_overlap(b->p.framework, &b->p, hw_catalog_find(cat, b->hw)))
      snprintf(note, sizeof note, "all-to-alls overlapped");
    if (plan_moe_load(&b->p) > 1)
      snprintf(note + strlen(note), sizeof note - strlen(note), "%sits busiest chip %.3gx the even share",
               note[0] ? "; " : "", plan_moe_load(&b->p));
    if (b->p.ep > 1 && k < sizeof eps)
      k += (size_t)snprintf(eps + k, sizeof eps - k, ", ep %lld%s%s%s", (long long)b->p.ep,
                            note[0] ? " (" : "", note, note[0] ? ")" : "");
    if (b->p.etp > 1 && k < sizeof eps) snprintf(eps + k, sizeof eps - k, ", etp %lld", (long long)b->p.etp);
    zero_str(z, sizeof z, &b->p);
    k = 0;
    if (b->p.pp_layers) {
      int32_t lo = b->p.pp_layers[0], hi = lo;
      for (int i = 1; i < b->p.n_pp_layers; i++) {
        if (b->p.pp_layers[i] < lo) lo = b->p.pp_layers[i];
        if (b->p.pp_layers[i] > hi) hi = b->p.pp_layers[i];
      }
      k += (size_t)snprintf(more, sizeof more, ", %d to %d layers a stage", (int)lo, (int)hi);
    }
    if (b->p.offload != PLAN_OFFLOAD_NONE && k < sizeof more)
      k += (size_t)snprintf(more + k, sizeof more - k, ", %s offloaded",
                            plan_offload_names[b->p.offload]);
    /* the slice shape the planner chose among those offered (planner.c) */
    const int64_t *sh = b->p.slice_shape;
    if (sh[0] > 0 && k < sizeof more) {
      char st[64];
      hw_shape_text(sh, sh[2] == 1 ? 2 : 3, b->p.slice_twisted, st, sizeof st);
      snprintf(more + k, sizeof more - k, ", slice %s%s", st, b->p.slice_twisted ? " (twisted)" : "");
    }
    char rl[96];
    if (b->p.recompute == PLAN_RECOMPUTE_NONE) snprintf(rl, sizeof rl, "no");
    else plan_recompute_label(&b->p, rl, sizeof rl);
    fprintf(c->out, "\nbest: %lld x %s   dp %lld, tp %lld%s, pp %lld%s%s, mbs %lld, %s recompute, zero %s%s\n",
            (long long)b->p.chips, b->hw, (long long)b->p.dp, (long long)b->p.tp,
            b->p.sp ? " (sp)" : "", (long long)b->p.pp, vps, eps, (long long)b->p.mbs, rl, z, more);
    fprintf(c->out, "  step %.3f s simulated (%.3f s analytic), MFU %.1f%%, %.0f %s/s\n",
            b->sim.step_time_s, b->analytic_step_s, 100 * b->sim.mfu, b->sim.tokens_per_s,
            m->info.unit ? m->info.unit : "tokens");
    fprintf(c->out, "  memory per chip %.1f of %.1f GiB\n", b->sim.memory.peak / (1 << 30),
            b->sim.memory.capacity / (1 << 30));
    char tt[32], tu[32];
    units_seconds(tt, sizeof tt, b->train_s);
    usd_str(tu, sizeof tu, b->train_usd);
    fprintf(c->out, "  to train: %s, %s (%s, billed on %lld chip%s)\n", tt, tu,
            req.spot ? "spot" : "on demand", (long long)b->billed_chips, b->billed_chips == 1 ? "" : "s");
    if (gbs_chosen > 0) {
      double tokens = req.tokens > 0 ? req.tokens : 20.0 * (double)m->params;
      double crit = planner_critical_batch_tokens((double)m->params, tokens);
      fprintf(c->out, "  global batch %lld, chosen from %lld-%lld (batches over the critical batch, "
                      "%.3g tokens = %lld sequences, not tried)\n",
              (long long)gbs_chosen, (long long)gbs_lo, (long long)gbs_hi, crit,
              (long long)floor(crit / (double)(req.seq > 0 ? req.seq : m->train.seq_len)));
    }
    if (req.objective == PLANNER_ENERGY) {
      char en[32];
      energy_str(en, sizeof en, b->energy_j);
      fprintf(c->out, "  energy: %s (%lld chip%s at %.0f W TDP for the run; hosts and cooling not counted)\n",
              en, (long long)b->p.chips, b->p.chips == 1 ? "" : "s", hw_catalog_find(cat, b->hw)->chip.tdp_w);
    }
    if (req.spot && b->ckpt_interval_s > 0) {
      char w[32], iv[32];
      units_seconds(w, sizeof w, b->ckpt_write_s);
      units_seconds(iv, sizeof iv, b->ckpt_interval_s);
      fprintf(c->out, "  spot: checkpoint (%s to write) every %s (Young/Daly), %.1f preemptions "
                      "expected, +%.1f%% time for checkpoints and lost work\n",
              w, iv, b->preemptions, 100 * b->spot_overhead);
    }
    fprintf(c->out, "\nwhy: %s\n", r->why);
    if (r->advice[0]) fprintf(c->out, "\nadvice: %s\n", r->advice);
    print_candidates(c->out, r);
    fprintf(c->out, "\nother hardware (its best plan, analytic):\n");
    for (int i = 0; i < r->n_per_hw; i++) {
      const planner_cand *o = &r->per_hw[i];
      if (strcmp(o->hw, b->hw) == 0) continue;
      double ratio = planner_objective_key(&req, o) / planner_objective_key(&req, b);
      char ot[32], ou[32];
      units_seconds(ot, sizeof ot, o->train_s);
      usd_str(ou, sizeof ou, o->train_usd);
      fprintf(c->out, "  %-9s %lld chips, tp %lld, pp %lld: %s, %s  (%.2fx the best's %s)\n",
              o->hw, (long long)o->p.chips, (long long)o->p.tp, (long long)o->p.pp, ot, ou, ratio,
              req.objective == PLANNER_TIME ? "time" : req.objective == PLANNER_ENERGY ? "energy" : "cost");
    }
    if (explain > 0 && explain <= r->n_ranked) {
      const planner_cand *x = &r->ranked[explain - 1];
      fprintf(c->out, "\ncandidate %lld in full (%s):\n", (long long)explain,
              x->p.vp > 1 ? "interleaved 1F1B" : x->p.pp > 1 ? "1F1B" : "no pipeline");
      cli_print_step(c->out, m, hw_catalog_find(cat, x->hw), &x->p, &x->sim, true);
    } else if (explain > 0) {
      fprintf(c->out, "\n--explain %lld: the table has %d candidates\n", (long long)explain,
              r->n_ranked);
    }
    if (req.pareto) print_pareto(c->out, r);
    if (r->n_rejected) fprintf(c->out, "\nrejected:\n");
    for (int i = 0; i < r->n_rejected; i++)
      fprintf(c->out, "  %s: %s [%s]\n", r->rejected[i].hw, r->rejected[i].reason,
              planner_cause_name(r->rejected[i].cause));
    if (r->pruned)
      fprintf(c->out, "\nevaluated %lld plans in %.2f s (%lld more bounded out: they could not be among "
                      "the best; --exhaustive scores them)\n",
              (long long)r->evaluated, r->search_s, (long long)r->pruned);
    else
      fprintf(c->out, "\nevaluated %lld plans in %.2f s\n", (long long)r->evaluated, r->search_s);
    print_causes(c->out, r);
  }
  planner_result_free(r);
  free(r);
  model_free(m);
  hw_catalog_free(cat);
  return rc;
}

const cli_cmd cli_cmd_plan = {"plan",
    "tpusim plan MODEL [--hw LIST|all] [--chips N|--max-chips N] [--tokens N|--steps N]\n"
    "                  [--deadline DUR] [--budget USD]\n"
    "                  [--objective time|cost|cost-under-deadline|energy]\n"
    "                  [--fix KEY=V,...] [--gbs N|MIN-MAX] [--pareto]\n"
    "                  [--spot [--preemption-rate F]] [--top K] [--explain N] [--json]\n"
    "                  [--op-costs ir|formula] [--seq S] [--cp C]\n"
    "                  [--precision fp8|fp8-cs|mxfp8|nvfp4|int8|tf32] [--framework NAME]\n"
    "                  [--offload none|activations|optimizer] [--exhaustive]\n"
    "                  [--embeddings replicated|sharded|ps] [--set FIELD=VALUE ...]\n"
    "                  [--finetune full|lora|qlora [--lora-rank R] [--lora-targets LIST]]\n"
    "                  [--ep-overlap on|off] [--weight-dtype fp32|bf16] [--vocab-tiling N]\n"
    "                  [--moe-dispatcher alltoall|flex] [--moe-imbalance F]\n"
    "                  [--input tokens|images] [--storage shards|files] [--prefetch N]\n"
    "                  [--input-host local|remote]\n"
    "                  [--defer-embedding-wgrad-compute [--wgrad-deferral-limit N]]\n"
    "                  [--fp8-dot-product-attention on|off]\n"
    "  --objective: default time; cost for the classical families (gbdt, mlp)\n"
    "  --cp, --precision, --framework, --offload, --seq, --weight-dtype, --vocab-tiling:\n"
    "               kept fixed in the search (simulate --help)\n"
    "  --ep-overlap: fixed; by default off and on are both searched for expert-parallel\n"
    "               plans where the framework overlaps the MoE all-to-alls (Megatron-Core);\n"
    "               the table's ep column says 8+ov for a plan that overlaps them\n"
    "  --moe-dispatcher: fixed for the expert-parallel plans (simulate --help)\n"
    "  --defer-embedding-wgrad-compute: every plan with a pipeline defers the output\n"
    "               layer's weight gradients into its flush (simulate --help)\n"
    "  --fp8-dot-product-attention: fixed (default: the framework's; simulate --help)\n"
    "  --moe-imbalance F: each expert-parallel plan's busiest chip takes F times the\n"
    "               even share, or the most its ep allows (simulate --help)\n"
    "  --input, --storage, --prefetch, --input-host: the host input pipeline every\n"
    "               plan reads through (simulate --help); its stall is part of the step\n"
    "  --embeddings: where a recommender's tables live, fixed (default: each placement\n"
    "               planned, the best kept, and why said)\n"
    "               (offload is searched where the chip has a host link unless given)\n"
    "  --exhaustive: score every plan of the space; by default plans a proven\n"
    "               bound shows cannot be among the best are skipped (same best plan)\n"
    "               (as simulate reads them); the framework defaults by chip kind\n"
    "  --set FIELD=VALUE: replace a field of the model file (simulate --help)\n"
    "  --finetune: fine-tune with LoRA or QLoRA adapters (simulate --help)\n"
    "  --preemption-rate: share of spot instances reclaimed a month (default 0.2)\n"
    "  --explain N: the full breakdown of candidate N of the table (1: the best)\n"
    "  --deadline: turns down slower plans whatever the objective (alone: cost-under-deadline)\n"
    "  --objective energy: joules per run, chips x chip.tdp_w x time (hosts, cooling not counted)\n"
    "  --fix: keep only plans with these values; keys tp, pp, dp, cp, ep, etp, vp, mbs,\n"
    "         zero (0-3), recompute (none|selective|full), chips; e.g. --fix tp=8,pp=4\n"
    "  --gbs MIN-MAX: the planner chooses the global batch among MIN, MAX and the powers\n"
    "         of two between, none over the critical batch 0.292 x (6 x params x tokens)^0.3271\n"
    "         tokens (DeepSeek LLM, arXiv:2401.02954); the tokens to train stay as given\n"
    "  --pareto: also the plans no other beats on both time and cost, across hardware",
    "choose hardware, chip count and parallel plan; price it and say why", run_plan, NULL,
    PLAN_FLAGS, PLAN_VALUED, NULL};
