"""FedGCN (Yao et al., NeurIPS 2023): one communication phase of neighbour-feature aggregations, then ordinary
federated rounds of GCN training on them.

The maths (what a client contributes and why the normalisation is exact) is in :mod:`flowergraph.tasks.fedgcn`.
Training rounds are exactly :class:`~flowergraph.strategies.weighted.WeightedAveraging` (see its wire protocol);
the communication phase runs once, inside ``initialize_parameters``, before round 1, and is recorded as round 0
of ``rounds.jsonl`` (``phase = "fedgcn-communication"``). All clients must take part (FedGCN's server sum is
over every client); a client failing in this phase fails the run with its id and reason. A run resumed from a
checkpoint runs the phase again (the clients' ``context.state`` did not survive) but does not record it twice.

Wire protocol of the communication phase (``fit`` messages; ``d`` = feature dimension, ``w = d + 1``)
--------------------------------------------------------------------------------------------------------
Plaintext (``he=False``), two messages per client:

1. ``upload``: server -> client: parameters ``[]``; config ``{"fedgcn_phase": "upload", "hops": int}``.
   client -> server: parameters ``[ids int64 [m], request int64 [q], *rows]`` where ``rows`` encodes the
   contributions [m, w] float32 as ``[values]`` (dense) or ``[indptr int64 [m+1], columns int32, values
   float32]`` (CSR); metrics ``{"partition_id": int, "encoding": "dense"|"csr", "width": w}``.
   ``ids`` are the global ids of the rows the client contributes to (its boundary nodes and the remote
   endpoints of its cross-client edges), ``request`` the rows it needs back (1-hop: its boundary nodes;
   2-hop: also the remote endpoints). Rows with no cross-client edge never leave their owner.
2. ``download``: server -> client: parameters ``[rows int64 [r], *sums]`` (the per-row sums of all clients'
   contributions for exactly the rows the client requested, encoded as above); config
   ``{"fedgcn_phase": "download", "encoding": str, "width": w}``. client -> server: parameters ``[]``,
   metrics ``{"partition_id": int, "stored_rows": r}``; the client keeps the rows in ``context.state``.

   What the server learns: which rows each client touches (the cross-client edge structure as sets of global
   ids) and, in plaintext, every contribution and sum -- including, for a node whose only neighbours are
   remote, ``d_u^{-1/2} x_u`` itself. Use ``he=True`` against an honest-but-curious server.

CKKS (``he=True``), three messages per client; the server holds a key-less context and never decrypts:

1. ``index``: server -> client: parameters ``[]``; config ``{"fedgcn_phase": "index", "hops": int}``.
   client -> server: parameters ``[ids int64, request int64]``; metrics ``{"partition_id": int, "width": w,
   "key_fingerprint": str, "server_context": bytes}`` (the CKKS parameters without any key; every client
   must report the same fingerprint, i.e. hold the same key file).
2. ``upload``: server -> client: parameters ``[rows int64, offsets int64]`` (the client's contributed rows and
   their flat slot offsets in the shared layout, see :func:`flowergraph.privacy.ckks.he_layout`); config
   ``{"fedgcn_phase": "upload", "slots": int, "width": w}``. client -> server: parameters
   ``[ciphertext_index int64, lengths int64, blob uint8]`` (serialised CKKS vectors, concatenated).
3. ``download``: server -> client: parameters ``[rows int64, offsets int64, ciphertext_index int64, lengths
   int64, blob uint8]``: the summed ciphertexts that hold exactly the rows the client requested; config
   ``{"fedgcn_phase": "download", "slots": int, "width": w}``. client -> server: ``[]``, metrics as above.

   What the server learns: the row sets (as in plaintext) and ciphertext sizes; no value.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from logging import INFO
from typing import Callable

import numpy as np
from flwr.common import Code, FitIns, FitRes, Parameters, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.logger import log
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy

from ..privacy import ckks
from ..privacy.packing import decode_rows, encode_rows, pack_blobs, unpack_blobs
from ..tasks.fedgcn import check_hops, server_sum
from .common import config_bytes, parameters_bytes
from .weighted import WeightedAveraging

EMPTY = ndarrays_to_parameters([])


class FedGCNStrategy(WeightedAveraging):
    """FedGCN: a one-shot neighbour-aggregation phase (0/1/2-hop, optionally under CKKS), then averaging.

    Parameters (besides :class:`WeightedAveraging`'s): ``hops`` in {0, 1, 2} (0 skips the phase: FedAvg on
    local subgraphs); ``he`` sums the aggregations under CKKS; ``max_parallel`` caps the clients served at
    once in the phase (default 4 under CKKS, which bounds the ciphertexts in flight on the server; else 16).
    ``weighting`` defaults to ``"uniform"`` as in the FedGCN reference code.
    """

    def __init__(self, *, hops: int = 2, he: bool = False, max_parallel: int | None = None,
                 weighting: str = "uniform", **kwargs) -> None:
        super().__init__(weighting=weighting, **kwargs)
        self.hops = check_hops(hops)
        if he and hops == 0:
            raise ValueError("he=True needs hops 1 or 2: hops=0 has no communication phase")
        self.he = he
        self.max_parallel = max_parallel or (4 if he else 16)
        self.phase_stats: dict = {}

    def __repr__(self) -> str:
        return f"FedGCNStrategy(num_clients={self.num_clients}, hops={self.hops}, he={self.he})"

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        params = super().initialize_parameters(client_manager)
        if self.hops > 0:
            self.communication_phase(client_manager)
        return params

    # ----------------------------------------------------------------------------------------- phase
    def _exchange(self, clients: list[ClientProxy], make_ins: Callable[[ClientProxy], FitIns],
                  on_result: Callable[[ClientProxy, FitRes], None], stats: dict, name: str) -> None:
        """Send one phase message to every client (at most ``max_parallel`` in flight) and handle replies
        as they arrive; any failure aborts the run, naming the client."""

        lock = threading.Lock()

        def call(proxy: ClientProxy):
            ins = make_ins(proxy)
            with lock:
                stats["bytes_down"] += parameters_bytes(ins.parameters) + config_bytes(ins.config)
            return proxy.fit(ins, timeout=self.round_timeout, group_id=0)

        with concurrent.futures.ThreadPoolExecutor(max_workers=self.max_parallel) as pool:
            futures = {pool.submit(call, proxy): proxy for proxy in clients}
            for future in concurrent.futures.as_completed(futures):
                proxy = futures[future]
                try:
                    res = future.result()
                except Exception as exc:
                    raise RuntimeError(f"FedGCN {name}: client node {proxy.cid} failed: {exc}") from exc
                if res.status.code != Code.OK:
                    raise RuntimeError(f"FedGCN {name}: client node {proxy.cid} failed: {res.status.message}")
                stats["bytes_up"] += parameters_bytes(res.parameters) + config_bytes(res.metrics)
                on_result(proxy, res)

    def communication_phase(self, client_manager: ClientManager) -> dict:
        clients = sorted(client_manager.all().values(), key=lambda c: c.cid)
        if len(clients) != self.num_clients:
            raise RuntimeError(f"FedGCN needs all {self.num_clients} clients in its communication phase, "
                               f"{len(clients)} are connected")
        start = time.perf_counter()
        stats = {"round": 0, "phase": "fedgcn-communication", "hops": self.hops, "he": self.he,
                 "bytes_up": 0, "bytes_down": 0}
        log(INFO, "FedGCN: %d-hop communication phase with %d clients%s", self.hops, len(clients),
            " under CKKS" if self.he else "")
        if self.he:
            self._phase_ckks(clients, stats)
        else:
            self._phase_plain(clients, stats)
        stats["time_s"] = time.perf_counter() - start
        stats["elapsed_s"] = 0.0
        self.phase_stats = stats
        if self.recorder is not None and not self.resumed:  # a resumed run's records already hold round 0
            self.recorder.write_round(dict(stats))
        return stats

    def _phase_plain(self, clients: list[ClientProxy], stats: dict) -> None:
        uploads: dict[str, tuple] = {}
        widths = set()
        ins = FitIns(EMPTY, {"fedgcn_phase": "upload", "hops": self.hops})

        def got_upload(proxy, res):
            arrays = parameters_to_ndarrays(res.parameters)
            width, encoding = int(res.metrics["width"]), str(res.metrics["encoding"])
            ids, request = arrays[0].astype(np.int64), arrays[1].astype(np.int64)
            values = decode_rows(arrays[2:], encoding, len(ids), width)
            widths.add(width)
            uploads[proxy.cid] = (ids, values, request)

        self._exchange(clients, lambda p: ins, got_upload, stats, "upload")
        if len(widths) > 1:
            raise RuntimeError(f"FedGCN: clients report different feature widths {sorted(widths)}")
        rows, sums = server_sum([(ids, values) for ids, values, _ in uploads.values()])
        stats["row_contributions"] = int(sum(len(u[0]) for u in uploads.values()))
        stats["rows"] = int(len(rows))

        def download_ins(proxy):
            request = uploads[proxy.cid][2]
            pos = np.searchsorted(rows, request)
            if len(request) and (pos.max() >= len(rows) or not np.array_equal(rows[pos], request)):
                raise RuntimeError(f"FedGCN: client node {proxy.cid} requested rows nobody contributed to")
            arrays, encoding = encode_rows(sums[pos] if len(request) else np.zeros((0, sums.shape[1]), np.float32))
            return FitIns(ndarrays_to_parameters([request, *arrays]),
                          {"fedgcn_phase": "download", "encoding": encoding, "width": int(sums.shape[1])})

        stats["rows_downloaded"] = int(sum(len(u[2]) for u in uploads.values()))
        self._exchange(clients, download_ins, lambda p, r: None, stats, "download")

    def _phase_ckks(self, clients: list[ClientProxy], stats: dict) -> None:
        index: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        info: dict[str, dict] = {}
        ins = FitIns(EMPTY, {"fedgcn_phase": "index", "hops": self.hops})

        def got_index(proxy, res):
            ids, request = (a.astype(np.int64) for a in parameters_to_ndarrays(res.parameters))
            index[proxy.cid] = (ids, request)
            info[proxy.cid] = dict(res.metrics)

        self._exchange(clients, lambda p: ins, got_index, stats, "index")
        fingerprints = {cid: m["key_fingerprint"] for cid, m in info.items()}
        if len(set(fingerprints.values())) != 1:
            raise RuntimeError(f"FedGCN: clients hold different CKKS keys (fingerprints by node: {fingerprints}); "
                               f"give every client the same key file")
        widths = {int(m["width"]) for m in info.values()}
        if len(widths) != 1:
            raise RuntimeError(f"FedGCN: clients report different feature widths {sorted(widths)}")
        width = widths.pop()
        server_ctx = ckks.load_server_context(next(iter(info.values()))["server_context"])
        slots = ckks.num_slots(server_ctx)
        order = {p.cid: i for i, p in enumerate(clients)}
        layout = ckks.he_layout({order[c]: v[0] for c, v in index.items()},
                                {order[c]: v[1] for c, v in index.items()}, width, slots)
        accumulator = ckks.CiphertextSum(server_ctx)
        stats.update(row_contributions=int(sum(len(v[0]) for v in index.values())), rows=int(len(layout.row_ids)),
                     rows_downloaded=int(sum(len(v[1]) for v in index.values())),
                     ciphertexts=layout.num_ciphertexts, groups=len(layout.groups), ciphertexts_up=0,
                     ciphertexts_down=0)

        def upload_ins(proxy):
            rows, offsets = layout.rows_for(order[proxy.cid], "contributor")
            return FitIns(ndarrays_to_parameters([rows, offsets]),
                          {"fedgcn_phase": "upload", "slots": slots, "width": width})

        def got_upload(proxy, res):
            ct_index, lengths, blob = parameters_to_ndarrays(res.parameters)
            accumulator.add(ct_index.astype(np.int64), unpack_blobs(lengths, blob))
            stats["ciphertexts_up"] += len(ct_index)

        self._exchange(clients, upload_ins, got_upload, stats, "upload")

        def download_ins(proxy):
            rows, offsets = layout.rows_for(order[proxy.cid], "requester")
            ct_index = ckks.ciphertexts_for(offsets, width, slots)
            lengths, blob = pack_blobs(accumulator.serialized(ct_index))
            stats["ciphertexts_down"] += len(ct_index)
            return FitIns(ndarrays_to_parameters([rows, offsets, ct_index, lengths, blob]),
                          {"fedgcn_phase": "download", "slots": slots, "width": width})

        self._exchange(clients, download_ins, lambda p, r: None, stats, "download")
