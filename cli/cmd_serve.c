/*
** cmd_serve.c -- `tpusim serve MODEL`: how to serve a model (planner/serve.h):
** the mode and why, the candidates as a table or --json, --explain for the
** best one's inference step; `--validate FILE` runs published serving
** measurements (tests/validation/serving-runs.csv) through the same step.
*/
#include "cli_int.h"
#include "runs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/csv.h"
#include "../base/diag.h"
#include "../base/strutil.h"
#include "../base/units.h"
#include "../planner/serve.h"
#include "../viz/plot_serve.h"
#include "../viz/trace.h"

static const char *const SERVE_FLAGS[] = {"--offline", "--explain", NULL};
static const char *const SERVE_VALUED[] = {
    "--hw",           "--qps",           "--latency-p99", "--entities",       "--batch-window",
    "--max-power",    "--precision",     "--input-tokens", "--output-tokens", "--tp",
    "--speculative",  "--spec-k",        "--spec-acceptance", "--top",        "--validate",
    "--trace",        "--tpot-max",      NULL};

/* The ranges of serve's numbers. */
static const num_range QPS = {NUM_REAL, 0, 1e9, true};           /* above 0: a rate */
static const num_range LATENCY = {NUM_SECONDS, 0, 86400, true};  /* up to a day */
static const num_range ENTITIES = {NUM_REAL, 1, 1e15, false};
static const num_range WINDOW = {NUM_SECONDS, 0, 366.0 * 86400, true};
static const num_range POWER = {NUM_REAL, 0, 1e6, true};
static const num_range ACCEPT = {NUM_REAL, 0, 1, true};
/* vLLM's benchmark_serving.py random dataset defaults: 1024 prompt tokens, 128 generated */
#define DEFAULT_INPUT_TOKENS 1024
#define DEFAULT_OUTPUT_TOKENS 128
/* Leviathan et al. 2023 (Table 3): acceptance 0.5-0.9 across their pairs;
** k = 4 is vLLM's and TensorRT-LLM's common draft length. The acceptance
** depends on the draft and the data, so it is asked for, not assumed. */
#define DEFAULT_SPEC_K 4

static void dur(char *buf, size_t n, double s) { units_seconds(buf, n, s); }

/* A latency: base/num.h's durations (s, m, h, d) and milliseconds and
** microseconds ("500ms", "800us"), the units latency targets are stated in. */
static int opt_latency(cli_ctx *c, const char *name, double *out) {
  const char *v = cli_opt(c, name);
  if (!v) return CLI_OK;
  size_t n = strlen(v);
  double scale = n > 2 && strcmp(v + n - 2, "ms") == 0 ? 1e-3 : n > 2 && strcmp(v + n - 2, "us") == 0 ? 1e-6 : 0;
  if (scale == 0) return cli_opt_num(c, name, LATENCY, out);
  char num[64], err[320];
  if (n - 2 >= sizeof num) return cli_usage_error(c, "%s: expected a duration such as 500ms", name);
  memcpy(num, v, n - 2);
  num[n - 2] = 0;
  num_range r = {NUM_REAL, 0, LATENCY.hi / scale, true};
  if (num_parse(name, num, r, out, err, sizeof err) != 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s (in %s: %s)", err, scale == 1e-3 ? "ms" : "us", v);
    return cli_usage_error(c, "%s", msg);
  }
  *out *= scale;
  return CLI_OK;
}

/* --hw LIST (commas; "all" or absent: the catalog) into hws; CLI_OK or an
** exit code after the message naming the unknown one and the nearest. */
static int hw_list(cli_ctx *c, const hw_catalog *cat, const hw_model ***hws, int *n) {
  const char *list = cli_opt(c, "--hw");
  int total = hw_catalog_count(cat);
  *hws = calloc((size_t)total + 1, sizeof **hws);
  *n = 0;
  if (!*hws) return CLI_BAD_INPUT;
  if (!list || strcmp(list, "all") == 0) {
    for (int i = 0; i < total; i++) (*hws)[(*n)++] = hw_catalog_at(cat, i);
    return CLI_OK;
  }
  for (const char *p = list;; p++) {
    size_t k = strcspn(p, ",");
    char name[128];
    if (k == 0 || k >= sizeof name)
      return cli_usage_error(c, "--hw '%s': expected hardware names separated by commas, or all", list);
    memcpy(name, p, k);
    name[k] = 0;
    const hw_model *h = hw_catalog_find(cat, name);
    if (!h) {
      char msg[2048];
      hw_catalog_unknown(cat, name, msg, sizeof msg);
      fprintf(c->err, "tpusim serve: --hw %s: %s\n", list, msg);
      return CLI_BAD_INPUT;
    }
    if (*n < total) (*hws)[(*n)++] = h;
    p += k;
    if (!*p) return CLI_OK;
  }
}

static int parse_precision(cli_ctx *c, const serve_precision **out, bool *any) {
  const char *v = cli_opt(c, "--precision");
  *any = v && strcmp(v, "any") == 0;
  *out = NULL;
  if (*any) return CLI_OK;
  if (!v) return CLI_OK; /* the planner's default for the mode */
  *out = serve_precision_find(v);
  if (*out) return CLI_OK;
  char names[128], msg[320];
  serve_precision_names(names, sizeof names);
  char near[64] = "";
  int best = 1 << 30;
  for (int i = 0; serve_precisions[i].name; i++) {
    int d = str_distance(v, serve_precisions[i].name, 99);
    if (d < best) best = d, snprintf(near, sizeof near, "%s", serve_precisions[i].name);
  }
  snprintf(msg, sizeof msg, "--precision %s: expected %s or any; the nearest is %s", v, names, near);
  return cli_usage_error(c, "%s", msg);
}

/* The request from the flags; CLI_OK or a usage code after the message. */
static int parse_req(cli_ctx *c, serve_req *q, bool *any_prec) {
  memset(q, 0, sizeof *q);
  q->input_tokens = DEFAULT_INPUT_TOKENS, q->output_tokens = DEFAULT_OUTPUT_TOKENS;
  q->spec_k = 0, q->spec_accept = 0;
  if (cli_opt_num(c, "--qps", QPS, &q->qps) || opt_latency(c, "--latency-p99", &q->latency_p99_s) ||
      opt_latency(c, "--tpot-max", &q->tpot_max_s) ||
      cli_opt_num(c, "--entities", ENTITIES, &q->entities) ||
      cli_opt_num(c, "--batch-window", WINDOW, &q->batch_window_s) ||
      cli_opt_num(c, "--max-power", POWER, &q->max_power_w) ||
      cli_opt_int(c, "--input-tokens", 1, CLI_MAX_SEQ, &q->input_tokens) ||
      cli_opt_int(c, "--output-tokens", 1, CLI_MAX_SEQ, &q->output_tokens) ||
      cli_opt_int(c, "--tp", 1, 64, &q->tp) || cli_opt_num(c, "--spec-acceptance", ACCEPT, &q->spec_accept))
    return CLI_USAGE;
  int64_t k = DEFAULT_SPEC_K;
  if (cli_opt_int(c, "--spec-k", 1, 16, &k)) return CLI_USAGE;
  q->offline = cli_opt(c, "--offline") != NULL;
  if (cli_opt(c, "--entities") && !cli_opt(c, "--batch-window"))
    return cli_usage_error(c, "%s", "--entities N needs --batch-window DUR (e.g. 24h): how often the predictions are refreshed");
  if (cli_opt(c, "--batch-window") && !cli_opt(c, "--entities"))
    return cli_usage_error(c, "%s", "--batch-window needs --entities N: the predictions made each window");
  if ((cli_opt(c, "--spec-k") || cli_opt(c, "--spec-acceptance")) && !cli_opt(c, "--speculative"))
    return cli_usage_error(c, "%s", "--spec-k and --spec-acceptance apply to --speculative DRAFT");
  if (cli_opt(c, "--speculative")) {
    if (!cli_opt(c, "--spec-acceptance"))
      return cli_usage_error(c, "%s", "--speculative needs --spec-acceptance A (0 < A <= 1), the "
                                      "share of drafted tokens the target accepts (0.5-0.9 in "
                                      "Leviathan et al. 2023)");
    q->spec_k = k;
  }
  if (cli_opt(c, "--tpot-max") && (q->offline || cli_opt(c, "--entities")))
    return cli_usage_error(c, "%s", "--tpot-max is a target of an online endpoint (--qps): it does "
                                    "not apply on the device or to batch prediction");
  if (cli_opt(c, "--entities") && cli_opt(c, "--qps"))
    return cli_usage_error(c, "%s", "--entities with --batch-window is batch prediction and --qps "
                                    "an online endpoint: give one of the two");
  if (q->offline && (cli_opt(c, "--qps") || cli_opt(c, "--entities")))
    return cli_usage_error(c, "%s", "--offline serves one user on the device: --qps and --entities do not apply");
  int rc = parse_precision(c, &q->prec, any_prec);
  q->any_precision = *any_prec;
  return rc;
}

/* ---- output ---- */

static void cand_cost(const serve_cand *k, char *buf, size_t n) {
  if (k->mode == SERVE_EDGE) snprintf(buf, n, "on device");
  else if (k->mode == SERVE_BATCH) units_usd(buf, n, k->usd_total);
  else {
    char u[32];
    units_usd(u, sizeof u, k->usd_per_hour);
    snprintf(buf, n, "%s/h", u);
  }
}

/* The latency column's name: batch prediction's time for its share of the
** entities; otherwise the p99 of the time to the first answer, queueing
** included, which is the time to first token of a generative model
** ("p99 ttft") and the whole forward of another ("p99"). */
static const char *latency_header(const serve_plan *p) {
  if (p->mode == SERVE_BATCH) return "time";
  for (int i = 0; i < p->n; i++)
    if (p->c[i].meets) return p->c[i].step.generative ? "p99 ttft" : "p99";
  return "p99";
}

static void print_table(FILE *o, const serve_plan *p, int top) {
  bool batch = p->mode == SERVE_BATCH;
  fprintf(o, "  %-4s %-14s %-8s %3s %6s %8s %10s %10s %10s %12s\n", "rank", "hw", "prec", "tp",
          "batch", "replicas", "ttft", "tpot", latency_header(p), "cost");
  int shown = 0;
  for (int i = 0; i < p->n && shown < top; i++) {
    const serve_cand *k = &p->c[i];
    if (!k->meets) continue;
    char a[32], b[32], d[32], cost[40];
    dur(a, sizeof a, k->step.ttft_s);
    if (k->step.generative) dur(b, sizeof b, k->step.tpot_s);
    else snprintf(b, sizeof b, "-");
    dur(d, sizeof d, batch ? k->total_s / (double)k->replicas : k->p99_s);
    cand_cost(k, cost, sizeof cost);
    fprintf(o, "  %-4d %-14s %-8s %3lld %6lld %8lld %10s %10s %10s %12s\n", ++shown, k->hw->name,
            k->prec->name, (long long)k->tp, (long long)k->batch, (long long)k->replicas, a, b, d, cost);
  }
  if (shown == 0) fprintf(o, "  (no candidate meets the request)\n");
  int rejected = 0;
  for (int i = 0; i < p->n; i++) rejected += !p->c[i].meets;
  if (rejected == 0) return;
  fprintf(o, "not chosen:\n");
  /* on the device, the server chips are one line: none of them is a device */
  int servers = 0;
  for (int i = 0; i < p->n; i++) {
    const serve_cand *k = &p->c[i];
    if (k->meets) continue;
    if (p->mode == SERVE_EDGE && strncmp(k->why_not, "not an on-device part", 21) == 0) {
      servers++;
      continue;
    }
    fprintf(o, "  %-14s %s: %s\n", k->hw->name, k->prec ? k->prec->name : "-", k->why_not);
  }
  if (servers)
    fprintf(o, "  %d server chip%s: not %s (kind edge, or a TDP within --max-power)\n", servers,
            servers == 1 ? "" : "s", servers == 1 ? "an on-device part" : "on-device parts");
}

static void print_explain(FILE *o, const model *m, const serve_req *q, const serve_cand *k) {
  const serve_result *r = &k->step;
  char a[32], b[32], c[64];
  fprintf(o, "\nthe best, explained (%s on %s, %s: %s):\n", m->name, k->hw->name, k->prec->name,
          k->prec->what);
  units_bytes(a, sizeof a, r->weights_bytes);
  units_bytes(b, sizeof b, r->usable_bytes);
  units_bytes(c, sizeof c, r->activation_bytes);
  fprintf(o, "  memory per chip: weights %s, activations %s, of %s usable (90%%: vLLM's "
             "gpu_memory_utilization)\n", a, c, b);
  if (r->generative) {
    units_bytes(a, sizeof a, r->kv_bytes_per_seq);
    fprintf(o, "  KV cache: %s a sequence of %lld + %lld tokens (pages of %d tokens); at most "
               "%lld sequences fit\n", a, (long long)q->input_tokens, (long long)q->output_tokens,
            SERVE_PAGE_TOKENS, (long long)r->max_batch);
    dur(a, sizeof a, r->ttft_s);
    fprintf(o, "  prefill: %lld tokens in %s (%.0f tokens/s): time to first token alone\n",
            (long long)q->input_tokens, a, r->prefill_tokens_per_s);
    dur(a, sizeof a, r->decode_step_s);
    if (k->tp > 1) {
      dur(b, sizeof b, r->tp_comm_decode_s);
      snprintf(c, sizeof c, "; all-reduces %s", b);
    } else {
      c[0] = 0;
    }
    fprintf(o, "  decode: one step of %lld sequences at context %lld takes %s (%s-bound%s)\n",
            (long long)k->batch, (long long)(q->input_tokens + q->output_tokens / 2), a,
            r->decode_bound, c);
    if (r->spec_tokens_per_step > 1)
      fprintf(o, "  speculative decoding: %.2f tokens a target step ((1 - a^(k+1)) / (1 - a), "
                 "Leviathan et al. 2023)\n", r->spec_tokens_per_step);
    dur(a, sizeof a, r->tpot_s);
    fprintf(o, "  time per output token %s; %.0f output tokens/s a replica\n", a,
            r->decode_tokens_per_s);
  } else {
    dur(a, sizeof a, r->forward_s);
    fprintf(o, "  forward of %lld samples: %s (%s-bound), %.0f samples/s a replica\n",
            (long long)k->batch, a, r->decode_bound, r->samples_per_s);
  }
  if (k->mode == SERVE_ONLINE) {
    dur(a, sizeof a, k->p50_s);
    dur(b, sizeof b, k->p99_s);
    fprintf(o, "  queue: %lld replicas x %lld slots (M/M/c, Erlang C over the simulated service "
               "time) at %.3g requests/s: p50 %s, p99 %s%s\n", (long long)k->replicas,
            (long long)k->batch, q->qps, a, b, r->generative ? " to the first token" : "");
  }
}

static cJSON *cand_json(const serve_cand *k) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mode", serve_mode_names[k->mode]);
  cJSON_AddStringToObject(o, "hw", k->hw->name);
  cJSON_AddStringToObject(o, "precision", k->prec ? k->prec->name : "");
  cJSON_AddBoolToObject(o, "meets", k->meets);
  if (!k->meets) {
    cJSON_AddStringToObject(o, "why_not", k->why_not);
    return o;
  }
  cJSON_AddNumberToObject(o, "tp", (double)k->tp);
  cJSON_AddNumberToObject(o, "batch", (double)k->batch);
  cJSON_AddNumberToObject(o, "replicas", (double)k->replicas);
  cJSON_AddNumberToObject(o, "chips", (double)k->chips);
  cJSON_AddNumberToObject(o, "ttft_s", k->step.ttft_s);
  if (k->step.generative) cJSON_AddNumberToObject(o, "tpot_s", k->step.tpot_s);
  cJSON_AddNumberToObject(o, "p50_s", k->p50_s);
  cJSON_AddNumberToObject(o, "p99_s", k->p99_s);
  cJSON_AddNumberToObject(o, "weights_bytes", k->step.weights_bytes);
  if (k->step.generative) cJSON_AddNumberToObject(o, "kv_bytes_per_seq", k->step.kv_bytes_per_seq);
  cJSON_AddNumberToObject(o, "power_w", k->power_w);
  if (k->mode == SERVE_ONLINE) cJSON_AddNumberToObject(o, "usd_per_hour", k->usd_per_hour);
  if (k->mode == SERVE_BATCH) {
    cJSON_AddNumberToObject(o, "total_s", k->total_s);
    cJSON_AddNumberToObject(o, "usd_total", k->usd_total);
  }
  return o;
}

static cJSON *plan_json(const model *m, const serve_req *q, const serve_plan *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->name);
  cJSON_AddStringToObject(o, "mode", serve_mode_names[p->mode]);
  cJSON_AddStringToObject(o, "rule", serve_rules[p->rule].when);
  cJSON_AddStringToObject(o, "reason", p->reason);
  cJSON_AddNumberToObject(o, "input_tokens", (double)q->input_tokens);
  cJSON_AddNumberToObject(o, "output_tokens", (double)q->output_tokens);
  cJSON *a = cJSON_AddArrayToObject(o, "candidates");
  for (int i = 0; i < p->n; i++) cJSON_AddItemToArray(a, cand_json(&p->c[i]));
  return o;
}

int serve_validate(cli_ctx *c, const char *path); /* cmd_serve.c, below */

/* --trace FILE: the best candidate's replicas over one request's life. */
static int write_trace(cli_ctx *c, const model *m, const serve_req *q, const serve_cand *k) {
  const char *path = cli_opt(c, "--trace");
  if (!k->step.generative) {
    fprintf(c->err, "tpusim serve: --trace %s: the timeline draws prefill and decode, a generative "
                    "model's (%s is %s)\n", path, m->name, m->family);
    return CLI_USAGE;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(c->err, "tpusim serve: --trace %s: cannot write the file\n", path);
    return CLI_BAD_INPUT;
  }
  trace_serving s = {.model_name = m->name, .hw_name = k->hw->name, .replicas = k->replicas,
                     .batch = k->batch, .qps = k->mode == SERVE_ONLINE ? q->qps : 0,
                     .ttft_s = k->step.ttft_s, .decode_step_s = k->step.decode_step_s,
                     .span_s = k->step.ttft_s + (double)q->output_tokens * k->step.decode_step_s};
  int rc = trace_write_serving(f, &s);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) {
    fprintf(c->err, "tpusim serve: --trace %s: the trace could not be written\n", path);
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}

static model *load(cli_ctx *c, const char *arg) {
  diag *dg = diag_new();
  model *m = model_load(arg, NULL, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  return m;
}

/* The token counts of a request are a sequence model's (a decoder's
** prompt and answer, an encoder's input): checked against m, an
** encoder's --input-tokens set as its sequence. serve and plot serve. */
static int request_tokens(cli_ctx *c, const model *m, serve_req *q) {
  if ((cli_opt(c, "--output-tokens") || cli_opt(c, "--tpot-max")) && !serve_generates(m)) {
    fprintf(c->err, "tpusim %s: %s: %s does not generate tokens (one forward a request: %s); "
                    "leave the flag out\n", c->cmd,
            cli_opt(c, "--output-tokens") ? "--output-tokens" : "--tpot-max", m->name,
            m->info.tf.layers > 0 ? "an encoder" : m->family);
    return CLI_BAD_INPUT;
  }
  if (cli_opt(c, "--input-tokens")) {
    if (m->info.tf.layers == 0) {
      fprintf(c->err, "tpusim %s: --input-tokens: %s takes no tokens (%s %s model's request "
                      "is one sample); leave the flag out\n",
              c->cmd, m->name, str_article(m->family), m->family);
      return CLI_BAD_INPUT;
    }
    if (m->info.tf.encoder) {
      char err[512];
      if (serve_encoder_takes(m, q->input_tokens, err, sizeof err) != 0) {
        fprintf(c->err, "%s\n", err);
        return CLI_BAD_INPUT;
      }
      q->encoder_seq = q->input_tokens;
    }
  }
  return CLI_OK;
}

static int run_serve(cli_ctx *c) {
  if (cli_opt(c, "--validate")) {
    if (c->n_pos != 0) return cli_usage_error(c, "%s", "--validate FILE takes no MODEL");
    if (c->json)
      return cli_usage_error(c, "%s", "--validate prints a markdown table (docs/serving.md), not "
                                      "JSON: leave --json out");
    return serve_validate(c, cli_opt(c, "--validate"));
  }
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one MODEL");
  serve_req q;
  bool any = false;
  int64_t top = 5;
  if (parse_req(c, &q, &any) || cli_opt_int(c, "--top", 1, 100, &top)) return CLI_USAGE;
  hw_catalog *cat;
  int rc = cli_load_catalog(c, &cat, NULL);
  if (rc != CLI_OK) return rc;
  const hw_model **hws = NULL;
  int n = 0;
  model *m = NULL, *draft = NULL;
  if ((rc = hw_list(c, cat, &hws, &n)) != CLI_OK) goto done;
  rc = CLI_BAD_INPUT;
  if (!(m = load(c, c->pos[0]))) goto done;
  if (request_tokens(c, m, &q) != CLI_OK) goto done;
  if (cli_opt(c, "--speculative")) {
    if (!(draft = load(c, cli_opt(c, "--speculative")))) goto done;
    q.draft = draft;
  }
  serve_plan p;
  char err[512];
  if (serve_plan_run(m, hws, n, cat, &q, &p, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim serve: %s\n", err);
    rc = CLI_USAGE;
    goto done;
  }
  if (c->json) {
    cli_print_json(c, plan_json(m, &q, &p));
  } else {
    fprintf(c->out, "tpusim serve %s: %s\n", m->name,
            p.mode == SERVE_BATCH ? "batch prediction" : p.mode == SERVE_EDGE ? "on the device" : "online endpoint");
    fprintf(c->out, "why: %s\n", p.reason);
    print_table(c->out, &p, (int)top);
    if (cli_opt(c, "--explain") && p.n > 0 && p.c[0].meets) print_explain(c->out, m, &q, &p.c[0]);
  }
  rc = p.n > 0 && p.c[0].meets ? CLI_OK : CLI_DOES_NOT_FIT;
  if (rc == CLI_OK && cli_opt(c, "--trace")) rc = write_trace(c, m, &q, &p.c[0]);
  serve_plan_free(&p);
done:
  model_free(draft);
  model_free(m);
  free(hws);
  hw_catalog_free(cat);
  return rc;
}

const cli_cmd cli_cmd_serve = {"serve",
    "tpusim serve MODEL [--qps N --latency-p99 DUR [--tpot-max DUR]]\n"
    "                   [--entities N --batch-window DUR]\n"
    "                   [--offline] [--max-power W] [--hw LIST|all]\n"
    "                   [--precision bf16|fp8|int8|int8-wo|int4|any]\n"
    "                   [--input-tokens N] [--output-tokens N] [--tp N]\n"
    "                   [--speculative DRAFT --spec-acceptance A [--spec-k K]]\n"
    "                   [--top K] [--explain] [--json] [--trace FILE]\n"
    "       tpusim serve --validate FILE\n"
    "  the mode: on the device with --offline (or a --max-power below any server\n"
    "  chip), batch prediction with --entities, an online endpoint otherwise;\n"
    "  --latency-p99 DUR: the p99 of the time to the first token, queueing\n"
    "  included (the whole forward for a model that does not generate): the\n"
    "  table's \"p99 ttft\" column; --tpot-max DUR: the time per output token\n"
    "  under load (decode slowed by the prompts' prefills), a second target;\n"
    "  `tpusim plot serve MODEL [these options] -o FILE.png` draws the\n"
    "  candidates' latency against throughput as the batch grows;\n"
    "  exit 3 when no candidate meets the request",
    "plan how to serve a model: batch, online endpoint or on the device", run_serve, NULL,
    SERVE_FLAGS, SERVE_VALUED, NULL};

/* ---- `tpusim plot serve`: the candidates' latency against throughput ---- */

static const char PLOT_SERVE_USAGE[] =
    "Usage: tpusim plot serve MODEL --qps N [--latency-p99 DUR] [--tpot-max DUR] -o FILE.png|svg\n"
    "                         [--hw LIST|all] [--precision P|any] [--input-tokens N]\n"
    "                         [--output-tokens N] [--tp N] [--top K] [--hw-file PATH]\n"
    "                         [--speculative DRAFT --spec-acceptance A [--spec-k K]]\n"
    "  the online endpoint `tpusim serve` plans with the same options; for each of its\n"
    "  first K candidates (default 5) a curve as the batch doubles: time per output\n"
    "  token, and p99 time to first token at --qps with the replicas serve would use,\n"
    "  against output tokens/s per chip (samples/s and the forward for a model that\n"
    "  does not generate); serve's choice is ringed. FILE.dat and FILE.gp are kept\n"
    "  beside the picture.\n";

/* The command line after "plot serve" into c (serve's options, -o, --hw-file). */
static int plot_serve_args(cli_ctx *c, int argc, char **argv, const char **output) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || a[1] == '\0') {
      if (c->n_pos == CLI_MAX_POS) return cli_usage_error(c, "too many arguments at '%s'", a);
      c->pos[c->n_pos++] = a;
      continue;
    }
    bool flag = false, valued = strcmp(a, "-o") == 0 || strcmp(a, "--hw-file") == 0;
    for (int k = 0; SERVE_FLAGS[k]; k++) flag |= strcmp(SERVE_FLAGS[k], a) == 0;
    for (int k = 0; SERVE_VALUED[k]; k++) valued |= strcmp(SERVE_VALUED[k], a) == 0;
    if (!flag && !valued) return cli_usage_error(c, "unknown option '%s'", a);
    if (valued && i + 1 >= argc) return cli_usage_error(c, "%s needs a value", a);
    const char *v = valued ? argv[++i] : "";
    if (strcmp(a, "-o") == 0) {
      *output = v;
    } else if (strcmp(a, "--hw-file") == 0) {
      if (c->n_hw_files == CLI_MAX_HW_FILES) return cli_usage_error(c, "%s", "at most 16 --hw-file");
      c->hw_files[c->n_hw_files++] = v;
    } else {
      if (c->n_opts == CLI_MAX_OPTS) return cli_usage_error(c, "too many options at '%s'", a);
      c->opt_name[c->n_opts] = a;
      c->opt_value[c->n_opts++] = v;
    }
  }
  return CLI_OK;
}

/* What serve plans but a curve cannot show, refused with the reason. */
static int plot_serve_refuse(cli_ctx *c) {
  static const char *const NOT[] = {"--offline", "--entities", "--batch-window", "--max-power",
                                    "--validate", "--trace", "--explain", NULL};
  for (int k = 0; NOT[k]; k++)
    if (cli_opt(c, NOT[k]))
      return cli_usage_error(c, "%s: the chart is an online endpoint's latency against its "
                                "throughput as the batch grows (--qps N); `tpusim serve` plans "
                                "the other modes", NOT[k]);
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one MODEL");
  if (!cli_opt(c, "--qps"))
    return cli_usage_error(c, "%s", "--qps N is required: the p99 is the queue's at that rate");
  return CLI_OK;
}

int cli_plot_serve(int argc, char **argv, FILE *out, FILE *err) {
  cli_ctx ctx = {.out = out, .err = err, .cmd = "plot serve"}, *c = &ctx;
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(PLOT_SERVE_USAGE, out);
      return CLI_OK;
    }
  const char *output = NULL;
  serve_req q;
  bool any = false;
  int64_t top = 5;
  int rc = plot_serve_args(c, argc, argv, &output);
  if (rc == CLI_OK) rc = plot_serve_refuse(c);
  if (rc == CLI_OK && (parse_req(c, &q, &any) || cli_opt_int(c, "--top", 1, 10, &top))) rc = CLI_USAGE;
  if (rc == CLI_OK && (!output || !*output))
    rc = cli_usage_error(c, "%s", "-o FILE.png or -o FILE.svg is required");
  if (rc != CLI_OK) return rc;
  plot_output o;
  if (plot_output_init(&o, output, err) != 0) return CLI_BAD_INPUT;
  hw_catalog *cat;
  if ((rc = cli_load_catalog_as(c, "tpusim plot serve", &cat, NULL)) != CLI_OK) return rc;
  const hw_model **hws = NULL;
  int n = 0;
  model *m = NULL, *draft = NULL;
  serve_plan p = {0};
  char msg[512];
  if ((rc = hw_list(c, cat, &hws, &n)) != CLI_OK) goto done;
  rc = CLI_BAD_INPUT;
  if (!(m = load(c, c->pos[0])) || request_tokens(c, m, &q) != CLI_OK) goto done;
  if (cli_opt(c, "--speculative") && !(q.draft = draft = load(c, cli_opt(c, "--speculative")))) goto done;
  if (serve_plan_run(m, hws, n, cat, &q, &p, msg, sizeof msg) != 0) {
    fprintf(err, "tpusim plot serve: %s\n", msg);
    rc = CLI_USAGE;
    goto done;
  }
  int shown = 0; /* the meeting candidates come first */
  while (shown < p.n && shown < top && p.c[shown].meets) shown++;
  for (int i = 0; shown == 0 && i < p.n; i++) /* why none is drawn, as serve says it */
    fprintf(err, "tpusim plot serve: %s %s: %s\n", p.c[i].hw->name, p.c[i].prec ? p.c[i].prec->name : "-",
            p.c[i].why_not);
  plot_serve_req r = {.m = m, .q = &q, .chosen = p.c, .n_chosen = shown, .argc = argc, .argv = argv};
  rc = plot_serve_draw(&r, &o, out, err) == 0 ? CLI_OK : shown == 0 ? CLI_DOES_NOT_FIT : CLI_BAD_INPUT;
  if (rc == CLI_OK) fprintf(out, "wrote %s (data %s, script %s)\n", o.img_path, o.dat_path, o.gp_path);
done:
  serve_plan_free(&p);
  model_free(draft);
  model_free(m);
  free(hws);
  hw_catalog_free(cat);
  return rc;
}

/* ---- --validate: published serving measurements ---- */

/* The columns of tests/validation/serving-runs.csv, in order. */
static const char *const COLS[] = {"id", "model", "hw", "chips", "tp", "weight_dtype",
                                   "act_dtype", "batch", "input_tokens", "output_tokens",
                                   "metric", "value", "framework", "source", "notes", NULL};
enum { C_ID, C_MODEL, C_HW, C_CHIPS, C_TP, C_WDT, C_ADT, C_BATCH, C_IN, C_OUT, C_METRIC, C_VALUE,
       C_FRAMEWORK, C_N = 15 };
/* TensorRT-LLM's largest runtime batch (trtllm-bench: CUDA-graph batches up
** to 8192; the rows' notes) */
#define MAX_ENGINE_BATCH 8192
static const char *const METRICS[] = {"ttft_s", "tpot_s", "prefill_tokens_per_s",
                                      "decode_tokens_per_s", "output_tokens_per_s", "samples_per_s",
                                      NULL};
/* METRICS' index of samples_per_s: the one metric of a model that does not
** generate (a CNN, an encoder: MLPerf Inference's offline samples/s) */
#define M_SAMPLES 5

/* The serving precision of a row's weight and activation dtypes. */
static const serve_precision *row_precision(const char *w, const char *a) {
  bool a16 = strcmp(a, "bf16") == 0 || strcmp(a, "fp16") == 0;
  if ((strcmp(w, "bf16") == 0 || strcmp(w, "fp16") == 0) && a16) return serve_precision_find("bf16");
  if (strcmp(w, "fp8") == 0 && strcmp(a, "fp8") == 0) return serve_precision_find("fp8");
  if (strcmp(w, "int8") == 0 && strcmp(a, "int8") == 0) return serve_precision_find("int8");
  if (strcmp(w, "int8") == 0 && a16) return serve_precision_find("int8-wo");
  if (strcmp(w, "int4") == 0 && a16) return serve_precision_find("int4");
  return NULL;
}

/* tpusim's figure for a row's metric, for `replicas` data-parallel copies. */
static double row_metric(int metric, const serve_cfg *cfg, const serve_result *r, double replicas) {
  double b = (double)cfg->batch;
  switch (metric) {
  case 0: return r->ttft_s;
  case 1: return r->tpot_s;
  case 2: return r->prefill_tokens_per_s * replicas;
  case 3: return b / r->tpot_s * replicas;
  case M_SAMPLES: return r->samples_per_s * replicas;
  default: /* a static batch end to end: its prefill, then output_tokens steps */
    return b * (double)cfg->output_tokens /
           (r->ttft_s + (double)cfg->output_tokens * r->tpot_s) * replicas;
  }
}

/* The error is also reported per framework release (the rows' framework
** column as written): software of different years runs the same chip at
** different speeds, which the step does not model (docs/serving.md). */
#define VAL_MAX_GROUPS 16
typedef struct {
  char name[96];
  double sum_err;
  int rows;
} val_group;

typedef struct {
  cli_ctx *c;
  const char *path;
  hw_catalog *cat;
  double sum_err;
  int rows;
  /* of which the samples_per_s rows (CNNs, encoders): reported apart from
  ** the generative rows, whose prefill and decode the target is */
  double sum_err_samples;
  int rows_samples;
  val_group group[VAL_MAX_GROUPS];
  int n_groups;
} val_state;

/* Adds a row's absolute error to its framework's group (the last group
** takes any beyond VAL_MAX_GROUPS, named so). */
static void group_add(val_state *v, const char *framework, double abs_err) {
  int g = 0;
  while (g < v->n_groups && strcmp(v->group[g].name, framework) != 0) g++;
  if (g == v->n_groups) {
    if (g == VAL_MAX_GROUPS) {
      g = VAL_MAX_GROUPS - 1;
      snprintf(v->group[g].name, sizeof v->group[g].name, "(other frameworks)");
    } else {
      snprintf(v->group[g].name, sizeof v->group[g].name, "%s", framework[0] ? framework : "(none given)");
      v->n_groups++;
    }
  }
  v->group[g].sum_err += abs_err;
  v->group[g].rows++;
}

/* A data row of the file: its cells' text ("" past the row's end, the
** optional last columns) and where each is, for messages. */
typedef struct {
  const char *f[C_N];
  const csv_cell *at[C_N]; /* the row's last cell past its end */
} val_row;

/* "FILE:LINE:COL: " the row's cell k and the message; false. */
static bool row_error(val_state *v, const val_row *w, int k, const char *fmt, const char *a,
                      const char *b) {
  fprintf(v->c->err, "%s:%d:%d: ", v->path, w->at[k]->line, w->at[k]->col);
  fprintf(v->c->err, fmt, a, b);
  fputc('\n', v->c->err);
  return false;
}

/* One data row: simulated and printed; false after a message (file:line:col). */
static bool validate_row(val_state *v, const val_row *w) {
  const char *const *f = w->f;
  int64_t chips, tp, batch, in, out;
  char e[256];
  static const struct {
    int col;
    int64_t hi;
  } INTS[] = {{C_CHIPS, CLI_MAX_CHIPS}, {C_TP, 64}, {C_BATCH, 1 << 20}, {C_IN, CLI_MAX_SEQ}, {C_OUT, CLI_MAX_SEQ}};
  int64_t *outs[] = {&chips, &tp, &batch, &in, &out};
  for (int i = 0; i < 5; i++)
    if (num_parse_int(COLS[INTS[i].col], f[INTS[i].col], INTS[i].col <= C_TP ? 1 : 0, INTS[i].hi,
                      outs[i], e, sizeof e))
      return row_error(v, w, INTS[i].col, "%s%s", e, "");
  double value;
  if (num_parse("value", f[C_VALUE], (num_range){NUM_REAL, 0, 1e15, true}, &value, e, sizeof e))
    return row_error(v, w, C_VALUE, "%s%s", e, "");
  int metric = -1;
  for (int i = 0; METRICS[i]; i++)
    if (strcmp(METRICS[i], f[C_METRIC]) == 0) metric = i;
  const serve_precision *pr = row_precision(f[C_WDT], f[C_ADT]);
  const hw_model *hw = hw_catalog_find(v->cat, f[C_HW]);
  /* tokens are a generative row's; a samples row leaves them 0 */
  if (metric < 0)
    return row_error(v, w, C_METRIC, "metric: expected ttft_s, tpot_s, prefill_tokens_per_s, "
                     "decode_tokens_per_s, output_tokens_per_s or samples_per_s, found '%s'%s",
                     f[C_METRIC], "");
  if (!pr)
    return row_error(v, w, C_WDT, "weight_dtype/act_dtype %s/%s: expected bf16/bf16, fp16/fp16, "
                     "fp8/fp8, int8/int8, int8/bf16 or int4/bf16", f[C_WDT], f[C_ADT]);
  if (!hw) {
    char msg[2048];
    hw_catalog_unknown(v->cat, f[C_HW], msg, sizeof msg);
    return row_error(v, w, C_HW, "hw: %s%s", msg, "");
  }
  if (chips % tp) return row_error(v, w, C_CHIPS, "chips %s: not a multiple of tp %s", f[C_CHIPS], f[C_TP]);
  if (metric != M_SAMPLES && (in < 1 || out < 1))
    return row_error(v, w, in < 1 ? C_IN : C_OUT, "input_tokens/output_tokens: expected at least 1 "
                     "each for a token metric (%s), found 0%s", f[C_METRIC], "");
  model *m = load(v->c, f[C_MODEL]);
  if (!m) return row_error(v, w, C_MODEL, "model %s: not read (above)%s", f[C_MODEL], "");
  char err[512];
  if (metric == M_SAMPLES && in > 0 && m->info.tf.encoder && serve_encoder_takes(m, in, err, sizeof err) != 0) {
    model_free(m);
    return row_error(v, w, C_IN, "input_tokens %s: %s", f[C_IN], err);
  }
  /* a samples row's input_tokens, when given, is an encoder's sequence length */
  serve_cfg cfg = {.tp = tp, .pp = 1, .prec = pr, .batch = batch > 0 ? batch : 1, .input_tokens = in,
                   .output_tokens = out, .encoder_seq = metric == M_SAMPLES ? in : 0};
  serve_result r;
  int rc = 0;
  if (batch == 0) {
    /* batch 0: an offline run at maximum load, as many sequences in flight
    ** as the KV cache holds (the row's notes), at most the engine's largest
    ** batch (MAX_ENGINE_BATCH) */
    rc = serve_step(m, hw, &cfg, NULL, &r, err, sizeof err);
    cfg.batch = r.max_batch < 1 ? 1 : r.max_batch > MAX_ENGINE_BATCH ? MAX_ENGINE_BATCH : r.max_batch;
  }
  cfg.prefill_batch = metric == 0 ? 1 : cfg.batch;
  if (rc == 0) rc = serve_step(m, hw, &cfg, NULL, &r, err, sizeof err);
  model_free(m);
  if (rc == 0 && r.generative == (metric == M_SAMPLES))
    return row_error(v, w, C_METRIC, "metric %s: %s", f[C_METRIC],
                     r.generative ? "a generative model is measured in tokens (ttft_s, tpot_s, "
                                    "..._tokens_per_s), not samples_per_s"
                                  : "a model that does not generate is measured in samples_per_s");
  if (rc != 0) return row_error(v, w, C_ID, "%s%s", err, "");
  double sim = row_metric(metric, &cfg, &r, (double)(chips / tp));
  double rel = (sim - value) / value;
  v->sum_err += fabs(rel);
  v->rows++;
  if (metric == M_SAMPLES) v->sum_err_samples += fabs(rel), v->rows_samples++;
  group_add(v, f[C_FRAMEWORK], fabs(rel));
  fprintf(v->c->out, "| %s | %s | %s x%lld %s | %s b%lld %lld/%lld | %.4g | %.4g | %+.1f %% |\n",
          f[C_ID], f[C_MODEL], f[C_HW], (long long)chips, pr->name, f[C_METRIC], (long long)cfg.batch,
          (long long)in, (long long)out, value, sim, rel * 100);
  return true;
}

int serve_validate(cli_ctx *c, const char *path) {
  csv_table t = {0};
  diag *dg = diag_new();
  if (!dg || csv_read(&t, path, "serving measurements (CSV)", &RUNS_CSV, dg) != 0) {
    if (dg) diag_print(dg, c->err);
    diag_free(dg);
    csv_free(&t);
    return CLI_BAD_INPUT;
  }
  diag_free(dg);
  val_state v = {.c = c, .path = path};
  int rc = cli_load_catalog(c, &v.cat, NULL);
  if (rc != CLI_OK) {
    csv_free(&t);
    return rc;
  }
  bool ok = true;
  for (int i = 0; i < C_N && ok; i++) {
    const csv_cell *h = csv_at(&t, 0, i);
    if (!h || strcmp(h->s, COLS[i]) != 0) {
      const csv_cell *last = csv_at(&t, 0, t.recs[0].n - 1);
      fprintf(c->err, "%s:%d:%d: expected the header column '%s', found '%s'\n", path,
              h ? h->line : last->end_line, h ? h->col : last->end_col, COLS[i],
              h ? h->s : "(none)");
      ok = false;
    }
  }
  if (ok && t.n_recs == 1) {
    fprintf(c->err, "%s: a header and no rows: nothing to validate\n", path);
    ok = false;
  }
  bool header = ok; /* then every row, each bad one reported */
  if (header) {
    fprintf(c->out, "| row | model | hw | metric | measured | tpusim | error |\n");
    fprintf(c->out, "|---|---|---|---|---|---|---|\n");
  }
  for (int r = 1; header && r < t.n_recs; r++) {
    val_row w;
    int n = t.recs[r].n;
    const csv_cell *last = csv_at(&t, r, n - 1);
    if (n < C_N - 2 || n > C_N) {
      fprintf(c->err, "%s:%d:%d: expected %d to %d columns (framework, source and notes may be "
                      "left out), found %d\n", path, last->end_line, last->end_col,
              C_N - 2, C_N, n);
      ok = false;
      continue;
    }
    for (int k = 0; k < C_N; k++) {
      const csv_cell *x = csv_at(&t, r, k);
      w.f[k] = x ? x->s : "";
      w.at[k] = x ? x : last;
    }
    ok &= validate_row(&v, &w);
  }
  hw_catalog_free(v.cat);
  csv_free(&t);
  if (v.rows > 0)
    fprintf(c->out, "\nmean absolute error: %.1f %% over %d rows\n", 100 * v.sum_err / v.rows, v.rows);
  int gen = v.rows - v.rows_samples;
  if (gen > 0 && v.rows_samples > 0)
    fprintf(c->out, "of which generative (prefill and decode): %.1f %% over %d rows; samples_per_s: %.1f %% over %d rows\n",
            100 * (v.sum_err - v.sum_err_samples) / gen, gen, 100 * v.sum_err_samples / v.rows_samples,
            v.rows_samples);
  if (v.n_groups > 1) {
    fprintf(c->out, "\n| framework | rows | mean absolute error |\n|---|---|---|\n");
    for (int g = 0; g < v.n_groups; g++)
      fprintf(c->out, "| %s | %d | %.1f %% |\n", v.group[g].name, v.group[g].rows,
              100 * v.group[g].sum_err / v.group[g].rows);
  }
  return ok ? CLI_OK : CLI_BAD_INPUT;
}
