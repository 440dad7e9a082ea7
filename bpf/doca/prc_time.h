/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * DOCA PCC stamps events with 32-bit ns, which wrap every 4.29 s; the CC
 * core keeps 64-bit times. The flow's own state says where its time is:
 * the end of its alpha period lies after its last event and at most one
 * period beyond it, so (end - the longest period allowed) is at or before
 * the last event, and an event's 32-bit time counts forward from there.
 * No state outside the flow's context, nothing shared between the DPA
 * threads. Exact while a flow's events are less than 2^32 ns minus the
 * longest period apart (4.16 s). After a longer silence the device cannot
 * tell how many wraps passed: the flow resumes as if silent for the
 * silence modulo 2^32 ns, so its timers ran less and its recovered rate
 * is understated, never overstated (additive-only recovery, with the byte
 * counter on and nothing sent, takes seconds at the defaults).
 */
#ifndef PRC_DOCA_TIME_H
#define PRC_DOCA_TIME_H

#include "../cc/cc_state.h"
#include "../cc/cc_math.h"

#define PRC_ALPHA_PERIOD_MAX_NS (1u << 27)	/* dce_tcp_rtt's registered maximum (134 ms) */

CC_INLINE cc_u64 prc_time_extend(const struct cc_qp_state *st, cc_u32 stamp)
{
	cc_u64 ref;

	if (!(st->common.flags & CC_F_INIT))
		return stamp;			/* a new flow starts in the first wrap */
	/* modulo 2^64: early in the first wrap ref is "negative" and the sum still right */
	ref = cc_get64(st->algo.dcqcn.alpha_next_lo, st->algo.dcqcn.alpha_next_hi) - PRC_ALPHA_PERIOD_MAX_NS;
	return ref + (cc_u32)(stamp - (cc_u32)ref);
}

#endif /* PRC_DOCA_TIME_H */
