"""The DOCA PCC adapter (bpf/doca/prc_algo.c) built for the host with its
harness (bpf/doca/doca_host.c): the device's callbacks called as the
firmware calls them, and replay of the RNIC's recorded CC events through
them, with 32-bit timestamps that wrap and TX counts in 32-byte units.

The library holds the device's tables in globals, as the DPA does: one
device per process, started afresh by DocaDevice()."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from dataplane.bpf_build import BPF_DIR
from dataplane.cc import EV_CNP, EV_TX, Hook, Params, State
from dataplane.doca_mailbox import NO_PROC, PROCS, MailboxHooks
from dataplane.host_lib import build_shared_library

DOCA_DIR = BPF_DIR / "doca"
EVNT_CNP, EVNT_TX, EVNT_ACK, EVNT_NACK, EVNT_RTT = 2, 3, 4, 5, 6
TX_UNIT_BYTES = 32
TX_UNITS_MAX = 0xFFFF           # the device's 16-bit TX byte counter, per event
WRAP = 1 << 32
COUNTERS = ("cnp", "tx", "other", "unbound")


class ReplayEvent(ctypes.Structure):
    """struct host_replay_event (doca_host.c)."""

    _fields_ = [(name, ctypes.c_uint32) for name in (
        "flow", "ev_type", "port_num", "timestamp", "flowtag", "qpn", "sent_32bytes", "algo_slot")]


class QpTable(ctypes.Structure):
    _fields_ = [("bound", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("slot", (ctypes.c_uint32 * 2) * 1024)]


class MailboxState(ctypes.Structure):
    """struct prc_mailbox_state (prc_mailbox.h)."""

    _fields_ = [("last_seq", ctypes.c_uint32), ("taken", ctypes.c_uint32), ("errors", ctypes.c_uint32),
                ("last_error", ctypes.c_uint32), ("hooks", Hook * PROCS), ("qps", QpTable)]


def _library() -> ctypes.CDLL:
    sources = [DOCA_DIR / "prc_algo.c", DOCA_DIR / "doca_host.c"]
    headers = [*DOCA_DIR.glob("*.h"), *(BPF_DIR / "cc").glob("*.h")]
    lib = ctypes.CDLL(str(build_shared_library("prcdoca", sources, headers, defines=("PRC_DOCA_HOST",))))
    u32, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)
    lib.prc_host_init.restype = u32
    lib.prc_host_slot_ready.argtypes = [u32, u32]
    lib.prc_host_replay.argtypes = [ctypes.POINTER(ReplayEvent), ctypes.c_size_t, ctypes.POINTER(State), u32p,
                                    ctypes.POINTER(State)]
    lib.prc_host_replay.restype = None
    lib.prc_host_set_params.argtypes = [u32, u32, u32, u32, u32p]
    lib.prc_host_mailbox.argtypes = [ctypes.c_char_p, u32, ctypes.c_void_p, u32, u32p]
    lib.prc_host_mailbox_state.restype = ctypes.POINTER(MailboxState)
    lib.prc_host_qp_proc.argtypes = [u32]
    lib.prc_host_qp_proc.restype = u32
    lib.prc_host_mailbox_state_size.restype = ctypes.c_size_t
    lib.doca_pcc_dev_get_algo_params.argtypes = [u32, u32]
    lib.doca_pcc_dev_get_algo_params.restype = u32p
    lib.doca_pcc_dev_get_counters.argtypes = [u32, u32]
    lib.doca_pcc_dev_get_counters.restype = u32p
    return lib


class DocaDevice:
    """The adapter on a host-side DPA: init ran, slot 0 on every port."""

    def __init__(self):
        self.lib = _library()
        self.disabled_events = self.lib.prc_host_init()

    def slot_ready(self, port: int = 0, slot: int = 0) -> bool:
        return bool(self.lib.prc_host_slot_ready(port, slot))

    def params(self, port: int = 0, slot: int = 0) -> Params:
        return Params.from_buffer_copy(ctypes.string_at(self.lib.doca_pcc_dev_get_algo_params(port, slot),
                                                        ctypes.sizeof(Params)))

    def set_params(self, values: Params | list[int], base: int = 0, port: int = 0, slot: int = 0) -> int:
        """A parameter write (PPCC): 0 taken, 1 refused (then nothing changed)."""
        words = list(values) if isinstance(values, list) else list(
            (ctypes.c_uint32 * (ctypes.sizeof(Params) // 4)).from_buffer_copy(values))
        return self.lib.prc_host_set_params(port, slot, base, len(words), (ctypes.c_uint32 * len(words))(*words))

    def counters(self, port: int = 0, slot: int = 0) -> dict[str, int]:
        array = self.lib.doca_pcc_dev_get_counters(port, slot)
        return {name: array[i] for i, name in enumerate(COUNTERS)}

    def mailbox(self, message: bytes) -> int:
        """What doca_pcc_dev_user_mailbox_handle answers: the status in its
        response (checked against its return value and counts)."""
        response, size = (ctypes.c_uint32 * 4)(), ctypes.c_uint32()
        rc = self.lib.prc_host_mailbox(message, len(message), response, ctypes.sizeof(response), ctypes.byref(size))
        status = response[0]
        if size.value != ctypes.sizeof(response) or rc != (status != 0):
            raise RuntimeError(f"the mailbox handler returned {rc} with a {size.value}-byte response of status {status}")
        return status

    @property
    def state(self) -> MailboxState:
        return self.lib.prc_host_mailbox_state().contents

    def qp_proc(self, qpn: int) -> int | None:
        """The process the device binds qpn to (None: none)."""
        proc = self.lib.prc_host_qp_proc(qpn)
        return None if proc == NO_PROC else proc

    def hook(self, proc: int) -> Hook:
        return Hook.from_buffer_copy(self.state.hooks[proc])

    def replay(self, events: list[ReplayEvent], contexts) -> tuple[list[int], list[State]]:
        """The events in order through doca_pcc_dev_user_algo: the rate each
        left and its flow's context after it. contexts: a ctypes State array,
        one per flow, updated in place."""
        n = len(events)
        rates, states = (ctypes.c_uint32 * n)(), (State * n)()
        self.lib.prc_host_replay((ReplayEvent * n)(*events), n, contexts, rates, states)
        return list(rates), list(states)


TIME_WORDS = (("alpha_next_lo", "alpha_next_hi"), ("inc_next_lo", "inc_next_hi"), ("last_cut_lo", "last_cut_hi"))


@dataclass
class ReplayReport:
    """A recorded trace replayed through the adapter."""
    flows: int
    events: int
    wraps: int                                    # 32-bit time wraps the flows' events crossed
    hook_messages: int = 0                        # hook changes sent through the mailbox
    rate_mismatches: list = field(default_factory=list)     # (qpn, seq, BPF rate, adapter rate)
    state_mismatches: list = field(default_factory=list)    # (qpn, seq): another word differs

    @property
    def exact(self) -> bool:
        return not self.rate_mismatches and not self.state_mismatches


def moved_times(st: State, delta: int) -> State:
    """A copy of st with its 64-bit times moved by delta (mod 2^64)."""
    out = State.from_buffer_copy(st)
    for lo, hi in TIME_WORDS:
        t = ((getattr(st, hi) << 32 | getattr(st, lo)) + delta) % (1 << 64)
        setattr(out, lo, t & 0xFFFFFFFF)
        setattr(out, hi, t >> 32)
    return out


def _by_qp(records) -> dict[int, list]:
    flows: dict[int, list] = {}
    for r in records:
        flows.setdefault(r.qpn, []).append(r)
    for qpn, rs in flows.items():
        rs.sort(key=lambda r: r.seq)
        if [r.seq for r in rs] != list(range(1, len(rs) + 1)):
            raise ValueError(f"QP {qpn}: the trace misses events (seq must run 1..{len(rs)})")
    return flows


def _doca_event(flow: int, r, stamp: int) -> ReplayEvent:
    if r.kind == EV_CNP:
        return ReplayEvent(flow=flow, ev_type=EVNT_CNP, timestamp=stamp, flowtag=flow)
    if r.kind != EV_TX or r.bytes % TX_UNIT_BYTES or r.bytes // TX_UNIT_BYTES > TX_UNITS_MAX:
        raise ValueError(f"QP {r.qpn} event {r.seq}: not a CNP or a TX of whole 32-byte units "
                         f"below 2 MB (kind {r.kind}, {r.bytes} bytes)")
    return ReplayEvent(flow=flow, ev_type=EVNT_TX, timestamp=stamp, flowtag=flow, qpn=r.qpn,
                       sent_32bytes=r.bytes // TX_UNIT_BYTES)


def replay_trace(device: DocaDevice, records, params: Params, wrap_at_ns: int | None = None) -> ReplayReport:
    """Replay the RNIC's recorded CC events (dataplane.nic.CcTraceRecord)
    through the adapter, as a BlueField-3 would see them, and compare.
    params: the core's parameters of the recorded run, written to the
    device's slot 0 on port 0 as a PPCC write would.

    Each QP is a flow tagged with its index and bound through the mailbox
    to a process of its own; before an event whose recorded hook differs
    from the last one sent, the new hook goes through the mailbox. An
    event's timestamp is the low 32 bits of the RNIC's time plus a shift
    that puts the wrap of the 32-bit clock at wrap_at_ns (default: the
    middle of the trace). The adapter's 64-bit times then differ from the
    RNIC's by one constant per flow; everything else must be equal."""
    flows = _by_qp(records)
    if device.set_params(params):
        raise ValueError("the adapter refuses these parameters (docs/doca-port.md gives its ranges)")
    if len(flows) > PROCS:
        raise ValueError(f"at most {PROCS} QPs per replay (one process each), got {len(flows)}")
    times = sorted(r.now_ns for r in records)
    if not times:
        return ReplayReport(0, 0, 0)
    shift = -(times[len(times) // 2] if wrap_at_ns is None else wrap_at_ns) % WRAP
    mailbox = MailboxHooks(device.mailbox)
    qpns = sorted(flows)
    for start in range(0, len(qpns), 64):
        mailbox.bind({qpn: flow for flow, qpn in enumerate(qpns[start:start + 64], start)})
    contexts = (State * len(qpns))()
    report = ReplayReport(len(qpns), len(records), 0)
    for flow, qpn in enumerate(qpns):
        rs = flows[qpn]
        first = rs[0].now_ns + shift
        delta = first % WRAP - rs[0].now_ns                # the adapter's time minus the RNIC's
        report.wraps += (rs[-1].now_ns + shift) // WRAP - first // WRAP
        sent: Hook | None = None
        start = 0
        while start < len(rs):
            hk = rs[start].hook
            if sent is None or bytes(hk) != bytes(sent):
                mailbox.set_hook(flow, hk)
                sent = Hook.from_buffer_copy(hk)
                report.hook_messages += 1
            stop = start + 1
            while stop < len(rs) and bytes(rs[stop].hook) == bytes(hk):
                stop += 1
            segment = rs[start:stop]
            rates, states = device.replay([_doca_event(flow, r, (r.now_ns + shift) % WRAP) for r in segment],
                                          contexts)
            for r, rate, st in zip(segment, rates, states):
                if rate != r.st.rc:
                    report.rate_mismatches.append((qpn, r.seq, r.st.rc, rate))
                elif st.key() != moved_times(r.st, delta).key():
                    report.state_mismatches.append((qpn, r.seq))
            start = stop
    return report
