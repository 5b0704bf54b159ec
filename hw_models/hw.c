/*
** hw.c -- the hardware schema table, the loader and its checks.
**
** Loading is one walk over the JSON tree against the table: each member is
** either a field (read and range-checked), a section (walked), or unknown
** (an error with a suggestion). Cross-field rules run afterwards, and last
** the source check: every figure must resolve to a cited source.
*/
#include "hw.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/jin.h"
#include "../base/strutil.h"

static const char *const KIND_CHOICES[] = {"tpu", "gpu", "cpu", "edge", NULL};
static const char *const MU_CHOICES[] = {"mxu", "tensor_core", "amx", "simd", NULL};
static const char *const ONCHIP_CHOICES[] = {"vmem", "cmem", "l2", "l3", "sram", NULL};

const char *hw_onchip_kind_name(int k) {
  return k >= 0 && k < (int)(sizeof ONCHIP_CHOICES / sizeof *ONCHIP_CHOICES) - 1 ? ONCHIP_CHOICES[k]
                                                                                 : "";
}
static const char *const HOSTLINK_CHOICES[] = {"pcie3", "pcie4", "pcie5", "pcie6",
                                               "nvlink-c2c", "usb3", "none", NULL};
static const char *const UP_CHOICES[] = {"nvswitch", "nvlink-mesh", "ici-torus",
                                         "socket-link", "pcie", "host", NULL};
static const char *const OUT_CHOICES[] = {"ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "roce",
                                          "efa", "dcn", "ethernet", NULL};
/* how `hw list` names them, in the same order */
static const char *const OUT_LABELS[] = {"IB EDR", "IB HDR", "IB NDR", "IB XDR", "RoCE",
                                         "EFA", "DCN", "Ethernet", NULL};
_Static_assert(sizeof OUT_CHOICES == sizeof OUT_LABELS, "one label per scale_out kind");
static const char *const TOPO_CHOICES[] = {"fat-tree", "rail-optimized", "dcn", NULL};

#define OFF(member) offsetof(hw_model, member)
#define SZ(member) sizeof(((hw_model *)0)->member)

/* Bounds are physical plausibility, not a guess at the next chip: they exist
** to catch unit mistakes (GB/s written as B/s, bits for bytes) and typos. */
#define PIB 1125899906842624.0
#define MAX_RATE 1e18 /* FLOP/s per chip: ~200x a B200 */
#define MAX_BW 1e15   /* B/s per chip */
#define MAX_COUNT 1e6

#define FIG (HWF_FIGURE)
#define REQ (HWF_REQ | HWF_FIGURE)
#define REQP (HWF_REQ | HWF_FIGURE | HWF_POS)
#define TPU (HWF_TPU | HWF_FIGURE | HWF_POS)
#define RENT (HWF_RENT | HWF_FIGURE | HWF_POS)

#define PEAK(dt, idx)                                                              \
  {"chip.peak_flops_per_s." dt, HWF_NUM, OFF(chip.peak_flops_per_s[idx]), 0,      \
   FIG | HWF_POS, NULL, 0, MAX_RATE, "FLOP/s", NULL}

static const hw_field FIELDS[] = {
    {"schema", HWF_STR, OFF(schema), SZ(schema), HWF_REQ, NULL, 0, 0, "", NULL},
    {"name", HWF_STR, OFF(name), SZ(name), HWF_REQ, NULL, 0, 0, "", NULL},
    {"kind", HWF_ENUM, OFF(kind), 0, HWF_REQ, KIND_CHOICES, 0, 0, "", NULL},
    {"vendor", HWF_STR, OFF(vendor), SZ(vendor), HWF_REQ, NULL, 0, 0, "", NULL},
    {"description", HWF_STR, OFF(description), SZ(description), HWF_REQ, NULL, 0, 0, "", NULL},

    PEAK("fp64", HW_FP64),
    PEAK("fp32", HW_FP32),
    PEAK("tf32", HW_TF32),
    PEAK("bf16", HW_BF16),
    PEAK("fp16", HW_FP16),
    PEAK("fp8", HW_FP8),
    PEAK("int8", HW_INT8),
    PEAK("mxfp8", HW_MXFP8),
    PEAK("fp4", HW_FP4),
    PEAK("int4", HW_INT4),
    {"chip.vector_flops_per_s", HWF_NUM, OFF(chip.vector_flops_per_s), 0, REQP, NULL, 0, MAX_RATE,
     "FLOP/s", NULL},
    {"chip.clock_hz", HWF_NUM, OFF(chip.clock_hz), 0, REQP, NULL, 0, 1e10, "Hz", NULL},
    {"chip.matrix_unit.kind", HWF_ENUM, OFF(chip.mu_kind), 0, REQ, MU_CHOICES, 0, 0, "", NULL},
    {"chip.matrix_unit.cores", HWF_INT, OFF(chip.mu_cores), 0, REQP, NULL, 1, MAX_COUNT, "", NULL},
    {"chip.matrix_unit.units_per_core", HWF_INT, OFF(chip.mu_units_per_core), 0, REQP, NULL, 1,
     1024, "", NULL},
    {"chip.matrix_unit.tile_m", HWF_INT, OFF(chip.tile_m), 0, REQP, NULL, 1, 4096, "elements",
     NULL},
    {"chip.matrix_unit.tile_n", HWF_INT, OFF(chip.tile_n), 0, REQP, NULL, 1, 4096, "elements",
     NULL},
    {"chip.matrix_unit.tile_k", HWF_INT, OFF(chip.tile_k), 0, REQP, NULL, 1, 4096, "elements",
     NULL},
    {"chip.hbm_bytes", HWF_INT, OFF(chip.hbm_bytes), 0, REQP, NULL, 0, PIB, "B", NULL},
    {"chip.hbm_bw_bytes_per_s", HWF_NUM, OFF(chip.hbm_bw_bytes_per_s), 0, REQP, NULL, 0, MAX_BW,
     "B/s", NULL},
    {"chip.onchip.kind", HWF_ENUM, OFF(chip.onchip_kind), 0, REQ, ONCHIP_CHOICES, 0, 0, "", NULL},
    {"chip.onchip.bytes", HWF_INT, OFF(chip.onchip_bytes), 0, REQP, NULL, 0, PIB, "B", NULL},
    {"chip.onchip.per_core_bytes", HWF_INT, OFF(chip.onchip_per_core_bytes), 0, FIG | HWF_POS, NULL,
     0, PIB, "B", NULL},
    {"chip.host_link.kind", HWF_ENUM, OFF(chip.host_link_kind), 0, REQ, HOSTLINK_CHOICES, 0, 0, "",
     NULL},
    {"chip.host_link.bw_bytes_per_s", HWF_NUM, OFF(chip.host_link_bw_bytes_per_s), 0, REQ, NULL, 0,
     MAX_BW, "B/s", NULL},
    {"chip.tdp_w", HWF_NUM, OFF(chip.tdp_w), 0, FIG | HWF_POS, NULL, 0, 1e5, "W", NULL},
    {"chip.sparse_cores", HWF_INT, OFF(chip.sparse_cores), 0, FIG, NULL, 0, 64, "",
     "absent: none (embedding lookups run on the matrix/vector cores)"},
    {"chip.devices", HWF_INT, OFF(chip.devices), 0, FIG | HWF_POS, NULL, 1, 64, "",
     "absent: one device a chip"},
    /* Measured sustained figures: optional, each with its own source. What
    ** the timing model assumes without one is set by apply_defaults and
    ** shown by `hw show` from the last column. */
    {"chip.matmul_efficiency", HWF_NUM, OFF(chip.matmul_efficiency), 0, FIG | HWF_POS, NULL, 0, 1,
     "", "absent: timing assumes 1.0"},
    {"chip.hbm_efficiency", HWF_NUM, OFF(chip.hbm_efficiency), 0, FIG | HWF_POS, NULL, 0, 1, "",
     "absent: timing assumes 1.0"},
    {"chip.fp8_matmul_efficiency", HWF_NUM, OFF(chip.fp8_matmul_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes matmul_efficiency"},
    {"chip.grouped_gemm.m256", HWF_NUM, OFF(chip.grouped_gemm_eff[0]), 0, FIG | HWF_POS, NULL, 0, 1,
     "", "absent: grouped GEMMs at the large-GEMM rate"},
    {"chip.grouped_gemm.m512", HWF_NUM, OFF(chip.grouped_gemm_eff[1]), 0, FIG | HWF_POS, NULL, 0, 1,
     "", "absent: grouped GEMMs at the large-GEMM rate"},
    {"chip.grouped_gemm.m1024", HWF_NUM, OFF(chip.grouped_gemm_eff[2]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: grouped GEMMs at the large-GEMM rate"},
    {"chip.grouped_gemm.m4096", HWF_NUM, OFF(chip.grouped_gemm_eff[3]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: grouped GEMMs at the large-GEMM rate"},
    {"chip.grouped_gemm_bwd.m256", HWF_NUM, OFF(chip.grouped_gemm_bwd_eff[0]), 0, FIG | HWF_POS, NULL,
     0, 1, "", "absent: the backward's products at chip.grouped_gemm's rates"},
    {"chip.grouped_gemm_bwd.m512", HWF_NUM, OFF(chip.grouped_gemm_bwd_eff[1]), 0, FIG | HWF_POS, NULL,
     0, 1, "", "absent: the backward's products at chip.grouped_gemm's rates"},
    {"chip.grouped_gemm_bwd.m1024", HWF_NUM, OFF(chip.grouped_gemm_bwd_eff[2]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: the backward's products at chip.grouped_gemm's rates"},
    {"chip.grouped_gemm_bwd.m4096", HWF_NUM, OFF(chip.grouped_gemm_bwd_eff[3]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: the backward's products at chip.grouped_gemm's rates"},
    {"chip.grouped_gemm_at.m", HWF_NUM, OFF(chip.grouped_gemm_at_m), 0, FIG | HWF_POS, NULL, 1,
     1e6, "", "absent: an expert of any shape at the grouped kernel's measured rate"},
    {"chip.grouped_gemm_at.n", HWF_NUM, OFF(chip.grouped_gemm_at_n), 0, FIG | HWF_POS, NULL, 1,
     1e6, "", "absent: an expert of any shape at the grouped kernel's measured rate"},
    {"chip.grouped_gemm_at.k", HWF_NUM, OFF(chip.grouped_gemm_at_k), 0, FIG | HWF_POS, NULL, 1,
     1e6, "", "absent: an expert of any shape at the grouped kernel's measured rate"},
    {"chip.matmul_shape", HWF_MMGRID, OFF(chip.matmul_shape), 0, FIG, NULL, 0, 1, "",
     "absent: the tile and wave model alone"},
    {"chip.attention_seq.s128", HWF_NUM, OFF(chip.attention_seq_eff[0]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: attention at its long-sequence rate"},
    {"chip.attention_seq.s1024", HWF_NUM, OFF(chip.attention_seq_eff[1]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: attention at its long-sequence rate"},
    {"chip.attention_seq.s2048", HWF_NUM, OFF(chip.attention_seq_eff[2]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: attention at its long-sequence rate"},
    {"chip.attention_seq.s4096", HWF_NUM, OFF(chip.attention_seq_eff[3]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: attention at its long-sequence rate"},
    {"chip.attention_seq.s8192", HWF_NUM, OFF(chip.attention_seq_eff[4]), 0, FIG | HWF_POS, NULL, 0,
     1, "", "absent: attention at its long-sequence rate"},
    {"chip.attention_unmasked.s1024", HWF_NUM, OFF(chip.attention_unmasked_eff[0]), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: a full mask at the causal table's rate"},
    {"chip.attention_unmasked.s2048", HWF_NUM, OFF(chip.attention_unmasked_eff[1]), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: a full mask at the causal table's rate"},
    {"chip.attention_unmasked.s4096", HWF_NUM, OFF(chip.attention_unmasked_eff[2]), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: a full mask at the causal table's rate"},
    {"chip.attention_unmasked.s8192", HWF_NUM, OFF(chip.attention_unmasked_eff[3]), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: a full mask at the causal table's rate"},
    {"chip.attention_unmasked.s16384", HWF_NUM, OFF(chip.attention_unmasked_eff[4]), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: a full mask at the causal table's rate"},
    {"chip.attention_head_dim.d64", HWF_NUM, OFF(chip.attention_hd_eff[0]), 0, FIG | HWF_POS, NULL,
     0, 1, "", "absent: a systolic array's padding of the head to its width"},
    {"chip.attention_head_dim.d256", HWF_NUM, OFF(chip.attention_hd_eff[1]), 0, FIG | HWF_POS, NULL,
     0, 4, "", "absent: a systolic array's padding of the head to its width"},
    {"chip.grouped_gemm_efficiency", HWF_NUM, OFF(chip.grouped_gemm_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes matmul_efficiency"},
    {"chip.grouped_gemm_bwd_efficiency", HWF_NUM, OFF(chip.grouped_gemm_bwd_efficiency), 0,
     FIG | HWF_POS, NULL, 0, 1, "", "absent: timing assumes grouped_gemm_efficiency"},
    {"chip.grouped_gemm_unaligned", HWF_NUM, OFF(chip.grouped_gemm_unaligned), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: an expert of any width at the aligned rate (its padding aside)"},
    {"chip.attention_fa1_efficiency", HWF_NUM, OFF(chip.attention_fa1_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes the framework's other kernel figures"},
    {"chip.attention_fa2_efficiency", HWF_NUM, OFF(chip.attention_fa2_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes the attention_*_efficiency figures"},
    {"chip.attention_cudnn_fwd_efficiency", HWF_NUM, OFF(chip.attention_cudnn_fwd_efficiency), 0,
     FIG | HWF_POS, NULL, 0, 1, "", "absent: timing assumes the attention_*_efficiency figures"},
    {"chip.attention_cudnn_bwd_efficiency", HWF_NUM, OFF(chip.attention_cudnn_bwd_efficiency), 0,
     FIG | HWF_POS, NULL, 0, 1, "", "absent: timing assumes the attention_*_efficiency figures"},
    {"chip.attention_fp8_fwd_speedup", HWF_NUM, OFF(chip.attention_fp8_fwd_speedup), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: no fp8 attention (--fp8-dot-product-attention refused)"},
    {"chip.attention_fp8_bwd_speedup", HWF_NUM, OFF(chip.attention_fp8_bwd_speedup), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: no fp8 attention (--fp8-dot-product-attention refused)"},
    {"chip.attention_mxfp8_fwd_speedup", HWF_NUM, OFF(chip.attention_mxfp8_fwd_speedup), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: no MXFP8 attention (refused under --precision mxfp8)"},
    {"chip.attention_mxfp8_bwd_speedup", HWF_NUM, OFF(chip.attention_mxfp8_bwd_speedup), 0,
     FIG | HWF_POS, NULL, 0, 4, "", "absent: no MXFP8 attention (refused under --precision mxfp8)"},
    {"chip.attention_cudnn_seq.s128", HWF_NUM, OFF(chip.attention_cudnn_seq_eff[0]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: between its neighbours (no point at all: attention_seq's)"},
    {"chip.attention_cudnn_seq.s1024", HWF_NUM, OFF(chip.attention_cudnn_seq_eff[1]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: between its neighbours (no point at all: attention_seq's)"},
    {"chip.attention_cudnn_seq.s2048", HWF_NUM, OFF(chip.attention_cudnn_seq_eff[2]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: between its neighbours (no point at all: attention_seq's)"},
    {"chip.attention_cudnn_seq.s4096", HWF_NUM, OFF(chip.attention_cudnn_seq_eff[3]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: between its neighbours (no point at all: attention_seq's)"},
    {"chip.attention_cudnn_seq.s8192", HWF_NUM, OFF(chip.attention_cudnn_seq_eff[4]), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: between its neighbours (no point at all: attention_seq's)"},
    {"chip.attention_fwd_efficiency", HWF_NUM, OFF(chip.attention_fwd_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes matmul_efficiency"},
    {"chip.attention_bwd_efficiency", HWF_NUM, OFF(chip.attention_bwd_efficiency), 0, FIG | HWF_POS,
     NULL, 0, 1, "", "absent: timing assumes attention_fwd_efficiency"},
    {"chip.transcendentals_per_s", HWF_NUM, OFF(chip.transcendentals_per_s), 0, FIG | HWF_POS, NULL,
     0, MAX_RATE, "op/s", "absent: timing assumes vector_flops_per_s"},
    {"chip.op_overhead_s", HWF_NUM, OFF(chip.op_overhead_s), 0, FIG | HWF_POS, NULL, 0, 1e-3, "s",
     "absent: timing assumes 0"},
    {"chip.sustained_clock_ratio", HWF_NUM, OFF(chip.sustained_clock_ratio), 0, FIG | HWF_POS, NULL,
     0, 1, "", "absent: the cores hold the clock the compute figures were measured at (1.0)"},

    {"system.chips_per_node", HWF_INT, OFF(chips_per_node), 0, REQP, NULL, 1, MAX_COUNT, "", NULL},
    {"system.host_cores", HWF_INT, OFF(host_cores), 0, FIG | HWF_POS, NULL, 1, 65536, "cores",
     "absent: the input pipeline assumes 16 decode cores a host"},
    {"system.scale_up.kind", HWF_ENUM, OFF(scale_up.kind), 0, REQ, UP_CHOICES, 0, 0, "", NULL},
    {"system.scale_up.domain_chips", HWF_INT, OFF(scale_up.domain_chips), 0, REQP, NULL, 1,
     MAX_COUNT, "", NULL},
    {"system.scale_up.links_per_chip", HWF_INT, OFF(scale_up.links_per_chip), 0, REQP, NULL, 1,
     1024, "", NULL},
    {"system.scale_up.link_bw_bytes_per_s", HWF_NUM, OFF(scale_up.link_bw_bytes_per_s), 0, REQP,
     NULL, 0, MAX_BW, "B/s", NULL},
    {"system.scale_up.bw_per_chip_bytes_per_s", HWF_NUM, OFF(scale_up.bw_per_chip_bytes_per_s), 0,
     REQP, NULL, 0, MAX_BW, "B/s", NULL},
    {"system.scale_up.latency_s", HWF_NUM, OFF(scale_up.latency_s), 0, REQP, NULL, 0, 1, "s", NULL},
    {"system.scale_up.efficiency", HWF_NUM, OFF(scale_up.efficiency), 0, FIG | HWF_POS, NULL, 0, 1,
     "", "absent: collectives assume 1.0"},
    {"system.scale_up.collective_ctas", HWF_INT, OFF(scale_up.collective_ctas), 0, FIG, NULL, 1,
     4096, "CTAs", "absent: collectives hold no compute cores"},
    {"system.scale_up.in_switch_reduction", HWF_BOOL, OFF(scale_up.in_switch_reduction), 0, FIG,
     NULL, 0, 0, "", NULL},
    {"system.scale_up.torus_dims", HWF_INT, OFF(scale_up.torus_dims), 0, TPU, NULL, 1, 3, "", NULL},
    {"system.scale_up.wrap_axis_multiple", HWF_INT, OFF(scale_up.wrap_axis_multiple), 0, TPU, NULL,
     1, 1024, "chips", NULL},
    {"system.scale_up.max_slice_chips", HWF_INT, OFF(scale_up.max_slice_chips), 0, TPU, NULL, 1,
     MAX_COUNT, "", NULL},
    {"system.scale_up.max_slice_shape", HWF_INT3, OFF(scale_up.max_slice_shape), 0, TPU, NULL, 1,
     4096, "", NULL},
    {"system.scale_up.pod_chips", HWF_INT, OFF(scale_up.pod_chips), 0, TPU, NULL, 1, MAX_COUNT, "",
     NULL},
    {"system.scale_up.ocs_block", HWF_INT3, OFF(scale_up.ocs_block), 0, FIG, NULL, 1, 4096, "",
     NULL},
    {"system.scale_up.slice_shapes", HWF_SHAPES, OFF(scale_up.slice_shapes), 0, TPU, NULL, 1, 4096,
     "", NULL},
    {"system.scale_out.kind", HWF_ENUM, OFF(scale_out.kind), 0, REQ, OUT_CHOICES, 0, 0, "", NULL},
    {"system.scale_out.bw_per_chip_bytes_per_s", HWF_NUM, OFF(scale_out.bw_per_chip_bytes_per_s), 0,
     REQP, NULL, 0, MAX_BW, "B/s", NULL},
    {"system.scale_out.latency_s", HWF_NUM, OFF(scale_out.latency_s), 0, REQP, NULL, 0, 1, "s",
     NULL},
    {"system.scale_out.topology", HWF_ENUM, OFF(scale_out.topology), 0, REQ, TOPO_CHOICES, 0, 0, "",
     NULL},
    {"system.scale_out.collective_ctas", HWF_INT, OFF(scale_out.collective_ctas), 0, FIG, NULL, 1,
     4096, "CTAs", "absent: collectives hold no compute cores"},
    {"system.scale_out.reducer_bw_bytes_per_s", HWF_NUM, OFF(scale_out.reducer_bw_bytes_per_s), 0,
     FIG | HWF_POS, NULL, 0, MAX_BW, "B/s", "absent: no Reduction Server reducers"},
    {"system.scale_out.reducer_usd_per_hour", HWF_NUM, OFF(scale_out.reducer_usd_per_hour), 0,
     FIG | HWF_POS, NULL, 0, 1e4, "USD", "absent: no Reduction Server reducers"},

    {"price.on_demand_usd_per_chip_hour", HWF_NUM, OFF(price.on_demand_usd_per_chip_hour), 0, RENT,
     NULL, 0, 1e4, "USD", "absent: not rented (an edge part)"},
    {"price.spot_usd_per_chip_hour", HWF_NUM, OFF(price.spot_usd_per_chip_hour), 0, RENT, NULL, 0,
     1e4, "USD", "absent: not rented (an edge part)"},
    {"price.chips_per_instance", HWF_INT, OFF(price.chips_per_instance), 0, FIG | HWF_POS, NULL, 1,
     MAX_COUNT, "chips", NULL},
    {"price.read_on", HWF_STR, OFF(price.read_on), SZ(price.read_on), HWF_RENT, NULL, 0, 0, "",
     NULL},
    {"price.basis", HWF_STR, OFF(price.basis), SZ(price.basis), HWF_RENT, NULL, 0, 0, "", NULL},
};

#define NFIELDS ((int)(sizeof FIELDS / sizeof FIELDS[0]))
_Static_assert(sizeof FIELDS / sizeof FIELDS[0] <= HW_MAX_FIELDS, "raise HW_MAX_FIELDS");

int hw_field_count(void) { return NFIELDS; }
const hw_field *hw_field_get(int i) { return (i >= 0 && i < NFIELDS) ? &FIELDS[i] : NULL; }

int hw_field_find(const char *path) {
  for (int i = 0; i < NFIELDS; i++)
    if (strcmp(FIELDS[i].path, path) == 0) return i;
  return -1;
}

/* A section is a proper prefix of some field path, ending at a '.'. */
static int is_section(const char *path) {
  size_t l = strlen(path);
  for (int i = 0; i < NFIELDS; i++)
    if (strncmp(FIELDS[i].path, path, l) == 0 && FIELDS[i].path[l] == '.') return 1;
  return 0;
}

/* In hw_dtype order; the JSON keys under chip.peak_flops_per_s (the PEAK rows
** above) spell them the same way. */
static const char *const DTYPE_NAMES[HW_DTYPE_COUNT] = {"fp64", "fp32", "tf32",  "bf16", "fp16",
                                                         "fp8",  "int8", "mxfp8", "fp4", "int4"};

const char *hw_dtype_name(hw_dtype dt) {
  return (dt >= 0 && dt < HW_DTYPE_COUNT) ? DTYPE_NAMES[dt] : "?";
}

int hw_dtype_parse(const char *name) {
  for (int i = 0; i < HW_DTYPE_COUNT; i++)
    if (strcmp(DTYPE_NAMES[i], name) == 0) return i;
  return -1;
}

const char *hw_kind_name(hw_kind k) { return KIND_CHOICES[k]; }

const char *hw_scale_out_label(int kind) {
  return (kind >= 0 && kind < (int)(sizeof OUT_LABELS / sizeof *OUT_LABELS) - 1) ? OUT_LABELS[kind]
                                                                                 : "?";
}

const char *hw_enum_name(int field_index, int value) {
  const hw_field *f = hw_field_get(field_index);
  if (!f || f->type != HWF_ENUM || value < 0) return "?";
  for (int i = 0; f->choices[i]; i++)
    if (i == value) return f->choices[i];
  return "?";
}

const int64_t HW_GROUPED_M[HW_GROUPED_POINTS] = {256, 512, 1024, 4096};

double hw_clocked(const hw_chip *c, double rate) {
  return c->sustained_clock_ratio > 0 ? rate * c->sustained_clock_ratio : rate;
}

double hw_grouped_gemm_ceiling(const hw_model *m, bool backward) {
  const hw_chip *c = &m->chip;
  double g = backward ? c->grouped_gemm_bwd_efficiency : c->grouped_gemm_efficiency;
  return g > 0 && c->matmul_efficiency > 0 ? g / c->matmul_efficiency : 1;
}

const int64_t HW_ATTN_KEYS[HW_ATTN_POINTS] = {128, 1024, 2048, 4096, 8192};

/* A measured relative rate at size v: the points given (eff > 0 at at[i]),
** then 1 at `ref`, linear in log2 between them; the first point's value
** below it, 1 from ref on, 1 when none is given. */
static double size_factor(const double *eff, const int64_t *at, int points, double ref, double v) {
  double x[8], y[8];
  int n = 0;
  for (int i = 0; i < points && n < 7; i++)
    if (eff[i] > 0) x[n] = log2((double)at[i]), y[n++] = eff[i];
  if (n == 0 || !(v > 0)) return 1;
  x[n] = log2(ref), y[n++] = 1;
  double t = log2(v);
  if (t <= x[0]) return y[0];
  for (int i = 1; i < n; i++)
    if (t <= x[i]) return y[i - 1] + (y[i] - y[i - 1]) * (t - x[i - 1]) / (x[i] - x[i - 1]);
  return 1;
}

const int64_t HW_ATTN_FULL_KEYS[HW_ATTN_FULL_POINTS] = {1024, 2048, 4096, 8192, 16384};

double hw_attention_unmasked_factor(const hw_model *m, double keys) {
  const double *e = m->chip.attention_unmasked_eff;
  double x[HW_ATTN_FULL_POINTS], y[HW_ATTN_FULL_POINTS];
  int n = 0;
  for (int i = 0; i < HW_ATTN_FULL_POINTS; i++)
    if (e[i] > 0) x[n] = log2((double)HW_ATTN_FULL_KEYS[i]), y[n++] = e[i];
  if (n == 0) return 0;
  double t = keys > 0 ? log2(keys) : x[0];
  if (t <= x[0]) return y[0];
  for (int i = 1; i < n; i++)
    if (t <= x[i]) return y[i - 1] + (y[i] - y[i - 1]) * (t - x[i - 1]) / (x[i] - x[i - 1]);
  return y[n - 1];
}

double hw_attention_head_factor(const hw_model *m, double d) {
  const double *e = m->chip.attention_hd_eff;
  if (!(e[0] > 0) && !(e[1] > 0)) return 0;
  if (!(d > 0)) return 1;
  /* not padded to the array's tiles: tokamax's one unaligned point, MLA's
  ** 192-wide query and key with a 128-wide value (DeepSeek's shape, in its
  ** tpu_v5 and tpu7x flash-attention data), runs on v5p at 1.06x the rate
  ** of a 128 head at the same length, where padding the 192 to 256 on the
  ** 128-wide MXU would have it at 0.85x */
  double t = log2(d / 128); /* -1 at 64, +1 at 256 */
  double lo = e[0] > 0 ? e[0] : 1, hi = e[1] > 0 ? e[1] : 1;
  if (t <= -1) return lo;
  if (t >= 1) return hi;
  return t < 0 ? 1 + (1 - lo) * t : 1 + (hi - 1) * t;
}

double hw_grouped_gemm_width_factor(const hw_model *m, int64_t k, int64_t n) {
  const hw_chip *c = &m->chip;
  if (!(c->grouped_gemm_unaligned > 0) || c->tile_n <= 0) return 1;
  return k % c->tile_n || n % c->tile_n ? c->grouped_gemm_unaligned : 1;
}

/* Whether a grouped-GEMM rows table (chip.grouped_gemm or _bwd) has points. */
static bool grouped_points(const double *e) {
  for (int i = 0; i < HW_GROUPED_POINTS; i++)
    if (e[i] > 0) return true;
  return false;
}

double hw_grouped_gemm_shape_factor(const hw_model *m, double rows, double n, double k) {
  const hw_chip *c = &m->chip;
  /* measured by tokens a group instead */
  if (grouped_points(c->grouped_gemm_eff) || grouped_points(c->grouped_gemm_bwd_eff)) return 1;
  if (!c->has_matmul_shape || !(c->grouped_gemm_at_m > 0) || !(c->grouped_gemm_at_n > 0) ||
      !(c->grouped_gemm_at_k > 0) || !(rows > 0) || !(n > 0) || !(k > 0))
    return 1;
  return hw_matmul_shape_factor(c, rows, n, k) /
         hw_matmul_shape_factor(c, c->grouped_gemm_at_m, c->grouped_gemm_at_n, c->grouped_gemm_at_k);
}

double hw_grouped_gemm_factor(const hw_model *m, double tokens, bool backward) {
  /* the measured points, then 1 at 8,192 tokens a group (the reference);
  ** the backward's own where the chip measured them */
  const double *bwd = m->chip.grouped_gemm_bwd_eff;
  const double *e = backward && grouped_points(bwd) ? bwd : m->chip.grouped_gemm_eff;
  return size_factor(e, HW_GROUPED_M, HW_GROUPED_POINTS, 8192.0, tokens);
}

/* Position of v on an axis of powers of two: index i and the fraction
** toward i + 1 in log2, clamped to the ends. */
static void axis_at(const int64_t *axis, int n, double v, int *i, double *f) {
  double t = v > 0 ? log2(v / (double)axis[0]) : 0;
  if (!(t > 0)) t = 0;
  if (t > n - 1) t = n - 1;
  *i = (int)t < n - 1 ? (int)t : n - 2;
  *f = t - *i;
}

double hw_matmul_shape_factor(const hw_chip *c, double rows, double n, double k) {
  if (!c->has_matmul_shape) return 1;
  int im, in, ik;
  double fm, fn, fk;
  axis_at(HW_MM_MS, HW_MM_M, rows, &im, &fm);
  axis_at(HW_MM_NKS, HW_MM_NK, n, &in, &fn);
  axis_at(HW_MM_NKS, HW_MM_NK, k, &ik, &fk);
  /* in log space: along each axis the cells' rates grow at most as fast as
  ** the size (tools/matmul-shape.py), so a larger GEMM's time interpolated
  ** so never falls */
  double s = 0;
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int d = 0; d < 2; d++)
        s += (a ? fm : 1 - fm) * (b ? fn : 1 - fn) * (d ? fk : 1 - fk) *
             log(c->matmul_shape[im + a][in + b][ik + d]);
  return exp(s);
}

double hw_attention_seq_factor(const hw_model *m, double keys) {
  return size_factor(m->chip.attention_seq_eff, HW_ATTN_KEYS, HW_ATTN_POINTS, 16384.0, keys);
}

double hw_peak_flops(const hw_model *m, hw_dtype dt) {
  return (dt >= 0 && dt < HW_DTYPE_COUNT) ? m->chip.peak_flops_per_s[dt] : 0;
}

double hw_peak_16bit(const hw_model *m) {
  double bf = m->chip.peak_flops_per_s[HW_BF16];
  return bf > 0 ? bf : m->chip.peak_flops_per_s[HW_FP16];
}

void hw_free(hw_model *m) {
  if (!m) return;
  hw_kv *lists[] = {m->sources, m->cites, m->notes};
  int counts[] = {m->n_sources, m->n_cites, m->n_notes};
  for (int l = 0; l < 3; l++) {
    for (int i = 0; i < counts[l]; i++) {
      free(lists[l][i].key);
      free(lists[l][i].value);
    }
    free(lists[l]);
  }
  free(m);
}

/* ---- the walk ---- */

typedef struct {
  jin *j;
  hw_model *m;
  bool given[HW_MAX_FIELDS]; /* in the file, valid or not: no "missing" on top of "wrong" */
  bool given_sources, given_cite;
  char missing_sections[8][64];
  int n_missing_sections;
} loader;

static void *field_ptr(hw_model *m, const hw_field *f) { return (char *)m + f->offset; }

static void range_text(const hw_field *f, char *buf, size_t n) {
  const char *unit = *f->unit ? f->unit : "";
  if (f->flags & HWF_POS)
    snprintf(buf, n, "a positive %s up to %g%s%s", f->type == HWF_INT ? "integer" : "number",
             f->max, *unit ? " " : "", unit);
  else
    snprintf(buf, n, "%s in [%g, %g]%s%s", f->type == HWF_INT ? "an integer" : "a number",
             f->min, f->max, *unit ? " " : "", unit);
}

static int number_ok(const hw_field *f, double v) {
  if (!isfinite(v)) return 0;
  if ((f->flags & HWF_POS) && !(v > 0)) return 0;
  if (v < f->min || v > f->max) return 0;
  if (f->type != HWF_NUM && v != floor(v)) return 0;
  return 1;
}

void hw_sort_sides(int64_t s[3], int dims) {
  int n = dims == 2 ? 2 : 3;
  for (int i = 0; i < n; i++)
    for (int k = i + 1; k < n; k++)
      if (s[k] < s[i]) { int64_t t = s[i]; s[i] = s[k]; s[k] = t; }
}

/* One list of shapes, [[2,2,1], ...] or [[1,1], [2,2], ...]: each 2 or 3
** sides from 1 to 4096, all of one length (*dims, 0 until the first). Stored
** sides ascending, a 2-D shape as AxBx1. Errors at the element. */
static int read_shape_list(loader *L, const cJSON *v, int64_t (*out)[3], int *n, int *dims) {
  char got[96];
  jin_describe(v, got, sizeof got);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 ||
      cJSON_GetArraySize(v) > HW_MAX_SLICE_SHAPES) {
    jin_error(L->j, 0, "expected an array of 1 to %d shapes such as [2, 2, 4], got %s",
              HW_MAX_SLICE_SHAPES, got);
    return -1;
  }
  int k = 0, rc = 0;
  for (const cJSON *e = v->child; e; e = e->next, k++) {
    jin_push_index(L->j, k);
    int len = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : 0;
    int64_t s[3] = {1, 1, 1};
    int ok = (len == 2 || len == 3) && (!*dims || len == *dims);
    for (int i = 0; ok && i < len; i++) {
      const cJSON *x = cJSON_GetArrayItem(e, i);
      ok = cJSON_IsNumber(x) && x->valuedouble >= 1 && x->valuedouble <= 4096 &&
           x->valuedouble == floor(x->valuedouble);
      if (ok) s[i] = (int64_t)x->valuedouble;
    }
    if (!ok) {
      jin_describe(e, got, sizeof got);
      if (*dims)
        jin_error(L->j, 0, "expected a shape of %d sides, each an integer 1 to 4096 (as the "
                  "shapes before it), got %s", *dims, got);
      else
        jin_error(L->j, 0, "expected a shape [x, y] or [x, y, z], each side an integer 1 to "
                  "4096, got %s", got);
      rc = -1;
    } else {
      *dims = len;
      hw_sort_sides(s, len);
      memcpy(out[k], s, sizeof s);
    }
    jin_pop(L->j);
  }
  *n = k;
  return rc;
}

/* A field's object value with only the keys `keys`, else -1 after an
** error that shows the form expected (`form`) and what the file has. */
static int object_of(loader *L, const cJSON *v, const char *const *keys, const char *form) {
  if (!cJSON_IsObject(v)) {
    char got[96];
    jin_describe(v, got, sizeof got);
    jin_error(L->j, 0, "expected an object %s, got %s", form, got);
    return -1;
  }
  return jin_only(L->j, v, keys, NULL) != 0 ? -1 : 0;
}

/* system.scale_up.slice_shapes: {"listed": [...], "cube": 4, "twisted": [...]}
** (see hw_slice_shapes). Sides are sorted here; the rules that need the
** other scale_up fields run in check_slice_shapes. */
static int read_slice_shapes(loader *L, const cJSON *v, hw_slice_shapes *out) {
  static const char *const KEYS[] = {"listed", "cube", "twisted", NULL};
  if (object_of(L, v, KEYS,
                "{\"listed\": [[2, 2, 1], ...], \"cube\": 4, \"twisted\": [[4, 4, 8], ...]}") != 0)
    return -1;
  memset(out, 0, sizeof *out);
  int dims = 0, rc = 0;
  const cJSON *listed = jin_get_array(L->j, v, "listed", true);
  if (!listed) return -1;
  jin_push_key(L->j, "listed", 0);
  rc |= read_shape_list(L, listed, out->listed, &out->n_listed, &dims);
  jin_pop(L->j);
  if (jin_get_int(L->j, v, "cube", 2, 4096, false, &out->cube_side) < 0) rc = -1;
  const cJSON *tw = cJSON_GetObjectItemCaseSensitive(v, "twisted");
  if (tw) {
    jin_push_key(L->j, "twisted", 0);
    rc |= read_shape_list(L, tw, out->twisted, &out->n_twisted, &dims);
    jin_pop(L->j);
  }
  out->dims = dims;
  return rc;
}

const int64_t HW_MM_MS[HW_MM_M] = {256, 512, 1024, 2048, 4096, 8192, 16384};
const int64_t HW_MM_NKS[HW_MM_NK] = {256, 512, 1024, 2048, 4096};

/* Whether v is the array `want` of n integers. */
static bool axis_is(const cJSON *v, const int64_t *want, int n) {
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n) return false;
  for (int i = 0; i < n; i++) {
    const cJSON *e = cJSON_GetArrayItem(v, i);
    if (!cJSON_IsNumber(e) || e->valuedouble != (double)want[i]) return false;
  }
  return true;
}

/* One level of chip.matmul_shape's eff: depth 0 the M rows (7), 1 the N
** rows (5), 2 the K values (5) from 1e-4 to 1, written to out in that order. */
static int read_mm_level(loader *L, const cJSON *v, int depth, double *out) {
  static const char *const WHAT[] = {"M (256 to 16384)", "N (256 to 4096)", "K (256 to 4096)"};
  int want = depth == 0 ? HW_MM_M : HW_MM_NK;
  int stride = depth == 0 ? HW_MM_NK * HW_MM_NK : depth == 1 ? HW_MM_NK : 1;
  char got[96];
  jin_describe(v, got, sizeof got);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != want) {
    jin_error(L->j, 0, "expected an array of %d for %s, got %s", want, WHAT[depth], got);
    return -1;
  }
  int rc = 0, i = 0;
  for (const cJSON *x = v->child; x && rc == 0; x = x->next, i++) {
    jin_push_index(L->j, i);
    if (depth < 2) {
      rc = read_mm_level(L, x, depth + 1, out + i * stride);
    } else if (!cJSON_IsNumber(x) || !(x->valuedouble >= 1e-4 && x->valuedouble <= 1)) {
      /* below 1e-4 of the best shape's rate is no GEMM library's (the
      ** tables' smallest shapes run at 0.004-0.008 of it) */
      jin_describe(x, got, sizeof got);
      jin_error(L->j, 0, "expected a rate relative to the best shape, a number from 0.0001 to 1, got %s",
                got);
      rc = -1;
    } else {
      out[i] = x->valuedouble;
    }
    jin_pop(L->j);
  }
  return rc;
}

/* chip.matmul_shape: {"m": [256, ..., 16384], "n": [256, ..., 4096], "k":
** [...], "eff": [M][N][K] of numbers from 1e-4 to 1} (tools/matmul-shape.py
** writes it from a measured table). The axes are fixed: a file states
** them so that it reads on its own. */
static int read_mm_grid(loader *L, const cJSON *v, double out[HW_MM_M][HW_MM_NK][HW_MM_NK]) {
  static const char *const KEYS[] = {"m", "n", "k", "eff", NULL};
  if (object_of(L, v, KEYS, "{\"m\": [256, ..., 16384], \"n\": [256, ..., 4096], \"k\": [256, ..., "
                "4096], \"eff\": [[[...]]]} (tools/matmul-shape.py)") != 0)
    return -1;
  static const char *const AXES[] = {"m", "n", "k"};
  for (int a = 0; a < 3; a++) {
    const cJSON *ax = jin_get_array(L->j, v, AXES[a], true);
    if (!ax) return -1;
    if (!axis_is(ax, a == 0 ? HW_MM_MS : HW_MM_NKS, a == 0 ? HW_MM_M : HW_MM_NK)) {
      char got[96];
      jin_push_key(L->j, AXES[a], 0);
      jin_describe(ax, got, sizeof got);
      jin_error(L->j, 0, "expected the grid's %s axis %s, got %s", AXES[a],
                a == 0 ? "[256, 512, 1024, 2048, 4096, 8192, 16384]" : "[256, 512, 1024, 2048, 4096]",
                got);
      jin_pop(L->j);
      return -1;
    }
  }
  const cJSON *e = jin_get_array(L->j, v, "eff", true);
  if (!e) return -1;
  jin_push_key(L->j, "eff", 0);
  int rc = read_mm_level(L, e, 0, &out[0][0][0]);
  jin_pop(L->j);
  return rc;
}

static void read_field(loader *L, int fi, const cJSON *v) {
  const hw_field *f = &FIELDS[fi];
  void *p = field_ptr(L->m, f);
  L->given[fi] = true;
  char got[96];
  jin_describe(v, got, sizeof got);
  switch (f->type) {
  case HWF_STR:
    if (!cJSON_IsString(v)) {
      jin_error(L->j, 0, "expected a string, got %s", got);
      return;
    }
    if (strlen(v->valuestring) >= f->size || !*v->valuestring) {
      jin_error(L->j, 0, "expected a non-empty string of at most %zu characters", f->size - 1);
      return;
    }
    str_copy(p, f->size, v->valuestring);
    break;
  case HWF_ENUM: {
    int found = -1;
    if (cJSON_IsString(v))
      for (int i = 0; f->choices[i]; i++)
        if (strcmp(f->choices[i], v->valuestring) == 0) found = i;
    if (found < 0) {
      char list[256] = "";
      for (int i = 0; f->choices[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, f->choices[i], sizeof list - strlen(list) - 1);
      }
      jin_error(L->j, 0, "expected one of %s; got %s", list, got);
      return;
    }
    *(int *)p = found;
    break;
  }
  case HWF_NUM:
  case HWF_INT: {
    if (!cJSON_IsNumber(v) || !number_ok(f, v->valuedouble)) {
      char want[160];
      range_text(f, want, sizeof want);
      jin_error(L->j, 0, "expected %s, got %s", want, got);
      return;
    }
    if (f->type == HWF_NUM)
      *(double *)p = v->valuedouble;
    else
      *(int64_t *)p = (int64_t)v->valuedouble;
    break;
  }
  case HWF_BOOL:
    if (!cJSON_IsBool(v)) {
      jin_error(L->j, 0, "expected true or false, got %s", got);
      return;
    }
    *(bool *)p = cJSON_IsTrue(v);
    break;
  case HWF_INT3: {
    int64_t *out = p;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3) {
      jin_error(L->j, 0, "expected an array of 3 positive integers [x, y, z], got %s", got);
      return;
    }
    for (int i = 0; i < 3; i++) {
      const cJSON *e = cJSON_GetArrayItem(v, i);
      if (!cJSON_IsNumber(e) || !number_ok(f, e->valuedouble)) {
        jin_push_index(L->j, i);
        jin_describe(e, got, sizeof got);
        jin_error(L->j, 0, "expected a positive integer up to %g, got %s", f->max, got);
        jin_pop(L->j);
        return;
      }
      out[i] = (int64_t)e->valuedouble;
    }
    break;
  }
  case HWF_SHAPES:
    if (read_slice_shapes(L, v, p) != 0) return;
    break;
  case HWF_MMGRID:
    if (read_mm_grid(L, v, p) != 0) return;
    break;
  }
  L->m->present[fi] = true;
}

static void unknown_field(loader *L, const char *prefix, const char *key) {
  /* Candidates: the next path segment of every field under prefix. */
  char segs[HW_MAX_FIELDS + 3][48];
  const char *cand[HW_MAX_FIELDS + 3];
  static const char *const TOP_EXTRA[] = {"sources", "cite", "notes"};
  size_t l = strlen(prefix);
  int n = 0;
  if (l == 0)
    for (; n < 3; n++) cand[n] = TOP_EXTRA[n];
  for (int i = 0; i < NFIELDS; i++) {
    const char *p = FIELDS[i].path;
    if (l && !(strncmp(p, prefix, l) == 0 && p[l] == '.')) continue;
    const char *rest = l ? p + l + 1 : p;
    size_t k = strcspn(rest, ".");
    if (k >= sizeof segs[0]) continue;
    int dup = 0;
    for (int c = 0; c < n; c++)
      if (strlen(cand[c]) == k && strncmp(cand[c], rest, k) == 0) dup = 1;
    if (dup) continue;
    memcpy(segs[n], rest, k);
    segs[n][k] = '\0';
    cand[n] = segs[n];
    n++;
  }
  const char *s = str_suggest(key, cand, n);
  if (s)
    jin_error(L->j, 1, "unknown field (did you mean '%s'?)", s);
  else {
    char list[512] = "";
    for (int c = 0; c < n; c++) {
      strncat(list, c ? ", " : "", sizeof list - strlen(list) - 1);
      strncat(list, cand[c], sizeof list - strlen(list) - 1);
    }
    jin_error(L->j, 1, "unknown field; expected one of: %s", list);
  }
}

static char *dupstr(const char *s) {
  size_t l = strlen(s) + 1;
  char *d = malloc(l);
  if (d) memcpy(d, s, l);
  return d;
}

static int kv_add(hw_kv **list, int *n, const char *key, const char *value) {
  hw_kv *nl = realloc(*list, (size_t)(*n + 1) * sizeof **list);
  if (!nl) return -1;
  *list = nl;
  nl[*n].key = dupstr(key);
  nl[*n].value = dupstr(value);
  (*n)++;
  return 0;
}

/* Duplicate keys: cJSON keeps both and readers disagree on which wins, so a
** duplicate is always an error. Returns which occurrence child is (0 first). */
static int occurrence(const cJSON *obj, const cJSON *child) {
  int n = 0;
  for (const cJSON *c = obj->child; c && c != child; c = c->next)
    if (strcmp(c->string, child->string) == 0) n++;
  return n;
}

static void read_sources(loader *L, const cJSON *obj) {
  if (!cJSON_IsObject(obj) || !obj->child) {
    jin_error(L->j, 0, "expected an object of {\"id\": {\"title\": ..., \"url\": ...}}");
    return;
  }
  for (const cJSON *s = obj->child; s; s = s->next) {
    jin_push_key(L->j, s->string, occurrence(obj, s));
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(s, "title");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(s, "url");
    if (occurrence(obj, s) > 0) {
      jin_error(L->j, 1, "duplicate source id");
    } else if (!cJSON_IsObject(s) || cJSON_GetArraySize(s) != 2 || !cJSON_IsString(title) ||
               !cJSON_IsString(url) || !*title->valuestring) {
      jin_error(L->j, 0, "expected {\"title\": string, \"url\": string} and nothing else");
    } else if (strncmp(url->valuestring, "https://", 8) != 0 &&
               strncmp(url->valuestring, "http://", 7) != 0) {
      jin_push_key(L->j, "url", 0);
      jin_error(L->j, 0, "expected an http(s):// address, got \"%.60s\"", url->valuestring);
      jin_pop(L->j);
    } else {
      char v[1024];
      snprintf(v, sizeof v, "%s <%s>", title->valuestring, url->valuestring);
      kv_add(&L->m->sources, &L->m->n_sources, s->string, v);
    }
    jin_pop(L->j);
  }
}

/* cite values are "id" or ["id", ...]; notes values are strings. Both are
** keyed by field paths, checked after the walk. */
static void read_path_map(loader *L, const cJSON *obj, int is_cite) {
  if (!cJSON_IsObject(obj)) {
    jin_error(L->j, 0, "expected an object keyed by field path");
    return;
  }
  for (const cJSON *c = obj->child; c; c = c->next) {
    jin_push_key(L->j, c->string, occurrence(obj, c));
    char v[1024] = "";
    int ok = 1;
    if (occurrence(obj, c) > 0) {
      jin_error(L->j, 1, "duplicate key");
      ok = 0;
    } else if (!is_cite) {
      ok = cJSON_IsString(c) && *c->valuestring;
      if (ok) str_copy(v, sizeof v, c->valuestring);
      else jin_error(L->j, 0, "expected a non-empty string");
    } else if (cJSON_IsString(c) && *c->valuestring) {
      str_copy(v, sizeof v, c->valuestring);
    } else if (cJSON_IsArray(c) && cJSON_GetArraySize(c) > 0) {
      for (const cJSON *e = c->child; e && ok; e = e->next) {
        if (!cJSON_IsString(e) || !*e->valuestring) ok = 0;
        else {
          if (*v) strncat(v, ", ", sizeof v - strlen(v) - 1);
          strncat(v, e->valuestring, sizeof v - strlen(v) - 1);
        }
      }
      if (!ok) jin_error(L->j, 0, "expected a source id or a non-empty array of source ids");
    } else {
      jin_error(L->j, 0, "expected a source id or a non-empty array of source ids");
      ok = 0;
    }
    if (ok) {
      if (is_cite) kv_add(&L->m->cites, &L->m->n_cites, c->string, v);
      else kv_add(&L->m->notes, &L->m->n_notes, c->string, v);
    }
    jin_pop(L->j);
  }
}

static void walk(loader *L, const cJSON *obj, const char *prefix) {
  for (const cJSON *c = obj->child; c; c = c->next) {
    int occ = occurrence(obj, c);
    jin_push_key(L->j, c->string, occ);
    char path[160];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", c->string);
    int fi;
    if (occ > 0) {
      jin_error(L->j, 1, "duplicate key (already given above)");
    } else if (!*prefix && strcmp(c->string, "sources") == 0) {
      L->given_sources = true;
      read_sources(L, c);
    } else if (!*prefix && strcmp(c->string, "cite") == 0) {
      L->given_cite = true;
      read_path_map(L, c, 1);
    } else if (!*prefix && strcmp(c->string, "notes") == 0) {
      read_path_map(L, c, 0);
    } else if ((fi = hw_field_find(path)) >= 0) {
      read_field(L, fi, c);
    } else if (is_section(path)) {
      if (!cJSON_IsObject(c)) {
        char got[96];
        jin_describe(c, got, sizeof got);
        jin_error(L->j, 0, "expected an object (a section), got %s", got);
      } else {
        walk(L, c, path);
      }
    } else {
      unknown_field(L, prefix, c->string);
    }
    jin_pop(L->j);
  }
}

/* ---- checks after the walk ---- */

static void parent_of(const char *path, char *buf, size_t n) {
  str_copy(buf, n, path);
  char *dot = strrchr(buf, '.');
  if (dot) *dot = '\0';
  else buf[0] = '\0';
}

/* Reports at the deepest existing ancestor of a missing field. When a whole
** section is absent, says so once instead of once per field inside it. */
static void missing(loader *L, const hw_field *f, const char *why) {
  char at[160];
  parent_of(f->path, at, sizeof at);
  for (;;) {
    char copy[160], *save = NULL;
    jin_seg segs[JIN_MAX_DEPTH];
    str_copy(copy, sizeof copy, at);
    int n = 0;
    for (char *t = strtok_r(copy, ".", &save); t && n < JIN_MAX_DEPTH;
         t = strtok_r(NULL, ".", &save))
      segs[n++] = (jin_seg){t, 0};
    if (!*at || jin_locate(L->j->text, L->j->len, segs, n, 0) != SIZE_MAX) break;
    parent_of(at, at, sizeof at);
  }
  const char *rest = f->path + (*at ? strlen(at) + 1 : 0);
  size_t seg = strcspn(rest, ".");
  if (rest[seg] == '.') { /* an absent section */
    char section[160];
    snprintf(section, sizeof section, "%.*s", (int)(rest - f->path + seg), f->path);
    for (int i = 0; i < L->n_missing_sections; i++)
      if (strcmp(L->missing_sections[i], section) == 0) return;
    if (L->n_missing_sections < 8) str_copy(L->missing_sections[L->n_missing_sections++], 64, section);
    jin_error_at(L->j, at, 1, "missing section '%.*s' (see docs/hardware.md)", (int)seg, rest);
    return;
  }
  jin_error_at(L->j, at, 1, "missing field '%s'%s%s", rest, why ? " " : "", why ? why : "");
}

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* An error at system.scale_up.slice_shapes.<list>[k], for the rules that
** need the other scale_up fields (so run after the walk). */
static void shape_error(loader *L, const char *list, int k, const char *msg) {
  static const char *const SEGS[] = {"system", "scale_up", "slice_shapes"};
  for (int i = 0; i < 3; i++) jin_push_key(L->j, SEGS[i], 0);
  jin_push_key(L->j, list, 0);
  if (k >= 0) jin_push_index(L->j, k);
  jin_error(L->j, 0, "%s", msg);
  for (int i = k >= 0 ? 5 : 4; i > 0; i--) jin_pop(L->j);
}

/* Within max_slice_shape, whatever the order of its sides. */
static int shape_fits(const int64_t s[3], const int64_t max[3], int64_t dims) {
  int64_t m[3] = {max[0], max[1], max[2]}, a[3] = {s[0], s[1], s[2]};
  hw_sort_sides(m, (int)dims), hw_sort_sides(a, (int)dims);
  return a[0] <= m[0] && a[1] <= m[1] && a[2] <= m[2];
}

/* The offered shapes against the torus: as many sides as torus_dims, each
** within the largest slice; a cube that fits; twisted shapes of the two
** forms a twisted torus takes (k x k x 2k, k x 2k x 2k: Camara et al. 2010;
** libtpu's "k*k*2k and k*2k*2k") and offered. */
static void check_slice_shapes(loader *L) {
  const hw_scale_up *u = &L->m->scale_up;
  const hw_slice_shapes *sh = &u->slice_shapes;
  char msg[256];
  if (sh->dims != u->torus_dims) {
    snprintf(msg, sizeof msg, "shapes of %d sides on a %" PRId64 "-D torus (torus_dims): write "
             "each as %s", sh->dims, u->torus_dims, u->torus_dims == 2 ? "[x, y]" : "[x, y, z]");
    shape_error(L, "listed", 0, msg);
    return;
  }
  for (int k = 0; k < sh->n_listed; k++) {
    const int64_t *s = sh->listed[k];
    if (shape_fits(s, u->max_slice_shape, u->torus_dims) && s[0] * s[1] * s[2] <= u->max_slice_chips)
      continue;
    snprintf(msg, sizeof msg, "%" PRId64 "x%" PRId64 "x%" PRId64 " does not fit in the largest "
             "slice, %" PRId64 "x%" PRId64 "x%" PRId64 " (max_slice_shape, %" PRId64 " chips)",
             s[0], s[1], s[2], u->max_slice_shape[0], u->max_slice_shape[1], u->max_slice_shape[2],
             u->max_slice_chips);
    shape_error(L, "listed", k, msg);
  }
  int64_t c = sh->cube_side, cube[3] = {c, c, u->torus_dims == 3 ? c : 1};
  if (c && !shape_fits(cube, u->max_slice_shape, u->torus_dims)) {
    snprintf(msg, sizeof msg, "a cube of side %" PRId64 " does not fit in the largest slice "
             "(max_slice_shape)", c);
    shape_error(L, "cube", -1, msg);
  }
  for (int k = 0; k < sh->n_twisted; k++) {
    const int64_t *s = sh->twisted[k];
    bool form = u->torus_dims == 3 && ((s[0] == s[1] && s[2] == 2 * s[0]) ||
                                       (s[1] == 2 * s[0] && s[2] == s[1]));
    bool whole = c && s[0] % c == 0 && s[1] % c == 0 && s[2] % c == 0;
    bool listed = false;
    for (int i = 0; i < sh->n_listed; i++)
      listed |= memcmp(sh->listed[i], s, sizeof sh->listed[i]) == 0;
    bool fits = shape_fits(s, u->max_slice_shape, 3) && s[0] * s[1] * s[2] <= u->max_slice_chips;
    if (form && fits && (whole || listed)) continue;
    snprintf(msg, sizeof msg, "%" PRId64 "x%" PRId64 "x%" PRId64 " %s", s[0], s[1], s[2],
             !form ? "cannot be twisted: a twisted torus is k x k x 2k or k x 2k x 2k (3-D)"
                   : "is not an offered shape (listed, or whole cubes within max_slice_shape)");
    shape_error(L, "twisted", k, msg);
  }
}

static void check_rules(loader *L) {
  hw_model *m = L->m;
  jin *j = L->j;
  int is_tpu = m->present[hw_field_find("kind")] && m->kind == HW_TPU;
  int is_edge = m->present[hw_field_find("kind")] && m->kind == HW_EDGE;

  for (int i = 0; i < NFIELDS; i++) {
    const hw_field *f = &FIELDS[i];
    if ((f->flags & HWF_REQ) && !L->given[i]) missing(L, f, NULL);
    if ((f->flags & HWF_TPU) && is_tpu && !L->given[i]) missing(L, f, "(required for a TPU)");
    if ((f->flags & HWF_RENT) && !is_edge && !L->given[i])
      missing(L, f, "(only an edge part may leave its rental price out)");
    if ((f->flags & HWF_TPU) && !is_tpu && m->present[i])
      jin_error_at(j, f->path, 1, "only a TPU torus has this field; this is a %s",
                   hw_kind_name(m->kind));
  }
  if (!L->given_sources) jin_error_at(j, "", 0, "missing section 'sources' (every figure needs a source)");
  if (!L->given_cite) jin_error_at(j, "", 0, "missing section 'cite' (which source backs each figure)");
  if (!is_tpu && m->present[hw_field_find("system.scale_up.ocs_block")])
    jin_error_at(j, "system.scale_up.ocs_block", 1, "only a TPU pod has optical circuit switches");
  if (j->errors) return; /* the rules below assume the fields are there */

  if (strcmp(m->schema, "tpusim-hw/1") != 0)
    jin_error_at(j, "schema", 0, "expected \"tpusim-hw/1\", got \"%s\"", m->schema);
  for (const char *c = m->name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-')) {
      jin_error_at(j, "name", 0, "expected lower-case letters, digits and '-' only, got \"%s\"",
                   m->name);
      break;
    }
  /* a training-capable chip needs a float unit; an edge part may be
  ** integer-only (the Edge TPU runs int8 alone) */
  int any_peak = 0;
  for (int d = 0; d < HW_DTYPE_COUNT; d++) any_peak |= m->chip.peak_flops_per_s[d] > 0;
  if (is_edge ? !any_peak : hw_peak_16bit(m) <= 0 && m->chip.peak_flops_per_s[HW_FP32] <= 0)
    jin_error_at(j, "chip.peak_flops_per_s", 0, "%s",
                 is_edge ? "expected at least one peak (an edge part may be int8 only)"
                         : "expected at least a bf16, fp16 or fp32 peak (an int8-only part is "
                           "kind \"edge\")");
  if (is_tpu != (m->scale_up.kind == HW_UP_ICI_TORUS))
    jin_error_at(j, "system.scale_up.kind", 0, "%s",
                 is_tpu ? "a TPU's scale-up fabric is \"ici-torus\""
                        : "only a TPU has an \"ici-torus\"");
  /* a link is a rate: "none" has none, any other kind a rate above 0 */
  bool no_link = strcmp(hw_enum_name(hw_field_find("chip.host_link.kind"), m->chip.host_link_kind),
                        "none") == 0;
  if (no_link != !(m->chip.host_link_bw_bytes_per_s > 0))
    jin_error_at(j, "chip.host_link.bw_bytes_per_s", 0, "%s, got %g B/s",
                 no_link ? "expected 0 for a host link of kind \"none\""
                         : "expected a rate above 0 for a host link (kind \"none\" when the chip "
                           "has none)",
                 m->chip.host_link_bw_bytes_per_s);
  const hw_scale_up *u = &m->scale_up;
  if (!near(u->bw_per_chip_bytes_per_s, (double)u->links_per_chip * u->link_bw_bytes_per_s,
            0.01))
    jin_error_at(j, "system.scale_up.bw_per_chip_bytes_per_s", 0,
                 "expected links_per_chip x link_bw_bytes_per_s = %" PRId64 " x %g = %g B/s, got %g",
                 u->links_per_chip, u->link_bw_bytes_per_s,
                 (double)u->links_per_chip * u->link_bw_bytes_per_s, u->bw_per_chip_bytes_per_s);
  /* a collective's CTAs each hold an SM: fewer than the chip has */
  const char *cta_path[] = {"system.scale_up.collective_ctas", "system.scale_out.collective_ctas"};
  int64_t ctas[] = {u->collective_ctas, m->scale_out.collective_ctas};
  for (int i = 0; i < 2; i++)
    if (ctas[i] >= m->chip.mu_cores && m->chip.mu_cores > 0)
      jin_error_at(j, cta_path[i], 0,
                   "expected fewer CTAs than the chip's %" PRId64 " cores (chip.matrix_unit.cores), got %" PRId64,
                   m->chip.mu_cores, ctas[i]);
  /* the measured expert shape: all three sizes, and a table to read
  ** other shapes off (hw_grouped_gemm_shape_factor) */
  int at = m->present[hw_field_find("chip.grouped_gemm_at.m")] +
           m->present[hw_field_find("chip.grouped_gemm_at.n")] +
           m->present[hw_field_find("chip.grouped_gemm_at.k")];
  if (at > 0 && at < 3)
    jin_error_at(j, "chip.grouped_gemm_at", 0,
                 "expected all of m, n and k (the measured expert GEMM's rows, output and input "
                 "width), got %d of them",
                 at);
  else if (at == 3 && !m->present[hw_field_find("chip.matmul_shape")])
    jin_error_at(j, "chip.grouped_gemm_at", 0,
                 "needs chip.matmul_shape: other experts' rates are read off that table");
  if (m->chips_per_node > u->domain_chips && u->kind != HW_UP_ICI_TORUS)
    jin_error_at(j, "system.chips_per_node", 0,
                 "a node of %" PRId64 " chips cannot exceed its scale-up domain of %" PRId64,
                 m->chips_per_node, u->domain_chips);
  if (is_tpu) {
    int64_t p = prod3(u->max_slice_shape);
    if (p != u->max_slice_chips)
      jin_error_at(j, "system.scale_up.max_slice_shape", 0,
                   "shape %" PRId64 "x%" PRId64 "x%" PRId64 " holds %" PRId64
                   " chips, but max_slice_chips is %" PRId64,
                   u->max_slice_shape[0], u->max_slice_shape[1], u->max_slice_shape[2], p,
                   u->max_slice_chips);
    int used = 0;
    for (int i = 0; i < 3; i++) used += u->max_slice_shape[i] > 1;
    if (used > u->torus_dims)
      jin_error_at(j, "system.scale_up.max_slice_shape", 0,
                   "uses %d dimensions, but torus_dims is %" PRId64, used, u->torus_dims);
    if (u->pod_chips < u->max_slice_chips)
      jin_error_at(j, "system.scale_up.pod_chips", 0,
                   "a pod of %" PRId64 " chips cannot hold a slice of %" PRId64, u->pod_chips,
                   u->max_slice_chips);
    if (u->domain_chips != u->max_slice_chips)
      jin_error_at(j, "system.scale_up.domain_chips", 0,
                   "a TPU's fast domain is its largest slice (%" PRId64 "), got %" PRId64,
                   u->max_slice_chips, u->domain_chips);
    check_slice_shapes(L);
  }
  if (m->price.spot_usd_per_chip_hour > m->price.on_demand_usd_per_chip_hour)
    jin_error_at(j, "price.spot_usd_per_chip_hour", 0,
                 "spot ($%.2f) above on-demand ($%.2f): swapped?", m->price.spot_usd_per_chip_hour,
                 m->price.on_demand_usd_per_chip_hour);
  if (!m->present[hw_field_find("price.read_on")]) return; /* an edge part, not rented */
  const char *d = m->price.read_on;
  int date_ok = strlen(d) == 10 && d[4] == '-' && d[7] == '-';
  for (int i = 0; i < 10 && date_ok; i++)
    if (i != 4 && i != 7 && !(d[i] >= '0' && d[i] <= '9')) date_ok = 0;
  if (!date_ok) jin_error_at(j, "price.read_on", 0, "expected a date YYYY-MM-DD, got \"%s\"", d);
}

/* ---- sources ---- */

static int source_exists(const hw_model *m, const char *id, size_t len) {
  for (int i = 0; i < m->n_sources; i++)
    if (strlen(m->sources[i].key) == len && strncmp(m->sources[i].key, id, len) == 0) return 1;
  return 0;
}

/* A cite or note key must name a field or section the file actually sets. */
static int path_is_set(const hw_model *m, const char *path) {
  size_t l = strlen(path);
  for (int i = 0; i < NFIELDS; i++) {
    const char *p = FIELDS[i].path;
    if (!m->present[i] || !(FIELDS[i].flags & HWF_FIGURE)) continue;
    if (strcmp(p, path) == 0 || (strncmp(p, path, l) == 0 && p[l] == '.')) return 1;
    if (strcmp(path, "price") == 0 && strncmp(p, "price.", 6) == 0) return 1;
  }
  /* price.read_on and price.basis are not figures but may carry a note */
  return hw_field_find(path) >= 0 && m->present[hw_field_find(path)];
}

static void check_map_keys(loader *L, const hw_kv *list, int n, const char *map) {
  const hw_model *m = L->m;
  for (int i = 0; i < n; i++) {
    char at[200];
    const char *key = list[i].key;
    if (path_is_set(m, key)) continue;
    /* keys contain dots, so locate by segments [map, key] rather than by a dotted path */
    jin_seg segs[2] = {{map, 0}, {key, 0}};
    size_t off = jin_locate(L->j->text, L->j->len, segs, 2, 1);
    int line = 0, col = 0;
    if (off != SIZE_MAX) jin_line_col(L->j->text, off, &line, &col);
    snprintf(at, sizeof at, "%s[\"%s\"]", map, key);
    const char *cand[HW_MAX_FIELDS];
    for (int f = 0; f < NFIELDS; f++) cand[f] = FIELDS[f].path;
    const char *s = str_suggest(key, cand, NFIELDS);
    if (hw_field_find(key) >= 0 || is_section(key))
      diag_error(L->j->dg, L->j->file, line, col, at, "names a field this file does not set");
    else if (s)
      diag_error(L->j->dg, L->j->file, line, col, at, "not a field (did you mean '%s'?)", s);
    else
      diag_error(L->j->dg, L->j->file, line, col, at, "not a field of the hardware schema");
    L->j->errors++;
  }
}

/* The cite entry covering path: its own, else the longest cited prefix. */
static const hw_kv *cite_for(const hw_model *m, const char *path) {
  const hw_kv *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < m->n_cites; i++) {
    const char *k = m->cites[i].key;
    size_t l = strlen(k);
    if (strncmp(path, k, l) == 0 && (path[l] == '\0' || path[l] == '.') && l > best_len) {
      best = &m->cites[i];
      best_len = l;
    }
  }
  return best;
}

static void check_sources(loader *L) {
  hw_model *m = L->m;
  check_map_keys(L, m->cites, m->n_cites, "cite");
  check_map_keys(L, m->notes, m->n_notes, "notes");
  for (int i = 0; i < m->n_cites; i++) {
    const char *v = m->cites[i].value;
    while (*v) {
      size_t len = strcspn(v, ",");
      if (!source_exists(m, v, len)) {
        jin_seg segs[2] = {{"cite", 0}, {m->cites[i].key, 0}};
        size_t off = jin_locate(L->j->text, L->j->len, segs, 2, 0);
        int line = 0, col = 0;
        if (off != SIZE_MAX) jin_line_col(L->j->text, off, &line, &col);
        char at[200];
        snprintf(at, sizeof at, "cite[\"%s\"]", m->cites[i].key);
        diag_error(L->j->dg, L->j->file, line, col, at,
                   "source '%.*s' is not listed in \"sources\"", (int)len, v);
        L->j->errors++;
      }
      v += len;
      while (*v == ',' || *v == ' ') v++;
    }
  }
  for (int i = 0; i < NFIELDS; i++) {
    if (!m->present[i] || !(FIELDS[i].flags & HWF_FIGURE)) continue;
    if (!cite_for(m, FIELDS[i].path))
      jin_error_at(L->j, FIELDS[i].path, 0,
                   "no source: add a \"cite\" entry for this figure or a section holding it");
  }
}

/* What the timing model assumes for an optional figure the file leaves out
** (docs/hardware.md, "Measured efficiency figures"): the peak as such, no
** fixed cost, and a transcendental as cheap as one vector operation. The
** values are filled in so readers need not test present[]; present[] stays
** false, so `hw show` and --json still tell given from assumed. */
static void apply_defaults(hw_model *m) {
  hw_chip *c = &m->chip;
  if (!m->present[hw_field_find("chip.matmul_efficiency")]) c->matmul_efficiency = 1.0;
  if (!m->present[hw_field_find("chip.hbm_efficiency")]) c->hbm_efficiency = 1.0;
  if (!m->present[hw_field_find("chip.fp8_matmul_efficiency")])
    c->fp8_matmul_efficiency = c->matmul_efficiency;
  if (!m->present[hw_field_find("chip.grouped_gemm_efficiency")])
    c->grouped_gemm_efficiency = c->matmul_efficiency;
  if (!m->present[hw_field_find("chip.grouped_gemm_bwd_efficiency")])
    c->grouped_gemm_bwd_efficiency = c->grouped_gemm_efficiency;
  if (!m->present[hw_field_find("chip.attention_fwd_efficiency")])
    c->attention_fwd_efficiency = c->matmul_efficiency;
  /* a measured forward with no backward: the backward at the forward's rate,
  ** not a plain GEMM's (the kernel's rate is what the timing reads) */
  if (!m->present[hw_field_find("chip.attention_bwd_efficiency")])
    c->attention_bwd_efficiency = c->attention_fwd_efficiency;
  if (!m->present[hw_field_find("chip.transcendentals_per_s")])
    c->transcendentals_per_s = c->vector_flops_per_s;
  if (!m->present[hw_field_find("chip.op_overhead_s")]) c->op_overhead_s = 0;
  c->has_matmul_shape = m->present[hw_field_find("chip.matmul_shape")];
  if (!m->present[hw_field_find("chip.sustained_clock_ratio")]) c->sustained_clock_ratio = 1.0;
  if (!m->present[hw_field_find("chip.devices")]) c->devices = 1;
  if (!m->present[hw_field_find("system.scale_up.efficiency")]) m->scale_up.efficiency = 1.0;
  if (!m->present[hw_field_find("price.chips_per_instance")]) m->price.chips_per_instance = 1;
}

hw_model *hw_load(const char *file, const char *text, size_t len, diag *dg) {
  jin j;
  if (jin_open(&j, file, text, len, dg) != 0) {
    jin_close(&j);
    return NULL;
  }
  hw_model *m = calloc(1, sizeof *m);
  if (!m) {
    diag_error(dg, file, 0, 0, NULL, "out of memory");
    jin_close(&j);
    return NULL;
  }
  str_copy(m->origin, sizeof m->origin, file);
  loader L = {.j = &j, .m = m};
  if (!cJSON_IsObject(j.root)) {
    char got[96];
    jin_describe(j.root, got, sizeof got);
    jin_error(&j, 0, "expected a JSON object (a hardware description), got %s", got);
  } else {
    walk(&L, j.root, "");
    check_rules(&L);
    if (!j.errors) check_sources(&L);
  }
  int errors = j.errors;
  jin_close(&j);
  if (errors) {
    hw_free(m);
    return NULL;
  }
  apply_defaults(m);
  return m;
}
