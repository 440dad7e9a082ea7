"""Run a loaded BPF program on a packet with BPF_PROG_TEST_RUN.

Calls libbpf's bpf_prog_test_run_opts through ctypes on a program fd (for
example a BCC-loaded function's .fd), so programs can be unit-tested on
crafted frames without any network namespace.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

# The kernel's test buffer is capped (page size minus headroom and tail room
# for XDP, larger for skb programs): 64 KiB is more than any frame it takes.
MAX_FRAME_BYTES = 65536
MIN_FRAME_BYTES = 14  # the kernel refuses shorter test frames with EINVAL


class _TestRunOpts(ctypes.Structure):
    """libbpf's struct bpf_test_run_opts (libbpf 1.x); sz must hold its size."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


@dataclass(frozen=True)
class ProgRunResult:
    verdict: int          # the program's return value (XDP_PASS, TC_ACT_OK, ...)
    data_out: bytes       # the frame as the program left it
    duration_ns: int      # kernel-measured mean time per repetition
    ctx_out: bytes = b""  # the context as the program left it, when one was given


_libbpf = None


def libbpf():
    """libbpf.so.1 through ctypes, with the signatures this project calls."""
    global _libbpf
    if _libbpf is None:
        name = ctypes.util.find_library("bpf") or "libbpf.so.1"
        lib = ctypes.CDLL(name, use_errno=True)
        lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
        lib.bpf_prog_test_run_opts.restype = ctypes.c_int
        lib.bpf_obj_get_info_by_fd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
        lib.bpf_obj_get_info_by_fd.restype = ctypes.c_int
        lib.bpf_prog_get_fd_by_id.argtypes = [ctypes.c_uint32]
        lib.bpf_prog_get_fd_by_id.restype = ctypes.c_int
        lib.bpf_map_get_fd_by_id.argtypes = [ctypes.c_uint32]
        lib.bpf_map_get_fd_by_id.restype = ctypes.c_int
        _libbpf = lib
    return _libbpf


def prog_test_run(prog_fd: int, frame: bytes, repeat: int = 1, ctx: bytes | None = None) -> ProgRunResult:
    """Run the program once (or `repeat` times, for timing) on `frame`,
    optionally with a context (e.g. a struct __sk_buff for TC programs)."""
    if not MIN_FRAME_BYTES <= len(frame) <= MAX_FRAME_BYTES:
        raise ValueError(
            f"test frame must be {MIN_FRAME_BYTES}..{MAX_FRAME_BYTES} bytes, got {len(frame)}")
    data_in = ctypes.create_string_buffer(bytes(frame), len(frame))
    # Room for programs that grow the frame (XDP_TX rewrites, tail adjust).
    out_cap = len(frame) + 256
    data_out = ctypes.create_string_buffer(out_cap)
    opts = _TestRunOpts(
        sz=ctypes.sizeof(_TestRunOpts),
        data_in=ctypes.cast(data_in, ctypes.c_void_p),
        data_out=ctypes.cast(data_out, ctypes.c_void_p),
        data_size_in=len(frame),
        data_size_out=out_cap,
        repeat=max(1, repeat),
    )
    if ctx is not None:
        ctx_in = ctypes.create_string_buffer(bytes(ctx), len(ctx))
        ctx_out = ctypes.create_string_buffer(len(ctx))
        opts.ctx_in = ctypes.cast(ctx_in, ctypes.c_void_p)
        opts.ctx_size_in = len(ctx)
        opts.ctx_out = ctypes.cast(ctx_out, ctypes.c_void_p)
        opts.ctx_size_out = len(ctx)
    if libbpf().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"BPF_PROG_TEST_RUN failed: {os.strerror(err)}")
    return ProgRunResult(
        verdict=opts.retval,
        data_out=data_out.raw[: opts.data_size_out],
        duration_ns=opts.duration,
        ctx_out=ctx_out.raw[: opts.ctx_size_out] if ctx is not None else b"",
    )
