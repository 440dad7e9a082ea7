"""One source for every layout C shares with Python.

The C headers declare the structs and constants; dataplane/ mirrors them in
ctypes (and one numpy dtype). This module compiles a small C program with
the same headers, which prints each mirrored field's offset and size and
each mirrored constant, and lists every place a mirror differs: a field
renamed, moved, resized or missing, a struct of another size, a constant of
another value. Word offsets the hot loops use are derived from the mirrors,
so they follow."""
from __future__ import annotations

import ctypes
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dataplane.bpf_build import BPF_DIR, INCLUDE_DIR

# linux/bpf.h gives the bpf_spin_lock the map structs embed (4 bytes,
# mirrored as a u32); the project's headers follow in this order.
PROJECT_HEADERS = ("cc/cc_event.h", "nic_defs.h", "cc_trace.h", "switch_defs.h", "roce_defs.h", "vtime.h",
                   "engine/tx_engine.h")


@dataclass(frozen=True)
class Mirror:
    c_struct: str
    python: type | np.dtype       # a ctypes.Structure subclass or a numpy structured dtype

    def fields(self) -> list[tuple[str, int, int]]:
        """(name, offset, size) of every field, as Python lays it out."""
        if isinstance(self.python, np.dtype):
            return [(name, self.python.fields[name][1], self.python.fields[name][0].itemsize)
                    for name in self.python.names]
        return ctypes_fields(self.python)

    def size(self) -> int:
        return self.python.itemsize if isinstance(self.python, np.dtype) else ctypes.sizeof(self.python)


def project_mirrors() -> tuple[list[Mirror], dict[str, int]]:
    """Every mirrored struct, and every mirrored constant by its C name with
    the value Python uses."""
    from dataplane import cc, fidelity, nic, roce, shared, switch, tx_native

    mirrors = [Mirror(c, py) for c, py in (
        ("dcqcn_params", cc.Params), ("prc_hook", cc.Hook), ("cc_qp_state", cc.State),
        ("cc_common", cc.CcCommon), ("dcqcn_vars", cc.DcqcnVars),
        ("cc_event", cc.Event), ("nic_config", nic.NicConfig), ("qp_ctx", nic.QpCtx),
        ("qp_cc", nic.QpCc), ("cc_trace_record", nic.CcTraceRecord), ("qp_tx", nic.QpTx), ("qp_rx", nic.QpRx), ("nic_stamp", nic.NicStamp),
        ("nic_doorbell", nic.NicDoorbell), ("port_cfg", switch.PortCfg),
        ("port_stats", switch.PortStats), ("qp_counters", shared.QpCounters),
        ("tx_frame", tx_native.TxFrame), ("tx_credit", tx_native.TxCredit), ("tx_port", tx_native.TxPort),
        ("tx_qp", tx_native.TxQp),
        ("tx_sched_entry", tx_native.TxSchedEntry), ("tx_sched", tx_native.TxSched),
        ("tx_log_entry", fidelity.PACKET_LOG))]
    constants = {
        "CC_RATE_ONE": cc.RATE_ONE, "CC_ALPHA_ONE": cc.ALPHA_ONE, "CC_WEIGHT_ONE": cc.WEIGHT_ONE,
        "CC_EV_ADVANCE": cc.EV_ADVANCE, "CC_EV_CNP": cc.EV_CNP, "CC_EV_TX": cc.EV_TX,
        "NIC_MAX_QPS": nic.MAX_QPS, "NIC_MAX_PROCS": nic.MAX_PROCS, "NIC_SPORT_BASE": nic.SPORT_BASE,
        "NIC_SPORT_QPN_MASK": nic.SPORT_QPN_MASK, "NIC_F_KERNEL_PACER": nic.F_KERNEL_PACER,
        "NIC_F_PASS_DATA": nic.F_PASS_DATA, "QP_F_VALID": nic.QP_F_VALID, "NIC_STAMP_RING": nic.STAMP_RING,
        "SWITCH_MAX_IFINDEX": switch.MAX_IFINDEX, "PORT_F_ENABLED": switch.PORT_F_ENABLED,
        "PORT_F_LOSSLESS": switch.PORT_F_LOSSLESS, "PORT_F_FACES_HOST": switch.PORT_F_FACES_HOST,
        "VTIME_HALF_RANGE": switch.VTIME_HALF_RANGE, "ROCE_V2_UDP_PORT": roce.ROCE_V2_UDP_PORT,
        "ROCE_ICRC_BYTES": roce.ICRC_BYTES, "ROCE_QPN_MASK": roce.QPN_MASK, "PSN_BITS": tx_native.PSN_BITS,
    }
    constants.update({name: value for name, value in vars(tx_native).items()
                      if name in tx_native.TX_STATUS_NAMES})
    return mirrors, constants


def dump_source(mirrors: list[Mirror], constants: dict[str, int]) -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <linux/bpf.h>",
             "#define __always_inline inline __attribute__((always_inline))"]
    lines += [f'#include "{h}"' for h in PROJECT_HEADERS]
    lines += ["int main(void)", "{"]
    for m in mirrors:
        lines.append(f'\tprintf("size {m.c_struct} %zu\\n", sizeof(struct {m.c_struct}));')
        for name, _, _ in m.fields():
            lines.append(f'\tprintf("field {m.c_struct} {name} %zu %zu\\n", '
                         f'offsetof(struct {m.c_struct}, {name}), sizeof(((struct {m.c_struct} *)0)->{name}));')
    for name in constants:
        lines.append(f'\tprintf("const {name} %lld\\n", (long long)({name}));')
    lines += ["\treturn 0;", "}"]
    return "\n".join(lines) + "\n"


def ctypes_fields(struct: type) -> list[tuple[str, int, int]]:
    """(name, offset, size) of a ctypes struct's fields: compare a mirror
    with the type BCC built for a map from the compiled BPF program."""
    return [(name, getattr(struct, name).offset, getattr(struct, name).size) for name, *_ in struct._fields_]


class LayoutBuildError(RuntimeError):
    """The dump did not compile: usually a mirrored field C does not have."""


def c_layout(mirrors: list[Mirror], constants: dict[str, int]) -> dict[tuple, int]:
    """{("size", struct): n, ("field", struct, name): (offset, size),
    ("const", name): value} as the C compiler lays them out."""
    with tempfile.TemporaryDirectory(prefix="prc-layout-") as tmp:
        src, exe = Path(tmp) / "layout.c", Path(tmp) / "layout"
        src.write_text(dump_source(mirrors, constants))
        build = subprocess.run(["cc", "-std=gnu11", f"-I{INCLUDE_DIR}", f"-I{BPF_DIR}", "-o", str(exe), str(src)],
                               capture_output=True, text=True)
        if build.returncode != 0:
            errors = [ln for ln in build.stderr.splitlines() if "error" in ln]
            raise LayoutBuildError("; ".join(errors[:3]) or build.stderr.strip())
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "field":
            layout[(kind, rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        else:
            layout[(kind, rest[0])] = int(rest[1])
    return layout


def mismatches(mirrors: list[Mirror] | None = None, constants: dict[str, int] | None = None) -> list[str]:
    """Every difference between the Python mirrors and the compiled C
    (empty: none). Defaults to the project's own mirrors."""
    if mirrors is None or constants is None:
        project = project_mirrors()
        mirrors = project[0] if mirrors is None else mirrors
        constants = project[1] if constants is None else constants
    layout = c_layout(mirrors, constants)
    bad = []
    for m in mirrors:
        if layout[("size", m.c_struct)] != m.size():
            bad.append(f"struct {m.c_struct}: {layout[('size', m.c_struct)]} bytes in C, {m.size()} in Python")
        for name, offset, size in m.fields():
            c_offset, c_size = layout[("field", m.c_struct, name)]
            if (c_offset, c_size) != (offset, size):
                bad.append(f"{m.c_struct}.{name}: offset {c_offset} size {c_size} in C, "
                           f"offset {offset} size {size} in Python")
    for name, value in constants.items():
        if layout[("const", name)] != value:
            bad.append(f"{name}: {layout[('const', name)]} in C, {value} in Python")
    return bad
