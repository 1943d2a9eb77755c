"""The link-prediction client (``task=link``): a GNN encoder with an inner-product decoder trained on the client's
own training edges (:mod:`flowergraph.tasks.link`); the wire format is the node task's (named arrays, weighted
averaging: :mod:`flowergraph.strategies.weighted`)."""

from __future__ import annotations

import functools
import threading
import weakref

import torch

from .. import wire
from ..tasks.compute import seed_torch
from ..tasks.link import ClientLinkData, LinkPredictor, evaluate_link, train_link
from ..tasks.training import TrainConfig
from .base import FederatedClient
from .node import round_seed

PERSONAL_KEY = "link-personal"  # the arrays that stay on the client (FedPer: the last layer; local: all)
PERSONAL = ("", "fedper", "local")

_MODELS: "weakref.WeakKeyDictionary[ClientLinkData, dict[tuple, LinkPredictor]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def bound_model(data: ClientLinkData, kwargs: dict, seed: int) -> LinkPredictor:
    """The client's model object, built once per process, data and settings (scratch space: every message loads
    the weights it carries first), held weakly by the data as the node client's models are."""
    key = (tuple(sorted(kwargs.items())), seed)
    with _LOCK:
        models = _MODELS.setdefault(data, {})
        if key not in models:
            if len(models) >= 4:
                models.clear()
            models[key] = LinkPredictor(data.num_features, **kwargs, seed=seed)
        return models[key]


@functools.lru_cache(maxsize=32)
def initial_state(key: tuple, in_dim: int, seed: int) -> dict[str, torch.Tensor]:
    """The seeded initial model's state (identical on every client; what ``get_parameters`` returns)."""
    model = LinkPredictor(in_dim, **dict(key), seed=seed)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class LinkClient(FederatedClient):
    """Trains the link predictor on the client's own training edges and evaluates it on its own validation and test
    pairs (the cross-client test set is scored on the server: ``server-eval=true``).

    ``model_kwargs``: :class:`LinkPredictor` keyword arguments (encoder, hidden, out, layers, dropout); ``seed``
    fixes the initial model, each round's dropout and each epoch's negatives; ``k``: K of Hits@K; ``personal``:
    ``fedper`` (the last convolution stays on the client, in ``state``), ``local`` (the whole model stays: the
    client ignores what the server sends after its first round) or ``""``; ``prox_mu`` > 0: FedProx's proximal
    term towards the received model.

    Evaluation metrics: ``auc``, ``hits@K``, ``loss`` and ``num_test`` (test pairs, positives and negatives) of the
    own test set, the same with ``val_`` of the validation set, and the positive counts."""

    def __init__(
        self,
        data: ClientLinkData,
        train_config: TrainConfig,
        model_kwargs: dict | None = None,
        *,
        seed: int = 0,
        k: int = 50,
        neg_ratio: float = 1.0,
        personal: str = "",
        prox_mu: float = 0.0,
        state=None,
    ) -> None:
        from .state import ClientState

        train_config.validate()
        if personal not in PERSONAL:
            raise ValueError(f"unknown personal {personal!r}; valid choices: {', '.join(map(repr, PERSONAL))}")
        if prox_mu < 0:
            raise ValueError(f"prox_mu must be >= 0, got {prox_mu}")
        self.data = data
        self.train_config = train_config
        self.seed, self.k, self.neg_ratio, self.prox_mu = int(seed), int(k), float(neg_ratio), float(prox_mu)
        kwargs = {"encoder": "gcn", **(model_kwargs or {})}
        self.model = bound_model(data, kwargs, self.seed)
        self.initial = initial_state(tuple(sorted(kwargs.items())), data.num_features, self.seed)
        self.keys = list(self.model.state_dict())
        last = f"encoder.convs.{int(kwargs.get('layers', 2)) - 1}."
        self.personal = {"": [], "fedper": [k for k in self.keys if k.startswith(last)], "local": list(self.keys)}[
            personal
        ]
        self.keep_all = personal == "local"
        self.shared = [k for k in self.keys if k not in self.personal]
        self.state = state if isinstance(state, ClientState) or state is None else ClientState(state)
        if self.personal and self.state is None:
            raise ValueError(f"personal={personal!r} needs the node's state (where the private arrays live)")

    @property
    def partition_id(self) -> int:
        return self.data.client_id

    def encoding(self):
        """How the model embeds this client's nodes (:data:`flowergraph.tasks.link.training.Encode`); None: on its
        message-passing graph. FedGCN's client encodes its exchanged aggregations."""
        return None

    def model_keys(self) -> list[str]:
        return list(self.keys if self.keep_all else self.shared)

    def get_parameters(self, config):
        return [self.initial[k].numpy().copy() for k in self.model_keys()]

    def load(self, arrays, keys, config) -> None:
        received = dict(zip(self.model_keys(), arrays))
        mine = self.state.get_arrays(PERSONAL_KEY) if self.personal else None
        if mine is None and self.personal and not self.keep_all:  # FedPer's first round: the initial last layer
            mine = {k: self.initial[k].numpy() for k in self.personal}
        values = {**received, **(mine or {})}  # local's first round: the (initial) model it was sent
        self.model.load_state_dict({k: torch.as_tensor(values[k]) for k in self.keys})

    def train(self, config) -> tuple[int, dict]:
        server_round = int(config.get(wire.SERVER_ROUND, 0))
        seed_torch(round_seed(self.seed, server_round, self.data.client_id))
        steps = self.train_config.local_steps
        loss = train_link(
            self.model,
            self.data,
            self.train_config,
            seed=self.seed,
            start_epoch=max(0, server_round - 1) * steps,
            neg_ratio=self.neg_ratio,
            prox_mu=self.prox_mu,
            encode=self.encoding(),
        )
        if self.personal:
            state = self.model.state_dict()
            self.state.set_arrays(PERSONAL_KEY, {k: state[k].detach().numpy().copy() for k in self.personal})
        n = int(self.data.train_pos.size(1))
        return n, {wire.TRAIN_LOSS: float(loss), wire.NUM_TRAIN: n, wire.BATCH_SIZE: n}

    def shared_arrays(self):
        state = self.model.state_dict()
        return [state[k].detach().numpy().copy() for k in self.model_keys()]

    def evaluation(self) -> dict:
        """Own validation and test metrics of the model as loaded (the EVALUATE reply's metrics)."""
        r = evaluate_link(self.model, self.data, k=self.k, encode=self.encoding())
        k = self.k
        return {
            "auc": r["test_auc"],
            f"hits@{k}": r[f"test_hits@{k}"],
            wire.LOSS: r["test_loss"],
            wire.NUM_TEST: r["num_test_pos"] + r["num_test_neg"],
            "num_test_pos": r["num_test_pos"],
            "val_auc": r["val_auc"],
            f"val_hits@{k}": r[f"val_hits@{k}"],
            wire.VAL_LOSS: r["val_loss"],
            wire.NUM_VAL: r["num_val_pos"] + r["num_val_neg"],
            "num_val_pos": r["num_val_pos"],
        }
