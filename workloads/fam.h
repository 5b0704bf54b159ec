/*
** fam.h -- small helpers shared by the non-transformer family builders
** (cnn.c, mlp.c, dlrm.c, gbdt.c, oplist.c): reading integer lists with
** positions, copying shapes safely, scalar constants, and turning a graph
** builder error into a located model.json error. Nothing here is part of
** the wl_ builder kit; families that need more add it to their own file.
*/
#ifndef TPUSIM_FAM_H
#define TPUSIM_FAM_H

#include <stdbool.h>
#include <stdint.h>

#include "wl.h"

/* The most values fam_int_list reads from one array (layer widths, tables). */
#define FAM_MAX_LIST 4096

/* A copy of op id's shape (the op array may move as ops are added), or a
** shape of rank -1 when id is -1 or invalid. */
graph_shape fam_shape(const graph *g, int id);

/* Reads obj[key], an array of between min_n and max_n integers each in
** [min, max], into out (which has room for max_n). Returns 1 when read, 0
** when absent and not required, -1 after reporting (each bad element is
** reported at its own position). */
int fam_int_list(jin *j, const cJSON *obj, const char *key, int min_n, int max_n, int64_t min,
                 int64_t max, bool required, int64_t *out, int *n);

/* A scalar constant broadcast to shape s (rank 0: the scalar itself). */
int fam_fill(graph *g, graph_shape s);
/* A scalar constant of x's dtype broadcast to x's shape. */
int fam_const_like(graph *g, int x);
/* x + c and max(x, c)-style helpers: one elementwise op with a constant. */
int fam_with_const(graph *g, graph_op_kind k, int x);
/* Reduces every dimension listed in dims (ADD) and multiplies by 1/N. */
int fam_mean(graph *g, int x, graph_dims dims);

/* When the graph has failed, reports its last message at the current jin
** path and returns -1; returns 0 when the graph is fine. Called once per
** layer or op so a shape error points at the place in model.json. */
int fam_graph_check(graph *g, jin *j);

#endif
