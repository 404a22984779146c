"""Schemathesis hooks for the stepgraph run (loaded via SCHEMATHESIS_HOOKS).

They edit a generated request just before it is sent, keeping it valid or
invalid exactly as it was generated, so that:

- no request makes the server reach beyond this machine: a run's `webhook`
  is pointed at the test's own sink on 127.0.0.1 (STEPGRAPH_TEST_WEBHOOK);
- no request keeps a worker waiting for long: a run's `after_seconds` within
  the documented range is cut to at most MAX_DELAY, so runs/wait, join and
  cancel?wait answer in seconds, not days; the agent-auth wait's `timeout`
  query within its range is cut to MAX_WAIT, so GET /v2/auth/wait/{auth_id}
  on a pending flow answers in a second, not after the request timeout.

Values outside the documented range are left alone: the server must answer
them 422 at once.
"""

import os

import schemathesis

WEBHOOK = os.environ.get("STEPGRAPH_TEST_WEBHOOK", "")
MAX_DELAY = 0.5
MAX_AFTER_SECONDS = 604800  # the document's maximum for after_seconds
MAX_WAIT = 1
MAX_AUTH_WAIT = 300  # the document's maximum for /v2/auth/wait's timeout


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    query = case.query
    if case.path == "/v2/auth/wait/{auth_id}" and isinstance(query, dict):
        wait = query.get("timeout")
        if _number(wait) and MAX_WAIT < wait <= MAX_AUTH_WAIT:
            query["timeout"] = MAX_WAIT
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
