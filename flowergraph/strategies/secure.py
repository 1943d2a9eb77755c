"""Secure aggregation under CKKS (run config ``secure-agg=ckks``): a part of
:class:`flowergraph.strategies.FederatedStrategy`, for every method whose updates are summed.

Protocol (the client side is :class:`flowergraph.clients.secure.SecureUpdates`, the messages
:mod:`flowergraph.wire.secure`, the arithmetic :mod:`flowergraph.privacy.ckks`). ``k`` is a secret the data
owners derive from their shared secret key (the server cannot compute it); ``v(k, r, p, j)`` and ``c(k, r, p)``
are pseudo-random values in [1, 2) of (round r, partition p, ciphertext j).

1. Once, before round 1: phase ``secure.ckks-setup`` to every client. Each returns its key fingerprint and the
   CKKS context without any key; every client must hold the same key (fingerprints equal), else the run fails.
2. Each round, ``fit`` carries ``secure_agg = "ckks"``; each client p returns ``[w θ, w]`` (its update θ
   flattened, its weight w) in ciphertexts of 2047 values whose last slot holds ``v(k, r, p, j)``, and one more
   ciphertext, its *check ciphertext*, encrypting ``c(k, r, p)`` in every slot.
3. The server parses every ciphertext of an upload (count, parameters, number of values) before adding any: an
   upload with one bad ciphertext is rejected whole and adds nothing. Fewer than ``min_clients``
   (``min-secure-clients``, >= 2) valid uploads: the round is not aggregated and nothing is decrypted.
4. Otherwise the server adds the uploads and sends phase ``secure.ckks-decrypt`` to one of their clients (the
   first by partition id): the summed ciphertexts, the participants' partition ids, their clear
   ``num_examples`` and their check ciphertexts. That client decrypts only if (a) the participants are at least
   its own ``min-secure-clients``, all distinct; (b) every check ciphertext decrypts to its ``c(k, r, p)`` (one
   that does not was encrypted under another key); (c) every summed ciphertext's check slot equals
   ``sum_p v(k, r, p, j)`` over the named participants (so the sum holds exactly one upload of each, every
   chunk in its place: not one client's upload, not an upload twice, not chunks of different subsets); (d) the
   decrypted total weight equals the participants' weights computed from the clear ``num_examples``. It returns
   the plaintext ``[sum w θ, sum w]`` flooded with Gaussian noise of standard deviation 2^-20 and rounded to
   multiples of 2^-20 (raw CKKS decryptions leak the secret key: Li & Micciancio 2021). Otherwise it refuses,
   naming the reason and, for (b), the participants whose check failed.
5. A refusal that names a minority of the participants (not the decrypting client itself): those clients are
   rejected (``rejected`` in the round's record), the sum is rebuilt without them (if at least ``min_clients``
   remain) and sent again. A refusal that names a majority, or the decrypting client itself, means the
   decrypting client's own key differs: the next client decrypts instead. Any other refusal: the round is not
   aggregated. A client that fails to answer is replaced by the next. The new global model is
   ``sum w θ / sum w``, checked to be finite.

On the strategy's side, :meth:`CKKSAggregation.setup` is step 1 and :meth:`CKKSAggregation.round_update` a whole
training round (the fit replies as uploads, their record, steps 3-5): it returns the decrypted mean as one update
for the strategy's ``aggregate_updates``. A method's own encrypted sums (FL-AGCNS's federated scores) use
:meth:`CKKSAggregation.sum_checked`. :func:`check_secagg_sum` is the server's check of what Flower's SecAgg+
workflow hands over (``secure-agg=secagg+``).

What the server learns: the sum over at least ``min-secure-clients`` clients of their weighted updates and of
their weights (as with SecAgg+), the number and size of the ciphertexts; never a single client's update, even
when the other clients of the round failed. The decrypting client learns the same sum, nothing more (it receives
no individual update ciphertext; the check ciphertexts carry only check values). What it does not protect
against: a data owner colluding with the server (the key is shared by the data owners: it can decrypt any
upload), and a server that deviates from the protocol by asking two different clients to decrypt two
overlapping sums of the same round (each is a valid sum; their difference is an update): the clients do not
agree on one participant set per round. A client can still poison the sum with a finite, well-formed update
(robust aggregation needs individual updates and is refused with it); update validation moves to the clients
(an update with NaN/inf is refused before encryption); the server checks the ciphertexts and the decrypted
aggregate. Precision: the average differs from plaintext averaging by ~1e-7 (tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from logging import INFO, WARNING
from typing import Any, Callable, Mapping

import numpy as np
from flwr.common.logger import log

from .. import wire
from ..privacy import ckks
from ..wire.secure import (
    CKKS_DECRYPT,
    CKKS_SETUP,
    CKKS_SUM,
    CKKS_SUMMED,
    CKKS_TOTAL_WEIGHT,
    CKKS_VALUES,
    DecryptReply,
    DecryptRequest,
    EncryptedUpdate,
    SetupReply,
)
from .aggregation import Update
from .common import arrays_bytes, config_bytes, weighted_metric
from .nodes import Node, Reply
from .phases import PhaseError, PhaseMessage, PhaseRunner
from .records import RoundBook


@dataclass
class Upload:
    """One client's fit reply under CKKS, as the strategy received it."""

    proxy: Node
    label: str
    partition: int | None
    arrays: list[Any]
    metrics: dict[str, Any]
    num_examples: int


@dataclass
class _Accepted:
    upload: Upload
    vectors: list  # the parsed chunk ciphertexts
    check: bytes


class CKKSAggregation:
    """The server side of ``secure-agg=ckks`` (see the module docstring); ``min_clients``: the fewest valid
    uploads whose sum is decrypted (``min-secure-clients``)."""

    def __init__(self, phases: PhaseRunner, min_clients: int = 2) -> None:
        if min_clients < 2:
            raise ValueError(f"min_clients must be >= 2 (a sum of one update is that update), got {min_clients}")
        self.phases = phases
        self.min_clients = int(min_clients)
        self.server_ctx = None
        self.fingerprint: str | None = None
        self._round = 0

    def setup(self, clients: list[Node], timeout: float | None, book: RoundBook | None = None) -> dict[str, Any]:
        """Step 1: every client's key fingerprint and the keyless CKKS context; returns the phase's record (also
        written to ``book`` as round 0's record, when given)."""
        phase = self.phases.begin("secure-ckks-setup", 0, timeout=timeout)
        replies = phase.send(CKKS_SETUP, clients, PhaseMessage(), require_all=True)
        setups = {r.client: SetupReply.decode(r.values) for r in replies}
        prints = {client: setup.key_fingerprint for client, setup in setups.items()}
        if len(set(prints.values())) != 1:
            raise RuntimeError(
                f"secure-agg=ckks: clients hold different CKKS keys (fingerprints by client: {prints});"
                f" give every data owner the same key file"
            )
        self.server_ctx = ckks.load_server_context(setups[replies[0].client].server_context)
        self.fingerprint = next(iter(prints.values()))
        record = phase.end()
        log(INFO, "secure-agg=ckks: %d clients share key %s", len(replies), self.fingerprint)
        if book is not None:
            book.write({**record, "elapsed_s": 0.0})
        return record

    def round_update(
        self,
        server_round: int,
        results: list[tuple[Node, Reply]],
        rec: dict[str, Any],
        *,
        sent: Mapping[str, np.ndarray],
        label: Callable[[Node, Any], str],
        partition: Callable[[Node], int | None],
        add_bytes: Callable[..., None],
        min_clients: int | None = None,
        timeout: float | None = None,
    ) -> Update | None:
        """A training round under CKKS, on the strategy's side: each fit reply becomes an :class:`Upload` (its bytes
        go to ``add_bytes``, its size and fit metrics to ``rec["clients"]``, the weighted train loss to ``rec``);
        if at least ``max(min_clients, self.min_clients)`` arrived, their sum is decrypted (:meth:`aggregate`,
        shaped like ``sent``: the arrays every client was sent). Returns the weighted mean as one
        :class:`~flowergraph.strategies.aggregation.Update` labelled ``CKKS_SUM`` (weight 1: the strategy's
        ``aggregate_updates`` adopts it, or steps its model with it), or None when the round is not aggregated
        (logged). ``rec`` gets ``secure_agg`` (the protocol's record), ``rejected`` and ``num_fit`` (the updates
        summed)."""
        uploads: list[Upload] = []
        weights: list[float] = []
        metrics: list[dict[str, Any]] = []
        for proxy, res in results:
            add_bytes(up=arrays_bytes(res.arrays) + config_bytes(res.metrics))
            name = label(proxy, res.metrics)
            arrays: list[Any] = list(res.arrays)
            uploads.append(Upload(proxy, name, partition(proxy), arrays, dict(res.metrics), int(res.num_examples)))
            fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
            rec.setdefault("clients", {}).setdefault(name, {}).update(
                {
                    "num_train": int(res.num_examples),
                    **{f"fit_{k}": v for k, v in fit_metrics.items() if k not in (wire.NUM_TRAIN, CKKS_VALUES)},
                }
            )
            weights.append(float(res.num_examples))
            metrics.append(res.metrics)
        rec["train_loss"] = weighted_metric((_number(m.get(wire.TRAIN_LOSS)), w) for m, w in zip(metrics, weights))
        needed = max(min_clients or 1, self.min_clients)
        mean: list[np.ndarray] | None = None
        info: dict[str, Any] = {"mode": "ckks", "summed": 0}
        if len(uploads) >= needed:
            mean, info = self.aggregate(server_round, uploads, list(sent.values()), timeout)
            add_bytes(down=info.pop("bytes_down", 0), up=info.pop("bytes_up", 0))
        else:
            info["error"] = (
                f"{len(uploads)} encrypted update(s) arrived, fewer than {needed}: a sum of so few is never decrypted"
            )
        rec["secure_agg"] = info
        rec["rejected"] = info.get("rejected", [])
        rec["num_fit"] = int(info.get("summed", 0))
        if mean is None or rec["num_fit"] < needed:
            log(
                WARNING,
                "round %s: %d encrypted updates summed (%d needed)%s; the global model is kept unchanged",
                server_round,
                rec["num_fit"],
                needed,
                f": {info['error']}" if "error" in info else "",
            )
            return None
        total_weight = float(info.get("total_weight", 0.0))
        return Update(
            CKKS_SUM,
            mean,
            int(round(total_weight)),
            {CKKS_TOTAL_WEIGHT: total_weight, CKKS_SUMMED: rec["num_fit"]},
            keys=list(sent),
        )

    def _parse(self, uploads: list[Upload], expected: int, info: dict[str, Any]) -> list[_Accepted]:
        """Every upload parsed whole (step 3); a bad one is recorded under ``rejected`` and adds nothing."""
        slots = ckks.num_slots(self.server_ctx)
        chunks = ckks.checked_chunks(expected, slots)
        parser = ckks.CiphertextSum(self.server_ctx)
        accepted: list[_Accepted] = []
        for up in uploads:
            try:
                if up.partition is None:
                    raise ValueError("its partition id is unknown (no identity reply)")
                enc = EncryptedUpdate.decode(up.arrays, up.metrics)
                if enc.length != expected:
                    raise ValueError(f"{enc.length} encrypted values, expected {expected}")
                if len(enc.chunks) != chunks:
                    raise ValueError(f"{len(enc.chunks)} update ciphertexts, expected {chunks}")
                vectors = parser.parse(enc.chunks, size=slots)
                parser.parse([enc.check], size=slots)
            except Exception as exc:  # noqa: BLE001 (a malformed encrypted update is rejected, not fatal)
                self._reject(info, up, f"malformed encrypted update: {exc}")
                continue
            accepted.append(_Accepted(up, vectors, enc.check))
        return accepted

    def _reject(self, info: dict[str, Any], up: Upload, reason: str) -> None:
        log(WARNING, "round %s: rejected the encrypted update of client %s: %s", self._round, up.label, reason)
        info["rejected"].append({"client": up.label, "reason": reason})

    def aggregate(
        self, server_round: int, uploads: list[Upload], like: list[np.ndarray], timeout: float | None
    ) -> tuple[list[np.ndarray] | None, dict[str, Any]]:
        """Sum the encrypted ``[w θ, w]`` of ``uploads`` and have a client decrypt the sum (steps 3-5);
        ``(the weighted mean shaped like ``like``, or None; record)`` (``record["total_weight"]``: ``sum w``)."""
        expected = int(sum(int(np.prod(a.shape)) for a in like)) + 1
        total, info = self.sum_checked(server_round, uploads, expected, timeout)
        if total is None:
            return None, info
        weight = float(total[-1])
        if not (weight > 0 and np.all(np.isfinite(total))):
            info["error"] = f"the decrypted sum is not usable (total weight {weight})"
            return None, info
        info["total_weight"] = weight
        return ckks.unflatten_arrays(total[:-1] / weight, like), info

    def sum_checked(
        self,
        server_round: int,
        uploads: list[Upload],
        expected: int,
        timeout: float | None,
        purpose: str = "update",
        phase_name: str = "secure-ckks-decrypt",
    ) -> tuple[np.ndarray | None, dict[str, Any]]:
        """Steps 3-5 for any sum: parse ``uploads`` (each an :class:`EncryptedUpdate` of ``expected`` values made
        by :func:`flowergraph.privacy.ckks.encrypt_checked` for ``purpose``), add the valid ones and have one of
        their clients check and decrypt the sum; ``(the plaintext sum of expected values, or None; record)``.
        ``purpose`` (a key of :data:`flowergraph.wire.secure.PURPOSES`) separates a method's own sums from the
        round's update sum: an upload made for one never passes as part of the other."""
        if self.server_ctx is None:
            raise RuntimeError("secure-agg=ckks: the key setup phase has not run")
        slots = ckks.num_slots(self.server_ctx)
        self._round = server_round
        info: dict[str, Any] = {
            "mode": "ckks",
            "values": expected,
            "ciphertexts_per_client": ckks.checked_chunks(expected, slots) + 1,
            "rejected": [],
            "min_secure_clients": self.min_clients,
        }
        if purpose != "update":
            info["purpose"] = purpose
        accepted = self._parse(uploads, expected, info)
        phase = None
        distrusted: set[str] = set()
        total = None
        try:
            while total is None:
                info["summed"] = len(accepted)
                if len(accepted) < self.min_clients:
                    info["error"] = (
                        f"{len(accepted)} valid encrypted upload(s), fewer than min-secure-clients="
                        f"{self.min_clients}: a sum of so few is never decrypted"
                    )
                    return None, info
                acc = ckks.CiphertextSum(self.server_ctx)
                for a in accepted:
                    acc.add_parsed(np.arange(len(a.vectors)), a.vectors)
                index = np.arange(len(accepted[0].vectors))
                request = DecryptRequest(
                    blobs=acc.serialized(index),
                    length=expected,
                    participants=tuple(int(a.upload.partition) for a in accepted),
                    num_examples=tuple(int(a.upload.num_examples) for a in accepted),
                    checks=[a.check for a in accepted],
                    purpose=purpose,
                )
                del acc
                message = PhaseMessage(request.arrays(), request.values())
                if phase is None:
                    phase = self.phases.begin(phase_name, server_round, timeout=timeout)
                outcome = self._ask(phase, server_round, accepted, message, distrusted, info)
                if isinstance(outcome, np.ndarray):
                    total = outcome
                elif outcome:  # participants to reject: rebuild the sum without them
                    bad = set(outcome)
                    for a in accepted:
                        if a.upload.partition in bad:
                            self._reject(
                                info,
                                a.upload,
                                "its check ciphertext does not decrypt to its check value "
                                "under the data owners' key (encrypted under another key?)",
                            )
                    accepted = [a for a in accepted if a.upload.partition not in bad]
                else:
                    return None, info
        finally:
            if phase is not None:
                record = phase.end()
                info.update(
                    decrypt_time_s=record["time_s"], bytes_down=record["bytes_down"], bytes_up=record["bytes_up"]
                )
        if len(total) != expected:
            info["error"] = f"the decrypted sum has {len(total)} values, expected {expected}"
            return None, info
        return total, info

    def _ask(
        self,
        phase,
        server_round: int,
        accepted: list[_Accepted],
        message: PhaseMessage,
        distrusted: set[str],
        info: dict[str, Any],
    ) -> np.ndarray | tuple[int, ...] | None:
        """Ask the accepted clients in turn to decrypt: the plaintext, the partitions to reject, or None (no
        client decrypted; ``info["error"]`` says why)."""
        refusals = info.setdefault("decrypt_refusals", [])
        for a in accepted:
            up = a.upload
            if up.label in distrusted:
                continue
            try:
                (reply,) = phase.send(CKKS_DECRYPT, [up.proxy], message, require_all=True)
                answer = DecryptReply.decode(reply.arrays, reply.values)
            except (PhaseError, ValueError, KeyError) as exc:
                log(
                    WARNING,
                    "round %s: client %s could not decrypt the sum (%s); trying the next",
                    server_round,
                    up.label,
                    exc,
                )
                continue
            if answer.total is not None:
                info["decrypted_by"] = up.label
                return np.asarray(answer.total, dtype=np.float64)
            refusals.append({"client": up.label, "reason": answer.refused})
            log(WARNING, "round %s: client %s refused to decrypt: %s", server_round, up.label, answer.refused)
            if answer.bad:
                if up.partition in answer.bad or 2 * len(answer.bad) >= len(accepted):
                    distrusted.add(up.label)  # its own key differs from the others': ask the next one
                    continue
                return tuple(answer.bad)
            info["error"] = f"client {up.label} refused to decrypt: {answer.refused}"
            return None
        info.setdefault("error", "no client decrypted the sum")
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_secagg_sum(
    server_round: int, results: list[tuple[Node, Reply]], rec: dict[str, Any], clipping_range: float | None
) -> bool:
    """``secure-agg=secagg+``: what Flower's SecAgg+ workflow handed the strategy (one aggregate, copied into every
    result) is recorded under ``rec["secure_agg"]``; whether it is usable. The unmasked average must be finite and,
    as a weighted average of values clipped to ``clipping_range``, inside it (a NaN a client sent, or an overflow,
    lands anywhere after Flower's quantisation); an unusable one is logged and recorded (``not_aggregated``)."""
    rec["secure_agg"] = {"mode": "secagg+", "distinct_payloads": len({_digest(res.arrays) for _, res in results})}
    problem = _secagg_sum_problem(results, clipping_range)
    if problem is None:
        return True
    log(WARNING, "round %s: the SecAgg+ sum is not usable: %s; the model is kept unchanged", server_round, problem)
    rec.update(not_aggregated=f"the unmasked SecAgg+ sum is not usable: {problem}", rejected=[], num_fit=0)
    return False


def _digest(arrays: list[np.ndarray]) -> int:
    """One payload's fingerprint (its arrays' dtypes, shapes and bytes)."""
    return hash(tuple((a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for a in map(np.asarray, arrays)))


def _secagg_sum_problem(results: list[tuple[Node, Reply]], bound: float | None) -> str | None:
    if not results:
        return None
    arrays = results[0][1].arrays
    bad = sum(int(np.size(a) - np.count_nonzero(np.isfinite(a))) for a in arrays)
    if bad:
        return f"{bad} NaN or infinite value(s)"
    if bound is not None and arrays:
        largest = max(float(np.max(np.abs(a))) if np.size(a) else 0.0 for a in arrays)
        if largest > bound * (1 + 1e-3):
            return (
                f"a value of magnitude {largest:.4g}, outside the clipping range {bound:g} that bounds an "
                f"average of clipped updates"
            )
    return None
