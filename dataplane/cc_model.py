"""An independent floating-point model of the DCQCN reaction point with the
PRC hook, written from the specification (docs/cc.md)
and not from the C: the two C builds share one source, so only a model
like this can catch a bug in it. Rates are fractions of line rate, alpha a
fraction; integer parameters and times are the core's own."""
from __future__ import annotations

from dataclasses import dataclass

from dataplane.cc import EV_CNP, EV_TX, RATE_ONE, WEIGHT_ONE, Event, Params

HAI_MAX_I = 64
COUNT_MAX = 0xFFFF
MAX_INCREASE_STEPS = 1 << 21


@dataclass
class ModelState:
    rc: float = 0.0
    rt: float = 0.0
    alpha: float = 0.0
    t: int = 0
    bc: int = 0
    byte_acc: int = 0
    alpha_next: int = 0
    inc_next: int = 0
    last_cut: int = 0
    seen: bool = False
    cut: bool = False
    initialised: bool = False


class DcqcnModel:
    """exact_steps: increase steps (timer or byte counter) simulated one by
    one per event;
    beyond that, a run of steps with a constant increment is summed in
    closed form (tests check the two agree)."""

    def __init__(self, params: Params, exact_steps: int = 4096):
        self.p = params
        self.s = ModelState()
        self.exact_steps = exact_steps

    # -- the hook ---------------------------------------------------------
    def _effective(self, hook) -> tuple[float, float, float]:
        w = hook.weight or WEIGHT_ONE
        w = max(min(w, self.p.w_max), self.p.w_min, 1) / WEIGHT_ONE
        ceiling = min(hook.rate_cap or RATE_ONE, RATE_ONE) / RATE_ONE
        floor = min(hook.rate_floor / RATE_ONE, ceiling)
        return w, ceiling, floor

    # -- events -------------------------------------------------------------
    def apply(self, ev: Event) -> ModelState:
        p, s = self.p, self.s
        now = ev.now_ns
        w, ceiling, floor = self._effective(ev.hook)
        if not s.initialised:
            s.rc = s.rt = ceiling
            s.alpha = p.initial_alpha_value / 1024
            s.alpha_next = now + max(p.dce_tcp_rtt_ns, 1)
            s.inc_next = now + max(p.rpg_time_reset_ns, 1)
            s.last_cut = now
            s.initialised = True
        s.rt, s.rc = min(s.rt, ceiling), min(s.rc, ceiling)
        self._alpha_periods(now)
        self._increase_timer(now, w, ceiling)
        if ev.kind == EV_CNP:
            self._cnp(now, w)
        elif ev.kind == EV_TX:
            self._tx(ev.bytes, w, ceiling)
        s.rc = min(max(s.rc, floor), ceiling)
        s.rt = max(s.rt, s.rc)
        return s

    def _alpha_periods(self, now: int) -> None:
        p, s = self.p, self.s
        if now < s.alpha_next:
            return
        period = max(p.dce_tcp_rtt_ns, 1)
        k = (now - s.alpha_next) // period + 1
        g = p.dce_tcp_g / 1024
        s.alpha = g * s.alpha + (1 - g) * (1.0 if s.seen else 0.0)   # the period with the flag
        s.alpha *= g ** (k - 1)                                       # periods without a CNP
        s.seen = False
        s.alpha_next += k * period

    def _cnp(self, now: int, w: float) -> None:
        p, s = self.p, self.s
        s.seen = True
        if s.cut and now - s.last_cut < p.rate_reduce_monitor_period_ns:
            return
        factor = min(s.alpha / 2 ** (p.rpg_gd - 10) / w, 1.0)
        s.rt = s.rc
        s.rc = max(s.rc * (1 - factor), s.rc * p.rpg_min_dec_fac / 100, p.rpg_min_rate / RATE_ONE)
        s.t = s.bc = 0
        s.byte_acc = 0
        s.inc_next = now + max(p.rpg_time_reset_ns, 1)
        s.last_cut = now
        s.cut = True

    def _tx(self, nbytes: int, w: float, ceiling: float) -> None:
        """Every rpg_byte_reset bytes is a BC event, however many one send
        completes; the rest waits in the accumulator."""
        p, s = self.p, self.s
        if not p.rpg_byte_reset:
            return
        k, s.byte_acc = divmod(min(s.byte_acc + nbytes, 0xFFFFFFFF), p.rpg_byte_reset)
        s.bc = self._increase_events(s.bc, lambda bc: self._increment(s.t, bc, w), k, ceiling)

    def _increase_timer(self, now: int, w: float, ceiling: float) -> None:
        p, s = self.p, self.s
        if now < s.inc_next:
            return
        period = max(p.rpg_time_reset_ns, 1)
        k = (now - s.inc_next) // period + 1
        s.inc_next += k * period
        s.t = self._increase_events(s.t, lambda t: self._increment(t, s.bc, w), k, ceiling)

    def _increase_events(self, count: int, increment, k: int, ceiling: float) -> int:
        """k events of one counter (T or BC), each adding one to it and
        running one increase step with increment(counter after the event);
        returns the counter, saturated. Beyond MAX_INCREASE_STEPS the state
        no longer changes (Rt is at the ceiling, the gap has halved away)."""
        p = self.p
        k = min(k, MAX_INCREASE_STEPS)
        c, done = count, 0
        # One by one while the increment can still change from step to step
        # (it is constant once the counter is >= F + 64 in every mode), and
        # up to the budget.
        while done < k and (done < self.exact_steps or c < p.rpg_threshold + HAI_MAX_I):
            c += 1
            done += 1
            self._step(increment(c), ceiling)
        if done < k:
            self._constant_steps(k - done, increment(c + 1), ceiling)
        return min(count + k, COUNT_MAX)

    def _increment(self, t: int, bc: int, w: float) -> float:
        """Stage rules of docs/cc.md for an event leaving (T, BC)."""
        p = self.p
        f, ai, hai = p.rpg_threshold, p.rpg_ai_rate * w / RATE_ONE, p.rpg_hai_rate * w / RATE_ONE
        if p.rpg_byte_reset == 0:
            if t < f:
                return 0.0                          # fast recovery
            if t == f:
                return ai                           # additive
            return min(t - f, HAI_MAX_I) * hai      # hyper, i = T - F
        if max(t, bc) < f:
            return 0.0
        if min(t, bc) >= f:
            return min(min(t, bc) - f + 1, HAI_MAX_I) * hai
        return ai

    def _step(self, a: float, ceiling: float) -> None:
        s = self.s
        s.rt = min(s.rt + a, ceiling)
        s.rc = (s.rt + s.rc) / 2

    def _constant_steps(self, n: int, a: float, ceiling: float) -> None:
        """n steps with increment a, summed: below the ceiling the gap
        e = Rt - Rc obeys e' = (e + a) / 2, so e - a halves each step."""
        s = self.s
        e = s.rt - s.rc
        if a <= 0:
            below = n       # Rt never moves; the gap just halves
        else:
            # steps that keep Rt below the ceiling: Rt + below * a < ceiling
            below = max(0, min(n, int((ceiling - s.rt) / a)))
            while below > 0 and s.rt + below * a >= ceiling:
                below -= 1
        s.rt += below * a
        e = a + (e - a) * 0.5 ** below
        if below < n:
            e = (e + (ceiling - s.rt)) / 2
            s.rt = ceiling
            e *= 0.5 ** (n - below - 1)
        s.rc = s.rt - e
