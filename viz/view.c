/*
** view.c -- see view.h.
*/
#include "view.h"

#include <stdio.h>

#include <SDL.h>
#include <SDL_ttf.h>

void view_sdl_version(char *buf, size_t n) {
  SDL_version v;
  SDL_GetVersion(&v); /* safe before SDL_Init */
  const SDL_version *t = TTF_Linked_Version();
  snprintf(buf, n, "%u.%u.%u (ttf %u.%u.%u)", v.major, v.minor, v.patch, t->major, t->minor,
           t->patch);
}
