/*
** runs.h -- a table of training runs (the columns of
** shared/reference/public-runs*.csv) read with the line:column of every
** cell, each row turned into the `tpusim simulate` command a user would
** type through one mapping (tests/validation/mapping.csv: data, not code)
** and run in-process through cli_main.
**
** One reader for the format, shared by `tpusim validate` (compare each
** row with its measured step time) and `tpusim calibrate --runs` (fit a
** hardware entry's efficiencies to the rows). Private to cli/.
*/
#ifndef TPUSIM_CLI_RUNS_H
#define TPUSIM_CLI_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#include "cli_int.h"
#include "../base/csv.h"
#include "../base/diag.h"

#define RUNS_MAX_SETS 12 /* a family template's sizes: layers ... experts */
#define RUNS_PATH_MAX 1024
#define RUNS_CMD_MAX 2048

extern const char RUNS_DEFAULT_MAPPING[], RUNS_DEFAULT_MODELS[];
/* What a CSV of runs may hold (every row a simulation): tables of runs,
** the mapping, serving measurements. */
extern const csv_limits RUNS_CSV;

/* Where the mapping and the model files are read from. */
typedef struct {
  const char *mapping, *models; /* into the buffers, the options or the defaults */
  char mapping_buf[RUNS_PATH_MAX + 64], models_buf[2 * RUNS_PATH_MAX + 64];
} runs_paths;
/* --mapping and --models as given, else the source tree's defaults
** (RUNS_DEFAULT_*): relative to the working directory when it is the
** tree's root, else to the tree the running binary sits at the root of, so
** `tpusim validate` and `calibrate --runs` work from any folder. CLI_OK,
** or CLI_USAGE (reported) for an empty --models. */
int runs_paths_of(cli_ctx *c, runs_paths *p);

/* the mapping, read from its CSV (runs.c) */
typedef struct runs_mapping runs_mapping;

/* ---- a row of a table of runs ---- */

/* The columns read; the first RUNS_C_REQUIRED must be there (the columns
** of shared/reference/public-runs.csv), the rest may be. dp is not read:
** Megatron's chips = dp x tp x pp x cp gives it, and MaxText tables count
** only the replicated axis in it (public-runs-modern.md). */
enum { RUNS_C_ID, RUNS_C_SOURCE, RUNS_C_CHIP, RUNS_C_CHIPS, RUNS_C_MODEL, RUNS_C_PARAMS,
       RUNS_C_LAYERS, RUNS_C_HEADS, RUNS_C_KV_HEADS, RUNS_C_SEQ, RUNS_C_GBS, RUNS_C_MBS, RUNS_C_TP,
       RUNS_C_PP, RUNS_C_CP, RUNS_C_VP, RUNS_C_SP, RUNS_C_ZERO, RUNS_C_RECOMPUTE, RUNS_C_PRECISION,
       RUNS_C_MEASURED, RUNS_C_REQUIRED, RUNS_C_EP = RUNS_C_REQUIRED, RUNS_C_EXPERTS,
       RUNS_C_EXTRA, RUNS_C_NCOLS };

/* One row, its cells checked: -1 where the row says '?'. */
typedef struct {
  int rec; /* its record in the table */
  const char *id, *source, *chip, *model, *recompute, *precision;
  const char *extra;  /* the row's notes ("" when the table has none): the mapping's offload */
  int64_t chips, layers, heads, kv_heads, seq, gbs, tp, pp, cp, vp, ep, experts;
  double mbs, params_b, measured_s;
  int sp;             /* 0, 1, 2 for "1?" (the recipe's: with tp > 1), -1 */
  int zero;           /* ZeRO stage 0-3, -1 not stated */
  bool fsdp;          /* FSDP (zero_or_fsdp "fsdp" or "fsdpN") */
  int64_t fsdp_n;     /* its shard degree as the row counts it (devices), 0: all */
  int bad_line;       /* a cell of it was refused (reported with its line:column): its
                      ** line; the row does not run, the others do (runs_open per_row) */
} runs_row;

/* An argument list with its strings in one buffer. */
typedef struct {
  char buf[RUNS_CMD_MAX];
  size_t used;
  char *v[96];
  int n;
  bool full; /* something did not fit: the row is refused, never cut */
} runs_argv;

typedef enum { RUNS_OK, RUNS_NO_FIT, RUNS_FAILS, RUNS_NOT_EXPRESSIBLE } runs_status;
/* "ok", "does_not_fit", "does_not_run", "not_expressible" */
extern const char *const RUNS_STATUS_NAMES[];

/* What a row gives when run. */
typedef struct {
  runs_row w;
  runs_status status;
  const char *hw, *framework; /* borrowed from the mapping or the row */
  char model_path[RUNS_PATH_MAX];
  /* a family template's --set FIELD=VALUE (the row's sizes; mapping kind family) */
  char sets[RUNS_MAX_SETS][128]; /* FIELD=VALUE: a 63-byte field, a 60-byte cell */
  int n_sets;
  double simulated_s, error; /* error: (simulated - measured) / measured */
  double model_params_b;     /* the loaded model's parameters (0: not loaded) */
  char msg[400];             /* why it does not run, or is not expressible */
  char cmd[RUNS_CMD_MAX + 512]; /* the command, quoted for a shell */
  char exercises[256];          /* the features the row exercises, for the docs */
  char *extra_joined;           /* owned: the extra cell of a row whose notes hold
                                ** unquoted commas, its cells joined again */
} runs_result;

/* A table of runs with its mapping, read and checked. */
typedef struct {
  cli_ctx *c;
  csv_table *t;
  runs_mapping *map;
  const char *models; /* the --models search path, DIR:DIR:... */
  int col[RUNS_C_NCOLS]; /* the table's column of each of the columns, or -1 */
  runs_result *r;
  int n;
  int n_read; /* the rows read (n may be fewer: validate --only); runs_close frees them */
} runs_table;

/* Reads file (a table of runs) and mfile (the mapping) into x: every bad
** cell reported to dg with its line:column; `purpose` ends the message for
** a header with no rows ("nothing to validate"). 0, or -1 after
** reporting. per_row: a row with a bad cell (or an id seen before) is kept
** with w.bad_line set, to be reported as not running, and the table still
** opens (validate: one malformed row of a hundred costs that row); else
** the table is refused (calibrate fits on every row or none). *bad_rows:
** how many were so kept. x is to be closed either way. */
int runs_open(runs_table *x, cli_ctx *c, const char *file, const char *mfile, const char *models,
              const char *purpose, bool per_row, int *bad_rows, diag *dg);
void runs_close(runs_table *x);
/* The file the mapping was read from. */
const char *runs_mapping_file(const runs_table *x);

/* The command of row r into a (argv for cli_main) and r->cmd (for a
** shell); the --hw-file files of x->c go to every row. 0, or -1 with
** r->status and r->msg when the row cannot be put as a command. */
int runs_build_args(const runs_table *x, runs_result *r, runs_argv *a);
/* One more argument (printf-style); a->full when it does not fit. */
void runs_arg(runs_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs a's command through simulate's entry point with --json and reads
** its step time into r (status, simulated_s, error, or msg). check_model:
** also load the model for its parameter count (r->model_params_b). */
void runs_simulate(runs_result *r, runs_argv *a, bool check_model);
/* Builds and simulates every row. */
void runs_simulate_all(const runs_table *x);

/* The text of row rec's column c ("" when the table has no such column). */
const char *runs_cell_text(const runs_table *x, int rec, int c);
/* "?" and "" (not stated) */
bool runs_unknown(const char *s);
/* printf appended to buf (n bytes), cut at its end. */
void runs_addf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
