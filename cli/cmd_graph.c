/*
** cmd_graph.c -- `tpusim graph MODEL`: the model's parameters, FLOPs and
** ops, as a summary, JSON, or Graphviz dot.
*/
#include "cli_int.h"

#include <stdlib.h>

static const char *const GRAPH_FLAGS[] = {"--dot", "--forward-only", NULL};
static const char *const GRAPH_VALUED[] = {"--seq",      "--gbs",       "--precision", "--set",
                                           "--finetune", "--lora-rank", "--lora-targets", NULL};

static int run_graph(cli_ctx *c) {
  if (c->json && cli_opt(c, "--dot")) return cli_usage_error(c, "%s", "--json and --dot: pick one");
  model *m;
  int rc = cli_load_model(c, &m);
  if (rc != CLI_OK) return rc;
  if (c->json) {
    char *s = model_summary_json(m);
    fprintf(c->out, "%s\n", s);
    free(s);
  } else if (cli_opt(c, "--dot")) {
    model_print_dot(m, c->out);
  } else {
    model_print_summary(m, c->out);
  }
  model_free(m);
  return CLI_OK;
}

const cli_cmd cli_cmd_graph = {"graph",
    "tpusim graph MODEL [--json|--dot] [--seq S] [--gbs G] [--precision bf16|fp16|fp32|fp64|fp8]\n"
    "                   [--forward-only] [--set FIELD=VALUE ...]\n"
    "                   [--finetune full|lora|qlora [--lora-rank R] [--lora-targets LIST]]\n"
    "  MODEL: a model.json, a HuggingFace config.json, an XLA HLO text file, or the name\n"
    "  of a built-in example (gpt3-175b, llama3-8b, ...; see docs/workloads.md)\n"
    "  --set FIELD=VALUE: replace a field of the model file before it is read\n"
    "  (num_hidden_layers=80, train.global_batch=64); repeatable; only fields it has",
    "parameters, FLOPs and ops of one training step", run_graph, NULL, GRAPH_FLAGS,
    GRAPH_VALUED, NULL};
