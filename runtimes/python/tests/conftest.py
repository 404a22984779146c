"""Starts the runtime on the test app, in process, on 127.0.0.1."""

import json
import os
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.dirname(HERE))

from stepgraph_runtime.server import serve  # noqa: E402

APP = os.path.join(HERE, "apps", "basic", "langgraph.json")


class Client:
    def __init__(self, base: str, token: str):
        self.base = base
        self.token = token

    def _req(self, path: str, body: dict):
        return urllib.request.Request(
            self.base + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )

    def call(self, path: str, body: dict) -> dict:
        with urllib.request.urlopen(self._req(path, body), timeout=60) as r:
            return json.loads(r.read())

    def run(self, body: dict) -> list[dict]:
        with urllib.request.urlopen(self._req("/run", body), timeout=60) as r:
            assert r.headers["Content-Type"] == "application/x-ndjson"
            return [json.loads(line) for line in r.read().splitlines() if line]


class Platform:
    """What the platform does between calls: it keeps the checkpoints the
    runtime reports and hands back the newest as the next call's parent."""

    def __init__(self, client: Client):
        self.client = client
        self.checkpoints: dict[str, dict] = {}  # id -> checkpoint, replaced on change

    def latest(self) -> dict | None:
        return self.checkpoints[max(self.checkpoints)] if self.checkpoints else None

    def run(self, graph: str, thread: str = "t1", parent: dict | None = None, **body) -> list[dict]:
        parent = parent if parent is not None else self.latest()
        msgs = self.client.run({"graph": graph, "thread_id": thread,
                                "checkpoint": parent["langgraph"] if parent else None, **body})
        for m in msgs:
            if m["type"] == "checkpoint":
                self.checkpoints[m["checkpoint"]["id"]] = m["checkpoint"]
        return msgs

    def update_state(self, graph: str, values, as_node=None, thread="t1") -> dict:
        parent = self.latest()
        out = self.client.call("/update_state", {"graph": graph, "thread_id": thread, "values": values,
                                                 "as_node": as_node, "checkpoint": parent["langgraph"] if parent else None})
        cp = out["checkpoint"]
        self.checkpoints[cp["id"]] = cp
        return cp


class FakeStore(BaseHTTPRequestHandler):
    """The platform's side of the store operations, in memory (for the
    runtime's own tests; the Go suite runs them on the real store API)."""

    items: dict = {}
    token = "store-token"

    def log_message(self, *a):
        pass

    def do_POST(self):
        assert self.headers["Authorization"] == f"Bearer {self.token}"
        ops = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["ops"]
        results = []
        for op in ops:
            ns = tuple(op.get("namespace") or ())
            if op["op"] == "put":
                if op["value"] is None:
                    self.items.pop((ns, op["key"]), None)
                else:
                    self.items[(ns, op["key"])] = op["value"]
                results.append(None)
            elif op["op"] == "get":
                v = self.items.get((ns, op["key"]))
                results.append(None if v is None else self._item(ns, op["key"], v))
            elif op["op"] == "search":
                pre = tuple(op["namespace_prefix"])
                results.append([self._item(n, k, v) for (n, k), v in sorted(self.items.items())
                                if n[:len(pre)] == pre][op["offset"]:op["offset"] + op["limit"]])
            else:
                results.append(sorted({list(n) and n for (n, _k) in self.items}))
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _item(ns, key, value):
        return {"namespace": list(ns), "key": key, "value": value,
                "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00"}


@pytest.fixture(scope="session")
def client():
    os.environ["STEPGRAPH_RUNTIME_TOKEN"] = "rt-token"
    server = serve(APP)
    host, port = server.server_address[:2]
    yield Client(f"http://{host}:{port}", "rt-token")
    server.shutdown()
    server.server_close()


@pytest.fixture
def platform(client):
    return Platform(client)


@pytest.fixture
def store_url():
    FakeStore.items = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeStore)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    yield {"url": f"http://{host}:{port}/store", "token": FakeStore.token}
    server.shutdown()
    server.server_close()
