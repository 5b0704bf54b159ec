/*
** graph_int.h -- private to the graph (workloads/graph*.c): the op-kind
** table, the graph object's layout and the builder base its files share. The
** rest of the program includes graph.h only.
*/
#ifndef TPUSIM_GRAPH_INT_H
#define TPUSIM_GRAPH_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/diag.h"
#include "graph.h"

typedef enum { C_SRC, C_UNARY, C_BINARY, C_TERNARY, C_DOT, C_CONV, C_REDUCE, C_MOVE, C_COLL, C_CUSTOM } op_class;

struct graph {
  char *name;
  graph_op *ops;
  int n, cap;
  diag *dg;
  bool failed;
  graph_phase phase;
  char scope[128];
  int layer;
  graph_module module;
  int64_t count;
  int composite, composites; /* the library kernel ops now join (-1: none); how many begun */
  bool share_params;         /* graph_parameter reuses a parameter of the same name */
};

/* A row of the op-kind table (graph.c). */
typedef struct {
  const char *name;
  op_class cls;
  double flops, trans;
} graph_op_info;

extern const graph_op_info GRAPH_OPS[GOP_COUNT];

/* graph.c */

char *graph_dupstr(const char *s);
bool graph_shape_valid(graph *g, const char *what, const graph_shape *s);
int graph_add(graph *g, graph_op_kind k, graph_shape out, const int *ins, int n_in);
bool graph_inputs_ok(graph *g, const int *ins, int n);
const graph_shape *graph_shape_at(const graph *g, int id);
void graph_mismatch(graph *g, graph_op_kind k, const char *what, const graph_shape *a,
                    const graph_shape *b);

#endif
