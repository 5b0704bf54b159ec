/*
** fuzz_model.c -- model.json and HuggingFace config.json (workloads/model):
** load the file, then, when it loads, derive a tensor-parallel shard of
** one layer as the simulator does.
*/
#include "../../workloads/model.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  diag *dg = diag_new();
  model_opts o = {.seq_len = 0};
  model *m = model_load(fuzz_file(data, n, ".json"), &o, dg);
  if (m) {
    model_opts s = {.seq_len = m->train.seq_len > 1 ? m->train.seq_len : 128, .global_batch = 1,
                    .shard_tp = 2, .only_layers = 1};
    diag *d2 = diag_new();
    model *one = m->spec ? model_derive(m, &s, d2) : NULL;
    model_free(one);
    diag_free(d2);
    model_free(m);
  } else {
    FUZZ_REQUIRE(diag_count(dg) > 0);
  }
  diag_free(dg);
  return 0;
}
