"""Redis 7 from Debian's redis-server, daemonized on loopback.

Durable: AOF only, fsynced before every reply (``appendfsync always``), so an acknowledged commit
survives kill -9. Fast: no persistence at all.
"""

from __future__ import annotations

from pathlib import Path

from conformance.services._server import Server


class Redis(Server):
    name = "redis"
    ready_timeout_s = 30.0

    def packages(self) -> list[str]:
        return ["redis-server", "redis-tools"]

    @property
    def pid_file(self) -> Path:
        return self.dir / "redis.pid"

    def marker(self) -> str:
        return f":{self.port}"  # redis sets its process title to "redis-server 127.0.0.1:PORT"

    def logs(self) -> list[Path]:
        return [self.dir / "log" / "redis.log", self.dir / "log" / "launch.log"]

    def start(self) -> None:
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        (self.dir / "log").mkdir(parents=True, exist_ok=True)
        if self.settings.durable:
            persistence = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "yes"]
        else:
            persistence = ["--appendonly", "no"]
        self.record_durability()
        # --daemonize: redis-server forks, writes its pid file and returns.
        self.run_logged(
            [
                "redis-server",
                "--daemonize",
                "yes",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--protected-mode",
                "yes",
                "--dir",
                str(self.dir / "data"),
                "--pidfile",
                str(self.pid_file),
                "--logfile",
                str(self.dir / "log" / "redis.log"),
                "--save",
                "",
                *persistence,
            ],
            self.dir / "log" / "launch.log",
            "redis-server",
            timeout_s=30,
        )
