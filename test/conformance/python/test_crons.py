"""Conformance of client.crons.* (sync and async) with the official Python
SDK against a running stepgraph server: what each call answers means what
upstream's server means, and a cron that fires makes a run one can see.

Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
STEPGRAPH_API_KEY).
"""

import asyncio
import datetime
import os
import time
import uuid
from zoneinfo import ZoneInfo

import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")

# A firing waits for the next minute boundary and a scheduler tick: the
# deadline is only a safety net.
FIRE_DEADLINE = 150


def parse_time(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def test_crons_sync_lifecycle():
    client = get_sync_client(url=URL, api_key=API_KEY)
    marker = str(uuid.uuid4())
    end = datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc)
    cron = client.crons.create(
        "echo",
        schedule="0 9 * * 1-5",
        timezone=ZoneInfo("America/New_York"),
        end_time=end,
        input={"messages": [{"role": "user", "content": "standup"}]},
        metadata={"marker": marker, "kind": "stateless"},
        on_run_completed="keep",
    )
    assert cron["thread_id"] is None
    assert cron["schedule"] == "0 9 * * 1-5"
    assert cron["timezone"] == "America/New_York"
    assert cron["on_run_completed"] == "keep"
    assert cron["enabled"] is True
    assert parse_time(cron["end_time"]) == end
    nxt = parse_time(cron["next_run_date"]).astimezone(ZoneInfo("America/New_York"))
    assert (nxt.hour, nxt.minute) == (9, 0) and nxt.weekday() < 5
    assert cron["payload"]["input"] == {"messages": [{"role": "user", "content": "standup"}]}
    assert cron["metadata"] == {"marker": marker, "kind": "stateless"}

    thread = client.threads.create()
    tcron = client.crons.create_for_thread(
        thread["thread_id"], "echo", schedule="*/30 * * * *",
        multitask_strategy="enqueue", metadata={"marker": marker, "kind": "thread"}, enabled=False,
    )
    assert tcron["thread_id"] == thread["thread_id"]
    assert tcron["enabled"] is False

    found = client.crons.search(metadata={"marker": marker})
    assert [c["cron_id"] for c in found] == [tcron["cron_id"], cron["cron_id"]]  # newest first
    found = client.crons.search(metadata={"marker": marker}, sort_order="asc", limit=1)
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    found = client.crons.search(thread_id=thread["thread_id"], select=["cron_id", "enabled"])
    assert found == [{"cron_id": tcron["cron_id"], "enabled": False}]
    assert [c["cron_id"] for c in client.crons.search(metadata={"marker": marker}, enabled=False)] == [tcron["cron_id"]]
    assert client.crons.count(metadata={"marker": marker}) == 2
    assert client.crons.count(thread_id=thread["thread_id"]) == 1
    assert client.crons.count(assistant_id=cron["assistant_id"], metadata={"marker": marker}) == 2

    updated = client.crons.update(cron["cron_id"], schedule="30 6 * * *", timezone="UTC",
                                  end_time=None, metadata={"extra": 1}, enabled=False)
    assert updated["schedule"] == "30 6 * * *"
    assert updated["end_time"] is None
    assert updated["enabled"] is False
    assert updated["metadata"] == {"marker": marker, "kind": "stateless", "extra": 1}
    nxt = parse_time(updated["next_run_date"])
    assert (nxt.hour, nxt.minute) == (6, 30)
    assert updated["created_at"] == cron["created_at"]

    with pytest.raises(UnprocessableEntityError) as bad:
        client.crons.create("echo", schedule="every day")
    assert "schedule" in str(bad.value.body)
    with pytest.raises(UnprocessableEntityError):
        client.crons.create("echo", schedule="0 * * * *", timezone="Nowhere/City")

    client.crons.delete(cron["cron_id"])
    client.crons.delete(tcron["cron_id"])
    assert client.crons.count(metadata={"marker": marker}) == 0
    with pytest.raises(NotFoundError):
        client.crons.delete(cron["cron_id"])
    client.close()


def test_crons_async_fire_makes_a_run():
    async def main():
        client = get_client(url=URL, api_key=API_KEY)
        try:
            marker = str(uuid.uuid4())
            cron = await client.crons.create(
                "echo",
                schedule="* * * * *",
                input={"messages": [{"role": "user", "content": "tick " + marker}]},
                metadata={"marker": marker},
                on_run_completed="keep",
            )
            try:
                assert await client.crons.count(metadata={"marker": marker}) == 1
                deadline = time.monotonic() + FIRE_DEADLINE
                threads = []
                while time.monotonic() < deadline:
                    threads = await client.threads.search(metadata={"cron_id": cron["cron_id"]})
                    if threads:
                        break
                    await asyncio.sleep(1)
                assert threads, "the cron did not fire within the deadline"
                tid = threads[0]["thread_id"]
                runs = await client.runs.list(tid)
                assert runs and runs[-1]["metadata"]["cron_id"] == cron["cron_id"]
                assert runs[-1]["metadata"]["marker"] == marker
                out = await client.runs.join(tid, runs[-1]["run_id"])
                assert out["messages"][-1]["content"] == "echo: tick " + marker
                after = (await client.crons.search(metadata={"marker": marker}))[0]
                assert parse_time(after["next_run_date"]) > parse_time(cron["next_run_date"])
                updated = await client.crons.update(cron["cron_id"], enabled=False)
                assert updated["enabled"] is False
            finally:
                await client.crons.delete(cron["cron_id"])
            assert await client.crons.count(metadata={"marker": marker}) == 0
        finally:
            await client.aclose()

    asyncio.run(main())
