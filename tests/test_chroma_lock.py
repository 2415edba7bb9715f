"""An embedded Chroma folder belongs to one process: a second process is refused with a typed error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from langmem_tiers.errors import VectorStoreLockedError
from langmem_tiers.recall.vector_store import LOCK_FILE, ChromaStore

pytest.importorskip("chromadb")

ROOT = Path(__file__).parents[1]

# Opens the folder in a fresh interpreter and prints the outcome on one line.
CHILD = textwrap.dedent("""
    import sys
    from langmem_tiers.errors import VectorStoreLockedError
    from langmem_tiers.recall.vector_store import ChromaStore
    try:
        store = ChromaStore.persistent(sys.argv[1], collection="locked")
    except VectorStoreLockedError as e:
        print("LOCKED", e, flush=True)
        raise SystemExit(3)
    store.upsert(["child"], [[0.0, 1.0]], None, [{"ns": 2}])
    print("OPENED", store.count(), flush=True)
    if len(sys.argv) > 2:
        sys.stdin.readline()  # hold the folder until the parent says so (or kills us)
    store.close()
""")


def _child(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(folder), *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_second_process_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    store = ChromaStore.persistent(folder, collection="locked")
    store.upsert(["parent"], [[1.0, 0.0]], None, [{"ns": 1}])
    refused = _child(folder)
    assert refused.returncode == 3, refused.stderr
    line = refused.stdout.strip()
    assert line.startswith("LOCKED")
    assert f"pid {os.getpid()}" in line
    assert f"chroma run --path {folder}" in line
    assert 'chroma="http://127.0.0.1:8000"' in line
    assert store.count() == 1  # the refused process changed nothing
    store.close()
    opened = _child(folder)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == "OPENED 2"


def test_lock_dies_with_its_process(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), "hold"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "OPENED 1"
        with pytest.raises(VectorStoreLockedError, match=f"pid {child.pid}") as info:
            ChromaStore.persistent(folder, collection="locked")
        assert isinstance(info.value, RuntimeError)  # a RecallError: callers that catch it keep working
        child.kill()  # no close(): the kernel drops the lock with the process
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        for pipe in (child.stdin, child.stdout, child.stderr):  # closed here, not by the garbage collector
            if pipe is not None:
                pipe.close()
    store = ChromaStore.persistent(folder, collection="locked")
    assert [g.id for g in store.get(["child"])] == ["child"]
    store.close()


def test_one_process_shares_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "chroma"
    first = ChromaStore.persistent(folder, collection="shared")
    monkeypatch.chdir(tmp_path)
    second = ChromaStore.persistent("chroma", collection="shared")  # a relative path to the same folder
    assert second.folder == first.folder == folder.resolve()
    first.upsert(["a"], [[1.0, 0.0]], None, [{"ns": 1}])
    assert second.count() == 1
    first.close()
    first.close()  # idempotent
    second.upsert(["b"], [[0.0, 1.0]], None, [{"ns": 1}])  # still held by the second store
    refused = _child(folder)
    assert refused.returncode == 3, refused.stderr
    second.close()
    assert (folder / LOCK_FILE).exists()


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    from langmem_tiers.errors import ConfigError

    with pytest.raises(ConfigError, match="is a file"):
        ChromaStore.persistent(path, collection="nope")
