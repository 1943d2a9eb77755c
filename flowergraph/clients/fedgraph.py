"""FedGraph client (Chen et al.): a data owner's part of the degree exchange, of the per-round embedding exchange
and of training with the policy the server chose for it. The protocol is in :mod:`flowergraph.strategies.fedgraph`,
the messages in :mod:`flowergraph.wire.fedgraph`, the maths in :mod:`flowergraph.tasks.fedgraph` (the functions
the in-process composition calls: ``degree_rows``, ``owner_rows``, ``train_round``, ``evaluate``).

What a client answers:

* phase :data:`~flowergraph.wire.fedgraph.DEGREES` (once): its boundary nodes' global degrees, split per
  requesting client (:func:`~flowergraph.tasks.fedgraph.degree_rows`, ``export_plan``);
  :data:`~flowergraph.wire.fedgraph.STORE_DEGREES`: stores its remote neighbours' degrees.
* phase :data:`~flowergraph.wire.fedgraph.ROWS`: ``h^(k) W^(k)`` of its boundary nodes, computed exactly (no
  dropout, every neighbour) with the model that came with the message, split per requester
  (:func:`~flowergraph.tasks.fedgraph.owner_rows`); never its features, never ``x W^(0)`` unless the run is the
  allShare ablation. :data:`~flowergraph.wire.fedgraph.STORE_ROWS`: stores its remote neighbours' rows for the
  round.
* ``fit``: loads the global model, trains ``local-steps`` iterations with the round's scheme and policy
  (:class:`~flowergraph.wire.fedgraph.RoundPlan` in the config) on the rows received for the round
  (:func:`~flowergraph.tasks.fedgraph.train_round`), returns its weights with ``num_examples`` = the mini-batch
  size used (eq. 8's weight). With ``staleness=one-round`` it also computes, after training, the rows of every
  sharing convolution with its trained model and sends them in the fit reply's metrics
  (:data:`~flowergraph.wire.fedgraph.UPLOAD`).
* ``evaluate`` (and fused evaluation): one exact forward pass with the rows received for the evaluated model.

Seeds: the sampling generator and dropout of client k in round r are seeded by (seed, r, k) (:func:`sample_seed`,
:func:`flowergraph.clients.node.round_seed`), so runs, resumed ones included, repeat exactly.

State (:class:`~flowergraph.clients.ClientState`, saved by client checkpoints): ``fedgraph-degrees`` (its remote
neighbours' degrees, once) and ``fedgraph-tables`` (the received rows of the current round, stamped with it). The
model object and the client's view (adjacencies) live in the process: rebuilt from the graph and the stored degrees
when missing.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

import numpy as np
import torch

from .. import wire
from ..wire import PhaseRequest
from ..wire import fedgraph as msg
from .base import FederatedClient
from .node import _initial_weights, bound_model, round_seed
from .state import ClientState

DEGREES_KEY = "fedgraph-degrees"  # arrays: ids, values
TABLES_KEY = "fedgraph-tables"  # arrays: conv<k> -> [m, w] aligned with the view's remote ids; stamped with the round


def sample_seed(seed: int, server_round: int, client_id: int) -> int:
    """The seed of client ``client_id``'s sampling generator in round ``server_round``."""
    return int(np.random.SeedSequence([seed, server_round, client_id, 0x5A3]).generate_state(1)[0])


def scheme_of(plan: "msg.RoundPlan", num_convs: int) -> Any:
    """The sampling scheme a :class:`~flowergraph.wire.fedgraph.RoundPlan` names."""
    from ..tasks.fedgraph import SamplingPolicy, make_scheme

    if plan.scheme == "fedgraph":
        scheme = SamplingPolicy(kappa=plan.kappa, probs=tuple(plan.probs))
        scheme.check(num_convs)
        return scheme
    return make_scheme(plan.scheme, num_convs, batch_size=plan.kappa)


class FedGraphClient(FederatedClient):
    """One data owner (``graph``: its :class:`~flowergraph.tasks.federated_graph.ClientGraph`)."""

    def __init__(
        self,
        graph: Any,
        *,
        partition_id: int,
        train_config: Any,
        model_kwargs: Mapping[str, Any],
        seed: int = 0,
        cut_norm: str = "local",
        state: ClientState | None = None,
        cache: Any = None,
    ) -> None:
        train_config.validate()
        self.graph = graph
        self.partition_id = int(partition_id)
        self.train_config = train_config
        self.kwargs = {**dict(model_kwargs), "kind": "gcn"}
        self.seed = int(seed)
        self.cut_norm = cut_norm
        self.state = state if state is not None else ClientState()
        self.cache = cache
        self.model = bound_model(graph, self.kwargs, self.seed)
        self.keys = list(self.model.state_dict())
        self.num_convs = len(self.model.convs)
        self.config: Mapping[str, Any] = {}

    # ------------------------------------------------------------------------------------------ the view
    def degrees(self) -> Any:
        """The remote neighbours' degrees received in the degree exchange (a ``Rows``), or None."""
        from ..tasks.fedgraph import Rows

        arrays = self.state.get_arrays(DEGREES_KEY)
        return None if arrays is None else Rows(ids=arrays["ids"], values=arrays["values"])

    def view(self) -> Any:
        """The client's :class:`~flowergraph.tasks.fedgraph.ClientView` (cached per process by the degrees)."""
        from ..tasks.fedgraph import build_view

        degrees = self.degrees()
        digest = (
            "none"
            if degrees is None
            else hashlib.sha1(
                np.ascontiguousarray(degrees.ids).tobytes() + np.ascontiguousarray(degrees.values).tobytes()
            ).hexdigest()
        )
        key = ("fedgraph-view", self.graph.uid, self.cut_norm, digest)
        if self.cache is None:
            return build_view(self.graph, degrees, self.cut_norm)
        return self.cache.get_or_build(key, lambda: build_view(self.graph, degrees, self.cut_norm))

    def _tables(self, config: Mapping[str, Any], server_round: int, sharing: str) -> dict[int, torch.Tensor]:
        """The received rows for ``server_round`` per sharing convolution: the fit/evaluate config's inbox
        (one-round staleness), else what the exchange phase stored for this round."""
        from ..tasks.fedgraph import Rows, exchange_convs

        convs = exchange_convs(sharing, self.num_convs)
        if not convs:
            return {}
        if msg.INBOX in config:
            view = self.view()
            parts = msg.unpack_parts(bytes(config[msg.INBOX]))
            out = {}
            for k in convs:
                width = int(self.model.convs[k].lin.out_channels)
                ids, values = parts.get((k,), (np.zeros(0, np.int64), np.zeros((0, width), np.float32)))
                out[k] = view.remote_table(Rows(ids=ids, values=values), allow_missing=True, width=width)
            return out
        stored = self.state.get_arrays(TABLES_KEY) or {}
        stamp = self.state.round_of(TABLES_KEY)
        missing = [k for k in convs if f"conv{k}" not in stored]
        if stamp != server_round or missing:
            raise RuntimeError(
                f"FedGraph client {self.partition_id}: no received rows for round {server_round} "
                f"(stored: round {stamp}, convolutions {sorted(stored)}); the server must run the "
                f"exchange phase first (use FedGraphStrategy)"
            )
        return {k: torch.from_numpy(np.asarray(stored[f"conv{k}"], dtype=np.float32)) for k in convs}

    # ------------------------------------------------------------------------------------------- phases
    def phase_handlers(self):
        return {
            msg.DEGREES: self._degrees,
            msg.STORE_DEGREES: self._store_degrees,
            msg.ROWS: self._rows,
            msg.STORE_ROWS: self._store_rows,
        }

    def _split(self, rows: Any) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        from ..tasks.fedgraph import export_plan, split_rows

        return {
            j: (np.asarray(r.ids), np.asarray(r.values)) for j, r in split_rows(rows, export_plan(self.graph)).items()
        }

    def _degrees(self, request: PhaseRequest):
        from ..tasks.fedgraph import degree_rows

        return msg.RowsUpload(self._split(degree_rows(self.graph)), 1).encode()

    def _store_degrees(self, request: PhaseRequest):
        got = msg.RowsDelivery.decode(request.arrays, request.values)
        self.state.set_arrays(DEGREES_KEY, {"ids": got.ids, "values": np.asarray(got.values, dtype=np.float64)})
        self.view()  # a reply that lacks a remote neighbour's degree fails now, naming it
        return msg.Stored(len(got.ids)).encode()

    def owner_rows(self, sharing: str, conv: int, tables: Mapping[int, torch.Tensor]) -> Any:
        """``h^(conv) W^(conv)`` of this client's boundary nodes with the model as loaded (a ``Rows``)."""
        from ..tasks.fedgraph import owner_rows

        return owner_rows(self.model, self.view(), sharing, conv, dict(tables))

    def _rows(self, request: PhaseRequest):
        from ..tasks.torch_state import load_module_arrays

        ask = msg.RowsRequest.decode(request.arrays, request.values)
        if request.model is None:
            raise ValueError("a FedGraph rows request carries the model the rows are computed with; none came")
        load_module_arrays(self.model, request.model)
        lower = {}
        stored = self.state.get_arrays(TABLES_KEY) or {}
        if self.state.round_of(TABLES_KEY) == request.round:
            lower = {
                int(k[4:]): torch.from_numpy(np.asarray(v, dtype=np.float32))
                for k, v in stored.items()
                if int(k[4:]) < ask.conv
            }
        rows = self.owner_rows(ask.sharing, ask.conv, lower)
        return msg.RowsUpload(self._split(rows), rows.width).encode()

    def _store_rows(self, request: PhaseRequest):
        from ..tasks.fedgraph import Rows

        got = msg.RowsDelivery.decode(request.arrays, request.values)
        width = int(self.model.convs[got.conv].lin.out_channels)
        table = self.view().remote_table(
            Rows(ids=got.ids, values=np.asarray(got.values).reshape(-1, width)), width=width
        )
        tables = self.state.get_arrays(TABLES_KEY) if self.state.round_of(TABLES_KEY) == request.round else None
        tables = dict(tables or {})
        tables[f"conv{got.conv}"] = table.numpy()
        self.state.set_arrays(TABLES_KEY, tables, round=request.round)
        return msg.Stored(len(got.ids)).encode()

    # ------------------------------------------------------------------------------------ fit / evaluate
    def get_parameters(self, config):
        initial = dict(zip(self.keys, _initial_weights(self.graph, self.kwargs, self.seed)))
        return [initial[k].copy() for k in self.keys]

    def model_keys(self) -> list[str]:
        return list(self.keys)

    def load(self, arrays, keys, config) -> None:
        from ..tasks.torch_state import load_module_arrays

        self.config = config
        load_module_arrays(self.model, dict(zip(keys or self.keys, arrays)))

    def _plan(self, config: Mapping[str, Any]) -> "msg.RoundPlan":
        plan = msg.RoundPlan.from_config(config)
        if plan is None:
            raise ValueError(
                "a FedGraph fit/evaluate config carries the round's plan (sharing, scheme, policy); "
                "none came: use FedGraphStrategy"
            )
        return plan

    def train(self, config) -> tuple[int, dict]:
        from ..tasks.fedgraph import exchange_convs, train_round

        plan = self._plan(config)
        server_round = int(config.get(wire.SERVER_ROUND, 0))
        tables = self._tables(config, server_round, plan.sharing)
        scheme = scheme_of(plan, self.num_convs)
        generator = torch.Generator().manual_seed(sample_seed(self.seed, server_round, self.partition_id))
        torch.manual_seed(round_seed(self.seed, server_round, self.partition_id))
        result = train_round(
            self.model, self.view(), scheme, plan.sharing, tables, self.train_config, generator=generator
        )
        metrics: dict[str, Any] = {
            wire.TRAIN_LOSS: float(result.loss),
            wire.NUM_TRAIN: int(self.graph.num_train),
            wire.BATCH_SIZE: int(result.num_samples),
            msg.LOCAL_SECONDS: float(result.seconds),
            msg.SAMPLE_SECONDS: float(result.sample_seconds),
            msg.NODES_PER_ITERATION: float(result.nodes_per_iteration),
            msg.EDGES_PER_ITERATION: float(result.edges_per_iteration),
            msg.FORWARD_MACS: int(result.forward_macs),
        }
        if plan.staleness == "one-round":  # the rows the others use next round, from the trained model
            self.model.eval()
            parts: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
            own = dict(tables)
            for k in exchange_convs(plan.sharing, self.num_convs):
                rows = self.owner_rows(plan.sharing, k, own)
                for j, part in self._split(rows).items():
                    parts[(k, j)] = part
            metrics[msg.UPLOAD] = msg.pack_parts(parts)
        return int(result.num_samples), metrics

    def shared_arrays(self):
        from ..tasks.torch_state import module_arrays

        return list(module_arrays(self.model, self.keys).values())

    def evaluation(self) -> dict:
        from ..tasks.fedgraph import evaluate

        plan = self._plan(self.config)
        server_round = int(self.config.get(wire.SERVER_ROUND, 0))
        tables = self._tables(self.config, server_round, plan.sharing)
        r = evaluate(self.model, self.view(), plan.sharing, tables)
        return {
            wire.ACCURACY: r["test_accuracy"],
            wire.LOSS: r["test_loss"],
            wire.NUM_TEST: r["num_test"],
            wire.VAL_ACCURACY: r["val_accuracy"],
            wire.VAL_LOSS: r["val_loss"],
            wire.NUM_VAL: r["num_val"],
            "train_accuracy": r["train_accuracy"],
        }
