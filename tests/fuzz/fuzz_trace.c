/*
** fuzz_trace.c -- traces `tpusim view` reads (viz/view): open, lay out the
** lanes and groups as a screenshot would.
*/
#include "../../viz/view.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  FILE *err = fopen("/dev/null", "w");
  if (!err) return 0;
  view_trace *t = view_trace_open(fuzz_file(data, n, ".json"), err);
  if (t) {
    double t0, t1;
    view_trace_span(t, &t0, &t1);
    for (int g = 0; g < view_groups(t); g++) view_group_expand(t, g, true);
    view_trace_free(t);
  }
  fclose(err);
  return 0;
}
