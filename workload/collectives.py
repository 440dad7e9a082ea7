"""Collectives as each rank runs them: generator functions over a rank's
context (workload.rank) that post messages to peers and wait on their
completions. A step ends when the rank's send of that step is
acknowledged and the data it needs from its peer is visible, as NCCL's
ring steps do; the next step's send depends on it."""
from __future__ import annotations


def _ring(ctx, group: list[int]) -> tuple[int, int, int]:
    i = group.index(ctx.rank)
    n = len(group)
    return n, group[(i + 1) % n], group[(i - 1) % n]


def _ring_steps(ctx, group, chunk: int, tag, label: str, steps: int):
    n, right, left = _ring(ctx, group)
    for step in range(steps):
        detail = f"{label} step {step + 1}/{steps}"
        ctx.step_start(detail)
        yield [ctx.send(right, chunk, (tag, step)), ctx.recv(left, chunk, (tag, step))]
        ctx.step_end(detail)


def ring_allreduce(ctx, group: list[int], nbytes: int, tag, label: str = "allreduce"):
    """Reduce-scatter then all-gather around the ring: 2(n-1) steps of
    nbytes/n each, so every rank sends 2(n-1)/n of the buffer."""
    n = len(group)
    if n > 1:
        yield from _ring_steps(ctx, group, nbytes // n, tag, label, 2 * (n - 1))


def ring_allgather(ctx, group: list[int], nbytes: int, tag, label: str = "allgather"):
    """nbytes: the gathered buffer; n-1 steps of nbytes/n."""
    n = len(group)
    if n > 1:
        yield from _ring_steps(ctx, group, nbytes // n, tag, label, n - 1)


def ring_reducescatter(ctx, group: list[int], nbytes: int, tag, label: str = "reducescatter"):
    """nbytes: the buffer each rank reduces; n-1 steps of nbytes/n."""
    n = len(group)
    if n > 1:
        yield from _ring_steps(ctx, group, nbytes // n, tag, label, n - 1)


def alltoall(ctx, group: list[int], nbytes: int, tag, label: str = "alltoall"):
    """nbytes/n to every other rank of the group, all at once."""
    n = len(group)
    if n > 1:
        share = nbytes // n
        peers = [r for r in group if r != ctx.rank]
        ctx.step_start(label)
        yield [ctx.send(p, share, (tag, ctx.rank)) for p in peers] + \
              [ctx.recv(p, share, (tag, p)) for p in peers]
        ctx.step_end(label)


def sendrecv(ctx, peer: int, nbytes: int, tag, receive: bool, label: str = "p2p"):
    """One point-to-point transfer, from the side of the sender or of the
    receiver (which waits until the data is visible)."""
    ctx.step_start(label)
    yield ctx.recv(peer, nbytes, tag) if receive else ctx.send(peer, nbytes, tag)
    ctx.step_end(label)


COLLECTIVES = {"allreduce": ring_allreduce, "allgather": ring_allgather,
               "reducescatter": ring_reducescatter, "alltoall": alltoall}


def bytes_sent(kind: str, n: int, nbytes: int) -> int:
    """What one rank sends in a collective of n ranks over nbytes."""
    if n < 2:
        return 0
    steps = {"allreduce": 2 * (n - 1), "allgather": n - 1, "reducescatter": n - 1, "alltoall": n - 1}[kind]
    return steps * (nbytes // n)
