/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The RC responder's ACK and NAK (opcode 0x11, BTH + AETH), built in place
 * of the data frame that prompts them (roce_reply.h). The AETH is a
 * syndrome byte and the 24-bit MSN: an ACK's syndrome has 000 in its top
 * bits (the low five, a credit count, are all ones: no credits); a NAK
 * has 011 and the reason, 0 for a PSN sequence error. An ACK's PSN is the
 * last one taken; a NAK's is the one expected (resend from there).
 */
#ifndef PRC_ROCE_ACK_H
#define PRC_ROCE_ACK_H

#include "roce_reply.h"

#define ROCE_OP_ACK 0x11
#define AETH_BYTES 4
#define AETH_KIND_MASK 0xe0
#define AETH_ACK 0x1f			/* ACK, no credit count */
#define AETH_NAK_PSN_SEQ 0x60		/* NAK: PSN sequence error */
#define ACK_IP_BYTES REPLY_IP_BYTES(AETH_BYTES)
#define ACK_FRAME_BYTES (sizeof(struct ethhdr) + ACK_IP_BYTES)

static __always_inline void build_ack(void *data, __u32 dest_qpn, __u16 sport, __u32 psn,
				      __u8 syndrome, __u32 msn, const struct crc32_table *tab)
{
	__u8 *aeth = reply_headers(data, ACK_IP_BYTES, sport, ROCE_OP_ACK,
				   dest_qpn & ROCE_QPN_MASK, psn);
	__u32 icrc;

	aeth[0] = syndrome;
	aeth[1] = msn >> 16;
	aeth[2] = msn >> 8;
	aeth[3] = msn;
	icrc = reply_icrc((const __u8 *)data + sizeof(struct ethhdr), ACK_IP_BYTES, tab);
	__builtin_memcpy(aeth + AETH_BYTES, &icrc, sizeof(icrc));	/* little-endian */
}

#endif /* PRC_ROCE_ACK_H */
