/*
** view.h -- the SDL2 timeline viewer of a step trace (issue 8).
**
** `tpusim view TRACE` opens the Chrome trace JSON that `simulate --trace`
** writes: one lane per (process, thread) with events, one memory lane per
** process with its "HBM in use" counter, boxes coloured by category, a time
** axis, a legend and a summary bar. `--screenshot FILE.png` draws the same
** picture into an offscreen software surface and writes a PNG (an encoder
** of our own, png.h: no library beyond SDL2 and SDL2_ttf), with no window
** and no video driver. Every SDL call of tpusim stays in the viewer's files
** behind this header (view.c, view_draw.c).
**
** The command line is cli/'s; this is the library it calls. The modules:
** view_trace.c loads a trace, view_group.c groups its lanes, view_draw.c
** draws a view, view.c shows it in a window or a picture (view_int.h and
** view_draw.h are their private headers).
**
** A trace with more than VIEW_GROUP_MIN_PROCS processes (one per chip, say)
** is shown as lane groups: each group (a pipeline stage or a node, read off
** the process names, else blocks of consecutive processes) has one summary
** lane per thread kind, drawing the fraction of its members busy in each
** category, and one HBM lane with the members' maximum. A group expands to
** its members' own lanes on a click (view_click) or view_group_expand.
*/
#ifndef TPUSIM_VIEW_H
#define TPUSIM_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* "2.26.5 (ttf 2.20.1)": the SDL2 and SDL2_ttf the binary runs with. */
void view_sdl_version(char *buf, size_t n);

/* What `tpusim view` (cli/cmd_view.c) asks for, its options checked. */
typedef struct {
  const char *trace;      /* the trace file (simulate --trace) */
  const char *screenshot; /* FILE.png: draw offscreen, write it, exit; NULL: a window */
  int width, height;      /* the screenshot's size in pixels */
  /* the groups shown expanded, in order: a group's name, its number
  ** from 0, or "all" */
  const char *const *expand;
  int n_expand;
} view_req;

/* Opens r's trace, expands the groups asked for, then writes the
** screenshot (saying so on out) or opens a window until it is closed (a
** clear message and 1 when there is no display). Returns 0, or 1 for bad
** input (the trace, a group, a file that cannot be written, no display)
** after a message to err. */
int view_run(const view_req *r, FILE *out, FILE *err);

/* ---- pieces the tests, the benchmark and the docs rely on ---- */

typedef struct {
  int x, y, w, h;
} view_rect;

/* Where the n lanes of a width x height picture lie (the plot area, right
** of the labels); the summary bar and the legend are above lanes[0].y.
** Returns 0, or -1 when the picture is too small for n lanes. */
int view_layout(int n, int width, int height, view_rect *lanes);

/* The colour of a category: "forward", "backward", "collective", "matmul",
** "elementwise" (the ops track), "input", "optimizer", "other", "memory"
** (the HBM curve), "capacity", "idle" (the lane background). Returns 0, or
** -1 (and grey) for an unknown name. */
int view_color(const char *category, unsigned char rgb[3]);

/* Processes beyond which lanes are grouped. */
#define VIEW_GROUP_MIN_PROCS 16

/* A loaded trace and what of it is shown (which groups are expanded). */
typedef struct view_trace view_trace;

/* The largest trace the viewer reads (docs/limits.md). simulate writes a
** few MB for most plans, and 344 MB for the largest measured (gpt3-175b on
** 96 stages with 8,192 micro-batches); loading costs 1.5-1.7 times the
** file's size (that one: 528 MB), so a trace at the limit needs under 1 GB.
** A larger file, or one that is not a regular file (/dev/zero, a pipe), is
** refused before it is read. */
#define VIEW_TRACE_MAX_BYTES ((size_t)512 << 20)
#define VIEW_TRACE_LIMIT_WHY                                                                  \
  "simulate writes at most a few hundred MB (344 MB for gpt3-175b on 96 stages x 8,192 "    \
  "micro-batches); a smaller --gbs shows the same schedule in a smaller trace"
/* The largest single event (or otherData) in a trace: events are parsed one
** at a time, and this bounds the one being parsed. */
#define VIEW_TRACE_MAX_PART ((size_t)1 << 20)

/* Loads a trace; on bad input prints messages naming path:line:col to err
** and returns NULL. */
view_trace *view_trace_open(const char *path, FILE *err);
void view_trace_free(view_trace *t);
int view_trace_events(const view_trace *t);
int view_trace_procs(const view_trace *t);
/* The time range of everything in the trace, in microseconds. */
void view_trace_span(const view_trace *t, double *t0_us, double *t1_us);

/* Lane groups: 0 when the trace is shown lane by lane. */
int view_groups(const view_trace *t);
const char *view_group_name(const view_trace *t, int g);
int view_group_members(const view_trace *t, int g); /* processes */
/* Shows (expanded true) or hides group g's member lanes; -1 for no such g. */
int view_group_expand(view_trace *t, int g, bool expanded);
bool view_group_expanded(const view_trace *t, int g);

/* The rows drawn now, top to bottom: group summary lanes, expanded
** members' lanes, or plain lanes. */
int view_rows(const view_trace *t);
const char *view_row_label(const view_trace *t, int row);
/* The group whose summary lane row is, or -1 for a member's or plain lane. */
int view_row_group(const view_trace *t, int row);

/* A click at (x, y) of a width x height view: over a group's summary lane
** it toggles the group and returns the group; otherwise -1. */
int view_click(view_trace *t, int width, int height, int x, int y);

/* An offscreen software canvas to draw views into (screenshots, tests,
** benchmarks). */
typedef struct view_canvas view_canvas;
view_canvas *view_canvas_new(int width, int height, FILE *err);
void view_canvas_free(view_canvas *c);
/* Draws t's rows over [v0_us, v1_us]. Returns 0, or -1 when the canvas is
** too small for the rows. */
int view_canvas_draw(view_canvas *c, const view_trace *t, double v0_us, double v1_us);
/* 1 when the canvas has a font (text drawn), 0 when not. */
int view_canvas_has_font(const view_canvas *c);
/* The last drawing as PNG. Returns 0, or -1 after a message to err. */
int view_canvas_png(view_canvas *c, const char *path, FILE *err);

#endif
