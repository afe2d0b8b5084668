# Two commands: `make run` (set up .venv on first use, then the default job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
ARGS   ?=
# pytest-xdist workers for `make test` (one torch thread each: tests/conftest.py)
WORKERS ?= 2

.PHONY: setup run test test-slow lint clean-cache

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "attn_study needs Python >= 3.10"'
	$(PYTHON) -m venv $(VENV)
	# torch first and alone, pinned: an unpinned resolve would pull a multi-GB CUDA build
	$(BIN)/pip install --disable-pip-version-check -q -c constraints.txt torch
	$(BIN)/pip install --disable-pip-version-check -q -c constraints.txt -e '.[test,hf]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/attn-study $(ARGS)

test: setup
	$(BIN)/python -m pytest -n $(WORKERS) --dist worksteal $(ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-slow: setup
	$(BIN)/python -m pytest -m slow $(ARGS)

