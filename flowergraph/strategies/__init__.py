"""Server side: flowergraph's core strategies (Flower-free: they speak flowergraph's own types, :class:`Node`,
:class:`Instruction`, :class:`Reply`, :class:`Failure` over a :class:`Federation`) and the parts they are built
from (public API). Flower's Message API runs them through :class:`flowergraph.app.message_server.FlowergraphStrategy`,
its legacy stack through :class:`flowergraph.app.loop.LegacyStrategy`.

    from flowergraph.strategies import WeightedAveraging, FederatedStrategy

* :class:`FederatedStrategy`: the base of every method, composed of parts (:mod:`flowergraph.strategies.base`);
* :class:`WeightedAveraging` (FedAvg, and the base of most methods); each method's own core strategy is in its
  folder (``flowergraph.methods.<name>.server``: :class:`flowergraph.methods.fedgcn.server.FedGCNStrategy`, ...);
* privacy and robustness of the training rounds, for any of them: :class:`CentralDPServerSide`,
  :class:`CentralDPClientSide`, :class:`LocalDPAccounting` and :func:`with_dp` (Flower's DP wrappers' steps on
  the core, recorded and checkpointed), :class:`PrivacyBudget`; :class:`CKKSAggregation`; robust rules
  :class:`CoordinateMedian`, :class:`TrimmedMean`, :class:`Krum` and :func:`make_aggregator`;
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

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .aggregation import (
        AggregationConfigError as AggregationConfigError,
        Aggregator as Aggregator,
        CoordinateMedian as CoordinateMedian,
        Krum as Krum,
        RoundNotAggregated as RoundNotAggregated,
        TrimmedMean as TrimmedMean,
        Update as Update,
        WEIGHTINGS as WEIGHTINGS,
        WeightedMean as WeightedMean,
        make_aggregator as make_aggregator,
    )
    from .bank import ModelBank as ModelBank
    from .client_checkpoints import ClientCheckpoints as ClientCheckpoints
    from .base import FederatedStrategy as FederatedStrategy
    from .common import (
        check_named_update as check_named_update,
        check_update as check_update,
        weighted_average as weighted_average,
        weighted_metric as weighted_metric,
    )
    from .directory import ClientDirectory as ClientDirectory, failure_reason as failure_reason
    from .dp import (
        CentralDPClientSide as CentralDPClientSide,
        CentralDPServerSide as CentralDPServerSide,
        DPConfig as DPConfig,
        LocalDPAccounting as LocalDPAccounting,
        PrivacyBudget as PrivacyBudget,
        with_dp as with_dp,
    )
    from .evaluation import (
        ClientEvaluation as ClientEvaluation,
        EvaluationSchedule as EvaluationSchedule,
        FusedEvaluation as FusedEvaluation,
        MetricAggregation as MetricAggregation,
    )
    from .phases import (
        Phase as Phase,
        PhaseError as PhaseError,
        PhaseMessage as PhaseMessage,
        PhaseReply as PhaseReply,
        PhaseRunner as PhaseRunner,
        relay as relay,
    )
    from .nodes import (
        Failure as Failure,
        Federation as Federation,
        Instruction as Instruction,
        Node as Node,
        Reply as Reply,
    )
    from .policy import FederationPolicy as FederationPolicy, Stage as Stage, UPDATE_KINDS as UPDATE_KINDS
    from .records import RoundBook as RoundBook
    from .secure import CKKSAggregation as CKKSAggregation
    from .weighted import WeightedAveraging as WeightedAveraging

_EXPORTS = {
    "FederatedStrategy": "base",
    "Node": "nodes",
    "Instruction": "nodes",
    "Reply": "nodes",
    "Failure": "nodes",
    "Federation": "nodes",
    "WeightedAveraging": "weighted",
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
__all__ = sorted(_EXPORTS)  # the one table: _EXPORTS (tests/test_typing.py holds the TYPE_CHECKING imports to it)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
