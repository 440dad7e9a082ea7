/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Virtual wire time. The emulator's CPUs delay and bunch packets between
 * nodes (softirq batches, a busy core), so a switch port that timed its
 * queue model by processing time would see bursts the emulated network
 * never sends. Each RoCEv2 packet instead carries the emulated time it left
 * the previous node: nic_tx writes its departure time, each switch port
 * the time its last byte leaves the port's model queue; the next port times
 * the packet's arrival by it. The carrier is the UDP checksum, which
 * RoCEv2 leaves zero and the ICRC masks out: the time in units of 2^shift
 * microseconds modulo 2^16 (0: none), rebuilt as the time nearest to now.
 * The unit is chosen per testbed so that no packet is half the range
 * (2^15 units) away from its stamp: the longest queueing delay and link
 * delay with room for the CPU's jitter. Ports facing hosts clear it, so
 * hosts receive frames as sent.
 */
#ifndef PRC_VTIME_H
#define PRC_VTIME_H

#include <linux/types.h>

#define VTIME_NONE 0
#define VTIME_HALF_RANGE 0x8000u

static __always_inline __u16 vtime_stamp(__u64 t_ns, __u32 shift)
{
	__u16 units = (__u16)((t_ns / 1000) >> (shift & 15));

	return units == VTIME_NONE ? 1 : units;
}

/* The emulated arrival time of a packet stamped `stamp`, processed at now. */
static __always_inline __u64 vtime_arrival(__u16 stamp, __u64 now, __u32 shift)
{
	__u64 now_units;
	__u16 behind;

	if (stamp == VTIME_NONE)
		return now;
	shift &= 15;
	now_units = (now / 1000) >> shift;
	behind = (__u16)((__u16)now_units - stamp);
	if (behind < VTIME_HALF_RANGE)
		return ((now_units - behind) << shift) * 1000;
	return ((now_units + (0x10000u - behind)) << shift) * 1000;	/* stamped ahead of now */
}

#endif /* PRC_VTIME_H */
