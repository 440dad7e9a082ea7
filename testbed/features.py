"""Kernel features that change how the testbed emulates things, probed in a
throwaway namespace (never on the machine's own interfaces)."""
from __future__ import annotations

import functools
import subprocess

from testbed.isolated import IsolatedError, run_isolated


def _try_qdisc(kind: str) -> str:
    from dataplane.xdp_probe import TX_LINK, make_veth_pair

    make_veth_pair()
    proc = subprocess.run(["tc", "qdisc", "add", "dev", TX_LINK, "root", kind],
                          capture_output=True, text=True, timeout=10)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[0]


@functools.cache
def qdisc_problem(kind: str) -> str:
    """'' when a qdisc of this kind can be added here, else why not."""
    try:
        return run_isolated(_try_qdisc, kind, timeout_s=30)
    except IsolatedError as exc:
        return str(exc)
