/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Fixed-point units and branch-free integer arithmetic of the CC core.
 * Rates are 20-bit fractions of line rate, alpha a 20-bit fraction,
 * weights 10-bit. The BPF verifier walks every combination of branches,
 * so selects are masks (see CC_OPAQUE) and powers square-and-multiply.
 */
#ifndef PRC_CC_MATH_H
#define PRC_CC_MATH_H

#include "cc_types.h"

#define CC_RATE_ONE (1u << 20)		/* line rate */
#define CC_ALPHA_ONE (1u << 20)		/* alpha = 1.0 */
#define CC_WEIGHT_ONE 1024u		/* weight = 1.0 */

CC_INLINE cc_u64 cc_get64(cc_u32 lo, cc_u32 hi)
{
	return ((cc_u64)hi << 32) | lo;
}

#define CC_SET64(lo, hi, v) do { cc_u64 v_ = (v); (lo) = (cc_u32)v_; (hi) = (cc_u32)(v_ >> 32); } while (0)

/*
 * Branch-free arithmetic (see CC_OPAQUE): every operand below 2^63, which
 * holds for rates, counts, times in ns and their differences here.
 */
CC_INLINE cc_u64 cc_lt_mask(cc_u64 a, cc_u64 b)	/* all ones if a < b, else 0 */
{
	cc_u64 m = (cc_u64)((cc_s64)(a - b) >> 63);

	CC_OPAQUE(m);
	return m;
}

CC_INLINE cc_u64 cc_pick(cc_u64 mask, cc_u64 if_set, cc_u64 if_clear)
{
	return if_clear ^ ((if_set ^ if_clear) & mask);
}

CC_INLINE cc_u64 cc_min(cc_u64 a, cc_u64 b) { return cc_pick(cc_lt_mask(a, b), a, b); }
CC_INLINE cc_u64 cc_max(cc_u64 a, cc_u64 b) { return cc_pick(cc_lt_mask(a, b), b, a); }

/* ceil(d / 2^n) for signed d, |d| < 2^62: -floor(-d / 2^n), and an
 * arithmetic shift floors for either sign. */
CC_INLINE cc_s64 cc_ceil_shr(cc_s64 d, cc_u64 n)
{
	return -((-d) >> cc_min(n, 62));
}

/* (G/1024)^e in Q30 by square-and-multiply, e clamped to 16 bits: even
 * (1023/1024)^65535 is below 2^-31, so larger exponents give 0 anyway. */
CC_INLINE cc_u64 cc_pow_q30(cc_u32 g, cc_u64 e)
{
	cc_u64 r = 1ull << 30, base = (cc_u64)g << 20;
	int bit;

	e = cc_min(e, 0xffff);
	for (bit = 0; bit < 16; bit++) {	/* bounded; ends with the exponent's bits */
		if (!e)
			break;
		if (e & 1)
			r = (r * base + (1ull << 29)) >> 30;
		base = (base * base + (1ull << 29)) >> 30;
		e >>= 1;
	}
	return r;
}

#endif /* PRC_CC_MATH_H */
