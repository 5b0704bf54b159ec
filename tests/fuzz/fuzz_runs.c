/*
** fuzz_runs.c -- tables of runs and the mapping (cli/runs: the one reader
** behind `tpusim validate` and `tpusim calibrate --runs`, both of which a
** user points at a file of their own). An input whose header starts
** "kind," is a mapping, read beside a two-row table; any other a table of
** runs, read with the project's mapping (so both kinds of file seed it as
** they are). When the pair opens, every row is
** turned into its simulate command (the mapping's templates, defaults and
** phrases), as validate does before it simulates; nothing is simulated.
*/
#include "../../cli/runs.h"
#include "fuzz_common.h"

/* Two rows of the public columns: one the mapping's templates fill, one
** whose cells are mostly '?' (the mapping's defaults). */
static const char TABLE[] =
    "id,source,chip,chips,model,params_B,layers,hidden,heads,kv_heads,ffn,vocab,seq,gbs_seq,mbs,"
    "tp,pp,dp,cp,vp,sp,zero_or_fsdp,recompute,precision,metric,value,derived_step_s,ep,experts,"
    "topk,extra\n"
    "a,Megatron-Bridge perf-summary 26.08,GB200,64,qwen3_moe,235,94,4096,64,4,12288,151936,4096,"
    "1024,1,2,1,32,1,1,1,1,none,mxfp8,tokens_per_sec_per_gpu,1,14.7,64,128,8,nemo_container=26.08\n"
    "b,MaxText README,v5e,256,maxtext2310,16,32,5120,32,32,32768,32768,2048,512,?,1,1,256,?,?,?,"
    "fsdp256,full,bf16,tflops_per_chip,1,10.9,?,?,?,\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  bool mapping = n >= 5 && memcmp(data, "kind,", 5) == 0;
  static char table_path[256];
  const char *path = fuzz_file(data, n, mapping ? ".mapping.csv" : ".csv");
  const char *file = path, *mfile = RUNS_DEFAULT_MAPPING;
  if (mapping) {
    snprintf(table_path, sizeof table_path, "/tmp/tpusim-fuzz-%d-table.csv", (int)getpid());
    FILE *f = fopen(table_path, "wb");
    if (!f || fwrite(TABLE, 1, sizeof TABLE - 1, f) != sizeof TABLE - 1) abort();
    fclose(f);
    file = table_path;
    mfile = path;
  }
  FILE *null = fopen("/dev/null", "w");
  if (!null) abort();
  cli_ctx c = {.out = null, .err = null, .cmd = "validate"};
  diag *dg = diag_new();
  runs_table x;
  int bad_rows = 0;
  /* per_row as validate reads (a bad row costs that row); the table is
  ** refused outright only when its header or the mapping is bad */
  if (runs_open(&x, &c, file, mfile, RUNS_DEFAULT_MODELS, "nothing to validate", true,
                &bad_rows, dg) == 0) {
    for (int i = 0; i < x.n; i++) {
      runs_argv a = {.n = 0};
      if (runs_build_args(&x, &x.r[i], &a) != 0) FUZZ_REQUIRE(x.r[i].msg[0] != 0);
    }
  } else {
    FUZZ_REQUIRE(diag_count(dg) > 0);
  }
  runs_close(&x);
  diag_free(dg);
  fclose(null);
  return 0;
}
