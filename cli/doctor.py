"""`prc-emu doctor`: can this machine run the emulator? One line per check,
with the fix when something is missing. Live checks run in a throwaway
network namespace (testbed.isolated), never in the machine's own."""
from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from testbed.features import qdisc_problem
from testbed.isolated import IsolatedError, run_isolated

BOOTSTRAP_FIX = "run scripts/bootstrap as root"
MIN_KERNEL = (5, 18)   # bpf_xdp_get_buff_len, used to count multi-buffer frames


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    essential: bool = True

    def line(self) -> str:
        status = "ok" if self.ok else ("MISSING" if self.essential else "absent")
        text = f"{self.name:<16} {status:<8} {self.detail}"
        return text + (f"  (fix: {self.fix})" if not self.ok and self.fix else "")


def check_root() -> CheckResult:
    ok = os.geteuid() == 0
    return CheckResult("root", ok, "running as root" if ok else f"uid {os.geteuid()}",
                       "run as root (BPF, tc and namespaces need CAP_BPF/CAP_NET_ADMIN)")


def check_kernel() -> CheckResult:
    release = platform.release()
    nums = tuple(int(x) for x in release.split("-")[0].split(".")[:2] if x.isdigit())
    ok = nums >= MIN_KERNEL
    return CheckResult("kernel", ok, release,
                       f"a kernel >= {MIN_KERNEL[0]}.{MIN_KERNEL[1]} is needed")


def check_bcc() -> CheckResult:
    try:
        import bcc
    except ImportError as exc:
        return CheckResult("bcc", False, f"cannot import bcc ({exc})",
                           BOOTSTRAP_FIX + " (Debian python3-bpfcc; the PyPI 'bcc' is unrelated)")
    return CheckResult("bcc", True, f"{getattr(bcc, '__version__', '?')} from {Path(bcc.__file__).parent}")


def check_headers() -> CheckResult:
    build = Path("/lib/modules") / platform.release() / "build"
    if (build / "include").is_dir():
        return CheckResult("kernel headers", True, f"{build} -> {build.resolve().name}")
    return CheckResult("kernel headers", False, f"{build} missing", BOOTSTRAP_FIX)


def check_prog_test_run() -> CheckResult:
    from dataplane import roce
    try:
        from bcc import BPF

        from dataplane.bpf_build import compile_bpf
        from dataplane.prog_test_run import prog_test_run
        from dataplane.shared import read_qp_counters

        bpf = compile_bpf("roce_count")
        fn = bpf.load_func("roce_count", BPF.XDP)
        result = prog_test_run(fn.fd, roce.data_packet(roce.SEND_ONLY, 42, 0, b"doctor"))
        counted = read_qp_counters(bpf["qp_counters"]).get(42, (0, 0))[0]
    except Exception as exc:
        return CheckResult("PROG_TEST_RUN", False, str(exc).splitlines()[0], BOOTSTRAP_FIX)
    ok = counted == 1
    return CheckResult("PROG_TEST_RUN", ok,
                       f"roce_count compiled, verified, ran in {result.duration_ns} ns"
                       if ok else f"program ran but counted {counted} packets, not 1")


def check_xdp_on_veth(mode: str) -> CheckResult:
    from dataplane import roce
    from dataplane.xdp_probe import count_on_veth

    frames = [roce.data_packet(roce.SEND_ONLY, 7, psn, b"x" * 64) for psn in range(20)]
    name = f"XDP veth {mode}"
    try:
        got = run_isolated(count_on_veth, frames, mode, timeout_s=60)
    except IsolatedError as exc:
        return CheckResult(name, False, str(exc), BOOTSTRAP_FIX, essential=(mode == "generic"))
    packets = got.counters.get(7, (0, 0))[0]
    ok = packets == len(frames)
    return CheckResult(name, ok, f"{packets}/{len(frames)} frames counted on a veth",
                       "check the kernel's veth XDP support", essential=(mode == "generic"))


def check_qdisc(kind: str, present_means: str, absent_means: str) -> CheckResult:
    err = qdisc_problem(kind)
    return CheckResult(f"sch_{kind}", not err, present_means if not err else f"{absent_means} ({err})",
                       essential=False)


def check_tshark() -> CheckResult:
    path = shutil.which("tshark")
    return CheckResult("tshark", path is not None,
                       path or "not installed: capture checks are skipped",
                       BOOTSTRAP_FIX, essential=False)


def run_checks() -> list[CheckResult]:
    results = [check_root(), check_kernel(), check_bcc(), check_headers()]
    if all(r.ok for r in results):  # the live checks need all of these
        results += [
            check_prog_test_run(),
            check_xdp_on_veth("native"),
            check_xdp_on_veth("generic"),
            check_qdisc("fq", "kernel EDT pacer available",
                        "the cooperative pacer will be used"),
            check_qdisc("netem", "delay can be emulated in the kernel",
                        "delay will be emulated at the endpoints"),
        ]
    results.append(check_tshark())
    return results


def main() -> int:
    results = run_checks()
    for r in results:
        print(r.line())
    failed = [r.name for r in results if r.essential and not r.ok]
    print("doctor: all essentials work" if not failed else f"doctor: missing {', '.join(failed)}")
    return 0 if not failed else 1
