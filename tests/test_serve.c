/*
** test_serve.c -- the inference step (sim/serve_step.h) and the serving
** planner (planner/serve.h): hand-derived bounds and byte counts, the
** queueing formulas against textbook values, speculative decoding's
** formula, the refusal of a precision a chip has no unit for, and one test
** per serving rule (edge, batch, online), in-process and through the CLI.
** Where each expected number comes from is said beside it.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../hw_models/hw_catalog.h"
#include "../planner/serve.h"
#include "../sim/fuse.h"
#include "../sim/serve_step.h"
#include "helpers.h"

#define PHONE "tests/data/serving-phone-npu.json"

static serve_result step(const char *model_name, const char *hw_name, const char *prec, int64_t tp,
                         int64_t batch, int64_t in, int64_t out) {
  hw_catalog *c = th_catalog();
  model *m = th_model(model_name, 0);
  serve_cfg cfg = {.tp = tp, .pp = 1, .prec = serve_precision_find(prec), .batch = batch,
                   .input_tokens = in, .output_tokens = out};
  serve_result r;
  char err[512];
  cr_assert_eq(serve_step(m, th_hw(c, hw_name), &cfg, NULL, &r, err, sizeof err), 0, "%s", err);
  model_free(m);
  hw_catalog_free(c);
  return r;
}

/* Decode at batch 1 streams every weight once a token: Llama 3 8B in bf16
** holds 16.06 GB (8.03e9 parameters x 2 bytes), and an H100 SXM reads HBM at
** 3.35 TB/s (NVIDIA H100 datasheet), so a token takes at least 4.79 ms; the
** roofline must call it memory-bound. Kernel launches (3 us each,
** hw_models/h100-sxm.json) keep it within 2x of the bound. */
Test(serve, decode_batch1_is_memory_bound) {
  serve_result r = step("llama3-8b", "h100-sxm", "bf16", 1, 1, 128, 128);
  cr_assert(r.generative);
  double bound = 8.03e9 * 2 / 3.35e12;
  cr_assert_geq(r.weights_bytes, 16.0e9, "weights %.4g", r.weights_bytes);
  cr_assert_leq(r.weights_bytes, 16.2e9, "weights %.4g", r.weights_bytes);
  cr_assert_geq(r.tpot_s, bound, "tpot %.4g below the bandwidth bound %.4g", r.tpot_s, bound);
  cr_assert_leq(r.tpot_s, 2 * bound, "tpot %.4g", r.tpot_s);
  cr_assert_str_eq(r.decode_bound, "memory");
  /* prefill of 128 tokens x 2 x 8.03e9 FLOPs at no more than the bf16 peak
  ** (989 TFLOP/s dense, the datasheet) */
  cr_assert_geq(r.ttft_s, 2 * 8.03e9 * 128 / 989e12);
}

/* Weight-only int4 (groups of 128 with a 16-bit scale: AWQ) stores the
** linear layers' matrices in 4.125 bits a weight; the embedding (128256 x
** 4096, never quantized) and the norms stay 16-bit. Llama 3 8B: 8,030,261,248
** parameters (HF model card), of which 525,336,576 the embedding and
** 266,240 the norms (65 x 4096): the rest x 4.125 / 8 + those x 2 bytes.
** Decode at batch 1, memory-bound, gets faster by more than half. */
Test(serve, int4_weight_only_shrinks_weights_and_decode) {
  serve_result b = step("llama3-8b", "h100-sxm", "bf16", 1, 1, 128, 128);
  serve_result q = step("llama3-8b", "h100-sxm", "int4", 1, 1, 128, 128);
  double params = 8030261248.0, embed = 525336576.0, norms = 266240.0;
  double want = (params - embed - norms) * 4.125 / 8 + (embed + norms) * 2;
  cr_assert(fabs(q.weights_bytes - want) <= 0.01 * want, "int4 weights %.5g, want %.5g",
            q.weights_bytes, want);
  cr_assert_lt(q.tpot_s, 0.6 * b.tpot_s, "int4 %.4g vs bf16 %.4g", q.tpot_s, b.tpot_s);
  /* int8 weight-only: one byte a weight, between the two */
  serve_result w8 = step("llama3-8b", "h100-sxm", "int8-wo", 1, 1, 128, 128);
  cr_assert_lt(w8.tpot_s, b.tpot_s);
  cr_assert_gt(w8.tpot_s, q.tpot_s);
}

/* The KV cache of Llama 3 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2
** bytes = 131,072 bytes a token (HF config: num_key_value_heads 8,
** head_dim 128); 1000 tokens take 63 pages of 16 = 1008 tokens. Under
** tp 2 each chip holds 4 of the 8 heads: half. */
Test(serve, kv_cache_bytes_paged) {
  model *m = th_model("llama3-8b", 0);
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 1000, 2), 131072.0 * 1008, 1);
  cr_assert_float_eq(serve_kv_bytes(m, 2, 1, 1000, 2), 65536.0 * 1008, 1);
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 16, 2), 131072.0 * 16, 1, "a full page wastes nothing");
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 17, 1), 65536.0 * 32, 1, "fp8: one byte an element");
  model_free(m);
}

/* A hybrid's cache: Nemotron 3 Nano's 6 attention layers hold keys and
** values (2 x 2 KV heads x 128 x 2 B = 1,024 B a token each), its 23 Mamba-2
** layers one state a sequence -- 64 heads x 64 x 128 in fp32 (2 MiB) and
** the conv's 3 last inputs of 4096 + 2 x 8 x 128 channels in 2 B -- and its
** MoE sub-layers nothing. Qwen3-Next: 12 attention layers at 2 x 2 x 256 x 2
** B a token, 36 Gated DeltaNet states of 32 x 128 x 128 in fp32 and conv
** windows of 3 x (2 x 2048 + 4096) in 2 B. */
Test(serve, hybrid_kv_cache_counts_only_attention_layers) {
  model *m = th_model("tests/data/hf/nemotron3-nano-30b-a3b.json", 1024);
  double mamba = 64.0 * 64 * 128 * 4 + 3.0 * (4096 + 2 * 8 * 128) * 2;
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 1024, 2), 6 * 1024.0 * 1024 + 23 * mamba, 1);
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 2048, 2) - serve_kv_bytes(m, 1, 1, 1024, 2),
                     6 * 1024.0 * 1024, 1, "only attention grows with the sequence");
  model_free(m);
  m = th_model("tests/data/hf/qwen3-next-80b-a3b.json", 1024);
  double gdn = 32.0 * 128 * 128 * 4 + 3.0 * (2 * 2048 + 4096) * 2;
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 1024, 2), 12 * 2048.0 * 1024 + 36 * gdn, 1);
  model_free(m);
}

/* A sparse-attention cache (GLM-5): every layer keeps every token -- its
** indexer may pick any -- as MLA's latent and rotary key (512 + 64) plus
** the indexer's own key (128), 704 elements a token and layer, 2 B each,
** not capped at the 2,048 keys a query attends. 78 layers at 8,192 tokens:
** 78 x 704 x 8,192 x 2 B. */
Test(serve, sparse_attention_cache_keeps_every_key) {
  model *m = th_model("tests/data/hf/glm-5.json", 1024);
  cr_assert_float_eq(serve_kv_bytes(m, 1, 1, 8192, 2), 78 * 704.0 * 8192 * 2, 1);
  model_free(m);
}

/* Erlang C: with c = 2 servers and a = 1 erlang, C = (a^2/2! x 2/(2-1)) /
** (1 + a + a^2/2! x 2/(2-1)) = 1/3; with one server it is the utilization
** (M/M/1). The M/M/1 wait's tail P(W > t) = rho e^{-(mu - lambda) t}
** (Kleinrock 1975, sec. 3.2): rho 0.7, mu 1/s gives the p99 at
** ln(0.7/0.01)/0.3 = 14.162 s and a zero median (P(W > 0) = 0.7 > 0.5: no). */
Test(serve, erlang_c_textbook) {
  cr_assert_float_eq(serve_erlang_c(2, 1.0), 1.0 / 3, 1e-12);
  cr_assert_float_eq(serve_erlang_c(1, 0.7), 0.7, 1e-12);
  cr_assert_float_eq(serve_erlang_c(3, 3.0), 1.0, 0, "saturated");
  cr_assert_float_eq(serve_wait_quantile(1, 0.7, 1.0, 0.99), log(70.0) / 0.3, 1e-9);
  cr_assert_float_eq(serve_wait_quantile(1, 0.7, 1.0, 0.5), log(1.4) / 0.3, 1e-9);
  cr_assert_float_eq(serve_wait_quantile(4, 0.5, 1.0, 0.99), 0, 0, "rarely waits");
  cr_assert(isinf(serve_wait_quantile(2, 3, 1.0, 0.99)), "overloaded");
}

/* Leviathan et al. 2023, eq. 1: (1 - a^(k+1)) / (1 - a); k 4, a 0.8:
** (1 - 0.32768) / 0.2 = 3.3616; every draft accepted: k + 1. */
Test(serve, speculative_tokens_per_step) {
  cr_assert_float_eq(serve_spec_tokens(4, 0.8), 3.3616, 1e-12);
  cr_assert_float_eq(serve_spec_tokens(4, 1.0), 5, 0);
  cr_assert_float_eq(serve_spec_tokens(0, 0.8), 1, 0);
}

/* A100 has no fp8 unit (no chip.peak_flops_per_s.fp8 in its file): W8A8 fp8
** is refused with the reason; weight-only int4 runs there. */
Test(serve, precision_without_a_unit_is_refused) {
  hw_catalog *c = th_catalog();
  model *m = th_model("llama3-8b", 0);
  serve_cfg cfg = {.tp = 1, .pp = 1, .prec = serve_precision_find("fp8"), .batch = 1,
                   .input_tokens = 128, .output_tokens = 128};
  serve_result r;
  char err[512] = "";
  cr_assert_eq(serve_step(m, th_hw(c, "a100-80g"), &cfg, NULL, &r, err, sizeof err), -1);
  cr_assert(strstr(err, "a100-80g has no fp8 unit"), "%s", err);
  cfg.prec = serve_precision_find("int4");
  cr_assert_eq(serve_step(m, th_hw(c, "a100-80g"), &cfg, NULL, &r, err, sizeof err), 0, "%s", err);
  model_free(m);
  hw_catalog_free(c);
}

/* Llama 3 70B in bf16 is 141 GB (70.55e9 x 2): not on one 80 GB H100, on
** four (35 GB each). */
Test(serve, tensor_parallel_fits_what_one_chip_cannot) {
  serve_result one = step("llama3-70b", "h100-sxm", "bf16", 1, 1, 128, 128);
  serve_result four = step("llama3-70b", "h100-sxm", "bf16", 4, 1, 128, 128);
  cr_assert(!one.fits);
  cr_assert(four.fits);
  cr_assert(fabs(four.weights_bytes - one.weights_bytes / 4) < 0.05 * four.weights_bytes);
}

/* A MoE model decodes at batch 1: one token routed to top_k = 2 of E = 8
** experts leaves the capacity's padding rows (E x C = 8 > T k = 2) out of
** the combine (the scatter refused the step before). Under tensor
** parallelism vLLM and TensorRT-LLM split every expert's FFN across the tp
** ranks (expert parallelism is opt-in), so Mixtral 8x7B's 46.7 B
** parameters (93.4 GB in bf16, HF model card) are about halved per chip at
** tp 2, as a dense model's are. */
Test(serve, moe_decodes_at_batch_1_with_experts_split_by_tp) {
  serve_result one = step("mixtral-8x7b", "h100-sxm", "bf16", 1, 1, 128, 128);
  serve_result two = step("mixtral-8x7b", "h100-sxm", "bf16", 2, 1, 128, 128);
  cr_assert_geq(one.weights_bytes, 93.0e9, "weights %.4g", one.weights_bytes);
  cr_assert_leq(one.weights_bytes, 94.0e9, "weights %.4g", one.weights_bytes);
  cr_assert(fabs(two.weights_bytes - one.weights_bytes / 2) < 0.02 * two.weights_bytes,
            "tp 2: %.4g of %.4g", two.weights_bytes, one.weights_bytes);
  cr_assert(two.fits);
  cr_assert_gt(two.tpot_s, 0);
}

/* A decode step reads only the experts its tokens reach: at batch 1 a
** token's top_k = 2 of Mixtral's 8, so each chip of tp 2 streams the
** active parameters' share of the weights, 12.9 B (the HF model card's
** active count) x 2 B / 2 = 12.9 GB, at H100's 3.35 TB/s x 0.896 (the
** file's hbm_efficiency): 4.30 ms. Reading every expert (46.7 B x 2 B / 2
** = 46.7 GB, 15.6 ms) was the step's cost before. Launches, the KV cache
** and tp's all-reduces come on top: under 8 ms. At batch 64 nearly every
** expert is reached (1 - (6/8)^64 = 1 - 1e-8), so the step reads them all. */
Test(serve, moe_decode_reads_only_the_experts_reached) {
  serve_result one = step("mixtral-8x7b", "h100-sxm", "bf16", 2, 1, 128, 128);
  serve_result many = step("mixtral-8x7b", "h100-sxm", "bf16", 2, 64, 128, 128);
  double floor_s = 12.9e9 / (3.35e12 * 0.896);
  cr_assert_geq(one.tpot_s, floor_s, "tpot %.4g s", one.tpot_s);
  cr_assert_lt(one.tpot_s, 8e-3, "tpot %.4g s", one.tpot_s);
  cr_assert_gt(many.tpot_s, 46.7e9 / (3.35e12 * 0.896), "batch 64 reads every expert: %.4g s",
               many.tpot_s);
}

/* ---- the rules: one test each ---- */

Test(serve, rule_order) {
  hw_catalog *c = th_catalog();
  serve_req q = {.qps = 10};
  cr_assert_eq(serve_rules[serve_choose_rule(&q, c)].mode, SERVE_ONLINE);
  q.entities = 1e6, q.batch_window_s = 86400;
  cr_assert_eq(serve_rules[serve_choose_rule(&q, c)].mode, SERVE_BATCH);
  /* 50 W is below every server chip's TDP in the catalog (the lowest, v100's
  ** 300 W or tpu-v4's 192 W) */
  q.max_power_w = 50;
  cr_assert_eq(serve_choose_rule(&q, c), 1);
  cr_assert_eq(serve_rules[1].mode, SERVE_EDGE);
  q.offline = true;
  cr_assert_eq(serve_choose_rule(&q, c), 0, "offline decides first");
  hw_catalog_free(c);
}

/* Edge: MobileNetV2 offline on a phone-class NPU (a --hw-file fixture until
** the catalog has edge parts): int8, batch 1, fits, chosen with the reason. */
Test(serve, rule_offline_runs_on_the_device_in_int8) {
  th_run r = th_cli("serve", "mobilenet_v2", "--offline", "--max-power", "10", "--hw-file", PHONE,
                    "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "\"mode\":\t\"edge\""), "%s", r.out);
  cr_assert(strstr(r.out, "must work offline on the device"), "%s", r.out);
  const char *first = strstr(r.out, "\"candidates\"");
  cr_assert(first && strstr(first, "\"hw\":\t\"test-phone-npu\""), "%s", r.out);
  cr_assert(strstr(first, "\"precision\":\t\"int8\""));
  th_run_free(&r);
}

/* Batch: features known ahead; every candidate is priced for all entities. */
Test(serve, rule_entities_precompute_in_batch) {
  th_run r = th_cli("serve", "resnet50", "--entities", "1e6", "--batch-window", "24h", "--hw",
                    "tpu-v5e,h100-sxm", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "\"mode\":\t\"batch\""), "%s", r.out);
  cr_assert(strstr(r.out, "precompute in batch and serve from a key-value lookup"));
  cr_assert(strstr(r.out, "\"usd_total\""));
  th_run_free(&r);
}

/* Online: the cheapest replicas that keep p99 under the target, with the
** generative figures; enough replica slots to carry the load. */
Test(serve, rule_default_is_an_online_endpoint) {
  hw_catalog *c = th_catalog();
  model *m = th_model("llama3-8b", 0);
  const hw_model *hws[] = {th_hw(c, "h100-sxm")};
  serve_req q = {.qps = 50, .latency_p99_s = 0.5, .input_tokens = 1024, .output_tokens = 128};
  serve_plan p;
  char err[512];
  cr_assert_eq(serve_plan_run(m, hws, 1, c, &q, &p, err, sizeof err), 0, "%s", err);
  cr_assert_eq(p.mode, SERVE_ONLINE);
  cr_assert_eq(p.n, 1);
  const serve_cand *k = &p.c[0];
  cr_assert(k->meets, "%s", k->why_not);
  cr_assert_leq(k->p99_s, 0.5);
  cr_assert_geq(k->p99_s, k->step.ttft_s, "p99 includes the prefill");
  /* Little's law: requests in service = qps x service time <= slots */
  double service = k->step.ttft_s + 128 * k->step.tpot_s;
  cr_assert_geq((double)(k->replicas * k->batch), 50 * service);
  /* four times the load needs at least as many replicas */
  q.qps = 200;
  serve_plan p4;
  cr_assert_eq(serve_plan_run(m, hws, 1, c, &q, &p4, err, sizeof err), 0, "%s", err);
  cr_assert(p4.c[0].meets);
  cr_assert_geq(p4.c[0].usd_per_hour, k->usd_per_hour);
  serve_plan_free(&p);
  serve_plan_free(&p4);
  model_free(m);
  hw_catalog_free(c);
}

Test(serve, cli_json_contract) {
  th_run r = th_cli("serve", "llama3-8b", "--qps", "50", "--latency-p99", "500ms", "--hw",
                    "h100-sxm", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  static const char *const keys[] = {"\"mode\"", "\"hw\"", "\"replicas\"", "\"precision\"",
                                     "\"ttft_s\"", "\"tpot_s\"", "\"p99_s\"", "\"usd_per_hour\""};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    cr_assert(strstr(r.out, keys[i]), "--json lacks %s", keys[i]);
  th_run_free(&r);
}

/* The Edge TPU caches a model's parameters in its ~8 MB SRAM when they fit
** (Coral, Edge TPU Compiler): MobileNetV2's 3.5 M int8 parameters do, so
** an inference is bound by the chip, not by USB. Coral's published
** benchmark for MobileNet v2 (224x224) on the USB Accelerator is 2.6 ms
** (coral.ai/docs/edgetpu/benchmarks); the model must land within 3x of it
** (streaming the weights over USB instead gave 169 ms). */
Test(serve, edge_tpu_runs_mobilenet_v2_from_sram) {
  th_run r = th_cli("serve", "mobilenet_v2", "--offline", "--hw", "edge-tpu", "--json", NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  const char *t = strstr(r.out, "\"ttft_s\":");
  cr_assert_not_null(t, "%s", r.out);
  double ttft = strtod(t + strlen("\"ttft_s\":"), NULL);
  cr_assert(ttft > 2.6e-3 / 3 && ttft < 2.6e-3 * 3, "edge-tpu mobilenet_v2 %g s vs Coral 2.6 ms", ttft);
  th_run_free(&r);
}

/* serve_curve is the planner's own batch-by-batch figure: at the batch the
** planner keeps, the curve's point is the candidate (same step, replicas,
** p99, price), bit for bit; and at every batch the time per output token
** does not fall as the batch grows (a decode step reads at least the same
** weights and more KV cache). */
Test(serve, curve_is_the_planners_figures) {
  hw_catalog *c = th_catalog();
  model *m = th_model("llama3-8b", 0);
  const hw_model *hws[] = {th_hw(c, "h100-sxm"), th_hw(c, "tpu-v5e")};
  serve_req q = {.qps = 50, .latency_p99_s = 0.5, .input_tokens = 1024, .output_tokens = 128};
  serve_plan p;
  char err[512];
  cr_assert_eq(serve_plan_run(m, hws, 2, c, &q, &p, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < p.n; i++) {
    const serve_cand *k = &p.c[i];
    cr_assert(k->meets, "%s: %s", k->hw->name, k->why_not);
    serve_cand pts[11];
    int n = serve_curve(m, k->hw, &q, k->prec, k->tp, pts, 11, err, sizeof err);
    cr_assert_gt(n, 0, "%s", err);
    int hit = 0;
    for (int j = 0; j < n; j++) {
      cr_assert_eq(pts[j].batch, (int64_t)1 << j, "batches double from 1");
      if (j > 0) cr_assert_geq(pts[j].step.tpot_s, pts[j - 1].step.tpot_s, "%s b%lld", k->hw->name,
                               (long long)pts[j].batch);
      if (pts[j].batch != k->batch) continue;
      hit++;
      cr_assert_eq(pts[j].replicas, k->replicas);
      cr_assert_eq(pts[j].p99_s, k->p99_s);
      cr_assert_eq(pts[j].step.tpot_s, k->step.tpot_s);
      cr_assert_eq(pts[j].step.ttft_s, k->step.ttft_s);
      cr_assert_eq(pts[j].usd_per_hour, k->usd_per_hour);
    }
    cr_assert_eq(hit, 1, "%s: the planner's batch %lld is on the curve", k->hw->name, (long long)k->batch);
  }
  q.qps = 0;
  cr_assert_lt(serve_curve(m, hws[0], &q, p.c[0].prec, 1, NULL, 0, err, sizeof err), 0);
  cr_assert(strstr(err, "--qps"), "%s", err);
  serve_plan_free(&p);
  model_free(m);
  hw_catalog_free(c);
}

/* --tpot-max, the second target: the time per output token under load,
** TPOT / (1 - rho) with rho = (qps / replicas) x TTFT (chunked prefills
** interleaved, docs/serving.md). Llama 3 8B on an H100 at 50 requests/s:
** with an 8 ms target the kept candidate meets it, and one replica fewer
** would not (the fewest that do), unless that fewer misses the p99 alone;
** a target below batch 1's TPOT (7.3 ms, the table's figure: 16.06 GB of
** weights at 0.896 of 3.35 TB/s, 5.35 ms, plus the kernels' launches) is
** refused with the reason. */
Test(serve, tpot_max_is_a_second_target) {
  hw_catalog *c = th_catalog();
  model *m = th_model("llama3-8b", 0);
  const hw_model *hws[] = {th_hw(c, "h100-sxm")};
  serve_req q = {.qps = 50, .latency_p99_s = 0.5, .tpot_max_s = 0.008, .input_tokens = 1024,
                 .output_tokens = 128};
  serve_plan p;
  char err[512];
  cr_assert_eq(serve_plan_run(m, hws, 1, c, &q, &p, err, sizeof err), 0, "%s", err);
  const serve_cand *k = &p.c[0];
  cr_assert(k->meets, "%s", k->why_not);
  double loaded = k->step.tpot_s / (1 - 50.0 / (double)k->replicas * k->step.ttft_s);
  cr_assert_leq(loaded, 0.008);
  double fewer = k->step.tpot_s / (1 - 50.0 / (double)(k->replicas - 1) * k->step.ttft_s);
  cr_assert_gt(fewer, 0.008, "replicas %lld: one fewer also meets it", (long long)k->replicas);
  /* without the target the same chip keeps a larger batch, cheaper */
  serve_req q0 = q;
  q0.tpot_max_s = 0;
  serve_plan p0;
  cr_assert_eq(serve_plan_run(m, hws, 1, c, &q0, &p0, err, sizeof err), 0, "%s", err);
  cr_assert_lt(p0.c[0].usd_per_hour, k->usd_per_hour);
  q.tpot_max_s = 0.001;
  serve_plan p1;
  cr_assert_eq(serve_plan_run(m, hws, 1, c, &q, &p1, err, sizeof err), 0, "%s", err);
  cr_assert(!p1.c[0].meets);
  cr_assert(strstr(p1.c[0].why_not, "--tpot-max"), "%s", p1.c[0].why_not);
  serve_plan_free(&p);
  serve_plan_free(&p0);
  serve_plan_free(&p1);
  model_free(m);
  hw_catalog_free(c);
}

/* Memory-bound decode reads HBM at the fraction a streaming kernel reaches,
** not at the datasheet's peak: DeepSeek's FlashMLA decode kernel reads a
** paged cache at up to 3000 GB/s on an H800 SXM5, whose HBM3 peaks at
** 3.35 TB/s like the H100 SXM's (FlashMLA README @ 26d30779): 3000 / 3350 =
** 0.896, hw_models/h100-sxm.json chip.hbm_efficiency (h200.json takes the
** same fraction). The training step uses the same field (sim/optime.c).
** Llama 3 8B in bf16 is 16.06 GB of weights (8.03e9 x 2 bytes, HF model
** card), so a decode step at batch 1 takes at least 16.06e9 / (3.35e12 x
** 0.896) = 5.35 ms on an H100 SXM and 16.06e9 / (4.8e12 x 0.896) = 3.73 ms
** on an H200 -- above the 4.79 ms and 3.35 ms that the peaks alone give. */
Test(serve, decode_reads_hbm_at_the_measured_fraction) {
  hw_catalog *c = th_catalog();
  cr_assert_float_eq(th_hw(c, "h100-sxm")->chip.hbm_efficiency, 3000.0 / 3350.0, 1e-3);
  cr_assert_float_eq(th_hw(c, "h200")->chip.hbm_efficiency, 3000.0 / 3350.0, 1e-3);
  hw_catalog_free(c);
  serve_result h100 = step("llama3-8b", "h100-sxm", "bf16", 1, 1, 128, 128);
  serve_result h200 = step("llama3-8b", "h200", "bf16", 1, 1, 128, 128);
  cr_assert_geq(h100.decode_step_s, 16.06e9 / (3.35e12 * 0.896), "h100 %.4g", h100.decode_step_s);
  cr_assert_geq(h200.decode_step_s, 16.06e9 / (4.8e12 * 0.896), "h200 %.4g", h200.decode_step_s);
  /* the weights are most of the step: within 1.5x of the bound (the KV cache
  ** of 192 tokens, 25 MB, and the 32 layers' ~15 kernels of 3 us each,
  ** ~1.4 ms of launches, are the rest) */
  cr_assert_leq(h100.decode_step_s, 1.5 * 16.06e9 / (3.35e12 * 0.896), "h100 %.4g", h100.decode_step_s);
  /* the H200's 4.8 TB/s against the H100's 3.35: a memory-bound step
  ** shortens by at most their ratio, 1.43; the launches, the same ~1.5-2 ms
  ** on both, keep it nearer (5.35 + 2) / (3.73 + 2) = 1.28 */
  double ratio = h100.decode_step_s / h200.decode_step_s;
  cr_assert(ratio > 1.2 && ratio < 4.8 / 3.35 + 1e-9, "ratio %.4g", ratio);
}

/* --validate reads MLPerf Inference's metric, samples_per_s, for a model
** that does not generate; its tokens columns may then be 0. ResNet-50 v1.5
** is 4.1 GMACs a 224x224 image (8.2 GFLOPs: He et al. 2016 table 1, v1.5's
** stride on the 3x3 adds a little); an L4's int8 unit does 242.5 dense TOPS
** (hw_models/l4.json), so 32 images take at least 32 x 8.2e9 / 242.5e12 =
** 1.08 ms: at most 29,600 samples/s. A token metric on it, or samples_per_s
** on a generative model, is refused with the file and line. */
Test(serve, validate_reads_samples_per_s) {
  const char *path = "build/tests/serve-samples.csv";
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fprintf(f, "id,model,hw,chips,tp,weight_dtype,act_dtype,batch,input_tokens,output_tokens,"
             "metric,value,framework,source,notes\n"
             "rn50,resnet50,l4,1,1,int8,int8,32,0,0,samples_per_s,10000,x,y,z\n");
  fclose(f);
  th_run r = th_cli("serve", "--validate", path, NULL);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  const char *row = strstr(r.out, "| rn50 |");
  cr_assert(row, "%s", r.out);
  /* | rn50 | resnet50 | l4 x1 int8 | samples_per_s b32 0/0 | 1e+04 | SIM | ERR | */
  const char *sim = row;
  for (int bars = 0; bars < 5 && sim; bars++) sim = strchr(sim + 1, '|');
  cr_assert(sim);
  double v = strtod(sim + 1, NULL);
  cr_assert(v > 0 && v <= 32 / (32 * 8.2e9 / 242.5e12), "samples/s %.4g", v);
  th_run_free(&r);

  f = fopen(path, "w");
  cr_assert(f);
  fprintf(f, "id,model,hw,chips,tp,weight_dtype,act_dtype,batch,input_tokens,output_tokens,"
             "metric,value,framework,source,notes\n"
             "a,resnet50,l4,1,1,int8,int8,32,0,0,output_tokens_per_s,10000,x,y,z\n"
             "b,llama3-8b,h100-sxm,1,1,bf16,bf16,1,128,128,samples_per_s,10,x,y,z\n");
  fclose(f);
  r = th_cli("serve", "--validate", path, NULL);
  cr_assert_neq(r.rc, 0);
  /* each at its cell: row 2's input_tokens (column 32), row 3's metric (46) */
  cr_assert(strstr(r.err, "serve-samples.csv:2:32: ") && strstr(r.err, "found 0"), "%s", r.err);
  cr_assert(strstr(r.err, "serve-samples.csv:3:46: metric samples_per_s: a generative model"), "%s", r.err);
  th_run_free(&r);
  remove(path);
}

/* An encoder (BERT) serves one forward of `batch` samples of encoder_seq
** tokens (0: the model's seq_len, 512 for bert-large). Its arithmetic is at
** least the layers' GEMMs, 2 x 24 layers x 12 x 1024^2 weights (QKV, out,
** 2 x FFN 4096) = 6.04e8 FLOPs a token, plus the attention core, 4 x seq x
** 1024 a token and layer (QK^T and PV over all keys: no causal mask), on
** the A100's 312 TFLOP/s bf16 peak (datasheet): a lower bound. A 384-token
** sample costs more than a 128-token one, and less than a 512-token one. */
Test(serve, encoder_forward_at_its_sequence_length) {
  hw_catalog *c = th_catalog();
  model *m = th_model("bert-large", 0);
  const hw_model *a100 = th_hw(c, "a100-80g");
  double t[3];
  const int64_t seqs[3] = {128, 384, 0};
  for (int i = 0; i < 3; i++) {
    serve_cfg cfg = {.tp = 1, .pp = 1, .prec = serve_precision_find("bf16"), .batch = 8,
                     .encoder_seq = seqs[i]};
    serve_result r;
    char err[512];
    cr_assert_eq(serve_step(m, a100, &cfg, NULL, &r, err, sizeof err), 0, "%s", err);
    cr_assert(!r.generative);
    t[i] = r.forward_s;
    double seq = seqs[i] ? (double)seqs[i] : 512, tokens = 8 * seq;
    double flops = tokens * (2 * 24 * 12 * 1024.0 * 1024 + 24 * 4 * seq * 1024);
    cr_assert_geq(r.forward_s, flops / 312e12, "seq %.0f: %.4g s", seq, r.forward_s);
    cr_assert_float_eq(r.samples_per_s, 8 / r.forward_s, 1e-9);
  }
  cr_assert(t[0] < t[1] && t[1] < t[2], "%.4g %.4g %.4g", t[0], t[1], t[2]);
  model_free(m);
  hw_catalog_free(c);
}

/* A prefill's activation memory is its layers' largest value, twice (its
** input alive beside it): for Llama 3 8B the MLP's gate/up output of
** 20000 tokens x 14336 in bf16, 2 x 20000 x 14336 x 2 B = 1.147 GB. Not
** the attention scores, [32 heads, 20000, 20000] x 2 B = 25.6 GB, which a
** fused (Flash) attention keeps on chip a block at a time; nor the logits,
** [20000, 128256] x 4 B = 10.3 GB, which a server computes for each
** prompt's last token only. With 1.147 GB, a sequence's fp8 KV cache
** (2 x 8 heads x 128 x 32 layers x 1 B = 64 KiB a token, 21000 tokens at
** the mean context = 1.376 GB) leaves room for dozens of sequences on an
** H100: (72 GiB usable - 7.97 GiB weights - 1.07 GiB) / 1.376 GB = 49. */
Test(serve, prefill_activations_hold_no_scores_nor_logits) {
  serve_result r = step("llama3-8b", "h100-sxm", "fp8", 1, 1, 20000, 2000);
  double want = 2.0 * 20000 * 14336 * 2;
  cr_assert_float_eq(r.activation_bytes, want, 0.01 * want, "activations %.4g", r.activation_bytes);
  cr_assert_geq(r.max_batch, 45, "max batch %lld", (long long)r.max_batch);
  cr_assert_leq(r.max_batch, 52, "max batch %lld", (long long)r.max_batch);
}

/* ---- CNN inference: batch norm folded, int8 between kernels ---- */

/* ResNet-50 v1.5 as torchvision counts it: 25,557,032 parameters, of which
** the fc layer 2048 x 1000 + 1000 = 2,049,000 and the 53 batch norms'
** scale and shift, 2 x 26,560 channels (64 + 3 x (3 x 64 + 256) + 256 +
** 4 x (3 x 128 + 512) + 512 + 6 x (3 x 256 + 1024) + 1024 + 3 x (3 x 512 +
** 2048) + 2048 = 26,560) = 53,120; the filters the remaining 23,454,912.
** Inference folds each norm's scale into its filter and keeps its shift
** as the convolution's bias: 23,454,912 + 26,560 + 2,049,000 = 25,530,472
** weights, one byte each in int8. Training keeps the norms. */
Test(serve, resnet50_inference_folds_batchnorm) {
  model *m = th_model("resnet50", 0);
  cr_assert_eq(m->params, 25557032, "training graph %lld", (long long)m->params);
  model_free(m);
  serve_result r = step("resnet50", "l4", "int8", 1, 1, 0, 0);
  cr_assert(!r.generative);
  cr_assert_float_eq(r.weights_bytes, 25530472.0, 0.5, "weights %.0f", r.weights_bytes);
}

/* The kernels of ResNet-50's inference graph: 53 convolutions (the stem,
** 16 bottlenecks x 3, 4 downsample shortcuts), each with its folded bias,
** residual add and ReLU in the epilogue; one max-pooling kernel; the
** global average pool's sum fused into the last convolution's kernel (a
** reduce joins its elementwise producer), its 1/49 scale, and the
** classifier with its bias: 56. TensorRT's own engine has about as many
** layers after fusion (conv+bias+ReLU and conv+add+ReLU each one). */
Test(serve, resnet50_inference_kernels) {
  model *m = th_model("resnet50", 0);
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .forward_only = true, .inference = true,
                  .weight_dtype = GDT_S8, .act_dtype = GDT_S8};
  model *r = model_derive(m, &o, d);
  cr_assert_not_null(r);
  fuse_plan *p = fuse_graph_dup(r->g);
  int kernels = 0, convs = 0, norms = 0;
  for (int k = 0; k < p->n_groups; k++) kernels += p->size[k] > 0;
  for (int i = 0; i < graph_count(r->g); i++) {
    const graph_op *op = graph_get(r->g, i);
    convs += op->kind == GOP_CONV;
    norms += op->kind == GOP_RSQRT; /* a training-mode norm's 1 / sqrt(var + eps) */
    if (op->kind != GOP_PARAMETER && op->kind != GOP_CONSTANT)
      cr_assert_eq(op->out.dtype, GDT_S8, "%s %s: values between kernels are int8",
                   graph_op_name(op->kind), op->name ? op->name : "");
  }
  cr_assert_eq(convs, 53);
  cr_assert_eq(norms, 0, "no batch statistics at inference");
  cr_assert_eq(kernels, 56, "kernels %d", kernels);
  fuse_free(p);
  model_free(r);
  model_free(m);
  diag_free(d);
}

/* Batch 1 on an L4 is launch- and bandwidth-bound: 56 kernels x 3 us
** (hw_models/l4.json op_overhead_s) plus every filter read once,
** 25,530,472 B / 300 GB/s = 85.1 us, is a lower bound of the forward.
** Batch 32 is bounded by arithmetic: 4.09 G multiply-adds an image
** (torchvision's resnet50 figure), 8.18 GFLOPs, on the 242.5 TOPS dense
** int8 peak (l4.json): at most 29,645 images/s. int8 activations and
** weights move half the bytes of bf16 ones (1 byte a value instead of 2,
** the same kernels), and the int8 forward is the faster. */
Test(serve, resnet50_int8_bounds_on_l4) {
  serve_result one = step("resnet50", "l4", "int8", 1, 1, 0, 0);
  double floor_s = 56 * 3e-6 + 25530472.0 / 3.0e11;
  cr_assert_geq(one.forward_s, floor_s, "batch 1 %.4g s below %.4g", one.forward_s, floor_s);
  serve_result q = step("resnet50", "l4", "int8", 1, 32, 0, 0);
  cr_assert_leq(q.samples_per_s, 242.5e12 / 8.18e9, "%.5g images/s", q.samples_per_s);
  serve_result b = step("resnet50", "l4", "bf16", 1, 32, 0, 0);
  double ratio = q.decode_bytes / b.decode_bytes;
  cr_assert(ratio > 0.49 && ratio < 0.51, "int8 / bf16 bytes %.4f", ratio);
  cr_assert_gt(q.samples_per_s, b.samples_per_s);
}
