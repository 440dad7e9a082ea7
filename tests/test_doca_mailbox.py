"""The PRC mailbox to DOCA PCC device code: the device side's C
(bpf/doca/prc_mailbox.h, built for the host) takes a well-formed message
whole, refuses a malformed or stale one without touching any hook and
counts it; the controller runs unchanged over it."""
import ctypes
import dataclasses
from pathlib import Path

import pytest

from control.controller import Controller
from dataplane.cc import RATE_ONE, WEIGHT_ONE, hook
from dataplane.doca_mailbox import (ENTRY, HEADER, MAGIC, MAX_ENTRIES, STATUS, DeviceMailbox, MailboxHooks,
                                    MailboxRejected, MailboxState, encode)
from scenario.spec import load_scenario
from testbed.topology import live_rate_bps
from workload.driver import Workload
from workload.ideal import IdealTransport

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def device():
    return DeviceMailbox()


def _hooks(device):
    return [(h.weight, h.rate_floor, h.rate_cap) for h in (device.hook(p) for p in range(256))]


def test_the_state_mirror_matches_the_c_struct(device):
    assert ctypes.sizeof(MailboxState) == device.lib.prc_mailbox_state_size()


def test_a_message_sets_every_hook_it_names(device):
    msg = encode(1, {3: hook(4.0), 200: hook(2.5, 0.25, 0.75)})
    assert device.handle(msg) == 0
    assert device.hook(3).weight == 4 * WEIGHT_ONE
    h = device.hook(200)
    assert (h.weight, h.rate_floor, h.rate_cap) == (int(2.5 * WEIGHT_ONE), RATE_ONE // 4, 3 * RATE_ONE // 4)
    assert (device.state.taken, device.state.errors, device.state.last_seq) == (1, 0, 1)


def _bad_messages():
    good = encode(5, {1: hook(2.0), 2: hook(3.0)})
    header = HEADER.unpack(good[:HEADER.size])
    entry = lambda proc=1, w=WEIGHT_ONE, f=0, c=0: ENTRY.pack(proc, w, f, c)
    return {
        "short": (good[:HEADER.size - 1], "short"),
        "magic": (HEADER.pack(MAGIC ^ 1, *header[1:]) + good[HEADER.size:], "bad magic"),
        "version": (encode(5, {1: hook(2.0)}, version=2), "bad version"),
        "count beyond the entries": (HEADER.pack(MAGIC, 1, 3, 5) + good[HEADER.size:], "bad length"),
        "trailing bytes": (good + b"\0", "bad length"),
        "too many entries": (HEADER.pack(MAGIC, 1, MAX_ENTRIES + 1, 5) + entry() * (MAX_ENTRIES + 1), "bad length"),
        "process beyond the table": (HEADER.pack(MAGIC, 1, 2, 5) + entry() + entry(proc=256), "bad process"),
        "weight above 64": (HEADER.pack(MAGIC, 1, 2, 5) + entry() + entry(w=64 * WEIGHT_ONE + 1), "bad value"),
        "floor above line": (HEADER.pack(MAGIC, 1, 1, 5) + entry(f=RATE_ONE + 1), "bad value"),
        "floor above cap": (HEADER.pack(MAGIC, 1, 1, 5) + entry(f=RATE_ONE // 2, c=RATE_ONE // 4), "bad value"),
        "the last seq again": (encode(4, {1: hook(2.0)}), "stale"),
        "an older seq": (encode(3, {1: hook(2.0)}), "stale"),
    }


@pytest.mark.parametrize("case", list(_bad_messages()))
def test_a_malformed_or_stale_message_changes_nothing_and_is_counted(device, case):
    assert device.handle(encode(4, {1: hook(1.5), 7: hook(3.0, 0.1)})) == 0
    before = _hooks(device)
    message, status = _bad_messages()[case]
    assert STATUS[device.handle(message)] == status
    assert _hooks(device) == before
    assert (device.state.errors, device.state.taken, device.state.last_seq) == (1, 1, 4)
    assert device.handle(encode(5, {1: hook(2.0)})) == 0 and device.hook(1).weight == 2 * WEIGHT_ONE


def test_seq_moves_on_across_its_wrap(device):
    assert STATUS[device.handle(encode(0x80000000, {0: hook(2.0)}))] == "stale"   # half the space away: behind
    for seq in (0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF):
        assert device.handle(encode(seq, {0: hook(2.0)})) == 0
    assert device.handle(encode(0x1_0000_0000, {0: hook(3.0)})) == 0      # seq 0 follows 2^32 - 1
    assert device.hook(0).weight == 3 * WEIGHT_ONE
    assert STATUS[device.handle(encode(0xFFFFFFFE, {0: hook(9.0)}))] == "stale"


def test_the_actuator_numbers_its_messages_and_says_when_one_is_refused(device):
    hooks = MailboxHooks(device.handle)
    hooks.set(5, 4.0, 0.5)
    hooks.set(5, 1.0)
    assert device.state.last_seq == 2 and device.hook(5).weight == WEIGHT_ONE
    with pytest.raises(MailboxRejected, match="bad process"):
        hooks.set(300, 2.0)
    assert device.state.errors == 1


def test_the_controller_runs_unchanged_over_the_mailbox(device):
    sc = load_scenario(REPO / "examples" / "training.toml")
    spec = dataclasses.replace(sc.control, policy="prc")
    transport = IdealTransport(live_rate_bps(sc), sc.delay_ns * sc.dilation)
    workload = Workload(sc.jobs, transport, sc.dilation)
    controller = Controller(spec, workload, MailboxHooks(device.handle), sc.dilation)
    controller.start()
    workload.start()
    transport.run(until=lambda: workload.finished)
    assert controller.decisions and device.state.errors == 0
    assert device.state.taken == len(controller.decisions)
    for proc, (weight, floor) in controller.written.items():
        h = device.hook(proc)
        assert (h.weight, h.rate_floor) == (round(weight * WEIGHT_ONE), round(floor * RATE_ONE))
