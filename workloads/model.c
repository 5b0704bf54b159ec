/*
** model.c -- see model.h. Finds the file, tells the formats apart, reads
** the settings every model shares (the "train" block, "requires"), hands
** the family fields to the family's builder and appends the training step.
*/
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/embedded.h"
#include "../base/strutil.h"
#include "families.h"
#include "hlo.h"
#include "train.h"

/* workloads/examples, generated into build/examples_data.c at build time. */
extern const embedded_file wl_example_files[];
extern const int wl_example_files_count;

#define MODEL_FILE_MAX_BYTES (64u << 20) /* HLO dumps run to megabytes */

static const struct {
  const char *name;
  wl_family_fn build;
} FAMILIES[] = {
    {"transformer", wl_transformer}, {"cnn", wl_cnn},   {"mlp", wl_mlp},
    {"dlrm", wl_dlrm},               {"gbdt", wl_gbdt}, {"graph", wl_oplist},
};
#define NFAMILIES ((int)(sizeof FAMILIES / sizeof *FAMILIES))

void model_example_names(char *buf, size_t n) {
  buf[0] = '\0';
  for (int i = 0; i < wl_example_files_count; i++) {
    const char *f = strrchr(wl_example_files[i].file, '/');
    f = f ? f + 1 : wl_example_files[i].file;
    size_t len = strcspn(f, ".");
    size_t at = strlen(buf);
    snprintf(buf + at, n - at, "%s%.*s", i ? ", " : "", (int)len, f);
  }
}

struct model_spec {
  wl_family_fn build;
  jin j;             /* the text and its tree, kept parsed; never walked in place */
  char *jname;       /* the name its messages carry */
  /* an HF config's translation: the config's text and which of its keys
  ** each translated field was read from, so that the builder's messages
  ** point into the user's file (jin.origin) */
  jin_origin origin;
  char *origin_file, *origin_text; /* each key's two strings malloc'd too */
  wl_train train;    /* the train block (and seq_len) as the file gives them */
  unsigned requires;
  bool needs_seq;    /* a transformer whose file gives no seq_len */
};

static void spec_free(model_spec *s) {
  if (!s) return;
  jin_close(&s->j);
  for (int i = 0; i < s->origin.n; i++) free(s->origin.keys[i][0]), free(s->origin.keys[i][1]);
  free(s->origin.keys);
  free(s->origin_file);
  free(s->origin_text);
  free(s->jname);
  free(s);
}

void model_free(model *m) {
  if (!m) return;
  graph_free(m->g);
  if (m->owns_spec) spec_free(m->spec);
  free(m->path);
  free(m);
}

/* ---- the train block ---- */

static const char *const OPTIMIZER[] = {"sgd", "momentum", "adam", "adamw", NULL};

static void set_precision(wl_train *t, graph_dtype dt) {
  t->compute = dt;
  /* 16- and 8-bit training keeps fp32 master weights (Micikevicius et al. 2018) */
  t->master_fp32 = t->compute == GDT_BF16 || t->compute == GDT_F16 || t->compute == GDT_F8;
}

static bool read_lora(jin *j, const cJSON *lora, wl_train *t) {
  static const char *const KEYS[] = {"rank", "alpha", "targets", NULL};
  bool ok = jin_only(j, lora, KEYS, NULL) == 0;
  ok &= jin_get_int(j, lora, "rank", 1, 1 << 16, false, &t->lora_rank) >= 0;
  t->lora_alpha = (double)t->lora_rank;
  ok &= jin_get_num(j, lora, "alpha", 1e-6, 1e6, false, &t->lora_alpha) >= 0;
  const cJSON *targets = jin_get_array(j, lora, "targets", false);
  if (targets) {
    t->n_targets = 0;
    t->lora_lenient = false;
    jin_push_key(j, "targets", 0);
    int i = 0;
    for (const cJSON *e = targets->child; e; e = e->next, i++) {
      jin_push_index(j, i);
      if (!cJSON_IsString(e) || !*e->valuestring || strlen(e->valuestring) >= 16) {
        jin_error(j, 0, "expected a module name such as \"q\", \"v\", \"up\"");
        ok = false;
      } else if (t->n_targets == WL_MAX_TARGETS) {
        jin_error(j, 0, "at most %d target modules", WL_MAX_TARGETS);
        ok = false;
      } else {
        str_copy(t->targets[t->n_targets++], 16, e->valuestring);
      }
      jin_pop(j);
    }
    jin_pop(j);
  }
  return ok;
}

/* Defaults: one sequence, bf16 mixed precision, AdamW, full training. */
static bool read_train(jin *j, const cJSON *root, wl_train *t) {
  memset(t, 0, sizeof *t);
  t->global_batch = 1;
  t->seq_len = 1;
  set_precision(t, GDT_BF16);
  t->optimizer = WL_ADAMW;
  t->method = WL_FULL;
  t->lora_rank = 16;
  t->lora_alpha = 16;
  static const char *const PEFT_DEFAULT[] = {"q", "v"}; /* HF PEFT's default for Llama */
  t->n_targets = 2;
  for (int i = 0; i < 2; i++) str_copy(t->targets[i], 16, PEFT_DEFAULT[i]);
  t->lora_lenient = true; /* defaults: a model without q or v keeps the other */

  const cJSON *tr = jin_get_object(j, root, "train", false);
  if (!tr) return j->errors == 0;
  static const char *const KEYS[] = {"global_batch", "precision", "optimizer", "method", "lora",
                                     NULL};
  jin_push_key(j, "train", 0);
  bool ok = jin_only(j, tr, KEYS, NULL) == 0;
  ok &= jin_get_int(j, tr, "global_batch", 1, 1LL << 32, false, &t->global_batch) >= 0;
  int p = 0, opt = WL_ADAMW, meth = WL_FULL;
  if (jin_get_enum(j, tr, "precision", wl_precision_names, false, &p) < 0) ok = false;
  graph_dtype dt = GDT_BF16;
  wl_precision_parse(wl_precision_names[p], &dt);
  set_precision(t, dt);
  ok &= jin_get_enum(j, tr, "optimizer", OPTIMIZER, false, &opt) >= 0;
  t->optimizer = (wl_optimizer)opt;
  ok &= jin_get_enum(j, tr, "method", wl_method_names, false, &meth) >= 0;
  t->method = (wl_method)meth;
  const cJSON *lora = jin_get_object(j, tr, "lora", false);
  if (lora) {
    t->lora_given = true;
    jin_push_key(j, "lora", 0);
    ok &= read_lora(j, lora, t);
    jin_pop(j);
  }
  jin_pop(j);
  return ok;
}

static bool read_requires(jin *j, const cJSON *root, unsigned *req) {
  const cJSON *r = jin_get_array(j, root, "requires", false);
  if (!r) return j->errors == 0;
  bool ok = true;
  jin_push_key(j, "requires", 0);
  int i = 0;
  for (const cJSON *e = r->child; e; e = e->next, i++) {
    int k = -1;
    if (cJSON_IsString(e))
      for (int c = 0; wl_requirement_names[c]; c++)
        if (strcmp(wl_requirement_names[c], e->valuestring) == 0) k = c;
    if (k < 0) {
      jin_push_index(j, i);
      jin_error(j, 0, "expected \"fp64\", \"custom_cuda_kernels\" or \"tree_libraries\"");
      jin_pop(j);
      ok = false;
    } else {
      *req |= 1u << k;
    }
  }
  jin_pop(j);
  return ok;
}

/* --lora-targets: comma-separated module names into t's targets. */
static bool set_targets(wl_train *t, const char *list, diag *dg) {
  int n = 0;
  for (const char *p = list;; p++) {
    const char *e = p + strcspn(p, ",");
    size_t len = (size_t)(e - p);
    if (len == 0 || len >= sizeof t->targets[0]) {
      diag_error(dg, "--lora-targets", 0, 0, NULL,
                 "'%.80s': expected module names (q, k, v, o, gate, up, down, ...) "
                 "separated by commas, each 1 to %zu characters",
                 list, sizeof t->targets[0] - 1);
      return false;
    }
    if (n == WL_MAX_TARGETS) {
      diag_error(dg, "--lora-targets", 0, 0, NULL, "'%.80s': at most %d modules", list,
                 WL_MAX_TARGETS);
      return false;
    }
    snprintf(t->targets[n++], sizeof t->targets[0], "%.*s", (int)len, p);
    if (!*e) break;
    p = e;
  }
  t->n_targets = n;
  return true;
}

static bool apply_finetune(model *m, const model_opts *o, diag *dg) {
  if (!o) return true;
  if (o->finetune && wl_method_parse(o->finetune, strlen(o->finetune), &m->train.method) != 0) {
    diag_error(dg, "--finetune", 0, 0, NULL, "'%.40s': expected full, lora or qlora", o->finetune);
    return false;
  }
  /* a framework's defaults give way to the file's own lora block */
  if (o->lora_lenient && m->train.lora_given) return true;
  if (o->lora_rank > 0) m->train.lora_rank = o->lora_rank;
  if (!o->lora_targets) return true;
  m->train.lora_lenient = o->lora_lenient;
  return set_targets(&m->train, o->lora_targets, dg);
}

/* Under LoRA each target must name a linear module the model has, or the
** adapters it meant are silently missing (log: what the build asked
** wl_is_target); default targets (the framework's, or q and v:
** m->train.lora_lenient) are skipped where the model lacks them, as the
** libraries match modules by name, but one of them must match. */
static bool targets_found(const model *m, const struct wl_lora_log *log, diag *dg) {
  if (m->train.method == WL_FULL) return true;
  int found = 0;
  const char *missing = NULL;
  for (int t = 0; t < m->train.n_targets; t++) {
    bool hit = log->hits & (1u << t);
    found += hit;
    if (!hit && !missing) missing = m->train.targets[t];
  }
  if (!missing || (m->train.lora_lenient && found > 0)) return true;
  char mods[300] = "";
  size_t k = 0;
  for (int i = 0; i < log->n_modules && k + 20 < sizeof mods; i++)
    k += (size_t)snprintf(mods + k, sizeof mods - k, "%s%s", i ? ", " : "", log->modules[i]);
  if (m->train.lora_lenient)
    diag_error(dg, m->path, 0, 0, NULL,
               "none of the default LoRA targets (the framework's, else q and v) is a linear "
               "module of %s (its modules: %s); name them with --lora-targets", m->name,
               mods[0] ? mods : "none");
  else
    diag_error(dg, m->path, 0, 0, NULL,
               "LoRA target '%s' is none of %s's linear modules (%s; or linear_qkv, linear_proj, "
               "linear_fc1, linear_fc2 as Megatron-Core names them, q_proj ... down_proj as HF PEFT)",
               missing, m->name, mods[0] ? mods : "none");
  return false;
}

static bool apply_opts(model *m, const model_opts *o, diag *dg) {
  m->train.shard_tp = o && o->shard_tp > 1 ? o->shard_tp : 1;
  m->train.only_layers = o ? o->only_layers : 0;
  m->train.one_kind = o && o->one_kind;
  m->train.layer_kind = o ? o->layer_kind : 0;
  m->train.shard_cp = o && o->shard_cp > 1 ? o->shard_cp : 1;
  m->train.shard_ep = o && o->shard_ep > 0 ? o->shard_ep : 0;
  m->train.shard_etp = o && o->shard_etp > 1 ? o->shard_etp : 1;
  m->train.ep_load = o && o->ep_load > 1 ? o->ep_load : 1;
  m->train.kv_cache = o && o->kv_cache > 0 ? o->kv_cache : 0;
  m->train.weight_dtype = o ? o->weight_dtype : GDT_PRED;
  m->train.kv_dtype = o ? o->kv_dtype : GDT_PRED;
  m->train.inference = o && o->inference;
  m->train.act_dtype = o ? o->act_dtype : GDT_PRED;
  if (!apply_finetune(m, o, dg)) return false;
  if (o && o->seq_len > 0) m->train.seq_len = o->seq_len;
  if (o && o->global_batch > 0) m->train.global_batch = o->global_batch;
  if (o && o->precision) {
    graph_dtype dt;
    if (wl_precision_parse(o->precision, &dt) != 0) {
      diag_error(dg, m->path, 0, 0, NULL,
                 "precision '%s': expected bf16, fp16, fp32, fp64 or fp8", o->precision);
      return false;
    }
    set_precision(&m->train, dt);
  }
  return true;
}

/* ---- building ---- */

static int build(model *m, wl_family_fn fn, jin *j, const cJSON *spec, const model_opts *o) {
  if (!apply_opts(m, o, j->dg)) return -1;
  m->g = graph_new(m->name);
  if (!m->g) return -1;
  struct wl_lora_log log = {0};
  m->train.lora_log = &log;
  m->loss = fn(m->g, j, spec, &m->train, &m->info);
  m->train.lora_log = NULL;
  if (m->loss < 0 || !graph_ok(m->g)) return -1;
  /* the adapters are checked on a whole model: a shard of some layers may
  ** lack a module the model has, and its weights' sides are its split */
  bool whole = !(o && (o->only_layers > 0 || o->shard_tp > 1 || o->shard_cp > 1 || o->shard_ep > 1));
  if (whole && !targets_found(m, &log, j->dg)) return -1;
  /* a rank past an adapted weight's smaller side is a full-rank update
  ** with more weights than the matrix: not LoRA (Hu et al. 2021: r <<
  ** min(d, k)) */
  if (whole && log.min_side > 0 && m->train.lora_rank > log.min_side) {
    diag_error(j->dg, m->path, 0, 0, NULL,
               "LoRA rank %lld (--lora-rank, or the file's train.lora.rank): above the smaller "
               "side of the adapted weight %s (%lld); a LoRA rank is at most that, and in "
               "practice 8-256",
               (long long)m->train.lora_rank, log.min_name, (long long)log.min_side);
    return -1;
  }
  if (m->train.compute == GDT_F64) m->info.requires |= WL_REQ_FP64;
  if (!m->info.whole_step && !(o && o->forward_only) && train_build(m->g, m->loss, &m->train) != 0)
    return -1;
  int64_t adapters = graph_param_elements(m->g, GRAPH_WEIGHT | GRAPH_ADAPTER);
  m->params = graph_param_elements(m->g, GRAPH_WEIGHT) - adapters;
  m->trainable_params = graph_param_elements(m->g, GRAPH_WEIGHT | GRAPH_TRAINABLE);
  m->active_params = m->info.active_params ? m->info.active_params - adapters : m->params;
  m->expert_params = m->info.tf.expert_params;
  return 0;
}

static void copy_graph_errors(model *m, diag *dg) {
  const diag *gd = m->g ? graph_diag(m->g) : NULL;
  for (int i = 0; gd && i < diag_count(gd); i++)
    if (diag_message(gd, i)) diag_error(dg, m->path, 0, 0, NULL, "%s", diag_message(gd, i));
}

/* The settings read so far (the train block, requires) as the spec every
** derived model starts from; the parsed text is moved in by model_load. */
static int keep_spec(model *m, wl_family_fn fn, bool needs_seq) {
  m->spec = calloc(1, sizeof *m->spec);
  if (!m->spec) return -1;
  m->owns_spec = true;
  m->spec->build = fn;
  m->spec->train = m->train;
  m->spec->requires = m->info.requires;
  m->spec->needs_seq = needs_seq;
  return 0;
}

/* model.json: {"family": ..., family fields, "train": {...}} */
static int load_model_json(model *m, jin *j, const model_opts *o) {
  const cJSON *root = j->root;
  const char *family = NULL, *name = NULL;
  if (jin_get_str(j, root, "family", true, &family) < 0) return -1;
  if (jin_get_str(j, root, "name", false, &name) < 0) return -1;
  if (name) str_copy(m->name, sizeof m->name, name);
  str_copy(m->family, sizeof m->family, family);
  str_copy(m->format, sizeof m->format, "model.json");
  int f = -1;
  for (int i = 0; i < NFAMILIES; i++)
    if (strcmp(FAMILIES[i].name, family) == 0) f = i;
  if (f < 0) {
    char list[256] = "";
    for (int i = 0; i < NFAMILIES; i++) {
      strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
      strncat(list, FAMILIES[i].name, sizeof list - strlen(list) - 1);
    }
    jin_push_key(j, "family", 0);
    jin_error(j, 0, "unknown family \"%s\"; expected one of: %s", family, list);
    jin_pop(j);
    return -1;
  }
  bool ok = read_train(j, root, &m->train);
  ok &= read_requires(j, root, &m->info.requires);
  int64_t seq = 0;
  if (jin_get_int(j, root, "seq_len", 1, 1LL << 53, false, &seq) < 0) ok = false;
  if (seq > WL_MAX_SEQ) {
    jin_push_key(j, "seq_len", 0);
    jin_error(j, 0, "%lld is past tpusim's limit of %lld tokens: %s (docs/limits.md)",
              (long long)seq, WL_MAX_SEQ, WL_MAX_SEQ_WHY);
    jin_pop(j);
    ok = false;
  }
  if (seq > 0) m->train.seq_len = seq;
  if (!ok) return -1;
  bool needs_seq = strcmp(family, "transformer") == 0 && seq == 0;
  if (needs_seq && !(o && o->seq_len > 0)) {
    jin_error(j, 1, "missing field 'seq_len' (or pass --seq)");
    return -1;
  }
  if (keep_spec(m, FAMILIES[f].build, needs_seq) != 0) return -1;
  return build(m, FAMILIES[f].build, j, root, o);
}

/* ---- HuggingFace config.json ---- */

/* The model_type values read, as transformers spells them. Kimi K2 names
** its DeepSeek-V3 architecture "kimi_k2"; llama4 and gemma3 wrap the text
** model's config in text_config (the vision tower is not built). */
static const char *const HF_TYPES[] = {
    "llama",  "mistral", "mixtral",     "qwen2",  "qwen3",       "qwen3_moe", "deepseek_v3",
    "kimi_k2", "gpt_oss", "gemma2",     "gemma3_text", "gemma3", "llama4_text", "llama4",
    "nemotron", "gpt2",   "gpt_neox",   "bert",   "gemma4_text", "gemma4", "nemotron_h",
    "gemma",  "deepseek_v2", "qwen3_next", "deepseek_v32", "glm_moe_dsa", NULL};
enum {
  HF_LLAMA, HF_MISTRAL, HF_MIXTRAL, HF_QWEN2, HF_QWEN3, HF_QWEN3_MOE, HF_DEEPSEEK_V3,
  HF_KIMI_K2, HF_GPT_OSS, HF_GEMMA2, HF_GEMMA3_TEXT, HF_GEMMA3, HF_LLAMA4_TEXT, HF_LLAMA4,
  HF_NEMOTRON, HF_GPT2, HF_NEOX, HF_BERT, HF_GEMMA4_TEXT, HF_GEMMA4, HF_NEMOTRON_H, HF_GEMMA,
  HF_DEEPSEEK_V2, HF_QWEN3_NEXT, HF_DEEPSEEK_V32, HF_GLM_MOE_DSA, HF_NTYPES
};

static void put_int(cJSON *o, const char *k, int64_t v) { cJSON_AddNumberToObject(o, k, (double)v); }

/* An integer field, null read as absent (HF writes "sliding_window": null). */
static int hf_get(jin *j, const cJSON *hf, const char *from, bool required, int64_t *v) {
  if (!required && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(hf, from))) return 0;
  return jin_get_int(j, hf, from, required ? 1 : 0, 1LL << 24, required, v);
}

/* The note, in the translated object spec, that its member `to` was read
** from the config's key `from` at j's current path; hf_origin_take
** collects the notes (and takes them out) before the spec is built. */
#define HF_FROM "$from"
static void hf_note(jin *j, cJSON *spec, const char *from, const char *to) {
  char at[200], full[256];
  jin_path(j, at, sizeof at);
  snprintf(full, sizeof full, "%s%s%s", at, *at ? "." : "", from);
  cJSON *n = cJSON_GetObjectItemCaseSensitive(spec, HF_FROM);
  if (!n) n = cJSON_AddObjectToObject(spec, HF_FROM);
  if (n && !cJSON_GetObjectItemCaseSensitive(n, to)) cJSON_AddStringToObject(n, to, full);
}

/* Copies an integer field under a new name; required fields report where
** they are missing in the HF file. */
static bool hf_int(jin *j, const cJSON *hf, cJSON *spec, const char *from, const char *to,
                   bool required) {
  int64_t v;
  int r = hf_get(j, hf, from, required, &v);
  if (r > 0) put_int(spec, to, v), hf_note(j, spec, from, to);
  return r >= 0;
}

/* The same, with transformers' default for a field its configs leave out
** (Gemma 3's published text_config gives no vocab_size, for one). */
static bool hf_int_or(jin *j, const cJSON *hf, cJSON *spec, const char *from, const char *to,
                      int64_t dflt) {
  int64_t v = dflt;
  int r = hf_get(j, hf, from, false, &v);
  put_int(spec, to, v);
  if (r > 0) hf_note(j, spec, from, to);
  return r >= 0;
}

/* model_type, with the nearest known one for a misspelt name. */
static int hf_type(jin *j, const cJSON *root, int *type) {
  const char *mt;
  if (jin_get_str(j, root, "model_type", true, &mt) < 0) return -1;
  for (int i = 0; HF_TYPES[i]; i++)
    if (strcmp(HF_TYPES[i], mt) == 0) return *type = i, 0;
  char list[512] = "";
  for (int i = 0; HF_TYPES[i]; i++) {
    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
    strncat(list, HF_TYPES[i], sizeof list - strlen(list) - 1);
  }
  const char *near = str_suggest(mt, HF_TYPES, HF_NTYPES);
  jin_push_key(j, "model_type", 0);
  if (near)
    jin_error(j, 0, "unknown model_type \"%s\"; did you mean \"%s\"? (tpusim reads: %s)", mt, near,
              list);
  else
    jin_error(j, 0, "unknown model_type \"%s\"; tpusim reads: %s", mt, list);
  jin_pop(j);
  return -1;
}

/* The FFN from the activation (hidden_act, or Gemma's hidden_activation):
** a gated MLP (Llama, Gemma, the MoE experts) is SwiGLU for silu, GeGLU for
** gelu; an ungated one (Nemotron-4) GELU, ReLU or squared ReLU. */
static bool hf_ffn(jin *j, const cJSON *hf, cJSON *s, const char *key, const char *dflt,
                   bool gated) {
  const char *act = dflt;
  if (jin_get_str(j, hf, key, false, &act) < 0) return false;
  static const struct {
    const char *act, *gated, *plain;
  } ACTS[] = {{"silu", "swiglu", NULL},     {"swish", "swiglu", NULL},
              {"gelu", "geglu", "gelu"},    {"gelu_pytorch_tanh", "geglu", "gelu"},
              {"gelu_new", "geglu", "gelu"}, {"gelu_fast", "geglu", "gelu"},
              {"relu", NULL, "relu"},       {"relu2", NULL, "relu2"}};
  for (size_t i = 0; i < sizeof ACTS / sizeof *ACTS; i++) {
    const char *ffn = gated ? ACTS[i].gated : ACTS[i].plain;
    if (strcmp(ACTS[i].act, act) != 0 || !ffn) continue;
    cJSON_AddStringToObject(s, "ffn", ffn);
    return true;
  }
  jin_push_key(j, key, 0);
  jin_error(j, 0, "\"%s\" in %s MLP is not modelled; expected %s", act,
            gated ? "a gated" : "an ungated",
            gated ? "silu (SwiGLU) or gelu, gelu_pytorch_tanh, gelu_new (GeGLU)"
                  : "gelu, gelu_pytorch_tanh, gelu_new, relu or relu2 (squared ReLU)");
  jin_pop(j);
  return false;
}

/* Which layers attend globally, from a per-layer list (layer_types:
** "full_attention" among "sliding_attention"s; Llama 4's no_rope_layers:
** 0, no RoPE, global): *every = N when layers N-1, 2N-1, ... are the global
** ones, 0 when none is. Other patterns are refused, naming the layer. */
static bool hf_pattern(jin *j, const cJSON *hf, const char *key, int64_t *every) {
  const cJSON *list = jin_get_array(j, hf, key, false);
  int n = cJSON_GetArraySize(list);
  if (!list || n == 0) return j->errors == 0;
  bool types = strcmp(key, "layer_types") == 0;
  int first = -1, i = 0;
  for (const cJSON *e = list->child; e && first < 0; e = e->next, i++)
    if (types ? cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0
              : cJSON_IsNumber(e) && e->valuedouble == 0)
      first = i;
  *every = first < 0 ? 0 : first + 1;
  i = 0;
  for (const cJSON *e = list->child; e; e = e->next, i++) {
    bool global = types ? cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0
                        : cJSON_IsNumber(e) && e->valuedouble == 0;
    bool local = types ? cJSON_IsString(e) && (strcmp(e->valuestring, "sliding_attention") == 0 ||
                                               strcmp(e->valuestring, "chunked_attention") == 0)
                       : cJSON_IsNumber(e) && e->valuedouble == 1;
    if ((global || local) && global == (*every > 0 && (i + 1) % *every == 0)) continue;
    jin_push_key(j, key, 0);
    jin_push_index(j, i);
    jin_error(j, 0, "layer %d breaks the pattern: tpusim models every %lld-th layer global and "
                    "the others local (%s)", i, (long long)*every,
              types ? "\"full_attention\" / \"sliding_attention\"" : "0: global, 1: local");
    jin_pop(j);
    jin_pop(j);
    return false;
  }
  return true;
}

/* Qwen3-Next (Qwen3NextConfig, model_type qwen3_next): Gated DeltaNet
** mixers in every layer but each full_attention_interval-th (layer_types
** where the config writes them out), a gated attention (q_proj also writes
** an output gate: attn_output_gate) with RoPE on partial_rotary_factor of
** each head (0.25, the config class's default when absent), and the
** linear-attention sizes under their own names. */
static bool hf_gdn(jin *j, const cJSON *hf, cJSON *s) {
  static const char *const COPY[] = {"full_attention_interval", "linear_num_key_heads",
                                     "linear_num_value_heads", "linear_key_head_dim",
                                     "linear_value_head_dim", "linear_conv_kernel_dim", NULL};
  bool ok = true;
  for (int i = 0; COPY[i]; i++) ok &= hf_int(j, hf, s, COPY[i], COPY[i], false);
  /* what the builder checks again, checked here so the errors point into this file */
  int64_t layers = 0, every = 0, kh = 16, vh = 32;
  ok &= hf_get(j, hf, "num_hidden_layers", false, &layers) >= 0;
  ok &= hf_get(j, hf, "full_attention_interval", false, &every) >= 0;
  ok &= hf_get(j, hf, "linear_num_key_heads", false, &kh) >= 0;
  ok &= hf_get(j, hf, "linear_num_value_heads", false, &vh) >= 0;
  if (ok && layers > 0 && every > layers) {
    jin_push_key(j, "full_attention_interval", 0);
    jin_error(j, 0, "%lld is past the %lld layers: expected 2 to %lld (every N-th layer attention)",
              (long long)every, (long long)layers, (long long)layers);
    jin_pop(j);
    ok = false;
  }
  if (ok && kh > 0 && vh % kh) {
    jin_push_key(j, "linear_num_value_heads", 0);
    jin_error(j, 0, "%lld is not a multiple of linear_num_key_heads %lld (each key head serves "
                    "as many value heads)", (long long)vh, (long long)kh);
    jin_pop(j);
    ok = false;
  }
  /* layer_types, where written out, must be the interval's pattern: read
  ** here, so its errors point into this file */
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(hf, "layer_types");
  every = 0;
  if (ok && lt && !cJSON_IsNull(lt)) {
    int i = 0;
    for (const cJSON *e = lt->child; e && every == 0; e = e->next, i++)
      if (cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0) every = i + 1;
    i = 0;
    for (const cJSON *e = cJSON_IsArray(lt) ? lt->child : NULL; e && ok; e = e->next, i++) {
      bool full = cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0;
      bool lin = cJSON_IsString(e) && strcmp(e->valuestring, "linear_attention") == 0;
      if ((full || lin) && every > 0 && full == ((i + 1) % every == 0)) continue;
      jin_push_key(j, "layer_types", 0);
      jin_push_index(j, i);
      if (every == 0)
        jin_error(j, 0, "no \"full_attention\" layer: tpusim models Gated DeltaNet hybrids whose "
                        "every N-th layer is attention");
      else
        jin_error(j, 0, "layer %d breaks the pattern: tpusim models every %lld-th layer "
                        "\"full_attention\" and the others \"linear_attention\" (Gated DeltaNet)",
                  i, (long long)every);
      jin_pop(j);
      jin_pop(j);
      ok = false;
    }
    if (ok && every > 0 && !cJSON_GetObjectItemCaseSensitive(s, "full_attention_interval"))
      put_int(s, "full_attention_interval", every);
  }
  if (!cJSON_GetObjectItemCaseSensitive(s, "full_attention_interval") && every == 0)
    put_int(s, "full_attention_interval", 4); /* Qwen3NextConfig's default */
  cJSON_AddBoolToObject(s, "attn_output_gate", true);
  double frac = 0.25;
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(hf, "rope_parameters");
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(hf, "partial_rotary_factor");
  if (!cJSON_IsNumber(f) && cJSON_IsObject(rp)) f = cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor");
  if (cJSON_IsNumber(f)) frac = f->valuedouble;
  cJSON_AddNumberToObject(s, "partial_rotary_factor", frac);
  return ok;
}

/* Llama, Mistral, Mixtral, Qwen 2/3 (dense and MoE): SwiGLU, RMSNorm, RoPE, GQA. */
static bool hf_llama_like(jin *j, const cJSON *hf, cJSON *s, int type) {
  bool ok = hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
  ok &= hf_int(j, hf, s, "head_dim", "head_dim", false);
  ok &= hf_ffn(j, hf, s, "hidden_act", "silu", true);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "rotary");
  bool bias = type == HF_QWEN2; /* Qwen2Attention: q, k, v always have biases */
  ok &= jin_get_bool(j, hf, "attention_bias", false, &bias) >= 0;
  cJSON_AddBoolToObject(s, "qkv_bias", bias);
  if (type == HF_QWEN3 || type == HF_QWEN3_MOE || type == HF_QWEN3_NEXT)
    cJSON_AddBoolToObject(s, "qk_norm", true);
  if (type == HF_MISTRAL || type == HF_MIXTRAL) { /* every layer local when given */
    ok &= hf_int(j, hf, s, "sliding_window", "sliding_window", false);
  } else if (type != HF_LLAMA) {
    bool swa = false;
    ok &= jin_get_bool(j, hf, "use_sliding_window", false, &swa) >= 0;
    if (swa) {
      jin_push_key(j, "use_sliding_window", 0);
      jin_error(j, 0, "Qwen's sliding window from max_window_layers on is not modelled; "
                      "expected false (as Qwen's published configs have it)");
      jin_pop(j);
      ok = false;
    }
  }
  if (type == HF_MIXTRAL) {
    cJSON *moe = cJSON_AddObjectToObject(s, "moe");
    ok &= hf_int(j, hf, moe, "num_local_experts", "experts", true);
    ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
  }
  if (type == HF_QWEN3_NEXT) ok &= hf_gdn(j, hf, s);
  if (type == HF_QWEN3_MOE || type == HF_QWEN3_NEXT) {
    cJSON *moe = cJSON_AddObjectToObject(s, "moe");
    /* Qwen3NextSparseMoeBlock: its shared expert scaled by sigmoid(x w) */
    if (type == HF_QWEN3_NEXT) cJSON_AddBoolToObject(moe, "shared_expert_gate", true);
    ok &= hf_int(j, hf, moe, "num_experts", "experts", true);
    ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
    ok &= hf_int(j, hf, moe, "moe_intermediate_size", "moe_intermediate_size", true);
    ok &= hf_int(j, hf, moe, "shared_expert_intermediate_size", "shared_expert_intermediate_size",
                 false);
    /* Qwen3MoeDecoderLayer: MoE where (i + 1) % decoder_sparse_step == 0
    ** and i is not in mlp_only_layers, which tpusim takes as a prefix */
    ok &= hf_int(j, hf, moe, "decoder_sparse_step", "moe_layer_freq", false);
    const cJSON *only = jin_get_array(j, hf, "mlp_only_layers", false);
    int i = 0;
    for (const cJSON *e = only ? only->child : NULL; e; e = e->next, i++)
      if (!cJSON_IsNumber(e) || e->valuedouble != i) {
        jin_push_key(j, "mlp_only_layers", 0);
        jin_push_index(j, i);
        jin_error(j, 0, "expected %d: tpusim models dense layers as the first few (0, 1, ...)", i);
        jin_pop(j);
        jin_pop(j);
        return false;
      }
    if (i > 0) put_int(moe, "first_k_dense_replace", i);
  }
  return ok;
}

/* A training recipe's MTP depth, when a config carries it under
** Megatron-Core's names (mtp_num_layers, mtp_use_repeated_layer: the
** depth, run through the config's num_nextn_predict_layers modules in turn;
** transformer.c checks the pair). HF configs hold the modules only. */
static bool hf_mtp_recipe(jin *j, const cJSON *hf, cJSON *s) {
  bool ok = hf_int(j, hf, s, "mtp_num_layers", "mtp_num_layers", false), rep = false;
  int got = jin_get_bool(j, hf, "mtp_use_repeated_layer", false, &rep);
  if (got > 0) cJSON_AddBoolToObject(s, "mtp_use_repeated_layer", rep);
  return ok && got >= 0;
}

/* DeepSeek-V3 and Kimi K2 (DeepseekV3Config): MLA, shared and routed
** experts after the first dense layers, multi-token prediction; with
** DeepSeek sparse attention's indexer fields, DeepSeek-V3.2
** (deepseek_v32) and GLM-5 (glm_moe_dsa, GlmMoeDsaConfig: the same
** architecture and field names; its head_dim, qk_head_dim and
** mlp_layer_types restate qk_rope_head_dim, the query width and
** first_k_dense_replace, and are not read). */
static bool hf_deepseek(jin *j, const cJSON *hf, cJSON *s) {
  bool ok = hf_ffn(j, hf, s, "hidden_act", "silu", true);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "rotary");
  bool bias = false;
  ok &= jin_get_bool(j, hf, "attention_bias", false, &bias) >= 0;
  cJSON_AddBoolToObject(s, "qkv_bias", bias);
  ok &= hf_int(j, hf, s, "q_lora_rank", "q_lora_rank", false);
  ok &= hf_int(j, hf, s, "kv_lora_rank", "kv_lora_rank", true);
  ok &= hf_int(j, hf, s, "qk_nope_head_dim", "qk_nope_head_dim", true);
  ok &= hf_int(j, hf, s, "qk_rope_head_dim", "qk_rope_head_dim", true);
  ok &= hf_int(j, hf, s, "v_head_dim", "v_head_dim", true);
  ok &= hf_int(j, hf, s, "num_nextn_predict_layers", "num_nextn_predict_layers", false);
  ok &= hf_mtp_recipe(j, hf, s);
  static const char *const DSA[] = {"index_topk", "index_n_heads", "index_head_dim",
                                    "index_topk_freq", NULL};
  for (int i = 0; DSA[i]; i++) ok &= hf_int(j, hf, s, DSA[i], DSA[i], false);
  int64_t experts = 0, freq = 1;
  ok &= hf_get(j, hf, "n_routed_experts", false, &experts) >= 0;
  ok &= hf_get(j, hf, "moe_layer_freq", false, &freq) >= 0;
  if (freq != 1) { /* DeepSeek's rule (i % freq == 0) is not wl_tf_layer_kind's */
    jin_push_key(j, "moe_layer_freq", 0);
    jin_error(j, 0, "%lld: only 1 is modelled for DeepSeek (every layer past "
                    "first_k_dense_replace is MoE, as in every published DeepSeek model)",
              (long long)freq);
    jin_pop(j);
    return false;
  }
  if (!ok || experts == 0) return ok;
  cJSON *moe = cJSON_AddObjectToObject(s, "moe");
  put_int(moe, "experts", experts);
  ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
  ok &= hf_int(j, hf, moe, "moe_intermediate_size", "moe_intermediate_size", true);
  ok &= hf_int(j, hf, moe, "n_shared_experts", "n_shared_experts", false);
  ok &= hf_int(j, hf, moe, "first_k_dense_replace", "first_k_dense_replace", false);
  /* group-limited routing (DeepSeek-V3: 8 groups, 4 per token) */
  ok &= hf_int(j, hf, moe, "n_group", "n_group", false);
  ok &= hf_int(j, hf, moe, "topk_group", "topk_group", false);
  return ok;
}

/* GPT-OSS (GptOssConfig): MoE in every layer with biases on the experts,
** the router and attention, attention sinks, and sliding-window layers
** alternating with full ones. */
static bool hf_gpt_oss(jin *j, const cJSON *hf, cJSON *s) {
  bool ok = hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
  ok &= hf_int(j, hf, s, "head_dim", "head_dim", false);
  ok &= hf_ffn(j, hf, s, "hidden_act", "silu", true);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "rotary");
  cJSON_AddBoolToObject(s, "bias", true);
  cJSON_AddBoolToObject(s, "attention_sinks", true);
  cJSON *moe = cJSON_AddObjectToObject(s, "moe");
  ok &= hf_int(j, hf, moe, "num_local_experts", "experts", true);
  ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
  int64_t every = 2; /* GptOssConfig's default layer_types: sliding, full, ... */
  ok &= hf_int(j, hf, s, "sliding_window", "sliding_window", false);
  ok &= hf_pattern(j, hf, "layer_types", &every);
  if (ok && cJSON_GetObjectItemCaseSensitive(s, "sliding_window"))
    put_int(s, "sliding_window_pattern", every);
  return ok;
}

/* Gemma 2 and 3: GeGLU, RMSNorm before and after attention and MLP, tied
** embeddings, local layers (Gemma 2 alternating; Gemma 3 five local then
** one global), and per-head q/k norms in Gemma 3. Defaults are
** transformers' (Gemma2Config, Gemma3TextConfig), which Gemma 3's published
** text_config relies on for its vocabulary and pattern. */
static bool hf_gemma(jin *j, const cJSON *hf, cJSON *s, int type) {
  bool three = type == HF_GEMMA3_TEXT || type == HF_GEMMA4_TEXT;
  bool ok = hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
  ok &= hf_int_or(j, hf, s, "head_dim", "head_dim", 256);
  ok &= hf_ffn(j, hf, s, "hidden_activation", "gelu_pytorch_tanh", true);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "rotary");
  cJSON_AddBoolToObject(s, "sandwich_norm", true);
  if (three) cJSON_AddBoolToObject(s, "qk_norm", true);
  ok &= hf_int_or(j, hf, s, "sliding_window", "sliding_window", 4096);
  int64_t every = three ? 6 : 2;
  if (three) ok &= hf_get(j, hf, "sliding_window_pattern", false, &every) >= 0;
  ok &= hf_pattern(j, hf, "layer_types", &every);
  put_int(s, "sliding_window_pattern", every);
  /* Gemma 4's MoE block (enable_moe_block): routed experts beside the
  ** layer's dense MLP, which acts as an always-on shared expert. Its
  ** global layers' wider heads (global_head_dim, num_global_key_value_heads)
  ** are not built: every layer takes head_dim and the KV heads given */
  bool moe_block = false;
  if (type == HF_GEMMA4_TEXT) ok &= jin_get_bool(j, hf, "enable_moe_block", false, &moe_block) >= 0;
  if (moe_block) {
    cJSON *moe = cJSON_AddObjectToObject(s, "moe");
    ok &= hf_int(j, hf, moe, "num_experts", "experts", true);
    ok &= hf_int(j, hf, moe, "top_k_experts", "top_k", true);
    ok &= hf_int(j, hf, moe, "moe_intermediate_size", "moe_intermediate_size", true);
    ok &= hf_int(j, hf, moe, "intermediate_size", "shared_expert_intermediate_size", true);
  }
  return ok;
}

/* Llama 4 (Llama4TextConfig): MoE with one shared expert every
** interleave_moe_layer_step-th layer, dense layers intermediate_size_mlp
** wide, chunked local attention (attention_chunk_size) in the RoPE layers
** and global attention in the NoPE ones (every 4th by default). */
static bool hf_llama4(jin *j, const cJSON *hf, cJSON *s) {
  bool ok = hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
  ok &= hf_int(j, hf, s, "head_dim", "head_dim", false);
  ok &= hf_ffn(j, hf, s, "hidden_act", "silu", true);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "rotary");
  ok &= hf_int(j, hf, s, "intermediate_size_mlp", "ffn_hidden", true);
  cJSON *moe = cJSON_AddObjectToObject(s, "moe");
  ok &= hf_int(j, hf, moe, "num_local_experts", "experts", true);
  ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
  ok &= hf_int(j, hf, moe, "intermediate_size", "moe_intermediate_size", true);
  ok &= hf_int(j, hf, moe, "intermediate_size", "shared_expert_intermediate_size", true);
  ok &= hf_int(j, hf, moe, "interleave_moe_layer_step", "moe_layer_freq", false);
  int64_t chunk = 0, every = 4;
  ok &= hf_get(j, hf, "attention_chunk_size", false, &chunk) >= 0;
  ok &= hf_get(j, hf, "no_rope_layer_interval", false, &every) >= 0;
  ok &= hf_pattern(j, hf, "no_rope_layers", &every);
  if (chunk > 0) {
    put_int(s, "attention_chunk_size", chunk);
    put_int(s, "sliding_window_pattern", every);
  }
  return ok;
}

/* Nemotron-H and Nemotron 3 (NemotronHConfig, model_type nemotron_h): a
** hybrid of Mamba-2, attention, MoE and MLP layers, one sub-block a layer,
** in the order hybrid_override_pattern gives (M, *, E, -); RMSNorm, no
** position embedding in attention (Megatron-Bridge's NemotronHBridge sets
** position_embedding_type "none"), squared-ReLU MLPs and experts
** (mlp_hidden_act relu2), no biases, routed experts with one shared
** expert, and Super's latent MoE (moe_latent_size). The pattern is
** checked here, so its errors point into this file. */
static bool hf_nemotron_h(jin *j, const cJSON *hf, cJSON *s) {
  int64_t layers = 0, n[4] = {0, 0, 0, 0};
  bool ok = hf_get(j, hf, "num_hidden_layers", true, &layers) > 0;
  ok = ok && wl_hybrid_check(j, hf, "hybrid_override_pattern", layers, n) > 0;
  if (!ok) {
    if (j->errors == 0) jin_error(j, 1, "missing field 'hybrid_override_pattern' (one of %s a layer)",
                                  WL_HYBRID_CHARS);
    return false;
  }
  cJSON_AddStringToObject(s, "hybrid_override_pattern",
                          cJSON_GetObjectItemCaseSensitive(hf, "hybrid_override_pattern")->valuestring);
  ok &= hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
  ok &= hf_int(j, hf, s, "head_dim", "head_dim", false);
  ok &= hf_ffn(j, hf, s, "mlp_hidden_act", "relu2", false);
  cJSON_AddStringToObject(s, "norm", "rmsnorm");
  cJSON_AddStringToObject(s, "positions", "none");
  bool need_m = n[0] > 0;
  ok &= hf_int(j, hf, s, "mamba_num_heads", "mamba_num_heads", need_m);
  ok &= hf_int(j, hf, s, "mamba_head_dim", "mamba_head_dim", need_m);
  ok &= hf_int(j, hf, s, "ssm_state_size", "ssm_state_size", need_m);
  ok &= hf_int(j, hf, s, "n_groups", "n_groups", false);
  ok &= hf_int(j, hf, s, "conv_kernel", "conv_kernel", false);
  ok &= hf_int(j, hf, s, "chunk_size", "chunk_size", false);
  if (n[3] > 0) ok &= hf_int(j, hf, s, "intermediate_size", "ffn_hidden", true);
  /* Super's multi-token prediction: one module of mtp_hybrid_override_pattern's layers */
  int64_t mtp = 0;
  ok &= hf_get(j, hf, "num_nextn_predict_layers", false, &mtp) >= 0;
  const char *mp = NULL;
  ok &= jin_get_str(j, hf, "mtp_hybrid_override_pattern", false, &mp) >= 0;
  if (mtp > 0) put_int(s, "num_nextn_predict_layers", mtp), hf_note(j, s, "num_nextn_predict_layers", "num_nextn_predict_layers");
  if (mtp > 0 && mp) cJSON_AddStringToObject(s, "mtp_hybrid_override_pattern", mp);
  ok &= hf_mtp_recipe(j, hf, s);
  if (n[2] == 0) return ok;
  cJSON *moe = cJSON_AddObjectToObject(s, "moe");
  ok &= hf_int(j, hf, moe, "n_routed_experts", "experts", true);
  ok &= hf_int(j, hf, moe, "num_experts_per_tok", "top_k", true);
  ok &= hf_int(j, hf, moe, "moe_intermediate_size", "moe_intermediate_size", true);
  ok &= hf_int(j, hf, moe, "moe_shared_expert_intermediate_size", "shared_expert_intermediate_size",
               false);
  ok &= hf_int(j, hf, moe, "moe_latent_size", "moe_latent_size", false);
  return ok;
}

static cJSON *hf_to_spec(jin *j, const cJSON *hf, int type, bool tied_default, int64_t *default_seq) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "family", "transformer");
  bool ok = true;
  bool gpt2 = type == HF_GPT2;
  ok &= hf_int(j, hf, s, gpt2 ? "n_layer" : "num_hidden_layers", "layers", true);
  ok &= hf_int(j, hf, s, gpt2 ? "n_embd" : "hidden_size", "hidden", true);
  ok &= hf_int(j, hf, s, gpt2 ? "n_head" : "num_attention_heads", "heads", true);
  if (type == HF_GEMMA3_TEXT)
    ok &= hf_int_or(j, hf, s, "vocab_size", "vocab", 262208); /* Gemma3TextConfig's default */
  else
    ok &= hf_int(j, hf, s, "vocab_size", "vocab", true);
  const char *pos_key = gpt2 ? "n_positions" : "max_position_embeddings";
  if (type == HF_GEMMA3_TEXT) *default_seq = 131072; /* Gemma3TextConfig's default */
  ok &= hf_get(j, hf, pos_key, type == HF_BERT || gpt2, default_seq) >= 0;
  bool tied = tied_default;
  ok &= jin_get_bool(j, hf, "tie_word_embeddings", false, &tied) >= 0;
  cJSON_AddBoolToObject(s, "tied_embeddings", tied);
  if (gpt2) {
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(hf, "n_inner");
    if (inner && !cJSON_IsNull(inner)) ok &= hf_int(j, hf, s, "n_inner", "ffn_hidden", true);
  } else if (type != HF_LLAMA4_TEXT && type != HF_NEMOTRON_H) { /* Llama 4's is the experts';
                                                                 ** Nemotron-H's for its - layers */
    ok &= hf_int(j, hf, s, "intermediate_size", "ffn_hidden", true);
  }
  switch (type) {
  case HF_LLAMA:
  case HF_MISTRAL:
  case HF_MIXTRAL:
  case HF_QWEN2:
  case HF_QWEN3:
  case HF_QWEN3_MOE:
  case HF_QWEN3_NEXT: ok &= hf_llama_like(j, hf, s, type); break;
  case HF_DEEPSEEK_V2: /* DeepSeek-V2's MLA and MoE fields are V3's (V3 adds
                        ** sigmoid routing and MTP, which cost nothing here
                        ** or are read when present) */
  case HF_DEEPSEEK_V3:
  case HF_DEEPSEEK_V32:
  case HF_GLM_MOE_DSA:
  case HF_KIMI_K2: ok &= hf_deepseek(j, hf, s); break;
  case HF_GEMMA: /* Gemma (GemmaConfig): GeGLU, RMSNorm before attention and
                 ** MLP only, head_dim 256, global attention in every layer
                 ** (Gemma Team 2024, "Gemma: Open Models Based on Gemini
                 ** Research and Technology", sec. 2) */
    ok &= hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
    ok &= hf_int_or(j, hf, s, "head_dim", "head_dim", 256);
    ok &= hf_ffn(j, hf, s, "hidden_act", "gelu_pytorch_tanh", true);
    cJSON_AddStringToObject(s, "norm", "rmsnorm");
    cJSON_AddStringToObject(s, "positions", "rotary");
    break;
  case HF_GPT_OSS: ok &= hf_gpt_oss(j, hf, s); break;
  case HF_GEMMA2:
  case HF_GEMMA3_TEXT:
  case HF_GEMMA4_TEXT: ok &= hf_gemma(j, hf, s, type); break;
  case HF_LLAMA4_TEXT: ok &= hf_llama4(j, hf, s); break;
  case HF_NEMOTRON_H: ok &= hf_nemotron_h(j, hf, s); break;
  case HF_NEMOTRON: /* Nemotron-4: squared ReLU, not gated; LayerNorm1P (scale and bias) */
    ok &= hf_int(j, hf, s, "num_key_value_heads", "kv_heads", false);
    ok &= hf_int(j, hf, s, "head_dim", "head_dim", false);
    ok &= hf_ffn(j, hf, s, "hidden_act", "relu2", false);
    cJSON_AddStringToObject(s, "norm", "layernorm");
    cJSON_AddStringToObject(s, "positions", "rotary");
    break;
  case HF_GPT2:
    cJSON_AddStringToObject(s, "norm", "layernorm");
    cJSON_AddStringToObject(s, "positions", "learned");
    put_int(s, "max_positions", *default_seq);
    hf_note(j, s, pos_key, "max_positions"); /* required above */
    cJSON_AddBoolToObject(s, "bias", true);
    break;
  case HF_NEOX: {
    bool parallel = true;
    ok &= jin_get_bool(j, hf, "use_parallel_residual", false, &parallel) >= 0;
    cJSON_AddBoolToObject(s, "parallel_block", parallel);
    cJSON_AddStringToObject(s, "norm", "layernorm");
    cJSON_AddBoolToObject(s, "bias", true);
    break;
  }
  case HF_BERT:
    cJSON_AddStringToObject(s, "kind", "encoder");
    cJSON_AddStringToObject(s, "positions", "learned");
    put_int(s, "max_positions", *default_seq);
    hf_note(j, s, pos_key, "max_positions"); /* required above */
    ok &= hf_int(j, hf, s, "type_vocab_size", "type_vocab", false);
    cJSON_AddBoolToObject(s, "bias", true);
    break;
  }
  if (!ok) {
    cJSON_Delete(s);
    return NULL;
  }
  return s;
}

/* The text model's config: the file itself, or its text_config for the
** multimodal wrappers (llama4, gemma3), whose own model_type must then be
** the text one. *type becomes the text type; the path is left pushed
** ("text_config") for the caller to pop when *pushed. */
static const cJSON *hf_text_config(jin *j, int *type, bool *pushed) {
  *pushed = false;
  if (*type != HF_LLAMA4 && *type != HF_GEMMA3 && *type != HF_GEMMA4) return j->root;
  int text = *type == HF_LLAMA4 ? HF_LLAMA4_TEXT : *type == HF_GEMMA3 ? HF_GEMMA3_TEXT : HF_GEMMA4_TEXT;
  const cJSON *tc = jin_get_object(j, j->root, "text_config", true);
  if (!tc) return NULL;
  jin_push_key(j, "text_config", 0);
  *pushed = true;
  const char *mt = HF_TYPES[text];
  if (jin_get_str(j, tc, "model_type", false, &mt) < 0) return NULL;
  if (strcmp(mt, HF_TYPES[text]) != 0) {
    jin_push_key(j, "model_type", 0);
    jin_error(j, 0, "expected \"%s\" inside a \"%s\" config, got \"%s\"", HF_TYPES[text],
              HF_TYPES[*type], mt);
    jin_pop(j);
    return NULL;
  }
  *type = text;
  return tc;
}

/* Takes hf_note's notes out of the translated spec (every object under
** it, prefix its dotted path) into sp->origin: -1 when out of memory. */
static int hf_origin_take(cJSON *obj, const char *prefix, model_spec *sp) {
  cJSON *n = cJSON_DetachItemFromObjectCaseSensitive(obj, HF_FROM);
  int rc = 0;
  for (const cJSON *e = n ? n->child : NULL; e && rc == 0; e = e->next) {
    char *(*k)[2] = realloc(sp->origin.keys, (size_t)(sp->origin.n + 1) * sizeof *k);
    if (!k) {
      rc = -1;
      break;
    }
    sp->origin.keys = k;
    size_t len = strlen(prefix) + strlen(e->string) + 2;
    char *to = malloc(len), *from = strdup(e->valuestring);
    if (to) snprintf(to, len, "%s%s%s", prefix, *prefix ? "." : "", e->string);
    if (!to || !from) {
      free(to), free(from);
      rc = -1;
      break;
    }
    k[sp->origin.n][0] = to, k[sp->origin.n][1] = from;
    sp->origin.n++;
  }
  cJSON_Delete(n);
  for (cJSON *c = obj->child; c && rc == 0; c = c->next) {
    if (!cJSON_IsObject(c)) continue;
    char sub[256];
    snprintf(sub, sizeof sub, "%s%s%s", prefix, *prefix ? "." : "", c->string);
    rc = hf_origin_take(c, sub, sp);
  }
  return rc;
}

static int load_hf(model *m, jin *j, const model_opts *o, diag *dg) {
  int type;
  if (jin_no_duplicates(j, j->root) > 0 || hf_type(j, j->root, &type) < 0) return -1;
  str_copy(m->family, sizeof m->family, "transformer");
  str_copy(m->format, sizeof m->format, "hf-config");
  if (!read_train(j, j->root, &m->train)) return -1;
  int64_t seq = 0;
  bool pushed, wrapped = type == HF_LLAMA4 || type == HF_GEMMA3 || type == HF_GEMMA4;
  const cJSON *hf = hf_text_config(j, &type, &pushed);
  /* tied by default: GPT-2, BERT and Gemma (their configs' defaults); a
  ** wrapper's own tie_word_embeddings counts when its text_config has none */
  bool tied = type == HF_GPT2 || type == HF_BERT || type == HF_GEMMA || type == HF_GEMMA2 ||
              type == HF_GEMMA3_TEXT ||
              type == HF_GEMMA4_TEXT;
  if (hf && wrapped && jin_get_bool(j, j->root, "tie_word_embeddings", false, &tied) < 0) hf = NULL;
  cJSON *spec = hf ? hf_to_spec(j, hf, type, tied, &seq) : NULL;
  if (pushed) jin_pop(j);
  if (!spec) return -1;
  if (seq > 0) m->train.seq_len = seq;
  if (o && o->seq_len > 0) m->train.seq_len = o->seq_len;
  if (m->train.seq_len <= 1 && !(o && o->seq_len > 0)) { /* 1 is the unset default; --seq 1 is asked */
    cJSON_Delete(spec);
    diag_error(dg, m->path, 0, 0, NULL,
               "no sequence length: the config has no max_position_embeddings; pass --seq");
    return -1;
  }
  put_int(spec, "seq_len", m->train.seq_len);
  /* The builder reads the translated spec; its messages point into the
  ** config where the field was read from it (jin.origin), else name the
  ** config and the translated field. The spec keeps both for model_derive. */
  if (keep_spec(m, wl_transformer, seq <= 0) != 0 || hf_origin_take(spec, "", m->spec) != 0 ||
      !(m->spec->origin_file = strdup(m->path)) || !(m->spec->origin_text = strdup(j->text))) {
    cJSON_Delete(spec);
    return -1;
  }
  m->spec->origin.file = m->spec->origin_file;
  m->spec->origin.text = m->spec->origin_text;
  m->spec->origin.len = strlen(j->text);
  char *text = cJSON_PrintUnformatted(spec);
  cJSON_Delete(spec);
  if (!text) return -1;
  /* as for a model.json: the spec holds what the file says (its positions),
  ** not this load's --seq, which a derived model is given again or not */
  m->spec->train.seq_len = seq > 0 ? seq : 1;
  size_t n = strlen(m->path) + sizeof " (as model.json)";
  m->spec->jname = malloc(n);
  int rc = -1;
  if (m->spec->jname) {
    snprintf(m->spec->jname, n, "%s (as model.json)", m->path);
    if (jin_open(&m->spec->j, m->spec->jname, text, strlen(text), dg) == 0) {
      m->spec->j.origin = &m->spec->origin;
      rc = build(m, wl_transformer, &m->spec->j, m->spec->j.root, o);
    }
  }
  free(text);
  return rc;
}

/* ---- finding and telling formats apart ---- */

static const char *read_source(const char *arg, model *m, char **owned, size_t *len, diag *dg) {
  /* stat, not fopen: opening a FIFO blocks until a writer comes; a path
  ** that exists is read only if it is a regular file within the limit */
  struct stat st;
  if (stat(arg, &st) == 0) {
    m->path = strdup(arg);
    *owned = m->path ? jin_read_regular(arg, MODEL_FILE_MAX_BYTES,
                                        "a model (model.json, HuggingFace config.json or HLO text)",
                                        "the largest real HLO dumps are megabytes", len, dg)
                     : NULL;
    return *owned;
  }
  static const char *const SUFFIXES[] = {".json", ".hlo", NULL};
  const embedded_file *e = strchr(arg, '/') ? NULL
                                            : embedded_find(wl_example_files,
                                                            wl_example_files_count, arg, SUFFIXES);
  if (!e) {
    char names[2048];
    model_example_names(names, sizeof names);
    /* the nearest example name, for a misspelt one ("llama3-8" -> "llama3-8b") */
    char stems[64][64];
    const char *cands[64];
    int n = 0;
    for (int i = 0; i < wl_example_files_count && n < 64; i++) {
      const char *f = strrchr(wl_example_files[i].file, '/');
      f = f ? f + 1 : wl_example_files[i].file;
      snprintf(stems[n], sizeof stems[n], "%.*s", (int)strcspn(f, "."), f);
      cands[n] = stems[n];
      n++;
    }
    const char *near = strchr(arg, '/') ? NULL : str_suggest(arg, cands, n);
    if (near)
      diag_error(dg, arg, 0, 0, NULL, "no such file, and no example of that name; did you mean "
                 "'%s'? (examples: %s)", near, names);
    else
      diag_error(dg, arg, 0, 0, NULL, "no such file, and no example of that name (examples: %s)",
                 names);
    return NULL;
  }
  m->path = strdup(e->file);
  if (!m->path) return NULL;
  *len = e->len;
  return (const char *)e->data;
}

/* The member `name` of obj, or NULL; a name not there is reported with
** the nearest member's name. */
static cJSON *set_member(cJSON *obj, const char *name, const char *what, const char *file,
                         diag *dg) {
  cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (it) return it;
  const char *cands[256];
  int n = 0;
  for (cJSON *c = obj->child; c && n < 256; c = c->next)
    if (c->string) cands[n++] = c->string;
  const char *near = str_suggest(name, cands, n);
  diag_error(dg, "--set", 0, 0, NULL, "'%s': %s has no field '%s'%s%s%s (--set replaces a field "
             "the file has; it adds none)", what, file, name, near ? "; did you mean '" : "",
             near ? near : "", near ? "'?" : "");
  return NULL;
}

/* One --set FIELD=VALUE on the parsed file: a file stands for other sizes
** of its family (a Llama 2 7B config.json with num_hidden_layers=80,
** hidden_size=8192, ... is Llama 2 70B), which is how `tpusim validate`
** writes a published row of a size no file holds. Only a field the file
** has, with a value of its JSON type: a misspelt field or a string where a
** number belongs is refused here, where the flag can be named, rather than
** read as something else. */
static int apply_set(cJSON *root, const char *arg, const char *file, diag *dg) {
  const char *eq = strchr(arg, '=');
  char path[128];
  if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof path) {
    diag_error(dg, "--set", 0, 0, NULL, "'%.60s': expected FIELD=VALUE (e.g. "
               "num_hidden_layers=80, or train.global_batch=1024)", arg);
    return -1;
  }
  snprintf(path, sizeof path, "%.*s", (int)(eq - arg), arg);
  const char *val = eq + 1;
  cJSON *obj = root;
  char *leaf = path, *dot = strchr(path, '.');
  if (dot) { /* one object down */
    *dot = '\0';
    leaf = dot + 1;
    cJSON *o = set_member(root, path, arg, file, dg);
    if (!o) return -1;
    if (!cJSON_IsObject(o) || strchr(leaf, '.')) {
      diag_error(dg, "--set", 0, 0, NULL, "'%s': '%s' is not an object of %s with field '%s' "
                 "(FIELD is a top-level field or OBJECT.FIELD)", arg, path, file, leaf);
      return -1;
    }
    obj = o;
  }
  cJSON *old = set_member(obj, leaf, arg, file, dg);
  if (!old) return -1;
  cJSON *nv = cJSON_IsString(old) ? NULL : cJSON_ParseWithOpts(val, NULL, 1);
  if (!nv && (cJSON_IsString(old) || cJSON_IsNull(old))) nv = cJSON_CreateString(val);
  bool same = nv && ((cJSON_IsNumber(old) && cJSON_IsNumber(nv)) ||
                     (cJSON_IsBool(old) && cJSON_IsBool(nv)) ||
                     (cJSON_IsString(old) && cJSON_IsString(nv)) || cJSON_IsNull(old) ||
                     (cJSON_IsArray(old) && cJSON_IsArray(nv)) ||
                     (cJSON_IsObject(old) && cJSON_IsObject(nv)));
  if (!same) {
    const char *kind = cJSON_IsNumber(old) ? "a number" : cJSON_IsBool(old) ? "true or false"
                       : cJSON_IsArray(old) ? "a JSON array" : cJSON_IsObject(old) ? "a JSON object"
                                                                   : "a string";
    diag_error(dg, "--set", 0, 0, NULL, "'%s': expected %s, as %s's '%s' is; found '%.60s'", arg,
               kind, file, leaf, val);
    cJSON_Delete(nv);
    return -1;
  }
  if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, leaf, nv)) {
    cJSON_Delete(nv);
    diag_error(dg, "--set", 0, 0, NULL, "out of memory");
    return -1;
  }
  return 0;
}

static int apply_sets(jin *j, const model_opts *o, diag *dg) {
  if (!o || o->n_set <= 0) return 0;
  if (o->n_set > MODEL_MAX_SETS) {
    diag_error(dg, "--set", 0, 0, NULL, "%d overrides: at most %d", o->n_set, MODEL_MAX_SETS);
    return -1;
  }
  for (int i = 0; i < o->n_set; i++)
    if (apply_set(j->root, o->set[i], j->file, dg) != 0) return -1;
  return 0;
}

static void default_name(model *m, const char *arg) {
  const char *base = strrchr(arg, '/');
  base = base ? base + 1 : arg;
  size_t len = strcspn(base, ".");
  snprintf(m->name, sizeof m->name, "%.*s", (int)len, base);
}

model *model_load(const char *arg, const model_opts *o, diag *dg) {
  model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->loss = -1;
  char *owned = NULL;
  size_t len = 0;
  const char *text = read_source(arg, m, &owned, &len, dg);
  if (!text) {
    model_free(m);
    return NULL;
  }
  default_name(m, m->path);
  size_t p = 0;
  while (p < len && strchr(" \t\r\n", text[p])) p++;
  int rc = -1;
  if (len - p >= 9 && strncmp(text + p, "HloModule", 9) == 0) {
    /* An HLO module is a whole step as XLA compiled it: no autodiff, and no
    ** telling weights from inputs (the text does not say), so parameters
    ** are reported as the total of the entry parameters. */
    if (o && o->finetune && strcmp(o->finetune, "full") != 0) {
      diag_error(dg, m->path, 0, 0, NULL,
                 "--finetune %s: an HLO module is one compiled step, its weights' gradients "
                 "already in it; fine-tune a model.json or a HuggingFace config.json",
                 o->finetune);
      free(owned);
      model_free(m);
      return NULL;
    }
    if (o && o->n_set > 0) { /* its sizes are the compiled shapes: nothing to override */
      diag_error(dg, "--set", 0, 0, NULL,
                 "--set %s: %s is an HLO module, whose sizes are its compiled shapes; --set "
                 "changes a model.json or a HuggingFace config.json",
                 o->set[0], m->path);
      free(owned);
      model_free(m);
      return NULL;
    }
    m->g = hlo_import(m->path, text, len, dg);
    if (m->g) {
      str_copy(m->family, sizeof m->family, "hlo");
      str_copy(m->format, sizeof m->format, "hlo");
      m->info.whole_step = true;
      m->info.devices = hlo_devices(text + p, len - p);
      m->info.unit = "steps";
      m->info.per_step = 1;
      m->train.global_batch = 1;
      for (int i = 0; i < graph_count(m->g); i++) {
        const graph_op *op = graph_get(m->g, i);
        if (op->kind == GOP_PARAMETER) m->params += graph_elements(&op->out);
      }
      m->trainable_params = m->active_params = m->params;
      rc = 0;
    }
  } else {
    jin j;
    if (jin_open(&j, m->path, text, len, dg) == 0) {
      if (!cJSON_IsObject(j.root)) {
        jin_error(&j, 0, "expected a JSON object (a model.json or a HuggingFace config.json)");
      } else if (apply_sets(&j, o, dg) != 0) {
        rc = -1;
      } else if (cJSON_GetObjectItemCaseSensitive(j.root, "family")) {
        rc = load_model_json(m, &j, o);
        if (rc == 0) { /* the parsed text moves into the spec, under a name of its own */
          m->spec->jname = strdup(m->path);
          if (!m->spec->jname) rc = -1;
          m->spec->j = j;
          m->spec->j.file = m->spec->jname;
          memset(&j, 0, sizeof j);
        }
      } else if (cJSON_GetObjectItemCaseSensitive(j.root, "model_type")) {
        rc = load_hf(m, &j, o, dg);
      } else {
        jin_error(&j, 0,
                  "neither a model.json (no \"family\") nor a HuggingFace config.json (no "
                  "\"model_type\")");
      }
    }
    jin_close(&j);
  }
  if (rc != 0) copy_graph_errors(m, dg);
  free(owned);
  if (rc != 0) {
    model_free(m);
    return NULL;
  }
  /* --finetune is the job's, as the file's train block: the models derived
  ** from this one (the simulator's per-chip shards) train so too */
  if (m->spec && o && (o->finetune || o->lora_rank > 0 || o->lora_targets)) {
    wl_train *st = &m->spec->train;
    st->method = m->train.method;
    st->lora_rank = m->train.lora_rank;
    st->lora_lenient = m->train.lora_lenient;
    st->n_targets = m->train.n_targets;
    memcpy(st->targets, m->train.targets, sizeof st->targets);
  }
  /* a changed file is another model: its name says so */
  if (o && o->n_set > 0) {
    char base[sizeof m->name];
    str_copy(base, sizeof base, m->name);
    snprintf(m->name, sizeof m->name, "%.58s+set", base);
  }
  return m;
}

model *model_derive(const model *m, const model_opts *o, diag *dg) {
  const model_spec *s = m->spec;
  if (!s) {
    diag_error(dg, m->path, 0, 0, NULL,
               "an HLO module is one compiled program: it is not rebuilt under other options");
    return NULL;
  }
  if (s->needs_seq && !(o && o->seq_len > 0)) {
    diag_error(dg, m->path, 0, 0, NULL, "missing field 'seq_len' (or pass --seq)");
    return NULL;
  }
  model *d = calloc(1, sizeof *d);
  if (!d || !(d->path = strdup(m->path))) {
    free(d);
    diag_error(dg, m->path, 0, 0, NULL, "out of memory");
    return NULL;
  }
  d->loss = -1;
  str_copy(d->name, sizeof d->name, m->name);
  str_copy(d->family, sizeof d->family, m->family);
  str_copy(d->format, sizeof d->format, m->format);
  d->spec = m->spec; /* borrowed */
  d->train = s->train;
  d->info.requires = s->requires;
  /* a reader of its own over the shared text and tree: the path stack and
  ** error count are per build, the tree is only read */
  jin j = s->j;
  j.dg = dg;
  j.depth = 0;
  j.errors = 0;
  if (build(d, s->build, &j, j.root, o) != 0) {
    copy_graph_errors(d, dg);
    model_free(d);
    return NULL;
  }
  return d;
}
