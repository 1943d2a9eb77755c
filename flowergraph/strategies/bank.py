"""The models a strategy holds (a part of :class:`flowergraph.strategies.FederatedStrategy`): one global model,
one per group of clients, one per client, each a set of named arrays, with one serialisation cache.

Slots are named ``"global"``, ``"group:<name>"`` and ``"client:<partition id>"``. :meth:`ModelBank.model_for`
gives a client its own model if the bank has one, else its group's, else the global one: what
:meth:`~flowergraph.strategies.FederatedStrategy.client_model` sends it for training and evaluation (GCFL's
clusters are groups; a method with personalised server-side models keeps one per client). Arrays are named by
their state-dict keys where the clients report them (``"convs.0.lin.weight"``), else by position (``"0"``,
``"1"``, ...); updates are checked and averaged by name, so a client may return some of the arrays it was sent
(partial updates).

The bank's state (every slot but the global model, which checkpoints keep as the run's model, plus its keys and
the groups) joins the strategy's :meth:`~flowergraph.strategies.FederatedStrategy.state_dict`.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


NamedArrays = dict[str, np.ndarray]
GLOBAL = "global"


def positional_keys(count: int) -> list[str]:
    """The names of arrays whose state-dict keys are unknown: their positions, ``"0"``, ``"1"``, ..."""
    return [str(i) for i in range(count)]


def named(arrays: Sequence[np.ndarray], keys: Sequence[str] | None = None) -> NamedArrays:
    """``arrays`` under ``keys`` (positional names when None); ValueError when the counts differ."""
    arrays = list(arrays)
    keys = positional_keys(len(arrays)) if keys is None else list(keys)
    if len(keys) != len(arrays):
        raise ValueError(f"{len(arrays)} arrays but {len(keys)} names")
    return {str(k): np.asarray(a) for k, a in zip(keys, arrays)}


def initial_arrays(initial: Any) -> tuple[list[np.ndarray], list[str] | None]:
    """A strategy's ``initial_parameters`` (named arrays, or a sequence of arrays) as its arrays and their names
    (None: unnamed). A face converts its own type first (the legacy adapter: Flower's legacy array payload)."""
    if isinstance(initial, Mapping):
        return list(initial.values()), list(initial)
    return list(initial), None


def group_slot(name: str) -> str:
    return f"group:{name}"


def client_slot(partition: int) -> str:
    return f"client:{int(partition)}"


class ModelBank:
    """Named models by slot (see the module docstring). Thread-safe: a round's messages are built in parallel."""

    def __init__(self) -> None:
        self._models: dict[str, NamedArrays] = {}
        self._versions: dict[str, int] = {}
        self._cache: dict[tuple[str, tuple[str, ...] | None], tuple[int, list[np.ndarray]]] = {}
        self._groups: dict[str, list[int]] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ModelBank(slots={self.slots()}, groups={self._groups})"

    # ------------------------------------------------------------------------------------------- models
    def slots(self) -> list[str]:
        return list(self._models)

    def get(self, slot: str) -> NamedArrays | None:
        return self._models.get(slot)

    def set(self, slot: str, arrays: Mapping[str, np.ndarray], payload: list[np.ndarray] | None = None) -> None:
        """Store ``arrays`` (copied into a fresh ordered mapping) under ``slot``; ``payload``: the list of the same
        arrays a face handed in (kept as the slot's :meth:`payload`, so the face recognises its own list)."""
        with self._lock:
            self._models[slot] = {str(k): np.asarray(v) for k, v in arrays.items()}
            self._versions[slot] = self._versions.get(slot, 0) + 1
            if payload is not None:
                self._cache[(slot, None)] = (self._versions[slot], payload)

    def drop(self, slot: str) -> None:
        with self._lock:
            self._models.pop(slot, None)
            self._versions[slot] = self._versions.get(slot, 0) + 1

    def reset(self, global_model: Mapping[str, np.ndarray] | None = None) -> None:
        """Forget every model and group (a new stage of a run with another model); keep ``global_model``."""
        with self._lock:
            for slot in list(self._models):
                self.drop(slot)
            self._groups = {}
            if global_model is not None:
                self.set(GLOBAL, global_model)

    @property
    def global_model(self) -> NamedArrays | None:
        return self._models.get(GLOBAL)

    def set_global(self, arrays: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> None:
        """The global model; a list keeps the names of the current global model (positional names if none)."""
        if not isinstance(arrays, Mapping):
            current = self.global_model
            keys = list(current) if current is not None and len(current) == len(arrays) else None
            arrays = named(arrays, keys)
        self.set(GLOBAL, arrays)

    def adopt(self, arrays: Sequence[np.ndarray] | None) -> None:
        """A server loop's model becomes the global model when it is another model of the same shapes (Flower's
        contract: a round trains the arrays the loop passes, e.g. a DP wrapper's noisy release). The bank's own
        list (:meth:`is_current`) costs nothing; a model of other shapes (the previous stage's, after a stage
        changed the model) is ignored."""
        if arrays is None or len(arrays) == 0 or self.is_current(GLOBAL, arrays):
            return
        current = self.global_model
        arrays = list(arrays)
        if current is None:
            self.set(GLOBAL, named(arrays), payload=arrays)
        elif len(arrays) == len(current) and all(a.shape == b.shape for a, b in zip(arrays, current.values())):
            self.set(GLOBAL, named(arrays, list(current)), payload=arrays)

    def arrays(self, slot: str, keys: Sequence[str] | None = None) -> NamedArrays:
        """The named arrays of ``slot`` (all, or those named ``keys``; an empty mapping for an empty slot)."""
        model = self._models.get(slot) or {}
        return model if keys is None else {k: model[k] for k in keys}

    # ------------------------------------------------------------------------------------------- groups
    @property
    def groups(self) -> dict[str, list[int]]:
        """Group name -> the partition ids in it (a copy)."""
        return {g: list(m) for g, m in self._groups.items()}

    def set_groups(self, groups: Mapping[str, Iterable[int]]) -> None:
        """Replace the grouping (a partition is in at most one group)."""
        seen: dict[int, str] = {}
        out: dict[str, list[int]] = {}
        for name, members in groups.items():
            out[str(name)] = [int(p) for p in members]
            for p in out[str(name)]:
                if p in seen:
                    raise ValueError(f"partition {p} is in groups {seen[p]!r} and {name!r}")
                seen[p] = str(name)
        with self._lock:
            self._groups = out

    def group_of(self, partition: int | None) -> str | None:
        if partition is None:
            return None
        for name, members in self._groups.items():
            if int(partition) in members:
                return name
        return None

    def slot_for(self, partition: int | None) -> str:
        """The slot a client's model comes from: its own, else its group's, else the global one."""
        if partition is not None and client_slot(partition) in self._models:
            return client_slot(partition)
        group = self.group_of(partition)
        if group is not None and group_slot(group) in self._models:
            return group_slot(group)
        return GLOBAL

    def model_for(self, partition: int | None) -> NamedArrays:
        slot = self.slot_for(partition)
        model = self._models.get(slot)
        if model is None:
            raise RuntimeError("the model bank holds no global model yet")
        return model

    # ------------------------------------------------------------------------------------------- payloads
    def payload(self, slot: str, keys: Sequence[str] | None = None) -> list[np.ndarray]:
        """The arrays of ``slot`` (all, or those named ``keys``, in that order) as one list, the same list object
        for every call until the slot changes (a round sends one model to many clients: a face serialises it
        once)."""
        with self._lock:
            model = self._models[slot]
            cache_key = (slot, None if keys is None else tuple(keys))
            version = self._versions[slot]
            hit = self._cache.get(cache_key)
            if hit is not None and hit[0] == version:
                return hit[1]
            arrays = list(model.values()) if keys is None else [model[k] for k in keys]
            self._cache[cache_key] = (version, arrays)
            return arrays

    def is_current(self, slot: str, arrays: Sequence[np.ndarray]) -> bool:
        """Whether ``arrays`` is this slot's current payload (the very list :meth:`payload` gave)."""
        hit = self._cache.get((slot, None))
        return hit is not None and hit[0] == self._versions.get(slot) and hit[1] is arrays

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # --------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Every slot but the global model's arrays (kept by the checkpoint as the run's model), the global model's
        keys, and the groups."""
        global_model = self.global_model
        return {
            "global_keys": None if global_model is None else list(global_model),
            "models": {
                slot: {"keys": list(m), "arrays": list(m.values())}
                for slot, m in self._models.items()
                if slot != GLOBAL
            },
            "groups": self.groups,
        }

    def load_state_dict(self, state: Mapping[str, Any], global_arrays: Sequence[np.ndarray] | None = None) -> None:
        self.reset()
        if global_arrays is not None:
            self.set(GLOBAL, named(global_arrays, state.get("global_keys")))
        for slot, model in (state.get("models") or {}).items():
            self.set(slot, named(model["arrays"], model["keys"]))
        self.set_groups(state.get("groups") or {})
