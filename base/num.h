/*
** num.h -- numbers typed by a person on the command line: one parser for
** counts, reals, sizes and durations, each with the range it may take.
**
** Every numeric flag reads through here so that "12x", "nan", "inf", "-3",
** "1e30" and "0x10" are refused the same way, with one message that names
** the flag, the text given, the range allowed and the nearest value in it:
**   --seq 10000000: expected an integer from 1 to 1048576; the nearest allowed is 1048576
** A value outside the range is refused, never clamped or wrapped.
*/
#ifndef TPUSIM_NUM_H
#define TPUSIM_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  NUM_INT,     /* a whole number: "64", "1e6" (an exponent is fine if exact) */
  NUM_REAL,    /* any decimal number: "0.05", "2e12" */
  NUM_BYTES,   /* a size: "64M", "1G", "2TiB", "512B" (K = 1024, as nccl-tests) */
  NUM_SECONDS, /* a duration: "30d", "12h", "90m", "3600s", plain seconds */
} num_kind;

typedef struct {
  num_kind kind;
  double lo, hi; /* allowed values, inclusive; hi at most 2^53 for NUM_INT */
  bool lo_open;  /* lo itself is not allowed (a rate above 0) */
} num_range;

/* Parses s as `name` (the flag, for the message) within r into *out.
** Returns 0, or -1 with "NAME S: expected ..." in err. The text must be
** the number alone: no spaces, no sign other than a leading '-' or '+', no
** hexadecimal, no NaN or infinity. */
int num_parse(const char *name, const char *s, num_range r, double *out, char *err, size_t errn);
/* The same for a NUM_INT from lo to hi (|lo|, |hi| <= 2^53). */
int num_parse_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out, char *err,
                  size_t errn);
/* r's allowed values as a phrase: "an integer from 1 to 1048576",
** "a number above 0 and at most 1", "a size from 1 to 1P bytes". */
void num_describe(char *buf, size_t n, num_range r);

#endif
