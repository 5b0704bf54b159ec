/*
** hw_catalog.h -- the set of hardware a run can use: the built-in files
** (embedded at build time) plus any --hw-file the user gave.
*/
#ifndef TPUSIM_HW_CATALOG_H
#define TPUSIM_HW_CATALOG_H

#include <stddef.h>

#include "hw.h"

#include "../base/embedded.h"

/* The hw_models JSON files, generated into build/hw_catalog_data.c at build time. */
extern const embedded_file hw_files[];
extern const int hw_files_count;

typedef struct hw_catalog hw_catalog;

hw_catalog *hw_catalog_new(void);
void hw_catalog_free(hw_catalog *c);

/* Loads every embedded file. Returns 0, or -1 after reporting to dg. */
int hw_catalog_load_builtin(hw_catalog *c, diag *dg);
/* Loads a user file; an entry of the same name replaces the built-in one.
** Returns the loaded entry, or NULL after reporting to dg. */
const hw_model *hw_catalog_load_file(hw_catalog *c, const char *path, diag *dg);

int hw_catalog_count(const hw_catalog *c);
/* Ordered by kind (TPU, GPU, CPU, edge), then 16-bit peak, then name; user files
** that add a new name come last, in the order given. */
const hw_model *hw_catalog_at(const hw_catalog *c, int i);
const hw_model *hw_catalog_find(const hw_catalog *c, const char *name);
/* The same entry, for a caller that changes it in place (a study's
** hw_override on its own catalog); NULL when absent. */
hw_model *hw_catalog_find_mut(hw_catalog *c, const char *name);
/* "unknown hardware 'h100'; did you mean 'h100-sxm'? (known: ...)" */
void hw_catalog_unknown(const hw_catalog *c, const char *name, char *buf, size_t n);

#endif
