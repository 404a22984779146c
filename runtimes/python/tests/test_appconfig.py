"""langgraph.json's keys around the graphs: appconfig's rules, table-driven."""

import json
import os

import pytest

from stepgraph_runtime import appconfig
from stepgraph_runtime.app import AppError, load_app, read_config
from stepgraph_runtime.store import PlatformStore, encode_op

GRAPHS = {"g": "./g.py:graph"}
SECRET = "s3cret-value-never-shown"


def write_app(tmp_path, extra: dict, files: dict | None = None) -> str:
    cfg = tmp_path / "langgraph.json"
    cfg.write_text(json.dumps({"graphs": GRAPHS, **extra}))
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    return str(cfg)


@pytest.mark.parametrize("extra, files, want", [
    ({"checkpointer": {"ttl": {"default_ttl": 60}}}, None, ["/checkpointer:", "stepgraph stores every checkpoint", "remove /checkpointer"]),
    ({"auth": {"path": "./auth.py:auth"}}, None, ["/auth:", "stepgraph authenticates every request", "remove /auth"]),
    ({"http": {"app": "./app.py:app"}}, None, ["/http:", "stepgraph serves the HTTP API", "remove /http"]),
    ({"store": {"path": "./s.py:store"}}, None, ["/store/path:", "remove /store/path"]),
    ({"env": ["A=1"]}, None, ["/env: must be an object"]),
    ({"env": {"A": 1}}, None, ["/env/A: must be a string"]),
    ({"env": {"1A": "x"}}, None, ["/env/1A: is not an environment variable name"]),
    ({"env": {"STEPGRAPH_STORE_SEMANTIC": "1"}}, None, ["are the platform's"]),
    ({"env": ".env"}, None, ["/env: .env: no such file"]),
    ({"env": "../outside.env"}, None, ["must be a file inside the app's directory"]),
    ({"env": ".env"}, {".env": f"GOOD=1\nBROKEN {SECRET}\n"}, ["/env: .env: line 2: must be NAME=value"]),
    ({"env": ".env"}, {".env": f"Q=\"{SECRET}\n"}, ["line 1: its quote is not closed"]),
    ({"store": []}, None, ["/store: must be an object"]),
    ({"store": {"ttl": {"default_ttl": -1}}}, None, ["/store/ttl/default_ttl: must be a number of minutes above 0"]),
    ({"store": {"ttl": {"refresh_on_read": "yes"}}}, None, ["/store/ttl/refresh_on_read: must be true or false"]),
    ({"store": {"ttl": {"sweep_interval_minutes": 1.5}}}, None, ["/store/ttl/sweep_interval_minutes: must be a whole number"]),
    ({"store": {"index": {"dims": 0, "embed": "openai:text-embedding-3-small"}}}, None, ["/store/index/dims: must be a whole number above 0"]),
    ({"store": {"index": {"dims": 8, "embed": 3}}}, None, ["/store/index/embed: must be a string"]),
    ({"store": {"index": {"dims": 8, "fields": []}}}, None, ["/store/index/fields: must be a non-empty list"]),
])
def test_refused(tmp_path, extra, files, want):
    with pytest.raises(AppError) as e:
        read_config(write_app(tmp_path, extra, files))
    for w in want:
        assert w in str(e.value)
    assert SECRET not in str(e.value)


@pytest.mark.parametrize("extra, files, env, ttl, fields", [
    ({}, None, {}, None, None),
    ({"env": {"A": "x", "B": "y z"}}, None, {"A": "x", "B": "y z"}, None, None),
    ({"env": ".env"}, {".env": "# comment\n\nexport A=plain # trailing\nB='single # kept'\nC=\"two\\nlines \\\"q\\\"\"\nD=\n"},
     {"A": "plain", "B": "single # kept", "C": 'two\nlines "q"', "D": ""}, None, None),
    ({"store": {"ttl": {"default_ttl": 60, "sweep_interval_minutes": 10}}}, None, {},
     {"refresh_on_read": True, "default_ttl": 60.0}, None),
    ({"store": {"ttl": {"refresh_on_read": False}}}, None, {}, {"refresh_on_read": False, "default_ttl": None}, None),
    ({"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text", "$.title"]}}}, None, {},
     None, ["text", "$.title"]),
])
def test_accepted(tmp_path, extra, files, env, ttl, fields):
    path = write_app(tmp_path, extra, files)
    s = appconfig.check(read_config(path), path)
    assert (s.env, s.store.ttl, s.store.index_fields) == (env, ttl, fields)


def test_env_is_applied_before_import_and_the_process_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("FROM_SECRET", "secret")
    monkeypatch.delenv("FROM_JSON", raising=False)
    path = write_app(tmp_path, {"env": {"FROM_JSON": "json", "FROM_SECRET": "json"}}, {"g.py": (
        "import os\n"
        "from langgraph.graph import StateGraph\n"
        "from typing import TypedDict\n"
        "class S(TypedDict):\n    v: str\n"
        "SEEN = (os.environ['FROM_JSON'], os.environ['FROM_SECRET'])\n"
        "b = StateGraph(S)\nb.add_node('n', lambda s: s)\nb.set_entry_point('n')\ngraph = b.compile()\n")})
    app = load_app(path)
    module = [m for n, m in __import__("sys").modules.items() if n.startswith("stepgraph_app_g")][-1]
    assert module.SEEN == ("json", "secret")
    monkeypatch.delenv("FROM_JSON")
    assert app.settings.env["FROM_JSON"] == "json"


def test_index_needs_the_servers_embeddings(tmp_path, monkeypatch):
    path = write_app(tmp_path, {"store": {"index": {"embed": "openai:x", "dims": 8}}}, {"g.py": "graph = None\n"})
    monkeypatch.delenv(appconfig.SEMANTIC_ENV, raising=False)
    with pytest.raises(AppError, match="/store/index: semantic search needs the server's embeddings endpoint"):
        load_app(path)


def test_index_on_a_server_with_embeddings(tmp_path, monkeypatch):
    path = write_app(tmp_path, {"store": {"index": {"embed": "openai:x", "dims": 8, "fields": ["text"]}}},
                     {"g.py": "from langgraph.graph import StateGraph\nfrom typing import TypedDict\n"
                              "class S(TypedDict):\n    v: str\n"
                              "b = StateGraph(S)\nb.add_node('n', lambda s: s)\nb.set_entry_point('n')\ngraph = b.compile()\n"})
    monkeypatch.setenv(appconfig.SEMANTIC_ENV, "1")
    assert load_app(path).settings.store.index_fields == ["text"]


def test_store_settings_are_the_graph_stores_defaults():
    from langgraph.store.base import GetOp, PutOp, _ensure_refresh, _ensure_ttl
    from langgraph.store.base import NOT_PROVIDED

    settings = appconfig.StoreSettings(ttl={"refresh_on_read": False, "default_ttl": 30.0}, index_fields=["text"], indexed=True)
    store = PlatformStore("http://127.0.0.1:1/store", "t", settings)
    assert store.supports_ttl
    assert _ensure_ttl(store.ttl_config, NOT_PROVIDED) == 30.0
    assert _ensure_refresh(store.ttl_config, None) is False
    assert encode_op(PutOp(("a",), "k", {"text": "x"}), settings.index_fields)["index"] == ["text"]
    assert encode_op(PutOp(("a",), "k", {"text": "x"}, index=False), settings.index_fields)["index"] is False
    assert encode_op(PutOp(("a",), "k", None), settings.index_fields)["index"] is None  # a delete
    assert encode_op(GetOp(("a",), "k", False))["refresh_ttl"] is False
