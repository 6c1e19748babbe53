"""A private redis-server the harness starts itself: for examples and tests, never a shared one.

``LocalRedis`` picks a free loopback port and a data directory of its own, runs ``redis-server``
in the foreground as a child process (so its pid is known without a pid file) and is its own
``ServiceControl``: ``kill`` is SIGKILL, ``restart`` the same command line on the same directory.
``durable=False`` is the configuration of issue 14's finding: no AOF, no snapshots.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from conformance.crash._control import ServiceControlError, kill_tree, pid_alive

DURABLE_FLAGS = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")
FAST_FLAGS = ("--save", "", "--appendonly", "no")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class LocalRedis:
    def __init__(self, *, durable: bool = True, root: Path | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceControlError("redis-server is not installed (scripts/services up redis installs it)")
        self._binary = binary
        self.durable = durable
        self.root = root or Path(tempfile.mkdtemp(prefix="ratchet-redis-"))
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def name(self) -> str:
        return f"redis at 127.0.0.1:{self.port} (private, {self.durability()})"

    @property
    def data_dir(self) -> Path:
        return self.root

    def durability(self) -> str:
        return "durable: AOF, appendfsync always" if self.durable else "fast: no AOF, no snapshots"

    def start(self) -> LocalRedis:
        flags = DURABLE_FLAGS if self.durable else FAST_FLAGS
        log = open(self.root / "redis.log", "ab")  # noqa: SIM115 - the child keeps it open
        self._process = subprocess.Popen(
            [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root), *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self._wait_ready(30.0)
        return self

    def pid(self) -> int:
        process = self._process
        if process is None or process.poll() is not None or not pid_alive(process.pid):
            raise ServiceControlError(f"redis at 127.0.0.1:{self.port} is not running")
        return process.pid

    def kill(self) -> None:
        pid = self.pid()
        kill_tree(pid)
        assert self._process is not None
        self._process.wait(10)

    def restart(self) -> None:
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: the server holds its connections and answers nothing (the watchdog's case)."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop for good (tests' teardown); harmless when already down."""
        process = self._process
        if process is not None and process.poll() is None:
            self.thaw()
            process.kill()
            process.wait(10)
        self._process = None

    def _signal(self, sig: signal.Signals) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(sig)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self._process is not None and self._process.poll() is not None:
                raise ServiceControlError(
                    f"redis-server on port {self.port} exited (see {self.root}/redis.log)"
                )
            if time.monotonic() > deadline:
                raise ServiceControlError(f"redis-server on port {self.port} did not answer PING")
            time.sleep(0.02)
