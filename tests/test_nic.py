"""bpf/nic.c through BPF_PROG_TEST_RUN: the notification point turns CE
into CNPs, the reaction point cuts rates exactly as the host CC library
does, nic_tx paces and marks, and malformed frames touch nothing."""
import random
import struct
import time
import zlib

import pytest

from dataplane import roce, tshark
from dataplane.cc import EV_CNP, EV_TX, Event, Hook, HostCC, core_params
from dataplane.nic import (F_KERNEL_PACER, F_PASS_DATA, Nic, NicConfig, QpCc, QpCtx, QpRx, QpTx,
                           cc_trace_records, crc32_table, sender_sport)
from dataplane.layout import ctypes_fields
from dataplane.prog_test_run import prog_test_run
from scenario.dcqcn import DcqcnConfig
from frames import IP_AT, mutated_frames

pytestmark = [pytest.mark.bcc, pytest.mark.root]
XDP_DROP, XDP_PASS, XDP_TX = 1, 2, 3
TC_ACT_OK = 0
SKB_CTX_BYTES, SKB_TSTAMP_AT = 192, 152          # struct __sk_buff (uapi)
LINE_BPS = 1e9
SENDER, RECEIVER = 5, 9                           # a connection: QP 5 sends to QP 9
SLACK_NS = 20_000


@pytest.fixture(scope="module")
def loaded_nic():
    n = Nic()          # compiling takes seconds: once per module, reset per test
    yield n
    n.close()


@pytest.fixture
def nic(loaded_nic):
    loaded_nic.reset(qps=range(16), procs=range(4))
    loaded_nic.configure(LINE_BPS, SLACK_NS, 50_000, core_params(DcqcnConfig()))
    loaded_nic.add_qp(SENDER, RECEIVER)
    loaded_nic.add_qp(RECEIVER, SENDER)
    return loaded_nic


def data(psn=0, ecn=roce.ECT0, opcode=roce.WRITE_ONLY, payload=1000, src=SENDER, dst=RECEIVER, ackreq=False):
    addr = roce.FlowAddr(sport=sender_sport(src))
    return roce.data_packet(opcode, dst, psn, b"x" * payload, addr=addr, ecn=ecn, ackreq=ackreq)


def rx(nic, frame):
    return prog_test_run(nic.rx_fn.fd, frame)


def tx(nic, frame):
    return prog_test_run(nic.tx_fn.fd, frame, ctx=bytes(SKB_CTX_BYTES))


def ip_checksum_ok(frame: bytes) -> bool:
    ihl = (frame[IP_AT] & 0x0F) * 4
    words = struct.unpack(f"!{ihl // 2}H", frame[IP_AT:IP_AT + ihl])
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def test_map_structs_match_their_mirrors(nic):
    for name, mirror in [("nic_config", NicConfig), ("qp_ctx", QpCtx), ("qp_tx", QpTx), ("qp_rx", QpRx),
                         ("qp_cc", QpCc)]:
        assert ctypes_fields(nic.bpf[name].Leaf) == ctypes_fields(mirror), name


def test_crc_table_gives_zlibs_crc32():
    table = crc32_table()
    data_ = bytes(random.Random(1).randrange(256) for _ in range(300))
    crc = 0xFFFFFFFF
    for b in data_:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    assert crc ^ 0xFFFFFFFF == zlib.crc32(data_)


def test_ce_marked_data_becomes_a_valid_cnp_to_the_sender(nic):
    frame = data(ecn=roce.CE)
    result = rx(nic, frame)
    assert result.verdict == XDP_TX
    cnp = result.data_out
    p = roce.parse(cnp)
    assert (p.opcode, p.dest_qp, p.psn, p.becn, p.ecn) == (roce.CNP, SENDER, 0, True, roce.NOT_ECT)
    assert cnp[IP_AT + 1] >> 2 == roce.CNP_DSCP
    assert len(cnp) == 14 + 20 + 8 + 12 + 16 + 4
    assert cnp[0:6] == frame[6:12] and cnp[6:12] == frame[0:6]                  # MACs swapped
    assert p.src_ip == roce.parse(frame).dst_ip and p.dst_ip == roce.parse(frame).src_ip
    assert ip_checksum_ok(cnp)
    assert roce.icrc_valid(cnp)                       # the independent Python ICRC
    assert cnp[IP_AT + 20 + 8 + 12:IP_AT + 20 + 8 + 12 + 16] == bytes(16)
    r = nic.rx(RECEIVER)
    assert (r.packets, r.ce_packets, r.cnps_sent) == (1, 1, 1)
    if tshark.available():
        (row,) = tshark.decode_frames([cnp])
        assert (row["opcode"], row["destqp"], row["psn"]) == (0x81, SENDER, 0)


def test_at_most_one_cnp_per_qp_per_interval(nic):
    nic.configure(LINE_BPS, 20_000, 200_000_000, core_params(DcqcnConfig()))
    verdicts = [rx(nic, data(psn=i, ecn=roce.CE)).verdict for i in range(5)]
    assert verdicts == [XDP_TX] + [XDP_DROP] * 4
    nic.configure(LINE_BPS, 20_000, 1_000, core_params(DcqcnConfig()))
    time.sleep(0.001)
    assert rx(nic, data(psn=5, ecn=roce.CE)).verdict == XDP_TX
    r = nic.rx(RECEIVER)
    assert (r.ce_packets, r.cnps_sent) == (6, 2)


def test_a_cnp_cuts_the_senders_rate_exactly_as_the_host_library(nic):
    cnp = roce.cnp_packet(SENDER, addr=roce.FlowAddr(sport=sender_sport(RECEIVER)))
    cut_times = []
    for _ in range(3):
        assert rx(nic, cnp).verdict == XDP_DROP
        st = nic.cc_state(SENDER)
        cut_times.append(st.last_cut_hi << 32 | st.last_cut_lo)
        time.sleep(0.0002)                           # past the monitor period
    host = HostCC().run(core_params(DcqcnConfig()), [Event(kind=EV_CNP, now_ns=t) for t in cut_times])
    assert nic.cc_state(SENDER).key() == host[-1].key()
    assert nic.tx(SENDER).cnps_received == 3


def test_a_delayed_cnp_takes_effect_at_its_due_time(nic):
    """Links without delay: the feedback delay is added at the reaction
    point. A CNP waits; one arriving meanwhile is merged away; the next
    CNP or packet after the due time applies it as of that time."""
    delay = 3_000_000
    nic.add_qp(SENDER, RECEIVER, cnp_delay_ns=delay)
    fresh = nic.cc_state(SENDER).key()
    cnp = roce.cnp_packet(SENDER, addr=roce.FlowAddr(sport=sender_sport(RECEIVER)))
    assert rx(nic, cnp).verdict == XDP_DROP
    due = nic.cc(SENDER).cnp_due_ns
    assert due > 0 and nic.cc_state(SENDER).key() == fresh          # no effect yet
    rx(nic, cnp)
    assert nic.tx(SENDER).cnps_merged == 1 and nic.cc(SENDER).cnp_due_ns == due
    time.sleep(delay / 1e9 + 0.001)
    rx(nic, cnp)                                   # the waiting one applies; this one waits
    (expected,) = HostCC().run(core_params(DcqcnConfig()), [Event(kind=EV_CNP, now_ns=due)])
    assert nic.cc_state(SENDER).key() == expected.key()
    second_due = nic.cc(SENDER).cnp_due_ns
    assert second_due > due + delay and nic.tx(SENDER).cnps_received == 3
    time.sleep(delay / 1e9 + 0.001)
    frame = data()
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)        # bpf_ktime_get_ns's clock
    tx(nic, frame)                                 # a packet after the due time applies it
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert nic.cc(SENDER).cnp_due_ns == 0
    # the packet's time, from the departure it published: a fresh QP's
    # departure is now - slack + its bytes at the rate after the packet
    st = nic.cc_state(SENDER)
    tx_ns = len(frame) * round(8e12 / LINE_BPS) * (1 << 20) // st.rc // 1000
    sent_at = nic.tx(SENDER).next_departure_ns - tx_ns + SLACK_NS
    assert before <= sent_at <= after
    (*_, expected) = HostCC().run(core_params(DcqcnConfig()), [
        Event(kind=EV_CNP, now_ns=due), Event(kind=EV_CNP, now_ns=second_due),
        Event(kind=EV_TX, bytes=len(frame) & ~31, now_ns=sent_at)])
    assert st.key() == expected.key()
    assert nic.cc(SENDER).tx_residue_bytes == len(frame) % 32


def test_sent_bytes_reach_the_core_in_32_byte_units_with_the_rest_carried(nic):
    """As DOCA PCC's TX counter reports them: three frames whose sizes
    are not multiples of 32 feed the byte counter their running total,
    rounded down to a unit, and the core's accumulator shows exactly that."""
    frames = [data(psn=i, payload=size) for i, size in enumerate((1000, 1013, 77))]
    total = 0
    for frame in frames:
        tx(nic, frame)
        total += len(frame)
        cc = nic.cc(SENDER)
        assert cc.tx_residue_bytes == total % 32
        assert cc.st.byte_acc == total - total % 32         # below rpg_byte_reset: nothing else moved it


@pytest.fixture(scope="module")
def tracing_nic():
    n = Nic(cc_trace_records=4)
    yield n
    n.close()


def test_a_trace_records_each_cc_event_with_the_state_it_left(tracing_nic):
    """What the DOCA harness replays: every call into the core (a delayed
    CNP applied before a packet's bytes is two), numbered per QP, with the
    hook in force and the state after it, which the host library
    reproduces from the recorded inputs."""
    nic = tracing_nic
    nic.reset(qps=range(16), procs=range(4))
    nic.configure(LINE_BPS, SLACK_NS, 50_000, core_params(DcqcnConfig()))
    nic.add_qp(SENDER, RECEIVER, proc=2, cnp_delay_ns=100_000)
    nic.add_qp(RECEIVER, SENDER)
    nic.set_hook(2, Hook(weight=3 * 1024))
    cnp = roce.cnp_packet(SENDER, addr=roce.FlowAddr(sport=sender_sport(RECEIVER)))
    tx(nic, data(psn=0))
    rx(nic, cnp)                                     # waits 100 us: no event yet
    time.sleep(0.001)
    tx(nic, data(psn=1, payload=999))                # the CNP, then the bytes
    records = cc_trace_records(nic.drain_cc_trace())
    assert [(r.qpn, r.seq, r.kind) for r in records] == [(SENDER, 1, EV_TX), (SENDER, 2, EV_CNP),
                                                         (SENDER, 3, EV_TX)]
    assert all(r.hook.weight == 3 * 1024 for r in records)
    assert [r.bytes % 32 for r in records] == [0, 0, 0]
    states = HostCC().run(core_params(DcqcnConfig()), [Event(kind=r.kind, bytes=r.bytes, now_ns=r.now_ns,
                                                             hook=r.hook) for r in records])
    assert [s.key() for s in states] == [r.st.key() for r in records]
    assert records[-1].st.key() == nic.cc_state(SENDER).key()
    assert nic.drain_cc_trace() == b""
    for psn in range(2, 7):                          # five events into a ring of four, no drain between
        tx(nic, data(psn=psn))
    with pytest.raises(RuntimeError, match="lapped: 1 records overwritten"):
        nic.drain_cc_trace()


def test_the_responder_takes_packets_in_psn_order_only(nic):
    """Go-back-N at the responder: PSN 4 while 2 is expected is dropped and
    NAKs 2; 5 and 6 behind the gap drop silently (one NAK per gap); 2 and 3
    (resent) are taken; 2 again is a duplicate."""
    arrivals = [(0, roce.WRITE_FIRST), (1, roce.WRITE_MIDDLE), (4, roce.WRITE_MIDDLE), (5, roce.WRITE_LAST),
                (6, roce.SEND_ONLY), (2, roce.WRITE_MIDDLE), (3, roce.WRITE_MIDDLE), (2, roce.WRITE_MIDDLE),
                (4, roce.WRITE_MIDDLE), (5, roce.WRITE_LAST), (6, roce.SEND_ONLY)]
    verdicts = [rx(nic, data(psn=psn, opcode=op)).verdict for psn, op in arrivals]
    assert verdicts == [XDP_DROP, XDP_DROP, XDP_TX] + [XDP_DROP] * 8     # data is placed, not passed up
    r = nic.rx(RECEIVER)
    assert (r.packets, r.delivered_packets, r.out_of_sequence, r.duplicates) == (11, 7, 3, 1)
    assert (r.messages, r.expected_psn, r.naks_sent, r.acks_sent, r.nak_outstanding) == (2, 7, 1, 0, 0)
    size = len(data(opcode=roce.WRITE_MIDDLE))
    assert r.bytes == sum(len(data(psn=psn, opcode=op)) for psn, op in arrivals)
    assert r.delivered_bytes == sum(len(data(psn=psn, opcode=op)) for psn, op in arrivals[:2]) + \
        2 * size + sum(len(data(psn=psn, opcode=op)) for psn, op in arrivals[-3:])
    assert [(r.taken[m].msn, r.taken[m].ns > 0) for m in (1, 2)] == [(1, True), (2, True)]
    assert r.taken[1].ns <= r.taken[2].ns == r.last_message_ns
    assert nic.doorbell() == 2                                  # a ring per message taken


def _reply(frame: bytes, expect_kind: str):
    """The ACK or NAK frame: checked whole, then its (PSN, syndrome, MSN)."""
    p = roce.parse(frame)
    assert (p.opcode, p.dest_qp, p.ecn, p.sport) == (roce.ACK, SENDER, roce.NOT_ECT, sender_sport(RECEIVER))
    assert len(frame) == 14 + 20 + 8 + 12 + 4 + 4 and ip_checksum_ok(frame) and roce.icrc_valid(frame)
    aeth = frame[IP_AT + 20 + 8 + 12:][:4]
    syndrome, msn = aeth[0], int.from_bytes(aeth[1:], "big")
    assert (syndrome >> 5) == {"ack": 0, "nak": 3}[expect_kind]
    if tshark.available():
        (row,) = tshark.decode_frames([frame])
        assert (row["opcode"], row["destqp"], row["psn"]) == (roce.ACK, SENDER, p.psn)
    return p.psn, syndrome, msn


def test_ack_and_nak_frames_are_valid_rc_replies(nic):
    assert _reply(rx(nic, data(psn=0, ackreq=True)).data_out, "ack") == (0, 0x1F, 1)
    assert _reply(rx(nic, data(psn=3)).data_out, "nak") == (1, 0x60, 1)         # 1 expected
    assert _reply(rx(nic, data(psn=0, ackreq=True)).data_out, "ack") == (0, 0x1F, 1)  # duplicate: re-ACK
    assert rx(nic, data(psn=0)).verdict == XDP_DROP                            # one without AckReq: silent
    r = nic.rx(RECEIVER)
    assert (r.acks_sent, r.naks_sent, r.duplicates) == (2, 1, 2)


def test_an_ack_displaces_a_cnp_which_the_next_ce_packet_sends(nic):
    assert _reply(rx(nic, data(psn=0, ecn=roce.CE, ackreq=True)).data_out, "ack")[0] == 0
    assert roce.parse(rx(nic, data(psn=1, ecn=roce.CE)).data_out).opcode == roce.CNP
    assert nic.rx(RECEIVER).cnps_sent == 1


def _from_receiver(psn: int, syndrome: int, msn: int = 0) -> bytes:
    return roce.ack_packet(SENDER, psn, msn, syndrome=syndrome, addr=roce.FlowAddr(sport=sender_sport(RECEIVER)))


def test_the_requester_records_acks_and_naks_for_the_engine(nic):
    assert rx(nic, _from_receiver(9, 0x1F, msn=3)).verdict == XDP_DROP
    t = nic.tx(SENDER)
    assert (t.acked_psn, t.acks, t.naks, t.acked_msn) == (10, 1, 0, 3) and t.last_ack_ns > 0
    assert (t.acked[3].msn, t.acked[3].ns) == (3, t.last_ack_ns) and nic.doorbell() == 1
    rx(nic, _from_receiver(4, 0x1F, msn=2))                   # older: acknowledges nothing new
    t = nic.tx(SENDER)
    assert (t.acked_psn, t.acks, t.acked_msn, t.acked[2].msn) == (10, 2, 3, 0) and nic.doorbell() == 1
    rx(nic, _from_receiver(12, 0x60, msn=3))                  # NAK: 10, 11 arrived; resend from 12
    t = nic.tx(SENDER)
    assert (t.acked_psn, t.nak_psn, t.naks) == (12, 12, 1) and nic.doorbell() == 2
    rx(nic, _from_receiver(13, 0x61))                         # a NAK for another reason: ignored
    rx(nic, _from_receiver(roce.PSN_MASK, 0x1F))              # PSNs compare modulo 2^24: behind
    assert (nic.tx(SENDER).acked_psn, nic.tx(SENDER).naks, nic.doorbell()) == (12, 1, 2)
    rx(nic, _from_receiver(20, 0x1F, msn=3 + 40))             # 40 messages at once: the ring wraps
    t = nic.tx(SENDER)
    assert t.acked_msn == 43 and t.acked[43 % 32].msn == 43 and t.acked[3].msn == 3


def test_debug_switch_passes_received_data_up(nic):
    nic.configure(LINE_BPS, 20_000, 50_000, core_params(DcqcnConfig()), flags=F_PASS_DATA)
    frame = data()
    result = rx(nic, frame)
    assert result.verdict == XDP_PASS and result.data_out == frame
    assert nic.rx(RECEIVER).packets == 1


def test_nic_tx_sets_ect0_with_a_valid_checksum_and_keeps_ce(nic):
    out = tx(nic, data(ecn=roce.NOT_ECT)).data_out
    assert roce.parse(out).ecn == roce.ECT0 and ip_checksum_ok(out) and roce.icrc_valid(out)
    assert roce.parse(tx(nic, data(psn=1, ecn=roce.CE)).data_out).ecn == roce.CE


def test_nic_tx_publishes_departures_at_the_qps_rate_and_counts_early_packets(nic):
    nic.set_hook(0, Hook(rate_cap=1 << 12))          # 1/256 of line rate: 6 ms a packet,
    frame = data(payload=3000)                       # far longer than a test run takes
    first = tx(nic, frame)
    t1 = nic.tx(SENDER)
    second = tx(nic, frame)                          # immediately: before its departure time
    t2 = nic.tx(SENDER)
    assert first.verdict == second.verdict == TC_ACT_OK
    wire_ns = len(frame) * 8 / (LINE_BPS / 256) * 1e9
    assert t2.next_departure_ns - t1.next_departure_ns == pytest.approx(wire_ns, abs=2)
    assert (t1.early_packets, t2.early_packets) == (0, 1)
    assert (t2.packets, t2.bytes, t2.rate) == (2, 2 * len(frame), 1 << 12)
    tstamp = struct.unpack_from("<Q", second.ctx_out, SKB_TSTAMP_AT)[0]
    assert tstamp == 0                               # the cooperative pacer: no kernel timestamp


def test_kernel_pacer_stamps_the_departure_time(nic):
    nic.configure(LINE_BPS, 20_000, 50_000, core_params(DcqcnConfig()), flags=F_KERNEL_PACER)
    nic.set_hook(0, Hook(rate_cap=1 << 16))
    frame = data(payload=3000)
    tx(nic, frame)
    allowed = nic.tx(SENDER).next_departure_ns
    second = tx(nic, frame)
    assert struct.unpack_from("<Q", second.ctx_out, SKB_TSTAMP_AT)[0] == allowed


def _skb_test_frame(frame: bytes) -> bool:
    """Frames the kernel builds a test skb from: at most about a page, and
    an IPv4/IPv6 ethertype needs a whole network header behind it (no skb
    at TC egress looks otherwise)."""
    need = {b"\x08\x00": 34, b"\x86\xdd": 54}.get(frame[12:14], 14)
    return need <= len(frame) <= 3500


def _aeth_at(frame: bytes) -> int:
    return IP_AT + (frame[IP_AT] & 0x0F) * 4 + 8 + 12


def test_random_frames_touch_only_what_they_should(nic):
    """>= 5,000 random frames through each program: non-RoCE, truncated and
    malformed frames pass unchanged; RoCE frames for QPs the NIC does not
    know pass too; every counter ends where a Python parser says it should,
    so no frame touched state it should not have."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    nic.configure(LINE_BPS, 20_000, 10**15, core_params(DcqcnConfig()))   # one CNP per QP
    known = range(1, 8)
    for q in known:
        nic.add_qp(q, 8 - q)
    seen = []
    want = {q: {"rx": [0, 0, 0], "tx": [0, 0], "cnps": 0, "acks": 0, "naks": 0} for q in known}

    @settings(max_examples=600, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(mutated_frames(), min_size=9, max_size=9))
    def check(frames):
        for frame in frames:
            seen.append(frame)
            p = roce.parse(frame)
            r = rx(nic, frame)
            t = tx(nic, frame) if _skb_test_frame(frame) else None
            rx_qp = p is not None and p.dest_qp in known
            tx_qp = p is not None and p.sport >> 14 == 3 and (p.sport & 0x3FFF) in known
            if rx_qp and p.opcode <= 0x0B:           # data for a known QP: placed or answered
                want[p.dest_qp]["rx"] = [a + b for a, b in zip(want[p.dest_qp]["rx"],
                                                              (1, p.wire_bytes, p.ecn == roce.CE))]
                # placed (dropped from the stack), or answered: an ACK or NAK, or a CNP if CE-marked
                reply = roce.parse(r.data_out).opcode if r.verdict == XDP_TX else None
                assert r.verdict == XDP_DROP or reply == roce.ACK or (reply == roce.CNP and p.ecn == roce.CE)
            elif rx_qp and p.opcode == roce.CNP:
                want[p.dest_qp]["cnps"] += 1
                assert r.verdict == XDP_DROP
            elif rx_qp and p.opcode == roce.ACK and p.wire_bytes >= _aeth_at(frame) + 8:
                syndrome = frame[_aeth_at(frame)]
                want[p.dest_qp]["acks"] += syndrome >> 5 == 0
                want[p.dest_qp]["naks"] += syndrome == 0x60
                assert r.verdict == XDP_DROP
            else:
                assert (r.verdict, r.data_out) == (XDP_PASS, frame)
            if t is not None:
                assert t.verdict == TC_ACT_OK
                if tx_qp and p.opcode <= 0x0B:
                    want[p.sport & 0x3FFF]["tx"][0] += 1
                    want[p.sport & 0x3FFF]["tx"][1] += p.wire_bytes
                else:
                    assert t.data_out == frame

    check()
    assert len(seen) >= 5000
    got = {q: {"rx": [nic.rx(q).packets, nic.rx(q).bytes, nic.rx(q).ce_packets],
               "tx": [nic.tx(q).packets, nic.tx(q).bytes], "cnps": nic.tx(q).cnps_received,
               "acks": nic.tx(q).acks, "naks": nic.tx(q).naks}
           for q in known}
    assert got == want
    assert sum(w["rx"][0] for w in want.values()) > 100     # the mix exercised the data path


def test_nic_tx_stamps_the_departure_as_the_switches_wire_time(nic):
    """The UDP checksum (zero in RoCEv2, outside the ICRC) carries the
    departure in microseconds modulo 2^16 (bpf/include/vtime.h)."""
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    out = tx(nic, data()).data_out
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    stamp = int.from_bytes(out[IP_AT + 26:IP_AT + 28], "big")
    assert stamp in {t & 0xFFFF or 1 for t in range(before, after + 1)}   # a fresh QP leaves now
    assert roce.icrc_valid(out)
