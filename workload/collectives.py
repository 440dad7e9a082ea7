"""Collectives as each rank runs them: generator functions over a rank's
context (workload.rank) that post messages to peers and wait on their
completions. A step ends when the rank's send of that step is
acknowledged and the data it needs from its peer is visible, as NCCL's
ring steps do; the next step's send depends on it."""
from __future__ import annotations

# passes around the ring: an all-reduce is a reduce-scatter then an
# all-gather, each n-1 steps of nbytes/n
RING_PASSES = {"allreduce": 2, "allgather": 1, "reducescatter": 1}
KINDS = (*RING_PASSES, "alltoall")


def ring_next(group: list[int], rank: int) -> int:
    return group[(group.index(rank) + 1) % len(group)]


def ring(ctx, group: list[int], nbytes: int, tag, label: str, passes: int):
    """passes x (n-1) steps of nbytes/n, each to the next rank and from the
    previous one (nbytes: the buffer each rank reduces, or gathers)."""
    n = len(group)
    right, left = ring_next(group, ctx.rank), group[(group.index(ctx.rank) - 1) % n]
    steps = passes * (n - 1)
    for step in range(steps):
        detail = f"{label} step {step + 1}/{steps}"
        ctx.step_start(detail)
        yield [ctx.send(right, nbytes // n, (tag, step)), ctx.recv(left, nbytes // n, (tag, step))]
        ctx.step_end(detail)


def ring_allreduce(ctx, group: list[int], nbytes: int, tag, label: str = "allreduce"):
    """Every rank sends 2(n-1)/n of the buffer."""
    return ring(ctx, group, nbytes, tag, label, RING_PASSES["allreduce"])


def alltoall(ctx, group: list[int], nbytes: int, tag, label: str = "alltoall"):
    """nbytes/n to every other rank of the group, all at once."""
    peers = [r for r in group if r != ctx.rank]
    if peers:
        share = nbytes // len(group)
        ctx.step_start(label)
        yield [ctx.send(p, share, (tag, ctx.rank)) for p in peers] + \
              [ctx.recv(p, share, (tag, p)) for p in peers]
        ctx.step_end(label)


def collective(kind: str, ctx, group: list[int], nbytes: int, tag):
    """Run collective `kind` (one of KINDS) from ctx's rank."""
    if kind == "alltoall":
        return alltoall(ctx, group, nbytes, tag)
    return ring(ctx, group, nbytes, tag, kind, RING_PASSES[kind])


def bytes_sent(kind: str, n: int, nbytes: int) -> int:
    """What one rank sends in a collective of n ranks over nbytes."""
    return (n - 1) * RING_PASSES.get(kind, 1) * (nbytes // n)
