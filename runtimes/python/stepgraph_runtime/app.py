"""Loading an app: langgraph.json and the graphs it names.

The rules follow the upstream server (langgraph-api): ``graphs`` maps graph
ids to ``"./path/to/file.py:attr"`` (a file, relative to langgraph.json) or
``"package.module:attr"`` (an importable module), optionally as an object
``{"path": ..., "description": ...}``. The attribute is a compiled graph, a
graph builder (compiled here), or a factory: a function (sync or async) that
takes the run's config, or nothing, and returns one of those.

JavaScript graphs (``.js``, ``.ts``, ...) are not served: loading fails,
saying so, and the platform fails the revision with that message. The keys
around the graphs (env, store, and those stepgraph owns) follow appconfig.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from . import appconfig

JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx")
MAX_CONFIG_BYTES = 1 << 20


class AppError(Exception):
    """The app cannot be served; the message says why, for the developer."""


@dataclass
class GraphSpec:
    graph_id: str
    path: str  # as written in langgraph.json
    description: str | None = None
    obj: Any = None  # the loaded attribute


@dataclass
class App:
    root: str
    config: dict
    graphs: dict[str, GraphSpec] = field(default_factory=dict)
    settings: appconfig.Settings = field(default_factory=appconfig.Settings)


def read_config(config_path: str) -> dict:
    """Reads and checks langgraph.json (the parts the runtime uses)."""
    if not os.path.isfile(config_path):
        raise AppError(f"{config_path}: no such file (an app needs a langgraph.json)")
    if os.path.getsize(config_path) > MAX_CONFIG_BYTES:
        raise AppError(f"{config_path}: is larger than 1 MiB")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise AppError(f"{config_path}: is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise AppError(f"{config_path}: must be a JSON object")
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise AppError(f"{config_path}: /graphs: must be an object naming at least one graph")
    for gid, spec in graphs.items():
        path = spec.get("path") if isinstance(spec, dict) else spec
        if not isinstance(path, str) or ":" not in path:
            raise AppError(f'{config_path}: /graphs/{gid}: must be "path/to/file.py:variable" or "module:variable"')
        target = path.rsplit(":", 1)[0]
        if target.endswith(JS_SUFFIXES):
            raise AppError(
                f"{config_path}: /graphs/{gid}: {path} is a JavaScript graph; "
                "JavaScript LangGraph apps are not supported (only Python graphs are)"
            )
    settings(config, config_path)
    return config


def settings(config: dict, config_path: str) -> appconfig.Settings:
    """What the keys around the graphs set (appconfig's rules)."""
    try:
        return appconfig.check(config, config_path)
    except appconfig.ConfigError as e:
        raise AppError(str(e)) from None


def load_app(config_path: str) -> App:
    """Reads langgraph.json and imports every graph it names."""
    config_path = os.path.abspath(config_path)
    config = read_config(config_path)
    root = os.path.dirname(config_path)
    app = App(root=root, config=config, settings=settings(config, config_path))
    try:
        appconfig.require_semantic(app.settings, config_path)
    except appconfig.ConfigError as e:
        raise AppError(str(e)) from None
    appconfig.apply(app.settings)  # before the graphs' modules read it
    for path in _local_paths(root, config):
        if path not in sys.path:
            sys.path.insert(0, path)
    for gid, spec in config["graphs"].items():
        path = spec["path"] if isinstance(spec, dict) else spec
        desc = spec.get("description") if isinstance(spec, dict) else None
        obj = _load_attr(root, gid, path)
        _check_graph(gid, path, obj)
        app.graphs[gid] = GraphSpec(gid, path, desc, obj)
    return app


def _check_graph(gid: str, path: str, obj: Any) -> None:
    from langgraph.graph.state import StateGraph
    from langgraph.pregel import Pregel

    if not isinstance(obj, (Pregel, StateGraph)) and not callable(obj):
        raise AppError(f"/graphs/{gid}: {path}: {type(obj).__name__} is not a graph "
                       "(a compiled graph, a StateGraph or a factory)")


def _local_paths(root: str, config: dict) -> list[str]:
    """Directories to import the app's own code from: the app's directory and
    each local dependency ("." or "./pkg") with its src/ folder, which is what
    installing them in editable mode would make importable."""
    out = [root]
    for dep in config.get("dependencies") or []:
        if isinstance(dep, str) and (dep == "." or dep.startswith(("./", "../"))):
            d = os.path.normpath(os.path.join(root, dep))
            for cand in (d, os.path.join(d, "src")):
                if os.path.isdir(cand) and cand not in out:
                    out.append(cand)
    return out


def _load_attr(root: str, gid: str, path: str) -> Any:
    target, attr = path.rsplit(":", 1)
    if target.endswith(".py") or "/" in target or os.sep in target:
        file = os.path.normpath(os.path.join(root, target))
        if not os.path.isfile(file):
            raise AppError(f"/graphs/{gid}: {target}: no such file")
        modname = "stepgraph_app_" + "".join(c if c.isalnum() else "_" for c in os.path.relpath(file, root)[:-3])
        spec = importlib.util.spec_from_file_location(modname, file)
        if spec is None or spec.loader is None:
            raise AppError(f"/graphs/{gid}: {target}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)  # an import error propagates with its traceback
    else:
        module = importlib.import_module(target)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AppError(f"/graphs/{gid}: {path}: the module has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


async def resolve_graph(obj: Any, config: dict | None = None) -> Any:
    """The compiled graph an app's attribute stands for, for one call."""
    from langgraph.graph.state import StateGraph
    from langgraph.pregel import Pregel

    if isinstance(obj, Pregel):
        return obj
    if isinstance(obj, StateGraph):
        return obj.compile()
    if callable(obj):
        params = inspect.signature(obj).parameters
        value = obj(config or {}) if len(params) >= 1 else obj()
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, StateGraph):
            value = value.compile()
        if isinstance(value, Pregel):
            return value
        raise AppError(f"the graph factory returned {type(value).__name__}, not a graph")
    raise AppError(f"{type(obj).__name__} is not a graph (a compiled graph, a StateGraph or a factory)")
