"""A per-process memo of derived per-client data, bounded by bytes (Flower-free).

In Flower's simulation any client's message can land on any Ray actor, so a per-process cache keyed by client
ends up holding every client's data in every actor: at 1M nodes, 10 clients' FedGCN extended graphs (~115 MB each)
and partition files (~65 MB each) per actor. :class:`BytesLRU` keeps the most recently used entries up to a byte
budget and drops the rest (they are rebuilt when needed: a cost in time, never in results). The budget is
``FLOWERGRAPH_MEMO_MB`` (default 256) per cache and process.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable

import numpy as np
import torch


def nbytes(value: Any) -> int:
    """Bytes held by the tensors and arrays reachable through a value's attributes, lists, tuples and dicts."""
    seen: set[int] = set()

    def walk(v) -> int:
        if id(v) in seen:
            return 0
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            return v.element_size() * v.nelement()
        if isinstance(v, np.ndarray):
            return int(v.nbytes)
        if isinstance(v, (list, tuple)):
            return sum(walk(x) for x in v)
        if isinstance(v, dict):
            return sum(walk(x) for x in v.values())
        if hasattr(v, "__dict__"):
            return sum(walk(x) for x in vars(v).values())
        return 0

    return walk(value)


def default_budget() -> int:
    return int(float(os.environ.get("FLOWERGRAPH_MEMO_MB", "256")) * 2**20)


class BytesLRU:
    """Least-recently-used memo bounded by ``budget`` bytes (an entry larger than the budget is not kept)."""

    def __init__(self, budget: int | None = None):
        self.budget = default_budget() if budget is None else int(budget)
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.used = 0
        _MEMOS.add(self)

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        missing = object()
        value = self.get(key, missing)
        if value is missing:
            value = build()
            self.put(key, value)
        return value

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value under ``key`` (marked as recently used), or ``default``."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key][0]

    def put(self, key: Hashable, value: Any, size: int | None = None) -> bool:
        """Keep ``value`` under ``key`` (replacing what was there); False when it is larger than the budget."""
        size = nbytes(value) if size is None else int(size)
        with self._lock:
            if key in self._items:
                self.used -= self._items.pop(key)[1]
            if size > self.budget:
                return False
            self._items[key] = (value, size)
            self.used += size
            while self.used > self.budget:
                _, (_, dropped) = self._items.popitem(last=False)
                self.used -= dropped
        return True

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0

    def __len__(self) -> int:
        return len(self._items)


_MEMOS: "weakref.WeakSet[BytesLRU]" = weakref.WeakSet()
_PACKAGES = ("flowergraph.tasks", "flowergraph.clients", "flowergraph.methods", "flowergraph.app")


def release_process_caches() -> None:
    """Drop every per-process memo of data: each :class:`BytesLRU` and every ``functools.lru_cache`` defined in
    flowergraph's task, client, method and app modules (loaded graphs, cuts, client data, models). For a process
    that is done with the data, as the simulation launcher is after its data check (the run's clients and server
    are other processes): at 1M nodes it kept 0.28 GB of the graph and its cut for the whole run. Anything needed
    again is rebuilt (time, never results)."""
    for memo in list(_MEMOS):
        memo.clear()
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_PACKAGES):
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) == name and callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    gc.collect()
