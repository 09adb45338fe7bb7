# Two entry points, both self-contained on a fresh machine (make demo needs Python >= 3.11 and
# PyPI; make test also the npm registry, and Debian's packages as root for Chromium):
#   make demo   creates .venv, installs the package with its demo extra, runs the main job
#   make test   creates .venv, installs the package with its test extra and the docs site's
#               JavaScript (npm ci), installs Chromium when it is missing and make runs as root
#               (apt-get), then runs every test except those marked slow: the docs' code
#               blocks, the strict build of the docs site and its formulas rendered offline in
#               headless Chromium included, in two pytest workers. 9 to 14 minutes on 2 shared
#               cores (AMD EPYC).
#               The slow ones, after make test: .venv/bin/python -m pytest -m slow (those on
#               MNIST need .venv/bin/advsvm data fetch mnist first)
# Another Python: make demo PYTHON=python3.12
# and the documentation site:
#   make docs   builds it with `mkdocs build --strict` into site/ (open site/index.html: it
#               needs no network)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# npm ci writes this file last: the docs site's JavaScript (MathJax, iframe-worker) is in place.
NODE := node_modules/.package-lock.json

.PHONY: demo test docs browser clean

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

# Root on Debian: install a missing system package (npm, chromium) with apt-get.
define apt_install
if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(1); \
else \
  echo "make: $(1) is missing; install it (as root: apt-get install $(1))" >&2; false; \
fi
endef

$(NODE): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { $(call apt_install,npm); }
	npm ci --ignore-scripts --no-audit --no-fund

# The test of the site's formulas needs a browser; without one it is skipped, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || { $(call apt_install,chromium); } \
	  || echo "make: no Chromium: the test of the site's formulas will be skipped" >&2

demo: $(VENV)/.demo-installed
	$(BIN)/advsvm demo

# One pytest worker (pytest-xdist) a core; each test goes to whichever is free. (A third worker
# fills the Kafka tests' waits on a quiet machine, but on a busy one it starves the services and
# brokers of those tests past their deadlines.)
TEST_WORKERS ?= 2

test: $(VENV)/.test-installed $(NODE) browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

docs: $(VENV)/.docs-installed $(NODE)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build dist site node_modules *.egg-info
