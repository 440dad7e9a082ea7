"""The fluid simulator (sim/): the NIC port's weighted shares, DCQCN on
two flows into one port, pauses and losses at a full buffer, completions
in order, the training scenario under DCQCN and PRC run twice to the same
result, and `prc-emu sim` / `compare --sim`. No root needed."""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bad_input import cli_rejects
from scenario.spec import load_scenario, parse_scenario
from sim.fabric import Fabric
from sim.network import FluidNetwork, Hooks, weighted_shares
from sim.run import run_sim
from sim.transport import SimTransport
from testbed.topology import live_rate_bps, plan_topology
from workload.ideal import IdealTransport
from workload.driver import Workload
from workload.stats import iterations
from workload.transport import Endpoint

REPO = Path(__file__).resolve().parent.parent
TRAINING = REPO / "examples" / "training.toml"
FABRIC = REPO / "examples" / "training-fabric.toml"
MB = 1_000_000


def test_weighted_shares_split_by_weight_and_pass_on_what_a_member_does_not_want():
    group = np.array([0, 0, 1, 1, 1])
    weight = np.array([3.0, 1.0, 1.0, 1.0, 2.0])
    demand = np.array([10.0, 10.0, 0.1, 10.0, 10.0])
    alloc = weighted_shares(group, weight, demand, 1.0, 2)
    assert alloc[:2] == pytest.approx([0.75, 0.25])
    # group 1: the 0.1 member is sated, the other two split 0.9 as 1:2
    assert alloc[2:] == pytest.approx([0.1, 0.3, 0.6])
    # no one gets more than asked, and capacity left over stays unused
    assert weighted_shares(group, weight, np.array([0.2, 0.1, 0, 0, 0.5]), 1.0, 2) == pytest.approx(
        [0.2, 0.1, 0, 0, 0.5])


def _network(hosts=4, extra=None, seed=1):
    sc = parse_scenario({"topology": {"hosts": hosts}, **(extra or {})})
    plan = plan_topology(sc, "p0000")
    hooks = Hooks(hosts)
    net = FluidNetwork(Fabric(plan, sc.live), sc.live, sc.dilation, live_rate_bps(sc), hooks, seed)
    return sc, net, hooks, SimTransport(net, 1000 * sc.dilation)


def _incast(senders: int, nbytes: int, extra=None, weights=None, sample_ns=10_000_000):
    """senders flows of nbytes into h{senders}; (network, completions, samples of bytes sent)."""
    sc, net, hooks, clock = _network(senders + 1, extra)
    for proc, w in (weights or {}).items():
        hooks.set(proc, w)
    dst = Endpoint(f"h{senders}", senders)
    acked, received = [], []
    for s in range(senders):
        clock.send(Endpoint(f"h{s}", s), dst, nbytes, False, lambda t, s=s: acked.append((s, t)),
                   lambda t, s=s: received.append((s, t)))
    samples = []

    def sample():
        samples.append((clock.now_ns(), net.sent.copy(), net.queue.max()))
        clock.call_at(clock.now_ns() + sample_ns, sample)
    sample()
    assert clock.run(lambda: len(acked) == senders, 20e9)
    return sc, net, acked, received, samples


def _rates(sc, samples, start_ns, end_ns):
    """Each QP's share of line between two sample times (payload)."""
    (t0, a, _), (t1, b, _) = [min(samples, key=lambda s: abs(s[0] - t)) for t in (start_ns, end_ns)]
    return (b - a) * 8e9 / (t1 - t0) / live_rate_bps(sc)


def test_two_flows_into_one_port_share_it_under_dcqcn():
    sc, net, acked, received, samples = _incast(2, 50 * MB)
    shares = _rates(sc, samples, 200e6, 700e6)
    assert (net.cnps > 0).all()
    assert 0.85 <= shares.sum() <= 1.0, shares            # live: 0.94-0.96 of line on the wire
    assert shares.min() >= 0.35, shares                     # live: 0.44-0.51 each over the steady state
    assert max(q for _t, _s, q in samples) < sc.buffer_bytes
    assert net.pause_events == 0 and net.dropped_bytes == 0
    # completions: data visible before its ACK is back, both after the last byte could have left
    for s in range(2):
        [(_, t_recv)] = [r for r in received if r[0] == s]
        [(_, t_ack)] = [a for a in acked if a[0] == s]
        assert 50 * MB * 8e9 / live_rate_bps(sc) < t_recv < t_ack


def test_a_weighted_process_takes_more_of_the_port():
    sc, net, *_rest, samples = _incast(2, 50 * MB, weights={1: 4.0})
    shares = _rates(sc, samples, 200e6, 600e6)
    assert shares[1] / shares.sum() >= 0.7, shares         # live: 0.84-0.86 of what the port delivered


@pytest.mark.parametrize("lossless", [True, False])
def test_a_full_buffer_pauses_lossless_and_drops_lossy(lossless):
    no_marks = {"ecn": {"kmin_bytes": 10 * MB, "kmax_bytes": 10 * MB},
                "links": {"buffer_bytes": 100_000}, "pfc": {"enabled": lossless}}
    sc, net, acked, received, samples = _incast(3, 5 * MB, no_marks, sample_ns=1_000_000)
    assert net.sent == pytest.approx([5 * MB] * 3)         # everything arrives either way
    assert max(q for _t, _s, q in samples) <= 100_000
    if lossless:
        assert net.pause_events > 0 and net.dropped_bytes == 0
    else:
        assert net.pause_events == 0 and net.dropped_bytes > 0


def test_messages_on_one_connection_complete_in_order():
    sc, net, hooks, clock = _network(2)
    got = []
    for i, size in enumerate([4 * MB, 1000, 200_000, 7]):
        clock.send(Endpoint("h0", 0), Endpoint("h1", 1), size, False, lambda t, i=i: got.append(("sent", i, t)),
                   lambda t, i=i: got.append(("recv", i, t)))
    clock.run(lambda: len(got) == 8, 10e9)
    recv = [(i, t) for kind, i, t in got if kind == "recv"]
    assert [i for i, _ in recv] == [0, 1, 2, 3]
    assert all(a[1] <= b[1] for a, b in zip(recv, recv[1:]))
    assert net.messages[0] == 4


def _training(policy: str):
    sc = load_scenario(TRAINING)
    return dataclasses.replace(sc, control=dataclasses.replace(sc.control, policy=policy))


@pytest.fixture(scope="module")
def training_runs():
    return {policy: run_sim(_training(policy)) for policy in ("dcqcn", "prc")}


def test_the_same_scenario_and_seed_give_the_same_run(training_runs):
    again = run_sim(_training("prc"))
    first = training_runs["prc"]
    assert [(e.t_ns, e.proc, e.kind) for e in again.events] == [(e.t_ns, e.proc, e.kind) for e in first.events]
    assert again.decisions == first.decisions and again.decisions


def test_training_in_the_simulator_is_no_faster_than_alone_on_serial_links(training_runs):
    sc = _training("dcqcn")
    ideal = IdealTransport(live_rate_bps(sc), sc.delay_ns * sc.dilation)
    workload = Workload(sc.jobs[:1], ideal, sc.dilation)        # the training job alone
    events = []
    workload.bus.subscribe(events.append)
    workload.start()
    ideal.run(until=lambda: workload.finished)
    train = sc.jobs[0]
    floor = [i.duration_ns for i in iterations(events, train, sc.dilation)]
    simulated = [i.duration_ns for i in iterations(training_runs["dcqcn"].events, train, sc.dilation)]
    assert training_runs["dcqcn"].finished and len(simulated) == len(floor)
    # headers on the wire and the background's share of the NICs only add time
    assert all(s >= 0.99 * f for s, f in zip(simulated, floor))
    assert max(simulated) > 1.3 * np.median(simulated)      # the straggler iteration stands out


def test_prc_shortens_the_straggler_iteration_in_the_simulator(training_runs):
    sc = _training("dcqcn")
    train = sc.jobs[0]
    worst = {p: max(i.duration_ns for i in iterations(r.events, train, sc.dilation))
             for p, r in training_runs.items()}
    assert worst["prc"] < 0.97 * worst["dcqcn"], worst
    assert training_runs["prc"].decisions and not training_runs["dcqcn"].decisions


def test_in_the_fabric_example_the_jobs_meet_at_the_leaf_uplinks_not_at_a_nic():
    sc = load_scenario(FABRIC)
    train, background = sc.jobs
    assert not set(train.hosts) & set(background.hosts)
    run = run_sim(sc)
    assert run.finished
    cnps = {job: sum(q["cnps"] for q in run.qp_stats if q["job"] == job) for job in ("train", "background")}
    assert cnps["train"] > 50 and cnps["background"] > 50, cnps
    deepest = {port: max(b for _t, b in series) for port, series in run.queue_bytes.items()}
    uplinks = [deepest[p] for p in ("s0:s2", "s1:s2")]
    assert min(uplinks) > sc.live.red.kmax_bytes, deepest       # where both jobs' rings cross
    # a host's own downlink carries one ring step of one job: it never queues as deep
    assert max(b for p, b in deepest.items() if ":h" in p) < 0.1 * min(uplinks), deepest


def test_in_the_fabric_example_prc_shortens_the_straggler_iteration_over_two_phases():
    """The main experiment's scenario, runs 0 and 1 of examples/prc-fabric.toml
    (two phases of the background) in the simulator."""
    from scenario.plan import load_plan
    plan = load_plan(REPO / "examples" / "prc-fabric.toml", live=False)
    variants = {v.name: v for v in plan.variants}
    straggler_ns = {}
    for policy in ("dcqcn", "prc"):
        for run in (0, 1):
            sc = variants[policy].scenario(run)
            result = run_sim(sc)
            assert result.finished
            [straggler] = [i for i in iterations(result.events, sc.jobs[0], sc.dilation) if i.extra_compute_ns]
            straggler_ns[policy, run] = straggler.duration_ns
    for run in (0, 1):
        assert straggler_ns["prc", run] < 0.95 * straggler_ns["dcqcn", run], straggler_ns


def test_sim_command_writes_a_run_like_a_live_one(tmp_path):
    from cli.main import main
    assert main(["sim", str(TRAINING), "--results", str(tmp_path), "--step-us", "2"]) == 0
    [folder] = tmp_path.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["finished"] and summary["valid"]
    assert json.loads((folder / "config.json").read_text())["simulator"]["step_us"] == 2
    for name in ("iterations.csv", "rates.csv", "queues.csv", "timeline.png"):
        assert (folder / name).stat().st_size > 0


def test_compare_in_the_simulator_feeds_the_report(tmp_path, capsys):
    from cli.main import main
    assert main(["sim", str(TRAINING), "--results", str(tmp_path), "--cc", "dcqcn,prc", "--seeds", "2"]) == 0
    [folder] = tmp_path.iterdir()
    assert json.loads((folder / "compare.json").read_text())["simulator"] == {"step_us": 1.0}
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    rows = (tmp_path / "report").glob("*/report.csv")
    text = next(rows).read_text()
    assert "prc" in text and "dcqcn" in text


@pytest.mark.parametrize("args,reason", [
    (["--step-us", "0"], "--step-us"),
    (["--cc", "dcqcn,nope"], "nope"),
])
def test_bad_sim_input_exits_2_and_leaves_nothing(tmp_path, args, reason):
    line = cli_rejects(["sim", str(TRAINING), *args], tmp_path, state_dir=False)
    assert reason in line


def test_sim_refuses_a_flows_scenario(tmp_path):
    line = cli_rejects(["sim", str(REPO / "examples" / "default.toml")], tmp_path, state_dir=False)
    assert "[[job]]" in line


def test_live_only_limits_do_not_bind_the_simulator():
    from scenario.spec import ScenarioError
    data = {"topology": {"kind": "leaf-spine", "hosts": 300, "leaves": 4, "spines": 2},
            "emulation": {"dilation": 1},                               # 100 Gbit/s on a veth: live only
            "job": [{"name": "train", "pp": 3, "dp": 100, "model": {"forward_us": 10, "activation_bytes": 1000,
                                                                    "gradient_bytes": 100_000}}]}
    sc = parse_scenario(data, live=False)
    assert sc.jobs[0].ranks == 300 and sc.dilation == 1
    with pytest.raises(ScenarioError, match="live rate"):
        parse_scenario(data)
    with pytest.raises(ScenarioError, match="256 ranks live"):
        parse_scenario({**data, "emulation": {"dilation": 100}})


def test_a_fat_tree_plans_three_tiers_and_paths_go_up_and_down():
    sc = parse_scenario({"topology": {"kind": "fat-tree", "pods": 4, "hosts": 16}}, live=False)
    plan = plan_topology(sc, "p0000")
    assert (len(plan.switches), len(plan.links)) == (4 * 2 + 4 * 2 + 4, 16 + 16 + 16)
    fabric = Fabric(plan, sc.live)
    assert [len(fabric.path("h0", dst, ("f",))) for dst in ("h1", "h2", "h15")] == [1, 3, 5]
    # flows between two pods spread over every core switch
    cores = {fabric.names[fabric.path("h0", "h15", (i,))[1]].split(":")[1] for i in range(64)}
    assert cores == {"s16", "s17", "s18", "s19"}
    link = sc.delay_ns * sc.dilation
    assert [plan.one_way_delay_ns("h0", d) for d in ("h1", "h2", "h15")] == [2 * link, 4 * link, 6 * link]


def test_a_fat_tree_runs_in_the_simulator_only():
    from scenario.spec import ScenarioError
    data = {"topology": {"kind": "fat-tree", "pods": 4, "hosts": 16},
            "job": [{"name": "train", "iterations": 3, "model": {"forward_us": 50, "gradient_bytes": 1_600_000}}]}
    with pytest.raises(ScenarioError, match="^topology.kind: fat-tree runs in the simulator only"):
        parse_scenario(data)
    with pytest.raises(ScenarioError, match="^topology.pods: "):
        parse_scenario({**data, "topology": {"kind": "fat-tree", "pods": 5}}, live=False)
    result = run_sim(parse_scenario(data, live=False))
    assert result.finished and len(result.qp_stats) == 16


def test_the_largest_fat_tree_has_an_address_and_a_name_for_every_port():
    sc = parse_scenario({"topology": {"kind": "fat-tree", "pods": 32, "hosts": 8192}}, live=False)
    plan = plan_topology(sc, "p0000")
    ports = [p for link in plan.links for p in (link.a, link.b)]
    assert len(plan.links) == 8192 + 2 * 32 ** 3 // 4
    assert len({p.addr for p in ports}) == len(ports) and len({(p.node, p.ifname) for p in ports}) == len(ports)


def test_a_rack_beyond_a_slash_24_plans_in_the_simulator_only():
    from scenario.spec import ScenarioError
    data = {"topology": {"kind": "leaf-spine", "hosts": 400, "leaves": 2, "spines": 2}}
    with pytest.raises(ScenarioError, match="^topology.hosts: at most 127 hosts per switch live"):
        parse_scenario(data)
    plan = plan_topology(parse_scenario(data, live=False), "p0000")
    ports = [p for link in plan.links for p in (link.a, link.b)]
    assert len({p.addr for p in ports}) == len(ports)
    assert Fabric(plan, parse_scenario(data, live=False).live).path("h0", "h399", ("f",))
    with pytest.raises(ScenarioError, match="^topology.hosts: at most 16384 hosts"):
        parse_scenario({"topology": {"kind": "leaf-spine", "hosts": 16385, "leaves": 64}}, live=False)
