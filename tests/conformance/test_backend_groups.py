"""``--backend`` groups are read from the registry (conformance/backends.py), as the Makefile uses them."""

from __future__ import annotations

import pytest

from conformance._selection import pairs_to_run
from conformance.backends import BACKEND_GROUPS, REGISTRIES, backend_names, expand_backends
from conformance.cli import build_parser


def pairs(*argv: str) -> list[tuple[str, str]]:
    args = build_parser().parse_args(["run", *argv])
    return [(backend.name, suite.name) for backend, suite in pairs_to_run(args)]


def test_groups_partition_every_registered_backend() -> None:
    for family, registry in REGISTRIES.items():
        parts = [set(backend_names(family, g)) for g in ("embedded", "real", "built")]
        assert set.union(*parts) == set(registry) == set(backend_names(family, "all")), family
        assert sum(map(len, parts)) == len(registry), family  # no backend in two groups


def test_embedded_needs_no_server_and_real_does() -> None:
    for family, registry in REGISTRIES.items():
        assert all(registry[n].service is None for n in backend_names(family, "embedded"))
        assert all(registry[n].service is not None for n in backend_names(family, "real"))


def test_make_conformance_runs_the_embedded_backends_of_every_suite() -> None:
    found = pairs("--backend", "embedded", "--suite", "all")
    assert {name for name, _ in found} == {"memory", "fakeredis", "sqlite"}
    assert ("fakeredis", "transport") in found and ("sqlite", "saga") in found
    assert ("sqlite", "store") not in found  # a group expands within each suite's family


def test_a_group_beside_names_keeps_order_and_drops_duplicates() -> None:
    assert expand_backends(["redis", "embedded", "memory"], ["commit"]) == ["redis", "memory", "fakeredis"]
    assert expand_backends(["all", "-cql"], ["commit"]) == ["memory", "fakeredis", "redis"]


def test_make_conformance_real_runs_what_it_ran_before_the_groups() -> None:
    found = {name for name, _ in pairs("--backend", "embedded,real,-kafka", "--suite", "all")}
    assert found == {"memory", "fakeredis", "sqlite", "redis", "cql", "postgres", "mysql"}


def test_all_includes_built_runtimes_and_real_does_not() -> None:
    saga_all = {name for name, _ in pairs("--backend", "all", "--suite", "saga")}
    saga_real = {name for name, _ in pairs("--backend", "real", "--suite", "saga")}
    assert set(backend_names("saga", "built")) <= saga_all
    assert not saga_real & set(backend_names("saga", "built"))


@pytest.mark.parametrize("group", sorted(BACKEND_GROUPS))
def test_groups_are_not_backend_names(group: str) -> None:
    assert all(group not in registry for registry in REGISTRIES.values())


def test_each_family_has_its_own_custom_flag() -> None:
    """``--store`` names a MessageStore only; each family's third-party backend has its own flag."""
    from conformance._selection import CUSTOM_FLAGS
    from conformance._suites import FAMILIES, load_suites

    load_suites()
    assert sorted(f.flag for f in FAMILIES.values()) == sorted(CUSTOM_FLAGS)
    assert FAMILIES["commit"].flag == "--store" and FAMILIES["saga"].flag == "--saga-backend"


def test_make_tests_live_parts_cover_what_the_single_phase_ran() -> None:
    """make test runs conformance-live-commit as its embedded and real parts side by side: together
    they are the pairs the one phase ran (Makefile, LIVE_commit-*)."""
    before = set(pairs("--backend", "embedded,real,-kafka,-cql", "--suite", "store,commit,transport"))
    embedded = set(pairs("--backend", "embedded", "--suite", "store,commit,transport"))
    real = set(pairs("--backend", "real,-kafka,-cql", "--suite", "store,commit,transport"))
    assert embedded | real == before and not embedded & real


def test_a_backend_caps_one_suite_of_a_profile() -> None:
    """A ``"<profile>:<suite>"`` cap wins over the profile's for that suite only (Cassandra's commit
    suite runs 40 examples under ci, its store suite 80; conformance/backends.py)."""
    from conformance._runner import RunOptions, planned_examples
    from conformance._suites import FAMILIES, load_suites, suite_named

    load_suites()
    cql = FAMILIES["commit"].backends()["cql"]
    ci = RunOptions(profile="ci")
    assert planned_examples(suite_named("commit"), cql, ci) == 40
    assert planned_examples(suite_named("store"), cql, ci) == 80
    assert planned_examples(suite_named("commit"), cql, RunOptions(profile="ci", examples=7)) == 7


def test_make_tests_saga_parts_cover_what_the_single_phase_ran() -> None:
    """make test runs conformance-live-saga as PostgreSQL's part and the rest side by side (Makefile,
    LIVE_saga-*): together they are the pairs the one phase ran, each engine in one part only."""
    before = set(pairs("--backend", "embedded,real,-kafka", "--suite", "saga"))
    postgres = set(pairs("--backend", "postgres", "--suite", "saga"))
    others = set(pairs("--backend", "embedded,real,-kafka,-postgres", "--suite", "saga"))
    assert postgres | others == before and not postgres & others
    assert ("mysql", "saga") in others
