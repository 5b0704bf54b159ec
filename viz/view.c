/*
** view.c -- see view.h.
**
** Three parts: loading a trace into lanes (through jin, so every problem
** names file:line:col), drawing a view of it with an SDL renderer (the same
** code for the window and for the offscreen surface), and the PNG encoder.
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

#include "../sim/diag.h"
#include "../sim/jin.h"
#include "../sim/units.h"

void view_sdl_version(char *buf, size_t n) {
  SDL_version v;
  SDL_GetVersion(&v); /* safe before SDL_Init */
  const SDL_version *t = TTF_Linked_Version();
  snprintf(buf, n, "%u.%u.%u (ttf %u.%u.%u)", v.major, v.minor, v.patch, t->major, t->minor,
           t->patch);
}

/* ------------------------------------------------------------------ */
/* colours                                                              */

enum { CAT_FORWARD, CAT_BACKWARD, CAT_COLLECTIVE, CAT_INPUT, CAT_OPTIMIZER, CAT_OTHER, CAT_N };

static const struct {
  const char *name;
  unsigned char rgb[3];
} COLORS[] = {
    {"forward", {66, 133, 244}},   {"backward", {255, 152, 0}}, {"collective", {156, 39, 176}},
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
  return CAT_OTHER;
}

/* ------------------------------------------------------------------ */
/* the trace                                                            */

typedef struct {
  double ts, dur; /* microseconds */
  const char *name; /* borrowed from the cJSON tree */
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
} vlane;

typedef struct {
  double pid, tid;
  const char *name;
} vname;

typedef struct {
  jin j; /* keeps the tree the names point into */
  vev *ev;
  int nev;
  vpt *pt;
  int npt;
  vlane *lanes;
  int nlanes;
  double t0, t1; /* extent of everything, us */
  double capacity; /* bytes, from otherData; 0 when unknown */
  double mem_max;
  double step_s;
  const char *model, *hw;
  int stages;
  unsigned cats; /* bit per category present */
} vtrace;

static void trace_free(vtrace *t) {
  free(t->ev);
  free(t->pt);
  free(t->lanes);
  jin_close(&t->j);
  memset(t, 0, sizeof *t);
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

static const char *find_name(const vname *names, int n, double pid, double tid) {
  for (int i = 0; i < n; i++)
    if (names[i].pid == pid && names[i].tid == tid) return names[i].name;
  return NULL;
}

/* Lane index of (pid, tid, mem), adding it when new; -1 when out of memory. */
static int lane_of(vtrace *t, int *cap, double pid, double tid, bool mem) {
  for (int i = t->nlanes - 1; i >= 0; i--)
    if (t->lanes[i].pid == pid && t->lanes[i].tid == tid && t->lanes[i].mem == mem) return i;
  if (t->nlanes == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    vlane *nl = realloc(t->lanes, (size_t)nc * sizeof *nl);
    if (!nl) return -1;
    t->lanes = nl;
    *cap = nc;
  }
  t->lanes[t->nlanes] = (vlane){.pid = pid, .tid = tid, .mem = mem};
  return t->nlanes++;
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

#define TRACE_MAX_BYTES ((size_t)2 << 30)

static int trace_load(vtrace *t, const char *path, diag *dg) {
  memset(t, 0, sizeof *t);
  size_t len = 0;
  char *text = jin_read_file(path, TRACE_MAX_BYTES, &len, dg);
  if (!text) return -1;
  int rc = jin_open(&t->j, path, text, len, dg);
  free(text);
  if (rc != 0) return -1;
  jin *j = &t->j;
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
        const char *name = NULL, *cat = NULL;
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (cJSON_IsString(nv)) name = nv->valuestring;
        if (cJSON_IsString(cv)) cat = cv->valuestring;
        if (ok) {
          int lane = lane_of(t, &caplanes, pid, tid, false);
          if (lane < 0 || !grow((void **)&t->ev, &capev, t->nev, sizeof *t->ev)) {
            oom = true;
          } else {
            int c = cat_of(cat);
            t->cats |= 1u << c;
            t->ev[t->nev++] = (vev){ts, dur, name ? name : "", lane, c};
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
            int lane = lane_of(t, &caplanes, pid, 0, true);
            if (lane < 0 || !grow((void **)&t->pt, &cappt, t->npt, sizeof *t->pt)) oom = true;
            else t->pt[t->npt++] = (vpt){ts, v, lane};
          }
        }
      } else if (strcmp(ph, "M") == 0) {
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *an = cJSON_IsObject(args) ? cJSON_GetObjectItemCaseSensitive(args, "name")
                                              : NULL;
        bool proc = cJSON_IsString(nv) && strcmp(nv->valuestring, "process_name") == 0;
        bool thr = cJSON_IsString(nv) && strcmp(nv->valuestring, "thread_name") == 0;
        if ((proc || thr) && cJSON_IsString(an) && ok) {
          if (!grow((void **)&names, &capnames, nnames, sizeof *names)) oom = true;
          else names[nnames++] = (vname){pid, proc ? -1e300 : tid, an->valuestring};
        }
      } /* other phases (B/E, instant, flow) are not drawn */
    }
    jin_pop(j);
  }
  if (cJSON_IsObject(root)) jin_pop(j);
  if (oom) diag_error(dg, path, 0, 0, NULL, "out of memory reading the trace");
  if (j->errors == 0 && !oom && t->nev == 0 && t->npt == 0)
    diag_error(dg, path, 0, 0, "traceEvents",
               "no events to show: expected complete (\"X\") events with ts and dur, or "
               "\"HBM in use\" counters (\"C\")");
  if (j->errors > 0 || oom || (t->nev == 0 && t->npt == 0)) {
    free(names);
    return -1;
  }
  /* otherData: summary and capacity */
  const cJSON *other = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "otherData")
                                            : NULL;
  if (cJSON_IsObject(other)) {
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "model"))) t->model = v->valuestring;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(other, "hw"))) t->hw = v->valuestring;
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
  /* lanes in order (pid, then threads, then memory), labels, ranges */
  int *remap = malloc((size_t)t->nlanes * sizeof *remap);
  vlane *sorted = malloc((size_t)t->nlanes * sizeof *sorted);
  if (!remap || !sorted) {
    free(remap);
    free(sorted);
    free(names);
    diag_error(dg, path, 0, 0, NULL, "out of memory reading the trace");
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
  double last_pid = NAN;
  for (int i = 0; i < t->nlanes; i++) {
    vlane *l = &t->lanes[i];
    if (l->pid != last_pid) t->stages++;
    last_pid = l->pid;
    char proc[64];
    short_name(proc, sizeof proc, find_name(names, nnames, l->pid, -1e300), "pid", l->pid);
    if (l->mem) {
      snprintf(l->label, sizeof l->label, "%s / HBM", proc);
    } else {
      const char *tn = find_name(names, nnames, l->pid, l->tid);
      if (tn) snprintf(l->label, sizeof l->label, "%s / %s", proc, tn);
      else snprintf(l->label, sizeof l->label, "%s / tid %g", proc, l->tid);
    }
  }
  free(names);
  return 0;
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

typedef struct {
  const vtrace *t;
  double v0, v1; /* visible times, us */
  int w, h;
  int mx, my;
  bool hover, help;
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

static void draw_events(const vview *v, const vlane *l, const view_rect *rc) {
  const vtrace *t = v->t;
  int end = l->first + l->count, lastx = rc->x - 1;
  int right = rc->x + rc->w;
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
    const unsigned char *c = COLORS[e->cat].rgb;
    set_rgb(v->r, c);
    int pad = rc->h >= 10 ? 2 : 0;
    fill(v->r, ia, rc->y + pad, ib - ia, rc->h - 2 * pad);
    if (ib - ia >= 6) { /* a darker edge tells neighbours apart */
      set_col(v->r, c[0] * 3 / 5, c[1] * 3 / 5, c[2] * 3 / 5);
      fill(v->r, ia, rc->y + pad, 1, rc->h - 2 * pad);
    }
    if (v->font && rc->h >= 14 && ib - ia > 40) {
      char s[96];
      snprintf(s, sizeof s, "%s", e->name);
      int tw = text_w(v, s);
      while (tw > ib - ia - 6 && strlen(s) > 1) {
        s[strlen(s) - 1] = '\0';
        tw = text_w(v, s);
      }
      if (tw <= ib - ia - 6) text(v, ia + 4, rc->y + rc->h / 2, 0, 255, 255, 255, s);
    }
    lastx = ib;
  }
}

static void draw_memory(const vview *v, const vlane *l, const view_rect *rc) {
  const vtrace *t = v->t;
  double cap = t->capacity > 0 ? t->capacity : t->mem_max;
  if (!(cap > 0) || l->count == 0) return;
  int end = l->first + l->count;
  int i = lower_pt(t->pt, l->first, l->count, v->v0);
  double cur = i > l->first ? t->pt[i - 1].bytes : NAN; /* value entering the view */
  unsigned char fillc[3], line[3];
  view_color("memory", line);
  for (int k = 0; k < 3; k++) fillc[k] = (unsigned char)(255 - (255 - line[k]) * 2 / 5);
  int inner = rc->h - 3;
  double per_px = (v->v1 - v->v0) / rc->w;
  int prev_y = -1;
  for (int px = 0; px < rc->w; px++) {
    double ta = v->v0 + px * per_px, tb = ta + per_px;
    double hi = cur;
    while (i < end && t->pt[i].ts < tb) {
      cur = t->pt[i].bytes;
      if (isnan(hi) || cur > hi) hi = cur;
      i++;
    }
    if (isnan(hi)) continue;
    if (i >= end && ta > t->pt[end - 1].ts && ta > t->t1) break;
    int y = rc->y + rc->h - 1 - (int)lround(fmin(hi / cap, 1.0) * inner);
    set_rgb(v->r, fillc);
    fill(v->r, rc->x + px, y, 1, rc->y + rc->h - y);
    set_rgb(v->r, line);
    int y0 = prev_y < 0 ? y : prev_y;
    fill(v->r, rc->x + px, y0 < y ? y0 : y, 1, abs(y - y0) + 1);
    prev_y = y;
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
  const vtrace *t = v->t;
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
    text(v, x, cy, 0, 40, 40, 40, t->capacity > 0 ? "HBM capacity" : "peak HBM");
  }
}

static void draw_summary(const vview *v) {
  const vtrace *t = v->t;
  set_col(v->r, 38, 50, 56);
  fill(v->r, 0, 0, v->w, SUMMARY_H);
  char step[32] = "", vis0[32], vis1[32], s[320];
  if (t->step_s > 0) units_seconds(step, sizeof step, t->step_s);
  if (fabs(v->v0) < 1e-9) snprintf(vis0, sizeof vis0, "0");
  else units_seconds(vis0, sizeof vis0, v->v0 * 1e-6);
  units_seconds(vis1, sizeof vis1, v->v1 * 1e-6);
  snprintf(s, sizeof s, "%s%s%s%s%s   %d stage%s, %d lanes, %d events   showing %s .. %s",
           t->model ? t->model : "trace", t->hw ? " on " : "", t->hw ? t->hw : "",
           t->step_s > 0 ? "   step time " : "", step, t->stages, t->stages == 1 ? "" : "s",
           t->nlanes, t->nev, vis0, vis1);
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

static void draw_tooltip(const vview *v, const view_rect *lanes) {
  const vtrace *t = v->t;
  for (int li = 0; li < t->nlanes; li++) {
    const view_rect *rc = &lanes[li];
    if (v->my < rc->y || v->my >= rc->y + rc->h || v->mx < rc->x || v->mx >= rc->x + rc->w)
      continue;
    const vlane *l = &t->lanes[li];
    double per_px = (v->v1 - v->v0) / rc->w;
    double tm = v->v0 + (v->mx - rc->x) * per_px;
    char l0[128], l1[160], l2[64], l3[64], a[32], b[32];
    const char *lines[4] = {l0, l1, l2, l3};
    if (l->mem) {
      int i = lower_pt(t->pt, l->first, l->count, tm + 1e-9);
      if (i == l->first) return;
      fmt_bytes(a, sizeof a, t->pt[i - 1].bytes);
      units_seconds(b, sizeof b, tm * 1e-6);
      snprintf(l0, sizeof l0, "%s", l->label);
      snprintf(l1, sizeof l1, "HBM in use %s", a);
      snprintf(l2, sizeof l2, "at %s", b);
      draw_box_lines(v, v->mx + 14, v->my + 14, lines, 3);
      return;
    }
    const vev *best = NULL;
    int end = l->first + l->count;
    for (int i = lower_ev(t->ev, l->first, l->count, tm - per_px - l->maxdur); i < end; i++) {
      const vev *e = &t->ev[i];
      if (e->ts > tm + per_px) break;
      if (e->ts + e->dur >= tm - per_px) best = e;
    }
    if (!best) return;
    units_seconds(a, sizeof a, best->ts * 1e-6);
    units_seconds(b, sizeof b, best->dur * 1e-6);
    snprintf(l0, sizeof l0, "%s", best->name);
    snprintf(l1, sizeof l1, "%s, %s", COLORS[best->cat].name, l->label);
    snprintf(l2, sizeof l2, "start %s", a);
    snprintf(l3, sizeof l3, "duration %s", b);
    draw_box_lines(v, v->mx + 14, v->my + 14, lines, 4);
    return;
  }
}

static const char *const HELP[] = {
    "mouse wheel, + / -   zoom in / out",
    "drag, left / right   pan",
    "0 or Home            show the whole step",
    "hover                name, start, duration",
    "?                    this help",
    "q or Esc             quit",
};

/* Draws the whole view; returns -1 when the picture is too small. */
static int draw(vview *v) {
  const vtrace *t = v->t;
  view_rect *lanes = malloc((size_t)t->nlanes * sizeof *lanes);
  if (!lanes) return -1;
  SDL_SetRenderDrawBlendMode(v->r, SDL_BLENDMODE_NONE);
  set_col(v->r, 255, 255, 255);
  SDL_RenderClear(v->r);
  int rc = view_layout(t->nlanes, v->w, v->h, lanes);
  draw_summary(v);
  draw_legend(v, SUMMARY_H);
  if (rc == 0) {
    int top = lanes[0].y, bottom = lanes[t->nlanes - 1].y + lanes[t->nlanes - 1].h;
    unsigned char idle[3];
    view_color("idle", idle);
    for (int i = 0; i < t->nlanes; i++) {
      if (i % 2) set_col(v->r, 236, 239, 243);
      else set_rgb(v->r, idle);
      fill(v->r, lanes[i].x, lanes[i].y, lanes[i].w, lanes[i].h);
    }
    draw_axis(v, &lanes[0], top, bottom);
    for (int i = 0; i < t->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      SDL_Rect clip = {lanes[i].x, lanes[i].y, lanes[i].w, lanes[i].h};
      SDL_RenderSetClipRect(v->r, &clip);
      if (l->mem) draw_memory(v, l, &lanes[i]);
      else draw_events(v, l, &lanes[i]);
      SDL_RenderSetClipRect(v->r, NULL);
      if (lanes[i].h >= 9) {
        SDL_Rect lc = {0, lanes[i].y, lanes[i].x - 4, lanes[i].h};
        SDL_RenderSetClipRect(v->r, &lc);
        text(v, lanes[i].x - 6, lanes[i].y + lanes[i].h / 2, 2, 40, 40, 40, l->label);
        SDL_RenderSetClipRect(v->r, NULL);
      }
    }
    if (v->hover) draw_tooltip(v, lanes);
  } else {
    text(v, 10, SUMMARY_H + LEGEND_H + 20, 0, 200, 0, 0, "window too small for the lanes");
  }
  if (v->help) draw_box_lines(v, v->w / 2 - 160, v->h / 3, HELP, (int)(sizeof HELP / sizeof *HELP));
  free(lanes);
  return rc;
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
/* the command                                                          */

static const char USAGE[] =
    "usage: tpusim view TRACE.json [--screenshot FILE.png [--width W] [--height H]]\n"
    "  TRACE.json         a trace from `tpusim simulate ... --trace FILE`\n"
    "  --screenshot FILE  render offscreen to a PNG and exit (no display needed)\n"
    "  --width W          picture width in pixels (default 1400; 320..8192)\n"
    "  --height H         picture height in pixels (default 700; 200..8192)\n"
    "In the window: wheel or +/- zoom, drag or arrows pan, hover for details, ? help, q quit.\n";

static int parse_dim(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int screenshot(const vtrace *t, const char *png, int w, int h, FILE *out, FILE *err) {
  if (SDL_Init(0) != 0) {
    fprintf(err, "tpusim view: SDL_Init: %s\n", SDL_GetError());
    return 1;
  }
  bool ttf = TTF_Init() == 0;
  int rc = 1;
  SDL_Surface *s = SDL_CreateRGBSurfaceWithFormat(0, w, h, 32, SDL_PIXELFORMAT_ARGB8888);
  SDL_Renderer *r = s ? SDL_CreateSoftwareRenderer(s) : NULL;
  TTF_Font *font = ttf ? open_font() : NULL;
  unsigned char *rgb = malloc((size_t)w * (size_t)h * 3);
  if (!s || !r || !rgb) {
    fprintf(err, "tpusim view: cannot create an offscreen %dx%d surface: %s\n", w, h,
            SDL_GetError());
    goto done;
  }
  vview v = {.t = t, .v0 = t->t0, .v1 = t->t1, .w = w, .h = h, .font = font, .r = r};
  if (draw(&v) != 0) {
    fprintf(err, "tpusim view: %dx%d is too small for %d lanes; use a larger --height\n", w, h,
            t->nlanes);
    goto done;
  }
  SDL_RenderPresent(r);
  if (SDL_LockSurface(s) != 0) {
    fprintf(err, "tpusim view: %s\n", SDL_GetError());
    goto done;
  }
  for (int y = 0; y < h; y++) {
    const Uint32 *row = (const Uint32 *)((const unsigned char *)s->pixels + (size_t)y * (size_t)s->pitch);
    unsigned char *d = rgb + (size_t)y * (size_t)w * 3;
    for (int x = 0; x < w; x++) {
      d[3 * x] = (unsigned char)(row[x] >> 16);
      d[3 * x + 1] = (unsigned char)(row[x] >> 8);
      d[3 * x + 2] = (unsigned char)row[x];
    }
  }
  SDL_UnlockSurface(s);
  FILE *f = fopen(png, "wb");
  if (!f) {
    fprintf(err, "tpusim view: cannot write %s: %s\n", png, strerror(errno));
    goto done;
  }
  int wr = view_png_write(f, rgb, w, h);
  if (fclose(f) != 0) wr = -1;
  if (wr != 0) {
    fprintf(err, "tpusim view: cannot write %s\n", png);
    remove(png);
    goto done;
  }
  fprintf(out, "wrote %s (%dx%d, %d lanes, %d events)%s\n", png, w, h, t->nlanes, t->nev,
          font ? "" : " without text: DejaVuSans.ttf not found (install fonts-dejavu-core)");
  rc = 0;
done:
  free(rgb);
  if (font) TTF_CloseFont(font);
  if (r) SDL_DestroyRenderer(r);
  if (s) SDL_FreeSurface(s);
  if (ttf) TTF_Quit();
  SDL_Quit();
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

static int interactive(const vtrace *t, const char *path, FILE *err) {
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
  vview v = {.t = t, .v0 = t->t0, .v1 = t->t1, .font = font, .r = r, .help = false};
  bool quit = rc != 0, dirty = true, dragging = false;
  int drag_x = 0;
  double drag_v0 = 0;
  while (!quit) {
    if (dirty) {
      SDL_GetRendererOutputSize(r, &v.w, &v.h);
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
          drag_x = (int)(e.button.x * sx);
          drag_v0 = v.v0;
        }
        break;
      case SDL_MOUSEBUTTONUP: dragging = false; break;
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

int view_main(int argc, char **argv, FILE *out, FILE *err) {
  const char *trace = NULL, *png = NULL;
  int w = 1400, h = 700;
  bool wh_set = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(USAGE, out);
      return 0;
    }
    if (strcmp(a, "--screenshot") == 0 || strcmp(a, "--width") == 0 ||
        strcmp(a, "--height") == 0) {
      if (i + 1 >= argc) {
        fprintf(err, "tpusim view: %s needs a value\n%s", a, USAGE);
        return 2;
      }
      const char *val = argv[++i];
      if (strcmp(a, "--screenshot") == 0) {
        png = val;
      } else if (strcmp(a, "--width") == 0 ? parse_dim(val, 320, 8192, &w) != 0
                                            : parse_dim(val, 200, 8192, &h) != 0) {
        fprintf(err, "tpusim view: %s %s: expected a whole number of pixels in [%d, 8192]\n", a,
                val, strcmp(a, "--width") == 0 ? 320 : 200);
        return 2;
      } else {
        wh_set = true;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(err, "tpusim view: unknown option %s\n%s", a, USAGE);
      return 2;
    } else if (!trace) {
      trace = a;
    } else {
      fprintf(err, "tpusim view: one trace at a time (got %s and %s)\n%s", trace, a, USAGE);
      return 2;
    }
  }
  if (!trace) {
    fprintf(err, "tpusim view: which trace? (write one with `tpusim simulate ... --trace "
                 "FILE`)\n%s",
            USAGE);
    return 2;
  }
  if (wh_set && !png) {
    fprintf(err, "tpusim view: --width and --height go with --screenshot\n");
    return 2;
  }
  diag *dg = diag_new();
  if (!dg) return 1;
  vtrace t;
  if (trace_load(&t, trace, dg) != 0) {
    diag_print(dg, err);
    diag_free(dg);
    trace_free(&t);
    return 1;
  }
  diag_free(dg);
  int rc = png ? screenshot(&t, png, w, h, out, err) : interactive(&t, trace, err);
  trace_free(&t);
  return rc;
}
