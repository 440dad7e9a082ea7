/* SPDX-License-Identifier: GPL-2.0 */
/* TC pass-through: the empty program benchmarks measure against. */
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>

int tc_pass(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}
