/*
** test_num.c -- base/num.h: numbers typed on the command line, each kind
** and each way of being wrong, with the message that names it.
*/
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../base/num.h"

static const num_range SEQ = {NUM_INT, 1, 1 << 20, false};
static const num_range RATE = {NUM_REAL, 0, 1, true};
static const num_range SIZE = {NUM_BYTES, 1, 1125899906842624.0, false};
static const num_range DUR = {NUM_SECONDS, 0, 36500.0 * 86400, true};

/* parses s in r; on failure the message must contain want */
static double ok(const char *s, num_range r) {
  double v = -1;
  char err[320] = "";
  cr_assert_eq(num_parse("--x", s, r, &v, err, sizeof err), 0, "'%s': %s", s, err);
  return v;
}

static void refused(const char *s, num_range r, const char *want) {
  double v = -1;
  char err[320] = "";
  cr_assert_eq(num_parse("--x", s, r, &v, err, sizeof err), -1, "'%s' was accepted as %g", s, v);
  cr_assert(strstr(err, want), "'%s': %s (wanted '%s')", s, err, want);
  cr_assert_eq(v, -1, "'%s' wrote the output on failure", s);
}

Test(num, integers_in_range_and_exact_exponents) {
  cr_assert_eq(ok("1", SEQ), 1);
  cr_assert_eq(ok("8192", SEQ), 8192);
  cr_assert_eq(ok("1e3", SEQ), 1000);
  cr_assert_eq(ok("+64", SEQ), 64);
  cr_assert_eq(ok("1048576", SEQ), 1048576);
  int64_t n = 0;
  char err[320];
  cr_assert_eq(num_parse_int("--chips", "4096", 1, 1 << 20, &n, err, sizeof err), 0, "%s", err);
  cr_assert_eq(n, 4096);
}

Test(num, out_of_range_names_flag_value_range_and_nearest) {
  char err[320];
  double v;
  cr_assert_eq(num_parse("--seq", "10000000", SEQ, &v, err, sizeof err), -1);
  cr_assert_str_eq(err, "--seq 10000000: expected an integer from 1 to 1048576; "
                        "the nearest allowed is 1048576");
  refused("0", SEQ, "the nearest allowed is 1");
  refused("-5", SEQ, "the nearest allowed is 1");
  refused("1e400", SEQ, "the nearest allowed is 1048576"); /* past a double: inf */
  refused("99999999999999999999999", SEQ, "the nearest allowed is 1048576");
}

Test(num, garbage_nan_infinity_hex_and_fractions_are_refused) {
  refused("12x", SEQ, "found 'x' after the number");
  refused("12 ", SEQ, "found ' ' after the number");
  refused(" 12", SEQ, "found no number");
  refused("", SEQ, "found nothing");
  refused("", SEQ, "--x: expected"); /* no stray space where the value is empty */
  refused("nan", RATE, "found no number");
  refused("inf", RATE, "found no number");
  refused("-inf", RATE, "found no number");
  refused("0x10", SEQ, "found 'x10' after the number");
  refused("1e", SEQ, "found 'e' after the number");
  refused("1.5", SEQ, "found a fraction; the nearest allowed is 2");
  refused("64M", SEQ, "found 'M' after the number"); /* counts take no size suffix */
}

Test(num, open_bounds_refuse_the_bound_itself) {
  cr_assert_float_eq(ok("0.05", RATE), 0.05, 1e-15);
  cr_assert_eq(ok("1", RATE), 1);
  refused("0", RATE, "expected a number above 0 and at most 1; found a value not above 0");
  refused("2", RATE, "the nearest allowed is 1");
  refused("-0.1", RATE, "found a value not above 0");
}

Test(num, sizes_take_binary_suffixes_and_stop_at_a_petabyte) {
  cr_assert_eq(ok("64M", SIZE), 64.0 * 1024 * 1024);
  cr_assert_eq(ok("1G", SIZE), 1024.0 * 1024 * 1024);
  cr_assert_eq(ok("2TiB", SIZE), 2 * pow(1024, 4));
  cr_assert_eq(ok("512B", SIZE), 512);
  cr_assert_eq(ok("1.5K", SIZE), 1536);
  cr_assert_eq(ok("1P", SIZE), pow(1024, 5));
  refused("1e30", SIZE, "expected a size from 1 to 1P bytes");
  refused("2P", SIZE, "the nearest allowed is 1P");
  refused("0", SIZE, "the nearest allowed is 1");
  refused("16Q", SIZE, "found 'Q' after the number");
}

Test(num, durations_take_d_h_m_s) {
  cr_assert_eq(ok("30d", DUR), 30 * 86400);
  cr_assert_eq(ok("12h", DUR), 12 * 3600);
  cr_assert_eq(ok("90m", DUR), 90 * 60);
  cr_assert_eq(ok("3600s", DUR), 3600);
  cr_assert_eq(ok("3600", DUR), 3600);
  refused("0", DUR, "expected a duration above 0 and at most 36500d");
  refused("30x", DUR, "found 'x' after the number");
  refused("1e9d", DUR, "the nearest allowed is 36500d");
}

Test(num, describe_reads_like_the_flag) {
  char b[128];
  num_describe(b, sizeof b, (num_range){NUM_REAL, 1, 1e18, false});
  cr_assert_str_eq(b, "a number from 1 to 1e18");
  num_describe(b, sizeof b, SEQ);
  cr_assert_str_eq(b, "an integer from 1 to 1048576");
}

Test(num, long_text_is_cut_in_the_message) {
  char s[400], err[320];
  memset(s, '7', sizeof s - 1);
  s[sizeof s - 1] = 0;
  double v;
  cr_assert_eq(num_parse("--x", s, SEQ, &v, err, sizeof err), -1);
  cr_assert(strstr(err, "...: expected an integer"), "%s", err);
}
