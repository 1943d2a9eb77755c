"""FedStar client (Tan et al., AAAI 2023) and the baselines that share its code: graph classification on the
client's own graphs, sharing only the part of the model its variant shares.

The wire protocol is in :mod:`flowergraph.methods.fedstar.server`. What a client keeps between messages lives in
its persistent state (:class:`~flowergraph.clients.ClientState` over ``context.state``; Flower re-creates the
client for every message): its whole model as arrays named ``fedstar-model`` (the private parts - FedStar's
feature encoder and classifier - and its last copy of the shared part) and its Adam optimizer
``fedstar-adam`` (created once, so its moments carry across rounds, as in the authors' code). Client
checkpoints save both.

Each ``fit``: build the model (seeded: the same initial weights on every client), load the stored model, copy
the received shared arrays into the model's own parameters (``load_state_dict``, never a rebinding of ``.data``
on a ``state_dict()`` copy), restore Adam, train ``local_epochs`` mini-batch epochs over the training graphs,
store the model and Adam, and return the shared arrays. ``evaluate`` does the same without training.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np
import torch

from ... import wire
from ...tasks.graphcls.data import ClientGraphData
from ...tasks.graphcls.models import build_graph_model, part_keys
from ...tasks.graphcls.training import GraphTrainConfig, evaluate, make_optimizer, train_epochs
from ...tasks.torch_state import load_module_arrays, module_arrays
from ...clients.base import FederatedClient
from ...clients.state import ClientState

# A process's models, per client data object (by id; dropped with the object): Flower re-creates the client for
# every message, and building the GIN with its seeded initialisation was ~16% of a 100-client FedStar run.
_MODELS: dict[int, dict[tuple, tuple[torch.nn.Module, dict[str, torch.Tensor]]]] = {}
_MODELS_LOCK = threading.Lock()
MODELS_PER_DATA = 4  # model settings kept per client's data (a run has one)


def bound_model(data: ClientGraphData, kind: str, seed: int, kwargs: dict) -> torch.nn.Module:
    """The client's model object, built once per process, data and settings and reset to its freshly built
    weights (every parameter and buffer) on each call: what a new build would give, without building it. Scratch
    space: the message's arrays and the client's stored state are loaded into it after."""
    key = (kind, seed, tuple(sorted(kwargs.items())))
    with _MODELS_LOCK:
        models = _MODELS.get(id(data))
        if models is None:
            models = _MODELS[id(data)] = {}
            weakref.finalize(data, _MODELS.pop, id(data), None)
        entry = models.get(key)
        if entry is None:
            if len(models) >= MODELS_PER_DATA:
                models.clear()
            model = build_graph_model(
                kind, data.num_features, data.num_classes, data.structure_dim, seed=seed, **kwargs
            )
            entry = models[key] = (model, {k: v.detach().clone() for k, v in model.state_dict().items()})
    model, initial = entry
    model.load_state_dict(initial)
    return model


MODEL_KEY, OPTIMIZER_KEY = "fedstar-model", "fedstar-adam"
# Layers whose shapes depend on the dataset (input width, number of classes): never averaged across datasets.
DATASET_DEPENDENT = ("feat_in", "out")
# variant -> (model, part shared with the server, FedProx)
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "fedstar": ("decoupled", "structure", False),
    "local": ("gin", "none", False),
    "local-decoupled": ("decoupled", "none", False),
    "fedavg": ("gin", "all", False),
    "fedprox": ("gin", "all", True),
    "fedper": ("gin", "all-but-classifier", False),
    "gcfl": ("gin", "convs", False),
    "share-all": ("decoupled", "all", False),
    "share-feature": ("decoupled", "feature", False),
}


def shared_keys(model, part: str, cross_dataset: bool) -> list[str]:
    """The ``state_dict`` keys that travel: the part's keys, without the dataset-dependent layers when the
    federation spans several datasets (their shapes differ between clients); none for ``part="none"``."""
    if part == "none":
        return []
    keys = part_keys(model, part)
    if cross_dataset:
        keys = [k for k in keys if k.split(".")[0] not in DATASET_DEPENDENT]
    return keys


class FedStarClient(FederatedClient):
    """One data owner's graphs (``data``) and the variant's model; ``state`` is its persistent state.

    ``variant`` in :data:`VARIANTS`; ``cross_dataset``: the clients own different datasets (so only layers
    whose shapes agree can be shared); ``train``: epochs, batch size, Adam settings and the FedProx ``mu``
    (used by ``fedprox`` only); ``model_kwargs``: ``hidden``, ``layers``, ``dropout`` (and ``pool_order`` for the
    decoupled model); ``part``: share this part instead of the variant's (:func:`part_keys`: the graph task's
    FedAvg/FedProx share ``convs`` by default).
    """

    def __init__(
        self,
        data: ClientGraphData,
        *,
        partition_id: int,
        variant: str = "fedstar",
        train: GraphTrainConfig = GraphTrainConfig(),
        model_kwargs: dict | None = None,
        seed: int = 0,
        state: ClientState | None = None,
        cross_dataset: bool = True,
        part: str | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown FedStar variant {variant!r}; valid choices: {', '.join(VARIANTS)}")
        kind, self.part, prox = VARIANTS[variant]
        self.part = part or self.part
        self.train_config = (
            train if prox else GraphTrainConfig(train.local_epochs, train.batch_size, train.lr, train.weight_decay, 0.0)
        )
        self.train_config.validate()
        self.data = data
        self.partition_id = int(partition_id)
        self.variant = variant
        self.seed = seed
        self.state = state if state is not None else ClientState()
        self.model = bound_model(data, kind, seed, dict(model_kwargs or {}))
        self.shared = shared_keys(self.model, self.part, cross_dataset)
        self.state.load_module(MODEL_KEY, self.model)  # nothing stored before this client's first fit

    # ------------------------------------------------------------------------------------------------ wire
    def shared_arrays(self) -> list[np.ndarray]:
        return list(module_arrays(self.model, self.shared).values())

    def model_keys(self) -> list[str]:
        return list(self.shared)

    def load(self, arrays, keys, config) -> None:
        """Copy the server's arrays into the shared part of the model (the model's own tensors)."""
        self.receive(arrays)

    def receive(self, arrays) -> None:
        arrays = list(arrays)
        if len(arrays) != len(self.shared):
            raise ValueError(
                f"the server sent {len(arrays)} arrays; variant {self.variant!r} shares "
                f"{len(self.shared)} ({', '.join(self.shared) or 'none'})"
            )
        load_module_arrays(self.model, dict(zip(self.shared, arrays)))

    # ------------------------------------------------------------------------------------------- methods
    def train(self, config) -> tuple[int, dict]:
        optimizer = make_optimizer(self.model, self.train_config)
        self.state.load_optimizer(OPTIMIZER_KEY, optimizer)
        server_round = int(config.get(wire.SERVER_ROUND, 0))
        loss = train_epochs(
            self.model,
            optimizer,
            self.data.train,
            self.train_config,
            seed=self.seed,
            round=server_round,
            client=self.partition_id,
            prox_part=self.shared if self.train_config.mu > 0 else None,
        )
        self.state.save_module(MODEL_KEY, self.model)
        self.state.save_optimizer(OPTIMIZER_KEY, optimizer)
        n = self.data.num_train
        return n, {
            wire.TRAIN_LOSS: float(loss),
            wire.NUM_TRAIN: n,
            wire.BATCH_SIZE: min(self.train_config.batch_size, n),
        }

    def evaluation(self) -> dict:
        r = evaluate(self.model, self.data, splits=("val", "test"))
        return {
            wire.ACCURACY: r["test_accuracy"],
            wire.LOSS: r["test_loss"],
            wire.NUM_TEST: r["num_test"],
            wire.VAL_ACCURACY: r["val_accuracy"],
            wire.VAL_LOSS: r["val_loss"],
            wire.NUM_VAL: r["num_val"],
        }
