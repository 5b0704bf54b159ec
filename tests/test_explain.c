/*
** test_explain.c -- `simulate --explain`: the step time and the memory peak
** shown as terms that add up to them (sim/explain.h), on every example
** model and on the plan kinds that exercise each term (a pipeline with a
** bubble, interleaving, MoE, context parallelism with FSDP, an input stall,
** plans that do not fit); and the money formatter's significant figures.
**
** The property checked is the (#20 item 2): the JSON terms sum to
** step_time_s and to the peak (to 1e-9, rounding of a sum of doubles), and
** the printed terms, parsed back, sum to the printed total exactly in the
** last printed digit.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <cjson/cJSON.h>

#include "../base/units.h"
#include "../sim/explain.h"
#include "helpers.h"

/* Runs `tpusim simulate ARGS` (split on spaces) with extra trailing args. */
static th_run run_split(const char *args, const char *x1, const char *x2) {
  static char buf[512];
  const char *a[40] = {0};
  int n = 0;
  snprintf(buf, sizeof buf, "%s", args);
  a[n++] = "simulate";
  for (char *t = strtok(buf, " "); t && n < 36; t = strtok(NULL, " ")) a[n++] = t;
  a[n++] = x1;
  a[n++] = x2;
  return th_cli(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
                a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23],
                a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34],
                a[35], a[36], a[37], NULL);
}

/* Every example model (workloads/examples/) and each plan kind. rc 3: the
** plan does not fit (simulate still reports the step). */
static const struct {
  const char *args;
  int rc;
} CASES[] = {
    {"llama3-8b --hw h100-sxm --chips 8", 3},                               /* DOES NOT FIT */
    {"llama3-8b --hw h100-sxm --chips 16 --tp 2 --pp 2 --gbs 64", 0},       /* 1F1B bubble */
    {"gpt3-175b --hw a100-80g --chips 64 --tp 8 --pp 8 --gbs 64 --recompute selective", 0},
    {"bert-large --hw a100-80g --chips 16 --gbs 256", 0},
    {"mixtral-8x7b --hw h100-sxm --chips 64 --tp 2 --pp 4 --ep 8", 0},      /* MoE */
    {"resnet50 --hw a100-80g --chips 8", 0},                                /* input stall */
    {"resnet50 --hw a100-80g --chips 64 --storage files --input-host remote", 0},
    {"mobilenet_v2 --hw tpu-v5e --chips 8", 0},
    {"mlp --hw h100-sxm --chips 2", 0},
    {"dlrm --hw a100-80g --chips 8", 3},
    {"gbdt --hw h100-sxm --chips 1", 0},
    {"graph --hw h100-sxm --chips 1", 0},
    {"workloads/examples/mlp_train_step.hlo --hw h100-sxm --chips 1", 0},   /* HLO */
    {"workloads/examples/llama3-8b-hf-config.json --hw h100-sxm --chips 8 --zero 2 --gbs 8", 0},
    {"llama3-70b --hw h100-sxm --chips 64 --tp 8 --pp 4 --pp-schedule interleaved:2 --gbs 128", 3},
    {"llama3-8b --hw h100-sxm --chips 16 --tp 2 --cp 2 --fsdp --gbs 64", 0}, /* CP + ZeRO-3 */
    {"llama3-8b --hw h100-sxm --chips 16 --pp 4 --pp-layers 7,9,9,7 --gbs 64", 0}, /* uneven */
    {"llama3-405b --hw h100-sxm --chips 1024 --tp 8 --pp 16 --gbs 1024", 3},
    {"gpt3-175b --hw tpu-v5p --chips 256 --tp 8 --pp 8 --gbs 256 --recompute full", 0},
};

static double sum_terms(const cJSON *a, const char *key) {
  double s = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, a) {
    const cJSON *v = cJSON_GetObjectItem(t, key);
    cr_assert(cJSON_IsNumber(v), "a term without %s", key);
    cr_assert(v->valuedouble >= 0, "%s: a negative term", cJSON_GetObjectItem(t, "term")->valuestring);
    s += v->valuedouble;
  }
  return s;
}

Test(explain, json_terms_sum_to_step_time_and_peak, .timeout = 300) {
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    th_run r = run_split(CASES[i].args, "--json", "--explain");
    cr_assert_eq(r.rc, CASES[i].rc, "%s: exit %d, stderr %s", CASES[i].args, r.rc, r.err);
    cJSON *o = cJSON_Parse(r.out);
    cr_assert(o, "%s: not JSON", CASES[i].args);
    const cJSON *e = cJSON_GetObjectItem(o, "explain");
    cr_assert(e, "%s: no explain object", CASES[i].args);
    double step = cJSON_GetObjectItem(o, "step_time_s")->valuedouble;
    double peak = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "memory_bytes"), "peak")->valuedouble;
    double st = sum_terms(cJSON_GetObjectItem(e, "time"), "value_s");
    double sm = sum_terms(cJSON_GetObjectItem(e, "memory"), "value_bytes");
    cr_assert(step > 0);
    cr_assert(fabs(st - step) <= 1e-9 * step, "%s: time terms %.17g != step %.17g", CASES[i].args, st, step);
    cr_assert(fabs(sm - peak) <= 1e-9 * peak, "%s: memory terms %.17g != peak %.17g", CASES[i].args, sm, peak);
    cJSON_Delete(o);
    th_run_free(&r);
  }
}

/* A printed number "1234.567" in quanta of its last digit: 1234567. */
static long long quanta(const char *s) {
  long long v = 0;
  for (; *s && *s != ' '; s++)
    if (*s >= '0' && *s <= '9') v = v * 10 + (*s - '0');
  return v;
}

/* The printed section after `title`: its terms' sum against its total line. */
static void check_printed(const char *out, const char *title, const char *total, const char *args) {
  const char *p = strstr(out, title);
  cr_assert(p, "%s: no '%s' section", args, title);
  p = strchr(p, '\n') + 1;
  long long sum = 0;
  int terms = 0;
  /* a term line: 4 spaces, the name in 22 columns, the value in 12 */
  while (strncmp(p, "    ", 4) == 0 && p[4] != ' ') {
    cr_assert(strlen(p) > 40);
    if (strncmp(p + 4, total, strlen(total)) == 0) {
      cr_assert_eq(sum, quanta(p + 27 + strspn(p + 27, " ")),
                   "%s: '%s' printed parts sum to %lld quanta, total line: %.40s", args, title,
                   sum, p);
      cr_assert(terms >= 4, "%s: only %d terms", args, terms);
      return;
    }
    sum += quanta(p + 27 + strspn(p + 27, " "));
    terms++;
    p = strchr(p, '\n') + 1;
    p = strchr(p, '\n') + 1; /* the values line */
  }
  cr_assert_fail("%s: '%s' has no '%s' line", args, title, total);
}

Test(explain, printed_terms_add_up_to_printed_totals, .timeout = 300) {
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    th_run r = run_split(CASES[i].args, "--explain", NULL);
    cr_assert_eq(r.rc, CASES[i].rc, "%s: exit %d", CASES[i].args, r.rc);
    check_printed(r.out, "step time, term by term", "= step time", CASES[i].args);
    check_printed(r.out, "memory per chip, term by term", "= peak", CASES[i].args);
    th_run_free(&r);
  }
}

/* The rounding alone, on hand-made parts whose naive rounding would not
** add up: 3 x 0.3334 ms rounds to 0.333 each (0.999) against a total of
** 1.000 ms; largest remainders give one of them 0.334. */
Test(explain, rounding_keeps_the_sum) {
  double v[3] = {0.3334e-3, 0.3333e-3, 0.3333e-3};
  int64_t q[3], t;
  explain_unit u = explain_time_unit(1e-3);
  cr_assert_str_eq(u.name, "us"); /* 1 ms is under 10 ms: us, 3 decimals */
  cr_assert_eq(explain_round(v, 3, 1e-3, (explain_unit){"ms", 1e-3, 3}, q, &t), 0);
  cr_assert_eq(t, 1000);
  cr_assert_eq(q[0] + q[1] + q[2], 1000);
  cr_assert_eq(q[0], 334); /* the largest remainder */
  /* terms that are not the total's: refused, not printed */
  double bad[2] = {0.5, 0.4};
  cr_assert_eq(explain_round(bad, 2, 1.0, (explain_unit){"s", 1, 3}, q, &t), -1);
}

/* Three significant figures, never "$0.00" (docs/cli.md, "Numbers"): each
** expected string is the value rounded by hand. */
Test(explain, usd_significant_figures) {
  static const struct {
    double v;
    const char *want;
  } rows[] = {
      {0.000123, "$0.000123"}, {0.0000141, "$0.0000141"}, {0.004, "$0.00400"},
      {8.26, "$8.26"},         {8.264, "$8.26"},          {691.2, "$691"},
      {999.6, "$1,000"},       {1234.5, "$1,230"},        {12345678, "$12,300,000"},
      {0, "$0"},               {-2.5, "-$2.50"},          {0.9996, "$1.00"},
  };
  char buf[64];
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    units_usd(buf, sizeof buf, rows[i].v);
    cr_assert_str_eq(buf, rows[i].want, "%g", rows[i].v);
  }
}

/* plan --json --explain N: candidate N (1 the best, else candidates[N-2])
** carries the terms, which sum to its step time and peak; a spot search's
** too (its step is the same model's). */
Test(explain, plan_json_carries_candidate_terms, .timeout = 300) {
  static const char *const spot[] = {NULL, "--spot"};
  for (int s = 0; s < 2; s++) {
    th_run r = th_cli("plan", "llama3-8b", "--hw", "h100-sxm", "--max-chips", "64", "--json",
                      "--explain", "2", spot[s], NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cJSON *o = cJSON_Parse(r.out);
    cr_assert(o);
    cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "best"), "explain"));
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "candidates"), 0);
    const cJSON *e = cJSON_GetObjectItem(c, "explain");
    cr_assert(e, "candidate 2 has no explain object");
    double step = cJSON_GetObjectItem(c, "step_time_s")->valuedouble;
    double peak = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "memory_bytes"), "peak")->valuedouble;
    cr_assert(fabs(sum_terms(cJSON_GetObjectItem(e, "time"), "value_s") - step) <= 1e-9 * step);
    cr_assert(fabs(sum_terms(cJSON_GetObjectItem(e, "memory"), "value_bytes") - peak) <= 1e-9 * peak);
    cJSON_Delete(o);
    th_run_free(&r);
  }
}
