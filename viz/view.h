/*
** view.h -- the SDL2 timeline viewer (issue 8 builds it out).
**
** SDL calls stay behind this header.
*/
#ifndef TPUSIM_VIEW_H
#define TPUSIM_VIEW_H

#include <stddef.h>

/* "2.26.5 (ttf 2.20.1)": the SDL2 and SDL2_ttf the binary runs with. */
void view_sdl_version(char *buf, size_t n);

#endif
