"""The TX engine: one event loop sends the RoCEv2 traffic of every host.

Each QP has a queue of messages, segmented into MTU packets with
consecutive PSNs; frames come from per-QP templates with the PSN and ICRC
patched (no scapy in the loop). A heap orders QPs by the departure time
nic_tx publishes for them (the cooperative pacer): a QP's next packet
leaves no earlier than that. nic_tx runs inside the send call, so the
departure time it publishes is there to read when send() returns. The
per-packet work -- patch, wait, send, log -- and the heap are C
(tx_native); message queues and completions stay here.

A reliable QP is an RC requester: a message stays outstanding after its
last packet leaves until nic_rx records the ACK that covers it; a NAK
rewinds the QP to the PSN it names (go-back-N: that packet and all after
it go again), and a retransmit timeout rewinds it to the first
unacknowledged PSN when the ACK of a QP that has sent everything does
not come.

Fidelity is part of the result: per packet, how late it left against its
departure time, and the rate the QP achieved against the rate BPF set; a
run whose engine could not keep up (it, not congestion control, set the
rates) says so.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import heapq
import itertools
import time
import zlib
from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np

from dataplane import roce
from dataplane.fidelity import PACKET_LOG
from dataplane.nic import (ACKED_PSN_WORD, ACKED_RING_WORD, DEPARTURE_WORD, MESSAGES_WORD, NAK_PSN_WORD,
                           NAKS_WORD, QP_RX_WORDS, QP_TX_WORDS, RATE_WORD, TAKEN_RING_WORD, stamp_at)
from dataplane.tx_native import (PSN_BITS, TX_IDLE, TX_LOG_FULL, TX_MESSAGE_DONE, TX_NAK, TxCredit, TxFrame,
                                 TxQp, TxSched, TxSchedEntry, library, u64p, word_pointers)

CLOCK = time.CLOCK_MONOTONIC          # the clock of bpf_ktime_get_ns
BTH_AT = roce.ETH_BYTES + 20 + roce.UDP_BYTES
PSN_AT = BTH_AT + 9                   # 24-bit PSN
MASKED_PSN_AT = 8 + PSN_AT - roce.ETH_BYTES   # the same in the ICRC's masked copy
SPIN_BELOW_NS = 500_000               # closer than this to a departure: spin, do not sleep
MAX_BURST = 64                        # packets of one QP before C looks at the others
SLICE_NS = 1_000_000                  # C returns at least this often, so until() runs
ACK_POLL_NS = 20_000                  # with nothing to send, look for ACKs this often
TIMER_SPIN_NS = 100_000               # closer than this to a timer: spin, do not sleep
PSN_MASK = (1 << PSN_BITS) - 1
PSN_HALF = 1 << (PSN_BITS - 1)
MAX_SLOTS = 4096                      # sending QPs per engine
MAX_TEMPLATES = 64                    # frame templates cached per QP
LOG_START = 1 << 16                   # packet-log entries per QP, doubled when full
PR_SET_TIMERSLACK = 29
# (only, first, middle, last) opcodes per message kind
OPCODES = {"write": (roce.WRITE_ONLY, roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST),
           "send": (roce.SEND_ONLY, roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST)}
# struct qp_tx as 64-bit words: the fields the loop reads


def now_ns() -> int:
    return time.clock_gettime_ns(CLOCK)


def psn_distance(a: int, b: int) -> int:
    """How far b is after a, modulo 2^24 (>= PSN_HALF: b is before a)."""
    return (b - a) & PSN_MASK


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
            masked = bytearray(b"\xff" * 8 + frame[roce.ETH_BYTES:-roce.ICRC_BYTES])
            ip = 8
            for at in (ip + 1, ip + 8, ip + 10, ip + 11, ip + 26, ip + 27, ip + 32):
                masked[at] = 0xFF         # TOS, TTL, IP csum, UDP csum, FECN/BECN byte
            base = _masked_icrc(masked, 0)
            deltas = _psn_deltas(len(masked))
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


@dataclass
class Message:
    kind: str           # "write" or "send"
    length: int         # bytes
    tag: object = None  # the poster's handle, returned on completion
    first_psn: int = -1     # set when it is first loaded to send
    packets: int = 0        # ... with the packet count at the QP's MTU
    sent: bool = False      # its last packet has left (once at least)
    on_complete: object = None  # on_complete(message) once its completion is visible
    completed_ns: int = 0       # when it became visible (CLOCK)

    def holds(self, psn: int) -> bool:
        return self.first_psn >= 0 and psn_distance(self.first_psn, psn) < self.packets

    def acked_by(self, acked_psn: int) -> bool:
        """An ACK up to acked_psn covers all of its packets."""
        end = (self.first_psn + self.packets) & PSN_MASK
        return self.first_psn >= 0 and psn_distance(end, acked_psn) < PSN_HALF


class PortCredit:
    """Lossless mode's bound on what is in flight towards a last-hop switch
    port: bytes sent to it minus bytes its destination host's QPs have
    received (from nic_rx's counters), at most `budget`. It bounds the real
    queue, which the marking model cannot see. Shared by the QPs whose
    path ends there."""

    def __init__(self, budget: int):
        self.c = TxCredit(budget=budget)
        self.recv_words: list[int] = []     # rx-bytes words (of nic_rx's counters) it watches
        self._rx = None

    @property
    def sent(self) -> int:
        return self.c.sent

    def watch(self, rx_addresses: list[int]) -> None:
        """Give C the addresses of recv_words."""
        self._rx = word_pointers(rx_addresses)
        self.c.rx, self.c.n_rx = self._rx, len(rx_addresses)


class SendQp:
    """A sending QP: its socket, its frames, its queue of messages, and the
    C side's view of it (counters, PSN, head message, packet log)."""

    def __init__(self, qpn: int, sock, frames: FrameFactory, mtu: int, departure: int, rate: int):
        self.qpn = qpn
        self.sock = sock
        self.frames = frames
        self.queue: deque[Message] = deque()
        self.c = TxQp(fd=sock.fileno(), mtu=mtu, departure=ctypes.cast(departure, u64p),
                      rate=ctypes.cast(rate, u64p))
        self.credit: PortCredit | None = None
        self._pause = None
        self.head: Message | None = None
        self.unacked: deque[Message] = deque()     # sent whole, not acknowledged yet
        self.rto_ns = 0                           # 0: unreliable (no ACKs expected)
        self.acked_psn = 0
        self.completed = 0                        # messages acknowledged: the last one's MSN
        self.ack_delay_ns = 0                     # added to an ACK's arrival (links without delay)
        self.armed_ns = 0                         # the retransmit timer's start
        self.timeouts = 0
        self.slot = -1                            # its place in the engine's C scheduler
        self._log = np.empty(0, dtype=PACKET_LOG)

    packets = property(lambda self: self.c.packets)
    bytes = property(lambda self: self.c.bytes)
    pauses = property(lambda self: self.c.pauses)          # times a pause held this QP
    send_errors = property(lambda self: self.c.send_errors)
    next_psn = property(lambda self: self.c.next_psn)
    retransmits = property(lambda self: self.c.retransmits)    # packets sent again

    @property
    def reliable(self) -> bool:
        return self.rto_ns > 0

    @property
    def idle(self) -> bool:
        """Nothing to send and nothing waiting for an ACK."""
        return self.head is None and not self.queue and not self.unacked

    @property
    def mtu(self) -> int:
        return self.c.mtu

    @mtu.setter
    def mtu(self, value: int) -> None:
        if self.head is not None or self.unacked:
            raise ValueError("the MTU changes between messages only, all acknowledged")
        self.c.mtu = value

    @property
    def log(self) -> np.ndarray:
        """Per packet sent: PACKET_LOG (send time, wire bytes, BPF rate, lateness)."""
        return self._log[:self.c.log_len]

    def obey(self, pause_addresses: list[int], credit: PortCredit | None) -> None:
        """Lossless mode: hold while any of these pause-until words is in
        the future, and while the credit towards the last hop is spent."""
        self._pause = word_pointers(pause_addresses)
        self.c.pause, self.c.n_pause = self._pause, len(pause_addresses)
        self.credit = credit
        self.c.credit = ctypes.pointer(credit.c) if credit is not None else None

    def keep_log(self, on: bool) -> None:
        if not on:
            self.c.log = None
        elif not len(self._log):
            self.grow_log()
        else:
            self.c.log = self._log.ctypes.data

    def grow_log(self) -> None:
        log = np.empty(max(LOG_START, 2 * len(self._log)), dtype=PACKET_LOG)
        log[:self.c.log_len] = self._log[:self.c.log_len]
        self._log = log
        self.c.log, self.c.log_cap = log.ctypes.data, len(log)

    def load_head(self) -> None:
        """Give C the head message's frames: first (or only), middle, last."""
        msg = self.head = self.queue[0]
        ops, mtu, length = OPCODES[msg.kind], self.c.mtu, msg.length
        if msg.first_psn < 0:
            msg.first_psn, msg.packets = self.c.next_psn, max(1, -(-length // mtu))
        t = self.frames.template
        if length <= mtu:
            self.c.first = self.c.last = ctypes.pointer(t(ops[0], length, length))
        else:
            self.c.first = ctypes.pointer(t(ops[1], mtu, length))
            self.c.middle = ctypes.pointer(t(ops[2], mtu, 0))
            self.c.last = ctypes.pointer(t(ops[3], length - (length - 1) // mtu * mtu, 0))
        self.c.msg_len, self.c.msg_sent = length, 0

    def finish_head(self) -> Message:
        self.head = None
        return self.queue.popleft()

    def take_ack(self, acked_psn: int) -> list[Message]:
        """The messages an ACK up to (not including) acked_psn completes,
        oldest first: outstanding ones, and after a rewind those that went
        again or wait to (the responder had them; then seek past them)."""
        self.acked_psn = acked_psn
        done = []
        while self.unacked and self.unacked[0].acked_by(acked_psn):
            done.append(self.unacked.popleft())
        while not self.unacked and self.queue and self.queue[0].acked_by(acked_psn):
            done.append(self.queue.popleft())
            self.head = None
        return done

    def seek(self, psn: int) -> None:
        """Send from psn next: the queue's first message becomes the head,
        the packets before psn counted as sent if it holds psn."""
        self.head = None
        self.c.next_psn = psn                 # where a message never loaded starts
        if not self.queue:
            return
        m = self.queue[0]
        self.load_head()
        if m.holds(psn):
            self.c.msg_sent = psn_distance(m.first_psn, psn) * self.c.mtu

    def withdraw_head(self) -> None:
        """Drop the head message, none of whose packets has left."""
        self.queue.popleft()
        self.seek(self.c.next_psn)

    def rewind(self, psn: int) -> None:
        """Go back to psn (go-back-N): the message holding it is resent
        from that packet and every message after it follows again. A psn
        not before the next one to send (a late NAK) changes nothing."""
        if not 0 < psn_distance(psn, self.c.next_psn) < PSN_HALF:
            return
        for i, m in enumerate(self.unacked):
            if m.holds(psn):
                again = [self.unacked.pop() for _ in range(len(self.unacked) - i)]
                self.queue.extendleft(again)          # popped newest first: m ends up first
                break
        self.seek(psn)


@dataclass
class ReceiveWatch:
    """A receiving QP whose completions the engine reports."""

    callback: object        # callback(qpn, msn, visible_ns)
    delay_ns: int           # added to the last packet's arrival (links without delay)
    seen: int = 0           # messages reported so far


class TxEngine:
    """departures: an MmapArray of the NIC's qp_tx (next_departure_ns, rate).
    C schedules the QPs with work by due time: the departure time less
    lead_ns. The loop also owns time for its callers: timers (call_at)
    and completions fire from it, at their due time."""

    def __init__(self, departures, on_message_sent=None, log_packets: bool = True, pauses=None,
                 deliveries=None, lead_ns: int = 0, on_message_complete=None, doorbell=None):
        """on_message_sent(qpn, message): its last packet left (the first
        time); on_message_complete(qpn, message): a reliable QP's message
        was acknowledged and its completion is visible;
        pauses: an MmapArray of the switch ports' stats, whose pause-until
        times lossless ports set (QPs name theirs in set_lossless);
        deliveries: an MmapArray of nic_rx's per-QP counters (PortCredit,
        receive completions);
        lead_ns: how long before its departure time a packet is handed to
        the kernel (the kernel pacer holds it until then; 0: cooperative);
        doorbell: an MmapArray of nic_rx's doorbell, whose first word moves
        on every ACK, NAK and message taken (without one, the loop looks at
        every QP on every pass)."""
        self.lead_ns = lead_ns
        self._departures, self._pauses, self._deliveries = departures, pauses, deliveries
        self._words = departures.words()
        self._rx_words = deliveries.words() if deliveries is not None else None
        self.qps: dict[int, SendQp] = {}
        self.on_message_sent = on_message_sent
        self.on_message_complete = on_message_complete
        self.log_packets = log_packets
        self._lib = library()                       # loading takes milliseconds: not in run()
        self._slot_qps = (ctypes.POINTER(TxQp) * MAX_SLOTS)()
        self._sched = TxSched(qps=self._slot_qps, heap=(TxSchedEntry * MAX_SLOTS)())
        self._sched_ref = ctypes.byref(self._sched)
        self._bell = doorbell.words() if doorbell is not None else None
        if doorbell is not None:
            self._sched.doorbell = ctypes.cast(doorbell.address(0), u64p)
        self._by_slot: list[SendQp] = []
        self._queued: set[int] = set()             # QPNs in the C heap
        self._outstanding: set[SendQp] = set()     # reliable QPs with unacknowledged messages
        self._watches: dict[int, ReceiveWatch] = {}
        self._timers: list[tuple[int, int, object]] = []     # (due, order, fn): a heap
        self._order = itertools.count()
    @property
    def send_errors(self) -> int:
        """Packets the qdisc refused (lost)."""
        return sum(qp.send_errors for qp in self.qps.values())

    @property
    def retransmits(self) -> int:
        return sum(qp.retransmits for qp in self.qps.values())

    @property
    def timeouts(self) -> int:
        return sum(qp.timeouts for qp in self.qps.values())

    @property
    def credit_waits(self) -> int:
        """Times a QP found its lossless credit spent."""
        return self._sched.credit_waits

    def add_qp(self, qpn: int, sock, dest_qp: int, addr: roce.FlowAddr, mtu: int, rto_ns: int = 0,
               ack_delay_ns: int = 0) -> SendQp:
        """rto_ns > 0: a reliable (RC) QP, whose ACKs and NAKs nic_rx
        records in its qp_tx entry, with that retransmit timeout; a
        message completes ack_delay_ns after its ACK arrived."""
        if len(self._by_slot) == MAX_SLOTS:
            raise ValueError(f"at most {MAX_SLOTS} sending QPs")
        base = qpn * QP_TX_WORDS
        qp = SendQp(qpn, sock, FrameFactory(dest_qp, addr), mtu,
                    self._departures.address(base + DEPARTURE_WORD), self._departures.address(base + RATE_WORD))
        if rto_ns > 0:
            qp.rto_ns, qp.ack_delay_ns = rto_ns, ack_delay_ns
            qp.c.naks = ctypes.cast(self._departures.address(base + NAKS_WORD), u64p)
        qp.slot = len(self._by_slot)
        self._by_slot.append(qp)
        self._slot_qps[qp.slot] = ctypes.pointer(qp.c)
        self.qps[qpn] = qp
        return qp

    def set_lossless(self, qpn: int, pause_words: list[int], credit: PortCredit) -> None:
        """QP qpn obeys the pause-until words (of the switch ports' stats)
        on its path, and the credit towards its last hop."""
        credit.watch([self._deliveries.address(w) for w in credit.recv_words])
        self.qps[qpn].obey([self._pauses.address(w) for w in pause_words], credit)

    def call_at(self, t_ns: int, fn) -> None:
        """Call fn() from the loop once CLOCK reaches t_ns (in due order;
        equal times in the order asked)."""
        heapq.heappush(self._timers, (t_ns, next(self._order), fn))

    def watch_receives(self, qpn: int, callback, delay_ns: int = 0) -> None:
        """Report each message receiving QP qpn takes from now on:
        callback(qpn, msn, visible_ns) at visible_ns, delay_ns after its
        last packet arrived (nic_rx's stamp)."""
        self._watches[qpn] = ReceiveWatch(callback, delay_ns, self._rx_words[qpn * QP_RX_WORDS + MESSAGES_WORD])

    def post(self, qpn: int, length: int, kind: str = "write", tag=None, on_complete=None) -> None:
        """Queue a message on a sending QP; on_complete(message) once a
        reliable QP's completion for it is visible."""
        if not 0 < length < 2**32:
            raise ValueError(f"a message is 1..2^32-1 bytes (the RETH DMA length), got {length}")
        if kind not in ("write", "send"):
            raise ValueError(f"message kind must be write or send, not {kind!r}")
        qp = self.qps[qpn]
        qp.queue.append(Message(kind, length, tag, on_complete=on_complete))
        if qp.reliable:
            self._outstanding.add(qp)
        if qpn not in self._queued:
            self._schedule(qp, self._due_now(qp))

    def cancel(self, qpn: int, tag) -> bool:
        """Withdraw the first posted message with this tag if none of its
        packets has left: True if one was withdrawn."""
        qp = self.qps[qpn]
        for m in qp.queue:
            if m.tag != tag:
                continue
            if m is qp.head:
                if qp.c.msg_sent or qp.c.next_psn != qp.c.high_psn:
                    return False                      # it has started (or is being resent)
                self._reposition(qp, qp.withdraw_head)
            elif m.first_psn >= 0:
                return False                          # it went once and waits to go again
            else:
                qp.queue.remove(m)
            if qp.idle:
                self._outstanding.discard(qp)
            return True
        return False

    def _schedule(self, qp: SendQp, due: int) -> None:
        qp.load_head()
        self._push(qp, due)

    def _push(self, qp: SendQp, due: int) -> None:
        self._queued.add(qp.qpn)
        self._lib.tx_sched_push(self._sched_ref, qp.slot, due)

    def _due_now(self, qp: SendQp) -> int:
        return max(0, self._words[qp.qpn * QP_TX_WORDS + DEPARTURE_WORD] - self.lead_ns)

    def _reposition(self, qp: SendQp, move) -> None:
        """Move qp's send position (move(): SendQp.rewind, seek or
        withdraw_head) with it out of the C heap; it answers every NAK
        counted so far."""
        qp.c.naks_seen = self._words[qp.qpn * QP_TX_WORDS + NAKS_WORD]
        if qp.qpn in self._queued:
            self._lib.tx_sched_remove(self._sched_ref, qp.slot)
            self._queued.discard(qp.qpn)
        move()
        if qp.head is not None:
            self._push(qp, self._due_now(qp))

    def _take_acks(self, now: int) -> None:
        """ACKs complete messages; a NAK or a timeout rewinds a QP that is
        not sending (one that is sees its NAK in C)."""
        words = self._words
        for qp in list(self._outstanding):
            base = qp.qpn * QP_TX_WORDS
            acked = words[base + ACKED_PSN_WORD]
            if acked != qp.acked_psn:
                qp.armed_ns = now
                for msg in qp.take_ack(acked):
                    qp.completed += 1
                    arrived = stamp_at(words, base + ACKED_RING_WORD, qp.completed) or now
                    msg.completed_ns = arrived + qp.ack_delay_ns
                    self.call_at(msg.completed_ns, functools.partial(self._complete, qp.qpn, msg))
                if qp.head is None and qp.queue or 0 < psn_distance(qp.next_psn, acked) < PSN_HALF:
                    self._reposition(qp, functools.partial(qp.seek, acked))   # the responder is ahead
            if qp.qpn not in self._queued:
                if words[base + NAKS_WORD] != qp.c.naks_seen:
                    self._reposition(qp, functools.partial(qp.rewind, words[base + NAK_PSN_WORD]))
                elif qp.unacked and now - qp.armed_ns > qp.rto_ns:
                    qp.timeouts += 1
                    self._reposition(qp, functools.partial(qp.rewind, acked))
            if qp.idle:
                self._outstanding.discard(qp)

    def _complete(self, qpn: int, msg: Message) -> None:
        if msg.on_complete is not None:
            msg.on_complete(msg)
        if self.on_message_complete is not None:
            self.on_message_complete(qpn, msg)

    def _take_receives(self, now: int) -> None:
        words = self._rx_words
        for qpn, w in self._watches.items():
            base = qpn * QP_RX_WORDS
            while w.seen < words[base + MESSAGES_WORD]:
                w.seen += 1
                visible = (stamp_at(words, base + TAKEN_RING_WORD, w.seen) or now) + w.delay_ns
                self.call_at(visible, functools.partial(w.callback, qpn, w.seen, visible))

    def _fire_timers(self, now: int) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            heapq.heappop(timers)[2]()

    def run(self, duration_s: float | None = None, until=None) -> None:
        """Send until every queue is empty, every reliable QP's messages
        acknowledged and every timer fired, duration_s has passed, or
        until() says so (checked at least every SLICE_NS). The garbage
        collector is paused meanwhile: its passes stall the loop for longer
        than the pacing slack."""
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for qp in self.qps.values():
                qp.keep_log(self.log_packets)
            self._run(duration_s, until)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _run(self, duration_s: float | None, until) -> None:
        # Sleeps end up to 50 us late by default (timer slack): ask for 1 ns.
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
        clock, clock_id = time.clock_gettime_ns, CLOCK
        run, sched, lead = self._lib.tx_run, self._sched_ref, self.lead_ns
        slot, when = ctypes.c_uint32(), ctypes.c_uint64()
        slot_ref, when_ref = ctypes.byref(slot), ctypes.byref(when)
        end = clock(clock_id) + int(duration_s * 1e9) if duration_s is not None else (1 << 63)
        bell, look_at = self._bell, 0
        while self._sched.n or self._outstanding or self._timers:
            now = clock(clock_id)
            if now >= end or until is not None and until():
                return
            if bell is None or bell[0] != self._sched.doorbell_seen or now >= look_at:
                if bell is not None:
                    self._sched.doorbell_seen = bell[0]
                look_at = now + ACK_POLL_NS               # timeouts need a look without a ring
                if self._outstanding:
                    self._take_acks(now)
                if self._watches:
                    self._take_receives(now)
            if self._timers and self._timers[0][0] <= now:
                self._fire_timers(now)
                continue
            wake = self._timers[0][0] if self._timers else end
            status = run(sched, lead, min(end, now + SLICE_NS, wake), SPIN_BELOW_NS, MAX_BURST, slot_ref, when_ref)
            if status == TX_MESSAGE_DONE:
                qp = self._by_slot[slot.value]
                done = qp.finish_head()
                self._queued.discard(qp.qpn)
                if qp.reliable:
                    qp.unacked.append(done)
                    qp.armed_ns = clock(clock_id)
                if qp.queue:
                    self._schedule(qp, when.value)
                if not done.sent:
                    done.sent = True
                    if self.on_message_sent is not None:
                        self.on_message_sent(qp.qpn, done)
            elif status == TX_NAK:
                qp = self._by_slot[slot.value]
                self._queued.discard(qp.qpn)
                self._reposition(qp, functools.partial(qp.rewind, self._words[qp.qpn * QP_TX_WORDS + NAK_PSN_WORD]))
            elif status == TX_LOG_FULL:
                self._by_slot[slot.value].grow_log()
            elif status == TX_IDLE:             # C spins the last SPIN_BELOW_NS itself; timers spin here
                nap = min(when.value - SPIN_BELOW_NS, wake - TIMER_SPIN_NS,
                          now + (ACK_POLL_NS if self._outstanding else SLICE_NS)) - now
                if nap > 0:
                    time.sleep(nap / 1e9)
