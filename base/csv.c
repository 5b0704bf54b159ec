/*
** csv.c -- CSV cells with the line:column they start at (csv.h).
*/
#include "csv.h"

#include <stdlib.h>
#include <string.h>

#include "jin.h"

void csv_free(csv_table *t) {
  free(t->text);
  free(t->cells);
  free(t->recs);
  memset(t, 0, sizeof *t);
}

static int grow(void **p, int *cap, int need, size_t size) {
  if (need <= *cap) return 0;
  int n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *q = realloc(*p, (size_t)n * size);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* One cell from p (quoted per RFC 4180: "" is a quote, newlines allowed);
** its text is moved in place and terminated. Returns the separator that
** ended it (',' or '\n' for the end of the record), or 0 after an error. */
static char read_cell(csv_table *t, char **pp, char *end, int *line, char **line_start, csv_cell *c,
                     diag *dg) {
  char *p = *pp, *dst = p;
  c->line = *line;
  c->col = (int)(p - *line_start) + 1;
  c->s = p;
  if (p < end && *p == '"') {
    c->s = dst = ++p;
    for (;;) {
      if (p >= end) {
        diag_error(dg, t->file, c->line, c->col, NULL, "a quoted cell with no closing quote");
        return 0;
      }
      if (*p == '"' && p + 1 < end && p[1] == '"') {
        *dst++ = '"';
        p += 2;
      } else if (*p == '"') {
        p++;
        break;
      } else {
        if (*p == '\n') (*line)++, *line_start = p + 1;
        *dst++ = *p++;
      }
    }
    if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
      diag_error(dg, t->file, *line, (int)(p - *line_start) + 1, NULL,
                 "expected ',' or the end of the line after a quoted cell, found '%c'", *p);
      return 0;
    }
  } else {
    while (p < end && *p != ',' && *p != '\n' && *p != '\r') p++;
    dst = p;
  }
  c->end_line = *line;
  c->end_col = (int)(p - *line_start) + 1;
  char sep = p < end && *p == ',' ? ',' : '\n';
  if (p < end && *p == '\r' && p + 1 < end && p[1] == '\n') p++; /* CRLF */
  if (p < end) p++; /* past the ',' or the line's end */
  *dst = '\0';      /* text has a terminator at end, so dst <= end is writable */
  *pp = p;
  return sep;
}

int csv_read(csv_table *t, const char *file, const char *what, const csv_limits *lim, diag *dg) {
  size_t len;
  memset(t, 0, sizeof *t);
  t->file = file;
  t->text = jin_read_regular(file, lim->max_bytes, what, lim->why, &len, dg);
  if (!t->text) return -1;
  char *nul = memchr(t->text, '\0', len);
  if (nul) {
    int line = 1;
    for (char *q = t->text; q < nul; q++) line += *q == '\n';
    diag_error(dg, file, line, 1, NULL, "a NUL byte: expected text (%s)", what);
    return -1;
  }
  char *p = t->text, *end = t->text + len, *line_start = p;
  int line = 1;
  if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3, line_start = p; /* a UTF-8 BOM */
  while (p < end) {
    if (*p == '#' || *p == '\n' || *p == '\r') { /* a comment or a blank line, LF, CRLF or CR */
      while (p < end && *p != '\n' && *p != '\r') p++;
      if (p < end && *p == '\r' && p + 1 < end && p[1] == '\n') p++;
      if (p < end) p++;
      line++;
      line_start = p;
      continue;
    }
    if (t->n_recs == lim->max_rows + 1) {
      diag_error(dg, file, line, 1, NULL, "more than %d rows, the limit (%s)", lim->max_rows,
                 lim->why);
      return -1;
    }
    if (grow((void **)&t->recs, &t->cap_recs, t->n_recs + 1, sizeof *t->recs)) goto oom;
    csv_rec *r = &t->recs[t->n_recs++];
    r->first = t->n_cells;
    r->n = 0;
    char sep;
    do {
      if (r->n == lim->max_cols) {
        diag_error(dg, file, line, (int)(p - line_start) + 1, NULL,
                   "more than %d cells in a row, the limit", lim->max_cols);
        return -1;
      }
      if (grow((void **)&t->cells, &t->cap_cells, t->n_cells + 1, sizeof *t->cells)) goto oom;
      csv_cell *c = &t->cells[t->n_cells++];
      sep = read_cell(t, &p, end, &line, &line_start, c, dg);
      if (!sep) return -1;
      r->n++;
    } while (sep == ',');
    line++;
    line_start = p;
  }
  if (t->n_recs == 0) {
    diag_error(dg, file, 0, 0, NULL, "empty: expected a header line and rows (%s)", what);
    return -1;
  }
  return 0;
oom:
  diag_error(dg, file, line, 1, NULL, "out of memory");
  return -1;
}

const csv_cell *csv_at(const csv_table *t, int rec, int col) {
  return col >= 0 && col < t->recs[rec].n ? &t->cells[t->recs[rec].first + col] : NULL;
}

int csv_col(const csv_table *t, const char *name) {
  for (int i = 0; i < t->recs[0].n; i++)
    if (strcmp(csv_at(t, 0, i)->s, name) == 0) return i;
  return -1;
}

int csv_check_widths(const csv_table *t, diag *dg) {
  int bad = 0, want = t->recs[0].n;
  for (int r = 1; r < t->n_recs; r++) {
    if (t->recs[r].n == want) continue;
    const csv_cell *last = csv_at(t, r, t->recs[r].n - 1);
    diag_error(dg, t->file, last->end_line, last->end_col, NULL,
               "%d cells; the header has %d (a ',' inside a cell needs quotes)", t->recs[r].n,
               want);
    bad = 1;
  }
  return bad ? -1 : 0;
}
