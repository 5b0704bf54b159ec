/*
** view_int.h -- the viewer's model of a trace, private to viz/view*.c:
** the event categories and their colours, events, lanes, processes, lane
** groups and the rows shown now.
**
** view_trace.c loads a trace into it, view_group.c groups its processes
** and lists its rows, view_draw.c draws it, view.c shows it in a window or
** a picture. No SDL here: loading and grouping need none.
*/
#ifndef TPUSIM_VIEW_INT_H
#define TPUSIM_VIEW_INT_H

#include <stdbool.h>

#include "view.h"

/* ---- categories and colours (view_trace.c) ---- */

enum {
  CAT_FORWARD,
  CAT_BACKWARD,
  CAT_COLLECTIVE,
  CAT_MATMUL,
  CAT_ELEMENTWISE,
  CAT_INPUT,
  CAT_OPTIMIZER,
  CAT_OTHER,
  CAT_N
};

typedef struct {
  const char *name;
  unsigned char rgb[3];
} view_colour;

/* The categories in CAT_ order, then "memory", "capacity", "idle". */
enum { VIEW_N_COLORS = 11 };
extern const view_colour VIEW_COLORS[VIEW_N_COLORS];

/* ---- the trace ---- */

typedef struct {
  double ts, dur; /* microseconds */
  const char *name; /* in the arena */
  const char *info; /* the event's args as "key value" lines, or NULL */
  int lane, cat;
} vev;

typedef struct {
  double ts, bytes;
  int lane;
} vpt;

typedef struct {
  double pid, tid;
  bool mem;
  char label[96];
  int first, count; /* into ev or pt */
  double maxdur;
  int proc;
} vlane;

typedef struct {
  double pid, tid; /* tid -1e300: process_name, -2e300: process_labels */
  const char *name;
} vname;

typedef struct {
  double pid;
  char name[64]; /* "chip 17": the process name without its (detail) */
  char key[64];  /* its group, read off the name; "" when none */
  int lane0, nlanes; /* its lanes, contiguous */
} vproc;

/* A running integral of how many members are busy: between t and the next
** breakpoint, n members are busy and integ grows by n per microsecond. */
typedef struct {
  double t, integ;
  int n;
} vbp;

typedef struct {
  int group;
  double tid;
  bool mem;
  char label[96];
  int members; /* member lanes the fractions are of */
  vbp *bp[CAT_N];
  int nbp[CAT_N];
  vpt *pt; /* mem: the members' maximum, a step function */
  int npt;
  unsigned cats;
} vglane;

typedef struct {
  char name[64];
  int *procs, nprocs;
  int glane0, nglanes;
  bool expanded;
} vgroup;

enum { ROW_LANE, ROW_GLANE };

typedef struct {
  int kind, idx;
} vrow;

struct view_trace {
  vev *ev;
  int nev;
  vpt *pt;
  int npt;
  vlane *lanes;
  int nlanes;
  vproc *procs;
  int nprocs;
  vgroup *groups;
  int ngroups;
  vglane *glanes;
  int nglanes;
  vrow *rows;
  int nrows;
  double t0, t1; /* extent of everything, us */
  double capacity; /* bytes, from otherData; 0 when unknown */
  double mem_max;
  double step_s;
  const char *model, *hw;
  unsigned cats; /* bit per category present */
  struct ablock *arena; /* the strings (view_trace.c) */
};

/* names sorted by (pid, tid): the name of (pid, tid), or NULL (view_trace.c) */
const char *view_find_name(const vname *names, int n, double pid, double tid);

/* Lane groups of t's processes, named from names (view_group.c); 0, or -1
** when out of memory. */
int view_build_groups(view_trace *t, const vname *names, int nnames);
/* t->rows from the groups and which of them are expanded; 0 or -1. */
int view_build_rows(view_trace *t);

#endif
