"""Schemathesis hooks for the run against upstream's OpenAPI document.

test/schemathesis (TestSchemathesisUpstream) runs Schemathesis with the
OpenAPI document that ships in the langgraph-api wheel (the version pinned in
test/conformance/upstream/langgraph-api.pin) against stepgraph. That document
is wrong about its own server in places: it leaves out status codes the
server sends and describes bodies the server does not send. ERRATA below
corrects the document, one operation and one answer at a time, before
Schemathesis loads it (the `before_load_schema` hook); every other status
code and every other field stays checked. Each erratum cites the upstream
code that shows what upstream's server really does (langgraph-api 0.16.7 and
langgraph-runtime-inmem 0.36.7, the in-memory runtime 0.16.7 requires;
paths inside the wheels). docs/api-conformance.md lists them for readers.

DEVIATIONS are the few places where stepgraph knowingly answers otherwise
than upstream's server, each with the reason; they are corrected the same
way so the run stays green, and are listed in the same document.

The request hooks of hooks.py (webhooks to the test's sink, short delays)
apply to this run too.
"""

import copy
import os
import sys

import schemathesis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hooks  # noqa: E402,F401  (registers before_call)

ERROR = {"$ref": "#/components/schemas/ErrorResponse"}
NULL = {"type": "null"}

# Every run-creating operation validates its body with create_valid_run
# (langgraph_api/models/run.py), which answers 400 for config.configurable
# together with context (models/run.py:236).
RUN_CREATING = [
    ("POST", "/runs"),
    ("POST", "/runs/wait"),
    ("POST", "/runs/stream"),
    ("POST", "/threads/{thread_id}/runs"),
    ("POST", "/threads/{thread_id}/runs/wait"),
    ("POST", "/threads/{thread_id}/runs/stream"),
]


def _status(status, why, schema=ERROR):
    """An erratum: the operation also answers status (with an ErrorResponse
    body, or none for 204)."""
    return ("status", status, schema, why)


def _nullable(where, why):
    """An erratum: the component property at where ("Schema.prop") may be
    null."""
    return ("nullable", where, why)


def _body(status, schema, why):
    """An erratum: the operation's answer with status has this body."""
    return ("body", status, schema, why)


ERRATA = {
    # --- status codes the server sends and the document leaves out -------
    ("DELETE", "/assistants/{assistant_id}"): [
        _status("204", "api/assistants.py:548 returns Response(status_code=204)", None),
    ],
    ("DELETE", "/threads/{thread_id}"): [
        _status("204", "api/threads.py:475 returns Response(status_code=204)", None),
    ],
    ("GET", "/assistants/{assistant_id}/subgraphs/{namespace}"): [
        _status("404", "a missing assistant: fetchone(Assistants.get(...)) answers 404 (api/assistants.py:392-393; langgraph_api/utils/__init__.py:122-131)"),
    ],
    ("POST", "/assistants/{assistant_id}/versions"): [
        _status("404", "Assistants.get_versions raises 404 'Assistant ... not found' (runtime_inmem ops.py:709, 730)"),
    ],
    ("GET", "/threads/{thread_id}/state"): [
        _status("404", "Threads.State.get reads the thread with Threads.get, 404 'Thread with ID ... not found' (runtime_inmem ops.py:1064, 1593)"),
    ],
    ("GET", "/threads/{thread_id}/state/{checkpoint_id}"): [
        _status("404", "as GET /threads/{thread_id}/state (runtime_inmem ops.py:1064, 1593)"),
    ],
    ("POST", "/threads/{thread_id}/state/checkpoint"): [
        _status("404", "as GET /threads/{thread_id}/state (runtime_inmem ops.py:1064, 1593)"),
    ],
    ("POST", "/threads/{thread_id}/history"): [
        _status("404", "Threads.State.list reads the thread with Threads.get (runtime_inmem ops.py:1930, 1952), 404 at ops.py:1064"),
    ],
    ("GET", "/threads/{thread_id}/history"): [
        _status("404", "get_thread_history (api/threads.py:326-352) calls Threads.State.list, which reads the thread with fetchone(Threads.get(...)) (runtime_inmem ops.py:1930, 1952): 404 at ops.py:1064"),
    ],
    ("POST", "/threads/{thread_id}/copy"): [
        # Upstream answers 409 here (DEVIATIONS); the document has 409.
        _status("404", "stepgraph's answer for a missing thread; see DEVIATIONS"),
    ],
    ("POST", "/threads/{thread_id}/state"): [
        _status("404", "Threads.State.post: 404 'Thread not found' (runtime_inmem ops.py:1671, 1701)"),
        _status("400", "a thread with no graph_id: 400 \"Thread '...' has no assigned graph ID\" (runtime_inmem ops.py:1802, in State.post)"),
    ],
    ("PATCH", "/runs/crons/{cron_id}"): [
        _status("400", "Crons.patch with no field to change: 400 'No fields to update' (runtime_inmem ops.py:3559)"),
    ],
    **{op: [_status("400", "config.configurable with context: 400 (langgraph_api/models/run.py:236)")] for op in RUN_CREATING},
    # --- bodies the server sends otherwise than documented ---------------
    ("GET", "/store/items"): [
        _body("200", {"anyOf": [{"$ref": "#/components/schemas/Item"}, NULL]},
              "a missing item is 200 with null: api/store.py:128-129 returns ApiResponse(None)"),
    ],
    ("POST", "/store/namespaces"): [
        _body("200", {"type": "object", "required": ["namespaces"],
                      "properties": {"namespaces": {"$ref": "#/components/schemas/ListNamespaceResponse"}}},
              "api/store.py:239 returns {'namespaces': [...]}: the document's ListNamespaceResponse, wrapped"),
    ],
    ("POST", "/assistants/search"): [
        _body("200", {"type": "array", "items": {"$ref": "#/components/schemas/AssistantSelected"}},
              "with `select` only the selected fields come back (api/assistants.py:241 validate_select_columns)"),
    ],
    ("POST", "/threads/search"): [
        _body("200", {"type": "array", "items": {"$ref": "#/components/schemas/ThreadSelected"}},
              "with `select` only the selected fields come back (api/threads.py:129 validate_select_columns)"),
    ],
    ("POST", "/runs/crons/search"): [
        _body("200", {"type": "array", "items": {"$ref": "#/components/schemas/CronSelected"}},
              "with `select` only the selected fields come back (api/runs.py:1006 validate_select_columns)"),
    ],
    ("GET", "/info"): [
        _body("200", {"$ref": "#/components/schemas/InfoAsServed"},
              "meta_info (api/meta.py:71-92) sends version, langgraph_py_version, flags and host, never `metadata`, which the document requires"),
    ],
    # --- component properties the server leaves null ---------------------
    "components": [
        _nullable("Thread.values", "a new thread has 'values': None (runtime_inmem ops.py:1133)"),
        _nullable("ThreadState.checkpoint", "a thread without checkpoints: StateSnapshot(config=None) (runtime_inmem ops.py:1659-1667), runnable_config_to_checkpoint(None) is None (langgraph_api/state.py:17-25, 118)"),
        _nullable("ThreadState.parent_checkpoint", "as checkpoint: parent_config=None (runtime_inmem ops.py:1659-1667; state.py:119)"),
        _nullable("ThreadState.metadata", "StateSnapshot(metadata=None) (runtime_inmem ops.py:1659-1667; state.py:116)"),
        _nullable("ThreadState.created_at", "StateSnapshot(created_at=None) (runtime_inmem ops.py:1659-1667; state.py:117)"),
    ],
}

# stepgraph's knowing deviations from upstream's server (not document
# errors), each with why.
DEVIATIONS = {
    ("GET", "/info"): "stepgraph runs no LangGraph Python in its API process, so it sends no "
    "langgraph_py_version (InfoAsServed makes it optional) and no `host` block",
    ("POST", "/threads/{thread_id}/copy"): "a missing (or another organization's) thread is 404, as on "
    "every other thread operation; upstream answers 409 because its handler reads the copy with "
    "fetchone(..., not_found_code=409) (api/threads.py:514) and Threads.copy yields nothing for a "
    "missing thread (runtime_inmem ops.py:1508-1512)",
}


def _selected(schema):
    """A copy of a component schema with nothing required: a `select`ed
    answer holds only the chosen fields, each still of its documented type."""
    out = copy.deepcopy(schema)
    out.pop("required", None)
    out["title"] = out.get("title", "") + " (selected fields)"
    return out


def apply(raw):
    """Applies ERRATA (and DEVIATIONS) to upstream's raw document, in place.
    It fails when an erratum names something the document does not have, so
    a new pinned version cannot silently leave one behind."""
    schemas = raw["components"]["schemas"]
    for kind, where, _why in ERRATA["components"]:
        assert kind == "nullable"
        name, prop = where.split(".")
        props = schemas[name]["properties"]
        if prop not in props:
            raise KeyError(f"erratum {where}: no such property in upstream's document")
        props[prop] = {"anyOf": [props[prop], NULL]}
    # After the nullable errata, which the selected copies keep.
    schemas["AssistantSelected"] = _selected(schemas["Assistant"])
    schemas["ThreadSelected"] = _selected(schemas["Thread"])
    schemas["CronSelected"] = _selected(schemas["Cron"])
    info = copy.deepcopy(raw["paths"]["/info"]["get"]["responses"]["200"]["content"]["application/json"]["schema"])
    # What meta_info sends (api/meta.py:71-92): no `metadata`; stepgraph
    # (DEVIATIONS) no langgraph_py_version either.
    info["required"] = ["version", "flags"]
    info["properties"].pop("metadata", None)
    schemas["InfoAsServed"] = info

    for key, errata in ERRATA.items():
        if key == "components":
            continue
        method, path = key
        op = raw["paths"].get(path, {}).get(method.lower())
        if op is None:
            raise KeyError(f"erratum for {method} {path}: no such operation in upstream's document")
        for erratum in errata:
            if erratum[0] == "status":
                _, status, schema, _why = erratum
                if status in op["responses"]:
                    raise KeyError(f"erratum for {method} {path}: the document has {status} now; drop the erratum")
                resp = {"description": "Sent by upstream's server; left out of its document (see upstream_hooks.py)"}
                if schema is not None:
                    resp["content"] = {"application/json": {"schema": schema}}
                op["responses"][status] = resp
            else:
                _, status, schema, _why = erratum
                op["responses"][status]["content"]["application/json"]["schema"] = schema


@schemathesis.hook
def before_load_schema(ctx, raw_schema):
    apply(raw_schema)
