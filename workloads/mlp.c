/*
** mlp.c -- a plain multilayer perceptron: the "mlp" family.
**
** inputs -> hidden[0] -> ... -> hidden[n-1] -> outputs, every layer a
** wl_linear with bias (LoRA module "fc"), the activation after each hidden
** layer and none after the output. The loss is softmax cross-entropy
** against integer class labels or the mean squared error against
** [batch, outputs] targets. Fields: docs/families.md.
*/
#include <stdio.h>

#include "fam.h"
#include "families.h"

static const char *const MLP_KEYS[] = {"inputs", "hidden", "outputs", "activation", "loss", NULL};
static const char *const ACTIVATIONS[] = {"relu", "gelu", "tanh", NULL};
static const graph_op_kind ACT_OPS[] = {GOP_RELU, GOP_GELU, GOP_TANH};
static const char *const LOSSES[] = {"cross_entropy", "mse", NULL};

int wl_mlp(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info) {
  int before = j->errors;
  jin_only(j, spec, MLP_KEYS, wl_common_keys);
  int64_t inputs = 0, outputs = 0;
  jin_get_int(j, spec, "inputs", 1, 1 << 24, true, &inputs);
  jin_get_int(j, spec, "outputs", 1, 1 << 24, true, &outputs);
  int64_t hidden[FAM_MAX_LIST];
  int n_hidden = 0;
  fam_int_list(j, spec, "hidden", 0, FAM_MAX_LIST, 1, 1 << 24, false, hidden, &n_hidden);
  int act = 0, loss_kind = 0;
  jin_get_enum(j, spec, "activation", ACTIVATIONS, false, &act);
  jin_get_enum(j, spec, "loss", LOSSES, false, &loss_kind);
  if (j->errors > before) return -1;

  int64_t b = t->global_batch;
  int x = wl_input(g, "inputs", GRAPH_SHAPE(t->compute, b, inputs));
  int target = loss_kind == 0 ? wl_input(g, "labels", GRAPH_SHAPE(GDT_S32, b))
                              : wl_input(g, "targets", GRAPH_SHAPE(t->compute, b, outputs));
  char name[32];
  for (int i = 0; i < n_hidden; i++) {
    snprintf(name, sizeof name, "fc%d", i);
    graph_set_layer(g, i);
    graph_set_scope(g, name);
    x = graph_unary(g, ACT_OPS[act], wl_linear(g, t, x, name, "fc", hidden[i], true));
  }
  graph_set_layer(g, -1);
  graph_set_scope(g, "out");
  int y = wl_linear(g, t, x, "out", "fc", outputs, true);
  graph_set_scope(g, "loss");
  int loss = loss_kind == 0 ? wl_cross_entropy(g, y, target) : wl_mse(g, y, target);
  graph_set_scope(g, "");
  if (fam_graph_check(g, j) < 0) return -1;
  info->per_step = (double)b;
  info->unit = "samples";
  return loss;
}
