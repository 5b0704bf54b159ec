/*
** fam.c -- see fam.h.
*/
#include "fam.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

graph_shape fam_shape(const graph *g, int id) {
  const graph_op *op = graph_get(g, id);
  if (op) return op->out;
  return (graph_shape){.rank = -1};
}

int fam_int_list(jin *j, const cJSON *obj, const char *key, int min_n, int max_n, int64_t min,
                 int64_t max, bool required, int64_t *out, int *n) {
  int before = j->errors;
  const cJSON *arr = jin_get_array(j, obj, key, required);
  if (!arr) return j->errors > before ? -1 : 0;
  int count = cJSON_GetArraySize(arr);
  jin_push_key(j, key, 0);
  if (count < min_n || count > max_n) {
    if (min_n == max_n)
      jin_error(j, 0, "expected %d values, got %d", min_n, count);
    else
      jin_error(j, 0, "expected %d to %d values, got %d", min_n, max_n, count);
    jin_pop(j);
    return -1;
  }
  int i = 0;
  for (const cJSON *v = arr->child; v; v = v->next, i++) {
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max) {
      char got[96];
      jin_describe(v, got, sizeof got);
      jin_push_index(j, i);
      jin_error(j, 0, "expected an integer in [%lld, %lld], got %s", (long long)min, (long long)max,
                got);
      jin_pop(j);
      continue;
    }
    out[i] = (int64_t)d;
  }
  jin_pop(j);
  *n = count;
  return j->errors > before ? -1 : 1;
}

int fam_fill(graph *g, graph_shape s) {
  int c = graph_constant(g, (graph_shape){.dtype = s.dtype, .rank = 0});
  if (s.rank == 0) return c;
  return graph_broadcast(g, c, s, graph_dims_of(0));
}

int fam_const_like(graph *g, int x) {
  graph_shape s = fam_shape(g, x);
  if (s.rank < 0) return -1;
  return fam_fill(g, s);
}

int fam_with_const(graph *g, graph_op_kind k, int x) {
  return graph_binary(g, k, x, fam_const_like(g, x));
}

int fam_mean(graph *g, int x, graph_dims dims) {
  return wl_scale(g, graph_reduce(g, x, dims, GRAPH_RED_ADD));
}

int fam_graph_check(graph *g, jin *j) {
  if (graph_ok(g)) return 0;
  const diag *d = graph_diag(g);
  int n = d ? diag_count(d) : 0;
  /* the graph's messages start "<graph name>: "; the place comes from jin */
  const char *msg = n > 0 ? diag_message(d, n - 1) : "graph construction failed";
  const char *name = graph_name(g);
  size_t ln = strlen(name);
  if (strncmp(msg, name, ln) == 0 && strncmp(msg + ln, ": ", 2) == 0) msg += ln + 2;
  jin_error(j, 0, "%s", msg);
  return -1;
}
