// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The TX engine's per-packet work: pick the head message's next frame,
 * patch its PSN and ICRC, wait for the QP's departure time (published by
 * nic_tx in an mmapped map), obey pauses and credit, send, and log. One
 * call sends a burst of one QP; tx_sched.c picks the QP. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "tx_engine.h"

uint64_t tx_clock_ns(void)
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

#define PSN_MASK ((1u << PSN_BITS) - 1)

/* a comes before b, PSNs compared modulo 2^24 */
static int psn_before(uint32_t a, uint32_t b)
{
	uint32_t ahead = (b - a) & PSN_MASK;

	return ahead != 0 && ahead < (1u << (PSN_BITS - 1));
}

/* When a packet that departs at `departure` may be handed to the kernel. */
static uint64_t due_time(uint64_t departure, uint64_t lead_ns)
{
	return departure > lead_ns ? departure - lead_ns : 0;
}

static const struct tx_frame *next_frame(const struct tx_qp *qp)
{
	if (qp->msg_sent == 0)
		return qp->first;
	return qp->msg_sent + qp->mtu >= qp->msg_len ? qp->last : qp->middle;
}

/* nic_rx counted an ACK, NAK or message since Python last looked. */
static int doorbell_rang(const struct tx_sched *s)
{
	return s->doorbell && *s->doorbell != s->doorbell_seen;
}

#define WEIGHT_ONE 1024u
#define WEIGHT_MAX (64u * WEIGHT_ONE)
#define PORT_MAX_AHEAD_BYTES (64u * 9000u)	/* no QP waits longer than this much wire time */
#define PORT_ELIGIBLE_BYTES (2u * 9000u)	/* due within this much wire time: competing */

/* A QP's start tag on its port: its last finish tag, or the port's clock
 * if it has fallen behind (it was idle). */
static uint64_t start_tag(const struct tx_qp *qp)
{
	return qp->vtag > qp->port->vclock ? qp->vtag : qp->port->vclock;
}

/* The port's share of a packet: its start tag moves the port's virtual
 * clock; the QP's finish tag grows by the packet's bytes over its weight,
 * so backlogged QPs of one port send in proportion to their weights. */
static void port_take(struct tx_qp *qp, uint64_t now, uint32_t len)
{
	struct tx_port *p = qp->port;
	uint32_t w = qp->weight ? *qp->weight : 0;
	uint64_t start = start_tag(qp);

	w = w == 0 ? WEIGHT_ONE : (w > WEIGHT_MAX ? WEIGHT_MAX : w);
	p->vclock = start;
	p->last = qp;
	qp->vtag = start + (uint64_t)len * WEIGHT_ONE / w;
	/* As nic_pace's slack: time the engine lost (a late wake-up, a send
	 * that took long) is made up by sending sooner, up to slack_ns, not
	 * lost to the port for good. Without it a port whose QPs send at line
	 * rate ran at line rate less every delay (0.88 of it with four hosts
	 * at 1 Gb/s). */
	uint64_t floor = now > p->slack_ns ? now - p->slack_ns : 0;

	p->free_at = (p->free_at > floor ? p->free_at : floor) + (uint64_t)len * p->ps_per_byte / 1000;
}

/* The earliest a QP may take its port: when the port is free, later by
 * how far its start tag is ahead of the least one of the QPs that want
 * the port by then (a message to send, their own departure come, no
 * pause), in the port's time per byte: the QP owed most goes first. */
static uint64_t port_due(const struct tx_qp *qp)
{
	const struct tx_port *p = qp->port;
	uint64_t horizon = p->free_at + PORT_ELIGIBLE_BYTES * p->ps_per_byte / 1000;
	uint64_t mine = start_tag(qp), first = mine, ahead;

	for (uint32_t i = 0; i < p->n_qps; i++) {
		const struct tx_qp *q = p->qps[i];
		uint64_t tag;

		if (q == qp || q->msg_sent >= q->msg_len || *q->departure > horizon ||
		    (q->n_pause && paused_until(q) > horizon))
			continue;
		tag = start_tag(q);
		if (tag < first)
			first = tag;
	}
	ahead = mine - first;
	if (ahead > PORT_MAX_AHEAD_BYTES)
		ahead = PORT_MAX_AHEAD_BYTES;
	return p->free_at + ahead * p->ps_per_byte / 1000;
}

/* Send the head message's packets while the QP is due and no other QP is
 * due before it. A packet is due lead_ns before its departure time (the
 * kernel pacer holds it from there; 0 for the cooperative pacer) and not
 * before its port is free; a due time up to spin_ns ahead (and not after
 * not_after, the other QPs' earliest) is waited for here; at most
 * max_packets per call. A QP that had to wait for its port sends one
 * packet per call, so that the scheduler can pick the port's next QP by
 * virtual time. A NAK for the QP or the doorbell ends the burst. */
enum tx_status tx_burst(struct tx_qp *qp, uint64_t lead_ns, uint64_t not_after, uint64_t spin_ns,
			uint32_t max_packets, const struct tx_sched *s, uint64_t *when)
{
	for (uint32_t n = 0;; n++) {
		uint64_t departure = *qp->departure;
		uint64_t due = due_time(departure, lead_ns);
		uint64_t now = tx_clock_ns();
		uint64_t port_at = qp->port ? port_due(qp) : 0;
		int port_bound = port_at > due;

		if (port_bound) {
			due = port_at;
			/* another QP's packet on the wire holds it: the arbiter's
			 * wait, not the engine's (its own is its own pacing) */
			if (due > now && qp->port->last != qp && !qp->held_since)
				qp->held_since = now;
		}

		if (qp->naks && *qp->naks != qp->naks_seen) {
			*when = now;
			return TX_NAK;
		}
		if (doorbell_rang(s)) {
			*when = due;
			return TX_EVENT;
		}
		if (due > not_after || n == max_packets || (due > now && due - now > spin_ns) ||
		    (port_bound && n > 0 && due >= not_after)) {
			*when = due;
			return TX_WAIT;
		}
		while (now < due) {
			if (doorbell_rang(s)) {
				*when = due;
				return TX_EVENT;
			}
			now = tx_clock_ns();
		}
		uint64_t pause = qp->n_pause ? paused_until(qp) : 0;
		if (pause > now) {
			qp->pauses++;
			if (!qp->held_since)
				qp->held_since = now;
			*when = pause;
			return TX_PAUSED;
		}
		if (qp->credit && credit_exhausted(qp->credit)) {
			if (!qp->held_since)
				qp->held_since = now;
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
		else if (qp->port)
			port_take(qp, now, f->len);
		if (psn_before(qp->next_psn, qp->high_psn))
			qp->retransmits++;
		else
			qp->high_psn = (qp->next_psn + 1) & PSN_MASK;
		qp->next_psn = (qp->next_psn + 1) & PSN_MASK;
		qp->msg_sent += f->payload;
		qp->packets++;
		qp->bytes += f->len;
		if (qp->credit)
			qp->credit->sent += f->len;
		if (qp->log) {
			struct tx_log_entry *e = &qp->log[qp->log_len++];

			e->sent_ns = tx_clock_ns();
			e->wire_bytes = f->len;
			e->rate = (uint32_t)*qp->rate;
			e->late_ns = (int64_t)(now - departure);
			e->held_ns = qp->held_since ? now - qp->held_since : 0;
		}
		qp->held_since = 0;
		if (qp->msg_sent >= qp->msg_len) {
			*when = due_time(*qp->departure, lead_ns);
			return TX_MESSAGE_DONE;
		}
	}
}

/* The benchmark's baseline: send one frame on fd for duration_ns; the
 * number the socket took (*refused: the number it did not). */
uint64_t tx_bare_send(int fd, const uint8_t *frame, uint32_t len, uint64_t duration_ns,
		      uint64_t *refused)
{
	uint64_t sent = 0, end = tx_clock_ns() + duration_ns;

	*refused = 0;
	while (tx_clock_ns() < end) {
		if (send(fd, frame, len, 0) < 0)
			(*refused)++;
		else
			sent++;
	}
	return sent;
}
