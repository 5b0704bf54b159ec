/*
** model_flags.c -- the flags of simulate, plan, graph, lower and plot that
** mean something for some kinds of model only. A flag given for a model it does not act on
** used to be taken and dropped (a recompute policy for an MLP, a batch for
** an HLO module that fixes its own): the step came out as without it, and
** nothing said so. Each is refused here, by name, once the model is read.
*/
#include "cli_int.h"

#include <string.h>

#include "../base/strutil.h"

/* The kinds of model, by how tpusim builds their step. */
enum {
  FOR_TF = 1,  /* transformer layers: the per-layer step model (sim/step.c) */
  FOR_DP = 2,  /* a replicated model trained data-parallel, simulated whole (sim/stepwhole.c) */
  FOR_ONE = 4, /* a family that writes its whole step on one chip (gbdt) */
  FOR_HLO = 8, /* an imported HLO module: one device's compiled program */
};

static const struct {
  const char *flag;
  unsigned kinds;
  const char *does; /* what the flag acts on, as "--flag DOES" */
} FLAGS[] = {
    {"--seq", FOR_TF, "sets a transformer's tokens per sequence"},
    {"--recompute", FOR_TF, "recomputes a transformer's layers in the backward"},
    {"--attention", FOR_TF, "chooses how a transformer's attention keeps its scores"},
    {"--attention-kernel", FOR_TF, "chooses a transformer's attention kernel"},
    {"--offload", FOR_TF, "moves a transformer's activations or optimizer state to the host"},
    {"--cp", FOR_TF, "splits a transformer's sequence (context parallelism)"},
    {"--cp-comm", FOR_TF, "chooses how context parallelism exchanges keys and values"},
    {"--sp", FOR_TF, "splits a transformer's element-wise work over its tensor-parallel group"},
    {"--pp-layers", FOR_TF, "places a transformer's layers on pipeline stages"},
    {"--pp-layout", FOR_TF, "places a transformer's layers on pipeline stages"},
    {"--pp-schedule", FOR_TF, "orders a transformer's pipeline"},
    {"--pp-split-embedding", FOR_TF, "counts the embedding as a pipeline stage's layer"},
    {"--pp-split-loss", FOR_TF, "counts the loss as a pipeline stage's layer"},
    {"--hsdp", FOR_TF, "groups a transformer's FSDP sharding"},
    {"--vocab-tiling", FOR_TF, "tiles a transformer's logits and loss"},
    {"--defer-embedding-wgrad-compute", FOR_TF, "defers a transformer's output-layer weight gradients"},
    {"--wgrad-deferral-limit", FOR_TF, "defers a transformer's output-layer weight gradients"},
    {"--fp8-dot-product-attention", FOR_TF, "runs a transformer's attention core in fp8"},
    {"--full", FOR_TF, "runs a transformer's data-parallel rings at once on the whole network"},
    {"--weight-dtype", FOR_TF | FOR_DP, "sets the dtype weights and optimizer state are kept in"},
    {"--zero", FOR_TF | FOR_DP, "shards optimizer state, gradients or weights over data-parallel chips"},
    {"--fsdp", FOR_TF | FOR_DP, "shards the weights over data-parallel chips"},
    {"--mbs", FOR_TF | FOR_DP, "sets the micro-batch"},
    {"--gbs", FOR_TF | FOR_DP, "sets the global batch"},
    {"--grad-sync", FOR_TF | FOR_DP, "times the gradient all-reduce against the backward"},
    {"--framework", FOR_TF | FOR_DP, "chooses a training stack's features"},
    {"--slices", FOR_TF | FOR_DP, "splits the data-parallel chips over TPU slices"},
    {"--reduction-server", FOR_TF | FOR_DP, "reduces the data-parallel gradients on CPU hosts"},
    {"--input", FOR_TF | FOR_DP, "shapes the host input pipeline"},
    {"--storage", FOR_TF | FOR_DP, "shapes the host input pipeline"},
    {"--prefetch", FOR_TF | FOR_DP, "shapes the host input pipeline"},
    {"--input-host", FOR_TF | FOR_DP, "shapes the host input pipeline"},
    {"--precision", FOR_TF | FOR_DP | FOR_ONE, "sets the compute precision"},
};

int cli_model_flags(cli_ctx *c, const model *m) {
  bool hlo = strcmp(m->format, "hlo") == 0;
  unsigned kind = hlo ? FOR_HLO : m->info.tf.layers > 0 ? FOR_TF : m->info.whole_step ? FOR_ONE : FOR_DP;
  for (size_t i = 0; i < sizeof FLAGS / sizeof *FLAGS; i++) {
    if (!cli_opt(c, FLAGS[i].flag) || (FLAGS[i].kinds & kind)) continue;
    char what[192];
    if (hlo)
      snprintf(what, sizeof what, "%s is an imported HLO module, whose compiled program fixes its "
                                  "own batch, sharding, precision and schedule", m->name);
    else if (kind == FOR_ONE)
      snprintf(what, sizeof what, "%s has no transformer layers: %s %s model, whose step tpusim "
                                  "writes whole on one chip", m->name, str_article(m->family), m->family);
    else
      snprintf(what, sizeof what, "%s has no transformer layers: %s %s model, trained "
                                  "data-parallel and simulated as a whole step", m->name,
               str_article(m->family), m->family);
    fprintf(c->err, "tpusim %s: %s %s; %s (leave the flag out)\n", c->cmd, FLAGS[i].flag,
            FLAGS[i].does, what);
    return CLI_BAD_INPUT;
  }
  return CLI_OK;
}
