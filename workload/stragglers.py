"""Which rank computes how much slower in which iteration: the scripted
stragglers of a job and its stochastic episodes, drawn once from the
job's seed so that every policy meets the same ones."""
from __future__ import annotations

import random

from scenario.job import JobSpec


def slowdowns(job: JobSpec) -> list[list[float]]:
    """[rank][iteration] -> extra compute as a fraction (0: none). Where
    episodes overlap, the larger slowdown holds."""
    table = [[0.0] * job.iterations for _ in range(job.ranks)]
    for s in job.stragglers:
        for it in (s.iterations if s.iterations is not None else range(job.iterations)):
            table[s.rank][it] = max(table[s.rank][it], s.slowdown)
    if job.stochastic is not None and job.stochastic.probability > 0:
        st = job.stochastic
        rng = random.Random(job.seed)
        for rank in range(job.ranks):
            it = 0
            while it < job.iterations:
                if rng.random() < st.probability:
                    length = rng.randint(*st.duration)
                    slow = rng.uniform(*st.slowdown)
                    for k in range(it, min(job.iterations, it + length)):
                        table[rank][k] = max(table[rank][k], slow)
                    it += length
                else:
                    it += 1
    return table


def transient(table: list[list[float]], rank: int) -> bool:
    """A rank slowed in some iterations but not all (a persistent straggler
    is slow in every one)."""
    slow = [v > 0 for v in table[rank]]
    return any(slow) and not all(slow)
