# Two entry points, both self-contained on a fresh machine with Python >= 3.11:
#   make demo   creates .venv, installs the package with its demo extra, runs the main job
#   make test   creates .venv, installs the package with its test extra, runs every test
#               (the docs' code blocks and the strict build of the docs site included)
# and the documentation site:
#   make docs   builds it with `mkdocs build --strict` into site/ (open site/index.html)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.demo-installed $(VENV)/.docs-installed

$(VENV)/.docs-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

demo: $(VENV)/.demo-installed
	$(BIN)/advsvm demo

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build site *.egg-info
