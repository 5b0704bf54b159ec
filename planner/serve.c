/*
** serve.c -- see serve.h.
*/
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../base/units.h"

const char *const serve_mode_names[] = {"batch", "online", "edge", NULL};

/* The rules, in the order they are checked. Each reason is completed by
** serve_choose's caller with the request's figures (format_reason). */
const serve_rule serve_rules[] = {
    {SERVE_EDGE, "--offline",
     "must work offline on the device: the model runs on the device's own chip, quantized to "
     "int8, as on-device runtimes ship it (TensorFlow Lite full-integer quantization)"},
    {SERVE_EDGE, "--max-power",
     "a power budget of %.3g W is below every server chip in the catalog (the lowest draws "
     "%.3g W): the model runs on the device, quantized to int8"},
    {SERVE_BATCH, "--entities",
     "features are known ahead (%.3g entities every %s): precompute in batch and serve from a "
     "key-value lookup"},
    {SERVE_ONLINE, "default",
     "requests arrive at %.3g/s and each needs an answer within %s at p99: an online endpoint, "
     "the cheapest replicas that meet it"},
    {SERVE_MODES, NULL, NULL},
};

bool serve_on_device(const hw_model *hw, double max_power_w) {
  const char *k = hw_kind_name(hw->kind);
  bool part = strcmp(k, "edge") == 0 || strcmp(k, "npu") == 0 || strcmp(k, "phone") == 0;
  return part || (max_power_w > 0 && hw->chip.tdp_w > 0 && hw->chip.tdp_w <= max_power_w);
}

/* The lowest TDP of the catalog's server chips (not on-device parts). */
static double lowest_server_w(const hw_catalog *cat) {
  double lo = 0;
  for (int i = 0; cat && i < hw_catalog_count(cat); i++) {
    const hw_model *h = hw_catalog_at(cat, i);
    if (serve_on_device(h, 0) || h->chip.tdp_w <= 0) continue;
    if (lo == 0 || h->chip.tdp_w < lo) lo = h->chip.tdp_w;
  }
  return lo;
}

int serve_choose_rule(const serve_req *q, const hw_catalog *cat) {
  if (q->offline) return 0;
  double lo = lowest_server_w(cat);
  if (q->max_power_w > 0 && lo > 0 && q->max_power_w < lo) return 1;
  if (q->entities > 0) return 2;
  return 3;
}

static void format_reason(const serve_req *q, const hw_catalog *cat, int rule, char *buf,
                          size_t n) {
  char d[32];
  switch (rule) {
  case 1: snprintf(buf, n, serve_rules[1].reason, q->max_power_w, lowest_server_w(cat)); break;
  case 2:
    units_seconds(d, sizeof d, q->batch_window_s);
    snprintf(buf, n, serve_rules[2].reason, q->entities, d);
    break;
  case 3:
    if (q->latency_p99_s > 0) {
      units_seconds(d, sizeof d, q->latency_p99_s);
      snprintf(buf, n, serve_rules[3].reason, q->qps, d);
    } else {
      snprintf(buf, n, "requests arrive at %.3g/s (no --latency-p99 given): an online endpoint, the "
                       "cheapest replicas that keep up", q->qps);
    }
    break;
  default: snprintf(buf, n, "%s", serve_rules[rule].reason);
  }
}

/* ---- queueing ---- */

double serve_erlang_c(int64_t c, double a) {
  if (c < 1 || a >= (double)c) return 1;
  if (a <= 0) return 0;
  /* Erlang B by its recursion B(k) = a B(k-1) / (k + a B(k-1)), stable for
  ** large c; then C = c B / (c - a (1 - B)) (Kleinrock 1975, sec. 3.5) */
  double b = 1;
  for (int64_t k = 1; k <= c; k++) b = a * b / ((double)k + a * b);
  return (double)c * b / ((double)c - a * (1 - b));
}

double serve_wait_quantile(int64_t c, double lambda, double s_s, double q) {
  if (s_s <= 0 || lambda <= 0) return 0;
  double mu = 1 / s_s, a = lambda * s_s;
  if (a >= (double)c) return INFINITY;
  double pw = serve_erlang_c(c, a);
  if (pw <= 1 - q) return 0;
  return log(pw / (1 - q)) / ((double)c * mu - lambda);
}

/* ---- one candidate ---- */

static double price_per_hour(const hw_model *hw, int64_t chips) {
  int64_t per = hw->price.chips_per_instance > 0 ? hw->price.chips_per_instance : 1;
  double inst = ceil((double)chips / (double)per);
  return inst * (double)per * hw->price.on_demand_usd_per_chip_hour;
}

/* A replica of step r serving lambda requests a second: its request's
** service time and time to the first token. The prompts' prefills
** interleave with the decode steps (chunked prefill, Agrawal et al. 2024,
** Sarathi-Serve), taking the share rho = lambda_r x prefill of the
** replica's time: every decode step stretches by 1 / (1 - rho). */
static bool service_time(const serve_req *q, const serve_result *r, double lambda_r, double *s_s,
                         double *first_s) {
  if (!r->generative) {
    *s_s = *first_s = r->forward_s;
    return true;
  }
  double rho = lambda_r * r->ttft_s;
  if (rho >= 1) return false;
  *first_s = r->ttft_s;
  *s_s = r->ttft_s + (double)q->output_tokens * r->tpot_s / (1 - rho);
  return true;
}

/* The p50 and p99 of the time to the answer (generative: to the first
** token, queueing included) with R replicas of batch slots each; false when
** they cannot keep up. */
static bool latency(const serve_req *q, const serve_result *r, int64_t batch, int64_t R,
                    double *p50, double *p99) {
  double s, first;
  if (!service_time(q, r, q->qps / (double)R, &s, &first)) return false;
  int64_t c = R * batch;
  if (q->qps * s >= (double)c) return false;
  *p50 = serve_wait_quantile(c, q->qps, s, 0.5) + first;
  *p99 = serve_wait_quantile(c, q->qps, s, 0.99) + first;
  return true;
}

/* The time per output token under load with R replicas: the decode step
** stretched by the prefills that interleave with it, 1 / (1 - rho) with
** rho = lambda_r x TTFT (service_time's model). */
static double loaded_tpot(const serve_req *q, const serve_result *r, int64_t R) {
  double rho = q->qps / (double)R * r->ttft_s;
  return rho >= 1 ? INFINITY : r->tpot_s / (1 - rho);
}

/* Whether R replicas of batch slots keep up and meet both targets: the p99
** of the time to the first answer (--latency-p99) and, for a generative
** model, the time per output token under load (--tpot-max). Both improve as
** replicas are added, so replicas_for may bisect. */
static bool meets_targets(const serve_req *q, const serve_result *r, int64_t batch, int64_t R) {
  double p50, p99;
  if (!latency(q, r, batch, R, &p50, &p99)) return false;
  if (q->latency_p99_s > 0 && p99 > q->latency_p99_s) return false;
  return !(q->tpot_max_s > 0 && r->generative && loaded_tpot(q, r, R) > q->tpot_max_s);
}

#define SERVE_MAX_REPLICAS 100000

/* The fewest replicas that keep up and meet the targets: doubling to a
** bound, then bisection. 0 when none within SERVE_MAX_REPLICAS. */
static int64_t replicas_for(const serve_req *q, const serve_result *r, int64_t batch) {
  /* the p99 is a wait plus the first answer alone (latency): past the
  ** target alone, no replica count meets it, and the doubling would try
  ** every one up to the bound */
  double s, first;
  if (q->latency_p99_s > 0 && service_time(q, r, 0, &s, &first) && first > q->latency_p99_s) return 0;
  int64_t hi = 1;
  while (hi <= SERVE_MAX_REPLICAS && !meets_targets(q, r, batch, hi)) hi *= 2;
  if (hi > SERVE_MAX_REPLICAS) return 0;
  int64_t lo = hi / 2; /* fails (or 0) */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (meets_targets(q, r, batch, mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

static serve_cfg cfg_of(const serve_req *q, const serve_precision *pr, int64_t tp, int64_t batch) {
  return (serve_cfg){.tp = tp, .pp = 1, .prec = pr, .batch = batch,
                     .input_tokens = q->input_tokens, .output_tokens = q->output_tokens,
                     .encoder_seq = q->encoder_seq, .spec_k = q->spec_k, .spec_accept = q->spec_accept, .draft = q->draft};
}

/* The fewest chips (a power of two within one node) whose shard of m holds
** the weights beside one sequence; 0 with *why when none. */
static int64_t tp_that_fits(const model *m, const hw_model *hw, const serve_req *q,
                            const serve_precision *pr, opcost *cache, char *why, size_t n) {
  bool tf = m->info.tf.layers > 0;
  int64_t node = hw->chips_per_node > 0 ? hw->chips_per_node : 1;
  for (int64_t tp = q->tp > 0 ? q->tp : 1; tp <= (q->tp > 0 ? q->tp : node); tp *= 2) {
    if (!tf && tp > 1) break;
    serve_cfg c = cfg_of(q, pr, tp, 1);
    serve_result r;
    if (serve_step(m, hw, &c, cache, &r, why, n) != 0) return 0;
    if (r.fits) return tp;
    snprintf(why, n, "does not fit: %.3g GB of weights on each of %lld chips (%.3g GB usable)",
             r.weights_bytes / 1e9, (long long)tp, r.usable_bytes / 1e9);
  }
  return 0;
}

/* The batch sizes tried: powers of two up to what fits, at most cap. */
static int64_t next_batch(int64_t b) { return b * 2; }

static void set_fail(serve_cand *c, const char *why) {
  c->meets = false;
  snprintf(c->why_not, sizeof c->why_not, "%s", why);
}

/* One batch of the online endpoint on hw: the step, the fewest replicas
** that meet the targets at q->qps, their latency and price. False when the
** step fails or the batch does not fit (why says so); a batch no replica
** count serves has k->meets false and replicas 0. The planner's table and
** `tpusim plot serve` both take their figures from here. */
static bool online_point(const model *m, const hw_model *hw, const serve_req *q,
                         const serve_precision *pr, int64_t tp, int64_t b, opcost *cache,
                         serve_cand *k, char *why, size_t whyn) {
  serve_cfg c = cfg_of(q, pr, tp, b);
  serve_result r;
  if (serve_step(m, hw, &c, cache, &r, why, whyn) != 0 || !r.fits) return false;
  *k = (serve_cand){.mode = SERVE_ONLINE, .hw = hw, .prec = pr, .tp = tp, .batch = b, .step = r,
                    .p50_s = NAN, .p99_s = NAN};
  k->replicas = replicas_for(q, &r, b);
  if (k->replicas == 0) return true;
  k->meets = true;
  k->chips = k->replicas * tp;
  latency(q, &r, b, k->replicas, &k->p50_s, &k->p99_s);
  k->usd_per_hour = price_per_hour(hw, k->chips);
  k->power_w = hw->chip.tdp_w * (double)k->chips;
  return true;
}

/* The largest batch an online endpoint tries (powers of two from 1). */
#define SERVE_MAX_ONLINE_BATCH 1024

/* The online endpoint on hw in precision pr: for each batch, the fewest
** replicas that meet the targets; the cheapest kept. */
static void plan_online(const model *m, const hw_model *hw, const serve_req *q,
                        const serve_precision *pr, int64_t tp, opcost *cache, serve_cand *best) {
  char why[200] = "";
  double first = INFINITY, tpot = INFINITY; /* the shortest alone, over the batches tried */
  for (int64_t b = 1; b <= SERVE_MAX_ONLINE_BATCH; b = next_batch(b)) {
    serve_cand k;
    if (!online_point(m, hw, q, pr, tp, b, cache, &k, why, sizeof why)) break;
    first = fmin(first, k.step.generative ? k.step.ttft_s : k.step.forward_s);
    if (k.step.generative) tpot = fmin(tpot, k.step.tpot_s);
    if (!k.meets) continue;
    if (!best->meets || k.usd_per_hour < best->usd_per_hour ||
        (k.usd_per_hour == best->usd_per_hour && k.p99_s < best->p99_s))
      *best = k;
  }
  if (!best->meets && !best->why_not[0] && q->latency_p99_s > 0 && first > q->latency_p99_s) {
    snprintf(why, sizeof why, "%.3g s to the first answer alone, over the %.3g s p99 target", first,
             q->latency_p99_s);
    set_fail(best, why);
  }
  if (!best->meets && !best->why_not[0] && q->tpot_max_s > 0 && tpot > q->tpot_max_s &&
      tpot < INFINITY) {
    snprintf(why, sizeof why, "%.3g ms a token at the smallest batch, over the %.3g ms --tpot-max",
             tpot * 1e3, q->tpot_max_s * 1e3);
    set_fail(best, why);
  }
  if (!best->meets && !best->why_not[0])
    set_fail(best, why[0] ? why : "no batch and replica count within 100000 replicas meets the targets");
}

int serve_curve(const model *m, const hw_model *hw, const serve_req *q, const serve_precision *pr,
                int64_t tp, serve_cand *pts, int max, char *err, size_t errn) {
  if (!(q->qps > 0)) return str_errf(err, errn, "an online endpoint needs --qps (requests a second)");
  opcost *cache = opcost_new(OPCOST_FORMULA);
  if (!cache) return str_errf(err, errn, "out of memory");
  int n = 0;
  char why[200] = "";
  for (int64_t b = 1; b <= SERVE_MAX_ONLINE_BATCH && n < max; b = next_batch(b)) {
    if (!online_point(m, hw, q, pr, tp, b, cache, &pts[n], why, sizeof why)) break;
    n++;
  }
  opcost_free(cache);
  if (n == 0) return str_errf(err, errn, "%s", why[0] ? why : "batch 1 does not fit");
  return n;
}

/* Batch prediction on hw: the largest batch that fits, one replica's time
** for all entities, the replicas that finish within the window. */
static void plan_batch(const model *m, const hw_model *hw, const serve_req *q,
                       const serve_precision *pr, int64_t tp, opcost *cache, serve_cand *best) {
  char why[200] = "";
  for (int64_t b = 1; b <= 4096; b = next_batch(b)) {
    serve_cfg c = cfg_of(q, pr, tp, b);
    serve_result r;
    if (serve_step(m, hw, &c, cache, &r, why, sizeof why) != 0 || !r.fits) break;
    double per_s = r.generative ? (double)b / ((double)b * r.ttft_s + (double)q->output_tokens * r.tpot_s)
                                : r.samples_per_s;
    double total = q->entities / per_s;
    serve_cand k = {.mode = SERVE_BATCH, .hw = hw, .prec = pr, .tp = tp, .batch = b, .step = r,
                    .total_s = total, .meets = true};
    k.replicas = (int64_t)ceil(total / q->batch_window_s);
    if (k.replicas < 1) k.replicas = 1;
    k.chips = k.replicas * tp;
    k.usd_total = total / 3600 * (double)tp * hw->price.on_demand_usd_per_chip_hour;
    k.usd_per_hour = price_per_hour(hw, k.chips);
    k.p50_s = k.p99_s = r.generative ? r.ttft_s + (double)q->output_tokens * r.tpot_s : r.forward_s;
    k.power_w = hw->chip.tdp_w * (double)k.chips;
    if (!best->meets || k.usd_total < best->usd_total) *best = k;
  }
  if (!best->meets && !best->why_not[0]) set_fail(best, why[0] ? why : "no batch fits");
}

/* On the device: one request at a time, batch 1, one chip. */
static void plan_edge(const model *m, const hw_model *hw, const serve_req *q,
                      const serve_precision *pr, opcost *cache, serve_cand *k) {
  char why[200];
  serve_cfg c = cfg_of(q, pr, 1, 1);
  if (serve_step(m, hw, &c, cache, &k->step, why, sizeof why) != 0) return set_fail(k, why);
  const serve_result *r = &k->step;
  k->batch = k->replicas = k->chips = k->tp = 1;
  k->p50_s = k->p99_s = r->ttft_s;
  k->power_w = hw->chip.tdp_w;
  k->meets = true;
  if (!r->fits) {
    snprintf(why, sizeof why, "does not fit: %.3g MB of weights, %.3g MB usable on the device",
             r->weights_bytes / 1e6, r->usable_bytes / 1e6);
    return set_fail(k, why);
  }
  if (q->latency_p99_s > 0 && k->p99_s > q->latency_p99_s) {
    snprintf(why, sizeof why, "%.3g ms a request, over the %.3g ms target", k->p99_s * 1e3,
             q->latency_p99_s * 1e3);
    return set_fail(k, why);
  }
}

/* Best first: those that meet the targets, cheapest first (batch: the
** whole run's cost; online: per hour; edge: the fastest), then the rest. */
static int cmp_cand(const void *a, const void *b) {
  const serve_cand *x = a, *y = b;
  if (x->meets != y->meets) return x->meets ? -1 : 1;
  double kx = x->mode == SERVE_BATCH ? x->usd_total : x->mode == SERVE_ONLINE ? x->usd_per_hour : x->p99_s;
  double ky = y->mode == SERVE_BATCH ? y->usd_total : y->mode == SERVE_ONLINE ? y->usd_per_hour : y->p99_s;
  if (kx != ky) return kx < ky ? -1 : 1;
  return x->p99_s < y->p99_s ? -1 : x->p99_s > y->p99_s;
}

static void plan_one(const model *m, const hw_model *hw, const serve_req *q, serve_mode mode,
                     const serve_precision *pr, opcost *cache, serve_cand *k) {
  memset(k, 0, sizeof *k);
  k->mode = mode, k->hw = hw, k->prec = pr;
  if (hw_peak_flops(hw, pr->gemm) <= 0) {
    char why[200];
    snprintf(why, sizeof why, "no %s unit (no chip.peak_flops_per_s.%s): %s cannot run",
             hw_dtype_name(pr->gemm), hw_dtype_name(pr->gemm), pr->name);
    return set_fail(k, why);
  }
  if (mode == SERVE_EDGE) return plan_edge(m, hw, q, pr, cache, k);
  if (hw->price.on_demand_usd_per_chip_hour <= 0)
    return set_fail(k, "not rented: its file gives no hourly price");
  char why[200];
  int64_t tp = tp_that_fits(m, hw, q, pr, cache, why, sizeof why);
  if (tp == 0) return set_fail(k, why);
  if (mode == SERVE_BATCH) plan_batch(m, hw, q, pr, tp, cache, k);
  else plan_online(m, hw, q, pr, tp, cache, k);
}

int serve_plan_run(const model *m, const hw_model *const *hws, int n, const hw_catalog *cat,
                   const serve_req *q, serve_plan *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  out->rule = serve_choose_rule(q, cat);
  out->mode = serve_rules[out->rule].mode;
  format_reason(q, cat, out->rule, out->reason, sizeof out->reason);
  if (out->mode == SERVE_ONLINE && !(q->qps > 0))
    return str_errf(err, errn, "an online endpoint needs --qps (requests a second)");
  /* speculative decoding drafts tokens for a model that decodes them */
  if (q->draft && !serve_generates(m))
    return str_errf(err, errn, "--speculative: %s does not generate tokens (one forward a request): "
                    "speculative decoding is for a decoder's generation", m->name);
  if (q->draft && !serve_generates(q->draft))
    return str_errf(err, errn, "--speculative %s: the draft does not generate tokens; a draft is a "
                    "small decoder of the same vocabulary (e.g. Llama 3.2 1B for Llama 3.1 8B)",
                    q->draft->name);
  const serve_precision *edge_prec = serve_precision_find("int8");
  int per_hw = 0;
  for (int i = 0; serve_precisions[i].name; i++) per_hw++;
  out->c = calloc((size_t)(n > 0 ? n : 1) * (size_t)per_hw, sizeof *out->c);
  if (!out->c) return str_errf(err, errn, "out of memory");
  opcost *cache = opcost_new(OPCOST_FORMULA);
  if (!cache) return str_errf(err, errn, "out of memory");
  for (int i = 0; i < n; i++) {
    const hw_model *hw = hws[i];
    if (out->mode == SERVE_EDGE && !serve_on_device(hw, q->max_power_w)) {
      serve_cand *k = &out->c[out->n++];
      memset(k, 0, sizeof *k);
      k->mode = SERVE_EDGE, k->hw = hw, k->prec = q->prec ? q->prec : edge_prec;
      char why[200];
      if (hw->chip.tdp_w > 0)
        snprintf(why, sizeof why, "not an on-device part (kind %s, %.3g W)", hw_kind_name(hw->kind),
                 hw->chip.tdp_w);
      else
        snprintf(why, sizeof why, "not an on-device part (kind %s, TDP not given)", hw_kind_name(hw->kind));
      set_fail(k, why);
      continue;
    }
    if (!q->any_precision) {
      const serve_precision *pr = q->prec;
      if (!pr && out->mode == SERVE_EDGE) pr = edge_prec;
      /* the checkpoint's 16 bits: bf16, or fp16 where the chip has no bf16 unit */
      if (!pr) pr = serve_precision_find(hw_peak_flops(hw, HW_BF16) > 0 || hw_peak_flops(hw, HW_FP16) <= 0 ? "bf16" : "fp16");
      plan_one(m, hw, q, out->mode, pr, cache, &out->c[out->n++]);
      continue;
    }
    /* every precision the chip runs; the best kept for this chip */
    serve_cand best = {0}, k;
    bool any = false;
    for (int p = 0; serve_precisions[p].name; p++) {
      plan_one(m, hw, q, out->mode, &serve_precisions[p], cache, &k);
      if (!any || cmp_cand(&k, &best) < 0) best = k;
      any = true;
    }
    out->c[out->n++] = best;
  }
  opcost_free(cache);
  qsort(out->c, (size_t)out->n, sizeof *out->c, cmp_cand);
  return 0;
}

void serve_plan_free(serve_plan *p) {
  if (!p) return;
  free(p->c);
  p->c = NULL;
  p->n = 0;
}
