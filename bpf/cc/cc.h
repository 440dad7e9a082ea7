/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one CC entry: the BPF programs, the host library and the DOCA PCC
 * adapter hand a QP's events to these functions and never name the
 * algorithm. DCQCN with PRC's hook is the one algorithm today; another one
 * brings its own header with the same event handler and is chosen here.
 */
#ifndef PRC_CC_H
#define PRC_CC_H

#include "dcqcn.h"

/* Per-QP state and parameters of the algorithm in use. */
typedef struct cc_qp_state cc_state_t;
typedef struct dcqcn_params cc_params_t;

CC_INLINE void cc_on_event(cc_state_t *st, const cc_params_t *p, const struct prc_hook *h,
			   cc_u32 kind, cc_u32 bytes, cc_u64 now)
{
	dcqcn_event(st, p, h, kind, bytes, now);
}

CC_INLINE void cc_on_cnp(cc_state_t *st, const cc_params_t *p, const struct prc_hook *h,
			 cc_u64 now)
{
	cc_on_event(st, p, h, CC_EV_CNP, 0, now);
}

CC_INLINE void cc_on_tx(cc_state_t *st, const cc_params_t *p, const struct prc_hook *h,
			cc_u32 bytes, cc_u64 now)
{
	cc_on_event(st, p, h, CC_EV_TX, bytes, now);
}

#endif /* PRC_CC_H */
