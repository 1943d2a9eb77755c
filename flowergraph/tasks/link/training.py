"""Local training and evaluation of a :class:`.model.LinkPredictor` (Flower-free).

One epoch is one full-batch step: encode the client's nodes on its message-passing graph, score the training
positives and as many freshly drawn negatives (``neg_ratio`` per positive: PyG's ``negative_sampling``, pairs of
the client's own nodes that are not edges of its message-passing graph, seeded by (seed, epoch)), and take one
optimiser step on the binary cross-entropy of the logits (PyG's ``examples/link_pred.py``). Evaluation encodes
once on the same message-passing graph and scores the fixed val / test pairs (:mod:`.metrics`); the cross-client
test set is scored from every owner's embeddings (:func:`evaluate_cross`).
"""

from __future__ import annotations

import copy
import math
import time
from typing import Callable, Mapping

import torch

from ..federated_graph import GraphSpec
from ..training import TrainConfig, make_optimizer
from .data import ClientLinkData, CrossTestSet, LinkSpec, centralized_link_data, score_cross, seeded_rngs
from .metrics import DEFAULT_K, bce_loss, check_k, link_metrics
from .model import LinkPredictor

_NEG_SALT = 0x7E6A  # the training negatives of an epoch: (seed, epoch, salt)

Encode = Callable[[LinkPredictor], torch.Tensor]
"""How a client's node embeddings are computed from the model (default: ``model.encode(data.x,
data.edge_index)``, its message-passing graph); FedGCN's encodes the exchanged aggregations
(:func:`.fedgcn.fedgcn_encode`)."""

# PyG's examples/link_pred.py: Adam, lr 0.01, no weight decay; one local step = one epoch.
LINK_TRAIN = TrainConfig(local_steps=1, optimizer="adam", lr=0.01, weight_decay=0.0)


def sample_train_negatives(data: ClientLinkData, seed: int, epoch: int, neg_ratio: float = 1.0) -> torch.Tensor:
    """An epoch's training negatives: ``int(neg_ratio * #train positives)`` pairs of own nodes that are not
    edges of the message-passing graph (PyG's ``negative_sampling``, sparse; it may return a few fewer on a
    dense graph), a pure function of (seed, epoch)."""
    from torch_geometric.utils import negative_sampling

    count = int(neg_ratio * data.train_pos.size(1))
    if count == 0 or data.num_nodes < 2:
        return torch.empty((2, 0), dtype=torch.long)
    with seeded_rngs(seed, epoch, _NEG_SALT):
        return negative_sampling(data.edge_index, num_nodes=data.num_nodes, num_neg_samples=count, method="sparse")


def link_epoch(
    model: LinkPredictor,
    optimizer: torch.optim.Optimizer,
    data: ClientLinkData,
    *,
    seed: int,
    epoch: int,
    neg_ratio: float = 1.0,
    prox_mu: float = 0.0,
    prox_anchor: Mapping[str, torch.Tensor] | None = None,
    encode: Encode | None = None,
) -> float:
    """One full-batch step on the training positives and the epoch's negatives; returns the loss (NaN and no
    step when the client has no training edge). ``prox_mu`` > 0 adds FedProx's proximal term ``mu/2 sum ||w -
    w_0||^2`` over the named parameters of ``prox_anchor`` (detached values), as the node task's ``train_steps``."""
    if data.train_pos.size(1) == 0:
        return math.nan
    model.train()
    neg = sample_train_negatives(data, seed, epoch, neg_ratio)
    optimizer.zero_grad()
    z = model.encode(data.x, data.edge_index) if encode is None else encode(model)
    loss = bce_loss(model.decode(z, data.train_pos), model.decode(z, neg))
    if prox_mu > 0 and prox_anchor:
        params = dict(model.named_parameters())
        loss = loss + prox_mu / 2 * sum(((params[k] - w0) ** 2).sum() for k, w0 in prox_anchor.items())
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def train_link(
    model: LinkPredictor,
    data: ClientLinkData,
    cfg: TrainConfig = LINK_TRAIN,
    *,
    seed: int = 0,
    start_epoch: int = 0,
    neg_ratio: float = 1.0,
    prox_mu: float = 0.0,
    encode: Encode | None = None,
) -> float:
    """``cfg.local_steps`` epochs with a fresh optimiser (as the node task's local rounds); epoch ``e`` draws
    the negatives of ``start_epoch + e`` (a federated round passes its own, so no two rounds reuse negatives).
    ``prox_mu`` > 0: FedProx's proximal term towards the weights the call started from. Returns the mean loss
    over the epochs, NaN when the client has no training edge."""
    cfg.validate()
    optimizer = make_optimizer(model.parameters(), cfg)
    anchor = {k: v.detach().clone() for k, v in model.named_parameters()} if prox_mu > 0 else None
    losses = [
        link_epoch(
            model,
            optimizer,
            data,
            seed=seed,
            epoch=start_epoch + e,
            neg_ratio=neg_ratio,
            prox_mu=prox_mu,
            prox_anchor=anchor,
            encode=encode,
        )
        for e in range(cfg.local_steps)
    ]
    return sum(losses) / len(losses)


@torch.no_grad()
def embed(model: LinkPredictor, data: ClientLinkData, encode: Encode | None = None) -> torch.Tensor:
    """The client's node embeddings ([n_k, out], local order) on its message-passing graph (or by ``encode``), in
    eval mode."""
    model.eval()
    return model.encode(data.x, data.edge_index) if encode is None else encode(model)


@torch.no_grad()
def evaluate_link(
    model: LinkPredictor,
    data: ClientLinkData,
    *,
    k: int = DEFAULT_K,
    splits: tuple[str, ...] = ("val", "test"),
    z: torch.Tensor | None = None,
    encode: Encode | None = None,
) -> dict[str, float | int]:
    """Metrics of the client's own ``splits`` (``val``, ``test``) from one eval-mode encoding on its
    message-passing graph (or by ``encode``, or the given ``z``): ``<split>_auc``, ``<split>_hits@<k>``,
    ``<split>_loss``, ``num_<split>_pos``, ``num_<split>_neg``."""
    k = check_k(k)
    z = embed(model, data, encode) if z is None else z
    out: dict[str, float | int] = {}
    for split in splits:
        if split not in ("val", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: val, test")
        pos, neg = getattr(data, f"{split}_pos"), getattr(data, f"{split}_neg")
        out.update(link_metrics(model.decode(z, pos), model.decode(z, neg), k, split))
    return out


@torch.no_grad()
def evaluate_cross(
    cross: CrossTestSet, embeddings: Mapping[int, torch.Tensor], *, k: int = DEFAULT_K
) -> dict[str, float | int]:
    """Metrics of the cross-client test set (``cross_auc``, ``cross_hits@<k>``, ``cross_loss``,
    ``num_cross_pos``, ``num_cross_neg``), each endpoint embedded by its owner (:func:`.data.score_cross`)."""
    pos, neg = score_cross(cross, embeddings)
    return link_metrics(pos, neg, k, "cross")


def train_centralized(
    gspec: GraphSpec,
    lspec: LinkSpec = LinkSpec(),
    *,
    encoder: str = "gcn",
    hidden: int = 128,
    out: int = 64,
    layers: int = 2,
    dropout: float = 0.0,
    epochs: int = 100,
    lr: float = 0.01,
    weight_decay: float = 0.0,
    k: int = DEFAULT_K,
    seed: int = 0,
) -> dict[str, float | int]:
    """Centralized link prediction on the whole graph (one split, :func:`.data.centralized_link_data`): one Adam
    optimiser over ``epochs`` epochs, validation every epoch, and the test metrics of the epoch with the best
    validation AUC (PyG's ``examples/link_pred.py`` protocol). Returns the val/test metrics of that epoch,
    ``best_epoch`` (1-based), ``epochs``, ``train_loss`` (the last epoch's) and ``seconds`` (training and
    evaluation, not the data)."""
    k = check_k(k)
    cfg = TrainConfig(local_steps=epochs, optimizer="adam", lr=lr, weight_decay=weight_decay)
    cfg.validate()
    data = centralized_link_data(gspec, lspec)
    model = LinkPredictor(data.num_features, encoder, hidden=hidden, out=out, layers=layers, dropout=dropout, seed=seed)
    optimizer = make_optimizer(model.parameters(), cfg)
    started = time.perf_counter()
    best_auc, best_epoch, best_state, loss = -math.inf, 0, None, math.nan
    for epoch in range(epochs):
        loss = link_epoch(model, optimizer, data, seed=seed, epoch=epoch, neg_ratio=lspec.neg_ratio)
        val_auc = evaluate_link(model, data, k=k, splits=("val",))["val_auc"]
        if not val_auc <= best_auc:  # a better epoch; NaN (no validation edge): the last epoch
            best_auc, best_epoch, best_state = val_auc, epoch + 1, copy.deepcopy(model.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)
    result = evaluate_link(model, data, k=k)
    result.update(best_epoch=best_epoch, epochs=epochs, train_loss=loss, seconds=time.perf_counter() - started)
    return result
