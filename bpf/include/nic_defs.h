/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The emulated RNIC's maps: structs shared by bpf/nic.c and user space
 * (ctypes mirrors in dataplane/nic.py, checked field by field against this
 * header by dataplane/layout.py).
 *
 * QP numbering: QPNs are 1..NIC_MAX_QPS-1, unique across a testbed, and a
 * sender puts its own QPN in the UDP source port (NIC_SPORT_BASE | QPN),
 * as RNICs derive the port from the QP: the BTH carries only the
 * destination QP, and nic_tx must know whose rate paces the packet.
 */
#ifndef PRC_NIC_DEFS_H
#define PRC_NIC_DEFS_H

#include <linux/types.h>
#include "cc/cc.h"

/* Mirrored in dataplane/nic.py (tests/test_layout.py): change both. */
#define NIC_MAX_QPS 4096
#define NIC_MAX_PROCS 256
#define NIC_SPORT_BASE 0xc000
#define NIC_SPORT_QPN_MASK 0x3fff

#define NIC_F_KERNEL_PACER 1u	/* set skb->tstamp (sch_fq enforces it) */
#define NIC_F_PASS_DATA 2u	/* pass received data up (capture) instead of dropping */

#define QP_F_VALID 1u
#define NIC_STAMP_RING 32		/* completion stamps kept per QP (a power of 2) */

struct nic_config {
	__u64 line_ps_per_byte;		/* live line rate as picoseconds per byte */
	__u64 pacing_slack_ns;		/* departures may catch up this much */
	__u64 min_time_between_cnps_ns;
	__u32 flags;
	__u32 vtime_shift;		/* wire-time unit: 2^shift us (vtime.h) */
};

/* What an RC QP context holds that the dataplane needs. */
struct qp_ctx {
	__u32 remote_qpn;		/* the peer QP: a CNP goes to it */
	__u32 proc;			/* owning process: index into proc_hook */
	__u32 flags;			/* QP_F_VALID */
	__u32 cnp_delay_ns;		/* a CNP to this (sending) QP takes effect
					 * this long after it arrives: the
					 * feedback delay links without delay
					 * lack (0: at once) */
};

/* CC state of a sending QP: written by nic_rx (CNP) and nic_tx (bytes) on
 * different CPUs, hence the lock (no helper calls inside it). */
struct qp_cc {
	struct bpf_spin_lock lock;
	__u32 tx_residue_bytes;		/* sent bytes short of a 32-byte unit (nic_tx_units) */
	struct cc_qp_state st;
	__u64 cnp_due_ns;		/* a CNP waiting to take effect (0: none) */
	__u32 events;			/* CC events applied: orders a trace's records */
	__u32 reserved;
};

/* When the message with sequence number msn (1, 2, ... per QP) completed:
 * its last packet taken (qp_rx) or its ACK received (qp_tx). A slot holds
 * message msn % NIC_STAMP_RING; ns is written before msn. */
struct nic_stamp {
	__u64 msn;
	__u64 ns;
};

/* One word user space watches instead of every QP: nic_rx counts each
 * ACK that acknowledges more, each NAK and each message taken. */
struct nic_doorbell {
	__u64 events;
	__u64 reserved[7];		/* a cache line of its own */
};

/* Sending side, per own QPN; user space mmaps it (the cooperative pacer
 * reads next_departure_ns). */
struct qp_tx {
	__u64 next_departure_ns;	/* the next packet may leave from here on */
	__u64 packets;
	__u64 bytes;
	__u64 early_packets;		/* sent before their departure time */
	__u64 rate;			/* Rc after the last packet, Q20 */
	__u64 alpha;			/* after the last packet, Q20 */
	__u64 cnps_received;
	__u64 cnps_merged;		/* arrived while another waited: dropped */
	/* RC acknowledgements from the receiver (nic_rx writes, the TX
	 * engine reads): */
	__u64 acked_psn;		/* the PSN after the last one acknowledged */
	__u64 acks;
	__u64 last_ack_ns;
	__u64 nak_psn;			/* resend from here (written before naks) */
	__u64 naks;			/* PSN sequence error NAKs received */
	__u64 acked_msn;		/* the highest MSN an ACK carried */
	struct nic_stamp acked[NIC_STAMP_RING];
};

/* Receiving side, per destination QPN; mmapped for completions. An RC
 * responder takes packets in PSN order only: one ahead of the expected
 * PSN is dropped (the first of a run is answered with a NAK), one behind
 * it is a duplicate, dropped and acknowledged again if it asks. */
struct qp_rx {
	__u64 packets;			/* every data frame that arrived */
	__u64 bytes;			/* ... and their bytes (lossless credit) */
	__u64 expected_psn;
	__u64 out_of_sequence;		/* ahead of the expected PSN: dropped */
	__u64 duplicates;		/* behind it: dropped */
	__u64 messages;			/* LAST/ONLY packets taken: completions */
	__u64 ce_packets;
	__u64 cnps_sent;
	__u64 last_cnp_ns;
	__u64 delivered_packets;	/* taken, in PSN order */
	__u64 delivered_bytes;
	__u64 acks_sent;
	__u64 naks_sent;
	__u64 nak_outstanding;		/* a NAK went for expected_psn: no more until it comes */
	__u64 last_message_ns;		/* arrival of the last message's last packet */
	__u64 reserved;
	struct nic_stamp taken[NIC_STAMP_RING];
};

/* CRC-32 (reflected, 0xEDB88320) table for the CNP's ICRC, filled by user
 * space: bcc has no read-only data section for a constant table. */
struct crc32_table {
	__u32 t[256];
};

#endif /* PRC_NIC_DEFS_H */
