"""The in-memory saga backend: every table a dict, one writer, copy-on-begin transactions."""

from ._backend import MemorySagaBackend, open_memory_saga_backend

__all__ = ["MemorySagaBackend", "open_memory_saga_backend"]
