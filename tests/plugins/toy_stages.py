"""A test-only method in two stages whose models have different shapes (registered through the plugin
mechanism, never in flowergraph's files).

``toy-stages``: stage ``wide`` trains a 2-layer GCN with 16 hidden units for ``toy-stages.wide-rounds`` rounds,
then stage ``narrow`` trains a fresh 2-layer GCN with 4 hidden units for the rest of the run (as an architecture
search hands its chosen architecture to retraining). When ``narrow`` starts, the strategy asks one client, with a
phase message, for the stage's seeded initial model (the server holds no data to size it); every client reads the
stage from its config and builds the matching model.
"""

from __future__ import annotations

from flowergraph.methods import ClientArgs, Method, StrategyArgs, register
from flowergraph.settings import Option, at_least

HIDDEN = {"wide": 16, "narrow": 4}
INIT = "toy-stages.init"


def _strategy(args: StrategyArgs):
    from flowergraph.strategies import PhaseMessage, Stage, WeightedAveraging

    class TwoStages(WeightedAveraging):
        def begin_stage(self, stage, server_round, client_manager):
            proxy = self.all_clients(client_manager)[0]
            phase = self.phases.begin("toy-stages.init", server_round, timeout=self.round_timeout)
            (reply,) = phase.send(INIT, [proxy], PhaseMessage(values={"stage": stage.name}))
            self.book.add_phase(phase.end())
            return dict(zip(reply.values["keys"].split(","), reply.arrays))

    stages = (Stage("wide", args.settings["toy-stages.wide-rounds"]), Stage("narrow"))
    return TwoStages(weighting="train-size", stages=stages, **args.common())


def _client(args: ClientArgs):
    import torch

    from flowergraph import wire
    from flowergraph.clients import FederatedClient
    from flowergraph.tasks.models import build_node_model, get_weights, set_weights
    from flowergraph.tasks.training import TrainConfig, evaluate_masks, train_steps

    s = args.settings
    graph = args.data()
    data = graph.to_pyg()

    def model_of(stage: str):
        return build_node_model("gcn", graph.num_features, graph.num_classes, hidden=HIDDEN[stage], seed=s.seed)

    class StagedClient(FederatedClient):
        partition_id = args.partition_id
        model = None

        def phase_handlers(self):
            def init(request):
                model = model_of(request.values["stage"])
                return get_weights(model), {"keys": ",".join(model.state_dict())}

            return {INIT: init}

        def load(self, arrays, keys, config):
            self.model = model_of(str(config.get(wire.STAGE, "wide")))
            set_weights(self.model, arrays)

        def get_parameters(self, config):
            return get_weights(model_of("wide"))

        def train(self, config):
            torch.manual_seed(1000 * int(config[wire.SERVER_ROUND]) + args.partition_id)
            loss = train_steps(
                self.model,
                lambda: self.model(data.x, data.edge_index),
                data.y,
                data.train_mask,
                TrainConfig(local_steps=s["node.local-steps"], lr=s["node.lr"]),
            )
            return graph.num_train, {wire.TRAIN_LOSS: float(loss), "hidden": int(self.model.convs[0].out_channels)}

        def shared_arrays(self):
            return get_weights(self.model)

        def evaluation(self):
            r = evaluate_masks(
                self.model,
                lambda: self.model(data.x, data.edge_index),
                data.y,
                {"test": data.test_mask, "val": data.val_mask},
            )
            return {
                "accuracy": r["test_accuracy"],
                "loss": r["test_loss"],
                "num_test": r["num_test"],
                "val_accuracy": r["val_accuracy"],
                "num_val": r["num_val"],
                "hidden": int(self.model.convs[0].out_channels),
            }

    return StagedClient()


METHOD = Method(
    name="toy-stages",
    summary="test-only: two stages with models of different shapes",
    task="node",
    build_strategy=_strategy,
    build_client=_client,
    options=(Option("toy-stages.wide-rounds", 2, "Rounds of the first stage.", check=at_least(1), group="toy-stages"),),
)


def register_once():
    from flowergraph.methods import methods

    if METHOD.name not in methods():
        register(METHOD)
    return METHOD
