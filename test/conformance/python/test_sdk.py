"""Conformance: the official Python SDK (langgraph-sdk, unchanged) against a
running stepgraph server.

Started by test/conformance/conformance_test.go, which sets
STEPGRAPH_URL, STEPGRAPH_API_KEY and STEPGRAPH_WEBHOOK_SECRET. Each test runs
its own event loop (asyncio.run) with its own async client, so no pytest
plugin is needed.
"""

import asyncio
import base64
import functools
import hashlib
import hmac
import http.server
import json
import os
import threading
import time
import uuid

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")
WEBHOOK_SECRET = os.environ.get("STEPGRAPH_WEBHOOK_SECRET", "")
# A git repository declaring the support agent, the runtime serving its
# functions and its model's API key (test/conformance/agent_test.go).
AGENT_REPO = os.environ.get("STEPGRAPH_AGENT_REPO", "")
AGENT_RUNTIME = os.environ.get("STEPGRAPH_AGENT_RUNTIME", "")
AGENT_API_KEY = os.environ.get("STEPGRAPH_AGENT_API_KEY", "")

if not URL or not API_KEY:
    raise RuntimeError(
        "STEPGRAPH_URL and STEPGRAPH_API_KEY must be set "
        "(run this suite through `go test ./test/conformance/`)"
    )

# A safety net only: each wait ends on what the server sends; the bound is
# generous because the suite runs beside every other package of make test.
SAFETY_NET = 120

HI = {"messages": [{"role": "user", "content": "hi"}]}


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

    # pytest must not see the `client` parameter as a fixture.
    del wrapper.__wrapped__
    return wrapper


async def new_thread(client):
    thread = await client.threads.create()
    return thread["thread_id"]


@with_client
async def test_stateless_wait_echo(client):
    out = await client.runs.wait(None, "echo", input=HI)
    assert out["messages"][-1] == {"role": "assistant", "content": "echo: hi"}, out


@with_client
async def test_thread_wait_counter(client):
    tid = await new_thread(client)
    out = await client.runs.wait(tid, "counter", input={"steps": 5})
    assert out == {"count": 5, "steps": 5}


@with_client
async def test_if_not_exists(client):
    tid = str(uuid.uuid4())
    out = await client.runs.wait(
        tid, "counter", input={"steps": 1}, if_not_exists="create"
    )
    assert out == {"count": 1, "steps": 1}
    thread = await client.threads.get(tid)
    assert thread["thread_id"] == tid

    # runs.wait goes through the SDK's reconnecting request, which raises
    # httpx.HTTPStatusError itself; NotFoundError is a subclass of it.
    missing = str(uuid.uuid4())
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.runs.wait(missing, "counter", input={"steps": 1})
    assert info.value.response.status_code == 404
    # The typed form, from a call that maps statuses to error classes.
    with pytest.raises(NotFoundError):
        await client.runs.create(missing, "counter", input={"steps": 1})
    with pytest.raises(NotFoundError):
        await client.threads.get(missing)


@with_client
async def test_interrupt_and_resume(client):
    tid = await new_thread(client)
    out = await client.runs.wait(tid, "approval", input={"request": "x"})
    assert "__interrupt__" in out, out
    assert out["__interrupt__"][0]["value"] == {"question": "approve x?"}, out
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted", thread

    out = await client.runs.wait(tid, "approval", command={"resume": "yes"})
    assert out == {"request": "x", "answer": "yes"}, out
    thread = await client.threads.get(tid)
    assert thread["status"] == "idle", thread


@with_client
async def test_error_raises(client):
    with pytest.raises(Exception) as info:
        await client.runs.wait(None, "fail", input={})
    assert "ValueError: boom" in str(info.value)


@with_client
async def test_reject_conflict(client):
    tid = await new_thread(client)
    run = await client.runs.create(
        tid, "counter", input={"steps": 1}, after_seconds=2
    )
    # runs.wait raises httpx.HTTPStatusError (ConflictError's base class).
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.runs.wait(
            tid, "counter", input={"steps": 1}, multitask_strategy="reject"
        )
    assert info.value.response.status_code == 409
    # runs.create maps the status to the typed error.
    with pytest.raises(ConflictError):
        await client.runs.create(
            tid, "counter", input={"steps": 1}, multitask_strategy="reject"
        )
    # The first run is unaffected.
    out = await client.runs.join(tid, run["run_id"])
    assert out == {"count": 1, "steps": 1}, out


@with_client
async def test_create_and_join(client):
    tid = await new_thread(client)
    run = await client.runs.create(tid, "counter", input={"steps": 3})
    assert run["status"] in ("pending", "running", "success"), run
    out = await client.runs.join(tid, run["run_id"])
    assert out == {"count": 3, "steps": 3}, out
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "success", got


@with_client
async def test_cancel_delayed_run(client):
    tid = await new_thread(client)
    run = await client.runs.create(
        tid, "counter", input={"steps": 1}, after_seconds=30
    )
    await client.runs.cancel(tid, run["run_id"])
    deadline = time.monotonic() + 10
    while True:
        got = await client.runs.get(tid, run["run_id"])
        if got["status"] == "interrupted" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert got["status"] == "interrupted", got


@with_client
async def test_state_and_history(client):
    tid = await new_thread(client)
    await client.runs.wait(tid, "counter", input={"steps": 2})
    state = await client.threads.get_state(tid)
    assert state["values"] == {"count": 2, "steps": 2}, state
    assert state["next"] == [], state

    history = await client.threads.get_history(tid)
    assert isinstance(history, list) and history, history
    assert history[0]["values"] == state["values"], history[0]
    assert history[0]["checkpoint"]["checkpoint_id"] == (
        state["checkpoint"]["checkpoint_id"]
    )
    # Newest first: each entry's parent is the entry after it, and the step
    # numbers fall.
    for newer, older in zip(history, history[1:]):
        assert newer["parent_checkpoint"]["checkpoint_id"] == (
            older["checkpoint"]["checkpoint_id"]
        )
        assert newer["metadata"]["step"] > older["metadata"]["step"]


@with_client
async def test_system_assistants(client):
    found = await client.assistants.search(metadata={"created_by": "system"})
    by_graph = {a["graph_id"]: a for a in found}
    for graph in ("echo", "counter", "approval", "fail"):
        assert graph in by_graph, sorted(by_graph)
        assert by_graph[graph]["metadata"].get("created_by") == "system"
    everything = await client.assistants.search(limit=100)
    assert {"echo", "counter", "approval", "fail"} <= {
        a["graph_id"] for a in everything
    }


class _Receiver(http.server.BaseHTTPRequestHandler):
    hits = None  # set per server: list of (headers, raw body)

    def do_POST(self):  # noqa: N802 (http.server's naming)
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.server.hits.append((dict(self.headers.items()), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@with_client
async def test_webhook(client):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    srv.hits = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/hook"
        out = await client.runs.wait(None, "echo", input=HI, webhook=url)
        assert out["messages"][-1]["content"] == "echo: hi"

        deadline = time.monotonic() + 10
        while not srv.hits and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a second (wrong) delivery would show here
        assert len(srv.hits) == 1, (
            f"webhook POSTs received: {len(srv.hits)} "
            "(the server logs 'webhook not delivered' with the reason)"
        )
    finally:
        srv.shutdown()
        srv.server_close()

    headers, raw = srv.hits[0]
    payload = json.loads(raw)
    assert payload["status"] == "success", payload
    for key in ("run_id", "thread_id", "values"):
        assert key in payload, payload
    assert payload["values"]["messages"][-1] == {
        "role": "assistant",
        "content": "echo: hi",
    }
    # Standard Webhooks: HMAC-SHA256, keyed with the base64 after whsec_, of
    # "<webhook-id>.<webhook-timestamp>.<raw body>"; the timestamp is recent.
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, timestamp = h.get("webhook-id", ""), h.get("webhook-timestamp", "0")
    assert msg_id.startswith("msg_"), h
    assert abs(time.time() - int(timestamp)) < 300, timestamp
    key = base64.b64decode(WEBHOOK_SECRET.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    want = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    sigs = h.get("webhook-signature", "").split(" ")
    assert any(hmac.compare_digest(s, want) for s in sigs), (sigs, want)


_agent = None


async def deploy_agent():
    """Deploys the support agent from its repository, once; returns the
    deployment once it is READY."""
    global _agent
    if _agent is not None:
        return _agent
    _agent = await _deploy_agent()
    return _agent


async def _deploy_agent():
    assert AGENT_REPO and AGENT_RUNTIME and AGENT_API_KEY, "the agent fixtures are not set"
    async with httpx.AsyncClient(base_url=URL, headers={"X-Api-Key": API_KEY}, timeout=30) as http:
        r = await http.post(
            "/v2/deployments",
            json={
                "name": "support-agent",
                "source": "github",
                "source_config": {"repo_url": AGENT_REPO, "custom_url": AGENT_RUNTIME},
                "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "agent/stepgraph.yaml"},
                "secrets": [{"name": "OPENAI_API_KEY", "value": AGENT_API_KEY}],
            },
        )
        if r.status_code == 409:
            # The JS suite (same server, same organization) deployed it
            # first: the deployment is the suites' shared fixture.
            listed = (await http.get("/v2/deployments", params={"name": "support-agent"})).json()["resources"]
            assert len(listed) == 1, listed
            dep = listed[0]
        else:
            assert r.status_code == 201, r.text
            dep = r.json()
        revision = f"/v2/deployments/{dep['id']}/revisions/{dep['latest_revision_id']}"
        deadline = time.monotonic() + 60
        while True:
            rev = (await http.get(revision)).json()
            assert "FAILED" not in rev["status"], rev
            if rev["status"] == "DEPLOYED":
                return (await http.get(f"/v2/deployments/{dep['id']}")).json()
            assert time.monotonic() < deadline, rev
            await asyncio.sleep(0.1)


@with_client
async def test_deployed_agent_by_graph_name(client):
    deployment = await deploy_agent()
    assert deployment["status"] == "READY"
    assert all(s["value"] == "********" for s in deployment["secrets"])

    result = await client.runs.wait(
        None, "support", input={"messages": [{"role": "user", "content": "Where is my order 42?"}]}
    )
    assert result["topic"] == "orders", result
    msgs = result["messages"]
    assert [m.get("type") for m in msgs[1:]] == ["ai", "tool", "ai"], msgs
    assert msgs[1]["tool_calls"][0]["name"] == "lookup_order"
    assert msgs[1]["tool_calls"][0]["args"] == {"order_id": "42"}
    assert json.loads(msgs[2]["content"])["status"] == "shipped"
    assert msgs[3]["content"] == "Order 42 is shipped (carrier UPS)."

    # A thread run by the default assistant's id; the graph and its schemas.
    assistant = await client.assistants.get("support")
    assert assistant["graph_id"] == "support"
    assert assistant["metadata"].get("created_by") == "system"
    thread_id = await new_thread(client)
    again = await client.runs.wait(
        thread_id,
        assistant["assistant_id"],
        input={"messages": [{"role": "user", "content": "And my order 43?"}]},
    )
    assert again["messages"][-1]["content"] == "Order 43 is processing (carrier none)."
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["input_schema"]["required"] == ["messages"]
    assert "topic" in schemas["state_schema"]["properties"]
    drawing = await client.assistants.get_graph("support")
    assert {"classify", "agent", "tools"} <= {n["id"] for n in drawing["nodes"]}


# ---- run streams (runs.stream, join_stream, threads.join_stream) -----------

NESTED_REPO = os.environ.get("STEPGRAPH_NESTED_REPO_PYTHON", "")


async def collect(stream):
    return [part async for part in stream]


def events(parts):
    return [p.event for p in parts]


@with_client
async def test_stream_values_and_updates_on_a_thread(client):
    tid = await new_thread(client)
    created = []
    parts = await collect(
        client.runs.stream(
            tid,
            "counter",
            input={"steps": 2},
            stream_mode=["values", "updates"],
            on_run_created=created.append,
        )
    )
    assert events(parts) == ["metadata", "values", "updates", "values", "updates", "values"], parts
    run_id = parts[0].data["run_id"]
    assert parts[0].data == {"run_id": run_id, "attempt": 1}
    assert created and created[0]["run_id"] == run_id and created[0]["thread_id"] == tid, created
    assert [p.data for p in parts[1:]] == [
        {"count": 0, "steps": 2},
        {"inc": {"count": 1}},
        {"count": 1, "steps": 2},
        {"inc": {"count": 1}},
        {"count": 2, "steps": 2},
    ]
    assert all(p.id is None for p in parts), "a run that is not resumable sends no ids"
    run = await client.runs.get(tid, run_id)
    assert run["status"] == "success", run


@with_client
async def test_stream_stateless_default_values(client):
    parts = await collect(client.runs.stream(None, "echo", input=HI))
    assert events(parts) == ["metadata", "values", "values"], parts
    assert parts[-1].data["messages"][-1] == {"role": "assistant", "content": "echo: hi"}


@with_client
async def test_stream_messages_modes(client):
    parts = await collect(
        client.runs.stream(None, "echo", input=HI, stream_mode=["messages-tuple", "messages"])
    )
    assert events(parts) == ["metadata", "messages", "messages/metadata", "messages/complete"], parts
    message, meta = parts[1].data
    assert message["type"] == "ai" and message["content"] == "echo: hi" and message["id"], message
    assert meta["langgraph_node"] == "echo" and meta["langgraph_step"] == 1, meta
    assert parts[2].data == {message["id"]: {"metadata": meta}}, parts[2].data
    assert parts[3].data == [message], parts[3].data


@with_client
async def test_stream_tasks_checkpoints_debug_events(client):
    tid = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            tid, "echo", input=HI, stream_mode=["tasks", "checkpoints", "debug", "events", "custom"]
        )
    )
    names = events(parts)
    assert names[0] == "metadata", names
    tasks = [p.data for p in parts if p.event == "tasks"]
    assert tasks[0]["name"] == "echo" and tasks[0]["triggers"] == ["branch:to:echo"], tasks
    assert tasks[0]["input"]["messages"] == HI["messages"], tasks
    assert tasks[1]["id"] == tasks[0]["id"] and tasks[1]["error"] is None and tasks[1]["interrupts"] == []
    assert tasks[1]["result"] == {"messages": {"role": "assistant", "content": "echo: hi"}}, tasks
    checkpoints = [p.data for p in parts if p.event == "checkpoints"]
    assert [c["metadata"]["source"] for c in checkpoints] == ["input", "loop", "loop"], checkpoints
    assert checkpoints[0]["next"] == ["__start__"] and checkpoints[-1]["next"] == [], checkpoints
    state = await client.threads.get_state(tid)
    assert checkpoints[-1]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert checkpoints[-1]["config"]["configurable"]["thread_id"] == tid
    assert checkpoints[-1]["values"] == state["values"]
    debug = [p.data for p in parts if p.event == "debug"]
    assert [d["type"] for d in debug] == ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"], debug
    assert debug[-1]["payload"] == checkpoints[-1]
    chain = [(p.data["event"], p.data["name"]) for p in parts if p.event == "events"]
    assert chain == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "echo"),
        ("on_chain_end", "echo"),
        ("on_chain_end", "LangGraph"),
    ], chain
    assert "custom" not in names  # built-in nodes emit no custom events


@with_client
async def test_stream_interrupt(client):
    tid = await new_thread(client)
    parts = await collect(
        client.runs.stream(tid, "approval", input={"request": "x"}, stream_mode=["values", "updates"])
    )
    assert events(parts) == ["metadata", "values", "updates", "values"], parts
    interrupt = parts[2].data["__interrupt__"]
    assert interrupt[0]["value"] == {"question": "approve x?"} and interrupt[0]["id"], interrupt
    assert parts[3].data == {"request": "x", "__interrupt__": interrupt}, parts[3].data
    # Resumed with a command, streamed as v2 parts.
    parts = [
        p
        async for p in client.runs.stream(
            tid, "approval", command={"resume": "yes"}, stream_mode="values", version="v2"
        )
    ]
    values = [p for p in parts if p["type"] == "values"]
    assert values[-1]["data"] == {"request": "x", "answer": "yes"}, values


@with_client
async def test_stream_error_event(client):
    parts = await collect(client.runs.stream(None, "fail", input={}))
    assert parts[-1].event == "error", parts
    assert parts[-1].data == {"error": "ValueError", "message": "boom"}


@with_client
async def test_stream_bad_input(client):
    from langgraph_sdk.errors import UnprocessableEntityError

    with pytest.raises(UnprocessableEntityError) as info:
        await collect(client.runs.stream(None, "echo", input=HI, stream_mode=["values", "tokens"]))
    assert "stream_mode" in str(info.value)
    with pytest.raises(NotFoundError):
        await collect(client.runs.stream(str(uuid.uuid4()), "echo", input=HI))


@with_client
async def test_join_stream_with_last_event_id(client):
    tid = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            tid, "counter", input={"steps": 3}, stream_mode=["values", "updates"], stream_resumable=True
        )
    )
    assert [p.id for p in parts] == [str(i) for i in range(len(parts))], parts
    run_id = parts[0].data["run_id"]
    rest = await collect(client.runs.join_stream(tid, run_id, last_event_id=parts[2].id))
    assert [(p.event, p.data, p.id) for p in rest] == [(p.event, p.data, p.id) for p in parts[3:]]
    everything = await collect(client.runs.join_stream(tid, run_id, last_event_id="-1"))
    assert [p.id for p in everything] == [p.id for p in parts]
    only_updates = await collect(
        client.runs.join_stream(tid, run_id, last_event_id="-1", stream_mode="updates")
    )
    assert set(events(only_updates)) == {"metadata", "updates"}, only_updates
    # A finished run joined live has nothing more to say.
    assert await collect(client.runs.join_stream(tid, run_id)) == []


@with_client
async def test_join_stream_of_a_background_run(client):
    tid = await new_thread(client)
    run = await client.runs.create(
        tid, "counter", input={"steps": 2}, stream_mode="updates", stream_resumable=True, after_seconds=1
    )
    parts = await collect(client.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
    assert events(parts) == ["metadata", "updates", "updates"], parts


@with_client
async def test_thread_join_stream_lifecycle(client):
    tid = await new_thread(client)
    seen = []

    async def follow():
        # threads.join_stream is a coroutine that returns the stream.
        async for part in await client.threads.join_stream(tid, stream_mode="lifecycle"):
            seen.append(part)

    def done(run_id):
        return any(p.data == {"status": "run_done", "run_id": run_id} for p in seen)

    async def until(cond):
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.05)

    follower = asyncio.create_task(follow())
    try:
        # Warm-up runs until the follower sees one end: from then on it is
        # subscribed, whatever the machine's load.
        for _ in range(60):
            warm = await client.runs.create(tid, "echo", input=HI)
            await client.runs.join(tid, warm["run_id"])
            try:
                await asyncio.wait_for(until(lambda: done(warm["run_id"])), 1)
                break
            except (asyncio.TimeoutError, AssertionError):
                continue
        else:
            pytest.fail(f"the thread stream never saw a run end: {seen}")
        before = len(seen)
        run = await client.runs.create(tid, "echo", input=HI)
        await until(lambda: done(run["run_id"]))
    finally:
        follower.cancel()
    assert [p.event for p in seen[before:]] == ["metadata", "metadata"], seen
    assert seen[before].data == {"run_id": run["run_id"], "attempt": 1}
    assert seen[before + 1].data == {"status": "run_done", "run_id": run["run_id"]}


@with_client
async def test_thread_join_stream_state_update(client):
    """A client's update_state reaches the thread's followers with
    stream_mode="state_update" as the Python server sends it: event
    state_update, data {state, thread_id}, the state as get_state shows it."""
    tid = await new_thread(client)
    await client.runs.wait(tid, "counter", input={"steps": 1})
    seen = []

    async def follow():
        async for part in await client.threads.join_stream(tid, stream_mode="state_update"):
            seen.append(part)

    def has(update):
        # The event of an update names the checkpoint update_state made.
        cid = update["checkpoint"]["checkpoint_id"]
        return any(p.data["state"]["checkpoint"]["checkpoint_id"] == cid for p in seen)

    follower = asyncio.create_task(follow())
    try:
        # Updates until the follower sees one: from then on it is
        # subscribed, whatever the machine's load.
        for _ in range(60):
            update = await client.threads.update_state(tid, {"count": 1})
            deadline = time.monotonic() + 1
            while not has(update) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if has(update):
                break
        else:
            pytest.fail(f"the thread stream never sent a state_update: {seen}")
        before = len(seen)
        update = await client.threads.update_state(tid, {"count": 1})
        deadline = time.monotonic() + SAFETY_NET
        while not has(update):
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.05)
    finally:
        follower.cancel()
    assert [p.event for p in seen[before:]] == ["state_update"], seen
    state = await client.threads.get_state(tid)
    assert seen[-1].data == {"state": state, "thread_id": tid}, (seen[-1].data, state)


async def deploy_nested():
    """Deploys this suite's nested graphs (test/conformance/agent_test.go
    nestedRepo); returns the deployment once it is READY."""
    assert NESTED_REPO, "STEPGRAPH_NESTED_REPO_PYTHON is not set"
    async with httpx.AsyncClient(base_url=URL, headers={"X-Api-Key": API_KEY}, timeout=30) as http:
        r = await http.post(
            "/v2/deployments",
            json={
                "name": "py-nested",
                "source": "github",
                "source_config": {"repo_url": NESTED_REPO},
                "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "stepgraph.yaml"},
            },
        )
        assert r.status_code == 201, r.text
        dep = r.json()
        deadline = time.monotonic() + 60
        while dep["status"] != "READY":
            assert "FAILED" not in dep["status"], dep
            assert time.monotonic() < deadline, dep
            await asyncio.sleep(0.1)
            dep = (await http.get(f"/v2/deployments/{dep['id']}")).json()
        return dep


@with_client
async def test_stream_subgraphs(client):
    await deploy_nested()
    parts = await collect(
        client.runs.stream(
            None, "py_nested", input={"topic": "owls"}, stream_mode=["updates", "messages-tuple"], stream_subgraphs=True
        )
    )
    names = events(parts)
    assert names[0] == "metadata" and names[-1] == "updates", names
    inner = [n for n in names if "|" in n]
    assert inner and all(n.split("|", 1)[1].startswith("research:") for n in inner), names
    update = next(p.data for p in parts if p.event.startswith("updates|"))
    assert update == {"write": {"report": "A report on owls", "messages": update["write"]["messages"]}}, update
    message, meta = next(p.data for p in parts if p.event.startswith("messages|"))
    assert message["content"] == "wrote about owls" and meta["langgraph_node"] == "write", (message, meta)
    assert parts[-1].data["research"]["report"] == "A report on owls", parts[-1]
    # Without stream_subgraphs only the graph's own events.
    parts = await collect(client.runs.stream(None, "py_nested", input={"topic": "owls"}, stream_mode="updates"))
    assert events(parts) == ["metadata", "updates"], parts


@with_client
async def test_stream_deployed_agent_messages(client):
    await deploy_agent()
    parts = await collect(
        client.runs.stream(
            None,
            "support",
            input={"messages": [{"role": "user", "content": "Where is my order 42?"}]},
            stream_mode=["messages-tuple", "updates"],
        )
    )
    names = events(parts)
    messages = [p.data for p in parts if p.event == "messages"]
    # The chat model streams: its answers come as AIMessageChunks, each
    # while its node runs (before the node's update), and are not sent
    # again whole; the tool message is written whole.
    kinds = []
    for m, meta in messages:
        kind = (m["type"], meta["langgraph_node"])
        if not kinds or kinds[-1] != kind or kind[0] != "AIMessageChunk":
            kinds.append(kind)
    assert kinds == [("AIMessageChunk", "agent"), ("tool", "tools"), ("AIMessageChunk", "agent")], kinds
    first_call = [m for m, _ in messages[: [m["type"] for m, _ in messages].index("tool")]]
    assert len({m["id"] for m in first_call}) == 1, first_call
    args = "".join(c["args"] for m in first_call for c in m["tool_call_chunks"])
    assert json.loads(args) == {"order_id": "42"}, args
    assert first_call[0]["tool_call_chunks"][0]["name"] == "lookup_order"
    answer = [m for m, _ in messages[[m["type"] for m, _ in messages].index("tool") + 1 :]]
    assert len(answer) > 2, answer
    assert "".join(m["content"] for m in answer) == "Order 42 is shipped (carrier UPS)."
    updates = [(i, next(iter(p.data))) for i, p in enumerate(parts) if p.event == "updates"]
    assert [u for _, u in updates] == ["classify", "agent", "tools", "agent"], updates
    first_chunk = names.index("messages")
    assert updates[0][0] < first_chunk < updates[1][0], names
    # The final state holds the messages the chunks made, with their ids.
    final = await client.runs.wait(None, "support", input={"messages": [{"role": "user", "content": "Where is my order 42?"}]})
    assert final["messages"][-1]["content"] == "Order 42 is shipped (carrier UPS)."


@with_client
async def test_stream_custom_events_of_a_function(client):
    await deploy_agent()
    parts = await collect(
        client.runs.stream(
            None,
            "support",
            input={"messages": [{"role": "user", "content": "Where is my order 42?"}]},
            stream_mode=["custom", "updates"],
        )
    )
    names = events(parts)
    # examples/python/runtime.py: classify emits its topic (call.emit).
    assert names[:3] == ["metadata", "custom", "updates"], names
    assert parts[1].data == {"step": "classify", "topic": "orders"}, parts[1]
    assert names.count("custom") == 1, names


# ---- every stream mode x thread/stateless x subgraphs on/off ----------------

# The modes the SDK accepts (langgraph_sdk.schema.StreamMode).
STREAM_MODES = ["values", "updates", "messages-tuple", "messages", "custom", "tasks", "checkpoints", "debug", "events"]


def expected_events(mode, subgraphs):
    """The event names a run of desk streams in mode besides metadata, a
    subgraph's namespace cut to its node ("answer")."""
    if mode == "messages":  # no namespace, as upstream; the model's chunks come from the subgraph
        return {"messages/metadata", "messages/complete"} | ({"messages/partial"} if subgraphs else set())
    if mode == "events":  # no namespace, as upstream
        return {"events"}
    event = "messages" if mode == "messages-tuple" else mode
    if not subgraphs:
        return {event}
    if mode == "messages-tuple":
        # The messages answer writes were streamed from the subgraph
        # already: they are not sent again (LangGraph dedupes by id).
        return {"messages|answer"}
    return {event, event + "|answer"}


ORDER_42 = {"messages": [{"role": "user", "content": "Where is my order 42?"}]}


def check_payload(mode, event, data):
    """The payload of one event of mode, as the Python server sends it."""
    if mode == "values":
        assert isinstance(data, dict) and isinstance(data.get("messages"), list), data
    elif mode == "updates":
        assert isinstance(data, dict) and len(data) == 1, data
        assert next(iter(data)) in {"classify", "answer", "agent", "tools"}, data
    elif mode == "messages-tuple":
        message, meta = data
        assert message["type"] in {"AIMessageChunk", "ai", "tool"} and "content" in message, message
        assert meta["langgraph_node"] in {"answer", "agent", "tools"}, meta
    elif event == "messages/metadata":
        [(mid, entry)] = data.items()
        assert mid and entry["metadata"]["langgraph_node"], data
    elif mode == "messages":
        assert isinstance(data, list) and all(m["id"] and "content" in m for m in data), data
    elif mode == "custom":
        assert data == {"step": "classify", "topic": "orders"}, data
    elif mode == "tasks":
        assert data["id"] and data["name"] in {"classify", "answer", "agent", "tools"}, data
        assert {"input", "triggers"} <= data.keys() or {"result", "error", "interrupts"} <= data.keys(), data
    elif mode == "checkpoints":
        assert {"config", "parent_config", "values", "metadata", "next", "tasks"} <= data.keys(), data
    elif mode == "debug":
        assert data["type"] in {"checkpoint", "task", "task_result"} and {"step", "timestamp", "payload"} <= data.keys(), data
    elif mode == "events":
        assert data["event"].startswith("on_") and data["name"] and data["run_id"], data


@pytest.mark.parametrize("subgraphs", [False, True], ids=["own", "subgraphs"])
@pytest.mark.parametrize("on_thread", [True, False], ids=["thread", "stateless"])
@pytest.mark.parametrize("mode", STREAM_MODES)
def test_stream_mode_matrix(mode, on_thread, subgraphs):
    @with_client
    async def run(client):
        await deploy_agent()
        tid = await new_thread(client) if on_thread else None
        parts = await collect(
            client.runs.stream(tid, "desk", input=ORDER_42, stream_mode=mode, stream_subgraphs=subgraphs)
        )
        assert parts and parts[0].event == "metadata", parts
        run_id = parts[0].data["run_id"]
        assert parts[0].data == {"run_id": run_id, "attempt": 1}, parts[0]
        rest = parts[1:]
        names = {p.event.split(":")[0] for p in rest}
        assert names == expected_events(mode, subgraphs), events(parts)
        for p in rest:
            check_payload(mode, p.event.split("|")[0], p.data)
        if mode == "custom":
            # classify emits in the graph, and in the subgraph (seen only with subgraphs).
            assert len(rest) == (2 if subgraphs else 1), events(parts)
        # The stream ended with the run, which succeeded.
        if on_thread:
            assert (await client.runs.get(tid, run_id))["status"] == "success"

    run()


CHAT_REPO = os.environ.get("STEPGRAPH_CHAT_REPO_PYTHON", "")


_chat_deployed = False


async def deploy_chat():
    """Deploys py_assist (test/conformance/agent_test.go chatRepo), once: a
    chat model that streams its answer, then an interrupt."""
    global _chat_deployed
    assert CHAT_REPO, "STEPGRAPH_CHAT_REPO_PYTHON is not set"
    if _chat_deployed:
        return
    async with httpx.AsyncClient(base_url=URL, headers={"X-Api-Key": API_KEY}, timeout=30) as http:
        r = await http.post(
            "/v2/deployments",
            json={
                "name": "py-chat",
                "source": "github",
                "source_config": {"repo_url": CHAT_REPO},
                "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "stepgraph.yaml"},
            },
        )
        assert r.status_code == 201, r.text
        dep = r.json()
        deadline = time.monotonic() + 60
        while dep["status"] != "READY":
            assert "FAILED" not in dep["status"], dep
            assert time.monotonic() < deadline, dep
            await asyncio.sleep(0.1)
            dep = (await http.get(f"/v2/deployments/{dep['id']}")).json()
    _chat_deployed = True


ASK = {"messages": [{"role": "user", "content": "hello world"}]}
SAID = "You said: hello world."


@with_client
async def test_stream_tokens_all_message_modes(client):
    await deploy_chat()
    tid = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            tid,
            "py_assist",
            input=ASK,
            stream_mode=["messages-tuple", "messages", "events", "updates"],
            stream_resumable=True,
        )
    )
    names = events(parts)
    reply_done = next(i for i, p in enumerate(parts) if p.event == "updates" and "reply" in p.data)
    # messages-tuple: a chunk per piece, each before the node's end.
    chunks = [(i, p.data) for i, p in enumerate(parts) if p.event == "messages"]
    assert len(chunks) > 3 and all(i < reply_done for i, _ in chunks), names
    assert all(m["type"] == "AIMessageChunk" for _, (m, _) in chunks), chunks
    assert "".join(m["content"] for _, (m, _) in chunks) == SAID
    message_id = chunks[0][1][0]["id"]
    meta = chunks[0][1][1]
    assert meta["langgraph_node"] == "reply" and meta["thread_id"] == tid and meta["ls_model_type"] == "chat", meta
    # messages: the metadata once, then the message so far, never whole again.
    assert names.count("messages/metadata") == 1 and "messages/complete" not in names, names
    described = next(p.data for p in parts if p.event == "messages/metadata")
    assert list(described) == [message_id] and described[message_id]["metadata"]["langgraph_node"] == "reply"
    partial_at = [i for i, p in enumerate(parts) if p.event == "messages/partial"]
    assert partial_at and all(i < reply_done for i in partial_at), names
    partials = [parts[i].data[0] for i in partial_at]
    assert len(partials) == len(chunks) and all(m["type"] == "ai" and m["id"] == message_id for m in partials)
    assert [m["content"] for m in partials][-1] == SAID and partials[0]["content"] == chunks[0][1][0]["content"]
    assert all(len(a["content"]) <= len(b["content"]) for a, b in zip(partials, partials[1:]))
    # events: the chat model's run, its chunks in on_chat_model_stream.
    lc = [p.data for p in parts if p.event == "events"]
    kinds = [e["event"] for e in lc if e["event"].startswith("on_chat_model")]
    assert kinds[0] == "on_chat_model_start" and kinds[-1] == "on_chat_model_end", kinds
    streamed_at = [i for i, p in enumerate(parts) if p.event == "events" and p.data["event"] == "on_chat_model_stream"]
    assert streamed_at and all(i < reply_done for i in streamed_at), names
    streamed = [parts[i].data for i in streamed_at]
    assert "".join(e["data"]["chunk"]["content"] for e in streamed) == SAID
    assert streamed[0]["name"] == "ChatOpenAI" and streamed[0]["metadata"]["langgraph_node"] == "reply"
    end = next(e for e in lc if e["event"] == "on_chat_model_end")
    assert end["data"]["output"]["content"] == SAID and end["data"]["output"]["id"] == message_id
    # The state holds the message the chunks made; the run waits at the interrupt.
    state = await client.threads.get_state(tid)
    assert state["values"]["messages"][-1]["content"] == SAID
    assert state["values"]["messages"][-1]["id"] == message_id
    assert state["next"] == ["approve"], state
    # A join from the start replays every chunk.
    replay = await collect(client.runs.join_stream(tid, parts[0].data["run_id"], last_event_id="-1"))
    assert [(p.event, p.data) for p in replay] == [(p.event, p.data) for p in parts]


# --- The thread event protocol (client.threads.stream) -----------------------

ALL_CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"]


def root_lifecycle(event, *phases):
    params = event.get("params") or {}
    return (
        event.get("method") == "lifecycle"
        and not params.get("namespace")
        and (params.get("data") or {}).get("event") in phases
    )


async def read_events(handle, stop, limit=None):
    """Reads a protocol event stream until stop(event) (or limit events)."""
    out = []
    await asyncio.wait_for(handle.ready, SAFETY_NET)
    async for event in handle.events:
        out.append(event)
        if stop(event) or (limit is not None and len(out) >= limit):
            break
    await handle.close()
    return out


@with_client
async def test_thread_stream_messages_and_output(client):
    tid = str(uuid.uuid4())  # run.start makes the thread
    async with client.threads.stream(tid, assistant_id="echo") as thread:
        started = await thread.run.start(input=HI)
        assert started["run_id"], started
        # The projection feeds each message's stream as it iterates: the
        # texts are complete once the run's messages are.
        messages = [message async for message in thread.messages]
        texts = [await message.text for message in messages]
        assert texts == ["echo: hi"], texts
        assert [m.node for m in messages] == ["echo"], [m.node for m in messages]
        out = await asyncio.wait_for(thread.output, SAFETY_NET)
        assert out["messages"][-1] == {"role": "assistant", "content": "echo: hi"}, out


@with_client
async def test_thread_stream_interrupt_respond_and_resume_since(client):
    from langgraph_sdk.stream.transport import ProtocolSseTransport

    tid = str(uuid.uuid4())
    async with client.threads.stream(tid, assistant_id="approval") as thread:
        await thread.run.start(input={"request": "a day off"})
        seen = []
        # The subscription ends at the interrupt, or earlier: the SDK pauses
        # every projection subscription as soon as its lifecycle watcher (a
        # stream of its own) sees input.requested, which can be before this
        # stream delivered it. So the interrupt is asserted from the
        # watcher here and from the thread's full log below, never from
        # which of two streams was first.
        async for event in thread.subscribe(["lifecycle", "input", "values"]):
            seen.append(event)
            if root_lifecycle(event, "interrupted"):
                break
        assert not [e for e in seen if root_lifecycle(e, "completed")], seen
        # The SDK's lifecycle watcher records the interrupt (it has, if it
        # paused the subscription; otherwise it does so soon).
        deadline = time.monotonic() + 30
        while not thread.interrupts and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        interrupt_ids = [i["interrupt_id"] for i in thread.interrupts]
        assert len(interrupt_ids) == 1 and interrupt_ids[0], thread.interrupts
        requested = [e for e in seen if e["method"] == "input.requested"]
        for e in requested:  # what this stream delivered of it, if anything
            assert e["params"]["data"]["interrupt_id"] == interrupt_ids[0], e
        await thread.run.respond("yes")
        out = await asyncio.wait_for(thread.output, SAFETY_NET)
        assert out == {"request": "a day off", "answer": "yes"}, out

    # Disconnect and resume with since: nothing is missed, nothing repeated.
    transport = ProtocolSseTransport(client=client.http.client, thread_id=tid)
    try:
        done = lambda e: root_lifecycle(e, "completed")  # noqa: E731
        full = await read_events(transport.open_event_stream({"channels": ALL_CHANNELS}), done)
        seqs = [e["seq"] for e in full]
        assert seqs == list(range(1, len(full) + 1)), seqs
        asked = [e for e in full if e["method"] == "input.requested"]
        assert len(asked) == 1, [e["method"] for e in full]
        assert asked[0]["params"]["data"]["payload"] == {"question": "approve a day off?"}, asked
        assert asked[0]["params"]["data"]["interrupt_id"] == interrupt_ids[0], asked
        # The interrupt precedes the interrupted run's end.
        ended = [i for i, e in enumerate(full) if root_lifecycle(e, "interrupted")]
        assert len(ended) == 1 and full.index(asked[0]) < ended[0], [e["method"] for e in full]
        assert root_lifecycle(full[0], "running")
        for e in full:
            assert e["type"] == "event" and e["event_id"] and isinstance(e["params"]["timestamp"], int), e
        cut = len(full) // 2
        part = await read_events(transport.open_event_stream({"channels": ALL_CHANNELS}), done, limit=cut)
        rest = await read_events(
            transport.open_event_stream({"channels": ALL_CHANNELS, "since": part[-1]["seq"]}), done
        )
        assert [e["event_id"] for e in part + rest] == [e["event_id"] for e in full]
        assert part + rest == full
        # A since this server never sent is refused, naming it.
        with pytest.raises(httpx.HTTPStatusError) as bad:
            await read_events(
                transport.open_event_stream({"channels": ["values"], "since": seqs[-1] + 100}), done
            )
        assert bad.value.response.status_code == 422
    finally:
        await transport.close()


# ---- the long-term memory store (client.store.*) ----------------------------
# Every test works under a namespace of its own: the store is per
# organization, and the suites share one.


def store_ns(*labels):
    return ["conf", uuid.uuid4().hex[:12], *labels]


@with_client
async def test_store_put_get_delete(client):
    ns = store_ns("users", "u1")
    await client.store.put_item(ns, "prefs", {"theme": "dark", "size": 3})
    item = await client.store.get_item(ns, "prefs")
    assert item["namespace"] == ns
    assert item["key"] == "prefs"
    assert item["value"] == {"theme": "dark", "size": 3}
    assert item["created_at"] and item["updated_at"]
    created = item["created_at"]

    # Replacing keeps the creation time and moves the update time.
    await client.store.put_item(ns, "prefs", {"theme": "light"})
    item = await client.store.get_item(ns, "prefs", refresh_ttl=False)
    assert item["value"] == {"theme": "light"}
    assert item["created_at"] == created
    assert item["updated_at"] >= created

    # A missing item is None (upstream answers 200 null), deleting it twice is fine.
    assert await client.store.get_item(ns, "nope") is None
    await client.store.delete_item(ns, "prefs")
    assert await client.store.get_item(ns, "prefs") is None
    await client.store.delete_item(ns, "prefs")


@with_client
async def test_store_search_filter_and_paging(client):
    ns = store_ns()
    for key, value in [
        ("a", {"kind": "note", "score": 3}),
        ("b", {"kind": "task", "score": 5}),
        ("c", {"kind": "note", "score": 7}),
        ("d", {"kind": "note", "score": 9, "meta": {"lang": "fr"}}),
    ]:
        await client.store.put_item(ns + ["docs"], key, value, index=False)
    await client.store.put_item(ns + ["other"], "e", {"kind": "note"}, index=False)

    found = await client.store.search_items(ns + ["docs"])
    assert [i["key"] for i in found["items"]] == ["d", "c", "b", "a"]  # newest first
    found = await client.store.search_items(ns, filter={"kind": "note"})
    assert [i["key"] for i in found["items"]] == ["e", "d", "c", "a"]
    found = await client.store.search_items(ns, filter={"score": {"$gte": 5}, "kind": "note"})
    assert [i["key"] for i in found["items"]] == ["d", "c"]
    found = await client.store.search_items(ns, filter={"meta": {"lang": "fr"}})
    assert [i["key"] for i in found["items"]] == ["d"]
    found = await client.store.search_items(ns + ["docs"], limit=2, offset=1)
    assert [i["key"] for i in found["items"]] == ["c", "b"]
    assert all(i["score"] is None for i in found["items"])  # no query: no score


@with_client
async def test_store_ttl(client):
    ns = store_ns()
    await client.store.put_item(ns, "short", {"v": 1}, ttl=5)
    # Read without refreshing and with: the item is there either way (its
    # expiry is tested by the server's own suites, on a controlled clock).
    assert (await client.store.get_item(ns, "short", refresh_ttl=False))["value"] == {"v": 1}
    assert (await client.store.get_item(ns, "short", refresh_ttl=True))["value"] == {"v": 1}
    found = await client.store.search_items(ns, refresh_ttl=False)
    assert [i["key"] for i in found["items"]] == ["short"]
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.store.put_item(ns, "bad", {"v": 1}, ttl=-1)
    assert err.value.response.status_code == 422
    assert "ttl" in err.value.response.json()["detail"]


def test_store_namespaces_sync():
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        root = store_ns()
        for labels in (["a", "b", "c"], ["a", "b", "d"], ["a", "x", "c"], ["b"], ["b", "c"]):
            client.store.put_item(root + labels, "k", {"x": 1}, index=False)
        depth = len(root)

        def strip(namespaces):
            return [ns[depth:] for ns in namespaces["namespaces"]]

        assert strip(client.store.list_namespaces(prefix=root)) == [
            ["a", "b", "c"], ["a", "b", "d"], ["a", "x", "c"], ["b"], ["b", "c"]]
        assert strip(client.store.list_namespaces(prefix=root + ["a"], suffix=["c"])) == [
            ["a", "b", "c"], ["a", "x", "c"]]
        assert strip(client.store.list_namespaces(prefix=root, max_depth=depth + 1)) == [["a"], ["b"]]
        assert strip(client.store.list_namespaces(prefix=root, limit=2, offset=1)) == [
            ["a", "b", "d"], ["a", "x", "c"]]
        # Sync client: put, get, search, delete too.
        client.store.put_item(root + ["s"], "one", {"text": "hello"})
        assert client.store.get_item(root + ["s"], "one")["value"] == {"text": "hello"}
        assert [i["key"] for i in client.store.search_items(root + ["s"])["items"]] == ["one"]
        client.store.delete_item(root + ["s"], "one")
        assert client.store.get_item(root + ["s"], "one") is None
    finally:
        client.close()


def test_store_semantic_search_sync():
    # The server embeds the "text" field with the fake endpoint of
    # test/conformance/embeddings_test.go (words shared = similar).
    client = get_sync_client(url=URL, api_key=API_KEY)
    try:
        ns = store_ns("memories")
        for key, text in [
            ("cats", "cats purr and cats sleep all day"),
            ("dogs", "dogs bark at the mailman"),
            ("rain", "rain falls on monday"),
        ]:
            client.store.put_item(ns, key, {"text": text, "topic": "pets" if key != "rain" else "weather"})
        found = client.store.search_items(ns, query="where do cats sleep")["items"]
        assert [i["key"] for i in found][0] == "cats"
        scores = [i["score"] for i in found]
        assert all(isinstance(s, (int, float)) for s in scores)  # JSON numbers: 0 reads as an int
        assert scores == sorted(scores, reverse=True)
        assert 0.3 < scores[0] <= 1.0  # a cosine similarity: 0.5 for these words
        found = client.store.search_items(ns, query="monday rain", filter={"topic": "weather"})["items"]
        assert [i["key"] for i in found] == ["rain"]
    finally:
        client.close()
CHAT_RELEASE = os.environ.get("STEPGRAPH_CHAT_RELEASE_PYTHON", "")


async def collect_deltas(deltas):
    return [d async for d in deltas]


@with_client
async def test_thread_stream_tokens_as_deltas(client):
    """A streaming chat model through client.threads.stream: the message's
    text arrives as deltas while the model is still answering (py_assist
    holds after two pieces of a message with "wait" until released), and
    the message the deltas make is the one the thread keeps."""
    await deploy_chat()
    assert CHAT_RELEASE, "STEPGRAPH_CHAT_RELEASE_PYTHON is not set"
    tid = str(uuid.uuid4())
    said = "You said: please wait."
    async with client.threads.stream(tid, assistant_id="py_assist") as thread:
        started = await thread.run.start(input={"messages": [{"role": "user", "content": "please wait"}]})
        # The projection feeds each message's stream while it is iterated:
        # a task keeps iterating it while this one reads the deltas.
        found = asyncio.Queue()

        async def pump():
            async for m in thread.messages:
                await found.put(m)

        pumping = asyncio.create_task(pump())
        try:
            message = await asyncio.wait_for(found.get(), SAFETY_NET)
            assert message.node == "reply", message.node
            deltas = aiter(message.text)
            first = [await asyncio.wait_for(anext(deltas), SAFETY_NET) for _ in range(2)]
            assert first == ["You", " sa"], first
            # The model holds: the run has not ended, yet its first tokens came.
            run = await client.runs.get(tid, started["run_id"])
            assert run["status"] == "running", run
            async with httpx.AsyncClient(timeout=30) as http:
                (await http.post(CHAT_RELEASE)).raise_for_status()
            rest = await asyncio.wait_for(collect_deltas(deltas), SAFETY_NET)
            assert len(rest) > 1 and "".join(first + rest) == said, rest
            assert await asyncio.wait_for(message.text, SAFETY_NET) == said
            message_id = message.message_id
        finally:
            pumping.cancel()
            await asyncio.gather(pumping, return_exceptions=True)
    await client.runs.join(tid, started["run_id"])
    state = await client.threads.get_state(tid)
    last = state["values"]["messages"][-1]
    assert last["content"] == said and last["id"] == message_id, last
    assert state["next"] == ["approve"], state
