/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test harness for the CC core in BPF: the frame carries one struct
 * cc_event, applied to the state in cc_state[0] with the parameters in
 * cc_params[0]. Run with BPF_PROG_TEST_RUN; always XDP_PASS.
 *
 * -DCC_TEST_FROM_TEMPLATE (benchmarks): start every run from the state in
 * cc_state[1], so that repeated runs of one frame all do the same work.
 */
#include <uapi/linux/bpf.h>
#include "cc/cc_event.h"

BPF_ARRAY(cc_params, struct dcqcn_params, 1);
BPF_ARRAY(cc_state, struct cc_qp_state, 2);

int cc_test(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct cc_event ev;
	struct dcqcn_params *p;
	struct cc_qp_state *st;
	__u32 zero = 0;

	if (data + sizeof(ev) > data_end)
		return XDP_PASS;
	__builtin_memcpy(&ev, data, sizeof(ev));
	p = cc_params.lookup(&zero);
	st = cc_state.lookup(&zero);
	if (!p || !st)
		return XDP_PASS;
#ifdef CC_TEST_FROM_TEMPLATE
	{
		__u32 one = 1;
		struct cc_qp_state *tpl = cc_state.lookup(&one);

		if (!tpl)
			return XDP_PASS;
		__builtin_memcpy(st, tpl, sizeof(*st));
	}
#endif
	cc_apply_event(st, p, &ev);
	return XDP_PASS;
}
