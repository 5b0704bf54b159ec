/*
** sched.c -- see sched.h.
*/
#include "sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "engine.h"

double sched_task_s(const sched_desc *d, int64_t vs, bool back) {
  double t = back ? d->b_chunk : d->f_chunk;
  if (vs == 0) t += back ? d->b_first : d->f_first;
  if (vs == d->pp * d->vp - 1) t += back ? d->b_last : d->f_last;
  return t;
}

/* ---- the order each chip runs its tasks in ---- */

/* Forward k of chip dev is chunk (k / pp) mod V of micro-batch
** (k / (pp V)) pp + k mod pp; backward k the same with chunks reversed. */
static int64_t seq_task(const sched_desc *d, int64_t dev, int64_t k, bool back) {
  int64_t pp = d->pp, vp = d->vp;
  int64_t chunk = (k / pp) % vp, mb = (k / (pp * vp)) * pp + k % pp;
  if (back) chunk = vp - 1 - chunk;
  return (chunk * pp + dev) * d->M + mb;
}

/* Chip dev's 2 M V tasks in order, as +id+1 (forward) and -(id+1). */
static void build_order(const sched_desc *d, int64_t dev, int64_t *o) {
  int64_t pp = d->pp, vp = d->vp, total = d->M * vp, n = 0;
  int64_t warm = d->schedule == PLAN_GPIPE         ? total
                 : d->schedule == PLAN_INTERLEAVED ? (pp - dev - 1) * 2 + (vp - 1) * pp
                                                   : pp - dev - 1;
  if (warm > total) warm = total;
  for (int64_t k = 0; k < warm; k++) o[n++] = seq_task(d, dev, k, false) + 1;
  for (int64_t i = 0; i < total - warm; i++) {
    o[n++] = seq_task(d, dev, warm + i, false) + 1;
    o[n++] = -(seq_task(d, dev, i, true) + 1);
  }
  for (int64_t k = total - warm; k < total; k++) o[n++] = -(seq_task(d, dev, k, true) + 1);
}

static int alloc_out(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  memset(o, 0, sizeof *o);
  size_t S = (size_t)(d->pp * d->vp);
  o->last_b_end = calloc((size_t)d->pp, sizeof(double));
  o->busy_s = calloc((size_t)d->pp, sizeof(double));
  o->vs_b_start = calloc(S, sizeof(double));
  o->vs_b_dur = calloc(S, sizeof(double));
  if (!o->last_b_end || !o->busy_s || !o->vs_b_start || !o->vs_b_dur) {
    sched_out_free(o);
    return str_errf(err, errn, "out of memory");
  }
  return 0;
}

void sched_out_free(sched_out *o) {
  free(o->last_b_end);
  free(o->busy_s);
  free(o->vs_b_start);
  free(o->vs_b_dur);
  free(o->spans);
  memset(o, 0, sizeof *o);
}

/* A task that starts at t0 on chip dev: what both evaluators record. */
static void ran(const sched_desc *d, sched_out *o, int64_t dev, int64_t code, double t0, double dur) {
  bool back = code < 0;
  o->busy_s[dev] += dur;
  if (back) {
    int64_t vs = ((-code) - 1) / d->M;
    o->vs_b_start[vs] = t0;
    o->vs_b_dur[vs] = dur;
    o->last_b_end[dev] = t0 + dur;
  }
  if (t0 + dur > o->end_s) o->end_s = t0 + dur;
}

/* ---- on the event engine ---- */

typedef struct {
  double dur;   /* on the stage's chip */
  double ready; /* dependencies met at */
  int deps_left;
} task;

typedef struct {
  eng *e;
  const sched_desc *d;
  sched_out *o;
  int64_t S, M;
  task *f, *b;     /* [vs * M + mb] */
  bool *busy;      /* per chip */
  int64_t *order;  /* per chip: its 2 M V tasks in order */
  int64_t *pos;    /* per chip: the next task in its order */
  int64_t cap_spans;
  bool oom;
} pipe;

static void on_done(eng *e, void *ctx, int64_t arg);

/* The chip of `dev` starts its next task in order once its inputs are in. */
static void dispatch(pipe *q, int64_t dev) {
  int64_t total = q->M * q->d->vp;
  if (q->busy[dev] || q->pos[dev] == 2 * total) return;
  double now = eng_now(q->e);
  int64_t code = q->order[dev * 2 * total + q->pos[dev]];
  bool back = code < 0;
  int64_t id = (back ? -code : code) - 1;
  task *t = back ? &q->b[id] : &q->f[id];
  if (t->deps_left != 0 || t->ready > now) return; /* its release will call again */
  q->pos[dev]++;
  t->deps_left = -1;
  q->busy[dev] = true;
  ran(q->d, q->o, dev, code, now, t->dur);
  sched_out *o = q->o;
  if (o->n_spans == q->cap_spans) {
    int64_t cap = q->cap_spans ? 2 * q->cap_spans : 256;
    sched_span *s = realloc(o->spans, (size_t)cap * sizeof *s);
    if (s) o->spans = s, q->cap_spans = cap;
    else q->oom = true;
  }
  if (o->n_spans < q->cap_spans) o->spans[o->n_spans++] = (sched_span){now, now + t->dur, dev, code};
  eng_at(q->e, now + t->dur, on_done, q, code);
}

static void on_ready(eng *e, void *ctx, int64_t arg) {
  (void)e;
  dispatch(ctx, arg);
}

static void release(pipe *q, task *t, double at, int64_t dev) {
  if (--t->deps_left == 0) {
    if (at > t->ready) t->ready = at;
    eng_at(q->e, t->ready, on_ready, q, dev);
  } else if (at > t->ready) {
    t->ready = at;
  }
}

static void on_done(eng *e, void *ctx, int64_t arg) {
  pipe *q = ctx;
  bool back = arg < 0;
  int64_t id = (back ? -arg : arg) - 1, vs = id / q->M, dev = vs % q->d->pp;
  double now = eng_now(e);
  q->busy[dev] = false;
  if (!back) {
    if (vs + 1 < q->S) release(q, &q->f[id + q->M], now + q->d->p2p_s, (vs + 1) % q->d->pp);
    release(q, &q->b[id], now, dev); /* a backward needs its own forward */
  } else if (vs > 0) {
    release(q, &q->b[id - q->M], now + q->d->p2p_s, (vs - 1) % q->d->pp);
  }
  dispatch(q, dev);
}

int sched_run(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (alloc_out(d, o, err, errn) != 0) return -1;
  pipe q = {.d = d, .o = o, .S = d->pp * d->vp, .M = d->M};
  size_t nt = (size_t)(q.S * q.M);
  q.e = eng_new();
  q.f = calloc(nt, sizeof *q.f);
  q.b = calloc(nt, sizeof *q.b);
  q.busy = calloc((size_t)d->pp, sizeof *q.busy);
  q.order = calloc(nt * 2, sizeof *q.order);
  q.pos = calloc((size_t)d->pp, sizeof *q.pos);
  int rc = 0;
  if (!q.e || !q.f || !q.b || !q.busy || !q.order || !q.pos) {
    rc = str_errf(err, errn, "out of memory");
    goto done;
  }
  for (int64_t vs = 0; vs < q.S; vs++)
    for (int64_t mb = 0; mb < q.M; mb++) {
      task *f = &q.f[vs * q.M + mb], *b = &q.b[vs * q.M + mb];
      f->dur = sched_task_s(d, vs, false);
      b->dur = sched_task_s(d, vs, true);
      f->deps_left = vs > 0 ? 1 : 0;       /* the previous stage's forward */
      b->deps_left = vs + 1 < q.S ? 2 : 1; /* its own forward, the next stage's backward */
    }
  for (int64_t dev = 0; dev < d->pp; dev++) {
    build_order(d, dev, q.order + dev * 2 * q.M * d->vp);
    eng_at(q.e, 0, on_ready, &q, dev);
  }
  eng_run(q.e);
  for (size_t i = 0; i < nt && rc == 0; i++)
    if (q.b[i].deps_left != -1)
      rc = str_errf(err, errn, "the pipeline schedule deadlocked (a bug; please report the plan)");
  if (rc == 0 && (q.oom || eng_failed(q.e))) rc = str_errf(err, errn, "out of memory");
done:
  eng_free(q.e);
  free(q.f);
  free(q.b);
  free(q.busy);
  free(q.order);
  free(q.pos);
  if (rc != 0) sched_out_free(o);
  return rc;
}

/* ---- evaluated directly ---- */

int sched_eval(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (alloc_out(d, o, err, errn) != 0) return -1;
  int64_t pp = d->pp, M = d->M, S = pp * d->vp, total = M * d->vp;
  if (S == 1) { /* one stage: f b f b ..., the closed form M (f + b) */
    double f = sched_task_s(d, 0, false), b = sched_task_s(d, 0, true);
    o->busy_s[0] = (double)M * (f + b);
    o->end_s = o->last_b_end[0] = o->busy_s[0];
    o->vs_b_dur[0] = b;
    o->vs_b_start[0] = o->end_s - b;
    return 0;
  }
  size_t nt = (size_t)(S * M);
  double *fdone = malloc(nt * sizeof *fdone), *bdone = malloc(nt * sizeof *bdone);
  double *free_at = calloc((size_t)pp, sizeof *free_at);
  int64_t *order = malloc(nt * 2 * sizeof *order), *pos = calloc((size_t)pp, sizeof *pos);
  int rc = 0;
  if (!fdone || !bdone || !free_at || !order || !pos) {
    rc = str_errf(err, errn, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nt; i++) fdone[i] = bdone[i] = -1;
  for (int64_t dev = 0; dev < pp; dev++) build_order(d, dev, order + dev * 2 * total);
  /* sweep the chips, each running its tasks in order while their inputs
  ** are done: a list schedule, start = max(chip free, inputs ready) */
  int64_t left = (int64_t)nt * 2;
  while (left > 0) {
    int64_t moved = 0;
    for (int64_t dev = 0; dev < pp; dev++) {
      const int64_t *ord = order + dev * 2 * total;
      while (pos[dev] < 2 * total) {
        int64_t code = ord[pos[dev]];
        bool back = code < 0;
        int64_t id = (back ? -code : code) - 1, vs = id / M;
        double ready;
        if (!back) {
          if (vs > 0 && fdone[id - M] < 0) break;
          ready = vs > 0 ? fdone[id - M] + d->p2p_s : 0;
        } else {
          if (fdone[id] < 0 || (vs + 1 < S && bdone[id + M] < 0)) break;
          ready = fdone[id];
          if (vs + 1 < S && bdone[id + M] + d->p2p_s > ready) ready = bdone[id + M] + d->p2p_s;
        }
        double t0 = free_at[dev] > ready ? free_at[dev] : ready, dur = sched_task_s(d, vs, back);
        free_at[dev] = t0 + dur;
        (back ? bdone : fdone)[id] = t0 + dur;
        ran(d, o, dev, code, t0, dur);
        pos[dev]++;
        moved++;
      }
    }
    left -= moved;
    if (moved == 0) {
      rc = str_errf(err, errn, "the pipeline schedule deadlocked (a bug; please report the plan)");
      break;
    }
  }
done:
  free(fdone);
  free(bdone);
  free(free_at);
  free(order);
  free(pos);
  if (rc != 0) sched_out_free(o);
  return rc;
}

/* ---- after the last backward ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double sched_tail(const sched_desc *d, const sched_out *o, double dp_s, int64_t buckets,
                  bool after_backward, double optimizer_s, double *bucket_t0, double *bucket_t1,
                  double *opt_t0) {
  double end = 0;
  int64_t vp = d->vp, per_chunk = buckets / vp > 0 ? buckets / vp : 1;
  double stack_ready[64], *ready = buckets <= 64 ? stack_ready : malloc((size_t)buckets * sizeof *ready);
  for (int64_t dev = 0; dev < d->pp; dev++) {
    double t = o->last_b_end[dev];
    if (dp_s > 0 && ready) {
      for (int64_t j = 0; j < buckets; j++) {
        int64_t v = j / per_chunk < vp ? j / per_chunk : vp - 1, vs = v * d->pp + dev;
        ready[j] = after_backward ? o->last_b_end[dev]
                                  : o->vs_b_start[vs] + o->vs_b_dur[vs] *
                                                            (double)(j - v * per_chunk + 1) /
                                                            (double)per_chunk;
      }
      qsort(ready, (size_t)buckets, sizeof *ready, cmp_double);
      eng_res link = {0};
      double each = dp_s / (double)buckets;
      for (int64_t j = 0; j < buckets; j++) {
        t = eng_res_use(&link, ready[j], each);
        if (bucket_t1) bucket_t1[dev * buckets + j] = t;
        if (bucket_t0) bucket_t0[dev * buckets + j] = t - each;
      }
      if (t < o->last_b_end[dev]) t = o->last_b_end[dev];
    }
    if (opt_t0) opt_t0[dev] = t;
    t += optimizer_s;
    if (t > end) end = t;
  }
  if (ready != stack_ready) free(ready);
  return end;
}
