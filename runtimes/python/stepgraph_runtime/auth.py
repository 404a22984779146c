"""Agent auth for the graphs: the run's user's OAuth token for a provider.

A node calls ``get_token("github", ["repo"])`` (``await aget_token(...)`` in an
async node) and gets the access token of the run's user, whom the platform
knows from the run (``user_id`` in its context, config or metadata). When the
user has granted none yet, the node interrupts the run with upstream's value
(langchain-auth's ``{"message", "auth_url", "provider", "scopes"}``); once the
user consented at ``auth_url``, resuming the run runs the node again and it
gets the token. Resuming without the consent raises ``ValueError``, as
langchain-auth does.

The token is for calling the provider: never put it in the state, the
output or a log (the state is checkpointed and shown).

A run call carries ``auth: {"url", "token"}`` (docs/runtime-protocol.md,
"Provider tokens"); the runtime keeps it in a context variable for the call,
never in the run's config, so it is never checkpointed.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from langgraph.types import interrupt

from .wire import dumps

TIMEOUT = 30.0


class AuthError(Exception):
    """The platform could not hand out a token (its message says why)."""


class _RunAgent:
    def __repr__(self) -> str:
        return "RUN_AGENT"


RUN_AGENT: Any = _RunAgent()
"""agent_id's default: the token scoped to the run's assistant, as
langchain-auth scopes it inside LangGraph. ``agent_id=None`` asks for the
user's unscoped token."""


@dataclass(frozen=True)
class Link:
    url: str
    token: str


_link: contextvars.ContextVar[Link | None] = contextvars.ContextVar("stepgraph_auth_link", default=None)


def bind(link: Link | None) -> contextvars.Token:
    """Makes link the current call's (ops.run does, for the call)."""
    return _link.set(link)


def unbind(token: contextvars.Token) -> None:
    _link.reset(token)


def get_token(provider: str, scopes: list[str], *, agent_id: Any = RUN_AGENT) -> str:
    """The run's user's access token for provider, covering scopes; without
    one the run interrupts with the authorization URL (see the module)."""
    body = _body(provider, scopes, agent_id)
    return _outcome(provider, scopes, _ask(_current(), body))


async def aget_token(provider: str, scopes: list[str], *, agent_id: Any = RUN_AGENT) -> str:
    """get_token for async nodes."""
    body = _body(provider, scopes, agent_id)
    answer = await asyncio.to_thread(_ask, _current(), body)
    return _outcome(provider, scopes, answer)


def _current() -> Link:
    link = _link.get()
    if link is None:
        raise AuthError("agent auth: get_token works inside a run on stepgraph only "
                        "(this call carries no auth link; is agent auth enabled on the server?)")
    return link


def _body(provider: str, scopes: list[str], agent_id: Any) -> dict:
    if not isinstance(provider, str) or not provider:
        raise ValueError("provider: must be a non-empty string")
    if not isinstance(scopes, (list, tuple)) or not all(isinstance(s, str) for s in scopes):
        raise ValueError("scopes: must be a list of strings")
    body: dict[str, Any] = {"provider": provider, "scopes": list(scopes)}
    if agent_id is not RUN_AGENT:
        if agent_id is not None and not isinstance(agent_id, str):
            raise ValueError("agent_id: must be a string or None")
        body["agent_id"] = agent_id
    return body


def _ask(link: Link, body: dict) -> dict:
    req = urllib.request.Request(
        link.url, data=dumps(body), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {link.token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:2000].decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("detail", detail)
        except (ValueError, AttributeError):
            pass
        raise AuthError(f"agent auth: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        raise AuthError(f"agent auth: the platform could not be reached: {e}") from None


def _outcome(provider: str, scopes: list[str], answer: dict) -> str:
    if answer.get("status") == "completed" and isinstance(answer.get("token"), str):
        return answer["token"]
    auth_url = answer.get("auth_url")
    if answer.get("status") != "pending" or not isinstance(auth_url, str):
        raise AuthError("agent auth: the platform's answer is neither a token nor an authorization URL")
    interrupt({
        "message": f"OAuth authentication required for provider '{provider}'.",
        "auth_url": auth_url,
        "provider": provider,
        "scopes": list(scopes),
    })
    # Reached on resume only: the node ran again and the user has still
    # granted no token. The URL stays out of the error (it is stored and shown).
    raise ValueError(f"OAuth authentication for provider '{provider}' was not completed: "
                     "visit the authorization URL, then resume")
