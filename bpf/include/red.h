/* SPDX-License-Identifier: GPL-2.0 */
/* RED ECN marking on a queue model: pure logic, no map access. */
#ifndef PRC_RED_H
#define PRC_RED_H

#include "switch_defs.h"

/* Drain the model queue for the time since the last packet at the port
 * rate. Returns the queue this packet finds. */
static __always_inline __u64 queue_drain(struct port_queue *q, const struct port_cfg *cfg, __u64 now)
{
	__u64 drained;

	if (now > q->last_ns && cfg->ps_per_byte) {
		drained = (now - q->last_ns) * 1000 / cfg->ps_per_byte;
		q->q_bytes = q->q_bytes > drained ? q->q_bytes - drained : 0;
	}
	q->last_ns = now;
	return q->q_bytes;
}

/* Enqueue: the packet joins the queue, which the qdisc caps at its limit. */
static __always_inline void queue_add(struct port_queue *q, const struct port_cfg *cfg, __u32 bytes)
{
	__u64 total = q->q_bytes + bytes;

	q->q_bytes = total < cfg->limit_bytes ? total : cfg->limit_bytes;
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
