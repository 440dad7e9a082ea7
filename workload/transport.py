"""What a workload needs from a network: a clock, timers, and reliable
messages between two ranks' processes with two completions each -- the
sender's (the acknowledgement is back) and the receiver's (the data is
visible). The live emulator and the simulator each provide one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True)
class Endpoint:
    host: str
    proc: int            # the NIC process (rank) whose QPs carry it


class Transport(Protocol):
    def now_ns(self) -> int: ...

    def call_at(self, t_ns: int, fn: Callable[[], None]) -> None: ...

    def send(self, src: Endpoint, dst: Endpoint, nbytes: int, fresh: bool,
             on_sent: Callable[[int], None], on_received: Callable[[int], None]) -> None:
        """One message; on_sent(t_ns) when the sender's completion is
        visible, on_received(t_ns) when the receiver's is. Messages between
        the same two endpoints arrive in order. fresh: the connection's
        congestion state starts over for this message (if it is idle)."""
        ...
