# Set-up and entry points. Every target creates the virtual environment it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# The CPU build of PyTorch, pinned so pip never pulls a multi-GB CUDA build (see README).
TORCH_PIN ?= torch==2.13.0

.PHONY: setup setup-dev run results results-check test test-slow test-ci-slow test-study bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install -q .

setup-dev: $(BIN)/python
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q '.[dev,trainer]'
	$(BIN)/pip install -q '.[dist]'  # netsim sweep's Dask: its tests run on a local cluster

# The main job: recommend placement and NCCL/NIC/switch settings for GPT-3 175B on the
# built-in default fabric (megascale); files land in out/recommend/.
run: setup
	$(BIN)/netsim recommend --fabric megascale --job gpt3-175b -o out/recommend

# Every study's committed results (experiments/*/results/, results/ci/) regenerated through its
# run.py on the sweep runner (resumable: run again after an interruption), and the numbers of
# the study READMEs and docs/experiments.md re-rendered from them (experiments/studies.py is
# the registry). FRESH=1 empties the work folders under out/ first (after a code change);
# STUDY=NAME runs one study; NO_EXTRAS=1 skips the studies' extra commands (diagnose's other
# seeds, placement's --full subset and over-time replays: hours); EXTRA=NAME runs only that
# extra command of STUDY and says whether its CSV came out as committed (a study of hours in parts).
results: setup-dev
	PYTHONPATH=$(CURDIR) $(BIN)/python -m experiments.results $(if $(FRESH),--fresh) $(if $(STUDY),--study $(STUDY)) $(if $(NO_EXTRAS),--no-extras) $(if $(EXTRA),--extra $(EXTRA))

# Rerun every study at its CI size and compare with the committed CI-size CSVs (exit 1 on a change).
results-check: setup-dev
	PYTHONPATH=$(CURDIR) $(BIN)/python -m experiments.results --check $(if $(STUDY),--study $(STUDY))

# Tests run against the installed package (non-editable), not the working tree.
# Slow tests come in two tiers (docs/contributing.md, "Test tiers"): CI's slow tier (.ci/run,
# budget 30 minutes on 2 cores) and the study tier (tests marked `study`, also `slow`).
# DURATIONS_CSV=FILE writes each test's wall time there (tests/conftest.py).
PYTEST_TIER = cd tests && ../$(BIN)/pytest -q -p no:cacheprovider $(if $(DURATIONS_CSV),--durations-csv $(abspath $(DURATIONS_CSV)))

test: setup-dev
	$(PYTEST_TIER) -m "not slow"

test-slow: setup-dev
	$(PYTEST_TIER) -m slow

test-ci-slow: setup-dev
	$(PYTEST_TIER) -m "slow and not study"

test-study: setup-dev
	$(PYTEST_TIER) -m study

bench: setup-dev
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

lint: setup-dev
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
