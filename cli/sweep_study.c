/*
** sweep_study.c -- reading STUDY.json (sweep.h): its keys, lists and
** ranges, checked against the catalog and the models before any point
** runs, and the enumeration of its points.
*/
#include "sweep_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_int.h"
#include "../base/jin.h"
#include "../hw_models/hw_override.h"

/* A study file is a few kilobytes; an explicit list of 10^5 points is a
** few megabytes. */
#define STUDY_MAX_BYTES (64u << 20)

static const char *const STUDY_KEYS[] = {"models", "hw", "overrides", "chips", "points", "objective",
                                         "tokens", "top", "fix", NULL};
static const char *const POINT_KEYS[] = {"model", "hw", "chips", "overrides", NULL};
static const char *const OBJECTIVES[] = {"time", "cost", "cost-under-deadline", "energy", NULL};

void sweep_study_free(sweep_study *s) {
  if (!s) return;
  for (int i = 0; i < s->n_models; i++) free(s->models[i]);
  for (int i = 0; i < s->n_hw; i++) free(s->hw[i]);
  for (int i = 0; i < s->n_ov; i++) free(s->ov_key[i]), free(s->ov_val[i]);
  free(s->models);
  free(s->hw);
  free(s->chips);
  free(s->list);
  free(s);
}

int64_t sweep_study_points(const sweep_study *s) { return s->n_points; }

/* The index of name in (*v)[0..*n), appended when new; -1 out of memory. */
static int intern(char ***v, int *n, const char *name) {
  for (int i = 0; i < *n; i++)
    if (strcmp((*v)[i], name) == 0) return i;
  char **nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
  if (!nv) return -1;
  *v = nv;
  if (!(nv[*n] = strdup(name))) return -1;
  return (*n)++;
}

/* ---- values: a list, or a range {"from", "to", "step" | "factor"} ---- */

/* How many values a range holds, counted before any is made (so an absurd
** range is refused, not allocated): -1 when it is not a range at all. The
** 1e-9 slack lets 1 to 2 step 0.1 end at 2 despite binary fractions. */
static int64_t range_count(double from, double to, double step, double factor) {
  if (step > 0) return (int64_t)floor((to - from) / step + 1e-9) + 1;
  int64_t n = 0;
  for (double v = from; v <= to * (1 + 1e-9) && n <= SWEEP_MAX_VALUES; v *= factor) n++;
  return n;
}

static int parse_range(jin *j, const cJSON *o, bool whole, double lo, double hi, double **out,
                       int *n) {
  static const char *const KEYS[] = {"from", "to", "step", "factor", NULL};
  double from = 0, to = 0, step = 0, factor = 0;
  int bad = jin_only(j, o, KEYS, NULL) > 0;
  bad |= jin_get_num(j, o, "from", lo, hi, true, &from) < 0;
  bad |= jin_get_num(j, o, "to", lo, hi, true, &to) < 0;
  int hs = jin_get_num(j, o, "step", 0, hi, false, &step);
  int hf = jin_get_num(j, o, "factor", 1, 1e6, false, &factor);
  if (bad || hs < 0 || hf < 0) return -1;
  if ((hs > 0) == (hf > 0)) {
    jin_error(j, 0, "a range needs one of \"step\" (added) or \"factor\" (multiplied), "
                    "e.g. {\"from\": 1, \"to\": 2, \"step\": 0.5}");
    return -1;
  }
  if ((hs > 0 && step <= 0) || (hf > 0 && factor <= 1)) {
    jin_error(j, 0, "%s must be over %s, or the range never reaches \"to\"",
              hs > 0 ? "\"step\"" : "\"factor\"", hs > 0 ? "0" : "1");
    return -1;
  }
  if (to < from) {
    jin_error(j, 0, "\"to\" %.6g is below \"from\" %.6g; nearest: swap them", to, from);
    return -1;
  }
  int64_t k = range_count(from, to, hs > 0 ? step : 0, factor);
  if (k > SWEEP_MAX_VALUES) {
    jin_error(j, 0, "this range holds over %d values (the limit of one key); use a larger step",
              SWEEP_MAX_VALUES);
    return -1;
  }
  double *v = malloc((size_t)k * sizeof *v);
  if (!v) return -1;
  /* each value from the start, not by accumulation: no drift, same bytes */
  for (int64_t i = 0; i < k; i++) v[i] = hs > 0 ? from + (double)i * step : from * pow(factor, (double)i);
  for (int64_t i = 0; whole && i < k; i++) v[i] = round(v[i]);
  *out = v;
  *n = (int)k;
  return 0;
}

/* The values at key of obj: a number, a list of numbers or a range; whole
** numbers when whole; each within [lo, hi]. 0, or -1 after a message. */
static int parse_values(jin *j, const cJSON *obj, const char *key, bool whole, double lo, double hi,
                        double **out, int *n) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  int rc = 0;
  jin_push_key(j, key, 0);
  if (cJSON_IsObject(v)) {
    rc = parse_range(j, v, whole, lo, hi, out, n);
  } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 && cJSON_GetArraySize(v) <= SWEEP_MAX_VALUES) {
    int k = cJSON_GetArraySize(v);
    *out = malloc((size_t)k * sizeof **out);
    *n = k;
    for (int i = 0; *out && i < k; i++) {
      const cJSON *e = cJSON_GetArrayItem(v, i);
      double x = cJSON_IsNumber(e) ? e->valuedouble : NAN;
      if (!cJSON_IsNumber(e) || x < lo || x > hi || (whole && x != floor(x))) {
        char got[64];
        jin_describe(e, got, sizeof got);
        jin_push_index(j, i);
        jin_error(j, 0, "expected %s from %.10g to %.10g, got %s", whole ? "a whole number" : "a number",
                  lo, hi, got);
        jin_pop(j);
        rc = -1;
      } else {
        (*out)[i] = x;
      }
    }
    if (!*out) rc = -1;
  } else {
    char got[64];
    jin_describe(v, got, sizeof got);
    jin_error(j, 0, "expected a non-empty list of at most %d numbers, or a range {\"from\", \"to\", "
                    "\"step\" or \"factor\"}, got %s", SWEEP_MAX_VALUES, got);
    rc = -1;
  }
  jin_pop(j);
  return rc;
}

/* ---- names: models and hardware, checked where they are written ---- */

static int check_model(jin *j, const char *name) {
  diag *dg = diag_new();
  model *m = dg ? model_load(name, &(model_opts){0}, dg) : NULL;
  if (!m) {
    const char *why = dg && diag_count(dg) ? diag_message(dg, 0) : "out of memory";
    jin_error(j, 0, "model '%s' does not load: %s", name, why);
  }
  model_free(m);
  diag_free(dg);
  return m ? 0 : -1;
}

static int check_hw(jin *j, const hw_catalog *cat, const char *name) {
  if (hw_catalog_find(cat, name)) return 0;
  char msg[2048];
  hw_catalog_unknown(cat, name, msg, sizeof msg);
  jin_error(j, 0, "%s", msg);
  return -1;
}

/* The strings of obj[key] interned into *v; each checked by check. */
static int parse_names(jin *j, const cJSON *obj, const char *key, char ***v, int *n,
                       const hw_catalog *cat) {
  const cJSON *a = jin_get_array(j, obj, key, true);
  if (!a) return -1;
  int rc = cJSON_GetArraySize(a) > 0 ? 0 : -1;
  jin_push_key(j, key, 0);
  if (rc) jin_error(j, 0, "expected at least one name");
  for (int i = 0; i < cJSON_GetArraySize(a); i++) {
    const cJSON *e = cJSON_GetArrayItem(a, i);
    jin_push_index(j, i);
    if (!cJSON_IsString(e)) {
      jin_error(j, 0, "expected a name (a string), got %s", jin_type_name(e));
      rc = -1;
    } else if ((cat ? check_hw(j, cat, e->valuestring) : check_model(j, e->valuestring)) != 0 ||
               intern(v, n, e->valuestring) < 0) {
      rc = -1;
    }
    jin_pop(j);
  }
  jin_pop(j);
  return rc;
}

/* ---- overrides ---- */

/* Is key known? else a message at the key, with the nearest valid name. */
static int check_override_key(jin *j, const char *key) {
  const char *s;
  if (hw_override_known(key, &s)) return 0;
  jin_error(j, 1, "unknown hardware override '%s': expected a scale (%s, %s, %s, %s, %s) or a "
                  "numeric field path (\"chip.hbm_bytes\"; docs/hardware.md)%s%s%s",
            key, hw_override_scales[0], hw_override_scales[1], hw_override_scales[2],
            hw_override_scales[3], hw_override_scales[4], s ? "; did you mean '" : "", s ? s : "",
            s ? "'?" : "");
  return -1;
}

/* Each value applied to a copy of each hardware entry: a value the schema
** refuses is reported here, at the key, before any point runs. */
static int check_override_values(jin *j, const sweep_study *s, const hw_catalog *cat, int k) {
  for (int h = 0; h < s->n_hw; h++)
    for (int i = 0; i < s->ov_n[k]; i++) {
      hw_model copy = *hw_catalog_find(cat, s->hw[h]); /* scalars only change */
      char err[512];
      if (hw_override(&copy, s->ov_key[k], s->ov_val[k][i], err, sizeof err) != 0) {
        jin_error(j, 1, "on %s: %s", s->hw[h], err);
        return -1;
      }
    }
  return 0;
}

static int add_override_key(jin *j, sweep_study *s, const char *key) {
  for (int i = 0; i < s->n_ov; i++)
    if (strcmp(s->ov_key[i], key) == 0) return i;
  if (s->n_ov == SWEEP_MAX_OVERRIDES) {
    jin_error(j, 1, "at most %d override keys in one study", SWEEP_MAX_OVERRIDES);
    return -1;
  }
  if (!(s->ov_key[s->n_ov] = strdup(key))) return -1;
  return s->n_ov++;
}

static int parse_overrides(jin *j, const cJSON *root, sweep_study *s, const hw_catalog *cat) {
  const cJSON *o = jin_get_object(j, root, "overrides", false);
  if (!o) return j->errors ? -1 : 0;
  int rc = 0;
  jin_push_key(j, "overrides", 0);
  for (const cJSON *e = o->child; e; e = e->next) {
    jin_push_key(j, e->string, 0);
    int k = check_override_key(j, e->string) == 0 ? add_override_key(j, s, e->string) : -1;
    jin_pop(j);
    if (k < 0 || parse_values(j, o, e->string, false, -1e18, 1e18, &s->ov_val[k], &s->ov_n[k]) != 0) {
      rc = -1;
      continue;
    }
    jin_push_key(j, e->string, 0);
    if (check_override_values(j, s, cat, k) != 0) rc = -1;
    jin_pop(j);
  }
  jin_pop(j);
  return rc;
}

/* ---- the explicit list ---- */

static int parse_point(jin *j, const cJSON *o, sweep_study *s, const hw_catalog *cat, sweep_point *p) {
  const char *mn = NULL, *hn = NULL;
  int bad = jin_only(j, o, POINT_KEYS, NULL) > 0;
  bad |= jin_get_str(j, o, "model", true, &mn) < 0;
  bad |= jin_get_str(j, o, "hw", true, &hn) < 0;
  bad |= jin_get_int(j, o, "chips", 1, CLI_MAX_CHIPS, true, &p->chips) < 0;
  if (bad) return -1;
  jin_push_key(j, "model", 0);
  bad |= check_model(j, mn) != 0 || (p->model = intern(&s->models, &s->n_models, mn)) < 0;
  jin_pop(j);
  jin_push_key(j, "hw", 0);
  bad |= check_hw(j, cat, hn) != 0 || (p->hw = intern(&s->hw, &s->n_hw, hn)) < 0;
  jin_pop(j);
  for (int k = 0; k < SWEEP_MAX_OVERRIDES; k++) p->ov[k] = NAN;
  const cJSON *ov = jin_get_object(j, o, "overrides", false);
  if (bad || !ov) return bad || j->errors ? -1 : 0;
  jin_push_key(j, "overrides", 0);
  for (const cJSON *e = ov->child; e; e = e->next) {
    jin_push_key(j, e->string, 0);
    int k = check_override_key(j, e->string) == 0 ? add_override_key(j, s, e->string) : -1;
    hw_model copy = *hw_catalog_find(cat, hn);
    char err[512];
    if (k >= 0 && !cJSON_IsNumber(e)) {
      jin_error(j, 0, "expected a number, got %s", jin_type_name(e));
      k = -1;
    } else if (k >= 0 && hw_override(&copy, e->string, e->valuedouble, err, sizeof err) != 0) {
      jin_error(j, 0, "on %s: %s", hn, err);
      k = -1;
    }
    if (k >= 0) p->ov[k] = e->valuedouble;
    bad |= k < 0;
    jin_pop(j);
  }
  jin_pop(j);
  return bad ? -1 : 0;
}

static int parse_list(jin *j, const cJSON *a, sweep_study *s, const hw_catalog *cat) {
  int n = cJSON_GetArraySize(a), rc = 0;
  if (n == 0 || n > SWEEP_MAX_POINTS) {
    jin_error_at(j, "points", 0, "expected 1 to %d points, got %d", SWEEP_MAX_POINTS, n);
    return -1;
  }
  if (!(s->list = calloc((size_t)n, sizeof *s->list))) return -1;
  jin_push_key(j, "points", 0);
  for (int i = 0; i < n; i++) {
    const cJSON *e = cJSON_GetArrayItem(a, i);
    jin_push_index(j, i);
    if (!cJSON_IsObject(e)) jin_error(j, 0, "expected a point {\"model\", \"hw\", \"chips\", \"overrides\"}");
    if (!cJSON_IsObject(e) || parse_point(j, e, s, cat, &s->list[i]) != 0) rc = -1;
    jin_pop(j);
  }
  jin_pop(j);
  s->n_list = s->n_points = n;
  return rc;
}

/* ---- the whole study ---- */

/* The cross product's size, refused past SWEEP_MAX_POINTS (no overflow:
** every factor is at most SWEEP_MAX_VALUES, checked after each product). */
static int count_points(jin *j, sweep_study *s) {
  int64_t n = (int64_t)s->n_models * s->n_hw * s->n_chips;
  for (int k = 0; k < s->n_ov && n <= SWEEP_MAX_POINTS; k++) n *= s->ov_n[k];
  if (n > SWEEP_MAX_POINTS) {
    jin_error(j, 0, "the study has over %d points (models x hw x each override x chips); "
                    "split it or use coarser ranges", SWEEP_MAX_POINTS);
    return -1;
  }
  s->n_points = n;
  return 0;
}

static int parse_cross(jin *j, const cJSON *root, sweep_study *s, const hw_catalog *cat) {
  int bad = parse_names(j, root, "models", &s->models, &s->n_models, NULL) != 0;
  bad |= parse_names(j, root, "hw", &s->hw, &s->n_hw, cat) != 0;
  if (!bad) bad |= parse_overrides(j, root, s, cat) != 0;
  double *chips = NULL;
  if (!cJSON_GetObjectItemCaseSensitive(root, "chips")) {
    jin_error(j, 0, "missing \"chips\": the chip counts to plan for, e.g. [64, 256]");
    bad = 1;
  } else if (parse_values(j, root, "chips", true, 1, (double)CLI_MAX_CHIPS, &chips, &s->n_chips) != 0) {
    bad = 1;
  }
  if (chips && (s->chips = malloc((size_t)s->n_chips * sizeof *s->chips)))
    for (int i = 0; i < s->n_chips; i++) s->chips[i] = (int64_t)chips[i];
  free(chips);
  if (bad || !s->chips) return -1;
  return count_points(j, s);
}

static int parse_common(jin *j, const cJSON *root, sweep_study *s) {
  int obj = 0;
  int64_t top = 5; /* tpusim plan's default: the same best plan as plan gives */
  const char *fix = NULL;
  int rc = jin_get_enum(j, root, "objective", OBJECTIVES, false, &obj);
  if (rc < 0) return -1;
  s->has_objective = rc > 0;
  s->objective = (planner_objective)obj;
  if (s->objective == PLANNER_COST_UNDER_DEADLINE) {
    jin_error_at(j, "objective", 0, "cost-under-deadline needs a deadline, which a study does not "
                                    "take yet; nearest: \"cost\"");
    return -1;
  }
  int bad = jin_get_num(j, root, "tokens", 1, 1e18, false, &s->tokens) < 0;
  bad |= jin_get_int(j, root, "top", 1, 16, false, &top) < 0;
  bad |= jin_get_str(j, root, "fix", false, &fix) < 0;
  s->top = (int)top;
  char err[512];
  if (!bad && fix && planner_fix_parse(fix, &s->fix, err, sizeof err) != 0) {
    jin_error_at(j, "fix", 0, "%s", err);
    bad = 1;
  }
  return bad ? -1 : 0;
}

static int parse_study(jin *j, sweep_study *s, const hw_catalog *cat) {
  const cJSON *root = j->root;
  if (!cJSON_IsObject(root)) {
    jin_error(j, 0, "expected a study object {\"models\", \"hw\", \"overrides\", \"chips\", ...}");
    return -1;
  }
  int bad = jin_only(j, root, STUDY_KEYS, NULL) > 0;
  bad |= parse_common(j, root, s) != 0;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "points");
  if (list) {
    static const char *const CROSS[] = {"models", "hw", "overrides", "chips"};
    for (int i = 0; i < 4; i++)
      if (cJSON_GetObjectItemCaseSensitive(root, CROSS[i])) {
        jin_error_at(j, CROSS[i], 1, "a study gives \"points\" or \"%s\" (a cross product), not both",
                     CROSS[i]);
        bad = 1;
      }
    if (!cJSON_IsArray(list)) {
      jin_error_at(j, "points", 0, "expected a list of points, got %s", jin_type_name(list));
      return -1;
    }
    return bad || parse_list(j, list, s, cat) != 0 ? -1 : 0;
  }
  return bad || parse_cross(j, root, s, cat) != 0 ? -1 : 0;
}

sweep_study *sweep_study_load(const char *path, const char *const *hw_files, int n_hw_files,
                              diag *dg) {
  cli_ctx c = {.n_hw_files = n_hw_files};
  for (int i = 0; i < n_hw_files && i < CLI_MAX_HW_FILES; i++) c.hw_files[i] = hw_files[i];
  FILE *devnull = fopen("/dev/null", "w");
  c.err = devnull ? devnull : stderr;
  hw_catalog *cat = NULL;
  int crc = cli_load_catalog_as(&c, "tpusim sweep", &cat, NULL);
  if (devnull) fclose(devnull);
  if (crc != CLI_OK) {
    diag_error(dg, path, 0, 0, NULL, "the hardware catalog does not load (run `tpusim hw list` "
                                     "with the same --hw-file to see why)");
    return NULL;
  }
  size_t len = 0;
  char *text = jin_read_regular(path, STUDY_MAX_BYTES, "a study", "a study is a few kilobytes", &len, dg);
  sweep_study *s = text ? calloc(1, sizeof *s) : NULL;
  jin j;
  bool ok = s && jin_open(&j, path, text, len, dg) == 0;
  if (ok) {
    ok = parse_study(&j, s, cat) == 0 && j.errors == 0;
    jin_close(&j);
  }
  free(text);
  hw_catalog_free(cat);
  if (!ok) {
    if (s && diag_count(dg) == 0) diag_error(dg, path, 0, 0, NULL, "out of memory");
    sweep_study_free(s);
    return NULL;
  }
  s->hw_files = hw_files;
  s->n_hw_files = n_hw_files;
  return s;
}

void sweep_point_at(const sweep_study *s, int64_t i, sweep_point *out) {
  if (s->list) {
    *out = s->list[i];
    return;
  }
  out->chips = s->chips[i % s->n_chips];
  i /= s->n_chips;
  for (int k = s->n_ov - 1; k >= 0; k--) {
    out->ov[k] = s->ov_val[k][i % s->ov_n[k]];
    i /= s->ov_n[k];
  }
  for (int k = s->n_ov; k < SWEEP_MAX_OVERRIDES; k++) out->ov[k] = NAN;
  out->hw = (int)(i % s->n_hw);
  out->model = (int)(i / s->n_hw);
}
