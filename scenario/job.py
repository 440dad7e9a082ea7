"""[[job]] tables: the jobs whose traffic a run carries, in datacenter
units (times in microseconds, scaled by the dilation live; bytes as they
are). Pure data, validated here with one line naming the key; the schema
is documented in docs/scenario.md.

A `training` job is a hybrid-parallel job: TP x PP x DP ranks placed on
hosts, a 1F1B pipeline of M microbatches, then a ring all-reduce of the
gradients within each data-parallel group. An `onoff` job is a
background job whose collective bursts come and go, one every period
(from start_us on). A `bulk` job sends
without pause (an always-on background)."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from scenario.errors import ScenarioError, check_table, fail as _fail, integer as _int, number as _num
from scenario.trace import Timeline, read_trace, timelines

JOB_KINDS = ("training", "onoff", "bulk")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall")
QP_STATES = ("persistent", "fresh")
JOB_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,15}$")
MAX_RANKS = 256               # live: the NIC's per-process hook table
MAX_ITERATIONS = 100_000


@dataclass(frozen=True)
class ModelProfile:
    """What one rank computes and moves, in datacenter units."""

    forward_us: float = 0.0         # compute per microbatch, forward
    backward_us: float = 0.0        # ... and backward
    activation_bytes: int = 0       # sent to the next stage per microbatch (gradients back: the same)
    gradient_bytes: int = 0         # all-reduced over the data-parallel group per iteration
    tp_bytes: int = 0               # all-reduced over the TP group after each F and B (0: none)
    chunk_bytes: int = 1 << 20      # collectives post messages of at most this size


@dataclass(frozen=True)
class Straggler:
    """A scripted straggler: rank's compute takes (1 + slowdown) times as
    long in the listed iterations (all of them: a persistent one)."""

    rank: int
    iterations: tuple[int, ...] | None     # None: every iteration
    slowdown: float

    @property
    def persistent(self) -> bool:
        return self.iterations is None


@dataclass(frozen=True)
class StochasticStragglers:
    """Each rank starts an episode with this probability per iteration; an
    episode lasts a uniform number of iterations in `duration` and slows
    compute by a uniform factor in `slowdown`; drawn once from the job's
    seed, so every policy sees the same ones."""

    probability: float
    duration: tuple[int, int]
    slowdown: tuple[float, float]


@dataclass(frozen=True)
class TraceSpec:
    """[job.trace]: a progress trace replayed as the ranks' compute speed
    (and shown to the controller): rank r is trace process processes[r];
    trace time t is (t - start_s) x time_scale datacenter seconds after
    the workload's start."""

    file: str
    processes: tuple[str, ...]
    start_s: float = 0.0
    time_scale: float = 1.0
    # rank -> its timeline (None: not in the trace, speed 1); from the file, not written back
    ranks: tuple[Timeline | None, ...] = field(default=(), compare=False, repr=False,
                                               metadata={"derived": True})


@dataclass(frozen=True)
class JobSpec:
    name: str
    kind: str                       # training | onoff | bulk
    hosts: tuple[str, ...]          # rank r runs on hosts[r // ranks_per_host]
    ranks_per_host: int
    tp: int
    pp: int
    dp: int
    microbatches: int
    iterations: int                 # training: how many; background: ignored (runs while others do)
    warmup_iterations: int          # left out of the statistics
    seed: int
    qp_state: str                   # persistent | fresh (DCQCN state per message)
    model: ModelProfile
    stragglers: tuple[Straggler, ...] = ()
    stochastic: StochasticStragglers | None = None
    collective: str = "allreduce"   # onoff: the burst's collective
    burst_bytes: int = 0            # onoff: the collective's buffer
    period_us: float = 0.0          # onoff: a burst every period
    start_us: float = 0.0           # first iteration or burst (start_jitter_us's draw included)
    start_jitter_us: float = 0.0    # start_us was moved on by a uniform draw in [0, this) from the seed
    trace: TraceSpec | None = None  # training: compute speed replayed from a progress trace

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    def host_of(self, rank: int) -> str:
        return self.hosts[rank // self.ranks_per_host]

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(tp, dp, pp) index of a rank: TP varies fastest, then DP, then
        PP (Megatron's order), so a TP group shares a host when it fits."""
        return rank % self.tp, rank // self.tp % self.dp, rank // (self.tp * self.dp)

    def rank_at(self, tp: int, dp: int, pp: int) -> int:
        return tp + self.tp * (dp + self.dp * pp)

    @property
    def foreground(self) -> bool:
        """A run ends when every foreground (training) job has finished."""
        return self.kind == "training"


_KEYS = {
    "training": {"name", "kind", "hosts", "ranks_per_host", "tp", "pp", "dp", "microbatches", "iterations",
                 "warmup_iterations", "seed", "qp_state", "model", "straggler", "stragglers", "start_us",
                 "start_jitter_us", "trace"},
    "onoff": {"name", "kind", "hosts", "ranks_per_host", "seed", "qp_state", "collective", "burst_bytes",
              "period_us", "start_us", "start_jitter_us", "model"},
    "bulk": {"name", "kind", "hosts", "ranks_per_host", "seed", "qp_state", "start_us", "start_jitter_us",
             "model"},
}
_MODEL_KEYS = ("forward_us", "backward_us", "activation_bytes", "gradient_bytes", "tp_bytes", "chunk_bytes")


def _range(key: str, value, kind, low) -> tuple:
    if (not isinstance(value, list) or len(value) != 2 or any(isinstance(v, bool) for v in value)
            or not all(isinstance(v, kind) for v in value)):
        _fail(key, f"expected [low, high], got {value!r}")
    if not low <= value[0] <= value[1]:
        _fail(key, f"need {low} <= low <= high, got {value!r}")
    return tuple(value)


def _model(key: str, table) -> ModelProfile:
    check_table(key, table, _MODEL_KEYS)
    times = {k: _num(f"{key}.{k}", table.get(k, 0.0)) for k in ("forward_us", "backward_us")}
    sizes = {k: _int(f"{key}.{k}", table.get(k, getattr(ModelProfile, k))) for k in _MODEL_KEYS[2:]}
    if sizes["chunk_bytes"] < 1:
        _fail(f"{key}.chunk_bytes", f"must be >= 1, got {sizes['chunk_bytes']}")
    return ModelProfile(**times, **sizes)


def _stragglers(key: str, entries, ranks: int, iterations: int) -> tuple[Straggler, ...]:
    if not isinstance(entries, list):
        _fail(key, "must be an array of tables ([[job.straggler]])")
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        check_table(where, entry, ("rank", "iterations", "slowdown"))
        for k in ("rank", "slowdown"):
            if k not in entry:
                _fail(f"{where}.{k}", "required")
        rank = _int(f"{where}.rank", entry["rank"])
        if rank >= ranks:
            _fail(f"{where}.rank", f"the job has ranks 0..{ranks - 1}, got {rank}")
        its = entry.get("iterations", "all")
        if its == "all":
            its = None
        else:
            if not isinstance(its, list) or not its:
                _fail(f"{where}.iterations", f"expected a list of iteration indices or \"all\", got {its!r}")
            its = tuple(_int(f"{where}.iterations", n, 0, iterations - 1) for n in its)
        out.append(Straggler(rank, its, _num(f"{where}.slowdown", entry["slowdown"])))
    return tuple(out)


def _stochastic(key: str, table) -> StochasticStragglers:
    check_table(key, table, ("probability", "duration", "slowdown"))
    p = _num(f"{key}.probability", table.get("probability", 0.0), 0.0, 1.0)
    return StochasticStragglers(p, _range(f"{key}.duration", table.get("duration", [1, 1]), int, 1),
                                _range(f"{key}.slowdown", table.get("slowdown", [0.5, 0.5]), (int, float), 0))


def _trace(key: str, table, ranks: int) -> TraceSpec:
    check_table(key, table, ("file", "processes", "start_s", "time_scale"), "a table ([job.trace])")
    if not isinstance(table.get("file"), str):
        _fail(f"{key}.file", "the trace file is required (a path relative to the scenario)")
    processes = table.get("processes", [str(r) for r in range(ranks)])
    if (not isinstance(processes, list) or len(processes) != ranks
            or not all(isinstance(p, str) and p for p in processes)):
        _fail(f"{key}.processes", f"must list one trace process name per rank ({ranks}), got {processes!r}")
    if len(set(processes)) != ranks:
        _fail(f"{key}.processes", "a process is listed twice")
    start = _num(f"{key}.start_s", table.get("start_s", 0.0))
    scale = _num(f"{key}.time_scale", table.get("time_scale", 1.0), 1e-6, 1e6)
    try:
        lines = timelines(read_trace(table["file"], processes), start, scale)
    except ScenarioError as exc:
        _fail(f"{key}.file", str(exc))
    return TraceSpec(table["file"], tuple(processes), start, scale, tuple(lines.get(p) for p in processes))


def _hosts(key: str, value, hosts: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return hosts
    if not isinstance(value, list) or not value:
        _fail(key, "must be a non-empty list of host names")
    for name in value:
        if name not in hosts:
            _fail(key, f"unknown host {name!r} (hosts: {', '.join(hosts)})")
    if len(set(value)) != len(value):
        _fail(key, "a host is listed twice")
    return tuple(value)


def _job(i: int, table, hosts: tuple[str, ...]) -> JobSpec:
    where = f"job[{i}]"
    if not isinstance(table, dict):
        _fail(where, "must be a table ([[job]])")
    kind = table.get("kind", "training")
    if kind not in JOB_KINDS:
        _fail(f"{where}.kind", f"must be one of {', '.join(JOB_KINDS)}, got {kind!r}")
    for k in table:
        if k not in _KEYS[kind]:
            _fail(f"{where}.{k}", f"unknown key for a {kind} job (known: {', '.join(sorted(_KEYS[kind]))})")
    name = table.get("name", f"job{i}")
    if not isinstance(name, str) or not JOB_NAME.match(name):
        _fail(f"{where}.name", f"{name!r} must be 1-16 of [a-z0-9_-], starting with a letter")
    placed = _hosts(f"{where}.hosts", table.get("hosts"), hosts)
    per_host = _int(f"{where}.ranks_per_host", table.get("ranks_per_host", 1), 1, 64)
    slots = len(placed) * per_host
    if kind == "training":
        tp = _int(f"{where}.tp", table.get("tp", 1), 1)
        pp = _int(f"{where}.pp", table.get("pp", 1), 1)
        dp = _int(f"{where}.dp", table.get("dp", max(1, slots // (tp * pp))), 1)
        if tp * pp * dp != slots:
            _fail(f"{where}.dp", f"tp x pp x dp = {tp} x {pp} x {dp} = {tp * pp * dp} ranks, but "
                  f"{len(placed)} hosts x {per_host} ranks_per_host place {slots}")
    else:
        tp, pp, dp = 1, 1, slots
    if slots < 2:
        _fail(f"{where}.hosts", "a job needs at least 2 ranks")
    iterations = _int(f"{where}.iterations", table.get("iterations", 10), 1, MAX_ITERATIONS)
    warmup = _int(f"{where}.warmup_iterations", table.get("warmup_iterations", 1), 0)
    if warmup >= iterations:
        _fail(f"{where}.warmup_iterations", f"must be below iterations ({iterations}), got {warmup}")
    qp_state = table.get("qp_state", "persistent")
    if qp_state not in QP_STATES:
        _fail(f"{where}.qp_state", f"must be one of {', '.join(QP_STATES)}, got {qp_state!r}")
    model = _model(f"{where}.model", table.get("model", {}))
    microbatches = _int(f"{where}.microbatches", table.get("microbatches", 1), 1, 1024)
    seed = _int(f"{where}.seed", table.get("seed", 1))
    jitter = _num(f"{where}.start_jitter_us", table.get("start_jitter_us", 0.0))
    job = dict(name=name, kind=kind, hosts=placed, ranks_per_host=per_host, tp=tp, pp=pp, dp=dp,
               microbatches=microbatches, iterations=iterations, warmup_iterations=warmup,
               seed=seed, qp_state=qp_state, model=model, start_jitter_us=jitter,
               start_us=_num(f"{where}.start_us", table.get("start_us", 0.0)) + start_draw(name, seed, jitter))
    if kind == "training":
        if model.forward_us + model.backward_us <= 0:
            _fail(f"{where}.model.forward_us", "a training job needs compute (forward_us + backward_us > 0)")
        if dp > 1 and model.gradient_bytes % dp:
            _fail(f"{where}.model.gradient_bytes", f"{model.gradient_bytes} does not divide by dp = {dp}")
        if tp > 1 and model.tp_bytes % tp:
            _fail(f"{where}.model.tp_bytes", f"{model.tp_bytes} does not divide by tp = {tp}")
        if pp > 1 and model.activation_bytes <= 0:
            _fail(f"{where}.model.activation_bytes", "a pipeline (pp > 1) sends activations: must be > 0")
        job["stragglers"] = _stragglers(f"{where}.straggler", table.get("straggler", []), slots, iterations)
        if "stragglers" in table:
            job["stochastic"] = _stochastic(f"{where}.stragglers", table["stragglers"])
        if "trace" in table:
            job["trace"] = _trace(f"{where}.trace", table["trace"], slots)
    elif kind == "onoff":
        collective = table.get("collective", "allreduce")
        if collective not in COLLECTIVES:
            _fail(f"{where}.collective", f"must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
        burst = _int(f"{where}.burst_bytes", table.get("burst_bytes", 0), 1)
        if burst % slots:
            _fail(f"{where}.burst_bytes", f"{burst} does not divide by the job's {slots} ranks")
        period = _num(f"{where}.period_us", table.get("period_us", 0.0))
        if period <= 0:
            _fail(f"{where}.period_us", "an on-off job needs a period (> 0)")
        job.update(collective=collective, burst_bytes=burst, period_us=period)
    return JobSpec(**job)


def start_draw(name: str, seed: int, jitter_us: float) -> float:
    """How far a job's start moves at this seed: uniform in [0, jitter_us),
    rounded to 0.1 us, from a stream of its own (the name keeps two jobs
    with the same seed apart; a str seed hashes the same in every process).
    Run r of a comparison adds r to every seed, so its runs meet the other
    jobs at different phases, and every policy at the same ones."""
    if jitter_us <= 0:
        return 0.0
    return round(random.Random(f"start:{name}:{seed}").uniform(0, jitter_us), 1)


def parse_jobs(entries, hosts: tuple[str, ...]) -> tuple[JobSpec, ...]:
    """The [[job]] array: every job checked, names unique, at least one
    training job if any job is given."""
    if not isinstance(entries, list):
        _fail("job", "must be an array of tables ([[job]])")
    jobs = tuple(_job(i, table, hosts) for i, table in enumerate(entries))
    names = [j.name for j in jobs]
    for i, job in enumerate(jobs):
        if names.index(job.name) != i:
            _fail(f"job[{i}].name", f"duplicate job name {job.name!r}")
    if jobs and not any(j.foreground for j in jobs):
        _fail("job", "needs at least one training job (background jobs run while training runs)")
    return jobs


def check_live_jobs(jobs) -> None:
    """What only a live run limits: ranks, one NIC process each, in the
    NIC's per-process hook table."""
    for i, job in enumerate(jobs):
        if job.ranks > MAX_RANKS:
            _fail(f"job[{i}].hosts", f"at most {MAX_RANKS} ranks live, got {job.ranks} (the simulator has no such limit)")
    if sum(j.ranks for j in jobs) > MAX_RANKS:
        _fail("job", f"at most {MAX_RANKS} ranks over all jobs live (one NIC process each; the simulator has "
              "no such limit)")
