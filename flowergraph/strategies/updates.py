"""A training round's replies into the updates the strategy combines: one place for the three ways they come.

* ``secure-agg=ckks``: the clients' encrypted updates summed and decrypted (:class:`~.secure.CKKSAggregation`):
  one update, the weighted mean, shaped like what every client was sent;
* ``secure-agg=secagg+``: Flower's SecAgg+ hands every reply the same secure mean; :func:`~.secure.check_secagg_sum`
  checks it is one, finite and in range before the ordinary checks;
* otherwise (and after the SecAgg+ check): :func:`~.aggregation.accept_updates` checks each update by name against
  what its client was sent and weighs it.

Then at least ``min_clients`` accepted updates (with a positive total weight) are needed to aggregate.
"""

from __future__ import annotations

from logging import WARNING
from typing import Any

from flwr.common.logger import log

from .aggregation import Update, accept_updates
from .nodes import Node, Reply
from .secure import check_secagg_sum


def round_updates(
    strategy: Any, server_round: int, results: list[tuple[Node, Reply]], rec: dict[str, Any]
) -> tuple[list[Update], list[float], bool]:
    """``(updates, weights, enough)`` for ``strategy`` (a :class:`~.base.FederatedStrategy`; not imported here:
    the base imports this module): the round's accepted updates and their weights, and whether they are enough
    to aggregate (``rec`` gets what was rejected and why; an unusable secure sum gives ``([], [], False)``)."""
    s = strategy
    if s.ckks is not None:  # the encrypted sum of the updates (shaped like what every client was sent)
        sent = (s.sent_to(results[0][0]) if results else s.bank.global_model) or {}
        update = s.ckks.round_update(
            server_round,
            results,
            rec,
            sent=sent,
            label=s.client_label,
            partition=s.partition,
            add_bytes=s.book.add_bytes,
            min_clients=s.min_clients,
            timeout=s.round_timeout,
        )
        return ([update], [1.0], True) if update is not None else ([], [], False)
    if s.secure_agg == "secagg+" and not check_secagg_sum(server_round, results, rec, s.policy.secagg_clipping_range):
        return [], [], False
    updates, weights = accept_updates(
        server_round,
        results,
        rec,
        aggregator=s.aggregator,
        label=s.client_label,
        reference=s.sent_to,
        add_bytes=s.book.add_bytes,
        update_kind=s.update_kind,
        max_update_norm=s.policy.max_update_norm,
    )
    needed = max(s.min_clients or 1, 1)
    if len(updates) < needed or sum(weights) <= 0:
        log(
            WARNING,
            "round %s: %d valid updates (%d needed, total weight %.3g); the model is kept unchanged",
            server_round,
            len(updates),
            needed,
            sum(weights),
        )
        return updates, weights, False
    return updates, weights, True
