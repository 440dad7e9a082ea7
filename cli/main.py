"""The `prc-emu` command line. Subcommands live in one registry."""
from __future__ import annotations

import argparse
import os
import sys


class _OneLineParser(argparse.ArgumentParser):
    """Bad usage: one line on stderr, exit 2 (argparse prints usage too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _doctor(args) -> int:
    from cli.doctor import main
    return main()


def _demo(args) -> int:
    from cli.demo import main
    return main(args.xdp_mode)


def _add_demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--xdp-mode", choices=("native", "generic"), default="native",
                   help="XDP attach mode on the receiving veth (default: native)")


def _testbed(args) -> int:
    from cli.testbed_cmd import run
    return run(args)


def _add_testbed_args(p: argparse.ArgumentParser) -> None:
    from cli.testbed_cmd import add_arguments
    add_arguments(p)


def _cc(args) -> int:
    if args.action == "doca-replay":
        from experiment.doca_replay import main as replay
        return replay(args.run)
    from dataplane.cc_trace import main
    return main(args.events, args.png, args.line_rate_gbps, args.param)


def _add_cc_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=type(p))
    tr = sub.add_parser("trace", help="rate and alpha after each event of a CSV, and a PNG")
    tr.add_argument("events", help="CSV: time_us,event[,bytes,weight,floor_gbps,cap_gbps]")
    tr.add_argument("--png", help="plot path (default: the CSV's name with .png)")
    tr.add_argument("--line-rate-gbps", type=float, default=100.0)
    tr.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a DCQCN parameter by its firmware name, e.g. rpg_threshold=5")
    dr = sub.add_parser("doca-replay", help="replay a run's recorded CC events through the DOCA PCC adapter "
                        "and compare bit for bit")
    dr.add_argument("run", help="a results folder of `prc-emu run SCENARIO --record-cc`")


def _run(args) -> int:
    if args.cc:                 # several policies: a comparison, one run per seed each
        if args.capture:
            print("prc-emu run: --capture goes with one run, not with --cc", file=sys.stderr)
            return 2
        from experiment.compare import main as compare
        return compare(args.scenario, args.results, args.state_dir, args.seeds, _policies(args.cc))
    if args.seeds is not None:
        print("prc-emu run: --seeds goes with --cc (one run per seed under each policy)", file=sys.stderr)
        return 2
    from experiment.run import main
    return main(args.scenario, args.results, args.state_dir, args.capture, args.capture_s, args.record_cc)


def _policies(text: str) -> list[str]:
    return [p for p in text.split(",") if p]


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file (docs/scenario.md)")
    p.add_argument("--results", default="results", help="results folder (default: ./results)")
    p.add_argument("--state-dir", help="testbed run records (default: $PRC_EMU_STATE_DIR or /run/prc-emu)")
    p.add_argument("--capture", action="append", default=[], metavar="NODE:PEER",
                   help="capture both directions on NODE's port to PEER (e.g. s0:h2) into the results "
                        "folder, from the end of traffic.settle_s on; repeatable")
    p.add_argument("--capture-s", type=float, default=0.5, help="seconds each capture lasts (default 0.5)")
    p.add_argument("--record-cc", action="store_true", help="record every CC event the RNICs apply into "
                   "the results folder, for `prc-emu cc doca-replay`")
    p.add_argument("--cc", metavar="POLICY,...", help="a job scenario under each of these policies (dcqcn, prc, "
                   "oracle, mltcp), interleaved per seed: the same as `compare SCENARIO --cc ... --runs N`")
    p.add_argument("--seeds", type=int, help="with --cc: how many seeds (runs per policy; default 2)")


def _compare(args) -> int:
    from experiment.compare import main
    policies = _policies(args.cc) if args.cc else None
    return main(args.plan, args.results, args.state_dir, args.runs, policies,
                args.step_us if args.sim else None)


def _add_compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="comparison plan TOML: a scenario and its variants (docs/scenario.md); "
                   "with --cc, a scenario")
    p.add_argument("--cc", metavar="POLICY,...", help="run the scenario under each of these policies "
                   "(dcqcn, prc, oracle, mltcp) instead of a plan's variants")
    p.add_argument("--runs", type=int, help="runs per variant (default: the plan's)")
    p.add_argument("--results", default="results", help="results folder (default: ./results)")
    p.add_argument("--state-dir", help="testbed run records (default: $PRC_EMU_STATE_DIR or /run/prc-emu)")
    p.add_argument("--sim", action="store_true", help="run the variants in the simulator instead of live")
    _add_step_arg(p)


def _add_step_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step-us", type=float, default=1.0,
                   help="the simulator's time step, datacenter us (default 1; docs/sim.md)")


def _sim(args) -> int:
    if args.cc:
        from experiment.compare import main as compare
        return compare(args.scenario, args.results, None, args.seeds, _policies(args.cc), args.step_us)
    if args.seeds is not None:
        print("prc-emu sim: --seeds goes with --cc (one run per seed under each policy)", file=sys.stderr)
        return 2
    from experiment.sim_run import main
    return main(args.scenario, args.results, args.step_us)


def _add_sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file with [[job]] tables (docs/scenario.md)")
    p.add_argument("--results", default="results", help="results folder (default: ./results)")
    p.add_argument("--cc", metavar="POLICY,...", help="under each of these policies (dcqcn, prc, oracle, "
                   "mltcp), interleaved per seed: the same as `compare SCENARIO --sim --cc ... --runs N`")
    p.add_argument("--seeds", type=int, help="with --cc: how many seeds (runs per policy; default 2)")
    _add_step_arg(p)


def _sweep(args) -> int:
    from experiment.sweep import main
    return main(args.sweep, args.results, args.seeds, args.scheduler, args.workers)


def _add_sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep", help="sweep TOML file: a scenario and a grid of its keys (docs/sim.md)")
    p.add_argument("--results", default="results", help="results folder (default: ./results)")
    p.add_argument("--seeds", type=int, help="runs per point (default: the file's)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                   "(default: a local cluster on this machine's cores)")
    p.add_argument("--workers", type=int, help="local cluster's worker processes (default: one per core)")


def _report(args) -> int:
    from experiment.report import main
    return main(args.results_folders, args.out)


def _add_report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results_folders", nargs="+", metavar="RESULTS",
                   help="folders `prc-emu compare` wrote (variants of one name are pooled across them)")
    p.add_argument("--out", default="results", help="where the report folder goes (default: ./results)")


def _top(args) -> int:
    from experiment.top import main
    return main(args.state_dir, args.interval, args.count)


def _add_top_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help="testbed run records (default: $PRC_EMU_STATE_DIR or /run/prc-emu)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between tables (default 1)")
    p.add_argument("--count", type=int, default=0, help="tables to print, 0 for until Ctrl-C")


def _record_nvml(args) -> int:
    from experiment.record_nvml import main
    return main(args.out, args.interval_ms, args.duration_s, args.gpu)


def _add_record_nvml_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="trace CSV to write (docs/control.md, \"Progress traces\")")
    p.add_argument("--interval-ms", type=float, default=100.0, help="between samples (default 100)")
    p.add_argument("--duration-s", type=float, default=10.0, help="how long to record (default 10)")
    p.add_argument("--gpu", metavar="I,...", help="GPU indices to sample (default: all)")


# name -> (help, handler, add-arguments)
COMMANDS = {
    "doctor": ("check that this machine can run the emulator", _doctor, None),
    "demo": ("send RoCEv2 messages across a veth and count them per QP in XDP", _demo, _add_demo_args),
    "testbed": ("build, inspect and remove namespace testbeds from scenario files", _testbed,
                _add_testbed_args),
    "cc": ("the congestion-control core on its own", _cc, _add_cc_args),
    "run": ("run a scenario's flows live and write results/<run-id>/", _run, _add_run_args),
    "compare": ("run a scenario's variants live, interleaved, with intervals over runs", _compare,
                _add_compare_args),
    "sim": ("run a job scenario in the fluid simulator (same plan, CC core, workload and policies)",
            _sim, _add_sim_args),
    "sweep": ("simulate every point of a grid of scenario keys x seeds on Dask, in one table with "
              "intervals", _sweep, _add_sweep_args),
    "report": ("a table and plots over comparisons' runs: iteration times, speedups, catch-up, "
               "background share, CNPs", _report, _add_report_args),
    "record-nvml": ("record GPU clocks, throttle reasons and per-process SM use into a progress trace",
                    _record_nvml, _add_record_nvml_args),
    "top": ("live per-QP rates of a running experiment", _top, _add_top_args),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="prc-emu", description="Programmable-RNIC emulator with PRC rate control")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_OneLineParser)
    for name, (help_text, handler, add_args) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        if add_args:
            add_args(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("prc-emu: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:             # `prc-emu report ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
