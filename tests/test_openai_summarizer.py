"""OpenAISummarizer against a real loopback OpenAI server through the real openai client."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest

from langmem_tiers.errors import ConfigError, SummarizerError
from langmem_tiers.messages import Message
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest
from langmem_tiers.summarizers.openai import DEFAULT_SYSTEM_PROMPT, OpenAISummarizer
from tests.support.openai_server import (
    Behaviour,
    Disconnect,
    FakeOpenAIServer,
    Garbage,
    HTTPError,
    Reply,
    ToolCallSpec,
)

pytest.importorskip("openai")

# The client's timeout; 2 s, as in test_openai_embedder.py (0.5 s once timed out an immediate reply there
# on a 2-core machine under a full test run).
TIMEOUT = 2.0

REQUEST = SummaryRequest(
    previous_summary="User is Ada, lives in Paris.",
    messages=(
        Message("user", "My flight to Oslo is on 2024-05-03.", created_at=1714000000.0),
        Message("assistant", "Noted: Oslo, 3 May."),
    ),
    max_tokens=200,
    count_tokens=lambda text: len(text.split()),
)

# Each row: what the server does, and a fragment of the SummarizerError message.
FAILURES: list[tuple[str, Behaviour, str]] = [
    ("http-500", HTTPError(500), "InternalServerError"),
    ("http-429", HTTPError(429), "RateLimitError"),
    ("http-401", HTTPError(401), "AuthenticationError"),
    ("timeout", Reply("too late", delay=TIMEOUT * 6), "APITimeoutError"),
    ("disconnect", Disconnect(), "APIConnectionError"),
    ("empty", Reply(""), "empty reply"),
    ("whitespace", Reply("  \n "), "empty reply"),
    ("tool-calls", Reply(None, tool_calls=[ToolCallSpec("save", {"x": 1})]), "non-text reply"),
    ("refusal", Reply(None, refusal="I can't help with that."), "refused"),
    ("truncated", Reply("User is Ada and", finish_reason="length"), "cut at max_tokens"),
    ("not-json", Garbage(b"<html>502 Bad Gateway</html>"), "JSONDecodeError"),
    ("wrong-shape", Garbage(b'{"unexpected": true}'), "malformed response"),
]
IDS = [row[0] for row in FAILURES]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
async def summarizer(server: FakeOpenAIServer) -> AsyncIterator[OpenAISummarizer]:
    s = OpenAISummarizer("gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=TIMEOUT)
    yield s
    await s.aclose()


def check_sent(server: FakeOpenAIServer) -> None:
    (body,) = server.bodies("chat")
    assert body["model"] == "gpt-4o-mini"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] > REQUEST.max_tokens
    system, user = body["messages"]
    assert system == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert "User is Ada, lives in Paris." in user["content"]
    assert "[2024-04-24 23:06] user: My flight to Oslo is on 2024-05-03." in user["content"]
    assert "assistant: Noted: Oslo, 3 May." in user["content"]
    assert "at most 200 tokens" in user["content"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_is_a_summarizer(summarizer: OpenAISummarizer) -> None:
    assert isinstance(summarizer, Summarizer)


def test_summarize_sends_prompt_and_returns_stripped_text(
    server: FakeOpenAIServer, summarizer: OpenAISummarizer
) -> None:
    server.push(Reply("  Ada (Paris) flies to Oslo on 2024-05-03.\n"))
    assert summarizer.summarize(REQUEST) == "Ada (Paris) flies to Oslo on 2024-05-03."
    check_sent(server)
    assert server.pending == []


async def test_asummarize_sends_prompt_and_returns_stripped_text(
    server: FakeOpenAIServer, summarizer: OpenAISummarizer
) -> None:
    server.push(Reply("  Ada (Paris) flies to Oslo on 2024-05-03.\n"))
    assert await summarizer.asummarize(REQUEST) == "Ada (Paris) flies to Oslo on 2024-05-03."
    check_sent(server)


def test_compress_uses_compress_prompt(server: FakeOpenAIServer, summarizer: OpenAISummarizer) -> None:
    server.push(Reply("Ada, Paris."))
    request = SummaryRequest("User is Ada, lives in Paris.", (), 5, len, compress=True)
    assert summarizer.summarize(request) == "Ada, Paris."
    user = server.bodies("chat")[0]["messages"][1]["content"]
    assert user.startswith("Shorten this conversation summary to at most 5 tokens")
    assert "User is Ada, lives in Paris." in user


@pytest.mark.parametrize(("case", "behaviour", "fragment"), FAILURES, ids=IDS)
def test_summarize_failures_raise_summarizer_error(
    server: FakeOpenAIServer, summarizer: OpenAISummarizer, case: str, behaviour: Behaviour, fragment: str
) -> None:
    server.push(behaviour)
    start = time.monotonic()
    with pytest.raises(SummarizerError, match=fragment) as info:
        summarizer.summarize(REQUEST)
    assert time.monotonic() - start < TIMEOUT * 4  # no retries, no waiting out the delay
    assert len(server.requests) == 1
    if "reply" not in fragment and "refused" not in fragment and "cut" not in fragment:
        assert info.value.__cause__ is not None


@pytest.mark.parametrize(("case", "behaviour", "fragment"), FAILURES, ids=IDS)
async def test_asummarize_failures_raise_summarizer_error(
    server: FakeOpenAIServer, summarizer: OpenAISummarizer, case: str, behaviour: Behaviour, fragment: str
) -> None:
    server.push(behaviour)
    start = time.monotonic()
    with pytest.raises(SummarizerError, match=fragment):
        await summarizer.asummarize(REQUEST)
    assert time.monotonic() - start < TIMEOUT * 4
    assert len(server.requests) == 1


def test_max_retries_retries_server_errors(server: FakeOpenAIServer) -> None:
    s = OpenAISummarizer(base_url=server.base_url, api_key="sk-test", timeout=TIMEOUT, max_retries=1)
    server.push(HTTPError(503, retry_after=0), Reply("Ada."))
    assert s.summarize(REQUEST) == "Ada."
    s.close()
    assert len(server.requests) == 2


def test_injected_clients_are_used(server: FakeOpenAIServer) -> None:
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="sk-injected", max_retries=0)
    aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-injected", max_retries=0)
    s = OpenAISummarizer("my-model", client=client, async_client=aclient)
    server.push(Reply("Ada."))
    assert s.summarize(REQUEST) == "Ada."
    assert server.requests[0].headers["authorization"] == "Bearer sk-injected"
    assert server.bodies("chat")[0]["model"] == "my-model"
    s.close()
    assert not client.is_closed()  # injected clients belong to the caller
    client.close()


def test_from_env(server: FakeOpenAIServer) -> None:
    assert OpenAISummarizer.from_env({}) is None
    assert OpenAISummarizer.from_env({"OPENAI_API_KEY": ""}) is None
    s = OpenAISummarizer.from_env(
        {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "gpt-env"}
    )
    assert s is not None
    assert s.model == "gpt-env"
    server.push(Reply("Ada."))
    assert s.summarize(REQUEST) == "Ada."
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    default = OpenAISummarizer.from_env({"OPENAI_API_KEY": "sk-env"})
    assert default is not None
    assert default.model == "gpt-4o-mini"
    s.close()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"model": ""}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"temperature": 3}, "temperature"),
        ({"prompt": "Summarize {conversation}"}, "prompt"),
        ({"compress_prompt": "{"}, "compress_prompt"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        OpenAISummarizer(api_key="sk-test", **kwargs)  # type: ignore[arg-type]


def test_missing_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAISummarizer()


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from langmem_tiers.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'langmem-tiers\[openai\]'"):
        OpenAISummarizer(api_key="sk-test")


def test_server_streams_and_returns_tool_calls_like_openai(server: FakeOpenAIServer) -> None:
    # Others reuse the fake through ChatOpenAI-like clients: check the shapes they rely on.
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    server.push(Reply(None, tool_calls=[ToolCallSpec("save", {"x": 1}, id="call_1")]))
    out = client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "save", '{"x": 1}')
    assert out.usage is not None
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens

    server.push(Reply("a streamed summary of some length"))
    chunks = list(client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a streamed summary of some length"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None

    echo = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert echo.choices[0].message.content == "echo: hi"
    client.close()
