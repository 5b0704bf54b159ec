/*
** view_trace.c -- loading a trace into lanes (view_int.h): through jin,
** so every problem names file:line:col. The file is size-checked before it
** is read (VIEW_TRACE_MAX_BYTES) and parsed one event at a time, so loading
** costs the text plus the lanes, about twice the file, not the ten times a
** whole cJSON tree would. Also the event categories and their colours, and
** the strings that outlive each event's tree (an arena).
*/
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view_int.h"
#include "../base/diag.h"
#include "../base/jin.h"
#include "../base/units.h"

/* ------------------------------------------------------------------ */
/* colours                                                              */

const view_colour VIEW_COLORS[VIEW_N_COLORS] = {
    {"forward", {66, 133, 244}},   {"backward", {255, 152, 0}}, {"collective", {156, 39, 176}},
    {"matmul", {40, 53, 147}},     {"elementwise", {240, 98, 146}},
    {"input", {229, 57, 53}},      {"optimizer", {67, 160, 71}}, {"other", {120, 144, 156}},
    {"memory", {0, 150, 136}},     {"capacity", {211, 47, 47}}, {"idle", {246, 247, 249}},
};

int view_color(const char *category, unsigned char rgb[3]) {
  for (size_t i = 0; i < VIEW_N_COLORS; i++)
    if (category && strcmp(category, VIEW_COLORS[i].name) == 0) {
      memcpy(rgb, VIEW_COLORS[i].rgb, 3);
      return 0;
    }
  memcpy(rgb, VIEW_COLORS[CAT_OTHER].rgb, 3);
  return -1;
}

static int cat_of(const char *s) {
  if (!s) return CAT_OTHER;
  for (int i = 0; i < CAT_OTHER; i++)
    if (strcmp(s, VIEW_COLORS[i].name) == 0) return i;
  /* per-op traces name finer categories; fold the usual ones in */
  if (strstr(s, "collective") || strstr(s, "all-reduce") || strstr(s, "all-gather") ||
      strstr(s, "reduce-scatter") || strstr(s, "comm"))
    return CAT_COLLECTIVE;
  if (strstr(s, "matmul") || strstr(s, "dot") || strstr(s, "conv")) return CAT_MATMUL;
  if (strstr(s, "backward")) return CAT_BACKWARD;
  if (strstr(s, "forward")) return CAT_FORWARD;
  if (strstr(s, "optim")) return CAT_OPTIMIZER;
  if (strstr(s, "input") || strstr(s, "stall")) return CAT_INPUT;
  return CAT_OTHER;
}

/* ------------------------------------------------------------------ */
/* strings that outlive the JSON tree                                   */

typedef struct ablock {
  struct ablock *next;
  size_t used, cap;
  char data[];
} ablock;

static char *arena_dup(ablock **a, const char *s, size_t n) {
  if (!*a || (*a)->cap - (*a)->used < n + 1) {
    size_t cap = n + 1 > ((size_t)1 << 20) ? n + 1 : (size_t)1 << 20;
    ablock *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = *a;
    b->used = 0;
    b->cap = cap;
    *a = b;
  }
  char *p = (*a)->data + (*a)->used;
  memcpy(p, s, n);
  p[n] = '\0';
  (*a)->used += n + 1;
  return p;
}

static void arena_free(ablock *a) {
  while (a) {
    ablock *n = a->next;
    free(a);
    a = n;
  }
}

/* ------------------------------------------------------------------ */
/* the trace                                                            */

void view_trace_free(view_trace *t) {
  if (!t) return;
  for (int g = 0; g < t->ngroups; g++) free(t->groups[g].procs);
  for (int i = 0; i < t->nglanes; i++) {
    for (int c = 0; c < CAT_N; c++) free(t->glanes[i].bp[c]);
    free(t->glanes[i].pt);
  }
  free(t->groups);
  free(t->glanes);
  free(t->rows);
  free(t->procs);
  free(t->ev);
  free(t->pt);
  free(t->lanes);
  arena_free(t->arena);
  free(t);
}

static int cmp_ev(const void *a, const void *b) {
  const vev *x = a, *y = b;
  if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return 0;
}

static int cmp_pt(const void *a, const void *b) {
  const vpt *x = a, *y = b;
  if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return 0;
}

static int cmp_lane(const void *a, const void *b) {
  const vlane *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->mem != y->mem) return x->mem ? 1 : -1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  const vname *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return 0;
}

/* names sorted by (pid, tid); the last one given wins, as in Perfetto */
const char *view_find_name(const vname *names, int n, double pid, double tid) {
  vname key = {pid, tid, NULL};
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cmp_name(&names[mid], &key) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && names[lo - 1].pid == pid && names[lo - 1].tid == tid ? names[lo - 1].name
                                                                        : NULL;
}

/* (pid, tid, mem) -> lane, open addressing: a trace of thousands of chips
** has thousands of lanes, and every event looks its lane up. */
typedef struct {
  int *slot; /* lane index or -1 */
  int cap;   /* power of two */
} lanemap;

static uint64_t lane_hash(double pid, double tid, bool mem) {
  uint64_t a, b;
  memcpy(&a, &pid, 8);
  memcpy(&b, &tid, 8);
  /* splitmix64's finalizer: a small integer as a double has its bits at the
  ** top, so they must reach the low bits the table is indexed by */
  uint64_t h = a ^ (b << 1 | b >> 63) ^ (mem ? 0xD6E8FEB86659FD93ULL : 0);
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBULL;
  return h ^ (h >> 31);
}

static bool lanemap_grow(lanemap *m, const vlane *lanes, int n) {
  int cap = m->cap ? m->cap * 2 : 64;
  int *s = malloc((size_t)cap * sizeof *s);
  if (!s) return false;
  for (int i = 0; i < cap; i++) s[i] = -1;
  for (int i = 0; i < n; i++) {
    uint64_t h = lane_hash(lanes[i].pid, lanes[i].tid, lanes[i].mem);
    int k = (int)(h & (uint64_t)(cap - 1));
    while (s[k] >= 0) k = (k + 1) & (cap - 1);
    s[k] = i;
  }
  free(m->slot);
  m->slot = s;
  m->cap = cap;
  return true;
}

/* Lane index of (pid, tid, mem), adding it when new; -1 when out of memory. */
static int lane_of(view_trace *t, lanemap *m, int *cap, double pid, double tid, bool mem) {
  if (m->cap > 0) {
    int k = (int)(lane_hash(pid, tid, mem) & (uint64_t)(m->cap - 1));
    for (; m->slot[k] >= 0; k = (k + 1) & (m->cap - 1)) {
      const vlane *l = &t->lanes[m->slot[k]];
      if (l->pid == pid && l->tid == tid && l->mem == mem) return m->slot[k];
    }
  }
  if (t->nlanes == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    vlane *nl = realloc(t->lanes, (size_t)nc * sizeof *nl);
    if (!nl) return -1;
    t->lanes = nl;
    *cap = nc;
  }
  t->lanes[t->nlanes] = (vlane){.pid = pid, .tid = tid, .mem = mem};
  int id = t->nlanes++;
  if (2 * t->nlanes > m->cap) return lanemap_grow(m, t->lanes, t->nlanes) ? id : -1;
  int k = (int)(lane_hash(pid, tid, mem) & (uint64_t)(m->cap - 1));
  while (m->slot[k] >= 0) k = (k + 1) & (m->cap - 1);
  m->slot[k] = id;
  return id;
}

static bool grow(void **p, int *cap, int n, size_t size) {
  if (n < *cap) return true;
  int nc = *cap ? *cap * 2 : 256;
  void *np = realloc(*p, (size_t)nc * size);
  if (!np) return false;
  *p = np;
  *cap = nc;
  return true;
}

/* The process label without its parenthesised detail: "stage 0". */
static void short_name(char *buf, size_t n, const char *name, const char *fallback, double id) {
  if (!name) {
    snprintf(buf, n, "%s %g", fallback, id);
    return;
  }
  size_t len = strlen(name);
  const char *par = strstr(name, " (");
  if (par) len = (size_t)(par - name);
  snprintf(buf, n, "%.*s", (int)len, name);
}

/* An event's args as tooltip lines: "shape [8, 2048, 12288]", "flops
** 1.2 TFLOP", "bytes 3.0 GiB"; whatever the writer put there, shown. */
static const char *info_of(view_trace *t, const cJSON *args) {
  if (!cJSON_IsObject(args) || !args->child) return "";
  char buf[512];
  size_t len = 0;
  int lines = 0;
  for (const cJSON *a = args->child; a && lines < 6; a = a->next, lines++) {
    char val[160] = "";
    const char *k = a->string ? a->string : "?";
    if (cJSON_IsNumber(a)) {
      double v = a->valuedouble;
      if (strstr(k, "flop")) units_si(val, sizeof val, v, "FLOP");
      else if (strstr(k, "bytes")) units_bytes(val, sizeof val, v);
      else snprintf(val, sizeof val, "%.6g", v);
    } else if (cJSON_IsString(a)) {
      snprintf(val, sizeof val, "%s", a->valuestring);
    } else if (cJSON_IsBool(a)) {
      snprintf(val, sizeof val, "%s", cJSON_IsTrue(a) ? "true" : "false");
    } else {
      char *s = cJSON_PrintUnformatted(a);
      snprintf(val, sizeof val, "%s", s ? s : "?");
      free(s);
    }
    int w = snprintf(buf + len, sizeof buf - len, "%s%s %s", lines ? "\n" : "", k, val);
    if (w < 0 || (size_t)w >= sizeof buf - len) break;
    len += (size_t)w;
  }
  char *p = arena_dup(&t->arena, buf, len);
  return p ? p : "";
}

static int trace_finish(view_trace *t, vname *names, int nnames);

/* ------------------------------------------------------------------ */
/* reading, one event at a time                                         */

/* The text is scanned once, front to back; each event is parsed on its own
** (jin_open_part), copied into t and freed, so the JSON tree of the whole
** trace (ten times the file's size in cJSON nodes) never exists and a trace
** costs its text plus what t keeps. */
typedef struct {
  view_trace *t;
  const char *path;
  diag *dg;
  const char *text;
  size_t len;
  size_t at; /* line:col are those of text[at]; the scan only moves forward */
  int line, col;
  vname *names;
  int nnames, capnames, capev, cappt, caplanes;
  lanemap lm;
  int errors;
  bool oom;
} loader;

/* Errors after which the rest of a trace is not read: as many as a
** diagnostic list keeps, and a bound on the time a broken file costs. */
#define VIEW_MAX_ERRORS 50

static void pos_of(loader *L, size_t off, int *line, int *col) {
  while (L->at < off) {
    const char *nl = memchr(L->text + L->at, '\n', off - L->at);
    if (!nl) {
      L->col += (int)(off - L->at);
      L->at = off;
      break;
    }
    L->line++;
    L->col = 1;
    L->at = (size_t)(nl - L->text) + 1;
  }
  *line = L->line;
  *col = L->col;
}

static size_t skip_ws(const loader *L, size_t p) {
  while (p < L->len && strchr(" \t\r\n", L->text[p])) p++;
  return p;
}

/* What the scanner found at off instead of what it expected; the words
** are jin's, so a trace's syntax errors read like every other file's. */
static void syntax_error(loader *L, size_t off, const char *expected) {
  int line, col;
  pos_of(L, off, &line, &col);
  L->errors++;
  if (off >= L->len) {
    diag_error(L->dg, L->path, line, col, NULL, "unexpected end of input (truncated?)");
    return;
  }
  char near[17];
  size_t k = 0;
  for (size_t p = off; p < L->len && k < 16 && L->text[p] != '\n'; p++) near[k++] = L->text[p];
  near[k] = '\0';
  diag_error(L->dg, L->path, line, col, NULL, "invalid JSON syntax near '%s': expected %s", near,
             expected);
}

/* Parses text[s, e) alone into j, reached by prefix; -1 after reporting (j
** needs no closing then). A part larger than VIEW_TRACE_MAX_PART is refused
** unparsed: one event's tree is all the loader holds at a time. */
static int open_part(loader *L, jin *j, size_t s, size_t e, const jin_seg *prefix, int n) {
  int line, col;
  pos_of(L, s, &line, &col);
  if (e - s > VIEW_TRACE_MAX_PART) {
    jin p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < n; i++) p.path[i] = prefix[i];
    p.depth = n;
    char where[128], lim[32];
    jin_path(&p, where, sizeof where);
    units_bytes(lim, sizeof lim, (double)VIEW_TRACE_MAX_PART);
    diag_error(L->dg, L->path, line, col, where,
               "a value of %zu bytes, over the %s (%zu bytes) one event or otherData may be "
               "(simulate writes events of a few hundred bytes); not read",
               e - s, lim, VIEW_TRACE_MAX_PART);
    L->errors++;
    return -1;
  }
  if (jin_open_part(j, L->path, L->text + s, e - s, line, col, prefix, n, L->dg) != 0) {
    L->errors += j->errors > 0 ? j->errors : 1;
    jin_close(j);
    return -1;
  }
  return 0;
}

/* One complete ("X") event: a box on its (pid, tid) lane. */
static void read_box(loader *L, jin *j, const cJSON *e, double pid, double tid, bool ok) {
  view_trace *t = L->t;
  double ts = 0, dur = 0;
  ok = jin_get_num(j, e, "ts", -1e18, 1e18, true, &ts) == 1 && ok;
  ok = jin_get_num(j, e, "dur", 0, 1e18, true, &dur) == 1 && ok;
  if (!ok) return;
  const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
  const cJSON *cv = cJSON_GetObjectItemCaseSensitive(e, "cat");
  const char *name = cJSON_IsString(nv) ? nv->valuestring : "";
  const char *cat = cJSON_IsString(cv) ? cv->valuestring : NULL;
  int lane = lane_of(t, &L->lm, &L->caplanes, pid, tid, false);
  const char *nm = arena_dup(&t->arena, name, strlen(name));
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
  const char *info = cJSON_IsObject(args) ? info_of(t, args) : NULL;
  if (lane < 0 || !nm || !grow((void **)&t->ev, &L->capev, t->nev, sizeof *t->ev)) {
    L->oom = true;
    return;
  }
  int c = cat_of(cat);
  t->cats |= 1u << c;
  t->ev[t->nev++] = (vev){ts, dur, nm, info && *info ? info : NULL, lane, c};
}

/* One counter ("C") event: a point of its process's HBM curve when it
** counts "bytes". */
static void read_counter(loader *L, jin *j, const cJSON *e, double pid, bool ok) {
  view_trace *t = L->t;
  double ts = 0, v = 0;
  ok = jin_get_num(j, e, "ts", -1e18, 1e18, true, &ts) == 1 && ok;
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
  if (!cJSON_IsObject(args) || !cJSON_GetObjectItemCaseSensitive(args, "bytes")) return;
  jin_push_key(j, "args", 0);
  ok = jin_get_num(j, args, "bytes", 0, 1e30, true, &v) == 1 && ok;
  jin_pop(j);
  if (!ok) return;
  int lane = lane_of(t, &L->lm, &L->caplanes, pid, 0, true);
  if (lane < 0 || !grow((void **)&t->pt, &L->cappt, t->npt, sizeof *t->pt)) L->oom = true;
  else t->pt[t->npt++] = (vpt){ts, v, lane};
}

/* One metadata ("M") event: a process's or thread's name, or labels. */
static void read_meta(loader *L, const cJSON *e, double pid, double tid) {
  const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
  bool proc = cJSON_IsString(nv) && strcmp(nv->valuestring, "process_name") == 0;
  bool thr = cJSON_IsString(nv) && strcmp(nv->valuestring, "thread_name") == 0;
  bool lab = cJSON_IsString(nv) && strcmp(nv->valuestring, "process_labels") == 0;
  const cJSON *an =
      cJSON_IsObject(args) ? cJSON_GetObjectItemCaseSensitive(args, lab ? "labels" : "name")
                           : NULL;
  if (!(proc || thr || lab) || !cJSON_IsString(an)) return;
  const char *s = arena_dup(&L->t->arena, an->valuestring, strlen(an->valuestring));
  if (!s || !grow((void **)&L->names, &L->capnames, L->nnames, sizeof *L->names)) L->oom = true;
  else L->names[L->nnames++] = (vname){pid, proc ? -1e300 : lab ? -2e300 : tid, s};
}

static void read_event(loader *L, jin *j, const cJSON *e) {
  const char *ph = NULL;
  if (!cJSON_IsObject(e)) {
    char got[64];
    jin_describe(e, got, sizeof got);
    jin_error(j, 0, "expected an event object, got %s", got);
    return;
  }
  if (jin_get_str(j, e, "ph", true, &ph) != 1) return;
  double pid = 0, tid = 0;
  bool ok = jin_get_num(j, e, "pid", -1e15, 1e15, false, &pid) >= 0;
  ok = jin_get_num(j, e, "tid", -1e15, 1e15, false, &tid) >= 0 && ok;
  if (strcmp(ph, "X") == 0) read_box(L, j, e, pid, tid, ok);
  else if (strcmp(ph, "C") == 0) read_counter(L, j, e, pid, ok);
  else if (strcmp(ph, "M") == 0 && ok) read_meta(L, e, pid, tid);
  /* other phases (B/E, instant, flow) are not drawn */
}

/* The events of the array at text[p] ('['), reached by key (NULL: the
** array is the file). Returns the offset past the array, or SIZE_MAX once
** the scan cannot go on (reported). */
static size_t read_events(loader *L, size_t p, const char *key) {
  jin_seg pre[2];
  int np = 0;
  if (key) pre[np++] = (jin_seg){key, 0};
  p = skip_ws(L, p + 1);
  if (p < L->len && L->text[p] == ']') return p + 1;
  for (int index = 0;; index++) {
    if (L->errors >= VIEW_MAX_ERRORS || L->oom) {
      if (!L->oom)
        diag_error(L->dg, L->path, 0, 0, NULL, "stopped after %d errors; the rest was not read",
                   L->errors);
      return SIZE_MAX;
    }
    size_t e = jin_skip_value(L->text, L->len, p);
    if (e == p) {
      syntax_error(L, p, "an event");
      return SIZE_MAX;
    }
    pre[np] = (jin_seg){NULL, index};
    jin j;
    if (open_part(L, &j, p, e, pre, np + 1) == 0) {
      read_event(L, &j, j.root);
      L->errors += j.errors;
      jin_close(&j);
    } else if (e >= L->len) {
      return SIZE_MAX; /* cut off inside the event: said once, by its parse */
    }
    p = skip_ws(L, e);
    if (p < L->len && L->text[p] == ',') {
      p = skip_ws(L, p + 1);
      continue;
    }
    if (p < L->len && L->text[p] == ']') return p + 1;
    syntax_error(L, p, "',' or ']' after an event");
    return SIZE_MAX;
  }
}

/* The value at text[p], which should have been `want`, parsed to say what
** it is instead. Returns the offset past it, or SIZE_MAX. */
static size_t read_wrong(loader *L, size_t p, const jin_seg *pre, int np, const char *want) {
  size_t e = jin_skip_value(L->text, L->len, p);
  if (e == p) {
    syntax_error(L, p, "a value");
    return SIZE_MAX;
  }
  jin j;
  if (open_part(L, &j, p, e, pre, np) != 0) return e >= L->len ? SIZE_MAX : e;
  char got[64];
  jin_describe(j.root, got, sizeof got);
  jin_error(&j, 0, "expected %s, got %s", want, got);
  L->errors += j.errors;
  jin_close(&j);
  return e;
}

/* The viewer's summary: model, hardware, step time, HBM capacity. */
static void read_other(loader *L, const cJSON *other) {
  view_trace *t = L->t;
  if (!cJSON_IsObject(other)) return;
  const cJSON *v;
  if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "model")))
    t->model = arena_dup(&t->arena, v->valuestring, strlen(v->valuestring));
  if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "hw")))
    t->hw = arena_dup(&t->arena, v->valuestring, strlen(v->valuestring));
  if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(other, "step_time_s")) &&
      isfinite(v->valuedouble) && v->valuedouble > 0)
    t->step_s = v->valuedouble;
  static const char *const CAP_KEYS[] = {"hbm_capacity_bytes", "capacity_bytes", "hbm_bytes"};
  for (size_t k = 0; k < sizeof CAP_KEYS / sizeof *CAP_KEYS; k++)
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(other, CAP_KEYS[k])) &&
        isfinite(v->valuedouble) && v->valuedouble > 0) {
      t->capacity = v->valuedouble;
      break;
    }
}

/* A member of the top-level object, its value at text[p]: the first
** "traceEvents" is read event by event, "otherData" parsed and read, any
** other member parsed (its syntax checked) and dropped, or skipped when
** larger than a part may be. Returns the offset past it, or SIZE_MAX. */
static size_t read_member(loader *L, size_t ks, size_t ke, size_t p, bool *events) {
  char key[64];
  snprintf(key, sizeof key, "%.*s", (int)(ke - ks - 2 < 63 ? ke - ks - 2 : 63), L->text + ks + 1);
  if (strcmp(key, "traceEvents") == 0 && !*events) {
    *events = true;
    static const jin_seg EV = {"traceEvents", 0};
    if (p < L->len && L->text[p] == '[') return read_events(L, p, "traceEvents");
    return read_wrong(L, p, &EV, 1, "an array");
  }
  size_t e = jin_skip_value(L->text, L->len, p);
  if (e == p) {
    syntax_error(L, p, "a value");
    return SIZE_MAX;
  }
  bool other = strcmp(key, "otherData") == 0;
  if (!other && e - p > VIEW_TRACE_MAX_PART) return e;
  jin_seg pre = {key, 0};
  jin j;
  if (open_part(L, &j, p, e, &pre, 1) != 0) return e >= L->len ? SIZE_MAX : e;
  if (other) read_other(L, j.root);
  jin_close(&j);
  return e;
}

/* The object at text[p] ('{'): its members. Returns the offset past it,
** or SIZE_MAX. */
static size_t read_members(loader *L, size_t p) {
  int line, col;
  pos_of(L, p, &line, &col);
  bool events = false;
  p = skip_ws(L, p + 1);
  if (p < L->len && L->text[p] == '}') {
    p++;
  } else {
    for (;;) {
      if (p >= L->len || L->text[p] != '"') {
        syntax_error(L, p, "a member name");
        return SIZE_MAX;
      }
      size_t ks = p, ke = jin_skip_value(L->text, L->len, p);
      p = skip_ws(L, ke);
      if (ke >= L->len || p >= L->len || L->text[p] != ':') {
        syntax_error(L, p, "':' after a member name");
        return SIZE_MAX;
      }
      size_t e = read_member(L, ks, ke, skip_ws(L, p + 1), &events);
      if (e == SIZE_MAX) return SIZE_MAX;
      p = skip_ws(L, e);
      if (p < L->len && L->text[p] == ',') {
        p = skip_ws(L, p + 1);
        continue;
      }
      if (p < L->len && L->text[p] == '}') {
        p++;
        break;
      }
      syntax_error(L, p, "',' or '}' after a member");
      return SIZE_MAX;
    }
  }
  if (!events) {
    diag_error(L->dg, L->path, line, col, NULL, "missing field 'traceEvents'");
    L->errors++;
  }
  return p;
}

/* The whole text into L->t: lanes of events, names, the summary; -1 after
** reporting. */
static int trace_read(loader *L) {
  view_trace *t = L->t;
  if (memchr(L->text, '\0', L->len)) {
    diag_error(L->dg, L->path, 0, 0, NULL, "contains a NUL byte; expected JSON text");
    return -1;
  }
  size_t p = skip_ws(L, 0), e;
  if (p == L->len) {
    diag_error(L->dg, L->path, 1, 1, NULL, "empty file; expected a JSON object");
    return -1;
  }
  if (L->text[p] == '[') {
    e = read_events(L, p, NULL); /* the JSON Array Format of Chrome traces */
  } else if (L->text[p] == '{') {
    e = read_members(L, p);
  } else {
    e = read_wrong(L, p, NULL, 0, "a trace: an object with \"traceEvents\"");
  }
  if (e != SIZE_MAX && (e = skip_ws(L, e)) < L->len) {
    int line, col;
    pos_of(L, e, &line, &col);
    diag_error(L->dg, L->path, line, col, NULL, "unexpected text after the JSON value");
    L->errors++;
  }
  if (L->oom) diag_error(L->dg, L->path, 0, 0, NULL, "out of memory reading the trace");
  if (L->errors == 0 && !L->oom && t->nev == 0 && t->npt == 0)
    diag_error(L->dg, L->path, 0, 0, "traceEvents",
               "no events to show: expected complete (\"X\") events with ts and dur, or "
               "\"HBM in use\" counters (\"C\")");
  return L->errors > 0 || L->oom || e == SIZE_MAX || (t->nev == 0 && t->npt == 0) ? -1 : 0;
}

view_trace *view_trace_open(const char *path, FILE *err) {
  diag *dg = diag_new();
  view_trace *t = calloc(1, sizeof *t);
  if (!dg || !t) {
    fprintf(err, "tpusim view: out of memory\n");
    diag_free(dg);
    free(t);
    return NULL;
  }
  size_t len = 0;
  char *text = jin_read_regular(path, VIEW_TRACE_MAX_BYTES, "a trace", VIEW_TRACE_LIMIT_WHY, &len,
                                dg);
  loader L = {.t = t, .path = path, .dg = dg, .text = text, .len = len, .line = 1, .col = 1};
  int rc = text ? trace_read(&L) : -1;
  free(text); /* everything needed is copied out, before the sorting needs memory */
  free(L.lm.slot);
  if (rc == 0 && trace_finish(t, L.names, L.nnames) != 0) {
    diag_error(dg, path, 0, 0, NULL, "out of memory reading the trace");
    rc = -1;
  }
  free(L.names);
  if (rc != 0) {
    diag_print(dg, err);
    view_trace_free(t);
    t = NULL;
  }
  diag_free(dg);
  return t;
}

/* Sorts the lanes and events, labels them, groups many processes. */
static int trace_finish(view_trace *t, vname *names, int nnames) {
  if (nnames > 0) qsort(names, (size_t)nnames, sizeof *names, cmp_name);
  int *remap = malloc((size_t)t->nlanes * sizeof *remap);
  vlane *sorted = malloc((size_t)t->nlanes * sizeof *sorted);
  if (!remap || !sorted) {
    free(remap);
    free(sorted);
    return -1;
  }
  for (int i = 0; i < t->nlanes; i++) t->lanes[i].first = i; /* original index */
  memcpy(sorted, t->lanes, (size_t)t->nlanes * sizeof *sorted);
  qsort(sorted, (size_t)t->nlanes, sizeof *sorted, cmp_lane);
  for (int i = 0; i < t->nlanes; i++) remap[sorted[i].first] = i;
  memcpy(t->lanes, sorted, (size_t)t->nlanes * sizeof *sorted);
  free(sorted);
  for (int i = 0; i < t->nev; i++) t->ev[i].lane = remap[t->ev[i].lane];
  for (int i = 0; i < t->npt; i++) t->pt[i].lane = remap[t->pt[i].lane];
  free(remap);
  if (t->nev > 0) qsort(t->ev, (size_t)t->nev, sizeof *t->ev, cmp_ev);
  if (t->npt > 0) qsort(t->pt, (size_t)t->npt, sizeof *t->pt, cmp_pt);
  for (int i = 0; i < t->nlanes; i++) t->lanes[i].count = 0, t->lanes[i].first = 0;
  t->t0 = INFINITY;
  t->t1 = -INFINITY;
  for (int i = t->nev - 1; i >= 0; i--) {
    vlane *l = &t->lanes[t->ev[i].lane];
    l->first = i;
    l->count++;
    if (t->ev[i].dur > l->maxdur) l->maxdur = t->ev[i].dur;
    if (t->ev[i].ts < t->t0) t->t0 = t->ev[i].ts;
    if (t->ev[i].ts + t->ev[i].dur > t->t1) t->t1 = t->ev[i].ts + t->ev[i].dur;
  }
  for (int i = t->npt - 1; i >= 0; i--) {
    vlane *l = &t->lanes[t->pt[i].lane];
    l->first = i;
    l->count++;
    if (t->pt[i].bytes > t->mem_max) t->mem_max = t->pt[i].bytes;
    if (t->pt[i].ts < t->t0) t->t0 = t->pt[i].ts;
    if (t->pt[i].ts > t->t1) t->t1 = t->pt[i].ts;
  }
  if (t->step_s > 0 && t->t0 >= 0 && t->step_s * 1e6 > t->t1) t->t1 = t->step_s * 1e6;
  if (t->t0 > 0 && t->step_s > 0) t->t0 = 0;
  if (!(t->t1 > t->t0)) t->t1 = t->t0 + 1;
  /* processes: the lanes of one pid are contiguous */
  t->procs = calloc((size_t)t->nlanes, sizeof *t->procs);
  if (!t->procs) return -1;
  for (int i = 0; i < t->nlanes; i++) {
    vlane *l = &t->lanes[i];
    if (i == 0 || l->pid != t->lanes[i - 1].pid) {
      vproc *p = &t->procs[t->nprocs++];
      p->pid = l->pid;
      p->lane0 = i;
      short_name(p->name, sizeof p->name, view_find_name(names, nnames, l->pid, -1e300), "pid",
                 l->pid);
    }
    vproc *p = &t->procs[t->nprocs - 1];
    p->nlanes++;
    l->proc = t->nprocs - 1;
    if (l->mem) {
      snprintf(l->label, sizeof l->label, "%s / HBM", p->name);
    } else {
      const char *tn = view_find_name(names, nnames, l->pid, l->tid);
      if (tn) snprintf(l->label, sizeof l->label, "%s / %s", p->name, tn);
      else snprintf(l->label, sizeof l->label, "%s / tid %g", p->name, l->tid);
    }
  }
  if (t->nprocs > VIEW_GROUP_MIN_PROCS && view_build_groups(t, names, nnames) != 0) return -1;
  return view_build_rows(t);
}

int view_trace_events(const view_trace *t) { return t->nev; }
int view_trace_procs(const view_trace *t) { return t->nprocs; }
void view_trace_span(const view_trace *t, double *t0_us, double *t1_us) {
  *t0_us = t->t0;
  *t1_us = t->t1;
}
