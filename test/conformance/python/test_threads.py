"""Conformance of the thread operations beyond create/get/search (issue 15):
update_state (with as_node, forking from a checkpoint), get_state at a
checkpoint, filtered history, count, copy, prune, supersteps on create,
select, and the thread metadata a run stamps — through the official Python
SDK, async and sync clients.

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
    """Turns `async def test_x(client)` into a plain test with a fresh client."""

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
async def test_update_state_as_node_and_fork(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    empty = await client.threads.get_state(tid)
    assert empty["checkpoint"] is None and empty["values"] == {} and empty["next"] == [], empty

    await client.runs.wait(tid, "counter", input={"steps": 2})
    stamped = await client.threads.get(tid)
    assistant = await client.assistants.get("counter")
    assert stamped["metadata"]["graph_id"] == "counter", stamped["metadata"]
    assert stamped["metadata"]["assistant_id"] == assistant["assistant_id"], stamped["metadata"]
    listed = await client.threads.search(metadata={"graph_id": "counter"}, ids=[tid])
    assert [t["thread_id"] for t in listed] == [tid]

    before = await client.threads.get_state(tid)
    res = await client.threads.update_state(tid, {"count": 5}, as_node="inc")
    new_id = res["checkpoint"]["checkpoint_id"]
    state = await client.threads.get_state(tid)
    # count has the add reducer: 2 + 5.
    assert state["values"] == {"count": 7, "steps": 2}, state["values"]
    assert state["checkpoint"]["checkpoint_id"] == new_id
    assert state["metadata"]["source"] == "update"
    assert state["parent_checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]

    # Fork from the run's input checkpoint and continue from the fork.
    history = await client.threads.get_history(tid, limit=100)
    first = history[-1]
    fork = await client.threads.update_state(
        tid, {"steps": 4}, as_node="__start__", checkpoint={"checkpoint_id": first["checkpoint"]["checkpoint_id"]}
    )
    at = await client.threads.get_state(tid, checkpoint={"checkpoint_id": fork["checkpoint"]["checkpoint_id"]})
    assert at["next"] == ["inc"], at
    assert at["parent_checkpoint"]["checkpoint_id"] == first["checkpoint"]["checkpoint_id"]
    out = await client.runs.wait(tid, "counter", input=None)
    assert out == {"count": 4, "steps": 4}, out

    updates = await client.threads.get_history(tid, limit=100, metadata={"source": "update"})
    assert len(updates) == 2 and all(s["metadata"]["source"] == "update" for s in updates)
    older = await client.threads.get_history(tid, limit=1, before={"checkpoint_id": new_id})
    assert older[0]["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]

    with pytest.raises(UnprocessableEntityError):
        await client.threads.update_state(tid, {"count": 1}, as_node="ghost")
    with pytest.raises(NotFoundError):
        await client.threads.update_state(tid, {"count": 1}, checkpoint_id="00000000-0000-7000-8000-000000000000")


@with_client
async def test_state_updated_at_sort_and_config_after_a_run(client):
    """state_updated_at moves with the state (a run, update_state), not with
    metadata; search sorts by it; a run leaves upstream's config."""
    tag = os.urandom(6).hex()
    a = await client.threads.create(metadata={"tag": tag, "graph_id": "counter"})
    b = await client.threads.create(metadata={"tag": tag, "graph_id": "counter"})
    assert a["state_updated_at"] == a["created_at"], a
    await client.runs.wait(a["thread_id"], "counter", input={"steps": 1})
    patched = await client.threads.update(b["thread_id"], metadata={"k": 1})
    assert patched["state_updated_at"] == b["state_updated_at"], patched
    ran = await client.threads.get(a["thread_id"])
    assert ran["state_updated_at"] > a["state_updated_at"], ran
    assert ran["config"] == {"configurable": {}}, ran["config"]

    def order(found):
        return ["a" if t["thread_id"] == a["thread_id"] else "b" for t in found]

    newest_state = await client.threads.search(metadata={"tag": tag}, sort_by="state_updated_at")
    assert order(newest_state) == ["a", "b"]
    oldest_state = await client.threads.search(metadata={"tag": tag}, sort_by="state_updated_at", sort_order="asc")
    assert order(oldest_state) == ["b", "a"]
    assert order(await client.threads.search(metadata={"tag": tag}, sort_by="updated_at")) == ["b", "a"]
    await client.threads.update_state(b["thread_id"], {"count": 3}, as_node="inc")
    assert order(await client.threads.search(metadata={"tag": tag}, sort_by="state_updated_at")) == ["b", "a"]
    selected = await client.threads.search(metadata={"tag": tag}, select=["state_updated_at"])
    assert [sorted(t) for t in selected] == [["state_updated_at"], ["state_updated_at"]], selected


@with_client
async def test_update_state_busy_thread_conflicts(client):
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "counter", input={"steps": 1})
    await client.runs.create(tid, "counter", input={"steps": 1}, after_seconds=3600)
    with pytest.raises(ConflictError):
        await client.threads.update_state(tid, {"count": 1}, as_node="inc")


@with_client
async def test_count_copy_prune(client):
    tag = os.urandom(6).hex()
    ids = [(await client.threads.create(metadata={"tag": tag, "n": i}))["thread_id"] for i in range(3)]
    assert await client.threads.count(metadata={"tag": tag}) == 3
    assert await client.threads.count(metadata={"tag": tag, "n": 1}) == 1
    assert await client.threads.count(metadata={"tag": tag}, status="busy") == 0

    await client.runs.wait(ids[0], "counter", input={"steps": 3})
    copy = await client.threads.copy(ids[0])
    assert copy["thread_id"] != ids[0]
    assert copy["values"] == {"count": 3, "steps": 3}, copy
    original = await client.threads.get_history(ids[0], limit=100)
    copied = await client.threads.get_history(copy["thread_id"], limit=100)
    assert [s["checkpoint"]["checkpoint_id"] for s in copied] == [s["checkpoint"]["checkpoint_id"] for s in original]
    assert await client.runs.list(copy["thread_id"]) == []

    pruned = await client.threads.prune([copy["thread_id"]], strategy="keep_latest")
    assert pruned == {"pruned_count": 1}
    assert len(await client.threads.get_history(copy["thread_id"], limit=100)) == 1

    pruned = await client.threads.prune(ids[1:] + [copy["thread_id"]])
    assert pruned == {"pruned_count": 3}
    assert await client.threads.count(metadata={"tag": tag}) == 1
    with pytest.raises(NotFoundError):
        await client.threads.get(ids[1])


@with_client
async def test_supersteps_and_select(client):
    thread = await client.threads.create(
        graph_id="counter",
        supersteps=[
            {"updates": [{"values": {"steps": 3}, "as_node": "__start__"}]},
            {"updates": [{"values": {"count": 1}, "as_node": "inc"}]},
        ],
    )
    assert thread["values"] == {"count": 1, "steps": 3}, thread
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["inc"] and state["metadata"]["source"] == "update"
    out = await client.runs.wait(thread["thread_id"], "counter", input=None)
    assert out == {"count": 3, "steps": 3}, out

    found = await client.threads.search(ids=[thread["thread_id"]], select=["thread_id", "status"])
    assert found == [{"thread_id": thread["thread_id"], "status": "idle"}], found
    with pytest.raises(UnprocessableEntityError):
        await client.threads.create(supersteps=[{"updates": [{"values": {"count": 1}, "as_node": "inc"}]}])


def test_sync_client_state_operations():
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "counter", input={"steps": 1})
        res = client.threads.update_state(tid, {"count": 2}, as_node="inc")
        state = client.threads.get_state(tid, checkpoint={"checkpoint_id": res["checkpoint"]["checkpoint_id"]})
        assert state["values"] == {"count": 3, "steps": 1}, state
        assert client.threads.count(metadata={"graph_id": "counter"}) >= 1
        copy = client.threads.copy(tid)
        assert client.threads.get_state(copy["thread_id"])["values"] == {"count": 3, "steps": 1}
        assert client.threads.prune([copy["thread_id"], tid]) == {"pruned_count": 2}
        with pytest.raises(NotFoundError):
            client.threads.get(tid)
    finally:
        client.close()


@with_client
async def test_ttl_is_accepted_and_checked(client):
    thread = await client.threads.create(ttl=30)
    await client.threads.update(thread["thread_id"], metadata={"k": "v"}, ttl={"ttl": 5, "strategy": "keep_latest"})
    assert (await client.threads.get(thread["thread_id"]))["metadata"] == {"k": "v"}
    with pytest.raises(UnprocessableEntityError):
        await client.threads.create(ttl=0)
    with pytest.raises(UnprocessableEntityError):
        await client.threads.update(thread["thread_id"], metadata={}, ttl={"ttl": 5, "strategy": "archive"})


@with_client
async def test_delete_thread_and_run(client):
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"steps": 1})
    assert await client.runs.join(tid, run["run_id"]) == {"count": 1, "steps": 1}
    await client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])
    assert await client.runs.list(tid) == []
    await client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)


def test_sync_client_reads_streams_and_deletes():
    """The sync client's methods the other sync tests leave out, each
    checked for what it answers."""
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        counter = client.assistants.get("counter")
        assert counter["graph_id"] == "counter"
        found = client.assistants.search(graph_id="counter", metadata={"created_by": "system"})
        assert [a["assistant_id"] for a in found] == [counter["assistant_id"]], found
        drawing = client.assistants.get_graph(counter["assistant_id"])
        assert sorted(n["id"] for n in drawing["nodes"]) == ["__end__", "__start__", "inc"], drawing
        schemas = client.assistants.get_schemas(counter["assistant_id"])
        assert sorted(schemas["state_schema"]["properties"]) == ["count", "steps"], schemas
        assert client.assistants.get_subgraphs(counter["assistant_id"]) == {}

        tag = os.urandom(6).hex()
        tid = client.threads.create(metadata={"tag": tag})["thread_id"]
        assert client.threads.update(tid, metadata={"seen": "yes"})["metadata"] == {"tag": tag, "seen": "yes"}
        assert [t["thread_id"] for t in client.threads.search(metadata={"tag": tag})] == [tid]

        parts = list(client.runs.stream(tid, "counter", input={"steps": 2}, stream_mode="values"))
        values = [p.data for p in parts if p.event == "values"]
        assert values[-1] == {"count": 2, "steps": 2}, parts
        history = client.threads.get_history(tid, limit=100)
        assert history[0]["values"] == {"count": 2, "steps": 2}, history[0]
        assert len(history) > 1

        # A delayed run: cancelled, then deleted.
        run = client.runs.create(tid, "counter", input={"steps": 1}, after_seconds=3600)
        client.runs.cancel(tid, run["run_id"])
        assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
        client.runs.delete(tid, run["run_id"])
        with pytest.raises(NotFoundError):
            client.runs.get(tid, run["run_id"])
        client.threads.delete(tid)
        with pytest.raises(NotFoundError):
            client.threads.get(tid)
    finally:
        client.close()
