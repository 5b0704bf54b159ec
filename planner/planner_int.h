/*
** planner_int.h -- what the planner's files share (planner.c: the search
** over transformer plans and the run; price.c: a run's time and price;
** generic.c: the data-parallel families; reasons.c: rejections, the
** closest miss, ranking). The rest of the program includes planner.h.
*/
#ifndef TPUSIM_PLANNER_INT_H
#define TPUSIM_PLANNER_INT_H

#include "planner.h"

/* A plan's run, priced: the candidate fields planner_set_price fills.
** Small, so the search prices every plan without building a whole
** candidate. */
typedef struct {
  int64_t billed_chips;
  double train_s, train_usd, ckpt_write_s, ckpt_interval_s, preemptions, spot_overhead;
  double energy_j; /* planner_energy_j of the run */
} run_price;

/* price.c */
/* The shortest time a VM is billed for (price.c, the clouds' one-minute minimum). */
double planner_min_billed_s(void);
run_price planner_price_of(const model *m, const hw_model *hw, const planner_req *req,
                           int64_t chips, double step_s, int64_t steps);
void planner_set_price(planner_cand *c, const run_price *r);
void planner_price_cand(const model *m, const hw_model *hw, const planner_req *req,
                        planner_cand *c, double step_s, int64_t steps);

/* reasons.c */
/* A plan's recompute for a sentence: "no", "selective", "full" or
** "selective:moe_act,layernorm" (buf holds it when needed). */
const char *recompute_words(const plan *p, char *buf, size_t n);

bool planner_listed(const char *list, const char *name);
void planner_note_closest(planner_result *out, const planner_cand *c);
void planner_closest_text(const planner_result *out, const planner_req *req, char *buf, size_t n);
void *planner_grow(void *v, int n, size_t size);
planner_reject *planner_add_reject(planner_result *out, const char *hw, planner_cause cause,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int planner_push_cand(planner_cand **v, int *n, const planner_cand *c);
void planner_rank(planner_result *out, const planner_req *req);
bool planner_hw_allowed(const model *m, const hw_model *hw, plan_gemm gemm, planner_result *out,
                        graph_dtype *prec);

/* price.c: the objective's figure of a priced run (what the search ranks by) */
double planner_price_key(const planner_req *req, const run_price *r);
/* fix.c: a hardware's rejection when --fix turned down the plans it could
** run and none of the rest fitted (NULL when --fix turned none down); false
** with a rejection when --objective energy has no TDP for the hardware */
planner_reject *planner_fix_reject_hw(const planner_req *req, const hw_model *hw,
                                      planner_result *out, int64_t fixed_plans);
bool planner_energy_allowed(const planner_req *req, const hw_model *hw, planner_result *out);

/* generic.c */
int planner_generic(const model *m, const hw_catalog *cat, const planner_req *req,
                    planner_result *out, char *err, size_t errn, double t0);

#endif
