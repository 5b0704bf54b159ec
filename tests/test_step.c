/*
** test_step.c -- the training-step simulation: bad plans, schedule
** behaviour (bubble, interleaving), and the published runs of
** tests/data/public-runs.csv (a copy of shared/reference/public-runs.csv:
** Megatron SC21 Table 1 and Korthikanti et al. 2022 Table 5, each row with
** its source in the "source" column).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../sim/coll.h"
#include "../sim/framework.h"
#include "../sim/step.h"
#include "../sim/step_int.h"

#include <cjson/cJSON.h>
#include "../viz/trace.h"
#include "helpers.h"

static model *load_model(const char *src, int64_t seq) { return th_model(src, seq); }

static int simulate(const char *src, const char *hw, plan p, step_result *r, char *err,
                    size_t errn) {
  hw_catalog *c = th_catalog();
  model *m = load_model(src, p.seq);
  int rc = plan_check(m, th_hw(c, hw), &p, err, errn);
  if (rc == 0) rc = step_simulate(m, th_hw(c, hw), &p, NULL, r, NULL, err, errn);
  model_free(m);
  hw_catalog_free(c);
  return rc;
}

/* A plan with the defaults of the command line. */
static plan base(int64_t chips, int64_t tp, int64_t pp, int64_t gbs, int64_t seq) {
  return (plan){.chips = chips, .tp = tp, .pp = pp, .ep = 1, .mbs = 1, .vp = 1, .slices = 1,
                .gbs = gbs, .seq = seq, .schedule = PLAN_1F1B, .precision = GDT_BF16};
}

/* The gradient reduce moves the gradients in the dtype the memory model
** keeps them in, per framework: plain PyTorch DDP all-reduces .grad in its
** own dtype, fp32 under autocast (4 B); Megatron-Bridge's recipes keep bf16
** buffers (grad_reduce_in_fp32=False, 2 B); MaxText keeps fp32 gradients
** but XLA reduces each in its dot's bf16 (2 B: the bf16 weight-shaped
** all-reduces of shared/reference/hlo's MaxText Llama 3 8B step); fp32
** training reduces fp32. By hand for llama3-8b's 8,030,261,248 parameters
** at tp 2 x pp 2: 8,030,261,248 / 4 x 4 B = 8,030,261,248 B (plain) and
** half that (megatron-core, maxtext). */
Test(step, grad_reduce_bytes_follow_the_gradient_dtype) {
  hw_catalog *c = th_catalog();
  model *m = load_model("llama3-8b", 128);
  const hw_model *gpu = th_hw(c, "a100-80g"), *tpu = th_hw(c, "tpu-v5p");
  plan p = base(8, 2, 2, 8, 128);
  framework_apply(framework_find("plain"), &p);
  cr_assert_float_eq(step_grad_bytes(m, gpu, &p), (double)m->params, 1);
  cr_assert_eq(m->params, 8030261248LL);
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_float_eq(step_grad_bytes(m, gpu, &p), (double)m->params / 2, 1);
  framework_apply(framework_find("maxtext"), &p);
  cr_assert_float_eq(step_grad_bytes(m, tpu, &p), (double)m->params / 2, 1);
  /* fp32 training: 4 B whatever the framework */
  framework_apply(framework_find("megatron-core"), &p);
  p.precision = GDT_F32;
  cr_assert_float_eq(step_grad_bytes(m, gpu, &p), (double)m->params, 1);
  model_free(m);
  hw_catalog_free(c);
}

/* Activation offload moves what the memory model says a layer keeps: a
** fully recomputed layer its input, 1/tp of it under sequence
** parallelism. Llama 3 8B at seq 8192, mbs 4, tp 4 with SP on tpu-v5p
** (host link 16 GB/s, PCIe 4): 4 x 8192 x 4096 x 2 B / 4 = 67,108,864 B,
** 4.194 ms each way; the same plan without SP keeps the whole input,
** four times that. Selective under maxtext keeps MaxText's 'minimal'
** set, the same count the memory model holds (mem_layer_saved_bytes). */
Test(step, offload_moves_what_the_memory_model_keeps) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "tpu-v5p");
  model *m = load_model("llama3-8b", 8192);
  plan p = base(16, 4, 1, 16, 8192);
  framework_apply(framework_find("maxtext"), &p);
  p.mbs = 4, p.sp = true, p.offload = PLAN_OFFLOAD_ACTIVATIONS;
  char err[256];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(r.offload_layer_s, 67108864.0 / 16e9, 1e-12, "%.6g s", r.offload_layer_s);
  p.sp = false;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(r.offload_layer_s, 4 * 67108864.0 / 16e9, 1e-12, "%.6g s", r.offload_layer_s);
  p.sp = true, p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  mem_opts o;
  plan mp;
  mem_setup(m, h, &p, &o, &mp);
  double saved = mem_layer_saved_bytes(&m->info.tf, &mp, &o, wl_tf_layer_kind(&m->info.tf, 0));
  /* 'minimal' at tp 4, SP: 2 x (4096 + 4096 + 2 x 1024 + 4096 + 2 x 14336) / 4 B a token */
  cr_assert_float_eq(saved, 4 * 8192 * 2 * 43008.0 / 4, 1);
  cr_assert_float_eq(r.offload_layer_s, saved / 16e9, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

Test(step, bad_plans_say_what_does_not_divide) {
  static const struct {
    int64_t chips, tp, pp, dp, ep, mbs, gbs;
    const char *want;
  } rows[] = {
      {8, 3, 1, 0, 1, 1, 0, "tp 3 does not divide the 32 attention heads"},
      {8, 2, 2, 3, 1, 1, 0, "dp 3 x tp 2 x pp 2 x cp 1 = 12, but --chips is 8"},
      {64, 1, 64, 0, 1, 1, 0, "pp 64 is more than the 32 layers"},
      {3, 1, 3, 0, 1, 1, 0, "32 layers do not split into pp 3"},
      {4, 1, 1, 0, 1, 3, 16, "mbs 3 x dp 4 does not divide the global batch 16"},
      {2, 1, 1, 0, 2, 1, 0, "ep 2 needs a MoE model"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    hw_catalog *c = th_catalog();
    model *m = load_model("llama3-8b", 512);
    plan p = base(rows[i].chips, rows[i].tp, rows[i].pp, rows[i].gbs, 512);
    p.dp = rows[i].dp;
    p.ep = rows[i].ep;
    p.mbs = rows[i].mbs;
    char err[512] = "";
    cr_assert_eq(plan_check(m, th_hw(c, "h100-sxm"), &p, err, sizeof err), -1, "row %zu", i);
    cr_assert(strstr(err, rows[i].want), "row %zu: %s", i, err);
    model_free(m);
    hw_catalog_free(c);
  }
}

/* GPipe and 1F1B have the same bubble, (p-1)/(m+p-1) of the step
** (Narayanan et al. 2021, §2.2); interleaving with V chunks divides it by V.
** Llama 2 7B's 32k vocabulary keeps the last stage's head under one layer's
** work, so the stages are near balanced and the bubble is the schedule's
** (Llama 3's 128k head, 2.4 layers at 1k tokens, adds a wait interleaving
** does not divide). */
Test(step, pipeline_bubble_follows_the_schedules) {
  char err[512];
  step_result a, b, c, one;
  plan pa = base(4, 1, 4, 8, 1024), pb = pa, pc = pa, po = base(1, 1, 1, 8, 1024);
  pb.schedule = PLAN_GPIPE;
  pc.schedule = PLAN_INTERLEAVED;
  pc.vp = 2;
  cr_assert_eq(simulate("llama2-7b", "h100-sxm", pa, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate("llama2-7b", "h100-sxm", pb, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate("llama2-7b", "h100-sxm", pc, &c, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate("llama2-7b", "h100-sxm", po, &one, err, sizeof err), 0, "%s", err);
  double frac = 3.0 / (8 + 3); /* (p-1)/(m+p-1) */
  cr_assert(fabs(a.breakdown_s.pipeline_bubble / a.step_time_s - frac) < 0.05,
            "1f1b bubble %.3f of %.3f s", a.breakdown_s.pipeline_bubble, a.step_time_s);
  cr_assert(fabs(b.step_time_s / a.step_time_s - 1) < 0.03, "gpipe %g vs 1f1b %g", b.step_time_s,
            a.step_time_s);
  cr_assert_lt(c.breakdown_s.pipeline_bubble, 0.7 * a.breakdown_s.pipeline_bubble);
  cr_assert_eq(one.breakdown_s.pipeline_bubble < 1e-9, true);
}

/* Gradient buckets with interleaving: each chunk's go when that chunk's
** last backward has passed them, so chunks that finish early hide their
** all-reduce behind the others' backward. The exposed part can only
** shrink against 1F1B (whose buckets all wait for the one last backward),
** and after-backward exposes the whole all-reduce. */
Test(step, interleaved_chunks_release_their_buckets_early) {
  char err[512];
  step_result one, four, after;
  plan p1 = base(64, 1, 4, 128, 2048), p4 = p1, pa;
  p4.schedule = PLAN_INTERLEAVED;
  p4.vp = 4;
  pa = p4;
  pa.grad_sync = PLAN_GRAD_AFTER_BACKWARD;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p1, &one, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p4, &four, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", pa, &after, err, sizeof err), 0, "%s", err);
  cr_assert_gt(one.dp_allreduce_s, 0.02, "a material all-reduce: %g s", one.dp_allreduce_s);
  cr_assert_lt(four.exposed_dp_s, one.exposed_dp_s, "interleaved %g s, 1f1b %g s exposed",
               four.exposed_dp_s, one.exposed_dp_s);
  cr_assert_lt(four.exposed_dp_s, 0.5 * four.dp_allreduce_s);
  cr_assert_float_eq(after.exposed_dp_s, after.dp_allreduce_s, 1e-3 * after.dp_allreduce_s,
                     "after-backward exposes it all: %g of %g s", after.exposed_dp_s,
                     after.dp_allreduce_s);
}

/* Published runs. The model: the GPT layer of the rows (GELU, LayerNorm,
** learned positions, tied embeddings, Megatron's dropout 0.1), fp16 on
** A100-80GB; missing micro-batch sizes taken as 1, missing interleaving as
** none (both unknown in SC21 Table 1); gradients reduced after backward as
** Megatron-LM's local DDP did. The target: a mean absolute error
** of at most 10 % with no row beyond 25 %. With each fusion kernel timed
** (issue 7) the mean was 4.4 % and the worst row 10.8 % (5.2 % and 10.8 %
** on 2026-12-06); this test holds the mean at 6 % and every row at 15 %
** (docs/validation.md has the generated table). Nothing here was fitted
** to a row. */
Test(step, published_runs, .timeout = 120) {
  FILE *f = fopen("tests/data/public-runs.csv", "r");
  cr_assert_not_null(f);
  char line[1024];
  cr_assert_not_null(fgets(line, sizeof line, f)); /* header */
  double sum = 0, worst = 0;
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    char *col[32];
    int k = 0;
    for (char *s = line, *save = NULL, *t; (t = strtok_r(s, ",\n", &save)) && k < 32; s = NULL)
      col[k++] = t;
    cr_assert_eq(k, 27, "malformed row: %s", line);
    /* id,source,chip,chips,model,params_B,layers,hidden,heads,kv_heads,ffn,vocab,seq,gbs_seq,
       mbs,tp,pp,dp,cp,vp,sp,zero,recompute,precision,metric,value,derived_step_s */
    char path[256], json[1024];
    snprintf(path, sizeof path, "tests/out/run-%s.json", col[0]);
    snprintf(json, sizeof json,
             "{\"name\": \"%s\", \"family\": \"transformer\", \"layers\": %s, \"hidden\": %s, "
             "\"heads\": %s, \"ffn_hidden\": %s, \"ffn\": \"gelu\", \"norm\": \"layernorm\", "
             "\"bias\": true, \"positions\": \"learned\", \"max_positions\": %s, \"vocab\": %s, "
             "\"seq_len\": %s, \"tied_embeddings\": true, \"dropout\": 0.1, "
             "\"train\": {\"global_batch\": %s, \"precision\": \"fp16\", \"optimizer\": \"adam\"}}",
             col[0], col[6], col[7], col[8], col[10], col[12], col[11], col[12], col[13]);
    th_write_temp(path + strlen("tests/out/"), json);
    plan p = base(atoll(col[3]), atoll(col[15]), atoll(col[16]), 0, 0);
    p.mbs = strcmp(col[14], "?") ? atoll(col[14]) : 1;
    p.precision = GDT_F16;
    p.sp = strcmp(col[20], "1") == 0;
    p.recompute = strcmp(col[22], "full") == 0 ? PLAN_RECOMPUTE_FULL : PLAN_RECOMPUTE_SELECTIVE;
    /* Megatron-LM of 2021-22 (local DDP) reduces gradients after the whole
    ** backward: megatron/training.py train_step calls allreduce_gradients()
    ** once forward_backward_func returns */
    p.grad_sync = PLAN_GRAD_AFTER_BACKWARD;
    /* and wrote the attention scores to HBM (FlashAttention came after) */
    p.attention = PLAN_ATTN_SCORES;
    if (strcmp(col[19], "?") && atoll(col[19]) > 1) {
      p.schedule = PLAN_INTERLEAVED;
      p.vp = atoll(col[19]);
    }
    step_result r;
    char err[512];
    cr_assert_eq(simulate(path, "a100-80g", p, &r, err, sizeof err), 0, "%s: %s", col[0], err);
    /* timed from IR-derived kernel costs (issue 7), each agreeing with its formula */
    cr_assert_eq(p.op_costs, OPCOST_IR);
    cr_assert_gt(r.op_costs.lowered, 50, "%s: %lld signatures lowered", col[0], (long long)r.op_costs.lowered);
    cr_assert_gt(r.op_costs.hits, 0);
    cr_assert_eq(r.op_costs.differ, 0, "%s", col[0]);
    if (n == 0) { /* and the formula source gives the same step, to the bit */
      plan pf = p;
      pf.op_costs = OPCOST_FORMULA;
      step_result rf;
      cr_assert_eq(simulate(path, "a100-80g", pf, &rf, err, sizeof err), 0, "%s", err);
      cr_assert_eq(rf.step_time_s, r.step_time_s, "%.17g vs %.17g", rf.step_time_s, r.step_time_s);
      cr_assert_eq(rf.op_costs.lowered, 0);
    }
    double want = atof(col[26]), e = fabs(r.step_time_s - want) / want;
    cr_log_info("%s: predicted %.2f s, published %.2f s (%+.1f%%)", col[0], r.step_time_s, want,
                100 * (r.step_time_s - want) / want);
    cr_assert_lt(e, 0.15, "%s: predicted %.2f s, published %.2f s", col[0], r.step_time_s, want);
    sum += e;
    if (e > worst) worst = e;
    n++;
  }
  fclose(f);
  cr_assert_eq(n, 18);
  cr_log_info("mean absolute error %.1f%%, worst row %.1f%%", 100 * sum / n, 100 * worst);
  cr_assert_leq(sum / n, 0.06, "MAPE %.1f%%", 100 * sum / n);
}

/* A starved pipeline (one small file per sample, nothing prefetched) makes
** the chips wait; record shards with two batches prefetched hide the input
** entirely (docs/input.md). */
Test(step, input_stall_from_a_starved_pipeline) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("llama3-8b", 2048);
  plan p = base(8, 1, 1, 64, 2048);
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  input_cfg starved, fed;
  input_defaults(&starved, INPUT_TOKENS);
  starved.bytes_per_sample = starved.xfer_bytes_per_sample = 2048 * 4;
  starved.object_bytes = starved.bytes_per_sample;
  starved.read_bytes = 0;
  starved.prefetch_steps = 0;
  cr_assert_eq(input_hop_from_hw(&starved, h, false, err, sizeof err), 0, "%s", err);
  fed = starved;
  input_defaults(&fed, INPUT_TOKENS);
  fed.bytes_per_sample = fed.xfer_bytes_per_sample = 2048 * 4;
  cr_assert_eq(input_hop_from_hw(&fed, h, false, err, sizeof err), 0, "%s", err);
  step_result a, b, none;
  cr_assert_eq(step_simulate(m, h, &p, &starved, &a, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, h, &p, &fed, &b, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, h, &p, NULL, &none, NULL, err, sizeof err), 0, "%s", err);
  /* at least one storage round trip per step: 30 ms first-byte latency */
  cr_assert_gt(a.breakdown_s.input_stall, 0.03, "starved stall %g", a.breakdown_s.input_stall);
  cr_assert_lt(b.breakdown_s.input_stall, 1e-9, "fed stall %g", b.breakdown_s.input_stall);
  cr_assert_float_eq(b.step_time_s, none.step_time_s, 1e-12);
  cr_assert_float_eq(a.step_time_s - a.breakdown_s.input_stall, none.step_time_s, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* Korthikanti et al.'s 175B plan in memory: 45.6 GiB of model state on
** each of the 64 A100s fits; on one 8-GPU node without pipelining it does
** not, and the first fixes are listed with recomputed peaks. */
Test(step, memory_fits_or_lists_fixes) {
  step_result r;
  char err[512];
  plan p = base(64, 8, 8, 64, 2048);
  p.sp = true;
  p.recompute = PLAN_RECOMPUTE_SELECTIVE;
  cr_assert_eq(simulate("gpt3-175b", "a100-80g", p, &r, err, sizeof err), 0, "%s", err);
  cr_assert(r.fits, "peak %g", r.memory.peak);
  cr_assert_eq(r.n_fixes, 0);
  plan q = base(8, 8, 1, 8, 2048);
  cr_assert_eq(simulate("gpt3-175b", "a100-80g", q, &r, err, sizeof err), 0, "%s", err);
  cr_assert(!r.fits);
  cr_assert_gt(r.n_fixes, 0);
  for (int i = 0; i < r.n_fixes; i++) cr_assert_lt(r.fixes[i].peak, r.memory.peak);
}

/* Plan p of m on h checked, simulated and written as --trace writes it,
** parsed back (the caller deletes it). */
static cJSON *traced(const model *m, const hw_model *h, plan p) {
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  step_result r;
  step_timeline tl;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &r, &tl, err, sizeof err), 0, "%s", err);
  cr_assert_eq(trace_write(f, &tl, &r, &p, m->name, h->name), 0);
  step_timeline_free(&tl);
  fclose(f);
  cJSON *o = cJSON_Parse(buf);
  free(buf);
  cr_assert_not_null(o, "not JSON");
  return o;
}

/* --trace writes Chrome trace JSON: every forward and backward of every
** stage, the gradient buckets on the network track, HBM in use. */
Test(step, trace_is_chrome_json_with_every_task) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("llama3-8b", 2048);
  plan p = base(32, 4, 4, 32, 2048);
  cJSON *o = traced(m, h, p);
  int tasks = 0, updates = 0, buckets = 0, tp_comm = 0, counters = 0, ops = 0, dots = 0;
  double span_end[4] = {0}, op_end[4] = {0};
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "traceEvents")) {
    const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
    const char *cat = cJSON_GetObjectItem(e, "cat") ? cJSON_GetObjectItem(e, "cat")->valuestring : "";
    if (strcmp(ph, "C") == 0) counters++;
    if (strcmp(ph, "X") != 0) continue;
    int tid = cJSON_GetObjectItem(e, "tid")->valueint, pid = cJSON_GetObjectItem(e, "pid")->valueint;
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    double end = cJSON_GetObjectItem(e, "ts")->valuedouble + cJSON_GetObjectItem(e, "dur")->valuedouble;
    if (tid == 1 && strcmp(cat, "optimizer") == 0) updates++;
    else if (tid == 1) tasks++;
    if (tid == 1 && strncmp(name, "backward mb 0 ", 14) == 0) span_end[pid] = end;
    if (tid == 2 && strncmp(name, "all-reduce bucket", 17) == 0) buckets++;
    if (tid == 2 && strstr(name, "tensor-parallel all-reduce")) tp_comm++;
    if (tid == 3) {
      ops++;
      dots += strcmp(cat, "matmul") == 0;
      cr_assert_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "shape"), "%s", name);
      if (end > op_end[pid]) op_end[pid] = end;
    }
  }
  /* dp 2: 16 micro-batches; 4 stages x 16 x (forward + backward); a bucket
  ** per layer; an update per stage; micro-batch 0 op by op: 8 layers a
  ** stage, each with 9 dots forward (q, k, v, o, gate, up, down and the two
  ** of attention) and two per forward dot backward (both operands' gradients) */
  cr_assert_eq(tasks, 4 * 16 * 2);
  cr_assert_eq(updates, 4);
  cr_assert_eq(buckets, 4 * 8);
  cr_assert_eq(tp_comm, 4 * 8 * 2, "tp %d", tp_comm);
  cr_assert_eq(counters, tasks);
  cr_assert_eq(dots, 4 * 8 * (9 + 18), "dots %d", dots);
  cr_assert_gt(ops, dots);
  for (int s = 0; s < 4; s++) cr_assert_leq(op_end[s], span_end[s] + 1e-3, "stage %d", s);
  cJSON_Delete(o);
  model_free(m);
  hw_catalog_free(c);
}

/* A model of several layer kinds is traced layer by layer with each
** layer's own kernels: DeepSeek-V2-Lite's layer 0 is dense (first_k_dense_replace
** 1), layers 1-26 MoE, so only those route (a top-k) and wait for an expert
** all-to-all; an uneven split (--pp-layers 13,14) puts layers 13-26 on
** stage 1. A trace that drew every layer as layer 0 has no top-k at all. */
Test(step, trace_draws_each_layer_kind_and_stage_split) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("tests/data/hf/deepseek-v2-lite.json", 4096);
  plan p = base(8, 1, 2, 8, 4096);
  p.ep = 4;
  int32_t split[2] = {13, 14};
  p.pp_layers = split, p.n_pp_layers = 2;
  cJSON *o = traced(m, h, p);
  int topk[27] = {0}, a2a[27] = {0}, stage[27];
  for (int l = 0; l < 27; l++) stage[l] = -1;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "traceEvents")) {
    if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0) continue;
    int tid = cJSON_GetObjectItem(e, "tid")->valueint, pid = cJSON_GetObjectItem(e, "pid")->valueint;
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    int l;
    if ((tid != 2 && tid != 3) || sscanf(name, "l%d", &l) != 1) continue;
    cr_assert(l >= 0 && l < 27, "%s", name);
    if (tid == 3) {
      cr_assert(stage[l] < 0 || stage[l] == pid, "%s on stages %d and %d", name, stage[l], pid);
      stage[l] = pid;
      topk[l] += strstr(name, "/top-k") != NULL;
    } else {
      a2a[l] += strstr(name, "expert all-to-all") != NULL;
    }
  }
  for (int l = 0; l < 27; l++) {
    cr_assert_eq(stage[l], l < 13 ? 0 : 1, "layer %d on stage %d", l, stage[l]);
    cr_assert_eq(topk[l] > 0, l > 0, "layer %d: %d top-k", l, topk[l]);
    cr_assert_eq(a2a[l] > 0, l > 0, "layer %d: %d all-to-alls", l, a2a[l]);
  }
  cJSON_Delete(o);
  model_free(m);
  hw_catalog_free(c);
}

/* Megatron-Core's combined 1F1B pairs a forward with another micro-batch's
** backward; what has no partner exposes its overlapped all-to-alls. By
** hand from pipeline_parallel/combined_1f1b.py and schedules.py: no
** pipeline, 4 micro-batches: the first forward and the last backward, 1 of
** 4; pp 4 x V 2 with 8 micro-batches: rank 0's warm-up (4 - 1) x 2 + (2 - 1)
** x 4 + 1 = 11 of its 16 chunk passes; 2 micro-batches there: all. */
Test(step, ep_overlap_unpaired_passes) {
  plan p = base(16, 1, 1, 64, 2048);
  p.dp = 16, p.mbs = 1;
  cr_assert_float_eq(step_ep_unpaired(&p), 0.25, 1e-15);
  plan q = base(64, 1, 4, 128, 2048);
  q.dp = 16, q.mbs = 1, q.vp = 2, q.schedule = PLAN_INTERLEAVED;
  cr_assert_float_eq(step_ep_unpaired(&q), 11.0 / 16, 1e-15);
  q.gbs = 32;
  cr_assert_float_eq(step_ep_unpaired(&q), 1, 1e-15);
}

/* Expert-parallel ranks take different data: 64 H100s as tp 8 x ep 8 run
** gbs / (dp x ep) micro-batches each, and add the all-to-all exchanges. */
Test(step, expert_parallel_plans) {
  step_result a, b;
  char err[512];
  plan p = base(64, 8, 1, 256, 2048);
  p.ep = 8;
  cr_assert_eq(simulate("mixtral-8x7b", "h100-sxm", p, &a, err, sizeof err), 0, "%s", err);
  cr_assert_eq(a.microbatches, 256 / 8);
  plan q = base(64, 8, 1, 256, 2048);
  cr_assert_eq(simulate("mixtral-8x7b", "h100-sxm", q, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(b.microbatches, 256 / 8);
  cr_assert_gt(a.tp_comm_fwd_s, b.tp_comm_fwd_s); /* the all-to-alls */
}

/* Tensor-parallel groups on a TPU are groups inside the slice, not slices:
** 4 chips of a v5p slice (2x2) carry tp 4. */
Test(step, tpu_groups_inside_a_slice) {
  step_result r;
  char err[512];
  plan p = base(64, 4, 1, 256, 2048);
  cr_assert_eq(simulate("llama3-8b", "tpu-v5p", p, &r, err, sizeof err), 0, "%s", err);
  cr_assert_gt(r.tp_comm_fwd_s, 0);
  cr_assert(r.fits);
}

/* Gradient reduction after the whole backward (Megatron-LM's local DDP)
** leaves all of it exposed: the step grows by exactly the all-reduce time
** that bucketed overlap hid, less what hiding it cost the compute under it
** (the SMs its kernel held), and the exposed part equals the all-reduce. */
Test(step, gradient_sync_after_backward_is_exposed) {
  step_result a, b;
  char err[512];
  plan p = base(64, 1, 1, 256, 2048); /* dp 64 over 8 nodes of h100-sxm */
  p.zero = 1;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &a, err, sizeof err), 0, "%s", err);
  p.grad_sync = PLAN_GRAD_AFTER_BACKWARD;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &b, err, sizeof err), 0, "%s", err);
  cr_assert_gt(a.dp_allreduce_s, 0);
  cr_assert_float_eq(b.dp_allreduce_s, a.dp_allreduce_s, 1e-12);
  /* 32 GB of fp32 gradients (the plain profile, PyTorch DDP under autocast,
  ** keeps and reduces fp32 .grad; Megatron-LM's local DDP too for bf16:
  ** accumulate_allreduce_grads_in_fp32), hierarchical: reduce-scatter and
  ** all-gather inside each node (NVLink 450 GB/s x 0.803), then an
  ** all-reduce of an eighth across the 8 nodes (50 GB/s per chip) */
  double S = 8030261248.0 * 4;
  double want = 2 * 7.0 / 8 * S / (450e9 * 0.803) + 2 * 7.0 / 8 * (S / 8) / 50e9;
  cr_assert(fabs(b.dp_allreduce_s / want - 1) < 0.02, "%g vs %g", b.dp_allreduce_s, want);
  double exposed_a = a.breakdown_s.exposed_comm, exposed_b = b.breakdown_s.exposed_comm;
  cr_assert(fabs(exposed_b - b.dp_allreduce_s) < 1e-6 * b.step_time_s, "exposed %g vs %g", exposed_b,
            b.dp_allreduce_s);
  cr_assert_lt(exposed_a, exposed_b);
  cr_assert_lt(b.coll_sm_s, a.coll_sm_s); /* b's is the parameter gather's alone */
  cr_assert(fabs((b.step_time_s - a.step_time_s) -
                 (exposed_b - exposed_a - (a.coll_sm_s - b.coll_sm_s))) < 1e-6 * b.step_time_s);
}

/* Gradient accumulation: every micro-batch after the first adds its weight
** gradients into the step's buffer, 3 x 2 B per trainable parameter at the
** sustained HBM bandwidth. A llama3-8b layer holds 4096 x (4096 + 1024 +
** 1024 + 4096) attention weights, 3 x 4096 x 14336 MLP weights and two
** 4096-wide norms: 218,112,000 parameters; at tp 2 each chip holds half of
** the matrices and all of the norms. */
Test(step, gradient_accumulation_pass_per_microbatch) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("llama3-8b", 2048);
  plan p = base(2, 2, 1, 16, 2048);
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_costs(m, h, &p, &r, err, sizeof err), 0, "%s", err);
  double per_chip = (218112000.0 - 2 * 4096) / 2 + 2 * 4096;
  double bw = h->chip.hbm_bw_bytes_per_s * h->chip.hbm_efficiency;
  cr_assert_float_eq(r.grad_accum_layer_s, per_chip * 6 / bw, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* ZeRO-3 gathers the stage's weights for every micro-batch's forward and
** backward, a layer ahead of compute: an all-gather is the second half of
** the all-reduce's algorithm, so it takes half the gradient all-reduce
** (ZeRO-1's, without the parameter gather overlapped). Its gradients are
** reduce-scattered instead (FSDP): no more than the all-reduce. A
** pass's layers then last max(compute, gather) plus the first layer's gather, so
** with two micro-batches the chip's busy time grows by exactly
** 2 x [(max(F, g) + g/L - F) + (max(B, g) + g/L - B)] over ZeRO-1's. */
Test(step, zero3_gathers_every_microbatch) {
  step_result a, b;
  char err[512];
  plan p = base(16, 1, 1, 32, 512); /* a100-80g: 2 nodes, dp 16, 2 micro-batches of 1 */
  p.zero = 1;
  cr_assert_eq(simulate("llama3-8b", "a100-80g", p, &a, err, sizeof err), 0, "%s", err);
  p.zero = 3;
  cr_assert_eq(simulate("llama3-8b", "a100-80g", p, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(a.zero3_gather_s, 0);
  cr_assert_float_eq(b.zero3_gather_s, a.dp_allreduce_s / 2, 1e-12);
  cr_assert_leq(b.dp_allreduce_s, a.dp_allreduce_s);
  /* the layers' compute (the embedding and head come after the gather) */
  double F = 32 * (b.layer_fwd_s + b.tp_comm_fwd_s);
  double B = 32 * (b.layer_bwd_s + b.tp_comm_bwd_s + 0.5 * b.grad_accum_layer_s);
  double g = b.zero3_gather_s;
  /* the compute under a gather runs on the SMs NCCL leaves: 16 of a100-80g's
  ** 108 held across nodes */
  double s = 16.0 / 108;
  cr_assert_float_eq(b.coll_share, s, 1e-12);
  double F1 = F + (F < g ? F : g) * s, B1 = B + (B < g ? B : g) * s;
  double grow = 2 * ((g > F1 ? g : F1) + g / 32 - F + (g > B1 ? g : B1) + g / 32 - B);
  /* less the reduction's and the last gather's share, which is the step's */
  double got = (b.breakdown_s.compute - b.coll_sm_s) - (a.breakdown_s.compute - a.coll_sm_s);
  cr_assert(fabs(got - grow) < 1e-9 + 1e-6 * grow, "busy time grew %g, want %g", got, grow);
  cr_assert_gt(b.step_time_s, a.step_time_s);
}

/* How far a fix moves the plan: 0 same chips and layout, 1 the same chips
** re-partitioned (tp, pp, cp), 2 more chips (sim/fixes.c's order). */
static int reach(const plan *f, const plan *p) {
  if (f->chips != p->chips) return 2;
  return f->tp != p->tp || f->pp != p->pp || f->cp != p->cp;
}

/* A plan that does not fit gets its fixes priced: each fix's plan is
** simulated, the ones that fit alone come first, those on the same chips
** and layout before re-partitionings before more chips, cheapest (chips x
** step time) first within each, and each fix's step time is that plan's
** own simulation.
** gpt3-175b on 64 A100s (tp 8, pp 8) without recompute or sequence
** parallelism, its attention scores in HBM, misses by under a GiB. */
Test(step, fixes_are_priced_and_ordered_by_cost) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "a100-80g");
  model *m = load_model("gpt3-175b", 2048);
  plan p = base(64, 8, 8, 64, 2048);
  p.attention = PLAN_ATTN_SCORES;
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  static step_result r;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &r, NULL, err, sizeof err), 0, "%s", err);
  cr_assert(!r.fits);
  cr_assert_eq(step_price_fixes(m, h, &p, NULL, &r, err, sizeof err), 0, "%s", err);
  cr_assert_geq(r.n_fixes, 3);
  for (int i = 0; i < r.n_fixes; i++) {
    const mem_fix *f = &r.fixes[i];
    if (i > 0 && f->fits && r.fixes[i - 1].fits)
      cr_assert_leq(reach(&r.fixes[i - 1].p, &p), reach(&f->p, &p), "fix %d moves less than %d", i, i - 1);
    if (i > 0 && f->fits && r.fixes[i - 1].fits && reach(&r.fixes[i - 1].p, &p) == reach(&f->p, &p))
      cr_assert_leq(r.fixes[i - 1].step_time_s * (double)r.fixes[i - 1].p.chips,
                    f->step_time_s * (double)f->p.chips, "fix %d out of order", i);
    if (i > 0) cr_assert(!f->fits || r.fixes[i - 1].fits, "a fix that fits after one that does not");
  }
  /* the first fix's time is its plan's own simulation */
  plan q = r.fixes[0].p;
  static step_result s;
  cr_assert_eq(plan_check(m, h, &q, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, h, &q, NULL, &s, NULL, err, sizeof err), 0, "%s", err);
  cr_assert(s.fits);
  cr_assert_float_eq(s.step_time_s, r.fixes[0].step_time_s, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* --full puts every chip on one network and runs every data-parallel ring
** at once. On GPU nodes with a NIC per GPU (rails) the rings never share a
** link, so the symmetric simulation's answer stands exactly; on a 4x4 TPU
** v5e slice with tp 2 in Megatron's rank order the two rings (even and
** odd chips) hop over the same x links, so each takes twice as long
** (bar the per-hop latency). */
Test(step, full_machine_shows_ring_contention) {
  step_result a, b;
  char err[512];
  plan p = base(256, 4, 2, 256, 2048);
  cr_assert_eq(simulate("llama3-8b", "a100-80g", p, &a, err, sizeof err), 0, "%s", err);
  p.full = true;
  cr_assert_eq(simulate("llama3-8b", "a100-80g", p, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(b.full_chips, 256);
  cr_assert_eq(b.full_groups, 8);
  cr_assert_float_eq(b.full_contention, 1.0, 1e-9);
  cr_assert_eq(a.step_time_s, b.step_time_s);
  plan q = base(16, 2, 1, 32, 1024);
  cr_assert_eq(simulate("llama3-8b", "tpu-v5e", q, &a, err, sizeof err), 0, "%s", err);
  q.full = true;
  cr_assert_eq(simulate("llama3-8b", "tpu-v5e", q, &b, err, sizeof err), 0, "%s", err);
  cr_assert(fabs(b.full_contention - 2.0) < 1e-3, "contention %g", b.full_contention); /* the latency does not double */
  cr_assert_float_eq(b.dp_allreduce_s, b.full_contention * a.dp_allreduce_s, 1e-12);
  cr_assert_gt(b.step_time_s, a.step_time_s);
}

/* An imported HLO module is one device's program: simulate runs it on the
** devices it was compiled for, its collectives timed by the network model.
** One all-reduce of 4 MiB over 8 partitions on h100-sxm takes exactly what
** the collective model gives for 8 chips of one node; the module's entry
** parameter is resident state; 16 chips is refused, naming 8. */
Test(step, hlo_module_runs_on_its_devices) {
  const char *src = "HloModule ar8, num_partitions=8\n\n"
                    "%sum (a: f32[], b: f32[]) -> f32[] {\n"
                    "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                    "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
                    "ENTRY %main (y: f32[1048576]) -> f32[1048576] {\n"
                    "  %y = f32[1048576]{0} parameter(0)\n"
                    "  ROOT %ar = f32[1048576]{0} all-reduce(%y), channel_id=1, "
                    "replica_groups=[1,8]<=[8], to_apply=%sum\n}\n";
  th_write_temp("ar8.hlo", src);
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("tests/out/ar8.hlo", 0);
  cr_assert_eq(m->info.devices, 8);
  char err[512];
  plan p = base(16, 1, 1, 0, 0);
  cr_assert_neq(plan_check(m, h, &p, err, sizeof err), 0);
  cr_assert(strstr(err, "compiled for 8 devices"), "%s", err);
  p = base(8, 1, 1, 0, 0);
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &r, NULL, err, sizeof err), 0, "%s", err);
  net *n = net_build(h, 8, 1, err, sizeof err);
  cr_assert_not_null(n, "%s", err);
  coll_req q = {.op = COLL_ALL_REDUCE, .algo = COLL_AUTO, .bytes = 4194304, .axis = -1};
  coll_result cr;
  cr_assert_eq(coll_run(n, &q, &cr, err, sizeof err), 0, "%s", err);
  net_free(n);
  cr_assert_float_eq(r.breakdown_s.exposed_comm, cr.time_s, 1e-12);
  cr_assert(fabs(r.step_time_s - cr.time_s) < 1e-6, "step %g vs all-reduce %g", r.step_time_s, cr.time_s);
  cr_assert_float_eq(r.memory.weights, 4194304, 1e-9);
  model_free(m);
  hw_catalog_free(c);
}

/* FlashAttention (the default) keeps the s x s scores on chip: at a long
** sequence the step is shorter and each layer's activations lose the
** scores (Korthikanti's 5as/(ht) term; llama has no dropout, so only the
** 16-bit softmax output, 2as/(ht)), keeping an fp32 log-sum-exp per head
** and row instead. With 32 heads over tp 8 (a = 4 a chip), s = 8192, one
** sequence: 8192 x (4 x 8192 x 2 - 4 x 4) = 536,739,840 bytes a layer.
** The backward's attention GEMMs cost 1.25x (the scores recomputed), so
** the backward saves less than the forward. */
Test(step, flash_attention_keeps_scores_on_chip) {
  step_result f, s;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &f, err, sizeof err), 0, "%s", err);
  p.attention = PLAN_ATTN_SCORES;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &s, err, sizeof err), 0, "%s", err);
  cr_assert_lt(f.step_time_s, s.step_time_s);
  cr_assert_lt(f.layer_fwd_s, s.layer_fwd_s);
  cr_assert_lt(s.layer_fwd_s - f.layer_fwd_s, s.attn_core_fwd_s);
  cr_assert_float_eq(s.memory.act_layer - f.memory.act_layer, 8192.0 * (4 * 8192 * 2 - 16), 1);
}

/* A measured fused-attention rate already holds the kernel's tiling, so
** the core's two forward dots cost their FLOPs at that rate and nothing
** more (the tile model's padding of a 128-wide head to a 256-wide tile is
** not charged again). By hand, llama3-8b at tp 8 (4 of 32 heads a chip,
** head dim 128), one 8,192-token sequence: QK^T and PV are each
** 2 x 8192^2 x 4 x 128 FLOPs, of which the causal half is charged (the
** measured rates count FLOPs so; the diagonal blocks' waste is in them). On
** h100-sxm: FlashAttention-3's 0.623 of 989 TFLOP/s at 16k keys, times its
** rate at 8,192 keys over 16k, 0.987 (the FA3 paper's panels), and one
** 3 us launch per dot. On TPU7x the tokamax measurement (0.266 forward at
** 16k, 0.857 of it at 8k) with the same head dim, taken at the top clock
** state and run at the default one (chip.sustained_clock_ratio 0.861). */
Test(step, measured_attention_costs_its_flops_at_the_measured_rate) {
  step_result r;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  double flops = 2 * (2.0 * 8192 * 8192 * 4 * 128) * 0.5;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &r, err, sizeof err), 0, "%s", err);
  double want = flops / (989e12 * 0.623 * 0.987) + 2 * 3e-6;
  cr_assert_float_eq(r.attn_core_fwd_s, want, want * 2e-3, "%g vs %g", r.attn_core_fwd_s, want);
  cr_assert_eq(simulate("llama3-8b", "tpu-v7x", p, &r, err, sizeof err), 0, "%s", err);
  hw_catalog *c = th_catalog();
  const hw_model *v7 = th_hw(c, "tpu-v7x");
  double peak = hw_peak_16bit(v7), ov = v7->chip.op_overhead_s;
  hw_catalog_free(c);
  want = flops / (peak * 0.266 * 0.857 * 0.861) + 2 * ov;
  cr_assert_float_eq(r.attn_core_fwd_s, want, want * 2e-3, "%g vs %g", r.attn_core_fwd_s, want);
}

/* Llama 3 8B's example file with `field` (a key and its value) added,
** written to tests/out/name; the path */
static const char *llama8b_with(const char *field, const char *name) {
  char *src = th_slurp("workloads/examples/llama3-8b.json", NULL), with[128];
  snprintf(with, sizeof with, "%s, \"layers\": 32", field);
  char *text = th_replace(src, "\"layers\": 32", with);
  const char *path = th_write_temp(name, text);
  free(text);
  free(src);
  return path;
}

/* A decoder whose flash kernel is called with causal=False (MaxText of
** October 2023, layers.py apply_attention at e47fa1b5d) scores every key:
** the same Llama 3 8B core as above (tp 8, 8,192 tokens) costs its whole
** 2 x 2 x 8192^2 x 4 x 128 FLOPs at the measured rate, twice the causal
** half, with the same two 3 us launches. */
Test(step, non_causal_decoder_scores_every_key) {
  const char *path = llama8b_with("\"is_causal\": false", "llama3-8b-noncausal.json");
  step_result r;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  cr_assert_eq(simulate(path, "h100-sxm", p, &r, err, sizeof err), 0, "%s", err);
  double flops = 2 * (2.0 * 8192 * 8192 * 4 * 128);
  double want = flops / (989e12 * 0.623 * 0.987) + 2 * 3e-6;
  cr_assert_float_eq(r.attn_core_fwd_s, want, want * 2e-3, "%g vs %g", r.attn_core_fwd_s, want);
}

/* HFU counts the attention core as its kernel runs it; MFU counts it as
** the model FLOPs conventions do, unmasked (Narayanan et al. 2021's
** formula, PaLM's appendix B). By hand for llama3-8b (32 layers, 32 heads
** of 128) at 8 sequences of 8,192 tokens: the core's forward dots, QK^T
** and PV, are F = 8 x 32 x 2 x 2 x 8192^2 x 4096 FLOPs a step unmasked, its
** backward's four 2F. A measured kernel (h100-sxm) does the causal half of
** each and recomputes QK^T in its backward (5 dots for 4): 0.5 F + 1.25 x
** 0.5 x 2F, the model's count less 1.25 F. Full recomputation runs the
** forward again, its core at 0.5 F: against the same model unmasked
** (is_causal false: the whole core, and the fifth dot, 0.5 F more than
** the model's) the recomputation adds 0.5 F less, but for the causal
** forward's mask, one select a score: 8 x 32 heads x 8192^2 x 32 layers. */
Test(step, hfu_counts_the_attention_kernels_arithmetic) {
  const char *open = llama8b_with("\"is_causal\": false", "llama3-8b-hfu.json");
  step_result c, cf, n, nf;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  double F = 8 * 32 * 2 * 2.0 * 8192 * 8192 * 4096;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &c, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate(open, "h100-sxm", p, &n, err, sizeof err), 0, "%s", err);
  p.recompute = PLAN_RECOMPUTE_FULL;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &cf, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate(open, "h100-sxm", p, &nf, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(c.model_flops_per_step - c.hardware_flops_per_step, 1.25 * F, F * 1e-9);
  cr_assert_float_eq(n.hardware_flops_per_step - n.model_flops_per_step, 0.5 * F, F * 1e-9);
  double rec_c = cf.hardware_flops_per_step - c.hardware_flops_per_step;
  double rec_n = nf.hardware_flops_per_step - n.hardware_flops_per_step;
  double mask = 8 * 32 * 8192.0 * 8192 * 32;
  cr_assert_float_eq(rec_n - rec_c, 0.5 * F - mask, F * 1e-9, "%g vs %g", rec_n - rec_c, 0.5 * F - mask);
  cr_assert_lt(c.hfu, c.mfu);
}

/* Megatron-Core's alltoall dispatcher sends a copy of a token per chosen
** expert, sorts the arrivals by local expert and unsorts them before the
** combine (sort_chunks_by_idxs); the flex one (DeepEP, HybridEP) permutes
** once on arrival, which the graph's gather already is. By hand for
** Qwen3-30B-A3B (top-8, hidden 2048) at one 4,096-token micro-batch, ep 8:
** each pass reads and writes 4,096 x 8 x 2,048 16-bit values, two passes,
** 536,870,912 B a layer forward and again backward, at b200's copy rate
** (HBM x hbm_efficiency) plus a launch each. Inside one 8-GPU node flex
** sends a token once per rank among its experts' (DeepEP's
** is_token_in_rank), 8 x (1 - C(112,8) / C(128,8)) = 5.339 of alltoall's 8
** copies with 16 experts a rank: the same exchange at 0.667 of its bytes
** (a little over that of its time: the latency stays);
** across two nodes (ep 16) once per node its experts are on, fewer still. */
Test(step, alltoall_dispatcher_sorts_by_expert) {
  const char *q = "tests/data/hf/qwen3-30b-a3b.json";
  step_result flex, a2a;
  char err[512];
  plan p = base(8, 1, 1, 8, 4096);
  p.ep = 8;
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(simulate(q, "b200", p, &flex, err, sizeof err), 0, "%s", err);
  p.moe_dispatcher = PLAN_DISPATCH_ALLTOALL;
  cr_assert_eq(simulate(q, "b200", p, &a2a, err, sizeof err), 0, "%s", err);
  hw_catalog *c = th_catalog();
  const hw_model *b = th_hw(c, "b200");
  double want = 536870912.0 / (b->chip.hbm_bw_bytes_per_s * b->chip.hbm_efficiency) + 2 * b->chip.op_overhead_s;
  hw_catalog_free(c);
  cr_assert_float_eq(a2a.layer_fwd_s - flex.layer_fwd_s, want, want * 1e-6, "%g vs %g",
                     a2a.layer_fwd_s - flex.layer_fwd_s, want);
  cr_assert_float_eq(a2a.layer_bwd_s - flex.layer_bwd_s, want, want * 1e-6);
  double ratio = flex.ep_a2a_fwd_s / a2a.ep_a2a_fwd_s;
  cr_assert(ratio > 0.6674196 * 0.97 && ratio <= 0.6674196 * 1.01, "flex / alltoall in a node = %.4f", ratio);
  p = base(16, 1, 1, 16, 4096);
  p.ep = 16;
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(simulate(q, "b200", p, &flex, err, sizeof err), 0, "%s", err);
  p.moe_dispatcher = PLAN_DISPATCH_ALLTOALL;
  cr_assert_eq(simulate(q, "b200", p, &a2a, err, sizeof err), 0, "%s", err);
  cr_assert_gt(a2a.ep_a2a_fwd_s, flex.ep_a2a_fwd_s * 1.1, "%g vs %g", a2a.ep_a2a_fwd_s, flex.ep_a2a_fwd_s);
}

/* A parallel block (PaLM sec. 2: x + attn(ln x) + mlp(ln x)) reads one
** gathered input and reduces the two branches' sum once: one tensor-parallel
** collective pair a layer each way where a serial block has two (after the
** attention and after the MLP). Llama 3 8B at tp 8 on h100-sxm, both
** ways, sequence parallel or not. */
Test(step, parallel_block_reduces_once_a_layer) {
  const char *path = llama8b_with("\"parallel_block\": true", "llama3-8b-parallel.json");
  for (int sp = 0; sp < 2; sp++) {
    step_result serial, par;
    char err[512];
    plan p = base(8, 8, 1, 8, 8192);
    p.sp = sp;
    cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &serial, err, sizeof err), 0, "%s", err);
    cr_assert_eq(simulate(path, "h100-sxm", p, &par, err, sizeof err), 0, "%s", err);
    cr_assert_gt(serial.tp_comm_fwd_s, 0);
    cr_assert_float_eq(par.tp_comm_fwd_s, serial.tp_comm_fwd_s / 2, serial.tp_comm_fwd_s * 1e-9,
                       "sp %d: %g vs %g / 2", sp, par.tp_comm_fwd_s, serial.tp_comm_fwd_s);
    cr_assert_float_eq(par.tp_comm_bwd_s, serial.tp_comm_bwd_s / 2, serial.tp_comm_bwd_s * 1e-9);
  }
}

/* Llama 3 8B's attention core forward under profile fw and kernel choice
** ak, and what it should take at a kernel rate of eff. */
static double core_fwd_s(const char *fw, plan_attn_kernel ak) {
  step_result r;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  framework_apply(framework_find(fw), &p);
  p.attn_kernel = ak;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &r, err, sizeof err), 0, "%s", err);
  return r.attn_core_fwd_s;
}

static double core_want_s(double eff) {
  double flops = 2 * (2.0 * 8192 * 8192 * 4 * 128) * 0.5;
  return flops / (989e12 * eff * 0.987) + 2 * 3e-6;
}

/* The attention kernel a framework calls: the same Llama 3 8B core (tp 8,
** 8,192 tokens, its causal half at the measured rate and the 8k length
** factor 0.987, each dot's 3 us launch) on h100-sxm at FlashAttention-3's
** 0.623 (a plain loop: the chip's own), cuDNN's 539 of 989 TFLOP/s on the
** same panel of the FlashAttention-3 paper (megatron-core: Transformer
** Engine runs cuDNN first on Hopper), FlashAttention-2's 0.332 (torchtitan;
** megatron-core-24.07, whose launcher turns cuDNN attention off) and the
** FlashAttention-1 generation's 0.1385 (llm-foundry's 2023 Triton kernel):
** FA2 README H100 panel (d), 137 of 989 TFLOP/s. */
Test(step, the_framework_picks_the_attention_kernel_generation) {
  static const struct {
    const char *fw;
    double eff;
  } k[] = {{"plain", 0.623},
           {"megatron-core", 539.0 / 989},
           {"megatron-core-26.08", 539.0 / 989},
           {"torchtitan", 0.332},
           {"megatron-core-24.07", 0.332},
           {"llm-foundry", 0.1385}};
  for (int i = 0; i < (int)(sizeof k / sizeof *k); i++) {
    double got = core_fwd_s(k[i].fw, PLAN_AK_FRAMEWORK), want = core_want_s(k[i].eff);
    cr_assert_float_eq(got, want, want * 2e-3, "%s: %g vs %g", k[i].fw, got, want);
  }
}

/* --attention-kernel names the kernel over the profile's: the same core as
** above at cuDNN's 539 of 989 under torchtitan (whose own is FlashAttention-2),
** at FlashAttention-2's 0.332 under megatron-core (whose own is cuDNN's), at
** the chip's own FlashAttention-3 figure 0.623 for "best"; a chip without a
** measured rate for the named kernel is refused by plan_check, naming the
** figure (b200 has no FlashAttention-2 entry). */
Test(step, attention_kernel_flag_overrides_the_profile) {
  static const struct {
    const char *fw;
    plan_attn_kernel ak;
    double eff;
  } k[] = {{"torchtitan", PLAN_AK_CUDNN, 539.0 / 989},
           {"megatron-core", PLAN_AK_FA2, 0.332},
           {"megatron-core", PLAN_AK_BEST, 0.623}};
  for (int i = 0; i < (int)(sizeof k / sizeof *k); i++) {
    double got = core_fwd_s(k[i].fw, k[i].ak), want = core_want_s(k[i].eff);
    cr_assert_float_eq(got, want, want * 2e-3, "%s/%d: %g vs %g", k[i].fw, k[i].ak, got, want);
  }
  step_result r;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  framework_apply(framework_find("megatron-core"), &p);
  p.attn_kernel = PLAN_AK_FA2;
  cr_assert_neq(simulate("llama3-8b", "b200", p, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "b200 holds no measured rate for it (chip.attention_fa2_efficiency)"), "%s", err);
}

/* cuDNN's own rates by sequence length where the chip holds them apart
** (chip.attention_cudnn_seq): on b200, cuDNN 9.13.1 measured on the chip
** (cudnn-frontend's B200 SDPA table) runs a causal head-dim-128 core at
** 1332.4 of 2250 TFLOP/s at 16k and at the mean of its forward and backward
** ratios at 4k, (855.7 / 1332.4 + 701.3 / 1074.8) / 2 = 0.647, where the
** chip's attention_seq table (cuDNN 9.22's shape on GB200) has 0.844; both
** at the 1,000 W sustained clock, 0.853. Llama 3 8B at tp 8 and 4,096
** tokens: 2 dots of 2 x 4096^2 x 4 x 128 FLOPs, the causal half, each with
** its 3 us launch. megatron-core calls cuDNN and reads its table;
** --attention-kernel best keeps the chip's FlashAttention-4 figure (0.630)
** and its table. */
Test(step, cudnn_reads_its_own_sequence_table_on_b200) {
  static const struct {
    plan_attn_kernel ak;
    double eff, seq;
  } k[] = {{PLAN_AK_FRAMEWORK, 1332.4 / 2250, (855.678 / 1332.415 + 701.265 / 1074.776) / 2},
           {PLAN_AK_BEST, 0.630, 0.844}};
  for (int i = 0; i < 2; i++) {
    step_result r;
    char err[512];
    plan p = base(8, 8, 1, 8, 4096);
    framework_apply(framework_find("megatron-core"), &p);
    p.attn_kernel = k[i].ak;
    cr_assert_eq(simulate("llama3-8b", "b200", p, &r, err, sizeof err), 0, "%s", err);
    double flops = 2 * (2.0 * 4096 * 4096 * 4 * 128) * 0.5;
    double want = flops / (2250e12 * k[i].eff * k[i].seq * 0.853) + 2 * 3e-6;
    cr_assert_float_eq(r.attn_core_fwd_s, want, want * 3e-3, "kernel %d: %g vs %g", k[i].ak,
                       r.attn_core_fwd_s, want);
  }
}

/* NeMo's launcher of 2024 (megatron-core-24.07) trains fp8 without
** fp8_params: the 16-bit linear weights stay beside their fp8 copies, where
** Megatron-Bridge's recipes (megatron-core) hold the fp8 copies alone. The
** difference is the 16-bit form of llama3-8b's linear weights, by hand: 32
** layers x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 6,979,321,856
** weights x 2 B; nothing else moves. */
Test(step, nemo_2024_keeps_the_16_bit_weights_under_fp8) {
  step_result mc, nemo;
  char err[512];
  plan p = base(8, 1, 1, 8, 4096);
  p.gemm = PLAN_GEMM_FP8; /* the recipe; a profile sets the rest (ZeRO-1 in both) */
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &mc, err, sizeof err), 0, "%s", err);
  framework_apply(framework_find("megatron-core-24.07"), &p);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &nemo, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(nemo.memory.weights - mc.memory.weights, 6979321856.0 * 2, 1e-3);
  cr_assert_float_eq(nemo.memory.optimizer, mc.memory.optimizer, 0);
  cr_assert_float_eq(nemo.memory.gradients, mc.memory.gradients, 0);
}

/* Local attention of W keys: a sliding window shows every query the W keys
** before it, Llama 4's chunks show a query its own chunk up to itself (half
** of it on average). Mistral 7B (every layer local, W = 4,096) at 8,192
** tokens on h100-sxm, whose measured rate counts a causal core at half its
** FLOPs: the chunked core is the two 4,096-token blocks' causal halves,
** the sliding band is both blocks whole less the first block's missing
** upper triangle, (8192 - 2048) / 8192 of them -- 1.5x the chunked core,
** each dot's 3 us launch apart. */
Test(step, sliding_window_band_is_one_and_a_half_chunks) {
  static const char *const local[] = {"sliding_window", "attention_chunk_size"};
  const char *path[2] = {"tests/out/local-sliding.json", "tests/out/local-chunked.json"};
  for (int k = 0; k < 2; k++) {
    FILE *f = fopen(path[k], "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"name\": \"mistral-like\", \"family\": \"transformer\", \"layers\": 32, "
            "\"hidden\": 4096, \"heads\": 32, \"kv_heads\": 8, \"ffn_hidden\": 14336, "
            "\"ffn\": \"swiglu\", \"norm\": \"rmsnorm\", \"positions\": \"rotary\", "
            "\"vocab\": 32000, \"seq_len\": 8192, \"%s\": 4096}\n",
            local[k]);
    fclose(f);
  }
  step_result sl, ch;
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  cr_assert_eq(simulate(path[0], "h100-sxm", p, &sl, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate(path[1], "h100-sxm", p, &ch, err, sizeof err), 0, "%s", err);
  double ov = 2 * 3e-6;
  cr_assert_float_eq((sl.attn_core_fwd_s - ov) / (ch.attn_core_fwd_s - ov), 1.5, 1e-9, "%g vs %g",
                     sl.attn_core_fwd_s, ch.attn_core_fwd_s);
  cr_assert_lt(ch.step_time_s, sl.step_time_s);
}

/* A measured head-dim table replaces the array-padding rule: on tpu-v7x
** tokamax measured head dim 256 at 1.733x the rate of 128 (where padding
** the 256-wide MXU alone says 2x). Models alike but for head_dim: at 256
** the core's FLOPs double, so its time is 2 / 1.733 of the 128 one's (each
** dot's launch apart); at 192 they grow 1.5x at 1 + 0.733 log2(1.5) the
** rate (log2-linear between the points, unpadded: tokamax's MLA point,
** 192-wide queries and keys, runs on v5p at 1.06x a 128 head's rate). */
Test(step, measured_head_dim_rate_replaces_mxu_padding) {
  const int hd[3] = {128, 256, 192};
  char path[3][64];
  for (int k = 0; k < 3; k++) {
    snprintf(path[k], sizeof path[k], "tests/out/head-dim-%d.json", hd[k]);
    FILE *f = fopen(path[k], "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"name\": \"hd\", \"family\": \"transformer\", \"layers\": 4, \"hidden\": 2048, "
            "\"heads\": 16, \"kv_heads\": 8, \"head_dim\": %d, \"ffn_hidden\": 8192, "
            "\"ffn\": \"swiglu\", \"norm\": \"rmsnorm\", \"positions\": \"rotary\", "
            "\"vocab\": 32000, \"seq_len\": 8192}\n",
            hd[k]);
    fclose(f);
  }
  step_result r[3];
  char err[512];
  plan p = base(8, 8, 1, 8, 8192);
  for (int k = 0; k < 3; k++)
    cr_assert_eq(simulate(path[k], "tpu-v7x", p, &r[k], err, sizeof err), 0, "%s", err);
  hw_catalog *c = th_catalog();
  const hw_model *v7 = th_hw(c, "tpu-v7x");
  double ov = 2 * v7->chip.op_overhead_s, f256 = hw_attention_head_factor(v7, 256);
  hw_catalog_free(c);
  cr_assert_float_eq(f256, 1.733, 1e-9);
  cr_assert_float_eq((r[1].attn_core_fwd_s - ov) / (r[0].attn_core_fwd_s - ov), 2 / f256, 1e-6,
                     "%g vs %g", r[1].attn_core_fwd_s, r[0].attn_core_fwd_s);
  cr_assert_float_eq((r[2].attn_core_fwd_s - ov) / (r[0].attn_core_fwd_s - ov),
                     1.5 / (1 + 0.733 * log2(1.5)), 1e-6, "%g vs %g", r[2].attn_core_fwd_s,
                     r[0].attn_core_fwd_s);
}

/* The distributed optimizer's parameter all-gather (Megatron-Core
** --overlap-param-gather): bucket by bucket from the next step's forward
** pre-hooks, so chip 0's first forward waits for the first bucket and for
** whatever of the gather outlasts it. Llama 3 8B on 64 H100 (8 nodes), dp 64,
** 1024-token sequences (a short forward),
** ZeRO-1, megatron-core (bf16 gradient buffers: the all-gather of bf16
** weights moves the same bytes as the gradients' reduce-scatter, so it takes
** the same time, dp_allreduce_s). tp = pp = 1: the first forward F = 32
** layers x layer_fwd_s + the embedding/head's forward (the one stage holds
** both ends), and the wait is max(0, ag - F) + ag / 32 (a
** bucket a layer). Under ZeRO-3 the gathers are per micro-batch (another
** term) and without the distributed optimizer there is no separate gather:
** no wait in either. */
Test(step, param_gather_waits_at_the_first_forward) {
  step_result a, z3, z0;
  char err[512];
  plan p = base(64, 1, 1, 64, 1024);
  framework_apply(framework_find("megatron-core"), &p);
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &a, err, sizeof err), 0, "%s", err);
  double ag = a.dp_allreduce_s, F = 32 * a.layer_fwd_s + a.head_fwd_s;
  double want = (ag > F ? ag - F : 0) + ag / 32;
  cr_assert_gt(ag, F, "the case should expose part of the gather: ag %g, F %g", ag, F);
  cr_assert_float_eq(a.param_gather_exposed_s, want, want * 1e-9, "%g vs %g",
                     a.param_gather_exposed_s, want);
  /* it is part of the step and of its exposed communication */
  cr_assert_geq(a.breakdown_s.exposed_comm, a.param_gather_exposed_s + a.exposed_dp_s - 1e-12);
  /* with a Reduction Server the reducers reduce the gradients, but the
  ** chips gather their updated weights themselves: the same wait */
  step_result rs;
  plan r = p;
  r.reduction_server = 8;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", r, &rs, err, sizeof err), 0, "%s", err);
  cr_assert_float_eq(rs.param_gather_exposed_s, a.param_gather_exposed_s,
                     a.param_gather_exposed_s * 1e-12, "%g vs %g", rs.param_gather_exposed_s,
                     a.param_gather_exposed_s);
  plan q = p;
  q.zero = 3;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", q, &z3, err, sizeof err), 0, "%s", err);
  cr_assert_eq(z3.param_gather_exposed_s, 0);
  q.zero = 0;
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", q, &z0, err, sizeof err), 0, "%s", err);
  cr_assert_eq(z0.param_gather_exposed_s, 0);
}

/* A Llama 3 8B FSDP step of `chips` chips, mbs sequences of 8,192 tokens
** a chip, under framework fw on chip name: its time at the chip's
** sustained clock (chip.sustained_clock_ratio) over its time at the clock
** the chip's figures were measured at. */
static double clock_slowdown(const char *name, const char *fw, int64_t chips, int64_t mbs) {
  char err[512];
  hw_catalog *c = th_catalog();
  model *m = load_model("llama3-8b", 8192);
  const hw_model *held = th_hw(c, name);
  hw_model rated = *held;
  rated.chip.sustained_clock_ratio = 1;
  plan p = base(chips, 1, 1, chips * mbs, 8192);
  p.mbs = mbs;
  framework_apply(framework_find(fw), &p);
  p.zero = 3;
  step_result a, b;
  cr_assert_eq(plan_check(m, held, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, held, &p, NULL, &a, NULL, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, &rated, &p, NULL, &b, NULL, err, sizeof err), 0, "%s", err);
  model_free(m);
  hw_catalog_free(c);
  return a.step_time_s / b.step_time_s;
}

/* The 500 W H100 (h100-96gb, chip.sustained_clock_ratio 0.879 from the
** SM clock Ujeniya et al. 2026 measured at a 500 W cap) against the same
** part at its rated clock, on a Llama 3.1 8B FSDP step: the step slows by
** less than the clock (memory-bound kernels and communication keep their
** pace) and by about what Mayr et al. 2026 measured for LLaMA 3 8B
** pre-training on that part at 500 W against 700 W: 30,271.0 / 27,705.3
** tokens/s = 1.093 (their Table 4). Not fitted: the ratio is the clock's;
** the band allows their different framework (LitGPT, 4 GPUs). */
Test(step, power_capped_h100_slows_llama_8b_as_measured) {
  hw_catalog *c = th_catalog();
  cr_assert_float_eq(th_hw(c, "h100-96gb")->chip.sustained_clock_ratio, 0.879, 1e-12);
  hw_catalog_free(c);
  double slow = clock_slowdown("h100-96gb", "torchtitan", 8, 2);
  cr_assert(slow > 1.0 && slow < 1 / 0.879, "slowdown %.4f outside (1, 1/0.879)", slow);
  cr_assert(fabs(slow - 30271.0 / 27705.3) < 0.04, "slowdown %.4f, measured 1.093", slow);
}

/* TPU7x at libtpu's default DVFS p-state (3) against the top one (7) its
** GEMM figure was measured at: chip.sustained_clock_ratio is a 16384^3
** GEMM's rate at the default (950.13 TFLOP/s, Google's
** accelerator-microbenchmarks) over its rate at p-state 7 (1103.47,
** gpu-tpu-pedia). A dense MaxText step (Llama 3 8B, FSDP on 4 chips = 8
** devices, 4 sequences of 8,192 tokens a chip) slows by less than the
** cores (HBM and ICI keep their clocks) and by at least the smallest gain
** gpu-tpu-pedia's A/B runs measured on dense SFT steps further from
** compute-bound than this one (Qwen3 4B / 8B / 14B at 27 / 37 / 40 % MFU:
** +8.3 / +9.6 / +10.0 %). */
Test(step, tpu7x_default_clock_state_slows_compute_as_measured) {
  hw_catalog *c = th_catalog();
  cr_assert_float_eq(th_hw(c, "tpu-v7x")->chip.sustained_clock_ratio, 950.13 / 1103.47, 1e-3);
  hw_catalog_free(c);
  double slow = clock_slowdown("tpu-v7x", "maxtext", 4, 4);
  cr_assert(slow >= 1.083 && slow <= 1 / 0.861 + 1e-9, "slowdown %.4f outside [1.083, 1/0.861]", slow);
}

/* torchtitan under tensorwise float8 with tensor and sequence parallelism
** (torchao's Float8ColwiseParallel / Float8RowwiseParallel /
** PrepareFloat8ModuleInput): each all-gather moves the fp8 cast, 1 B an
** element, the reduce-scatters stay 16-bit. Llama 3 8B at tp 8 on one
** H100 node, one 8,192-token sequence: a layer's forward has two
** all-gathers of 8192 x 4096 elements, so its collectives shrink by
** 2 x (AG(64 MiB) - AG(32 MiB)) against bf16; megatron-core's TP
** collectives do not change with the precision. */
Test(step, torchtitan_float8_tp_gathers_fp8) {
  step_result r[2], mc[2];
  char err[512];
  plan p = base(8, 8, 1, 1, 8192);
  p.sp = true;
  framework_apply(framework_find("torchtitan"), &p);
  plan q = base(8, 8, 1, 1, 8192);
  q.sp = true;
  framework_apply(framework_find("megatron-core"), &q);
  q.tp_overlap = false;
  for (int k = 0; k < 2; k++) {
    plan a = p, b = q;
    cr_assert_eq(plan_precision_parse(k ? "fp8" : "bf16", &a), 0);
    cr_assert_eq(plan_precision_parse(k ? "fp8" : "bf16", &b), 0);
    cr_assert_eq(simulate("llama3-8b", "h100-sxm", a, &r[k], err, sizeof err), 0, "%s", err);
    cr_assert_eq(simulate("llama3-8b", "h100-sxm", b, &mc[k], err, sizeof err), 0, "%s", err);
  }
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  double act = 8192.0 * 4096 * 2;
  double full = coll_group_time_s(h, 8, 8, COLL_ALL_GATHER, act, 1, COLL_AUTO, false, err, sizeof err);
  double half = coll_group_time_s(h, 8, 8, COLL_ALL_GATHER, act / 2, 1, COLL_AUTO, false, err, sizeof err);
  hw_catalog_free(c);
  cr_assert(full > half && half > 0);
  double got = r[0].tp_comm_fwd_s - r[1].tp_comm_fwd_s;
  cr_assert_float_eq(got, 2 * (full - half), 1e-9 + 1e-6 * got, "%g vs %g", got, 2 * (full - half));
  cr_assert_float_eq(mc[0].tp_comm_fwd_s, mc[1].tp_comm_fwd_s, 1e-12);
  /* a MoE block's input is gathered 16-bit (torchtitan's llama4
  ** apply_moe_tp: PrepareModuleInputOutput): on Mixtral 8x7B (hidden 4096,
  ** every layer MoE) only the attention's gather halves */
  step_result x[2];
  for (int k = 0; k < 2; k++) {
    plan a = p;
    cr_assert_eq(plan_precision_parse(k ? "fp8" : "bf16", &a), 0);
    cr_assert_eq(simulate("mixtral-8x7b", "h100-sxm", a, &x[k], err, sizeof err), 0, "%s", err);
  }
  got = x[0].tp_comm_fwd_s - x[1].tp_comm_fwd_s;
  cr_assert_float_eq(got, full - half, 1e-9 + 1e-6 * got, "%g vs %g", got, full - half);
}

/* PyTorch eager against torch.compile (--compile off / on) on torchtitan's
** published pair: Llama 3.1 8B, FSDP on 8 and on 128 of its 500 W H100s,
** local batch 2 at 8192 tokens, selective (op) recomputation. Its Tables 1
** and 3 (benchmarks/llama3_h100_202412_torchtitan.md) give 5,762 and 6,667
** tokens/s per GPU on 8 (1.157x with torch.compile) and 5,605 and 6,514 on
** 128 (1.162x). Eager runs each op of a layer as its own kernel (the
** RMSNorm's eight, RoPE's, SiLU and the product apart) where compile fuses
** them: tpusim's ratio comes from those kernels' HBM traffic, nothing
** fitted. It comes out 1.24, 7 % above the measured ratios (whose own
** spread is 0.005; 1.23 before the part took the 80 GB H100's measured
** HBM fraction, which slows eager's extra traffic with the rest): the
** band, 0.09, is that output's distance plus a margin, there for the
** eager kernels' granularity, which is tpusim's graph's and not torchtitan's op for op
** (a rotate-half RoPE in bf16 where torchtitan multiplies complex numbers
** in f32; the loss). The selective recompute replays every kernel it does
** not save (PyTorch's SAC re-runs the region's forward, the saved ops'
** outputs taken from its cache), so eager's extra kernels count three
** times, forward, recompute and backward: the 1.20 this was before counted
** half of them in the recompute. That the ratio sits above the measured
** one says tpusim's eager kernels cost too much, not that fewer replay. */
Test(step, eager_pytorch_costs_llama_8b_what_torch_compile_saves) {
  char err[512];
  hw_catalog *c = th_catalog();
  model *m = load_model("llama3-8b", 8192);
  const hw_model *hw = th_hw(c, "h100-96gb");
  plan p = base(8, 1, 1, 16, 8192);
  p.mbs = 2;
  framework_apply(framework_find("torchtitan"), &p);
  cr_assert(!p.eager, "torchtitan's profile is its compiled runs");
  p.zero = 3;
  step_result compiled, eager;
  cr_assert_eq(plan_check(m, hw, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_simulate(m, hw, &p, NULL, &compiled, NULL, err, sizeof err), 0, "%s", err);
  p.eager = true;
  cr_assert_eq(step_simulate(m, hw, &p, NULL, &eager, NULL, err, sizeof err), 0, "%s", err);
  double gain = eager.step_time_s / compiled.step_time_s;
  cr_assert(fabs(gain - 6667.0 / 5762.0) < 0.09, "compile's gain %.4f, measured 1.157", gain);
  cr_assert_gt(gain, 6667.0 / 5762.0, "the eager kernels cost too much, as the comment says");
  /* what eager adds is the elementwise kernels' traffic: the attention
  ** core is the same kernels either way */
  cr_assert_gt(eager.layer_fwd_s, compiled.layer_fwd_s);
  cr_assert_float_eq(eager.attn_core_fwd_s, compiled.attn_core_fwd_s, 0);
  model_free(m);
  hw_catalog_free(c);
}

/* One transformer layer against its measured time: Korthikanti et al. 2022
** (arXiv:2205.05198, MLSys 2023) Table 4, the 22B model (48 layers, hidden
** 6144, 64 heads, seq 2048, batch 4, fp16) at tp 8 on DGX A100 80 GB,
** Megatron-LM 2022: forward and backward of one layer in ms, each with its
** tensor-parallel collectives, the backward with the recomputation:
**   baseline, no recompute        7.7  11.9
**   sequence parallelism          7.2  11.8
**   full recompute                7.7  19.5
**   selective recompute           7.7  13.2
**   selective + sequence          7.2  13.1
** tpusim's per-layer times (the forward and its TP collectives; the
** backward, its exposed collectives, the recomputed forward and, under
** full recompute, that forward's collectives again) are within 10 % of
** each, and the recomputations cost what the paper measures within a few
** points: full 39 % of the layer (above the 33 % of a third more FLOPs
** because Megatron overlaps the backward's all-reduce with the weight
** gradient's GEMM -- framework tp_bwd_async -- but not the recomputed
** forward's), selective 7 %. For the record, today: forward 7.56 ms in
** all five (-2 %, and +5 % under sequence parallelism, whose norms and
** dropouts on 1/t of the tokens tpusim does not model: the paper's 7.7 ->
** 7.2 ms), backward 11.65 / 12.43 / 19.21 / 13.24 / 14.02 ms (-2, +5, -1.5,
** +0.3, +7 %: the sequence-parallel rows slow by the same missing split);
** before the asynchronous backward it was +8 to +10 %, and with the hidden
** all-reduces free of the SMs NCCL holds (24 of A100's 108) -5, +2, -3,
** -2, +4 %. */
Test(step, korthikanti_table4_layer_times) {
  static const struct {
    bool sp;
    plan_recompute rc;
    double fwd_ms, bwd_ms;
  } row[] = {{false, PLAN_RECOMPUTE_NONE, 7.7, 11.9},
             {true, PLAN_RECOMPUTE_NONE, 7.2, 11.8},
             {false, PLAN_RECOMPUTE_FULL, 7.7, 19.5},
             {false, PLAN_RECOMPUTE_SELECTIVE, 7.7, 13.2},
             {true, PLAN_RECOMPUTE_SELECTIVE, 7.2, 13.1}};
  hw_catalog *c = th_catalog();
  const hw_model *a100 = th_hw(c, "a100-80g");
  model *m = load_model("tests/validation/models/gpt3-48x6144-v51200.json", 2048);
  double total[5];
  for (int i = 0; i < 5; i++) {
    plan p = base(8, 8, 1, 4, 2048);
    p.mbs = 4;
    p.precision = GDT_F16;
    framework_apply(framework_find("megatron-2022"), &p);
    p.sp = row[i].sp;
    p.recompute = row[i].rc;
    char err[512];
    cr_assert_eq(plan_check(m, a100, &p, err, sizeof err), 0, "%s", err);
    step_result r;
    cr_assert_eq(step_costs(m, a100, &p, &r, err, sizeof err), 0, "%s", err);
    double rec = step_recompute_s(&r, &p, &m->info.tf, -1);
    double fwd = r.layer_fwd_s + r.tp_comm_fwd_s;
    double bwd = r.layer_bwd_s + r.tp_comm_bwd_s + rec +
                 (row[i].rc == PLAN_RECOMPUTE_FULL ? r.tp_comm_fwd_s : 0);
    cr_assert_float_eq(fwd * 1e3, row[i].fwd_ms, 0.10 * row[i].fwd_ms, "row %d forward %.2f ms", i,
                       fwd * 1e3);
    cr_assert_float_eq(bwd * 1e3, row[i].bwd_ms, 0.10 * row[i].bwd_ms,
                       "row %d backward %.2f ms", i, bwd * 1e3);
    total[i] = fwd + bwd;
  }
  double full = total[2] / total[0] - 1, sel = total[3] / total[0] - 1;
  cr_assert(full > 0.30 && full < 0.45, "full recompute %.3f of the layer (paper: 0.39)", full);
  cr_assert(sel > 0.02 && sel < 0.12, "selective recompute %.3f (paper: 0.07)", sel);
  model_free(m);
  hw_catalog_free(c);
}

/* Megatron's optimizer step moves more than the fused Adam's 28 B a
** parameter (megatron/core/optimizer/optimizer.py @ d98e8a6): the main
** gradients cast to fp32 from a 16-bit buffer (2 B read + 4 written), fp16's
** unscale and inf check in place (4 + 4), their L2 norm for clip_grad (4),
** the new fp32 weights copied into the 16-bit model (4 + 2), and the next
** step's zeroing of the chip's gradient buffer (2 B a parameter of its model
** shard). By hand: fp16 (megatron-2022, fp16 gradient buffers) 6 + 8 + 4 +
** 6 = 24 B; bf16 (megatron-core, bf16 buffers) 6 + 4 + 6 = 16 B; an fp8
** recipe's weight copy is its weight cast (stepcost.c), so 6 + 4 = 10 B;
** MaxText and 16-bit weights without a master (--weight-dtype bf16): none.
** Llama 3 8B at tp 2, pp 2, dp 2 under ZeRO-1 in bf16: 8,030,261,248 / 4 =
** 2,007,565,312 parameters a chip, half of them its optimizer's shard, so
** the update takes (1,003,782,656 x (28 + 16) + 2,007,565,312 x 2) B over
** H100's HBM at its efficiency. */
Test(step, megatron_optimizer_step_passes) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  model *m = load_model("llama3-8b", 1024);
  plan p = base(8, 2, 2, 16, 1024);
  p.dp = 2;
  double zero;
  framework_apply(framework_find("megatron-2022"), &p);
  p.precision = GDT_F16;
  cr_assert_float_eq(step_update_extra_bytes(m, h, &p, &zero), 24, 0);
  cr_assert_float_eq(zero, 2, 0);
  framework_apply(framework_find("megatron-core"), &p);
  p.precision = GDT_BF16;
  cr_assert_float_eq(step_update_extra_bytes(m, h, &p, &zero), 16, 0);
  cr_assert_float_eq(zero, 2, 0);
  cr_assert_eq(plan_precision_parse("fp8", &p), 0);
  cr_assert_float_eq(step_update_extra_bytes(m, h, &p, &zero), 10, 0);
  p.gemm = PLAN_GEMM_NATIVE;
  p.bf16_weights = true;
  cr_assert_float_eq(step_update_extra_bytes(m, h, &p, &zero), 0, 0);
  cr_assert_float_eq(zero, 0, 0);
  p.bf16_weights = false;
  framework_apply(framework_find("maxtext"), &p);
  cr_assert_float_eq(step_update_extra_bytes(m, h, &p, &zero), 0, 0);
  /* the step's optimizer term, megatron-core bf16 under ZeRO-1 */
  framework_apply(framework_find("megatron-core"), &p);
  p.zero = 1;
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &r, NULL, err, sizeof err), 0, "%s", err);
  double chip = 8030261248.0 / 4, bw = h->chip.hbm_bw_bytes_per_s * h->chip.hbm_efficiency;
  cr_assert_float_eq(step_optimizer_params(m, &p), chip / 2, 1);
  cr_assert_float_eq(r.optimizer_s, (chip / 2 * (28 + 16) + chip * 2) / bw, 1e-12);
  model_free(m);
  hw_catalog_free(c);
}

/* HSDP across TPU slices (MaxText's dcn_data_parallelism with FSDP in a
** slice): 512 v5e chips are two 16x16 slices joined by DCN, --hsdp 256 a
** shard group a slice. The gradients reduce-scatter on the slice's ICI,
** then each chip all-reduces its shard with its twin in the other slice --
** over DCN, not the ICI of one slice. By hand: Llama 3 8B's 8,030,261,248
** gradients x 2 B (MaxText reduces bf16) / 256 = 62.7 MB a chip; a two-
** member ring all-reduce sends and receives that once, at v5e's DCN share
** of 3.125 GB/s a chip (2 x 100 Gb/s a host of 8): 20.1 ms at least. */
Test(step, hsdp_replicas_in_other_slices_reduce_over_dcn) {
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "tpu-v5e");
  model *m = load_model("llama3-8b", 128);
  plan p = base(512, 1, 1, 512, 128);
  framework_apply(framework_find("maxtext"), &p);
  p.zero = 3, p.hsdp = 256;
  char err[512];
  cr_assert_eq(plan_check(m, h, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, h, &p, NULL, &r, NULL, err, sizeof err), 0, "%s", err);
  double gb = step_grad_bytes(m, h, &p), shard = gb / 256;
  cr_assert_float_eq(gb, 8030261248.0 * 2, 1);
  double rs = coll_time_s(h, 256, 0, COLL_ALL_REDUCE, gb, 1, 0, COLL_AUTO, false, err, sizeof err) / 2;
  double dcn = coll_time_s(h, 2, 1, COLL_ALL_REDUCE, shard, 2, 0, COLL_AUTO, false, err, sizeof err);
  cr_assert(rs > 0 && dcn > 0, "%s", err);
  cr_assert_float_eq(r.dp_allreduce_s, rs + dcn, 1e-9 * (rs + dcn));
  cr_assert_geq(dcn, shard / 3.125e9 * (1 - 1e-9));
  /* the same two chips priced on one slice's ICI would take ~1 ms */
  double ici = coll_time_s(h, 2, 1, COLL_ALL_REDUCE, shard, 1, 0, COLL_AUTO, false, err, sizeof err);
  cr_assert_lt(ici * 10, dcn);
  model_free(m);
  hw_catalog_free(c);
}

/* Any group whose members sit in several TPU slices crosses DCN, not only
** HSDP's replicas. Where a group lies, by hand (rank order tensor, context,
** data, pipeline; a v5e slice is 256 chips): on 512 chips (2 slices) a
** data-parallel group of 128 at stride tp 4 covers 512 chips, 64 a slice:
** 2 slices; 32 at stride 4 covers 128 chips: one; 2 pipeline stages 256
** apart: 2; anything on 256 chips or on a GPU machine: one. */
Test(step, groups_spanning_tpu_slices) {
  hw_catalog *c = th_catalog();
  const hw_model *v5e = th_hw(c, "tpu-v5e"), *h100 = th_hw(c, "h100-sxm");
  plan p = base(512, 4, 1, 512, 128);
  cr_assert_eq(step_group_slices(v5e, &p, 128, 4), 2);
  cr_assert_eq(step_group_slices(v5e, &p, 32, 4), 1);
  cr_assert_eq(step_group_slices(v5e, &p, 2, 256), 2);
  cr_assert_eq(step_group_slices(v5e, &p, 4, 1), 1);
  cr_assert_eq(step_group_slices(h100, &p, 128, 4), 1);
  plan one = base(256, 4, 1, 256, 128);
  cr_assert_eq(step_group_slices(v5e, &one, 64, 4), 1);
  /* Llama 3 8B data-parallel over that group (plain PyTorch DDP, an
  ** all-reduce of the 4 B gradients of a tp 4 shard): the two slices' 64
  ** chips reduce over DCN; a two-slice ring sends and receives each chip's
  ** 1/64 of the 8.0 GB once at 3.125 GB/s -- at least 40 ms, on top of
  ** the reduce-scatter and all-gather inside each slice: more than the
  ** same 128 chips' all-reduce within one slice */
  model *m = load_model("llama3-8b", 128);
  framework_apply(framework_find("plain"), &p);
  char err[512];
  cr_assert_eq(plan_check(m, v5e, &p, err, sizeof err), 0, "%s", err);
  step_result r;
  cr_assert_eq(step_simulate(m, v5e, &p, NULL, &r, NULL, err, sizeof err), 0, "%s", err);
  double gb = step_grad_bytes(m, v5e, &p);
  cr_assert_float_eq(gb, 8030261248.0 / 4 * 4, 1);
  double dcn = coll_group_time_s(v5e, 128, 0, COLL_ALL_REDUCE, gb, 2, COLL_AUTO, false, err, sizeof err);
  double ici = coll_time_s(v5e, 128, 0, COLL_ALL_REDUCE, gb, 1, 0, COLL_AUTO, false, err, sizeof err);
  cr_assert_float_eq(r.dp_allreduce_s, dcn, 1e-9 * dcn);
  cr_assert_geq(dcn, gb / 64 / 3.125e9 * (1 - 1e-9));
  cr_assert_lt(ici, dcn);
  model_free(m);
  hw_catalog_free(c);
}

/* FSDP2 (torchtitan) copies each gathered unit out of the all-gather
** buffer on the compute stream, in the forward and again in the backward's
** re-gather: a read and a write of its 16-bit weights. By hand, one Llama
** 3 8B layer holds 4096 x (4096 + 1024 + 1024 + 4096) attention weights,
** 3 x 4096 x 14336 MLP weights and two 4096 norms: 218,112,000, so the
** layer's forward and backward each take 218,112,000 x 4 B / (HBM x its
** efficiency) more under ZeRO-3 than under ZeRO-2, which gathers nothing. */
Test(step, torchtitan_fsdp2_copy_out_and_foreach_adamw) {
  /* one run of llama3-8b on 8 h100-sxm under `framework` at ZeRO stage z */
  step_result r[5];
  static const struct {
    const char *framework;
    int zero;
  } runs[5] = {{"torchtitan", 3}, {"torchtitan", 2}, {"torchtitan-2024", 3}, {"megatron-core", 3},
               {"megatron-core", 2}};
  char err[512];
  for (int i = 0; i < 5; i++) {
    plan p = base(8, 1, 1, 8, 1024);
    framework_apply(framework_find(runs[i].framework), &p);
    p.zero = runs[i].zero;
    cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &r[i], err, sizeof err), 0, "%s: %s",
                 runs[i].framework, err);
  }
  hw_catalog *c = th_catalog();
  const hw_model *h = th_hw(c, "h100-sxm");
  double bw = h->chip.hbm_bw_bytes_per_s * (h->chip.hbm_efficiency > 0 ? h->chip.hbm_efficiency : 1);
  hw_catalog_free(c);
  double copy = 218112000.0 * 4 / bw;
  cr_assert_float_eq(r[0].layer_fwd_s - r[1].layer_fwd_s, copy, 1e-9 * copy);
  cr_assert_float_eq(r[0].layer_bwd_s - r[1].layer_bwd_s, copy, 1e-9 * copy);
  /* torchtitan's AdamW: fused since 2025-02-24 (7 passes over the fp32
  ** tensors: 28 B a parameter of the chip's eighth of 8,030,261,248);
  ** before, torch.optim's foreach form after clip_grad_norm_: 20 passes
  ** (weight decay 2, lerp of m 3, v's mul 2 and addcmul 3, sqrt 2, div 2,
  ** eps add 2, addcdiv 4) and the clip's 3 (norm 1, scale 2): 92 B */
  double local = 8030261248.0 / 8;
  cr_assert_float_eq(r[0].optimizer_s, local * 7 * 4 / bw, 1e-9);
  cr_assert_float_eq(r[2].optimizer_s, local * (20 + 3) * 4 / bw, 1e-9);
  cr_assert_float_eq(r[2].layer_fwd_s, r[0].layer_fwd_s, 1e-15);
  /* Megatron-Core's ZeRO-3 gathers into its buffers in place: no copy */
  cr_assert_float_eq(r[3].layer_fwd_s, r[4].layer_fwd_s, 1e-15);
}

/* One shard group for the states, whatever reads it: under HSDP a MoE's
** experts are sharded over their data-parallel ranks inside the group, as
** the memory model holds them (plan_state_shards). Mixtral 8x7B on 16
** chips, tp 1, FSDP with HSDP groups of 8 and ep 4: the experts' replicas
** are dp / ep = 4 ranks, 8 / 4 = 2 of them in a group, so a chip updates
** 1/8 of the dense parameters and 1/2 of its 2 experts' (8 / ep 4) -- not
** 1/4, their replicas across groups. */
Test(step, hsdp_shards_expert_states_inside_the_group) {
  model *m = load_model("mixtral-8x7b", 1024);
  plan p = base(16, 1, 1, 16, 1024);
  p.dp = 16, p.ep = 4, p.zero = 3, p.hsdp = 8;
  int64_t gd, ge;
  plan_state_shards(&p, &gd, &ge);
  cr_assert_eq(gd, 8);
  cr_assert_eq(ge, 2);
  double e = (double)m->expert_params, dense = (double)m->params - e;
  cr_assert_float_eq(step_optimizer_params(m, &p), dense / 8 + e / 4 / 2, 1);
  model_free(m);
}

/* While NCCL reduces the gradients under the backward (and gathers the
** distributed optimizer's weights under the first forward) its kernel keeps
** one CTA a channel on an SM: h100-sxm holds 24 channels in a node and 16
** across nodes (the hardware file's collective_ctas, from NCCL's logs and
** code), of 132 SMs. The compute those collectives hide then runs on the
** rest, so the step grows by the hidden time x 24/132 (x 16/132 for a group
** across nodes); the same plan on a copy of the hardware without the
** figures is that much faster, nothing else moving. A TPU's collectives
** are DMAs: no share. */
static int simulate_on(const char *src, const hw_model *hw, plan p, step_result *r, char *err,
                       size_t errn) {
  model *m = load_model(src, p.seq);
  int rc = plan_check(m, hw, &p, err, errn);
  if (rc == 0) rc = step_simulate(m, hw, &p, NULL, r, NULL, err, errn);
  model_free(m);
  return rc;
}

/* p for model src on hardware hw as catalogued (r) and with no collective
** CTAs (r0) */
static void with_and_without_ctas(hw_catalog *c, const char *src, const char *hw, plan p,
                                  step_result *r, step_result *r0) {
  char err[512];
  hw_model bare = *th_hw(c, hw);
  bare.scale_up.collective_ctas = bare.scale_out.collective_ctas = 0;
  cr_assert_eq(simulate_on(src, th_hw(c, hw), p, r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(simulate_on(src, &bare, p, r0, err, sizeof err), 0, "%s", err);
}

Test(step, overlapped_collectives_take_their_sms) {
  static const struct {
    int64_t chips, tp;
    double share;
  } k[] = {{8, 1, 24.0 / 132}, {64, 8, 16.0 / 132}};
  hw_catalog *c = th_catalog();
  for (int i = 0; i < 2; i++) {
    plan p = base(k[i].chips, k[i].tp, 1, 32, 4096);
    framework_apply(framework_find("megatron-core"), &p);
    step_result r, r0;
    with_and_without_ctas(c, "llama3-8b", "h100-sxm", p, &r, &r0);
    cr_assert_float_eq(r.coll_share, k[i].share, 1e-12, "case %d: share %g", i, r.coll_share);
    cr_assert_gt(r.coll_hidden_s, 0.01 * r.dp_allreduce_s, "case %d: nothing hidden", i);
    cr_assert_eq(r0.coll_sm_s, 0);
    double want = r.coll_hidden_s * k[i].share;
    cr_assert_float_eq(r.step_time_s - r0.step_time_s, want, want * 1e-9 + 1e-15,
                       "case %d: %g vs %g", i, r.step_time_s - r0.step_time_s, want);
  }
  cr_assert_eq(step_coll_sm_share(th_hw(c, "tpu-v5p"), 64, 4), 0);
  cr_assert_eq(step_coll_sm_share(th_hw(c, "h100-sxm"), 1, 1), 0, "no group, no kernel");
  hw_catalog_free(c);
}

/* The same for the tensor-parallel all-reduces Megatron hides under the
** weight-gradient GEMMs (tp_bwd_async): Korthikanti's 22B layer at tp 8
** on A100 without sequence parallelism hides both whole (no exposed
** backward collective on a copy without CTAs), and its backward then pays
** 24 of the 108 SMs for their time -- the forward's two all-reduces, the
** same collectives in series: 1.559 ms x 24/108 = 0.346 ms. */
Test(step, tp_backward_all_reduces_take_their_sms) {
  hw_catalog *c = th_catalog();
  hw_model bare = *th_hw(c, "a100-80g");
  bare.scale_up.collective_ctas = bare.scale_out.collective_ctas = 0;
  model *m = load_model("tests/validation/models/gpt3-48x6144-v51200.json", 2048);
  plan p = base(8, 8, 1, 4, 2048);
  p.mbs = 4;
  p.precision = GDT_F16;
  framework_apply(framework_find("megatron-2022"), &p);
  char err[512];
  step_result r, r0;
  cr_assert_eq(plan_check(m, &bare, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_costs(m, th_hw(c, "a100-80g"), &p, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(step_costs(m, &bare, &p, &r0, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r0.tp_comm_bwd_s, 0, "hidden whole: %g", r0.tp_comm_bwd_s);
  cr_assert_float_eq(r.tp_comm_fwd_s, r0.tp_comm_fwd_s, 0);
  double want = r.tp_comm_fwd_s * 24 / 108;
  cr_assert_float_eq(r.tp_comm_bwd_s, want, 1e-12, "%g vs %g", r.tp_comm_bwd_s, want);
  model_free(m);
  hw_catalog_free(c);
}

/* Under FSDP (ZeRO-3) the weights' gathers run a layer ahead of compute
** all through the step: the chunks they overlap slow too, so the step
** grows by more than the reduction's and the final gather's share. */
Test(step, fsdp_gathers_slow_the_chunks_they_hide_under) {
  hw_catalog *c = th_catalog();
  plan p = base(64, 1, 1, 64, 4096);
  framework_apply(framework_find("torchtitan"), &p);
  p.zero = 3;
  step_result r, r0;
  with_and_without_ctas(c, "llama3-8b", "h100-sxm", p, &r, &r0);
  cr_assert_float_eq(r.coll_share, 16.0 / 132, 1e-12);
  cr_assert_gt(r.step_time_s - r0.step_time_s, r.coll_sm_s * 1.01, "%g vs %g",
               r.step_time_s - r0.step_time_s, r.coll_sm_s);
  /* HSDP with shards of one chip: no reduce-scatter, the replicas'
  ** all-reduce across the 8 nodes takes the scale-out share alone */
  p.hsdp = 1;
  with_and_without_ctas(c, "llama3-8b", "h100-sxm", p, &r, &r0);
  cr_assert_float_eq(r.coll_share, 16.0 / 132, 1e-12);
  cr_assert_gt(r.coll_sm_s, 0);
  hw_catalog_free(c);
}

/* A whole-graph model (resnet50, data-parallel only) takes the same
** charge: its all-reduce over 16 a100-80g (two nodes: 16 of 108 SMs)
** hides under the last micro-batch's backward, and that backward runs on
** the SMs it leaves. */
Test(step, whole_graph_all_reduce_takes_its_sms) {
  hw_catalog *c = th_catalog();
  plan p = base(16, 1, 1, 1024, 0);
  p.mbs = 64;
  step_result r, r0;
  with_and_without_ctas(c, "resnet50", "a100-80g", p, &r, &r0);
  cr_assert_float_eq(r.coll_share, 16.0 / 108, 1e-12);
  double hidden = r.dp_allreduce_s < r.layer_bwd_s ? r.dp_allreduce_s : r.layer_bwd_s;
  cr_assert_gt(hidden, 0);
  cr_assert_float_eq(r.coll_hidden_s, hidden, 1e-15);
  cr_assert_float_eq(r.step_time_s - r0.step_time_s, hidden * 16 / 108, 1e-12);
  hw_catalog_free(c);
}

/* The first pipeline stage runs the embedding, the last the final norm,
** the output layer and the loss (Megatron-Core's pre_process and
** post_process). Llama 3 8B at 2,048 tokens on one H100: the embedding's
** forward is a gather of 2,048 x 4,096 bf16 rows, 2 x 16.8 MB of traffic,
** about 0.01 ms at 3.35 TB/s; the head's logits alone are 2 x 2,048 x
** 4,096 x 128,256 = 2.15 TFLOP, at least 2.2 ms at the 989 TFLOP/s peak.
** The last stage's share is all but the embedding's. */
Test(step, the_head_runs_on_the_last_stage_the_embedding_on_the_first) {
  plan p = base(2, 1, 2, 8, 2048);
  step_result r;
  char err[512];
  cr_assert_eq(simulate("llama3-8b", "h100-sxm", p, &r, err, sizeof err), 0, "%s", err);
  cr_assert_gt(r.embed_fwd_s, 0);
  cr_assert_lt(r.embed_fwd_s, 0.1e-3, "%g", r.embed_fwd_s);
  cr_assert_gt(r.head_fwd_s - r.embed_fwd_s, 2.15e12 / 989e12, "%g", r.head_fwd_s);
  cr_assert_gt(r.embed_bwd_s, 0);
  cr_assert_lt(r.embed_bwd_s, 0.1 * (r.head_bwd_s - r.embed_bwd_s), "%g of %g", r.embed_bwd_s,
               r.head_bwd_s);
}
