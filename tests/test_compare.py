"""Comparison plans (a scenario and its variants), the intervals over runs
and the straggler statistics they compare. No root needed; a live
comparison runs in test_workload_live.py."""
import statistics
from pathlib import Path

import pytest

from bad_input import assert_names_key, cli_rejects
from experiment.compare import MAX_RETRIES, RunQueue, aggregate, interval, versus
from scenario.plan import load_plan, policy_plan
from scenario.spec import ScenarioError
from workload.stats import Iteration, summarize_job

REPO = Path(__file__).resolve().parent.parent

SCENARIO = """
[topology]
hosts = 4
[[job]]
name = "train"
seed = 5
[job.model]
forward_us = 100
gradient_bytes = 4000000
[[job.straggler]]
rank = 1
iterations = [3]
slowdown = 0.5
[[job]]
name = "bg"
kind = "onoff"
burst_bytes = 1000000
period_us = 700
"""


def _plan(tmp_path, text: str):
    (tmp_path / "s.toml").write_text(SCENARIO)
    (tmp_path / "plan.toml").write_text('scenario = "s.toml"\n' + text)
    return load_plan(tmp_path / "plan.toml")


def test_variants_drop_replace_and_change_jobs_and_runs_move_every_seed(tmp_path):
    plan = _plan(tmp_path, """runs = 3
[[variant]]
name = "as-is"
[[variant]]
name = "alone"
without = ["bg"]
[[variant]]
name = "bulk"
[[variant.job]]
name = "bg"
kind = "bulk"
[[variant]]
name = "steady"
[variant.set.train]
straggler = []
[variant.set.train.model]
forward_us = 200
""")
    assert plan.runs == 3 and [v.name for v in plan.variants] == ["as-is", "alone", "bulk", "steady"]
    as_is, alone, bulk, steady = (v.scenario(2) for v in plan.variants)
    assert [j.name for j in alone.jobs] == ["train"]
    assert [(j.name, j.kind) for j in bulk.jobs] == [("train", "training"), ("bg", "bulk")]
    assert len(as_is.jobs[0].stragglers) == 1 and steady.jobs[0].stragglers == ()
    # a nested table is merged key by key: the gradient stays
    assert steady.jobs[0].model.forward_us == 200 and steady.jobs[0].model.gradient_bytes == 4_000_000
    # run r adds r to every job's seed, the same in every variant
    assert {j.seed for s in (as_is, alone, bulk, steady) for j in s.jobs if j.name == "train"} == {7}
    assert plan.variants[0].scenario(0).jobs[1].seed == 1


BAD_PLANS = [
    ('[[variant]]\nname = "a"\nwithout = ["nope"]\n', "variant[0].without", "no job named 'nope'"),
    ('[[variant]]\nname = "a"\n[variant.set.nope]\nseed = 1\n', "variant[0].set.nope", "no job named"),
    ('[[variant]]\nname = "a"\n[[variant]]\nname = "a"\n', "variant[1].name", "duplicate"),
    ('[[variant]]\nname = "A b"\n', "variant[0].name", "must be"),
    ('[[variant]]\nname = "a"\ncolour = 1\n', "variant[0].colour", "unknown key"),
    ('runs = 0\n[[variant]]\nname = "a"\n', "runs", "1..100"),
    ('runs = 2\n', "variant", "at least one"),
    ('[[variant]]\nname = "a"\n[variant.set.train]\nstraggler = [{rank = 9, iterations = [1], slowdown = 1}]\n',
     "variant[0]", "job[0].straggler[0].rank"),
]


@pytest.mark.parametrize("text,key,reason", BAD_PLANS, ids=[b[1] + ":" + b[2] for b in BAD_PLANS])
def test_bad_plans_name_the_key_and_the_reason(tmp_path, text, key, reason):
    assert_names_key(lambda: _plan(tmp_path, text), key, reason)


def test_a_bad_plan_exits_2_with_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "s.toml").write_text(SCENARIO)
    (tmp_path / "plan.toml").write_text('scenario = "s.toml"\n[[variant]]\nname = "a"\nwithout = ["x"]\n')
    assert "variant[0].without" in cli_rejects(["compare", str(tmp_path / "plan.toml")], tmp_path)


def test_the_shipped_plans_parse():
    plan = load_plan(REPO / "examples" / "amplification.toml")
    assert plan.runs >= 3 and {v.name for v in plan.variants} >= {"on-off", "none", "always-on"}
    fabric = load_plan(REPO / "examples" / "prc-fabric.toml")
    assert [v.name for v in fabric.variants][:2] == ["dcqcn", "prc"]
    starts = {fabric.variants[0].scenario(run).jobs[1].start_us for run in range(8)}
    assert len(starts) == 8            # each run meets the background at a phase of its own


def test_interval_is_the_student_t_interval_of_the_mean():
    got = interval([1.0, 2.0, 3.0])
    half = 4.303 * 1.0 / 3 ** 0.5            # t(0.975, 2 df) x s / sqrt(n)
    assert got["mean"] == 2.0 and got["lo"] == pytest.approx(2 - half) and got["hi"] == pytest.approx(2 + half)
    assert interval([4.0]) == {"n": 1, "mean": 4.0, "lo": None, "hi": None}
    wide = interval([1.0, 2.0, 3.0] * 20)          # 59 df: close to the normal quantile
    assert wide["hi"] - wide["mean"] == pytest.approx(2.0 * statistics.stdev([1.0, 2.0, 3.0] * 20) / 60 ** 0.5,
                                                      rel=0.02)


def test_invalid_runs_are_left_out_of_the_intervals():
    rows = [{"variant": "a", "run": 0, "valid": True, "metrics": {"train:amplification": 1.0}},
            {"variant": "a", "run": 1, "valid": False, "metrics": {"train:amplification": 9.0}},
            {"variant": "a", "run": 2, "valid": True, "metrics": {"train:amplification": 2.0}}]
    assert aggregate(rows)["a"]["train:amplification"]["mean"] == 1.5
    assert aggregate(rows)["a"]["train:amplification"]["n"] == 2


class _Job:
    name, ranks, warmup_iterations = "train", 4, 1


def _its(durations_ms: list[float], straggler_at: int, extra_ms: float) -> list[Iteration]:
    out, t = [], 0
    for k, d in enumerate(durations_ms):
        ns = int(d * 1e6)
        out.append(Iteration("train", k, t, t + ns, ns, int(extra_ms * 1e6) if k == straggler_at else 0, t, t + ns))
        t += ns
    return out


def test_amplification_counts_the_aftermath_against_the_median_normal_iteration():
    # steady 150 ms; the straggler (+40 ms of compute) takes 210, the next two iterations 180 and 160
    its = _its([170, 150, 150, 150, 210, 180, 160, 150, 150], straggler_at=4, extra_ms=40)
    s = summarize_job(_Job, its, 100)
    assert s["steady_iteration_ms"] == 150            # the median: the aftermath does not move it
    assert s["amplification"] == pytest.approx(60 / 40)
    assert s["job_delay_ms"] == pytest.approx(60 + 30 + 10)     # the warm-up iteration is not counted
    assert s["job_amplification"] == pytest.approx(100 / 40)
    calm = summarize_job(_Job, _its([170, 150, 150, 190, 150, 150], straggler_at=3, extra_ms=40), 100)
    assert calm["amplification"] == calm["job_amplification"] == pytest.approx(1.0)


def test_runs_interleave_and_an_invalid_one_comes_again_with_its_seeds_after_the_others():
    queue = RunQueue(["a", "b", "c"], 2)
    seen = []
    for run, variant, attempt in queue:
        seen.append((run, variant, attempt))
        if (run, variant) == (0, "b"):             # invalid every time
            queue.again(run, variant, attempt)
    assert seen[:6] == [(0, "a", 1), (0, "b", 1), (0, "c", 1), (1, "b", 1), (1, "c", 1), (1, "a", 1)]
    assert seen[6:] == [(0, "b", k) for k in range(2, MAX_RETRIES + 2)]


def test_changes_against_the_first_variant_pair_runs_with_the_same_seeds():
    rows = [{"variant": "dcqcn", "run": 0, "valid": True, "metrics": {"t:x": 200.0}},
            {"variant": "prc", "run": 0, "valid": True, "metrics": {"t:x": 180.0}},
            {"variant": "dcqcn", "run": 1, "valid": True, "metrics": {"t:x": 250.0}},
            {"variant": "prc", "run": 1, "valid": True, "metrics": {"t:x": 200.0}},
            {"variant": "dcqcn", "run": 2, "valid": False, "metrics": {"t:x": 999.0}},
            {"variant": "prc", "run": 2, "valid": True, "metrics": {"t:x": 100.0}}]
    got = versus(rows, "dcqcn")
    assert list(got) == ["prc"] and got["prc"]["t:x"]["n"] == 2          # run 2 has no valid baseline
    assert got["prc"]["t:x"]["mean"] == pytest.approx((-0.1 - 0.2) / 2)


def test_a_scenario_under_several_policies_is_a_plan_of_one_variant_each(tmp_path):
    (tmp_path / "s.toml").write_text(SCENARIO + "[control]\ngain = 5.0\n")
    plan = policy_plan(tmp_path / "s.toml", ["dcqcn", "prc"], 3)
    assert plan.runs == 3 and [v.name for v in plan.variants] == ["dcqcn", "prc"]
    prc = plan.variants[1].scenario(0).control
    assert prc.policy == "prc" and prc.gain == 5.0              # the scenario's other keys stay
    with pytest.raises(ScenarioError, match=r"^variant\[0\]: .*control.policy"):
        policy_plan(tmp_path / "s.toml", ["fast"], 2)


def test_an_unknown_policy_exits_2_with_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "s.toml").write_text(SCENARIO)
    line = cli_rejects(["compare", str(tmp_path / "s.toml"), "--cc", "dcqcn,fast"], tmp_path)
    assert "control.policy" in line and "fast" in line


@pytest.mark.parametrize("args, says", [
    (["--cc", "dcqcn,fast", "--seeds", "2"], "control.policy"),
    (["--cc", "dcqcn,prc", "--seeds", "0"], "--runs (run --seeds) must be in 1.."),
    (["--seeds", "2"], "--seeds goes with --cc"),
])
def test_run_with_several_policies_rejects_bad_input_like_compare(tmp_path, args, says):
    (tmp_path / "s.toml").write_text(SCENARIO)
    assert says in cli_rejects(["run", str(tmp_path / "s.toml"), *args], tmp_path)


def test_a_result_whose_name_is_taken_gets_the_next_free_one_and_a_failed_one_leaves_nothing(tmp_path):
    from experiment.results import ResultsWriter

    finals = []
    for text in ("first", "second", "third"):
        with ResultsWriter(tmp_path, "p1a2b") as out:
            (out.dir / "summary.json").write_text(text)
        finals.append(out.final)
    assert [f.name for f in finals] == ["p1a2b", "p1a2b-2", "p1a2b-3"]
    assert [(f / "summary.json").read_text() for f in finals] == ["first", "second", "third"]
    with pytest.raises(RuntimeError):
        with ResultsWriter(tmp_path, "p1a2b") as out:
            (out.dir / "summary.json").write_text("half")
            raise RuntimeError("the run failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1a2b", "p1a2b-2", "p1a2b-3"]
