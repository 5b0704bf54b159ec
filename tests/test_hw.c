/*
** test_hw.c -- the hardware catalog: published figures, physical
** invariants every entry must satisfy, and every kind of bad input.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "helpers.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static hw_catalog *builtin(void) { return th_catalog(); }
static const hw_model *get(const hw_catalog *c, const char *name) { return th_hw(c, name); }

/* The names are a contract (shared/design.md): scripts pass them to --hw. */
Test(hw_catalog, holds_exactly_the_contract_names) {
  static const char *const names[] = {"tpu-v4", "tpu-v5e",  "tpu-v5p",  "tpu-v6e",
                                      "v100",   "a100-40g", "a100-80g", "h100-sxm",
                                      "h200",   "b200",     "cpu-spr",  "cpu-genoa"};
  hw_catalog *c = builtin();
  cr_assert_eq(hw_catalog_count(c), 12);
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    get(c, names[i]);
  hw_catalog_free(c);
}

/* Cloud TPU v5p doc: 459 bf16 TFLOP/s, 95 GiB HBM, 2765 GB/s (issue 2's acceptance). */
Test(hw_catalog, tpu_v5p_published_figures) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "tpu-v5p");
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 459e12, 1e9);
  cr_assert_eq(m->chip.hbm_bytes, (int64_t)(95 * GIB));
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 2.765e12, 1e9);
  cr_assert_eq(m->scale_up.torus_dims, 3);
  cr_assert_eq(m->scale_up.ocs_block[0] * m->scale_up.ocs_block[1] * m->scale_up.ocs_block[2], 64);
  hw_catalog_free(c);
}

/* TPUs have no fp64 unit; V100 has no bf16; A100 runs fp64 on tensor cores at 19.5 TFLOP/s. */
Test(hw_catalog, unsupported_dtypes_are_absent) {
  hw_catalog *c = builtin();
  static const char *const tpus[] = {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(hw_peak_flops(get(c, tpus[i]), HW_FP64), 0, "%s must have no fp64", tpus[i]);
    cr_assert_gt(hw_peak_flops(get(c, tpus[i]), HW_BF16), 0);
  }
  cr_assert_eq(hw_peak_flops(get(c, "v100"), HW_BF16), 0);
  cr_assert_float_eq(hw_peak_flops(get(c, "v100"), HW_FP16), 125e12, 1e10);
  cr_assert_float_eq(hw_peak_flops(get(c, "a100-80g"), HW_FP64), 19.5e12, 1e10);
  cr_assert_eq(hw_peak_flops(get(c, "a100-80g"), HW_FP8), 0);
  cr_assert_gt(hw_peak_flops(get(c, "h100-sxm"), HW_FP8),
               hw_peak_flops(get(c, "h100-sxm"), HW_BF16));
  hw_catalog_free(c);
}

/* Device memory as a job sees it: AWS lists 81920 MiB per A100-80GB and
** H100, 144384 MiB per H200 (skypilot-catalog aws/vms.csv). */
Test(hw_catalog, gpu_memory_is_the_binary_capacity) {
  hw_catalog *c = builtin();
  cr_assert_eq(get(c, "a100-80g")->chip.hbm_bytes, 81920LL << 20);
  cr_assert_eq(get(c, "h100-sxm")->chip.hbm_bytes, 81920LL << 20);
  cr_assert_eq(get(c, "h200")->chip.hbm_bytes, 144384LL << 20);
  cr_assert_eq(get(c, "a100-40g")->chip.hbm_bytes * 2, get(c, "a100-80g")->chip.hbm_bytes);
  hw_catalog_free(c);
}

/* scaling-book roofline.md: a v5e bf16 matmul is compute-bound above
** 1.97e14 / 8.2e11 ~ 240 FLOP per byte of HBM traffic. */
Test(hw_catalog, tpu_v5e_ridge_point_matches_scaling_book) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "tpu-v5e");
  double ridge = hw_peak_flops(m, HW_BF16) / m->chip.hbm_bw_bytes_per_s;
  cr_assert(ridge > 235 && ridge < 245, "ridge %g", ridge);
  hw_catalog_free(c);
}

/* An MXU does tile_n x tile_k multiply-adds per cycle per unit: peak must
** equal cores x units x tile_n x tile_k x 2 x clock. Catches a wrong MXU
** count or clock in a TPU file. */
Test(hw_catalog, tpu_peak_equals_mxu_geometry_times_clock) {
  hw_catalog *c = builtin();
  for (int i = 0; i < hw_catalog_count(c); i++) {
    const hw_model *m = hw_catalog_at(c, i);
    if (m->kind != HW_TPU) continue;
    const hw_chip *ch = &m->chip;
    double derived = (double)(ch->mu_cores * ch->mu_units_per_core * ch->tile_n * ch->tile_k) *
                     2.0 * ch->clock_hz;
    double peak = hw_peak_flops(m, HW_BF16);
    cr_assert(fabs(derived - peak) / peak < 0.02, "%s: geometry gives %g, peak %g", m->name,
              derived, peak);
  }
  hw_catalog_free(c);
}

/* Invariants any real machine satisfies. */
Test(hw_catalog, every_entry_is_physically_consistent) {
  hw_catalog *c = builtin();
  for (int i = 0; i < hw_catalog_count(c); i++) {
    const hw_model *m = hw_catalog_at(c, i);
    const hw_scale_up *u = &m->scale_up;
    /* the fast domain is faster than the network between domains */
    cr_assert_gt(u->bw_per_chip_bytes_per_s, m->scale_out.bw_per_chip_bytes_per_s, "%s", m->name);
    /* ... and HBM faster than either */
    cr_assert_gt(m->chip.hbm_bw_bytes_per_s, u->bw_per_chip_bytes_per_s, "%s", m->name);
    /* an 8-bit or 16-bit unit is never slower than fp32 */
    cr_assert_geq(fmax(hw_peak_16bit(m), hw_peak_flops(m, HW_FP32)), hw_peak_flops(m, HW_FP32));
    /* on-chip memory is smaller than device memory */
    cr_assert_lt(m->chip.onchip_bytes, m->chip.hbm_bytes, "%s", m->name);
    cr_assert_gt(m->price.on_demand_usd_per_chip_hour, 0);
    cr_assert_leq(m->price.spot_usd_per_chip_hour, m->price.on_demand_usd_per_chip_hour);
    cr_assert_gt(m->n_sources, 0, "%s lists no sources", m->name);
    cr_assert_str_eq(m->origin, "built-in");
  }
  hw_catalog_free(c);
}

Test(hw_catalog, list_order_is_kind_then_peak) {
  hw_catalog *c = builtin();
  for (int i = 1; i < hw_catalog_count(c); i++) {
    const hw_model *a = hw_catalog_at(c, i - 1), *b = hw_catalog_at(c, i);
    cr_assert(a->kind < b->kind || (a->kind == b->kind && hw_peak_16bit(a) <= hw_peak_16bit(b)),
              "%s before %s", a->name, b->name);
  }
  hw_catalog_free(c);
}

Test(hw_catalog, unknown_name_suggests) {
  hw_catalog *c = builtin();
  char msg[2048];
  hw_catalog_unknown(c, "h100", msg, sizeof msg);
  cr_assert(strstr(msg, "unknown hardware 'h100'; did you mean 'h100-sxm'?"), "%s", msg);
  hw_catalog_free(c);
}

/* A user file of the same name replaces the built-in: the "what if HBM were
** twice as fast" workflow of docs/hardware.md. */
Test(hw_catalog, user_file_replaces_builtin_of_same_name) {
  char *t = th_replace(th_builtin_text("h100-sxm"), "\"hbm_bw_bytes_per_s\": 3.35e12",
                       "\"hbm_bw_bytes_per_s\": 6.7e12");
  const char *path = th_write_temp("h100-2x.json", t);
  hw_catalog *c = builtin();
  diag *d = diag_new();
  const hw_model *m = hw_catalog_load_file(c, path, d);
  cr_assert_not_null(m);
  cr_assert_eq(hw_catalog_count(c), 12);
  cr_assert_float_eq(get(c, "h100-sxm")->chip.hbm_bw_bytes_per_s, 6.7e12, 1e6);
  cr_assert_str_eq(get(c, "h100-sxm")->origin, path);
  diag_free(d);
  hw_catalog_free(c);
  free(t);
}

/* ---- bad input: each case names the file, the place and what was expected ---- */

/* Loads the v5p text with `from` replaced by `to`; the (only) error must
** contain `want`, and be at the line:col of `at` (located in the mutated
** text by the test itself) when `at` is given. */
static void expect_error(const char *name, const char *from, const char *to, const char *at,
                         const char *want) {
  char *text = th_replace(th_builtin_text("tpu-v5p"), from, to);
  diag *d = diag_new();
  hw_model *m = hw_load("bad.json", text, strlen(text), d);
  cr_assert_null(m, "%s: accepted a file with %s", name, to);
  cr_assert_geq(diag_count(d), 1);
  const char *msg = diag_message(d, 0);
  if (at) {
    char lc[32], prefix[64];
    th_where(text, at, lc, sizeof lc);
    snprintf(prefix, sizeof prefix, "bad.json:%s: ", lc);
    cr_assert_eq(strncmp(msg, prefix, strlen(prefix)), 0, "%s: expected at %s, got: %s", name,
                 prefix, msg);
  }
  cr_assert(strstr(msg, want), "%s: expected \"%s\" in: %s", name, want, msg);
  diag_free(d);
  free(text);
}

/* Each row mutates the tpu-v5p file: replace `from` with `to`; the first
** error must contain `want` and sit at the line:col of `at` in the mutated
** text (NULL: place not checked). Tests as data, as jq and SQLite keep them. */
typedef struct {
  const char *name, *from, *to, *at, *want;
} bad_case;

static const bad_case BAD_CASES[] = {
    {"negative_bandwidth", "\"hbm_bw_bytes_per_s\": 2.765e12", "\"hbm_bw_bytes_per_s\": -2.765e12",
     "-2.765e12",
     "chip.hbm_bw_bytes_per_s: expected a positive number up to 1e+15 B/s, got -2.765e+12"},
    {"wrong_type", "\"clock_hz\": 1.75e9", "\"clock_hz\": \"1.75 GHz\"", "\"1.75 GHz\"",
     "chip.clock_hz: expected a positive number up to 1e+10 Hz, got \"1.75 GHz\""},
    {"fraction_where_integer_expected", "\"links_per_chip\": 6", "\"links_per_chip\": 6.5", "6.5",
     "system.scale_up.links_per_chip: expected a positive integer"},
    {"absurd_size", "\"hbm_bytes\": 102005473280", "\"hbm_bytes\": 1e30", "1e30",
     "chip.hbm_bytes: expected a positive integer up to"},
    {"infinite_number", "\"clock_hz\": 1.75e9", "\"clock_hz\": 1e999", "1e999",
     "chip.clock_hz: expected"},
    {"unknown_field_with_suggestion", "\"hbm_bytes\":", "\"hbm_byte\": 1, \"hbm_bytes\":",
     "\"hbm_byte\"", "chip.hbm_byte: unknown field (did you mean 'hbm_bytes'?)"},
    {"unknown_top_level_field_lists_choices", "\"vendor\":", "\"zzzzzz\": 1, \"vendor\":",
     "\"zzzzzz\"", "zzzzzz: unknown field; expected one of: sources, cite, notes, schema, name"},
    {"duplicate_key_points_at_the_second", "\"clock_hz\": 1.75e9",
     "\"clock_hz\": 1.75e9, \"clock_hz\": 2e9", "\"clock_hz\": 2e9",
     "chip.clock_hz: duplicate key"},
    {"unknown_enum_value", "\"kind\": \"vmem\"", "\"kind\": \"sram\"", "\"sram\"",
     "chip.onchip.kind: expected one of vmem, cmem, l2, l3; got \"sram\""},
    {"missing_required_field", "\"vector_flops_per_s\": 1.43e13,", "", "\"chip\"",
     "chip: missing field 'vector_flops_per_s'"},
    {"tpu_without_its_torus", "\"torus_dims\": 3,", "", "\"scale_up\"",
     "missing field 'torus_dims' (required for a TPU)"},
    {"inconsistent_link_bandwidth", "\"bw_per_chip_bytes_per_s\": 5.4e11",
     "\"bw_per_chip_bytes_per_s\": 5.4e12", "5.4e12",
     "expected links_per_chip x link_bw_bytes_per_s = 6 x 9e+10 = 5.4e+11 B/s"},
    {"slice_shape_disagrees_with_chip_count", "\"max_slice_chips\": 6144",
     "\"max_slice_chips\": 6000", NULL, "holds 6144 chips, but max_slice_chips is 6000"},
    {"spot_above_on_demand", "\"spot_usd_per_chip_hour\": 1.68", "\"spot_usd_per_chip_hour\": 9.5",
     "9.5", "spot ($9.50) above on-demand ($4.20)"},
    {"uncited_figure", "\"chip.vector_flops_per_s\": \"scaling-book\",", "", "1.43e13",
     "chip.vector_flops_per_s: no source"},
    {"cite_of_unknown_source", "\"chip.clock_hz\": \"scaling-book\"",
     "\"chip.clock_hz\": \"my-memory\"", "\"my-memory\"",
     "source 'my-memory' is not listed in \"sources\""},
    {"cite_of_misspelt_path", "\"chip.clock_hz\": \"scaling-book\"",
     "\"chip.clock_hzz\": \"scaling-book\"", "\"chip.clock_hzz\"",
     "cite[\"chip.clock_hzz\"]: not a field (did you mean 'chip.clock_hz'?)"},
    {"malformed_json", "\"vendor\": \"Google\",", "\"vendor\": \"Google\"", NULL,
     "invalid JSON syntax"},
    {"bad_date", "\"read_on\": \"2026-12-02\"", "\"read_on\": \"last week\"", "\"last week\"",
     "expected a date YYYY-MM-DD"},
};

Test(hw_bad_input, each_case_names_file_place_and_expectation) {
  for (size_t i = 0; i < sizeof BAD_CASES / sizeof *BAD_CASES; i++) {
    const bad_case *c = &BAD_CASES[i];
    expect_error(c->name, c->from, c->to, c->at, c->want);
  }
}

Test(hw_bad_input, gpu_with_torus_fields) {
  char *text = th_replace(th_builtin_text("h100-sxm"),
                          "\"domain_chips\":", "\"torus_dims\": 2, \"domain_chips\":");
  diag *d = diag_new();
  cr_assert_null(hw_load("gpu.json", text, strlen(text), d));
  char lc[32], want[128];
  th_where(text, "\"torus_dims\"", lc, sizeof lc);
  snprintf(want, sizeof want, "gpu.json:%s: system.scale_up.torus_dims: only a TPU torus", lc);
  cr_assert(strstr(diag_message(d, 0), want), "%s", diag_message(d, 0));
  diag_free(d);
  free(text);
}

Test(hw_bad_input, not_an_object) {
  diag *d = diag_new();
  cr_assert_null(hw_load("arr.json", "[1, 2]", 6, d));
  cr_assert_str_eq(diag_message(d, 0),
                   "arr.json:1:1: expected a JSON object (a hardware description), got an array");
  diag_free(d);
}

Test(hw_bad_input, reports_every_problem_not_just_the_first) {
  char *a = th_replace(th_builtin_text("tpu-v5p"), "\"clock_hz\": 1.75e9", "\"clock_hz\": -1");
  char *b = th_replace(a, "\"hbm_bytes\": 102005473280", "\"hbm_bytes\": \"lots\"");
  diag *d = diag_new();
  cr_assert_null(hw_load("two.json", b, strlen(b), d));
  cr_assert_eq(diag_count(d), 2);
  diag_free(d);
  free(a);
  free(b);
}

/* docs/hardware.md documents every field of the schema table. */
Test(hw_docs, every_field_is_documented) {
  FILE *f = fopen("docs/hardware.md", "r");
  cr_assert_not_null(f, "run the tests from the repository root");
  static char doc[65536];
  size_t n = fread(doc, 1, sizeof doc - 1, f);
  doc[n] = '\0';
  fclose(f);
  for (int i = 0; i < hw_field_count(); i++) {
    const char *p = hw_field_get(i)->path;
    const char *leaf = strrchr(p, '.');
    leaf = leaf ? leaf + 1 : p;
    char want[96];
    /* written as `section.leaf` or `leaf` in the tables */
    snprintf(want, sizeof want, "%s`", strncmp(p, "chip.peak", 9) == 0 ? "int8}" : leaf);
    cr_assert(strstr(doc, want), "docs/hardware.md does not document %s", p);
  }
}
