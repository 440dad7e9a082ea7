/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The emulated RNIC of a host. nic_tx (TC egress) paces and ECN-marks what
 * the host sends and feeds its bytes to the CC core; nic_rx (XDP) is the
 * RC responder (takes packets in PSN order, ACKs and NAKs them), answers
 * CE marks with CNPs (the notification point), applies CNPs to the
 * sending QP's rate (the reaction point) and hands ACKs and NAKs to the
 * TX engine through qp_tx (the requester). One
 * object serves a testbed: QPNs are unique across it, so the maps are
 * shared by all host NICs.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
#include "parse.h"
#include "nic_defs.h"
#include "nic_logic.h"
#include "roce_ack.h"
#include "roce_cnp.h"
#include "skb_headers.h"
#include "vtime.h"

BPF_ARRAY(nic_config, struct nic_config, 1);
BPF_ARRAY(cc_params, struct dcqcn_params, 1);
BPF_ARRAY(qp_ctx, struct qp_ctx, NIC_MAX_QPS);
BPF_ARRAY(qp_cc, struct qp_cc, NIC_MAX_QPS);
BPF_F_TABLE("array", __u32, struct qp_tx, qp_tx, NIC_MAX_QPS, BPF_F_MMAPABLE);
BPF_F_TABLE("array", __u32, struct qp_rx, qp_rx, NIC_MAX_QPS, BPF_F_MMAPABLE);
BPF_F_TABLE("array", __u32, struct prc_hook, proc_hook, NIC_MAX_PROCS, BPF_F_MMAPABLE);
BPF_F_TABLE("array", __u32, struct nic_doorbell, doorbell, 1, BPF_F_MMAPABLE);
BPF_ARRAY(crc32, struct crc32_table, 1);

#ifdef NIC_CC_TRACE
#include "cc_trace.h"
BPF_F_TABLE("array", __u32, struct cc_trace_record, cc_trace, NIC_CC_TRACE_RECORDS, BPF_F_MMAPABLE);
BPF_F_TABLE("array", __u32, __u64, cc_trace_head, 1, BPF_F_MMAPABLE);

static __always_inline void cc_trace_send(struct cc_trace_record *rec)
{
	__u32 zero = 0, slot;
	__u64 *head, index;
	struct cc_trace_record *out;

	if (!rec->seq)				/* not filled: no event */
		return;
	head = cc_trace_head.lookup(&zero);
	if (!head)
		return;
	index = __sync_fetch_and_add(head, 1);
	slot = index % NIC_CC_TRACE_RECORDS;
	out = cc_trace.lookup(&slot);
	if (!out)
		return;
	rec->mark = 0;
	*out = *rec;
	/* the mark last: x86 keeps stores in order once the compiler does */
	__asm__ volatile("" ::: "memory");
	out->mark = index + 1;
}
#define CC_TRACE_RECORDS(n) struct cc_trace_record trace[n] = {}
#define CC_TRACE_FILL(i, ...) cc_trace_fill(&trace[i], __VA_ARGS__)
#define CC_TRACE_SEND(i) cc_trace_send(&trace[i])
#else
#define CC_TRACE_RECORDS(n)
#define CC_TRACE_FILL(i, ...)
#define CC_TRACE_SEND(i)
#endif

/* The PRC hook of the process that owns a QP, copied out: map reads must
 * happen before the QP's lock is taken (no helper calls inside it). */
static __always_inline void qp_hook(const struct qp_ctx *ctx, struct prc_hook *hook)
{
	__u32 proc = ctx->proc;
	struct prc_hook *hk = proc_hook.lookup(&proc);

	if (hk)
		*hook = *hk;
}

/* Headers a RoCEv2 packet can have before its payload: Ethernet, IPv4
 * with options, UDP, BTH, RETH. */
#define NIC_HEADER_BYTES 112

int nic_tx(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct cursor c;
	struct roce_hdrs h;
	struct udphdr *udp;
	struct iphdr *iph;
	struct nic_config *cfg;
	struct dcqcn_params *p;
	struct qp_ctx *ctx;
	struct qp_cc *cc;
	struct qp_tx *tx;
	struct prc_hook hook = {};
	__u32 zero = 0, qpn, rate, alpha;
	__u64 now, departure, cnp_at;
	__u16 old_word, new_word;
	int bytes;
	__u32 units;
	CC_TRACE_RECORDS(2);

	/* AF_PACKET senders leave all but the Ethernet header in page frags */
	skb_linear_headers(skb, NIC_HEADER_BYTES);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	cursor_init(&c, data, data_end);
	bytes = parse_roce(&c, skb->len, &h);
	if (bytes < 0 || !roce_is_data(h.bth->opcode))
		return TC_ACT_OK;
	iph = h.iph;
	udp = h.udp;
	qpn = nic_sender_qpn(bpf_ntohs(udp->source));
	if (qpn == 0 || qpn >= NIC_MAX_QPS)
		return TC_ACT_OK;

	cfg = nic_config.lookup(&zero);
	p = cc_params.lookup(&zero);
	ctx = qp_ctx.lookup(&qpn);
	cc = qp_cc.lookup(&qpn);
	tx = qp_tx.lookup(&qpn);
	if (!cfg || !p || !ctx || !cc || !tx || !(ctx->flags & QP_F_VALID))
		return TC_ACT_OK;
	qp_hook(ctx, &hook);
	now = bpf_ktime_get_ns();
	bpf_spin_lock(&cc->lock);
	cnp_at = nic_cnp_due(cc, now);
	if (cnp_at) {
		cc_on_cnp(&cc->st, p, &hook, cnp_at);
		CC_TRACE_FILL(0, cc, qpn, CC_EV_CNP, 0, cnp_at, &hook);
	}
	units = nic_tx_units(cc, bytes);
	cc_on_tx(&cc->st, p, &hook, units, now);
	CC_TRACE_FILL(1, cc, qpn, CC_EV_TX, units, now, &hook);
	rate = cc->st.common.rc;
	alpha = cc->st.algo.dcqcn.alpha;
	bpf_spin_unlock(&cc->lock);
	CC_TRACE_SEND(0);
	CC_TRACE_SEND(1);

	departure = nic_pace(tx, cfg, now, bytes, rate);
	__sync_fetch_and_add(&tx->packets, 1);
	__sync_fetch_and_add(&tx->bytes, bytes);
	tx->rate = rate;
	tx->alpha = alpha;
	if (cfg->flags & NIC_F_KERNEL_PACER)
		skb->tstamp = departure;
	udp->check = bpf_htons(vtime_stamp(departure, cfg->vtime_shift));	/* the switches' clock (vtime.h) */

	/* ECT(0) on data that is not ECN-capable yet (CE from upstream stays). */
	if ((iph->tos & IP_ECN_MASK) == 0) {
		old_word = *(__u16 *)iph;
		new_word = old_word;
		((__u8 *)&new_word)[1] |= IP_ECN_ECT0;
		bpf_l3_csum_replace(skb, sizeof(struct ethhdr) + offsetof(struct iphdr, check),
				    old_word, new_word, 2);
		bpf_skb_store_bytes(skb, sizeof(struct ethhdr), &new_word, 2, 0);
	}
	return TC_ACT_OK;
}

/* Replace the received frame at xdp by a reply of reply_bytes: 0 on
 * success (data and data_end then span the reply). */
static __always_inline int nic_reply_room(struct xdp_md *xdp, int frame_bytes, int reply_bytes,
					  void **data, void **data_end)
{
	if (bpf_xdp_adjust_tail(xdp, reply_bytes - frame_bytes))
		return -1;
	*data = (void *)(long)xdp->data;
	*data_end = (void *)(long)xdp->data_end;
	return *data + reply_bytes > *data_end ? -1 : 0;
}

int nic_rx(struct xdp_md *xdp)
{
	void *data = (void *)(long)xdp->data, *data_end = (void *)(long)xdp->data_end;
	struct cursor c;
	struct roce_hdrs h;
	struct nic_config *cfg;
	struct dcqcn_params *p;
	struct qp_ctx *ctx;
	struct qp_cc *cc;
	struct qp_tx *tx;
	struct qp_rx *rx;
	struct crc32_table *tab;
	struct nic_doorbell *bell;
	struct prc_hook hook = {};
	enum rx_reply reply;
	__u32 zero = 0, qpn, psn, remote, delay;
	__u64 now, cnp_at;
	__u8 opcode, *aeth;
	int merged = 0, bytes, ce, ackreq, frame_bytes = bpf_xdp_get_buff_len(xdp);
	int consumed;
	CC_TRACE_RECORDS(1);

	cursor_init(&c, data, data_end);
	bytes = parse_roce(&c, frame_bytes, &h);
	if (bytes < 0)
		return XDP_PASS;
	opcode = h.bth->opcode;
	qpn = bpf_ntohl(h.bth->dest_qp) & ROCE_QPN_MASK;
	psn = bpf_ntohl(h.bth->psn);
	ackreq = psn >> 31;
	psn &= ROCE_PSN_MASK;
	ce = (h.iph->tos & IP_ECN_MASK) == IP_ECN_CE;
	if (qpn == 0 || qpn >= NIC_MAX_QPS)
		return XDP_PASS;
	cfg = nic_config.lookup(&zero);
	ctx = qp_ctx.lookup(&qpn);
	bell = doorbell.lookup(&zero);
	if (!cfg || !ctx || !bell || !(ctx->flags & QP_F_VALID))
		return XDP_PASS;
	now = bpf_ktime_get_ns();
	/* what the RNIC consumes does not go up the host stack */
	consumed = (cfg->flags & NIC_F_PASS_DATA) ? XDP_PASS : XDP_DROP;

	if (opcode == ROCE_OP_CNP) {		/* reaction point */
		p = cc_params.lookup(&zero);
		cc = qp_cc.lookup(&qpn);
		tx = qp_tx.lookup(&qpn);
		if (!p || !cc || !tx)
			return XDP_PASS;
		qp_hook(ctx, &hook);
		delay = ctx->cnp_delay_ns;
		bpf_spin_lock(&cc->lock);
		cnp_at = nic_cnp_arrives(cc, now, delay, &merged);
		if (cnp_at) {
			cc_on_cnp(&cc->st, p, &hook, cnp_at);
			CC_TRACE_FILL(0, cc, qpn, CC_EV_CNP, 0, cnp_at, &hook);
		}
		bpf_spin_unlock(&cc->lock);
		CC_TRACE_SEND(0);
		__sync_fetch_and_add(&tx->cnps_received, 1);
		if (merged)
			__sync_fetch_and_add(&tx->cnps_merged, 1);
		return consumed;
	}
	if (opcode == ROCE_OP_ACK) {		/* requester */
		aeth = (__u8 *)(h.bth + 1);
		tx = qp_tx.lookup(&qpn);
		/* the AETH must lie within the IP length, before the ICRC */
		if (!tx || (void *)(aeth + AETH_BYTES) > data_end ||
		    (void *)(aeth + AETH_BYTES + ROCE_ICRC_BYTES) > data + bytes)
			return XDP_PASS;
		nic_take_ack(tx, psn, aeth[0], (aeth[1] << 16) | (aeth[2] << 8) | aeth[3], now, bell);
		return consumed;
	}
	if (!roce_is_data(opcode))
		return XDP_PASS;

	rx = qp_rx.lookup(&qpn);
	if (!rx)
		return XDP_PASS;
	reply = nic_account_rx(rx, psn, bytes, opcode, ackreq, ce, now, bell);
	remote = ctx->remote_qpn;

	/* An ACK or NAK takes the frame before a CNP does: a CE mark it
	 * displaces is answered on the QP's next CE packet. */
	if (reply != RX_NO_REPLY) {
		tab = crc32.lookup(&zero);
		if (!tab || nic_reply_room(xdp, frame_bytes, ACK_FRAME_BYTES, &data, &data_end))
			return XDP_DROP;
		build_ack(data, remote, NIC_SPORT_BASE | qpn, nic_reply_psn(rx, reply),
			  reply == RX_NAK ? AETH_NAK_PSN_SEQ : AETH_ACK, rx->messages & ROCE_PSN_MASK, tab);
		__sync_fetch_and_add(reply == RX_NAK ? &rx->naks_sent : &rx->acks_sent, 1);
		return XDP_TX;
	}

	/* notification point: at most one CNP per QP per interval */
	if (ce && (rx->cnps_sent == 0 || now - rx->last_cnp_ns >= cfg->min_time_between_cnps_ns)) {
		tab = crc32.lookup(&zero);
		if (!tab || nic_reply_room(xdp, frame_bytes, CNP_FRAME_BYTES, &data, &data_end))
			return XDP_DROP;
		build_cnp(data, remote, NIC_SPORT_BASE | qpn, tab);
		rx->last_cnp_ns = now;
		__sync_fetch_and_add(&rx->cnps_sent, 1);
		return XDP_TX;
	}
	/* an RNIC places data in memory: nothing goes up the host stack */
	return consumed;
}
