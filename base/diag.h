/*
** diag.h -- error messages that name a place.
**
** Loaders report every problem they find (not just the first) into a diag,
** and the command line prints them. A message always names the file and,
** when known, line:column and the field path, because "invalid input" alone
** sends the user hunting.
*/
#ifndef TPUSIM_DIAG_H
#define TPUSIM_DIAG_H

#include <stdio.h>

typedef struct diag diag;

diag *diag_new(void);
void diag_free(diag *d);

/* line <= 0 means the position is unknown; path may be NULL or "". */
void diag_error(diag *d, const char *file, int line, int col, const char *path,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));

int diag_count(const diag *d);
const char *diag_message(const diag *d, int i);
/* Prints each message on its own line, then "N more errors" if some were dropped. */
void diag_print(const diag *d, FILE *f);
void diag_clear(diag *d);

#endif
