/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Turn a received RoCEv2 data frame into the CNP that answers it, in place
 * (for XDP_TX): swap the Ethernet and IP addresses, rewrite IP and UDP for
 * a 16-byte CNP, set its BTH and compute the ICRC.
 */
#ifndef PRC_ROCE_CNP_H
#define PRC_ROCE_CNP_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include "nic_defs.h"
#include "roce_defs.h"

#define CNP_DSCP 48
#define CNP_PAD_BYTES 16
#define CNP_IP_BYTES (sizeof(struct iphdr) + sizeof(struct udphdr) + \
		      sizeof(struct roce_bth) + CNP_PAD_BYTES + ROCE_ICRC_BYTES)
#define CNP_FRAME_BYTES (sizeof(struct ethhdr) + CNP_IP_BYTES)
#define CNP_BECN 0x40		/* in the byte after the P_Key */

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
 * ICRC of a CNP frame (IPv4, no options): CRC-32 over 8 bytes of 0xff (the
 * masked LRH), then the frame from the IP header to before the ICRC with
 * TOS, TTL, IP checksum, UDP checksum and the BTH FECN/BECN byte read as
 * 0xff. Stored little-endian.
 */
static __always_inline __u32 cnp_icrc(const __u8 *l3, const struct crc32_table *tab)
{
	__u32 crc = 0xffffffff, i;
	__u8 b;

#pragma unroll
	for (i = 0; i < 8; i++)
		crc = tab->t[(crc ^ 0xff) & 0xff] ^ (crc >> 8);
#pragma unroll
	for (i = 0; i < CNP_IP_BYTES - ROCE_ICRC_BYTES; i++) {
		b = l3[i];
		if (i == 1 || i == 8 || i == 10 || i == 11 ||		/* TOS, TTL, checksum */
		    i == 26 || i == 27 || i == 32)			/* UDP csum, FECN/BECN */
			b = 0xff;
		crc = tab->t[(crc ^ b) & 0xff] ^ (crc >> 8);
	}
	return ~crc;
}

/*
 * Rewrite the frame at [data, data + CNP_FRAME_BYTES) (the caller has
 * already trimmed it to that size and checked the bounds) into a CNP to
 * dest_qpn, sourced from UDP port sport.
 */
static __always_inline void build_cnp(void *data, __u32 dest_qpn, __u16 sport,
				      const struct crc32_table *tab)
{
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udp = (void *)(iph + 1);
	struct roce_bth *bth = (void *)(udp + 1);
	__u8 *pad = (void *)(bth + 1);
	__u8 mac[ETH_ALEN];
	__u32 addr, icrc;
	int i;

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	iph->version = 4;
	iph->ihl = 5;
	iph->tos = CNP_DSCP << 2;		/* not ECN-capable */
	iph->tot_len = bpf_htons(CNP_IP_BYTES);
	iph->id = 0;
	iph->frag_off = bpf_htons(0x4000);	/* DF */
	iph->ttl = 64;
	iph->protocol = IPPROTO_UDP;
	iph->check = 0;
	iph->check = ip_checksum(iph);

	udp->source = bpf_htons(sport);
	udp->dest = bpf_htons(ROCE_V2_UDP_PORT);
	udp->len = bpf_htons(CNP_IP_BYTES - sizeof(struct iphdr));
	udp->check = 0;				/* RoCEv2 relies on the ICRC */

	bth->opcode = ROCE_OP_CNP;
	bth->flags = 0;
	bth->pkey = 0xffff;
	bth->dest_qp = bpf_htonl((CNP_BECN << 24) | (dest_qpn & ROCE_QPN_MASK));
	bth->psn = 0;
#pragma unroll
	for (i = 0; i < CNP_PAD_BYTES; i++)
		pad[i] = 0;

	icrc = cnp_icrc((const __u8 *)iph, tab);
	__builtin_memcpy(pad + CNP_PAD_BYTES, &icrc, sizeof(icrc));	/* little-endian */
}

#endif /* PRC_ROCE_CNP_H */
