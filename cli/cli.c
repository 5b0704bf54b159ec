/*
** cli.c -- the command table, dispatch, help, version, and the option
** helpers every subcommand reads its command line through (cli_int.h).
**
** Each subcommand is a row (cmd_NAME.c): its name, synopsis, one-line
** summary, the options it accepts and the function that runs it. Here the
** command line of a table-driven row is checked against the row's options
** and handed to it as a cli_ctx, so every subcommand says "unknown option"
** and "needs a value" the same way.
*/
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "../base/strutil.h"
#include "../sim/framework.h"
#include "../sim/lower.h"
#include "../viz/view.h"

/* help lists them in this order */
static const cli_cmd *const COMMANDS[] = {
    &cli_cmd_plan,  &cli_cmd_simulate,  &cli_cmd_validate, &cli_cmd_collective, &cli_cmd_graph,
    &cli_cmd_lower, &cli_cmd_calibrate, &cli_cmd_hw,       &cli_cmd_view,       &cli_cmd_plot,
    &cli_cmd_serve, &cli_cmd_sweep,
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
    fprintf(f, "  %-11s %s%s\n", COMMANDS[i]->name, COMMANDS[i]->summary,
            COMMANDS[i]->run || COMMANDS[i]->raw ? "" : " [not built yet]");
  fprintf(f,
          "\n%s  --version        versions of tpusim and the libraries it runs with\n\n"
          "Exit status: 0 success, 1 bad input or nothing possible, 2 usage error,\n"
          "3 the plan does not fit in memory (simulate; the report is printed).\n"
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
    if (strcmp(COMMANDS[i]->name, name) == 0) return COMMANDS[i];
  return NULL;
}

int cli_usage_error(cli_ctx *c, const char *fmt, const char *arg) {
  fprintf(c->err, "tpusim%s%s: ", c->cmd ? " " : "", c->cmd ? c->cmd : "");
  fprintf(c->err, fmt, arg);
  fprintf(c->err, "\nTry 'tpusim %s%s--help'.\n", c->cmd ? c->cmd : "", c->cmd ? " " : "");
  return CLI_USAGE;
}

/* ---- the options of a command line ---- */

const char *cli_opt(const cli_ctx *c, const char *name) {
  for (int i = c->n_opts - 1; i >= 0; i--)
    if (strcmp(c->opt_name[i], name) == 0) return c->opt_value[i];
  return NULL;
}

int cli_input_choice(cli_ctx *c, input_choice *ch) {
  static const char *const KIND[] = {"tokens", "images", NULL};
  static const char *const STORAGE[] = {"shards", "files", NULL};
  static const char *const HOST[] = {"local", "remote", NULL};
  int kind, storage, host;
  int64_t prefetch = 0;
  if (cli_enum_opt(c, "--input", KIND, 0, &kind) || cli_enum_opt(c, "--storage", STORAGE, 0, &storage) ||
      cli_enum_opt(c, "--input-host", HOST, 0, &host) || cli_opt_int(c, "--prefetch", 0, 64, &prefetch))
    return CLI_USAGE;
  *ch = (input_choice){.kind = cli_opt(c, "--input") ? 1 + kind : 0, .files = storage == 1,
                       .remote = host == 1, .has_prefetch = cli_opt(c, "--prefetch") != NULL,
                       .prefetch = (int)prefetch};
  return CLI_OK;
}

int cli_model_sets(cli_ctx *c, model_opts *o, const char **buf) {
  int n = 0;
  for (int i = 0; i < c->n_opts; i++) {
    if (strcmp(c->opt_name[i], "--set") != 0) continue;
    if (n == MODEL_MAX_SETS) {
      char lim[32];
      snprintf(lim, sizeof lim, "%d", MODEL_MAX_SETS);
      return cli_usage_error(c, "--set given more than %s times", lim);
    }
    buf[n++] = c->opt_value[i];
  }
  o->set = buf;
  o->n_set = n;
  return CLI_OK;
}

int cli_model_finetune(cli_ctx *c, model_opts *o, int f) {
  int k;
  if (cli_enum_opt(c, "--finetune", wl_method_names, WL_FULL, &k) ||
      cli_opt_int(c, "--lora-rank", 1, 1 << 16, &o->lora_rank))
    return CLI_USAGE;
  o->finetune = cli_opt(c, "--finetune");
  o->lora_targets = cli_opt(c, "--lora-targets");
  if ((o->lora_rank > 0 || o->lora_targets) && k == WL_FULL)
    return cli_usage_error(c, "%s", "--lora-rank and --lora-targets need --finetune lora or qlora");
  if (k != WL_FULL && !o->lora_targets && f >= 0 && frameworks[f].lora_targets) {
    o->lora_targets = frameworks[f].lora_targets;
    o->lora_lenient = true;
    if (o->lora_rank == 0) o->lora_rank = frameworks[f].lora_rank;
  }
  return CLI_OK;
}

const num_range CLI_MOE_IMBALANCE = {NUM_REAL, 1, 65536, false};

int cli_opt_num(cli_ctx *c, const char *name, num_range r, double *out) {
  const char *v = cli_opt(c, name);
  char err[320];
  if (!v) return CLI_OK;
  if (num_parse(name, v, r, out, err, sizeof err) != 0) return cli_usage_error(c, "%s", err);
  return CLI_OK;
}

int cli_weight_opts(cli_ctx *c, plan *p) {
  static const char *const WEIGHT_DTYPE[] = {"fp32", "bf16", NULL};
  int wdt;
  int64_t tiles = 0;
  if (cli_enum_opt(c, "--weight-dtype", WEIGHT_DTYPE, 0, &wdt) ||
      cli_opt_int(c, "--vocab-tiling", 1, CLI_MAX_SEQ, &tiles))
    return CLI_USAGE;
  p->bf16_weights = wdt == 1;
  p->vocab_tiles = tiles;
  /* Megatron-Core's spellings: the switch, and its limit (0: every
  ** micro-batch, its default), which means nothing without it */
  p->defer_embedding_wgrad = cli_opt(c, "--defer-embedding-wgrad-compute") != NULL;
  if (cli_opt_int(c, "--wgrad-deferral-limit", 0, CLI_MAX_BATCH, &p->wgrad_deferral_limit))
    return CLI_USAGE;
  if (cli_opt(c, "--wgrad-deferral-limit") && !p->defer_embedding_wgrad)
    return cli_usage_error(c, "%s", "--wgrad-deferral-limit limits --defer-embedding-wgrad-compute "
                           "(give both, as Megatron-Core's arguments)");
  /* on or off over the framework's recipes (plan_check: a low-precision
  ** recipe, a chip with the measured rate) */
  static const char *const ONOFF[] = {"off", "on", NULL};
  int fa;
  if (cli_enum_opt(c, "--fp8-dot-product-attention", ONOFF, 0, &fa)) return CLI_USAGE;
  if (cli_opt(c, "--fp8-dot-product-attention"))
    p->fp8_attention = fa == 1 ? PLAN_FP8_ATTN_ON : PLAN_FP8_ATTN_OFF;
  return CLI_OK;
}

int cli_opt_int(cli_ctx *c, const char *name, int64_t lo, int64_t hi, int64_t *out) {
  const char *v = cli_opt(c, name);
  char err[320];
  if (!v) return CLI_OK;
  if (num_parse_int(name, v, lo, hi, out, err, sizeof err) != 0) return cli_usage_error(c, "%s", err);
  return CLI_OK;
}

int cli_enum_opt(cli_ctx *c, const char *name, const char *const *choices, int dflt, int *out) {
  const char *v = cli_opt(c, name);
  *out = dflt;
  if (!v) return 0;
  for (int i = 0; choices[i]; i++)
    if (strcmp(choices[i], v) == 0) {
      *out = i;
      return 0;
    }
  char msg[512];
  size_t k = (size_t)snprintf(msg, sizeof msg, "%s '%.64s': expected ", name, v);
  int n = 0;
  for (int i = 0; choices[i] && k < sizeof msg; i++, n++)
    k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s",
                          i == 0 ? "" : choices[i + 1] ? ", " : " or ", choices[i]);
  const char *near = str_suggest(v, choices, n); /* the nearest choice, when a typo */
  if (near && k < sizeof msg) snprintf(msg + k, sizeof msg - k, " (did you mean '%s'?)", near);
  cli_usage_error(c, "%s", msg);
  return -1;
}

/* ---- what the options name ---- */

int cli_load_model(cli_ctx *c, model **out) {
  *out = NULL;
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one MODEL");
  model_opts o = {.precision = cli_opt(c, "--precision"),
                  .forward_only = cli_opt(c, "--forward-only")};
  const char *sets[MODEL_MAX_SETS];
  if (cli_opt_int(c, "--seq", 1, CLI_MAX_SEQ, &o.seq_len) ||
      cli_opt_int(c, "--gbs", 1, CLI_MAX_BATCH, &o.global_batch) || cli_model_sets(c, &o, sets) ||
      cli_model_finetune(c, &o, -1))
    return CLI_USAGE;
  diag *dg = diag_new();
  *out = model_load(c->pos[0], &o, dg);
  diag_print(dg, c->err);
  diag_free(dg);
  if (*out && cli_model_flags(c, *out) != CLI_OK) { /* --seq for an MLP, --gbs for HLO */
    model_free(*out);
    *out = NULL;
  }
  return *out ? CLI_OK : CLI_BAD_INPUT;
}

int cli_load_catalog_as(cli_ctx *c, const char *who, hw_catalog **out,
                        const hw_model **last_file) {
  diag *dg = diag_new();
  hw_catalog *cat = hw_catalog_new();
  int rc = CLI_OK;
  if (!dg || !cat) {
    fprintf(c->err, "%s: out of memory\n", who);
    rc = CLI_BAD_INPUT;
  } else if (hw_catalog_load_builtin(cat, dg) != 0) {
    fprintf(c->err, "%s: a built-in hardware file is invalid (a build problem):\n", who);
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

int cli_load_catalog(cli_ctx *c, hw_catalog **out, const hw_model **last_file) {
  return cli_load_catalog_as(c, "tpusim", out, last_file);
}

/* ---- dispatch ---- */

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
      if (!cmd) return cli_usage_error(&c, "unknown command '%s'", argv[2]);
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
    for (int i = 0; i < NCOMMANDS; i++) names[i] = COMMANDS[i]->name;
    const char *s = str_suggest(first, names, NCOMMANDS);
    if (first[0] == '-') return cli_usage_error(&c, "expected a command before option '%s'", first);
    if (s) {
      fprintf(err, "tpusim: unknown command '%s'; did you mean '%s'?\nTry 'tpusim --help'.\n",
              first, s);
      return CLI_USAGE;
    }
    return cli_usage_error(&c, "unknown command '%s'", first);
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
      if (!v || !*v) return cli_usage_error(&c, "%s", "--hw-file needs a FILE");
      if (c.n_hw_files == CLI_MAX_HW_FILES)
        return cli_usage_error(&c, "%s", "at most 16 --hw-file");
      c.hw_files[c.n_hw_files++] = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      int kind = 0; /* 1 flag, 2 valued */
      for (int k = 0; cmd->flags && cmd->flags[k]; k++)
        if (strcmp(cmd->flags[k], a) == 0) kind = 1;
      for (int k = 0; cmd->valued && cmd->valued[k]; k++)
        if (strcmp(cmd->valued[k], a) == 0) kind = 2;
      if (!kind) return cli_usage_error(&c, "unknown option '%s'", a);
      if (kind == 2 && i + 1 >= argc) return cli_usage_error(&c, "%s needs a value", a);
      if (c.n_opts == CLI_MAX_OPTS) return cli_usage_error(&c, "too many options at '%s'", a);
      c.opt_name[c.n_opts] = a;
      c.opt_value[c.n_opts++] = kind == 2 ? argv[++i] : "";
    } else {
      if (c.n_pos == CLI_MAX_POS) return cli_usage_error(&c, "too many arguments at '%s'", a);
      c.pos[c.n_pos++] = a;
    }
  }
  return cmd->run(&c);
}

void cli_print_json(cli_ctx *c, cJSON *o) {
  char *s = cJSON_Print(o);
  if (s) fprintf(c->out, "%s\n", s);
  free(s);
  cJSON_Delete(o);
}
