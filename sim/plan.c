/*
** plan.c -- see plan.h.
*/
#include "plan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../hw_models/hw.h"
#include "framework.h"
#include "net.h"
#include "optime.h"

const char *const plan_schedule_names[] = {"gpipe", "1f1b", "interleaved", NULL};
const char *const plan_offload_names[] = {"none", "activations", "optimizer", NULL};
const char *const plan_recompute_names[] = {"none", "selective", "full", NULL};
const char *const plan_recompute_module_names[] = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                   "mlp", "moe", "shared_experts", NULL};

const char *const plan_remat_names[] = {"decoder_layer_input", "query_proj", "key_proj",
                                        "value_proj", "context", "out_proj", "mlpwi_0",
                                        "mlpwi_1", "mlpwo", NULL};

/* custom:NAME=device|offload|remat,... after "custom:" at s */
static int remat_parse(const char *s, const char *list, plan *p, char *err, size_t errn) {
  static const char *const where[] = {"device", "offload", "remat", NULL};
  /* MaxText's other spellings: the fused q/k/v projection; 'mlpwi', an
  ** ungated MLP's one input projection or a gated one's fused pair
  ** (MaxText layers/linears.py MlpBlock: fused_mlp names the fused
  ** kernel's output mlpwi), so both halves (an ungated model has no
  ** second) */
  static const char *const alias[] = {"qkv_proj", "mlpwi"};
  const unsigned alias_bits[] = {PLAN_RN_QUERY | PLAN_RN_KEY | PLAN_RN_VALUE,
                                 PLAN_RN_MLPWI_0 | PLAN_RN_MLPWI_1};
  unsigned dev = 0, off = 0;
  for (const char *q = list;;) {
    size_t n = strcspn(q, ",+");
    char item[48], name[48];
    snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), q);
    char *eq = strchr(item, '=');
    if (!item[0] || !eq)
      return str_errf(err, errn, "'%.64s': expected NAME=device|offload|remat after custom: "
                      "(custom:decoder_layer_input=offload,key_proj=device), found '%s'", s, item);
    snprintf(name, sizeof name, "%.*s", (int)(eq - item), item);
    unsigned bits = 0;
    for (int j = 0; plan_remat_names[j]; j++)
      if (strcmp(name, plan_remat_names[j]) == 0) bits = 1u << j;
    for (int j = 0; j < 2; j++)
      if (strcmp(name, alias[j]) == 0) bits = alias_bits[j];
    if (!bits) {
      const char *near = str_suggest(name, plan_remat_names, 9);
      return str_errf(err, errn, "'%.64s': '%s' is not a tensor MaxText names for remat; expected "
                      "%s (decoder_layer_input, query_proj, key_proj, value_proj, qkv_proj, "
                      "context, out_proj, mlpwi, mlpwi_0, mlpwi_1, mlpwo)", s, name,
                      near ? near : "one of");
    }
    int w = -1;
    for (int j = 0; where[j]; j++)
      if (strcmp(eq + 1, where[j]) == 0) w = j;
    if (w < 0) {
      const char *near = str_suggest(eq + 1, where, 3);
      return str_errf(err, errn, "'%.64s': %s=%s: expected device, offload or remat%s%s", s, name,
                      eq + 1, near ? "; nearest: " : "", near ? near : "");
    }
    dev = w == 0 ? dev | bits : dev & ~bits;
    off = w == 1 ? off | bits : off & ~bits;
    if (!q[n]) break;
    q += n + 1;
  }
  p->recompute = PLAN_RECOMPUTE_FULL;
  p->recompute_modules = 0;
  p->remat_device = dev, p->remat_offload = off;
  return 0;
}

int plan_recompute_parse(const char *s, plan *p, char *err, size_t errn) {
  enum { N_MOD = 7 };
  if (s && strncmp(s, "custom:", 7) == 0) return remat_parse(s, s + 7, p, err, errn);
  if (p) p->remat_device = p->remat_offload = 0;
  const char *colon = s ? strchr(s, ':') : NULL;
  size_t head = colon ? (size_t)(colon - s) : (s ? strlen(s) : 0);
  for (int i = 0; s && plan_recompute_names[i]; i++)
    if (strlen(plan_recompute_names[i]) == head && strncmp(s, plan_recompute_names[i], head) == 0) {
      if (colon && i != PLAN_RECOMPUTE_SELECTIVE)
        return str_errf(err, errn, "'%.64s': only selective takes a list of modules "
                                   "(selective:moe_act,layernorm)", s);
      p->recompute = (plan_recompute)i;
      p->recompute_modules = 0;
      if (!colon) return 0;
      unsigned m = 0;
      for (const char *q = colon + 1;;) {
        size_t n = strcspn(q, ",+");
        char word[32];
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), q);
        int k = -1;
        for (int j = 0; j < N_MOD; j++)
          if (strcmp(word, plan_recompute_module_names[j]) == 0) k = j;
        if (!word[0])
          return str_errf(err, errn, "'%.64s': a module name is missing (a list such as "
                          "selective:moe_act,layernorm)", s);
        if (k < 0) {
          const char *near = str_suggest(word, plan_recompute_module_names, N_MOD);
          return str_errf(err, errn, "'%.64s': '%s' is not a module Megatron-Core recomputes; "
                                     "expected %s (core_attn, moe_act, layernorm, mla_up_proj, "
                                     "mlp, moe, shared_experts)", s, word,
                          near ? near : "one of");
        }
        m |= 1u << k;
        if (!q[n]) break;
        q += n + 1;
      }
      p->recompute_modules = m;
      return 0;
    }
  char word[32];
  snprintf(word, sizeof word, "%.*s", (int)(head < sizeof word ? head : sizeof word - 1), s ? s : "");
  const char *near = str_suggest(word, plan_recompute_names, 3);
  return str_errf(err, errn, "'%.64s': expected none, selective, full, selective:MODULES or "
                  "custom:NAME=device|offload|remat,...%s%s",
                  s ? s : "", near ? "; nearest: " : "", near ? near : "");
}

const char *plan_recompute_label(const plan *p, char *out, size_t n) {
  if (p->recompute == PLAN_RECOMPUTE_FULL && (p->remat_device | p->remat_offload)) {
    size_t at = (size_t)snprintf(out, n, "custom");
    const char *sep = ":";
    for (int j = 0; plan_remat_names[j] && at < n; j++) {
      unsigned b = 1u << j;
      if (!((p->remat_device | p->remat_offload) & b)) continue;
      at += (size_t)snprintf(out + at, n - at, "%s%s=%s", sep, plan_remat_names[j],
                             p->remat_offload & b ? "offload" : "device");
      sep = ",";
    }
    return out;
  }
  size_t at = (size_t)snprintf(out, n, "%s", plan_recompute_names[p->recompute]);
  if (p->recompute != PLAN_RECOMPUTE_SELECTIVE) return out;
  const char *sep = ":";
  for (int j = 0; plan_recompute_module_names[j] && at < n; j++)
    if (p->recompute_modules & (1u << j)) {
      at += (size_t)snprintf(out + at, n - at, "%s%s", sep, plan_recompute_module_names[j]);
      sep = ",";
    }
  return out;
}
const char *const plan_grad_sync_names[] = {"overlap", "after-backward", NULL};
const char *const plan_attention_names[] = {"flash", "scores", NULL};
const char *const plan_attn_kernel_names[] = {"framework", "fa1", "fa2", "cudnn", "best", NULL};
const char *const plan_embeddings_names[] = {"replicated", "sharded", "ps", NULL};
const char *const plan_moe_dispatcher_names[] = {"framework", "alltoall", "flex", NULL};
const char *const plan_cp_comm_names[] = {"framework", "ring", "all-gather", NULL};

void plan_embedding_tables(const graph *g, plan_emb_tables *t) {
  *t = (plan_emb_tables){0};
  int n = g ? graph_count(g) : 0;
  for (int i = 0; i < n; i++) {
    const graph_op *op = graph_get(g, i);
    if (op->kind != GOP_GATHER || op->n_in < 2) continue;
    const graph_op *w = graph_get(g, op->in[0]);
    if (w->kind != GOP_PARAMETER || !(w->flags & GRAPH_WEIGHT)) continue;
    double tb = graph_bytes(&w->out), ob = graph_bytes(&op->out);
    const graph_shape *o = &op->out;
    t->tables++;
    /* [B, D] or [B, L, D]: the L lookups of a sample pool into one vector */
    double L = 1;
    for (int k = 1; k + 1 < o->rank; k++) L *= (double)o->dim[k];
    t->bytes += tb;
    if (tb > t->largest) t->largest = tb;
    t->rows_bytes += ob;
    t->pooled_bytes += L > 0 ? ob / L : ob;
    t->index_bytes += graph_bytes(&graph_get(g, op->in[1])->out);
  }
}

/* --precision: the compute dtypes (workloads' table, in its order), then
** the GEMM recipes, which compute in bf16 (plan.h) */
const char *const plan_precision_names[] = {"bf16", "fp16", "fp32", "fp64", "fp8", "fp8-cs",
                                            "mxfp8", "nvfp4", "int8", "tf32", NULL};
static const plan_gemm PRECISION_GEMM[] = {PLAN_GEMM_NATIVE, PLAN_GEMM_NATIVE, PLAN_GEMM_NATIVE,
                                           PLAN_GEMM_NATIVE, PLAN_GEMM_FP8,    PLAN_GEMM_FP8_CS,
                                           PLAN_GEMM_MXFP8,  PLAN_GEMM_NVFP4,  PLAN_GEMM_INT8,
                                           PLAN_GEMM_TF32};

int plan_precision_parse(const char *s, plan *p) {
  int i = plan_name_index(plan_precision_names, s);
  if (i < 0) return -1;
  p->gemm = PRECISION_GEMM[i];
  p->precision = p->gemm == PLAN_GEMM_TF32 ? GDT_F32 : GDT_BF16;
  if (p->gemm == PLAN_GEMM_NATIVE) wl_precision_parse(s, &p->precision);
  return 0;
}

const char *plan_precision_label(const plan *p) {
  for (int i = 0; plan_precision_names[i]; i++)
    if (PRECISION_GEMM[i] == p->gemm && p->gemm != PLAN_GEMM_NATIVE) return plan_precision_names[i];
  return plan_precision_name(p->precision);
}

int plan_pp_layers_parse(const char *s, int32_t *out, int max, int *n, char *err, size_t errn) {
  *n = 0;
  const char *q = s;
  while (*q) {
    char *end;
    long long v = strtoll(q, &end, 10);
    if (end == q || v < 0 || v > 1 << 20 || (*end && *end != ','))
      return str_errf(err, errn, "--pp-layers '%s': expected decoder layers per stage as "
                                 "non-negative integers A,B,... (at '%s')", s, q);
    if (*n == max)
      return str_errf(err, errn, "--pp-layers: more than %d stages", max);
    out[(*n)++] = (int32_t)v;
    q = *end ? end + 1 : end;
  }
  if (*n == 0) return str_errf(err, errn, "--pp-layers: no stages given");
  return 0;
}

/* A layout's repeats written out into out (room for cap, *len used):
** symbols and '|' from s at *i up to a ')' or the end, commas dropped as
** Megatron-Core's parser drops them (a reader's grouping). The expansion is
** bounded (cap), so "(t*1000)*1000" is refused, not allocated. */
static int layout_expand(const char *s, size_t *i, int depth, char *out, size_t cap, size_t *len,
                         char *err, size_t errn) {
  while (s[*i] && s[*i] != ')') {
    size_t from = *len, at = *i;
    if (s[*i] == '(') {
      if (depth >= 8) return str_errf(err, errn, "--pp-layout '%s': parentheses nested past 8", s);
      ++*i;
      if (layout_expand(s, i, depth + 1, out, cap, len, err, errn) != 0) return -1;
      if (s[*i] != ')')
        return str_errf(err, errn, "--pp-layout '%s': expected ')' at column %zu, found the end", s,
                        *i + 1);
      ++*i;
    } else if (s[*i] == ',') {
      ++*i;
      continue;
    } else if (strchr("EtmL|", s[*i])) {
      if (*len + 1 >= cap) return str_errf(err, errn, "--pp-layout '%s': longer than %zu symbols", s, cap - 1);
      out[(*len)++] = s[(*i)++];
    } else {
      return str_errf(err, errn, "--pp-layout '%s': expected E, t, m, L, '|', ',', '(' or ')' at column "
                                 "%zu, found '%c' (Megatron-Core's pipeline layout)", s, at + 1, s[at]);
    }
    if (s[*i] == '*') {
      char *end;
      long long r = isdigit((unsigned char)s[*i + 1]) ? strtoll(s + *i + 1, &end, 10) : 0;
      if (r < 1 || r > 1 << 20)
        return str_errf(err, errn, "--pp-layout '%s': expected a count from 1 to %d after '*' at "
                                   "column %zu", s, 1 << 20, *i + 1);
      *i = (size_t)(end - s);
      size_t unit = *len - from;
      if (unit * (size_t)(r - 1) >= cap - *len)
        return str_errf(err, errn, "--pp-layout '%s': longer than %zu symbols", s, cap - 1);
      for (long long k = 1; k < r; k++, *len += unit) memcpy(out + *len, out + from, unit);
    }
  }
  return 0;
}

int plan_pp_layout_parse(const char *s, int32_t *out, int max, int *n, int64_t *mtp, char *err,
                         size_t errn) {
  enum { CAP = 1 << 16 };
  char *x = malloc(CAP);
  if (!x) return str_errf(err, errn, "out of memory");
  size_t i = 0, len = 0;
  int rc = layout_expand(s, &i, 0, x, CAP, &len, err, errn);
  if (rc == 0 && s[i] == ')')
    rc = str_errf(err, errn, "--pp-layout '%s': ')' at column %zu closes nothing", s, i + 1);
  *n = 0, *mtp = 0;
  int32_t t = 0;
  int e_at = -1, l_at = -1, m_at = -1;
  for (size_t k = 0; rc == 0 && k <= len; k++) {
    char ch = k < len ? x[k] : '|';
    if (ch == '|') {
      if (*n == max) {
        rc = str_errf(err, errn, "--pp-layout '%.64s': more than %d stages", s, max);
        break;
      }
      out[(*n)++] = t, t = 0;
    } else if (ch == 't') {
      t++;
    } else if (ch == 'm') {
      ++*mtp, m_at = *n;
    } else if (ch == 'E') {
      if (e_at >= 0 || *n > 0 || t > 0)
        rc = str_errf(err, errn, "--pp-layout '%s': E (the embedding) opens the first stage, once", s);
      e_at = *n;
    } else if (ch == 'L') {
      if (l_at >= 0) rc = str_errf(err, errn, "--pp-layout '%s': L (the loss) comes once", s);
      l_at = *n;
    }
  }
  if (rc == 0 && (e_at < 0 || l_at != *n - 1 || (len > 0 && x[len - 1] != 'L')))
    rc = str_errf(err, errn, "--pp-layout '%s': expected E opening the first stage and L closing "
                             "the last (Megatron-Core's layout holds both)", s);
  if (rc == 0 && m_at >= 0 && m_at != *n - 1)
    rc = str_errf(err, errn, "--pp-layout '%s': the m's (multi-token prediction) go in the last "
                             "stage, with L (tpusim runs them with the head)", s);
  free(x);
  return rc;
}

int plan_balance_layers(const plan *p, int64_t layers, int32_t *out, int max) {
  int64_t S = p->pp * (p->vp > 0 ? p->vp : 1), e = p->pp_split_embedding, l = p->pp_split_loss;
  int64_t total = layers + e + l, base = total / S, rem = total % S;
  if (S > max || base < 1 || rem == 0) return -1;
  /* the extra layers in the middle stages: the first holds the embedding,
  ** the last the head and loss */
  int64_t lo = (S - rem) / 2;
  for (int64_t vs = 0; vs < S; vs++) out[vs] = (int32_t)(base + (vs >= lo && vs < lo + rem));
  out[0] -= (int32_t)e;
  out[S - 1] -= (int32_t)l;
  return out[0] < 0 || out[S - 1] < 0 ? -1 : (int)S;
}

int64_t plan_stage_layers(const plan *p, int64_t layers, int64_t vs) {
  int64_t S = p->pp * (p->vp > 0 ? p->vp : 1);
  if (p->pp_layers && p->n_pp_layers == S) return p->pp_layers[vs];
  int64_t e = p->pp_split_embedding, l = p->pp_split_loss;
  int64_t per = (layers + e + l) / S;
  return per - (vs == 0 ? e : 0) - (vs == S - 1 ? l : 0);
}

bool plan_ep_is_slice(const plan *p) {
  return p->ep > 1 && p->ep == p->chips / (p->slices > 1 ? p->slices : 1);
}

double plan_offload_share(const plan *p, double stage_layers) {
  if (p->offload_layers <= 0 || stage_layers <= 0) return 1;
  double f = (double)p->offload_layers * (double)(p->vp > 0 ? p->vp : 1) / stage_layers;
  return f < 1 ? f : 1;
}

double plan_gemm_peak_flops(const hw_model *hw, const plan *p) {
  static const hw_dtype UNIT[PLAN_GEMM_COUNT] = {
      [PLAN_GEMM_FP8] = HW_FP8, [PLAN_GEMM_FP8_CS] = HW_FP8, [PLAN_GEMM_MXFP8] = HW_MXFP8,
      [PLAN_GEMM_NVFP4] = HW_FP4, [PLAN_GEMM_INT8] = HW_INT8, [PLAN_GEMM_TF32] = HW_TF32};
  if (p->gemm == PLAN_GEMM_NATIVE || p->gemm >= PLAN_GEMM_COUNT) return optime_peak_flops(hw, p->precision);
  return hw_peak_flops(hw, UNIT[p->gemm]);
}

double plan_moe_load(const plan *p) {
  return p->ep > 1 && p->moe_imbalance > 1 ? p->moe_imbalance : 1;
}

double plan_moe_imbalance_max(const plan *p, const wl_tf_dims *d) {
  double k = (double)(d->top_k > 0 ? d->top_k : 1), ep = (double)(p->ep > 1 ? p->ep : 1);
  double local = (double)d->experts / ep;
  return ep * (local < k ? local : k) / k;
}

double plan_moe_rows(const plan *p, const wl_tf_dims *d) {
  return d->capacity_factor > 0 ? d->capacity_factor : plan_moe_load(p);
}

int64_t plan_expert_dp(const plan *p) {
  int64_t cp = p->cp > 0 ? p->cp : 1, ep = p->ep > 0 ? p->ep : 1, etp = p->etp > 0 ? p->etp : 1;
  return p->tp * p->dp * cp / (ep * etp);
}

void plan_state_shards(const plan *p, int64_t *dense, int64_t *expert) {
  int64_t cp = p->cp > 0 ? p->cp : 1, ep = p->ep > 0 ? p->ep : 1, etp = p->etp > 0 ? p->etp : 1;
  int64_t g = p->zero >= 3 && p->hsdp > 0 ? p->hsdp : p->dp * cp;
  int64_t e = g * p->tp / (ep * etp);
  *dense = g;
  *expert = e > 0 ? e : 1;
}

const char *plan_precision_name(graph_dtype dt) {
  const char *n = wl_precision_name(dt);
  return n ? n : "bf16";
}

const char *plan_recompute_word(plan_recompute r) {
  return r == PLAN_RECOMPUTE_FULL ? "full" : r == PLAN_RECOMPUTE_SELECTIVE ? "selective" : "no";
}

int plan_name_index(const char *const *names, const char *s) {
  for (int i = 0; s && names[i]; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

int plan_schedule_parse(const char *s, plan *p, char *err, size_t errn) {
  if (strcmp(s, "gpipe") == 0) {
    p->schedule = PLAN_GPIPE;
  } else if (strcmp(s, "1f1b") == 0) {
    p->schedule = PLAN_1F1B;
  } else if (strncmp(s, "interleaved:", 12) == 0 && atoll(s + 12) >= 2 &&
             atoll(s + 12) <= 1024 && strspn(s + 12, "0123456789") == strlen(s + 12)) {
    p->schedule = PLAN_INTERLEAVED;
    p->vp = atoll(s + 12);
  } else {
    return str_errf(err, errn, "--pp-schedule '%s': expected gpipe, 1f1b or interleaved:V", s);
  }
  return 0;
}

int64_t plan_microbatches(const plan *p) {
  /* expert-parallel ranks are data-parallel ranks (their own sequences);
  ** context-parallel ranks share theirs */
  int64_t per = p->dp * p->mbs;
  return per > 0 ? p->gbs / per : 0;
}

int64_t plan_wgrad_deferred(const plan *p) {
  if (!p->defer_embedding_wgrad) return 0;
  int64_t m = plan_microbatches(p), l = p->wgrad_deferral_limit;
  return l > 0 && l < m ? l : m;
}

graph_dtype plan_precision_on(const hw_model *hw, graph_dtype want) {
  if (want == GDT_BF16 && hw_peak_flops(hw, HW_BF16) <= 0 && hw_peak_flops(hw, HW_FP16) > 0)
    return GDT_F16;
  return want;
}

/* ---- checks ---- */

/* A whole-step model times the graph in its compute dtype and reads its
** memory off the graph: a GEMM recipe or bf16-only weights would change
** the label and not the number. */
static int check_whole_dtype(const model *m, const plan *p, char *err, size_t errn) {
  if (p->gemm != PLAN_GEMM_NATIVE && p->gemm != PLAN_GEMM_TF32)
    return str_errf(err, errn, "--precision %s is a recipe for a transformer's linear layers "
                    "(Transformer Engine, torchao, AQT); %s %s model's step is simulated whole in "
                    "its compute dtype (nearest: --precision bf16)", plan_precision_label(p),
                    str_article(m->family), m->family);
  if (p->bf16_weights)
    return str_errf(err, errn, "--weight-dtype bf16 keeps a transformer's weights and optimizer "
                    "state in bf16 (MaxText's weight_dtype); %s %s model's memory is read off its "
                    "graph as the file gives it (leave the flag out)", str_article(m->family),
                    m->family);
  return 0;
}

/* Models other than transformers: data parallelism only (their layers are
** small enough to replicate); a family that writes its whole step (gbdt)
** runs on one chip. */
static int check_generic(const model *m, plan *p, char *err, size_t errn) {
  if (strcmp(m->format, "hlo") == 0) {
    /* a compiled module is one device's program for the devices it names */
    int64_t dev = m->info.devices > 0 ? m->info.devices : 1;
    if (p->tp != 1 || p->pp != 1 || p->ep != 1 || p->cp > 1 || p->etp > 1 || (p->dp && p->dp != p->chips))
      return str_errf(err, errn, "an HLO module carries its own partitioning (%lld device%s): give "
                                 "--chips %lld and no --dp/--tp/--pp/--cp/--ep/--etp",
                      (long long)dev, dev == 1 ? "" : "s", (long long)dev);
    if (p->chips != dev)
      return str_errf(err, errn, "the HLO module was compiled for %lld device%s "
                                 "(num_partitions x replica_count), not --chips %lld",
                      (long long)dev, dev == 1 ? "" : "s", (long long)p->chips);
    p->dp = p->chips;
    p->gbs = p->mbs = 1;
    p->vp = 1;
    if (p->slices < 1) p->slices = 1;
    return 0;
  }
  if (p->tp != 1 || p->pp != 1 || p->ep != 1 || p->cp > 1 || p->etp > 1)
    return str_errf(err, errn, "tensor, pipeline, context and expert parallelism split transformer "
                               "layers; %s %s model trains data-parallel (--dp)", str_article(m->family),
                    m->family);
  if (p->chips < 1 || p->mbs < 0) return str_errf(err, errn, "--chips must be at least 1");
  if (p->dp == 0) p->dp = p->chips;
  if (p->dp != p->chips)
    return str_errf(err, errn, "dp %lld, but --chips is %lld", (long long)p->dp, (long long)p->chips);
  if (m->info.whole_step && p->chips != 1)
    return str_errf(err, errn, "a %s step runs on one chip here (distributed %s is not modelled)",
                    m->family, m->family);
  if (p->gbs == 0) p->gbs = m->train.global_batch;
  if (p->seq == 0) p->seq = m->train.seq_len;
  if (p->mbs == 0) p->mbs = p->gbs / p->dp > 0 ? p->gbs / p->dp : 1; /* no accumulation */
  if (!m->info.whole_step && p->gbs % (p->dp * p->mbs) != 0)
    return str_errf(err, errn, "mbs %lld x dp %lld does not divide the global batch %lld",
                    (long long)p->mbs, (long long)p->dp, (long long)p->gbs);
  if (p->slices < 1) p->slices = 1;
  p->vp = 1;
  return 0;
}

/* The pipeline's split of the decoder layers: an explicit list (one number
** per virtual stage, summing to the layers), or an even one, the embedding
** and loss counted as layers when asked (Megatron-Core's rule: the layers
** plus those divide into pp x V). */
static int check_stages(const model *m, plan *p, plan_fault *fault, char *err, size_t errn) {
  const wl_tf_dims *d = &m->info.tf;
  int64_t S = p->pp * p->vp, e = p->pp_split_embedding, l = p->pp_split_loss;
  *fault = PLAN_FAULT_DIVIDES;
  if (p->pp_layers) {
    if (p->n_pp_layers != S)
      return str_errf(err, errn, "--pp-layers gives %d stages, but pp %lld x V %lld = %lld",
                      p->n_pp_layers, (long long)p->pp, (long long)p->vp, (long long)S);
    int64_t sum = 0;
    for (int i = 0; i < p->n_pp_layers; i++) sum += p->pp_layers[i];
    if (sum != d->layers)
      return str_errf(err, errn, "--pp-layers adds up to %lld layers; %s has %lld", (long long)sum,
                      m->name, (long long)d->layers);
    *fault = PLAN_FAULT_NONE;
    return 0;
  }
  if (p->pp > d->layers + e + l)
    return str_errf(err, errn, "pp %lld is more than the %lld layers", (long long)p->pp,
                    (long long)d->layers);
  if ((d->layers + e + l) % S != 0) {
    if (e + l == 0 && (d->layers + 2) % S == 0)
      return str_errf(err, errn, "%lld layers do not split into pp %lld x %lld virtual stages; with "
                      "the embedding and loss counted as layers they do (--pp-split-embedding "
                      "--pp-split-loss), or give --pp-layers", (long long)d->layers,
                      (long long)p->pp, (long long)p->vp);
    return str_errf(err, errn, "%lld layers%s do not split into pp %lld x %lld virtual stages "
                    "(give --pp-layers A,B,... for an uneven split)", (long long)d->layers,
                    e + l ? " with the embedding/loss" : "", (long long)p->pp, (long long)p->vp);
  }
  *fault = PLAN_FAULT_NONE;
  return 0;
}

int plan_hw_supports(const model *m, const hw_model *hw, char *err, size_t errn) {
  unsigned req = m->info.requires;
  /* An edge part runs trained, quantized models: the Edge TPU takes only
  ** fully int8-quantized TensorFlow Lite models compiled for it and "is
  ** primarily intended for model inferencing" (retraining at most the last
  ** layer; coral.ai/docs/edgetpu/faq, /models-intro). No backward pass or
  ** optimizer runs on it, so no training plan does either. A phone's CPU
  ** and NPU are the same kind of target: their runtimes (TensorFlow Lite,
  ** Core ML) ship converted, trained models to run on the device, and a
  ** phone is not a machine people train models on. */
  if (hw->kind == HW_EDGE)
    return str_errf(err, errn, "%s is an edge inference part: it has no training support "
                    "(its runtime runs trained models converted for the device; %s); train on "
                    "a GPU, TPU or server CPU and serve on it", hw->name,
                    hw_peak_16bit(hw) > 0 || hw_peak_flops(hw, HW_FP32) > 0
                        ? "no training stack runs on it"
                        : "no float unit for a backward pass or optimizer");
  if ((req & WL_REQ_FP64) && hw_peak_flops(hw, HW_FP64) <= 0)
    return str_errf(err, errn, "the model requires fp64; %s has no fp64 unit (TPUs have none; "
                    "NVIDIA data-centre GPUs and CPUs do)", hw->name);
  bool nvidia = hw->kind == HW_GPU && strcmp(hw->vendor, "NVIDIA") == 0;
  if ((req & WL_REQ_CUDA) && !nvidia)
    return str_errf(err, errn, "the model requires custom CUDA kernels; %s is %s %s %s (it needs an "
                    "NVIDIA GPU)", hw->name, str_article(hw->vendor), hw->vendor,
                    hw_kind_name(hw->kind));
  /* XGBoost (tree_method hist on CPU, device=cuda on NVIDIA GPUs), LightGBM
  ** (CPU; device_type cuda) and CatBoost (task_type CPU or GPU, CUDA)
  ** ship CPU and CUDA back ends only; none has an XLA or TPU back end, and
  ** TensorFlow Decision Forests trains on CPU only (its docs: "TF-DF does
  ** not support hardware accelerators") */
  if ((req & WL_REQ_TREE_LIBS) && !(hw->kind == HW_CPU || nvidia))
    return str_errf(err, errn, "the model is trained by tree-boosting libraries (XGBoost, "
                    "LightGBM, CatBoost), which run on CPUs and NVIDIA GPUs, not on %s %s %s",
                    str_article(hw->vendor), hw->vendor, hw_kind_name(hw->kind));
  return 0;
}

/* --embeddings sharded|ps: a model with embedding tables read by gathers
** (a recommender's; a transformer's token embedding is split by tp and
** ZeRO instead); a parameter server on CPU hosts beside GPUs or CPUs, not
** TPUs, whose embeddings are TPUEmbedding's, sharded over the slice's HBM
** (TensorFlow's ParameterServerStrategy runs CPU and GPU workers; TPU
** training goes through TPUStrategy). */
static int check_embeddings(const model *m, const hw_model *hw, const plan *p, plan_fault *fault,
                            char *err, size_t errn) {
  if (p->embeddings == PLAN_EMB_REPLICATED) return 0;
  const char *want = plan_embeddings_names[p->embeddings];
  if ((unsigned)p->embeddings > PLAN_EMB_PS) {
    *fault = PLAN_FAULT_RANGE;
    return str_errf(err, errn, "--embeddings takes replicated, sharded or ps");
  }
  plan_emb_tables t;
  plan_embedding_tables(m->info.tf.layers == 0 ? m->g : NULL, &t);
  if (t.tables == 0) {
    *fault = PLAN_FAULT_FAMILY;
    return str_errf(err, errn, "--embeddings %s places embedding tables; %s has none a gather "
                    "reads (a recommender such as dlrm has; nearest: --embeddings replicated, "
                    "or --zero 3 to shard a transformer's weights)", want, m->name);
  }
  if (p->embeddings == PLAN_EMB_PS && hw->kind == HW_TPU) {
    *fault = PLAN_FAULT_FAMILY;
    return str_errf(err, errn, "--embeddings ps: a parameter server feeds CPU or GPU workers; on "
                    "%s the tables are TPUEmbedding's, sharded over the slice's HBM%s (nearest: "
                    "--embeddings sharded)", hw->name,
                    hw->chip.sparse_cores > 0 ? " and looked up by its SparseCores" : "");
  }
  return 0;
}

bool plan_default_tf32(const model *m, const hw_model *hw, plan *p) {
  if (p->precision != GDT_F32 || p->gemm != PLAN_GEMM_NATIVE || hw_peak_flops(hw, HW_TF32) <= 0 ||
      !m->g)
    return false;
  for (int i = 0; i < graph_count(m->g); i++)
    if (graph_get(m->g, i)->kind == GOP_CONV) {
      p->gemm = PLAN_GEMM_TF32;
      return true;
    }
  return false;
}

/* A slice shape, when given: one Cloud TPU offers (net_shape_check) whose
** chips times the slices are the plan's chips. */
static int check_slice_shape(const hw_model *hw, const plan *p, char *err, size_t errn) {
  const int64_t *s = p->slice_shape;
  if (!s[0] && !s[1] && !s[2])
    return p->slice_twisted ? str_errf(err, errn, "a twisted slice needs its shape: --topology "
                                       "AxBxCt (e.g. 4x4x8t)")
                            : 0;
  if (net_shape_check(hw, s, err, errn) != 0) return -1;
  if (p->slice_twisted && net_twist_check(hw, s, err, errn) != 0) return -1;
  int64_t per = s[0] * s[1] * s[2], slices = p->slices > 1 ? p->slices : 1;
  if (p->chips == per * slices) return 0;
  if (p->chips % per == 0)
    return str_errf(err, errn, "--topology %lldx%lldx%lld holds %lld chips; --chips %lld in %lld "
                    "slice%s (nearest: --slices %lld, or --chips %lld)",
                    (long long)s[0], (long long)s[1], (long long)s[2], (long long)per,
                    (long long)p->chips, (long long)slices, slices == 1 ? "" : "s",
                    (long long)(p->chips / per), (long long)(per * slices));
  return str_errf(err, errn, "--topology %lldx%lldx%lld holds %lld chips, which do not divide "
                  "--chips %lld (nearest: --chips %lld)",
                  (long long)s[0], (long long)s[1], (long long)s[2], (long long)per,
                  (long long)p->chips, (long long)(per * slices));
}

/* A selective recompute's modules against the model: each must name a
** submodule some layer has (Megatron-Core refuses mla_up_proj without
** multi-latent attention; the others would recompute nothing). */
static int check_recompute_modules(const model *m, const plan *p, char *err, size_t errn) {
  unsigned mods = p->recompute == PLAN_RECOMPUTE_SELECTIVE ? p->recompute_modules : 0;
  if (!mods) return 0;
  const wl_tf_dims *d = &m->info.tf;
  bool dense = false, moe = false, attn = false;
  for (int64_t i = 0; i < d->layers; i++) {
    int k = wl_tf_layer_kind(d, i);
    bool mixer = !(k & WL_LAYER_NO_MIXER), ffn = !(k & (WL_LAYER_NO_FFN | WL_LAYER_MAMBA));
    attn |= mixer && !(k & (WL_LAYER_MAMBA | WL_LAYER_GDN));
    moe |= ffn && (k & WL_LAYER_MOE) && d->experts > 0;
    dense |= ffn && !((k & WL_LAYER_MOE) && d->experts > 0);
  }
  const struct {
    unsigned bit;
    bool has;
    const char *what;
  } NEED[] = {{PLAN_RM_CORE_ATTN, attn, "attention layer"},
              {PLAN_RM_MOE_ACT, moe, "MoE layer"},
              {PLAN_RM_MLA_UP_PROJ, d->kv_lora_rank > 0, "multi-latent attention (kv_lora_rank)"},
              {PLAN_RM_MLP, dense, "dense MLP"},
              {PLAN_RM_MOE, moe, "MoE layer"},
              {PLAN_RM_SHARED_EXPERTS, moe && d->shared_ffn_hidden > 0, "shared experts"}};
  for (size_t i = 0; i < sizeof NEED / sizeof *NEED; i++) {
    if (!(mods & NEED[i].bit) || NEED[i].has) continue;
    int j = 0;
    while (!(NEED[i].bit & (1u << j))) j++;
    return str_errf(err, errn, "--recompute selective:%s: %s has no %s to recompute; the modules "
                    "it has: %s%s%s%s%s%s", plan_recompute_module_names[j], m->name, NEED[i].what,
                    attn ? "core_attn, " : "", "layernorm",
                    d->kv_lora_rank > 0 ? ", mla_up_proj" : "", dense ? ", mlp" : "",
                    moe ? ", moe, moe_act" : "",
                    moe && d->shared_ffn_hidden > 0 ? ", shared_experts" : "");
  }
  return 0;
}

int plan_check_moe_imbalance_model(const model *m, double f, char *err, size_t errn) {
  if (f == 0 || f == 1) return 0;
  const wl_tf_dims *d = &m->info.tf;
  if (!(f >= 1) || !(f <= 1e6))
    return str_errf(err, errn, "--moe-imbalance %g: expected the busiest expert chip's tokens over "
                    "the even share, 1 or more (nearest: 1, even routing)", f);
  if (d->experts <= 0)
    return str_errf(err, errn, "--moe-imbalance %g: %s has no experts (leave the flag out)", f,
                    m->name);
  if (d->capacity_factor > 0)
    return str_errf(err, errn, "--moe-imbalance %g: %s pads every expert to capacity_factor %g and "
                    "drops the tokens past it, so uneven routing does not change the work (leave "
                    "the flag out)", f, m->name, d->capacity_factor);
  return 0;
}

/* --moe-imbalance F: the model's part (above), then an expert group to be
** uneven in and F no more than the busiest chip can receive
** (plan_moe_imbalance_max: ep x the even share when it holds top_k experts
** or more). */
static int check_moe_imbalance(const model *m, const plan *p, char *err, size_t errn) {
  double f = p->moe_imbalance;
  if (plan_check_moe_imbalance_model(m, f, err, errn) != 0) return -1;
  if (f == 0 || f == 1) return 0;
  const wl_tf_dims *d = &m->info.tf;
  if (p->ep < 2)
    return str_errf(err, errn, "--moe-imbalance %g: ep is %lld, so every chip routes its own tokens "
                    "to experts it holds and none waits on another (nearest: --ep 2 or more, or "
                    "leave the flag out)", f, (long long)p->ep);
  double most = plan_moe_imbalance_max(p, d), local = (double)d->experts / (double)p->ep;
  if (f > most * (1 + 1e-9))
    return str_errf(err, errn, "--moe-imbalance %g: with ep %lld a chip's %g experts receive at "
                    "most %g times the even share (each token sends it at most min(top_k %lld, "
                    "%g) copies; nearest: %g)", f, (long long)p->ep, local, most,
                    (long long)d->top_k, local, most);
  return 0;
}

/* --ep-overlap on: what Megatron-Core's TransformerConfig asserts for
** overlap_moe_expert_parallel_comm (transformer_config.py): expert
** parallelism, virtual stages when there is a pipeline (the paired
** forward and backward of the 1F1B schedule), no full recompute and no
** "moe" among the recomputed modules, a bf16 or fp16 model, and a
** framework that has the overlap; and its combined 1F1B schedule's (no
** FSDP with several model chunks: pipeline_parallel/combined_1f1b.py). */
static int check_ep_overlap(const model *m, const plan *p, char *err, size_t errn) {
  if (p->ep_overlap != PLAN_EP_OVERLAP_ON) return 0;
  char msg[256];
  if (p->ep < 2)
    return str_errf(err, errn, "--ep-overlap on: ep is %lld, so there are no expert-parallel "
                    "all-to-alls to overlap (nearest: --ep 2 or more, or --ep-overlap off)",
                    (long long)p->ep);
  if (framework_check_ep_overlap(p->framework, msg, sizeof msg) != 0)
    return str_errf(err, errn, "--ep-overlap on: %s", msg);
  if (p->pp > 1 && p->vp < 2)
    return str_errf(err, errn, "--ep-overlap on with pp %lld needs virtual stages (Megatron-Core "
                    "asserts virtual_pipeline_model_parallel_size when pp > 1; nearest: "
                    "--pp-schedule interleaved:2, or --ep-overlap off)", (long long)p->pp);
  if (p->vp > 1 && p->zero >= 3)
    return str_errf(err, errn, "--ep-overlap on with interleaving (V %lld) and FSDP: Megatron-Core's "
                    "combined 1F1B does not run FSDP over several model chunks (nearest: --zero 1, "
                    "or --ep-overlap off)", (long long)p->vp);
  if (p->recompute == PLAN_RECOMPUTE_FULL)
    return str_errf(err, errn, "--ep-overlap on with full recompute: Megatron-Core refuses the "
                    "pair (nearest: --recompute selective, or --ep-overlap off)");
  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE && (p->recompute_modules & PLAN_RM_MOE))
    return str_errf(err, errn, "--ep-overlap on with the moe module recomputed: Megatron-Core "
                    "refuses the pair (nearest: drop moe from --recompute selective:..., or "
                    "--ep-overlap off)");
  if (p->precision != GDT_BF16 && p->precision != GDT_F16)
    return str_errf(err, errn, "--ep-overlap on: Megatron-Core overlaps the all-to-alls of a bf16 "
                    "or fp16 model; %s trains in %s (nearest: --ep-overlap off)", m->name,
                    plan_precision_name(p->precision));
  return 0;
}

/* Offload moves bytes over the chip's link to its host's memory; a chip
** that is the host (a CPU socket) or has no such link has nowhere to put
** them, and pricing them at no time would be a number from nothing. */
int plan_check_offload_link(const struct hw_model *hw, plan_offload o, char *err, size_t errn) {
  if (o == PLAN_OFFLOAD_NONE || hw->chip.host_link_bw_bytes_per_s > 0) return 0;
  return str_errf(err, errn, "--offload %s: %s has no host link (chip.host_link: %s) to offload "
                  "over; leave --offload out", plan_offload_names[o], hw->name,
                  hw_enum_name(hw_field_find("chip.host_link.kind"), hw->chip.host_link_kind));
}

int plan_check_fault(const model *m, const hw_model *hw, plan *p, plan_fault *fault, char *err,
                     size_t errn) {
  plan_fault dummy;
  if (!fault) fault = &dummy;
  *fault = PLAN_FAULT_NONE;
  if (plan_hw_supports(m, hw, err, errn) != 0) {
    *fault = PLAN_FAULT_REQUIRES;
    return -1;
  }
  if (check_embeddings(m, hw, p, fault, err, errn) != 0) return -1;
  if (check_slice_shape(hw, p, err, errn) != 0) {
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (p->gemm == PLAN_GEMM_TF32 && p->precision != GDT_F32) {
    *fault = PLAN_FAULT_DTYPE;
    return str_errf(err, errn, "tf32 runs an fp32 model's matmuls on TF32 tensor cores; %s trains "
                    "in %s (nearest: --precision tf32 alone, which trains it in fp32, or its own precision)",
                    m->name, plan_precision_name(p->precision));
  }
  if (m->info.tf.layers == 0 && check_whole_dtype(m, p, err, errn) != 0) {
    *fault = PLAN_FAULT_DTYPE;
    return -1;
  }
  if (p->bf16_weights && p->precision != GDT_BF16) {
    *fault = PLAN_FAULT_DTYPE;
    return str_errf(err, errn, "--weight-dtype bf16: %s trains in %s; bf16 weights are a bf16 "
                    "model's (nearest: --precision bf16, or --weight-dtype fp32)", m->name,
                    plan_precision_name(p->precision));
  }
  const wl_tf_dims *d = &m->info.tf;
  if (framework_check_fp8_attention(p, hw, err, errn) != 0) {
    *fault = PLAN_FAULT_REQUIRES;
    return -1;
  }
  if (p->defer_embedding_wgrad) {
    if (p->pp < 2) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--defer-embedding-wgrad-compute runs the output layer's weight "
                      "gradients in a pipeline's flush; pp %lld has none (Megatron-Core refuses it "
                      "at pp 1; nearest: --pp 2 or more, or leave the flag out)", (long long)p->pp);
    }
    if (m->train.method != WL_FULL) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--defer-embedding-wgrad-compute defers the output layer's weight "
                      "gradients; under --finetune %s the output layer is frozen and has none "
                      "(Megatron-Core's frozen linear refuses the buffers; leave the flag out)",
                      wl_method_names[m->train.method]);
    }
  }
  if (p->remat_device | p->remat_offload) {
    char lab[192];
    if (p->recompute != PLAN_RECOMPUTE_FULL) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "MaxText's named tensors come with its custom remat policy, a full "
                      "recompute that keeps them (nearest: --recompute %s)",
                      plan_recompute_label(p, lab, sizeof lab));
    }
    if (p->framework < 0 || !framework_jax_remat(p->framework)) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--recompute %s: MaxText's named tensors (remat_policy custom) are "
                      "a JAX remat policy; framework %s recomputes whole layers (nearest: "
                      "--framework maxtext, or --recompute full)",
                      plan_recompute_label(p, lab, sizeof lab),
                      p->framework >= 0 ? framework_names[p->framework] : "(none)");
    }
    if (d->layers == 0) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--recompute custom: names a transformer layer's tensors; %s has no "
                      "transformer layers (nearest: --recompute full)", m->name);
    }
    /* what is offloaded goes over the host link: activation offload */
    if (p->remat_offload && p->offload == PLAN_OFFLOAD_OPTIMIZER) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--recompute %s offloads activations to the host, and --offload "
                      "optimizer the optimizer: one offload a plan (nearest: --offload activations)",
                      plan_recompute_label(p, lab, sizeof lab));
    }
    if (p->remat_offload) p->offload = PLAN_OFFLOAD_ACTIVATIONS;
  }
  if (d->layers == 0 && p->recompute == PLAN_RECOMPUTE_SELECTIVE && p->recompute_modules) {
    *fault = PLAN_FAULT_FAMILY;
    return str_errf(err, errn, "--recompute selective:LIST names a transformer layer's modules; %s "
                    "has no transformer layers (nearest: --recompute selective or full)", m->name);
  }
  /* the MoE flags, for every model (one without experts refuses them) */
  if (check_moe_imbalance(m, p, err, errn) != 0) {
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (d->experts <= 0 && p->moe_dispatcher != PLAN_DISPATCH_FRAMEWORK) {
    *fault = PLAN_FAULT_RANGE;
    return str_errf(err, errn, "--moe-dispatcher %s: %s has no experts, so no tokens are dispatched "
                    "(leave the flag out)", plan_moe_dispatcher_names[p->moe_dispatcher], m->name);
  }
  if (plan_check_offload_link(hw, p->offload, err, errn) != 0) {
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (d->layers == 0) {
    int rc = check_generic(m, p, err, errn);
    if (rc != 0) *fault = PLAN_FAULT_FAMILY;
    else if (p->gemm == PLAN_GEMM_TF32 && !(plan_gemm_peak_flops(hw, p) > 0)) {
      *fault = PLAN_FAULT_DTYPE;
      return str_errf(err, errn, "%s has no TF32 tensor cores (nearest: --precision fp32)",
                      hw->name);
    }
    return rc;
  }
  if (p->mbs == 0) p->mbs = 1;
  if (p->tp < 1 || p->pp < 1 || p->ep < 1 || p->chips < 1 || p->mbs < 1 || p->cp < 0 || p->etp < 0) {
    if (errn) snprintf(err, errn, "--chips, --tp, --pp, --cp, --ep, --etp and --mbs must be at least 1");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (d->heads % p->tp != 0) {
    if (errn) snprintf(err, errn, "tp %lld does not divide the %lld attention heads", (long long)p->tp,
             (long long)d->heads);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (d->kv_heads % p->tp != 0 && p->tp % d->kv_heads != 0) {
    if (errn) snprintf(err, errn, "tp %lld and the %lld KV heads: one must divide the other",
             (long long)p->tp, (long long)d->kv_heads);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (d->ffn_hidden % p->tp != 0) {
    if (errn) snprintf(err, errn, "tp %lld does not divide ffn_hidden %lld", (long long)p->tp,
             (long long)d->ffn_hidden);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->cp < 1) p->cp = 1;
  if (p->etp < 1) p->etp = 1;
  int64_t cp = p->cp;
  /* expert parallelism before dp: a dp derived from an ep that cannot be
  ** would be 0, and "dp 0 x ..." names the wrong thing */
  if ((p->ep > 1 || p->etp > 1) && d->experts == 0) {
    if (errn) snprintf(err, errn, "%s %lld needs a MoE model; %s has no experts",
                       p->ep > 1 ? "ep" : "etp", (long long)(p->ep > 1 ? p->ep : p->etp), m->name);
    *fault = PLAN_FAULT_FAMILY;
    return -1;
  }
  if (p->ep > 1 && d->experts % p->ep != 0) {
    if (errn) snprintf(err, errn, "ep %lld does not divide the %lld experts", (long long)p->ep,
                       (long long)d->experts);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (check_recompute_modules(m, p, err, errn) != 0) {
    *fault = PLAN_FAULT_FAMILY;
    return -1;
  }
  int64_t replica = p->tp * p->pp * cp; /* chips of one data-parallel replica */
  if (p->dp == 0 && p->chips % replica != 0) {
    if (errn) snprintf(err, errn, "tp %lld x pp %lld x cp %lld = %lld chips per replica, %s --chips %lld",
                       (long long)p->tp, (long long)p->pp, (long long)cp, (long long)replica,
                       replica > p->chips ? "more than" : "which does not divide", (long long)p->chips);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->dp == 0) p->dp = p->chips / replica;
  if (p->dp * replica != p->chips) {
    /* the older form, chips = dp x tp x pp x ep: say how to write it now */
    if (p->ep > 1 && p->dp * replica * p->ep == p->chips) {
      if (errn) snprintf(err, errn, "dp %lld x tp %lld x pp %lld x cp %lld = %lld, but --chips is %lld: "
                         "expert parallelism is inside dp x cp (Megatron-Core), so write --dp %lld "
                         "--ep %lld (or leave --dp out)", (long long)p->dp, (long long)p->tp,
                         (long long)p->pp, (long long)cp, (long long)(p->dp * replica),
                         (long long)p->chips, (long long)(p->dp * p->ep), (long long)p->ep);
    } else if (errn) {
      snprintf(err, errn, "dp %lld x tp %lld x pp %lld x cp %lld = %lld, but --chips is %lld",
               (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)cp,
               (long long)(p->dp * replica), (long long)p->chips);
    }
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  /* the expert layers regroup the tp x dp x cp ranks as etp x ep x edp
  ** (Megatron-Core's expert parallel groups): ep x etp must divide them */
  if ((p->tp * p->dp * cp) % (p->ep * p->etp) != 0) {
    if (errn) snprintf(err, errn, "ep %lld x etp %lld does not divide tp %lld x dp %lld x cp %lld = %lld "
                       "(the expert layers regroup those ranks)", (long long)p->ep, (long long)p->etp,
                       (long long)p->tp, (long long)p->dp, (long long)cp,
                       (long long)(p->tp * p->dp * cp));
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  int64_t effn = d->moe_ffn > 0 ? d->moe_ffn : d->ffn_hidden;
  if (p->etp > 1 && effn % p->etp != 0) {
    if (errn) snprintf(err, errn, "etp %lld does not divide the expert FFN size %lld",
                       (long long)p->etp, (long long)effn);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->vp < 1) p->vp = 1;
  if (p->gbs == 0) p->gbs = m->train.global_batch;
  if (p->seq == 0) p->seq = m->train.seq_len;
  /* causal load balancing gives each rank two chunks of the sequence
  ** (Megatron-Core's CP requires seq a multiple of 2 cp) */
  if (cp > 1 && p->seq % (2 * cp) != 0) {
    if (errn) snprintf(err, errn, "cp %lld: the sequence %lld is not a multiple of 2 x cp = %lld "
                       "(each rank holds two chunks, for causal load balance)", (long long)cp,
                       (long long)p->seq, (long long)(2 * cp));
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (check_stages(m, p, fault, err, errn) != 0) return -1;
  if (p->gbs % (p->dp * p->mbs) != 0) {
    /* the nearest batches that do, for a plan typed by hand */
    int64_t unit = p->dp * p->mbs, lo = p->gbs / unit * unit, hi = lo + unit;
    if (errn && lo > 0)
      snprintf(err, errn, "mbs %lld x dp %lld does not divide the global batch %lld (nearest: --gbs %lld or %lld)",
               (long long)p->mbs, (long long)p->dp, (long long)p->gbs, (long long)lo, (long long)hi);
    else if (errn)
      snprintf(err, errn, "mbs %lld x dp %lld does not divide the global batch %lld (nearest: --gbs %lld)",
               (long long)p->mbs, (long long)p->dp, (long long)p->gbs, (long long)hi);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->defer_embedding_wgrad) {
    /* Megatron-Core's drain gathers the next buffer under each GEMM and
    ** runs the last outside its loop: with one deferred micro-batch the
    ** loop never runs and it fails (utils.py drain_embedding_wgrad_compute) */
    int64_t mb = plan_microbatches(p);
    if (plan_wgrad_deferred(p) == 1) {
      *fault = PLAN_FAULT_FAMILY;
      return str_errf(err, errn, "--defer-embedding-wgrad-compute with one deferred micro-batch (%s): "
                      "Megatron-Core's drain needs two or more (utils.py "
                      "drain_embedding_wgrad_compute runs the last outside a loop over the rest; "
                      "nearest: --wgrad-deferral-limit 2 or more, or more micro-batches)",
                      mb == 1 ? "the step has one" : "--wgrad-deferral-limit 1");
    }
  }
  if (p->schedule == PLAN_INTERLEAVED && plan_microbatches(p) % p->pp != 0) {
    if (errn) snprintf(err, errn, "interleaved 1F1B needs the %lld micro-batches to be a multiple of pp %lld",
             (long long)plan_microbatches(p), (long long)p->pp);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->schedule == PLAN_INTERLEAVED && p->pp < 2) {
    if (errn) snprintf(err, errn, "interleaved 1F1B splits each pipeline stage into virtual stages: "
                       "it needs --pp 2 or more (with pp 1 there is no pipeline; leave --pp-schedule out)");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (p->schedule == PLAN_INTERLEAVED && p->vp < 2) {
    if (errn) snprintf(err, errn, "interleaved 1F1B needs V >= 2 virtual stages (interleaved:V)");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (check_ep_overlap(m, p, err, errn) != 0) {
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (framework_check_attention_kernel(p->attn_kernel, hw, err, errn) != 0) {
    *fault = PLAN_FAULT_REQUIRES;
    return -1;
  }
  /* a dispatcher is a choice only where tokens are dispatched; DeepEP and
  ** HybridEP are NVIDIA GPU libraries (NVSHMEM, NVLink) */
  if (p->moe_dispatcher != PLAN_DISPATCH_FRAMEWORK &&
      (p->ep < 2 || hw->kind != HW_GPU || strcmp(hw->vendor, "NVIDIA") != 0)) {
    const char *name = plan_moe_dispatcher_names[p->moe_dispatcher];
    if (errn && p->ep < 2)
      snprintf(err, errn, "--moe-dispatcher %s: ep is %lld, so no tokens are dispatched (nearest: "
               "--ep 2 or more, or leave the flag out)", name, (long long)p->ep);
    else if (errn)
      snprintf(err, errn, "--moe-dispatcher %s: Megatron-Core's token dispatchers run on NVIDIA "
               "GPUs, not on %s (leave the flag out)", name, hw->name);
    *fault = PLAN_FAULT_REQUIRES;
    return -1;
  }
  if (p->hsdp > 0 && (p->zero < 3 || (p->dp * cp) % p->hsdp != 0)) {
    if (errn) snprintf(err, errn, p->zero < 3 ? "--hsdp %lld shards within groups: it needs --fsdp (--zero 3)"
                                              : "--hsdp %lld does not divide dp x cp = %lld",
                       (long long)p->hsdp, (long long)(p->dp * cp));
    *fault = p->zero < 3 ? PLAN_FAULT_RANGE : PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->offload_layers != 0 &&
      (p->offload != PLAN_OFFLOAD_ACTIVATIONS || p->offload_layers < 0 ||
       (m->info.tf.layers > 0 && p->offload_layers >= m->info.tf.layers))) {
    /* Megatron-Core's own bound: fewer layers than the model has */
    if (errn && p->offload != PLAN_OFFLOAD_ACTIVATIONS)
      snprintf(err, errn, "a count of offloaded layers goes with activation offload "
                          "(--offload activations:N)");
    else if (errn)
      snprintf(err, errn,
               "--offload activations:%lld: the model has %lld decoder layers; N offloads the "
               "first N of each model chunk, so give 1..%lld (or --offload activations for all)",
               (long long)p->offload_layers, (long long)m->info.tf.layers,
               (long long)m->info.tf.layers - 1);
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (p->sp && p->tp < 2) p->sp = false;
  if (p->zero < 0 || p->zero > 3) {
    if (errn) snprintf(err, errn, "--zero takes 0, 1, 2 or 3");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (!(optime_peak_flops(hw, p->precision) > 0)) {
    if (errn) snprintf(err, errn, "%s has no %s unit", hw->name, graph_dtype_name(p->precision));
    *fault = PLAN_FAULT_DTYPE;
    return -1;
  }
  if (p->gemm != PLAN_GEMM_NATIVE && !(plan_gemm_peak_flops(hw, p) > 0)) {
    /* the nearest recipe the chip runs: fp8 on Hopper for MX/NV formats;
    ** strict fp32 where there are no TF32 tensor cores (V100, TPUs, CPUs) */
    const char *near = p->gemm == PLAN_GEMM_TF32 ? "fp32" : hw_peak_flops(hw, HW_FP8) > 0 ? "fp8" : "bf16";
    if (errn) snprintf(err, errn, "%s has no unit for %s GEMMs (nearest: --precision %s)", hw->name,
                       plan_precision_label(p), near);
    *fault = PLAN_FAULT_DTYPE;
    return -1;
  }
  if (p->slices < 1) p->slices = 1;
  return 0;
}

int plan_check(const model *m, const hw_model *hw, plan *p, char *err, size_t errn) {
  return plan_check_fault(m, hw, p, NULL, err, errn);
}

