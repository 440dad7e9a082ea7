"""`prc-emu record-nvml`: sample NVML for a while and write a progress
trace that `[job.trace]` replays (docs/control.md)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from control.nvml import NvmlSampler, NvmlUnavailable
from scenario.trace import write_trace


def record(out: Path, interval_s: float, duration_s: float, gpus=None, nvml=None, show=True) -> int:
    """Samples every interval_s for duration_s into the trace at out;
    returns the rows written."""
    sampler = NvmlSampler(gpus, nvml)
    steps = max(1, round(duration_s / interval_s))

    def rows():
        start = time.monotonic()
        for k in range(steps):
            time.sleep(max(0.0, start + k * interval_s - time.monotonic()))
            yield from (s.row() for s in sampler.sample(time.monotonic() - start))
            if show:
                print(f"\rrecord-nvml: sample {k + 1}/{steps}", end="", file=sys.stderr, flush=True)
    try:
        return write_trace(out, rows())
    finally:
        sampler.close()
        if show:
            print(file=sys.stderr)


def main(out: str, interval_ms: float, duration_s: float, gpus: str | None, nvml=None) -> int:
    if not 1 <= interval_ms <= 60_000:
        print(f"prc-emu record-nvml: --interval-ms must be 1..60000, got {interval_ms:g}", file=sys.stderr)
        return 2
    if not 0 < duration_s <= 86_400:
        print(f"prc-emu record-nvml: --duration-s must be within (0, 86400], got {duration_s:g}", file=sys.stderr)
        return 2
    try:
        wanted = None if gpus is None else [int(g) for g in gpus.split(",")]
    except ValueError:
        print(f"prc-emu record-nvml: --gpu must be GPU indices like 0,1, got {gpus!r}", file=sys.stderr)
        return 2
    path = Path(out)
    if not path.parent.is_dir():
        print(f"prc-emu record-nvml: {path.parent} is not a folder", file=sys.stderr)
        return 2
    try:
        rows = record(path, interval_ms / 1000, duration_s, wanted, nvml)
    except NvmlUnavailable as exc:
        print(f"prc-emu record-nvml: {exc}", file=sys.stderr)
        return 2
    print(f"record-nvml: {rows} rows -> {path}")
    return 0
