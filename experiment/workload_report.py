"""Results of a workload run: the event timeline and per-iteration CSVs,
summary.json (iteration times, straggler iterations apart, amplification,
background throughput while the training jobs communicate) and a
timeline plot with one lane per rank."""
from __future__ import annotations

from pathlib import Path

from workload import events as ev
from workload.stats import extra_compute, iterations, percentile, rate_during, summarize_job

TIMELINE_PLOT = "timeline.png"
MAX_LANES = 64                  # ranks drawn in the timeline plot
EVENT_COLUMNS = ["time_ms", "job", "rank", "proc", "iteration", "event", "detail", "bytes_remaining"]
ITERATION_COLUMNS = ["job", "iteration", "start_ms", "end_ms", "duration_ms", "extra_compute_ms",
                     "comm_start_ms", "comm_end_ms"]


def job_iterations(result, scenario) -> dict:
    return {j.name: iterations(result.events, j, scenario.dilation)
            for j in scenario.jobs if j.foreground}


def validity_problems(result) -> list[str]:
    """Why a run measured the machine rather than the emulated network:
    packets this machine lost outside the switch model (a receive CPU's
    backlog overflowed, a send failed), whose resends then set the times."""
    problems = []
    if not result.finished:
        problems.append("the training jobs did not finish")
    if result.backlog_drops:
        problems.append(f"{result.backlog_drops} packets dropped in this machine's receive backlog")
    if result.send_errors:
        problems.append(f"{result.send_errors} send errors")
    return problems


def summarize(result, scenario, its: dict) -> dict:
    """its: job_iterations()."""
    jobs = {}
    comm_windows = [(i.comm_start_ns, i.comm_end_ns) for job_its in its.values() for i in job_its]
    for job in scenario.jobs:
        if job.foreground:
            jobs[job.name] = summarize_job(job, its[job.name], scenario.dilation)
        else:
            series = result.job_bytes(job.name)
            during = rate_during(series, comm_windows)
            overall = rate_during(series, [(series[0][0], series[-1][0])]) if len(series) > 1 else None
            per_rank = job.ranks * result.line_rate_bps / 8        # each rank receives on one QP
            jobs[job.name] = {
                "kind": job.kind,
                "per_rank_share_of_line_during_training_comm": during / per_rank if during is not None else None,
                "per_rank_share_of_line_overall": overall / per_rank if overall else None}
    problems = validity_problems(result)
    return {"valid": not problems, "invalid_because": "; ".join(problems) or None,
            "finished": result.finished, "wall_s": result.wall_s, "jobs": jobs,
            "qp_state": {j.name: j.qp_state for j in scenario.jobs},
            "start_us": {j.name: j.start_us for j in scenario.jobs},     # start_jitter_us's draw included
            "lossless": scenario.live.red.lossless,
            "pauses": result.pause_events, "paused_ms": result.paused_ns / 1e6,
            "tail_drops": result.port_drops, "send_errors": result.send_errors,
            "receive_backlog_drops": result.backlog_drops,
            "retransmits": sum(q["retransmits"] for q in result.qp_stats),
            "timeouts": sum(q["timeouts"] for q in result.qp_stats),
            "cnps": sum(q["cnps"] for q in result.qp_stats),
            "ecn_marked_packets": sum(q["ce_packets"] for q in result.qp_stats),
            "fresh_qp_starts": result.fresh_starts,
            "control": control_summary(result, scenario)}


def control_summary(result, scenario) -> dict:
    """The policy, how often it wrote a hook, how fast after the progress
    event that caused it, and how long each job's processes were helped
    (weight above 1) in all, in ms live."""
    reaction = sorted(result.reaction_ns)
    helped: dict[str, float] = {}
    since: dict[int, int] = {}
    end = result.events[-1].t_ns if result.events else 0
    for t, proc, weight, _floor, _lag in result.decisions + [(end, p, 1.0, 0.0, 0.0) for p in result.procs]:
        if weight > 1.0 and proc not in since:
            since[proc] = t
        elif weight <= 1.0 and proc in since:
            job = result.procs[proc][0]
            helped[job] = helped.get(job, 0.0) + (t - since.pop(proc)) / 1e6
    return {"policy": scenario.control.policy, "hook_writes": len(result.decisions),
            "reaction_us_p50": percentile(reaction, 0.5) / 1e3 if reaction else None,
            "reaction_us_p99": percentile(reaction, 0.99) / 1e3 if reaction else None,
            "helped_ms": helped}


def write(out, result, scenario) -> dict:
    t0 = result.events[0].t_ns if result.events else 0
    out.csv("timeline.csv", EVENT_COLUMNS,
            ([f"{(e.t_ns - t0) / 1e6:.3f}", e.job, e.rank, e.proc, e.iteration, e.kind, e.detail,
              e.bytes_remaining] for e in result.events))
    its = job_iterations(result, scenario)
    out.csv("iterations.csv", ITERATION_COLUMNS,
            ([i.job, i.index, f"{(i.start_ns - t0) / 1e6:.3f}", f"{(i.end_ns - t0) / 1e6:.3f}",
              f"{i.duration_ns / 1e6:.3f}", f"{i.extra_compute_ns / 1e6:.3f}",
              f"{(i.comm_start_ns - t0) / 1e6:.3f}", f"{(i.comm_end_ns - t0) / 1e6:.3f}"]
             for job_its in its.values() for i in job_its))
    out.csv("connections.csv", list(result.qp_stats[0]) if result.qp_stats else ["job"],
            (list(q.values()) for q in result.qp_stats))
    out.csv("rates.csv", ["time_ms", "proc", "job", "rank", "delivered_bytes"],
            ([f"{(t - t0) / 1e6:.3f}", p, *result.procs[p], b]
             for p, series in result.proc_bytes.items() for t, b in series))
    out.csv("queues.csv", ["time_ms", "port", "queued_bytes"],
            ([f"{(t - t0) / 1e6:.3f}", port, q] for port, series in result.queue_bytes.items() for t, q in series))
    out.csv("control.csv", ["time_ms", "proc", "job", "rank", "weight", "floor", "lag"],
            ([f"{(t - t0) / 1e6:.3f}", p, *result.procs[p], f"{w:.4f}", f"{f:.3f}", f"{lag:.4f}"]
             for t, p, w, f, lag in result.decisions))
    summary = summarize(result, scenario, its)
    out.json("summary.json", summary)
    plot_timeline(result, scenario, out.dir / TIMELINE_PLOT)
    return summary


def _intervals(events, start_kind: str, end_kind: str):
    """(job, rank) -> [(start, end)] of the spans between two kinds; one
    still open at the end (a bulk job's endless step) ends with the run."""
    open_at, spans = {}, {}
    for e in events:
        key = (e.job, e.rank)
        if e.kind == start_kind:
            open_at[key] = e.t_ns
        elif e.kind == end_kind and key in open_at:
            spans.setdefault(key, []).append((open_at.pop(key), e.t_ns))
    for key, t in open_at.items():
        spans.setdefault(key, []).append((t, events[-1].t_ns))
    return spans


def plot_timeline(result, scenario, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not result.events:
        return
    t0 = result.events[0].t_ns
    ranks = sorted({(e.job, e.rank) for e in result.events}, key=lambda k: (k[0], k[1]))
    lanes = ranks[:MAX_LANES]               # thousands of lanes would be neither drawable nor readable
    row = {k: i for i, k in enumerate(lanes)}
    events = [e for e in result.events if (e.job, e.rank) in row] if len(ranks) > MAX_LANES else result.events
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.35 * len(lanes)))
    for (kinds, color, label) in (((ev.COMPUTE_START, ev.COMPUTE_END), "tab:green", "compute"),
                                  ((ev.STEP_START, ev.STEP_END), "tab:blue", "communication"),
                                  ((ev.WAIT_START, ev.WAIT_END), "tab:orange", "waiting")):
        first = True
        for key, spans in _intervals(events, *kinds).items():
            ax.broken_barh([((a - t0) / 1e6, (b - a) / 1e6) for a, b in spans], (row[key] - 0.4, 0.8),
                           color=color, label=label if first else None)
            first = False
    first_start = {}
    for e in events:
        if e.kind == ev.ITERATION_START:
            first_start.setdefault((e.job, e.rank, e.iteration), e.t_ns)
    for job in scenario.jobs:
        for r, it in extra_compute(result.events, job, scenario.dilation):
            if (job.name, r, it) in first_start and (job.name, r) in row:
                ax.plot((first_start[job.name, r, it] - t0) / 1e6, row[job.name, r], marker="v", color="tab:red")
    ax.set_yticks(range(len(lanes)), [f"{j} r{r}" for j, r in lanes])
    ax.set_xlabel("time (ms, live)")
    shown = f" (the first {len(lanes)} of {len(ranks)} ranks)" if len(ranks) > len(lanes) else ""
    ax.set_title(f"{scenario.name}: ranks' phases{shown} (red marks: straggler iterations)")
    ax.legend(loc="upper right", fontsize=8, ncol=3)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
