/*
** cmd_calibrate.c -- `tpusim calibrate`: time lowered kernels on this CPU,
** fit its model (sim/calib.h) and write the hardware file 'host'.
*/
#include "cli_int.h"

#include <stdlib.h>

#include "../base/strutil.h"
#include "../sim/calib.h"

static const char *const CALIB_FLAGS[] = {"--report", "--quick", NULL};
static const char *const CALIB_VALUED[] = {"--out", NULL};

/* Times kernels for a minute (--quick: seconds), so the --out path is
** checked first: a typo should not cost the whole run. */
static int run_calibrate(cli_ctx *c) {
  if (c->n_pos > 0) return cli_usage_error(c, "unexpected argument '%s'", c->pos[0]);
  char path[4096], err[512];
  const char *out = cli_opt(c, "--out");
  if (out) {
    if (!*out) return cli_usage_error(c, "%s", "--out needs a FILE");
    str_copy(path, sizeof path, out);
  } else if (calib_default_path(path, sizeof path) != 0) {
    fprintf(c->err, "tpusim calibrate: neither XDG_CACHE_HOME nor HOME is set; give --out FILE\n");
    return CLI_BAD_INPUT;
  }
  if (calib_check_path(path, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim calibrate: %s\n", err);
    return CLI_BAD_INPUT;
  }
  calib_opts o = {.quick = cli_opt(c, "--quick") != NULL};
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
    if (cli_opt(c, "--report")) calib_print_report(r, c->out);
    calib_print_summary(r, path, c->out);
  }
  calib_run_free(r);
  return rc;
}

const cli_cmd cli_cmd_calibrate = {"calibrate",
    "tpusim calibrate [--out FILE] [--report] [--json] [--quick]\n"
    "  times lowered kernels on this CPU (about a minute; --quick: seconds, fewer\n"
    "  kernels), fits its model and writes the hardware file 'host' to FILE\n"
    "  (default $XDG_CACHE_HOME/tpusim/host.json, else ~/.cache/tpusim/host.json);\n"
    "  use it with --hw-file FILE. --report: predicted against measured per kernel",
    "JIT-run kernels on this CPU and fit its model ('host')", run_calibrate, NULL, CALIB_FLAGS,
    CALIB_VALUED, NULL};
