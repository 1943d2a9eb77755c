"""``plug-avg``: weighted averaging on node classification whose clients scale the node task's learning rate by
``plug-avg.scale`` and report the scale they used (so a test sees the key reached them)."""

from __future__ import annotations

import dataclasses

from flowergraph.methods import ClientArgs, Method, Option, StrategyArgs, at_least
from flowergraph.methods import node as node_task


def _strategy(args: StrategyArgs):
    from flowergraph.strategies import WeightedAveraging

    return WeightedAveraging(weighting=args.settings.weighting, **args.common())


def _client(args: ClientArgs):
    from flowergraph.clients import NodeClassificationClient

    s = args.settings
    scale = s["plug-avg.scale"]
    train = dataclasses.replace(node_task.train_config(s), lr=node_task.train_config(s).lr * scale)

    class ScaledClient(NodeClassificationClient):
        def train(self, config):
            n, metrics = super().train(config)
            return n, {**metrics, "plug_scale": scale}

    return ScaledClient(args.data(), train, node_task.model_kwargs(s), seed=s.seed)


METHOD = Method(
    name="plug-avg",
    summary="plugin test: FedAvg with a scaled learning rate",
    tasks=("node",),
    build_strategy=_strategy,
    build_client=_client,
    options=(Option("plug-avg.scale", 1.0, "Learning-rate scale.", check=at_least(0.0, False), group="plug-avg"),),
)
