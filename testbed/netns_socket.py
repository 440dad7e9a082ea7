"""Sockets that live in a testbed namespace, for a process that stays in
its own: a forked child enters the namespace, opens the socket and hands
the descriptor back (SCM_RIGHTS). A socket keeps the namespace it was made
in, so the caller never has to switch namespaces itself."""
from __future__ import annotations

import os
import socket

from testbed.isolated import enter_netns

ETH_P_ALL = 0x0003


def open_packet_socket(netns: str, ifname: str, sndbuf_bytes: int = 4 << 20) -> socket.socket:
    """An AF_PACKET raw socket bound to ifname inside netns."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            parent.close()
            enter_netns(netns)
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)   # send only: no protocol
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf_bytes)
            sock.bind((ifname, 0))
            socket.send_fds(child, [b"ok"], [sock.fileno()])
            code = 0
        except BaseException as exc:  # report, never return into the caller's code
            try:
                child.send(f"error: {type(exc).__name__}: {exc}".encode()[:1000])
            except OSError:
                pass
        finally:
            os._exit(code)
    child.close()
    try:
        msg, fds, _flags, _addr = socket.recv_fds(parent, 2048, 1)
    finally:
        parent.close()
        os.waitpid(pid, 0)
    if not fds:
        raise OSError(f"cannot open a packet socket on {ifname} in {netns}: {msg.decode(errors='replace')}")
    return socket.socket(fileno=fds[0])
