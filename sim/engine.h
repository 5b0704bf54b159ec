/*
** engine.h -- the discrete-event core: a clock and a queue of callbacks.
**
** The engine knows nothing of chips, links or ML: models schedule
** callbacks, and resources (a compute stream, a link) are FIFO servers that
** hand back the time a piece of work finishes. Equal times run in the order
** they were scheduled, so a run is deterministic. An engine is a value:
** create, run, free; several run on threads at once.
*/
#ifndef TPUSIM_ENGINE_H
#define TPUSIM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eng eng;
typedef void (*eng_fn)(eng *e, void *ctx, int64_t arg);

eng *eng_new(void);
void eng_free(eng *e);

double eng_now(const eng *e);
/* Runs fn(e, ctx, arg) at time t (not before now). Returns 0, or -1 if out
** of memory (the engine then stops at the next eng_run step). */
int eng_at(eng *e, double t, eng_fn fn, void *ctx, int64_t arg);
/* Runs every event in time order until none is left; returns how many ran. */
int64_t eng_run(eng *e);
/* Events run so far. */
int64_t eng_events(const eng *e);
bool eng_failed(const eng *e);

/* A FIFO server: work submitted at time t starts when the server is free
** (not before t) and keeps it busy for `duration`. Returns the finish time. */
typedef struct {
  double free_at;
  double busy_s; /* total busy time, for utilization */
} eng_res;

double eng_res_use(eng_res *r, double t, double duration);

#endif
