/*
** explain.c -- see explain.h. Each term's value is read from the step
** result; its text puts the step model's pieces into the term's formula.
*/
#include "explain.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../base/units.h"
#include "framework.h"

/* A reconstruction that gives the term to this relative precision is the
** term's equation (the same operations as the model, in another order). */
#define EXPLAIN_EXACT 1e-9

static bool same(double a, double b) {
  return fabs(a - b) <= EXPLAIN_EXACT * fmax(fabs(a), fabs(b)) + 1e-15;
}

static explain_term *add(explain_term *t, int *n, const char *name, double value,
                         const char *formula) {
  explain_term *x = &t[(*n)++];
  x->name = name;
  x->value = value;
  snprintf(x->formula, sizeof x->formula, "%s", formula);
  x->values[0] = 0;
  return x;
}

static void values(explain_term *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->values, sizeof x->values, fmt, ap);
  va_end(ap);
}

/* Short unit strings for the values: "1.23 ms", "95.0 GiB", "8.03 G params". */
typedef struct {
  char s[6][32];
  int i;
} fmtbuf;
static const char *sec(fmtbuf *b, double s) {
  char *o = b->s[b->i++ % 6];
  units_seconds(o, 32, s);
  return o;
}
static const char *byt(fmtbuf *b, double x) {
  char *o = b->s[b->i++ % 6];
  units_bytes(o, 32, x);
  return o;
}
static const char *prm(fmtbuf *b, double x) {
  char *o = b->s[b->i++ % 6];
  units_si(o, 32, x, "");
  size_t k = strlen(o);
  while (k > 0 && o[k - 1] == ' ') o[--k] = 0; /* "8.03 G" */
  return o;
}

/* ---- time ---- */

/* The layers chip 0 holds: its virtual stages vs = 0, pp, 2 pp, ... */
static int64_t chip0_layers(const model *m, const plan *p) {
  int64_t n = 0;
  for (int64_t vs = 0; vs < p->pp * p->vp; vs += p->pp) n += plan_stage_layers(p, m->info.tf.layers, vs);
  return n;
}

/* A layer's recomputation in the backward (step.c's layer_times), the
** layers' average. */
static double recompute_s(const model *m, const plan *p, const step_result *r) {
  return step_recompute_s(r, p, &m->info.tf, -1);
}

static void time_compute(const model *m, const plan *p, const step_result *r, explain_term *x) {
  fmtbuf b = {0};
  /* the collectives' SMs are their own term */
  double M = (double)r->microbatches, t_mb = (r->breakdown_s.compute - r->coll_sm_s) / M;
  int64_t n0 = chip0_layers(m, p);
  double a = (M - 1) / M, rec = recompute_s(m, p, r);
  /* chip 0 holds the first stage's end of the pipeline, both at pp 1 */
  double layer = r->layer_fwd_s + r->layer_bwd_s + rec + a * r->grad_accum_layer_s;
  double ff, bf, fl, bl;
  step_edges(r, a, &ff, &bf, &fl, &bl);
  double head = ff + bf + (p->pp == 1 ? fl + bl : 0);
  double recon = (double)n0 * layer + head;
  snprintf(x->formula, sizeof x->formula,
           "m x t_mb; t_mb = L x (fwd + bwd + recompute + (m-1)/m x grad accum) + %s",
           p->pp == 1 ? "embedding/head" : "the embedding and its gradients' accumulation");
  if (same(recon, t_mb))
    values(x, "%lld micro-batches x %s; t_mb = %lld layers x (%s + %s + %s + %.3f x %s) + %s",
           (long long)r->microbatches, sec(&b, t_mb), (long long)n0, sec(&b, r->layer_fwd_s),
           sec(&b, r->layer_bwd_s), sec(&b, rec), a, sec(&b, r->grad_accum_layer_s), sec(&b, head));
  else
    values(x, "%lld micro-batches x %s (chip 0's chunks differ from the average layer: an "
              "uneven split, layers of several kinds or ZeRO-3 gathers ahead of compute)",
           (long long)r->microbatches, sec(&b, t_mb));
}

static void time_layer_comm(const model *m, const plan *p, const step_result *r, double v,
                            explain_term *x) {
  fmtbuf b = {0};
  double M = (double)r->microbatches;
  int64_t n0 = chip0_layers(m, p);
  /* r->tp_comm_bwd_s holds full recompute's repeat of the forward's; the
  ** all-to-alls an overlap hides come back on the passes nothing pairs with */
  double u = step_ep_unpaired(p), hid = r->a2a_hidden_fwd_s + r->a2a_hidden_bwd_s;
  double recon = M * (double)n0 * (r->tp_comm_fwd_s + r->tp_comm_bwd_s + u * hid);
  if (v == 0)
    values(x, "no tensor, context or expert parallelism (tp %lld, cp %lld, ep %lld)",
           (long long)p->tp, (long long)(p->cp > 0 ? p->cp : 1), (long long)(p->ep > 0 ? p->ep : 1));
  else if (same(recon, v) && u * hid > 0)
    values(x, "%lld micro-batches x %lld layers x (%s + %s + %.3g x %s: the overlapped all-to-alls "
           "of the unpaired passes)", (long long)r->microbatches, (long long)n0,
           sec(&b, r->tp_comm_fwd_s), sec(&b, r->tp_comm_bwd_s), u, sec(&b, hid));
  else if (same(recon, v))
    values(x, "%lld micro-batches x %lld layers x (%s + %s)", (long long)r->microbatches,
           (long long)n0, sec(&b, r->tp_comm_fwd_s), sec(&b, r->tp_comm_bwd_s));
  else
    values(x, "%lld micro-batches x %s (chip 0's layers differ from the average)",
           (long long)r->microbatches, sec(&b, v / M));
}

static void time_bubble(const plan *p, const step_result *r, double busy, explain_term *x) {
  fmtbuf b = {0};
  double M = (double)r->microbatches;
  if (p->pp <= 1) {
    values(x, "pp 1: no pipeline");
    return;
  }
  double ideal = (double)(p->pp - 1) / ((double)p->vp * M) * busy;
  values(x, "%s's idle time on chip 0; ideal (%lld-1)/(%lld x %lld) x %s busy = %s",
         plan_schedule_names[p->schedule], (long long)p->pp, (long long)p->vp,
         (long long)r->microbatches, sec(&b, busy), sec(&b, ideal));
}

/* The optimizer's update over HBM (step.c's step_describe), or over the host link when offloaded. */
static void time_optimizer(const hw_model *hw, const plan *p, const model *m, const step_result *r,
                           explain_term *x) {
  fmtbuf b = {0};
  double pp = (double)p->pp, local = step_optimizer_params(m, p);
  bool off = p->offload == PLAN_OFFLOAD_OPTIMIZER && hw->chip.host_link_bw_bytes_per_s > 0;
  double per = off ? 30 : step_adam_bytes(p);
  double bw = off ? hw->chip.host_link_bw_bytes_per_s : hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency;
  double cast = r->weight_cast_s / pp;
  char rate[32];
  units_si(rate, sizeof rate, bw, "B/s");
  double zero_b = 0, extra = off ? 0 : step_update_extra_bytes(m, hw, p, &zero_b);
  double chip = step_grad_buffer_params(m, p);
  if (same(local * per / bw + cast, x->value))
    values(x, "%s params x %.0f B / %s%s + %s weight cast", prm(&b, local), per, rate,
           off ? " (host link)" : " (HBM x efficiency)", sec(&b, cast));
  else if (extra > 0 && p->framework >= 0 && frameworks[p->framework].adam_foreach &&
           same(local * (per + extra) / bw + cast, x->value))
    values(x, "%s params x (%.0f B Adam + %.0f B more in PyTorch's foreach AdamW and "
              "clip_grad_norm_ passes) / %s (HBM x efficiency) + %s weight cast",
           prm(&b, local), per, extra, rate, sec(&b, cast));
  else if (extra > 0 && same((local * (per + extra) + chip * zero_b) / bw + cast, x->value))
    values(x, "(%s params x (%.0f B Adam + %.0f B Megatron's gradient cast, unscale, norm and "
              "weight copy, as they apply) + %s params x %.0f B gradient buffer zeroed) / %s "
              "(HBM x efficiency) + %s weight cast",
           prm(&b, local), per, extra, prm(&b, chip), zero_b, rate, sec(&b, cast));
  else
    values(x, "the update's kernels, timed on the chip");
}

/* the compute the hidden data-parallel collectives slow (step_coll_sm_share) */
static void coll_sm_term(const hw_model *hw, const step_result *r, explain_term *t, int *n) {
  if (!(r->coll_sm_s > 0)) return;
  fmtbuf b = {0};
  explain_term *x = add(t, n, "collectives' SMs", r->coll_sm_s,
                        "(gradient reduction + parameter gather the compute hides) x the SMs they hold");
  values(x, "%s x %.1f%% (NCCL's CTAs, system.scale_up / scale_out.collective_ctas, over %lld SMs)",
         sec(&b, r->coll_hidden_s), 100 * r->coll_share, (long long)hw->chip.mu_cores);
}

static void explain_time(const model *m, const hw_model *hw, const plan *p, const step_result *r,
                         step_explain *e) {
  fmtbuf b = {0};
  const step_breakdown *bd = &r->breakdown_s;
  explain_term *t = e->time;
  int *n = &e->n_time;
  bool hlo = strcmp(m->format, "hlo") == 0, whole = hlo || m->info.tf.layers == 0;
  if (hlo) {
    explain_term *x = add(t, n, "compute", bd->compute, "the program's forward + backward kernels");
    values(x, "%s + %s", sec(&b, r->layer_fwd_s), sec(&b, r->layer_bwd_s));
    x = add(t, n, "collectives", bd->exposed_comm, "the program's collectives, in series with compute");
    values(x, "sum over its all-reduce, all-gather, reduce-scatter and all-to-all ops");
    x = add(t, n, "optimizer", bd->other, "the program's update kernels");
    values(x, "%s", sec(&b, bd->other));
  } else if (whole) {
    explain_term *x = add(t, n, "compute", bd->compute - r->coll_sm_s,
                          "m x (fwd + bwd) + (m-1) x grad accum");
    values(x, "%lld micro-batches x (%s + %s) + %lld x %s", (long long)r->microbatches,
           sec(&b, r->layer_fwd_s), sec(&b, r->layer_bwd_s), (long long)(r->microbatches - 1),
           sec(&b, r->grad_accum_layer_s));
    coll_sm_term(hw, r, t, n);
    bool after = p->grad_sync == PLAN_GRAD_AFTER_BACKWARD;
    double ar = r->dp_allreduce_s, shown = after ? ar : ar > r->layer_bwd_s ? ar - r->layer_bwd_s : 0;
    double rest = bd->exposed_comm - shown; /* ZeRO-3 gathers, the embedding exchange */
    char more[96] = "";
    if (rest > 0) snprintf(more, sizeof more, " + %s", sec(&b, rest));
    x = add(t, n, "exposed gradient sync", bd->exposed_comm,
            after ? "the all-reduce, after the backward (--grad-sync after-backward)"
                    " + ZeRO-3 gathers and embedding exchange not hidden"
                  : "max(0, all-reduce - the last backward it hides behind)"
                    " + ZeRO-3 gathers and embedding exchange not hidden");
    if (p->dp <= 1) values(x, "dp 1: no all-reduce (%s)%s", sec(&b, r->dp_allreduce_s), more);
    else if (after) values(x, "%s%s", sec(&b, r->dp_allreduce_s), more);
    else values(x, "max(0, %s - %s)%s", sec(&b, r->dp_allreduce_s), sec(&b, r->layer_bwd_s), more);
    x = add(t, n, "optimizer", bd->other, "the graph's update ops");
    values(x, "%s", sec(&b, bd->other));
  } else {
    double layer_comm = bd->exposed_comm - r->exposed_dp_s - r->param_gather_exposed_s;
    explain_term *x = add(t, n, "compute", bd->compute - r->coll_sm_s, "");
    time_compute(m, p, r, x);
    coll_sm_term(hw, r, t, n);
    x = add(t, n, "layer collectives", layer_comm,
            "m x L x (forward + backward): TP/CP/EP, the part not overlapped and the "
            "SMs the overlapped part holds");
    time_layer_comm(m, p, r, layer_comm, x);
    x = add(t, n, "pipeline bubble", bd->pipeline_bubble,
            "step - input stall - busy - exposed gradient sync - parameter gather - optimizer");
    time_bubble(p, r, bd->compute - r->coll_sm_s + layer_comm, x);
    x = add(t, n, "exposed gradient sync", r->exposed_dp_s,
            "the gradient reduction past chip 0's last backward");
    values(x, "%s, of which the backward hides %s (%s)", sec(&b, r->dp_allreduce_s),
           sec(&b, r->dp_allreduce_s > r->exposed_dp_s ? r->dp_allreduce_s - r->exposed_dp_s : 0),
           plan_grad_sync_names[p->grad_sync]);
    if (r->param_gather_exposed_s > 0) {
      x = add(t, n, "parameter gather", r->param_gather_exposed_s,
              p->vp > 1 ? "chip 0's first chunk waits: max(0, gather / V - its forward) + one bucket"
                        : "pp x (max(0, gather - a stage's first forward) + one bucket)");
      values(x, "the distributed optimizer's all-gather of the updated weights, dispatched "
                "bucket by bucket from the next step's forward (Megatron-Core overlap_param_gather)");
    }
    x = add(t, n, "optimizer", bd->other,
            "the update (Adam and its passes): params x bytes moved / bandwidth");
    time_optimizer(hw, p, m, r, x);
  }
  char how[96];
  if (r->input_steps > 0)
    snprintf(how, sizeof how, "the host input pipeline's wait (sim/input, simulated over %d steps)",
             r->input_steps);
  else if (r->input_steps < 0)
    snprintf(how, sizeof how, "the host input pipeline's wait (sim/input, in closed form)");
  else
    snprintf(how, sizeof how, "the host input pipeline's wait (sim/input: none here)");
  explain_term *x = add(t, n, "input stall", bd->input_stall, how);
  values(x, bd->input_stall > 0 ? "%s a step" : "none: the data is there in time (%s)",
         sec(&b, bd->input_stall));
  e->step_time_s = r->step_time_s;
}

/* ---- memory ---- */

/* A state term: P params x B bytes each / n shards (+ extra). B is the
** bytes a parameter averages over the stage's dense and expert shards. */
static void state_term(explain_term *x, double params, double shards, double extra,
                       const char *extra_name) {
  fmtbuf b = {0};
  double per = params > 0 ? (x->value - extra) * shards / params : 0;
  if (extra > 0)
    values(x, "%s params x %.3g B / %.0f + %s %s", prm(&b, params), per, shards, byt(&b, extra),
           extra_name);
  else
    values(x, "%s params x %.3g B / %.0f", prm(&b, params), per, shards);
}

static void explain_memory(const model *m, const plan *p, const step_result *r, step_explain *e) {
  fmtbuf b = {0};
  const mem_bytes *mb = &r->memory;
  explain_term *t = e->mem;
  int *n = &e->n_mem;
  bool whole = strcmp(m->format, "hlo") == 0 || m->info.tf.layers == 0;
  if (whole) {
    explain_term *x = add(t, n, "weights", mb->weights, "the graph's parameters (and aux state)");
    values(x, "%s", byt(&b, mb->weights));
    x = add(t, n, "gradients", mb->gradients, "one per trainable parameter");
    values(x, "%s", byt(&b, mb->gradients));
    x = add(t, n, "optimizer", mb->optimizer, "the graph's optimizer-state parameters");
    values(x, "%s", byt(&b, mb->optimizer));
    x = add(t, n, "activations", mb->activations, "forward values the backward reads, once each");
    values(x, "%s", byt(&b, mb->activations));
    e->peak_bytes = mb->peak;
    return;
  }
  int64_t gd, ge; /* the states' shard group: dp x cp, or an HSDP group's chips */
  plan_state_shards(p, &gd, &ge);
  double dpcp = (double)gd;
  explain_term *x = add(t, n, "weights", mb->weights, "P x B_w / (dp x cp under ZeRO-3) + low-precision copies");
  if (mb->weights_16bit_dropped > 0) /* the copies are the linear weights (fp8 parameters) */
    values(x, "%s params x %.3g B - %s 16-bit linear weights + %s in the recipe's format "
           "(fp8 parameters: no 16-bit copy)", prm(&b, mb->params),
           (mb->weights - mb->weight_copies + mb->weights_16bit_dropped) / mb->params,
           byt(&b, mb->weights_16bit_dropped), byt(&b, mb->weight_copies));
  else
    state_term(x, mb->params, p->zero >= 3 ? dpcp : 1, mb->weight_copies, "low-precision copies");
  x = add(t, n, "gradients", mb->gradients, "P x B_g / (dp x cp under ZeRO-2+)");
  state_term(x, mb->params, p->zero >= 2 ? dpcp : 1, 0, "");
  x = add(t, n, "optimizer", mb->optimizer, "P x B_opt / (dp x cp under ZeRO-1+)");
  if (p->offload == PLAN_OFFLOAD_OPTIMIZER)
    values(x, "offloaded: %s on the host", byt(&b, mb->host));
  else
    state_term(x, mb->params, p->zero >= 1 ? dpcp : 1, 0, "");
  x = add(t, n, "activations", mb->activations,
          "layer x micro-batch sets in flight (Korthikanti et al. 2022) + embedding/logits");
  char rl[256];
  plan_recompute_label(p, rl, sizeof rl);
  if (p->offload == PLAN_OFFLOAD_ACTIVATIONS)
    values(x, "%.4g sets, the largest layer's %s (stage %d, recompute %s); offloaded: %s on the "
              "host (%s)",
           mb->layer_mbs, byt(&b, mb->act_layer), mb->stage, rl,
           byt(&b, mb->host), p->offload_layers > 0 ? "the first layers of each chunk" : "all but two layers");
  else
    values(x, "%.4g sets, the largest layer's %s (stage %d, recompute %s)", mb->layer_mbs,
           byt(&b, mb->act_layer), mb->stage, rl);
  x = add(t, n, "temporary", mb->temporary, "the largest layer's backward buffers and collectives' (docs/memory.md)");
  values(x, "%s", byt(&b, mb->temporary));
  x = add(t, n, "runtime", mb->runtime, "context, kernels, library workspaces (by chip kind)");
  values(x, "%s", byt(&b, mb->runtime));
  x = add(t, n, "communicators", mb->comm, "collective communicators' buffers");
  values(x, "%s", byt(&b, mb->comm));
  x = add(t, n, "fragmentation", mb->fragmentation, "f / (1 - f) x (activations + temporary)");
  double at = mb->activations + mb->temporary;
  double f = mb->fragmentation + at > 0 ? mb->fragmentation / (mb->fragmentation + at) : 0;
  values(x, "%.3g / (1 - %.3g) x %s", f, f, byt(&b, at));
  e->peak_bytes = mb->peak;
}

void step_explain_fill(const model *m, const hw_model *hw, const plan *p, const step_result *r,
                       step_explain *e) {
  memset(e, 0, sizeof *e);
  explain_time(m, hw, p, r, e);
  explain_memory(m, p, r, e);
}

/* ---- printing ---- */

explain_unit explain_time_unit(double total_s) {
  if (total_s >= 1000) return (explain_unit){"s", 1, 3};
  if (total_s >= 1e-2) return (explain_unit){"ms", 1e-3, 3};
  return (explain_unit){"us", 1e-6, 3};
}

explain_unit explain_mem_unit(double total_bytes) {
  if (total_bytes >= 1024.0 * 1024 * 1024) return (explain_unit){"GiB", 1024.0 * 1024 * 1024, 3};
  return (explain_unit){"MiB", 1024.0 * 1024, 3};
}

int explain_round(const double *v, int n, double total, explain_unit u, int64_t *out,
                  int64_t *total_q) {
  double q = u.scale * pow(10, -u.decimals), sum = 0;
  double rem[EXPLAIN_MAX_TERMS];
  int64_t floor_sum = 0;
  if (n > EXPLAIN_MAX_TERMS) return -1;
  for (int i = 0; i < n; i++) {
    double x = v[i] / q;
    out[i] = (int64_t)floor(x);
    rem[i] = x - (double)out[i];
    floor_sum += out[i];
    sum += v[i];
  }
  *total_q = (int64_t)llround(total / q);
  if (fabs(sum - total) > 0.5 * q) return -1;
  /* the quanta the floors lost go to the largest remainders */
  int64_t short_q = *total_q - floor_sum;
  if (short_q < 0 || short_q > n) return -1;
  for (int64_t k = 0; k < short_q; k++) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (rem[i] >= 0 && (best < 0 || rem[i] > rem[best])) best = i;
    out[best]++;
    rem[best] = -1;
  }
  return 0;
}

static cJSON *terms_json(const explain_term *t, int n, const char *key) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "term", t[i].name);
    cJSON_AddStringToObject(o, "formula", t[i].formula);
    cJSON_AddStringToObject(o, "values", t[i].values);
    cJSON_AddNumberToObject(o, key, t[i].value);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

cJSON *step_explain_json(const step_explain *e) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "time", terms_json(e->time, e->n_time, "value_s"));
  cJSON_AddNumberToObject(o, "step_time_s", e->step_time_s);
  cJSON_AddItemToObject(o, "memory", terms_json(e->mem, e->n_mem, "value_bytes"));
  cJSON_AddNumberToObject(o, "peak_bytes", e->peak_bytes);
  return o;
}
