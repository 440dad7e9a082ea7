"""The workload layer on a transport without congestion control (serial
links, no marking): job tables, 1F1B order, collectives' bytes, waits on
completions, stragglers. No root needed; the live runs are in
test_workload_live.py."""
from pathlib import Path

import pytest

from bad_input import assert_names_key, cli_rejects
from scenario.spec import ScenarioError, parse_scenario
from workload import events as ev
from scenario.job import COLLECTIVES
from workload.collectives import KINDS, bytes_sent
from workload.driver import Workload
from workload.ideal import IdealTransport
from workload.programs import one_f_one_b
from workload.stats import iterations, summarize_job
from workload.stragglers import slowdowns, transient

REPO = Path(__file__).resolve().parent.parent
GBIT = 1e9


def _scenario(*jobs, hosts=4):
    return parse_scenario({"topology": {"hosts": hosts}, "job": list(jobs)})


def _train(**over):
    job = {"name": "train", "iterations": 4, "model": {"forward_us": 100, "backward_us": 200,
                                                       "gradient_bytes": 4_000_000}}
    job.update(over)
    return job


def _run(sc, dilation=100, delay_ns=0):
    transport = IdealTransport(GBIT, delay_ns)
    events = []
    bus = ev.EventBus()
    bus.subscribe(events.append)
    workload = Workload(sc.jobs, transport, dilation, bus)
    workload.start()
    transport.run(until=lambda: workload.finished, limit_ns=600 * 10**9)
    assert workload.finished
    return workload, transport, events


BAD_JOBS = [
    (_train(hosts=["h0", "h9"]), "job[0].hosts", "unknown host 'h9'"),
    (_train(model={"forward_us": 100, "gradient_bytes": 1001}), "job[0].model.gradient_bytes", "does not divide"),
    (_train(model={"forward_us": -5, "gradient_bytes": 4}), "job[0].model.forward_us", "must be >= 0"),
    (_train(straggler=[{"rank": 4, "iterations": [1], "slowdown": 0.5}]), "job[0].straggler[0].rank",
     "ranks 0..3"),
    (_train(straggler=[{"rank": 1, "iterations": [9], "slowdown": 0.5}]), "job[0].straggler[0].iterations",
     "must be 0..3"),
    (_train(tp=2, pp=3), "job[0].dp", "tp x pp x dp"),
    (_train(pp=2, model={"forward_us": 1, "gradient_bytes": 4}), "job[0].model.activation_bytes", "pp > 1"),
    (_train(kind="ring"), "job[0].kind", "must be one of"),
    (_train(qp_state="warm"), "job[0].qp_state", "must be one of"),
    (_train(warmup_iterations=4), "job[0].warmup_iterations", "below iterations"),
    (_train(start_jitter_us=-1), "job[0].start_jitter_us", "must be >= 0"),
    ({"name": "bg", "kind": "onoff", "burst_bytes": 1000, "period_us": 10}, "job", "at least one training job"),
    ({"name": "bg", "kind": "onoff", "burst_bytes": 1002, "period_us": 10}, "job[0].burst_bytes", "divide"),
]


@pytest.mark.parametrize("job,key,reason", BAD_JOBS, ids=[b[1] + ":" + b[2] for b in BAD_JOBS])
def test_bad_jobs_name_the_key_and_the_reason(job, key, reason):
    assert_names_key(lambda: _scenario(job), key, reason)


def test_a_bad_job_file_exits_2_with_one_line_and_leaves_nothing(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[topology]\nhosts = 4\n[[job]]\nname = "t"\nhosts = ["h0", "h7"]\n'
                    '[job.model]\nforward_us = 10\n')
    line = cli_rejects(["run", str(path)], tmp_path)
    assert "job[0].hosts" in line and "h7" in line


def test_jobs_and_traffic_flows_do_not_mix():
    with pytest.raises(ScenarioError, match="^traffic:"):
        parse_scenario({"job": [_train()], "traffic": {"duration_s": 5}})


@pytest.mark.parametrize("stages,microbatches", [(1, 3), (2, 4), (4, 4), (4, 2)])
def test_one_f_one_b_runs_every_microbatch_forward_then_backward(stages, microbatches):
    for stage in range(stages):
        order = one_f_one_b(stage, stages, microbatches)
        assert sorted(order) == sorted([("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)])
        assert all(order.index(("F", m)) < order.index(("B", m)) for m in range(microbatches))
        warmup = min(stages - stage - 1, microbatches)
        filled = min(warmup + 1, microbatches)
        assert [op for op, _ in order[:filled]] == ["F"] * filled
        # 1F1B keeps at most `stages - stage` microbatches in flight on a stage
        in_flight = peak = 0
        for op, _ in order:
            in_flight += 1 if op == "F" else -1
            peak = max(peak, in_flight)
        assert peak == min(stages - stage, microbatches)


def test_ring_allreduce_moves_2_n_minus_1_over_n_of_the_buffer_per_rank():
    sc = _scenario(_train())
    _w, transport, _events = _run(sc)
    per_rank = 2 * 3 * 4_000_000 // 4
    assert sorted(transport.delivered.values()) == [4 * per_rank] * 4      # 4 iterations, one ring each
    assert set(transport.delivered) == {(0, 1), (1, 2), (2, 3), (3, 0)}


def test_every_collective_a_scenario_names_is_one_the_workload_runs():
    assert set(COLLECTIVES) == set(KINDS)


@pytest.mark.parametrize("collective,steps", [("allreduce", 6), ("allgather", 3), ("reducescatter", 3),
                                              ("alltoall", 3)])
def test_background_collectives_send_what_their_algorithm_says(collective, steps):
    burst = 1_200_000
    sc = _scenario(_train(iterations=2), {"name": "bg", "kind": "onoff", "collective": collective,
                                          "burst_bytes": burst, "period_us": 100_000})
    workload, transport, _events = _run(sc)
    bg = {k: v for k, v in transport.delivered.items() if k[0] >= 4}
    assert sum(bg.values()) == 4 * steps * burst // 4 == 4 * bytes_sent(collective, 4, burst)
    assert len(bg) == (12 if collective == "alltoall" else 4)


def test_pipeline_stages_start_a_microbatch_only_after_its_input_is_visible():
    sc = _scenario(_train(pp=2, dp=2, microbatches=3, iterations=2,
                          model={"forward_us": 100, "backward_us": 200, "activation_bytes": 500_000,
                                 "gradient_bytes": 1_000_000}))
    workload, _transport, events = _run(sc, delay_ns=50_000)
    job = sc.jobs[0]
    computes = {(e.rank, e.iteration, e.detail): e.t_ns for e in events if e.kind == ev.COMPUTE_START}
    ends = {(e.rank, e.iteration, e.detail): e.t_ns for e in events if e.kind == ev.COMPUTE_END}
    checked = 0
    for it in range(2):
        for mb in range(3):
            for dp in range(2):
                first, last = job.rank_at(0, dp, 0), job.rank_at(0, dp, 1)
                # the forward downstream waits for upstream's forward plus the activation's transfer
                transfer = 500_000 * 8 / GBIT * 1e9 + 2 * 50_000
                assert computes[last, it, f"F mb {mb}"] >= ends[first, it, f"F mb {mb}"] + transfer
                assert computes[first, it, f"B mb {mb}"] >= ends[last, it, f"B mb {mb}"] + transfer
                checked += 2
    assert checked == 24


def test_a_transient_straggler_without_contention_delays_the_iteration_by_about_its_compute():
    sc = _scenario(_train(iterations=6, straggler=[{"rank": 2, "iterations": [3], "slowdown": 0.5}]))
    workload, _t, events = _run(sc, dilation=100)
    job = sc.jobs[0]
    its = iterations(events, job, 100)
    summary = summarize_job(job, its, 100)
    assert summary["straggler_iterations"] == [3]
    assert summary["extra_compute_ms"] == pytest.approx(0.5 * 300 * 1000 * 100 / 1e6)
    assert 0.8 < summary["amplification"] <= 1.01
    assert summary["normal_ms"]["cv"] < 0.01


def test_stochastic_stragglers_come_from_the_seed_within_their_ranges():
    job = _scenario(_train(iterations=200, seed=7, stragglers={"probability": 0.1, "duration": [2, 3],
                                                              "slowdown": [0.2, 0.4]})).jobs[0]
    table = slowdowns(job)
    assert table == slowdowns(job)                       # same seed, same episodes
    other = _scenario(_train(iterations=200, seed=8, stragglers={"probability": 0.1, "duration": [2, 3],
                                                                "slowdown": [0.2, 0.4]})).jobs[0]
    assert slowdowns(other) != table
    values = [v for row in table for v in row if v]
    assert values and all(0.2 <= v <= 0.4 for v in values)
    slow_fraction = len(values) / (4 * 200)
    assert 0.1 < slow_fraction < 0.35          # p = 0.1 per free iteration, 2-3 iterations each
    assert all(transient(table, r) for r in range(4) if any(table[r]))


def _onoff(**over):
    job = {"name": "bg", "kind": "onoff", "burst_bytes": 400_000, "period_us": 1000, "start_us": 100,
           "start_jitter_us": 500}
    job.update(over)
    return job


def test_a_start_jitter_moves_a_jobs_start_by_a_draw_from_its_seed():
    def start(seed, **over):
        return _scenario(_train(), _onoff(seed=seed, **over)).jobs[1].start_us

    starts = [start(seed) for seed in range(1, 41)]
    assert starts == [start(seed) for seed in range(1, 41)]          # same seed, same start
    assert all(100 <= s <= 600 for s in starts)
    assert max(starts) - min(starts) > 400 and len(set(starts)) > 30  # spread over the range
    assert start(1, start_jitter_us=0) == 100
    twins = _scenario(_train(seed=3, start_jitter_us=500), _onoff(seed=3)).jobs
    assert twins[0].start_us != twins[1].start_us - 100              # two jobs draw apart


def test_a_job_starts_its_first_burst_at_its_drawn_start():
    sc = _scenario(_train(iterations=2), _onoff(seed=5))
    workload, _t, events = _run(sc, dilation=100)
    first = min(e.t_ns for e in events if e.job == "bg" and e.kind == ev.ITERATION_START)
    assert sc.jobs[1].start_us != 100
    assert abs(first - workload.start_ns - sc.jobs[1].start_us * 1000 * 100) <= 1


def test_a_persistent_straggler_is_slow_in_every_iteration():
    job = _scenario(_train(straggler=[{"rank": 0, "iterations": "all", "slowdown": 0.2}])).jobs[0]
    table = slowdowns(job)
    assert table[0] == [0.2] * 4 and not transient(table, 0)


def test_events_report_bytes_remaining_down_to_zero():
    sc = _scenario(_train(iterations=2))
    _w, _t, events = _run(sc)
    ends = [e for e in events if e.kind == ev.ITERATION_END]
    starts = [e for e in events if e.kind == ev.ITERATION_START]
    assert len(ends) == 8 and all(e.bytes_remaining == 0 for e in ends)
    assert all(e.bytes_remaining == 2 * 3 * 1_000_000 for e in starts)
