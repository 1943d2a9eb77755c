"""A test-only method with per-client models on the server and partial, named updates (registered through the
plugin mechanism, never in flowergraph's files).

``toy-partial``: a 2-layer GCN. Each client trains the model the server holds for it and sends back only one
layer, by name: partition p sends ``convs.<p % 2>.*`` (the keys travel with the update). The server's global
model averages each array over the clients that sent it (arrays nobody sent keep their values); each client's own
model on the server is the new global model with the layer it sent replaced by its own version. The next round
sends every client its own model. Everything the server holds lives in the strategy's model bank, so a checkpoint
must restore every client's model for a resumed run to equal the uninterrupted one.
"""

from __future__ import annotations

from flowergraph.methods import ClientArgs, Method, StrategyArgs, register


def sent_layer(partition: int) -> str:
    return f"convs.{partition % 2}."


def _strategy(args: StrategyArgs):
    from flowergraph.strategies import WeightedAveraging
    from flowergraph.strategies.bank import client_slot

    class PartialPersonal(WeightedAveraging):
        def aggregate_updates(self, server_round, updates, weights):
            new = self.aggregator.aggregate_named(updates, weights, like=self.bank.global_model)
            for update in updates:  # the client's own model: the new global one, its own layer kept
                self.bank.set(client_slot(update.partition), {**new, **update.named(list(new))})
            return new

    return PartialPersonal(weighting="train-size", update_kind="partial", **args.common())


def _client(args: ClientArgs):
    import torch

    from flowergraph import wire
    from flowergraph.clients import FederatedClient
    from flowergraph.tasks.models import build_node_model
    from flowergraph.tasks.torch_state import load_module_arrays, module_arrays
    from flowergraph.tasks.training import TrainConfig, evaluate_masks, train_steps

    s = args.settings
    graph = args.data()
    data = graph.to_pyg()
    model = build_node_model("gcn", graph.num_features, graph.num_classes, hidden=s["node.hidden"], seed=s.seed)
    keys = list(model.state_dict())
    mine = [k for k in keys if k.startswith(sent_layer(args.partition_id))]

    class PartialClient(FederatedClient):
        partition_id = args.partition_id

        def load(self, arrays, names, config):
            load_module_arrays(model, dict(zip(names or keys, arrays)))

        def train(self, config):
            torch.manual_seed(1000 * int(config[wire.SERVER_ROUND]) + args.partition_id)
            loss = train_steps(
                model,
                lambda: model(data.x, data.edge_index),
                data.y,
                data.train_mask,
                TrainConfig(local_steps=s["node.local-steps"], lr=s["node.lr"]),
            )
            return graph.num_train, {wire.TRAIN_LOSS: float(loss)}

        def shared_arrays(self):
            return module_arrays(model, mine)  # named: only this client's layer travels

        def get_parameters(self, config):
            return list(module_arrays(model).values())

        def model_keys(self):
            return keys

        def evaluation(self):
            r = evaluate_masks(
                model, lambda: model(data.x, data.edge_index), data.y, {"test": data.test_mask, "val": data.val_mask}
            )
            return {
                "accuracy": r["test_accuracy"],
                "loss": r["test_loss"],
                "num_test": r["num_test"],
                "val_accuracy": r["val_accuracy"],
                "num_val": r["num_val"],
            }

    return PartialClient()


METHOD = Method(
    name="toy-partial",
    summary="test-only: per-client server models, partial named updates",
    task="node",
    build_strategy=_strategy,
    build_client=_client,
    update_kind="partial",
    model_scope="per-client",
)


def register_once():
    from flowergraph.methods import methods

    if METHOD.name not in methods():
        register(METHOD)
    return METHOD
