/*
** opcost.c -- see opcost.h.
*/
#include "opcost.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"

typedef struct {
  uint64_t hash;
  char *sig;   /* the key's bytes; NULL: an empty slot */
  size_t len;  /* bytes in sig (a text signature's with its terminating 0) */
  graph_cost cost; /* opcost's cache: the signature's IR count */
  int idx;         /* opcost_list: the signature's entry */
} entry;

/* Signatures (text, or opcost's binary keys), open addressing, at most
** half full; owns its copies. */
typedef struct {
  entry *tab;
  size_t cap, n;
} sigtab;

/* Kernel signatures are built in a buffer this big; one that does not fit
** is not keyed (lowered each time it is met). */
#define SIG_CAP 65536
/* The cache's binary keys (kernel_key), in 64-bit words: 32 KiB on the
** stack; a kernel whose key does not fit is not keyed either. */
#define KEY_CAP 4096

/* A lower_module keeps every function lowered into it; a fresh one after
** this many keeps a long planner run's memory flat. */
#define FNS_PER_MODULE 256

/* Modules not in use: a thread takes one to lower into outside the lock,
** so threads lower different kernels at once. */
#define POOL 64

struct opcost {
  opcost_source src;
  pthread_mutex_t mu;
  sigtab tab;
  lower_module *pool[POOL];
  int pool_fns[POOL]; /* functions in each */
  int n_pool;
  opcost_stats st;
};

static void sigtab_free(sigtab *t);

opcost *opcost_new(opcost_source src) {
  opcost *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->src = src;
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    return NULL;
  }
  return c;
}

void opcost_free(opcost *c) {
  if (!c) return;
  sigtab_free(&c->tab);
  for (int i = 0; i < c->n_pool; i++) lower_free(c->pool[i]);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

opcost_source opcost_source_of(const opcost *c) { return c->src; }

opcost_stats opcost_get_stats(opcost *c) {
  pthread_mutex_lock(&c->mu);
  opcost_stats s = c->st;
  pthread_mutex_unlock(&c->mu);
  return s;
}

/* ---- signatures ---- */

static size_t put(char *buf, size_t n, size_t k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends at buf + k; returns the new length (n or more: it did not fit). */
static size_t put(char *buf, size_t n, size_t k, const char *fmt, ...) {
  if (k >= n) return k;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + k, n - k, fmt, ap);
  va_end(ap);
  return w < 0 ? n : k + (size_t)w;
}

static size_t put_dims(char *buf, size_t n, size_t k, const char *tag, const graph_dims *d) {
  k = put(buf, n, k, " %s", tag);
  for (int i = 0; i < d->n; i++) k = put(buf, n, k, "%s%d", i ? "," : "", d->d[i]);
  return k;
}

static size_t put_ints(char *buf, size_t n, size_t k, const char *tag, const int64_t *v, int m) {
  k = put(buf, n, k, " %s", tag);
  for (int i = 0; i < m; i++) k = put(buf, n, k, "%s%lld", i ? "," : "", (long long)v[i]);
  return k;
}

void opcost_op_signature(const graph *g, int id, char *buf, size_t n) {
  const graph_op *op = graph_get(g, id);
  size_t k = put(buf, n, 0, "%s", graph_op_name(op->kind));
  char sh[128];
  for (int i = 0; i < op->n_in; i++) {
    graph_shape_str(&graph_get(g, op->in[i])->out, sh, sizeof sh);
    k = put(buf, n, k, " %s", sh);
  }
  graph_shape_str(&op->out, sh, sizeof sh);
  k = put(buf, n, k, " -> %s", sh);
  int rank = op->out.rank;
  switch (op->kind) {
  case GOP_DOT:
    k = put_dims(buf, n, k, "{b", &op->lhs_batch);
    k = put_dims(buf, n, k, "c", &op->lhs_contract);
    k = put_dims(buf, n, k, "| b", &op->rhs_batch);
    k = put_dims(buf, n, k, "c", &op->rhs_contract);
    k = put(buf, n, k, "}");
    break;
  case GOP_REDUCE:
    k = put(buf, n, k, " {r%d", (int)op->reduce);
    k = put_dims(buf, n, k, "", &op->dims);
    k = put(buf, n, k, "}");
    break;
  case GOP_BROADCAST: case GOP_TRANSPOSE: case GOP_CONCAT:
    k = put_dims(buf, n, k, "{", &op->dims);
    k = put(buf, n, k, "}");
    break;
  case GOP_SLICE: case GOP_PAD:
    k = put_ints(buf, n, k, "{", op->lo, rank);
    k = put_ints(buf, n, k, "|", op->hi, rank);
    k = put_ints(buf, n, k, "|", op->step, rank);
    k = put(buf, n, k, "}");
    break;
  case GOP_CONV:
  case GOP_CUSTOM: {
    const graph_conv_attrs *a = &op->conv;
    if (op->kind == GOP_CUSTOM) {
      const char *slash = op->name ? strrchr(op->name, '/') : NULL;
      k = put(buf, n, k, " {%s %.17g %.17g %.17g", slash ? slash + 1 : op->name ? op->name : "",
              op->custom_flops, op->custom_transcendentals, op->custom_bytes);
      k = put_dims(buf, n, k, "axis", &op->dims);
      k = put(buf, n, k, "}");
    }
    k = put(buf, n, k, " {s%d i%d,%d o%d,%d,%d,%d g%lld,%lld", a->spatial, a->in_batch,
            a->in_feature, a->k_in, a->k_out, a->out_batch, a->out_feature,
            (long long)a->feature_groups, (long long)a->batch_groups);
    int sp = a->spatial > 0 && a->spatial <= 3 ? a->spatial : 0;
    for (int i = 0; i < sp; i++)
      k = put(buf, n, k, " %d,%d,%d:%lld,%lld,%lld,%lld,%lld", a->in_spatial[i], a->k_spatial[i],
              a->out_spatial[i], (long long)a->stride[i], (long long)a->pad_lo[i],
              (long long)a->pad_hi[i], (long long)a->lhs_dilation[i], (long long)a->rhs_dilation[i]);
    k = put(buf, n, k, "}");
    break;
  }
  default:
    break;
  }
  (void)k;
}

bool opcost_kernel_signature(const graph *g, const int *ops, int n, char *buf, size_t cap) {
  size_t k = 0;
  int outside[256], n_out = 0;
  char sig[2048];
  if (cap) buf[0] = '\0';
  for (int i = 0; i < n && k < cap; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    opcost_op_signature(g, ops[i], sig, sizeof sig);
    k = put(buf, cap, k, "%s%s", i ? "; " : "", sig);
    for (int j = 0; j < op->n_in && k < cap; j++) {
      int v = op->in[j], m, o;
      for (m = 0; m < i && ops[m] != v; m++) {}
      if (m < i) {
        k = put(buf, cap, k, " @%d", m);
        continue;
      }
      for (o = 0; o < n_out && outside[o] != v; o++) {}
      if (o == n_out) {
        if (n_out == 256) return false;
        outside[n_out++] = v;
      }
      k = put(buf, cap, k, " $%d", o);
    }
  }
  return k < cap;
}

/* ---- the cache's key ----
** The same fields as the text signature above, in the same order, as
** 64-bit words instead of formatted text: formatting was most of what
** costing a plan's kernels took once the kernels were cached (the planner
** asks ~10^5 kernels a second). A word's field is known from the words
** before it (kinds, counts and ranks come first), so two kernels have the
** same key exactly when they have the same fields, as with the text. */

typedef struct {
  uint64_t *w;
  size_t n, cap;
} keybuf;

static void kw(keybuf *k, uint64_t v) {
  if (k->n < k->cap) k->w[k->n] = v;
  k->n++; /* counted past cap: the key did not fit */
}

static void kw_shape(keybuf *k, const graph_shape *s) {
  kw(k, (uint64_t)s->dtype << 32 | (uint32_t)s->rank);
  for (int i = 0; i < s->rank; i++) kw(k, (uint64_t)s->dim[i]);
}

static void kw_dims(keybuf *k, const graph_dims *d) {
  kw(k, (uint64_t)d->n);
  for (int i = 0; i < d->n; i++) kw(k, (uint64_t)(int64_t)d->d[i]);
}

static void kw_ints(keybuf *k, const int64_t *v, int m) {
  for (int i = 0; i < m; i++) kw(k, (uint64_t)v[i]);
}

static void kw_double(keybuf *k, double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  kw(k, u);
}

/* A string: its length, then its bytes eight to a word. */
static void kw_str(keybuf *k, const char *s) {
  size_t l = strlen(s);
  kw(k, l);
  for (size_t i = 0; i < l; i += 8) {
    uint64_t u = 0;
    memcpy(&u, s + i, l - i < 8 ? l - i : 8);
    kw(k, u);
  }
}

/* One op's fields: opcost_op_signature's. */
static void kw_op(keybuf *k, const graph *g, const graph_op *op) {
  kw(k, (uint64_t)op->kind << 32 | (uint32_t)op->n_in);
  for (int i = 0; i < op->n_in; i++) kw_shape(k, &graph_get(g, op->in[i])->out);
  kw_shape(k, &op->out);
  switch (op->kind) {
  case GOP_DOT:
    kw_dims(k, &op->lhs_batch);
    kw_dims(k, &op->lhs_contract);
    kw_dims(k, &op->rhs_batch);
    kw_dims(k, &op->rhs_contract);
    break;
  case GOP_REDUCE:
    kw(k, (uint64_t)op->reduce);
    kw_dims(k, &op->dims);
    break;
  case GOP_BROADCAST: case GOP_TRANSPOSE: case GOP_CONCAT:
    kw_dims(k, &op->dims);
    break;
  case GOP_SLICE: case GOP_PAD:
    kw_ints(k, op->lo, op->out.rank);
    kw_ints(k, op->hi, op->out.rank);
    kw_ints(k, op->step, op->out.rank);
    break;
  case GOP_CONV:
  case GOP_CUSTOM: {
    const graph_conv_attrs *a = &op->conv;
    if (op->kind == GOP_CUSTOM) {
      const char *slash = op->name ? strrchr(op->name, '/') : NULL;
      kw_str(k, slash ? slash + 1 : op->name ? op->name : "");
      kw_double(k, op->custom_flops);
      kw_double(k, op->custom_transcendentals);
      kw_double(k, op->custom_bytes);
      kw_dims(k, &op->dims);
    }
    const int f[] = {a->spatial, a->in_batch, a->in_feature, a->k_in, a->k_out, a->out_batch,
                     a->out_feature};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) kw(k, (uint64_t)(int64_t)f[i]);
    kw(k, (uint64_t)a->feature_groups);
    kw(k, (uint64_t)a->batch_groups);
    int sp = a->spatial > 0 && a->spatial <= 3 ? a->spatial : 0;
    for (int i = 0; i < sp; i++) {
      kw(k, (uint64_t)(int64_t)a->in_spatial[i]);
      kw(k, (uint64_t)(int64_t)a->k_spatial[i]);
      kw(k, (uint64_t)(int64_t)a->out_spatial[i]);
      const int64_t v[] = {a->stride[i], a->pad_lo[i], a->pad_hi[i], a->lhs_dilation[i],
                           a->rhs_dilation[i]};
      kw_ints(k, v, 5);
    }
    break;
  }
  default:
    break;
  }
}

/* The kernel's key into k (room for cap words): its op count, then each
** op's fields and operands -- an op of the kernel by its place (@i), an
** outside value by its order of first use ($j), as the text names them.
** Its length in words, or 0 when it does not fit. */
static size_t kernel_key(const graph *g, const int *ops, int n, uint64_t *w, size_t cap) {
  keybuf k = {w, 0, cap};
  int outside[256], n_out = 0;
  kw(&k, (uint64_t)n);
  for (int i = 0; i < n && k.n <= cap; i++) {
    const graph_op *op = graph_get(g, ops[i]);
    kw_op(&k, g, op);
    for (int j = 0; j < op->n_in; j++) {
      int v = op->in[j], m, o;
      for (m = 0; m < i && ops[m] != v; m++) {}
      if (m < i) {
        kw(&k, (uint64_t)m);
        continue;
      }
      for (o = 0; o < n_out && outside[o] != v; o++) {}
      if (o == n_out) {
        if (n_out == 256) return 0;
        outside[n_out++] = v;
      }
      kw(&k, (uint64_t)1 << 63 | (uint64_t)o);
    }
  }
  return k.n <= cap ? k.n : 0;
}

/* ---- the table ---- */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* FNV-1a over 64-bit words (a binary key's). */
static uint64_t fnv1a_words(const uint64_t *w, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ULL;
  return h ^ h >> 29;
}

/* The slot of key sig (len bytes), or the empty slot where it would go. */
static entry *find_key(sigtab *t, uint64_t h, const void *sig, size_t len) {
  if (!t->cap) return NULL;
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    entry *e = &t->tab[i];
    if (!e->sig) return e;
    if (e->hash == h && e->len == len && memcmp(e->sig, sig, len) == 0) return e;
  }
}

static entry *find(sigtab *t, uint64_t h, const char *sig) {
  return find_key(t, h, sig, strlen(sig) + 1);
}

static int grow(sigtab *t) {
  size_t cap = t->cap ? 2 * t->cap : 256;
  entry *nt = calloc(cap, sizeof *nt);
  if (!nt) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    entry *e = &t->tab[i];
    if (!e->sig) continue;
    size_t j = e->hash & (cap - 1);
    while (nt[j].sig) j = (j + 1) & (cap - 1);
    nt[j] = *e;
  }
  free(t->tab);
  t->tab = nt;
  t->cap = cap;
  return 0;
}

/* Adds key sig of len bytes (not in t; copied) and returns its slot, or
** NULL when memory runs out (a full table grows). */
static entry *insert_key(sigtab *t, uint64_t h, const void *sig, size_t len) {
  if (2 * (t->n + 1) > t->cap && grow(t) != 0) return NULL;
  char *kept = malloc(len);
  if (!kept) return NULL;
  memcpy(kept, sig, len);
  entry *e = find_key(t, h, sig, len); /* after a grow: the new table's slot */
  e->sig = kept;
  e->len = len;
  e->hash = h;
  t->n++;
  return e;
}

static entry *insert(sigtab *t, uint64_t h, const char *sig) {
  return insert_key(t, h, sig, strlen(sig) + 1);
}

static void sigtab_free(sigtab *t) {
  for (size_t i = 0; i < t->cap; i++) free(t->tab[i].sig);
  free(t->tab);
  *t = (sigtab){0};
}

/* Whether the lowering takes every op of the kernel. */
static bool lowerable(const graph *g, const int *ops, int n) {
  char why[160];
  for (int i = 0; i < n; i++)
    if (!lower_supported(g, ops[i], why, sizeof why)) return false;
  return true;
}

/* Lowers the kernel into lm as one function; its index, or -1 with err. */
static int lower_kernel(lower_module *lm, const graph *g, const int *ops, int n, char *err,
                        size_t errn) {
  /* a lone op is lower_op's function (a reshape is an empty one: a
  ** bitcast) -- unless it reads one value twice (x * x), which a kernel
  ** loads once, as lower_fused does; two or more ops are one fused function */
  return n == 1 && !graph_op_reads_twice(g, ops[0]) ? lower_op(lm, g, ops[0], err, errn)
                                                     : lower_fused(lm, g, ops, n, err, errn);
}

/* Lowers the kernel into lm and counts its IR. */
static int count_ir(lower_module *lm, const graph *g, const int *ops, int n, graph_cost *out,
                    char *err, size_t errn) {
  int fn = lower_kernel(lm, g, ops, n, err, errn);
  if (fn < 0) return -1;
  return lower_op_cost(lm, fn, out, NULL, err, errn);
}

int opcost_kernel(opcost *c, const graph *g, const fuse_plan *p, int k, graph_cost *out,
                  char *err, size_t errn) {
  /* the pass's cost: what a kernel not lowered keeps, and what a new
  ** signature's IR count is checked against -- not needed on a cache hit */
  int ops_buf[1024];
  int n = c->src == OPCOST_IR ? fuse_members(p, g, k, ops_buf, 1024) : 0;
  bool ir = n > 0 && lowerable(g, ops_buf, n);
  if (!ir) {
    *out = fuse_group_cost(p, g, k);
    pthread_mutex_lock(&c->mu);
    c->st.asked++;
    c->st.declared++;
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  uint64_t key[KEY_CAP];
  size_t words = kernel_key(g, ops_buf, n, key, KEY_CAP), len = words * sizeof key[0];
  bool keyed = words > 0;
  uint64_t h = keyed ? fnv1a_words(key, words) : 0;
  /* 1. the cache; else a module from the pool (or a new one) */
  pthread_mutex_lock(&c->mu);
  c->st.asked++;
  entry *e = keyed ? find_key(&c->tab, h, key, len) : NULL;
  if (e && e->sig) {
    *out = e->cost;
    c->st.hits++;
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  lower_module *lm = NULL;
  int fns = 0;
  if (c->n_pool > 0) {
    c->n_pool--;
    lm = c->pool[c->n_pool];
    fns = c->pool_fns[c->n_pool];
  }
  pthread_mutex_unlock(&c->mu);
  /* 2. lower and count, outside the lock: threads lower different kernels at once */
  if (!lm) lm = lower_new("opcost");
  graph_cost got;
  int counted = lm ? count_ir(lm, g, ops_buf, n, &got, err, errn) : -1;
  if (lm) fns++;
  /* 3. back into the table and the pool */
  graph_cost formula = fuse_group_cost(p, g, k);
  *out = formula;
  pthread_mutex_lock(&c->mu);
  if (counted != 0) {
    /* the lowering refused a kernel it said it takes: keep the formula,
    ** and let the count of differences show it */
    c->st.declared++;
    c->st.differ++;
  } else if (keyed && (e = find_key(&c->tab, h, key, len)) && e->sig) {
    /* another thread lowered it meanwhile: counted as the hit it would
    ** have been, so the counts do not depend on the threads' timing */
    *out = e->cost;
    c->st.hits++;
  } else {
    c->st.lowered++;
    if (!graph_cost_close(&got, &formula)) c->st.differ++;
    *out = got;
    /* the table keeps a copy of the key (out of memory: the kernel stays
    ** uncached, still counted) */
    if (keyed && (e = insert_key(&c->tab, h, key, len))) e->cost = got;
  }
  /* a module keeps every function lowered into it: a fresh one after
  ** FNS_PER_MODULE keeps a long planner run's memory flat */
  if (lm && fns < FNS_PER_MODULE && c->n_pool < POOL) {
    c->pool[c->n_pool] = lm;
    c->pool_fns[c->n_pool++] = fns;
    lm = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  lower_free(lm);
  return 0;
}

/* ---- the listing: every distinct op and kernel in one module ---- */

void opcost_listing_free(opcost_listing *l) {
  if (!l) return;
  for (int d = 0; d < l->n_ops; d++) free(l->ops[d].signature);
  for (int d = 0; d < l->n_kernels; d++) free(l->kernels[d].signature);
  free(l->ops);
  free(l->kernels);
  *l = (opcost_listing){0};
}

/* The single ops: each distinct signature lower_op takes, lowered once. */
static int list_ops(lower_module *lm, const graph *g, const char *only_op, opcost_listing *out,
                    int *only_id, char *err, size_t errn) {
  int n = graph_count(g);
  sigtab seen = {0};
  char why[160], sig[1024], e2[512];
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    const graph_op *op = graph_get(g, i);
    if (only_op ? !op->name || strcmp(op->name, only_op) != 0
                : !lower_supported(g, i, why, sizeof why)) {
      if (only_op || op->kind == GOP_PARAMETER || op->kind == GOP_CONSTANT) continue;
      /* collectives are the network model's; custom-calls carry declared costs */
      if (graph_op_is_collective(op->kind)) out->collectives++;
      else if (op->kind == GOP_CUSTOM) out->custom_calls++;
      else if (out->not_lowered++ == 0) snprintf(out->first_why, sizeof out->first_why, "%s", why);
      continue;
    }
    if (only_op) *only_id = i;
    opcost_op_signature(g, i, sig, sizeof sig);
    uint64_t h = fnv1a(sig);
    entry *e = find(&seen, h, sig);
    if (!e || !e->sig) {
      int fn = lower_op(lm, g, i, e2, sizeof e2);
      char *kept = fn >= 0 ? strdup(sig) : NULL;
      if (fn < 0 || !kept || !(e = insert(&seen, h, sig))) {
        snprintf(err, errn, "op '%s': %s", op->name, fn < 0 ? e2 : "out of memory");
        free(kept);
        rc = -1;
        break;
      }
      e->idx = out->n_ops++;
      out->ops[e->idx] = (opcost_entry){.fn = fn, .op = i, .group = -1, .n_ops = 1,
                                        .signature = kept};
    }
    out->ops[e->idx].uses += op->count;
  }
  sigtab_free(&seen);
  return rc;
}

/* The fusion pass's kernels of two or more ops, each distinct one lowered
** once as one function (after the single ops' functions). */
static int list_kernels(lower_module *lm, const graph *g, const fuse_plan *fp, bool only,
                        int only_id, opcost_listing *out, char *err, size_t errn) {
  int n = graph_count(g);
  int *mem = malloc(sizeof(int) * (size_t)(n ? n : 1));
  char *sig = malloc(SIG_CAP), e2[512];
  sigtab seen = {0};
  int rc = 0;
  if (!mem || !sig) {
    snprintf(err, errn, "out of memory");
    rc = -1;
  }
  for (int k = 0; rc == 0 && k < fp->n_groups; k++) {
    /* the kernel as simulate times it: its ops and the producers it recomputes */
    int nm = fuse_members(fp, g, k, mem, n ? n : 1);
    if (nm < 2) continue;
    bool has_only = false;
    for (int i = 0; i < nm; i++) has_only |= mem[i] == only_id;
    if (only && !has_only) continue;
    if (!lowerable(g, mem, nm)) { /* it keeps the pass's cost in simulate */
      out->kernels_not_lowered++;
      continue;
    }
    const char *root = graph_get(g, fp->root[k])->name;
    bool keyed = opcost_kernel_signature(g, mem, nm, sig, SIG_CAP);
    uint64_t h = keyed ? fnv1a(sig) : 0;
    entry *e = keyed ? find(&seen, h, sig) : NULL;
    int d;
    if (e && e->sig) {
      d = e->idx;
    } else {
      int fn = lower_kernel(lm, g, mem, nm, e2, sizeof e2);
      char *kept = fn >= 0 && keyed ? strdup(sig) : NULL;
      if (fn < 0 || (keyed && (!kept || !(e = insert(&seen, h, sig))))) {
        snprintf(err, errn, "fused kernel '%s': %s", root, fn < 0 ? e2 : "out of memory");
        free(kept);
        rc = -1;
        break;
      }
      d = out->n_kernels++;
      if (e) e->idx = d;
      out->kernels[d] = (opcost_entry){.fn = fn, .op = -1, .group = k, .n_ops = fp->size[k],
                                       .signature = kept};
    }
    out->kernels[d].uses += graph_get(g, fp->root[k])->count;
  }
  sigtab_free(&seen);
  free(sig);
  free(mem);
  return rc;
}

int opcost_list(lower_module *lm, const graph *g, const fuse_plan *fp, const char *only_op,
                opcost_listing *out, char *err, size_t errn) {
  *out = (opcost_listing){0};
  int n = graph_count(g), ng = fp ? fp->n_groups : 0;
  out->ops = calloc((size_t)(n ? n : 1), sizeof *out->ops);
  out->kernels = calloc((size_t)(ng ? ng : 1), sizeof *out->kernels);
  int only_id = -1;
  int rc = out->ops && out->kernels ? 0 : (snprintf(err, errn, "out of memory"), -1);
  if (rc == 0) rc = list_ops(lm, g, only_op, out, &only_id, err, errn);
  if (rc == 0 && fp) rc = list_kernels(lm, g, fp, only_op != NULL, only_id, out, err, errn);
  if (rc != 0) opcost_listing_free(out);
  return rc;
}
