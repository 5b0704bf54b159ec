/*
** plot.h -- charts of the simulator's results through gnuplot (a runtime
** tool, found on PATH); `tpusim plot` (cli/cmd_plot.c) is its front end.
**
** Kinds: roofline, scaling, memory, pareto (the planner's time-versus-cost
** frontier), breakdown, collective. Each
** writes FILE.png or FILE.svg (by the extension of the output) and keeps
** FILE.dat (the data, fixed formats) and FILE.gp (the gnuplot script)
** beside it; the script names its files relative to its own folder, so
** `cd DIR && gnuplot FILE.gp` re-draws the picture after an edit.
**
** No state: every call builds what it needs and frees it. The caller
** parses the command line and loads the catalog and the model; messages go
** to the err stream given, prefixed "tpusim plot".
**
** Plot reads no file of its own: the model and any --hw-file come through
** model_load and the catalog, with their size limits (docs/limits.md); it
** writes FILE.dat and FILE.gp and reads only gnuplot's messages, of which
** it keeps the first 4 KB.
*/
#ifndef TPUSIM_PLOT_H
#define TPUSIM_PLOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../hw_models/hw_catalog.h"
#include "../planner/planner.h"
#include "../workloads/model.h"

typedef enum {
  PLOT_ROOFLINE,
  PLOT_SCALING,
  PLOT_MEMORY,
  PLOT_PARETO,
  PLOT_BREAKDOWN,
  PLOT_COLLECTIVE,
  PLOT_KIND_COUNT
} plot_kind;

/* What a kind needs from its caller (plot_kind_needs), beyond the output. */
enum {
  PLOT_NEEDS_MODEL = 1,     /* a MODEL */
  PLOT_NEEDS_HW = 2,        /* --hw NAME, one chip (pareto's --hw is a list, optional) */
  PLOT_NEEDS_CHIPS = 4,     /* --chips N */
  PLOT_NEEDS_MAX_CHIPS = 8, /* --max-chips N */
  PLOT_NEEDS_OP = 16,       /* --op OP */
};

/* The kind named name ("roofline"), or -1. */
int plot_kind_parse(const char *name);
const char *plot_kind_name(plot_kind k);
unsigned plot_kind_needs(plot_kind k);

enum { PLOT_PATH = 1024 };

/* Where a chart goes, and the gnuplot that draws it. */
typedef struct {
  char dir[PLOT_PATH];  /* folder of the output ("." when none) */
  char name[PLOT_PATH]; /* base name of the output without the extension */
  char ext[8];          /* "png" or "svg" */
  bool svg;
  char dat_path[PLOT_PATH + 8], gp_path[PLOT_PATH + 8], img_path[PLOT_PATH + 8];
  char gnuplot[PLOT_PATH + 16]; /* the executable */
} plot_output;

/* Splits path (FILE.png or FILE.svg: no control characters, the extension
** decides the terminal) into o's files and finds gnuplot on PATH. 0, or 1
** after a message to err. */
int plot_output_init(plot_output *o, const char *path, FILE *err);

typedef struct {
  plot_kind kind;
  const model *m;        /* the model (every kind but collective), loaded with seq and gbs */
  const hw_catalog *cat; /* the catalog (pareto searches it) */
  const hw_model *hw;    /* the chip (every kind but pareto) */
  const char *hw_list;   /* pareto: the hardware to search, a comma list (NULL: all) */
  const char *op;        /* collective: the operation's name, checked here */
  int64_t chips, max_chips, seq, gbs, batch_per_chip; /* 0: not given */
  /* the command line after `tpusim` ("plot", KIND, ...), echoed at the
  ** top of the script */
  int argc;
  char **argv;
  /* pareto from a saved `plan --pareto --json` instead of a search: its
  ** frontier (hw, plan sizes, train_s, train_usd read back) and the model's
  ** name; m may then be NULL */
  const planner_cand *front;
  int n_front;
  const char *front_model;
} plot_req;

/* Writes o's data and script for r, then runs gnuplot on them (its
** warnings go to err). Returns 0, 1 (bad input, gnuplot failing, a file
** that cannot be written) or 2 (an --op no collective has). */
int plot_draw(const plot_req *r, const plot_output *o, FILE *out, FILE *err);

/* ---- a study's results (plot_sweep.c) ---- */

/* `tpusim plot sweep RESULTS.csv`: the CSV `tpusim sweep` wrote. Lines of
** the best training time (or cost) against one swept parameter, a line per
** model (and hardware); or, for two parameters, a heatmap per model of the
** speed-up over the base point (each parameter at 1, else its first value). x / heat: the parameters ("chips",
** an override key; heat "A,B"), NULL to choose: a heatmap of the first two
** that vary, else lines over the one that does. */
typedef struct {
  const char *results;
  const char *x, *heat;
  bool cost; /* dollars instead of days */
  int argc;
  char **argv;
} plot_sweep_req;

/* 0, 1 (bad input, with file:line and what was expected; gnuplot failing)
** or 2 (a parameter the results do not have). */
int plot_sweep_draw(const plot_sweep_req *r, const plot_output *o, FILE *out, FILE *err);

/* The script's first lines (terminal, output, DAT) and the gnuplot run,
** shared by the kinds. */
void plot_script_header(const plot_output *o, int argc, char **argv, FILE *gp);
int plot_run_gnuplot(const plot_output *o, FILE *out, FILE *err);

#endif
