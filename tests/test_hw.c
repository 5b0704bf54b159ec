/*
** test_hw.c -- the hardware catalog: published figures, physical
** invariants every entry must satisfy, and every kind of bad input.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "helpers.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static hw_catalog *builtin(void) { return th_catalog(); }
static const hw_model *get(const hw_catalog *c, const char *name) { return th_hw(c, name); }

/* The names are a contract (shared/design.md): scripts pass them to --hw. */
Test(hw_catalog, holds_exactly_the_contract_names) {
  static const char *const names[] = {"tpu-v4", "tpu-v5e",  "tpu-v5p",  "tpu-v6e",  "tpu-v7x",
                                      "v100",   "a100-40g", "a100-80g", "h100-sxm", "h100-96gb",
                                      "h200",
                                      "b200",   "b300",     "gb200",    "gb300",    "cpu-spr",
                                      "cpu-genoa", "a100-40g-gcp", "a100-40g-aws", "cpu-m7i-2xl",
                                      /* serving (issue 19) */
                                      "t4",     "l4",       "a10g",     "edge-tpu",
                                      /* on-device (issue 19) */
                                      "phone-cpu", "phone-npu"};
  hw_catalog *c = builtin();
  cr_assert_eq(hw_catalog_count(c), (int)(sizeof names / sizeof *names));
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
    /* the fast domain is faster than the network between domains (a
    ** one-chip VM with no fabric, kind host, has no fast domain: its
    ** "scale-up" is the same NIC, cpu-m7i-2xl) */
    if (u->domain_chips > 1 || u->kind != HW_UP_HOST || m->kind == HW_EDGE)
      cr_assert_gt(u->bw_per_chip_bytes_per_s, m->scale_out.bw_per_chip_bytes_per_s, "%s", m->name);
    /* ... and HBM faster than either; an edge part has no chip-to-chip
    ** fabric and streams its off-chip weights over that same host link */
    if (m->kind == HW_EDGE)
      cr_assert_geq(m->chip.hbm_bw_bytes_per_s, u->bw_per_chip_bytes_per_s, "%s", m->name);
    else
      cr_assert_gt(m->chip.hbm_bw_bytes_per_s, u->bw_per_chip_bytes_per_s, "%s", m->name);
    /* an 8-bit or 16-bit unit is never slower than fp32 */
    cr_assert_geq(fmax(hw_peak_16bit(m), hw_peak_flops(m, HW_FP32)), hw_peak_flops(m, HW_FP32));
    /* on-chip memory is smaller than device memory */
    cr_assert_lt(m->chip.onchip_bytes, m->chip.hbm_bytes, "%s", m->name);
    /* rented parts carry a price; an edge part is bought, not rented */
    if (m->kind != HW_EDGE) cr_assert_gt(m->price.on_demand_usd_per_chip_hour, 0, "%s", m->name);
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
  int before = hw_catalog_count(c);
  const hw_model *m = hw_catalog_load_file(c, path, d);
  cr_assert_not_null(m);
  cr_assert_eq(hw_catalog_count(c), before, "a same-named file replaces, it does not add");
  cr_assert_float_eq(get(c, "h100-sxm")->chip.hbm_bw_bytes_per_s, 6.7e12, 1e6);
  cr_assert_str_eq(get(c, "h100-sxm")->origin, path);
  diag_free(d);
  hw_catalog_free(c);
  free(t);
}

/* ---- today's training hardware (issue 16): each figure against its published source ---- */

#define MIB (1024.0 * 1024.0)

/* HGX B300 (Glenn Lockwood's B300 page, from NVIDIA's HGX table): dense bf16
** 2250 and fp4 13125 TFLOP/s, fp64 cut to 1.25; 288 GB HBM3e at 8 TB/s
** (NVIDIA Blackwell Ultra blog), of which AWS shows 275040 MiB per GPU
** (skypilot-catalog aws p6-b300.48xlarge); one 800 Gb/s ConnectX-8 per GPU
** (DGX B300, ml-engineering network table) = 1e11 B/s; AWS p6-b300 $142.416/h / 8. */
Test(hw_today, b300_published_figures) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "b300");
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 2.25e15, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP4), 13.125e15, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP64), 1.25e12, 1e6);
  cr_assert_eq(m->chip.hbm_bytes, (int64_t)(275040 * MIB));
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 8e12, 1e6);
  cr_assert_eq(m->chips_per_node, 8);
  cr_assert_float_eq(m->scale_out.bw_per_chip_bytes_per_s, 800e9 / 8, 1);
  cr_assert_float_eq(m->price.on_demand_usd_per_chip_hour, 142.416 / 8, 1e-9);
  hw_catalog_free(c);
}

/* GB200 NVL72 (NVIDIA's NVL72 page via ml-engineering; Lockwood's 1,200 W
** table): per GPU dense bf16 2500, fp8 5000, fp4 10000 TFLOP/s, 186 GB at
** 8 TB/s (13.4 TB and 576 TB/s over 72 GPUs). 72 GPUs in one NVLink 5 domain
** at 1.8 TB/s bidirectional = 9e11 B/s each way; NVLink-C2C 900 GB/s
** bidirectional per Grace, shared by 2 GPUs = 2.25e11 each way per GPU; one
** 400 Gb/s ConnectX-7 per GPU. NCCL all-reduce on NVL72: 680 of 900 GB/s
** (NVIDIA GTC25 S72583 slide, via ml-engineering). */
Test(hw_today, gb200_nvl72_published_figures) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "gb200");
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 2.5e15, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP8), 5e15, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP4), 1440e15 / 2 / 72, 1e9);
  cr_assert_eq(m->chip.hbm_bytes, (int64_t)(186 * GIB));
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 576e12 / 72, 1e6);
  cr_assert_eq(m->chips_per_node, 72);
  cr_assert_eq(m->scale_up.domain_chips, 72);
  cr_assert_float_eq(m->scale_up.bw_per_chip_bytes_per_s, 1.8e12 / 2, 1);
  cr_assert_str_eq(hw_enum_name(hw_field_find("chip.host_link.kind"), m->chip.host_link_kind),
                   "nvlink-c2c");
  cr_assert_float_eq(m->chip.host_link_bw_bytes_per_s, 900e9 / 2 / 2, 1);
  cr_assert_float_eq(m->scale_out.bw_per_chip_bytes_per_s, 400e9 / 8, 1);
  cr_assert_float_eq(m->scale_up.efficiency, 680.0 / 900.0, 1e-3);
  cr_assert(m->scale_up.in_switch_reduction, "NVLink Switch trays reduce in the switch (SHARP)");
  cr_assert_eq(m->price.chips_per_instance, 72, "NVL72 capacity is rented by the rack");
  hw_catalog_free(c);
}

/* GB300 NVL72: 15 PFLOP/s dense NVFP4 per GPU (NVIDIA Blackwell Ultra blog;
** 1.08 EF dense / 72), 1.5x GB200; fp8 5000 (360 PF / 72); one 800 Gb/s
** ConnectX-8 per GPU (72 per rack); 1,400 W. */
Test(hw_today, gb300_nvl72_published_figures) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "gb300"), *g2 = get(c, "gb200");
  cr_assert_float_eq(hw_peak_flops(m, HW_FP4), 1.08e18 / 72, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP4) / hw_peak_flops(g2, HW_FP4), 1.5, 1e-9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP8), 360e15 / 72, 1e9);
  cr_assert_eq(m->scale_up.domain_chips, 72);
  cr_assert_float_eq(m->scale_out.bw_per_chip_bytes_per_s, 800e9 / 8, 1);
  cr_assert_float_eq(m->chip.tdp_w, 1400, 1e-9);
  hw_catalog_free(c);
}

/* Cloud TPU7x (Ironwood) doc: 2307 bf16 and 4614 fp8 TFLOP/s per chip, 192
** GiB HBM at 7380 GB/s, 2 TensorCores, 1200 GB/s bidirectional ICI per chip
** (6 links of a 3D torus), 100 Gb/s DCN per chip, 9216-chip pods built from
** 4x4x4 cubes, 4-chip VMs. */
Test(hw_today, tpu_v7x_published_figures) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "tpu-v7x");
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 2307e12, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_FP8), 4614e12, 1e9);
  cr_assert_eq(m->chip.hbm_bytes, (int64_t)(192 * GIB));
  cr_assert_float_eq(m->chip.hbm_bw_bytes_per_s, 7380e9, 1e6);
  cr_assert_eq(m->chip.mu_cores, 2, "2 TensorCores (2 JAX devices) per chip");
  cr_assert_float_eq(2 * m->scale_up.bw_per_chip_bytes_per_s, 1200e9, 1);
  cr_assert_eq(m->scale_up.links_per_chip, 6);
  cr_assert_eq(m->scale_up.torus_dims, 3);
  cr_assert_eq(m->scale_up.pod_chips, 9216);
  cr_assert_eq(m->scale_up.ocs_block[0] * m->scale_up.ocs_block[1] * m->scale_up.ocs_block[2], 64);
  cr_assert_float_eq(m->scale_out.bw_per_chip_bytes_per_s, 100e9 / 8, 1);
  cr_assert_eq(m->chips_per_node, 4);
  /* jax tpu_info: int8 and int4 Not Available on TPU7x; no fp4 or MX format in Google's docs */
  cr_assert_eq(hw_peak_flops(m, HW_INT8), 0);
  cr_assert_eq(hw_peak_flops(m, HW_FP4), 0);
  cr_assert_eq(hw_peak_flops(m, HW_MXFP8), 0);
  hw_catalog_free(c);
}

/* The new rate keys: MX fp8 runs at the fp8 rate on Blackwell tensor cores
** (the block scale is applied inside the MMA instruction) and nowhere else;
** Blackwell Ultra raised dense fp4 over Blackwell (B300 13.125 vs B200 9
** PFLOP/s, GB300 15 vs GB200 10) and cut int8 (Hot Chips 2025: ~0.16 POPS
** dense against 4.5 on B200). */
Test(hw_today, low_precision_rates_follow_the_architecture) {
  hw_catalog *c = builtin();
  static const char *const blackwell[] = {"b200", "b300", "gb200", "gb300"};
  for (int i = 0; i < 4; i++) {
    const hw_model *m = get(c, blackwell[i]);
    cr_assert_float_eq(hw_peak_flops(m, HW_MXFP8), hw_peak_flops(m, HW_FP8), 1, "%s",
                       blackwell[i]);
    cr_assert_gt(hw_peak_flops(m, HW_FP4), hw_peak_flops(m, HW_FP8), "%s", blackwell[i]);
  }
  static const char *const no_mx[] = {"h100-sxm", "h200", "a100-80g", "v100", "tpu-v5p",
                                      "tpu-v6e",  "tpu-v7x", "cpu-spr"};
  for (size_t i = 0; i < sizeof no_mx / sizeof *no_mx; i++) {
    cr_assert_eq(hw_peak_flops(get(c, no_mx[i]), HW_MXFP8), 0, "%s has no MX unit", no_mx[i]);
    cr_assert_eq(hw_peak_flops(get(c, no_mx[i]), HW_FP4), 0, "%s has no fp4 unit", no_mx[i]);
  }
  cr_assert_float_eq(hw_peak_flops(get(c, "b200"), HW_FP4), 9e15, 1e9);
  cr_assert_gt(hw_peak_flops(get(c, "b300"), HW_FP4), hw_peak_flops(get(c, "b200"), HW_FP4));
  cr_assert_gt(hw_peak_flops(get(c, "gb300"), HW_FP4), hw_peak_flops(get(c, "gb200"), HW_FP4));
  cr_assert_lt(hw_peak_flops(get(c, "b300"), HW_INT8), hw_peak_flops(get(c, "b200"), HW_INT8) / 20);
  cr_assert_lt(hw_peak_flops(get(c, "gb300"), HW_INT8), hw_peak_flops(get(c, "gb200"), HW_INT8) / 20);
  hw_catalog_free(c);
}

/* Every dtype round-trips through its name, in the order of the enum. */
Test(hw_today, dtype_names_parse_and_print) {
  static const char *const want[HW_DTYPE_COUNT] = {"fp64", "fp32", "tf32",  "bf16", "fp16",
                                                    "fp8",  "int8", "mxfp8", "fp4", "int4"};
  for (int i = 0; i < HW_DTYPE_COUNT; i++) {
    cr_assert_str_eq(hw_dtype_name((hw_dtype)i), want[i]);
    cr_assert_eq(hw_dtype_parse(want[i]), i);
    char path[64];
    snprintf(path, sizeof path, "chip.peak_flops_per_s.%s", want[i]);
    cr_assert_geq(hw_field_find(path), 0, "no schema row for %s", path);
  }
  cr_assert_eq(hw_dtype_parse("MXFP8"), -1, "names are case-sensitive");
  cr_assert_eq(hw_dtype_parse("fp6"), -1);
  cr_assert_str_eq(hw_dtype_name(HW_DTYPE_COUNT), "?");
}

/* `hw show` prints the new keys with their sources, and the sources list;
** --json writes them back under chip.peak_flops_per_s. */
Test(hw_today, show_prints_new_keys_and_sources) {
  hw_catalog *c = builtin();
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert_not_null(f);
  hw_print_show(get(c, "gb200"), f);
  fclose(f);
  cr_assert(strstr(buf, "peak_flops_per_s.fp4                   1e+16 (10.0 PFLOP/s)"), "%s", buf);
  cr_assert(strstr(buf, "peak_flops_per_s.mxfp8"), "%s", buf);
  cr_assert(strstr(buf, "\nsources\n"), "%s", buf);
  cr_assert(strstr(buf, "[nv-gb200-blog] NVIDIA Technical Blog"), "%s", buf);
  cr_assert(strstr(buf, "billed per 72-GPU rack"), "price.basis cut short: %s", buf);
  free(buf);
  char *json = hw_to_json(get(c, "b200"));
  cJSON *o = cJSON_Parse(json);
  const cJSON *peak = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "chip"), "peak_flops_per_s");
  cr_assert_float_eq(cJSON_GetObjectItem(peak, "fp4")->valuedouble, 9e15, 1);
  cr_assert_float_eq(cJSON_GetObjectItem(peak, "mxfp8")->valuedouble, 4.5e15, 1);
  cJSON_Delete(o);
  free(json);
  hw_catalog_free(c);
}

/* ---- measured kernel efficiencies (issue 16 item 3): published rate / peak ---- */

/* The files hold three decimals; a figure matches its source to that rounding. */
#define EFF_TOL 5e-4

static bool given(const hw_model *m, const char *path) {
  int i = hw_field_find(path);
  cr_assert_geq(i, 0, "no schema row for %s", path);
  return m->present[i];
}

/* MAMF FP8 (float8_e4m3fn) rows, stas00/ml-engineering compute/accelerator/
** README.md @ 744d01e1: achieved TFLOP/s of the best large GEMM over the fp8
** dense peak. GB300 has no row and takes GB200's, as its matmul_efficiency does. */
Test(hw_eff, fp8_matmul_is_the_mamf_fp8_row) {
  hw_catalog *c = builtin();
  static const struct {
    const char *name;
    double tflops, peak_tflops;
  } rows[] = {{"h100-sxm", 1402.6, 1979}, {"h200", 1453.4, 1979}, {"b200", 3432.5, 4500},
              {"b300", 3353.3, 4500},     {"gb200", 3615.6, 5000}, {"gb300", 3615.6, 5000}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const hw_model *m = get(c, rows[i].name);
    cr_assert(given(m, "chip.fp8_matmul_efficiency"), "%s", rows[i].name);
    cr_assert_float_eq(hw_peak_flops(m, HW_FP8), rows[i].peak_tflops * 1e12, 1e9, "%s",
                       rows[i].name);
    cr_assert_float_eq(m->chip.fp8_matmul_efficiency, rows[i].tflops / rows[i].peak_tflops,
                       EFF_TOL, "%s", rows[i].name);
  }
  hw_catalog_free(c);
}

/* The stack's fused attention kernel, causal, head dim 128, TFLOP/s as the
** papers count them (causal FLOPs halved, backward 2.5 x forward):
**  - H100 SXM5, FlashAttention-3 (arXiv:2407.08608) at 16k tokens: forward
**    616 (Fig. 5(d)), backward 561 (Fig. 6(b), published without the mask
**    only), of 989; H200 takes H100's (same die and clock, no H200 run);
**  - A100 80GB SXM4, FlashAttention-2 (arXiv:2307.08691) Fig. 4(d), forward
**    + backward 189 of 312 at 16k: both passes get it, so their sum is the
**    measured time; the 40 GB part (same SMs and clock) takes it too;
**  - B200, FlashAttention-4 (flash-attention PR #2280, seqlen 8192, batch 4,
**    16 heads): forward 1418.1, backward 2-CTA 1208.6, of 2250; GB200, B300
**    and GB300 have no measurement and take B200's fractions. */
Test(hw_eff, attention_is_the_published_kernel_rate) {
  hw_catalog *c = builtin();
  static const struct {
    const char *name;
    double fwd_tflops, bwd_tflops, peak_tflops;
  } rows[] = {{"h100-sxm", 616, 561, 989},     {"h200", 616, 561, 989},
              {"a100-80g", 189, 189, 312},     {"a100-40g", 189, 189, 312},
              {"b200", 1418.1, 1208.6, 2250},  {"gb200", 1418.1, 1208.6, 2250},
              {"b300", 1418.1, 1208.6, 2250},  {"gb300", 1418.1, 1208.6, 2250}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const hw_model *m = get(c, rows[i].name);
    cr_assert(given(m, "chip.attention_fwd_efficiency"), "%s", rows[i].name);
    cr_assert(given(m, "chip.attention_bwd_efficiency"), "%s", rows[i].name);
    cr_assert_float_eq(m->chip.attention_fwd_efficiency, rows[i].fwd_tflops / rows[i].peak_tflops,
                       EFF_TOL, "%s", rows[i].name);
    cr_assert_float_eq(m->chip.attention_bwd_efficiency, rows[i].bwd_tflops / rows[i].peak_tflops,
                       EFF_TOL, "%s", rows[i].name);
  }
  /* the FlashAttention-1 generation (FlashAttention-2 README, panel (d):
  ** causal, head dim 128, 16k, forward + backward): 137 TFLOP/s on H100,
  ** 83 on A100 80 GB (the Triton kernel 80 on the same panel) */
  static const struct {
    const char *name;
    double tflops, peak;
  } fa1[] = {{"h100-sxm", 137, 989}, {"h100-96gb", 137, 989}, {"h200", 137, 989},
             {"a100-80g", 83, 312},  {"a100-40g", 83, 312}};
  for (size_t i = 0; i < sizeof fa1 / sizeof *fa1; i++)
    cr_assert_float_eq(get(c, fa1[i].name)->chip.attention_fa1_efficiency,
                       fa1[i].tflops / fa1[i].peak, EFF_TOL, "%s", fa1[i].name);
  /* the peaks the fractions were taken against are the files' 16-bit peaks */
  cr_assert_float_eq(hw_peak_16bit(get(c, "h100-sxm")), 989e12, 1e9);
  cr_assert_float_eq(hw_peak_16bit(get(c, "a100-80g")), 312e12, 1e9);
  cr_assert_float_eq(hw_peak_16bit(get(c, "b200")), 2250e12, 1e9);
  hw_catalog_free(c);
}

/* cuDNN's fused attention on H100 SXM5, from the cuDNN series of the
** FlashAttention-3 paper's panels at 16k, head dim 128: forward 539 (Fig.
** 5(d), causal), backward 516 (Fig. 6(b), no mask) of 989 TFLOP/s; H200 and
** the 96 GB part (same die) take them. Chips without such a series have
** none (0: a cuDNN-calling framework keeps the chip's figures). */
Test(hw_eff, cudnn_attention_is_the_papers_cudnn_series) {
  hw_catalog *c = builtin();
  static const char *const hopper[] = {"h100-sxm", "h200", "h100-96gb"};
  for (size_t i = 0; i < 3; i++) {
    const hw_model *m = get(c, hopper[i]);
    cr_assert_float_eq(m->chip.attention_cudnn_fwd_efficiency, 539.0 / 989, EFF_TOL, "%s", hopper[i]);
    cr_assert_float_eq(m->chip.attention_cudnn_bwd_efficiency, 516.0 / 989, EFF_TOL, "%s", hopper[i]);
    cr_assert_lt(m->chip.attention_cudnn_fwd_efficiency, m->chip.attention_fwd_efficiency);
  }
  /* B200: cuDNN 9.13.1 measured on the chip (cudnn-frontend's B200 SDPA
  ** table, causal, head dim 128): 1332.4 forward and 1074.8 backward of
  ** 2250 TFLOP/s at 16k; its own table by keys, the means of the forward
  ** and backward ratios at 2k / 4k / 8k: (478.9 / 1332.4 + 371.5 / 1074.8)
  ** / 2 = 0.353, 0.647, 0.878 */
  const hw_model *b = get(c, "b200");
  cr_assert_float_eq(b->chip.attention_cudnn_fwd_efficiency, 1332.415 / 2250, EFF_TOL);
  cr_assert_float_eq(b->chip.attention_cudnn_bwd_efficiency, 1074.776 / 2250, EFF_TOL);
  const double fw[3] = {478.921, 855.678, 1171.278}, bw[3] = {371.486, 701.265, 942.509};
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(b->chip.attention_cudnn_seq_eff[2 + i], (fw[i] / 1332.415 + bw[i] / 1074.776) / 2,
                       EFF_TOL, "point %d", i);
  cr_assert_lt(b->chip.attention_cudnn_fwd_efficiency, b->chip.attention_fwd_efficiency);
  cr_assert_eq(get(c, "a100-80g")->chip.attention_cudnn_fwd_efficiency, 0);
  hw_catalog_free(c);
}

/* Sapphire Rapids AMX: 1024 bf16 FLOP a cycle a core (Intel, via the AMX
** article: "1024 BF16 operations per cycle"; Fixstars: 3,482 GFLOPS a core
** at 3.4 GHz = 1024 x 3.4e9) x 56 cores x 2.0 GHz base = 114.688 TFLOP/s a
** socket. Its large-GEMM fraction: the best a oneDNN user reported, 33 % of
** peak (oneDNN issue #1992); on every core of two sockets the same GEMM ran
** 42.9 TFLOP/s, 18.7 % of 2 x 114.688, under it. */
Test(hw_eff, cpu_spr_amx_peak_and_measured_gemm) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "cpu-spr");
  cr_assert_float_eq(1024.0 * 3.4e9, 3482e9, 1e9);
  cr_assert_float_eq(hw_peak_flops(m, HW_BF16), 1024.0 * 56 * 2.0e9, 1e6);
  cr_assert(given(m, "chip.matmul_efficiency"));
  cr_assert_float_eq(m->chip.matmul_efficiency, 0.33, 1e-9);
  cr_assert_lt(42.9e12 / (2 * hw_peak_flops(m, HW_BF16)), m->chip.matmul_efficiency);
  hw_catalog_free(c);
}

/* TPU v6e: bf16 GEMM 8192^3 in 1510.94 us of device time (JAX profiler,
** gpu-tpu-pedia results_trace_test.csv @ 6744feed) = 2 x 8192^3 / 1510.94e-6
** = 727.7 TFLOP/s of 918 (Google's own run with a 64 MiB scoped VMEM limit,
** 827.47, is noted in the file, not taken). v5p and v4 have no published
** measurement and take
** the nearest generation's, v5e's 181.8 of 197 (JAX Pallas matmul doc). */
Test(hw_eff, tpu_matmul_is_measured_or_the_nearest_generation) {
  hw_catalog *c = builtin();
  double v6e = 2.0 * 8192.0 * 8192.0 * 8192.0 / 1510.94e-6;
  cr_assert_float_eq(v6e, 727.7e12, 0.1e12);
  cr_assert_float_eq(get(c, "tpu-v6e")->chip.matmul_efficiency, v6e / 918e12, EFF_TOL);
  /* its HBM: Google's copy benchmark (tpu-recipes microbenchmarks README
  ** @ 2a333621), 33,554,432 B read and written in 0.049359 ms of device
  ** time = 1359.6 GB/s of 1638 */
  double copy = 2.0 * 33554432 / 0.049359e-3;
  cr_assert_float_eq(copy, 1359.6e9, 0.1e9);
  cr_assert_float_eq(get(c, "tpu-v6e")->chip.hbm_efficiency, copy / 1638e9, EFF_TOL);
  /* the one TPU copy measurement: the other TPUs take it */
  static const char *const tpus[] = {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v7x"};
  for (int i = 0; i < 4; i++)
    cr_assert_eq(get(c, tpus[i])->chip.hbm_efficiency, get(c, "tpu-v6e")->chip.hbm_efficiency, "%s",
                 tpus[i]);
  static const char *const nearest[] = {"tpu-v5e", "tpu-v5p", "tpu-v4"};
  for (int i = 0; i < 3; i++) {
    const hw_model *m = get(c, nearest[i]);
    cr_assert(given(m, "chip.matmul_efficiency"), "%s", nearest[i]);
    cr_assert_float_eq(m->chip.matmul_efficiency, 181.8 / 197, EFF_TOL, "%s", nearest[i]);
  }
  hw_catalog_free(c);
}

/* TPU v5p and v6e: tokamax's flash-attention autotuning data (openxla/
** tokamax @ 783ea957, tpu_v5/ and tpu_v6_lite/pallas_mosaic_tpu_flash_
** attention.json: the splash-attention kernel's forward; no backward file
** for either). Causal, head dim 128, 16 heads, 16,384 tokens a call: v5p
** 3.196 ms at seqlen 16,384 against a chip's 459 TFLOP/s, 1.900 / 1.217 ms
** at 8,192 / 4,096; v6e 3.981 ms against 918, 2.431 / 1.576 ms. A full mask
** (causal=False) computes twice the causal FLOPs: v5p 5.367 ms at 16,384,
** 2.861 at 8,192; v6e 6.657 and 3.553; TPU7x 5.619 and 2.940 against its
** causal 3.585. v5e holds no measurement and takes v5p's figures. */
Test(hw_eff, tpu_v5p_v6e_attention_is_tokamax_measured) {
  hw_catalog *c = builtin();
  const struct {
    const char *name;
    double peak, t16, t8, t4, full16, full8;
  } k[] = {{"tpu-v5p", 459e12, 3.196, 1.900, 1.217, 5.367, 2.861},
           {"tpu-v5e", 459e12, 3.196, 1.900, 1.217, 5.367, 2.861},
           {"tpu-v6e", 918e12, 3.981, 2.431, 1.576, 6.657, 3.553},
           {"tpu-v7x", 0, 3.585, 0, 0, 5.619, 2.940}};
  double fl = 4.0 * 16384 * 16384 * 16 * 128 / 2;
  for (int i = 0; i < 4; i++) {
    const hw_model *m = get(c, k[i].name);
    if (k[i].peak > 0) {
      cr_assert_float_eq(m->chip.attention_fwd_efficiency, fl / (k[i].t16 * 1e-3) / k[i].peak, EFF_TOL,
                         "%s", k[i].name);
      /* a call of 16,384 tokens at S keys: rate over 16k = (S / 16384) t16 / tS */
      cr_assert_float_eq(hw_attention_seq_factor(m, 8192), 0.5 * k[i].t16 / k[i].t8, EFF_TOL, "%s",
                         k[i].name);
      cr_assert_float_eq(hw_attention_seq_factor(m, 4096), 0.25 * k[i].t16 / k[i].t4, EFF_TOL, "%s",
                         k[i].name);
    }
    /* full mask over the causal 16k rate: (S / 16384) x 2 x t16 / t_full(S);
    ** flat past the ends, log2-linear between */
    cr_assert_float_eq(hw_attention_unmasked_factor(m, 16384), 2 * k[i].t16 / k[i].full16, EFF_TOL,
                       "%s", k[i].name);
    cr_assert_float_eq(hw_attention_unmasked_factor(m, 8192), k[i].t16 / k[i].full8, EFF_TOL, "%s",
                       k[i].name);
    cr_assert_float_eq(hw_attention_unmasked_factor(m, 65536), hw_attention_unmasked_factor(m, 16384),
                       1e-12);
    cr_assert_float_eq(hw_attention_unmasked_factor(m, 8192 * sqrt(2.0)),
                       (hw_attention_unmasked_factor(m, 8192) + hw_attention_unmasked_factor(m, 16384)) / 2,
                       1e-9);
    /* the kernel never beats the chip's large-GEMM fraction, masked or not */
    cr_assert_lt(m->chip.attention_fwd_efficiency * hw_attention_unmasked_factor(m, 16384),
                 m->chip.matmul_efficiency, "%s", k[i].name);
  }
  cr_assert_eq(hw_attention_unmasked_factor(get(c, "h100-sxm"), 4096), 0); /* none given */
  hw_catalog_free(c);
}

/* TPU7x: tokamax's flash-attention autotuning data (openxla/tokamax
** @ 783ea957, tpu7x/pallas_mosaic_tpu_flash_attention(_vjp).json), the
** kernel MaxText's Ironwood recipes run (use_tokamax_splash=True). Causal,
** head dim 128, 16 heads, seqlen 16,384, batch 1: forward 3.585 ms and the
** fused backward 8.245 ms (2.5x the FLOPs) against one TensorCore's 1153.5
** TFLOP/s; at 8,192 keys (batch 2) 2.138 and 4.707 ms, at 4,096 (batch 4)
** 1.354 and 3.050 ms. The seq table holds the mean of the forward's and
** the backward's rate over their 16k rate. */
Test(hw_eff, tpu7x_attention_is_tokamax_measured) {
  hw_catalog *c = builtin();
  const hw_model *m = get(c, "tpu-v7x");
  double fl = 4.0 * 16384 * 16384 * 16 * 128 / 2, tc = 1153.5e12;
  cr_assert_float_eq(m->chip.attention_fwd_efficiency, fl / 3.585e-3 / tc, EFF_TOL);
  cr_assert_float_eq(m->chip.attention_bwd_efficiency, 2.5 * fl / 8.245e-3 / tc, EFF_TOL);
  /* a call of 16,384 tokens at S keys: rate over 16k = (S / 16384) t16 / tS */
  double r8 = (0.5 * 3.585 / 2.138 + 0.5 * 8.245 / 4.707) / 2;
  double r4 = (0.25 * 3.585 / 1.354 + 0.25 * 8.245 / 3.050) / 2;
  cr_assert_float_eq(hw_attention_seq_factor(m, 8192), r8, EFF_TOL);
  cr_assert_float_eq(hw_attention_seq_factor(m, 4096), r4, EFF_TOL);
  /* linear in log2 of the keys between points, 1 from 16k on */
  cr_assert_float_eq(hw_attention_seq_factor(m, 8192 * sqrt(2.0)),
                     (hw_attention_seq_factor(m, 8192) + 1) / 2, 1e-9);
  cr_assert_float_eq(hw_attention_seq_factor(m, 65536), 1, 1e-12);
  /* Hopper: the FlashAttention-3 paper's panels at 4k and 8k over 16k,
  ** forward (causal) 579 / 602 of 616 and backward 542 / 559 of 561, their
  ** mean; the H200 and the 96 GB part take H100 SXM's table */
  static const char *const hopper[] = {"h100-sxm", "h100-96gb", "h200"};
  for (int i = 0; i < 3; i++) {
    const hw_model *h = get(c, hopper[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 4096), (579.0 / 616 + 542.0 / 561) / 2, EFF_TOL,
                       "%s", hopper[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 8192), (602.0 / 616 + 559.0 / 561) / 2, EFF_TOL,
                       "%s", hopper[i]);
  }
  /* A100: FlashAttention-2's forward + backward panel, 173 / 182 of 189
  ** TFLOP/s at 4k / 8k (Fig. 4(d)), for the four A100 entries */
  static const char *const ampere[] = {"a100-80g", "a100-40g", "a100-40g-aws", "a100-40g-gcp"};
  for (int i = 0; i < 4; i++) {
    const hw_model *h = get(c, ampere[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 4096), 173.0 / 189, EFF_TOL, "%s", ampere[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 8192), 182.0 / 189, EFF_TOL, "%s", ampere[i]);
  }
  /* head dim 64 and 256 at 16k: 32, 16 and 8 heads, so heads x head dim
  ** and the FLOPs are the same in the three calls; forward 6.970 and 2.074
  ** ms against 3.585 at 128, backward 16.180 and 4.746 against 8.245;
  ** log2-linear between, flat past */
  double d64 = (3.585 / 6.970 + 8.245 / 16.180) / 2;
  double d256 = (3.585 / 2.074 + 8.245 / 4.746) / 2;
  cr_assert_float_eq(hw_attention_head_factor(m, 64), d64, EFF_TOL);
  cr_assert_float_eq(hw_attention_head_factor(m, 256), d256, EFF_TOL);
  cr_assert_float_eq(hw_attention_head_factor(m, 128), 1, 1e-12);
  cr_assert_float_eq(hw_attention_head_factor(m, 512), hw_attention_head_factor(m, 256), 1e-12);
  cr_assert_float_eq(hw_attention_head_factor(m, 128 * sqrt(2.0)),
                     (1 + hw_attention_head_factor(m, 256)) / 2, 1e-9);
  cr_assert_float_eq(hw_attention_head_factor(m, 64 * sqrt(2.0)), (d64 + 1) / 2, EFF_TOL);
  cr_assert_eq(hw_attention_head_factor(get(c, "h100-sxm"), 64), 0); /* none given */
  /* Blackwell: cuDNN 9.22's 128-token sliding window (cudnn-frontend's
  ** gpt_oss results, head dim 64, 16k tokens) over its full causal rate at
  ** 16k (llama3.1 results), forward and backward, their mean: GB200 167 /
  ** 1708 and 188 / 1328, GB300 173 / 1915 and 200 / 1507. B200 and B300
  ** take the NVL72 part's table (the same GPU) */
  double g2 = (167.0 / 1708 + 188.0 / 1328) / 2, g3 = (173.0 / 1915 + 200.0 / 1507) / 2;
  static const char *const bw[] = {"gb200", "b200", "gb300", "b300"};
  for (int i = 0; i < 4; i++) {
    const hw_model *h = get(c, bw[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 128), i < 2 ? g2 : g3, EFF_TOL, "%s", bw[i]);
    cr_assert_float_eq(hw_attention_seq_factor(h, 64), hw_attention_seq_factor(h, 128), 1e-12);
    /* halfway in log2 from 128 to the next point, 2048, is 512 */
    cr_assert_float_eq(hw_attention_seq_factor(h, 512),
                       (hw_attention_seq_factor(h, 128) + hw_attention_seq_factor(h, 2048)) / 2, 1e-9,
                       "%s", bw[i]);
  }
  cr_assert_float_eq(hw_attention_seq_factor(get(c, "b200"), 2048),
                     hw_attention_seq_factor(get(c, "gb200"), 2048), 1e-12);
  /* a chip that gives no table runs at its long-sequence rate everywhere */
  cr_assert_float_eq(hw_attention_seq_factor(get(c, "l4"), 1024), 1, 1e-12);
  hw_catalog_free(c);
}

/* Where nothing was published the figure is absent (not guessed) and the
** timing falls back to the chip's own large-GEMM fraction: no splash-attention
** measurement on the TPUs before TPU7x (tokamax's v6e data is its own
** kernel, not the splash kernel the Trillium recipes run), no
** FlashAttention on Volta, no fp8 GEMM measured on a TPU. */
Test(hw_eff, unmeasured_kernels_fall_back_to_matmul) {
  hw_catalog *c = builtin();
  /* no attention measurement at all (tokamax measured v5p and v6e; v5e
  ** takes v5p's): the kernel at the matmul figure */
  static const char *const no_attn[] = {"tpu-v4", "v100"};
  for (size_t i = 0; i < sizeof no_attn / sizeof *no_attn; i++) {
    const hw_model *m = get(c, no_attn[i]);
    cr_assert(!given(m, "chip.attention_fwd_efficiency"), "%s", no_attn[i]);
    cr_assert_eq(m->chip.attention_fwd_efficiency, m->chip.matmul_efficiency, "%s", no_attn[i]);
  }
  static const char *const none[] = {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "v100"};
  for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
    const hw_model *m = get(c, none[i]);
    /* no backward measured: it takes the forward's figure */
    cr_assert(!given(m, "chip.attention_bwd_efficiency"), "%s", none[i]);
    cr_assert_eq(m->chip.attention_bwd_efficiency, m->chip.attention_fwd_efficiency, "%s", none[i]);
    cr_assert(!given(m, "chip.fp8_matmul_efficiency"), "%s", none[i]);
    cr_assert_eq(m->chip.fp8_matmul_efficiency, m->chip.matmul_efficiency, "%s", none[i]);
  }
  hw_catalog_free(c);
}

/* Invariants of any measured figure: a fused attention kernel is GEMMs plus
** softmax work, so it never beats the same chip's large-GEMM fraction, and on
** a GPU its backward (5 matmuls and more softmax traffic) never beats its
** forward (TPU7x's fused backward does: 0.289 against 0.266, measured); an
** fp8 GEMM never runs slower in TFLOP/s than the bf16 one on a chip whose fp8
** peak is higher. */
/* chip.matmul_shape (docs/hardware.md): the Hopper parts carry OpenXLA's
** measured sm_90 (H100) table, the Blackwell parts its sm_100 (B200) table,
** one grid each; and each grid is its CSV's (hw_models/data): a cell the
** geometric mean of the rows whose b x m folds to its M, over the best
** cell, to 4 significant digits -- or below, where a larger shape timed
** faster than a smaller (tools/matmul-shape.py; beyond rounding, 7 of
** H100's 175 cells, 37 of B200's). */
Test(hw_eff, matmul_shape_is_the_xla_table) {
  static const struct {
    const char *csv, *chips[4];
    int lowered;
  } T[] = {{"hw_models/data/xla-matmul-sm_90-bf16.csv", {"h100-sxm", "h100-96gb", "h200", NULL}, 7},
           {"hw_models/data/xla-matmul-sm_100-bf16.csv", {"b200", "gb200", "b300", "gb300"}, 37}};
  hw_catalog *c = builtin();
  for (size_t t = 0; t < sizeof T / sizeof *T; t++) {
    double lsum[HW_MM_M][HW_MM_NK][HW_MM_NK] = {{{0}}}, best = 0;
    int n[HW_MM_M][HW_MM_NK][HW_MM_NK] = {{{0}}};
    FILE *f = fopen(T[t].csv, "r");
    cr_assert_not_null(f, "%s", T[t].csv);
    char line[256];
    cr_assert_not_null(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
      long long b, m, nn, k;
      double r;
      char dt[64];
      cr_assert_eq(sscanf(line, "%lld,%lld,%lld,%lld,%63[^,],%lf", &b, &m, &nn, &k, dt, &r), 6);
      int i = (int)log2((double)(b * m) / 256), j = (int)log2((double)nn / 256), l = (int)log2((double)k / 256);
      cr_assert(i >= 0 && i < HW_MM_M && j >= 0 && j < HW_MM_NK && l >= 0 && l < HW_MM_NK, "%s", line);
      lsum[i][j][l] += log(r), n[i][j][l]++;
    }
    fclose(f);
    for (int i = 0; i < HW_MM_M; i++)
      for (int j = 0; j < HW_MM_NK; j++)
        for (int l = 0; l < HW_MM_NK; l++) {
          cr_assert_gt(n[i][j][l], 0, "no row folds to cell %d %d %d", i, j, l);
          best = fmax(best, exp(lsum[i][j][l] / n[i][j][l]));
        }
    const hw_model *first = get(c, T[t].chips[0]);
    cr_assert(first->chip.has_matmul_shape, "%s", first->name);
    int lowered = 0;
    for (int i = 0; i < HW_MM_M; i++)
      for (int j = 0; j < HW_MM_NK; j++)
        for (int l = 0; l < HW_MM_NK; l++) {
          double want = exp(lsum[i][j][l] / n[i][j][l]) / best, got = first->chip.matmul_shape[i][j][l];
          cr_assert_leq(got, want * (1 + 5e-4), "%s cell %d %d %d: %g over the table's %g", first->name,
                        i, j, l, got, want);
          lowered += got < want * (1 - 5e-4);
        }
    cr_assert_eq(lowered, T[t].lowered, "%s: %d cells lowered", first->name, lowered);
    for (int k = 1; k < 4 && T[t].chips[k]; k++)
      cr_assert(memcmp(get(c, T[t].chips[k])->chip.matmul_shape, first->chip.matmul_shape,
                       sizeof first->chip.matmul_shape) == 0,
                "%s's grid differs from %s's", T[t].chips[k], first->name);
  }
  cr_assert_not(get(c, "a100-80g")->chip.has_matmul_shape, "no published A100 table");
  hw_catalog_free(c);
}

Test(hw_eff, measured_fractions_are_physically_ordered) {
  hw_catalog *c = builtin();
  for (int i = 0; i < hw_catalog_count(c); i++) {
    const hw_model *m = hw_catalog_at(c, i);
    const hw_chip *ch = &m->chip;
    cr_assert_leq(ch->attention_fwd_efficiency, ch->matmul_efficiency, "%s", m->name);
    if (m->kind == HW_GPU)
      cr_assert_leq(ch->attention_bwd_efficiency, ch->attention_fwd_efficiency, "%s", m->name);
    double fp8 = hw_peak_flops(m, HW_FP8), bf16 = hw_peak_flops(m, HW_BF16);
    if (fp8 > bf16 && bf16 > 0)
      cr_assert_geq(ch->fp8_matmul_efficiency * fp8, ch->matmul_efficiency * bf16, "%s", m->name);
  }
  hw_catalog_free(c);
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
    {"unknown_enum_value", "\"kind\": \"vmem\"", "\"kind\": \"dram\"", "\"dram\"",
     "chip.onchip.kind: expected one of vmem, cmem, l2, l3, sram; got \"dram\""},
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
    /* fp6 has no schema key: refused, not silently dropped (the rates it could
    ** mean are fp8's on Blackwell; docs/hardware.md lists the keys) */
    {"unknown_dtype_key", "\"int8\": 9.18e14", "\"int8\": 9.18e14, \"fp6\": 9.18e14",
     "\"fp6\"", "chip.peak_flops_per_s.fp6: unknown field"},
    {"negative_new_rate", "\"int8\": 9.18e14", "\"int8\": 9.18e14, \"fp4\": -1", "-1",
     "chip.peak_flops_per_s.fp4: expected a positive number up to 1e+18 FLOP/s, got -1"},
};

Test(hw_bad_input, each_case_names_file_place_and_expectation) {
  for (size_t i = 0; i < sizeof BAD_CASES / sizeof *BAD_CASES; i++) {
    const bad_case *c = &BAD_CASES[i];
    expect_error(c->name, c->from, c->to, c->at, c->want);
  }
}

/* chip.matmul_shape in a file: its axes, its sizes, its values. */
Test(hw_bad_input, matmul_shape_grid) {
  char grid[8192];
  size_t at = 0;
  for (int i = 0; i < HW_MM_M; i++) {
    at += (size_t)snprintf(grid + at, sizeof grid - at, "%s[", i ? ", " : "[");
    for (int j = 0; j < HW_MM_NK; j++)
      at += (size_t)snprintf(grid + at, sizeof grid - at, "%s[0.5, 0.5, 0.5, %s, 0.5]", j ? ", " : "",
                             i == 2 && j == 3 ? "1.5" : "0.5");
    at += (size_t)snprintf(grid + at, sizeof grid - at, "]");
  }
  snprintf(grid + at, sizeof grid - at, "]");
  static const char *const AX = "\"n\": [256, 512, 1024, 2048, 4096], \"k\": [256, 512, 1024, 2048, 4096]";
  char to[9000];
  snprintf(to, sizeof to, "\"matmul_efficiency\": 0.923, \"matmul_shape\": {\"m\": [256, 512, 1024, "
           "2048, 4096, 8192, 16384], %s, \"eff\": %s}", AX, grid);
  expect_error("grid_value_above_one", "\"matmul_efficiency\": 0.923", to, "1.5",
               "chip.matmul_shape.eff[2][3][3]: expected a rate relative to the best shape, a number "
               "from 0.0001 to 1, got 1.5");
  snprintf(to, sizeof to, "\"matmul_efficiency\": 0.923, \"matmul_shape\": {\"m\": [256, 512], %s, "
           "\"eff\": [[[0.5]]]}", AX);
  expect_error("grid_axis", "\"matmul_efficiency\": 0.923", to, "[256, 512]",
               "chip.matmul_shape.m: expected the grid's m axis [256, 512, 1024, 2048, 4096, 8192, 16384]");
  snprintf(to, sizeof to, "\"matmul_efficiency\": 0.923, \"matmul_shape\": {\"m\": [256, 512, 1024, "
           "2048, 4096, 8192, 16384], %s, \"eff\": [[[0.5]]]}", AX);
  expect_error("grid_rows", "\"matmul_efficiency\": 0.923", to, "[[[0.5]]]",
               "chip.matmul_shape.eff: expected an array of 7 for M (256 to 16384)");
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
  /* the peaks share one row, `peak_flops_per_s.{fp64,...}`: each dtype must be in its braces */
  const char *open = strstr(doc, "`peak_flops_per_s.{");
  cr_assert_not_null(open, "docs/hardware.md has no peak_flops_per_s.{...} row");
  const char *close = strstr(open, "}`");
  cr_assert_not_null(close);
  for (int i = 0; i < hw_field_count(); i++) {
    const char *p = hw_field_get(i)->path;
    const char *leaf = strrchr(p, '.');
    leaf = leaf ? leaf + 1 : p;
    char want[96];
    if (strncmp(p, "chip.peak_flops_per_s.", 22) == 0) {
      int found = 0;
      size_t l = strlen(leaf);
      for (const char *q = open + 19; q + l <= close && !found; q++)
        found = strncmp(q, leaf, l) == 0 && (q[-1] == '{' || q[-1] == ',') &&
                (q[l] == ',' || q[l] == '}');
      cr_assert(found, "docs/hardware.md: %s is not in the peak_flops_per_s.{...} row", leaf);
      continue;
    }
    /* written as `section.leaf` or `leaf` in the tables */
    snprintf(want, sizeof want, "%s`", leaf);
    cr_assert(strstr(doc, want), "docs/hardware.md does not document %s", p);
  }
}
