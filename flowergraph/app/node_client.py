"""What a node runs for a message, on either face: run config + node config -> the method's client.

:func:`build_client` builds the node's client (the method's, from the registry) with its wrappers, innermost
first: client checkpoints (:class:`flowergraph.clients.base.StateCheckpoints`), DP
(:class:`flowergraph.clients.privacy.DPUpdates`), planned faults (:class:`flowergraph.clients.faults.
FaultInjectingClient`) and secure aggregation (:class:`flowergraph.clients.secure.SecureUpdates`). The legacy
ClientApp (:mod:`flowergraph.app.client_app`: :func:`client_fn`) and the Message-API handlers
(:mod:`flowergraph.app.message_client`) both call it, so the method's client code runs the same on both.

Node identity comes from the node configuration: ``partition-id`` and ``num-partitions`` (simulation sets both; in
deployment pass them with ``flower-supernode --node-config``); the node-config keys ``data-dir``, ``dataset``,
``key-file``, ``state-dir`` and ``partition-dir`` override the run configuration for that node and
``partition-file`` names the data owner's own partition file. Any other node-config key is refused. Bad input is
refused when the client is built, before it trains.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flwr.app import Context

from ..errors import ConfigError, FlowergraphError

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings

NODE_CONFIG_OVERRIDES = ("data-dir", "dataset", "key-file", "state-dir", "partition-dir")
NODE_ONLY_KEYS = ("partition-file",)
NODE_CONFIG_KEYS = ("partition-id", "num-partitions") + NODE_CONFIG_OVERRIDES + NODE_ONLY_KEYS


@functools.lru_cache(maxsize=16)
def _settings(items: tuple) -> "RunSettings":
    from ..settings import parse_run_config

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
        from ..errors import did_you_mean

        raise ConfigError(
            f"unknown node-config key {unknown[0]!r}{did_you_mean(unknown[0], NODE_CONFIG_KEYS)}; "
            f"valid keys: {', '.join(NODE_CONFIG_KEYS)}"
        )


def node_identity(node_config, settings: "RunSettings") -> tuple[int, int]:
    """(partition id, number of partitions) from the node config, checked against ``num-clients``."""
    missing = [k for k in ("partition-id", "num-partitions") if k not in node_config]
    if missing:
        raise ConfigError(
            f"node config lacks {', '.join(missing)}; start the SuperNode with "
            f'--node-config "partition-id=<k> num-partitions=<K>"'
        )
    pid, nparts = _node_int(node_config, "partition-id"), _node_int(node_config, "num-partitions")
    if nparts < 1:
        raise ConfigError(f"node config num-partitions={nparts}: must be >= 1")
    if not settings.method_info.whole_graph and nparts != settings.num_clients:
        raise ConfigError(
            f"num-partitions={nparts} in the node config but num-clients={settings.num_clients} in "
            f"the run config; they must be equal (simulation: num-supernodes = num-clients)"
        )
    if not 0 <= pid < nparts:
        raise ConfigError(f"partition-id={pid} out of range [0, {nparts - 1}]")
    return pid, nparts


def client_schedule(settings: "RunSettings") -> tuple[int, ...]:
    """``client-order``: the client each simulated node serves (entry k: node k's client).

    ``partition``: node k serves client k. ``largest-first``: clients sorted by the number of training examples
    the method's data check reports (``preflight``'s ``client_sizes``), largest first, ties by id. Flower's
    simulation queues a round's messages in node order and its actors take them first come, first served, so
    this starts the longest fits first. The schedule depends only on the run config, so every process computes
    the same one; each client keeps its id, data and seeds."""
    items = tuple(sorted(settings.as_dict().items(), key=lambda kv: kv[0]))
    return _schedule(items)


@functools.lru_cache(maxsize=8)
def _schedule(items: tuple) -> tuple[int, ...]:
    from ..methods.registry import preflight
    from ..settings import parse_run_config

    s = parse_run_config(dict(items), allow_unknown=True)
    if s.client_order == "partition" or s.effective_num_clients == 1:
        return order_clients(s, None)
    return order_clients(s, preflight(s).get("client_sizes"))


def order_clients(settings: "RunSettings", sizes) -> tuple[int, ...]:
    """:func:`client_schedule` from the clients' sizes (``preflight``'s ``client_sizes``; unused for
    ``partition``)."""
    n = settings.effective_num_clients
    if settings.client_order == "partition" or n == 1:
        return tuple(range(n))
    sizes = list(sizes or [])
    if len(sizes) != n:
        raise ConfigError(
            f"client-order={settings.client_order!r}: method {settings.method!r} on "
            f"{settings.dataset!r} does not report the size of each of its {n} clients (got "
            f"{len(sizes)}); use client-order='partition'"
        )
    return tuple(sorted(range(n), key=lambda k: (-float(sizes[k]), k)))


def settings_for_node(context: Context, server: dict[str, Any] | None = None) -> "RunSettings":
    """The node's settings: ``server`` (what a flowergraph Strategy class sent: ``fg.settings``) if given, else the
    run config's flowergraph keys (others are the app's own and left out), then the node config's overrides."""
    check_node_config(context.node_config)
    run = dict(server) if server is not None else dict(context.run_config)
    for key in NODE_CONFIG_OVERRIDES:
        if key in context.node_config:
            run[key] = context.node_config[key]
    return _settings(tuple(sorted(run.items())))


def build_client(context: Context, server_settings: dict[str, Any] | None = None):
    """The client for this node and run (a :class:`~flowergraph.clients.base.Client`; also used by tests and the
    plug-in example); ``server_settings``:
    the settings a message carried (:func:`settings_for_node`).

    Raises a FlowergraphError (ConfigError, KeyFileError, DatasetUnavailableError, PartitionError, ...) for bad
    input."""
    from ..clients.base import StateCheckpoints
    from ..clients.state import ClientState
    from ..methods import ClientArgs

    s = settings_for_node(context, server_settings)
    pid, nparts = node_identity(context.node_config, s)
    node_rank = None
    if s.client_order != "partition":
        from .worker import in_deployment

        if not in_deployment():  # simulation: this node serves the client the schedule gives it
            node_rank, pid = pid, client_schedule(s)[pid]
    if s.needs_key_file:
        if not s.key_file:
            raise ConfigError(
                f"method {s.method!r} with these settings encrypts, so it needs the data owners' CKKS "
                f"key file: set key-file in the node config (deployment) or the run config (create "
                f"one with `python -m flowergraph.privacy.ckks keygen PATH`)"
            )
        _check_key_file(s.key_file)
    partition_file = str(context.node_config.get("partition-file", "") or "")
    if partition_file and not os.path.isfile(os.path.expanduser(partition_file)):
        raise ConfigError(f"node config partition-file {partition_file!r} does not exist")
    from ..clients.cache import ProcessCache

    state = ClientState(context.state, local_dir=(Path(s.state_dir).expanduser() / "local") if s.state_dir else None)
    args = ClientArgs(
        settings=s,
        partition_id=pid,
        num_partitions=nparts,
        context=context,
        state=state,
        partition_file=partition_file,
        cache=ProcessCache((context.run_id, pid)),
    )
    from . import timing

    with timing.build():  # the node's data and model (timed apart when FLOWERGRAPH_MESSAGE_TIMES is set)
        client = s.method_info.build_client(args)
    client = StateCheckpoints(client, state, pid, s.state_dir or None)
    if s.checkpoint_keep > 0:  # one file more than the server keeps: see flowergraph.clients.retention
        from ..clients.retention import KeepNewestStates

        client = KeepNewestStates(client, s.checkpoint_keep + 1)
    if s.dp in ("central-client", "local"):
        from ..clients.privacy import DPUpdates

        client = DPUpdates(
            client,
            s.dp,
            pid,
            clipping_norm=s.dp_clipping_norm,
            sensitivity=s.dp_sensitivity,
            epsilon=s.dp_epsilon,
            delta=s.dp_delta,
        )
    client = _with_faults(client, s, pid)
    if s.secure_agg != "none":
        from ..clients.secure import SecureUpdates

        client = SecureUpdates(
            client,
            s.secure_agg,
            pid,
            weighting=s.weighting,
            key_file=s.key_file or None,
            max_weight=s.secagg_weight_bound,
            clipping_range=s.secagg_clipping_range,
            min_secure_clients=s.min_secure_clients,
        )
    if node_rank is not None:  # the server then sends each round's messages in the simulation's queue order
        from ..clients.base import NodeRank

        client = NodeRank(client, node_rank)
    return client


@functools.lru_cache(maxsize=8)
def _key_file_ok(path: str, mtime: float, size: int) -> None:
    from ..privacy import ckks

    ckks.load_key_file(path)  # KeyFileError naming the file: missing, not a CKKS context, no secret key


def _check_key_file(path: str) -> None:
    try:
        st = os.stat(path)
    except OSError:
        st = None
    _key_file_ok(path, st.st_mtime if st else -1.0, st.st_size if st else -1)


def _with_faults(client, s: "RunSettings", pid: int):
    if not s.inject_faults:
        return client
    from ..settings.faults import faults_for, parse_faults

    mine = faults_for(parse_faults(s.inject_faults, rounds=s.rounds), pid)
    if not mine:
        return client
    from ..clients.faults import FaultInjectingClient

    return FaultInjectingClient(client, mine, pid, hang_seconds=s.round_timeout + 5.0)


def client_fn(context: Context):
    from ..tasks.compute import configure_torch
    from ..wire import CONFIG_ERROR_MARKER

    configure_torch()  # one thread, denormals flushed (flowergraph.tasks.compute)
    try:
        client = build_client(context)
    except FlowergraphError as exc:  # bad input: the strategy fails the run with this message
        raise ConfigError(f"{CONFIG_ERROR_MARKER} {exc}") from exc
    from .legacy import legacy_client

    return legacy_client(client)


def tidy_mod(msg, context: Context, call_next):
    """After the message: PyG's generated layer modules leave the temp directory (they stay loaded)."""
    try:
        return call_next(msg, context)
    finally:
        import sys

        if "torch_geometric" in sys.modules:
            from ..tasks.compute import remove_generated_sources

            remove_generated_sources()
