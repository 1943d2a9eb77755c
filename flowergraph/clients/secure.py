"""Client side of secure aggregation of the training rounds (run config ``secure-agg``), for any method.

:class:`SecureUpdates` wraps a method's client:

* ``secagg+``: the update itself goes to Flower's ``secaggplus_mod`` (the ClientApp adds it to its mods), which
  masks ``num_examples / max_weight x update``; the wrapper only sets ``num_examples`` to the weight the run's
  ``weighting`` gives the update (training-set size, or 1 for ``uniform``), since the server cannot re-weigh a
  masked sum. A weight above ``max_weight`` (``secagg-max-weight``) is refused with the fix: Flower would only
  warn, scale the update beyond its clipping range and clip it, which silently changes the aggregate.
* ``ckks``: when the fit config carries ``secure_agg = "ckks"``, the client flattens its update θ, checks it is
  finite, and returns the CKKS encryption of ``[w θ, w]`` (``w`` its weight) under the data owners' shared key,
  as the arrays ``[lengths int64, blob uint8]`` (serialised ciphertexts, 2048 values each) and the metric
  ``ckks_values`` (the vector's length). It also answers two phases: ``secure.ckks-setup`` (its key
  fingerprint and the key-less context the server adds with) and ``secure.ckks-decrypt`` (decrypts the summed
  ciphertexts the server sends and returns the plaintext sum: the server learns ``sum_k w_k θ_k`` and
  ``sum_k w_k``, never a single update).
"""

from __future__ import annotations

import numpy as np
from flwr.client import NumPyClient

from .. import wire
from ..errors import ConfigError
from ..wire import CONFIG_ERROR_MARKER
from ..wire.secure import CKKS_DECRYPT, CKKS_SETUP, CKKS_VALUES, SECURE_AGG, DecryptReply, DecryptRequest, SetupReply
from ..privacy import ckks
from ..privacy.packing import pack_blobs, unpack_blobs
from .base import ClientWrapper

MODES = ("secagg+", "ckks")


class SecureUpdates(ClientWrapper):
    """See the module docstring. ``weighting``: ``train-size`` or ``uniform``; ``key_file``: for ``ckks``."""

    def __init__(self, inner: NumPyClient, mode: str, partition_id: int, *, weighting: str = "train-size",
                 key_file: str | None = None, max_weight: float | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown secure aggregation {mode!r}; valid choices: {', '.join(MODES)}")
        if weighting not in ("train-size", "uniform"):
            raise ValueError(f"weighting {weighting!r} cannot be applied by the client; valid: train-size, uniform")
        super().__init__(inner)
        self.mode = mode
        self.partition_id = int(partition_id)
        self.weighting = weighting
        self.key_file = key_file
        self.max_weight = max_weight

    def _context(self):
        return ckks.load_key_file(self.key_file or "")

    def _weight(self, num_examples: int) -> int:
        return 1 if self.weighting == "uniform" else int(num_examples)

    def fit(self, parameters, config):
        arrays, num_examples, metrics = self.inner.fit(parameters, config)
        weight = self._weight(num_examples)
        if self.mode == "secagg+":
            if self.max_weight is not None and weight > self.max_weight:
                raise ConfigError(
                    f"{CONFIG_ERROR_MARKER} secure-agg='secagg+': partition {self.partition_id} weighs its update "
                    f"{weight} (training-set size), above secagg-max-weight={self.max_weight:g}, which SecAgg+ would "
                    f"clip; set secagg-max-weight >= the largest training-set size (or use uniform weighting)")
            return arrays, weight, metrics  # secaggplus_mod masks weight / max_weight x arrays
        if config.get(SECURE_AGG) != "ckks":
            return arrays, num_examples, metrics
        vector = ckks.flatten_arrays([np.asarray(a) for a in arrays])
        if not np.all(np.isfinite(vector)):
            raise ValueError("refusing to encrypt an update with NaN or infinite values")
        payload = np.concatenate([vector * weight, [float(weight)]])
        lengths, blob = pack_blobs(ckks.encrypt_vector(self._context(), payload))
        return [lengths, blob], num_examples, {**metrics, CKKS_VALUES: int(len(payload))}

    def get_properties(self, config):
        phase = config.get(wire.PHASE)
        if phase == CKKS_SETUP:
            ctx = self._context()
            reply = SetupReply(ckks.fingerprint(ctx), ckks.server_context_bytes(ctx))
            return wire.phase_reply(self.partition_id, [], reply.values())
        if phase == CKKS_DECRYPT:
            request = wire.decode_phase(config)
            ask = DecryptRequest.decode(request.arrays, request.values)
            total = ckks.decrypt_vector(self._context(), unpack_blobs(ask.lengths, ask.blob), ask.length)
            return wire.phase_reply(self.partition_id, DecryptReply(total).arrays(), {})
        return self.inner.get_properties(config)
