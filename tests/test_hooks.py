"""The per-process hook map written through mmap, from this process and
from another one that knows only the map's id, steers nic_rx's reaction
point exactly as the host library says the hook should."""
import subprocess
import sys
from pathlib import Path

import pytest

from dataplane import roce
from dataplane.bpf_objects import object_id
from dataplane.cc import EV_CNP, Event, HostCC, core_params, hook
from dataplane.hooks import HookMap
from dataplane.nic import MAX_PROCS, Nic, sender_sport
from dataplane.prog_test_run import prog_test_run
from scenario.dcqcn import DcqcnConfig

pytestmark = [pytest.mark.bcc, pytest.mark.root]
REPO = Path(__file__).resolve().parent.parent
XDP_DROP = 1
PROC, SENDER, RECEIVER = 3, 5, 9

_WRITER = """
import sys
from dataplane.hooks import HookMap
hooks = HookMap.by_id(int(sys.argv[1]))
hooks.set(int(sys.argv[2]), weight=4.0, floor_frac=0.25)
hooks.close()
"""


@pytest.fixture(scope="module")
def nic():
    n = Nic()
    n.configure(1e9, 20_000, 50_000, core_params(DcqcnConfig()))
    yield n
    n.close()


def _fresh_connection(nic) -> None:
    nic.reset(qps=range(16), procs=range(MAX_PROCS))
    nic.add_qp(SENDER, RECEIVER, proc=PROC)
    nic.add_qp(RECEIVER, SENDER, proc=PROC)


def _cnp(nic) -> int:
    """A CNP to the sender; the time nic_rx saw it (between two clock reads)."""
    cnp = roce.cnp_packet(SENDER, addr=roce.FlowAddr(sport=sender_sport(RECEIVER)))
    assert prog_test_run(nic.rx_fn.fd, cnp).verdict == XDP_DROP
    st = nic.cc_state(SENDER)
    return st.last_cut_hi << 32 | st.last_cut_lo


def test_a_hook_written_by_another_process_through_mmap_steers_the_cut(nic):
    params = core_params(DcqcnConfig())
    _fresh_connection(nic)
    at = _cnp(nic)
    (plain,) = HostCC().run(params, [Event(kind=EV_CNP, now_ns=at)])
    assert nic.cc_state(SENDER).key() == plain.key()

    _fresh_connection(nic)
    writer = subprocess.run([sys.executable, "-c", _WRITER, str(object_id(nic.bpf["proc_hook"].map_fd)),
                             str(PROC)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert writer.returncode == 0, writer.stderr
    table = nic.bpf["proc_hook"]
    seen = table[table.Key(PROC)]                        # the kernel's copy, through a syscall
    assert (seen.weight, seen.rate_floor, seen.rate_cap) == (4096, 1 << 18, 0)
    at = _cnp(nic)
    (weighted,) = HostCC().run(params, [Event(kind=EV_CNP, now_ns=at, hook=hook(4.0, 0.25))])
    assert nic.cc_state(SENDER).key() == weighted.key()
    assert weighted.rc > plain.rc                        # weight 4 tempers the cut


def test_writes_from_this_process_read_back_and_reach_the_kernel(nic):
    _fresh_connection(nic)
    hooks = HookMap.of_table(nic.bpf["proc_hook"])
    hooks.set(PROC, weight=0.5, cap_frac=0.75)
    table = nic.bpf["proc_hook"]
    seen = table[table.Key(PROC)]
    assert (seen.weight, seen.rate_floor, seen.rate_cap) == (512, 0, 3 << 18)
    assert bytes(hooks.read(PROC)) == bytes(seen)
    hooks.close()


def test_a_process_outside_the_map_is_refused(nic):
    hooks = HookMap.of_table(nic.bpf["proc_hook"])
    with pytest.raises(ValueError, match="process must be"):
        hooks.set(MAX_PROCS, weight=2.0)
    hooks.close()
