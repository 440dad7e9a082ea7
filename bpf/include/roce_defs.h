/* SPDX-License-Identifier: GPL-2.0 */
/*
 * RoCEv2 wire format and the structs shared between BPF programs and user
 * space. Every struct here has a ctypes mirror in dataplane/shared.py,
 * checked field by field by dataplane/layout.py.
 */
#ifndef PRC_ROCE_DEFS_H
#define PRC_ROCE_DEFS_H

#include <linux/types.h>

#define ROCE_V2_UDP_PORT 4791
#define ROCE_ICRC_BYTES 4
#define ROCE_QPN_MASK 0x00ffffff

/* Base Transport Header, 12 bytes, network byte order. */
struct roce_bth {
	__u8 opcode;
	__u8 flags;		/* SE | M | PadCnt(2) | TVer(4) */
	__be16 pkey;
	__be32 dest_qp;		/* FECN | BECN | resv6 | DestQP(24) */
	__be32 psn;		/* AckReq | resv7 | PSN(24) */
} __attribute__((packed));

/* Per destination QP receive counters. */
struct qp_counters {
	__u64 packets;
	__u64 bytes;
};

#endif /* PRC_ROCE_DEFS_H */
