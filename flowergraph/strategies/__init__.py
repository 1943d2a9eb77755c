"""Server side: flowergraph's strategies (legacy Flower ``Strategy`` classes) and the parts they are built from
(public API).

    from flowergraph.strategies import WeightedAveraging, FedGCNStrategy, FederatedStrategy

* :class:`FederatedStrategy`: the base of every method, composed of parts (:mod:`flowergraph.strategies.base`);
* :class:`WeightedAveraging` (FedAvg), :class:`FedGCNStrategy`, :class:`FedStarStrategy`,
  :class:`FLAGCNSStrategy` (FL-AGCNS's architecture search), :class:`FedGraphStrategy` (FedGraph's
  embedding relay and DDPG sampling agent), :class:`ASFGNNStrategy` (ASFGNN's JS mixing and SMAC trials): the
  methods;
  :class:`GCFLStrategy` (clustered FL by update similarity, FedStar's GCFL baseline; any method's clients);
* privacy and robustness of the training rounds, for any of them: :class:`CentralDPServerSide`,
  :class:`CentralDPClientSide`, :class:`LocalDPAccounting` and :func:`with_dp` (Flower's DP wrappers, recorded
  and checkpointed), :class:`PrivacyBudget`; :class:`CKKSAggregation`; robust rules :class:`CoordinateMedian`,
  :class:`TrimmedMean`, :class:`Krum` and :func:`make_aggregator`;
* the parts, for your own strategies: :class:`ClientDirectory` (identity, sampling, names),
  :class:`Aggregator` / :class:`WeightedMean` (aggregation rules), :class:`EvaluationSchedule`,
  :class:`FusedEvaluation`, :class:`RoundBook` (records), :class:`ClientCheckpoints` (clients' saved state),
  :class:`PhaseRunner` / :class:`PhaseMessage` / :class:`PhaseReply` / :class:`PhaseError` (method phases), and
  the helpers :func:`check_update`, :func:`weighted_average`,
  :func:`weighted_metric`, :func:`failure_reason`.

Names are imported on first use, so ``import flowergraph.strategies`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - what the lazy exports resolve to, for type checkers
    from .asfgnn import ASFGNNStrategy
    from .aggregation import (
        AggregationConfigError,
        Aggregator,
        CoordinateMedian,
        Krum,
        RoundNotAggregated,
        TrimmedMean,
        Update,
        WEIGHTINGS,
        WeightedMean,
        make_aggregator,
    )
    from .bank import ModelBank
    from .client_checkpoints import ClientCheckpoints
    from .base import FederatedStrategy
    from .common import check_named_update, check_update, weighted_average, weighted_metric
    from .directory import ClientDirectory, failure_reason
    from .dp import CentralDPClientSide, CentralDPServerSide, DPConfig, LocalDPAccounting, PrivacyBudget, with_dp
    from .evaluation import ClientEvaluation, EvaluationSchedule, FusedEvaluation, MetricAggregation
    from .fedgcn import FedGCNStrategy
    from .fedstar import FedStarStrategy
    from .fedgraph import FedGraphStrategy
    from .flagcns import FLAGCNSStrategy
    from .gcfl import GCFLStrategy
    from .phases import Phase, PhaseError, PhaseMessage, PhaseReply, PhaseRunner, relay
    from .policy import FederationPolicy, Stage, UPDATE_KINDS
    from .records import RoundBook
    from .secure import CKKSAggregation
    from .weighted import WeightedAveraging

_EXPORTS = {
    "FederatedStrategy": "base",
    "WeightedAveraging": "weighted",
    "ASFGNNStrategy": "asfgnn",
    "FedGCNStrategy": "fedgcn",
    "FedStarStrategy": "fedstar",
    "FLAGCNSStrategy": "flagcns",
    "FedGraphStrategy": "fedgraph",
    "GCFLStrategy": "gcfl",
    "CentralDPServerSide": "dp",
    "CentralDPClientSide": "dp",
    "LocalDPAccounting": "dp",
    "with_dp": "dp",
    "PrivacyBudget": "dp",
    "DPConfig": "dp",
    "FederationPolicy": "policy",
    "Stage": "policy",
    "UPDATE_KINDS": "policy",
    "ModelBank": "bank",
    "ClientEvaluation": "evaluation",
    "MetricAggregation": "evaluation",
    "check_named_update": "common",
    "CKKSAggregation": "secure",
    "CoordinateMedian": "aggregation",
    "TrimmedMean": "aggregation",
    "Krum": "aggregation",
    "make_aggregator": "aggregation",
    "RoundNotAggregated": "aggregation",
    "ClientDirectory": "directory",
    "failure_reason": "directory",
    "Aggregator": "aggregation",
    "WeightedMean": "aggregation",
    "Update": "aggregation",
    "AggregationConfigError": "aggregation",
    "WEIGHTINGS": "aggregation",
    "EvaluationSchedule": "evaluation",
    "FusedEvaluation": "evaluation",
    "RoundBook": "records",
    "ClientCheckpoints": "client_checkpoints",
    "PhaseRunner": "phases",
    "Phase": "phases",
    "PhaseMessage": "phases",
    "PhaseReply": "phases",
    "PhaseError": "phases",
    "relay": "phases",
    "check_update": "common",
    "weighted_average": "common",
    "weighted_metric": "common",
}
__all__ = [
    "ASFGNNStrategy",
    "AggregationConfigError",
    "Aggregator",
    "CKKSAggregation",
    "CentralDPClientSide",
    "CentralDPServerSide",
    "ClientCheckpoints",
    "ClientDirectory",
    "ClientEvaluation",
    "CoordinateMedian",
    "DPConfig",
    "EvaluationSchedule",
    "FLAGCNSStrategy",
    "FedGCNStrategy",
    "FedGraphStrategy",
    "FedStarStrategy",
    "FederatedStrategy",
    "FederationPolicy",
    "FusedEvaluation",
    "GCFLStrategy",
    "Krum",
    "LocalDPAccounting",
    "MetricAggregation",
    "ModelBank",
    "Phase",
    "PhaseError",
    "PhaseMessage",
    "PhaseReply",
    "PhaseRunner",
    "PrivacyBudget",
    "RoundBook",
    "RoundNotAggregated",
    "Stage",
    "TrimmedMean",
    "UPDATE_KINDS",
    "Update",
    "WEIGHTINGS",
    "WeightedAveraging",
    "WeightedMean",
    "check_named_update",
    "check_update",
    "failure_reason",
    "make_aggregator",
    "relay",
    "weighted_average",
    "weighted_metric",
    "with_dp",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
