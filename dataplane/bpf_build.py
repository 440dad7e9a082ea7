"""Compile the project's BPF C sources with BCC.

Features are chosen with -D flags, never by editing the C text in Python.
"""
from __future__ import annotations

import re
from pathlib import Path

BPF_DIR = Path(__file__).resolve().parent.parent / "bpf"
INCLUDE_DIR = BPF_DIR / "include"

_MACRO_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")

# XDP attach flags by mode: generic (skb) works at any MTU; native on a
# veth needs the peer's MTU <= 3506 here (4 KiB pages, no frags support).
XDP_FLAGS = {"generic": 2, "native": 4}


class BpfBuildError(RuntimeError):
    """A BPF source could not be found, compiled or verified."""


def cflags_for(defines: dict[str, int | str | bool] | None = None) -> list[str]:
    """The compiler flags for our sources: absolute include path (BCC compiles
    /virtual/main.c, so relative paths resolve against nothing useful) and one
    -D per feature. A False value leaves the macro undefined."""
    flags = [f"-I{INCLUDE_DIR}", f"-I{BPF_DIR}"]
    for name, value in sorted((defines or {}).items()):
        if not _MACRO_NAME.match(name):
            raise BpfBuildError(f"bad macro name {name!r}")
        if value is False:
            continue
        flags.append(f"-D{name}" if value is True else f"-D{name}={value}")
    return flags


def source_path(name: str) -> Path:
    """bpf/<name>.c, or an error naming what exists."""
    path = BPF_DIR / f"{name}.c"
    if not path.is_file():
        known = sorted(p.stem for p in BPF_DIR.glob("*.c"))
        raise BpfBuildError(f"no BPF source {name!r} (have: {', '.join(known)})")
    return path


def compile_bpf(name: str, defines: dict[str, int | str | bool] | None = None):
    """Compile bpf/<name>.c and return the bcc.BPF object (maps created,
    programs not yet loaded; load them with load_func)."""
    from bcc import BPF  # imported late: only Debian's python sees bcc

    try:
        return BPF(src_file=str(source_path(name)), cflags=cflags_for(defines))
    except Exception as exc:  # bcc raises bare Exception on compile errors
        raise BpfBuildError(f"compiling bpf/{name}.c failed: {exc}") from exc
