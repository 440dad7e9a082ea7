"""Job scenarios in the simulator (sim/), written as live runs are:
the same results files, plus the simulator's step in config.json."""
from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

from experiment.results import ResultsWriter, versions


def check_step(step_us: float) -> None:
    from scenario.spec import ScenarioError
    from scenario.sweep import STEP_US_RANGE
    low, high = STEP_US_RANGE
    if not low <= step_us <= high:
        raise ScenarioError(f"--step-us must be within {low:g}..{high:g} datacenter us, got {step_us:g}")


def in_simulator(scenario, scenario_path: str, results_root, step_us: float, progress=None):
    """Run scenario's jobs in the simulator into a new results folder
    under results_root: (the folder, its summary)."""
    from experiment import workload_report
    from sim.run import run_sim

    run_id = f"sim-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    with ResultsWriter(Path(results_root), run_id) as out:
        result = run_sim(scenario, step_us, progress=progress)
        summary = workload_report.write(out, result, scenario)
        out.json("config.json", {"scenario_path": scenario_path, "scenario": scenario,
                                 "simulator": result.simulator})
        out.json("versions.json", versions())
    return out.final, summary


def main(scenario_path: str, results_root: str, step_us: float) -> int:
    """`prc-emu sim SCENARIO`: one run of its jobs, with their summary."""
    from experiment.run import iteration_counter, print_jobs
    from scenario.spec import ScenarioError, load_scenario

    try:
        check_step(step_us)
        scenario = load_scenario(scenario_path, live=False)
        if not scenario.jobs:
            raise ScenarioError("the simulator runs [[job]] tables; this scenario has [traffic] flows")
    except ScenarioError as exc:
        print(f"prc-emu: scenario error: {exc}", file=sys.stderr)
        return 2
    print(f"simulating {len(scenario.jobs)} jobs ({', '.join(f'{j.name}: {j.kind}, {j.ranks} ranks' for j in scenario.jobs)}) "
          f"in steps of {step_us:g} us", flush=True)
    final, summary = in_simulator(scenario, scenario_path, results_root, step_us, iteration_counter(scenario))
    print()
    return print_jobs(final, summary)
