"""The program each rank of a job runs, as a generator over its context:
a training rank's iterations (1F1B pipeline, then the gradient all-reduce
of its data-parallel group), an on-off background rank's bursts, a bulk
rank's endless sends; and the peers each one sends to."""
from __future__ import annotations

import itertools
from typing import NamedTuple

from workload import events as ev
from workload.collectives import bytes_sent, collective, ring_allreduce, ring_next


def one_f_one_b(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B order of a pipeline stage: (F|B, microbatch). Warm-up runs
    the forwards that fill the pipeline below this stage, then one forward
    and one backward alternate, then the remaining backwards drain."""
    warmup = min(stages - stage - 1, microbatches)
    order = [("F", m) for m in range(warmup)]
    for i in range(microbatches - warmup):
        order += [("F", warmup + i), ("B", i)]
    order += [("B", m) for m in range(microbatches - warmup, microbatches)]
    return order


class Place(NamedTuple):
    """A training rank's groups and pipeline neighbours."""

    tp_group: list[int]
    dp_group: list[int]
    stage: int
    prev_stage: int | None        # the rank a forward's input comes from
    next_stage: int | None        # ... and a backward's


def place(job, rank: int) -> Place:
    tp, dp, pp = job.coords(rank)
    return Place([job.rank_at(t, dp, pp) for t in range(job.tp)], [job.rank_at(tp, d, pp) for d in range(job.dp)],
                 pp, job.rank_at(tp, dp, pp - 1) if pp > 0 else None,
                 job.rank_at(tp, dp, pp + 1) if pp < job.pp - 1 else None)


def peers(job, rank: int) -> list[int]:
    """The ranks a rank of job sends to."""
    if job.kind == "training":
        p = place(job, rank)
        out = [ring_next(group, rank) for group, used in ((p.tp_group, job.model.tp_bytes),
                                                          (p.dp_group, job.model.gradient_bytes))
               if len(group) > 1 and used]
        return out + [r for r in (p.prev_stage, p.next_stage) if r is not None]
    if job.kind == "onoff" and job.collective == "alltoall":
        return [r for r in range(job.ranks) if r != rank]
    return [(rank + 1) % job.ranks]


def planned_bytes(job, rank: int) -> int:
    """What a training rank sends in one iteration."""
    m, p = job.model, place(job, rank)
    pipeline = job.microbatches * m.activation_bytes * ((p.next_stage is not None) + (p.prev_stage is not None))
    tensor = 2 * job.microbatches * bytes_sent("allreduce", job.tp, m.tp_bytes)
    return pipeline + tensor + bytes_sent("allreduce", job.dp, m.gradient_bytes)


def _start(ctx):
    """Wait for the job's start_us."""
    if ctx.job.start_us:
        yield ctx.at(ctx.workload.start_ns + int(ctx.job.start_us * 1000 * ctx.workload.dilation))


def training(ctx):
    job, m = ctx.job, ctx.job.model
    p = place(job, ctx.rank)
    order = one_f_one_b(p.stage, job.pp, job.microbatches)
    yield from _start(ctx)
    for it in range(job.iterations):
        ctx.iteration = it
        ctx.bytes_remaining = planned_bytes(job, ctx.rank)
        ctx.emit(ev.ITERATION_START)
        sends = []
        for op, mb in order:
            # a forward needs the previous stage's activation, a backward the next stage's gradient
            source, target = (p.prev_stage, p.next_stage) if op == "F" else (p.next_stage, p.prev_stage)
            kind = "act" if op == "F" else "grad"
            if source is not None:
                ctx.emit(ev.WAIT_START, f"{op} mb {mb} input")
                yield ctx.recv(source, m.activation_bytes, (kind, it, mb))
                ctx.emit(ev.WAIT_END, f"{op} mb {mb} input")
            yield ctx.compute(m.forward_us if op == "F" else m.backward_us, f"{op} mb {mb}")
            if m.tp_bytes:
                yield from ring_allreduce(ctx, p.tp_group, m.tp_bytes, ("tp", op, it, mb), "tp-allreduce")
            if target is not None:         # the next compute does not wait for it
                sends.append(ctx.send(target, m.activation_bytes, (kind, it, mb)))
        if m.gradient_bytes:
            yield from ring_allreduce(ctx, p.dp_group, m.gradient_bytes, ("dp", it), "dp-allreduce")
        if sends:                    # the iteration ends once its pipeline sends are acknowledged
            ctx.emit(ev.WAIT_START, "pipeline sends")
            yield sends
            ctx.emit(ev.WAIT_END, "pipeline sends")
        ctx.emit(ev.ITERATION_END)


def onoff(ctx):
    """A burst of the job's collective every period from start_us on; a
    burst that runs past the next one's time delays it."""
    job, w = ctx.job, ctx.workload
    group = list(range(job.ranks))
    for it in itertools.count():
        due = w.start_ns + int((job.start_us + it * job.period_us) * 1000 * w.dilation)
        ctx.iteration = it
        if due > w.transport.now_ns():
            yield ctx.at(due)
        ctx.bytes_remaining = bytes_sent(job.collective, job.ranks, job.burst_bytes)
        ctx.emit(ev.ITERATION_START)
        yield from collective(job.collective, ctx, group, job.burst_bytes, (job.collective, it))
        ctx.emit(ev.ITERATION_END)


BULK_IN_FLIGHT = 2          # messages a bulk rank keeps posted, so its QP never idles


def bulk(ctx):
    """Send to the next rank (in a ring) without pause; receive from the
    previous one the same way."""
    job = ctx.job
    right, left = (ctx.rank + 1) % job.ranks, (ctx.rank - 1) % job.ranks
    size = job.model.chunk_bytes
    yield from _start(ctx)
    ctx.emit(ev.ITERATION_START)
    ctx.step_start("bulk")
    in_flight = [ctx.send(right, size, ("bulk", i)) for i in range(BULK_IN_FLIGHT)]
    for i in itertools.count(BULK_IN_FLIGHT):
        ctx.recv(left, size, ("bulk", i - BULK_IN_FLIGHT))      # take what the left rank sends
        yield in_flight.pop(0)
        in_flight.append(ctx.send(right, size, ("bulk", i)))


PROGRAMS = {"training": training, "onoff": onoff, "bulk": bulk}
