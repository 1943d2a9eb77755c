"""What travels between a strategy and its clients: every message key, in one place (strategies and clients never
import each other; both import this package). Each method with messages of its own has a module here
(:mod:`~flowergraph.methods.fedgcn.wire`), as do flowergraph's own phases (:mod:`~flowergraph.wire.state`: client
checkpoints; :mod:`~flowergraph.wire.secure`: secure aggregation under CKKS).

**Training and evaluation** travel as Flower's ``fit`` / ``evaluate`` messages (each strategy module's docstring
states its protocol). The keys every method shares: the config's :data:`SERVER_ROUND`, :data:`EVALUATE_GLOBAL`
(fused evaluation) and :data:`STAGE`; every reply's :data:`PARTITION_ID`; the fit metrics :data:`TRAIN_LOSS`,
:data:`NUM_TRAIN`, :data:`BATCH_SIZE`; the evaluation metrics :data:`ACCURACY`, :data:`LOSS`, :data:`NUM_TEST`,
:data:`VAL_ACCURACY`, :data:`VAL_LOSS`, :data:`NUM_VAL` (prefixed :data:`EVAL_PREFIX` inside a fit reply).

**Named arrays.** Arrays travel in order (an ArrayRecord's; the legacy face's list). When they are not the
receiver's whole model in its own order (a sub-network, a partial update), their names travel with them as
:data:`KEYS`: a JSON list of state-dict keys in the config (server -> client) or the metrics (client -> server);
:func:`encode_keys` / :func:`decode_keys`.

**Phases**: everything else a method exchanges travels as a phase message, a query (never a training message, so
Flower's client mods for training messages, ``secaggplus_mod`` and the differential-privacy mods, leave it
alone). Its values:

    server -> client  {PHASE: "<method>.<kind>", PHASE_ROUND: int r, ARRAY_COUNT: n, "fg.a0": array, ...,
                       <scalars>, [MODEL_KEYS: JSON list, "fg.m0": array, ...]}
    client -> server  {PARTITION_ID: int, ARRAY_COUNT: n, "fg.a0": array, ..., <scalars>}

Each face carries them its own way: on the Message API a ``query.fg_phase`` message with the arrays in the
ArrayRecord ``arrays`` and the rest in the ConfigRecord ``config`` (:mod:`flowergraph.app.message_records`), sent
to every node of the phase in one push; on the legacy face a ``get_properties`` message whose config holds each
array as Flower's ``ndarray_to_bytes`` (:func:`to_legacy`). The bytes a record counts for an array are its npy
bytes (:func:`npy_size`) on either face. Scalars are bool, int, float, str or bytes. A phase message may carry a
model (the client's current model: named arrays under ``fg.m*``), which the client's handler receives as
:attr:`PhaseRequest.model`. Values without :data:`PHASE` are the identity request (the reply names the node's
partition).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from flwr.common import bytes_to_ndarray, ndarray_to_bytes

from ..storage._astlock import serialize_ast_parse

# Every reply (fit, evaluate, phase, identity) names the partition the node holds.
PARTITION_ID = "partition_id"
# Identity reply, simulation with client-order != partition only: the node's place in Flower's message queue (its
# simulation partition-id); the server sends each round's messages in this order (flowergraph.app.loop).
NODE_RANK = "node_rank"
# fit / evaluate config
SERVER_ROUND = "server_round"
EVALUATE_GLOBAL = "evaluate_global"  # fused evaluation: evaluate the received arrays before training
STAGE = "fg.stage"  # the run's stage (methods with stages: search, then retraining)
EVAL_PREFIX = "eval_"  # fused evaluation's metrics in the fit reply
# Names of the arrays that travel (a JSON list of state-dict keys), in a config or in metrics.
KEYS = "fg.keys"
# fit metrics
TRAIN_LOSS, NUM_TRAIN, BATCH_SIZE = "train_loss", "num_train", "batch_size"
# evaluation metrics (also inside a fit reply, prefixed with EVAL_PREFIX)
ACCURACY, LOSS, NUM_TEST = "accuracy", "loss", "num_test"
VAL_ACCURACY, VAL_LOSS, NUM_VAL = "val_accuracy", "val_loss", "num_val"
# A client refusing the run because of bad input (node config, run config, data, key files) puts this in front
# of its error; the strategy then fails the run with that message instead of training without the client.
CONFIG_ERROR_MARKER = "flowergraph refused the run:"
IDENTITY_REQUEST = {"flowergraph": "identity"}

# Phase messages
PHASE = "fg.phase"
PHASE_ROUND = "fg.round"
ARRAY_COUNT = "fg.n"
ARRAY_PREFIX = "fg.a"
MODEL_KEYS = "fg.mk"
MODEL_PREFIX = "fg.m"
RESERVED_PREFIX = "fg."


def encode_keys(keys) -> str:
    """The names of arrays as they travel (:data:`KEYS`): a JSON list."""
    return json.dumps([str(k) for k in keys])


def decode_keys(values: Mapping[str, Any], count: int | None = None) -> list[str] | None:
    """The names under :data:`KEYS` in a config or metrics (None when there are none); ValueError when they are
    not a JSON list of strings, repeat a name, or do not match ``count`` arrays."""
    raw = values.get(KEYS)
    if raw is None:
        return None
    try:
        keys = json.loads(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{KEYS} is not a JSON list of names: {str(raw)[:80]!r}") from None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{KEYS} is not a JSON list of names: {str(raw)[:80]!r}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"{KEYS} names an array twice")
    if count is not None and len(keys) != count:
        raise ValueError(f"{KEYS} names {len(keys)} arrays but {count} travelled")
    return keys


def pack_arrays(arrays: list[np.ndarray], prefix: str = ARRAY_PREFIX, count_key: str = ARRAY_COUNT) -> dict[str, Any]:
    """``{ARRAY_COUNT: n, "fg.a0": array, ...}`` for a list of arrays. The arrays stay numpy arrays: each face
    carries them its own way (the Message API in an ArrayRecord; the legacy face as npy bytes in the config:
    :func:`to_legacy`)."""
    out: dict[str, Any] = {count_key: len(arrays)}
    for i, array in enumerate(arrays):
        out[f"{prefix}{i}"] = np.asarray(array)
    return out


def unpack_arrays(
    values: Mapping[str, Any], prefix: str = ARRAY_PREFIX, count_key: str = ARRAY_COUNT
) -> list[np.ndarray]:
    """The arrays :func:`pack_arrays` put into ``values`` (an empty list when there are none), as arrays or as the
    legacy face's npy bytes."""
    n = int(values.get(count_key, 0))
    try:
        raw = [values[f"{prefix}{i}"] for i in range(n)]
    except KeyError as exc:
        raise ValueError(f"phase message announces {n} arrays but lacks {exc.args[0]!r}") from None
    if any(not isinstance(v, np.ndarray) for v in raw):
        serialize_ast_parse()  # numpy.load parses array headers, here in several threads at once: storage._astlock
    return [v if isinstance(v, np.ndarray) else bytes_to_ndarray(v) for v in raw]


def to_legacy(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a legacy config or properties mapping: arrays as Flower's npy bytes (``ndarray_to_bytes``)."""
    return {k: ndarray_to_bytes(v) if isinstance(v, np.ndarray) else v for k, v in values.items()}


def npy_size(array: np.ndarray) -> int:
    """The bytes of ``array`` as Flower's ``ndarray_to_bytes`` writes it (npy header + data), without writing it:
    what a phase's records count for an array, on either face."""
    import io

    array = np.asarray(array)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return header.tell() + array.nbytes


def scalars(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without the reserved ``fg.*`` keys (what the phase's handler reads)."""
    return {k: v for k, v in values.items() if not k.startswith(RESERVED_PREFIX)}


@dataclass
class PhaseMessage:
    """What a server sends one client in a phase: arrays, scalar values and, optionally, a model (named arrays:
    e.g. the model the client trains with this round, to compute embeddings with)."""

    arrays: list[np.ndarray] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    model: Mapping[str, np.ndarray] | None = None


@dataclass
class PhaseRequest:
    """A phase message as the client's handler receives it: the phase ``kind``, the ``round`` it belongs to (0 for
    one-off phases), ``arrays``, ``values`` and the ``model`` the server sent with it (None if none)."""

    kind: str
    round: int
    arrays: list[np.ndarray]
    values: dict[str, Any]
    model: dict[str, np.ndarray] | None = None


def phase_message(
    kind: str,
    arrays: list[np.ndarray] | None = None,
    server_round: int = 0,
    model: Mapping[str, np.ndarray] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """The config of a phase message (what the server sends)."""
    bad = [k for k in values if k.startswith(RESERVED_PREFIX)]
    if bad:
        raise ValueError(f"phase values may not use the reserved prefix {RESERVED_PREFIX!r}: {bad}")
    config = {PHASE: kind, PHASE_ROUND: int(server_round), **values, **pack_arrays(list(arrays or []))}
    if model is not None:
        config[MODEL_KEYS] = encode_keys(model.keys())
        config.update(pack_arrays(list(model.values()), MODEL_PREFIX, MODEL_PREFIX + "n"))
    return config


def decode_phase(config: Mapping[str, Any]) -> PhaseRequest:
    """The :class:`PhaseRequest` a phase message's config holds (ValueError for a malformed one)."""
    model = None
    if MODEL_KEYS in config:
        arrays = unpack_arrays(config, MODEL_PREFIX, MODEL_PREFIX + "n")
        keys = decode_keys({KEYS: config[MODEL_KEYS]}, len(arrays)) or []
        model = dict(zip(keys, arrays))
    return PhaseRequest(
        kind=str(config[PHASE]),
        round=int(config.get(PHASE_ROUND, 0)),
        arrays=unpack_arrays(config),
        values=scalars(config),
        model=model,
    )


def phase_reply(partition_id: int, arrays: list[np.ndarray], values: Mapping[str, Any]) -> dict[str, Any]:
    """The properties of a client's answer to a phase message."""
    bad = [k for k in values if k.startswith(RESERVED_PREFIX)]
    if bad:
        raise ValueError(f"phase reply values may not use the reserved prefix {RESERVED_PREFIX!r}: {bad}")
    return {PARTITION_ID: int(partition_id), **values, **pack_arrays(list(arrays))}


# flowergraph's own phases (their modules define them; kept here too: the names were public before)
from .secure import CKKS_DECRYPT as CKKS_DECRYPT, CKKS_SETUP as CKKS_SETUP, SECURE_AGG as SECURE_AGG  # noqa: E402
from .state import RUN_TAG as RUN_TAG, STATE_LOAD as STATE_LOAD, STATE_SAVE as STATE_SAVE  # noqa: E402
