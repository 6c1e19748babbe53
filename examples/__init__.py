"""Deliberately broken stores: the harness must catch each one (tests/conformance/test_examples.py)."""
