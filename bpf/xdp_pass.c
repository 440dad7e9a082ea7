/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP pass-through. A veth drops frames that its peer bounces with XDP_TX
 * in native mode unless this end has an XDP program of its own (the
 * receiving veth counts them as RX drops), so every port that can receive
 * such frames carries this one.
 */
#include <uapi/linux/bpf.h>

int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
