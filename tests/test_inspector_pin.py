"""The inspector's pin/unpin and summary version history, over HTTP (pages and JSON API): CSRF,
read-only, --user and another user's record refused. Same fixtures as tests/test_inspector.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the inspector extra is not installed")

from starlette.testclient import TestClient

from tests import test_inspector as inspector
from tests.test_inspector import AUTH, DEMO, _login, api

folder, serve = inspector.folder, inspector.serve
BOB = {"session_id": "bob-chat", "user_id": "bob"}
PAGE = "/session?session=demo&user=demo-user"


def _csrf(client: TestClient) -> str:
    return client.get(PAGE).text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def _pin_form(client: TestClient, record_id: int, pinned: str, csrf: str | None) -> Any:
    data = {"target": str(record_id), "pinned": pinned} | ({"csrf": csrf} if csrf is not None else {})
    return client.post("/session/pin?session=demo&user=demo-user", data=data)


def _memory_row(page: str, record_id: int) -> str:
    return page.split(f'id="r{record_id}"', 1)[1].split("</li>", 1)[0]


def test_api_pin_and_unpin_change_the_context_and_the_page(serve: Any) -> None:
    client = serve()
    _login(client)
    rid = api(client, "remember", {**DEMO, "text": "The on-call phone is 555-0199."}).json()["record_id"]
    assert "unpin" not in _memory_row(client.get(PAGE).text, rid)
    pinned = api(client, "pin", {**DEMO, "record_id": rid})
    assert pinned.status_code == 200, pinned.text
    assert pinned.json() == {"record_id": rid, "pinned": True, "changed": True}
    assert api(client, "pin", {**DEMO, "record_id": rid}).json()["changed"] is False
    assert "The on-call phone is 555-0199." in api(client, "context", {**DEMO}).json()["pinned"]
    row = _memory_row(client.get(PAGE).text, rid)
    assert '<span class="badge pin">pinned</span>' in row
    assert ">unpin</button>" in row
    assert api(client, "pin", {**DEMO, "record_id": rid, "pinned": False}).json()["changed"] is True
    assert "The on-call phone is 555-0199." not in api(client, "context", {**DEMO}).json()["pinned"]


def test_pin_form_needs_the_csrf_token(serve: Any) -> None:
    client = serve()
    _login(client)
    rid = api(client, "remember", {**DEMO, "text": "Deploys happen on Tuesdays."}).json()["record_id"]
    assert _pin_form(client, rid, "yes", None).status_code == 403
    assert _pin_form(client, rid, "yes", "0" * 32).status_code == 403
    ok = _pin_form(client, rid, "yes", _csrf(client))
    assert ok.status_code == 303
    assert "pinned+record" in ok.headers["location"]
    assert ">unpin</button>" in _memory_row(client.get(ok.headers["location"]).text, rid)
    assert _pin_form(client, rid, "maybe", _csrf(client)).status_code == 400
    assert _pin_form(client, rid, "no", _csrf(client)).status_code == 303
    assert ">pin</button>" in _memory_row(client.get(PAGE).text, rid)


def test_another_users_record_is_refused(serve: Any) -> None:
    client = serve()
    bobs = api(client, "remember", {**BOB, "text": "Bob's door code is 4471."}).json()["record_id"]
    response = api(client, "pin", {**DEMO, "record_id": bobs})
    assert response.status_code == 400
    assert "not a live record of this user" in response.json()["message"]
    _login(client)
    assert _pin_form(client, bobs, "yes", _csrf(client)).status_code == 400
    assert api(client, "pin", {**BOB, "record_id": bobs}).json()["changed"] is True  # bob's own session may


def test_user_restricted_server_refuses_other_users(serve: Any) -> None:
    client = serve(user="demo-user")
    response = api(client, "pin", {**BOB, "record_id": 1})
    assert response.status_code == 403
    assert response.json()["error"] == "out_of_scope"
    assert client.get("/api/summary_history", params=BOB, headers=AUTH).status_code == 403


def test_read_only_hides_and_refuses_pinning(serve: Any) -> None:
    client = serve(read_only=True)
    _login(client)
    page = client.get(PAGE).text
    assert 'action="/session/pin' not in page
    assert "pin</button>" not in page
    assert client.post("/session/pin?session=demo&user=demo-user", data={"target": "1", "pinned": "yes"}) \
        .status_code == 403
    response = api(client, "pin", {**DEMO, "record_id": 1})
    assert response.status_code == 403
    assert response.json()["error"] == "read_only"
    assert client.get("/api/summary_history", params=DEMO, headers=AUTH).status_code == 200  # reading still works


@pytest.mark.parametrize(("body", "message"), [
    ({**DEMO}, "record_id"), ({**DEMO, "record_id": 0}, "record_id"), ({**DEMO, "record_id": True}, "record_id"),
    ({**DEMO, "record_id": 1, "pinned": "yes"}, "pinned must be true"),
    ({**DEMO, "record_id": 1, "pin": True}, "unknown field(s): pin"),
    ({**DEMO, "record_id": 10**9}, "not a live record of this user"),
])
def test_api_pin_bad_input_gets_a_clear_400(serve: Any, body: dict[str, Any], message: str) -> None:
    response = api(serve(copy=False), "pin", body)
    assert response.status_code == 400, response.text
    assert message in response.json()["message"]


def test_summary_history_api_and_page(serve: Any) -> None:
    client = serve(copy=False)
    stats = client.get("/api/stats", params=DEMO, headers=AUTH).json()
    versions = client.get("/api/summary_history", params=DEMO, headers=AUTH).json()["versions"]
    assert len(versions) >= 2  # the demo conversation was summarized several times
    assert set(versions[0]) == {"version", "text", "tokens", "cursor", "created_at"}
    assert versions[0]["cursor"] == stats["summary_cursor"]
    assert versions[0]["tokens"] == stats["summary_tokens"]
    assert [v["version"] for v in versions] == sorted((v["version"] for v in versions), reverse=True)
    assert [v["cursor"] for v in versions] == sorted((v["cursor"] for v in versions), reverse=True)
    one = client.get("/api/summary_history", params={**DEMO, "limit": "1"}, headers=AUTH).json()["versions"]
    assert one == versions[:1]
    bad = client.get("/api/summary_history", params={**DEMO, "limit": "all"}, headers=AUTH)
    assert bad.status_code == 400
    assert "limit" in bad.json()["message"]
    _login(client)
    page = client.get(PAGE).text
    history = page.split('id="summary-history"', 1)[1].split("</details>", 1)[0]
    assert not history.startswith(" open")  # collapsed by default
    assert f"{len(versions)} kept" in history
    assert f"up to #{versions[0]['cursor']} · {versions[0]['tokens']} tokens" in history
    # Newest first on the page too.
    assert history.index(f"version {versions[0]['version']} ") < history.index(f"version {versions[-1]['version']} ")


def test_openapi_documents_pin_and_summary_history(serve: Any) -> None:
    schema = serve(copy=False).get("/api/openapi.json", headers=AUTH).json()
    pin = schema["paths"]["/api/pin"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert pin["required"] == ["session_id", "record_id"]
    assert pin["properties"]["pinned"]["type"] == "boolean"
    history = schema["paths"]["/api/summary_history"]["get"]
    assert {p["name"] for p in history["parameters"]} == {"session_id", "user_id", "agent_id", "limit"}
    assert "SummaryVersion" in schema["components"]["schemas"]
    assert json.dumps(schema)  # serializable as served
