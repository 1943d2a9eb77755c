"""The ClientApp: run config + node config -> the method's NumPyClient.

Node identity comes from the node configuration: ``partition-id`` and ``num-partitions`` (simulation sets
both; in deployment pass them with ``flower-supernode --node-config``). A SuperNode may also name its own
data and key there: node-config keys ``data-dir``, ``dataset`` and ``key-file`` override the run configuration
for that node.
"""

from __future__ import annotations

import functools

import torch
from flwr.app import Context
from flwr.client import ClientApp

from .config import RunSettings, parse_run_config
from .errors import ConfigError

NODE_CONFIG_OVERRIDES = ("data-dir", "dataset", "key-file")


@functools.lru_cache(maxsize=16)
def _settings(items: tuple) -> RunSettings:
    return parse_run_config(dict(items), allow_unknown=True)


def node_identity(node_config, settings: RunSettings) -> tuple[int, int]:
    """(partition id, number of partitions) from the node config, checked against ``num-clients``."""
    missing = [k for k in ("partition-id", "num-partitions") if k not in node_config]
    if missing:
        raise ConfigError(f"node config lacks {', '.join(missing)}; start the SuperNode with "
                          f"--node-config \"partition-id=<k> num-partitions=<K>\"")
    pid, nparts = int(node_config["partition-id"]), int(node_config["num-partitions"])
    if settings.method != "centralized" and nparts != settings.num_clients:
        raise ConfigError(f"num-partitions={nparts} in the node config but num-clients={settings.num_clients} in "
                          f"the run config; they must be equal (simulation: num-supernodes = num-clients)")
    if not 0 <= pid < nparts:
        raise ConfigError(f"partition-id={pid} out of range [0, {nparts - 1}]")
    return pid, nparts


def settings_for_node(context: Context) -> RunSettings:
    run = dict(context.run_config)
    for key in NODE_CONFIG_OVERRIDES:
        if key in context.node_config:
            run[key] = context.node_config[key]
    return _settings(tuple(sorted(run.items())))


def model_kwargs(s: RunSettings) -> dict:
    return {"kind": s.model, "hidden": s.hidden, "layers": s.layers, "dropout": s.dropout, "heads": s.heads,
            "input_dropout": s.input_dropout}


def build_client(context: Context):
    """The NumPyClient for this node and run (also used by tests and the plug-in example)."""
    from .clients.node import NodeClassificationClient, NoOpClient
    from .tasks.federated_graph import client_graph, load_global_graph
    from .tasks.models import build_node_model, get_weights

    s = settings_for_node(context)
    pid, _ = node_identity(context.node_config, s)
    if s.method == "noop":
        data = load_global_graph(s.graph_spec())
        model = build_node_model(in_dim=data.num_features, num_classes=data.num_classes, seed=s.seed,
                                 **model_kwargs(s))
        return NoOpClient(get_weights(model), pid)
    if s.method == "centralized":
        pid = 0  # every node holds the whole graph; the strategy trains one of them
    graph = client_graph(s.graph_spec(), s.partition_spec(), pid)
    if s.method == "fedgcn":
        from .clients.fedgcn import FedGCNClient

        if s.he and not s.key_file:
            raise ConfigError("he=true needs a CKKS key file: set key-file in the node config (deployment) or "
                              "the run config (create one with `python -m flowergraph.privacy.ckks keygen PATH`)")
        return FedGCNClient(graph, s.train_config(), model_kwargs(s), seed=s.seed, hops=s.hops,
                            state=context.state, key_file=s.key_file if s.he else None)
    return NodeClassificationClient(graph, s.train_config(), model_kwargs(s), seed=s.seed)


def client_fn(context: Context):
    torch.set_num_threads(1)
    return build_client(context).to_client()


app = ClientApp(client_fn=client_fn)
