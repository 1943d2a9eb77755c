"""The process-local cache of a client: derived data too large or too costly to rebuild per message, kept per run
and node in the process that answers the node's messages (see the state tiers in docs/architecture.md).

Flower re-creates the client for every message; ``context.state`` persists, is checkpointed, and in simulation
travels with every message, so it holds what must survive (weights, optimizer moments). What can be rebuilt from it
(a SuperNet module, an extended graph, embeddings computed this round) belongs in a :class:`ProcessCache`:

* bounded by bytes (the process-wide budget ``FLOWERGRAPH_MEMO_MB``, default 256, least recently used dropped
  first: a dropped entry costs time, never a result);
* keyed per run and node (``ClientArgs.cache``), so two nodes answered by one Ray actor never share entries;
* round-stamped: :meth:`ProcessCache.get` with ``round`` and ``max_age`` returns an entry only if it was stored at
  most ``max_age`` rounds earlier (0: this round's);
* never checkpointed and never sent: a resumed run or another process starts with it empty.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

from ..tasks.memo import BytesLRU

_STORE = BytesLRU()  # one per process, shared by every node this process answers


class ProcessCache:
    """Round-stamped, byte-bounded entries under one namespace (a run and a node)."""

    def __init__(self, namespace: Hashable, store: BytesLRU | None = None) -> None:
        self.namespace = namespace
        self.store = store if store is not None else _STORE

    def _key(self, key: Hashable) -> tuple:
        return (self.namespace, key)

    def round_of(self, key: Hashable) -> int | None:
        """The round the entry under ``key`` was stored in (None: absent or stored without a round)."""
        entry = self.store.get(self._key(key))
        return None if entry is None else entry[1]

    def get(self, key: Hashable, default: Any = None, *, round: int | None = None, max_age: int | None = None) -> Any:
        """The value under ``key``; ``default`` when absent, or, given ``round`` and ``max_age``, when it was stored
        more than ``max_age`` rounds before ``round`` (or without a round)."""
        entry = self.store.get(self._key(key))
        if entry is None:
            return default
        value, stamp = entry
        if max_age is not None and round is not None and (stamp is None or round - stamp > max_age):
            return default
        return value

    def put(self, key: Hashable, value: Any, *, round: int | None = None, size: int | None = None) -> Any:
        """Keep ``value`` (stamped with ``round``); returns it. A value larger than the budget is not kept."""
        self.store.put(self._key(key), (value, round), size)
        return value

    def get_or_build(
        self,
        key: Hashable,
        build: Callable[[], Any],
        *,
        round: int | None = None,
        max_age: int | None = None,
        size: int | None = None,
    ) -> Any:
        """The cached value (fresh enough: see :meth:`get`), else ``build()``, kept and returned."""
        missing = object()
        value = self.get(key, missing, round=round, max_age=max_age)
        if value is missing:
            value = self.put(key, build(), round=round, size=size)
        return value
