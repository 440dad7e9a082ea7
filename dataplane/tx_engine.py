"""The TX engine: one event loop sends the RoCEv2 traffic of every host.

Each QP has a queue of messages, segmented into MTU packets with
consecutive PSNs; frames come from per-QP templates with the PSN and ICRC
patched (no scapy in the loop). A heap orders QPs by the departure time
nic_tx publishes for them (the cooperative pacer): a QP's next packet
leaves no earlier than that. nic_tx runs inside the send call, so the
departure time it publishes is there to read when send() returns. The
per-packet work -- patch, wait, send, log -- and the heap are C
(tx_native); message queues and completions stay here, with each QP's
state in tx_qp and its frames in tx_frames.

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
from dataclasses import dataclass

from dataplane import roce
from dataplane.nic import (ACKED_PSN_WORD, ACKED_RING_WORD, DEPARTURE_WORD, MESSAGES_WORD, NAK_PSN_WORD,
                           NAKS_WORD, QP_RX_WORDS, QP_TX_WORDS, RATE_WORD, TAKEN_RING_WORD, stamp_at)
from dataplane.tx_frames import FrameFactory
from dataplane.tx_native import (TX_IDLE, TX_LOG_FULL, TX_MESSAGE_DONE, TX_NAK, TxQp, TxSched, TxSchedEntry,
                                 library, u64p)
from dataplane.tx_qp import PSN_HALF, Message, NicPort, PortCredit, SendQp, psn_distance

CLOCK = time.CLOCK_MONOTONIC          # the clock of bpf_ktime_get_ns
SPIN_BELOW_NS = 500_000               # closer than this to a departure: spin, do not sleep
MAX_BURST = 64                        # packets of one QP before C looks at the others
SLICE_NS = 1_000_000                  # C returns at least this often, so until() runs
ACK_POLL_NS = 20_000                  # with nothing to send, look for ACKs this often
TIMEOUT_CHECK_NS = 1_000_000          # with a doorbell, look for retransmit timeouts this often
TIMER_SPIN_NS = 100_000               # closer than this to a timer: spin, do not sleep
MAX_SLOTS = 4096                      # sending QPs per engine
PR_SET_TIMERSLACK = 29


def now_ns() -> int:
    return time.clock_gettime_ns(CLOCK)


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

    def share_port(self, qpn: int, port: NicPort, weight_address: int | None = None) -> None:
        """QP qpn sends through a NIC port it shares with other QPs (its
        host's): one packet at a time at the port's rate, the backlogged
        QPs taking turns in proportion to the 32-bit weight at
        weight_address (1024 = 1; its process's PRC hook), else equally."""
        qp = self.qps[qpn]
        port.join(qp)
        if weight_address is not None:
            qp.c.weight = ctypes.cast(weight_address, ctypes.POINTER(ctypes.c_uint32))

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

    def _rewind_to_nak(self, qp: SendQp) -> None:
        self._reposition(qp, functools.partial(qp.rewind, self._words[qp.qpn * QP_TX_WORDS + NAK_PSN_WORD]))

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
                    self._rewind_to_nak(qp)
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
                look_at = now + TIMEOUT_CHECK_NS          # ACKs ring; timeouts do not
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
                self._rewind_to_nak(qp)
            elif status == TX_LOG_FULL:
                self._by_slot[slot.value].grow_log()
            elif status == TX_IDLE:             # C spins the last SPIN_BELOW_NS itself; timers spin here
                nap = min(when.value - SPIN_BELOW_NS, wake - TIMER_SPIN_NS,
                          now + (ACK_POLL_NS if self._outstanding else SLICE_NS)) - now
                if nap > 0:
                    time.sleep(nap / 1e9)
