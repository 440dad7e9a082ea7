"""The DOCA PCC adapter (bpf/doca/prc_algo.c): it compiles without the
SDK with warnings as errors; its init registers DCQCN's parameters on
every port; parameter writes are range-checked whole; and events
replayed through it as a BlueField-3 delivers them (32-bit ns stamps that
wrap, TX counts in 32-byte units, the process learned from TX events)
leave the same rates as the emulator's CC core, bit for bit."""
import random
import subprocess

import pytest

from dataplane.cc import EV_ADVANCE, EV_CNP, EV_TX, RATE_ONE, WEIGHT_ONE, BpfCC, Event, Hook, HostCC, \
    State, core_params
from dataplane.doca_device import (DOCA_DIR, EVNT_ACK, EVNT_CNP, EVNT_NACK, EVNT_RTT, EVNT_TX, WRAP,
                                   DocaDevice, ReplayEvent, replay_trace)
from dataplane.doca_mailbox import MailboxHooks
from dataplane.nic import CcTraceRecord
from scenario.dcqcn import DcqcnConfig
from testbed.isolated import run_sandboxed

PARAMS = core_params(DcqcnConfig())
KTIME0 = 7_301_234_567_891          # a host's monotonic clock two hours after boot


@pytest.fixture
def device():
    return DocaDevice()


def test_the_adapter_compiles_without_the_sdk_with_warnings_as_errors(tmp_path):
    obj = tmp_path / "prc_algo.o"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-c",
                    str(DOCA_DIR / "prc_algo.c"), "-o", str(obj)], check=True)
    symbols = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout
    for name in ("doca_pcc_dev_user_init", "doca_pcc_dev_user_algo", "doca_pcc_dev_user_set_algo_params",
                 "doca_pcc_dev_user_mailbox_handle"):
        assert f" T {name}\n" in symbols, name
    assert "prc_host_" not in symbols                     # the harness's entries stay out of a device build


def test_init_registers_dcqcn_defaults_on_every_port_and_needs_only_cnp_and_tx(device):
    for port in range(4):
        assert device.slot_ready(port, 0) and bytes(device.params(port)) == bytes(PARAMS)
    assert not device.slot_ready(0, 1)
    assert device.disabled_events == (1 << EVNT_ACK) | (1 << EVNT_NACK) | (1 << EVNT_RTT)


def test_a_parameter_write_is_taken_whole_or_not_at_all(device):
    assert device.set_params([500_000, 0], base=0) == 0                # rpg_time_reset, rpg_byte_reset
    assert (device.params().rpg_time_reset_ns, device.params().rpg_byte_reset) == (500_000, 0)
    before = bytes(device.params())
    assert device.set_params([11, 101], base=5) == 1                   # rpg_min_dec_fac above 100
    assert device.set_params([1 << 27 | 1], base=9) == 1               # dce_tcp_rtt beyond the time window
    assert device.set_params([1, 2], base=13) == 1                     # past the last parameter
    assert device.set_params([1], base=0, slot=1) == 1                 # a slot the adapter does not run
    assert bytes(device.params()) == before


def _synthetic_trace(seed: int, flows: int = 3, events: int = 1500, gaps_s=()) -> list[CcTraceRecord]:
    """What the RNIC would record: CNP and TX events of a few QPs on a
    64-bit clock, hooks that change now and then, run through the host
    build of the core (bit-exact with the BPF one); gaps_s: silences (s)
    a QP keeps after its first third of events."""
    rng = random.Random(seed)
    out = []
    for qpn in range(11, 11 + flows):
        t, hk, evs = KTIME0 + rng.randrange(10**6), Hook(), []
        for i in range(events):
            t += rng.choice((800, 1100, 5_000, 40_000, 300_000))
            if i == events // 3:
                for gap in gaps_s:
                    t += int(gap * 1e9)
            if rng.random() < 0.02:
                hk = Hook(weight=rng.choice((WEIGHT_ONE, 2 * WEIGHT_ONE, 4 * WEIGHT_ONE, 700)),
                          rate_floor=rng.choice((0, RATE_ONE // 10)), rate_cap=rng.choice((0, RATE_ONE // 2)))
            if rng.random() < 0.1:
                evs.append(Event(kind=EV_CNP, now_ns=t, hook=hk))
            else:
                evs.append(Event(kind=EV_TX, bytes=32 * rng.randrange(1, 140), now_ns=t, hook=hk))
        for seq, (ev, st) in enumerate(zip(evs, HostCC().run(PARAMS, evs)), start=1):
            out.append(CcTraceRecord(now_ns=ev.now_ns, qpn=qpn, seq=seq, kind=ev.kind, bytes=ev.bytes,
                                     hook=ev.hook, st=st))
    rng.shuffle(out)                                  # two CPUs' records interleave: replay sorts by seq
    return out


def test_a_trace_across_the_32_bit_wrap_replays_bit_exact(device):
    report = replay_trace(device, _synthetic_trace(1), PARAMS)
    assert report.exact, (report.rate_mismatches[:3], report.state_mismatches[:3])
    assert (report.flows, report.events) == (3, 4500) and report.wraps == 3       # each flow crossed it
    assert device.state.errors == 0


@pytest.mark.parametrize("gap_s", [2.5, 4.0])
def test_a_silence_longer_than_half_a_wrap_is_still_read_forward(device, gap_s):
    """A symmetric window around the last event would read 2.15-4.29 s of
    silence as time going back; the adapter counts forward from the flow's
    own state, exact up to 2^32 ns less the longest alpha period."""
    report = replay_trace(device, _synthetic_trace(2, flows=2, gaps_s=(gap_s,)), PARAMS)
    assert report.exact, (report.rate_mismatches[:3], report.state_mismatches[:3])


def test_after_a_silence_of_several_wraps_the_recovery_is_understated_never_overstated(device):
    """Whole wraps are lost then (the device cannot count them): the flow
    resumes as if silent for the silence modulo 2^32 ns. Its timers ran
    less, so its rate came back at most as far as the RNIC's, and at least
    as far as it was before the silence: with the byte counter on and no
    bytes sent, recovery is additive only and takes seconds (measured
    here: 0.55 of line against the RNIC's 1.0 after 9 s)."""
    records = _synthetic_trace(3, flows=2, gaps_s=(9.0,))
    report = replay_trace(device, records, PARAMS)
    adapter = {(qpn, seq): rate for qpn, seq, _bpf, rate in report.rate_mismatches}
    by_key = {(r.qpn, r.seq): r for r in records}
    for qpn in (11, 12):
        before, after = by_key[qpn, 500], by_key[qpn, 501]
        rate_after = adapter.get((qpn, 501), after.st.rc)
        assert before.st.rc <= rate_after <= after.st.rc
    assert report.rate_mismatches                     # the limit is real, and said so in prc_time.h


@pytest.mark.bcc
@pytest.mark.root
def test_the_replay_matches_the_bpf_build_of_the_core(device):
    """The reference states from the BPF core itself (PROG_TEST_RUN)."""
    records = sorted(_synthetic_trace(4, flows=1, events=600), key=lambda r: r.seq)
    bpf = BpfCC()
    try:
        states = bpf.run(PARAMS, [Event(kind=r.kind, bytes=r.bytes, now_ns=r.now_ns, hook=r.hook) for r in records])
    finally:
        bpf.close()
    for r, st in zip(records, states):
        r.st = st
    report = replay_trace(device, records, PARAMS)
    assert report.exact and report.wraps == 1


def _one_flow_events(device, events):
    contexts = (State * 1)()
    return device.replay(events, contexts)


def test_a_cnp_uses_the_process_its_flow_showed_on_a_tx_event(device):
    """BlueField-3 names the QP on TX events only: a CNP before any TX
    event of its flow tag runs plain DCQCN and is counted unbound; after
    one, it takes the bound process's weight (4: the cut is a quarter)."""
    mailbox = MailboxHooks(device.mailbox)
    mailbox.bind({77: 5})
    mailbox.set(5, weight=4.0)
    rates, _ = _one_flow_events(device, [ReplayEvent(ev_type=EVNT_CNP, timestamp=1000, flowtag=9)])
    plain = HostCC().run(PARAMS, [Event(kind=EV_CNP, now_ns=1000)])
    assert rates == [plain[0].rc] and device.counters()["unbound"] == 1
    events = [ReplayEvent(ev_type=EVNT_TX, timestamp=1000, flowtag=9, qpn=77, sent_32bytes=32),
              ReplayEvent(ev_type=EVNT_CNP, timestamp=9000, flowtag=9)]
    rates, _ = _one_flow_events(device, events)
    weighted = HostCC().run(PARAMS, [Event(kind=EV_TX, bytes=1024, now_ns=1000, hook=Hook(weight=4 * WEIGHT_ONE)),
                                     Event(kind=EV_CNP, now_ns=9000, hook=Hook(weight=4 * WEIGHT_ONE))])
    assert rates == [s.rc for s in weighted] and rates[1] > plain[0].rc
    assert device.counters() == {"cnp": 2, "tx": 1, "other": 0, "unbound": 1}


def test_other_events_bring_the_rate_up_to_date_and_other_slots_go_to_the_firmware(device):
    cut = [ReplayEvent(ev_type=EVNT_CNP, timestamp=0), ReplayEvent(ev_type=EVNT_ACK, timestamp=2_000_000),
           ReplayEvent(ev_type=EVNT_TX, timestamp=2_000_000, algo_slot=2)]
    rates, _ = _one_flow_events(device, cut)
    host = HostCC().run(PARAMS, [Event(kind=EV_CNP, now_ns=0), Event(kind=EV_ADVANCE, now_ns=2_000_000)])
    assert rates[:2] == [s.rc for s in host] and rates[0] < rates[1] < RATE_ONE
    assert rates[2] == RATE_ONE                          # the harness's stand-in for the firmware's algorithm
    assert device.counters()["other"] == 1


def _record_and_replay():
    """Two flows into one port on the default testbed, every CC event the
    RNIC applied recorded, then replayed through the adapter."""
    import tempfile
    import tomllib
    from pathlib import Path

    from experiment.live_run import run_flows
    from scenario.spec import parse_scenario
    from testbed.builder import Testbed
    from testbed.state import StateStore

    data = tomllib.loads((Path(__file__).resolve().parent.parent / "examples/default.toml").read_text())
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        result = run_flows(testbed, scenario.live, [("h0", "h2"), ("h1", "h2")], 1.0, cc_trace=True)
    records = result.cc_trace
    cnps = sum(r.kind == EV_CNP for r in records)
    return replay_trace(DocaDevice(), records, core_params(scenario.live.dcqcn, scenario.dilation)), cnps


@pytest.mark.root
@pytest.mark.bcc
@pytest.mark.netns
def test_a_live_runs_recorded_events_replay_bit_exact_across_the_wrap():
    report, cnps = run_sandboxed(_record_and_replay, timeout_s=300)
    assert report.flows == 2 and report.events > 10_000 and cnps > 20
    assert report.wraps == 2                         # the wrap put mid-trace falls inside both flows' events
    assert report.exact, (report.rate_mismatches[:3], report.state_mismatches[:3])


def _cli(*args):
    import sys
    from pathlib import Path
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=120)


def test_doca_replay_of_a_written_trace_says_bit_exact(tmp_path):
    from experiment.doca_replay import write_trace
    from experiment.results import ResultsWriter

    with ResultsWriter(tmp_path, "run1") as out:
        write_trace(out, _synthetic_trace(5, flows=2, events=300), PARAMS)
    proc = _cli("cc", "doca-replay", str(tmp_path / "run1"))
    assert proc.returncode == 0, proc.stderr
    assert "replayed 600 CC events" in proc.stdout and proc.stdout.strip().endswith("bit-exact")


def test_doca_replay_refuses_a_missing_or_cut_trace_in_one_line(tmp_path):
    from experiment.doca_replay import TRACE_FILE, write_trace
    from experiment.results import ResultsWriter

    proc = _cli("cc", "doca-replay", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--record-cc" in proc.stderr
    with ResultsWriter(tmp_path, "run1") as out:
        write_trace(out, _synthetic_trace(5, flows=1, events=10), PARAMS)
    trace = tmp_path / "run1" / TRACE_FILE
    trace.write_bytes(trace.read_bytes()[:-1])
    proc = _cli("cc", "doca-replay", str(tmp_path / "run1"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "is not 10 records" in proc.stderr


def _record_prc_training_and_replay():
    """A short training run under PRC (a straggler in iteration 3), every
    CC event recorded, replayed through the adapter with the hooks the
    controller wrote going through its mailbox."""
    import tempfile
    import tomllib
    from pathlib import Path

    from experiment.workload_live import run_workload
    from scenario.spec import parse_scenario
    from testbed.builder import Testbed
    from testbed.state import StateStore

    data = tomllib.loads((Path(__file__).resolve().parent.parent / "examples/training.toml").read_text())
    data["job"][0]["iterations"] = 5
    data["job"][0]["straggler"][0]["iterations"] = [3]
    data["control"] = {"policy": "prc"}
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        result = run_workload(testbed, scenario, limit_s=60, cc_trace=True)
    report = replay_trace(DocaDevice(), result.cc_trace, core_params(scenario.live.dcqcn, scenario.dilation))
    return report, result.finished, len(result.decisions)


@pytest.mark.root
@pytest.mark.bcc
@pytest.mark.netns
def test_a_live_prc_runs_events_and_hook_writes_replay_bit_exact():
    report, finished, decisions = run_sandboxed(_record_prc_training_and_replay, timeout_s=300)
    assert finished and decisions > 0
    assert report.flows == 8 and report.events > 50_000
    assert report.hook_messages > report.flows          # the controller changed hooks during the run
    assert report.exact, (report.rate_mismatches[:3], report.state_mismatches[:3])
