/*
** cmd_lower.c -- `tpusim lower`: each distinct op and each distinct fused
** kernel of a model lowered to LLVM IR, with the cost counted from the IR
** beside the graph's formula (the fusion pass's, for kernels); or the
** module itself (--emit-llvm).
**
** The listing stays here rather than in sim/opcost: opcost lowers each
** signature into a pooled module of its own and keeps only its cost, while
** this command needs every distinct kernel in one module it can name,
** print and optimize, with the uses per signature.
*/
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../base/units.h"
#include "../sim/fuse.h"
#include "../sim/lower.h"
#include "../sim/opcost.h"

static const char *const LOWER_FLAGS[] = {"--emit-llvm", "--forward-only", "--no-fusion", NULL};
static const char *const LOWER_VALUED[] = {"--op", "--opt", "--seq", "--gbs", "--precision", NULL};

static cJSON *cost_json(const graph_cost *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "flops", graph_cost_flops(c));
  cJSON_AddNumberToObject(o, "transcendentals", c->transcendentals);
  cJSON_AddNumberToObject(o, "bytes_read", c->bytes_read);
  cJSON_AddNumberToObject(o, "bytes_written", c->bytes_written);
  return o;
}

/* The IR count beside what it is checked against (`want_key`: the graph's
** formula, or the fusion pass's cost), for one lowered function. */
static void add_costs_json(cJSON *e, double uses, const graph_cost *ir, double accessed,
                           const char *want_key, const graph_cost *want, bool ok) {
  cJSON_AddNumberToObject(e, "uses", uses);
  cJSON *irj = cost_json(ir);
  cJSON_AddNumberToObject(irj, "accessed_bytes", accessed);
  cJSON_AddItemToObject(e, "ir", irj);
  cJSON_AddItemToObject(e, want_key, cost_json(want));
  cJSON_AddBoolToObject(e, "agree", ok);
}

typedef struct {
  int kernels, ops;
  double fused_bytes, unfused_bytes;
} fusion_summary;

/* `fused`: the kernels simulate times (NULL with --no-fusion: one op a kernel). */
static fusion_summary summarize_fusion(const graph *g, const fuse_plan *fused) {
  fusion_summary s = {0};
  fuse_plan *off = fuse_graph(g, false);
  const fuse_plan *on = fused ? fused : off;
  if (on && off) {
    for (int k = 0; k < on->n_groups; k++) s.kernels += on->size[k] > 0;
    for (int k = 0; k < off->n_groups; k++) s.ops += off->size[k] > 0;
    graph_cost a = fuse_total_cost(on, g, -1), b = fuse_total_cost(off, g, -1);
    s.fused_bytes = a.bytes_read + a.bytes_written;
    s.unfused_bytes = b.bytes_read + b.bytes_written;
  }
  fuse_free(off);
  return s;
}

static int run_lower(cli_ctx *c) {
  const char *ol = cli_opt(c, "--opt");
  int level = 2;
  if (ol) {
    if (!cli_opt(c, "--emit-llvm")) return cli_usage_error(c, "%s", "--opt goes with --emit-llvm");
    if (strlen(ol) != 1 || ol[0] < '0' || ol[0] > '3')
      return cli_usage_error(c, "--opt expects 0, 1, 2 or 3, not '%s'", ol);
    level = ol[0] - '0';
  }
  if (c->json && cli_opt(c, "--emit-llvm")) return cli_usage_error(c, "%s", "--json and --emit-llvm: pick one");
  model *m;
  int rc = cli_load_model(c, &m);
  if (rc != CLI_OK) return rc;
  const graph *g = m->g;
  const char *want = cli_opt(c, "--op");
  int n = graph_count(g);
  char why[160], err[512];
  if (want) {
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
      if (strcmp(graph_get(g, i)->name, want) == 0) found = i;
    if (found < 0 || !lower_supported(g, found, why, sizeof why)) {
      if (found < 0) fprintf(c->err, "tpusim lower: %s has no op named '%s' (tpusim lower %s lists the lowered ones)\n", m->name, want, c->pos[0]);
      else fprintf(c->err, "tpusim lower: op '%s': %s\n", want, why);
      model_free(m);
      return CLI_BAD_INPUT;
    }
  }
  lower_module *lm = lower_new(m->name);
  int *ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int64_t *uses = calloc((size_t)(n ? n : 1), sizeof(int64_t));
  char **sigs = calloc((size_t)(n ? n : 1), sizeof(char *));
  int nd = 0, not_lowered = 0, n_coll = 0, n_custom = 0, want_id = -1, n_fused_skipped = 0;
  char sig[1024], first_why[160] = "";
  for (int i = 0; i < n && rc == CLI_OK; i++) {
    const graph_op *op = graph_get(g, i);
    if (want ? strcmp(op->name, want) != 0 : !lower_supported(g, i, why, sizeof why)) {
      if (want || op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT) continue;
      /* collectives are the network model's; custom-calls carry declared costs */
      if (graph_op_is_collective(op->kind)) n_coll++;
      else if (op->kind == GOP_CUSTOM) n_custom++;
      else if (not_lowered++ == 0) snprintf(first_why, sizeof first_why, "%s", why);
      continue;
    }
    if (want) want_id = i;
    opcost_op_signature(g, i, sig, sizeof sig);
    int d;
    for (d = 0; d < nd; d++)
      if (strcmp(sigs[d], sig) == 0) break;
    if (d == nd) {
      if (lower_op(lm, g, i, err, sizeof err) != nd) {
        fprintf(c->err, "tpusim lower: op '%s': %s\n", op->name, err);
        rc = CLI_BAD_INPUT;
        break;
      }
      ids[nd] = i;
      sigs[nd++] = strdup(sig);
    }
    uses[d] += op->count;
  }
  /* the fusion pass's kernels of two or more ops, each distinct one
  ** lowered once as one function (after the single ops' functions) */
  fuse_plan *fp = cli_opt(c, "--no-fusion") ? NULL : fuse_graph_dup(g);
  int nf = 0, ng = fp ? fp->n_groups : 0;
  int *fk = malloc(sizeof(int) * (size_t)(ng ? ng : 1));
  int64_t *fuses = calloc((size_t)(ng ? ng : 1), sizeof(int64_t));
  char **fsigs = calloc((size_t)(ng ? ng : 1), sizeof(char *));
  int *mem = malloc(sizeof(int) * (size_t)(n ? n : 1));
  size_t gcap = 16384;
  char *gsig = malloc(gcap);
  for (int k = 0; rc == CLI_OK && fp && k < ng; k++) {
    /* the kernel as simulate times it: its ops and the producers it recomputes */
    int nm = fuse_members(fp, g, k, mem, n ? n : 1);
    if (nm < 2) continue;
    bool has_want = false, lowerable = true;
    for (int i = 0; i < nm; i++) {
      has_want |= mem[i] == want_id;
      lowerable = lowerable && lower_supported(g, mem[i], why, sizeof why);
    }
    if (want && !has_want) continue;
    if (!lowerable) { /* it keeps the pass's cost in simulate, as its op keeps its formula here */
      n_fused_skipped++;
      continue;
    }
    bool keyed = opcost_kernel_signature(g, mem, nm, gsig, gcap);
    int d = nf;
    for (d = 0; keyed && d < nf; d++)
      if (fsigs[d] && strcmp(fsigs[d], gsig) == 0) break;
    if (!keyed || d == nf) {
      d = nf;
      if (lower_fused(lm, g, mem, nm, err, sizeof err) != nd + nf) {
        fprintf(c->err, "tpusim lower: fused kernel '%s': %s\n", graph_get(g, fp->root[k])->name,
                err);
        rc = CLI_BAD_INPUT;
        break;
      }
      fk[nf] = k;
      fsigs[nf++] = keyed ? strdup(gsig) : NULL;
    }
    fuses[d] += graph_get(g, fp->root[k])->count;
  }
  free(gsig);
  free(mem);
  if (rc == CLI_OK && lower_verify(lm, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim lower: %s\n", err); /* a lowering bug, not bad input */
    rc = CLI_BAD_INPUT;
  }
  if (rc == CLI_OK && cli_opt(c, "--emit-llvm")) {
    if (lower_optimize(lm, level, err, sizeof err) != 0) {
      fprintf(c->err, "tpusim lower: %s\n", err);
      rc = CLI_BAD_INPUT;
    } else {
      char *ir = lower_print(lm);
      fputs(ir, c->out);
      free(ir);
    }
  } else if (rc == CLI_OK) {
    cJSON *arr = cJSON_CreateArray();
    int agree = 0;
    fusion_summary fz = summarize_fusion(g, fp);
    if (!c->json)
      fprintf(c->out, "%-34s %-14s %9s %12s %12s %12s %12s  %s\n", "op", "kind", "uses", "IR flops",
              "formula", "IR bytes", "formula", "");
    for (int d = 0; d < nd && rc == CLI_OK; d++) {
      graph_cost ir, fc = graph_op_cost(g, ids[d]);
      double accessed;
      if (lower_op_cost(lm, d, &ir, &accessed, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      agree += ok;
      const graph_op *op = graph_get(g, ids[d]);
      if (c->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", op->name);
        cJSON_AddStringToObject(e, "kind", graph_op_name(op->kind));
        cJSON_AddStringToObject(e, "signature", sigs[d]);
        add_costs_json(e, (double)uses[d], &ir, accessed, "formula", &fc, ok);
        cJSON_AddItemToArray(arr, e);
      } else {
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", op->name,
                graph_op_name(op->kind), (long long)uses[d], graph_cost_flops(&ir), graph_cost_flops(&fc),
                ir.bytes_read + ir.bytes_written, fc.bytes_read + fc.bytes_written,
                ok ? "=" : "DIFFERS");
      }
    }
    int fagree = 0;
    cJSON *farr = cJSON_CreateArray();
    for (int d = 0; d < nf && rc == CLI_OK; d++) {
      graph_cost ir, fc = fuse_group_cost(fp, g, fk[d]);
      double accessed;
      if (lower_op_cost(lm, nd + d, &ir, &accessed, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      fagree += ok;
      const char *fname = lower_fn_name(lm, nd + d);
      if (c->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "kernel", fname);
        cJSON_AddNumberToObject(e, "ops", fp->size[fk[d]]);
        add_costs_json(e, (double)fuses[d], &ir, accessed, "fusion", &fc, ok);
        cJSON_AddItemToArray(farr, e);
      } else {
        char kind[24];
        snprintf(kind, sizeof kind, "fusion(%d)", fp->size[fk[d]]);
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", fname, kind,
                (long long)fuses[d], graph_cost_flops(&ir), graph_cost_flops(&fc),
                ir.bytes_read + ir.bytes_written, fc.bytes_read + fc.bytes_written,
                ok ? "=" : "DIFFERS");
      }
    }
    if (rc == CLI_OK && c->json) {
      cJSON *root = cJSON_CreateObject();
      cJSON_AddStringToObject(root, "model", m->name);
      char ver[32];
      lower_llvm_version(ver, sizeof ver);
      cJSON_AddStringToObject(root, "llvm", ver);
      cJSON_AddNumberToObject(root, "ops_not_lowered", not_lowered);
      cJSON_AddNumberToObject(root, "collectives", n_coll);
      cJSON_AddNumberToObject(root, "custom_calls", n_custom);
      cJSON_AddNumberToObject(root, "fused_kernels_not_lowered", n_fused_skipped);
      cJSON *fj = cJSON_AddObjectToObject(root, "fusion");
      cJSON_AddBoolToObject(fj, "enabled", !cli_opt(c, "--no-fusion"));
      cJSON_AddNumberToObject(fj, "kernels", fz.kernels);
      cJSON_AddNumberToObject(fj, "ops", fz.ops);
      cJSON_AddNumberToObject(fj, "hbm_bytes", fz.fused_bytes);
      cJSON_AddNumberToObject(fj, "unfused_hbm_bytes", fz.unfused_bytes);
      cJSON_AddItemToObject(root, "lowered", arr);
      cJSON_AddItemToObject(root, "fused_kernels", farr);
      arr = farr = NULL;
      char *s = cJSON_Print(root);
      fprintf(c->out, "%s\n", s);
      free(s);
      cJSON_Delete(root);
    } else if (rc == CLI_OK) {
      char fb[32], ub[32];
      units_bytes(fb, sizeof fb, fz.fused_bytes);
      units_bytes(ub, sizeof ub, fz.unfused_bytes);
      fprintf(c->out,
              "\nfusion: %d kernels from %d ops; HBM traffic per step %s (%s unfused, %.0f%% "
              "less)\n",
              fz.kernels, fz.ops, fb, ub,
              fz.unfused_bytes > 0 ? 100 * (1 - fz.fused_bytes / fz.unfused_bytes) : 0.0);
      fprintf(c->out, "%d distinct ops lowered; IR count equals the formula for %d of them.\n",
              nd, agree);
      if (fp)
        fprintf(c->out,
                "%d distinct fused kernels lowered; IR count equals the fusion pass's kernel "
                "cost for %d of them.\n",
                nf, fagree);
      fprintf(c->out, "%d collectives: timed by the network model, not lowered.\n", n_coll);
      fprintf(c->out, "%d custom-calls: opaque kernels with declared costs, not lowered.\n",
              n_custom);
      if (not_lowered)
        fprintf(c->out, "%d other ops not lowered (%s).\n", not_lowered, first_why);
      if (n_fused_skipped)
        fprintf(c->out, "%d fused kernels hold an op that is not lowered: they keep the fusion "
                        "pass's cost.\n", n_fused_skipped);
    }
    cJSON_Delete(arr);
    cJSON_Delete(farr);
    if (rc == CLI_OK && (agree != nd || fagree != nf)) rc = CLI_BAD_INPUT;
  }
  for (int d = 0; d < nf; d++) free(fsigs[d]);
  free(fsigs);
  free(fuses);
  free(fk);
  fuse_free(fp);
  for (int d = 0; d < nd; d++) free(sigs[d]);
  free(sigs);
  free(uses);
  free(ids);
  lower_free(lm);
  model_free(m);
  return rc;
}

const cli_cmd cli_cmd_lower = {"lower",
    "tpusim lower MODEL [--op NAME] [--emit-llvm [--opt 0|1|2|3]] [--json] [--no-fusion]\n"
    "                   [--seq S] [--gbs G] [--precision P] [--forward-only]\n"
    "  each distinct op, and each distinct fused kernel, lowered to an LLVM IR\n"
    "  loop nest, with the cost counted from the IR beside the graph's formula\n"
    "  (the fusion pass's, for kernels); --emit-llvm prints the module\n"
    "  (default --opt 2: new pass manager, vectorized; --opt 0: as lowered)",
    "the LLVM IR of the lowered ops and the cost read off it", run_lower, NULL, LOWER_FLAGS,
    LOWER_VALUED, NULL};
