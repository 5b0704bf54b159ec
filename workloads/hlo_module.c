/*
** hlo_module.c -- the parsed module's storage: the arena its memory comes
** from, the growable lists the parser fills, the name tables that resolve
** %names, and what tests and `graph` read off a parsed module.
**
** Separate from the parser and the builder because both allocate from an
** arena and look names up, and neither owns the other's data.
*/
#include "hlo_int.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

/* Zeroed memory that lives until hlo_arena_free; NULL when out of memory. */
void *hlo_arena_alloc(hlo_arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (n == 0) n = sizeof(max_align_t);
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > (64u << 10) ? n : (64u << 10);
    hlo_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = (char *)a->head->data + a->head->used;
  a->head->used += n;
  memset(p, 0, n);
  return p;
}

void hlo_arena_free(hlo_arena *a) {
  for (hlo_chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  a->head = NULL;
}

bool hlo_vec_push(hlo_vec *v, const void *x) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    char *p = realloc(v->p, (size_t)cap * v->size);
    if (!p) return false;
    v->p = p;
    v->cap = cap;
  }
  memcpy(v->p + (size_t)v->n * v->size, x, v->size);
  v->n++;
  return true;
}

void *hlo_vec_done(hlo_vec *v, hlo_arena *a, bool *ok) {
  void *out = NULL;
  if (v->n) {
    out = hlo_arena_alloc(a, (size_t)v->n * v->size);
    if (out)
      memcpy(out, v->p, (size_t)v->n * v->size);
    else
      *ok = false;
  }
  free(v->p);
  v->p = NULL;
  return out;
}
static uint32_t str_hash(hlo_str s) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < s.n; i++)
    h = (h ^ (unsigned char)s.s[i]) * 16777619u;
  return h;
}

/* Open-addressing name table over items[i].name; returns NULL when out of
** memory, sets *dup to the first duplicate found (or -1). */
int *hlo_name_table(hlo_arena *a, const void *items, size_t stride, size_t name_off, int n,
                    int *tsize, int *dup) {
  int size = 16;
  while (size < 2 * n)
    size *= 2;
  int *t = hlo_arena_alloc(a, (size_t)size * sizeof *t);
  if (!t) return NULL;
  for (int i = 0; i < size; i++)
    t[i] = -1;
  *dup = -1;
  for (int i = 0; i < n; i++) {
    hlo_str s = *(const hlo_str *)((const char *)items + (size_t)i * stride + name_off);
    uint32_t h = str_hash(s) & (uint32_t)(size - 1);
    for (;; h = (h + 1) & (uint32_t)(size - 1)) {
      if (t[h] < 0) {
        t[h] = i;
        break;
      }
      hlo_str o = *(const hlo_str *)((const char *)items + (size_t)t[h] * stride + name_off);
      if (o.n == s.n && memcmp(o.s, s.s, (size_t)s.n) == 0) {
        if (*dup < 0) *dup = i;
        break;
      }
    }
  }
  *tsize = size;
  return t;
}

static int name_find(const int *t, int size, const void *items, size_t stride, size_t name_off,
                     hlo_str s) {
  if (!t) return -1;
  for (uint32_t h = str_hash(s) & (uint32_t)(size - 1);; h = (h + 1) & (uint32_t)(size - 1)) {
    if (t[h] < 0) return -1;
    hlo_str o = *(const hlo_str *)((const char *)items + (size_t)t[h] * stride + name_off);
    if (o.n == s.n && memcmp(o.s, s.s, (size_t)s.n) == 0) return t[h];
  }
}

int hlo_inst_find(const hlo_comp *c, hlo_str s) {
  return name_find(c->table, c->tsize, c->insts, sizeof *c->insts, offsetof(hlo_inst, name), s);
}

int hlo_comp_find(const hlo_module *m, hlo_str s) {
  if (s.n > 0 && s.s[0] == '%') s.s++, s.n--;
  return name_find(m->table, m->tsize, m->comps, sizeof *m->comps, offsetof(hlo_comp, name), s);
}

const hlo_attr *hlo_attr_get(const hlo_inst *in, const char *key) {
  for (int i = 0; i < in->n_attrs; i++)
    if (str_is(in->attrs[i].key, key)) return &in->attrs[i];
  return NULL;
}
void hlo_module_free(hlo_module *m) {
  if (!m) return;
  hlo_arena_free(&m->ar);
  free(m->text);
  free(m->file);
  free(m);
}
const char *hlo_module_name(const hlo_module *m) { return m->name_z ? m->name_z : "hlo"; }
int hlo_computation_count(const hlo_module *m) { return m->n_comps; }

int hlo_instruction_count(const hlo_module *m) {
  int n = 0;
  for (int i = 0; i < m->n_comps; i++)
    n += m->comps[i].n;
  return n;
}

int hlo_opcode_count(const hlo_module *m, const char *opcode) {
  int n = 0;
  for (int i = 0; i < m->n_comps; i++)
    for (int k = 0; k < m->comps[i].n; k++)
      n += op_is(&m->comps[i].insts[k], opcode);
  return n;
}
