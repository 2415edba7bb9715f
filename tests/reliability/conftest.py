"""Reliability suite options: ``--runslow`` runs the tests marked ``slow`` (long crash loops).

``tests/conftest.py`` does not define ``--runslow``; it is defined here. When pytest is started
from the repository root this conftest is not an "initial" one and the option is not
registered, so the hook reads it with a default and slow tests stay skipped.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption("--runslow", action="store_true", default=False,
                         help="run tests marked slow (long crash loops, load)")
    except ValueError:  # another conftest registered it first
        pass


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow", default=False):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords and "reliability" in str(item.path):
            item.add_marker(skip)
