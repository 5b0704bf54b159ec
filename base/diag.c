/*
** diag.c -- see diag.h.
*/
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A file with a systematic mistake (say, every bandwidth in Gb/s) would
** otherwise bury the first, most useful message under hundreds of copies. */
#define DIAG_MAX_KEPT 50

struct diag {
  char *msg[DIAG_MAX_KEPT];
  int kept;
  int dropped;
};

diag *diag_new(void) { return calloc(1, sizeof(diag)); }

void diag_clear(diag *d) {
  for (int i = 0; i < d->kept; i++) free(d->msg[i]);
  d->kept = d->dropped = 0;
}

void diag_free(diag *d) {
  if (!d) return;
  diag_clear(d);
  free(d);
}

void diag_error(diag *d, const char *file, int line, int col, const char *path,
                const char *fmt, ...) {
  if (d->kept == DIAG_MAX_KEPT) {
    d->dropped++;
    return;
  }
  char head[512];
  int n;
  if (line > 0)
    n = snprintf(head, sizeof head, "%s:%d:%d: ", file ? file : "<input>", line, col);
  else
    n = snprintf(head, sizeof head, "%s: ", file ? file : "<input>");
  if (path && *path && n > 0 && (size_t)n < sizeof head)
    snprintf(head + n, sizeof head - (size_t)n, "%s: ", path);

  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);

  size_t len = strlen(head) + strlen(body) + 1;
  char *m = malloc(len);
  if (!m) {
    d->dropped++;
    return;
  }
  snprintf(m, len, "%s%s", head, body);
  d->msg[d->kept++] = m;
}

int diag_count(const diag *d) { return d->kept + d->dropped; }

const char *diag_message(const diag *d, int i) {
  return (i >= 0 && i < d->kept) ? d->msg[i] : NULL;
}

void diag_print(const diag *d, FILE *f) {
  for (int i = 0; i < d->kept; i++) fprintf(f, "%s\n", d->msg[i]);
  if (d->dropped) fprintf(f, "... and %d more errors\n", d->dropped);
}
