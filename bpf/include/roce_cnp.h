/* SPDX-License-Identifier: GPL-2.0 */
/* The CNP a notification point sends for a CE-marked frame, built in place
 * of that frame (roce_reply.h): BECN set, PSN 0, 16 reserved bytes. */
#ifndef PRC_ROCE_CNP_H
#define PRC_ROCE_CNP_H

#include "roce_reply.h"

#define ROCE_OP_CNP 0x81
#define CNP_PAD_BYTES 16
#define CNP_IP_BYTES REPLY_IP_BYTES(CNP_PAD_BYTES)
#define CNP_FRAME_BYTES (sizeof(struct ethhdr) + CNP_IP_BYTES)
#define CNP_BECN 0x40		/* in the byte after the P_Key */

static __always_inline void build_cnp(void *data, __u32 dest_qpn, __u16 sport,
				      const struct crc32_table *tab)
{
	__u8 *pad = reply_headers(data, CNP_IP_BYTES, sport, ROCE_OP_CNP,
				  (CNP_BECN << 24) | (dest_qpn & ROCE_QPN_MASK), 0);
	__u32 icrc;
	int i;

#pragma unroll
	for (i = 0; i < CNP_PAD_BYTES; i++)
		pad[i] = 0;
	icrc = reply_icrc((const __u8 *)data + sizeof(struct ethhdr), CNP_IP_BYTES, tab);
	__builtin_memcpy(pad + CNP_PAD_BYTES, &icrc, sizeof(icrc));	/* little-endian */
}

#endif /* PRC_ROCE_CNP_H */
