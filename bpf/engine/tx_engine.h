// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The TX engine's host library: structs shared by its C files and by the
 * ctypes mirrors in dataplane/tx_native.py (checked field by field by
 * dataplane/layout.py). */
#ifndef PRC_TX_ENGINE_H
#define PRC_TX_ENGINE_H

#include <stdint.h>

#define PSN_BITS 24

/* A prebuilt frame: only the PSN and ICRC change per packet. The payload
 * is zeros and every other field fixed, so the ICRC is affine in the PSN:
 * icrc(psn) = icrc_base ^ (psn_delta[k] for each set bit k). */
struct tx_frame {
	uint8_t *bytes;
	uint32_t len;
	uint32_t psn_at;		/* offset of the 24-bit PSN */
	uint32_t payload;		/* RDMA payload bytes it carries */
	uint32_t icrc_base;		/* ICRC with PSN 0 */
	uint32_t psn_delta[PSN_BITS];
};

/* Lossless mode's bound on bytes in flight towards a last-hop port:
 * sent minus what its destination QPs received (nic_rx counters). */
struct tx_credit {
	uint64_t budget;
	uint64_t sent;
	const volatile uint64_t *const *rx;	/* rx-bytes words */
	uint32_t n_rx;
	uint32_t reserved;
};

/* A host NIC's port: one packet on the wire at a time, at line rate.
 * The QPs sharing it take turns by their processes' weights (start-time
 * fair queueing on virtual time), as an RNIC's transmit arbiter does; so
 * two QPs of one host never queue behind each other in the host's qdisc. */
struct tx_qp;

struct tx_port {
	uint64_t free_at;		/* when the packet on the wire has left */
	uint64_t ps_per_byte;		/* wire time of a byte, picoseconds */
	uint64_t vclock;		/* the start tag of the last packet sent */
	struct tx_qp *const *qps;	/* the QPs sharing it */
	uint32_t n_qps;
	uint32_t slack_ns;		/* lost wire time it may send back-to-back (the pacer's slack) */
	const struct tx_qp *last;	/* the QP of the packet on the wire */
};

struct tx_log_entry {
	uint64_t sent_ns;
	uint32_t wire_bytes;
	uint32_t rate;			/* BPF rate after the packet, Q20 */
	int64_t late_ns;		/* against the departure time (< 0: early, for
				 * the kernel pacer to hold) */
	uint64_t held_ns;		/* how long a pause or the lossless credit
				 * held it: the network's wait, not the engine's */
};

struct tx_qp {
	int32_t fd;
	uint32_t next_psn;
	const volatile uint64_t *departure;	/* nic_tx publishes these two */
	const volatile uint64_t *rate;
	const volatile uint64_t *const *pause;	/* pause-until words on the path */
	uint32_t n_pause;
	uint32_t mtu;
	struct tx_credit *credit;		/* NULL: not lossless */
	/* the head message: first (or only) frame, middles, last */
	const struct tx_frame *first, *middle, *last;
	uint64_t msg_len;
	uint64_t msg_sent;
	uint64_t packets;
	uint64_t bytes;
	uint64_t pauses;
	uint64_t send_errors;
	struct tx_log_entry *log;		/* NULL: no log */
	uint64_t log_len;
	uint64_t log_cap;
	/* RC: nic_rx counts the NAKs it takes here (NULL: unreliable) */
	const volatile uint64_t *naks;
	uint64_t naks_seen;			/* the count Python has rewound for */
	uint64_t retransmits;			/* packets sent again (PSN below high_psn) */
	uint32_t high_psn;			/* the PSN after the highest one sent */
	uint32_t reserved;
	uint64_t held_since;			/* when a pause or the credit began to hold it (0: not held) */
	struct tx_port *port;			/* NULL: no arbitration (one QP per socket) */
	const volatile uint32_t *weight;	/* its process's PRC weight, 1024 = 1 (NULL or 0: 1) */
	uint64_t vtag;				/* virtual finish time of its last packet on the port */
};

enum tx_status {
	TX_MESSAGE_DONE,	/* the head message's last packet left */
	TX_WAIT,		/* *when: the QP's next departure */
	TX_PAUSED,		/* *when: the pause ends */
	TX_NO_CREDIT,		/* the way to the last hop is full */
	TX_LOG_FULL,		/* grow the log and call again */
	TX_IDLE,		/* tx_run: nothing due before *when */
	TX_END,			/* tx_run: its end time came */
	TX_NAK,			/* a NAK came: the QP is out of the heap, rewind it */
	TX_EVENT,		/* the doorbell rang: look at ACKs and completions */
};

/* QPs with work, ordered by due time (a binary heap), for tx_run. */
struct tx_sched_entry {
	uint64_t due;
	uint32_t slot;			/* index into qps */
	uint32_t reserved;
};

struct tx_sched {
	struct tx_qp **qps;		/* by slot */
	struct tx_sched_entry *heap;	/* room for every slot */
	uint32_t n;			/* entries in the heap */
	uint32_t reserved;
	uint64_t credit_waits;		/* times a QP found its credit spent */
	const volatile uint64_t *doorbell;	/* nic_rx's event count (NULL: none) */
	uint64_t doorbell_seen;		/* the count Python has looked at */
};

uint64_t tx_clock_ns(void);
enum tx_status tx_burst(struct tx_qp *qp, uint64_t lead_ns, uint64_t not_after, uint64_t spin_ns,
			uint32_t max_packets, const struct tx_sched *s, uint64_t *when);

#endif /* PRC_TX_ENGINE_H */
