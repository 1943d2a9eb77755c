"""``plug-graph``: FedPer's GIN on graph classification, with the graph task's toolkit; clients report the
``plug-graph.tag`` key's value length (so a test sees the key reached them)."""

from __future__ import annotations

from flowergraph.methods import ClientArgs, Method, Option, Sharing, StrategyArgs


def _strategy(args: StrategyArgs):
    from flowergraph.strategies import WeightedAveraging

    return WeightedAveraging(weighting="train-size", **args.common())


def _client(args: ClientArgs):
    tag = args.settings["plug-graph.tag"]
    inner = args.task.baseline_client(args, Sharing("fedper"))

    class Tagged(type(inner)):
        def train(self, config):
            n, metrics = super().train(config)
            return n, {**metrics, "plug_tag_length": len(tag)}

    inner.__class__ = Tagged
    return inner


METHOD = Method(
    name="plug-graph",
    summary="plugin test: FedPer's GIN through the graph task's toolkit",
    tasks=("graph",),
    build_strategy=_strategy,
    build_client=_client,
    stateful_clients=True,
    options=(Option("plug-graph.tag", "x", "A tag the clients see.", group="plug-graph"),),
)
