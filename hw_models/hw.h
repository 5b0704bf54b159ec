/*
** hw.h -- hardware descriptions: one chip and the system it comes in.
**
** The schema is a table (hw_field) rather than code: the loader, the
** validator, `hw show`, the JSON writer and the docs test all walk the same
** rows, so a new figure is one row plus a struct member. Differences between
** chips are data in the hw_models JSON files, never `if (chip == ...)` in C.
** See docs/hardware.md for the meaning and unit of every field.
*/
#ifndef TPUSIM_HW_H
#define TPUSIM_HW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/diag.h"

typedef enum {
  HW_FP64,
  HW_FP32,
  HW_TF32,
  HW_BF16,
  HW_FP16,
  HW_FP8,
  HW_INT8,
  HW_MXFP8, /* OCP MX block-scaled fp8 (e4m3/e5m2 + one e8m0 scale per 32): Blackwell */
  HW_FP4,   /* dense NVFP4/MXFP4 on the matrix unit */
  HW_INT4,  /* int4 x int4 dense on the matrix unit (Turing, Ampere tensor cores) */
  HW_DTYPE_COUNT
} hw_dtype;

/* HW_EDGE: a device part for on-device inference (Edge TPU, a phone's
** NPU): listed for serving, never offered for training (plan_hw_supports) */
typedef enum { HW_TPU, HW_GPU, HW_CPU, HW_EDGE } hw_kind;

/* Enumerated string fields are stored as indices into these lists. */
enum { HW_MU_MXU, HW_MU_TENSOR_CORE, HW_MU_AMX, HW_MU_SIMD };
enum { HW_UP_NVSWITCH, HW_UP_NVLINK_MESH, HW_UP_ICI_TORUS, HW_UP_SOCKET_LINK, HW_UP_PCIE,
       HW_UP_HOST /* no chip-to-chip fabric: an edge part reaches others only through its host */ };

typedef struct {
  double peak_flops_per_s[HW_DTYPE_COUNT]; /* 0: no such unit on this chip */
  double vector_flops_per_s;
  double clock_hz;
  int mu_kind;
  int64_t mu_cores, mu_units_per_core, tile_m, tile_n, tile_k;
  int64_t hbm_bytes;
  double hbm_bw_bytes_per_s;
  int onchip_kind;
  int64_t onchip_bytes, onchip_per_core_bytes;
  int host_link_kind;
  double host_link_bw_bytes_per_s;
  double tdp_w;
  /* SparseCores: a TPU's dataflow processors for embedding lookups
  ** (gathers, the pooled exchange, the sparse update), beside the
  ** TensorCores; 0 when the chip has none */
  int64_t sparse_cores;
  /* the devices a framework addresses on one chip (JAX devices): TPU7x's
  ** two TensorCores are two, a megacore's (v4, v5p) one, as is any other
  ** chip's; 1 when absent */
  int64_t devices;
  /* Measured sustained figures (optional). hw_load fills in what the timing
  ** model assumes when a file leaves one out (see hw_field.absent): 1.0 for
  ** the efficiencies, vector_flops_per_s for transcendentals, 0 overhead;
  ** hw_model.present[] still tells given from assumed. */
  double matmul_efficiency;    /* fraction of the matrix peak on large matmuls */
  /* the fused attention kernel of the chip's stack (FlashAttention,
  ** cuDNN, splash): its sustained fraction of the 16-bit matrix peak on
  ** the attention core, forward and backward (absent: matmul_efficiency) */
  double attention_fwd_efficiency, attention_bwd_efficiency;
  /* the same for FlashAttention-2, where the stack's best kernel is newer
  ** (Hopper: FA3/cuDNN): what a framework calling FA2 reaches (absent: the
  ** best kernel's) */
  double attention_fa2_efficiency;
  /* the same for the FlashAttention-1 generation of kernels (FA1's CUDA
  ** kernel, and the Triton FlashAttention llm-foundry's 2023 benchmarks
  ** ran, within 4 % of FA1 on A100): what a framework calling one reaches
  ** (0: absent) */
  double attention_fa1_efficiency;
  /* the same for cuDNN's fused attention (Transformer Engine's backend on
  ** Hopper, ahead of flash-attn in its selection order), forward and
  ** backward, where the chip's attention figures are another kernel's
  ** (Hopper: FlashAttention-3's); a framework calling cuDNN reaches these
  ** (0: absent, the attention_*_efficiency figures) */
  double attention_cudnn_fwd_efficiency, attention_cudnn_bwd_efficiency;
  /* cuDNN's own rate by keys a query sees, as attention_seq_eff, where the
  ** chip's attention_seq table is another kernel's (b200: cuDNN measured on
  ** the chip itself, attention_seq the newer generation's shape); a
  ** framework calling cuDNN reads this one (0 everywhere: attention_seq) */
  double attention_cudnn_seq_eff[5];
  /* cuDNN's fused attention with fp8 operands (Transformer Engine's fp8
  ** dot-product attention, current scaling) over its bf16 rate, forward
  ** and backward, causal at 8k keys, measured on the chip or its die
  ** (0: absent, no fp8 attention to run) */
  double attention_fp8_fwd_speedup, attention_fp8_bwd_speedup;
  /* the same with MXFP8 operands (block scales): what Transformer Engine
  ** runs when the linear layers' recipe is MXFP8 and NVTE_DPA_FP8_RECIPE is
  ** unset (0: absent; Blackwell) */
  double attention_mxfp8_fwd_speedup, attention_mxfp8_bwd_speedup;
  /* the same large-GEMM fraction measured with fp8 operands (absent:
  ** matmul_efficiency): what a low-precision recipe's GEMMs reach */
  double fp8_matmul_efficiency;
  /* a grouped GEMM (MoE experts) at HW_GROUPED_M[i] tokens per group: its
  ** measured rate over the same kernel's at 8,192 tokens a group, where it
  ** matches a large GEMM (absent, 0: no loss) */
  double grouped_gemm_eff[4];
  /* the backward's products (the transposed-weight and the weight-gradient
  ** GEMMs, equal in FLOPs) at as many tokens per group: their mean measured
  ** rate over their rate at 8,192 (absent: grouped_gemm_eff's) */
  double grouped_gemm_bwd_eff[4];
  /* the stack's grouped-GEMM kernel at large groups (the reference of
  ** grouped_gemm_eff): its sustained fraction of the matrix peak, forward
  ** and backward (the transposed-weight and the weight-gradient products),
  ** where it stays below a plain GEMM's (TPU: tokamax ragged_dot; absent:
  ** matmul_efficiency, as fast as a plain GEMM) */
  double grouped_gemm_efficiency, grouped_gemm_bwd_efficiency;
  /* the same kernel on experts whose width (a weight's input or output
  ** dim) is not a multiple of the matrix unit's width (tile_n): its
  ** measured rate over its aligned rate at as many rows a group, net of
  ** the padding to the tile that the timing charges first (0: absent, no
  ** loss beyond that padding) */
  double grouped_gemm_unaligned;
  /* the expert GEMM grouped_gemm_efficiency was measured at: rows (tokens
  ** a group), output and input width. With chip.matmul_shape and no
  ** grouped_gemm_eff points, an expert of another shape runs at the table's
  ** rate there over its rate here: the stack's grouped GEMM is one library
  ** GEMM per expert (Transformer Engine's multi-stream cuBLAS GroupedLinear),
  ** each as fast as a plain GEMM of its shape (0: absent, no such scaling) */
  double grouped_gemm_at_m, grouped_gemm_at_n, grouped_gemm_at_k;
  /* the fused attention kernel at HW_ATTN_KEYS[i] keys a query sees: its
  ** measured rate over the same kernel's at 16,384 keys, the length the
  ** attention_*_efficiency figures hold at (absent, 0: no loss) */
  double attention_seq_eff[5];
  /* the same kernel under a full (unmasked) mask at 1,024 .. 16,384 keys a
  ** query (HW_ATTN_FULL_KEYS): its rate over its causal rate at 16,384 --
  ** an encoder's, or a model called with causal=False, computes every
  ** block (absent, 0: the causal table's rate) */
  double attention_unmasked_eff[5];
  /* the same kernel at head dim 64 and 256: its measured rate over its rate
  ** at 128 (absent, 0: a systolic array's padding of the head to its width,
  ** none on other units) */
  double attention_hd_eff[2];
  /* a plain GEMM's measured rate at M x N x K (a batch folded into M) over
  ** the best rate of the same table, on the grid HW_MM_M x HW_MM_NK x
  ** HW_MM_NK (chip.matmul_shape; absent: the tile and wave model alone) */
  double matmul_shape[7][5][5];
  bool has_matmul_shape; /* the file gives chip.matmul_shape */
  double hbm_efficiency;       /* fraction of hbm_bw_bytes_per_s a copy sustains */
  double transcendentals_per_s; /* exp/log/rsqrt/tanh/... results per second */
  double op_overhead_s;        /* fixed cost of one op (kernel launch) */
  /* the SM (core) clock this part sustains under its own power limit over
  ** the clock its compute figures (peaks, the efficiencies measured at the
  ** full rated power) hold at: a part run below its rated power (torchtitan's
  ** 500 W H100s) throttles its cores, not its HBM. Scales the matrix, vector
  ** and transcendental rates; memory time unchanged (absent: 1) */
  double sustained_clock_ratio;
} hw_chip;

/* The slice shapes a TPU platform offers (system.scale_up.slice_shapes),
** each stored sides ascending (a 2-D one as AxBx1, A <= B): the listed shapes,
** then (cube_side > 0) any shape whose sides are all multiples of
** cube_side within max_slice_shape (whole OCS cubes), and the shapes that
** may be wired as a twisted torus (a subset of the offered ones). */
#define HW_MAX_SLICE_SHAPES 24
typedef struct {
  int dims; /* sides each shape was given with: 2 or 3 (= torus_dims) */
  int n_listed, n_twisted;
  int64_t listed[HW_MAX_SLICE_SHAPES][3], twisted[HW_MAX_SLICE_SHAPES][3];
  int64_t cube_side; /* 0: only the listed shapes */
} hw_slice_shapes;

/* A slice shape's sides ascending: all three on a 3-D torus, the first
** two on a 2-D one (AxBx1), as the hardware files store the offered shapes
** and as shapes are compared. */
void hw_sort_sides(int64_t s[3], int dims);
/* "4x4x8" (dims 3), "16x16" (dims 2), "4x4x8t" when twisted: a shape as
** --topology takes it and the files write it. */
void hw_shape_text(const int64_t s[3], int dims, bool twisted, char *buf, size_t n);
/* "1x2x2, 2x2x2, or whole 4x4x4 cubes; twisted: 4x4x8" (hw show) */
void hw_slice_shapes_text(const hw_slice_shapes *sh, char *buf, size_t n);

typedef struct {
  int kind;
  int64_t domain_chips, links_per_chip;
  double link_bw_bytes_per_s, bw_per_chip_bytes_per_s, latency_s;
  bool in_switch_reduction;
  double efficiency; /* measured sustained fraction of the link bandwidth (1.0 when absent) */
  /* the CTAs (one an SM) the collective library's kernel holds for a large
  ** all-gather or reduce-scatter inside the domain; 0: none (TPU DMAs) */
  int64_t collective_ctas;
  /* TPU torus only */
  int64_t torus_dims, wrap_axis_multiple, max_slice_chips, pod_chips;
  int64_t max_slice_shape[3], ocs_block[3];
  hw_slice_shapes slice_shapes;
} hw_scale_up;

typedef struct {
  int kind;
  double bw_per_chip_bytes_per_s, latency_s;
  int topology;
  int64_t collective_ctas; /* as scale_up's, for a group that spans nodes */
  /* a Reduction Server's reducer: the CPU VM Vertex AI runs beside the GPU
  ** hosts, its NIC (one direction) and its price an hour; 0: none */
  double reducer_bw_bytes_per_s, reducer_usd_per_hour;
} hw_scale_out;

typedef struct {
  double on_demand_usd_per_chip_hour, spot_usd_per_chip_hour;
  /* the smallest rental holds this many chips (an 8-GPU instance): a plan
  ** on fewer chips still pays for all of them */
  int64_t chips_per_instance;
  char read_on[16];
  char basis[256];
} hw_price;

typedef struct {
  char *key;   /* source id, or a field path for cites and notes */
  char *value; /* "title <url>", "id1, id2", or the note */
} hw_kv;

#define HW_MAX_FIELDS 112

typedef struct hw_model {
  char schema[16];
  char name[32];
  hw_kind kind;
  char vendor[32];
  char description[256];
  hw_chip chip;
  int64_t chips_per_node;
  int64_t host_cores;   /* physical CPU cores of one node's host(s); 0: not given */
  hw_scale_up scale_up;
  hw_scale_out scale_out;
  hw_price price;

  hw_kv *sources, *cites, *notes;
  int n_sources, n_cites, n_notes;
  char origin[256]; /* "built-in" or the file it came from */
  bool present[HW_MAX_FIELDS];
} hw_model;

/* ---- the schema table ---- */

typedef enum { HWF_STR, HWF_ENUM, HWF_NUM, HWF_INT, HWF_BOOL, HWF_INT3, HWF_SHAPES, HWF_MMGRID } hw_ftype;

enum {
  HWF_REQ = 1u << 0,      /* required for every kind */
  HWF_TPU = 1u << 1,      /* required for TPUs, not allowed otherwise */
  HWF_POS = 1u << 2,      /* must be > 0 (else >= min) */
  HWF_FIGURE = 1u << 3,   /* a figure: must carry a source */
  HWF_RENT = 1u << 4,     /* required unless the part is an edge part, which is bought, not rented */
};

typedef struct {
  const char *path; /* "chip.hbm_bytes" */
  hw_ftype type;
  size_t offset;
  size_t size;                /* HWF_STR: buffer size */
  unsigned flags;
  const char *const *choices; /* HWF_ENUM: NULL-terminated */
  double min, max;            /* inclusive, except HWF_POS makes 0 exclusive */
  const char *unit;           /* "B", "B/s", "FLOP/s", "s", "Hz", "W", "USD", "" */
  const char *absent;         /* optional figures the timing model defaults:
                                 what `hw show` says when the file has none */
} hw_field;

int hw_field_count(void);
const hw_field *hw_field_get(int i);
/* Index of the field at path, or -1. */
int hw_field_find(const char *path);

/* ---- loading ---- */

/* Parses and validates one hardware file. Returns NULL after reporting every
** problem found to dg (with file:line:col and field path). */
hw_model *hw_load(const char *file, const char *text, size_t len, diag *dg);
void hw_free(hw_model *m);

const char *hw_dtype_name(hw_dtype dt);
/* -1 when the name is not a dtype. */
int hw_dtype_parse(const char *name);
const char *hw_kind_name(hw_kind k);
/* "vmem", "l2", "sram", ...: the on-chip memory kind as the file names it */
const char *hw_onchip_kind_name(int k);
/* "IB NDR", "DCN": the scale-out fabric as people write it. */
const char *hw_scale_out_label(int kind);
/* The string of an enumerated field as stored (e.g. "nvswitch"). */
const char *hw_enum_name(int field_index, int value);

/* 0 when the chip has no unit for dt: callers must treat that as an error,
** never as "infinitely slow" or "free". */
double hw_peak_flops(const hw_model *m, hw_dtype dt);

/* The tokens per group of chip.grouped_gemm.m256 ... m4096. */
#define HW_GROUPED_POINTS 4
extern const int64_t HW_GROUPED_M[HW_GROUPED_POINTS];

/* The grid of chip.matmul_shape: M 256 to 16384, N and K 256 to 4096,
** each a power of two. */
#define HW_MM_M 7
#define HW_MM_NK 5
extern const int64_t HW_MM_MS[HW_MM_M], HW_MM_NKS[HW_MM_NK];

/* A plain GEMM's rate at rows x n x k (a batch folded into the rows) as a
** fraction of the best shape of the chip's measured table
** (chip.matmul_shape): the log of the rate trilinear in log2 of each size
** over the grid, each clamped to the grid's ends (a larger GEMM runs at the
** largest measured one's rate, a smaller at the smallest's: its time then
** falls with its size). 1 when the chip gives no table. */
double hw_matmul_shape_factor(const hw_chip *c, double rows, double n, double k);

/* The keys per query of chip.attention_seq.s128 ... s8192 (s128: a
** 128-token sliding window, the shortest span a training kernel sees). */
#define HW_ATTN_POINTS 5
extern const int64_t HW_ATTN_KEYS[HW_ATTN_POINTS];

/* A fused attention kernel's rate at `keys` keys a query as a fraction of
** its rate at 16,384 (1 there and beyond): the chip's measured points,
** interpolated linearly in log2(keys), below the first point the first
** point's value. 1 when the chip gives none. */
double hw_attention_seq_factor(const hw_model *m, double keys);
/* The keys per query of chip.attention_unmasked.s1024 ... s16384. */
#define HW_ATTN_FULL_POINTS 5
extern const int64_t HW_ATTN_FULL_KEYS[HW_ATTN_FULL_POINTS];

/* A fused attention kernel's rate under a full mask at `keys` keys a query
** as a fraction of its causal rate at 16,384: the chip's measured points,
** linear in log2(keys) between them, the end points' values past them; 0
** when the chip gives none (the causal table's rate then). */
double hw_attention_unmasked_factor(const hw_model *m, double keys);

/* A fused attention kernel's rate at head dim d over its rate at 128: the
** chip's measured points (head dims 64 and 256), linear in log2(d) between
** them and 1 at 128, the end points' values past them; 0 when the chip
** gives none (the caller's own rule then). */
double hw_attention_head_factor(const hw_model *m, double head_dim);
/* A grouped GEMM's rate at m tokens per group as a fraction of a large
** GEMM's (1 at 8,192 and more): the chip's measured points, interpolated
** linearly in log2(m) between them and up to 1 at 8,192; below the first
** point, the first point's value; the backward's own points
** (chip.grouped_gemm_bwd) for a backward product where the chip gives
** them. 1 when the chip gives none. */
double hw_grouped_gemm_factor(const hw_model *m, double tokens_per_group, bool backward);
/* The grouped-GEMM kernel's large-group rate over a plain GEMM's
** (chip.grouped_gemm_efficiency or _bwd_ over matmul_efficiency): 1 where
** the file gives none. */
double hw_grouped_gemm_ceiling(const hw_model *m, bool backward);
/* An expert GEMM of rows x n x k (rows: the dims neither contracted nor
** batched; k: the contracted one) at its rate over the grouped kernel's at
** the shape it was measured at (chip.grouped_gemm_at), read off the plain
** GEMM table (hw_matmul_shape_factor); 1 where the chip gives grouped
** points by tokens (grouped_gemm_eff or grouped_gemm_bwd_eff,
** hw_grouped_gemm_factor's) or lacks
** either the table or the measured shape. */
double hw_grouped_gemm_shape_factor(const hw_model *m, double rows, double n, double k);
/* The grouped kernel's rate on an expert k wide in and n wide out over its
** rate on aligned widths: chip.grouped_gemm_unaligned when k or n is not a
** multiple of the matrix unit's width (tile_n), else 1 (1 too when the
** chip gives no figure). */
double hw_grouped_gemm_width_factor(const hw_model *m, int64_t k, int64_t n);
/* A core-clocked rate (matrix, vector, transcendental) as the chip sustains
** it: rate x chip.sustained_clock_ratio (1 when absent or hand-built 0). */
double hw_clocked(const hw_chip *c, double rate);
/* The highest 16-bit matrix rate (bf16, else fp16): how chips are ranked. */
double hw_peak_16bit(const hw_model *m);

/* ---- output (hw_print.c) ---- */

void hw_print_show(const hw_model *m, FILE *out);
/* A JSON object with every field present, plus sources, cite, notes.
** Returns a malloc'd string the caller frees. */
char *hw_to_json(const hw_model *m);
/* One line summarising the fabrics, e.g. "NVSwitch 450 GB/s + IB NDR 50 GB/s". */
void hw_interconnect_summary(const hw_model *m, char *buf, size_t n);

#endif
