"""Schemathesis hooks for the stepgraph run (loaded via SCHEMATHESIS_HOOKS).

They edit a generated request just before it is sent, keeping it valid or
invalid exactly as it was generated, so that:

- no request makes the server reach beyond this machine: a run's `webhook`
  is pointed at the test's own sink on 127.0.0.1 (STEPGRAPH_TEST_WEBHOOK);
- no request keeps a worker waiting for long: a run's `after_seconds` within
  the documented range is cut to at most MAX_DELAY, so runs/wait, join and
  cancel?wait answer in seconds, not days; agent auth's wait (whose
  `timeout`, 0-300 s, holds the answer while a real attempt is pending) is
  cut the same way to MAX_AUTH_WAIT.

Values outside the documented range are left alone: the server must answer
them 422 at once.
"""

import os

import schemathesis

WEBHOOK = os.environ.get("STEPGRAPH_TEST_WEBHOOK", "")
MAX_DELAY = 0.5
MAX_AFTER_SECONDS = 604800  # the document's maximum for after_seconds
MAX_AUTH_WAIT = 1
MAX_WAIT_TIMEOUT = 300  # the document's maximum for /v2/auth/wait's timeout


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    if case.path.startswith("/v2/auth/wait/"):
        if case.query is None:
            case.query = {}
        if isinstance(case.query, dict):
            t = case.query.get("timeout")
            if t is None:  # the server's default is 30 s
                case.query["timeout"] = MAX_AUTH_WAIT
            else:
                # The coverage phase sends query values as text.
                n = int(t) if isinstance(t, str) and t.isdigit() else t
                if _number(n) and MAX_AUTH_WAIT < n <= MAX_WAIT_TIMEOUT:
                    case.query["timeout"] = MAX_AUTH_WAIT
    body = case.body
    if not isinstance(body, dict):
        return
    if "webhook" in body and isinstance(body["webhook"], str):
        if not WEBHOOK:
            raise RuntimeError("STEPGRAPH_TEST_WEBHOOK is not set: refusing to send a webhook URL")
        body["webhook"] = WEBHOOK
    delay = body.get("after_seconds")
    if _number(delay) and MAX_DELAY < delay <= MAX_AFTER_SECONDS:
        body["after_seconds"] = MAX_DELAY
