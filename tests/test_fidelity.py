"""The engine-fidelity verdict on synthetic packet logs."""
from dataplane.fidelity import qp_fidelity

LINE = 1e9
HALF = 1 << 19          # BPF rate: half of line rate


def log(n, gap_scale, late_ns=1000):
    """n packets of 4,000 bytes at half line rate (64 us apart), the gaps
    stretched by gap_scale."""
    gap = 4000 * 8 / (LINE / 2) * 1e9 * gap_scale
    return [(int(i * gap), 4000, HALF, late_ns, 0) for i in range(n)]


def test_an_engine_that_keeps_the_pace_is_valid():
    f = qp_fidelity(1, log(2000, 1.0), LINE)
    assert f.valid and abs(f.rate_ratio_p50 - 1) < 1e-6 and f.good_windows == 1.0 and f.under_windows == 0.0


def test_an_engine_that_falls_behind_makes_the_run_invalid():
    f = qp_fidelity(1, log(2000, 1.25), LINE)         # 80% of the BPF rate
    assert not f.valid and f.rate_ratio_p50 < 0.81 and f.under_windows == 1.0


def test_lateness_percentiles_come_from_the_log():
    entries = [(i * 64_000, 4000, HALF, i, 0) for i in range(1000)]
    f = qp_fidelity(1, entries, LINE)
    assert f.lateness_p50_us == 0.4995 and f.packets == 1000


def test_time_a_pause_held_the_qp_is_the_networks_not_the_engines():
    """Every 50th packet waited 5 ms for a lossless pause: left out, the
    engine kept the pace; counted, it would have looked 60% slow."""
    entries = []
    t = 0
    for i in range(2000):
        held = 5_000_000 if i % 50 == 25 else 0
        t += held
        entries.append((t, 4000, HALF, 1000 + held, held))
        t += 64_000
    f = qp_fidelity(1, entries, LINE)
    assert f.valid and abs(f.rate_ratio_p50 - 1) < 1e-3 and f.lateness_p99_us == 1.0
    blind = qp_fidelity(1, [e[:4] + (0,) for e in entries], LINE)
    assert not blind.valid and blind.rate_ratio_p50 < 0.6
