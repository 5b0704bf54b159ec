/*
** fuzz_hw.c -- hardware files (hw_models/hw): load, then print as `hw
** show` and `--json` do.
*/
#include "../../hw_models/hw.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  diag *dg = diag_new();
  hw_model *m = hw_load("fuzz.json", (const char *)data, n, dg);
  if (m) {
    FILE *null = fopen("/dev/null", "w");
    if (null) {
      hw_print_show(m, null);
      fclose(null);
    }
    free(hw_to_json(m));
    hw_free(m);
  } else {
    FUZZ_REQUIRE(diag_count(dg) > 0);
  }
  diag_free(dg);
  return 0;
}
