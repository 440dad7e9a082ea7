/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bounds-checked header parsing for RoCEv2 over IPv4.
 *
 * Each helper takes a cursor, checks that the whole header lies before
 * the end of the linear data (the verifier rejects any access it cannot
 * prove in bounds), returns a pointer to it through @out and advances the
 * cursor. Return value: 0 on success, < 0 when the frame is too short or
 * the header is not what the caller asked for.
 */
#ifndef PRC_PARSE_H
#define PRC_PARSE_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include "roce_defs.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

struct cursor {
	void *pos;
	void *end;
};

static __always_inline void cursor_init(struct cursor *c, void *data, void *data_end)
{
	c->pos = data;
	c->end = data_end;
}

static __always_inline int parse_ethhdr(struct cursor *c, struct ethhdr **out)
{
	struct ethhdr *eth = c->pos;

	if ((void *)(eth + 1) > c->end)
		return -1;
	c->pos = eth + 1;
	*out = eth;
	return 0;
}

/*
 * An unfragmented IPv4 header with a sane IHL. Options are skipped (the
 * variable length is why the bound is checked on the advanced cursor).
 */
static __always_inline int parse_iphdr(struct cursor *c, struct iphdr **out)
{
	struct iphdr *iph = c->pos;
	__u32 hdr_bytes;

	if ((void *)(iph + 1) > c->end)
		return -1;
	if (iph->version != 4 || iph->ihl < 5)
		return -1;
	/* MF set or a non-zero offset: a fragment has no complete UDP/BTH. */
	if (iph->frag_off & bpf_htons(0x3fff))
		return -1;
	hdr_bytes = iph->ihl * 4;
	if (c->pos + hdr_bytes > c->end)
		return -1;
	c->pos += hdr_bytes;
	*out = iph;
	return 0;
}

static __always_inline int parse_udphdr(struct cursor *c, struct udphdr **out)
{
	struct udphdr *udp = c->pos;

	if ((void *)(udp + 1) > c->end)
		return -1;
	c->pos = udp + 1;
	*out = udp;
	return 0;
}

static __always_inline int parse_bth(struct cursor *c, struct roce_bth **out)
{
	struct roce_bth *bth = c->pos;

	if ((void *)(bth + 1) > c->end)
		return -1;
	c->pos = bth + 1;
	*out = bth;
	return 0;
}

/* The headers of a RoCEv2 frame, as parse_roce found them. */
struct roce_hdrs {
	struct iphdr *iph;
	struct udphdr *udp;
	struct roce_bth *bth;
};

/*
 * What every program here takes for a RoCEv2 frame (NIC and switch agree):
 * parse Ethernet / IPv4 / UDP dport 4791 / BTH and check that the lengths
 * the headers claim are consistent with each other and with the frame:
 * the IP total length fits in the frame (@frame_bytes may exceed the
 * linear data for multi-buffer XDP), the UDP length equals the IP payload
 * length, and the UDP payload holds at least a BTH and an ICRC.
 * On success returns the L3 length plus the Ethernet header (the bytes the
 * packet occupies, trailer padding excluded) and fills @h; else < 0.
 */
static __always_inline int parse_roce(struct cursor *c, __u32 frame_bytes,
				      struct roce_hdrs *h)
{
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *udp;
	__u32 ip_bytes, udp_bytes;

	if (parse_ethhdr(c, &eth) < 0 || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	if (parse_iphdr(c, &iph) < 0 || iph->protocol != IPPROTO_UDP)
		return -1;
	if (parse_udphdr(c, &udp) < 0 || udp->dest != bpf_htons(ROCE_V2_UDP_PORT))
		return -1;
	if (parse_bth(c, &h->bth) < 0)
		return -1;

	ip_bytes = bpf_ntohs(iph->tot_len);
	udp_bytes = bpf_ntohs(udp->len);
	if (sizeof(struct ethhdr) + ip_bytes > frame_bytes)
		return -1;
	if (udp_bytes != ip_bytes - iph->ihl * 4)
		return -1;
	if (udp_bytes < sizeof(struct udphdr) + sizeof(struct roce_bth) + ROCE_ICRC_BYTES)
		return -1;
	h->iph = iph;
	h->udp = udp;
	return sizeof(struct ethhdr) + ip_bytes;
}

#endif /* PRC_PARSE_H */
