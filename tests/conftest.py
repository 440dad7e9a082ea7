"""Markers with a one-line skip reason where the machine cannot run a test,
and shared fixtures for BPF programs."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest


def _bcc_problem() -> str | None:
    try:
        import bcc  # noqa: F401
    except ImportError:
        return "bcc not importable (Debian python3-bpfcc; run scripts/bootstrap)"
    if not (Path("/lib/modules") / platform.release() / "build" / "include").is_dir():
        return "no kernel headers for bcc (run scripts/bootstrap)"
    return None


def _root_problem() -> str | None:
    return None if os.geteuid() == 0 else "needs root (CAP_BPF, CAP_NET_ADMIN)"


def _netns_problem() -> str | None:
    if _root_problem():
        return _root_problem()
    from testbed.isolated import IsolatedError, run_isolated
    try:
        run_isolated(int, timeout_s=10)
    except (IsolatedError, OSError) as exc:
        return f"cannot create a network namespace ({exc})"
    return None


_PROBLEMS = {"root": _root_problem, "bcc": _bcc_problem, "netns": _netns_problem}


def pytest_collection_modifyitems(config, items):
    cache: dict[str, str | None] = {}
    for item in items:
        for marker, probe in _PROBLEMS.items():
            if item.get_closest_marker(marker) is None:
                continue
            if marker not in cache:
                cache[marker] = probe()
            if cache[marker]:
                item.add_marker(pytest.mark.skip(reason=cache[marker]))
                break


@pytest.fixture(scope="module")
def roce_count():
    """bpf/roce_count compiled and loaded: (bcc.BPF, program fd)."""
    from bcc import BPF

    from dataplane.bpf_build import compile_bpf

    bpf = compile_bpf("roce_count")
    fn = bpf.load_func("roce_count", BPF.XDP)
    yield bpf, fn.fd
    bpf.cleanup()


def _root_netns_view() -> dict[str, str]:
    run = lambda *a: subprocess.run(["ip", *a], capture_output=True, text=True).stdout
    return {"links": run("-br", "link"), "addresses": run("-br", "addr"),
            "routes": run("route", "show", "table", "all"), "netns": run("netns", "list")}


@pytest.fixture(scope="session", autouse=True)
def root_netns_untouched():
    """The machine's own namespace: identical before and after the run."""
    before = _root_netns_view()
    yield
    after = _root_netns_view()
    for what in before:
        assert after[what] == before[what], f"the test run changed the root namespace's {what}"
