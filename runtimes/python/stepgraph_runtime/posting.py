"""Live events over Lambda: a run call's events posted while the call runs.

Lambda answers an invocation when it ends (the Python managed runtime has no
response streaming), so the events of a run call on Lambda would reach the
run's stream only then. A call whose request has ``events: {"url",
"token"}`` (docs/runtime-protocol.md, "Live events on Lambda") numbers its
event messages (``seq``: 1, 2, ... in the call) and a thread of this module
posts them in small batches, in order, to the platform (``POST url``,
``{"events": [...]}``, the call's token as a bearer) while the graph runs;
the platform appends them to the call's mailbox, which the run worker reads
as the invocation goes. The invocation's answer then carries every message
but the events the platform acknowledged.

The first batch that fails (an answer other than 2xx, a network error, an
event over ``MAX_EVENT_BYTES``) stops the posting for the rest of the call:
what was acknowledged is a prefix of the call's events, and the rest is in
the answer. A batch the platform stored but whose answer was lost is in both;
the run worker keeps each ``seq`` once. The token is never logged.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

from .auth import Link
from .wire import dumps_message

INTERVAL = 0.2  # seconds between batches: live enough, few requests
MAX_BATCH = 25  # events per batch
MAX_EVENT_BYTES = 12 * 1024  # an event's JSON: larger ones stay in the answer
TIMEOUT = 10.0


class Poster:
    """Posts a call's events in order while the call runs (see the module)."""

    def __init__(self, link: Link):
        self.link = link
        self._cond = threading.Condition()
        self._pending: list[tuple[int, bytes]] = []
        self._seq = 0
        self._acked = 0
        self._stopping = False
        self._failed = False
        self._thread = threading.Thread(target=self._loop, name="stepgraph-events", daemon=True)
        self._thread.start()

    def number(self, msg: dict) -> dict:
        """msg (an event message) with its seq, queued to post."""
        with self._cond:
            self._seq += 1
            msg = {**msg, "seq": self._seq}
            if not self._failed:
                self._pending.append((self._seq, dumps_message(msg)))
                self._cond.notify()
            return msg

    def stop(self) -> int:
        """Ends the posting (a batch under way finishes) and answers the
        highest seq the platform acknowledged: the answer carries the rest."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()
        return self._acked

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping or self._failed:
                    return
                batch = self._pending[:MAX_BATCH]
                del self._pending[:len(batch)]
            if not self._post(batch):
                with self._cond:
                    self._failed = True
                    self._pending.clear()
                return
            with self._cond:
                self._acked = batch[-1][0]
                # Gather the next batch for INTERVAL (new events do not cut
                # it short; stop does).
                deadline = time.monotonic() + INTERVAL
                while not self._stopping and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)

    def _post(self, batch: list[tuple[int, bytes]]) -> bool:
        if any(len(raw) > MAX_EVENT_BYTES for _, raw in batch):
            return False
        body = b'{"events": [' + b",".join(raw for _, raw in batch) + b"]}"
        req = urllib.request.Request(self.link.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {self.link.token}"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                resp.read()
                return 200 <= resp.status < 300
        except (urllib.error.URLError, OSError, ValueError):
            return False


def start(link: dict | None) -> Poster | None:
    """A poster for the request's events link, or None without one."""
    if not isinstance(link, dict) or not isinstance(link.get("url"), str) or not isinstance(link.get("token"), str):
        return None
    return Poster(Link(link["url"], link["token"]))
