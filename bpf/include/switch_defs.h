/* SPDX-License-Identifier: GPL-2.0 */
/* Switch port maps, keyed by the port's ifindex (unique across a testbed);
 * ctypes mirrors in dataplane/switch.py,
 * checked field by field by dataplane/layout.py. */
#ifndef PRC_SWITCH_DEFS_H
#define PRC_SWITCH_DEFS_H

#include <linux/types.h>

#define SWITCH_MAX_IFINDEX 8192

struct port_cfg {
	__u64 ps_per_byte;		/* the port's live rate, picoseconds per byte */
	__u64 kmin_bytes;		/* RED: no marks below */
	__u64 kmax_bytes;		/* RED: every ECT packet marked above */
	__u64 limit_bytes;		/* the model queue never exceeds the qdisc's limit */
	__u64 xoff_bytes;		/* lossless: pause senders when the queue reaches this */
	__u64 xon_bytes;		/* ... until it has drained to this */
	__u32 pmax;			/* marking probability at Kmax, fraction of 2^32 */
	__u32 flags;			/* PORT_F_* */
	__u32 vtime_shift;		/* wire-time unit: 2^shift us (vtime.h) */
	__u32 reserved;
};

#define PORT_F_ENABLED 1u
#define PORT_F_LOSSLESS 2u		/* PFC-like pause instead of tail drop */
#define PORT_F_FACES_HOST 4u		/* the last hop: clear the virtual wire time */

/* The queue model: bytes waiting, drained at the port rate since last_ns. */
struct port_queue {
	struct bpf_spin_lock lock;
	__u32 reserved;
	__u64 q_bytes;
	__u64 last_ns;
};

/* Telemetry, mmapped by user space. */
struct port_stats {
	__u64 packets;
	__u64 bytes;
	__u64 ect_packets;
	__u64 marked;			/* CE set by this port */
	__u64 q_bytes;			/* model queue at the last packet, before it */
	__u64 q_max;			/* highest model queue seen */
	__u64 last_ns;
	/* Lossless mode, like a PFC pause frame with its duration: senders
	 * whose traffic crosses this port hold it until this time (ns). */
	__u64 pause_until_ns;
	__u64 pause_events;
	__u64 drops;			/* tail drops: the model's buffer was full */
	__u64 paused_ns;		/* total time paused (overlapping pauses once) */
};

#endif /* PRC_SWITCH_DEFS_H */
