"""Conformance of runs.create_batch and runs.cancel_many (issue 15), and of
the thread metadata a run stamps, through the official Python SDK (async
and sync clients).

Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
STEPGRAPH_API_KEY).
"""

import asyncio
import functools
import os

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")
HI = {"messages": [{"role": "user", "content": "hi"}]}


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
async def test_create_batch(client):
    runs = await client.runs.create_batch(
        [
            {"assistant_id": "echo", "input": HI, "on_completion": "keep"},
            {"assistant_id": "counter", "input": {"steps": 3}, "on_completion": "keep"},
        ]
    )
    assert len(runs) == 2
    echo = await client.assistants.get("echo")
    assert runs[0]["assistant_id"] == echo["assistant_id"]
    out = await client.runs.join(runs[1]["thread_id"], runs[1]["run_id"])
    assert out == {"count": 3, "steps": 3}, out
    # The run's thread carries what ran on it (agent-chat-ui lists by it).
    thread = await client.threads.get(runs[1]["thread_id"])
    assert thread["metadata"]["graph_id"] == "counter"
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create_batch([{"assistant_id": "echo"}, {"assistant_id": "no-such-graph"}])


@with_client
async def test_cancel_many_by_ids(client):
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "echo", input=HI, after_seconds=3600)
    second = await client.runs.create(tid, "echo", input=HI, after_seconds=3600)
    await client.runs.cancel_many(thread_id=tid, run_ids=[first["run_id"]])
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "interrupted"
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    await client.runs.cancel_many(thread_id=tid, run_ids=[second["run_id"]], action="rollback")
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, second["run_id"])
    # cancel_many(status=...) cancels every such run of the organization,
    # so it would reach the runs of the suites running beside this one on
    # the same key: internal/api's TestRunBatchAndCancel covers it.
    with pytest.raises(NotFoundError):
        await client.runs.cancel_many(thread_id=tid, run_ids=["00000000-0000-4000-8000-000000000000"])


def test_sync_client_batch_and_cancel():
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "echo", input=HI, after_seconds=3600)
        client.runs.cancel_many(thread_id=tid, run_ids=[run["run_id"]])
        assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
        runs = client.runs.create_batch([{"assistant_id": "counter", "input": {"steps": 1}, "on_completion": "keep"}])
        assert client.runs.join(runs[0]["thread_id"], runs[0]["run_id"]) == {"count": 1, "steps": 1}
    finally:
        client.close()
