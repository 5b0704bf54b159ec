/*
** plot_sweep.c -- `tpusim plot sweep RESULTS.csv` (plot.h): a study's
** results read back from the CSV `tpusim sweep` writes, by column name, and
** drawn as lines over one swept parameter or as heatmaps over two.
*/
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 9     /* the overrides a study may have (8) and chips */
#define MAX_SERIES 64    /* models x hardware drawn */
#define MAX_VALUES 10000 /* distinct values of one parameter */
#define MAX_PANELS 6     /* heatmaps side by side */
#define MAX_ROWS 2000000 /* more than a study's limit of points */

typedef struct {
  int series;
  double p[MAX_PARAMS];
  double y; /* days or dollars; NaN: the point failed */
} row;

typedef struct {
  char *param[MAX_PARAMS]; /* override columns, then "chips" */
  int n_param;
  char *series[MAX_SERIES];
  int n_series;
  row *rows;
  int64_t n_rows;
  const char *path;
  FILE *err;
} results;

/* Splits one CSV line (RFC 4180 quotes) in place into at most max fields. */
static int split_csv(char *s, char **f, int max) {
  int n = 0;
  while (n < max) {
    char *w = s;
    f[n++] = w;
    if (*s == '"') {
      for (s++; *s && !(*s == '"' && s[1] != '"'); s++) *w++ = *s == '"' ? *++s : *s;
      if (*s == '"') s++;
    } else {
      while (*s && *s != ',' && *s != '\n') *w++ = *s++;
    }
    bool more = *s == ',';
    *w = 0;
    if (!more) break;
    s++;
  }
  return n;
}

static int bad_line(results *r, int64_t line, const char *fmt, const char *a) {
  fprintf(r->err, "tpusim plot sweep: %s:%lld: ", r->path, (long long)line);
  fprintf(r->err, fmt, a);
  fprintf(r->err, "\n");
  return 1;
}

/* The columns the plot needs, found in the header. */
typedef struct {
  int model, hw, chips, status, y, n;
  int ov_first; /* the override columns lie between hw and chips */
} cols;

static int find_col(char **f, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(f[i], name) == 0) return i;
  return -1;
}

static int read_header(results *r, char *line, cols *c, bool cost) {
  char *f[64];
  int n = split_csv(line, f, 64);
  *c = (cols){find_col(f, n, "model"), find_col(f, n, "hw"), find_col(f, n, "chips"),
              find_col(f, n, "status"), find_col(f, n, cost ? "train_usd" : "train_s"), n, 0};
  if (c->model < 0 || c->hw < 0 || c->chips < 0 || c->status < 0 || c->y < 0 || c->chips <= c->hw ||
      c->chips - c->hw - 1 >= MAX_PARAMS)
    return bad_line(r, 1, "%s", "expected the header `tpusim sweep` writes (point,model,hw,<overrides>,"
                                "chips,status,...,train_s,train_usd,...)");
  c->ov_first = c->hw + 1;
  for (int k = c->ov_first; k <= c->chips; k++)
    if (!(r->param[r->n_param++] = strdup(f[k]))) return 1;
  return 0;
}

static int series_of(results *r, const char *name) {
  for (int i = 0; i < r->n_series; i++)
    if (strcmp(r->series[i], name) == 0) return i;
  if (r->n_series == MAX_SERIES || !(r->series[r->n_series] = strdup(name))) return -1;
  return r->n_series++;
}

static int read_row(results *r, char *line, int64_t ln, const cols *c, bool cost, bool by_hw) {
  char *f[64];
  int n = split_csv(line, f, 64);
  char want[32];
  snprintf(want, sizeof want, "%d", c->n);
  if (n < c->n) return bad_line(r, ln, "expected %s fields, as the header has; the row is cut short", want);
  char name[256];
  if (by_hw) snprintf(name, sizeof name, "%s on %s", f[c->model], f[c->hw]);
  else snprintf(name, sizeof name, "%s", f[c->model]);
  row *w = &r->rows[r->n_rows];
  if ((w->series = series_of(r, name)) < 0) return bad_line(r, ln, "more than %s models x hardware", "64");
  for (int k = 0; k < r->n_param; k++) {
    char *e;
    const char *s = f[c->ov_first + k];
    w->p[k] = *s ? strtod(s, &e) : 1; /* an override left out: the hardware as it is */
    if (*s && *e) return bad_line(r, ln, "'%s' is not a number", s);
  }
  w->y = NAN;
  if (strcmp(f[c->status], "ok") == 0) {
    char *e;
    double v = strtod(f[c->y], &e);
    if (*e || !(v > 0)) return bad_line(r, ln, "'%s' is not a positive number", f[c->y]);
    w->y = cost ? v : v / 86400;
  }
  r->n_rows++;
  return 0;
}

/* Do the results hold more than one hardware entry? (then a series is
** "model on hw") */
static bool several_hw(FILE *f, int hw_col) {
  char *line = NULL, first[256] = "";
  size_t cap = 0;
  bool several = false;
  long at = ftell(f);
  while (!several && getline(&line, &cap, f) > 0) {
    char *fl[64];
    int n = split_csv(line, fl, 64);
    if (n <= hw_col) continue;
    if (!*first) snprintf(first, sizeof first, "%s", fl[hw_col]);
    else several = strcmp(first, fl[hw_col]) != 0;
  }
  free(line);
  fseek(f, at, SEEK_SET);
  return several;
}

static int read_results(results *r, bool cost) {
  FILE *f = fopen(r->path, "r");
  if (!f) {
    fprintf(r->err, "tpusim plot sweep: %s: %s (give the PREFIX.csv `tpusim sweep` wrote)\n", r->path,
            strerror(errno));
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  cols c;
  int rc = getline(&line, &cap, f) > 0 ? read_header(r, line, &c, cost) : bad_line(r, 1, "%s", "empty file");
  bool by_hw = rc == 0 && several_hw(f, c.hw);
  int64_t alloc = 0;
  for (int64_t ln = 2; rc == 0 && getline(&line, &cap, f) > 0; ln++) {
    if (r->n_rows == MAX_ROWS) rc = bad_line(r, ln, "%s", "more rows than a study can have");
    if (rc == 0 && r->n_rows == alloc) {
      alloc = alloc ? alloc * 2 : 256;
      row *nr = realloc(r->rows, (size_t)alloc * sizeof *nr);
      if (!nr) rc = bad_line(r, ln, "%s", "out of memory");
      else r->rows = nr;
    }
    if (rc == 0) rc = read_row(r, line, ln, &c, cost, by_hw);
  }
  free(line);
  fclose(f);
  if (rc == 0 && r->n_rows == 0) rc = bad_line(r, 2, "%s", "no points yet: run `tpusim sweep` first");
  return rc;
}

/* ---- parameters ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The distinct values of parameter k, sorted, into v (malloc'd). */
static int distinct(const results *r, int k, double **v) {
  double *a = malloc((size_t)r->n_rows * sizeof *a);
  if (!a) return -1;
  for (int64_t i = 0; i < r->n_rows; i++) a[i] = r->rows[i].p[k];
  qsort(a, (size_t)r->n_rows, sizeof *a, cmp_double);
  int n = 0;
  for (int64_t i = 0; i < r->n_rows && n < MAX_VALUES; i++)
    if (n == 0 || a[i] != a[n - 1]) a[n++] = a[i];
  *v = a;
  return n;
}

static int param_index(const results *r, const char *name, FILE *err) {
  for (int k = 0; k < r->n_param; k++)
    if (strcmp(r->param[k], name) == 0) return k;
  fprintf(err, "tpusim plot sweep: %s has no parameter '%s' (it has:", r->path, name);
  for (int k = 0; k < r->n_param; k++) fprintf(err, " %s", r->param[k]);
  fprintf(err, ")\n");
  return -1;
}

/* The best (least) y of series s at parameter values (a = va[, b = vb]),
** over every other parameter; NaN when no point there ran. */
static double best_at(const results *r, int s, int a, double va, int b, double vb) {
  double best = NAN;
  for (int64_t i = 0; i < r->n_rows; i++) {
    const row *w = &r->rows[i];
    if (w->series != s || w->p[a] != va || (b >= 0 && w->p[b] != vb) || isnan(w->y)) continue;
    if (isnan(best) || w->y < best) best = w->y;
  }
  return best;
}

/* ---- the two pictures ---- */

static void gp_str(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) fprintf(f, *s == '\'' ? "''" : "%c", *s);
  fputc('\'', f);
}

static int draw_lines(const results *r, int a, bool cost, FILE *dat, FILE *gp) {
  double *v;
  int nv = distinct(r, a, &v);
  if (nv < 0) return 1;
  for (int s = 0; s < r->n_series; s++) {
    fprintf(dat, "# %s\n# %s best_%s\n", r->series[s], r->param[a], cost ? "usd" : "days");
    for (int i = 0; i < nv; i++) {
      double y = best_at(r, s, a, v[i], -1, 0);
      fprintf(dat, "%.9g %.9g\n", v[i], isnan(y) ? NAN : y);
    }
    fprintf(dat, "\n\n");
  }
  fprintf(gp, "set title 'Best %s to train against %s (each point: the best plan; other swept "
              "parameters at their best)'\n", cost ? "cost" : "time", r->param[a]);
  fprintf(gp, "set xlabel ");
  gp_str(gp, r->param[a]);
  fprintf(gp, "\nset ylabel '%s'\nset logscale y\n", cost ? "cost to train (USD)" : "time to train (days)");
  if (strcmp(r->param[a], "chips") == 0) fprintf(gp, "set logscale x 2\n");
  fprintf(gp, "plot ");
  for (int s = 0; s < r->n_series; s++) {
    fprintf(gp, "%sDAT index %d using 1:2 with linespoints lw 2 pt 7 title ", s ? ", \\\n     " : "", s);
    gp_str(gp, r->series[s]);
  }
  fprintf(gp, "\n");
  free(v);
  return 0;
}

/* The base of a heatmap axis: the value 1 (an override's "as the hardware
** is") when the axis has it, else its first value. */
static int base_index(const double *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] == 1) return i;
  return 0;
}

/* One heatmap a series: speed-up (or saving) over the series' point at the
** base of both axes, on a grid of value indices. */
static int draw_heat(const results *r, int a, int b, bool cost, FILE *dat, FILE *gp) {
  double *va, *vb;
  int na = distinct(r, a, &va), nb = na < 0 ? -1 : distinct(r, b, &vb);
  if (na < 0 || nb < 0) return 1;
  int panels = r->n_series < MAX_PANELS ? r->n_series : MAX_PANELS;
  int ia = base_index(va, na), ib = base_index(vb, nb);
  for (int s = 0; s < panels; s++) {
    double base = best_at(r, s, a, va[ia], b, vb[ib]);
    fprintf(dat, "# %s: %s index, %s index, base/value (%s at %s=%.6g, %s=%.6g: %.6g)\n", r->series[s],
            r->param[a], r->param[b], cost ? "USD" : "days", r->param[a], va[ia], r->param[b], vb[ib], base);
    for (int j = 0; j < nb; j++) {
      for (int i = 0; i < na; i++) {
        double y = best_at(r, s, a, va[i], b, vb[j]);
        fprintf(dat, "%d %d %.6g\n", i, j, isnan(y) || isnan(base) ? NAN : base / y);
      }
      fprintf(dat, "\n");
    }
    fprintf(dat, "\n");
  }
  fprintf(gp, "set multiplot layout 1,%d title '%s of the best plan over %s=%.6g, %s=%.6g'\n",
          panels, cost ? "Cost saving (base cost / cost)" : "Speed-up (base time / time)", r->param[a],
          va[ia], r->param[b], vb[ib]);
  fprintf(gp, "unset grid\nunset key\nset palette defined (0 '#f7fbff', 1 '#6baed6', 2 '#08306b')\n");
  fprintf(gp, "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\n", na - 1, nb - 1);
  fprintf(gp, "set xtics (");
  for (int i = 0; i < na; i++) fprintf(gp, "%s'%.4g' %d", i ? ", " : "", va[i], i);
  fprintf(gp, ")\nset ytics (");
  for (int j = 0; j < nb; j++) fprintf(gp, "%s'%.4g' %d", j ? ", " : "", vb[j], j);
  fprintf(gp, ")\nset xlabel ");
  gp_str(gp, r->param[a]);
  fprintf(gp, "\nset ylabel ");
  gp_str(gp, r->param[b]);
  fprintf(gp, "\n");
  for (int s = 0; s < panels; s++) {
    fprintf(gp, "set title ");
    gp_str(gp, r->series[s]);
    fprintf(gp, "\nplot DAT index %d using 1:2:3 with image, '' index %d using 1:2:(sprintf('%%.2f', $3)) "
                "with labels\n", s, s);
  }
  fprintf(gp, "unset multiplot\n");
  free(va);
  free(vb);
  return 0;
}

/* The parameters to draw: given, or the first two (then one) that vary. */
static int choose(const results *r, const plot_sweep_req *q, int *a, int *b, FILE *err) {
  *a = *b = -1;
  if (q->heat) {
    const char *comma = strchr(q->heat, ',');
    char first[128];
    if (!comma || (size_t)(comma - q->heat) >= sizeof first) {
      fprintf(err, "tpusim plot sweep: --heat '%s': expected two parameters, A,B\n", q->heat);
      return 2;
    }
    snprintf(first, sizeof first, "%.*s", (int)(comma - q->heat), q->heat);
    *a = param_index(r, first, err);
    *b = *a < 0 ? -1 : param_index(r, comma + 1, err);
    return *a < 0 || *b < 0 ? 2 : 0;
  }
  if (q->x) return (*a = param_index(r, q->x, err)) < 0 ? 2 : 0;
  for (int k = 0; k < r->n_param; k++) {
    double *v;
    int n = distinct(r, k, &v);
    free(v);
    if (n > 1 && *a < 0) *a = k;
    else if (n > 1 && *b < 0) *b = k;
  }
  if (*a < 0) {
    fprintf(err, "tpusim plot sweep: %s: no parameter takes more than one value; nothing to draw "
                 "against\n", r->path);
    return 1;
  }
  return 0;
}

int plot_sweep_draw(const plot_sweep_req *q, const plot_output *o, FILE *out, FILE *err) {
  results r = {.path = q->results, .err = err};
  int a, b, rc = read_results(&r, q->cost);
  if (rc == 0) rc = choose(&r, q, &a, &b, err);
  FILE *dat = rc == 0 ? fopen(o->dat_path, "w") : NULL;
  FILE *gp = dat ? fopen(o->gp_path, "w") : NULL;
  if (rc == 0 && !gp) {
    fprintf(err, "tpusim plot: cannot write %s: %s\n", dat ? o->gp_path : o->dat_path, strerror(errno));
    rc = 1;
  }
  if (rc == 0) {
    plot_script_header(o, q->argc, q->argv, gp);
    fprintf(gp, "set termoption noenhanced\n"); /* parameter names hold underscores */
    rc = b >= 0 ? draw_heat(&r, a, b, q->cost, dat, gp) : draw_lines(&r, a, q->cost, dat, gp);
  }
  if (dat && fclose(dat) != 0 && rc == 0) rc = 1;
  if (gp && fclose(gp) != 0 && rc == 0) rc = 1;
  if (rc == 0) rc = plot_run_gnuplot(o, out, err);
  for (int k = 0; k < r.n_param; k++) free(r.param[k]);
  for (int s = 0; s < r.n_series; s++) free(r.series[s]);
  free(r.rows);
  return rc;
}
