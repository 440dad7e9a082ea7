"""`prc-emu run SCENARIO`: the scenario's flows on a fresh testbed under the
emulated RNICs, written to results/<run-id>/ with a plot; the testbed is
removed afterwards."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from experiment.results import ResultsWriter, jain, versions

RATE_PLOT = "rates.png"


FLOW_COLUMNS = ["time_s", "flow", "delivered_mbps", "bpf_rate_mbps", "alpha", "cnps", "ce_marks"]


def _rows(result, scale_mbps: float):
    """One row per flow per sample; delivered rate over the sample period,
    the rest as sampled (CNPs and CE marks cumulative)."""
    t0 = result.samples[0].t_ns
    for before, after in zip(result.samples, result.samples[1:]):
        dt = (after.t_ns - before.t_ns) / 1e9
        for f, was, now in zip(result.flows, before.flows, after.flows):
            yield [f"{(after.t_ns - t0) / 1e9:.4f}", f"{f.src}->{f.dst}",
                   f"{(now.delivered_bytes - was.delivered_bytes) * 8 / dt / 1e6:.3f}",
                   f"{now.rate * scale_mbps:.3f}", f"{now.alpha:.5f}", now.cnps, now.ce_marks]


def summarize(result, scenario) -> dict:
    traffic = scenario.traffic
    shares = result.shares(traffic.settle_s, 1.0)
    mean = np.mean(shares, axis=0).tolist() if shares else [0.0] * len(result.flows)
    queues = {str(i): {"p50_bytes": float(np.percentile(q, 50)), "p99_bytes": float(np.percentile(q, 99)),
                       "max_bytes": int(max(q)), "tail_drops": int(result.port_drops.get(i, 0)),
                       "pauses": int(result.pause_events.get(i, 0)),
                       "paused_ms": result.paused_ns.get(i, 0) / 1e6}
              for i, q in result.queue_samples.items() if q and max(q) > 0}
    flows = []
    for f, share in zip(result.flows, mean):
        flows.append({"flow": f"{f.src}->{f.dst}", "send_qpn": f.send_qpn, "share_of_line": share,
                      "delivered_gbps_datacenter": share * scenario.rate_gbps,
                      "delivered_mbps_live": share * result.line_rate_bps / 1e6,
                      "packets_sent": f.packets_sent, "packets_received": f.packets_received,
                      "early_packets": f.early_packets, "ce_packets": f.ce_packets, "cnps": f.cnps,
                      "cnps_merged": f.cnps_merged, "retransmits": f.retransmits, "timeouts": f.timeouts,
                      "naks": f.naks, "duplicates": f.duplicates,
                      "lateness_p50_us": f.fidelity.lateness_p50_us,
                      "lateness_p99_us": f.fidelity.lateness_p99_us,
                      "rate_ratio_p50": f.fidelity.rate_ratio_p50,
                      "windows_within_5pct": f.fidelity.good_windows,
                      "windows_over_5pct_under": f.fidelity.under_windows})
    early = sum(f.early_packets for f in result.flows)
    if result.pacer == "kernel":     # packets go early on purpose: sch_fq holds them
        pacer = (f"kernel: nic_tx stamps each packet's departure time and sch_fq holds it until then "
                 f"(handed over early: {early})")
    else:
        from testbed.features import qdisc_problem
        why = "sch_fq is absent here" if qdisc_problem("fq") else "emulation.pacer chose this one"
        pacer = (f"cooperative: the TX engine sends no packet before nic_tx's departure time "
                 f"(early packets: {early}); no kernel pacer: {why}")
    valid = all(f.fidelity.valid for f in result.flows) and result.send_errors == 0 and \
        (early == 0 or result.pacer == "kernel")
    return {"valid": valid,
            "pacer": pacer,
            "invalid_because": None if valid else
            "the TX engine, not congestion control, set the rates (see fidelity per flow)",
            "steady_state_after_s": traffic.settle_s, "jain_fairness": jain(mean),
            "total_share_of_line": float(sum(mean)), "flows": flows, "switch_queues": queues,
            "send_errors": result.send_errors,
            "pauses": int(sum(result.pause_events.values())),
            "paused_ms": sum(result.paused_ns.values()) / 1e6,
            "retransmits": sum(f.retransmits for f in result.flows),
            "timeouts": sum(f.timeouts for f in result.flows)}


def plot(result, scenario, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = result.samples[0].t_ns
    times = np.array([(s.t_ns - t0) / 1e9 for s in result.samples])
    delivered = np.array([[f.delivered_bytes for f in s.flows] for s in result.samples], dtype=float)
    line_mbps = result.line_rate_bps / 1e6
    window = max(1, int(0.1 / scenario.traffic.sample_every_s))      # 100 ms averages
    fig, (ax, axq) = plt.subplots(2, 1, sharex=True, figsize=(9, 6), gridspec_kw={"height_ratios": [3, 1]})
    for i, f in enumerate(result.flows):
        rate = np.diff(delivered[::window, i]) * 8 / np.diff(times[::window]) / 1e6
        ax.plot(times[::window][1:], rate, label=f"{f.src}->{f.dst} (QP {f.send_qpn})")
    ax.axhline(line_mbps, color="gray", linestyle=":", label="line rate")
    ax.axvline(scenario.traffic.settle_s, color="gray", linestyle="--", linewidth=0.8)
    ax.set_ylabel(f"delivered Mb/s (live; x{scenario.dilation:g} for datacenter)")
    ax.set_ylim(0, line_mbps * 1.1)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"{scenario.name}: DCQCN, {len(result.flows)} flows, "
                 f"{scenario.rate_gbps:g} Gb/s links / d={scenario.dilation:g}")
    busiest = max(result.queue_samples.items(), key=lambda kv: max(kv[1]) if kv[1] else 0)
    axq.plot(times[:len(busiest[1])], np.array(busiest[1]) / 1e3, color="tab:red")
    axq.axhspan(scenario.live.red.kmin_bytes / 1e3, scenario.live.red.kmax_bytes / 1e3,
                color="tab:red", alpha=0.1, label="marking band")
    axq.set_ylabel("queue KB")
    axq.set_xlabel("time (s, live)")
    axq.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


MAX_CAPTURE_FRAMES = 100_000
MAX_CAPTURE_BUFFER = 1 << 30


def _capture_ports(scenario, specs: list[str]) -> list[tuple[str, str]]:
    """NODE:PEER specs -> (node, peer); ValueError naming the bad one."""
    from testbed.topology import plan_topology

    plan = plan_topology(scenario, "p0000")
    out = []
    for spec in specs:
        node, sep, peer = spec.partition(":")
        try:
            if not sep:
                raise ValueError("expected NODE:PEER, e.g. s0:h2")
            plan.port_towards(node, peer)
        except ValueError as exc:
            raise ValueError(f"--capture {spec}: {exc}") from None
        out.append((node, peer))
    return out


def _start_captures(testbed, ports: list[tuple[str, str]], seconds: float, folder: Path) -> list:
    """Callables that start a capture on each port (in its namespace, into
    folder/capture-NODE-PEER.pcap), and the list their children go to."""
    from testbed import probes
    from testbed.isolated import start_in_netns

    children = []

    def starter(node, peer):
        port = testbed.plan.port_towards(node, peer)
        path = str(folder / f"capture-{node}-{peer}.pcap")
        # a ring for the whole capture should the reader fall behind: the
        # line rate for the duration, twice over for frame headers and the
        # part of each block the kernel leaves unused when it retires it
        ring = int(min(MAX_CAPTURE_BUFFER, max(probes.CAPTURE_BUFFER_BYTES, 2 * port.rate_bps / 8 * seconds)))
        cpu = 1
        return lambda: children.append((path, start_in_netns(testbed.netns(node), probes.capture, port.ifname,
                                                             seconds, MAX_CAPTURE_FRAMES, path, cpu, ring)))

    return [starter(node, peer) for node, peer in ports], children


def on_testbed(scenario, scenario_path: str, results_root: str, store, body):
    """Bring up a testbed for scenario, run body(testbed, out) -> summary
    into a results folder with the resolved config and versions, and take
    it down: (results folder, summary), or the exit code of a failure
    (nothing written then)."""
    from scenario.spec import ScenarioError
    from testbed.builder import Interrupted, Testbed, TestbedError

    try:
        with Testbed.up(scenario, store, scenario_path=scenario_path) as testbed, \
                ResultsWriter(Path(results_root), testbed.run_id) as out:
            summary = body(testbed, out)
            out.json("config.json", {"scenario_path": scenario_path, "scenario": scenario,
                                     "testbed": testbed.record})
            out.json("versions.json", versions())
    except (TestbedError, ScenarioError) as exc:
        print(f"prc-emu: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        print(f"prc-emu: interrupted by {exc}; testbed removed, no results written", file=sys.stderr)
        return 128 + exc.signum
    return out.final, summary


def main(scenario_path: str, results_root: str, state_dir: str | None, captures: list[str] = (),
         capture_s: float = 0.5, record_cc: bool = False) -> int:
    from experiment.live_run import run_flows
    from scenario.spec import ScenarioError, load_scenario
    from testbed.state import StateStore, state_dir as resolve_state_dir

    try:
        scenario = load_scenario(scenario_path)
        capture_ports = _capture_ports(scenario, list(captures))
        if scenario.jobs and capture_ports:
            raise ValueError("--capture is for [traffic] scenarios; this one runs [[job]] tables")
        if not 0 < capture_s <= scenario.traffic.duration_s:
            raise ValueError(f"--capture-s must be in (0, traffic.duration_s], got {capture_s}")
    except ValueError as exc:           # ScenarioError included
        kind = "scenario error: " if isinstance(exc, ScenarioError) else ""
        print(f"prc-emu: {kind}{exc}", file=sys.stderr)
        return 2
    store = StateStore(resolve_state_dir(state_dir))
    if scenario.jobs:
        return run_jobs(scenario, scenario_path, results_root, store, record_cc)

    def flows(testbed, out) -> dict:
        print(f"testbed {testbed.run_id} up; sending {len(scenario.traffic.flows)} flows for "
              f"{scenario.traffic.duration_s:g} s", flush=True)
        starts, children = _start_captures(testbed, capture_ports, capture_s, out.dir)
        # captures begin with the steady state
        result = run_flows(testbed, scenario.live, list(scenario.traffic.flows),
                           scenario.traffic.duration_s, scenario.traffic.sample_every_s,
                           settle_s=scenario.traffic.settle_s,
                           during=[(scenario.traffic.settle_s, start) for start in starts],
                           cc_trace=record_cc)
        if record_cc:
            write_cc_trace(out, result.cc_trace, scenario)
        out.csv("flows.csv", FLOW_COLUMNS, _rows(result, result.line_rate_bps / 1e6))
        out.csv("queues.csv", ["sample", "port_ifindex", "model_queue_bytes"],
                ([i, port, q] for port, qs in result.queue_samples.items() for i, q in enumerate(qs)))
        summary = summarize(result, scenario)
        summary["captures"] = {Path(path).name: child.result(timeout_s=capture_s + 60)
                               for path, child in children}
        out.json("summary.json", summary)
        plot(result, scenario, out.dir / RATE_PLOT)
        return summary

    ran = on_testbed(scenario, scenario_path, results_root, store, flows)
    if isinstance(ran, int):
        return ran
    final, summary = ran
    for f in summary["flows"]:
        print(f"  {f['flow']:<10} {f['share_of_line'] * 100:5.1f}% of line  "
              f"({f['delivered_gbps_datacenter']:.1f} Gb/s datacenter, {f['delivered_mbps_live']:.0f} Mb/s live)  "
              f"CNPs {f['cnps']}  pacing p50 {f['rate_ratio_p50']:.3f}")
    print(f"  Jain fairness {summary['jain_fairness']:.3f}, total {summary['total_share_of_line'] * 100:.1f}% "
          f"of line; run {'valid' if summary['valid'] else 'INVALID: ' + summary['invalid_because']}")
    for name, got in summary["captures"].items():
        print(f"  captured {got['frames']:,} frames into {final / name}"
              + (f" ({got['dropped']:,} more did not fit the capture ring)" if got["dropped"] else ""))
    print(f"results: {final}  (plot: {final / RATE_PLOT})")
    return 0 if summary["valid"] else 3


def workload_body(scenario, progress=None, record_cc: bool = False):
    """on_testbed's body for a scenario's [[job]] tables: the workload runs
    until its training jobs finish; results as experiment.workload_report
    writes them (and the CC trace, with record_cc)."""
    from experiment import workload_report
    from experiment.workload_live import run_workload

    def body(testbed, out) -> dict:
        result = run_workload(testbed, scenario, progress=progress, cc_trace=record_cc)
        if record_cc:
            write_cc_trace(out, result.cc_trace, scenario)
        return workload_report.write(out, result, scenario)
    return body


def write_cc_trace(out, records, scenario) -> None:
    from dataplane.cc import core_params
    from experiment.doca_replay import write_trace

    write_trace(out, records, core_params(scenario.live.dcqcn, scenario.dilation))


def iteration_counter(scenario, prefix: str = "  "):
    """A progress callback printing finished training iterations on one line."""
    from workload import events as ev

    training = {j.name for j in scenario.jobs if j.foreground}
    total = sum(j.iterations for j in scenario.jobs if j.foreground)
    done = [0]

    def progress(event) -> None:
        if event.kind == ev.ITERATION_END and event.rank == 0 and event.job in training:
            done[0] += 1
            print(f"\r{prefix}iterations {done[0]}/{total}", end="", flush=True)
    return progress


def run_jobs(scenario, scenario_path: str, results_root: str, store, record_cc: bool = False) -> int:
    """The scenario's [[job]] tables on a fresh testbed, with a summary."""
    run_body = workload_body(scenario, iteration_counter(scenario), record_cc)

    def jobs(testbed, out) -> dict:
        print(f"testbed {testbed.run_id} up; running {len(scenario.jobs)} jobs "
              f"({', '.join(f'{j.name}: {j.kind}, {j.ranks} ranks' for j in scenario.jobs)})", flush=True)
        summary = run_body(testbed, out)
        print()
        return summary

    ran = on_testbed(scenario, scenario_path, results_root, store, jobs)
    return ran if isinstance(ran, int) else print_jobs(*ran)


def print_jobs(final: Path, summary: dict) -> int:
    """Print a job run's summary; its exit code (3: not finished)."""
    from experiment import workload_report

    for name, job in summary["jobs"].items():
        if "iteration_ms" in job:
            it = job["iteration_ms"]
            line = (f"  {name}: {job['iterations_measured']} iterations, mean {it.get('mean', 0):.1f} ms live "
                    f"(p99 {it.get('p99', 0):.1f}, CV {it.get('cv', 0) * 100:.1f}%)")
            if "amplification" in job:
                line += (f";\n    straggler iterations +{job['straggler_slowdown_ms']:.1f} ms over the steady "
                         f"{job['steady_iteration_ms']:.1f} ms for +{job['extra_compute_ms']:.1f} ms of compute "
                         f"(x{job['amplification']:.2f}); the job lost {job['job_delay_ms']:.1f} ms in all "
                         f"(x{job['job_amplification']:.2f})")
            print(line)
        else:
            share = job["per_rank_share_of_line_during_training_comm"]
            print(f"  {name} ({job['kind']}): {share * 100 if share is not None else float('nan'):.1f}% of line "
                  "per rank while training communicates")
    print(f"  pauses {summary['pauses']}, retransmits {summary['retransmits']}; "
          f"{'finished' if summary['finished'] else 'DID NOT FINISH'} in {summary['wall_s']:.1f} s; "
          f"run {'valid' if summary['valid'] else 'INVALID: ' + summary['invalid_because']}")
    print(f"results: {final}  (timeline: {final / workload_report.TIMELINE_PLOT})")
    return 0 if summary["finished"] else 3
