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

comma := ,
.PHONY: mutation
.PHONY: help venv proto conformance conformance-real conformance-nasaga nasaga-host test lint types crosshair pytest clean

help:
	@echo "make conformance  - conformance suites on memory + fakeredis + sqlite (embedded; transport on fakeredis + loopback gRPC)"
	@echo "make test         - lint, types, CrossHair, the nasaga host, all tests and suites on real Redis/Cassandra/PostgreSQL/MariaDB"
	@echo "make nasaga-host  - build the nasaga host (Rust; hosts/nasaga)"
	@echo "make mutation     - mutation scores of the backend packages under the suites alone (hours; PACKAGES=memory,commit)"
	@echo "make services     - install (when missing) and start the real services on loopback"
	@echo "make services-stop"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# The transport's gRPC stubs, generated from impls/transport/proto into build/proto/<digest>/ (not
# committed; the first import generates them too when this target was not run).
proto: venv
	$(BIN)/python -m impls.transport._proto

conformance: venv proto
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend memory,fakeredis,sqlite --suite all --profile $(PROFILE) $(SEED_FLAG) \
		--junit $(REPORTS)/conformance-embedded.xml --report $(REPORTS)/conformance-embedded.json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check model impls conformance tests examples

types: venv
	$(BIN)/mypy --strict model impls conformance

# The two packages are checked side by side, one per core (CrossHair's budgets are wall-clock; each
# check is single-threaded); each one's output is shown when both are done.
CROSSHAIR_COMMIT := $(BIN)/crosshair check model/commit --per_condition_timeout=$(CROSSHAIR_BUDGET)
CROSSHAIR_SAGA := $(BIN)/crosshair check model/saga# budgets are directives in model/saga/__init__.py
crosshair: venv
	@mkdir -p $(REPORTS)
	@echo '$(CROSSHAIR_COMMIT) & $(CROSSHAIR_SAGA)'
	@$(CROSSHAIR_COMMIT) >$(REPORTS)/crosshair-commit.txt 2>&1 & commit=$$!; \
	$(CROSSHAIR_SAGA) >$(REPORTS)/crosshair-saga.txt 2>&1 & saga=$$!; \
	rc=0; wait $$commit || rc=$$?; wait $$saga || rc=$$?; \
	cat $(REPORTS)/crosshair-commit.txt $(REPORTS)/crosshair-saga.txt; exit $$rc

PYTEST_FLAGS ?= --durations=25
pytest: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) --junitxml=$(REPORTS)/pytest.xml

# --suite all is every registered suite: store, commit, saga, durability, saga-durability, transport,
# each on the backends of its family in the list. The durability suites kill -9 and restart the
# project's servers (scripts/services), so this runs alone: after pytest, never beside it.
conformance-real: venv proto
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend memory,fakeredis,sqlite,redis,cql,postgres,mysql --suite all --profile $(PROFILE) $(SEED_FLAG) \
		--junit $(REPORTS)/conformance-real.xml --report $(REPORTS)/conformance-real.json

# The nasaga host (docs/nasaga.md); its cargo target directory lives outside the repository.
CARGO_TARGET_DIR ?= $(HOME)/.cache/ratchet/cargo-target
nasaga-host:
	@command -v cargo >/dev/null || { echo "make nasaga-host: cargo not found; the nasaga host (hosts/nasaga) needs Rust (https://rustup.rs)" >&2; exit 2; }
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) cargo build --manifest-path hosts/nasaga/Cargo.toml

# The saga suite on the real nasaga runtime (PostgreSQL), in its host.
conformance-nasaga: venv nasaga-host
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --suite saga --backend nasaga-pg --profile $(PROFILE) $(SEED_FLAG) \
		--junit $(REPORTS)/conformance-nasaga.xml --report $(REPORTS)/conformance-nasaga.json

# Services are started first so that a missing server fails the run in CI instead of skipping.
# The host is built before pytest (tests/impls/test_nasaga_host.py runs it). Every phase runs even
# when an earlier one failed; each one's time is printed, and the failed ones are named at the end.
TEST_PHASES := lint types crosshair nasaga-host pytest conformance-real conformance-nasaga
# pytest files that only repeat what conformance-real runs (store+commit on fakeredis, redis and cql,
# ci profile, coverage gate on): make test leaves them to conformance-real; `make pytest` runs them.
COVERED_BY_CONFORMANCE_REAL := tests/conformance/test_backends.py
test: venv
	@$(MAKE) --no-print-directory services
	@status=0; failed=""; begin=$$(date +%s); \
	for phase in $(TEST_PHASES); do \
		start=$$(date +%s); rc=0; \
		$(MAKE) --no-print-directory $$phase \
			PYTEST_FLAGS='$(PYTEST_FLAGS) $(addprefix --ignore=,$(COVERED_BY_CONFORMANCE_REAL))' || rc=$$?; \
		echo "[make test] $$phase: $$(( $$(date +%s) - start ))s$$( [ $$rc = 0 ] || echo " FAILED (exit $$rc)")"; \
		if [ $$rc != 0 ]; then status=$$rc; failed="$$failed $$phase"; fi; \
	done; \
	echo "[make test] total: $$(( $$(date +%s) - begin ))s$${failed:+; failed:$$failed}"; \
	if [ "$${CI:-}" = "true" ]; then $(MAKE) --no-print-directory services-stop || true; \
	else echo "services left running; stop them with: make services-stop"; fi; \
	exit $$status

# Mutation testing of the backend packages, judged by the conformance suites alone (scripts/mutation.py,
# docs/sensitivity.md); not part of make test: hours on two cores. PACKAGES=memory,commit runs a few;
# BUDGET=900 stops each package after that many seconds (its results are then marked partial).
PACKAGES ?=
BUDGET ?=
mutation: venv
	$(BIN)/python -m pip install --quiet -e '.[mutation]'
	$(BIN)/python scripts/mutation.py run $(subst $(comma), ,$(PACKAGES)) $(if $(BUDGET),--budget $(BUDGET))
	$(BIN)/python scripts/mutation.py report

clean:
	rm -rf $(REPORTS) .mypy_cache .ruff_cache .pytest_cache
