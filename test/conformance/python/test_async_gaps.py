"""The async client's methods the other files call only through the sync
client: crons.create_for_thread and store.list_namespaces, against a real
stepgraph server (run by test/conformance TestSDKConformance)."""

import asyncio
import os
import uuid

from langgraph_sdk import get_client

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")
if not URL or not API_KEY:
    raise RuntimeError(
        "STEPGRAPH_URL and STEPGRAPH_API_KEY must be set "
        "(run through test/conformance: go test ./test/conformance)"
    )


def run(fn):
    async def main():
        client = get_client(url=URL, api_key=API_KEY)
        try:
            await fn(client)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_async_crons_create_for_thread():
    async def body(client):
        marker = str(uuid.uuid4())
        thread = await client.threads.create()
        cron = await client.crons.create_for_thread(
            thread["thread_id"], "echo", schedule="*/30 * * * *", metadata={"marker": marker}, enabled=False
        )
        try:
            assert cron["thread_id"] == thread["thread_id"], cron
            assert cron["enabled"] is False and cron["schedule"] == "*/30 * * * *", cron
            found = await client.crons.search(metadata={"marker": marker})
            assert [c["cron_id"] for c in found] == [cron["cron_id"]], found
        finally:
            await client.crons.delete(cron["cron_id"])
        assert await client.crons.count(metadata={"marker": marker}) == 0

    run(body)


def test_async_store_list_namespaces():
    async def body(client):
        root = ["conf", uuid.uuid4().hex[:12]]
        for labels in (["a", "b"], ["a", "c"], ["d"]):
            await client.store.put_item(root + labels, "k", {"x": 1}, index=False)
        got = await client.store.list_namespaces(prefix=root)
        assert [ns[len(root):] for ns in got["namespaces"]] == [["a", "b"], ["a", "c"], ["d"]], got
        got = await client.store.list_namespaces(prefix=root, suffix=["c"])
        assert [ns[len(root):] for ns in got["namespaces"]] == [["a", "c"]], got
        got = await client.store.list_namespaces(prefix=root, max_depth=len(root) + 1, limit=1, offset=1)
        assert [ns[len(root):] for ns in got["namespaces"]] == [["d"]], got

    run(body)
