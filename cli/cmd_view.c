/*
** cmd_view.c -- `tpusim view`: the timeline viewer (viz/view.h) of a
** trace, or of a step simulated first (through `tpusim simulate --trace`).
**
** Its options are read here; viz/view.h's view_run takes them checked.
** The viewer's usage messages end with its whole usage text, not "Try
** --help", as they always have.
*/
#include "cli_int.h"

#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "../viz/view.h"

static const char USAGE[] =
    "usage: tpusim view TRACE.json [--screenshot FILE.png [--width W] [--height H]]\n"
    "                   [--expand GROUP]...\n"
    "       tpusim view MODEL --hw NAME --chips N [simulate's plan options] [--screenshot ...]\n"
    "  TRACE.json         a trace from `tpusim simulate ... --trace FILE`\n"
    "  MODEL ...          simulate the step first (as `tpusim simulate`), then view its trace\n"
    "  --screenshot FILE  render offscreen to a PNG and exit (no display needed)\n"
    "  --width W          picture width in pixels (default 1400; 320..8192)\n"
    "  --height H         picture height in pixels (default 700; 200..8192)\n"
    "  --expand GROUP     show a lane group's members: its name (\"stage 2\"), its number\n"
    "                     from 0, or all (traces of more than 16 processes are grouped)\n"
    "In the window: wheel or +/- zoom, drag or arrows pan, hover for details, click a\n"
    "group lane to expand it, ? help, q quit.\n";

enum { MAX_EXPAND = 64 };

/* The screenshot is a PNG: a name that says otherwise (x.jpg) would hold
** one. False after the message. */
static bool png_name(const char *png, FILE *err) {
  const char *dot = strrchr(png, '.');
  if (dot && !strchr(dot, '/') && strcasecmp(dot, ".png") == 0) return true;
  fprintf(err, "tpusim view: --screenshot %s: expected a .png name (the screenshot is a PNG)\n", png);
  return false;
}

/* A window or screenshot dimension in pixels; its message into err. */
static int parse_dim(const char *name, const char *s, int lo, int *out, FILE *err) {
  char msg[320];
  int64_t v;
  if (num_parse_int(name, s, lo, 8192, &v, msg, sizeof msg) != 0) {
    fprintf(err, "tpusim view: %s (pixels)\n", msg);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* `tpusim view TRACE [options]`, argv[0] = "view": the options read in
** order, each problem reported where it is met. */
static int view_trace_cmd(int argc, char **argv, FILE *out, FILE *err) {
  const char *trace = NULL, *png = NULL, *expand[MAX_EXPAND];
  int w = 1400, h = 700, nexpand = 0;
  bool wh_set = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(USAGE, out);
      return CLI_OK;
    }
    if (strcmp(a, "--screenshot") == 0 || strcmp(a, "--width") == 0 ||
        strcmp(a, "--height") == 0 || strcmp(a, "--expand") == 0) {
      if (i + 1 >= argc) {
        fprintf(err, "tpusim view: %s needs a value\n%s", a, USAGE);
        return CLI_USAGE;
      }
      const char *val = argv[++i];
      if (strcmp(a, "--screenshot") == 0) {
        png = val;
      } else if (strcmp(a, "--expand") == 0) {
        if (nexpand == MAX_EXPAND) {
          fprintf(err, "tpusim view: at most %d --expand (or --expand all)\n", MAX_EXPAND);
          return CLI_USAGE;
        }
        expand[nexpand++] = val;
      } else if (strcmp(a, "--width") == 0 ? parse_dim(a, val, 320, &w, err) != 0
                                            : parse_dim(a, val, 200, &h, err) != 0) {
        return CLI_USAGE;
      } else {
        wh_set = true;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(err, "tpusim view: unknown option %s\n%s", a, USAGE);
      return CLI_USAGE;
    } else if (!trace) {
      trace = a;
    } else {
      fprintf(err, "tpusim view: one trace at a time (got %s and %s)\n%s", trace, a, USAGE);
      return CLI_USAGE;
    }
  }
  if (!trace) {
    fprintf(err, "tpusim view: which trace? (write one with `tpusim simulate ... --trace "
                 "FILE`)\n%s",
            USAGE);
    return CLI_USAGE;
  }
  if (wh_set && !png) {
    fprintf(err, "tpusim view: --width and --height go with --screenshot\n");
    return CLI_USAGE;
  }
  if (png && !png_name(png, err)) return CLI_USAGE;
  view_req req = {.trace = trace, .screenshot = png, .width = w, .height = h,
                  .expand = expand, .n_expand = nexpand};
  return view_run(&req, out, err);
}

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
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return view_trace_cmd(argc, argv, out, err);
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
      /* checked before the step is simulated, not after */
      if (strcmp(a, "--screenshot") == 0 && has_value && !png_name(argv[i + 1], err)) return CLI_USAGE;
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
  if (!sim) return view_trace_cmd(argc, argv, out, err);
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
  if (rc == CLI_OK || rc == CLI_DOES_NOT_FIT) { /* a step that does not fit is still one to see */
    view_argv[1] = trace;
    int vrc = view_trace_cmd(nv, (char **)view_argv, out, err);
    if (vrc != CLI_OK) rc = vrc;
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
