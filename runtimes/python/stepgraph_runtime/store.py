"""The graph's ``store``: the platform's long-term memory, reached through the protocol.

A run call that may use the store carries ``store: {"url", "token"}``; this
BaseStore sends each batch of operations there (``POST url``, the token as a
bearer) and reads the answers. The platform applies them to its store API
(the organization's namespaces, limits, TTLs and quota), so a graph's memory
is the same whether it is read by the graph or through ``/store``.

The app's ``store`` settings of langgraph.json (appconfig.StoreSettings) are
its defaults: LangGraph applies ``ttl_config`` (a put's default TTL, reads
refreshing TTLs), and a put without an index embeds the configured fields.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .appconfig import StoreSettings
from .wire import dumps


class StoreError(Exception):
    """The platform refused a store operation (its message says why)."""


def encode_op(op: Op, index_fields: list[str] | None = None) -> dict:
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
    if isinstance(op, SearchOp):
        return {
            "op": "search",
            "namespace_prefix": list(op.namespace_prefix),
            "filter": op.filter,
            "limit": op.limit,
            "offset": op.offset,
            "query": op.query,
            "refresh_ttl": op.refresh_ttl,
        }
    if isinstance(op, PutOp):
        return {
            "op": "put",
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,  # None deletes
            "index": op.index if op.index is not None or op.value is None else index_fields,
            "ttl": op.ttl,
        }
    if isinstance(op, ListNamespacesOp):
        prefix = suffix = None
        for cond in op.match_conditions or ():
            if cond.match_type == "prefix":
                prefix = list(cond.path)
            elif cond.match_type == "suffix":
                suffix = list(cond.path)
        return {
            "op": "list_namespaces",
            "prefix": prefix,
            "suffix": suffix,
            "max_depth": op.max_depth,
            "limit": op.limit,
            "offset": op.offset,
        }
    raise TypeError(f"unknown store operation {type(op).__name__}")


def _item(d: dict, cls=Item) -> Item:
    kw = dict(value=d["value"], key=d["key"], namespace=tuple(d["namespace"]),
              created_at=d["created_at"], updated_at=d["updated_at"])
    if cls is SearchItem:
        kw["score"] = d.get("score")
    return cls(**kw)


def decode_result(op: Op, res: Any) -> Result:
    if isinstance(op, GetOp):
        return _item(res) if res else None
    if isinstance(op, SearchOp):
        return [_item(r, SearchItem) for r in res]
    if isinstance(op, ListNamespacesOp):
        return [tuple(ns) for ns in res]
    return None


class PlatformStore(BaseStore):
    """A BaseStore whose operations the platform carries out."""

    supports_ttl = True  # the platform's store keeps TTLs

    def __init__(self, url: str, token: str, settings: StoreSettings | None = None, timeout: float = 30.0):
        self.url = url
        self.token = token
        self.timeout = timeout
        self.settings = settings or StoreSettings()
        self.ttl_config = self.settings.ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if not ops:
            return []
        body = dumps({"ops": [encode_op(op, self.settings.index_fields) for op in ops]})
        req = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            detail = e.read()[:2000].decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("detail", detail)
            except ValueError:
                pass
            raise StoreError(f"store: {detail}") from None
        results = answer.get("results")
        if not isinstance(results, list) or len(results) != len(ops):
            raise StoreError("store: the platform's answer does not match the operations")
        return [decode_result(op, r) for op, r in zip(ops, results)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))
