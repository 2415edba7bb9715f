"""MemoryConfig refuses bad settings at construction, naming the rule, the value and the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest

from langmem_tiers import ConfigError, MemoryConfig

# (id, changes, fragments the message must contain: the field/rule, the bad value, the fix)
INVALID: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("zero-context", {"context_tokens": 0}, ("context_tokens", "(0)", "positive integer")),
    ("negative-window", {"window_tokens": -5}, ("window_tokens", "(-5)", "positive integer")),
    ("float-window", {"window_tokens": 100.0}, ("window_tokens", "100.0", "positive integer")),
    ("bool-window", {"window_tokens": True}, ("window_tokens", "True", "positive integer")),
    ("str-summary", {"summary_tokens": "400"}, ("summary_tokens", "'400'", "positive integer")),
    ("zero-input", {"summary_input_tokens": 0}, ("summary_input_tokens", "(0)", "positive")),
    ("zero-max-chars", {"max_message_chars": 0}, ("max_message_chars", "(0)", "positive")),
    ("zero-batch", {"index_batch_size": 0}, ("index_batch_size", "(0)", "positive")),
    ("negative-recall", {"recall_tokens": -1}, ("recall_tokens", "(-1)", ">= 0")),
    ("float-recall-k", {"recall_k": 2.5}, ("recall_k", "2.5", ">= 0")),
    ("negative-keyword-cache", {"keyword_cache_mb": -1}, ("keyword_cache_mb", "(-1)", ">= 0")),
    ("ratio-one", {"window_low_ratio": 1.0}, ("window_low_ratio", "1.0", "between 0 and 1")),
    ("ratio-zero", {"window_low_ratio": 0.0}, ("window_low_ratio", "0.0", "between 0 and 1")),
    ("ratio-nan", {"window_low_ratio": float("nan")}, ("window_low_ratio", "nan", "between 0 and 1")),
    (
        "window-over-context",
        {"window_tokens": 5000, "context_tokens": 4000},
        ("window_tokens (5000)", "context_tokens (4000)", "lower window_tokens or raise context_tokens"),
    ),
    (
        "summary-over-window",
        {"summary_tokens": 600, "window_tokens": 512},
        (
            "summary_tokens (600) must be smaller than window_tokens (512)",
            "lower summary_tokens or raise window_tokens",
        ),
    ),
    ("summary-equals-window", {"summary_tokens": 512, "window_tokens": 512}, ("summary_tokens (512)",)),
    (
        "shares-over-context",
        {"context_tokens": 2500, "window_tokens": 2000, "summary_tokens": 400, "recall_tokens": 800},
        ("2000 + 400 + 800", "context_tokens (2500)", "raise context_tokens or lower one of the shares"),
    ),
    ("profile-related-only", {"profile_related_only": "yes"}, ("profile_related_only", "'yes'", "True or False")),
    ("summary-role", {"summary_role": "tool"}, ("summary_role", "'tool'", "system, user or assistant")),
    (
        "oversize-policy",
        {"oversize_policy": "drop"},
        ("oversize_policy", "'drop'", "truncate, keep or error"),
    ),
    (
        "negative-retry",
        {"summary_retry_base_s": -1.0},
        ("-1.0", "summary_retry_base_s <= summary_retry_max_s"),
    ),
    (
        "retry-max-below-base",
        {"summary_retry_base_s": 10.0, "summary_retry_max_s": 5.0},
        ("10.0s .. 5.0s", "0 <= summary_retry_base_s"),
    ),
]


@pytest.mark.parametrize(("changes", "fragments"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_config_names_rule_value_and_fix(changes: dict[str, Any], fragments: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        MemoryConfig(**changes)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("changes", "fragments"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_with_changes_validates_again(changes: dict[str, Any], fragments: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragments[0])):
        MemoryConfig().with_changes(**changes)


def test_defaults_are_valid_and_consistent() -> None:
    config = MemoryConfig()
    assert config.window_tokens + config.summary_tokens + config.recall_tokens <= config.context_tokens
    assert config.window_low_tokens == int(config.window_tokens * config.window_low_ratio)


def test_with_changes() -> None:
    config = MemoryConfig().with_changes(window_tokens=1000, summary_tokens=200)
    assert (config.window_tokens, config.summary_tokens) == (1000, 200)
    with pytest.raises(ConfigError, match="unknown MemoryConfig field"):
        MemoryConfig().with_changes(window_size=10)


def test_config_is_frozen() -> None:
    config = MemoryConfig()
    with pytest.raises(AttributeError):
        config.window_tokens = 10  # type: ignore[misc]


def test_bool_recall_k_refused() -> None:
    with pytest.raises(ConfigError):
        MemoryConfig(recall_k=True)


@pytest.mark.parametrize("changes", [{"window_low_ratio": "0.5"}, {"summary_retry_base_s": "1"}])
def test_non_numeric_floats_are_config_errors(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        MemoryConfig(**changes)


def test_nan_retry_refused() -> None:
    with pytest.raises(ConfigError):
        MemoryConfig(summary_retry_base_s=float("nan"))
