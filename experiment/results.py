"""A run's results folder: resolved config, versions, raw time series,
summary and plots. Written into a hidden temporary folder and renamed into
place at the end, so a failed run leaves no half-written result."""
from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def versions() -> dict[str, str]:
    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    try:
        import bcc
        bcc_version = getattr(bcc, "__version__", "?")
    except ImportError:
        bcc_version = "absent"
    dirty = bool(run("git", "status", "--porcelain", "--untracked-files=no"))
    return {"git": run("git", "rev-parse", "HEAD") + ("-dirty" if dirty else ""),
            "kernel": platform.release(), "bcc": bcc_version, "python": platform.python_version()}


def _jsonable(value):
    if dataclasses.is_dataclass(value):      # fields derived from files (a trace's timelines) are left out
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get("derived")}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


class ResultsWriter:
    """with ResultsWriter(root, run_id) as out: write files into out.dir;
    on success the folder appears as out.final, on failure not at all.
    out.final is root/run_id, or root/run_id-2, -3, ... where that name is
    taken: a result never overwrites, and a name that repeats (a testbed's
    random run id, two comparisons started in one second) never fails a
    run."""

    def __init__(self, root: Path, run_id: str):
        self.root, self.run_id = Path(root), run_id
        self.final = self.dir = None

    def __enter__(self) -> "ResultsWriter":
        self.root.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            name = self.run_id if n == 1 else f"{self.run_id}-{n}"
            final, partial = self.root / name, self.root / f".{name}.partial"
            if final.exists():
                continue
            try:
                partial.mkdir()             # claims the name: a second writer gets FileExistsError here
            except FileExistsError:
                continue
            self.final, self.dir = final, partial
            return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            os.replace(self.dir, self.final)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def json(self, name: str, data) -> None:
        (self.dir / name).write_text(json.dumps(_jsonable(data), indent=1, sort_keys=True) + "\n")

    def csv(self, name: str, header: list[str], rows) -> None:
        with open(self.dir / name, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(rows)


def jain(values: list[float]) -> float:
    v = np.asarray(values, dtype=float)
    return float(v.sum() ** 2 / (len(v) * (v ** 2).sum())) if len(v) and (v ** 2).sum() > 0 else 0.0
