/*
** embed.c -- see embed.h.
**
** ZeRO (Rajbhandari et al. 2020) shards the optimizer state (stage 1), the
** gradients (2) and the weights (3) over the data-parallel ranks; stage 3
** (FSDP) gathers each unit's weights when it runs and frees them after, so
** one unit -- here the largest parameter -- is whole at a time.
**
** Embedding tables (Naumov et al. 2019; TorchRec, Ivchenko et al. 2022,
** "TorchRec: a PyTorch Domain Library for Recommendation Systems"):
**   replicated  every chip holds every table; the backward's gradient is a
**               dense table-sized buffer all-reduced with the rest (plain
**               DDP with nn.EmbeddingBag(sparse=False))
**   sharded     row-wise over the n chips: a chip holds 1/n of the rows and
**               their optimizer state; the forward sends the indices to the
**               rows' owners and the pooled vectors back (two all-to-alls),
**               the backward the pooled gradients (one); the update is
**               fused into the backward and touches only the looked-up rows
**               (FBGEMM's fused optimizer), so no table-sized gradient. On
**               a TPU with SparseCores, TPUEmbedding runs the lookups, the
**               exchange and the update on them, overlapped with the
**               TensorCores' dense layers (pipeline_execution_with_tensor_core,
**               tf.tpu.experimental.embedding.TPUEmbeddingV2 docs).
**   ps          the tables and their optimizer state on CPU hosts' DRAM
**               (TensorFlow's ParameterServerStrategy): each chip pulls its
**               micro-batch's looked-up rows over its host's NIC in the
**               forward and pushes their gradients back in the backward;
**               the hosts apply the sparse update. Their DRAM work (the
**               gathers, the gradients read, the rows and optimizer state
**               rewritten) is a bound beside the NICs: a host's memory
**               is ~20x its NIC, so the network binds.
*/
#include "embed.h"

#include <math.h>

#include "../base/strutil.h"
#include "coll.h"

static double pos(double x) { return x > 0 ? x : 0; }

/* The tables' share of the optimizer state: state is kept per parameter
** (SGD none, Adagrad one, Adam two), so in proportion to their bytes. */
static double table_opt(const emb_model *em) {
  return em->weights > 0 ? em->optimizer * em->t.bytes / em->weights : 0;
}

void emb_memory(const emb_model *em, const hw_model *hw, const plan *p, emb_state *out) {
  (void)hw;
  double n = (double)(p->dp > 0 ? p->dp : 1);
  double zw = p->zero >= 3 ? n : 1, zg = p->zero >= 2 ? n : 1, zo = p->zero >= 1 ? n : 1;
  bool placed = p->embeddings != PLAN_EMB_REPLICATED && em->t.tables > 0;
  double E = placed ? em->t.bytes : 0, Eo = placed ? table_opt(em) : 0;
  /* trainable tables have a gradient of their own size in the graph */
  double Eg = placed && em->gradients >= E ? E : 0;
  double wd = pos(em->weights - E), gd = pos(em->gradients - Eg), od = pos(em->optimizer - Eo);
  *out = (emb_state){.weights = wd / zw, .gradients = gd / zg, .optimizer = od / zo,
                     .activations = em->saved};
  /* FSDP: one unit gathered whole while it runs */
  if (p->zero >= 3 && n > 1) out->temporary = fmin(em->largest_param, wd);
  if (p->embeddings == PLAN_EMB_SHARDED && placed) {
    out->weights += E / n;
    out->optimizer += Eo / n;
    /* the looked-up rows' gradients (the fused update's input), and the
    ** all-to-all's send and receive buffers of pooled vectors */
    out->gradients += em->t.rows_bytes;
    out->temporary += 2 * em->t.pooled_bytes;
  } else if (p->embeddings == PLAN_EMB_PS && placed) {
    /* the pulled rows, and their gradients before the push */
    out->gradients += em->t.rows_bytes;
    out->temporary += em->t.rows_bytes;
  }
}

int64_t emb_ps_hosts(double state_bytes, int64_t chips, double bw_chip) {
  double mem = ceil(state_bytes / EMB_PS_HOST_DRAM_BYTES);
  double nic = ceil((double)chips * bw_chip / EMB_PS_HOST_BW);
  double k = fmax(1, fmax(mem, nic));
  return k < 1e9 ? (int64_t)k : 1000000000;
}

int emb_costs(const emb_model *em, const hw_model *hw, const plan *p, bool formula, emb_cost *out,
              char *err, size_t errn) {
  *out = (emb_cost){0};
  emb_memory(em, hw, p, &out->mem);
  int64_t n = p->dp > 0 ? p->dp : 1;
  double zo = p->zero >= 1 ? (double)n : 1;
  bool placed = p->embeddings != PLAN_EMB_REPLICATED && em->t.tables > 0;
  double E = placed ? em->t.bytes : 0;
  double Eg = placed && em->gradients >= E ? E : 0;
  out->dense_grad_bytes = pos(em->gradients - Eg);
  double W = em->weights > 0 ? em->weights : 1;
  double M = (double)(plan_microbatches(p) > 0 ? plan_microbatches(p) : 1);
  out->update_fraction = pos(em->weights - E) / zo / W;
  if (p->embeddings == PLAN_EMB_SHARDED && placed) {
    /* the rows a step looks up on this chip's shard, at most the shard */
    out->update_fraction += fmin(E / (double)n, em->t.rows_bytes * M) / W;
    if (n > 1) {
      double fwd = coll_time_s(hw, n, 0, COLL_ALL_TO_ALL, em->t.pooled_bytes + em->t.index_bytes,
                               p->slices, 0, COLL_AUTO, formula, err, errn);
      double bwd = fwd < 0 ? -1 : coll_time_s(hw, n, 0, COLL_ALL_TO_ALL, em->t.pooled_bytes,
                                              p->slices, 0, COLL_AUTO, formula, err, errn);
      if (fwd < 0 || bwd < 0) return -1;
      out->exchange_s = fwd + bwd;
    }
    out->exchange_overlapped = hw->chip.sparse_cores > 0;
  } else if (p->embeddings == PLAN_EMB_PS && placed) {
    double bw = hw->scale_out.bw_per_chip_bytes_per_s;
    if (!(bw > 0))
      return str_errf(err, errn, "--embeddings ps: %s has no scale-out network to reach "
                      "parameter-server hosts", hw->name);
    out->ps_hosts = emb_ps_hosts(E + table_opt(em), n, bw);
    out->ps_usd_per_hour = (double)out->ps_hosts * EMB_PS_HOST_USD_PER_H;
    /* each direction bound by the worker's NIC, the hosts' NICs together,
    ** or the hosts' own DRAM work: in the pull every worker's rows
    ** gathered (read once); in the push the gradients read, and each row
    ** with its optimizer state read and written back (the sparse update) */
    double k = (double)out->ps_hosts, all = em->t.rows_bytes * (double)n;
    double state = E > 0 ? table_opt(em) / E : 0; /* optimizer bytes per table byte */
    double pull_mem = all / (k * EMB_PS_HOST_MEM_BW);
    double push_mem = all * (1 + 2 * (1 + state)) / (k * EMB_PS_HOST_MEM_BW);
    out->ps_host_mem_s = pull_mem + push_mem;
    double nic = fmax(em->t.rows_bytes / bw, all / (k * EMB_PS_HOST_BW));
    out->exchange_s = fmax(nic, pull_mem) + fmax(nic, push_mem) + em->t.index_bytes / bw +
                      2 * hw->scale_out.latency_s;
  }
  return 0;
}
