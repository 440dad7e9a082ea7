"""Traffic probes that run inside a testbed namespace (through
testbed.isolated): the machine has no ping or iperf, so tests bring their own.
Results are plain data; the caller decides what is good enough."""
from __future__ import annotations

import os
import select
import socket
import struct
import time

ICMP_ECHO_REQUEST, ICMP_ECHO_REPLY = 8, 0


def pin_to_cpu(cpu: int) -> None:
    """Pin this process to one CPU when the machine has it (a sender and a
    receiver busy on the same core measure the scheduler, not the link)."""
    if cpu in os.sched_getaffinity(0) or cpu < os.cpu_count():
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass


def _icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def icmp_echo(dst_addrs: list[str], timeout_s: float = 1.0) -> dict[str, float | None]:
    """Echo each address once (the kernel answers; no server needed);
    return the round-trip time in us, or None where no reply came."""
    ident = os.getpid() & 0xFFFF
    rtts: dict[str, float | None] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        for seq, dst in enumerate(dst_addrs):
            body = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident, seq) + b"prc-emu-probe"
            body = body[:2] + struct.pack("!H", _icmp_checksum(body)) + body[4:]
            sent = time.monotonic()
            sock.sendto(body, (dst, 0))
            rtts[dst] = None
            deadline = sent + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data, (src, _) = sock.recvfrom(2048)
                except socket.timeout:
                    break
                ihl = (data[0] & 0x0F) * 4
                typ, _code, _sum, rid, rseq = struct.unpack_from("!BBHHH", data, ihl)
                if typ == ICMP_ECHO_REPLY and rid == ident and rseq == seq and src == dst:
                    rtts[dst] = (time.monotonic() - sent) * 1e6
                    break
    return rtts


def udp_sink(port: int, duration_s: float, cpu: int = 1) -> list[tuple[float, int]]:
    """Receive UDP on `port` until duration_s after the first datagram (or
    duration_s with none); return (arrival time s, payload bytes) per datagram."""
    pin_to_cpu(cpu)
    arrivals = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.bind(("0.0.0.0", port))
        buf = bytearray(65536)
        end = time.monotonic() + duration_s + 5.0   # the sender may start late
        while (left := end - time.monotonic()) > 0:
            sock.settimeout(min(left, 0.5))
            try:
                n = sock.recv_into(buf)
            except socket.timeout:
                if arrivals:
                    break   # the sender stopped
                continue
            now = time.monotonic()
            if not arrivals:
                end = now + duration_s
            arrivals.append((now, n))
    return arrivals


def udp_blast(dst: str, port: int, payload_bytes: int, duration_s: float,
              sports: list[int] | None = None, cpu: int = 0, max_packets: int | None = None) -> int:
    """Send datagrams as fast as the socket takes them (the qdisc's back
    pressure paces it), round-robin over source ports; return the count."""
    pin_to_cpu(cpu)
    socks = []
    for sport in sports or [0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("0.0.0.0", sport))
        sock.connect((dst, port))
        socks.append(sock)
    payload = bytes(payload_bytes)
    sent = 0
    end = time.monotonic() + duration_s
    try:
        while time.monotonic() < end and (max_packets is None or sent < max_packets):
            try:
                socks[sent % len(socks)].send(payload)
            except (BlockingIOError, ConnectionRefusedError, OSError):
                continue   # ICMP errors from an earlier datagram; keep sending
            sent += 1
    finally:
        for sock in socks:
            sock.close()
    return sent


def goodput_bps(arrivals: list[tuple[float, int]], skip_s: float = 0.3) -> float:
    """Payload rate over the arrivals after the first skip_s (start-up)."""
    if len(arrivals) < 2:
        return 0.0
    start = arrivals[0][0] + skip_s
    window = [(t, n) for t, n in arrivals if t >= start]
    if len(window) < 2:
        return 0.0
    # Bytes that arrived after the window's first datagram, over its span.
    return sum(n for _, n in window[1:]) * 8 / (window[-1][0] - window[0][0])


def link_tx_packets(ifnames: list[str]) -> dict[str, int]:
    """Transmitted packets of interfaces of the current namespace."""
    from pyroute2 import IPRoute

    out = {}
    with IPRoute() as ipr:
        for name in ifnames:
            link = ipr.get_links(ipr.link_lookup(ifname=name)[0])[0]
            out[name] = link.get_attr("IFLA_STATS64")["tx_packets"]
    return out


ETH_P_ALL = 0x0003
SOL_PACKET, PACKET_RX_RING, PACKET_STATISTICS, PACKET_VERSION, TPACKET_V3 = 263, 5, 6, 10, 2
TP_STATUS_KERNEL, TP_STATUS_USER = 0, 1
RING_BLOCK_BYTES = 1 << 20           # the kernel hands the reader whole blocks
RING_FRAME_BYTES = 1 << 14           # room for the largest frame and its header
RING_BLOCK_TIMEOUT_MS = 10           # a block that is not full goes to the reader after this
CAPTURE_BUFFER_BYTES = 64 << 20


def capture(ifname: str, duration_s: float, max_frames: int, path: str, cpu: int = 1,
            buffer_bytes: int = CAPTURE_BUFFER_BYTES) -> dict:
    """Capture frames in both directions on an interface of the current
    namespace into a pcap at path (at most max_frames), each with the time
    the kernel saw it: {"frames": count, "dropped": frames the ring could
    not hold}. The socket is opened for no protocol and bound to the
    interface before it takes any: frames of other ports never get in.
    The kernel fills a memory-mapped ring (TPACKET_V3) of buffer_bytes in
    blocks, so this reader, which shares a CPU with the dataplane's
    receive work, wakes once a block instead of once a frame. The capture
    covers duration_s of kernel time from the bind."""
    import mmap

    from dataplane.pcap import write_pcap

    pin_to_cpu(cpu)
    blocks = max(4, buffer_bytes // RING_BLOCK_BYTES)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as sock:
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, struct.pack(
            "7I", RING_BLOCK_BYTES, blocks, RING_FRAME_BYTES, blocks * RING_BLOCK_BYTES // RING_FRAME_BYTES,
            RING_BLOCK_TIMEOUT_MS, 0, 0))
        ring = mmap.mmap(sock.fileno(), blocks * RING_BLOCK_BYTES, mmap.MAP_SHARED,
                         mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            sock.bind((ifname, ETH_P_ALL))
            end = time.time_ns() + int(duration_s * 1e9)          # the kernel stamps CLOCK_REALTIME
            frames, times = _read_ring(sock, ring, blocks, end, max_frames)
            _, dropped, _ = struct.unpack("3I", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
        finally:
            ring.close()
    write_pcap(path, frames, times)
    return {"frames": len(frames), "dropped": dropped}


def _read_ring(sock, ring, blocks: int, end: int, max_frames: int) -> tuple[list[bytes], list[int]]:
    """Frames and their kernel times from the ring's blocks, in order, up
    to a frame the kernel saw after end, max_frames, or (with no traffic)
    the last block's retirement after end."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLERR)
    frames, times, block = [], [], 0
    while True:
        base = block * RING_BLOCK_BYTES
        if not struct.unpack_from("I", ring, base + 8)[0] & TP_STATUS_USER:       # block_status
            if time.time_ns() > end + 3 * RING_BLOCK_TIMEOUT_MS * 1_000_000:
                return frames, times
            poller.poll(RING_BLOCK_TIMEOUT_MS)
            continue
        count, at = struct.unpack_from("2I", ring, base + 12)                     # num_pkts, first
        at += base
        for _ in range(count):
            # struct tpacket3_hdr: next offset, sec, nsec, snaplen, len, status, mac offset
            next_at, sec, nsec, snaplen, _, _, mac = struct.unpack_from("6IH", ring, at)
            seen = sec * 10**9 + nsec
            if seen > end or len(frames) == max_frames:
                return frames, times
            frames.append(ring[at + mac:at + mac + snaplen])
            times.append(seen)
            at += next_at
        struct.pack_into("I", ring, base + 8, TP_STATUS_KERNEL)                 # back to the kernel
        block = (block + 1) % blocks


def queue_pairs(ifname: str, ifindex: int, stats_map_id: int, duration_s: float,
                every_s: float = 0.005, cpu: int = 1) -> list[tuple[int, int]]:
    """Sample, at the same instants, the real backlog of the port's qdisc
    (bytes, from netlink) and the switch program's model queue (from its
    mmapped port_stats map): [(real, model), ...]."""
    from pyroute2 import IPRoute

    from dataplane.bpf_mmap import MmapArray
    from dataplane.bpf_objects import map_fd_by_id
    from dataplane.switch import MAX_IFINDEX, PortStats

    pin_to_cpu(cpu)
    stats = MmapArray(None, PortStats, map_fd_by_id(stats_map_id), MAX_IFINDEX)
    pairs = []
    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            backlog = 0
            before = stats[ifindex].q_bytes
            for qdisc in ipr.get_qdiscs(idx):             # a netlink dump: about a millisecond
                if qdisc.get_attr("TCA_KIND") == "htb":      # the root holds its children's backlog
                    backlog = qdisc.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")["backlog"]
            pairs.append((backlog, (before + stats[ifindex].q_bytes) // 2))   # the model around it
            time.sleep(every_s)
    return pairs


def qdisc_drops(ifname: str) -> int:
    """Packets the byte FIFO under an egress port's HTB dropped (tail drops
    when the buffer is full), in the current namespace."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        return sum(q.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")["drops"]
                   for q in ipr.get_qdiscs(idx) if q.get_attr("TCA_KIND") == "bfifo")


def backlog_drops() -> int:
    """Packets the kernel dropped because a CPU's receive backlog was full
    (netdev_max_backlog), summed over CPUs since boot: machine-wide, so a
    run reports the difference across it. veth delivery queues there; a
    loss the switch model did not make shows up here."""
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f if line.strip())
