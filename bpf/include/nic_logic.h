/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The RNIC's per-packet logic, free of map access (bcc rewrites map calls
 * only in the main file): nic.c looks entries up and passes pointers.
 */
#ifndef PRC_NIC_LOGIC_H
#define PRC_NIC_LOGIC_H

#include "nic_defs.h"
#include "roce_defs.h"
#include "roce_ack.h"

#define ROCE_OP_SEND_LAST 0x02
#define ROCE_OP_SEND_ONLY 0x04
#define ROCE_OP_WRITE_LAST 0x08
#define ROCE_OP_WRITE_ONLY 0x0a
#define ROCE_OP_WRITE_ONLY_IMM 0x0b
#define ROCE_PSN_MASK 0x00ffffff
#define IP_ECN_MASK 0x03
#define IP_ECN_ECT0 0x02
#define IP_ECN_CE 0x03

/* RC SEND and WRITE opcodes (0x00..0x0b): what the RNIC paces and accounts. */
static __always_inline int roce_is_data(__u8 opcode)
{
	return opcode <= ROCE_OP_WRITE_ONLY_IMM;
}

/* The last packet of a message: the receiver completes a work request. */
static __always_inline int roce_ends_message(__u8 opcode)
{
	return opcode == ROCE_OP_SEND_LAST || opcode == ROCE_OP_SEND_ONLY ||
	       opcode == ROCE_OP_WRITE_LAST || opcode == ROCE_OP_WRITE_ONLY ||
	       opcode == ROCE_OP_WRITE_ONLY_IMM || opcode == 0x03 || opcode == 0x05 ||
	       opcode == 0x09;	/* ... with immediate */
}

/* The sender's own QPN from the UDP source port, or 0 when the port does
 * not carry one (then the packet is not paced). */
static __always_inline __u32 nic_sender_qpn(__u16 sport_host_order)
{
	if ((sport_host_order & ~NIC_SPORT_QPN_MASK) != NIC_SPORT_BASE)
		return 0;
	return sport_host_order & NIC_SPORT_QPN_MASK;
}

/*
 * Earliest departure time. The packet leaving now was allowed at
 * tx->next_departure_ns (earlier is counted as early); the next one is
 * allowed once this one's bytes have gone at the QP's rate. Departures may
 * lag real time by at most `slack` before the pacer stops counting the lag
 * as credit: departure = max(last, now - slack) + bytes / rate.
 */
static __always_inline __u64 nic_pace(struct qp_tx *tx, const struct nic_config *cfg,
				      __u64 now, __u32 bytes, __u32 rate_q20)
{
	__u64 last = tx->next_departure_ns, start, tx_ns;

	if (now < last)
		__sync_fetch_and_add(&tx->early_packets, 1);
	start = now - cfg->pacing_slack_ns;
	if (start < last || now < cfg->pacing_slack_ns)
		start = last;
	if (rate_q20 == 0)
		rate_q20 = 1;
	tx_ns = (__u64)bytes * cfg->line_ps_per_byte * CC_RATE_ONE / rate_q20 / 1000;
	tx->next_departure_ns = start + tx_ns;
	return start > now ? start : now;	/* this packet's own departure */
}

/* What the responder sends back for a data packet. */
enum rx_reply {
	RX_NO_REPLY,
	RX_ACK,			/* the packet asked for one (AckReq) */
	RX_NAK,			/* the first of a run ahead of the expected PSN */
};

#define PSN_AHEAD_LIMIT (1u << 23)	/* PSNs compare modulo 2^24 */

/* b is a at or after a (within half the PSN space). */
static __always_inline int psn_at_or_after(__u32 a, __u32 b)
{
	return ((b - a) & ROCE_PSN_MASK) < PSN_AHEAD_LIMIT;
}

/* Record when message msn completed in its slot of a stamp ring. */
static __always_inline void nic_stamp(struct nic_stamp *ring, __u64 msn, __u64 now)
{
	struct nic_stamp *slot = &ring[msn & (NIC_STAMP_RING - 1)];

	slot->ns = now;
	asm volatile("" ::: "memory");	/* BPF has no fence: keep the order (x86 stores stay in it) */
	slot->msn = msn;
}

/*
 * The RC responder's receive rule for one data packet of a QP (go-back-N):
 * only the expected PSN is taken; a packet ahead of it is dropped, and
 * the first of such a run NAKs the expected PSN; one behind it is a
 * duplicate, dropped. A taken or duplicate packet with AckReq is
 * acknowledged (the ACK repeats the last PSN taken, so a duplicate
 * recovers a lost ACK). A message completes when its LAST/ONLY packet is
 * taken: stamped, and the doorbell rung.
 */
static __always_inline enum rx_reply nic_account_rx(struct qp_rx *rx, __u32 psn, __u32 bytes,
						    __u8 opcode, int ackreq, int ce, __u64 now,
						    struct nic_doorbell *bell)
{
	__u32 expected = rx->expected_psn & ROCE_PSN_MASK;
	__u64 msn;

	__sync_fetch_and_add(&rx->packets, 1);
	__sync_fetch_and_add(&rx->bytes, bytes);
	if (ce)
		__sync_fetch_and_add(&rx->ce_packets, 1);
	if (psn == expected) {
		rx->expected_psn = (psn + 1) & ROCE_PSN_MASK;
		rx->nak_outstanding = 0;
		__sync_fetch_and_add(&rx->delivered_packets, 1);
		__sync_fetch_and_add(&rx->delivered_bytes, bytes);
		if (roce_ends_message(opcode)) {
			rx->last_message_ns = now;
			msn = rx->messages + 1;		/* one CPU takes a QP's packets */
			nic_stamp(rx->taken, msn, now);
			rx->messages = msn;
			__sync_fetch_and_add(&bell->events, 1);
		}
		return ackreq ? RX_ACK : RX_NO_REPLY;
	}
	if (psn_at_or_after(expected, psn)) {
		__sync_fetch_and_add(&rx->out_of_sequence, 1);
		if (rx->nak_outstanding)
			return RX_NO_REPLY;
		rx->nak_outstanding = 1;
		return RX_NAK;
	}
	__sync_fetch_and_add(&rx->duplicates, 1);
	return ackreq ? RX_ACK : RX_NO_REPLY;
}

/* The PSN an ACK or NAK from this responder carries. */
static __always_inline __u32 nic_reply_psn(const struct qp_rx *rx, enum rx_reply reply)
{
	__u32 expected = rx->expected_psn & ROCE_PSN_MASK;

	return reply == RX_NAK ? expected : (expected - 1) & ROCE_PSN_MASK;
}

/*
 * The requester takes an ACK or NAK (syndrome: the AETH's first byte).
 * An ACK of PSN p acknowledges everything up to p; a NAK of p everything
 * before p, and asks for a resend from p: the TX engine sees naks move
 * and reads nak_psn, written first.
 */
static __always_inline void nic_take_ack(struct qp_tx *tx, __u32 psn, __u8 syndrome, __u32 msn,
					 __u64 now, struct nic_doorbell *bell)
{
	int ack = (syndrome & AETH_KIND_MASK) == 0;
	__u32 acked = ack ? (psn + 1) & ROCE_PSN_MASK : psn, new_msns;

	if (!ack && syndrome != AETH_NAK_PSN_SEQ)
		return;			/* other NAKs: no such errors here */
	if (psn_at_or_after((__u32)tx->acked_psn, acked))
		tx->acked_psn = acked;
	if (ack) {
		tx->last_ack_ns = now;
		__sync_fetch_and_add(&tx->acks, 1);
		/* messages the 24-bit MSN is ahead of the last one by */
		new_msns = (msn - (__u32)tx->acked_msn) & ROCE_PSN_MASK;
		if (new_msns && new_msns < PSN_AHEAD_LIMIT) {
			tx->acked_msn += new_msns;
			nic_stamp(tx->acked, tx->acked_msn, now);
			__sync_fetch_and_add(&bell->events, 1);
		}
		return;
	}
	tx->nak_psn = psn;
	__sync_fetch_and_add(&tx->naks, 1);	/* a full barrier: nak_psn first */
	__sync_fetch_and_add(&bell->events, 1);
}

/*
 * Delayed CNPs, for links that add no delay: a CNP arriving at `now` takes
 * effect at now + delay. At most one waits per QP; one arriving meanwhile
 * is merged away (NPs send at most one per min_time_between_cnps, longer
 * than the feedback delay at the default settings). With the QP's lock
 * held: the time at which a CNP takes effect now (the one arriving, or
 * the one that was waiting), or 0 for none.
 */
static __always_inline __u64 nic_cnp_arrives(struct qp_cc *cc, __u64 now, __u32 delay_ns,
					     int *merged)
{
	__u64 due = cc->cnp_due_ns;

	if (!delay_ns)
		return now;
	if (due && now < due) {
		*merged = 1;
		return 0;
	}
	cc->cnp_due_ns = now + delay_ns;
	return due;
}

/*
 * The bytes a packet adds to the CC core's byte counter (lock held). An
 * RNIC reports sent bytes in 32-byte units, as DOCA PCC's TX counter
 * does: what falls short of a unit waits for the next packet, so the
 * byte counter runs as it does on a BlueField-3 and a trace of these
 * events replays there unchanged.
 */
static __always_inline __u32 nic_tx_units(struct qp_cc *cc, __u32 bytes)
{
	__u32 total = cc->tx_residue_bytes + bytes;

	cc->tx_residue_bytes = total & 31;
	return total & ~31u;
}

/* The waiting CNP's effect time once it has come, else 0 (lock held). */
static __always_inline __u64 nic_cnp_due(struct qp_cc *cc, __u64 now)
{
	__u64 due = cc->cnp_due_ns;

	if (!due || now < due)
		return 0;
	cc->cnp_due_ns = 0;
	return due;
}

#endif /* PRC_NIC_LOGIC_H */
