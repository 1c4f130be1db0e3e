# Set-up and entry points. Every target creates the virtual environment it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# The CPU build of PyTorch, pinned so pip never pulls a multi-GB CUDA build (see README).
TORCH_PIN ?= torch==2.13.0

.PHONY: setup setup-dev run test test-slow bench lint clean

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

# Tests run against the installed package (non-editable), not the working tree.
test: setup-dev
	cd tests && ../$(BIN)/pytest -q -m "not slow" -p no:cacheprovider

test-slow: setup-dev
	cd tests && ../$(BIN)/pytest -q -m slow -p no:cacheprovider

bench: setup-dev
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

lint: setup-dev
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
