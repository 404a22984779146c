"""Conformance of LangGraph's RemoteGraph (the `langgraph` package, pinned in
requirements.txt) against stepgraph: invoke and stream, get_state at a
checkpoint, the history and update_state, and a RemoteGraph as a node of a
local StateGraph, including an interrupt inside it: it surfaces in the local
graph, waits on the remote thread and is answered there.

Started by test/conformance/conformance_test.go (STEPGRAPH_URL,
STEPGRAPH_API_KEY).
"""

import asyncio
import os
import uuid
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_sync_client

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")


def remote(name):
    return RemoteGraph(name, url=URL, api_key=API_KEY)


def test_invoke_and_stream_stateless():
    counter = remote("counter")
    assert counter.invoke({"steps": 3}) == {"count": 3, "steps": 3}
    updates = list(counter.stream({"steps": 2}, stream_mode="updates"))
    assert updates == [{"inc": {"count": 1}}, {"inc": {"count": 1}}], updates
    values = list(counter.stream({"steps": 2}, stream_mode="values"))
    assert values[-1] == {"count": 2, "steps": 2}, values


def test_async_invoke_and_stream():
    async def main():
        echo = remote("echo")
        out = await echo.ainvoke({"messages": [{"role": "user", "content": "remote"}]})
        assert out["messages"][-1] == {"role": "assistant", "content": "echo: remote"}, out
        chunks = [c async for c in echo.astream({"messages": [{"role": "user", "content": "s"}]}, stream_mode="updates")]
        assert chunks == [{"echo": {"messages": {"role": "assistant", "content": "echo: s"}}}], chunks

    asyncio.run(main())


def test_get_state_with_a_checkpoint_and_history():
    counter = remote("counter")
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    counter.invoke({"steps": 3}, config)
    latest = counter.get_state(config)
    assert latest.values == {"count": 3, "steps": 3}
    assert latest.next == ()
    history = list(counter.get_state_history(config))
    assert len(history) == 5, [h.values for h in history]  # input + 3 steps + the input's start
    one_step_in = next(h for h in history if h.values.get("count") == 1)
    at = counter.get_state(one_step_in.config)
    assert at.values == {"count": 1, "steps": 3}, at.values
    assert at.next == ("inc",)
    assert at.config["configurable"]["checkpoint_id"] == one_step_in.config["configurable"]["checkpoint_id"]
    # update_state through RemoteGraph writes as the node, as LangGraph does.
    new_config = counter.update_state(config, {"count": 10}, as_node="inc")
    assert counter.get_state(new_config).values == {"count": 13, "steps": 3}


# The outer state has the remote graph's keys only: the whole state is the
# remote run's input, and stepgraph refuses input keys its graph does not
# have (LangGraph ignores them).
class Outer(TypedDict, total=False):
    request: str
    answer: str


def test_remote_graph_as_a_node_with_an_interrupt():
    approval = remote("approval")

    def before(state):
        return {"request": state["request"] + " on friday"}

    builder = StateGraph(Outer)
    builder.add_node("before", before)
    builder.add_node("approval", approval)
    builder.add_edge(START, "before")
    builder.add_edge("before", "approval")
    builder.add_edge("approval", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    first = graph.invoke({"request": "leave"}, config)
    interrupts = first.get("__interrupt__")
    assert interrupts and interrupts[0].value == {"question": "approve leave on friday?"}, first
    assert graph.get_state(config).next == ("approval",)

    # The remote run is the outer thread's (RemoteGraph passes the caller's
    # thread_id): the interrupt waits there, and is answered there.
    tasks = graph.get_state(config).tasks
    assert tasks[0].name == "approval" and tasks[0].interrupts[0].value == {"question": "approve leave on friday?"}
    # RemoteGraph raises the interrupt as soon as its event arrives and
    # leaves the stream: the remote run settles in the background. Joining
    # it (the run the SDK lists on the thread) waits for that.
    sdk = get_sync_client(url=URL, api_key=API_KEY)
    try:
        tid = config["configurable"]["thread_id"]
        for run in sdk.runs.list(tid):
            sdk.runs.join(tid, run["run_id"])
    finally:
        sdk.close()
    remote_state = approval.get_state(config)
    assert remote_state.next == ("ask",) and remote_state.values == {"request": "leave on friday"}, remote_state
    done = approval.invoke(Command(resume="granted"), config)
    assert done == {"request": "leave on friday", "answer": "granted"}, done
    assert approval.get_state(config).next == ()
