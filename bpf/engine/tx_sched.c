// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The TX engine's scheduler: a binary heap of the QPs with work, keyed by
 * the time their next packet is due; the earliest sends a burst (tx_burst)
 * until another QP is due before it. Python posts messages, loads each
 * QP's head message and handles completions; it is called back only for
 * those, a log to grow, an idle gap, or the end of a time slice. */
#include <stddef.h>

#include "tx_engine.h"

#define CREDIT_RETRY_NS 5000	/* a QP held by a full wire looks again this much later */

/* Due first; among QPs due at once (those a busy port holds) the one its
 * port owes most, by virtual time; then by slot. */
static int earlier(const struct tx_sched *s, const struct tx_sched_entry *a, const struct tx_sched_entry *b)
{
	uint64_t va, vb;

	if (a->due != b->due)
		return a->due < b->due;
	va = s->qps[a->slot]->vtag;
	vb = s->qps[b->slot]->vtag;
	return va < vb || (va == vb && a->slot < b->slot);
}

static void swap(struct tx_sched_entry *a, struct tx_sched_entry *b)
{
	struct tx_sched_entry t = *a;

	*a = *b;
	*b = t;
}

static void sift_down(struct tx_sched *s, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < s->n && earlier(s, &s->heap[l], &s->heap[m]))
			m = l;
		if (r < s->n && earlier(s, &s->heap[r], &s->heap[m]))
			m = r;
		if (m == i)
			return;
		swap(&s->heap[i], &s->heap[m]);
		i = m;
	}
}

/* Add a QP (its head message loaded) that is due at `due`. */
void tx_sched_push(struct tx_sched *s, uint32_t slot, uint64_t due)
{
	uint32_t i = s->n++;

	s->heap[i] = (struct tx_sched_entry){ .due = due, .slot = slot };
	while (i > 0 && earlier(s, &s->heap[i], &s->heap[(i - 1) / 2])) {
		swap(&s->heap[i], &s->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static void reschedule_top(struct tx_sched *s, uint64_t due)
{
	s->heap[0].due = due;
	sift_down(s, 0);
}

static void pop_top(struct tx_sched *s)
{
	s->heap[0] = s->heap[--s->n];
	sift_down(s, 0);
}

/* Take a QP out of the heap (a timeout rewinds it); 0 if it was not in. */
int tx_sched_remove(struct tx_sched *s, uint32_t slot)
{
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->heap[i].slot != slot)
			continue;
		s->heap[i] = s->heap[--s->n];
		if (i < s->n) {		/* the moved entry may belong above or below */
			while (i > 0 && earlier(s, &s->heap[i], &s->heap[(i - 1) / 2])) {
				swap(&s->heap[i], &s->heap[(i - 1) / 2]);
				i = (i - 1) / 2;
			}
			sift_down(s, i);
		}
		return 1;
	}
	return 0;
}

/* The earliest due time of the QPs other than the top one. */
static uint64_t next_due(const struct tx_sched *s)
{
	uint64_t due = UINT64_MAX;

	for (uint32_t i = 1; i <= 2 && i < s->n; i++)
		if (s->heap[i].due < due)
			due = s->heap[i].due;
	return due;
}

/* Send until `end`. Returns TX_MESSAGE_DONE (*slot's head message left;
 * it is out of the heap, *when its next due time), TX_LOG_FULL (*slot's
 * log, then call again), TX_IDLE (nothing due within spin_ns: *when the
 * earliest due time, or UINT64_MAX with an empty heap), TX_NAK (*slot
 * took a NAK: it is out of the heap), TX_EVENT (the doorbell rang) or
 * TX_END. */
enum tx_status tx_run(struct tx_sched *s, uint64_t lead_ns, uint64_t end, uint64_t spin_ns,
		      uint32_t max_burst, uint32_t *slot, uint64_t *when)
{
	for (;;) {
		uint64_t now = tx_clock_ns(), not_after, next;

		if (now >= end)
			return TX_END;
		if (s->n == 0 || (s->heap[0].due > now && s->heap[0].due - now > spin_ns)) {
			*when = s->n ? s->heap[0].due : UINT64_MAX;
			return TX_IDLE;
		}
		*slot = s->heap[0].slot;
		next = next_due(s);
		not_after = next < end ? next : end;
		switch (tx_burst(s->qps[*slot], lead_ns, not_after, spin_ns, max_burst, s, &next)) {
		case TX_MESSAGE_DONE:
			pop_top(s);
			*when = next;
			return TX_MESSAGE_DONE;
		case TX_LOG_FULL:
			return TX_LOG_FULL;
		case TX_NAK:
			pop_top(s);
			return TX_NAK;
		case TX_EVENT:
			reschedule_top(s, next);
			return TX_EVENT;
		case TX_NO_CREDIT:
			s->credit_waits++;
			reschedule_top(s, next + CREDIT_RETRY_NS);
			break;
		default:		/* TX_WAIT, TX_PAUSED: until `next` */
			reschedule_top(s, next);
		}
	}
}
