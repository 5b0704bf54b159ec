/*
** families.h -- the model families a model.json "family" names. Each is a
** wl_family_fn (see wl.h): it reads its own fields from the spec (through
** jin, so errors carry file:line:col), appends the forward pass of one
** step, and returns the scalar loss op.
*/
#ifndef TPUSIM_FAMILIES_H
#define TPUSIM_FAMILIES_H

#include "wl.h"

int wl_transformer(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);
int wl_cnn(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);
int wl_mlp(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);
int wl_dlrm(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);
int wl_gbdt(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);
int wl_oplist(graph *g, jin *j, const cJSON *spec, const wl_train *t, wl_info *info);

#endif
