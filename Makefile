# The two commands of the README: `make up` and `make test`. Both create .venv on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8080
DATA_DIR ?= .toolproxy

.PHONY: up test install install-dev bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

up: install
	$(BIN)/toolproxy up --port $(PORT) --data-dir $(DATA_DIR)

test: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install-dev
	for b in pipeline floor parts stages publish journal_write service_sdk replicas visibility limits pdp lifecycle inputs hardening attack mcp_vs_native \
	         plugins turns critical search tools_b tools_c tools_web console; do $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
