"""The control plane on synthetic progress events: lag against a
process's own baseline, transient vs persistent, and what each policy
asks for. No root needed."""
import pytest

from control.inference import LagTracker
from control.policies import POLICIES, View
from scenario.control import ControlSpec, parse_control
from scenario.spec import ScenarioError
from workload import events as ev

MS = 1_000_000


def _iteration(tracker, proc, it, start_ms, compute_ms=80.0, step_ms=10.0, steps=3, late_ms=0.0):
    """One ring iteration's events of proc: compute (plus late_ms), then steps."""
    t = start_ms
    tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.ITERATION_START))
    tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.COMPUTE_START, "B mb 0"))
    t += compute_ms + late_ms
    tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.COMPUTE_END, "B mb 0"))
    for k in range(steps):
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.STEP_START, f"step {k + 1}/{steps}"))
        t += step_ms
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.STEP_END, f"step {k + 1}/{steps}"))
    tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.ITERATION_END))
    return t


def test_a_transient_straggler_is_late_by_its_extra_compute_while_it_computes_and_after():
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = 0.0
    for it in range(4):
        t = _iteration(tracker, 0, it, t)
    # iteration 4 starts; compute should end 80 ms in (baseline iteration 110 ms)
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 4, ev.ITERATION_START))
    assert tracker.lag(0, int((t + 70) * MS)) == 0.0             # nothing overdue yet
    assert tracker.lag(0, int((t + 91) * MS)) == pytest.approx(11 / 110, rel=0.01)   # compute end overdue by 11 ms
    assert tracker.late(0, int((t + 91) * MS)) and not tracker.late(0, int((t + 84) * MS))
    tracker.observe(ev.Event(int((t + 100) * MS), "j", 0, 0, 4, ev.COMPUTE_END, "B mb 0"))
    assert tracker.lag(0, int((t + 100) * MS)) == pytest.approx(20 / 110, rel=0.01)   # stays late after it
    assert not tracker.persistent(0)


@pytest.mark.parametrize("noise_mads", [0.0, 2.0])
def test_noise_mads_raises_the_threshold_to_a_jittery_process_own_spread(noise_mads):
    tracker = LagTracker(window=5, late_threshold=0.05, noise_mads=noise_mads)
    t = 0.0
    for it, step_ms in enumerate((10, 17, 7, 15, 9)):      # iterations of 110, 131, 101, 125, 107 ms
        t = _iteration(tracker, 0, it, t, step_ms=step_ms)
    # median 110 ms, median absolute deviation 9 ms: 2 of them are 0.164 of an iteration
    assert tracker.threshold(tracker.procs[0]) == pytest.approx(max(0.05, noise_mads * 9 / 110))
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 5, ev.ITERATION_START))
    within_noise, beyond = int((t + 93) * MS), int((t + 110) * MS)    # compute end 13 and 30 ms overdue
    assert tracker.late(0, within_noise) == (noise_mads == 0.0)
    assert tracker.late(0, beyond)


def test_a_process_late_in_most_iterations_becomes_persistent_and_is_no_longer_late():
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = 0.0
    for it in range(3):
        t = _iteration(tracker, 0, it, t)
    for it in range(3, 6):                      # from now on 30 ms slower every iteration
        assert not tracker.persistent(0)
        t = _iteration(tracker, 0, it, t, late_ms=30)
    assert tracker.persistent(0)                # late in 3 of its last 5
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 6, ev.ITERATION_START))
    assert not tracker.late(0, int((t + 115) * MS))        # its baseline moved: 110 ms compute is its normal


@pytest.mark.parametrize("carry_over", [False, True])
def test_carry_over_keeps_a_process_late_through_the_iteration_after_a_late_one(carry_over):
    tracker = LagTracker(window=5, late_threshold=0.05, carry_over=carry_over)
    t = 0.0
    for it in range(3):
        t = _iteration(tracker, 0, it, t)
    t = _iteration(tracker, 0, 3, t, late_ms=22)               # ends 22 ms late: 0.2 of its 110 ms baseline
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 4, ev.ITERATION_START))
    carried = 22 / 110 if carry_over else 0.0
    assert tracker.lag(0, int((t + 1) * MS)) == pytest.approx(carried)      # from the next iteration's start
    # 95 ms in, its compute end (baseline 80 ms) is 15 ms overdue: late by the larger of the two
    assert tracker.lag(0, int((t + 95) * MS)) == pytest.approx(max(carried, 15 / 110))
    t = _iteration(tracker, 0, 4, t)                         # on time: nothing carried into iteration 5
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 5, ev.ITERATION_START))
    assert tracker.lag(0, int((t + 1) * MS)) == 0.0


def test_iterations_late_in_communication_only_never_make_a_process_persistent():
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = 0.0
    for it in range(3):
        t = _iteration(tracker, 0, it, t)
    for it in range(3, 6):                      # its steps take twice as long: the network, not its GPU
        t = _iteration(tracker, 0, it, t, step_ms=20)
        assert not tracker.persistent(0)
    # then its GPU straggles: 95 ms into iteration 6 its compute end (baseline 80 ms) is 15 ms overdue
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 6, ev.ITERATION_START))
    assert tracker.late(0, int((t + 95) * MS))


def _ring_iterations(tracker, its, t, late_ms=(0.0, 0.0), step_ms=(10.0, 10.0)):
    """Iterations its of procs 0 and 1 of job j side by side from t (ms)."""
    for it in its:
        ends = [_iteration(tracker, proc, it, t, late_ms=late_ms[proc], step_ms=step_ms[proc]) for proc in (0, 1)]
        t = max(ends)
    return t


def test_a_straggler_episode_opens_on_a_compute_overrun_and_closes_when_the_job_is_on_time_again():
    tracker = LagTracker(window=5, late_threshold=0.05, carry_over=True)
    t = _ring_iterations(tracker, range(3), 0.0)
    # iteration 3: proc 1's steps take twice as long (contention): late, but no straggler
    t = _ring_iterations(tracker, [3], t, step_ms=(10.0, 20.0))
    assert tracker.procs[1].carry > 0.05 and not tracker.straggling(1, int(t * MS))
    for proc in (0, 1):
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, 4, ev.ITERATION_START))
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, 4, ev.COMPUTE_START, "B mb 0"))
    # proc 0's compute (baseline 80 ms) is 4 ms overdue at 84 ms, under the 5.5 ms threshold; 20 ms at 100
    assert not tracker.straggling(1, int((t + 84) * MS))
    assert tracker.compute_lag(0, int((t + 100) * MS)) == pytest.approx(20 / 110, rel=0.01)
    assert tracker.straggling(1, int((t + 100) * MS)) and tracker.straggling(0, int((t + 100) * MS))
    # iteration 4 ends late for both, iteration 5 for proc 1 only: open until both ended one on time
    tracker.observe(ev.Event(int((t + 100) * MS), "j", 0, 0, 4, ev.COMPUTE_END, "B mb 0"))
    for k in range(3):
        for proc in (0, 1):
            tracker.observe(ev.Event(int((t + 100 + 10 * k) * MS), "j", proc, proc, 4, ev.STEP_START, f"step {k + 1}/3"))
            tracker.observe(ev.Event(int((t + 110 + 10 * k) * MS), "j", proc, proc, 4, ev.STEP_END, f"step {k + 1}/3"))
    for proc in (0, 1):
        tracker.observe(ev.Event(int((t + 130) * MS), "j", proc, proc, 4, ev.ITERATION_END))
    t = _ring_iterations(tracker, [5], t + 130, step_ms=(10.0, 20.0))
    assert tracker.straggling(0, int(t * MS))
    t = _ring_iterations(tracker, [6], t)
    assert not tracker.straggling(0, int(t * MS)) and not tracker.straggling(1, int(t * MS))


def _start_iteration(tracker, it, t, computed_ms=(None, None)):
    """Iteration it of procs 0 and 1 starts at t (ms); a proc given computed_ms
    ends its compute then and starts its first step."""
    for proc in (0, 1):
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.ITERATION_START))
        tracker.observe(ev.Event(int(t * MS), "j", proc, proc, it, ev.COMPUTE_START, "B mb 0"))
        if computed_ms[proc] is not None:
            tracker.observe(ev.Event(int((t + computed_ms[proc]) * MS), "j", proc, proc, it, ev.COMPUTE_END, "B mb 0"))
            tracker.observe(ev.Event(int((t + computed_ms[proc]) * MS), "j", proc, proc, it, ev.STEP_START, "step 1/3"))


def test_an_episode_holds_the_largest_lag_its_job_reached_until_it_closes():
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = _ring_iterations(tracker, range(3), 0.0)
    _start_iteration(tracker, 3, t)
    assert tracker.episode_lag(1, int((t + 70) * MS)) is None            # no overrun yet
    assert tracker.episode_lag(1, int((t + 100) * MS)) == pytest.approx(20 / 110, rel=0.01)
    t = _ring_iterations(tracker, [3], t, late_ms=(20.0, 0.0))      # proc 0 ends 20 ms late, proc 1 on time
    _start_iteration(tracker, 4, t)
    assert tracker.lag(0, int((t + 1) * MS)) == 0.0                  # nobody is late now ...
    assert tracker.episode_lag(1, int((t + 1) * MS)) == pytest.approx(20 / 110, rel=0.01)   # ... the job still is
    t = _ring_iterations(tracker, [4], t)                            # proc 0 on time too: closed
    assert tracker.episode_lag(1, int(t * MS)) is None and not tracker.straggling(0, int(t * MS))


@pytest.mark.parametrize("trigger", ["lag", "straggler"])
def test_prc_with_trigger_straggler_leaves_lateness_from_contention_alone_to_dcqcn(trigger):
    spec = ControlSpec(policy="prc", gain=10.0, w_max=4.0, trigger=trigger)
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = _ring_iterations(tracker, range(3), 0.0)
    # both compute on time; 96.5 ms in, their first steps (baseline end 90 ms) are 6.5 ms overdue
    _start_iteration(tracker, 3, t, computed_ms=(80, 80))
    contention = _policy("prc", [0, 1])(_view(spec, tracker, t + 96.5))
    helped = (pytest.approx(1 + 10 * 6.5 / 110, rel=0.01), 0.0)
    assert contention == ({0: helped, 1: helped} if trigger == "lag" else {})
    t = _ring_iterations(tracker, [3], t)
    # then proc 0 straggles: at 100 ms its compute is 20 ms overdue, and proc 1's step 10 ms
    _start_iteration(tracker, 4, t, computed_ms=(None, 80))
    got = _policy("prc", [0, 1])(_view(spec, tracker, t + 100))
    assert got[0] == (pytest.approx(1 + 10 * 20 / 110, rel=0.01), 0.0)
    # by its own lag with trigger "lag"; as late as its job (the straggler) inside the episode
    assert got[1] == (pytest.approx(1 + 10 * (10 if trigger == "lag" else 20) / 110, rel=0.01), 0.0)


def _policy(name, procs=(0, 1, 2)):
    """The policy deciding for procs (every process of the view by default)."""
    return lambda view: POLICIES[name](view, list(procs))


def _view(spec, tracker, now_ms, slowdowns=None, iteration=None, sent=None):
    return View(spec, tracker, int(now_ms * MS), {0: "h0", 1: "h1", 2: "h0"},
                {0: ("train", 0), 1: ("train", 1), 2: ("bg", 0)}, {"train"},
                slowdowns or {"train": [[0.0] * 10, [0.0] * 10]}, iteration or {}, sent or {})


def test_prc_helps_the_late_process_by_its_lag_and_its_nic_neighbour_yields():
    spec = ControlSpec(policy="prc", gain=10.0, w_max=4.0, w_yield=0.5, floor=0.3, trigger="lag")
    tracker = LagTracker(window=5, late_threshold=0.05)
    t = 0.0
    for it in range(3):
        t = _iteration(tracker, 0, it, t)
        _iteration(tracker, 1, it, t - 110)
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 3, ev.ITERATION_START))
    tracker.observe(ev.Event(int(t * MS), "j", 0, 0, 3, ev.COMPUTE_START, "B mb 0"))
    got = _policy("prc")(_view(spec, tracker, t + 91))
    assert got[0] == (pytest.approx(1 + 10 * 11 / 110, rel=0.01), 0.3)
    assert got[2] == (0.5, 0.0) and 1 not in got          # bg shares h0 with the late rank; rank 1 is elsewhere
    assert _policy("prc")(_view(spec, tracker, t + 200))[0][0] == 4.0      # capped at w_max
    # deciding for h1's process alone (an event of rank 1) leaves h0's decisions out
    assert _policy("prc", [1])(_view(spec, tracker, t + 91)) == {}
    assert _policy("prc", [0, 2])(_view(spec, tracker, t + 91)) == got
    assert _policy("dcqcn")(_view(spec, tracker, t + 91)) == {}


def test_oracle_helps_every_rank_of_the_job_in_the_straggler_iteration_only():
    spec = ControlSpec(policy="oracle", w_max=4.0)
    table = {"train": [[0.0, 0.0, 0.0], [0.0, 0.5, 0.0]]}
    tracker = LagTracker(window=5, late_threshold=0.05)
    assert _policy("oracle")(_view(spec, tracker, 0, table, {0: 1, 1: 1, 2: 1})) == {0: (4.0, 0.0), 1: (4.0, 0.0)}
    assert _policy("oracle")(_view(spec, tracker, 0, table, {0: 2, 1: 2, 2: 1})) == {}


def test_mltcp_weight_grows_with_the_bytes_sent():
    spec = ControlSpec(policy="mltcp", w_max=4.0)
    got = _policy("mltcp")(_view(spec, LagTracker(5, 0.05), 0, iteration={0: 1, 1: 1, 2: 1},
                                  sent={0: 0.0, 1: 0.5, 2: 0.9}))
    assert got == {0: (1.0, 0.0), 1: (2.5, 0.0)}           # bg is not a training job


@pytest.mark.parametrize("table,key", [({"policy": "fast"}, "control.policy"), ({"gain": "x"}, "control.gain"),
                                       ({"w_max": 0.5}, "control.w_max"), ({"window": 0}, "control.window"),
                                       ({"colour": 1}, "control.colour"), ({"observe": "gpu"}, "control.observe"),
                                       ({"carry_over": 1}, "control.carry_over"),
                                       ({"trigger": "always"}, "control.trigger")])
def test_bad_control_tables_name_the_key(table, key):
    with pytest.raises(ScenarioError, match=f"^{key}:"):
        parse_control(table)


class _Writes:
    """Where the controller's hook writes go in a run on the serial-link transport."""

    def __init__(self):
        self.log = []

    def set(self, proc, weight, floor):
        self.log.append((proc, weight, floor))


def _controlled_run(seed: int, policy: str = "prc", straggle: float = 0.05, trigger: str = "straggler"):
    from control.controller import Controller
    from scenario.spec import parse_scenario
    from workload.driver import Workload
    from workload.ideal import IdealTransport

    scenario = parse_scenario({
        "topology": {"hosts": 4}, "control": {"policy": policy, "trigger": trigger},
        "job": [{"name": "train", "iterations": 30, "seed": seed,
                 "model": {"forward_us": 267, "backward_us": 533, "gradient_bytes": 4_000_000},
                 "stragglers": {"probability": straggle, "duration": [1, 2], "slowdown": [0.3, 1.0]}},
                {"name": "bg", "kind": "onoff", "burst_bytes": 4_000_000, "period_us": 1600}]})
    transport = IdealTransport(1e9, 100_000)
    workload = Workload(scenario.jobs, transport, 100, ev.EventBus())
    writes = _Writes()
    controller = Controller(scenario.control, workload, writes, 100)
    controller.start()
    workload.start()
    transport.run(until=lambda: workload.finished)
    return controller.decisions, writes.log


def test_the_same_seed_gives_the_same_controller_decisions():
    decisions, writes = _controlled_run(3)
    assert decisions and [(p, w, f) for _t, p, w, f, _lag in decisions] == writes
    assert _controlled_run(3) == (decisions, writes)
    assert _controlled_run(4)[0] != decisions                 # other stragglers, other decisions
    assert all(w == 1.0 or w > 1.0 and p < 4 for _t, p, w, _f, _lag in decisions)   # only training ranks helped


@pytest.mark.parametrize("trigger", ["lag", "straggler"])
def test_without_a_straggler_prc_writes_nothing_unless_any_lateness_triggers_it(trigger):
    decisions, writes = _controlled_run(3, straggle=0.0, trigger=trigger)
    # the background's bursts make the ranks late now and then: "lag" helps them, episodes never open
    assert bool(writes) == (trigger == "lag")
