/*
** hw_catalog.c -- see hw_catalog.h.
*/
#include "hw_catalog.h"

#include <stdlib.h>
#include <string.h>

#include "../base/jin.h"
#include "../base/strutil.h"

/* Far larger than any hardware description; a bigger file is a wrong path. */
#define HW_FILE_MAX_BYTES (1u << 20)

struct hw_catalog {
  hw_model **m;
  int n, cap;
  int builtin; /* the first `builtin` entries are sorted built-ins */
};

hw_catalog *hw_catalog_new(void) { return calloc(1, sizeof(hw_catalog)); }

void hw_catalog_free(hw_catalog *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) hw_free(c->m[i]);
  free(c->m);
  free(c);
}

static int put(hw_catalog *c, hw_model *m) {
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 16;
    hw_model **nm = realloc(c->m, (size_t)cap * sizeof *nm);
    if (!nm) return -1;
    c->m = nm;
    c->cap = cap;
  }
  c->m[c->n++] = m;
  return 0;
}

static int by_rank(const void *a, const void *b) {
  const hw_model *x = *(hw_model *const *)a, *y = *(hw_model *const *)b;
  if (x->kind != y->kind) return (int)x->kind - (int)y->kind;
  double px = hw_peak_16bit(x), py = hw_peak_16bit(y);
  if (px != py) return px < py ? -1 : 1;
  return strcmp(x->name, y->name);
}

int hw_catalog_load_builtin(hw_catalog *c, diag *dg) {
  int bad = 0;
  for (int i = 0; i < hw_files_count; i++) {
    const embedded_file *e = &hw_files[i];
    hw_model *m = hw_load(e->file, (const char *)e->data, e->len, dg);
    if (!m) {
      bad = 1;
      continue;
    }
    str_copy(m->origin, sizeof m->origin, "built-in");
    if (hw_catalog_find(c, m->name)) {
      diag_error(dg, e->file, 0, 0, "name", "'%s' is already defined by another built-in file",
                 m->name);
      hw_free(m);
      bad = 1;
      continue;
    }
    if (put(c, m) != 0) {
      hw_free(m);
      return -1;
    }
  }
  qsort(c->m, (size_t)c->n, sizeof *c->m, by_rank);
  c->builtin = c->n;
  return bad ? -1 : 0;
}

const hw_model *hw_catalog_load_file(hw_catalog *c, const char *path, diag *dg) {
  size_t len;
  char *text = jin_read_regular(path, HW_FILE_MAX_BYTES, "a hardware file",
                                "hardware files are a few kilobytes", &len, dg);
  if (!text) return NULL;
  hw_model *m = hw_load(path, text, len, dg);
  free(text);
  if (!m) return NULL;
  for (int i = 0; i < c->n; i++) {
    if (strcmp(c->m[i]->name, m->name) == 0) {
      hw_free(c->m[i]);
      c->m[i] = m;
      return m;
    }
  }
  if (put(c, m) != 0) {
    hw_free(m);
    diag_error(dg, path, 0, 0, NULL, "out of memory");
    return NULL;
  }
  return m;
}

int hw_catalog_count(const hw_catalog *c) { return c->n; }

const hw_model *hw_catalog_at(const hw_catalog *c, int i) {
  return (i >= 0 && i < c->n) ? c->m[i] : NULL;
}

const hw_model *hw_catalog_find(const hw_catalog *c, const char *name) {
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->m[i]->name, name) == 0) return c->m[i];
  return NULL;
}

hw_model *hw_catalog_find_mut(hw_catalog *c, const char *name) {
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->m[i]->name, name) == 0) return c->m[i];
  return NULL;
}

void hw_catalog_unknown(const hw_catalog *c, const char *name, char *buf, size_t n) {
  const char *names[256] = {0};
  int k = 0;
  for (int i = 0; i < c->n && k < 256; i++) names[k++] = c->m[i]->name;
  const char *s = str_suggest(name, names, k);
  char list[1024] = "";
  for (int i = 0; i < k; i++) {
    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
    strncat(list, names[i], sizeof list - strlen(list) - 1);
  }
  if (s)
    snprintf(buf, n, "unknown hardware '%s'; did you mean '%s'? (known: %s)", name, s, list);
  else
    snprintf(buf, n, "unknown hardware '%s' (known: %s)", name, list);
}
