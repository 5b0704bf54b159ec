/*
** cmd_collective.c -- `tpusim collective`: the time and bus bandwidth of
** one collective over a size sweep, per algorithm, as nccl-tests reports
** them (the network model: sim/net.h, sim/coll.h).
*/
#include "cli_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/units.h"
#include "../sim/coll.h"
#include "../sim/net.h"

static const char *const COLL_FLAGS[] = {"--explain", NULL};
static const char *const COLL_VALUED[] = {"--hw",       "--chips",    "--op",       "--bytes",
                                          "--algo",     "--slices",   "--reducers", "--reducer-bw",
                                          "--factor",   "--axis",     NULL};

/* Sizes stop at 1 PiB: 2^50 bytes is far past any buffer a collective
** moves, and far from where bytes stop being exact in a double or an
** int64; at least 1 byte, so that a sweep advances. */
static const num_range SIZES = {NUM_BYTES, 1, 1125899906842624.0, false};
/* above 1 so that a sweep advances; 1024 is one size unit per point */
static const num_range FACTOR = {NUM_REAL, 1, 1024, true};

/* The events one command simulates in all: a sweep of sizes (or --algo
** all) runs a simulation per row, each within COLL_SIM_MAX_EVENTS (~2 s),
** so 51 sizes of a 16,384-chip all-reduce took minutes. Twice one
** simulation's budget, ~4 s at the engine's 7-8 million events a second
** (make bench); the rows past it are closed forms and say so. */
#define SWEEP_MAX_EVENTS (2.0 * (double)COLL_SIM_MAX_EVENTS)

/* Sizes one sweep prints per algorithm: 1 B to 1 PiB at nccl-tests'
** factor 2 is 51; --factor 1.000001 over that range was 35 million rows
** (2 GB of text, minutes). */
#define SWEEP_MAX_SIZES 1024

/* The sizes MIN, MIN x F, ... up to MAX (the loop's own tolerance). */
static double sweep_sizes(double lo, double hi, double factor) {
  return floor(log(hi / lo) / log(factor) + 1e-9) + 1;
}

/* More sizes than SWEEP_MAX_SIZES: CLI_USAGE after a message with the
** nearest factor that covers the range in that many. */
static int check_sweep(cli_ctx *c, const char *sizes, double lo, double hi, double factor) {
  double n = sweep_sizes(lo, hi, factor);
  if (n <= SWEEP_MAX_SIZES) return CLI_OK;
  /* the range's factor at SWEEP_MAX_SIZES rows, rounded up to 4 decimals */
  double f = ceil(pow(hi / lo, 1.0 / (SWEEP_MAX_SIZES - 1)) * 1e4) / 1e4;
  while (sweep_sizes(lo, hi, f) > SWEEP_MAX_SIZES) f += 1e-4;
  char msg[320];
  const char *given = cli_opt(c, "--factor");
  snprintf(msg, sizeof msg, "--bytes %s with --factor %s is %.0f sizes, more than the %d one sweep "
           "prints: the nearest allowed is --factor %.4f", sizes, given ? given : "2", n,
           SWEEP_MAX_SIZES, f);
  return cli_usage_error(c, "%s", msg);
}

/* --bytes SIZE or MIN:MAX into *lo, *hi: CLI_OK or CLI_USAGE after the
** message. */
static int parse_sizes(cli_ctx *c, const char *sizes, double *lo, double *hi) {
  const char *colon = strchr(sizes, ':');
  char first[64], err[320];
  snprintf(first, sizeof first, "%.*s", colon ? (int)(colon - sizes) : (int)strlen(sizes), sizes);
  if (num_parse("--bytes", first, SIZES, lo, err, sizeof err) != 0 ||
      num_parse("--bytes", colon ? colon + 1 : first, SIZES, hi, err, sizeof err) != 0)
    return cli_usage_error(c, "%s (SIZE or MIN:MAX such as 1K:16G)", err);
  if (*hi < *lo)
    return cli_usage_error(c, "--bytes %s: expected MIN:MAX with MIN at most MAX", sizes);
  if (*lo != floor(*lo) || *hi != floor(*hi))
    return cli_usage_error(c, "--bytes %s: expected whole bytes (1.5K is 1536 bytes; 1.5 is no "
                              "size a buffer has)", sizes);
  return CLI_OK;
}

static int run_collective(cli_ctx *c) {
  if (c->n_pos) return cli_usage_error(c, "unexpected argument '%s'", c->pos[0]);
  const char *hwname = cli_opt(c, "--hw"), *opname = cli_opt(c, "--op"), *sizes = cli_opt(c, "--bytes");
  if (!hwname || !opname || !sizes || !cli_opt(c, "--chips"))
    return cli_usage_error(c, "%s", "--hw, --chips, --op and --bytes are required");
  int64_t chips = 0, slices = 0, reducers = 0;
  if (cli_opt_int(c, "--chips", 1, CLI_MAX_CHIPS, &chips) ||
      cli_opt_int(c, "--slices", 1, CLI_MAX_CHIPS, &slices) ||
      cli_opt_int(c, "--reducers", 1, CLI_MAX_CHIPS, &reducers))
    return CLI_USAGE;
  int op = coll_op_parse(opname);
  if (op < 0)
    return cli_usage_error(c, "unknown --op '%s' (all-reduce, all-gather, reduce-scatter, all-to-all, "
                          "broadcast, send-recv)", opname);
  double lo, hi, factor = 2, rbw = 0;
  if (parse_sizes(c, sizes, &lo, &hi) || cli_opt_num(c, "--factor", FACTOR, &factor) ||
      cli_opt_num(c, "--reducer-bw", SIZES, &rbw) || check_sweep(c, sizes, lo, hi, factor))
    return CLI_USAGE;
  int axis = -1;
  if (cli_opt(c, "--axis")) {
    const char *ax = cli_opt(c, "--axis");
    axis = strcmp(ax, "x") == 0 ? 0 : strcmp(ax, "y") == 0 ? 1 : strcmp(ax, "z") == 0 ? 2 : -2;
    if (axis < 0) return cli_usage_error(c, "--axis '%s': expected x, y or z", ax);
  }
  coll_algo algos[COLL_ALGO_COUNT];
  int n_algos = 0;
  const char *alist = cli_opt(c, "--algo") ? cli_opt(c, "--algo") : "auto";
  if (strcmp(alist, "all") == 0) {
    for (int a = 1; a < COLL_ALGO_COUNT; a++) algos[n_algos++] = (coll_algo)a;
  } else {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", alist);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int a = coll_algo_parse(t);
      if (a < 0 || n_algos == COLL_ALGO_COUNT)
        return cli_usage_error(c, "unknown --algo '%s' (auto, ring, biring, torus, tree, hierarchical, "
                              "nvls, reduction-server, direct, all)", t);
      algos[n_algos++] = (coll_algo)a;
    }
  }

  /* flags for what this command line does not run */
  if (cli_opt(c, "--factor") && lo == hi)
    return cli_usage_error(c, "--factor steps a range of sizes; --bytes %s is one size (give "
                              "MIN:MAX, or leave --factor out)", sizes);
  bool rs = false;
  for (int i = 0; i < n_algos; i++) rs |= algos[i] == COLL_REDUCTION_SERVER;
  if ((cli_opt(c, "--reducers") || cli_opt(c, "--reducer-bw")) && !rs) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s sizes the reduction server's hosts; --algo %.64s does not run it "
             "(add reduction-server to --algo, or leave the flag out)",
             cli_opt(c, "--reducers") ? "--reducers" : "--reducer-bw", alist);
    return cli_usage_error(c, "%s", msg);
  }
  hw_catalog *cat;
  int rc = cli_load_catalog(c, &cat, NULL);
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
  }
  /* the table goes to a buffer first, and to stdout only when every
  ** algorithm ran: a named algorithm that does not apply (torus over
  ** slices) fails after the header, and a failing command prints nothing
  ** on stdout (docs/cli.md) */
  char *text = NULL;
  size_t text_len = 0;
  FILE *out = c->json ? NULL : open_memstream(&text, &text_len);
  if (!c->json && !out) {
    fprintf(c->err, "tpusim collective: out of memory\n");
    net_free(n);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  if (out) fprintf(out, "%s on %lld x %s: %s\n", opname, (long long)chips, hw->name, desc);
  int ran = 0;
  double spent = 0; /* events simulated so far */
  for (int ai = 0; ai < n_algos && rc == CLI_OK; ai++) {
    bool header = false;
    for (double b = lo; b <= hi * (1 + 1e-12); b *= factor) {
      /* what the command's budget has left; at least one event, as 0 means none set */
      double left = SWEEP_MAX_EVENTS - spent > 1 ? SWEEP_MAX_EVENTS - spent : 1;
      coll_req req = {.op = (coll_op)op, .algo = algos[ai], .bytes = b, .axis = axis,
                      .reducers = reducers, .reducer_bw = rbw, .max_events = left};
      coll_result res;
      if (coll_run(n, &req, &res, err, sizeof err) != 0) {
        /* "all" skips what does not apply; a named algorithm must run */
        if (strcmp(alist, "all") == 0) break;
        fprintf(c->err, "tpusim collective: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      ran++;
      spent += (double)res.events;
      if (c->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "algo", coll_algo_name(res.algo));
        cJSON_AddNumberToObject(o, "bytes", b);
        cJSON_AddNumberToObject(o, "time_s", res.time_s);
        cJSON_AddNumberToObject(o, "algbw_bytes_per_s", res.algbw);
        cJSON_AddNumberToObject(o, "busbw_bytes_per_s", res.busbw);
        cJSON_AddNumberToObject(o, "formula_s", res.formula_s);
        cJSON_AddNumberToObject(o, "events", (double)res.events);
        if (res.note[0]) cJSON_AddStringToObject(o, "note", res.note);
        if (cli_opt(c, "--explain")) cJSON_AddStringToObject(o, "formula", res.formula);
        cJSON_AddItemToArray(results, o);
        continue;
      }
      if (!header) {
        fprintf(out, "\nalgorithm %s\n%12s %12s %12s %12s %12s\n", coll_algo_name(res.algo),
                "size", "time", "algbw GB/s", "busbw GB/s", "formula");
        header = true;
      }
      char sz[32], t[32], ft[32];
      units_bytes(sz, sizeof sz, b);
      units_seconds(t, sizeof t, res.time_s);
      units_seconds(ft, sizeof ft, res.formula_s);
      fprintf(out, "%12s %12s %12.2f %12.2f %12s\n", sz, t, res.algbw / 1e9, res.busbw / 1e9, ft);
      if (cli_opt(c, "--explain")) fprintf(out, "%s", res.formula);
      else if (res.note[0]) fprintf(out, "  (%s)\n", res.note); /* not simulated: say so */
    }
  }
  if (rc == CLI_OK && ran == 0) {
    fprintf(c->err, "tpusim collective: no algorithm applies to %s on %s\n", opname, hw->name);
    rc = CLI_BAD_INPUT;
  }
  if (root) {
    if (rc == CLI_OK) cli_print_json(c, root);
    else cJSON_Delete(root);
  }
  if (out) {
    fclose(out);
    if (rc == CLI_OK) fwrite(text, 1, text_len, c->out);
    free(text);
  }
  net_free(n);
  hw_catalog_free(cat);
  return rc;
}

const cli_cmd cli_cmd_collective = {"collective",
    "tpusim collective --hw NAME --chips N --op all-reduce|all-gather|reduce-scatter|all-to-all|\n"
    "                  broadcast|send-recv --bytes SIZE|MIN:MAX [--factor F]\n"
    "                  [--algo auto|ring|biring|torus|tree|hierarchical|nvls|reduction-server|direct|all\n"
    "                   (or a comma list)] [--slices K] [--reducers R] [--reducer-bw BYTES/S]\n"
    "                  [--axis x|y|z] [--explain] [--json]\n"
    "  SIZE: bytes with K, M, G, T (powers of 1024, as nccl-tests): 1K:16G sweeps by x2",
    "time and bus bandwidth of a collective, as nccl-tests reports it", run_collective, NULL,
    COLL_FLAGS, COLL_VALUED, NULL};
