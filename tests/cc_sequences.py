"""Random CC event sequences for the differential tests: CNP bursts, long
silences, byte counts up to the 32-bit limit, and hook changes (weight,
floor, cap) mid-sequence, under random but valid parameters."""
from __future__ import annotations

import random

from dataplane.cc import EV_ADVANCE, EV_CNP, EV_TX, Event, Hook, Params
from scenario.dcqcn import DcqcnConfig


def random_config(rng: random.Random) -> DcqcnConfig:
    byte_reset = rng.choice([0, 0, 32767, rng.randint(1024, 10 << 20)])
    return DcqcnConfig(
        line_rate_gbps=rng.choice([25, 100, 400]),
        rpg_time_reset_us=rng.choice([1, 55, 300, rng.uniform(1, 2000)]),
        rpg_byte_reset=byte_reset,
        rpg_threshold=rng.choice([1, 5, rng.randint(1, 31)]),
        rpg_ai_rate_mbps=rng.choice([0, 5, 40, rng.uniform(0, 1000)]),
        rpg_hai_rate_mbps=rng.choice([0, 50, 100, rng.uniform(0, 2000)]),
        rpg_gd=rng.choice([10, 11, 11, rng.randint(10, 20)]),
        rpg_min_dec_fac=rng.choice([0, 50, rng.randint(0, 100)]),
        rpg_min_rate_mbps=rng.choice([1, 100, rng.uniform(0, 5000)]),
        dce_tcp_g=rng.choice([1019, 1020, 1024, rng.randint(0, 1024)]),
        dce_tcp_rtt_us=rng.choice([1, 55, rng.uniform(0.5, 500)]),
        rate_reduce_monitor_period_us=rng.choice([0, 4, 50, rng.uniform(0, 500)]),
        initial_alpha_value=rng.choice([1023, 1024, rng.randint(0, 1024)]),
        w_min=rng.choice([0.25, 1.0, rng.uniform(1 / 64, 1)]),
        w_max=rng.choice([4.0, 1.0, rng.uniform(1, 16)]),
    )


def random_hook(rng: random.Random) -> Hook:
    return Hook(weight=rng.choice([0, 1024, 1024, rng.randint(1, 8192), rng.randint(0, 1 << 20)]),
                rate_floor=rng.choice([0, 0, 0, rng.randint(0, 1 << 20)]),
                rate_cap=rng.choice([0, 0, 0, rng.randint(1, 1 << 20), rng.randint(0, 1 << 22)]))


def random_sequence(rng: random.Random, params: Params, length: int) -> list[Event]:
    now = rng.choice([0, rng.randint(0, 1 << 50)])
    hook = random_hook(rng) if rng.random() < 0.3 else Hook()
    events = []
    while len(events) < length:
        shape = rng.random()
        if shape < 0.1:
            hook = random_hook(rng)                      # the control plane changes its mind
        if shape < 0.3:                                  # a CNP burst
            for _ in range(rng.randint(1, 6)):
                now += rng.choice([1, 500, params.rate_reduce_monitor_period_ns, rng.randint(0, 100_000)])
                events.append(Event(kind=EV_CNP, now_ns=now, hook=hook))
        elif shape < 0.7:                                # sending
            now += rng.randint(0, 3 * params.rpg_time_reset_ns)
            nbytes = rng.choice([4096, rng.randint(0, 1 << 16), rng.randint(0, (1 << 32) - 1),
                                 (1 << 32) - 1])
            events.append(Event(kind=EV_TX, bytes=nbytes, now_ns=now, hook=hook))
        elif shape < 0.85:                               # a long silence
            now += rng.choice([rng.randint(0, 10**7), rng.randint(0, 10**10), 10**12])
            events.append(Event(kind=rng.choice([EV_ADVANCE, EV_TX, EV_CNP]), now_ns=now, hook=hook,
                                bytes=rng.randint(0, 1 << 20)))
        else:                                            # a look at the rate
            now += rng.randint(0, 10 * params.rpg_time_reset_ns)
            events.append(Event(kind=EV_ADVANCE, now_ns=now, hook=hook))
    return events[:length]
