/*
** sweep_int.h -- the study as sweep_study.c parses it, shared by the
** files of the sweep (sweep.h is what the command sees).
*/
#ifndef TPUSIM_SWEEP_INT_H
#define TPUSIM_SWEEP_INT_H

#include "sweep.h"

#include "../planner/planner.h"

/* One point: indices into the study's models and hw, the chip count, and
** each override's value (NaN: this point leaves that key alone). */
typedef struct {
  int model, hw;
  int64_t chips;
  double ov[SWEEP_MAX_OVERRIDES];
} sweep_point;

struct sweep_study {
  char **models; /* names or paths, as written */
  int n_models;
  char **hw;
  int n_hw;
  char *ov_key[SWEEP_MAX_OVERRIDES];
  int n_ov;
  /* the cross product: each override's values, the chip counts */
  double *ov_val[SWEEP_MAX_OVERRIDES];
  int ov_n[SWEEP_MAX_OVERRIDES];
  int64_t *chips;
  int n_chips;
  /* or an explicit list ("points") */
  sweep_point *list;
  int64_t n_list;
  int64_t n_points;
  /* what every point's planner run shares */
  bool has_objective;
  planner_objective objective;
  double tokens; /* 0: the planner's default (20 per parameter) */
  int top;
  planner_fix fix;
  const char *const *hw_files; /* borrowed from the command line */
  int n_hw_files;
};

/* Point i of the study (0 <= i < n_points): the cross product's models,
** hw, overrides in the file's order, chips, the last varying fastest. */
void sweep_point_at(const sweep_study *s, int64_t i, sweep_point *out);

#endif
