"""A LangGraph Python app, deployed from a git repository and run through
the official SDK (langgraph-sdk) and RemoteGraph, unchanged.

The app is runtimes/python/tests/apps/basic; TestLangGraphApp (Go) starts
the server and sets the environment.
"""

import os
import time

import httpx
import pytest
from langgraph_sdk import get_sync_client

URL = os.environ["STEPGRAPH_URL"]
KEY = os.environ["STEPGRAPH_API_KEY"]


def deploy(repo: str, name: str) -> dict:
    with httpx.Client(base_url=URL, headers={"X-Api-Key": KEY}, timeout=30) as h:
        r = h.post("/v2/deployments", json={
            "name": name, "source": "hosted_repo",
            "source_config": {"repo_url": repo},
            "source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"},
        })
        assert r.status_code == 201, r.text
        d = r.json()
        deadline = time.monotonic() + 180  # a safety net: building the env and importing the app
        while True:
            rev = h.get(f"/v2/deployments/{d['id']}/revisions/{d['latest_revision_id']}").json()
            if rev["status"] in ("DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED"):
                return rev
            assert time.monotonic() < deadline, rev
            time.sleep(0.2)


@pytest.fixture(scope="module")
def client():
    rev = deploy(os.environ["STEPGRAPH_LG_REPO"], "basic-agents")
    assert rev["status"] == "DEPLOYED", rev
    return get_sync_client(url=URL, api_key=KEY)


def test_javascript_app_fails_its_revision():
    rev = deploy(os.environ["STEPGRAPH_LG_JS_REPO"], "js-agents")
    assert rev["status"] == "BUILD_FAILED"
    assert "JavaScript LangGraph apps are not supported" in rev["status_message"]


def test_graphs_schemas_and_drawing_come_from_the_compiled_graph(client):
    a = client.assistants.get("parent")
    assert a["graph_id"] == "parent"
    drawn = client.assistants.get_graph(a["assistant_id"])
    assert {n["id"] for n in drawn["nodes"]} == {"__start__", "before", "sub", "__end__"}
    xray = client.assistants.get_graph(a["assistant_id"], xray=True)
    assert {"sub:child_step", "sub:child_ask"} <= {n["id"] for n in xray["nodes"]}
    with pytest.raises(Exception) as e:
        client.assistants.get_graph(a["assistant_id"], xray=-1)
    assert type(e.value).__name__ == "UnprocessableEntityError" and "xray" in str(e.value)
    schemas = client.assistants.get_schemas(a["assistant_id"])
    assert "text" in schemas["input_schema"]["properties"]
    assert schemas["graph_id"] == "parent"


def test_react_agent_streams_tokens_and_custom_events(client):
    thread = client.threads.create()
    tokens, custom = [], []
    for part in client.runs.stream(thread["thread_id"], "agent",
                                   input={"messages": [{"role": "user", "content": "weather in Paris?"}]},
                                   stream_mode=["messages-tuple", "custom", "values"]):
        if part.event == "messages":
            chunk, meta = part.data
            if chunk["type"] == "AIMessageChunk" and meta["langgraph_node"] == "agent":
                tokens.append(chunk["content"])
        elif part.event == "custom":
            custom.append(part.data)
        assert part.event != "error", part.data
    assert "".join(tokens) == "The weather in Paris is sunny today."
    assert len([t for t in tokens if t]) > 3
    assert custom == [{"tool": "get_weather", "city": "Paris"}]
    state = client.threads.get_state(thread["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["next"] == []
    history = client.threads.get_history(thread["thread_id"], limit=10)
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    assert history[0]["metadata"]["graph_id"] == "agent" and history[0]["metadata"]["source"] == "loop"
    assert history[0]["metadata"]["run_id"]  # the run that wrote it, as upstream
    # messages mode: the Python server's messages/partial events
    events = [p.event for p in client.runs.stream(client.threads.create()["thread_id"], "agent",
              input={"messages": [{"role": "user", "content": "again"}]}, stream_mode="messages")]
    assert "messages/metadata" in events and "messages/partial" in events


def test_interrupt_resumed_by_command(client):
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "hitl", input={"topic": "cats"})
    assert out["__interrupt__"][0]["value"] == {"question": "Publish cats?"}
    state = client.threads.get_state(thread)
    assert state["next"] == ["review"]
    assert state["tasks"][0]["interrupts"][0]["value"] == {"question": "Publish cats?"}
    out = client.runs.wait(thread, "hitl", command={"resume": "yes"})
    assert out == {"topic": "cats", "approved": True, "log": ["drafted cats", "review: yes"]}


def test_map_reduce_and_update_state(client):
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "mapreduce", input={"subjects": ["owls", "cats"]})
    assert sorted(out["jokes"]) == ["a joke about cats", "a joke about owls"]
    client.threads.update_state(thread, {"jokes": ["a pun"]}, as_node="joke")
    state = client.threads.get_state(thread)
    assert state["values"]["jokes"][-1] == "a pun"  # LangGraph's reducer (operator.add)
    assert state["next"] == ["pick"] and state["metadata"]["source"] == "update"
    out = client.runs.wait(thread, "mapreduce")
    assert out["best"] == "a joke about cats"


def test_supersteps_go_through_bulk_update_state(client):
    """A thread created with supersteps on an app graph: LangGraph's
    bulk_update_state, one checkpoint per superstep (as upstream)."""
    thread = client.threads.create(metadata={"graph_id": "mapreduce"}, supersteps=[
        {"updates": [{"values": {"subjects": ["owls", "cats"]}, "as_node": "__input__"}]},
        {"updates": [{"values": {"jokes": ["a joke about owls"]}, "as_node": "joke"},
                     {"values": {"jokes": ["a joke about cats"]}, "as_node": "joke"}]},
    ])["thread_id"]
    history = client.threads.get_history(thread)
    assert [(h["metadata"]["source"], h["metadata"]["step"]) for h in history] == [("update", 0), ("input", -1)]
    state = client.threads.get_state(thread)
    assert state["values"]["jokes"] == ["a joke about owls", "a joke about cats"]
    assert state["next"] == ["pick"]
    assert client.threads.get(thread)["values"]["jokes"] == ["a joke about owls", "a joke about cats"]
    assert client.runs.wait(thread, "mapreduce")["best"] == "a joke about cats"
    with pytest.raises(Exception) as e:
        client.threads.create(metadata={"graph_id": "mapreduce"}, supersteps=[
            {"updates": [{"values": {"jokes": ["x"]}, "as_node": "no_such_node"}]}])
    assert type(e.value).__name__ == "UnprocessableEntityError" and "supersteps" in str(e.value)


def test_subgraphs_come_from_the_compiled_graph(client):
    a = client.assistants.get("parent")
    subs = client.assistants.get_subgraphs(a["assistant_id"])
    assert set(subs) == {"sub"}
    assert "text" in subs["sub"]["state_schema"]["properties"]
    assert set(client.assistants.get_subgraphs(a["assistant_id"], namespace="sub", recurse=True)) == {"sub"}
    assert client.assistants.get_subgraphs(client.assistants.get("mapreduce")["assistant_id"]) == {}


def test_thread_state_with_subgraphs(client):
    """subgraphs=True: the task running the interrupted subgraph carries the
    subgraph's state, from LangGraph's get_state(subgraphs=True)."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "parent", input={"text": "hi"})  # interrupted inside the subgraph
    state = client.threads.get_state(thread, subgraphs=True)
    assert state["next"] == ["sub"]
    sub = state["tasks"][0]["state"]
    assert sub["next"] == ["child_ask"] and sub["values"] == {"text": "hi parent child"}
    assert sub["checkpoint"]["checkpoint_ns"] == "sub:" + state["tasks"][0]["id"]
    at = client.threads.get_state(thread, checkpoint_id=state["checkpoint_id"], subgraphs=True)
    assert at["tasks"][0]["state"]["values"] == {"text": "hi parent child"}
    assert client.threads.get_state(thread)["tasks"][0]["state"] is None


def test_subgraph_streams_with_stream_subgraphs(client):
    thread = client.threads.create()["thread_id"]
    names = [p.event for p in client.runs.stream(thread, "parent", input={"text": "hi"},
                                                 stream_mode="updates", stream_subgraphs=True)]
    assert any(n.startswith("updates|sub:") for n in names), names
    out = client.runs.wait(thread, "parent", command={"resume": "ok"})
    assert out == {"text": "hi parent child ok"}


def test_graph_store_is_the_store_api(client):
    for fact in ("likes tea", "has a cat"):
        out = client.runs.wait(None, "memory", input={"user": "u-store", "fact": fact})
    assert out["known"] == ["has a cat", "likes tea"]
    found = client.store.search_items(["memories", "u-store"])
    assert sorted(i["value"]["text"] for i in found["items"]) == ["has a cat", "likes tea"]


def test_remote_graph(client):
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("hitl", url=URL, api_key=KEY)
    thread = client.threads.create()["thread_id"]
    config = {"configurable": {"thread_id": thread}}
    remote.invoke({"topic": "dogs"}, config)
    snap = remote.get_state(config)
    assert snap.next == ("review",)
    assert snap.values["log"] == ["drafted dogs"]
