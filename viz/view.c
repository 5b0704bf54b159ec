/*
** view.c -- see view.h: the two places a view is shown. The window: SDL
** video, its event loop (zoom, pan, scroll, hover, clicks on group lanes,
** help); and the offscreen canvas, a software surface that screenshots
** draw into and write as PNG (png.h), with no window and no video driver.
** view_run opens the trace, expands the groups asked for and picks one.
**
** The rest of the viewer: view_trace.c (loading), view_group.c (lane
** groups and rows), view_draw.c (drawing, the same for both places).
*/
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png.h"
#include "view_draw.h"

void view_sdl_version(char *buf, size_t n) {
  SDL_version v;
  SDL_GetVersion(&v); /* safe before SDL_Init */
  const SDL_version *t = TTF_Linked_Version();
  snprintf(buf, n, "%u.%u.%u (ttf %u.%u.%u)", v.major, v.minor, v.patch, t->major, t->minor,
           t->patch);
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
  c->font = c->ttf ? view_open_font() : NULL;
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
  int rc = view_draw(&v);
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
  int wr = png_write_rgb(f, rgb, w, h);
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
            view_canvas_has_font(c) ? "" : " without text: DejaVuSans.ttf not found (install fonts-dejavu-core)");
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
  int shown = view_rows_shown(v->t, 0, v->h, v->min_row_h);
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
  TTF_Font *font = ttf && r ? view_open_font() : NULL;
  vview v = {.t = t, .v0 = t->t0, .v1 = t->t1, .font = font, .r = r, .min_row_h = 4};
  bool quit = rc != 0, dirty = true, dragging = false;
  int drag_x = 0, down_x = 0, down_y = 0;
  double drag_v0 = 0;
  while (!quit) {
    if (dirty) {
      SDL_GetRendererOutputSize(r, &v.w, &v.h);
      scroll_rows(&v, 0);
      view_draw(&v);
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
      int page = view_rows_shown(t, v.first_row, v.h, v.min_row_h);
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
          if (view_click_rows(t, v.first_row, v.min_row_h, v.w, v.h, down_x, down_y) >= 0) {
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
