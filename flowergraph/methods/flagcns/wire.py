"""FL-AGCNS on the wire: every key and message between :class:`flowergraph.methods.flagcns.server.FLAGCNSStrategy`
and :class:`flowergraph.methods.flagcns.client.FLAGCNSClient`, one dataclass per message with ``encode`` / ``decode``
(plain values and arrays only: this module needs neither torch nor Flower's app layer). The protocol, who sends
what and what the server learns are in :mod:`flowergraph.methods.flagcns.server` and ``docs/methods/flagcns.md``.

Training rounds travel as Flower ``fit`` / ``evaluate`` messages with named arrays (:data:`flowergraph.wire.KEYS`):

* search round (one SuperNet step): the config carries :class:`SearchStep` (the sampled codes); the arrays are
  the SuperNet parameters those codes train; the reply is the client's gradients of the same names.
* retraining round (one epoch of the chosen architecture): the config carries :class:`Retrain` (the code); the
  arrays are the architecture's trained parameters; the reply is its gradients of the same names.

Phases (``get_properties`` messages; :mod:`flowergraph.wire`'s phase encoding):

* :data:`EVALUATE`: :class:`EvaluateRequest` (codes; the SuperNet part they use travels as the phase's model) ->
  :class:`Scores` (each code's validation loss and accuracy, the validation-set size) or, in secure mode,
  :class:`EncryptedScores` (the CKKS encryption of :func:`score_vector`, summed by the server without a key).
* :data:`EVOLVE`: :class:`EvolveRequest` (the controller's P_FL and the population; the whole SuperNet as the
  model) -> :class:`EvolveReply` (the client's ranked population P_{G_i}).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ...wire.secure import EncryptedUpdate

Code = tuple[int, ...]
Values = dict[str, Any]

# fit / evaluate config keys
CODES = "flagcns.codes"  # search round: JSON list of the sampled codes
EPOCH = "flagcns.epoch"  # search round: the epoch t (1-based) and the step in it (1-based)
STEP = "flagcns.step"
ARCHITECTURE = "flagcns.architecture"  # retraining round: JSON code of the architecture being retrained
# evaluation metric: seconds of one evaluation-mode forward over the client's graph (inference time)
INFERENCE_S = "inference_s"

# phase kinds (messages) and phase names (records)
EVALUATE = "flagcns.evaluate"
EVOLVE = "flagcns.evolve"
FEO_PHASE = "flagcns-feo"  # one FEO generation: EVALUATE then EVOLVE
FINAL_PHASE = "flagcns-final"  # Algorithm 2 lines 19-22: EVALUATE of the final population
DECRYPT_PHASE = "flagcns-decrypt"  # secure mode: the phase (record name) in which one client decrypts the summed scores
SCORES_PURPOSE = "flagcns.scores"  # secure mode: the check values of the score uploads (wire/secure.py: PURPOSES)


def encode_codes(codes: Sequence[Sequence[int]]) -> str:
    """Codes as they travel: a JSON list of integer lists."""
    return json.dumps([[int(g) for g in code] for code in codes])


def decode_codes(text: Any) -> list[Code]:
    """The codes :func:`encode_codes` wrote; ValueError for anything else."""
    try:
        raw = json.loads(text)
    except (TypeError, ValueError):
        raise ValueError(f"codes are a JSON list of integer lists, got {str(text)[:80]!r}") from None
    if not isinstance(raw, list) or not all(isinstance(c, list) and all(isinstance(g, int) for g in c) for c in raw):
        raise ValueError(f"codes are a JSON list of integer lists, got {str(text)[:80]!r}")
    return [tuple(c) for c in raw]


@dataclass(frozen=True)
class SearchStep:
    """Server -> client, in a search round's fit config: the codes sampled for this SuperNet step."""

    codes: tuple[Code, ...]
    epoch: int
    step: int

    def config(self) -> Values:
        return {CODES: encode_codes(self.codes), EPOCH: int(self.epoch), STEP: int(self.step)}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "SearchStep | None":
        if CODES not in config:
            return None
        return cls(tuple(decode_codes(config[CODES])), int(config.get(EPOCH, 0)), int(config.get(STEP, 0)))


@dataclass(frozen=True)
class Retrain:
    """Server -> client, in a retraining round's fit / evaluate config: the architecture being retrained."""

    architecture: Code

    def config(self) -> Values:
        return {ARCHITECTURE: encode_codes([self.architecture])}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Retrain | None":
        if ARCHITECTURE not in config:
            return None
        codes = decode_codes(config[ARCHITECTURE])
        if len(codes) != 1:
            raise ValueError(f"{ARCHITECTURE} names {len(codes)} codes; a retraining round has one")
        return cls(codes[0])


@dataclass(frozen=True)
class EvaluateRequest:
    """Server -> client (phase :data:`EVALUATE`): score these codes on your validation nodes with the SuperNet
    weights that travel as the phase's model; ``encrypted``: answer with :class:`EncryptedScores`."""

    codes: tuple[Code, ...]
    encrypted: bool = False

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {"codes": encode_codes(self.codes), "encrypted": bool(self.encrypted)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "EvaluateRequest":
        return cls(tuple(decode_codes(values["codes"])), bool(values.get("encrypted", False)))


@dataclass(frozen=True)
class Scores:
    """Client -> server (plaintext): per requested code, its mean validation cross-entropy and accuracy
    (NaN for a client without validation nodes), and the client's number of validation nodes."""

    losses: np.ndarray
    accuracies: np.ndarray
    num_val: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return (
            [np.asarray(self.losses, np.float64), np.asarray(self.accuracies, np.float64)],
            {"num_val": int(self.num_val)},
        )

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "Scores":
        if len(arrays) != 2 or arrays[0].shape != arrays[1].shape or arrays[0].ndim != 1:
            raise ValueError(f"FL-AGCNS scores are 2 vectors of one length, got {[a.shape for a in arrays]}")
        return cls(np.asarray(arrays[0], np.float64), np.asarray(arrays[1], np.float64), int(values["num_val"]))


@dataclass(frozen=True)
class EncryptedScores:
    """Client -> server (secure mode): :func:`score_vector` encrypted as a checked upload for the sum
    :data:`SCORES_PURPOSE` of the phase's round (:func:`flowergraph.privacy.ckks.encrypt_checked`; the server sums
    them and one client checks and decrypts the sum, as a training round's updates:
    :meth:`flowergraph.strategies.secure.CKKSAggregation.sum_checked`), and ``num_val``, the client's
    validation-set size in clear (the decrypting client checks the sum's last value against their total)."""

    upload: EncryptedUpdate
    num_val: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return self.upload.arrays(), {**self.upload.metrics(), "num_val": int(self.num_val), "encrypted": True}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "EncryptedScores":
        if not values.get("encrypted"):
            raise ValueError("encrypted FL-AGCNS scores carry encrypted=true")
        return cls(EncryptedUpdate.decode(arrays, values), int(values["num_val"]))


def score_vector(losses: Sequence[float], accuracies: Sequence[float], num_val: int) -> np.ndarray:
    """What a client encrypts in secure mode, for K codes: ``[v L_1..v L_K, v A_1..v A_K, b_1..b_K, v]`` with
    ``v`` its validation-set size, ``L_j`` / ``A_j`` code j's validation loss / accuracy and ``b_j`` = 1 when
    either is not finite (then both enter as 0). Summed over clients it gives the FLL numerators, the total
    validation size and, per code, how many clients could not score it."""
    losses = np.asarray(losses, np.float64)
    accs = np.asarray(accuracies, np.float64)
    v = float(num_val)
    bad = ~(np.isfinite(losses) & np.isfinite(accs)) if v > 0 else np.zeros(len(losses), bool)
    return np.concatenate(
        [
            np.where(bad, 0.0, v * np.nan_to_num(losses)),
            np.where(bad, 0.0, v * np.nan_to_num(accs)),
            bad.astype(np.float64),
            [v],
        ]
    )


def scores_from_sum(total: np.ndarray, count: int) -> list[tuple[float, float]]:
    """``(FLL, federated validation accuracy)`` of each of ``count`` codes from the decrypted sum of the clients'
    :func:`score_vector` (NaN for a code some client could not score, or when no client has validation nodes)."""
    total = np.asarray(total, np.float64)
    if len(total) != 3 * count + 1:
        raise ValueError(f"a sum of score vectors for {count} codes has {3 * count + 1} values, got {len(total)}")
    v = float(total[-1])
    out = []
    for j in range(count):
        if v <= 0 or total[2 * count + j] > 0.5:
            out.append((math.nan, math.nan))
        else:
            out.append((float(total[j] / v), float(total[count + j] / v)))
    return out


@dataclass(frozen=True)
class EvolveRequest:
    """Server -> client (phase :data:`EVOLVE`): the controller's ranked P_FL (Algorithm 1 step 3: the client
    evolves ``P_{G_i} u P_FL``) and the population P, from which a client's EA starts the first time; the whole
    SuperNet travels as the phase's model (the client's pool is drawn on the client)."""

    p_fl: tuple[Code, ...]
    population: tuple[Code, ...]
    epoch: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {
            "p_fl": encode_codes(self.p_fl),
            "population": encode_codes(self.population),
            "epoch": int(self.epoch),
        }

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "EvolveRequest":
        return cls(tuple(decode_codes(values["p_fl"])), tuple(decode_codes(values["population"])), int(values["epoch"]))


@dataclass(frozen=True)
class EvolveReply:
    """Client -> server: its EA's new population P_{G_i}, best first (by its own validation loss or accuracy),
    its training-set size (its weight in the population rule) and how many codes it evaluated."""

    ranked: tuple[Code, ...]
    num_train: int
    evaluations: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {
            "ranked": encode_codes(self.ranked),
            "num_train": int(self.num_train),
            "evaluations": int(self.evaluations),
        }

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "EvolveReply":
        return cls(tuple(decode_codes(values["ranked"])), int(values["num_train"]), int(values["evaluations"]))
