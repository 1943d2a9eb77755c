"""Server side: flowergraph's strategies (legacy Flower ``Strategy`` classes) and the parts they are built from
(public API).

    from flowergraph.strategies import WeightedAveraging, FedGCNStrategy, FederatedStrategy

* :class:`FederatedStrategy`: the base of every method, composed of parts (:mod:`flowergraph.strategies.base`);
* :class:`WeightedAveraging` (FedAvg), :class:`FedGCNStrategy`, :class:`FedStarStrategy`: the methods;
  :class:`GCFLStrategy` (clustered FL by update similarity, FedStar's GCFL baseline; any method's clients);
* privacy and robustness of the training rounds, for any of them: :class:`CentralDPServerSide`,
  :class:`CentralDPClientSide`, :class:`LocalDPAccounting` and :func:`with_dp` (Flower's DP wrappers, recorded
  and checkpointed), :class:`PrivacyBudget`; :class:`CKKSAggregation`; robust rules :class:`CoordinateMedian`,
  :class:`TrimmedMean`, :class:`Krum` and :func:`make_aggregator`;
* the parts, for your own strategies: :class:`ClientDirectory` (identity, sampling, names),
  :class:`Aggregator` / :class:`WeightedMean` (aggregation rules), :class:`EvaluationSchedule`,
  :class:`RoundBook` (records), :class:`PhaseRunner` / :class:`PhaseMessage` / :class:`PhaseReply` /
  :class:`PhaseError` (method phases), and the helpers :func:`check_update`, :func:`weighted_average`,
  :func:`weighted_metric`, :func:`failure_reason`.

Names are imported on first use, so ``import flowergraph.strategies`` stays cheap.
"""

from __future__ import annotations

from .._exports import lazy_exports

_EXPORTS = {
    "FederatedStrategy": "base", "WeightedAveraging": "weighted", "FedGCNStrategy": "fedgcn",
    "FedStarStrategy": "fedstar", "GCFLStrategy": "gcfl", "CentralDPServerSide": "dp", "CentralDPClientSide": "dp",
    "LocalDPAccounting": "dp", "with_dp": "dp", "PrivacyBudget": "dp", "CKKSAggregation": "secure",
    "CoordinateMedian": "aggregation", "TrimmedMean": "aggregation", "Krum": "aggregation",
    "make_aggregator": "aggregation", "RoundNotAggregated": "aggregation",
    "ClientDirectory": "directory", "failure_reason": "directory",
    "Aggregator": "aggregation", "WeightedMean": "aggregation", "Update": "aggregation",
    "AggregationConfigError": "aggregation", "WEIGHTINGS": "aggregation",
    "EvaluationSchedule": "evaluation", "RoundBook": "records",
    "PhaseRunner": "phases", "Phase": "phases", "PhaseMessage": "phases", "PhaseReply": "phases",
    "PhaseError": "phases",
    "check_update": "common", "weighted_average": "common", "weighted_metric": "common",
}
__all__ = ["AggregationConfigError", "Aggregator", "CKKSAggregation", "CentralDPClientSide", "CentralDPServerSide",
           "ClientDirectory", "CoordinateMedian", "EvaluationSchedule", "FedGCNStrategy", "FedStarStrategy",
           "FederatedStrategy", "GCFLStrategy", "Krum", "LocalDPAccounting", "Phase", "PhaseError", "PhaseMessage",
           "PhaseReply", "PhaseRunner", "PrivacyBudget", "RoundBook", "RoundNotAggregated", "TrimmedMean",
           "Update", "WEIGHTINGS", "WeightedAveraging", "WeightedMean", "check_update", "failure_reason",
           "make_aggregator", "weighted_average", "weighted_metric", "with_dp"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
