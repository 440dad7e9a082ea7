/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The PRC mailbox: how the host hands the DOCA PCC device code its
 * per-process hooks and which process each QP belongs to
 * (doca_pcc_dev_user_mailbox_handle calls prc_mailbox_apply on each
 * request). A message is versioned and checked whole before anything
 * changes: a malformed or stale one leaves every hook and binding as it
 * was and counts an error. Little-endian, read byte by byte (the request
 * buffer's alignment is not ours to assume):
 *
 *   header   u32 magic "PRCM" | u16 version | u16 kind | u16 count | u16 zero | u32 seq
 *   hooks    u32 proc | u32 weight | u32 rate_floor | u32 rate_cap       (x count)
 *   bindings u32 qpn | u32 proc (PRC_NO_PROC: unbind)                     (x count)
 *
 * seq must move forward (modulo 2^32) from the last message taken, so a
 * replayed or reordered message cannot undo a newer one.
 */
#ifndef PRC_DOCA_MAILBOX_H
#define PRC_DOCA_MAILBOX_H

#include "../cc/prc_hook.h"
#include "prc_flows.h"

#define PRC_MAILBOX_MAGIC 0x4d435250u		/* "PRCM" read little-endian */
#define PRC_MAILBOX_VERSION 2u
#define PRC_MAILBOX_HEADER_BYTES 16u
#define PRC_MAILBOX_MAX_ENTRIES 64u
#define PRC_MAILBOX_PROCS 256u			/* processes per NIC, as the emulator's hook table */
#define PRC_MAILBOX_WEIGHT_MAX (64u * CC_WEIGHT_ONE)

enum prc_mailbox_kind {
	PRC_MAILBOX_HOOKS = 1,		/* entries of 16 bytes */
	PRC_MAILBOX_BINDINGS = 2,	/* entries of 8 bytes */
};

enum prc_mailbox_status {
	PRC_MAILBOX_OK = 0,
	PRC_MAILBOX_SHORT,		/* shorter than a header */
	PRC_MAILBOX_BAD_MAGIC,
	PRC_MAILBOX_BAD_VERSION,
	PRC_MAILBOX_BAD_LENGTH,		/* count too large, or length != header + count entries */
	PRC_MAILBOX_STALE,		/* seq not after the last message taken */
	PRC_MAILBOX_BAD_PROC,		/* a process beyond the table */
	PRC_MAILBOX_BAD_VALUE,		/* weight above the maximum, floor or cap above line, floor above cap */
	PRC_MAILBOX_BAD_KIND,
	PRC_MAILBOX_BAD_QPN,		/* beyond 24 bits */
	PRC_MAILBOX_FULL,		/* more QPs than the table binds */
};

struct prc_mailbox_state {
	cc_u32 last_seq;		/* of the last message taken; 0 before any */
	cc_u32 taken;			/* messages applied */
	cc_u32 errors;			/* messages refused */
	cc_u32 last_error;		/* enum prc_mailbox_status of the last refusal */
	struct prc_hook hooks[PRC_MAILBOX_PROCS];
	struct prc_qp_table qps;
};

CC_INLINE cc_u32 prc_mailbox_u32(const unsigned char *p)
{
	return (cc_u32)p[0] | (cc_u32)p[1] << 8 | (cc_u32)p[2] << 16 | (cc_u32)p[3] << 24;
}

CC_INLINE cc_u32 prc_mailbox_u16(const unsigned char *p)
{
	return (cc_u32)p[0] | (cc_u32)p[1] << 8;
}

CC_INLINE cc_u32 prc_mailbox_entry_bytes(cc_u32 kind)
{
	return kind == PRC_MAILBOX_HOOKS ? 16u : kind == PRC_MAILBOX_BINDINGS ? 8u : 0u;
}

CC_INLINE enum prc_mailbox_status prc_mailbox_check_hook(const unsigned char *e)
{
	cc_u32 weight = prc_mailbox_u32(e + 4), floor = prc_mailbox_u32(e + 8), cap = prc_mailbox_u32(e + 12);

	if (prc_mailbox_u32(e) >= PRC_MAILBOX_PROCS)
		return PRC_MAILBOX_BAD_PROC;
	if (weight > PRC_MAILBOX_WEIGHT_MAX || floor > CC_RATE_ONE || cap > CC_RATE_ONE || (cap && floor > cap))
		return PRC_MAILBOX_BAD_VALUE;
	return PRC_MAILBOX_OK;
}

/* A binding names a 24-bit QPN and a process in the table (or none). */
CC_INLINE enum prc_mailbox_status prc_mailbox_check_binding(const unsigned char *e)
{
	cc_u32 proc = prc_mailbox_u32(e + 4);

	if (prc_mailbox_u32(e) > PRC_QPN_MASK)
		return PRC_MAILBOX_BAD_QPN;
	if (proc >= PRC_MAILBOX_PROCS && proc != PRC_NO_PROC)
		return PRC_MAILBOX_BAD_PROC;
	return PRC_MAILBOX_OK;
}

CC_INLINE enum prc_mailbox_status prc_mailbox_check(const struct prc_mailbox_state *s,
							 const unsigned char *msg, cc_u32 len)
{
	cc_u32 kind, count, seq, size, i, added = 0;
	const unsigned char *e;
	enum prc_mailbox_status status;

	if (len < PRC_MAILBOX_HEADER_BYTES)
		return PRC_MAILBOX_SHORT;
	if (prc_mailbox_u32(msg) != PRC_MAILBOX_MAGIC)
		return PRC_MAILBOX_BAD_MAGIC;
	if (prc_mailbox_u16(msg + 4) != PRC_MAILBOX_VERSION)
		return PRC_MAILBOX_BAD_VERSION;
	kind = prc_mailbox_u16(msg + 6);
	size = prc_mailbox_entry_bytes(kind);
	if (!size)
		return PRC_MAILBOX_BAD_KIND;
	count = prc_mailbox_u16(msg + 8);
	if (count > PRC_MAILBOX_MAX_ENTRIES || prc_mailbox_u16(msg + 10) ||
	    len != PRC_MAILBOX_HEADER_BYTES + count * size)
		return PRC_MAILBOX_BAD_LENGTH;
	seq = prc_mailbox_u32(msg + 12);
	if (seq == s->last_seq || ((seq - s->last_seq) & 0x80000000u))
		return PRC_MAILBOX_STALE;
	for (i = 0; i < count; i++) {
		e = msg + PRC_MAILBOX_HEADER_BYTES + i * size;
		status = kind == PRC_MAILBOX_HOOKS ? prc_mailbox_check_hook(e) : prc_mailbox_check_binding(e);
		if (status != PRC_MAILBOX_OK)
			return status;
		/* a QP not bound yet takes a slot (one named twice counts twice: at worst a refusal near full) */
		if (kind == PRC_MAILBOX_BINDINGS && prc_mailbox_u32(e + 4) != PRC_NO_PROC &&
		    prc_qp_find(&s->qps, prc_mailbox_u32(e)) == PRC_QP_SLOTS)
			added++;
	}
	if (s->qps.bound + added > PRC_QP_MAX_BOUND)
		return PRC_MAILBOX_FULL;
	return PRC_MAILBOX_OK;
}

/* Take one message: everything it names, or (refused) nothing. */
CC_INLINE enum prc_mailbox_status prc_mailbox_apply(struct prc_mailbox_state *s, const unsigned char *msg,
							 cc_u32 len)
{
	enum prc_mailbox_status status = prc_mailbox_check(s, msg, len);
	cc_u32 kind, count, size, i, proc;
	const unsigned char *e;
	struct prc_hook *h;

	if (status != PRC_MAILBOX_OK) {
		s->errors++;
		s->last_error = status;
		return status;
	}
	kind = prc_mailbox_u16(msg + 6);
	size = prc_mailbox_entry_bytes(kind);
	count = prc_mailbox_u16(msg + 8);
	for (i = 0; i < count; i++) {
		e = msg + PRC_MAILBOX_HEADER_BYTES + i * size;
		if (kind == PRC_MAILBOX_HOOKS) {
			h = &s->hooks[prc_mailbox_u32(e)];
			h->weight = prc_mailbox_u32(e + 4);
			h->rate_floor = prc_mailbox_u32(e + 8);
			h->rate_cap = prc_mailbox_u32(e + 12);
			continue;
		}
		proc = prc_mailbox_u32(e + 4);
		if (proc == PRC_NO_PROC)
			prc_qp_unbind(&s->qps, prc_mailbox_u32(e));
		else
			prc_qp_bind(&s->qps, prc_mailbox_u32(e), proc);
	}
	s->last_seq = prc_mailbox_u32(msg + 12);
	s->taken++;
	return PRC_MAILBOX_OK;
}

#endif /* PRC_DOCA_MAILBOX_H */
