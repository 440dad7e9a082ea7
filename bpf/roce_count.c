/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP: count RoCEv2 packets and bytes per destination QP; pass every
 * frame, RoCE or not, unchanged.
 */
#include <uapi/linux/bpf.h>
#include "parse.h"

#ifndef MAX_QPS
#define MAX_QPS 16384
#endif

BPF_HASH(qp_counters, __u32, struct qp_counters, MAX_QPS);

int roce_count(struct xdp_md *ctx)
{
	struct cursor c;
	struct roce_hdrs h;
	struct qp_counters zero = {}, *cnt;
	__u32 qpn;
	int bytes;

	cursor_init(&c, (void *)(long)ctx->data, (void *)(long)ctx->data_end);
	/* The whole frame, not just the linear part, for multi-buffer XDP. */
	bytes = parse_roce(&c, bpf_xdp_get_buff_len(ctx), &h);
	if (bytes < 0)
		return XDP_PASS;

	qpn = bpf_ntohl(h.bth->dest_qp) & ROCE_QPN_MASK;
	cnt = qp_counters.lookup_or_try_init(&qpn, &zero);
	if (!cnt)
		return XDP_PASS;	/* map full: counting is best effort */
	__sync_fetch_and_add(&cnt->packets, 1);
	__sync_fetch_and_add(&cnt->bytes, bytes);
	return XDP_PASS;
}
