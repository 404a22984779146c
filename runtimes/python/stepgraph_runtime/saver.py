"""The checkpointer of one call: LangGraph's checkpoints, held for the platform.

A call gets the thread's parent checkpoint from the platform (the "native"
bundle it stored with the checkpoint), and this saver serves it to LangGraph
as if it were the thread's history. Every checkpoint and pending write
LangGraph saves during the call is kept here and reported through
``on_root_change``, so the platform stores it: the runtime itself keeps
nothing once the call ends.

The bundle of a root checkpoint carries what LangGraph needs to continue from
it: the checkpoint, its pending writes (a partly done step: completed tasks'
writes, interrupts, resume values) and the checkpoints of the subgraphs that
ran in the step that follows it (an interrupted subgraph resumes from them).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)

BUNDLE_VERSION = 1
# The id the saver gives "the thread's latest checkpoint" while the one it
# loaded is superseded; it sorts after every UUID and names no checkpoint.
SUPERSEDED_ID = "~superseded"


class _Entry:
    """One stored checkpoint of a namespace, with its pending writes."""

    __slots__ = ("checkpoint", "metadata", "parent_id", "root_id", "writes")

    def __init__(self, checkpoint, metadata, parent_id, root_id):
        self.checkpoint = checkpoint
        self.metadata = metadata
        self.parent_id = parent_id
        self.root_id = root_id  # the root checkpoint whose step made it ("" for the root)
        # (task_id, idx) -> (task_id, channel, value, task_path)
        self.writes: dict[tuple[str, int], tuple[str, str, Any, str]] = {}


# What upstream's server checkpointers keep of a run's config in each
# checkpoint's metadata (langgraph-runtime-inmem's InMemorySaver.put): the
# configurable values but these and the "__" internals, and the config's
# metadata (where the server put the run's ids), under LangGraph's own keys.
_EXCLUDED_CONFIGURABLE = {"checkpoint_ns", "checkpoint_id", "run_id", "thread_id"}


def _server_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict:
    conf = config.get("configurable") or {}
    return {
        **{k: v for k, v in conf.items() if not k.startswith("__") and k not in _EXCLUDED_CONFIGURABLE},
        **(config.get("metadata") or {}),
        **metadata,
    }


class PlatformSaver(BaseCheckpointSaver[int]):
    """An in-memory saver for one call, loaded from and reporting to the platform."""

    def __init__(self, thread_id: str, on_root_change: Callable[[str], None] | None = None):
        super().__init__()
        self.thread_id = thread_id
        self.on_root_change = on_root_change or (lambda _id: None)
        # checkpoint_ns -> checkpoint_id -> entry, in insertion order
        self.entries: dict[str, dict[str, _Entry]] = {}
        # The thread has newer checkpoints than the one loaded (the platform
        # says so: a run from an earlier checkpoint). LangGraph asks for the
        # thread's latest to tell a resume from time travel; until this call
        # saves its first checkpoint, the answer is "another one".
        self.superseded = False

    # --- the bundle ---------------------------------------------------------

    def _enc(self, value: Any) -> list[str]:
        kind, data = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode()]

    def _dec(self, pair: Sequence[str]) -> Any:
        return self.serde.loads_typed((pair[0], base64.b64decode(pair[1])))

    def load(self, bundle: dict | None) -> str | None:
        """Loads the platform's bundle; returns the root checkpoint's id."""
        if not bundle:
            return None
        if bundle.get("v") != BUNDLE_VERSION:
            raise ValueError(f"checkpoint bundle: version {bundle.get('v')!r} is not {BUNDLE_VERSION}")
        root_id = None
        for item in bundle.get("checkpoints", []):
            ns = item["ns"]
            checkpoint = self._dec(item["checkpoint"])
            entry = _Entry(checkpoint, self._dec(item["metadata"]), item.get("parent_id"), item.get("root_id", ""))
            for task_id, idx, channel, value, task_path in item.get("writes", []):
                entry.writes[(task_id, idx)] = (task_id, channel, self._dec(value), task_path)
            self.entries.setdefault(ns, {})[checkpoint["id"]] = entry
            if ns == "":
                root_id = checkpoint["id"]
        return root_id

    def bundle(self, root_id: str) -> dict:
        """The bundle of root checkpoint root_id: it, its writes, and the
        subgraph checkpoints made in the step that follows it."""
        out = []
        root = self.entries.get("", {}).get(root_id)
        if root is None:
            raise KeyError(root_id)
        out.append(self._item("", root))
        for ns, by_id in self.entries.items():
            if ns == "":
                continue
            for entry in by_id.values():
                if entry.root_id == root_id:
                    out.append(self._item(ns, entry))
        return {"v": BUNDLE_VERSION, "checkpoints": out}

    def _item(self, ns: str, entry: _Entry) -> dict:
        return {
            "ns": ns,
            "checkpoint": self._enc(entry.checkpoint),
            "metadata": self._enc(entry.metadata),
            "parent_id": entry.parent_id,
            "root_id": entry.root_id,
            "writes": [
                [task_id, idx, channel, self._enc(value), task_path]
                for (task_id, idx), (_t, channel, value, task_path) in entry.writes.items()
            ],
        }

    # --- BaseCheckpointSaver --------------------------------------------------

    def _tuple(self, ns: str, entry: _Entry) -> CheckpointTuple:
        config = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ns, "checkpoint_id": entry.checkpoint["id"]}}
        parent = None
        if entry.parent_id:
            parent = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ns, "checkpoint_id": entry.parent_id}}
        writes = sorted(entry.writes.values(), key=lambda w: (w[3], w[0]))
        return CheckpointTuple(
            config=config,
            checkpoint=entry.checkpoint,
            metadata=entry.metadata,
            parent_config=parent,
            pending_writes=[(t, c, v) for t, c, v, _p in writes],
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        ns = config["configurable"].get("checkpoint_ns", "")
        by_id = self.entries.get(ns)
        if not by_id:
            return None
        if checkpoint_id := get_checkpoint_id(config):
            entry = by_id.get(checkpoint_id)
            return self._tuple(ns, entry) if entry else None
        latest = max(by_id.values(), key=lambda e: e.checkpoint["id"])
        if ns == "" and self.superseded:
            stand_in = {**latest.checkpoint, "id": SUPERSEDED_ID}
            return self._tuple(ns, latest)._replace(checkpoint=stand_in)
        return self._tuple(ns, latest)

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:
        ns = (config or {}).get("configurable", {}).get("checkpoint_ns", "")
        entries = sorted(self.entries.get(ns, {}).values(), key=lambda e: e.checkpoint["id"], reverse=True)
        n = 0
        for entry in entries:
            if before and entry.checkpoint["id"] >= get_checkpoint_id(before):
                continue
            if filter and not all(entry.metadata.get(k) == v for k, v in filter.items()):
                continue
            yield self._tuple(ns, entry)
            n += 1
            if limit is not None and n >= limit:
                return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "")
        root_id = "" if ns == "" else (conf.get("checkpoint_map") or {}).get("", "")
        entry = _Entry(
            checkpoint.copy(),
            get_serializable_checkpoint_metadata(config, _server_metadata(config, metadata)),
            conf.get("checkpoint_id"),
            root_id,
        )
        self.entries.setdefault(ns, {})[checkpoint["id"]] = entry
        if ns == "":
            self.superseded = False
        self._changed(ns, checkpoint["id"], root_id)
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "")
        entry = self.entries.get(ns, {}).get(conf["checkpoint_id"])
        if entry is None:
            return
        for idx, (channel, value) in enumerate(writes):
            key = (task_id, WRITES_IDX_MAP.get(channel, idx))
            if key[1] >= 0 and key in entry.writes:
                continue  # as LangGraph's savers: a regular write is kept once
            entry.writes[key] = (task_id, channel, value, task_path)
        self._changed(ns, conf["checkpoint_id"], entry.root_id)

    def _changed(self, ns: str, checkpoint_id: str, root_id: str) -> None:
        # A subgraph's checkpoint changes the bundle of its root checkpoint.
        self.on_root_change(checkpoint_id if ns == "" else root_id)

    def delete_thread(self, thread_id: str) -> None:
        self.entries.clear()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)
