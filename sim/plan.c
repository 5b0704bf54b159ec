/*
** plan.c -- see plan.h.
*/
#include "plan.h"

#include "../hw_models/hw.h"

int64_t plan_microbatches(const plan *p) {
  /* expert-parallel ranks hold different data too (they are data-parallel
  ** for everything but the experts) */
  int64_t per = p->dp * (p->ep > 0 ? p->ep : 1) * p->mbs;
  return per > 0 ? p->gbs / per : 0;
}

graph_dtype plan_precision_on(const hw_model *hw, graph_dtype want) {
  if (want == GDT_BF16 && hw_peak_flops(hw, HW_BF16) <= 0 && hw_peak_flops(hw, HW_FP16) > 0)
    return GDT_F16;
  return want;
}
