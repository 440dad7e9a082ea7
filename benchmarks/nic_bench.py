"""The emulated RNIC's and switch's BPF programs, ns per packet through
BPF_PROG_TEST_RUN (kernel-timed, many repeats) against an empty program of
the same type on the same frame; target <= 100 ns over empty. Counters and
CC state persist across repeats, so each row is a steady state."""
from __future__ import annotations

import time

from dataplane import roce
from dataplane.cc import core_params, hook
from dataplane.hooks import HookMap
from dataplane.nic import MAX_PROCS, Nic, sender_sport
from dataplane.prog_test_run import prog_test_run
from dataplane.switch import SwitchPorts
from scenario.dcqcn import DcqcnConfig
from scenario.ecn import RedConfig

REPEAT = 200_000
SKB_CTX = bytes(192)
PORT = 1                    # lo: PROG_TEST_RUN looks the ifindex up
PORT_CTX = bytes(40) + PORT.to_bytes(4, "little") + bytes(148)     # __sk_buff.ifindex at 40


def best_ns(fd: int, frame: bytes, ctx: bytes | None = None) -> int:
    return min(prog_test_run(fd, frame, REPEAT, ctx=ctx).duration_ns for _ in range(5))


def hook_writes(nic: Nic, n: int = 100_000) -> None:
    """A controller's hook update from Python: a store through mmap
    (dataplane.hooks) against a bpf() syscall per update."""
    hooks = HookMap.of_table(nic.bpf["proc_hook"])
    value = hook(2.0, 0.1, 0.9)
    rows = []
    for name, write in (("mmap (HookMap.write)", hooks.write), ("syscall (Nic.set_hook)", nic.set_hook)):
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter_ns()
            for i in range(n):
                write(i % MAX_PROCS, value)
            best = min(best, (time.perf_counter_ns() - start) / n)
        rows.append((name, best))
    print(f"PRC hook updates from Python (best of 5 x {n // 1000}k, ns per update):")
    for name, ns in rows:
        print(f"  {name:<42}{ns:>6.0f}")
    print(f"  mmap is {rows[1][1] / rows[0][1]:.1f}x faster")
    hooks.close()


def main() -> None:
    from bcc import BPF

    from dataplane.bpf_build import compile_bpf

    nic = Nic()
    nic.configure(1e9, 20_000, 50_000, core_params(DcqcnConfig()))
    nic.add_qp(5, 9)
    nic.add_qp(9, 5)
    empty_xdp = compile_bpf("xdp_pass")
    empty_tc = compile_bpf("tc_pass")
    xdp_fd = empty_xdp.load_func("xdp_pass", BPF.XDP).fd
    tc_fd = empty_tc.load_func("tc_pass", BPF.SCHED_CLS).fd
    addr = roce.FlowAddr(sport=sender_sport(5))
    data = roce.data_packet(roce.WRITE_MIDDLE, 9, 7, bytes(2048), addr=addr)
    cnp = roce.cnp_packet(5, addr=roce.FlowAddr(sport=sender_sport(9)))
    # as nic_tx sends it: the UDP checksum field carries a wire time (bpf/include/vtime.h)
    stamp = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 & 0xFFFF or 1).to_bytes(2, "big")
    stamped = data[:40] + stamp + data[42:]
    switch = SwitchPorts()
    # 10 Tbit/s: the model drains between repeats, so every one takes the
    # forwarding path (drain, enqueue, RED, restamp), not the drop path
    switch.configure_port(PORT, 1e13, RedConfig(), limit_bytes=10**6, faces_host=False)
    rows = [
        ("nic_tx: data packet (on_tx, pace, ECT)", best_ns(nic.tx_fn.fd, data, SKB_CTX), best_ns(tc_fd, data, SKB_CTX)),
        ("nic_rx: data packet (account, drop)", best_ns(nic.rx_fn.fd, data), best_ns(xdp_fd, data)),
        ("nic_rx: CNP (reaction point)", best_ns(nic.rx_fn.fd, cnp), best_ns(xdp_fd, cnp)),
        ("switch_port: data (model, RED, wire time)", best_ns(switch.fn.fd, stamped, PORT_CTX),
         best_ns(tc_fd, stamped, PORT_CTX)),
    ]
    print("RNIC and switch programs (PROG_TEST_RUN, best of 5 x 200k repeats, ns per packet):")
    print(f"  {'program and path':<42}{'ns':>6}{'empty':>7}{'over empty':>12}")
    for name, ns, empty in rows:
        print(f"  {name:<42}{ns:>6}{empty:>7}{ns - empty:>12}")
    hook_writes(nic)
    nic.close()
    switch.close()
    empty_xdp.cleanup()
    empty_tc.cleanup()


if __name__ == "__main__":
    main()
