"""Weighted averaging (FedAvg; FedGCN's "0-hop"): the strategy every node-level method builds on.

:class:`WeightedAveraging` is :class:`flowergraph.strategies.FederatedStrategy` with the
:class:`~flowergraph.strategies.aggregation.WeightedMean` aggregator; the base class holds the algorithm and
the parts. This docstring is the wire protocol every averaging method shares.

Wire protocol (training and evaluation; every client runs :class:`flowergraph.clients.node.NodeClassificationClient`
or a subclass; message keys: :mod:`flowergraph.wire`)
---------------------------------------------------------------------------------------------------------------
Phase INIT, once: ``get_properties`` to every connected client, config ``{"flowergraph": "identity"}``,
and (in parallel) ``get_parameters`` to one of them (lowest node id), config ``{}``.
    client -> server: properties ``{"partition_id": int}`` (which partition each node holds: failures are
    logged by partition id, and client sampling is seeded per (seed, round) over partition ids, so it does not
    depend on Flower's random node ids); the model's arrays, in ``state_dict`` order (GCN hidden 16 on Cora:
    4 arrays, 1433x16, 16, 16x7, 7, float32). The server learns the partition ids and the architecture.
    A client that does not answer the identity request is labelled by its node id. With a checkpoint to
    resume from (``initial_parameters``), no ``get_parameters`` is sent.

Phase TRAIN, every round r = 1..R: ``fit`` to the sampled clients.
    server -> client: parameters = the global arrays; config ``{"server_round": int r}``, plus
    ``"evaluate_global": True`` with fused evaluation when round r-1's model is due for evaluation.
    client -> server: parameters = the locally trained arrays (same count, shapes and dtypes);
    ``num_examples`` = the client's number of training nodes; metrics
    ``{"partition_id": int, "train_loss": float (NaN when it has no training node), "num_train": int,
    "batch_size": int}`` (full batch: batch_size = num_train).
    With ``evaluate_global`` the client first evaluates the arrays it received (the global model after round
    r-1) and adds the EVALUATE metrics below, each key prefixed with ``eval_`` (``eval_accuracy``,
    ``eval_loss``, ``eval_num_test``, ...), then trains.
    The server learns each client's model update, training-set size and mean training loss.

Phase EVALUATE, every ``eval_every`` rounds and after the last: ``evaluate`` to the sampled clients. With
fused evaluation (``fused_eval=True``) only after the last round; every other evaluation travels inside the
next round's ``fit`` (one message per client per round instead of two: Flower's simulation dispatches each
message phase on a 0.1 s tick, so this halves the per-round floor; the numbers are the same).
    server -> client: parameters = the new global arrays; config ``{"server_round": int r}``.
    client -> server: loss = test loss (0.0 when it has no test node); ``num_examples`` = number of test
    nodes; metrics ``{"partition_id": int, "accuracy": float, "loss": float, "num_test": int,
    "val_accuracy": float, "val_loss": float, "num_val": int, "train_accuracy": float}`` (NaN for an empty
    set). The server learns per-client accuracies and set sizes.

Aggregation: ``w = sum_k a_k w_k / sum_k a_k`` with ``a_k`` the training-node count (``train-size``,
default), the reported ``batch_size`` (``batch-size``) or 1 (``uniform``, the FedGCN reference code).
An update with the wrong array count/shapes, a non-numeric dtype or NaN/Inf values is rejected and logged
with the client's partition id; when fewer than ``min_clients`` valid updates remain, the global model is
kept unchanged for that round. Accuracy and loss are aggregated weighted by test-node counts.

An update whose dtype differs from the global array's is rejected too (an integer update would otherwise be
averaged into a float model). ``batch-size`` weighting with a client that reports no ``batch_size`` fails the
run with that message (it is a configuration error, not a client fault). A client that ignores
``evaluate_global`` is evaluated with a separate ``evaluate`` message on the arrays it was sent, and fused
evaluation is turned off for the rest of the run (logged), so no round's accuracy goes missing.

Failures: a client whose message fails (it raised, its process died, the round timed out: Flower's
``failures``) is logged with its partition id and left out of the round; so is a rejected update. A failure
whose reason carries :data:`~flowergraph.wire.CONFIG_ERROR_MARKER` (a client refused the run because of bad
input, see :mod:`flowergraph.app.client_app`) fails the whole run with that message instead: bad input never trains
silently.

State (checkpoints): :meth:`~flowergraph.strategies.FederatedStrategy.state_dict` returns what the strategy
needs, besides the global arrays and the round number, to continue a run exactly (the round record held back for
fused evaluation, the elapsed time, the run's tag and last client checkpoint); ``load_state_dict`` restores it. A
stateful subclass (an RL agent, a population) extends
both: values may be JSON types or numpy arrays, nested in dicts and lists (see :mod:`flowergraph.storage.checkpoint`).

Records: one per round (see :mod:`flowergraph.storage.results`). ``time_s`` is the round's wall time (fit, server
evaluation, separate client evaluation); with fused evaluation a round's client evaluation runs inside the
next round's fit, so its record is written when that fit returns.
"""

from __future__ import annotations

from typing import Any

from ..settings.choices import WEIGHTINGS
from ..wire import CONFIG_ERROR_MARKER, IDENTITY_REQUEST
from .aggregation import Aggregator, WeightedMean
from .base import EvaluateFn, FederatedStrategy
from .directory import failure_reason
from .policy import FederationPolicy

__all__ = ["CONFIG_ERROR_MARKER", "IDENTITY_REQUEST", "WEIGHTINGS", "EvaluateFn", "WeightedAveraging", "failure_reason"]


class WeightedAveraging(FederatedStrategy):
    """Sample-weighted federated averaging with per-round records.

    ``weighting``: ``"train-size"`` (default), ``"batch-size"`` or ``"uniform"``; ``aggregator``: a robust rule
    instead of the weighted mean (:func:`flowergraph.strategies.aggregation.make_aggregator`); ``policy`` and every
    other argument are :class:`~flowergraph.strategies.FederatedStrategy`'s (``recorder``, ``evaluate_fn``, ...).
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        weighting: str = "train-size",
        aggregator: Aggregator | None = None,
        **kwargs: Any,
    ) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; valid choices: {', '.join(WEIGHTINGS)}")
        self._weighting = weighting
        super().__init__(policy, aggregator=aggregator or WeightedMean(weighting), **kwargs)

    @property
    def weighting(self) -> str:
        return self._weighting

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_clients={self.num_clients}, weighting={self.weighting!r})"
