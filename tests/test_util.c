/*
** test_util.c -- units formatting and string helpers.
*/
#include <criterion/criterion.h>

#include "../base/diag.h"
#include "../base/strutil.h"
#include "../base/units.h"

Test(units, si_prefixes_three_digits) {
  char b[64];
  units_si(b, sizeof b, 4.59e14, "FLOP/s");
  cr_assert_str_eq(b, "459 TFLOP/s");
  units_si(b, sizeof b, 2.765e12, "B/s");
  cr_assert_str_eq(b, "2.77 TB/s");
  units_si(b, sizeof b, 6.25e9, "B/s");
  cr_assert_str_eq(b, "6.25 GB/s");
  units_si(b, sizeof b, 999.9, "B/s"); /* rounds up into the next prefix */
  cr_assert_str_eq(b, "1.00 kB/s");
  units_si(b, sizeof b, 12.5, "W");
  cr_assert_str_eq(b, "12.5 W");
}

Test(units, binary_bytes) {
  char b[64];
  units_bytes(b, sizeof b, 102005473280.0); /* 95 x 2^30 */
  cr_assert_str_eq(b, "95.0 GiB");
  units_bytes(b, sizeof b, 134217728.0);
  cr_assert_str_eq(b, "128 MiB");
  units_bytes(b, sizeof b, 512);
  cr_assert_str_eq(b, "512 B");
}

Test(units, seconds) {
  char b[64];
  units_seconds(b, sizeof b, 1e-6);
  cr_assert_str_eq(b, "1.00 us");
  units_seconds(b, sizeof b, 0.0125);
  cr_assert_str_eq(b, "12.5 ms");
  units_seconds(b, sizeof b, 44 * 86400.0);
  cr_assert_str_eq(b, "44.0 d");
}

/* Money never rounds to $0.00: three significant figures (a 42 us step
** at $1.20 an hour costs $0.0000000141); more cases in test_explain.c. */
Test(units, usd) {
  char b[64];
  units_usd(b, sizeof b, 691.2);
  cr_assert_str_eq(b, "$691");
  units_usd(b, sizeof b, 8.2567);
  cr_assert_str_eq(b, "$8.26");
  units_usd(b, sizeof b, 42.2e-6 * 1.2 / 3600);
  cr_assert_str_eq(b, "$0.0000000141");
  units_usd(b, sizeof b, 0.0123);
  cr_assert_str_eq(b, "$0.0123");
  units_usd(b, sizeof b, 0);
  cr_assert_str_eq(b, "$0");
}

Test(strutil, distance) {
  cr_assert_eq(str_distance("kitten", "sitting", 5), 3);
  cr_assert_eq(str_distance("hbm_byte", "hbm_bytes", 3), 1);
  cr_assert_eq(str_distance("abc", "abc", 0), 0);
  cr_assert_eq(str_distance("a", "abcdef", 2), 3); /* capped: cap + 1 */
}

Test(strutil, suggest) {
  const char *names[] = {"tpu-v5p", "tpu-v5e", "h100-sxm", "h200"};
  cr_assert_str_eq(str_suggest("tpu-v5q", names, 4), "tpu-v5p");
  cr_assert_str_eq(str_suggest("h100", names, 4), "h100-sxm");
  cr_assert_null(str_suggest("mi300x", names, 4));
  /* of several completions the shortest, the least specific; a tie none */
  const char *variants[] = {"h100-96gb", "h100-sxm", "v100", "a100-40g", "a100-80g"};
  cr_assert_str_eq(str_suggest("h100", variants, 5), "h100-sxm");
  cr_assert_str_eq(str_suggest("a100", variants, 5), "v100"); /* no completion wins: the near miss */
}

Test(strutil, copy_truncates_and_says_so) {
  char b[4];
  cr_assert_eq(str_copy(b, sizeof b, "abc"), 0);
  cr_assert_eq(str_copy(b, sizeof b, "abcd"), -1);
  cr_assert_str_eq(b, "abc");
}

Test(diag, keeps_fifty_and_counts_the_rest) {
  diag *d = diag_new();
  for (int i = 0; i < 60; i++) diag_error(d, "f.json", i + 1, 2, "x.y", "problem %d", i);
  cr_assert_eq(diag_count(d), 60);
  cr_assert_str_eq(diag_message(d, 0), "f.json:1:2: x.y: problem 0");
  cr_assert_null(diag_message(d, 50));
  diag_error(d, "g.json", 0, 0, NULL, "no place");
  diag_clear(d);
  cr_assert_eq(diag_count(d), 0);
  diag_error(d, "g.json", 0, 0, NULL, "no place");
  cr_assert_str_eq(diag_message(d, 0), "g.json: no place");
  diag_free(d);
}
