# Both targets bootstrap first (idempotent): a fresh Debian/Ubuntu machine
# needs nothing else. Run as root.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench bootstrap clean-venv

bootstrap:
	bash scripts/bootstrap

demo: bootstrap
	$(VENV)/bin/prc-emu doctor
	$(VENV)/bin/prc-emu demo
	$(VENV)/bin/prc-emu run examples/default.toml
	$(VENV)/bin/prc-emu run examples/training.toml
	$(VENV)/bin/prc-emu compare examples/prc-fabric.toml --runs 2
	$(VENV)/bin/prc-emu report "$$(ls -td results/compare-* | head -n 1)"
	$(VENV)/bin/prc-emu sim examples/training.toml --cc dcqcn,prc --seeds 1

test: bootstrap
	$(PY) -m pytest -q

bench: bootstrap
	$(PY) benchmarks/cc_bench.py
	$(PY) benchmarks/nic_bench.py
	$(PY) benchmarks/engine_bench.py
	$(PY) benchmarks/completion_bench.py
	$(PY) benchmarks/control_bench.py
	$(PY) benchmarks/sim_bench.py

clean-venv:
	rm -rf $(VENV)
