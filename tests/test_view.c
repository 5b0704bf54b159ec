/*
** test_view.c -- the timeline viewer, headless: screenshots of simulated
** traces decoded back (png_check.h's PNG reader) and checked for content;
** malformed traces; the command's usage errors.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "../base/units.h"
#include "../hw_models/hw_catalog.h"
#include "../sim/step.h"
#include "../viz/png.h"
#include "../viz/view.h"
#include "../viz/trace.h"
#include "helpers.h"
#include "png_check.h"

static int is(const image *im, int x, int y, const unsigned char *c) {
  const unsigned char *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
  return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
}

static int count(const image *im, int x0, int y0, int w, int h, const char *cat) {
  unsigned char c[3];
  cr_assert_eq(view_color(cat, c), 0, "unknown colour %s", cat);
  int k = 0;
  for (int y = y0; y < y0 + h; y++)
    for (int x = x0; x < x0 + w; x++) k += is(im, x, y, c);
  return k;
}

/* ---- traces and the command ---- */

static const char *out_path(const char *name) {
  static char path[256];
  mkdir("tests/out", 0755);
  snprintf(path, sizeof path, "tests/out/%s", name);
  return path;
}

typedef struct {
  const char *model, *hw;
  int64_t chips, tp, pp, gbs, seq;
} sim_args;

static void make_trace_of(const char *path, sim_args a) {
  mkdir("tests/out", 0755); /* a fresh checkout has none, and tests run in any order */
  hw_catalog *c = th_catalog();
  diag *d = diag_new();
  model_opts o = {.seq_len = a.seq};
  model *m = model_load(a.model, &o, d);
  cr_assert_not_null(m, "model %s", a.model);
  plan p = {.chips = a.chips, .tp = a.tp, .pp = a.pp, .ep = 1, .mbs = 1, .vp = 1, .slices = 1,
            .gbs = a.gbs, .seq = a.seq, .schedule = PLAN_1F1B, .precision = GDT_BF16};
  char err[256] = "";
  step_result r;
  FILE *f = fopen(path, "w");
  cr_assert(f);
  const hw_model *hw = th_hw(c, a.hw);
  int rc = plan_check(m, hw, &p, err, sizeof err);
  step_timeline tl;
  if (rc == 0) rc = step_simulate(m, hw, &p, NULL, &r, &tl, err, sizeof err);
  if (rc == 0) {
    rc = trace_write(f, &tl, &r, &p, m->name, hw->name);
    step_timeline_free(&tl);
  }
  cr_assert_eq(rc, 0, "simulate: %s", err);
  fclose(f);
  model_free(m);
  diag_free(d);
  hw_catalog_free(c);
}

static void make_trace(const char *path, int64_t chips, int64_t tp, int64_t pp, int64_t gbs) {
  make_trace_of(path, (sim_args){"llama3-8b", "h100-sxm", chips, tp, pp, gbs, 1024});
}

/* A trace of `chips` processes "chip K (stage S, node N)": compute and
** network threads and an HBM counter. Stage s starts s * D late (a
** pipeline's fill), chip k's compute has a gap of (k % 8 + 1) * D after its
** first `per_chip / 2` boxes, so each member's lane differs. Events per
** chip: per_chip compute + per_chip / 4 network. */
static void make_chips_trace(const char *path, int chips, int stages, int per_chip, bool named) {
  mkdir("tests/out", 0755);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  const double D = 100;
  fprintf(f, "{\"traceEvents\":[\n");
  for (int k = 0; k < chips; k++) {
    int s = k / (chips / stages);
    if (named)
      fprintf(f,
              "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"chip %d "
              "(stage %d, node %d)\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
              "\"tid\":1,\"args\":{\"name\":\"compute\"}},\n",
              k, k, s, k / 8, k);
    double ts = s * D;
    for (int i = 0; i < per_chip; i++) {
      if (i == per_chip / 2) ts += (k % 8 + 1) * D;
      fprintf(f,
              "{\"name\":\"op %d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%g,\"dur\":%g,\"pid\":%d,"
              "\"tid\":1,\"args\":{\"shape\":\"bf16[8,128]\",\"flops\":1e9}},\n",
              i, i < per_chip / 2 ? "forward" : "backward", ts, D, k);
      if (i % 4 == 3)
        fprintf(f,
                "{\"name\":\"all-reduce\",\"cat\":\"collective\",\"ph\":\"X\",\"ts\":%g,"
                "\"dur\":%g,\"pid\":%d,\"tid\":2},\n",
                ts, 2 * D, k);
      ts += D;
    }
    fprintf(f,
            "{\"name\":\"HBM in use\",\"ph\":\"C\",\"ts\":0,\"pid\":%d,\"args\":{\"bytes\":%d}},\n"
            "{\"name\":\"HBM in use\",\"ph\":\"C\",\"ts\":%g,\"pid\":%d,\"args\":{\"bytes\":%d}},\n",
            k, 1000 + k, ts / 2, k, 2000 + k);
  }
  fprintf(f, "{\"name\":\"HBM in use\",\"ph\":\"C\",\"ts\":0,\"pid\":0,\"args\":{\"bytes\":1000}}"
             "],\"otherData\":{\"hbm_capacity_bytes\":4096}}\n");
  fclose(f);
}

/* `tpusim view a1 ... a7` in-process (NULL ends the list early). */
static th_run view(const char *a1, const char *a2, const char *a3, const char *a4,
                   const char *a5, const char *a6, const char *a7) {
  return th_cli("view", a1, a2, a3, a4, a5, a6, a7, NULL);
}

static view_trace *open_trace(const char *path) {
  char *msg = NULL;
  size_t n;
  FILE *err = open_memstream(&msg, &n);
  view_trace *t = view_trace_open(path, err);
  fclose(err);
  cr_assert_not_null(t, "%s", msg);
  free(msg);
  return t;
}

/* The row labelled exactly `label`, or -1. */
static int row_of(const view_trace *t, const char *label) {
  for (int i = 0; i < view_rows(t); i++)
    if (strcmp(view_row_label(t, i), label) == 0) return i;
  return -1;
}

static void lanes_of(const image *im, int n, view_rect *lanes) {
  cr_assert_eq(view_layout(n, im->w, im->h, lanes), 0);
}

/* Columns, along the middle of lane l, from its left edge to the first
** box (a category's colour; grid lines and box edges are neither). */
static int leading_idle(const image *im, const view_rect *l) {
  static const char *const CATS[] = {"forward", "backward",  "collective", "matmul",
                                     "elementwise", "optimizer", "input", "other"};
  int y = l->y + l->h / 2;
  for (int x = l->x; x < l->x + l->w; x++)
    for (size_t k = 0; k < sizeof CATS / sizeof *CATS; k++)
      if (count(im, x, y, 1, 1, CATS[k])) return x - l->x;
  return l->w;
}

Test(view, pipeline_screenshot_has_every_lane_and_the_legend) {
  const char *trace = "tests/out/view_pp.json";
  make_trace(trace, 16, 4, 4, 16); /* dp 1: 4 stages */
  view_trace *t = open_trace(trace);
  int n = view_rows(t);
  cr_assert_eq(view_groups(t), 0, "4 stages are shown lane by lane");
  cr_assert(n >= 8, "compute and HBM lanes per stage: %d", n);
  char png[256], want[32];
  snprintf(png, sizeof png, "%s", out_path("view_pp.png"));
  th_run r = view(trace, "--screenshot", png, "--width", "1000", "--height", "560");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  snprintf(want, sizeof want, "%d lanes", n);
  cr_assert(strstr(r.out, want), "%s", r.out);
  image im = png_read(png);
  cr_assert_eq(im.w, 1000);
  cr_assert_eq(im.h, 560);
  view_rect *lanes = calloc((size_t)n, sizeof *lanes);
  lanes_of(&im, n, lanes);
  for (int s = 0; s < 4; s++) {
    char label[64];
    snprintf(label, sizeof label, "stage %d / compute", s);
    int row = row_of(t, label);
    cr_assert(row >= 0, "no lane '%s'", label);
    const view_rect *l = &lanes[row];
    int fw = count(&im, l->x, l->y, l->w, l->h, "forward");
    int bw = count(&im, l->x, l->y, l->w, l->h, "backward");
    cr_assert(fw > 100 && bw > 100, "%s: %d forward, %d backward pixels", label, fw, bw);
    cr_assert(bw > fw, "%s: backward takes longer than forward", label);
    snprintf(label, sizeof label, "stage %d / HBM", s);
    row = row_of(t, label);
    cr_assert(row >= 0, "no lane '%s'", label);
    l = &lanes[row];
    int mem = count(&im, l->x, l->y, l->w, l->h, "memory");
    cr_assert(mem > l->w / 2, "%s: %d memory-curve pixels", label, mem);
  }
  /* the pipeline bubble: stage 3 starts late, stage 0 idles before its first backward */
  /* stage 3 waits for three stages' forward of micro-batch 0: 3 x 8
  ** layers of 16 micro-batches' 1F1B, about 4 % of the step */
  const view_rect *s3 = &lanes[row_of(t, "stage 3 / compute")];
  const view_rect *s0 = &lanes[row_of(t, "stage 0 / compute")];
  int idle0 = leading_idle(&im, s0), idle3 = leading_idle(&im, s3);
  cr_assert(idle3 > idle0 + s3->w / 40, "the last stage waits for the first micro-batch: "
            "%d columns idle, stage 0 %d", idle3, idle0);
  /* nothing drawn below the last lane's row but the axis */
  int below = lanes[n - 1].y + lanes[n - 1].h;
  cr_assert_eq(count(&im, 0, below, im.w, im.h - below, "forward"), 0);
  /* the legend, above the lanes, shows the three colours */
  static const char *const LEGEND[] = {"forward", "backward", "collective"};
  for (int k = 0; k < 3; k++)
    cr_assert(count(&im, 0, 0, im.w, lanes[0].y, LEGEND[k]) >= 50, "legend lacks %s",
              LEGEND[k]);
  free(lanes);
  free(im.rgb);
  th_run_free(&r);
  view_trace_free(t);
}

Test(view, gpt3_1f1b_shows_the_pipeline_bubble) {
  /* the docs' picture: gpt3-175b on 64 A100s, tp 8, pp 8, 64 micro-batches */
  const char *trace = "tests/out/view_gpt3.json";
  make_trace_of(trace, (sim_args){"gpt3-175b", "a100-80g", 64, 8, 8, 64, 2048});
  view_trace *t = open_trace(trace);
  int n = view_rows(t);
  view_canvas *c = view_canvas_new(1200, 900, stderr);
  cr_assert_not_null(c);
  double t0, t1;
  view_trace_span(t, &t0, &t1);
  cr_assert_eq(view_canvas_draw(c, t, t0, t1), 0);
  const char *png = out_path("view_gpt3.png");
  cr_assert_eq(view_canvas_png(c, png, stderr), 0);
  view_canvas_free(c);
  image im = png_read(png);
  view_rect *lanes = calloc((size_t)n, sizeof *lanes);
  lanes_of(&im, n, lanes);
  int lead[8];
  for (int s = 0; s < 8; s++) {
    char label[64];
    snprintf(label, sizeof label, "stage %d / compute", s);
    int row = row_of(t, label);
    cr_assert(row >= 0, "no lane '%s'", label);
    const view_rect *l = &lanes[row];
    lead[s] = leading_idle(&im, l);
    /* the bubble: idle background inside the lane, between the boxes */
    int idle = count(&im, l->x, l->y + l->h / 2, l->w, 1, "idle");
    cr_assert(idle > l->w / 40, "stage %d: %d idle columns of %d", s, idle, l->w);
    if (s > 0)
      cr_assert(lead[s] > lead[s - 1], "stage %d starts after stage %d (%d vs %d px)", s,
                s - 1, lead[s], lead[s - 1]);
  }
  /* 1F1B with 8 stages and 64 micro-batches: the last stage waits 7
  ** forwards of the step's (64 + 7) forward-backward pairs, ~3% */
  double frac = lead[7] / (double)lanes[0].w;
  cr_assert(frac > 0.02 && frac < 0.08, "stage 7 waits %.3f of the step", frac);
  cr_assert(lead[0] <= 2, "stage 0 starts at once (%d px)", lead[0]);
  free(lanes);
  free(im.rgb);
  view_trace_free(t);
}

Test(view, data_parallel_all_reduce_overlaps_backward) {
  /* pure data parallelism: every collective is a gradient all-reduce bucket;
  ** one node of 8 (NVLink), where the buckets run under the last backward */
  const char *trace = "tests/out/view_dp.json";
  make_trace_of(trace, (sim_args){"bert-large", "a100-80g", 8, 1, 1, 128, 512});
  view_trace *t = open_trace(trace);
  int n = view_rows(t);
  int rc = row_of(t, "stage 0 / compute"), rn = row_of(t, "stage 0 / network");
  int rm = row_of(t, "stage 0 / HBM");
  cr_assert(rc >= 0 && rn >= 0 && rm >= 0, "compute, network and HBM lanes");
  char png[256];
  snprintf(png, sizeof png, "%s", out_path("view_dp.png"));
  th_run r = view(trace, "--screenshot", png, "--width", "1600", "--height", "300");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  image im = png_read(png);
  cr_assert(im.w == 1600 && im.h == 300);
  view_rect *lanes = calloc((size_t)n, sizeof *lanes);
  lanes_of(&im, n, lanes);
  unsigned char bw[3], coll[3];
  view_color("backward", bw);
  view_color("collective", coll);
  int overlap = 0, coll_cols = 0, after = 0, last_bw = 0;
  /* near the top of the lanes, above the boxes' names */
  int ym0 = lanes[rc].y + 3, ym1 = lanes[rn].y + 3;
  for (int x = lanes[rc].x; x < lanes[rc].x + lanes[rc].w; x++)
    if (is(&im, x, ym0, bw)) last_bw = x;
  for (int x = lanes[rc].x; x < lanes[rc].x + lanes[rc].w; x++) {
    coll_cols += is(&im, x, ym1, coll);
    overlap += is(&im, x, ym0, bw) && is(&im, x, ym1, coll);
    after += x > last_bw && is(&im, x, ym1, coll);
  }
  cr_assert(coll_cols > 20, "the all-reduce buckets are drawn (%d columns)", coll_cols);
  cr_assert(overlap > coll_cols / 2, "all-reduce overlaps the backward in %d of %d columns",
            overlap, coll_cols);
  cr_assert(after > 0 && after < coll_cols, "and its last part is exposed (%d columns)", after);
  cr_assert(count(&im, lanes[rm].x, lanes[rm].y, lanes[rm].w, lanes[rm].h, "memory") > 100);
  free(lanes);
  free(im.rgb);
  th_run_free(&r);
  view_trace_free(t);
}

Test(view, thousand_chips_show_as_groups) {
  const char *trace = "tests/out/view_1024.json";
  make_chips_trace(trace, 1024, 8, 40, true);
  view_trace *t = open_trace(trace);
  cr_assert_eq(view_trace_procs(t), 1024);
  cr_assert_eq(view_trace_events(t), 1024 * 50);
  cr_assert_eq(view_groups(t), 8, "one group per pipeline stage");
  cr_assert_str_eq(view_group_name(t, 3), "stage 3");
  cr_assert_eq(view_group_members(t, 3), 128);
  cr_assert_eq(view_rows(t), 24, "compute, network and HBM per group, not 3072 lanes");
  cr_assert_str_eq(view_row_label(t, 0), "stage 0 / compute (128)");
  cr_assert_str_eq(view_row_label(t, 2), "stage 0 / HBM max (128)");
  cr_assert_eq(view_row_group(t, 5), 1);
  /* the command draws the same 24 */
  char png[256];
  snprintf(png, sizeof png, "%s", out_path("view_1024.png"));
  th_run r = view(trace, "--screenshot", png, "--width", "1000", "--height", "600");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "24 lanes: 8 groups of 1024 processes"), "%s", r.out);
  image im = png_read(png);
  view_rect lanes[24];
  lanes_of(&im, 24, lanes);
  for (int g = 0; g < 8; g++) {
    const view_rect *l = &lanes[3 * g];
    int fw = count(&im, l->x, l->y, l->w, l->h, "forward");
    int bw = count(&im, l->x, l->y, l->w, l->h, "backward");
    cr_assert(fw > 200 && bw > 200, "group %d: %d forward, %d backward pixels", g, fw, bw);
    cr_assert(count(&im, lanes[3 * g + 1].x, lanes[3 * g + 1].y, lanes[3 * g + 1].w,
                    lanes[3 * g + 1].h, "collective") > 100);
    cr_assert(count(&im, lanes[3 * g + 2].x, lanes[3 * g + 2].y, lanes[3 * g + 2].w,
                    lanes[3 * g + 2].h, "memory") > 100);
    if (g > 0) /* every member of stage g starts g boxes late */
      cr_assert(leading_idle(&im, l) > leading_idle(&im, &lanes[3 * (g - 1)]), "group %d", g);
  }
  /* in the gap after the forwards only some members are busy: a partial bar */
  const view_rect *l = &lanes[0];
  /* group 0 at 2450 us: its forwards end at 2000 and member k resumes
  ** after (k % 8 + 1) x 100 us, so half of them are busy; the step ends at
  ** 5600 us (stage 7's last all-reduce) */
  double x_gap = l->x + 2450.0 * l->w / 5600;
  int top_busy = 0, bottom_busy = 0;
  unsigned char fw[3], bk[3];
  view_color("forward", fw);
  view_color("backward", bk);
  for (int dx = -3; dx <= 3; dx++) {
    int x = (int)x_gap + dx;
    top_busy += is(&im, x, l->y + 3, fw) || is(&im, x, l->y + 3, bk);
    bottom_busy += is(&im, x, l->y + l->h - 3, fw) || is(&im, x, l->y + l->h - 3, bk);
  }
  cr_assert(bottom_busy > 0 && top_busy < bottom_busy,
            "a partly busy group: %d busy columns at the bottom, %d at the top", bottom_busy,
            top_busy);
  free(im.rgb);
  th_run_free(&r);
  view_trace_free(t);
}

Test(view, an_expanded_group_shows_its_members) {
  const char *trace = "tests/out/view_96.json";
  make_chips_trace(trace, 96, 12, 16, true); /* 12 stages of 8 chips */
  view_trace *t = open_trace(trace);
  cr_assert_eq(view_groups(t), 12);
  cr_assert_eq(view_rows(t), 36);
  cr_assert_eq(view_group_expand(t, 12, true), -1, "no group 12");
  cr_assert_eq(view_group_expand(t, 3, true), 0);
  cr_assert(view_group_expanded(t, 3));
  cr_assert_eq(view_rows(t), 36 + 8 * 3, "8 members x (compute, network, HBM)");
  /* group 3's own lanes, then its members', then group 4 */
  cr_assert_str_eq(view_row_label(t, 9), "stage 3 / compute (8)");
  cr_assert_str_eq(view_row_label(t, 12), "chip 24 / compute");
  cr_assert_str_eq(view_row_label(t, 13), "chip 24 / tid 2");
  cr_assert_str_eq(view_row_label(t, 14), "chip 24 / HBM");
  cr_assert_str_eq(view_row_label(t, 33), "chip 31 / compute");
  cr_assert_eq(view_row_group(t, 12), -1);
  cr_assert_eq(view_row_group(t, 36), 4);
  int n = view_rows(t);
  view_canvas *c = view_canvas_new(1000, 900, stderr);
  cr_assert_not_null(c);
  double t0, t1;
  view_trace_span(t, &t0, &t1);
  cr_assert_eq(view_canvas_draw(c, t, t0, t1), 0);
  const char *png = out_path("view_96_expanded.png");
  cr_assert_eq(view_canvas_png(c, png, stderr), 0);
  image im = png_read(png);
  view_rect *lanes = calloc((size_t)n, sizeof *lanes);
  lanes_of(&im, n, lanes);
  /* each member's own boxes, with its own gap: chip 24+k waits k+1 boxes */
  int prev_end = 0;
  for (int k = 0; k < 8; k++) {
    const view_rect *l = &lanes[12 + 3 * k];
    int fw = count(&im, l->x, l->y, l->w, l->h, "forward");
    cr_assert(fw > 100, "chip %d: %d forward pixels", 24 + k, fw);
    /* where its last backward ends */
    int y = l->y + l->h / 2, end = 0;
    for (int x = l->x; x < l->x + l->w; x++)
      if (count(&im, x, y, 1, 1, "backward")) end = x;
    cr_assert(end > prev_end, "chip %d ends after chip %d", 24 + k, 23 + k);
    prev_end = end;
  }
  /* a click on group 3's lane collapses it; on a member's lane does nothing */
  cr_assert_eq(view_click(t, 1000, 900, lanes[12].x + 10, lanes[12].y + 1), -1);
  cr_assert_eq(view_click(t, 1000, 900, lanes[9].x + 10, lanes[9].y + 1), 3);
  cr_assert_eq(view_rows(t), 36);
  cr_assert(!view_group_expanded(t, 3));
  view_rect small[36];
  cr_assert_eq(view_layout(36, 1000, 900, small), 0);
  cr_assert_eq(view_click(t, 1000, 900, 5, small[35].y + 1), 11, "a click on a label too");
  cr_assert_eq(view_rows(t), 36 + 24);
  /* and the command's --expand */
  char p2[256];
  snprintf(p2, sizeof p2, "%s", out_path("view_96_cli.png"));
  th_run r = view(trace, "--screenshot", p2, "--expand", "stage 2", "--height", "900");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "60 lanes"), "%s", r.out);
  th_run_free(&r);
  r = view(trace, "--screenshot", p2, "--expand", "stage 99", NULL, NULL);
  cr_assert_eq(r.rc, 1);
  cr_assert(strstr(r.err, "no such group"), "%s", r.err);
  th_run_free(&r);
  free(lanes);
  free(im.rgb);
  view_canvas_free(c);
  view_trace_free(t);
}

Test(view, unnamed_processes_group_in_blocks) {
  const char *trace = "tests/out/view_40.json";
  make_chips_trace(trace, 40, 1, 8, false);
  view_trace *t = open_trace(trace);
  cr_assert_eq(view_groups(t), 5, "blocks of 8");
  cr_assert_str_eq(view_group_name(t, 1), "pid 8-15");
  cr_assert_eq(view_group_members(t, 4), 8);
  view_trace_free(t);
  /* 16 processes or fewer: lane by lane */
  make_chips_trace(trace, 16, 2, 8, true);
  t = open_trace(trace);
  cr_assert_eq(view_groups(t), 0);
  cr_assert_eq(view_rows(t), 48);
  view_trace_free(t);
}

Test(view, renders_without_a_font) {
  setenv("TPUSIM_FONT", "/nonexistent/font.ttf", 1); /* this test runs in its own process */
  const char *trace = th_write_temp(
      "view_small.json",
      "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":0,\"dur\":5,\"pid\":0,\"tid\":1,\"cat\":\"forward\"},"
      "{\"ph\":\"X\",\"ts\":5,\"dur\":9,\"pid\":0,\"tid\":1,\"cat\":\"input\",\"name\":\"stall\"}]}");
  char t[256], png[256];
  snprintf(t, sizeof t, "%s", trace);
  snprintf(png, sizeof png, "%s", out_path("view_nofont.png"));
  th_run r = view(t, "--screenshot", png, "--width", "400", "--height", "200");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert(strstr(r.out, "without text"), "%s", r.out);
  image im = png_read(png);
  view_rect lane;
  lanes_of(&im, 1, &lane);
  cr_assert(count(&im, lane.x, lane.y, lane.w, lane.h, "forward") > 0);
  cr_assert(count(&im, lane.x, lane.y, lane.w, lane.h, "input") > 0);
  cr_assert(count(&im, 0, 0, im.w, lane.y, "input") > 0, "input stall in the legend");
  free(im.rgb);
  th_run_free(&r);
}

Test(view, per_op_categories_and_args) {
  /* the ops track: matmul and elementwise boxes, args of any shape */
  const char *trace = th_write_temp(
      "view_ops.json",
      "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":0,\"dur\":5,\"pid\":0,\"tid\":3,\"cat\":\"matmul\","
      "\"name\":\"l0/dot\",\"args\":{\"shape\":\"bf16[8,4096]\",\"flops\":2e12,\"bytes\":1048576,"
      "\"dims\":[8,4096],\"fused\":true}},"
      "{\"ph\":\"X\",\"ts\":5,\"dur\":3,\"pid\":0,\"tid\":3,\"cat\":\"elementwise\","
      "\"name\":\"l0/add\",\"args\":{}},"
      "{\"ph\":\"X\",\"ts\":8,\"dur\":3,\"pid\":0,\"tid\":3,\"cat\":\"something-new\"}]}");
  char t[256], png[256];
  snprintf(t, sizeof t, "%s", trace);
  snprintf(png, sizeof png, "%s", out_path("view_ops.png"));
  th_run r = view(t, "--screenshot", png, "--width", "400", "--height", "200");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  image im = png_read(png);
  view_rect lane;
  lanes_of(&im, 1, &lane);
  int mm = count(&im, lane.x, lane.y, lane.w, lane.h, "matmul");
  int el = count(&im, lane.x, lane.y, lane.w, lane.h, "elementwise");
  int ot = count(&im, lane.x, lane.y, lane.w, lane.h, "other");
  cr_assert(mm > el && el > 0 && ot > 0, "matmul %d, elementwise %d, other %d", mm, el, ot);
  cr_assert(count(&im, 0, 0, im.w, lane.y, "matmul") > 0, "matmul in the legend");
  free(im.rgb);
  th_run_free(&r);
}

Test(view, malformed_traces_say_where_and_exit_1) {
  /* a real trace, cut in the middle */
  const char *good = "tests/out/view_cut_src.json";
  make_trace(good, 16, 4, 4, 16);
  FILE *f = fopen(good, "r");
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, f);
  fclose(f);
  text[n / 2] = '\0';
  static const struct {
    const char *name, *text, *want;
  } rows[] = {
      {"view_empty.json", "", "empty file"},
      {"view_cut.json", NULL, "truncated"},
      {"view_syntax.json", "{\"traceEvents\": [\n  {\"ph\": \"X\",, }]}", "2:"},
      {"view_number.json", "42", "expected a trace"},
      {"view_no_events.json", "{\"otherData\": {}}", "traceEvents"},
      {"view_events_not_array.json", "{\"traceEvents\": 3}", "traceEvents"},
      {"view_not_object.json", "{\"traceEvents\": [1]}", "expected an event object"},
      {"view_no_dur.json", "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1}]}", "dur"},
      {"view_ts_string.json",
       "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": \"1\", \"dur\": 2}]}", "ts"},
      {"view_neg_dur.json", "{\"traceEvents\": [\n{\"ph\": \"X\", \"ts\": 1, \"dur\": -2}]}",
       "2:"},
      {"view_nothing.json", "{\"traceEvents\": []}", "no events to show"},
      {"view_nul.json", "{\"traceEvents\": [], \"x\": \"\\u0000\"", "truncated"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char t[256], png[256];
    snprintf(t, sizeof t, "%s", th_write_temp(rows[i].name, rows[i].text ? rows[i].text : text));
    snprintf(png, sizeof png, "%s", out_path("view_bad.png"));
    remove(png);
    th_run r = view(t, "--screenshot", png, NULL, NULL, NULL, NULL);
    cr_expect_eq(r.rc, 1, "%s: rc %d", rows[i].name, r.rc);
    cr_expect(strstr(r.err, t), "%s: the message names the file: %s", rows[i].name, r.err);
    cr_expect(strstr(r.err, rows[i].want), "%s: want '%s' in: %s", rows[i].name, rows[i].want,
              r.err);
    struct stat st;
    cr_expect_neq(stat(png, &st), 0, "%s: no picture from a bad trace", rows[i].name);
    th_run_free(&r);
  }
  free(text);
}

Test(view, usage_errors_exit_2) {
  static const char *const BAD[][4] = {
      {NULL},
      {"a.json", "--bogus"},
      {"a.json", "--screenshot"},
      {"a.json", "--screenshot", "x.png", "--width"},
      {"a.json", "b.json"},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
    th_run r = view(BAD[i][0], BAD[i][0] ? BAD[i][1] : NULL, BAD[i][0] ? BAD[i][2] : NULL,
                 BAD[i][0] ? BAD[i][3] : NULL, NULL, NULL, NULL);
    cr_expect_eq(r.rc, 2, "case %zu: rc %d (%s)", i, r.rc, r.err);
    cr_expect(strstr(r.err, "usage") || strstr(r.err, "--"), "case %zu: %s", i, r.err);
    th_run_free(&r);
  }
  th_run r = view("a.json", "--screenshot", "x.png", "--width", "12", NULL, NULL);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "--width 12"), "%s", r.err);
  th_run_free(&r);
  r = view("tests/out/does-not-exist.json", "--screenshot", "x.png", NULL, NULL, NULL, NULL);
  cr_expect_eq(r.rc, 1);
  cr_expect(strstr(r.err, "cannot open"), "%s", r.err);
  th_run_free(&r);
  r = view("--help", NULL, NULL, NULL, NULL, NULL, NULL);
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.out, "--screenshot"));
  th_run_free(&r);
}

Test(view, no_display_suggests_screenshot) {
  setenv("SDL_VIDEODRIVER", "no-such-driver", 1); /* own process */
  const char *trace = th_write_temp(
      "view_one.json", "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":0,\"dur\":5,\"pid\":0,\"tid\":1}]}");
  char t[256];
  snprintf(t, sizeof t, "%s", trace);
  th_run r = view(t, NULL, NULL, NULL, NULL, NULL, NULL);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  cr_assert(strstr(r.err, "--screenshot"), "%s", r.err);
  th_run_free(&r);
}

Test(view, png_round_trip) {
  int w = 97, h = 61;
  unsigned char *rgb = malloc((size_t)w * h * 3);
  uint32_t s = 12345;
  for (int i = 0; i < w * h * 3; i++) {
    s = s * 1103515245u + 12345u;
    /* flat areas, gradients and noise: every filter and both literals and matches */
    int y = i / (w * 3);
    rgb[i] = (unsigned char)(y < 20 ? 200 : y < 40 ? (uint32_t)(i % (w * 3)) : (s >> 16));
  }
  const char *path = out_path("view_roundtrip.png");
  FILE *f = fopen(path, "wb");
  cr_assert_eq(png_write_rgb(f, rgb, w, h), 0);
  fclose(f);
  image im = png_read(path);
  cr_assert(im.w == w && im.h == h);
  cr_assert_eq(memcmp(im.rgb, rgb, (size_t)w * h * 3), 0, "pixels survive encoding");
  free(im.rgb);
  free(rgb);
}

/* The library's entry point without the command line: a view_req with
** the groups to expand, as `--expand` gives them. */
Test(view, run_takes_a_request) {
  const char *trace = "tests/out/view_req.json";
  make_chips_trace(trace, 24, 3, 8, true); /* 3 stages of 8 chips: grouped */
  char png[256];
  snprintf(png, sizeof png, "%s", out_path("view_req.png"));
  const char *expand[] = {"stage 1"};
  view_req req = {.trace = trace, .screenshot = png, .width = 800, .height = 600,
                  .expand = expand, .n_expand = 1};
  char *o = NULL, *e = NULL;
  size_t on, en;
  FILE *out = open_memstream(&o, &on), *err = open_memstream(&e, &en);
  int rc = view_run(&req, out, err);
  fclose(out);
  fclose(err);
  cr_assert_eq(rc, 0, "%s", e);
  /* 3 groups x (compute, network, HBM) + 8 members x 3 */
  cr_assert(strstr(o, "wrote tests/out/view_req.png (800x600, 33 lanes: 3 groups of 24 processes"),
            "%s", o);
  image im = png_read(png);
  cr_assert(im.w == 800 && im.h == 600);
  free(im.rgb);
  free(o);
  free(e);
  req.expand = (const char *const[]){"stage 9"};
  out = open_memstream(&o, &on);
  err = open_memstream(&e, &en);
  rc = view_run(&req, out, err);
  fclose(out);
  fclose(err);
  cr_assert_eq(rc, 1);
  cr_assert(strstr(e, "--expand stage 9: no such group"), "%s", e);
  free(o);
  free(e);
}

/* ---- size and kind checked before reading (issue 15) ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Before the check, /dev/zero was read for 62 s (2 GiB, 4.25 GB of memory)
** and a FIFO blocked forever waiting for a writer: the timeout fails both. */
Test(view, devices_pipes_and_directories_are_refused_unread, .timeout = 20) {
  const char *fifo = out_path("view_fifo");
  char fifo_path[256];
  snprintf(fifo_path, sizeof fifo_path, "%s", fifo);
  remove(fifo_path);
  cr_assert_eq(mkfifo(fifo_path, 0600), 0, "mkfifo %s", fifo_path);
  static const struct {
    const char *path, *kind;
  } rows[] = {{"/dev/zero", "a character device"}, {NULL, "a pipe (FIFO)"},
              {"tests", "a directory"}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const char *p = rows[i].path ? rows[i].path : fifo_path;
    double t0 = now_s();
    th_run r = view(p, "--screenshot", out_path("view_bad.png"), NULL, NULL, NULL, NULL);
    double dt = now_s() - t0;
    cr_expect_eq(r.rc, 1, "%s: rc %d", p, r.rc);
    cr_expect(strstr(r.err, p) && strstr(r.err, rows[i].kind) &&
                  strstr(r.err, "not a regular file") && strstr(r.err, "512 MiB"),
              "%s: want the file, '%s', 'not a regular file' and the limit in: %s", p,
              rows[i].kind, r.err);
    cr_expect_lt(dt, 5.0, "%s: refused in %.1f s; it should not be read", p, dt);
    th_run_free(&r);
  }
  remove(fifo_path);
}

/* A sparse file one byte over the limit: refused from its size alone
** (before, it was read whole, then refused for its NUL bytes). */
Test(view, a_trace_over_the_limit_is_refused_with_the_limit, .timeout = 20) {
  char path[256];
  snprintf(path, sizeof path, "%s", out_path("view_oversize.json"));
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fclose(f);
  cr_assert_eq(truncate(path, (off_t)VIEW_TRACE_MAX_BYTES + 1), 0, "truncate %s", path);
  char bytes[64];
  snprintf(bytes, sizeof bytes, "(%zu bytes)", VIEW_TRACE_MAX_BYTES + 1);
  double t0 = now_s();
  th_run r = view(path, "--screenshot", out_path("view_bad.png"), NULL, NULL, NULL, NULL);
  double dt = now_s() - t0;
  cr_expect_eq(r.rc, 1, "rc %d", r.rc);
  cr_expect(strstr(r.err, path) && strstr(r.err, bytes) && strstr(r.err, "512 MiB limit") &&
                strstr(r.err, "--gbs"),
            "want the file, its size %s, the limit and what to do in: %s", bytes, r.err);
  cr_expect_lt(dt, 5.0, "refused in %.1f s; it should not be read", dt);
  th_run_free(&r);
  remove(path);
}

/* A trace of exactly the limit loads: a small trace, then blanks (JSON
** whitespace) up to VIEW_TRACE_MAX_BYTES. */
Test(view, a_trace_at_the_limit_loads, .timeout = 120) {
  char path[256];
  snprintf(path, sizeof path, "%s", out_path("view_at_limit.json"));
  make_chips_trace(path, 4, 2, 8, true);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  FILE *f = fopen(path, "a");
  cr_assert(f);
  size_t left = VIEW_TRACE_MAX_BYTES - (size_t)st.st_size;
  static char blanks[1 << 16];
  memset(blanks, ' ', sizeof blanks);
  while (left > 0) {
    size_t n = left < sizeof blanks ? left : sizeof blanks;
    cr_assert_eq(fwrite(blanks, 1, n, f), n, "writing %s", path);
    left -= n;
  }
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq((size_t)st.st_size, VIEW_TRACE_MAX_BYTES);
  view_trace *t = open_trace(path);
  cr_expect_eq(view_trace_events(t), 4 * (8 + 2));
  view_trace_free(t);
  remove(path);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Events are parsed one at a time: loading a 30 MB trace of 170,000 events
** costs about twice its size (measured: 1.7x), where the whole cJSON tree
** cost 10-15x (a 100 MB trace: 1.46 GB). ASan's allocator makes the figure
** meaningless, so it is checked only without it. */
Test(view, loading_costs_about_twice_the_file) {
#ifdef UNDER_ASAN
  cr_skip_test("peak memory is not the program's under AddressSanitizer");
#else
  const char *path = "tests/out/view_big.json";
  make_chips_trace(path, 256, 16, 520, true);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double before = ru.ru_maxrss * 1024.0;
  view_trace *t = open_trace(path);
  getrusage(RUSAGE_SELF, &ru);
  double grew = ru.ru_maxrss * 1024.0 - before;
  cr_expect_eq(view_trace_events(t), 256 * (520 + 130));
  cr_expect_lt(grew, 3.0 * (double)st.st_size,
               "loading %.1f MB raised the peak by %.1f MB (%.1fx); want under 3x",
               st.st_size / 1e6, grew / 1e6, grew / (double)st.st_size);
  view_trace_free(t);
  remove(path);
#endif
}

/* One event is parsed at a time, so one event is what the parse may cost:
** an event over VIEW_TRACE_MAX_PART is refused unparsed, at its place. */
Test(view, an_oversize_event_is_refused_at_its_place) {
  size_t n = VIEW_TRACE_MAX_PART + 100;
  char *text = malloc(n + 200);
  const char *ev = "{\"ph\":\"X\",\"ts\":0,\"dur\":1,\"name\":\""; /* then n letters, "} */
  int k = sprintf(text, "{\"traceEvents\": [\n{\"ph\":\"X\",\"ts\":0,\"dur\":1},\n%s", ev);
  memset(text + k, 'a', n);
  strcpy(text + k + n, "\"}]}");
  char path[256];
  snprintf(path, sizeof path, "%s", th_write_temp("view_big_event.json", text));
  free(text);
  th_run r = view(path, "--screenshot", out_path("view_bad.png"), NULL, NULL, NULL, NULL);
  cr_expect_eq(r.rc, 1, "rc %d", r.rc);
  char want[160];
  snprintf(want, sizeof want, ":3:1: traceEvents[1]: a value of %zu bytes, over the 1.00 MiB",
           strlen(ev) + n + 2);
  cr_expect(strstr(r.err, want), "want '%s' in: %s", want, r.err);
  th_run_free(&r);
}

/* ---- the trace writer: streamed, and held to the viewer's limit (issue 15) ---- */

/* A simulated step kept for writing its trace several times. */
typedef struct {
  hw_catalog *cat;
  model *m;
  const hw_model *hw;
  plan p;
  step_result r;
  step_timeline tl;
} sim_step;

static void sim_step_of(sim_step *s, const char *model_name, const char *hw, int64_t chips,
                        int64_t tp, int64_t pp, int64_t gbs, int64_t seq) {
  memset(s, 0, sizeof *s);
  s->cat = th_catalog();
  diag *d = diag_new();
  model_opts o = {.seq_len = seq};
  s->m = model_load(model_name, &o, d);
  diag_free(d);
  cr_assert_not_null(s->m, "model %s", model_name);
  s->hw = th_hw(s->cat, hw);
  s->p = (plan){.chips = chips, .tp = tp, .pp = pp, .ep = 1, .mbs = 1, .vp = 1, .slices = 1,
                .gbs = gbs, .seq = seq, .schedule = PLAN_1F1B, .precision = GDT_BF16};
  char err[256] = "";
  int rc = plan_check(s->m, s->hw, &s->p, err, sizeof err);
  if (rc == 0) rc = step_simulate(s->m, s->hw, &s->p, NULL, &s->r, &s->tl, err, sizeof err);
  cr_assert_eq(rc, 0, "simulate: %s", err);
}

static void sim_step_free(sim_step *s) {
  step_timeline_free(&s->tl);
  model_free(s->m);
  hw_catalog_free(s->cat);
}

/* The trace written with a limit of max_bytes into memory: rc, the text
** (malloc'd; "" when nothing was written) and its length. */
static int write_to_memory(const sim_step *s, const char *model_name, uint64_t max_bytes,
                           char **text, size_t *len, char *err, size_t errn) {
  FILE *f = open_memstream(text, len);
  cr_assert(f);
  int rc = trace_write_limit(f, &s->tl, &s->r, &s->p, model_name, s->hw->name, max_bytes, err,
                             errn);
  fclose(f);
  return rc;
}

/* The streaming writer prints what cJSON_PrintUnformatted printed when the
** trace was one cJSON tree (what Perfetto and the viewer were checked
** against): parsed and printed again by cJSON, the text is unchanged, byte
** for byte, for a pipeline with its ops, a whole-step model (resnet50) and
** an HLO module; a model name with quotes, backslashes and control
** characters comes back as it went in. */
Test(trace_writer, prints_what_cjson_prints) {
  static const struct {
    const char *model, *hw, *name;
    int64_t chips, tp, pp, gbs, seq;
  } C[] = {{"llama3-8b", "h100-sxm", "llama3-8b", 32, 4, 4, 32, 1024},
           {"resnet50", "a100-80g", "a \"quoted\" \\ name\n\twith\x01 controls \xc3\xa9", 8, 1, 1, 0, 0},
           {"mlp_train_step", "h100-sxm", "mlp_train_step", 1, 1, 1, 0, 0}};
  for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
    sim_step s;
    sim_step_of(&s, C[i].model, C[i].hw, C[i].chips, C[i].tp, C[i].pp, C[i].gbs, C[i].seq);
    char *text = NULL, err[512] = "";
    size_t len = 0;
    cr_assert_eq(write_to_memory(&s, C[i].name, TRACE_MAX_BYTES, &text, &len, err, sizeof err), 0,
                 "%s", err);
    cJSON *root = cJSON_ParseWithLength(text, len);
    cr_assert_not_null(root, "%s: the trace does not parse", C[i].model);
    char *again = cJSON_PrintUnformatted(root);
    cr_assert_eq(strlen(again) + 1, len, "%s: %zu bytes, cJSON prints %zu", C[i].model, len,
                 strlen(again) + 1);
    cr_assert(memcmp(again, text, len - 1) == 0 && text[len - 1] == '\n', "%s: text differs",
              C[i].model);
    const cJSON *name = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "otherData"), "model");
    cr_assert_str_eq(cJSON_GetStringValue(name), C[i].name);
    cJSON_free(again);
    cJSON_Delete(root);
    free(text);
    sim_step_free(&s);
  }
}

/* llama3-8b on 32 H100s, tp 4, pp 4, gbs 32: dp = 32 / (4 x 4) = 2, so
** 32 / (2 x 1) = 16 micro-batches. Its trace is N bytes. With a limit of
** N it is written whole; with N - 1 (the bounds on its numbers straddle
** that: an exact count decides) and N / 4 (the bounds alone decide) it is
** refused before a byte is written, with its size (exactly N when counted
** exactly; a lower bound otherwise), its events and the limit. */
Test(trace_writer, refuses_past_its_limit_before_writing) {
  sim_step s;
  sim_step_of(&s, "llama3-8b", "h100-sxm", 32, 4, 4, 32, 1024);
  char *text = NULL, err[1024] = "";
  size_t n = 0, len = 0;
  cr_assert_eq(write_to_memory(&s, "llama3-8b", UINT64_MAX, &text, &n, err, sizeof err), 0, "%s", err);
  cJSON *root = cJSON_ParseWithLength(text, n);
  cr_assert_not_null(root);
  int events = cJSON_GetArraySize(cJSON_GetObjectItem(root, "traceEvents"));
  cJSON_Delete(root);
  free(text);
  cr_assert_eq(s.r.microbatches, 16);

  cr_assert_eq(write_to_memory(&s, "llama3-8b", n, &text, &len, err, sizeof err), 0, "%s", err);
  cr_expect_eq(len, n, "at its own size as the limit: %zu bytes of %zu", len, n);
  free(text);

  char want[160];
  snprintf(want, sizeof want, "(%zu bytes; %d events for 4 stages x 16 micro-batches)", n, events);
  cr_assert_eq(write_to_memory(&s, "llama3-8b", n - 1, &text, &len, err, sizeof err), -1);
  cr_expect_eq(len, 0, "refused, yet %zu bytes written", len);
  cr_expect(strstr(err, want) && strstr(err, "nothing was written") && strstr(err, "--gbs"),
            "want '%s', what to change and 'nothing was written' in: %s", want, err);
  free(text);

  char lim[32], lim_text[64];
  units_bytes(lim, sizeof lim, (double)(n / 4));
  snprintf(lim_text, sizeof lim_text, "more than the %s limit", lim);
  cr_assert_eq(write_to_memory(&s, "llama3-8b", n / 4, &text, &len, err, sizeof err), -1);
  cr_expect_eq(len, 0);
  unsigned long long counted = 0;
  const char *at = strstr(err, "(");
  cr_assert(at && sscanf(at, "(%llu bytes;", &counted) == 1, "%s", err);
  cr_expect(counted > n / 4 && counted <= n, "counted %llu: want a lower bound of %zu past %zu",
            counted, n, n / 4);
  cr_expect(strstr(err, "at least") && strstr(err, lim_text), "want 'at least' and '%s' in: %s",
            lim_text, err);
  free(text);
  sim_step_free(&s);
}

/* The viewer parses one event (or otherData) at a time and refuses one
** over VIEW_TRACE_MAX_PART (1 MiB): a 2 MiB model name would put one in
** otherData, so the writer refuses it, naming the name's length. */
Test(trace_writer, an_event_the_viewer_would_refuse_is_not_written) {
  sim_step s;
  sim_step_of(&s, "resnet50", "a100-80g", 8, 1, 1, 0, 0);
  size_t big = (size_t)2 << 20;
  char *name = malloc(big + 1), *text = NULL, err[1024] = "";
  memset(name, 'x', big);
  name[big] = 0;
  size_t len = 0;
  cr_assert_eq(write_to_memory(&s, name, TRACE_MAX_BYTES, &text, &len, err, sizeof err), -1);
  cr_expect_eq(len, 0);
  cr_expect(strstr(err, "one event") && strstr(err, "the model's name (2097152 bytes)") &&
                strstr(err, "1.00 MiB"),
            "%s", err);
  free(text);
  free(name);
  sim_step_free(&s);
}

/* Streamed: writing a trace raises the peak memory by a small fraction of
** its size (the whole cJSON tree cost about 10x: a 172 MB trace took the
** process from 161 MB to 1.67 GB, measured with /usr/bin/time -v). gpt3-175b
** on 96 stages of 8 A100s with 512 micro-batches writes ~21 MB. Not under
** ASan, whose allocator makes the figure meaningless. */
Test(trace_writer, memory_does_not_grow_with_the_trace, .timeout = 120) {
#ifdef UNDER_ASAN
  cr_skip_test("peak memory is not the program's under AddressSanitizer");
#else
  sim_step s;
  sim_step_of(&s, "gpt3-175b", "a100-80g", 768, 8, 96, 512, 2048);
  const char *path = out_path("trace_stream.json");
  FILE *f = fopen(path, "w");
  cr_assert(f);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double before = ru.ru_maxrss * 1024.0;
  char err[512] = "";
  cr_assert_eq(trace_write_limit(f, &s.tl, &s.r, &s.p, s.m->name, s.hw->name, TRACE_MAX_BYTES,
                                 err, sizeof err), 0, "%s", err);
  getrusage(RUSAGE_SELF, &ru);
  double grew = ru.ru_maxrss * 1024.0 - before;
  cr_assert_eq(fclose(f), 0);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_expect_gt(st.st_size, 10e6, "a %.1f MB trace; the test wants one of some size", st.st_size / 1e6);
  cr_expect_lt(grew, 0.1 * (double)st.st_size, "writing %.1f MB raised the peak by %.1f MB",
               st.st_size / 1e6, grew / 1e6);
  remove(path);
  sim_step_free(&s);
#endif
}
