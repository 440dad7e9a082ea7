"""Progress traces: how fast each GPU process computed over time, recorded
from NVML (`prc-emu record-nvml`) or written by hand, replayed as the
compute speed of a job's ranks. The format is documented in
docs/control.md ("Progress traces").

A trace is CSV: `#` lines are comments, the first other line names the
columns, every later line is one sample. Required: `t_s` (seconds from
the trace's start, never going backwards down the file) and `process`
(a name). The speed is the `speed` column (a fraction of nominal compute
speed) where it has a value, else `sm_clock_mhz / max_clock_mhz` (NVML's
SM clock against its maximum). record-nvml also writes `gpu`, `pid`,
`sm_util` and `throttle_reasons`, kept for the reader, unused for speed:
a rank's utilisation drops whenever it communicates.

A process runs at a sample's speed from its time until its next sample;
before its first sample and with no samples it runs at speed 1."""
from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path

from scenario.errors import ScenarioError

COLUMNS = ("t_s", "process", "speed", "gpu", "pid", "sm_util", "sm_clock_mhz", "max_clock_mhz",
           "throttle_reasons")
REQUIRED = ("t_s", "process")
MIN_SPEED, MAX_SPEED = 0.01, 100.0


@dataclass(frozen=True)
class Sample:
    t_s: float
    process: str
    speed: float
    line: int


@dataclass(frozen=True)
class Timeline:
    """One process's speed, piecewise constant, on the replay's own clock
    (seconds from the workload's start): speeds[k] holds from starts[k]
    on; speed 1 before starts[0]."""
    starts: tuple[float, ...]
    speeds: tuple[float, ...]

    def speed_at(self, t: float) -> float:
        k = bisect.bisect_right(self.starts, t) - 1
        return self.speeds[k] if k >= 0 else 1.0

    def finish(self, t: float, work: float) -> float:
        """When `work` seconds of nominal compute begun at t are done."""
        k = bisect.bisect_right(self.starts, t) - 1
        while True:
            speed = self.speeds[k] if k >= 0 else 1.0
            end = self.starts[k + 1] if k + 1 < len(self.starts) else math.inf
            if t + work / speed <= end:
                return t + work / speed
            work -= (end - t) * speed
            t, k = end, k + 1


def _fail(path, line: int, reason: str):
    raise ScenarioError(f"{path}:{line}: {reason}")


def _float(path, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        _fail(path, line, f"{column} must be a number, got {text!r}")
    if not math.isfinite(value):
        _fail(path, line, f"{column} must be finite, got {text!r}")
    return value


def _speed(path, line: int, row: dict) -> float:
    if row.get("speed"):
        speed = _float(path, line, "speed", row["speed"])
    elif row.get("sm_clock_mhz") and row.get("max_clock_mhz"):
        top = _float(path, line, "max_clock_mhz", row["max_clock_mhz"])
        if top <= 0:
            _fail(path, line, f"max_clock_mhz must be > 0, got {row['max_clock_mhz']!r}")
        speed = _float(path, line, "sm_clock_mhz", row["sm_clock_mhz"]) / top
    else:
        _fail(path, line, "missing speed (or sm_clock_mhz and max_clock_mhz)")
    if not MIN_SPEED <= speed <= MAX_SPEED:
        _fail(path, line, f"speed must be within {MIN_SPEED:g}..{MAX_SPEED:g}, got {speed:g}")
    return speed


def read_trace(path: str | Path, processes) -> list[Sample]:
    """The samples of the trace at path; ScenarioError naming the file's
    line for a missing field, a time going backwards or a process not in
    `processes`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    if not rows:
        raise ScenarioError(f"{path}: empty trace (no header line)")
    header_line, header = rows[0]
    names = next(csv.reader([header]))
    for column in REQUIRED:
        if column not in names:
            _fail(path, header_line, f"the header lacks column {column!r} (has {', '.join(names)})")
    unknown = [c for c in names if c not in COLUMNS]
    if unknown:
        _fail(path, header_line, f"unknown column {unknown[0]!r} (known: {', '.join(COLUMNS)})")
    known = set(processes)
    samples: list[Sample] = []
    for line, fields in zip((n for n, _ in rows[1:]), csv.reader(text for _, text in rows[1:])):
        if len(fields) != len(names):
            _fail(path, line, f"{len(fields)} fields, the header has {len(names)}")
        row = dict(zip(names, (f.strip() for f in fields)))
        for column in REQUIRED:
            if not row[column]:
                _fail(path, line, f"missing {column}")
        t = _float(path, line, "t_s", row["t_s"])
        if samples and t < samples[-1].t_s:
            _fail(path, line, f"time goes backwards ({t:g} s after {samples[-1].t_s:g} s)")
        if row["process"] not in known:
            _fail(path, line, f"unknown process {row['process']!r} (the job maps {', '.join(sorted(known))})")
        samples.append(Sample(t, row["process"], _speed(path, line, row), line))
    return samples


def timelines(samples: list[Sample], start_s: float, time_scale: float) -> dict[str, Timeline]:
    """Each process's timeline on the replay clock: trace time t is
    (t - start_s) x time_scale seconds after the workload's start."""
    out: dict[str, tuple[list, list]] = {}
    for s in samples:
        starts, speeds = out.setdefault(s.process, ([], []))
        t = (s.t_s - start_s) * time_scale
        if starts and starts[-1] == t:
            speeds[-1] = s.speed            # two samples at one time: the later holds
        else:
            starts.append(t)
            speeds.append(s.speed)
    return {p: Timeline(tuple(a), tuple(b)) for p, (a, b) in out.items()}


def write_trace(path: str | Path, rows) -> int:
    """Write dict rows (keys among COLUMNS) as a trace, whole or not at
    all: into a hidden file renamed into place. Returns the rows written."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    count = 0
    try:
        with open(partial, "w", newline="") as f:
            f.write("# prc-emu progress trace (docs/control.md)\n")
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="raise")
            writer.writeheader()
            for row in rows:
                writer.writerow(row)
                count += 1
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count
