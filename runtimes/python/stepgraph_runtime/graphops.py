"""Calls on a graph beyond run, update_state and state: a new thread's
supersteps (LangGraph's bulk_update_state) and the schemas of its subgraphs
(LangGraph's get_subgraphs), both answered by the compiled graph itself.
"""

from __future__ import annotations

from langgraph.errors import InvalidUpdateError
from langgraph.types import StateUpdate

from .app import App
from .ops import (
    BadRequest,
    _config,
    _configurable_schema,
    _field,
    _graph,
    _jsonschema,
    _prepare,
    _state_schema,
    checkpoint_json,
)


def _supersteps(req: dict) -> list[list[StateUpdate]]:
    steps = _field(req, "supersteps", list, required=True)
    if not steps:
        raise BadRequest("supersteps: must hold at least one superstep")
    out = []
    for i, step in enumerate(steps):
        if not isinstance(step, list) or not step:
            raise BadRequest(f"supersteps[{i}]: must be a non-empty list of updates")
        updates = []
        for j, u in enumerate(step):
            as_node = u.get("as_node") if isinstance(u, dict) else None
            if not isinstance(u, dict) or (as_node is not None and not isinstance(as_node, str)):
                raise BadRequest(f"supersteps[{i}][{j}]: must be {{\"values\", \"as_node\"}} (as_node a string)")
            updates.append(StateUpdate(u.get("values"), as_node))
        out.append(updates)
    return out


async def bulk_update_state(app: App, req: dict) -> dict:
    """Applies supersteps as LangGraph's bulk_update_state does (one
    checkpoint per superstep, its updates applied together); answers the new
    checkpoints, oldest first."""
    thread_id = _field(req, "thread_id", str, required=True)
    supersteps = _supersteps(req)
    config = _config(req, thread_id)
    graph = await _graph(app, req, config)
    saver, g = _prepare(app, req, graph)
    before = set(saver.entries.get("", {}))
    try:
        await g.abulk_update_state(config, supersteps)
    except (InvalidUpdateError, ValueError, KeyError, TypeError) as e:
        raise BadRequest(f"supersteps: {e}") from None
    made = [cid for cid in saver.entries.get("", {}) if cid not in before]
    return {"checkpoints": [await checkpoint_json(g, saver, cid) for cid in made]}


async def subgraphs(app: App, req: dict) -> dict:
    """The schemas of the graph's subgraphs by namespace (node names joined
    by "|"), as LangGraph's get_subgraphs finds them."""
    namespace = _field(req, "namespace", str)
    recurse = bool(_field(req, "recurse", bool, default=False))
    graph = await _graph(app, req, {"configurable": {}})
    out = {}
    async for ns, sub in graph.aget_subgraphs(namespace=namespace or None, recurse=recurse):
        out[ns] = {
            "input_schema": _jsonschema(sub.get_input_jsonschema),
            "output_schema": _jsonschema(sub.get_output_jsonschema),
            "state_schema": _jsonschema(lambda sub=sub: _state_schema(sub)),
            "config_schema": _jsonschema(lambda sub=sub: _configurable_schema(sub)),
            "context_schema": _jsonschema(sub.get_context_jsonschema),
        }
    return {"subgraphs": out}
