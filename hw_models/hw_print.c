/*
** hw_print.c -- `hw show` as text and as JSON, driven by the schema table.
*/
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/units.h"
#include "hw.h"

static const void *fptr(const hw_model *m, const hw_field *f) {
  return (const char *)m + f->offset;
}

static const char *cite_ids(const hw_model *m, const char *path) {
  const char *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < m->n_cites; i++) {
    size_t l = strlen(m->cites[i].key);
    if (strncmp(path, m->cites[i].key, l) == 0 && (path[l] == '\0' || path[l] == '.') &&
        l > best_len) {
      best = m->cites[i].value;
      best_len = l;
    }
  }
  return best;
}

void hw_shape_text(const int64_t s[3], int dims, bool twisted, char *buf, size_t n) {
  if (dims == 2) snprintf(buf, n, "%" PRId64 "x%" PRId64, s[0], s[1]);
  else snprintf(buf, n, "%" PRId64 "x%" PRId64 "x%" PRId64 "%s", s[0], s[1], s[2], twisted ? "t" : "");
}

void hw_slice_shapes_text(const hw_slice_shapes *sh, char *buf, size_t n) {
  size_t at = 0;
  char one[48];
  buf[0] = 0;
  for (int k = 0; k < sh->n_listed && at < n; k++) {
    hw_shape_text(sh->listed[k], sh->dims, false, one, sizeof one);
    at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? ", " : "", one);
  }
  int64_t c = sh->cube_side;
  if (c && at < n && sh->dims == 3)
    at += (size_t)snprintf(buf + at, n - at, ", or whole %" PRId64 "x%" PRId64 "x%" PRId64 " cubes",
                           c, c, c);
  else if (c && at < n)
    at += (size_t)snprintf(buf + at, n - at, ", or whole %" PRId64 "x%" PRId64 " squares", c, c);
  for (int k = 0; k < sh->n_twisted && at < n; k++) {
    hw_shape_text(sh->twisted[k], sh->dims, false, one, sizeof one);
    at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? ", " : "; twisted: ", one);
  }
}

/* Value as written in the file, plus a human form where the unit has one. */
static void format_value(const hw_model *m, int fi, char *buf, size_t n) {
  const hw_field *f = hw_field_get(fi);
  const void *p = fptr(m, f);
  char human[64] = "";
  switch (f->type) {
  case HWF_STR:
    snprintf(buf, n, "%s", (const char *)p);
    return;
  case HWF_ENUM:
    snprintf(buf, n, "%s", hw_enum_name(fi, *(const int *)p));
    return;
  case HWF_BOOL:
    snprintf(buf, n, "%s", *(const bool *)p ? "true" : "false");
    return;
  case HWF_INT3: {
    const int64_t *v = p;
    snprintf(buf, n, "%" PRId64 "x%" PRId64 "x%" PRId64, v[0], v[1], v[2]);
    return;
  }
  case HWF_SHAPES: {
    hw_slice_shapes_text(p, buf, n);
    return;
  }
  case HWF_MMGRID: {
    const double(*g)[HW_MM_NK][HW_MM_NK] = p;
    snprintf(buf, n, "measured GEMM rates by shape, of the best: %.3g at 256x256x256, %.3g at "
             "2048x2048x2048, %.3g at 4096x4096x4096, %.3g at 16384x4096x4096 (M x N x K)",
             g[0][0][0], g[3][3][3], g[4][4][4], g[HW_MM_M - 1][HW_MM_NK - 1][HW_MM_NK - 1]);
    return;
  }
  case HWF_INT: {
    int64_t v = *(const int64_t *)p;
    if (strcmp(f->unit, "B") == 0) units_bytes(human, sizeof human, (double)v);
    if (*human)
      snprintf(buf, n, "%" PRId64 " (%s)", v, human);
    else
      snprintf(buf, n, "%" PRId64 "%s%s", v, *f->unit ? " " : "", f->unit);
    return;
  }
  case HWF_NUM: {
    double v = *(const double *)p;
    if (strcmp(f->unit, "USD") == 0) {
      snprintf(buf, n, "$%.2f", v);
      return;
    }
    if (strcmp(f->unit, "s") == 0)
      units_seconds(human, sizeof human, v);
    else if (*f->unit)
      units_si(human, sizeof human, v, f->unit);
    snprintf(buf, n, "%.6g%s%s%s", v, *human ? " (" : "", human, *human ? ")" : "");
    return;
  }
  }
}

void hw_interconnect_summary(const hw_model *m, char *buf, size_t n) {
  static const char *const UP[] = {"NVSwitch", "NVLink mesh", "ICI", "socket link", "PCIe",
                                   "host link"};
  char up[32], out[32];
  units_si(up, sizeof up, m->scale_up.bw_per_chip_bytes_per_s, "B/s");
  units_si(out, sizeof out, m->scale_out.bw_per_chip_bytes_per_s, "B/s");
  if (m->scale_up.kind == HW_UP_ICI_TORUS)
    snprintf(buf, n, "ICI %" PRId64 "D torus %s + DCN %s", m->scale_up.torus_dims, up, out);
  else
    snprintf(buf, n, "%s %s + %s %s", UP[m->scale_up.kind], up, hw_scale_out_label(m->scale_out.kind), out);
}

void hw_print_show(const hw_model *m, FILE *out) {
  char ic[128];
  hw_interconnect_summary(m, ic, sizeof ic);
  fprintf(out, "%s  (%s, %s)\n", m->name, hw_kind_name(m->kind), m->vendor);
  fprintf(out, "  %s\n", m->description);
  fprintf(out, "  from: %s\n\n", m->origin);
  const char *section = "";
  for (int i = 0; i < hw_field_count(); i++) {
    const hw_field *f = hw_field_get(i);
    /* top level: in the header; absent optional figures are listed only when
    ** the timing model assumes something in their place */
    if ((!m->present[i] && !f->absent) || !strchr(f->path, '.')) continue;
    size_t sec_len = strcspn(f->path, ".");
    if (strncmp(section, f->path, sec_len) != 0 || section[sec_len] != '.') {
      fprintf(out, "%s%.*s\n", *section ? "\n" : "", (int)sec_len, f->path);
      section = f->path;
    }
    char v[320]; /* price.basis holds up to 255 characters */
    if (m->present[i]) format_value(m, i, v, sizeof v);
    else snprintf(v, sizeof v, "- (%s)", f->absent);
    const char *ids = (f->flags & HWF_FIGURE) && m->present[i] ? cite_ids(m, f->path) : NULL;
    if (ids)
      fprintf(out, "  %-38s %-34s[%s]\n", f->path + sec_len + 1, v, ids);
    else
      fprintf(out, "  %-38s %s\n", f->path + sec_len + 1, v);
  }
  if (m->n_notes) {
    fprintf(out, "\nnotes\n");
    for (int i = 0; i < m->n_notes; i++)
      fprintf(out, "  %s: %s\n", m->notes[i].key, m->notes[i].value);
  }
  fprintf(out, "\nsources\n");
  for (int i = 0; i < m->n_sources; i++)
    fprintf(out, "  [%s] %s\n", m->sources[i].key, m->sources[i].value);
}

/* Finds or creates the object at the dotted section path under root. */
static cJSON *section_obj(cJSON *root, const char *path, size_t len) {
  cJSON *cur = root;
  size_t at = 0;
  while (at < len) {
    size_t k = strcspn(path + at, ".");
    if (at + k > len) k = len - at;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)k, path + at);
    cJSON *next = cJSON_GetObjectItemCaseSensitive(cur, key);
    if (!next) next = cJSON_AddObjectToObject(cur, key);
    cur = next;
    at += k + 1;
  }
  return cur;
}

/* system.scale_up.slice_shapes as the file writes it (2-D shapes as [x, y]) */
static cJSON *shape_list_json(const int64_t (*v)[3], int n, int dims) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < n; k++) {
    int iv[3] = {(int)v[k][0], (int)v[k][1], (int)v[k][2]};
    cJSON_AddItemToArray(a, cJSON_CreateIntArray(iv, dims));
  }
  return a;
}

/* chip.matmul_shape as the file gives it: the axes, then the grid. */
static cJSON *mm_grid_json(const double g[HW_MM_M][HW_MM_NK][HW_MM_NK]) {
  cJSON *o = cJSON_CreateObject();
  int ms[HW_MM_M], nks[HW_MM_NK];
  for (int i = 0; i < HW_MM_M; i++) ms[i] = (int)HW_MM_MS[i];
  for (int i = 0; i < HW_MM_NK; i++) nks[i] = (int)HW_MM_NKS[i];
  cJSON_AddItemToObject(o, "m", cJSON_CreateIntArray(ms, HW_MM_M));
  cJSON_AddItemToObject(o, "n", cJSON_CreateIntArray(nks, HW_MM_NK));
  cJSON_AddItemToObject(o, "k", cJSON_CreateIntArray(nks, HW_MM_NK));
  cJSON *e = cJSON_AddArrayToObject(o, "eff");
  for (int i = 0; e && i < HW_MM_M; i++) {
    cJSON *a = cJSON_CreateArray();
    for (int j = 0; a && j < HW_MM_NK; j++) cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(g[i][j], HW_MM_NK));
    cJSON_AddItemToArray(e, a);
  }
  return o;
}

static cJSON *slice_shapes_json(const hw_slice_shapes *sh) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "listed", shape_list_json(sh->listed, sh->n_listed, sh->dims));
  if (sh->cube_side) cJSON_AddNumberToObject(o, "cube", (double)sh->cube_side);
  if (sh->n_twisted)
    cJSON_AddItemToObject(o, "twisted", shape_list_json(sh->twisted, sh->n_twisted, sh->dims));
  return o;
}

char *hw_to_json(const hw_model *m) {
  cJSON *root = cJSON_CreateObject();
  for (int i = 0; i < hw_field_count(); i++) {
    if (!m->present[i]) continue;
    const hw_field *f = hw_field_get(i);
    const char *leaf = strrchr(f->path, '.');
    cJSON *parent = leaf ? section_obj(root, f->path, (size_t)(leaf - f->path)) : root;
    leaf = leaf ? leaf + 1 : f->path;
    const void *p = fptr(m, f);
    switch (f->type) {
    case HWF_STR: cJSON_AddStringToObject(parent, leaf, p); break;
    case HWF_ENUM: cJSON_AddStringToObject(parent, leaf, hw_enum_name(i, *(const int *)p)); break;
    case HWF_NUM: cJSON_AddNumberToObject(parent, leaf, *(const double *)p); break;
    case HWF_INT: cJSON_AddNumberToObject(parent, leaf, (double)*(const int64_t *)p); break;
    case HWF_BOOL: cJSON_AddBoolToObject(parent, leaf, *(const bool *)p); break;
    case HWF_INT3: {
      const int64_t *v = p;
      int iv[3] = {(int)v[0], (int)v[1], (int)v[2]};
      cJSON_AddItemToObject(parent, leaf, cJSON_CreateIntArray(iv, 3));
      break;
    }
    case HWF_SHAPES: cJSON_AddItemToObject(parent, leaf, slice_shapes_json(p)); break;
    case HWF_MMGRID: cJSON_AddItemToObject(parent, leaf, mm_grid_json(p)); break;
    }
  }
  cJSON *src = cJSON_AddObjectToObject(root, "sources");
  for (int i = 0; i < m->n_sources; i++) {
    /* stored as "title <url>": split back for machine readers */
    const char *v = m->sources[i].value;
    const char *lt = strrchr(v, '<');
    cJSON *s = cJSON_AddObjectToObject(src, m->sources[i].key);
    char title[1024];
    snprintf(title, sizeof title, "%.*s", lt ? (int)(lt - v - 1) : (int)strlen(v), v);
    cJSON_AddStringToObject(s, "title", title);
    if (lt) {
      char url[1024];
      snprintf(url, sizeof url, "%.*s", (int)strlen(lt + 1) - 1, lt + 1);
      cJSON_AddStringToObject(s, "url", url);
    }
  }
  cJSON *cite = cJSON_AddObjectToObject(root, "cite");
  for (int i = 0; i < m->n_cites; i++) {
    /* one id stays a string, several become an array, as in the file */
    const char *v = m->cites[i].value;
    if (!strchr(v, ',')) {
      cJSON_AddStringToObject(cite, m->cites[i].key, v);
      continue;
    }
    cJSON *arr = cJSON_AddArrayToObject(cite, m->cites[i].key);
    while (*v) {
      size_t len = strcspn(v, ",");
      char id[128];
      snprintf(id, sizeof id, "%.*s", (int)len, v);
      cJSON_AddItemToArray(arr, cJSON_CreateString(id));
      v += len;
      while (*v == ',' || *v == ' ') v++;
    }
  }
  cJSON *notes = cJSON_AddObjectToObject(root, "notes");
  for (int i = 0; i < m->n_notes; i++)
    cJSON_AddStringToObject(notes, m->notes[i].key, m->notes[i].value);
  cJSON_AddStringToObject(root, "origin", m->origin);
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  return s;
}
