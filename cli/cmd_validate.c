/*
** cmd_validate.c -- `tpusim validate FILE.csv`: published training runs
** (the columns of shared/reference/public-runs*.csv), each turned into the
** `tpusim simulate` command a user would type through one mapping
** (tests/validation/mapping.csv: data, not code), run in-process through
** simulate's own entry point (cli_main) and compared with the row's measured
** step time: per-row signed error, MAPE, mean signed error, worst row.
** docs/validation.md is this command's --markdown output (tests/docs.sh
** regenerates and compares it). Reading the table and running its rows is
** runs.c's, shared with `tpusim calibrate --runs`.
*/
#include "cli_int.h"
#include "runs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "../base/strutil.h"

/* ==== the report ==== */

typedef struct {
  int rows, run, fails, not_expressible, no_fit;
  double mape, mean_error;
  const runs_result *worst;
} vsum;

static vsum summarize(const runs_result *r, int n) {
  vsum s = {.rows = n};
  for (int i = 0; i < n; i++) {
    if (r[i].status == RUNS_FAILS) s.fails++;
    if (r[i].status == RUNS_NOT_EXPRESSIBLE) s.not_expressible++;
    if (r[i].status != RUNS_OK && r[i].status != RUNS_NO_FIT) continue;
    s.run++;
    s.no_fit += r[i].status == RUNS_NO_FIT;
    s.mape += fabs(r[i].error);
    s.mean_error += r[i].error;
    if (!s.worst || fabs(r[i].error) > fabs(s.worst->error)) s.worst = &r[i];
  }
  if (s.run) s.mape /= s.run, s.mean_error /= s.run;
  return s;
}

static void summary_text(FILE *f, const vsum *s, const char *bold) {
  fprintf(f, "%srows run %d of %d%s (%d do not run, %d not expressible", bold, s->run, s->rows,
          bold, s->fails, s->not_expressible);
  if (s->no_fit) fprintf(f, "; %d run but do not fit in tpusim's memory model", s->no_fit);
  if (!s->run) {
    fprintf(f, "); MAPE n/a: no row ran\n");
    return;
  }
  fprintf(f, "); %sMAPE %.1f%%%s, mean signed error %+.1f%%, worst %s %+.1f%%\n", bold,
          100 * s->mape, bold, 100 * s->mean_error, s->worst->w.id, 100 * s->worst->error);
}

/* "gpt 1.7B": the model column and the row's parameter count */
static void model_label(char *out, size_t n, const runs_result *r, const runs_table *x) {
  const char *p = runs_cell_text(x, r->w.rec, RUNS_C_PARAMS);
  snprintf(out, n, runs_unknown(p) ? "%s" : "%s %sB", r->w.model, p);
}

/* Notes after a row's figures: tpusim's memory verdict, a model whose
** parameters are not the row's. */
static void row_notes(char *out, size_t n, const runs_result *r) {
  out[0] = '\0';
  if (r->status == RUNS_NO_FIT) runs_addf(out, n, " (does not fit in tpusim's memory model)");
  if (r->model_params_b > 0 && r->w.params_b > 0 &&
      fabs(r->model_params_b / r->w.params_b - 1) > 0.05)
    runs_addf(out, n, " (the model has %.3g B parameters, the row %.4g B)", r->model_params_b,
         r->w.params_b);
}

/* The features, without the list's leading ", " */
static const char *exercises(const runs_result *r) {
  return r->exercises + (r->exercises[0] == ',' ? 2 : 0);
}

static void print_text(const runs_table *x, const runs_result *r, int n, const vsum *s) {
  int wi = 2, wc = 4, wm = 5;
  char label[160], notes[256];
  for (int i = 0; i < n; i++) {
    model_label(label, sizeof label, &r[i], x);
    wi = (int)fmax(wi, strlen(r[i].w.id));
    wc = (int)fmax(wc, strlen(r[i].w.chip));
    wm = (int)fmax(wm, strlen(label));
  }
  FILE *f = x->c->out;
  fprintf(f, "%-*s  %-*s  %6s  %-*s  %10s  %10s  %7s  command\n", wi, "id", wc, "chip", "chips", wm,
          "model", "measured", "simulated", "error");
  for (int i = 0; i < n; i++) {
    model_label(label, sizeof label, &r[i], x);
    row_notes(notes, sizeof notes, &r[i]);
    fprintf(f, "%-*s  %-*s  %6lld  %-*s  %8.2f s  ", wi, r[i].w.id, wc, r[i].w.chip,
            (long long)r[i].w.chips, wm, label, r[i].w.measured_s);
    if (r[i].status == RUNS_OK || r[i].status == RUNS_NO_FIT)
      fprintf(f, "%8.2f s  %+6.1f%%%s", r[i].simulated_s, 100 * r[i].error, notes);
    else
      fprintf(f, "%s: %s", r[i].status == RUNS_FAILS ? "does not run" : "not expressible", r[i].msg);
    fprintf(f, "%s%s\n", r[i].cmd[0] ? "  $ " : "", r[i].cmd);
  }
  summary_text(f, s, "");
}

static void print_json(const runs_table *x, const char *file, const runs_result *r, int n,
                       const vsum *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", file);
  cJSON_AddStringToObject(o, "mapping", runs_mapping_file(x));
  cJSON_AddStringToObject(o, "models", x->models);
  cJSON *rows = cJSON_AddArrayToObject(o, "rows");
  for (int i = 0; i < n; i++) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", r[i].w.id);
    cJSON_AddStringToObject(j, "source", r[i].w.source);
    cJSON_AddStringToObject(j, "chip", r[i].w.chip);
    cJSON_AddNumberToObject(j, "chips", (double)r[i].w.chips);
    cJSON_AddStringToObject(j, "model", r[i].w.model);
    if (r[i].hw) cJSON_AddStringToObject(j, "hw", r[i].hw);
    if (r[i].framework) cJSON_AddStringToObject(j, "framework", r[i].framework);
    if (r[i].w.params_b > 0) cJSON_AddNumberToObject(j, "params_B", r[i].w.params_b);
    cJSON_AddNumberToObject(j, "measured_step_s", r[i].w.measured_s);
    cJSON_AddStringToObject(j, "status", RUNS_STATUS_NAMES[r[i].status]);
    if (r[i].status == RUNS_OK || r[i].status == RUNS_NO_FIT) {
      cJSON_AddNumberToObject(j, "simulated_step_s", r[i].simulated_s);
      cJSON_AddNumberToObject(j, "error", r[i].error);
      if (r[i].model_params_b > 0)
        cJSON_AddNumberToObject(j, "model_params_B", r[i].model_params_b);
    } else {
      cJSON_AddStringToObject(j, "message", r[i].msg);
    }
    cJSON_AddStringToObject(j, "exercises", exercises(&r[i]));
    if (r[i].cmd[0]) cJSON_AddStringToObject(j, "command", r[i].cmd);
    cJSON_AddItemToArray(rows, j);
  }
  cJSON *js = cJSON_AddObjectToObject(o, "summary");
  cJSON_AddNumberToObject(js, "rows", s->rows);
  cJSON_AddNumberToObject(js, "run", s->run);
  cJSON_AddNumberToObject(js, "does_not_run", s->fails);
  cJSON_AddNumberToObject(js, "not_expressible", s->not_expressible);
  cJSON_AddNumberToObject(js, "does_not_fit", s->no_fit);
  if (s->run) {
    cJSON_AddNumberToObject(js, "mape", s->mape);
    cJSON_AddNumberToObject(js, "mean_error", s->mean_error);
    cJSON *w = cJSON_AddObjectToObject(js, "worst");
    cJSON_AddStringToObject(w, "id", s->worst->w.id);
    cJSON_AddNumberToObject(w, "error", s->worst->error);
  }
  cli_print_json(x->c, o);
}

/* A table cell's text: '|' would end the cell. */
static void md_cell(FILE *f, const char *s) {
  for (; *s; s++) fputs(*s == '|' ? "\\|" : (char[]){*s, 0}, f);
}

/* The distinct reasons rows do not run, numbered from 1 in order of first
** appearance: why[i] is row i's number (0 for a row that ran); returns
** how many. */
static int number_reasons(const runs_result *r, int n, int *why) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    why[i] = 0;
    if (r[i].status != RUNS_FAILS && r[i].status != RUNS_NOT_EXPRESSIBLE) continue;
    for (int j = 0; j < i && !why[i]; j++)
      if (why[j] && r[j].status == r[i].status && strcmp(r[j].msg, r[i].msg) == 0) why[i] = why[j];
    if (!why[i]) why[i] = ++k;
  }
  return k;
}

/* docs/validation.md's tables: one row per run, the summary, the reasons
** rows do not run, and the commands. */
static void print_markdown(const runs_table *x, const runs_result *r, int n, const vsum *s) {
  FILE *f = x->c->out;
  int *why = calloc((size_t)n + 1, sizeof *why);
  if (!why) return;
  int k = number_reasons(r, n, why);
  char label[160], notes[256];
  fprintf(f, "| run | chip | chips | model | measured (s) | simulated (s) | error | exercises |\n"
             "|---|---|--:|---|--:|--:|--:|---|\n");
  for (int i = 0; i < n; i++) {
    model_label(label, sizeof label, &r[i], x);
    fprintf(f, "| %s | %s | %lld | %s | %.2f | ", r[i].w.id, r[i].w.chip, (long long)r[i].w.chips,
            label, r[i].w.measured_s);
    if (why[i]) {
      fprintf(f, "%s [%d] | |", r[i].status == RUNS_FAILS ? "does not run" : "not expressible",
              why[i]);
    } else {
      row_notes(notes, sizeof notes, &r[i]);
      fprintf(f, "%.2f%s | %+.1f %% |", r[i].simulated_s, notes, 100 * r[i].error);
    }
    fputc(' ', f);
    md_cell(f, exercises(&r[i]));
    fprintf(f, " |\n");
  }
  fputc('\n', f);
  summary_text(f, s, "**");
  for (int q = 1; q <= k; q++) {
    int count = 0, first = -1;
    for (int i = 0; i < n; i++)
      if (why[i] == q) count++, first = first < 0 ? i : first;
    fprintf(f, "%s- [%d] %s (%d row%s): ", q == 1 ? "\n" : "", q,
            r[first].status == RUNS_FAILS ? "does not run" : "not expressible", count,
            count == 1 ? "" : "s");
    md_cell(f, r[first].msg);
    fprintf(f, "\n");
  }
  fprintf(f, "\n<details><summary>The command of each run (from the repository root)"
             "</summary>\n\n");
  for (int i = 0; i < n; i++)
    if (r[i].cmd[0]) fprintf(f, "    # %s\n    %s\n", r[i].w.id, r[i].cmd);
  fprintf(f, "\n</details>\n");
  free(why);
}

/* ==== the command ==== */

/* --only ID: that row alone (moved to the front); -1 after a message
** naming the nearest id when there is none. */
static int pick_only(cli_ctx *c, const char *file, runs_result *r, int *n) {
  const char *id = cli_opt(c, "--only");
  if (!id) return 0;
  for (int i = 0; i < *n; i++)
    if (strcmp(r[i].w.id, id) == 0) {
      runs_result t = r[0]; /* swapped, not copied: each row's own memory stays once */
      r[0] = r[i];
      r[i] = t;
      *n = 1;
      return 0;
    }
  const char **ids = *n > 0 ? malloc((size_t)*n * sizeof *ids) : NULL;
  const char *near = NULL;
  if (ids) {
    for (int i = 0; i < *n; i++) ids[i] = r[i].w.id;
    near = str_suggest(id, ids, *n);
  }
  fprintf(c->err, "tpusim validate: --only '%s': no row with that id in %s%s%s%s\n", id, file,
          near ? "; did you mean '" : " (its first column)", near ? near : "", near ? "'?" : "");
  free(ids);
  return -1;
}


static int run_validate(cli_ctx *c) {
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one FILE.csv (a table of runs)");
  if (c->json && cli_opt(c, "--markdown"))
    return cli_usage_error(c, "%s", "--json and --markdown: pick one");
  const char *file = c->pos[0];
  runs_paths paths;
  if (runs_paths_of(c, &paths) != CLI_OK) return CLI_USAGE;
  const char *mfile = paths.mapping, *models = paths.models;
  diag *dg = diag_new();
  if (!dg) {
    fprintf(c->err, "tpusim validate: out of memory\n");
    return CLI_BAD_INPUT;
  }
  runs_table x;
  int rc = CLI_BAD_INPUT, bad_rows = 0;
  /* a malformed row does not run, the others do; the exit status still
  ** says the table had bad input */
  if (runs_open(&x, c, file, mfile, models, "nothing to validate", true, &bad_rows, dg) == 0 &&
      pick_only(c, file, x.r, &x.n) == 0) {
    runs_simulate_all(&x);
    vsum s = summarize(x.r, x.n);
    if (c->json) print_json(&x, file, x.r, x.n, &s);
    else if (cli_opt(c, "--markdown")) print_markdown(&x, x.r, x.n, &s);
    else print_text(&x, x.r, x.n, &s);
    rc = bad_rows > 0 ? CLI_BAD_INPUT : CLI_OK;
  }
  diag_print(dg, c->err);
  diag_free(dg);
  runs_close(&x);
  return rc;
}

static const char *const VALIDATE_FLAGS[] = {"--markdown", NULL};
static const char *const VALIDATE_VALUED[] = {"--models", "--mapping", "--only", NULL};

const cli_cmd cli_cmd_validate = {"validate",
    "tpusim validate FILE.csv [--only ID] [--models DIR[:DIR...]] [--mapping FILE]\n"
    "                  [--json | --markdown]\n"
    "  FILE.csv: published runs, the columns of shared/reference/public-runs.csv\n"
    "  (id, source, chip, chips, model, params_B, layers, ..., derived_step_s).\n"
    "  Each row becomes the `tpusim simulate` command a user would type, through\n"
    "  one mapping (default tests/validation/mapping.csv), and runs as simulate runs;\n"
    "  model files are looked up on --models (default\n"
    "  tests/validation/models:tests/data/hf; both defaults in the source tree,\n"
    "  from the working directory or the tree the tpusim binary sits in). Prints\n"
    "  each row's measured and simulated step time, signed error and command (or\n"
    "  why it does not run), then rows run, MAPE, mean signed error and the worst\n"
    "  row. Exit 0 when it ran, even with rows that do not run; 1 for a bad file\n"
    "  (with line:column of the cell).\n"
    "  --markdown: the tables of docs/validation.md",
    "simulate published training runs and compare: per-row error and MAPE", run_validate, NULL,
    VALIDATE_FLAGS, VALIDATE_VALUED, NULL};
