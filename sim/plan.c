/*
** plan.c -- see plan.h.
*/
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strutil.h"
#include "../hw_models/hw.h"
#include "optime.h"

const char *const plan_schedule_names[] = {"gpipe", "1f1b", "interleaved", NULL};
const char *const plan_recompute_names[] = {"none", "selective", "full", NULL};
const char *const plan_grad_sync_names[] = {"overlap", "after-backward", NULL};
const char *const plan_attention_names[] = {"flash", "scores", NULL};

const char *plan_precision_name(graph_dtype dt) {
  const char *n = wl_precision_name(dt);
  return n ? n : "bf16";
}

const char *plan_recompute_word(plan_recompute r) {
  return r == PLAN_RECOMPUTE_FULL ? "full" : r == PLAN_RECOMPUTE_SELECTIVE ? "selective" : "no";
}

int plan_name_index(const char *const *names, const char *s) {
  for (int i = 0; s && names[i]; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

int plan_schedule_parse(const char *s, plan *p, char *err, size_t errn) {
  if (strcmp(s, "gpipe") == 0) {
    p->schedule = PLAN_GPIPE;
  } else if (strcmp(s, "1f1b") == 0) {
    p->schedule = PLAN_1F1B;
  } else if (strncmp(s, "interleaved:", 12) == 0 && atoll(s + 12) >= 2) {
    p->schedule = PLAN_INTERLEAVED;
    p->vp = atoll(s + 12);
  } else {
    return str_errf(err, errn, "--pp-schedule '%s': expected gpipe, 1f1b or interleaved:V", s);
  }
  return 0;
}

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

/* ---- checks ---- */

/* Models other than transformers: data parallelism only (their layers are
** small enough to replicate); a family that writes its whole step (gbdt)
** runs on one chip. */
static int check_generic(const model *m, plan *p, char *err, size_t errn) {
  if (strcmp(m->format, "hlo") == 0) {
    /* a compiled module is one device's program for the devices it names */
    int64_t dev = m->info.devices > 0 ? m->info.devices : 1;
    if (p->tp != 1 || p->pp != 1 || p->ep != 1 || (p->dp && p->dp != p->chips))
      return str_errf(err, errn, "an HLO module carries its own partitioning (%lld device%s): give "
                                 "--chips %lld and no --dp/--tp/--pp/--ep",
                      (long long)dev, dev == 1 ? "" : "s", (long long)dev);
    if (p->chips != dev)
      return str_errf(err, errn, "the HLO module was compiled for %lld device%s "
                                 "(num_partitions x replica_count), not --chips %lld",
                      (long long)dev, dev == 1 ? "" : "s", (long long)p->chips);
    p->dp = p->chips;
    p->gbs = p->mbs = 1;
    p->vp = 1;
    if (p->slices < 1) p->slices = 1;
    return 0;
  }
  if (p->tp != 1 || p->pp != 1 || p->ep != 1)
    return str_errf(err, errn, "tensor, pipeline and expert parallelism split transformer "
                               "layers; a %s model trains data-parallel (--dp)", m->family);
  if (p->chips < 1 || p->mbs < 0) return str_errf(err, errn, "--chips must be at least 1");
  if (p->dp == 0) p->dp = p->chips;
  if (p->dp != p->chips)
    return str_errf(err, errn, "dp %lld, but --chips is %lld", (long long)p->dp, (long long)p->chips);
  if (m->info.whole_step && p->chips != 1)
    return str_errf(err, errn, "a %s step runs on one chip here (distributed %s is not modelled)",
                    m->family, m->family);
  if (p->gbs == 0) p->gbs = m->train.global_batch;
  if (p->seq == 0) p->seq = m->train.seq_len;
  if (p->mbs == 0) p->mbs = p->gbs / p->dp > 0 ? p->gbs / p->dp : 1; /* no accumulation */
  if (!m->info.whole_step && p->gbs % (p->dp * p->mbs) != 0)
    return str_errf(err, errn, "mbs %lld x dp %lld does not divide the global batch %lld",
                    (long long)p->mbs, (long long)p->dp, (long long)p->gbs);
  if (p->slices < 1) p->slices = 1;
  p->vp = 1;
  return 0;
}

int plan_check_fault(const model *m, const hw_model *hw, plan *p, plan_fault *fault, char *err,
                     size_t errn) {
  plan_fault dummy;
  if (!fault) fault = &dummy;
  *fault = PLAN_FAULT_NONE;
  const wl_tf_dims *d = &m->info.tf;
  if (d->layers == 0) {
    int rc = check_generic(m, p, err, errn);
    if (rc != 0) *fault = PLAN_FAULT_FAMILY;
    return rc;
  }
  if (p->mbs == 0) p->mbs = 1;
  if (p->tp < 1 || p->pp < 1 || p->ep < 1 || p->chips < 1 || p->mbs < 1) {
    if (errn) snprintf(err, errn, "--chips, --tp, --pp, --ep and --mbs must be at least 1");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (d->heads % p->tp != 0) {
    if (errn) snprintf(err, errn, "tp %lld does not divide the %lld attention heads", (long long)p->tp,
             (long long)d->heads);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (d->kv_heads % p->tp != 0 && p->tp % d->kv_heads != 0) {
    if (errn) snprintf(err, errn, "tp %lld and the %lld KV heads: one must divide the other",
             (long long)p->tp, (long long)d->kv_heads);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (d->ffn_hidden % p->tp != 0) {
    if (errn) snprintf(err, errn, "tp %lld does not divide ffn_hidden %lld", (long long)p->tp,
             (long long)d->ffn_hidden);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  /* expert parallelism before dp: a dp derived from an ep that cannot be
  ** would be 0, and "dp 0 x ..." names the wrong thing */
  if (p->ep > 1 && d->experts == 0) {
    if (errn) snprintf(err, errn, "ep %lld needs a MoE model; %s has no experts", (long long)p->ep,
                       m->name);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->ep > 1 && d->experts % p->ep != 0) {
    if (errn) snprintf(err, errn, "ep %lld does not divide the %lld experts", (long long)p->ep,
                       (long long)d->experts);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  int64_t replica = p->tp * p->pp * p->ep; /* chips of one data-parallel replica */
  if (p->dp == 0 && p->chips % replica != 0) {
    if (errn) snprintf(err, errn, "tp %lld x pp %lld x ep %lld = %lld chips per replica, %s --chips %lld",
                       (long long)p->tp, (long long)p->pp, (long long)p->ep, (long long)replica,
                       replica > p->chips ? "more than" : "which does not divide", (long long)p->chips);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->dp == 0) p->dp = p->chips / replica;
  if (p->dp * p->tp * p->pp * p->ep != p->chips) {
    if (errn) snprintf(err, errn, "dp %lld x tp %lld x pp %lld x ep %lld = %lld, but --chips is %lld",
             (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)p->ep,
             (long long)(p->dp * p->tp * p->pp * p->ep), (long long)p->chips);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->vp < 1) p->vp = 1;
  if (p->pp > d->layers) {
    if (errn) snprintf(err, errn, "pp %lld is more than the %lld layers", (long long)p->pp,
             (long long)d->layers);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (d->layers % (p->pp * p->vp) != 0) {
    if (errn) snprintf(err, errn, "%lld layers do not split into pp %lld x %lld virtual stages",
             (long long)d->layers, (long long)p->pp, (long long)p->vp);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->gbs == 0) p->gbs = m->train.global_batch;
  if (p->seq == 0) p->seq = m->train.seq_len;
  if (p->gbs % (p->dp * p->ep * p->mbs) != 0) {
    if (errn) snprintf(err, errn, "mbs %lld x dp %lld%s does not divide the global batch %lld",
             (long long)p->mbs, (long long)(p->dp * p->ep), p->ep > 1 ? " (x ep)" : "",
             (long long)p->gbs);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->schedule == PLAN_INTERLEAVED && plan_microbatches(p) % p->pp != 0) {
    if (errn) snprintf(err, errn, "interleaved 1F1B needs the %lld micro-batches to be a multiple of pp %lld",
             (long long)plan_microbatches(p), (long long)p->pp);
    *fault = PLAN_FAULT_DIVIDES;
    return -1;
  }
  if (p->schedule == PLAN_INTERLEAVED && p->vp < 2) {
    if (errn) snprintf(err, errn, "interleaved 1F1B needs V >= 2 virtual stages (interleaved:V)");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (p->sp && p->tp < 2) p->sp = false;
  if (p->zero < 0 || p->zero > 3) {
    if (errn) snprintf(err, errn, "--zero takes 0, 1, 2 or 3");
    *fault = PLAN_FAULT_RANGE;
    return -1;
  }
  if (!(optime_peak_flops(hw, p->precision) > 0)) {
    if (errn) snprintf(err, errn, "%s has no %s unit", hw->name, graph_dtype_name(p->precision));
    *fault = PLAN_FAULT_DTYPE;
    return -1;
  }
  if (p->slices < 1) p->slices = 1;
  return 0;
}

int plan_check(const model *m, const hw_model *hw, plan *p, char *err, size_t errn) {
  return plan_check_fault(m, hw, p, NULL, err, errn);
}

