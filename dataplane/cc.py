"""The congestion-control core (bpf/cc/, entry cc.h) from Python: ctypes mirrors
of its structs, parameters in firmware units, and its two builds -- the
host shared library (tests, simulator) and the BPF test program (run with
BPF_PROG_TEST_RUN)."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from dataplane.bpf_build import BPF_DIR
from dataplane.host_lib import build_shared_library
from scenario.dcqcn import DcqcnConfig

RATE_ONE = 1 << 20        # line rate in the core's fixed point
ALPHA_ONE = 1 << 20
WEIGHT_ONE = 1024
EV_ADVANCE, EV_CNP, EV_TX = 0, 1, 2
EVENT_KINDS = {"advance": EV_ADVANCE, "cnp": EV_CNP, "tx": EV_TX}
CC_DIR = BPF_DIR / "cc"


class Params(ctypes.Structure):
    """struct dcqcn_params."""

    _fields_ = [(name, ctypes.c_uint32) for name in (
        "rpg_time_reset_ns", "rpg_byte_reset", "rpg_threshold", "rpg_ai_rate", "rpg_hai_rate",
        "rpg_gd", "rpg_min_dec_fac", "rpg_min_rate", "dce_tcp_g", "dce_tcp_rtt_ns",
        "rate_reduce_monitor_period_ns", "initial_alpha_value", "w_min", "w_max")]


class Hook(ctypes.Structure):
    """struct prc_hook: what the PRC control plane writes per process."""

    _fields_ = [("weight", ctypes.c_uint32), ("rate_floor", ctypes.c_uint32),
                ("rate_cap", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class CcCommon(ctypes.Structure):
    """struct cc_common: what every algorithm keeps per QP."""

    _fields_ = [("rc", ctypes.c_uint32), ("rt", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class DcqcnVars(ctypes.Structure):
    """struct dcqcn_vars: DCQCN's sub-record."""

    _fields_ = [("alpha", ctypes.c_uint32), ("byte_acc", ctypes.c_uint32),
                ("alpha_next_lo", ctypes.c_uint32), ("alpha_next_hi", ctypes.c_uint32),
                ("inc_next_lo", ctypes.c_uint32), ("inc_next_hi", ctypes.c_uint32),
                ("last_cut_lo", ctypes.c_uint32), ("last_cut_hi", ctypes.c_uint32),
                ("t_count", ctypes.c_uint16), ("bc_count", ctypes.c_uint16)]


class AlgoVars(ctypes.Union):
    _anonymous_ = ("dcqcn",)
    _fields_ = [("dcqcn", DcqcnVars), ("words", ctypes.c_uint32 * 9)]


class State(ctypes.Structure):
    """struct cc_qp_state: 48 bytes, a DOCA PCC per-flow context. Fields
    of both parts read flat (state.rc, state.alpha)."""

    _anonymous_ = ("common", "algo")
    _fields_ = [("common", CcCommon), ("algo", AlgoVars)]

    def key(self) -> tuple:
        """Every field, for bit-exact comparison."""
        return tuple(getattr(self, name) for name, *_ in CcCommon._fields_ + DcqcnVars._fields_)


class Event(ctypes.Structure):
    """struct cc_event."""

    _fields_ = [("kind", ctypes.c_uint32), ("bytes", ctypes.c_uint32),
                ("now_ns", ctypes.c_uint64), ("hook", Hook)]


def q20_fraction(value):
    """A Q20 rate or alpha as a fraction (1.0: line rate, alpha 1); a number
    or a numpy array. The one place the dataplane's fixed point is read."""
    return value / RATE_ONE


def rate_q20(config: DcqcnConfig, mbps: float) -> int:
    """A rate as the core's fixed-point fraction of the config's line rate."""
    return round(mbps * 1e6 / (config.line_rate_gbps * 1e9) * RATE_ONE)


def core_params(config: DcqcnConfig, dilation: float = 1.0) -> Params:
    """The core's parameter struct: rates as fractions of line rate, times in
    ns scaled by the dilation factor."""
    config.validate()
    ns = lambda us: max(1, round(us * 1000 * dilation))
    q20 = lambda mbps: rate_q20(config, mbps)
    return Params(
        rpg_time_reset_ns=ns(config.rpg_time_reset_us), rpg_byte_reset=config.rpg_byte_reset,
        rpg_threshold=config.rpg_threshold, rpg_ai_rate=q20(config.rpg_ai_rate_mbps),
        rpg_hai_rate=q20(config.rpg_hai_rate_mbps), rpg_gd=config.rpg_gd,
        rpg_min_dec_fac=config.rpg_min_dec_fac, rpg_min_rate=q20(config.rpg_min_rate_mbps),
        dce_tcp_g=config.dce_tcp_g, dce_tcp_rtt_ns=ns(config.dce_tcp_rtt_us),
        rate_reduce_monitor_period_ns=ns(config.rate_reduce_monitor_period_us),
        initial_alpha_value=config.initial_alpha_value,
        w_min=round(config.w_min * WEIGHT_ONE), w_max=round(config.w_max * WEIGHT_ONE))


def hook(weight: float = 1.0, floor_frac: float = 0.0, cap_frac: float = 0.0) -> Hook:
    """A hook from a weight and floor/cap as fractions of line rate (0: none)."""
    return Hook(weight=round(weight * WEIGHT_ONE), rate_floor=round(floor_frac * RATE_ONE),
                rate_cap=round(cap_frac * RATE_ONE))


def event(kind: int, now_ns: int, nbytes: int = 0, hk: Hook | None = None) -> Event:
    return Event(kind=kind, bytes=nbytes, now_ns=now_ns, hook=hk if hk is not None else Hook())


class HostCC:
    """The core compiled with the system C compiler into a shared library
    (cached under build/ by a hash of its sources)."""

    def __init__(self):
        self.lib = ctypes.CDLL(str(build_host_library()))
        self.lib.cc_apply_events.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(State),
                                             ctypes.POINTER(Event), ctypes.c_size_t,
                                             ctypes.POINTER(State)]
        self.lib.cc_apply_events.restype = None
        self.lib.cc_apply_each.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(State),
                                           ctypes.POINTER(Event), ctypes.c_size_t]
        self.lib.cc_apply_each.restype = None
        self.lib.cc_apply_indexed.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cc_apply_indexed.restype = None
        for name in ("cc_state_size", "cc_params_size", "cc_event_size"):
            getattr(self.lib, name).restype = ctypes.c_size_t

    def run(self, params: Params, events: list[Event], state: State | None = None) -> list[State]:
        """Apply the events in order to `state` (fresh if None); the state
        after each event."""
        state = state if state is not None else State()
        n = len(events)
        ev_array = (Event * n)(*events)
        trace = (State * n)()
        self.lib.cc_apply_events(ctypes.byref(params), ctypes.byref(state), ev_array, n, trace)
        return list(trace)

    def apply_indexed(self, params: Params, states: np.ndarray, events: np.ndarray, qp) -> None:
        """Apply events[i] to states[qp[i]] in order, in place. states and
        events: C-contiguous numpy arrays of STATE_DTYPE and EVENT_DTYPE;
        qp: integer indices below len(states)."""
        if states.dtype != STATE_DTYPE or events.dtype != EVENT_DTYPE:
            raise TypeError("states and events must be numpy arrays of STATE_DTYPE and EVENT_DTYPE")
        if not (states.flags.c_contiguous and events.flags.c_contiguous):
            raise ValueError("states and events must be C-contiguous (states are changed in place)")
        qp = np.ascontiguousarray(qp, dtype=np.uint32)
        if len(qp) != len(events):
            raise ValueError(f"{len(events)} events but {len(qp)} QP indices")
        if len(qp) and int(qp.max()) >= len(states):
            raise IndexError(f"QP index {int(qp.max())} beyond the {len(states)} states")
        self.lib.cc_apply_indexed(ctypes.byref(params), states.ctypes.data, events.ctypes.data, qp.ctypes.data,
                                  len(qp))


STATE_DTYPE, EVENT_DTYPE = np.dtype(State), np.dtype(Event)     # numpy views of the C structs


def build_host_library() -> Path:
    return build_shared_library("prccc", [CC_DIR / "host.c"], list(CC_DIR.glob("*.h")))


class BpfCC:
    """The core inside a BPF program (bpf/cc_test.c): each event travels in
    a test frame through BPF_PROG_TEST_RUN; the state lives in a map."""

    def __init__(self, from_template: bool = False):
        from bcc import BPF

        from dataplane.bpf_build import compile_bpf

        self.bpf = compile_bpf("cc_test", {"CC_TEST_FROM_TEMPLATE": from_template})
        self.fd = self.bpf.load_func("cc_test", BPF.XDP).fd
        self._params = self.bpf["cc_params"]
        self._state = self.bpf["cc_state"]

    def set_params(self, params: Params) -> None:
        self._params[self._params.Key(0)] = self._params.Leaf.from_buffer_copy(bytes(params))

    def set_state(self, state: State, slot: int = 0) -> None:
        """Slot 0 is the state events change; slot 1 the template each run
        starts from when built with from_template."""
        self._state[self._state.Key(slot)] = self._state.Leaf.from_buffer_copy(bytes(state))

    def run(self, params: Params, events: list[Event], state: State | None = None) -> list[State]:
        from dataplane.prog_test_run import prog_test_run

        key = self._state.Key(0)
        self.set_params(params)
        self.set_state(state if state is not None else State())
        trace = []
        for ev in events:
            prog_test_run(self.fd, bytes(ev))
            trace.append(State.from_buffer_copy(bytes(self._state[key])))
        return trace

    def close(self) -> None:
        self.bpf.cleanup()
