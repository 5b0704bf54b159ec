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
  if (a < 1e-6)
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

void units_usd(char *buf, size_t n, double usd) {
  double a = fabs(usd);
  int digits = 2;
  if (a > 0 && a < 1) {
    /* three significant figures: 0.0123 -> 4 decimals */
    digits = 2 - (int)floor(log10(a));
    if (digits > 15) digits = 15;
  }
  snprintf(buf, n, "%s$%.*f", usd < 0 ? "-" : "", digits, a);
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
