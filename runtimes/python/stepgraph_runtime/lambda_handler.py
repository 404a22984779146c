"""The Lambda transport of the protocol: one invocation per call.

``stepgraph_runtime.lambda_handler.handler`` is a Lambda function's handler
(``stepgraph build`` names it in the zip's manifest). The event names the
call and carries its request, the HTTP transport's body:

    {"action": "health" | "describe" | "run" | "update_state" | "state", "request": {...}}

An event ``{"action": "describe"}`` without a ``request`` is the function
runtime protocol's describe call instead (an external_docker deployment
whose runtime is this function): it answers ``{"langgraph_app": {"graphs":
{...}}}`` as it is, not wrapped in ``{status, body}``, or
``{"langgraph_app": {"error": {...}}}`` when the app cannot be loaded.

and, when the platform has secrets for the app, ``"secrets": {"NAME": "value"}``:
they are the app's ``os.environ`` for the duration of that call only
(``call_environment``; Lambda runs one invocation at a time in an execution
environment), never in the function's configuration. The function returns
``{"status": <HTTP-like status>, "body": <answer>}``:
the same status and answer as the HTTP transport (dispatch.py is shared),
the run's body being ``{"messages": [...]}``, its NDJSON lines in order.
A Lambda answer is at most 6 MB: the platform bounds a run call with
``yield_after`` and continues it in the next invocation. A run whose request
has ``events`` posts its events while it runs (posting.py); the answer then
carries the others.

The app is ``STEPGRAPH_APP_CONFIG`` (default ``langgraph.json`` in the
function's directory, ``LAMBDA_TASK_ROOT``), loaded once per execution
environment; nothing of a call is kept for the next. No bearer token: who
may invoke the function is IAM's decision.

``python -m stepgraph_runtime.lambda_handler --config langgraph.json``
serves one invocation in a new process: the event on standard input, the
result on standard output (for tests, and to try a handler without Lambda).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator

from . import dispatch, posting
from .app import App, AppError, load_app
from .wire import dumps

_app: App | None = None


def _config_path() -> str:
    root = os.environ.get("LAMBDA_TASK_ROOT") or os.getcwd()
    return os.path.join(root, os.environ.get("STEPGRAPH_APP_CONFIG", "langgraph.json"))


def _load() -> App:
    global _app
    if _app is None:
        _app = load_app(_config_path())
    return _app


def secrets_problem(secrets) -> str | None:
    """Why the event's secrets cannot be an environment, or None. It names
    keys, never values."""
    if secrets is None:
        return None
    if not isinstance(secrets, dict) or not all(isinstance(k, str) and k and "=" not in k and "\0" not in k for k in secrets):
        return "secrets: must be an object whose keys are environment variable names"
    bad = sorted(k for k, v in secrets.items() if not isinstance(v, str) or "\0" in v)
    if bad:
        return f"secrets: the values of {', '.join(bad)} must be strings without NUL"
    return None


@contextlib.contextmanager
def call_environment(secrets: dict[str, str] | None) -> Iterator[None]:
    """The event's secrets (checked by secrets_problem) as environment
    variables while the call runs: an app reading ``os.environ`` works
    unchanged. What they replaced (or their absence) is restored afterwards,
    so nothing of one call is left for the next (Lambda runs one invocation
    at a time in an execution environment)."""
    if not secrets:
        yield
        return
    saved = {k: os.environ.get(k) for k in secrets}
    os.environ.update(secrets)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def handle(app: App, event) -> dict:
    """One call on app: the event's action and request, answered {status, body}."""
    if not isinstance(event, dict) or not isinstance(event.get("action"), str):
        return {"status": 400, "body": {"detail": "action: is required (health, describe, run, update_state, state)"}}
    req = event.get("request")
    if req is None:
        req = {}
    if not isinstance(req, dict):
        return {"status": 400, "body": {"detail": "request: must be a JSON object"}}
    secrets = event.get("secrets")
    if (problem := secrets_problem(secrets)) is not None:
        return {"status": 400, "body": {"detail": problem}}
    with call_environment(secrets):
        return _handle(app, event["action"], req)


def _handle(app: App, action: str, req: dict) -> dict:
    if action != dispatch.RUN:
        status, body = dispatch.call(app, action, req)
        return {"status": status, "body": body}
    messages: list[dict] = []
    poster = posting.start(req.get("events"))

    def emit(msg: dict) -> None:
        if poster is not None and msg.get("type") == "event":
            msg = poster.number(msg)
        messages.append(msg)

    try:
        refused = dispatch.run(app, req, emit)
    finally:
        acked = poster.stop() if poster is not None else 0
    if refused is not None:
        return {"status": 400, "body": refused}
    # The events the platform acknowledged are in the run's stream already.
    return {"status": 200, "body": {"messages": [m for m in messages if m.get("seq", acked + 1) > acked]}}


def _runtime_describe(event) -> bool:
    """The event is the function runtime protocol's describe call
    ({"action": "describe"}, no request), which the platform makes while it
    deploys an external_docker revision whose runtime is this function. The
    app's own describe (the graphs' schemas) always has a request."""
    return isinstance(event, dict) and event.get("action") == "describe" and "request" not in event


def handler(event, context=None) -> dict:
    """The Lambda function's handler."""
    try:
        app = _load()
    except Exception as e:  # an import error in the app: the developer needs the traceback
        if _runtime_describe(event):
            return dispatch.runtime_describe(None, e)
        if isinstance(e, AppError):
            return {"status": 503, "body": {"error": {"error": "AppError", "message": str(e)}}}
        return {"status": 503, "body": {"error": dispatch.error_json(e)}}
    if _runtime_describe(event):
        return dispatch.runtime_describe(app)
    # Lambda serializes the result with json.dumps: make it plain JSON the
    # way the HTTP transport does (wire.dumps), so both answer the same.
    return json.loads(dumps(handle(app, event)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stepgraph_runtime.lambda_handler", description="one invocation of the handler")
    p.add_argument("--config", default="langgraph.json", help="the app's langgraph.json")
    args = p.parse_args(argv)
    os.environ["STEPGRAPH_APP_CONFIG"] = os.path.abspath(args.config)
    event = json.load(sys.stdin)
    out = sys.stdout
    sys.stdout = sys.stderr  # the graphs' prints must not mix with the result
    result = dumps(handler(event))
    out.buffer.write(result)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
