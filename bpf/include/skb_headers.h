/* SPDX-License-Identifier: GPL-2.0 */
/* TC programs read headers directly; skbs from AF_PACKET senders and
 * forwarded skbs may hold all but the first bytes in page frags. */
#ifndef PRC_SKB_HEADERS_H
#define PRC_SKB_HEADERS_H

#include <uapi/linux/bpf.h>

/* Make the first `bytes` of the packet (or all of a shorter one) linear
 * when they are not; packet pointers must be reloaded afterwards. */
static __always_inline void skb_linear_headers(struct __sk_buff *skb, __u32 bytes)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;

	if (data + bytes > data_end && skb->len > data_end - data)
		bpf_skb_pull_data(skb, skb->len < bytes ? skb->len : bytes);
}

#endif /* PRC_SKB_HEADERS_H */
