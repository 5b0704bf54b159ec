/*
** model_print.c -- what `tpusim graph` prints: totals by phase, FLOPs per
** token next to the 6N rule of thumb, ops by kind; JSON; Graphviz.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/units.h"
#include "model.h"

typedef struct {
  double flops[GRAPH_PHASE_COUNT + 1]; /* by phase, then the total */
  double by_dtype[GDT_COUNT];
  double bytes_read, bytes_written, transcendentals;
  int ops[GRAPH_PHASE_COUNT];
  int by_kind[GOP_COUNT];
} totals;

/* The parameters one item reads: for a model processing samples (not
** tokens), an embedding table counts only the rows its forward gathers
** look up for one sample, not all its rows. DLRM looks up
** lookups_per_table rows (the pooling factor) of every table per sample
** (Naumov et al. 2019, arXiv:1906.00091, §2.1: "embedding lookups");
** its 24 G parameters are almost all table rows, of which a sample reads
** 26 x 128. Token models keep model.c's figure (the MoE active count,
** which by convention counts the whole token embedding). */
int64_t model_active_per_item(const model *m) {
  if (strcmp(m->info.unit ? m->info.unit : "", "samples") != 0 || !(m->info.per_step >= 1) ||
      m->active_params != m->params)
    return m->active_params;
  double active = (double)m->active_params;
  for (int i = 0, n = graph_count(m->g); i < n; i++) {
    const graph_op *op = graph_get(m->g, i);
    if (op->kind != GOP_GATHER || op->phase != GRAPH_FORWARD || op->n_in < 2) continue;
    const graph_op *table = graph_get(m->g, op->in[0]), *idx = graph_get(m->g, op->in[1]);
    if (table->kind != GOP_PARAMETER || !(table->flags & GRAPH_WEIGHT) || table->out.rank < 1 ||
        table->out.dim[0] < 1)
      continue;
    double elems = (double)graph_elements(&table->out);
    double row = elems / (double)table->out.dim[0];
    double rows_per_item = (double)graph_elements(&idx->out) / m->info.per_step;
    active += rows_per_item * row - elems;
  }
  return active > 0 ? (int64_t)llround(active) : m->active_params;
}

static totals sum(const model *m) {
  totals t = {0};
  for (int p = 0; p < GRAPH_PHASE_COUNT; p++) {
    graph_cost c = graph_total_cost(m->g, p);
    t.flops[p] = graph_cost_flops(&c);
    t.flops[GRAPH_PHASE_COUNT] += t.flops[p];
    for (int d = 0; d < GDT_COUNT; d++) t.by_dtype[d] += c.flops[d];
    t.bytes_read += c.bytes_read;
    t.bytes_written += c.bytes_written;
    t.transcendentals += c.transcendentals;
  }
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    t.ops[op->phase]++;
    t.by_kind[op->kind]++;
  }
  return t;
}

/* Kinds by descending count, then by name: a stable order for output. */
static int kind_order(const totals *t, int *order) {
  int n = 0;
  for (int k = 0; k < GOP_COUNT; k++)
    if (t->by_kind[k]) order[n++] = k;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0; j--) {
      int a = order[j - 1], b = order[j];
      if (t->by_kind[a] > t->by_kind[b] ||
          (t->by_kind[a] == t->by_kind[b] && strcmp(graph_op_name(a), graph_op_name(b)) < 0))
        break;
      order[j - 1] = b;
      order[j] = a;
    }
  return n;
}

static const char *precision_text(const wl_train *t) {
  switch (t->compute) {
  case GDT_BF16: return "bf16";
  case GDT_F16: return "fp16";
  case GDT_F8: return "fp8";
  case GDT_F64: return "fp64";
  default: return "fp32";
  }
}

/* A transformer's layers when they differ or are out of the ordinary:
** dense and MoE FFNs, local and global attention, MLA, MTP modules. Nothing
** for a plain stack, whose summary stays as it was. */
static void print_layers(const model *m, FILE *out) {
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers <= 0 || (d->experts == 0 && d->window == 0 && d->kv_lora_rank == 0 && !d->hybrid &&
                         d->mtp_layers == 0 && d->gdn_every == 0))
    return;
  int64_t moe = 0, local = 0;
  for (int64_t i = 0; i < d->layers; i++) {
    int k = wl_tf_layer_kind(d, i);
    moe += (k & WL_LAYER_MOE) != 0;
    local += (k & WL_LAYER_LOCAL) != 0;
  }
  char a[32];
  fprintf(out, "  layers           %lld", (long long)d->layers);
  if (d->hybrid) { /* one sub-block a layer (wl.h): count each kind */
    int64_t n[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < d->layers; i++) {
      const char *at = strchr(WL_HYBRID_CHARS, d->hybrid[i]);
      if (at && d->hybrid[i]) n[at - WL_HYBRID_CHARS]++;
    }
    fprintf(out, " hybrid: %lld Mamba-2 (%lld heads of %lld, state %lld), %lld attention, %lld MLP;",
            (long long)n[0], (long long)d->mamba_heads, (long long)d->mamba_head_dim,
            (long long)d->ssm_state, (long long)n[1], (long long)n[3]);
    moe = n[2];
    if (d->moe_latent > 0) fprintf(out, " latent MoE (width %lld);", (long long)d->moe_latent);
  }
  if (d->experts > 0) {
    units_si(a, sizeof a, (double)m->expert_params, "");
    if (d->hybrid) fprintf(out, " %lld MoE", (long long)moe);
    else fprintf(out, ": %lld dense, %lld MoE", (long long)(d->layers - moe), (long long)moe);
    fprintf(out, " (%lld experts of %lld, top %lld%s; %s in routed experts)", (long long)d->experts,
            (long long)(d->moe_ffn ? d->moe_ffn : d->ffn_hidden), (long long)d->top_k,
            d->shared_ffn_hidden ? ", with shared experts" : "", a);
  }
  if (d->dsa_topk > 0)
    fprintf(out, "%s sparse attention (the top %lld keys a query, an indexer of %lld x %lld%s)",
            d->experts ? ";" : ":", (long long)d->dsa_topk, (long long)d->dsa_heads,
            (long long)d->dsa_dim, d->dsa_every > 1 ? " every few layers" : "");
  else if (d->window > 0)
    fprintf(out, "%s %lld local (%s %lld), %lld global", d->experts ? ";" : ":", (long long)local,
            d->window_chunked ? "chunks of" : "window", (long long)d->window,
            (long long)(d->layers - local));
  if (d->kv_lora_rank > 0) fprintf(out, "; latent attention (kv rank %lld)", (long long)d->kv_lora_rank);
  if (d->gdn_every > 0) {
    int64_t gdn = 0;
    for (int64_t i = 0; i < d->layers; i++) gdn += (wl_tf_layer_kind(d, i) & WL_LAYER_GDN) != 0;
    fprintf(out, "; %lld Gated DeltaNet (%lld key and %lld value heads of %lld), %lld %sattention",
            (long long)gdn, (long long)d->gdn_k_heads, (long long)d->gdn_v_heads,
            (long long)d->gdn_v_dim, (long long)(d->layers - gdn), d->attn_gate ? "gated " : "");
  }
  if (d->mtp_layers > 0) fprintf(out, "; + %lld MTP module%s", (long long)d->mtp_layers,
                                 d->mtp_layers > 1 ? "s" : "");
  if (d->mtp_depth > d->mtp_layers)
    fprintf(out, " run to depth %lld (repeated)", (long long)d->mtp_depth);
  fprintf(out, "\n");
}

static const char *const OPT_NAMES[] = {"sgd", "momentum", "adam", "adamw"};
static const char *const METHOD_NAMES[] = {"full", "lora", "qlora"};

void model_print_summary(const model *m, FILE *out) {
  totals t = sum(m);
  char a[32], b[32], c[32];
  fprintf(out, "%s  (%s, %s: %s)\n", m->name, m->family, m->format, m->path);
  units_si(a, sizeof a, (double)m->params, "");
  units_si(b, sizeof b, (double)m->trainable_params, "");
  units_si(c, sizeof c, (double)model_active_per_item(m), "");
  const char *item = strcmp(m->info.unit ? m->info.unit : "", "samples") == 0 ? "sample"
                     : strcmp(m->info.unit ? m->info.unit : "", "rows") == 0  ? "row"
                                                                              : "token";
  bool hlo = strcmp(m->format, "hlo") == 0;
  if (hlo) {
    /* the text does not tell weights from inputs and optimizer state */
    fprintf(out, "  entry parameters %s elements (weights, inputs and optimizer state together)\n"
                 "  per step         the compiled step as written (loops counted by trip count)\n",
            a);
  } else {
    fprintf(out, "  parameters       %s  (trainable %s, active per %s %s)\n", a, b, item, c);
    print_layers(m, out);
  }
  units_si(a, sizeof a, m->info.per_step, "");
  if (!hlo) {
  fprintf(out, "  per step         %s %s  (global batch %lld", a, m->info.unit,
          (long long)m->train.global_batch);
  if (m->train.seq_len > 1) fprintf(out, " x seq %lld", (long long)m->train.seq_len);
  fprintf(out, "), %s%s, %s, %s", precision_text(&m->train),
          m->train.master_fp32 ? " with fp32 master weights" : "",
          OPT_NAMES[m->train.optimizer], METHOD_NAMES[m->train.method]);
  if (m->train.method != WL_FULL)
    fprintf(out, " (rank %lld)", (long long)m->train.lora_rank);
  fprintf(out, "\n");
  }
  fprintf(out, "  FLOPs per step   forward %.3g  backward %.3g  optimizer %.3g  total %.3g\n",
          t.flops[GRAPH_FORWARD], t.flops[GRAPH_BACKWARD], t.flops[GRAPH_OPTIMIZER],
          t.flops[GRAPH_PHASE_COUNT]);
  if (m->info.per_step > 0 && !hlo) {
    double per = t.flops[GRAPH_PHASE_COUNT] / m->info.per_step;
    fprintf(out, "  FLOPs per %-6.6s %.3g", strcmp(m->info.unit, "tokens") == 0 ? "token" : "item",
            per);
    if (!m->info.whole_step && m->train.method == WL_FULL)
      fprintf(out, "  (6 x active params = %.3g; the rest is attention and other ops)",
              6.0 * (double)model_active_per_item(m));
    fprintf(out, "\n");
  }
  units_bytes(a, sizeof a, t.bytes_read);
  units_bytes(b, sizeof b, t.bytes_written);
  fprintf(out, "  memory traffic   read %s, written %s (unfused: each op to and from HBM)\n", a, b);
  fprintf(out, "  ops              %d: forward %d, backward %d, optimizer %d\n", graph_count(m->g),
          t.ops[GRAPH_FORWARD], t.ops[GRAPH_BACKWARD], t.ops[GRAPH_OPTIMIZER]);
  int order[GOP_COUNT];
  int n = kind_order(&t, order);
  fprintf(out, "  by kind         ");
  for (int i = 0; i < n; i++)
    fprintf(out, "%s %s %d", i ? "," : "", graph_op_name(order[i]), t.by_kind[order[i]]);
  fprintf(out, "\n");
  if (m->info.requires) {
    fprintf(out, "  requires        ");
    for (int i = 0, n = 0; wl_requirement_names[i]; i++)
      if (m->info.requires & (1u << i)) fprintf(out, "%s %s", n++ ? "," : "", wl_requirement_names[i]);
    fprintf(out, "\n");
  }
}

char *model_summary_json(const model *m) {
  totals t = sum(m);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", m->name);
  cJSON_AddStringToObject(o, "family", m->family);
  cJSON_AddStringToObject(o, "format", m->format);
  cJSON_AddNumberToObject(o, "params", (double)m->params);
  cJSON_AddNumberToObject(o, "trainable_params", (double)m->trainable_params);
  cJSON_AddNumberToObject(o, "active_params", (double)model_active_per_item(m));
  cJSON_AddNumberToObject(o, "expert_params", (double)m->expert_params);
  cJSON_AddNumberToObject(o, "tokens_per_step", m->info.per_step);
  cJSON_AddStringToObject(o, "unit", m->info.unit);
  cJSON_AddNumberToObject(o, "global_batch", (double)m->train.global_batch);
  cJSON_AddNumberToObject(o, "seq_len", (double)m->train.seq_len);
  cJSON_AddStringToObject(o, "precision", precision_text(&m->train));
  cJSON_AddStringToObject(o, "optimizer", OPT_NAMES[m->train.optimizer]);
  cJSON_AddStringToObject(o, "method", METHOD_NAMES[m->train.method]);
  cJSON *f = cJSON_AddObjectToObject(o, "flops_per_step");
  cJSON_AddNumberToObject(f, "forward", t.flops[GRAPH_FORWARD]);
  cJSON_AddNumberToObject(f, "backward", t.flops[GRAPH_BACKWARD]);
  cJSON_AddNumberToObject(f, "optimizer", t.flops[GRAPH_OPTIMIZER]);
  cJSON_AddNumberToObject(f, "total", t.flops[GRAPH_PHASE_COUNT]);
  cJSON_AddNumberToObject(o, "flops_per_token",
                          m->info.per_step > 0 ? t.flops[GRAPH_PHASE_COUNT] / m->info.per_step : 0);
  cJSON *d = cJSON_AddObjectToObject(o, "flops_by_dtype");
  for (int k = 0; k < GDT_COUNT; k++)
    if (t.by_dtype[k] > 0) cJSON_AddNumberToObject(d, graph_dtype_name(k), t.by_dtype[k]);
  cJSON_AddNumberToObject(o, "transcendentals_per_step", t.transcendentals);
  cJSON *b = cJSON_AddObjectToObject(o, "bytes_per_step");
  cJSON_AddNumberToObject(b, "read", t.bytes_read);
  cJSON_AddNumberToObject(b, "written", t.bytes_written);
  cJSON_AddNumberToObject(o, "ops", graph_count(m->g));
  cJSON *k = cJSON_AddObjectToObject(o, "ops_by_kind");
  int order[GOP_COUNT];
  int n = kind_order(&t, order);
  for (int i = 0; i < n; i++) cJSON_AddNumberToObject(k, graph_op_name(order[i]), t.by_kind[order[i]]);
  cJSON *r = cJSON_AddArrayToObject(o, "requires");
  for (int i = 0; wl_requirement_names[i]; i++)
    if (m->info.requires & (1u << i))
      cJSON_AddItemToArray(r, cJSON_CreateString(wl_requirement_names[i]));
  char *s = cJSON_Print(o);
  cJSON_Delete(o);
  return s;
}

void model_print_dot(const model *m, FILE *out) {
  static const char *const COLOR[] = {"lightblue", "lightsalmon", "palegreen"};
  fprintf(out, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n",
          m->name);
  for (int i = 0; i < graph_count(m->g); i++) {
    const graph_op *op = graph_get(m->g, i);
    char s[160];
    graph_shape_str(&op->out, s, sizeof s);
    fprintf(out, "  n%d [label=\"%s\\n%s\\n", i, graph_op_name(op->kind), s);
    for (const char *p = op->name; *p; p++) fputs(*p == '"' ? "\\\"" : (char[]){*p, 0}, out);
    fprintf(out, "\", fillcolor=%s];\n", COLOR[op->phase]);
    for (int k = 0; k < op->n_in; k++) fprintf(out, "  n%d -> n%d;\n", op->in[k], i);
  }
  fprintf(out, "}\n");
}
