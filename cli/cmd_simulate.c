/*
** cmd_simulate.c -- `tpusim simulate`: one training step of a model on a
** given machine and plan (sim/step.h), with its report (cli_print_step,
** which `plan --explain` prints too) and, with --trace, its timeline.
*/
#include "cli_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/diag.h"
#include "../base/units.h"
#include "../sim/explain.h"
#include "../sim/framework.h"
#include "../sim/input.h"
#include "../sim/net.h"
#include "../sim/optime.h"
#include "../sim/sched.h"
#include "../viz/trace.h"

const char *const CLI_OP_COSTS[] = {"ir", "formula", NULL}; /* opcost_source order */
const char *const CLI_SIM_FLAGS[] = {"--fsdp", "--sp", "--explain", "--full",
                                     "--pp-split-embedding", "--pp-split-loss",
                                     "--defer-embedding-wgrad-compute", NULL};
const char *const CLI_SIM_VALUED[] = {
    "--hw",   "--chips",     "--dp",        "--tp",           "--pp",
    "--ep",   "--zero",      "--mbs",       "--gbs",          "--seq",
    "--recompute", "--precision", "--pp-schedule", "--reduction-server", "--slices",
    "--trace", "--input", "--storage", "--prefetch", "--input-host", "--grad-sync", "--attention",
    "--attention-kernel", "--op-costs", "--cp", "--cp-comm", "--etp", "--pp-layers", "--pp-layout", "--hsdp", "--offload",
    "--framework", "--embeddings", "--topology", "--set", "--compile", "--tp-overlap",
    "--ep-overlap", "--finetune", "--lora-rank", "--lora-targets", "--vocab-tiling",
    "--weight-dtype", "--moe-dispatcher", "--moe-imbalance", "--wgrad-deferral-limit",
    "--fp8-dot-product-attention", NULL};
static const char *const COMPILE[] = {"off", "on", NULL};

/* --offload none|activations|optimizer, or activations:N (the activations
** of the first N decoder layers of each model chunk, Megatron-Core's
** --cpu-offloading-num-layers; plan_check bounds N by the model). */
static int offload_opt(cli_ctx *c, plan *p) {
  const char *v = cli_opt(c, "--offload");
  static const char pre[] = "activations:";
  if (v && strncmp(v, pre, sizeof pre - 1) == 0) {
    const char *n = v + sizeof pre - 1;
    char *end;
    errno = 0;
    long long k = strtoll(n, &end, 10);
    if (end == n || *end || errno || k < 1 || k > CLI_MAX_LAYERS) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "--offload '%.64s': expected activations:N, N a whole number of layers from 1 to "
               "%lld (the first N of each model chunk), found '%.32s'",
               v, (long long)CLI_MAX_LAYERS, n);
      return cli_usage_error(c, "%s", msg);
    }
    p->offload = PLAN_OFFLOAD_ACTIVATIONS;
    p->offload_layers = k;
    return 0;
  }
  int off;
  if (cli_enum_opt(c, "--offload", plan_offload_names, 0, &off)) return -1;
  /* an explicit none beside named tensors sent to the host is a
  ** contradiction, not a default for plan_check to fill in */
  if (v && off == PLAN_OFFLOAD_NONE && p->remat_offload)
    return cli_usage_error(c, "--offload none: --recompute %.200s sends named tensors to the host "
                           "(nearest: --offload activations, or NAME=device for each of them)",
                           cli_opt(c, "--recompute"));
  p->offload = (plan_offload)off;
  return 0;
}

/* The plan of simulate's flags on hw: the framework's profile (--framework,
** else the chip kind's default), then every flag given over it. stages
** holds --pp-layers' numbers (the plan points into it), or --pp-layout's,
** whose multi-token-prediction layers go in *layout_mtp (-1: no layout). */
static int plan_from_opts(cli_ctx *c, const hw_model *hw, plan *p, int32_t *stages, int max_stages,
                          int64_t *layout_mtp) {
  *p = (plan){.tp = 1, .pp = 1, .ep = 1, .cp = 1, .etp = 1, .mbs = 0, .vp = 1, .slices = 1,
              .schedule = PLAN_1F1B, .precision = GDT_BF16};
  int fw;
  if (cli_enum_opt(c, "--framework", framework_names, 0, &fw)) return CLI_USAGE;
  framework_apply(cli_opt(c, "--framework") ? fw : framework_default(hw->kind), p);
  int64_t *counts[] = {&p->chips, &p->dp, &p->tp, &p->pp, &p->ep, &p->mbs, &p->gbs, &p->seq,
                       &p->reduction_server, &p->slices, &p->cp, &p->etp, &p->hsdp};
  static const char *const names[] = {"--chips", "--dp", "--tp", "--pp", "--ep", "--mbs",
                                      "--gbs", "--seq", "--reduction-server", "--slices",
                                      "--cp", "--etp", "--hsdp"};
  static const int64_t hi[] = {CLI_MAX_CHIPS, CLI_MAX_CHIPS, CLI_MAX_CHIPS, CLI_MAX_CHIPS,
                               CLI_MAX_CHIPS, CLI_MAX_BATCH, CLI_MAX_BATCH, CLI_MAX_SEQ,
                               CLI_MAX_CHIPS, CLI_MAX_CHIPS, CLI_MAX_CHIPS, CLI_MAX_CHIPS,
                               CLI_MAX_CHIPS};
  for (int i = 0; i < 13; i++)
    if (cli_opt_int(c, names[i], 1, hi[i], counts[i])) return CLI_USAGE;
  static const char *const ZERO[] = {"0", "1", "2", "3", NULL};
  int prec, zero, gsync, attn, costs, cpc, emb, comp, tpo, epo, ak, disp;
  if (cli_enum_opt(c, "--precision", plan_precision_names, 0, &prec) ||
      cli_enum_opt(c, "--zero", ZERO, 0, &zero) ||
      cli_enum_opt(c, "--grad-sync", plan_grad_sync_names, 0, &gsync) ||
      cli_enum_opt(c, "--attention", plan_attention_names, 0, &attn) ||
      cli_enum_opt(c, "--attention-kernel", plan_attn_kernel_names, 0, &ak) ||
      cli_enum_opt(c, "--op-costs", CLI_OP_COSTS, 0, &costs) ||
      cli_enum_opt(c, "--cp-comm", plan_cp_comm_names + 1, 0, &cpc) ||
      cli_enum_opt(c, "--embeddings", plan_embeddings_names, 0, &emb) ||
      cli_enum_opt(c, "--compile", COMPILE, 0, &comp) ||
      cli_enum_opt(c, "--tp-overlap", COMPILE, 0, &tpo) ||
      cli_enum_opt(c, "--ep-overlap", COMPILE, 0, &epo) ||
      cli_enum_opt(c, "--moe-dispatcher", plan_moe_dispatcher_names + 1, 0, &disp) ||
      cli_opt_num(c, "--moe-imbalance", CLI_MOE_IMBALANCE, &p->moe_imbalance))
    return CLI_USAGE;
  if (cli_opt(c, "--moe-dispatcher")) p->moe_dispatcher = (plan_moe_dispatcher)(disp + 1);
  if (cli_opt(c, "--ep-overlap")) {
    char msg[256];
    if (p->ep <= 1)
      return cli_usage_error(c, "%s", "--ep-overlap: ep is 1, so there are no expert-parallel "
                                      "all-to-alls to overlap; give --ep 2 or more");
    if (epo == 1 && framework_check_ep_overlap(p->framework, msg, sizeof msg) != 0)
      return cli_usage_error(c, "--ep-overlap: %s", msg);
    p->ep_overlap = epo == 1 ? PLAN_EP_OVERLAP_ON : PLAN_EP_OVERLAP_OFF;
  }
  if (cli_opt(c, "--tp-overlap")) {
    if (p->tp <= 1)
      return cli_usage_error(c, "%s", "--tp-overlap: tp is 1, so there are no tensor-parallel "
                                      "collectives to overlap; give --tp 2 or more");
    p->tp_overlap = tpo == 1;
  }
  p->embeddings = (plan_embeddings)emb;
  if (cli_opt(c, "--compile")) {
    /* only a PyTorch stack chooses: XLA always compiles, Megatron's kernels
    ** are fused by hand */
    char msg[384];
    if (framework_check_compile(p->framework, msg, sizeof msg) != 0)
      return cli_usage_error(c, "--compile: %s", msg);
    p->eager = comp == 0;
  }
  if (cli_opt(c, "--attention")) p->attention = (plan_attention)attn;
  if (cli_opt(c, "--attention-kernel")) {
    if (p->attention != PLAN_ATTN_FLASH)
      return cli_usage_error(c, "%s", "--attention-kernel: the scores go through HBM (--attention "
                                      "scores), no fused kernel runs; drop one of the two");
    p->attn_kernel = (plan_attn_kernel)ak;
  }
  if (cli_opt(c, "--grad-sync")) p->grad_sync = (plan_grad_sync)gsync;
  if (cli_opt(c, "--zero")) p->zero = zero;
  if (cli_opt(c, "--fsdp") && cli_opt(c, "--zero") && zero != 3)
    return cli_usage_error(c, "--fsdp is ZeRO stage 3 (parameters sharded too); --zero %s says "
                           "otherwise: give one of the two", cli_opt(c, "--zero"));
  if (cli_opt(c, "--fsdp")) p->zero = 3;
  p->op_costs = (opcost_source)costs;
  const char *rec = cli_opt(c, "--recompute");
  if (rec) {
    char msg[384];
    if (plan_recompute_parse(rec, p, msg, sizeof msg) != 0)
      return cli_usage_error(c, "--recompute %s", msg);
    char why[256];
    if (p->recompute_modules && framework_check_recompute_modules(p->framework, why, sizeof why)) {
      snprintf(msg, sizeof msg, "%.64s: %s", rec, why);
      return cli_usage_error(c, "--recompute %s", msg);
    }
  }
  /* else the framework's (framework_cp_comm) */
  if (cli_opt(c, "--cp-comm")) p->cp_comm = (plan_cp_comm)(cpc + 1);
  if (offload_opt(c, p) != 0) return CLI_USAGE;
  plan_precision_parse(plan_precision_names[prec], p);
  /* --weight-dtype (MaxText's weight_dtype): bf16 keeps the parameters,
  ** gradients and optimizer states in the bf16 compute dtype */
  if (cli_weight_opts(c, p) != CLI_OK) return CLI_USAGE;
  p->sp = cli_opt(c, "--sp") != NULL;
  p->full = cli_opt(c, "--full") != NULL;
  p->pp_split_embedding = cli_opt(c, "--pp-split-embedding") != NULL;
  p->pp_split_loss = cli_opt(c, "--pp-split-loss") != NULL;
  char serr[256];
  const char *sched = cli_opt(c, "--pp-schedule");
  if (sched && plan_schedule_parse(sched, p, serr, sizeof serr) != 0)
    return cli_usage_error(c, "%s", serr);
  const char *topo = cli_opt(c, "--topology"); /* plan_check says whether it is offered */
  if (topo && net_shape_parse(topo, p->slice_shape, &p->slice_twisted, serr, sizeof serr) != 0)
    return cli_usage_error(c, "%s", serr);
  const char *layers = cli_opt(c, "--pp-layers");
  if (layers) {
    if (plan_pp_layers_parse(layers, stages, max_stages, &p->n_pp_layers, serr, sizeof serr) != 0)
      return cli_usage_error(c, "%s", serr);
    p->pp_layers = stages;
  }
  /* Megatron-Core's layout, as a recipe spells it: the same split */
  const char *layout = cli_opt(c, "--pp-layout");
  *layout_mtp = -1;
  if (layout) {
    if (layers || p->pp_split_embedding || p->pp_split_loss)
      return cli_usage_error(c, "--pp-layout places the layers, the embedding and the loss itself: "
                                "give it without %s",
                             layers ? "--pp-layers" : p->pp_split_embedding ? "--pp-split-embedding"
                                                                             : "--pp-split-loss");
    if (plan_pp_layout_parse(layout, stages, max_stages, &p->n_pp_layers, layout_mtp, serr,
                             sizeof serr) != 0)
      return cli_usage_error(c, "%s", serr);
    if (p->n_pp_layers != p->pp * p->vp) {
      snprintf(serr, sizeof serr, "--pp-layout '%.128s' has %d stages, but pp %lld x V %lld = %lld",
               layout, p->n_pp_layers, (long long)p->pp, (long long)p->vp, (long long)(p->pp * p->vp));
      return cli_usage_error(c, "%s", serr);
    }
    p->pp_layers = stages;
  }
  return CLI_OK;
}

/* A choice for something the plan does not do: what Megatron-LM does
** with it (validate_args turns sequence parallelism off at tp 1; the CP
** communication type is read only with cp > 1), said, not dropped; once
** the model has taken the flags (cli_model_flags). */
static void plan_notes(cli_ctx *c, const plan *p) {
  if (cli_opt(c, "--cp-comm") && p->cp <= 1)
    fprintf(c->err, "tpusim simulate: note: --cp-comm %s with cp 1: no keys and values are "
                    "exchanged, so it changes nothing\n", cli_opt(c, "--cp-comm"));
  if (cli_opt(c, "--sp") && p->tp <= 1)
    fprintf(c->err, "tpusim simulate: note: --sp with tp 1: no tensor-parallel group to split the "
                    "sequence over; sequence parallelism off, as Megatron-LM turns it off at tp 1\n");
}

/* The host input pipeline from --input, --storage, --prefetch, --input-host
** (sim/input.h input_for_run, as plan takes them): *has 0 where the chip
** reads its host's memory itself (a CPU: no input model). */
static int input_from_opts(cli_ctx *c, const hw_model *hw, const model *m, int64_t seq,
                           input_cfg *in, bool *has, char *err, size_t errn) {
  input_choice ch;
  if (cli_input_choice(c, &ch) != CLI_OK) return CLI_USAGE;
  int rc = input_for_run(in, hw, m, &ch, seq, err, errn);
  if (rc < 0) return CLI_BAD_INPUT;
  *has = rc == 0;
  /* said, not dropped: the flags shape a pipeline this chip does not have */
  static const char *const FLAGS[] = {"--input", "--storage", "--prefetch", "--input-host"};
  for (size_t i = 0; rc == 1 && i < sizeof FLAGS / sizeof *FLAGS; i++)
    if (cli_opt(c, FLAGS[i])) {
      fprintf(c->err, "tpusim simulate: note: %s: %s reads its samples from its own host memory, "
                      "so there is no host-to-chip input pipeline to shape; it changes nothing\n",
              FLAGS[i], hw->name);
      break;
    }
  return CLI_OK;
}

/* When the chips wait for data: what bounds the input pipeline (its closed
** form, sim/input.h), the fix for that bound, and what the wait costs. */
static void print_input_fix(FILE *out, const hw_model *hw, const plan *p, const input_cfg *in,
                            const step_result *r) {
  double stall = r->breakdown_s.input_stall;
  if (!(stall > 0.01 * r->step_time_s)) return;
  input_cfg c = *in;
  input_per_host(&c, p->chips, hw->chips_per_node, p->gbs);
  input_closed ic;
  char err[256];
  if (input_closed_form(&c, r->step_time_s - stall, &ic, err, sizeof err) != 0) return;
  static const struct {
    const char *bound, *fix;
  } FIX[] = {
      {INPUT_BOUND_STORAGE_LATENCY, "one GET per small file: pack the samples into record shards "
                                    "(--storage shards: TFRecord, WebDataset) or read more in flight"},
      {INPUT_BOUND_STORAGE_BW, "storage bandwidth: cache the dataset on local NVMe or in host RAM, "
                               "or read from a faster tier"},
      {INPUT_BOUND_DECODE, "host CPUs decoding: more host cores, decode on the accelerator (NVIDIA "
                           "DALI), or store pre-decoded / smaller samples"},
      {INPUT_BOUND_HOST_LINK, "the host-to-chip copy: smaller samples (uint8, not float), or a "
                              "local host (a TPU VM rather than a TPU Node)"},
      {INPUT_BOUND_PREFETCH, "a batch's latency is not hidden: prefetch deeper (--prefetch N)"},
  };
  const char *fix = "";
  for (size_t i = 0; i < sizeof FIX / sizeof *FIX; i++)
    if (strcmp(FIX[i].bound, ic.bound) == 0) fix = FIX[i].fix;
  /* one remote VM decoding and sending for the whole slice (TPU Node):
  ** the TPU hosts' own cores and PCIe do it on a TPU VM */
  if (in->one_host && (strcmp(ic.bound, INPUT_BOUND_DECODE) == 0 ||
                       strcmp(ic.bound, INPUT_BOUND_HOST_LINK) == 0))
    fix = "one remote VM feeds every chip: run the pipeline on the TPU hosts (a TPU VM, "
          "--input-host local), or give the VM more cores and network";
  char usd[32], wait[32];
  units_usd(usd, sizeof usd, stall * r->usd_per_hour / 3600);
  units_seconds(wait, sizeof wait, stall);
  fprintf(out, "  input            the chips wait %s a step (%.0f%%, %s a step) for data, "
               "bound by %s\n    fix: %s\n",
          wait, 100 * stall / r->step_time_s, usd, ic.bound, fix);
}

/* One side of the explanation: each term's value (rounded so that the
** printed parts add up to the printed total), name, formula and numbers. */
static void print_terms(FILE *out, const char *title, const explain_term *t, int n, double total,
                        explain_unit u, const char *total_name) {
  double v[EXPLAIN_MAX_TERMS] = {0};
  int64_t q[EXPLAIN_MAX_TERMS] = {0}, tq = 0;
  for (int i = 0; i < n; i++) v[i] = t[i].value;
  if (explain_round(v, n, total, u, q, &tq) != 0) {
    /* never print parts that do not add up: say so instead */
    fprintf(out, "  %s: the terms do not add up to the total (a bug; please report it)\n", title);
    return;
  }
  double unit_q = pow(10, -u.decimals);
  fprintf(out, "  %s (%s; the parts add up to the total):\n", title, u.name);
  for (int i = 0; i < n; i++)
    fprintf(out, "    %-22s %12.*f %-3s = %s\n%31s= %s\n", t[i].name, u.decimals,
            (double)q[i] * unit_q, u.name, t[i].formula, "", t[i].values);
  fprintf(out, "    %-22s %12.*f %s\n", total_name, u.decimals, (double)tq * unit_q, u.name);
}

/* --explain: the step time and the memory peak term by term (sim/explain.h). */
static void print_explain(FILE *out, const model *m, const hw_model *hw, const plan *p,
                          const step_result *r) {
  step_explain e;
  step_explain_fill(m, hw, p, r, &e);
  fprintf(out, "\n");
  print_terms(out, "step time, term by term on chip 0", e.time, e.n_time, e.step_time_s,
              explain_time_unit(e.step_time_s), "= step time");
  print_terms(out, "memory per chip, term by term", e.mem, e.n_mem, e.peak_bytes,
              explain_mem_unit(e.peak_bytes), "= peak");
}

/* simulate's report: the step, its breakdown, memory with the fixes when it
** does not fit, cost; with `explain`, the per-chip pieces behind it. Also
** what `plan --explain N` prints for a candidate. */
/* "4x4x8", "4x4x8t" twisted, or "16x16" for a 2-D slice, as --topology
** takes it */
static const char *slice_str(const plan *p) {
  static _Thread_local char buf[64];
  const int64_t *s = p->slice_shape;
  hw_shape_text(s, s[2] == 1 ? 2 : 3, p->slice_twisted, buf, sizeof buf);
  return buf;
}

void cli_print_step(FILE *out, const model *m, const hw_model *hw, const plan *p,
                       const step_result *r, bool explain) {
  char t[32];
  units_seconds(t, sizeof t, r->step_time_s);
  char extra[96] = "";
  size_t k = 0;
  if (p->cp > 1) k += (size_t)snprintf(extra + k, sizeof extra - k, ", cp %lld", (long long)p->cp);
  if (p->ep > 1) k += (size_t)snprintf(extra + k, sizeof extra - k, ", ep %lld", (long long)p->ep);
  if (p->etp > 1) k += (size_t)snprintf(extra + k, sizeof extra - k, ", etp %lld", (long long)p->etp);
  if (p->slice_shape[0] > 0 && k < sizeof extra)
    k += (size_t)snprintf(extra + k, sizeof extra - k, ", slice %s", slice_str(p));
  if (p->gemm != PLAN_GEMM_NATIVE && k < sizeof extra)
    snprintf(extra + k, sizeof extra - k, ", %s", plan_precision_label(p));
  fprintf(out, "%s on %lld x %s: dp %lld, tp %lld, pp %lld%s%s, mbs %lld, gbs %lld, %lld micro-batches\n",
          m->name, (long long)p->chips, hw->name, (long long)p->dp, (long long)p->tp,
          (long long)p->pp, p->sp ? " (sp)" : "", extra, (long long)p->mbs, (long long)p->gbs,
          (long long)r->microbatches);
  /* MFU is against the 16-bit peak (docs/simulator.md); under a format
  ** whose matrix peak is higher, also say what fraction of that it is, so
  ** an fp8 run's 100 % does not read as a chip past its limit */
  char lowp[64] = "";
  double p16 = optime_peak_flops(hw, p->precision), pf = plan_gemm_peak_flops(hw, p);
  if (p->gemm != PLAN_GEMM_NATIVE && p->gemm != PLAN_GEMM_TF32 && p16 > 0 && pf > 1.01 * p16)
    snprintf(lowp, sizeof lowp, " (%.1f%% of the %s peak)", 100 * r->mfu * p16 / pf,
             plan_precision_label(p));
  fprintf(out, "  step time        %s   MFU %.1f%%%s   HFU %.1f%%   %.*f %s/s\n", t, 100 * r->mfu, lowp,
          100 * r->hfu, r->tokens_per_s < 100 ? 2 : 0, r->tokens_per_s,
          m->info.unit ? m->info.unit : "tokens");
  char bd[5][32];
  const double bds[5] = {r->breakdown_s.compute, r->breakdown_s.exposed_comm,
                         r->breakdown_s.pipeline_bubble, r->breakdown_s.input_stall,
                         r->breakdown_s.other};
  /* a part under a billionth of the step is the rounding of a difference
  ** (the bubble of pp 1: step - busy - ...): 0, not "0.00 ns" */
  for (int i = 0; i < 5; i++)
    units_seconds(bd[i], sizeof bd[i], fabs(bds[i]) < 1e-9 * r->step_time_s ? 0 : bds[i]);
  fprintf(out, "  breakdown        compute %s, exposed comm %s, bubble %s, input stall %s, other %s\n",
          bd[0], bd[1], bd[2], bd[3], bd[4]);
  char pk[32], cap[32], w[32], g[32], op[32], ac[32], tm[32];
  units_bytes(pk, sizeof pk, r->memory.peak);
  units_bytes(cap, sizeof cap, r->memory.capacity);
  units_bytes(w, sizeof w, r->memory.weights);
  units_bytes(g, sizeof g, r->memory.gradients);
  units_bytes(op, sizeof op, r->memory.optimizer);
  units_bytes(ac, sizeof ac, r->memory.activations);
  units_bytes(tm, sizeof tm, r->memory.temporary);
  char rt[32], cm[32], fr[32], wc[32], ho[32], wcs[64] = "";
  units_bytes(rt, sizeof rt, r->memory.runtime);
  units_bytes(cm, sizeof cm, r->memory.comm);
  units_bytes(fr, sizeof fr, r->memory.fragmentation);
  units_bytes(wc, sizeof wc, r->memory.weight_copies);
  units_bytes(ho, sizeof ho, r->memory.host);
  if (r->memory.weight_copies > 0) snprintf(wcs, sizeof wcs, " (%s low-precision copies)", wc);
  fprintf(out, "  memory per chip  peak %s of %s: %s (weights %s%s, gradients %s, optimizer %s, "
                  "activations %s, temporary %s, runtime %s, communicators %s",
          pk, cap, r->fits ? "fits" : "DOES NOT FIT", w, wcs, g, op, ac, tm, rt, cm);
  if (r->memory.fragmentation > 0) fprintf(out, ", fragmentation %s", fr);
  fprintf(out, ")%s%s\n", r->memory.host > 0 ? "; on the host " : "", r->memory.host > 0 ? ho : "");
  for (int i = 0; i < r->n_fixes; i++) {
    units_bytes(pk, sizeof pk, r->fixes[i].peak);
    char st[96] = "", usd[32], fst[32];
    units_seconds(fst, sizeof fst, r->fixes[i].step_time_s);
    /* its bill a step: the hourly price scales with its chips */
    units_usd(usd, sizeof usd, r->fixes[i].step_time_s * r->usd_per_hour *
                                   (double)r->fixes[i].p.chips / (double)p->chips / 3600);
    if (r->fixes[i].step_time_s > 0)
      snprintf(st, sizeof st, ", step %s (%+.1f%%), %s a step", fst,
               100 * (r->fixes[i].step_time_s / r->step_time_s - 1), usd);
    fprintf(out, "    fix %d: %s -> peak %s%s%s\n", i + 1, r->fixes[i].what, pk,
            r->fixes[i].fits ? " (fits)" : "", st);
  }
  char hour[32], step[32];
  units_usd(hour, sizeof hour, r->usd_per_hour);
  units_usd(step, sizeof step, r->usd_per_step);
  fprintf(out, "  cost             %s per hour, %s per step\n", hour, step);
  if (explain) {
    print_explain(out, m, hw, p, r);
    const double pcs[14] = {r->layer_fwd_s,   r->tp_comm_fwd_s, r->layer_bwd_s,    r->tp_comm_bwd_s,
                            r->attn_core_fwd_s, r->head_fwd_s,  r->head_bwd_s,     r->p2p_s,
                            r->dp_allreduce_s, r->optimizer_s,  r->cp_comm_fwd_s,  r->cp_comm_bwd_s,
                            r->ep_a2a_fwd_s,   r->weight_cast_s};
    char pc[14][32];
    for (int i = 0; i < 14; i++) units_seconds(pc[i], sizeof pc[i], pcs[i]);
    fprintf(out, "\n  per chip, per micro-batch: one layer forward %s + TP comm %s; "
                    "backward %s + TP comm %s; attention core forward %s\n"
                    "  embedding+head forward %s, backward %s; pipeline send %s; "
                    "gradient all-reduce %s; optimizer %s\n",
            pc[0], pc[1], pc[2], pc[3], pc[4], pc[5], pc[6], pc[7], pc[8], pc[9]);
    if (r->cp_comm_fwd_s > 0 || r->ep_a2a_fwd_s > 0 || r->weight_cast_s > 0)
      fprintf(out, "  context-parallel K/V exchange %s forward, %s backward (%s); MoE "
                   "all-to-alls %s a layer each way%s; low-precision weight copies %s a step\n",
              pc[10], pc[11],
              framework_cp_pytorch(p->framework)
                  ? (framework_cp_comm(p) == PLAN_CP_RING
                         ? "PyTorch's context_parallel: K/V repeated to the query heads round a "
                           "ring, dK/dV back in fp32, hidden behind each step as far as it lasts"
                         : "PyTorch's context_parallel: K/V repeated to the query heads, "
                           "all-gathered under the first local block, dK/dV round the ring in fp32")
              : framework_cp_comm(p) == PLAN_CP_RING ? "a ring, hidden behind the attention as far as it lasts"
                                           : "all-gathered before the attention",
              pc[12],
              p->ep < 2 ? ""
              : framework_moe_node_dedup(p)
                  ? " (flex dispatcher: a copy per destination node, then per rank)"
                  : " (alltoall dispatcher: a copy per chosen expert, sorted by expert on arrival)",
              pc[13]);
    if (p->defer_embedding_wgrad && r->head_wgrad_s > 0) {
      /* the drain's figures as the schedule takes them (sim/sched.h) */
      sched_desc dd = {.M = r->microbatches, .defer = true, .defer_limit = p->wgrad_deferral_limit,
                       .b_last_defer = r->head_wgrad_s, .drain_ag_s = r->head_wgrad_ag_s};
      char w[32], g[32], dr[32];
      units_seconds(w, sizeof w, r->head_wgrad_s);
      units_seconds(g, sizeof g, r->head_wgrad_ag_s);
      units_seconds(dr, sizeof dr, sched_drain_s(&dd));
      fprintf(out, "  output layer's weight gradients deferred (--defer-embedding-wgrad-compute): "
                   "%lld of %lld micro-batches' GEMMs, %s each%s%s%s, run in the flush after the "
                   "last stage's last backward: %s\n",
              (long long)sched_deferred(&dd), (long long)r->microbatches, w,
              r->head_wgrad_ag_s > 0 ? " behind a " : "", r->head_wgrad_ag_s > 0 ? g : "",
              r->head_wgrad_ag_s > 0 ? " all-gather of its input" : "", dr);
    }
    double f8, b8;
    if (framework_fp8_attention(p, hw, &f8, &b8)) {
      bool mx = p->gemm == PLAN_GEMM_MXFP8;
      fprintf(out, "  attention core in %s (--fp8-dot-product-attention; Transformer Engine's "
                   "fp8_dpa): cuDNN's %s kernel at %.3gx its bf16 rate forward, %.3gx backward "
                   "(chip.attention_%s_*_speedup)\n",
              mx ? "MXFP8" : "fp8", mx ? "MXFP8" : "fp8", f8, b8, mx ? "mxfp8" : "fp8");
    }
    if (plan_moe_load(p) > 1)
      fprintf(out, "  uneven routing: the busiest chip of each expert group receives %.3g times the "
                   "even share of the routed tokens (--moe-imbalance), and its expert GEMMs, "
                   "all-to-alls and expert activations set the step\n",
              plan_moe_load(p));
    /* the chip's own limits that no plan changes, where its file gives them */
    const hw_chip *hc = &hw->chip;
    if (hc->sustained_clock_ratio > 0 && hc->sustained_clock_ratio < 1) {
      /* a TPU's default clock state (libtpu's DVFS p-state), a GPU's power
      ** limit */
      char lim[48] = "its power limit";
      if (hc->tdp_w > 0) snprintf(lim, sizeof lim, "its power limit, %.0f W", hc->tdp_w);
      fprintf(out, "  chip %s: cores at %.3f of the clock its compute figures hold at (%s; "
                   "chip.sustained_clock_ratio), HBM at full speed\n",
              hw->name, hc->sustained_clock_ratio, hw->kind == HW_TPU ? "its default clock state" : lim);
    }
    /* the measured table's rate at this plan's attention output
    ** projection (every transformer has one: rows a micro-batch's tokens
    ** on a chip, K the heads' share of it), as the step timed it */
    const wl_tf_dims *td = &m->info.tf;
    optime_result mr;
    char merr[160];
    int64_t rows = p->mbs * p->seq / (p->cp > 1 ? p->cp : 1);
    int64_t attn = td->heads * td->head_dim / (p->tp > 0 ? p->tp : 1);
    if (hc->has_matmul_shape && td->layers > 0 && rows > 0 && attn > 0 &&
        optime_matmul(hw, 1, rows, td->hidden, attn, p->precision, &mr, merr, sizeof merr) == 0)
      fprintf(out, "  chip %s: GEMMs at the measured rate of their shape (chip.matmul_shape): the "
                   "attention output projection, %lld x %lld x %lld, at %.3f of the peak, against "
                   "%.3f at the best shape\n",
              hw->name, (long long)rows, (long long)td->hidden, (long long)attn, mr.efficiency,
              hw_clocked(hc, hc->matmul_efficiency));
    if (m->info.tf.experts > 0 &&
        (hw_grouped_gemm_ceiling(hw, false) < 1 || hw_grouped_gemm_ceiling(hw, true) < 1))
      fprintf(out, "  chip %s: grouped expert GEMMs at %.3f of the peak forward and %.3f backward "
                   "at large groups (chip.grouped_gemm_efficiency), less at fewer tokens a group\n",
              hw->name, hc->grouped_gemm_efficiency, hc->grouped_gemm_bwd_efficiency);
    const framework *fw = &frameworks[p->framework];
    /* which kernel's measured rate the attention core ran at, where the
    ** framework calls another than the chip's best (sim/stepcost.c) */
    if (p->attention == PLAN_ATTN_FLASH && m->info.tf.layers > 0) { /* a model with attention */
      const char *field;
      double fe, be;
      const double *seq;
      const char *kern = framework_attention_kernel(p->framework, p->attn_kernel, hc, &fe, &be, &field, &seq);
      if (kern)
        fprintf(out, "  chip %s: the attention core at %s rate, %.3f of the peak forward and %.3f "
                     "backward (chip.%s%s), the kernel %s\n",
                hw->name, kern, fe, be, field,
                seq ? ", by sequence length chip.attention_cudnn_seq" : "",
                p->attn_kernel ? "--attention-kernel names" : "the framework calls");
      else if (p->attn_kernel == PLAN_AK_BEST)
        fprintf(out, "  chip %s: the attention core at the chip's own measured rate (chip.attention_"
                     "fwd_efficiency, attention_bwd_efficiency), as --attention-kernel best asks\n",
                hw->name);
    }
    bool epo = framework_moe_a2a_overlap(p->framework, p, hw);
    fprintf(out, "  framework %s: %s\n    attention %s, gradient sync %s, %s%s, TP overlap %s%s, "
                 "%s%s\n    source: %s\n",
            framework_names[p->framework], fw->what, plan_attention_names[p->attention], plan_grad_sync_names[p->grad_sync],
            p->zero >= 3 ? "parameters sharded (ZeRO-3/FSDP)"
            : p->zero >= 1 ? "distributed optimizer (ZeRO-1)" : "optimizer replicated",
            p->zero >= 1 && p->param_gather_overlap ? ", parameter gathers overlapped" : "",
            p->tp_overlap ? "on"
            : fw->tp_bwd_async ? "off (the backward's collectives asynchronous under its GEMMs)"
                               : "off",
            p->ep <= 1 ? "" : epo ? ", EP all-to-all overlap on" : ", EP all-to-all overlap off",
            p->eager ? "eager kernels (--compile off: one an op, library kernels fused)"
                     : "kernels fused (compiled, or fused by hand)",
            r->memory.lowp_params
                ? ", linear weights kept in the fp8/fp4 recipe's format only (fp8 parameters)"
                : "",
            fw->source);
    const opcost_stats *st = &r->op_costs;
    if (p->op_costs == OPCOST_FORMULA)
      fprintf(out, "  op costs: %lld kernels from the graph's formulas (--op-costs formula)\n",
              (long long)st->asked);
    else
      fprintf(out, "  op costs: %lld kernels read off their LLVM IR: %lld signatures lowered, "
                   "%lld from the cache; %lld with declared costs (custom-calls, collectives)%s\n",
              (long long)(st->asked - st->declared), (long long)st->lowered, (long long)st->hits,
              (long long)st->declared,
              st->differ ? "; the IR count DIFFERS from the fusion pass's for some (a bug)" : "");
  }
  if (p->full && r->full_chips > 0)
    fprintf(out, "  full machine     %lld chips on one network: the %lld data-parallel rings "
                    "at once run %.2fx one ring alone%s\n",
            (long long)r->full_chips, (long long)r->full_groups, r->full_contention,
            r->full_contention > 1.001 ? " (the all-reduce is scaled by it)" : " (no contention)");
}

/* The trace of a simulated step, written from its timeline (then freed). */
static int trace_out(FILE *f, step_timeline *tl, const step_result *r, const plan *p,
                     const model *m, const hw_model *hw, char *err, size_t errn) {
  int rc = trace_write_limit(f, tl, r, p, m->name, hw->name, TRACE_MAX_BYTES, err, errn);
  step_timeline_free(tl);
  return rc;
}

static int run_simulate(cli_ctx *c) {
  if (c->n_pos != 1) return cli_usage_error(c, "%s", "expected one MODEL");
  if (!cli_opt(c, "--hw") || !cli_opt(c, "--chips"))
    return cli_usage_error(c, "%s", "--hw and --chips are required");
  hw_catalog *cat;
  int rc = cli_load_catalog(c, &cat, NULL);
  if (rc != CLI_OK) return rc;
  const hw_model *hw = hw_catalog_find(cat, cli_opt(c, "--hw"));
  if (!hw) {
    char msg[2048];
    hw_catalog_unknown(cat, cli_opt(c, "--hw"), msg, sizeof msg);
    fprintf(c->err, "tpusim simulate: %s\n", msg);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  plan p;
  static int32_t stages[2048];
  int64_t layout_mtp;
  if ((rc = plan_from_opts(c, hw, &p, stages, 2048, &layout_mtp)) != CLI_OK) {
    hw_catalog_free(cat);
    return rc;
  }
  diag *dg = diag_new();
  /* without --precision the model trains in its own (its train block's;
  ** bf16 falls back to fp16 on a chip without bf16, as plan does) */
  bool own_prec = !cli_opt(c, "--precision");
  model_opts mo = {.seq_len = p.seq, .precision = own_prec ? NULL : plan_precision_name(p.precision)};
  const char *sets[MODEL_MAX_SETS];
  if (cli_model_sets(c, &mo, sets) != CLI_OK || cli_model_finetune(c, &mo, p.framework) != CLI_OK) {
    diag_free(dg);
    hw_catalog_free(cat);
    return CLI_USAGE;
  }
  model *m = model_load(c->pos[0], &mo, dg);
  if (m && cli_model_flags(c, m) != CLI_OK) {
    diag_print(dg, c->err);
    diag_free(dg);
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  /* a layout's m's are Megatron-Core's mtp_num_layers: the depths (a
  ** repeated module runs several); its t's the decoder layers */
  int64_t depth = m ? m->info.tf.mtp_depth : 0;
  int64_t placed = 0;
  for (int i = 0; layout_mtp >= 0 && i < p.n_pp_layers; i++) placed += p.pp_layers[i];
  if (m && layout_mtp >= 0 && (layout_mtp != depth || placed != m->info.tf.layers)) {
    if (layout_mtp != depth)
      fprintf(c->err, "tpusim simulate: --pp-layout '%s' places %lld multi-token-prediction layers "
                      "(m); %s has %lld (mtp_num_layers / num_nextn_predict_layers)\n",
              cli_opt(c, "--pp-layout"), (long long)layout_mtp, c->pos[0], (long long)depth);
    else
      fprintf(c->err, "tpusim simulate: --pp-layout '%s' places %lld decoder layers (t); %s has %lld\n",
              cli_opt(c, "--pp-layout"), (long long)placed, c->pos[0], (long long)m->info.tf.layers);
    diag_free(dg);
    model_free(m);
    hw_catalog_free(cat);
    return CLI_USAGE;
  }
  if (m) plan_notes(c, &p);
  if (m && own_prec) p.precision = plan_precision_on(hw, m->train.compute);
  /* an fp32 CNN under PyTorch's defaults: cuDNN convolutions in TF32 */
  if (m && own_prec && plan_default_tf32(m, hw, &p))
    fprintf(c->err, "tpusim simulate: note: fp32 convolutions on %s's TF32 tensor cores, as "
                    "PyTorch's cuDNN default (torch.backends.cudnn.allow_tf32); --precision "
                    "fp32 for strict fp32\n", hw->name);
  /* the frameworks' default sharding (Megatron-Core's distributed
  ** optimizer, MaxText's fsdp) is an LLM stack's: a family that trains
  ** data-parallel (cnn, dlrm, ...) runs under plain DDP unless told */
  if (m && m->info.tf.layers == 0 && !cli_opt(c, "--framework") && !cli_opt(c, "--zero") &&
      !cli_opt(c, "--fsdp"))
    p.zero = 0;
  diag_print(dg, c->err);
  diag_free(dg);
  char err[1024];
  step_result r;
  step_timeline tl = {0};
  input_cfg in;
  bool has_in = false;
  FILE *trace = NULL;
  if (m && cli_opt(c, "--trace") && !(trace = fopen(cli_opt(c, "--trace"), "w"))) {
    fprintf(c->err, "tpusim simulate: %s: cannot write the trace\n", cli_opt(c, "--trace"));
    model_free(m);
    hw_catalog_free(cat);
    return CLI_BAD_INPUT;
  }
  /* layers that do not divide into the stages: as even as they go, said
  ** on stderr (Megatron-Core needs the first and last stages' counts or a
  ** layout; a published run rarely states them) */
  int n_bal;
  if (m && !p.pp_layers && m->info.tf.layers > 0 && p.pp > 1 &&
      (n_bal = plan_balance_layers(&p, m->info.tf.layers, stages, 2048)) > 0) {
    p.pp_layers = stages, p.n_pp_layers = n_bal;
    fprintf(c->err, "tpusim simulate: note: %lld layers over pp %lld x V %lld stages: %d to %d a "
                    "stage, the extra in the middle stages (--pp-layers sets them)\n",
            (long long)m->info.tf.layers, (long long)p.pp, (long long)p.vp, stages[n_bal / 2] - 1 > 0 ? stages[n_bal / 2] - 1 : 0,
            stages[n_bal / 2]);
  }
  if (!m) {
    rc = CLI_BAD_INPUT;
  } else if (plan_check(m, hw, &p, err, sizeof err) != 0 ||
             (rc = input_from_opts(c, hw, m, p.seq, &in, &has_in, err, sizeof err)) != CLI_OK ||
             step_simulate(m, hw, &p, has_in ? &in : NULL, &r,
                           trace ? &tl : NULL, err, sizeof err) != 0 ||
             (trace && trace_out(trace, &tl, &r, &p, m, hw, err, sizeof err) != 0) ||
             (!r.fits && step_price_fixes(m, hw, &p, has_in ? &in : NULL, &r, err, sizeof err) != 0)) {
    if (rc == CLI_USAGE) {
      model_free(m);
      hw_catalog_free(cat);
      return CLI_USAGE;
    }
    fprintf(c->err, "tpusim simulate: %s\n", err);
    rc = CLI_BAD_INPUT;
  } else if (c->json) {
    cJSON *o = step_json(m, hw, &p, &r);
    cJSON_AddStringToObject(o, "status", r.fits ? "ok" : "does_not_fit");
    if (cli_opt(c, "--explain")) {
      step_explain e;
      step_explain_fill(m, hw, &p, &r, &e);
      cJSON_AddItemToObject(o, "explain", step_explain_json(&e));
    }
    cli_print_json(c, o);
  } else {
    cli_print_step(c->out, m, hw, &p, &r, cli_opt(c, "--explain") != NULL);
    if (has_in) print_input_fix(c->out, hw, &p, &in, &r);
  }
  /* the step ran and its report is out, but the plan would not run */
  if (rc == CLI_OK && !r.fits) rc = CLI_DOES_NOT_FIT;
  if (trace && fclose(trace) != 0 && (rc == CLI_OK || rc == CLI_DOES_NOT_FIT)) {
    fprintf(c->err, "tpusim simulate: %s: write failed\n", cli_opt(c, "--trace"));
    rc = CLI_BAD_INPUT;
  }
  model_free(m);
  hw_catalog_free(cat);
  return rc;
}

const cli_cmd cli_cmd_simulate = {"simulate",
    "tpusim simulate MODEL --hw NAME --chips N [--dp D --tp T --pp P --cp C]\n"
    "                  [--ep E] [--etp T] [--zero 0|1|2|3] [--fsdp] [--hsdp N]\n"
    "                  [--mbs M] [--gbs G] [--seq S] [--recompute none|selective[:MODULES]|full|custom:NAMES]\n"
    "                  [--precision bf16|fp16|fp32|fp64|fp8|fp8-cs|mxfp8|nvfp4|int8|tf32]\n"
    "                  [--framework plain|megatron-core|maxtext|megatron-2021|megatron-2022|\n"
    "                               torchtitan|torchtitan-2024|llm-foundry|\n"
    "                               megatron-core-26.08|megatron-core-24.07]\n"
    "                  [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-layers A,B,...]\n"
    "                  [--pp-split-embedding] [--pp-split-loss] [--pp-layout LAYOUT]\n"
    "                  [--cp-comm ring|all-gather]\n"
    "                  [--offload none|activations[:N]|optimizer] [--reduction-server N]\n"
    "                  [--embeddings replicated|sharded|ps]\n"
    "                  [--slices K] [--topology AxBxC[t]] [--sp] [--full]\n"
    "                  [--grad-sync overlap|after-backward] [--attention flash|scores]\n"
    "                  [--attention-kernel framework|fa1|fa2|cudnn|best]\n"
    "                  [--op-costs ir|formula] [--compile on|off] [--tp-overlap on|off]\n"
    "                  [--ep-overlap on|off] [--moe-dispatcher alltoall|flex]\n"
    "                  [--moe-imbalance F]\n"
    "                  [--explain] [--json] [--trace FILE]\n"
    "                  [--input tokens|images] [--storage shards|files] [--prefetch N]\n"
    "                  [--input-host local|remote] [--set FIELD=VALUE ...]\n"
    "                  [--finetune full|lora|qlora [--lora-rank R] [--lora-targets LIST]]\n"
    "                  [--weight-dtype fp32|bf16] [--vocab-tiling N]\n"
    "                  [--defer-embedding-wgrad-compute [--wgrad-deferral-limit N]]\n"
    "                  [--fp8-dot-product-attention on|off]\n"
    "  chips = dp x tp x pp x cp (Megatron-Core); --ep splits the expert layers over\n"
    "  dp x cp ranks, --etp each expert's FFN\n"
    "  --framework: the stack's features (attention kernel, gradient sync, optimizer\n"
    "               sharding, overlaps); default megatron-core on GPUs, maxtext on TPUs;\n"
    "               megatron-core-24.07: NeMo's launcher 24.01-24.07, FlashAttention-2\n"
    "               (cuDNN attention off); megatron-core-26.08: its MoE recipes;\n"
    "               torchtitan-2024: before 2025-02-24, foreach AdamW\n"
    "  --compile off: PyTorch eager, no torch.compile: each op its own kernel but\n"
    "               the library's fused ones (layer norm, softmax, cross-entropy,\n"
    "               addmm); on: fused as a compiler fuses (the PyTorch profiles only;\n"
    "               default: off for llm-foundry, on for torchtitan and plain)\n"
    "  --tp-overlap: tensor-parallel collectives overlapped with the GEMMs they\n"
    "               feed (Transformer Engine userbuffers, torchtitan's AsyncTP, XLA's\n"
    "               collective matmul) or not; default: the framework's\n"
    "  --ep-overlap: the MoE dispatch and combine all-to-alls run under the paired\n"
    "               micro-batch's compute (Megatron-Core's --overlap-moe-expert-\n"
    "               parallel-comm), on the dispatcher's SMs, or not; default: the\n"
    "               framework's recipes (megatron-core-26.08: MXFP8 on NVL72)\n"
    "  --moe-dispatcher: Megatron-Core's token dispatcher: alltoall (NCCL, a copy\n"
    "               of a token per chosen expert, sorted by expert on arrival) or\n"
    "               flex (DeepEP/HybridEP: a copy per destination node, then per\n"
    "               rank, permuted once); default: the framework's (megatron-core:\n"
    "               flex)\n"
    "  --moe-imbalance F: the busiest chip of each expert group receives F times\n"
    "               the even share of the routed tokens (dropless routing), and the\n"
    "               group waits for it; at most ep (E / top_k with fewer than top_k\n"
    "               experts a chip); default 1, even, as routing forced to balance\n"
    "  --precision fp8 (delayed/tensorwise scaling), fp8-cs (current scaling), mxfp8,\n"
    "              nvfp4, int8: the layers' GEMMs in that format, the rest in bf16\n"
    "  --precision tf32: an fp32 model's matmuls and convolutions on TF32 tensor\n"
    "              cores (A100 and later); an fp32 CNN gets it by default, as\n"
    "              PyTorch's cuDNN convolutions do\n"
    "  --offload activations:N: the activations of the first N decoder layers of\n"
    "              each model chunk go to the host (Megatron-Core's\n"
    "              --cpu-offloading-num-layers); activations: all of them\n"
    "  --recompute selective:MODULES: recompute those submodules of each layer\n"
    "              (Megatron-Core's --recompute-modules): core_attn, moe_act,\n"
    "              layernorm, mla_up_proj, mlp, moe, shared_experts, joined by ','\n"
    "              (selective alone: the framework's own, core_attn for Megatron)\n"
    "  --recompute custom:NAME=device|offload|remat,...: MaxText's remat_policy\n"
    "              custom (--framework maxtext): decoder_layer_input, query_proj,\n"
    "              key_proj, value_proj, qkv_proj, context, out_proj, mlpwi,\n"
    "              mlpwi_0, mlpwi_1, mlpwo kept on the chip or offloaded to the\n"
    "              host, the rest recomputed\n"
    "  --weight-dtype bf16: the parameters, gradients and optimizer states in bf16,\n"
    "              no fp32 master (MaxText's weight_dtype=bfloat16)\n"
    "  --vocab-tiling N: the logits, loss and their gradients N tiles of the tokens\n"
    "              at a time, 1/N of the logits held (MaxText's num_vocab_tiling)\n"
    "  --defer-embedding-wgrad-compute: the output layer's weight-gradient GEMMs\n"
    "              of the first N micro-batches (--wgrad-deferral-limit N; 0, the\n"
    "              default: all) run in the pipeline's flush on the last stage, not\n"
    "              in its backward (Megatron-Core's flags; pp > 1)\n"
    "  --fp8-dot-product-attention: the attention core with fp8 operands (Transformer\n"
    "              Engine's fp8_dpa, cuDNN's fp8 kernel at its measured rate) or\n"
    "              not; default: the framework's recipes (megatron-core-26.08: MXFP8\n"
    "              MoE on NVL72); needs a low-precision --precision\n"
    "  --pp-layout LAYOUT: Megatron-Core's --pipeline-model-parallel-layout as a\n"
    "              recipe writes it, e.g. 'Et|(tt|)*30mL': stages split by '|', E the\n"
    "              embedding, t a decoder layer, m an MTP layer, L the loss\n"
    "  --sp: sequence parallelism with tensor parallelism (Korthikanti et al. 2022)\n"
    "  --grad-sync: all-reduce gradient buckets while backward runs (default), or\n"
    "               after it (Megatron-LM's local DDP, as in its 2021-22 papers)\n"
    "  --attention: flash (default: scores stay on chip, recomputed in backward) or\n"
    "               scores (written to HBM around a fused softmax: Megatron-LM before 2022)\n"
    "  --attention-kernel: the fused attention kernel whose measured rate the core\n"
    "               runs at: the framework's (default), fa1 (the FlashAttention-1\n"
    "               generation), fa2, cudnn (cuDNN's fused attention: Transformer\n"
    "               Engine's first choice on Hopper, NVTE_FUSED_ATTN=0 turns it off) or\n"
    "               best (the chip's fastest measured: FlashAttention-3/4, splash)\n"
    "  --topology: a TPU slice's shape (4x4x8, 16x16), one Cloud TPU offers, holding\n"
    "              chips / slices (default: the most cubic; docs/network.md); AxBxCt:\n"
    "              wired as a twisted torus (4x4x8t on v4/v5p: faster all-to-all)\n"
    "  --full: every data-parallel group's all-reduce at once on the whole network\n"
    "          (default: one group stands for its symmetric peers)\n"
    "  --op-costs: each fused kernel's flops and bytes read off its lowered LLVM IR\n"
    "              (default), or from the graph's formulas (equal; no LLVM work)\n"
    "  --set FIELD=VALUE: replace a field of the model file before it is read (e.g.\n"
    "              num_hidden_layers=80); repeatable; only fields the file has\n"
    "  --finetune lora|qlora: the base weights frozen (no weight gradients, no\n"
    "              optimizer state), low-rank adapters trained on --lora-targets\n"
    "              (q,k,v,o,gate,up,down, or linear_qkv,... as Megatron-Core names\n"
    "              them, q_proj,... as HF PEFT); default targets and rank: the\n"
    "              model file's, else the framework's (megatron-core: all linear\n"
    "              layers, rank 32), else q,v at 16; qlora: the base in 4-bit NF4",
    "one training step on a given machine and plan: time, memory, MFU", run_simulate, NULL,
    CLI_SIM_FLAGS, CLI_SIM_VALUED, NULL};
