"""Conformance of the assistant operations beyond create/get/search (issue
15): update (a new version), get_versions, set_latest, count, get_subgraphs,
select, and the system assistants that cannot be deleted — through the
official Python SDK, async and sync clients.

Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
STEPGRAPH_API_KEY).
"""

import asyncio
import functools
import os

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")


def with_client(fn):
    @functools.wraps(fn)
    def wrapper():
        async def main():
            client = get_client(url=URL, api_key=API_KEY)
            try:
                await fn(client)
            finally:
                await client.aclose()

        asyncio.run(main())

    del wrapper.__wrapped__
    return wrapper


@with_client
async def test_update_versions_and_latest(client):
    tag = os.urandom(6).hex()
    a = await client.assistants.create("echo", name="first", metadata={"tag": tag}, config={"tags": ["x"]})
    aid = a["assistant_id"]
    assert a["version"] == 1
    b = await client.assistants.update(aid, name="second", metadata={"stage": "two"})
    assert b["version"] == 2 and b["name"] == "second"
    assert b["metadata"] == {"tag": tag, "stage": "two"}, b["metadata"]
    assert b["config"] == {"tags": ["x"]}
    c = await client.assistants.update(aid, graph_id="counter")
    assert c["version"] == 3 and c["graph_id"] == "counter"

    versions = await client.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert versions[-1]["name"] == "first" and versions[-1]["graph_id"] == "echo"
    staged = await client.assistants.get_versions(aid, metadata={"stage": "two"})
    assert [v["version"] for v in staged] == [3, 2]

    back = await client.assistants.set_latest(aid, 1)
    assert back["version"] == 1 and back["graph_id"] == "echo" and back["name"] == "first"
    out = await client.runs.wait(None, aid, input={"messages": [{"role": "user", "content": "v1"}]})
    assert out["messages"][-1]["content"] == "echo: v1"
    with pytest.raises(NotFoundError):
        await client.assistants.set_latest(aid, 42)

    assert await client.assistants.count(metadata={"tag": tag}) == 1
    assert await client.assistants.count(graph_id="echo", metadata={"tag": tag}) == 1
    assert await client.assistants.count(graph_id="counter", metadata={"tag": tag}) == 0
    found = await client.assistants.search(metadata={"tag": tag}, select=["assistant_id", "name"])
    assert found == [{"assistant_id": aid, "name": "first"}], found

    await client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        await client.assistants.get_versions(aid)


@with_client
async def test_system_assistant_cannot_be_deleted(client):
    echo = await client.assistants.get("echo")
    with pytest.raises(ConflictError) as err:
        await client.assistants.delete(echo["assistant_id"])
    assert "system assistant" in str(err.value) or err.value.response.status_code == 409
    assert (await client.assistants.get("echo"))["assistant_id"] == echo["assistant_id"]
    with pytest.raises(UnprocessableEntityError):
        await client.assistants.update(echo["assistant_id"], graph_id="no-such-graph")


@with_client
async def test_subgraphs_of_a_graph_without_any(client):
    assert await client.assistants.get_subgraphs("echo") == {}
    assert await client.assistants.get_subgraphs("echo", recurse=True) == {}
    assert await client.assistants.get_subgraphs("echo", namespace="x") == {}


def test_sync_client_assistant_versions():
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        a = client.assistants.create("counter", name="sync")
        client.assistants.update(a["assistant_id"], name="sync 2")
        assert [v["name"] for v in client.assistants.get_versions(a["assistant_id"])] == ["sync 2", "sync"]
        assert client.assistants.set_latest(a["assistant_id"], 1)["name"] == "sync"
        assert client.assistants.count(graph_id="counter") >= 2
        client.assistants.delete(a["assistant_id"])
    finally:
        client.close()
