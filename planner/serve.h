/*
** serve.h -- how to serve a model: batch prediction, an online endpoint or
** on the device, chosen by rules kept as data (serve_rules), and for the
** chosen mode the hardware, precision, parallelism, batch and replicas,
** every candidate scored by sim/serve_step (the inference step).
**
** Online endpoints are sized with a queueing model over the simulated
** service time: requests arrive as a Poisson stream at qps; a replica
** serving `batch` sequences at once is `batch` servers (continuous
** batching: a finished sequence's slot takes the next request), so R
** replicas are c = R x batch servers of an M/M/c queue. The probability a
** request waits is Erlang C, and the wait's tail is exponential:
**   P(W > t) = C(c, a) exp(-(c mu - lambda) t)
** (Kleinrock 1975, Queueing Systems vol. 1, sec. 3.5; a = lambda / mu).
** The service time is the simulated one (deterministic in fact: M/M/c is
** conservative beside M/D/c). Assumptions and their sources: docs/serving.md.
*/
#ifndef TPUSIM_PLANNER_SERVE_H
#define TPUSIM_PLANNER_SERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/serve_step.h"

typedef enum { SERVE_BATCH, SERVE_ONLINE, SERVE_EDGE, SERVE_MODES } serve_mode;
extern const char *const serve_mode_names[]; /* "batch", "online", "edge" */

/* A serving rule: when it applies (the input that triggers it) and why the
** mode is right, as the report says it. Checked in order; the first that
** applies decides. */
typedef struct {
  serve_mode mode;
  const char *when;   /* "--offline", "--max-power", "--entities", "default" */
  const char *reason; /* printf format; see serve_reason */
} serve_rule;
extern const serve_rule serve_rules[];

typedef struct {
  double qps;            /* requests a second (online); 0: not given */
  /* the p99 target of the time to the first answer, queueing included: a
  ** generative model's time to first token (TTFT), another's whole
  ** forward; 0: none */
  double latency_p99_s;
  /* a second target, generative models: the time per output token under
  ** load (decode stretched by the interleaved prefills); 0: none */
  double tpot_max_s;
  double entities;       /* batch: predictions per window; 0: not batch */
  double batch_window_s; /* batch: the schedule's period */
  bool offline;          /* must run on the device, without a network */
  double max_power_w;    /* a power budget per device; 0: none */
  int64_t input_tokens, output_tokens;
  /* an encoder's sequence length a request (--input-tokens for an
  ** encoder); 0: the model file's */
  int64_t encoder_seq;
  /* the precision; NULL: int8 on the device, bf16 (fp16 on a chip
  ** without bf16) elsewhere, or with any_precision every one the chip runs */
  const serve_precision *prec;
  bool any_precision;
  int64_t tp;                  /* 0: the fewest chips that hold the model, and twice that */
  int64_t spec_k;
  double spec_accept;
  const model *draft;
} serve_req;

typedef struct {
  serve_mode mode;
  const hw_model *hw;
  const serve_precision *prec;
  int64_t tp, batch, replicas, chips;
  serve_result step;
  double p50_s, p99_s;   /* online: with queueing; edge: the step itself */
  double usd_per_hour;   /* online: the replicas' instances */
  double total_s, usd_total; /* batch: one replica's time for all entities; their cost */
  double power_w;        /* the chips' TDP */
  bool meets;            /* fits and meets every target */
  char why_not[200];     /* when !meets */
} serve_cand;

typedef struct {
  serve_mode mode;
  int rule;          /* the index in serve_rules that chose the mode */
  char reason[320];
  serve_cand *c;     /* best first: meeting ones by cost, then the rest */
  int n;
} serve_plan;

/* The rule that applies to q (its index in serve_rules). */
int serve_choose_rule(const serve_req *q, const hw_catalog *cat);

/* Whether hw is a device for on-device serving: its kind is an edge or
** phone part ("edge", "npu", "phone" when the catalog has such kinds), or
** its TDP is within max_power_w (> 0). */
bool serve_on_device(const hw_model *hw, double max_power_w);

/* Erlang C: the probability an arrival waits in an M/M/c queue with
** offered load a = lambda / mu (erlangs), c servers; 1 when a >= c. */
double serve_erlang_c(int64_t c, double a);
/* The q-quantile of the waiting time of that queue, service time s_s. */
double serve_wait_quantile(int64_t c, double lambda, double s_s, double q);

/* Plans serving m over the hardware hws (n of them). 0, or -1 with err
** (bad request); candidates that cannot run say why in why_not. */
int serve_plan_run(const model *m, const hw_model *const *hws, int n, const hw_catalog *cat,
                   const serve_req *q, serve_plan *out, char *err, size_t errn);
void serve_plan_free(serve_plan *p);

/* The online endpoint's candidates on hw in precision pr with tp chips a
** replica, one a batch (1, 2, 4, ... while it fits), each figured as the
** planner figures the batch it keeps: the step, the fewest replicas that
** meet q's targets at q->qps, p50/p99 (a batch no replica count serves:
** meets false, replicas 0, p99 NaN). At most max into pts; the count, or
** -1 with err (no --qps, or batch 1 does not fit). */
int serve_curve(const model *m, const hw_model *hw, const serve_req *q, const serve_precision *pr,
                int64_t tp, serve_cand *pts, int max, char *err, size_t errn);

#endif
