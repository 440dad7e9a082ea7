"""bpf/roce_count on crafted frames (PROG_TEST_RUN), then on a real veth."""
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane import roce
from dataplane.prog_test_run import prog_test_run
from dataplane.shared import read_qp_counters
from frames import IP_AT, patch, mutated_frames, with_ip_options

XDP_PASS = 2
pytestmark = [pytest.mark.bcc, pytest.mark.root]


@pytest.fixture
def prog(roce_count):
    """The loaded program with empty counters: (run(frame) -> result, counters())."""
    bpf, fd = roce_count
    table = bpf["qp_counters"]
    table.clear()
    return (lambda frame: prog_test_run(fd, frame)), (lambda: read_qp_counters(table))


def expected_counts(frames):
    """What the Python parser says the counters should be."""
    packets, nbytes = Counter(), Counter()
    for parsed in filter(None, map(roce.parse, frames)):
        packets[parsed.dest_qp] += 1
        nbytes[parsed.dest_qp] += parsed.wire_bytes
    return {qp: (packets[qp], nbytes[qp]) for qp in packets}


def test_counts_packets_and_bytes_per_destination_qp_exactly(prog):
    run, counters = prog
    frames = (roce.segment_message("write", 1, 0, 10_000, 2048)        # 5 packets
              + roce.segment_message("send", 2, 50, 3000, 1024)        # 3 packets
              + [roce.ack_packet(3, 9), roce.cnp_packet(0xFFFFFF)]
              + [roce.data_packet(roce.SEND_ONLY, 1, 7, b"z" * 10)])
    for frame in frames:
        result = run(frame)
        assert result.verdict == XDP_PASS and result.data_out == frame
    got = counters()
    assert got == {
        1: (6, sum(len(f) for f in frames[:5]) + len(frames[-1])),
        2: (3, sum(len(f) for f in frames[5:8])),
        3: (1, len(frames[8])),
        0xFFFFFF: (1, len(frames[9])),
    }


def test_counts_ip_options_and_excludes_trailer_padding(prog):
    run, counters = prog
    frame = roce.data_packet(roce.SEND_ONLY, 5, 0, b"abc")
    run(with_ip_options(frame))
    run(frame + b"\x00" * 20)           # Ethernet padding after the IP packet
    assert counters() == {5: (2, len(frame) + 4 + len(frame))}


def test_counts_a_multi_buffer_jumbo_frame_whole(prog):
    # Test frames over ~3.5 KB become multi-buffer: the length must come
    # from the whole buffer, not from the linear part.
    run, counters = prog
    frame = roce.data_packet(roce.WRITE_ONLY, 9, 0, bytes(8192))
    assert run(frame).verdict == XDP_PASS
    assert counters() == {9: (1, len(frame))}


BASE = roce.data_packet(roce.SEND_ONLY, 1, 1, b"x" * 40)
NOT_COUNTED = {
    "eth-only": BASE[:14],
    "arp": b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + bytes(28),
    "vlan-tagged": BASE[:12] + b"\x81\x00\x00\x05" + BASE[12:],
    "ipv6-ethertype": patch(BASE, 12, "!H", 0x86DD),
    "short-ip-header": BASE[:IP_AT + 19],
    "cut-in-udp": BASE[:IP_AT + 24],
    "cut-in-bth": BASE[:IP_AT + 28 + 11],
    "ip-longer-than-frame": BASE[:-1],
    "ip-version-6": patch(BASE, IP_AT, "!B", 0x65),
    "ihl-4": patch(BASE, IP_AT, "!B", 0x44),
    "ihl-15-beyond-frame": patch(BASE[:IP_AT + 50], IP_AT, "!B", 0x4F),
    "more-fragments": patch(BASE, IP_AT + 6, "!H", 0x2000),
    "fragment-offset": patch(BASE, IP_AT + 6, "!H", 0x0001),
    "tcp": patch(BASE, IP_AT + 9, "!B", 6),
    "udp-other-port": patch(BASE, IP_AT + 22, "!H", 4792),
    "udp-len-mismatch": patch(BASE, IP_AT + 24, "!H", 30),
    "udp-len-too-small": patch(patch(BASE[:IP_AT + 20 + 8 + 12 + 3], IP_AT + 2, "!H", 43),
                               IP_AT + 24, "!H", 23),
    "ip-total-length-tiny": patch(BASE, IP_AT + 2, "!H", 10),
}


@pytest.mark.parametrize("frame", NOT_COUNTED.values(), ids=NOT_COUNTED.keys())
def test_non_roce_truncated_and_malformed_frames_pass_untouched(prog, frame):
    run, counters = prog
    assert roce.parse(frame) is None    # the cases are what they claim to be
    result = run(frame)
    assert result.verdict == XDP_PASS
    assert result.data_out == frame
    assert counters() == {}


def test_random_frames_keep_counters_equal_to_the_python_parser(prog):
    run, counters = prog
    seen = []

    @settings(max_examples=250, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(mutated_frames(), min_size=8, max_size=12))
    def check(frames):
        before = counters()
        for frame in frames:
            result = run(frame)
            assert result.verdict == XDP_PASS and result.data_out == frame
        seen.extend(frames)
        after = counters()
        delta = {qp: (after[qp][0] - before.get(qp, (0, 0))[0], after[qp][1] - before.get(qp, (0, 0))[1])
                 for qp in after}
        assert {qp: d for qp, d in delta.items() if d != (0, 0)} == expected_counts(frames)

    check()
    assert len(seen) >= 2000
    assert counters() == expected_counts(seen)
    valid = sum(roce.parse(f) is not None for f in seen)
    assert 0.2 * len(seen) < valid < 0.9 * len(seen), "the mix must hold both kinds"


@pytest.mark.netns
@pytest.mark.parametrize("mode", ["native", "generic"])
def test_real_frames_across_a_veth_are_counted_per_qp(mode):
    from dataplane.xdp_probe import count_on_veth
    from testbed.isolated import run_isolated

    frames = (roce.segment_message("write", 0x10, 0, 20_000, 2048, addr=roce.FlowAddr(sport=50000))
              + roce.segment_message("send", 0x20, 0, 5000, 2048, addr=roce.FlowAddr(sport=50001))
              + [NOT_COUNTED["arp"], NOT_COUNTED["udp-other-port"]])
    got = run_isolated(count_on_veth, frames, mode, 3000, timeout_s=60)
    assert got.counters == expected_counts(frames)
