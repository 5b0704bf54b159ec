/*
** num.c -- numbers typed on the command line (num.h).
**
** The digits are scanned here rather than left to strtod alone: strtod
** also reads "nan", "inf", hexadecimal and leading spaces, none of which is
** a number a person means on a command line. strtod then converts exactly
** the span scanned.
*/
#include "num.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strutil.h"

/* Past "[+-]digits[.digits][e[+-]digits]", or NULL when there is no digit.
** An 'e' without digits after it is left for the caller to find. */
static const char *scan_decimal(const char *s) {
  const char *p = s;
  int digits = 0;
  if (*p == '+' || *p == '-') p++;
  for (; isdigit((unsigned char)*p); p++) digits++;
  if (*p == '.')
    for (p++; isdigit((unsigned char)*p); p++) digits++;
  if (!digits) return NULL;
  if (*p == 'e' || *p == 'E') {
    const char *q = p + 1;
    if (*q == '+' || *q == '-') q++;
    if (isdigit((unsigned char)*q)) {
      while (isdigit((unsigned char)*q)) q++;
      p = q;
    }
  }
  return p;
}

/* The multiplier a suffix stands for, moving *end past it; 0 when the
** kind takes no such suffix. */
static double suffix_scale(num_kind kind, const char **end) {
  const char *p = *end;
  double scale = 1;
  if (kind == NUM_BYTES) {
    static const char UNITS[] = "KMGTP";
    const char *u = *p ? strchr(UNITS, *p) : NULL;
    if (u) {
      scale = pow(1024.0, (double)(u - UNITS + 1));
      p++;
      if (*p == 'i') p++;
    }
    if (*p == 'B') p++;
  } else if (kind == NUM_SECONDS && *p && strchr("dhms", *p)) {
    scale = *p == 'd' ? 86400 : *p == 'h' ? 3600 : *p == 'm' ? 60 : 1;
    p++;
  }
  *end = p;
  return scale;
}

/* v as %g writes it without the exponent's '+' and leading zeros ("1e18"),
** when that is exact; else NULL. */
static const char *short_g(char *buf, size_t n, double v) {
  char g[32];
  snprintf(g, sizeof g, "%g", v);
  if (strtod(g, NULL) != v) return NULL;
  char *e = strchr(g, 'e');
  if (e) {
    int x = atoi(e + 1);
    *e = 0;
    snprintf(buf, n, "%se%d", g, x);
  } else {
    snprintf(buf, n, "%s", g);
  }
  return buf;
}

/* A bound as the kind reads it: "1048576", "1e18", "0.05", "1P", "3650d". */
static void fmt_bound(char *buf, size_t n, num_kind kind, double v) {
  if (kind == NUM_INT || kind == NUM_REAL) {
    if (!short_g(buf, n, v)) snprintf(buf, n, kind == NUM_INT ? "%.0f" : "%.17g", v);
  } else if (kind == NUM_BYTES && v >= 1024) {
    static const char UNITS[] = "KMGTP";
    int u = 0;
    while (u < 5 && fmod(v, pow(1024.0, u + 1)) == 0) u++;
    if (u == 0) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g%c", v / pow(1024.0, u), UNITS[u - 1]);
  } else if (kind == NUM_SECONDS) {
    static const double S[] = {86400, 3600, 60};
    static const char U[] = "dhm";
    for (int i = 0; i < 3; i++)
      if (v >= S[i] && fmod(v, S[i]) == 0) {
        snprintf(buf, n, "%gd", v / S[i]);
        buf[strlen(buf) - 1] = U[i];
        return;
      }
    if (v == 0) snprintf(buf, n, "0");
    else snprintf(buf, n, "%gs", v);
  } else {
    snprintf(buf, n, "%.0f", v); /* bytes below 1K */
  }
}

void num_describe(char *buf, size_t n, num_range r) {
  static const char *const WHAT[] = {"an integer", "a number", "a size", "a duration"};
  static const char *const AFTER[] = {"", "", " bytes (K, M, G, T, P: powers of 1024)",
                                      " (s, m, h or d)"};
  char lo[32], hi[32];
  fmt_bound(lo, sizeof lo, r.kind, r.lo);
  fmt_bound(hi, sizeof hi, r.kind, r.hi);
  snprintf(buf, n, r.lo_open ? "%s above %s and at most %s%s" : "%s from %s to %s%s",
           WHAT[r.kind], lo, hi, AFTER[r.kind]);
}

/* "NAME S: expected <range>; <found>" into err ("NAME: ..." for an empty
** S); returns -1. */
static int refuse(const char *name, const char *s, num_range r, const char *found, char *err,
                  size_t errn) {
  char want[128];
  num_describe(want, sizeof want, r);
  return str_errf(err, errn, "%s%s%.64s%s: expected %s; %s", name, *s ? " " : "", s,
                  strlen(s) > 64 ? "..." : "", want, found);
}

/* What lies outside: the nearest allowed value, or, below an open bound
** (which has no nearest value), that bound. */
static void outside(char *buf, size_t n, num_range r, double v) {
  char b[32];
  bool above = !(v <= r.hi); /* inf too */
  fmt_bound(b, sizeof b, r.kind, above ? r.hi : r.lo);
  if (above || !r.lo_open) snprintf(buf, n, "the nearest allowed is %s", b);
  else snprintf(buf, n, "found a value not above %s", b);
}

int num_parse(const char *name, const char *s, num_range r, double *out, char *err, size_t errn) {
  char found[160];
  const char *end = s ? scan_decimal(s) : NULL;
  if (!end) {
    snprintf(found, sizeof found, s && *s ? "found no number" : "found nothing");
    return refuse(name, s ? s : "", r, found, err, errn);
  }
  char digits[128];
  size_t len = (size_t)(end - s);
  if (len >= sizeof digits) return refuse(name, s, r, "found too many digits", err, errn);
  memcpy(digits, s, len);
  digits[len] = 0;
  double v = strtod(digits, NULL);
  v *= suffix_scale(r.kind, &end);
  if (*end) {
    snprintf(found, sizeof found, "found '%.32s' after the number", end);
    return refuse(name, s, r, found, err, errn);
  }
  if (r.kind == NUM_INT && isfinite(v) && v != floor(v)) {
    char near[64];
    fmt_bound(near, sizeof near, NUM_INT, fmin(fmax(round(v), r.lo), r.hi));
    snprintf(found, sizeof found, "found a fraction; the nearest allowed is %s", near);
    return refuse(name, s, r, found, err, errn);
  }
  /* inf (an exponent past double's range) lands here as "above hi" */
  if (!(v <= r.hi) || v < r.lo || (r.lo_open && v <= r.lo)) {
    outside(found, sizeof found, r, v);
    return refuse(name, s, r, found, err, errn);
  }
  *out = v;
  return 0;
}

int num_parse_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out, char *err,
                  size_t errn) {
  double v;
  num_range r = {NUM_INT, (double)lo, (double)hi, false};
  if (num_parse(name, s, r, &v, err, errn) != 0) return -1;
  *out = (int64_t)v; /* exact: whole and within +-2^53 */
  return 0;
}
