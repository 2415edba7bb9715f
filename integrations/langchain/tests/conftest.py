"""Shared fakes for the LangChain integration tests.

Only the remote LLM is faked. ``ScriptedChatModel`` is deterministic and faithful:
it calls the ``get_weather`` tool when asked about the weather (as a tool-calling
model would), answers from a tool result, streams word by word, and records every
input it was given so tests can assert on what reached the model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# --import-mode=importlib puts no test folder on sys.path; the shared fakes live beside this file.
sys.path.insert(0, str(Path(__file__).parent))

from lc_fakes import ScriptedChatModel


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()
