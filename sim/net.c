/*
** net.c -- see net.h.
*/
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct net {
  const hw_model *hw;
  int64_t chips, slices;
  int64_t per_node; /* chips per slice (TPU) or per node (GPU, CPU) */
  bool torus;
  int64_t shape[3];
  bool wrap[3];
  bool twisted; /* the slice's torus is wired twisted (net_build_shaped_tw) */
};

/* Within the largest slice, whatever the platform allows as a slice. */
static bool fits_pod(const hw_model *hw, const int64_t s[3]) {
  const int64_t *m = hw->scale_up.max_slice_shape;
  int64_t a[3] = {s[0], s[1], s[2]}, b[3] = {m[0], m[1], m[2]};
  hw_sort_sides(a, 3), hw_sort_sides(b, 3);
  return a[0] <= b[0] && a[1] <= b[1] && a[2] <= b[2] && (hw->scale_up.torus_dims == 3 || s[2] == 1);
}

/* Sides ascending on a 3-D torus; the first two on a 2-D one (AxBx1), as
** the hardware file stores its offered shapes. */
static void canon_shape(const hw_model *hw, const int64_t s[3], int64_t a[3]) {
  memcpy(a, s, 3 * sizeof *a);
  hw_sort_sides(a, (int)hw->scale_up.torus_dims);
}

static bool in_list(const int64_t (*list)[3], int n, const int64_t a[3]) {
  for (int i = 0; i < n; i++)
    if (list[i][0] == a[0] && list[i][1] == a[1] && list[i][2] == a[2]) return true;
  return false;
}

/* Slice shapes the platform offers: the hardware file's
** system.scale_up.slice_shapes (Cloud TPU's topology tables, cited there):
** a listed shape, or whole cubes of cube_side within the largest slice. */
static bool shape_ok(const hw_model *hw, const int64_t s[3]) {
  const hw_slice_shapes *sh = &hw->scale_up.slice_shapes;
  if (!fits_pod(hw, s)) return false;
  int64_t a[3];
  canon_shape(hw, s, a);
  if (in_list(sh->listed, sh->n_listed, a)) return true;
  int64_t c = sh->cube_side;
  return c > 0 && s[0] % c == 0 && s[1] % c == 0 && (hw->scale_up.torus_dims == 2 || s[2] % c == 0);
}

bool net_twist_offered(const hw_model *hw, const int64_t s[3]) {
  const hw_slice_shapes *sh = &hw->scale_up.slice_shapes;
  int64_t a[3];
  canon_shape(hw, s, a);
  return hw->scale_up.kind == HW_UP_ICI_TORUS && in_list(sh->twisted, sh->n_twisted, a);
}

/* The allowed shape for n chips, sides ascending, the most cubic one; a
** group inside a slice (any_shape) takes any factorization that fits. */
static bool choose_shape_opt(const hw_model *hw, int64_t n, int64_t out[3], bool any_shape) {
  bool found = false;
  int64_t best = 0;
  for (int64_t x = 1; x * x * x <= n; x++) {
    if (n % x) continue;
    for (int64_t y = x; x * y * y <= n; y++) {
      if ((n / x) % y) continue;
      int64_t z = n / x / y;
      int64_t s[3] = {x, y, z};
      if (hw->scale_up.torus_dims == 2) { /* 2-D: x <= y, z = 1 */
        if (x != 1) continue;
        s[0] = y;
        s[1] = z;
        s[2] = 1;
      }
      if (any_shape ? !fits_pod(hw, s) : !shape_ok(hw, s)) continue;
      int64_t spread = (s[2] > s[1] ? s[2] : s[1]) - s[0];
      if (!found || spread < best) {
        memcpy(out, s, sizeof s);
        best = spread;
        found = true;
      }
    }
  }
  return found;
}

/* Every offered shape of n chips, sides ascending, the most cubic first
** (choose_shape_opt's order: least spread, then the smaller first side);
** at most max into out. O(n^(2/3)) candidates. */
int net_offered_shapes(const hw_model *hw, int64_t n, int64_t (*out)[3], int max) {
  if (hw->scale_up.kind != HW_UP_ICI_TORUS || n < 1 || n > hw->scale_up.max_slice_chips) return 0;
  int k = 0;
  for (int64_t x = 1; x * x * x <= n; x++) {
    if (n % x) continue;
    for (int64_t y = x; x * y * y <= n; y++) {
      if ((n / x) % y) continue;
      int64_t s[3] = {x, y, n / x / y};
      if (hw->scale_up.torus_dims == 2) { /* 2-D: x <= y, z = 1 */
        if (x != 1) continue;
        s[0] = y, s[1] = n / x / y, s[2] = 1;
      }
      if (!shape_ok(hw, s) || k >= max) continue;
      /* insertion by spread: out stays most cubic first */
      int64_t spread = (s[2] > s[1] ? s[2] : s[1]) - s[0];
      int at = k;
      while (at > 0 && ((out[at - 1][2] > out[at - 1][1] ? out[at - 1][2] : out[at - 1][1]) -
                        out[at - 1][0]) > spread) {
        memcpy(out[at], out[at - 1], sizeof out[at]);
        at--;
      }
      memcpy(out[at], s, sizeof s);
      k++;
    }
  }
  return k;
}

static void nearby_counts(const hw_model *hw, int64_t n, bool any_shape, int64_t *lo, int64_t *hi);

static int64_t shape_chips(const int64_t s[3]) { return s[0] * s[1] * s[2]; }

/* Whether a slice axis of this side has a wraparound link: longer than 2
** and a whole number of wrap_axis_multiple (the OCS closes whole cubes on
** v4/v5p; only full pod axes on v5e/v6e). */
static bool axis_wraps(const hw_model *hw, int64_t side) {
  return side > 2 && side % hw->scale_up.wrap_axis_multiple == 0;
}

static void shape_str(const hw_model *hw, const int64_t s[3], char *buf, size_t n) {
  hw_shape_text(s, (int)hw->scale_up.torus_dims, false, buf, n);
}

int net_shape_check(const hw_model *hw, const int64_t shape[3], char *err, size_t errn) {
  int64_t s[3] = {shape[0], shape[1], shape[2]};
  if (hw->scale_up.kind != HW_UP_ICI_TORUS) {
    snprintf(err, errn, "--topology names a TPU slice's ICI torus; %s has none (its nodes "
             "join over %s): leave --topology out", hw->name, hw_scale_out_label(hw->scale_out.kind));
    return -1;
  }
  for (int d = 0; d < 3; d++)
    if (s[d] < 1 || s[d] > 1000000) {
      snprintf(err, errn, "--topology %lldx%lldx%lld: each side must be 1 to 1000000",
               (long long)s[0], (long long)s[1], (long long)s[2]);
      return -1;
    }
  int64_t n = shape_chips(s);
  if (hw->scale_up.torus_dims == 2 && s[2] != 1) {
    snprintf(err, errn, "%s slices are 2-D (AxB): %lldx%lldx%lld has a third side", hw->name,
             (long long)s[0], (long long)s[1], (long long)s[2]);
    return -1;
  }
  if (n <= hw->scale_up.max_slice_chips && shape_ok(hw, s)) return 0;
  /* the nearest offered: the most cubic of the same chips, else of the
  ** nearest count that has one */
  int64_t lo, hi, best[3];
  char near[64] = "";
  if (n <= hw->scale_up.max_slice_chips && choose_shape_opt(hw, n, best, false))
    lo = n, hi = 0;
  else
    nearby_counts(hw, n, false, &lo, &hi);
  int64_t pick = lo && hi ? (n - lo <= hi - n ? lo : hi) : lo ? lo : hi;
  if (pick && choose_shape_opt(hw, pick, best, false)) shape_str(hw, best, near, sizeof near);
  char offered[512];
  hw_slice_shapes_text(&hw->scale_up.slice_shapes, offered, sizeof offered);
  char *tw = strstr(offered, "; twisted:"); /* the twisted ones are for twisted_check */
  if (tw) *tw = 0;
  char given[64], max[64]; /* a 2-D slice as AxB, as --topology takes it */
  shape_str(hw, s, given, sizeof given);
  shape_str(hw, hw->scale_up.max_slice_shape, max, sizeof max);
  snprintf(err, errn, "%s offers no %s slice (offered: %s, within %s; nearest offered: %s)",
           hw->name, given, offered, max, near[0] ? near : "none");
  return -1;
}

int net_twist_check(const hw_model *hw, const int64_t shape[3], char *err, size_t errn) {
  if (net_twist_offered(hw, shape)) return 0;
  const hw_slice_shapes *sh = &hw->scale_up.slice_shapes;
  int64_t n = shape_chips(shape), best = -1;
  for (int i = 0; i < sh->n_twisted; i++) { /* the nearest chip count */
    int64_t d = llabs(shape_chips(sh->twisted[i]) - n);
    if (best < 0 || d < llabs(shape_chips(sh->twisted[best]) - n)) best = i;
  }
  char near[64] = "none: leave the 't' out";
  if (best >= 0) hw_shape_text(sh->twisted[best], 3, true, near, sizeof near);
  snprintf(err, errn, "%s offers no twisted %lldx%lldx%lld slice (a twisted torus is k x k x 2k "
           "or k x 2k x 2k, among the offered: %d shape%s in system.scale_up.slice_shapes; "
           "nearest twisted: %s)", hw->name, (long long)shape[0], (long long)shape[1],
           (long long)shape[2], sh->n_twisted, sh->n_twisted == 1 ? "" : "s", near);
  return -1;
}

int net_shape_parse(const char *str, int64_t shape[3], bool *twisted, char *err, size_t errn) {
  int64_t v[3] = {1, 1, 1};
  int k = 0;
  const char *c = str;
  while (k < 3) {
    char *end;
    if (*c < '0' || *c > '9') break;
    long long x = strtoll(c, &end, 10);
    if (x < 1 || x > 1000000) break;
    v[k++] = x;
    c = end;
    if (*c != 'x' || k == 3) break; /* a third 'x' is left for the check below */
    c++;
  }
  bool t = k == 3 && c[0] == 't' && c[1] == '\0'; /* 4x4x8t: twisted */
  if (k < 2 || (*c != '\0' && !t)) {
    snprintf(err, errn, "--topology: expected AxB or AxBxC, AxBxCt for a twisted torus (sides 1 "
             "to 1000000, e.g. 4x4x8 or 4x4x8t), found '%s'", str);
    return -1;
  }
  memcpy(shape, v, sizeof v);
  *twisted = t;
  return 0;
}

/* The nearest single-slice counts below and above n (0: none): slice
** shapes, or for a group (any_shape) any shape that fits in the pod. Scans
** at most the largest slice's count of candidates, whatever n is. */
static void nearby_counts(const hw_model *hw, int64_t n, bool any_shape, int64_t *lo, int64_t *hi) {
  int64_t s[3], max = hw->scale_up.max_slice_chips;
  *lo = *hi = 0;
  for (int64_t k = (n - 1 < max ? n - 1 : max); k >= 1 && !*lo; k--)
    if (choose_shape_opt(hw, k, s, any_shape)) *lo = k;
  for (int64_t k = n + 1; k <= max && !*hi; k++)
    if (choose_shape_opt(hw, k, s, any_shape)) *hi = k;
}

/* The smallest slice joined over DCN: one whole wraparound unit, a 4x4x4
** cube on OCS machines (v4, v5p) and a full 16x16 pod on v5e and v6e
** (wrap_axis_multiple ^ torus_dims, at most the largest slice). Multislice
** joins such slices; below it tpusim would split a prime chip count into
** single-chip "slices" (a choice of tpusim, not a platform rule). */
static int64_t min_dcn_slice(const hw_model *hw) {
  int64_t m = 1;
  for (int d = 0; d < hw->scale_up.torus_dims; d++) m *= hw->scale_up.wrap_axis_multiple;
  return m < hw->scale_up.max_slice_chips ? m : hw->scale_up.max_slice_chips;
}

/* The fewest equal slices of an allowed shape (for a group, any_shape:
** equal parts that each fit in a slice), each at least min_dcn_slice, that
** hold exactly `chips`; 0 if none. At most max_slice_chips candidates:
** O(1) in chips. */
static int64_t fewest_slices(const hw_model *hw, int64_t chips, bool any_shape) {
  int64_t s[3], max = hw->scale_up.max_slice_chips;
  for (int64_t per = chips < max ? chips : max; per >= min_dcn_slice(hw); per--)
    if (chips % per == 0 && choose_shape_opt(hw, per, s, any_shape)) return chips / per;
  return 0;
}

/* The nearest chip counts below and above n that fewest_slices splits
** (0: none below). Multiples of min_dcn_slice always split (a whole
** wraparound unit is a slice shape), so each scan stops within that many
** steps. */
static void nearby_split_counts(const hw_model *hw, int64_t n, bool any_shape, int64_t *lo,
                                int64_t *hi) {
  *lo = *hi = 0;
  for (int64_t k = n - 1; k >= 1 && !*lo; k--)
    if (fewest_slices(hw, k, any_shape)) *lo = k;
  for (int64_t k = n + 1; !*hi; k++)
    if (fewest_slices(hw, k, any_shape)) *hi = k;
}

/* "nearest allowed: 64 or 128", "nearest allowed: 6144" */
static void name_nearest(char *buf, size_t len, int64_t lo, int64_t hi) {
  if (lo && hi)
    snprintf(buf, len, "nearest allowed: %lld or %lld", (long long)lo, (long long)hi);
  else
    snprintf(buf, len, "nearest allowed: %lld", (long long)(lo ? lo : hi));
}

/* The error for a slice of `per` chips the platform does not have (for a
** group, any_shape: no shape of `per` chips fits in the pod): the nearest
** sizes, and what --slices would make of all the chips. */
static void no_slice_error(const hw_model *hw, int64_t chips, int64_t per, bool any_shape,
                           char *err, size_t errn) {
  int64_t lo, hi;
  char near[96], split[160] = "use --slices to join slices over DCN";
  nearby_counts(hw, per, any_shape, &lo, &hi);
  name_nearest(near, sizeof near, lo, hi);
  int64_t k = chips > hw->scale_up.max_slice_chips ? fewest_slices(hw, chips, false) : 0;
  if (k)
    snprintf(split, sizeof split, "%lld chips make %lld slices of %lld over DCN (--slices %lld)",
             (long long)chips, (long long)k, (long long)(chips / k), (long long)k);
  if (any_shape)
    snprintf(err, errn, "%s: no group of %lld chips fits in a slice (largest %lld, %lldx%lldx%lld; "
             "%s)", hw->name, (long long)per, (long long)hw->scale_up.max_slice_chips,
             (long long)hw->scale_up.max_slice_shape[0], (long long)hw->scale_up.max_slice_shape[1],
             (long long)hw->scale_up.max_slice_shape[2], near);
  else
    snprintf(err, errn, "%s has no slice of %lld chips (largest %lld; %s); %s", hw->name,
             (long long)per, (long long)hw->scale_up.max_slice_chips, near, split);
}

/* More chips than the largest slice and no split into slices: the nearest
** counts that split. */
static void no_split_error(const hw_model *hw, int64_t chips, bool any_shape, char *err,
                           size_t errn) {
  int64_t lo, hi;
  char near[96];
  nearby_split_counts(hw, chips, any_shape, &lo, &hi);
  name_nearest(near, sizeof near, lo, hi);
  snprintf(err, errn,
           "%s: %lld chips do not split into equal %s of at least %lld chips (largest slice %lld; "
           "%s)",
           hw->name, (long long)chips, any_shape ? "parts that each fit in a slice"
                                                  : "slices of an allowed shape",
           (long long)min_dcn_slice(hw), (long long)hw->scale_up.max_slice_chips, near);
}

static net *build(const hw_model *hw, int64_t chips, int64_t slices, bool group,
                  const int64_t *shape, char *err, size_t errn);

net *net_build(const hw_model *hw, int64_t chips, int64_t slices, char *err, size_t errn) {
  return build(hw, chips, slices, false, NULL, err, errn);
}

net *net_build_group(const hw_model *hw, int64_t chips, char *err, size_t errn) {
  return build(hw, chips, 1, true, NULL, err, errn);
}

net *net_build_spread(const hw_model *hw, int64_t chips, int64_t slices, char *err, size_t errn) {
  return build(hw, chips, slices, true, NULL, err, errn);
}

net *net_build_shaped(const hw_model *hw, int64_t chips, int64_t slices, const int64_t shape[3],
                      bool offered_only, char *err, size_t errn) {
  return net_build_shaped_tw(hw, chips, slices, shape, false, offered_only, err, errn);
}

net *net_build_shaped_tw(const hw_model *hw, int64_t chips, int64_t slices, const int64_t shape[3],
                         bool twisted, bool offered_only, char *err, size_t errn) {
  if (offered_only && net_shape_check(hw, shape, err, errn) != 0) return NULL;
  if (twisted && net_twist_check(hw, shape, err, errn) != 0) return NULL;
  if (hw->scale_up.kind != HW_UP_ICI_TORUS || !fits_pod(hw, shape)) {
    snprintf(err, errn, "%s: a %lldx%lldx%lld slice does not fit in the pod (%lldx%lldx%lld)",
             hw->name, (long long)shape[0], (long long)shape[1], (long long)shape[2],
             (long long)hw->scale_up.max_slice_shape[0], (long long)hw->scale_up.max_slice_shape[1],
             (long long)hw->scale_up.max_slice_shape[2]);
    return NULL;
  }
  if (slices < 1 || chips != slices * shape_chips(shape)) {
    snprintf(err, errn, "--topology %lldx%lldx%lld holds %lld chips a slice; %lld chips in %lld "
             "slice%s need %lld",
             (long long)shape[0], (long long)shape[1], (long long)shape[2],
             (long long)shape_chips(shape), (long long)chips, (long long)slices,
             slices == 1 ? "" : "s", (long long)(slices > 0 ? chips / slices : chips));
    return NULL;
  }
  net *n = build(hw, chips, slices, false, shape, err, errn);
  if (n) n->twisted = twisted;
  return n;
}

static net *build(const hw_model *hw, int64_t chips, int64_t slices, bool group,
                  const int64_t *shape, char *err, size_t errn) {
  if (chips < 1 || slices < 1 || chips % slices != 0) {
    snprintf(err, errn, "%lld chips do not split into %lld equal slices", (long long)chips,
             (long long)slices);
    return NULL;
  }
  net *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errn, "out of memory");
    return NULL;
  }
  n->hw = hw;
  n->chips = chips;
  n->slices = slices;
  n->torus = hw->scale_up.kind == HW_UP_ICI_TORUS;
  n->shape[0] = n->shape[1] = n->shape[2] = 1;
  if (n->torus) {
    /* more chips than a slice holds and no --slices: as many slices as it
    ** takes (the fewest equal ones), so a pod-scale count answers; a group
    ** that large spans slices the same way, its collectives over DCN */
    if (slices == 1 && chips > hw->scale_up.max_slice_chips) {
      int64_t k = fewest_slices(hw, chips, group);
      if (!k) {
        no_split_error(hw, chips, group, err, errn);
        free(n);
        return NULL;
      }
      n->slices = slices = k;
    }
    int64_t per = chips / slices;
    if (shape) /* net_build_shaped checked it */
      memcpy(n->shape, shape, sizeof n->shape);
    else if (per > hw->scale_up.max_slice_chips || !choose_shape_opt(hw, per, n->shape, group)) {
      no_slice_error(hw, chips, per, group, err, errn);
      free(n);
      return NULL;
    }
    for (int d = 0; d < 3; d++) n->wrap[d] = axis_wraps(hw, n->shape[d]);
    n->per_node = per;
  } else {
    if (slices != 1) {
      snprintf(err, errn, "--slices applies to TPU pods; %s joins nodes over %s", hw->name,
               hw_scale_out_label(hw->scale_out.kind));
      free(n);
      return NULL;
    }
    n->per_node = hw->chips_per_node;
  }
  return n;
}

void net_free(net *n) { free(n); }

int64_t net_chips(const net *n) { return n->chips; }
const hw_model *net_hw(const net *n) { return n->hw; }
bool net_is_torus(const net *n) { return n->torus; }
int64_t net_slices(const net *n) { return n->slices; }

int64_t net_machine_slices(const hw_model *hw, int64_t chips, int64_t slices) {
  if (hw->scale_up.kind != HW_UP_ICI_TORUS) return 1;
  if (slices > 1) return slices;
  return chips > hw->scale_up.max_slice_chips ? fewest_slices(hw, chips, false) : 1;
}
int64_t net_chips_per_node(const net *n) { return n->per_node; }
int64_t net_node_of(const net *n, int64_t chip) { return chip / n->per_node; }

void net_shape(const net *n, int64_t shape[3], bool wrap[3]) {
  for (int d = 0; d < 3; d++) {
    shape[d] = n->shape[d];
    wrap[d] = n->wrap[d];
  }
}

void net_coord(const net *n, int64_t chip, int64_t c[3]) {
  int64_t i = chip % n->per_node;
  c[0] = i % n->shape[0];
  c[1] = (i / n->shape[0]) % n->shape[1];
  c[2] = i / (n->shape[0] * n->shape[1]);
}

int64_t net_chip_at(const net *n, int64_t slice, const int64_t c[3]) {
  return slice * n->per_node + c[0] + n->shape[0] * (c[1] + n->shape[1] * c[2]);
}

int64_t net_links(const net *n) { return n->chips * NET_SLOTS; }

static int slot_of(const net *n, int64_t link) {
  (void)n;
  return (int)(link % NET_SLOTS);
}

net_fabric net_link_fabric(const net *n, int64_t link) {
  int s = slot_of(n, link);
  if (s >= NET_SLOT_NIC_UP) return NET_NIC;
  return s < NET_SLOT_UP ? NET_ICI : NET_SWITCH;
}

double net_link_bw(const net *n, int64_t link) {
  const hw_model *hw = n->hw;
  int s = slot_of(n, link);
  /* links sustain a measured fraction of their signalling rate */
  if (s < NET_SLOT_UP) return hw->scale_up.link_bw_bytes_per_s * hw->scale_up.efficiency;
  if (s < NET_SLOT_NIC_UP) return hw->scale_up.bw_per_chip_bytes_per_s * hw->scale_up.efficiency;
  return hw->scale_out.bw_per_chip_bytes_per_s;
}

/* A hop's latency sits on the link that leaves the sender, so a path
** through a switch pays it once. */
double net_link_latency(const net *n, int64_t link) {
  const hw_model *hw = n->hw;
  int s = slot_of(n, link);
  if (s <= NET_SLOT_UP) return hw->scale_up.latency_s;
  if (s == NET_SLOT_NIC_UP) return hw->scale_out.latency_s;
  return 0;
}

int net_path(const net *n, int64_t a, int64_t b, int64_t *links, int max) {
  if (a == b) return 0;
  int k = 0;
  bool same_node = net_node_of(n, a) == net_node_of(n, b);
  if (!same_node || !n->torus) {
    if (max < 2) return -1;
    int up = same_node ? NET_SLOT_UP : NET_SLOT_NIC_UP;
    links[k++] = a * NET_SLOTS + up;
    links[k++] = b * NET_SLOTS + up + 1;
    return k;
  }
  /* dimension-order routing, the shorter way round where the axis wraps */
  int64_t c[3], t[3];
  net_coord(n, a, c);
  net_coord(n, b, t);
  int64_t slice = net_node_of(n, a);
  for (int d = 0; d < 3; d++) {
    int64_t L = n->shape[d];
    while (c[d] != t[d]) {
      int dir;
      if (n->wrap[d]) {
        int64_t fwd = ((t[d] - c[d]) % L + L) % L;
        /* halfway round either way: alternate by position, so the two
        ** directions share the load */
        dir = fwd < L - fwd ? 1 : fwd > L - fwd ? -1 : (c[d] % 2 == 0 ? 1 : -1);
      } else {
        dir = t[d] > c[d] ? 1 : -1;
      }
      if (k == max) return -1;
      links[k++] = net_chip_at(n, slice, c) * NET_SLOTS + NET_SLOT_TORUS + d * 2 + (dir > 0);
      c[d] = ((c[d] + dir) % L + L) % L;
    }
  }
  return k;
}

void net_describe(const net *n, char *buf, size_t len) {
  const hw_model *hw = n->hw;
  if (n->torus) {
    int w = snprintf(buf, len, "ICI %storus %lldx%lldx%lld (wraparound:%s%s%s%s)",
                     n->twisted ? "twisted " : "",
                     (long long)n->shape[0], (long long)n->shape[1], (long long)n->shape[2],
                     n->wrap[0] ? " x" : "", n->wrap[1] ? " y" : "", n->wrap[2] ? " z" : "",
                     n->wrap[0] || n->wrap[1] || n->wrap[2] ? "" : " none");
    if (n->slices > 1 && w > 0 && (size_t)w < len)
      snprintf(buf + w, len - (size_t)w, " x %lld slices over DCN", (long long)n->slices);
  } else {
    int64_t nodes = (n->chips + n->per_node - 1) / n->per_node;
    snprintf(buf, len, "%lld node%s x %lld %s: %s%s%s", (long long)nodes, nodes > 1 ? "s" : "",
             (long long)(n->chips < n->per_node ? n->chips : n->per_node),
             hw->kind == HW_CPU ? "sockets" : "GPUs",
             hw->scale_up.kind == HW_UP_NVSWITCH ? "NVSwitch"
             : hw->scale_up.kind == HW_UP_NVLINK_MESH ? "NVLink mesh"
             : hw->scale_up.kind == HW_UP_PCIE        ? "PCIe"
             : hw->scale_up.kind == HW_UP_HOST        ? "host link"
                                                      : "socket link",
             nodes > 1 ? " + " : "", nodes > 1 ? hw_scale_out_label(hw->scale_out.kind) : "");
  }
}

/* ---- twisted tori: the link graph, its cuts and its all-to-all load ---- */

/* The neighbour of chip c one step up axis d, or false where a mesh axis
** ends. A twisted torus (Camara, Moreto, Vallejo, Beivide et al., "Twisted
** Torus Topologies for Enhanced Interconnection Networks", IEEE TPDS 21(12),
** 2010; the TPU v4 OCS wires it, Jouppi et al. ISCA 2023) is the torus with
** one change: the wraparound links of a short axis (side k) land shifted by
** k along each long axis (side 2k) -- the +k seam. k x k x 2k shifts along
** its one long axis, k x 2k x 2k along both. Every other link is the
** regular torus's, so each chip keeps its six links. */
static bool torus_step(const int64_t shape[3], const bool wrap[3], bool twisted, const int64_t c[3],
                       int d, int64_t out[3]) {
  memcpy(out, c, 3 * sizeof *out);
  if (++out[d] < shape[d]) return true;
  if (!wrap[d]) return false;
  out[d] = 0;
  int64_t k = shape[0];
  for (int i = 1; i < 3; i++) k = shape[i] < k ? shape[i] : k;
  int shortest = shape[0] == k ? 0 : shape[1] == k ? 1 : 2;
  if (twisted && d == shortest)
    for (int i = 0; i < 3; i++)
      if (shape[i] == 2 * k) out[i] = (out[i] + k) % shape[i];
  return true;
}

static int64_t flat(const int64_t shape[3], const int64_t c[3]) {
  return c[0] + shape[0] * (c[1] + shape[1] * c[2]);
}

void net_torus_graph_stats(const int64_t shape[3], const bool wrap[3], bool twisted,
                           net_torus_stats *st) {
  memset(st, 0, sizeof *st);
  int64_t n = shape[0] * shape[1] * shape[2], c[3], nb[3];
  int64_t *adj = malloc((size_t)n * 6 * sizeof *adj), *queue = malloc((size_t)n * sizeof *queue);
  int32_t *deg = calloc((size_t)n, sizeof *deg), *dist = malloc((size_t)n * sizeof *dist);
  if (!adj || !queue || !deg || !dist) goto done;
  /* the links, each once from its lower end, and the half-split cut of each
  ** axis: a link crosses the cut of axis a when its ends lie on opposite
  ** sides of position side/2 */
  for (int64_t i = 0; i < n; i++) {
    c[0] = i % shape[0], c[1] = i / shape[0] % shape[1], c[2] = i / shape[0] / shape[1];
    for (int d = 0; d < 3; d++) {
      if (shape[d] < 2 || !torus_step(shape, wrap, twisted, c, d, nb)) continue;
      if (shape[d] == 2 && c[d] == 1) continue; /* a side of 2: the wrap is the same link */
      int64_t j = flat(shape, nb);
      adj[i * 6 + deg[i]++] = j, adj[j * 6 + deg[j]++] = i;
      st->links++;
      for (int a = 0; a < 3; a++)
        if (shape[a] > 1 && (c[a] < shape[a] / 2) != (nb[a] < shape[a] / 2)) st->cut_links[a]++;
    }
  }
  /* hop distances from chip 0 by breadth-first search; tori and twisted
  ** tori are vertex-transitive (Cayley graphs: Camara et al. 2010), so
  ** every chip sees the same distances */
  for (int64_t i = 0; i < n; i++) dist[i] = -1;
  int64_t head = 0, tail = 0, sum = 0;
  dist[0] = 0, queue[tail++] = 0;
  while (head < tail) {
    int64_t u = queue[head++];
    sum += dist[u];
    for (int e = 0; e < deg[u]; e++) {
      int64_t v = adj[u * 6 + e];
      if (dist[v] < 0) dist[v] = dist[u] + 1, queue[tail++] = v;
    }
  }
  st->mean_hops = n > 1 ? (double)sum / (double)(n - 1) : 0;
  /* all-to-all of one unit per ordered pair: the busiest link carries at
  ** least (a) the flows that must cross an axis's cut, over its links one
  ** direction each, and (b) every flow's shortest-path hops spread evenly
  ** on all 2 x links directed links; the larger bound is the load */
  double bound = 0;
  for (int a = 0; a < 3; a++) {
    if (!st->cut_links[a]) continue;
    double lo = (double)(shape[a] / 2) * (double)(n / shape[a]), hi = (double)n - lo;
    double b = lo * hi / (double)st->cut_links[a];
    if (b > bound) bound = b;
  }
  double spread = st->links ? (double)n * (double)sum / (2.0 * (double)st->links) : 0;
  st->a2a_flows_per_link = bound > spread ? bound : spread;
done:
  free(adj), free(queue), free(deg), free(dist);
}

bool net_is_twisted(const net *n) { return n->twisted; }

double net_a2a_twist_gain_shape(const hw_model *hw, const int64_t shape[3]) {
  if (!net_twist_offered(hw, shape)) return 1.0;
  /* a plan search asks for the same few shapes thousands of times: the
  ** last answer per thread */
  static _Thread_local int64_t last[3];
  static _Thread_local int64_t last_cube;
  static _Thread_local double last_gain;
  if (memcmp(last, shape, sizeof last) == 0 && last_cube == hw->scale_up.wrap_axis_multiple)
    return last_gain;
  bool wrap[3];
  for (int d = 0; d < 3; d++) wrap[d] = axis_wraps(hw, shape[d]);
  net_torus_stats reg, tw;
  net_torus_graph_stats(shape, wrap, false, &reg);
  net_torus_graph_stats(shape, wrap, true, &tw);
  double g = tw.a2a_flows_per_link > 0 ? reg.a2a_flows_per_link / tw.a2a_flows_per_link : 1.0;
  memcpy(last, shape, sizeof last), last_cube = hw->scale_up.wrap_axis_multiple, last_gain = g;
  return g;
}

double net_a2a_twist_gain(const net *n) {
  return n->twisted ? net_a2a_twist_gain_shape(n->hw, n->shape) : 1.0;
}
