"""FedGraph on the wire: every key and message between :class:`flowergraph.methods.fedgraph.server.FedGraphStrategy`
and :class:`flowergraph.methods.fedgraph.client.FedGraphClient`, one dataclass per message with ``encode`` / ``decode``
(plain values and numpy arrays only: no torch, no Flower app layer). The protocol and what each party learns are
in :mod:`flowergraph.methods.fedgraph.server` and ``docs/methods/fedgraph.md``.

Rows travel as ``(ids, values)``: global node ids (int64 [m], sorted, unique) and one float32 row per id. What a
row holds is stated per message; a client never sends its raw features or its first convolution's inputs
(``x W^(0)``) under ``sharing=fedgraph`` or ``nonshare`` (allShare, an ablation, shares ``x W^(0)`` by definition).

Phases (``get_properties`` messages, :mod:`flowergraph.wire`'s phase encoding):

* once, phase :data:`DEGREE_PHASE` (round 0): :data:`DEGREES` (no arguments) -> :class:`RowsUpload` (the owner's
  global degrees d_u of its boundary nodes, one part per requesting client); the server routes them:
  :data:`STORE_DEGREES` (:class:`RowsDelivery`: the degrees of exactly the requester's remote neighbours) ->
  :class:`Stored`.
* every round r (same-round exchange), phase :data:`EXCHANGE_PHASE`, for each sharing convolution k in order:
  :data:`ROWS` (:class:`RowsRequest`: k; the model the clients train this round travels as the phase's model)
  -> :class:`RowsUpload` (``h^(k)(u) W^(k)`` of the owner's boundary nodes u, computed with that model, split
  per requester); :data:`STORE_ROWS` (:class:`RowsDelivery`: the requester's remote neighbours' rows) ->
  :class:`Stored`. Before a separate evaluation the same exchange runs with the model being evaluated
  (phase :data:`EVAL_EXCHANGE_PHASE`).

* every round r with ``exchange=iteration`` (the paper's cadence), phase :data:`ITERATION_PHASE`: :data:`BEGIN`
  (the client's :class:`RoundPlan` values and the number of iterations; the global model as the phase's model)
  -> :class:`IdsByClient` (the client loads the model, draws its first sample and asks, per owner, for the rows of
  exactly the remote neighbours in it); then per iteration t: :data:`ITERATION_ROWS` (:class:`IdsByClient`: per
  requester the ids it asked this owner for) -> :class:`RowsUpload` (``h^(k) W^(k)`` of those nodes with the
  owner's current local weights, and the multiply-adds it took); :data:`STEP` (:class:`StepRows`: the rows the
  requester asked for) -> :class:`IdsByClient` (one local iteration done; the next sample's requests). The last
  iteration's rows ride in the fit config (:data:`ITERATION_INBOX`) and the client takes its last step inside
  ``fit``.

Training (``fit``) and evaluation: the arrays are the global GCN's (named as in the client's state dict); the
config carries :class:`RoundPlan` (sharing, sampling scheme, this client's policy: kappa and one probability per
convolution). With ``staleness=one-round`` the fit reply's metrics carry :data:`UPLOAD` (a :func:`pack_parts`
blob: the owner's rows for every sharing convolution computed after its local training, split per requester) and
the next fit (or evaluate) config carries :data:`INBOX` (the requester's rows, routed by the server). Fit metrics
also carry the mini-batch size actually used (``num_examples``, eq. 8's weight) and the local work done.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ...storage._astlock import serialize_ast_parse

Values = dict[str, Any]
Part = tuple[np.ndarray, np.ndarray]  # (ids int64 [m], values float [m, w])

# phase names (records) and kinds (messages)
DEGREE_PHASE = "fedgraph-degrees"
EXCHANGE_PHASE = "fedgraph-exchange"
EVAL_EXCHANGE_PHASE = "fedgraph-exchange-eval"
ITERATION_PHASE = "fedgraph-iterations"  # exchange=iteration: the round's local iterations and their exchanges
DEGREES = "fedgraph.degrees"
STORE_DEGREES = "fedgraph.store-degrees"
ROWS = "fedgraph.rows"
STORE_ROWS = "fedgraph.store-rows"
BEGIN = "fedgraph.begin"  # exchange=iteration: load the round's model, draw the first sample, ask for its rows
ITERATION_ROWS = "fedgraph.iteration-rows"  # exchange=iteration: an owner computes the rows asked of it
STEP = "fedgraph.step"  # exchange=iteration: one local iteration with the rows received; the next requests

# fit / evaluate config keys
SHARING = "fedgraph.sharing"
SCHEME = "fedgraph.scheme"
KAPPA = "fedgraph.kappa"
PROBS = "fedgraph.probs"  # JSON list: one probability per convolution (input convolution first)
STALENESS = "fedgraph.staleness"
EXCHANGE = "fedgraph.exchange"  # "round" or "iteration"
ITERATION_INBOX = "fedgraph.iteration-inbox"  # exchange=iteration: bytes (pack_parts {conv: rows}), the last step's
INBOX = "fedgraph.inbox"  # one-round staleness: bytes (pack_parts of {conv: (ids, values)}) for this client
# fit metrics
UPLOAD = "fedgraph.upload"  # one-round staleness: bytes (pack_parts of {(conv, requester): (ids, values)})
LOCAL_SECONDS = "fedgraph_local_s"  # wall time of the local iterations
SAMPLE_SECONDS = "fedgraph_sample_s"
NODES_PER_ITERATION = "fedgraph_nodes"
EDGES_PER_ITERATION = "fedgraph_edges"
FORWARD_MACS = "fedgraph_macs"  # multiply-adds of the round's forward passes (methods.fedgraph.maths.forward_macs)
TRAIN_MACS = "fedgraph_train_macs"  # forward + backward multiply-adds of the round's iterations (train_macs)
EXCHANGE_MACS = "fedgraph_exchange_macs"  # one-round staleness: multiply-adds of the rows computed after training


def _i64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.int64, copy=False)


def _f32(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float32, copy=False)


@dataclass(frozen=True)
class RoundPlan:
    """Server -> client in every fit / evaluate config: how this client trains this round."""

    sharing: str
    scheme: str
    kappa: int
    probs: tuple[float, ...]
    staleness: str = "same-round"
    exchange: str = "round"

    def config(self) -> Values:
        out = {
            SHARING: self.sharing,
            SCHEME: self.scheme,
            KAPPA: int(self.kappa),
            PROBS: json.dumps([float(p) for p in self.probs]),
            STALENESS: self.staleness,
        }
        if self.exchange != "round":  # the round cadence's messages stay as they were
            out[EXCHANGE] = self.exchange
        return out

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "RoundPlan | None":
        if SCHEME not in config:
            return None
        probs = json.loads(str(config[PROBS]))
        if not isinstance(probs, list) or not all(isinstance(p, (int, float)) for p in probs):
            raise ValueError(f"{PROBS} is not a JSON list of numbers: {str(config[PROBS])[:80]!r}")
        return cls(
            str(config[SHARING]),
            str(config[SCHEME]),
            int(config[KAPPA]),
            tuple(float(p) for p in probs),
            str(config.get(STALENESS, "same-round")),
            str(config.get(EXCHANGE, "round")),
        )


@dataclass(frozen=True)
class RowsRequest:
    """Server -> owner: send ``h^(conv) W^(conv)`` of your boundary nodes, computed with the phase's model (under
    ``sharing``: which convolutions below ``conv`` aggregate remote rows)."""

    conv: int
    sharing: str

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {"conv": int(self.conv), "sharing": self.sharing}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "RowsRequest":
        return cls(int(values["conv"]), str(values["sharing"]))


@dataclass(frozen=True)
class RowsUpload:
    """Owner -> server: one part per requesting client (``parts[j]``: the rows client j needs); ``width`` is the
    rows' width (kept when no client needs any row); ``macs``: the multiply-adds computing them took (the parallel
    clock's work; sent when > 0)."""

    parts: dict[int, Part]
    width: int
    macs: int = 0

    def encode(self) -> tuple[list[np.ndarray], Values]:
        requesters = sorted(self.parts)
        arrays: list[np.ndarray] = [np.asarray(requesters, dtype=np.int64)]
        for j in requesters:
            ids, values = self.parts[j]
            arrays += [_i64(ids), _f32(values)]
        values: Values = {"width": int(self.width)}
        if self.macs:
            values["macs"] = int(self.macs)
        return arrays, values

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "RowsUpload":
        if not arrays or len(arrays) != 1 + 2 * len(arrays[0]):
            raise ValueError(
                f"a FedGraph rows upload carries the requesters and (ids, values) per requester; got "
                f"{len(arrays)} arrays"
            )
        requesters = _i64(arrays[0]).tolist()
        width = int(values["width"])
        parts = {}
        for i, j in enumerate(requesters):
            ids, vals = _i64(arrays[1 + 2 * i]), arrays[2 + 2 * i]
            if vals.ndim != 2 or len(vals) != len(ids) or (len(ids) and vals.shape[1] != width):
                raise ValueError(f"rows for client {j}: ids {ids.shape}, values {vals.shape}, width {width}")
            parts[int(j)] = (ids, vals)
        return cls(parts, width, int(values.get("macs", 0)))


@dataclass(frozen=True)
class RowsDelivery:
    """Server -> requester: the rows of its remote neighbours (degrees, or convolution ``conv``'s h W)."""

    ids: np.ndarray
    values: np.ndarray
    conv: int = -1  # -1: degrees

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [_i64(self.ids), np.asarray(self.values)], {"conv": int(self.conv)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "RowsDelivery":
        if len(arrays) != 2:
            raise ValueError(f"a FedGraph rows delivery carries 2 arrays (ids, values), got {len(arrays)}")
        return cls(_i64(arrays[0]), arrays[1], int(values.get("conv", -1)))


@dataclass(frozen=True)
class IdsByClient:
    """exchange=iteration: global node ids keyed by client, for convolution ``conv`` of local iteration
    ``iteration``. Requester -> server (reply to :data:`BEGIN` / :data:`STEP`): per owner, the remote neighbours in
    the requester's current sample whose rows it needs; server -> owner (:data:`ITERATION_ROWS`): per requester,
    the ids that requester asked this owner for (a client without labelled nodes asks for nothing)."""

    parts: dict[int, np.ndarray]
    conv: int
    iteration: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        keys = sorted(self.parts)
        arrays = [np.asarray(keys, dtype=np.int64)] + [_i64(self.parts[k]) for k in keys]
        return arrays, {"conv": int(self.conv), "iteration": int(self.iteration)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "IdsByClient":
        if not arrays or len(arrays) != 1 + len(arrays[0]):
            raise ValueError(
                f"a FedGraph id request carries the clients and one id array per client; got {len(arrays)} arrays"
            )
        keys = _i64(arrays[0]).tolist()
        return cls({int(k): _i64(a) for k, a in zip(keys, arrays[1:])}, int(values["conv"]), int(values["iteration"]))


@dataclass(frozen=True)
class StepRows:
    """Server -> requester (exchange=iteration, :data:`STEP`): the rows of convolution ``conv`` it asked for in
    local iteration ``iteration`` (ids sorted), merged over their owners."""

    ids: np.ndarray
    values: np.ndarray
    conv: int
    iteration: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [_i64(self.ids), _f32(self.values)], {"conv": int(self.conv), "iteration": int(self.iteration)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "StepRows":
        if len(arrays) != 2:
            raise ValueError(f"a FedGraph step carries 2 arrays (ids, values), got {len(arrays)}")
        return cls(_i64(arrays[0]), arrays[1], int(values["conv"]), int(values["iteration"]))


@dataclass(frozen=True)
class Begin:
    """Server -> client (exchange=iteration, :data:`BEGIN`): this round's plan and its number of local
    iterations; the round's global model travels as the phase's model."""

    plan: RoundPlan
    iterations: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {**self.plan.config(), "iterations": int(self.iterations)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "Begin":
        plan = RoundPlan.from_config(values)
        if plan is None:
            raise ValueError("a FedGraph begin message carries the round's plan; none came")
        return cls(plan, int(values["iterations"]))


@dataclass(frozen=True)
class Stored:
    """Requester -> server: how many remote neighbours it has rows for now."""

    rows: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {"stored_rows": int(self.rows)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "Stored":
        return cls(int(values["stored_rows"]))


def pack_parts(parts: Mapping[Any, Part]) -> bytes:
    """Rows keyed by a tuple of ints (``(conv, requester)``) or an int (``conv``) as one bytes value (numpy's
    ``.npz``, no pickle): for the one-round exchange, whose rows ride on fit replies and fit configs."""
    arrays: dict[str, np.ndarray] = {}
    for key, (ids, values) in parts.items():
        name = "_".join(str(int(k)) for k in (key if isinstance(key, tuple) else (key,)))
        arrays[f"ids_{name}"] = _i64(ids)
        arrays[f"values_{name}"] = _f32(values)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def unpack_parts(blob: bytes) -> dict[tuple[int, ...], Part]:
    """What :func:`pack_parts` wrote, keys as tuples of ints."""
    out: dict[tuple[int, ...], Part] = {}
    serialize_ast_parse()  # numpy.load parses array headers; see storage._astlock
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        for name in z.files:
            if name.startswith("ids_"):
                key = name[4:]
                out[tuple(int(k) for k in key.split("_"))] = (z[name], z[f"values_{key}"])
    return out


def parts_arrays(parts: Mapping[Any, Part]) -> Sequence[np.ndarray]:
    """Every array in ``parts`` (for checks of what travelled)."""
    return [a for pair in parts.values() for a in pair]
