/*
** engine.c -- see engine.h. A binary heap ordered by (time, sequence).
*/
#include "engine.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
  double t;
  uint64_t seq; /* scheduling order: the tie-break that makes runs repeatable */
  eng_fn fn;
  void *ctx;
  int64_t arg;
} event;

struct eng {
  event *heap;
  int64_t n, cap;
  uint64_t next_seq;
  double now;
  int64_t ran;
  bool failed;
};

eng *eng_new(void) { return calloc(1, sizeof(eng)); }

void eng_free(eng *e) {
  if (!e) return;
  free(e->heap);
  free(e);
}

double eng_now(const eng *e) { return e->now; }
int64_t eng_events(const eng *e) { return e->ran; }
bool eng_failed(const eng *e) { return e->failed; }

static bool before(const event *a, const event *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int eng_at(eng *e, double t, eng_fn fn, void *ctx, int64_t arg) {
  if (e->n == e->cap) {
    int64_t cap = e->cap ? e->cap * 2 : 1024;
    event *h = realloc(e->heap, (size_t)cap * sizeof *h);
    if (!h) {
      e->failed = true;
      return -1;
    }
    e->heap = h;
    e->cap = cap;
  }
  event ev = {t < e->now ? e->now : t, e->next_seq++, fn, ctx, arg};
  int64_t i = e->n++;
  while (i > 0) { /* sift up */
    int64_t p = (i - 1) / 2;
    if (!before(&ev, &e->heap[p])) break;
    e->heap[i] = e->heap[p];
    i = p;
  }
  e->heap[i] = ev;
  return 0;
}

static event pop(eng *e) {
  event top = e->heap[0];
  event last = e->heap[--e->n];
  int64_t i = 0;
  for (;;) { /* sift down */
    int64_t c = 2 * i + 1;
    if (c >= e->n) break;
    if (c + 1 < e->n && before(&e->heap[c + 1], &e->heap[c])) c++;
    if (!before(&e->heap[c], &last)) break;
    e->heap[i] = e->heap[c];
    i = c;
  }
  if (e->n > 0) e->heap[i] = last;
  return top;
}

int64_t eng_run(eng *e) {
  int64_t start = e->ran;
  while (e->n > 0 && !e->failed) {
    event ev = pop(e);
    e->now = ev.t;
    e->ran++;
    ev.fn(e, ev.ctx, ev.arg);
  }
  return e->ran - start;
}

double eng_res_use(eng_res *r, double t, double duration) {
  double start = t > r->free_at ? t : r->free_at;
  r->free_at = start + duration;
  r->busy_s += duration;
  return r->free_at;
}
