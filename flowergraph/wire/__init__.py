"""The message keys strategies and clients share (they never import each other: both import this module).

Training and evaluation travel as Flower's ``fit`` / ``evaluate`` messages (each strategy module's docstring
states its wire protocol). Everything else a method exchanges travels as a **phase message**: a
``get_properties`` message (Flower's "query" type) whose config names the phase, so Flower's client mods for
training messages (``secaggplus_mod``, the differential-privacy mods) leave it alone:

    server -> client  GetPropertiesIns.config = {PHASE: "<method>.<kind>", PHASE_ROUND: int r,
                                                 ARRAY_COUNT: n, "fg.a0": bytes, ..., <scalars>}
    client -> server  GetPropertiesRes.properties = {PARTITION_ID: int, ARRAY_COUNT: n, "fg.a0": bytes, ...,
                                                     <scalars>}

Arrays travel as Flower's own ``ndarray_to_bytes`` (``numpy.save`` with ``allow_pickle=False``), one bytes value
per array in order; scalars are bool, int, float, str or bytes. A config without :data:`PHASE` is the identity
request (the reply names the node's partition). Two phases are flowergraph's own and answered for every method
by the ClientApp: :data:`STATE_SAVE` and :data:`STATE_LOAD` (client checkpoints, see
:class:`flowergraph.clients.ClientState`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from flwr.common import bytes_to_ndarray, ndarray_to_bytes

# Every reply (fit, evaluate, phase, identity) names the partition the node holds.
PARTITION_ID = "partition_id"
# fit / evaluate config
SERVER_ROUND = "server_round"
EVALUATE_GLOBAL = "evaluate_global"  # fused evaluation: evaluate the received arrays before training
EVAL_PREFIX = "eval_"  # fused evaluation's metrics in the fit reply
# A client refusing the run because of bad input (node config, run config, data, key files) puts this in front
# of its error; the strategy then fails the run with that message instead of training without the client.
CONFIG_ERROR_MARKER = "flowergraph refused the run:"
IDENTITY_REQUEST = {"flowergraph": "identity"}

# Phase messages
PHASE = "fg.phase"
PHASE_ROUND = "fg.round"
ARRAY_COUNT = "fg.n"
ARRAY_PREFIX = "fg.a"
RESERVED_PREFIX = "fg."
STATE_SAVE = "flowergraph.state-save"  # config: RUN_TAG, PHASE_ROUND; reply: "path"
STATE_LOAD = "flowergraph.state-load"  # config: RUN_TAG, PHASE_ROUND; reply: "path"
RUN_TAG = "run_tag"
# Secure aggregation under CKKS (secure-agg=ckks), answered by flowergraph.clients.secure.SecureUpdates:
CKKS_SETUP = "secure.ckks-setup"  # reply: key_fingerprint (str), server_context (bytes: no key)
CKKS_DECRYPT = "secure.ckks-decrypt"  # config: arrays [lengths, blob] of summed ciphertexts, "length"; reply: [sum]
SECURE_AGG = "secure_agg"  # fit config: "ckks" asks for an encrypted update


def pack_arrays(arrays: list[np.ndarray]) -> dict[str, Any]:
    """``{ARRAY_COUNT: n, "fg.a0": bytes, ...}`` for a list of arrays."""
    out: dict[str, Any] = {ARRAY_COUNT: len(arrays)}
    for i, array in enumerate(arrays):
        out[f"{ARRAY_PREFIX}{i}"] = ndarray_to_bytes(np.asarray(array))
    return out


def unpack_arrays(values: Mapping[str, Any]) -> list[np.ndarray]:
    """The arrays :func:`pack_arrays` put into ``values`` (an empty list when there are none)."""
    n = int(values.get(ARRAY_COUNT, 0))
    try:
        return [bytes_to_ndarray(values[f"{ARRAY_PREFIX}{i}"]) for i in range(n)]
    except KeyError as exc:
        raise ValueError(f"phase message announces {n} arrays but lacks {exc.args[0]!r}") from None


def scalars(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without the reserved ``fg.*`` keys (what the phase's handler reads)."""
    return {k: v for k, v in values.items() if not k.startswith(RESERVED_PREFIX)}


def phase_message(kind: str, arrays: list[np.ndarray] | None = None, server_round: int = 0,
                  **values: Any) -> dict[str, Any]:
    """The config of a phase message (what the server sends)."""
    bad = [k for k in values if k.startswith(RESERVED_PREFIX)]
    if bad:
        raise ValueError(f"phase values may not use the reserved prefix {RESERVED_PREFIX!r}: {bad}")
    return {PHASE: kind, PHASE_ROUND: int(server_round), **values, **pack_arrays(list(arrays or []))}
