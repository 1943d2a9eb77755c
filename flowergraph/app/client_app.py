"""The ClientApp: run config + node config -> the method's NumPyClient (looked up in the method registry).

Node identity comes from the node configuration: ``partition-id`` and ``num-partitions`` (simulation sets
both; in deployment pass them with ``flower-supernode --node-config``). A SuperNode may also name its own data,
keys and state folder there: node-config keys ``data-dir``, ``dataset``, ``key-file``, ``state-dir`` and
``partition-dir`` override the run configuration for that node, and ``partition-file`` names the data owner's
own partition file (``python -m flowergraph.partition export``): the node then reads only that file, never the
global dataset. Any other node-config key is refused.

Bad input (node config, run config, a missing or corrupt data folder, partition file or key file) is checked
when the client is built, before it trains; the error is re-raised with ``CONFIG_ERROR_MARKER`` in front, which
makes the strategy fail the run with that message (a transient fault only drops the client from a round).

Every client is wrapped, innermost first: to answer flowergraph's client-checkpoint phases
(:class:`flowergraph.clients.base.StateCheckpoints`, writing to ``state-dir``); with ``dp=central-client`` or
``dp=local``, to clip (and noise) its update (:class:`flowergraph.clients.privacy.DPUpdates`); with
``inject-faults``, to misbehave as planned (:class:`flowergraph.clients.faults.FaultInjectingClient`: an attacker
skips the DP step but its poison still goes through secure aggregation); with ``secure-agg``, to weigh (SecAgg+)
or encrypt (CKKS) its update (:class:`flowergraph.clients.secure.SecureUpdates`). The app's one mod,
:func:`privacy_mod`, is Flower's ``secaggplus_mod`` when the run has ``secure-agg=secagg+`` and does nothing
otherwise.
"""

from __future__ import annotations

import functools
import os

from flwr.app import Context
from flwr.clientapp import ClientApp

from ..settings import RunSettings, parse_run_config
from ..errors import ConfigError, FlowergraphError
from ..wire import CONFIG_ERROR_MARKER
from ..tasks.compute import configure_torch

NODE_CONFIG_OVERRIDES = ("data-dir", "dataset", "key-file", "state-dir", "partition-dir")
NODE_ONLY_KEYS = ("partition-file",)
NODE_CONFIG_KEYS = ("partition-id", "num-partitions") + NODE_CONFIG_OVERRIDES + NODE_ONLY_KEYS


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
    if not settings.method_info.whole_graph and nparts != settings.num_clients:
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


def build_client(context: Context):
    """The NumPyClient for this node and run (also used by tests and the plug-in example).

    Raises a FlowergraphError (ConfigError, KeyFileError, DatasetUnavailableError, PartitionError, ...) for bad
    input."""
    from ..clients.base import StateCheckpoints
    from ..clients.state import ClientState
    from ..methods import ClientArgs

    s = settings_for_node(context)
    pid, nparts = node_identity(context.node_config, s)
    if s.needs_key_file:
        if not s.key_file:
            raise ConfigError(f"method {s.method!r} with these settings encrypts, so it needs the data owners' CKKS "
                              f"key file: set key-file in the node config (deployment) or the run config (create "
                              f"one with `python -m flowergraph.privacy.ckks keygen PATH`)")
        _check_key_file(s.key_file)
    partition_file = str(context.node_config.get("partition-file", "") or "")
    if partition_file and not os.path.isfile(os.path.expanduser(partition_file)):
        raise ConfigError(f"node config partition-file {partition_file!r} does not exist")
    from ..clients.cache import ProcessCache

    state = ClientState(context.state)
    args = ClientArgs(settings=s, partition_id=pid, num_partitions=nparts, context=context, state=state,
                      partition_file=partition_file, cache=ProcessCache((context.run_id, pid)))
    client = s.method_info.build_client(args)
    client = StateCheckpoints(client, state, pid, s.state_dir or None)
    if s.dp in ("central-client", "local"):
        from ..clients.privacy import DPUpdates

        client = DPUpdates(client, s.dp, pid, clipping_norm=s.dp_clipping_norm, sensitivity=s.dp_sensitivity,
                           epsilon=s.dp_epsilon, delta=s.dp_delta)
    client = _with_faults(client, s, pid)
    if s.secure_agg != "none":
        from ..clients.secure import SecureUpdates

        client = SecureUpdates(client, s.secure_agg, pid, weighting=s.weighting, key_file=s.key_file or None,
                               max_weight=s.secagg_weight_bound, clipping_range=s.secagg_clipping_range,
                               min_secure_clients=s.min_secure_clients)
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


def _with_faults(client, s: RunSettings, pid: int):
    if not s.inject_faults:
        return client
    from ..settings.faults import faults_for, parse_faults

    mine = faults_for(parse_faults(s.inject_faults, rounds=s.rounds), pid)
    if not mine:
        return client
    from ..clients.faults import FaultInjectingClient

    return FaultInjectingClient(client, mine, pid, hang_seconds=s.round_timeout + 5.0)


def client_fn(context: Context):
    configure_torch()  # one thread, denormals flushed (flowergraph.tasks.compute)
    try:
        client = build_client(context)
    except FlowergraphError as exc:  # bad input: the strategy fails the run with this message
        raise ConfigError(f"{CONFIG_ERROR_MARKER} {exc}") from exc
    return client.to_client()


def privacy_mod(msg, context: Context, call_next):
    """Flower's ``secaggplus_mod`` for runs with ``secure-agg=secagg+`` (it fails any training message that does
    not come through ``SecAggPlusWorkflow``, so it cannot be on for other runs); a pass-through otherwise."""
    if str(context.run_config.get("secure-agg", "none")) == "secagg+":
        from flwr.client.mod import secaggplus_mod

        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


app = ClientApp(client_fn=client_fn, mods=[privacy_mod])


def __getattr__(name: str):  # moved names keep working for now, with a warning naming the new place
    if name == "model_kwargs":
        import warnings

        from ..methods.node import model_kwargs

        warnings.warn("flowergraph.app.client_app.model_kwargs moved to flowergraph.methods.node.model_kwargs",
                      DeprecationWarning, stacklevel=2)
        return model_kwargs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
