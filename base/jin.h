/*
** jin.h -- reading JSON input with positions.
**
** cJSON parses but forgets where each value was. Users need "file:line:col",
** so jin keeps the text, tracks the path of the value being read, and when a
** loader reports a problem it re-scans the text for that path to find the
** line and column. The re-scan only happens on error, so the happy path costs
** nothing extra. Every loader of user files (hardware, models, traces) reads
** through this module; cJSON stays behind it and the writers.
*/
#ifndef TPUSIM_JIN_H
#define TPUSIM_JIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "diag.h"

#define JIN_MAX_DEPTH 16

/* key != NULL: object member, index = which occurrence of that key (0 first,
** so a duplicate key can be pointed at); key == NULL: array element index. */
typedef struct {
  const char *key;
  int index;
} jin_seg;

/* Where a translated text's values came from: an HF config.json read as
** a model.json, whose builder's messages should point into the user's file
** (jin.origin). keys[i][0] is a translated value's dotted path, keys[i][1]
** the original's dotted path it was read from. */
typedef struct jin_origin {
  const char *file; /* the original's name */
  const char *text; /* its text (borrowed) */
  size_t len;
  char *(*keys)[2];
  int n;
} jin_origin;

typedef struct jin {
  const char *file; /* borrowed: the name used in messages */
  char *text;       /* owned copy, NUL-terminated */
  size_t len;
  cJSON *root;
  diag *dg; /* borrowed */
  jin_seg path[JIN_MAX_DEPTH];
  int depth;
  int errors; /* reported through this reader */
  /* A part of a larger file (jin_open_part): the line and column the part
  ** begins at in the file (0: the text is the whole file), and how many
  ** leading segments of path lead to the part (named in messages, not
  ** searched for in the part's text). */
  int line0, col0, prefix;
  /* a translated text (NULL: none, the usual): reports go to the
  ** original, at the key a translated value was read from, else to the
  ** file as a whole with the translated field named (borrowed) */
  const jin_origin *origin;
} jin;

/* Reads a whole file (at most max_bytes) into a malloc'd NUL-terminated buffer.
** On failure reports to dg and returns NULL. */
char *jin_read_file(const char *path, size_t max_bytes, size_t *len, diag *dg);

/* Reads a whole regular file, checking it before reading a byte: a
** directory, device, pipe or socket is refused (/dev/zero would otherwise be
** read until max_bytes, a FIFO would block), and so is a file larger than
** max_bytes, with a message that gives its size, the limit, and why (what:
** "a trace"; why: the reason for the limit, or NULL). The buffer is
** allocated once, at the file's size, NUL-terminated. NULL after reporting. */
char *jin_read_regular(const char *path, size_t max_bytes, const char *what, const char *why,
                       size_t *len, diag *dg);

/* Parses text (copied). Returns 0, or -1 after reporting the syntax error,
** then holding nothing (jin_close is harmless, not needed). */
int jin_open(jin *j, const char *file, const char *text, size_t len, diag *dg);
/* Parses one value of a larger file on its own (an element of a huge
** array, so the file's whole tree is never built): text[0, len) begins at
** line:col of file and is reached by the nprefix segments of prefix (keys
** borrowed). Messages give positions in the whole file and paths from its
** root; jin_error_at's dotted paths are relative to the part. */
int jin_open_part(jin *j, const char *file, const char *text, size_t len, int line, int col,
                  const jin_seg *prefix, int nprefix, diag *dg);
/* The offset just past the JSON value that begins at or after off
** (whitespace skipped); the value is skipped, not checked; len when it is
** not closed. */
size_t jin_skip_value(const char *text, size_t len, size_t off);
void jin_close(jin *j);

void jin_push_key(jin *j, const char *key, int occurrence);
void jin_push_index(jin *j, int index);
void jin_pop(jin *j);
/* Writes the current path as "chip.hbm_bytes" or "layers[3].kind". */
void jin_path(const jin *j, char *buf, size_t n);

/* Reports at the current path; at_key points at the member's key rather than
** its value (for unknown or duplicate fields). */
void jin_error(jin *j, int at_key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reports at a dotted path of object keys ("system.scale_up.max_slice_chips"),
** for checks that run after the walk. */
void jin_error_at(jin *j, const char *dotted, int at_key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Byte offset of the value (or key) at path in text, or SIZE_MAX. */
size_t jin_locate(const char *text, size_t len, const jin_seg *path, int n, int at_key);
/* 1-based line and column of a byte offset. */
void jin_line_col(const char *text, size_t off, int *line, int *col);

/* ---- typed members, for loaders of user files ----
** Each reads obj[key] at the current path. Returns 1 when present and valid
** (*out set), 0 when absent and not required (*out untouched), -1 after
** reporting a wrong type, a value out of [min, max], or a missing required
** member. */
int jin_get_int(jin *j, const cJSON *obj, const char *key, int64_t min, int64_t max,
                bool required, int64_t *out);
int jin_get_num(jin *j, const cJSON *obj, const char *key, double min, double max,
                bool required, double *out);
int jin_get_str(jin *j, const cJSON *obj, const char *key, bool required, const char **out);
int jin_get_bool(jin *j, const cJSON *obj, const char *key, bool required, bool *out);
/* choices is NULL-terminated; *out is the index. */
int jin_get_enum(jin *j, const cJSON *obj, const char *key, const char *const *choices,
                 bool required, int *out);
/* An object or array member (NULL when absent or of the wrong type, the
** latter reported). */
const cJSON *jin_get_object(jin *j, const cJSON *obj, const char *key, bool required);
const cJSON *jin_get_array(jin *j, const cJSON *obj, const char *key, bool required);
/* Reports every member of obj whose key is in none of the NULL-terminated
** lists (with a "did you mean"), and every duplicate key. Pass a second
** list (or NULL) for keys shared by all objects of a kind. Returns the
** number of problems. */
int jin_only(jin *j, const cJSON *obj, const char *const *allowed, const char *const *also);
/* Reports every key given twice in an object at or under obj (where no
** fixed list of keys applies, as in a HuggingFace config.json, whose
** Python reader keeps the last silently). Returns the number reported. */
int jin_no_duplicates(jin *j, const cJSON *obj);

const char *jin_type_name(const cJSON *v);
/* Appends a JSON-ish rendering of v (for "got ..." in messages), truncated. */
void jin_describe(const cJSON *v, char *buf, size_t n);

#endif
