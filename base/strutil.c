/*
** strutil.c -- see strutil.h.
*/
#include "strutil.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int str_distance(const char *a, const char *b, int cap) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return cap + 1;
  if ((la > lb ? la - lb : lb - la) > (size_t)cap) return cap + 1;
  int row[65];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    int best = row[0];
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int sub = diag + (a[i - 1] != b[j - 1]);
      int del = row[j] + 1, ins = row[j - 1] + 1;
      int v = sub < del ? sub : del;
      row[j] = v < ins ? v : ins;
      diag = up;
      if (row[j] < best) best = row[j];
    }
    if (best > cap) return cap + 1;
  }
  return row[lb] <= cap ? row[lb] : cap + 1;
}

const char *str_suggest(const char *word, const char *const *candidates, int n) {
  /* A completion ("h100" for "h100-sxm") beats a near miss ("h200"); of
  ** several, the one shortest by a margin, the least specific ("h100-sxm"
  ** before the variant "h100-96gb"); a tie is no suggestion of its own. */
  const char *completion = NULL;
  size_t shortest = 0;
  int ties = 0;
  if (strlen(word) >= 3)
    for (int i = 0; i < n; i++)
      if (strncmp(candidates[i], word, strlen(word)) == 0 && strcmp(candidates[i], word) != 0) {
        size_t l = strlen(candidates[i]);
        if (!completion || l < shortest) {
          completion = candidates[i];
          shortest = l;
          ties = 0;
        } else if (l == shortest) {
          ties++;
        }
      }
  if (completion && ties == 0) return completion;
  int cap = (int)strlen(word) / 3;
  if (cap < 1) cap = 1;
  const char *best = NULL;
  int best_d = cap + 1;
  for (int i = 0; i < n; i++) {
    int d = str_distance(word, candidates[i], cap);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  return best;
}

int str_copy(char *dst, size_t n, const char *src) {
  size_t l = strlen(src);
  if (l >= n) {
    memcpy(dst, src, n - 1);
    dst[n - 1] = '\0';
    return -1;
  }
  memcpy(dst, src, l + 1);
  return 0;
}

int str_errf(char *err, size_t errn, const char *fmt, ...) {
  if (err && errn) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Letters whose names begin with a vowel sound: "ay", "ee", "ef", "aitch",
** "eye", "el", "em", "en", "oh", "ar", "es", "ex". */
static bool letter_name_vowel(char c) { return c && strchr("AEFHILMNORSX", toupper((unsigned char)c)); }

/* spelled as letters: all capitals (AMD, NVIDIA) or no vowel at all (mlp) */
static bool read_as_letters(const char *w) {
  bool caps = true, vowel = false;
  for (const char *p = w; *p && *p != ' ' && *p != '-'; p++) {
    if (islower((unsigned char)*p)) caps = false;
    if (strchr("aeiouyAEIOUY", *p)) vowel = true;
  }
  return (caps && isupper((unsigned char)w[0])) || !vowel;
}

const char *str_article(const char *word) {
  if (!word || !*word) return "a";
  if (read_as_letters(word)) return letter_name_vowel(word[0]) ? "an" : "a";
  /* vowel letters that sound as consonants ("a unit", "a one") and silent h */
  static const char *const A[] = {"uni", "use", "usu", "ura", "ure", "uti", "eu", "one", "once"};
  static const char *const AN[] = {"hour", "honest", "honor", "heir"};
  for (size_t i = 0; i < sizeof A / sizeof *A; i++)
    if (strncasecmp(word, A[i], strlen(A[i])) == 0) return "a";
  for (size_t i = 0; i < sizeof AN / sizeof *AN; i++)
    if (strncasecmp(word, AN[i], strlen(AN[i])) == 0) return "an";
  return strchr("aeiouAEIOU", word[0]) ? "an" : "a";
}
