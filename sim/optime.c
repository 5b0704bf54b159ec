/*
** optime.c -- time of one op on one chip: a roofline over the hardware model.
**
** Three paths, chosen by the op's kind:
**   matrix unit  dot, convolution (as an implicit GEMM), matmul-like custom
**                calls: padded FLOPs x wave quantization / (peak x efficiency),
**                or, where the chip gives a measured table by shape
**                (chip.matmul_shape), padded FLOPs / (peak x efficiency x
**                the table's factor at the shape)
**   vector unit  everything else that computes or moves data: FLOPs and
**                transcendentals at the vector rates
**   nothing      collectives (the network model times them), parameters,
**                constants, and ops that touch no memory (a reshape)
** and memory time = HBM bytes / (bandwidth x efficiency) for the first two.
** docs/machine.md ("Time on a chip") gives each formula and its source.
*/
#include "optime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Custom-call targets that run on the matrix unit (their declared FLOPs are
** matmul FLOPs): the training step's convolution gradients and cuDNN's
** fused attention / convolution, cuBLAS GEMMs as they appear in GPU HLO. */
static const char *const MATRIX_TARGETS[] = {
    "conv-backward-input", "conv-backward-filter", "__cudnn$fmha",
    "__cudnn$conv",        "__cublas$gemm",        "__cublas$lt$matmul",
    "dsa-indexer", /* DeepSeek sparse attention's scores: an MQA-shaped GEMM (transformer.c) */
};

/* The schema's matrix rate for a graph dtype; -1 when the schema has none
** (s4, s32, pred, ...). f8 covers both e4m3 and e5m2. */
static int matrix_dtype(graph_dtype dt) {
  switch (dt) {
  case GDT_BF16:
    return HW_BF16;
  case GDT_F16:
    return HW_FP16;
  case GDT_F8:
    return HW_FP8;
  case GDT_S8:
  case GDT_U8:
    return HW_INT8;
  case GDT_F32:
    return HW_FP32;
  case GDT_F64:
    return HW_FP64;
  default:
    return -1;
  }
}

double optime_peak_flops(const hw_model *hw, graph_dtype dt) {
  int k = matrix_dtype(dt);
  return hw_peak_flops(hw, k >= 0 ? (hw_dtype)k : HW_BF16);
}

/* A stored figure, or what the timing model assumes without one. hw_load
** fills these in; the guards keep a hand-built hw_model usable. */
static double or_one(double x) { return x > 0 ? x : 1.0; }

/* The core-clocked rates as the chip sustains them (hw_clocked: a part
** below its rated power runs its cores slower); the peaks the efficiency
** figures report against stay the nominal ones. */
static double transcendental_rate(const hw_chip *c) {
  return hw_clocked(c, c->transcendentals_per_s > 0 ? c->transcendentals_per_s : c->vector_flops_per_s);
}

static double vector_rate(const hw_chip *c) { return hw_clocked(c, c->vector_flops_per_s); }

static double matrix_rate(const hw_chip *c, double peak) {
  return hw_clocked(c, peak * or_one(c->matmul_efficiency));
}

static double memory_time(const hw_chip *c, double bytes) {
  return bytes / (c->hbm_bw_bytes_per_s * or_one(c->hbm_efficiency));
}

/* The roofline: time, bound and achieved efficiency from the parts. */
static void finish(const hw_chip *c, double peak, optime_result *r) {
  r->overhead_s = c->op_overhead_s > 0 ? c->op_overhead_s : 0;
  double roof = fmax(r->compute_s, r->memory_s);
  /* a measured kernel time (chip.matmul_shape) holds the kernel's fixed
  ** cost already; the traffic's time does not */
  r->time_s = r->shape_table ? fmax(r->compute_s, r->memory_s + r->overhead_s) : roof + r->overhead_s;
  r->bound = r->compute_s >= r->memory_s ? "compute" : "memory";
  if (r->overhead_s > roof) r->bound = "overhead";
  r->efficiency = r->time_s > 0 && peak > 0 ? r->flops / (r->time_s * peak) : 0;
}

/* Who is asking, for error messages: "dot l0/attn/dot f64". */
typedef struct {
  const char *kind, *name;
} who;

/* The matrix rate for dt, or 0 with the error written. An f32 product on a
** chip that lists no fp32 rate but a bf16 one (a TPU) runs as XLA's DEFAULT
** precision does there: one bf16 pass. */
static double matrix_peak(const hw_model *hw, graph_dtype dt, const who *w, char *err,
                          size_t errn) {
  int h = matrix_dtype(dt);
  if (h < 0) {
    snprintf(err, errn,
             "%s %s %s: %s has no %s matrix unit (tpusim times bf16, f16, f8, "
             "s8/u8, f32 and f64 products)",
             w->kind, w->name, graph_dtype_name(dt), hw->name, graph_dtype_name(dt));
    return 0;
  }
  double p = hw_peak_flops(hw, (hw_dtype)h);
  if (p <= 0 && h == HW_FP32) p = hw_peak_flops(hw, HW_BF16);
  if (p <= 0)
    snprintf(err, errn, "%s %s %s: %s has no %s unit", w->kind, w->name, graph_dtype_name(dt),
             hw->name, hw_dtype_name((hw_dtype)h));
  return p;
}

static double round_up(int64_t x, int64_t tile) {
  if (tile < 1) tile = 1;
  return (double)((x + tile - 1) / tile) * (double)tile;
}

/* batch x [m x k] x [k x n] on the matrix unit (NVIDIA, Matrix Multiplication
** Background User's Guide: tile and wave quantization). M, N and K are padded
** to the tile; the output tiles are spread over matrix_unit.cores in waves,
** and a partial last wave costs a full one. An output of fewer tiles than
** cores is split along K into s parts (cuBLAS split-K, CUTLASS stream-K) so
** the cores are not left idle; the partial-sum reduction is not charged.
** A chip with a measured table by shape (chip.matmul_shape) takes the
** table's rate instead, and the wave model's time stays in wave_s. */
static void matrix_time(const hw_chip *c, int64_t batch, int64_t m, int64_t n, int64_t k,
                        double peak, graph_dtype dt, optime_result *r) {
  int64_t tm = c->tile_m > 0 ? c->tile_m : 1, tn = c->tile_n > 0 ? c->tile_n : 1,
          tk = c->tile_k > 0 ? c->tile_k : 1;
  double units = c->mu_cores > 0 ? (double)c->mu_cores : 1;
  double kp = round_up(k, tk);
  double tiles = (double)batch * (round_up(m, tm) / (double)tm) * (round_up(n, tn) / (double)tn);
  double split = 1;
  if (tiles > 0 && tiles < units) split = fmax(1, fmin(floor(units / tiles), kp / (double)tk));
  double waves = ceil(tiles * split / units);
  r->padded_flops = 2.0 * tiles * (double)tm * (double)tn * kp;
  /* every core runs `waves` tile-slices of 2 tm tn kp / split FLOPs */
  r->wave_s = waves * units * (2.0 * (double)tm * (double)tn * kp / split) / matrix_rate(c, peak);
  r->compute_s = r->wave_s;
  /* a measured table (chip.matmul_shape) holds the library's own tiling,
  ** waves, split-K and each kernel's fill and drain at its shapes: the
  ** padded FLOPs at the best rate times the table's factor for this shape.
  ** The table is the tensor cores' (its bf16 rows): an fp32 or fp64
  ** product keeps the wave model */
  int h = matrix_dtype(dt);
  r->shape_table = c->has_matmul_shape && h != HW_FP32 && h != HW_FP64;
  if (r->shape_table) {
    /* read at the padded shape (the work done), with a batch folded into
    ** the rows, and so are output columns past the grid's widest: what
    ** sets the rate is the count of output tiles, as many either way */
    double rows = (double)batch * round_up(m, tm), cols = round_up(n, tn);
    double widest = (double)HW_MM_NKS[HW_MM_NK - 1];
    if (cols > widest) rows *= cols / widest, cols = widest;
    r->compute_s = r->padded_flops / (matrix_rate(c, peak) * hw_matmul_shape_factor(c, rows, cols, kp));
  }
  r->memory_s = memory_time(c, r->bytes);
  finish(c, peak, r);
}

/* FLOPs and transcendentals on the vector unit. Nothing to do and nothing
** to move (a reshape, a parameter) launches no kernel and costs nothing. */
static void vector_time(const hw_chip *c, double trans, optime_result *r) {
  r->padded_flops = r->flops;
  if (r->flops <= 0 && trans <= 0 && r->bytes <= 0) {
    r->bound = "none";
    return;
  }
  r->compute_s = r->flops / vector_rate(c) + trans / transcendental_rate(c);
  r->memory_s = memory_time(c, r->bytes);
  finish(c, c->vector_flops_per_s, r);
}

static int64_t prod_dims(const graph_shape *s, const graph_dims *d) {
  int64_t p = 1;
  for (int i = 0; i < d->n; i++)
    p *= s->dim[d->d[i]];
  return p;
}

/* Product of the dims of s that are in neither list: the free M or N. */
static int64_t free_dims(const graph_shape *s, const graph_dims *a, const graph_dims *b) {
  int64_t p = 1;
  for (int i = 0; i < s->rank; i++) {
    int used = 0;
    for (int j = 0; j < a->n; j++)
      used |= a->d[j] == i;
    for (int j = 0; j < b->n; j++)
      used |= b->d[j] == i;
    if (!used) p *= s->dim[i];
  }
  return p;
}

static int is_matrix_target(const char *name) {
  const char *slash = strrchr(name, '/');
  const char *target = slash ? slash + 1 : name;
  for (size_t i = 0; i < sizeof MATRIX_TARGETS / sizeof *MATRIX_TARGETS; i++)
    if (strncmp(target, MATRIX_TARGETS[i], strlen(MATRIX_TARGETS[i])) == 0) return 1;
  return 0;
}

/* Whether op id runs on the matrix unit: a dot, a convolution, or a
** custom-call of a matrix target with declared FLOPs; optime_op and
** optime_kernel time it there. */
static bool on_matrix_unit(const graph *g, int id) {
  const graph_op *op = graph_get(g, id);
  if (op->kind == GOP_DOT || op->kind == GOP_CONV) return true;
  if (op->kind != GOP_CUSTOM || !is_matrix_target(op->name)) return false;
  graph_cost c = graph_op_cost(g, id);
  return graph_cost_flops(&c) > 0;
}

int optime_op(const hw_model *hw, const graph *g, int id, optime_result *r, char *err,
              size_t errn) {
  if (!hw || !g || !r) {
    snprintf(err, errn, "optime: no hardware, graph or result given");
    return -1;
  }
  memset(r, 0, sizeof *r);
  r->bound = "none";
  if (id < 0 || id >= graph_count(g)) {
    snprintf(err, errn, "optime: op id %d out of range (the graph has %d ops)", id, graph_count(g));
    return -1;
  }
  const hw_chip *c = &hw->chip;
  const graph_op *op = graph_get(g, id);
  const graph_shape *s0 = op->n_in ? &graph_get(g, op->in[0])->out : &op->out;
  graph_cost cost = graph_op_cost(g, id);
  who w = {graph_op_name(op->kind), op->name};
  r->flops = graph_cost_flops(&cost);
  r->bytes = cost.bytes_read + cost.bytes_written;

  if (graph_op_is_collective(op->kind)) { /* sim/coll times these on the network */
    r->flops = 0;
    r->bound = "network";
    return 0;
  }
  if (on_matrix_unit(g, id)) {
    double peak = matrix_peak(hw, s0->dtype, &w, err, errn);
    if (peak <= 0) return -1;
    if (op->kind == GOP_DOT) {
      const graph_shape *s1 = &graph_get(g, op->in[1])->out;
      int64_t batch = prod_dims(s0, &op->lhs_batch);
      int64_t k = prod_dims(s0, &op->lhs_contract);
      int64_t m = free_dims(s0, &op->lhs_batch, &op->lhs_contract);
      int64_t n = free_dims(s1, &op->rhs_batch, &op->rhs_contract);
      matrix_time(c, batch, m, n, k, peak, s0->dtype, r);
    } else if (op->kind == GOP_CONV) {
      /* implicit GEMM per group: M = output pixels x batch, N = C_out / G,
      ** K = window x C_in / G (the kernel's input-feature dim) */
      const graph_conv_attrs *a = &op->conv;
      const graph_shape *sk = &graph_get(g, op->in[1])->out;
      int64_t groups = (a->feature_groups > 1 ? a->feature_groups : 1) *
                       (a->batch_groups > 1 ? a->batch_groups : 1);
      int64_t cout = op->out.dim[a->out_feature];
      if (cout < 1 || cout % groups != 0) groups = 1;
      int64_t k = sk->dim[a->k_in];
      for (int i = 0; i < a->spatial; i++)
        k *= sk->dim[a->k_spatial[i]];
      int64_t m = cout > 0 ? graph_elements(&op->out) / cout : 0;
      matrix_time(c, groups, m, cout / groups, k, peak, s0->dtype, r);
      /* a grouped convolution's per-group GEMM can be far narrower than
      ** the matrix unit's tile (depthwise: one output feature and a
      ** window's K), which the padding above prices at hundreds of times
      ** its FLOPs; libraries run such a convolution directly on the vector
      ** unit (cuDNN's depthwise kernels, causal_conv1d, XLA's depthwise
      ** emitter) when that is faster: the lesser time. A chip whose vector
      ** figure is its array's own peak (edge-tpu, phone-npu: no vector unit
      ** apart from the array) has no such path and keeps the GEMM. */
      double direct_s = r->flops / vector_rate(c);
      if (groups > 1 && c->vector_flops_per_s < peak && direct_s < r->compute_s) {
        r->compute_s = direct_s;
        r->padded_flops = r->flops;
        finish(c, peak, r);
      }
    } else { /* shape unknown: the declared FLOPs, unpadded */
      r->padded_flops = r->flops;
      r->compute_s = r->flops / matrix_rate(c, peak) + cost.transcendentals / transcendental_rate(c);
      r->memory_s = memory_time(c, r->bytes);
      finish(c, peak, r);
    }
    return 0;
  }
  if (cost.flops[GDT_F64] > 0 && hw_peak_flops(hw, HW_FP64) <= 0) {
    snprintf(err, errn, "%s %s f64: %s has no fp64 unit", w.kind, w.name, hw->name);
    return -1;
  }
  vector_time(c, cost.transcendentals, r);
  return 0;
}

int optime_kernel(const hw_model *hw, const graph *g, const fuse_plan *p, int k,
                  const graph_cost *kc, optime_result *r, char *err, size_t errn) {
  if (!hw || !g || !p || !r) {
    snprintf(err, errn, "optime: no hardware, graph, fusion plan or result given");
    return -1;
  }
  memset(r, 0, sizeof *r);
  r->bound = "none";
  if (k < 0 || k >= p->n_groups || p->size[k] == 0) return 0;
  const hw_chip *c = &hw->chip;
  const graph_op *root = graph_get(g, p->root[k]);
  if (graph_op_is_collective(root->kind)) {
    r->bound = "network";
    return 0;
  }
  graph_cost cost = kc ? *kc : fuse_group_cost(p, g, k);
  double matrix_s = 0, matrix_wave_s = 0, matrix_flops = 0, padded = 0, peak = 0;
  for (int i = p->first[k]; i <= p->root[k]; i++) {
    if (p->group_of[i] != k) continue;
    if (!on_matrix_unit(g, i)) continue;
    const graph_op *op = graph_get(g, i);
    optime_result m;
    if (optime_op(hw, g, i, &m, err, errn) != 0) return -1;
    matrix_s += m.compute_s;
    matrix_wave_s += m.wave_s > 0 ? m.wave_s : m.compute_s;
    r->shape_table |= m.shape_table;
    matrix_flops += m.flops;
    padded += m.padded_flops;
    if (peak == 0 && op->n_in > 0) peak = optime_peak_flops(hw, graph_get(g, op->in[0])->out.dtype);
  }
  r->flops = graph_cost_flops(&cost);
  r->bytes = cost.bytes_read + cost.bytes_written;
  double vec_flops = r->flops - matrix_flops;
  if (vec_flops < 0) vec_flops = 0;
  if (cost.flops[GDT_F64] > 0 && matrix_flops == 0 && hw_peak_flops(hw, HW_FP64) <= 0) {
    snprintf(err, errn, "%s %s f64: %s has no fp64 unit", graph_op_name(root->kind),
             root->name ? root->name : "", hw->name);
    return -1;
  }
  if (matrix_flops == 0 && r->flops <= 0 && cost.transcendentals <= 0 && r->bytes <= 0) return 0;
  r->padded_flops = padded + vec_flops;
  double vec_s = vec_flops / vector_rate(c) + cost.transcendentals / transcendental_rate(c);
  r->compute_s = matrix_s + vec_s;
  r->wave_s = matrix_wave_s + vec_s;
  r->memory_s = memory_time(c, r->bytes);
  finish(c, peak > 0 ? peak : c->vector_flops_per_s, r);
  return 0;
}

int optime_matmul(const hw_model *hw, int64_t batch, int64_t m, int64_t n, int64_t k,
                  graph_dtype dt, optime_result *r, char *err, size_t errn) {
  if (!hw || !r) {
    snprintf(err, errn, "optime: no hardware or result given");
    return -1;
  }
  memset(r, 0, sizeof *r);
  r->bound = "none";
  char shape[96]; /* "batch x m x n x k", for messages */
  snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)batch, (long long)m, (long long)n,
           (long long)k);
  who w = {"matmul", shape};
  if (batch < 1 || m < 1 || n < 1 || k < 1) {
    snprintf(err, errn, "matmul %s: batch, m, n and k must be positive", shape);
    return -1;
  }
  if (dt < 0 || dt >= GDT_COUNT) {
    snprintf(err, errn, "matmul %s: unknown dtype %d", shape, (int)dt);
    return -1;
  }
  double peak = matrix_peak(hw, dt, &w, err, errn);
  if (peak <= 0) return -1;
  double b = (double)batch, elem = graph_dtype_bits(dt) / 8.0;
  r->flops = 2.0 * b * (double)m * (double)n * (double)k;
  r->bytes = b * ((double)m * (double)k + (double)k * (double)n + (double)m * (double)n) * elem;
  matrix_time(&hw->chip, batch, m, n, k, peak, dt, r);
  return 0;
}
