/*
** hlo_custom.c -- ops priced by hand: custom ops shaped like the written
** result with a declared cost, and the custom-calls (cuDNN flash attention)
** whose cost is read from their backend config (docs/hlo.md).
**
** Separate from the array handlers (hlo_ops.c): these costs come from
** formulas, not from the graph builder's shape rules.
*/
#include "hlo_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static double shape_bytes(const hlo_shape *s) {
  if (s->n < 0) return graph_bytes(&s->arr);
  double t = 0;
  for (int i = 0; i < s->n; i++)
    t += shape_bytes(&s->el[i]);
  return t;
}

static hlo_val *custom_leaves(hlo_ctx *x, const char *name, const hlo_shape *s, const int *ins,
                              int n_in, const double cost[3], int *first) {
  if (s->n < 0) {
    int id = *first < 0 ? graph_custom(x->b->g, name, s->arr, ins, n_in, cost[0], cost[1], cost[2])
                        : graph_custom(x->b->g, name, s->arr, first, 1, 0, 0, 0);
    if (*first < 0) *first = id;
    return hlo_val_new(x->b, id);
  }
  hlo_val *t = hlo_val_tuple(x->b, s->n);
  if (!t) return hlo_oom(x);
  for (int i = 0; i < s->n; i++)
    if (!(t->el[i] = custom_leaves(x, name, &s->el[i], ins, n_in, cost, first))) return NULL;
  return t;
}

/* An op the graph has no kind for, as GOP_CUSTOM ops shaped like the
** written result: the first array output carries the declared cost and reads
** every operand; further outputs are free ops that depend on it. Bytes, when
** the op moves data, are all operands read plus all outputs written (the
** graph splits them as written = the first output, read = the rest). */
hlo_val *hlo_custom_cost(hlo_ctx *x, const char *name, double flops, double trans,
                         bool moves_data) {
  int n_in = 0;
  for (int i = 0; i < x->n; i++)
    n_in = hlo_flatten(x->ops[i], NULL, n_in);
  int *ins = hlo_arena_alloc(&x->b->ar, (size_t)(n_in + 1) * sizeof *ins);
  if (!ins) return hlo_oom(x);
  double bytes = shape_bytes(&x->in->shape);
  for (int i = 0, k = 0; i < x->n; i++)
    k = hlo_flatten(x->ops[i], ins, k);
  for (int i = 0; i < n_in; i++)
    bytes += graph_bytes(hlo_leaf_shape(x, ins[i]));
  double cost[3] = {flops, trans, moves_data ? bytes : 0};
  int first = -1;
  return custom_leaves(x, name, &x->in->shape, ins, n_in, cost, &first);
}

hlo_val *hlo_custom_out(hlo_ctx *x, const char *name, double flops, double trans) {
  return hlo_custom_cost(x, name, flops, trans, true);
}
/* ---- custom calls ---- */

/* cuDNN flash attention, the targets XLA's GPU backend and JAX's
** jax.nn.dot_product_attention(implementation="cudnn") emit. */
static const struct {
  const char *target;
  bool backward;
} FMHA[] = {
    {"__cudnn$fmhaSoftmax", false},
    {"__cudnn$fmhaSoftmaxDropout", false},
    {"__cudnn$fmhaScaleBiasSoftmax", false},
    {"__cudnn$fmhaScaleBiasSoftmaxDropout", false},
    {"__cudnn$fmhaScaleMaskSoftmax", false},
    {"__cudnn$fmhaScaleMaskSoftmaxDropout", false},
    {"__cudnn$fmhaScaleBiasMaskSoftmax", false},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxDropout", false},
    {"__cudnn$fmhaSoftmaxF8", false},
    {"__cudnn$fmhaSoftmaxBackward", true},
    {"__cudnn$fmhaSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleBiasSoftmaxBackward", true},
    {"__cudnn$fmhaScaleBiasSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleMaskSoftmaxBackward", true},
    {"__cudnn$fmhaScaleMaskSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxBackward", true},
    {"__cudnn$fmhaScaleBiasMaskSoftmaxDropoutBackward", true},
    {"__cudnn$fmhaSoftmaxBackwardF8", true},
};

/* A JSON list of dimension numbers (["0","2"] or [0,2]) into d. */
static bool json_dims(const cJSON *a, graph_dims *d) {
  d->n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    long long k = cJSON_IsString(e)   ? strtoll(e->valuestring, NULL, 10)
                  : cJSON_IsNumber(e) ? (long long)e->valuedouble
                                      : -1;
    if (k < 0 || k >= GRAPH_MAX_RANK || d->n == GRAPH_MAX_RANK) return false;
    d->d[d->n++] = (int8_t)k;
  }
  return cJSON_IsArray(a);
}

static bool dims_has(const graph_dims *d, int i) {
  for (int k = 0; k < d->n; k++)
    if (d->d[k] == i) return true;
  return false;
}

/* Q [b, s_q, h, d] and K [b, s_kv, h_kv, d] by default (the BTNH layout
** JAX uses), else as bmm1_dot_dimension_numbers says. Forward: two GEMMs
** (QK^T, PV) of 2*b*h*s_q*s_kv*d each = 4bhsSd; backward 2.5x that (five
** GEMMs: S recomputed, dV, dP, dQ, dK), FlashAttention's count. A causal
** mask halves both: the kernels skip the masked tiles. One exp per score. */
static hlo_val *h_fmha(hlo_ctx *x, const char *target, bool backward) {
  int q = hlo_leaf(x, 0), k = q < 0 ? -1 : hlo_leaf(x, 1);
  if (k < 0) return NULL;
  const graph_shape *sq = hlo_leaf_shape(x, q), *sk = hlo_leaf_shape(x, k);
  graph_dims qb = {2, {0, 2}}, qc = {1, {3}}, kb = qb, kc = qc;
  cJSON *j = hlo_backend_json(x->in);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "cudnn_fmha_backend_config");
  const cJSON *dn = cJSON_GetObjectItemCaseSensitive(cfg, "bmm1_dot_dimension_numbers");
  const cJSON *mask = cJSON_GetObjectItemCaseSensitive(cfg, "mask_type");
  bool causal = cJSON_IsString(mask) && strstr(mask->valuestring, "CAUSAL");
  bool ok =
      !dn || (json_dims(cJSON_GetObjectItemCaseSensitive(dn, "lhs_batch_dimensions"), &qb) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "lhs_contracting_dimensions"), &qc) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "rhs_batch_dimensions"), &kb) &&
              json_dims(cJSON_GetObjectItemCaseSensitive(dn, "rhs_contracting_dimensions"), &kc));
  cJSON_Delete(j);
  if (!ok) return hlo_berr(x, "backend_config bmm1_dot_dimension_numbers is malformed");
  double bh = 1, d = 1, s_q = 1, s_kv = 1;
  for (int i = 0; i < sq->rank; i++) {
    if (dims_has(&qb, i))
      bh *= (double)sq->dim[i];
    else if (dims_has(&qc, i))
      d *= (double)sq->dim[i];
    else
      s_q *= (double)sq->dim[i];
  }
  for (int i = 0; i < sk->rank; i++)
    if (!dims_has(&kb, i) && !dims_has(&kc, i)) s_kv *= (double)sk->dim[i];
  for (int i = 0; i < qb.n + qc.n; i++)
    if ((i < qb.n ? qb.d[i] : qc.d[i - qb.n]) >= sq->rank)
      return hlo_berr(x, "%s: the query operand has rank %d, too small for its dimension numbers",
                  target, sq->rank);
  double scores = bh * s_q * s_kv * (causal ? 0.5 : 1.0);
  double flops = 4.0 * scores * d * (backward ? 2.5 : 1.0);
  return hlo_custom_out(x, target, flops, scores);
}

hlo_val *hlo_h_custom_call(hlo_ctx *x) {
  const hlo_attr *a = hlo_attr_get(x->in, "custom_call_target");
  if (!a) return hlo_berr(x, "the custom_call_target= attribute is missing");
  hlo_str t = hlo_unquote(a->val);
  for (size_t i = 0; i < sizeof FMHA / sizeof *FMHA; i++)
    if (str_is(t, FMHA[i].target)) return h_fmha(x, FMHA[i].target, FMHA[i].backward);
  return hlo_berr(x,
              "custom-call target \"%.*s\" is not supported: its cost is unknown (supported: "
              "the cuDNN flash-attention targets __cudnn$fmha*, see docs/hlo.md)",
              t.n, t.s);
}

