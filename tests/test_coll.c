/*
** test_coll.c -- the event engine, networks and collectives: closed forms
** on an idle network, contention, and published measurements.
*/
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/coll.h"
#include "../sim/engine.h"
#include "../sim/net.h"
#include "helpers.h"

/* ---- engine ---- */

typedef struct {
  int order[16];
  int n;
  double when[16];
} trace;

static void record(eng *e, void *ctx, int64_t arg) {
  trace *t = ctx;
  t->when[t->n] = eng_now(e);
  t->order[t->n++] = (int)arg;
}

Test(engine, equal_times_run_in_scheduling_order) {
  eng *e = eng_new();
  trace t = {0};
  eng_at(e, 2.0, record, &t, 0);
  eng_at(e, 1.0, record, &t, 1);
  eng_at(e, 2.0, record, &t, 2);
  eng_at(e, 1.0, record, &t, 3);
  eng_at(e, 0.5, record, &t, 4);
  cr_assert_eq(eng_run(e), 5);
  int want[] = {4, 1, 3, 0, 2};
  for (int i = 0; i < 5; i++) cr_assert_eq(t.order[i], want[i], "position %d", i);
  cr_assert_float_eq(t.when[4], 2.0, 0);
  cr_assert_float_eq(eng_now(e), 2.0, 0);
  eng_free(e);
}

static void chain(eng *e, void *ctx, int64_t arg) {
  int64_t *left = ctx;
  if (--*left > 0) eng_at(e, eng_now(e) + 1e-9 * (double)(arg % 7), chain, ctx, arg + 1);
}

Test(engine, runs_events_scheduled_by_events) {
  eng *e = eng_new();
  int64_t left = 100000;
  eng_at(e, 0, chain, &left, 0);
  cr_assert_eq(eng_run(e), 100000);
  cr_assert_eq(left, 0);
  eng_free(e);
}

Test(engine, resource_is_fifo) {
  eng_res r = {0};
  double a = eng_res_use(&r, 0, 2), b = eng_res_use(&r, 1, 2), c = eng_res_use(&r, 10, 1);
  cr_assert_float_eq(a, 2, 0);
  cr_assert_float_eq(b, 4, 0); /* waits for the first */
  cr_assert_float_eq(c, 11, 0);
  cr_assert_float_eq(r.busy_s, 5, 0);
}

/* ---- helpers ---- */

static hw_catalog *cat; /* per test process: Criterion forks each test */
static void setup(void) { cat = th_catalog(); }
static void teardown(void) { hw_catalog_free(cat); }

static net *mk(const char *hw, int64_t chips, int64_t slices) {
  char err[512];
  net *n = net_build(hw_catalog_find(cat, hw), chips, slices, err, sizeof err);
  cr_assert_not_null(n, "%s x %lld: %s", hw, (long long)chips, err);
  return n;
}

static coll_result run(net *n, coll_op op, coll_algo a, double bytes, int axis) {
  coll_req r = {.op = op, .algo = a, .bytes = bytes, .axis = axis};
  coll_result out;
  char err[512];
  cr_assert_eq(coll_run(n, &r, &out, err, sizeof err), 0, "%s", err);
  return out;
}

static double rel(double a, double b) { return fabs(a - b) / b; }

/* ---- networks ---- */

Test(net, tpu_slices_take_the_platform_shapes, .init = setup, .fini = teardown) {
  int64_t s[3];
  bool w[3];
  net *n = mk("tpu-v5p", 64, 1);
  net_shape(n, s, w);
  cr_assert(s[0] == 4 && s[1] == 4 && s[2] == 4 && w[0] && w[1] && w[2]);
  net_free(n);
  n = mk("tpu-v5p", 8, 1); /* 2x2x2: no wraparound on 2-long axes */
  net_shape(n, s, w);
  cr_assert(s[0] == 2 && s[2] == 2 && !w[0]);
  net_free(n);
  n = mk("tpu-v5e", 32, 1); /* 4x8: v5e wraps only 16-long axes */
  net_shape(n, s, w);
  cr_assert(s[0] == 4 && s[1] == 8 && !w[0] && !w[1]);
  net_free(n);
  n = mk("tpu-v5e", 256, 1);
  net_shape(n, s, w);
  cr_assert(s[0] == 16 && s[1] == 16 && w[0] && w[1]);
  net_free(n);
  char err[512];
  cr_assert_null(net_build(hw_catalog_find(cat, "tpu-v5p"), 100, 1, err, sizeof err));
  cr_assert(strstr(err, "tpu-v5p has no slice of 100 chips"), "%s", err);
  cr_assert_null(net_build(hw_catalog_find(cat, "tpu-v5e"), 300, 1, err, sizeof err));
  cr_assert(strstr(err, "largest slice 256"), "%s", err);
}

Test(net, paths_route_by_dimension_and_through_switches, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 64, 1);
  int64_t p[16];
  int64_t a[3] = {0, 0, 0}, b[3] = {3, 1, 0};
  /* x: 0 -> 3 the short way round the wrap (1 hop), then y: 1 hop */
  cr_assert_eq(net_path(n, net_chip_at(n, 0, a), net_chip_at(n, 0, b), p, 16), 2);
  net_free(n);
  n = mk("h100-sxm", 16, 1);
  cr_assert_eq(net_path(n, 0, 5, p, 16), 2);
  cr_assert_eq(p[0] % NET_SLOTS, NET_SLOT_UP);
  cr_assert_eq(net_path(n, 0, 9, p, 16), 2); /* another node: the NICs */
  cr_assert_eq(p[0] % NET_SLOTS, NET_SLOT_NIC_UP);
  cr_assert_float_eq(net_link_bw(n, p[0]), 5e10, 1);
  net_free(n);
}

/* ---- closed forms on an idle network ---- */

/* Ring all-reduce: 2(n-1)/n S/B + 2(n-1) a (nccl-tests PERFORMANCE.md,
** Thakur et al. 2005), B the NVSwitch bandwidth per GPU times its measured
** efficiency and a its latency. */
Test(coll, ring_all_reduce_matches_the_closed_form, .init = setup, .fini = teardown) {
  net *n = mk("h100-sxm", 8, 1);
  const hw_model *h = net_hw(n);
  double S = 1 << 30, B = h->scale_up.bw_per_chip_bytes_per_s * h->scale_up.efficiency;
  double a = h->scale_up.latency_s;
  double want = 2.0 * 7 / 8 * S / B + 2.0 * 7 * a;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_RING, S, -1);
  cr_assert(rel(r.time_s, want) < 0.02, "sim %g, formula %g", r.time_s, want);
  cr_assert(rel(r.formula_s, want) < 1e-9);
  cr_assert_float_eq(r.busbw, 2.0 * 7 / 8 * S / r.time_s, 1);
  /* reduce-scatter and all-gather are half of it */
  coll_result rs = run(n, COLL_REDUCE_SCATTER, COLL_RING, S, -1);
  coll_result ag = run(n, COLL_ALL_GATHER, COLL_RING, S, -1);
  cr_assert(rel(rs.time_s, want / 2) < 0.02, "rs %g", rs.time_s);
  cr_assert(rel(ag.time_s, want / 2) < 0.02, "ag %g", ag.time_s);
  net_free(n);
}

/* Across nodes a flat ring is bound by the NIC: 64 GPUs, 8 nodes. */
Test(coll, multi_node_ring_is_nic_bound, .init = setup, .fini = teardown) {
  net *n = mk("a100-80g", 64, 1);
  const hw_model *h = net_hw(n);
  double S = 256.0 * (1 << 20), B = h->scale_out.bw_per_chip_bytes_per_s;
  double want = 2.0 * 63 / 64 * S / B + 2.0 * 63 * h->scale_out.latency_s;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_RING, S, -1);
  cr_assert(rel(r.time_s, want) < 0.02, "sim %g, formula %g", r.time_s, want);
  net_free(n);
}

/* Hierarchical: intra-node reduce-scatter, inter-node all-reduce of 1/8,
** intra-node all-gather (docs/machine.md). */
Test(coll, hierarchical_matches_its_formula, .init = setup, .fini = teardown) {
  net *n = mk("h100-sxm", 32, 1);
  const hw_model *h = net_hw(n);
  double S = 1 << 30, Bi = h->scale_up.bw_per_chip_bytes_per_s * h->scale_up.efficiency;
  double Bo = h->scale_out.bw_per_chip_bytes_per_s;
  double ai = h->scale_up.latency_s, ao = h->scale_out.latency_s;
  double want = 2 * (7.0 * (S / 8 / Bi + ai)) + 2 * 3 * (S / 8 / 4 / Bo + ao);
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_HIERARCHICAL, S, -1);
  cr_assert(rel(r.time_s, want) < 0.02, "sim %g, formula %g", r.time_s, want);
  cr_assert(rel(r.formula_s, want) < 0.02);
  coll_result flat = run(n, COLL_ALL_REDUCE, COLL_RING, S, -1);
  cr_assert_lt(r.time_s, flat.time_s);
  net_free(n);
}

/* GB200 NVL72: 72 GPUs in one NVLink domain, so a 72-GPU ring never leaves
** NVLink: 2(n-1)/n S/B + 2(n-1) a with B the NVLink 5 bandwidth (9e11 B/s
** each way x 0.756 measured, hw_models/gb200.json), not the 5e10 B/s NIC. */
Test(coll, nvl72_ring_stays_on_nvlink, .init = setup, .fini = teardown) {
  net *n = mk("gb200", 72, 1);
  const hw_model *h = net_hw(n);
  double S = 1 << 30, B = h->scale_up.bw_per_chip_bytes_per_s * h->scale_up.efficiency;
  double want = 2.0 * 71 / 72 * S / B + 2.0 * 71 * h->scale_up.latency_s;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_RING, S, -1);
  cr_assert(rel(r.time_s, want) < 0.02, "sim %g, formula %g", r.time_s, want);
  net_free(n);
}

/* A group that ends in a partial node (12 H100s = 8 + 4) cannot pair chip i
** of every node, so the hierarchical all-reduce is refused and AUTO runs the
** flat ring, bound by the NIC on the two hops between the nodes: at least
** 2(n-1)/n S/B_nic, at most that plus 2(n-1) a_nic (the simulated ring
** overlaps those hops' latency with the NVLink hops). Before, the
** hierarchical rings stepped past the last chip and wrote outside their
** arrays (`tpusim collective --hw h100-sxm --chips 12 --op all-reduce`). */
Test(coll, partial_node_runs_the_flat_ring, .init = setup, .fini = teardown) {
  net *n = mk("h100-sxm", 12, 1);
  const hw_model *h = net_hw(n);
  double S = 256.0 * (1 << 20), B = h->scale_out.bw_per_chip_bytes_per_s;
  double bw_s = 2.0 * 11 / 12 * S / B, lat_s = 2.0 * 11 * h->scale_out.latency_s;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_AUTO, S, -1);
  cr_assert_eq(r.algo, COLL_RING);
  cr_assert(r.time_s > bw_s * 0.999 && r.time_s < (bw_s + lat_s) * 1.02, "sim %g, bounds %g..%g",
            r.time_s, bw_s, bw_s + lat_s);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_HIERARCHICAL, .bytes = S, .axis = -1};
  char err[512];
  cr_assert_neq(coll_run(n, &q, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "hierarchical needs whole nodes"), "%s", err);
  net_free(n);
}

Test(coll, reduction_server_matches_its_formula, .init = setup, .fini = teardown) {
  net *n = mk("a100-80g", 16, 1);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_REDUCTION_SERVER, .bytes = 1 << 30,
                .axis = -1, .reducers = 16};
  coll_result r;
  char err[256];
  cr_assert_eq(coll_run(n, &q, &r, err, sizeof err), 0, "%s", err);
  cr_assert(rel(r.time_s, r.formula_s) < 0.05, "sim %g, formula %g", r.time_s, r.formula_s);
  /* it moves S each way instead of 2(n-1)/n S: nearly twice the ring's speed */
  coll_result ring = run(n, COLL_ALL_REDUCE, COLL_RING, 1 << 30, -1);
  cr_assert_gt(ring.time_s / r.time_s, 1.6);
  net_free(n);
}

/* scaling-book sharding.md: a throughput-bound all-gather over an axis
** takes V / W_bidirectional whatever the axis size; without wraparound it
** runs at one-way bandwidth: (|X|-1)/|X| V / W_oneway. */
Test(coll, torus_all_gather_follows_scaling_book, .init = setup, .fini = teardown) {
  double V = 512.0 * (1 << 20);
  net *a = mk("tpu-v5e", 256, 1); /* 16x16, both axes wrap */
  coll_result ax = run(a, COLL_ALL_GATHER, COLL_TORUS, V, 0);
  double W = net_hw(a)->scale_up.link_bw_bytes_per_s;
  cr_assert(rel(ax.time_s, 15.0 / 16 * V / (2 * W)) < 0.05, "16-axis %g", ax.time_s);
  net *b = mk("tpu-v5e", 128, 1); /* 8x16: the 8-axis has no wraparound */
  coll_result bx = run(b, COLL_ALL_GATHER, COLL_TORUS, V, 0);
  cr_assert(rel(bx.time_s, 7.0 / 8 * V / W) < 0.05, "8-axis %g", bx.time_s);
  cr_assert(bx.time_s / ax.time_s > 1.7 && bx.time_s / ax.time_s < 2.1);
  /* independent of the axis size: 4x4x4 and 8x8x8 v5p, all axes at once */
  net *c = mk("tpu-v5p", 64, 1), *d = mk("tpu-v5p", 512, 1);
  coll_result cr_ = run(c, COLL_ALL_GATHER, COLL_TORUS, V, -1);
  coll_result dr = run(d, COLL_ALL_GATHER, COLL_TORUS, V, -1);
  cr_assert(rel(dr.time_s, cr_.time_s) < 0.15, "64 chips %g, 512 chips %g", cr_.time_s, dr.time_s);
  net_free(a), net_free(b), net_free(c), net_free(d);
}

Test(coll, two_flows_on_one_link_take_twice_as_long, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 64, 1);
  int64_t one[1][2] = {{0, 1}}, two[2][2] = {{0, 1}, {0, 1}};
  double t1, t2, S = 64.0 * (1 << 20);
  cr_assert_eq(coll_flows(n, one, 1, S, &t1), 0);
  cr_assert_eq(coll_flows(n, two, 2, S, &t2), 0);
  double lat = net_hw(n)->scale_up.latency_s;
  cr_assert(rel(t2 - lat, 2 * (t1 - lat)) < 1e-9, "one %g, two %g", t1, t2);
  net_free(n);
}

/* ---- published measurements ---- */

/* ml-engineering network/README.md (NVLink SHARP section): 8xH200, 16 GiB
** all-reduce, ring busbw 367.2 GB/s, NVLS 480.0 GB/s. Within 20 %. */
Test(coll, h200_nvlink_all_reduce_bus_bandwidth, .init = setup, .fini = teardown) {
  net *n = mk("h200", 8, 1);
  coll_result ring = run(n, COLL_ALL_REDUCE, COLL_RING, 16.0 * (1 << 30), -1);
  coll_result nvls = run(n, COLL_ALL_REDUCE, COLL_NVLS, 16.0 * (1 << 30), -1);
  cr_assert(rel(ring.busbw, 367.2e9) < 0.20, "ring busbw %.1f GB/s", ring.busbw / 1e9);
  cr_assert(rel(nvls.busbw, 480.0e9) < 0.20, "nvls busbw %.1f GB/s", nvls.busbw / 1e9);
  cr_assert_eq(run(n, COLL_ALL_REDUCE, COLL_AUTO, 1e9, -1).algo, COLL_NVLS);
  cr_assert(rel(nvls.time_s, nvls.formula_s) < 0.05, "nvls sim %g, formula %g", nvls.time_s,
            nvls.formula_s);
  net_free(n);
}

/* scaling-book sharding.md: v5e 8x4, all-gather over the 4-axis of
** bf16[2048, 8192] (34 MB gathered): measured 680 us. Within 20 %. */
Test(coll, tpu_v5e_all_gather_measured, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5e", 32, 1);
  coll_result r = run(n, COLL_ALL_GATHER, COLL_TORUS, 2048.0 * 8192 * 2, 0);
  cr_assert(rel(r.time_s, 680e-6) < 0.20, "%.0f us", r.time_s * 1e6);
  net_free(n);
}

/* ---- bad requests ---- */

Test(coll, bad_requests_are_errors, .init = setup, .fini = teardown) {
  net *n = mk("h100-sxm", 8, 1);
  coll_result r;
  char err[512];
  coll_req zero = {.op = COLL_ALL_REDUCE, .bytes = 0, .axis = -1};
  cr_assert_eq(coll_run(n, &zero, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "bytes must be positive"), "%s", err);
  coll_req torus = {.op = COLL_ALL_REDUCE, .algo = COLL_TORUS, .bytes = 1e6, .axis = -1};
  cr_assert_eq(coll_run(n, &torus, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "torus needs a TPU slice"), "%s", err);
  net_free(n);
  cr_assert_null(net_build(hw_catalog_find(cat, "h100-sxm"), 8, 2, err, sizeof err));
  cr_assert(strstr(err, "--slices applies to TPU pods"), "%s", err);
}

/* Several TPU slices: each axis inside the slice, the all-reduce of the
** remaining shard over DCN in the middle. The phases of the six schedules
** drift apart a little, so the simulation is within 20 % of the formula,
** and the DCN hop makes it slower than one slice of the same size. */
Test(coll, multi_slice_hierarchical, .init = setup, .fini = teardown) {
  net *two = mk("tpu-v5p", 128, 2), *one = mk("tpu-v5p", 128, 1);
  coll_result a = run(two, COLL_ALL_REDUCE, COLL_AUTO, 1 << 30, -1);
  coll_result b = run(one, COLL_ALL_REDUCE, COLL_AUTO, 1 << 30, -1);
  cr_assert_eq(a.algo, COLL_HIERARCHICAL);
  cr_assert(rel(a.time_s, a.formula_s) < 0.20, "sim %g, formula %g", a.time_s, a.formula_s);
  cr_assert_gt(a.time_s, b.time_s);
  net_free(two), net_free(one);
}

/* Two GPU nodes: the two directions of a bidirectional ring cross the node
** boundary on different NICs, so it runs at twice the NIC-bound ring. */
Test(coll, biring_doubles_the_nic_bound_ring, .init = setup, .fini = teardown) {
  net *n = mk("h100-sxm", 16, 1);
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_RING, 1 << 30, -1);
  coll_result b = run(n, COLL_ALL_REDUCE, COLL_BIRING, 1 << 30, -1);
  cr_assert(rel(r.time_s / b.time_s, 2.0) < 0.02, "ring %g, biring %g", r.time_s, b.time_s);
  cr_assert(rel(b.time_s, b.formula_s) < 0.02);
  net_free(n);
}

/* All-to-all can be no faster than its busiest link allows. */
Test(coll, all_to_all_respects_the_busiest_link, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 64, 1);
  coll_result r = run(n, COLL_ALL_TO_ALL, COLL_AUTO, 1 << 28, -1);
  cr_assert_geq(r.time_s, r.formula_s * 0.999);
  cr_assert_lt(r.time_s, r.formula_s * 3);
  net_free(n);
}

Test(net, groups_inside_a_slice_take_any_shape, .init = setup, .fini = teardown) {
  char err[256];
  cr_assert_null(net_build(hw_catalog_find(cat, "tpu-v5p"), 2, 1, err, sizeof err));
  net *g = net_build_group(hw_catalog_find(cat, "tpu-v5p"), 2, err, sizeof err);
  cr_assert_not_null(g, "%s", err);
  int64_t s[3];
  bool w[3];
  net_shape(g, s, w);
  cr_assert_eq(s[0] * s[1] * s[2], 2);
  net_free(g);
  net *four = mk("tpu-v5p", 4, 1); /* 2x2x1 is a v5p slice */
  net_free(four);
}

/* ---- at any scale (issue 15) ---- */

static coll_result run_on(const char *hw, int64_t chips, int64_t slices, coll_op op, coll_algo a,
                          double bytes, bool formula_only) {
  net *n = mk(hw, chips, slices);
  coll_req q = {.op = op, .algo = a, .bytes = bytes, .axis = -1, .formula_only = formula_only};
  coll_result r;
  char err[512];
  cr_assert_eq(coll_run(n, &q, &r, err, sizeof err), 0, "%s x %lld: %s", hw, (long long)chips, err);
  net_free(n);
  return r;
}

/* Above the budget coll_run answers with the closed form, so the closed
** form must track the simulation where both run. The bands are what they
** are measured to be (docs/machine.md, "At any scale"): exact on one slice
** and on GPU nodes for the torus, hierarchical, NVLS and Reduction Server
** schedules; the multi-slice torus phases drift apart (the simulation up to
** 1.6x slower); a flat ring over many nodes pipelines its slow hops (the
** simulation faster); all-to-all's formula is the busiest link's lower
** bound; the tree's formula is its busiest routed link. */
Test(coll, closed_form_tracks_the_simulation, .init = setup, .fini = teardown) {
  static const struct {
    const char *hw;
    int64_t chips, slices;
    coll_op op;
    coll_algo algo;
    double lo, hi; /* sim / formula */
  } C[] = {
      {"tpu-v5p", 4096, 1, COLL_ALL_REDUCE, COLL_TORUS, 0.98, 1.02},
      {"tpu-v5p", 512, 1, COLL_ALL_GATHER, COLL_TORUS, 0.98, 1.02},
      {"tpu-v5e", 256, 1, COLL_REDUCE_SCATTER, COLL_TORUS, 0.98, 1.02},
      {"tpu-v5p", 128, 2, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 0.97, 1.02},
      {"tpu-v5p", 1024, 4, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 0.97, 1.02},
      {"tpu-v5e", 512, 2, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 0.97, 1.02},
      {"tpu-v5p", 1024, 4, COLL_REDUCE_SCATTER, COLL_HIERARCHICAL, 0.97, 1.02},
      {"tpu-v5p", 1024, 4, COLL_ALL_GATHER, COLL_HIERARCHICAL, 0.96, 1.02},
      {"tpu-v5p", 512, 1, COLL_ALL_TO_ALL, COLL_DIRECT, 1.0, 3.0},
      {"tpu-v5p", 1024, 4, COLL_ALL_TO_ALL, COLL_DIRECT, 1.0, 1.5},
      {"tpu-v5p", 64, 1, COLL_ALL_REDUCE, COLL_RING, 0.9, 1.0},
      {"h100-sxm", 512, 1, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 0.98, 1.02},
      {"h100-sxm", 512, 1, COLL_ALL_GATHER, COLL_RING, 0.7, 1.0},
      {"h100-sxm", 512, 1, COLL_REDUCE_SCATTER, COLL_RING, 0.7, 1.0},
      {"h100-sxm", 512, 1, COLL_ALL_TO_ALL, COLL_DIRECT, 1.0, 1.05},
      {"h100-sxm", 8, 1, COLL_ALL_REDUCE, COLL_NVLS, 0.95, 1.02},
      {"h100-sxm", 8, 1, COLL_ALL_GATHER, COLL_RING, 0.98, 1.02},
      {"a100-80g", 128, 1, COLL_ALL_REDUCE, COLL_REDUCTION_SERVER, 0.98, 1.02},
      {"a100-80g", 128, 1, COLL_ALL_REDUCE, COLL_TREE, 0.95, 1.1},
      {"h100-sxm", 64, 1, COLL_ALL_REDUCE, COLL_TREE, 0.9, 1.1},
      /* on a torus the tree's edges are multi-hop routes whose whole
      ** chunks queue at each shared link: the simulation is slower than
      ** the busiest link's load (the formula, a lower bound) */
      {"tpu-v5e", 256, 1, COLL_ALL_REDUCE, COLL_TREE, 1.0, 1.6},
  };
  for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
    coll_result r = run_on(C[i].hw, C[i].chips, C[i].slices, C[i].op, C[i].algo, 256.0 * (1 << 20), false);
    cr_assert_gt(r.events, 0, "%s x %lld: not simulated (%s)", C[i].hw, (long long)C[i].chips, r.note);
    double q = r.time_s / r.formula_s;
    cr_assert(q >= C[i].lo && q <= C[i].hi, "%s x %lld/%lld %s %s: sim/formula %.3f outside [%.2f, %.2f]",
              C[i].hw, (long long)C[i].chips, (long long)C[i].slices, coll_op_name(C[i].op),
              coll_algo_name(C[i].algo), q, C[i].lo, C[i].hi);
  }
}

/* A million chips answer, from the closed form, and say so; the answer is
** the one formula_only gives. (Timing targets: make bench.) */
Test(coll, a_million_chips_answer_in_closed_form, .init = setup, .fini = teardown) {
  static const char *const HW[] = {"tpu-v5p", "h100-sxm"};
  static const coll_op OPS[] = {COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL};
  for (int h = 0; h < 2; h++)
    for (int o = 0; o < 4; o++) {
      coll_result r = run_on(HW[h], 1000000, 1, OPS[o], COLL_AUTO, 1 << 30, false);
      coll_result f = run_on(HW[h], 1000000, 1, OPS[o], COLL_AUTO, 1 << 30, true);
      cr_assert_eq(r.events, 0);
      cr_assert(r.time_s > 0 && r.time_s == f.formula_s, "%s %s: %g vs %g", HW[h],
                coll_op_name(OPS[o]), r.time_s, f.formula_s);
      cr_assert_str_eq(r.note, "closed form: 1000000 chips exceed the simulation's limit of 16384");
      cr_assert(strncmp(r.formula, r.note, strlen(r.note)) == 0, "%s", r.formula);
      cr_assert_str_eq(f.note, "");
    }
}

/* Below the chip limit the event budget decides: a flat ring over 4096
** chips (33 million events) is answered by its closed form. */
Test(coll, the_event_budget_names_its_limit, .init = setup, .fini = teardown) {
  coll_result r = run_on("h100-sxm", 4096, 1, COLL_ALL_REDUCE, COLL_RING, 1 << 30, false);
  cr_assert_eq(r.events, 0);
  cr_assert(strstr(r.note, "closed form: 33546240 events exceed the simulation's limit of 16777216"),
            "%s", r.note);
}

/* The all-to-all bound from one line per axis equals routing every pair. */
Test(coll, all_to_all_bound_equals_routing_every_pair, .init = setup, .fini = teardown) {
  static const struct { const char *hw; int64_t chips, slices; } N[] = {
      {"tpu-v5p", 64, 1}, {"tpu-v5p", 8, 1}, {"tpu-v5p", 128, 2}, {"tpu-v5e", 32, 1},
      {"tpu-v5p", 192, 1}, {"h100-sxm", 12, 1}, {"h100-sxm", 64, 1}, {"cpu-spr", 6, 1}};
  for (size_t i = 0; i < sizeof N / sizeof *N; i++) {
    net *n = mk(N[i].hw, N[i].chips, N[i].slices);
    int64_t chips = net_chips(n), path[64];
    double S = 1 << 26, piece = S / (double)chips, *load = calloc((size_t)net_links(n), sizeof *load);
    for (int64_t a = 0; a < chips; a++)
      for (int64_t b = 0; b < chips; b++) {
        int k = net_path(n, a, b, path, 64);
        for (int h = 0; h < k; h++) load[path[h]] += piece / net_link_bw(n, path[h]);
      }
    double worst = 0;
    for (int64_t l = 0; l < net_links(n); l++)
      if (load[l] > worst) worst = load[l];
    free(load);
    coll_result r = run_on(N[i].hw, N[i].chips, N[i].slices, COLL_ALL_TO_ALL, COLL_DIRECT, S, true);
    cr_assert(rel(r.formula_s, worst) < 1e-9, "%s x %lld: bound %g, every pair %g", N[i].hw,
              (long long)N[i].chips, r.formula_s, worst);
    net_free(n);
  }
}

/* More chips than a slice and no --slices: the fewest equal slices of an
** allowed shape; the errors name counts that build. */
Test(net, pod_scale_counts_split_into_slices, .init = setup, .fini = teardown) {
  int64_t s[3];
  bool w[3];
  net *n = mk("tpu-v5p", 1000000, 1);
  net_shape(n, s, w);
  cr_assert_eq(net_slices(n), 3125);
  cr_assert(s[0] * s[1] * s[2] == 320 && w[0] && w[1] && w[2]);
  net_free(n);
  n = mk("tpu-v5p", 16384, 1);
  cr_assert_eq(net_slices(n), 4);
  net_free(n);
  char err[512];
  const hw_model *v5p = hw_catalog_find(cat, "tpu-v5p"), *v5e = hw_catalog_find(cat, "tpu-v5e");
  cr_assert_null(net_build(v5p, 16384, 2, err, sizeof err));
  cr_assert(strstr(err, "no slice of 8192 chips (largest 6144; nearest allowed: 6144); 16384 "
                        "chips make 4 slices of 4096 over DCN (--slices 4)"), "%s", err);
  cr_assert_null(net_build(v5p, 100, 1, err, sizeof err));
  cr_assert(strstr(err, "nearest allowed: 64 or 128); use --slices"), "%s", err);
  cr_assert_null(net_build(v5e, 1000000, 1, err, sizeof err));
  cr_assert(strstr(err, "nearest allowed: 999936 or 1000192"), "%s", err);
  /* every count named builds */
  const struct { const hw_model **hw; int64_t chips; } OK[] = {
      {&v5p, 6144}, {&v5p, 64}, {&v5p, 128}, {&v5e, 999936}, {&v5e, 1000192}};
  for (size_t i = 0; i < sizeof OK / sizeof *OK; i++) {
    net *m = net_build(*OK[i].hw, OK[i].chips, 1, err, sizeof err);
    cr_assert_not_null(m, "%lld: %s", (long long)OK[i].chips, err);
    net_free(m);
  }
}

/* ---- torus across slices, groups across slices (issue 15) ---- */

/* The torus algorithm's rings stay inside a slice: over several slices it
** would leave out the DCN, so it is refused, naming hierarchical (16,384
** v5p chips are 4 slices of 16x16x16 = 4096). Along one axis (--axis) its
** rings are the same in every slice: 2 slices of 4x4x4 time as one. */
Test(coll, torus_across_slices_names_hierarchical, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 16384, 1);
  static const coll_op OPS[] = {COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER};
  for (int i = 0; i < 3; i++) {
    coll_req q = {.op = OPS[i], .algo = COLL_TORUS, .bytes = 1 << 30, .axis = -1};
    coll_result r;
    char err[512];
    cr_assert_eq(coll_run(n, &q, &r, err, sizeof err), -1, "%s: not refused", coll_op_name(OPS[i]));
    cr_expect(strstr(err, "these 16384 chips are 4 slices of 4096 joined by DCN") &&
                  strstr(err, "--algo hierarchical is torus inside each slice plus the DCN stage"),
              "%s", err);
  }
  net_free(n);
  net *two = mk("tpu-v5p", 128, 2), *one = mk("tpu-v5p", 64, 1);
  coll_result a = run(two, COLL_ALL_REDUCE, COLL_TORUS, 1 << 26, 0);
  coll_result b = run(one, COLL_ALL_REDUCE, COLL_TORUS, 1 << 26, 0);
  cr_expect(rel(a.time_s, b.time_s) < 1e-12, "axis x: 2 slices %g s, one %g s", a.time_s, b.time_s);
  net_free(two), net_free(one);
}

/* What hierarchical adds to the torus of one slice is the DCN stage, by
** hand: two slices of 4x4x4 v5p, an all-reduce of S. Inside a slice each
** of the 6 schedules (3 axes x 2 directions) carries S/6 and reduce-
** scatters it over three 4-long axes, leaving S/(6 x 64) per chip; across
** the 2 slices that is all-reduced, 2 (m - 1) = 2 steps of half of it, the
** six schedules sharing the chip's DCN NIC (6.25e9 B/s, 10 us: the v5p
** file's scale_out): 2 x (S/(6 x 64 x 2) / (6.25e9 / 6) + 1e-5 s)
** = 2 x (S / (128 x 6.25e9) + 1e-5 s). */
Test(coll, hierarchical_is_the_slice_torus_plus_the_dcn_stage, .init = setup, .fini = teardown) {
  double S = 1 << 30;
  coll_result h = run_on("tpu-v5p", 128, 2, COLL_ALL_REDUCE, COLL_HIERARCHICAL, S, true);
  coll_result t = run_on("tpu-v5p", 64, 1, COLL_ALL_REDUCE, COLL_TORUS, S, true);
  double dcn = 2 * (S / (128 * 6.25e9) + 1e-5);
  cr_expect(rel(h.formula_s - t.formula_s, dcn) < 1e-9, "hierarchical %g s - torus %g s = %g s, "
            "want the DCN stage %g s", h.formula_s, t.formula_s, h.formula_s - t.formula_s, dcn);
}

/* A group larger than the largest slice (6,144 v5p chips, 16x16x24) spans
** slices as a machine does: 16,384 is 4 parts of 4096 and times as the
** same chips built as 4 slices; 12,288 is 2 of 6144. Before, any group
** over 6,144 chips was an error. */
Test(net, groups_larger_than_a_slice_span_slices, .init = setup, .fini = teardown) {
  const hw_model *v5p = hw_catalog_find(cat, "tpu-v5p");
  char err[512];
  static const struct { int64_t chips, slices; } G[] = {{16384, 4}, {12288, 2}, {6144, 1}};
  for (size_t i = 0; i < sizeof G / sizeof *G; i++) {
    net *g = net_build_group(v5p, G[i].chips, err, sizeof err);
    cr_assert_not_null(g, "%lld: %s", (long long)G[i].chips, err);
    cr_expect_eq(net_slices(g), G[i].slices, "%lld chips: %lld slices", (long long)G[i].chips,
                 (long long)net_slices(g));
    net_free(g);
  }
  double grp = coll_time_s(v5p, 16384, 0, COLL_ALL_REDUCE, 1 << 30, 1, 0, COLL_AUTO, true, err, sizeof err);
  double sl = coll_time_s(v5p, 16384, 0, COLL_ALL_REDUCE, 1 << 30, 4, 0, COLL_AUTO, true, err, sizeof err);
  cr_expect(grp > 0 && grp == sl, "group %g s, 4 slices %g s (%s)", grp, sl, err);
}

/* A group that no shape or split holds names the nearest sizes that do,
** for a group (any shape that fits in the pod), not a slice's shapes:
** 29 is prime and longer than any side (24), so 28 (1x2x14) or 30 (2x3x5);
** 6,151 is a prime past a slice: 6,150 = 2 x 3 x 5^2 x 41 splits into 41
** parts of 150 (5x5x6); 6,152 = 2^3 x 769, 6,153 = 3 x 7 x 293,
** 6,154 = 2 x 17 x 181 and 6,155 = 5 x 1231 have no part of 64 to 6,144
** chips without a prime factor over 24; 6,156 = 2^2 x 3^4 x 19 is 3 parts
** of 2,052 (9x12x19). Each size named builds. */
Test(net, a_group_that_does_not_build_names_the_nearest_that_do, .init = setup, .fini = teardown) {
  const hw_model *v5p = hw_catalog_find(cat, "tpu-v5p");
  char err[512];
  cr_assert_null(net_build_group(v5p, 29, err, sizeof err));
  cr_expect(strstr(err, "no group of 29 chips fits in a slice (largest 6144, 16x16x24; nearest "
                        "allowed: 28 or 30)"), "%s", err);
  cr_assert_null(net_build_group(v5p, 6151, err, sizeof err));
  cr_expect(strstr(err, "6151 chips do not split into equal parts that each fit in a slice") &&
                strstr(err, "nearest allowed: 6150 or 6156"), "%s", err);
  static const int64_t OK[] = {28, 30, 6150, 6156};
  for (size_t i = 0; i < sizeof OK / sizeof *OK; i++) {
    net *g = net_build_group(v5p, OK[i], err, sizeof err);
    cr_assert_not_null(g, "%lld: %s", (long long)OK[i], err);
    net_free(g);
  }
}

/* A command's own budget (a sweep's rows share one, cmd_collective.c):
** a flat ring all-reduce over 64 chips is 2 (n - 1) n = 8,064 events, so
** it simulates with 8,064 left and is a closed form, saying so, with
** 8,000 left. */
Test(coll, a_run_keeps_to_the_events_its_command_has_left, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 64, 1);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_RING, .bytes = 1 << 20, .axis = -1,
                .max_events = 8064};
  coll_result r;
  char err[512];
  cr_assert_eq(coll_run(n, &q, &r, err, sizeof err), 0, "%s", err);
  cr_expect_eq(r.events, 8064);
  cr_expect_str_eq(r.note, "");
  q.max_events = 8000;
  cr_assert_eq(coll_run(n, &q, &r, err, sizeof err), 0, "%s", err);
  cr_expect_eq(r.events, 0);
  cr_expect_str_eq(r.note, "closed form: 8064 events exceed the 8000 left of this command's budget");
  cr_expect(r.time_s > 0 && r.time_s == r.formula_s);
  net_free(n);
}

/* ---- the network (issue 18) ---- */

/* The torus all-reduce and its closed form agree on every TPU shape,
** with or without wraparound, and on GPU node counts: the simulation
** runs the phases in step and a line without wraparound as a folded ring,
** as the formula assumes. Before, v5e 4x8 was 10.8 ms simulated against
** 5.89 ms formula, v4 4x4x8 3.04 against 2.00. */
Test(coll, formula_and_simulation_agree_over_shapes, .init = setup, .fini = teardown) {
  static const struct { const char *hw; int64_t chips; coll_algo algo; } G[] = {
      {"tpu-v5e", 8, COLL_TORUS},    {"tpu-v5e", 32, COLL_TORUS},  {"tpu-v5e", 64, COLL_TORUS},
      {"tpu-v5e", 128, COLL_TORUS},  {"tpu-v5e", 256, COLL_TORUS}, {"tpu-v4", 8, COLL_TORUS},
      {"tpu-v4", 128, COLL_TORUS},   {"tpu-v5p", 64, COLL_TORUS},  {"tpu-v5p", 128, COLL_TORUS},
      {"tpu-v5p", 512, COLL_TORUS},  {"tpu-v6e", 64, COLL_TORUS},  {"h100-sxm", 16, COLL_AUTO},
      {"h100-sxm", 64, COLL_AUTO},   {"a100-80g", 32, COLL_AUTO},  {"a100-40g-gcp", 32, COLL_AUTO}};
  for (size_t i = 0; i < sizeof G / sizeof *G; i++) {
    coll_result r = run_on(G[i].hw, G[i].chips, 1, COLL_ALL_REDUCE, G[i].algo, 256.0 * (1 << 20), false);
    cr_expect(r.events > 0 && rel(r.time_s, r.formula_s) < 0.03, "%s x %lld: sim %g s, formula %g s",
              G[i].hw, (long long)G[i].chips, r.time_s, r.formula_s);
  }
}

/* By hand, v5e 4x8 (no wraparound; link B = 4.5e10 B/s x efficiency, the
** v5e file), all-reduce of S: 4 parts of S/4, two starting on x, two on y;
** both parts of an axis share its links (the folded ring uses both
** directions), so each runs at B/2. Phase 1: y-first, 7 steps of S/4/8
** at B/2 = 0.4375 S/B (x-first: 3 x S/16 / (B/2) = 0.375, in its shadow);
** phase 2: x-first on y, 7 x S/128 / (B/2) = 0.109 S/B; the all-gather
** mirrors them: 2 x (0.4375 + 0.109375) = 1.09375 S/B plus 2 x (7 + 7)
** hops of latency (the 2-link hops pay 2). */
Test(coll, v5e_4x8_all_reduce_by_hand, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5e", 32, 1);
  const hw_model *h = net_hw(n);
  double S = 256.0 * (1 << 20), B = h->scale_up.link_bw_bytes_per_s * h->scale_up.efficiency;
  double bw_s = 1.09375 * S / B;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_TORUS, S, -1);
  cr_expect(r.formula_s >= bw_s && r.formula_s < bw_s * 1.02, /* + 28 steps' latency */
            "formula %g s, bandwidth term %g s", r.formula_s, bw_s);
  cr_expect(rel(r.time_s, r.formula_s) < 0.02, "sim %g s, formula %g s", r.time_s, r.formula_s);
  net_free(n);
}

/* By hand, v5p 4x4x8 (every axis wraps): 6 parts of S/6; the z-first
** parts' phases are the slowest in each phase (7/8 against 3/4), so the
** phase-synchronous time is 2 x S/6 x 7/8 x (1 + 1/4 + 1/16) / B =
** 0.3828 S/B -- which is also the z links' whole load (each z link
** carries that), so no schedule of equal parts does better. */
Test(coll, v5p_4x4x8_all_reduce_by_hand, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 128, 1);
  const hw_model *h = net_hw(n);
  double S = 256.0 * (1 << 20), B = h->scale_up.link_bw_bytes_per_s * h->scale_up.efficiency;
  double bw_s = 2.0 * S / 6 * 7 / 8 * (1 + 0.25 + 0.0625) / B;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_TORUS, S, -1);
  cr_expect(r.formula_s >= bw_s && r.formula_s < bw_s * 1.05, /* + 28 steps' latency */
            "formula %g s, by hand %g s",
            r.formula_s, bw_s);
  cr_expect(rel(r.time_s, r.formula_s) < 0.02, "sim %g s, formula %g s", r.time_s, r.formula_s);
  net_free(n);
}

/* NVIDIA's NCCL 2.4 blog: double binary trees reach ring-like bus
** bandwidth, because a rank internal in one tree and a leaf in the other
** sends about 2S. Over 16 A100 nodes' NICs (2 nodes x 8, 25 GB/s each)
** the busiest NIC carries at least 1.5 S: the tree is no faster than
** 1.5 S/B, and at most 2 S/B plus its fill. */
Test(coll, tree_is_bound_by_its_busiest_link, .init = setup, .fini = teardown) {
  net *n = mk("a100-80g", 16, 1);
  double S = 256.0 * (1 << 20), B = net_hw(n)->scale_out.bw_per_chip_bytes_per_s;
  coll_result r = run(n, COLL_ALL_REDUCE, COLL_TREE, S, -1);
  cr_expect(r.formula_s >= 1.5 * S / B && r.time_s >= 1.5 * S / B * 0.999, "formula %g, sim %g, 1.5 S/B %g",
            r.formula_s, r.time_s, 1.5 * S / B);
  cr_expect(r.time_s < 2.4 * S / B, "sim %g s", r.time_s);
  net_free(n);
}

/* Reducers are Vertex AI's CPU VMs beside GPU hosts: an entry without
** reducer figures (a TPU slice, whose DCN joins slices) runs none, and
** says which field is missing. */
Test(coll, reduction_server_needs_the_entrys_reducer_vm, .init = setup, .fini = teardown) {
  net *n = mk("tpu-v5p", 64, 1);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_REDUCTION_SERVER, .bytes = 1 << 30, .axis = -1,
                .reducers = 8};
  coll_result rs;
  char err[256];
  cr_assert_eq(coll_run(n, &q, &rs, err, sizeof err), -1);
  cr_assert(strstr(err, "system.scale_out.reducer_bw_bytes_per_s"), "%s", err);
  cr_assert_eq(coll_rs_reducers_for(net_hw(n), 64), 0);
  net_free(n);
}

/* Reduction Server (Vertex AI docs and the 2021 blog): it wins when the
** hosts' network binds. 4 GCP a2-highgpu-8g hosts (8 A100, 100 Gbit/s per
** VM = 1.25e10 B/s per host), 1 GiB of gradients, 16 n1-highcpu-16
** reducers at 32 Gbit/s (4e9 B/s): the hierarchical all-reduce moves
** 2 x 3/4 S over each host's NIC = 1.5 S / 1.25e10 = 129 ms (+ NVLink);
** the reducers move S each way: max(S/1.25e10, 4 S/(16 x 4e9)) = 85.9 ms
** x (1 + 1/8) (+ the same NVLink stages): at least 20 % shorter, and the
** 16 reducers cost 16 x $0.5668 = $9.07 an hour more (the entry's
** system.scale_out.reducer_usd_per_hour). */
Test(coll, reduction_server_wins_when_the_host_nic_binds, .init = setup, .fini = teardown) {
  net *n = mk("a100-40g-gcp", 32, 1);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_REDUCTION_SERVER, .bytes = 1 << 30, .axis = -1,
                .reducers = 16};
  coll_result rs, h = run(n, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 1 << 30, -1);
  char err[256];
  cr_assert_eq(coll_run(n, &q, &rs, err, sizeof err), 0, "%s", err);
  cr_expect(rs.time_s < 0.80 * h.time_s, "RS %g s, hierarchical %g s", rs.time_s, h.time_s);
  cr_expect(rel(rs.time_s, rs.formula_s) < 0.05, "RS sim %g, formula %g", rs.time_s, rs.formula_s);
  /* the reducer VM's figures are the entry's data (hw_models, cited) */
  cr_expect_float_eq(coll_rs_reducer_bw(net_hw(n)), 4e9, 1);
  cr_expect_float_eq(16 * coll_rs_reducer_usd_per_h(net_hw(n)), 9.0688, 1e-9);
  /* 32 x 1.5625e9 B/s of worker NICs over 4e9 B/s reducers: 12.5, so 13 */
  cr_expect_eq(coll_rs_reducers_for(net_hw(n), 32), 13);
  net_free(n);
  /* ... and loses where every GPU has its own 200 Gb/s InfiniBand NIC
  ** (DGX A100): 8 x 25 GB/s per host against 16 x 4 GB/s of reducers */
  n = mk("a100-80g", 32, 1);
  h = run(n, COLL_ALL_REDUCE, COLL_HIERARCHICAL, 1 << 30, -1);
  cr_assert_eq(coll_run(n, &q, &rs, err, sizeof err), 0, "%s", err);
  cr_expect(rs.time_s > 2 * h.time_s, "RS %g s, hierarchical %g s", rs.time_s, h.time_s);
  net_free(n);
  /* and inside one NVLink node there is no network to relieve */
  n = mk("h100-sxm", 8, 1);
  h = run(n, COLL_ALL_REDUCE, COLL_AUTO, 1 << 30, -1);
  cr_assert_eq(coll_run(n, &q, &rs, err, sizeof err), 0, "%s", err);
  cr_expect(rs.time_s > h.time_s, "RS %g s, NVLink %g s", rs.time_s, h.time_s);
  net_free(n);
}

/* ---- slice shapes (issue 18) ---- */

/* A shape built as given; offered_only false admits a hypothetical one. */
static net *mk_shaped(const char *hw, int64_t a, int64_t b, int64_t c, bool offered_only) {
  char err[512];
  int64_t s[3] = {a, b, c};
  net *n = net_build_shaped(hw_catalog_find(cat, hw), a * b * c, 1, s, offered_only, err, sizeof err);
  cr_assert_not_null(n, "%s %lldx%lldx%lld: %s", hw, (long long)a, (long long)b, (long long)c, err);
  return n;
}

/* By hand, 128 v4 chips. 4x4x8 (every axis a whole number of 4-chip
** cubes, so every axis wraps): as v5p_4x4x8_all_reduce_by_hand, 2 x S/6 x
** 7/8 x (1 + 1/4 + 1/16) = 0.3828 S/B. A hypothetical 2x8x8 (Cloud TPU
** offers no slice with a 2-long side above 32 chips; a 2-long axis has no
** wraparound): 6 parts of S/6, rotated axis orders (2,8,8), (8,8,2),
** (8,2,8). The 2-axis's folded ring is shared by both directions' parts,
** so each runs at B/2. Phase 1: the 2-first parts, 1 step of S/12 at B/2
** = S/6 (the 8-first: 7 x S/48 = 0.146, in its shadow); phase 2: 7 x
** S/96 = 7/96 (the others 7/384 and 1/48); phase 3: 7 x S/768; the
** all-gather mirrors them: 2 x (1/6 + 7/96 + 7/768) = 191/384 = 0.4974
** S/B, 1.30x the 4x4x8's -- why the OCS builds slices of whole cubes. */
Test(net, v4_128_chips_4x4x8_beats_a_2x8x8_by_hand, .init = setup, .fini = teardown) {
  net *good = mk_shaped("tpu-v4", 4, 4, 8, true), *flat = mk_shaped("tpu-v4", 2, 8, 8, false);
  const hw_model *h = net_hw(good);
  double S = 256.0 * (1 << 20), B = h->scale_up.link_bw_bytes_per_s * h->scale_up.efficiency;
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_TORUS, .bytes = S, .axis = -1, .formula_only = true};
  coll_result a, b;
  char err[512];
  cr_assert_eq(coll_run(good, &q, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(coll_run(flat, &q, &b, err, sizeof err), 0, "%s", err);
  double good_s = 2.0 * S / 6 * 7 / 8 * (1 + 0.25 + 0.0625) / B, flat_s = 191.0 / 384 * S / B;
  /* above the bandwidth terms: 42 and 30 hops of 1 us latency, < 5% */
  cr_expect(a.time_s >= good_s && a.time_s < good_s * 1.05, "4x4x8 %g s, by hand %g s", a.time_s, good_s);
  cr_expect(b.time_s >= flat_s && b.time_s < flat_s * 1.05, "2x8x8 %g s, by hand %g s", b.time_s, flat_s);
  bool wrap[3];
  int64_t sh[3];
  net_shape(flat, sh, wrap);
  cr_expect(!wrap[0] && wrap[1] && wrap[2], "only the 8-long axes wrap");
  net_free(good);
  net_free(flat);
}

/* The offered shapes, from the files' slice_shapes (whole 4x4x4 cubes,
** sides at most 16 on v4; v5e's listed 1x1 ... 16x16): 512 v4 chips are 8x8x8
** or 4x8x16 (4x4x32 is longer than the pod's 16), most cubic first; 128
** v5e chips only 8x16 (4x32 is 8:1 and longer than 16); 2x8x8 is refused
** naming the shape to use instead. */
Test(net, offered_shapes_follow_the_cloud_tpu_rules, .init = setup, .fini = teardown) {
  int64_t s[8][3];
  const hw_model *v4 = hw_catalog_find(cat, "tpu-v4"), *v5e = hw_catalog_find(cat, "tpu-v5e");
  cr_assert_eq(net_offered_shapes(v4, 512, s, 8), 2);
  cr_expect(s[0][0] == 8 && s[0][1] == 8 && s[0][2] == 8);
  cr_expect(s[1][0] == 4 && s[1][1] == 8 && s[1][2] == 16);
  cr_assert_eq(net_offered_shapes(v5e, 128, s, 8), 1);
  cr_expect(s[0][0] == 8 && s[0][1] == 16 && s[0][2] == 1);
  char err[512];
  int64_t bad[3] = {2, 8, 8}, turned[3] = {8, 4, 4};
  cr_expect_eq(net_shape_check(v4, bad, err, sizeof err), -1);
  cr_expect(strstr(err, "nearest offered: 4x4x8") != NULL, "%s", err);
  cr_expect_eq(net_shape_check(v4, turned, err, sizeof err), 0, "a turned 4x4x8 is the same slice");
  cr_expect_eq(net_offered_shapes(hw_catalog_find(cat, "h100-sxm"), 8, s, 8), 0);
}

/* The planner's choice (coll_best_shape) is the cheapest offered shape by
** the same closed form, each compared here; on 512 v4 chips that is 8x8x8
** (phase 1: 7/8 x S/6 against 4x8x16's 15/16 x S/6). */
Test(coll, the_chosen_shape_is_the_cheapest_offered, .init = setup, .fini = teardown) {
  const hw_model *v4 = hw_catalog_find(cat, "tpu-v4");
  double S = 1e9, best_s = 0;
  int64_t best[3] = {0, 0, 0}, s[8][3];
  cr_assert_eq(coll_best_shape(v4, 512, 1, S, COLL_AUTO, best, &best_s), 2);
  cr_expect(best[0] == 8 && best[1] == 8 && best[2] == 8);
  int k = net_offered_shapes(v4, 512, s, 8);
  for (int i = 0; i < k; i++) {
    char err[256];
    double t = coll_time_shaped_s(v4, 512, 1, s[i], COLL_ALL_REDUCE, S, COLL_AUTO, true, err, sizeof err);
    cr_assert(t > 0, "%s", err);
    cr_expect(best_s <= t, "chosen %g s, %lldx%lldx%lld %g s", best_s, (long long)s[i][0],
              (long long)s[i][1], (long long)s[i][2], t);
  }
}
