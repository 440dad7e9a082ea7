"""The CC core: its BPF and host builds agree bit for bit, and both follow
an independent floating-point model of the specification; canonical DCQCN
behaviour; the PRC hook."""
import ctypes
import random

import pytest

from cc_sequences import random_config, random_sequence
from dataplane.cc import (ALPHA_ONE, EV_ADVANCE, EV_CNP, EV_TX, RATE_ONE, Event, Hook, HostCC, Params, State,
                          core_params, event, hook)
from dataplane.layout import ctypes_fields
from scenario.dcqcn import DcqcnConfig, ParamError
from dataplane.cc_model import DcqcnModel

RATE_TOL = 0.01      # of line rate
ALPHA_TOL = 0.01
SEQUENCES = 10_000


@pytest.fixture(scope="module")
def host():
    return HostCC()


@pytest.fixture(scope="module")
def bpf_cc():
    from dataplane.cc import BpfCC
    cc = BpfCC()
    yield cc
    cc.close()


def test_state_fits_a_doca_pcc_flow_context_and_mirrors_agree(host):
    assert ctypes.sizeof(State) == 48 == host.lib.cc_state_size()
    assert ctypes.sizeof(Params) == host.lib.cc_params_size()
    assert ctypes.sizeof(Event) == host.lib.cc_event_size()


@pytest.mark.bcc
@pytest.mark.root
def test_bpf_maps_have_the_mirrored_sizes(bpf_cc):
    assert ctypes_fields(bpf_cc.bpf["cc_state"].Leaf) == ctypes_fields(State)
    assert ctypes_fields(bpf_cc.bpf["cc_params"].Leaf) == ctypes_fields(Params)


@pytest.mark.bcc
@pytest.mark.root
def test_bpf_and_host_builds_are_bit_exact_and_follow_the_float_model(host, bpf_cc):
    rng = random.Random(20261205)
    events = worst_rate = worst_alpha = 0.0
    for seq in range(SEQUENCES):
        params = core_params(random_config(rng))
        seq_events = random_sequence(rng, params, rng.randint(1, 30))
        from_host = host.run(params, seq_events)
        from_bpf = bpf_cc.run(params, seq_events)
        model = DcqcnModel(params, exact_steps=0)
        for i, (ev, h, b) in enumerate(zip(seq_events, from_host, from_bpf)):
            assert h.key() == b.key(), f"sequence {seq} event {i}: host and BPF differ"
            m = model.apply(ev)
            assert (h.t_count, h.bc_count) == (m.t, m.bc), f"sequence {seq} event {i}: stage counters"
            d_rate = max(abs(h.rc / RATE_ONE - m.rc), abs(h.rt / RATE_ONE - m.rt))
            d_alpha = abs(h.alpha / ALPHA_ONE - m.alpha)
            assert d_rate <= RATE_TOL and d_alpha <= ALPHA_TOL, \
                f"sequence {seq} event {i}: rate off by {d_rate:.4f}, alpha by {d_alpha:.4f}"
            worst_rate, worst_alpha = max(worst_rate, d_rate), max(worst_alpha, d_alpha)
        events += len(seq_events)
    assert events >= 10 * SEQUENCES
    print(f"\n{SEQUENCES} sequences, {events:.0f} events: worst rate error {worst_rate:.2e} "
          f"of line rate, worst alpha error {worst_alpha:.2e}")


def test_model_summing_equals_model_stepping():
    """The model's closed form for long silences against its own one-by-one
    simulation of the same steps."""
    rng = random.Random(7)
    for _ in range(300):
        params = core_params(random_config(rng))
        seq = [Event(kind=EV_CNP, now_ns=1000 + i * 1000) for i in range(rng.randint(1, 4))]
        seq.append(Event(kind=EV_ADVANCE, now_ns=seq[-1].now_ns + params.rpg_time_reset_ns
                         * rng.randint(100, 20_000) + rng.randint(0, params.rpg_time_reset_ns)))
        summed, stepped = DcqcnModel(params, exact_steps=0), DcqcnModel(params, exact_steps=10**9)
        for ev in seq:
            a, b = summed.apply(ev), stepped.apply(ev)
            assert a.rc == pytest.approx(b.rc, abs=1e-9) and a.rt == pytest.approx(b.rt, abs=1e-9)


# -- canonical DCQCN (docs/cc.md) -------------------------------------

def _paper(**over) -> Params:
    """Byte counter off (the ns-3 convention), F = 5, a clear timer."""
    values = dict(rpg_byte_reset=0, rpg_threshold=5, rpg_time_reset_us=55, dce_tcp_rtt_us=55,
                  rate_reduce_monitor_period_us=4, rpg_ai_rate_mbps=40, rpg_hai_rate_mbps=100)
    values.update(over)
    return core_params(DcqcnConfig(**values))


def test_a_single_cnp_cuts_by_half_of_alpha_starting_at_1023_over_1024(host):
    (st,) = host.run(core_params(DcqcnConfig()), [event(EV_CNP, 10_000)])
    assert st.rc == RATE_ONE - (RATE_ONE * 1023 // 2048)
    assert st.rt == RATE_ONE
    assert st.alpha == 1023 * ALPHA_ONE // 1024


def test_alpha_update_uses_g_over_1024_per_period(host):
    p = _paper(dce_tcp_g=1019)
    period = p.dce_tcp_rtt_ns
    trace = host.run(p, [event(EV_CNP, 0), event(EV_ADVANCE, period), event(EV_ADVANCE, 2 * period)])
    a0 = 1023 / 1024
    a1 = 1019 / 1024 * a0 + 5 / 1024          # the period held a CNP
    a2 = 1019 / 1024 * a1                     # this one did not
    assert trace[1].alpha / ALPHA_ONE == pytest.approx(a1, abs=2e-6)
    assert trace[2].alpha / ALPHA_ONE == pytest.approx(a2, abs=2e-6)


def test_repeated_cnps_raise_alpha_and_drive_the_rate_down_to_min_rate(host):
    p = _paper(dce_tcp_g=1020, initial_alpha_value=100, rpg_min_rate_mbps=1000)
    period = p.dce_tcp_rtt_ns
    trace = host.run(p, [event(EV_CNP, i * period + 1) for i in range(200)])
    alphas = [s.alpha for s in trace]
    assert all(b > a for a, b in zip(alphas[1:20], alphas[2:21]))
    assert all(s.rc >= p.rpg_min_rate for s in trace)
    assert trace[-1].rc == p.rpg_min_rate


def test_firmware_alpha_needs_cnps_every_few_us_to_cut_more_than_a_percent(host):
    """With the firmware's RP defaults (alpha sampled every 1 us with a
    gain of 5/1024), CNPs at the DCQCN paper's NP interval of 50 us keep
    alpha near 0.02, so a cut (alpha / 2) takes about 1% of the rate. At
    the firmware's own 4 us, alpha settles near 0.25: cuts of ~12%
    (examples/training-fabric.toml)."""
    p = core_params(DcqcnConfig())

    def settled_alpha(interval_us):
        trace = host.run(p, [event(EV_CNP, int(i * interval_us * 1000)) for i in range(int(4000 / interval_us))])
        return trace[-1].alpha / ALPHA_ONE

    assert 0.015 < settled_alpha(50) < 0.03
    assert 0.2 < settled_alpha(4) < 0.3


def test_cnps_within_the_monitor_period_cut_once(host):
    p = _paper(rate_reduce_monitor_period_us=50)
    trace = host.run(p, [event(EV_CNP, 0), event(EV_CNP, 10_000), event(EV_CNP, 49_999),
                         event(EV_CNP, 50_000)])
    assert trace[0].rc == trace[1].rc == trace[2].rc > trace[3].rc


def test_recovery_is_fast_then_additive_then_hyper_with_the_spec_stage_counts(host):
    p = _paper()
    t0, period = 20_000, p.rpg_time_reset_ns
    cuts = [event(EV_CNP, t) for t in (0, 10_000, t0)]    # the target is now far below line rate
    trace = host.run(p, cuts + [event(EV_ADVANCE, t0 + i * period) for i in range(1, 12)])[2:]
    steps = [(b.rt - a.rt, b.t_count) for a, b in zip(trace, trace[1:])]
    ai, hai = p.rpg_ai_rate, p.rpg_hai_rate
    # T = 1..4 < F: fast recovery (target unchanged); T = F: additive; T > F: hyper, i = T - F.
    assert steps == [(0, 1), (0, 2), (0, 3), (0, 4), (ai, 5)] + [(i * hai, 5 + i) for i in range(1, 7)]
    for a, b in zip(trace, trace[1:]):
        assert b.rc == (b.rt + a.rc) // 2    # every stage then halves the gap to the target


def test_with_the_byte_counter_hyper_needs_both_counters_past_f(host):
    p = _paper(rpg_byte_reset=64 * 1024, rpg_threshold=2, rpg_time_reset_us=1000)
    t0, period = 20_000, p.rpg_time_reset_ns
    evs = [event(EV_CNP, t) for t in (0, 10_000, t0)]
    evs += [event(EV_TX, t0 + 10 + i, 64 * 1024) for i in range(4)]     # BC = 1..4, T = 0
    evs += [event(EV_ADVANCE, t0 + i * period) for i in (1, 2, 3)]      # T = 1..3
    trace = host.run(p, evs)[2:]
    d = [(b.rt - a.rt, b.t_count, b.bc_count) for a, b in zip(trace, trace[1:])]
    ai, hai = p.rpg_ai_rate, p.rpg_hai_rate
    assert d[0] == (0, 0, 1)                  # max(T, BC) < F: fast recovery
    assert d[1:4] == [(ai, 0, 2), (ai, 0, 3), (ai, 0, 4)]     # BC >= F but T < F: additive
    assert d[4] == (ai, 1, 4)
    assert d[5] == (hai, 2, 4)                # min(T, BC) = 2 >= F: hyper, i = 1
    assert d[6] == (2 * hai, 3, 4)            # i = min(T, BC) - F + 1 = 2



def test_one_send_crossing_many_byte_thresholds_equals_the_same_bytes_in_pieces(host):
    """Every threshold the bytes cross is a BC event, whether one call or
    many carry them (the old core applied at most 4 per call and dropped the
    rest). 4154-byte frames with rpg_byte_reset 1024 and a 200 KB send are
    the cases that were off; random splits and parameters besides."""
    rng = random.Random(11)
    cases = [(_paper(rpg_byte_reset=1024, rpg_threshold=1), [4154] * 40),
             (_paper(rpg_byte_reset=1024, rpg_threshold=5), [200_000] * 3)]
    for _ in range(200):
        config = random_config(rng)
        params = core_params(DcqcnConfig(**{**vars(config), "rpg_byte_reset": rng.randint(1024, 1 << 20)}))
        cases.append((params, [rng.randint(0, 50 * params.rpg_byte_reset) for _ in range(rng.randint(1, 8))]))
    for params, sends in cases:
        start = [event(EV_CNP, 1_000), event(EV_CNP, 1_000 + max(params.rate_reduce_monitor_period_ns, 1))]
        now = start[-1].now_ns + 1
        whole = host.run(params, start + [event(EV_TX, now, sum(sends))])[-1]
        pieces = [event(EV_TX, now, part) for n in sends for part in _split(rng, n, params.rpg_byte_reset)]
        split = host.run(params, start + pieces)[-1]
        assert whole.key() == split.key()
        assert whole.bc_count == min(sum(sends) // params.rpg_byte_reset, 0xFFFF)


def _split(rng, n: int, unit: int) -> list[int]:
    """n bytes as sends of at most one unit each (one BC event at most)."""
    parts = []
    while n > 0:
        parts.append(min(n, rng.randint(1, unit)))
        n -= parts[-1]
    return parts


def test_a_64_step_hyper_ramp_short_of_the_ceiling_stays_short(host):
    """With the byte counter on the ramp from F runs 64 steps (i = 1..64);
    a search over 63 took the 64th for one that reaches line rate."""
    p = _paper(rpg_byte_reset=1024, rpg_threshold=1, rpg_ai_rate_mbps=0, rpg_hai_rate_mbps=0,
               rpg_time_reset_us=1000)
    t0 = 20_000
    evs = [event(EV_CNP, 0), event(EV_CNP, 10_000), event(EV_TX, t0, 100 * 1024)]   # BC = 100
    evs.append(event(EV_ADVANCE, t0 + 70 * p.rpg_time_reset_ns))                        # T = 70
    *_, cut, after = host.run(p, evs)
    assert after.t_count == 70 and after.bc_count == 100
    assert after.rt == cut.rt < RATE_ONE           # no increment: Rt stays where the cut left it

# -- the PRC hook ---------------------------------------------------------------

def _recovery(host, params, weight, steps=12):
    p = params
    evs = [event(EV_CNP, i * 5_000) for i in range(3)]
    evs += [event(EV_ADVANCE, 20_000 + i * p.rpg_time_reset_ns, hk=hook(weight)) for i in range(1, steps)]
    return [s.rc for s in host.run(p, evs)]


def test_weight_above_one_recovers_faster_and_below_one_slower(host):
    p = _paper()
    slow, base, fast = (_recovery(host, p, w) for w in (0.5, 1.0, 2.0))
    assert slow[:3] == base[:3] == fast[:3]           # same state before the weights differ
    assert all(f >= b >= s for s, b, f in zip(slow, base, fast))
    assert fast[-1] > base[-1] > slow[-1]


def test_weight_above_one_tempers_the_cut(host):
    p = _paper()
    cuts = [host.run(p, [event(EV_CNP, 0, hk=hook(w))])[0].rc for w in (0.5, 1.0, 2.0, 4.0)]
    assert cuts == sorted(cuts) and len(set(cuts)) == 4


def test_weight_one_is_exactly_dcqcn(host):
    rng = random.Random(3)
    for _ in range(300):
        params = core_params(random_config(rng))
        seq = random_sequence(rng, params, 20)
        plain = [Event(kind=e.kind, bytes=e.bytes, now_ns=e.now_ns, hook=Hook()) for e in seq]
        weight_one = [Event(kind=e.kind, bytes=e.bytes, now_ns=e.now_ns, hook=Hook(weight=1024))
                      for e in seq]
        assert [s.key() for s in host.run(params, plain)] == [s.key() for s in host.run(params, weight_one)]


def test_the_floor_is_never_undercut_and_the_cap_never_exceeded(host):
    rng = random.Random(11)
    for _ in range(500):
        params = core_params(random_config(rng))
        floor, cap = rng.randint(1, RATE_ONE), rng.randint(1, RATE_ONE)
        hk = Hook(weight=rng.randint(1, 8192), rate_floor=floor, rate_cap=cap)
        seq = [Event(kind=e.kind, bytes=e.bytes, now_ns=e.now_ns, hook=hk)
               for e in random_sequence(rng, params, 25)]
        for st in host.run(params, seq):
            assert min(floor, cap) <= st.rc <= cap and st.rt <= cap


@pytest.mark.parametrize("field,value", [("rpg_threshold", 0), ("rpg_gd", 9), ("dce_tcp_g", 1025),
                                         ("rpg_byte_reset", 100), ("w_max", 0.5), ("line_rate_gbps", 0)])
def test_out_of_range_parameters_are_refused_by_name(field, value):
    with pytest.raises(ParamError, match=field):
        core_params(DcqcnConfig(**{field: value}))


def test_looking_at_the_rate_between_events_does_not_change_it(host):
    """Timers apply lazily: an extra timer-only event in a silence (under
    the hook the next event brings, which the whole silence runs under) must
    give the same counters, and rates to within alpha's rounding, which
    differs between one batch of alpha periods and two. (A floor or cap is
    applied at events, so looking can move it: weights only here.)"""
    rng = random.Random(5)
    for _ in range(500):
        params = core_params(random_config(rng))
        seq = [Event(kind=e.kind, bytes=e.bytes, now_ns=e.now_ns, hook=Hook(weight=e.hook.weight))
               for e in random_sequence(rng, params, 15)]
        looked = []
        for prev, ev in zip([None] + seq[:-1], seq):
            if prev is not None and ev.now_ns > prev.now_ns + 1:
                t = rng.randint(prev.now_ns + 1, ev.now_ns - 1)
                looked.append(Event(kind=EV_ADVANCE, now_ns=t, hook=ev.hook))
            looked.append(ev)
        plain = host.run(params, seq)
        extra = [s for s, e in zip(host.run(params, looked), looked) if any(e is x for x in seq)]
        for a, b in zip(plain, extra):
            assert (a.t_count, a.bc_count, a.byte_acc) == (b.t_count, b.bc_count, b.byte_acc)
            assert abs(a.rc - b.rc) <= 16 and abs(a.rt - b.rt) <= 16       # 16 of 2^20
            assert abs(a.alpha - b.alpha) <= 64


def test_the_indexed_batch_entry_equals_running_each_qp_on_its_own(host):
    """Random sequences of 32 QPs interleaved at random into one array:
    cc_apply_indexed leaves every QP where its own sequence alone does."""
    import numpy as np

    from dataplane.cc import EVENT_DTYPE, STATE_DTYPE

    rng = random.Random(24)
    params = core_params(random_config(rng))
    sequences = [random_sequence(rng, params, rng.randint(0, 60)) for _ in range(32)]
    order = [q for q, seq in enumerate(sequences) for _ in seq]
    rng.shuffle(order)                          # each QP's events keep their order, QPs interleave
    cursor = [0] * len(sequences)
    merged = []
    for q in order:
        merged.append(sequences[q][cursor[q]])
        cursor[q] += 1
    events = np.frombuffer(b"".join(bytes(e) for e in merged), dtype=EVENT_DTYPE).copy()
    states = np.zeros(len(sequences), dtype=STATE_DTYPE)
    host.apply_indexed(params, states, events, order)
    assert len({s.tobytes() for s in states}) > 16          # the QPs went apart
    for q, seq in enumerate(sequences):
        alone = host.run(params, seq)[-1] if seq else State()
        assert State.from_buffer_copy(states[q].tobytes()).key() == alone.key(), q


def test_the_indexed_batch_entry_rejects_what_it_cannot_apply(host):
    import numpy as np

    from dataplane.cc import EVENT_DTYPE, STATE_DTYPE

    params, states, events = core_params(DcqcnConfig()), np.zeros(4, STATE_DTYPE), np.zeros(3, EVENT_DTYPE)
    with pytest.raises(IndexError, match="QP index 4 beyond the 4 states"):
        host.apply_indexed(params, states, events, [0, 1, 4])
    with pytest.raises(ValueError, match="3 events but 2 QP indices"):
        host.apply_indexed(params, states, events, [0, 1])
    with pytest.raises(ValueError, match="C-contiguous"):
        host.apply_indexed(params, np.zeros(8, STATE_DTYPE)[::2], events, [0, 1, 2])
    with pytest.raises(TypeError):
        host.apply_indexed(params, np.zeros(4), events, [0, 1, 2])
