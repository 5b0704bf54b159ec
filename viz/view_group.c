/*
** view_group.c -- lane groups (view.h): a trace of more than
** VIEW_GROUP_MIN_PROCS processes shows one group per pipeline stage or
** node (read off the process names, else blocks of consecutive
** processes), each with a summary lane per thread kind -- the fraction of
** its members busy in each category, as a running integral -- and one HBM
** lane with the members' maximum; and the rows shown now.
*/
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view_int.h"

/* "stage 3" out of a process name's detail: "chip 17 (stage 3, node 2)". */
static bool key_of(char *buf, size_t n, const char *name) {
  const char *par = name ? strstr(name, " (") : NULL;
  if (!par) return false;
  static const char *const WORDS[] = {"stage ", "node ", "slice ", "host "};
  for (size_t k = 0; k < sizeof WORDS / sizeof *WORDS; k++) {
    const char *w = strstr(par, WORDS[k]);
    if (!w) continue;
    size_t len = strlen(WORDS[k]), d = 0;
    while (w[len + d] >= '0' && w[len + d] <= '9') d++;
    if (d == 0) continue;
    snprintf(buf, n, "%.*s", (int)(len + d), w);
    return true;
  }
  return false;
}

int view_build_rows(view_trace *t) {
  int n = 0;
  if (t->ngroups == 0) {
    n = t->nlanes;
  } else {
    for (int g = 0; g < t->ngroups; g++) {
      n += t->groups[g].nglanes;
      if (t->groups[g].expanded)
        for (int k = 0; k < t->groups[g].nprocs; k++) n += t->procs[t->groups[g].procs[k]].nlanes;
    }
  }
  vrow *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (!r) return -1;
  int k = 0;
  if (t->ngroups == 0) {
    for (int i = 0; i < t->nlanes; i++) r[k++] = (vrow){ROW_LANE, i};
  } else {
    for (int g = 0; g < t->ngroups; g++) {
      const vgroup *gr = &t->groups[g];
      for (int i = 0; i < gr->nglanes; i++) r[k++] = (vrow){ROW_GLANE, gr->glane0 + i};
      if (gr->expanded)
        for (int m = 0; m < gr->nprocs; m++) {
          const vproc *p = &t->procs[gr->procs[m]];
          for (int i = 0; i < p->nlanes; i++) r[k++] = (vrow){ROW_LANE, p->lane0 + i};
        }
    }
  }
  free(t->rows);
  t->rows = r;
  t->nrows = n;
  return 0;
}

static int cmp_bp(const void *a, const void *b) {
  const vbp *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_pt_ts(const void *a, const void *b) {
  const vpt *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The busy profile of the member lanes with thread tid, per category. */
static int build_busy(view_trace *t, vglane *gl, const vgroup *g) {
  int cnt[CAT_N] = {0};
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (l->mem || l->tid != gl->tid) continue;
      gl->members++;
      for (int e = l->first; e < l->first + l->count; e++) cnt[t->ev[e].cat]++;
    }
  }
  for (int c = 0; c < CAT_N; c++) {
    if (!cnt[c]) continue;
    gl->bp[c] = malloc((size_t)cnt[c] * 2 * sizeof(vbp));
    if (!gl->bp[c]) return -1;
    gl->cats |= 1u << c;
  }
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (l->mem || l->tid != gl->tid) continue;
      for (int e = l->first; e < l->first + l->count; e++) {
        const vev *ev = &t->ev[e];
        vbp *b = gl->bp[ev->cat];
        b[gl->nbp[ev->cat]++] = (vbp){ev->ts, 0, +1};
        b[gl->nbp[ev->cat]++] = (vbp){ev->ts + ev->dur, 0, -1};
      }
    }
  }
  for (int c = 0; c < CAT_N; c++) {
    vbp *b = gl->bp[c];
    int n = gl->nbp[c], k = 0;
    if (!n) continue;
    qsort(b, (size_t)n, sizeof *b, cmp_bp);
    /* in place: entry k is written after entry i >= k was read */
    double integ = 0, tp = b[0].t;
    int busy = 0;
    for (int i = 0; i < n; i++) {
      double tt = b[i].t;
      int d = b[i].n;
      integ += busy * (tt - tp);
      tp = tt;
      busy += d;
      if (k > 0 && b[k - 1].t == tt) b[k - 1].integ = integ, b[k - 1].n = busy;
      else b[k++] = (vbp){tt, integ, busy};
    }
    gl->nbp[c] = k;
  }
  return 0;
}

/* The members' largest HBM in use, as a step function. */
static int build_mem_max(view_trace *t, vglane *gl, const vgroup *g) {
  int n = 0;
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++)
      if (t->lanes[i].mem) n += t->lanes[i].count;
  }
  vpt *all = malloc((size_t)(n ? n : 1) * sizeof *all);
  double *cur = calloc(g->nprocs > 0 ? (size_t)g->nprocs : 1, sizeof *cur);
  gl->pt = malloc((size_t)(n ? n : 1) * sizeof *gl->pt);
  if (!all || !cur || !gl->pt) {
    free(all);
    free(cur);
    return -1;
  }
  int k = 0;
  for (int m = 0; m < g->nprocs; m++) {
    const vproc *p = &t->procs[g->procs[m]];
    for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
      const vlane *l = &t->lanes[i];
      if (!l->mem) continue;
      gl->members++;
      for (int q = l->first; q < l->first + l->count; q++)
        all[k++] = (vpt){t->pt[q].ts, t->pt[q].bytes, m};
    }
  }
  qsort(all, (size_t)n, sizeof *all, cmp_pt_ts);
  double mx = 0;
  int arg = -1;
  for (int i = 0; i < n; i++) {
    int m = all[i].lane;
    double old = cur[m];
    cur[m] = all[i].bytes;
    if (cur[m] >= mx) {
      mx = cur[m];
      arg = m;
    } else if (m == arg && cur[m] < old) { /* the largest fell: look again */
      mx = 0;
      for (int q = 0; q < g->nprocs; q++)
        if (cur[q] >= mx) mx = cur[q], arg = q;
    }
    if (i + 1 < n && all[i + 1].ts == all[i].ts) continue;
    gl->pt[gl->npt++] = (vpt){all[i].ts, mx, -1};
  }
  free(all);
  free(cur);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* "stage 8-15" for stage 8 .. stage 15; "a .. b" when the names differ
** in more than their numbers. */
static void block_name(char *buf, size_t n, const char *a, const char *b) {
  const char *sa = strrchr(a, ' '), *sb = strrchr(b, ' ');
  char *ea, *eb;
  if (sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0) {
    long x = strtol(sa + 1, &ea, 10), y = strtol(sb + 1, &eb, 10);
    if (ea != sa + 1 && eb != sb + 1 && !*ea && !*eb) {
      snprintf(buf, n, "%.*s %ld-%ld", (int)(sa - a), a, x, y);
      return;
    }
  }
  snprintf(buf, n, "%.28s .. %.28s", a, b);
}

int view_build_groups(view_trace *t, const vname *names, int nnames) {
  /* keys: process_labels, else "stage N" / "node N" in the name's detail;
  ** when some process has none, blocks of consecutive processes for all */
  bool all_keyed = true;
  for (int i = 0; i < t->nprocs; i++) {
    vproc *p = &t->procs[i];
    const char *lab = view_find_name(names, nnames, p->pid, -2e300);
    if (lab) snprintf(p->key, sizeof p->key, "%s", lab);
    else if (!key_of(p->key, sizeof p->key, view_find_name(names, nnames, p->pid, -1e300)))
      all_keyed = false;
  }
  if (!all_keyed) {
    int block = 8; /* a node of 8 GPUs, to begin with */
    while ((t->nprocs + block - 1) / block > 32) block *= 2;
    for (int i = 0; i < t->nprocs; i++) {
      int a = i / block * block, b = a + block - 1 < t->nprocs - 1 ? a + block - 1 : t->nprocs - 1;
      block_name(t->procs[i].key, sizeof t->procs[i].key, t->procs[a].name, t->procs[b].name);
    }
  }
  size_t np = t->nprocs > 0 ? (size_t)t->nprocs : 1;
  t->groups = calloc(np, sizeof *t->groups);
  int *of = malloc(np * sizeof *of);
  if (!t->groups || !of) {
    free(of);
    return -1;
  }
  for (int i = 0; i < t->nprocs; i++) {
    int g = 0;
    while (g < t->ngroups && strcmp(t->groups[g].name, t->procs[i].key) != 0) g++;
    if (g == t->ngroups) snprintf(t->groups[t->ngroups++].name, sizeof t->groups->name, "%s",
                                  t->procs[i].key);
    of[i] = g;
    t->groups[g].nprocs++;
  }
  for (int g = 0; g < t->ngroups; g++) {
    t->groups[g].procs = malloc((size_t)t->groups[g].nprocs * sizeof(int));
    if (!t->groups[g].procs) {
      free(of);
      return -1;
    }
    t->groups[g].nprocs = 0;
  }
  for (int i = 0; i < t->nprocs; i++) t->groups[of[i]].procs[t->groups[of[i]].nprocs++] = i;
  free(of);
  /* group lanes: one per thread id among the members, then HBM */
  double *tids = malloc((size_t)t->nlanes * sizeof *tids);
  t->glanes = calloc((size_t)t->nlanes + (size_t)t->ngroups, sizeof *t->glanes);
  if (!tids || !t->glanes) {
    free(tids);
    return -1;
  }
  for (int g = 0; g < t->ngroups; g++) {
    vgroup *gr = &t->groups[g];
    int nt = 0;
    bool mem = false;
    for (int m = 0; m < gr->nprocs; m++) {
      const vproc *p = &t->procs[gr->procs[m]];
      for (int i = p->lane0; i < p->lane0 + p->nlanes; i++) {
        if (t->lanes[i].mem) {
          mem = true;
          continue;
        }
        int k = 0;
        while (k < nt && tids[k] != t->lanes[i].tid) k++;
        if (k == nt) tids[nt++] = t->lanes[i].tid;
      }
    }
    qsort(tids, (size_t)nt, sizeof *tids, cmp_double);
    gr->glane0 = t->nglanes;
    for (int k = 0; k < nt + (mem ? 1 : 0); k++) {
      vglane *gl = &t->glanes[t->nglanes++];
      gl->group = g;
      gl->mem = k == nt;
      gl->tid = gl->mem ? 0 : tids[k];
      int rc = gl->mem ? build_mem_max(t, gl, gr) : build_busy(t, gl, gr);
      if (rc != 0) {
        free(tids);
        return -1;
      }
      /* the thread's name from the first member that has it */
      const char *tn = NULL;
      for (int m = 0; m < gr->nprocs && !tn && !gl->mem; m++)
        tn = view_find_name(names, nnames, t->procs[gr->procs[m]].pid, gl->tid);
      char tb[32];
      snprintf(tb, sizeof tb, "tid %g", gl->tid);
      snprintf(gl->label, sizeof gl->label, "%.40s / %.32s%s (%d)", gr->name,
               gl->mem ? "HBM" : tn ? tn : tb, gl->mem ? " max" : "", gl->members);
    }
    gr->nglanes = t->nglanes - gr->glane0;
  }
  free(tids);
  return 0;
}

/* ---- the public accessors ---- */

int view_groups(const view_trace *t) { return t->ngroups; }
const char *view_group_name(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups ? t->groups[g].name : NULL;
}
int view_group_members(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups ? t->groups[g].nprocs : 0;
}
bool view_group_expanded(const view_trace *t, int g) {
  return g >= 0 && g < t->ngroups && t->groups[g].expanded;
}
int view_group_expand(view_trace *t, int g, bool expanded) {
  if (g < 0 || g >= t->ngroups) return -1;
  bool was = t->groups[g].expanded;
  t->groups[g].expanded = expanded;
  if (view_build_rows(t) != 0) {
    t->groups[g].expanded = was;
    return -1;
  }
  return 0;
}
int view_rows(const view_trace *t) { return t->nrows; }
const char *view_row_label(const view_trace *t, int row) {
  if (row < 0 || row >= t->nrows) return NULL;
  const vrow *r = &t->rows[row];
  return r->kind == ROW_GLANE ? t->glanes[r->idx].label : t->lanes[r->idx].label;
}
int view_row_group(const view_trace *t, int row) {
  if (row < 0 || row >= t->nrows || t->rows[row].kind != ROW_GLANE) return -1;
  return t->glanes[t->rows[row].idx].group;
}
