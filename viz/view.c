/*
** view.c -- see view.h.
**
** Four parts: loading a trace into lanes (through jin, so every problem
** names file:line:col; the JSON tree is dropped once the events are copied
** out, so a million-event trace costs tens of MB, not a GB), lane groups
** with their busy profiles, drawing a view with an SDL renderer (the same
** code for the window and for the offscreen canvas), and the PNG encoder.
**
** Drawing cost follows the pixels, not the events: each lane's events are
** sorted, the first visible one is found by binary search, boxes narrower
** than a pixel merge into the pixel already drawn, and a group lane reads
** its members' busy time per pixel column off a running integral.
*/
#include "view.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <SDL.h>
#include <SDL_ttf.h>

#include "../base/diag.h"
#include "../base/jin.h"
#include "../base/units.h"

void view_sdl_version(char *buf, size_t n) {
  SDL_version v;
  SDL_GetVersion(&v); /* safe before SDL_Init */
  const SDL_version *t = TTF_Linked_Version();
  snprintf(buf, n, "%u.%u.%u (ttf %u.%u.%u)", v.major, v.minor, v.patch, t->major, t->minor,
           t->patch);
}

/* ------------------------------------------------------------------ */
/* colours                                                              */

enum {
  CAT_FORWARD,
  CAT_BACKWARD,
  CAT_COLLECTIVE,
  CAT_MATMUL,
  CAT_ELEMENTWISE,
  CAT_INPUT,
  CAT_OPTIMIZER,
  CAT_OTHER,
  CAT_N
};

static const struct {
  const char *name;
  unsigned char rgb[3];
} COLORS[] = {
    {"forward", {66, 133, 244}},   {"backward", {255, 152, 0}}, {"collective", {156, 39, 176}},
    {"matmul", {40, 53, 147}},     {"elementwise", {240, 98, 146}},
    {"input", {229, 57, 53}},      {"optimizer", {67, 160, 71}}, {"other", {120, 144, 156}},
    {"memory", {0, 150, 136}},     {"capacity", {211, 47, 47}}, {"idle", {246, 247, 249}},
};
#define N_COLORS (sizeof COLORS / sizeof *COLORS)

int view_color(const char *category, unsigned char rgb[3]) {
  for (size_t i = 0; i < N_COLORS; i++)
    if (category && strcmp(category, COLORS[i].name) == 0) {
      memcpy(rgb, COLORS[i].rgb, 3);
      return 0;
    }
  memcpy(rgb, COLORS[CAT_OTHER].rgb, 3);
  return -1;
}

static int cat_of(const char *s) {
  if (!s) return CAT_OTHER;
  for (int i = 0; i < CAT_OTHER; i++)
    if (strcmp(s, COLORS[i].name) == 0) return i;
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

typedef struct {
  double ts, dur; /* microseconds */
  const char *name; /* in the arena */
  const char *info; /* the event's args as "key value" lines, or NULL */
  int lane, cat;
} vev;

typedef struct {
  double ts, bytes;
  int lane;
} vpt;

typedef struct {
  double pid, tid;
  bool mem;
  char label[96];
  int first, count; /* into ev or pt */
  double maxdur;
  int proc;
} vlane;

typedef struct {
  double pid, tid; /* tid -1e300: process_name, -2e300: process_labels */
  const char *name;
} vname;

typedef struct {
  double pid;
  char name[64]; /* "chip 17": the process name without its (detail) */
  char key[64];  /* its group, read off the name; "" when none */
  int lane0, nlanes; /* its lanes, contiguous */
} vproc;

/* A running integral of how many members are busy: between t and the next
** breakpoint, n members are busy and integ grows by n per microsecond. */
typedef struct {
  double t, integ;
  int n;
} vbp;

typedef struct {
  int group;
  double tid;
  bool mem;
  char label[96];
  int members; /* member lanes the fractions are of */
  vbp *bp[CAT_N];
  int nbp[CAT_N];
  vpt *pt; /* mem: the members' maximum, a step function */
  int npt;
  unsigned cats;
} vglane;

typedef struct {
  char name[64];
  int *procs, nprocs;
  int glane0, nglanes;
  bool expanded;
} vgroup;

enum { ROW_LANE, ROW_GLANE };

typedef struct {
  int kind, idx;
} vrow;

struct view_trace {
  vev *ev;
  int nev;
  vpt *pt;
  int npt;
  vlane *lanes;
  int nlanes;
  vproc *procs;
  int nprocs;
  vgroup *groups;
  int ngroups;
  vglane *glanes;
  int nglanes;
  vrow *rows;
  int nrows;
  double t0, t1; /* extent of everything, us */
  double capacity; /* bytes, from otherData; 0 when unknown */
  double mem_max;
  double step_s;
  const char *model, *hw;
  unsigned cats; /* bit per category present */
  ablock *arena;
};

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
static const char *find_name(const vname *names, int n, double pid, double tid) {
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

/* "stage 3" out of a process name's detail: "chip 17 (stage 3, node 2)". */
static bool key_of(char *buf, size_t n, const char *name) {
  const char *par = name ? strstr(name, " (") : NULL;
  if (!par) return false;
  static const char *const WORDS[] = {"stage ", "node ", "slice ", "host "};
  for (size_t k = 0; k < sizeof WORDS / sizeof *WORDS; k++) {
    const char *w = strstr(par, WORDS[k]);
    if (!w) continue;
    size_t len = strlen(WORDS[k]), d = 0;
    while (w[len + d] >= '0' && w[len + d] <= '9') d++;
    if (d == 0) continue;
    snprintf(buf, n, "%.*s", (int)(len + d), w);
    return true;
  }
  return false;
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

#define TRACE_MAX_BYTES ((size_t)2 << 30)

static int trace_finish(view_trace *t, vname *names, int nnames);

/* Reads the events out of the JSON tree into t; -1 after reporting. */
static int trace_read(view_trace *t, jin *j, const char *path, diag *dg, vname **names_out,
                      int *nnames_out) {
  const cJSON *root = j->root, *events = NULL;
  if (cJSON_IsArray(root)) {
    events = root; /* the JSON Array Format of Chrome traces */
  } else if (cJSON_IsObject(root)) {
    events = jin_get_array(j, root, "traceEvents", true);
    if (!events) return -1;
    jin_push_key(j, "traceEvents", 0);
  } else {
    char got[64];
    jin_describe(root, got, sizeof got);
    diag_error(dg, path, 1, 1, NULL,
               "expected a trace: an object with \"traceEvents\" (got %s)", got);
    return -1;
  }
  vname *names = NULL;
  int nnames = 0, capnames = 0, capev = 0, cappt = 0, caplanes = 0;
  lanemap lm = {0};
  int index = 0;
  bool oom = false;
  for (const cJSON *e = events->child; e && !oom; e = e->next, index++) {
    jin_push_index(j, index);
    const char *ph = NULL;
    if (!cJSON_IsObject(e)) {
      char got[64];
      jin_describe(e, got, sizeof got);
      jin_error(j, 0, "expected an event object, got %s", got);
    } else if (jin_get_str(j, e, "ph", true, &ph) == 1) {
      double pid = 0, tid = 0, ts = 0, dur = 0;
      bool ok = jin_get_num(j, e, "pid", -1e15, 1e15, false, &pid) >= 0;
      ok = jin_get_num(j, e, "tid", -1e15, 1e15, false, &tid) >= 0 && ok;
      if (strcmp(ph, "X") == 0) {
        ok = jin_get_num(j, e, "ts", -1e18, 1e18, true, &ts) == 1 && ok;
        ok = jin_get_num(j, e, "dur", 0, 1e18, true, &dur) == 1 && ok;
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const char *name = cJSON_IsString(nv) ? nv->valuestring : "";
        const char *cat = cJSON_IsString(cv) ? cv->valuestring : NULL;
        if (ok) {
          int lane = lane_of(t, &lm, &caplanes, pid, tid, false);
          const char *nm = arena_dup(&t->arena, name, strlen(name));
          const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
          const char *info = cJSON_IsObject(args) ? info_of(t, args) : NULL;
          if (lane < 0 || !nm || !grow((void **)&t->ev, &capev, t->nev, sizeof *t->ev)) {
            oom = true;
          } else {
            int c = cat_of(cat);
            t->cats |= 1u << c;
            t->ev[t->nev++] = (vev){ts, dur, nm, info && *info ? info : NULL, lane, c};
          }
        }
      } else if (strcmp(ph, "C") == 0) {
        ok = jin_get_num(j, e, "ts", -1e18, 1e18, true, &ts) == 1 && ok;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *b = cJSON_IsObject(args) ? cJSON_GetObjectItemCaseSensitive(args, "bytes")
                                             : NULL;
        if (b) {
          jin_push_key(j, "args", 0);
          double v = 0;
          ok = jin_get_num(j, args, "bytes", 0, 1e30, true, &v) == 1 && ok;
          jin_pop(j);
          if (ok) {
            int lane = lane_of(t, &lm, &caplanes, pid, 0, true);
            if (lane < 0 || !grow((void **)&t->pt, &cappt, t->npt, sizeof *t->pt)) oom = true;
            else t->pt[t->npt++] = (vpt){ts, v, lane};
          }
        }
      } else if (strcmp(ph, "M") == 0) {
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        bool proc = cJSON_IsString(nv) && strcmp(nv->valuestring, "process_name") == 0;
        bool thr = cJSON_IsString(nv) && strcmp(nv->valuestring, "thread_name") == 0;
        bool lab = cJSON_IsString(nv) && strcmp(nv->valuestring, "process_labels") == 0;
        const cJSON *an = cJSON_IsObject(args) ? cJSON_GetObjectItemCaseSensitive(
                                                     args, lab ? "labels" : "name")
                                               : NULL;
        if ((proc || thr || lab) && cJSON_IsString(an) && ok) {
          const char *s = arena_dup(&t->arena, an->valuestring, strlen(an->valuestring));
          if (!s || !grow((void **)&names, &capnames, nnames, sizeof *names)) oom = true;
          else names[nnames++] = (vname){pid, proc ? -1e300 : lab ? -2e300 : tid, s};
        }
      } /* other phases (B/E, instant, flow) are not drawn */
    }
    jin_pop(j);
  }
  free(lm.slot);
  if (cJSON_IsObject(root)) jin_pop(j);
  *names_out = names;
  *nnames_out = nnames;
  if (oom) diag_error(dg, path, 0, 0, NULL, "out of memory reading the trace");
  if (j->errors == 0 && !oom && t->nev == 0 && t->npt == 0)
    diag_error(dg, path, 0, 0, "traceEvents",
               "no events to show: expected complete (\"X\") events with ts and dur, or "
               "\"HBM in use\" counters (\"C\")");
  if (j->errors > 0 || oom || (t->nev == 0 && t->npt == 0)) return -1;
  const cJSON *other = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "otherData")
                                            : NULL;
  if (cJSON_IsObject(other)) {
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "model")))
      t->model = arena_dup(&t->arena, v->valuestring, strlen(v->valuestring));
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "hw")))
      t->hw = arena_dup(&t->arena, v->valuestring, strlen(v->valuestring));
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(other, "step_time_s")) &&
        isfinite(v->valuedouble) && v->valuedouble > 0)
      t->step_s = v->valuedouble;
    static const char *const CAP_KEYS[] = {"hbm_capacity_bytes", "capacity_bytes",
                                           "hbm_bytes"};
    for (size_t k = 0; k < sizeof CAP_KEYS / sizeof *CAP_KEYS; k++)
      if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(other, CAP_KEYS[k])) &&
          isfinite(v->valuedouble) && v->valuedouble > 0) {
        t->capacity = v->valuedouble;
        break;
      }
  }
  return 0;
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
  char *text = jin_read_file(path, TRACE_MAX_BYTES, &len, dg);
  jin j;
  memset(&j, 0, sizeof j);
  int rc = -1;
  vname *names = NULL;
  int nnames = 0;
  if (text) {
    rc = jin_open(&j, path, text, len, dg);
    free(text);
    if (rc == 0) rc = trace_read(t, &j, path, dg, &names, &nnames);
    jin_close(&j); /* also after a syntax error; the tree is big, and all needed is copied out */
  }
  if (rc == 0 && trace_finish(t, names, nnames) != 0) {
    diag_error(dg, path, 0, 0, NULL, "out of memory reading the trace");
    rc = -1;
  }
  free(names);
  if (rc != 0) {
    diag_print(dg, err);
    view_trace_free(t);
    t = NULL;
  }
  diag_free(dg);
  return t;
}

/* ---- groups ---- */

static int build_rows(view_trace *t) {
  int n = 0;
  if (t->ngroups == 0) {
    n = t->nlanes;
  } else {
    for (int g = 0; g < t->ngroups; g++) {
      n += t->groups[g].nglanes;
      if (t->groups[g].expanded)
        for (int k = 0; k < t->groups[g].nprocs; k++) n += t->procs[t->groups[g].procs[k]].nlanes;
    }
  }
  vrow *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (!r) return -1;
  int k = 0;
  if (t->ngroups == 0) {
    for (int i = 0; i < t->nlanes; i++) r[k++] = (vrow){ROW_LANE, i};
  } else {
    for (int g = 0; g < t->ngroups; g++) {
      const vgroup *gr = &t->groups[g];
      for (int i = 0; i < gr->nglanes; i++) r[k++] = (vrow){ROW_GLANE, gr->glane0 + i};
      if (gr->expanded)
        for (int m = 0; m < gr->nprocs; m++) {
          const vproc *p = &t->procs[gr->procs[m]];
          for (int i = 0; i < p->nlanes; i++) r[k++] = (vrow){ROW_LANE, p->lane0 + i};
        }
    }
  }
  free(t->rows);
  t->rows = r;
  t->nrows = n;
  return 0;
}

static int cmp_bp(const void *a, const void *b) {
  const vbp *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_pt_ts(const void *a, const void *b) {
  const vpt *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The busy profile of the member lanes with thread tid, per category. */
static int build_busy(view_trace *t, vglane *gl, const vgroup *g) {
  int cnt[CAT_N] = {0};
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (l->mem || l->tid != gl->tid) continue;
      gl->members++;
      for (int e = l->first; e < l->first + l->count; e++) cnt[t->ev[e].cat]++;
    }
  }
  for (int c = 0; c < CAT_N; c++) {
    if (!cnt[c]) continue;
    gl->bp[c] = malloc((size_t)cnt[c] * 2 * sizeof(vbp));
    if (!gl->bp[c]) return -1;
    gl->cats |= 1u << c;
  }
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (l->mem || l->tid != gl->tid) continue;
      for (int e = l->first; e < l->first + l->count; e++) {
        const vev *ev = &t->ev[e];
        vbp *b = gl->bp[ev->cat];
        b[gl->nbp[ev->cat]++] = (vbp){ev->ts, 0, +1};
        b[gl->nbp[ev->cat]++] = (vbp){ev->ts + ev->dur, 0, -1};
      }
    }
  }
  for (int c = 0; c < CAT_N; c++) {
    vbp *b = gl->bp[c];
    int n = gl->nbp[c], k = 0;
    if (!n) continue;
    qsort(b, (size_t)n, sizeof *b, cmp_bp);
    /* in place: entry k is written after entry i >= k was read */
    double integ = 0, tp = b[0].t;
    int busy = 0;
    for (int i = 0; i < n; i++) {
      double tt = b[i].t;
      int d = b[i].n;
      integ += busy * (tt - tp);
      tp = tt;
      busy += d;
      if (k > 0 && b[k - 1].t == tt) b[k - 1].integ = integ, b[k - 1].n = busy;
      else b[k++] = (vbp){tt, integ, busy};
    }
    gl->nbp[c] = k;
  }
  return 0;
}

/* The members' largest HBM in use, as a step function. */
static int build_mem_max(view_trace *t, vglane *gl, const vgroup *g) {
  int n = 0;
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++)
      if (t->lanes[i].mem) n += t->lanes[i].count;
  }
  vpt *all = malloc((size_t)(n ? n : 1) * sizeof *all);
  double *cur = calloc(g->nprocs > 0 ? (size_t)g->nprocs : 1, sizeof *cur);
  gl->pt = malloc((size_t)(n ? n : 1) * sizeof *gl->pt);
  if (!all || !cur || !gl->pt) {
    free(all);
    free(cur);
    return -1;
  }
  int k = 0;
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (!l->mem) continue;
      gl->members++;
      for (int q = l->first; q < l->first + l->count; q++)
        all[k++] = (vpt){t->pt[q].ts, t->pt[q].bytes, m};
    }
  }
  qsort(all, (size_t)n, sizeof *all, cmp_pt_ts);
  double mx = 0;
  int arg = -1;
  for (int i = 0; i < n; i++) {
    int m = all[i].lane;
    double old = cur[m];
    cur[m] = all[i].bytes;
    if (cur[m] >= mx) {
      mx = cur[m];
      arg = m;
    } else if (m == arg && cur[m] < old) { /* the largest fell: look again */
      mx = 0;
      for (int q = 0; q < g->nprocs; q++)
        if (cur[q] >= mx) mx = cur[q], arg = q;
    }
    if (i + 1 < n && all[i + 1].ts == all[i].ts) continue;
    gl->pt[gl->npt++] = (vpt){all[i].ts, mx, -1};
  }
  free(all);
  free(cur);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* "stage 8-15" for stage 8 .. stage 15; "a .. b" when the names differ
** in more than their numbers. */
static void block_name(char *buf, size_t n, const char *a, const char *b) {
  const char *sa = strrchr(a, ' '), *sb = strrchr(b, ' ');
  char *ea, *eb;
  if (sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0) {
    long x = strtol(sa + 1, &ea, 10), y = strtol(sb + 1, &eb, 10);
    if (ea != sa + 1 && eb != sb + 1 && !*ea && !*eb) {
      snprintf(buf, n, "%.*s %ld-%ld", (int)(sa - a), a, x, y);
      return;
    }
  }
  snprintf(buf, n, "%.28s .. %.28s", a, b);
}

static int build_groups(view_trace *t, const vname *names, int nnames) {
  /* keys: process_labels, else "stage N" / "node N" in the name's detail;
  ** when some process has none, blocks of consecutive processes for all */
  bool all_keyed = true;
  for (int i = 0; i < t->nprocs; i++) {
    vproc *p = &t->procs[i];
    const char *lab = find_name(names, nnames, p->pid, -2e300);
    if (lab) snprintf(p->key, sizeof p->key, "%s", lab);
    else if (!key_of(p->key, sizeof p->key, find_name(names, nnames, p->pid, -1e300)))
      all_keyed = false;
  }
  if (!all_keyed) {
    int block = 8; /* a node of 8 GPUs, to begin with */
    while ((t->nprocs + block - 1) / block > 32) block *= 2;
    for (int i = 0; i < t->nprocs; i++) {
      int a = i / block * block, b = a + block - 1 < t->nprocs - 1 ? a + block - 1 : t->nprocs - 1;
      block_name(t->procs[i].key, sizeof t->procs[i].key, t->procs[a].name, t->procs[b].name);
    }
  }
  size_t np = t->nprocs > 0 ? (size_t)t->nprocs : 1;
  t->groups = calloc(np, sizeof *t->groups);
  int *of = malloc(np * sizeof *of);
  if (!t->groups || !of) {
    free(of);
    return -1;
  }
  for (int i = 0; i < t->nprocs; i++) {
    int g = 0;
    while (g < t->ngroups && strcmp(t->groups[g].name, t->procs[i].key) != 0) g++;
    if (g == t->ngroups) snprintf(t->groups[t->ngroups++].name, sizeof t->groups->name, "%s",
                                  t->procs[i].key);
    of[i] = g;
    t->groups[g].nprocs++;
  }
  for (int g = 0; g < t->ngroups; g++) {
    t->groups[g].procs = malloc((size_t)t->groups[g].nprocs * sizeof(int));
    if (!t->groups[g].procs) {
      free(of);
      return -1;
    }
    t->groups[g].nprocs = 0;
  }
  for (int i = 0; i < t->nprocs; i++) t->groups[of[i]].procs[t->groups[of[i]].nprocs++] = i;
  free(of);
  /* group lanes: one per thread id among the members, then HBM */
  double *tids = malloc((size_t)t->nlanes * sizeof *tids);
  t->glanes = calloc((size_t)t->nlanes + (size_t)t->ngroups, sizeof *t->glanes);
  if (!tids || !t->glanes) {
    free(tids);
    return -1;
  }
  for (int g = 0; g < t->ngroups; g++) {
    vgroup *gr = &t->groups[g];
    int nt = 0;
    bool mem = false;
    for (int m = 0; m < gr->nprocs; m++) {
      const vproc *p = &t->procs[gr->procs[m]];
      for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
        if (t->lanes[i].mem) {
          mem = true;
          continue;
        }
        int k = 0;
        while (k < nt && tids[k] != t->lanes[i].tid) k++;
        if (k == nt) tids[nt++] = t->lanes[i].tid;
      }
    }
    qsort(tids, (size_t)nt, sizeof *tids, cmp_double);
    gr->glane0 = t->nglanes;
    for (int k = 0; k < nt + (mem ? 1 : 0); k++) {
      vglane *gl = &t->glanes[t->nglanes++];
      gl->group = g;
      gl->mem = k == nt;
      gl->tid = gl->mem ? 0 : tids[k];
      int rc = gl->mem ? build_mem_max(t, gl, gr) : build_busy(t, gl, gr);
      if (rc != 0) {
        free(tids);
        return -1;
      }
      /* the thread's name from the first member that has it */
      const char *tn = NULL;
      for (int m = 0; m < gr->nprocs && !tn && !gl->mem; m++)
        tn = find_name(names, nnames, t->procs[gr->procs[m]].pid, gl->tid);
      char tb[32];
      snprintf(tb, sizeof tb, "tid %g", gl->tid);
      snprintf(gl->label, sizeof gl->label, "%.40s / %.32s%s (%d)", gr->name,
               gl->mem ? "HBM" : tn ? tn : tb, gl->mem ? " max" : "", gl->members);
    }
    gr->nglanes = t->nglanes - gr->glane0;
  }
  free(tids);
  return 0;
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
      short_name(p->name, sizeof p->name, find_name(names, nnames, l->pid, -1e300), "pid",
                 l->pid);
    }
    vproc *p = &t->procs[t->nprocs - 1];
    p->nlanes++;
    l->proc = t->nprocs - 1;
    if (l->mem) {
      snprintf(l->label, sizeof l->label, "%s / HBM", p->name);
    } else {
      const char *tn = find_name(names, nnames, l->pid, l->tid);
      if (tn) snprintf(l->label, sizeof l->label, "%s / %s", p->name, tn);
      else snprintf(l->label, sizeof l->label, "%s / tid %g", p->name, l->tid);
    }
  }
  if (t->nprocs > VIEW_GROUP_MIN_PROCS && build_groups(t, names, nnames) != 0) return -1;
  return build_rows(t);
}

/* ---- the public accessors ---- */

int view_trace_events(const view_trace *t) { return t->nev; }
int view_trace_procs(const view_trace *t) { return t->nprocs; }
void view_trace_span(const view_trace *t, double *t0_us, double *t1_us) {
  *t0_us = t->t0;
  *t1_us = t->t1;
}
int view_groups(const view_trace *t) { return t->ngroups; }
const char *view_group_name(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups ? t->groups[g].name : NULL;
}
int view_group_members(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups ? t->groups[g].nprocs : 0;
}
bool view_group_expanded(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups && t->groups[g].expanded;
}
int view_group_expand(view_trace *t, int g, bool expanded) {
  if (g < 0 || g >= t->ngroups) return -1;
  bool was = t->groups[g].expanded;
  t->groups[g].expanded = expanded;
  if (build_rows(t) != 0) {
    t->groups[g].expanded = was;
    return -1;
  }
  return 0;
}
int view_rows(const view_trace *t) { return t->nrows; }
const char *view_row_label(const view_trace *t, int row) {
  if (row < 0 || row >= t->nrows) return NULL;
  const vrow *r = &t->rows[row];
  return r->kind == ROW_GLANE ? t->glanes[r->idx].label : t->lanes[r->idx].label;
}
int view_row_group(const view_trace *t, int row) {
  if (row < 0 || row >= t->nrows || t->rows[row].kind != ROW_GLANE) return -1;
  return t->glanes[t->rows[row].idx].group;
}

/* ------------------------------------------------------------------ */
/* layout and drawing                                                   */

enum { SUMMARY_H = 24, LEGEND_H = 22, AXIS_H = 28, MARGIN_R = 10, GAP = 4 };

static int label_w(int width) {
  int w = width / 6;
  return w < 90 ? 90 : w > 190 ? 190 : w;
}

int view_layout(int n, int width, int height, view_rect *lanes) {
  int top = SUMMARY_H + LEGEND_H + GAP, bottom = height - AXIS_H;
  int x = label_w(width), pw = width - x - MARGIN_R;
  if (n <= 0 || pw < 20 || bottom - top < n) return -1;
  int lh = (bottom - top) / n;
  if (lh > 60) lh = 60;
  int sep = lh >= 8 ? 1 : 0;
  for (int i = 0; i < n; i++)
    lanes[i] = (view_rect){x, top + i * lh, pw, lh - sep};
  return 0;
}

/* How many rows from `first` are shown at min_h pixels or more each. */
static int rows_shown(const view_trace *t, int first, int height, int min_h) {
  int n = t->nrows - first, room = (height - AXIS_H - (SUMMARY_H + LEGEND_H + GAP)) / min_h;
  return n < room ? n : room;
}

typedef struct {
  const view_trace *t;
  double v0, v1; /* visible times, us */
  int w, h;
  int mx, my;
  bool hover, help;
  int first_row, min_row_h; /* the window scrolls rows; a screenshot shows all */
  TTF_Font *font; /* NULL: no text */
  SDL_Renderer *r;
} vview;

static void set_rgb(SDL_Renderer *r, const unsigned char *c) {
  SDL_SetRenderDrawColor(r, c[0], c[1], c[2], 255);
}

static void set_col(SDL_Renderer *r, int R, int G, int B) {
  SDL_SetRenderDrawColor(r, (Uint8)R, (Uint8)G, (Uint8)B, 255);
}

static void fill(SDL_Renderer *r, int x, int y, int w, int h) {
  SDL_Rect rc = {x, y, w, h};
  SDL_RenderFillRect(r, &rc);
}

static int text_w(const vview *v, const char *s) {
  int w = 0, h = 0;
  if (!v->font || !*s || TTF_SizeUTF8(v->font, s, &w, &h) != 0) return 7 * (int)strlen(s);
  return w;
}

/* Draws s with its left edge at x (align 0), centred (1) or right edge at
** x (2), vertically centred on cy. Returns the width. */
static int text(const vview *v, int x, int cy, int align, int R, int G, int B, const char *s) {
  if (!v->font || !*s) return 0;
  SDL_Color c = {(Uint8)R, (Uint8)G, (Uint8)B, 255};
  SDL_Surface *s1 = TTF_RenderUTF8_Blended(v->font, s, c);
  if (!s1) return 0;
  SDL_Texture *tx = SDL_CreateTextureFromSurface(v->r, s1);
  int w = s1->w, h = s1->h;
  SDL_FreeSurface(s1);
  if (!tx) return 0;
  int x0 = align == 0 ? x : align == 1 ? x - w / 2 : x - w;
  SDL_Rect dst = {x0, cy - h / 2, w, h};
  SDL_RenderCopy(v->r, tx, NULL, &dst);
  SDL_DestroyTexture(tx);
  return w;
}

static void fmt_bytes(char *buf, size_t n, double b) { units_bytes(buf, n, b); }

/* A time in us with a unit chosen for the span shown. */
static void fmt_tick(char *buf, size_t n, double us, double step) {
  const char *u = "us";
  double div = 1;
  if (step >= 1e5) u = "s", div = 1e6;
  else if (step >= 100) u = "ms", div = 1e3;
  double s = step / div;
  int dec = s >= 1 ? 0 : s >= 0.1 ? 1 : s >= 0.01 ? 2 : 3;
  snprintf(buf, n, "%.*f %s", dec, us / div, u);
}

static double nice_step(double span, int ticks) {
  double raw = span / (ticks > 1 ? ticks : 1);
  double p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static double x_of(const vview *v, const view_rect *pl, double us) {
  return pl->x + (us - v->v0) * pl->w / (v->v1 - v->v0);
}

/* First index in [first, first+count) of events with ts >= t. */
static int lower_ev(const vev *ev, int first, int count, double t) {
  int lo = first, hi = first + count;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (ev[mid].ts < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int lower_pt(const vpt *pt, int first, int count, double t) {
  int lo = first, hi = first + count;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (pt[mid].ts < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The last breakpoint at or before x, searching forward from k (which is
** at or before it): galloping, so a sweep across the columns costs a
** logarithm per column however many breakpoints a column spans. */
static int seek_bp(const vbp *b, int n, int k, double x) {
  int lo = k, step = 1;
  while (lo + step < n && b[lo + step].t <= x) {
    lo += step;
    step *= 2;
  }
  int hi = lo + step < n ? lo + step : n;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (b[mid].t <= x) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* Member-microseconds busy up to x. */
static double integ_at(const vbp *b, int n, int *k, double x) {
  *k = seek_bp(b, n, *k, x);
  return *k < 0 ? 0 : b[*k].integ + b[*k].n * (x - b[*k].t);
}

static void flush_run(const vview *v, const view_rect *rc, int cat, int a, int b) {
  if (cat < 0) return;
  int pad = rc->h >= 10 ? 2 : 0;
  set_rgb(v->r, COLORS[cat].rgb);
  fill(v->r, a, rc->y + pad, b - a, rc->h - 2 * pad);
}

static void draw_events(const vview *v, const vlane *l, const view_rect *rc) {
  const view_trace *t = v->t;
  int end = l->first + l->count, lastx = rc->x - 1;
  int right = rc->x + rc->w;
  int labels = 0, run_cat = -1, run_a = 0, run_b = 0;
  for (int i = lower_ev(t->ev, l->first, l->count, v->v0 - l->maxdur); i < end; i++) {
    const vev *e = &t->ev[i];
    if (e->ts > v->v1) break;
    double a = x_of(v, rc, e->ts), b = x_of(v, rc, e->ts + e->dur);
    if (b < rc->x) continue;
    if (a < rc->x) a = rc->x;
    if (b > right) b = right;
    int ia = (int)lround(a), ib = (int)lround(b); /* rounded: equal boxes, equal widths */
    if (ib <= ia) ib = ia + 1;
    if (ib <= lastx) continue; /* narrower than a pixel already drawn: aggregated */
    if (ia < lastx) ia = lastx;
    lastx = ib;
    if (ib - ia < 6) { /* narrow boxes of one colour that touch: one rectangle */
      if (run_cat == e->cat && ia <= run_b) {
        run_b = ib;
        continue;
      }
      flush_run(v, rc, run_cat, run_a, run_b);
      run_cat = e->cat, run_a = ia, run_b = ib;
      continue;
    }
    flush_run(v, rc, run_cat, run_a, run_b);
    run_cat = -1;
    const unsigned char *c = COLORS[e->cat].rgb;
    set_rgb(v->r, c);
    int pad = rc->h >= 10 ? 2 : 0;
    fill(v->r, ia, rc->y + pad, ib - ia, rc->h - 2 * pad);
    { /* a darker edge tells neighbours apart */
      set_col(v->r, c[0] * 3 / 5, c[1] * 3 / 5, c[2] * 3 / 5);
      fill(v->r, ia, rc->y + pad, 1, rc->h - 2 * pad);
    }
    /* names in the boxes wide enough for them, a bounded number per lane
    ** so that a zoomed-in frame stays fast */
    if (v->font && rc->h >= 14 && ib - ia > 40 && labels < 48 && *e->name) {
      char s[100];
      snprintf(s, sizeof s, "%.95s", e->name);
      int tw = text_w(v, s), room = ib - ia - 6;
      size_t len = strlen(s);
      if (tw > room) { /* cut in proportion, then by characters, and say so */
        len = len * (size_t)room / (size_t)tw;
        do {
          memcpy(s + len, "\u2026", sizeof "\u2026");
          tw = text_w(v, s);
        } while (tw > room && len-- > 1);
      }
      if (tw <= room && len > 1) {
        text(v, ia + 4, rc->y + rc->h / 2, 0, 255, 255, 255, s);
        labels++;
      }
    }
  }
  flush_run(v, rc, run_cat, run_a, run_b);
}

/* A group lane: per pixel column, the fraction of member lanes busy in
** each category, stacked from the bottom; the rest is idle background.
** Columns with the same heights are drawn as one rectangle. */
static void draw_busy(const vview *v, const vglane *gl, const view_rect *rc) {
  if (gl->members <= 0 || rc->w <= 0) return;
  int pad = rc->h >= 10 ? 2 : 0, inner = rc->h - 2 * pad, base = rc->y + rc->h - pad;
  double per_px = (v->v1 - v->v0) / rc->w, norm = per_px * gl->members;
  int k[CAT_N];
  double at[CAT_N];
  for (int c = 0; c < CAT_N; c++) {
    k[c] = -1;
    at[c] = gl->nbp[c] ? integ_at(gl->bp[c], gl->nbp[c], &k[c], v->v0) : 0;
  }
  int prev[CAT_N] = {0}, cur[CAT_N] = {0}, run = 0;
  for (int px = 0; px <= rc->w; px++) {
    if (px < rc->w) {
      double b = v->v0 + (px + 1) * per_px, cum = 0;
      int below = 0;
      for (int c = 0; c < CAT_N; c++) {
        cur[c] = below;
        if (!gl->nbp[c]) continue;
        double ib = integ_at(gl->bp[c], gl->nbp[c], &k[c], b), f = (ib - at[c]) / norm;
        at[c] = ib;
        if (f <= 1e-9) continue;
        cum += f;
        int h = (int)lround(fmin(cum, 1.0) * inner);
        if (h <= below) h = below + 1; /* a sliver of work stays visible */
        if (h > inner) h = inner;
        cur[c] = below = h;
      }
      if (px > 0 && memcmp(cur, prev, sizeof cur) == 0) continue;
    }
    if (px > 0) { /* the run [run, px) ends */
      int below = 0;
      for (int c = 0; c < CAT_N; c++) {
        if (prev[c] <= below) continue;
        set_rgb(v->r, COLORS[c].rgb);
        fill(v->r, rc->x + run, base - prev[c], px - run, prev[c] - below);
        below = prev[c];
      }
    }
    memcpy(prev, cur, sizeof cur);
    run = px;
  }
}

static void draw_memory(const vview *v, const vpt *pt, int n, const view_rect *rc) {
  const view_trace *t = v->t;
  double cap = t->capacity > 0 ? t->capacity : t->mem_max;
  if (!(cap > 0) || n == 0) return;
  int i = lower_pt(pt, 0, n, v->v0);
  double cur = i > 0 ? pt[i - 1].bytes : NAN; /* value entering the view */
  unsigned char fillc[3], line[3];
  view_color("memory", line);
  for (int k = 0; k < 3; k++) fillc[k] = (unsigned char)(255 - (255 - line[k]) * 2 / 5);
  int inner = rc->h - 3, bottom = rc->y + rc->h;
  double per_px = (v->v1 - v->v0) / rc->w;
  /* runs of columns at one height are one rectangle each: a lane costs
  ** fills per change of the curve, not per column */
  int run = -1, run_y = 0, prev_y = -1;
  for (int px = 0; px <= rc->w; px++) {
    int y = -1;
    if (px < rc->w) {
      double ta = v->v0 + px * per_px, tb = ta + per_px;
      double hi = cur;
      while (i < n && pt[i].ts < tb) {
        cur = pt[i].bytes;
        if (isnan(hi) || cur > hi) hi = cur;
        i++;
      }
      bool past = i >= n && ta > pt[n - 1].ts && ta > t->t1;
      if (!isnan(hi) && !past) y = rc->y + rc->h - 1 - (int)lround(fmin(hi / cap, 1.0) * inner);
    }
    if (run >= 0 && y == run_y) continue;
    if (run >= 0) {
      set_rgb(v->r, fillc);
      fill(v->r, rc->x + run, run_y, px - run, bottom - run_y);
      set_rgb(v->r, line);
      fill(v->r, rc->x + run, run_y, px - run, 1);
      if (prev_y >= 0) /* the step up or down into this run */
        fill(v->r, rc->x + run, prev_y < run_y ? prev_y : run_y, 1, abs(run_y - prev_y) + 1);
      prev_y = run_y;
    } else {
      prev_y = -1;
    }
    run = y >= 0 ? px : -1;
    run_y = y;
  }
  /* the capacity (or peak) line */
  unsigned char cc[3];
  view_color("capacity", cc);
  set_rgb(v->r, cc);
  int yc = rc->y + rc->h - 1 - inner;
  for (int x = rc->x; x < rc->x + rc->w; x += 6) fill(v->r, x, yc, 3, 1);
  if (v->font && rc->h >= 16) {
    char b[32], s[64];
    fmt_bytes(b, sizeof b, cap);
    snprintf(s, sizeof s, "%s %s", t->capacity > 0 ? "capacity" : "peak", b);
    text(v, rc->x + rc->w - 4, yc + 8, 2, cc[0], cc[1], cc[2], s);
  }
}

static void draw_legend(const vview *v, int y) {
  const view_trace *t = v->t;
  int x = 10, cy = y + LEGEND_H / 2;
  for (int c = 0; c < CAT_N; c++) {
    if (c > CAT_COLLECTIVE && !(t->cats & (1u << c))) continue;
    set_rgb(v->r, COLORS[c].rgb);
    fill(v->r, x, cy - 6, 14, 12);
    x += 18;
    const char *label = c == CAT_INPUT ? "input stall" : COLORS[c].name;
    int tw = text(v, x, cy, 0, 40, 40, 40, label);
    x += (tw ? tw : 60) + 14;
  }
  unsigned char idle[3], mem[3], cap[3];
  view_color("idle", idle);
  view_color("memory", mem);
  view_color("capacity", cap);
  set_col(v->r, 150, 150, 150);
  fill(v->r, x - 1, cy - 7, 16, 14);
  set_rgb(v->r, idle);
  fill(v->r, x, cy - 6, 14, 12);
  x += 18;
  int tw = text(v, x, cy, 0, 40, 40, 40, "idle / bubble");
  x += (tw ? tw : 80) + 14;
  if (t->npt > 0) {
    set_rgb(v->r, mem);
    fill(v->r, x, cy - 1, 14, 3);
    x += 18;
    tw = text(v, x, cy, 0, 40, 40, 40, "HBM in use");
    x += (tw ? tw : 70) + 14;
    set_rgb(v->r, cap);
    fill(v->r, x, cy, 4, 1);
    fill(v->r, x + 7, cy, 4, 1);
    x += 18;
    tw = text(v, x, cy, 0, 40, 40, 40, t->capacity > 0 ? "HBM capacity" : "peak HBM");
    x += (tw ? tw : 80) + 14;
  }
  if (t->ngroups > 0)
    text(v, x, cy, 0, 90, 90, 90, "group lanes: share of members busy (click to expand)");
}

static void draw_summary(const vview *v) {
  const view_trace *t = v->t;
  set_col(v->r, 38, 50, 56);
  fill(v->r, 0, 0, v->w, SUMMARY_H);
  char step[32] = "", vis0[32], vis1[32], what[96], s[360];
  if (t->step_s > 0) units_seconds(step, sizeof step, t->step_s);
  if (fabs(v->v0) < 1e-9) snprintf(vis0, sizeof vis0, "0");
  else units_seconds(vis0, sizeof vis0, v->v0 * 1e-6);
  units_seconds(vis1, sizeof vis1, v->v1 * 1e-6);
  if (t->ngroups > 0)
    snprintf(what, sizeof what, "%d processes in %d groups, %d rows", t->nprocs, t->ngroups,
             t->nrows);
  else
    snprintf(what, sizeof what, "%d stage%s, %d lanes", t->nprocs, t->nprocs == 1 ? "" : "s",
             t->nlanes);
  snprintf(s, sizeof s, "%s%s%s%s%s   %s, %d events   showing %s .. %s",
           t->model ? t->model : "trace", t->hw ? " on " : "", t->hw ? t->hw : "",
           t->step_s > 0 ? "   step time " : "", step, what, t->nev, vis0, vis1);
  text(v, 10, SUMMARY_H / 2, 0, 255, 255, 255, s);
}

static void draw_axis(const vview *v, const view_rect *pl, int top, int bottom) {
  double span = v->v1 - v->v0;
  double step = nice_step(span, pl->w / 110 > 2 ? pl->w / 110 : 2);
  int y = bottom + 2;
  set_col(v->r, 90, 90, 90);
  fill(v->r, pl->x, y, pl->w, 1);
  for (double tk = ceil(v->v0 / step) * step; tk <= v->v1 + step * 1e-9; tk += step) {
    int x = (int)lround(x_of(v, pl, tk));
    set_col(v->r, 228, 231, 235);
    fill(v->r, x, top, 1, bottom - top);
    set_col(v->r, 90, 90, 90);
    fill(v->r, x, y, 1, 5);
    char s[32];
    fmt_tick(s, sizeof s, fabs(tk) < step * 1e-9 ? 0 : tk, step);
    text(v, x, y + 14, 1, 60, 60, 60, s);
  }
}

static void draw_box_lines(const vview *v, int x, int y, const char *const *lines, int n) {
  int w = 0, lh = v->font ? TTF_FontLineSkip(v->font) : 14;
  for (int i = 0; i < n; i++) {
    int tw = text_w(v, lines[i]);
    if (tw > w) w = tw;
  }
  w += 16;
  int h = n * lh + 10;
  if (x + w > v->w) x = v->w - w - 2;
  if (y + h > v->h) y = v->h - h - 2;
  if (x < 0) x = 0;
  if (y < 0) y = 0;
  set_col(v->r, 60, 60, 60);
  fill(v->r, x - 1, y - 1, w + 2, h + 2);
  set_col(v->r, 255, 255, 240);
  fill(v->r, x, y, w, h);
  for (int i = 0; i < n; i++) text(v, x + 8, y + 5 + lh * i + lh / 2, 0, 20, 20, 20, lines[i]);
}

enum { TIP_LINES = 12 };

static void tip_event(const vview *v, const vlane *l, double tm, double per_px) {
  const view_trace *t = v->t;
  const vev *best = NULL;
  int end = l->first + l->count;
  for (int i = lower_ev(t->ev, l->first, l->count, tm - per_px - l->maxdur); i < end; i++) {
    const vev *e = &t->ev[i];
    if (e->ts > tm + per_px) break;
    if (e->ts + e->dur >= tm - per_px) best = e;
  }
  if (!best) return;
  char buf[TIP_LINES][160], a[32], b[32];
  const char *lines[TIP_LINES];
  int n = 0;
  units_seconds(a, sizeof a, best->ts * 1e-6);
  units_seconds(b, sizeof b, best->dur * 1e-6);
  snprintf(buf[n++], sizeof buf[0], "%s", *best->name ? best->name : "(no name)");
  snprintf(buf[n++], sizeof buf[0], "%s, %s", COLORS[best->cat].name, l->label);
  snprintf(buf[n++], sizeof buf[0], "start %s", a);
  snprintf(buf[n++], sizeof buf[0], "duration %s", b);
  /* the args the writer gave: shape, flops, bytes, ... */
  for (const char *p = best->info; p && *p && n < TIP_LINES;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    snprintf(buf[n++], sizeof buf[0], "%.*s", (int)len, p);
    p = nl ? nl + 1 : p + len;
  }
  for (int i = 0; i < n; i++) lines[i] = buf[i];
  draw_box_lines(v, v->mx + 14, v->my + 14, lines, n);
}

static void tip_memory(const vview *v, const char *label, const vpt *pt, int n, double tm) {
  int i = lower_pt(pt, 0, n, tm + 1e-9);
  if (i == 0) return;
  char l0[128], l1[64], l2[64], a[32], b[32];
  const char *lines[3] = {l0, l1, l2};
  fmt_bytes(a, sizeof a, pt[i - 1].bytes);
  units_seconds(b, sizeof b, tm * 1e-6);
  snprintf(l0, sizeof l0, "%s", label);
  snprintf(l1, sizeof l1, "HBM in use %s", a);
  snprintf(l2, sizeof l2, "at %s", b);
  draw_box_lines(v, v->mx + 14, v->my + 14, lines, 3);
}

static void tip_busy(const vview *v, const vglane *gl, double tm, double per_px) {
  char buf[CAT_N + 3][128], a[32];
  const char *lines[CAT_N + 3];
  int n = 0;
  snprintf(buf[n++], sizeof buf[0], "%s", gl->label);
  units_seconds(a, sizeof a, tm * 1e-6);
  snprintf(buf[n++], sizeof buf[0], "at %s, %d member lanes", a, gl->members);
  double total = 0;
  for (int c = 0; c < CAT_N; c++) {
    if (!gl->nbp[c]) continue;
    int k = -1;
    double i0 = integ_at(gl->bp[c], gl->nbp[c], &k, tm - per_px / 2);
    double i1 = integ_at(gl->bp[c], gl->nbp[c], &k, tm + per_px / 2);
    double f = (i1 - i0) / (per_px * gl->members);
    total += f;
    if (f > 0) snprintf(buf[n++], sizeof buf[0], "%s busy %.0f%%", COLORS[c].name, 100 * f);
  }
  snprintf(buf[n++], sizeof buf[0], "idle %.0f%%   (click: expand / collapse)",
           100 * fmax(0, 1 - total));
  for (int i = 0; i < n; i++) lines[i] = buf[i];
  draw_box_lines(v, v->mx + 14, v->my + 14, lines, n);
}

static void draw_tooltip(const vview *v, const view_rect *lanes, int shown) {
  const view_trace *t = v->t;
  for (int li = 0; li < shown; li++) {
    const view_rect *rc = &lanes[li];
    if (v->my < rc->y || v->my >= rc->y + rc->h || v->mx < rc->x || v->mx >= rc->x + rc->w)
      continue;
    const vrow *row = &t->rows[v->first_row + li];
    double per_px = (v->v1 - v->v0) / rc->w;
    double tm = v->v0 + (v->mx - rc->x) * per_px;
    if (row->kind == ROW_GLANE) {
      const vglane *gl = &t->glanes[row->idx];
      if (gl->mem) tip_memory(v, gl->label, gl->pt, gl->npt, tm);
      else tip_busy(v, gl, tm, per_px);
    } else {
      const vlane *l = &t->lanes[row->idx];
      if (l->mem) tip_memory(v, l->label, t->pt + l->first, l->count, tm);
      else tip_event(v, l, tm, per_px);
    }
    return;
  }
}

static const char *const HELP[] = {
    "mouse wheel, + / -     zoom in / out",
    "drag, left / right     pan",
    "0 or Home              show the whole step",
    "hover                  name, start, duration, shape, FLOPs, bytes",
    "click a group lane     expand / collapse its members",
    "wheel over the labels, PgUp / PgDn   scroll the lanes",
    "?                      this help",
    "q or Esc               quit",
};

/* Draws the whole view; returns -1 when the picture is too small. */
static int draw(vview *v) {
  const view_trace *t = v->t;
  int shown = rows_shown(t, v->first_row, v->h, v->min_row_h);
  view_rect *lanes = malloc((size_t)(shown > 0 ? shown : 1) * sizeof *lanes);
  if (!lanes) return -1;
  SDL_SetRenderDrawBlendMode(v->r, SDL_BLENDMODE_NONE);
  set_col(v->r, 255, 255, 255);
  SDL_RenderClear(v->r);
  int rc = shown > 0 ? view_layout(shown, v->w, v->h, lanes) : -1;
  draw_summary(v);
  draw_legend(v, SUMMARY_H);
  if (rc == 0) {
    int top = lanes[0].y, bottom = lanes[shown - 1].y + lanes[shown - 1].h;
    unsigned char idle[3];
    view_color("idle", idle);
    set_rgb(v->r, idle); /* one background, so that idle reads the same in every lane */
    for (int i = 0; i < shown; i++) {
      fill(v->r, lanes[i].x, lanes[i].y, lanes[i].w, lanes[i].h);
    }
    draw_axis(v, &lanes[0], top, bottom);
    for (int i = 0; i < shown; i++) {
      const vrow *row = &t->rows[v->first_row + i];
      SDL_Rect clip = {lanes[i].x, lanes[i].y, lanes[i].w, lanes[i].h};
      SDL_RenderSetClipRect(v->r, &clip);
      char label[128];
      bool head = false, member = false;
      if (row->kind == ROW_GLANE) {
        const vglane *gl = &t->glanes[row->idx];
        const vgroup *g = &t->groups[gl->group];
        head = true;
        if (gl->mem) draw_memory(v, gl->pt, gl->npt, &lanes[i]);
        else draw_busy(v, gl, &lanes[i]);
        snprintf(label, sizeof label, "%s%s",
                 row->idx == g->glane0 ? (g->expanded ? "\u25BE " : "\u25B8 ") : "", gl->label);
      } else {
        const vlane *l = &t->lanes[row->idx];
        member = t->ngroups > 0;
        if (l->mem) draw_memory(v, t->pt + l->first, l->count, &lanes[i]);
        else draw_events(v, l, &lanes[i]);
        snprintf(label, sizeof label, "%s", l->label);
      }
      SDL_RenderSetClipRect(v->r, NULL);
      if (member) { /* a bracket tells an expanded group's members from the groups */
        set_col(v->r, 120, 144, 156);
        fill(v->r, 3, lanes[i].y, 3, lanes[i].h + 1);
      }
      if (lanes[i].h >= 9) {
        SDL_Rect lc = {member ? 8 : 0, lanes[i].y, lanes[i].x - 4 - (member ? 8 : 0), lanes[i].h};
        SDL_RenderSetClipRect(v->r, &lc);
        int shade = head ? 20 : 60, room = lanes[i].x - 10 - (member ? 8 : 0);
        /* a label too long for the margin keeps its start, where the name is */
        if (text_w(v, label) > room)
          text(v, member ? 10 : 2, lanes[i].y + lanes[i].h / 2, 0, shade, shade, shade, label);
        else
          text(v, lanes[i].x - 6, lanes[i].y + lanes[i].h / 2, 2, shade, shade, shade, label);
        SDL_RenderSetClipRect(v->r, NULL);
      }
    }
    if (v->first_row + shown < t->nrows || v->first_row > 0) {
      char s[96];
      snprintf(s, sizeof s, "rows %d-%d of %d (PgUp / PgDn)", v->first_row + 1,
               v->first_row + shown, t->nrows);
      text(v, 6, v->h - AXIS_H / 2, 0, 90, 90, 90, s);
    }
    if (v->hover) draw_tooltip(v, lanes, shown);
  } else {
    text(v, 10, SUMMARY_H + LEGEND_H + 20, 0, 200, 0, 0, "window too small for the lanes");
  }
  if (v->help) draw_box_lines(v, v->w / 2 - 200, v->h / 3, HELP, (int)(sizeof HELP / sizeof *HELP));
  free(lanes);
  return rc;
}

/* The row at (x, y), or -1. */
static int row_at(const view_trace *t, int first, int min_h, int w, int h, int x, int y) {
  int shown = rows_shown(t, first, h, min_h);
  if (shown <= 0 || x < 0 || x >= w) return -1;
  view_rect *lanes = malloc((size_t)shown * sizeof *lanes);
  int row = -1;
  if (lanes && view_layout(shown, w, h, lanes) == 0)
    for (int i = 0; i < shown; i++)
      if (y >= lanes[i].y && y < lanes[i].y + lanes[i].h + 1) row = first + i;
  free(lanes);
  return row;
}

static int click_rows(view_trace *t, int first, int min_h, int w, int h, int x, int y) {
  int g = view_row_group(t, row_at(t, first, min_h, w, h, x, y));
  if (g < 0 || view_group_expand(t, g, !t->groups[g].expanded) != 0) return -1;
  return g;
}

int view_click(view_trace *t, int width, int height, int x, int y) {
  return click_rows(t, 0, 1, width, height, x, y);
}

static TTF_Font *open_font(void) {
  static const char *const PATHS[] = {
      "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
      "/usr/share/fonts/dejavu/DejaVuSans.ttf",
      "/usr/share/fonts/TTF/DejaVuSans.ttf",
      "/usr/local/share/fonts/DejaVuSans.ttf",
  };
  const char *env = getenv("TPUSIM_FONT");
  if (env && *env) return TTF_OpenFont(env, 12);
  for (size_t i = 0; i < sizeof PATHS / sizeof *PATHS; i++) {
    TTF_Font *f = TTF_OpenFont(PATHS[i], 12);
    if (f) return f;
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* the offscreen canvas                                                 */

struct view_canvas {
  SDL_Surface *s;
  SDL_Renderer *r;
  TTF_Font *font;
  bool ttf;
  int w, h;
};

void view_canvas_free(view_canvas *c) {
  if (!c) return;
  if (c->font) TTF_CloseFont(c->font);
  if (c->r) SDL_DestroyRenderer(c->r);
  if (c->s) SDL_FreeSurface(c->s);
  if (c->ttf) TTF_Quit();
  SDL_Quit();
  free(c);
}

view_canvas *view_canvas_new(int width, int height, FILE *err) {
  view_canvas *c = calloc(1, sizeof *c);
  if (!c) {
    fprintf(err, "tpusim view: out of memory\n");
    return NULL;
  }
  if (SDL_Init(0) != 0) {
    fprintf(err, "tpusim view: SDL_Init: %s\n", SDL_GetError());
    free(c);
    return NULL;
  }
  c->ttf = TTF_Init() == 0;
  c->w = width;
  c->h = height;
  c->s = SDL_CreateRGBSurfaceWithFormat(0, width, height, 32, SDL_PIXELFORMAT_ARGB8888);
  c->r = c->s ? SDL_CreateSoftwareRenderer(c->s) : NULL;
  c->font = c->ttf ? open_font() : NULL;
  if (!c->s || !c->r) {
    fprintf(err, "tpusim view: cannot create an offscreen %dx%d surface: %s\n", width, height,
            SDL_GetError());
    view_canvas_free(c);
    return NULL;
  }
  return c;
}

int view_canvas_has_font(const view_canvas *c) { return c->font != NULL; }

int view_canvas_draw(view_canvas *c, const view_trace *t, double v0_us, double v1_us) {
  if (!(v1_us > v0_us)) return -1;
  vview v = {.t = t, .v0 = v0_us, .v1 = v1_us, .w = c->w, .h = c->h, .font = c->font,
             .r = c->r, .min_row_h = 1};
  int rc = draw(&v);
  SDL_RenderPresent(c->r);
  return rc;
}

int view_canvas_png(view_canvas *c, const char *path, FILE *err) {
  int w = c->w, h = c->h;
  unsigned char *rgb = malloc((size_t)w * (size_t)h * 3);
  if (!rgb || SDL_LockSurface(c->s) != 0) {
    fprintf(err, "tpusim view: %s\n", rgb ? SDL_GetError() : "out of memory");
    free(rgb);
    return -1;
  }
  for (int y = 0; y < h; y++) {
    const Uint32 *row =
        (const Uint32 *)((const unsigned char *)c->s->pixels + (size_t)y * (size_t)c->s->pitch);
    unsigned char *d = rgb + (size_t)y * (size_t)w * 3;
    for (int x = 0; x < w; x++) {
      d[3 * x] = (unsigned char)(row[x] >> 16);
      d[3 * x + 1] = (unsigned char)(row[x] >> 8);
      d[3 * x + 2] = (unsigned char)row[x];
    }
  }
  SDL_UnlockSurface(c->s);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(err, "tpusim view: cannot write %s: %s\n", path, strerror(errno));
    free(rgb);
    return -1;
  }
  int wr = view_png_write(f, rgb, w, h);
  if (fclose(f) != 0) wr = -1;
  free(rgb);
  if (wr != 0) {
    fprintf(err, "tpusim view: cannot write %s\n", path);
    remove(path);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* PNG                                                                  */

typedef struct {
  unsigned char *b;
  size_t n, cap;
  uint32_t acc;
  int nb;
  bool oom;
} bitbuf;

static void put_byte(bitbuf *o, unsigned char c) {
  if (o->n == o->cap) {
    size_t nc = o->cap ? o->cap * 2 : 65536;
    unsigned char *nb = realloc(o->b, nc);
    if (!nb) {
      o->oom = true;
      return;
    }
    o->b = nb;
    o->cap = nc;
  }
  o->b[o->n++] = c;
}

static void put_bits(bitbuf *o, uint32_t v, int n) { /* LSB first */
  o->acc |= v << o->nb;
  o->nb += n;
  while (o->nb >= 8) {
    put_byte(o, (unsigned char)(o->acc & 0xff));
    o->acc >>= 8;
    o->nb -= 8;
  }
}

static void put_code(bitbuf *o, uint32_t code, int n) { /* Huffman codes: MSB first */
  uint32_t r = 0;
  for (int i = 0; i < n; i++) r |= ((code >> i) & 1u) << (n - 1 - i);
  put_bits(o, r, n);
}

static void put_sym(bitbuf *o, int s) { /* the fixed literal/length code */
  if (s < 144) put_code(o, 0x30u + (uint32_t)s, 8);
  else if (s < 256) put_code(o, 0x190u + (uint32_t)(s - 144), 9);
  else if (s < 280) put_code(o, (uint32_t)(s - 256), 7);
  else put_code(o, 0xC0u + (uint32_t)(s - 280), 8);
}

static const unsigned short LBASE[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
                                         15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
                                         67, 83, 99, 115, 131, 163, 195, 227, 258};
static const unsigned char LEXT[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const unsigned short DBASE[30] = {1,    2,    3,    4,    5,    7,     9,     13,
                                         17,   25,   33,   49,   65,   97,    129,   193,
                                         257,  385,  513,  769,  1025, 1537,  2049,  3073,
                                         4097, 6145, 8193, 12289, 16385, 24577};
static const unsigned char DEXT[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static void put_match(bitbuf *o, int len, int dist) {
  int i = 28;
  while (LBASE[i] > len) i--;
  put_sym(o, 257 + i);
  put_bits(o, (uint32_t)(len - LBASE[i]), LEXT[i]);
  int d = 29;
  while (DBASE[d] > dist) d--;
  put_code(o, (uint32_t)d, 5);
  put_bits(o, (uint32_t)(dist - DBASE[d]), DEXT[d]);
}

enum { HASH_BITS = 15, WINDOW = 32768, MAX_CHAIN = 24 };

/* One final fixed-Huffman block with greedy LZ77 over a hash chain. */
static int deflate_fixed(const unsigned char *src, size_t n, bitbuf *o) {
  int32_t *head = malloc(sizeof(int32_t) << HASH_BITS);
  int32_t *prev = malloc((n ? n : 1) * sizeof *prev);
  if (!head || !prev || n > INT32_MAX) {
    free(head);
    free(prev);
    return -1;
  }
  for (size_t i = 0; i < (1u << HASH_BITS); i++) head[i] = -1;
  put_bits(o, 1, 1); /* BFINAL */
  put_bits(o, 1, 2); /* BTYPE 01: fixed Huffman */
#define HASH(p) ((((uint32_t)(p)[0] << 10) ^ ((uint32_t)(p)[1] << 5) ^ (p)[2]) & ((1u << HASH_BITS) - 1))
  size_t i = 0;
  while (i < n) {
    int best = 0, bestd = 0;
    if (i + 3 <= n) {
      uint32_t h = HASH(src + i);
      int32_t p = head[h];
      size_t maxl = n - i < 258 ? n - i : 258;
      for (int depth = 0; p >= 0 && i - (size_t)p <= WINDOW && depth < MAX_CHAIN;
           depth++, p = prev[p]) {
        size_t l = 0;
        while (l < maxl && src[(size_t)p + l] == src[i + l]) l++;
        if ((int)l > best) {
          best = (int)l;
          bestd = (int)(i - (size_t)p);
          if (l == maxl) break;
        }
      }
      prev[i] = head[h];
      head[h] = (int32_t)i;
    }
    if (best >= 3) {
      put_match(o, best, bestd);
      for (size_t k = i + 1; k < i + (size_t)best && k + 3 <= n; k++) {
        uint32_t h = HASH(src + k);
        prev[k] = head[h];
        head[h] = (int32_t)k;
      }
      i += (size_t)best;
    } else {
      put_sym(o, src[i]);
      i++;
    }
  }
#undef HASH
  put_sym(o, 256);
  if (o->nb > 0) put_bits(o, 0, 8 - o->nb);
  free(head);
  free(prev);
  return o->oom ? -1 : 0;
}

static uint32_t crc32_of(const unsigned char *a, size_t n, uint32_t crc, const uint32_t *tab) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = tab[(crc ^ a[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

static void be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static int chunk(FILE *f, const char *type, const unsigned char *data, size_t n,
                 const uint32_t *tab) {
  unsigned char hdr[8], crcb[4];
  be32(hdr, (uint32_t)n);
  memcpy(hdr + 4, type, 4);
  uint32_t crc = crc32_of(hdr + 4, 4, 0, tab);
  crc = crc32_of(data, n, crc, tab);
  be32(crcb, crc);
  return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) &&
                 fwrite(crcb, 1, 4, f) == 4
             ? 0
             : -1;
}

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

int view_png_write(FILE *f, const unsigned char *rgb, int w, int h) {
  if (w <= 0 || h <= 0) return -1;
  uint32_t tab[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    tab[i] = c;
  }
  size_t stride = (size_t)w * 3, n = (stride + 1) * (size_t)h;
  unsigned char *raw = malloc(n), *cand = malloc(stride * 4);
  if (!raw || !cand) {
    free(raw);
    free(cand);
    return -1;
  }
  /* each row with the filter (none, sub, up, paeth) of least absolute sum */
  for (int y = 0; y < h; y++) {
    const unsigned char *row = rgb + stride * (size_t)y, *up = y ? row - stride : NULL;
    static const unsigned char TYPES[4] = {0, 1, 2, 4};
    long best_sum = -1;
    int best = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char *c = cand + stride * (size_t)k;
      long sum = 0;
      for (size_t x = 0; x < stride; x++) {
        int a = x >= 3 ? row[x - 3] : 0, b = up ? up[x] : 0, cc = x >= 3 && up ? up[x - 3] : 0;
        int pred = TYPES[k] == 0 ? 0 : TYPES[k] == 1 ? a : TYPES[k] == 2 ? b : paeth(a, b, cc);
        c[x] = (unsigned char)(row[x] - pred);
        sum += c[x] < 128 ? c[x] : 256 - c[x];
      }
      if (best_sum < 0 || sum < best_sum) best_sum = sum, best = k;
    }
    unsigned char *dst = raw + (stride + 1) * (size_t)y;
    dst[0] = TYPES[best];
    memcpy(dst + 1, cand + stride * (size_t)best, stride);
  }
  free(cand);
  bitbuf z = {0};
  put_byte(&z, 0x78);
  put_byte(&z, 0x01);
  int rc = deflate_fixed(raw, n, &z);
  uint32_t s1 = 1, s2 = 0;
  for (size_t i = 0; i < n; i++) {
    s1 = (s1 + raw[i]) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  free(raw);
  unsigned char ad[4];
  be32(ad, (s2 << 16) | s1);
  for (int k = 0; k < 4; k++) put_byte(&z, ad[k]);
  if (z.oom) rc = -1;
  if (rc == 0) {
    static const unsigned char SIG[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
    unsigned char ihdr[13];
    be32(ihdr, (uint32_t)w);
    be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* truecolour */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    if (fwrite(SIG, 1, 8, f) != 8 || chunk(f, "IHDR", ihdr, 13, tab) != 0 ||
        chunk(f, "IDAT", z.b, z.n, tab) != 0 || chunk(f, "IEND", NULL, 0, tab) != 0)
      rc = -1;
  }
  free(z.b);
  return rc;
}


/* ------------------------------------------------------------------ */
/* a view: the screenshot or the window (view_run)                    */

static int screenshot(const view_trace *t, const char *png, int w, int h, FILE *out, FILE *err) {
  view_canvas *c = view_canvas_new(w, h, err);
  if (!c) return 1;
  int rc = 1;
  if (view_canvas_draw(c, t, t->t0, t->t1) != 0) {
    fprintf(err, "tpusim view: %dx%d is too small for %d lanes; use a larger --height%s\n", w, h,
            t->nrows, t->ngroups ? " or expand fewer groups" : "");
  } else if (view_canvas_png(c, png, err) == 0) {
    char groups[96] = "";
    if (t->ngroups)
      snprintf(groups, sizeof groups, ": %d groups of %d processes", t->ngroups, t->nprocs);
    fprintf(out, "wrote %s (%dx%d, %d lanes%s, %d events)%s\n", png, w, h, t->nrows, groups,
            t->nev,
            c->font ? "" : " without text: DejaVuSans.ttf not found (install fonts-dejavu-core)");
    rc = 0;
  }
  view_canvas_free(c);
  return rc;
}

static void zoom(vview *v, double factor, double at_frac, double full0, double full1) {
  double span = v->v1 - v->v0, at = v->v0 + at_frac * span;
  double ns = span * factor, full = full1 - full0;
  if (ns < 1e-3) ns = 1e-3;
  if (ns > full * 1.5) ns = full * 1.5;
  v->v0 = at - at_frac * ns;
  v->v1 = v->v0 + ns;
}

static void pan(vview *v, double frac) {
  double d = (v->v1 - v->v0) * frac;
  v->v0 += d;
  v->v1 += d;
}

static void scroll_rows(vview *v, int by) {
  int shown = rows_shown(v->t, 0, v->h, v->min_row_h);
  int max_first = v->t->nrows - (shown > 0 ? shown : 1);
  v->first_row += by;
  if (v->first_row > max_first) v->first_row = max_first;
  if (v->first_row < 0) v->first_row = 0;
}

static int interactive(view_trace *t, const char *path, FILE *err) {
  /* Without a display SDL may fall back to a driver nobody can see
  ** (offscreen, dummy, a console framebuffer): say so instead of waiting. */
  const char *drv = getenv("SDL_VIDEODRIVER");
  const char *x11 = getenv("DISPLAY"), *wl = getenv("WAYLAND_DISPLAY");
  bool forced = drv && *drv;
  if (!forced && !(x11 && *x11) && !(wl && *wl)) {
    fprintf(err,
            "tpusim view: no display available (neither DISPLAY nor WAYLAND_DISPLAY is set); "
            "use --screenshot FILE.png to render the view to a picture instead\n");
    return 1;
  }
  if (forced && (strcmp(drv, "dummy") == 0 || strcmp(drv, "offscreen") == 0)) {
    fprintf(err,
            "tpusim view: SDL_VIDEODRIVER=%s shows nothing; use --screenshot FILE.png to "
            "render the view to a picture instead\n",
            drv);
    return 1;
  }
  if (SDL_Init(SDL_INIT_VIDEO) != 0) {
    fprintf(err,
            "tpusim view: no display available (%s); use --screenshot FILE.png to render "
            "the view to a picture instead\n",
            SDL_GetError());
    SDL_Quit();
    return 1;
  }
  bool ttf = TTF_Init() == 0;
  char title[256];
  snprintf(title, sizeof title, "tpusim view - %s", path);
  SDL_Window *win = SDL_CreateWindow(title, SDL_WINDOWPOS_UNDEFINED, SDL_WINDOWPOS_UNDEFINED, 1400,
                                     760, SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
  SDL_Renderer *r = win ? SDL_CreateRenderer(win, -1, SDL_RENDERER_ACCELERATED |
                                                         SDL_RENDERER_PRESENTVSYNC)
                        : NULL;
  if (win && !r) r = SDL_CreateRenderer(win, -1, SDL_RENDERER_SOFTWARE);
  int rc = 0;
  if (!win || !r) {
    fprintf(err,
            "tpusim view: cannot open a window (%s); use --screenshot FILE.png to render "
            "the view to a picture instead\n",
            SDL_GetError());
    rc = 1;
  }
  TTF_Font *font = ttf && r ? open_font() : NULL;
  vview v = {.t = t, .v0 = t->t0, .v1 = t->t1, .font = font, .r = r, .min_row_h = 4};
  bool quit = rc != 0, dirty = true, dragging = false;
  int drag_x = 0, down_x = 0, down_y = 0;
  double drag_v0 = 0;
  while (!quit) {
    if (dirty) {
      SDL_GetRendererOutputSize(r, &v.w, &v.h);
      scroll_rows(&v, 0);
      draw(&v);
      SDL_RenderPresent(r);
      dirty = false;
    }
    SDL_Event e;
    if (!SDL_WaitEventTimeout(&e, 500)) continue;
    do {
      int ww = 1, wh = 1;
      SDL_GetWindowSize(win, &ww, &wh);
      double sx = v.w / (double)(ww > 0 ? ww : 1), sy = v.h / (double)(wh > 0 ? wh : 1);
      view_rect pl = {0, 0, 1, 1};
      view_layout(1, v.w, v.h, &pl);
      int page = rows_shown(t, v.first_row, v.h, v.min_row_h);
      switch (e.type) {
      case SDL_QUIT: quit = true; break;
      case SDL_WINDOWEVENT: dirty = true; break;
      case SDL_TEXTINPUT:
        if (strcmp(e.text.text, "?") == 0) v.help = !v.help, dirty = true;
        else if (strcmp(e.text.text, "+") == 0) zoom(&v, 0.8, 0.5, t->t0, t->t1), dirty = true;
        break;
      case SDL_KEYDOWN:
        switch (e.key.keysym.sym) {
        case SDLK_q:
        case SDLK_ESCAPE: quit = true; break;
        case SDLK_EQUALS:
          if (!(e.key.keysym.mod & KMOD_SHIFT)) zoom(&v, 0.8, 0.5, t->t0, t->t1);
          break;
        case SDLK_KP_PLUS: zoom(&v, 0.8, 0.5, t->t0, t->t1); break;
        case SDLK_MINUS:
        case SDLK_KP_MINUS: zoom(&v, 1.25, 0.5, t->t0, t->t1); break;
        case SDLK_LEFT: pan(&v, -0.1); break;
        case SDLK_RIGHT: pan(&v, 0.1); break;
        case SDLK_PAGEDOWN: scroll_rows(&v, page > 1 ? page - 1 : 1); break;
        case SDLK_PAGEUP: scroll_rows(&v, -(page > 1 ? page - 1 : 1)); break;
        case SDLK_0:
        case SDLK_HOME: v.v0 = t->t0, v.v1 = t->t1; break;
        default: break;
        }
        dirty = true;
        break;
      case SDL_MOUSEWHEEL: {
        int mx, my;
        SDL_GetMouseState(&mx, &my);
        double frac = (mx * sx - pl.x) / pl.w;
        if (mx * sx < pl.x) { /* over the labels: scroll the lanes */
          scroll_rows(&v, e.wheel.y > 0 ? -3 : e.wheel.y < 0 ? 3 : 0);
          dirty = true;
          break;
        }
        if (frac < 0) frac = 0;
        if (frac > 1) frac = 1;
        if (e.wheel.y != 0) zoom(&v, e.wheel.y > 0 ? 0.8 : 1.25, frac, t->t0, t->t1);
        if (e.wheel.x != 0) pan(&v, 0.05 * e.wheel.x);
        dirty = true;
        break;
      }
      case SDL_MOUSEBUTTONDOWN:
        if (e.button.button == SDL_BUTTON_LEFT) {
          dragging = true;
          drag_x = down_x = (int)(e.button.x * sx);
          down_y = (int)(e.button.y * sy);
          drag_v0 = v.v0;
        }
        break;
      case SDL_MOUSEBUTTONUP:
        if (dragging && e.button.button == SDL_BUTTON_LEFT &&
            abs((int)(e.button.x * sx) - down_x) < 4 && abs((int)(e.button.y * sy) - down_y) < 4) {
          /* a click, not a drag */
          if (click_rows(t, v.first_row, v.min_row_h, v.w, v.h, down_x, down_y) >= 0) {
            double span = v.v1 - v.v0; /* undo the sub-threshold drag */
            v.v0 = drag_v0;
            v.v1 = v.v0 + span;
            dirty = true;
          }
        }
        dragging = false;
        break;
      case SDL_MOUSEMOTION:
        v.mx = (int)(e.motion.x * sx);
        v.my = (int)(e.motion.y * sy);
        v.hover = true;
        if (dragging) {
          double span = v.v1 - v.v0;
          v.v0 = drag_v0 - (v.mx - drag_x) * span / pl.w;
          v.v1 = v.v0 + span;
        }
        dirty = true;
        break;
      default: break;
      }
    } while (SDL_PollEvent(&e));
  }
  if (font) TTF_CloseFont(font);
  if (r) SDL_DestroyRenderer(r);
  if (win) SDL_DestroyWindow(win);
  if (ttf) TTF_Quit();
  SDL_Quit();
  return rc;
}

/* --expand's value: a group's name, its number, or all. */
static int expand_arg(view_trace *t, const char *trace, const char *val, FILE *err) {
  if (t->ngroups == 0) {
    fprintf(err,
            "tpusim view: %s: --expand %s: this trace has %d processes and is not grouped "
            "(groups start above %d)\n",
            trace, val, t->nprocs, VIEW_GROUP_MIN_PROCS);
    return 1;
  }
  if (strcmp(val, "all") == 0) {
    for (int g = 0; g < t->ngroups; g++)
      if (view_group_expand(t, g, true) != 0) return 1;
    return 0;
  }
  for (int g = 0; g < t->ngroups; g++)
    if (strcmp(t->groups[g].name, val) == 0) return view_group_expand(t, g, true) != 0;
  char *end;
  long g = strtol(val, &end, 10);
  if (*val && *end == '\0' && g >= 0 && g < t->ngroups)
    return view_group_expand(t, (int)g, true) != 0;
  fprintf(err, "tpusim view: %s: --expand %s: no such group; the groups are 0..%d: '%s' .. '%s'\n",
          trace, val, t->ngroups - 1, t->groups[0].name, t->groups[t->ngroups - 1].name);
  return 1;
}

int view_run(const view_req *r, FILE *out, FILE *err) {
  view_trace *t = view_trace_open(r->trace, err);
  if (!t) return 1;
  int rc = 0;
  for (int k = 0; k < r->n_expand && rc == 0; k++) rc = expand_arg(t, r->trace, r->expand[k], err);
  if (rc == 0)
    rc = r->screenshot ? screenshot(t, r->screenshot, r->width, r->height, out, err)
                       : interactive(t, r->trace, err);
  view_trace_free(t);
  return rc;
}
