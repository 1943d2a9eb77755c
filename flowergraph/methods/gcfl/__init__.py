"""GCFL (Xie et al., NeurIPS 2021): clients clustered by the similarity of their updates, one model per cluster;
registered for every task with a generic client (on graph classification, FedStar's GCFL baseline). Its server:
:mod:`flowergraph.methods.gcfl.server`; its clients are the task's generic client
(:func:`flowergraph.methods.baselines.baseline_client_for`)."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

from ...settings.options import Options, at_least, option, options_of
from ..baselines import TASKS, generic_stateful, baseline_client_for
from ..registry import Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy


@dataclass(kw_only=True, eq=False)
class GCFLOptions(Options):
    """GCFL's hyper-parameters: the run-config keys ``gcfl.*`` and the keyword arguments of
    :class:`flowergraph.serverapp.GCFL`."""

    eps1: float = option(
        0.07,
        "A cluster may split when the norm of its clients' mean update is below this (the "
        "authors' values: CHEM 0.07, BIO-CHEM 0.07, BIO-CHEM-SN 0.08; the presets set them).",
        check=at_least(0.0, False),
    )
    eps2: float = option(
        0.28,
        "... and its largest client update norm is above this (the authors' values: CHEM "
        "0.28, BIO-CHEM 0.35, BIO-CHEM-SN 0.4).",
        check=at_least(0.0, False),
    )
    warmup: int = option(20, "No cluster splits in rounds 1..warmup (the authors' 20).", check=at_least(0))


def _gcfl(args: StrategyArgs) -> "Strategy":
    from .server import GCFLStrategy

    s = args.settings
    g = s.of("gcfl")
    return GCFLStrategy(eps1=g.eps1, eps2=g.eps2, warmup=g.warmup, weighting=s.weighting, **args.common())


GCFL = register(
    Method(
        name="gcfl",
        summary="GCFL (Xie et al., NeurIPS 2021): clients clustered by the similarity of their updates, "
        "one model per cluster",
        tasks=TASKS,
        build_strategy=_gcfl,
        build_client=baseline_client_for("gcfl"),
        stateful_clients=generic_stateful,
        paper="Xie et al., GCFL, NeurIPS 2021, arXiv:2106.13423",
        summable_updates=False,
        model_scope="per-group",
        options=options_of(GCFLOptions, "gcfl"),
    )
)
