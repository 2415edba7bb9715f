"""A tiny run of ``benchmarks/load.py`` (the full 100k-message run is not a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_load_benchmark_smoke(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "load.py"), "--messages", "400", "--sessions", "8",
         "--writers", "4", "--readers", "2", "--counter", "words", "--path", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lost 0, duplicates 0, errors 0" in result.stdout
    assert "integrity ok" in result.stdout
