#!/usr/bin/env python3
"""A stepgraph function runtime in Python, standard library only.

It speaks the function runtime protocol (docs/runtime-protocol.md):

    POST /invoke     run one function node, or one function tool
    GET  /describe   the graph config, every graph document inline

Run it with

    python3 examples/python/runtime.py --host 127.0.0.1 --port 8080

The first line it prints is `listening on http://HOST:PORT` (with --port 0 it
picks a free port and prints it). Point an external_docker deployment's
custom_url at that URL.

Copy this file to start your own runtime. It has three parts:

1. the protocol: a tiny library (Runtime, Call, Command) that checks
   requests, dispatches them to your functions and shapes the answers;
2. the agent: the graph config that `describe` returns and the functions it
   names, registered with @app.node(graph, name) and @app.tool(name);
3. the transports: an HTTP server, and `lambda_handler` for AWS Lambda.

Only part 2 is yours to change.
"""

import argparse
import json
import os
import signal
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ---------------------------------------------------------------------------
# 1. The protocol
# ---------------------------------------------------------------------------

MAX_REQUEST_BYTES = 32 << 20  # a request holds the whole state: be generous


class BadRequest(Exception):
    """The request is not an invoke request (answered with 400)."""


class Command:
    """What a node answers when a plain update is not enough.

    update: {"channel": value}, or a list of [channel, value] pairs (to write
            one channel more than once);
    goto:   a node name or a list of them, run next in addition to the
            node's edges ("__end__" is allowed).
    """

    def __init__(self, update=None, goto=None):
        self.update = update
        self.goto = goto


class _Interrupted(BaseException):
    # A BaseException, so that a function's `except Exception` does not
    # swallow the question it asks.
    def __init__(self, value):
        super().__init__(value)
        self.value = value


class Call:
    """One invoke request, as a function sees it."""

    def __init__(self, request):
        self.graph = request["graph"]
        self.node = request["node"]
        self.state = request["state"]
        self.config = request["config"]
        self.context = request["context"]
        self.resume = request["resume"]
        self.tool = request["tool"]  # {"id", "name", "args"} for a tool call, else None
        self._asked = 0
        self.events = []

    def emit(self, value):
        """Send value (any JSON value) to the clients streaming custom events.

        As LangGraph's stream writer: the events go with the function's
        answer, whatever it is (an interrupt or an error too). A function
        that asks questions runs again from its start when the run is
        resumed, and emits again what it emitted before them.
        """
        self.events.append(value)

    def emit_named(self, name, payload):
        """Send payload as the custom event `name`: on the thread event
        protocol it reaches the `custom:<name>` subscribers
        (docs/runtime-protocol.md, Named events)."""
        self.events.append({"name": name, "payload": payload})

    def interrupt(self, value):
        """Ask a human, as LangGraph's interrupt() does.

        The k-th question of a call returns the k-th answer when the run has
        been resumed that far; otherwise the function stops here and the run
        waits for the answer. The function then runs again from its start,
        so keep the code before a question free of side effects.
        """
        if self.tool is not None:
            raise RuntimeError("a tool cannot ask a human: interrupt() works in function nodes only")
        if value is None:
            raise ValueError("interrupt() needs a value to show (not None)")
        if self._asked < len(self.resume):
            answer = self.resume[self._asked]
            self._asked += 1
            return answer
        raise _Interrupted(value)


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_request(body):
    """Decodes and checks an invoke request; raises BadRequest."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the body is not UTF-8: {e}") from None
    try:
        req = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise BadRequest("the body is not JSON: nested too deeply") from None
    except ValueError as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(req, dict):
        raise BadRequest("the body must be a JSON object: an invoke request {graph, node, state, config, context, resume}")
    for key in ("graph", "node"):
        if not isinstance(req.get(key), str) or not req[key]:
            raise BadRequest(f'"{key}": must be a non-empty string')
    for key, default in (("state", {}), ("config", {}), ("context", None)):
        value = req.get(key)
        if value is None:
            req[key] = default
        elif not isinstance(value, dict):
            raise BadRequest(f'"{key}": must be an object')
    resume = req.get("resume")
    if resume is None:
        req["resume"] = []
    elif not isinstance(resume, list):
        raise BadRequest('"resume": must be a list')
    tool = req.get("tool")
    if tool is not None:
        if not isinstance(tool, dict):
            raise BadRequest('"tool": must be an object {id, name, args}')
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise BadRequest('"tool.name": must be a non-empty string')
        if not isinstance(tool.get("id", ""), str):
            raise BadRequest('"tool.id": must be a string')
        if tool.get("args") is None:
            tool["args"] = {}
        elif not isinstance(tool["args"], dict):
            raise BadRequest('"tool.args": must be an object')
        tool.setdefault("id", "")
    req["tool"] = tool
    return req


def _node_answer(node, result):
    """Turns what a node function returned into the protocol's answer."""
    if result is None:
        return {}
    if isinstance(result, Command):
        answer = {}
        if result.update is not None:
            answer["update"] = _check_update(node, result.update)
        if result.goto is not None:
            answer["goto"] = result.goto
        return answer
    return {"update": _check_update(node, result)}


def _check_update(node, update):
    if isinstance(update, dict):
        return update
    if isinstance(update, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) for p in update
    ):
        return [list(p) for p in update]
    raise TypeError(
        f"node {node!r} returned {type(update).__name__}: return a dict, "
        "a list of (channel, value) pairs, a Command or None"
    )


def _error(e):
    return {"error": {"type": type(e).__name__, "message": str(e) or type(e).__name__}}


class Runtime:
    """Your functions, by graph and node (or by tool name), and the config."""

    def __init__(self):
        self._nodes = {}
        self._tools = {}
        self._describe = None

    def node(self, graph, name=None):
        """Registers fn(call) as the function node `name` (default: the
        function's name) of `graph`. It returns the update (a dict), a
        Command, or None; an exception it raises fails the run."""

        def register(fn):
            key = (graph, name or fn.__name__)
            if key in self._nodes:
                raise ValueError(f"node {key[1]!r} of graph {key[0]!r} is registered twice")
            self._nodes[key] = fn
            return fn

        return register

    def tool(self, name=None):
        """Registers fn(args, call) as the function tool `name` (default: the
        function's name). It returns the tool's output (any JSON value); an
        exception it raises becomes an error tool message for the model."""

        def register(fn):
            key = name or fn.__name__
            if key in self._tools:
                raise ValueError(f"tool {key!r} is registered twice")
            self._tools[key] = fn
            return fn

        return register

    def describe(self, fn):
        """Registers fn() as the source of the graph config."""
        self._describe = fn
        return fn

    def config(self):
        return self._describe()

    def invoke(self, request):
        """Answers a checked invoke request (see parse_request) with a dict,
        with the custom events the function emitted."""
        call = Call(request)
        answer = self._invoke(call)
        if call.events:
            answer["events"] = call.events
        return answer

    def _invoke(self, call):
        try:
            if call.tool is not None:
                fn = self._tools.get(call.tool["name"])
                if fn is None:
                    raise LookupError(f"no function tool {call.tool['name']!r} in this runtime")
                return {"output": fn(call.tool["args"], call)}
            fn = self._nodes.get((call.graph, call.node))
            if fn is None:
                raise LookupError(f"no function for node {call.node!r} of graph {call.graph!r} in this runtime")
            return _node_answer(call.node, fn(call))
        except _Interrupted as i:
            return {"interrupt": i.value}
        except Exception as e:  # the function failed: report it, as the protocol says
            traceback.print_exc(file=sys.stderr)
            return _error(e)

    def answer(self, request):
        """invoke(), encoded: the JSON bytes of the answer."""
        result = self.invoke(request)
        try:
            return json.dumps(result, allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            return json.dumps(_error(type(e)(f"the answer is not JSON: {e}"))).encode()


# ---------------------------------------------------------------------------
# 2. The agent
# ---------------------------------------------------------------------------

app = Runtime()

# The orders the lookup_order tool knows about.
ORDERS = {
    "42": {"order_id": "42", "status": "shipped", "carrier": "UPS", "total": "59.90 EUR"},
    "43": {"order_id": "43", "status": "processing", "carrier": None, "total": "12.00 EUR"},
}


@app.describe
def graph_config():
    # The model endpoint and the name of the deployment secret that holds its
    # API key come from the environment, so the same runtime can talk to
    # OpenAI or to a local OpenAI-compatible server. An empty
    # STEPGRAPH_EXAMPLE_API_KEY_SECRET sends no API key.
    model = {
        "kind": "chat_model",
        "description": "Answers the customer; may look orders up.",
        "base_url": os.environ.get("STEPGRAPH_EXAMPLE_MODEL_URL") or "https://api.openai.com/v1",
        "model": os.environ.get("STEPGRAPH_EXAMPLE_MODEL") or "gpt-4o-mini",
        "system": "You are the support agent of an online shop. The request is about {{ state.topic }}. "
        "Use lookup_order to check an order. Be brief.",
        "temperature": 0,
        "tools": ["lookup_order"],
    }
    secret = os.environ.get("STEPGRAPH_EXAMPLE_API_KEY_SECRET", "OPENAI_API_KEY")
    if secret:
        model["api_key_secret"] = secret
    return {
        "graphs": {
            "support": {
                "description": "Classifies a support request, then answers it, looking orders up.",
                "state": {
                    "messages": {"reducer": "messages"},
                    "topic": {"schema": {"type": "string"}},
                },
                "input_schema": {
                    "type": "object",
                    "required": ["messages"],
                    "properties": {"messages": {"type": "array", "minItems": 1}},
                },
                "tools": {
                    "lookup_order": {
                        "kind": "function",
                        "description": "The status of an order, by its id.",
                        "parameters": {
                            "type": "object",
                            "properties": {"order_id": {"type": "string"}},
                            "required": ["order_id"],
                        },
                        "timeout": 10,
                    },
                },
                "nodes": {
                    "classify": {
                        "kind": "function",
                        "description": "Sets topic from the last user message.",
                        "timeout": 20,
                    },
                    "agent": model,
                    "tools": {"kind": "tools"},
                },
                "edges": [
                    {"from": "__start__", "to": "classify"},
                    {"from": "classify", "to": "agent"},
                    {"from": "agent", "when": "tool_calls", "then": "tools", "else": "__end__"},
                    {"from": "tools", "to": "agent"},
                ],
            },
            "refund": {
                "description": "Asks a human to approve the refund of an order.",
                "state": {
                    "order_id": {"schema": {"type": "string"}},
                    "approved": {"schema": {"type": "boolean"}},
                },
                "input_schema": {
                    "type": "object",
                    "required": ["order_id"],
                    "properties": {"order_id": {"type": "string"}},
                },
                "nodes": {
                    "confirm": {"kind": "function", "description": "Looks the order up and asks for approval."},
                },
                "edges": [
                    {"from": "__start__", "to": "confirm"},
                    {"from": "confirm", "to": "__end__"},
                ],
            },
        }
    }


def message_text(message):
    """The text of a message: its content, or the text parts of a list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


@app.node("desk", "classify")  # the same step of a graph the conformance suites stream (desk: support as a subgraph)
@app.node("support", "classify")
def classify(call):
    text = ""
    for message in reversed(call.state.get("messages") or []):
        if isinstance(message, dict) and (message.get("role") == "user" or message.get("type") == "human"):
            text = message_text(message).lower()
            break
    if "refund" in text:
        topic = "refunds"
    elif "order" in text:
        topic = "orders"
    else:
        topic = "other"
    call.emit({"step": "classify", "topic": topic})  # for clients streaming custom events
    return {"topic": topic}


@app.tool("lookup_order")
def lookup_order(args, call):
    order_id = args.get("order_id")
    if not isinstance(order_id, str) or order_id not in ORDERS:
        raise LookupError(f"no order {order_id}")
    return ORDERS[order_id]


@app.node("refund", "confirm")
def confirm(call):
    order_id = call.state.get("order_id")
    order = ORDERS.get(order_id) if isinstance(order_id, str) else None
    if order is None:
        raise LookupError(f"no order {order_id}")
    call.emit({"step": "confirm", "order_id": order_id})
    answer = call.interrupt(
        {"question": f"Refund order {order_id} ({order['total']})?", "choices": ["yes", "no"]}
    )
    return {"approved": answer == "yes"}


# ---------------------------------------------------------------------------
# 3. The transports
# ---------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    server_version = "stepgraph-example-runtime/1"
    protocol_version = "HTTP/1.1"
    timeout = 120  # seconds a connection may stay silent

    def _send(self, status, body, close=False):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if not self._body_read and (
            self.headers.get("Transfer-Encoding") or self.headers.get("Content-Length", "0").strip() != "0"
        ):
            close = True  # the unread body would be taken for the next request
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 405:
            self.send_header("Allow", "POST" if self.path.split("?", 1)[0] == "/invoke" else "GET")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _route(self):
        self._body_read = False
        path = self.path.split("?", 1)[0]
        if path not in ("/invoke", "/describe"):
            self._send(404, {"detail": f"not found: {path} (POST /invoke, GET /describe)"})
            return None
        want = "POST" if path == "/invoke" else "GET"
        if self.command != want:
            self._send(405, {"detail": f"{path} answers {want}, not {self.command}"})
            return None
        return path

    def do_GET(self):
        if self._route() is None:
            return
        try:
            data = json.dumps(self.server.app.config(), allow_nan=False).encode()
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            self._send(500, {"detail": f"describe failed: {type(e).__name__}: {e}"})
            return
        self._send(200, data)

    def do_POST(self):
        if self._route() is None:
            return
        if self.headers.get("Transfer-Encoding"):
            self._send(411, {"detail": "send the body with a Content-Length"}, close=True)
            return
        length = self.headers.get("Content-Length")
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except (TypeError, ValueError):
            self._send(400 if length is not None else 411, {"detail": "a valid Content-Length is required"}, close=True)
            return
        if n > MAX_REQUEST_BYTES:
            self._send(413, {"detail": f"the body is larger than {MAX_REQUEST_BYTES} bytes"}, close=True)
            return
        body = self.rfile.read(n)
        if len(body) < n:  # the client went away
            self.close_connection = True
            return
        self._body_read = True
        try:
            request = parse_request(body)
        except BadRequest as e:
            self._send(400, {"detail": str(e)})
            return
        self._send(200, self.server.app.answer(request))

    do_PUT = do_PATCH = do_DELETE = do_GET  # answered 405 by _route

    def log_message(self, format, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host, port, runtime):
        if ":" in host:
            import socket

            self.address_family = socket.AF_INET6
        super().__init__((host, port), Handler)
        self.app = runtime


class call_environment:
    """The deployment's secrets (the invoke event's "secrets") as os.environ
    while one call runs, restored after it: your functions read os.environ
    as they would anywhere. Lambda runs one invocation at a time in an
    execution environment, so no other call sees them. The platform sends
    them only to the runtime it made from the deployment's image_uri."""

    def __init__(self, secrets):
        if secrets is not None and not (
            isinstance(secrets, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in secrets.items())
        ):
            raise ValueError('"secrets" must be an object of strings')  # never the values
        self.secrets = secrets or {}

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.secrets}
        os.environ.update(self.secrets)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def lambda_handler(event, context=None):
    """The AWS Lambda entry point: {"action": "invoke", "request": {...},
    "secrets": {...}} or {"action": "describe"}. Invalid events raise (a
    function error)."""
    if not isinstance(event, dict):
        raise ValueError("the event must be an object with an action")
    if event.get("action") == "describe":
        return app.config()
    if event.get("action") == "invoke":
        request = parse_request(json.dumps(event.get("request")).encode())
        with call_environment(event.get("secrets")):
            return json.loads(app.answer(request))
    raise ValueError('"action" must be "invoke" or "describe"')


def main(argv=None):
    parser = argparse.ArgumentParser(description="A stepgraph function runtime (docs/runtime-protocol.md).")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on; 0 picks a free one (default 8080)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    server = Server(args.host, args.port, app)
    port = server.server_address[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"listening on http://{host}:{port}", flush=True)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
