/*
** input.h -- the input pipeline: how the host feeds each training step.
**
** One host (all hosts are alike: each feeds its own chips) reads the
** samples of step k from storage (one GET per small file, or byte-range GETs
** into large record shards), decodes/preprocesses them on its cores and
** copies the batch to its chips; the chips run step k once step k-1 is done
** and batch k has arrived. The time they wait for data is the input stall.
** Simulated on the event engine (sim/engine.h); input_closed_form gives the
** steady state without simulating. See docs/input.md for the model, the
** closed form and the sources of the defaults.
*/
#ifndef TPUSIM_INPUT_H
#define TPUSIM_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../workloads/model.h"

struct hw_model;

typedef enum {
  INPUT_TOKENS, /* pre-tokenized text: 2048 int32 tokens per sample */
  INPUT_IMAGES  /* ImageNet-style JPEGs decoded to 224x224x3 uint8 */
} input_kind;

/* Every figure is per host. */
typedef struct {
  double bytes_per_sample;            /* B stored per sample (a JPEG, a token record) */
  double xfer_bytes_per_sample;       /* B copied to the chips per sample after decode */
  int64_t samples_per_step;           /* samples this host feeds per training step */
  double object_bytes;                /* B per object on storage; == bytes_per_sample:
                                         one file per sample; larger: record shards */
  double read_bytes;                  /* B per byte-range GET into a shard (0: the whole
                                         object); a GET carries whole samples */
  double object_latency_s;            /* first-byte latency of one GET */
  double storage_bw_bytes_per_s;      /* this host's aggregate storage read bandwidth */
  int reads_in_flight;                /* concurrent GETs (interleave / threads) */
  double decode_samples_per_s_per_core; /* decode + preprocess rate of one host core */
  int decode_cores;                   /* host cores doing it */
  double host_link_bw_bytes_per_s;    /* host -> this host's chips, all of them */
  double host_link_latency_s;         /* fixed cost of one batch copy */
  int prefetch_steps;                 /* batches produced ahead: 0 = none (batch k+1
                                         starts when step k ends); d >= 1: batch k+d
                                         starts when step k starts */
  bool one_host;                      /* one remote VM feeds every chip (TPU Node), not
                                         one host per node (input_per_host) */
} input_cfg;

/* The remote input host of a TPU Node (--input-host remote): the user's
** Compute Engine VM runs the input pipeline and sends the batches to the
** TPU hosts over the network. Taken as an n1-standard-16 -- the machine
** type is the user's choice, this one an assumption: 16 vCPUs = 8 physical
** cores (2 vCPUs a core), egress 2 Gbit/s a vCPU up to 32 Gbit/s = 4e9 B/s
** (cloud.google.com/compute/docs/network-bandwidth; the TPU Node
** architecture, cloud.google.com/tpu/docs/system-architecture-tpu-vm, "TPU
** Node": the user VM talks to the TPU host over gRPC). */
#define INPUT_REMOTE_VM_CORES 8
#define INPUT_REMOTE_VM_BW 4e9

/* Documented defaults (docs/input.md): record shards of 128 MiB read in
** 16 MiB ranges, 16 reads in flight, prefetch 2, a TPU v5p host's PCIe. */
void input_defaults(input_cfg *c, input_kind kind);

/* The host-to-chip hop from a hardware model: a local host (TPU VM, GPU
** server) copies over PCIe, chip.host_link_bw_bytes_per_s x chips_per_node;
** a remote host (TPU Node) is one VM for the whole slice: it decodes every
** sample on its INPUT_REMOTE_VM_CORES and sends them over its NIC, the
** lesser of INPUT_REMOTE_VM_BW and a node's scale-out bandwidth, with the
** scale-out latency. Returns 0, or -1 with a message. */
int input_hop_from_hw(input_cfg *c, const struct hw_model *m, bool remote, char *err,
                      size_t errn);

/* One host's share of a step: every host feeds its own chips, so the
** global batch splits over chips / chips_per_node hosts (at least one, and
** at least a sample each); a remote VM (one_host) feeds all of it. */
void input_per_host(input_cfg *c, int64_t chips, int64_t chips_per_node, int64_t global_batch);

/* Which part sets the steady-state step time. */
#define INPUT_BOUND_COMPUTE "compute"
#define INPUT_BOUND_STORAGE_LATENCY "storage-latency"
#define INPUT_BOUND_STORAGE_BW "storage-bandwidth"
#define INPUT_BOUND_DECODE "decode"
#define INPUT_BOUND_HOST_LINK "host-link"
#define INPUT_BOUND_PREFETCH "prefetch" /* the batch latency is not hidden: deepen prefetch */

typedef struct {
  /* steady state: the second half of the steps */
  double step_s;           /* time per step */
  double stall_s_per_step; /* chips waiting for data, per step */
  double data_s_per_step;  /* a batch's latency: production start to arrival on the chips */
  const char *bound;       /* INPUT_BOUND_* (static string) */
  /* the whole run */
  int steps;
  double total_s;       /* end of the last step */
  double total_stall_s; /* all waits, the first batch included */
  double first_batch_s; /* arrival of batch 0 */
  int64_t requests;     /* storage GETs issued */
  int64_t events;       /* engine events */
} input_result;

/* Simulates `steps` training steps of compute_s_per_step each, fed by c.
** Returns 0, or -1 with a message naming the bad field. */
int input_simulate(const input_cfg *c, double compute_s_per_step, int steps,
                   input_result *out, char *err, size_t errn);

/* The steady state in closed form:
**   per-step stage times at full throughput
**     storage  = max(n*r/B, n*(L + r/B)/P)   n GETs of r bytes per step
**     decode   = S / (cores * rate)
**     link     = S*x/link_bw + link_latency
**   D = latency of one batch through an idle pipeline (approximate)
**   prefetch 0:  step = compute + D
**   prefetch d:  step = max(compute, storage, decode, link, D/d)
** When one GET holds m > S samples, only S/m of the batches wait for a GET:
**   prefetch 0:  step = compute + (S/m) D + (1 - S/m) link
**   prefetch d:  the D/d term becomes compute + (S/m) max(0, D - d compute) */
typedef struct {
  double storage_s, decode_s, link_s; /* per step at full throughput */
  double latency_s;                   /* D */
  double requests_per_step;           /* n */
  double step_s, stall_s_per_step;
  const char *bound;
  char formula[512]; /* the expression with its numbers, for --explain */
} input_closed;

int input_closed_form(const input_cfg *c, double compute_s_per_step, input_closed *out,
                      char *err, size_t errn);

/* What a run reads and how: simulate's and plan's --input, --storage,
** --input-host and --prefetch. All zero: the defaults. */
typedef struct {
  int kind;          /* 0: the model's own (a CNN's images, the rest token
                        records); else 1 + input_kind */
  bool files;        /* one small file a sample, not record shards */
  bool remote;       /* one remote input VM for the slice (a TPU Node) */
  bool has_prefetch; /* else input_defaults' */
  int prefetch;
} input_choice;

/* The host input pipeline of a run of m on hw, one truth for simulate,
** plan and plot: input_defaults of its kind, the host's cores less one a
** chip (each chip's training process: PyTorch, JAX) decoding, seq int32
** tokens a sample, and the host-to-chip hop (input_hop_from_hw). ch NULL:
** the defaults. Returns 0; 1 when the chip reads its host's memory itself
** (a CPU: no input pipeline to simulate); -1 with a message. */
int input_for_run(input_cfg *in, const struct hw_model *hw, const model *m,
                  const input_choice *ch, int64_t seq, char *err, size_t errn);

/* The stall a step of a host fed by c (its share: input_per_host) waits in
** the steady state, computing compute_s a step: simulated over 40 steps,
** fewer where a host's batch is huge (a simulation holds at most 50 M
** samples), and in closed form where fewer than 4 steps would fit. *steps:
** the steps simulated (-1: the closed form). Returns 0, or -1 with a
** message. */
int input_run_stall(const input_cfg *c, double compute_s, double *stall_s, int *steps, char *err,
                    size_t errn);

/* The steady-state stall a step of a run on `chips` chips with a global
** batch of gbs samples (input_per_host), computing compute_s a step:
** input_closed_form's, without its formula (what the planner's fast path
** adds to each plan it scores). Returns 0, or -1 with a message. */
int input_stall_closed(const input_cfg *c, int64_t chips, int64_t chips_per_node, int64_t gbs,
                       double compute_s, double *stall_s, char *err, size_t errn);

#endif
