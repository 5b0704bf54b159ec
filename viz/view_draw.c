/*
** view_draw.c -- drawing a view (view_draw.h): the layout, each lane's
** boxes, busy fractions and memory curve, the axis, legend, summary bar,
** tooltips and help, and which row a click lands on.
**
** Drawing cost follows the pixels, not the events: each lane's events are
** sorted, the first visible one is found by binary search, boxes narrower
** than a pixel merge into the pixel already drawn, and a group lane reads
** its members' busy time per pixel column off a running integral.
*/
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view_draw.h"
#include "../base/units.h"

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
int view_rows_shown(const view_trace *t, int first, int height, int min_h) {
  int n = t->nrows - first, room = (height - AXIS_H - (SUMMARY_H + LEGEND_H + GAP)) / min_h;
  return n < room ? n : room;
}

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
  set_rgb(v->r, VIEW_COLORS[cat].rgb);
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
    const unsigned char *c = VIEW_COLORS[e->cat].rgb;
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
        set_rgb(v->r, VIEW_COLORS[c].rgb);
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
    set_rgb(v->r, VIEW_COLORS[c].rgb);
    fill(v->r, x, cy - 6, 14, 12);
    x += 18;
    const char *label = c == CAT_INPUT ? "input stall" : VIEW_COLORS[c].name;
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
  snprintf(buf[n++], sizeof buf[0], "%s, %s", VIEW_COLORS[best->cat].name, l->label);
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
    if (f > 0) snprintf(buf[n++], sizeof buf[0], "%s busy %.0f%%", VIEW_COLORS[c].name, 100 * f);
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
int view_draw(vview *v) {
  const view_trace *t = v->t;
  int shown = view_rows_shown(t, v->first_row, v->h, v->min_row_h);
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
  int shown = view_rows_shown(t, first, h, min_h);
  if (shown <= 0 || x < 0 || x >= w) return -1;
  view_rect *lanes = malloc((size_t)shown * sizeof *lanes);
  int row = -1;
  if (lanes && view_layout(shown, w, h, lanes) == 0)
    for (int i = 0; i < shown; i++)
      if (y >= lanes[i].y && y < lanes[i].y + lanes[i].h + 1) row = first + i;
  free(lanes);
  return row;
}

int view_click_rows(view_trace *t, int first, int min_h, int w, int h, int x, int y) {
  int g = view_row_group(t, row_at(t, first, min_h, w, h, x, y));
  if (g < 0 || view_group_expand(t, g, !t->groups[g].expanded) != 0) return -1;
  return g;
}

int view_click(view_trace *t, int width, int height, int x, int y) {
  return view_click_rows(t, 0, 1, width, height, x, y);
}

TTF_Font *view_open_font(void) {
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
