/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The PRC mailbox: how the host's controller hands per-process hooks to
 * the DOCA PCC device code (doca_pcc_dev_user_mailbox_handle calls
 * prc_mailbox_apply on each request). A message is versioned and checked
 * whole before anything changes: a malformed or stale one leaves every
 * hook as it was and counts an error. Little-endian, read byte by byte
 * (the request buffer's alignment is not ours to assume):
 *
 *   header  u32 magic "PRCM" | u16 version | u16 count | u32 seq
 *   entry   u32 proc | u32 weight | u32 rate_floor | u32 rate_cap   (x count)
 *
 * seq must move forward (modulo 2^32) from the last message taken, so a
 * replayed or reordered message cannot undo a newer one.
 */
#ifndef PRC_DOCA_MAILBOX_H
#define PRC_DOCA_MAILBOX_H

#include "../cc/prc_hook.h"

#define PRC_MAILBOX_MAGIC 0x4d435250u		/* "PRCM" read little-endian */
#define PRC_MAILBOX_VERSION 1u
#define PRC_MAILBOX_HEADER_BYTES 12u
#define PRC_MAILBOX_ENTRY_BYTES 16u
#define PRC_MAILBOX_MAX_ENTRIES 64u
#define PRC_MAILBOX_PROCS 256u			/* processes per NIC, as the emulator's hook table */
#define PRC_MAILBOX_WEIGHT_MAX (64u * CC_WEIGHT_ONE)

enum prc_mailbox_status {
	PRC_MAILBOX_OK = 0,
	PRC_MAILBOX_SHORT,		/* shorter than a header */
	PRC_MAILBOX_BAD_MAGIC,
	PRC_MAILBOX_BAD_VERSION,
	PRC_MAILBOX_BAD_LENGTH,		/* count too large, or length != header + count entries */
	PRC_MAILBOX_STALE,		/* seq not after the last message taken */
	PRC_MAILBOX_BAD_PROC,		/* a process beyond the table */
	PRC_MAILBOX_BAD_VALUE,		/* weight above the maximum, floor or cap above line, floor above cap */
};

struct prc_mailbox_state {
	cc_u32 last_seq;		/* of the last message taken; 0 before any */
	cc_u32 taken;			/* messages applied */
	cc_u32 errors;			/* messages refused */
	cc_u32 last_error;		/* enum prc_mailbox_status of the last refusal */
	struct prc_hook hooks[PRC_MAILBOX_PROCS];
};

CC_INLINE cc_u32 prc_mailbox_u32(const unsigned char *p)
{
	return (cc_u32)p[0] | (cc_u32)p[1] << 8 | (cc_u32)p[2] << 16 | (cc_u32)p[3] << 24;
}

CC_INLINE cc_u32 prc_mailbox_u16(const unsigned char *p)
{
	return (cc_u32)p[0] | (cc_u32)p[1] << 8;
}

CC_INLINE enum prc_mailbox_status prc_mailbox_check(const struct prc_mailbox_state *s,
							 const unsigned char *msg, cc_u32 len)
{
	cc_u32 count, seq, i;
	const unsigned char *e;

	if (len < PRC_MAILBOX_HEADER_BYTES)
		return PRC_MAILBOX_SHORT;
	if (prc_mailbox_u32(msg) != PRC_MAILBOX_MAGIC)
		return PRC_MAILBOX_BAD_MAGIC;
	if (prc_mailbox_u16(msg + 4) != PRC_MAILBOX_VERSION)
		return PRC_MAILBOX_BAD_VERSION;
	count = prc_mailbox_u16(msg + 6);
	if (count > PRC_MAILBOX_MAX_ENTRIES || len != PRC_MAILBOX_HEADER_BYTES + count * PRC_MAILBOX_ENTRY_BYTES)
		return PRC_MAILBOX_BAD_LENGTH;
	seq = prc_mailbox_u32(msg + 8);
	if (seq == s->last_seq || ((seq - s->last_seq) & 0x80000000u))
		return PRC_MAILBOX_STALE;
	for (i = 0; i < count; i++) {
		e = msg + PRC_MAILBOX_HEADER_BYTES + i * PRC_MAILBOX_ENTRY_BYTES;
		cc_u32 weight = prc_mailbox_u32(e + 4), floor = prc_mailbox_u32(e + 8), cap = prc_mailbox_u32(e + 12);

		if (prc_mailbox_u32(e) >= PRC_MAILBOX_PROCS)
			return PRC_MAILBOX_BAD_PROC;
		if (weight > PRC_MAILBOX_WEIGHT_MAX || floor > CC_RATE_ONE || cap > CC_RATE_ONE || (cap && floor > cap))
			return PRC_MAILBOX_BAD_VALUE;
	}
	return PRC_MAILBOX_OK;
}

/* Take one message: every hook it names, or (refused) none. */
CC_INLINE enum prc_mailbox_status prc_mailbox_apply(struct prc_mailbox_state *s, const unsigned char *msg,
							 cc_u32 len)
{
	enum prc_mailbox_status status = prc_mailbox_check(s, msg, len);
	cc_u32 count, i;
	const unsigned char *e;

	if (status != PRC_MAILBOX_OK) {
		s->errors++;
		s->last_error = status;
		return status;
	}
	count = prc_mailbox_u16(msg + 6);
	for (i = 0; i < count; i++) {
		e = msg + PRC_MAILBOX_HEADER_BYTES + i * PRC_MAILBOX_ENTRY_BYTES;
		struct prc_hook *h = &s->hooks[prc_mailbox_u32(e)];

		h->weight = prc_mailbox_u32(e + 4);
		h->rate_floor = prc_mailbox_u32(e + 8);
		h->rate_cap = prc_mailbox_u32(e + 12);
	}
	s->last_seq = prc_mailbox_u32(msg + 8);
	s->taken++;
	return PRC_MAILBOX_OK;
}

#endif /* PRC_DOCA_MAILBOX_H */
