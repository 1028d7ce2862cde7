# The two commands: `make demo` and `make test`. Both create .venv and install what is missing.
SHELL := /bin/bash
VENV ?= .venv
# The Pythons pyproject's requires-python accepts, in the order tried: 3.11 (Debian 12's, the one checked most), 3.12,
# 3.13 (Debian 13's); then a plain python3 if it is one of them. `make python` prints the choice (.ci/run asks it).
SUPPORTED_PYTHONS := 3.11 3.12 3.13
PYTHON ?= $(shell for v in $(SUPPORTED_PYTHONS); do command -v python$$v && exit; done; \
  v=$$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
  [[ " $(SUPPORTED_PYTHONS) " == *" $$v "* ]] && command -v python3)
NO_PYTHON := No supported Python: Lumina needs one of Python $(SUPPORTED_PYTHONS) (tried \
  $(addprefix python,$(SUPPORTED_PYTHONS)) and python3). On Debian: apt-get install python3 python3-venv; \
  elsewhere install one, or name it: make PYTHON=/path/to/python3.X
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: install demo test ui ui-check lint format clean-data python

python:
	@test -n "$(PYTHON)" || { echo "$(NO_PYTHON)" >&2; exit 1; }
	@echo "$(PYTHON)"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || test -n "$(PYTHON)" || { echo "$(NO_PYTHON)" >&2; exit 1; }
	@# Debian ships venv's ensurepip apart: without python3-venv (python3.X-venv) `-m venv` fails, so say so
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "$(PYTHON) could not create" \
	  "$(VENV); on Debian: apt-get install python3-venv (python3.X-venv for another python3.X)" >&2; exit 1; }
	@# torch first and pinned: an unpinned resolve pulls a multi-GB CUDA build
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev,tables]"
	@# the browser check (tests/orchestration/test_orchestration_ui.py) drives Debian chromium with npm playwright-core;
	@# where chromium or npm is absent the test skips and says so; under CI=true it fails (.ci/run installs both first)
	@if command -v npm >/dev/null && { command -v chromium || command -v chromium-browser; } >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/ui-check playwright-core@1.65.1 \
	  || echo "playwright-core not installed: the browser UI test will skip"; fi
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

demo: install
	@$(BIN)/lumina pools apply >/dev/null
	$(BIN)/lumina demo

test: install
	$(BIN)/python -m pytest -q

# `lumina ui` applies the pool limits, runs `dagster dev`, and on Ctrl-C / SIGTERM stops every process it started
ui: install
	@# Ctrl-C (130) or SIGTERM (143) is how the UI is stopped: not an error of make's
	$(BIN)/lumina ui --port $${LUMINA_UI_PORT:-3000} || { status=$$?; [ $$status -eq 130 ] || [ $$status -eq 143 ] || exit $$status; }

ui-check: install
	$(BIN)/python devtools/ui_check.py

lint: install
	$(BIN)/ruff format --check . && $(BIN)/ruff check .

format: install
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean-data:
	rm -rf data/tables data/lancedb data/pdfs data/cache data/benchmark data/reports
