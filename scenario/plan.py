"""A comparison plan: one scenario, several variants of it, each run the
same number of times with the same seeds. A variant names jobs to leave
out (`without`), whole job tables to put in (`[[variant.job]]`, replacing
the job of the same name) and keys to change in a job
(`[variant.set.JOB]`, nested tables merged key by key), and keys of the
rate-control policy (`[variant.control]`, over the scenario's). Every variant's
scenario is checked before anything runs."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scenario.errors import check_table, fail as _fail
from scenario.spec import Scenario, ScenarioError, anchor_files, read_job_scenario, read_toml, with_seeds

VARIANT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
MAX_RUNS = 100
DEFAULT_RUNS = 2
_PLAN_KEYS = ("name", "runs", "scenario", "variant")
_VARIANT_KEYS = ("about", "control", "job", "name", "set", "without")


@dataclass(frozen=True)
class Variant:
    name: str
    about: str
    data: dict              # the scenario's TOML tables with the variant applied (seed of run 0)
    live: bool = True       # checked for a live run (False: the simulator's)

    def scenario(self, run: int) -> Scenario:
        """The variant's scenario for run `run`: every job's seed moved on
        by `run`, the same for every variant."""
        return with_seeds(self.data, run, self.live)


@dataclass(frozen=True)
class Plan:
    name: str
    scenario_path: Path
    runs: int
    variants: tuple[Variant, ...]


def _merge(base: dict, changes: dict) -> dict:
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def apply_variant(data: dict, where: str, table: dict) -> dict:
    """The scenario tables `data` with variant `table` applied."""
    jobs = {j.get("name"): j for j in data.get("job", []) if isinstance(j, dict)}
    without = table.get("without", [])
    if not isinstance(without, list) or not all(isinstance(n, str) for n in without):
        _fail(f"{where}.without", "must be a list of job names")
    for name in without:
        if name not in jobs:
            _fail(f"{where}.without", f"no job named {name!r} (jobs: {', '.join(map(str, jobs))})")
        del jobs[name]
    added = table.get("job", [])
    if not isinstance(added, list) or not all(isinstance(j, dict) and isinstance(j.get("name"), str)
                                              for j in added):
        _fail(f"{where}.job", "must be job tables ([[variant.job]]) with a name each")
    for job in added:
        jobs[job["name"]] = job
    changes = table.get("set", {})
    if not isinstance(changes, dict):
        _fail(f"{where}.set", "must be a table of job names ([variant.set.JOB])")
    for name, keys in changes.items():
        if name not in jobs:
            _fail(f"{where}.set.{name}", f"no job named {name!r} (jobs: {', '.join(map(str, jobs))})")
        if not isinstance(keys, dict):
            _fail(f"{where}.set.{name}", "must be a table of the job's keys")
        jobs[name] = _merge(jobs[name], keys)
    control = table.get("control", {})
    if not isinstance(control, dict):
        _fail(f"{where}.control", "must be a table ([variant.control])")
    out = {**data, "job": list(jobs.values())}
    if control:
        out["control"] = _merge(data.get("control", {}), control)
    return out


def parse_plan(data: dict, base: Path, live: bool = True) -> Plan:
    """A plan's tables; its scenario path is relative to folder `base`;
    live: its scenarios are checked for a live run."""
    check_table("", data, _PLAN_KEYS)
    path, scenario = read_job_scenario(data, base, "compare runs of")
    runs = data.get("runs", DEFAULT_RUNS)
    if not isinstance(runs, int) or isinstance(runs, bool) or not 1 <= runs <= MAX_RUNS:
        _fail("runs", f"must be an integer in 1..{MAX_RUNS}, got {runs!r}")
    tables = data.get("variant", [])
    if not isinstance(tables, list) or not tables:
        _fail("variant", "at least one [[variant]] table is required")
    variants = []
    for i, table in enumerate(tables):
        where = f"variant[{i}]"
        check_table(where, table, _VARIANT_KEYS, "a table ([[variant]])")
        anchor_files(table.get("job"), base)
        anchor_files(list(table.get("set", {}).values()) if isinstance(table.get("set"), dict) else None, base)
        name = table.get("name")
        if not isinstance(name, str) or not VARIANT_NAME.match(name):
            _fail(f"{where}.name", f"{name!r} must be 1-32 of [a-z0-9_-], starting with a letter")
        if any(v.name == name for v in variants):
            _fail(f"{where}.name", f"duplicate variant name {name!r}")
        variant = Variant(name, str(table.get("about", "")), apply_variant(scenario, where, table), live)
        try:
            variant.scenario(0)
        except ScenarioError as exc:
            _fail(where, f"its scenario is not valid: {exc}")
        variants.append(variant)
    return Plan(str(data.get("name", path.stem)), path, runs, tuple(variants))


def load_plan(path: str | Path, live: bool = True) -> Plan:
    return parse_plan(read_toml(path), Path(path).parent, live)


def policy_plan(scenario_path: str | Path, policies: list[str], runs: int, live: bool = True) -> Plan:
    """A plan of one scenario under each of `policies` ([control] policy),
    the scenario's other [control] keys kept."""
    path = Path(scenario_path)
    variants = [{"name": p, "about": f"[control] policy = {p!r}", "control": {"policy": p}} for p in policies]
    return parse_plan({"scenario": path.name, "runs": runs, "variant": variants}, path.parent, live)
