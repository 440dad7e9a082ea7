"""The TX engine's send loop (C, driven by the Python heap) on a real
socket: frames byte-identical to independently built ones, messages in
order, departure times, pauses and lossless credit obeyed, and a packet
log that matches what was sent. The departure, pause and delivery words
live in shared memory, as nic_tx's mmapped maps do; no BPF here (the live
tests run the engine against nic_tx itself)."""
import ctypes
import os
import socket
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane import roce
from dataplane.bpf_mmap import MmapArray
from dataplane.nic import (ACKED_PSN_WORD, ACKED_RING_WORD, DEPARTURE_WORD, MESSAGES_WORD, NAK_PSN_WORD, NAKS_WORD,
                           QP_RX_WORDS, QP_TX_WORDS, STAMP_RING, TAKEN_RING_WORD)
from dataplane.tx_engine import TxEngine, now_ns
from dataplane.tx_frames import FrameFactory
from dataplane.tx_qp import NicPort, PortCredit

ADDR = roce.FlowAddr(src_ip="198.18.0.1", dst_ip="198.18.0.3", sport=0xC001)
DEST_QP, QPN, MTU = 0x1234, 3, 1024
WORDS = 64


class Wire:
    """A datagram socket pair; a thread drains the far end while the engine
    sends (the engine's socket blocks when the near end is full)."""

    def __init__(self):
        self.near, self.far = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.frames: list[bytes] = []
        self.far.settimeout(0.2)
        self._stop = False
        self._thread = threading.Thread(target=self._drain)
        self._thread.start()

    def _drain(self):
        while not self._stop:
            try:
                self.frames.append(self.far.recv(65536))
            except socket.timeout:
                pass

    def close(self) -> list[bytes]:
        """Everything sent, in order."""
        if self._stop:
            return self.frames
        self._stop = True
        self._thread.join()
        self.far.setblocking(False)
        while True:
            try:
                self.frames.append(self.far.recv(65536))
            except BlockingIOError:
                break
        self.near.close()
        self.far.close()
        return self.frames


def shared_words(count: int) -> MmapArray:
    """Zeroed shared memory viewed like a BPF map (memfd instead of a map fd)."""
    fd = os.memfd_create("words")
    os.ftruncate(fd, -(-count * 8 // 4096) * 4096)      # whole pages, as a map is mapped
    view = MmapArray(None, ctypes.c_uint64, map_fd=fd, count=count)
    os.close(fd)
    return view


@pytest.fixture
def setup():
    departures, pauses = shared_words(WORDS * QP_TX_WORDS), shared_words(WORDS)
    deliveries = shared_words(WORDS * QP_RX_WORDS)
    wire = Wire()
    sent = []
    engine = TxEngine(departures, on_message_sent=lambda qpn, msg: sent.append((qpn, msg.tag)),
                      pauses=pauses, deliveries=deliveries)
    engine.add_qp(QPN, wire.near, DEST_QP, ADDR, MTU)
    yield engine, wire, departures, pauses, deliveries, sent
    wire.close()
    for view in (departures, pauses, deliveries):
        view.close()


@settings(max_examples=300, deadline=None)
@given(psn=st.integers(0, roce.PSN_MASK), opcode=st.sampled_from(
           [roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST, roce.WRITE_ONLY,
            roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_ONLY]),
       payload=st.integers(0, 4096))
def test_patched_frames_equal_frames_built_from_scratch(psn, opcode, payload):
    factory = FrameFactory(DEST_QP, ADDR)
    factory.frame(opcode, (psn * 7919) & roce.PSN_MASK, payload, payload)   # patch from another PSN
    frame = bytes(factory.frame(opcode, psn, payload, payload))
    last = opcode in (roce.WRITE_LAST, roce.WRITE_ONLY, roce.SEND_LAST, roce.SEND_ONLY)
    assert frame == roce.data_packet(opcode, DEST_QP, psn, bytes(payload), addr=ADDR, ecn=roce.NOT_ECT,
                                     ackreq=last, dma_len=payload)
    assert roce.icrc_valid(frame)


def test_messages_leave_as_the_packets_the_spec_segments(setup):
    engine, wire, *_, sent = setup
    messages = [("write", 10_000, "a"), ("send", 500, "b"), ("send", 3 * MTU, "c"), ("write", 1, "d")]
    for kind, length, tag in messages:
        engine.post(QPN, length, kind, tag)
    engine.run(duration_s=5)
    frames = wire.close()
    expected, psn = [], 0
    for kind, length, _ in messages:
        packets = roce.segment_message(kind, DEST_QP, psn, length, MTU, addr=ADDR, ecn=roce.NOT_ECT)
        expected += packets
        psn += len(packets)
    assert frames == expected
    assert sent == [(QPN, tag) for *_, tag in messages]
    qp = engine.qps[QPN]
    assert qp.packets == len(expected) and qp.next_psn == psn and qp.send_errors == 0
    assert qp.bytes == sum(len(f) for f in expected)
    assert list(qp.log["wire_bytes"]) == [len(f) for f in expected]
    assert np.all(np.diff(qp.log["sent_ns"].astype(np.int64)) >= 0)


def test_no_packet_leaves_before_its_departure_time(setup):
    engine, wire, departures, *_ = setup
    departure = now_ns() + 20_000_000
    departures.words()[QPN * QP_TX_WORDS + DEPARTURE_WORD] = departure
    engine.post(QPN, 4 * MTU)
    engine.run(duration_s=5)
    log = engine.qps[QPN].log
    assert len(wire.close()) == 4 and log["sent_ns"][0] >= departure
    assert 0 <= log["late_ns"][0] < 10_000_000           # it waited, then left, not much later


@pytest.mark.parametrize("slack_ms", [0, 5])
def test_a_port_makes_up_lost_wire_time_within_its_slack(setup, slack_ms):
    """A port whose wire time was lost (here: its clock 10 ms behind, as
    after an engine delay) sends that much sooner, up to its slack, as the
    pacer does: back-to-back for the first slack's worth, then one
    packet's wire time (1 ms here) apart. Without slack, 1 ms apart from
    the first packet on."""
    engine, wire, *_ = setup
    port = NicPort(8e6, slack_ns=slack_ms * 1_000_000)       # a 1,082-byte frame: 1.08 ms
    engine.share_port(QPN, port)
    port.c.free_at = now_ns() - 10_000_000
    engine.post(QPN, 12 * MTU)
    engine.run(duration_s=5)
    gaps_ms = np.diff(engine.qps[QPN].log["sent_ns"]) / 1e6
    wire.close()
    if slack_ms == 0:
        assert np.all(gaps_ms > 0.9), gaps_ms.round(2)
    else:       # 5 ms made up: 4 frames at once, the 5th's remainder, then 1.08 ms apart
        assert np.all(gaps_ms[:4] < 0.2) and 0.2 < gaps_ms[4] < 0.9 and np.all(gaps_ms[5:] > 0.9), gaps_ms.round(2)


def test_the_earliest_departure_goes_first(setup):
    engine, wire, departures, *_ = setup
    other = 5
    engine.add_qp(other, wire.near, DEST_QP + 1, ADDR, MTU)
    words = departures.words()
    words[QPN * QP_TX_WORDS + DEPARTURE_WORD] = now_ns() + 20_000_000
    words[other * QP_TX_WORDS + DEPARTURE_WORD] = now_ns()
    engine.post(QPN, MTU)
    engine.post(other, MTU)
    engine.run(duration_s=5)
    frames = [roce.parse(f) for f in wire.close()]
    assert [f.dest_qp for f in frames] == [DEST_QP + 1, DEST_QP]


def test_a_pause_holds_the_qp_until_it_ends(setup):
    engine, wire, _, pauses, deliveries, _ = setup
    pause_end = now_ns() + 20_000_000
    pauses.words()[7] = pause_end
    engine.set_lossless(QPN, [7], PortCredit(1 << 30))
    engine.post(QPN, 2 * MTU)
    engine.run(duration_s=5)
    qp = engine.qps[QPN]
    assert len(wire.close()) == 2 and qp.pauses >= 1 and qp.log["sent_ns"][0] >= pause_end
    assert qp.log["sent_ns"][0] - qp.log["held_ns"][0] <= pause_end - 19_000_000      # held from the start
    assert qp.log["held_ns"][1] == 0


def test_lossless_credit_bounds_bytes_in_flight_until_deliveries_free_it(setup):
    engine, wire, _, pauses, deliveries, _ = setup
    credit = PortCredit(3 * MTU)
    credit.recv_words.append(2)
    engine.set_lossless(QPN, [], credit)
    engine.post(QPN, 20 * MTU)
    engine.run(duration_s=0.05)
    qp = engine.qps[QPN]
    held_at = qp.bytes
    # sends while at most the budget is in flight: the budget, then one more frame
    assert 3 * MTU < held_at <= 3 * MTU + 2 * (MTU + 100) and engine.credit_waits > 0
    deliveries.words()[2] = held_at                       # the receiver got all of it
    engine.run(duration_s=0.05)
    assert qp.bytes > held_at and credit.sent == qp.bytes
    wire.close()


def test_a_log_grows_past_its_first_allocation(setup, monkeypatch):
    from dataplane import tx_qp
    monkeypatch.setattr(tx_qp, "LOG_START", 8)
    engine, wire, *_ = setup
    engine.post(QPN, 100 * MTU)
    engine.run(duration_s=5)
    assert len(wire.close()) == 100 and len(engine.qps[QPN].log) == 100


def test_bad_messages_are_refused_with_a_reason(setup):
    engine, *_ = setup
    with pytest.raises(ValueError, match="1..2"):
        engine.post(QPN, 0)
    with pytest.raises(ValueError, match="write or send"):
        engine.post(QPN, 10, kind="read")


def test_with_a_lead_packets_go_that_long_before_their_departure(setup):
    """The kernel pacer's mode: sch_fq, not the engine, holds each packet
    until its departure time."""
    engine, wire, departures, *_ = setup
    engine.lead_ns = lead = 15_000_000
    departure = now_ns() + 20_000_000
    departures.words()[QPN * QP_TX_WORDS + DEPARTURE_WORD] = departure
    engine.post(QPN, MTU)
    engine.run(duration_s=5)
    log = engine.qps[QPN].log
    assert len(wire.close()) == 1
    assert departure - lead <= log["sent_ns"][0] < departure and log["late_ns"][0] < 0


def test_many_qps_each_send_their_messages_in_order(setup):
    engine, wire, departures, *_, sent = setup
    qpns = list(range(10, 60))
    words = departures.words()
    for i, qpn in enumerate(qpns):
        engine.add_qp(qpn, wire.near, 1000 + qpn, ADDR, MTU)
        words[qpn * QP_TX_WORDS + DEPARTURE_WORD] = now_ns() + (i % 7) * 1_000_000   # a spread of starts
    lengths = [3 * MTU, 1, 2 * MTU + 5]
    for length in lengths:
        for qpn in qpns:
            engine.post(qpn, length, tag=(qpn, length))
    engine.run(duration_s=10)
    frames = [roce.parse(f) for f in wire.close()]
    per_packets = sum(len(roce.segment_message("write", 0, 0, n, MTU)) for n in lengths)
    assert len(frames) == len(qpns) * per_packets
    for qpn in qpns:
        mine = [f for f in frames if f.dest_qp == 1000 + qpn]
        assert [f.psn for f in mine] == list(range(per_packets))
    assert sorted(sent) == sorted((qpn, (qpn, n)) for qpn in qpns for n in lengths)
    for qpn in qpns:                                 # each QP's completions in posting order
        assert [tag[1] for q, tag in sent if q == qpn] == lengths


def stamp(words, ring_word: int, msn: int, ns: int) -> None:
    """What nic_rx writes into a completion ring (bpf/include/nic_logic.h)."""
    words[ring_word + 2 * (msn % STAMP_RING) + 1] = ns
    words[ring_word + 2 * (msn % STAMP_RING)] = msn


class Responder:
    """The RC responder's rule as the transport spec states it, over the
    frames on the wire: take only the expected PSN, NAK the first packet
    ahead of it, drop duplicates, ACK what asks; written into the words
    nic_rx would write. `lose`: PSNs whose first transmission the wire
    loses; `lose_acks`: how many ACKs it loses."""

    def __init__(self, words, lose=(), lose_acks=0):
        self.words, self.base = words, QPN * QP_TX_WORDS
        self.lose, self.lost, self.lose_acks = set(lose), set(), lose_acks
        self.expected, self.nak_out, self.seen, self.messages = 0, False, 0, 0
        self.taken: list[bytes] = []
        self.ack_times: dict[int, int] = {}       # MSN -> when its ACK was written

    def _ack(self, next_psn: int) -> None:
        if self.lose_acks:
            self.lose_acks -= 1
            return
        self.words[self.base + ACKED_PSN_WORD] = next_psn
        if self.messages not in self.ack_times:
            self.ack_times[self.messages] = now_ns()
            stamp(self.words, self.base + ACKED_RING_WORD, self.messages, self.ack_times[self.messages])

    def __call__(self, frames: list[bytes]) -> bool:
        for frame in frames[self.seen:]:
            p = roce.parse(frame)
            if p.psn in self.lose and p.psn not in self.lost:
                self.lost.add(p.psn)
            elif p.psn == self.expected:
                self.taken.append(frame)
                self.expected, self.nak_out = self.expected + 1, False
                self.messages += p.opcode in (roce.WRITE_LAST, roce.WRITE_ONLY, roce.SEND_LAST, roce.SEND_ONLY)
                if p.ackreq:
                    self._ack(self.expected)
            elif p.psn > self.expected:
                if not self.nak_out:
                    self.nak_out = True
                    self.words[self.base + NAK_PSN_WORD] = self.expected
                    self.words[self.base + ACKED_PSN_WORD] = self.expected
                    self.words[self.base + NAKS_WORD] += 1
            elif p.ackreq:
                self._ack(self.expected)
        self.seen = len(frames)
        return False


MESSAGES = [("write", 10 * MTU, "a"), ("send", 500, "b"), ("write", 3 * MTU + 7, "c")]


def _run_reliable(setup, **losses):
    engine, wire, departures, *_, sent = setup
    engine.add_qp(QPN, wire.near, DEST_QP, ADDR, MTU, rto_ns=20_000_000)    # the same QP, reliable
    completed = []
    engine.on_message_complete = lambda qpn, msg: completed.append(msg.tag)
    responder = Responder(departures.words(), **losses)
    for kind, length, tag in MESSAGES:
        engine.post(QPN, length, kind, tag)
    engine.run(duration_s=5, until=lambda: responder(wire.frames))
    expected, psn = [], 0
    for kind, length, _ in MESSAGES:
        expected += roce.segment_message(kind, DEST_QP, psn, length, MTU, addr=ADDR, ecn=roce.NOT_ECT)
        psn = len(expected)
    return engine.qps[QPN], responder, completed, [tag for _, tag in sent], expected, wire.close()


def test_acks_complete_a_reliable_qps_messages_in_order(setup):
    qp, responder, completed, sent, expected, frames = _run_reliable(setup)
    assert completed == sent == ["a", "b", "c"]
    assert frames == responder.taken == expected
    assert (qp.retransmits, qp.timeouts) == (0, 0) and qp.idle


def test_a_nak_resends_from_the_lost_packet_on(setup):
    """Go-back-N: PSN 3 lost (in message a) and 11 (message b, whole):
    everything from each NAKed PSN goes again and the responder takes
    every frame once, in order, byte for byte."""
    qp, responder, completed, sent, expected, frames = _run_reliable(setup, lose={3, 11})
    assert responder.taken == expected and completed == sent == ["a", "b", "c"]
    assert qp.retransmits == len(frames) - len(expected) > 0 and qp.timeouts == 0
    assert [roce.parse(f).psn for f in frames][:5] == [0, 1, 2, 3, 4]


def test_a_lost_tail_is_resent_after_the_timeout(setup):
    """No packet follows a lost last one to prompt a NAK: the timeout
    resends from the first unacknowledged PSN, message c's first."""
    last = 10 + 1 + 4 - 1
    qp, responder, completed, _, expected, frames = _run_reliable(setup, lose={last})
    assert responder.taken == expected and completed == ["a", "b", "c"]
    assert qp.timeouts == 1 and qp.retransmits == 4
    assert [roce.parse(f).psn for f in frames[-4:]] == [11, 12, 13, 14]


def test_a_lost_ack_is_recovered_by_the_duplicate_it_prompts(setup):
    qp, responder, completed, _, expected, frames = _run_reliable(setup, lose_acks=3)
    assert responder.taken == expected and completed == ["a", "b", "c"]
    assert qp.timeouts == 1 and len(frames) > len(expected)


def test_a_completion_is_visible_the_ack_delay_after_its_ack(setup):
    engine, wire, departures, *_ = setup
    delay = 3_000_000
    engine.add_qp(QPN, wire.near, DEST_QP, ADDR, MTU, rto_ns=50_000_000, ack_delay_ns=delay)
    seen = []
    responder = Responder(departures.words())
    for i, (kind, length, tag) in enumerate(MESSAGES):
        engine.post(QPN, length, kind, tag, on_complete=lambda m: seen.append((m.tag, m.completed_ns, now_ns())))
    engine.run(duration_s=5, until=lambda: responder(wire.frames))
    wire.close()
    assert [tag for tag, *_ in seen] == ["a", "b", "c"]
    for msn, (_, visible, fired) in enumerate(seen, 1):
        assert visible == responder.ack_times[msn] + delay and fired >= visible


def test_timers_fire_in_due_order_and_keep_the_loop_running(setup):
    """A compute phase is a timer: the loop idles until it is due, then
    the timer posts the next message."""
    engine, wire, *_ = setup
    start, fired = now_ns(), []
    for due_ms, name in [(6, "late"), (2, "early"), (2, "early2")]:
        due = start + due_ms * 1_000_000
        engine.call_at(due, lambda name=name, due=due: fired.append((name, due, now_ns())))
    engine.call_at(start + 4_000_000, lambda: engine.post(QPN, MTU, tag="from a timer"))
    engine.run(duration_s=5)
    assert [name for name, *_ in fired] == ["early", "early2", "late"]
    assert all(at >= due for _, due, at in fired)
    (frame,) = wire.close()
    assert engine.qps[QPN].log["sent_ns"][0] >= start + 4_000_000 and roce.parse(frame).psn == 0


def test_received_messages_are_reported_the_delay_after_their_last_packet(setup):
    engine, wire, _, _, deliveries, _ = setup
    words, recv, delay = deliveries.words(), 7, 2_000_000
    base = recv * QP_RX_WORDS
    words[base + MESSAGES_WORD] = 5                       # taken before the watch: not reported
    engine.watch_receives(recv, lambda qpn, msn, visible: got.append((qpn, msn, visible, now_ns())), delay)
    got, arrivals = [], {}

    def arrive(msn):                                      # what nic_rx does when a message's last packet is taken
        arrivals[msn] = now_ns()
        stamp(words, base + TAKEN_RING_WORD, msn, arrivals[msn])
        words[base + MESSAGES_WORD] = msn

    start = now_ns()
    engine.call_at(start + 1_000_000, lambda: arrive(6))
    engine.call_at(start + 1_500_000, lambda: (arrive(7), arrive(8)))
    engine.call_at(start + 8_000_000, lambda: None)       # keeps the loop running past the reports
    engine.run(duration_s=5)
    wire.close()
    assert [(q, m) for q, m, *_ in got] == [(recv, 6), (recv, 7), (recv, 8)]
    assert all(visible == arrivals[m] + delay and at >= visible for _, m, visible, at in got)


def test_a_message_can_be_withdrawn_until_its_first_packet_leaves(setup):
    engine, wire, departures, *_ = setup
    departures.words()[QPN * QP_TX_WORDS + DEPARTURE_WORD] = now_ns() + 20_000_000   # nothing leaves yet
    for tag in ("a", "b", "c"):
        engine.post(QPN, 2 * MTU, tag=tag)
    assert engine.cancel(QPN, "b") and engine.cancel(QPN, "a")      # queued, then the head
    assert not engine.cancel(QPN, "nope")
    engine.run(duration_s=5)
    frames = [roce.parse(f) for f in wire.close()]
    assert [f.psn for f in frames] == [0, 1] and frames[0].opcode == roce.WRITE_FIRST
    assert not engine.cancel(QPN, "c")                              # gone: sent


def test_the_template_cache_keeps_the_ones_used_last(monkeypatch):
    from dataplane import tx_frames
    monkeypatch.setattr(tx_frames, "MAX_TEMPLATES", 4)
    factory = FrameFactory(DEST_QP, ADDR)
    held = factory.template(roce.WRITE_MIDDLE, MTU, 0)            # as a head message holds it
    for length in range(1, 9):
        factory.template(roce.WRITE_LAST, length, 0)
    assert len(factory._templates) == 4
    assert bytes(factory.frame(roce.WRITE_LAST, 5, 1, 0)) == roce.data_packet(       # evicted, rebuilt
        roce.WRITE_LAST, DEST_QP, 5, bytes(1), addr=ADDR, ecn=roce.NOT_ECT, ackreq=True)
    tx_frames.library().tx_frame_patch(held, 7)                   # an evicted template a pointer holds
    assert bytes(ctypes.string_at(held.bytes, held.len)) == roce.data_packet(
        roce.WRITE_MIDDLE, DEST_QP, 7, bytes(MTU), addr=ADDR, ecn=roce.NOT_ECT)
