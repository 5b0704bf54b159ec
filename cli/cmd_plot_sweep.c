/*
** cmd_plot_sweep.c -- `tpusim plot sweep RESULTS.csv -o FILE.png`: the
** command line of the study's pictures (viz/plot.h, plot_sweep.c draws).
*/
#include "cli_int.h"

#include <string.h>

#include "../viz/plot.h"

static const char USAGE[] =
    "Usage: tpusim plot sweep RESULTS.csv -o FILE.png|FILE.svg [--x PARAM | --heat A,B] [--y time|cost]\n"
    "\n"
    "The results of `tpusim sweep STUDY.json --out PREFIX` (PREFIX.csv): the best time (or cost)\n"
    "to train against one swept parameter, a line per model (and hardware); or for two\n"
    "parameters a heatmap per model of the speed-up over the base point (each parameter\n"
    "at 1, the hardware as it is, else at its first value). Without --x or --heat: a\n"
    "heatmap of the first two parameters that vary, else lines over the one.\n"
    "Parameters: the study's override keys and chips. Other swept parameters are taken at\n"
    "their best. FILE.dat and FILE.gp are kept beside the picture. docs/sweep.md.\n";

/* argv[0] = "plot", argv[1] = "sweep". */
int cli_plot_sweep(int argc, char **argv, FILE *out, FILE *err) {
  cli_ctx ctx = {.out = out, .err = err, .cmd = "plot sweep"}, *c = &ctx;
  plot_sweep_req q = {.argc = argc, .argv = argv};
  const char *output = NULL, *y = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(USAGE, out);
      return CLI_OK;
    }
    const char **dst = strcmp(a, "-o") == 0 ? &output : strcmp(a, "--x") == 0 ? &q.x
                       : strcmp(a, "--heat") == 0 ? &q.heat : strcmp(a, "--y") == 0 ? &y : NULL;
    if (dst && i + 1 >= argc) return cli_usage_error(c, "%s needs a value", a);
    if (dst) *dst = argv[++i];
    else if (a[0] == '-') return cli_usage_error(c, "unknown option '%s' (-o, --x, --heat, --y)", a);
    else if (q.results) return cli_usage_error(c, "unexpected argument '%s' (one RESULTS.csv)", a);
    else q.results = a;
  }
  if (!q.results) return cli_usage_error(c, "%s", "expected RESULTS.csv (what `tpusim sweep --out PREFIX` wrote)");
  if (!output || !*output) return cli_usage_error(c, "%s", "-o FILE.png or -o FILE.svg is required");
  if (q.x && q.heat) return cli_usage_error(c, "%s", "give --x (lines) or --heat (a heatmap), not both");
  if (y && strcmp(y, "time") != 0 && strcmp(y, "cost") != 0)
    return cli_usage_error(c, "--y '%s': expected time or cost", y);
  q.cost = y && strcmp(y, "cost") == 0;
  plot_output o;
  if (plot_output_init(&o, output, err) != 0) return CLI_BAD_INPUT;
  int rc = plot_sweep_draw(&q, &o, out, err);
  if (rc == CLI_OK) fprintf(out, "wrote %s (data %s, script %s)\n", o.img_path, o.dat_path, o.gp_path);
  return rc;
}
