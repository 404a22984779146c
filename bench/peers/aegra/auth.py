"""API keys for Aegra in the benchmark: two users (organizations), as stepgraph has.

loadgen makes two random keys per start and passes them in BENCH_AEGRA_KEYS
("identity=key,identity=key"); each request's X-Api-Key names its user, so
Aegra scopes threads and runs per user (its multi-user mode) and loadgen can
measure one user's latency while another floods the server (the fairness
figure). A request without a known key is refused with 401.
"""

import hmac
import os

from langgraph_sdk import Auth

auth = Auth()

_KEYS = {}
for _pair in os.environ.get("BENCH_AEGRA_KEYS", "").split(","):
    _identity, _sep, _key = _pair.partition("=")
    if _sep and _key:
        _KEYS[_key] = _identity


@auth.authenticate
async def authenticate(headers: dict) -> Auth.types.MinimalUserDict:
    key = headers.get("x-api-key") or headers.get(b"x-api-key") or ""
    if isinstance(key, bytes):
        key = key.decode()
    for known, identity in _KEYS.items():
        if hmac.compare_digest(known, key):
            return {"identity": identity, "is_authenticated": True}
    raise Auth.exceptions.HTTPException(status_code=401, detail="unknown API key")
