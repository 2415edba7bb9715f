"""A real Chroma server (``chroma run``) on loopback, for tests.

Starts the ``chroma`` executable installed beside the running interpreter on a free
port with a temporary data path, waits until ``HttpClient.heartbeat()`` answers and
stops it afterwards. Starting takes well under a second here.

Example:
    >>> from tests.support.chroma_server import chroma_server
    >>> with chroma_server() as (host, port):  # doctest: +SKIP
    ...     store = ChromaStore.http(f"http://{host}:{port}", collection="t-1")

As a pytest fixture, in a test module::

    from tests.support.chroma_server import chroma_server

    @pytest.fixture(scope="module")
    def chroma_http(tmp_path_factory):
        with chroma_server(tmp_path_factory.mktemp("chroma")) as address:
            yield address
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

STARTUP_TIMEOUT_S = 30.0


def chroma_executable() -> str:
    """The ``chroma`` CLI of this virtualenv (beside ``sys.executable``), else from PATH."""
    here = Path(sys.executable).parent / ("chroma.exe" if os.name == "nt" else "chroma")
    if here.exists():
        return str(here)
    found = shutil.which("chroma")
    if found is None:
        raise FileNotFoundError(
            f"no chroma executable next to {sys.executable} or on PATH: pip install 'langmem-tiers[local]'"
        )
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def unique_collection(prefix: str = "t") -> str:
    """A collection name no other test uses (Chroma wants 3-512 chars of [a-zA-Z0-9._-])."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _heartbeat(host: str, port: int) -> bool:
    import chromadb
    from chromadb.config import Settings

    try:
        chromadb.HttpClient(host=host, port=port, settings=Settings(anonymized_telemetry=False)).heartbeat()
    except Exception:
        return False
    return True


@contextlib.contextmanager
def chroma_server(
    path: str | Path | None = None, *, host: str = "127.0.0.1", timeout_s: float = STARTUP_TIMEOUT_S
) -> Iterator[tuple[str, int]]:
    """Run ``chroma run`` until the block exits; yields ``(host, port)``.

    Args:
        path: data folder; a temporary one (removed afterwards) when ``None``.
        host: interface to listen on.
        timeout_s: how long to wait for the first heartbeat.

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout_s``
            (the message carries its output).
    """
    with contextlib.ExitStack() as stack:
        if path is None:
            path = stack.enter_context(tempfile.TemporaryDirectory(prefix="chroma-"))
        data = Path(path)
        data.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log_path = data / f"server-{port}.log"
        log = stack.enter_context(open(log_path, "wb"))
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        proc = subprocess.Popen(
            [chroma_executable(), "run", "--path", str(data), "--host", host, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        # Beside the log: a benchmark that measures the server's memory reads its pid here.
        (data / f"server-{port}.pid").write_text(str(proc.pid))
        try:
            deadline = time.monotonic() + timeout_s
            while not _heartbeat(host, port):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"chroma run exited with {proc.returncode}: {log_path.read_text(errors='replace')}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"chroma run did not answer on {host}:{port} within {timeout_s}s: "
                        f"{log_path.read_text(errors='replace')}"
                    )
                time.sleep(0.1)
            yield host, port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
