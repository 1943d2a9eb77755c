"""Link-prediction metrics over the scores of positive and negative pairs (Flower-free).

* :func:`auc` -- the area under the ROC curve: the probability that a positive pair, drawn uniformly, scores above
  a negative pair drawn uniformly, ties counting one half: ``(#{(p, n): s_p > s_n} + #{s_p = s_n} / 2) / (P N)``
  (the Mann-Whitney U statistic over P N; what ``sklearn.metrics.roc_auc_score`` gives). Computed from the
  tie-averaged ranks of all P + N scores in O((P + N) log(P + N)).
* :func:`hits_at_k` -- OGB's Hits@K (``ogb.linkproppred.Evaluator``): the fraction of positives scored *strictly*
  above the K-th highest negative score. As in OGB, when there are fewer than K negatives the result is 1.0
  (every positive counts as a hit): OGB's numbers and ours agree, but the value is then meaningless, so the
  evaluation reports the number of negatives next to it (``num_<split>_neg``).
* :func:`bce_loss` -- binary cross-entropy of the logits, positives labelled 1 and negatives 0, averaged over
  all pairs (the training loss).

Scores are logits (any monotone transform gives the same AUC and Hits@K). An empty set of positives (or, for the
AUC, of negatives) gives NaN.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import ConfigError

DEFAULT_K = 50  # OGB's Hits@50 (ogbl-ddi's and ogbl-collab's leaderboards)


def check_k(k) -> int:
    """K of Hits@K as an int; ConfigError for anything but an integer >= 1."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ConfigError(f"hits@K needs an integer K >= 1, got {k!r}")
    return int(k)


def _scores(values, what: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().to(torch.float64).numpy()
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.isfinite(array).all():
        raise ValueError(f"{what} scores must be finite; {int((~np.isfinite(array)).sum())} are not")
    return array


def auc(pos_scores, neg_scores) -> float:
    """ROC AUC of positives against negatives, ties counting 1/2 (NaN if either set is empty)."""
    pos, neg = _scores(pos_scores, "positive"), _scores(neg_scores, "negative")
    p, n = pos.size, neg.size
    if p == 0 or n == 0:
        return math.nan
    values, inverse, counts = np.unique(np.concatenate([pos, neg]), return_inverse=True, return_counts=True)
    # 1-based rank of each distinct value, averaged over its ties: the last rank of the group minus (count - 1)/2.
    mean_rank = np.cumsum(counts) - (counts - 1) / 2.0
    u = mean_rank[inverse[:p]].sum() - p * (p + 1) / 2.0
    return float(u / (p * n))


def hits_at_k(pos_scores, neg_scores, k: int = DEFAULT_K) -> float:
    """OGB's Hits@K: the fraction of positives scored strictly above the K-th highest negative; 1.0 when there
    are fewer than K negatives (as OGB); NaN without positives. ConfigError for K not an integer >= 1."""
    k = check_k(k)
    pos, neg = _scores(pos_scores, "positive"), _scores(neg_scores, "negative")
    if pos.size == 0:
        return math.nan
    if neg.size < k:
        return 1.0
    kth = np.partition(neg, neg.size - k)[neg.size - k]
    return float((pos > kth).mean())


def bce_loss(pos_scores: torch.Tensor, neg_scores: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of the logits (positives 1, negatives 0), differentiable."""
    logits = torch.cat([pos_scores, neg_scores])
    labels = torch.cat([torch.ones_like(pos_scores), torch.zeros_like(neg_scores)])
    return F.binary_cross_entropy_with_logits(logits, labels)


def link_metrics(pos_scores: torch.Tensor, neg_scores: torch.Tensor, k: int, name: str) -> dict[str, float | int]:
    """``<name>_auc``, ``<name>_hits@<k>``, ``<name>_loss`` (NaN when there is no pair), ``num_<name>_pos`` and
    ``num_<name>_neg``."""
    k = check_k(k)
    pos, neg = pos_scores.detach().reshape(-1).float(), neg_scores.detach().reshape(-1).float()
    empty = pos.numel() + neg.numel() == 0
    return {
        f"{name}_auc": auc(pos, neg),
        f"{name}_hits@{k}": hits_at_k(pos, neg, k),
        f"{name}_loss": math.nan if empty else float(bce_loss(pos, neg)),
        f"num_{name}_pos": int(pos.numel()),
        f"num_{name}_neg": int(neg.numel()),
    }
