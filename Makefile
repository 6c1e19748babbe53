# Ratchet: two entry points for humans and CI.
#   make conformance   the main job on the embedded backends (memory, fakeredis); no server needed
#   make test          everything: lint, types, CrossHair, the whole test suite on real services
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PROFILE ?= ci
REPORTS := reports
CROSSHAIR_BUDGET ?= 4
# A fixed seed makes the gate reproducible run to run; SEED=random explores afresh each time.
SEED ?= 20261130
SEED_FLAG := $(if $(filter random,$(SEED)),,--seed $(SEED))

-include mk/services.mk

.PHONY: help venv conformance conformance-real test lint types crosshair pytest clean

help:
	@echo "make conformance  - conformance suites on memory + fakeredis (embedded, no servers)"
	@echo "make test         - lint, types, CrossHair, all tests incl. real Redis/Cassandra/PostgreSQL/MariaDB"
	@echo "make services     - install (when missing) and start the real services on loopback"
	@echo "make services-stop"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

conformance: venv
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend memory,fakeredis,sqlite --suite all --profile $(PROFILE) $(SEED_FLAG) \
		--junit $(REPORTS)/conformance-embedded.xml --report $(REPORTS)/conformance-embedded.json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check model impls conformance tests examples

types: venv
	$(BIN)/mypy --strict model impls conformance

crosshair: venv
	$(BIN)/crosshair check model/commit --per_condition_timeout=$(CROSSHAIR_BUDGET)
	$(BIN)/crosshair check model/saga  # budgets are directives in model/saga/__init__.py

pytest: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q --junitxml=$(REPORTS)/pytest.xml

conformance-real: venv
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend memory,fakeredis,sqlite,redis,cql,postgres,mysql --suite all --profile $(PROFILE) $(SEED_FLAG) \
		--junit $(REPORTS)/conformance-real.xml --report $(REPORTS)/conformance-real.json

# Services are started first so that a missing server fails the run in CI instead of skipping.
test: venv
	@$(MAKE) --no-print-directory services
	@status=0; \
	$(MAKE) --no-print-directory lint types crosshair pytest conformance-real || status=$$?; \
	if [ "$${CI:-}" = "true" ]; then $(MAKE) --no-print-directory services-stop || true; \
	else echo "services left running; stop them with: make services-stop"; fi; \
	exit $$status

# The nasaga host (docs/nasaga.md); its cargo target directory lives outside the repository.
CARGO_TARGET_DIR ?= $(HOME)/.cache/ratchet/cargo-target
.PHONY: nasaga-host
nasaga-host:
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) cargo build --manifest-path hosts/nasaga/Cargo.toml

clean:
	rm -rf $(REPORTS) .mypy_cache .ruff_cache .pytest_cache
