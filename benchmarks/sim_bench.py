"""The simulator's speed against scale: a cluster of 8-GPU servers (one
NIC each, tensor parallelism inside a server) on a leaf-spine fabric of
16 servers per leaf, running one 64-rank training job (tp 8 x pp 2 x dp
4) per 8 servers, all sharing the fabric, 3 iterations each, DCQCN. The
work per rank is the same at every size, so the cost should grow about
linearly with ranks (and QPs). Prints, per size: QPs, steps, CC events,
simulated ms, wall s, simulated seconds per wall second, CC events per
second and wall time per QP-step. Then examples/datacenter.toml (1,024
ranks, 10 iterations) under DCQCN and under PRC, against the target of
both in under 120 s on this machine's 2 cores."""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from scenario.spec import load_scenario, parse_scenario
from sim.run import run_sim

DATACENTER = Path(__file__).resolve().parent.parent / "examples" / "datacenter.toml"
TARGET_S = 120.0

RANKS = (64, 256, 1024, 4096)
JOB_RANKS = 64
SERVERS_PER_LEAF = 16


def scenario(ranks: int):
    servers = ranks // 8
    jobs = [{"name": f"j{i}", "hosts": [f"h{h}" for h in range(8 * i, 8 * i + 8)], "ranks_per_host": 8,
             "tp": 8, "pp": 2, "dp": 4, "microbatches": 4, "iterations": 3, "seed": i + 1,
             "model": {"forward_us": 20, "backward_us": 40, "activation_bytes": 1_000_000,
                       "gradient_bytes": 8_000_000, "chunk_bytes": 8_000_000},
             "straggler": [{"rank": 9, "iterations": [1], "slowdown": 1.0}]}
            for i in range(ranks // JOB_RANKS)]
    return parse_scenario({
        "topology": {"kind": "leaf-spine", "hosts": servers, "leaves": max(1, servers // SERVERS_PER_LEAF),
                     "spines": 4, "oversubscription": 2.0},
        "links": {"rate_gbps": 400, "buffer_bytes": 2_000_000},
        "emulation": {"dilation": 1}, "ecn": {"kmax_bytes": 400_000, "pmax": 0.05},
        "job": jobs}, live=False)


def main(sizes=RANKS) -> None:
    print(f"{'ranks':>6} {'QPs':>6} {'steps':>7} {'CC events':>11} {'sim ms':>7} {'wall s':>7} "
          f"{'sim s/wall s':>12} {'CC ev/s':>10} {'us/QP-step':>10}")
    for ranks in sizes:
        sc = scenario(ranks)
        started = time.perf_counter()
        result = run_sim(sc)
        wall = time.perf_counter() - started
        s = result.simulator
        print(f"{ranks:>6} {s['qps']:>6} {s['steps']:>7} {s['cc_events']:>11,} {s['simulated_s'] * 1e3:>7.2f} "
              f"{wall:>7.1f} {s['simulated_s'] / wall:>12.2e} {s['cc_events'] / wall:>10,.0f} "
              f"{wall * 1e6 / (s['steps'] * s['qps']):>10.3f}", flush=True)


def datacenter() -> None:
    sc = load_scenario(DATACENTER, live=False)
    walls = {}
    for policy in ("dcqcn", "prc"):
        started = time.perf_counter()
        result = run_sim(dataclasses.replace(sc, control=dataclasses.replace(sc.control, policy=policy)))
        walls[policy] = time.perf_counter() - started
        assert result.finished
    total = sum(walls.values())
    print(f"{DATACENTER.name}: {sum(j.ranks for j in sc.jobs)} ranks, {sc.jobs[0].iterations} iterations: "
          + ", ".join(f"{p} {w:.1f} s" for p, w in walls.items())
          + f"; both {total:.1f} s (target < {TARGET_S:.0f} s: {'met' if total < TARGET_S else 'MISSED'})")


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or RANKS)
    if len(sys.argv) == 1:
        datacenter()
