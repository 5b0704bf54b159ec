/*
** input.c -- see input.h and docs/input.md.
**
** The simulation, on the event engine:
**   storage  P read slots and one shared pipe. A GET takes the earliest free
**            slot, waits the first-byte latency L, then its bytes go through
**            the pipe (FIFO at B bytes/s); the slot is held until its last
**            byte is in. So latency overlaps across the P slots while the
**            bytes share the host's bandwidth.
**   decode   each sample of an arrived GET goes to a host core (1/rate s).
**   link     when every sample of batch k is decoded (and batch k may be
**            produced), the batch is copied to the chips (FIFO).
**   chips    step k starts when step k-1 has ended and batch k has arrived.
*/
#include "input.h"

#include "../base/strutil.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hw_models/hw.h"
#include "engine.h"

/* Caps that keep one simulation small (memory and time). */
#define INPUT_MAX_STEPS 1000000
#define INPUT_MAX_SAMPLES 50000000LL
#define INPUT_MAX_SLOTS 4096


void input_defaults(input_cfg *c, input_kind kind) {
  memset(c, 0, sizeof *c);
  if (kind == INPUT_IMAGES) {
    c->bytes_per_sample = 110e3;         /* ImageNet-1k train: ~138 GB / 1.28 M JPEGs */
    c->xfer_bytes_per_sample = 150528;   /* 224 x 224 x 3 uint8 */
    c->samples_per_step = 256;
    c->decode_samples_per_s_per_core = 500; /* ~450-860 img/s pure decode, less with crop/resize */
    c->decode_cores = 16;
  } else {
    c->bytes_per_sample = 2048.0 * 4;    /* 2048 tokens as int32 */
    c->xfer_bytes_per_sample = 2048.0 * 4;
    c->samples_per_step = 32;
    c->decode_samples_per_s_per_core = 20000; /* record parse + pack: assumption */
    c->decode_cores = 8;
  }
  c->object_bytes = 128.0 * 1024 * 1024; /* record shards */
  c->read_bytes = 16.0 * 1024 * 1024;    /* S3 guidance: 8 or 16 MB byte ranges */
  c->object_latency_s = 0.03;            /* small GETs: median in the tens of ms */
  c->storage_bw_bytes_per_s = 1.25e9;    /* 10 Gbit/s: ~16 streams x ~85 MB/s */
  c->reads_in_flight = 16;
  c->host_link_bw_bytes_per_s = 6.4e10;  /* TPU v5p host: 4 chips x 1.6e10 B/s PCIe */
  c->host_link_latency_s = 1e-5;         /* assumption: one DMA + dispatch */
  c->prefetch_steps = 2;
}

void input_per_host(input_cfg *c, int64_t chips, int64_t chips_per_node, int64_t global_batch) {
  int64_t hosts = chips_per_node > 0 && chips / chips_per_node > 0 ? chips / chips_per_node : 1;
  if (c->one_host) hosts = 1;
  c->samples_per_step = global_batch / hosts > 0 ? global_batch / hosts : 1;
}

int input_hop_from_hw(input_cfg *c, const struct hw_model *m, bool remote, char *err,
                      size_t errn) {
  if (!c || !m) return str_errf(err, errn, "input: no configuration or hardware model");
  double chips = (double)m->chips_per_node;
  if (chips < 1) return str_errf(err, errn, "%s: system.chips_per_node is %g", m->name, chips);
  c->one_host = remote;
  if (remote) {
    double bw = m->scale_out.bw_per_chip_bytes_per_s * chips;
    if (!(bw > 0))
      return str_errf(err, errn, "%s: no scale-out bandwidth for a remote input host", m->name);
    c->host_link_bw_bytes_per_s = bw < INPUT_REMOTE_VM_BW ? bw : INPUT_REMOTE_VM_BW;
    c->host_link_latency_s = m->scale_out.latency_s;
    c->decode_cores = INPUT_REMOTE_VM_CORES;
  } else {
    double bw = m->chip.host_link_bw_bytes_per_s * chips;
    if (!(bw > 0)) return str_errf(err, errn, "%s: chip.host_link_bw_bytes_per_s is 0", m->name);
    c->host_link_bw_bytes_per_s = bw;
  }
  return 0;
}

/* ---- checks and derived figures ---- */

typedef struct {
  int64_t m;   /* samples per GET */
  double rb;   /* bytes per GET */
  double xfer; /* bytes per batch to the chips */
} derived;

static int check(const input_cfg *c, double compute_s, char *err, size_t errn, derived *d) {
  if (!c) return str_errf(err, errn, "input: no configuration");
#define POS(f, what)                                                                  \
  if (!(isfinite(c->f) && c->f > 0))                                                  \
    return str_errf(err, errn, "input: " #f " must be > 0 (%s), got %g", what, (double)c->f);
#define NONNEG(f, what)                                                               \
  if (!(isfinite(c->f) && c->f >= 0))                                                 \
    return str_errf(err, errn, "input: " #f " must be >= 0 (%s), got %g", what, (double)c->f);
  POS(bytes_per_sample, "bytes");
  POS(xfer_bytes_per_sample, "bytes");
  POS(object_bytes, "bytes");
  NONNEG(read_bytes, "bytes; 0 reads whole objects");
  NONNEG(object_latency_s, "seconds");
  POS(storage_bw_bytes_per_s, "bytes/s");
  POS(decode_samples_per_s_per_core, "samples/s");
  POS(host_link_bw_bytes_per_s, "bytes/s");
  NONNEG(host_link_latency_s, "seconds");
#undef POS
#undef NONNEG
  if (c->samples_per_step < 1)
    return str_errf(err, errn, "input: samples_per_step must be >= 1, got %lld",
                (long long)c->samples_per_step);
  if (c->reads_in_flight < 1 || c->reads_in_flight > INPUT_MAX_SLOTS)
    return str_errf(err, errn, "input: reads_in_flight must be in 1..%d, got %d", INPUT_MAX_SLOTS,
                c->reads_in_flight);
  if (c->decode_cores < 1 || c->decode_cores > INPUT_MAX_SLOTS)
    return str_errf(err, errn, "input: decode_cores must be in 1..%d, got %d", INPUT_MAX_SLOTS,
                c->decode_cores);
  if (c->prefetch_steps < 0)
    return str_errf(err, errn, "input: prefetch_steps must be >= 0, got %d", c->prefetch_steps);
  if (c->object_bytes < c->bytes_per_sample)
    return str_errf(err, errn,
                "input: object_bytes (%g) is smaller than one sample (bytes_per_sample %g); "
                "an object holds whole samples",
                c->object_bytes, c->bytes_per_sample);
  if (!(isfinite(compute_s) && compute_s >= 0))
    return str_errf(err, errn, "input: compute time per step must be >= 0 s, got %g", compute_s);
  double per_obj = floor(c->object_bytes / c->bytes_per_sample);
  double range = c->read_bytes > 0 && c->read_bytes < c->object_bytes ? c->read_bytes
                                                                        : c->object_bytes;
  double m = floor(range / c->bytes_per_sample);
  if (m < 1) m = 1;
  if (m > per_obj) m = per_obj;
  if (m > (double)INPUT_MAX_SAMPLES) m = (double)INPUT_MAX_SAMPLES;
  d->m = (int64_t)m;
  d->rb = m * c->bytes_per_sample;
  d->xfer = (double)c->samples_per_step * c->xfer_bytes_per_sample;
  return 0;
}

/* ---- the closed form ---- */

/* The closed form; its formula written out when `formula` (--explain's;
** the planner's fast path scores plans without it). */
static int closed(const input_cfg *c, double compute_s, input_closed *out, bool formula,
                  char *err, size_t errn) {
  derived d;
  if (check(c, compute_s, err, errn, &d) != 0) return -1;
  memset(out, 0, offsetof(input_closed, formula));
  out->formula[0] = 0;
  double S = (double)c->samples_per_step, m = (double)d.m, P = c->reads_in_flight;
  double L = c->object_latency_s, B = c->storage_bw_bytes_per_s;
  double delta = d.rb / B; /* one GET's bytes through the pipe */
  double n = S / m;        /* GETs per step, on average */
  double st_bw = n * d.rb / B, st_lat = n * (L + delta) / P;
  out->requests_per_step = n;
  out->storage_s = st_bw > st_lat ? st_bw : st_lat;
  double per_sample = 1.0 / c->decode_samples_per_s_per_core;
  out->decode_s = S * per_sample / c->decode_cores;
  out->link_s = d.xfer / c->host_link_bw_bytes_per_s + c->host_link_latency_s;

  /* D: the GETs one batch needs, from idle. W waves of P slots, the last
  ** with q GETs, bytes serialised through the pipe; or the pipe alone. */
  double nb = ceil(S / m), W = ceil(nb / P), q = nb - (W - 1) * P;
  double t_lat = W * L + (W + q - 1) * delta, t_bw = L + nb * delta;
  double t_store = t_lat > t_bw ? t_lat : t_bw;
  double last = m < S ? m : S; /* samples of the last GET, spread over the cores */
  double tail = ceil(last / c->decode_cores) * per_sample;
  double t_dec = t_store + tail;
  double t_dec2 = L + delta + ceil(S / c->decode_cores) * per_sample;
  if (t_dec2 > t_dec) t_dec = t_dec2;
  out->latency_s = t_dec + out->link_s;

  /* One GET may serve several steps (m > S): only a fraction S/m of the
  ** batches waits for a fresh GET; the others find their samples read. */
  int dpf = c->prefetch_steps;
  double f = m > S ? S / m : 1;
  double exposed; /* the latency term */
  if (dpf == 0)
    exposed = compute_s + f * out->latency_s + (1 - f) * out->link_s;
  else if (f < 1)
    exposed = compute_s + f * fmax(0, out->latency_s - dpf * compute_s);
  else
    exposed = out->latency_s / dpf;
  if (dpf == 0) {
    out->step_s = exposed;
    out->bound = INPUT_BOUND_PREFETCH;
  } else {
    struct {
      double v;
      const char *name;
    } t[] = {{compute_s, INPUT_BOUND_COMPUTE},
             {st_bw, INPUT_BOUND_STORAGE_BW},
             {st_lat, INPUT_BOUND_STORAGE_LATENCY},
             {out->decode_s, INPUT_BOUND_DECODE},
             {out->link_s, INPUT_BOUND_HOST_LINK},
             {exposed, INPUT_BOUND_PREFETCH}};
    int best = 0;
    for (int i = 1; i < (int)(sizeof t / sizeof t[0]); i++)
      if (t[i].v > t[best].v) best = i;
    out->step_s = t[best].v;
    out->bound = t[best].name;
  }
  out->stall_s_per_step = out->step_s - compute_s;
  if (!formula) return 0;
  if (dpf == 0)
    snprintf(out->formula, sizeof out->formula,
             "step = compute %.6g s + %.6g x batch latency %.6g s (no prefetch; storage %.6g, "
             "decode %.6g, link %.6g s per step at full rate) = %.6g s",
             compute_s, f, out->latency_s, out->storage_s, out->decode_s, out->link_s,
             out->step_s);
  else
    snprintf(out->formula, sizeof out->formula,
             "step = max(compute %.6g, storage max(%.6g B/%.6g B/s, %.6g GETs x (%.6g + %.6g) s "
             "/ %d) = %.6g, decode %lld / (%d x %.6g/s) = %.6g, link %.6g, exposed latency %.6g "
             "(D %.6g, prefetch %d)) = %.6g s [%s]",
             compute_s, n * d.rb, B, n, L, delta, c->reads_in_flight, out->storage_s,
             (long long)c->samples_per_step, c->decode_cores, c->decode_samples_per_s_per_core,
             out->decode_s, out->link_s, exposed, out->latency_s, dpf, out->step_s, out->bound);
  return 0;
}

int input_closed_form(const input_cfg *c, double compute_s, input_closed *out, char *err,
                      size_t errn) {
  return closed(c, compute_s, out, true, err, errn);
}

/* The closed form's stall alone, for one host fed by c. */
static int closed_stall(const input_cfg *c, double compute_s, double *stall_s, char *err,
                        size_t errn) {
  input_closed ic;
  if (closed(c, compute_s, &ic, false, err, errn) != 0) return -1;
  *stall_s = ic.stall_s_per_step;
  return 0;
}

int input_stall_closed(const input_cfg *c, int64_t chips, int64_t chips_per_node, int64_t gbs,
                       double compute_s, double *stall_s, char *err, size_t errn) {
  input_cfg h = *c;
  input_per_host(&h, chips, chips_per_node, gbs);
  return closed_stall(&h, compute_s, stall_s, err, errn);
}

int input_run_stall(const input_cfg *c, double compute_s, double *stall_s, int *steps, char *err,
                    size_t errn) {
  int64_t per = c->samples_per_step > 0 ? c->samples_per_step : 1;
  int64_t n = INPUT_MAX_SAMPLES / per;
  *steps = -1;
  if (n < 4) return closed_stall(c, compute_s, stall_s, err, errn);
  input_result ir;
  if (input_simulate(c, compute_s, n >= 40 ? 40 : (int)n, &ir, err, errn) != 0) return -1;
  *stall_s = ir.stall_s_per_step;
  *steps = n >= 40 ? 40 : (int)n;
  return 0;
}

int input_for_run(input_cfg *in, const struct hw_model *hw, const model *m,
                  const input_choice *ch, int64_t seq, char *err, size_t errn) {
  static const input_choice none = {0};
  if (!ch) ch = &none;
  /* a CNN reads images (ImageNet-style JPEGs), the rest token records */
  input_kind kind = ch->kind > 0                   ? (input_kind)(ch->kind - 1)
                    : strcmp(m->family, "cnn") == 0 ? INPUT_IMAGES
                                                    : INPUT_TOKENS;
  input_defaults(in, kind);
  /* the host's own cores decode, less one for each chip's training process
  ** (PyTorch, JAX: one process a chip feeds it and launches its kernels) */
  if (hw->host_cores > hw->chips_per_node) {
    int64_t cores = hw->host_cores - hw->chips_per_node;
    in->decode_cores = (int)(cores < INPUT_MAX_SLOTS ? cores : INPUT_MAX_SLOTS); /* the model's cap */
  }
  if (kind == INPUT_TOKENS && seq > 0) {
    in->bytes_per_sample = (double)seq * 4;
    in->xfer_bytes_per_sample = (double)seq * 4;
  }
  /* a family that is neither text nor images (an MLP, a recommender)
  ** reads records of its own inputs: a sample is the step's input tensors
  ** (dense features, ids, labels) over its batch -- 13 dense features, 26
  ** ids and a label are 160 B in Criteo's preprocessed binary form, not
  ** 2048 tokens' 8 kB. Not an op list ("graph"): it keeps its file's
  ** shapes at any batch, so its inputs are no sample's */
  bool own_records = ch->kind == 0 && kind == INPUT_TOKENS &&
                     strcmp(m->family, "transformer") != 0 && strcmp(m->family, "graph") != 0;
  double own = own_records && m->g && m->train.global_batch > 0
                   ? graph_param_bytes(m->g, GRAPH_INPUT) / (double)m->train.global_batch
                   : 0;
  if (own > 0) {
    in->bytes_per_sample = own;
    in->xfer_bytes_per_sample = own;
  }
  if (ch->files) { /* one small file per sample */
    in->object_bytes = in->bytes_per_sample;
    in->read_bytes = 0;
  }
  if (ch->has_prefetch) in->prefetch_steps = ch->prefetch;
  /* a CPU reads its own memory: no host-to-chip hop (and no input model) */
  if (hw->chip.host_link_bw_bytes_per_s <= 0) return 1;
  return input_hop_from_hw(in, hw, ch->remote, err, errn);
}

/* ---- the simulation ---- */

typedef struct {
  double start;    /* production allowed (-1: not yet) */
  double decoded;  /* when its last sample is decoded */
  int64_t left;    /* samples not yet decoded */
  double arrived;  /* on the chips (-1: not yet) */
} batch;

typedef struct {
  const input_cfg *c;
  derived d;
  double compute_s;
  int steps;
  int64_t total_samples, total_requests, next_request;
  batch *b;
  double *step_start, *stall;
  eng_res *slots; /* reads in flight */
  eng_res pipe;   /* the host's storage bandwidth */
  eng_res *cores;
  int next_core;
  eng_res link;
  int next_step;    /* the step the chips run next */
  bool chip_busy;
  double chip_free; /* end of the last step */
  double slot_busy, core_busy; /* totals */
} sim;

enum { EV_REQUEST, EV_BATCH, EV_STEP_END };

static void on_event(eng *e, void *ctx, int64_t arg);

static int64_t div_ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void send_batch(eng *e, sim *s, int64_t k) {
  batch *b = &s->b[k];
  double ready = b->decoded > b->start ? b->decoded : b->start;
  double dur = s->d.xfer / s->c->host_link_bw_bytes_per_s + s->c->host_link_latency_s;
  double t = eng_res_use(&s->link, ready, dur);
  eng_at(e, t, on_event, s, EV_BATCH | (k << 2));
}

/* Batch k may be produced from now: issue the GETs that hold its samples. */
static void start_batch(eng *e, sim *s, int64_t k) {
  if (k >= s->steps) return;
  double now = eng_now(e);
  s->b[k].start = now;
  int64_t need = div_ceil((k + 1) * s->c->samples_per_step, s->d.m);
  if (need > s->total_requests) need = s->total_requests;
  for (; s->next_request < need; s->next_request++) {
    /* Every GET is whole, even the last: the reader does not know that the
    ** run ends (its samples past the end are never decoded). */
    int64_t j = s->next_request;
    double bytes = s->d.rb;
    eng_res *slot = &s->slots[0];
    for (int i = 1; i < s->c->reads_in_flight; i++)
      if (s->slots[i].free_at < slot->free_at) slot = &s->slots[i];
    double begin = now > slot->free_at ? now : slot->free_at;
    double first_byte = begin + s->c->object_latency_s;
    double done = eng_res_use(&s->pipe, first_byte, bytes / s->c->storage_bw_bytes_per_s);
    slot->busy_s += done - begin;
    slot->free_at = done;
    s->slot_busy += done - begin;
    eng_at(e, done, on_event, s, EV_REQUEST | (j << 2));
  }
  if (s->b[k].left == 0) send_batch(e, s, k); /* decoded ahead: only the copy is left */
}

static void try_step(eng *e, sim *s) {
  int k = s->next_step;
  if (k >= s->steps || s->chip_busy || s->b[k].arrived < 0) return;
  double now = eng_now(e);
  s->chip_busy = true;
  s->step_start[k] = now;
  s->stall[k] = now - s->chip_free;
  if (s->c->prefetch_steps > 0) start_batch(e, s, (int64_t)k + s->c->prefetch_steps);
  eng_at(e, now + s->compute_s, on_event, s, EV_STEP_END | ((int64_t)k << 2));
}

static void on_event(eng *e, void *ctx, int64_t arg) {
  sim *s = ctx;
  int64_t id = arg >> 2;
  double now = eng_now(e);
  switch ((int)(arg & 3)) {
  case EV_REQUEST: {
    /* Samples go to the cores round robin: every decode takes the same time
    ** and GETs arrive in time order, so the core used longest ago is the
    ** earliest free one. */
    double per = 1.0 / s->c->decode_samples_per_s_per_core;
    int64_t first = id * s->d.m, last = first + s->d.m;
    if (last > s->total_samples) last = s->total_samples;
    for (int64_t i = first; i < last; i++) {
      double t = eng_res_use(&s->cores[s->next_core], now, per);
      s->core_busy += per;
      if (++s->next_core == s->c->decode_cores) s->next_core = 0;
      batch *b = &s->b[i / s->c->samples_per_step];
      if (t > b->decoded) b->decoded = t;
      if (--b->left == 0 && b->start >= 0) send_batch(e, s, i / s->c->samples_per_step);
    }
    break;
  }
  case EV_BATCH:
    s->b[id].arrived = now;
    try_step(e, s);
    break;
  case EV_STEP_END:
    s->chip_busy = false;
    s->chip_free = now;
    s->next_step = (int)id + 1;
    if (s->c->prefetch_steps == 0) start_batch(e, s, id + 1);
    try_step(e, s);
    break;
  }
}

int input_simulate(const input_cfg *c, double compute_s, int steps, input_result *out,
                   char *err, size_t errn) {
  sim s = {0};
  if (check(c, compute_s, err, errn, &s.d) != 0) return -1;
  if (steps < 1 || steps > INPUT_MAX_STEPS)
    return str_errf(err, errn, "input: steps must be in 1..%d, got %d", INPUT_MAX_STEPS, steps);
  if (c->samples_per_step > INPUT_MAX_SAMPLES / steps)
    return str_errf(err, errn,
                "input: %d steps x %lld samples is more than the %lld samples one simulation "
                "takes",
                steps, (long long)c->samples_per_step, (long long)INPUT_MAX_SAMPLES);
  s.c = c;
  s.compute_s = compute_s;
  s.steps = steps;
  s.total_samples = (int64_t)steps * c->samples_per_step;
  s.total_requests = div_ceil(s.total_samples, s.d.m);
  s.b = calloc((size_t)steps, sizeof *s.b);
  s.step_start = calloc((size_t)steps, sizeof *s.step_start);
  s.stall = calloc((size_t)steps, sizeof *s.stall);
  s.slots = calloc((size_t)c->reads_in_flight, sizeof *s.slots);
  s.cores = calloc((size_t)c->decode_cores, sizeof *s.cores);
  eng *e = eng_new();
  int rc = -1;
  if (!s.b || !s.step_start || !s.stall || !s.slots || !s.cores || !e) {
    str_errf(err, errn, "input: out of memory");
    goto done;
  }
  for (int k = 0; k < steps; k++) {
    s.b[k].start = -1;
    s.b[k].arrived = -1;
    s.b[k].left = c->samples_per_step;
  }
  if (c->prefetch_steps == 0)
    start_batch(e, &s, 0);
  else
    for (int64_t k = 0; k < c->prefetch_steps && k < steps; k++) start_batch(e, &s, k);
  eng_run(e);
  if (eng_failed(e)) {
    str_errf(err, errn, "input: out of memory in the event engine");
    goto done;
  }
  if (s.next_step != steps || s.chip_busy) {
    str_errf(err, errn, "input: internal error: %d of %d steps ran", s.next_step, steps);
    goto done;
  }

  memset(out, 0, sizeof *out);
  out->steps = steps;
  out->total_s = s.chip_free;
  out->first_batch_s = s.b[0].arrived;
  out->requests = s.next_request;
  out->events = eng_events(e);
  for (int k = 0; k < steps; k++) out->total_stall_s += s.stall[k];

  int w0 = steps / 2;
  int nw = steps - 1 - w0; /* step periods in the window */
  double lat = 0;
  for (int k = w0; k < steps; k++) lat += s.b[k].arrived - s.b[k].start;
  out->data_s_per_step = lat / (steps - w0);
  if (nw < 1) { /* too few steps for a window: the whole run */
    out->step_s = out->total_s / steps;
    out->stall_s_per_step = out->total_stall_s / steps;
  } else {
    out->step_s = (s.step_start[steps - 1] - s.step_start[w0]) / nw;
    double st = 0;
    for (int k = w0 + 1; k < steps; k++) st += s.stall[k];
    out->stall_s_per_step = st / nw;
  }

  /* What bounds it: no stall is compute; with prefetch, the stage whose
  ** work per batch (every batch costs the same) fills (nearly) all of a
  ** step; else the batch latency is exposed. */
  out->bound = INPUT_BOUND_PREFETCH;
  if (out->stall_s_per_step <= 1e-6 * out->step_s) {
    out->bound = INPUT_BOUND_COMPUTE;
  } else if (c->prefetch_steps > 0) {
    double per = out->step_s * steps;
    struct {
      double u;
      const char *name;
    } u[] = {{s.slot_busy / (per * c->reads_in_flight), INPUT_BOUND_STORAGE_LATENCY},
             {s.pipe.busy_s / per, INPUT_BOUND_STORAGE_BW},
             {s.core_busy / (per * c->decode_cores), INPUT_BOUND_DECODE},
             {s.link.busy_s / per, INPUT_BOUND_HOST_LINK}};
    int best = 0;
    for (int i = 1; i < 4; i++)
      if (u[i].u > u[best].u) best = i;
    /* A saturated pipe also keeps the slots busy: bandwidth is the cause. */
    if (best == 0 && u[1].u >= 0.98) best = 1;
    if (u[best].u >= 0.98) out->bound = u[best].name;
  }
  rc = 0;
done:
  eng_free(e);
  free(s.b);
  free(s.step_start);
  free(s.stall);
  free(s.slots);
  free(s.cores);
  return rc;
}
