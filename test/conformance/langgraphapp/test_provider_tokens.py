"""A LangGraph app's node gets the run's user's provider token
(stepgraph_runtime.auth.get_token), through the official SDK: the run
interrupts with langchain-auth's value, the user consents at a real OAuth
server (a browser following the redirects to stepgraph's callback), and the
resumed run calls a resource server with the token.

The app is runtimes/python/tests/apps/auth; TestLangGraphApp (Go) starts the
server and the OAuth server, and scans the server's log and data for the
tokens issued.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from langgraph_sdk import get_sync_client

from test_langgraph_app import KEY, URL, deploy

ISSUER = os.environ.get("STEPGRAPH_OAUTH_ISSUER", "")
TOKEN_URL = os.environ.get("STEPGRAPH_OAUTH_TOKEN_URL", "")


class Resource(BaseHTTPRequestHandler):
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


def consent(auth_url):
    """Follows the redirects from the provider's consent to our callback."""
    with httpx.Client(follow_redirects=True, timeout=60) as browser:
        res = browser.get(auth_url)
    assert res.url.path == "/v2/auth/callback/gh", str(res.url.copy_with(query=None))
    assert res.status_code == 200, res.text
    return res.json()


def test_app_node_gets_the_users_token_after_consent():
    assert ISSUER and TOKEN_URL, "run through go test ./test/conformance/ -run TestLangGraphApp"
    rev = deploy(os.environ["STEPGRAPH_LG_AUTH_REPO"], "auth-agents")
    assert rev["status"] == "DEPLOYED", rev
    with httpx.Client(base_url=URL, headers={"X-Api-Key": KEY}, timeout=30) as h:
        r = h.post("/v2/auth/providers", json={
            "provider_id": "gh", "name": "GitHub", "client_id": "client-gh", "client_secret": "cs-gh-conformance",
            "auth_url": ISSUER + "/authorize", "token_url": TOKEN_URL, "uses_pkce": True})
        assert r.status_code == 200, r.text
    server = ThreadingHTTPServer(("127.0.0.1", 0), Resource)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    resource = f"http://{host}:{port}/repos"
    client = get_sync_client(url=URL, api_key=KEY)
    try:
        thread = client.threads.create()["thread_id"]
        out = client.runs.wait(thread, "tokens", input={"resource_url": resource}, context={"user_id": "ada"})
        value = out["__interrupt__"][0]["value"]
        assert value["message"] == "OAuth authentication required for provider 'gh'."
        assert value["provider"] == "gh" and value["scopes"] == ["openid", "read"]
        assert value["auth_url"].startswith(ISSUER + "/authorize?")
        assert Resource.seen == []

        assert consent(value["auth_url"])["status"] == "completed"
        out = client.runs.wait(thread, "tokens", command={"resume": "done"}, context={"user_id": "ada"})
        assert out["repos"] == ["alpha", "beta"], out
        assert len(Resource.seen) == 1 and Resource.seen[0].startswith("Bearer ")
        token = Resource.seen[0].removeprefix("Bearer ")
        assert len(token) > 20

        # the async node, another thread of the same user: the token is stored
        other = client.threads.create()["thread_id"]
        out = client.runs.wait(other, "atokens", input={"resource_url": resource}, context={"user_id": "ada"})
        if "__interrupt__" in out:  # tokens scoped per agent: this assistant needs its own consent
            assert consent(out["__interrupt__"][0]["value"]["auth_url"])["status"] == "completed"
            out = client.runs.wait(other, "atokens", command={"resume": "done"}, context={"user_id": "ada"})
        assert out["repos"] == ["alpha", "beta"], out

        # the token is in no answer: state, history, runs
        seen = [client.threads.get_state(thread), client.threads.get_history(thread, limit=20),
                client.runs.list(thread), client.threads.get_state(other)]
        assert token not in json.dumps(seen, default=str)
    finally:
        server.shutdown()
        server.server_close()
