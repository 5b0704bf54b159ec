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
void net_free(net *n);

int64_t net_chips(const net *n);
const hw_model *net_hw(const net *n);
bool net_is_torus(const net *n);
/* Slice shape and which axes wrap around (TPU); 1x1x1 otherwise. */
void net_shape(const net *n, int64_t shape[3], bool wrap[3]);
int64_t net_slices(const net *n);
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

/* "ICI torus 4x4x4 (wraparound x y z)", "8 nodes x 8 GPUs: NVSwitch + IB NDR" */
void net_describe(const net *n, char *buf, size_t len);

#endif
