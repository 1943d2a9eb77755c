"""Secure aggregation of the training rounds under CKKS (``secure-agg=ckks``): the messages between
:class:`flowergraph.strategies.secure.CKKSAggregation` and :class:`flowergraph.clients.secure.SecureUpdates`.

* fit config :data:`SECURE_AGG` = ``"ckks"``: the client returns the encryption of ``[w theta, w]`` as the arrays
  ``[lengths int64, blob uint8]`` and the metric :data:`CKKS_VALUES` (the plaintext vector's length);
* phase :data:`CKKS_SETUP`: server -> client nothing; client -> server :class:`SetupReply`;
* phase :data:`CKKS_DECRYPT`: server -> client :class:`DecryptRequest`; client -> server :class:`DecryptReply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

CKKS_SETUP = "secure.ckks-setup"
CKKS_DECRYPT = "secure.ckks-decrypt"
SECURE_AGG = "secure_agg"  # fit config: "ckks" asks for an encrypted update
CKKS_VALUES = "ckks_values"  # fit metric: the length of the encrypted vector
# The strategy's view of a decrypted round (never on the wire): the decrypted weighted mean reaches the method's
# aggregate_updates as one update labelled CKKS_SUM whose metrics hold the total weight and the number summed.
CKKS_SUM = "ckks-sum"
CKKS_TOTAL_WEIGHT = "ckks_total_weight"
CKKS_SUMMED = "ckks_summed"


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
class DecryptRequest:
    """The summed ciphertexts (serialised, concatenated: ``lengths``, ``blob``) and the plaintext length."""

    lengths: np.ndarray
    blob: np.ndarray
    length: int

    def arrays(self) -> list[np.ndarray]:
        return [self.lengths, self.blob]

    def values(self) -> dict[str, Any]:
        return {"length": int(self.length)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "DecryptRequest":
        if len(arrays) != 2:
            raise ValueError(f"a decrypt request carries 2 arrays (lengths, blob), got {len(arrays)}")
        return cls(lengths=arrays[0], blob=arrays[1], length=int(values["length"]))


@dataclass(frozen=True)
class DecryptReply:
    """The decrypted sum."""

    total: np.ndarray

    def arrays(self) -> list[np.ndarray]:
        return [self.total]

    @classmethod
    def decode(cls, arrays: list[np.ndarray]) -> "DecryptReply":
        if len(arrays) != 1:
            raise ValueError(f"a decrypt reply carries 1 array, got {len(arrays)}")
        return cls(total=arrays[0])
