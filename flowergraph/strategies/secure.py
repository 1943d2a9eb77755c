"""Secure aggregation under CKKS (run config ``secure-agg=ckks``): a part of
:class:`flowergraph.strategies.FederatedStrategy`, for every method whose updates are summed.

Protocol (the client side is :class:`flowergraph.clients.secure.SecureUpdates`):

1. Once, before round 1: phase ``secure.ckks-setup`` to every client. Each returns its key fingerprint and the
   CKKS context without any key; every client must hold the same key (fingerprints equal), else the run fails.
2. Each round, ``fit`` carries ``secure_agg = "ckks"``; each client returns the encryption of ``[w θ, w]`` (its
   update θ flattened, its weight w) instead of θ.
3. The server adds the ciphertexts of every client whose reply has the expected length (it cannot read them),
   then sends the sums to one of those clients in phase ``secure.ckks-decrypt`` (the first by partition id; if
   it fails, the next), which returns the plaintext ``[sum w θ, sum w]``. The new global model is
   ``sum w θ / sum w``, checked to be finite.

What the server learns: the sum over the round's clients of their weighted updates and of their weights (as
with SecAgg+), the number and size of the ciphertexts; never a single client's update. The decrypting client
learns the same sum, nothing more (it receives no individual ciphertext). As with every CKKS use here, a data
owner colluding with the server could decrypt any client's upload: the key is shared by the data owners. Update
validation moves to the clients (an update with NaN/inf is refused before encryption); the server checks the
ciphertext count and the decrypted aggregate. Robust aggregation needs individual updates and is refused with
it; precision: the average differs from plaintext averaging by ~1e-7 (tested).
"""

from __future__ import annotations

import math
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.common.logger import log
from flwr.server.client_proxy import ClientProxy

from ..wire.secure import CKKS_DECRYPT, CKKS_SETUP, DecryptReply, DecryptRequest, SetupReply
from ..privacy import ckks
from ..privacy.packing import pack_blobs, unpack_blobs
from .phases import PhaseError, PhaseMessage, PhaseRunner


class CKKSAggregation:
    """The server side of ``secure-agg=ckks`` (see the module docstring)."""

    def __init__(self, phases: PhaseRunner) -> None:
        self.phases = phases
        self.server_ctx = None
        self.fingerprint: str | None = None

    def setup(self, clients: list[ClientProxy], timeout: float | None) -> dict[str, Any]:
        phase = self.phases.begin("secure-ckks-setup", 0, timeout=timeout)
        replies = phase.send(CKKS_SETUP, clients, PhaseMessage(), require_all=True)
        setups = {r.client: SetupReply.decode(r.values) for r in replies}
        prints = {client: setup.key_fingerprint for client, setup in setups.items()}
        if len(set(prints.values())) != 1:
            raise RuntimeError(f"secure-agg=ckks: clients hold different CKKS keys (fingerprints by client: {prints});"
                               f" give every data owner the same key file")
        self.server_ctx = ckks.load_server_context(setups[replies[0].client].server_context)
        self.fingerprint = next(iter(prints.values()))
        record = phase.end()
        log(INFO, "secure-agg=ckks: %d clients share key %s", len(replies), self.fingerprint)
        return record

    def aggregate(self, server_round: int, contributions: list[tuple[ClientProxy, str, list[np.ndarray], int]],
                  like: list[np.ndarray], timeout: float | None) -> tuple[list[np.ndarray] | None, dict[str, Any]]:
        """Sum the encrypted ``[w θ, w]`` of ``contributions`` (proxy, label, arrays [lengths, blob], values) and
        have a client decrypt the sum; ``(new global arrays or None, record)``."""
        if self.server_ctx is None:
            raise RuntimeError("secure-agg=ckks: the key setup phase has not run")
        expected = int(sum(int(np.prod(a.shape)) for a in like)) + 1
        slots = ckks.num_slots(self.server_ctx)
        chunks = max(1, math.ceil(expected / slots))
        acc = ckks.CiphertextSum(self.server_ctx)
        used, info = [], {"mode": "ckks", "values": expected, "ciphertexts_per_client": chunks, "rejected": []}
        for proxy, label, arrays, values in contributions:
            try:
                if values != expected or len(arrays) != 2:
                    raise ValueError(f"{values} encrypted values, expected {expected}")
                blobs = unpack_blobs(*arrays)
                if len(blobs) != chunks:
                    raise ValueError(f"{len(blobs)} ciphertexts, expected {chunks}")
                acc.add(np.arange(chunks), blobs)
            except Exception as exc:  # noqa: BLE001 (a malformed encrypted update is rejected, not fatal)
                log(WARNING, "round %s: rejected the encrypted update of client %s: %s", server_round, label, exc)
                info["rejected"].append({"client": label, "reason": str(exc)})
                continue
            used.append((proxy, label))
        info["summed"] = len(used)
        if not used:
            return None, info
        total, decrypted = self.decrypt_sum(server_round, acc, chunks, expected, [p for p, _ in used], timeout)
        info.update(decrypted)
        if total is None:
            return None, info
        weight = float(total[-1])
        if not (weight > 0 and np.all(np.isfinite(total))):
            info["error"] = f"the decrypted sum is not usable (total weight {weight})"
            return None, info
        info["total_weight"] = weight
        return ckks.unflatten_arrays(total[:-1] / weight, like), info

    def decrypt_sum(self, server_round: int, acc: "ckks.CiphertextSum", chunks: int, length: int,
                    decryptors: list[ClientProxy], timeout: float | None,
                    phase_name: str = "secure-ckks-decrypt") -> tuple[np.ndarray | None, dict[str, Any]]:
        """Send the summed ciphertexts ``0..chunks-1`` of ``acc`` to the first of ``decryptors`` that answers
        (phase ``phase_name``); ``(the plaintext sum of length values, or None; what happened)``."""
        request = DecryptRequest(*pack_blobs(acc.serialized(np.arange(chunks))), length=length)
        message = PhaseMessage(request.arrays(), request.values())
        phase = self.phases.begin(phase_name, server_round, timeout=timeout)
        total, info = None, {}
        for proxy in decryptors:  # the first that answers decrypts
            label = self.phases.directory.label(proxy)
            try:
                (reply,) = phase.send(CKKS_DECRYPT, [proxy], message, require_all=True)
                total = DecryptReply.decode(reply.arrays).total
                info["decrypted_by"] = label
                break
            except PhaseError as exc:
                log(WARNING, "round %s: client %s could not decrypt the sum (%s); trying the next", server_round,
                    label, exc)
        record = phase.end()
        info.update(decrypt_time_s=record["time_s"], bytes_down=record["bytes_down"], bytes_up=record["bytes_up"])
        if total is None or len(total) != length:
            info["error"] = "no client decrypted the sum"
            return None, info
        return np.asarray(total, dtype=np.float64), info

    def sum_vectors(self, server_round: int, contributions: list[tuple[ClientProxy, str, np.ndarray, np.ndarray]],
                    length: int, timeout: float | None, phase_name: str = "secure-ckks-decrypt"
                    ) -> tuple[np.ndarray | None, dict[str, Any]]:
        """Any method's encrypted vectors: add the ciphertexts of ``contributions`` (proxy, label, the packed
        ``lengths`` and ``blob`` of :func:`flowergraph.privacy.ckks.encrypt_vector` of ``length`` values) without
        a key and have one contributor decrypt the sum; ``(the plaintext sum or None, record)``. A contribution
        with another number of ciphertexts is rejected (named in the record), as in :meth:`aggregate`."""
        if self.server_ctx is None:
            raise RuntimeError("secure-agg=ckks: the key setup phase has not run")
        chunks = max(1, math.ceil(length / ckks.num_slots(self.server_ctx)))
        acc = ckks.CiphertextSum(self.server_ctx)
        used: list[ClientProxy] = []
        info: dict[str, Any] = {"mode": "ckks", "values": length, "ciphertexts_per_client": chunks, "rejected": []}
        for proxy, label, lengths, blob in contributions:
            try:
                blobs = unpack_blobs(lengths, blob)
                if len(blobs) != chunks:
                    raise ValueError(f"{len(blobs)} ciphertexts, expected {chunks}")
                acc.add(np.arange(chunks), blobs)
            except Exception as exc:  # noqa: BLE001 (a malformed encrypted reply is rejected, not fatal)
                log(WARNING, "round %s: rejected the encrypted vector of client %s: %s", server_round, label, exc)
                info["rejected"].append({"client": label, "reason": str(exc)})
                continue
            used.append(proxy)
        info["summed"] = len(used)
        if not used:
            return None, info
        total, decrypted = self.decrypt_sum(server_round, acc, chunks, length, used, timeout, phase_name)
        info.update(decrypted)
        return total, info
