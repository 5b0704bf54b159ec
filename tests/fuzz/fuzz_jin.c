/*
** fuzz_jin.c -- the JSON reader every loader uses (base/jin): parse, walk
** every member through the typed getters, locate an error's line:column.
*/
#include "../../base/jin.h"
#include "fuzz_common.h"

static void walk(jin *j, const cJSON *v, int depth) {
  if (!v || depth > 20) return;
  int64_t i;
  double d;
  bool b;
  const char *s;
  for (const cJSON *c = v->child; c; c = c->next) {
    if (c->string) {
      jin_get_int(j, v, c->string, -1000, 1000, false, &i);
      jin_get_num(j, v, c->string, -1e9, 1e9, false, &d);
      jin_get_bool(j, v, c->string, false, &b);
      jin_get_str(j, v, c->string, false, &s);
      jin_push_key(j, c->string, 0);
      walk(j, c, depth + 1);
      jin_pop(j);
    } else {
      walk(j, c, depth + 1);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  diag *dg = diag_new();
  jin j;
  if (jin_open(&j, "fuzz.json", (const char *)data, n, dg) == 0) walk(&j, j.root, 0);
  else FUZZ_REQUIRE(diag_count(dg) > 0);
  jin_close(&j); /* after a failed open too, as every loader does */
  diag_free(dg);
  return 0;
}
