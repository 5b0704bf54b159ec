/*
** cli_int.h -- what the files of cli/ share, private to them (the program's
** API is cli.h).
**
** cli.c owns the command table, dispatch, help and version, and parses
** every table-driven command line into a cli_ctx: positional arguments,
** --json, --hw-file, and the command's own options as given. Each
** cmd_NAME.c owns one subcommand: its row of the table (synopsis, summary,
** the options it accepts) and the function that runs it, which reads the
** options through the helpers below, calls the library and prints.
*/
#ifndef TPUSIM_CLI_INT_H
#define TPUSIM_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "../base/num.h"
#include "../hw_models/hw_catalog.h"
#include "../sim/input.h"
#include "../sim/plan.h"
#include "../sim/step.h"
#include "../workloads/model.h"

#define CLI_MAX_POS 8
#define CLI_MAX_HW_FILES 16
#define CLI_MAX_OPTS 32

typedef struct {
  FILE *out, *err;
  const char *cmd; /* "hw" */
  int json;
  const char *hw_files[CLI_MAX_HW_FILES];
  int n_hw_files;
  const char *pos[CLI_MAX_POS];
  int n_pos;
  /* the command's own options, as given: "--seq" -> "8192", "--dot" -> "" */
  const char *opt_name[CLI_MAX_OPTS];
  const char *opt_value[CLI_MAX_OPTS];
  int n_opts;
} cli_ctx;

/* A subcommand: its name, synopsis, one-line summary, the options it
** accepts and the function that runs it. A subcommand whose issue has not
** landed has no function and says so (exit 2) instead of printing a
** made-up number. */
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

/* The rows, one per cmd_NAME.c; cli.c lists them in help's order. */
extern const cli_cmd cli_cmd_plan, cli_cmd_simulate, cli_cmd_validate, cli_cmd_collective,
    cli_cmd_graph, cli_cmd_lower, cli_cmd_calibrate, cli_cmd_hw, cli_cmd_view, cli_cmd_plot,
    cli_cmd_serve, cli_cmd_sweep;

/* `tpusim plot sweep ...` (cmd_plot_sweep.c), which `tpusim plot` hands on. */
int cli_plot_sweep(int argc, char **argv, FILE *out, FILE *err);

/* ---- options (cli.c) ---- */

/* The value of the last `name` given ("" for a flag), or NULL. */
const char *cli_opt(const cli_ctx *c, const char *name);
/* Every --set FIELD=VALUE given, in order, into o (model_opts' set list,
** pointing into c); CLI_USAGE past MODEL_MAX_SETS. */
int cli_model_sets(cli_ctx *c, model_opts *o, const char **buf);
/* --finetune full|lora|qlora, --lora-rank N and --lora-targets LIST into o;
** under lora or qlora without --lora-targets, framework f's default
** targets and rank (framework.lora_targets; f -1: none), which the model
** file's own lora block overrides. CLI_USAGE for a bad value or a rank or
** targets without --finetune lora|qlora. */
int cli_model_finetune(cli_ctx *c, model_opts *o, int f);
/* --input tokens|images, --storage shards|files, --input-host
** local|remote and --prefetch N into ch (sim/input.h), for simulate and
** plan alike; CLI_USAGE for a bad value. */
int cli_input_choice(cli_ctx *c, input_choice *ch);
/* --weight-dtype fp32|bf16 and --vocab-tiling N (MaxText's weight_dtype and
** num_vocab_tiling), --defer-embedding-wgrad-compute with
** --wgrad-deferral-limit N and --fp8-dot-product-attention on|off
** (Megatron-Core's) into p; plan_check says whether the model and chip
** take them. CLI_USAGE for a bad value. */
int cli_weight_opts(cli_ctx *c, plan *p);
/* The flags given that do not act on m's kind of model (a recompute policy
** for an MLP, a batch for an HLO module): the first refused with what it
** acts on and what m is, CLI_BAD_INPUT; else CLI_OK (model_flags.c). */
int cli_model_flags(cli_ctx *c, const model *m);
/* "tpusim CMD: " fmt (with arg), then where to look; returns CLI_USAGE. */
int cli_usage_error(cli_ctx *c, const char *fmt, const char *arg);
/* The ranges of the numeric options, one place for each limit. */
#define CLI_MAX_CHIPS (1LL << 20) /* chips, and dp/tp/pp/ep/slices within them: 10x the largest machines built */
#define CLI_MAX_BATCH (1LL << 32) /* --gbs, --mbs: the model file's global_batch limit */
/* --seq: the model file allows seq_len up to 2^24, but a transformer's
** attention scores (batch x heads x seq^2) pass the graph's 2^50 elements
** long before that; 2^20 (1M tokens, the longest contexts trained) keeps
** the refusal one message instead of the graph's per-layer errors. */
#define CLI_MAX_SEQ (1LL << 20)
/* a count of decoder layers (--offload activations:N); plan_check holds it
** under the model's own count */
#define CLI_MAX_LAYERS (1LL << 20)

/* The integer option `name` into *out, which stays as it is when the
** option is absent: CLI_OK, or CLI_USAGE after a message naming the value
** and the range lo..hi (base/num.h). */
int cli_opt_int(cli_ctx *c, const char *name, int64_t lo, int64_t hi, int64_t *out);
/* The same for a real, a size or a duration within r. */
int cli_opt_num(cli_ctx *c, const char *name, num_range r, double *out);
/* --moe-imbalance's range: 1 (even) or more; sim/plan.c bounds it by the
** plan's ep (plan_moe_imbalance_max) */
extern const num_range CLI_MOE_IMBALANCE;
/* The index of the option's value in choices (NULL-terminated), dflt when
** absent; 0, or -1 after a usage message naming the choices. */
int cli_enum_opt(cli_ctx *c, const char *name, const char *const *choices, int dflt, int *out);

/* The built-in catalog with the --hw-file files (c->hw_files) over it;
** *last_file: the entry of the last file (may be NULL). CLI_OK, or the
** exit code after the messages (*out NULL), which begin "tpusim: ". */
int cli_load_catalog(cli_ctx *c, hw_catalog **out, const hw_model **last_file);
/* The same, its own messages beginning `who` and ": " ("tpusim plot"). */
int cli_load_catalog_as(cli_ctx *c, const char *who, hw_catalog **out,
                        const hw_model **last_file);
/* The one MODEL of graph and lower, built with --seq, --gbs, --precision
** and --forward-only; CLI_OK with *out set, or the exit code after the
** message. */
int cli_load_model(cli_ctx *c, model **out);

/* ---- shared between subcommands ---- */

/* --op-costs' values, in opcost_source order (simulate, plan). */
extern const char *const CLI_OP_COSTS[];
/* simulate's options, which `view MODEL` passes on to it. */
extern const char *const CLI_SIM_FLAGS[], *const CLI_SIM_VALUED[];

/* simulate's report of one step (cmd_simulate.c); also what `plan
** --explain N` prints for a candidate. */
/* `--json`: prints o, formatted, as the one object on stdout, and frees it. */
void cli_print_json(cli_ctx *c, cJSON *o);

void cli_print_step(FILE *out, const model *m, const hw_model *hw, const plan *p,
                    const step_result *r, bool explain);

#endif
