"""Frames for the TX engine: per-QP templates of RoCEv2 data frames whose
PSN and ICRC C patches per packet (no scapy in the loop)."""
from __future__ import annotations

import ctypes
import functools
import zlib
from collections import OrderedDict

from dataplane import roce
from dataplane.tx_native import PSN_BITS, TxFrame, library

BTH_AT = roce.ETH_BYTES + 20 + roce.UDP_BYTES
PSN_AT = BTH_AT + 9                   # 24-bit PSN
MASKED_PSN_AT = 8 + PSN_AT - roce.ETH_BYTES   # the same in the ICRC's masked copy
MAX_TEMPLATES = 64                    # frame templates cached per QP


def _masked_icrc(masked: bytearray, psn: int) -> int:
    masked[MASKED_PSN_AT:MASKED_PSN_AT + 3] = psn.to_bytes(3, "big")
    return zlib.crc32(masked)


@functools.lru_cache(maxsize=64)
def _psn_deltas(masked_len: int) -> tuple[int, ...]:
    """The change each PSN bit makes to the CRC of a masked copy this long:
    the CRC is affine, so crc(x ^ e) ^ crc(x) = crc(e) ^ crc(0) for any x."""
    zeros = bytearray(masked_len)
    base = zlib.crc32(zeros)
    return tuple(_masked_icrc(zeros, 1 << k) ^ base for k in range(PSN_BITS))


class FrameFactory:
    """RoCEv2 frames of one QP from cached templates. A template's payload
    is zeros and only its PSN changes, so its ICRC is affine in the PSN:
    the ICRC for PSN 0 and the change each PSN bit makes are computed once
    (the changes once per frame length), and patching is 24 XORs. The
    cache keeps the MAX_TEMPLATES used last (a workload's chunk lengths
    vary); one a head message still uses stays alive through its pointer."""

    def __init__(self, dest_qp: int, addr: roce.FlowAddr):
        self.dest_qp = dest_qp
        self.addr = addr
        self._templates: OrderedDict[tuple[int, int, int], tuple[TxFrame, bytearray]] = OrderedDict()

    def template(self, opcode: int, payload_len: int, dma_len: int) -> TxFrame:
        key = (opcode, payload_len, dma_len)
        if key in self._templates:
            self._templates.move_to_end(key)
        else:
            frame = bytearray(roce.data_frame(
                opcode, self.dest_qp, 0, payload_len, addr=self.addr, ecn=roce.NOT_ECT,
                ackreq=opcode in (roce.SEND_LAST, roce.SEND_ONLY, roce.WRITE_LAST, roce.WRITE_ONLY),
                dma_len=dma_len))
            # built at PSN 0, the frame carries the ICRC at PSN 0; the
            # masked copy the ICRC covers is 8 bytes of LRH, then IP to ICRC
            base = int.from_bytes(frame[-roce.ICRC_BYTES:], "little")
            deltas = _psn_deltas(8 + len(frame) - roce.ETH_BYTES - roce.ICRC_BYTES)
            buf = (ctypes.c_char * len(frame)).from_buffer(frame)
            t = TxFrame(bytes=ctypes.addressof(buf), len=len(frame), psn_at=PSN_AT, payload=payload_len,
                        icrc_base=base, psn_delta=(ctypes.c_uint32 * PSN_BITS)(*deltas))
            t._buf = buf                  # the frame's memory lives as long as its template
            self._templates[key] = (t, frame)
            if len(self._templates) > MAX_TEMPLATES:
                self._templates.popitem(last=False)
        return self._templates[key][0]

    def frame(self, opcode: int, psn: int, payload_len: int, dma_len: int) -> bytearray:
        """The frame, valid until the next call (send it before asking again)."""
        t = self.template(opcode, payload_len, dma_len)
        library().tx_frame_patch(t, psn)
        return self._templates[(opcode, payload_len, dma_len)][1]
