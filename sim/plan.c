/*
** plan.c -- see plan.h.
*/
#include "plan.h"

int64_t plan_microbatches(const plan *p) {
  int64_t per = p->dp * p->mbs;
  return per > 0 ? p->gbs / per : 0;
}
