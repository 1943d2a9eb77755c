"""A federation in one process: the real ServerApp code path (``server_app.serve``: strategy, checkpoints, resume,
results) run by the legacy adapter's server loop (:func:`flowergraph.app.loop.legacy_server`), and the real client
builder (``node_client.client_fn``) per node, joined by ClientProxies that call the client directly instead of
going through Flower's transport. Part of the legacy stack (tests/test_legacy_confined.py names it).

Seconds instead of a Ray start-up and one process instead of one per client: for tests, for long accuracy
benchmarks, and for quick experiments. What it leaves out is exactly Flower's transport and process model (message
serialisation, Ray actors, timeouts, per-node processes): runs that must show those use
:mod:`flowergraph.simulation`. Clients answer one message at a time, in the order the server's thread pool sends
them. The numbers equal a Flower simulation of the same settings (tests compare them to 1e-6).

    from flowergraph.app.inprocess import run_inprocess
    summary, proxies = run_inprocess({"method": "fedgcn", "num-clients": 3, "rounds": 5, "out-dir": "results/x"})
"""

from __future__ import annotations

import threading

from flwr.app import Context, RecordDict
from flwr.server.client_proxy import ClientProxy
from flwr.server.server import run_fl

from flowergraph.app import node_client
from flowergraph.settings import parse_run_config
from flowergraph.app.loop import legacy_server
from flowergraph.app.server_app import ServerRun, serve
from flowergraph.tasks.compute import configure_torch


# Flower's server sends a round's messages from a thread pool; clients in one process share torch's global RNG
# (dropout), so they take turns here, as each of Flower's ClientApp processes answers one message at a time.
_TURN = threading.Lock()


class InProcessProxy(ClientProxy):
    """One node: its Context (node config + persistent ``state``) and a fresh client per message, as in Flower.

    ``calls`` lists the message kinds it answered; with ``record=True`` ``messages`` also keeps every
    ``(kind, instruction, reply)``, for tests of what travels."""

    def __init__(self, cid: str, node_config: dict, run_config: dict, record: bool = False):
        super().__init__(cid)
        self.context = Context(
            run_id=1, node_id=int(cid), node_config=dict(node_config), state=RecordDict(), run_config=dict(run_config)
        )
        self.calls: list[str] = []
        self.record = record
        self.messages: list[tuple] = []

    def _answer(self, kind: str, ins):
        self.calls.append(kind)
        with _TURN:
            res = getattr(node_client.client_fn(self.context), kind)(ins)
        if self.record:
            self.messages.append((kind, ins, res))
        return res

    def get_properties(self, ins, timeout, group_id):
        return self._answer("get_properties", ins)

    def get_parameters(self, ins, timeout, group_id):
        return self._answer("get_parameters", ins)

    def fit(self, ins, timeout, group_id):
        return self._answer("fit", ins)

    def evaluate(self, ins, timeout, group_id):
        return self._answer("evaluate", ins)

    def reconnect(self, ins, timeout, group_id):
        from flwr.common import DisconnectRes

        return DisconnectRes(reason="")


def run_inprocess(run_config: dict, *, node_ids=None, node_configs=None, record: bool = False):
    """Run ``run_config`` with one in-process node per client; returns (summary, proxies).

    ``node_ids`` (default 1001, 1002, ...) play Flower's random node ids; ``node_configs`` replace the default
    ``{"partition-id": k, "num-partitions": K}``; ``record`` keeps every message in ``proxy.messages``."""
    configure_torch()  # as the ClientApp and ServerApp processes do (one thread, denormals flushed)
    s = parse_run_config(run_config)
    if s.secure_agg == "secagg+":
        from flowergraph.errors import ConfigError

        raise ConfigError(
            "secure-agg='secagg+' runs Flower's SecAggPlusWorkflow, which needs Flower's message "
            "transport: use flowergraph.simulation (or a deployment); in-process runs support "
            "secure-agg='none' and 'ckks'"
        )
    n = s.effective_num_clients
    node_ids = list(node_ids or range(1001, 1001 + n))
    node_configs = node_configs or [{"partition-id": k, "num-partitions": n} for k in range(n)]
    proxies = [InProcessProxy(str(nid), nc, run_config, record) for nid, nc in zip(node_ids, node_configs)]

    def launch(run: ServerRun) -> None:
        from flwr.server import ServerConfig

        server = legacy_server(
            run.strategy, start_round=run.start_round, on_round_end=run.on_round_end, checkpointer=run.on_round_end
        )
        for proxy in proxies:
            server.client_manager().register(proxy)
        run_fl(server, ServerConfig(num_rounds=run.num_rounds, round_timeout=run.round_timeout))

    return serve(s, launch), proxies
