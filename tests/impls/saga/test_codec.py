"""impls.saga.codec: envelopes and definition documents round-trip, and anything else is CORRUPT.

The decoders check shapes with explicit tests, not ``assert``, so ``python -O`` refuses a
malformed row exactly as a normal run does.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench._saga_workload import command_for
from conformance.saga import _world as w
from impls.saga import SagaBackendError, SagaBackendErrorKind, codec
from model.saga import DOCUMENT_FORMAT, canonical_document, decode, encode


def _command_with_attempt_as_text() -> bytes:
    """A well-formed command blob except that its attempt is text: only a type check refuses it."""
    fields = decode(codec.command_to_blob(command_for(1)))
    assert isinstance(fields, tuple)
    return encode((*fields[:-2], "1", fields[-1]))


def _document_with(index: int, value: object) -> bytes:
    """The canonical document of a published artifact with field ``index`` replaced, re-encoded."""
    fields = decode(canonical_document(w.ARTIFACT))
    assert isinstance(fields, tuple)
    return encode((*fields[:index], value, *fields[index + 1 :]))  # type: ignore[arg-type]


MALFORMED = [
    _command_with_attempt_as_text(),
    encode(None),
    encode(("not", "a", "document")),
    encode((DOCUMENT_FORMAT, "t", "wf", "not-a-version", ("application/json", None), ())),
    encode((DOCUMENT_FORMAT, "t", "wf", 1, ("application/json", None), (("only", "three", "fields"),))),
    # A well-formed document under a format tag the codec does not read (S-TX-03: no silent default).
    _document_with(0, "ratchet.saga.definition/2"),
    # The first-input contract as a two-character text, which unpacks like the pair it replaces.
    _document_with(4, "ab"),
    b"\xff not canonical at all",
]


def test_a_definition_document_round_trips() -> None:
    assert codec.artifact_from_document(canonical_document(w.ARTIFACT)) == w.ARTIFACT


def test_a_command_round_trips() -> None:
    command = command_for(7)
    assert codec.command_from_blob(codec.command_to_blob(command)) == command


@pytest.mark.parametrize("blob", MALFORMED)
def test_malformed_rows_are_corrupt(blob: bytes) -> None:
    for decoder in (codec.artifact_from_document, codec.command_from_blob, codec.result_from_blob):
        with pytest.raises(SagaBackendError) as raised:
            decoder(blob)
        assert raised.value.kind is SagaBackendErrorKind.CORRUPT


def test_malformed_rows_are_corrupt_under_python_dash_o() -> None:
    program = (
        "from impls.saga import SagaBackendError, codec\n"
        f"for blob in {MALFORMED!r}:\n"
        "    for decode in (codec.artifact_from_document, codec.command_from_blob, codec.result_from_blob):\n"
        "        try:\n"
        "            decode(blob)\n"
        "        except SagaBackendError as error:\n"
        "            if error.kind.name != 'CORRUPT':\n"
        "                raise SystemExit(f'{error!r} for {blob!r}')\n"
        "        else:\n"
        "            raise SystemExit(f'accepted {blob!r} with {decode.__name__}')\n"
    )
    done = subprocess.run([sys.executable, "-O", "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
