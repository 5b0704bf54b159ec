/*
** step.c -- see step.h.
**
** 1. Per-chip layer times: the model is rebuilt as one tensor-parallel
**    shard with one and with two layers (forward + backward); the
**    difference is one layer, the rest the embedding, head and loss. Every
**    kernel the fusion pass forms (sim/fuse) is timed on the chip
**    (sim/optime): what crosses the kernel's boundary is its HBM traffic.
** 2. Collectives are timed on the network (sim/coll): tensor-parallel
**    all-reduces (or reduce-scatter/all-gather pairs with sequence
**    parallelism) inside each layer, point-to-point sends between stages,
**    the data-parallel gradient all-reduce in buckets.
** 3. The pipeline is scheduled on the event engine: each stage's chip takes
**    the highest-priority ready task (GPipe: forwards first; 1F1B and
**    interleaved: backwards first, with Megatron's limit on forwards in
**    flight), so the bubble and exposed communication fall out.
*/
#include "step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "engine.h"
#include "fuse.h"
#include "net.h"
#include "opcost.h"
#include "optime.h"
#include "../base/strutil.h"

#include <cjson/cJSON.h>

/* ---- per-chip op times ---- */

typedef struct {
  double t[GRAPH_PHASE_COUNT];
  double attn_fwd; /* the attention core: scores to context (for selective recompute) */
} phase_times;

/* One timed kernel of a layer, for the trace's detail of a micro-batch. */
typedef struct {
  int id; /* the kernel's root op, which names it */
  int n_ops;
  bool matrix; /* it holds a dot or convolution */
  graph_phase phase;
  double t_s, flops, bytes; /* per step: execution count applied */
} op_time;

typedef struct {
  op_time *v;
  int n, cap;
} op_times;

static int push_op(op_times *ops, op_time o, char *err, size_t errn) {
  if (ops->n == ops->cap) {
    int cap = ops->cap ? 2 * ops->cap : 128;
    op_time *v = realloc(ops->v, (size_t)cap * sizeof *v);
    if (!v) return str_errf(err, errn, "out of memory");
    ops->v = v, ops->cap = cap;
  }
  ops->v[ops->n++] = o;
  return 0;
}

/* Times g on hw kernel by kernel, as the fusion pass groups its ops
** (sim/fuse.h, with XLA's producer duplication): each kernel's HBM traffic
** is what crosses its boundary, its arithmetic on the matrix or vector
** unit (optime_kernel).
** With `flash`, the attention core (the ops on the [B, kv, S, group, T]
** scores and the batched dots around them) runs as one FlashAttention
** kernel: the scores never reach HBM, so those kernels cost their
** arithmetic only, and the backward recomputes the scores' product: 5
** batched GEMMs where the unfused backward has 4 (Dao et al. 2022,
** arXiv:2205.14135).
** With `ops`, also lists the kernels of layer 0 with their times. */
static int time_graph_ops(const hw_model *hw, const graph *g, bool flash, opcost *costs,
                          phase_times *out, op_times *ops, char *err, size_t errn) {
  fuse_plan *fp = fuse_graph_dup(g);
  if (!fp) return str_errf(err, errn, "out of memory");
  memset(out, 0, sizeof *out);
  int rc = 0;
  for (int k = 0; k < fp->n_groups && rc == 0; k++) {
    if (fp->size[k] == 0) continue;
    int root = fp->root[k];
    const graph_op *op = graph_get(g, root);
    bool core = op->out.rank == 5 && op->layer >= 0;
    graph_cost kc;
    if ((rc = opcost_kernel(costs, g, fp, k, &kc, err, errn)) != 0) break;
    optime_result r;
    if ((rc = optime_kernel(hw, g, fp, k, &kc, &r, err, errn)) != 0) break;
    double t = r.time_s;
    if (flash && core) {
      t = 0;
      for (int i = fp->first[k]; i <= root && rc == 0; i++) {
        if (fp->group_of[i] != k) continue;
        const graph_op *m = graph_get(g, i);
        optime_result mr;
        rc = optime_op(hw, g, i, &mr, err, errn);
        bool dot = m->kind == GOP_DOT;
        t += mr.compute_s * (dot && m->phase == GRAPH_BACKWARD ? 1.25 : 1) + (dot ? mr.overhead_s : 0);
      }
    }
    double n = (double)op->count;
    out->t[op->phase] += t * n;
    if (op->phase == GRAPH_FORWARD && core) out->attn_fwd += t * n;
    if (rc == 0 && ops && op->layer == 0 && t > 0 && op->phase != GRAPH_OPTIMIZER) {
      bool matrix = false; /* the trace's category: it holds a dot or convolution */
      for (int i = fp->first[k]; i <= root; i++) {
        graph_op_kind mk = graph_get(g, i)->kind;
        matrix |= fp->group_of[i] == k && (mk == GOP_DOT || mk == GOP_CONV);
      }
      rc = push_op(ops, (op_time){root, fp->size[k], matrix, op->phase, t * n, r.flops * n,
                                         r.bytes * n},
                   err, errn);
    }
  }
  fuse_free(fp);
  return rc;
}

static int time_graph(const hw_model *hw, const graph *g, opcost *costs, phase_times *out,
                      char *err, size_t errn) {
  return time_graph_ops(hw, g, false, costs, out, NULL, err, errn);
}

static const model *shard_of(const model *m, const plan *p, int64_t layers, model **owned,
                             char *err, size_t errn);

/* A non-transformer model's per-chip costs: its whole graph at one
** micro-batch (layer_fwd_s, layer_bwd_s: forward and backward of the
** micro-batch; optimizer_s: the update), and the bytes of its gradients. */
static int costs_generic(const model *m, const hw_model *hw, const plan *p, step_result *r,
                         char *err, size_t errn) {
  model *own;
  const model *one = shard_of(m, p, 0, &own, err, errn);
  if (!one) return -1;
  phase_times t;
  int rc = time_graph(hw, one->g, p->cost_cache, &t, err, errn);
  if (rc == 0) {
    r->layer_fwd_s = t.t[GRAPH_FORWARD];
    r->layer_bwd_s = t.t[GRAPH_BACKWARD];
    r->optimizer_s = t.t[GRAPH_OPTIMIZER];
    r->layers_per_stage = 1;
    /* gradient accumulation, as for transformers (step_costs) */
    r->grad_accum_layer_s = (double)one->trainable_params * 6 /
                            (hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency);
  }
  model_free(own);
  return rc;
}

/* The model as one chip of plan p holds it: its tensor-parallel shard at
** one micro-batch, with `layers` layers (0: all), built from the model in
** memory (model_derive: no file is read). An HLO module is its own shard:
** *owned stays NULL and m itself comes back. */
static const model *shard_of(const model *m, const plan *p, int64_t layers, model **owned,
                             char *err, size_t errn) {
  *owned = NULL;
  if (!m->spec) return m;
  diag *d = diag_new();
  model_opts o = {.seq_len = p->seq > 1 ? p->seq : 0,
                  .global_batch = m->info.whole_step ? 0 : p->mbs, .shard_tp = p->tp,
                  .only_layers = layers, .precision = plan_precision_name(p->precision)};
  *owned = d ? model_derive(m, &o, d) : NULL;
  if (!*owned) snprintf(err, errn, "%s", d && diag_count(d) ? diag_message(d, 0) : "cannot rebuild the model");
  diag_free(d);
  return *owned;
}

/* ---- collectives ---- */

static double coll_time_algo(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op,
                             double bytes, int64_t slices, int64_t reducers, coll_algo algo,
                             char *err, size_t errn) {
  if (chips < 2 || bytes <= 0) return 0;
  hw_model h = *hw;
  if (per_node > 0) h.chips_per_node = per_node;
  net *n = slices > 1 ? net_build(&h, chips, slices, err, errn) : net_build_group(&h, chips, err, errn);
  if (!n) return -1;
  coll_req r = {.op = op, .bytes = bytes, .axis = -1, .reducers = reducers,
                .algo = reducers ? COLL_REDUCTION_SERVER : algo};
  coll_result out;
  int rc = coll_run(n, &r, &out, err, errn);
  net_free(n);
  return rc == 0 ? out.time_s : -1;
}

static double coll_time(const hw_model *hw, int64_t chips, int64_t per_node, coll_op op,
                        double bytes, int64_t slices, int64_t reducers, char *err, size_t errn) {
  return coll_time_algo(hw, chips, per_node, op, bytes, slices, reducers, COLL_AUTO, err, errn);
}

/* ---- the pipeline ---- */

typedef struct {
  double dur;  /* on the stage's chip */
  double done; /* completion time, < 0 while pending */
  double ready; /* dependencies met at */
  int deps_left;
} task;

typedef struct {
  eng *e;
  const plan *p;
  int64_t S, M;     /* virtual stages, micro-batches */
  task *f, *b;      /* [vs * M + mb] */
  bool *busy;       /* per device */
  int64_t *order;   /* per device: its 2 M V tasks in order (+id+1 forward, -(id+1) backward) */
  int64_t *pos;     /* per device: the next task in its order */
  double p2p;
  double *last_b_start, *last_b_dur; /* per device: the last backward, for bucket overlap */
  double *vs_b_start, *vs_b_dur;     /* per virtual stage: its last backward (its gradients' ready) */
  double *busy_s;   /* per device */
  /* what ran, for the trace: start, end, device, +id+1 forward / -(id+1) backward */
  struct span { double t0, t1; int64_t dev, code; } *spans;
  int64_t n_spans, cap_spans;
} pipe;

static int64_t dev_of(const pipe *q, int64_t vs) { return vs % q->p->pp; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Each chip runs its tasks in Megatron's order (schedules.py): warm-up
** forwards, then one forward and one backward in turn, then the remaining
** backwards; GPipe runs every forward, then every backward. With V
** virtual stages, forward k is chunk (k / pp) mod V of micro-batch
** (k / (pp V)) pp + k mod pp, backward k the same with chunks reversed. */
static int64_t seq_task(const pipe *q, int64_t dev, int64_t k, bool back) {
  int64_t pp = q->p->pp, vp = q->p->vp;
  int64_t chunk = (k / pp) % vp, mb = (k / (pp * vp)) * pp + k % pp;
  if (back) chunk = vp - 1 - chunk;
  return (chunk * pp + dev) * q->M + mb;
}

static void build_order(pipe *q, int64_t dev) {
  int64_t pp = q->p->pp, vp = q->p->vp, total = q->M * vp, n = 0;
  int64_t warm = q->p->schedule == PLAN_GPIPE ? total
                 : q->p->schedule == PLAN_INTERLEAVED ? (pp - dev - 1) * 2 + (vp - 1) * pp
                                                      : pp - dev - 1;
  if (warm > total) warm = total;
  int64_t *o = q->order + dev * 2 * total;
  for (int64_t k = 0; k < warm; k++) o[n++] = seq_task(q, dev, k, false) + 1;
  for (int64_t i = 0; i < total - warm; i++) {
    o[n++] = seq_task(q, dev, warm + i, false) + 1;
    o[n++] = -(seq_task(q, dev, i, true) + 1);
  }
  for (int64_t k = total - warm; k < total; k++) o[n++] = -(seq_task(q, dev, k, true) + 1);
}

static void on_done(eng *e, void *ctx, int64_t arg);

/* The chip of `dev` starts its next task in order once its inputs are in. */
static void dispatch(pipe *q, int64_t dev) {
  int64_t total = q->M * q->p->vp;
  if (q->busy[dev] || q->pos[dev] == 2 * total) return;
  double now = eng_now(q->e);
  int64_t code = q->order[dev * 2 * total + q->pos[dev]];
  bool back = code < 0;
  int64_t id = (back ? -code : code) - 1;
  task *t = back ? &q->b[id] : &q->f[id];
  if (t->deps_left != 0 || t->ready > now) return; /* its release will call again */
  q->pos[dev]++;
  t->deps_left = -1;
  q->busy[dev] = true;
  q->busy_s[dev] += t->dur;
  if (back) {
    q->last_b_start[dev] = now;
    q->last_b_dur[dev] = t->dur;
    q->vs_b_start[id / q->M] = now;
    q->vs_b_dur[id / q->M] = t->dur;
  }
  if (q->n_spans == q->cap_spans) {
    int64_t cap = q->cap_spans ? 2 * q->cap_spans : 256;
    struct span *s = realloc(q->spans, (size_t)cap * sizeof *s);
    if (s) q->spans = s, q->cap_spans = cap;
  }
  if (q->n_spans < q->cap_spans)
    q->spans[q->n_spans++] = (struct span){now, now + t->dur, dev, code};
  eng_at(q->e, now + t->dur, on_done, q, code);
}

static void on_ready(eng *e, void *ctx, int64_t arg) {
  (void)e;
  pipe *q = ctx;
  dispatch(q, arg);
}

static void release(pipe *q, task *t, double at, int64_t dev) {
  if (--t->deps_left == 0) {
    if (at > t->ready) t->ready = at;
    eng_at(q->e, t->ready, on_ready, q, dev);
  } else if (at > t->ready) {
    t->ready = at;
  }
}

static void on_done(eng *e, void *ctx, int64_t arg) {
  pipe *q = ctx;
  bool back = arg < 0;
  int64_t id = (back ? -arg : arg) - 1, vs = id / q->M, mb = id % q->M, dev = dev_of(q, vs);
  double now = eng_now(e);
  q->busy[dev] = false;
  if (!back) {
    q->f[id].done = now;
    if (vs + 1 < q->S) release(q, &q->f[id + q->M], now + q->p2p, dev_of(q, vs + 1));
    release(q, &q->b[id], now, dev); /* a backward needs its own forward */
  } else {
    q->b[id].done = now;
    if (vs > 0) release(q, &q->b[id - q->M], now + q->p2p, dev_of(q, vs - 1));
  }
  (void)mb;
  dispatch(q, dev);
}

/* ---- the step ---- */

/* What the trace shows beyond the schedule: one layer's ops with their
** times (from a one-layer shard), and when each stage's update starts. */
typedef struct {
  const graph *g;
  const op_times *ops;
  const double *opt_t0; /* per stage */
} trace_detail;

static void write_trace(FILE *f, const pipe *q, const step_result *r, const plan *p,
                        const double *bucket_t0, const double *bucket_t1, int64_t buckets,
                        const char *model_name, const char *hw_name, const trace_detail *td);

/* The trace of a step simulated as a whole (a data-parallel model on one
** chip standing for all, or an HLO module): one process, the compute track
** with each micro-batch's forward and backward (an HLO module: its compute
** as one span), the network track with the gradient all-reduce as the
** simulation placed it (an HLO module: its collectives after its compute),
** the update, and HBM in use as a counter. */
static cJSON *trace_slice(cJSON *ev, const char *name, const char *cat, double t0_s, double dur_s,
                          int64_t pid, int tid);

/* A trace process (`pid`, named) with its tracks (tid 1.. in order). */
static void trace_process(cJSON *ev, int64_t pid, const char *name, const char *const *tracks,
                          int n_tracks) {
  cJSON *meta = cJSON_CreateObject();
  cJSON_AddStringToObject(meta, "name", "process_name");
  cJSON_AddStringToObject(meta, "ph", "M");
  cJSON_AddNumberToObject(meta, "pid", (double)pid);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "args"), "name", name);
  cJSON_AddItemToArray(ev, meta);
  for (int tid = 1; tid <= n_tracks; tid++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", "thread_name");
    cJSON_AddStringToObject(t, "ph", "M");
    cJSON_AddNumberToObject(t, "pid", (double)pid);
    cJSON_AddNumberToObject(t, "tid", tid);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "args"), "name", tracks[tid - 1]);
    cJSON_AddItemToArray(ev, t);
  }
}

/* The step's summary for viewers, then the JSON written and freed. */
static void trace_finish(FILE *f, cJSON *root, const step_result *r, const char *model_name,
                         const char *hw_name) {
  cJSON *other = cJSON_AddObjectToObject(root, "otherData");
  cJSON_AddStringToObject(other, "model", model_name);
  cJSON_AddStringToObject(other, "hw", hw_name);
  cJSON_AddNumberToObject(other, "step_time_s", r->step_time_s);
  cJSON_AddNumberToObject(other, "hbm_capacity_bytes", r->memory.capacity);
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  char *s = cJSON_PrintUnformatted(root);
  if (s) fprintf(f, "%s\n", s);
  free(s);
  cJSON_Delete(root);
}

static void write_trace_whole(FILE *f, const step_result *r, const char *model_name,
                              const char *hw_name, bool hlo) {
  cJSON *root = cJSON_CreateObject();
  cJSON *ev = cJSON_AddArrayToObject(root, "traceEvents");
  static const char *const TRACKS[] = {"compute", "network"};
  char name[96];
  snprintf(name, sizeof name, "chip 0 (one of the data-parallel group, %s)", hw_name);
  trace_process(ev, 0, name, TRACKS, 2);
  double t = 0, last_b = 0;
  if (hlo) {
    trace_slice(ev, "compute (the module's ops)", "forward", 0, r->breakdown_s.compute, 0, 1);
    t = r->breakdown_s.compute;
    if (r->breakdown_s.exposed_comm > 0)
      trace_slice(ev, "collectives", "collective", t, r->breakdown_s.exposed_comm, 0, 2);
    t += r->breakdown_s.exposed_comm;
  } else {
    for (int64_t mb = 0; mb < r->microbatches; mb++) {
      snprintf(name, sizeof name, "forward mb %lld", (long long)mb);
      trace_slice(ev, name, "forward", t, r->layer_fwd_s, 0, 1);
      t += r->layer_fwd_s;
      snprintf(name, sizeof name, "backward mb %lld", (long long)mb);
      last_b = t;
      trace_slice(ev, name, "backward", t, r->layer_bwd_s, 0, 1);
      t += r->layer_bwd_s + (mb > 0 ? r->grad_accum_layer_s : 0);
    }
    if (r->dp_allreduce_s > 0) /* started with the last backward; what shows runs past it */
      trace_slice(ev, "gradient all-reduce", "collective", last_b, r->dp_allreduce_s, 0, 2);
    t += r->exposed_dp_s;
  }
  if (r->optimizer_s > 0) trace_slice(ev, "optimizer update", "optimizer", t, r->optimizer_s, 0, 1);
  cJSON *cnt = cJSON_CreateObject();
  cJSON_AddStringToObject(cnt, "name", "HBM in use");
  cJSON_AddStringToObject(cnt, "ph", "C");
  cJSON_AddNumberToObject(cnt, "ts", 0);
  cJSON_AddNumberToObject(cnt, "pid", 0);
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(cnt, "args"), "bytes", r->memory.peak);
  cJSON_AddItemToArray(ev, cnt);
  trace_finish(f, root, r, model_name, hw_name);
}

/* What a whole-step graph holds and does, read off it: its parameters by
** role (weights and aux, optimizer state, the trainable ones' gradients,
** and parameters with no role -- an HLO module's), the forward values the
** backward reads (each once: a value a loop writes every trip is its
** stacked buffer), and its FLOPs by phase. */
typedef struct {
  double weights, gradients, optimizer, unflagged, saved;
  double flops[GRAPH_PHASE_COUNT];
} footprint;

static int footprint_of(const graph *g, footprint *f, char *err, size_t errn) {
  memset(f, 0, sizeof *f);
  int n = graph_count(g);
  char *used_back = calloc((size_t)n + 1, 1);
  if (!used_back) return str_errf(err, errn, "out of memory");
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    if (op->phase == GRAPH_BACKWARD)
      for (int k = 0; k < op->n_in; k++) used_back[op->in[k]] = 1;
  }
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    double b = graph_bytes(&op->out);
    if (op->kind == GOP_PARAMETER) {
      if (op->flags & GRAPH_OPT_STATE) f->optimizer += b;
      else if (op->flags & (GRAPH_WEIGHT | GRAPH_AUX)) f->weights += b;
      else f->unflagged += b;
      if (op->flags & GRAPH_TRAINABLE) f->gradients += b;
    } else if (op->phase == GRAPH_FORWARD && used_back[i]) {
      f->saved += b;
    }
    graph_cost c = graph_op_cost(g, i);
    f->flops[op->phase] += graph_cost_flops(&c) * (double)op->count;
  }
  free(used_back);
  return 0;
}

/* Data parallelism over a model the chips replicate: M micro-batches of
** forward and backward, the gradient all-reduce of which the part not
** hidden behind the last backward shows, the update. Memory from the graph:
** parameters, gradients, optimizer state, and the forward results the
** backward reads (kept for every micro-batch in flight: one). */
static int simulate_generic(const model *m, const hw_model *hw, const plan *p, step_result *r,
                            char *err, size_t errn) {
  model *own;
  const model *one = shard_of(m, p, 0, &own, err, errn);
  if (!one) return -1;
  footprint fp;
  if (footprint_of(one->g, &fp, err, errn) != 0) {
    model_free(own);
    return -1;
  }
  double weights = fp.weights, grads = fp.gradients, opt = fp.optimizer, saved = fp.saved;
  double flops = fp.flops[GRAPH_FORWARD] + fp.flops[GRAPH_BACKWARD];
  double M = m->info.whole_step ? 1 : (double)plan_microbatches(p);
  double compute = M * (r->layer_fwd_s + r->layer_bwd_s) + (M - 1) * r->grad_accum_layer_s;
  double ar = 0;
  if (p->dp > 1) {
    ar = coll_time_algo(hw, p->dp, 0, COLL_ALL_REDUCE, grads, p->slices, p->reduction_server,
                        (coll_algo)p->dp_algo, err, errn);
    if (ar < 0) {
      model_free(own);
      return -1;
    }
  }
  double exposed = ar > r->layer_bwd_s ? ar - r->layer_bwd_s : 0;
  r->dp_allreduce_s = ar;
  r->microbatches = (int64_t)M;
  r->step_time_s = compute + exposed + r->optimizer_s;
  r->breakdown_s.compute = compute;
  r->breakdown_s.exposed_comm = exposed;
  r->exposed_dp_s = exposed;
  r->breakdown_s.other = r->optimizer_s;
  r->memory = (mem_bytes){.weights = weights, .gradients = grads, .optimizer = opt,
                          .activations = saved, .capacity = (double)hw->chip.hbm_bytes};
  r->memory.peak = weights + grads + opt + saved;
  r->memory.fits = r->memory.peak <= r->memory.capacity;
  r->fits = r->memory.fits;
  r->model_flops_per_step = flops * M * (double)p->dp;
  r->hardware_flops_per_step = r->model_flops_per_step;
  double peak = optime_peak_flops(hw, p->precision) * (double)p->chips;
  r->mfu = r->hfu = peak > 0 ? r->model_flops_per_step / (r->step_time_s * peak) : 0;
  r->tokens_per_s = one->info.per_step * M * (double)p->dp / r->step_time_s;
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p->chips;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
  model_free(own);
  return 0;
}

/* An imported HLO module: one device's compiled program, run once a step
** on every device. Its ops are timed as a model's are (time_graph); its
** collectives -- all-reduce, all-gather, reduce-scatter, all-to-all over
** their replica groups -- by the network model, each where the program
** puts it and in series with the compute (XLA can overlap async
** collectives; this takes none). Memory: every entry parameter (the
** module does not tell weights from optimizer state; all are resident)
** plus the forward values the backward reads. */
static int simulate_hlo(const model *m, const hw_model *hw, const plan *p, step_result *r,
                        char *err, size_t errn) {
  const graph *g = m->g;
  phase_times t;
  if (time_graph(hw, g, p->cost_cache, &t, err, errn) != 0) return -1;
  double compute = t.t[GRAPH_FORWARD] + t.t[GRAPH_BACKWARD] + t.t[GRAPH_OPTIMIZER], comm = 0;
  footprint fp;
  if (footprint_of(g, &fp, err, errn) != 0) return -1;
  /* the module does not tell weights from optimizer state: all resident */
  double state = fp.weights + fp.optimizer + fp.unflagged, saved = fp.saved;
  double flops = fp.flops[GRAPH_FORWARD] + fp.flops[GRAPH_BACKWARD] + fp.flops[GRAPH_OPTIMIZER];
  int n = graph_count(g);
  int64_t node = hw->chips_per_node;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    coll_op k;
    double bytes;
    switch (op->kind) {
    case GOP_ALL_REDUCE: k = COLL_ALL_REDUCE, bytes = graph_bytes(&op->out); break;
    case GOP_ALL_GATHER: k = COLL_ALL_GATHER, bytes = graph_bytes(&op->out); break;
    case GOP_REDUCE_SCATTER: k = COLL_REDUCE_SCATTER, bytes = graph_bytes(&graph_get(g, op->in[0])->out); break;
    case GOP_ALL_TO_ALL: k = COLL_ALL_TO_ALL, bytes = graph_bytes(&op->out); break;
    default: continue;
    }
    int64_t grp = op->group_size > 1 ? op->group_size : 1;
    if (grp < 2 || bytes <= 0) continue;
    double ct = coll_time(hw, grp, grp <= node ? grp : node, k, bytes, 1, 0, err, errn);
    if (ct < 0) return -1;
    comm += ct * (double)op->count;
  }
  r->microbatches = 1;
  r->layer_fwd_s = t.t[GRAPH_FORWARD];
  r->layer_bwd_s = t.t[GRAPH_BACKWARD];
  r->optimizer_s = t.t[GRAPH_OPTIMIZER];
  r->step_time_s = compute + comm;
  r->breakdown_s.compute = t.t[GRAPH_FORWARD] + t.t[GRAPH_BACKWARD];
  r->breakdown_s.exposed_comm = comm;
  r->breakdown_s.other = t.t[GRAPH_OPTIMIZER];
  r->memory = (mem_bytes){.weights = state, .activations = saved, .capacity = (double)hw->chip.hbm_bytes};
  r->memory.peak = state + saved;
  r->memory.fits = r->memory.peak <= r->memory.capacity;
  r->fits = r->memory.fits;
  r->model_flops_per_step = r->hardware_flops_per_step = flops * (double)p->chips;
  double peak = optime_peak_flops(hw, p->precision) * (double)p->chips;
  r->mfu = r->hfu = peak > 0 && r->step_time_s > 0 ? r->model_flops_per_step / (r->step_time_s * peak) : 0;
  r->tokens_per_s = 1 / r->step_time_s;
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p->chips;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
  return 0;
}

/* The plan with a kernel-cost cache: its own, or a new one in *own (the
** caller frees it) for this call's timings to share. */
static int with_cache(plan *p, opcost **own, char *err, size_t errn) {
  *own = NULL;
  if (p->cost_cache) return 0;
  *own = opcost_new(p->op_costs);
  if (!*own) return str_errf(err, errn, "out of memory");
  p->cost_cache = *own;
  return 0;
}

static int costs_cached(const model *m, const hw_model *hw, const plan *pl, step_result *r,
                        char *err, size_t errn);

int step_costs(const model *m, const hw_model *hw, const plan *pl, step_result *r, char *err,
               size_t errn) {
  plan p = *pl;
  opcost *own;
  if (with_cache(&p, &own, err, errn) != 0) return -1;
  int rc = costs_cached(m, hw, &p, r, err, errn);
  r->op_costs = opcost_get_stats(p.cost_cache);
  opcost_free(own);
  return rc;
}

static int costs_cached(const model *m, const hw_model *hw, const plan *pl, step_result *r,
                        char *err, size_t errn) {
  memset(r, 0, sizeof *r);
  plan p = *pl;
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers == 0) return costs_generic(m, hw, &p, r, err, errn);
  /* 1. one layer's time on one chip */
  model *one, *two;
  if (!shard_of(m, &p, 1, &one, err, errn)) return -1;
  if (!shard_of(m, &p, 2, &two, err, errn)) {
    model_free(one);
    return -1;
  }
  phase_times t1, t2;
  bool flash = p.attention == PLAN_ATTN_FLASH;
  int rc = time_graph_ops(hw, one->g, flash, p.cost_cache, &t1, NULL, err, errn);
  if (rc == 0) rc = time_graph_ops(hw, two->g, flash, p.cost_cache, &t2, NULL, err, errn);
  /* Gradient accumulation: each micro-batch after the first adds its weight
  ** gradients into the step's buffer in a pass of its own -- PyTorch's
  ** AccumulateGrad, Megatron-LM's main_grad.add_ hook -- reading both and
  ** writing the sum: 3 x 2 B per trainable parameter (the 16-bit dtype the
  ** gradients are all-reduced in, as below) */
  double bw = hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency;
  double layer_params = (double)(two->trainable_params - one->trainable_params);
  r->grad_accum_layer_s = layer_params * 6 / bw;
  r->grad_accum_head_s = (double)(one->trainable_params - (int64_t)layer_params) * 6 / bw;
  model_free(one);
  model_free(two);
  if (rc != 0) return -1;
  r->layer_fwd_s = t2.t[GRAPH_FORWARD] - t1.t[GRAPH_FORWARD];
  r->layer_bwd_s = t2.t[GRAPH_BACKWARD] - t1.t[GRAPH_BACKWARD];
  r->attn_core_fwd_s = t2.attn_fwd - t1.attn_fwd;
  r->head_fwd_s = t1.t[GRAPH_FORWARD] - r->layer_fwd_s;
  r->head_bwd_s = t1.t[GRAPH_BACKWARD] - r->layer_bwd_s;

  /* 2. collectives */
  double act = (double)p.mbs * (double)p.seq * (double)d->hidden * 2; /* b s h, 16-bit */
  int64_t node = hw->chips_per_node;
  double ar = coll_time(hw, p.tp, p.tp <= node ? p.tp : node, COLL_ALL_REDUCE, act, 1, 0, err, errn);
  if (ar < 0) return -1;
  if (p.sp) { /* a reduce-scatter and an all-gather in place of each all-reduce */
    double rs = coll_time(hw, p.tp, p.tp <= node ? p.tp : node, COLL_REDUCE_SCATTER, act, 1, 0, err, errn);
    double ag = coll_time(hw, p.tp, p.tp <= node ? p.tp : node, COLL_ALL_GATHER, act, 1, 0, err, errn);
    if (rs < 0 || ag < 0) return -1;
    ar = rs + ag;
  }
  r->tp_comm_fwd_s = 2 * ar; /* Megatron: after attention and after the MLP */
  r->tp_comm_bwd_s = 2 * ar + (p.recompute == PLAN_RECOMPUTE_FULL ? 2 * ar : 0);
  if (p.ep > 1) { /* MoE: tokens to their experts' chips and back, each way twice */
    double a2a = coll_time(hw, p.ep, p.ep <= node ? p.ep : node, COLL_ALL_TO_ALL,
                           act * (double)(d->top_k > 0 ? d->top_k : 1), 1, 0, err, errn);
    if (a2a < 0) return -1;
    r->tp_comm_fwd_s += 2 * a2a;
    r->tp_comm_bwd_s += 2 * a2a + (p.recompute == PLAN_RECOMPUTE_FULL ? 2 * a2a : 0);
  }
  if (p.pp > 1) {
    /* each TP rank sends its 1/tp of the activations (Megatron's
    ** scatter-gather), to the next stage's chip: another node when a
    ** stage fills one */
    hw_model h = *hw;
    int64_t stage_chips = p.tp, per = stage_chips < node ? stage_chips : node;
    h.chips_per_node = per;
    net *n = net_build(&h, 2 * stage_chips, 1, err, errn);
    if (!n) return -1;
    int64_t pairs[64][2];
    int np = 0;
    for (int64_t i = 0; i < stage_chips && np < 64; i++, np++) {
      pairs[np][0] = i;
      pairs[np][1] = stage_chips + i;
    }
    double t;
    rc = coll_flows(n, (const int64_t(*)[2])pairs, np, act / (double)p.tp, &t);
    net_free(n);
    if (rc != 0) {
      snprintf(err, errn, "pipeline send failed");
      return -1;
    }
    r->p2p_s = t;
  }
  return 0;
}

/* --full: every chip of the machine on one network. The data-parallel
** group of (stage s, tensor rank t) is Megatron's rank layout's
** ((s x dp) + d) x tp + t for d = 0..dp-1 (expert-parallel ranks inside
** it); each runs a ring all-reduce, 2 (n - 1) steps of S/n to its
** neighbour. One step of every group's ring at once against one group's
** alone gives the contention the symmetric simulation leaves out; the
** all-reduce (and ZeRO-3's gathers) are scaled by it. Returns the factor
** (>= 1 within rounding), or -1 with err. */
static double full_contention(const hw_model *hw, const plan *p, double bytes, step_result *r,
                              char *err, size_t errn) {
  int64_t n = p->dp * p->ep, groups = p->pp * p->tp, chips = p->chips;
  net *nt = net_build(hw, chips, p->slices, err, errn);
  if (!nt) return -1;
  int64_t (*pairs)[2] = malloc((size_t)(n * groups) * sizeof *pairs);
  if (!pairs) {
    net_free(nt);
    return str_errf(err, errn, "out of memory");
  }
  int np = 0;
  for (int64_t s = 0; s < p->pp; s++)
    for (int64_t t = 0; t < p->tp; t++)
      for (int64_t d = 0; d < n; d++) {
        pairs[np][0] = (s * n + d) * p->tp + t;
        pairs[np][1] = (s * n + (d + 1) % n) * p->tp + t;
        np++;
      }
  double all = 0, one = 0;
  int rc = coll_flows(nt, (const int64_t(*)[2])pairs, np, bytes / (double)n, &all);
  if (rc == 0) rc = coll_flows(nt, (const int64_t(*)[2])pairs, (int)n, bytes / (double)n, &one);
  free(pairs);
  net_free(nt);
  if (rc != 0 || !(one > 0)) return str_errf(err, errn, "the full-machine all-reduce failed");
  r->full_contention = all / one;
  r->full_chips = chips;
  r->full_groups = groups;
  return r->full_contention > 1 ? r->full_contention : 1;
}

static int simulate_cached(const model *m, const hw_model *hw, const plan *pl,
                           const input_cfg *in, step_result *r, FILE *trace, char *err,
                           size_t errn);

int step_simulate(const model *m, const hw_model *hw, const plan *pl, const input_cfg *in,
                  step_result *r, FILE *trace, char *err, size_t errn) {
  plan p = *pl;
  opcost *own;
  if (with_cache(&p, &own, err, errn) != 0) return -1;
  int rc = simulate_cached(m, hw, &p, in, r, trace, err, errn);
  r->op_costs = opcost_get_stats(p.cost_cache);
  /* the fixes' plans are the caller's to simulate: not with a freed cache */
  for (int i = 0; i < r->n_fixes; i++) r->fixes[i].p.cost_cache = pl->cost_cache;
  opcost_free(own);
  return rc;
}

static int simulate_cached(const model *m, const hw_model *hw, const plan *pl,
                           const input_cfg *in, step_result *r, FILE *trace, char *err,
                           size_t errn) {
  plan p = *pl;
  const wl_tf_dims *d = &m->info.tf;
  int rc = step_costs(m, hw, &p, r, err, errn);
  if (rc != 0) return -1;
  if (strcmp(m->format, "hlo") == 0 || d->layers == 0) {
    bool hlo = strcmp(m->format, "hlo") == 0;
    rc = hlo ? simulate_hlo(m, hw, &p, r, err, errn) : simulate_generic(m, hw, &p, r, err, errn);
    if (rc == 0 && trace) write_trace_whole(trace, r, m->name, hw->name, hlo);
    return rc;
  }
  double recompute = p.recompute == PLAN_RECOMPUTE_FULL        ? r->layer_fwd_s
                     : p.recompute == PLAN_RECOMPUTE_SELECTIVE ? r->attn_core_fwd_s
                                                               : 0;
  int64_t node = hw->chips_per_node;
  int64_t L = d->layers / (p.pp * p.vp);
  r->layers_per_stage = d->layers / p.pp;
  double stage_params = (double)m->params / (double)(p.tp * p.pp);
  double grad_bytes = stage_params * 2;
  double dp_t = 0, ag_t = 0;
  if (p.dp > 1) {
    /* the data-parallel group: one chip per node (rails), or the slices */
    int64_t per = p.tp * p.pp >= node ? 1 : node / (p.tp * p.pp);
    if (hw->scale_up.kind == HW_UP_ICI_TORUS) per = 0;
    /* dense gradients average over dp x ep (experts only over dp): the
    ** larger group bounds the time */
    dp_t = coll_time_algo(hw, p.dp * p.ep, per, COLL_ALL_REDUCE, grad_bytes, p.slices,
                          p.reduction_server, (coll_algo)p.dp_algo, err, errn);
    if (dp_t < 0) return -1;
    /* ZeRO-3 / FSDP keeps 1/dp of the stage's weights: every micro-batch
    ** gathers them for its forward and again for its backward (FSDP frees
    ** them after use). A gather is the second half of the same algorithm's
    ** all-reduce (hierarchical across nodes: NVLink inside, the rails
    ** between), so half its time */
    if (p.zero >= 3) {
      ag_t = p.reduction_server ? coll_time(hw, p.dp * p.ep, per, COLL_ALL_REDUCE, grad_bytes,
                                            p.slices, 0, err, errn)
                                : dp_t;
      if (ag_t < 0) return -1;
      ag_t /= 2;
    }
  }
  if (p.full && dp_t > 0) {
    double f = full_contention(hw, &p, grad_bytes, r, err, errn);
    if (f < 0) return -1;
    dp_t *= f;
    ag_t *= f;
  }
  r->dp_allreduce_s = dp_t;
  r->zero3_gather_s = ag_t;
  /* fused Adam (apex FusedAdam): read weight, grad, master, m, v; write them back */
  double local = stage_params / (p.zero >= 1 ? (double)p.dp : 1);
  r->optimizer_s = local * 28 / (hw->chip.hbm_bw_bytes_per_s * hw->chip.hbm_efficiency);

  /* 3. the pipeline on the engine */
  double *bk0 = NULL, *bk1 = NULL, *opt_t0 = NULL; /* all-reduce buckets, updates */
  pipe q = {.p = &p, .S = p.pp * p.vp, .M = plan_microbatches(&p), .p2p = r->p2p_s};
  r->microbatches = q.M;
  if (q.M < 1) {
    snprintf(err, errn, "no micro-batches: gbs %lld < dp %lld x mbs %lld", (long long)p.gbs,
             (long long)p.dp, (long long)p.mbs);
    return -1;
  }
  size_t nt = (size_t)(q.S * q.M);
  q.e = eng_new();
  q.f = calloc(nt, sizeof *q.f);
  q.b = calloc(nt, sizeof *q.b);
  q.busy = calloc((size_t)p.pp, sizeof *q.busy);
  q.order = calloc(nt * 2, sizeof *q.order);
  q.pos = calloc((size_t)p.pp, sizeof *q.pos);
  q.last_b_start = calloc((size_t)p.pp, sizeof(double));
  q.last_b_dur = calloc((size_t)p.pp, sizeof(double));
  q.busy_s = calloc((size_t)p.pp, sizeof(double));
  q.vs_b_start = calloc((size_t)q.S, sizeof(double));
  q.vs_b_dur = calloc((size_t)q.S, sizeof(double));
  if (!q.e || !q.f || !q.b || !q.busy || !q.order || !q.pos || !q.last_b_start ||
      !q.last_b_dur || !q.busy_s || !q.vs_b_start || !q.vs_b_dur) {
    snprintf(err, errn, "out of memory");
    rc = -1;
    goto done;
  }
  /* the accumulation pass, averaged over the micro-batches (the first has none) */
  double accum = (double)(q.M - 1) / (double)q.M;
  double fwd_layer = r->layer_fwd_s + r->tp_comm_fwd_s;
  double bwd_layer = r->layer_bwd_s + recompute + r->tp_comm_bwd_s + accum * r->grad_accum_layer_s;
  for (int64_t vs = 0; vs < q.S; vs++)
    for (int64_t mb = 0; mb < q.M; mb++) {
      task *f = &q.f[vs * q.M + mb], *b = &q.b[vs * q.M + mb];
      f->dur = (double)L * fwd_layer;
      b->dur = (double)L * bwd_layer;
      if (ag_t > 0) { /* the chunk's gather, a layer ahead of compute: only the first layer's shows */
        double g = ag_t / (double)p.vp;
        f->dur = (f->dur > g ? f->dur : g) + g / (double)L;
        b->dur = (b->dur > g ? b->dur : g) + g / (double)L;
      }
      if (vs == 0) { /* the embedding sits with the first stage, the head with the last */
        f->dur += 0.5 * r->head_fwd_s;
        b->dur += 0.5 * (r->head_bwd_s + accum * r->grad_accum_head_s);
      }
      if (vs == q.S - 1) {
        f->dur += 0.5 * r->head_fwd_s;
        b->dur += 0.5 * (r->head_bwd_s + accum * r->grad_accum_head_s);
      }
      f->done = b->done = -1;
      f->deps_left = vs > 0 ? 1 : 0;           /* the previous stage's forward */
      b->deps_left = vs + 1 < q.S ? 2 : 1;     /* its own forward, the next stage's backward */
    }
  for (int64_t dev = 0; dev < p.pp; dev++) {
    build_order(&q, dev);
    eng_at(q.e, 0, on_ready, &q, dev);
  }
  eng_run(q.e);
  double end = 0;
  for (size_t i = 0; i < nt; i++) {
    if (q.b[i].done < 0) {
      snprintf(err, errn, "the pipeline schedule deadlocked (a bug; please report the plan)");
      rc = -1;
      goto done;
    }
  }
  /* 4. gradient buckets all-reduce while the backward runs: a layer's
  ** bucket is ready when the last micro-batch's backward of its chunk has
  ** passed it (interleaved: each chunk when its own last backward does, as
  ** Megatron's overlap_grad_reduce launches a chunk's buckets), and the
  ** buckets queue on the stage's network link in the order they are ready */
  double compute_dev0 = 0;
  int64_t nbk = r->layers_per_stage > 0 ? r->layers_per_stage : 1;
  bk0 = calloc((size_t)(p.pp * nbk), sizeof *bk0);
  bk1 = calloc((size_t)(p.pp * nbk), sizeof *bk1);
  opt_t0 = calloc((size_t)p.pp, sizeof *opt_t0);
  if (!bk0 || !bk1 || !opt_t0) {
    snprintf(err, errn, "out of memory");
    rc = -1;
    goto done;
  }
  for (int64_t dev = 0; dev < p.pp; dev++) {
    double last_b_end = q.last_b_start[dev] + q.last_b_dur[dev];
    double t = last_b_end;
    if (dp_t > 0) {
      int64_t buckets = nbk, per_chunk = buckets / p.vp > 0 ? buckets / p.vp : 1;
      double *ready = bk0 + dev * nbk; /* the ready times, then each bucket's start */
      for (int64_t j = 0; j < buckets; j++) {
        int64_t v = j / per_chunk < p.vp ? j / per_chunk : p.vp - 1, vs = v * p.pp + dev;
        ready[j] = p.grad_sync == PLAN_GRAD_AFTER_BACKWARD
                       ? last_b_end
                       : q.vs_b_start[vs] +
                             q.vs_b_dur[vs] * (double)(j - v * per_chunk + 1) / (double)per_chunk;
      }
      qsort(ready, (size_t)buckets, sizeof *ready, cmp_double);
      eng_res link = {0};
      for (int64_t j = 0; j < buckets; j++) {
        t = eng_res_use(&link, ready[j], dp_t / (double)buckets);
        bk1[dev * nbk + j] = t;
        bk0[dev * nbk + j] = t - dp_t / (double)buckets;
      }
      if (t < last_b_end) t = last_b_end;
    }
    opt_t0[dev] = t;
    t += r->optimizer_s;
    if (t > end) end = t;
    if (dev == 0) compute_dev0 = q.busy_s[0];
  }
  r->step_time_s = end;
  {
    double tp_total = (double)q.M * (double)(L * p.vp) * (r->tp_comm_fwd_s + r->tp_comm_bwd_s);
    double exposed_dp = end - r->optimizer_s;
    double last_b_end = q.last_b_start[0] + q.last_b_dur[0];
    exposed_dp = exposed_dp > last_b_end ? exposed_dp - last_b_end : 0;
    r->breakdown_s.compute = compute_dev0 - tp_total;
    r->breakdown_s.exposed_comm = tp_total + exposed_dp;
    r->exposed_dp_s = exposed_dp;
    r->breakdown_s.other = r->optimizer_s;
    r->breakdown_s.input_stall = 0;
    double bubble = end - compute_dev0 - exposed_dp - r->optimizer_s;
    r->breakdown_s.pipeline_bubble = bubble > 0 ? bubble : 0;
  }
  /* 5. the input pipeline of each host feeds this step time of compute */
  if (in) {
    input_cfg c = *in;
    int64_t hosts = p.chips / hw->chips_per_node > 0 ? p.chips / hw->chips_per_node : 1;
    c.samples_per_step = p.gbs / hosts > 0 ? p.gbs / hosts : 1;
    input_result ir;
    if (input_simulate(&c, r->step_time_s, 40, &ir, err, errn) != 0) {
      rc = -1;
      goto done;
    }
    r->breakdown_s.input_stall = ir.stall_s_per_step;
    r->step_time_s += ir.stall_s_per_step;
  }
  /* 6. memory per chip (Korthikanti et al. 2022 activations, ZeRO) */
  {
    mem_opts mo = mem_opts_from_train(&m->train, (double)m->trainable_params / (double)m->params,
                                      (double)hw->chip.hbm_bytes);
    mo.no_dropout = d->dropout <= 0;
    mo.flash_attention = p.attention == PLAN_ATTN_FLASH;
    plan mp = p; /* the memory model counts expert parallelism inside dp */
    mp.dp = p.dp * p.ep;
    if (mem_transformer(d, &mp, &mo, &r->memory, err, errn) != 0) {
      rc = -1;
      goto done;
    }
    r->fits = r->memory.fits;
    if (!r->fits) {
      r->n_fixes = mem_fixes(d, &mp, &mo, r->fixes, err, errn);
      if (r->n_fixes < 0) r->n_fixes = 0;
    }
  }
  /* 7. rates */
  {
    /* the model as loaded already is the step when batch and sequence
    ** match (a 405B graph takes a third of a second to build again) */
    model *full = NULL;
    if (p.gbs != m->train.global_batch || p.seq != m->train.seq_len) {
      diag *dg = diag_new();
      model_opts o = {.seq_len = p.seq, .global_batch = p.gbs, .forward_only = false};
      full = dg ? model_derive(m, &o, dg) : NULL;
      diag_free(dg);
      if (!full) {
        snprintf(err, errn, "cannot rebuild %s", m->name);
        rc = -1;
        goto done;
      }
    }
    const graph *fg = full ? full->g : m->g;
    graph_cost f = graph_total_cost(fg, GRAPH_FORWARD), b = graph_total_cost(fg, GRAPH_BACKWARD);
    r->model_flops_per_step = graph_cost_flops(&f) + graph_cost_flops(&b);
    double layer_f = graph_cost_flops(&f) / (double)d->layers; /* close enough for HFU */
    double rec = p.recompute == PLAN_RECOMPUTE_FULL ? graph_cost_flops(&f)
                 : p.recompute == PLAN_RECOMPUTE_SELECTIVE
                     ? layer_f * d->layers * (r->attn_core_fwd_s / (r->layer_fwd_s > 0 ? r->layer_fwd_s : 1))
                     : 0;
    r->hardware_flops_per_step = r->model_flops_per_step + rec;
    model_free(full);
  }
  if (trace) {
    /* the detail of micro-batch 0: layer 0's ops, timed as step_costs did */
    op_times ops = {0};
    phase_times pt;
    model *one;
    if (!shard_of(m, &p, 1, &one, err, errn) || time_graph_ops(hw, one->g, p.attention == PLAN_ATTN_FLASH, p.cost_cache, &pt, &ops,
                               err, errn) != 0) {
      model_free(one);
      free(ops.v);
      rc = -1;
      goto done;
    }
    trace_detail td = {one->g, &ops, opt_t0};
    write_trace(trace, &q, r, &p, bk0, bk1, dp_t > 0 ? nbk : 0, m->name, hw->name, &td);
    model_free(one);
    free(ops.v);
  }
  double peak = optime_peak_flops(hw, p.precision) * (double)p.chips;
  r->mfu = r->model_flops_per_step / (r->step_time_s * peak);
  r->hfu = r->hardware_flops_per_step / (r->step_time_s * peak);
  r->tokens_per_s = (double)p.gbs * (double)p.seq / r->step_time_s;
  r->usd_per_hour = hw->price.on_demand_usd_per_chip_hour * (double)p.chips;
  r->usd_per_step = r->usd_per_hour * r->step_time_s / 3600;
done:
  free(bk0);
  free(bk1);
  free(opt_t0);
  eng_free(q.e);
  free(q.f);
  free(q.b);
  free(q.busy);
  free(q.order);
  free(q.pos);
  free(q.last_b_start);
  free(q.last_b_dur);
  free(q.vs_b_start);
  free(q.vs_b_dur);
  free(q.busy_s);
  free(q.spans);
  return rc;
}

static cJSON *trace_slice(cJSON *ev, const char *name, const char *cat, double t0_s, double dur_s,
                          int64_t pid, int tid) {
  cJSON *x = cJSON_CreateObject();
  cJSON_AddStringToObject(x, "name", name);
  cJSON_AddStringToObject(x, "cat", cat);
  cJSON_AddStringToObject(x, "ph", "X");
  cJSON_AddNumberToObject(x, "ts", t0_s * 1e6);
  cJSON_AddNumberToObject(x, "dur", dur_s * 1e6);
  cJSON_AddNumberToObject(x, "pid", (double)pid);
  cJSON_AddNumberToObject(x, "tid", tid);
  cJSON_AddItemToArray(ev, x);
  return x;
}

/* Micro-batch 0's span, op by op on the "ops" track (thread 3): for each
** layer of the chunk its ops in graph order (a backward under full
** recompute first runs the layer's forward again), then the layer's
** tensor-parallel collectives on the network track, where Megatron has the
** chip wait for them. Named with the global layer, shaped, with FLOPs and
** bytes; what is left of the span (embedding, head) stays unlabelled. */
static void trace_ops(cJSON *ev, const struct span *s, bool back, int64_t first_layer, int64_t layers,
                      const step_result *r, const plan *p, const trace_detail *td) {
  /* a layer's ops in the one-layer shard differ a little from the layer's
  ** time (the difference of two shards) at the layer's edges: scale them
  ** to it, so each layer's ops and collectives fill its share of the span */
  double sum[GRAPH_PHASE_COUNT] = {0};
  for (int k = 0; k < td->ops->n; k++) sum[td->ops->v[k].phase] += td->ops->v[k].t_s;
  double scale[GRAPH_PHASE_COUNT] = {1, 1, 1};
  if (sum[GRAPH_FORWARD] > 0) scale[GRAPH_FORWARD] = r->layer_fwd_s / sum[GRAPH_FORWARD];
  if (sum[GRAPH_BACKWARD] > 0) scale[GRAPH_BACKWARD] = r->layer_bwd_s / sum[GRAPH_BACKWARD];
  double t = s->t0, slack = 1e-9 * (s->t1 - s->t0);
  for (int64_t l = 0; l < layers; l++) {
    for (int pass = 0; pass < 2; pass++) {
      bool recompute = back && pass == 0;
      if (pass == 0 && back && p->recompute != PLAN_RECOMPUTE_FULL) continue;
      if (pass == 1 && !back) continue;
      graph_phase want = (back && !recompute) ? GRAPH_BACKWARD : GRAPH_FORWARD;
      for (int k = 0; k < td->ops->n; k++) {
        const op_time *o = &td->ops->v[k];
        double dur = o->t_s * scale[o->phase];
        if (o->phase != want || t + dur > s->t1 + slack) continue;
        const graph_op *op = graph_get(td->g, o->id);
        const char *nm = op->name ? op->name : graph_op_name(op->kind);
        const char *tail = strchr(nm, '/');
        char name[128], shape[96];
        snprintf(name, sizeof name, "%sl%lld%s", recompute ? "recompute " : "",
                 (long long)(first_layer + l), tail ? tail : "");
        graph_shape_str(&op->out, shape, sizeof shape);
        cJSON *x = trace_slice(ev, name, o->matrix ? "matmul" : "elementwise", t, dur, s->dev, 3);
        cJSON *args = cJSON_AddObjectToObject(x, "args");
        cJSON_AddStringToObject(args, "shape", shape);
        cJSON_AddNumberToObject(args, "fused_ops", o->n_ops);
        cJSON_AddNumberToObject(args, "flops", o->flops);
        cJSON_AddNumberToObject(args, "bytes", o->bytes);
        t += dur;
      }
    }
    double comm = back ? r->tp_comm_bwd_s : r->tp_comm_fwd_s;
    if (comm > 0 && t + comm <= s->t1 + slack) {
      char name[64];
      snprintf(name, sizeof name, "l%lld tensor-parallel %s", (long long)(first_layer + l),
               p->sp ? "reduce-scatter/all-gather" : "all-reduce");
      trace_slice(ev, name, "collective", t, comm, s->dev, 2);
      t += comm;
    }
  }
}

/* Chrome trace event format (ts and dur in microseconds): one process per
** stage, thread 1 compute, thread 2 network, thread 3 the ops of
** micro-batch 0; "C" events for HBM in use. */
static void write_trace(FILE *f, const pipe *q, const step_result *r, const plan *p,
                        const double *bucket_t0, const double *bucket_t1, int64_t buckets,
                        const char *model_name, const char *hw_name, const trace_detail *td) {
  cJSON *root = cJSON_CreateObject();
  cJSON *ev = cJSON_AddArrayToObject(root, "traceEvents");
  double fixed = r->memory.weights + r->memory.gradients + r->memory.optimizer + r->memory.temporary;
  double per_chunk = r->memory.act_layer * (double)(r->layers_per_stage / (p->vp > 0 ? p->vp : 1));
  static const char *const TRACKS[] = {"compute", "network", "ops (micro-batch 0)"};
  for (int64_t dev = 0; dev < p->pp; dev++) {
    char name[96];
    snprintf(name, sizeof name, "stage %lld (%lld x %s)", (long long)dev,
             (long long)(p->tp * p->dp), hw_name);
    trace_process(ev, dev, name, TRACKS, 3);
  }
  /* HBM: fixed state plus the activations of the micro-batches in flight */
  double *in_use = calloc((size_t)(p->pp > 0 ? p->pp : 1), sizeof *in_use);
  for (int64_t i = 0; i < q->n_spans; i++) {
    const struct span *s = &q->spans[i];
    bool back = s->code < 0;
    int64_t id = (back ? -s->code : s->code) - 1, vs = id / q->M, mb = id % q->M;
    char name[96];
    snprintf(name, sizeof name, "%s mb %lld chunk %lld", back ? "backward" : "forward",
             (long long)mb, (long long)(vs / p->pp));
    trace_slice(ev, name, back ? "backward" : "forward", s->t0, s->t1 - s->t0, s->dev, 1);
    int64_t layers = r->layers_per_stage / (p->vp > 0 ? p->vp : 1);
    if (mb == 0 && td) trace_ops(ev, s, back, vs * layers, layers, r, p, td);
    if (in_use) {
      in_use[s->dev] += back ? -per_chunk : per_chunk;
      cJSON *cnt = cJSON_CreateObject();
      cJSON_AddStringToObject(cnt, "name", "HBM in use");
      cJSON_AddStringToObject(cnt, "ph", "C");
      cJSON_AddNumberToObject(cnt, "ts", (back ? s->t1 : s->t0) * 1e6);
      cJSON_AddNumberToObject(cnt, "pid", (double)s->dev);
      cJSON_AddNumberToObject(cJSON_AddObjectToObject(cnt, "args"), "bytes", fixed + in_use[s->dev]);
      cJSON_AddItemToArray(ev, cnt);
    }
  }
  free(in_use);
  for (int64_t dev = 0; dev < p->pp; dev++)
    for (int64_t j = 0; j < buckets; j++) {
      char name[64];
      snprintf(name, sizeof name, "all-reduce bucket %lld", (long long)j);
      trace_slice(ev, name, "collective", bucket_t0[dev * buckets + j],
                  bucket_t1[dev * buckets + j] - bucket_t0[dev * buckets + j], dev, 2);
    }
  for (int64_t dev = 0; td && dev < p->pp; dev++)
    if (r->optimizer_s > 0) trace_slice(ev, "optimizer update", "optimizer", td->opt_t0[dev], r->optimizer_s, dev, 1);
  trace_finish(f, root, r, model_name, hw_name);
}

/* Fixes that fit first, cheapest first: chip-seconds a step (a fix that
** adds chips pays for them); then the rest by peak. */
static bool fix_before(const mem_fix *a, const mem_fix *b) {
  if (a->fits != b->fits) return a->fits;
  if (a->fits && a->step_time_s > 0 && b->step_time_s > 0)
    return a->step_time_s * (double)a->p.chips < b->step_time_s * (double)b->p.chips;
  return a->peak < b->peak;
}

int step_price_fixes(const model *m, const hw_model *hw, const plan *p, step_result *r, char *err,
                     size_t errn) {
  for (int i = 0; i < r->n_fixes; i++) {
    mem_fix *f = &r->fixes[i];
    plan q = f->p;
    q.ep = p->ep; /* the memory model folded ep into dp */
    q.dp = f->p.dp / (p->ep > 0 ? p->ep : 1);
    step_result s;
    char e2[256];
    f->step_time_s = 0;
    /* a fix the plan rules cannot run (e.g. more TP than heads allow) stays unpriced */
    if (plan_check(m, hw, &q, e2, sizeof e2) != 0) continue;
    if (step_simulate(m, hw, &q, NULL, &s, NULL, err, errn) != 0) return -1;
    f->step_time_s = s.step_time_s;
  }
  for (int i = 1; i < r->n_fixes; i++) /* insertion sort: stable, deterministic */
    for (int j = i; j > 0 && fix_before(&r->fixes[j], &r->fixes[j - 1]); j--) {
      mem_fix t = r->fixes[j];
      r->fixes[j] = r->fixes[j - 1];
      r->fixes[j - 1] = t;
    }
  return 0;
}

cJSON *step_json(const model *m, const hw_model *hw, const plan *p, const step_result *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->name);
  cJSON_AddStringToObject(o, "hw", hw->name);
  cJSON_AddNumberToObject(o, "chips", (double)p->chips);
  cJSON *pj = cJSON_AddObjectToObject(o, "plan");
  cJSON_AddNumberToObject(pj, "dp", (double)p->dp);
  cJSON_AddNumberToObject(pj, "tp", (double)p->tp);
  cJSON_AddNumberToObject(pj, "pp", (double)p->pp);
  cJSON_AddNumberToObject(pj, "ep", (double)p->ep);
  cJSON_AddNumberToObject(pj, "zero", p->zero);
  cJSON_AddNumberToObject(pj, "mbs", (double)p->mbs);
  cJSON_AddNumberToObject(pj, "gbs", (double)p->gbs);
  cJSON_AddNumberToObject(pj, "seq", (double)p->seq);
  cJSON_AddStringToObject(pj, "recompute", plan_recompute_names[p->recompute]);
  cJSON_AddStringToObject(pj, "precision", plan_precision_name(p->precision));
  cJSON_AddStringToObject(pj, "pp_schedule", plan_schedule_names[p->schedule]);
  cJSON_AddNumberToObject(pj, "vp", (double)p->vp);
  cJSON_AddBoolToObject(pj, "sp", p->sp);
  cJSON_AddStringToObject(pj, "grad_sync", plan_grad_sync_names[p->grad_sync]);
  cJSON_AddStringToObject(pj, "attention", plan_attention_names[p->attention]);
  if (p->full) {
    cJSON *fu = cJSON_AddObjectToObject(o, "full");
    cJSON_AddNumberToObject(fu, "chips", (double)r->full_chips);
    cJSON_AddNumberToObject(fu, "dp_groups", (double)r->full_groups);
    cJSON_AddNumberToObject(fu, "allreduce_contention", r->full_contention);
  }
  cJSON_AddNumberToObject(o, "step_time_s", r->step_time_s);
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "mfu", r->mfu);
  cJSON_AddNumberToObject(o, "hfu", r->hfu);
  cJSON_AddNumberToObject(o, "model_flops_per_step", r->model_flops_per_step);
  cJSON *b = cJSON_AddObjectToObject(o, "breakdown_s");
  cJSON_AddNumberToObject(b, "compute", r->breakdown_s.compute);
  cJSON_AddNumberToObject(b, "exposed_comm", r->breakdown_s.exposed_comm);
  cJSON_AddNumberToObject(b, "pipeline_bubble", r->breakdown_s.pipeline_bubble);
  cJSON_AddNumberToObject(b, "input_stall", r->breakdown_s.input_stall);
  cJSON_AddNumberToObject(b, "other", r->breakdown_s.other);
  cJSON *mem = cJSON_AddObjectToObject(o, "memory_bytes");
  cJSON_AddNumberToObject(mem, "weights", r->memory.weights);
  cJSON_AddNumberToObject(mem, "gradients", r->memory.gradients);
  cJSON_AddNumberToObject(mem, "optimizer", r->memory.optimizer);
  cJSON_AddNumberToObject(mem, "activations", r->memory.activations);
  cJSON_AddNumberToObject(mem, "temporary", r->memory.temporary);
  cJSON_AddNumberToObject(mem, "peak", r->memory.peak);
  cJSON_AddNumberToObject(mem, "capacity", r->memory.capacity);
  cJSON_AddBoolToObject(o, "fits", r->fits);
  if (!r->fits) {
    cJSON *fx = cJSON_AddArrayToObject(o, "fixes");
    for (int i = 0; i < r->n_fixes; i++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "change", r->fixes[i].what);
      cJSON_AddNumberToObject(x, "peak_bytes", r->fixes[i].peak);
      cJSON_AddBoolToObject(x, "fits", r->fixes[i].fits);
      if (r->fixes[i].step_time_s > 0)
        cJSON_AddNumberToObject(x, "step_time_s", r->fixes[i].step_time_s);
      cJSON_AddItemToArray(fx, x);
    }
  }
  cJSON *cost = cJSON_AddObjectToObject(o, "cost");
  cJSON_AddNumberToObject(cost, "usd_per_hour", r->usd_per_hour);
  cJSON_AddNumberToObject(cost, "usd_per_step", r->usd_per_step);
  cJSON *oc = cJSON_AddObjectToObject(o, "op_costs");
  cJSON_AddStringToObject(oc, "source", p->op_costs == OPCOST_FORMULA ? "formula" : "ir");
  cJSON_AddNumberToObject(oc, "kernels", (double)r->op_costs.asked);
  cJSON_AddNumberToObject(oc, "signatures_lowered", (double)r->op_costs.lowered);
  cJSON_AddNumberToObject(oc, "cache_hits", (double)r->op_costs.hits);
  cJSON_AddNumberToObject(oc, "declared", (double)r->op_costs.declared);
  cJSON_AddNumberToObject(oc, "ir_differs", (double)r->op_costs.differ);
  return o;
}
