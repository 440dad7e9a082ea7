/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TC egress on switch ports: RED ECN marking (Kmin/Kmax/Pmax in bytes) on a
 * model of the port's queue drained at the port rate, and queue telemetry.
 * It runs before the port's HTB, which holds the real queue; the model is
 * what DCQCN switches mark on, checked against HTB's backlog in the tests.
 * RoCEv2 packets are timed by their virtual wire time (vtime.h), restamped
 * with their departure from the model queue.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
#include "parse.h"
#include "red.h"
#include "skb_headers.h"
#include "vtime.h"

BPF_ARRAY(port_cfg, struct port_cfg, SWITCH_MAX_IFINDEX);
BPF_ARRAY(port_queue, struct port_queue, SWITCH_MAX_IFINDEX);
BPF_F_TABLE("array", __u32, struct port_stats, port_stats, SWITCH_MAX_IFINDEX, BPF_F_MMAPABLE);

#define IP_ECN_MASK 0x03
/* Ethernet, IPv4 with the longest options, UDP, BTH: what parse_roce reads. */
#define PORT_HEADER_BYTES (14 + 60 + 8 + 12)

int switch_port(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct cursor c;
	struct roce_hdrs h;
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *udp = 0;
	struct port_cfg *cfg;
	struct port_queue *q;
	struct port_stats *st;
	__u32 port = skb->ifindex, bytes = skb->len;
	__u64 now, arrival, queued, after, p, pause, until;
	int ect = 0, marked = 0, kept;

	cfg = port_cfg.lookup(&port);
	q = port_queue.lookup(&port);
	st = port_stats.lookup(&port);
	if (!cfg || !q || !st || !(cfg->flags & PORT_F_ENABLED))
		return TC_ACT_OK;
	skb_linear_headers(skb, PORT_HEADER_BYTES);	/* forwarded skbs may hold them in frags */
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IP) && iph->version == 4)
		ect = (iph->tos & IP_ECN_MASK) != 0;
	/* Only a frame the NICs take for RoCEv2 carries a wire time. */
	cursor_init(&c, data, data_end);
	if (parse_roce(&c, skb->len, &h) >= 0)
		udp = h.udp;

	p = bpf_get_prandom_u32();		/* helper calls stay outside the lock */
	now = bpf_ktime_get_ns();
	arrival = udp ? vtime_arrival(bpf_ntohs(udp->check), now, cfg->vtime_shift) : now;
	bpf_spin_lock(&q->lock);
	queued = queue_drain(q, cfg, arrival);
	kept = queue_add(q, cfg, bytes);
	after = q->q_bytes;
	bpf_spin_unlock(&q->lock);
	if (!kept) {
		/* the emulated switch drops it, whatever the real qdisc holds */
		__sync_fetch_and_add(&st->drops, 1);
		return TC_ACT_SHOT;
	}
	if (udp)			/* before any helper that moves packet data */
		udp->check = (cfg->flags & PORT_F_FACES_HOST) ? 0 :
			bpf_htons(vtime_stamp(queue_departure(cfg, arrival, after), cfg->vtime_shift));

	pause = pause_until(cfg, after, now);
	until = st->pause_until_ns;
	if (pause > until) {
		if (until < now) {
			__sync_fetch_and_add(&st->pause_events, 1);
			until = now;
		}
		__sync_fetch_and_add(&st->paused_ns, pause - until);
		st->pause_until_ns = pause;
	}

	if (ect && p < red_probability(cfg, queued))
		marked = bpf_skb_ecn_set_ce(skb);

	__sync_fetch_and_add(&st->packets, 1);
	__sync_fetch_and_add(&st->bytes, bytes);
	if (ect)
		__sync_fetch_and_add(&st->ect_packets, 1);
	if (marked)
		__sync_fetch_and_add(&st->marked, 1);
	st->q_bytes = queued;
	if (queued > st->q_max)
		st->q_max = queued;
	st->last_ns = now;
	return TC_ACT_OK;
}
