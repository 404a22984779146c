"""The protocol's calls, independent of the transport.

Both transports (server.py, HTTP on loopback; lambda_handler.py, one Lambda
invocation per call) go through these two functions, so a call answers the
same over either: ``call`` for the one-answer operations, ``run`` for the
run's stream of messages. Answers carry an HTTP-like status: 200 with the
operation's answer (a failure of the graph's own code is
``{"error": {...}}``, still 200), 400 ``{"detail"}`` for a request that
breaks the protocol, 404 for an unknown operation.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor

from . import graphops, ops
from .app import App, AppError

# The one-answer operations, by name (the HTTP path without its slash, the
# Lambda payload's "action").
CALLS = {"describe": ops.describe, "update_state": ops.update_state, "state": ops.state,
         "bulk_update_state": graphops.bulk_update_state, "subgraphs": graphops.subgraphs}
RUN = "run"
HEALTH = "health"


class _SharedPool(ThreadPoolExecutor):
    """The threads LangGraph runs synchronous nodes in (a loop's default
    executor), shared by every call's loop: a loop closing does not stop it."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # lives as long as the process


# Threads are started only when none is idle, so the bound is a ceiling, not
# a cost: high enough that concurrent calls never wait for one another's
# blocking nodes (each call's own loop used to get a pool of its own).
POOL_THREADS = 256
_pool: _SharedPool | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> _SharedPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _SharedPool(max_workers=POOL_THREADS, thread_name_prefix="stepgraph-node")
        return _pool


def run_async(coro: Coroutine):
    """asyncio.run(coro), on a new loop whose default executor is the shared
    pool. asyncio.run gives each loop a pool of its own: a call with a
    synchronous node started threads, and ending the loop started one more to
    stop them and joined them all, on every call."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_shared_pool())
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """What asyncio.run does with the tasks a coroutine left running."""
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    for task in pending:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler({"message": "unhandled exception during the call's shutdown",
                                         "exception": task.exception(), "task": task})


def error_json(e: BaseException) -> dict:
    """A Python exception as the protocol's error: type, message, traceback."""
    return {"error": type(e).__name__, "message": str(e), "traceback": traceback.format_exc()[-ops.MAX_TRACEBACK:]}


def health(app: App) -> dict:
    return {"status": "ok", "graphs": sorted(app.graphs)}


APP_KEY = "langgraph_app"


def runtime_describe(app: App | None, error: BaseException | None = None) -> dict:
    """The answer to the function runtime protocol's describe call (``GET
    /describe``; a Lambda event ``{"action": "describe"}`` without a
    ``request``), which the platform makes while it deploys an
    external_docker revision: this runtime is a LangGraph app, not a
    graph-document runtime, and these are its graphs, as langgraph.json names
    them. An app that cannot be loaded answers its error instead, so that
    the revision fails with the traceback."""
    if app is None:
        if isinstance(error, AppError):
            return {APP_KEY: {"error": {"error": "AppError", "message": str(error)}}}
        return {APP_KEY: {"error": error_json(error)}}
    return {APP_KEY: {"graphs": {gid: spec.path for gid, spec in sorted(app.graphs.items())}}}


def call(app: App, op: str, req: dict) -> tuple[int, dict]:
    """Runs a one-answer operation; answers (status, body)."""
    if op == HEALTH:
        return 200, health(app)
    fn = CALLS.get(op)
    if fn is None:
        return 404, {"detail": f"no operation {op!r} (health, describe, run, update_state, state, bulk_update_state, subgraphs)"}
    try:
        return 200, run_async(fn(app, req))
    except ops.BadRequest as e:
        return 400, {"detail": str(e)}
    except Exception as e:  # the graph's own code failed
        return 200, {"error": error_json(e)}


def run(app: App, req: dict, emit: Callable[[dict], None]) -> dict | None:
    """Runs the graph, each message through emit; the last is always the
    end. Answers {"detail"} instead when the request is refused before any
    message was sent (the transport answers it as a 400). A transport's own
    failure to deliver (the platform went away) propagates."""
    started = False

    def out(msg: dict) -> None:
        nonlocal started
        started = True
        emit(msg)

    try:
        run_async(ops.run(app, req, out))
    except ops.BadRequest as e:
        if not started:
            return {"detail": str(e)}
        out({"type": "end", "status": "error", "error": {"error": "ValueError", "message": str(e)}})
    except (BrokenPipeError, ConnectionResetError):
        raise
    except Exception as e:
        out({"type": "end", "status": "error", "error": error_json(e)})
    return None
