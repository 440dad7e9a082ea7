/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PRC's per-process hook, independent of the CC algorithm: what the control
 * plane writes for a process (all of its QPs) and the bounds it sets on an
 * event. The algorithm decides how the weight scales its own steps; the
 * floor and the cap hold after every event. Weight 1 with no floor or cap
 * leaves the algorithm exactly as it is.
 */
#ifndef PRC_CC_PRC_HOOK_H
#define PRC_CC_PRC_HOOK_H

#include "cc_math.h"

/* Written by the PRC control plane, per process (all of its QPs). */
struct prc_hook {
	cc_u32 weight;			/* 10-bit fixed point; 0 means 1.0 */
	cc_u32 rate_floor;		/* Q20 of line rate; 0: none */
	cc_u32 rate_cap;		/* Q20 of line rate; 0: none */
	cc_u32 reserved;
};

struct prc_bounds {			/* one event's view of a hook */
	cc_u64 ceiling;			/* min(line rate, cap) */
	cc_u64 floor;			/* min(floor, ceiling) */
	cc_u64 weight;			/* clamped to [w_min, w_max], at least 1 */
};

CC_INLINE void prc_bounds_init(struct prc_bounds *b, const struct prc_hook *h, cc_u32 w_min,
			       cc_u32 w_max)
{
	cc_u64 w = cc_pick(cc_lt_mask(0, h->weight), h->weight, CC_WEIGHT_ONE);
	cc_u64 cap = cc_pick(cc_lt_mask(0, h->rate_cap), h->rate_cap, CC_RATE_ONE);

	b->weight = cc_max(cc_max(cc_min(w, w_max), w_min), 1);	/* cuts divide by w */
	b->ceiling = cc_min(cap, CC_RATE_ONE);
	b->floor = cc_min(h->rate_floor, b->ceiling);
}

/* After every event: floor <= Rc <= ceiling, and Rt never below Rc. */
CC_INLINE void prc_bound_rates(cc_u32 *rc, cc_u32 *rt, const struct prc_bounds *b)
{
	cc_u64 r = cc_min(cc_max(*rc, b->floor), b->ceiling);

	*rc = (cc_u32)r;
	*rt = (cc_u32)cc_max(*rt, r);
}

#endif /* PRC_CC_PRC_HOOK_H */
