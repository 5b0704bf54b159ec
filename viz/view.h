/*
** view.h -- the SDL2 timeline viewer of a step trace (issue 8).
**
** `tpusim view TRACE` opens the Chrome trace JSON that `simulate --trace`
** writes: one lane per (process, thread) with events, one memory lane per
** process with its "HBM in use" counter, boxes coloured by category, a time
** axis, a legend and a summary bar. `--screenshot FILE.png` draws the same
** picture into an offscreen software surface and writes a PNG (an encoder
** of our own: no library beyond SDL2 and SDL2_ttf), with no window and no
** video driver. Every SDL call of tpusim stays behind this header.
*/
#ifndef TPUSIM_VIEW_H
#define TPUSIM_VIEW_H

#include <stddef.h>
#include <stdio.h>

/* "2.26.5 (ttf 2.20.1)": the SDL2 and SDL2_ttf the binary runs with. */
void view_sdl_version(char *buf, size_t n);

/* `tpusim view`: argv[0] = "view", argv[1] = TRACE, then options
** --screenshot FILE.png, --width W, --height H, --help. Without
** --screenshot it opens a window (a clear message and 1 when there is no
** display). Returns 0, 1 for bad input (the trace, a file that cannot be
** written, no display) or 2 for bad usage. */
int view_main(int argc, char **argv, FILE *out, FILE *err);

/* ---- pieces the tests (and docs) rely on ---- */

typedef struct {
  int x, y, w, h;
} view_rect;

/* Where the n lanes of a width x height picture lie (the plot area, right
** of the labels); the summary bar and the legend are above lanes[0].y.
** Returns 0, or -1 when the picture is too small for n lanes. */
int view_layout(int n, int width, int height, view_rect *lanes);

/* The colour of a category: "forward", "backward", "collective", "input",
** "optimizer", "other", "memory" (the HBM curve), "capacity", "idle" (the
** lane background). Returns 0, or -1 (and grey) for an unknown name. */
int view_color(const char *category, unsigned char rgb[3]);

/* Writes an 8-bit RGB image (rows of 3 * w bytes) as PNG: filtered rows,
** zlib with fixed-Huffman deflate blocks, CRC-32 and Adler-32. Returns 0
** or -1 on a write error or out of memory. */
int view_png_write(FILE *f, const unsigned char *rgb, int w, int h);

#endif
