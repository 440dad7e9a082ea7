// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The TX engine's per-packet work as a host library: pick the head
 * message's next frame, patch its PSN and ICRC, wait for the QP's departure
 * time (published by nic_tx in an mmapped map), obey pauses and credit,
 * send, and log. Python keeps the scheduling between QPs (a heap), the
 * message queues and completions; one call sends a burst of one QP. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

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

struct tx_log_entry {
	uint64_t sent_ns;
	uint32_t wire_bytes;
	uint32_t rate;			/* BPF rate after the packet, Q20 */
	int64_t late_ns;		/* against the departure time (< 0: early, for
				 * the kernel pacer to hold) */
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
};

enum tx_status {
	TX_MESSAGE_DONE,	/* the head message's last packet left */
	TX_WAIT,		/* *when: the QP's next departure */
	TX_PAUSED,		/* *when: the pause ends */
	TX_NO_CREDIT,		/* the way to the last hop is full */
	TX_LOG_FULL,		/* grow the log and call again */
};

size_t tx_frame_size(void) { return sizeof(struct tx_frame); }
size_t tx_credit_size(void) { return sizeof(struct tx_credit); }
size_t tx_qp_size(void) { return sizeof(struct tx_qp); }
size_t tx_log_entry_size(void) { return sizeof(struct tx_log_entry); }

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);	/* bpf_ktime_get_ns's clock */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write psn and its ICRC (little-endian, as on the wire) into the frame. */
void tx_frame_patch(const struct tx_frame *f, uint32_t psn)
{
	uint32_t icrc = f->icrc_base;
	uint8_t *tail = f->bytes + f->len - 4;

	for (int k = 0; k < PSN_BITS; k++)
		icrc ^= f->psn_delta[k] & -((psn >> k) & 1u);
	f->bytes[f->psn_at] = psn >> 16;
	f->bytes[f->psn_at + 1] = psn >> 8;
	f->bytes[f->psn_at + 2] = psn;
	tail[0] = icrc;
	tail[1] = icrc >> 8;
	tail[2] = icrc >> 16;
	tail[3] = icrc >> 24;
}

static uint64_t paused_until(const struct tx_qp *qp)
{
	uint64_t until = 0;

	for (uint32_t i = 0; i < qp->n_pause; i++)
		if (*qp->pause[i] > until)
			until = *qp->pause[i];
	return until;
}

static int credit_exhausted(const struct tx_credit *c)
{
	uint64_t delivered = 0;

	for (uint32_t i = 0; i < c->n_rx; i++)
		delivered += *c->rx[i];
	return c->sent > delivered && c->sent - delivered > c->budget;
}

/* When the QP's next packet may be handed to the kernel. */
static uint64_t due_time(const struct tx_qp *qp, uint64_t lead_ns)
{
	uint64_t departure = *qp->departure;

	return departure > lead_ns ? departure - lead_ns : 0;
}

static const struct tx_frame *next_frame(const struct tx_qp *qp)
{
	if (qp->msg_sent == 0)
		return qp->first;
	return qp->msg_sent + qp->mtu >= qp->msg_len ? qp->last : qp->middle;
}

/* Send the head message's packets while the QP is due and no other QP is
 * due before it. A packet is due lead_ns before its departure time (the
 * kernel pacer holds it from there; 0 for the cooperative pacer); a due
 * time up to spin_ns ahead (and not after not_after, the other QPs'
 * earliest) is waited for here; at most max_packets per call. */
enum tx_status tx_burst(struct tx_qp *qp, uint64_t lead_ns, uint64_t not_after, uint64_t spin_ns,
			uint32_t max_packets, uint64_t *when)
{
	for (uint32_t n = 0;; n++) {
		uint64_t due = due_time(qp, lead_ns);
		uint64_t departure = due + lead_ns;
		uint64_t now = clock_ns();

		if (due > not_after || n == max_packets || (due > now && due - now > spin_ns)) {
			*when = due;
			return TX_WAIT;
		}
		while (now < due)
			now = clock_ns();
		uint64_t pause = qp->n_pause ? paused_until(qp) : 0;
		if (pause > now) {
			qp->pauses++;
			*when = pause;
			return TX_PAUSED;
		}
		if (qp->credit && credit_exhausted(qp->credit)) {
			*when = now;
			return TX_NO_CREDIT;
		}
		if (qp->log && qp->log_len == qp->log_cap) {
			*when = due;
			return TX_LOG_FULL;
		}
		const struct tx_frame *f = next_frame(qp);
		tx_frame_patch(f, qp->next_psn);
		ssize_t rc;
		do
			rc = send(qp->fd, f->bytes, f->len, 0);
		while (rc < 0 && errno == EINTR);
		if (rc < 0)
			qp->send_errors++;	/* a full qdisc: the packet is lost */
		qp->next_psn = (qp->next_psn + 1) & ((1u << PSN_BITS) - 1);
		qp->msg_sent += f->payload;
		qp->packets++;
		qp->bytes += f->len;
		if (qp->credit)
			qp->credit->sent += f->len;
		if (qp->log) {
			struct tx_log_entry *e = &qp->log[qp->log_len++];

			e->sent_ns = clock_ns();
			e->wire_bytes = f->len;
			e->rate = (uint32_t)*qp->rate;
			e->late_ns = (int64_t)(now - departure);
		}
		if (qp->msg_sent >= qp->msg_len) {
			*when = due_time(qp, lead_ns);
			return TX_MESSAGE_DONE;
		}
	}
}

/* The benchmark's baseline: send one frame on fd for duration_ns; the
 * number the socket took (*refused: the number it did not). */
uint64_t tx_bare_send(int fd, const uint8_t *frame, uint32_t len, uint64_t duration_ns,
		      uint64_t *refused)
{
	uint64_t sent = 0, end = clock_ns() + duration_ns;

	*refused = 0;
	while (clock_ns() < end) {
		if (send(fd, frame, len, 0) < 0)
			(*refused)++;
		else
			sent++;
	}
	return sent;
}
