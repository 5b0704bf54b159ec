/*
** runs.c -- a table of runs (the columns of shared/reference/public-runs*.csv)
** and the mapping that turns each row into the `tpusim simulate` command a
** user would type (tests/validation/mapping.csv: data, not code), run
** in-process through simulate's own entry point (cli_main). Shared by
** `tpusim validate` and `tpusim calibrate --runs` (runs.h).
**
** Nothing here knows a row: the same rules turn every row into flags, and
** a row that simulate refuses is reported with simulate's own message.
*/
#include "runs.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../base/jin.h"
#include "../base/strutil.h"
#include "../sim/framework.h"

/* A table of runs is a few hundred rows; each row is one simulation, so a
** file past these limits is a mistake, refused before anything runs. */
#define RUNS_CSV_MAX_COLS 64
const csv_limits RUNS_CSV = {16u << 20, 10000, RUNS_CSV_MAX_COLS, "each row is a simulation"};

const char RUNS_DEFAULT_MAPPING[] = "tests/validation/mapping.csv";
const char RUNS_DEFAULT_MODELS[] = "tests/validation/models:tests/data/hf";

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The source tree tpusim was built in: the folder of its binary (Linux's
** /proc/self/exe), which the build puts at the tree's root, or the folder
** above it (a build folder's: build-asan/tpusim), whichever holds the
** default mapping; 0, or -1 and "" when neither does. */
static int tree_of_binary(char *out, size_t n) {
  char exe[RUNS_PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  out[0] = 0;
  if (len <= 0 || (size_t)len >= sizeof exe - 1) return -1;
  exe[len] = 0;
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    char probe[RUNS_PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/%s", exe, RUNS_DEFAULT_MAPPING);
    if (is_file(probe)) return snprintf(out, n, "%s", exe) < (int)n ? 0 : (out[0] = 0, -1);
  }
  return -1;
}

int runs_paths_of(cli_ctx *c, runs_paths *p) {
  const char *m = cli_opt(c, "--mapping"), *d = cli_opt(c, "--models");
  if (d && !*d) return cli_usage_error(c, "%s", "--models needs a folder (DIR or DIR:DIR:...)");
  p->mapping = m ? m : RUNS_DEFAULT_MAPPING;
  p->models = d ? d : RUNS_DEFAULT_MODELS;
  /* from the tree's root (make test, docs): the defaults as they are, so
  ** the commands validate prints stay the ones a user types there */
  char root[RUNS_PATH_MAX];
  if ((m && d) || is_file(RUNS_DEFAULT_MAPPING) || tree_of_binary(root, sizeof root))
    return CLI_OK;
  if (!m) {
    snprintf(p->mapping_buf, sizeof p->mapping_buf, "%s/%s", root, RUNS_DEFAULT_MAPPING);
    p->mapping = p->mapping_buf;
  }
  if (!d) {
    snprintf(p->models_buf, sizeof p->models_buf, "%s/tests/validation/models:%s/tests/data/hf",
             root, root);
    p->models = p->models_buf;
  }
  return CLI_OK;
}

/* ==== the mapping (tests/validation/mapping.csv) ==== */

/* a phrase part {COLUMN}=VALUE against a row, and a whole phrase (below,
** with the rows) */
static int column_part(const runs_row *w, const char *part);
static bool has_phrases(const runs_row *w, const char *phrase);

typedef enum { MAP_CHIP, MAP_DEVICES, MAP_FRAMEWORK, MAP_BATCH, MAP_MODEL, MAP_PRECISION,
               MAP_RECOMPUTE, MAP_DEFAULT, MAP_OFFLOAD, MAP_SP, MAP_ETP, MAP_FAMILY,
               MAP_COMPILE, MAP_TP_OVERLAP, MAP_EP_OVERLAP, MAP_FINETUNE, MAP_WEIGHT_DTYPE,
               MAP_VOCAB_TILING, MAP_ATTENTION, MAP_DISPATCHER, MAP_PP_LAYOUT, MAP_WGRAD_DEFERRAL,
               MAP_KINDS } map_kind;
static const char *const MAP_KIND_NAMES[] = {"chip",      "devices",   "framework", "batch",
                                             "model",     "precision", "recompute", "default",
                                             "offload",   "sp",        "etp",       "family",
                                             "compile",   "tp_overlap", "ep_overlap", "finetune",
                                             "weight_dtype", "vocab_tiling", "attention",
                                             "dispatcher", "pp_layout", "wgrad_deferral", NULL};

/* simulate's switches the mapping sets by FRAMEWORK:PHRASE, their values
** (NULL: a count from 1), the rows each applies to (need: 0 every row, 1
** tp > 1, 2 ep > 1, 3 pp > 1), and the word that goes in the docs table's
** features when the switch is at `note_when` (NULL: any value); `on`, a
** flag given before it (a switch whose value is a limit of another); `lo`,
** a count's least (0: Megatron-Core's limit, where 0 means all) */
static const char *const ONOFF[] = {"off", "on", NULL};
static const char *const WEIGHT_DTYPES[] = {"fp32", "bf16", NULL};
static const char *const ATTENTIONS[] = {"flash", "scores", NULL};
static const char *const DISPATCHERS[] = {"alltoall", "flex", NULL};
static const struct {
  map_kind kind;
  const char *flag;
  const char *const *values;
  const char *expect; /* the values, in a message */
  const char *note_when, *note;
  int need;
  const char *on;
  int lo;
} SWITCHES[] = {{MAP_COMPILE, "--compile", ONOFF, "on or off", "off", ", eager PyTorch", 0, NULL, 1},
                {MAP_TP_OVERLAP, "--tp-overlap", ONOFF, "on or off", "on", ", TP overlap", 1, NULL, 1},
                {MAP_EP_OVERLAP, "--ep-overlap", ONOFF, "on or off", "on", ", EP overlap", 2, NULL, 1},
                {MAP_WEIGHT_DTYPE, "--weight-dtype", WEIGHT_DTYPES, "fp32 or bf16", "bf16",
                 ", bf16 weights", 0, NULL, 1},
                {MAP_VOCAB_TILING, "--vocab-tiling", NULL, "a count", NULL, ", vocab tiling", 0, NULL, 1},
                {MAP_ATTENTION, "--attention", ATTENTIONS, "flash or scores", "scores",
                 ", attention scores in HBM", 0, NULL, 1},
                {MAP_DISPATCHER, "--moe-dispatcher", DISPATCHERS, "alltoall or flex", "alltoall",
                 ", alltoall dispatcher", 2, NULL, 1},
                {MAP_WGRAD_DEFERRAL, "--wgrad-deferral-limit", NULL, "a count", NULL,
                 ", output-layer wgrad deferred", 3, "--defer-embedding-wgrad-compute", 0}};

static int switch_index(map_kind k) {
  for (size_t i = 0; i < sizeof SWITCHES / sizeof *SWITCHES; i++)
    if (SWITCHES[i].kind == k) return (int)i;
  return -1;
}

static const char *switch_flag(map_kind k) {
  int i = switch_index(k);
  return i < 0 ? NULL : SWITCHES[i].flag;
}

typedef struct {
  map_kind kind;
  const csv_cell *key, *value;
  /* a model or default key, split: MODEL[/PARAMS_B][@FRAMEWORK], or a
  ** default's COLUMN:SOURCE (the rows whose source column starts so) */
  char name[64], framework[64], source[128];
  double params_b; /* 0: any */
  const char *phrase; /* a default's COLUMN:SOURCE+PHRASE: the phrase (in key), or NULL */
} map_entry;

/* The columns a `default` entry fills where a row says '?': what a
** framework does when its source is silent (docs/validation.md). */
static const char *const DEFAULT_COLS[] = {"mbs", "vp", "sp", "zero_or_fsdp", "recompute", NULL};
enum { DEFAULT_NCOLS = sizeof DEFAULT_COLS / sizeof *DEFAULT_COLS - 1 };

struct runs_mapping {
  csv_table t;
  map_entry *e;
  int n;
};

static void mapping_free(runs_mapping *m) {
  csv_free(&m->t);
  free(m->e);
}

/* Splits "gpt/175@maxtext" into its name, parameters and framework. */
static int split_key(map_entry *e, const char *file, diag *dg) {
  const char *k = e->key->s, *at = strchr(k, '@'), *sl = strchr(k, '/');
  size_t n = strcspn(k, "/@");
  if (n == 0 || n >= sizeof e->name || (at && strlen(at + 1) >= sizeof e->framework) ||
      (sl && at && sl > at)) {
    diag_error(dg, file, e->key->line, e->key->col, "key",
               "'%.80s': expected NAME[/PARAMS_B][@FRAMEWORK]", k);
    return -1;
  }
  memcpy(e->name, k, n);
  e->name[n] = '\0';
  if (at) strcpy(e->framework, at + 1);
  if (sl) {
    char *stop;
    e->params_b = strtod(sl + 1, &stop);
    if (stop == sl + 1 || (*stop && *stop != '@') || !(e->params_b > 0)) {
      diag_error(dg, file, e->key->line, e->key->col + (int)(sl + 1 - k), "key",
                 "'%.80s': expected a parameter count in billions after '/'", k);
      return -1;
    }
  }
  return 0;
}

/* A key's PHRASE (after its PREFIX: or SOURCE+): each {COLUMN}=VALUE part
** names a cell the phrase can test (column_part); 0, or -1 after a message
** at the key with the nearest column. */
static int check_phrase(const map_entry *e, const char *phrase, const char *file, diag *dg) {
  for (const char *p = phrase; *p;) {
    size_t n = strcspn(p, "+");
    char part[128];
    snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), p);
    if (part[0] == '{' && column_part(NULL, part) < 0) {
      static const char *const cols[] = {"model", "chip", "precision", "params_B", "chips", "tp"};
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)strcspn(part + 1, "}="), part + 1);
      const char *sg = str_suggest(name, cols, 6);
      bool near = sg && strcmp(sg, name) != 0;
      diag_error(dg, file, e->key->line, e->key->col, "key",
                 "'%.60s': expected {COLUMN}=VALUE with COLUMN one of model, chip, precision, "
                 "params_B (a number), chips or tp (counts), found '%s'%s%s%s", e->key->s, part,
                 near ? " (did you mean '{" : "", near ? sg : "", near ? "}'?)" : "");
      return -1;
    }
    p += n + (p[n] ? 1 : 0);
  }
  return 0;
}

/* A default's key: COLUMN, COLUMN@FRAMEWORK (the rows mapped to that
** --framework) or COLUMN:SOURCE (the rows whose source column starts with
** SOURCE at a word's end: a paper's stated practice for its own rows),
** COLUMN:SOURCE+PHRASE those of its rows that hold PHRASE as an offload's
** (a release's recipe for one model and chip: has_phrases). */
static int split_default_key(map_entry *e, const char *file, diag *dg) {
  const char *k = e->key->s, *colon = strchr(k, ':');
  if (!colon) {
    if (split_key(e, file, dg)) return -1;
    if (e->params_b > 0) {
      diag_error(dg, file, e->key->line, e->key->col, "key",
                 "'%.80s': expected COLUMN[@FRAMEWORK] or COLUMN:SOURCE (a default takes no "
                 "/PARAMS_B)", k);
      return -1;
    }
    return 0;
  }
  size_t n = (size_t)(colon - k), sn = strcspn(colon + 1, "+");
  const char *plus = colon[1 + sn] ? colon + 1 + sn : NULL;
  if (n == 0 || n >= sizeof e->name || sn == 0 || sn >= sizeof e->source || (plus && !plus[1])) {
    diag_error(dg, file, e->key->line, e->key->col, "key",
               "'%.80s': expected COLUMN:SOURCE[+PHRASE], a column, the start of a source cell "
               "and the phrases its rows hold", k);
    return -1;
  }
  memcpy(e->name, k, n);
  e->name[n] = '\0';
  memcpy(e->source, colon + 1, sn);
  e->source[sn] = '\0';
  e->phrase = plus ? plus + 1 : NULL;
  return e->phrase ? check_phrase(e, e->phrase, file, dg) : 0;
}

/* A word that must be one of names: 0, or -1 after a message at the value
** with the nearest choice. */
static int check_word(const map_entry *e, const char *file, const char *what,
                      const char *const *names, diag *dg) {
  int n = 0;
  while (names[n] && strcmp(names[n], e->value->s) != 0) n++;
  if (names[n]) return 0;
  char list[160] = "";
  for (int i = 0; names[i]; i++)
    runs_addf(list, sizeof list, "%s%s", i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
  const char *near = str_suggest(e->value->s, names, n);
  diag_error(dg, file, e->value->line, e->value->col, "value", "'%.40s': expected %s (%s)%s%s%s",
             e->value->s, list, what, near ? " (did you mean '" : "", near ? near : "",
             near ? "'?)" : "");
  return -1;
}

/* A finetune entry's value, METHOD[:TARGETS[:RANK]] (simulate's --finetune,
** --lora-targets and --lora-rank: the recipe's adapters where it sets
** them), split: the method's length, the targets (NULL: none) and their
** length, the rank (NULL: none); false when it is none of those. Its key is
** FRAMEWORK:PHRASE, checked with the switches'. */
typedef struct {
  int method_len, targets_len;
  const char *targets, *rank;
} finetune_value;

static bool finetune_split(const char *v, finetune_value *f) {
  const char *colon = strchr(v, ':');
  *f = (finetune_value){.method_len = (int)(colon ? colon - v : (ptrdiff_t)strlen(v))};
  if (colon) {
    f->targets = colon + 1;
    f->rank = strchr(f->targets, ':');
    f->targets_len = (int)(f->rank ? f->rank - f->targets : (ptrdiff_t)strlen(f->targets));
    if (f->rank) f->rank++;
  }
  wl_method m;
  char *end = NULL;
  long r = f->rank ? strtol(f->rank, &end, 10) : 1;
  bool rank_ok = !f->rank || (end != f->rank && !*end && r >= 1 && r <= 1 << 16);
  return wl_method_parse(v, (size_t)f->method_len, &m) == 0 &&
         (!f->targets || (m != WL_FULL && f->targets_len > 0)) && rank_ok;
}

/* A pp_layout value: Megatron-Core layouts split by ';' (a recipe's, one
** for each stage count it runs), each as --pp-layout reads it. The row's
** layout is the one with pp x vp stages (layout_for); two of one stage
** count are refused, as the row could take either. *bad_at: the offset in
** v of the layout refused. */
static int layout_for(const char *v, int64_t stages, char *out, size_t n, int *bad_at, char *err,
                      size_t errn) {
  static int32_t st[2048]; /* simulate's room */
  int seen[64], n_seen = 0;
  const char *v0 = v;
  out[0] = 0;
  *bad_at = 0;
  if (!*v) return str_errf(err, errn, "no layout: expected Megatron-Core layouts joined by ';'");
  for (;;) {
    size_t len = strcspn(v, ";");
    char one[512];
    *bad_at = (int)(v - v0);
    if (len == 0)
      return str_errf(err, errn, "an empty layout (';' twice, or at the value's start or end)");
    if (len >= sizeof one) return str_errf(err, errn, "a layout longer than %zu characters", sizeof one - 1);
    memcpy(one, v, len), one[len] = 0;
    int k;
    int64_t mtp;
    if (plan_pp_layout_parse(one, st, 2048, &k, &mtp, err, errn) != 0) return -1;
    for (int i = 0; i < n_seen; i++)
      if (seen[i] == k)
        return str_errf(err, errn, "'%.60s': a second layout of %d stage%s (layouts %d and %d); a "
                        "row of %d stage%s could take either: give one", one, k, k == 1 ? "" : "s",
                        i + 1, n_seen + 1, k, k == 1 ? "" : "s");
    if (n_seen == 64) return str_errf(err, errn, "more than 64 layouts");
    seen[n_seen++] = k;
    if (k == stages) snprintf(out, n, "%s", one);
    if (!v[len]) return 0;
    v += len + 1;
  }
}

static int check_layouts(const map_entry *e, const char *file, diag *dg) {
  char err[384], out[512];
  int at = 0;
  if (layout_for(e->value->s, 0, out, sizeof out, &at, err, sizeof err) == 0) return 0;
  /* the column of the layout refused: past the value's opening quote when
  ** it has one (a one-line value whose text is two longer than its own,
  ** and one more for each quote written doubled), and one further for each
  ** doubled quote before it */
  const csv_cell *c = e->value;
  int len = (int)strlen(c->s), quotes = 0, before = 0;
  for (int i = 0; i < len; i++) quotes += c->s[i] == '"', before += c->s[i] == '"' && i < at;
  int quoted = c->end_line == c->line && c->end_col - c->col == len + 2 + quotes;
  diag_error(dg, file, c->line, c->col + quoted + at + (quoted ? before : 0), "value", "%s", err);
  return -1;
}

static int check_finetune(const map_entry *e, const char *file, diag *dg) {
  finetune_value f;
  if (finetune_split(e->value->s, &f)) return 0;
  diag_error(dg, file, e->value->line, e->value->col, "value",
             "'%.40s': expected full, lora or qlora, the latter two with :TARGETS and :RANK if the "
             "recipe names them (simulate's --finetune, --lora-targets and --lora-rank; e.g. "
             "lora:linear_qkv or lora:linear_qkv,linear_proj:16)", e->value->s);
  return -1;
}

/* A default's key names one of DEFAULT_COLS, and its value is one a row's
** cell could hold there, in the form simulate takes: 0, or -1 after a
** message with the file's line:column and the nearest valid choice. */
static int check_default(const map_entry *e, const char *file, diag *dg) {
  static const char *const SP[] = {"0", "1", NULL};
  static const char *const ZERO[] = {"0", "1", "2", "3", "fsdp", NULL};
  char err[320];
  int64_t n;
  int c = 0;
  while (DEFAULT_COLS[c] && strcmp(DEFAULT_COLS[c], e->name) != 0) c++;
  if (!DEFAULT_COLS[c]) {
    const char *near = str_suggest(e->name, DEFAULT_COLS, DEFAULT_NCOLS);
    diag_error(dg, file, e->key->line, e->key->col, "key",
               "'%.40s': expected COLUMN, COLUMN@FRAMEWORK or COLUMN:SOURCE with COLUMN one of "
               "mbs, vp, sp, zero_or_fsdp or recompute (the columns a default fills)%s%s%s",
               e->name, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    return -1;
  }
  if (strcmp(e->name, "mbs") == 0 && strcmp(e->value->s, "gbs/dp") == 0) return 0;
  if (strcmp(e->name, "mbs") == 0 || strcmp(e->name, "vp") == 0) {
    if (num_parse_int(e->name, e->value->s, 1, e->name[0] == 'm' ? CLI_MAX_BATCH : 1 << 20, &n,
                      err, sizeof err) == 0)
      return 0;
    diag_error(dg, file, e->value->line, e->value->col, NULL, "%s%s", err,
               e->name[0] == 'm' ? " (or gbs/dp: the global batch over the data-parallel "
                                   "replicas, no accumulation)" : "");
    return -1;
  }
  if (strcmp(e->name, "sp") == 0)
    return check_word(e, file, "1: sequence parallelism whenever the row's tp > 1", SP, dg);
  if (strcmp(e->name, "zero_or_fsdp") == 0)
    return check_word(e, file, "a ZeRO stage, or FSDP over all data-parallel chips", ZERO, dg);
  /* selective(M1+M2): a recipe's Megatron-Core recompute modules, as a
  ** row's cell names them (numeric_args) */
  const char *v = e->value->s;
  size_t vn = strlen(v);
  if (strncmp(v, "selective(", 10) == 0 && vn > 11 && v[vn - 1] == ')' && vn < 96) {
    char mods[112], msg[256];
    plan probe = {0};
    snprintf(mods, sizeof mods, "selective:%.*s", (int)(vn - 11), v + 10);
    if (plan_recompute_parse(mods, &probe, msg, sizeof msg) == 0) return 0;
    diag_error(dg, file, e->value->line, e->value->col, "value", "'%.60s': %s", v, msg);
    return -1;
  }
  return check_word(e, file, "one of simulate's --recompute modes, or selective(M1+M2) naming "
                    "Megatron-Core's recompute modules", plan_recompute_names, dg);
}

/* The values that are not names: a device count, a batch convention. */
/* One FIELD={column} of a family template into field and col; false when
** tok is not of that form (the one reading of the pairs: checked when the
** mapping is read, used when a row runs). */
static bool family_pair(const char *tok, char *field, size_t fn, char *col, size_t cn) {
  const char *open = strstr(tok, "={");
  size_t n = strlen(tok);
  if (!open || open == tok || n < 4 || tok[n - 1] != '}') return false;
  /* a name longer than the buffers is refused, not cut */
  if ((size_t)(open - tok) >= fn || n - (size_t)(open - tok) - 3 >= cn) return false;
  snprintf(field, fn, "%.*s", (int)(open - tok), tok);
  snprintf(col, cn, "%.*s", (int)(tok + n - 1 - open - 2), open + 2);
  return col[0] != '\0';
}

/* Whether s is activations:N with N a count of layers (simulate's --offload
** for the first N of each model chunk; simulate bounds N by the model). */
static bool offload_count(const char *s) {
  static const char pre[] = "activations:";
  if (strncmp(s, pre, sizeof pre - 1) != 0) return false;
  const char *n = s + sizeof pre - 1;
  if (!*n || *n == '0' || strlen(n) > 7) return false;
  for (; *n; n++)
    if (*n < '0' || *n > '9') return false;
  return true;
}

static int mapping_check_value(const map_entry *e, const char *file, diag *dg) {
  /* a family template: its file, then FIELD={column} pairs */
  if (e->kind == MAP_FAMILY) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", e->value->s);
    char *save = NULL, *tok = strtok_r(buf, " ", &save);
    int pairs = 0;
    for (char *t = tok ? strtok_r(NULL, " ", &save) : NULL; t; t = strtok_r(NULL, " ", &save)) {
      char field[64], col[64];
      if (!family_pair(t, field, sizeof field, col, sizeof col) || ++pairs > RUNS_MAX_SETS) {
        diag_error(dg, file, e->value->line, e->value->col, NULL,
                   "'%.60s': expected FIELD={column} (e.g. num_hidden_layers={layers}), at most "
                   "%d, after the template file",
                   t, RUNS_MAX_SETS);
        return -1;
      }
    }
    if (!tok) {
      diag_error(dg, file, e->value->line, e->value->col, NULL,
                 "expected a template file and FIELD={column} pairs (e.g. 'llama2-7b.json "
                 "num_hidden_layers={layers}')");
      return -1;
    }
    return 0;
  }
  char err[320];
  int64_t n;
  if (e->kind == MAP_DEVICES && num_parse_int("devices", e->value->s, 1, 64, &n, err, sizeof err)) {
    diag_error(dg, file, e->value->line, e->value->col, NULL, "%s", err);
    return -1;
  }
  if (e->kind == MAP_DEFAULT && check_default(e, file, dg)) return -1;
  const char *colon = strchr(e->key->s, ':');
  bool keyed = colon && colon != e->key->s && colon[1];
  if (e->kind == MAP_OFFLOAD && !keyed) {
    diag_error(dg, file, e->key->line, e->key->col, "key",
               "'%.60s': expected RECOMPUTE:PHRASE (the row's recompute cell, a phrase of its "
               "extra cell)", e->key->s);
    return -1;
  }
  bool switch_kind = switch_flag(e->kind) != NULL;
  bool fw_keyed = switch_kind || e->kind == MAP_FINETUNE || e->kind == MAP_PP_LAYOUT; /* FRAMEWORK:PHRASE */
  /* a recompute key CELL:PHRASE: the row's recompute cell and a phrase of
  ** its extra cell (MaxText's named tensors, as a row states them) */
  if (keyed && (fw_keyed || e->kind == MAP_OFFLOAD || e->kind == MAP_RECOMPUTE) &&
      check_phrase(e, colon + 1, file, dg))
    return -1;
  if (e->kind == MAP_RECOMPUTE && e->value->s[0]) {
    plan probe = {0};
    char msg[384];
    if (plan_recompute_parse(e->value->s, &probe, msg, sizeof msg) != 0) {
      diag_error(dg, file, e->value->line, e->value->col, "value", "%s (simulate's --recompute)",
                 msg);
      return -1;
    }
  }
  if (fw_keyed && !keyed) {
    diag_error(dg, file, e->key->line, e->key->col, "key",
               "'%.60s': expected FRAMEWORK:PHRASE (the row's --framework, a phrase of its "
               "extra cell)", e->key->s);
    return -1;
  }
  if (fw_keyed) {
    /* the framework part names a profile (and, for compile, one that has
    ** the choice: simulate would refuse the flag on the others) */
    char fw[64];
    size_t n = (size_t)(colon - e->key->s);
    snprintf(fw, sizeof fw, "%.*s", (int)(n < sizeof fw ? n : sizeof fw - 1), e->key->s);
    int f = framework_find(fw);
    char msg[384];
    if (f < 0) {
      int nn = 0;
      while (framework_names[nn]) nn++;
      const char *sg = str_suggest(fw, framework_names, nn);
      diag_error(dg, file, e->key->line, e->key->col, "key", "'%.60s': no framework '%s'%s%s%s",
                 e->key->s, fw, sg ? " (did you mean '" : "", sg ? sg : "", sg ? "'?)" : "");
      return -1;
    }
    if ((e->kind == MAP_COMPILE && framework_check_compile(f, msg, sizeof msg) != 0) ||
        (e->kind == MAP_EP_OVERLAP && framework_check_ep_overlap(f, msg, sizeof msg) != 0)) {
      diag_error(dg, file, e->key->line, e->key->col, "key", "'%.60s': %s", e->key->s, msg);
      return -1;
    }
  }
  if (e->kind == MAP_FINETUNE && check_finetune(e, file, dg)) return -1;
  if (e->kind == MAP_PP_LAYOUT && check_layouts(e, file, dg)) return -1;
  int si = switch_index(e->kind);
  if (si >= 0) {
    const char *const *vals = SWITCHES[si].values;
    int64_t n;
    char err[256];
    if (!vals && num_parse_int(switch_flag(e->kind), e->value->s, SWITCHES[si].lo, 1 << 20, &n, err,
                               sizeof err)) {
      diag_error(dg, file, e->value->line, e->value->col, "value", "%s", err);
      return -1;
    }
    int nv = 0, hit = 0;
    while (vals && vals[nv]) hit |= strcmp(vals[nv], e->value->s) == 0, nv++;
    if (vals && !hit) {
      const char *sg = str_suggest(e->value->s, vals, nv);
      diag_error(dg, file, e->value->line, e->value->col, "value",
                 "'%.40s': expected %s (simulate's %s)%s%s%s", e->value->s, SWITCHES[si].expect,
                 switch_flag(e->kind), sg ? " (did you mean '" : "", sg ? sg : "", sg ? "'?)" : "");
      return -1;
    }
  }
  if (e->kind == MAP_OFFLOAD && strcmp(e->value->s, "activations") != 0 &&
      strcmp(e->value->s, "optimizer") != 0 && !offload_count(e->value->s)) {
    const char *s = strcmp(e->value->s, "activation") == 0 ? " (did you mean 'activations'?)" : "";
    diag_error(dg, file, e->value->line, e->value->col, "value",
               "'%.40s': expected activations, activations:N or optimizer (simulate's --offload)%s",
               e->value->s, s);
    return -1;
  }
  if (e->kind == MAP_SP && strcmp(e->value->s, "with-tp") != 0) {
    diag_error(dg, file, e->value->line, e->value->col, "value",
               "'%.40s': expected with-tp (the framework shards the layers' activations over "
               "the tensor-parallel chips whenever tp > 1)", e->value->s);
    return -1;
  }
  if (e->kind == MAP_ETP && strcmp(e->value->s, "tp") != 0) {
    diag_error(dg, file, e->value->line, e->value->col, "value",
               "'%.40s': expected tp (the framework splits each expert's FFN over the "
               "tensor-parallel chips)", e->value->s);
    return -1;
  }
  if (e->kind == MAP_BATCH && strcmp(e->value->s, "per-device") != 0) {
    diag_error(dg, file, e->value->line, e->value->col, "value",
               "'%.40s': expected per-device (a framework whose mbs counts one device's batch)",
               e->value->s);
    return -1;
  }
  return 0;
}

static int mapping_read(runs_mapping *m, const char *file, diag *dg) {
  memset(m, 0, sizeof *m);
  if (csv_read(&m->t, file, "a validation mapping (CSV)", &RUNS_CSV, dg) || csv_check_widths(&m->t, dg))
    return -1;
  int ck = csv_col(&m->t, "kind"), cy = csv_col(&m->t, "key"), cv = csv_col(&m->t, "value");
  if (ck < 0 || cy < 0 || cv < 0) {
    diag_error(dg, file, 1, 1, NULL, "expected the header kind,key,value[,why]");
    return -1;
  }
  m->e = calloc((size_t)m->t.n_recs, sizeof *m->e);
  if (!m->e) {
    diag_error(dg, file, 0, 0, NULL, "out of memory");
    return -1;
  }
  int bad = 0;
  for (int r = 1; r < m->t.n_recs; r++) {
    map_entry *e = &m->e[m->n];
    memset(e, 0, sizeof *e); /* the slot of a refused entry is reused: nothing of it stays */
    const csv_cell *kind = csv_at(&m->t, r, ck);
    e->key = csv_at(&m->t, r, cy);
    e->value = csv_at(&m->t, r, cv);
    int k = 0;
    while (MAP_KIND_NAMES[k] && strcmp(MAP_KIND_NAMES[k], kind->s) != 0) k++;
    if (!MAP_KIND_NAMES[k]) {
      const char *s = str_suggest(kind->s, MAP_KIND_NAMES, MAP_KINDS);
      diag_error(dg, file, kind->line, kind->col, "kind",
                 "'%.40s': expected chip, devices, framework, batch, model, precision, recompute, "
                 "default, offload, sp, etp, family, compile, tp_overlap, ep_overlap, finetune, "
                 "weight_dtype, vocab_tiling, attention, dispatcher, pp_layout or "
                 "wgrad_deferral%s%s%s",
                 kind->s, s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
      bad = 1;
      continue;
    }
    e->kind = (map_kind)k;
    if ((e->kind == MAP_MODEL && split_key(e, file, dg)) ||
        (e->kind == MAP_DEFAULT && split_default_key(e, file, dg))) {
      bad = 1;
      continue;
    }
    if (mapping_check_value(e, file, dg)) {
      bad = 1;
      continue;
    }
    m->n++;
  }
  return bad ? -1 : 0;
}

/* Whether two names are one key as sources write it: case aside, and a
** hyphen for an underscore ("BF16" bf16, "FP8-CS" fp8_cs, "Llama" llama,
** "gpt-oss" gpt_oss). */
static bool key_eq(const char *a, const char *b) {
  for (;; a++, b++) {
    int x = *a == '-' ? '_' : tolower((unsigned char)*a);
    int y = *b == '-' ? '_' : tolower((unsigned char)*b);
    if (x != y) return false;
    if (!x) return true;
  }
}

/* The value of the entry of kind k keyed as key is (key_eq), or NULL. */
static const char *map_get(const runs_mapping *m, map_kind k, const char *key) {
  for (int i = 0; i < m->n; i++)
    if (m->e[i].kind == k && key_eq(m->e[i].key->s, key)) return m->e[i].value->s;
  return NULL;
}

/* A chip's name as sources spell it in many ways ("H100 SXM5", "TPU v5p",
** "A100 80GB", "GB200 NVL72", "v6e (Trillium)"), reduced to one spelling:
** lower-case letters and digits only, without a parenthesis, a vendor or
** "tpu" prefix, a form-factor suffix (SXM, SXM4, SXM5, NVL72) or a "gb"
** after the memory size. The part's own name and its memory size stay
** ("a10040" and "a10080" differ; so do "h100" and "h100pcie"). */
static void chip_norm(const char *in, char *out, size_t n) {
  size_t k = 0;
  int paren = 0;
  for (const char *c = in; *c && k + 1 < n; c++) {
    if (*c == '(') paren++;
    else if (*c == ')' && paren > 0) paren--;
    else if (!paren && isalnum((unsigned char)*c)) out[k++] = (char)tolower((unsigned char)*c);
  }
  out[k] = '\0';
  static const char *const PREFIX[] = {"nvidia", "google", "cloud", "tpu"};
  for (size_t i = 0; i < sizeof PREFIX / sizeof *PREFIX; i++) {
    size_t p = strlen(PREFIX[i]);
    if (strncmp(out, PREFIX[i], p) == 0 && out[p]) memmove(out, out + p, strlen(out + p) + 1);
  }
  static const char *const SUFFIX[] = {"nvl72", "sxm5", "sxm4", "sxm", "gb"};
  for (size_t i = 0; i < sizeof SUFFIX / sizeof *SUFFIX; i++) {
    size_t l = strlen(out), q = strlen(SUFFIX[i]);
    /* "gb" only after a memory size ("80gb"), not as the part's name ("gb200") */
    if (l > q && strcmp(out + l - q, SUFFIX[i]) == 0 &&
        (strcmp(SUFFIX[i], "gb") != 0 || isdigit((unsigned char)out[l - q - 1])))
      out[l - q] = '\0';
  }
}

/* The value of a chip-keyed entry of kind k (chip, devices): the key
** spelled as the row spells the chip, else the one of the same reduced
** spelling (chip_norm); NULL when none. */
static const char *map_get_chip(const runs_mapping *m, map_kind k, const char *chip) {
  const char *v = map_get(m, k, chip);
  if (v) return v;
  char want[64], have[64];
  chip_norm(chip, want, sizeof want);
  for (int i = 0; i < m->n && want[0]; i++) {
    if (m->e[i].kind != k || strchr(m->e[i].key->s, ':')) continue;
    chip_norm(m->e[i].key->s, have, sizeof have);
    if (strcmp(want, have) == 0) return m->e[i].value->s;
  }
  return NULL;
}

/* The hardware of a row: a chip entry CHIP:PHRASE whose phrase the row's
** extra cell contains (a variant the notes name: "H100:96GB") wins over
** the plain CHIP entry; a chip no entry spells as the row does is found by
** its reduced spelling (chip_norm). */
static const char *map_chip(const runs_mapping *m, const runs_row *w) {
  size_t n = strlen(w->chip);
  for (int i = 0; i < m->n; i++) {
    const char *k = m->e[i].key->s;
    if (m->e[i].kind == MAP_CHIP && strncmp(k, w->chip, n) == 0 && k[n] == ':' && k[n + 1] &&
        strstr(w->extra, k + n + 1))
      return m->e[i].value->s;
  }
  return map_get_chip(m, MAP_CHIP, w->chip);
}

/* The framework of a source: the entry whose key is the longest prefix of
** the source ending at a word's end ("NeMo" fits "NeMo perf summary 24.07"). */
static const char *map_framework(const runs_mapping *m, const char *source) {
  const char *best = NULL;
  size_t best_n = 0;
  for (int i = 0; i < m->n; i++) {
    size_t n = strlen(m->e[i].key->s);
    if (m->e[i].kind == MAP_FRAMEWORK && n > best_n && strncmp(source, m->e[i].key->s, n) == 0 &&
        (source[n] == '\0' || source[n] == ' ')) {
      best = m->e[i].value->s;
      best_n = n;
    }
  }
  return best;
}

/* How a mapping key's framework, the n bytes at `key`, names the row's
** `fw`: 2 the same profile, 1 a dated variant of it (torchtitan for
** torchtitan-2024, megatron-core for megatron-core-26.08: what the family
** does, unless the variant's own entry says otherwise), 0 another. */
static int fw_match(const char *key, size_t n, const char *fw) {
  if (!fw || n == 0 || strncmp(key, fw, n) != 0) return 0;
  return fw[n] == '\0' ? 2 : fw[n] == '-' ? 1 : 0;
}

/* The model or default entry for name, the row's parameters and framework:
** a key's parameters match within 5 % (sources round a count differently:
** 70.6 and 70 B are one model; the nearest two models of a family in the
** mapping are 16 % apart); the most specific key wins, then the nearest. */
static const map_entry *map_keyed(const runs_mapping *m, map_kind k, const char *name, double params_b,
                                  const char *framework) {
  const map_entry *best = NULL;
  int best_rank = -1;
  double best_d = 0;
  for (int i = 0; i < m->n; i++) {
    const map_entry *e = &m->e[i];
    if (e->kind != k || !key_eq(e->name, name)) continue;
    int fm = fw_match(e->framework, strlen(e->framework), framework);
    if (e->framework[0] && !fm) continue;
    double d = e->params_b > 0 ? fabs(params_b - e->params_b) / e->params_b : 0;
    if (e->params_b > 0 && !(d <= 0.05)) continue;
    int rank = (e->params_b > 0) * 3 + fm;
    if (rank > best_rank || (rank == best_rank && d < best_d)) {
      best = e;
      best_rank = rank;
      best_d = d;
    }
  }
  return best;
}

/* The default for column where row w of a framework says '?': a
** COLUMN:SOURCE+PHRASE entry whose phrase the row holds, then a
** COLUMN:SOURCE one (the longest source prefix ending at a word's end),
** win over COLUMN@FRAMEWORK (the row's profile, then the family of a dated
** variant), which wins over a bare COLUMN. NULL: none. */
static const char *map_default(const runs_mapping *m, const char *column, const runs_row *w,
                               const char *framework) {
  const map_entry *best = NULL;
  size_t best_rank = 0;
  const char *source = w->source;
  for (int i = 0; i < m->n; i++) {
    const map_entry *e = &m->e[i];
    if (e->kind != MAP_DEFAULT || strcmp(e->name, column) != 0) continue;
    size_t rank = 1, n = strlen(e->source);
    if (e->source[0]) {
      if (strncmp(source, e->source, n) != 0 || (source[n] != '\0' && source[n] != ' ')) continue;
      if (e->phrase && !has_phrases(w, e->phrase)) continue;
      /* any source key beats a framework's, one with a phrase beats one
      ** without; the longer the source the nearer */
      rank = 3 + n + (e->phrase ? 1000 : 0);
    } else if (e->framework[0]) {
      int fm = fw_match(e->framework, strlen(e->framework), framework);
      if (!fm) continue;
      rank = 1 + (size_t)fm;
    }
    if (rank > best_rank) best = e, best_rank = rank;
  }
  return best ? best->value->s : NULL;
}

/* ==== a row of a table of runs ==== */

static const char *const COLS[RUNS_C_NCOLS] = {
    "id",  "source", "chip",         "chips",     "model",     "params_B",       "layers",
    "heads", "kv_heads", "seq",      "gbs_seq",   "mbs",       "tp",             "pp",
    "cp",  "vp",     "sp",           "zero_or_fsdp", "recompute", "precision",   "derived_step_s",
    "ep",  "experts", "extra"};

typedef struct {
  const csv_table *t;
  int col[RUNS_C_NCOLS];
  diag *dg;
} row_reader;

static const csv_cell *rd_cell(const row_reader *rd, int rec, int c) {
  return rd->col[c] < 0 ? NULL : csv_at(rd->t, rec, rd->col[c]);
}

/* "?" and "" (not stated) */
bool runs_unknown(const char *s) { return s[0] == '\0' || strcmp(s, "?") == 0; }

/* The text without a trailing '?' (a recipe default the source's table
** does not show, public-runs-modern.md), into buf. */
static const char *strip_q(const char *s, char *buf, size_t n) {
  snprintf(buf, n, "%s", s);
  size_t k = strlen(buf);
  if (k > 1 && buf[k - 1] == '?') buf[k - 1] = '\0';
  return buf;
}

/* A count cell: lo..hi, or -1 where the row says '?' and that is allowed. */
static int rd_int(row_reader *rd, int rec, int c, int64_t lo, int64_t hi, bool may_be_unknown,
                  int64_t dflt, int64_t *out) {
  const csv_cell *x = rd_cell(rd, rec, c);
  char err[320];
  if (!x) return *out = dflt, 0;
  if (may_be_unknown && runs_unknown(x->s)) return *out = -1, 0;
  if (num_parse_int(COLS[c], x->s, lo, hi, out, err, sizeof err) == 0) return 0;
  diag_error(rd->dg, rd->t->file, x->line, x->col, NULL, "%s%s", err,
             may_be_unknown ? " (or '?')" : "");
  return -1;
}

/* A real cell above 0 (a time, a parameter count, a per-device batch). */
static int rd_real(row_reader *rd, int rec, int c, bool may_be_unknown, double *out) {
  const csv_cell *x = rd_cell(rd, rec, c);
  char err[320];
  if (may_be_unknown && runs_unknown(x->s)) return *out = -1, 0;
  num_range r = {NUM_REAL, 0, 1e15, true};
  if (num_parse(COLS[c], x->s, r, out, err, sizeof err) == 0) return 0;
  diag_error(rd->dg, rd->t->file, x->line, x->col, NULL, "%s%s", err,
             may_be_unknown ? " (or '?')" : "");
  return -1;
}

/* s in lower case into buf: simulate's names are lower case, and a
** source's "BF16" or "Full" means them. */
static const char *lower(const char *s, char *buf, size_t n) {
  size_t k = 0;
  for (; s[k] && k + 1 < n; k++) buf[k] = (char)tolower((unsigned char)s[k]);
  buf[k] = '\0';
  return buf;
}

/* Whether s is one of the words in list (NULL-ended), whatever its case. */
static bool word_in(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcasecmp(s, *list) == 0) return true;
  return false;
}

/* sp: 0, 1, "1?" or '?' (yes / true / on and no / false / off too) */
static int rd_sp(row_reader *rd, int rec, runs_row *w) {
  static const char *const YES[] = {"1", "yes", "true", "on", NULL},
                           *const NO[] = {"0", "no", "false", "off", NULL};
  const csv_cell *x = rd_cell(rd, rec, RUNS_C_SP);
  if (runs_unknown(x->s)) w->sp = -1;
  else if (word_in(x->s, NO)) w->sp = 0;
  else if (word_in(x->s, YES)) w->sp = 1;
  else if (strcmp(x->s, "1?") == 0) w->sp = 2;
  else {
    diag_error(rd->dg, rd->t->file, x->line, x->col, NULL,
               "sp '%.40s': expected 0, 1, 1? (the recipe's default) or ?", x->s);
    return -1;
  }
  return 0;
}

/* zero_or_fsdp: a ZeRO stage 0-3 (Megatron's distributed optimizer is 1),
** "fsdp" (all data-parallel chips) or "fsdpN" (a shard group of N), each
** with an optional '?', or '?'. */
static int rd_zero(row_reader *rd, int rec, runs_row *w) {
  const csv_cell *x = rd_cell(rd, rec, RUNS_C_ZERO);
  char buf[32], low[32], err[320];
  const char *s = strip_q(x->s, buf, sizeof buf);
  w->zero = -1;
  if (runs_unknown(x->s)) return 0;
  /* as sources write a stage: "ZeRO-1", "zero1", "ZeRO stage 1"; Megatron's
  ** "distributed optimizer" is stage 1 */
  lower(s, low, sizeof low);
  if (strcmp(low, "distributed optimizer") == 0) s = "1";
  else if (strncmp(low, "zero", 4) == 0) {
    const char *d = low + 4;
    while (*d == '-' || *d == ' ' || *d == '_') d++;
    if (strncmp(d, "stage", 5) == 0) d += 5;
    while (*d == '-' || *d == ' ' || *d == '_') d++;
    if (d[0] >= '0' && d[0] <= '3' && d[1] == '\0') s = d;
  } else if (strncmp(low, "fsdp", 4) == 0)
    s = low;
  if (strlen(s) == 1 && s[0] >= '0' && s[0] <= '3') {
    w->zero = s[0] - '0';
    return 0;
  }
  if (strncmp(s, "fsdp", 4) == 0) {
    w->fsdp = true;
    if (s[4] == '\0') return 0;
    if (num_parse_int("its FSDP degree", s + 4, 1, CLI_MAX_CHIPS, &w->fsdp_n, err, sizeof err) == 0)
      return 0;
    diag_error(rd->dg, rd->t->file, x->line, x->col + 4, NULL, "zero_or_fsdp '%.40s': %s", x->s,
               err);
    return -1;
  }
  diag_error(rd->dg, rd->t->file, x->line, x->col, NULL,
             "zero_or_fsdp '%.40s': expected 0, 1, 2, 3 (ZeRO stage; 1: distributed optimizer), "
             "fsdp or fsdpN (N: the shard group), with an optional '?', or ?", x->s);
  return -1;
}

/* Checks every cell validate reads of record rec into w: 0, or -1 after
** reporting each bad cell with its line:column. */
static int rd_row(row_reader *rd, int rec, runs_row *w) {
  memset(w, 0, sizeof *w);
  w->rec = rec;
  w->id = rd_cell(rd, rec, RUNS_C_ID)->s;
  w->source = rd_cell(rd, rec, RUNS_C_SOURCE)->s;
  w->chip = rd_cell(rd, rec, RUNS_C_CHIP)->s;
  w->model = rd_cell(rd, rec, RUNS_C_MODEL)->s;
  w->recompute = rd_cell(rd, rec, RUNS_C_RECOMPUTE)->s;
  w->precision = rd_cell(rd, rec, RUNS_C_PRECISION)->s;
  const csv_cell *ex = rd_cell(rd, rec, RUNS_C_EXTRA);
  w->extra = ex ? ex->s : "";
  int bad = 0;
  bad |= rd_int(rd, rec, RUNS_C_CHIPS, 1, CLI_MAX_CHIPS, false, 0, &w->chips);
  bad |= rd_int(rd, rec, RUNS_C_LAYERS, 1, 1 << 20, true, 0, &w->layers);
  bad |= rd_int(rd, rec, RUNS_C_HEADS, 1, 1 << 20, true, 0, &w->heads);
  bad |= rd_int(rd, rec, RUNS_C_KV_HEADS, 1, 1 << 20, true, 0, &w->kv_heads);
  bad |= rd_int(rd, rec, RUNS_C_SEQ, 1, CLI_MAX_SEQ, false, 0, &w->seq);
  bad |= rd_int(rd, rec, RUNS_C_GBS, 1, CLI_MAX_BATCH, false, 0, &w->gbs);
  bad |= rd_int(rd, rec, RUNS_C_TP, 1, CLI_MAX_CHIPS, false, 0, &w->tp);
  bad |= rd_int(rd, rec, RUNS_C_PP, 1, CLI_MAX_CHIPS, false, 0, &w->pp);
  bad |= rd_int(rd, rec, RUNS_C_CP, 1, CLI_MAX_CHIPS, true, 1, &w->cp);
  bad |= rd_int(rd, rec, RUNS_C_VP, 1, 1 << 20, true, 1, &w->vp);
  bad |= rd_int(rd, rec, RUNS_C_EP, 1, CLI_MAX_CHIPS, true, 1, &w->ep);
  bad |= rd_int(rd, rec, RUNS_C_EXPERTS, 1, 1 << 20, true, -1, &w->experts);
  bad |= rd_real(rd, rec, RUNS_C_MBS, true, &w->mbs);
  bad |= rd_real(rd, rec, RUNS_C_PARAMS, true, &w->params_b);
  bad |= rd_real(rd, rec, RUNS_C_MEASURED, false, &w->measured_s);
  bad |= rd_sp(rd, rec, w);
  bad |= rd_zero(rd, rec, w);
  if (w->cp < 0) w->cp = 1; /* not stated: none */
  if (w->ep < 0) w->ep = 1; /* vp stays -1: the mapping's default fills it (fill_defaults) */
  return bad ? -1 : 0;
}

/* The header has every required column: 0, or -1 after one message that
** names the missing ones (and, for a misspelt one, the header cell that is
** nearest, at its line:column). */
static int rd_columns(row_reader *rd) {
  char missing[512] = "";
  int n_missing = 0, last = -1;
  for (int c = 0; c < RUNS_C_NCOLS; c++) {
    rd->col[c] = csv_col(rd->t, COLS[c]);
    if (rd->col[c] >= 0 || c >= RUNS_C_REQUIRED) continue;
    size_t k = strlen(missing);
    snprintf(missing + k, sizeof missing - k, "%s'%s'", n_missing ? ", " : "", COLS[c]);
    n_missing++;
    last = c;
  }
  if (!n_missing) return 0;
  /* the header's names that are none of validate's columns: a typo's candidates */
  const char *heads[RUNS_CSV_MAX_COLS];
  const csv_cell *cells[RUNS_CSV_MAX_COLS];
  int nh = 0;
  for (int i = 0; i < rd->t->recs[0].n; i++) {
    int c = 0;
    while (c < RUNS_C_NCOLS && rd->col[c] != i) c++;
    if (c == RUNS_C_NCOLS) cells[nh] = csv_at(rd->t, 0, i), heads[nh] = cells[nh]->s, nh++;
  }
  const char *near = n_missing == 1 ? str_suggest(COLS[last], heads, nh) : NULL;
  const csv_cell *at = NULL;
  for (int i = 0; near && i < nh; i++)
    if (heads[i] == near) at = cells[i];
  diag_error(rd->dg, rd->t->file, 1, at ? at->col : 1, NULL,
             "no column%s %s in the header: a table of runs has the columns of "
             "shared/reference/public-runs.csv%s%s%s", n_missing > 1 ? "s" : "", missing,
             near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
  return -1;
}

/* ==== a row -> the command a user would type ==== */

const char *const RUNS_STATUS_NAMES[] = {"ok", "does_not_fit", "does_not_run", "not_expressible"};


void runs_arg(runs_argv *a, const char *fmt, ...) {
  if (a->full || a->n == (int)(sizeof a->v / sizeof a->v[0]) - 2) { /* room for --json, NULL */
    a->full = true;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(a->buf + a->used, sizeof a->buf - a->used, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= sizeof a->buf - a->used) {
    a->full = true;
    return;
  }
  a->v[a->n++] = a->buf + a->used;
  a->v[a->n] = NULL;
  a->used += (size_t)k + 1;
}


const char *runs_cell_text(const runs_table *x, int rec, int c) {
  const csv_cell *cell = x->col[c] < 0 ? NULL : csv_at(x->t, rec, x->col[c]);
  return cell ? cell->s : ""; /* a short row (validate keeps it, not running) has none */
}

void runs_addf(char *buf, size_t n, const char *fmt, ...) {
  size_t k = strlen(buf);
  if (k >= n - 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + k, n - k, fmt, ap);
  va_end(ap);
}

/* The mapping's file name with each {column} replaced by the row's cell. */
static int expand_template(const runs_table *x, const map_entry *e, int rec, char *out, size_t n,
                           char *why, size_t whyn) {
  const char *s = e->value->s;
  size_t k = 0;
  while (*s) {
    if (*s == '{') {
      const char *close = strchr(s, '}');
      char name[64];
      if (!close || (size_t)(close - s - 1) >= sizeof name)
        return str_errf(why, whyn, "%s:%d:%d: an unclosed '{' in the model's file name",
                        x->map->t.file, e->value->line, e->value->col);
      memcpy(name, s + 1, (size_t)(close - s - 1));
      name[close - s - 1] = '\0';
      int col = csv_col(x->t, name);
      if (col < 0)
        return str_errf(why, whyn, "%s:%d:%d: {%s}: the table has no column '%s'",
                        x->map->t.file, e->value->line, e->value->col, name, name);
      int w = snprintf(out + k, n - k, "%s", csv_at(x->t, rec, col)->s);
      if (w < 0 || (size_t)w >= n - k)
        return str_errf(why, whyn, "the model's file name is too long");
      k += (size_t)w;
      s = close + 1;
    } else {
      if (k + 1 >= n) return str_errf(why, whyn, "the model's file name is too long");
      out[k++] = *s++;
    }
  }
  out[k] = '\0';
  return 0;
}

/* The first DIR/name of the --models search path that is a file. */
static int find_model(const char *path, const char *name, char *out, size_t n) {
  const char *p = path;
  while (*p) {
    size_t len = strcspn(p, ":");
    struct stat st;
    if (len > 0 && snprintf(out, n, "%.*s/%s", (int)len, p, name) < (int)n &&
        stat(out, &st) == 0 && S_ISREG(st.st_mode))
      return 0;
    p += len + (p[len] == ':');
  }
  return -1;
}

/* A row whose model no file holds, of a family the mapping gives a
** template for ("family,llama,llama2-7b.json num_hidden_layers={layers}
** ..."): the template's file, and for each FIELD={column} whose cell the
** row states, --set FIELD=VALUE (a '?' keeps the file's value). simulate
** refuses a field the file lacks or a value of another type, and validate
** still compares the parameters with the row's. 1 when the mapping has no
** template for the row's model; -1 with r->msg when its file is missing. */
static int family_arg(const runs_table *x, runs_result *r) {
  const runs_row *w = &r->w;
  const map_entry *e = NULL;
  for (int i = 0; i < x->map->n && !e; i++)
    if (x->map->e[i].kind == MAP_FAMILY && key_eq(x->map->e[i].key->s, w->model))
      e = &x->map->e[i];
  if (!e) return 1;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", e->value->s);
  char *save = NULL, *tok = strtok_r(buf, " ", &save);
  if (!tok || find_model(x->models, tok, r->model_path, sizeof r->model_path) != 0) {
    snprintf(r->model_path, sizeof r->model_path, "%s", tok ? tok : "");
    snprintf(r->msg, sizeof r->msg, "no model file '%.120s' on --models %.160s (%.80s:%d)",
             tok ? tok : "", x->models, x->map->t.file, e->key->line);
    return -1;
  }
  r->n_sets = 0;
  while ((tok = strtok_r(NULL, " ", &save)) != NULL && r->n_sets < RUNS_MAX_SETS) {
    char field[64], col[64];
    if (!family_pair(tok, field, sizeof field, col, sizeof col)) continue; /* refused at load */
    int c = csv_col(x->t, col);
    const csv_cell *at = c >= 0 ? csv_at(x->t, w->rec, c) : NULL;
    const char *cell = at ? at->s : "";
    if (runs_unknown(cell)) continue;
    /* a size of the architecture: a count, said at the row's cell (not,
    ** through --set, at the template file's field) */
    char *end = NULL;
    long long v = strtoll(cell, &end, 10);
    if (end == cell || *end != '\0' || v < 1) {
      snprintf(r->msg, sizeof r->msg, "%.160s:%d:%d: %s '%.40s': expected a count of 1 or more",
               x->t->file, at->line, at->col, col, cell);
      return -1;
    }
    snprintf(r->sets[r->n_sets++], sizeof r->sets[0], "%.63s=%.60s", field, cell);
  }
  return 0;
}

/* The MODEL argument: the mapping's config file found on --models, else a
** family template with the row's sizes (family_arg), else the row's model
** cell as it is (an example name, a path). -1 with r->msg when the mapping
** names a file that is not there. */
static int model_arg(const runs_table *x, runs_result *r) {
  const runs_row *w = &r->w;
  const map_entry *e = map_keyed(x->map, MAP_MODEL, w->model, w->params_b, r->framework);
  int f;
  if (!e && (f = family_arg(x, r)) <= 0) return f;
  if (!e) return snprintf(r->model_path, sizeof r->model_path, "%s", w->model), 0;
  char name[RUNS_PATH_MAX];
  if (expand_template(x, e, w->rec, name, sizeof name, r->msg, sizeof r->msg)) return -1;
  if (find_model(x->models, name, r->model_path, sizeof r->model_path) == 0) return 0;
  /* a size of a templated family (gpt3-{layers}x...) no file was written for */
  if ((f = family_arg(x, r)) <= 0) return f;
  snprintf(r->model_path, sizeof r->model_path, "%s", name);
  snprintf(r->msg, sizeof r->msg, "no model file '%.120s' on --models %.160s (%.80s:%d)", name,
           x->models, x->map->t.file, e->key->line);
  return -1;
}

/* Whether the mapping names a whole config file for the row's model and
** params_B (a key MODEL/PARAMS_B whose file name takes no {column}): then
** the architecture is the file's, and a row that leaves its sizes '?'
** (layers, hidden, ...) still runs from it (docs/validation.md). */
static bool model_from_file(const runs_table *x, const runs_result *r) {
  const map_entry *e = map_keyed(x->map, MAP_MODEL, r->w.model, r->w.params_b, r->framework);
  return e && e->params_b > 0 && !strchr(e->value->s, '{');
}

/* The '?' cells of vp, sp, zero_or_fsdp and recompute, filled from the
** mapping's defaults: what the row's framework does when its source is
** silent, or what the row's source states for all its rows. A column with
** no default stays unstated (vp: no interleaving; the others: simulate's
** framework profile decides). The micro-batch is mbs_arg's. */
static void fill_defaults(const runs_table *x, runs_result *r) {
  runs_row *w = &r->w;
  const char *fw = r->framework, *d;
  if (w->vp < 0) w->vp = (d = map_default(x->map, "vp", w, fw)) ? atoll(d) : 1;
  if (w->sp < 0 && (d = map_default(x->map, "sp", w, fw)))
    w->sp = strcmp(d, "1") == 0 ? 2 : 0; /* 1: whenever tp > 1, as a "1?" cell */
  if (w->zero < 0 && !w->fsdp && (d = map_default(x->map, "zero_or_fsdp", w, fw))) {
    if (strcmp(d, "fsdp") == 0) w->fsdp = true, w->fsdp_n = 0;
    else w->zero = d[0] - '0'; /* 0-3, checked when the mapping was read */
  }
  if (runs_unknown(w->recompute) && (d = map_default(x->map, "recompute", w, fw)))
    w->recompute = d;
}

/* FSDP's shard group in chips: the row's degree counts JAX devices (two per
** Ironwood chip), a group of all data-parallel chips (dp x cp, as
** torchtitan and Megatron-Core shard) is plain --fsdp, a smaller one is
** HSDP. 0, or -1 with r->msg when the degree is not whole chips. */
static int fsdp_args(runs_result *r, runs_argv *a, int64_t devices) {
  const runs_row *w = &r->w;
  runs_arg(a, "--fsdp");
  if (w->fsdp_n == 0) return runs_addf(r->exercises, sizeof r->exercises, ", FSDP"), 0;
  if (w->fsdp_n % devices != 0) {
    snprintf(r->msg, sizeof r->msg,
             "FSDP degree %lld counts devices, %lld per %s chip: not a whole number of chips",
             (long long)w->fsdp_n, (long long)devices, w->chip);
    return -1;
  }
  int64_t shard = w->fsdp_n / devices, all = w->chips / (w->tp * w->pp);
  if (shard == all) return runs_addf(r->exercises, sizeof r->exercises, ", FSDP"), 0;
  runs_arg(a, "--hsdp");
  runs_arg(a, "%lld", (long long)shard);
  runs_addf(r->exercises, sizeof r->exercises, ", HSDP %lld", (long long)shard);
  return 0;
}

/* --mbs: a data-parallel replica's micro-batch. Where the framework's
** batch is per device (MaxText's per_device_batch_size, no accumulation),
** a replica of tp x cp chips with D devices each holds mbs x D x tp x cp
** sequences. Not stated: the mapping's default for the framework, or
** simulate's (the global batch over dp, no accumulation). */
static int mbs_arg(const runs_table *x, runs_result *r, runs_argv *a, int64_t devices) {
  const runs_row *w = &r->w;
  const char *batch = r->framework ? map_get(x->map, MAP_BATCH, r->framework) : NULL;
  double mbs = w->mbs;
  if (mbs < 0) {
    const char *d = map_default(x->map, "mbs", w, r->framework);
    if (!d) return 0;
    mbs = atof(d);
    if (strcmp(d, "gbs/dp") == 0) { /* no accumulation: one micro-batch per replica and step */
      int64_t split = w->tp * w->pp * w->cp;
      /* a pipeline splits the replica's batch into micro-batches (torchtitan's
      ** pipeline_parallel_microbatch_size, 1 by default): simulate's own 1 */
      if (w->pp > 1 || w->chips % split != 0) return 0; /* a bad split: simulate says why */
      mbs = (double)w->gbs / (double)(w->chips / split);
    }
  } else if (batch) {
    mbs *= (double)(devices * w->tp * w->cp);
  }
  if (!(mbs >= 1) || fabs(mbs - round(mbs)) > 1e-9) {
    snprintf(r->msg, sizeof r->msg, "micro-batch %g (mbs %s%s) is not a whole number of sequences",
             mbs, runs_cell_text(x, w->rec, RUNS_C_MBS), batch ? ", per device" : "");
    return -1;
  }
  runs_arg(a, "--mbs");
  runs_arg(a, "%.0f", mbs);
  return 0;
}

/* --pp, its schedule and split. Layers that do not split into pp x vp
** stages but do once the embedding and the loss count as a layer each go
** with --pp-split-embedding --pp-split-loss: Megatron-Core's
** account-for-embedding/loss-in-pipeline-split, how its recipes run Llama
** 3.1 405B's 126 layers on pp 8 x vp 8 (128 = 126 + 2). */
static const map_entry *phrase_entry(const runs_table *x, map_kind kind, const char *prefix,
                                     const runs_row *w, bool family);

static void pp_args(const runs_table *x, runs_result *r, runs_argv *a) {
  const runs_row *w = &r->w;
  runs_arg(a, "--pp");
  runs_arg(a, "%lld", (long long)w->pp);
  if (w->pp > 1) runs_addf(r->exercises, sizeof r->exercises, ", PP %lld", (long long)w->pp);
  if (w->vp > 1) {
    runs_arg(a, "--pp-schedule");
    runs_arg(a, "interleaved:%lld", (long long)w->vp);
    runs_addf(r->exercises, sizeof r->exercises, " interleaved %lld", (long long)w->vp);
  }
  int64_t stages = w->pp * w->vp;
  /* the recipe's layout for this many stages, where the mapping has one */
  const map_entry *e = w->pp > 1 ? phrase_entry(x, MAP_PP_LAYOUT, r->framework, w, true) : NULL;
  char layout[512], err[384];
  int at;
  if (e && layout_for(e->value->s, stages, layout, sizeof layout, &at, err, sizeof err) == 0 && layout[0]) {
    runs_arg(a, "--pp-layout");
    runs_arg(a, "%s", layout);
    runs_addf(r->exercises, sizeof r->exercises, " (layout %s)", layout);
    return;
  }
  if (w->pp > 1 && w->layers > 0 && w->layers % stages != 0 && (w->layers + 2) % stages == 0) {
    runs_arg(a, "--pp-split-embedding");
    runs_arg(a, "--pp-split-loss");
    runs_addf(r->exercises, sizeof r->exercises, " (embedding and loss as layers)");
  }
}

/* The parallel sizes: tp, pp, cp, ep and sequence parallelism. */
static void parallel_args(const runs_table *x, runs_result *r, runs_argv *a) {
  const runs_row *w = &r->w;
  /* a framework that always shards the activations over tp (the mapping's sp) */
  bool fw_sp = r->framework && map_get(x->map, MAP_SP, r->framework) && w->tp > 1;
  runs_arg(a, "--tp");
  runs_arg(a, "%lld", (long long)w->tp);
  if (w->tp > 1) runs_addf(r->exercises, sizeof r->exercises, ", TP %lld", (long long)w->tp);
  pp_args(x, r, a);
  if (w->cp > 1) {
    runs_arg(a, "--cp");
    runs_arg(a, "%lld", (long long)w->cp);
    runs_addf(r->exercises, sizeof r->exercises, ", CP %lld", (long long)w->cp);
  }
  if (w->ep > 1) {
    runs_arg(a, "--ep");
    runs_arg(a, "%lld", (long long)w->ep);
    runs_addf(r->exercises, sizeof r->exercises, ", EP %lld", (long long)w->ep);
  }
  /* a framework that splits each expert's FFN over tp (the mapping's etp) */
  if (r->framework && map_get(x->map, MAP_ETP, r->framework) && w->tp > 1 && w->experts > 1) {
    runs_arg(a, "--etp");
    runs_arg(a, "%lld", (long long)w->tp);
    runs_addf(r->exercises, sizeof r->exercises, ", ETP %lld", (long long)w->tp);
  }
  /* "1?": sequence parallelism is the recipe's default whenever tp > 1 */
  if (w->sp == 1 || (w->sp == 2 && w->tp > 1) || fw_sp) {
    runs_arg(a, "--sp");
    runs_addf(r->exercises, sizeof r->exercises, ", SP");
  }
}

/* The mapping's entry of kind k for a cell, or for the cell without its
** parenthesis when no entry has the whole ("selective(core_attn)" is
** selective, "full (uniform)" full); *v becomes the spelling to pass on
** when no entry has either (the cell cut at its parenthesis, in buf). */
static const char *map_cell(const runs_mapping *m, map_kind k, const char **v, char *buf,
                            size_t n) {
  const char *hit = map_get(m, k, *v), *open = strchr(*v, '(');
  if (hit || !open || open == *v) return hit;
  size_t len = (size_t)(open - *v);
  while (len > 0 && (*v)[len - 1] == ' ') len--;
  snprintf(buf, n, "%.*s", (int)len, *v);
  *v = buf;
  return map_get(m, k, buf);
}

/* --precision and --recompute through the mapping; a value it does not
** list goes as it is (in lower case), so simulate names what it expected. */
static void numeric_args(const runs_table *x, runs_result *r, runs_argv *a) {
  char buf[64], low[64], cut[64];
  const char *p = lower(strip_q(r->w.precision, buf, sizeof buf), low, sizeof low), *mp;
  if (!runs_unknown(r->w.precision)) {
    mp = map_cell(x->map, MAP_PRECISION, &p, cut, sizeof cut);
    runs_arg(a, "--precision");
    runs_arg(a, "%s", mp ? mp : p);
    runs_addf(r->exercises, sizeof r->exercises, ", %s", mp ? mp : p);
  }
  const char *rc = lower(strip_q(r->w.recompute, buf, sizeof buf), low, sizeof low), *mr;
  if (runs_unknown(r->w.recompute)) return;
  /* selective(M1+M2): Megatron-Core's recompute_modules, as the source
  ** lists them -> --recompute selective:M1+M2 (a list simulate reads) */
  char mods[80];
  plan probe = {0};
  size_t rn = strlen(rc);
  if (!map_get(x->map, MAP_RECOMPUTE, rc) && strncmp(rc, "selective(", 10) == 0 && rn > 11 &&
      rc[rn - 1] == ')' && rn - 11 < sizeof mods - 10) {
    snprintf(mods, sizeof mods, "selective:%.*s", (int)(rn - 11), rc + 10);
    /* core_attn alone is Megatron-Core's selective itself: that spelling */
    if (plan_recompute_parse(mods, &probe, NULL, 0) == 0 &&
        probe.recompute_modules != PLAN_RM_CORE_ATTN) {
      runs_arg(a, "--recompute");
      runs_arg(a, "%s", mods);
      runs_addf(r->exercises, sizeof r->exercises, ", %s recompute", mods);
      return;
    }
  }
  /* CELL:PHRASE: the policy the row's extra cell spells out (MaxText's
  ** named tensors under remat_policy custom) */
  const map_entry *ke = phrase_entry(x, MAP_RECOMPUTE, rc, &r->w, false);
  if (ke) {
    runs_arg(a, "--recompute");
    runs_arg(a, "%s", ke->value->s);
    runs_addf(r->exercises, sizeof r->exercises, ", named-tensor remat");
    return;
  }
  mr = map_cell(x->map, MAP_RECOMPUTE, &rc, cut, sizeof cut);
  if (mr && !*mr) return; /* the framework's own policy: no flag */
  runs_arg(a, "--recompute");
  runs_arg(a, "%s", mr ? mr : rc);
  if (strcmp(mr ? mr : rc, "none") != 0)
    runs_addf(r->exercises, sizeof r->exercises, ", %s recompute", mr ? mr : rc);
}

/* Whether a phrase part {COLUMN}=VALUE holds for row w: its model, chip or
** precision cell is VALUE (key_eq's spelling), its params_B within 5 % of
** it, as a model key's, or its chips or tp count is it (a recipe is one
** parallel layout). -1: not such a part (COLUMN unknown, no '='). */
static int column_part(const runs_row *w, const char *part) {
  static const char *const cols[] = {"{model}=",    "{chip}=", "{precision}=",
                                     "{params_B}=", "{chips}=", "{tp}="};
  for (int i = 0; i < 6; i++) {
    size_t n = strlen(cols[i]);
    if (strncmp(part, cols[i], n) != 0) continue;
    const char *v = part + n;
    if (i >= 3) {
      char *end;
      double want = strtod(v, &end);
      if (end == v || *end || !(want > 0) || (i > 3 && want != floor(want))) return -1;
      if (!w) return 0;
      if (i == 3) return fabs(w->params_b - want) <= 0.05 * want;
      return (double)(i == 4 ? w->chips : w->tp) == want;
    }
    if (!*v) return -1;
    if (!w) return 0;
    const char *cell = i == 0 ? w->model : i == 1 ? w->chip : w->precision;
    char buf[64];
    return key_eq(strip_q(cell, buf, sizeof buf), v);
  }
  return -1;
}

/* Whether row w holds each '+'-separated part of phrase: a phrase of its
** extra cell ("task=lora", or "task=lora+nemo_container=25.11": a release's
** recipe) or {COLUMN}=VALUE of one of its cells (column_part). */
static bool has_phrases(const runs_row *w, const char *phrase) {
  for (const char *p = phrase;;) {
    size_t n = strcspn(p, "+");
    char part[128];
    snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), p);
    if (!part[0]) return false;
    if (part[0] == '{' ? column_part(w, part) != 1 : !strstr(w->extra, part)) return false;
    if (!p[n]) return true;
    p += n + 1;
  }
}

/* The first entry of a kind keyed PREFIX:PHRASE whose prefix is the row's
** (its recompute cell, its framework) and whose phrase row w holds, or
** NULL; with `family`, failing that, the first whose prefix is the
** framework family of a dated variant (fw_match). */
static const map_entry *phrase_entry(const runs_table *x, map_kind kind, const char *prefix,
                                     const runs_row *w, bool family) {
  const map_entry *fam = NULL;
  for (int i = 0; prefix && prefix[0] && i < x->map->n; i++) {
    const map_entry *e = &x->map->e[i];
    const char *k = e->key->s, *colon = strchr(k, ':');
    if (e->kind != kind || !colon || !has_phrases(w, colon + 1)) continue;
    int fm = fw_match(k, (size_t)(colon - k), prefix);
    if (fm == 2) return e;
    if (family && fm == 1 && !fam) fam = e;
  }
  return fam;
}

/* --offload through the mapping: RECOMPUTE:PHRASE, the row's recompute cell
** (MaxText reads its per-tensor offload names only under remat_policy
** custom: src/MaxText/layers/decoders.py get_remat_policy). */
static void offload_arg(const runs_table *x, runs_result *r, runs_argv *a) {
  char buf[64];
  const map_entry *e = phrase_entry(x, MAP_OFFLOAD, strip_q(r->w.recompute, buf, sizeof buf), &r->w, false);
  if (!e) return;
  runs_arg(a, "--offload");
  runs_arg(a, "%s", e->value->s);
  runs_addf(r->exercises, sizeof r->exercises, ", %s offload", e->value->s);
}

/* --compile, --tp-overlap, --ep-overlap, --weight-dtype, --vocab-tiling,
** --attention, --moe-dispatcher and --wgrad-deferral-limit through the
** mapping: FRAMEWORK:PHRASE, the row's framework
** (a torchtitan row that states it ran without torch.compile; a MaxText row
** whose recipe turns on XLA's collective matmul, or that states its
** weight_dtype or num_vocab_tiling; a Megatron-Core MoE row that states its
** all-to-all overlap; a Megatron-Bridge recipe that defers the output
** layer's weight gradients). */
static void switch_args(const runs_table *x, runs_result *r, runs_argv *a) {
  for (size_t i = 0; i < sizeof SWITCHES / sizeof *SWITCHES; i++) {
    int need = SWITCHES[i].need;
    if ((need == 1 && r->w.tp <= 1) || (need == 2 && r->w.ep <= 1) || (need == 3 && r->w.pp <= 1))
      continue;
    const map_entry *e = phrase_entry(x, SWITCHES[i].kind, r->framework, &r->w, true);
    if (!e) continue;
    if (SWITCHES[i].on) runs_arg(a, "%s", SWITCHES[i].on);
    runs_arg(a, "%s", SWITCHES[i].flag);
    runs_arg(a, "%s", e->value->s);
    if (!SWITCHES[i].note_when || strcmp(e->value->s, SWITCHES[i].note_when) == 0)
      runs_addf(r->exercises, sizeof r->exercises, "%s", SWITCHES[i].note);
  }
}

/* --finetune through the mapping: FRAMEWORK:PHRASE, a row that states a
** LoRA or QLoRA fine-tuning task (Megatron-Bridge's peft recipes). */
static void finetune_args(const runs_table *x, runs_result *r, runs_argv *a) {
  const map_entry *e = phrase_entry(x, MAP_FINETUNE, r->framework, &r->w, true);
  if (!e) return;
  const char *v = e->value->s;
  finetune_value f;
  finetune_split(v, &f); /* checked when the mapping was read */
  runs_arg(a, "--finetune");
  runs_arg(a, "%.*s", f.method_len, v);
  if (f.targets) {
    runs_arg(a, "--lora-targets");
    runs_arg(a, "%.*s", f.targets_len, f.targets);
  }
  if (f.rank) {
    runs_arg(a, "--lora-rank");
    runs_arg(a, "%s", f.rank);
  }
  wl_method m = WL_FULL;
  wl_method_parse(v, (size_t)f.method_len, &m);
  if (m != WL_FULL) runs_addf(r->exercises, sizeof r->exercises, ", %s", m == WL_QLORA ? "QLoRA" : "LoRA");
}

/* The features of the model the row names, for the docs' table. */
static void model_features(runs_result *r) {
  const runs_row *w = &r->w;
  if (w->experts > 0)
    runs_addf(r->exercises, sizeof r->exercises, ", MoE %lld experts", (long long)w->experts);
  if (w->kv_heads > 0 && w->heads > 0 && w->kv_heads < w->heads)
    runs_addf(r->exercises, sizeof r->exercises, ", GQA");
  if (w->seq >= 32768)
    runs_addf(r->exercises, sizeof r->exercises, ", %lldk context", (long long)(w->seq / 1024));
}

/* A word as a POSIX shell reads it back: bare when it is plain, else in
** single quotes. */
static void shell_word(char *out, size_t n, const char *s) {
  if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-@%") ==
                strlen(s)) {
    runs_addf(out, n, "%s", s);
    return;
  }
  runs_addf(out, n, "'");
  for (; *s; s++) runs_addf(out, n, *s == '\'' ? "'\\''" : "%c", *s);
  runs_addf(out, n, "'");
}

static void format_cmd(runs_result *r, const runs_argv *a) {
  r->cmd[0] = '\0';
  for (int i = 0; i < a->n; i++) {
    if (i) runs_addf(r->cmd, sizeof r->cmd, " ");
    shell_word(r->cmd, sizeof r->cmd, a->v[i]);
  }
}

/* The command of row r into a (argv for cli_main) and r->cmd (for a
** shell). 0, or -1 with r->status and r->msg when the row cannot be put
** as a command. */
int runs_build_args(const runs_table *x, runs_result *r, runs_argv *a) {
  const runs_row *w = &r->w;
  if (w->bad_line > 0) { /* its cells were refused, each with its column, on stderr */
    r->status = RUNS_FAILS;
    snprintf(r->msg, sizeof r->msg, "%.200s:%d: a malformed cell or row (stderr names it)",
             x->t->file, w->bad_line);
    return -1;
  }
  r->framework = map_framework(x->map, w->source);
  fill_defaults(x, r);
  r->hw = map_chip(x->map, w);
  if (!r->hw) r->hw = w->chip;
  const char *dv = map_get_chip(x->map, MAP_DEVICES, w->chip);
  int64_t devices = dv ? atoll(dv) : 1;
  char missing[sizeof r->msg] = "";
  if (model_arg(x, r)) snprintf(missing, sizeof missing, "%s", r->msg);
  r->status = RUNS_NOT_EXPRESSIBLE;
  runs_arg(a, "tpusim");
  runs_arg(a, "simulate");
  runs_arg(a, "%s", r->model_path);
  for (int i = 0; i < r->n_sets; i++) {
    runs_arg(a, "--set");
    runs_arg(a, "%s", r->sets[i]);
  }
  runs_arg(a, "--hw");
  runs_arg(a, "%s", r->hw);
  runs_arg(a, "--chips");
  runs_arg(a, "%lld", (long long)w->chips);
  for (int i = 0; i < x->c->n_hw_files; i++) { /* validate's --hw-file goes to every row */
    runs_arg(a, "--hw-file");
    runs_arg(a, "%s", x->c->hw_files[i]);
  }
  if (r->framework) {
    runs_arg(a, "--framework");
    runs_arg(a, "%s", r->framework);
  }
  parallel_args(x, r, a);
  if (w->fsdp && fsdp_args(r, a, devices)) return -1;
  if (!w->fsdp && w->zero >= 0) { /* a stated 0 too: the framework's profile may shard */
    runs_arg(a, "--zero");
    runs_arg(a, "%d", w->zero);
    if (w->zero > 0) runs_addf(r->exercises, sizeof r->exercises, ", ZeRO-%d", w->zero);
  }
  if (mbs_arg(x, r, a, devices)) return -1;
  runs_arg(a, "--gbs");
  runs_arg(a, "%lld", (long long)w->gbs);
  runs_arg(a, "--seq");
  runs_arg(a, "%lld", (long long)w->seq);
  numeric_args(x, r, a);
  offload_arg(x, r, a);
  switch_args(x, r, a);
  finetune_args(x, r, a);
  model_features(r);
  if (a->full) {
    snprintf(r->msg, sizeof r->msg, "the command is longer than %d bytes", RUNS_CMD_MAX);
    return -1;
  }
  format_cmd(r, a);
  if (w->layers < 0 && !model_from_file(x, r)) { /* its features are listed, but no model to run */
    r->cmd[0] = '\0';
    snprintf(r->msg, sizeof r->msg, "architecture not published in the row (layers '?')");
    return -1;
  }
  if (missing[0]) { /* the command is whole, but its model file is not there */
    r->status = RUNS_FAILS;
    snprintf(r->msg, sizeof r->msg, "%s", missing);
    return -1;
  }
  r->status = RUNS_OK;
  return 0;
}


/* ==== running a row through simulate ==== */

static void first_line(char *out, size_t n, const char *text) {
  size_t k = strcspn(text, "\n");
  snprintf(out, n, "%.*s", (int)(k < n ? k : n - 1), text);
}

/* The loaded model's parameters in billions (0 when it does not load;
** simulate has said why): the check that the mapping picked the row's
** model, against the row's params_B. */
static double model_params_b(const runs_result *r) {
  diag *dg = diag_new();
  const char *sets[RUNS_MAX_SETS];
  for (int i = 0; i < r->n_sets; i++) sets[i] = r->sets[i];
  model_opts o = {.seq_len = r->w.seq, .global_batch = 1, .forward_only = true, .set = sets,
                  .n_set = r->n_sets};
  model *m = dg ? model_load(r->model_path, &o, dg) : NULL;
  double b = m ? (double)m->params / 1e9 : 0;
  model_free(m);
  diag_free(dg);
  return b;
}

/* Runs the command through simulate's own entry point, as the shell would,
** with --json on, and reads its step time. */
void runs_simulate(runs_result *r, runs_argv *a, bool check_model) {
  static char json_flag[] = "--json";
  char *ob = NULL, *eb = NULL;
  size_t on = 0, en = 0;
  FILE *out = open_memstream(&ob, &on), *err = open_memstream(&eb, &en);
  int rc = -1;
  if (out && err) {
    a->v[a->n] = json_flag; /* runs_arg() keeps room for it */
    a->v[a->n + 1] = NULL;
    rc = cli_main(a->n + 1, a->v, out, err);
  }
  if (out) fclose(out);
  if (err) fclose(err);
  r->status = RUNS_FAILS;
  if (rc == CLI_OK || rc == CLI_DOES_NOT_FIT) {
    cJSON *o = cJSON_Parse(ob ? ob : "");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "step_time_s");
    if (cJSON_IsNumber(t) && t->valuedouble > 0) {
      r->simulated_s = t->valuedouble;
      r->error = (r->simulated_s - r->w.measured_s) / r->w.measured_s;
      r->status = rc == CLI_OK ? RUNS_OK : RUNS_NO_FIT;
    } else {
      snprintf(r->msg, sizeof r->msg, "simulate's --json has no step_time_s");
    }
    cJSON_Delete(o);
  } else if (eb && *eb) {
    first_line(r->msg, sizeof r->msg, eb);
  } else {
    snprintf(r->msg, sizeof r->msg, rc < 0 ? "out of memory" : "simulate exited %d with no message",
             rc);
  }
  free(ob);
  free(eb);
  if (check_model && r->status != RUNS_FAILS) r->model_params_b = model_params_b(r);
}

/* ==== the command ==== */

/* The table's rows, each checked (bad cells reported with line:column),
** and no id twice. 0, or -1 after reporting. */
static int read_rows(row_reader *rd, runs_result **out, int *n, const char *purpose) {
  *n = rd->t->n_recs - 1;
  if (*n == 0) {
    diag_error(rd->dg, rd->t->file, 0, 0, NULL, "a header and no rows: %s", purpose);
    return -1;
  }
  runs_result *r = *out = calloc((size_t)*n, sizeof *r);
  if (!r) {
    diag_error(rd->dg, rd->t->file, 0, 0, NULL, "out of memory for %d rows", *n);
    return -1;
  }
  int bad = 0, want = rd->t->recs[0].n;
  /* the notes column, when it is the last: a row of more cells than the
  ** header has commas in its notes that nobody quoted */
  bool extra_last = rd->col[RUNS_C_EXTRA] == want - 1;
  for (int i = 0; i < *n; i++) {
    int have = rd->t->recs[i + 1].n;
    if (have != want && !(have > want && extra_last)) {
      const csv_cell *last = csv_at(rd->t, i + 1, have - 1);
      diag_error(rd->dg, rd->t->file, last->end_line, last->end_col, NULL,
                 "%d cells; the header has %d (a ',' inside a cell needs quotes)", have, want);
      memset(&r[i].w, 0, sizeof r[i].w);
      r[i].w.rec = i + 1;
      r[i].w.id = csv_at(rd->t, i + 1, 0)->s;
      r[i].w.source = r[i].w.chip = r[i].w.model = r[i].w.recompute = r[i].w.precision =
          r[i].w.extra = "";
      r[i].w.bad_line = last->line;
      bad++;
      continue;
    }
    int row_bad = rd_row(rd, i + 1, &r[i].w) != 0;
    if (have > want) { /* the notes again, commas and all */
      size_t len = 0;
      for (int c = want - 1; c < have; c++) len += strlen(csv_at(rd->t, i + 1, c)->s) + 1;
      char *j = r[i].extra_joined = malloc(len + 1);
      if (!j) {
        diag_error(rd->dg, rd->t->file, 0, 0, NULL, "out of memory");
        return -1;
      }
      j[0] = '\0';
      for (int c = want - 1; c < have; c++) {
        if (c > want - 1) strcat(j, ",");
        strcat(j, csv_at(rd->t, i + 1, c)->s);
      }
      r[i].w.extra = j;
    }
    for (int j = 0; j < i && !row_bad; j++)
      if (strcmp(r[j].w.id, r[i].w.id) == 0) {
        const csv_cell *c = rd_cell(rd, i + 1, RUNS_C_ID);
        diag_error(rd->dg, rd->t->file, c->line, c->col, NULL,
                   "id '%.80s' again (first at line %d)", r[i].w.id,
                   rd_cell(rd, j + 1, RUNS_C_ID)->line);
        row_bad = 1;
      }
    if (row_bad) r[i].w.bad_line = rd_cell(rd, i + 1, RUNS_C_ID)->line;
    bad += row_bad;
  }
  return bad;
}

void runs_simulate_all(const runs_table *x) {
  for (int i = 0; i < x->n; i++) {
    runs_argv a = {.n = 0};
    if (runs_build_args(x, &x->r[i], &a) == 0) runs_simulate(&x->r[i], &a, true);
  }
}

int runs_open(runs_table *x, cli_ctx *c, const char *file, const char *mfile, const char *models,
              const char *purpose, bool per_row, int *bad_rows, diag *dg) {
  memset(x, 0, sizeof *x);
  x->c = c;
  x->models = models;
  x->t = calloc(1, sizeof *x->t);
  x->map = calloc(1, sizeof *x->map);
  if (!x->t || !x->map) {
    diag_error(dg, file, 0, 0, NULL, "out of memory");
    return -1;
  }
  row_reader rd = {.t = x->t, .dg = dg};
  *bad_rows = 0;
  /* per row, a row of the wrong width is that row's fault (read_rows) */
  if (csv_read(x->t, file, "a table of runs (CSV)", &RUNS_CSV, dg) ||
      (!per_row && csv_check_widths(x->t, dg)) || rd_columns(&rd))
    return -1;
  int bad = read_rows(&rd, &x->r, &x->n, purpose);
  x->n_read = x->r ? x->n : 0;
  if (bad < 0 || (bad > 0 && !per_row)) return -1;
  if (mapping_read(x->map, mfile, dg)) {
    if (mfile == RUNS_DEFAULT_MAPPING && !is_file(mfile))
      diag_error(dg, mfile, 0, 0, NULL,
                 "the default mapping is the source tree's, found from the working directory or "
                 "beside the tpusim binary at the tree's root; run from there, or give --mapping "
                 "FILE (and --models DIR:DIR for its model files)");
    return -1;
  }
  *bad_rows = bad;
  memcpy(x->col, rd.col, sizeof x->col);
  return 0;
}

void runs_close(runs_table *x) {
  if (x->map) mapping_free(x->map);
  if (x->t) csv_free(x->t);
  free(x->map);
  free(x->t);
  for (int i = 0; x->r && i < x->n_read; i++) free(x->r[i].extra_joined);
  free(x->r);
  memset(x, 0, sizeof *x);
}

const char *runs_mapping_file(const runs_table *x) { return x->map->t.file; }
