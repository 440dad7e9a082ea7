"""bpf/switch_port.c through BPF_PROG_TEST_RUN: RED marking on the queue
model, the model's drain at the port rate, and frames it must not touch.
Test runs name the port by ifindex 1 (lo exists in every namespace, and the
kernel looks the device up)."""
import struct
import time

import pytest

from dataplane import roce
from dataplane.prog_test_run import prog_test_run
from dataplane.switch import SwitchPorts
from scenario.ecn import RedConfig
from frames import IP_AT, mutated_frames
from test_nic import SKB_CTX_BYTES, ip_checksum_ok

pytestmark = [pytest.mark.bcc, pytest.mark.root]
PORT = 1
TC_ACT_OK, TC_ACT_SHOT = 0, 2


@pytest.fixture(scope="module")
def loaded_ports():
    ports = SwitchPorts()
    yield ports
    ports.close()


@pytest.fixture
def ports(loaded_ports):
    # 10 kbit/s: a 1 KB packet takes 0.8 s to drain, so the queue the tests
    # build stays put while they run
    loaded_ports.configure_port(PORT, 1e4, RedConfig(10_000, 20_000, 0.5), limit_bytes=40_000, faces_host=True)
    return loaded_ports


def run(ports, frame):
    ctx = bytearray(SKB_CTX_BYTES)
    struct.pack_into("<I", ctx, 40, PORT)                 # __sk_buff.ifindex
    return prog_test_run(ports.fn.fd, frame, ctx=bytes(ctx))


def data(ecn=roce.ECT0, payload=958):
    return roce.data_packet(roce.WRITE_MIDDLE, 7, 1, bytes(payload), ecn=ecn)   # 1,018 bytes


def test_no_marks_below_kmin_and_every_ect_packet_marked_above_kmax(ports):
    frame = data()
    n = 40_000 // len(frame)                               # as many as the buffer holds
    outs = [run(ports, frame).data_out for _ in range(n)]
    queues = [len(frame) * i for i in range(n)]            # nothing drains meanwhile (to 1%)
    for q, out in zip(queues, outs):
        ce = roce.parse(out).ecn == roce.CE
        if q <= 10_000:
            assert not ce, q
        elif q > 20_000:
            assert ce, q
        if ce:
            assert ip_checksum_ok(out)
    s = ports.stats(PORT)
    assert s.packets == n and s.ect_packets == n and s.drops == 0
    assert s.marked == sum(roce.parse(o).ecn == roce.CE for o in outs)
    assert s.q_max == pytest.approx((n - 1) * len(frame), rel=0.02)


def test_marking_probability_rises_linearly_between_kmin_and_kmax(loaded_ports):
    loaded_ports.configure_port(PORT, 1e3, RedConfig(0, 2_000_000, 1.0), limit_bytes=10**9, faces_host=True)
    marked_at = []
    for i in range(1500):
        out = run(loaded_ports, data(payload=958)).data_out
        marked_at.append((1024 * i, roce.parse(out).ecn == roce.CE))
    for lo, hi in [(0, 500_000), (500_000, 1_000_000), (1_000_000, 1_500_000)]:
        window = [m for q, m in marked_at if lo <= q < hi]
        expected = (lo + hi) / 2 / 2_000_000
        assert sum(window) / len(window) == pytest.approx(expected, abs=0.08), (lo, hi)


def test_the_queue_model_drains_at_the_port_rate(ports):
    ports.configure_port(PORT, 1e6, RedConfig(10_000, 20_000, 0.5), limit_bytes=40_000, faces_host=True)
    for _ in range(20):
        run(ports, data())
    before = ports.stats(PORT).q_bytes + 1024
    time.sleep(0.05)                                       # 50 ms at 1 Mbit/s: 6,250 bytes
    run(ports, data())
    after = ports.stats(PORT).q_bytes
    assert before - after == pytest.approx(6_250, abs=600)


def test_a_full_buffer_tail_drops_and_the_model_never_exceeds_it(ports):
    frame = data()
    verdicts = [run(ports, frame).verdict for _ in range(60)]
    fit = 40_000 // len(frame)
    assert verdicts == [TC_ACT_OK] * fit + [TC_ACT_SHOT] * (60 - fit)
    st = ports.stats(PORT)
    assert st.q_max <= 40_000 and st.drops == 60 - fit and st.packets == fit


def test_non_ect_and_non_ip_frames_are_never_changed_but_occupy_the_queue(ports):
    for _ in range(30):
        frame = data(ecn=roce.NOT_ECT)
        assert run(ports, frame).data_out == frame
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + bytes(46)
    assert run(ports, arp).data_out == arp
    s = ports.stats(PORT)
    assert (s.packets, s.ect_packets, s.marked) == (31, 0, 0)
    assert s.q_bytes >= 29 * 1024 * 0.98


def test_random_frames_pass_and_change_only_by_a_ce_mark_and_the_wire_time(loaded_ports):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from test_nic import _skb_test_frame

    loaded_ports.configure_port(PORT, 1e3, RedConfig(0, 1, 1.0), limit_bytes=10**9, faces_host=True)  # mark all ECT
    seen = []

    @settings(max_examples=600, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(mutated_frames(), min_size=10, max_size=10))
    def check(frames):
        for frame in frames:
            if not _skb_test_frame(frame):
                continue
            seen.append(frame)
            out = run(loaded_ports, frame)
            assert out.verdict == TC_ACT_OK
            ip_v4 = frame[12:14] == b"\x08\x00" and frame[IP_AT] >> 4 == 4
            expected = bytearray(frame)
            if roce.parse(frame) is not None:                  # what the NICs take for RoCEv2
                udp_at = IP_AT + (frame[IP_AT] & 0xF) * 4
                expected[udp_at + 6:udp_at + 8] = b"\0\0"          # a last hop clears the wire time
            if ip_v4 and frame[IP_AT + 1] & 3 and len(frame) >= IP_AT + 20:
                assert out.data_out[IP_AT + 1] & 3 == 3                       # CE
                assert out.data_out[:IP_AT + 1] == expected[:IP_AT + 1]
                assert out.data_out[IP_AT + 12:] == expected[IP_AT + 12:]
            else:
                assert out.data_out == expected

    check()
    assert len(seen) >= 5000
    assert loaded_ports.stats(PORT).packets == len(seen)


def test_lossless_port_pauses_its_senders_until_the_queue_drains_to_xon(loaded_ports):
    # 10 kbit/s: a byte takes 0.8 ms (8e8 ps)
    loaded_ports.configure_port(PORT, 1e4, RedConfig(10_000, 20_000, 0.0, lossless=True,
                                                     xoff_bytes=8_000, xon_bytes=4_000),
                                limit_bytes=40_000, faces_host=True)
    for _ in range(7):                                     # 7 KB: below Xoff
        run(loaded_ports, data())
    assert loaded_ports.stats(PORT).pause_until_ns == 0
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    run(loaded_ports, data())                              # 8 KB: Xoff reached
    s = loaded_ports.stats(PORT)
    expected = before + (8 * 1024 - 4_000) * 800_000_000 // 1000      # draining to Xon: 3.35 s
    assert s.pause_until_ns == pytest.approx(expected, abs=100_000_000)
    assert s.pause_events == 1
    assert s.paused_ns == pytest.approx(s.pause_until_ns - before, abs=100_000_000)
    run(loaded_ports, data())                              # still paused: same event, later end
    s2 = loaded_ports.stats(PORT)
    assert s2.pause_events == 1 and s2.pause_until_ns > s.pause_until_ns
    assert s2.paused_ns - s.paused_ns == s2.pause_until_ns - s.pause_until_ns     # the overlap counted once


def test_default_thresholds_leave_the_headroom_above_xoff():
    """Xoff defaults to the buffer less the headroom, Xon to Xoff less it,
    never below half; a scenario's own values win."""
    red = RedConfig(lossless=True)
    assert (red.xoff(1_000_000, 58_000), red.xon(1_000_000, 58_000)) == (942_000, 884_000)
    assert (red.xoff(100_000, 58_000), red.xon(100_000, 58_000)) == (50_000, 25_000)
    own = RedConfig(lossless=True, xoff_bytes=300_000, xon_bytes=200_000)
    assert (own.xoff(1_000_000, 58_000), own.xon(1_000_000, 58_000)) == (300_000, 200_000)



def test_ports_without_lossless_never_pause(ports):
    for _ in range(60):
        run(ports, data())
    assert ports.stats(PORT).pause_until_ns == 0 and ports.stats(PORT).pause_events == 0


def test_map_structs_match_their_mirrors(loaded_ports):
    from dataplane.layout import ctypes_fields
    from dataplane.switch import PortCfg, PortStats
    assert ctypes_fields(loaded_ports.bpf["port_cfg"].Leaf) == ctypes_fields(PortCfg)
    assert ctypes_fields(loaded_ports.bpf["port_stats"].Leaf) == ctypes_fields(PortStats)


UDP_CSUM_AT = IP_AT + 26            # where RoCEv2 packets carry their virtual wire time


def stamped(frame: bytes, stamp: int) -> bytes:
    return frame[:UDP_CSUM_AT] + stamp.to_bytes(2, "big") + frame[UDP_CSUM_AT + 2:]


def wire_time(frame: bytes) -> int:
    return int.from_bytes(frame[UDP_CSUM_AT:UDP_CSUM_AT + 2], "big")


@pytest.mark.parametrize("shift", [0, 3])
def test_packets_are_queued_by_their_virtual_wire_time_not_by_processing_time(loaded_ports, shift):
    """Five packets processed back to back, but stamped as they left the
    previous node one serialisation time apart, find an empty queue; the
    same packets unstamped find a growing one. A fabric port restamps each
    with the time it leaves the model queue, in units of 2^shift us."""
    def configure():
        loaded_ports.configure_port(PORT, 1e7, RedConfig(500, 100_000, 1.0), limit_bytes=10**6,
                                    faces_host=False, vtime_shift=shift)

    configure()
    frame = data()
    serialisation_us = len(frame) * 8 // 10               # at 10 Mb/s, rounded down
    gap = (serialisation_us >> shift) + 1                  # in wire-time units
    first = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 >> shift) & 0xFFFF
    outs = [run(loaded_ports, stamped(frame, (first + gap * k) & 0xFFFF)).data_out for k in range(5)]
    st = loaded_ports.stats(PORT)
    assert st.q_max == 0 and st.marked == 0               # each found the queue empty
    assert [wire_time(o) for o in outs] == [(first + gap * k + (serialisation_us >> shift)) & 0xFFFF
                                            for k in range(5)]
    configure()
    for _ in range(5):
        run(loaded_ports, frame)                          # unstamped: timed by processing
    assert loaded_ports.stats(PORT).q_max >= 3 * len(frame)


def test_the_wire_time_unit_covers_the_longest_hop_with_room_for_jitter():
    from dataplane.switch import VTIME_JITTER_NS, vtime_shift_for

    for age_ns in (0, 8_000_000, 80_000_000, 2_000_000_000):
        shift = vtime_shift_for(age_ns)
        covered = lambda s: (1 << 15 << s) * 1000 > age_ns + VTIME_JITTER_NS
        assert covered(shift) and (shift == 0 or not covered(shift - 1))
    assert vtime_shift_for(8_000_000) == 2                # the default (1 MB at 1 Gb/s): 4 us units
    with pytest.raises(ValueError, match="too long"):
        vtime_shift_for(10**13)


def test_a_port_facing_a_host_clears_the_wire_time(ports):
    out = run(ports, stamped(data(), 1234)).data_out
    assert wire_time(out) == 0 and roce.icrc_valid(out)


def test_an_ip_fragment_keeps_its_bytes(ports):
    """A fragment's bytes where a UDP checksum would be are payload."""
    frame = bytearray(stamped(data(ecn=roce.NOT_ECT), 1234))
    frame[IP_AT + 6] |= 0x20                                 # more fragments follow
    assert run(ports, bytes(frame)).data_out == bytes(frame)


@pytest.mark.parametrize("breakage", ["udp length lies", "short bth"])
def test_a_frame_the_nics_reject_as_rocev2_carries_no_wire_time(loaded_ports, breakage):
    """Its UDP checksum is not a stamp: read as one it could move the queue
    model far into the future; a fabric port neither reads nor restamps it."""
    loaded_ports.configure_port(PORT, 1e7, RedConfig(500, 100_000, 1.0), limit_bytes=10**6, faces_host=False)
    frame = bytearray(stamped(data(ecn=roce.NOT_ECT), 0x7FFF))
    if breakage == "udp length lies":
        frame[IP_AT + 24:IP_AT + 26] = (int.from_bytes(frame[IP_AT + 24:IP_AT + 26], "big") - 2).to_bytes(2, "big")
    else:                                           # IP, UDP and the frame end inside the BTH
        frame = frame[:IP_AT + 28 + 6]
        frame[IP_AT + 2:IP_AT + 4] = (28 + 6).to_bytes(2, "big")
        frame[IP_AT + 24:IP_AT + 26] = (8 + 6).to_bytes(2, "big")
    assert roce.parse(bytes(frame)) is None
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    out = run(loaded_ports, bytes(frame)).data_out
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert wire_time(out) == 0x7FFF                        # left as it came
    assert before <= loaded_ports.stats(PORT).last_ns <= after
    good = run(loaded_ports, stamped(data(ecn=roce.NOT_ECT), 0x7FFF)).data_out
    assert wire_time(good) != 0x7FFF                       # a valid frame is restamped
