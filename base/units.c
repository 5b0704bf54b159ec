/*
** units.c -- see units.h.
*/
#include "units.h"

#include <time.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Three significant digits: enough to compare hardware, short enough for tables. */
static void sig3(char *buf, size_t n, double v, const char *suffix) {
  double a = fabs(v);
  int decimals = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  snprintf(buf, n, "%.*f %s", decimals, v, suffix);
}

/* Scales value by base until it is below base, then prints it with the prefix reached. */
static void scaled(char *buf, size_t n, double value, double base, const char *const *prefix,
                   int nprefix, const char *unit) {
  int i = 0;
  while (fabs(value) >= base - 0.5 && i < nprefix - 1) {
    value /= base;
    i++;
  }
  char suffix[32];
  snprintf(suffix, sizeof suffix, "%s%s", prefix[i], unit);
  if (i == 0 && value == floor(value))
    snprintf(buf, n, "%.0f %s", value, suffix);
  else
    sig3(buf, n, value, suffix);
}

void units_si(char *buf, size_t n, double value, const char *unit) {
  static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E"};
  scaled(buf, n, value, 1000, prefix, 7, unit);
}

void units_bytes(char *buf, size_t n, double bytes) {
  static const char *const prefix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  scaled(buf, n, bytes, 1024, prefix, 7, "B");
}

void units_seconds(char *buf, size_t n, double s) {
  double a = fabs(s);
  if (a == 0)
    snprintf(buf, n, "0 s");
  else if (a < 1e-6)
    sig3(buf, n, s * 1e9, "ns");
  else if (a < 1e-3)
    sig3(buf, n, s * 1e6, "us");
  else if (a < 1)
    sig3(buf, n, s * 1e3, "ms");
  else if (a < 3600)
    sig3(buf, n, s, "s");
  else if (a < 86400 * 2)
    sig3(buf, n, s / 3600, "h");
  else
    sig3(buf, n, s / 86400, "d");
}

/* v rounded to three significant figures (0 stays 0). */
static double round_sig3(double v) {
  if (v == 0 || !isfinite(v)) return v;
  double e = floor(log10(fabs(v))) - 2;
  double q = pow(10, e), r = round(v / q) * q;
  /* 999.5 rounds to 1000: one more digit of magnitude, same rule */
  return e >= 0 ? round(r) : r;
}

/* The decimals that show three significant figures of a (a > 0, rounded). */
static int sig3_decimals(double a) {
  int d = 2 - (int)floor(log10(a));
  return d < 0 ? 0 : d > 15 ? 15 : d;
}

void units_usd(char *buf, size_t n, double usd) {
  double a = fabs(round_sig3(usd));
  const char *sign = usd < 0 && a > 0 ? "-" : "";
  if (!isfinite(a)) {
    snprintf(buf, n, "%s$%f", sign, a);
    return;
  }
  if (a < 1000) {
    snprintf(buf, n, "%s$%.*f", sign, a > 0 ? sig3_decimals(a) : 0, a);
    return;
  }
  /* whole dollars with thousands separators: $1,230, $12,300,000 */
  char digits[64];
  snprintf(digits, sizeof digits, "%.0f", a);
  size_t len = strlen(digits), k = 0;
  char grouped[96];
  for (size_t i = 0; i < len && k + 2 < sizeof grouped; i++) {
    if (i > 0 && (len - i) % 3 == 0) grouped[k++] = ',';
    grouped[k++] = digits[i];
  }
  grouped[k] = 0;
  snprintf(buf, n, "%s$%s", sign, grouped);
}

int units_parse_bytes(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0)) return -1;
  static const char UNITS[] = "KMGTP";
  const char *u = strchr(UNITS, *end ? *end : '-');
  if (*end && u) {
    v *= pow(1024.0, (double)(u - UNITS + 1));
    end++;
    if (*end == 'i') end++;
  }
  if (*end == 'B') end++;
  if (*end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

double units_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
