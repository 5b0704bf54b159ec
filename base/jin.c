/*
** jin.c -- see jin.h.
*/
#include "jin.h"

#include <math.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strutil.h"
#include "units.h"

char *jin_read_file(const char *path, size_t max_bytes, size_t *len, diag *dg) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    diag_error(dg, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n > max_bytes) break;
    if (n == cap) {
      cap *= 2;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
      } else {
        buf = nb;
      }
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf) {
    diag_error(dg, path, 0, 0, NULL, "out of memory reading the file");
    return NULL;
  }
  if (err) {
    free(buf);
    diag_error(dg, path, 0, 0, NULL, "read error (is it a directory?)");
    return NULL;
  }
  if (n > max_bytes) {
    free(buf);
    diag_error(dg, path, 0, 0, NULL, "file is larger than %zu bytes; not a file tpusim reads",
               max_bytes);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a pipe (FIFO)";
  if (S_ISSOCK(m)) return "a socket";
  return "not a plain file";
}

/* fd's whole contents, at most cap bytes, into buf; -1 on a read error. */
static ssize_t read_all(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    n += (size_t)got;
  }
  return (ssize_t)n;
}

/* The size and kind are checked on the open descriptor, so the file checked
** is the file read; O_NONBLOCK keeps the open of a FIFO from waiting for a
** writer before it can be refused. */
char *jin_read_regular(const char *path, size_t max_bytes, const char *what, const char *why,
                       size_t *len, diag *dg) {
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    diag_error(dg, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
    return NULL;
  }
  struct stat st;
  char lim[32], size[32];
  units_bytes(lim, sizeof lim, (double)max_bytes);
  int rc = fstat(fd, &st);
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    diag_error(dg, path, 0, 0, NULL, "%s, not a regular file; expected %s (a file of at most %s)"
               "; nothing was read", rc != 0 ? strerror(errno) : file_kind(st.st_mode), what,
               lim);
    close(fd);
    return NULL;
  }
  if ((uintmax_t)st.st_size > max_bytes) {
    units_bytes(size, sizeof size, (double)st.st_size);
    diag_error(dg, path, 0, 0, NULL, "%s (%jd bytes), larger than the %s limit for %s%s%s; "
               "nothing was read", size, (intmax_t)st.st_size, lim, what, why ? ": " : "",
               why ? why : "");
    close(fd);
    return NULL;
  }
  /* one byte more than the size, to see a file that grew since fstat */
  size_t cap = (size_t)st.st_size + 1;
  char *buf = malloc(cap + 1);
  if (!buf) {
    diag_error(dg, path, 0, 0, NULL, "out of memory reading the file (%jd bytes)",
               (intmax_t)st.st_size);
    close(fd);
    return NULL;
  }
  ssize_t n = read_all(fd, buf, cap);
  int err = errno;
  close(fd);
  if (n < 0 || (size_t)n == cap) {
    free(buf);
    diag_error(dg, path, 0, 0, NULL, "%s", n < 0 ? strerror(err)
                                                : "changed while being read (it grew); try again");
    return NULL;
  }
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

void jin_line_col(const char *text, size_t off, int *line, int *col) {
  int l = 1, c = 1;
  for (size_t i = 0; i < off && text[i]; i++) {
    if (text[i] == '\n') {
      l++;
      c = 1;
    } else {
      c++;
    }
  }
  *line = l;
  *col = c;
}

/* ---- nesting past the parser's limit ---- */

/* One open container while scanning for the nesting limit. */
typedef struct {
  bool array;
  bool want_key; /* an object between '{' or ',' and the next key */
  int index;     /* array: the element being read */
  size_t key, key_len; /* object: the member being read (offsets into the text) */
} nest_frame;

/* Appends frames[0..n)'s members as a path, "ops[0][0].x", to buf. */
static void nest_path(const char *t, const nest_frame *f, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && at + 1 < cap; i++) {
    int w = f[i].array ? snprintf(buf + at, cap - at, "[%d]", f[i].index)
                       : snprintf(buf + at, cap - at, "%s%.*s", at ? "." : "",
                                  (int)f[i].key_len, t + f[i].key);
    if (w < 0) break;
    at += (size_t)w;
  }
  if (at >= cap) at = cap - 1;
}

/* Shortens a long path to its first and last characters around "...". */
static void abbreviate(char *p, size_t keep_head, size_t keep_tail) {
  size_t l = strlen(p);
  if (l <= keep_head + keep_tail + 3) return;
  memmove(p + keep_head + 3, p + l - keep_tail, keep_tail + 1);
  memcpy(p + keep_head, "...", 3);
}

/* cJSON refuses more than CJSON_NESTING_LIMIT nested arrays and objects,
** which only says "invalid syntax" at some column. When that is why the
** parse failed, report what nested too deep, where, the limit and the path
** down to it. Returns true after reporting. */
static bool report_too_deep(jin *j) {
  nest_frame *f = malloc((CJSON_NESTING_LIMIT + 1) * sizeof *f);
  if (!f) return false;
  const char *t = j->text;
  int depth = 0;
  bool found = false;
  for (size_t p = 0; p < j->len && !found; p++) {
    char c = t[p];
    nest_frame *top = depth ? &f[depth - 1] : NULL;
    if (c == '"') {
      size_t start = ++p;
      while (p < j->len && t[p] != '"') p += t[p] == '\\' ? 2 : 1;
      if (top && !top->array && top->want_key)
        top->key = start, top->key_len = p - start, top->want_key = false;
    } else if (c == ',' && top) {
      if (top->array) top->index++;
      else top->want_key = true;
    } else if (c == '{' || c == '[') {
      if (depth == CJSON_NESTING_LIMIT) {
        char path[4096];
        nest_path(t, f, depth, path, sizeof path);
        abbreviate(path, 48, 24);
        int line, col;
        jin_line_col(t, p, &line, &col);
        diag_error(j->dg, j->file, line, col, path,
                   "this %s is nested %d levels deep: past the JSON parser's limit of %d "
                   "(cJSON's CJSON_NESTING_LIMIT, which keeps a file from exhausting the "
                   "stack; tpusim's own files nest fewer than 10 levels)",
                   c == '{' ? "object" : "array", depth + 1, CJSON_NESTING_LIMIT);
        found = true;
      } else {
        f[depth++] = (nest_frame){.array = c == '[', .want_key = c == '{'};
      }
    } else if ((c == '}' || c == ']') && depth) {
      depth--;
    }
  }
  free(f);
  return found;
}
/* line:col in the part -> line:col in the whole file (a part of one line
** continues its first line's columns). */
static void whole_file_pos(const jin *j, int *line, int *col) {
  if (j->line0 <= 0 || *line <= 0) return;
  if (*line == 1) *col += j->col0 - 1;
  *line += j->line0 - 1;
}

static int parse_text(jin *j, const char *file, const char *text, size_t len, diag *dg);

/* A text that does not parse holds nothing afterwards (its copy and any
** tree freed), so a caller that returns at once leaks nothing and one that
** calls jin_close anyway frees nothing twice. */
static int parsed(jin *j, int rc) {
  if (rc != 0) jin_close(j);
  return rc;
}

int jin_open(jin *j, const char *file, const char *text, size_t len, diag *dg) {
  memset(j, 0, sizeof *j);
  return parsed(j, parse_text(j, file, text, len, dg));
}

int jin_open_part(jin *j, const char *file, const char *text, size_t len, int line, int col,
                  const jin_seg *prefix, int nprefix, diag *dg) {
  memset(j, 0, sizeof *j);
  j->line0 = line > 0 ? line : 1;
  j->col0 = col > 0 ? col : 1;
  for (int i = 0; i < nprefix && i < JIN_MAX_DEPTH; i++) j->path[i] = prefix[i];
  j->depth = j->prefix = nprefix;
  return parsed(j, parse_text(j, file, text, len, dg));
}

static int parse_text(jin *j, const char *file, const char *text, size_t len, diag *dg) {
  j->file = file;
  j->dg = dg;
  j->text = malloc(len + 1);
  if (!j->text) {
    diag_error(dg, file, 0, 0, NULL, "out of memory");
    return -1;
  }
  memcpy(j->text, text, len);
  j->text[len] = '\0';
  j->len = len;
  if (memchr(j->text, '\0', len)) {
    diag_error(dg, file, 0, 0, NULL, "contains a NUL byte; expected JSON text");
    j->errors++;
    return -1;
  }
  size_t i = 0;
  while (i < len && strchr(" \t\r\n", j->text[i])) i++;
  if (i == len) {
    diag_error(dg, file, 1, 1, NULL, "empty file; expected a JSON object");
    j->errors++;
    return -1;
  }
  const char *end = NULL;
  /* Trailing content is checked here, not by cJSON: its own check trips
  ** over trailing whitespace when given an explicit length. */
  j->root = cJSON_ParseWithLengthOpts(j->text, len, &end, 0);
  if (j->root && end) {
    size_t off = (size_t)(end - j->text);
    while (off < len && strchr(" \t\r\n", j->text[off])) off++;
    if (off < len) {
      int line, col;
      jin_line_col(j->text, off, &line, &col);
      whole_file_pos(j, &line, &col);
      diag_error(dg, file, line, col, NULL, "unexpected text after the JSON value");
      j->errors++;
      return -1;
    }
  }
  if (!j->root && report_too_deep(j)) {
    j->errors++;
    return -1;
  }
  if (!j->root) {
    size_t off = end ? (size_t)(end - j->text) : 0;
    if (off > len) off = len;
    /* cJSON points near, not at, the end of a cut-off file; an unclosed
    ** string or bracket says "truncated" more usefully than "invalid". */
    int depth = 0, in_string = 0;
    for (size_t p = 0; p < len; p++) {
      char ch = j->text[p];
      if (in_string) {
        if (ch == '\\') p++;
        else if (ch == '"') in_string = 0;
      } else if (ch == '"') {
        in_string = 1;
      } else if (ch == '{' || ch == '[') {
        depth++;
      } else if (ch == '}' || ch == ']') {
        depth--;
      }
    }
    if (in_string || depth > 0) off = len;
    int line, col;
    jin_line_col(j->text, off, &line, &col);
    whole_file_pos(j, &line, &col);
    const char *what = off >= len ? "unexpected end of input (truncated?)"
                                  : "invalid JSON syntax";
    char near[24] = "";
    if (off < len) {
      size_t k = 0;
      for (size_t p = off; p < len && k < 16 && j->text[p] != '\n'; p++)
        near[k++] = j->text[p];
      near[k] = '\0';
    }
    if (*near)
      diag_error(dg, file, line, col, NULL, "%s near '%s'", what, near);
    else
      diag_error(dg, file, line, col, NULL, "%s", what);
    j->errors++;
    return -1;
  }
  return 0;
}

void jin_close(jin *j) {
  cJSON_Delete(j->root);
  free(j->text);
  j->root = NULL;
  j->text = NULL;
}

void jin_push_key(jin *j, const char *key, int occurrence) {
  if (j->depth < JIN_MAX_DEPTH) j->path[j->depth] = (jin_seg){key, occurrence};
  j->depth++;
}

void jin_push_index(jin *j, int index) {
  if (j->depth < JIN_MAX_DEPTH) j->path[j->depth] = (jin_seg){NULL, index};
  j->depth++;
}

void jin_pop(jin *j) {
  if (j->depth > 0) j->depth--;
}

void jin_path(const jin *j, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = '\0';
  int depth = j->depth < JIN_MAX_DEPTH ? j->depth : JIN_MAX_DEPTH;
  for (int i = 0; i < depth && at < n; i++) {
    const jin_seg *s = &j->path[i];
    int w;
    if (s->key)
      w = snprintf(buf + at, n - at, "%s%s", i ? "." : "", s->key);
    else
      w = snprintf(buf + at, n - at, "[%d]", s->index);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* ---- the locator: a scanner that skips values without building them ---- */

static size_t skip_ws(const char *t, size_t len, size_t p) {
  while (p < len && (t[p] == ' ' || t[p] == '\t' || t[p] == '\n' || t[p] == '\r')) p++;
  return p;
}

/* p at the opening quote; returns the offset just past the closing quote. */
static size_t skip_string(const char *t, size_t len, size_t p) {
  p++;
  while (p < len && t[p] != '"') p += (t[p] == '\\') ? 2 : 1;
  return p < len ? p + 1 : len;
}

static size_t skip_value(const char *t, size_t len, size_t p) {
  p = skip_ws(t, len, p);
  if (p >= len) return len;
  if (t[p] == '"') return skip_string(t, len, p);
  if (t[p] == '{' || t[p] == '[') {
    /* Depth counting suffices: strings are skipped whole, so brackets
    ** inside them do not count. */
    int depth = 0;
    while (p < len) {
      char c = t[p];
      if (c == '"') {
        p = skip_string(t, len, p);
        continue;
      }
      if (c == '{' || c == '[') depth++;
      if (c == '}' || c == ']') {
        depth--;
        if (depth == 0) return p + 1;
      }
      p++;
    }
    return len;
  }
  while (p < len && !strchr(",}] \t\r\n", t[p])) p++;
  return p;
}

/* Compares the raw JSON string at [p, end) (between the quotes) with key.
** Keys with escapes are compared after decoding the simple escapes. */
static int key_equals(const char *t, size_t p, size_t end, const char *key) {
  size_t k = 0;
  while (p < end) {
    char c = t[p++];
    if (c == '\\' && p < end) {
      char e = t[p++];
      switch (e) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'u': return 0; /* not worth decoding for locating a key */
      default: c = e;
      }
    }
    if (key[k] != c) return 0;
    k++;
  }
  return key[k] == '\0';
}

size_t jin_skip_value(const char *text, size_t len, size_t off) {
  return skip_value(text, len, off);
}

size_t jin_locate(const char *text, size_t len, const jin_seg *path, int n, int at_key) {
  size_t p = skip_ws(text, len, 0);
  for (int i = 0; i < n; i++) {
    const jin_seg *s = &path[i];
    int last = (i == n - 1);
    if (p >= len) return SIZE_MAX;
    if (s->key) {
      if (text[p] != '{') return SIZE_MAX;
      p = skip_ws(text, len, p + 1);
      int seen = 0, found = 0;
      while (p < len && text[p] == '"') {
        size_t ks = p;
        size_t ke = skip_string(text, len, p);
        p = skip_ws(text, len, ke);
        if (p < len && text[p] == ':') p = skip_ws(text, len, p + 1);
        size_t vs = p;
        if (key_equals(text, ks + 1, ke - 1, s->key) && seen++ == s->index) {
          if (last) return at_key ? ks : vs;
          p = vs;
          found = 1;
          break;
        }
        p = skip_ws(text, len, skip_value(text, len, vs));
        if (p < len && text[p] == ',') p = skip_ws(text, len, p + 1);
      }
      if (!found) return SIZE_MAX;
    } else {
      if (text[p] != '[') return SIZE_MAX;
      p = skip_ws(text, len, p + 1);
      for (int e = 0; e < s->index; e++) {
        p = skip_ws(text, len, skip_value(text, len, p));
        if (p >= len || text[p] != ',') return SIZE_MAX;
        p = skip_ws(text, len, p + 1);
      }
      if (p >= len || text[p] == ']') return SIZE_MAX;
      if (last) return p;
    }
  }
  return p;
}

/* A report on a translated text, placed in the original (jin_origin):
** at the key the value was read from when the path (or its first key) is
** one, else on the file, the translated field named. */
static void report_origin(jin *j, const jin_seg *path, int n, const char *pathstr,
                          const char *body) {
  const jin_origin *o = j->origin;
  const char *from = NULL;
  for (int pass = 0; pass < 2 && !from && n > 0 && path[0].key; pass++)
    for (int i = 0; i < o->n && !from; i++)
      if (strcmp(o->keys[i][0], pass == 0 ? pathstr : path[0].key) == 0) from = o->keys[i][1];
  int line = 0, col = 0;
  char where[256] = "";
  if (from) {
    char copy[256], *save = NULL;
    snprintf(copy, sizeof copy, "%s", from);
    jin_seg segs[JIN_MAX_DEPTH];
    int k = 0;
    for (char *t = strtok_r(copy, ".", &save); t && k < JIN_MAX_DEPTH; t = strtok_r(NULL, ".", &save))
      segs[k++] = (jin_seg){t, 0};
    size_t off = jin_locate(o->text, o->len, segs, k, 0);
    if (off != SIZE_MAX) jin_line_col(o->text, off, &line, &col);
    snprintf(where, sizeof where, "%s", from);
  } else if (pathstr && *pathstr) {
    snprintf(where, sizeof where, "%s (as model.json)", pathstr);
  }
  diag_error(j->dg, o->file, line, col, where, "%s", body);
}

/* path[0, n) is searched for in j's text: a part's prefix is left out by
** the caller. */
static void report(jin *j, const jin_seg *path, int n, int at_key, const char *pathstr,
                   const char *fmt, va_list ap) {
  char body[1024];
  vsnprintf(body, sizeof body, fmt, ap);
  if (j->origin) {
    report_origin(j, path, n, pathstr, body);
    j->errors++;
    return;
  }
  int line = 0, col = 0;
  size_t off = jin_locate(j->text, j->len, path, n, at_key);
  if (off != SIZE_MAX) jin_line_col(j->text, off, &line, &col);
  whole_file_pos(j, &line, &col);
  diag_error(j->dg, j->file, line, col, pathstr, "%s", body);
  j->errors++;
}

void jin_error(jin *j, int at_key, const char *fmt, ...) {
  char pathstr[256];
  jin_path(j, pathstr, sizeof pathstr);
  int n = j->depth < JIN_MAX_DEPTH ? j->depth : JIN_MAX_DEPTH;
  int skip = j->prefix < n ? j->prefix : n;
  va_list ap;
  va_start(ap, fmt);
  report(j, j->path + skip, n - skip, at_key, pathstr, fmt, ap);
  va_end(ap);
}

void jin_error_at(jin *j, const char *dotted, int at_key, const char *fmt, ...) {
  char copy[256], *save = NULL;
  snprintf(copy, sizeof copy, "%s", dotted);
  jin_seg segs[JIN_MAX_DEPTH];
  int n = 0;
  for (char *tok = strtok_r(copy, ".", &save); tok && n < JIN_MAX_DEPTH;
       tok = strtok_r(NULL, ".", &save))
    segs[n++] = (jin_seg){tok, 0};
  va_list ap;
  va_start(ap, fmt);
  report(j, segs, n, at_key, dotted, fmt, ap);
  va_end(ap);
}

const char *jin_type_name(const cJSON *v) {
  if (!v) return "nothing";
  if (cJSON_IsNull(v)) return "null";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "an invalid value";
}

void jin_describe(const cJSON *v, char *buf, size_t n) {
  if (cJSON_IsNumber(v)) {
    snprintf(buf, n, "%.6g", v->valuedouble);
  } else if (cJSON_IsString(v)) {
    snprintf(buf, n, "\"%.40s%s\"", v->valuestring, strlen(v->valuestring) > 40 ? "..." : "");
  } else if (cJSON_IsBool(v)) {
    snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
  } else {
    snprintf(buf, n, "%s", jin_type_name(v));
  }
}

/* ---- typed members ---- */

/* Finds obj[key]; reports a missing required member at obj's place. */
static const cJSON *member(jin *j, const cJSON *obj, const char *key, bool required) {
  const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  if (!v && required) jin_error(j, 1, "missing field '%s'", key);
  return v;
}

static int bad_value(jin *j, const char *key, const cJSON *v, const char *want) {
  char got[96];
  jin_describe(v, got, sizeof got);
  jin_push_key(j, key, 0);
  jin_error(j, 0, "expected %s, got %s", want, got);
  jin_pop(j);
  return -1;
}

int jin_get_int(jin *j, const cJSON *obj, const char *key, int64_t min, int64_t max,
                bool required, int64_t *out) {
  const cJSON *v = member(j, obj, key, required);
  if (!v) return required ? -1 : 0;
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max) {
    char want[128];
    snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)min, (long long)max);
    return bad_value(j, key, v, want);
  }
  *out = (int64_t)d;
  return 1;
}

int jin_get_num(jin *j, const cJSON *obj, const char *key, double min, double max,
                bool required, double *out) {
  const cJSON *v = member(j, obj, key, required);
  if (!v) return required ? -1 : 0;
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!isfinite(d) || d < min || d > max) {
    char want[128];
    snprintf(want, sizeof want, "a number in [%g, %g]", min, max);
    return bad_value(j, key, v, want);
  }
  *out = d;
  return 1;
}

int jin_get_str(jin *j, const cJSON *obj, const char *key, bool required, const char **out) {
  const cJSON *v = member(j, obj, key, required);
  if (!v) return required ? -1 : 0;
  if (!cJSON_IsString(v) || !*v->valuestring) return bad_value(j, key, v, "a non-empty string");
  *out = v->valuestring;
  return 1;
}

int jin_get_bool(jin *j, const cJSON *obj, const char *key, bool required, bool *out) {
  const cJSON *v = member(j, obj, key, required);
  if (!v) return required ? -1 : 0;
  if (!cJSON_IsBool(v)) return bad_value(j, key, v, "true or false");
  *out = cJSON_IsTrue(v);
  return 1;
}

int jin_get_enum(jin *j, const cJSON *obj, const char *key, const char *const *choices,
                 bool required, int *out) {
  const cJSON *v = member(j, obj, key, required);
  if (!v) return required ? -1 : 0;
  if (cJSON_IsString(v))
    for (int i = 0; choices[i]; i++)
      if (strcmp(choices[i], v->valuestring) == 0) {
        *out = i;
        return 1;
      }
  char want[512] = "one of ";
  for (int i = 0; choices[i]; i++) {
    strncat(want, i ? ", " : "", sizeof want - strlen(want) - 1);
    strncat(want, choices[i], sizeof want - strlen(want) - 1);
  }
  return bad_value(j, key, v, want);
}

const cJSON *jin_get_object(jin *j, const cJSON *obj, const char *key, bool required) {
  const cJSON *v = member(j, obj, key, required);
  if (v && !cJSON_IsObject(v)) {
    bad_value(j, key, v, "an object");
    return NULL;
  }
  return v;
}

const cJSON *jin_get_array(jin *j, const cJSON *obj, const char *key, bool required) {
  const cJSON *v = member(j, obj, key, required);
  if (v && !cJSON_IsArray(v)) {
    bad_value(j, key, v, "an array");
    return NULL;
  }
  return v;
}

static bool listed(const char *const *list, const char *key) {
  for (int i = 0; list && list[i]; i++)
    if (strcmp(list[i], key) == 0) return true;
  return false;
}

typedef struct {
  const char *key;
  int pos; /* its place among the object's members */
} key_at;

static int key_at_cmp(const void *a, const void *b) {
  const key_at *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sorted by key then place, so each repeat follows its first: n log n for
** an object of any width (a file of a few MB may hold 10^5 keys). */
int jin_no_duplicates(jin *j, const cJSON *obj) {
  if (!cJSON_IsObject(obj) && !cJSON_IsArray(obj)) return 0;
  int problems = 0, n = 0, i = 0;
  for (const cJSON *c = obj->child; c; c = c->next) n++;
  if (cJSON_IsObject(obj) && n > 1) {
    key_at *k = malloc((size_t)n * sizeof *k);
    if (!k) {
      jin_error(j, 0, "out of memory");
      return 1;
    }
    for (const cJSON *c = obj->child; c; c = c->next, i++) k[i] = (key_at){c->string ? c->string : "", i};
    qsort(k, (size_t)n, sizeof *k, key_at_cmp);
    for (i = 1; i < n; i++) {
      if (strcmp(k[i].key, k[i - 1].key) != 0) continue;
      int occ = 1;
      while (i + 1 < n && strcmp(k[i + 1].key, k[i].key) == 0) i++, occ++;
      jin_push_key(j, k[i].key, 1);
      jin_error(j, 1, "duplicate key (given %d times: keep one; Python's json would keep the last silently)", occ + 1);
      jin_pop(j);
      problems++;
    }
    free(k);
  }
  i = 0;
  for (const cJSON *c = obj->child; c; c = c->next, i++) {
    if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
    if (cJSON_IsObject(obj)) jin_push_key(j, c->string, 0);
    else jin_push_index(j, i);
    problems += jin_no_duplicates(j, c);
    jin_pop(j);
  }
  return problems;
}

int jin_only(jin *j, const cJSON *obj, const char *const *allowed, const char *const *also) {
  int problems = 0;
  if (!cJSON_IsObject(obj)) return 0;
  const char *cand[128];
  int n = 0;
  for (int i = 0; allowed && allowed[i] && n < 128; i++) cand[n++] = allowed[i];
  for (int i = 0; also && also[i] && n < 128; i++) cand[n++] = also[i];
  for (const cJSON *c = obj->child; c; c = c->next) {
    int occ = 0;
    for (const cJSON *p = obj->child; p != c; p = p->next)
      if (strcmp(p->string, c->string) == 0) occ++;
    jin_push_key(j, c->string, occ);
    if (occ > 0) {
      jin_error(j, 1, "duplicate key (already given above)");
      problems++;
    } else if (!listed(allowed, c->string) && !listed(also, c->string)) {
      const char *s = str_suggest(c->string, cand, n);
      if (s) {
        jin_error(j, 1, "unknown field (did you mean '%s'?)", s);
      } else {
        char list[768] = "";
        for (int i = 0; i < n; i++) {
          strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
          strncat(list, cand[i], sizeof list - strlen(list) - 1);
        }
        jin_error(j, 1, "unknown field; expected one of: %s", list);
      }
      problems++;
    }
    jin_pop(j);
  }
  return problems;
}
