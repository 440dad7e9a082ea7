"""Scenario files as pure data: TOML in, a validated, typed Scenario out.

The bottom layer: it imports nothing else of this project and nothing that
needs root, bcc or scapy, so the live testbed and the simulator read the
same files. The schema is documented in docs/scenario.md."""
from scenario.spec import Scenario, ScenarioError, load_scenario, parse_scenario

__all__ = ["Scenario", "ScenarioError", "load_scenario", "parse_scenario"]
