/*
** generic.c -- planning the families that train data-parallel (cnn, mlp,
** dlrm, gbdt, graphs): each hardware at each chip count simulated outright
** (their graphs are small); gbdt on one chip.
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../base/units.h"
#include "../sim/framework.h"
#include "../sim/input.h"
#include "../sim/memory.h"
#include "../sim/optime.h"
#include "../sim/step.h"
#include "planner_int.h"

/* Where the winner keeps its embedding tables, and why, for the reason
** line: what replicating them would need against the chip's memory. */
static void embeddings_reason(const planner_cand *b, const hw_model *hw, bool tables, char *out,
                              size_t n) {
  if (!tables || !hw) return;
  bool tpu = hw->kind == HW_TPU;
  switch (b->p.embeddings) {
  case PLAN_EMB_SHARDED:
    snprintf(out, n, ", its embedding tables sharded over the chips' memory (%s; the looked-up "
             "vectors exchanged by all-to-all, %.3g s a step%s)",
             tpu ? "TPUEmbedding" : "TorchRec row-wise", b->sim.emb_exchange_s,
             hw->chip.sparse_cores > 0 ? ", on the SparseCores, overlapped with the dense layers"
                                       : ", in series with the dense layers");
    break;
  case PLAN_EMB_PS:
    {
      char usd[32];
      units_usd(usd, sizeof usd, b->sim.host_usd_per_hour);
      snprintf(out, n, ", its embedding tables on %lld CPU parameter-server host%s (%s/h more; "
               "rows pulled and gradients pushed over the network, %.3g s a step)",
               (long long)b->sim.ps_hosts, b->sim.ps_hosts == 1 ? "" : "s", usd,
               b->sim.emb_exchange_s);
    }
    break;
  default:
    snprintf(out, n, ", its embedding tables replicated on every chip");
  }
}

/* Each embedding placement's best on one hardware, for saying why the
** winner's placement beat the others. */
typedef struct {
  bool fit;         /* some plan with it fit in memory */
  double key;       /* the objective's value of its best (INFINITY: none fit) */
  double train_s, train_usd;
  int64_t chips;
  double peak;      /* the smallest peak of its plans when none fit */
  bool tried;       /* any plan with it was simulated */
} emb_alt;

static void emb_alt_note(emb_alt *a, const planner_req *req, const planner_cand *c) {
  a->tried = true;
  if (!c->sim.fits) {
    if (!a->fit && (a->peak <= 0 || c->sim.memory.peak < a->peak)) a->peak = c->sim.memory.peak;
    return;
  }
  double key = planner_objective_key(req, c);
  if (!a->fit || key < a->key)
    *a = (emb_alt){.fit = true, .key = key, .train_s = c->train_s, .train_usd = c->train_usd,
                   .chips = c->p.chips, .tried = true};
}

/* The sentence that says why the winner's placement of its tables beat
** the others on the same hardware: each other placement's best run (its
** cost or time against the winner's) or why none fit (its smallest peak
** against the chip's memory); or that --embeddings fixed it. */
static void embeddings_why(const planner_cand *b, const hw_model *hw, const emb_alt alts[3],
                           const planner_req *req, char *out, size_t n) {
  static const char *const NAME[3] = {"replicated on every chip", "sharded over the chips",
                                      "on parameter-server hosts"};
  out[0] = 0;
  if (req->has_embeddings) {
    snprintf(out, n, " The tables' placement is fixed by --embeddings %s.",
             plan_embeddings_names[req->embeddings]);
    return;
  }
  size_t k = (size_t)snprintf(out, n, " Against the other placements on %s:", b->hw);
  int said = 0;
  bool time = req->objective == PLANNER_TIME;
  for (int e = 0; e < 3 && k < n; e++) {
    if (e == (int)b->p.embeddings || !alts[e].tried) continue;
    const emb_alt *a = &alts[e];
    char v[32];
    if (a->fit) {
      if (time) units_seconds(v, sizeof v, a->train_s);
      else units_usd(v, sizeof v, a->train_usd);
      double ratio = time ? a->train_s / b->train_s : a->train_usd / b->train_usd;
      k += (size_t)snprintf(out + k, n - k, "%s %s, %s at best (%lld chip%s, %.2fx)",
                            said ? ";" : "", NAME[e], v, (long long)a->chips,
                            a->chips == 1 ? "" : "s", ratio);
    } else {
      k += (size_t)snprintf(out + k, n - k, "%s %s, no plan fits (%.1f GiB a chip at least, "
                            "against %.1f GiB)", said ? ";" : "", NAME[e], a->peak / (1 << 30),
                            (double)hw->chip.hbm_bytes / (1 << 30));
    }
    said++;
  }
  if (!said) out[0] = 0;
  else if (k < n) snprintf(out + k, n - k, ".");
}

/* Models other than transformers train data-parallel: each hardware at
** each chip count is simulated outright (their graphs are small), and the
** best per objective wins. A whole-step family (gbdt) runs on one chip. */
int planner_generic(const model *m, const hw_catalog *cat, const planner_req *req,
                        planner_result *out, char *err, size_t errn, double t0) {
  double units = req->tokens > 0 ? req->tokens : 0;
  /* a model with embedding tables: each placement of them is a plan
  ** (replicated, sharded over the chips, on parameter-server hosts) */
  plan_emb_tables et;
  plan_embedding_tables(m->g, &et);
  bool tables = et.tables > 0;
  emb_alt (*alts)[3] = calloc((size_t)hw_catalog_count(cat) + 1, sizeof *alts);
  if (!alts) return str_errf(err, errn, "out of memory");
  for (int h = 0; h < hw_catalog_count(cat); h++) {
    const hw_model *hw = hw_catalog_at(cat, h);
    if (!planner_listed(req->hw_list, hw->name)) continue;
    graph_dtype prec;
    if (!planner_hw_allowed(m, hw, req->gemm, out, &prec) || !planner_energy_allowed(req, hw, out)) continue;
    planner_cand best = {0};
    double best_key = INFINITY;
    double smallest_peak = INFINITY;
    planner_cand limited = {0}; /* the best that fit but missed --budget or --deadline */
    bool fit_any = false, checked = false;
    char why[512] = ""; /* the first reason a plan was not valid */
    for (int64_t chips = 1; chips <= (req->chips ? req->chips : req->max_chips); chips *= 2)
    for (int emb = 0; emb <= (tables ? PLAN_EMB_PS : PLAN_EMB_REPLICATED); emb++) {
      if (req->chips && chips != req->chips) continue;
      if (m->info.whole_step && chips > 1) break;
      if (req->has_embeddings && emb != (int)req->embeddings) continue; /* --embeddings */
      /* tables sharded over one chip are the replicated ones */
      if (emb == PLAN_EMB_SHARDED && chips == 1) {
        if (req->has_embeddings && !why[0])
          str_copy(why, sizeof why, "tables sharded over one chip are the replicated ones; "
                   "nearest: --embeddings replicated, or more chips");
        continue;
      }
      plan p = {.chips = chips, .tp = 1, .pp = 1, .ep = 1, .vp = 1, .slices = 1,
                .schedule = PLAN_1F1B, .precision = prec, .op_costs = req->op_costs,
                .embeddings = (plan_embeddings)emb, .cost_cache = req->cost_cache,
                .bf16_weights = req->bf16_weights};
      /* a stack asked for, as simulate takes it (its sharding, gradient
      ** sync, compilation); plan_check refuses what a whole step cannot
      ** take (bf16-only weights) */
      if (req->has_framework) {
        framework_apply(req->framework, &p);
        p.recompute = PLAN_RECOMPUTE_NONE; /* its policy is a transformer layer's */
      }
      /* the recipe asked (--precision tf32; plan_check refuses the
      ** transformer recipes here), else the framework's default (PyTorch:
      ** an fp32 CNN's convolutions on TF32 tensor cores) */
      if (req->gemm != PLAN_GEMM_NATIVE) p.gemm = req->gemm;
      else plan_default_tf32(m, hw, &p);
      char e2[256];
      plan_fault fault;
      if (plan_check_fault(m, hw, &p, &fault, e2, sizeof e2) != 0) {
        out->rejected_by[fault == PLAN_FAULT_DTYPE ? PLANNER_CAUSE_DTYPE : PLANNER_CAUSE_DIVISIBILITY]++;
        if (!why[0]) str_copy(why, sizeof why, e2);
        continue;
      }
      if (!planner_fix_match(&req->fix, &p, true)) { /* --fix: fix.c */
        out->rejected_by[PLANNER_CAUSE_FIXED]++;
        continue;
      }
      planner_cand c = {.p = p};
      snprintf(c.hw, sizeof c.hw, "%s", hw->name);
      /* fed by the host input pipeline simulate assumes (or --input's) */
      input_cfg in;
      int has_in = input_for_run(&in, hw, m, &req->input, p.seq, e2, sizeof e2);
      if (has_in < 0 || step_simulate(m, hw, &p, has_in == 0 ? &in : NULL, &c.sim, NULL, e2, sizeof e2) != 0) {
        out->rejected_by[PLANNER_CAUSE_SLICE]++; /* the network could not run it */
        checked = true;
        if (!why[0]) str_copy(why, sizeof why, e2);
        continue;
      }
      out->evaluated++;
      if (tables && !c.sim.fits) emb_alt_note(&alts[h][emb], req, &c);
      if (!c.sim.fits) {
        out->rejected_by[PLANNER_CAUSE_MEMORY]++;
        if (c.sim.memory.peak < smallest_peak) smallest_peak = c.sim.memory.peak;
        continue;
      }
      c.simulated = true;
      c.analytic_step_s = c.sim.step_time_s;
      double per_step = c.sim.tokens_per_s * c.sim.step_time_s;
      /* a family that knows its job (gbdt: one step per tree) runs it */
      int64_t steps = req->steps > 0                 ? req->steps
                      : units > 0 && per_step > 0    ? (int64_t)ceil(units / per_step)
                      : m->info.job_steps > 0        ? m->info.job_steps
                                                     : 1000;
      planner_price_cand(m, hw, req, &c, c.sim.step_time_s, steps);
      /* parameter-server hosts (--embeddings ps) are billed beside the chips */
      c.train_usd += c.sim.host_usd_per_hour * c.train_s / 3600;
      if (tables) emb_alt_note(&alts[h][emb], req, &c);
      planner_note_closest(out, &c);
      if (!fit_any || c.train_usd < limited.train_usd) limited = c;
      fit_any = true;
      if (req->budget_usd > 0 && c.train_usd > req->budget_usd) {
        out->rejected_by[PLANNER_CAUSE_BUDGET]++;
        continue;
      }
      if (req->deadline_s > 0 && c.train_s > req->deadline_s) {
        out->rejected_by[PLANNER_CAUSE_DEADLINE]++;
        continue;
      }
      if (req->pareto) planner_front_add(&out->pareto, &out->n_pareto, &c); /* pareto.c */
      double key = planner_objective_key(req, &c);
      if (key < best_key) best_key = key, best = c;
    }
    if (isfinite(best_key)) {
      planner_push_cand(&out->per_hw, &out->n_per_hw, &best);
    } else if (fit_any) {
      char t[32], u[32];
      units_seconds(t, sizeof t, limited.train_s);
      units_usd(u, sizeof u, limited.train_usd);
      bool budget = req->budget_usd > 0 && limited.train_usd > req->budget_usd;
      planner_reject *r = planner_add_reject(
          out, hw->name, budget ? PLANNER_CAUSE_BUDGET : PLANNER_CAUSE_DEADLINE,
          "its cheapest plan (%lld chip%s) costs %s and takes %s: outside the %s",
          (long long)limited.p.chips, limited.p.chips == 1 ? "" : "s", u, t,
          budget ? "budget" : "deadline");
      if (r) r->has_closest = true, r->closest = limited;
    } else if (isfinite(smallest_peak)) {
      planner_reject *r = planner_add_reject(
          out, hw->name, PLANNER_CAUSE_MEMORY,
          "no plan fits: the smallest peak is %.1f GiB per chip against %.1f GiB",
          smallest_peak / (1 << 30), (double)hw->chip.hbm_bytes / (1 << 30));
      if (r) {
        r->peak_bytes = smallest_peak;
        r->capacity_bytes = (double)hw->chip.hbm_bytes;
      }
    } else {
      planner_add_reject(out, hw->name, checked ? PLANNER_CAUSE_SLICE : PLANNER_CAUSE_DIVISIBILITY,
                 "no valid plan%s%s", why[0] ? ": " : "", why);
    }
  }
  /* rank every hardware's best */
  out->ranked = calloc((size_t)(out->n_per_hw > 0 ? out->n_per_hw : 1), sizeof *out->ranked);
  for (int i = 0; out->ranked && i < out->n_per_hw; i++) out->ranked[out->n_ranked++] = out->per_hw[i];
  planner_rank(out, req);
  int top = req->top > 0 ? req->top : 5;
  if (out->n_ranked > top) out->n_ranked = top;
  if (out->n_ranked == 0) {
    free(alts);
    char near[512];
    planner_closest_text(out, req, near, sizeof near);
    return str_errf(err, errn, "no hardware can train %s within the limits (closest: %s)", m->name,
                    near);
  }
  out->best = out->ranked[0];
  const planner_cand *b = &out->best;
  /* the other objective's winner, to say what the choice gave up */
  const planner_cand *alt = b;
  for (int i = 0; i < out->n_per_hw; i++) {
    const planner_cand *o = &out->per_hw[i];
    if (req->objective == PLANNER_TIME ? o->train_usd < alt->train_usd : o->train_s < alt->train_s)
      alt = o;
  }
  char tail[512] = "", au[32], bu[32];
  units_usd(au, sizeof au, alt->train_usd);
  units_usd(bu, sizeof bu, b->train_usd);
  if (alt != b && req->objective == PLANNER_TIME)
    snprintf(tail, sizeof tail, " the cheapest is %s: %.3g s per step, %s for the run against %s.",
             alt->hw, alt->sim.step_time_s, au, bu);
  else if (alt != b)
    snprintf(tail, sizeof tail,
             " the fastest, %s, is %.1fx quicker but costs %s against %s: it is billed on "
             "%lld chip%s (whole instances) for a model that %s.",
             alt->hw, b->train_s / alt->train_s, au, bu,
             (long long)alt->billed_chips, alt->billed_chips == 1 ? "" : "s",
             m->info.whole_step ? "runs on one" : "cannot keep them busy");
  int on_cpu = strncmp(b->hw, "cpu", 3) == 0;
  /* After "A CPU is recommended:" the tail goes on the sentence; otherwise it
     starts one. */
  if (!on_cpu && tail[0] == ' ' && tail[1] >= 'a' && tail[1] <= 'z')
    tail[1] = (char)(tail[1] - 'a' + 'A');
  /* under the billing minimum every candidate pays a minute of its VM */
  char minute[256] = "";
  if (req->objective == PLANNER_COST && b->train_s < planner_min_billed_s())
    snprintf(minute, sizeof minute,
             " The run takes %.3g s, under the %.0f s the clouds bill a VM at least: every "
             "candidate pays a minute of its hourly price, so the cheapest VM wins, not the "
             "fastest chip.",
             b->train_s, planner_min_billed_s());
  /* a tree model past the minute: its histogram passes are memory-bound
  ** (workloads/gbdt.c), so a GPU wins on bandwidth per dollar; say the
  ** figures against the cheapest CPU candidate */
  char bound[320] = "";
  const hw_model *bh = hw_catalog_find(cat, b->hw);
  if (strcmp(m->family, "gbdt") == 0 && bh && bh->kind == HW_GPU && !*minute) {
    const planner_cand *cpu = NULL;
    for (int i = 0; i < out->n_per_hw; i++) {
      const hw_model *h = hw_catalog_find(cat, out->per_hw[i].hw);
      if (h && h->kind == HW_CPU && (!cpu || out->per_hw[i].train_usd < cpu->train_usd))
        cpu = &out->per_hw[i];
    }
    const hw_model *ch = cpu ? hw_catalog_find(cat, cpu->hw) : NULL;
    if (ch)
      snprintf(bound, sizeof bound,
               " Building the histograms is memory-bound, so bandwidth per dollar decides: %s "
               "has %.3g GB/s for $%.3g an hour; the cheapest CPU run, on %s, has %.3g GB/s for "
               "$%.3g an hour (%.2gx the time, %.2gx the cost).",
               b->hw, bh->chip.hbm_bw_bytes_per_s / 1e9,
               bh->price.on_demand_usd_per_chip_hour * (double)b->billed_chips, cpu->hw,
               ch->chip.hbm_bw_bytes_per_s / 1e9,
               ch->price.on_demand_usd_per_chip_hour * (double)cpu->billed_chips,
               cpu->train_s / b->train_s, cpu->train_usd / b->train_usd);
  }
  char place[256] = "", others[384] = "";
  embeddings_reason(b, hw_catalog_find(cat, b->hw), tables, place, sizeof place);
  for (int h = 0; tables && h < hw_catalog_count(cat); h++)
    if (strcmp(hw_catalog_at(cat, h)->name, b->hw) == 0)
      embeddings_why(b, hw_catalog_at(cat, h), alts[h], req, others, sizeof others);
  free(alts);
  snprintf(out->why, sizeof out->why,
           "a %s model trains data-parallel%s; %s on %lld chip%s is the %s (%.3g s per step, "
           "%s for the run).",
           m->family, place, b->hw, (long long)b->p.chips, b->p.chips > 1 ? "s" : "",
           req->objective == PLANNER_TIME ? "fastest" : "cheapest", b->sim.step_time_s, bu);
  /* the placements, the other objective's winner, the billing and
  ** bandwidth sentences after it, as far as they fit */
  size_t used = strlen(out->why);
  snprintf(out->why + used, sizeof out->why - used, "%s%s%s%s", others,
           on_cpu ? " A CPU is recommended" : "", on_cpu ? (*tail ? ":" : ".") : "", tail);
  used = strlen(out->why);
  snprintf(out->why + used, sizeof out->why - used, "%s%s", minute, bound);
  out->search_s = units_now_s() - t0;
  return 0;
}
