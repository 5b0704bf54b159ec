/*
** test_cli.c -- the command line in-process: help, versions, exit codes,
** --json purity, determinism, unbuilt commands.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "../cli/cli.h"
#include "helpers.h"

Test(cli, help_lists_every_contract_command) {
  th_run r = th_cli("--help", NULL);
  cr_assert_eq(r.rc, 0);
  static const char *const cmds[] = {"plan", "simulate", "collective", "graph", "lower",
                                     "calibrate", "hw", "view", "plot"};
  for (int i = 0; i < 9; i++) {
    char want[32];
    snprintf(want, sizeof want, "\n  %s ", cmds[i]);
    cr_assert(strstr(r.out, want), "help lacks %s", cmds[i]);
  }
  cr_assert_str_eq(r.err, "");
  th_run_free(&r);
}

Test(cli, no_arguments_is_a_usage_error) {
  th_run r = th_cli(NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "Usage: tpusim COMMAND"));
  th_run_free(&r);
}

Test(cli, version_names_the_linked_libraries) {
  th_run r = th_cli("--version", NULL);
  cr_assert_eq(r.rc, 0);
  cr_assert(strncmp(r.out, "tpusim " TPUSIM_VERSION "\nLLVM 19.", 16 + strlen(TPUSIM_VERSION)) == 0,
            "%s", r.out);
  cr_assert(strstr(r.out, "cJSON 1.") && strstr(r.out, "SDL 2."));
  th_run_free(&r);
}

Test(cli, unknown_command_suggests) {
  th_run r = th_cli("simulat", NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "unknown command 'simulat'; did you mean 'simulate'?"), "%s", r.err);
  th_run_free(&r);
}

Test(cli, calibrate_rejects_arguments_before_timing_anything) {
  /* every command is built now (calibrate was the last): a stray argument
  ** is a usage error at once, not a minute of timing */
  th_run r = th_cli("calibrate", "x", NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "unexpected argument 'x'"), "%s", r.err);
  cr_assert_str_eq(r.out, "", "calibrate printed a result");
  th_run_free(&r);
  r = th_cli("calibrate", "--help", NULL);
  cr_assert_eq(r.rc, 0);
  cr_assert(strstr(r.out, "Usage:\n  tpusim calibrate"), "%s", r.out);
  th_run_free(&r);
}

Test(cli, hw_show_json_is_one_object_with_the_figures) {
  th_run r = th_cli("hw", "show", "tpu-v5p", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cJSON *o = cJSON_Parse(r.out);
  cr_assert_not_null(o, "stdout is not JSON");
  const cJSON *peak = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "chip"), "peak_flops_per_s");
  cr_assert_float_eq(cJSON_GetObjectItem(peak, "bf16")->valuedouble, 459e12, 1e9);
  cr_assert_null(cJSON_GetObjectItem(peak, "fp64"));
  double hbm = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "chip"), "hbm_bytes")->valuedouble;
  cr_assert_float_eq(hbm / (1024.0 * 1024 * 1024), 95.0, 1e-9);
  cr_assert(cJSON_IsObject(cJSON_GetObjectItem(o, "sources")));
  cJSON_Delete(o);
  th_run_free(&r);
}

Test(cli, tpu_v4_has_no_fp64_in_json) {
  th_run r = th_cli("hw", "show", "tpu-v4", "--json", NULL);
  cr_assert_eq(r.rc, 0);
  cJSON *o = cJSON_Parse(r.out);
  const cJSON *peak = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "chip"), "peak_flops_per_s");
  cr_assert_null(cJSON_GetObjectItem(peak, "fp64"));
  cr_assert_not_null(cJSON_GetObjectItem(peak, "bf16"));
  cJSON_Delete(o);
  th_run_free(&r);
}

Test(cli, hw_list_json_has_every_entry) {
  th_run r = th_cli("hw", "list", "--json", NULL);
  cr_assert_eq(r.rc, 0);
  cJSON *o = cJSON_Parse(r.out);
  cr_assert_not_null(o);
  cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "hardware")), 26); /* one per hw_models JSON file */
  cJSON_Delete(o);
  th_run_free(&r);
}

Test(cli, hw_list_text_has_a_row_per_entry) {
  th_run r = th_cli("hw", "list", NULL);
  cr_assert_eq(r.rc, 0);
  int rows = 0;
  for (const char *p = r.out; (p = strstr(p, "\n")); p++)
    if (strncmp(p + 1, "tpu-", 4) == 0 || strncmp(p + 1, "cpu-", 4) == 0 ||
        strncmp(p + 1, "a100", 4) == 0 || strncmp(p + 1, "h", 1) == 0 ||
        strncmp(p + 1, "b200", 4) == 0 || strncmp(p + 1, "b300", 4) == 0 ||
        strncmp(p + 1, "gb", 2) == 0 || strncmp(p + 1, "v100", 4) == 0 ||
        strncmp(p + 1, "t4 ", 3) == 0 || strncmp(p + 1, "l4 ", 3) == 0 ||
        strncmp(p + 1, "a10g", 4) == 0 || strncmp(p + 1, "edge-", 5) == 0 ||
        strncmp(p + 1, "phone-", 6) == 0)
      rows++;
  cr_assert_eq(rows, 26, "%s", r.out); /* one per hw_models JSON file */
  th_run_free(&r);
}

Test(cli, output_is_deterministic) {
  th_run a = th_cli("hw", "show", "h100-sxm", "--json", NULL);
  th_run b = th_cli("hw", "show", "h100-sxm", "--json", NULL);
  cr_assert_str_eq(a.out, b.out);
  th_run_free(&a);
  th_run_free(&b);
}

Test(cli, unknown_hardware_is_bad_input) {
  th_run r = th_cli("hw", "show", "tpu-5p", "--json", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert_str_eq(r.out, "");
  cr_assert(strstr(r.err, "unknown hardware 'tpu-5p'; did you mean 'tpu-v5p'?"), "%s", r.err);
  th_run_free(&r);
}

Test(cli, bad_hw_file_is_bad_input_with_place) {
  const char *p = th_write_temp("neg.json",
                                "{\n  \"schema\": \"tpusim-hw/1\",\n  \"chip\": {\"hbm_bytes\": -5}\n}\n");
  th_run r = th_cli("hw", "show", "--hw-file", p, NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "tests/out/neg.json:3:25: chip.hbm_bytes: expected a positive integer"),
            "%s", r.err);
  th_run_free(&r);
}

Test(cli, missing_hw_file_is_bad_input) {
  th_run r = th_cli("hw", "list", "--hw-file=tests/data/nope.json", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "tests/data/nope.json: cannot open"), "%s", r.err);
  th_run_free(&r);
}

/* plot reads its --hw-file files through cli.c's loader, as the table's
** commands do: a file's entry is found by --hw, a bad file is reported at
** its place, the ninth file is refused, and plot's own messages keep their
** "tpusim plot" prefix. */
Test(cli, plot_loads_hw_files_through_the_shared_loader) {
  char *text = th_replace(th_builtin_text("a100-80g"), "\"a100-80g\"", "\"my-a100\"");
  char mine[256], neg[256]; /* th_write_temp's path is one static buffer */
  snprintf(mine, sizeof mine, "%s", th_write_temp("my-a100.json", text));
  free(text);
  th_run r = th_cli("plot", "collective", "--hw", "my-a100", "--chips", "4", "--op", "all-gather",
                    "-o", "tests/out/plot-hwfile.svg", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "tpusim plot collective: unknown hardware 'my-a100'"), "%s", r.err);
  th_run_free(&r);
  r = th_cli("plot", "collective", "--hw", "my-a100", "--hw-file", mine, "--chips", "4", "--op",
             "all-gather", "-o", "tests/out/plot-hwfile.svg", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "wrote tests/out/plot-hwfile.svg"), "%s", r.out);
  th_run_free(&r);
  snprintf(neg, sizeof neg, "%s",
           th_write_temp("plot-neg.json",
                         "{\n  \"schema\": \"tpusim-hw/1\",\n  \"chip\": {\"hbm_bytes\": -5}\n}\n"));
  r = th_cli("plot", "collective", "--hw", "a100-80g", "--hw-file", neg, "--chips", "4", "--op",
             "all-gather", "-o", "tests/out/plot-hwfile.svg", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "plot-neg.json:3:25: chip.hbm_bytes: expected a positive integer"), "%s",
            r.err);
  cr_assert_null(strstr(r.err, "tpusim:"), "%s", r.err);
  th_run_free(&r);
  const char *a[32] = {"plot", "collective", "--hw", "a100-80g"};
  int n = 4;
  for (int i = 0; i < 9; i++) {
    a[n++] = "--hw-file";
    a[n++] = mine;
  }
  r = th_cli(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
             a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert_str_eq(r.err, "tpusim plot: too many --hw-file\nTry 'tpusim plot --help'.\n");
  th_run_free(&r);
}

Test(cli, usage_errors_exit_2) {
  const char *cases[][4] = {{"hw", NULL}, {"hw", "frobnicate", NULL}, {"hw", "show", NULL},
                            {"hw", "list", "--bogus", NULL}, {"hw", "list", "--hw-file", NULL},
                            {"hw", "show", "a", "b"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    th_run r = th_cli(cases[i][0], cases[i][1], cases[i][2], cases[i][3], NULL);
    cr_assert_eq(r.rc, 2, "case %zu: %s", i, r.err);
    cr_assert(strstr(r.err, "Try 'tpusim hw --help'"), "case %zu: %s", i, r.err);
    th_run_free(&r);
  }
}

Test(cli, graph_json_has_the_contract_fields) {
  th_run r = th_cli("graph", "llama3-8b", "--json", "--gbs", "2", "--seq", "1024", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cJSON *o = cJSON_Parse(r.out);
  cr_assert_not_null(o, "stdout is not one JSON object");
  static const char *const keys[] = {"model", "params", "active_params", "tokens_per_step",
                                     "flops_per_step", "flops_per_token", "ops_by_kind"};
  for (int i = 0; i < 7; i++) cr_assert_not_null(cJSON_GetObjectItem(o, keys[i]), "%s", keys[i]);
  cr_assert_float_eq(cJSON_GetObjectItem(o, "params")->valuedouble, 8030261248.0, 0.5);
  cr_assert_float_eq(cJSON_GetObjectItem(o, "tokens_per_step")->valuedouble, 2048, 0);
  const cJSON *f = cJSON_GetObjectItem(o, "flops_per_step");
  double sum = cJSON_GetObjectItem(f, "forward")->valuedouble +
               cJSON_GetObjectItem(f, "backward")->valuedouble +
               cJSON_GetObjectItem(f, "optimizer")->valuedouble;
  cr_assert_float_eq(cJSON_GetObjectItem(f, "total")->valuedouble, sum, sum * 1e-12);
  cr_assert_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "ops_by_kind"), "dot")->valuedouble, 0);
  cJSON_Delete(o);
  th_run_free(&r);
}

Test(cli, graph_options_are_checked) {
  th_run r = th_cli("graph", "llama3-8b", "--seq", "-5", NULL);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "--seq -5: expected an integer from 1 to 1048576; the nearest allowed is 1"),
            "%s", r.err);
  th_run_free(&r);
  r = th_cli("graph", "llama3-8b", "--precision", "fp4", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "precision 'fp4'"), "%s", r.err);
  th_run_free(&r);
  r = th_cli("graph", "no-such-model", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "no such file, and no example of that name (examples: "), "%s", r.err);
  th_run_free(&r);
}

Test(cli, graph_dot_is_graphviz) {
  th_run r = th_cli("graph", "llama3-8b", "--dot", "--seq", "64", "--forward-only", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strncmp(r.out, "digraph \"llama3-8b\" {\n", 22) == 0);
  cr_assert(strstr(r.out, " -> "));
  cr_assert_eq(r.out[strlen(r.out) - 2], '}');
  th_run_free(&r);
}

/* The step time of llama3-8b on 8 h100-sxm at --seq seq (formula costs:
** the same times, no LLVM work). */
static double step_at_seq(const char *seq, int64_t *plan_seq) {
  th_run r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--gbs", "8",
                    "--seq", seq, "--op-costs", "formula", "--json", NULL);
  cr_assert(r.rc == 0 || r.rc == 3, "--seq %s: exit %d: %s", seq, r.rc, r.err);
  cJSON *o = cJSON_Parse(r.out);
  cr_assert(o, "--seq %s: no JSON", seq);
  *plan_seq = (int64_t)cJSON_GetObjectItem(cJSON_GetObjectItem(o, "plan"), "seq")->valuedouble;
  double t = cJSON_GetObjectItem(o, "step_time_s")->valuedouble;
  cJSON_Delete(o);
  th_run_free(&r);
  return t;
}

/* --seq 1 was taken for "not given" by the per-chip model, which was built
** at the file's 8192 tokens: a step of one token took as long as 8192. */
Test(cli, simulate_uses_a_given_seq_of_one) {
  int64_t s1, s64;
  double t1 = step_at_seq("1", &s1), t64 = step_at_seq("64", &s64);
  cr_assert_eq(s1, 1);
  cr_assert_eq(s64, 64);
  cr_assert_lt(t1, t64, "a step of 1 token (%g s) is not shorter than one of 64 (%g s)", t1, t64);
}

/* Every numeric flag reads through base/num.h: a value out of range is one
** usage message with the flag, the value and the range, before any work. */
Test(cli, numeric_flags_refuse_out_of_range_with_the_range) {
  static const struct {
    const char *argv[12];
    const char *want;
  } rows[] = {
      {{"simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--seq", "10000000"},
       "--seq 10000000: expected an integer from 1 to 1048576; the nearest allowed is 1048576"},
      {{"simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--tp", "2.5"},
       "--tp 2.5: expected an integer from 1 to 1048576; found a fraction"},
      {{"plan", "llama3-8b", "--tokens", "1e30"}, "--tokens 1e30: expected a number from 1 to 1e18"},
      {{"plan", "llama3-8b", "--tokens", "nan"}, "--tokens nan: expected a number from 1 to 1e18; found no number"},
      {{"plan", "llama3-8b", "--spot", "--preemption-rate", "2"},
       "--preemption-rate 2: expected a number above 0 and at most 1"},
      {{"plan", "llama3-8b", "--budget", "0"}, "--budget 0: expected a number from 0.01 to 1e12"},
      {{"plan", "llama3-8b", "--steps", "1e20"}, "--steps 1e20: expected an integer from 1 to 1e15"},
      {{"collective", "--hw", "h100-sxm", "--chips", "8", "--op", "all-reduce", "--bytes", "1e30"},
       "--bytes 1e30: expected a size from 1 to 1P bytes"},
      {{"collective", "--hw", "h100-sxm", "--chips", "8", "--op", "all-reduce", "--bytes", "1K",
        "--factor", "1"},
       "--factor 1: expected a number above 1 and at most 1024"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const char *const *a = rows[i].argv;
    th_run r = th_cli(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
                      NULL);
    cr_assert_eq(r.rc, 2, "row %zu: exit %d: %s", i, r.rc, r.err);
    cr_assert(strstr(r.err, rows[i].want), "row %zu: %s", i, r.err);
    cr_assert_str_eq(r.out, "", "row %zu printed a result", i);
    th_run_free(&r);
  }
}

/* plan --hw h100,tpu-v5p planned on tpu-v5p alone, saying nothing of h100. */
Test(cli, plan_hw_list_names_must_all_exist) {
  th_run r = th_cli("plan", "llama3-8b", "--hw", "h100,tpu-v5p", "--chips", "8", NULL);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  cr_assert(strstr(r.err, "unknown hardware 'h100'; did you mean 'h100-sxm'?"), "%s", r.err);
  cr_assert_str_eq(r.out, "");
  th_run_free(&r);
}

/* --ep 1000 said "dp 0 x tp 1 x pp 1 x ep 1000 = 0": the rule that fails
** is named, not the dp derived from it. */
Test(cli, simulate_names_what_ep_does_not_divide) {
  th_run r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--ep", "1000", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "ep 1000 needs a MoE model; llama3-8b has no experts"), "%s", r.err);
  cr_assert(!strstr(r.err, "dp 0"), "%s", r.err);
  th_run_free(&r);
  r = th_cli("simulate", "mixtral-8x7b", "--hw", "h100-sxm", "--chips", "8", "--ep", "16", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "ep 16 does not divide the 8 experts"), "%s", r.err);
  th_run_free(&r);
  r = th_cli("simulate", "mixtral-8x7b", "--hw", "h100-sxm", "--chips", "4", "--ep", "8", NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "ep 8 x etp 1 does not divide tp 1 x dp 4 x cp 1 = 4"), "%s",
            r.err);
  th_run_free(&r);
}

/* A plan that does not fit exited 0 after "DOES NOT FIT": now 3, with the
** report (breakdown, fixes) printed all the same and, in --json, the whole
** object with "fits": false and "status": "does_not_fit". */
Test(cli, simulate_exits_3_when_the_plan_does_not_fit) {
  th_run r = th_cli("simulate", "llama3-70b", "--hw", "h100-sxm", "--chips", "8", "--tp", "8", "--gbs",
                    "8", "--seq", "4096", "--op-costs", "formula", NULL);
  cr_assert_eq(r.rc, CLI_DOES_NOT_FIT, "%s", r.err);
  cr_assert(strstr(r.out, "DOES NOT FIT") && strstr(r.out, "breakdown") && strstr(r.out, "fix 1:"),
            "%s", r.out);
  th_run_free(&r);
  r = th_cli("simulate", "llama3-70b", "--hw", "h100-sxm", "--chips", "8", "--tp", "8", "--gbs", "8",
             "--seq", "4096", "--op-costs", "formula", "--json", NULL);
  cr_assert_eq(r.rc, 3);
  cJSON *o = cJSON_Parse(r.out);
  cr_assert(o, "not one JSON object: %s", r.out);
  cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(o, "fits")));
  cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(o, "status")), "does_not_fit");
  cr_assert(cJSON_GetArraySize(cJSON_GetObjectItem(o, "fixes")) > 0);
  cJSON_Delete(o);
  th_run_free(&r);
  r = th_cli("simulate", "llama3-8b", "--hw", "h100-sxm", "--chips", "8", "--tp", "8", "--gbs", "8",
             "--op-costs", "formula", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "\"status\":\t\"ok\""), "%s", r.out);
  th_run_free(&r);
  r = th_cli("--help", NULL);
  cr_assert(strstr(r.out, "3 the plan does not fit in memory"), "%s", r.out);
  th_run_free(&r);
}
