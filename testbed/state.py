"""One JSON state file per testbed run: what it made, so that `down` and
`clean` remove exactly that. Written atomically (temp file + rename)
before each create, so even a kill -9 leaves a file naming the run prefix."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

DEFAULT_STATE_DIR = "/run/prc-emu"   # tmpfs: gone at reboot, as the namespaces are
STATE_DIR_ENV = "PRC_EMU_STATE_DIR"
RUN_ID = re.compile(r"^p[0-9a-f]{4}$")


def state_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


class StateStore:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def path(self, run_id: str) -> Path:
        if not RUN_ID.match(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.dir / f"{run_id}.json"

    def write(self, record: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.path(record["run_id"])
        tmp = final.with_suffix(".tmp")
        with open(tmp, "w") as out:
            json.dump(record, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)

    def read(self, run_id: str) -> dict:
        return json.loads(self.path(run_id).read_text())

    def run_ids(self) -> list[str]:
        if not self.dir.is_dir():
            return []
        return sorted(p.stem for p in self.dir.glob("p*.json") if RUN_ID.match(p.stem))

    def remove(self, run_id: str) -> None:
        self.path(run_id).unlink(missing_ok=True)
        self.path(run_id).with_suffix(".tmp").unlink(missing_ok=True)
