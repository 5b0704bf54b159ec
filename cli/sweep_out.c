/*
** sweep_out.c -- a study's output (sweep.h): PREFIX.csv and PREFIX.jsonl,
** resumed from the complete lines an earlier run left; the pool that hands
** out points and writes their lines in point order; the threads of one
** process.
*/
#include "sweep_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct sweep_out {
  FILE *csv, *json;
  int failed;
};

/* ---- resume ---- */

/* The complete lines of f (the part after the last '\n' is not one), at
** most max, and the byte offset just past them. For the CSV, the first
** line must be header; each later line k (from 0) must begin "k," (CSV)
** or {"point":k, (JSON): rows of this study in point order, nothing else. */
static int scan_rows(FILE *f, const char *header, int64_t max, int64_t *rows, long *end) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int64_t k = 0;
  long off = 0;
  int rc = 0;
  bool need_header = header != NULL;
  while (k < max && (n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] != '\n') break; /* a partial line: cut */
    if (need_header) {
      if (strcmp(line, header) != 0) {
        rc = -1;
        break;
      }
      need_header = false;
    } else {
      char want[48];
      int w = header ? snprintf(want, sizeof want, "%lld,", (long long)k)
                     : snprintf(want, sizeof want, "{\"point\":%lld,", (long long)k);
      if (strncmp(line, want, (size_t)w) != 0) {
        rc = -2;
        break;
      }
      k++;
    }
    off += (long)n;
  }
  free(line);
  *rows = k;
  *end = off;
  return rc;
}

/* The rows path holds (0 when it does not exist), and where they end. */
static int existing_rows(const char *path, const char *header, int64_t max, int64_t *rows,
                         long *end, char *err, size_t errn) {
  *rows = 0;
  *end = 0;
  FILE *f = fopen(path, "r");
  if (!f) return errno == ENOENT ? 0 : (snprintf(err, errn, "%s: %s", path, strerror(errno)), -1);
  int rc = scan_rows(f, header, max, rows, end);
  fclose(f);
  if (rc == -1)
    snprintf(err, errn, "%s holds the output of another study (its header differs); remove it, "
                        "give another --out, or --restart to overwrite it", path);
  else if (rc == -2)
    snprintf(err, errn, "%s: row %lld is not point %lld of this study; remove it, give another "
                        "--out, or --restart to overwrite it", path, (long long)*rows + 1, (long long)*rows);
  return rc ? -1 : 0;
}

/* Cuts path to len bytes and opens it to append. */
static FILE *open_at(const char *path, long len, char *err, size_t errn) {
  FILE *f = fopen(path, "a");
  /* the stream's position was read at open, before the cut: seek to the
  ** new end so that ftell says 0 for an emptied file (its header is due) */
  if (f && (ftruncate(fileno(f), len) != 0 || fseek(f, 0, SEEK_END) != 0)) {
    fclose(f);
    f = NULL;
  }
  if (!f) snprintf(err, errn, "%s: %s", path, strerror(errno));
  return f;
}

/* The end of the first `rows` rows of path (after the header when there is one). */
static long rows_end(const char *path, const char *header, int64_t rows) {
  FILE *f = fopen(path, "r");
  int64_t k;
  long end = 0;
  if (f) scan_rows(f, header, rows, &k, &end);
  if (f) fclose(f);
  return end;
}

sweep_out *sweep_out_open(const char *prefix, const char *header, int64_t points, bool restart,
                          int64_t *done, char *err, size_t errn) {
  size_t pl = strlen(prefix) + 8;
  char *csv = malloc(pl), *json = malloc(pl);
  sweep_out *o = calloc(1, sizeof *o);
  *done = 0;
  int rc = csv && json && o ? 0 : -1;
  if (rc) snprintf(err, errn, "out of memory");
  if (!rc) snprintf(csv, pl, "%s.csv", prefix), snprintf(json, pl, "%s.jsonl", prefix);
  int64_t rc_csv = 0, rc_json = 0;
  long end_csv = 0, end_json = 0;
  if (!rc && !restart)
    rc = existing_rows(csv, header, points, &rc_csv, &end_csv, err, errn) ||
         existing_rows(json, NULL, points, &rc_json, &end_json, err, errn);
  if (!rc && !restart) {
    /* both files keep the rows both hold: a kill between the two writes
    ** of a point leaves one a row ahead */
    *done = rc_csv < rc_json ? rc_csv : rc_json;
    if (end_csv == 0) *done = 0; /* no header yet: start over */
    end_csv = *done > 0 || end_csv > 0 ? rows_end(csv, header, *done) : 0;
    end_json = rows_end(json, NULL, *done);
  }
  if (!rc) rc = !(o->csv = open_at(csv, restart ? 0 : end_csv, err, errn)) ? -1 : 0;
  if (!rc) rc = !(o->json = open_at(json, restart ? 0 : end_json, err, errn)) ? -1 : 0;
  if (!rc && ftell(o->csv) == 0 && (fputs(header, o->csv) < 0 || fflush(o->csv) != 0)) {
    snprintf(err, errn, "%s: %s", csv, strerror(errno));
    rc = -1;
  }
  free(csv);
  free(json);
  if (rc) {
    sweep_out_close(o);
    return NULL;
  }
  return o;
}

int sweep_out_write(sweep_out *o, const char *csv, const char *json) {
  if (fputs(csv, o->csv) < 0 || fflush(o->csv) != 0 || fputs(json, o->json) < 0 ||
      fflush(o->json) != 0)
    o->failed = 1;
  return o->failed ? -1 : 0;
}

int sweep_out_close(sweep_out *o) {
  if (!o) return 0;
  int rc = o->failed ? -1 : 0;
  if (o->csv && fclose(o->csv) != 0) rc = -1;
  if (o->json && fclose(o->json) != 0) rc = -1;
  free(o);
  return rc;
}

/* ---- the pool ---- */

struct sweep_pool {
  pthread_mutex_t mu;
  pthread_cond_t ready;
  sweep_out *out;
  int64_t start, points;
  int64_t next;    /* the next point to hand out */
  int64_t written; /* points written (from start) */
  char **csv, **json; /* [points - start], NULL until a point's lines come */
  int failed;
  int64_t points_failed; /* written rows whose status is "failed" */
};

sweep_pool *sweep_pool_new(sweep_out *out, int64_t start, int64_t points) {
  sweep_pool *p = calloc(1, sizeof *p);
  size_t n = (size_t)(points - start > 0 ? points - start : 1);
  if (p) p->csv = calloc(n, sizeof *p->csv), p->json = calloc(n, sizeof *p->json);
  if (!p || !p->csv || !p->json || pthread_mutex_init(&p->mu, NULL) != 0) {
    if (p) free(p->csv), free(p->json);
    free(p);
    return NULL;
  }
  pthread_cond_init(&p->ready, NULL);
  p->out = out;
  p->start = p->next = p->written = start;
  p->points = points;
  return p;
}

void sweep_pool_free(sweep_pool *p) {
  if (!p) return;
  for (int64_t i = 0; i < p->points - p->start; i++) free(p->csv[i]), free(p->json[i]);
  free(p->csv);
  free(p->json);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->ready);
  free(p);
}

int64_t sweep_pool_take(sweep_pool *p) {
  pthread_mutex_lock(&p->mu);
  int64_t i = p->next < p->points && !p->failed ? p->next++ : -1;
  pthread_mutex_unlock(&p->mu);
  return i;
}

void sweep_pool_put(sweep_pool *p, int64_t i, char *csv, char *json) {
  pthread_mutex_lock(&p->mu);
  if (i >= 0 && (!csv || !json)) p->failed = 1; /* out of memory: stop handing out */
  if (i >= 0) p->csv[i - p->start] = csv, p->json[i - p->start] = json;
  pthread_cond_signal(&p->ready);
  pthread_mutex_unlock(&p->mu);
}

/* Waits on the condition up to wait_s (the caller holds the lock). */
static void timed_wait(sweep_pool *p, double wait_s) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  long ns = t.tv_nsec + (long)(wait_s * 1e9);
  t.tv_sec += ns / 1000000000L;
  t.tv_nsec = ns % 1000000000L;
  pthread_cond_timedwait(&p->ready, &p->mu, &t);
}

int64_t sweep_pool_flush(sweep_pool *p, double wait_s) {
  pthread_mutex_lock(&p->mu);
  int64_t k = p->written - p->start;
  if (p->written < p->points && !p->csv[k] && !p->failed && wait_s > 0) timed_wait(p, wait_s);
  /* the lines are written outside the lock: workers go on meanwhile */
  for (;;) {
    k = p->written - p->start;
    if (p->written >= p->points || !p->csv[k]) break;
    char *c = p->csv[k], *j = p->json[k];
    p->csv[k] = p->json[k] = NULL;
    pthread_mutex_unlock(&p->mu);
    int w = sweep_out_write(p->out, c, j);
    bool bad = strstr(j, "\"status\":\"failed\"") != NULL; /* our own format (sweep_run.c) */
    free(c);
    free(j);
    pthread_mutex_lock(&p->mu);
    if (w != 0) p->failed = 1;
    if (w != 0) break;
    p->written++;
    p->points_failed += bad;
  }
  int64_t done = p->failed ? -1 : p->written;
  pthread_mutex_unlock(&p->mu);
  return done;
}

int64_t sweep_pool_points_failed(sweep_pool *p) {
  pthread_mutex_lock(&p->mu);
  int64_t n = p->points_failed;
  pthread_mutex_unlock(&p->mu);
  return n;
}

bool sweep_pool_finished(const sweep_pool *p) {
  pthread_mutex_lock((pthread_mutex_t *)&p->mu);
  bool f = p->written >= p->points || (p->failed && p->next == p->written);
  pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
  return f;
}

/* ---- threads ---- */

#define SWEEP_MAX_THREADS 256

struct sweep_threads {
  const sweep_study *s;
  sweep_pool *p;
  int planner_threads;
  pthread_t t[SWEEP_MAX_THREADS];
  int n;
  int failed;
  int alive; /* threads still running */
  pthread_mutex_t mu;
};

static void *thread_main(void *arg) {
  sweep_threads *t = arg;
  sweep_worker *w = sweep_worker_new(t->s, t->planner_threads);
  int64_t i;
  while (w && (i = sweep_pool_take(t->p)) >= 0) {
    char *csv, *json;
    sweep_worker_run(w, i, &csv, &json);
    sweep_pool_put(t->p, i, csv, json);
  }
  sweep_worker_free(w);
  pthread_mutex_lock(&t->mu);
  if (!w) t->failed = 1;
  t->alive--;
  pthread_mutex_unlock(&t->mu);
  sweep_pool_put(t->p, -1, NULL, NULL); /* wakes the writer to see it */
  return NULL;
}

sweep_threads *sweep_threads_start(const sweep_study *s, sweep_pool *p, int threads,
                                   int planner_threads) {
  sweep_threads *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  *t = (sweep_threads){.s = s, .p = p, .planner_threads = planner_threads};
  pthread_mutex_init(&t->mu, NULL);
  if (threads > SWEEP_MAX_THREADS) threads = SWEEP_MAX_THREADS;
  t->alive = threads;
  for (int i = 0; i < threads; i++)
    if (pthread_create(&t->t[t->n], NULL, thread_main, t) == 0) t->n++;
  pthread_mutex_lock(&t->mu);
  t->alive -= threads - t->n;
  pthread_mutex_unlock(&t->mu);
  return t;
}

int sweep_threads_alive(sweep_threads *t) {
  pthread_mutex_lock(&t->mu);
  int n = t->alive;
  pthread_mutex_unlock(&t->mu);
  return n;
}

int sweep_threads_join(sweep_threads *t) {
  if (!t) return -1;
  for (int i = 0; i < t->n; i++) pthread_join(t->t[i], NULL);
  int rc = t->failed || t->n == 0 ? -1 : 0;
  pthread_mutex_destroy(&t->mu);
  free(t);
  return rc;
}

int sweep_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
