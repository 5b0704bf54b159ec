/*
** fuzz_common.h -- what the libFuzzer harnesses share (`make fuzz`): the
** input written to a private file for the loaders that read a path, and
** the rule every harness checks beyond "no crash": a loader either returns
** a value or reports at least one diagnostic, never neither.
*/
#ifndef TPUSIM_FUZZ_COMMON_H
#define TPUSIM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes data to a file of this process (suffix tells loaders the kind)
** and returns its path (static storage). */
static inline const char *fuzz_file(const uint8_t *data, size_t n, const char *suffix) {
  static char path[256];
  snprintf(path, sizeof path, "/tmp/tpusim-fuzz-%d%s", (int)getpid(), suffix);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(data, 1, n, f) != n) abort();
  fclose(f);
  return path;
}

/* A loader that failed silently is a bug too: abort so libFuzzer keeps it. */
#define FUZZ_REQUIRE(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "fuzz: %s failed at %s:%d\n", #cond, __FILE__, __LINE__);           \
      abort();                                                                             \
    }                                                                                      \
  } while (0)

#endif
