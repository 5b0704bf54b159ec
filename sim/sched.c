/*
** sched.c -- see sched.h.
*/
#include "sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "engine.h"

bool sched_desc_same(const sched_desc *a, const sched_desc *b) {
  if (!(a->pp == b->pp && a->vp == b->vp && a->M == b->M && a->schedule == b->schedule &&
        a->f_chunk == b->f_chunk && a->b_chunk == b->b_chunk && a->f_first == b->f_first &&
        a->b_first == b->b_first && a->f_last == b->f_last && a->b_last == b->b_last &&
        a->p2p_s == b->p2p_s && a->defer == b->defer && a->defer_limit == b->defer_limit &&
        a->b_last_defer == b->b_last_defer && a->drain_ag_s == b->drain_ag_s &&
        !a->f_vs == !b->f_vs))
    return false;
  for (int64_t i = 0; a->f_vs && i < a->pp * a->vp; i++)
    if (a->f_vs[i] != b->f_vs[i] || a->b_vs[i] != b->b_vs[i]) return false;
  return true;
}

double sched_task_s(const sched_desc *d, int64_t vs, bool back) {
  double t = d->f_vs ? (back ? d->b_vs[vs] : d->f_vs[vs]) : back ? d->b_chunk : d->f_chunk;
  if (vs == 0) t += back ? d->b_first : d->f_first;
  if (vs == d->pp * d->vp - 1) t += back ? d->b_last : d->f_last;
  return t;
}

int64_t sched_deferred(const sched_desc *d) {
  if (!d->defer || d->b_last_defer <= 0) return 0;
  return d->defer_limit == 0 || d->defer_limit > d->M ? d->M : d->defer_limit;
}

double sched_drain_s(const sched_desc *d) {
  int64_t n = sched_deferred(d);
  if (n == 0) return 0;
  double w = d->b_last_defer, g = d->drain_ag_s;
  return g + (double)(n - 1) * (w > g ? w : g) + w;
}

/* The drain on the chip of the last virtual stage, after its last
** backward: what both evaluators add once the schedule has run. */
static void add_drain(const sched_desc *d, sched_out *o) {
  double t = sched_drain_s(d);
  if (t <= 0) return;
  int64_t dev = d->pp - 1;
  o->busy_s[dev] += t;
  o->last_b_end[dev] += t;
  if (o->last_b_end[dev] > o->end_s) o->end_s = o->last_b_end[dev];
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
  int64_t defer = sched_deferred(d);
  if (!q.e || !q.f || !q.b || !q.busy || !q.order || !q.pos) {
    rc = str_errf(err, errn, "out of memory");
    goto done;
  }
  for (int64_t vs = 0; vs < q.S; vs++)
    for (int64_t mb = 0; mb < q.M; mb++) {
      task *f = &q.f[vs * q.M + mb], *b = &q.b[vs * q.M + mb];
      f->dur = sched_task_s(d, vs, false);
      b->dur = sched_task_s(d, vs, true) - (vs == q.S - 1 && mb < defer ? d->b_last_defer : 0);
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
  if (rc == 0) add_drain(d, o);
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

/* One task of a chip's order, decoded for the sweep: its id (vs x M +
** micro-batch), virtual stage and direction. */
typedef struct {
  int64_t id;
  int32_t vs;
  bool back;
} sweep_task;

/* Forward k of chip dev as seq_task numbers it, walked k = 0, 1, ..
** without a division per task: r = k mod pp, chunk = (k / pp) mod V, g =
** k / (pp V). */
typedef struct {
  int64_t r, chunk, g;
} seq_walk;

/* inlined: called once per task (millions per search), where a call cost
** as much as its body */
static inline __attribute__((always_inline)) sweep_task seq_next(const sched_desc *d, int64_t dev,
                                                                 seq_walk *w, bool back) {
  int64_t pp = d->pp, vp = d->vp, chunk = back ? vp - 1 - w->chunk : w->chunk;
  int64_t vs = chunk * pp + dev, mb = w->g * pp + w->r;
  if (++w->r == pp) {
    w->r = 0;
    if (++w->chunk == vp) w->chunk = 0, w->g++;
  }
  return (sweep_task){vs * d->M + mb, (int32_t)vs, back};
}

/* Chip dev's 2 M V tasks in build_order's order, decoded. */
static void sweep_order(const sched_desc *d, int64_t dev, sweep_task *o) {
  int64_t pp = d->pp, vp = d->vp, total = d->M * vp, n = 0;
  int64_t warm = d->schedule == PLAN_GPIPE         ? total
                 : d->schedule == PLAN_INTERLEAVED ? (pp - dev - 1) * 2 + (vp - 1) * pp
                                                   : pp - dev - 1;
  if (warm > total) warm = total;
  seq_walk fw = {0}, bw = {0};
  for (int64_t k = 0; k < warm; k++) o[n++] = seq_next(d, dev, &fw, false);
  for (int64_t i = 0; i < total - warm; i++) {
    o[n++] = seq_next(d, dev, &fw, false);
    o[n++] = seq_next(d, dev, &bw, true);
  }
  for (int64_t k = total - warm; k < total; k++) o[n++] = seq_next(d, dev, &bw, true);
}

/* The list schedule evaluated task by task: the chips are swept in turn,
** each running its tasks in order while their inputs are done (start =
** max(chip free, inputs ready)). O(tasks). Each task is recorded as ran()
** records it, the same operations in the same order. */
static int sweep(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (alloc_out(d, o, err, errn) != 0) return -1;
  int64_t pp = d->pp, M = d->M, S = pp * d->vp, total = M * d->vp, defer = sched_deferred(d);
  size_t nt = (size_t)(S * M);
  double *fdone = malloc(nt * 2 * sizeof *fdone), *bdone = fdone ? fdone + nt : NULL;
  double *free_at = calloc((size_t)pp, sizeof *free_at);
  double *dur = malloc((size_t)S * 2 * sizeof *dur); /* [vs]: forward, then backward */
  sweep_task *order = malloc(nt * 2 * sizeof *order);
  int64_t *pos = calloc((size_t)pp, sizeof *pos);
  int rc = 0;
  if (!fdone || !free_at || !dur || !order || !pos) {
    rc = str_errf(err, errn, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nt; i++) fdone[i] = bdone[i] = -1;
  for (int64_t vs = 0; vs < S; vs++) dur[vs] = sched_task_s(d, vs, false), dur[S + vs] = sched_task_s(d, vs, true);
  for (int64_t dev = 0; dev < pp; dev++) sweep_order(d, dev, order + dev * 2 * total);
  int64_t left = (int64_t)nt * 2;
  while (left > 0) {
    int64_t moved = 0;
    for (int64_t dev = 0; dev < pp; dev++) {
      const sweep_task *ord = order + dev * 2 * total;
      int64_t at = pos[dev];
      /* the chip's figures in registers while it runs: the same additions
      ** in the same order, and the same maximum */
      double busy = free_at[dev], busy_sum = o->busy_s[dev], end = o->end_s;
      while (at < 2 * total) {
        int64_t id = ord[at].id, vs = ord[at].vs;
        bool back = ord[at].back;
        double ready;
        if (!back) {
          if (vs > 0 && fdone[id - M] < 0) break;
          ready = vs > 0 ? fdone[id - M] + d->p2p_s : 0;
        } else {
          if (fdone[id] < 0 || (vs + 1 < S && bdone[id + M] < 0)) break;
          ready = fdone[id];
          if (vs + 1 < S && bdone[id + M] + d->p2p_s > ready) ready = bdone[id + M] + d->p2p_s;
        }
        double t0 = busy > ready ? busy : ready, dt = dur[back ? S + vs : vs];
        if (defer && back && vs == S - 1 && id - vs * M < defer) dt -= d->b_last_defer;
        busy = t0 + dt;
        (back ? bdone : fdone)[id] = t0 + dt;
        /* ran() */
        busy_sum += dt;
        if (back) {
          o->vs_b_start[vs] = t0;
          o->vs_b_dur[vs] = dt;
          o->last_b_end[dev] = t0 + dt;
        }
        if (t0 + dt > end) end = t0 + dt;
        at++;
      }
      o->busy_s[dev] = busy_sum, o->end_s = end;
      moved += at - pos[dev];
      pos[dev] = at;
      free_at[dev] = busy;
    }
    left -= moved;
    if (moved == 0) {
      rc = str_errf(err, errn, "the pipeline schedule deadlocked (a bug; please report the plan)");
      break;
    }
  }
done:
  free(fdone);
  free(free_at);
  free(dur);
  free(order);
  free(pos);
  if (rc != 0) sched_out_free(o);
  return rc;
}

/* GPipe as a flow shop of identical jobs: every forward, then every
** backward, each chip never blocked by another's order, so the last
** backward of chip d ends at
**   E_d = sum f + (pp-1) c + (M-1) max f          (the forwards reach the last stage)
**       + sum_{s>=d} b + (pp-1-d) c + (M-1) max_{s>=d} b
** (a path down with the first micro-batch, along the slowest stage, down
** with the last; the same back up). */
static int gpipe_closed(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (alloc_out(d, o, err, errn) != 0) return -1;
  int64_t pp = d->pp, M = d->M;
  double sum_f = 0, max_f = 0;
  for (int64_t s = 0; s < pp; s++) {
    double f = sched_task_s(d, s, false);
    sum_f += f;
    if (f > max_f) max_f = f;
  }
  double fwd = sum_f + (double)(pp - 1) * d->p2p_s + (double)(M - 1) * max_f;
  double sum_b = 0, max_b = 0;
  for (int64_t s = pp - 1; s >= 0; s--) {
    double b = sched_task_s(d, s, true);
    sum_b += b;
    if (b > max_b) max_b = b;
    double e = fwd + sum_b + (double)(pp - 1 - s) * d->p2p_s + (double)(M - 1) * max_b;
    o->last_b_end[s] = e;
    o->vs_b_dur[s] = b;
    o->vs_b_start[s] = e - b;
    o->busy_s[s] = (double)M * (sched_task_s(d, s, false) + b);
    if (e > o->end_s) o->end_s = e;
  }
  return 0;
}

static int periodic(const sched_desc *d, sched_out *o, char *err, size_t errn);

/* sched_eval before the drain; periodic: extrapolate whatever the size */
static int eval_tasks(const sched_desc *d, sched_out *o, bool periodic_always, char *err,
                      size_t errn) {
  int64_t pp = d->pp, M = d->M, S = pp * d->vp, defer = sched_deferred(d);
  if (S == 1) { /* one stage: f b f b ..., the closed form M (f + b) */
    if (alloc_out(d, o, err, errn) != 0) return -1;
    double f = sched_task_s(d, 0, false), b = sched_task_s(d, 0, true);
    o->busy_s[0] = (double)M * (f + b) - (double)defer * d->b_last_defer;
    o->end_s = o->last_b_end[0] = o->busy_s[0];
    o->vs_b_dur[0] = b - (defer == M ? d->b_last_defer : 0);
    o->vs_b_start[0] = o->end_s - o->vs_b_dur[0];
    return 0;
  }
  /* the closed forms and the period take every micro-batch alike: a
  ** deferral of some of them is swept (of all of them, it is periodic) */
  if (defer > 0 && (defer < M || d->schedule == PLAN_GPIPE)) return sweep(d, o, err, errn);
  if (d->schedule == PLAN_GPIPE && d->vp == 1) return gpipe_closed(d, o, err, errn);
  /* every task swept below the cap (exact); past it the periodic
  ** extrapolation */
  if (!periodic_always && (double)M * (double)S <= SCHED_SWEEP_TASKS) return sweep(d, o, err, errn);
  return periodic(d, o, err, errn);
}

static int periodic(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  int64_t pp = d->pp, M = d->M, S = pp * d->vp;
  /* 1F1B and interleaved 1F1B settle into a period: past a transient, pp
  ** more micro-batches add the same time to every chip's end (the schedule
  ** repeats each group of pp). So short schedules of Ma, Ma + pp and Ma +
  ** 2 pp micro-batches (Ma = M0 + (M - M0) mod pp) give every figure of
  ** the long one by extrapolation, O(pp^2) work whatever M, once their two
  ** increments agree. M0 = pp for 1F1B (the pipeline full), 2 pp for
  ** interleaved, whose period holds while a send is short against a chunk
  ** (checked up to 0.3 of it). The transient is not bounded by M0: a last
  ** stage heavier than the rest by a little (the head) takes many groups to
  ** set the pace -- the extrapolation is up to 3.6 % off on
  ** tests/test_stepmodel.c's random schedules whose ends differ -- and two
  ** equal increments do not prove it over: so sched_eval sweeps every schedule
  ** up to SCHED_SWEEP_TASKS, and only a longer one is extrapolated (where
  ** the increments differ, swept too). */
  bool interleaved = d->schedule == PLAN_INTERLEAVED;
  double shortest = d->f_chunk < d->b_chunk ? d->f_chunk : d->b_chunk;
  int64_t M0 = interleaved ? 2 * pp : pp;
  /* stages that differ settle into their period later than M0: swept */
  if (d->f_vs || (interleaved && !(d->p2p_s <= 0.3 * shortest)) || M <= M0 + 2 * pp)
    return sweep(d, o, err, errn);
  sched_desc ds[3] = {*d, *d, *d};
  sched_out r[3];
  for (int i = 0; i < 3; i++) {
    ds[i].M = M0 + (M - M0) % pp + i * pp;
    ds[i].defer_limit = 0; /* every one, as in the long schedule */
    if (sweep(&ds[i], &r[i], err, errn) != 0) {
      while (i-- > 0) sched_out_free(&r[i]);
      return -1;
    }
  }
  const sched_out *a = &r[0], *b = &r[1], *c = &r[2];
  double tol = 1e-12 * c->end_s;
  bool periodic = fabs((c->end_s - b->end_s) - (b->end_s - a->end_s)) <= tol;
  for (int64_t dev = 0; periodic && dev < pp; dev++)
    periodic = fabs((c->last_b_end[dev] - b->last_b_end[dev]) -
                    (b->last_b_end[dev] - a->last_b_end[dev])) <= tol;
  for (int64_t vs = 0; periodic && vs < S; vs++)
    periodic = fabs((c->vs_b_start[vs] - b->vs_b_start[vs]) -
                    (b->vs_b_start[vs] - a->vs_b_start[vs])) <= tol;
  double n = (double)((M - ds[0].M) / pp);
  int rc = periodic ? alloc_out(d, o, err, errn) : sweep(d, o, err, errn);
  if (rc == 0 && periodic) {
    o->end_s = a->end_s + n * (b->end_s - a->end_s);
    for (int64_t dev = 0; dev < pp; dev++) {
      o->last_b_end[dev] = a->last_b_end[dev] + n * (b->last_b_end[dev] - a->last_b_end[dev]);
      o->busy_s[dev] = a->busy_s[dev] * (double)M / (double)ds[0].M; /* every task of the chip */
    }
    for (int64_t vs = 0; vs < S; vs++) {
      o->vs_b_start[vs] = a->vs_b_start[vs] + n * (b->vs_b_start[vs] - a->vs_b_start[vs]);
      o->vs_b_dur[vs] = a->vs_b_dur[vs];
    }
  }
  for (int i = 0; i < 3; i++) sched_out_free(&r[i]);
  return rc;
}

int sched_eval(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (eval_tasks(d, o, false, err, errn) != 0) return -1;
  add_drain(d, o);
  return 0;
}

int sched_eval_periodic(const sched_desc *d, sched_out *o, char *err, size_t errn) {
  if (eval_tasks(d, o, true, err, errn) != 0) return -1;
  add_drain(d, o);
  return 0;
}

/* ---- after the last backward ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The ready time of chip dev's bucket j: as the last backward of its chunk
** passes the bucket's layer (all at the chip's last backward's end when the
** all-reduce waits for the whole backward). */
static double bucket_ready(const sched_desc *d, const sched_out *o, int64_t dev, int64_t j,
                           int64_t per_chunk, bool after_backward) {
  if (after_backward) return o->last_b_end[dev];
  int64_t v = j / per_chunk < d->vp ? j / per_chunk : d->vp - 1, vs = v * d->pp + dev;
  return o->vs_b_start[vs] + o->vs_b_dur[vs] * (double)(j - v * per_chunk + 1) / (double)per_chunk;
}

double sched_tail(const sched_desc *d, const sched_out *o, double dp_s, int64_t buckets,
                  bool after_backward, double optimizer_s, double *bucket_t0, double *bucket_t1,
                  double *opt_t0) {
  double end = 0;
  int64_t vp = d->vp, per_chunk = buckets / vp > 0 ? buckets / vp : 1;
  bool listed = bucket_t0 || bucket_t1 || vp > 1; /* the buckets one by one */
  double stack_ready[64], *ready = stack_ready;
  if (dp_s > 0 && listed && buckets > 64 && !(ready = malloc((size_t)buckets * sizeof *ready)))
    listed = false; /* out of memory: the closed form below still gives the end */
  double each = dp_s / (double)buckets;
  for (int64_t dev = 0; dev < d->pp; dev++) {
    double t = o->last_b_end[dev];
    if (dp_s > 0 && !listed) {
      /* the buckets are ready in order, one link serves them in turn:
      ** t_j = max(ready_j, t_j-1) + each, so the last ends at the largest
      ** ready_j + (buckets - j) each -- at j = 0 or the last, ready being
      ** linear in j (one chunk a chip) */
      double first = bucket_ready(d, o, dev, 0, per_chunk, after_backward) + dp_s;
      double last = bucket_ready(d, o, dev, buckets - 1, per_chunk, after_backward) + each;
      t = first > last ? first : last;
    } else if (dp_s > 0) {
      for (int64_t j = 0; j < buckets; j++)
        ready[j] = bucket_ready(d, o, dev, j, per_chunk, after_backward);
      if (vp > 1) qsort(ready, (size_t)buckets, sizeof *ready, cmp_double); /* chunks interleave */
      eng_res link = {0};
      for (int64_t j = 0; j < buckets; j++) {
        t = eng_res_use(&link, ready[j], each);
        if (bucket_t1) bucket_t1[dev * buckets + j] = t;
        if (bucket_t0) bucket_t0[dev * buckets + j] = t - each;
      }
    }
    if (t < o->last_b_end[dev]) t = o->last_b_end[dev];
    /* a deferral completes the output layer's gradient only in the drain
    ** (last_b_end includes it): its bucket's share of the reduction after */
    if (dev == d->pp - 1 && dp_s > 0 && sched_deferred(d) > 0 && t < o->last_b_end[dev] + each)
      t = o->last_b_end[dev] + each;
    if (opt_t0) opt_t0[dev] = t;
    t += optimizer_s;
    if (t > end) end = t;
  }
  if (ready != stack_ready) free(ready);
  return end;
}
