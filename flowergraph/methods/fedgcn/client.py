"""FedGCN clients: answer the communication phase (phase messages ``fedgcn.index`` / ``fedgcn.upload`` /
``fedgcn.download``: :class:`FedGCNExchange`), then train the 2-layer GCN on the received aggregations: the node
classifier (:class:`FedGCNClient`) or the link predictor's encoder (:class:`FedGCNLinkClient`, over the graph of
:mod:`flowergraph.methods.fedgcn.links`).

The wire protocol is in :mod:`flowergraph.methods.fedgcn.server`. The received per-row sums are kept with the node's
persistent state (:class:`flowergraph.clients.ClientState`) because Flower re-creates the client for every
message (and, in deployment, every message is a fresh process): node-local arrays named ``fedgcn``
(:meth:`~flowergraph.clients.ClientState.set_local_arrays`: a file under the node's ``state-dir``, only its digest
and path in ``context.state``, which simulation and deployment serialise with every message) hold ``rows`` (int64
[r]) and the sums [r, d + 1] encoded as on the wire (``sums_0``, ``sums_1``, ... dense float32 or CSR, whichever
is smaller: Cora's rows are ~95% zeros), and values named ``fedgcn-meta`` hold ``encoding``, ``parts``,
``width`` and ``digest`` (SHA-1 of rows and sums, computed once when stored). Client checkpoints embed them.
The extended graph built from them is memoised per process under that digest, so a training message neither
decodes nor hashes the rows again (:func:`received_rows` reads them back).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
from flwr.app import RecordDict

from ...errors import ConfigError
from ...privacy import ckks
from ...wire import PhaseRequest
from . import wire as msg
from ...privacy.packing import decode_rows, encode_rows, pack_blobs, unpack_blobs
from .maths import check_fedgcn_model, check_hops, check_reply, contributions, extended_graph, fedgcn_forward
from ...tasks.federated_graph import ClientGraph
from ...tasks.memo import BytesLRU
from ...tasks.training import TrainConfig
from ...clients.link import LinkClient
from ...clients.node import NodeClassificationClient
from ...clients.state import ClientState

STATE_KEY = "fedgcn"  # arrays: rows, encoded sums
META_KEY = "fedgcn-meta"  # values: encoding, parts, width, digest
INDEX, UPLOAD, DOWNLOAD = msg.INDEX, msg.UPLOAD, msg.DOWNLOAD


@functools.lru_cache(maxsize=2)  # needed only during the phase (CKKS: index, then upload): keep few
def _contributions(graph: ClientGraph, hops: int):
    return contributions(graph, hops)


_EXT_CACHE = BytesLRU()  # extended graphs by (graph, hops, digest), bounded by bytes (see tasks/memo.py)


def _state(state: ClientState | RecordDict | None) -> ClientState:
    return state if isinstance(state, ClientState) else ClientState(state)


def received_rows(state: ClientState | RecordDict) -> tuple[np.ndarray, np.ndarray] | None:
    """The (rows, sums) a FedGCN client stored in its persistent state, or None before the phase."""
    state = _state(state)
    arrays, meta = state.get_local_arrays(STATE_KEY), state.get_values(META_KEY)
    if arrays is None or meta is None:
        return None
    rows = arrays["rows"]
    parts = [arrays[f"sums_{i}"] for i in range(int(meta["parts"]))]
    return rows, decode_rows(parts, str(meta["encoding"]), len(rows), int(meta["width"]))


class FedGCNExchange:
    """FedGCN's client side of the communication phase, for any task whose client holds a node-task
    :class:`ClientGraph` view of its graph (``self.graph``): the phase handlers, the received rows kept in the node's
    state, and the extended graph built from them. A client class inherits it beside its task's client and calls
    :meth:`init_exchange` in its constructor."""

    graph: ClientGraph

    def init_exchange(
        self, graph: ClientGraph, hops: int, state: ClientState | RecordDict | None, key_file: str | None
    ) -> None:
        self.graph = graph
        self.hops = check_hops(hops)
        self.state = _state(state)
        self.key_file = key_file
        self._ext = None

    def _extended(self):
        """The extended graph, built once per process from ``context.state`` (memoised on the digest)."""
        if getattr(self, "_ext", None) is not None:
            return self._ext
        meta = self.state.get_values(META_KEY)
        if meta is None:
            raise RuntimeError(
                f"FedGCN client {self.graph.client_id}: no neighbour aggregations in context.state; "
                f"the {self.hops}-hop communication phase must run first (use FedGCNStrategy)"
            )
        key = (self.graph.uid, self.hops, str(meta["digest"]))
        self._ext = _EXT_CACHE.get_or_build(
            key, lambda: extended_graph(self.graph, self.hops, *received_rows(self.state))
        )
        return self._ext

    def phase_handlers(self):
        return {INDEX: self._index, UPLOAD: self._upload, DOWNLOAD: self._download}

    # ------------------------------------------------------------------------- communication phase
    def _store(self, rows: np.ndarray, sums: np.ndarray) -> int:
        order = np.argsort(rows, kind="stable")  # canonical order (the CKKS layout orders rows by group)
        rows = np.ascontiguousarray(np.asarray(rows)[order], dtype=np.int64)
        sums = np.ascontiguousarray(np.asarray(sums)[order], dtype=np.float32)
        parts, encoding = encode_rows(sums)
        self.state.set_local_arrays(STATE_KEY, {"rows": rows, **{f"sums_{i}": a for i, a in enumerate(parts)}})
        digest = hashlib.sha1(memoryview(rows))
        digest.update(memoryview(sums))
        self.state.set_values(
            META_KEY,
            {"encoding": encoding, "parts": len(parts), "width": int(sums.shape[1]), "digest": digest.hexdigest()},
        )
        self._ext = None
        check_reply(self.graph, self.hops, rows, sums)  # a reply that lacks rows fails now, not in round 1
        return int(len(rows))

    def _check_hops(self, hops: int) -> None:
        if hops != self.hops:
            raise ValueError(f"the server runs {hops}-hop FedGCN but this client was configured with hops={self.hops}")

    def _upload(self, request: PhaseRequest):
        if msg.is_ckks(request.values):  # CKKS: encrypt the rows at the offsets the server assigned
            ask = msg.CKKSUploadRequest.decode(request.arrays, request.values)
            c = _contributions(self.graph, self.hops)
            pos = np.searchsorted(c.ids, ask.rows)
            if len(ask.rows) and (pos.max() >= len(c.ids) or not np.array_equal(c.ids[pos], ask.rows)):
                raise ValueError("the server asked for rows this client does not contribute to")
            if ask.width != c.values.shape[1]:
                raise ValueError(f"layout width {ask.width} != this client's {c.values.shape[1]}")
            ctx = ckks.load_key_file(self.key_file or "")
            ct_index, blobs = ckks.encrypt_rows(ctx, c.values[pos], ask.offsets, ask.slots)
            lengths, blob = pack_blobs(blobs)
            return msg.CKKSUpload(ct_index, lengths, blob).encode()
        self._check_hops(msg.UploadRequest.decode(request.arrays, request.values).hops)
        c = _contributions(self.graph, self.hops)
        arrays, encoding = encode_rows(c.values)
        return msg.PlainUpload(c.ids, c.request, arrays, encoding, int(c.values.shape[1])).encode()

    def _index(self, request: PhaseRequest):
        self._check_hops(msg.UploadRequest.decode(request.arrays, request.values).hops)
        ctx = ckks.load_key_file(self.key_file or "")
        c = _contributions(self.graph, self.hops)
        return msg.Index(
            c.ids, c.request, int(c.values.shape[1]), ckks.fingerprint(ctx), ckks.server_context_bytes(ctx)
        ).encode()

    def _download(self, request: PhaseRequest):
        if msg.is_ckks(request.values):
            down = msg.CKKSDownload.decode(request.arrays, request.values)
            ctx = ckks.load_key_file(self.key_file or "")
            sums = ckks.decrypt_rows(
                ctx, down.ct_index, unpack_blobs(down.lengths, down.blob), down.offsets, down.width, down.slots
            )
            return msg.Stored(self._store(down.rows, sums)).encode()
        plain = msg.PlainDownload.decode(request.arrays, request.values)
        sums = decode_rows(plain.sums, plain.encoding, len(plain.rows), plain.width)
        return msg.Stored(self._store(plain.rows, sums)).encode()


class FedGCNClient(FedGCNExchange, NodeClassificationClient):
    """``hops`` 0: plain local GCN (FedAvg); 1 or 2: GCN on the exchanged aggregations.

    ``state`` is the node's persistent state (a :class:`ClientState`, or ``context.state`` itself; it persists
    across messages of a run); ``key_file`` the CKKS key file, read only in the encrypted communication phase.
    """

    def __init__(
        self,
        graph: ClientGraph,
        train_config: TrainConfig,
        model_kwargs: dict | None = None,
        seed: int = 0,
        *,
        hops: int = 2,
        state: ClientState | RecordDict | None = None,
        key_file: str | None = None,
    ) -> None:
        NodeClassificationClient.__init__(self, graph, train_config, model_kwargs, seed)
        self.init_exchange(graph, hops, state, key_file)
        if hops > 0:
            check_fedgcn_model(self.model)

    def forward(self):
        if self.hops == 0:
            return super().forward()
        return fedgcn_forward(self.model, self._extended())


class FedGCNLinkClient(FedGCNExchange, LinkClient):
    """The link predictor whose 2-layer GCN encoder runs on the exchanged aggregations of G, the clients' training
    edges plus the known cross-client edges (:mod:`flowergraph.methods.fedgcn.links`); ``hops`` 0: the plain link
    client (FedAvg). The other arguments are :class:`~flowergraph.clients.link.LinkClient`'s."""

    def __init__(
        self,
        data,
        train_config: TrainConfig,
        model_kwargs: dict | None = None,
        *,
        seed: int = 0,
        k: int = 50,
        neg_ratio: float = 1.0,
        hops: int = 2,
        state: ClientState | RecordDict | None = None,
        key_file: str | None = None,
    ) -> None:
        from .links import fedgcn_graph

        LinkClient.__init__(self, data, train_config, model_kwargs, seed=seed, k=k, neg_ratio=neg_ratio, state=None)
        self.init_exchange(fedgcn_graph(data), hops, state, key_file)
        if hops > 0:
            check_link_encoder(self.model)

    def encoding(self):
        if self.hops == 0:
            return None
        from .links import fedgcn_encode

        return fedgcn_encode(self._extended())


def check_link_encoder(model) -> None:
    """FedGCN's exchange carries exactly the first layer's aggregation of a 2-layer GCN encoder."""
    convs = getattr(model.encoder, "convs", None)
    if model.kind != "gcn" or convs is None or len(convs) != 2:
        raise ConfigError(
            "FedGCN on task=link trains a 2-layer GCN encoder (link.encoder='gcn', link.layers=2): its communication "
            "phase carries exactly the first layer's aggregation"
        )
