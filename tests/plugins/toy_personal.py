"""A method that exists only in the tests: it is registered through the plugin mechanism (an entry point, or
``FLOWERGRAPH_PLUGINS``), never in flowergraph's own files.

``toy-personal`` is a personalised node classifier: a 2-layer GCN whose first layer is shared (averaged by the
server) and whose second layer stays on the client, trained with Adam whose moments persist across rounds. Both
live in the node's ``context.state`` through :class:`flowergraph.clients.ClientState`, so client checkpoints must
save and restore them for a resumed run to equal the uninterrupted one. Its strategy also runs a per-round phase
before training (``toy-personal.census``: each sampled client reports how many rounds it has trained), recorded
under the round's ``phases``.
"""

from __future__ import annotations

from flowergraph.methods import ClientArgs, Method, StrategyArgs, register
from flowergraph.settings.options import Option, at_least

SHARED_PREFIX = "convs.0."


def _strategy(args: StrategyArgs):
    from flowergraph.strategies import PhaseMessage, WeightedAveraging

    class CensusAveraging(WeightedAveraging):
        """Weighted averaging of the shared layer, plus a census phase before every round's training."""

        def before_fit(self, server_round, clients, client_manager):
            phase = self.phases.begin("toy-personal.census", server_round, timeout=self.round_timeout)
            replies = phase.send(
                "toy-personal.census", clients, PhaseMessage(values={"asked": server_round}), require_all=False
            )
            self.book.add_phase(phase.end(trained={r.client: int(r.values["trained"]) for r in replies}))

    return CensusAveraging(weighting="train-size", **args.common())


def _client(args: ClientArgs):
    import torch

    from flowergraph.clients import FlowergraphClient
    from flowergraph.clients.node import round_seed
    from flowergraph.tasks.models import build_node_model
    from flowergraph.tasks.training import evaluate_masks, train_steps

    s = args.settings
    graph = args.data()
    lr = s["toy-personal.lr"]

    class PersonalClient(FlowergraphClient):
        partition_id = args.partition_id

        def __init__(self):
            self.model = build_node_model(
                "gcn", graph.num_features, graph.num_classes, hidden=s["node.hidden"], seed=s.seed
            )
            self.shared = [k for k in self.model.state_dict() if k.startswith(SHARED_PREFIX)]
            self.private = [k for k in self.model.state_dict() if not k.startswith(SHARED_PREFIX)]
            args.state.load_module("toy-private", self.model)  # nothing stored before the first fit
            self.data = graph.to_pyg()

        def _load_shared(self, arrays):
            from flowergraph.tasks.torch_state import load_module_arrays

            load_module_arrays(self.model, dict(zip(self.shared, arrays)))

        def _shared_arrays(self):
            from flowergraph.tasks.torch_state import module_arrays

            return list(module_arrays(self.model, self.shared).values())

        def phase_handlers(self):
            def census(request):
                counts = args.state.get_values("toy-count") or {"trained": 0}
                return [], {"trained": int(counts["trained"]), "asked": int(request.values["asked"])}

            return {"toy-personal.census": census}

        def get_parameters(self, config):
            return self._shared_arrays()

        def fit(self, parameters, config):
            self._load_shared(parameters)
            metrics = {}
            if config.get("evaluate_global"):
                metrics = {f"eval_{k}": v for k, v in self._evaluate().items()}
            optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
            args.state.load_optimizer("toy-adam", optimizer)
            torch.manual_seed(round_seed(s.seed, int(config["server_round"]), args.partition_id))
            self.model.train()
            total = 0.0
            for _ in range(s["node.local-steps"]):
                optimizer.zero_grad()
                out = self.model(self.data.x, self.data.edge_index)
                loss = torch.nn.functional.nll_loss(out[self.data.train_mask], self.data.y[self.data.train_mask])
                loss.backward()
                optimizer.step()
                total += float(loss.detach())
            args.state.save_module("toy-private", self.model, keys=self.private)
            args.state.save_optimizer("toy-adam", optimizer)
            counts = args.state.get_values("toy-count") or {"trained": 0}
            args.state.set_values("toy-count", {"trained": int(counts["trained"]) + 1})
            return (
                self._shared_arrays(),
                graph.num_train,
                {"partition_id": args.partition_id, "train_loss": total / s["node.local-steps"], **metrics},
            )

        def _evaluate(self):
            r = evaluate_masks(
                self.model,
                lambda: self.model(self.data.x, self.data.edge_index),
                self.data.y,
                {"test": self.data.test_mask, "val": self.data.val_mask},
            )
            return {
                "accuracy": r["test_accuracy"],
                "loss": r["test_loss"],
                "num_test": r["num_test"],
                "val_accuracy": r["val_accuracy"],
                "num_val": r["num_val"],
            }

        def evaluate(self, parameters, config):
            self._load_shared(parameters)
            m = self._evaluate()
            return float(m["loss"]), int(m["num_test"]), {"partition_id": args.partition_id, **m}

    del train_steps
    return PersonalClient()


METHOD = Method(
    name="toy-personal",
    summary="test-only personalised GCN (shared first layer, private second layer + Adam)",
    task="node",
    build_strategy=_strategy,
    build_client=_client,
    stateful_clients=True,
    options=(Option("toy-personal.lr", 0.01, "Adam learning rate.", check=at_least(0.0, False), group="toy-personal"),),
)


def register_once():
    from flowergraph.methods import methods

    if METHOD.name not in methods():
        register(METHOD)
    return METHOD
