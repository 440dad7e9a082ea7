/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Which process a flow belongs to, on the device. A flow's context holds
 * only the CC state, and DOCA PCC names a flow's QP only on its TX events
 * (BlueField-3), so the host binds QPs to processes through the mailbox
 * (a QP table), and each TX event records its flow tag's process in a
 * cache that the flow's other events (CNPs) read.
 *
 * The QP table is open addressing with linear probing, at most half full
 * so probes stay short; removal shifts the run back (no tombstones). The
 * flow cache is direct-mapped by flow tag: a flow whose entry another
 * flow took gets no process (weight 1, plain DCQCN) until its next TX
 * event takes the entry back.
 */
#ifndef PRC_DOCA_FLOWS_H
#define PRC_DOCA_FLOWS_H

#include "../cc/cc_types.h"

#define PRC_QP_SLOTS 1024u		/* a power of two */
#define PRC_QP_MAX_BOUND (PRC_QP_SLOTS / 2)
#define PRC_QPN_MASK 0xffffffu		/* QPNs are 24 bits */
#define PRC_FLOW_CACHE 4096u		/* a power of two */
#define PRC_NO_PROC 0xffffffffu

struct prc_qp_slot {
	cc_u32 key;			/* QPN + 1; 0: empty */
	cc_u32 proc;
};

struct prc_qp_table {
	cc_u32 bound;
	cc_u32 reserved;
	struct prc_qp_slot slot[PRC_QP_SLOTS];
};

struct prc_flow_entry {
	cc_u32 tag;
	cc_u32 proc_plus1;		/* 0: none */
};

CC_INLINE cc_u32 prc_qp_home(cc_u32 qpn)
{
	return (qpn * 2654435761u) >> 22;	/* Fibonacci hashing to 10 bits */
}

/* The slot holding qpn, or PRC_QP_SLOTS when it is not bound. */
CC_INLINE cc_u32 prc_qp_find(const struct prc_qp_table *t, cc_u32 qpn)
{
	cc_u32 i = prc_qp_home(qpn), n;

	for (n = 0; n < PRC_QP_SLOTS; n++, i = (i + 1) & (PRC_QP_SLOTS - 1)) {
		if (t->slot[i].key == qpn + 1)
			return i;
		if (!t->slot[i].key)
			break;
	}
	return PRC_QP_SLOTS;
}

CC_INLINE cc_u32 prc_qp_proc(const struct prc_qp_table *t, cc_u32 qpn)
{
	cc_u32 i = prc_qp_find(t, qpn);

	return i < PRC_QP_SLOTS ? t->slot[i].proc : PRC_NO_PROC;
}

/* Bind qpn to proc; the caller checked there is room (bound < max). */
CC_INLINE void prc_qp_bind(struct prc_qp_table *t, cc_u32 qpn, cc_u32 proc)
{
	cc_u32 i = prc_qp_find(t, qpn);

	if (i == PRC_QP_SLOTS) {
		for (i = prc_qp_home(qpn); t->slot[i].key; i = (i + 1) & (PRC_QP_SLOTS - 1))
			;
		t->slot[i].key = qpn + 1;
		t->bound++;
	}
	t->slot[i].proc = proc;
}

/* Unbind qpn: later entries of its run move back into the hole, so a
 * lookup still stops at the first empty slot. */
CC_INLINE void prc_qp_unbind(struct prc_qp_table *t, cc_u32 qpn)
{
	cc_u32 hole = prc_qp_find(t, qpn), i, home;

	if (hole == PRC_QP_SLOTS)
		return;
	for (i = (hole + 1) & (PRC_QP_SLOTS - 1); t->slot[i].key; i = (i + 1) & (PRC_QP_SLOTS - 1)) {
		home = prc_qp_home(t->slot[i].key - 1);
		/* the entry may fill the hole if its home is not in (hole, i] */
		if (((i - home) & (PRC_QP_SLOTS - 1)) >= ((i - hole) & (PRC_QP_SLOTS - 1))) {
			t->slot[hole] = t->slot[i];
			hole = i;
		}
	}
	t->slot[hole].key = 0;
	t->slot[hole].proc = 0;
	t->bound--;
}

/* A flow's process: a TX event (qpn known) looks its QP up and leaves the
 * answer in the cache; other events read the cache. */
CC_INLINE cc_u32 prc_flow_proc(struct prc_flow_entry *cache, const struct prc_qp_table *t, cc_u32 tag,
			       int is_tx, cc_u32 qpn)
{
	struct prc_flow_entry *e = &cache[tag & (PRC_FLOW_CACHE - 1)];
	cc_u32 proc;

	if (is_tx) {
		proc = prc_qp_proc(t, qpn & PRC_QPN_MASK);
		e->tag = tag;
		e->proc_plus1 = proc == PRC_NO_PROC ? 0 : proc + 1;
		return proc;
	}
	return e->tag == tag && e->proc_plus1 ? e->proc_plus1 - 1 : PRC_NO_PROC;
}

#endif /* PRC_DOCA_FLOWS_H */
