/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * DCQCN's reaction point: the closed forms of its increase steps and its
 * handlers, named after its events (CNP received, alpha timer, rate-increase
 * timer, byte counter, bytes sent). Its parameters and per-QP variables are
 * in dcqcn_defs.h.
 *
 * Header-only C: no BPF helpers, no floats, no allocation, no unbounded
 * loops. Rates are 20-bit fixed-point fractions of line rate (1 << 20 is
 * line rate), alpha is a 20-bit fraction, weights are 10-bit (1024 = 1.0).
 * Per-QP state: the common part and DCQCN's sub-record of struct
 * cc_qp_state (cc_state.h), 48 bytes in all, a DOCA PCC per-flow context.
 *
 * Semantics (docs/cc.md gives the full text):
 *  - alpha is updated once per elapsed dce_tcp_rtt period from the flag
 *    "a CNP arrived in this period": alpha = G/1024 * alpha + (1 - G/1024) *
 *    seen. Periods run on a fixed grid from the QP's first event.
 *  - on a CNP (at most one cut per rate_reduce_monitor_period): Rt = Rc,
 *    Rc = max(Rc * (1 - alpha / 2^(rpg_gd - 10) / w), Rc * min_dec_fac /
 *    100, min_rate) using alpha before this period's update; then T, BC,
 *    the byte accumulator and the increase timer restart.
 *  - increase events (every rpg_time_reset: T += 1; every rpg_byte_reset
 *    bytes: BC += 1) move Rc halfway to Rt after raising Rt by 0 (fast
 *    recovery), rpg_ai_rate * w (additive) or i * rpg_hai_rate * w (hyper,
 *    i <= 64), per the stage rules of docs/cc.md.
 *  - timer events between two calls are applied lazily from elapsed time,
 *    in closed form per stretch of steps whose increment is linear in T.
 *  - PRC hook: weight w scales increase steps and divides the cut; a
 *    floor bounds Rc from below, a cap bounds Rt and Rc from above. w = 1
 *    with no floor or cap is exactly DCQCN.
 */
#ifndef PRC_CC_DCQCN_H
#define PRC_CC_DCQCN_H

#include "cc_state.h"
#include "prc_hook.h"

/* One event's parameters: the hook's bounds and the increase steps the
 * weight scales. */
struct dcqcn_effective {
	struct prc_bounds hook;
	cc_u64 ai;			/* rpg_ai_rate * w */
	cc_u64 hai;			/* rpg_hai_rate * w */
};

CC_INLINE void dcqcn_effective_init(struct dcqcn_effective *eff, const struct dcqcn_params *p,
				    const struct prc_hook *h)
{
	prc_bounds_init(&eff->hook, h, p->w_min, p->w_max);
	eff->ai = ((cc_u64)p->rpg_ai_rate * eff->hook.weight) >> 10;
	eff->hai = ((cc_u64)p->rpg_hai_rate * eff->hook.weight) >> 10;
}

/*
 * Closed form of n increase steps whose increments are a0, a0 + s,
 * a0 + 2s, ...: each raises Rt by its increment (never above the ceiling),
 * then sets Rc = floor((Rt + Rc) / 2). With the gap e = Rt - Rc, a step
 * gives e' = ceil((e + a) / 2), so the deviation of e from (a - s) halves,
 * rounding up, every step. The first m steps stay below the ceiling; if
 * n > m, step m + 1 reaches it and later steps only halve the gap.
 */
CC_INLINE void cc_steps_apply(struct cc_qp_state *st, cc_u64 n, cc_u64 m, cc_u64 a0, cc_u64 s,
			      cc_u64 ceiling)
{
	cc_u64 rt = st->common.rt, capped;
	cc_s64 e = (cc_s64)st->common.rt - (cc_s64)st->common.rc, e_cap;

	/* m = 0 leaves rt and e as they are: the terms cancel modulo 2^64 */
	rt += m * a0 + s * m * (m - 1) / 2;
	e = (cc_s64)(a0 + (m - 1) * s) - (cc_s64)s + cc_ceil_shr(e - (cc_s64)a0 + 2 * (cc_s64)s, m);
	capped = cc_lt_mask(m, n);
	e_cap = cc_ceil_shr(cc_ceil_shr(e + (cc_s64)(ceiling - cc_min(rt, ceiling)), 1), n - m - 1);
	e = (cc_s64)cc_pick(capped, (cc_u64)e_cap, (cc_u64)e);
	rt = cc_pick(capped, ceiling, rt);
	st->common.rt = (cc_u32)rt;
	st->common.rc = (cc_u32)(rt - (cc_u64)e);
}

/* n steps of a constant increment a: m = steps with Rt + m*a < ceiling. */
CC_INLINE void cc_const_steps(struct cc_qp_state *st, cc_u64 n, cc_u64 a, cc_u64 ceiling)
{
	cc_u64 room = ceiling - cc_min(st->common.rt, ceiling);
	cc_u64 m;

	if (n == 0)		/* most stretches are empty at any one event */
		return;
	m = cc_min(n, (room - 1) / cc_max(a, 1));
	m = cc_pick(cc_lt_mask(0, a), m, n);	/* a = 0 never reaches the ceiling */
	m = cc_pick(cc_lt_mask(0, room), m, 0);	/* already there */
	cc_steps_apply(st, n, m, a, 0, ceiling);
}

/* n <= 64 steps of a hyper ramp a0, a0 + s, ...: m by binary search
 * (the sum grows with m), seven bits. The ramp from F to F + 63 with the
 * byte counter on is 64 steps (i = 1..64); six bits would stop at 63 and
 * take the 64th step for one that reaches the ceiling. */
CC_INLINE void cc_ramp_steps(struct cc_qp_state *st, cc_u64 n, cc_u64 a0, cc_u64 s,
			     cc_u64 ceiling)
{
	cc_u64 room = ceiling - cc_min(st->common.rt, ceiling), m = 0, c, sum;
	int bit;

	if (n == 0)
		return;
	CC_UNROLL
	for (bit = 6; bit >= 0; bit--) {
		c = m + (1ull << bit);
		sum = c * a0 + s * c * (c - 1) / 2;
		m = cc_pick(~cc_lt_mask(n, c) & cc_lt_mask(sum, room), c, m);
	}
	cc_steps_apply(st, n, m, a0, s, ceiling);
}

/* How many of the steps C = c0+1 .. c_end fall in [lo, hi], and the
 * first of them. */
CC_INLINE cc_u64 cc_stretch(cc_u64 c0, cc_u64 c_end, cc_u64 lo, cc_u64 hi, cc_u64 *first)
{
	cc_u64 last = cc_min(hi, c_end);

	*first = cc_max(lo, c0 + 1);
	return cc_pick(cc_lt_mask(last, *first), 0, last - *first + 1);
}

/*
 * k increase events of one counter C (T for the timer, BC for the byte
 * counter) running c0+1 .. c0+k while the other counter O stays fixed;
 * returns the new C, saturated. With the byte counter on, the stage rules
 * are symmetric in T and BC, so one closed form serves both counters; with
 * it off only T moves and O is ignored. The increment is piecewise linear
 * in C; each stretch is applied in closed form, in order:
 *   1. C < F: fast recovery (0), or additive if O >= F (byte counter on);
 *   2. from F: additive, once (byte counter off) or for good (on, O < F);
 *   3. the hyper ramp, i growing by one per step up to 64 (off: i = T - F
 *      from F + 1; on, O >= F: i = C - F + 1 from F up to C = O);
 *   4. then a constant hyper increment (i = 64, or O - F + 1 when on).
 * Stretches that do not apply in a mode are empty (lo > hi).
 */
CC_INLINE cc_u64 cc_increase_run(struct cc_qp_state *st, const struct dcqcn_params *p,
				 const struct dcqcn_effective *eff, cc_u64 c0, cc_u64 other, cc_u64 k)
{
	cc_u64 f = p->rpg_threshold, c_end = c0 + k, n, first, empty_lo = c_end + 1;
	cc_u64 on = cc_lt_mask(0, p->rpg_byte_reset), other_high = on & ~cc_lt_mask(other, f);
	cc_u64 ai_only = on & ~other_high;
	cc_u64 add_hi, ramp_lo, ramp_hi, hyper_i;

	n = cc_stretch(c0, c_end, 1, f - 1, &first);
	cc_const_steps(st, n, eff->ai & other_high, eff->hook.ceiling);

	add_hi = cc_pick(on, cc_pick(ai_only, c_end, f - 1), f);
	n = cc_stretch(c0, c_end, f, add_hi, &first);
	cc_const_steps(st, n, eff->ai, eff->hook.ceiling);

	ramp_lo = cc_pick(on, cc_pick(other_high, f, empty_lo), f + 1);
	ramp_hi = cc_pick(on, cc_min(other, f + CC_HAI_MAX_I - 1), f + CC_HAI_MAX_I - 1);
	n = cc_stretch(c0, c_end, ramp_lo, ramp_hi, &first);
	/* the ramp starts at i = 1 at ramp_lo */
	cc_ramp_steps(st, n, (first - ramp_lo + 1) * eff->hai, eff->hai, eff->hook.ceiling);

	hyper_i = cc_pick(on, cc_min(other - f + 1, CC_HAI_MAX_I), CC_HAI_MAX_I);
	n = cc_stretch(c0, c_end, cc_pick(ai_only, empty_lo, ramp_hi + 1), c_end, &first);
	cc_const_steps(st, n, hyper_i * eff->hai, eff->hook.ceiling);
	return cc_min(c_end, CC_COUNT_MAX);
}

/* k rate-increase timer events (T += 1 each). */
CC_INLINE void dcqcn_on_increase_timer(struct cc_qp_state *st, const struct dcqcn_params *p,
				       const struct dcqcn_effective *eff, cc_u64 k)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;

	v->t_count = (cc_u16)cc_increase_run(st, p, eff, v->t_count, v->bc_count, k);
}

/* k byte-counter events (BC += 1 each); only with the byte counter on. */
CC_INLINE void dcqcn_on_byte_counter(struct cc_qp_state *st, const struct dcqcn_params *p,
				     const struct dcqcn_effective *eff, cc_u64 k)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;

	v->bc_count = (cc_u16)cc_increase_run(st, p, eff, v->bc_count, v->t_count, k);
}

/* Alpha periods that ended at or before now: the first uses the seen flag,
 * the rest (no CNP in them) decay alpha by (G/1024)^(k-1) at once. */
CC_INLINE void dcqcn_on_alpha_timer(struct cc_qp_state *st, const struct dcqcn_params *p,
				    cc_u64 now)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;
	cc_u64 next = cc_get64(v->alpha_next_lo, v->alpha_next_hi);
	cc_u64 period = cc_max(p->dce_tcp_rtt_ns, 1), k, alpha, g = p->dce_tcp_g;

	if (now < next)
		return;
	k = (now - next) / period + 1;
	alpha = v->alpha;
	alpha = (alpha * g + ((st->common.flags & CC_F_SEEN) ? (1024 - g) * CC_ALPHA_ONE : 0) + 512) >> 10;
	if (k > 1)		/* periods without a CNP after the first */
		alpha = (alpha * cc_pow_q30((cc_u32)g, k - 1) + (1ull << 29)) >> 30;
	v->alpha = (cc_u32)alpha;
	st->common.flags &= ~CC_F_SEEN;
	CC_SET64(v->alpha_next_lo, v->alpha_next_hi, next + k * period);
}

/* Bring the state up to now: initialise, clamp to the hook's cap, apply
 * the timer events that fell due since the last call. */
CC_INLINE void dcqcn_catch_up(struct cc_qp_state *st, const struct dcqcn_params *p,
			      const struct dcqcn_effective *eff, cc_u64 now)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;
	cc_u64 next, period = cc_max(p->rpg_time_reset_ns, 1), k;

	if (!(st->common.flags & CC_F_INIT)) {
		st->common.rc = st->common.rt = (cc_u32)eff->hook.ceiling;
		v->alpha = p->initial_alpha_value << 10;
		v->byte_acc = 0;
		v->t_count = v->bc_count = 0;
		st->common.flags = CC_F_INIT;
		CC_SET64(v->alpha_next_lo, v->alpha_next_hi, now + cc_max(p->dce_tcp_rtt_ns, 1));
		CC_SET64(v->inc_next_lo, v->inc_next_hi, now + period);
		CC_SET64(v->last_cut_lo, v->last_cut_hi, now);
	}
	st->common.rt = (cc_u32)cc_min(st->common.rt, eff->hook.ceiling);
	st->common.rc = (cc_u32)cc_min(st->common.rc, eff->hook.ceiling);
	dcqcn_on_alpha_timer(st, p, now);
	next = cc_get64(v->inc_next_lo, v->inc_next_hi);
	if (now >= next) {
		k = (now - next) / period + 1;
		CC_SET64(v->inc_next_lo, v->inc_next_hi, next + k * period);
		dcqcn_on_increase_timer(st, p, eff, cc_min(k, CC_MAX_INCREASE_STEPS));
	}
}

/* A CNP: mark the alpha period; cut unless the last cut is too recent. */
CC_INLINE void dcqcn_on_cnp(struct cc_qp_state *st, const struct dcqcn_params *p,
			    const struct dcqcn_effective *eff, cc_u64 now)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;
	cc_u64 rc = st->common.rc, factor;
	cc_u64 last_cut = cc_get64(v->last_cut_lo, v->last_cut_hi);

	st->common.flags |= CC_F_SEEN;
	if ((st->common.flags & CC_F_CUT) && now - last_cut < p->rate_reduce_monitor_period_ns)
		return;
	/* alpha as it is before this period's update; w > 1 tempers the cut */
	factor = ((cc_u64)v->alpha >> (p->rpg_gd - 10)) * CC_WEIGHT_ONE / eff->hook.weight;
	factor = cc_min(factor, CC_RATE_ONE);
	st->common.rt = (cc_u32)rc;
	rc = cc_max(rc - ((rc * factor) >> 20), cc_max(rc * p->rpg_min_dec_fac / 100, p->rpg_min_rate));
	st->common.rc = (cc_u32)rc;
	v->t_count = v->bc_count = 0;
	v->byte_acc = 0;
	CC_SET64(v->inc_next_lo, v->inc_next_hi, now + cc_max(p->rpg_time_reset_ns, 1));
	CC_SET64(v->last_cut_lo, v->last_cut_hi, now);
	st->common.flags |= CC_F_CUT;
}

/* Bytes sent: every rpg_byte_reset of them is a BC event, however many
 * thresholds one call's bytes cross; the remainder waits in the
 * accumulator. */
CC_INLINE void dcqcn_on_tx(struct cc_qp_state *st, const struct dcqcn_params *p,
			   const struct dcqcn_effective *eff, cc_u32 bytes)
{
	struct dcqcn_vars *v = &st->algo.dcqcn;
	cc_u64 acc, k, reset = p->rpg_byte_reset;

	if (!reset)
		return;
	acc = cc_min((cc_u64)v->byte_acc + bytes, 0xffffffffull);
	if (acc < reset) {		/* most packets complete no BC event */
		v->byte_acc = (cc_u32)acc;
		return;
	}
	k = acc / reset;
	v->byte_acc = (cc_u32)(acc - k * reset);
	dcqcn_on_byte_counter(st, p, eff, cc_min(k, CC_MAX_INCREASE_STEPS));
}

/* One event: timers up to now, then the event itself, then the hook's
 * bounds. */
CC_INLINE void dcqcn_event(struct cc_qp_state *st, const struct dcqcn_params *p,
			   const struct prc_hook *h, cc_u32 kind, cc_u32 bytes, cc_u64 now)
{
	struct dcqcn_effective eff;

	dcqcn_effective_init(&eff, p, h);
	dcqcn_catch_up(st, p, &eff, now);
	if (kind == CC_EV_CNP)
		dcqcn_on_cnp(st, p, &eff, now);
	else if (kind == CC_EV_TX)
		dcqcn_on_tx(st, p, &eff, bytes);
	prc_bound_rates(&st->common.rc, &st->common.rt, &eff.hook);
}

#endif /* PRC_CC_DCQCN_H */
