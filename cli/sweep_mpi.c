/*
** sweep_mpi.c -- a study's points over MPI ranks (sweep.h), compiled with
** MPI when make finds OpenMPI's mpicc (TPUSIM_MPI), else as the stubs at
** the end, which refuse to run under mpirun rather than have every rank
** run the whole study.
**
** Master and workers, for points whose cost differs by orders of
** magnitude (a 405B model at 8,192 chips against an 8B at 64): rank 0
** hands out one point index at a time to whichever thread asks, so a rank
** stuck on a slow point never holds a queue of others. Every rank runs
** threads of its own (its share of the node's cores); a thread sends its
** last point's lines with its request for the next. Rank 0 also runs
** points on its threads, while its main thread answers requests and
** writes the lines in point order: the files are the bytes a single
** process writes.
*/
#include "sweep.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Under a launcher with more than one rank: OpenMPI's mpirun, a PMI
** launcher (MPICH's hydra, Slurm's srun --mpi=pmi2), or srun with PMIx. */
bool sweep_mpi_launched(void) {
  static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
  for (int i = 0; VARS[i]; i++) {
    const char *v = getenv(VARS[i]);
    if (v && atoi(v) > 1) return true;
  }
  const char *st = getenv("SLURM_STEP_NUM_TASKS");
  return getenv("PMIX_RANK") && st && atoi(st) > 1;
}

#ifdef TPUSIM_MPI

#include <mpi.h>
#include <pthread.h>

enum { TAG_RESULT = 1, TAG_WORK = 2 };

bool sweep_mpi_built(void) { return true; }

/* ---- a worker rank ---- */

typedef struct {
  const sweep_study *s;
  pthread_mutex_t mu; /* one request and its answer at a time (MPI_THREAD_SERIALIZED) */
  int failed;
} rank_ctx;

/* Sends point i's lines (i < 0: none yet) and gets the next index (< 0: stop). */
static int64_t exchange(rank_ctx *r, int64_t i, const char *csv, const char *json) {
  size_t lc = csv ? strlen(csv) + 1 : 1, lj = json ? strlen(json) + 1 : 1;
  size_t n = sizeof i + lc + lj;
  char *buf = malloc(n);
  if (!buf || n > (size_t)INT32_MAX) MPI_Abort(MPI_COMM_WORLD, 1);
  memcpy(buf, &i, sizeof i);
  memcpy(buf + sizeof i, csv ? csv : "", lc);
  memcpy(buf + sizeof i + lc, json ? json : "", lj);
  int64_t next = -1;
  pthread_mutex_lock(&r->mu);
  MPI_Send(buf, (int)n, MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
  MPI_Recv(&next, 1, MPI_INT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  pthread_mutex_unlock(&r->mu);
  free(buf);
  return next;
}

static void *rank_thread(void *arg) {
  rank_ctx *r = arg;
  sweep_worker *w = sweep_worker_new(r->s, 1);
  if (!w) MPI_Abort(MPI_COMM_WORLD, 1); /* out of memory: a rank short would hang the rest */
  char *csv = NULL, *json = NULL;
  for (int64_t i = -1;;) {
    int64_t next = exchange(r, i, csv, json);
    free(csv), free(json);
    csv = json = NULL;
    if (next < 0) break;
    if (sweep_worker_run(w, next, &csv, &json) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    i = next;
  }
  sweep_worker_free(w);
  return NULL;
}

/* Runs `threads` threads of points (the calling one when MPI gives no
** threads leave to call it from several). */
static void run_rank_threads(rank_ctx *r, int threads) {
  pthread_t t[256];
  int n = 0;
  for (int i = 0; i < threads && i < 256; i++)
    if (pthread_create(&t[n], NULL, rank_thread, r) == 0) n++;
  if (n == 0) rank_thread(r);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* ---- rank 0 ---- */

/* Answers one waiting request, if any: stores its lines, sends the next
** index. Returns 1 when a thread was told to stop, else 0. */
static int serve_one(sweep_pool *p, bool *served) {
  MPI_Status st;
  int flag = 0, n = 0;
  *served = false;
  MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  char *buf = malloc((size_t)n + 2);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Recv(buf, n, MPI_CHAR, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  buf[n] = buf[n + 1] = 0; /* a short message still ends in two strings */
  int64_t i;
  memcpy(&i, buf, sizeof i);
  if (i >= 0) {
    const char *csv = buf + sizeof i, *json = csv + strlen(csv) + 1;
    sweep_pool_put(p, i, strdup(csv), strdup(json));
  }
  free(buf);
  int64_t next = sweep_pool_take(p);
  MPI_Send(&next, 1, MPI_INT64_T, st.MPI_SOURCE, TAG_WORK, MPI_COMM_WORLD);
  *served = true;
  return next < 0;
}

/* Rank 0's loop: answer the other ranks' threads (remote of them) until
** each has been told to stop, and write, until its own threads are done. */
static void master_loop(sweep_session *ss, sweep_threads *t, int remote, FILE *err) {
  int stopped = 0;
  for (;;) {
    bool served;
    stopped += serve_one(ss->pool, &served);
    bool local_done = !t || sweep_threads_alive(t) == 0 || sweep_pool_finished(ss->pool);
    if (stopped >= remote && local_done) break;
    /* a short wait on the pool when no request came: answers stay prompt */
    if (sweep_session_flush(ss, served ? 0 : 0.0005, err) < 0 && stopped >= remote && local_done) break;
  }
}

/* The threads of this rank: --threads, else its share of the node's cores. */
static int rank_threads(int threads, int provided) {
  if (provided < MPI_THREAD_SERIALIZED) return 1;
  if (threads > 0) return threads;
  MPI_Comm node;
  int local = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
  }
  int n = sweep_cores() / (local > 0 ? local : 1);
  return n > 0 ? n : 1;
}

int sweep_mpi_run(const char *study_path, const char *const *hw_files, int n_hw_files,
                  const char *prefix, bool restart, int threads, FILE *out, FILE *err) {
  int provided = MPI_THREAD_SINGLE, rank = 0, size = 1;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int nt = rank_threads(threads, provided), rc = CLI_OK;
  sweep_session ss;
  if (rank == 0) rc = sweep_session_open(&ss, study_path, hw_files, n_hw_files, prefix, restart, err);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD); /* every rank stops on rank 0's bad input */
  int *counts = rank == 0 ? calloc((size_t)size, sizeof *counts) : NULL;
  int mine = rank == 0 ? 0 : nt, remote = 0;
  if (rc == CLI_OK) MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int r = 1; counts && r < size; r++) remote += counts[r];
  free(counts);
  if (rc == CLI_OK && rank == 0) {
    sweep_threads *t = sweep_threads_start(ss.study, ss.pool, nt, 1);
    master_loop(&ss, t, remote, err);
    sweep_threads_join(t);
    char how[96];
    snprintf(how, sizeof how, "on %d MPI ranks", size);
    rc = sweep_session_close(&ss, how, out, err);
  } else if (rc == CLI_OK) {
    diag *dg = diag_new(); /* rank 0 loaded the same file and said what is wrong */
    sweep_study *s = dg ? sweep_study_load(study_path, hw_files, n_hw_files, dg) : NULL;
    diag_free(dg);
    if (!s) MPI_Abort(MPI_COMM_WORLD, 1); /* the file changed under us */
    rank_ctx r = {.s = s};
    pthread_mutex_init(&r.mu, NULL);
    run_rank_threads(&r, nt);
    pthread_mutex_destroy(&r.mu);
    sweep_study_free(s);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

#else /* built without MPI */

bool sweep_mpi_built(void) { return false; }

int sweep_mpi_run(const char *study_path, const char *const *hw_files, int n_hw_files,
                  const char *prefix, bool restart, int threads, FILE *out, FILE *err) {
  (void)study_path, (void)hw_files, (void)n_hw_files, (void)prefix, (void)restart, (void)threads;
  (void)out;
  fprintf(err, "tpusim sweep: built without MPI\n");
  return CLI_USAGE;
}

#endif
