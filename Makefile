# Two commands set everything up on a fresh machine:
#   make test   - create the virtual environment, install, run the test suite
#   make train  - run the main job offline on the embedded default data set
#
# torch is installed first from a pinned, overridable spec so that no other dependency
# pulls a different torch: `make test TORCH_SPEC=torch==2.14.1`. Which build pip picks
# depends on its index (PyPI's Linux default is the multi-GB CUDA build); for the CPU
# build: `make test TORCH_INDEX=https://download.pytorch.org/whl/cpu`.

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
RUN_DIR ?= runs/default
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The install settings are recorded in the environment. Naming one that differs from the
# record (make test TORCH_SPEC=torch==2.14.1) builds the environment again from scratch
# (pip alone would keep the old torch: ==2.13.0 also matches 2.13.0+cpu); targets run
# without install settings use the environment as it is.
SETTINGS := $(strip $(PYTHON) $(TORCH_SPEC) $(TORCH_INDEX))
RECORDED := $(strip $(shell cat $(VENV)/.settings 2>/dev/null))
NAMED := $(filter command line environment,$(origin PYTHON) $(origin TORCH_SPEC) $(origin TORCH_INDEX))
REBUILD := $(if $(NAMED),$(if $(filter-out $(SETTINGS),$(RECORDED))$(filter-out $(RECORDED),$(SETTINGS)),settings-changed))

.PHONY: install test test-slow train lint bench clean settings-changed

$(STAMP): pyproject.toml requirements/constraints.txt $(REBUILD)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "requirements/constraints.txt pins versions (numpy, scipy, ...) that need Python >= 3.11, not " + sys.version.split()[0] + ": make PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(if $(REBUILD),--clear) $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e ".[dev]"
	printf '%s\n' '$(subst ','\'',$(SETTINGS))' > $(VENV)/.settings
	touch $@

settings-changed:

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

train: $(STAMP)
	$(BIN)/graphattn train --out $(RUN_DIR)

lint: $(STAMP)
	$(BIN)/ruff check graphattn tests benchmarks examples
	$(BIN)/ruff format --check graphattn tests benchmarks examples

bench: $(STAMP)
	$(BIN)/graphattn bench --out bench_out

CODE_DIRS := $(wildcard graphattn tests benchmarks examples)

# the environment and caches (Numba's compiled kernels in __pycache__); the run folders
# (runs/, bench_out/) hold your results and are left alone
clean:
	rm -rf $(VENV) .pytest_cache graphattn.egg-info
	$(if $(CODE_DIRS),find $(CODE_DIRS) -name __pycache__ -type d -prune -exec rm -rf {} +)
