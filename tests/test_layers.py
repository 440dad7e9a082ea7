"""The layers of docs/architecture.md import only downwards, and a scenario
file parses without scapy, bcc, pyroute2 or any live part loaded."""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# package -> the project packages it may import (every import counts,
# including those deferred into a function body).
ALLOWED = {
    "scenario": set(),
    "dataplane": {"scenario"},
    "testbed": {"scenario", "dataplane"},
    "workload": {"scenario"},
    "control": {"scenario", "dataplane", "workload"},
    "sim": {"scenario", "dataplane", "testbed", "workload", "control"},
    "experiment": {"scenario", "dataplane", "testbed", "workload", "control", "sim"},
    "cli": {"scenario", "dataplane", "testbed", "workload", "control", "sim", "experiment"},
}


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a source file imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_graph(root: Path) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    modules = {}
    for package in ALLOWED:
        for path in sorted((root / package).glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            modules[name] = imported_modules(path)
    return {name: {m for m in imports if m in modules} for name, imports in modules.items()}


def layer_violations(root: Path) -> list[str]:
    """'a.b imports c.d' for each import that points up or sideways, and
    each cycle among modules."""
    graph = module_graph(root)
    bad = [f"{mod} imports {dep}" for mod, deps in sorted(graph.items()) for dep in sorted(deps)
           if dep.split(".")[0] != mod.split(".")[0]
           and dep.split(".")[0] not in ALLOWED[mod.split(".")[0]]]
    state: dict[str, int] = {}     # 1 on the current path, 2 done

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph[mod]):
            if state.get(dep) == 1:
                bad.append("cycle: " + " -> ".join(path[path.index(dep):] + [mod, dep])
                           if dep in path else f"cycle: {mod} -> {dep}")
            elif dep not in state:
                visit(dep, path + [mod])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [])
    return bad


def test_project_imports_point_down_the_layers():
    assert layer_violations(REPO) == []


def _copy_packages(tmp_path: Path) -> Path:
    for package in ALLOWED:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_an_upward_import_is_caught(tmp_path):
    root = _copy_packages(tmp_path)
    nic = root / "dataplane" / "nic.py"
    nic.write_text(nic.read_text() + "\n\ndef _late():\n    from testbed.isolated import run_in_netns\n")
    assert layer_violations(root) == ["dataplane.nic imports testbed.isolated"]


def test_an_import_cycle_is_caught(tmp_path):
    root = _copy_packages(tmp_path)
    (root / "testbed" / "state.py").write_text("from testbed.topology import plan_topology\n")
    (root / "testbed" / "topology.py").write_text("from testbed.state import StateStore\n")
    assert any(v.startswith("cycle: ") and "testbed.state" in v and "testbed.topology" in v
               for v in layer_violations(root))


# Modules a scenario (or comparison plan) parse must not load: they need root, Debian's bcc or
# a live testbed, and a simulator reads the same files without them.
_BLOCKER = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"scapy", "bcc", "pyroute2", "numpy", "matplotlib"}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocked())
import tomllib
from scenario import load_scenario
from scenario.plan import load_plan
from scenario.sweep import load_sweep
with open(sys.argv[1], "rb") as f:
    tables = tomllib.load(f)
if "variant" in tables:
    sc = load_plan(sys.argv[1]).variants[-1].scenario(1)
elif "grid" in tables:
    sc = load_sweep(sys.argv[1]).points[-1].scenario(1)
else:                   # live-only limits aside: some examples are for the simulator only
    sc = load_scenario(sys.argv[1], live=False)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"dataplane", "testbed", "experiment", "control", "cli"})
print(sc.name, len(sc.hosts), sc.live.dcqcn.rpg_threshold, loaded)
"""


def test_scenario_files_parse_without_live_dependencies():
    for example in sorted((REPO / "examples").glob("*.toml")):
        proc = subprocess.run([sys.executable, "-c", _BLOCKER, str(example)], capture_output=True,
                              text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith("[]"), proc.stdout


def test_the_blocker_does_block():
    # The check above is only worth something if a blocked import fails.
    proc = subprocess.run([sys.executable, "-c", _BLOCKER.replace("from scenario import", "import scapy\nfrom scenario import"),
                           str(REPO / "examples" / "default.toml")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0 and "blocked: scapy" in proc.stderr
