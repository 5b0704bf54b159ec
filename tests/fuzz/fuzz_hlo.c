/*
** fuzz_hlo.c -- XLA HLO text (workloads/hlo): import into a graph.
*/
#include "../../workloads/graph.h"
#include "../../workloads/hlo.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  diag *dg = diag_new();
  graph *g = hlo_import("fuzz.hlo", (const char *)data, n, dg);
  if (g) graph_free(g);
  else FUZZ_REQUIRE(diag_count(dg) > 0);
  (void)hlo_devices((const char *)data, n);
  diag_free(dg);
  return 0;
}
