"""Our C sources built as host shared libraries with the system compiler,
cached under build/ by a hash of their sources (a changed header rebuilds)."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from dataplane.bpf_build import BPF_DIR

BUILD_DIR = BPF_DIR.parent / "build"
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-shared", "-fPIC"]


def build_shared_library(name: str, sources: list[Path], depends: list[Path] = (),
                         defines: tuple[str, ...] = ()) -> Path:
    """build/lib<name>-<hash>.so from the C sources (and the headers they
    include, in depends), with -D for each of defines."""
    inputs = [*sources, *sorted(depends)]
    flags = [f"-D{d}" for d in defines]
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in inputs) + " ".join(flags).encode()).hexdigest()[:12]
    out = BUILD_DIR / f"lib{name}-{digest}.so"
    if not out.exists():
        BUILD_DIR.mkdir(exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")     # concurrent builders (sweep workers) do not collide
        subprocess.run(["cc", *CFLAGS, *flags, "-o", str(tmp), *map(str, sources)], check=True)
        tmp.rename(out)
    return out
