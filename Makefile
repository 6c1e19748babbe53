# Ratchet: two entry points for humans and CI.
#   make conformance   the main job on the embedded backends (memory, fakeredis); no server needed
#   make test          everything: lint, types, CrossHair, the whole test suite on real services
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
# make test starts a dozen Python processes (pytest phases, conformance runs, CLI subprocesses):
# without cached bytecode each one compiles every module again (8.9 s of CPU against 3.5 s for one
# pytest collection, measured). Caches go to __pycache__/, which git ignores.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PROFILE ?= ci
REPORTS := reports
CROSSHAIR_BUDGET ?= 4
# A fixed seed makes the gate reproducible run to run; SEED=random explores afresh each time.
SEED ?= 20261130
SEED_FLAG := $(if $(filter random,$(SEED)),,--seed $(SEED))
# A failure a conformance phase finds is shrunk by Hypothesis for at most this long, then made
# 1-minimal by replay (docs/ci-gate.md): unbounded, Hypothesis may replay for minutes, each replay a
# whole example on a real engine. SHRINK_BUDGET= leaves Hypothesis's own limit.
SHRINK_BUDGET ?= 60s
SHRINK_FLAG := $(if $(SHRINK_BUDGET),--shrink-budget $(SHRINK_BUDGET))

-include mk/services.mk

comma := ,
.PHONY: mutation
.PHONY: help venv proto pytest-parallel pytest-sql pytest-sql-postgres pytest-sql-mariadb pytest-nasaga pytest-cql pytest-timing pytest-after conformance conformance-kafka conformance-real conformance-live conformance-live-commit conformance-live-commit-embedded conformance-live-commit-real conformance-live-cql conformance-live-cql-store conformance-live-cql-commit conformance-live-saga conformance-live-saga-postgres conformance-live-saga-others conformance-crash conformance-crash-commit conformance-crash-saga conformance-nasaga nasaga-host test lint types crosshair pytest clean

help:
	@echo "make conformance  - conformance suites on the embedded backends (memory, fakeredis, sqlite; transport on fakeredis + loopback gRPC)"
	@echo "make test         - lint, types, CrossHair, the nasaga host, all tests and suites on real Redis/Cassandra/PostgreSQL/MariaDB"
	@echo "make conformance-real - every suite on the embedded and real backends (live, then crash)"
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
	$(BIN)/conformance run --backend embedded --suite all --profile $(PROFILE) $(SEED_FLAG) $(SHRINK_FLAG) \
		--junit $(REPORTS)/conformance-embedded.xml --report $(REPORTS)/conformance-embedded.json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check model impls conformance bench tests examples

# mypy's cache lives outside the clone (like the cargo target and the Cassandra jars), so a fresh
# clone's types phase reads what an earlier clone wrote: measured 9.4 CPU-s cold, 0.5 warm from a
# clone at another path with another venv. mypy checks each cached module's hash before using it
# (a changed file is checked again) and writes its cache files by rename, so clones may share it.
MYPY_CACHE_DIR ?= $(HOME)/.cache/ratchet/mypy
types: venv
	$(BIN)/mypy --strict --cache-dir $(MYPY_CACHE_DIR) model impls conformance bench examples

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

# make test's pytest, in phases chosen by marks (tests/conftest.py adds sql_tables, sql_postgres,
# sql_mariadb and cql_server): pytest-parallel (two workers, beside the live suites; most tests wait
# on a server, not a core), pytest-sql-postgres, pytest-sql-mariadb and pytest-cql (the tests that
# need PostgreSQL's or MariaDB's shared SQL saga tables, or Cassandra, see below), pytest-nasaga
# (the nasaga runtime's tests, marked nasaga_schemas: their rows live in schemas of their own),
# pytest-timing (wall-clock bounds, alone) and pytest-after (reads the suites' reports).
# pytest files that only repeat what conformance-live runs (store+commit on fakeredis, redis and cql,
# ci profile, coverage gate on): make test leaves them to conformance-live; `make pytest` runs them.
COVERED_BY_CONFORMANCE_LIVE := tests/conformance/test_backends.py
# --dist loadfile: a module's tests on one worker, so a module-scoped suite run (the planted-bug
# tests' ``run_broken``) is made once. The tests that need PostgreSQL or MariaDB (marked
# sql_tables, tests/conftest.py) run in pytest-sql-<engine>, one process per engine, one test after
# another; the nasaga runtime's in pytest-nasaga.
pytest-parallel: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -n 2 --dist loadfile -m "not timing and not after_suites and not sql_tables and not cql_server and not nasaga_schemas" \
		$(addprefix --ignore=,$(COVERED_BY_CONFORMANCE_LIVE)) --junitxml=$(REPORTS)/pytest.xml

# The tests that need Cassandra (marked cql_server): after conformance-live-cql, which keeps the
# one node busy enough that a test's suite run may end in an outage (exit 2, no verdict).
pytest-cql: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "cql_server and not timing and not after_suites" \
		$(addprefix --ignore=,$(COVERED_BY_CONFORMANCE_LIVE)) --junitxml=$(REPORTS)/pytest-cql.xml

# The SQL saga backends keep every namespace in one table set per engine: pytest-sql runs the tests
# of both engines in one process; make test runs each engine's in a process of its own, side by side
# (pytest-sql-postgres, pytest-sql-mariadb). No test needs both engines' tables; one that did would
# run once, in pytest-sql-postgres.
SQL_ALSO_mariadb := and not sql_postgres
pytest-sql: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "sql_tables and not timing and not after_suites" \
		$(addprefix --ignore=,$(COVERED_BY_CONFORMANCE_LIVE)) --junitxml=$(REPORTS)/pytest-sql.xml

pytest-sql-postgres pytest-sql-mariadb: pytest-sql-%: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "sql_$* $(SQL_ALSO_$*) and not timing and not after_suites" \
		$(addprefix --ignore=,$(COVERED_BY_CONFORMANCE_LIVE)) --junitxml=$(REPORTS)/pytest-sql-$*.xml

# The nasaga runtime's tests (marked nasaga_schemas): PostgreSQL under nasaga's own schemas, and the
# project's Kafka broker (tests/conformance/test_nasaga_kafka.py), so not beside conformance-kafka.
pytest-nasaga: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "nasaga_schemas and not timing and not after_suites" \
		--junitxml=$(REPORTS)/pytest-nasaga.xml

# The tests marked timing assert a wall-clock bound (a signal obeyed within a second): they run
# alone, on cores nothing else is using. The ones marked after_suites read the live suites' reports.
pytest-timing: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "timing" --junitxml=$(REPORTS)/pytest-timing.xml

pytest-after: venv
	@mkdir -p $(REPORTS)
	$(BIN)/pytest -q $(PYTEST_FLAGS) -m "after_suites and not timing" --junitxml=$(REPORTS)/pytest-after.xml

# Every registered suite on the embedded and real backends, in parts. The live suites leave the
# servers running: conformance-live-commit (store, commit, transport), conformance-live-cql and
# conformance-live-saga (saga) may run side by side with each other and with pytest.
# conformance-crash runs the durability suites, which kill -9 and restart the project's servers
# (scripts/services): nothing that uses those servers may run beside it. Each backend runs the suites of its family only.
# conformance-real is all of it, one part after the other.
# The backend groups come from the registry (conformance/backends.py: embedded = no server, real =
# a server `make services` starts; the built runtimes run in conformance-nasaga).
REAL_BACKENDS := embedded,real,-kafka
conformance-real: conformance-live conformance-crash conformance-kafka
conformance-live: conformance-live-commit conformance-live-cql conformance-live-saga

# Parts that run side by side: Cassandra's lightweight transactions make its suites the longest,
# so each has a phase of its own (one after the other, they were the last phase of their group to
# end, with one core idle: 502 s store then 357 s commit on final16); conformance-live-cql runs both.
# conformance-live-commit is two parts that make test runs side by side: the embedded backends
# (memory, fakeredis: in-process, on a core) and Redis (mostly waiting out its wire faults' stalls);
# one after the other they were the longest phase of their group (736 s on final18).
LIVE_commit-embedded := --backend embedded --suite store,commit,transport
LIVE_commit-real := --backend real,-kafka,-cql --suite store,commit,transport
LIVE_cql := --backend cql --suite store,commit
LIVE_cql-store := --backend cql --suite store
LIVE_cql-commit := --backend cql --suite commit
LIVE_saga := --backend $(REAL_BACKENDS) --suite saga
# make test runs the saga suite as two parts side by side, PostgreSQL's and the rest (MariaDB's and
# the embedded ones): one engine each, so what writes an engine's shared saga tables still runs one
# at a time (136 s and 157 s one after the other on final18, the longest phase of their group).
LIVE_saga-postgres := --backend postgres --suite saga
LIVE_saga-others := --backend $(REAL_BACKENDS),-postgres --suite saga
conformance-live-commit: conformance-live-commit-embedded conformance-live-commit-real
conformance-live-commit-embedded conformance-live-commit-real conformance-live-cql conformance-live-cql-store \
conformance-live-cql-commit conformance-live-saga conformance-live-saga-postgres \
conformance-live-saga-others: conformance-live-%: venv proto
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run $(LIVE_$*) --profile $(PROFILE) $(SEED_FLAG) $(SHRINK_FLAG) \
		--junit $(REPORTS)/conformance-live-$*.xml --report $(REPORTS)/conformance-live-$*.json

# conformance-crash is its two suites, which make test runs side by side: durability kills Redis
# (server-crash), saga-durability PostgreSQL and MariaDB, so neither meets the other's restarts
# (each mostly waiting on a server, not on a core: 42 s and 48 s one after the other on final18).
CRASH_commit := durability
CRASH_saga := saga-durability
conformance-crash: conformance-crash-commit conformance-crash-saga
conformance-crash-commit conformance-crash-saga: conformance-crash-%: venv
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend $(REAL_BACKENDS) --suite $(CRASH_$*) --profile $(PROFILE) $(SEED_FLAG) $(SHRINK_FLAG) \
		--junit $(REPORTS)/conformance-crash-$*.xml --report $(REPORTS)/conformance-crash-$*.json

# The transport suite on the project's Kafka broker (15 examples of 15 steps under ci): it kills -9
# and restarts the broker once, so it runs beside nothing else that uses the broker.
conformance-kafka: venv
	@mkdir -p $(REPORTS)
	$(BIN)/conformance run --backend kafka --suite transport --profile $(PROFILE) $(SEED_FLAG) $(SHRINK_FLAG) \
		--junit $(REPORTS)/conformance-kafka.xml --report $(REPORTS)/conformance-kafka.json

# The nasaga host (docs/nasaga.md); its cargo target directory lives outside the repository.
CARGO_TARGET_DIR ?= $(HOME)/.cache/ratchet/cargo-target
nasaga-host:
	@command -v cargo >/dev/null || { echo "make nasaga-host: cargo not found; the nasaga host (hosts/nasaga) needs Rust (https://rustup.rs)" >&2; exit 2; }
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) cargo build --manifest-path hosts/nasaga/Cargo.toml

# The saga suite on the real nasaga runtime (PostgreSQL) and the transport suite on nasaga's Redis
# Streams connector (12 examples under ci, about a minute), gRPC transport (8, about 40 s) and
# Kafka command consumer (10, about 80 s, on the broker before conformance-kafka restarts it),
# in its host; one run, one report.
# nasaga-mysql is left out: nasaga cannot run on MariaDB (docs/nasaga-findings.md, N-02).
conformance-nasaga: venv nasaga-host
	@mkdir -p $(REPORTS)
	$(BIN)/python -m impls.nasaga._proto  # stubs of the .proto files nasaga ships (docs/transports.md)
	$(BIN)/conformance run --suite saga,transport --backend built,-nasaga-mysql --profile $(PROFILE) \
		$(SEED_FLAG) $(SHRINK_FLAG) --junit $(REPORTS)/conformance-nasaga.xml --report $(REPORTS)/conformance-nasaga.json

# Services are started first so that a missing server fails the run in CI instead of skipping.
# Phases run group by group (scripts/test-phases): a group's phases side by side, since most of their
# time is spent waiting on servers, not on a core; every group runs even when an earlier phase
# failed, each phase's time and CPU seconds are printed and the failed ones are named at the end.
# CrossHair runs alone (its budgets are wall-clock: beside other work it would explore less). The
# host is built beside lint and types, before pytest (tests/impls/test_nasaga_host.py runs it). The
# SQL saga backends keep every namespace in one table set per engine, so what writes them runs one
# at a time per engine: pytest's PostgreSQL and MariaDB tests in pytest-sql-postgres and
# pytest-sql-mariadb (one process each), then conformance-live-saga (in two parts, one engine
# each), beside the nasaga runtime's
# tests (pytest-nasaga: its own schemas) and the Cassandra tests (pytest-cql, once
# conformance-live-cql-store and -commit are done with the node). The timing tests run alone, like
# CrossHair, before the rest. conformance-crash kills the servers: its two suites (each killing
# servers the other does not use) run side by side, with conformance-kafka (it kills and restarts
# the project's broker, which neither uses, nor anything after it), and then the tests that read
# every suite's report (pytest-after: the saga reports of conformance-live-saga and -nasaga among
# them). Where the two cores go, phase by phase: docs/ci-gate.md, "make test's budget".
TEST_GROUPS := lint,types,nasaga-host crosshair pytest-timing \
	pytest-parallel,pytest-sql-postgres,pytest-sql-mariadb,conformance-live-commit-embedded,conformance-live-commit-real,conformance-live-cql-store,conformance-live-cql-commit,conformance-nasaga \
	conformance-live-saga-postgres,conformance-live-saga-others,pytest-nasaga,pytest-cql conformance-crash-commit,conformance-crash-saga,conformance-kafka pytest-after
test: venv
	@$(MAKE) --no-print-directory services
	@status=0; scripts/test-phases $(TEST_GROUPS) || status=$$?; \
	if [ "$${CI:-}" = "true" ]; then $(MAKE) --no-print-directory services-stop || true; \
	else echo "services left running; stop them with: make services-stop"; fi; \
	exit $$status

# Mutation testing of the backend packages, judged by the conformance suites alone (scripts/mutation.py,
# docs/sensitivity.md); not part of make test: hours on two cores. PACKAGES=memory,commit runs a few;
# BUDGET=900 stops each package after that many seconds (its results are then marked partial);
# SERVERS=1 adds each package's runs on real servers (pyproject's server-runs; they must be up).
PACKAGES ?=
BUDGET ?=
SERVERS ?=
mutation: venv
	$(BIN)/python -m pip install --quiet -e '.[mutation]'
	$(BIN)/python scripts/mutation.py run $(subst $(comma), ,$(PACKAGES)) $(if $(BUDGET),--budget $(BUDGET)) $(if $(SERVERS),--servers)
	$(BIN)/python scripts/mutation.py report

clean:
	rm -rf $(REPORTS) .mypy_cache .ruff_cache .pytest_cache
