"""Live testbeds. Each test runs its whole up / checks / down inside a
private network + mount namespace (testbed.isolated.run_sandboxed), so not
even a failed teardown can reach the machine; checks return data and the
assertions run here."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from testbed.isolated import run_in_netns, run_sandboxed, start_in_netns

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.root, pytest.mark.netns]


def _links_and_netns() -> tuple[str, str]:
    ip = lambda *a: subprocess.run(["ip", *a], capture_output=True, text=True, check=True).stdout
    return ip("-br", "link"), ip("netns", "list")


def _up_check_down(scenario_data: dict, check) -> dict:
    """In the sandbox: bring the scenario up, run check(testbed) -> dict,
    take it down; report what existed before, during and after."""
    from testbed.builder import Testbed
    from scenario.spec import parse_scenario
    from testbed.state import StateStore

    before = _links_and_netns()
    with tempfile.TemporaryDirectory() as state:
        store = StateStore(state)
        testbed = Testbed.up(parse_scenario(scenario_data), store)
        try:
            result = check(testbed)
            result["state_files_while_up"] = store.run_ids()
            result["prog_ids"] = list(testbed.record["prog_ids"])
        finally:
            testbed.down()
        result["state_files_after"] = store.run_ids()
    result["before"], result["after"] = before, _links_and_netns()
    return result


def _all_pairs_rtts(testbed) -> dict:
    from testbed import probes

    addrs = {h: testbed.plan.host_addr(h) for h in testbed.plan.hosts}
    return {h: run_in_netns(testbed.netns(h), probes.icmp_echo, [a for o, a in addrs.items() if o != h])
            for h in addrs}


def _goodput(testbed, src: str, dst: str, seconds: float = 3.0) -> float:
    from testbed import probes

    sink = start_in_netns(testbed.netns(dst), probes.udp_sink, 5001, seconds)
    time.sleep(0.3)
    run_in_netns(testbed.netns(src), probes.udp_blast, testbed.plan.host_addr(dst), 5001, 4096, seconds,
                 timeout_s=seconds + 30)
    return probes.goodput_bps(sink.result(timeout_s=seconds + 30))


def _assert_left_nothing(result):
    assert result["state_files_while_up"] and result["state_files_after"] == []
    assert result["after"] == result["before"]


def _ifindexes(names):
    import socket
    return [socket.if_nametoindex(n) for n in names]


def _tor_check(testbed):
    ports = testbed.plan.ports("s0")
    return {"rtts": _all_pairs_rtts(testbed), "goodput_bps": _goodput(testbed, "h0", "h1"),
            "rate_bps": testbed.plan.ports("h0")[0].rate_bps,
            "ifindexes": run_in_netns(testbed.netns("s0"), _ifindexes, [p.ifname for p in ports]),
            "planned_ifindexes": [p.ifindex for p in ports]}


def test_default_tor_reaches_all_pairs_at_link_rate_and_leaves_nothing():
    import tomllib
    data = tomllib.loads((REPO / "examples/default.toml").read_text())
    result = run_sandboxed(_up_check_down, data, _tor_check, timeout_s=180)
    for src, rtts in result["rtts"].items():
        assert len(rtts) == 3 and all(v is not None for v in rtts.values()), (src, rtts)
    # 4 KB datagrams: payload is 4096 of 4138 bytes on the wire (99.0%).
    assert result["goodput_bps"] == pytest.approx(result["rate_bps"], rel=0.05)
    assert result["ifindexes"] == result["planned_ifindexes"]
    _assert_left_nothing(result)


def _native_check(testbed):
    from dataplane.bpf_objects import prog_exists

    ids = testbed.record["prog_ids"]
    return {"rtts": _all_pairs_rtts(testbed), "exist_while_up": [prog_exists(i) for i in ids]}


def _native_gone(scenario_data):
    from dataplane.bpf_objects import prog_exists

    result = _up_check_down(scenario_data, _native_check)
    deadline = time.monotonic() + 5   # namespace teardown frees programs asynchronously
    while any(map(prog_exists, result["prog_ids"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    result["exist_after"] = [prog_exists(i) for i in result["prog_ids"]]
    return result


@pytest.mark.bcc
def test_native_xdp_ports_carry_a_program_that_is_gone_after_down():
    data = {"links": {"mtu_bytes": 3000}, "emulation": {"xdp_mode": "native"}}
    result = run_sandboxed(_native_gone, data, timeout_s=180)
    assert all(v is not None for rtts in result["rtts"].values() for v in rtts.values())
    assert len(result["prog_ids"]) == 1 and result["exist_while_up"] == [True]
    assert result["exist_after"] == [False]
    _assert_left_nothing(result)


def _ecmp_check(testbed):
    from testbed import probes

    uplinks = [p.ifname for p in testbed.plan.ports("s0") if p.faces == "switch"]
    before = run_in_netns(testbed.netns("s0"), probes.link_tx_packets, uplinks)
    sent = run_in_netns(testbed.netns("h0"), probes.udp_blast, testbed.plan.host_addr("h2"), 5002, 200,
                        10.0, list(range(40000, 40032)), 0, 32 * 200)
    after = run_in_netns(testbed.netns("s0"), probes.link_tx_packets, uplinks)
    return {"rtts": _all_pairs_rtts(testbed), "sent": sent,
            "per_spine": [after[i] - before[i] for i in uplinks]}


def test_leaf_spine_reaches_all_pairs_and_spreads_flows_over_both_spines():
    import tomllib
    data = tomllib.loads((REPO / "examples/leaf-spine.toml").read_text())
    result = run_sandboxed(_up_check_down, data, _ecmp_check, timeout_s=180)
    for src, rtts in result["rtts"].items():
        assert len(rtts) == 3 and all(v is not None for v in rtts.values()), (src, rtts)
    per_spine = result["per_spine"]
    assert len(per_spine) == 2 and sum(per_spine) >= result["sent"] * 0.99
    assert min(per_spine) >= 0.2 * sum(per_spine), per_spine
    _assert_left_nothing(result)


def _interrupt_up(sig: int) -> dict:
    """`testbed up` of a 24-host ToR as a user runs it, hit by `sig` once the
    first namespaces exist; then `clean`. A namespace of our own, outside
    the prefix, must survive."""
    from pyroute2 import netns

    from testbed.state import StateStore

    netns.create("keepme")
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "big.toml"
        scenario.write_text('[topology]\nhosts = 24\n')
        cli = [sys.executable, "-m", "cli.main", "testbed", "--state-dir", tmp + "/state"]
        proc = subprocess.Popen(cli + ["up", str(scenario)], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        store = StateStore(tmp + "/state")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            ids = store.run_ids()
            if ids and len(store.read(ids[0]).get("namespaces", [])) >= 3:
                break
            time.sleep(0.005)
        run_id = store.run_ids()[0]
        interrupted_while_building = proc.poll() is None
        proc.send_signal(sig)
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
        left_after_signal = sorted(n for n in netns.listnetns() if n.startswith(run_id))
        files_after_signal = store.run_ids()
        clean = subprocess.run(cli + ["clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
        return {"interrupted_while_building": interrupted_while_building, "rc": proc.returncode,
                "stderr": stderr,
                "left_after_signal": left_after_signal, "files_after_signal": files_after_signal,
                "clean_rc": clean.returncode, "clean_out": clean.stdout,
                "left_after_clean": sorted(n for n in netns.listnetns() if n.startswith(run_id)),
                "files_after_clean": store.run_ids(), "all_netns": sorted(netns.listnetns())}


def test_clean_after_kill_9_of_up_removes_the_run_and_nothing_else():
    result = run_sandboxed(_interrupt_up, signal.SIGKILL, timeout_s=180)
    assert result["interrupted_while_building"]
    assert result["rc"] == -signal.SIGKILL
    assert result["left_after_signal"] and result["files_after_signal"]   # kill -9 leaves them
    assert result["clean_rc"] == 0, result["clean_out"]
    assert result["left_after_clean"] == [] and result["files_after_clean"] == []
    assert result["all_netns"] == ["keepme"]


def test_sigterm_during_up_rolls_back_everything():
    result = run_sandboxed(_interrupt_up, signal.SIGTERM, timeout_s=180)
    assert result["interrupted_while_building"]
    assert result["rc"] == 128 + signal.SIGTERM
    assert result["stderr"].strip() == "prc-emu: interrupted by SIGTERM; what was built is removed"
    assert result["left_after_signal"] == [] and result["files_after_signal"] == []
    assert result["all_netns"] == ["keepme"]


_WITH_BODY = """
import sys, time
from testbed.builder import Testbed
from scenario.spec import parse_scenario
from testbed.state import StateStore
with Testbed.up(parse_scenario({}), StateStore(sys.argv[1])) as testbed:
    print(testbed.run_id, flush=True)
    time.sleep(60)
"""


def _sigterm_inside_with(state_dir: str) -> dict:
    from pyroute2 import netns

    proc = subprocess.Popen([sys.executable, "-c", _WITH_BODY, state_dir], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = proc.stdout.readline().strip()
    up = sorted(n for n in netns.listnetns() if n.startswith(run_id + "-"))
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    return {"run_id": run_id, "up": up, "rc": proc.returncode,
            "left": sorted(n for n in netns.listnetns() if n.startswith(run_id + "-")),
            "files": sorted(os.listdir(state_dir))}


def test_sigterm_inside_a_with_block_tears_the_testbed_down(tmp_path):
    result = run_sandboxed(_sigterm_inside_with, str(tmp_path), timeout_s=120)
    assert len(result["up"]) == 5, result
    assert result["rc"] not in (0, -signal.SIGTERM)   # it unwound instead of dying
    assert result["left"] == [] and result["files"] == []
