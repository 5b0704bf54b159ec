/*
** coll.c -- see coll.h.
**
** Transfers reserve the links of their path in order (cut-through: a hop
** starts when the head arrives and the link is free, ends no earlier than
** the previous hop), so flows that share a link queue behind each other
** and two flows on one link take twice as long. Ring-based algorithms are
** phases of rings (reduce-scatter, all-gather or both over one ring
** kind); a chip moves to its next phase when it has finished the last one,
** and arrivals that come early wait for it.
*/
#include "coll.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Pipelining depth for the chunked algorithms (tree, NVLS, Reduction
** Server, broadcast): NCCL cuts each buffer into slices so stages overlap;
** 8 keeps the fill cost at 1/8 of a step while keeping events few. */
#define CHUNKS 8
#define MAX_PARTS 6
#define MAX_PHASES 8 /* 3 axes down, across slices, 3 axes back */
#define MAX_HOPS COLL_MAX_HOPS

static const char *const OP_NAMES[COLL_OP_COUNT] = {"all-reduce", "reduce-scatter", "all-gather",
                                                    "all-to-all", "broadcast",      "send-recv"};
static const char *const ALGO_NAMES[COLL_ALGO_COUNT] = {
    "auto", "ring", "biring", "torus", "tree", "hierarchical", "nvls", "reduction-server",
    "direct"};

const char *coll_op_name(coll_op op) { return OP_NAMES[op]; }
const char *coll_algo_name(coll_algo a) { return ALGO_NAMES[a]; }
int coll_op_parse(const char *s) {
  for (int i = 0; i < COLL_OP_COUNT; i++)
    if (strcmp(OP_NAMES[i], s) == 0) return i;
  return -1;
}
int coll_algo_parse(const char *s) {
  for (int i = 0; i < COLL_ALGO_COUNT; i++)
    if (strcmp(ALGO_NAMES[i], s) == 0) return i;
  return -1;
}

/* nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor, so that busbw is
** comparable with the link bandwidth whatever the rank count. */
double coll_bus_factor(coll_op op, int64_t n) {
  double r = (double)n;
  switch (op) {
  case COLL_ALL_REDUCE: return 2 * (r - 1) / r;
  case COLL_REDUCE_SCATTER:
  case COLL_ALL_GATHER:
  case COLL_ALL_TO_ALL: return (r - 1) / r;
  default: return 1;
  }
}

/* ---- the simulation state ---- */

typedef enum { R_ALL, R_DIM0, R_DIM1, R_DIM2, R_INTRA, R_INTER } ring_kind;

typedef struct {
  ring_kind ring;
  int dir;     /* +1 or -1 */
  int steps;   /* ring size - 1, or twice that for an all-reduce phase */
  double step_bytes;
} phase;

typedef struct {
  phase ph[MAX_PHASES];
  int n_ph;
} part;

typedef struct {
  const net *n;
  eng *e;
  double *free_at; /* per link */
  int64_t chips;
  part parts[MAX_PARTS];
  int n_parts;
  uint8_t *cur;    /* [part][chip]: the phase the chip is in */
  int32_t *early;  /* [part][chip][phase]: arrivals before the chip got there */
  uint8_t *done;   /* [chip][phase]: the parts that finished that phase on the chip */
  uint8_t with_ph[MAX_PHASES]; /* the parts that have each phase */
  int32_t *count;  /* per-algorithm counters (tree children, NVLS/RS arrivals) */
  double finish;
  bool failed;
  /* chunked algorithms */
  double chunk_bytes;
  int64_t reducers, host_base; /* reducer hosts' links follow the net's */
  double host_bw, host_lat;
  coll_op op;
} sim;

static double link_bw(const sim *s, int64_t l) {
  return l >= s->host_base ? s->host_bw : net_link_bw(s->n, l);
}
static double link_lat(const sim *s, int64_t l) {
  return l >= s->host_base ? ((l - s->host_base) % 2 == 0 ? s->host_lat : 0)
                           : net_link_latency(s->n, l);
}

/* Reserves the path's links for `bytes` starting at t; returns the arrival. */
static double xfer(sim *s, int64_t a, int64_t b, double bytes, double t) {
  int64_t path[MAX_HOPS];
  int k = net_path(s->n, a, b, path, MAX_HOPS);
  if (k < 0) {
    s->failed = true;
    return t;
  }
  double prev_end = t;
  for (int i = 0; i < k; i++) {
    double d = bytes / net_link_bw(s->n, path[i]);
    double start = t > s->free_at[path[i]] ? t : s->free_at[path[i]];
    double end = start + d > prev_end ? start + d : prev_end;
    s->free_at[path[i]] = end;
    double lat = net_link_latency(s->n, path[i]);
    t = start + lat; /* the head reaches the next hop */
    prev_end = end + lat;
  }
  return prev_end;
}

/* Two-link transfer between a chip's NIC and a reducer host. */
static double xfer_links(sim *s, int64_t up, int64_t down, double bytes, double t) {
  int64_t l[2] = {up, down};
  double prev_end = t;
  for (int i = 0; i < 2; i++) {
    double d = bytes / link_bw(s, l[i]);
    double start = t > s->free_at[l[i]] ? t : s->free_at[l[i]];
    double end = start + d > prev_end ? start + d : prev_end;
    s->free_at[l[i]] = end;
    double lat = link_lat(s, l[i]);
    t = start + lat;
    prev_end = end + lat;
  }
  return prev_end;
}

/* ---- rings ---- */

static int64_t ring_size(const net *n, ring_kind r) {
  int64_t shape[3];
  bool wrap[3];
  net_shape(n, shape, wrap);
  int64_t chips = net_chips(n), per = net_chips_per_node(n);
  switch (r) {
  case R_ALL: return chips;
  case R_DIM0: case R_DIM1: case R_DIM2: return shape[r - R_DIM0];
  case R_INTRA: return chips < per ? chips : per;
  case R_INTER: return chips / per > 0 ? chips / per : 1;
  }
  return 1;
}

/* The ring along an axis without wraparound, folded onto the line: out
** over the even positions (0, 2, 4, ...), back over the odd ones (..., 3,
** 1), so every hop is at most 2 links and every link carries one transfer
** per step in each direction -- the same load as a ring whose return hop
** runs the whole line back, but no transfer queues at L - 1 links in turn
** (with whole-message reservations such a hop waited behind a different
** ring's transfer at every link, a simulation artefact: links interleave
** packets). The standard embedding of a ring in a mesh (e.g. Kumar et al.,
** "Optimal all-reduce on meshes"; the line's bound (L-1)/L V / W is
** scaling-book's one-way all-gather). */
static int64_t folded_next(int64_t L, int64_t x, int dir) {
  int64_t evens = (L + 1) / 2, odds = L / 2, top_odd = 2 * odds - 1;
  int64_t idx = x % 2 == 0 ? x / 2 : evens + (top_odd - x) / 2;
  idx = ((idx + dir) % L + L) % L;
  return idx < evens ? 2 * idx : top_odd - 2 * (idx - evens);
}

static int64_t ring_next(const net *n, ring_kind r, int dir, int64_t c) {
  int64_t chips = net_chips(n), per = net_chips_per_node(n);
  switch (r) {
  case R_ALL: return ((c + dir) % chips + chips) % chips;
  case R_DIM0: case R_DIM1: case R_DIM2: {
    int d = r - R_DIM0;
    int64_t shape[3], co[3];
    bool wrap[3];
    net_shape(n, shape, wrap);
    net_coord(n, c, co);
    co[d] = wrap[d] ? ((co[d] + dir) % shape[d] + shape[d]) % shape[d]
                    : folded_next(shape[d], co[d], dir);
    return net_chip_at(n, net_node_of(n, c), co);
  }
  case R_INTRA: {
    int64_t m = ring_size(n, R_INTRA), base = c - c % per;
    return base + ((c - base + dir) % m + m) % m;
  }
  case R_INTER: {
    int64_t nodes = ring_size(n, R_INTER), node = c / per;
    return ((node + dir) % nodes + nodes) % nodes * per + c % per;
  }
  }
  return c;
}

/* event argument: chip (24 bits) | step (20) | phase (4) | part (4) */
static int64_t pack(int p, int ph, int64_t step, int64_t chip) {
  return ((int64_t)p << 48) | ((int64_t)ph << 44) | (step << 24) | chip;
}

static void on_arrive(eng *e, void *ctx, int64_t arg);

static void send_step(sim *s, int p, int ph, int64_t step, int64_t from, double t) {
  const phase *f = &s->parts[p].ph[ph];
  int64_t to = ring_next(s->n, f->ring, f->dir, from);
  double at = xfer(s, from, to, f->step_bytes, t);
  if (eng_at(s->e, at, on_arrive, s, pack(p, ph, step, to)) != 0) s->failed = true;
}

static void got_step(sim *s, int p, int ph, int64_t step, int64_t chip, double t);

/* Part p enters phase ph on chip: its first send, then the arrivals that
** came before it got there. */
static void enter_phase(sim *s, int p, int ph, int64_t chip, double t) {
  s->cur[p * s->chips + chip] = (uint8_t)ph;
  send_step(s, p, ph, 0, chip, t);
  int32_t *early = &s->early[(p * s->chips + chip) * MAX_PHASES + ph];
  int32_t k = *early;
  *early = 0;
  for (int32_t i = 0; i < k; i++) got_step(s, p, ph, i, chip, t);
}

/* A chip moves all its parts to the next phase together, when the last of
** them has finished this one: the phases of a multi-axis collective are
** the program's steps (XLA issues one collective per axis), and in a
** torus schedule the parts of one phase run on different axes, so they
** never meet on a link; a part that ran ahead would share the next axis's
** links with the part still on it. */
static void complete_phase(sim *s, int ph, int64_t chip, double t) {
  if (t > s->finish) s->finish = t;
  if (++s->done[chip * MAX_PHASES + ph] < s->with_ph[ph]) return;
  for (int q = 0; q < s->n_parts; q++)
    if (ph + 1 < s->parts[q].n_ph) enter_phase(s, q, ph + 1, chip, t);
}

static void got_step(sim *s, int p, int ph, int64_t step, int64_t chip, double t) {
  if (step + 1 < s->parts[p].ph[ph].steps)
    send_step(s, p, ph, step + 1, chip, t);
  else
    complete_phase(s, ph, chip, t);
}

static void on_arrive(eng *e, void *ctx, int64_t arg) {
  sim *s = ctx;
  int p = (int)(arg >> 48) & 15, ph = (int)(arg >> 44) & 15;
  int64_t step = (arg >> 24) & 0xFFFFF, chip = arg & 0xFFFFFF;
  if (s->cur[p * s->chips + chip] < ph) { /* still busy with an earlier phase */
    s->early[(p * s->chips + chip) * MAX_PHASES + ph]++;
    return;
  }
  got_step(s, p, ph, step, chip, eng_now(e));
}

/* Adds a phase of `kind` ("rs", "ag", "ar") over ring r to part p; `data`
** is what each chip holds entering it; returns what it holds after. */
static double add_phase(sim *s, int p, ring_kind r, int dir, char kind, double data) {
  int64_t m = ring_size(s->n, r);
  if (m < 2) return data;
  part *pt = &s->parts[p];
  if (pt->n_ph == MAX_PHASES) {
    s->failed = true;
    return data;
  }
  phase *f = &pt->ph[pt->n_ph++];
  f->ring = r;
  f->dir = dir;
  f->steps = (int)(kind == 'a' ? 2 * (m - 1) : m - 1);
  f->step_bytes = kind == 'g' ? data : data / (double)m;
  return kind == 'r' ? data / (double)m : kind == 'g' ? data * (double)m : data;
}

static void start_rings(sim *s) {
  for (int p = 0; p < s->n_parts; p++)
    for (int i = 0; i < s->parts[p].n_ph; i++) s->with_ph[i]++;
  for (int p = 0; p < s->n_parts; p++)
    for (int64_t c = 0; c < s->chips; c++) {
      if (s->parts[p].n_ph == 0) continue;
      send_step(s, p, 0, 0, c, 0);
    }
}

/* ---- chunked algorithms: tree, NVLS, Reduction Server, broadcast ---- */

/* Double binary tree (NCCL): two trees, each carrying half the data, the
** second the mirror image of the first, so a node that is internal in one
** is a leaf in the other. Reduce up, then broadcast down, in chunks. */
enum { EV_TREE_UP, EV_TREE_DOWN, EV_NVLS_SEND, EV_NVLS_UP1, EV_NVLS_DOWN1, EV_NVLS_UP2, EV_NVLS_DOWN2,
       EV_RS_UP, EV_RS_SEND, EV_RS_DOWN, EV_CHAIN, EV_A2A_SEND };

/* arg: kind (4) | tree or reducer (16) | chunk (8) | chip (24) */
static int64_t pack2(int kind, int64_t which, int chunk, int64_t chip) {
  return ((int64_t)kind << 52) | (which << 32) | ((int64_t)chunk << 24) | chip;
}

static int64_t tree_rank(int64_t chips, int tree, int64_t chip) {
  return tree == 0 ? chip : chips - 1 - chip;
}

static void on_chunk(eng *e, void *ctx, int64_t arg);

static void post(sim *s, double at, int kind, int64_t which, int chunk, int64_t chip) {
  if (eng_at(s->e, at, on_chunk, s, pack2(kind, which, chunk, chip)) != 0) s->failed = true;
}

static void tree_send_up(sim *s, int tree, int chunk, int64_t rank, double t) {
  int64_t n = s->chips, chip = tree_rank(n, tree, rank);
  if (rank == 0) { /* the root: broadcast down */
    for (int64_t c = 1; c <= 2; c++)
      if (2 * rank + c < n) {
        int64_t child = tree_rank(n, tree, 2 * rank + c);
        post(s, xfer(s, chip, child, s->chunk_bytes, t), EV_TREE_DOWN, tree, chunk, 2 * rank + c);
      }
    if (n == 1 && t > s->finish) s->finish = t;
    return;
  }
  int64_t parent = (rank - 1) / 2;
  post(s, xfer(s, chip, tree_rank(n, tree, parent), s->chunk_bytes, t), EV_TREE_UP, tree, chunk,
       parent);
}

static int64_t children(int64_t n, int64_t rank) {
  return (2 * rank + 1 < n) + (2 * rank + 2 < n);
}

static void start_tree(sim *s) {
  for (int tree = 0; tree < 2; tree++)
    for (int chunk = 0; chunk < CHUNKS; chunk++)
      for (int64_t r = 0; r < s->chips; r++)
        if (children(s->chips, r) == 0) tree_send_up(s, tree, chunk, r, 0);
}

/* Chunks go up one after another as events, not reserved ahead: the
** all-gather half of an earlier chunk must be able to slip in between. */
static void start_nvls(sim *s) {
  for (int64_t c = 0; c < s->chips; c++) post(s, 0, EV_NVLS_SEND, 0, 0, c);
}

static void start_rs_server(sim *s) {
  /* at its j-th send a worker w targets reducer (w + j) mod k: at any moment
  ** the workers spread over the reducers instead of queueing at one */
  for (int chunk = 0; chunk < CHUNKS; chunk++)
    for (int64_t j = 0; j < s->reducers; j++)
      for (int64_t w = 0; w < s->chips; w++) {
        int64_t r = (w + j) % s->reducers;
        double at = xfer_links(s, w * NET_SLOTS + NET_SLOT_NIC_UP, s->host_base + 2 * r + 1,
                               s->chunk_bytes, 0);
        post(s, at, EV_RS_UP, r, chunk, w);
      }
}

static void on_chunk(eng *e, void *ctx, int64_t arg) {
  sim *s = ctx;
  int kind = (int)(arg >> 52);
  int64_t which = (arg >> 32) & 0xFFFFF;
  int chunk = (int)((arg >> 24) & 0xFF);
  int64_t x = arg & 0xFFFFFF;
  double t = eng_now(e);
  int64_t n = s->chips;
  switch (kind) {
  case EV_TREE_UP: { /* x: the parent's rank, which got one child's chunk */
    int32_t *cnt = &s->count[(which * CHUNKS + chunk) * n + x];
    if (++*cnt == children(n, x)) tree_send_up(s, (int)which, chunk, x, t);
    break;
  }
  case EV_TREE_DOWN: {
    if (t > s->finish) s->finish = t;
    int64_t chip = tree_rank(n, (int)which, x);
    for (int64_t c = 1; c <= 2; c++)
      if (2 * x + c < n)
        post(s, xfer(s, chip, tree_rank(n, (int)which, 2 * x + c), s->chunk_bytes, t),
             EV_TREE_DOWN, which, chunk, 2 * x + c);
    break;
  }
  case EV_NVLS_SEND: { /* chip x sends a chunk up for the switch to reduce */
    int64_t up = x * NET_SLOTS + NET_SLOT_UP;
    double start = t > s->free_at[up] ? t : s->free_at[up];
    s->free_at[up] = start + s->chunk_bytes / net_link_bw(s->n, up);
    post(s, s->free_at[up] + net_link_latency(s->n, up), EV_NVLS_UP1, 0, chunk, x);
    if (chunk + 1 < CHUNKS) post(s, s->free_at[up], EV_NVLS_SEND, 0, chunk + 1, x);
    break;
  }
  case EV_NVLS_UP1:
  case EV_NVLS_UP2: { /* the switch counts the chips' contributions to a chunk */
    int32_t *cnt = &s->count[(kind == EV_NVLS_UP2) * CHUNKS + chunk];
    if (++*cnt < n) break;
    /* reduce-scatter: each chip gets its reduced 1/n; all-gather: all of it */
    double bytes = kind == EV_NVLS_UP1 ? s->chunk_bytes / (double)n : s->chunk_bytes;
    for (int64_t c = 0; c < n; c++) {
      int64_t down = c * NET_SLOTS + NET_SLOT_DOWN;
      double start = t > s->free_at[down] ? t : s->free_at[down];
      s->free_at[down] = start + bytes / net_link_bw(s->n, down);
      post(s, s->free_at[down], kind == EV_NVLS_UP1 ? EV_NVLS_DOWN1 : EV_NVLS_DOWN2, 0, chunk,
           c);
    }
    break;
  }
  case EV_NVLS_DOWN1: { /* the chip multicasts its reduced 1/n back through the switch */
    int64_t up = x * NET_SLOTS + NET_SLOT_UP;
    double start = t > s->free_at[up] ? t : s->free_at[up];
    s->free_at[up] = start + s->chunk_bytes / (double)n / net_link_bw(s->n, up);
    post(s, s->free_at[up] + net_link_latency(s->n, up), EV_NVLS_UP2, 0, chunk, x);
    break;
  }
  case EV_A2A_SEND: { /* chip x sends its piece for chip x + which, then the next */
    int64_t to = (x + which) % n;
    double at = xfer(s, x, to, s->chunk_bytes, t);
    if (at > s->finish) s->finish = at;
    int64_t path[MAX_HOPS];
    int k = net_path(s->n, x, to, path, MAX_HOPS);
    double next = k > 0 ? s->free_at[path[0]] : t;
    if (which + 1 < n) post(s, next, EV_A2A_SEND, which + 1, 0, x);
    break;
  }
  case EV_NVLS_DOWN2:
  case EV_RS_DOWN:
  case EV_CHAIN:
    if (t > s->finish) s->finish = t;
    if (kind == EV_CHAIN && x + 1 < n)
      post(s, xfer(s, x, x + 1, s->chunk_bytes, t), EV_CHAIN, 0, chunk, x + 1);
    break;
  case EV_RS_UP: { /* reducer `which` has one worker's piece of a chunk */
    int32_t *cnt = &s->count[which * CHUNKS + chunk];
    if (++*cnt == n) post(s, t, EV_RS_SEND, which, chunk, 0);
    break;
  }
  case EV_RS_SEND: { /* piece x of the reduced chunk back to worker (x + reducer) mod n; one
                     ** at a time, so the workers' links are claimed in time order */
    int64_t w = (x + which) % n, up = s->host_base + 2 * which;
    double at = xfer_links(s, up, w * NET_SLOTS + NET_SLOT_NIC_DOWN, s->chunk_bytes, t);
    post(s, at, EV_RS_DOWN, which, chunk, w);
    if (x + 1 < n) post(s, s->free_at[up], EV_RS_SEND, which, chunk, x + 1);
    break;
  }
  }
}

/* ---- closed forms ---- */

/* The GPUs of a Reduction Server host that reduce among themselves over
** NVLink first (the NCCL Reduction Server plugin keeps NCCL's intra-node
** stage; Vertex AI docs, "Reduction Server"): a GPU node's size when the
** group fills whole nodes, else 1 (every GPU its own worker). */
static int64_t rs_host_gpus(const hw_model *hw, int64_t chips) {
  int64_t g = hw->chips_per_node;
  if (hw->scale_up.kind == HW_UP_ICI_TORUS || g < 2 || chips % g != 0) return 1;
  return g;
}

/* One of the host's two NVLink stages (reduce-scatter or all-gather): a
** ring of g on an idle NVSwitch, (g-1) x (S/g / B + a), which the
** simulation reproduces to 2 % (tests/test_coll.c). */
static double rs_intra_s(const hw_model *hw, int64_t g, double bytes) {
  if (g < 2) return 0;
  double B = hw->scale_up.bw_per_chip_bytes_per_s * hw->scale_up.efficiency;
  return (double)(g - 1) * (bytes / (double)g / B + hw->scale_up.latency_s);
}

/* One ring step of b bytes: the slowest of the n transfers (bottleneck
** bandwidth plus path latency). `sharers` schedules run this ring kind at
** once; when their transfers leave a chip on the same link (a switch
** uplink, a NIC, the return hop of a torus axis without wraparound), each
** gets its share of it. */
static double ring_step(const net *n, ring_kind r, double b, int sharers, double *bw_out,
                        double *lat_out) {
  double worst = 0;
  int64_t path[MAX_HOPS], back[MAX_HOPS];
  /* The chips that stand for all: the links are uniform along a torus
  ** axis, inside a node and across nodes, so one line of the axis (in the
  ** first slice), the first node's chips, or one chip a node meets every
  ** kind of hop the ring has -- O(ring) where every chip was O(chips). */
  int64_t shape[3], co[3] = {0, 0, 0};
  bool wrap[3];
  net_shape(n, shape, wrap);
  int64_t per = net_chips_per_node(n), reps = ring_size(n, r);
  bool torus_axis = r >= R_DIM0 && r <= R_DIM2 && net_is_torus(n);
  if (r == R_ALL || (r >= R_DIM0 && r <= R_DIM2 && !torus_axis)) reps = net_chips(n);
  for (int64_t i = 0; i < reps; i++) {
    int64_t c = i;
    if (torus_axis) {
      co[r - R_DIM0] = i;
      c = net_chip_at(n, 0, co);
    } else if (r == R_INTER) {
      c = i * per;
    }
    int k = net_path(n, c, ring_next(n, r, 1, c), path, MAX_HOPS);
    if (k <= 0) continue;
    double bw = INFINITY, lat = 0;
    for (int i = 0; i < k; i++) {
      double l = net_link_bw(n, path[i]);
      if (l < bw) bw = l;
      lat += net_link_latency(n, path[i]);
    }
    if (torus_axis) {
      bw /= sharers; /* sharers_of counted the rings on these links */
    } else if (sharers > 1) {
      int kb = net_path(n, c, ring_next(n, r, -1, c), back, MAX_HOPS);
      bool shared = false;
      /* the return hop of a ring without wraparound runs over the other
      ** direction's links: each direction then has half of them */
      for (int i = 0; i < k && !shared; i++)
        for (int j = 0; j < kb && !shared; j++) shared = path[i] == back[j];
      if (shared || (k > 1 && net_is_torus(n) && net_node_of(n, c) == net_node_of(n, ring_next(n, r, 1, c))))
        bw /= sharers;
    }
    double t = b / bw + lat;
    if (t > worst) {
      worst = t;
      *bw_out = bw;
      *lat_out = lat;
    }
  }
  return worst;
}

static int explain(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int explain(char *buf, size_t len, const char *fmt, ...) {
  size_t at = strlen(buf);
  if (at >= len) return 0;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + at, len - at, fmt, ap);
  va_end(ap);
  return w;
}

/* The schedules that run ring f->ring at phase i, sharing its links: on a
** torus axis with wraparound the rings of the same direction (the other
** direction has its own links), on an axis without it every ring along
** the axis (the folded ring uses both directions' links); elsewhere every
** ring of that kind (ring_step finds which links they share). */
static int sharers_of(const sim *s, int i, const phase *f) {
  int64_t shape[3];
  bool wrap[3];
  net_shape(s->n, shape, wrap);
  bool axis = net_is_torus(s->n) && f->ring >= R_DIM0 && f->ring <= R_DIM2;
  int n = 0;
  for (int q = 0; q < s->n_parts; q++) {
    const part *pq = &s->parts[q];
    if (i < pq->n_ph && pq->ph[i].ring == f->ring &&
        (!axis || !wrap[f->ring - R_DIM0] || pq->ph[i].dir == f->dir))
      n++;
  }
  return n;
}

/* The schedule's own closed form, phase-synchronous as the simulation
** runs it (complete_phase): the sum over phases of the slowest part's
** steps x (step bytes / bandwidth + latency). */
static double rings_formula(sim *s, char *buf, size_t len) {
  double total = 0;
  for (int i = 0; i < MAX_PHASES; i++) {
    double worst = 0, wbw = 0, wlat = 0, wbytes = 0;
    int wsteps = 0;
    for (int p = 0; p < s->n_parts; p++) {
      if (i >= s->parts[p].n_ph) continue;
      const phase *f = &s->parts[p].ph[i];
      double bw = 0, lat = 0;
      double t = f->steps * ring_step(s->n, f->ring, f->step_bytes, sharers_of(s, i, f), &bw, &lat);
      if (t > worst) worst = t, wbw = bw, wlat = lat, wbytes = f->step_bytes, wsteps = f->steps;
    }
    if (worst == 0) break;
    explain(buf, len, "  phase %d: %d steps x (%.4g B / %.4g B/s + %.3g s) = %.4g s\n", i + 1,
            wsteps, wbytes, wbw, wlat, worst);
    total += worst;
  }
  return total;
}

/* The double binary tree's closed form: the busiest link's bytes over
** its bandwidth, every edge of both trees routed as the simulation routes
** it, plus the pipeline's fill and the latency of 2 x depth hops. */
typedef struct {
  double time_s, load_bytes, bw, edge_bw, lat; /* edge_bw: the slowest link an edge takes */
  int64_t link;
  int depth;
} tree_bound;

/* Adds `bytes` on each link of the path a -> b; the slowest link and the
** path's latency into *bw, *lat. */
static void tree_edge(const net *n, int64_t a, int64_t b, double bytes, double *load, double *bw,
                      double *lat) {
  int64_t path[MAX_HOPS];
  int k = net_path(n, a, b, path, MAX_HOPS);
  double l = 0;
  for (int i = 0; i < k; i++) {
    load[path[i]] += bytes;
    if (net_link_bw(n, path[i]) < *bw) *bw = net_link_bw(n, path[i]);
    l += net_link_latency(n, path[i]);
  }
  if (l > *lat) *lat = l;
}

/* O(chips x hops) time, one double per link. Above the simulation's chip
** limit the loads are not enumerated: each chip is internal in at most
** one tree, so it sends at most 2S (S/2 up and 2 x S/2 down in that one,
** S/2 up in the other) over its slowest link -- the per-chip bound. */
static int tree_formula(const net *n, double S, tree_bound *tb) {
  int64_t chips = net_chips(n);
  double half = S / 2, chunk = half / CHUNKS;
  memset(tb, 0, sizeof *tb);
  tb->depth = (int)ceil(log2((double)chips + 1)) - 1;
  tb->edge_bw = INFINITY;
  tb->link = -1;
  if (chips > COLL_SIM_MAX_CHIPS) {
    for (int64_t l = 0; l < NET_SLOTS; l++) /* chip 0's links stand for all */
      if (net_link_bw(n, l) < tb->edge_bw) tb->edge_bw = net_link_bw(n, l);
    tb->bw = tb->edge_bw;
    tb->load_bytes = 2 * S;
    tb->lat = net_hw(n)->scale_out.latency_s;
  } else {
    double *load = calloc((size_t)net_links(n), sizeof *load);
    if (!load) return -1;
    for (int t = 0; t < 2; t++)
      for (int64_t r = 1; r < chips; r++) {
        int64_t c = tree_rank(chips, t, r), p = tree_rank(chips, t, (r - 1) / 2);
        tree_edge(n, c, p, half, load, &tb->edge_bw, &tb->lat); /* reduce up */
        tree_edge(n, p, c, half, load, &tb->edge_bw, &tb->lat); /* broadcast down */
      }
    double worst = 0;
    for (int64_t l = 0; l < net_links(n); l++)
      if (load[l] > 0 && load[l] / net_link_bw(n, l) > worst) {
        worst = load[l] / net_link_bw(n, l);
        tb->link = l;
      }
    tb->load_bytes = load[tb->link];
    tb->bw = net_link_bw(n, tb->link);
    free(load);
  }
  /* the pipeline's fill: the first chunk climbs and comes down 2 x depth - 1
  ** edges before the last link's work starts to overlap (CHUNKS chunks) */
  tb->time_s = tb->load_bytes / tb->bw + (2.0 * tb->depth - 1) * chunk / tb->edge_bw +
               2.0 * tb->depth * tb->lat;
  return 0;
}

/* ---- running ---- */

/* The hierarchical GPU rings (R_INTRA, R_INTER) pair chip i of every node:
** they need the group to fill whole nodes. A 72-GPU NVLink domain split by
** tp x pp = 8 leaves 9 chips of a group per node, so a group of 16 would
** end in a partial node; such a group runs the flat ring instead. */
static bool whole_nodes(const net *n) {
  return net_is_torus(n) || net_chips(n) % net_chips_per_node(n) == 0;
}

static coll_algo pick(const net *n, coll_op op) {
  const hw_model *hw = net_hw(n);
  if (op == COLL_ALL_TO_ALL || op == COLL_SEND_RECV) return COLL_DIRECT;
  if (op == COLL_BROADCAST) return COLL_RING;
  /* over slices, every reduce-like op goes in-slice then over DCN (an
  ** all-to-all or send-recv returned above) */
  if (net_is_torus(n)) return net_slices(n) > 1 ? COLL_HIERARCHICAL : COLL_TORUS;
  bool one_node = net_chips(n) <= net_chips_per_node(n);
  /* NCCL turns NVLS on for all-reduce inside an NVSwitch node above 4 GPUs
  ** (ml-engineering network/README.md, "NVLink SHARP") */
  if (one_node && op == COLL_ALL_REDUCE && hw->scale_up.in_switch_reduction && net_chips(n) > 4)
    return COLL_NVLS;
  if (!one_node && op == COLL_ALL_REDUCE && whole_nodes(n)) return COLL_HIERARCHICAL;
  return COLL_RING;
}

/* The torus algorithm's rings run along the axes of one slice (ring_next
** stays in the chip's slice), so over several slices without --axis it
** would reduce each slice alone and leave out the DCN between them: the
** honest schedule is hierarchical, which is those same torus phases in
** each slice with the DCN stage in the middle. Said so, with the sizes. */
static bool torus_fits_slices(const net *n, coll_op op, coll_algo a, int axis, char *err,
                              size_t errn) {
  if (a != COLL_TORUS || axis >= 0 || !net_is_torus(n) || net_slices(n) < 2) return true;
  snprintf(err, errn,
           "%s with --algo torus on %s: torus runs inside one slice, and these %lld chips are "
           "%lld slices of %lld joined by DCN: --algo hierarchical is torus inside each slice "
           "plus the DCN stage between them (or --axis x|y|z for the rings along one axis of "
           "every slice)",
           OP_NAMES[op], net_hw(n)->name, (long long)net_chips(n), (long long)net_slices(n),
           (long long)net_chips_per_node(n));
  return false;
}

static bool algo_fits(const net *n, coll_op op, coll_algo a, char *err, size_t errn) {
  const hw_model *hw = net_hw(n);
  bool reduce_like = op == COLL_ALL_REDUCE || op == COLL_REDUCE_SCATTER || op == COLL_ALL_GATHER;
  const char *why = NULL;
  if ((op == COLL_ALL_TO_ALL || op == COLL_SEND_RECV) && a != COLL_DIRECT)
    why = "runs point to point: use --algo direct (or leave it out)";
  else if (a == COLL_DIRECT && !(op == COLL_ALL_TO_ALL || op == COLL_SEND_RECV))
    why = "direct is for all-to-all and send-recv";
  else if (a == COLL_TORUS && (!net_is_torus(n) || !reduce_like))
    why = "torus needs a TPU slice and an all-reduce, reduce-scatter or all-gather";
  else if (a == COLL_NVLS && (op != COLL_ALL_REDUCE || !hw->scale_up.in_switch_reduction ||
                              net_chips(n) > net_chips_per_node(n)))
    why = "nvls needs an all-reduce inside one NVSwitch node with in-switch reduction";
  else if ((a == COLL_TREE || a == COLL_REDUCTION_SERVER) && op != COLL_ALL_REDUCE)
    why = "is an all-reduce algorithm";
  else if (a == COLL_HIERARCHICAL && (net_chips(n) <= net_chips_per_node(n) ||
                                      !(op == COLL_ALL_REDUCE || (reduce_like && net_is_torus(n)))))
    why = "hierarchical is an all-reduce across nodes, or a reduce-like op across slices";
  else if (a == COLL_HIERARCHICAL && !whole_nodes(n))
    why = "hierarchical needs whole nodes (the chip count a multiple of the chips per node)";
  else if (op == COLL_BROADCAST && a != COLL_RING)
    why = "broadcast runs as a pipelined chain (--algo ring)";
  else if (a == COLL_BIRING && !reduce_like)
    why = "biring is for all-reduce, reduce-scatter and all-gather";
  if (why) {
    snprintf(err, errn, "%s with --algo %s on %s: %s", OP_NAMES[op], ALGO_NAMES[a], hw->name, why);
    return false;
  }
  return true;
}

/* Sets up the phases of a ring-based algorithm. */
static void plan_rings(sim *s, coll_op op, coll_algo a, double bytes, int axis, int64_t group) {
  char kind = op == COLL_ALL_REDUCE ? 'a' : op == COLL_REDUCE_SCATTER ? 'r' : 'g';
  /* all-gather's bytes are the gathered result: each chip starts with 1/group */
  double data = op == COLL_ALL_GATHER ? bytes / (double)group : bytes;
  if (a == COLL_RING || a == COLL_BIRING) {
    s->n_parts = a == COLL_BIRING ? 2 : 1;
    for (int p = 0; p < s->n_parts; p++)
      add_phase(s, p, R_ALL, p ? -1 : 1, kind, data / s->n_parts);
  } else if (a == COLL_HIERARCHICAL && !net_is_torus(s->n)) {
    s->n_parts = 1;
    double d = add_phase(s, 0, R_INTRA, 1, 'r', data);
    d = add_phase(s, 0, R_INTER, 1, 'a', d);
    add_phase(s, 0, R_INTRA, 1, 'g', d);
  } else { /* torus: every axis at once, both directions, rotated orders;
           ** hierarchical adds the all-reduce across slices in the middle */
    int64_t shape[3];
    bool wrap[3];
    net_shape(s->n, shape, wrap);
    int dims[3], nd = 0;
    for (int d = 0; d < 3; d++)
      if (shape[d] > 1 && (axis < 0 || axis == d)) dims[nd++] = d;
    if (nd == 0) nd = 1, dims[0] = 0;
    s->n_parts = 2 * nd;
    for (int k = 0; k < nd; k++)
      for (int dir = 0; dir < 2; dir++) {
        int p = 2 * k + dir, sign = dir ? -1 : 1;
        double d = data / (double)s->n_parts;
        /* an axis without wraparound has no second direction to give: its
        ** folded ring already uses both directions' links, so both parts
        ** run it the same way round and share it in step (ring_next) */
#define AXIS_DIR(ax) (wrap[ax] ? sign : 1)
        if (kind != 'g')
          for (int i = 0; i < nd; i++) {
            int ax = dims[(k + i) % nd];
            d = add_phase(s, p, R_DIM0 + ax, AXIS_DIR(ax), 'r', d);
          }
        /* across slices: all-reduce the in-slice shard, or scatter it
        ** further (reduce-scatter), or gather the slices' shards first
        ** (all-gather), each chip with its peers of the same position */
        if (a == COLL_HIERARCHICAL) d = add_phase(s, p, R_INTER, sign, kind, d);
        if (kind != 'r')
          for (int i = nd - 1; i >= 0; i--) {
            int ax = dims[(k + i) % nd];
            d = add_phase(s, p, R_DIM0 + ax, AXIS_DIR(ax), 'g', d);
          }
#undef AXIS_DIR
      }
  }
}

/* ---- the simulation's budget ---- */

/* The events a simulation of algorithm a would run, counted from its
** schedule before any is posted (each ring step, chunk hop or piece is one
** arrival event). Doubles: a million-chip flat ring has 2e12. */
static double sim_events(const net *n, const coll_req *r, coll_algo a, int64_t group,
                         int64_t reducers) {
  double N = (double)net_chips(n), C = CHUNKS;
  switch (a) {
  case COLL_TREE: return 2 * C * 2 * (N - 1);        /* two trees, up and down each edge */
  case COLL_NVLS: return 5 * C * N;                  /* send, reduce, down, multicast, down */
  case COLL_REDUCTION_SERVER: return 3 * C * (double)reducers * N; /* up, send, down */
  case COLL_DIRECT: return r->op == COLL_SEND_RECV ? 1 : N * (N - 1);
  default: break;
  }
  if (r->op == COLL_BROADCAST) return C * (N - 1); /* a chain */
  sim probe = {.n = n, .chips = net_chips(n)};
  plan_rings(&probe, r->op, a, r->bytes, r->axis, group);
  double steps = 0;
  for (int p = 0; p < probe.n_parts; p++)
    for (int i = 0; i < probe.parts[p].n_ph; i++) steps += probe.parts[p].ph[i].steps;
  return steps * N;
}

/* Whether the simulation is over its budget (coll.h), saying which limit
** in out->note and as the first line of the formula. */
static bool over_budget(const net *n, const coll_req *r, coll_algo a, int64_t group,
                        int64_t reducers, coll_result *out) {
  int64_t chips = net_chips(n);
  if (chips > COLL_SIM_MAX_CHIPS)
    snprintf(out->note, sizeof out->note, "closed form: %lld chips exceed the simulation's limit of %d",
             (long long)chips, COLL_SIM_MAX_CHIPS);
  else {
    double ev = sim_events(n, r, a, group, reducers), lim = (double)COLL_SIM_MAX_EVENTS;
    bool caller = r->max_events > 0 && r->max_events < lim;
    if (ev <= (caller ? r->max_events : lim)) return false;
    if (caller)
      snprintf(out->note, sizeof out->note,
               "closed form: %.0f events exceed the %.0f left of this command's budget", ev,
               r->max_events);
    else
      snprintf(out->note, sizeof out->note,
               "closed form: %.0f events exceed the simulation's limit of %lld", ev,
               (long long)COLL_SIM_MAX_EVENTS);
  }
  snprintf(out->formula, sizeof out->formula, "%s\n", out->note);
  return true;
}

int coll_run(const net *n, const coll_req *r, coll_result *out, char *err, size_t errn) {
  memset(out, 0, sizeof *out);
  int64_t chips = net_chips(n);
  if (!(r->bytes > 0) || !isfinite(r->bytes)) {
    snprintf(err, errn, "bytes must be positive, got %g", r->bytes);
    return -1;
  }
  if (chips < 2 && r->op != COLL_BROADCAST) {
    snprintf(err, errn, "a collective needs at least 2 chips");
    return -1;
  }
  coll_algo a = r->algo == COLL_AUTO ? pick(n, r->op) : r->algo;
  if (!algo_fits(n, r->op, a, err, errn) || !torus_fits_slices(n, r->op, a, r->axis, err, errn))
    return -1;
  int64_t group = chips;
  if (r->axis >= 0) {
    int64_t shape[3];
    bool wrap[3];
    net_shape(n, shape, wrap);
    if (!net_is_torus(n) || r->axis > 2 || shape[r->axis] < 2 || a != COLL_TORUS) {
      snprintf(err, errn, "--axis %d: needs a TPU slice with more than one chip on that axis and "
                          "the torus algorithm", r->axis);
      return -1;
    }
    group = shape[r->axis];
  }

  int64_t reducers = a == COLL_REDUCTION_SERVER ? (r->reducers > 0 ? r->reducers : chips) : 0;
  double rbw = r->reducer_bw > 0 ? r->reducer_bw : coll_rs_reducer_bw(net_hw(n));
  if (a == COLL_REDUCTION_SERVER && !(rbw > 0)) {
    snprintf(err, errn, "a Reduction Server needs reducer VMs: %s gives none "
                        "(system.scale_out.reducer_bw_bytes_per_s; Vertex AI's reducers serve GPU "
                        "hosts)", net_hw(n)->name);
    return -1;
  }
  /* the closed form alone: no transfers posted, nothing per chip allocated
  ** (a million-chip ring would post trillions) */
  bool quick = r->formula_only || over_budget(n, r, a, group, reducers, out);
  sim s = {.n = n, .chips = chips, .op = r->op, .reducers = reducers,
           .host_base = net_links(n), .host_bw = rbw,
           .host_lat = net_hw(n)->scale_out.latency_s};
  s.e = eng_new();
  size_t cnt = (size_t)(2 * CHUNKS * chips + 2 * CHUNKS + reducers * CHUNKS);
  if (!quick) {
    s.free_at = calloc((size_t)(net_links(n) + 2 * reducers), sizeof *s.free_at);
    s.count = calloc(cnt, sizeof *s.count);
    s.cur = calloc((size_t)(MAX_PARTS * chips), 1);
    s.early = calloc((size_t)(MAX_PARTS * chips * MAX_PHASES), sizeof *s.early);
    s.done = calloc((size_t)(chips * MAX_PHASES), 1);
  }
  int rc = 0;
  if (!s.e || (!quick && (!s.free_at || !s.count || !s.cur || !s.early || !s.done))) {
    snprintf(err, errn, "out of memory for %lld chips", (long long)chips);
    rc = -1;
    goto done;
  }

  double S = r->bytes, nn_ = (double)chips;
  double extra_s = 0; /* a stage timed by its closed form, added to the simulation's */
  /* an all-to-all on a twisted slice: the links are routed as on the
  ** regular torus and the time divided by the twisted graph's gain in
  ** all-to-all throughput (net_a2a_twist_gain: its link load against the
  ** regular torus's, both counted on the link graph). Rings (all-reduce,
  ** all-gather, reduce-scatter) run neighbour to neighbour on the axes and
  ** are not changed by the twist. */
  double twist_gain = 1;
  char *f = out->formula;
  size_t flen = sizeof out->formula;
  const hw_model *hw = net_hw(n);
  switch (a) {
  case COLL_RING:
  case COLL_BIRING:
  case COLL_TORUS:
  case COLL_HIERARCHICAL:
    if (r->op == COLL_BROADCAST) {
      s.chunk_bytes = S / CHUNKS;
      for (int c = 0; c < CHUNKS && !quick; c++)
        post(&s, xfer(&s, 0, 1, s.chunk_bytes, 0), EV_CHAIN, 0, c, 1);
      double bw = 0, lat = 0, step = ring_step(n, R_ALL, s.chunk_bytes, 1, &bw, &lat);
      out->formula_s = (CHUNKS + nn_ - 2) * step;
      explain(f, flen, "pipelined chain: (C + n - 2) x (S/C / B + a) = (%d + %lld - 2) x "
                       "(%.4g / %.4g + %.3g) = %.4g s\n",
              CHUNKS, (long long)chips, s.chunk_bytes, bw, lat, out->formula_s);
      break;
    }
    plan_rings(&s, r->op, a, S, r->axis, group);
    explain(f, flen, "%s over %d concurrent ring schedule%s:\n", ALGO_NAMES[a], s.n_parts,
            s.n_parts > 1 ? "s" : "");
    out->formula_s = rings_formula(&s, f, flen);
    if (a == COLL_RING && r->op == COLL_ALL_REDUCE) {
      double bw = 0, lat = 0;
      ring_step(n, R_ALL, S / nn_, 1, &bw, &lat);
      explain(f, flen, "= 2(n-1)/n x S/B + 2(n-1) x a = 2 x %lld/%lld x %.4g / %.4g + 2 x %lld x %.3g\n",
              (long long)(chips - 1), (long long)chips, S, bw, (long long)(chips - 1), lat);
    }
    if (a == COLL_TORUS)
      explain(f, flen, "(scaling-book: each axis carries 1/(2 x axes) of the data each way; an "
                       "axis without wraparound has half the bandwidth per direction)\n");
    if (!quick) start_rings(&s);
    break;
  case COLL_TREE: {
    s.chunk_bytes = S / 2 / CHUNKS;
    if (!quick) start_tree(&s);
    tree_bound tb;
    if (tree_formula(n, S, &tb) != 0) {
      snprintf(err, errn, "out of memory for the tree's link loads (%lld chips)", (long long)chips);
      rc = -1;
      goto done;
    }
    out->formula_s = tb.time_s;
    explain(f, flen, "double binary tree (NCCL): two trees of S/2, each edge S/2 up and S/2 "
                     "down, routed over the links net_path takes; a chip internal in one tree "
                     "and a leaf in the other sends about 2S in all (NVIDIA, \"Massively scale "
                     "your deep learning training with NCCL 2.4\", 2019: ring-like bus bandwidth)."
                     "\n  busiest link %lld carries %.4g B at %.4g B/s = %.4g s; fill (2 x %d "
                     "levels - 1) x chunk %.4g B / %.4g B/s; + 2 x %d x %.3g s latency = %.4g s\n",
            (long long)tb.link, tb.load_bytes, tb.bw, tb.load_bytes / tb.bw, tb.depth,
            s.chunk_bytes, tb.edge_bw, tb.depth, tb.lat, out->formula_s);
    break;
  }
  case COLL_NVLS: {
    s.chunk_bytes = S / CHUNKS;
    if (!quick) start_nvls(&s);
    double B = net_link_bw(n, NET_SLOT_UP), lat = hw->scale_up.latency_s;
    out->formula_s = S * (1 + 1 / nn_) / B * (1 + 2.0 / CHUNKS) + 2 * lat;
    explain(f, flen, "NVLink SHARP: each GPU sends S + S/n up and receives S/n + S down; the "
                     "all-gather half trails the reduce half by a chunk, so the pipeline fills "
                     "over 2 of C chunks:\n  (1 + 1/n) x S/B x (1 + 2/C) + 2a = (1 + 1/%lld) x "
                     "%.4g / %.4g x %.3g + 2 x %.3g = %.4g s\n",
            (long long)chips, S, B, 1 + 2.0 / CHUNKS, lat, out->formula_s);
    break;
  }
  case COLL_REDUCTION_SERVER: {
    int64_t g = rs_host_gpus(hw, chips);
    double intra = rs_intra_s(hw, g, S);
    s.chunk_bytes = S / (double)g / (double)reducers / CHUNKS;
    if (!quick) start_rs_server(&s);
    extra_s = 2 * intra;
    double B = hw->scale_out.bw_per_chip_bytes_per_s, lat = hw->scale_out.latency_s;
    out->formula_s = coll_reduction_server_s(hw, chips, S, reducers, rbw);
    explain(f, flen, "Reduction Server (Vertex AI): inside each host of g = %lld GPUs a reduce-"
                     "scatter and an all-gather over NVLink, 2 x (g-1) x (S/g / B_nvl + a) = "
                     "%.4g s; between them each GPU sends its S/g to the k = %lld reducers and "
                     "gets it back reduced (a host's NIC moves S each way, a ring 2(H-1)/H S); "
                     "each reducer takes n S/(g k):\n  + max(S/g / B_w, n S/(g k B_r)) x (1 + "
                     "1/C) + 4a = max(%.4g/%.4g, %lld x %.4g/(%lld x %.4g)) x %.3g + 4 x %.3g = "
                     "%.4g s\n",
            (long long)g, 2 * intra, (long long)reducers, S / (double)g, B, (long long)chips,
            S / (double)g, (long long)reducers, rbw, 1 + 1.0 / CHUNKS, lat, out->formula_s);
    break;
  }
  case COLL_DIRECT:
    if (r->op == COLL_SEND_RECV) {
      if (!quick) s.finish = xfer(&s, 0, chips - 1, S, 0);
      int64_t path[MAX_HOPS];
      int k = net_path(n, 0, chips - 1, path, MAX_HOPS);
      double bw = INFINITY, lat = 0;
      for (int i = 0; i < k; i++) {
        if (net_link_bw(n, path[i]) < bw) bw = net_link_bw(n, path[i]);
        lat += net_link_latency(n, path[i]);
      }
      out->formula_s = S / bw + lat;
      explain(f, flen, "send chip 0 -> chip %lld over %d hops: S/B + hops x a = %.4g / %.4g + %.3g "
                       "= %.4g s\n",
              (long long)(chips - 1), k, S, bw, lat, out->formula_s);
    } else {
      /* each chip sends its pieces one after another, each when its first
      ** link frees, so links are claimed in time order */
      s.chunk_bytes = S / nn_;
      for (int64_t c = 0; c < chips && !quick; c++) post(&s, 0, EV_A2A_SEND, 1, 0, c);
      /* the bound: the busiest link's bytes over its bandwidth, every pair
      ** routed as the simulation routes it */
      int64_t link = -1;
      out->formula_s = coll_all_to_all_bound(n, s.chunk_bytes, &link);
      explain(f, flen, "all-to-all, busiest-link bound: each chip sends S/n = %.4g B to every other; "
                       "routed as simulated, link %lld carries the most: %.4g s\n",
              s.chunk_bytes, (long long)link, out->formula_s);
      twist_gain = net_a2a_twist_gain(n);
      if (twist_gain > 1) {
        out->formula_s /= twist_gain;
        explain(f, flen, "twisted torus: the busiest link's load falls %.3gx (link graph: cut and "
                         "hop-spread bounds, regular over twisted): %.4g s\n",
                twist_gain, out->formula_s);
      }
    }
    break;
  default:
    break;
  }
  if (quick) {
    out->time_s = out->formula_s;
    out->algo = a;
    out->algbw = S / out->time_s;
    out->busbw = out->algbw * coll_bus_factor(r->op, group);
    goto done;
  }
  eng_run(s.e);
  if (s.failed || eng_failed(s.e)) {
    snprintf(err, errn, "simulation failed (out of memory or a path too long)");
    rc = -1;
    goto done;
  }
  out->time_s = s.finish / twist_gain + extra_s;
  out->algo = a;
  out->events = eng_events(s.e);
  out->algbw = S / out->time_s;
  out->busbw = out->algbw * coll_bus_factor(r->op, group);
done:
  eng_free(s.e);
  free(s.free_at);
  free(s.count);
  free(s.cur);
  free(s.early);
  free(s.done);
  return rc;
}

int coll_flows(const net *n, const int64_t (*pairs)[2], int n_pairs, double bytes, double *time_s) {
  sim s = {.n = n, .chips = net_chips(n), .host_base = net_links(n)};
  s.free_at = calloc((size_t)net_links(n), sizeof *s.free_at);
  if (!s.free_at) return -1;
  double last = 0;
  for (int i = 0; i < n_pairs; i++) {
    if (pairs[i][0] < 0 || pairs[i][0] >= s.chips || pairs[i][1] < 0 || pairs[i][1] >= s.chips) {
      free(s.free_at);
      return -1;
    }
    double at = xfer(&s, pairs[i][0], pairs[i][1], bytes, 0);
    if (at > last) last = at;
  }
  free(s.free_at);
  *time_s = last;
  return s.failed ? -1 : 0;
}

double coll_rs_reducer_bw(const hw_model *hw) { return hw->scale_out.reducer_bw_bytes_per_s; }

double coll_rs_reducer_usd_per_h(const hw_model *hw) { return hw->scale_out.reducer_usd_per_hour; }

double coll_reduction_server_s(const hw_model *hw, int64_t chips, double bytes, int64_t reducers,
                               double reducer_bw) {
  double B = hw->scale_out.bw_per_chip_bytes_per_s, lat = hw->scale_out.latency_s;
  double rbw = reducer_bw > 0 ? reducer_bw : coll_rs_reducer_bw(hw);
  if (!(rbw > 0)) return -1;
  double g = (double)rs_host_gpus(hw, chips), shard = bytes / g;
  double worker = shard / B, server = (double)chips * shard / ((double)(reducers > 0 ? reducers : chips) * rbw);
  double bottleneck = worker > server ? worker : server;
  return 2 * rs_intra_s(hw, (int64_t)g, bytes) + bottleneck * (1 + 1.0 / CHUNKS) + 4 * lat;
}


int64_t coll_rs_reducers_for(const hw_model *hw, int64_t chips) {
  double rbw = coll_rs_reducer_bw(hw);
  if (!(rbw > 0)) return 0;
  double need = (double)chips * hw->scale_out.bw_per_chip_bytes_per_s / rbw;
  return need < 1 ? 1 : (int64_t)ceil(need - 1e-9);
}
