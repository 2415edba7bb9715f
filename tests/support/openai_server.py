"""A real loopback HTTP server that speaks the OpenAI REST protocol, for tests.

It serves ``POST /v1/chat/completions`` (plain and ``stream=true`` SSE),
``POST /v1/embeddings`` (``float`` and ``base64`` encodings) and ``GET /v1/models``
on 127.0.0.1 with an OS-chosen port, so the real ``openai`` client (and anything
built on it: LangChain ``ChatOpenAI``, LlamaIndex ``OpenAI``) runs its whole HTTP
stack against it: serialization, status handling, timeouts, retries.

Scripting: behaviours pushed with :meth:`FakeOpenAIServer.push` are consumed in
order, each by the first request to an endpoint it applies to; when none is
queued the endpoint's default handler answers (chat: echoes the last user
message; embeddings: deterministic unit vectors). Every request is recorded.

Example:
    >>> import openai
    >>> with FakeOpenAIServer() as server:
    ...     server.push(Reply("hello"))
    ...     client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    ...     out = client.chat.completions.create(
    ...         model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    ...     out.choices[0].message.content, server.requests[0].json["messages"][0]["content"]
    ('hello', 'hi')
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Endpoint = Literal["chat", "embeddings"]

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"

# Native sizes of OpenAI's embedding models; other models default to DEFAULT_EMBEDDING_DIMENSION.
EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
DEFAULT_EMBEDDING_DIMENSION = 1536

# status -> (type, code, message) as OpenAI sends them.
_ERROR_TYPES = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Country not supported."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


# ---------------------------------------------------------------- behaviours


@dataclass(frozen=True)
class ToolCallSpec:
    """A function call the fake model requests; ``arguments`` is JSON text (dicts are dumped)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    def to_json(self, index: int) -> dict[str, Any]:
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(dict(self.arguments))
        return {
            "id": self.id or f"call_{index}_{uuid.uuid4().hex[:16]}",
            "type": "function",
            "function": {"name": self.name, "arguments": args},
        }


@dataclass(frozen=True)
class Reply:
    """A chat completion. ``text=None`` sends ``content: null`` (as OpenAI does with tool calls).

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``;
    pass ``"length"`` to imitate a reply cut at ``max_tokens``.
    """

    text: str | None = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    finish_reason: str | None = None
    refusal: str | None = None
    delay: float = 0.0
    endpoint: Endpoint | None = "chat"


@dataclass(frozen=True)
class Vectors:
    """An embeddings response with exactly these vectors (any count or length: for error tests)."""

    vectors: Sequence[Sequence[float]]
    delay: float = 0.0
    endpoint: Endpoint | None = "embeddings"


@dataclass(frozen=True)
class HTTPError:
    """An HTTP error with OpenAI's error body ``{"error": {message, type, param, code}}``.

    ``endpoint=None`` (the default) lets any endpoint consume it. ``retry_after`` sets the
    ``retry-after`` header, which the openai client honours when it retries.
    """

    status: int = 500
    message: str | None = None
    type: str | None = None
    code: str | None = None
    retry_after: float | None = None
    delay: float = 0.0
    endpoint: Endpoint | None = None


@dataclass(frozen=True)
class Garbage:
    """A raw body (``application/json`` by default) that is not what the client expects."""

    body: bytes = b"<html>502 Bad Gateway</html>"
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0
    endpoint: Endpoint | None = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without answering (after ``delay`` seconds)."""

    delay: float = 0.0
    endpoint: Endpoint | None = None


Behaviour = Reply | Vectors | HTTPError | Garbage | Disconnect
Handler = Callable[["RecordedRequest"], Behaviour]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received; ``json`` is the parsed body (None if not JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any = field(default=None)

    @property
    def endpoint(self) -> Endpoint | None:
        if self.path == CHAT_PATH:
            return "chat"
        if self.path == EMBEDDINGS_PATH:
            return "embeddings"
        return None


# ---------------------------------------------------------------- defaults


def fake_embedding(text: str, dimension: int) -> list[float]:
    """A deterministic unit vector for ``text``, rounded to float32 as OpenAI's are.

    Equal texts give equal vectors; different texts give nearly orthogonal ones.
    """
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    raw = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    unit = [x / norm for x in raw]
    return list(struct.unpack(f"<{dimension}f", struct.pack(f"<{dimension}f", *unit)))


def echo_chat(request: RecordedRequest) -> Behaviour:
    """Default chat handler: replies ``"echo: <last user message text>"``."""
    messages = (request.json or {}).get("messages") or []
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return Reply(f"echo: {_text_of(last.get('content')) if last else ''}")


def embed_inputs(request: RecordedRequest) -> Behaviour:
    """Default embeddings handler: :func:`fake_embedding` of each input."""
    body = request.json or {}
    model = str(body.get("model", ""))
    dimension = int(body.get("dimensions") or EMBEDDING_DIMENSIONS.get(model, DEFAULT_EMBEDDING_DIMENSION))
    return Vectors([fake_embedding(_input_key(item), dimension) for item in _inputs(body)])


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _inputs(body: Mapping[str, Any]) -> list[Any]:
    raw = body.get("input")
    # OpenAI accepts a string, a list of strings, a token list or a list of token lists.
    if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
        return [raw]
    return list(raw) if isinstance(raw, list) else []


def _input_key(item: Any) -> str:
    return item if isinstance(item, str) else json.dumps(item)


def _count_tokens(text: str) -> int:
    # Not tiktoken: usage numbers only need to be plausible and deterministic.
    return max(1, len(text.split())) if text else 0


# ---------------------------------------------------------------- server


class FakeOpenAIServer:
    """The scriptable loopback server; use as a context manager.

    Args:
        chat: default handler for chat completions (when nothing is queued).
        embeddings: default handler for embeddings.
        api_key: when set, requests without ``Authorization: Bearer <api_key>`` get a 401.
    """

    def __init__(self, *, chat: Handler = echo_chat, embeddings: Handler = embed_inputs,
                 api_key: str | None = None) -> None:
        self.chat_handler = chat
        self.embeddings_handler = embeddings
        self.api_key = api_key
        self._queue: list[Behaviour] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeOpenAIServer:
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        # Handlers may be sleeping on a scripted delay; closing must not wait for them.
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scripting and inspection

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started: use `with FakeOpenAIServer() as s:`")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as ``base_url`` to an OpenAI client: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *behaviours: Behaviour) -> None:
        """Queue behaviours; each is used once, in order, by the next request it applies to."""
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def pending(self) -> list[Behaviour]:
        """Queued behaviours not consumed yet (assert it is empty to check a script ran fully)."""
        with self._lock:
            return list(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._requests)

    def bodies(self, endpoint: Endpoint) -> list[Any]:
        """The parsed JSON bodies received on one endpoint."""
        return [r.json for r in self.requests if r.endpoint == endpoint]

    def clear(self) -> None:
        """Forget recorded requests and queued behaviours."""
        with self._lock:
            self._requests.clear()
            self._queue.clear()

    # -- used by the handler thread

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self, request: RecordedRequest) -> Behaviour:
        endpoint = request.endpoint
        with self._lock:
            for i, behaviour in enumerate(self._queue):
                if behaviour.endpoint is None or behaviour.endpoint == endpoint:
                    return self._queue.pop(i)
        handler = self.chat_handler if endpoint == "chat" else self.embeddings_handler
        return handler(request)

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server closes first; True if it closed."""
        return self._closing.wait(seconds) if seconds > 0 else False


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        request = self._read()
        if request.path.rstrip("/") == MODELS_PATH:
            models = [*EMBEDDING_DIMENSIONS, "gpt-4o-mini", "gpt-4o"]
            self._json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "system"} for m in models]})
        else:
            self._error(HTTPError(404, f"Unknown request URL: GET {request.path}", code="unknown_url"))

    def do_POST(self) -> None:
        request = self._read()
        if request.endpoint is None:
            self._error(HTTPError(404, f"Unknown request URL: POST {request.path}", code="unknown_url"))
            return
        key = self.fake.api_key
        if key is not None and request.headers.get("authorization") != f"Bearer {key}":
            self._error(HTTPError(401, "Incorrect API key provided."))
            return
        if not isinstance(request.json, dict):
            self._error(HTTPError(400, "We could not parse the JSON body of your request."))
            return
        problem = _validate(request)
        if problem:
            self._error(HTTPError(400, problem))
            return
        behaviour = self.fake._next(request)
        if self.fake._sleep(behaviour.delay):
            return
        try:
            self._respond(request, behaviour)
        except TypeError as e:
            # A scripting mistake in the test: answer so the client error carries the explanation.
            self._error(HTTPError(500, f"fake server script error: {e}", type="fake_script_error"))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer

    # -- reading and writing

    def _read(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command, path=self.path.split("?", 1)[0],
            headers={k.lower(): v for k, v in self.headers.items()}, body=body, json=parsed)
        self.fake._record(request)
        return request

    def _respond(self, request: RecordedRequest, behaviour: Behaviour) -> None:
        if isinstance(behaviour, HTTPError):
            self._error(behaviour)
        elif isinstance(behaviour, Garbage):
            self._raw(behaviour.status, behaviour.body, behaviour.content_type)
        elif isinstance(behaviour, Disconnect):
            self.close_connection = True
        elif isinstance(behaviour, Reply):
            if request.endpoint != "chat":
                raise TypeError(f"Reply pushed but {request.path} received; push Vectors for embeddings")
            if request.json.get("stream"):
                self._stream_chat(request.json, behaviour)
            else:
                self._json(200, _chat_completion(request.json, behaviour))
        elif request.endpoint == "embeddings":
            self._json(200, _embeddings(request.json, behaviour))
        else:
            raise TypeError(f"Vectors pushed but {request.path} received; push Reply for chat")

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _raw(self, status: int, body: bytes, content_type: str,
             headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _error(self, error: HTTPError) -> None:
        default_type, default_code, default_message = _ERROR_TYPES.get(
            error.status, ("api_error", None, f"HTTP {error.status}"))
        headers = {"retry-after": str(error.retry_after)} if error.retry_after is not None else {}
        self._json(error.status, {"error": {
            "message": error.message or default_message, "type": error.type or default_type,
            "param": None, "code": error.code or default_code}}, headers)

    def _stream_chat(self, body: Mapping[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in _chat_chunks(body, reply):
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


# ---------------------------------------------------------------- response bodies


def _validate(request: RecordedRequest) -> str | None:
    """The 400 messages OpenAI gives for the mistakes a client library could make."""
    body = request.json
    if not body.get("model"):
        return "you must provide a model parameter"
    if request.endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "[] is too short - 'messages'"
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant",
                                                                 "tool", "function"):
                return f"Invalid value for 'messages[{i}].role'"
        return None
    inputs = _inputs(body)
    if not inputs:
        return "'$.input' is invalid. Please check the API reference."
    if any(item == "" for item in inputs):
        return "'$.input' is invalid. Please check the API reference: input cannot be an empty string."
    if len(inputs) > 2048:
        return "'$.input' is invalid: at most 2048 inputs per request."
    dims = body.get("dimensions")
    if dims is not None and body.get("model") == "text-embedding-ada-002":
        return "This model does not support specifying dimensions."
    if dims is not None and (not isinstance(dims, int) or dims < 1):
        return f"Invalid 'dimensions': {dims!r}"
    return None


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    return sum(_count_tokens(_text_of(m.get("content"))) for m in body.get("messages", []))


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _chat_completion(body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": reply.refusal}
    if reply.tool_calls:
        message["tool_calls"] = [c.to_json(i) for i, c in enumerate(reply.tool_calls)]
    prompt = _prompt_tokens(body)
    completion = _count_tokens(reply.text or "")
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _finish_reason(reply)}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
        "system_fingerprint": "fp_fake",
    }


def _chat_chunks(body: Mapping[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body["model"],
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": "" if reply.text is not None else None})
    for piece in _pieces(reply.text or ""):
        yield chunk({"content": piece})
    for i, call in enumerate(reply.tool_calls):
        full = call.to_json(i)
        yield chunk({"tool_calls": [{"index": i, "id": full["id"], "type": "function",
                                     "function": {"name": full["function"]["name"], "arguments": ""}}]})
        for piece in _pieces(full["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(reply))
    if (body.get("stream_options") or {}).get("include_usage"):
        prompt, completion = _prompt_tokens(body), _count_tokens(reply.text or "")
        yield {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body["model"],
               "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion}}


def _pieces(text: str, size: int = 8) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i:i + size]


def _embeddings(body: Mapping[str, Any], vectors: Vectors) -> dict[str, Any]:
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for i, vector in enumerate(vectors.vectors):
        values = [float(x) for x in vector]
        embedding: Any = (base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
                          if as_base64 else values)
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(_count_tokens(_input_key(item)) for item in _inputs(body))
    return {"object": "list", "data": data, "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
