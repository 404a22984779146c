"""A graph that calls a resource server with the run's user's provider token
(stepgraph_runtime.auth): `tokens` from a sync node, `atokens` from an async
one. The input names the resource server; `unscoped` asks for the user's
token of no particular agent (agent_id=None)."""

import asyncio
import json
import urllib.request

from typing_extensions import TypedDict

from langgraph.graph import START, StateGraph
from stepgraph_runtime.auth import aget_token, get_token

PROVIDER, SCOPES = "gh", ["openid", "read"]


class State(TypedDict, total=False):
    resource_url: str
    unscoped: bool
    repos: list[str]


def _agent(state: State) -> dict:
    return {"agent_id": None} if state.get("unscoped") else {}


def _list_repos(url: str, token: str) -> list[str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["repos"]


def fetch(state: State):
    token = get_token(PROVIDER, SCOPES, **_agent(state))
    return {"repos": _list_repos(state["resource_url"], token)}


async def afetch(state: State):
    token = await aget_token(PROVIDER, SCOPES, **_agent(state))
    return {"repos": await asyncio.to_thread(_list_repos, state["resource_url"], token)}


graph = StateGraph(State).add_node("fetch", fetch).add_edge(START, "fetch").compile()
agraph = StateGraph(State).add_node("fetch", afetch).add_edge(START, "fetch").compile()
