/*
** train.h -- from a forward graph to one full training step: reverse-mode
** autodiff (a rule per op kind) and the optimizer update.
**
** Gradients flow only where they are needed: an op gets a gradient when it
** depends on a trainable parameter, so frozen weights (LoRA/QLoRA bases)
** get no weight-gradient ops and no optimizer state, and activations below
** the first trainable parameter get no input gradient, as in PyTorch and JAX.
*/
#ifndef TPUSIM_TRAIN_H
#define TPUSIM_TRAIN_H

#include "graph.h"
#include "wl.h"

/* Appends the backward pass of scalar `loss` (phase GRAPH_BACKWARD) and the
** optimizer update of every trainable parameter (GRAPH_OPTIMIZER). Returns
** 0, or -1 with the reason in the graph's diag (e.g. an op with no rule). */
int train_build(graph *g, int loss, const wl_train *t);

/* After train_build: the op holding the summed gradient of each trainable
** weight has param_of = that weight (phase GRAPH_BACKWARD), and so do the
** optimizer states (flag GRAPH_OPT_STATE) and the update of the weight. */

#endif
