"""The inspector over HTTP (Starlette's TestClient, real SQLite journal, keyword recall):
token, Host and cross-site rules, read-only, --user, paging, every JSON endpoint with bad input."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the inspector extra is not installed")

from starlette.testclient import TestClient

from langmem_tiers import TieredMemory
from langmem_tiers.cli.conversation import demo_turns
from langmem_tiers.cli.demo import DEMO_CONFIG
from langmem_tiers.errors import ConfigError
from langmem_tiers.inspector.app import create_app
from langmem_tiers.inspector.deployment import Deployment
from langmem_tiers.inspector.settings import InspectorSettings

TOKEN = "test-token-0123456789abcdef"
BASE = "http://127.0.0.1:8765"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEMO = {"session_id": "demo", "user_id": "demo-user"}
LENA = "When and where is Lena's wedding?"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo conversation (two days), plus a second user, stored keyword-only."""
    path = tmp_path_factory.mktemp("inspector")
    with TieredMemory.open(path, session_id="demo", user_id="demo-user", config=DEMO_CONFIG,
                           embedder=False) as memory:
        for turn in demo_turns(2, 24):
            memory.add_messages(list(turn.messages))
        memory.flush()
        other = memory.for_session("bob-chat", user_id="bob")
        other.add("user", "Bob's secret is the blue door code 4471.")
        other.add("assistant", "Noted.")
    return path


@pytest.fixture
def serve(folder: Path, tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """Starts an inspector on a copy of the demo memory; options as InspectorSettings.resolve takes them."""
    import shutil

    deployments: list[Deployment] = []

    def start(copy: bool = True, **options: Any) -> TestClient:
        path = folder
        if copy:
            path = tmp_path / f"memory{len(deployments)}"
            shutil.copytree(folder, path)
        options.setdefault("token", TOKEN)
        settings = InspectorSettings.resolve(str(path), vectors=False, **options)
        deployment = Deployment.open(settings)
        deployments.append(deployment)
        return TestClient(create_app(settings, deployment), base_url=BASE, follow_redirects=False)

    yield start
    for deployment in deployments:
        deployment.close()


def api(client: TestClient, endpoint: str, body: Any, **headers: str) -> Any:
    return client.post(f"/api/{endpoint}", content=json.dumps(body),
                       headers={**AUTH, "Content-Type": "application/json", **headers})


# --- settings: decided before anything listens ------------------------------------------------------

def test_non_loopback_bind_without_explicit_token_is_refused(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGMEM_TIERS_INSPECTOR_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="explicit --token"):
        InspectorSettings.resolve(str(folder), host="0.0.0.0")
    assert InspectorSettings.resolve(str(folder), host="0.0.0.0", token=TOKEN).token == TOKEN
    monkeypatch.setenv("LANGMEM_TIERS_INSPECTOR_TOKEN", TOKEN)
    assert InspectorSettings.resolve(str(folder), host="192.0.2.7").token == TOKEN


def test_a_token_is_always_generated_and_printed_in_the_url(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGMEM_TIERS_INSPECTOR_TOKEN", raising=False)
    a = InspectorSettings.resolve(str(folder))
    b = InspectorSettings.resolve(str(folder))
    assert len(a.token) >= 24
    assert a.token != b.token
    assert a.url() == f"http://127.0.0.1:8765/?token={a.token}"
    with pytest.raises(ConfigError, match="at least 16"):
        InspectorSettings.resolve(str(folder), token="short")
    with pytest.raises(ConfigError, match=r"no journal\.sqlite3"):
        InspectorSettings.resolve(str(folder / "typo"))


def test_cli_refuses_a_public_bind_without_token(folder: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from langmem_tiers.cli.main import main

    monkeypatch.delenv("LANGMEM_TIERS_INSPECTOR_TOKEN", raising=False)
    assert main(["serve", "--path", str(folder), "--host", "0.0.0.0"]) == 2
    assert "pass an explicit --token" in capsys.readouterr().err


# --- token, Host, cross-site -------------------------------------------------------------------------

def test_every_page_and_endpoint_needs_the_token(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    for path in ("/", "/session?session=demo&user=demo-user", "/api/sessions", "/api/openapi.json",
                 "/session/export.jsonl?session=demo&user=demo-user"):
        response = client.get(path)
        assert response.status_code == 401, path
        assert "token" in response.json()["message"]
    assert client.get("/", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert client.post("/api/forget", json={**DEMO, "target": "user"}).status_code == 401
    assert client.get("/static/inspector.css").status_code == 200  # assets hold no data


def test_the_token_in_the_url_becomes_a_cookie(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    first = client.get(f"/session?session=demo&user=demo-user&token={TOKEN}")
    assert first.status_code == 303
    assert first.headers["location"] == "/session?session=demo&user=demo-user"  # the token leaves the address bar
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()
    page = client.get(first.headers["location"])
    assert page.status_code == 200
    assert "Timeline" in page.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.nip.io:8765", "10.0.0.5:8765"])
def test_foreign_host_headers_are_refused(serve: Callable[..., TestClient], host: str) -> None:
    client = serve(copy=False)
    response = client.get("/api/sessions", headers={**AUTH, "Host": host})
    assert response.status_code == 403
    assert "DNS rebinding" in response.json()["message"]


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"])
def test_loopback_host_headers_are_accepted(serve: Callable[..., TestClient], host: str) -> None:
    client = serve(copy=False)
    assert client.get("/api/sessions", headers={**AUTH, "Host": host}).status_code == 200


def test_allowed_host_names_are_accepted(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False, allow_hosts=("inspector.lan",))
    assert client.get("/api/sessions", headers={**AUTH, "Host": "inspector.lan:8765"}).status_code == 200


def _login(client: TestClient) -> None:
    assert client.get(f"/?token={TOKEN}").status_code == 303


def _remember_form(client: TestClient, text: str, csrf: str | None, **headers: str) -> Any:
    data = {"text": text, "kind": "fact"} | ({"csrf": csrf} if csrf is not None else {})
    return client.post("/session/remember?session=demo&user=demo-user", data=data, headers=headers)


def test_form_posts_need_the_csrf_token_and_the_same_site(serve: Callable[..., TestClient]) -> None:
    client = serve()
    _login(client)
    page = client.get("/session?session=demo&user=demo-user").text
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    assert _remember_form(client, "forged one", None).status_code == 403
    assert _remember_form(client, "forged two", "0" * 32).status_code == 403
    cross = _remember_form(client, "forged three", csrf, Origin="http://evil.example")
    assert cross.status_code == 403
    assert "cross-site" in cross.json()["message"]
    assert _remember_form(client, "forged four", csrf, **{"Sec-Fetch-Site": "cross-site"}).status_code == 403
    ok = _remember_form(client, "The staging database is db-07.", csrf, Origin=BASE,
                        **{"Sec-Fetch-Site": "same-origin"})
    assert ok.status_code == 303
    page = client.get(ok.headers["location"]).text
    assert "The staging database is db-07." in page
    assert "forged" not in page


def test_cookie_authenticated_api_calls_need_the_csrf_header(serve: Callable[..., TestClient]) -> None:
    client = serve()
    _login(client)
    body = json.dumps({**DEMO, "text": "cookie call"})
    plain = client.post("/api/remember", content=body, headers={"Content-Type": "application/json"})
    assert plain.status_code == 403
    assert plain.json()["error"] == "csrf"
    page = client.get("/session?session=demo&user=demo-user").text
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    ok = client.post("/api/remember", content=body, headers={"Content-Type": "application/json", "X-CSRF-Token": csrf})
    assert ok.status_code == 200
    assert ok.json()["record_id"] > 0
    # A form post (what another site can send without CORS) never reaches the API.
    form = client.post("/api/remember", data={"session_id": "demo", "text": "x"}, headers=AUTH)
    assert form.status_code == 415


# --- read-only and --user ----------------------------------------------------------------------------

def test_read_only_hides_and_refuses_every_mutation(serve: Callable[..., TestClient]) -> None:
    client = serve(read_only=True)
    _login(client)
    page = client.get("/session?session=demo&user=demo-user&q=" + LENA).text
    assert "read-only" in page
    assert "Remember</button>" not in page
    assert ">forget<" not in page
    assert "Lena is getting married" in page  # reading still works
    assert _remember_form(client, "nope", "x").status_code == 403
    forget = client.post("/session/forget?session=demo&user=demo-user", data={"target": "session", "confirm": "yes"})
    assert forget.status_code == 403
    for endpoint, body in (("add", {**DEMO, "messages": [{"role": "user", "content": "hi"}]}),
                           ("remember", {**DEMO, "text": "nope"}), ("forget", {**DEMO, "target": "session"})):
        response = api(client, endpoint, body)
        assert response.status_code == 403, endpoint
        assert response.json()["error"] == "read_only", endpoint
    assert api(client, "context", {**DEMO, "query": LENA}).status_code == 200
    assert client.get("/api/stats", params=DEMO, headers=AUTH).json()["messages"] > 0


def test_user_restricts_the_whole_server_to_one_user(serve: Callable[..., TestClient]) -> None:
    client = serve(user="demo-user")
    _login(client)
    index = client.get("/").text
    assert "demo" in index
    assert "bob" not in index
    sessions = client.get("/api/sessions", headers=AUTH).json()["sessions"]
    assert {s["user_id"] for s in sessions} == {"demo-user"}
    assert client.get("/session?session=bob-chat&user=bob").status_code == 403
    bob = {"session_id": "bob-chat", "user_id": "bob"}
    for endpoint, body in (("search", {**bob, "query": "door code"}), ("context", {**bob, "query": "door"}),
                           ("add", {**bob, "messages": [{"role": "user", "content": "hi"}]}),
                           ("forget", {**bob, "target": "user"})):
        response = api(client, endpoint, body)
        assert response.status_code == 403, endpoint
        assert response.json()["error"] == "out_of_scope", endpoint
    assert client.get("/api/stats", params=bob, headers=AUTH).status_code == 403
    # The user's own scope never reaches bob's data, and the user id may be left out.
    hits = api(client, "search", {"session_id": "demo", "query": "door code 4471", "scope": "user"}).json()["hits"]
    assert all("4471" not in h["text"] for h in hits)
    assert api(client, "search", {"session_id": "demo", "query": LENA}).status_code == 200


# --- pages: paging, query, forget, export ------------------------------------------------------------

def test_paging_walks_a_session_without_gaps(serve: Callable[..., TestClient]) -> None:
    client = serve(page_size=40)
    _login(client)
    total = client.get("/api/stats", params=DEMO, headers=AUTH).json()["messages"]
    seen: list[int] = []
    starts: list[int] = []
    last = url = "/session?session=demo&user=demo-user&after=0"
    pages = 0
    while url:
        page = client.get(url).text
        ids = [int(part.split('"', 1)[0]) for part in page.split('<li class="msg tier-')[1:]
               for part in [part.split(' id="m', 1)[1]]]
        assert len(ids) <= 40
        seen += ids
        starts.append(ids[0])
        last = url
        pages += 1
        nxt = page.split('id="next-page" href="', 1)
        url = nxt[1].split('"', 1)[0].replace("&amp;", "&") if len(nxt) > 1 else ""
    assert pages == -(-total // 40) > 1
    # ... and back: "previous" from the last page retraces the same pages.
    back: list[int] = []
    url = last
    while url:
        page = client.get(url).text
        back.append(int(page.split(' id="m', 1)[1].split('"', 1)[0]))
        prev = page.split('id="prev-page" href="', 1)
        url = prev[1].split('"', 1)[0].replace("&amp;", "&") if len(prev) > 1 else ""
    assert back == starts[::-1]
    # Tool results are folded under their call, so the list holds every message but folded results.
    folded = client.get("/session?session=demo&user=demo-user&after=0").text.count('class="result"')
    assert seen == sorted(set(seen))
    assert len(seen) + folded <= total
    window = client.get("/session?session=demo&user=demo-user").text  # opens on the window
    assert "tier-window" in window
    assert "tier-summarized" not in window.split("Timeline", 1)[1]
    assert client.get("/session?session=demo&user=demo-user&after=-3").status_code == 400
    assert client.get("/session?session=nope&user=demo-user").status_code == 404


def test_query_shows_the_context_explanation_and_score_parts(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    _login(client)
    page = client.get("/session", params={"session": "demo", "user": "demo-user", "q": LENA}).text
    explain = page.split('id="explain">', 1)[1].split("</pre>", 1)[0]
    assert "tokens: pinned" in explain
    assert "recall 0 " not in explain
    hits = page.split('id="hits"', 1)[1].split("</table>", 1)[0]
    assert "Lena is getting married in Porto" in hits
    assert '<td class="num">1</td>' in hits  # keyword rank 1
    # "in timeline" opens the page holding the hit's messages, marked as recalled.
    link = hits.split('class="show" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    timeline = client.get(link).text.split("Timeline", 1)[1]
    assert '<span class="badge recall">recalled</span>' in timeline
    assert "Lena is getting married" in timeline.split("recalled</span>", 1)[1][:600]
    assert client.get("/session/plot.svg?session=demo&user=demo-user").text.startswith("<svg")


def test_forget_asks_for_confirmation_then_erases(serve: Callable[..., TestClient]) -> None:
    client = serve()
    _login(client)
    found = api(client, "search", {**DEMO, "query": LENA}).json()["hits"]
    record = found[0]["record_id"]
    confirm = client.get(f"/session/forget?session=demo&user=demo-user&target={record}&back={LENA}")
    assert confirm.status_code == 200
    assert "cannot be undone" in confirm.text
    assert "Lena" in confirm.text
    csrf = confirm.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    form = {"csrf": csrf, "target": str(record), "back": LENA}
    unconfirmed = client.post("/session/forget?session=demo&user=demo-user", data=form)
    assert unconfirmed.status_code == 400
    assert "confirm" in unconfirmed.text
    done = client.post("/session/forget?session=demo&user=demo-user", data={**form, "confirm": "yes"})
    assert done.status_code == 303
    page = client.get(done.headers["location"]).text
    assert f"forgot record {record}" in page
    assert "Lena is getting married" not in page
    # A whole session: gone from the list.
    confirm = client.get("/session/forget?session=bob-chat&user=bob&target=session")
    assert "bob-chat" in confirm.text
    gone = client.post("/session/forget?session=bob-chat&user=bob",
                       data={"csrf": csrf, "target": "session", "confirm": "yes"})
    assert gone.status_code == 303
    assert "bob-chat" not in client.get("/").text.split("Sessions", 1)[1]
    assert client.get("/session/forget?session=demo&user=demo-user&target=everything").status_code == 400


def test_export_streams_every_message_as_jsonl(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    response = client.get("/session/export.jsonl?session=demo&user=demo-user", headers=AUTH)
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    lines = [json.loads(line) for line in response.text.splitlines()]
    total = client.get("/api/stats", params=DEMO, headers=AUTH).json()["messages"]
    assert len(lines) == total
    assert lines[0]["role"] == "user"


def test_sessions_page_lists_users_and_searches_ids(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    page = client.get("/", headers=AUTH).text
    assert "demo-user" in page
    assert "bob-chat" in page
    assert "langmem-tiers-inspector" not in page
    found = client.get("/?q=bob", headers=AUTH).text.split("<tbody>", 1)[1]
    assert "bob-chat" in found
    assert ">demo<" not in found


# --- the JSON API ------------------------------------------------------------------------------------

def test_api_round_trip(serve: Callable[..., TestClient]) -> None:
    client = serve()
    session = {"session_id": "api-chat", "user_id": "carol", "agent_id": "helper"}
    added = api(client, "add", {**session, "messages": [
        {"role": "user", "content": "My locker number at the gym is 318."},
        {"role": "assistant", "content": "Locker 318, noted."}]})
    assert added.status_code == 200
    assert [m["role"] for m in added.json()["messages"]] == ["user", "assistant"]
    assert all(isinstance(m["id"], int) for m in added.json()["messages"])
    record = api(client, "remember", {**session, "text": "Carol prefers window seats.", "kind": "preference",
                                      "pinned": True}).json()["record_id"]
    ctx = api(client, "context", {**session, "query": "Which seat?"}).json()
    assert ctx["pinned"] == ["Carol prefers window seats."]
    assert ctx["messages"][0]["role"] == "system"
    assert "window seats" in ctx["messages"][0]["content"]
    assert ctx["explain"].startswith(f"{ctx['tokens']['total']}/")
    hits = api(client, "search", {**session, "query": "window seats", "kinds": ["preference"]}).json()["hits"]
    assert hits[0]["record_id"] == record
    assert hits[0]["parts"]["keyword_rank"] == 1
    stats = client.get("/api/stats", params=session, headers=AUTH).json()
    assert stats["messages"] == 2
    assert stats["session"]["user_id"] == "carol"
    assert api(client, "forget", {**session, "target": record}).json() == {"removed": 1}
    assert api(client, "search", {**session, "query": "window seats"}).json()["hits"] == []
    assert api(client, "forget", {**session, "target": "session"}).json()["removed"] >= 1
    after = client.get("/api/stats", params=session, headers=AUTH)
    # The erased session is gone (404), or held afresh and empty where the core re-creates it.
    assert (after.status_code, after.json().get("messages", 0)) in ((404, 0), (200, 0)), after.text


def test_openapi_schema_documents_every_endpoint(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    schema = client.get("/api/openapi.json", headers=AUTH).json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/add", "/api/context", "/api/search", "/api/remember", "/api/forget", "/api/stats"} <= set(
        schema["paths"])
    assert schema["components"]["securitySchemes"]["token"]["scheme"] == "bearer"


BAD_REQUESTS = [
    ("add", {**DEMO}, 400, "messages"),
    ("add", {**DEMO, "messages": []}, 400, "non-empty list"),
    ("add", {**DEMO, "messages": ["hi"]}, 400, "object"),
    ("add", {**DEMO, "messages": [{"role": "wizard", "content": "hi"}]}, 400, "role"),
    ("add", {**DEMO, "messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}, 400, "unknown call"),
    ("add", {"messages": [{"role": "user", "content": "hi"}]}, 400, "session_id is required"),
    ("add", {**DEMO, "user_id": "", "messages": [{"role": "user", "content": "x"}]}, 400, "user_id must be"),
    ("add", {"session_id": "s", "agent_id": 5, "messages": [{"role": "user", "content": "x"}]}, 400, "agent_id"),
    ("context", {**DEMO, "budget": "lots"}, 400, "budget"),
    ("context", {**DEMO, "query": 7}, 400, "query must be a string"),
    ("context", {**DEMO, "querry": "typo"}, 400, "unknown field(s): querry"),
    ("context", {"session_id": "nobody-here", "user_id": "demo-user"}, 404, "no session"),
    ("search", {**DEMO, "query": "x", "k": -1}, 400, "k (-1)"),
    ("search", {**DEMO, "query": "x", "scope": "world"}, 400, "scope"),
    ("search", {**DEMO, "query": "x", "kinds": "fact"}, 400, "kinds must be a list"),
    ("search", {**DEMO}, 400, "query must be a string"),
    ("remember", {**DEMO, "text": ""}, 400, "non-empty text"),
    ("remember", {**DEMO, "text": "x", "importance": 7}, 400, "importance"),
    ("remember", {**DEMO, "text": "x", "pinned": "yes"}, 400, "pinned"),
    ("remember", {**DEMO, "text": "x", "kind": "turn"}, 400, "kind"),
    ("forget", {**DEMO, "target": "everything"}, 400, "target"),
    ("forget", {**DEMO, "target": 0}, 400, "target"),
    ("forget", {**DEMO, "target": True}, 400, "target"),
    ("forget", {**DEMO}, 400, "target"),
    ("add", [1, 2], 400, "JSON object"),
]


@pytest.mark.parametrize(("endpoint", "body", "status", "message"), BAD_REQUESTS,
                         ids=[f"{e}-{i}" for i, (e, *_rest) in enumerate(BAD_REQUESTS)])
def test_api_bad_input_gets_a_clear_4xx(serve: Callable[..., TestClient], endpoint: str, body: Any, status: int,
                                        message: str) -> None:
    client = serve()
    response = api(client, endpoint, body)
    assert response.status_code == status, response.text
    assert message in response.json()["message"]


def test_api_refuses_malformed_bodies(serve: Callable[..., TestClient]) -> None:
    client = serve(copy=False)
    headers = {**AUTH, "Content-Type": "application/json"}
    bad_json = client.post("/api/search", content=b"{not json", headers=headers)
    assert bad_json.status_code == 400
    assert "not valid JSON" in bad_json.json()["message"]
    assert client.post("/api/search", content=b"\xff\xfe", headers=headers).status_code == 400
    text = client.post("/api/search", content=b"{}", headers={**AUTH, "Content-Type": "text/plain"})
    assert text.status_code == 415
    assert "application/json" in text.json()["message"]
    huge = client.post("/api/add", content=b" " * (8 * 1024 * 1024 + 1), headers=headers)
    assert huge.status_code == 413
    missing = client.get("/api/stats", headers=AUTH)
    assert missing.status_code == 400
    assert "session_id" in missing.json()["message"]
    assert client.get("/api/stats", params={"session_id": "demo", "user_id": "demo-user", "x": "1"},
                      headers=AUTH).status_code == 400
    assert client.get("/api/nothing", headers=AUTH).status_code == 404
    assert client.get("/api/add", headers=AUTH).status_code == 405


# --- the tokens-per-tier plot ------------------------------------------------------------------------

def test_plot_stacks_tokens_by_tier_and_estimates_unsampled_messages() -> None:
    from langmem_tiers.inspector.views import render_plot, tier_of

    assert [tier_of(i, cursor=3, window_start=6) for i in (1, 3, 4, 5, 6, 9)] == \
        ["summarized", "summarized", "pending", "pending", "window", "window"]
    exact = render_plot([("summarized", 10), ("pending", 20), ("window", 30)])
    assert "summarized (10 tokens)" in exact
    assert "pending (20 tokens)" in exact
    assert "window (30 tokens)" in exact
    assert "estimated" not in exact
    # One slice per message here; with sampling, an uncounted message takes its slice's counted mean.
    many = [("summarized", 8 if i % 2 == 0 else -1) for i in range(240)] + [("window", 5)] * 120
    sampled = render_plot(many, sampled=True)
    assert "summarized (1920 tokens)" in sampled  # 240 messages x 8 tokens
    assert "window (600 tokens)" in sampled
    assert "360 messages, oldest to newest (tokens estimated from a sample)" in sampled


def test_serve_command_prints_the_url_with_its_token(folder: Path, tmp_path: Path) -> None:
    """The real command: a process that binds, prints http://127.0.0.1:PORT/?token=..., and answers it."""
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    path = tmp_path / "memory"
    shutil.copytree(folder, path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "LANGMEM_TIERS_INSPECTOR_TOKEN"}
    process = subprocess.Popen([sys.executable, "-m", "langmem_tiers.cli.main", "serve", "--path", str(path),
                                "--port", str(port), "--no-vectors"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(2)]
        url = lines[1].split("open ", 1)[1].strip()
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url.replace("/?", "/api/sessions?"), timeout=5) as response:
                    sessions = json.loads(response.read())["sessions"]
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert {"session_id": "demo", "user_id": "demo-user", "agent_id": None} in sessions
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/sessions", timeout=5)
        assert refused.value.code == 401
        refused.value.close()  # an HTTPError holds the response's socket open
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


def test_anonymous_and_agent_sessions_open_in_the_pages(serve: Callable[..., TestClient]) -> None:
    client = serve()
    for session in ({"session_id": "anon-1"}, {"session_id": "with-agent", "user_id": "dora", "agent_id": "bot"}):
        assert api(client, "add", {**session, "messages": [{"role": "user", "content": "Tea, no sugar."}]}) \
            .status_code == 200
    index = client.get("/", headers=AUTH).text
    assert "/session?session=anon-1" in index
    assert "/session?session=with-agent&amp;user=dora&amp;agent=bot" in index
    assert "Tea, no sugar." in client.get("/session?session=anon-1", headers=AUTH).text
    assert "Tea, no sugar." in client.get("/session?session=with-agent&user=dora&agent=bot", headers=AUTH).text
    # The same session id under another user or agent is another session.
    assert client.get("/session?session=with-agent&user=dora", headers=AUTH).status_code == 404
    assert client.get("/session?session=anon-1&user=", headers=AUTH).status_code == 400


def test_a_non_loopback_bind_accepts_its_own_address_only(folder: Path) -> None:
    settings = InspectorSettings.resolve(str(folder), host="192.0.2.7", token=TOKEN)
    assert settings.host_allowed("192.0.2.7:8765")
    assert settings.host_allowed("localhost:8765")
    assert not settings.host_allowed("evil.example:8765")
    assert settings.url() == f"http://192.0.2.7:8765/?token={TOKEN}"


def test_previous_page_cursor_with_interleaved_sessions(make_memory: Callable[..., TieredMemory]) -> None:
    import itertools

    from langmem_tiers.inspector.views import previous_after

    a = make_memory("a")
    b = a.for_session("b")
    for i in range(60):  # ids of the two sessions interleave, sometimes in runs
        (a if i % 3 else b).add("user", f"message {i}")
    ids = [m.id or 0 for m in a.messages()]
    for limit in (1, 7, 40):
        pages = [ids[i:i + limit] for i in range(0, len(ids), limit)]
        assert previous_after(a, pages[0][0], limit) is None
        for before, page in itertools.pairwise(pages):
            after = previous_after(a, page[0], limit)
            assert after is not None
            assert [m.id for m in a.messages_page(after=after, limit=limit)] == before


def test_keyed_memories_show_their_supersession_history(serve: Callable[..., TestClient]) -> None:
    client = serve()
    old = api(client, "remember", {**DEMO, "text": "I live in Porto.", "key": "home_city"}).json()["record_id"]
    new = api(client, "remember", {**DEMO, "text": "I moved to Lisbon.", "key": "home_city"}).json()["record_id"]
    page = client.get("/session?session=demo&user=demo-user", headers=AUTH).text
    memories = page.split('class="memories"', 1)[1].split("</ul>", 1)[0]
    current, superseded = memories.split('<li class="superseded">', 1)
    assert f"#{new} fact · key home_city" in current
    assert "I moved to Lisbon." in current
    assert f"#{old} fact · key home_city" in superseded
    assert "(superseded)" in superseded
    assert "I live in Porto." in superseded
    bad = api(client, "remember", {**DEMO, "text": "x", "key": "Not A Key!"})
    assert bad.status_code == 400
    assert "key" in bad.json()["message"]
