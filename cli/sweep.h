/*
** sweep.h -- `tpusim sweep STUDY.json`: a design-space study, private to
** cli/ (cmd_sweep.c is the command, sweep.c the study, its points, the
** runs and the output; sweep_mpi.c spreads the points over MPI ranks).
**
** A study names models, hardware entries, hardware overrides (hw_override.h)
** and chip counts; its points are their cross product in that order (the
** last key varies fastest), or an explicit list. Each point runs the planner
** on one hardware entry at one chip count and gives one line of CSV and one
** of JSON Lines. Lines are written in point order whatever ran them (threads
** or ranks), with fixed number formats, so a study's output is the same
** bytes however it was run, and an interrupted one resumes from its files.
*/
#ifndef TPUSIM_SWEEP_H
#define TPUSIM_SWEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/diag.h"

/* A study past this many points is refused before any work: 1e6 points at
** the ~0.1-2 s a planner run takes is days of a machine. */
#define SWEEP_MAX_POINTS 1000000
#define SWEEP_MAX_OVERRIDES 8   /* override keys in one study */
#define SWEEP_MAX_VALUES 10000  /* values of one list or range */

typedef struct sweep_study sweep_study;

/* Loads and checks STUDY.json: every model loads, every hardware name is in
** the catalog (built-in plus hw_files), every override key is known, every
** range is well formed and the point count within SWEEP_MAX_POINTS. NULL
** after reporting each problem to dg with file:line:column. */
sweep_study *sweep_study_load(const char *path, const char *const *hw_files, int n_hw_files,
                              diag *dg);
void sweep_study_free(sweep_study *s);
int64_t sweep_study_points(const sweep_study *s);
/* The CSV header line (with '\n'), malloc'd. */
char *sweep_csv_header(const sweep_study *s);

/* What runs points: a catalog of its own (overrides change entries in
** place) and the models, loaded once. One per thread. */
typedef struct sweep_worker sweep_worker;
/* planner_threads: the planner's threads per point (0: every core). */
sweep_worker *sweep_worker_new(const sweep_study *s, int planner_threads);
void sweep_worker_free(sweep_worker *w);
/* Runs point i: its CSV and JSON lines (each ending '\n', malloc'd). A point
** that fails still gives its lines, with status "failed" and why. -1 only
** out of memory. */
int sweep_worker_run(sweep_worker *w, int64_t i, char **csv, char **json);

/* The two output files, PREFIX.csv and PREFIX.jsonl. */
typedef struct sweep_out sweep_out;
/* Opens them, keeping the complete lines of an earlier run of the same
** study (restart false): *done is the points already there (a partial last
** line is cut off; the files are cut to the rows both hold). NULL with err
** when they cannot be opened or hold another study's rows. */
sweep_out *sweep_out_open(const char *prefix, const char *header, int64_t points, bool restart,
                          int64_t *done, char *err, size_t errn);
/* Writes one point's lines and flushes them (a kill leaves whole lines). */
int sweep_out_write(sweep_out *o, const char *csv, const char *json);
/* 0, or -1 when a write failed. */
int sweep_out_close(sweep_out *o);

/* ---- running the points ---- */

/* Hands out point indices, collects the lines that come back in any order
** and writes them in point order. Thread-safe. */
typedef struct sweep_pool sweep_pool;
sweep_pool *sweep_pool_new(sweep_out *out, int64_t start, int64_t points);
void sweep_pool_free(sweep_pool *p);
/* The next point to run, or -1 when every point is handed out. */
int64_t sweep_pool_take(sweep_pool *p);
/* Point i's lines (owned by the pool from here); i < 0 only wakes the
** writer. */
void sweep_pool_put(sweep_pool *p, int64_t i, char *csv, char *json);
/* Writes what is complete in order; waits up to wait_s for more first when
** none is ready. Returns the points written so far, or -1 on a write error. */
int64_t sweep_pool_flush(sweep_pool *p, double wait_s);
bool sweep_pool_finished(const sweep_pool *p);
/* Rows written by this run whose point failed. */
int64_t sweep_pool_points_failed(sweep_pool *p);

/* Runs threads over the pool with sweep_worker_run; returns when every
** point handed to them is done. planner_threads as in sweep_worker_new. */
typedef struct sweep_threads sweep_threads;
sweep_threads *sweep_threads_start(const sweep_study *s, sweep_pool *p, int threads,
                                   int planner_threads);
/* How many are still running. */
int sweep_threads_alive(sweep_threads *t);
/* Waits for them; 0, or -1 when a worker ran out of memory. */
int sweep_threads_join(sweep_threads *t);

/* The cores this process may use (1 when unknown). */
int sweep_cores(void);

/* ---- a run of a study (cmd_sweep.c) ---- */

typedef struct {
  sweep_study *study;
  sweep_out *out;
  sweep_pool *pool;
  int64_t points, resumed; /* of the study; already in the files */
  char prefix[1024];
  double t0_s;
} sweep_session;

/* Loads the study and opens its output (resuming unless restart): CLI_OK,
** or the exit code after the messages to err. */
int sweep_session_open(sweep_session *ss, const char *study_path, const char *const *hw_files,
                       int n_hw_files, const char *prefix, bool restart, FILE *err);
/* Writes what is ready; a progress line on err when it is a terminal. */
int64_t sweep_session_flush(sweep_session *ss, double wait_s, FILE *err);
/* The summary on out, everything freed; returns the exit code (CLI_OK, or
** CLI_BAD_INPUT when the output could not be written in full). */
int sweep_session_close(sweep_session *ss, const char *how, FILE *out, FILE *err);

/* ---- MPI (sweep_mpi.c) ---- */

/* Was this process started by mpirun/srun with more than one rank? (from
** the launcher's environment, before MPI is initialised) */
bool sweep_mpi_launched(void);
/* Built with MPI (make found mpicc)? */
bool sweep_mpi_built(void);
/* The study over the ranks: rank 0 opens the output (resume as above) and
** writes; every rank runs points. Returns the exit code (CLI_*), the same
** on every rank; messages from rank 0 only. */
int sweep_mpi_run(const char *study_path, const char *const *hw_files, int n_hw_files,
                  const char *prefix, bool restart, int threads, FILE *out, FILE *err);

#endif
