/*
** cmd_hw.c -- `tpusim hw list|show`: the hardware catalog as a table or
** JSON, or one entry with its sources (the library's hw_print_show).
*/
#include "cli_int.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static void hw_list_text(const hw_catalog *cat, FILE *f) {
  fprintf(f, "%-12s %-4s %12s %8s %8s  %-42s %s\n", "name", "kind", "bf16 TFLOP/s",
          "HBM GiB", "HBM TB/s", "interconnect (per chip, one direction)",
          "$/chip-h (spot)");
  int no_bf16 = 0;
  for (int i = 0; i < hw_catalog_count(cat); i++) {
    const hw_model *m = hw_catalog_at(cat, i);
    char bf16[16], ic[128], price[32];
    double p = hw_peak_flops(m, HW_BF16);
    if (p > 0)
      snprintf(bf16, sizeof bf16, "%.0f", p / 1e12);
    else {
      snprintf(bf16, sizeof bf16, "-");
      no_bf16 = 1;
    }
    hw_interconnect_summary(m, ic, sizeof ic);
    if (m->price.on_demand_usd_per_chip_hour > 0)
      snprintf(price, sizeof price, "%.2f (%.2f)", m->price.on_demand_usd_per_chip_hour,
               m->price.spot_usd_per_chip_hour);
    else /* an edge part leaves its price out: bought, not rented */
      snprintf(price, sizeof price, "not rented");
    fprintf(f, "%-12s %-4s %12s %8.1f %8.2f  %-42s %s\n", m->name, hw_kind_name(m->kind), bf16,
            (double)m->chip.hbm_bytes / (1024.0 * 1024 * 1024), m->chip.hbm_bw_bytes_per_s / 1e12,
            ic, price);
  }
  if (no_bf16) fprintf(f, "\n'-': no bf16 unit on that chip (see 'tpusim hw show NAME').\n");
}

/* `hw list --rates`: every chip's dense peak per dtype, in T(FL)OP/s;
** '-' where the chip has no unit for it (absent key = no unit). */
static void hw_list_rates(const hw_catalog *cat, FILE *f) {
  fprintf(f, "%-12s %-4s", "name", "kind");
  for (int d = 0; d < HW_DTYPE_COUNT; d++) fprintf(f, " %6s", hw_dtype_name((hw_dtype)d));
  fprintf(f, "\n");
  for (int i = 0; i < hw_catalog_count(cat); i++) {
    const hw_model *m = hw_catalog_at(cat, i);
    fprintf(f, "%-12s %-4s", m->name, hw_kind_name(m->kind));
    for (int d = 0; d < HW_DTYPE_COUNT; d++) {
      double p = hw_peak_flops(m, (hw_dtype)d) / 1e12;
      if (p <= 0) fprintf(f, " %6s", "-");
      else fprintf(f, p < 10 ? " %6.2f" : p < 100 ? " %6.1f" : " %6.0f", p);
    }
    fprintf(f, "\n");
  }
  fprintf(f, "\nDense peaks in TFLOP/s (int8, int4: TOP/s); '-': no unit for that dtype.\n");
}

/* with --rates: every dtype's dense peak too, null where the chip has no
** unit for it (as the table's '-') */
static char *hw_list_json(const hw_catalog *cat, bool rates) {
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(root, "hardware");
  for (int i = 0; i < hw_catalog_count(cat); i++) {
    const hw_model *m = hw_catalog_at(cat, i);
    char ic[128];
    hw_interconnect_summary(m, ic, sizeof ic);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "kind", hw_kind_name(m->kind));
    cJSON_AddStringToObject(o, "vendor", m->vendor);
    double p = hw_peak_flops(m, HW_BF16);
    if (p > 0) cJSON_AddNumberToObject(o, "peak_bf16_flops_per_s", p);
    else cJSON_AddNullToObject(o, "peak_bf16_flops_per_s");
    if (rates) {
      cJSON *r = cJSON_AddObjectToObject(o, "dense_peak_ops_per_s");
      for (int d = 0; d < HW_DTYPE_COUNT; d++) {
        double pd = hw_peak_flops(m, (hw_dtype)d);
        if (pd > 0) cJSON_AddNumberToObject(r, hw_dtype_name((hw_dtype)d), pd);
        else cJSON_AddNullToObject(r, hw_dtype_name((hw_dtype)d));
      }
    }
    cJSON_AddNumberToObject(o, "hbm_bytes", (double)m->chip.hbm_bytes);
    cJSON_AddNumberToObject(o, "hbm_bw_bytes_per_s", m->chip.hbm_bw_bytes_per_s);
    cJSON_AddStringToObject(o, "interconnect", ic);
    if (m->price.on_demand_usd_per_chip_hour > 0) {
      cJSON_AddNumberToObject(o, "on_demand_usd_per_chip_hour", m->price.on_demand_usd_per_chip_hour);
      cJSON_AddNumberToObject(o, "spot_usd_per_chip_hour", m->price.spot_usd_per_chip_hour);
    } else { /* not rented: null, never a price of 0 */
      cJSON_AddNullToObject(o, "on_demand_usd_per_chip_hour");
      cJSON_AddNullToObject(o, "spot_usd_per_chip_hour");
    }
    cJSON_AddStringToObject(o, "origin", m->origin);
    cJSON_AddItemToArray(arr, o);
  }
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  return s;
}

static int run_hw(cli_ctx *c) {
  if (c->n_pos == 0)
    return cli_usage_error(c, "%s", "expected 'list' or 'show NAME'");
  const char *verb = c->pos[0];
  int is_list = strcmp(verb, "list") == 0, is_show = strcmp(verb, "show") == 0;
  if (!is_list && !is_show) return cli_usage_error(c, "unknown action '%s'; expected list or show", verb);
  if (is_list && c->n_pos > 1) return cli_usage_error(c, "'list' takes no argument, got '%s'", c->pos[1]);
  if (is_show && c->n_pos > 2) return cli_usage_error(c, "'show' takes one NAME, got also '%s'", c->pos[2]);
  if (is_show && cli_opt(c, "--rates"))
    return cli_usage_error(c, "%s", "--rates belongs to 'list' ('show NAME' prints every rate already)");
  if (is_show && c->n_pos == 1 && c->n_hw_files != 1)
    return cli_usage_error(c, "%s", "'show' needs a NAME (or exactly one --hw-file)");

  hw_catalog *cat;
  const hw_model *from_file = NULL;
  int rc = cli_load_catalog(c, &cat, &from_file);
  if (rc != CLI_OK) return rc;

  if (is_list) {
    if (c->json) {
      char *s = hw_list_json(cat, cli_opt(c, "--rates") != NULL);
      fprintf(c->out, "%s\n", s);
      free(s);
    } else if (cli_opt(c, "--rates")) {
      hw_list_rates(cat, c->out);
    } else {
      hw_list_text(cat, c->out);
    }
  } else {
    const hw_model *m = c->n_pos == 2 ? hw_catalog_find(cat, c->pos[1]) : from_file;
    if (!m) {
      char msg[2048];
      hw_catalog_unknown(cat, c->pos[1], msg, sizeof msg);
      fprintf(c->err, "tpusim hw: %s\n", msg);
      rc = CLI_BAD_INPUT;
    } else if (c->json) {
      char *s = hw_to_json(m);
      fprintf(c->out, "%s\n", s);
      free(s);
    } else {
      hw_print_show(m, c->out);
    }
  }
  hw_catalog_free(cat);
  return rc;
}

static const char *const HW_FLAGS[] = {"--rates", NULL};

const cli_cmd cli_cmd_hw = {"hw",
    "tpusim hw list [--json]\n"
    "tpusim hw list --rates [--json]            # dense peak per dtype, every chip\n"
    "tpusim hw show NAME [--json]\n"
    "tpusim hw show --hw-file FILE [--json]    # validate and show your own file",
    "the hardware catalog: list it, or show one entry with its sources", run_hw, NULL, HW_FLAGS, NULL,
    NULL};
