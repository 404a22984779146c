"""The runtime on a real LangGraph app: every call stateless, the checkpoints
kept only by the test's "platform" between calls."""

import json
import os
import urllib.error
import urllib.request

import pytest

from stepgraph_runtime.app import AppError, read_config


def events(msgs, mode=None):
    return [m for m in msgs if m["type"] == "event" and (mode is None or m["mode"] == mode)]


def end(msgs):
    assert msgs[-1]["type"] == "end", msgs[-1]
    return msgs[-1]


def test_health_and_auth(client):
    with urllib.request.urlopen(client.base + "/health") as r:
        assert json.loads(r.read())["graphs"] == ["agent", "hitl", "mapreduce", "memory", "parent", "slow"]
    req = urllib.request.Request(client.base + "/describe", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 401


def test_connections_send_each_write_at_once(client, monkeypatch):
    # A run's stream is many small writes; with Nagle's algorithm each one
    # after the first waited for the platform's delayed ACK (~40 ms).
    import socket

    from stepgraph_runtime import server

    seen = []
    setup = server.Handler.setup

    def recording(self):
        setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(server.Handler, "setup", recording)
    client.call("/describe", {"graph": "agent"})
    assert seen and all(seen), seen


def test_describe_comes_from_the_compiled_graph(client):
    out = client.call("/describe", {"graph": "parent"})["graphs"]["parent"]
    nodes = {n["id"] for n in out["graph"]["nodes"]}
    assert nodes == {"__start__", "before", "sub", "__end__"}
    assert out["subgraphs"] == ["sub"]
    assert "text" in out["input_schema"]["properties"]
    xray = client.call("/describe", {"graph": "parent", "xray": True})["graphs"]["parent"]
    assert {"sub:child_step", "sub:child_ask"} <= {n["id"] for n in xray["graph"]["nodes"]}
    all_graphs = client.call("/describe", {})["graphs"]
    assert set(all_graphs) == {"agent", "hitl", "mapreduce", "memory", "parent", "slow"}


def test_bad_requests_name_the_field(client):
    for body, want in [
        ({"graph": "nope", "thread_id": "t"}, "graph: no graph 'nope'"),
        ({"graph": "hitl"}, "thread_id: is required"),
        ({"graph": "hitl", "thread_id": "t", "stream_mode": ["bogus"]}, "stream_mode: 'bogus'"),
        ({"graph": "hitl", "thread_id": "t", "checkpoint": {"v": 9}}, "checkpoint: is not a checkpoint"),
    ]:
        with pytest.raises(urllib.error.HTTPError) as e:
            client.run(body)
        assert e.value.code == 400
        assert want in json.loads(e.value.read())["detail"]


def test_react_agent_streams_tokens_tool_calls_and_custom_events(platform):
    msgs = platform.run("agent", input={"messages": [{"role": "user", "content": "weather in Paris?"}]},
                        stream_mode=["messages", "custom", "values"])
    assert end(msgs)["status"] == "success"
    tokens = [e["data"][0]["content"] for e in events(msgs, "messages")
              if e["data"][0]["type"] == "AIMessageChunk" and e["data"][1]["langgraph_node"] == "agent"]
    assert "".join(tokens) == "The weather in Paris is sunny today."
    assert len([t for t in tokens if t]) > 3  # token by token, not one message
    assert events(msgs, "custom")[0]["data"] == {"tool": "get_weather", "city": "Paris"}
    final = end(msgs)["values"]["messages"]
    assert [m["type"] for m in final] == ["human", "ai", "tool", "ai"]
    assert final[1]["tool_calls"][0]["name"] == "get_weather"
    assert final[2]["content"] == "It is sunny in Paris."
    # every step's checkpoint reached the platform, chained by parent ids
    cps = sorted(platform.checkpoints.values(), key=lambda c: c["id"])
    assert [c["metadata"]["step"] for c in cps] == [-1, 0, 1, 2, 3]
    assert all(c["parent_id"] == p["id"] for p, c in zip(cps, cps[1:]))
    assert cps[-1]["next"] == [] and cps[-1]["values"]["messages"][-1]["content"].startswith("The weather")


def test_calls_share_the_threads_of_synchronous_nodes(platform):
    # Each call's loop used to start a pool of its own (and join it at the
    # end); the calls now reuse one pool's threads.
    from stepgraph_runtime import dispatch

    def run(thread):
        msgs = platform.run("agent", thread=thread, parent={}, input={"messages": [{"role": "user", "content": "hi"}]})
        assert end(msgs)["status"] == "success"

    run("pool-1")
    threads = set(dispatch._shared_pool()._threads)
    assert threads
    for i in range(3):
        run(f"pool-{i + 2}")
    assert set(dispatch._shared_pool()._threads) == threads


def test_interrupt_resumed_by_command(platform):
    msgs = platform.run("hitl", input={"topic": "cats"}, stream_mode=["updates"])
    e = end(msgs)
    assert e["status"] == "interrupted"
    assert e["interrupts"][0]["value"] == {"question": "Publish cats?"}
    latest = platform.latest()
    assert latest["next"] == ["review"]
    assert latest["tasks"][0]["interrupts"][0]["value"] == {"question": "Publish cats?"}
    assert any(ev["data"].get("__interrupt__") for ev in events(msgs, "updates"))
    msgs = platform.run("hitl", command={"resume": "yes"})
    assert end(msgs)["status"] == "success"
    assert end(msgs)["values"] == {"topic": "cats", "approved": True, "log": ["drafted cats", "review: yes"]}
    assert platform.latest()["next"] == []


def test_map_reduce_with_send(platform):
    msgs = platform.run("mapreduce", input={"subjects": ["owls", "cats", "bees"]})
    v = end(msgs)["values"]
    assert sorted(v["jokes"]) == ["a joke about bees", "a joke about cats", "a joke about owls"]
    assert v["best"] == "a joke about bees"


def test_subgraph_streams_and_resumes_inside_the_subgraph(platform):
    msgs = platform.run("parent", input={"text": "hi"}, stream_mode=["updates", "custom"], subgraphs=True)
    assert end(msgs)["status"] == "interrupted"
    sub = [e for e in events(msgs) if e["ns"]]
    assert sub and all(e["ns"][0].startswith("sub:") for e in sub)
    assert any(e["mode"] == "custom" and e["data"] == {"in": "child"} for e in sub)
    # the subgraph's own checkpoints travel in the parent's bundle
    assert any(c["ns"].startswith("sub:") for c in platform.latest()["langgraph"]["checkpoints"])
    msgs = platform.run("parent", command={"resume": "ok"}, stream_mode=["values"])
    assert end(msgs)["values"] == {"text": "hi parent child ok"}
    # without subgraphs the subgraph's events are not streamed
    msgs = platform.run("parent", thread="t2", parent={}, input={"text": "x"}, stream_mode=["updates"])
    assert all(not e["ns"] for e in events(msgs))


def test_subgraph_state(platform, client):
    platform.run("parent", input={"text": "hi"})
    st = client.call("/state", {"graph": "parent", "thread_id": "t1", "subgraphs": True,
                                "checkpoint": platform.latest()["langgraph"]})["state"]
    assert st["next"] == ["sub"]
    assert st["tasks"][0]["state"]["next"] == ["child_ask"]
    assert st["tasks"][0]["state"]["values"] == {"text": "hi parent child"}


def test_update_state_applies_reducers_as_node(platform):
    platform.run("mapreduce", input={"subjects": ["owls"]})
    cp = platform.update_state("mapreduce", {"jokes": ["a pun"]}, as_node="joke")
    assert cp["values"]["jokes"] == ["a joke about owls", "a pun"]  # operator.add, LangGraph's reducer
    assert cp["metadata"]["source"] == "update"
    assert cp["next"] == ["pick"]  # as if "joke" had written: its edge follows
    msgs = platform.run("mapreduce")
    assert end(msgs)["values"]["best"] == "a joke about owls"


def _reference(graph_attr):
    """The same graph on LangGraph's own in-memory saver: what upstream answers."""
    import importlib
    import sys

    from langgraph.checkpoint.memory import InMemorySaver

    from conftest import APP

    sys.path.insert(0, os.path.join(os.path.dirname(APP), "src"))
    module = importlib.import_module(f"agent.{graph_attr}")
    return module.graph.copy(update={"checkpointer": InMemorySaver()})


def test_time_travel_matches_langgraph(platform):
    from langgraph.types import Command

    ref = _reference("hitl")
    c = {"configurable": {"thread_id": "ref"}}
    ref.invoke({"topic": "cats"}, c)
    ref.invoke(Command(resume="no"), c)
    hist = list(ref.get_state_history(c))
    platform.run("hitl", input={"topic": "cats"})
    platform.run("hitl", command={"resume": "no"})
    ours = sorted(platform.checkpoints.values(), key=lambda cp: cp["id"], reverse=True)
    assert [cp["next"] for cp in ours] == [list(s.next) for s in hist]
    assert [cp["metadata"]["step"] for cp in ours] == [s.metadata["step"] for s in hist]
    assert [cp["values"] for cp in ours] == [s.values for s in hist]
    for step, command in [(1, Command(resume="yes")), (0, None)]:
        want = ref.invoke(command, next(s for s in hist if s.metadata["step"] == step).config)
        at = next(cp for cp in ours if cp["metadata"]["step"] == step)
        msgs = platform.run("hitl", parent=at, checkpoint_id=at["id"], superseded=True,
                            command={"resume": "yes"} if command else None)
        got = end(msgs)
        assert got["values"] == {k: v for k, v in want.items() if k != "__interrupt__"}
        assert [i["value"] for i in got["interrupts"]] == [i.value for i in want.get("__interrupt__", [])]


def test_error_reports_the_failed_step(platform):
    msgs = platform.run("mapreduce", input={"subjects": 5})
    e = end(msgs)
    assert e["status"] == "error" and e["error"]["error"] == "TypeError"
    assert "Traceback" in e["error"]["traceback"]


def test_store_operations_reach_the_platform(platform, store_url):
    end(platform.run("memory", input={"user": "u1", "fact": "likes tea"}, store=store_url))
    msgs = platform.run("memory", thread="t2", parent={}, input={"user": "u1", "fact": "has a cat"}, store=store_url)
    assert end(msgs)["values"]["known"] == ["has a cat", "likes tea"]


def test_javascript_graphs_are_refused(tmp_path):
    cfg = tmp_path / "langgraph.json"
    cfg.write_text(json.dumps({"graphs": {"a": "./src/graph.ts:graph"}}))
    with pytest.raises(AppError, match="JavaScript LangGraph apps are not supported"):
        read_config(str(cfg))
    cfg.write_text("{")
    with pytest.raises(AppError, match="is not valid JSON"):
        read_config(str(cfg))
    cfg.write_text(json.dumps({"graphs": {}}))
    with pytest.raises(AppError, match="/graphs: must be an object naming at least one graph"):
        read_config(str(cfg))


def test_env_installs_only_what_is_missing(tmp_path):
    import subprocess
    import sys

    from conftest import APP

    out = subprocess.run([sys.executable, "-m", "stepgraph_runtime.env", "--config", APP, "--target", str(tmp_path / "site"),
                          "--no-index"], capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stdout + out.stderr
    answer = json.loads(out.stdout)
    assert answer == {"satisfied": ["langgraph==1.2.22", "langchain-core==1.7.2"], "installed": []}
    cfg = tmp_path / "langgraph.json"
    cfg.write_text(json.dumps({"graphs": {"a": "./g.py:graph"}, "dependencies": ["no-such-package-stepgraph==1.0"]}))
    out = subprocess.run([sys.executable, "-m", "stepgraph_runtime.env", "--config", str(cfg), "--target", str(tmp_path / "site"),
                          "--no-index"], capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 2
    err = json.loads(out.stdout)["error"]
    assert err["error"] == "DependencyError" and "no-such-package-stepgraph==1.0" in err["message"]


def test_the_example_app(tmp_path):
    """examples/langgraph-app, as `stepgraph dev` serves it: asks, then answers."""
    import asyncio

    from stepgraph_runtime import ops
    from stepgraph_runtime.app import load_app

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    app = load_app(os.path.join(root, "examples", "langgraph-app", "langgraph.json"))
    msgs: list = []
    asyncio.run(ops.run(app, {"graph": "agent", "thread_id": "t", "stream_mode": ["custom"],
                              "input": {"messages": [{"role": "user", "content": "hi"}]}}, msgs.append))
    assert msgs[-1]["status"] == "interrupted"
    assert msgs[-1]["interrupts"][0]["value"] == {"question": "Answer 'hi'?"}
    assert {"type": "event", "mode": "custom", "ns": [], "data": {"step": "confirm"}} in msgs
    parent = [m for m in msgs if m["type"] == "checkpoint"][-1]["checkpoint"]["langgraph"]
    msgs = []
    asyncio.run(ops.run(app, {"graph": "agent", "thread_id": "t", "checkpoint": parent,
                              "command": {"resume": "yes"}}, msgs.append))
    assert msgs[-1]["status"] == "success"
    assert msgs[-1]["values"]["messages"][-1]["content"].endswith("hello from stepgraph!")


def test_an_app_printing_while_imported_does_not_break_the_hello_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "g.py").write_text(
        "import os\n"
        "print('hello from the app, on import')\n"
        "os.write(1, b'raw bytes on fd 1\\n')\n"
        "from typing import TypedDict\n"
        "from langgraph.graph import StateGraph\n"
        "class S(TypedDict):\n"
        "    x: int\n"
        "graph = StateGraph(S).add_node('n', lambda s: {'x': s['x'] + 1}).add_edge('__start__', 'n').compile()\n")
    (tmp_path / "langgraph.json").write_text(json.dumps({"graphs": {"g": "./g.py:graph"}}))
    p = subprocess.Popen([sys.executable, "-m", "stepgraph_runtime.server", "--config", str(tmp_path / "langgraph.json")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    try:
        hello = json.loads(p.stdout.readline())
        assert hello["graphs"] == ["g"] and hello["listening"].startswith("http://127.0.0.1:"), hello
    finally:
        p.kill()
        _, err = p.communicate(timeout=60)
    assert "hello from the app, on import" in err and "raw bytes on fd 1" in err


def test_messages_encode_as_dumps_encodes_them():
    import dataclasses
    import datetime
    import enum
    import uuid

    from langchain_core.messages import AIMessage

    from stepgraph_runtime.wire import dumps, dumps_message, to_jsonable

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Point:
        x: int
        y: tuple

    values = {"messages": [AIMessage(content="héllo", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}])],
              "when": datetime.datetime(2026, 12, 7, 12, 0), "id": uuid.UUID(int=7), "color": Color.RED,
              "point": Point(1, (2, 3.5)), "set": {"only"}, "raw": b"bytes", "n": None, "t": ("a", True)}
    # As the run builds them: plain parts, a value still to convert, the converted state.
    for msg in [{"type": "event", "mode": "values", "ns": [], "data": to_jsonable(values)},
                {"type": "event", "mode": "custom", "ns": ["a:1"], "data": values},
                {"type": "end", "status": "success", "values": to_jsonable(values), "interrupts": []}]:
        assert dumps_message(msg) == dumps(msg)
