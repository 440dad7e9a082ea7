"""`prc-emu testbed up|down|status|clean`."""
from __future__ import annotations

import argparse
import sys

from testbed.builder import Interrupted, Testbed, TestbedError, remove_run
from scenario.spec import ScenarioError, load_scenario
from testbed.state import StateStore, state_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where run records live (default: $PRC_EMU_STATE_DIR "
                        "or /run/prc-emu)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                parser_class=type(parser))
    up = sub.add_parser("up", help="build the testbed a scenario file describes")
    up.add_argument("scenario", help="scenario TOML file (see docs/scenario.md)")
    down = sub.add_parser("down", help="remove a testbed (the only one when no id is given)")
    down.add_argument("run_id", nargs="?")
    sub.add_parser("status", help="list testbeds and what of each exists")
    sub.add_parser("clean", help="remove every testbed the state directory names, "
                   "including half-built ones")


def run(args) -> int:
    store = StateStore(state_dir(args.state_dir))
    try:
        return _ACTIONS[args.action](store, args)
    except ScenarioError as exc:
        print(f"prc-emu: scenario error: {exc}", file=sys.stderr)
        return 2
    except TestbedError as exc:
        print(f"prc-emu: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        print(f"prc-emu: interrupted by {exc}; what was built is removed", file=sys.stderr)
        return 128 + exc.signum


def _up(store: StateStore, args) -> int:
    scenario = load_scenario(args.scenario)
    testbed = Testbed.up(scenario, store, scenario_path=args.scenario)
    rec = testbed.record
    print(f"testbed {testbed.run_id} up: {_summary(rec)}")
    for host, info in rec["hosts"].items():
        print(f"  {host:<8} netns {info['netns']:<14} {info['addr']}")
    print(f"remove with: prc-emu testbed down {testbed.run_id}")
    return 0


def _summary(rec: dict) -> str:
    sc = rec["scenario"]
    topo = "ToR" if sc["kind"] == "tor" else f"leaf-spine {sc['leaves']}x{sc['spines']}"
    live_mbps = sc["rate_gbps"] * 1e3 / sc["dilation"]
    return (f"{sc['name']}: {topo}, {len(sc['hosts'])} hosts, links {sc['rate_gbps']:g} Gbit/s "
            f"/ {sc['dilation']:g} = {live_mbps:g} Mbit/s live, MTU {sc['mtu_bytes']}, "
            f"XDP {sc['xdp_mode']}, delay {sc['delay_ns']} ns by {rec['delay_method']}, "
            f"{rec.get('pacer', 'cooperative')} pacer")


def _pick(store: StateStore, run_id: str | None) -> str:
    runs = store.run_ids()
    if run_id:
        if run_id not in runs:
            raise TestbedError(f"no testbed run {run_id} in {store.dir}")
        return run_id
    if len(runs) != 1:
        raise TestbedError(f"{len(runs)} testbed runs in {store.dir}; name one: {' '.join(runs) or '-'}")
    return runs[0]


def _down(store: StateStore, args) -> int:
    run_id = _pick(store, args.run_id)
    removed = remove_run(store, run_id)
    print(f"testbed {run_id} down: removed {len(removed)} namespaces")
    return 0


def _status(store: StateStore, args) -> int:
    from pyroute2 import netns

    runs = store.run_ids()
    if not runs:
        print(f"no testbeds in {store.dir}")
        return 0
    existing = set(netns.listnetns())
    for run_id in runs:
        rec = store.read(run_id)
        present = [n for n in rec["namespaces"] if n in existing]
        print(f"{run_id} {rec['status']}: {_summary(rec)}; "
              f"{len(present)}/{len(rec['namespaces'])} namespaces present")
    return 0


def _clean(store: StateStore, args) -> int:
    runs = store.run_ids()
    total = sum(len(remove_run(store, run_id)) for run_id in runs)
    print(f"clean: removed {len(runs)} runs, {total} namespaces")
    return 0


_ACTIONS = {"up": _up, "down": _down, "status": _status, "clean": _clean}
