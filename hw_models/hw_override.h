/*
** hw_override.h -- what-if changes to a loaded hardware entry, for design
** space studies (`tpusim sweep`): one named override applied to the entry
** the one loader (hw.c) built, so a study never needs a second loader.
**
** Two kinds of name:
**   - a scale ("hbm_bw_scale"), which multiplies the figures it names
**     (hw_override_scales lists them and what they touch);
**   - a dotted field path of the schema ("chip.hbm_bytes"), which sets that
**     numeric field, checked against the schema's range.
*/
#ifndef TPUSIM_HW_OVERRIDE_H
#define TPUSIM_HW_OVERRIDE_H

#include <stdbool.h>
#include <stddef.h>

#include "hw.h"

/* The scale names, NULL-terminated ("hbm_bw_scale", "ici_bw_scale",
** "dcn_bw_scale", "flops_scale", "hbm_bytes_scale"). */
extern const char *const hw_override_scales[];

/* Is key a name hw_override accepts (a scale or a numeric field path)?
** When not, *suggest is the nearest valid name (or NULL). */
bool hw_override_known(const char *key, const char **suggest);

/* Applies key = value to m. Returns 0, or -1 with err naming the key, the
** value, what was expected (a scale > 0; a field within its range) and the
** field a scale would take out of range. m is unchanged on failure. */
int hw_override(hw_model *m, const char *key, double value, char *err, size_t errn);

#endif
