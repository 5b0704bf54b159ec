/*
** cmd_view.c -- `tpusim view`: the timeline viewer (viz/view.h) of a
** trace, or of a step simulated first (through `tpusim simulate --trace`).
*/
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

#include "../viz/view.h"

/* `tpusim view MODEL --hw NAME --chips N [plan options]`: simulate the step
** with --trace into a temporary file (or the --trace FILE given, which is
** kept), then view it. Without simulate options the argument is a trace. */
static int view_cmd(int argc, char **argv, FILE *out, FILE *err) {
  static const char *const OWN[] = {"--screenshot", "--width", "--height", "--expand", NULL};
  const char *sim_argv[2 * CLI_MAX_OPTS + 8], *view_argv[2 * CLI_MAX_OPTS + 4], *keep = NULL;
  int ns = 3, nv = 2, sim = 0;
  sim_argv[0] = "tpusim";
  sim_argv[1] = "simulate";
  sim_argv[2] = NULL; /* the model */
  view_argv[0] = "view";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int own = 0, flag = 0, valued = strcmp(a, "--hw-file") == 0 || strcmp(a, "--trace") == 0;
    for (int k = 0; OWN[k]; k++) own |= strcmp(a, OWN[k]) == 0;
    for (int k = 0; CLI_SIM_FLAGS[k]; k++) flag |= strcmp(a, CLI_SIM_FLAGS[k]) == 0;
    for (int k = 0; CLI_SIM_VALUED[k]; k++) valued |= strcmp(a, CLI_SIM_VALUED[k]) == 0;
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

const cli_cmd cli_cmd_view = {"view",
    "tpusim view TRACE [--screenshot FILE.png [--width W --height H]] [--expand GROUP]\n"
    "tpusim view MODEL --hw NAME --chips N [simulate's plan options] [--trace FILE]\n"
    "                  [--screenshot FILE.png ...]   # simulate, then view the step",
    "SDL2 timeline viewer for a trace (simulate --trace), or of a simulated step", NULL, NULL,
    NULL, NULL, view_cmd};
