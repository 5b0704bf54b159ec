/*
** embedded.h -- files compiled into the binary by base/embed.c (the
** hardware catalog, the example models), so tpusim needs no data directory.
*/
#ifndef TPUSIM_EMBEDDED_H
#define TPUSIM_EMBEDDED_H

#include <stddef.h>

typedef struct {
  const char *file; /* the path it was read from: "hw_models/tpu-v5p.json" */
  const unsigned char *data; /* NUL-terminated */
  size_t len;                /* without the NUL */
} embedded_file;

/* The embedded file whose path ends in "/NAME" followed by one of the
** NULL-terminated suffixes (".json", ".hlo"), or NULL. */
const embedded_file *embedded_find(const embedded_file *files, int n, const char *name,
                                   const char *const *suffixes);

#endif
