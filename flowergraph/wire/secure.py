"""Secure aggregation of the training rounds under CKKS (``secure-agg=ckks``): the messages between
:class:`flowergraph.strategies.secure.CKKSAggregation` and :class:`flowergraph.clients.secure.SecureUpdates`
(the protocol, and what each check defends against, is in :mod:`flowergraph.strategies.secure`).

* fit config :data:`SECURE_AGG` = ``"ckks"``: the client returns an :class:`EncryptedUpdate`: the arrays
  ``[lengths int64, blob uint8]`` (its serialised ciphertexts: the checked chunks of ``[w theta, w]``, then its
  check ciphertext) and the metric :data:`CKKS_VALUES` (the plaintext vector's length);
* phase :data:`CKKS_SETUP`: server -> client nothing; client -> server :class:`SetupReply`;
* phase :data:`CKKS_DECRYPT` (its round is the training round): server -> client :class:`DecryptRequest`;
  client -> server :class:`DecryptReply` (the flooded, rounded sum, or a refusal with its reason and the
  participants whose check ciphertext failed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..privacy.packing import pack_blobs, unpack_blobs

CKKS_SETUP = "secure.ckks-setup"
CKKS_DECRYPT = "secure.ckks-decrypt"
SECURE_AGG = "secure_agg"  # fit config: "ckks" asks for an encrypted update
CKKS_VALUES = "ckks_values"  # fit metric: the length of the encrypted vector
# The strategy's view of a decrypted round (never on the wire): the decrypted weighted mean reaches the method's
# aggregate_updates as one update labelled CKKS_SUM whose metrics hold the total weight and the number summed.
CKKS_SUM = "ckks-sum"
# What a sum may be, and what its last value (the total weight) must equal on the decrypting client:
# "update": sum over participants of the weight `weighting` gives their num_examples (a training round);
# "flagcns.scores": sum of their num_examples (FL-AGCNS's validation-size weighted scores, methods/flagcns/wire.py).
PURPOSES = {"update": "weighting", "flagcns.scores": "count"}
CKKS_TOTAL_WEIGHT = "ckks_total_weight"
CKKS_SUMMED = "ckks_summed"


def _int_list(text: Any, what: str) -> tuple[int, ...]:
    try:
        values = json.loads(str(text))
        if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError
    except ValueError:
        raise ValueError(f"{what} must be a JSON list of integers, got {str(text)[:80]!r}") from None
    return tuple(values)


@dataclass(frozen=True)
class SetupReply:
    """A client's key fingerprint and the CKKS context without any key (what the server adds ciphertexts with)."""

    key_fingerprint: str
    server_context: bytes

    def values(self) -> dict[str, Any]:
        return {"key_fingerprint": self.key_fingerprint, "server_context": self.server_context}

    @classmethod
    def decode(cls, values: Mapping[str, Any]) -> "SetupReply":
        return cls(key_fingerprint=str(values["key_fingerprint"]), server_context=bytes(values["server_context"]))


@dataclass(frozen=True)
class EncryptedUpdate:
    """A client's fit reply under CKKS: ``blobs`` = the ciphertexts of its update's chunks, then its check
    ciphertext; ``length``: the plaintext vector's length (``[w theta, w]``)."""

    blobs: list[bytes]
    length: int

    @property
    def chunks(self) -> list[bytes]:
        return self.blobs[:-1]

    @property
    def check(self) -> bytes:
        return self.blobs[-1]

    def arrays(self) -> list[np.ndarray]:
        return list(pack_blobs(self.blobs))

    def metrics(self) -> dict[str, Any]:
        return {CKKS_VALUES: int(self.length)}

    @classmethod
    def decode(cls, arrays: list[Any], metrics: Mapping[str, Any]) -> "EncryptedUpdate":
        """ValueError for a reply that is not an encrypted update."""
        if len(arrays) != 2 or not all(isinstance(a, np.ndarray) for a in arrays):
            raise ValueError(f"an encrypted update is 2 arrays (lengths, blob), got {len(arrays)}")
        if CKKS_VALUES not in metrics:
            raise ValueError(f"an encrypted update carries the metric {CKKS_VALUES!r}")
        lengths, blob = arrays
        if lengths.dtype.kind not in "iu" or blob.dtype != np.uint8:
            raise ValueError(f"an encrypted update is (int64 lengths, uint8 blob), got ({lengths.dtype}, {blob.dtype})")
        blobs = unpack_blobs(lengths, blob)
        if len(blobs) < 2:
            raise ValueError(f"{len(blobs)} ciphertexts: an encrypted update has at least one chunk and a check")
        return cls(blobs=blobs, length=int(metrics[CKKS_VALUES]))


@dataclass(frozen=True)
class DecryptRequest:
    """What the decrypting client is asked to decrypt: ``blobs``, the summed ciphertexts; ``length``, the
    plaintext length; ``participants``, the partition ids whose uploads the server says it summed, with each one's
    clear ``num_examples`` (its fit reply's) and its ``checks`` ciphertext (in the same order); ``purpose``, which
    sum it is (:data:`PURPOSES`: a training round's update sum, or a method's own sum). The round is the phase's
    round."""

    blobs: list[bytes]
    length: int
    participants: tuple[int, ...]
    num_examples: tuple[int, ...]
    checks: list[bytes] = field(default_factory=list)
    purpose: str = "update"

    def __post_init__(self) -> None:
        if not len(self.participants) == len(self.num_examples) == len(self.checks):
            raise ValueError(
                f"a decrypt request names {len(self.participants)} participants with "
                f"{len(self.num_examples)} num_examples and {len(self.checks)} check ciphertexts"
            )

    def arrays(self) -> list[np.ndarray]:
        return [*pack_blobs(self.blobs), *pack_blobs(self.checks)]

    def values(self) -> dict[str, Any]:
        return {
            "length": int(self.length),
            "participants": json.dumps([int(p) for p in self.participants]),
            "num_examples": json.dumps([int(n) for n in self.num_examples]),
            "purpose": self.purpose,
        }

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "DecryptRequest":
        if len(arrays) != 4:
            raise ValueError(
                f"a decrypt request carries 4 arrays (sum lengths, sum blob, check lengths, check "
                f"blob), got {len(arrays)}"
            )
        return cls(
            blobs=unpack_blobs(arrays[0], arrays[1]),
            length=int(values["length"]),
            participants=_int_list(values["participants"], "participants"),
            num_examples=_int_list(values["num_examples"], "num_examples"),
            checks=unpack_blobs(arrays[2], arrays[3]),
            purpose=str(values.get("purpose", "update")),
        )


@dataclass(frozen=True)
class DecryptReply:
    """The decrypted sum ``[sum w theta, sum w]`` (flooded with noise and rounded), or a refusal: ``refused`` (the
    reason) and ``bad``, the participants whose check ciphertext did not decrypt to their check value."""

    total: np.ndarray | None = None
    refused: str = ""
    bad: tuple[int, ...] = ()

    def arrays(self) -> list[np.ndarray]:
        return [] if self.total is None else [np.asarray(self.total, dtype=np.float64)]

    def values(self) -> dict[str, Any]:
        return {"refused": self.refused, "bad": json.dumps([int(p) for p in self.bad])} if self.refused else {}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any] | None = None) -> "DecryptReply":
        values = values or {}
        if values.get("refused"):
            return cls(refused=str(values["refused"]), bad=_int_list(values.get("bad", "[]"), "bad"))
        if len(arrays) != 1:
            raise ValueError(f"a decrypt reply carries 1 array, got {len(arrays)}")
        return cls(total=arrays[0])
