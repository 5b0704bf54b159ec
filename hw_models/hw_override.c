/*
** hw_override.c -- see hw_override.h.
*/
#include "hw_override.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../base/strutil.h"

const char *const hw_override_scales[] = {"hbm_bw_scale", "ici_bw_scale", "dcn_bw_scale",
                                          "flops_scale", "hbm_bytes_scale", NULL};

/* The schema paths each scale multiplies: the figures a what-if on that
** part of the chip changes. The scale-up fabric has both its per-link and
** per-chip figures (the collective model reads either); flops_scale takes
** every matrix peak, whichever precision the plan trains in. */
static const char *const SCALE_FIELDS[][10] = {
    {"chip.hbm_bw_bytes_per_s", NULL},
    {"system.scale_up.link_bw_bytes_per_s", "system.scale_up.bw_per_chip_bytes_per_s", NULL},
    {"system.scale_out.bw_per_chip_bytes_per_s", NULL},
    {"chip.peak_flops_per_s.fp64", "chip.peak_flops_per_s.fp32", "chip.peak_flops_per_s.tf32",
     "chip.peak_flops_per_s.bf16", "chip.peak_flops_per_s.fp16", "chip.peak_flops_per_s.fp8",
     "chip.peak_flops_per_s.int8", "chip.peak_flops_per_s.mxfp8", "chip.peak_flops_per_s.fp4", NULL},
    {"chip.hbm_bytes", NULL},
};

static int scale_index(const char *key) {
  for (int i = 0; hw_override_scales[i]; i++)
    if (strcmp(hw_override_scales[i], key) == 0) return i;
  return -1;
}

/* A field a study may set: a number or an integer (not names, flags, shapes). */
static const hw_field *numeric_field(const char *key) {
  int fi = hw_field_find(key);
  if (fi < 0) return NULL;
  const hw_field *f = hw_field_get(fi);
  return f->type == HWF_NUM || f->type == HWF_INT ? f : NULL;
}

bool hw_override_known(const char *key, const char **suggest) {
  *suggest = NULL;
  if (scale_index(key) >= 0 || numeric_field(key)) return true;
  enum { MAXN = HW_MAX_FIELDS + 8 };
  const char *names[MAXN];
  int n = 0;
  for (int i = 0; hw_override_scales[i] && n < MAXN; i++) names[n++] = hw_override_scales[i];
  for (int i = 0; i < hw_field_count() && n < MAXN; i++) {
    const hw_field *f = hw_field_get(i);
    if (f->type == HWF_NUM || f->type == HWF_INT) names[n++] = f->path;
  }
  *suggest = str_suggest(key, names, n);
  return false;
}

/* Checks v against f's range (HWF_POS: 0 excluded); for an integer field,
** also that v is whole. what: how v came ("hbm_bw_scale = 2 makes it").
** 0, or -1 with err. */
static int check_value(const hw_field *f, const char *what, double v, char *err, size_t errn) {
  bool pos = (f->flags & HWF_POS) != 0;
  bool whole = f->type != HWF_INT || (v == floor(v) && fabs(v) < 9.0e15);
  if (isfinite(v) && whole && v >= f->min && v <= f->max && !(pos && v <= 0)) return 0;
  char lo[64];
  if (pos && f->min <= 0) snprintf(lo, sizeof lo, "over 0");
  else snprintf(lo, sizeof lo, "at least %.10g", f->min);
  snprintf(err, errn, "%s %s = %.10g, outside the schema's range: expected %s %s and at most %.10g%s%s",
           what, f->path, v, f->type == HWF_INT ? "a whole number" : "a number", lo, f->max,
           *f->unit ? " " : "", f->unit);
  return -1;
}

static double *num_at(hw_model *m, const hw_field *f) { return (double *)((char *)m + f->offset); }
static int64_t *int_at(hw_model *m, const hw_field *f) { return (int64_t *)((char *)m + f->offset); }

static double get_value(hw_model *m, const hw_field *f) {
  return f->type == HWF_INT ? (double)*int_at(m, f) : *num_at(m, f);
}

static void set_value(hw_model *m, const hw_field *f, double v) {
  if (f->type == HWF_INT) *int_at(m, f) = (int64_t)v;
  else *num_at(m, f) = v;
  m->present[hw_field_find(f->path)] = true;
}

/* A scale multiplies each figure the entry has (0, an absent unit, stays
** 0); integer figures (bytes) round to the nearest whole. Every product is
** checked before any is written, so a refused scale changes nothing. */
static int apply_scale(hw_model *m, int si, const char *key, double s, char *err, size_t errn) {
  if (!isfinite(s) || s <= 0) {
    snprintf(err, errn, "%s = %.6g: expected a factor over 0 (1 leaves the hardware as it is)", key, s);
    return -1;
  }
  const char *const *paths = SCALE_FIELDS[si];
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; paths[i]; i++) {
      const hw_field *f = numeric_field(paths[i]);
      double v = get_value(m, f);
      if (v == 0) continue;
      double nv = f->type == HWF_INT ? round(v * s) : v * s;
      char what[64];
      snprintf(what, sizeof what, "%s = %.6g makes", key, s);
      if (pass == 0 && check_value(f, what, nv, err, errn) != 0) return -1;
      if (pass == 1) set_value(m, f, nv);
    }
  return 0;
}

int hw_override(hw_model *m, const char *key, double value, char *err, size_t errn) {
  int si = scale_index(key);
  if (si >= 0) return apply_scale(m, si, key, value, err, errn);
  const hw_field *f = numeric_field(key);
  if (!f) {
    const char *s;
    hw_override_known(key, &s);
    snprintf(err, errn, "unknown hardware override '%s': expected a scale (%s, ...) or a numeric "
                        "field path of the hardware schema (docs/hardware.md)%s%s%s",
             key, hw_override_scales[0], s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
    return -1;
  }
  if (check_value(f, "setting", value, err, errn) != 0) return -1;
  /* the loader's rule across fields, on the entry as the setting leaves it
  ** (a collective's CTAs each hold an SM, whichever of the two is set) */
  hw_model after = *m;
  set_value(&after, f, value);
  int64_t sms = after.chip.mu_cores, ctas[] = {after.scale_up.collective_ctas,
                                               after.scale_out.collective_ctas};
  const char *path[] = {"system.scale_up.collective_ctas", "system.scale_out.collective_ctas"};
  for (int i = 0; i < 2; i++)
    if (sms > 0 && ctas[i] >= sms) {
      snprintf(err, errn, "setting %s = %.10g leaves %s at %lld: expected fewer CTAs than the "
                          "chip's %lld cores (chip.matrix_unit.cores)",
               key, value, path[i], (long long)ctas[i], (long long)sms);
      return -1;
    }
  set_value(m, f, value);
  return 0;
}
