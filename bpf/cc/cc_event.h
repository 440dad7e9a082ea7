/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* One CC event as the test program and the host library take it. */
#ifndef PRC_CC_EVENT_H
#define PRC_CC_EVENT_H

#include "cc.h"

struct cc_event {
	cc_u32 kind;			/* enum cc_event_kind */
	cc_u32 bytes;			/* CC_EV_TX */
	cc_u64 now_ns;
	struct prc_hook hook;
};

CC_INLINE void cc_apply_event(struct cc_qp_state *st, const struct dcqcn_params *p,
			      const struct cc_event *ev)
{
	cc_on_event(st, p, &ev->hook, ev->kind, ev->bytes, ev->now_ns);
}

#endif /* PRC_CC_EVENT_H */
