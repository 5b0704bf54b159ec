/*
** trace.h -- a simulated step as Chrome/Perfetto trace JSON (`simulate
** --trace FILE`), read from the timeline sim/step filled in: a process per
** pipeline stage with its compute track, its network track (tensor-parallel
** collectives, the gradient buckets) and the ops of micro-batch 0, and its
** HBM in use as a counter; a whole-step model as one chip's process.
** `tpusim view` reads what this writes (viz/view.h).
*/
#ifndef TPUSIM_TRACE_H
#define TPUSIM_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "../sim/step.h"
#include "view.h"

/* The largest trace simulate writes: the largest tpusim view reads
** (VIEW_TRACE_MAX_BYTES, 512 MiB; docs/limits.md), so that every trace
** written can be opened. */
#define TRACE_MAX_BYTES ((uint64_t)VIEW_TRACE_MAX_BYTES)

/* Writes the trace of step r (simulated under p with timeline tl) to f,
** event by event (memory does not grow with the trace). Before a byte is
** written its size is counted from the same events, and a trace larger
** than max_bytes, or with one event larger than the viewer parses
** (VIEW_TRACE_MAX_PART), is refused: err (may be NULL) says its size, the
** limit and what to change. Returns 0, or -1 with err (refused, out of
** memory, or the write failed). */
int trace_write_limit(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                      const char *model_name, const char *hw_name, uint64_t max_bytes, char *err,
                      size_t errn);
/* trace_write_limit at TRACE_MAX_BYTES without the message. */
int trace_write(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                const char *model_name, const char *hw_name);

/* A serving timeline (`tpusim serve --trace FILE`): a process per replica
** (at most `replicas` of them, the first 8 drawn) with a prefill and a
** decode track, over `span_s` seconds: requests arrive every
** replicas / qps seconds at each replica and their prompts' prefills
** (ttft_s each) interleave with back-to-back decode steps
** (decode_step_s each), as the inference step times them. Same writer and
** format as a training step's trace; `tpusim view` opens it. 0 or -1. */
typedef struct {
  const char *model_name, *hw_name;
  int64_t replicas, batch;
  double qps, ttft_s, decode_step_s, span_s;
} trace_serving;
int trace_write_serving(FILE *f, const trace_serving *s);

#endif
