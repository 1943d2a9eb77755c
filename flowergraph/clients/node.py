"""Clients for node classification on a client's own subgraph (the wire format is in
:mod:`flowergraph.strategies.weighted`)."""

from __future__ import annotations

import functools
import threading
import weakref

import numpy as np
import torch
from .. import wire
from ..tasks.federated_graph import ClientGraph
from ..tasks.models import build_node_model, get_weights, set_weights
from ..tasks.compute import seed_torch
from ..tasks.training import TrainConfig, evaluate_masks, train_steps
from .base import FederatedClient, FlowergraphClient


_MODELS: "weakref.WeakKeyDictionary[ClientGraph, dict[tuple, torch.nn.Module]]" = weakref.WeakKeyDictionary()
_MODELS_LOCK = threading.Lock()
MODELS_PER_GRAPH = 4  # model settings kept per graph (a run has one; a process running several runs may have more)


def bound_model(graph: ClientGraph, kwargs: dict, seed: int) -> torch.nn.Module:
    """The client's model object, built once per process and graph (Flower re-creates the client for every
    message; rebuilding the model and re-normalising the adjacency each time cost ~5 ms per message). It is
    scratch space: every message loads the weights it carries before using it.

    Held by the graph object (weakly keyed): a process keeps one model per graph it serves, for any number of
    clients, and a model goes when its graph goes. Memory is bounded by the graphs the data memos hold
    (:func:`~flowergraph.tasks.federated_graph.graph_cut`, the partition-file memo) times
    :data:`MODELS_PER_GRAPH` settings per graph; a model holds its weights and its graph's normalised adjacency."""
    key = (tuple(sorted(kwargs.items())), seed)
    with _MODELS_LOCK:
        models = _MODELS.get(graph)
        if models is None:
            models = _MODELS[graph] = {}
        model = models.get(key)
        if model is None:
            if len(models) >= MODELS_PER_GRAPH:
                models.clear()
            model = models[key] = build_node_model(
                in_dim=graph.num_features, num_classes=graph.num_classes, seed=seed, cached=True, **kwargs
            )
    return model


_KEYS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[str, ...]]" = weakref.WeakKeyDictionary()


def state_keys(model: torch.nn.Module) -> tuple[str, ...]:
    """``model``'s state-dict keys, in order, listed once per model object (a :func:`bound_model` serves every
    message of its graph; listing them walked the module tree again for each, ~0.1 ms a message)."""
    keys = _KEYS.get(model)
    if keys is None:
        keys = _KEYS[model] = tuple(model.state_dict())
    return keys


@functools.lru_cache(maxsize=32)
def _initial_weights_cached(key: tuple, in_dim: int, num_classes: int, seed: int):
    return get_weights(build_node_model(in_dim=in_dim, num_classes=num_classes, seed=seed, **dict(key)))


def _initial_weights(graph: ClientGraph, kwargs: dict, seed: int):
    """The seeded initial model (what ``get_parameters`` returns; identical on every client)."""
    return _initial_weights_cached(tuple(sorted(kwargs.items())), graph.num_features, graph.num_classes, seed)


def round_seed(seed: int, server_round: int, client_id: int) -> int:
    """The torch seed of one client's local training in one round (dropout masks): reproducible runs."""
    return int(np.random.SeedSequence([seed, server_round, client_id, 0xF17]).generate_state(1)[0])


PERSONAL_KEY = "node-personal"  # the private output layer (FedPer) in the node's state


class NodeClassificationClient(FederatedClient):
    """Trains the global model on the client's own subgraph; cross-client edges are ignored.

    ``model_kwargs`` are :func:`flowergraph.tasks.models.build_node_model` keyword arguments (kind, hidden,
    layers, dropout, heads, input_dropout); ``seed`` fixes the initial model and each round's dropout.
    ``personal_output``: the output layer stays on the client (FedPer: kept in ``state``, never sent);
    ``prox_mu`` > 0: FedProx's proximal term towards the received model in local training.
    """

    def __init__(
        self,
        graph: ClientGraph,
        train_config: TrainConfig,
        model_kwargs: dict | None = None,
        seed: int = 0,
        *,
        personal_output: bool = False,
        prox_mu: float = 0.0,
        state=None,
    ) -> None:
        from .state import ClientState

        train_config.validate()
        if prox_mu < 0:
            raise ValueError(f"prox_mu must be >= 0, got {prox_mu}")
        self.graph = graph
        self.train_config = train_config
        self.seed = seed
        kwargs = {"kind": "gcn", **(model_kwargs or {})}
        self.model = bound_model(graph, kwargs, seed)
        self.initial_weights = _initial_weights(graph, kwargs, seed)
        self.data = graph.to_pyg()
        self.keys = list(state_keys(self.model))
        last = f"convs.{int(kwargs.get('layers', 2)) - 1}."
        self.personal = [k for k in self.keys if k.startswith(last)] if personal_output else []
        self.shared = [k for k in self.keys if k not in self.personal]
        self.prox_mu = float(prox_mu)
        self.state = state if isinstance(state, ClientState) or state is None else ClientState(state)
        if self.personal and self.state is None:
            raise ValueError("personal_output needs the node's state (where the private layer lives)")

    @property
    def partition_id(self) -> int:
        return self.graph.client_id

    # The forward pass on the client's own subgraph. Subclasses (FedGCN) change what the model sees.
    def forward(self) -> torch.Tensor:
        return self.model(self.data.x, self.data.edge_index)

    def get_parameters(self, config):
        initial = dict(zip(self.keys, self.initial_weights))
        return [initial[k].copy() for k in self.shared]

    def load(self, arrays, keys, config) -> None:
        if not self.personal:
            set_weights(self.model, arrays)
            return
        from ..tasks.torch_state import load_module_arrays

        mine = self.state.get_arrays(PERSONAL_KEY) or dict(zip(self.keys, self.initial_weights))
        load_module_arrays(self.model, {**dict(zip(self.shared, arrays)), **{k: mine[k] for k in self.personal}})

    def train(self, config) -> tuple[int, dict]:
        server_round = int(config.get(wire.SERVER_ROUND, 0))
        seed_torch(round_seed(self.seed, server_round, self.graph.client_id))
        params = dict(self.model.named_parameters())
        anchor = {k: params[k] for k in self.shared if k in params} if self.prox_mu > 0 else None
        loss = train_steps(
            self.model,
            self.forward,
            self.data.y,
            self.data.train_mask,
            self.train_config,
            prox_mu=self.prox_mu,
            prox_anchor=anchor,
        )
        if self.personal:
            from ..tasks.torch_state import module_arrays

            self.state.set_arrays(PERSONAL_KEY, module_arrays(self.model, self.personal))
        n_train = self.graph.num_train
        return n_train, {wire.TRAIN_LOSS: float(loss), wire.NUM_TRAIN: n_train, wire.BATCH_SIZE: n_train}

    def shared_arrays(self):
        if not self.personal:
            return get_weights(self.model)
        from ..tasks.torch_state import module_arrays

        return list(module_arrays(self.model, self.shared).values())

    def model_keys(self) -> list[str]:
        return list(self.shared)

    def evaluation(self) -> dict:
        """Test/validation/training metrics of the model as loaded (the EVALUATE reply's metrics)."""
        g = self.data
        r = evaluate_masks(
            self.model, self.forward, g.y, {"test": g.test_mask, "val": g.val_mask, "train": g.train_mask}
        )
        return {
            wire.ACCURACY: r["test_accuracy"],
            wire.LOSS: r["test_loss"],
            wire.NUM_TEST: r["num_test"],
            wire.VAL_ACCURACY: r["val_accuracy"],
            wire.VAL_LOSS: r["val_loss"],
            wire.NUM_VAL: r["num_val"],
            "train_accuracy": r["train_accuracy"],
        }


class NoOpClient(FlowergraphClient):
    """Does no work: returns what it receives. Runs the federation's own cost (the benchmark floor)."""

    def __init__(self, initial_arrays, client_id: int = 0) -> None:
        self.initial_arrays = initial_arrays
        self.client_id = client_id
        self.partition_id = client_id

    def get_parameters(self, config):
        return self.initial_arrays

    def fit(self, parameters, config):
        metrics = {"partition_id": self.client_id}
        if config.get(wire.EVALUATE_GLOBAL):  # honour fused evaluation, as evaluate() would answer
            metrics.update({f"{wire.EVAL_PREFIX}loss": 0.0, f"{wire.EVAL_PREFIX}num_test": 1})
        return parameters, 1, metrics

    def evaluate(self, parameters, config):
        return 0.0, 1, {"partition_id": self.client_id, "loss": 0.0, "num_test": 1}
