/*
** csv.h -- reading CSV with the line:column of every cell.
**
** One reader for every CSV file tpusim takes (tables of runs, the
** validation mapping, serving measurements): RFC 4180 quoting ("" a quote,
** newlines inside quotes), CRLF, a UTF-8 BOM, '#' comment lines and blank
** lines skipped. The file is checked against the caller's limits before
** it is cut, and every problem is reported at its line and column.
*/
#ifndef TPUSIM_CSV_H
#define TPUSIM_CSV_H

#include <stddef.h>

#include "diag.h"

typedef struct {
  const char *s; /* NUL-terminated, unquoted, inside the table's text */
  int line, col;
  int end_line, end_col; /* just past its text in the file, its closing quote included */
} csv_cell;

typedef struct {
  int first, n; /* cells[first .. first+n) */
} csv_rec;

typedef struct {
  const char *file;
  char *text; /* the file, cut into cells in place */
  csv_cell *cells;
  int n_cells, cap_cells;
  csv_rec *recs; /* recs[0] is the header */
  int n_recs, cap_recs;
} csv_table;

/* What a caller's file may hold, refused past (why: the reason, in its
** messages). */
typedef struct {
  size_t max_bytes;
  int max_rows, max_cols;
  const char *why;
} csv_limits;

/* Reads and cuts file (what: "a table of runs (CSV)", for messages): the
** header and every record. 0, or -1 after reporting to dg (t then holds
** what csv_free frees). */
int csv_read(csv_table *t, const char *file, const char *what, const csv_limits *lim, diag *dg);
void csv_free(csv_table *t);
/* Record rec's cell col, or NULL past its end. */
const csv_cell *csv_at(const csv_table *t, int rec, int col);
/* The header's column named name, or -1. */
int csv_col(const csv_table *t, const char *name);
/* Each record has the header's cell count: 0, or -1 after reporting each
** record that does not. */
int csv_check_widths(const csv_table *t, diag *dg);

#endif
