"""A throwaway PostgreSQL server on loopback, for tests.

Uses ``LANGMEM_TIERS_TEST_PG_URL`` when it is set (an existing server; tests keep
to their own schemas and session ids there). Otherwise it runs ``initdb`` in a
temporary folder with the binaries under ``/usr/lib/postgresql/*/bin`` (or on
PATH), starts the server on 127.0.0.1 with a free port and its unix socket in
that folder, creates a database and yields its URL; afterwards it stops the
server and removes the folder. PostgreSQL refuses to run as root, so under root
the server runs as the ``postgres`` system user (created when missing). Tests
are skipped, with the reason, when no server binaries are installed
(``scripts/ensure_postgres.sh`` installs them on Debian).

Example, as a pytest fixture::

    from tests.support.postgres import postgres_url

    @pytest.fixture(scope="module")
    def pg_url():
        with postgres_url() as url:
            yield url
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

ENV_URL = "LANGMEM_TIERS_TEST_PG_URL"
SERVER_USER = "postgres"
START_TIMEOUT_S = 60
NO_BINARIES = (
    "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH: "
    f"run scripts/ensure_postgres.sh (Debian: apt-get install postgresql) or set {ENV_URL}"
)


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server binaries are installed here."""


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb, else the folder of initdb on PATH."""
    candidates = glob.glob("/usr/lib/postgresql/*/bin/initdb")

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    for initdb in sorted(candidates, key=version, reverse=True):
        if os.access(initdb, os.X_OK) and os.access(Path(initdb).with_name("pg_ctl"), os.X_OK):
            return Path(initdb).parent
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_server_user() -> list[str]:
    """The command prefix that runs a binary as a non-root user (empty when not root)."""
    if os.geteuid() != 0:
        return []
    try:
        import pwd

        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER],
                       check=True, capture_output=True)
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", SERVER_USER, "--"]
    return ["su", SERVER_USER, "-s", "/bin/sh", "-c", '"$0" "$@"']  # su passes the command through sh


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout}\n{done.stderr}")


@contextlib.contextmanager
def postgres_server(database: str | None = None, *, autovacuum: bool = True) -> Iterator[str]:
    """Start a temporary server and yield ``postgresql://postgres@127.0.0.1:PORT/DB``.

    ``autovacuum=False``: the planner's statistics change only where ANALYZE is run (the tests': a keyword
    search over the budget estimates common words from them, so its plan would depend on when autovacuum
    came by).

    Raises:
        PostgresUnavailableError: no initdb/pg_ctl installed.
        RuntimeError: initdb or the server failed (the message carries their output).
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailableError(NO_BINARIES)
    prefix = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="langmem-pg-"))
    data, sockets, log = root / "data", root / "sock", root / "server.log"
    sockets.mkdir()
    if prefix:
        for path in (root, sockets):
            shutil.chown(path, SERVER_USER, SERVER_USER)
    started = False
    try:
        _run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
              "-E", "UTF8", "--no-locale", "--no-sync"], "initdb")
        for _attempt in range(5):  # the free port may be taken between probe and bind
            port = free_port()
            options = f"-h 127.0.0.1 -p {port} -k {sockets} -F -c max_connections=200"
            if not autovacuum:
                options += " -c autovacuum=off"
            done = subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
                 "-w", "-t", str(START_TIMEOUT_S), "start"],
                capture_output=True, text=True, stdin=subprocess.DEVNULL,
            )
            if done.returncode == 0:
                started = True
                break
        if not started:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {done.stdout}\n{done.stderr}\n{text}")
        database = database or f"langmem_{uuid.uuid4().hex[:12]}"
        createdb = bindir / "createdb"
        _run([str(createdb), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database], "createdb")
        yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
    finally:
        if started:
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres_url() -> Iterator[str]:
    """``LANGMEM_TIERS_TEST_PG_URL`` when set, else a temporary server without autovacuum (see
    :func:`postgres_server`); skips the test when neither exists. A server of your own needs ``pageinspect``
    (contrib) and a superuser for the GIN tests, and with autovacuum on, a keyword test's plan may change
    when it analyzes a test's table."""
    url = os.environ.get(ENV_URL)
    if url:
        yield url
        return
    if find_bindir() is None:
        import pytest

        if os.environ.get("CI"):
            # In CI, `make test` installs PostgreSQL first: a missing server is a broken setup.
            pytest.fail(NO_BINARIES)
        pytest.skip(NO_BINARIES)
    with postgres_server(autovacuum=False) as server_url:
        yield server_url
