"""The protocol's operations: describe, run, update_state and state.

Each operation gets everything it needs in its request (the graph id, the
thread's parent checkpoint as the platform stored it, the config) and keeps
nothing afterwards. ``run`` reports as it goes through ``emit``: stream-mode
events as LangGraph yields them, and each checkpoint LangGraph saves, in the
shape the platform stores (docs/runtime-protocol.md, "LangGraph apps").
"""

from __future__ import annotations

import asyncio
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl
from langgraph.types import Command, Send

from . import auth
from .app import App, AppError, resolve_graph
from .saver import PlatformSaver
from .store import PlatformStore
from .wire import dumps, dumps_message, to_jsonable

STREAM_MODES = ("values", "updates", "messages", "custom", "debug", "tasks", "checkpoints")
MAX_TRACEBACK = 8000


class BadRequest(Exception):
    """The request breaks the protocol; the message names the field."""


def _field(req: dict, name: str, kind, default=None, required=False):
    if name not in req or req[name] is None:
        if required:
            raise BadRequest(f"{name}: is required")
        return default
    if not isinstance(req[name], kind):
        raise BadRequest(f"{name}: must be {getattr(kind, '__name__', kind)}")
    return req[name]


async def _graph(app: App, req: dict, config: dict | None = None):
    gid = _field(req, "graph", str, required=True)
    spec = app.graphs.get(gid)
    if spec is None:
        raise BadRequest(f"graph: no graph {gid!r} in langgraph.json (it has {', '.join(sorted(app.graphs))})")
    return _named(await resolve_graph(spec.obj, config), gid)


def _named(graph, gid: str):
    """The graph named after its id when its builder left LangGraph's
    default name, as upstream's server names it (its state schema's title,
    its runs' names)."""
    return graph.copy(update={"name": gid}) if graph.name == "LangGraph" else graph


# --- describe -------------------------------------------------------------------


def _state_schema(graph) -> dict | None:
    try:
        from langgraph._internal._pydantic import create_model

        channels = graph.stream_channels_list
        fields = {k: (graph.channels[k].UpdateType, None) for k in channels if k in graph.channels}
        return create_model(graph.get_name("State"), field_definitions=fields).model_json_schema()
    except Exception:
        return graph.get_output_jsonschema()


# Configurable keys upstream's server leaves out of a config schema.
_EXCLUDED_CONFIG_SCHEMA = ("__pregel_checkpointer", "__pregel_store", "checkpoint_id", "checkpoint_ns", "thread_id")


def _configurable_schema(graph) -> dict:
    """The JSON schema of the graph's configurable, as upstream's server
    answers config_schema: {} when the graph declares none."""
    from pydantic import TypeAdapter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # config_schema is deprecated upstream, still answered
        model = graph.config_schema()
    fields = getattr(model, "model_fields", None) or {}
    if "configurable" not in fields:
        return {}
    schema = TypeAdapter(fields["configurable"].annotation).json_schema()
    for key in _EXCLUDED_CONFIG_SCHEMA:
        schema.get("properties", {}).pop(key, None)
    if getattr(graph, "config_type", None) is not None and hasattr(graph.config_type, "__name__"):
        schema["title"] = graph.config_type.__name__
    return to_jsonable(schema)


def _drawn(graph, xray) -> dict:
    """The drawn graph (LangChain's Graph.to_json) without the nodes'
    class paths (data.id), as upstream's server answers it."""
    drawn = to_jsonable(graph.get_graph(xray=xray).to_json())
    for node in drawn.get("nodes", []):
        if isinstance(node.get("data"), dict):
            node["data"].pop("id", None)
    return drawn


def _jsonschema(fn) -> dict | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # config_schema is deprecated upstream, still answered
            return to_jsonable(fn())
    except Exception:
        return None


async def describe(app: App, req: dict) -> dict:
    """Graph ids, their schemas and drawn graphs, from the compiled graphs."""
    xray = req.get("xray", False)
    if not isinstance(xray, (bool, int)) or (not isinstance(xray, bool) and xray < 0):
        raise BadRequest("xray: must be a boolean or a non-negative integer")
    only = _field(req, "graph", str)
    out = {}
    for gid, spec in app.graphs.items():
        if only is not None and gid != only:
            continue
        graph = _named(await resolve_graph(spec.obj, {"configurable": {}}), gid)
        out[gid] = {
            "description": spec.description,
            "input_schema": _jsonschema(graph.get_input_jsonschema),
            "output_schema": _jsonschema(graph.get_output_jsonschema),
            "state_schema": _jsonschema(lambda: _state_schema(graph)),
            "config_schema": _jsonschema(lambda: _configurable_schema(graph)),
            "context_schema": _jsonschema(graph.get_context_jsonschema),
            "graph": _drawn(graph, xray),
            "subgraphs": sorted(name for name, _ in graph.get_subgraphs()),
        }
    if only is not None and not out:
        raise BadRequest(f"graph: no graph {only!r} in langgraph.json")
    return {"graphs": out}


# --- checkpoints in the platform's shape ----------------------------------------


def _interrupts(interrupts) -> list[dict]:
    return [{"id": i.id, "value": to_jsonable(i.value)} for i in interrupts]


def _task(t) -> dict:
    out: dict[str, Any] = {"id": t.id, "name": t.name, "path": to_jsonable(list(t.path))}
    if isinstance(t.result, dict):
        # A completed task's writes (LangGraph's PregelTask.result), in the
        # platform's task result shape.
        out["result"] = {"writes": to_jsonable(t.result), "goto": []}
    if t.interrupts:
        out["interrupts"] = _interrupts(t.interrupts)
    if t.error is not None:
        out["error"] = {"error": type(t.error).__name__, "message": str(t.error)}
    if t.state is not None and isinstance(t.state, dict):
        out["checkpoint_ns"] = t.state.get("configurable", {}).get("checkpoint_ns")
    return out


def snapshot_json(snap) -> dict:
    """A LangGraph StateSnapshot as the platform's checkpoint JSON (graph.Checkpoint's shape)."""
    meta = to_jsonable(dict(snap.metadata or {}))
    parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return {
        "v": 1,
        "id": snap.config["configurable"]["checkpoint_id"],
        "parent_id": parent or "",
        "created_at": snap.created_at,
        "values": to_jsonable(snap.values),
        "next": list(snap.next),
        "tasks": [_task(t) for t in snap.tasks],
        "metadata": {
            "source": meta.get("source", ""),
            "step": meta.get("step", 0),
            "writes": None,
            "parents": meta.get("parents") or {},
            # the run's metadata LangGraph keeps with the checkpoint (run_id,
            # graph_id, assistant_id, the client's): shown as upstream shows it
            "extra": {k: v for k, v in meta.items() if k not in ("source", "step", "parents", "writes")},
        },
        "run_start_step": 0,
        "langgraph_metadata": meta,
    }


async def checkpoint_json(graph, saver: PlatformSaver, checkpoint_id: str) -> dict:
    snap = await graph.aget_state({"configurable": {"thread_id": saver.thread_id, "checkpoint_id": checkpoint_id}})
    out = snapshot_json(snap)
    out["langgraph"] = saver.bundle(checkpoint_id)
    return out


# --- run ----------------------------------------------------------------------------


def _command(cmd: dict) -> Command:
    if not isinstance(cmd, dict):
        raise BadRequest("command: must be an object")
    unknown = set(cmd) - {"resume", "update", "goto"}
    if unknown:
        raise BadRequest(f"command: {sorted(unknown)[0]}: is not part of a command (resume, update, goto)")
    goto = cmd.get("goto")
    if goto is not None:
        items = goto if isinstance(goto, list) else [goto]
        conv = []
        for g in items:
            if isinstance(g, dict):
                if not isinstance(g.get("node"), str):
                    raise BadRequest("command: goto: a Send needs node (a string) and input")
                conv.append(Send(g["node"], g.get("input")))
            elif isinstance(g, str):
                conv.append(g)
            else:
                raise BadRequest("command: goto: must be node names or {node, input} objects")
        goto = conv if isinstance(goto, list) else conv[0]
    kw: dict[str, Any] = {}
    if "resume" in cmd:
        kw["resume"] = cmd["resume"]
    if cmd.get("update") is not None:
        upd = cmd["update"]
        kw["update"] = [tuple(p) for p in upd] if isinstance(upd, list) else upd
    if goto is not None:
        kw["goto"] = goto
    return Command(**kw)


def _config(req: dict, thread_id: str) -> dict:
    config = dict(_field(req, "config", dict, default={}))
    conf = dict(config.get("configurable") or {})
    conf["thread_id"] = thread_id
    conf.pop("checkpoint_ns", None)
    conf.pop("checkpoint_map", None)
    if cid := _field(req, "checkpoint_id", str):
        conf["checkpoint_id"] = cid
    else:
        conf.pop("checkpoint_id", None)
    config["configurable"] = conf
    return config


def _prepare(app: App, req: dict, graph, emit_root: Callable[[str], None] | None = None):
    thread_id = _field(req, "thread_id", str, required=True)
    saver = PlatformSaver(thread_id, emit_root)
    try:
        saver.load(_field(req, "checkpoint", dict))
    except (KeyError, TypeError, ValueError) as e:
        raise BadRequest(f"checkpoint: is not a checkpoint this runtime wrote: {e}") from None
    saver.superseded = bool(_field(req, "superseded", bool, default=False)) and bool(req.get("checkpoint_id"))
    store = None
    if (s := _link(req, "store")) is not None:
        store = PlatformStore(s.url, s.token, app.settings.store)
    return saver, graph.copy(update={"checkpointer": saver, "store": store})


def _link(req: dict, name: str) -> auth.Link | None:
    """A link to the platform's bridge (store, auth): {url, token}."""
    if (s := _field(req, name, dict)) is None:
        return None
    if not isinstance(s.get("url"), str) or not isinstance(s.get("token"), str):
        raise BadRequest(f"{name}: needs url and token (strings)")
    return auth.Link(s["url"], s["token"])


def _yield_after(req: dict) -> tuple[float | None, int | None]:
    """The call's budget, {"seconds", "bytes"}: past either, the run yields."""
    budget = _field(req, "yield_after", dict)
    if budget is None:
        return None, None
    unknown = set(budget) - {"seconds", "bytes"}
    if unknown:
        raise BadRequest(f"yield_after: {sorted(unknown)[0]}: is not part of it (seconds, bytes)")
    seconds, size = budget.get("seconds"), budget.get("bytes")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
        raise BadRequest("yield_after: seconds: must be a positive number")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise BadRequest("yield_after: bytes: must be a positive integer")
    return seconds, size


class _Budget:
    """The answer's byte budget: past it, LangGraph is asked to drain.

    Checkpoints reach the platform in the background (durability "async"),
    possibly after the next step has started; so each step's checkpoint is
    also counted when LangGraph announces it (its "checkpoints" stream event,
    yielded before the next step begins), which makes the step it yields
    after the same on every run."""

    def __init__(self, emit: Callable[[dict], None], control: RunControl, size: int | None):
        self._emit, self.control, self.size, self.sent = emit, control, size, 0

    def emit(self, msg: dict) -> None:
        if self.size is not None:
            self.sent += len(dumps_message(msg)) + 1
            self.check(0)
        self._emit(msg)

    def check(self, coming: int) -> None:
        if self.size is not None and self.sent + coming >= self.size:
            self.control.request_drain("yield")


async def run(app: App, req: dict, emit: Callable[[dict], None]) -> None:
    """Runs the graph once, reporting events, checkpoints and the end through emit.

    With yield_after, the call stops at the first superstep boundary past
    its budget (LangGraph's cooperative drain: the step's checkpoint is
    saved and sent, no task of the next step has started) and ends with
    status "yielded"; the next call, with no input and that checkpoint,
    continues the run as if it had never stopped.
    """
    seconds, size = _yield_after(req)
    control = RunControl()
    budget = _Budget(emit, control, size)
    emit = budget.emit
    modes = _field(req, "stream_mode", list, default=["values"])
    for m in modes:
        if m not in STREAM_MODES:
            raise BadRequest(f"stream_mode: {m!r} is not one of {', '.join(STREAM_MODES)}")
    subgraphs = bool(_field(req, "subgraphs", bool, default=False))
    thread_id = _field(req, "thread_id", str, required=True)
    config = _config(req, thread_id)
    graph = await _graph(app, req, config)
    changed: list[str] = []
    last_root: list[str] = []
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    lock = asyncio.Lock()

    def mark(root_id: str) -> None:
        if not root_id:
            return
        last_root[:] = [root_id]
        if not changed or changed[-1] != root_id:
            changed.append(root_id)
        loop.call_soon_threadsafe(wake.set)

    saver, g = _prepare(app, req, graph, mark)

    async def flush() -> None:
        async with lock:
            while changed:
                cid = changed[0]
                if cid in changed[1:]:
                    changed.pop(0)  # changed again later: report it once, then
                    continue
                cp = await checkpoint_json(g, saver, cid)
                changed.pop(0)  # only once sent: a cancelled flush leaves it to the next
                emit({"type": "checkpoint", "checkpoint": cp})

    async def flusher() -> None:
        # Checkpoints go to the platform as soon as LangGraph saves them,
        # whether or not the run streams anything: a crash loses no step.
        while True:
            await wake.wait()
            wake.clear()
            await flush()

    if req.get("command") is not None:
        if req.get("input") is not None:
            raise BadRequest("input: cannot be given with command")
        graph_input: Any = _command(req["command"])
    else:
        graph_input = req.get("input")
    kwargs: dict[str, Any] = {}
    for name in ("interrupt_before", "interrupt_after"):
        v = req.get(name)
        if v is not None:
            if v != "*" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise BadRequest(f'{name}: must be "*" or a list of node names')
            kwargs[name] = v
    if (d := req.get("durability")) is not None:
        if d not in ("sync", "async", "exit"):
            raise BadRequest('durability: must be "sync", "async" or "exit"')
        kwargs["durability"] = d
    context = req.get("context")

    # The auth link lives in a context variable of this call (inherited by
    # the nodes' tasks and threads), never in the config: never checkpointed.
    bound = auth.bind(_link(req, "auth"))
    flushing = asyncio.create_task(flusher())
    timer = loop.call_later(seconds, control.request_drain, "yield") if seconds is not None else None
    # A call continuing a yielded one: LangGraph first streams the values it
    # resumes from, which the previous call streamed as its last.
    continued = bool(_field(req, "continued", bool, default=False)) and "values" in modes
    graph_modes = modes if size is None or "checkpoints" in modes else [*modes, "checkpoints"]
    yielded = False
    try:
        async for item in g.astream(
            graph_input, config, context=context, stream_mode=graph_modes, subgraphs=True, control=control, **kwargs
        ):
            ns, mode, chunk = item
            await flush()
            if mode == "checkpoints":
                if not ns:
                    budget.check(len(dumps(chunk)))
                if "checkpoints" not in modes:
                    continue  # asked for the budget only
            if ns and not subgraphs:
                continue
            if continued and not ns and mode == "values":
                continued = False  # the state it starts from, streamed by the call before
                continue
            emit({"type": "event", "mode": mode, "ns": list(ns), "data": to_jsonable(chunk)})
        await flush()
    except GraphDrained:  # the budget is spent: the step's checkpoint is the next call's parent
        await flush()
        yielded = True
    except Exception as e:  # the graph failed: report it, with the checkpoints it left
        await flush()
        tb = traceback.format_exc()[-MAX_TRACEBACK:]
        emit({"type": "end", "status": "error",
              "error": {"error": type(e).__name__, "message": str(e), "traceback": tb}})
        return
    finally:
        if timer is not None:
            timer.cancel()
        flushing.cancel()
        auth.unbind(bound)
    at = {"thread_id": thread_id, **({"checkpoint_id": last_root[0]} if last_root else {})}
    snap = await g.aget_state({"configurable": at})
    interrupts = _interrupts(snap.interrupts) if snap.config else []
    emit({
        "type": "end",
        "status": "yielded" if yielded else "interrupted" if interrupts else "success",
        "values": to_jsonable(snap.values) if snap.config else None,
        "interrupts": interrupts,
    })


# --- update_state and state -------------------------------------------------


async def update_state(app: App, req: dict) -> dict:
    """Applies an update as a node would write it (LangGraph's reducers); returns the new checkpoint."""
    thread_id = _field(req, "thread_id", str, required=True)
    config = _config(req, thread_id)
    graph = await _graph(app, req, config)
    saver, g = _prepare(app, req, graph)
    as_node = _field(req, "as_node", str)
    values = req.get("values")
    try:
        new = await g.aupdate_state(config, values, as_node=as_node)
    except (ValueError, KeyError, TypeError) as e:
        raise BadRequest(f"values: {e}") from None
    out = await checkpoint_json(g, saver, new["configurable"]["checkpoint_id"])
    return {"checkpoint": out}


async def state(app: App, req: dict) -> dict:
    """The thread's state at the given checkpoint, with subgraph states when asked."""
    thread_id = _field(req, "thread_id", str, required=True)
    config = _config(req, thread_id)
    graph = await _graph(app, req, config)
    _saver, g = _prepare(app, req, graph)
    subgraphs = bool(_field(req, "subgraphs", bool, default=False))
    snap = await g.aget_state(config, subgraphs=subgraphs)
    return {"state": _snapshot_tree(snap)}


def _snapshot_tree(snap) -> dict:
    if not snap.config:
        return {"values": {}, "next": [], "tasks": []}
    out = snapshot_json(snap)
    for t, tj in zip(snap.tasks, out["tasks"]):
        if t.state is not None and not isinstance(t.state, dict):
            tj["state"] = _snapshot_tree(t.state)
    return out


__all__ = ["AppError", "BadRequest", "describe", "run", "update_state", "state"]
