"""The sync client's streams, against a real stepgraph server (run by
test/conformance TestSDKConformance, which sets STEPGRAPH_URL and
STEPGRAPH_API_KEY): client.threads.stream (the thread event protocol),
client.threads.join_stream and client.runs.join_stream, each checked for
what it carries, as test_sdk.py checks the async client's."""

import os
import threading
import uuid

import pytest

from langgraph_sdk import get_sync_client

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")
if not URL or not API_KEY:
    raise RuntimeError(
        "STEPGRAPH_URL and STEPGRAPH_API_KEY must be set "
        "(run through test/conformance: go test ./test/conformance)"
    )

HI = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def client():
    c = get_sync_client(url=URL, api_key=API_KEY)
    try:
        yield c
    finally:
        c.close()


def test_sync_thread_stream_messages_and_output(client):
    tid = str(uuid.uuid4())  # run.start makes the thread
    with client.threads.stream(tid, assistant_id="echo") as thread:
        started = thread.run.start(input=HI)
        assert started["run_id"], started
        messages = list(thread.messages)
        assert [str(m.text) for m in messages] == ["echo: hi"], messages
        assert [m.node for m in messages] == ["echo"], [m.node for m in messages]
        out = thread.output
        assert out["messages"][-1] == {"role": "assistant", "content": "echo: hi"}, out
    # The thread the protocol's run.start created holds the run's state.
    state = client.threads.get_state(tid)
    assert state["values"]["messages"][-1]["content"] == "echo: hi", state


def test_sync_runs_join_stream(client):
    tid = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(tid, "counter", input={"steps": 3}, stream_mode=["values", "updates"], stream_resumable=True)
    )
    assert [p.id for p in parts] == [str(i) for i in range(len(parts))], parts
    run_id = parts[0].data["run_id"]
    rest = list(client.runs.join_stream(tid, run_id, last_event_id=parts[2].id))
    assert [(p.event, p.data, p.id) for p in rest] == [(p.event, p.data, p.id) for p in parts[3:]]
    everything = list(client.runs.join_stream(tid, run_id, last_event_id="-1", stream_mode="updates"))
    assert {p.event for p in everything} == {"metadata", "updates"}, everything
    assert [p.data for p in everything if p.event == "updates"] == [p.data for p in parts if p.event == "updates"]
    # A finished run joined live has nothing more to say.
    assert list(client.runs.join_stream(tid, run_id)) == []
    # A background run on a new thread, joined from its start.
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "counter", input={"steps": 2}, stream_mode="updates", stream_resumable=True)
    joined = list(client.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
    assert [p.event for p in joined] == ["metadata", "updates", "updates"], joined
    assert joined[0].data == {"run_id": run["run_id"], "attempt": 1}


def test_sync_thread_join_stream_lifecycle(client):
    tid = client.threads.create()["thread_id"]
    seen = []
    cond = threading.Condition()
    last = {"run_id": None}

    def done(run_id):
        return any(p.data == {"status": "run_done", "run_id": run_id} for p in seen)

    def follow():
        # Its own client: the stream holds a connection until it ends.
        c = get_sync_client(url=URL, api_key=API_KEY)
        try:
            for part in c.threads.join_stream(tid, stream_mode="lifecycle"):
                with cond:
                    seen.append(part)
                    cond.notify_all()
                    if last["run_id"] and done(last["run_id"]):
                        return
        finally:
            c.close()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    # Warm-up runs until the follower sees one end: from then on it is
    # subscribed, whatever the machine's load (the wait is a retry, not
    # the verdict).
    for _ in range(60):
        warm = client.runs.create(tid, "echo", input=HI)
        client.runs.join(tid, warm["run_id"])
        with cond:
            if cond.wait_for(lambda: done(warm["run_id"]), timeout=1):
                break
    else:
        pytest.fail(f"the thread stream never saw a run end: {seen}")
    with cond:
        before = len(seen)
    run = client.runs.create(tid, "echo", input=HI)
    with cond:
        last["run_id"] = run["run_id"]
        assert cond.wait_for(lambda: done(run["run_id"]), timeout=60), seen
        mine = seen[before:]
    assert [p.event for p in mine] == ["metadata", "metadata"], mine
    assert mine[0].data == {"run_id": run["run_id"], "attempt": 1}
    assert mine[1].data == {"status": "run_done", "run_id": run["run_id"]}
    follower.join(60)
    assert not follower.is_alive()
