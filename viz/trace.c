/*
** trace.c -- see trace.h. Chrome trace event format (ts and dur in
** microseconds), which Perfetto and chrome://tracing open.
**
** The trace is streamed, event by event, so writing it costs no memory
** beyond the timeline it is read from (building it as one cJSON tree cost
** ten times the file: 3.2 GB for a 344 MB trace). One emitter serves three
** passes through a `tout`, so that the size checked is the size written:
** a count with each number at its shortest and longest printed width
** (cheap: no number is formatted), an exact count when those bounds
** straddle the limit, and the write itself. Text is byte for byte what
** cJSON_PrintUnformatted printed before (its number and string rules are
** reproduced below), so existing traces and their readers are unchanged.
*/
#include "trace.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/units.h"
#include "../sim/framework.h"

/* ---- the output: a file, or a count ---- */

typedef enum { OUT_BOUNDS, OUT_EXACT, OUT_FILE } out_mode;

/* Widest number cJSON prints: "%1.17g" of a negative subnormal,
** "-2.2250738585072014e-308" (24 characters). */
#define NUM_MAX_CHARS 24

/* A number's printed text, by its bits (num's cache). */
#define NUM_CACHE_BITS 10
typedef struct {
  uint64_t bits;
  uint8_t len; /* 0: empty */
  char text[NUM_MAX_CHARS];
} num_text;

typedef struct {
  out_mode mode;
  FILE *f;             /* OUT_FILE only */
  uint64_t lo, hi;     /* bytes so far, numbers at their narrowest / widest (equal unless OUT_BOUNDS) */
  uint64_t ev_lo, ev_hi;  /* where the open event began */
  uint64_t big_lo, big_hi; /* the largest event (or otherData) so far */
  uint64_t stop;       /* OUT_EXACT: past this many bytes the count stops being exact */
  int64_t events;
  bool any;            /* an event is in traceEvents already (the next needs a comma) */
  bool nomem;
  num_text cache[1 << NUM_CACHE_BITS];
} tout;

static void put(tout *o, const char *s, size_t n) {
  o->lo += n, o->hi += n;
  if (o->mode == OUT_FILE) fwrite(s, 1, n, o->f);
}

static void raw(tout *o, const char *s) { put(o, s, strlen(s)); }

/* A JSON string as cJSON prints it: '"' and '\\' escaped, the control
** characters with their short escape or as \u00XX, other bytes as they
** are. Runs of plain bytes go out in one piece. */
static void str(tout *o, const char *s) {
  raw(o, "\"");
  const char *c = s ? s : "";
  for (;;) {
    size_t run = 0;
    while (c[run] && c[run] != '"' && c[run] != '\\' && (unsigned char)c[run] >= 32) run++;
    put(o, c, run);
    c += run;
    if (!*c) break;
    char esc[8];
    switch (*c) {
    case '"': raw(o, "\\\""); break;
    case '\\': raw(o, "\\\\"); break;
    case '\b': raw(o, "\\b"); break;
    case '\f': raw(o, "\\f"); break;
    case '\n': raw(o, "\\n"); break;
    case '\r': raw(o, "\\r"); break;
    case '\t': raw(o, "\\t"); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(unsigned char)*c);
      raw(o, esc);
    }
    c++;
  }
  raw(o, "\"");
}

/* An int's decimal digits into b (no terminator); returns how many. The
** common case (pids, tids, op counts), printed without printf. */
static int int_text(char b[16], int v) {
  char t[16];
  int n = 0, k = 0;
  unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
  do t[n++] = (char)('0' + u % 10); while (u /= 10);
  if (v < 0) b[k++] = '-';
  while (n) b[k++] = t[--n];
  return k;
}

/* A number as cJSON 1.7 prints it (print_number): null for NaN and the
** infinities, an integer when it equals its int (cJSON's valueint, clamped
** to int's range), else %1.15g, or %1.17g when 15 digits do not read back
** as the same double. Counting bounds, a non-integer is 3 ("0.5") to
** NUM_MAX_CHARS wide, unformatted. An exact count past the limit stops
** formatting: that it is past is all it needs to know. */
static void num(tout *o, double d) {
  char b[32];
  int n;
  if (!isfinite(d)) {
    put(o, "null", 4);
    return;
  }
  int vi = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
  if (d == (double)vi) {
    put(o, b, (size_t)int_text(b, vi));
    return;
  }
  if (o->mode == OUT_BOUNDS || (o->mode == OUT_EXACT && o->lo > o->stop)) {
    o->lo += 3, o->hi += NUM_MAX_CHARS;
    return;
  }
  /* formatting is most of a trace's cost, and durations, HBM figures and
  ** a counter's time (a forward's start) repeat: keep the last text of
  ** each of 2^NUM_CACHE_BITS hashed values */
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  num_text *c = &o->cache[(bits * 0x9E3779B97F4A7C15u) >> (64 - NUM_CACHE_BITS)];
  if (c->len && c->bits == bits) {
    put(o, c->text, c->len);
    return;
  }
  n = snprintf(b, sizeof b, "%1.15g", d);
  double back = strtod(b, NULL), m = fabs(back) > fabs(d) ? fabs(back) : fabs(d);
  if (!(fabs(back - d) <= m * DBL_EPSILON)) n = snprintf(b, sizeof b, "%1.17g", d);
  c->bits = bits;
  c->len = (uint8_t)n;
  memcpy(c->text, b, (size_t)n);
  put(o, b, (size_t)n);
}

/* An event of traceEvents: its comma, then '{'; event_close ends it and
** keeps the largest, which the viewer bounds too (VIEW_TRACE_MAX_PART). */
static void event_open(tout *o) {
  if (o->any) raw(o, ",");
  o->any = true;
  o->ev_lo = o->lo, o->ev_hi = o->hi;
  raw(o, "{");
}

static void part_end(tout *o) {
  if (o->lo - o->ev_lo > o->big_lo) o->big_lo = o->lo - o->ev_lo;
  if (o->hi - o->ev_hi > o->big_hi) o->big_hi = o->hi - o->ev_hi;
}

static void event_close(tout *o) {
  raw(o, "}");
  part_end(o);
  o->events++;
}

/* ---- events ---- */

/* A trace process (`pid`, named) with its tracks (tid 1.. in order). */
static void trace_process(tout *o, int64_t pid, const char *name, const char *const *tracks,
                          int n_tracks) {
  event_open(o);
  raw(o, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
  num(o, (double)pid);
  raw(o, ",\"args\":{\"name\":");
  str(o, name);
  raw(o, "}");
  event_close(o);
  for (int tid = 1; tid <= n_tracks; tid++) {
    event_open(o);
    raw(o, "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
    num(o, (double)pid);
    raw(o, ",\"tid\":");
    num(o, tid);
    raw(o, ",\"args\":{\"name\":");
    str(o, tracks[tid - 1]);
    raw(o, "}");
    event_close(o);
  }
}

/* A box ("X" event) left open, so that args can follow; event_close ends it. */
static void slice_open(tout *o, const char *name, const char *cat, double t0_s, double dur_s,
                       int64_t pid, int tid) {
  event_open(o);
  raw(o, "\"name\":");
  str(o, name);
  raw(o, ",\"cat\":");
  str(o, cat);
  raw(o, ",\"ph\":\"X\",\"ts\":");
  num(o, t0_s * 1e6);
  raw(o, ",\"dur\":");
  num(o, dur_s * 1e6);
  raw(o, ",\"pid\":");
  num(o, (double)pid);
  raw(o, ",\"tid\":");
  num(o, tid);
}

static void trace_slice(tout *o, const char *name, const char *cat, double t0_s, double dur_s,
                        int64_t pid, int tid) {
  slice_open(o, name, cat, t0_s, dur_s, pid, tid);
  event_close(o);
}

/* A "C" event: HBM in use on one process from ts on. */
static void hbm_counter(tout *o, double ts_s, int64_t pid, double bytes) {
  event_open(o);
  raw(o, "\"name\":\"HBM in use\",\"ph\":\"C\",\"ts\":");
  num(o, ts_s * 1e6);
  raw(o, ",\"pid\":");
  num(o, (double)pid);
  raw(o, ",\"args\":{\"bytes\":");
  num(o, bytes);
  raw(o, "}");
  event_close(o);
}

static void trace_start(tout *o) { raw(o, "{\"traceEvents\":["); }

/* The step's summary for viewers after the events; the viewer reads
** otherData as one part, so it counts as an event for the largest. */
static void trace_finish(tout *o, const step_result *r, const char *model_name,
                         const char *hw_name) {
  raw(o, "],\"otherData\":");
  o->ev_lo = o->lo, o->ev_hi = o->hi;
  raw(o, "{\"model\":");
  str(o, model_name);
  raw(o, ",\"hw\":");
  str(o, hw_name);
  raw(o, ",\"step_time_s\":");
  num(o, r->step_time_s);
  raw(o, ",\"hbm_capacity_bytes\":");
  num(o, r->memory.capacity);
  raw(o, "}");
  part_end(o);
  raw(o, ",\"displayTimeUnit\":\"ms\"}\n");
}

/* The input stall on its own lane: the chips idle at the end of the step,
** waiting for the host's next batch (sim/input.c; the step time includes
** it), so the next step's compute starts after it. */
static void input_stall_slice(tout *o, const step_result *r, int64_t pid, int tid) {
  double st = r->breakdown_s.input_stall;
  if (st > 0)
    trace_slice(o, "input stall (waiting for the host's batch)", "input", r->step_time_s - st, st,
                pid, tid);
}

static void write_trace_whole(tout *o, const step_result *r, const char *model_name,
                              const char *hw_name, bool hlo) {
  trace_start(o);
  static const char *const TRACKS[] = {"compute", "network", "input"};
  char name[96];
  snprintf(name, sizeof name, "chip 0 (one of the data-parallel group, %s)", hw_name);
  trace_process(o, 0, name, TRACKS, r->breakdown_s.input_stall > 0 ? 3 : 2);
  double t = 0, last_b = 0;
  if (hlo) {
    trace_slice(o, "compute (the module's ops)", "forward", 0, r->breakdown_s.compute, 0, 1);
    t = r->breakdown_s.compute;
    if (r->breakdown_s.exposed_comm > 0)
      trace_slice(o, "collectives", "collective", t, r->breakdown_s.exposed_comm, 0, 2);
    t += r->breakdown_s.exposed_comm;
  } else {
    for (int64_t mb = 0; mb < r->microbatches; mb++) {
      snprintf(name, sizeof name, "forward mb %lld", (long long)mb);
      trace_slice(o, name, "forward", t, r->layer_fwd_s, 0, 1);
      t += r->layer_fwd_s;
      snprintf(name, sizeof name, "backward mb %lld", (long long)mb);
      last_b = t;
      trace_slice(o, name, "backward", t, r->layer_bwd_s, 0, 1);
      t += r->layer_bwd_s + (mb > 0 ? r->grad_accum_layer_s : 0);
    }
    if (r->dp_allreduce_s > 0) /* started with the last backward; what shows runs past it */
      trace_slice(o, "gradient all-reduce", "collective", last_b, r->dp_allreduce_s, 0, 2);
    t += r->exposed_dp_s;
  }
  if (r->optimizer_s > 0) trace_slice(o, "optimizer update", "optimizer", t, r->optimizer_s, 0, 1);
  input_stall_slice(o, r, 0, 3);
  hbm_counter(o, 0, 0, r->memory.peak);
  trace_finish(o, r, model_name, hw_name);
}

/* The collectives a layer of kind k waits for, named: "tensor-parallel
** all-reduce", "... + expert all-to-all" and so on. */
static void layer_comm_name(char *buf, size_t len, int64_t layer, int k, const plan *p) {
  int n = snprintf(buf, len, "l%lld", (long long)layer);
  const char *sep = " ";
  if (p->tp > 1)
    n += snprintf(buf + n, len - (size_t)n, "%stensor-parallel %s", sep,
                  p->sp ? "reduce-scatter/all-gather" : "all-reduce"),
        sep = " + ";
  if (p->cp > 1 && !(k & (WL_LAYER_MAMBA | WL_LAYER_NO_MIXER)))
    n += snprintf(buf + n, len - (size_t)n, "%scontext-parallel %s", sep,
                  plan_cp_comm_names[framework_cp_comm(p)]),
        sep = " + ";
  if (p->ep > 1 && (k & WL_LAYER_MOE))
    n += snprintf(buf + n, len - (size_t)n, "%sexpert all-to-all", sep), sep = " + ";
  if (p->offload == PLAN_OFFLOAD_ACTIVATIONS)
    n += snprintf(buf + n, len - (size_t)n, "%sactivation offload", sep), sep = " + ";
  if (strcmp(sep, " ") == 0) snprintf(buf + n, len - (size_t)n, " collectives");
}

/* Micro-batch 0's span, op by op on the "ops" track (thread 3): for each
** layer of the chunk the ops of its kind's layer in graph order (a backward
** under full recompute first runs the layer's forward again), then the
** layer's collectives on the network track, where Megatron has the chip
** wait for them. Named with the global layer, shaped, with FLOPs and bytes;
** what is left of the span (embedding, head) stays unlabelled. */
static void trace_ops(tout *o, const sched_span *s, bool back, int64_t vs, const step_result *r,
                      const plan *p, const step_timeline *td) {
  /* a layer's ops in the one-layer shard differ a little from the layer's
  ** time (the difference of two shards) at the layer's edges: scale them
  ** to it, so each layer's ops and collectives fill its share of the span */
  double scale[WL_LAYER_KINDS][GRAPH_PHASE_COUNT];
  for (int k = 0; k < WL_LAYER_KINDS; k++) {
    double sum[GRAPH_PHASE_COUNT] = {0};
    for (int i = 0; i < td->n_ops[k]; i++) sum[td->ops[k][i].phase] += td->ops[k][i].t_s;
    bool kinds = r->kind_n[k] > 0;
    double fw = kinds ? r->kind_fwd_s[k] : r->layer_fwd_s, bw = kinds ? r->kind_bwd_s[k] : r->layer_bwd_s;
    for (int ph = 0; ph < GRAPH_PHASE_COUNT; ph++) scale[k][ph] = 1;
    if (sum[GRAPH_FORWARD] > 0) scale[k][GRAPH_FORWARD] = fw / sum[GRAPH_FORWARD];
    if (sum[GRAPH_BACKWARD] > 0) scale[k][GRAPH_BACKWARD] = bw / sum[GRAPH_BACKWARD];
  }
  double t = s->t0, slack = 1e-9 * (s->t1 - s->t0);
  for (int64_t l = td->vs_first[vs]; l < td->vs_first[vs + 1] && l < td->layers; l++) {
    int k = td->layer_kind[l];
    for (int pass = 0; pass < 2; pass++) {
      bool recompute = back && pass == 0;
      if (pass == 0 && back && p->recompute != PLAN_RECOMPUTE_FULL) continue;
      if (pass == 1 && !back) continue;
      graph_phase want = (back && !recompute) ? GRAPH_BACKWARD : GRAPH_FORWARD;
      for (int i = 0; i < td->n_ops[k]; i++) {
        const step_op *op_t = &td->ops[k][i];
        double dur = op_t->t_s * scale[k][op_t->phase];
        if (op_t->phase != want || t + dur > s->t1 + slack) continue;
        const graph_op *op = graph_get(td->layer[k]->g, op_t->id);
        const char *nm = op->name ? op->name : graph_op_name(op->kind);
        const char *tail = strchr(nm, '/');
        char name[128], shape[96];
        snprintf(name, sizeof name, "%sl%lld%s", recompute ? "recompute " : "", (long long)l,
                 tail ? tail : "");
        graph_shape_str(&op->out, shape, sizeof shape);
        slice_open(o, name, op_t->matrix ? "matmul" : "elementwise", t, dur, s->dev, 3);
        raw(o, ",\"args\":{\"shape\":");
        str(o, shape);
        raw(o, ",\"fused_ops\":");
        num(o, op_t->n_ops);
        raw(o, ",\"flops\":");
        num(o, op_t->flops);
        raw(o, ",\"bytes\":");
        num(o, op_t->bytes);
        raw(o, "}");
        event_close(o);
        t += dur;
      }
    }
    bool kinds = r->kind_n[k] > 0;
    double comm = back ? (kinds ? r->kind_comm_bwd_s[k] : r->tp_comm_bwd_s)
                       : (kinds ? r->kind_comm_fwd_s[k] : r->tp_comm_fwd_s);
    if (comm > 0 && t + comm <= s->t1 + slack) {
      char name[160];
      layer_comm_name(name, sizeof name, l, k, p);
      trace_slice(o, name, "collective", t, comm, s->dev, 2);
      t += comm;
    }
  }
}

/* Chrome trace event format (ts and dur in microseconds): one process per
** stage, thread 1 compute, thread 2 network, thread 3 the ops of
** micro-batch 0; "C" events for HBM in use. */
static void write_trace(tout *o, const step_timeline *q, const step_result *r, const plan *p,
                        const char *model_name, const char *hw_name) {
  const step_timeline *td = q->vs_first ? q : NULL;
  const double *bucket_t0 = q->bucket_t0, *bucket_t1 = q->bucket_t1;
  int64_t buckets = q->buckets;
  /* HBM: fixed state plus the activations of the micro-batches in flight */
  double *in_use = calloc((size_t)(p->pp > 0 ? p->pp : 1), sizeof *in_use);
  if (!in_use) {
    o->nomem = true;
    return;
  }
  trace_start(o);
  double fixed = r->memory.weights + r->memory.gradients + r->memory.optimizer + r->memory.temporary;
  double per_chunk = r->memory.act_layer * (double)(r->layers_per_stage / (p->vp > 0 ? p->vp : 1));
  static const char *const TRACKS[] = {"compute", "network", "ops (micro-batch 0)", "input"};
  for (int64_t dev = 0; dev < p->pp; dev++) {
    char name[96];
    snprintf(name, sizeof name, "stage %lld (%lld x %s)", (long long)dev,
             (long long)(p->tp * p->dp), hw_name);
    trace_process(o, dev, name, TRACKS, r->breakdown_s.input_stall > 0 ? 4 : 3);
  }
  for (int64_t i = 0; i < q->n_spans; i++) {
    const sched_span *s = &q->spans[i];
    bool back = s->code < 0;
    int64_t id = (back ? -s->code : s->code) - 1, vs = id / q->M, mb = id % q->M;
    char name[96];
    snprintf(name, sizeof name, "%s mb %lld chunk %lld", back ? "backward" : "forward",
             (long long)mb, (long long)(vs / p->pp));
    trace_slice(o, name, back ? "backward" : "forward", s->t0, s->t1 - s->t0, s->dev, 1);
    if (mb == 0 && td) trace_ops(o, s, back, vs, r, p, td);
    in_use[s->dev] += back ? -per_chunk : per_chunk;
    hbm_counter(o, back ? s->t1 : s->t0, s->dev, fixed + in_use[s->dev]);
  }
  free(in_use);
  for (int64_t dev = 0; dev < p->pp; dev++)
    for (int64_t j = 0; j < buckets; j++) {
      char name[64];
      snprintf(name, sizeof name, "all-reduce bucket %lld", (long long)j);
      trace_slice(o, name, "collective", bucket_t0[dev * buckets + j],
                  bucket_t1[dev * buckets + j] - bucket_t0[dev * buckets + j], dev, 2);
    }
  if (q->drain_s > 0)
    trace_slice(o, "output layer weight gradients (deferred)", "backward", q->drain_t0, q->drain_s,
                p->pp - 1, 1);
  for (int64_t dev = 0; td && dev < p->pp; dev++)
    if (r->optimizer_s > 0)
      trace_slice(o, "optimizer update", "optimizer", td->opt_t0[dev], r->optimizer_s, dev, 1);
  for (int64_t dev = 0; dev < p->pp; dev++) input_stall_slice(o, r, dev, 4);
  trace_finish(o, r, model_name, hw_name);
}

/* One pass of the whole trace into o. */
static void emit(tout *o, const step_timeline *tl, const step_result *r, const plan *p,
                 const char *model_name, const char *hw_name) {
  if (tl->whole) write_trace_whole(o, r, model_name, hw_name, tl->hlo);
  else write_trace(o, tl, r, p, model_name, hw_name);
}

/* ---- the size check, then the write ---- */

/* "(3145728 events for 96 stages x 16384 micro-batches)" */
static void what_grows(char *buf, size_t len, const tout *o, const step_timeline *tl,
                       const step_result *r, const plan *p) {
  if (tl->whole)
    snprintf(buf, len, "%lld events for %lld micro-batches on one chip", (long long)o->events,
             (long long)r->microbatches);
  else
    snprintf(buf, len, "%lld events for %lld stages x %lld micro-batches", (long long)o->events,
             (long long)p->pp, (long long)r->microbatches);
}

/* Whether the counted trace o is within the limits: 1 yes, 0 no (err
** says why), -1 not known from o's bounds (an exact count decides). Past
** the limit, o->lo is a lower bound (numbers at their narrowest, or the
** exact count stopped formatting them), hence "at least". */
static int within(const tout *o, uint64_t max_bytes, const step_timeline *tl, const step_result *r,
                  const plan *p, const char *model_name, const char *hw_name, char *err,
                  size_t errn) {
  char size[32], lim[32], grows[128];
  if (o->lo > max_bytes) {
    units_bytes(size, sizeof size, (double)o->lo);
    units_bytes(lim, sizeof lim, (double)max_bytes);
    what_grows(grows, sizeof grows, o, tl, r, p);
    snprintf(err, errn,
             "--trace: the trace would take at least %s (%llu bytes; %s), more than the %s limit "
             "for a trace, the largest tpusim view reads (docs/limits.md): a trace grows with "
             "stages x micro-batches, so a smaller --gbs shows the same schedule in a smaller "
             "trace; nothing was written",
             size, (unsigned long long)o->lo, grows, lim);
    return 0;
  }
  if (o->big_lo > VIEW_TRACE_MAX_PART) {
    units_bytes(size, sizeof size, (double)o->big_lo);
    units_bytes(lim, sizeof lim, (double)VIEW_TRACE_MAX_PART);
    snprintf(err, errn,
             "--trace: one event of the trace would take %s%s, more than the %s limit for one "
             "event, which tpusim view parses whole: the model's name (%zu bytes) or the "
             "hardware's (%zu) is too long; nothing was written",
             o->mode == OUT_BOUNDS ? "at least " : "", size, lim, strlen(model_name),
             strlen(hw_name));
    return 0;
  }
  return o->hi <= max_bytes && o->big_hi <= VIEW_TRACE_MAX_PART ? 1 : -1;
}

int trace_write_limit(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                      const char *model_name, const char *hw_name, uint64_t max_bytes, char *err,
                      size_t errn) {
  char scratch[8];
  if (!err) err = scratch, errn = sizeof scratch;
  model_name = model_name ? model_name : "";
  hw_name = hw_name ? hw_name : "";
  /* first the count: bounds, and where they straddle a limit, exact */
  tout c = {.mode = OUT_BOUNDS};
  emit(&c, tl, r, p, model_name, hw_name);
  int ok = c.nomem ? -2 : within(&c, max_bytes, tl, r, p, model_name, hw_name, err, errn);
  if (ok == -1) {
    c = (tout){.mode = OUT_EXACT, .stop = max_bytes};
    emit(&c, tl, r, p, model_name, hw_name);
    /* below the limit an exact count's bounds are equal: it decides */
    ok = c.nomem ? -2 : within(&c, max_bytes, tl, r, p, model_name, hw_name, err, errn);
  }
  if (ok == -2) snprintf(err, errn, "--trace: out of memory for the trace; nothing was written");
  if (ok != 1) return -1;
  tout w = {.mode = OUT_FILE, .f = f};
  emit(&w, tl, r, p, model_name, hw_name);
  if (w.nomem || fflush(f) != 0 || ferror(f)) {
    snprintf(err, errn, "--trace: cannot write the trace: %s", w.nomem ? "out of memory" : strerror(errno));
    return -1;
  }
  return 0;
}

int trace_write(FILE *f, const step_timeline *tl, const step_result *r, const plan *p,
                const char *model_name, const char *hw_name) {
  return trace_write_limit(f, tl, r, p, model_name, hw_name, TRACE_MAX_BYTES, NULL, 0);
}

/* ---- serving ---- */

/* One replica's span: decode steps back to back on track 2, each new
** request's prefill on track 1 at its arrival, the decode step it lands
** in pushed back by it (prefill and decode share the chips). */
static void serving_replica(tout *o, const trace_serving *s, int64_t pid) {
  double gap = s->qps > 0 ? (double)s->replicas / s->qps : s->span_s;
  double next = gap * (double)pid / (double)(s->replicas > 0 ? s->replicas : 1); /* staggered */
  char name[48];
  for (double t = 0; t < s->span_s;) {
    if (next <= t) { /* a prefill runs before the next decode step */
      trace_slice(o, "prefill", "forward", t, s->ttft_s, pid, 1);
      t += s->ttft_s;
      next += gap;
      continue;
    }
    snprintf(name, sizeof name, "decode x%lld", (long long)s->batch);
    trace_slice(o, name, "forward", t, s->decode_step_s, pid, 2);
    t += s->decode_step_s;
  }
}

int trace_write_serving(FILE *f, const trace_serving *s) {
  if (!f || !s || !(s->decode_step_s > 0) || !(s->ttft_s > 0) || !(s->span_s > 0)) return -1;
  /* a span of more than 10^6 steps a replica would make a trace the viewer cannot open */
  if (s->span_s / s->decode_step_s > 1e6) return -1;
  tout *o = calloc(1, sizeof *o);
  if (!o) return -1;
  o->mode = OUT_FILE, o->f = f;
  trace_start(o);
  static const char *const TRACKS[] = {"prefill", "decode"};
  int64_t shown = s->replicas < 8 ? s->replicas : 8;
  for (int64_t r = 0; r < shown; r++) {
    char name[96];
    snprintf(name, sizeof name, "replica %lld (%s)", (long long)r, s->hw_name);
    trace_process(o, r, name, TRACKS, 2);
    serving_replica(o, s, r);
  }
  raw(o, "],\"otherData\":{\"model\":");
  str(o, s->model_name);
  raw(o, ",\"hw\":");
  str(o, s->hw_name);
  raw(o, ",\"step_time_s\":");
  num(o, s->decode_step_s);
  raw(o, "},\"displayTimeUnit\":\"ms\"}\n");
  bool bad = ferror(f) != 0;
  free(o);
  return bad ? -1 : 0;
}
