/*
** hlo_calls.c -- the call graph, sized before the build: which computations
** each computation calls and from how many sites, how many graph ops the
** import will make, and which repeated calls are imported once and counted.
**
** Inlining every call site is exact (each copy keeps its own operands, names
** and fusion) but a module whose computations call each other in a fan-out
** (k calls k+1 twice, 40 levels) would be inlined 2^40 times. So a callee
** called from several sites of one caller is inlined at each while the
** copies stay under HLO_INLINE_REPEAT ops, and past that imported once at the
** first site with its ops' count multiplied by the sites: the totals (FLOPs,
** bytes, time) are the same, the graph holds one copy. The later sites take
** the first site's result. What still would not fit in a graph
** (GRAPH_MAX_OPS) is refused here, before any op is made.
*/
#include "hlo_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- the call graph ---- */

static bool is_call(const hlo_inst *in) {
  return in->row && (in->row->fn == hlo_h_call || in->row->fn == hlo_h_async_start);
}

static bool is_while(const hlo_inst *in) { return in->row && in->row->fn == hlo_h_while; }

/* The computation named by in's attribute key, as hlo_attr_comp reads it;
** -1 when absent or unknown (the build reports it at the instruction). */
static int named_comp(const hlo_module *m, const hlo_inst *in, const char *key) {
  const hlo_attr *a = hlo_attr_get(in, key);
  if (!a) return -1;
  hlo_str s = a->val;
  if (s.n > 1 && s.s[0] == '{' && s.s[s.n - 1] == '}') s.s++, s.n -= 2;
  return hlo_comp_find(m, s);
}

/* What a call-like instruction imports: hlo_h_call's calls= or to_apply=,
** hlo_h_async_start's calls=. */
static int callee_of(const hlo_module *m, const hlo_inst *in) {
  if (in->row->fn == hlo_h_call)
    return named_comp(m, in, hlo_attr_get(in, "calls") ? "calls" : "to_apply");
  return named_comp(m, in, "calls");
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Fills p's callee list from c's call sites: one entry per callee, sorted
** by computation index, with its site count. */
static bool list_callees(hlo_builder *b, const hlo_comp *c, hlo_callplan *p) {
  int *ids = malloc((size_t)(c->n + 1) * sizeof *ids), n = 0;
  if (!ids) return false;
  for (int i = 0; i < c->n; i++)
    if (is_call(&c->insts[i])) {
      int d = callee_of(b->m, &c->insts[i]);
      if (d >= 0) ids[n++] = d;
    }
  qsort(ids, (size_t)n, sizeof *ids, cmp_int);
  p->callee = hlo_arena_alloc(&b->ar, (size_t)(n + 1) * sizeof *p->callee);
  if (!p->callee) {
    free(ids);
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (p->n && p->callee[p->n - 1].comp == ids[i]) {
      p->callee[p->n - 1].sites++;
      continue;
    }
    p->callee[p->n++] = (hlo_callee){.comp = ids[i], .sites = 1};
  }
  free(ids);
  return true;
}

/* ---- sizes ---- */

static int64_t sat_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }
static int64_t sat_mul(int64_t a, int64_t b) { return b && a > INT64_MAX / b ? INT64_MAX : a * b; }

/* The sites of callee d in c, the first one's instruction index. */
static int first_site(const hlo_builder *b, const hlo_comp *c, int d) {
  for (int i = 0; i < c->n; i++)
    if (is_call(&c->insts[i]) && callee_of(b->m, &c->insts[i]) == d) return i;
  return -1;
}

/* Notes where the import first passes the graph's limit: c's site with the
** largest share (a call's or a while body's), so the message points at the
** instruction that multiplies. */
static void note_over(hlo_builder *b, int ci, const int64_t *share, int best_while,
                      int64_t best_body) {
  const hlo_callplan *p = &b->plan[ci];
  const hlo_comp *c = &b->m->comps[ci];
  int64_t best = best_body;
  int at = best_while;
  for (int k = 0; k < p->n; k++)
    if (share[k] > best) best = share[k], at = first_site(b, c, p->callee[k].comp);
  b->over_comp = ci;
  b->over_inst = at;
}

/* The ops importing computation ci makes: one per instruction (tuples make
** none, variadic ops several: an estimate, close enough for a limit that
** guards memory), plus each callee's, once if counted and per site if not,
** plus each while body's once. Cycles and runaway depth size as 0 here and
** are reported by the build where they occur. */
static int64_t comp_size(hlo_builder *b, int ci, int depth) {
  hlo_callplan *p = &b->plan[ci];
  if (p->state == 2) return p->size;
  if (p->state == 1 || depth > HLO_MAX_DEPTH) return 0;
  p->state = 1;
  const hlo_comp *c = &b->m->comps[ci];
  if (!list_callees(b, c, p)) {
    p->state = 2; /* out of memory: the build will say so */
    return 0;
  }
  int64_t size = 0, best_body = -1;
  int best_while = -1;
  for (int i = 0; i < c->n; i++) {
    const hlo_inst *in = &c->insts[i];
    if (is_call(in)) continue;
    size = sat_add(size, 1);
    int body = is_while(in) ? named_comp(b->m, in, "body") : -1;
    if (body < 0) continue;
    int64_t s = comp_size(b, body, depth + 1);
    size = sat_add(size, s);
    if (s > best_body) best_body = s, best_while = i;
  }
  int64_t *share = calloc((size_t)p->n + 1, sizeof *share);
  for (int k = 0; k < p->n; k++) {
    hlo_callee *e = &p->callee[k];
    int64_t s = comp_size(b, e->comp, depth + 1), all = sat_mul(s, e->sites);
    e->counted = e->sites > 1 && all > HLO_INLINE_REPEAT;
    p->any_counted |= e->counted;
    if (share) share[k] = e->counted ? s : all;
    size = sat_add(size, e->counted ? s : all);
  }
  p->size = size;
  p->state = 2;
  if (size > GRAPH_MAX_OPS && b->over_comp < 0 && share) note_over(b, ci, share, best_while, best_body);
  free(share);
  return size;
}

static hlo_val *refuse_size(hlo_builder *b) {
  const hlo_comp *c = &b->m->comps[b->over_comp];
  hlo_ctx x = {.b = b, .c = c, .in = b->over_inst >= 0 ? &c->insts[b->over_inst] : NULL};
  return hlo_berr(&x,
                  "importing the module would make about %lld graph ops, %lld of them in "
                  "computation %.*s, which this instruction multiplies most: past the limit "
                  "of %d ops a graph holds (~2 GB; docs/limits.md). A callee that one caller "
                  "repeats is imported once and counted, but one reached through many "
                  "different callers is inlined into each",
                  (long long)b->plan[b->m->entry].size, (long long)b->plan[b->over_comp].size,
                  c->name.n, c->name.s, GRAPH_MAX_OPS);
}

/* Sizes the import from ENTRY and decides the counted callees; false after
** reporting a module that would not fit in a graph. */
bool hlo_plan_calls(hlo_builder *b) {
  b->plan = hlo_arena_alloc(&b->ar, (size_t)b->m->n_comps * sizeof *b->plan);
  if (!b->plan) {
    hlo_ctx x = {.b = b, .c = &b->m->comps[b->m->entry]};
    hlo_oom(&x);
    return false;
  }
  b->over_comp = -1;
  if (comp_size(b, b->m->entry, 0) <= GRAPH_MAX_OPS || b->over_comp < 0) return true;
  refuse_size(b);
  return false;
}

/* ---- calls ---- */

static const hlo_inst *param_inst(const hlo_comp *c, int k) {
  for (int i = 0; i < c->n; i++)
    if (c->insts[i].param_no == k) return &c->insts[i];
  return NULL;
}

/* A later site of a counted callee: the operands must be what the callee's
** parameters say, as they would be checked if it were inlined here. */
static hlo_val *reuse(hlo_ctx *x, int ci, hlo_val **args, int n_args, hlo_val *r) {
  const hlo_comp *c = &x->b->m->comps[ci];
  if (n_args != c->n_params)
    return hlo_berr(x, "passes %d operands to %.*s, which has %d parameters", n_args, c->name.n,
                    c->name.s, c->n_params);
  for (int k = 0; k < n_args; k++) {
    const hlo_inst *p = param_inst(c, k);
    if (!p || hlo_val_matches(x->b, args[k], &p->shape)) continue;
    char got[512], want[512];
    hlo_put_val(x->b, args[k], got, sizeof got, 0);
    hlo_put_shape(&p->shape, want, sizeof want, 0);
    return hlo_berr(x, "operand %d: %.*s's parameter %%%.*s is %s, this call passes %s", k,
                    c->name.n, c->name.s, p->name.n, p->name.s, want, got);
  }
  return r;
}

/* A call, fusion or async-start's callee: inlined, or, when this caller
** repeats a large callee (hlo_plan_calls), imported at the first site with
** its ops counted once per site and reused at the others. */
hlo_val *hlo_call(hlo_ctx *x, int ci, hlo_val **args, int n_args) {
  hlo_builder *b = x->b;
  const hlo_callplan *p = &b->plan[x->c - b->m->comps];
  int k = -1;
  for (int lo = 0, hi = p->n - 1; lo <= hi && k < 0;) {
    int mid = (lo + hi) / 2;
    if (p->callee[mid].comp == ci) k = mid;
    else if (p->callee[mid].comp < ci) lo = mid + 1;
    else hi = mid - 1;
  }
  if (k < 0 || !p->callee[k].counted || !x->memo) return hlo_eval_comp(x, ci, args, n_args);
  if (x->memo[k]) return reuse(x, ci, args, n_args, x->memo[k]);
  int64_t sites = p->callee[k].sites, outer = b->count;
  if (sites > INT64_MAX / outer)
    return hlo_berr(x, "execution counts overflow: %lld sites x %lld", (long long)sites,
                    (long long)outer);
  b->count = outer * sites;
  hlo_val *r = hlo_eval_comp(x, ci, args, n_args);
  b->count = outer;
  graph_set_count(b->g, outer);
  return x->memo[k] = r;
}
