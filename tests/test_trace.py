"""Progress traces: the format, its errors (one line naming the file's
line), and the replay that sets the ranks' compute times and feeds the
controller, on the congestion-free transport. No root needed."""
import pytest

from bad_input import assert_names_key, cli_rejects
from control.controller import Controller
from scenario.spec import load_scenario
from scenario.trace import Timeline, read_trace, timelines
from workload import events as ev
from workload.driver import Workload
from workload.ideal import IdealTransport

SCENARIO = """
[topology]
hosts = 4
[[job]]
name = "train"
iterations = 8
warmup_iterations = 1
[job.model]
forward_us = 30000
backward_us = 50000
gradient_bytes = 4000000
[job.trace]
file = "gpu.csv"
{trace_keys}
[control]
policy = "prc"
"""

# rank 1's GPU at half its clock from 0.42 s to 0.5 s of the trace
TRACE = """# a hand-written timeline
t_s,process,speed,sm_clock_mhz,max_clock_mhz
0.0,1,,1980,1980
0.42,1,,990,1980
0.5,1,1.0,,
"""


def _scenario(tmp_path, trace=TRACE, trace_keys=""):
    (tmp_path / "gpu.csv").write_text(trace)
    (tmp_path / "s.toml").write_text(SCENARIO.format(trace_keys=trace_keys))
    return load_scenario(tmp_path / "s.toml")


class _Hooks:
    def __init__(self):
        self.writes = []

    def set(self, proc, weight, floor):
        self.writes.append((proc, weight, floor))


def _run(scenario):
    """The scenario on a 100 Gbit/s congestion-free fabric: its events and controller."""
    transport = IdealTransport(100e9)
    workload = Workload(scenario.jobs, transport, 1.0)
    controller = Controller(scenario.control, workload, _Hooks(), 1.0)
    events = []
    workload.bus.subscribe(events.append)
    controller.start()
    workload.start()
    transport.run(until=lambda: workload.finished)
    assert workload.finished
    return events, controller


def _computes(events, rank):
    """(start_ns, end_ns) of each compute of rank, in order."""
    starts = [e.t_ns for e in events if e.rank == rank and e.kind == ev.COMPUTE_START]
    ends = [e.t_ns for e in events if e.rank == rank and e.kind == ev.COMPUTE_END]
    return list(zip(starts, ends))


def _integrated_end(speed_at, start_s, work_s, step=1e-6):
    """When work_s of nominal compute begun at start_s ends, by stepping a
    piecewise-constant speed in microseconds (independent of Timeline.finish)."""
    t, done = start_s, 0.0
    while done < work_s - 1e-12:
        done += speed_at(t) * step
        t += step
    return t


def test_a_timeline_finishes_work_at_the_speeds_it_passes_through():
    line = Timeline((0.1, 0.2, 0.5), (0.5, 0.25, 2.0))
    for start, work in ((0.0, 0.05), (0.05, 0.1), (0.15, 0.1), (0.3, 0.2), (0.6, 0.01)):
        assert line.finish(start, work) == pytest.approx(_integrated_end(line.speed_at, start, work), abs=2e-6)


def test_speed_is_the_column_or_the_sm_clock_ratio_and_time_is_scaled(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    samples = read_trace(tmp_path / "t.csv", ["0", "1"])
    assert [(s.t_s, s.speed, s.line) for s in samples] == [(0.0, 1.0, 3), (0.42, 0.5, 4), (0.5, 1.0, 5)]
    lines = timelines(samples, start_s=0.4, time_scale=2.0)
    assert lines["1"].starts == pytest.approx((-0.8, 0.04, 0.2)) and lines["1"].speeds == (1.0, 0.5, 1.0)


@pytest.mark.parametrize("trace_keys, line, slowed", [
    # the slow window spans the end of iteration 5's forward and the start of its backward
    ("", Timeline((0.0, 0.42, 0.5), (1.0, 0.5, 1.0)), 2),
    # trace time t is (t - 0.02) x 0.5 s into the run: the slow window is 0.2..0.24 s, in one backward
    ("start_s = 0.02\ntime_scale = 0.5", Timeline((-0.01, 0.2, 0.24), (1.0, 0.5, 1.0)), 1),
])
def test_a_replayed_trace_slows_the_traced_rank_by_the_work_left_at_its_speed(tmp_path, trace_keys, line, slowed):
    events, _ = _run(_scenario(tmp_path, trace_keys=trace_keys))
    stretched = 0
    for (start, end), (o_start, o_end) in zip(_computes(events, 1), _computes(events, 0)):
        work_s = (o_end - o_start) / 1e9                # rank 0 computes at nominal speed
        assert end / 1e9 == pytest.approx(_integrated_end(line.speed_at, start / 1e9, work_s), abs=5e-6)
        stretched += end - start > o_end - o_start + 1000
    assert stretched == slowed


def test_the_controller_sees_the_replayed_speed_and_helps_before_the_milestone_is_overdue(tmp_path):
    events, controller = _run(_scenario(tmp_path))
    samples = [e for e in events if e.kind == ev.GPU_SAMPLE]
    assert [(e.rank, e.t_ns, e.speed) for e in samples] == [(1, 0, 1.0), (1, 420_000_000, 0.5),
                                                             (1, 500_000_000, 1.0)]
    first = controller.decisions[0]
    assert first[:2] == (420_000_000, 1) and first[2] > 1.0      # at the sample, not once compute is overdue
    # the forward under way has 30 ms less what it did before 420 ms left: at half speed it ends that late
    mine = [e for e in events if e.rank == 1]
    begun = max(e.t_ns for e in mine if e.kind == ev.COMPUTE_START and e.t_ns <= 420_000_000)
    starts = [e.t_ns for e in mine if e.kind == ev.ITERATION_START]
    iteration_ns = starts[4] - starts[3]
    assert first[4] == pytest.approx((30e6 - (420e6 - begun)) / iteration_ns, rel=1e-3)


def test_the_same_seed_and_trace_give_the_same_decisions(tmp_path):
    scenario = _scenario(tmp_path)
    first, second = _run(scenario)[1], _run(scenario)[1]
    assert first.decisions and first.decisions == second.decisions


@pytest.mark.parametrize("trace, line, reason", [
    ("t_s,process,speed\n0.0,1,1.0\n,1,0.5\n", 3, "missing t_s"),
    ("t_s,process,speed\n0.0,1,1.0\n0.1,1,\n", 3, "missing speed"),
    ("t_s,process,speed\n0.0,1,1.0\n0.5,1,0.5\n0.4,1,1.0\n", 4, "time goes backwards"),
    ("# gpu trace\nt_s,process,speed\n0.0,gpu7,1.0\n", 3, "unknown process 'gpu7'"),
    ("t_s,process,speed\n0.0,1,fast\n", 2, "speed must be a number"),
    ("t_s,process\n0.0,1\n", 2, "missing speed"),
    ("time,process,speed\n", 1, "lacks column 't_s'"),
    ("t_s,process,speed\n0.0,1\n", 2, "2 fields, the header has 3"),
])
def test_a_bad_trace_names_its_line(tmp_path, trace, line, reason):
    assert_names_key(lambda: _scenario(tmp_path, trace), f"job[0].trace.file: {tmp_path / 'gpu.csv'}:{line}",
                     reason)


def test_the_trace_maps_one_process_per_rank(tmp_path):
    assert_names_key(lambda: _scenario(tmp_path, trace_keys='processes = ["a", "b"]'), "job[0].trace.processes",
                     "one trace process name per rank")


def test_a_bad_trace_exits_2_with_one_line_and_leaves_nothing(tmp_path):
    _scenario(tmp_path, TRACE)
    (tmp_path / "gpu.csv").write_text("t_s,process,speed\n0.5,1,0.5\n0.1,1,1.0\n")
    line = cli_rejects(["run", str(tmp_path / "s.toml")], tmp_path)
    assert line.endswith("gpu.csv:3: time goes backwards (0.1 s after 0.5 s)")


def test_the_shipped_trace_plan_replays_a_half_speed_window_on_rank_1():
    from pathlib import Path

    from scenario.plan import load_plan

    plan = load_plan(Path(__file__).resolve().parent.parent / "examples" / "prc-trace.toml")
    trace = plan.variants[0].scenario(0).jobs[0].trace
    assert trace.processes == ("gpu0", "gpu1", "gpu2", "gpu3")
    slow = trace.ranks[1]
    # trace 8-9 s at (t - 0.2) x 1.65 ms: 12.87-14.52 ms of the run, at half speed
    assert slow.speed_at(0.0135) == 0.5 and slow.speed_at(0.0125) == 1.0 and slow.speed_at(0.0146) == 1.0
    assert all(line.speed_at(0.0135) == 1.0 for r, line in enumerate(trace.ranks) if r != 1)
