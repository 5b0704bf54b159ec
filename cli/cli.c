/*
** cli.c -- subcommands, options, help and exit codes.
**
** Each subcommand is a row: its name, synopsis, one-line summary, the
** options it accepts and the function that runs it. A subcommand whose
** issue has not landed has no function and says so (exit 2) instead of
** printing a made-up number.
*/
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../hw_models/hw_catalog.h"
#include "../viz/plot.h"
#include "../viz/trace.h"
#include "../viz/view.h"
#include "../planner/planner.h"
#include "../workloads/model.h"
#include "../sim/coll.h"
#include "../sim/plan.h"
#include "../sim/step.h"
#include "../sim/net.h"
#include "../base/diag.h"
#include "../sim/fuse.h"
#include "../sim/lower.h"
#include "../sim/opcost.h"
#include "../sim/calib.h"
#include "../base/strutil.h"
#include "../base/units.h"

#define MAX_POS 8
#define MAX_HW_FILES 16
#define MAX_OPTS 32

typedef struct {
  FILE *out, *err;
  const char *cmd; /* "hw" */
  int json;
  const char *hw_files[MAX_HW_FILES];
  int n_hw_files;
  const char *pos[MAX_POS];
  int n_pos;
  /* the command's own options, as given: "--seq" -> "8192", "--dot" -> "" */
  const char *opt_name[MAX_OPTS];
  const char *opt_value[MAX_OPTS];
  int n_opts;
} cli_ctx;

typedef struct cli_cmd {
  const char *name;
  const char *synopsis;
  const char *summary;
  int (*run)(cli_ctx *c);
  const char *issue; /* where the rest of it is specified, for unbuilt commands */
  const char *const *flags;  /* options without a value */
  const char *const *valued; /* options that take one */
  /* a command that reads its own arguments (argv[0] is its name) */
  int (*raw)(int argc, char **argv, FILE *out, FILE *err);
} cli_cmd;

static int run_hw(cli_ctx *c);
static int run_graph(cli_ctx *c);
static int run_collective(cli_ctx *c);
static int run_simulate(cli_ctx *c);
static int run_plan(cli_ctx *c);
static int run_lower(cli_ctx *c);
static const char *const LOWER_FLAGS[] = {"--emit-llvm", "--forward-only", "--no-fusion", NULL};
static const char *const LOWER_VALUED[] = {"--op", "--opt", "--seq", "--gbs", "--precision", NULL};
static const char *const PLAN_FLAGS[] = {"--spot", NULL};
static const char *const PLAN_VALUED[] = {"--hw",     "--chips",     "--max-chips", "--tokens",
                                          "--steps",  "--deadline",  "--budget",    "--objective",
                                          "--top",    "--preemption-rate", "--explain", "--op-costs",
                                          NULL};
static const char *const SIM_FLAGS[] = {"--fsdp", "--sp", "--explain", "--full", NULL};
static const char *const SIM_VALUED[] = {
    "--hw",   "--chips",     "--dp",        "--tp",           "--pp",
    "--ep",   "--zero",      "--mbs",       "--gbs",          "--seq",
    "--recompute", "--precision", "--pp-schedule", "--reduction-server", "--slices",
    "--trace", "--input", "--storage", "--prefetch", "--input-host", "--grad-sync", "--attention", "--op-costs", NULL};
static const char *const COLL_FLAGS[] = {"--explain", NULL};
static const char *const OP_COSTS[] = {"ir", "formula", NULL}; /* opcost_source order */
static const char *const COLL_VALUED[] = {"--hw",       "--chips",    "--op",       "--bytes",
                                          "--algo",     "--slices",   "--reducers", "--reducer-bw",
                                          "--factor",   "--axis",     NULL};
static const char *const GRAPH_FLAGS[] = {"--dot", "--forward-only", NULL};
static const char *const GRAPH_VALUED[] = {"--seq", "--gbs", "--precision", NULL};

/* ---- calibrate ---- */

static const char *const CALIB_FLAGS[] = {"--report", "--quick", NULL};
static const char *const CALIB_VALUED[] = {"--out", NULL};
static const char *opt(const cli_ctx *c, const char *name);
static int usage_error(cli_ctx *c, const char *fmt, const char *arg);

/* Times kernels for a minute (--quick: seconds), so the --out path is
** checked first: a typo should not cost the whole run. */
static int run_calibrate(cli_ctx *c) {
  if (c->n_pos > 0) return usage_error(c, "unexpected argument '%s'", c->pos[0]);
  char path[4096], err[512];
  const char *out = opt(c, "--out");
  if (out) {
    if (!*out) return usage_error(c, "%s", "--out needs a FILE");
    str_copy(path, sizeof path, out);
  } else if (calib_default_path(path, sizeof path) != 0) {
    fprintf(c->err, "tpusim calibrate: neither XDG_CACHE_HOME nor HOME is set; give --out FILE\n");
    return CLI_BAD_INPUT;
  }
  if (calib_check_path(path, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim calibrate: %s\n", err);
    return CLI_BAD_INPUT;
  }
  calib_opts o = {.quick = opt(c, "--quick") != NULL};
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
    if (opt(c, "--report")) calib_print_report(r, c->out);
    calib_print_summary(r, path, c->out);
  }
  calib_run_free(r);
  return rc;
}

/* `tpusim view MODEL --hw NAME --chips N [plan options]`: simulate the step
** with --trace into a temporary file (or the --trace FILE given, which is
** kept), then view it. Without simulate options the argument is a trace. */
static int view_cmd(int argc, char **argv, FILE *out, FILE *err) {
  static const char *const OWN[] = {"--screenshot", "--width", "--height", "--expand", NULL};
  const char *sim_argv[2 * MAX_OPTS + 8], *view_argv[2 * MAX_OPTS + 4], *keep = NULL;
  int ns = 3, nv = 2, sim = 0;
  sim_argv[0] = "tpusim";
  sim_argv[1] = "simulate";
  sim_argv[2] = NULL; /* the model */
  view_argv[0] = "view";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int own = 0, flag = 0, valued = strcmp(a, "--hw-file") == 0 || strcmp(a, "--trace") == 0;
    for (int k = 0; OWN[k]; k++) own |= strcmp(a, OWN[k]) == 0;
    for (int k = 0; SIM_FLAGS[k]; k++) flag |= strcmp(a, SIM_FLAGS[k]) == 0;
    for (int k = 0; SIM_VALUED[k]; k++) valued |= strcmp(a, SIM_VALUED[k]) == 0;
    int has_value = (own || valued) && i + 1 < argc;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return view_main(argc, argv, out, err);
    if (a[0] == '-' && a[1] && !own && !flag && !valued) {
      fprintf(err, "tpusim view: unknown option %s\nTry 'tpusim view --help'.\n", a);
      return CLI_USAGE;
    }
    if (ns + 2 >= (int)(sizeof sim_argv / sizeof *sim_argv) ||
        nv + 2 >= (int)(sizeof view_argv / sizeof *view_argv)) {
      fprintf(err, "tpusim view: too many arguments at '%s'\n", a);
      return CLI_USAGE;
    }
    if (a[0] != '-' || !a[1]) {
      if (!sim_argv[2]) sim_argv[2] = a;
      else sim_argv[ns++] = a; /* simulate says what is wrong with it */
    } else if (own) {
      view_argv[nv++] = a;
      if (has_value) view_argv[nv++] = argv[++i];
    } else if (strcmp(a, "--trace") == 0) {
      sim = 1;
      if (has_value) keep = argv[++i];
    } else {
      sim = 1;
      sim_argv[ns++] = a;
      if (has_value) sim_argv[ns++] = argv[++i];
    }
  }
  if (!sim) return view_main(argc, argv, out, err);
  if (!sim_argv[2]) {
    fprintf(err, "tpusim view: which model? (tpusim view MODEL --hw NAME --chips N ...)\n");
    return CLI_USAGE;
  }
  char tmp[4096];
  if (!keep) {
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/tpusim-view-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
      fprintf(err, "tpusim view: cannot create a temporary trace %s (set TMPDIR)\n", tmp);
      return CLI_BAD_INPUT;
    }
    fclose(f);
  }
  const char *trace = keep ? keep : tmp;
  sim_argv[ns++] = "--trace";
  sim_argv[ns++] = trace;
  int rc = cli_main(ns, (char **)sim_argv, out, err);
  if (rc == CLI_OK) {
    view_argv[1] = trace;
    rc = view_main(nv, (char **)view_argv, out, err);
  }
  if (!keep) remove(tmp);
  return rc;
}

static const cli_cmd COMMANDS[] = {
    {"plan",
     "tpusim plan MODEL [--hw LIST|all] [--chips N|--max-chips N] [--tokens N|--steps N]\n"
     "                  [--deadline DUR] [--budget USD] [--objective time|cost|cost-under-deadline]\n"
     "                  [--spot [--preemption-rate F]] [--top K] [--explain N] [--json]\n"
     "                  [--op-costs ir|formula]\n"
     "  --objective: default time; cost for the classical families (gbdt, mlp)\n"
     "  --preemption-rate: share of spot instances reclaimed a month (default 0.2)\n"
     "  --explain N: the full breakdown of candidate N of the table (1: the best)",
     "choose hardware, chip count and parallel plan; price it and say why", run_plan, NULL,
     PLAN_FLAGS, PLAN_VALUED, NULL},
    {"simulate",
     "tpusim simulate MODEL --hw NAME --chips N [--dp D --tp T --pp P --ep E]\n"
     "                  [--zero 0|1|2|3] [--fsdp] [--mbs M] [--gbs G] [--seq S]\n"
     "                  [--recompute none|selective|full] [--precision bf16|fp16|fp32|fp8|fp64]\n"
     "                  [--pp-schedule gpipe|1f1b|interleaved:V] [--reduction-server N]\n"
     "                  [--slices K] [--sp] [--full] [--grad-sync overlap|after-backward]\n"
     "                  [--attention flash|scores] [--op-costs ir|formula]\n"
     "                  [--explain] [--json] [--trace FILE]\n"
     "                  [--input tokens|images] [--storage shards|files] [--prefetch N]\n"
     "                  [--input-host local|remote]\n"
     "  --sp: sequence parallelism with tensor parallelism (Korthikanti et al. 2022)\n"
     "  --grad-sync: all-reduce gradient buckets while backward runs (default), or\n"
     "               after it (Megatron-LM's local DDP, as in its 2021-22 papers)\n"
     "  --attention: flash (default: scores stay on chip, recomputed in backward) or\n"
     "               scores (written to HBM around a fused softmax: Megatron-LM before 2022)\n"
     "  --full: every data-parallel group's all-reduce at once on the whole network\n"
     "          (default: one group stands for its symmetric peers)\n"
     "  --op-costs: each fused kernel's flops and bytes read off its lowered LLVM IR\n"
     "              (default), or from the graph's formulas (equal; no LLVM work)",
     "one training step on a given machine and plan: time, memory, MFU", run_simulate, NULL,
     SIM_FLAGS, SIM_VALUED, NULL},
    {"collective",
     "tpusim collective --hw NAME --chips N --op all-reduce|all-gather|reduce-scatter|all-to-all|\n"
     "                  broadcast|send-recv --bytes SIZE|MIN:MAX [--factor F]\n"
     "                  [--algo auto|ring|biring|torus|tree|hierarchical|nvls|reduction-server|direct|all\n"
     "                   (or a comma list)] [--slices K] [--reducers R] [--reducer-bw BYTES/S]\n"
     "                  [--axis x|y|z] [--explain] [--json]\n"
     "  SIZE: bytes with K, M, G, T (powers of 1024, as nccl-tests): 1K:16G sweeps by x2",
     "time and bus bandwidth of a collective, as nccl-tests reports it", run_collective, NULL,
     COLL_FLAGS, COLL_VALUED, NULL},
    {"graph",
     "tpusim graph MODEL [--json|--dot] [--seq S] [--gbs G] [--precision bf16|fp16|fp32|fp64|fp8]\n"
     "                   [--forward-only]\n"
     "  MODEL: a model.json, a HuggingFace config.json, an XLA HLO text file, or the name\n"
     "  of a built-in example (gpt3-175b, llama3-8b, ...; see docs/workloads.md)",
     "parameters, FLOPs and ops of one training step", run_graph, NULL, GRAPH_FLAGS,
     GRAPH_VALUED, NULL},
    {"lower",
     "tpusim lower MODEL [--op NAME] [--emit-llvm [--opt 0|1|2|3]] [--json] [--no-fusion]\n"
     "                   [--seq S] [--gbs G] [--precision P] [--forward-only]\n"
     "  each distinct op, and each distinct fused kernel, lowered to an LLVM IR\n"
     "  loop nest, with the cost counted from the IR beside the graph's formula\n"
     "  (the fusion pass's, for kernels); --emit-llvm prints the module\n"
     "  (default --opt 2: new pass manager, vectorized; --opt 0: as lowered)",
     "the LLVM IR of the lowered ops and the cost read off it", run_lower, NULL, LOWER_FLAGS,
     LOWER_VALUED, NULL},
    {"calibrate",
     "tpusim calibrate [--out FILE] [--report] [--json] [--quick]\n"
     "  times lowered kernels on this CPU (about a minute; --quick: seconds, fewer\n"
     "  kernels), fits its model and writes the hardware file 'host' to FILE\n"
     "  (default $XDG_CACHE_HOME/tpusim/host.json, else ~/.cache/tpusim/host.json);\n"
     "  use it with --hw-file FILE. --report: predicted against measured per kernel",
     "JIT-run kernels on this CPU and fit its model ('host')", run_calibrate, NULL, CALIB_FLAGS,
     CALIB_VALUED, NULL},
    {"hw",
     "tpusim hw list [--json]\n"
     "tpusim hw show NAME [--json]\n"
     "tpusim hw show --hw-file FILE [--json]    # validate and show your own file",
     "the hardware catalog: list it, or show one entry with its sources", run_hw, NULL, NULL, NULL, NULL},
    {"view",
     "tpusim view TRACE [--screenshot FILE.png [--width W --height H]] [--expand GROUP]\n"
     "tpusim view MODEL --hw NAME --chips N [simulate's plan options] [--trace FILE]\n"
     "                  [--screenshot FILE.png ...]   # simulate, then view the step",
     "SDL2 timeline viewer for a trace (simulate --trace), or of a simulated step", NULL, NULL,
     NULL, NULL, view_cmd},
    {"plot", "tpusim plot KIND ... -o FILE.png|svg   (tpusim plot --help for the kinds)",
     "gnuplot charts: roofline, scaling, memory, pareto, breakdown, collective", NULL, NULL,
     NULL, NULL, plot_main},
};
#define NCOMMANDS ((int)(sizeof COMMANDS / sizeof COMMANDS[0]))

static const char GLOBAL_OPTIONS[] =
    "Options for every subcommand:\n"
    "  --hw-file FILE   load a hardware description (repeatable); a file whose name\n"
    "                   matches a built-in entry replaces it for this run\n"
    "  --json           print one JSON object on stdout and nothing else there\n"
    "  -h, --help       help for the subcommand\n";

static void print_help(FILE *f) {
  fprintf(f,
          "tpusim %s -- TPU/GPU/CPU training simulator and planner\n\n"
          "Usage: tpusim COMMAND [ARGS] [OPTIONS]\n\nCommands:\n",
          TPUSIM_VERSION);
  for (int i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-11s %s%s\n", COMMANDS[i].name, COMMANDS[i].summary,
            COMMANDS[i].run || COMMANDS[i].raw ? "" : " [not built yet]");
  fprintf(f,
          "\n%s  --version        versions of tpusim and the libraries it runs with\n\n"
          "Exit status: 0 success, 1 bad input or infeasible request, 2 usage error.\n"
          "'tpusim COMMAND --help' shows a command's arguments. Docs: docs/ in the source tree.\n",
          GLOBAL_OPTIONS);
}

static void print_cmd_help(const cli_cmd *cmd, FILE *f) {
  fprintf(f, "Usage:\n  %s\n\n%s.\n", cmd->synopsis, cmd->summary);
  if (!cmd->run) fprintf(f, "\nNot built yet: specified in %s.\n", cmd->issue);
  fprintf(f, "\n%s", GLOBAL_OPTIONS);
}

static void print_version(FILE *f) {
  char llvm[32], sdl[64];
  lower_llvm_version(llvm, sizeof llvm);
  view_sdl_version(sdl, sizeof sdl);
  fprintf(f, "tpusim %s\nLLVM %s, cJSON %s, SDL %s\n", TPUSIM_VERSION, llvm, cJSON_Version(),
          sdl);
}

static const cli_cmd *find_cmd(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(COMMANDS[i].name, name) == 0) return &COMMANDS[i];
  return NULL;
}

static int usage_error(cli_ctx *c, const char *fmt, const char *arg) {
  fprintf(c->err, "tpusim%s%s: ", c->cmd ? " " : "", c->cmd ? c->cmd : "");
  fprintf(c->err, fmt, arg);
  fprintf(c->err, "\nTry 'tpusim %s%s--help'.\n", c->cmd ? c->cmd : "", c->cmd ? " " : "");
  return CLI_USAGE;
}

/* ---- hw ---- */

static int load_catalog(cli_ctx *c, hw_catalog **out, const hw_model **last_file) {
  diag *dg = diag_new();
  hw_catalog *cat = hw_catalog_new();
  int rc = CLI_OK;
  if (!dg || !cat) {
    fprintf(c->err, "tpusim: out of memory\n");
    rc = CLI_BAD_INPUT;
  } else if (hw_catalog_load_builtin(cat, dg) != 0) {
    fprintf(c->err, "tpusim: a built-in hardware file is invalid (a build problem):\n");
    rc = CLI_BAD_INPUT;
  }
  for (int i = 0; rc == CLI_OK && i < c->n_hw_files; i++) {
    const hw_model *m = hw_catalog_load_file(cat, c->hw_files[i], dg);
    if (!m) rc = CLI_BAD_INPUT;
    else if (last_file) *last_file = m;
  }
  if (dg) diag_print(dg, c->err);
  diag_free(dg);
  if (rc != CLI_OK) {
    hw_catalog_free(cat);
    cat = NULL;
  }
  *out = cat;
  return rc;
}

static void hw_list_text(const hw_catalog *cat, FILE *f) {
  fprintf(f, "%-10s %-4s %12s %8s %8s  %-42s %s\n", "name", "kind", "bf16 TFLOP/s",
          "HBM GiB", "HBM TB/s", "interconnect (per chip, one direction)",
          "$/chip-h (spot)");
  int no_bf16 = 0;
  for (int i = 0; i < hw_catalog_count(cat); i++) {
    const hw_model *m = hw_catalog_at(cat, i);
    char bf16[16], ic[128], price[32];
    double p = hw_peak_flops(m, HW_BF16);
    if (p > 0)
      snprintf(bf16, sizeof bf16, "%.0f", p / 1e12);
    else {
      snprintf(bf16, sizeof bf16, "-");
      no_bf16 = 1;
    }
    hw_interconnect_summary(m, ic, sizeof ic);
    snprintf(price, sizeof price, "%.2f (%.2f)", m->price.on_demand_usd_per_chip_hour,
             m->price.spot_usd_per_chip_hour);
    fprintf(f, "%-10s %-4s %12s %8.1f %8.2f  %-42s %s\n", m->name, hw_kind_name(m->kind), bf16,
            (double)m->chip.hbm_bytes / (1024.0 * 1024 * 1024), m->chip.hbm_bw_bytes_per_s / 1e12,
            ic, price);
  }
  if (no_bf16) fprintf(f, "\n'-': no bf16 unit on that chip (see 'tpusim hw show NAME').\n");
}

static char *hw_list_json(const hw_catalog *cat) {
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(root, "hardware");
  for (int i = 0; i < hw_catalog_count(cat); i++) {
    const hw_model *m = hw_catalog_at(cat, i);
    char ic[128];
    hw_interconnect_summary(m, ic, sizeof ic);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "kind", hw_kind_name(m->kind));
    cJSON_AddStringToObject(o, "vendor", m->vendor);
    double p = hw_peak_flops(m, HW_BF16);
    if (p > 0) cJSON_AddNumberToObject(o, "peak_bf16_flops_per_s", p);
    else cJSON_AddNullToObject(o, "peak_bf16_flops_per_s");
    cJSON_AddNumberToObject(o, "hbm_bytes", (double)m->chip.hbm_bytes);
    cJSON_AddNumberToObject(o, "hbm_bw_bytes_per_s", m->chip.hbm_bw_bytes_per_s);
    cJSON_AddStringToObject(o, "interconnect", ic);
    cJSON_AddNumberToObject(o, "on_demand_usd_per_chip_hour", m->price.on_demand_usd_per_chip_hour);
    cJSON_AddNumberToObject(o, "spot_usd_per_chip_hour", m->price.spot_usd_per_chip_hour);
    cJSON_AddStringToObject(o, "origin", m->origin);
    cJSON_AddItemToArray(arr, o);
  }
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  return s;
}

static int run_hw(cli_ctx *c) {
  if (c->n_pos == 0)
    return usage_error(c, "%s", "expected 'list' or 'show NAME'");
  const char *verb = c->pos[0];
  int is_list = strcmp(verb, "list") == 0, is_show = strcmp(verb, "show") == 0;
  if (!is_list && !is_show) return usage_error(c, "unknown action '%s'; expected list or show", verb);
  if (is_list && c->n_pos > 1) return usage_error(c, "'list' takes no argument, got '%s'", c->pos[1]);
  if (is_show && c->n_pos > 2) return usage_error(c, "'show' takes one NAME, got also '%s'", c->pos[2]);
  if (is_show && c->n_pos == 1 && c->n_hw_files != 1)
    return usage_error(c, "%s", "'show' needs a NAME (or exactly one --hw-file)");

  hw_catalog *cat;
  const hw_model *from_file = NULL;
  int rc = load_catalog(c, &cat, &from_file);
  if (rc != CLI_OK) return rc;

  if (is_list) {
    if (c->json) {
      char *s = hw_list_json(cat);
      fprintf(c->out, "%s\n", s);
      free(s);
    } else {
      hw_list_text(cat, c->out);
    }
  } else {
    const hw_model *m = c->n_pos == 2 ? hw_catalog_find(cat, c->pos[1]) : from_file;
    if (!m) {
      char msg[2048];
      hw_catalog_unknown(cat, c->pos[1], msg, sizeof msg);
      fprintf(c->err, "tpusim hw: %s\n", msg);
      rc = CLI_BAD_INPUT;
    } else if (c->json) {
      char *s = hw_to_json(m);
      fprintf(c->out, "%s\n", s);
      free(s);
    } else {
      hw_print_show(m, c->out);
    }
  }
  hw_catalog_free(cat);
  return rc;
}

/* ---- argument parsing ---- */

int cli_main(int argc, char **argv, FILE *out, FILE *err) {
  cli_ctx c = {.out = out, .err = err};
  if (argc < 2) {
    print_help(err);
    return CLI_USAGE;
  }
  const char *first = argv[1];
  if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0 || strcmp(first, "help") == 0) {
    if (argc > 2 && strcmp(first, "help") == 0) {
      const cli_cmd *cmd = find_cmd(argv[2]);
      if (!cmd) return usage_error(&c, "unknown command '%s'", argv[2]);
      print_cmd_help(cmd, out);
      return CLI_OK;
    }
    print_help(out);
    return CLI_OK;
  }
  if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
    print_version(out);
    return CLI_OK;
  }
  const cli_cmd *cmd = find_cmd(first);
  if (!cmd) {
    const char *names[NCOMMANDS];
    for (int i = 0; i < NCOMMANDS; i++) names[i] = COMMANDS[i].name;
    const char *s = str_suggest(first, names, NCOMMANDS);
    if (first[0] == '-') return usage_error(&c, "expected a command before option '%s'", first);
    if (s) {
      fprintf(err, "tpusim: unknown command '%s'; did you mean '%s'?\nTry 'tpusim --help'.\n",
              first, s);
      return CLI_USAGE;
    }
    return usage_error(&c, "unknown command '%s'", first);
  }
  c.cmd = cmd->name;
  if (cmd->raw) return cmd->raw(argc - 1, argv + 1, out, err);

  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      print_cmd_help(cmd, out);
      return CLI_OK;
    }
  if (!cmd->run) {
    fprintf(err,
            "tpusim %s: not built yet (specified in %s); no result is printed rather than a "
            "made-up one.\n",
            cmd->name, cmd->issue);
    return CLI_USAGE;
  }

  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      c.json = 1;
    } else if (strcmp(a, "--hw-file") == 0 || strncmp(a, "--hw-file=", 10) == 0) {
      const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !*v) return usage_error(&c, "%s", "--hw-file needs a FILE");
      if (c.n_hw_files == MAX_HW_FILES) return usage_error(&c, "%s", "at most 16 --hw-file");
      c.hw_files[c.n_hw_files++] = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      int kind = 0; /* 1 flag, 2 valued */
      for (int k = 0; cmd->flags && cmd->flags[k]; k++)
        if (strcmp(cmd->flags[k], a) == 0) kind = 1;
      for (int k = 0; cmd->valued && cmd->valued[k]; k++)
        if (strcmp(cmd->valued[k], a) == 0) kind = 2;
      if (!kind) return usage_error(&c, "unknown option '%s'", a);
      if (kind == 2 && i + 1 >= argc) return usage_error(&c, "%s needs a value", a);
      if (c.n_opts == MAX_OPTS) return usage_error(&c, "too many options at '%s'", a);
      c.opt_name[c.n_opts] = a;
      c.opt_value[c.n_opts++] = kind == 2 ? argv[++i] : "";
    } else {
      if (c.n_pos == MAX_POS) return usage_error(&c, "too many arguments at '%s'", a);
      c.pos[c.n_pos++] = a;
    }
  }
  return cmd->run(&c);
}

/* ---- graph ---- */

static const char *opt(const cli_ctx *c, const char *name) {
  for (int i = c->n_opts - 1; i >= 0; i--)
    if (strcmp(c->opt_name[i], name) == 0) return c->opt_value[i];
  return NULL;
}

/* A positive integer option; -1 after a usage message. */
static int64_t opt_count(cli_ctx *c, const char *name) {
  const char *v = opt(c, name);
  if (!v) return 0;
  char *end;
  long long n = strtoll(v, &end, 10);
  if (*end || n < 1 || n > (1LL << 40)) {
    usage_error(c, "%s expects a positive integer", name);
    return -1;
  }
  return n;
}

/* The one MODEL of graph and lower, built with --seq, --gbs, --precision
** and --forward-only; CLI_OK with *out set, or the exit code after the
** message. */
static int load_model_arg(cli_ctx *c, model **out) {
  *out = NULL;
  if (c->n_pos != 1) return usage_error(c, "%s", "expected one MODEL");
  model_opts o = {.precision = opt(c, "--precision"), .forward_only = opt(c, "--forward-only")};
  if ((o.seq_len = opt_count(c, "--seq")) < 0 || (o.global_batch = opt_count(c, "--gbs")) < 0)
    return CLI_USAGE;
  diag *dg = diag_new();
  *out = model_load(c->pos[0], &o, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  return *out ? CLI_OK : CLI_BAD_INPUT;
}

static int run_graph(cli_ctx *c) {
  if (c->json && opt(c, "--dot")) return usage_error(c, "%s", "--json and --dot: pick one");
  model *m;
  int rc = load_model_arg(c, &m);
  if (rc != CLI_OK) return rc;
  if (c->json) {
    char *s = model_summary_json(m);
    fprintf(c->out, "%s\n", s);
    free(s);
  } else if (opt(c, "--dot")) {
    model_print_dot(m, c->out);
  } else {
    model_print_summary(m, c->out);
  }
  model_free(m);
  return CLI_OK;
}

/* ---- lower ---- */

static cJSON *cost_json(const graph_cost *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "flops", graph_cost_flops(c));
  cJSON_AddNumberToObject(o, "transcendentals", c->transcendentals);
  cJSON_AddNumberToObject(o, "bytes_read", c->bytes_read);
  cJSON_AddNumberToObject(o, "bytes_written", c->bytes_written);
  return o;
}

/* The IR count beside what it is checked against (`want_key`: the graph's
** formula, or the fusion pass's cost), for one lowered function. */
static void add_costs_json(cJSON *e, double uses, const graph_cost *ir, double accessed,
                           const char *want_key, const graph_cost *want, bool ok) {
  cJSON_AddNumberToObject(e, "uses", uses);
  cJSON *irj = cost_json(ir);
  cJSON_AddNumberToObject(irj, "accessed_bytes", accessed);
  cJSON_AddItemToObject(e, "ir", irj);
  cJSON_AddItemToObject(e, want_key, cost_json(want));
  cJSON_AddBoolToObject(e, "agree", ok);
}

typedef struct {
  int kernels, ops;
  double fused_bytes, unfused_bytes;
} fusion_summary;

/* `fused`: the kernels simulate times (NULL with --no-fusion: one op a kernel). */
static fusion_summary summarize_fusion(const graph *g, const fuse_plan *fused) {
  fusion_summary s = {0};
  fuse_plan *off = fuse_graph(g, false);
  const fuse_plan *on = fused ? fused : off;
  if (on && off) {
    for (int k = 0; k < on->n_groups; k++) s.kernels += on->size[k] > 0;
    for (int k = 0; k < off->n_groups; k++) s.ops += off->size[k] > 0;
    graph_cost a = fuse_total_cost(on, g, -1), b = fuse_total_cost(off, g, -1);
    s.fused_bytes = a.bytes_read + a.bytes_written;
    s.unfused_bytes = b.bytes_read + b.bytes_written;
  }
  fuse_free(off);
  return s;
}

static int run_lower(cli_ctx *c) {
  const char *ol = opt(c, "--opt");
  int level = 2;
  if (ol) {
    if (!opt(c, "--emit-llvm")) return usage_error(c, "%s", "--opt goes with --emit-llvm");
    if (strlen(ol) != 1 || ol[0] < '0' || ol[0] > '3')
      return usage_error(c, "--opt expects 0, 1, 2 or 3, not '%s'", ol);
    level = ol[0] - '0';
  }
  if (c->json && opt(c, "--emit-llvm")) return usage_error(c, "%s", "--json and --emit-llvm: pick one");
  model *m;
  int rc = load_model_arg(c, &m);
  if (rc != CLI_OK) return rc;
  const graph *g = m->g;
  const char *want = opt(c, "--op");
  int n = graph_count(g);
  char why[160], err[512];
  if (want) {
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
      if (strcmp(graph_get(g, i)->name, want) == 0) found = i;
    if (found < 0 || !lower_supported(g, found, why, sizeof why)) {
      if (found < 0) fprintf(c->err, "tpusim lower: %s has no op named '%s' (tpusim lower %s lists the lowered ones)\n", m->name, want, c->pos[0]);
      else fprintf(c->err, "tpusim lower: op '%s': %s\n", want, why);
      model_free(m);
      return CLI_BAD_INPUT;
    }
  }
  lower_module *lm = lower_new(m->name);
  int *ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int64_t *uses = calloc((size_t)(n ? n : 1), sizeof(int64_t));
  char **sigs = calloc((size_t)(n ? n : 1), sizeof(char *));
  int nd = 0, not_lowered = 0, n_coll = 0, n_custom = 0, want_id = -1, n_fused_skipped = 0;
  char sig[1024], first_why[160] = "";
  for (int i = 0; i < n && rc == CLI_OK; i++) {
    const graph_op *op = graph_get(g, i);
    if (want ? strcmp(op->name, want) != 0 : !lower_supported(g, i, why, sizeof why)) {
      if (want || op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT) continue;
      /* collectives are the network model's; custom-calls carry declared costs */
      if (graph_op_is_collective(op->kind)) n_coll++;
      else if (op->kind == GOP_CUSTOM) n_custom++;
      else if (not_lowered++ == 0) snprintf(first_why, sizeof first_why, "%s", why);
      continue;
    }
    if (want) want_id = i;
    opcost_op_signature(g, i, sig, sizeof sig);
    int d;
    for (d = 0; d < nd; d++)
      if (strcmp(sigs[d], sig) == 0) break;
    if (d == nd) {
      if (lower_op(lm, g, i, err, sizeof err) != nd) {
        fprintf(c->err, "tpusim lower: op '%s': %s\n", op->name, err);
        rc = CLI_BAD_INPUT;
        break;
      }
      ids[nd] = i;
      sigs[nd++] = strdup(sig);
    }
    uses[d] += op->count;
  }
  /* the fusion pass's kernels of two or more ops, each distinct one
  ** lowered once as one function (after the single ops' functions) */
  fuse_plan *fp = opt(c, "--no-fusion") ? NULL : fuse_graph_dup(g);
  int nf = 0, ng = fp ? fp->n_groups : 0;
  int *fk = malloc(sizeof(int) * (size_t)(ng ? ng : 1));
  int64_t *fuses = calloc((size_t)(ng ? ng : 1), sizeof(int64_t));
  char **fsigs = calloc((size_t)(ng ? ng : 1), sizeof(char *));
  int *mem = malloc(sizeof(int) * (size_t)(n ? n : 1));
  size_t gcap = 16384;
  char *gsig = malloc(gcap);
  for (int k = 0; rc == CLI_OK && fp && k < ng; k++) {
    /* the kernel as simulate times it: its ops and the producers it recomputes */
    int nm = fuse_members(fp, g, k, mem, n ? n : 1);
    if (nm < 2) continue;
    bool has_want = false, lowerable = true;
    for (int i = 0; i < nm; i++) {
      has_want |= mem[i] == want_id;
      lowerable = lowerable && lower_supported(g, mem[i], why, sizeof why);
    }
    if (want && !has_want) continue;
    if (!lowerable) { /* it keeps the pass's cost in simulate, as its op keeps its formula here */
      n_fused_skipped++;
      continue;
    }
    bool keyed = opcost_kernel_signature(g, mem, nm, gsig, gcap);
    int d = nf;
    for (d = 0; keyed && d < nf; d++)
      if (fsigs[d] && strcmp(fsigs[d], gsig) == 0) break;
    if (!keyed || d == nf) {
      d = nf;
      if (lower_fused(lm, g, mem, nm, err, sizeof err) != nd + nf) {
        fprintf(c->err, "tpusim lower: fused kernel '%s': %s\n", graph_get(g, fp->root[k])->name,
                err);
        rc = CLI_BAD_INPUT;
        break;
      }
      fk[nf] = k;
      fsigs[nf++] = keyed ? strdup(gsig) : NULL;
    }
    fuses[d] += graph_get(g, fp->root[k])->count;
  }
  free(gsig);
  free(mem);
  if (rc == CLI_OK && lower_verify(lm, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim lower: %s\n", err); /* a lowering bug, not bad input */
    rc = CLI_BAD_INPUT;
  }
  if (rc == CLI_OK && opt(c, "--emit-llvm")) {
    if (lower_optimize(lm, level, err, sizeof err) != 0) {
      fprintf(c->err, "tpusim lower: %s\n", err);
      rc = CLI_BAD_INPUT;
    } else {
      char *ir = lower_print(lm);
      fputs(ir, c->out);
      free(ir);
    }
  } else if (rc == CLI_OK) {
    cJSON *arr = cJSON_CreateArray();
    int agree = 0;
    fusion_summary fz = summarize_fusion(g, fp);
    if (!c->json)
      fprintf(c->out, "%-34s %-14s %9s %12s %12s %12s %12s  %s\n", "op", "kind", "uses", "IR flops",
              "formula", "IR bytes", "formula", "");
    for (int d = 0; d < nd && rc == CLI_OK; d++) {
      graph_cost ir, fc = graph_op_cost(g, ids[d]);
      double accessed;
      if (lower_op_cost(lm, d, &ir, &accessed, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      agree += ok;
      const graph_op *op = graph_get(g, ids[d]);
      if (c->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", op->name);
        cJSON_AddStringToObject(e, "kind", graph_op_name(op->kind));
        cJSON_AddStringToObject(e, "signature", sigs[d]);
        add_costs_json(e, (double)uses[d], &ir, accessed, "formula", &fc, ok);
        cJSON_AddItemToArray(arr, e);
      } else {
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", op->name,
                graph_op_name(op->kind), (long long)uses[d], graph_cost_flops(&ir), graph_cost_flops(&fc),
                ir.bytes_read + ir.bytes_written, fc.bytes_read + fc.bytes_written,
                ok ? "=" : "DIFFERS");
      }
    }
    int fagree = 0;
    cJSON *farr = cJSON_CreateArray();
    for (int d = 0; d < nf && rc == CLI_OK; d++) {
      graph_cost ir, fc = fuse_group_cost(fp, g, fk[d]);
      double accessed;
      if (lower_op_cost(lm, nd + d, &ir, &accessed, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      fagree += ok;
      const char *fname = lower_fn_name(lm, nd + d);
      if (c->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "kernel", fname);
        cJSON_AddNumberToObject(e, "ops", fp->size[fk[d]]);
        add_costs_json(e, (double)fuses[d], &ir, accessed, "fusion", &fc, ok);
        cJSON_AddItemToArray(farr, e);
      } else {
        char kind[24];
        snprintf(kind, sizeof kind, "fusion(%d)", fp->size[fk[d]]);
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", fname, kind,
                (long long)fuses[d], graph_cost_flops(&ir), graph_cost_flops(&fc),
                ir.bytes_read + ir.bytes_written, fc.bytes_read + fc.bytes_written,
                ok ? "=" : "DIFFERS");
      }
    }
    if (rc == CLI_OK && c->json) {
      cJSON *root = cJSON_CreateObject();
      cJSON_AddStringToObject(root, "model", m->name);
      char ver[32];
      lower_llvm_version(ver, sizeof ver);
      cJSON_AddStringToObject(root, "llvm", ver);
      cJSON_AddNumberToObject(root, "ops_not_lowered", not_lowered);
      cJSON_AddNumberToObject(root, "collectives", n_coll);
      cJSON_AddNumberToObject(root, "custom_calls", n_custom);
      cJSON_AddNumberToObject(root, "fused_kernels_not_lowered", n_fused_skipped);
      cJSON *fj = cJSON_AddObjectToObject(root, "fusion");
      cJSON_AddBoolToObject(fj, "enabled", !opt(c, "--no-fusion"));
      cJSON_AddNumberToObject(fj, "kernels", fz.kernels);
      cJSON_AddNumberToObject(fj, "ops", fz.ops);
      cJSON_AddNumberToObject(fj, "hbm_bytes", fz.fused_bytes);
      cJSON_AddNumberToObject(fj, "unfused_hbm_bytes", fz.unfused_bytes);
      cJSON_AddItemToObject(root, "lowered", arr);
      cJSON_AddItemToObject(root, "fused_kernels", farr);
      arr = farr = NULL;
      char *s = cJSON_Print(root);
      fprintf(c->out, "%s\n", s);
      free(s);
      cJSON_Delete(root);
    } else if (rc == CLI_OK) {
      char fb[32], ub[32];
      units_bytes(fb, sizeof fb, fz.fused_bytes);
      units_bytes(ub, sizeof ub, fz.unfused_bytes);
      fprintf(c->out,
              "\nfusion: %d kernels from %d ops; HBM traffic per step %s (%s unfused, %.0f%% "
              "less)\n",
              fz.kernels, fz.ops, fb, ub,
              fz.unfused_bytes > 0 ? 100 * (1 - fz.fused_bytes / fz.unfused_bytes) : 0.0);
      fprintf(c->out, "%d distinct ops lowered; IR count equals the formula for %d of them.\n",
              nd, agree);
      if (fp)
        fprintf(c->out,
                "%d distinct fused kernels lowered; IR count equals the fusion pass's kernel "
                "cost for %d of them.\n",
                nf, fagree);
      fprintf(c->out, "%d collectives: timed by the network model, not lowered.\n", n_coll);
      fprintf(c->out, "%d custom-calls: opaque kernels with declared costs, not lowered.\n",
              n_custom);
      if (not_lowered)
        fprintf(c->out, "%d other ops not lowered (%s).\n", not_lowered, first_why);
      if (n_fused_skipped)
        fprintf(c->out, "%d fused kernels hold an op that is not lowered: they keep the fusion "
                        "pass's cost.\n", n_fused_skipped);
    }
    cJSON_Delete(arr);
    cJSON_Delete(farr);
    if (rc == CLI_OK && (agree != nd || fagree != nf)) rc = CLI_BAD_INPUT;
  }
  for (int d = 0; d < nf; d++) free(fsigs[d]);
  free(fsigs);
  free(fuses);
  free(fk);
  fuse_free(fp);
  for (int d = 0; d < nd; d++) free(sigs[d]);
  free(sigs);
  free(uses);
  free(ids);
  lower_free(lm);
  model_free(m);
  return rc;
}

/* ---- collective ---- */

static int run_collective(cli_ctx *c) {
  if (c->n_pos) return usage_error(c, "unexpected argument '%s'", c->pos[0]);
  const char *hwname = opt(c, "--hw"), *opname = opt(c, "--op"), *sizes = opt(c, "--bytes");
  if (!hwname || !opname || !sizes || !opt(c, "--chips"))
    return usage_error(c, "%s", "--hw, --chips, --op and --bytes are required");
  int64_t chips = opt_count(c, "--chips"), slices = opt_count(c, "--slices"),
          reducers = opt_count(c, "--reducers");
  if (chips < 0 || slices < 0 || reducers < 0) return CLI_USAGE;
  int op = coll_op_parse(opname);
  if (op < 0)
    return usage_error(c, "unknown --op '%s' (all-reduce, all-gather, reduce-scatter, all-to-all, "
                          "broadcast, send-recv)", opname);
  double lo, hi, factor = 2, rbw = 0;
  const char *colon = strchr(sizes, ':');
  char first[64];
  snprintf(first, sizeof first, "%.*s", colon ? (int)(colon - sizes) : (int)strlen(sizes), sizes);
  if (units_parse_bytes(first, &lo) != 0 || units_parse_bytes(colon ? colon + 1 : first, &hi) != 0 ||
      hi < lo)
    return usage_error(c, "--bytes '%s': expected SIZE or MIN:MAX such as 1K:16G", sizes);
  if (opt(c, "--factor") && (units_parse_bytes(opt(c, "--factor"), &factor) != 0 || factor <= 1))
    return usage_error(c, "%s", "--factor expects a number above 1");
  if (opt(c, "--reducer-bw") && units_parse_bytes(opt(c, "--reducer-bw"), &rbw) != 0)
    return usage_error(c, "%s", "--reducer-bw expects bytes per second, e.g. 12.5G");
  int axis = -1;
  if (opt(c, "--axis")) {
    const char *ax = opt(c, "--axis");
    axis = strcmp(ax, "x") == 0 ? 0 : strcmp(ax, "y") == 0 ? 1 : strcmp(ax, "z") == 0 ? 2 : -2;
    if (axis < 0) return usage_error(c, "--axis '%s': expected x, y or z", ax);
  }
  coll_algo algos[COLL_ALGO_COUNT];
  int n_algos = 0;
  const char *alist = opt(c, "--algo") ? opt(c, "--algo") : "auto";
  if (strcmp(alist, "all") == 0) {
    for (int a = 1; a < COLL_ALGO_COUNT; a++) algos[n_algos++] = (coll_algo)a;
  } else {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", alist);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int a = coll_algo_parse(t);
      if (a < 0 || n_algos == COLL_ALGO_COUNT)
        return usage_error(c, "unknown --algo '%s' (auto, ring, biring, torus, tree, hierarchical, "
                              "nvls, reduction-server, direct, all)", t);
      algos[n_algos++] = (coll_algo)a;
    }
  }

  hw_catalog *cat;
  int rc = load_catalog(c, &cat, NULL);
  if (rc != CLI_OK) return rc;
  const hw_model *hw = hw_catalog_find(cat, hwname);
  char err[512];
  if (!hw) {
    char msg[2048];
    hw_catalog_unknown(cat, hwname, msg, sizeof msg);
    fprintf(c->err, "tpusim collective: %s\n", msg);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  net *n = net_build(hw, chips, slices ? slices : 1, err, sizeof err);
  if (!n) {
    fprintf(c->err, "tpusim collective: %s\n", err);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  char desc[256];
  net_describe(n, desc, sizeof desc);
  cJSON *root = NULL, *results = NULL;
  if (c->json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "hw", hw->name);
    cJSON_AddNumberToObject(root, "chips", (double)chips);
    cJSON_AddStringToObject(root, "op", opname);
    cJSON_AddStringToObject(root, "network", desc);
    results = cJSON_AddArrayToObject(root, "results");
  } else {
    fprintf(c->out, "%s on %lld x %s: %s\n", opname, (long long)chips, hw->name, desc);
  }
  int ran = 0;
  for (int ai = 0; ai < n_algos && rc == CLI_OK; ai++) {
    bool header = false;
    for (double b = lo; b <= hi * (1 + 1e-12); b *= factor) {
      coll_req req = {.op = (coll_op)op, .algo = algos[ai], .bytes = b, .axis = axis,
                      .reducers = reducers, .reducer_bw = rbw};
      coll_result res;
      if (coll_run(n, &req, &res, err, sizeof err) != 0) {
        /* "all" skips what does not apply; a named algorithm must run */
        if (strcmp(alist, "all") == 0) break;
        fprintf(c->err, "tpusim collective: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      ran++;
      if (c->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "algo", coll_algo_name(res.algo));
        cJSON_AddNumberToObject(o, "bytes", b);
        cJSON_AddNumberToObject(o, "time_s", res.time_s);
        cJSON_AddNumberToObject(o, "algbw_bytes_per_s", res.algbw);
        cJSON_AddNumberToObject(o, "busbw_bytes_per_s", res.busbw);
        cJSON_AddNumberToObject(o, "formula_s", res.formula_s);
        cJSON_AddNumberToObject(o, "events", (double)res.events);
        if (opt(c, "--explain")) cJSON_AddStringToObject(o, "formula", res.formula);
        cJSON_AddItemToArray(results, o);
        continue;
      }
      if (!header) {
        fprintf(c->out, "\nalgorithm %s\n%12s %12s %12s %12s %12s\n", coll_algo_name(res.algo),
                "size", "time", "algbw GB/s", "busbw GB/s", "formula");
        header = true;
      }
      char sz[32], t[32], ft[32];
      units_bytes(sz, sizeof sz, b);
      units_seconds(t, sizeof t, res.time_s);
      units_seconds(ft, sizeof ft, res.formula_s);
      fprintf(c->out, "%12s %12s %12.2f %12.2f %12s\n", sz, t, res.algbw / 1e9, res.busbw / 1e9, ft);
      if (opt(c, "--explain")) fprintf(c->out, "%s", res.formula);
    }
  }
  if (rc == CLI_OK && ran == 0) {
    fprintf(c->err, "tpusim collective: no algorithm applies to %s on %s\n", opname, hw->name);
    rc = CLI_BAD_INPUT;
  }
  if (root) {
    if (rc == CLI_OK) {
      char *s = cJSON_Print(root);
      fprintf(c->out, "%s\n", s);
      free(s);
    }
    cJSON_Delete(root);
  }
  net_free(n);
  hw_catalog_free(cat);
  return rc;
}

/* ---- simulate ---- */

static int enum_opt(cli_ctx *c, const char *name, const char *const *choices, int dflt, int *out) {
  const char *v = opt(c, name);
  *out = dflt;
  if (!v) return 0;
  for (int i = 0; choices[i]; i++)
    if (strcmp(choices[i], v) == 0) {
      *out = i;
      return 0;
    }
  char msg[256];
  size_t k = (size_t)snprintf(msg, sizeof msg, "%s '%.64s': expected ", name, v);
  for (int i = 0; choices[i] && k < sizeof msg; i++)
    k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s", i == 0 ? "" : choices[i + 1] ? ", " : " or ",
                          choices[i]);
  usage_error(c, "%s", msg);
  return -1;
}

/* The host input pipeline from --input, --storage, --prefetch, --input-host:
** by default pre-tokenized sequences in record shards, two batches
** prefetched, a local host (docs/input.md). */
static int input_from_opts(cli_ctx *c, const hw_model *hw, int64_t seq, input_cfg *in, char *err,
                           size_t errn) {
  static const char *const KIND[] = {"tokens", "images", NULL};
  static const char *const STORAGE[] = {"shards", "files", NULL};
  static const char *const HOST[] = {"local", "remote", NULL};
  int kind, storage, host;
  if (enum_opt(c, "--input", KIND, 0, &kind) || enum_opt(c, "--storage", STORAGE, 0, &storage) ||
      enum_opt(c, "--input-host", HOST, 0, &host))
    return CLI_USAGE;
  input_defaults(in, (input_kind)kind);
  if (kind == INPUT_TOKENS && seq > 0) {
    in->bytes_per_sample = (double)seq * 4;
    in->xfer_bytes_per_sample = (double)seq * 4;
  }
  if (storage == 1) { /* one small file per sample */
    in->object_bytes = in->bytes_per_sample;
    in->read_bytes = 0;
  }
  if (opt(c, "--prefetch")) {
    char *end;
    long v = strtol(opt(c, "--prefetch"), &end, 10);
    if (*end || v < 0 || v > 64) {
      usage_error(c, "%s", "--prefetch expects 0 to 64 batches");
      return CLI_USAGE;
    }
    in->prefetch_steps = (int)v;
  }
  /* a CPU reads its own memory: no host-to-chip hop (and no input model) */
  if (hw->chip.host_link_bw_bytes_per_s <= 0) return CLI_OK;
  if (input_hop_from_hw(in, hw, host == 1, err, errn) != 0) return CLI_BAD_INPUT;
  return CLI_OK;
}

/* simulate's report: the step, its breakdown, memory with the fixes when it
** does not fit, cost; with `explain`, the per-chip pieces behind it. Also
** what `plan --explain N` prints for a candidate. */
static void print_step(FILE *out, const model *m, const hw_model *hw, const plan *p,
                       const step_result *r, bool explain) {
  char t[32];
  units_seconds(t, sizeof t, r->step_time_s);
  fprintf(out, "%s on %lld x %s: dp %lld, tp %lld, pp %lld%s, mbs %lld, gbs %lld, %lld micro-batches\n",
          m->name, (long long)p->chips, hw->name, (long long)p->dp, (long long)p->tp,
          (long long)p->pp, p->sp ? " (sp)" : "", (long long)p->mbs, (long long)p->gbs,
          (long long)r->microbatches);
  fprintf(out, "  step time        %s   MFU %.1f%%   HFU %.1f%%   %.*f %s/s\n", t,
          100 * r->mfu, 100 * r->hfu, r->tokens_per_s < 100 ? 2 : 0, r->tokens_per_s,
          m->info.unit ? m->info.unit : "tokens");
  fprintf(out, "  breakdown        compute %.3f s, exposed comm %.3f s, bubble %.3f s, "
                  "input stall %.3f s, other %.3f s\n",
          r->breakdown_s.compute, r->breakdown_s.exposed_comm, r->breakdown_s.pipeline_bubble,
          r->breakdown_s.input_stall, r->breakdown_s.other);
  char pk[32], cap[32], w[32], g[32], op[32], ac[32], tm[32];
  units_bytes(pk, sizeof pk, r->memory.peak);
  units_bytes(cap, sizeof cap, r->memory.capacity);
  units_bytes(w, sizeof w, r->memory.weights);
  units_bytes(g, sizeof g, r->memory.gradients);
  units_bytes(op, sizeof op, r->memory.optimizer);
  units_bytes(ac, sizeof ac, r->memory.activations);
  units_bytes(tm, sizeof tm, r->memory.temporary);
  fprintf(out, "  memory per chip  peak %s of %s: %s (weights %s, gradients %s, optimizer %s, "
                  "activations %s, temporary %s)\n",
          pk, cap, r->fits ? "fits" : "DOES NOT FIT", w, g, op, ac, tm);
  for (int i = 0; i < r->n_fixes; i++) {
    units_bytes(pk, sizeof pk, r->fixes[i].peak);
    char st[64] = "";
    if (r->fixes[i].step_time_s > 0)
      snprintf(st, sizeof st, ", step %.3f s (%+.1f%%)", r->fixes[i].step_time_s,
               100 * (r->fixes[i].step_time_s / r->step_time_s - 1));
    fprintf(out, "    fix %d: %s -> peak %s%s%s\n", i + 1, r->fixes[i].what, pk,
            r->fixes[i].fits ? " (fits)" : "", st);
  }
  fprintf(out, "  cost             $%.2f per hour, $%.4f per step\n", r->usd_per_hour,
          r->usd_per_step);
  if (explain) {
    fprintf(out, "\n  per chip, per micro-batch: one layer forward %.3f ms + TP comm %.3f ms; "
                    "backward %.3f ms + TP comm %.3f ms; attention core forward %.3f ms\n"
                    "  embedding+head forward %.3f ms, backward %.3f ms; pipeline send %.3f ms; "
                    "gradient all-reduce %.3f ms; optimizer %.3f ms\n",
            r->layer_fwd_s * 1e3, r->tp_comm_fwd_s * 1e3, r->layer_bwd_s * 1e3, r->tp_comm_bwd_s * 1e3,
            r->attn_core_fwd_s * 1e3, r->head_fwd_s * 1e3, r->head_bwd_s * 1e3, r->p2p_s * 1e3,
            r->dp_allreduce_s * 1e3, r->optimizer_s * 1e3);
    const opcost_stats *st = &r->op_costs;
    if (p->op_costs == OPCOST_FORMULA)
      fprintf(out, "  op costs: %lld kernels from the graph's formulas (--op-costs formula)\n",
              (long long)st->asked);
    else
      fprintf(out, "  op costs: %lld kernels read off their LLVM IR: %lld signatures lowered, "
                   "%lld from the cache; %lld with declared costs (custom-calls, collectives)%s\n",
              (long long)(st->asked - st->declared), (long long)st->lowered, (long long)st->hits,
              (long long)st->declared,
              st->differ ? "; the IR count DIFFERS from the fusion pass's for some (a bug)" : "");
  }
  if (p->full && r->full_chips > 0)
    fprintf(out, "  full machine     %lld chips on one network: the %lld data-parallel rings "
                    "at once run %.2fx one ring alone%s\n",
            (long long)r->full_chips, (long long)r->full_groups, r->full_contention,
            r->full_contention > 1.001 ? " (the all-reduce is scaled by it)" : " (no contention)");
}

/* The trace of a simulated step, written from its timeline (then freed). */
static int trace_out(FILE *f, step_timeline *tl, const step_result *r, const plan *p,
                     const model *m, const hw_model *hw, char *err, size_t errn) {
  int rc = trace_write(f, tl, r, p, m->name, hw->name);
  step_timeline_free(tl);
  if (rc != 0) snprintf(err, errn, "cannot write the trace");
  return rc;
}

static int run_simulate(cli_ctx *c) {
  if (c->n_pos != 1) return usage_error(c, "%s", "expected one MODEL");
  if (!opt(c, "--hw") || !opt(c, "--chips"))
    return usage_error(c, "%s", "--hw and --chips are required");
  plan p = {.tp = 1, .pp = 1, .ep = 1, .mbs = 0, .vp = 1, .slices = 1,
            .schedule = PLAN_1F1B, .precision = GDT_BF16};
  int64_t *counts[] = {&p.chips, &p.dp, &p.tp, &p.pp, &p.ep, &p.mbs, &p.gbs, &p.seq,
                       &p.reduction_server, &p.slices};
  static const char *const names[] = {"--chips", "--dp", "--tp", "--pp", "--ep", "--mbs",
                                      "--gbs", "--seq", "--reduction-server", "--slices"};
  for (int i = 0; i < 10; i++) {
    int64_t v = opt_count(c, names[i]);
    if (v < 0) return CLI_USAGE;
    if (v > 0) *counts[i] = v;
  }
  static const char *const RECOMPUTE[] = {"none", "selective", "full", NULL};
  static const char *const PRECISION[] = {"bf16", "fp16", "fp32", "fp8", "fp64", NULL};
  static const graph_dtype PREC_DT[] = {GDT_BF16, GDT_F16, GDT_F32, GDT_F8, GDT_F64};
  static const char *const ZERO[] = {"0", "1", "2", "3", NULL};
  static const char *const GRAD_SYNC[] = {"overlap", "after-backward", NULL};
  static const char *const ATTN[] = {"flash", "scores", NULL};
  int rec, prec, zero, gsync, attn, costs;
  if (enum_opt(c, "--recompute", RECOMPUTE, 0, &rec) || enum_opt(c, "--precision", PRECISION, 0, &prec) ||
      enum_opt(c, "--zero", ZERO, 0, &zero) || enum_opt(c, "--grad-sync", GRAD_SYNC, 0, &gsync) ||
      enum_opt(c, "--attention", ATTN, 0, &attn) || enum_opt(c, "--op-costs", OP_COSTS, 0, &costs))
    return CLI_USAGE;
  p.attention = (plan_attention)attn;
  p.op_costs = (opcost_source)costs;
  p.grad_sync = (plan_grad_sync)gsync;
  p.recompute = (plan_recompute)rec;
  p.precision = PREC_DT[prec];
  p.zero = opt(c, "--fsdp") ? 3 : zero;
  p.sp = opt(c, "--sp") != NULL;
  p.full = opt(c, "--full") != NULL;
  const char *sched = opt(c, "--pp-schedule");
  if (sched) {
    if (strcmp(sched, "gpipe") == 0) p.schedule = PLAN_GPIPE;
    else if (strcmp(sched, "1f1b") == 0) p.schedule = PLAN_1F1B;
    else if (strncmp(sched, "interleaved:", 12) == 0 && atoll(sched + 12) >= 2) {
      p.schedule = PLAN_INTERLEAVED;
      p.vp = atoll(sched + 12);
    } else {
      return usage_error(c, "--pp-schedule '%s': expected gpipe, 1f1b or interleaved:V", sched);
    }
  }
  hw_catalog *cat;
  int rc = load_catalog(c, &cat, NULL);
  if (rc != CLI_OK) return rc;
  const hw_model *hw = hw_catalog_find(cat, opt(c, "--hw"));
  if (!hw) {
    char msg[2048];
    hw_catalog_unknown(cat, opt(c, "--hw"), msg, sizeof msg);
    fprintf(c->err, "tpusim simulate: %s\n", msg);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  diag *dg = diag_new();
  model_opts mo = {.seq_len = p.seq, .precision = PRECISION[prec]};
  model *m = model_load(c->pos[0], &mo, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  char err[1024];
  step_result r;
  step_timeline tl = {0};
  input_cfg in;
  FILE *trace = NULL;
  if (m && opt(c, "--trace") && !(trace = fopen(opt(c, "--trace"), "w"))) {
    fprintf(c->err, "tpusim simulate: %s: cannot write the trace\n", opt(c, "--trace"));
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  if (!m) {
    rc = CLI_BAD_INPUT;
  } else if (plan_check(m, hw, &p, err, sizeof err) != 0 ||
             (rc = input_from_opts(c, hw, p.seq, &in, err, sizeof err)) != CLI_OK ||
             step_simulate(m, hw, &p, hw->chip.host_link_bw_bytes_per_s > 0 ? &in : NULL, &r,
                           trace ? &tl : NULL, err, sizeof err) != 0 ||
             (trace && trace_out(trace, &tl, &r, &p, m, hw, err, sizeof err) != 0) ||
             (!r.fits && step_price_fixes(m, hw, &p, &r, err, sizeof err) != 0)) {
    if (rc == CLI_USAGE) {
      model_free(m);
      hw_catalog_free(cat);
      return CLI_USAGE;
    }
    fprintf(c->err, "tpusim simulate: %s\n", err);
    rc = CLI_BAD_INPUT;
  } else if (c->json) {
    cJSON *o = step_json(m, hw, &p, &r);
    char *s = cJSON_Print(o);
    fprintf(c->out, "%s\n", s);
    free(s);
    cJSON_Delete(o);
  } else {
    print_step(c->out, m, hw, &p, &r, opt(c, "--explain") != NULL);
  }
  if (trace && fclose(trace) != 0 && rc == CLI_OK) {
    fprintf(c->err, "tpusim simulate: %s: write failed\n", opt(c, "--trace"));
    rc = CLI_BAD_INPUT;
  }
  model_free(m);
  hw_catalog_free(cat);
  return rc;
}

/* ---- plan ---- */

/* "30d", "12h", "90m", "3600s" or plain seconds; -1 if not a duration. */
static double parse_duration(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0)) return -1;
  double unit = *end == 'd' ? 86400 : *end == 'h' ? 3600 : *end == 'm' ? 60 : 1;
  if (*end && strchr("dhms", *end)) end++;
  return *end ? -1 : v * unit;
}

/* The search's progress on stderr: only on a terminal, and only once the
** search has run a second (a quick plan prints nothing extra). */
typedef struct {
  FILE *err;
  double t0_s;
  bool shown;
} plan_progress;

static void plan_progress_cb(void *ctx, const char *what, int done, int total) {
  plan_progress *pg = ctx;
  double t = units_now_s() - pg->t0_s;
  if (t < 1.0 && !pg->shown) return;
  int width = 30, fill = total > 0 ? width * done / total : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  fprintf(pg->err, "\r  %-10s [%s] %d/%d  %.1f s ", what, bar, done, total, t);
  fflush(pg->err);
  pg->shown = true;
}

/* Dollars for people: cents below $100, whole dollars above. */
static void usd_str(char *buf, size_t n, double usd) {
  snprintf(buf, n, usd < 100 ? "$%.2f" : "$%.0f", usd);
}

static void plan_row(FILE *f, int rank, const planner_cand *c) {
  static const char *const REC[] = {"none", "selective", "full"};
  char t[32], u[32];
  units_seconds(t, sizeof t, c->train_s);
  usd_str(u, sizeof u, c->train_usd);
  fprintf(f, "  %4d  %-9s %6lld %4lld %3lld %3lld %2lld %2lld %4lld %-9s %4d %9.3f %9.3f %9s %12s\n",
          rank, c->hw, (long long)c->p.chips, (long long)c->p.dp, (long long)c->p.tp,
          (long long)c->p.pp, (long long)c->p.vp, (long long)c->p.ep, (long long)c->p.mbs,
          REC[c->p.recompute], c->p.zero, c->sim.step_time_s, c->analytic_step_s, t, u);
}

static int run_plan(cli_ctx *c) {
  if (c->n_pos != 1) return usage_error(c, "%s", "expected one MODEL");
  planner_req req = {.hw_list = opt(c, "--hw"), .max_chips = 1024, .top = 5};
  int64_t chips = opt_count(c, "--chips"), maxc = opt_count(c, "--max-chips"),
          steps = opt_count(c, "--steps"), top = opt_count(c, "--top");
  if (chips < 0 || maxc < 0 || steps < 0 || top < 0) return CLI_USAGE;
  req.chips = chips;
  if (maxc) req.max_chips = maxc;
  req.steps = steps;
  if (top) req.top = (int)(top > 16 ? 16 : top);
  req.spot = opt(c, "--spot") != NULL;
  int64_t explain = opt_count(c, "--explain");
  if (explain < 0) return CLI_USAGE;
  if (explain > req.top)
    return usage_error(c, "%s", "--explain N takes a rank of the candidates table (at most --top)");
  if (opt(c, "--tokens")) {
    char *end;
    req.tokens = strtod(opt(c, "--tokens"), &end);
    if (*end || !(req.tokens > 0)) return usage_error(c, "%s", "--tokens expects a positive number, e.g. 2e12");
  }
  if (opt(c, "--budget")) {
    char *end;
    req.budget_usd = strtod(opt(c, "--budget"), &end);
    if (*end || !(req.budget_usd > 0)) return usage_error(c, "%s", "--budget expects US dollars");
  }
  if (opt(c, "--preemption-rate")) {
    char *end;
    req.preemptions_per_month = strtod(opt(c, "--preemption-rate"), &end);
    if (*end || !(req.preemptions_per_month > 0) || req.preemptions_per_month > 100)
      return usage_error(c, "%s", "--preemption-rate expects the share of instances reclaimed a month, e.g. 0.05");
    if (!req.spot) return usage_error(c, "%s", "--preemption-rate applies to --spot plans");
  }
  static const char *const OBJ[] = {"time", "cost", "cost-under-deadline", NULL};
  int obj, costs;
  if (enum_opt(c, "--objective", OBJ, 0, &obj) || enum_opt(c, "--op-costs", OP_COSTS, 0, &costs))
    return CLI_USAGE;
  req.objective = (planner_objective)obj;
  req.op_costs = (opcost_source)costs;
  if (opt(c, "--deadline")) {
    req.deadline_s = parse_duration(opt(c, "--deadline"));
    if (req.deadline_s < 0) return usage_error(c, "%s", "--deadline expects a duration: 30d, 12h, 90m");
    if (!opt(c, "--objective")) req.objective = PLANNER_COST_UNDER_DEADLINE;
  }
  if (req.objective == PLANNER_COST_UNDER_DEADLINE && req.deadline_s <= 0)
    return usage_error(c, "%s", "cost-under-deadline needs --deadline");
  hw_catalog *cat;
  int rc = load_catalog(c, &cat, NULL);
  if (rc != CLI_OK) return rc;
  diag *dg = diag_new();
  model *m = model_load(c->pos[0], NULL, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  if (!m) {
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  if (!opt(c, "--objective") && !opt(c, "--deadline")) req.objective = planner_default_objective(m);
  planner_result *r = calloc(1, sizeof *r);
  char err[1024];
  plan_progress pg = {.err = c->err, .t0_s = units_now_s()};
  if (isatty(fileno(c->err))) {
    req.progress = plan_progress_cb;
    req.progress_ctx = &pg;
  }
  int prc = r ? planner_run(m, cat, &req, r, err, sizeof err) : -1;
  if (pg.shown) fprintf(c->err, "\n");
  if (prc != 0) {
    fprintf(c->err, "tpusim plan: %s\n", r ? err : "out of memory");
    for (int i = 0; r && i < r->n_rejected; i++)
      fprintf(c->err, "  %s: %s\n", r->rejected[i].hw, r->rejected[i].reason);
    rc = CLI_BAD_INPUT;
  } else if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", m->name);
    cJSON_AddStringToObject(o, "objective", r->objective);
    cJSON *best = step_json(m, hw_catalog_find(cat, r->best.hw), &r->best.p, &r->best.sim);
    cJSON_AddStringToObject(best, "why", r->why);
    if (r->advice[0]) cJSON_AddStringToObject(best, "advice", r->advice);
    cJSON_AddNumberToObject(best, "analytic_step_time_s", r->best.analytic_step_s);
    cJSON_AddNumberToObject(best, "train_days", r->best.train_s / 86400);
    cJSON_AddNumberToObject(best, "train_usd", r->best.train_usd);
    cJSON_AddNumberToObject(best, "billed_chips", (double)r->best.billed_chips);
    if (req.spot) {
      cJSON *sp = cJSON_AddObjectToObject(best, "spot");
      cJSON_AddNumberToObject(sp, "checkpoint_write_s", r->best.ckpt_write_s);
      cJSON_AddNumberToObject(sp, "checkpoint_interval_s", r->best.ckpt_interval_s);
      cJSON_AddNumberToObject(sp, "expected_preemptions", r->best.preemptions);
      cJSON_AddNumberToObject(sp, "overhead", r->best.spot_overhead);
    }
    cJSON_AddItemToObject(o, "best", best);
    cJSON *cands = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 1; i < r->n_ranked; i++) {
      cJSON *x = step_json(m, hw_catalog_find(cat, r->ranked[i].hw), &r->ranked[i].p, &r->ranked[i].sim);
      cJSON_AddNumberToObject(x, "analytic_step_time_s", r->ranked[i].analytic_step_s);
      cJSON_AddNumberToObject(x, "train_days", r->ranked[i].train_s / 86400);
      cJSON_AddNumberToObject(x, "train_usd", r->ranked[i].train_usd);
      cJSON_AddItemToArray(cands, x);
    }
    cJSON *rej = cJSON_AddArrayToObject(o, "rejected");
    for (int i = 0; i < r->n_rejected; i++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "hw", r->rejected[i].hw);
      cJSON_AddStringToObject(x, "reason", r->rejected[i].reason);
      cJSON_AddItemToArray(rej, x);
    }
    cJSON_AddNumberToObject(o, "evaluated", (double)r->evaluated);
    cJSON_AddNumberToObject(o, "search_s", r->search_s);
    char *s = cJSON_Print(o);
    fprintf(c->out, "%s\n", s);
    free(s);
    cJSON_Delete(o);
  } else {
    const planner_cand *b = &r->best;
    char mp[32];
    units_si(mp, sizeof mp, (double)m->params, " parameters");
    fprintf(c->out, "plan for %s (%s), objective: %s\n", m->name,
            m->params > 0 ? mp : "no weight parameters", r->objective);
    char vps[48] = "", eps[48] = "";
    if (b->p.vp > 1) snprintf(vps, sizeof vps, " (interleaved x%lld)", (long long)b->p.vp);
    if (b->p.ep > 1) snprintf(eps, sizeof eps, ", ep %lld", (long long)b->p.ep);
    fprintf(c->out, "\nbest: %lld x %s   dp %lld, tp %lld%s, pp %lld%s%s, mbs %lld, %s recompute, zero %d\n",
            (long long)b->p.chips, b->hw, (long long)b->p.dp, (long long)b->p.tp,
            b->p.sp ? " (sp)" : "", (long long)b->p.pp, vps, eps, (long long)b->p.mbs,
            b->p.recompute == PLAN_RECOMPUTE_FULL ? "full"
            : b->p.recompute == PLAN_RECOMPUTE_SELECTIVE ? "selective" : "no",
            b->p.zero);
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
    fprintf(c->out, "\ncandidates (event-simulated, best first):\n"
                    "  rank  hw         chips   dp  tp  pp  V ep  mbs recompute zero  step(s)  analytic      time         cost\n");
    for (int i = 0; i < r->n_ranked; i++) plan_row(c->out, i + 1, &r->ranked[i]);
    fprintf(c->out, "\nother hardware (its best plan, analytic):\n");
    for (int i = 0; i < r->n_per_hw; i++) {
      const planner_cand *o = &r->per_hw[i];
      if (strcmp(o->hw, b->hw) == 0) continue;
      double ratio = req.objective == PLANNER_TIME ? o->train_s / b->train_s : o->train_usd / b->train_usd;
      char ot[32], ou[32];
      units_seconds(ot, sizeof ot, o->train_s);
      usd_str(ou, sizeof ou, o->train_usd);
      fprintf(c->out, "  %-9s %lld chips, tp %lld, pp %lld: %s, %s  (%.2fx the best's %s)\n",
              o->hw, (long long)o->p.chips, (long long)o->p.tp, (long long)o->p.pp, ot, ou, ratio,
              req.objective == PLANNER_TIME ? "time" : "cost");
    }
    if (explain > 0 && explain <= r->n_ranked) {
      const planner_cand *x = &r->ranked[explain - 1];
      fprintf(c->out, "\ncandidate %lld in full (%s):\n", (long long)explain,
              x->p.vp > 1 ? "interleaved 1F1B" : x->p.pp > 1 ? "1F1B" : "no pipeline");
      print_step(c->out, m, hw_catalog_find(cat, x->hw), &x->p, &x->sim, true);
    } else if (explain > 0) {
      fprintf(c->out, "\n--explain %lld: the table has %d candidates\n", (long long)explain,
              r->n_ranked);
    }
    if (r->n_rejected) fprintf(c->out, "\nrejected:\n");
    for (int i = 0; i < r->n_rejected; i++)
      fprintf(c->out, "  %s: %s\n", r->rejected[i].hw, r->rejected[i].reason);
    fprintf(c->out, "\nevaluated %lld plans in %.2f s\n", (long long)r->evaluated, r->search_s);
  }
  free(r);
  model_free(m);
  hw_catalog_free(cat);
  return rc;
}
