"""Client side of secure aggregation of the training rounds (run config ``secure-agg``), for any method.

:class:`SecureUpdates` wraps a method's client:

* ``secagg+``: the update itself goes to Flower's ``secaggplus_mod`` (the ClientApp adds it to its mods), which
  masks ``num_examples / max_weight x update``; the wrapper only sets ``num_examples`` to the weight the run's
  ``weighting`` gives the update (training-set size, or 1 for ``uniform``), since the server cannot re-weigh a
  masked sum. A weight above ``max_weight`` (``secagg-max-weight``) is refused with the fix: Flower would only
  warn, scale the update beyond its clipping range and clip it, which silently changes the aggregate. An update
  with a NaN or infinite value, or with a value that Flower would clip (``|value| x weight / max_weight`` above
  ``secagg-clipping-range``), is refused too: the client fails the round, naming its partition and the reason
  (Flower quantises NaN to a finite integer and clips silently, so the masked sum would be wrong with no error).
* ``ckks``: when the fit config carries ``secure_agg = "ckks"``, the client flattens its update θ, checks it is
  finite, and returns an :class:`~flowergraph.wire.secure.EncryptedUpdate`: ``[w θ, w]`` (``w`` its weight) in
  ciphertexts of 2047 values plus one check value each, then a check ciphertext, all under the data owners'
  shared key; the check values are a function of a secret derived from the key, the round and the partition
  (:func:`flowergraph.privacy.ckks.encrypt_checked`). It answers two phases: ``secure.ckks-setup`` (its key
  fingerprint and the key-less context the server adds with) and ``secure.ckks-decrypt``, where it decrypts only
  what it can verify is the sum of one upload of each of at least ``min_secure_clients`` distinct named
  participants in that round (every check ciphertext and every check slot must match; the decrypted total
  weight must equal the participants' weights from their clear ``num_examples``), and returns it flooded with
  noise and rounded to 2^-20 (:func:`flowergraph.privacy.ckks.flood`); otherwise it refuses, naming the reason
  and the participants whose check ciphertext is not under the data owners' key. The protocol:
  :mod:`flowergraph.strategies.secure`.
"""

from __future__ import annotations

import numpy as np

from .. import wire
from ..errors import ConfigError
from ..wire import CONFIG_ERROR_MARKER
from ..wire.secure import (
    CKKS_DECRYPT,
    CKKS_SETUP,
    PURPOSES,
    SECURE_AGG,
    DecryptReply,
    DecryptRequest,
    EncryptedUpdate,
    SetupReply,
)
from ..privacy import ckks
from .base import Client, ClientWrapper

MODES = ("secagg+", "ckks")
WEIGHT_TOLERANCE = 1e-3  # the decrypted total weight is an integer sum, CKKS's error ~1e-8, flooding 2^-20


class UpdateRefused(ValueError):
    """The client will not send this update (non-finite, or outside SecAgg+'s clipping range): it fails the
    round, with the reason."""


class SecureUpdates(ClientWrapper):
    """See the module docstring. ``weighting``: ``train-size`` or ``uniform``; ``key_file``: for ``ckks``;
    ``max_weight`` and ``clipping_range``: SecAgg+'s bounds (``secagg-max-weight``, ``secagg-clipping-range``);
    ``min_secure_clients``: CKKS, the fewest distinct updates a sum must hold for this client to decrypt it."""

    def __init__(
        self,
        inner: Client,
        mode: str,
        partition_id: int,
        *,
        weighting: str = "train-size",
        key_file: str | None = None,
        max_weight: float | None = None,
        clipping_range: float | None = None,
        min_secure_clients: int = 2,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown secure aggregation {mode!r}; valid choices: {', '.join(MODES)}")
        if weighting not in ("train-size", "uniform"):
            raise ValueError(f"weighting {weighting!r} cannot be applied by the client; valid: train-size, uniform")
        if min_secure_clients < 2:
            raise ValueError(
                f"min_secure_clients must be >= 2 (a sum of one update is that update), got {min_secure_clients}"
            )
        super().__init__(inner)
        self.mode = mode
        self.partition_id = int(partition_id)
        self.weighting = weighting
        self.key_file = key_file
        self.max_weight = max_weight
        self.clipping_range = clipping_range
        self.min_secure_clients = int(min_secure_clients)

    def _context(self):
        return ckks.load_key_file(self.key_file or "")

    def _weight(self, num_examples: int) -> int:
        return 1 if self.weighting == "uniform" else int(num_examples)

    def _refuse(self, why: str):
        return UpdateRefused(
            f"secure-agg={self.mode!r}: partition {self.partition_id} refuses to send its update: {why}"
        )

    def _check_finite(self, arrays) -> None:
        bad = sum(
            int(np.size(a) - np.count_nonzero(np.isfinite(a))) for a in arrays if np.asarray(a).dtype.kind in "fc"
        )
        if bad:
            raise self._refuse(f"{bad} NaN or infinite value(s)")

    def fit(self, parameters, config):
        arrays, num_examples, metrics = self.inner.fit(parameters, config)
        weight = self._weight(num_examples)
        if self.mode == "secagg+":
            if self.max_weight is not None and weight > self.max_weight:
                raise ConfigError(
                    f"{CONFIG_ERROR_MARKER} secure-agg='secagg+': partition {self.partition_id} weighs its update "
                    f"{weight} (training-set size), above secagg-max-weight={self.max_weight:g}, which SecAgg+ would "
                    f"clip; set secagg-max-weight >= the largest training-set size (or use uniform weighting)"
                )
            self._check_finite(arrays)
            if self.clipping_range is not None and arrays:
                ratio = min(1.0, weight / self.max_weight) if self.max_weight else 1.0
                largest = max(float(np.max(np.abs(a))) if np.size(a) else 0.0 for a in arrays)
                if largest * ratio > self.clipping_range:
                    raise self._refuse(
                        f"a value of magnitude {largest:.4g} (x weight / secagg-max-weight = {ratio:.4g}) is outside "
                        f"secagg-clipping-range={self.clipping_range:g}, where SecAgg+ would clip it silently; raise "
                        f"secagg-clipping-range if such values are expected"
                    )
            return arrays, weight, metrics  # secaggplus_mod masks weight / max_weight x arrays
        if config.get(SECURE_AGG) != "ckks":
            return arrays, num_examples, metrics
        vector = ckks.flatten_arrays([np.asarray(a) for a in arrays])
        if not np.all(np.isfinite(vector)):
            raise self._refuse(
                f"{int(np.size(vector) - np.count_nonzero(np.isfinite(vector)))} NaN or infinite value(s)"
            )
        payload = np.concatenate([vector * weight, [float(weight)]])
        ctx = self._context()
        blobs = ckks.encrypt_checked(
            ctx, payload, ckks.check_key(ctx), int(config.get(wire.SERVER_ROUND, 0)), self.partition_id
        )
        upload = EncryptedUpdate(blobs, len(payload))
        return upload.arrays(), num_examples, {**metrics, **upload.metrics()}

    def get_properties(self, config):
        phase = config.get(wire.PHASE)
        if phase == CKKS_SETUP:
            ctx = self._context()
            reply = SetupReply(ckks.fingerprint(ctx), ckks.server_context_bytes(ctx))
            return wire.phase_reply(self.partition_id, [], reply.values())
        if phase == CKKS_DECRYPT:
            request = wire.decode_phase(config)
            reply = self.decrypt(DecryptRequest.decode(request.arrays, request.values), request.round)
            return wire.phase_reply(self.partition_id, reply.arrays(), reply.values())
        return self.inner.get_properties(config)

    def decrypt(self, ask: DecryptRequest, server_round: int) -> DecryptReply:
        """Decrypt ``ask`` if it is the sum of one upload of each named participant of ``server_round`` (at least
        ``min_secure_clients`` distinct ones), else refuse (see the module docstring)."""
        parts = list(ask.participants)
        rule = PURPOSES.get(ask.purpose)
        if rule is None:
            return DecryptReply(refused=f"unknown sum purpose {ask.purpose!r}; valid choices: {sorted(PURPOSES)}")
        if len(set(parts)) != len(parts):
            return DecryptReply(refused=f"the participants {parts} repeat a partition")
        if len(parts) < self.min_secure_clients:
            return DecryptReply(
                refused=f"asked to decrypt a sum of {len(parts)} update(s); partition "
                f"{self.partition_id} decrypts only sums of at least min-secure-clients="
                f"{self.min_secure_clients} distinct clients' updates"
            )
        ctx = self._context()
        key = ckks.check_key(ctx)
        bad = tuple(
            p
            for p, blob in zip(parts, ask.checks)
            if not ckks.check_ciphertext_ok(ctx, blob, key, server_round, p, ask.purpose)
        )
        if bad:
            return DecryptReply(
                refused=f"the check ciphertext of partition(s) {list(bad)} does not decrypt to its "
                f"round-{server_round} check value under the data owners' key",
                bad=bad,
            )
        try:
            total = ckks.decrypt_checked(ctx, ask.blobs, ask.length, key, server_round, parts, ask.purpose)
        except ckks.NotASum as exc:
            return DecryptReply(refused=f"not the sum of the round's uploads: {exc}")
        if rule == "count":
            weight, how = float(sum(ask.num_examples)), f"purpose={ask.purpose}"
        else:
            weight, how = float(sum(self._weight(n) for n in ask.num_examples)), f"weighting={self.weighting}"
        if abs(total[-1] - weight) > WEIGHT_TOLERANCE:
            return DecryptReply(
                refused=f"the decrypted total weight {total[-1]:.6g} is not the sum {weight:g} of "
                f"the participants' weights ({how}, num_examples {list(ask.num_examples)})"
            )
        return DecryptReply(total=total)
