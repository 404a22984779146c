"""JSON for the wire: how LangGraph values travel to the platform.

State values, stream events and interrupts are made JSON the way the upstream
server (langgraph-api) answers them: LangChain messages and other pydantic
models by their model_dump(), dataclasses as dicts, sets and tuples as lists.
Anything else falls back to its str(), so an exotic value degrades instead of
failing the run.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import uuid
from collections.abc import Mapping
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Returns obj as plain JSON data (dict, list, str, int, float, bool, None)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "model_dump") and callable(obj.model_dump):
        try:
            return to_jsonable(obj.model_dump())
        except Exception:  # a model that cannot dump itself
            return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if hasattr(obj, "_asdict"):
        return to_jsonable(obj._asdict())
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return str(obj)


def dumps(obj: Any) -> bytes:
    """JSON bytes of obj, compact, one line."""
    return json.dumps(to_jsonable(obj), separators=(",", ":"), ensure_ascii=False).encode()


def dumps_message(msg: dict) -> bytes:
    """JSON bytes of a protocol message, as dumps makes them, for a message
    built of to_jsonable's output (every key a string): json encodes it in
    one pass instead of to_jsonable copying it all first, which a run paid
    for every message (a checkpoint carries the whole state). A value that
    is still not JSON is made so on the way (default), as dumps would."""
    return json.dumps(msg, default=to_jsonable, separators=(",", ":"), ensure_ascii=False).encode()
