"""stepgraph_runtime.auth on a real app (tests/apps/auth), against a fake
bridge: the platform's side of token requests, scripted per test. The Go
suite (internal/pyapp) runs the same app against agent auth and a real
OAuth server."""

import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import Client, Platform
from stepgraph_runtime import auth
from stepgraph_runtime.server import serve

APP = os.path.join(os.path.dirname(__file__), "apps", "auth", "langgraph.json")
LINK_TOKEN = "grant-token-of-the-call"
USER_TOKEN = "gho_the-users-provider-token"
AUTH_URL = "http://127.0.0.1:1/authorize?state=s1"


class FakeBridge(BaseHTTPRequestHandler):
    """Answers /auth/token from `answers` (one per request, the last repeated)
    and records the requests."""

    answers: list = []
    seen: list = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "authorization": self.headers["Authorization"], "body": body})
        status, answer = self.answers[min(len(self.seen), len(self.answers)) - 1]
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Resource(BaseHTTPRequestHandler):
    """The provider's API: answers repos to any bearer, recording it."""

    seen: list = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.seen.append(self.headers.get("Authorization"))
        data = b'{"repos": ["alpha", "beta"]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host}:{port}"


@pytest.fixture(scope="module")
def app_client():
    os.environ["STEPGRAPH_RUNTIME_TOKEN"] = "rt-token"
    server = serve(APP)
    host, port = server.server_address[:2]
    yield Client(f"http://{host}:{port}", "rt-token")
    server.shutdown()
    server.server_close()


@pytest.fixture
def bridge():
    FakeBridge.answers, FakeBridge.seen = [], []
    server, url = _serve(FakeBridge)
    yield {"url": url + "/auth/token", "token": LINK_TOKEN}
    server.shutdown()
    server.server_close()


@pytest.fixture
def resource():
    Resource.seen = []
    server, url = _serve(Resource)
    yield url + "/repos"
    server.shutdown()
    server.server_close()


PENDING = (200, {"status": "pending", "auth_url": AUTH_URL})
COMPLETED = (200, {"status": "completed", "token": USER_TOKEN})


def found(value, secret: str) -> bool:
    """Whether secret is in value: its strings, and the bytes of those that
    are base64 (the checkpoints' bundle holds LangGraph's serialized values)."""
    if isinstance(value, dict):
        return any(found(v, secret) for v in value.values())
    if isinstance(value, list):
        return any(found(v, secret) for v in value)
    if not isinstance(value, str):
        return False
    if secret in value:
        return True
    try:
        return secret.encode() in base64.b64decode(value, validate=True)
    except ValueError:
        return False


def end(msgs):
    assert msgs[-1]["type"] == "end", msgs[-1]
    return msgs[-1]


@pytest.mark.parametrize("graph", ["tokens", "atokens"])
def test_interrupt_for_consent_then_resume_with_the_token(app_client, bridge, resource, graph):
    platform = Platform(app_client)
    FakeBridge.answers = [PENDING, COMPLETED]
    msgs = platform.run(graph, input={"resource_url": resource}, auth=bridge, stream_mode=["values", "updates"])
    e = end(msgs)
    assert e["status"] == "interrupted", e
    assert e["interrupts"][0]["value"] == {
        "message": "OAuth authentication required for provider 'gh'.",
        "auth_url": AUTH_URL, "provider": "gh", "scopes": ["openid", "read"]}
    assert Resource.seen == []
    # the request: the call's grant as the bearer, no agent_id (the platform
    # scopes the token to the run's assistant)
    assert FakeBridge.seen == [{"path": "/auth/token", "authorization": f"Bearer {LINK_TOKEN}",
                                "body": {"provider": "gh", "scopes": ["openid", "read"]}}]

    msgs += platform.run(graph, command={"resume": "done"}, auth=bridge, stream_mode=["values", "updates"])
    e = end(msgs)
    assert e["status"] == "success", e
    assert e["values"]["repos"] == ["alpha", "beta"]
    assert Resource.seen == [f"Bearer {USER_TOKEN}"]
    # neither the user's token nor the call's grant is in any event,
    # checkpoint (values, LangGraph's bundle, its config) or answer; the scan
    # reads the bundle's serialized values (it finds the repos there)
    bundles = [m["checkpoint"]["langgraph"] for m in msgs if m["type"] == "checkpoint"]
    assert found(bundles, "beta")
    assert not found(msgs, USER_TOKEN) and not found(msgs, LINK_TOKEN)


def test_resume_without_consent_raises_value_error(app_client, bridge, resource):
    platform = Platform(app_client)
    FakeBridge.answers = [PENDING]
    assert end(platform.run("tokens", input={"resource_url": resource}, auth=bridge))["status"] == "interrupted"
    e = end(platform.run("tokens", command={"resume": "done"}, auth=bridge))
    assert e["status"] == "error"
    assert e["error"]["error"] == "ValueError"
    assert "OAuth authentication for provider 'gh' was not completed" in e["error"]["message"]
    assert AUTH_URL not in e["error"]["message"]
    assert Resource.seen == []


def test_agent_id_none_asks_for_the_unscoped_token(app_client, bridge, resource):
    FakeBridge.answers = [COMPLETED]
    e = end(Platform(app_client).run("tokens", input={"resource_url": resource, "unscoped": True}, auth=bridge))
    assert e["status"] == "success", e
    assert FakeBridge.seen[0]["body"] == {"provider": "gh", "scopes": ["openid", "read"], "agent_id": None}


def test_the_platforms_refusal_fails_the_node_with_its_words(app_client, bridge, resource):
    FakeBridge.answers = [(422, {"detail": 'user_id: the run names no user: set "user_id" in the run\'s context'})]
    e = end(Platform(app_client).run("tokens", input={"resource_url": resource}, auth=bridge))
    assert e["status"] == "error"
    assert e["error"]["error"] == "AuthError"
    assert 'agent auth: user_id: the run names no user' in e["error"]["message"]


def test_without_an_auth_link_get_token_says_so(app_client, resource):
    e = end(Platform(app_client).run("tokens", input={"resource_url": resource}))
    assert e["status"] == "error"
    assert e["error"]["error"] == "AuthError" and "no auth link" in e["error"]["message"]


def test_a_malformed_link_is_a_bad_request(app_client):
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as e:
        app_client.run({"graph": "tokens", "thread_id": "t", "auth": {"url": 1}})
    assert e.value.code == 400
    assert json.loads(e.value.read())["detail"] == "auth: needs url and token (strings)"


def test_arguments_are_checked_before_asking():
    token = auth.bind(auth.Link("http://127.0.0.1:1/auth/token", "t"))
    try:
        with pytest.raises(ValueError, match="provider"):
            auth.get_token("", ["x"])
        with pytest.raises(ValueError, match="scopes"):
            auth.get_token("gh", "repo")
        with pytest.raises(ValueError, match="agent_id"):
            auth.get_token("gh", [], agent_id=7)
    finally:
        auth.unbind(token)
    assert auth._link.get() is None
