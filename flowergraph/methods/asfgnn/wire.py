"""ASFGNN on the wire: every key and message between :class:`flowergraph.methods.asfgnn.server.ASFGNNStrategy` and
:class:`flowergraph.methods.asfgnn.client.ASFGNNClient` (the protocol and what each party learns are in
:mod:`flowergraph.methods.asfgnn.server`).

A run is a sequence of **trials** (one hyper-parameter configuration each); a trial is ``T`` training rounds and
one closing evaluation round. Per round:

* ``fit`` config (server -> each client, one config per client): :class:`TrialInstruction` (the trial, the
  round within it, whether to train, and *this client's* hyper-parameters) besides the base keys
  (``server_round``, ``fg.keys``: the names of the arrays sent, see :mod:`flowergraph.wire`);
* ``fit`` arrays (server -> client): the global model, named: the shared part (``fgnn.*`` for SFGNN, every
  ``sgnn.*`` and ``fgnn.*`` array for FL, nothing for SP/CM) and the three **statistics arrays** below;
* ``fit`` reply (client -> server): the same names, the shared part after local training and the client's
  statistics (:class:`Statistics`), ``num_examples`` = the weight of its update (1; FL: its training-node count
  under ``weighting=train-size``), metrics ``{partition_id, fg.keys}`` only. Under ``secure-agg`` the whole reply
  is masked (SecAgg+) or encrypted (CKKS), statistics included;
* phase :data:`INIT` (server -> one client, at the start of each trial): :class:`InitRequest` ->
  :class:`InitReply` (the seeded initial shared part for the trial's hyper-parameters, and J).

Statistics arrays (float64, weighted by the update's weight ``w`` like every other array, so each is divided by
``w`` on the client and the server divides the aggregate by :data:`UNIT`'s aggregate, which gives the plain sum
over clients divided by their number)::

    asfgnn.unit      [1]   1 / w
    asfgnn.counts    [J]   N_i / (COUNT_SCALE w)      N_i: the client's training labels per class (Algorithm 2 l. 6)
    asfgnn.metrics   [M]   the fields of METRIC_FIELDS, each / (scale w)

Downstream (server -> client) the same names carry the server's values: ``asfgnn.counts`` = N_s / COUNT_SCALE
(the global label counts, summed over the clients of the last aggregation; the client rounds ``x * COUNT_SCALE``
back to integers), ``asfgnn.metrics`` zeros (the averages stay with the server: see
:meth:`RoundAggregate.downstream`), ``asfgnn.unit`` = [1]. Counts are scaled so that
they stay inside SecAgg+'s clipping range (default 8: up to 8,000 training labels per class and client).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

# ------------------------------------------------------------------------------------------ fit config keys
TRIAL = "asfgnn.trial"  # int: the trial index (0-based)
TRIAL_ROUND = "asfgnn.trial-round"  # int: 1..T training rounds, T+1 the closing evaluation round
TRAIN = "asfgnn.train"  # bool: False in the closing evaluation round (evaluate, do not train)
HP_PREFIX = "asfgnn.hp."  # this client's hyper-parameters: asfgnn.hp.hidden, .depth, .dropout, .l2, .lr
HP_KEYS = ("hidden", "depth", "dropout", "l2", "lr")

# ------------------------------------------------------------------------------------- statistics arrays
UNIT = "asfgnn.unit"
COUNTS = "asfgnn.counts"
METRICS = "asfgnn.metrics"
STAT_NAMES = (UNIT, COUNTS, METRICS)
COUNT_SCALE = 1000.0
# (field, scale): what a client reports about the model that entered the round (its evaluation before training;
# in the closing round, the trial's final model) and about its training step. Accuracies of an empty node set are
# reported as 0 with has_* = 0, so averages skip that client (as the reference loops skip NaN).
METRIC_FIELDS: tuple[tuple[str, float], ...] = (
    ("val_accuracy", 1.0),
    ("has_val", 1.0),
    ("accuracy", 1.0),
    ("has_test", 1.0),
    ("train_accuracy", 1.0),
    ("has_train", 1.0),
    ("train_loss", 1.0),
    ("has_loss", 1.0),
    ("val_correct", COUNT_SCALE),
    ("num_val", COUNT_SCALE),
    ("test_correct", COUNT_SCALE),
    ("num_test", COUNT_SCALE),
    # CM only (one client, the union graph): the mean over the data owners of the accuracy on their nodes, the
    # paper's "average of metrics in all clients"; any other client reports its own accuracies here.
    ("owner_mean_val", 1.0),
    ("owner_mean_test", 1.0),
)
METRIC_NAMES = tuple(name for name, _ in METRIC_FIELDS)

# -------------------------------------------------------------------------------------------- phase INIT
INIT = "asfgnn.init"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(float(x))


@dataclass(frozen=True)
class TrialInstruction:
    """What one client is told in a ``fit`` message: the trial, the round within it (1-based; ``T + 1`` is the
    closing evaluation round), whether it trains, and its own hyper-parameters."""

    trial: int
    trial_round: int
    train: bool
    hyperparams: Mapping[str, Any]

    def encode(self) -> dict[str, Any]:
        missing = [k for k in HP_KEYS if k not in self.hyperparams]
        if missing:
            raise ValueError(f"hyper-parameters lack {', '.join(missing)}")
        out: dict[str, Any] = {TRIAL: int(self.trial), TRIAL_ROUND: int(self.trial_round), TRAIN: bool(self.train)}
        out.update(
            {
                HP_PREFIX + "hidden": int(self.hyperparams["hidden"]),
                HP_PREFIX + "depth": int(self.hyperparams["depth"]),
                HP_PREFIX + "dropout": float(self.hyperparams["dropout"]),
                HP_PREFIX + "l2": float(self.hyperparams["l2"]),
                HP_PREFIX + "lr": float(self.hyperparams["lr"]),
            }
        )
        return out

    @classmethod
    def decode(cls, config: Mapping[str, Any]) -> "TrialInstruction":
        missing = [k for k in (TRIAL, TRIAL_ROUND, TRAIN, *(HP_PREFIX + h for h in HP_KEYS)) if k not in config]
        if missing:
            raise ValueError(f"an ASFGNN fit config lacks {', '.join(missing)}")
        hp = {h: config[HP_PREFIX + h] for h in HP_KEYS}
        hp = {
            "hidden": int(hp["hidden"]),
            "depth": int(hp["depth"]),
            "dropout": float(hp["dropout"]),
            "l2": float(hp["l2"]),
            "lr": float(hp["lr"]),
        }
        return cls(int(config[TRIAL]), int(config[TRIAL_ROUND]), bool(config[TRAIN]), hp)


@dataclass(frozen=True)
class InitRequest:
    """Server -> one client, when a trial starts: build your model for these hyper-parameters (the seeded
    initialisation) and send the part the clients share."""

    trial: int
    hyperparams: Mapping[str, Any]

    def values(self) -> dict[str, Any]:
        encoded = TrialInstruction(self.trial, 1, True, self.hyperparams).encode()
        return {"trial": int(self.trial), **{k: v for k, v in encoded.items() if k.startswith(HP_PREFIX)}}

    @classmethod
    def decode(cls, values: Mapping[str, Any]) -> "InitRequest":
        config = {
            TRIAL: values["trial"],
            TRIAL_ROUND: 1,
            TRAIN: True,
            **{k: v for k, v in values.items() if k.startswith(HP_PREFIX)},
        }
        instruction = TrialInstruction.decode(config)
        return cls(instruction.trial, instruction.hyperparams)


@dataclass(frozen=True)
class InitReply:
    """Client -> server: the initial shared arrays, their names, and the number of classes J (the statistics'
    width)."""

    arrays: Mapping[str, np.ndarray]
    num_classes: int

    def encode(self) -> tuple[list[np.ndarray], dict[str, Any]]:
        import json

        return [np.asarray(a) for a in self.arrays.values()], {
            "keys": json.dumps(list(self.arrays)),
            "num_classes": int(self.num_classes),
        }

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "InitReply":
        import json

        keys = json.loads(str(values["keys"]))
        if not isinstance(keys, list) or len(keys) != len(arrays):
            raise ValueError(f"an ASFGNN init reply names {keys!r} for {len(arrays)} arrays")
        return cls(dict(zip(keys, arrays)), int(values["num_classes"]))


@dataclass(frozen=True)
class Statistics:
    """A client's statistics for one round: its label counts ``N_i`` (int, length J) and its metrics (the fields of
    :data:`METRIC_NAMES`; accuracies of empty sets as NaN). :meth:`encode` gives the three arrays scaled by the
    update's weight (see the module docstring)."""

    counts: np.ndarray
    metrics: Mapping[str, float]

    def encode(self, weight: float) -> dict[str, np.ndarray]:
        w = float(weight)
        if not (w > 0 and math.isfinite(w)):
            raise ValueError(f"an update's weight must be a positive number, got {weight!r}")
        values = []
        for name, scale in METRIC_FIELDS:
            value = self.metrics.get(name, float("nan"))
            values.append(float(value) / scale if _finite(value) else 0.0)
        counts = np.asarray(self.counts, dtype=np.float64).reshape(-1)
        return {UNIT: np.array([1.0 / w]), COUNTS: counts / (COUNT_SCALE * w), METRICS: np.asarray(values) / w}


def metric_values(result: Mapping[str, Any]) -> dict[str, float]:
    """The :data:`METRIC_NAMES` fields of one evaluation (``val_acc``/``test_acc``/``train_acc`` and sizes), with
    the ``has_*`` flags set from the sizes (a NaN accuracy counts as absent)."""
    out: dict[str, float] = {}
    for acc, has, size in (
        ("val_accuracy", "has_val", "num_val"),
        ("accuracy", "has_test", "num_test"),
        ("train_accuracy", "has_train", "num_train"),
    ):
        value = result.get(acc)
        ok = _finite(value) and int(result.get(size, 0) or 0) > 0
        out[acc] = float(value) if ok else float("nan")
        out[has] = 1.0 if ok else 0.0
    loss = result.get("train_loss")
    out["train_loss"] = float(loss) if _finite(loss) else float("nan")
    out["has_loss"] = 1.0 if _finite(loss) else 0.0
    for correct, size, acc in (("val_correct", "num_val", "val_accuracy"), ("test_correct", "num_test", "accuracy")):
        n = int(result.get(size, 0) or 0)
        out[size] = float(n)
        out[correct] = float(round(out[acc] * n)) if out[acc] == out[acc] else 0.0
    out["owner_mean_val"] = float(result.get("owner_mean_val", out["val_accuracy"]))
    out["owner_mean_test"] = float(result.get("owner_mean_test", out["accuracy"]))
    return out


@dataclass(frozen=True)
class RoundAggregate:
    """What the server derives from the aggregate of one round's statistics (no single client's values):
    ``clients`` (how many were aggregated), ``counts`` (N_s, the summed label counts, integers) and ``sums``
    (every metric field summed over the clients); :meth:`mean` and :meth:`pooled` give the averages."""

    clients: int
    counts: np.ndarray
    sums: Mapping[str, float]

    @classmethod
    def from_aggregate(cls, aggregate: Mapping[str, np.ndarray], clients: int) -> "RoundAggregate":
        """From the weighted mean of the clients' statistics arrays over ``clients`` clients."""
        unit = float(np.asarray(aggregate[UNIT], dtype=np.float64).reshape(-1)[0])
        if not (unit > 0 and math.isfinite(unit)) or clients < 1:
            raise ValueError(f"unusable statistics aggregate (unit {unit}, {clients} clients)")
        factor = clients / unit  # the aggregate is (sum_i x_i) / sum_i w_i and unit is clients / sum_i w_i
        counts = np.rint(np.asarray(aggregate[COUNTS], dtype=np.float64) * factor * COUNT_SCALE).astype(np.int64)
        raw = np.asarray(aggregate[METRICS], dtype=np.float64).reshape(-1)
        if raw.size != len(METRIC_FIELDS):
            raise ValueError(f"{raw.size} metric fields, expected {len(METRIC_FIELDS)}")
        sums = {name: float(v * factor * scale) for (name, scale), v in zip(METRIC_FIELDS, raw)}
        for name, scale in METRIC_FIELDS:
            if scale != 1.0 or name.startswith("has_"):
                sums[name] = float(np.rint(sums[name]))  # counts and flags are integers
        return cls(int(clients), counts, sums)

    def mean(self, name: str, flag: str) -> float:
        """The plain mean of ``name`` over the clients whose ``flag`` is set (NaN if none)."""
        n = self.sums.get(flag, 0.0)
        return self.sums[name] / n if n > 0 else float("nan")

    def pooled(self, correct: str, size: str) -> float:
        """Accuracy over all the clients' nodes: summed correct / summed size (NaN if empty)."""
        n = self.sums.get(size, 0.0)
        return self.sums[correct] / n if n > 0 else float("nan")

    def downstream(self, like: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The statistics arrays the server sends back: N_s / COUNT_SCALE, zero metrics, unit 1.

        The metrics stay with the server (its search needs them, no client does): with two clients, a client that
        received the round's mean accuracy could subtract its own and learn the other client's."""
        return {
            UNIT: np.ones_like(np.asarray(like[UNIT], dtype=np.float64)),
            COUNTS: self.counts.astype(np.float64) / COUNT_SCALE,
            METRICS: np.zeros(len(METRIC_FIELDS)),
        }


def _flag(name: str) -> str | None:
    return {
        "val_accuracy": "has_val",
        "accuracy": "has_test",
        "train_accuracy": "has_train",
        "train_loss": "has_loss",
        "owner_mean_val": "has_val",
        "owner_mean_test": "has_test",
    }.get(name)


def empty_statistics(num_classes: int) -> dict[str, np.ndarray]:
    """The statistics arrays of a trial's first round (nothing aggregated yet)."""
    return {UNIT: np.ones(1), COUNTS: np.zeros(int(num_classes)), METRICS: np.zeros(len(METRIC_FIELDS))}


def global_counts(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """N_s as the client receives it (integers; all zero before the first aggregation of a trial)."""
    return np.rint(np.asarray(arrays[COUNTS], dtype=np.float64) * COUNT_SCALE).astype(np.int64)
