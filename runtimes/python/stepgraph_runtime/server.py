"""The HTTP transport of the protocol, on loopback.

``python -m stepgraph_runtime.server --config langgraph.json --port 0`` loads
the app, binds 127.0.0.1 and prints one JSON line on stdout,
``{"listening": "http://127.0.0.1:<port>", "graphs": [...]}``, which is how
the platform learns the port. When the app cannot be loaded it prints
``{"error": {"error": <type>, "message": ..., "traceback": ...}}`` and exits
with status 2.

``GET /describe`` is the function runtime protocol's describe call, which
the platform makes while it deploys an external_docker revision whose
custom_url is this server: it answers ``{"langgraph_app": {"graphs": ...}}``.

Every request but ``GET /health`` and ``GET /describe`` needs ``Authorization: Bearer <token>``
when ``STEPGRAPH_RUNTIME_TOKEN`` is set (the platform sets it), so other
local users cannot drive the graphs. ``POST /run`` answers NDJSON, one
message per line, as the run goes; the rest answer one JSON object.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import dispatch
from .app import App, AppError, load_app
from .wire import dumps, dumps_message

MAX_REQUEST = 64 << 20


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stepgraph-runtime"
    # TCP_NODELAY on each connection: a run's stream is many small writes
    # (headers, then one chunk per message), and with Nagle's algorithm each
    # write after the first waited for the platform's delayed ACK (~40 ms on
    # Linux): a run of a few ms took 45 ms, its messages all arriving at once.
    disable_nagle_algorithm = True
    app: App
    token: str = ""

    def log_message(self, format, *args):  # the platform logs calls; keep stderr for errors
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if not self.token:
            return True
        got = self.headers.get("Authorization", "")
        return hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode())

    def _body(self) -> dict | None:
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > MAX_REQUEST:
            self._answer(413 if n > 0 else 400, {"detail": f"body: must have a Content-Length of at most {MAX_REQUEST} bytes"})
            return None
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError as e:
            self._answer(400, {"detail": f"body: is not JSON: {e}"})
            return None
        if not isinstance(req, dict):
            self._answer(400, {"detail": "body: must be a JSON object"})
            return None
        return req

    def do_GET(self):
        if self.path == "/health":
            return self._answer(200, dispatch.health(self.app))
        if self.path == "/describe":  # the function runtime protocol's describe: what this runtime is
            return self._answer(200, dispatch.runtime_describe(self.app))
        self._answer(404, {"detail": "not found"})

    def do_POST(self):
        if not self._authorized():
            return self._answer(401, {"detail": "missing or wrong runtime token"})
        op = self.path.removeprefix("/")
        if op != dispatch.RUN and op not in dispatch.CALLS:
            return self._answer(404, {"detail": "not found"})
        req = self._body()
        if req is None:
            return
        if op == dispatch.RUN:
            return self._run(req)
        self._answer(*dispatch.call(self.app, op, req))

    def _run(self, req: dict) -> None:
        started = False

        def write(msg: dict) -> None:
            nonlocal started
            if not started:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                started = True
            line = dumps_message(msg) + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        try:
            refused = dispatch.run(self.app, req, write)
        except (BrokenPipeError, ConnectionResetError):
            return  # the platform went away; it resumes from the checkpoints it has
        if refused is not None:
            return self._answer(400, refused)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def serve(config: str, host: str = "127.0.0.1", port: int = 0, out=sys.stdout) -> ThreadingHTTPServer:
    """Loads the app and starts serving it in a thread; returns the server."""
    app = load_app(config)
    handler = type("AppHandler", (Handler,), {"app": app, "token": os.environ.get("STEPGRAPH_RUNTIME_TOKEN", "")})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _exit_with_parent() -> None:
    """The runtime ends when the platform that started it does, even if the
    platform was killed and could not stop it: an orphan would hold the
    app's code running with nobody to call it."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _protocol_stdout():
    """Keeps the process's stdout for the protocol's one line and sends
    everything else written there to stderr: an app that prints while it is
    imported (or later, from C code too) must not be taken for the hello
    line. Returns the protocol's stream."""
    sys.stdout.flush()
    hello = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return hello


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stepgraph_runtime.server", description=__doc__.split("\n")[0])
    p.add_argument("--config", default="langgraph.json", help="the app's langgraph.json")
    p.add_argument("--port", type=int, default=0, help="port (0: any free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (127.0.0.1; 0.0.0.0 in a container serving an external_docker deployment over HTTP)")
    args = p.parse_args(argv)
    hello = _protocol_stdout()
    try:
        server = serve(args.config, host=args.host, port=args.port)
    except AppError as e:
        print(json.dumps({"error": {"error": "AppError", "message": str(e)}}), file=hello, flush=True)
        return 2
    except BaseException as e:  # an import error in the app: the developer needs the traceback
        print(json.dumps({"error": dispatch.error_json(e)}), file=hello, flush=True)
        return 2
    _exit_with_parent()
    host, port = server.server_address[:2]
    print(json.dumps({"listening": f"http://{host}:{port}", "graphs": sorted(server.RequestHandlerClass.app.graphs)}),
          file=hello, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
