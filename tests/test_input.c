/*
** test_input.c -- the input pipeline: a starved pipeline (one small file per
** sample, no prefetch) stalls the chips by a hand-derived amount; the same
** data in record shards with prefetch 2 does not; the closed form matches
** the simulated steady state; bad configurations are errors.
*/
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw.h"
#include "../hw_models/hw_catalog.h"
#include "../sim/input.h"
#include "../sim/plan.h"
#include "../sim/step.h"
#include "../workloads/model.h"
#include "helpers.h"

#define REL(a, b, tol, ...) cr_assert(fabs((a) - (b)) <= (tol) * fabs(b), __VA_ARGS__)

/* ImageNet-style images (input_defaults: 110 kB JPEGs, 256 per host per
** step, 16 reads in flight, 30 ms first byte, 1.25e9 B/s, 16 cores x 500
** img/s, 6.4e10 B/s PCIe) fed to a fast accelerator: 50 ms per step. */
static const double COMPUTE = 0.05;

static input_cfg small_files(int prefetch) {
  input_cfg c;
  input_defaults(&c, INPUT_IMAGES);
  c.object_bytes = c.bytes_per_sample; /* one file per image */
  c.prefetch_steps = prefetch;
  return c;
}

static input_cfg shards(int prefetch) {
  input_cfg c;
  input_defaults(&c, INPUT_IMAGES); /* 128 MiB shards read in 16 MiB ranges */
  c.prefetch_steps = prefetch;
  return c;
}

static input_result sim(const input_cfg *c, double compute, int steps) {
  input_result r;
  char err[256] = "";
  cr_assert_eq(input_simulate(c, compute, steps, &r, err, sizeof err), 0, "%s", err);
  return r;
}

static input_closed closed(const input_cfg *c, double compute) {
  input_closed r;
  char err[256] = "";
  cr_assert_eq(input_closed_form(c, compute, &r, err, sizeof err), 0, "%s", err);
  return r;
}

Test(input, defaults_are_the_documented_figures) {
  input_cfg c;
  input_defaults(&c, INPUT_TOKENS);
  cr_assert_float_eq(c.bytes_per_sample, 8192, 0);
  cr_assert_float_eq(c.object_bytes, 134217728, 0);
  cr_assert_float_eq(c.read_bytes, 16777216, 0);
  cr_assert_eq(c.prefetch_steps, 2);
  input_defaults(&c, INPUT_IMAGES);
  cr_assert_float_eq(c.bytes_per_sample, 110e3, 0);
  cr_assert_float_eq(c.xfer_bytes_per_sample, 224 * 224 * 3, 0);
  cr_assert_float_eq(c.object_latency_s, 0.03, 0);
  cr_assert_eq(c.reads_in_flight, 16);
}

/* 256 files per step, 16 GETs in flight: 16 waves of GETs. GET i of wave w
** (both from 1) lands at w*L + (i + w - 1)*delta, delta = 110e3 B / 1.25e9
** B/s = 88 us the pipe time of one file, so the last at
**   16 * 0.03 + 31 * 88e-6 = 0.482728 s;
** its decode takes 1/500 s on a free core (the 16 files of a wave spread
** over 16 cores), then the batch, 256 x 150528 B, crosses PCIe at 6.4e10
** B/s plus 10 us: 0.000612112 s. Without prefetch the chips wait all of it,
** every step: stall = 0.485340112 s, at least the 16 x 30 ms of latency. */
Test(input, starved_small_files_without_prefetch_stall) {
  input_cfg c = small_files(0);
  input_result r = sim(&c, COMPUTE, 20);
  double want = 16 * 0.03 + 31 * 88e-6 + 0.002 + 256 * 150528 / 6.4e10 + 1e-5;
  cr_assert_float_eq(want, 0.485340112, 1e-12);
  REL(r.stall_s_per_step, want, 1e-9, "stall %.9f want %.9f", r.stall_s_per_step, want);
  REL(r.step_s, COMPUTE + want, 1e-9, "step %.9f", r.step_s);
  REL(r.total_stall_s, 20 * want, 1e-9, "total stall %.9f", r.total_stall_s);
  REL(r.total_s, 20 * (COMPUTE + want), 1e-9, "total %.9f", r.total_s);
  REL(r.data_s_per_step, want, 1e-9, "batch latency %.9f", r.data_s_per_step);
  /* bounded by storage latency: the 16 waves of 30 ms below, plus every
  ** byte through the pipe, one decode and the copy above */
  cr_assert_gt(r.stall_s_per_step, 16 * 0.03);
  cr_assert_lt(r.stall_s_per_step, 16 * 0.03 + 256 * 88e-6 + 0.002 + 0.000612112);
  cr_assert_str_eq(r.bound, INPUT_BOUND_PREFETCH);
  cr_assert_eq(r.requests, 20 * 256);
  /* the chips are busy less than a tenth of the time */
  cr_assert_lt(COMPUTE / r.step_s, 0.094);
}

/* The same images in 128 MiB shards, 16 MiB range GETs (152 images,
** 16.72 MB, 13.376 ms through the pipe), prefetch 2: per step the storage
** needs 28.16 MB / 1.25e9 = 22.5 ms, decode 256 / 8000 = 32 ms, PCIe 0.6 ms,
** all under the 50 ms of compute, and a batch's latency (~76 ms) is under
** the 2 steps of lead: the chips never wait after the first batch.
** First batch: GETs 0 and 1 land at 43.376 and 56.752 ms; 152 + 104 images
** round robin on 16 cores finish at 75.376 ms; + 0.612112 ms of PCIe. */
Test(input, record_shards_with_prefetch_remove_the_stall) {
  input_cfg c = shards(2);
  input_result r = sim(&c, COMPUTE, 40);
  cr_assert_lt(r.stall_s_per_step, 1e-12, "stall %.9g", r.stall_s_per_step);
  REL(r.step_s, COMPUTE, 1e-9, "step %.9f", r.step_s);
  cr_assert_str_eq(r.bound, INPUT_BOUND_COMPUTE);
  REL(r.first_batch_s, 0.075988112, 1e-9, "first batch %.9f", r.first_batch_s);
  REL(r.total_stall_s, r.first_batch_s, 1e-9, "only the first batch is waited for");
  REL(r.total_s, 0.075988112 + 40 * COMPUTE, 1e-9, "total %.9f", r.total_s);
  cr_assert_eq(r.requests, (40 * 256 + 151) / 152);

  /* prefetch alone does not save small files: 256 GETs x 30.088 ms / 16
  ** in flight = 481.408 ms per step, storage latency bound */
  input_cfg s = small_files(2);
  input_result q = sim(&s, COMPUTE, 40);
  REL(q.step_s, 256 * (0.03 + 88e-6) / 16, 1e-6, "step %.9f", q.step_s);
  cr_assert_str_eq(q.bound, INPUT_BOUND_STORAGE_LATENCY);
  /* shards alone do not either: without prefetch each step waits ~D */
  input_cfg s0 = shards(0);
  input_result z = sim(&s0, COMPUTE, 40);
  cr_assert_gt(z.stall_s_per_step, 0.02, "stall %.9f", z.stall_s_per_step);
}

typedef struct {
  const char *name;
  input_cfg c;
  double compute;
  const char *bound;
  int steps; /* 0: 200 */
} ccase;

static void check_case(const ccase *k) {
  input_result r = sim(&k->c, k->compute, k->steps ? k->steps : 200);
  input_closed f = closed(&k->c, k->compute);
  cr_log_info("%s: sim %.6f s [%s], closed %.6f s [%s]: %s", k->name, r.step_s, r.bound,
              f.step_s, f.bound, f.formula);
  REL(r.step_s, f.step_s, 0.02, "%s: sim %.6f closed %.6f", k->name, r.step_s, f.step_s);
  cr_assert(fabs(r.stall_s_per_step - f.stall_s_per_step) <= 0.02 * f.step_s,
            "%s: stall sim %.6f closed %.6f", k->name, r.stall_s_per_step, f.stall_s_per_step);
  cr_assert_str_eq(f.bound, k->bound, "%s: closed bound %s", k->name, f.bound);
  cr_assert_str_eq(r.bound, k->bound, "%s: sim bound %s", k->name, r.bound);
}

Test(input, closed_form_matches_the_simulated_steady_state) {
  ccase k[8];
  int n = 0;
  /* no prefetch: 0.05 + D, D = 16(0.03) + (16 + 0) x 88us + 2 ms + 0.612 ms */
  k[n++] = (ccase){"small files, no prefetch", small_files(0), COMPUTE, INPUT_BOUND_PREFETCH, 0};
  k[n++] = (ccase){"small files, prefetch 2", small_files(2), COMPUTE,
                   INPUT_BOUND_STORAGE_LATENCY, 0};
  k[n++] = (ccase){"shards, prefetch 2", shards(2), COMPUTE, INPUT_BOUND_COMPUTE, 0};
  k[n] = (ccase){"shards, 4 cores", shards(2), COMPUTE, INPUT_BOUND_DECODE, 0};
  k[n++].c.decode_cores = 4; /* 256 / (4 x 500) = 0.128 s */
  k[n] = (ccase){"shards, 2 Gbit/s storage", shards(2), COMPUTE, INPUT_BOUND_STORAGE_BW, 0};
  k[n++].c.storage_bw_bytes_per_s = 2.5e8; /* 28.16 MB / 2.5e8 = 0.11264 s */
  k[n] = (ccase){"shards, slow remote host", shards(2), COMPUTE, INPUT_BOUND_HOST_LINK, 0};
  k[n++].c.host_link_bw_bytes_per_s = 1.25e8; /* 38.5 MB / 1.25e8 = 0.308 s */
  input_cfg tok;
  /* A 16 MiB GET holds 2048 sequences, 64 steps: every 64th batch waits for
  ** a GET, D - 2 x 1 ms. 258 steps: the window (steps 129..257) holds two. */
  input_defaults(&tok, INPUT_TOKENS);
  k[n++] = (ccase){"tokens, fast chips", tok, 0.001, INPUT_BOUND_PREFETCH, 258};
  /* 2 x 25 ms of lead hides the 43.6 ms GET */
  k[n++] = (ccase){"tokens, 25 ms steps", tok, 0.025, INPUT_BOUND_COMPUTE, 0};
  for (int i = 0; i < n; i++) check_case(&k[i]);

  input_closed f = closed(&k[3].c, COMPUTE);
  REL(f.decode_s, 0.128, 1e-12, "decode");
  f = closed(&k[4].c, COMPUTE);
  REL(f.storage_s, 256 * 110e3 / 2.5e8, 1e-12, "storage");
  f = closed(&k[1].c, COMPUTE);
  REL(f.storage_s, 256 * (0.03 + 88e-6) / 16, 1e-12, "storage latency");
  REL(f.requests_per_step, 256.0, 1e-12, "GETs");
}

Test(input, hop_from_hardware) {
  hw_catalog *cat = th_catalog();
  input_cfg c;
  input_defaults(&c, INPUT_TOKENS);
  char err[256] = "";
  const hw_model *v5p = th_hw(cat, "tpu-v5p");
  cr_assert_eq(input_hop_from_hw(&c, v5p, false, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(c.host_link_bw_bytes_per_s, 4 * 1.6e10, 1); /* 4 chips x PCIe */
  cr_assert_eq(input_hop_from_hw(&c, v5p, true, err, sizeof err), 0, "%s", err);
  /* a TPU Node's user VM (n1-standard-16): its 32 Gbit/s NIC, below the
  ** host's 4 chips x 6.25e9 B/s of DCN, and its 8 cores decode */
  cr_assert_float_eq(c.host_link_bw_bytes_per_s, 4e9, 1);
  cr_assert_float_eq(c.host_link_latency_s, 1e-5, 1e-12);
  cr_assert_eq(c.decode_cores, 8);
  cr_assert(c.one_host);
  input_per_host(&c, 64, 4, 4096); /* one VM for all 16 hosts: the whole batch */
  cr_assert_eq(c.samples_per_step, 4096);
  hw_catalog_free(cat);
}

static void bad(input_cfg c, double compute, int steps, const char *needle) {
  input_result r;
  input_closed f;
  char err[256] = "";
  cr_assert_eq(input_simulate(&c, compute, steps, &r, err, sizeof err), -1, "%s", needle);
  cr_assert(strstr(err, needle), "'%s' not in '%s'", needle, err);
  if (steps >= 1 && steps <= 1000) {
    err[0] = 0;
    cr_assert_eq(input_closed_form(&c, compute, &f, err, sizeof err), -1, "%s", needle);
    cr_assert(strstr(err, needle), "'%s' not in '%s'", needle, err);
  }
}

Test(input, bad_configurations_are_errors) {
  input_cfg c;
  input_defaults(&c, INPUT_IMAGES);
  input_cfg b = c;
  b.storage_bw_bytes_per_s = 0;
  bad(b, COMPUTE, 10, "storage_bw_bytes_per_s must be > 0 (bytes/s), got 0");
  b = c;
  b.host_link_bw_bytes_per_s = 0;
  bad(b, COMPUTE, 10, "host_link_bw_bytes_per_s must be > 0");
  b = c;
  b.bytes_per_sample = -110e3;
  bad(b, COMPUTE, 10, "bytes_per_sample must be > 0 (bytes), got -110000");
  b = c;
  b.object_latency_s = -0.01;
  bad(b, COMPUTE, 10, "object_latency_s must be >= 0 (seconds), got -0.01");
  b = c;
  b.read_bytes = NAN;
  bad(b, COMPUTE, 10, "read_bytes must be >= 0");
  b = c;
  b.samples_per_step = 0;
  bad(b, COMPUTE, 10, "samples_per_step must be >= 1, got 0");
  b = c;
  b.reads_in_flight = 0;
  bad(b, COMPUTE, 10, "reads_in_flight must be in 1..4096, got 0");
  b = c;
  b.decode_cores = -1;
  bad(b, COMPUTE, 10, "decode_cores must be in 1..4096, got -1");
  b = c;
  b.decode_samples_per_s_per_core = 0;
  bad(b, COMPUTE, 10, "decode_samples_per_s_per_core must be > 0");
  b = c;
  b.prefetch_steps = -1;
  bad(b, COMPUTE, 10, "prefetch_steps must be >= 0, got -1");
  b = c;
  b.object_bytes = 1000;
  bad(b, COMPUTE, 10, "object_bytes (1000) is smaller than one sample");
  bad(c, -1, 10, "compute time per step must be >= 0 s, got -1");
  bad(c, INFINITY, 10, "compute time per step must be >= 0 s");
  bad(c, COMPUTE, 0, "steps must be in 1..1000000, got 0");
  bad(c, COMPUTE, 1000000, "samples one simulation takes");
  char err[64];
  input_result r;
  cr_assert_eq(input_simulate(NULL, COMPUTE, 10, &r, err, sizeof err), -1);
  cr_assert_str_eq(err, "input: no configuration");
}

Test(input, one_step_and_zero_compute) {
  input_cfg c = small_files(0);
  input_result r = sim(&c, 0, 1);
  REL(r.total_s, 0.485340112, 1e-9, "one step: the batch, then no compute");
  REL(r.step_s, 0.485340112, 1e-9, "step");
  cr_assert_eq(r.steps, 1);
}

/* Every family reads through the pipeline (#18: a CNN's stall was always
** 0): ResNet-50 on one 8-chip TPU v5e host, one JPEG a file, so each step's
** 1024 images wait for 1024 GETs of 110 kB, 16 in flight:
** 1024 x (0.03 s + 110e3 B / 1.25e9 B/s) / 16 = 1.9256 s a step even with
** prefetch 2 (storage is the throughput bound), far over the chips' ~0.1 s
** of compute; in record shards with prefetch 2, decoded on the host's 104
** free cores (1024 / (104 x 500 img/s) = 20 ms), nothing waits. */
Test(input, a_cnn_starves_on_small_files) {
  hw_catalog *cat = th_catalog();
  const hw_model *hw = th_hw(cat, "tpu-v5e");
  model *m = th_model("resnet50", 0);
  plan p = {.chips = 8, .dp = 8, .tp = 1, .pp = 1, .ep = 1, .mbs = 128, .gbs = 1024,
            .precision = GDT_BF16};
  char err[256];
  cr_assert_eq(plan_check(m, hw, &p, err, sizeof err), 0, "%s", err);
  input_cfg files = small_files(2);
  cr_assert_eq(input_hop_from_hw(&files, hw, false, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, hw, &p, &files, &r, NULL, err, sizeof err), 0, "%s", err);
  double want = 1024 * (0.03 + 110e3 / 1.25e9) / 16;
  cr_assert_gt(r.breakdown_s.input_stall, 0.9 * want, "stall %g", r.breakdown_s.input_stall);
  REL(r.step_time_s, want, 0.01, "step %g, want %g", r.step_time_s, want);
  input_cfg sh = shards(2);
  sh.decode_cores = 112 - 8; /* the host's 112 cores less one a chip, as simulate sets them */
  cr_assert_eq(input_hop_from_hw(&sh, hw, false, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, hw, &p, &sh, &r, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.breakdown_s.input_stall, 0, "stall %g", r.breakdown_s.input_stall);
  model_free(m);
  hw_catalog_free(cat);
}

/* --input-host remote (TPU Node, #18): one user VM (n1-standard-16: 8
** cores, 4e9 B/s) feeds the whole slice. ResNet-50 on 8 TPU v4 chips (2
** hosts), 1,024 ImageNet images a step from record shards, prefetch 2:
** locally each host decodes its 512 on 116 free cores (512 / (116 x 500)
** = 8.8 ms, under the compute): no stall. Remotely the VM decodes all
** 1,024 on 8 cores, 1024 / (8 x 500) = 0.256 s a step, and sends
** 1024 x 150,528 B / 4e9 B/s = 38.5 ms: the decode binds and the step
** becomes 0.256 s (the storage, 1024 x 110 kB / 1.25e9 = 90 ms, and the
** link overlap it under prefetch). */
Test(input, remote_host_starves_images) {
  hw_catalog *cat = th_catalog();
  const hw_model *hw = th_hw(cat, "tpu-v4");
  model *m = th_model("resnet50", 0);
  plan p = {.chips = 8, .dp = 8, .tp = 1, .pp = 1, .ep = 1, .mbs = 128, .gbs = 1024,
            .precision = GDT_BF16};
  char err[256];
  cr_assert_eq(plan_check(m, hw, &p, err, sizeof err), 0, "%s", err);
  input_cfg local = shards(2);
  local.decode_cores = 120 - 4; /* the host's 120 cores less one a chip, as simulate sets them */
  cr_assert_eq(input_hop_from_hw(&local, hw, false, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, hw, &p, &local, &r, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.breakdown_s.input_stall, 0, "stall %g", r.breakdown_s.input_stall);
  double compute = r.step_time_s;
  cr_assert_lt(compute, 0.256);
  input_cfg remote = local;
  cr_assert_eq(input_hop_from_hw(&remote, hw, true, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, hw, &p, &remote, &r, NULL, err, sizeof err), 0, "%s", err);
  REL(r.step_time_s, 1024.0 / (8 * 500), 0.02, "step %g, want the VM's decode", r.step_time_s);
  REL(r.breakdown_s.input_stall, r.step_time_s - compute, 1e-9, "stall");
  input_closed f;
  input_per_host(&remote, p.chips, hw->chips_per_node, p.gbs);
  cr_assert_eq(input_closed_form(&remote, compute, &f, err, sizeof err), 0, "%s", err);
  cr_assert_str_eq(f.bound, INPUT_BOUND_DECODE);
  REL(f.link_s, 1024.0 * 150528 / 4e9 + hw->scale_out.latency_s, 1e-9, "the VM's NIC");
  model_free(m);
  hw_catalog_free(cat);
}

/* What a sample is, family by family (input_for_run): a transformer's
** seq int32 tokens; an MLP's or a recommender's own input tensors over its
** batch. DLRM as MLPerf trains it on Criteo 1TB reads a label, 13 dense
** features and 26 categorical ids, 4 B each: 160 B, the preprocessed
** binary record (40 int32 fields); the MNIST-style MLP 784 fp32 pixels and
** an int32 label, 3,140 B. Asking for token records (--input tokens) keeps
** seq x 4 B. */
Test(input, a_sample_is_the_family_s_own_inputs) {
  static const struct {
    const char *model;
    int64_t seq;
    int kind; /* input_choice.kind */
    double bytes;
  } k[] = {{"dlrm", 0, 0, 160}, {"mlp", 0, 0, 784 * 4 + 4}, {"llama3-8b", 1024, 0, 4096},
           {"dlrm", 64, 1 + INPUT_TOKENS, 256}};
  hw_catalog *cat = th_catalog();
  const hw_model *hw = th_hw(cat, "h100-sxm");
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    model *m = th_model(k[i].model, k[i].seq);
    input_choice ch = {.kind = k[i].kind};
    input_cfg in;
    char err[256];
    cr_assert_eq(input_for_run(&in, hw, m, &ch, k[i].seq, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(in.bytes_per_sample, k[i].bytes, 1e-9, "%s: %g B a sample", k[i].model,
                       in.bytes_per_sample);
    cr_assert_float_eq(in.xfer_bytes_per_sample, k[i].bytes, 1e-9, "%s", k[i].model);
    model_free(m);
  }
  hw_catalog_free(cat);
}
