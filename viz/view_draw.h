/*
** view_draw.h -- drawing a view with an SDL renderer, private to viz/: the
** same code draws into the window (view.c) and into the offscreen canvas.
*/
#ifndef TPUSIM_VIEW_DRAW_H
#define TPUSIM_VIEW_DRAW_H

#include <stdbool.h>

#include <SDL.h>
#include <SDL_ttf.h>

#include "view_int.h"

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

/* Draws the whole view; returns -1 when the picture is too small. */
int view_draw(vview *v);
/* How many rows from `first` are shown at min_h pixels or more each. */
int view_rows_shown(const view_trace *t, int first, int height, int min_h);
/* A click at (x, y) with rows from `first` shown: toggles the group whose
** summary lane is there and returns it, else -1. */
int view_click_rows(view_trace *t, int first, int min_h, int w, int h, int x, int y);
/* DejaVu Sans (or $TPUSIM_FONT) at 12 pt, or NULL: no text. */
TTF_Font *view_open_font(void);

#endif
