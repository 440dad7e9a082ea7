"""A sweep file (TOML): one scenario, a grid of values for its keys, and
how many seeds each point of the grid runs in the simulator.

    name = "gain"
    scenario = "training.toml"        # relative to the sweep file
    seeds = 2                          # run s adds s to every job's seed
    step_us = 1.0                      # the simulator's step (datacenter us)

    [grid]                             # every combination of these
    "control.policy" = ["dcqcn", "prc"]
    "control.gain" = [10, 40]
    "job.train.model.gradient_bytes" = [2000000, 5000000]

A key is a dotted path into the scenario's tables; `job.NAME.` starts at
the job of that name. Every point's scenario is checked (without the
limits only a live run has) before anything runs."""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from pathlib import Path

from scenario.errors import check_table, fail, integer, number
from scenario.spec import Scenario, ScenarioError, read_job_scenario, read_toml, with_seeds

STEP_US_RANGE = (0.01, 100.0)
MAX_POINTS = 1000
MAX_SEEDS = 100
_KEYS = ("name", "scenario", "seeds", "step_us", "grid")


@dataclass(frozen=True)
class Point:
    values: dict            # grid key -> its value at this point
    data: dict              # the scenario's tables with the values set (seeds of run 0)

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items())

    def scenario(self, seed: int) -> Scenario:
        """This point's scenario for seed offset `seed`: every job's seed
        moved on by it, the same at every point."""
        return with_seeds(self.data, seed, live=False)


@dataclass(frozen=True)
class Sweep:
    name: str
    scenario_path: Path
    seeds: int
    step_us: float
    keys: tuple[str, ...]
    points: tuple[Point, ...]


def set_key(data: dict, key: str, value) -> None:
    """Set dotted key in the scenario's tables `data`, in place; `job.NAME.`
    addresses the job table named NAME."""
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        fail(f"grid.{key}", "must be a dotted path to a scenario key, e.g. control.gain or job.train.iterations")
    table = data
    if parts[0] == "job":
        jobs = {j.get("name"): j for j in data.get("job", []) if isinstance(j, dict)}
        if parts[1] not in jobs or len(parts) < 3:
            fail(f"grid.{key}", f"job.NAME.KEY with NAME one of: {', '.join(map(str, jobs))}")
        table, parts = jobs[parts[1]], parts[2:]
    for part in parts[:-1]:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            fail(f"grid.{key}", f"{part!r} is not a table")
    table[parts[-1]] = value


def parse_sweep(data: dict, base: Path, seeds: int | None = None) -> Sweep:
    """A sweep file's tables; its scenario path is relative to folder
    base; seeds: overrides the file's."""
    check_table("", data, _KEYS)
    path, scenario = read_job_scenario(data, base, "simulate")
    seeds = integer("seeds", seeds if seeds is not None else data.get("seeds", 2), 1, MAX_SEEDS)
    step_us = number("step_us", data.get("step_us", 1.0), *STEP_US_RANGE)
    grid = check_table("grid", data.get("grid", {}), list(data.get("grid", {})), "a table ([grid])")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            fail(f"grid.{key}", "must be a non-empty list of values")
    combos = list(itertools.product(*grid.values()))
    if len(combos) > MAX_POINTS:
        fail("grid", f"{len(combos)} points; at most {MAX_POINTS}")
    points = []
    for combo in combos:
        values = dict(zip(grid, combo))
        point_data = copy.deepcopy(scenario)
        for key, value in values.items():
            set_key(point_data, key, value)
        point = Point(values, point_data)
        try:
            point.scenario(0)
        except ScenarioError as exc:
            fail("grid", f"at {point.label or 'the scenario'}: {exc}")
        points.append(point)
    return Sweep(str(data.get("name", Path(path).stem)), path, seeds, step_us, tuple(grid), tuple(points))


def load_sweep(path: str | Path, seeds: int | None = None) -> Sweep:
    return parse_sweep(read_toml(path), Path(path).parent, seeds)
