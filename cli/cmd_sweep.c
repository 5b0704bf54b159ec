/*
** cmd_sweep.c -- `tpusim sweep STUDY.json`: a design-space study (sweep.h)
** run on this machine's cores, or over MPI ranks under mpirun/srun
** (sweep_mpi.c); the output and its resumption are the same either way.
*/
#include "cli_int.h"
#include "sweep.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/units.h"

static const char *const SWEEP_FLAGS[] = {"--restart", NULL};
static const char *const SWEEP_VALUED[] = {"--out", "--threads", NULL};

#define MAX_THREADS 256

int sweep_session_open(sweep_session *ss, const char *study_path, const char *const *hw_files,
                       int n_hw_files, const char *prefix, bool restart, FILE *err) {
  memset(ss, 0, sizeof *ss);
  ss->t0_s = units_now_s();
  snprintf(ss->prefix, sizeof ss->prefix, "%s", prefix);
  diag *dg = diag_new();
  ss->study = dg ? sweep_study_load(study_path, hw_files, n_hw_files, dg) : NULL;
  if (dg) diag_print(dg, err);
  diag_free(dg);
  if (!ss->study) return CLI_BAD_INPUT;
  ss->points = sweep_study_points(ss->study);
  char *header = sweep_csv_header(ss->study), msg[1536] = "out of memory";
  ss->out = header ? sweep_out_open(prefix, header, ss->points, restart, &ss->resumed, msg, sizeof msg) : NULL;
  free(header);
  ss->pool = ss->out ? sweep_pool_new(ss->out, ss->resumed, ss->points) : NULL;
  if (!ss->pool) {
    fprintf(err, "tpusim sweep: %s\n", ss->out ? "out of memory" : msg);
    sweep_out_close(ss->out);
    sweep_study_free(ss->study);
    memset(ss, 0, sizeof *ss);
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}

int64_t sweep_session_flush(sweep_session *ss, double wait_s, FILE *err) {
  int64_t done = sweep_pool_flush(ss->pool, wait_s);
  if (done >= 0 && isatty(fileno(err))) {
    double t = units_now_s() - ss->t0_s, rate = t > 0 ? (double)(done - ss->resumed) / t : 0;
    fprintf(err, "\r  sweep: %lld/%lld points, %.2f points/s   ", (long long)done, (long long)ss->points,
            rate);
    fflush(err);
  }
  return done;
}

int sweep_session_close(sweep_session *ss, const char *how, FILE *out, FILE *err) {
  int64_t done = sweep_pool_flush(ss->pool, 0), failed = sweep_pool_points_failed(ss->pool);
  if (isatty(fileno(err))) fprintf(err, "\n");
  int rc = done == ss->points ? CLI_OK : CLI_BAD_INPUT;
  if (sweep_out_close(ss->out) != 0) rc = CLI_BAD_INPUT;
  if (rc != CLI_OK)
    fprintf(err, "tpusim sweep: the output stopped at %lld of %lld points (a failed write, or out of "
                 "memory); run the same command again to resume\n",
            (long long)(done < 0 ? 0 : done), (long long)ss->points);
  else
    fprintf(out, "sweep: %lld points (%lld run %s, %lld resumed from the files), %lld failed; "
                 "wrote %s.csv and %s.jsonl\n",
            (long long)ss->points, (long long)(ss->points - ss->resumed), how, (long long)ss->resumed,
            (long long)failed, ss->prefix, ss->prefix);
  sweep_pool_free(ss->pool);
  sweep_study_free(ss->study);
  memset(ss, 0, sizeof *ss);
  return rc;
}

/* The planner's own threads for each point: the cores the points leave
** idle (a study of fewer points than threads), else 1. */
static int planner_threads_for(int64_t to_run, int threads) {
  return to_run > 0 && to_run < threads ? (int)(threads / to_run) : 1;
}

static int run_local(cli_ctx *c, const char *study, const char *prefix, bool restart, int threads) {
  sweep_session ss;
  int rc = sweep_session_open(&ss, study, c->hw_files, c->n_hw_files, prefix, restart, c->err);
  if (rc != CLI_OK) return rc;
  int64_t to_run = ss.points - ss.resumed;
  if (threads > to_run) threads = to_run > 0 ? (int)to_run : 1;
  sweep_threads *t = sweep_threads_start(ss.study, ss.pool, threads, planner_threads_for(to_run, threads));
  while (t && !sweep_pool_finished(ss.pool) && sweep_threads_alive(t) > 0)
    if (sweep_session_flush(&ss, 0.1, c->err) < 0) break;
  sweep_threads_join(t);
  char how[64];
  snprintf(how, sizeof how, "on %d thread%s", threads, threads == 1 ? "" : "s");
  return sweep_session_close(&ss, how, c->out, c->err);
}

/* PREFIX when --out is absent: the study's path without ".json". */
static void default_prefix(char *buf, size_t n, const char *study) {
  size_t l = strlen(study);
  if (l > 5 && strcmp(study + l - 5, ".json") == 0) l -= 5;
  snprintf(buf, n, "%.*s", (int)l, study);
}

static int run_sweep(cli_ctx *c) {
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one STUDY.json");
  if (c->json) return cli_usage_error(c, "%s", "--json: a sweep writes PREFIX.jsonl (see --out)");
  int64_t threads = sweep_cores();
  if (cli_opt_int(c, "--threads", 1, MAX_THREADS, &threads)) return CLI_USAGE;
  char prefix[1024];
  const char *o = cli_opt(c, "--out");
  if (o && (!*o || strlen(o) >= sizeof prefix - 8))
    return cli_usage_error(c, "--out '%s': expected a path prefix (PREFIX.csv and PREFIX.jsonl are written)", o);
  if (o) snprintf(prefix, sizeof prefix, "%s", o);
  else default_prefix(prefix, sizeof prefix, c->pos[0]);
  bool restart = cli_opt(c, "--restart") != NULL;
  if (sweep_mpi_launched()) {
    if (!sweep_mpi_built()) {
      fprintf(c->err, "tpusim sweep: started by mpirun with several ranks, but this tpusim was built "
                      "without MPI: every rank would run the whole study into the same files. Build "
                      "with OpenMPI (`make deps && make`, which finds mpicc), or run it without mpirun "
                      "(it uses every core: --threads N)\n");
      return CLI_USAGE;
    }
    return sweep_mpi_run(c->pos[0], c->hw_files, c->n_hw_files, prefix, restart,
                         cli_opt(c, "--threads") ? (int)threads : 0, c->out, c->err);
  }
  return run_local(c, c->pos[0], prefix, restart, (int)threads);
}

const cli_cmd cli_cmd_sweep = {
    "sweep",
    "tpusim sweep STUDY.json [--out PREFIX] [--threads N] [--restart]\n"
    "  mpirun -n N tpusim sweep STUDY.json ...   (the points over N ranks; docs/sweep.md)",
    "a design-space study: the planner over models x hardware x overrides x chips, to PREFIX.csv "
    "and PREFIX.jsonl",
    run_sweep,
    NULL,
    SWEEP_FLAGS,
    SWEEP_VALUED,
    NULL};
