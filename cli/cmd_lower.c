/*
** cmd_lower.c -- `tpusim lower`: each distinct op and each distinct fused
** kernel of a model lowered to LLVM IR, with the cost counted from the IR
** beside the graph's formula (the fusion pass's, for kernels); or the
** module itself (--emit-llvm).
**
** sim/opcost's opcost_list lowers the distinct ops and kernels into one
** module and counts their uses, and sim/fuse's fuse_summarize says what
** fusion saves; this file checks --op, reads each function's cost off the
** IR and prints the table, the JSON or the module.
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

/* The IR count of listing entry e beside what it is checked against: the
** graph's formula (an op) or the fusion pass's cost (a kernel). */
static int entry_costs(const lower_module *lm, const graph *g, const fuse_plan *fp,
                       const opcost_entry *e, graph_cost *ir, double *accessed, graph_cost *want,
                       char *err, size_t errn) {
  *want = e->op >= 0 ? graph_op_cost(g, e->op) : fuse_group_cost(fp, g, e->group);
  return lower_op_cost(lm, e->fn, ir, accessed, err, errn);
}

static int run_lower(cli_ctx *c) {
  int64_t level = 2;
  if (cli_opt(c, "--opt") && !cli_opt(c, "--emit-llvm"))
    return cli_usage_error(c, "%s", "--opt goes with --emit-llvm");
  if (cli_opt_int(c, "--opt", 0, 3, &level)) return CLI_USAGE;
  if (c->json && cli_opt(c, "--emit-llvm")) return cli_usage_error(c, "%s", "--json and --emit-llvm: pick one");
  model *m;
  int rc = cli_load_model(c, &m);
  if (rc != CLI_OK) return rc;
  const graph *g = m->g;
  const char *want = cli_opt(c, "--op");
  int n = graph_count(g);
  char why[160], err[1024];
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
  fuse_plan *fp = cli_opt(c, "--no-fusion") ? NULL : fuse_graph_dup(g);
  opcost_listing l;
  if (opcost_list(lm, g, fp, want, &l, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim lower: %s\n", err);
    rc = CLI_BAD_INPUT;
  }
  if (rc == CLI_OK && lower_verify(lm, err, sizeof err) != 0) {
    fprintf(c->err, "tpusim lower: %s\n", err); /* a lowering bug, not bad input */
    rc = CLI_BAD_INPUT;
  }
  if (rc == CLI_OK && cli_opt(c, "--emit-llvm")) {
    if (lower_optimize(lm, (int)level, err, sizeof err) != 0) {
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
    fuse_summary fz = fuse_summarize(g, fp);
    if (!c->json)
      fprintf(c->out, "%-34s %-14s %9s %12s %12s %12s %12s  %s\n", "op", "kind", "uses", "IR flops",
              "formula", "IR bytes", "formula", "");
    for (int d = 0; d < l.n_ops && rc == CLI_OK; d++) {
      const opcost_entry *e = &l.ops[d];
      graph_cost ir, fc;
      double accessed;
      if (entry_costs(lm, g, fp, e, &ir, &accessed, &fc, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      agree += ok;
      const graph_op *op = graph_get(g, e->op);
      if (c->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", op->name);
        cJSON_AddStringToObject(o, "kind", graph_op_name(op->kind));
        cJSON_AddStringToObject(o, "signature", e->signature);
        add_costs_json(o, (double)e->uses, &ir, accessed, "formula", &fc, ok);
        cJSON_AddItemToArray(arr, o);
      } else {
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", op->name,
                graph_op_name(op->kind), (long long)e->uses, graph_cost_flops(&ir), graph_cost_flops(&fc),
                ir.bytes_read + ir.bytes_written, fc.bytes_read + fc.bytes_written,
                ok ? "=" : "DIFFERS");
      }
    }
    int fagree = 0;
    cJSON *farr = cJSON_CreateArray();
    for (int d = 0; d < l.n_kernels && rc == CLI_OK; d++) {
      const opcost_entry *e = &l.kernels[d];
      graph_cost ir, fc;
      double accessed;
      if (entry_costs(lm, g, fp, e, &ir, &accessed, &fc, err, sizeof err) != 0) {
        fprintf(c->err, "tpusim lower: %s\n", err);
        rc = CLI_BAD_INPUT;
        break;
      }
      bool ok = graph_cost_close(&ir, &fc);
      fagree += ok;
      const char *fname = lower_fn_name(lm, e->fn);
      if (c->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kernel", fname);
        cJSON_AddNumberToObject(o, "ops", e->n_ops);
        add_costs_json(o, (double)e->uses, &ir, accessed, "fusion", &fc, ok);
        cJSON_AddItemToArray(farr, o);
      } else {
        char kind[24];
        snprintf(kind, sizeof kind, "fusion(%d)", e->n_ops);
        fprintf(c->out, "%-34.34s %-14s %9lld %12.4g %12.4g %12.4g %12.4g  %s\n", fname, kind,
                (long long)e->uses, graph_cost_flops(&ir), graph_cost_flops(&fc),
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
      cJSON_AddNumberToObject(root, "ops_not_lowered", l.not_lowered);
      cJSON_AddNumberToObject(root, "collectives", l.collectives);
      cJSON_AddNumberToObject(root, "custom_calls", l.custom_calls);
      cJSON_AddNumberToObject(root, "fused_kernels_not_lowered", l.kernels_not_lowered);
      cJSON *fj = cJSON_AddObjectToObject(root, "fusion");
      cJSON_AddBoolToObject(fj, "enabled", !cli_opt(c, "--no-fusion"));
      cJSON_AddNumberToObject(fj, "kernels", fz.kernels);
      cJSON_AddNumberToObject(fj, "ops", fz.ops);
      cJSON_AddNumberToObject(fj, "hbm_bytes", fz.hbm_bytes);
      cJSON_AddNumberToObject(fj, "unfused_hbm_bytes", fz.unfused_hbm_bytes);
      cJSON_AddItemToObject(root, "lowered", arr);
      cJSON_AddItemToObject(root, "fused_kernels", farr);
      arr = farr = NULL;
      cli_print_json(c, root);
    } else if (rc == CLI_OK) {
      char fb[32], ub[32];
      units_bytes(fb, sizeof fb, fz.hbm_bytes);
      units_bytes(ub, sizeof ub, fz.unfused_hbm_bytes);
      fprintf(c->out,
              "\nfusion: %d kernels from %d ops; HBM traffic per step %s (%s unfused, %.0f%% "
              "less)\n",
              fz.kernels, fz.ops, fb, ub,
              fz.unfused_hbm_bytes > 0 ? 100 * (1 - fz.hbm_bytes / fz.unfused_hbm_bytes) : 0.0);
      fprintf(c->out, "%d distinct ops lowered; IR count equals the formula for %d of them.\n",
              l.n_ops, agree);
      if (fp)
        fprintf(c->out,
                "%d distinct fused kernels lowered; IR count equals the fusion pass's kernel "
                "cost for %d of them.\n",
                l.n_kernels, fagree);
      fprintf(c->out, "%d collectives: timed by the network model, not lowered.\n", l.collectives);
      fprintf(c->out, "%d custom-calls: opaque kernels with declared costs, not lowered.\n",
              l.custom_calls);
      if (l.not_lowered)
        fprintf(c->out, "%d other ops not lowered (%s).\n", l.not_lowered, l.first_why);
      if (l.kernels_not_lowered)
        fprintf(c->out, "%d fused kernels hold an op that is not lowered: they keep the fusion "
                        "pass's cost.\n", l.kernels_not_lowered);
    }
    cJSON_Delete(arr);
    cJSON_Delete(farr);
    if (rc == CLI_OK && (agree != l.n_ops || fagree != l.n_kernels)) rc = CLI_BAD_INPUT;
  }
  opcost_listing_free(&l);
  fuse_free(fp);
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
