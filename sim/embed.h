/*
** embed.h -- where a data-parallel model's state lives, and what moving it
** costs: ZeRO stages over the data-parallel ranks, and a recommender's
** embedding tables replicated, sharded over the chips (TorchRec,
** TPUEmbedding; SparseCores on TPUs that have them) or on CPU
** parameter-server hosts (--embeddings, sim/plan.h). Used by the
** whole-step simulation of the families that train data-parallel
** (stepwhole.c); docs/hardware-choice.md states the rules with sources.
*/
#ifndef TPUSIM_EMBED_H
#define TPUSIM_EMBED_H

#include <stdbool.h>
#include <stdint.h>

#include "../hw_models/hw.h"
#include "plan.h"

/* A CPU parameter-server host: GCP n2-highmem-32, 32 vCPUs and 256 GB of
** memory (cloud.google.com/compute/docs/general-purpose-machines, N2
** high-memory: 8 GB a vCPU); egress 2 Gbit/s a vCPU up to 32 Gbit/s = 4e9
** B/s (cloud.google.com/compute/docs/network-bandwidth); price 32 vCPU x
** $0.031611 + 256 GB x $0.004237 = $2.0962 an hour on demand in
** us-central1 (cloud.google.com/compute/vm-instance-pricing, N2 predefined
** rates; UNVERIFIED: the rates as published, the same ones sim/coll.h's
** Reduction Server uses, not re-read from a stored copy). */
#define EMB_PS_HOST_DRAM_BYTES 256e9
#define EMB_PS_HOST_BW 4e9
#define EMB_PS_HOST_USD_PER_H 2.0962
/* The host's memory bandwidth for its own work on the tables (the rows
** gathered for each pull, the pushed gradients scatter-added and the rows
** and their optimizer state updated): its 16 cores' share of an Ice Lake
** socket (GCP N2 runs 3rd-generation Xeon Scalable; Intel's Ice Lake-SP:
** 8 channels of DDR4-3200 = 204.8 GB/s for up to 40 cores), 16/40 x 204.8
** = 81.92 GB/s, the way hw_models/cpu-m7i-2xl.json derives a VM's share.
** UNVERIFIED: the socket figures as Intel publishes them, not re-read from
** a stored copy. 20x the host's NIC (EMB_PS_HOST_BW), so the network binds. */
#define EMB_PS_HOST_MEM_BW 8.192e10

/* One chip's share of a step's state, from the whole graph's. */
typedef struct {
  double weights, gradients, optimizer, activations, temporary;
} emb_state;

/* What the model holds (footprint of its one-chip graph, per micro-batch)
** and its tables. */
typedef struct {
  double weights, gradients, optimizer, saved, largest_param;
  plan_emb_tables t; /* per micro-batch of one chip */
} emb_model;

/* The placement's costs per step on one chip. */
typedef struct {
  emb_state mem;
  double dense_grad_bytes;   /* what the data-parallel gradient sync moves */
  double update_fraction;    /* of the parameters the chip's optimizer updates */
  double exchange_s;         /* looked-up vectors moved, per micro-batch (a2a or PS) */
  bool exchange_overlapped;  /* on SparseCores beside the TensorCores' compute */
  int64_t ps_hosts;          /* parameter-server hosts priced (ps) */
  double ps_host_mem_s;      /* the hosts' DRAM work a micro-batch (a bound beside the NICs) */
  double ps_usd_per_hour;
} emb_cost;

/* The memory of one chip under p (no time): state by ZeRO stage and
** embedding placement. */
void emb_memory(const emb_model *em, const hw_model *hw, const plan *p, emb_state *out);
/* Memory and exchange times under p; formula: closed-form collectives.
** Returns 0, or -1 with err (a collective the network cannot run). */
int emb_costs(const emb_model *em, const hw_model *hw, const plan *p, bool formula, emb_cost *out,
              char *err, size_t errn);
/* The parameter-server hosts for state_bytes of tables and their optimizer
** state, feeding `chips` workers of scale-out bandwidth bw_chip: enough
** DRAM, and enough NIC to match the workers' (fewer and they bind). */
int64_t emb_ps_hosts(double state_bytes, int64_t chips, double bw_chip);

#endif
