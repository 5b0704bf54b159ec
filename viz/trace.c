/*
** trace.c -- see trace.h. Chrome trace event format (ts and dur in
** microseconds), which Perfetto and chrome://tracing open.
*/
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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
static void trace_ops(cJSON *ev, const sched_span *s, bool back, int64_t first_layer, int64_t layers,
                      const step_result *r, const plan *p, const step_timeline *td) {
  /* a layer's ops in the one-layer shard differ a little from the layer's
  ** time (the difference of two shards) at the layer's edges: scale them
  ** to it, so each layer's ops and collectives fill its share of the span */
  double sum[GRAPH_PHASE_COUNT] = {0};
  for (int k = 0; k < td->n_ops; k++) sum[td->ops[k].phase] += td->ops[k].t_s;
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
      for (int k = 0; k < td->n_ops; k++) {
        const step_op *o = &td->ops[k];
        double dur = o->t_s * scale[o->phase];
        if (o->phase != want || t + dur > s->t1 + slack) continue;
        const graph_op *op = graph_get(td->layer->g, o->id);
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
static void write_trace(FILE *f, const step_timeline *q, const step_result *r, const plan *p,
                        const char *model_name, const char *hw_name) {
  const step_timeline *td = q->layer ? q : NULL;
  const double *bucket_t0 = q->bucket_t0, *bucket_t1 = q->bucket_t1;
  int64_t buckets = q->buckets;
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
    const sched_span *s = &q->spans[i];
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


int trace_write(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                const char *model_name, const char *hw_name) {
  if (tl->whole) write_trace_whole(f, r, model_name, hw_name, tl->hlo);
  else write_trace(f, tl, r, p, model_name, hw_name);
  return ferror(f) ? -1 : 0;
}
