"""MariaDB from Debian's mariadb-server, its own data directory under the services directory.

``mariadb-install-db`` once (root authenticates by the socket only), then ``mariadbd`` in a session
of its own; once the root socket answers, the database ``ratchet`` and its user, with the grants the
nasaga host's namespace databases need (``ratchet\\_nsg\\_%``). Durable:
``innodb-flush-log-at-trx-commit=1``; fast: ``2`` (the log is written at commit, flushed each second).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from conformance.services._server import Server, ServerFailed

GRANTS = r"""
CREATE DATABASE IF NOT EXISTS ratchet;
CREATE USER IF NOT EXISTS 'ratchet'@'127.0.0.1' IDENTIFIED BY 'ratchet';
CREATE USER IF NOT EXISTS 'ratchet'@'localhost' IDENTIFIED BY 'ratchet';
GRANT ALL PRIVILEGES ON ratchet.* TO 'ratchet'@'127.0.0.1';
GRANT ALL PRIVILEGES ON ratchet.* TO 'ratchet'@'localhost';
GRANT ALL PRIVILEGES ON `ratchet\_nsg\_%`.* TO 'ratchet'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `ratchet\_nsg\_%`.* TO 'ratchet'@'localhost';
FLUSH PRIVILEGES;
"""


def _which(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
        if found:
            return found
    return None


class MariaDB(Server):
    name = "mariadb"
    ready_timeout_s = 120.0
    stop_timeout_s = 60.0

    def packages(self) -> list[str]:
        return ["mariadb-server", "mariadb-client"]

    @property
    def pid_file(self) -> Path:
        return self.dir / "mariadbd.pid"

    @property
    def socket(self) -> Path:
        return self.dir / "mariadbd.sock"

    def marker(self) -> str:
        return str(self.dir / "data")

    def logs(self) -> list[Path]:
        return [self.dir / "log" / "error.log"]

    def root_sql(self, sql: str) -> bool:
        """``sql`` as root over our own socket; True when it ran."""
        client = _which("mariadb", "mysql") or "mariadb"
        argv = [
            client,
            "--no-defaults",
            "--connect-timeout=3",
            "-u",
            "root",
            f"--socket={self.socket}",
            "-N",
            "-B",
        ]
        try:
            done = subprocess.run([*argv, "-e", sql], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def start(self) -> None:
        data, log = self.dir / "data", self.dir / "log"
        log.mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        if not (data / "mysql").is_dir():
            self.say(f"mariadb: initialising {data}")
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            install_db = _which("mariadb-install-db", "mysql_install_db")
            if install_db is None:
                raise self.fail("mariadb-install-db not found")
            self.run_logged(
                [
                    install_db,
                    "--no-defaults",
                    "--user=root",
                    f"--datadir={data}",
                    "--skip-test-db",
                    "--auth-root-authentication-method=socket",
                ],
                log / "install-db.log",
                install_db,
            )
        server = _which("mariadbd", "mysqld")
        if server is None:
            raise self.fail("neither mariadbd nor mysqld found after installing mariadb-server")
        self.pid_file.unlink(missing_ok=True)
        self.record_durability()
        flush = "1" if self.settings.durable else "2"
        process = self.spawn(
            [
                server,
                "--no-defaults",
                "--user=root",
                f"--datadir={data}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.socket}",
                f"--pid-file={self.pid_file}",
                f"--log-error={log / 'error.log'}",
                f"--tmpdir={self.dir / 'tmp'}",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=128M",
                f"--innodb-flush-log-at-trx-commit={flush}",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
            ],
            log / "error.log",
        )
        # The root socket first, then the database and user (idempotent).
        deadline = time.monotonic() + self.ready_timeout_s
        while not self.root_sql("SELECT 1"):
            if process.poll() is not None:
                raise self.fail("mariadbd exited during start-up")
            if time.monotonic() > deadline:
                raise self.fail(f"the root socket {self.socket} did not answer")
            time.sleep(0.2)
        if not self.root_sql(GRANTS):
            raise ServerFailed(
                self.name, f"could not create database/user ratchet over {self.socket}", self.logs()
            )
