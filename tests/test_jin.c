/*
** test_jin.c -- the JSON reader: syntax errors with positions, the path
** locator, duplicate keys, line:col counting.
*/
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../base/diag.h"
#include "../base/jin.h"

static const char DOC[] =
    "{\n"
    "  \"a\": {\"b\": [10, {\"c\": \"x}]\"}, 30]},\n"
    "  \"d\\\"q\": 1,\n"
    "  \"e\": 2, \"e\": 3\n"
    "}\n";

static size_t locate(const jin_seg *p, int n, int at_key) {
  return jin_locate(DOC, strlen(DOC), p, n, at_key);
}

Test(jin, locates_nested_keys_and_array_elements) {
  jin_seg p1[] = {{"a", 0}, {"b", 0}, {NULL, 2}};
  size_t off = locate(p1, 3, 0);
  cr_assert_neq(off, SIZE_MAX);
  cr_assert_eq(strncmp(DOC + off, "30]", 3), 0);

  /* the string "x}]" must not end the object early */
  jin_seg p2[] = {{"a", 0}, {"b", 0}, {NULL, 1}, {"c", 0}};
  off = locate(p2, 4, 0);
  cr_assert_eq(strncmp(DOC + off, "\"x}]\"", 5), 0);
  off = locate(p2, 4, 1);
  cr_assert_eq(strncmp(DOC + off, "\"c\"", 3), 0);
}

Test(jin, locates_escaped_keys_and_duplicates) {
  jin_seg q[] = {{"d\"q", 0}};
  cr_assert_eq(strncmp(DOC + locate(q, 1, 0), "1,", 2), 0);
  jin_seg e0[] = {{"e", 0}}, e1[] = {{"e", 1}}, e2[] = {{"e", 2}};
  cr_assert_eq(DOC[locate(e0, 1, 0)], '2');
  cr_assert_eq(DOC[locate(e1, 1, 0)], '3');
  cr_assert_eq(locate(e2, 1, 0), SIZE_MAX);
}

Test(jin, missing_paths_and_wrong_containers_give_no_offset) {
  jin_seg p[] = {{"zz", 0}};
  cr_assert_eq(locate(p, 1, 0), SIZE_MAX);
  jin_seg q[] = {{"a", 0}, {"b", 0}, {NULL, 7}};
  cr_assert_eq(locate(q, 3, 0), SIZE_MAX);
  jin_seg r[] = {{"a", 0}, {"b", 0}, {"notanobject", 0}};
  cr_assert_eq(locate(r, 3, 0), SIZE_MAX);
}

Test(jin, line_col_is_one_based) {
  int line, col;
  jin_line_col("ab\ncd", 0, &line, &col);
  cr_assert(line == 1 && col == 1);
  jin_line_col("ab\ncd", 4, &line, &col);
  cr_assert(line == 2 && col == 2);
}

static const char *first_error(const char *text) {
  static char msg[512];
  diag *d = diag_new();
  jin j;
  int rc = jin_open(&j, "t.json", text, strlen(text), d);
  cr_assert_eq(rc, -1, "expected a syntax error for: %s", text);
  cr_assert_eq(diag_count(d), 1);
  snprintf(msg, sizeof msg, "%s", diag_message(d, 0));
  jin_close(&j);
  diag_free(d);
  return msg;
}

Test(jin, syntax_errors_name_file_line_and_column) {
  cr_assert_str_eq(first_error("{\n  \"a\": 1\n  \"b\": 2\n}"),
                   "t.json:3:3: invalid JSON syntax near '\"b\": 2'");
  cr_assert(strstr(first_error("{\"a\": [1, 2"), "unexpected end of input"));
  cr_assert_str_eq(first_error("   \n  "), "t.json:1:1: empty file; expected a JSON object");
  cr_assert_str_eq(first_error("{} {}"), "t.json:1:4: unexpected text after the JSON value");
}

/* A text that does not parse holds nothing afterwards: sweep's study
** loader and plot's saved-plan reader returned at once and leaked the copy
** (and, after a parsed value with text behind it, the tree), which the
** sweep fuzz harness found (tests/fuzz/regress/sweep/leak-parse-error). */
Test(jin, a_failed_open_holds_nothing) {
  static const char *const BAD[] = {"{} {}", "{\"a\": [1", "  ", "{\"a\": 1,}"};
  for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
    diag *d = diag_new();
    jin j;
    cr_assert_eq(jin_open(&j, "t.json", BAD[i], strlen(BAD[i]), d), -1, "%s", BAD[i]);
    cr_assert_null(j.text, "%s", BAD[i]);
    cr_assert_null(j.root, "%s", BAD[i]);
    cr_assert_eq(j.errors > 0 || diag_count(d) > 0, true);
    jin_close(&j); /* harmless after a failure */
    diag_free(d);
  }
}

Test(jin, errors_at_paths_carry_positions) {
  diag *d = diag_new();
  jin j;
  cr_assert_eq(jin_open(&j, "t.json", DOC, strlen(DOC), d), 0);
  jin_push_key(&j, "a", 0);
  jin_push_key(&j, "b", 0);
  jin_push_index(&j, 2);
  jin_error(&j, 0, "too big");
  jin_pop(&j);
  jin_pop(&j);
  jin_pop(&j);
  jin_error_at(&j, "a.b", 1, "bad key");
  cr_assert_str_eq(diag_message(d, 0), "t.json:2:33: a.b[2]: too big");
  cr_assert_str_eq(diag_message(d, 1), "t.json:2:9: a.b: bad key");
  cr_assert_eq(j.errors, 2);
  jin_close(&j);
  diag_free(d);
}

Test(jin, read_file_reports_missing_and_directories) {
  diag *d = diag_new();
  size_t len;
  cr_assert_null(jin_read_file("tests/data/no-such-file.json", 1024, &len, d));
  cr_assert(strstr(diag_message(d, 0), "tests/data/no-such-file.json: cannot open"));
  cr_assert_null(jin_read_file("tests", 1024, &len, d));
  cr_assert(strstr(diag_message(d, 1), "tests: read error"));
  diag_free(d);
}
