/*
** plan.c -- see plan.h.
*/
#include "plan.h"

int64_t plan_microbatches(const plan *p) {
  /* expert-parallel ranks hold different data too (they are data-parallel
  ** for everything but the experts) */
  int64_t per = p->dp * (p->ep > 0 ? p->ep : 1) * p->mbs;
  return per > 0 ? p->gbs / per : 0;
}
