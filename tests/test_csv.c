/*
** test_csv.c -- base/csv.c: cells and their positions, counted by hand
** from the text of each case.
*/
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../base/csv.h"

static const csv_limits LIM = {1u << 20, 100, 16, "test"};

/* The first message of reading text as a CSV file. */
static const char *read_text(const char *text, csv_table *t, diag *dg, bool widths) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/tpusim-test-csv-%d.csv", (int)getpid());
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  int rc = csv_read(t, path, "a test table (CSV)", &LIM, dg);
  if (rc == 0 && widths) csv_check_widths(t, dg);
  remove(path);
  return diag_count(dg) ? diag_message(dg, 0) : "";
}

/* Each cell's start and end, a quoted one's past its closing quote and
** its "" escapes: `1,"t""wo",x` has "t""wo" at columns 3-9 (its text is
** t"wo), so the next cell starts at 11. */
Test(csv, cells_know_where_they_start_and_end) {
  csv_table t;
  diag *dg = diag_new();
  cr_assert_str_eq(read_text("a,b,c\n1,\"t\"\"wo\",x\n", &t, dg, true), "");
  const csv_cell *c = csv_at(&t, 1, 1);
  cr_assert_str_eq(c->s, "t\"wo");
  cr_assert_eq(c->line, 2);
  cr_assert_eq(c->col, 3);
  cr_assert_eq(c->end_line, 2);
  cr_assert_eq(c->end_col, 10);
  cr_assert_eq(csv_at(&t, 1, 2)->col, 11);
  csv_free(&t);
  diag_free(dg);
}

/* A short row is reported where it ends: `1,"two"` ends at column 8 (the
** closing quote is column 7); counting the unquoted text said 6. A cell
** quoted over two lines ends on the second. */
Test(csv, a_short_row_is_reported_at_its_end) {
  csv_table t;
  diag *dg = diag_new();
  const char *m = read_text("a,b,c\n1,\"two\"\n", &t, dg, true);
  cr_assert(strstr(m, ".csv:2:8: 2 cells; the header has 3"), "%s", m);
  csv_free(&t);
  diag_free(dg);
  dg = diag_new();
  m = read_text("a,b,c\n1,\"t\nwo\"\n", &t, dg, true);
  cr_assert(strstr(m, ".csv:3:4: 2 cells; the header has 3"), "%s", m);
  csv_free(&t);
  diag_free(dg);
}
