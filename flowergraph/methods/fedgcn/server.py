"""FedGCN (Yao et al., NeurIPS 2023): one communication phase of neighbour-feature aggregations, then ordinary
federated rounds of GCN training on them.

The maths (what a client contributes and why the normalisation is exact) is in :mod:`flowergraph.methods.fedgcn.maths`.
Training rounds are exactly :class:`~flowergraph.strategies.weighted.WeightedAveraging` (see its wire protocol);
the communication phase runs once, in the :meth:`~flowergraph.strategies.FederatedStrategy.setup` hook before
round 1, through the phase mechanism (:mod:`flowergraph.strategies.phases`), and is recorded as round 0 of
``rounds.jsonl`` (``phase = "fedgcn-communication"``). All clients must take part (FedGCN's server sum is over
every client); a client failing in this phase fails the run with its partition id and reason. The received
aggregations live in each client's ``context.state``, which client checkpoints save: a run resumed from a
checkpoint restores them and does not run the phase again (exact, also under CKKS).

Wire protocol of the communication phase (phase messages: ``get_properties`` carrying the phase name, arrays and
values as :mod:`flowergraph.wire` describes, so Flower's training mods such as ``secaggplus_mod`` leave them
alone; ``d`` = feature dimension, ``w = d + 1``; every reply also carries ``partition_id``)
--------------------------------------------------------------------------------------------------------------
Plaintext (``he=False``), two messages per client:

1. ``fedgcn.upload``: server -> client: arrays ``[]``; values ``{"hops": int}``.
   client -> server: arrays ``[ids int64 [m], request int64 [q], *rows]`` where ``rows`` encodes the
   contributions [m, w] float32 as ``[values]`` (dense) or ``[indptr int64 [m+1], columns int32, values
   float32]`` (CSR); values ``{"encoding": "dense"|"csr", "width": w}``.
   ``ids`` are the global ids of the rows the client contributes to (its boundary nodes and the remote
   endpoints of its cross-client edges), ``request`` the rows it needs back (1-hop: its boundary nodes;
   2-hop: also the remote endpoints). Rows with no cross-client edge never leave their owner.
2. ``fedgcn.download``: server -> client: arrays ``[rows int64 [r], *sums]`` (the per-row sums of all clients'
   contributions for exactly the rows the client requested, encoded as above); values
   ``{"encoding": str, "width": w}``. client -> server: arrays ``[]``, values ``{"stored_rows": r}``; the
   client keeps the rows in ``context.state``.

   What the server learns: which rows each client touches (the cross-client edge structure as sets of global
   ids) and, in plaintext, every contribution and sum -- including, for a node whose only neighbours are
   remote, ``d_u^{-1/2} x_u`` itself. Use ``he=True`` against an honest-but-curious server.

CKKS (``he=True``), three messages per client; the server holds a key-less context and never decrypts:

1. ``fedgcn.index``: server -> client: arrays ``[]``; values ``{"hops": int}``.
   client -> server: arrays ``[ids int64, request int64]``; values ``{"width": w, "key_fingerprint": str,
   "server_context": bytes}`` (the CKKS parameters without any key; every client
   must report the same fingerprint, i.e. hold the same key file).
2. ``fedgcn.upload``: server -> client: arrays ``[rows int64, offsets int64]`` (the client's contributed rows
   and their flat slot offsets in the shared layout, see :func:`flowergraph.privacy.ckks.he_layout`); values
   ``{"slots": int, "width": w}``. client -> server: arrays ``[ciphertext_index int64, lengths int64, blob
   uint8]`` (serialised CKKS vectors, concatenated); values ``{"ciphertexts": int}``.
3. ``fedgcn.download``: server -> client: arrays ``[rows int64, offsets int64, ciphertext_index int64, lengths
   int64, blob uint8]``: the summed ciphertexts that hold exactly the rows the client requested; values
   ``{"slots": int, "width": w}``. client -> server: ``[]``, values as in plaintext.

   What the server learns: the row sets (as in plaintext) and ciphertext sizes; no value.
"""

from __future__ import annotations

import threading
from logging import INFO

import numpy as np
from flwr.common.logger import log

from ...strategies.nodes import Federation, Node
from ...privacy import ckks
from ...privacy.packing import decode_rows, encode_rows, pack_blobs, unpack_blobs
from .maths import RowSums, check_hops
from . import wire as msg
from ...strategies.phases import Phase, PhaseMessage, PhaseReply, relay
from ...strategies.policy import FederationPolicy, resolve_policy
from ...strategies.weighted import WeightedAveraging

PHASE = msg.PHASE
UPLOAD, DOWNLOAD, INDEX = msg.UPLOAD, msg.DOWNLOAD, msg.INDEX


def _message(encoded: tuple[list[np.ndarray], dict]) -> PhaseMessage:
    return PhaseMessage(*encoded)


class FedGCNStrategy(WeightedAveraging):
    """FedGCN: a one-shot neighbour-aggregation phase (0/1/2-hop, optionally under CKKS), then averaging.

    Parameters (besides :class:`WeightedAveraging`'s): ``hops`` in {0, 1, 2} (0 skips the phase: FedAvg on
    local subgraphs); ``he`` sums the aggregations under CKKS; ``max_parallel`` caps the clients served at
    once in the phase (default 4: the server then holds at most 4 uploads or downloads, or their ciphertexts).
    ``weighting`` defaults to ``"uniform"`` as in the FedGCN reference code. Its clients keep the received
    aggregations in ``context.state`` (``stateful_clients=True``).
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        hops: int = 2,
        he: bool = False,
        max_parallel: int | None = None,
        weighting: str = "uniform",
        **kwargs,
    ) -> None:
        policy = resolve_policy(
            policy, {k: kwargs.pop(k) for k in list(kwargs) if k in FederationPolicy.field_names()}, type(self).__name__
        )
        policy = policy.replace(max_parallel=max_parallel or 4, stateful_clients=True)
        super().__init__(policy, weighting=weighting, **kwargs)
        self.hops = check_hops(hops)
        if he and hops == 0:
            raise ValueError("he=True needs hops 1 or 2: hops=0 has no communication phase")
        self.he = he
        self.phase_stats: dict = {}

    def __repr__(self) -> str:
        return f"FedGCNStrategy(num_clients={self.num_clients}, hops={self.hops}, he={self.he})"

    def setup(self, federation: Federation) -> None:
        if self.hops == 0:
            return
        if self.client_state.restored:
            log(INFO, "FedGCN: the clients restored their aggregations from the checkpoint; no new exchange")
            return
        self.communication_phase(federation)

    # ----------------------------------------------------------------------------------------- phase
    def communication_phase(self, federation: Federation) -> dict:
        clients = self.all_clients(federation)
        if len(clients) != self.num_clients:
            raise RuntimeError(
                f"FedGCN needs all {self.num_clients} clients in its communication phase, {len(clients)} are connected"
            )
        log(
            INFO,
            "FedGCN: %d-hop communication phase with %d clients%s",
            self.hops,
            len(clients),
            " under CKKS" if self.he else "",
        )
        phase = self.phases.begin(PHASE, 0, timeout=self.init_timeout)
        extra = self._phase_ckks(phase, clients) if self.he else self._phase_plain(phase, clients)
        stats = phase.end(hops=self.hops, he=self.he, elapsed_s=0.0, **extra)
        del stats["failures"]  # every client must answer: a failure fails the run
        self.phase_stats = stats
        if not self.resumed:  # a resumed run's records already hold round 0
            self.book.write(dict(stats))
        return stats

    def _phase_plain(self, phase: Phase, clients: list[Node]) -> dict:
        """A :func:`~flowergraph.strategies.phases.relay`: each upload is added into the running per-row sums as
        it arrives and then dropped (the server holds one upload and the float64 sums, never all uploads: ~1 GB
        at 1M nodes); each client then gets the sums of exactly the rows it requested."""
        requests: dict[str, np.ndarray] = {}
        acc: list[RowSums] = []

        def got_upload(reply: PhaseReply):
            up = msg.PlainUpload.decode(reply.arrays, reply.values)
            if not acc:
                acc.append(RowSums(up.width))
            if up.width != acc[0].width:
                raise RuntimeError(f"FedGCN: clients report different feature widths ({acc[0].width} and {up.width})")
            acc[0].add(up.ids, decode_rows(up.rows, up.encoding, len(up.ids), up.width))
            reply.arrays.clear()
            requests[reply.proxy.cid] = up.request

        def download(proxy: Node, _: PhaseReply) -> PhaseMessage:
            request = requests[proxy.cid]
            try:
                rows = acc[0].sums(request)
            except ValueError as exc:
                raise RuntimeError(
                    f"FedGCN: client {self.client_label(proxy)} requested rows nobody contributed to ({exc})"
                ) from None
            arrays, encoding = encode_rows(rows)
            return _message(msg.PlainDownload(request, arrays, encoding, acc[0].width).encode())

        relay(
            phase,
            clients,
            collect=UPLOAD,
            request=_message(msg.UploadRequest(self.hops).encode()),
            on_collect=got_upload,
            deliver=DOWNLOAD,
            route=download,
        )
        sums = acc[0]
        return {
            "row_contributions": sums.contributions,
            "rows": sums.count,
            "rows_downloaded": int(sum(len(r) for r in requests.values())),
        }

    def _phase_ckks(self, phase: Phase, clients: list[Node]) -> dict:
        index: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        info: dict[str, msg.Index] = {}

        def got_index(reply: PhaseReply):
            info[reply.proxy.cid] = msg.Index.decode(reply.arrays, reply.values)
            index[reply.proxy.cid] = (info[reply.proxy.cid].ids, info[reply.proxy.cid].request)

        phase.send(INDEX, clients, _message(msg.UploadRequest(self.hops).encode()), on_reply=got_index)
        fingerprints = {self.client_label(p): info[p.cid].key_fingerprint for p in clients}
        if len(set(fingerprints.values())) != 1:
            raise RuntimeError(
                f"FedGCN: clients hold different CKKS keys (fingerprints by client: {fingerprints}); "
                f"give every client the same key file"
            )
        widths = {m.width for m in info.values()}
        if len(widths) != 1:
            raise RuntimeError(f"FedGCN: clients report different feature widths {sorted(widths)}")
        width = widths.pop()
        server_ctx = ckks.load_server_context(next(iter(info.values())).server_context)
        slots = ckks.num_slots(server_ctx)
        order = {p.cid: i for i, p in enumerate(clients)}
        layout = ckks.he_layout(
            {order[c]: v[0] for c, v in index.items()}, {order[c]: v[1] for c, v in index.items()}, width, slots
        )
        accumulator = ckks.CiphertextSum(server_ctx)
        counts = {"ciphertexts_up": 0, "ciphertexts_down": 0}
        lock = threading.Lock()  # download messages are built in parallel threads

        def upload(proxy: Node) -> PhaseMessage:
            rows, offsets = layout.rows_for(order[proxy.cid], "contributor")
            return _message(msg.CKKSUploadRequest(rows, offsets, slots, width).encode())

        def got_upload(reply: PhaseReply):
            up = msg.CKKSUpload.decode(reply.arrays, reply.values)
            accumulator.add(up.ct_index, unpack_blobs(up.lengths, up.blob))
            counts["ciphertexts_up"] += len(up.ct_index)

        phase.send(UPLOAD, clients, upload, on_reply=got_upload)

        def download(proxy: Node) -> PhaseMessage:
            rows, offsets = layout.rows_for(order[proxy.cid], "requester")
            ct_index = ckks.ciphertexts_for(offsets, width, slots)
            lengths, blob = pack_blobs(accumulator.serialized(ct_index))
            with lock:
                counts["ciphertexts_down"] += len(ct_index)
            return _message(msg.CKKSDownload(rows, offsets, ct_index, lengths, blob, slots, width).encode())

        phase.send(DOWNLOAD, clients, download)
        return {
            "row_contributions": int(sum(len(v[0]) for v in index.values())),
            "rows": int(len(layout.row_ids)),
            "rows_downloaded": int(sum(len(v[1]) for v in index.values())),
            "ciphertexts": layout.num_ciphertexts,
            "groups": len(layout.groups),
            **counts,
        }
