"""The exact Flower command lines each party runs (the CLI prints them; the loopback runs them), and the
operator's ``flwr`` connection."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ConfigError, KeyFileError
from .credentials import CA_CERT, SERVER_CERT, SERVER_KEY, check_certificate, check_private_key


def _check_port(port: Any, what: str) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{what} port must be an integer in [1, 65535], got {port!r}")
    return port


def superlink_command(
    certs_dir: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 9092, database: str | os.PathLike = "state.db"
) -> list[str]:
    """``flower-superlink`` with TLS, SuperNode authentication and no runtime ``uv sync`` of app dependencies.

    One HTTPS port serves SuperNodes (Fleet API), ``flwr`` (Control API) and the ServerApp (Runtime API).
    It runs through :mod:`flowergraph.deployment.superlink` (Flower's entry point with a longer SQLite busy
    timeout; the arguments are ``flower-superlink``'s).
    """
    certs = Path(certs_dir).expanduser().resolve()
    for name in (CA_CERT, SERVER_CERT, SERVER_KEY):
        if not (certs / name).is_file():
            raise KeyFileError(
                f"{str(certs / name)!r} does not exist; create the certificates with "
                f"`python -m flowergraph.deployment certs --out {certs}`"
            )
    _check_port(port, "SuperLink")
    return [
        sys.executable,
        "-m",
        "flowergraph.deployment.superlink",
        "--ssl-ca-certfile",
        str(certs / CA_CERT),
        "--ssl-certfile",
        str(certs / SERVER_CERT),
        "--ssl-keyfile",
        str(certs / SERVER_KEY),
        "--enable-supernode-auth",
        "--disable-runtime-dependency-installation",
        "--host",
        host,
        "--port",
        str(port),
        "--database",
        str(Path(database).expanduser().resolve()),
    ]


def _quotable_path(path: Path, what: str) -> str:
    if '"' in str(path) or "\\" in str(path):
        raise ConfigError(
            f"{what} {str(path)!r} contains a quote or backslash, which Flower's --node-config parser "
            f"cannot carry; use a path without them"
        )
    return str(path)


def node_config_string(
    partition_id: int,
    num_partitions: int,
    data_dir: str | os.PathLike | None = None,
    dataset: str | None = None,
    key_file: str | os.PathLike | None = None,
    *,
    partition_file: str | os.PathLike | None = None,
    state_dir: str | os.PathLike | None = None,
) -> str:
    """The ``--node-config`` value that tells a SuperNode which partition (and which local data) it owns.

    ``key_file``: the data owners' shared CKKS key file (FedGCN with ``fedgcn.he=true``), provisioned to data
    owners out of band; it is checked here (KeyFileError naming it when missing or not a CKKS secret context).
    ``partition_file``: the owner's own partition file (``python -m flowergraph.partition export``), checked
    to be for this partition; the node then never reads the global dataset. ``state_dir``: where the node
    saves its state at checkpoints (node-local)."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigError(f"num-partitions must be an integer >= 1, got {num_partitions!r}")
    if isinstance(partition_id, bool) or not isinstance(partition_id, int) or not 0 <= partition_id < num_partitions:
        raise ConfigError(f"partition-id must be an integer in [0, {num_partitions - 1}], got {partition_id!r}")
    parts = [f"partition-id={partition_id}", f"num-partitions={num_partitions}"]
    if data_dir is not None:
        path = Path(data_dir).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"data-dir {str(data_dir)!r} does not exist or is not a directory")
        parts.append(f'data-dir="{_quotable_path(path, "data-dir")}"')
    if dataset is not None:
        from ..tasks.datasets import ALL_DATASETS

        if str(dataset).lower() not in {d.lower() for d in ALL_DATASETS}:
            raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {', '.join(ALL_DATASETS)}")
        parts.append(f'dataset="{dataset}"')
    if key_file is not None:
        from ..privacy import ckks

        path = Path(key_file).expanduser().resolve()
        ckks.load_key_file(path)  # KeyFileError: missing, not a CKKS context, or no secret key
        parts.append(f'key-file="{_quotable_path(path, "key-file")}"')
    if partition_file is not None:
        from ..tasks.partition_files import load_partition_file

        path = Path(partition_file).expanduser().resolve()
        load_partition_file(path, num_clients=num_partitions, client_id=partition_id)  # PartitionError naming it
        parts.append(f'partition-file="{_quotable_path(path, "partition-file")}"')
    if state_dir is not None:
        path = Path(state_dir).expanduser().resolve()
        parts.append(f'state-dir="{_quotable_path(path, "state-dir")}"')
    return " ".join(parts)


def supernode_command(
    superlink: str,
    ca_cert: str | os.PathLike,
    private_key: str | os.PathLike,
    *,
    partition_id: int,
    num_partitions: int,
    data_dir: str | os.PathLike | None = None,
    dataset: str | None = None,
    key_file: str | os.PathLike | None = None,
    partition_file: str | os.PathLike | None = None,
    state_dir: str | os.PathLike | None = None,
    port: int = 9094,
) -> list[str]:
    """``flower-supernode`` over TLS, authenticated with its private key, told its partition by node config.

    It runs through :mod:`flowergraph.deployment.supernode` (Flower's entry point, with the next message of a round
    picked up sooner). ``port`` is the SuperNode's own local Runtime API (127.0.0.1); SuperNodes on one host need
    different ports.
    """
    if not re.fullmatch(r"\[?[A-Za-z0-9.:_-]+\]?:\d+", superlink or ""):
        raise ConfigError(f"SuperLink address {superlink!r} must be HOST:PORT, e.g. superlink.example.org:9092")
    _check_port(port, "SuperNode")
    ca = check_certificate(ca_cert)
    key = check_private_key(private_key)
    node_config = node_config_string(
        partition_id, num_partitions, data_dir, dataset, key_file, partition_file=partition_file, state_dir=state_dir
    )
    return [
        sys.executable,
        "-m",
        "flowergraph.deployment.supernode",
        "--superlink",
        superlink,
        "--root-certificates",
        str(ca.resolve()),
        "--auth-supernode-private-key",
        str(key.resolve()),
        "--port",
        str(port),
        "--node-config",
        node_config,
    ]


def write_connection(flwr_home: str | os.PathLike, name: str, address: str, ca_cert: str | os.PathLike) -> Path:
    """Add (or replace) the connection ``[superlink.<name>]`` in ``<flwr_home>/config.toml``; keep the rest."""
    import tomli_w  # a dependency of flwr

    if not re.fullmatch(r"[A-Za-z0-9_-]+", name or ""):
        raise ConfigError(f"connection name {name!r} must be letters, digits, '-' or '_'")
    if not re.fullmatch(r"\[?[A-Za-z0-9.:_-]+\]?:\d+", address or ""):
        raise ConfigError(f"SuperLink address {address!r} must be HOST:PORT")
    ca = check_certificate(ca_cert).resolve()
    config_file = Path(flwr_home).expanduser() / "config.toml"
    config: dict[str, Any] = {}
    if config_file.exists():
        try:
            config = tomllib.loads(config_file.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{str(config_file)!r} is not valid TOML ({exc})") from exc
    superlinks = config.setdefault("superlink", {})
    superlinks[name] = {"address": address, "root-certificates": str(ca)}
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(tomli_w.dumps(config))
    return config_file
