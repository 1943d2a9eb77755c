"""The ClientApp: run config + node config -> the method's NumPyClient.

Node identity comes from the node configuration: ``partition-id`` and ``num-partitions`` (simulation sets
both; in deployment pass them with ``flower-supernode --node-config``). A SuperNode may also name its own
data and key there: node-config keys ``data-dir``, ``dataset`` and ``key-file`` override the run configuration
for that node. Any other node-config key is refused.

Bad input (node config, run config, a missing or corrupt data folder or key file) is checked when the client
is built, before it trains; the error is re-raised with ``CONFIG_ERROR_MARKER`` in front, which makes the
strategy fail the run with that message (a transient fault only drops the client from a round).

Fault injection (run-config ``inject-faults``) wraps the client of each faulty partition in
:class:`flowergraph.clients.faults.FaultInjectingClient`.
"""

from __future__ import annotations

import functools

import torch
from flwr.app import Context
from flwr.client import ClientApp

from .config import RunSettings, parse_run_config
from .errors import ConfigError, FlowergraphError

NODE_CONFIG_OVERRIDES = ("data-dir", "dataset", "key-file")
NODE_CONFIG_KEYS = ("partition-id", "num-partitions") + NODE_CONFIG_OVERRIDES
# The same text as flowergraph.strategies.weighted.CONFIG_ERROR_MARKER (client and server never import each other).
CONFIG_ERROR_MARKER = "flowergraph refused the run:"


@functools.lru_cache(maxsize=16)
def _settings(items: tuple) -> RunSettings:
    return parse_run_config(dict(items), allow_unknown=True)


def _node_int(node_config, key: str) -> int:
    value = node_config[key]
    if isinstance(value, bool):
        raise ConfigError(f"node config {key}={value!r}: expected an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"node config {key}={value!r}: expected an integer")


def check_node_config(node_config) -> None:
    """Refuse node-config keys this ClientApp does not read (a typo would otherwise be ignored silently)."""
    unknown = sorted(k for k in node_config if k not in NODE_CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown node-config key {unknown[0]!r}; valid keys: {', '.join(NODE_CONFIG_KEYS)}")


def node_identity(node_config, settings: RunSettings) -> tuple[int, int]:
    """(partition id, number of partitions) from the node config, checked against ``num-clients``."""
    missing = [k for k in ("partition-id", "num-partitions") if k not in node_config]
    if missing:
        raise ConfigError(f"node config lacks {', '.join(missing)}; start the SuperNode with "
                          f"--node-config \"partition-id=<k> num-partitions=<K>\"")
    pid, nparts = _node_int(node_config, "partition-id"), _node_int(node_config, "num-partitions")
    if nparts < 1:
        raise ConfigError(f"node config num-partitions={nparts}: must be >= 1")
    if settings.method != "centralized" and nparts != settings.num_clients:
        raise ConfigError(f"num-partitions={nparts} in the node config but num-clients={settings.num_clients} in "
                          f"the run config; they must be equal (simulation: num-supernodes = num-clients)")
    if not 0 <= pid < nparts:
        raise ConfigError(f"partition-id={pid} out of range [0, {nparts - 1}]")
    return pid, nparts


def settings_for_node(context: Context) -> RunSettings:
    check_node_config(context.node_config)
    run = dict(context.run_config)
    for key in NODE_CONFIG_OVERRIDES:
        if key in context.node_config:
            run[key] = context.node_config[key]
    return _settings(tuple(sorted(run.items())))


def model_kwargs(s: RunSettings) -> dict:
    return {"kind": s.model, "hidden": s.hidden, "layers": s.layers, "dropout": s.dropout, "heads": s.heads,
            "input_dropout": s.input_dropout}


def build_client(context: Context):
    """The NumPyClient for this node and run (also used by tests and the plug-in example).

    Raises a FlowergraphError (ConfigError, KeyFileError, DatasetUnavailableError, ...) for bad input."""
    from .clients.node import NodeClassificationClient, NoOpClient
    from .tasks.federated_graph import client_graph, load_global_graph
    from .tasks.models import build_node_model, get_weights

    s = settings_for_node(context)
    pid, _ = node_identity(context.node_config, s)
    if s.method == "fedgcn" and s.he:
        if not s.key_file:
            raise ConfigError("he=true needs a CKKS key file: set key-file in the node config (deployment) or "
                              "the run config (create one with `python -m flowergraph.privacy.ckks keygen PATH`)")
        _check_key_file(s.key_file)
    if s.method == "noop":
        data = load_global_graph(s.graph_spec())
        model = build_node_model(in_dim=data.num_features, num_classes=data.num_classes, seed=s.seed,
                                 **model_kwargs(s))
        client = NoOpClient(get_weights(model), pid)
    else:
        graph_pid = 0 if s.method == "centralized" else pid  # centralized: every node holds the whole graph
        graph = client_graph(s.graph_spec(), s.partition_spec(), graph_pid)
        if s.method == "fedgcn":
            from .clients.fedgcn import FedGCNClient

            client = FedGCNClient(graph, s.train_config(), model_kwargs(s), seed=s.seed, hops=s.hops,
                                  state=context.state, key_file=s.key_file if s.he else None)
        else:
            client = NodeClassificationClient(graph, s.train_config(), model_kwargs(s), seed=s.seed)
    return _with_faults(client, s, pid)


@functools.lru_cache(maxsize=8)
def _key_file_ok(path: str, mtime: float, size: int) -> None:
    from .privacy import ckks

    ckks.load_key_file(path)  # KeyFileError naming the file: missing, not a CKKS context, no secret key


def _check_key_file(path: str) -> None:
    import os

    try:
        st = os.stat(path)
    except OSError:
        st = None
    _key_file_ok(path, st.st_mtime if st else -1.0, st.st_size if st else -1)


def _with_faults(client, s: RunSettings, pid: int):
    if not s.inject_faults:
        return client
    from .faults import faults_for, parse_faults

    mine = faults_for(parse_faults(s.inject_faults), pid)
    if not mine:
        return client
    from .clients.faults import FaultInjectingClient

    return FaultInjectingClient(client, mine, pid, hang_seconds=s.round_timeout + 5.0)


def client_fn(context: Context):
    torch.set_num_threads(1)
    try:
        client = build_client(context)
    except FlowergraphError as exc:  # bad input: the strategy fails the run with this message
        raise ConfigError(f"{CONFIG_ERROR_MARKER} {exc}") from exc
    return client.to_client()


app = ClientApp(client_fn=client_fn)
