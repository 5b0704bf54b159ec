/*
** fuzz_sweep.c -- a sweep's STUDY.json (cli/sweep_study: its models,
** hardware names, override keys and ranges, point count): load it, then,
** when it loads, take its CSV header and its first and last points as
** `tpusim sweep` does before it plans any.
*/
#include "../../cli/sweep_int.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  diag *dg = diag_new();
  sweep_study *s = sweep_study_load(fuzz_file(data, n, ".json"), NULL, 0, dg);
  if (s) {
    int64_t points = sweep_study_points(s);
    FUZZ_REQUIRE(points >= 1 && points <= SWEEP_MAX_POINTS);
    free(sweep_csv_header(s));
    sweep_point p;
    sweep_point_at(s, 0, &p);
    sweep_point_at(s, points - 1, &p);
    sweep_study_free(s);
  } else {
    FUZZ_REQUIRE(diag_count(dg) > 0);
  }
  diag_free(dg);
  return 0;
}
