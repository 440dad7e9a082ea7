/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The per-QP CC record: a part every algorithm has (the rates the pacer
 * reads, the flags) and one sub-record per algorithm, as the HPCC
 * simulator keeps its per-QP record. 48 bytes of 4-byte-aligned words: a
 * DOCA PCC per-flow context (uint32 data[12]); 64-bit times are halves.
 */
#ifndef PRC_CC_STATE_H
#define PRC_CC_STATE_H

#include "dcqcn_defs.h"

#define CC_F_INIT 1u			/* state initialised; algorithms use the bits above */

struct cc_common {
	cc_u32 rc;			/* current rate, Q20 of line rate */
	cc_u32 rt;			/* target rate, Q20 */
	cc_u32 flags;
};

struct cc_qp_state {
	struct cc_common common;
	union {
		struct dcqcn_vars dcqcn;
		cc_u32 words[9];	/* the room an algorithm has */
	} algo;
};

_Static_assert(sizeof(struct cc_qp_state) == 48, "a DOCA PCC per-flow context holds 48 bytes");

#endif /* PRC_CC_STATE_H */
