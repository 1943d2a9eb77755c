"""Flower-free core of the ``link`` task: link prediction on one graph cut across clients, links split across
silos (docs/tasks/link.md).

* :mod:`.data` -- :class:`LinkSpec` (the edge split), each client's own edges split into message-passing/train,
  val and test positives with negatives (:func:`client_link_data`), the cross-client test set
  (:func:`cross_test_set`) scored from every owner's embeddings (:func:`score_cross`), the centralized variant.
* :mod:`.model` -- :class:`LinkPredictor`: GCN or GraphSAGE encoder, dot-product decoder.
* :mod:`.metrics` -- AUC, OGB's Hits@K, the BCE loss.
* :mod:`.training` -- local epochs with fresh negatives, evaluation, the centralized runner.

Nothing here imports ``flwr``.
"""

from .data import (
    ClientLinkData,
    CrossTestSet,
    LinkSpec,
    build_client_link_data,
    centralized_link_data,
    client_link_data,
    graph_link_data,
    cross_test_set,
    known_cross,
    score_cross,
    seeded_rngs,
    split_own_edges,
)
from .metrics import DEFAULT_K, auc, bce_loss, check_k, hits_at_k, link_metrics
from .model import ENCODERS, LinkPredictor, dot
from .training import (
    LINK_TRAIN,
    Encode,
    embed,
    evaluate_cross,
    evaluate_link,
    link_epoch,
    sample_train_negatives,
    train_centralized,
    train_link,
)

__all__ = [
    "DEFAULT_K",
    "ENCODERS",
    "LINK_TRAIN",
    "ClientLinkData",
    "CrossTestSet",
    "LinkPredictor",
    "LinkSpec",
    "auc",
    "bce_loss",
    "build_client_link_data",
    "centralized_link_data",
    "check_k",
    "client_link_data",
    "graph_link_data",
    "cross_test_set",
    "known_cross",
    "Encode",
    "dot",
    "embed",
    "evaluate_cross",
    "evaluate_link",
    "hits_at_k",
    "link_epoch",
    "link_metrics",
    "sample_train_negatives",
    "score_cross",
    "seeded_rngs",
    "split_own_edges",
    "train_centralized",
    "train_link",
]
