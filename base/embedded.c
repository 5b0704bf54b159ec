/*
** embedded.c -- see embedded.h.
*/
#include "embedded.h"

#include <stdio.h>
#include <string.h>

const embedded_file *embedded_find(const embedded_file *files, int n, const char *name,
                                   const char *const *suffixes) {
  for (int s = 0; suffixes[s]; s++) {
    char want[256];
    snprintf(want, sizeof want, "/%s%s", name, suffixes[s]);
    size_t lw = strlen(want);
    for (int i = 0; i < n; i++) {
      size_t lf = strlen(files[i].file);
      if (lf >= lw && strcmp(files[i].file + lf - lw, want) == 0) return &files[i];
    }
  }
  return NULL;
}
