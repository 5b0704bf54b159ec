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

#include <stdio.h>

#include "../sim/step.h"

/* Writes the trace of step r (simulated under p with timeline tl) to f.
** Returns 0, or -1 when writing failed. */
int trace_write(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                const char *model_name, const char *hw_name);

#endif
