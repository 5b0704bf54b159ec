/*
** price.c -- what a run of a plan costs in time and money: whole instances
** billed, and on spot capacity the checkpoints and lost work (Young/Daly).
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../base/units.h"
#include "../sim/input.h"
#include "../sim/memory.h"
#include "../sim/optime.h"
#include "../sim/step.h"
#include "planner_int.h"

/* The seconds a run is billed: the clouds in the catalog bill VMs (and
** Cloud TPU) per second with a one-minute minimum ("per-second billing ...
** minimum of 60 seconds", AWS EC2 On-Demand pricing,
** https://aws.amazon.com/ec2/pricing/on-demand/; Compute Engine "1-minute
** minimum ... 1-second increments", https://cloud.google.com/compute/vm-instance-pricing).
** So a job of seconds pays a minute of its VM: the cheapest hour, not the
** fastest chip, wins it (a small tree model lands on a small CPU VM). */
double planner_min_billed_s(void) { return 60; }

static double billed_s(double run_s) {
  double min_s = planner_min_billed_s();
  return run_s > 0 && run_s < min_s ? min_s : run_s;
}

/* Time and price of a candidate's whole run of `steps` steps of step_s.
** The price is paid on whole instances (price.chips_per_instance). On spot
** capacity (docs/planner.md, "Spot"): preemptions arrive at
** preemptions_per_month per instance (730 h), so the run's mean time
** between them is M = 730 h / (rate x instances); a checkpoint of the
** trainable state (14 B per parameter: 16-bit weights, fp32 master, Adam's
** m and v) takes delta to write at every host's storage bandwidth; the
** Young/Daly interval tau = sqrt(2 delta M) (Young 1974) makes the expected
** overhead delta/tau (writing) + (tau/2 + delta)/M (work lost since the last
** checkpoint, then reading it back). */
/* A plan's run, priced: the candidate fields price_cand fills. Small, so
** the search prices every plan without building a whole candidate. */
run_price planner_price_of(const model *m, const hw_model *hw, const planner_req *req, int64_t chips,
                          double step_s, int64_t steps) {
  run_price c = {0};
  int64_t per = hw->price.chips_per_instance > 0 ? hw->price.chips_per_instance : 1;
  c.billed_chips = (chips + per - 1) / per * per;
  double t = step_s * (double)steps;
  if (req->spot) {
    double rate = req->preemptions_per_month > 0 ? req->preemptions_per_month : 0.2;
    double instances = (double)(c.billed_chips / per);
    double mtbp = 730.0 * 3600 / (rate * instances);
    int64_t hosts = c.billed_chips / (hw->chips_per_node > 0 ? hw->chips_per_node : 1);
    input_cfg io;
    input_defaults(&io, INPUT_TOKENS);
    c.ckpt_write_s = mem_checkpoint_bytes(m) / ((double)(hosts > 0 ? hosts : 1) * io.storage_bw_bytes_per_s);
    if (c.ckpt_write_s > 0) {
      c.ckpt_interval_s = sqrt(2 * c.ckpt_write_s * mtbp);
      c.spot_overhead = c.ckpt_write_s / c.ckpt_interval_s +
                        (c.ckpt_interval_s / 2 + c.ckpt_write_s) / mtbp;
    }
    t *= 1 + c.spot_overhead;
    c.preemptions = t / mtbp;
  }
  double price = req->spot ? hw->price.spot_usd_per_chip_hour : hw->price.on_demand_usd_per_chip_hour;
  c.train_s = t;
  c.train_usd = price * (double)c.billed_chips * billed_s(t) / 3600;
  c.energy_j = planner_energy_j(hw, chips, t);
  return c;
}

/* The chips' energy: each chip at its TDP (chip.tdp_w, cited in its
** hardware file) for the whole run -- the accounting of Patterson et al.
** 2021, "Carbon Emissions and Large Neural Network Training"
** (arXiv:2104.10350): hours x processors x average power per processor,
** with TDP standing for the average (an upper bound on the chips' own
** draw). The hardware files give no host, network or cooling power, so
** those and a datacenter's PUE are not counted. The chips that run, not
** the whole instances billed: an idle chip draws far below its TDP. */
double planner_energy_j(const hw_model *hw, int64_t chips, double train_s) {
  return hw->chip.tdp_w > 0 ? hw->chip.tdp_w * (double)chips * train_s : 0;
}

double planner_price_key(const planner_req *req, const run_price *r) {
  switch (req->objective) {
  case PLANNER_TIME: return r->train_s;
  case PLANNER_ENERGY: return r->energy_j;
  default: return r->train_usd;
  }
}

double planner_objective_key(const planner_req *req, const planner_cand *c) {
  run_price r = {.train_s = c->train_s, .train_usd = c->train_usd, .energy_j = c->energy_j};
  return planner_price_key(req, &r);
}

void planner_set_price(planner_cand *c, const run_price *r) {
  c->billed_chips = r->billed_chips;
  c->train_s = r->train_s;
  c->train_usd = r->train_usd;
  c->ckpt_write_s = r->ckpt_write_s;
  c->ckpt_interval_s = r->ckpt_interval_s;
  c->preemptions = r->preemptions;
  c->spot_overhead = r->spot_overhead;
  c->energy_j = r->energy_j;
}

void planner_price_cand(const model *m, const hw_model *hw, const planner_req *req, planner_cand *c,
                       double step_s, int64_t steps) {
  run_price r = planner_price_of(m, hw, req, c->p.chips, step_s, steps);
  planner_set_price(c, &r);
}

