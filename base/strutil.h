/*
** strutil.h -- small string helpers shared by loaders and the command line.
*/
#ifndef TPUSIM_STRUTIL_H
#define TPUSIM_STRUTIL_H

#include <stddef.h>

/* Levenshtein distance, capped: returns cap+1 once it is certain to exceed cap. */
int str_distance(const char *a, const char *b, int cap);
/* The closest of n candidates to word, or NULL when none is close enough to
** be a plausible typo (distance <= 1/3 of the word's length, at least 1). */
const char *str_suggest(const char *word, const char *const *candidates, int n);
/* Formats a message into err (when err and errn are set) and returns -1:
** the `return str_errf(err, errn, "...", ...)` of functions that report
** through an error buffer. */
int str_errf(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The indefinite article before word, "a" or "an", by its first sound: an
** acronym read letter by letter (all capitals, or no vowel: "AMD", "mlp")
** by its first letter's name ("an AMD", "a TPU", "an NVIDIA"), any other
** word by its first letter, with the usual exceptions ("a unit", "an hour"). */
const char *str_article(const char *word);
/* Copies at most n-1 bytes and terminates; returns 0 if it fit, -1 if cut. */
int str_copy(char *dst, size_t n, const char *src);

#endif
