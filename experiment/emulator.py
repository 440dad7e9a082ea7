"""The emulated RNICs and switches on a running testbed: loads bpf/nic.c and
bpf/switch_port.c once, attaches them in every namespace, fills their maps
from the scenario, opens one packet socket per host NIC and drives a single
TX engine for all hosts."""
from __future__ import annotations

import os

from dataplane import roce
from dataplane.bpf_build import XDP_FLAGS
from dataplane.bpf_mmap import MmapArray
from dataplane.cc import Hook, core_params
from dataplane.hooks import HookMap
from dataplane.nic import (F_KERNEL_PACER, MAX_QPS, QP_RX_WORDS, RX_BYTES_WORD, Nic, NicDoorbell, QpRx, QpTx,
                           sender_sport)
from dataplane.switch import PAUSE_UNTIL_WORD, PORT_STATS_WORDS, PortStats, SwitchPorts, vtime_shift_for
from dataplane.tx_engine import TxEngine
from dataplane.tx_qp import NicPort, PortCredit
from scenario.live import ROCE_HEADROOM, LiveCC
from testbed.builder import REAL_QUEUE_BUFFERS
from testbed.isolated import run_in_netns
from testbed.netns_socket import open_packet_socket
from testbed.node_setup import steer_receive
from testbed.topology import live_delay_ns, live_rate_bps

CLSACT_EGRESS = "ffff:fff3"


# Kernel pacer: packets go to sch_fq this long before their departure
# time, which covers the engine's lateness (p99 5-26 us measured here)
# and fq holds them until then.
KERNEL_PACER_LEAD_NS = 200_000
MIN_RETRANSMIT_TIMEOUT_NS = 1_000_000


def _attach_tc_egress(ifname: str, fd: int, name: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        ipr.tc("add", "clsact", idx)
        ipr.tc("add-filter", "bpf", idx, ":1", fd=fd, name=name, parent=CLSACT_EGRESS,
               classid=1, direct_action=True)


def _attach_host(ifname: str, tx_fd: int, rx_fd: int, xdp_flags: int) -> None:
    from bcc import BPF

    _attach_tc_egress(ifname, tx_fd, "nic_tx")
    BPF.attach_xdp(ifname, BPF.Function(None, b"nic_rx", rx_fd), xdp_flags)


def _attach_switch(ifnames: list[str], fd: int) -> None:
    for ifname in ifnames:
        _attach_tc_egress(ifname, fd, "switch_port")


CC_TRACE_RECORDS = 1 << 18          # a CC trace ring of 24 MiB: 1.8 s of a 1 Gb/s link's events between drains


class Emulator:
    """engine_cpu: the CPU the TX engine busy-waits on. Receive processing
    of every testbed interface is steered (RPS) to the other CPUs: veth
    delivery otherwise runs in the sender's context, on the engine's CPU,
    and made the engine late (measured with two flows at 1 Gbit/s: p99
    lateness 64-100 us and 5-20% of 100-packet windows over 5% under the
    BPF rate without it; 18 us and none with it)."""

    def __init__(self, testbed, live: LiveCC = LiveCC(), engine_cpu: int | None = 0, cc_trace_records: int = 0):
        self.testbed = testbed
        self.plan = testbed.plan
        sc = self.plan.scenario
        self.live = live
        if live.roce_mtu + ROCE_HEADROOM > sc.mtu_bytes:   # scenarios check this; direct callers too
            raise ValueError(f"RoCE MTU {live.roce_mtu} does not fit the links' MTU {sc.mtu_bytes}")
        self.nic = self.switch = None
        self.sockets, self._views = {}, []
        try:
            self._bring_up(testbed, live, engine_cpu, cc_trace_records)
        except BaseException:
            self.close()          # an attach that failed halfway leaves no fds or mappings behind
            raise

    def _bring_up(self, testbed, live: LiveCC, engine_cpu: int | None, cc_trace_records: int) -> None:
        sc = self.plan.scenario
        self.nic = Nic(cc_trace_records=cc_trace_records)
        self.switch = SwitchPorts()
        self.pacer = testbed.record.get("pacer", "cooperative")
        # the longest a hop holds a packet: a full buffer at the slowest port, then a link
        slowest = min(p.rate_bps for node in self.plan.nodes for p in self.plan.ports(node))
        shift = vtime_shift_for(int(sc.buffer_bytes * 8e9 / slowest) + live_delay_ns(sc))
        self.nic.configure(live_rate_bps(sc), int(live.pacing_slack_us * 1000),
                           int(live.min_time_between_cnps_us * 1000 * sc.dilation),
                           core_params(live.dcqcn, sc.dilation),
                           flags=F_KERNEL_PACER if self.pacer == "kernel" else 0, vtime_shift=shift)
        for node in self.plan.switches:
            ports = self.plan.ports(node)
            for port in ports:
                self.switch.configure_port(port.ifindex, port.rate_bps, live.red, sc.buffer_bytes,
                                           faces_host=port.faces == "host", vtime_shift=shift,
                                           headroom_bytes=self.plan.pfc_headroom_bytes())
            run_in_netns(testbed.netns(node), _attach_switch, [p.ifname for p in ports],
                         self.switch.fn.fd)
        others = os.sched_getaffinity(0) - {engine_cpu}
        if engine_cpu is not None and others:
            for node in self.plan.nodes:
                run_in_netns(testbed.netns(node), steer_receive,
                             [p.ifname for p in self.plan.ports(node)], others)
        for host in self.plan.hosts:
            nic_port = self.plan.ports(host)[0]
            run_in_netns(testbed.netns(host), _attach_host, nic_port.ifname, self.nic.tx_fn.fd,
                         self.nic.rx_fn.fd, XDP_FLAGS[sc.xdp_mode])
            self.sockets[host] = open_packet_socket(testbed.netns(host), nic_port.ifname)
        self.tx_view = self._view(self.nic.bpf["qp_tx"], QpTx)
        self.rx_view = self._view(self.nic.bpf["qp_rx"], QpRx)
        self.stats_view = self._view(self.switch.bpf["port_stats"], PortStats)
        self.hooks = HookMap(self._view(self.nic.bpf["proc_hook"], Hook))
        self.engine = TxEngine(self.tx_view, pauses=self.stats_view, deliveries=self.rx_view,
                               lead_ns=KERNEL_PACER_LEAD_NS if self.pacer == "kernel" else 0,
                               doorbell=self._view(self.nic.bpf["doorbell"], NicDoorbell))
        self._receivers: dict[int, tuple[str, str]] = {}     # receiving QPN -> (src, dst)
        self._credits: dict[int, PortCredit] = {}
        self._nic_ports: dict[str, NicPort] = {}         # host -> its NIC port's arbiter
        self._next_qpn = 1

    def _view(self, table, leaf_type) -> MmapArray:
        view = MmapArray(table, leaf_type)
        self._views.append(view)
        return view

    def connect(self, src: str, dst: str, proc: int = 0) -> tuple[int, int]:
        """An RC connection src -> dst: (sending QPN, receiving QPN)."""
        if self._next_qpn + 1 >= MAX_QPS:
            raise ValueError(f"at most {MAX_QPS - 1} QPs")
        send_qpn, recv_qpn = self._next_qpn, self._next_qpn + 1
        self._next_qpn += 2
        self.nic.add_qp(send_qpn, recv_qpn, proc, self.cnp_delay_ns(src, dst))
        self.nic.add_qp(recv_qpn, send_qpn, proc)
        port = self.plan.ports(src)[0]
        peer = self.plan.peer(port)
        addr = roce.FlowAddr(src_mac=port.mac, dst_mac=peer.mac, src_ip=port.addr,
                             dst_ip=self.plan.host_addr(dst), sport=sender_sport(send_qpn))
        self.engine.add_qp(send_qpn, self.sockets[src], recv_qpn, addr, self.live.roce_mtu,
                           rto_ns=self.retransmit_timeout_ns(src, dst),
                           ack_delay_ns=2 * self.endpoint_delay_ns(src, dst))
        # the host's QPs share its NIC port, in turns weighted by their processes' PRC weights
        if src not in self._nic_ports:
            self._nic_ports[src] = NicPort(port.rate_bps, int(self.live.pacing_slack_us * 1000))
        self.engine.share_port(send_qpn, self._nic_ports[src], self.hooks.weight_address(proc))
        self._receivers[recv_qpn] = (src, dst)
        if self.live.red.lossless:
            # The sender obeys pauses of the ports on its path (from the
            # switch's queue model). What is on its way to the last hop is
            # also bounded by what the destination received, only so that
            # the real queues never drop what the model keeps: on this
            # machine most of it sits in the receive CPU's backlog, not in
            # the emulated queue (a bound at the buffer held senders under
            # their rates in 84% of windows), so the bound is the real
            # FIFO's room (REAL_QUEUE_BUFFERS) less one buffer.
            path = self.plan.path_ports(src, dst)
            credit = self._credits.setdefault(
                path[-1].ifindex, PortCredit((REAL_QUEUE_BUFFERS - 1) * self.plan.scenario.buffer_bytes))
            credit.recv_words.append(recv_qpn * QP_RX_WORDS + RX_BYTES_WORD)
            self.engine.set_lossless(send_qpn, [p.ifindex * PORT_STATS_WORDS + PAUSE_UNTIL_WORD
                                                for p in path], credit)
        return send_qpn, recv_qpn

    def watch_receives(self, recv_qpn: int, callback) -> None:
        """callback(qpn, msn, visible_ns) for each message the receiving QP
        takes, when the receiver would see it: its last packet's arrival,
        plus the path's one-way delay where the links add none."""
        self.engine.watch_receives(recv_qpn, callback, self.endpoint_delay_ns(*self._receivers[recv_qpn]))

    def endpoint_delay_ns(self, src: str, dst: str) -> int:
        """The one-way delay completions wait for where the links add none
        (delay method "endpoint"; a send completes two of them after its
        ACK arrived, the data's way and the ACK's), else 0."""
        if self.testbed.record.get("delay_method") != "endpoint":
            return 0
        return self.plan.one_way_delay_ns(src, dst)

    def cnp_delay_ns(self, src: str, dst: str) -> int:
        """The feedback delay a CNP waits at the sender where the links add
        none (delay method "endpoint"), else 0."""
        if self.testbed.record.get("delay_method") != "endpoint":
            return 0
        return self.plan.feedback_delay_ns(src, dst)

    def retransmit_timeout_ns(self, src: str, dst: str) -> int:
        """The scenario's timeout, or one no ACK outlasts without a loss:
        twice the time to drain a full buffer at every port on the path,
        plus twice the feedback delay, and at least 1 ms live."""
        sc = self.plan.scenario
        if self.live.retransmit_timeout_us:
            return int(self.live.retransmit_timeout_us * 1000 * sc.dilation)
        drain_ns = sum(sc.buffer_bytes * 8e9 / p.rate_bps for p in self.plan.path_ports(src, dst))
        return max(MIN_RETRANSMIT_TIMEOUT_NS, int(2 * drain_ns + 2 * self.plan.feedback_delay_ns(src, dst)))

    def map_ids(self) -> dict[str, int]:
        """Ids of the maps other processes open: `prc-emu top` reads qp_tx,
        qp_rx and port_stats; a controller writes proc_hook (dataplane.hooks)."""
        from dataplane.bpf_objects import object_id
        return {"qp_tx": object_id(self.nic.bpf["qp_tx"].map_fd),
                "qp_rx": object_id(self.nic.bpf["qp_rx"].map_fd),
                "proc_hook": object_id(self.nic.bpf["proc_hook"].map_fd),
                "port_stats": object_id(self.switch.bpf["port_stats"].map_fd)}

    def set_hook(self, proc: int, hook: Hook) -> None:
        self.hooks.write(proc, hook)

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        for view in self._views:
            view.close()
        for program in (self.nic, self.switch):
            if program is not None:
                program.close()
