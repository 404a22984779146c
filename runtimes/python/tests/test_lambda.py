"""The Lambda transport answers what the HTTP one does (one dispatch), and
runs that yield at superstep boundaries end as one uninterrupted call would."""

import json
import os
import re
import urllib.request

import pytest

from conftest import APP, Platform
from stepgraph_runtime import lambda_handler
from stepgraph_runtime.app import load_app


@pytest.fixture(scope="module")
def app():
    return load_app(APP)


class LambdaClient:
    """The test platform's client, over the handler instead of HTTP."""

    def __init__(self, app):
        self.app = app

    def invoke(self, action: str, body: dict) -> dict:
        # through JSON both ways, as Lambda carries the event and the result
        out = lambda_handler.handle(self.app, json.loads(json.dumps({"action": action, "request": body})))
        return json.loads(json.dumps(out))

    def call(self, path: str, body: dict) -> dict:
        out = self.invoke(path.strip("/"), body)
        assert out["status"] == 200, out
        return out["body"]

    def run(self, body: dict) -> list[dict]:
        out = self.invoke("run", body)
        assert out["status"] == 200, out
        return out["body"]["messages"]


def _shape(cp):
    """What does not depend on when the call ran: no ids, no times."""
    return {"values": cp["values"], "next": cp["next"], "step": cp["metadata"]["step"],
            "source": cp["metadata"]["source"], "tasks": [t["name"] for t in cp["tasks"]],
            "interrupts": [i["value"] for t in cp["tasks"] for i in t.get("interrupts", [])]}


def _history(platform):
    return [_shape(c) for c in sorted(platform.checkpoints.values(), key=lambda c: c["id"])]


def test_same_answers_as_http(client, app):
    lam = LambdaClient(app)
    for body in [{}, {"graph": "parent", "xray": True}]:
        assert lam.call("/describe", body) == client.call("/describe", body)
    over_http, over_lambda = Platform(client), Platform(lam)
    for p in (over_http, over_lambda):
        p.run("hitl", input={"topic": "cats"}, stream_mode=["updates", "values"])
        p.run("hitl", command={"resume": "yes"})
        p.run("mapreduce", thread="t2", parent={}, input={"subjects": ["owls"]})
    assert _history(over_lambda) == _history(over_http)
    for p in (over_http, over_lambda):
        p.update_state("hitl", {"topic": "dogs"}, as_node="draft")
    assert _history(over_lambda) == _history(over_http)
    st = [c.call("/state", {"graph": "hitl", "thread_id": "t1", "checkpoint": p.latest()["langgraph"]})["state"]
          for c, p in ((client, over_http), (lam, over_lambda))]
    assert _shape(st[0]) == _shape(st[1])


def test_refusals_and_unknown_actions(app):
    assert lambda_handler.handle(app, {"action": "run", "request": {"graph": "hitl"}}) == {
        "status": 400, "body": {"detail": "thread_id: is required"}}
    assert lambda_handler.handle(app, {"action": "nope"})["status"] == 404
    assert lambda_handler.handle(app, {})["status"] == 400
    assert lambda_handler.handle(app, {"action": "describe", "request": []})["body"] == {"detail": "request: must be a JSON object"}
    out = lambda_handler.handle(app, {"action": "run", "request": {"graph": "hitl", "thread_id": "t", "yield_after": {"bytes": 0}}})
    assert out == {"status": 400, "body": {"detail": "yield_after: bytes: must be a positive integer"}}


def _until_done(platform, graph, thread="t1", streamed=None, **first):
    """Calls with the smallest budget (one superstep per call) until the run
    stops for another reason; answers the end messages."""
    ends = []
    body = first
    while True:
        msgs = platform.run(graph, thread=thread, yield_after={"bytes": 1}, **body)
        if streamed is not None:
            streamed += [m for m in msgs if m["type"] == "event"]
        ends.append(msgs[-1])
        if msgs[-1]["status"] != "yielded":
            return ends
        body = {"continued": True, "stream_mode": first.get("stream_mode")}  # no input, the last checkpoint


@pytest.mark.parametrize("graph,first,resume", [
    ("agent", {"input": {"messages": [{"role": "user", "content": "weather in Paris?"}]}}, None),
    ("hitl", {"input": {"topic": "cats"}}, {"command": {"resume": "yes"}}),
    ("mapreduce", {"input": {"subjects": ["owls", "cats", "bees"]}}, None),
])
def test_yielding_runs_end_as_one_call(client, graph, first, resume):
    once, stepwise = Platform(client), Platform(client)
    want = [once.run(graph, **first)[-1]]
    got = _until_done(stepwise, graph, **first)
    assert len(got) > 2 and all(e["status"] == "yielded" for e in got[:-1])
    if resume:
        assert want[-1]["status"] == got[-1]["status"] == "interrupted"
        want.append(once.run(graph, **resume)[-1])
        got += _until_done(stepwise, graph, **resume)
    assert got[-1]["status"] == want[-1]["status"] == "success"
    strip = lambda v: json.loads(json.dumps(v).replace('"id":', '"_id":'))  # noqa: E731
    if graph == "agent":  # message ids are made per call
        for e in (got[-1], want[-1]):
            for m in e["values"]["messages"]:
                m.pop("id", None)
    assert strip(got[-1]["values"]) == strip(want[-1]["values"])
    hist = lambda p: [{k: v for k, v in h.items() if k != "values"} for h in _history(p)]  # noqa: E731
    assert hist(stepwise) == hist(once)


@pytest.mark.parametrize("graph,first", [
    ("mapreduce", {"input": {"subjects": ["owls", "cats"]}}),
    ("agent", {"input": {"messages": [{"role": "user", "content": "weather in Paris?"}]}}),
])
def test_yielding_runs_stream_as_one_call(client, graph, first):
    # the values and updates streams are those of one call: a continuation
    # does not repeat the state it starts from
    modes = ["values", "updates"]
    want = [m for m in Platform(client).run(graph, stream_mode=modes, **first) if m["type"] == "event"]
    got = []
    _until_done(Platform(client), graph, streamed=got, stream_mode=modes, **first)
    strip = lambda evs: json.loads(re.sub(r'"(id|tool_call_id)": "[^"]*"', '"id": ""', json.dumps(evs)))  # noqa: E731
    assert [e["mode"] for e in got] == [e["mode"] for e in want]
    assert strip(got) == strip(want)


def test_yield_after_seconds_stops_at_a_boundary(client):
    # a budget already spent when the first step ends: the run yields after it
    p = Platform(client)
    msgs = p.run("hitl", input={"topic": "cats"}, yield_after={"seconds": 1e-9})
    assert msgs[-1]["status"] == "yielded"
    assert p.latest()["next"] in (["__start__"], ["draft"], ["review"])


def test_secrets_are_the_environment_of_one_call(app, monkeypatch):
    """The event's secrets are os.environ while the call runs, and only then:
    what they replaced comes back, and a variable they added goes."""
    from stepgraph_runtime import dispatch

    seen = {}

    def call(app_, action, req):
        seen.update({k: os.environ.get(k) for k in ("SG_TEST_TOKEN", "SG_TEST_HOME")})
        return 200, {}

    monkeypatch.setattr(dispatch, "call", call)
    monkeypatch.setenv("SG_TEST_HOME", "before")
    monkeypatch.delenv("SG_TEST_TOKEN", raising=False)
    out = lambda_handler.handle(app, {"action": "health", "secrets": {"SG_TEST_TOKEN": "t-1", "SG_TEST_HOME": "h-1"}})
    assert out == {"status": 200, "body": {}}
    assert seen == {"SG_TEST_TOKEN": "t-1", "SG_TEST_HOME": "h-1"}
    assert "SG_TEST_TOKEN" not in os.environ and os.environ["SG_TEST_HOME"] == "before"

    def failing(app_, action, req):
        raise RuntimeError("boom")

    monkeypatch.setattr(dispatch, "call", failing)
    with pytest.raises(RuntimeError):
        lambda_handler.handle(app, {"action": "health", "secrets": {"SG_TEST_TOKEN": "t-2"}})
    assert "SG_TEST_TOKEN" not in os.environ  # restored on failure too


def test_bad_secrets_are_refused_without_their_values(app):
    for secrets, names in [([1], "keys"), ({"A=B": "v"}, "keys"), ({"TOKEN": 5, "OK": "v"}, "TOKEN")]:
        out = lambda_handler.handle(app, {"action": "health", "secrets": secrets})
        assert out["status"] == 400 and names in out["body"]["detail"], out
        assert "5" not in out["body"]["detail"]


class _EventSink:
    """The platform's /runtime/events in memory: records each batch (and its
    bearer), answering `status`."""

    def __init__(self, status: int = 200):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        sink = self
        self.batches: list[list[dict]] = []
        self.bearers: set[str] = set()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sink.batches.append(body["events"])
                sink.bearers.add(self.headers["Authorization"])
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/runtime/events"

    def close(self):
        self.server.shutdown()


def _events_run(app, sink, thread):
    body = {"graph": "hitl", "thread_id": thread, "checkpoint": None, "input": {"topic": "cats"},
            "stream_mode": ["updates", "values"], "events": {"url": sink.url, "token": "call-token"}}
    out = lambda_handler.handle(app, json.loads(json.dumps({"action": "run", "request": body})))
    assert out["status"] == 200, out
    return out["body"]["messages"]


def test_events_are_posted_as_the_call_runs(app):
    """Every event is numbered in the call; those the platform acknowledged
    are posted in order and left out of the answer, which has the rest:
    together each event once, in order."""
    sink = _EventSink()
    try:
        answer = _events_run(app, sink, "t-post")
    finally:
        sink.close()
    posted = [e for b in sink.batches for e in b]
    assert posted, "no event was posted"
    assert sink.bearers == {"Bearer call-token"}
    left = [m for m in answer if m["type"] == "event"]
    seqs = [e["seq"] for e in posted] + [m["seq"] for m in left]
    assert seqs == list(range(1, len(seqs) + 1))
    assert all(e["type"] == "event" for e in posted)
    assert answer[-1]["type"] == "end" and any(m["type"] == "checkpoint" for m in answer)


def test_a_failed_post_leaves_the_events_in_the_answer(app):
    """A batch the platform refuses stops the posting: the answer carries
    every event of the call."""
    sink = _EventSink(status=503)
    try:
        answer = _events_run(app, sink, "t-refused")
    finally:
        sink.close()
    assert len(sink.batches) == 1
    left = [m["seq"] for m in answer if m["type"] == "event"]
    assert left == list(range(1, len(left) + 1)) and len(left) >= len(sink.batches[0])


def test_runtime_describe_says_it_is_an_app(client, app, monkeypatch, tmp_path):
    """The function runtime protocol's describe (GET /describe; a Lambda
    event without a request) marks the runtime a LangGraph app and lists its
    graphs, so an external_docker deployment of it is served as an app."""
    want = {"langgraph_app": {"graphs": {gid: spec.path for gid, spec in app.graphs.items()}}}
    assert want["langgraph_app"]["graphs"]["hitl"] == "./src/agent/hitl.py:graph"
    # over HTTP, without the runtime token: the platform sends none to a custom_url
    with urllib.request.urlopen(client.base + "/describe", timeout=60) as r:
        assert json.loads(r.read()) == want
    monkeypatch.setattr(lambda_handler, "_app", app)
    assert lambda_handler.handler({"action": "describe"}) == want
    # with a request it is still the app's own describe (the graphs' schemas)
    assert set(lambda_handler.handler({"action": "describe", "request": {}})["body"]["graphs"]) == set(app.graphs)

    broken = tmp_path / "langgraph.json"
    broken.write_text(json.dumps({"graphs": {"agent": "./missing.py:graph"}}))
    monkeypatch.setattr(lambda_handler, "_app", None)
    monkeypatch.setenv("STEPGRAPH_APP_CONFIG", str(broken))
    err = lambda_handler.handler({"action": "describe"})["langgraph_app"]["error"]
    assert "missing.py" in err["message"], err
    broken.write_text(json.dumps({"graphs": {"agent": "./src/agent.ts:graph"}}))
    err = lambda_handler.handler({"action": "describe"})["langgraph_app"]["error"]
    assert err["error"] == "AppError" and "JavaScript LangGraph apps are not supported" in err["message"], err
