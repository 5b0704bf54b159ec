/*
** test_workloads.c -- the transformer family, the training step and the
** model loader against published parameter counts, the Megatron FLOP
** formula, hand counts for LoRA, and bad inputs.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <criterion/criterion.h>

#include "../workloads/model.h"
#include "helpers.h"

static model *load(const char *name, int64_t gbs, int64_t seq) {
  diag *d = diag_new();
  model_opts o = {.global_batch = gbs, .seq_len = seq};
  model *m = model_load(name, &o, d);
  if (!m) diag_print(d, stderr);
  cr_assert_not_null(m, "%s failed to load", name);
  diag_free(d);
  return m;
}

static void mkdir_p_out(void) { mkdir("tests/out", 0755); }

static double rel(double got, double want) { return fabs(got - want) / want; }

static double phase_flops(const model *m, int phase) {
  graph_cost c = graph_total_cost(m->g, phase);
  return graph_cost_flops(&c);
}

/* The attention softmax keeps only its 16-bit output for the backward
** (GRAPH_RULE_SOFTMAX, as PyTorch, Megatron and jax.nn.softmax do): no
** backward op reads the forward's exponentials or its f32 quotient, and
** the backward reads the bf16 probabilities. Autodiff through the exp
** would read exp(x) (d exp = dy exp(x)) and fail this. */
Test(workloads, softmax_backward_reads_only_its_output) {
  model *m = load("llama3-8b", 1, 128);
  const graph *g = m->g;
  int rules = 0, read_y = 0;
  for (int i = 0; i < graph_count(g); i++) {
    const graph_op *op = graph_get(g, i);
    if (op->rule == GRAPH_RULE_SOFTMAX && op->layer >= 0) {
      rules++;
      cr_assert_eq(op->out.dtype, GDT_BF16, "%s", op->name);
    }
    if (op->phase != GRAPH_BACKWARD) continue;
    for (int j = 0; j < op->n_in; j++) {
      const graph_op *in = graph_get(g, op->in[j]);
      if (in->phase != GRAPH_FORWARD || in->layer < 0) continue;
      cr_assert(in->kind != GOP_EXP, "%s reads the forward's %s", op->name, in->name);
      cr_assert(!(in->kind == GOP_DIV && in->out.dtype == GDT_F32), "%s reads %s", op->name, in->name);
      read_y += in->rule == GRAPH_RULE_SOFTMAX;
    }
  }
  cr_assert_eq(rules, 32, "one attention softmax per layer: %d", rules);
  cr_assert_geq(read_y, 32, "the backward reads each softmax's output");
  model_free(m);
}

/* Published sizes: Llama 3 model cards (8.03B / 70.6B / 405.8B within
** 0.5%), GPT-3 Table 2.1 (174.6B), BERT-Large 335M (Devlin et al.; within
** 1%: ours adds the MLM head transform), Mixtral 46.7B total / 12.9B active
** (Mistral AI, Jiang et al. 2024). */
Test(workloads, parameter_counts_match_published_figures) {
  static const struct {
    const char *name;
    double params, tol;
  } rows[] = {{"llama3-8b", 8.03e9, 0.005},   {"llama3-70b", 70.6e9, 0.005},
              {"llama3-405b", 405.8e9, 0.005}, {"gpt3-175b", 174.6e9, 0.01},
              {"bert-large", 3.35e8, 0.01},    {"mixtral-8x7b", 46.7e9, 0.005}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    model *m = load(rows[i].name, 1, 128);
    cr_assert(rel((double)m->params, rows[i].params) < rows[i].tol, "%s: %lld params",
              rows[i].name, (long long)m->params);
    model_free(m);
  }
}

/* Exact hand counts. Llama-3-8B: embed and head 2 x 128256 x 4096; per layer
** q,o 4096^2 each, k,v 4096 x 1024 each, MLP 3 x 4096 x 14336, two norms of
** 4096; a final norm. GPT-3 (reference C.7): L(12h^2 + 13h) + Vh + sh + 2h. */
Test(workloads, exact_parameter_counts) {
  model *m = load("llama3-8b", 1, 128);
  int64_t layer = 2 * 4096LL * 4096 + 2 * 4096LL * 1024 + 3 * 4096LL * 14336 + 2 * 4096;
  cr_assert_eq(m->params, 2 * 128256LL * 4096 + 32 * layer + 4096);
  cr_assert_eq(m->params, 8030261248LL);
  model_free(m);
  m = load("gpt3-175b", 1, 128);
  int64_t h = 12288;
  cr_assert_eq(m->params, 96 * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h);
  model_free(m);
}

Test(workloads, mixtral_active_parameters) {
  model *m = load("mixtral-8x7b", 1, 128);
  cr_assert(rel((double)m->active_params, 12.9e9) < 0.005, "%lld", (long long)m->active_params);
  model_free(m);
}

/* Narayanan et al. 2021 (Megatron, arXiv:2104.04473) without recomputation:
** F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)), as Korthikanti et al. 2022
** count model FLOPs. */
/* A DLRM sample reads the dense MLPs and lookups_per_table rows of each
** table, not the tables (Naumov et al. 2019, §2.1). MLPerf DLRM by hand
** (the derivation of test_families.c's dlrm_mlperf_parameter_count):
** bottom 171,392 + top 2,197,505 + 26 tables x 1 lookup x 128 = 2,372,225
** of 24,036,595,969. A pooled toy, 3 lookups a table: bottom 4-16-8
** 4*16+16 + 16*8+8 = 216, top (cat, 8+8+8 inputs) 24*1+1 = 25, tables
** 2 x 3 x 8 = 48: 289 active of 216 + 25 + (100+50) x 8 = 1441. */
Test(workloads, dlrm_active_parameters_per_sample) {
  model *m = load("dlrm", 0, 0);
  cr_assert_eq(m->params, 24036595969LL);
  cr_assert_eq(model_active_per_item(m), 2372225LL);
  model_free(m);
  const char *toy = "{\"name\": \"toy-dlrm\", \"family\": \"dlrm\", \"dense_features\": 4,"
                    " \"tables\": [{\"rows\": 100, \"dim\": 8}, {\"rows\": 50, \"dim\": 8}],"
                    " \"bottom_mlp\": [16, 8], \"top_mlp\": [1], \"lookups_per_table\": 3,"
                    " \"interaction\": \"cat\", \"train\": {\"global_batch\": 2}}";
  mkdir_p_out();
  FILE *f = fopen("tests/out/toy-dlrm.json", "w");
  cr_assert_not_null(f);
  fputs(toy, f);
  fclose(f);
  m = load("tests/out/toy-dlrm.json", 0, 0);
  cr_assert_eq(m->params, 1441);
  cr_assert_eq(model_active_per_item(m), 289);
  model_free(m);
  /* a dense model reads all its parameters: the figure is active_params */
  m = load("llama3-8b", 8, 128);
  cr_assert_eq(model_active_per_item(m), m->active_params);
  model_free(m);
}

Test(workloads, gpt3_training_flops_match_megatron_formula) {
  double B = 4, s = 2048, l = 96, h = 12288, V = 51200;
  model *m = load("gpt3-175b", 4, 2048);
  double want = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  double got = phase_flops(m, GRAPH_FORWARD) + phase_flops(m, GRAPH_BACKWARD);
  cr_assert(rel(got, want) < 0.01, "got %.4g, Megatron %.4g", got, want);
  model_free(m);
}

/* 6 N per token plus non-causal attention, 12 L s (heads x head_dim) per
** token (Kaplan et al. 2020; PaLM App. B). N leaves out the input embedding,
** a lookup with no multiply. */
Test(workloads, dense_flops_are_6n_plus_attention) {
  model *m = load("llama3-8b", 2, 4096);
  double tokens = 2 * 4096.0;
  double n = (double)m->params - 128256.0 * 4096;
  double want = tokens * (6 * n + 12 * 32 * 4096.0 * 4096);
  double got = phase_flops(m, GRAPH_FORWARD) + phase_flops(m, GRAPH_BACKWARD);
  cr_assert(rel(got, want) < 0.02, "got %.4g, 6N + attention %.4g", got, want);
  model_free(m);
}

/* With every operand needing a gradient, each dot costs twice its forward
** multiply-adds backward (dX and dW). */
Test(workloads, backward_dots_cost_twice_forward) {
  model *m = load("gpt3-175b", 1, 256);
  double fwd = 0, bwd = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind != GOP_DOT) continue;
    graph_cost c = graph_op_cost(m->g, i);
    if (op->phase == GRAPH_FORWARD) fwd += graph_cost_flops(&c);
    if (op->phase == GRAPH_BACKWARD) bwd += graph_cost_flops(&c);
  }
  cr_assert(rel(bwd, 2 * fwd) < 1e-9, "backward %.6g vs 2 x forward %.6g", bwd, 2 * fwd);
  model_free(m);
}

/* Mixed-precision Adam keeps an fp32 master copy and two fp32 moments per
** trainable weight: 12 bytes per parameter (Rajbhandari et al. 2020, K = 12). */
Test(workloads, adam_state_is_twelve_bytes_per_param) {
  model *m = load("llama3-8b", 1, 128);
  double state_bytes = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind == GOP_PARAMETER && (op->flags & GRAPH_OPT_STATE))
      state_bytes += graph_bytes(&op->out);
  }
  cr_assert_float_eq(state_bytes, 12.0 * (double)m->params, 1);
  model_free(m);
}

static double totals_flops(const model *m) {
  graph_cost c = graph_total_cost(m->g, -1);
  return graph_cost_flops(&c);
}

Test(workloads, hf_config_gives_the_same_graph_as_model_json) {
  model *a = load("llama3-8b", 2, 1024);
  model *b = load("workloads/examples/llama3-8b-hf-config.json", 2, 1024);
  cr_assert_str_eq(b->format, "hf-config");
  cr_assert_eq(a->params, b->params);
  cr_assert_eq(graph_count(a->g), graph_count(b->g));
  cr_assert_float_eq(totals_flops(a), totals_flops(b), 0);
  model_free(a);
  model_free(b);
}

/* LoRA rank 16 on q, k, v, o of Llama-3-8B: r (in + out) per projection:
** q, o: 16 x 8192; k, v: 16 x (4096 + 1024); 32 layers -> 13,631,488. */
Test(workloads, lora_trains_only_the_adapters) {
  model *m = load("tests/data/models/llama3-8b-lora.json", 1, 256);
  cr_assert_eq(m->trainable_params, 32 * (2 * 16 * 8192LL + 2 * 16 * 5120LL));
  cr_assert_eq(m->trainable_params, 13631488LL);
  cr_assert_eq(m->params, 8030261248LL);
  int grads = 0, states = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->param_of < 0) continue;
    const graph_op *w = graph_get(m->g, op->param_of);
    cr_assert(w->flags & GRAPH_ADAPTER, "%s belongs to frozen %s", op->name, w->name);
    if (op->phase == GRAPH_BACKWARD) grads++;
    if (op->flags & GRAPH_OPT_STATE) states++;
  }
  cr_assert_eq(grads, 32 * 4 * 2);      /* A and B of 4 projections */
  cr_assert_eq(states, 32 * 4 * 2 * 3); /* master, m, v each */
  /* backward multiplies by W^T for the activations but never forms dW:
  ** 4 adapter dots + dX of the frozen weight per projection, so far fewer
  ** backward dots than the 2 per dot of full training */
  model *full = load("llama3-8b", 1, 256);
  double lora_bwd = phase_flops(m, GRAPH_BACKWARD), full_bwd = phase_flops(full, GRAPH_BACKWARD);
  cr_assert(lora_bwd < 0.6 * full_bwd, "lora backward %.3g vs full %.3g", lora_bwd, full_bwd);
  model_free(full);
  model_free(m);
}

/* --finetune on a HuggingFace config (model_opts.finetune, lora_rank,
** lora_targets), which has no train block: Llama 3.1 8B with Megatron's
** linear_qkv at rank 16 trains r (in + out) for q (4096 + 4096), k and v
** (4096 + 1024 each): 294,912 a layer, 9,437,184 in 32; without targets,
** the file default q and v at 16: 6,815,744. The backward loses the
** frozen weights' gradients, 2 x (params - the embedding table, a lookup)
** FLOPs a token, and layer 0's input gradient, and gains the adapters'
** backward, 4 x their parameters (dA, dB and two activation gradients) a
** token. The models the
** simulator derives per chip train the same way. */
Test(workloads, finetune_options_on_a_hf_config) {
  const char *f = "tests/data/hf/llama3.1-8b.json";
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = 256, .finetune = "lora", .lora_rank = 16,
                  .lora_targets = "linear_qkv"};
  model *m = model_load(f, &o, d);
  cr_assert_not_null(m);
  cr_assert_eq(m->trainable_params, 9437184LL);
  cr_assert_eq(m->trainable_params, 32 * 16 * (8192LL + 2 * 5120));
  model_opts q = {.global_batch = 1, .seq_len = 256, .finetune = "lora"};
  model *qv = model_load(f, &q, d);
  cr_assert_eq(qv->trainable_params, 32 * 16 * (8192LL + 5120));
  model *full = load(f, 1, 256);
  cr_assert_eq(full->trainable_params, full->params);
  double tokens = 256, embed = 128256.0 * 4096;
  /* the adapters' backward: dA, dB and the two activation gradients, 4 r (in + out) */
  double adapters_bwd = 4.0 * (double)m->trainable_params * tokens;
  double lost = phase_flops(full, GRAPH_BACKWARD) - phase_flops(m, GRAPH_BACKWARD);
  /* and layer 0's QKV input gradient (h x (4096 + 2 x 1024)): nothing
  ** trainable lies below it once the embedding is frozen */
  double first_dgrad = 2.0 * 4096 * (4096 + 2 * 1024) * tokens;
  double want = 2.0 * ((double)full->params - embed) * tokens - adapters_bwd + first_dgrad;
  cr_assert(fabs(lost / want - 1) < 1e-3, "backward lost %.6g, want %.6g", lost, want);
  model_opts shard = {.global_batch = 1, .seq_len = 256, .shard_tp = 2, .only_layers = 1};
  model *dm = model_derive(m, &shard, d);
  cr_assert_not_null(dm);
  cr_assert_eq(dm->train.method, WL_LORA);
  cr_assert_lt(dm->trainable_params, dm->params / 100);
  model_free(dm);
  model_free(full);
  model_free(qv);
  model_free(m);
  diag_free(d);
}

/* A target the model has no module for is refused with the modules it
** has; a framework's defaults (lenient) skip the ones it lacks, as the
** library matches by name, but not all of them. */
Test(workloads, finetune_target_not_in_the_model_refused) {
  const char *f = "tests/data/hf/llama3.1-8b.json";
  diag *d = diag_new();
  model_opts o = {.global_batch = 1, .seq_len = 64, .finetune = "lora", .lora_targets = "q,wq"};
  cr_assert_null(model_load(f, &o, d));
  char buf[1024] = "";
  FILE *mf = fmemopen(buf, sizeof buf, "w");
  diag_print(d, mf);
  fclose(mf);
  cr_assert(strstr(buf, "LoRA target 'wq'") && strstr(buf, "(q, k, v, o, up, gate, down"), "%s", buf);
  diag_free(d);
  d = diag_new();
  model_opts l = {.global_batch = 1, .seq_len = 64, .finetune = "lora", .lora_targets = "q,wq",
                  .lora_lenient = true};
  model *m = model_load(f, &l, d);
  cr_assert_not_null(m);
  cr_assert_eq(m->trainable_params, 32 * 16 * 8192LL);
  model_free(m);
  model_opts none = {.global_batch = 1, .seq_len = 64, .finetune = "lora", .lora_targets = "wq",
                     .lora_lenient = true};
  cr_assert_null(model_load(f, &none, d));
  diag_free(d);
}

/* QLoRA stores every frozen linear matrix in 4 bits and dequantizes it on use. */
Test(workloads, qlora_stores_linear_weights_in_four_bits) {
  model *m = load("tests/data/models/llama3-8b-qlora.json", 1, 256);
  int64_t s4 = 0, converts_from_s4 = 0;
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind == GOP_PARAMETER && op->out.dtype == GDT_S4) s4 += graph_elements(&op->out);
    if (op->kind == GOP_CONVERT && graph_get(m->g, op->in[0])->out.dtype == GDT_S4)
      converts_from_s4++;
  }
  int64_t linear = 8030261248LL - 128256LL * 4096 - 65 * 4096LL; /* all but embedding and norms */
  cr_assert_eq(s4, linear);
  cr_assert_eq(converts_from_s4, 32 * 7 + 1); /* q k v o gate up down, and the head */
  cr_assert_eq(m->trainable_params, 13631488LL);
  model_free(m);
}

/* Sizes far beyond today's models are numbers, not overflows. */
Test(workloads, ten_trillion_parameters_count_exactly) {
  model *m = load("tests/data/models/huge-1e13.json", 1, 8);
  int64_t h = 45056;
  cr_assert_eq(m->params, 400 * (12 * h * h + 13 * h) + 65536 * h + 2048 * h + 2 * h);
  cr_assert_gt(m->params, 9.7e12);
  model_free(m);
}

static const char *load_error(const char *path) {
  static char msg[1024];
  diag *d = diag_new();
  model *m = model_load(path, NULL, d);
  cr_assert_null(m, "%s loaded", path);
  cr_assert_geq(diag_count(d), 1);
  snprintf(msg, sizeof msg, "%s", diag_message(d, 0));
  diag_free(d);
  return msg;
}

Test(workloads_bad_input, each_names_the_place) {
  static const struct {
    const char *path, *want;
  } rows[] = {
      {"tests/data/models/bad-negative.json",
       "bad-negative.json:3:26: hidden: expected an integer in [1, 16777216], got -64"},
      {"tests/data/models/bad-typo.json",
       "bad-typo.json:4:3: ffn_hiden: unknown field (did you mean 'ffn_hidden'?)"},
      {"tests/data/models/bad-missing.json", "bad-missing.json:1:1: missing field 'layers'"},
      {"tests/data/models/bad-heads.json", "heads 6 is not a multiple of kv_heads 4"},
      {"tests/data/models/bad-family.json",
       "bad-family.json:1:28: family: unknown family \"transformr\""},
      {"tests/data/no-such-model", "no-such-model: no such file, and no example of that name"},
      {"tests/data/bad-syntax.json", "bad-syntax.json:4:"},
      {"hw_models/tpu-v5p.json", "neither a model.json (no \"family\") nor a HuggingFace"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const char *msg = load_error(rows[i].path);
    cr_assert(strstr(msg, rows[i].want), "%s: got: %s", rows[i].path, msg);
  }
}

/* Past the JSON parser's nesting limit (cJSON's 1000), the message names
** the container, its line:col, the limit and the path down to it, not just
** "invalid JSON syntax". */
Test(workloads_bad_input, json_nested_too_deep_names_place_limit_and_path) {
  const char *head = "{\"family\": \"graph\", \"ops\": ";
  size_t hl = strlen(head);
  char *text = malloc(hl + 2 * 1000 + 3);
  memcpy(text, head, hl);
  memset(text + hl, '[', 1000);
  memset(text + hl + 1000, ']', 1000);
  strcpy(text + hl + 2000, "}\n");
  const char *path = th_write_temp("deep.json", text);
  char want[256];
  /* the 1001st container (the outer object is the 1st) is the 1000th '[' */
  snprintf(want, sizeof want, "%s:1:%zu: ops[0][0][0]", path, hl + 1000);
  const char *msg = load_error(path);
  cr_assert_eq(strncmp(msg, want, strlen(want)), 0, "got \"%s\", want \"%s...\"", msg, want);
  cr_assert(strstr(msg, "]...[0][0][0][0][0][0][0][0]: this array is nested 1001 levels deep"), "%s", msg);
  cr_assert(strstr(msg, "past the JSON parser's limit of 1000"), "%s", msg);
  free(text);
}

/* ---- limits (docs/limits.md) ---- */

/* Before the limits, 100,000 layers built ~64M ops until the kernel killed
** the process at 18.9 GB with no message. Now refused on reading, at the
** field, with the limit and the reason. */
Test(workloads_limits, hundred_thousand_layers_refused_at_once) {
  clock_t t0 = clock();
  const char *msg = load_error("tests/data/models/bad-layers-100000.json");
  double took = (double)(clock() - t0) / CLOCKS_PER_SEC;
  cr_assert(strstr(msg, "bad-layers-100000.json:4:13: layers: 100000 is past tpusim's limit of "
                        "1024: published models have at most 126 layers"),
            "%s", msg);
  cr_assert_lt(took, 0.5, "refusing took %.3f s of CPU", took);
}

/* Every limit at once builds (655,559 ops, ~0.4 GB), far under the graph's
** own cap. */
Test(workloads_limits, a_model_at_every_limit_builds) {
  model *m = load("tests/data/models/limit-max.json", 0, 0);
  cr_assert_eq(graph_count(m->g), 655559);
  cr_assert_lt(graph_count(m->g), GRAPH_MAX_OPS / 6);
  model_free(m);
}

/* One past each limit is refused, naming the field and the limit. */
Test(workloads_limits, one_past_each_limit_is_refused) {
  static const struct {
    const char *from, *to, *says;
  } rows[] = {
      {"\"layers\": 1024", "\"layers\": 1025", "layers: 1025 is past tpusim's limit of 1024"},
      {"\"hidden\": 131072", "\"hidden\": 131073", "hidden: 131073 is past tpusim's limit of 131072"},
      {"\"ffn_hidden\": 524288", "\"ffn_hidden\": 524289",
       "ffn_hidden: 524289 is past tpusim's limit of 524288"},
      {"\"vocab\": 2097152", "\"vocab\": 2097153", "vocab: 2097153 is past tpusim's limit of 2097152"},
      {"\"experts\": 4096", "\"experts\": 4097",
       "moe.experts: 4097 is past tpusim's limit of 4096"},
      {"\"seq_len\": 16777216", "\"seq_len\": 16777217",
       "seq_len: 16777217 is past tpusim's limit of 16777216 tokens"},
  };
  size_t len;
  char *base = th_slurp("tests/data/models/limit-max.json", &len);
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char *t = th_replace(base, rows[i].from, rows[i].to);
    const char *msg = load_error(th_write_temp("past-limit.json", t));
    cr_assert(strstr(msg, rows[i].says), "%s: got %s", rows[i].to, msg);
    free(t);
  }
  free(base);
}

/* GPT-2 small through its HF config: HF's GPT2LMHeadModel has 124,439,808
** parameters, which is 12 (12h^2 + 13h) + 50257h + 1024h + 2h at h = 768. */
Test(workloads, hf_gpt2_config_counts_exactly) {
  model *m = load("tests/data/hf/gpt2.json", 1, 128);
  cr_assert_eq(m->params, 124439808LL);
  model_free(m);
}

Test(workloads, hf_mixtral_config_matches_model_json) {
  model *a = load("tests/data/hf/mixtral.json", 1, 256);
  model *b = load("mixtral-8x7b", 1, 256);
  cr_assert_eq(a->params, b->params);
  cr_assert_eq(a->active_params, b->active_params);
  model_free(a);
  model_free(b);
}

Test(workloads, hf_config_missing_field_names_it) {
  const char *msg = load_error("tests/data/hf/bert-missing.json");
  cr_assert(strstr(msg, "bert-missing.json:1:1: missing field 'num_hidden_layers'"), "%s", msg);
}

/* model_derive starts from what the file says, whatever the first load was
** given: a model.json and an HF config loaded with --seq 1024 and --gbs 4
** derive, with no options, the file's own sequence and batch -- the same
** as a load with no options -- and a one-layer tp-2 shard has the layer's
** parameters split (issue 14: the model is parsed once). */
Test(workloads, derive_starts_from_the_file) {
  static const char *const names[] = {"llama3-8b", "llama3-8b-hf-config"};
  for (int i = 0; i < 2; i++) {
    model *given = load(names[i], 4, 1024), *plain = load(names[i], 0, 0);
    diag *d = diag_new();
    model_opts none = {0};
    model *again = model_derive(given, &none, d);
    cr_assert_not_null(again, "%s", names[i]);
    cr_assert_eq(again->train.seq_len, plain->train.seq_len, "%s", names[i]);
    cr_assert_eq(again->train.global_batch, plain->train.global_batch, "%s", names[i]);
    cr_assert_eq(again->params, plain->params, "%s", names[i]);
    cr_assert_eq(graph_count(again->g), graph_count(plain->g), "%s", names[i]);
    model_opts shard = {.seq_len = 1024, .global_batch = 1, .only_layers = 2, .shard_tp = 2};
    model_opts one = shard;
    one.only_layers = 1;
    model *two = model_derive(given, &shard, d), *single = model_derive(given, &one, d);
    cr_assert(two && single, "%s", names[i]);
    const wl_tf_dims *t = &plain->info.tf;
    /* a layer's attention and MLP weights, split over tp 2 (no biases here) */
    int64_t q = t->heads * t->head_dim, kv = t->kv_heads * t->head_dim;
    int64_t layer = (t->hidden * (q + 2 * kv) + q * t->hidden + 3 * t->hidden * t->ffn_hidden) / 2;
    cr_assert_eq(two->params - single->params, layer + t->hidden * 2, "%s: %lld", names[i],
                 (long long)(two->params - single->params));
    model_free(two);
    model_free(single);
    model_free(again);
    model_free(given);
    model_free(plain);
    diag_free(d);
  }
}
