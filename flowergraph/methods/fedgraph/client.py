"""FedGraph client (Chen et al.): a data owner's part of the degree exchange, of the per-round embedding exchange
and of training with the policy the server chose for it. The protocol is in :mod:`flowergraph.methods.fedgraph.server`,
the messages in :mod:`flowergraph.methods.fedgraph.wire`, the maths in :mod:`flowergraph.methods.fedgraph.maths` (the
functions the in-process composition calls: ``degree_rows``, ``owner_rows``, ``train_round``, ``evaluate``).

What a client answers:

* phase :data:`~flowergraph.methods.fedgraph.wire.DEGREES` (once): its boundary nodes' global degrees, split per
  requesting client (:func:`~flowergraph.methods.fedgraph.maths.degree_rows`, ``export_plan``);
  :data:`~flowergraph.methods.fedgraph.wire.STORE_DEGREES`: stores its remote neighbours' degrees.
* phase :data:`~flowergraph.methods.fedgraph.wire.ROWS`: ``h^(k) W^(k)`` of its boundary nodes, computed exactly (no
  dropout, every neighbour) with the model that came with the message, split per requester
  (:func:`~flowergraph.methods.fedgraph.maths.owner_rows`); never its features, never ``x W^(0)`` unless the run is the
  allShare ablation. :data:`~flowergraph.methods.fedgraph.wire.STORE_ROWS`: stores its remote neighbours' rows for the
  round.
* ``fit``: loads the global model, trains ``local-steps`` iterations with the round's scheme and policy
  (:class:`~flowergraph.methods.fedgraph.wire.RoundPlan` in the config) on the rows received for the round
  (:func:`~flowergraph.methods.fedgraph.maths.train_round`), returns its weights with ``num_examples`` = the mini-batch
  size used (eq. 8's weight). With ``staleness=one-round`` it also computes, after training, the rows of every
  sharing convolution with its trained model and sends them in the fit reply's metrics
  (:data:`~flowergraph.methods.fedgraph.wire.UPLOAD`).
* ``evaluate`` (and fused evaluation): one exact forward pass with the rows received for the evaluated model.
* ``exchange=iteration`` (the paper's cadence): :data:`~flowergraph.methods.fedgraph.wire.BEGIN` loads the round's
  model, creates the round's Adam, seeds the sampling generator and the dropout generator as a round-cadence ``fit``
  would, draws the first sample and answers, per owner, the global ids of exactly the remote neighbours in it;
  :data:`~flowergraph.methods.fedgraph.wire.ITERATION_ROWS` (as owner): ``h^(k) W^(k)`` of the ids asked of it, computed
  exactly with its current local weights (those of its own last step); :data:`~flowergraph.methods.fedgraph.wire.STEP`:
  one local iteration with the rows received, then the next sample's requests. ``fit`` takes the last iteration
  (its rows in the config) and returns the weights. Between messages the round's training state (weights, Adam's
  moments, both generators, the current sample, running counts) lives in the client's state (``fedgraph-iter-*``,
  stamped with the round; deleted when ``fit`` ends), so every message may run in a fresh process.

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

from ... import wire
from ...wire import PhaseRequest
from . import wire as msg
from ...clients.base import FederatedClient
from ...clients.node import _initial_weights, bound_model, round_seed
from ...clients.state import ClientState
from ...tasks.compute import seed_torch

DEGREES_KEY = "fedgraph-degrees"  # arrays: ids, values
TABLES_KEY = "fedgraph-tables"  # arrays: conv<k> -> [m, w] aligned with the view's remote ids; stamped with the round
# exchange=iteration: the round's training state between messages (stamped with the round, deleted by fit)
ITER_MODEL, ITER_ADAM, ITER_SAMPLER, ITER_DROPOUT = (
    "fedgraph-iter-model",
    "fedgraph-iter-adam",
    "fedgraph-iter-sampler",
    "fedgraph-iter-dropout",
)
ITER_SAMPLE, ITER_STATS = "fedgraph-iter-sample", "fedgraph-iter-stats"
ITER_KEYS = (ITER_MODEL, ITER_ADAM, ITER_SAMPLER, ITER_DROPOUT, ITER_SAMPLE, ITER_STATS)


def sample_arrays(sample: Any) -> dict[str, np.ndarray]:
    """A :class:`~flowergraph.methods.fedgraph.maths.LayeredSample` as named arrays (kept in the client's state)."""
    out: dict[str, np.ndarray] = {}
    for k, nodes in enumerate(sample.nodes):
        out[f"nodes{k}"] = nodes.numpy()
    for k, (remote, edges) in enumerate(zip(sample.remote, sample.convs)):
        out[f"remote{k}"] = remote.numpy()
        out[f"dst{k}"], out[f"src{k}"], out[f"weight{k}"] = edges.dst.numpy(), edges.src.numpy(), edges.weight.numpy()
    return out


def sample_of(arrays: Mapping[str, np.ndarray]) -> Any:
    """What :func:`sample_arrays` stored, as a ``LayeredSample``."""
    from .maths import ConvEdges, LayeredSample

    num_convs = sum(1 for k in arrays if k.startswith("remote"))

    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(np.array(arrays[name]))

    return LayeredSample(
        nodes=[t(f"nodes{k}") for k in range(num_convs + 1)],
        remote=[t(f"remote{k}") for k in range(num_convs)],
        convs=[ConvEdges(dst=t(f"dst{k}"), src=t(f"src{k}"), weight=t(f"weight{k}")) for k in range(num_convs)],
    )


def sample_seed(seed: int, server_round: int, client_id: int) -> int:
    """The seed of client ``client_id``'s sampling generator in round ``server_round``."""
    return int(np.random.SeedSequence([seed, server_round, client_id, 0x5A3]).generate_state(1)[0])


def scheme_of(plan: "msg.RoundPlan", num_convs: int) -> Any:
    """The sampling scheme a :class:`~flowergraph.methods.fedgraph.wire.RoundPlan` names."""
    from .maths import SamplingPolicy, make_scheme

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
        from .maths import Rows

        arrays = self.state.get_arrays(DEGREES_KEY)
        return None if arrays is None else Rows(ids=arrays["ids"], values=arrays["values"])

    def view(self) -> Any:
        """The client's :class:`~flowergraph.methods.fedgraph.maths.ClientView` (cached per process by the degrees)."""
        from .maths import build_view

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
        from .maths import Rows, exchange_convs

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
            msg.BEGIN: self._begin,
            msg.ITERATION_ROWS: self._iteration_rows,
            msg.STEP: self._step,
        }

    def _split(self, rows: Any) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        from .maths import export_plan, split_rows

        return {
            j: (np.asarray(r.ids), np.asarray(r.values)) for j, r in split_rows(rows, export_plan(self.graph)).items()
        }

    def _degrees(self, request: PhaseRequest):
        from .maths import degree_rows

        return msg.RowsUpload(self._split(degree_rows(self.graph)), 1).encode()

    def _store_degrees(self, request: PhaseRequest):
        got = msg.RowsDelivery.decode(request.arrays, request.values)
        self.state.set_arrays(DEGREES_KEY, {"ids": got.ids, "values": np.asarray(got.values, dtype=np.float64)})
        self.view()  # a reply that lacks a remote neighbour's degree fails now, naming it
        return msg.Stored(len(got.ids)).encode()

    def owner_rows(self, sharing: str, conv: int, tables: Mapping[int, torch.Tensor]) -> Any:
        """``h^(conv) W^(conv)`` of this client's boundary nodes with the model as loaded (a ``Rows``)."""
        from .maths import owner_rows

        return owner_rows(self.model, self.view(), sharing, conv, dict(tables))

    def _rows(self, request: PhaseRequest):
        from ...tasks.torch_state import load_module_arrays

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
        from .maths import owner_rows_and_macs

        rows, macs = owner_rows_and_macs(self.model, self.view(), ask.sharing, ask.conv, lower)
        return msg.RowsUpload(self._split(rows), rows.width, macs).encode()

    def _store_rows(self, request: PhaseRequest):
        from .maths import Rows

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

    # ------------------------------------------------------------------------- exchange=iteration (the paper's)
    def _iteration_state(self, server_round: int) -> tuple[Any, Any, dict[str, Any]]:
        """The round's training state as the last message left it: the model loaded with the current local
        weights, Adam, the sampling generator and the running counts with the round's plan (the dropout generator
        is restored by :meth:`_iteration_step`)."""
        from ...tasks.training import make_optimizer

        stats = self.state.get_values(ITER_STATS)
        if stats is None or self.state.round_of(ITER_STATS) != server_round:
            raise RuntimeError(
                f"FedGraph client {self.partition_id}: no local iteration state for round {server_round} "
                f"(stored: round {self.state.round_of(ITER_STATS)}); exchange=iteration starts every round with "
                f"a {msg.BEGIN!r} message (use FedGraphStrategy)"
            )
        self.state.load_module(ITER_MODEL, self.model)
        optimizer = make_optimizer(self.model.parameters(), self.train_config)
        self.state.load_optimizer(ITER_ADAM, optimizer)
        generator = torch.Generator()
        self.state.load_rng(ITER_SAMPLER, generator)
        return optimizer, generator, stats

    def _requests(self, sample: Any, plan: "msg.RoundPlan", iteration: int) -> tuple[list[np.ndarray], dict]:
        """The ids of the remote neighbours in ``sample`` per owner (the sharing convolution's), encoded."""
        from .maths import exchange_convs

        (conv,) = exchange_convs(plan.sharing, self.num_convs)
        view = self.view()
        pos = sample.remote[conv]
        ids, owners = view.remote_ids[pos].numpy(), view.remote_owner[pos].numpy()
        parts = {int(j): np.sort(ids[owners == j]) for j in np.unique(owners)}
        return msg.IdsByClient(parts, conv, iteration).encode()

    def _save_iteration(self, server_round: int, optimizer: Any, generator: Any, sample: Any, stats: dict) -> None:
        self.state.save_module(ITER_MODEL, self.model)
        self.state.save_optimizer(ITER_ADAM, optimizer)
        self.state.save_rng(ITER_SAMPLER, generator)
        if sample is not None:
            self.state.set_arrays(ITER_SAMPLE, sample_arrays(sample))
        self.state.set_values(ITER_STATS, stats, round=server_round)

    def _draw(self, plan: "msg.RoundPlan", generator: Any, stats: dict) -> Any:
        """The next local iteration's sample (full batch: the same every iteration), its drawing time counted."""
        import time

        from .maths import FullBatch, shared_convs

        if stats["num_train"] == 0:
            return None
        scheme = scheme_of(plan, self.num_convs)
        if isinstance(scheme, FullBatch) and ITER_SAMPLE in self.state and stats["iteration"] > 0:
            return sample_of(self.state.get_arrays(ITER_SAMPLE) or {})
        train_idx = torch.nonzero(self.graph.train_mask, as_tuple=True)[0]
        start = time.perf_counter()
        sample = scheme.sample(self.view(), train_idx, shared_convs(plan.sharing, self.num_convs), generator)
        elapsed = time.perf_counter() - start
        stats["sample_seconds"] += elapsed
        stats["seconds"] += elapsed
        return sample

    def _begin(self, request: PhaseRequest):
        from .maths import exchange_convs
        from ...tasks.torch_state import load_module_arrays
        from ...tasks.training import make_optimizer

        begin = msg.Begin.decode(request.arrays, request.values)
        plan = begin.plan
        if begin.iterations != self.train_config.local_steps:
            raise ValueError(
                f"the server runs {begin.iterations} local iterations per round, this client's "
                f"fedgraph.local-steps is {self.train_config.local_steps}"
            )
        if len(exchange_convs(plan.sharing, self.num_convs)) != 1:
            raise ValueError(
                f"exchange=iteration needs exactly one sharing convolution; sharing {plan.sharing!r} with "
                f"{self.num_convs} convolutions has {list(exchange_convs(plan.sharing, self.num_convs))}"
            )
        if request.model is None:
            raise ValueError("a FedGraph begin message carries the round's model; none came")
        for key in ITER_KEYS:  # anything left from an unfinished round
            self.state.delete(key)
        load_module_arrays(self.model, request.model)
        self.model.train()
        optimizer = make_optimizer(self.model.parameters(), self.train_config)
        generator = torch.Generator().manual_seed(sample_seed(self.seed, request.round, self.partition_id))
        seed_torch(round_seed(self.seed, request.round, self.partition_id))
        self.state.save_rng(ITER_DROPOUT)
        num_train = int(self.graph.train_mask.sum())
        stats: dict[str, Any] = {
            "plan": plan.config(),
            "iteration": 0,
            "num_train": num_train,
            "loss": 0.0,
            "seconds": 0.0,
            "sample_seconds": 0.0,
            "nodes": 0,
            "edges": 0,
            "forward_macs": 0,
            "train_macs": 0,
        }
        sample = self._draw(plan, generator, stats)
        stats["iteration"] = 1
        self._save_iteration(request.round, optimizer, generator, sample, stats)
        if sample is None:
            return msg.IdsByClient({}, 1, 1).encode()
        return self._requests(sample, plan, 1)

    def _iteration_rows(self, request: PhaseRequest):
        """As owner: the rows each requester asked for, with the current local weights."""
        from .maths import owner_rows_and_macs

        wanted = msg.IdsByClient.decode(request.arrays, request.values)
        stats = self.state.get_values(ITER_STATS)
        if stats is None or self.state.round_of(ITER_STATS) != request.round:
            raise RuntimeError(
                f"FedGraph client {self.partition_id}: asked for rows of round {request.round} before its "
                f"{msg.BEGIN!r} message"
            )
        sharing = str(stats["plan"][msg.SHARING])
        self.state.load_module(ITER_MODEL, self.model)
        union = np.unique(np.concatenate([np.asarray(v, np.int64) for v in wanted.parts.values()] or [np.zeros(0)]))
        rows, macs = owner_rows_and_macs(self.model, self.view(), sharing, wanted.conv, {}, ids=union.astype(np.int64))
        parts = {j: (ids, rows.select(ids).values) for j, ids in wanted.parts.items()}
        return msg.RowsUpload(parts, rows.width, macs).encode()

    def _iteration_step(self, server_round: int, rows: "msg.StepRows | None") -> dict:
        """One local iteration with the rows received for the current sample; returns the running counts."""
        import time

        from .maths import Rows, forward_macs, train_macs, train_step
        from ...tasks.torch_state import set_rng_state

        optimizer, generator, stats = self._iteration_state(server_round)
        model = self.model
        plan = msg.RoundPlan.from_config(stats["plan"])
        assert plan is not None
        if stats["num_train"] == 0:
            stats["iteration"] += 1
            self._save_iteration(server_round, optimizer, generator, None, stats)
            return stats
        sample = sample_of(self.state.get_arrays(ITER_SAMPLE) or {})
        view = self.view()
        tables: dict[int, torch.Tensor] = {}
        if rows is not None:
            if rows.iteration != stats["iteration"]:
                raise ValueError(
                    f"FedGraph client {self.partition_id}: rows of iteration {rows.iteration} arrived for its "
                    f"iteration {stats['iteration']}"
                )
            width = int(self.model.convs[rows.conv].lin.out_channels)
            table = view.remote_table(
                Rows(ids=rows.ids, values=np.asarray(rows.values).reshape(-1, width)), allow_missing=True, width=width
            )
            needed = view.remote_ids[sample.remote[rows.conv]].numpy()
            missing = np.setdiff1d(needed, rows.ids)
            if len(missing):
                raise KeyError(
                    f"FedGraph client {self.partition_id}: {len(missing)} remote neighbours of its sample got no "
                    f"row in iteration {rows.iteration} (e.g. global ids {missing[:5].tolist()})"
                )
            tables[rows.conv] = table
        set_rng_state(self.state.get_arrays(ITER_DROPOUT)["state"])
        model.train()
        start = time.perf_counter()
        stats["loss"] += train_step(model, view, sample, tables, optimizer)
        stats["seconds"] += time.perf_counter() - start
        self.state.save_rng(ITER_DROPOUT)
        stats["nodes"] += sum(sample.layer_sizes())
        stats["edges"] += sample.num_edges()
        stats["forward_macs"] += forward_macs(model, sample)
        stats["train_macs"] += train_macs(model, sample)
        stats["iteration"] += 1
        nxt = self._draw(plan, generator, stats) if stats["iteration"] <= self.train_config.local_steps else None
        self._save_iteration(server_round, optimizer, generator, nxt, stats)
        return stats

    def _step(self, request: PhaseRequest):
        rows = msg.StepRows.decode(request.arrays, request.values)
        stats = self._iteration_step(request.round, rows)
        if stats["num_train"] == 0:  # no labelled node, no sample: nothing to ask for
            return msg.IdsByClient({}, rows.conv, int(stats["iteration"])).encode()
        plan = msg.RoundPlan.from_config(stats["plan"])
        assert plan is not None
        return self._requests(sample_of(self.state.get_arrays(ITER_SAMPLE) or {}), plan, stats["iteration"])

    def _train_last_iteration(self, config: Mapping[str, Any], plan: "msg.RoundPlan") -> tuple[int, dict]:
        """``fit`` under exchange=iteration: the last local iteration (its rows in the config), then the round's
        counts; the weights to return are the model's."""
        from .maths import exchange_convs

        server_round = int(config.get(wire.SERVER_ROUND, 0))
        (conv,) = exchange_convs(plan.sharing, self.num_convs)
        blob = config.get(msg.ITERATION_INBOX)
        if not isinstance(blob, bytes):
            raise ValueError(f"an exchange=iteration fit carries the last iteration's rows ({msg.ITERATION_INBOX})")
        parts = msg.unpack_parts(blob)
        width = int(self.model.convs[conv].lin.out_channels)
        ids, values = parts.get((conv,), (np.zeros(0, np.int64), np.zeros((0, width), np.float32)))
        stats = self.state.get_values(ITER_STATS) or {}
        rows = msg.StepRows(ids, values, conv, int(stats.get("iteration", 0)))
        stats = self._iteration_step(server_round, rows)
        steps = self.train_config.local_steps
        if stats["iteration"] != steps + 1:
            raise RuntimeError(
                f"FedGraph client {self.partition_id}: fit came after {stats['iteration'] - 1} of {steps} local "
                f"iterations in round {server_round}"
            )
        for key in ITER_KEYS:
            self.state.delete(key)
        num_samples = scheme_of(plan, self.num_convs).batch_for(stats["num_train"]) if stats["num_train"] else 0
        return num_samples, {
            wire.TRAIN_LOSS: float(stats["loss"] / steps) if stats["num_train"] else float("nan"),
            wire.NUM_TRAIN: int(stats["num_train"]),
            wire.BATCH_SIZE: int(num_samples),
            msg.LOCAL_SECONDS: float(stats["seconds"]),
            msg.SAMPLE_SECONDS: float(stats["sample_seconds"]),
            msg.NODES_PER_ITERATION: float(stats["nodes"] / steps),
            msg.EDGES_PER_ITERATION: float(stats["edges"] / steps),
            msg.FORWARD_MACS: int(stats["forward_macs"]),
            msg.TRAIN_MACS: int(stats["train_macs"]),
        }

    # ------------------------------------------------------------------------------------ fit / evaluate
    def get_parameters(self, config):
        initial = dict(zip(self.keys, _initial_weights(self.graph, self.kwargs, self.seed)))
        return [initial[k].copy() for k in self.keys]

    def model_keys(self) -> list[str]:
        return list(self.keys)

    def load(self, arrays, keys, config) -> None:
        from ...tasks.torch_state import load_module_arrays

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
        from .maths import exchange_convs, train_round

        plan = self._plan(config)
        if plan.exchange == "iteration":
            return self._train_last_iteration(config, plan)
        server_round = int(config.get(wire.SERVER_ROUND, 0))
        tables = self._tables(config, server_round, plan.sharing)
        scheme = scheme_of(plan, self.num_convs)
        generator = torch.Generator().manual_seed(sample_seed(self.seed, server_round, self.partition_id))
        seed_torch(round_seed(self.seed, server_round, self.partition_id))
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
            msg.TRAIN_MACS: int(result.train_macs),
        }
        if plan.staleness == "one-round":  # the rows the others use next round, from the trained model
            from .maths import owner_rows_and_macs

            self.model.eval()
            parts: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
            own = dict(tables)
            macs = 0
            for k in exchange_convs(plan.sharing, self.num_convs):
                rows, cost = owner_rows_and_macs(self.model, self.view(), plan.sharing, k, own)
                macs += cost
                for j, part in self._split(rows).items():
                    parts[(k, j)] = part
            metrics[msg.UPLOAD] = msg.pack_parts(parts)
            metrics[msg.EXCHANGE_MACS] = int(macs)
        return int(result.num_samples), metrics

    def shared_arrays(self):
        from ...tasks.torch_state import module_arrays

        return list(module_arrays(self.model, self.keys).values())

    def evaluation(self) -> dict:
        from .maths import evaluate

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
