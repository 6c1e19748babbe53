"""What the two JVM servers share: jars resolved from Maven Central into the cache, and a Java check.

Neither Cassandra 5.0 nor Kafka 4 is a Debian package here, and no binary distribution of
Cassandra 5.0.x is on Maven Central, so the server jar and its runtime dependencies are resolved
with Maven (``copy-dependencies``) into ``<cache>/<name>-<version>/lib`` once; the launcher supplies
the configuration and the command line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from conformance.services._server import Server, ServerFailed

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"


def maven_packages(home: Path) -> list[str]:
    """Debian packages a JVM server needs before it can be fetched and run."""
    needed = []
    if not (home / ".complete").exists() and shutil.which("mvn") is None:
        needed.append("maven")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        needed.append("openjdk-17-jre-headless")
    return needed


def pom(artifact: str, dependencies: Sequence[tuple[str, str, str]]) -> str:
    deps = "".join(
        f"    <dependency>\n      <groupId>{g}</groupId>\n      <artifactId>{a}</artifactId>\n"
        f"      <version>{v}</version>\n    </dependency>\n"
        for g, a, v in dependencies
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n  <modelVersion>4.0.0</modelVersion>\n'
        f"  <groupId>ratchet.local</groupId>\n  <artifactId>{artifact}</artifactId>\n  <version>1</version>\n"
        f"  <dependencies>\n{deps}  </dependencies>\n</project>\n"
    )


def fetch(
    server: Server,
    home: Path,
    dependencies: Sequence[tuple[str, str, str]],
    expected_jar: str,
    local_repository: Path | None = None,
) -> None:
    """Resolve ``dependencies`` (group, artifact, version) and theirs into ``home/lib``, once."""
    if (home / ".complete").exists():
        return
    group, artifact, version = dependencies[0]
    server.say(
        f"{server.name}: fetching {group}:{artifact}:{version} and its dependencies from Maven Central"
    )
    begin = time.monotonic()
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "pom.xml").write_text(pom(f"{server.name}-runtime", dependencies))
    argv = ["mvn", "-B", "-f", str(home / "pom.xml")]
    if local_repository is not None:
        argv.append(f"-Dmaven.repo.local={local_repository}")
    argv += [DEPENDENCY_PLUGIN, "-DincludeScope=runtime", f"-DoutputDirectory={home / 'lib'}"]
    try:
        server.run_logged(
            argv, home / "fetch.log", f"resolving {artifact}:{version} from Maven Central", 1800
        )
    except ServerFailed as exc:
        raise ServerFailed(server.name, f"{exc} (log: {home / 'fetch.log'})", exc.logs) from None
    if not (home / "lib" / expected_jar).exists():
        raise ServerFailed(server.name, f"{expected_jar} missing after fetch (log: {home / 'fetch.log'})")
    (home / ".complete").touch()
    jars = len(list((home / "lib").glob("*.jar")))
    server.say(f"{server.name}: {jars} jars cached in {home / 'lib'} after {time.monotonic() - begin:.1f}s")


def java(server: Server, accept: Sequence[int] | None, minimum: int | None = None) -> str:
    """The java to run ``server`` with (``JAVA_HOME`` first); refused when its version does not fit."""
    home = os.environ.get("JAVA_HOME")
    binary = f"{home}/bin/java" if home else (shutil.which("java") or "java")
    try:
        out = subprocess.run(
            [binary, "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        raise ServerFailed(server.name, "java not found") from None
    found = re.search(r"java\.specification\.version = (\S+)", out.stdout + out.stderr)
    major = found.group(1) if found else "unknown"
    fits = major.isdigit() and (
        (accept is not None and int(major) in accept) or (minimum is not None and int(major) >= minimum)
    )
    if not fits:
        wanted = " or ".join(map(str, accept)) if accept else f"{minimum} or later"
        raise ServerFailed(server.name, f"needs Java {wanted}, {binary} is {major} (set JAVA_HOME)")
    return binary
