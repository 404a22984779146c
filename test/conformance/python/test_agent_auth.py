"""Conformance: the official agent-auth client (langchain-auth, unchanged,
pinned in requirements.txt) against stepgraph's /v2/auth routes, with a real
OAuth 2.0 server (mock-oauth2-server on loopback, started by
test/conformance/conformance_test.go, which sets STEPGRAPH_OAUTH_ISSUER).

Every method of langchain_auth.Client is called: the provider CRUD,
authenticate (pending, then completed), wait_for_completion,
check_token_exists and revoke_tokens. The user's consent is driven as a
browser would: follow the authorization URL's redirect chain to the callback.
"""

import asyncio
import os
import uuid

import httpx
import pytest
from langchain_auth import Client

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")
ISSUER = os.environ.get("STEPGRAPH_OAUTH_ISSUER", "")


def run(coro):
    return asyncio.run(coro)


def consent(auth_url):
    """Follows the redirects from the provider's consent to our callback."""
    with httpx.Client(follow_redirects=True, timeout=60) as browser:
        res = browser.get(auth_url)
    assert res.url.path.startswith("/v2/auth/callback/"), str(res.url.copy_with(query=None))
    assert res.status_code == 200, res.text
    return res.json()


def test_langchain_auth_client_every_method():
    assert ISSUER, "STEPGRAPH_OAUTH_ISSUER must be set (run through go test ./test/conformance/)"

    async def main():
        client = Client(api_key=API_KEY, api_url=URL)
        pid = "lca-" + uuid.uuid4().hex[:8]
        user = "user-" + uuid.uuid4().hex[:8]
        created = await client.create_oauth_provider(
            provider_id=pid,
            name="Mock IdP",
            client_id="lca-client",
            client_secret="lca-client-secret-value",
            auth_url=ISSUER + "/authorize",
            token_url=ISSUER + "/token",
            uses_pkce=True,
            code_challenge_method="S256",
        )
        assert created.provider_id == pid and created.uses_pkce
        assert (await client.get_oauth_provider(pid)).name == "Mock IdP"
        assert pid in [p.provider_id for p in await client.list_oauth_providers()]
        updated = await client.update_oauth_provider(pid, name="Mock IdP 2")
        assert updated.name == "Mock IdP 2"

        assert (await client.check_token_exists(pid)).has_token is False
        first = await client.authenticate(provider=pid, scopes=["openid", "read"], user_id=user)
        assert first.status == "pending" and first.token is None
        assert first.url.startswith(ISSUER + "/authorize?") and first.auth_id
        assert "code_challenge=" in first.url and "code_verifier" not in first.url

        cb = consent(first.url)
        assert cb["status"] == "completed", cb
        assert "token" not in cb

        done = await client.wait_for_completion(first.auth_id, timeout=10)
        assert done.status == "completed" and done.token

        again = await client.authenticate(provider=pid, scopes=["read"], user_id=user)
        assert again.status == "completed" and again.token == done.token
        assert (await client.check_token_exists(pid)).has_token is True

        revoked = await client.revoke_tokens(pid)
        assert revoked.provider_id == pid and revoked.message
        assert (await client.check_token_exists(pid)).has_token is False
        after = await client.authenticate(provider=pid, scopes=["read"], user_id=user)
        assert after.status == "pending"

        # A denied consent: wait_for_completion raises, as upstream's client
        # does for any status but completed.
        denied = await client.authenticate(provider=pid, scopes=["openid"], user_id=user + "-d")
        state = httpx.URL(denied.url).params["state"]
        with httpx.Client(timeout=30) as browser:
            res = browser.get(URL + "/v2/auth/callback/" + pid, params={"state": state, "error": "access_denied"})
        assert res.json()["status"] == "failed"
        with pytest.raises(Exception, match="failed"):
            await client.wait_for_completion(denied.auth_id, timeout=5)
        # Unknown auth ids are not_found.
        with pytest.raises(Exception, match="not found"):
            await client.wait_for_completion(str(uuid.uuid4()), timeout=1)

        deleted = await client.delete_oauth_provider(pid)
        assert pid in deleted.message
        await client.close()

    run(main())
