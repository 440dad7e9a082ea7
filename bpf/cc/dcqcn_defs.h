/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* DCQCN's parameters (firmware names) and its per-QP variables. */
#ifndef PRC_CC_DCQCN_DEFS_H
#define PRC_CC_DCQCN_DEFS_H

#include "cc_types.h"

#define CC_HAI_MAX_I 64			/* hyper-increase multiplier cap */
#define CC_COUNT_MAX 0xffffu		/* T and BC saturate here */
/* Beyond this many increase steps the state is at its fixed point (Rt has
 * reached the ceiling with increments >= 1, and the gap has halved away). */
#define CC_MAX_INCREASE_STEPS (1u << 21)

/* DCQCN's bits in cc_common.flags, above CC_F_INIT (cc_state.h) */
#define CC_F_SEEN 2u			/* a CNP arrived in this alpha period */
#define CC_F_CUT 4u			/* a cut happened (monitor period applies) */

/* Firmware names (mlx5 / DOCA); rates pre-scaled to fractions of line rate. */
struct dcqcn_params {
	cc_u32 rpg_time_reset_ns;	/* increase timer period */
	cc_u32 rpg_byte_reset;		/* bytes per BC event; 0 disables */
	cc_u32 rpg_threshold;		/* F, 1..31 */
	cc_u32 rpg_ai_rate;		/* additive step, Q20 of line rate */
	cc_u32 rpg_hai_rate;		/* hyper step, Q20 of line rate */
	cc_u32 rpg_gd;			/* cut = alpha / 2^(rpg_gd - 10), 10..20 */
	cc_u32 rpg_min_dec_fac;		/* percent: one cut keeps at least this */
	cc_u32 rpg_min_rate;		/* Q20 of line rate */
	cc_u32 dce_tcp_g;		/* G: alpha keeps G/1024 per period */
	cc_u32 dce_tcp_rtt_ns;		/* alpha period */
	cc_u32 rate_reduce_monitor_period_ns;
	cc_u32 initial_alpha_value;	/* 10-bit: 1023 = 1023/1024 */
	cc_u32 w_min;			/* weight bounds, 10-bit fixed point */
	cc_u32 w_max;
};

/* DCQCN's own per-QP variables: the sub-record of struct cc_qp_state. */
struct dcqcn_vars {
	cc_u32 alpha;			/* Q20 */
	cc_u32 byte_acc;		/* bytes towards the next BC event */
	cc_u32 alpha_next_lo, alpha_next_hi;	/* end of this alpha period */
	cc_u32 inc_next_lo, inc_next_hi;	/* next increase timer event */
	cc_u32 last_cut_lo, last_cut_hi;
	cc_u16 t_count;			/* T: timer events since the last cut */
	cc_u16 bc_count;		/* BC: byte events since the last cut */
};

#endif /* PRC_CC_DCQCN_DEFS_H */
