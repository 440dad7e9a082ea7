/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Fixed-width types and inlining for the congestion-control core, which is
 * compiled three ways: into BPF programs (bcc/clang, target bpf), into a
 * host shared library (gcc), and into the DOCA PCC device code. It uses no
 * kernel or libc headers beyond stdint.h on the host.
 */
#ifndef PRC_CC_TYPES_H
#define PRC_CC_TYPES_H

/* bcc's front end compiles with __KERNEL__ (and not yet for target bpf). */
#if defined(__KERNEL__) || defined(__bpf__) || defined(__BPF__)
#include <linux/types.h>
typedef __u16 cc_u16;
typedef __u32 cc_u32;
typedef __u64 cc_u64;
typedef __s64 cc_s64;
#else
#include <stdint.h>
typedef uint16_t cc_u16;
typedef uint32_t cc_u32;
typedef uint64_t cc_u64;
typedef int64_t cc_s64;
#endif

/* bcc loads only the entry function's section: everything must inline. */
#define CC_INLINE static inline __attribute__((always_inline))

/*
 * Hide a value's origin from the optimiser: clang would turn mask
 * arithmetic back into selects, which the BPF backend lowers to branches,
 * and every branch doubles the paths the verifier walks.
 */
#define CC_OPAQUE(x) __asm__ volatile("" : "+r"(x))

/* Fixed-count loops: unrolled for the BPF verifier; gcc decides itself. */
#if defined(__clang__)
#define CC_UNROLL _Pragma("unroll")
#else
#define CC_UNROLL
#endif

/* The events every CC algorithm here handles (DOCA PCC's CNP and TX
 * events; a look at the rate applies only the timers due by then). */
enum cc_event_kind {
	CC_EV_ADVANCE = 0,		/* timers only: the rate as seen at now */
	CC_EV_CNP = 1,
	CC_EV_TX = 2,
};

#endif /* PRC_CC_TYPES_H */
