/*
** cmd_plot.c -- `tpusim plot KIND ...`: parses the kind and its options,
** loads the catalog and the model, and has viz/plot.h draw the chart.
**
** Its options are read in order, each with a value (-o is the one short
** one), and a problem is reported where it is met: the messages and exit
** codes are the ones `tpusim plot` has always given, so it keeps its own
** loop rather than the table's parser (which takes --json and --hw-file=F,
** and finds --help anywhere before checking the kind).
*/
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

#include "../base/diag.h"
#include "../base/jin.h"
#include "../viz/plot.h"

static const char USAGE[] =
    "Usage: tpusim plot KIND [MODEL] -o FILE.png|FILE.svg [options]\n"
    "\n"
    "Kinds:\n"
    "  roofline   MODEL --hw NAME                 ops of a training step vs the chip's roofline\n"
    "  serve      MODEL --qps N [serve's options] latency vs throughput of serve's candidates\n"
    "  scaling    MODEL --hw NAME --max-chips N   data-parallel throughput and efficiency vs chips,\n"
    "                                             hierarchical, flat ring, Reduction Server, FSDP\n"
    "  memory     MODEL --hw NAME --chips N       per-chip memory of a few plans, with the capacity\n"
    "  pareto     MODEL [--max-chips N] [--hw A,B] [--chips N]\n"
    "                                             the plans no other beats on both cost and time\n"
    "                                             to train (the planner's frontier), over each\n"
    "                                             hardware's best plan\n"
    "  pareto     --from PLAN.json                the frontier of a saved\n"
    "                                             `tpusim plan MODEL --pareto --json`\n"
    "  breakdown  MODEL --hw NAME --chips N       step-time components of a few plans\n"
    "  collective --hw NAME --chips N --op OP     bus bandwidth vs message size per algorithm\n"
    "  sweep      RESULTS.csv [--x P | --heat A,B] a study's results (`tpusim plot sweep --help`)\n"
    "\n"
    "Options:\n"
    "  -o FILE          the picture (.png or .svg); FILE.dat and FILE.gp are kept beside it\n"
    "  --seq N          sequence length (default: the model's)\n"
    "  --gbs N          global batch (default: the model's; scaling: see --batch-per-chip)\n"
    "  --batch-per-chip N  scaling: global batch = N x chips (default 4)\n"
    "  --hw-file PATH   add a hardware file to the catalog (repeatable)\n"
    "\n"
    "Needs gnuplot on PATH (Debian: gnuplot-nox; `make deps`).\n";

enum { PLOT_MAX_HW_FILES = 8 }; /* into c->hw_files */

typedef struct {
  const char *model, *output, *hw, *op, *from;
  int64_t chips, max_chips, seq, gbs, batch_per_chip;
} plot_args;

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* A count within 1..hi (num.h's message on anything else). */
static int parse_count(cli_ctx *c, const char *name, const char *v, int64_t hi, int64_t *dst) {
  char err[320];
  if (num_parse_int(name, v, 1, hi, dst, err, sizeof err) != 0) return cli_usage_error(c, "%s", err);
  return CLI_OK;
}

/* The options after the kind, in order; --hw-file into c->hw_files. */
static int parse_args(cli_ctx *c, plot_args *a, int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    const char *o = argv[i];
    if (o[0] != '-' || o[1] == '\0') {
      if (a->model) return cli_usage_error(c, "unexpected argument '%s'", o);
      a->model = o;
      continue;
    }
    if (i + 1 >= argc) return cli_usage_error(c, "%s expects a value", o);
    const char *v = argv[++i];
    int rc = CLI_OK;
    if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) a->output = v;
    else if (strcmp(o, "--hw") == 0) a->hw = v;
    else if (strcmp(o, "--op") == 0) a->op = v;
    else if (strcmp(o, "--from") == 0) a->from = v;
    else if (strcmp(o, "--hw-file") == 0) {
      if (c->n_hw_files == PLOT_MAX_HW_FILES) return cli_usage_error(c, "%s", "too many --hw-file");
      c->hw_files[c->n_hw_files++] = v;
    } else if (strcmp(o, "--chips") == 0) rc = parse_count(c, o, v, CLI_MAX_CHIPS, &a->chips);
    else if (strcmp(o, "--max-chips") == 0) rc = parse_count(c, o, v, CLI_MAX_CHIPS, &a->max_chips);
    else if (strcmp(o, "--seq") == 0) rc = parse_count(c, o, v, CLI_MAX_SEQ, &a->seq);
    else if (strcmp(o, "--gbs") == 0) rc = parse_count(c, o, v, CLI_MAX_BATCH, &a->gbs);
    else if (strcmp(o, "--batch-per-chip") == 0) rc = parse_count(c, o, v, CLI_MAX_BATCH, &a->batch_per_chip);
    else return cli_usage_error(c, "unknown option '%s'", o);
    if (rc != CLI_OK) return rc;
    if ((strcmp(o, "--seq") == 0 || strcmp(o, "--gbs") == 0) && c->n_opts < CLI_MAX_OPTS)
      c->opt_name[c->n_opts] = o, c->opt_value[c->n_opts++] = v; /* for cli_model_flags */
  }
  return CLI_OK;
}

/* The built-in catalog and the --hw-file files (cli.c's loader, its
** messages "tpusim plot: ..."); with `chip`, the one --hw names (*hw).
** CLI_OK, or CLI_BAD_INPUT after the messages. */
static int load_hw(cli_ctx *c, const plot_args *a, const char *kind, bool chip, hw_catalog **cat,
                   const hw_model **hw) {
  int rc = cli_load_catalog_as(c, "tpusim plot", cat, NULL);
  if (rc != CLI_OK || !chip) return rc;
  *hw = hw_catalog_find(*cat, a->hw);
  if (!*hw) {
    char msg[2048];
    hw_catalog_unknown(*cat, a->hw, msg, sizeof msg);
    fprintf(c->err, "tpusim plot %s: %s\n", kind, msg);
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}

static int load_model(cli_ctx *c, const plot_args *a, model **m) {
  diag *dg = diag_new();
  if (!dg) {
    fprintf(c->err, "tpusim plot: out of memory\n");
    return CLI_BAD_INPUT;
  }
  model_opts mo = {.seq_len = a->seq, .global_batch = a->gbs};
  *m = model_load(a->model, &mo, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  if (*m && cli_model_flags(c, *m) != CLI_OK) { /* --seq for a CNN, as simulate refuses it */
    model_free(*m);
    *m = NULL;
  }
  return *m ? CLI_OK : CLI_BAD_INPUT;
}

/* A saved plan's frontier must stay small: a search's is a few hundred
** plans (one per chip count and split at most); 64 MiB is far over that. */
#define PLOT_MAX_PLAN_JSON_BYTES (64u << 20)

/* One frontier plan of a saved `plan --pareto --json`, at j's current path. */
static int front_entry(jin *j, const cJSON *o, planner_cand *k) {
  const char *hw = NULL, *rec = NULL;
  int64_t v[8] = {0};
  static const char *const KEYS[8] = {"chips", "tp", "pp", "dp", "mbs", "vp", "zero", "gbs"};
  int bad = jin_get_str(j, o, "hw", true, &hw) < 0;
  for (int i = 0; i < 8; i++)
    bad |= jin_get_int(j, o, KEYS[i], i == 6 ? 0 : 1, CLI_MAX_BATCH, i < 3, &v[i]) < 0;
  bad |= jin_get_num(j, o, "train_s", 0, 1e18, true, &k->train_s) < 0;
  bad |= jin_get_num(j, o, "train_usd", 0, 1e18, true, &k->train_usd) < 0;
  bad |= jin_get_str(j, o, "recompute", false, &rec) < 0;
  if (bad) return -1;
  snprintf(k->hw, sizeof k->hw, "%s", hw);
  k->p = (plan){.chips = v[0], .tp = v[1], .pp = v[2], .dp = v[3], .mbs = v[4], .vp = v[5],
                .zero = (int)v[6], .gbs = v[7]};
  return 0;
}

/* The frontier of a saved `plan --pareto --json` (planner_cand's malloc'd
** array in *front) and its model's name. CLI_OK, or CLI_BAD_INPUT after a
** message with the file, line:column and what was expected. */
static int load_front(cli_ctx *c, const char *path, planner_cand **front, int *n, char *name,
                      size_t namen) {
  diag *dg = diag_new();
  size_t len = 0;
  char *text = dg ? jin_read_regular(path, PLOT_MAX_PLAN_JSON_BYTES, "a saved plan", NULL, &len, dg) : NULL;
  jin j;
  bool opened = text && jin_open(&j, path, text, len, dg) == 0, missing = false;
  *front = NULL;
  *n = 0;
  if (opened) {
    const char *mn = NULL;
    const cJSON *arr = cJSON_IsObject(j.root) ? jin_get_array(&j, j.root, "pareto", false) : NULL;
    if (!cJSON_IsObject(j.root)) jin_error(&j, 0, "expected the object `tpusim plan --json` prints");
    else if (!arr) missing = j.errors == 0;
    else if (jin_get_str(&j, j.root, "model", true, &mn) > 0) snprintf(name, namen, "%s", mn);
    int count = arr ? cJSON_GetArraySize(arr) : 0;
    *front = count > 0 ? calloc((size_t)count, sizeof **front) : NULL;
    for (int i = 0; *front && i < count; i++) {
      jin_push_key(&j, "pareto", 0);
      jin_push_index(&j, i);
      if (front_entry(&j, cJSON_GetArrayItem(arr, i), &(*front)[*n]) == 0) (*n)++;
      jin_pop(&j);
      jin_pop(&j);
    }
    if (arr && count == 0) jin_error_at(&j, "pareto", 0, "an empty frontier: nothing to draw");
    if (j.errors) *n = 0;
    jin_close(&j);
  }
  diag_print(dg, c->err);
  diag_free(dg);
  free(text);
  if (missing)
    fprintf(c->err, "tpusim plot pareto: %s has no \"pareto\" list; save one with "
                    "`tpusim plan MODEL --pareto --json > %s`\n", path, path);
  if (*n == 0) {
    free(*front);
    *front = NULL;
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}

/* argv[0] = "plot", argv[1] = KIND, then MODEL and options. */
int cli_plot_serve(int argc, char **argv, FILE *out, FILE *err); /* cmd_serve.c */
static int plot_cmd(int argc, char **argv, FILE *out, FILE *err) {
  if (argc >= 2 && strcmp(argv[1], "serve") == 0) return cli_plot_serve(argc, argv, out, err);
  cli_ctx ctx = {.out = out, .err = err, .cmd = "plot"}, *c = &ctx;
  if (argc < 2 || is_help(argv[1])) {
    fputs(USAGE, argc < 2 ? err : out);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  if (strcmp(argv[1], "sweep") == 0) return cli_plot_sweep(argc, argv, out, err);
  int k = plot_kind_parse(argv[1]);
  if (k < 0)
    return cli_usage_error(
        c, "unknown kind '%s' (roofline, scaling, memory, pareto, breakdown, collective, sweep)", argv[1]);
  const char *kind = argv[1];
  for (int i = 2; i < argc; i++)
    if (is_help(argv[i])) {
      fputs(USAGE, out);
      return CLI_OK;
    }
  plot_args a = {0};
  int rc = parse_args(c, &a, argc, argv);
  if (rc != CLI_OK) return rc;
  unsigned needs = plot_kind_needs((plot_kind)k);
  if (a.from && k != PLOT_PARETO) return cli_usage_error(c, "--from applies to pareto, not %s", kind);
  if (a.from && a.model)
    return cli_usage_error(c, "pareto: give a MODEL or --from '%s', not both", a.from);
  if (a.from) needs &= ~(unsigned)PLOT_NEEDS_MODEL;
  if ((needs & PLOT_NEEDS_MODEL) && !a.model) return cli_usage_error(c, "%s: expected a MODEL", kind);
  if (!(needs & PLOT_NEEDS_MODEL) && a.model)
    return cli_usage_error(c, "unexpected argument '%s'", a.model);
  if ((needs & PLOT_NEEDS_HW) && !a.hw) return cli_usage_error(c, "%s: --hw is required", kind);
  if ((needs & PLOT_NEEDS_CHIPS) && !a.chips)
    return cli_usage_error(c, "%s: --chips is required", kind);
  if ((needs & PLOT_NEEDS_MAX_CHIPS) && !a.max_chips)
    return cli_usage_error(c, "%s: --max-chips is required", kind);
  if ((needs & PLOT_NEEDS_OP) && !a.op) return cli_usage_error(c, "%s: --op is required", kind);
  /* and no option the kind does not read: pareto's --hw (a list), --chips
  ** and --max-chips are the planner's, optional; --seq and --gbs are a
  ** model's, and scaling sets its batch per chip */
  unsigned takes = needs | (k == PLOT_PARETO && !a.from ? PLOT_NEEDS_HW | PLOT_NEEDS_CHIPS | PLOT_NEEDS_MAX_CHIPS : 0);
  const char *unread = a.chips && !(takes & PLOT_NEEDS_CHIPS)           ? "--chips"
                       : a.max_chips && !(takes & PLOT_NEEDS_MAX_CHIPS) ? "--max-chips"
                       : a.op && !(takes & PLOT_NEEDS_OP)               ? "--op"
                       : a.hw && !(takes & PLOT_NEEDS_HW)               ? "--hw"
                       : a.batch_per_chip && k != PLOT_SCALING          ? "--batch-per-chip"
                       : a.gbs && k == PLOT_SCALING                     ? "--gbs"
                       : (a.seq || a.gbs) && !(needs & PLOT_NEEDS_MODEL)
                           ? (a.seq ? "--seq" : "--gbs")
                           : NULL;
  if (unread) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s does not read %s%s (leave it out)", kind, kind, unread,
             strcmp(unread, "--gbs") == 0 && k == PLOT_SCALING
                 ? ": its global batch is --batch-per-chip x chips"
             : a.from ? ", a saved plan's figures are fixed" : "");
    return cli_usage_error(c, "%s", msg);
  }
  if (!a.output || !*a.output)
    return cli_usage_error(c, "%s", "-o FILE.png or -o FILE.svg is required");
  plot_output o;
  if (plot_output_init(&o, a.output, err) != 0) return CLI_BAD_INPUT;

  plot_req req = {.kind = (plot_kind)k, .op = a.op, .chips = a.chips, .max_chips = a.max_chips,
                  .seq = a.seq, .gbs = a.gbs, .batch_per_chip = a.batch_per_chip,
                  .argc = argc, .argv = argv};
  if (!(needs & PLOT_NEEDS_HW)) req.hw_list = a.hw; /* pareto: a list for the planner */
  hw_catalog *cat = NULL;
  model *m = NULL;
  planner_cand *front = NULL;
  char front_model[64] = "a saved plan";
  rc = load_hw(c, &a, kind, needs & PLOT_NEEDS_HW, &cat, &req.hw);
  if (rc == CLI_OK && (needs & PLOT_NEEDS_MODEL)) rc = load_model(c, &a, &m);
  if (rc == CLI_OK && a.from) rc = load_front(c, a.from, &front, &req.n_front, front_model, sizeof front_model);
  req.front = front;
  req.front_model = front_model;
  req.cat = cat;
  req.m = m;
  if (rc == CLI_OK) rc = plot_draw(&req, &o, out, err);
  free(front);
  model_free(m);
  hw_catalog_free(cat);
  if (rc == CLI_OK)
    fprintf(out, "wrote %s (data %s, script %s)\n", o.img_path, o.dat_path, o.gp_path);
  return rc;
}

const cli_cmd cli_cmd_plot = {"plot", "tpusim plot KIND ... -o FILE.png|svg   (tpusim plot --help for the kinds)",
    "gnuplot charts: roofline, scaling, memory, pareto, breakdown, collective, sweep", NULL, NULL,
    NULL, NULL, plot_cmd};
