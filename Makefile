# Two entry points, both self-contained on a fresh machine with Python >= 3.11:
#   make demo   creates .venv, installs the package with its demo extra, runs the main job
#   make test   creates .venv, installs the package with its test extra, runs every test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(BIN)/advsvm demo

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
