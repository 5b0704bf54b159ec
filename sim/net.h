/*
** net.h -- the network a group of chips sits on, built from a hardware
** model: a TPU slice's ICI torus (and DCN between slices), a GPU node's
** NVSwitch (and the NIC fabric between nodes), a CPU server's socket link.
**
** The topology is immutable once built, so simulations can share it; the
** time each link is busy lives in the simulation, indexed by link id.
** Every chip owns NET_SLOTS link ids: six torus links (dimension x
** direction), its up/down link to the scale-up switch, its NIC up/down.
** Bandwidths are one direction, as in the hardware files.
*/
#ifndef TPUSIM_NET_H
#define TPUSIM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../hw_models/hw.h"

enum {
  NET_SLOT_TORUS = 0, /* 0..5: dim * 2 + (direction > 0) */
  NET_SLOT_UP = 6,    /* chip -> NVSwitch / socket fabric */
  NET_SLOT_DOWN = 7,  /* NVSwitch -> chip */
  NET_SLOT_NIC_UP = 8,
  NET_SLOT_NIC_DOWN = 9,
  NET_SLOTS = 10
};

typedef enum { NET_ICI, NET_SWITCH, NET_NIC } net_fabric;

typedef struct net net;

/* chips in `slices` equal slices (TPU; DCN between them) or in nodes of the
** hardware's node size (GPU, CPU). On a TPU, slices = 1 with more chips
** than the largest slice takes the fewest equal slices of an allowed shape,
** each at least one whole wraparound unit (4x4x4 on v5p, 16x16 on v5e):
** 1,000,000 v5p chips are 3125 slices of 4x4x20 (net_slices says how many).
** Returns NULL with a message in err that names the nearest allowed
** counts. O(largest slice) whatever the chip count. */
net *net_build(const hw_model *hw, int64_t chips, int64_t slices, char *err, size_t errn);
/* A group of chips inside a larger machine (a tensor- or data-parallel
** group): any shape that fits in the pod, not only the platform's slice
** shapes. A group larger than the largest slice spans slices, as
** net_build does: the fewest equal parts, each at least one wraparound unit
** and each fitting in a slice, joined by DCN (net_slices says how many).
** Returns NULL with a message naming the nearest sizes that build. On GPUs
** and CPUs the same as net_build with one slice. */
net *net_build_group(const hw_model *hw, int64_t chips, char *err, size_t errn);
/* A group spread over `slices` slices of a larger TPU machine, chips /
** slices of it in each (a context- or data-parallel group whose members
** sit in several slices): each part any shape that fits in a slice, as
** net_build_group's, the parts joined by DCN. slices 1: net_build_group. */
net *net_build_spread(const hw_model *hw, int64_t chips, int64_t slices, char *err, size_t errn);
/* net_build with each slice of the given shape, in the axis order given (x
** varies fastest, as net_coord lays chips out): chips = slices x its chips.
** offered_only: the shape must be one Cloud TPU offers (net_shape_check);
** else any shape that fits in the pod, for comparing a hypothetical one. */
net *net_build_shaped(const hw_model *hw, int64_t chips, int64_t slices, const int64_t shape[3],
                      bool offered_only, char *err, size_t errn);
/* net_build_shaped, the slice's torus wired twisted when `twisted` (a shape
** the hardware file lists under slice_shapes.twisted: net_twist_check). */
net *net_build_shaped_tw(const hw_model *hw, int64_t chips, int64_t slices, const int64_t shape[3],
                         bool twisted, bool offered_only, char *err, size_t errn);
/* The slice shapes the platform offers for `chips` chips in one slice,
** sides ascending (4x4x8 stands for its turns 4x8x4 and 8x4x4, which route
** the same), the most cubic first; at most max into out. Returns how many
** (0 off a torus, above the largest slice, or for a count with none).
** Which shapes: the hardware file's system.scale_up.slice_shapes (v4/v5p:
** 2x2x1, 2x2x2, 2x2x4, 2x4x4 and whole 4x4x4 cubes; v5e/v6e: 1x1, 2x2, 2x4,
** ... 16x16, from Cloud TPU's topology tables; docs/network.md). */
int net_offered_shapes(const hw_model *hw, int64_t chips, int64_t (*out)[3], int max);
/* 0 when Cloud TPU offers a slice of this shape on hw (sides in any
** order); else -1 with err naming the rule and the nearest offered shape. */
int net_shape_check(const hw_model *hw, const int64_t shape[3], char *err, size_t errn);
/* 0 when hw offers this shape wired as a twisted torus (sides in any
** order); else -1 with err naming the nearest twisted shape. */
int net_twist_check(const hw_model *hw, const int64_t shape[3], char *err, size_t errn);
bool net_twist_offered(const hw_model *hw, const int64_t shape[3]);
/* "4x4x8", "4x4x8t" (twisted) or "16x16" (third side 1) into shape and
** *twisted; -1 with err otherwise. */
int net_shape_parse(const char *s, int64_t shape[3], bool *twisted, char *err, size_t errn);
void net_free(net *n);

int64_t net_chips(const net *n);
const hw_model *net_hw(const net *n);
bool net_is_torus(const net *n);
/* Slice shape and which axes wrap around (TPU); 1x1x1 otherwise. */
void net_shape(const net *n, int64_t shape[3], bool wrap[3]);
int64_t net_slices(const net *n);
/* The slices net_build makes of `chips` given --slices `slices` (1 or 0
** for none given): the fewest equal ones past the largest slice; 1 on GPUs
** and CPUs, and on a TPU machine that fits one slice; 0 when no split
** exists (net_build then refuses, naming the nearest counts). */
int64_t net_machine_slices(const hw_model *hw, int64_t chips, int64_t slices);
int64_t net_chips_per_node(const net *n); /* GPU node or TPU slice */
int64_t net_node_of(const net *n, int64_t chip);
/* Coordinates of a chip within its slice, and back. */
void net_coord(const net *n, int64_t chip, int64_t c[3]);
int64_t net_chip_at(const net *n, int64_t slice, const int64_t c[3]);

/* Total link ids: chips x NET_SLOTS. */
int64_t net_links(const net *n);
double net_link_bw(const net *n, int64_t link);
double net_link_latency(const net *n, int64_t link);
net_fabric net_link_fabric(const net *n, int64_t link);

/* Links from chip a to chip b in order (dimension-order routing on the
** torus; via the switch inside a node; via the NICs between nodes or
** slices). Returns the hop count (0 when a == b), or -1 if max is too small. */
int net_path(const net *n, int64_t a, int64_t b, int64_t *links, int max);

/* A torus's link graph, regular or twisted (see net.c): undirected links,
** links crossing the half-split of each axis (its bisection across that
** axis), mean hops between distinct chips, and an all-to-all's load: flows
** on the busiest directed link per unit sent to every other chip, the
** larger of the cut bound and the hop-spread bound. */
typedef struct {
  int64_t links, cut_links[3];
  double mean_hops, a2a_flows_per_link;
} net_torus_stats;
void net_torus_graph_stats(const int64_t shape[3], const bool wrap[3], bool twisted,
                           net_torus_stats *st);
bool net_is_twisted(const net *n);
/* An all-to-all on this net's slice runs this many times faster twisted
** than on the regular torus of the same shape (1 when not twisted):
** net_torus_graph_stats's regular over twisted load. */
double net_a2a_twist_gain(const net *n);
/* The same for a slice of this shape on hw wired twisted (1 when hw offers
** no twisted slice of this shape). */
double net_a2a_twist_gain_shape(const hw_model *hw, const int64_t shape[3]);

/* "ICI torus 4x4x4 (wraparound x y z)", "8 nodes x 8 GPUs: NVSwitch + IB NDR" */
void net_describe(const net *n, char *buf, size_t len);

#endif
