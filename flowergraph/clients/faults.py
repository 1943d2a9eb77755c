"""Fault injection for robustness studies: a client wrapper that makes any method's client misbehave.

``FaultInjectingClient(inner, {round: kind}, partition_id)`` answers every message as ``inner`` does, except the
training ``fit`` message of each listed round (``config["server_round"]``; method phases such as FedGCN's
communication messages are ``get_properties`` messages and are never faulted), where it does what the kind says
(:data:`flowergraph.settings.faults.FAULT_KINDS`): ``raise``, ``nan``, ``shape``, ``exit`` or ``hang``.

Run config: ``inject-faults = "raise:1@2,nan:0@3"`` (kind:partition@round); ``client_app`` wraps the client of
each partition that has a fault. In your own ClientApp::

    client = FaultInjectingClient(MyClient(...), {2: "raise", 4: "exit"}, partition_id=1)
"""

from __future__ import annotations

import os
import sys
import time
from logging import WARNING

import numpy as np
from flwr.common.logger import log

from ..settings.faults import FAULT_KINDS, POISON_SCALE
from .base import Client, ClientWrapper


class InjectedFault(RuntimeError):
    """The exception a ``raise`` fault raises."""


class FaultInjectingClient(ClientWrapper):
    """Wraps a client; misbehaves in the ``fit`` message of the rounds in ``faults`` (``{round: kind}``).

    ``hang_seconds`` is how long a ``hang`` fault sleeps before answering normally (set it above the
    server's round timeout); ``exit_code`` is the status an ``exit`` fault's ``os._exit`` uses.
    """

    def __init__(
        self,
        inner: Client,
        faults: dict[int, str],
        partition_id: int,
        *,
        hang_seconds: float = 60.0,
        exit_code: int = 17,
    ) -> None:
        for server_round, kind in faults.items():
            if kind not in FAULT_KINDS:
                raise ValueError(
                    f"unknown fault kind {kind!r} for round {server_round}; valid choices: {', '.join(FAULT_KINDS)}"
                )
        super().__init__(inner)
        self.faults = dict(faults)
        self.partition_id = partition_id
        self.hang_seconds = hang_seconds
        self.exit_code = exit_code

    # Everything but fit passes straight through (ClientWrapper).
    def _announce(self, kind: str, server_round: int) -> None:
        log(
            WARNING,
            "flowergraph: injecting fault %r at partition %d in round %d (inject-faults)",
            kind,
            self.partition_id,
            server_round,
        )

    def fit(self, parameters, config):
        server_round = config.get("server_round")
        kind = self.faults.get(int(server_round)) if server_round is not None else None
        if kind is None:
            return self.inner.fit(parameters, config)
        server_round = int(server_round)
        self._announce(kind, server_round)
        if kind == "raise":
            raise InjectedFault(f"injected fault 'raise' at partition {self.partition_id} in round {server_round}")
        if kind == "exit":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(self.exit_code)  # no clean-up, no reply: as if the process were killed
        if kind == "hang":
            time.sleep(self.hang_seconds)
            return self.inner.fit(parameters, config)
        arrays, num_examples, metrics = self.inner.fit(parameters, config)
        arrays = [np.asarray(a) for a in arrays]
        if kind in POISON_SCALE:  # global + c x (local - global): finite, well-formed, poisoned
            factor = POISON_SCALE[kind]
            arrays = [
                (np.asarray(g) + factor * (a - np.asarray(g))).astype(a.dtype) if a.dtype.kind == "f" else a
                for a, g in zip(arrays, parameters)
            ]
        elif kind == "nan":
            arrays = [np.full(a.shape, np.nan, dtype=a.dtype) if a.dtype.kind == "f" else a for a in arrays]
        elif kind == "shape":
            i = next((i for i, a in enumerate(arrays) if a.ndim >= 1 and a.shape[0] > 0), None)
            if i is None:
                arrays = arrays + [np.zeros(1, np.float32)]  # nothing to shrink: one array too many instead
            else:
                arrays[i] = arrays[i][:-1].copy()
        return arrays, num_examples, metrics
