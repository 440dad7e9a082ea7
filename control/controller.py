"""The control loop: the workload's progress events (and a tick between
them) in, the policy's per-process weights and floors out through the
hook map, written only when they change. It runs in the workload's
loop, for every policy (dcqcn too: it then writes nothing), so each
policy pays the same for it."""
from __future__ import annotations

from control import progress
from control.inference import LagTracker
from control.policies import POLICIES, View
from workload import events as ev

WEIGHT_STEP = 1 / 16            # weights change in these steps: finer ones are not worth a write


class Controller:
    def __init__(self, spec, workload, hooks, dilation: float):
        """workload: workload.driver.Workload (its transport is the clock);
        hooks: an object with set(proc, weight, floor_frac) (dataplane.hooks.HookMap)."""
        self.spec, self.workload, self.hooks = spec, workload, hooks
        self.policy = POLICIES[spec.policy]
        self.tracker = LagTracker(spec.window, spec.late_threshold, spec.carry_over, spec.noise_mads)
        self.tick_ns = int(spec.tick_us * 1000 * dilation)
        procs = workload.procs()
        self.view = View(spec, self.tracker, 0, {p: workload.endpoint(j, r).host for p, (j, r) in procs.items()},
                         procs, {j.name for j in workload.jobs.values() if j.foreground}, workload.slowdowns,
                         {}, {})
        self._observed = {j.name for j in workload.jobs.values() if spec.observe == "all" or j.foreground}
        self._beside: dict[str, list[int]] = {}        # host -> its processes (a policy's unit: a NIC port)
        for proc, host in self.view.host_of.items():
            self._beside.setdefault(host, []).append(proc)
        self._all = list(self.view.host_of)
        self._planned: dict[int, int] = {}
        self.written: dict[int, tuple[float, float]] = {}
        self.decisions: list[tuple[int, int, float, float, float]] = []   # (t_ns, proc, weight, floor, lag)
        self.reaction_ns: list[int] = []          # progress event -> hook write

    def start(self) -> None:
        self.workload.bus.subscribe(self.on_event)
        for source in progress.sources(self.workload):
            source.attach()
        self._schedule()

    def _schedule(self) -> None:
        clock = self.workload.transport
        clock.call_at(clock.now_ns() + self.tick_ns, self._tick)

    def _tick(self) -> None:
        if self.workload.finished:
            return
        self._decide(None, self._all)
        self._schedule()

    def on_event(self, e: ev.Event) -> None:
        if e.job not in self._observed:
            return
        self.tracker.observe(e)
        v = self.view
        if e.kind == ev.ITERATION_START:
            v.iteration[e.proc] = e.iteration
            self._planned[e.proc] = e.bytes_remaining
        elif e.kind == ev.ITERATION_END:
            v.iteration[e.proc] = -1
        planned = self._planned.get(e.proc)
        if planned:
            v.sent_fraction[e.proc] = 1.0 - e.bytes_remaining / planned
        # an event changes what is known of its process only: its decision,
        # and with w_yield below 1 those of the processes sharing its NIC port
        self._decide(e.t_ns, self._beside[v.host_of[e.proc]] if self.spec.w_yield < 1.0 else [e.proc])

    def _decide(self, event_ns: int | None, procs: list[int]) -> None:
        now = self.workload.transport.now_ns()
        self.view.now_ns = now
        wanted = self.policy(self.view, procs)
        for proc in procs:
            weight, floor = wanted.get(proc, (1.0, 0.0))
            weight = round(weight / WEIGHT_STEP) * WEIGHT_STEP
            if self.written.get(proc, (1.0, 0.0)) != (weight, floor):
                self.hooks.set(proc, weight, floor)
                self.written[proc] = (weight, floor)
                self.decisions.append((now, proc, weight, floor, self.tracker.lag(proc, now)))
                if event_ns is not None:
                    self.reaction_ns.append(self.workload.transport.now_ns() - event_ns)
