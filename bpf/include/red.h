/* SPDX-License-Identifier: GPL-2.0 */
/* RED ECN marking on a queue model: pure logic, no map access. */
#ifndef PRC_RED_H
#define PRC_RED_H

#include "switch_defs.h"

/* Drain the model queue at the port rate for the time since the last
 * arrival (arrivals timed by virtual wire time may come slightly out of
 * order: an earlier one drains nothing). Returns the queue this packet
 * finds. */
static __always_inline __u64 queue_drain(struct port_queue *q, const struct port_cfg *cfg, __u64 arrival)
{
	__u64 drained;

	if (arrival > q->last_ns) {
		if (cfg->ps_per_byte) {
			drained = (arrival - q->last_ns) * 1000 / cfg->ps_per_byte;
			q->q_bytes = q->q_bytes > drained ? q->q_bytes - drained : 0;
		}
		q->last_ns = arrival;
	}
	return q->q_bytes;
}

/* When the last byte of a packet that leaves queue_after bytes behind it
 * (itself included) leaves the port. */
static __always_inline __u64 queue_departure(const struct port_cfg *cfg, __u64 arrival, __u64 queue_after)
{
	return arrival + queue_after * cfg->ps_per_byte / 1000;
}

/* Enqueue. A packet the buffer cannot hold is tail-dropped (returns 0) in
 * lossy mode; in lossless mode pauses keep the buffer from filling, and the
 * model saturates at the limit rather than lose what PFC would keep. */
static __always_inline int queue_add(struct port_queue *q, const struct port_cfg *cfg, __u32 bytes)
{
	__u64 total = q->q_bytes + bytes;

	if (total <= cfg->limit_bytes) {
		q->q_bytes = total;
		return 1;
	}
	if (!(cfg->flags & PORT_F_LOSSLESS))
		return 0;
	q->q_bytes = cfg->limit_bytes;
	return 1;
}

/* Marking probability for queue q as a fraction of 2^32: 0 below Kmin,
 * linear to Pmax at Kmax, and certain above Kmax. */
static __always_inline __u64 red_probability(const struct port_cfg *cfg, __u64 q)
{
	if (q <= cfg->kmin_bytes)
		return 0;
	if (q > cfg->kmax_bytes || cfg->kmax_bytes <= cfg->kmin_bytes)
		return 1ull << 32;
	return (__u64)cfg->pmax * (q - cfg->kmin_bytes) / (cfg->kmax_bytes - cfg->kmin_bytes);
}

/* Lossless mode: when the queue a packet leaves behind reaches Xoff,
 * pause the port's senders for as long as the queue needs to drain to Xon
 * at the port rate. Returns the pause end, or 0 for no (new) pause. */
static __always_inline __u64 pause_until(const struct port_cfg *cfg, __u64 queue_after, __u64 now)
{
	if (!(cfg->flags & PORT_F_LOSSLESS) || queue_after < cfg->xoff_bytes)
		return 0;
	return now + (queue_after - cfg->xon_bytes) * cfg->ps_per_byte / 1000;
}

#endif /* PRC_RED_H */
