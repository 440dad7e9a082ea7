/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A trace of the CC events the RNIC applies (built with NIC_CC_TRACE):
 * one record per call into the CC core, with its inputs and the state it
 * left, so the same events can be replayed through another build of the
 * core (the DOCA PCC adapter's host harness) and compared bit for bit.
 * Records are filled under the QP's lock and stored after it (no helper
 * calls inside a lock); seq orders one QP's records, which two CPUs may
 * store out of order.
 *
 * The trace is a ring of records in an mmapable array, which user space
 * copies in bulk (a ring buffer's per-record callback took the TX engine's
 * CPU at 140,000 events/s). A writer takes the next index from the head
 * counter, copies its record into slot index % size, and writes mark =
 * index + 1 last: a reader takes a slot once its mark says the record is
 * whole, and knows records were overwritten when the head ran more than a
 * ring ahead of it.
 */
#ifndef PRC_CC_TRACE_H
#define PRC_CC_TRACE_H

#include "nic_defs.h"

struct cc_trace_record {
	__u64 now_ns;			/* the time the core was given */
	__u32 qpn;
	__u32 seq;			/* this QP's event number, from 1 */
	__u32 kind;			/* enum cc_event_kind */
	__u32 bytes;			/* CC_EV_TX: 32-byte units, as bytes */
	struct prc_hook hook;		/* the hook in force */
	struct cc_qp_state st;		/* the state after the event */
	__u64 mark;			/* ring index + 1, written after the rest */
};

/* Fill rec for an event just applied to cc (lock held). */
static __always_inline void cc_trace_fill(struct cc_trace_record *rec, struct qp_cc *cc, __u32 qpn,
					  __u32 kind, __u32 bytes, __u64 now, const struct prc_hook *hook)
{
	rec->now_ns = now;
	rec->qpn = qpn;
	rec->seq = ++cc->events;
	rec->kind = kind;
	rec->bytes = bytes;
	rec->hook = *hook;
	rec->st = cc->st;
}

#endif /* PRC_CC_TRACE_H */
