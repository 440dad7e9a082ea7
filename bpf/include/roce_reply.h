/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Replies an RNIC sends from XDP (XDP_TX) in place of a received frame:
 * swap the Ethernet and IP addresses, rewrite IPv4 and UDP for the reply's
 * length, set its BTH and compute its ICRC. The CNP (roce_cnp.h) and the
 * RC ACK/NAK (roce_ack.h) differ only in what follows the BTH.
 */
#ifndef PRC_ROCE_REPLY_H
#define PRC_ROCE_REPLY_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include "nic_defs.h"
#include "roce_defs.h"

/* IP length of a reply that carries `extra` bytes after its BTH. */
#define REPLY_IP_BYTES(extra) (sizeof(struct iphdr) + sizeof(struct udphdr) + \
			       sizeof(struct roce_bth) + (extra) + ROCE_ICRC_BYTES)
#define REPLY_DSCP 48		/* CNPs and ACKs go in the high-priority class */

static __always_inline __u16 ip_checksum(const struct iphdr *iph)
{
	const __u16 *w = (const __u16 *)iph;
	__u32 sum = 0;
	int i;

#pragma unroll
	for (i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/*
 * ICRC of a reply of ip_bytes (IPv4, no options; a constant, so the loop
 * unrolls): CRC-32 over 8 bytes of 0xff (the masked LRH), then the frame
 * from the IP header to before the ICRC with TOS, TTL, IP checksum, UDP
 * checksum and the BTH FECN/BECN byte read as 0xff. Stored little-endian.
 */
static __always_inline __u32 reply_icrc(const __u8 *l3, const __u32 ip_bytes,
					const struct crc32_table *tab)
{
	__u32 crc = 0xffffffff, i;
	__u8 b;

#pragma unroll
	for (i = 0; i < 8; i++)
		crc = tab->t[(crc ^ 0xff) & 0xff] ^ (crc >> 8);
#pragma unroll
	for (i = 0; i < ip_bytes - ROCE_ICRC_BYTES; i++) {
		b = l3[i];
		if (i == 1 || i == 8 || i == 10 || i == 11 ||		/* TOS, TTL, checksum */
		    i == 26 || i == 27 || i == 32)			/* UDP csum, FECN/BECN */
			b = 0xff;
		crc = tab->t[(crc ^ b) & 0xff] ^ (crc >> 8);
	}
	return ~crc;
}

/*
 * Rewrite the frame at data (trimmed by the caller to the reply's size,
 * bounds checked) into a reply of ip_bytes from UDP port sport, with a
 * BTH to dest_qp_word (QPN and FECN/BECN bits) at psn. Returns the first
 * byte after the BTH.
 */
static __always_inline __u8 *reply_headers(void *data, const __u32 ip_bytes, __u16 sport,
					   __u8 opcode, __u32 dest_qp_word, __u32 psn)
{
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udp = (void *)(iph + 1);
	struct roce_bth *bth = (void *)(udp + 1);
	__u8 mac[ETH_ALEN];
	__u32 addr;

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	iph->version = 4;
	iph->ihl = 5;
	iph->tos = REPLY_DSCP << 2;		/* not ECN-capable */
	iph->tot_len = bpf_htons(ip_bytes);
	iph->id = 0;
	iph->frag_off = bpf_htons(0x4000);	/* DF */
	iph->ttl = 64;
	iph->protocol = IPPROTO_UDP;
	iph->check = 0;
	iph->check = ip_checksum(iph);

	udp->source = bpf_htons(sport);
	udp->dest = bpf_htons(ROCE_V2_UDP_PORT);
	udp->len = bpf_htons(ip_bytes - sizeof(struct iphdr));
	udp->check = 0;				/* RoCEv2 relies on the ICRC */

	bth->opcode = opcode;
	bth->flags = 0;
	bth->pkey = 0xffff;
	bth->dest_qp = bpf_htonl(dest_qp_word);
	bth->psn = bpf_htonl(psn & 0x00ffffff);
	return (__u8 *)(bth + 1);
}

#endif /* PRC_ROCE_REPLY_H */
