/*
** png.h -- a PNG encoder of our own, so screenshots need no library
** beyond SDL2 and SDL2_ttf.
*/
#ifndef TPUSIM_PNG_H
#define TPUSIM_PNG_H

#include <stdio.h>

/* Writes an 8-bit RGB image (rows of 3 * w bytes) as PNG: filtered rows,
** zlib with fixed-Huffman deflate blocks, CRC-32 and Adler-32. Returns 0
** or -1 on a write error or out of memory. */
int png_write_rgb(FILE *f, const unsigned char *rgb, int w, int h);

#endif
