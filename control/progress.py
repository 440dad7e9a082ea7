"""Where the controller's progress comes from. Every source publishes
workload.events.Event on the workload's bus, so inference and policies
see one stream whatever feeds it:

- the workload's ranks: iteration, compute and step milestones (they
  publish themselves);
- a replayed progress trace ([job.trace], recorded by `prc-emu
  record-nvml` or written by hand): a GPU_SAMPLE event each time a
  rank's GPU speed changes, at the time the replay reaches it -- the
  same timeline that sets the rank's compute times."""
from __future__ import annotations

from workload import events as ev


class TraceReplay:
    """GPU_SAMPLE events of every traced rank of the workload's jobs."""

    def __init__(self, workload):
        self.workload = workload
        self.ranks = [ctx for ctx in workload.ranks.values() if ctx.speed is not None]

    def attach(self) -> None:
        # The workload's start time is known only once it starts: schedule from then.
        clock = self.workload.transport
        clock.call_at(clock.now_ns(), self._schedule)

    def _schedule(self) -> None:
        w = self.workload
        for ctx in self.ranks:
            for start, speed in zip(ctx.speed.starts, ctx.speed.speeds):
                t_ns = w.start_ns + max(0, int(start * 1e9 * w.dilation))
                w.transport.call_at(t_ns, lambda ctx=ctx, speed=speed: self._publish(ctx, speed))

    def _publish(self, ctx, speed: float) -> None:
        if self.workload.finished:
            return
        self.workload.bus.publish(ev.Event(self.workload.transport.now_ns(), ctx.job.name, ctx.rank, ctx.proc,
                                           ctx.iteration, ev.GPU_SAMPLE, f"speed {speed:g}", ctx.bytes_remaining,
                                           speed))


def sources(workload) -> list:
    """The sources besides the ranks' own events that this workload has."""
    replay = TraceReplay(workload)
    return [replay] if replay.ranks else []
