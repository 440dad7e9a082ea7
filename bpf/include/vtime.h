/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Virtual wire time. The emulator's CPUs delay and bunch packets between
 * nodes (softirq batches, a busy core), so a switch port that timed its
 * queue model by processing time would see bursts the emulated network
 * never sends. Each RoCEv2 packet instead carries the emulated time it left
 * the previous node: nic_tx writes its departure time, each switch port
 * the time its last byte leaves the port's model queue; the next port times
 * the packet's arrival by it. The carrier is the UDP checksum, which
 * RoCEv2 leaves zero and the ICRC masks out: microseconds modulo 2^16
 * (0: none), rebuilt as the time nearest to now (packets are never 32 ms
 * away from their stamp). Ports facing hosts clear it, so hosts receive
 * frames as sent.
 */
#ifndef PRC_VTIME_H
#define PRC_VTIME_H

#include <linux/types.h>

#define VTIME_NONE 0
#define VTIME_HALF_RANGE 0x8000u

static __always_inline __u16 vtime_stamp(__u64 t_ns)
{
	__u16 us = (__u16)(t_ns / 1000);

	return us == VTIME_NONE ? 1 : us;
}

/* The emulated arrival time of a packet stamped `stamp`, processed at now. */
static __always_inline __u64 vtime_arrival(__u16 stamp, __u64 now)
{
	__u64 now_us;
	__u16 behind;

	if (stamp == VTIME_NONE)
		return now;
	now_us = now / 1000;
	behind = (__u16)((__u16)now_us - stamp);
	if (behind < VTIME_HALF_RANGE)
		return (now_us - behind) * 1000;
	return (now_us + (0x10000u - behind)) * 1000;	/* stamped ahead of now */
}

#endif /* PRC_VTIME_H */
