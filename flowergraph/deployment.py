"""Real deployment: one SuperLink, one SuperNode per data owner, TLS and SuperNode authentication.

Everything here uses Flower's own mechanisms (``flower-superlink``, ``flower-supernode``, ``flwr``); this module
only creates the credentials, writes the commands out correctly, and watches the processes. Each SuperNode is
told which part of the federated graph it owns through its *node configuration*
(``--node-config "partition-id=K num-partitions=N data-dir=..."``; see :mod:`flowergraph.client_app`).

By hand (one machine per party; ``docs/deployment.md`` has the full walk-through)::

    python -m flowergraph.deployment certs --out certs --host superlink.example.org   # operator: CA + server cert
    python -m flowergraph.deployment keys --out keys --name owner0                   # each data owner: key pair
    python -m flowergraph.deployment superlink --certs certs --host 0.0.0.0 --port 9092 --database state.db
    python -m flowergraph.deployment connection --name fg --address superlink.example.org:9092 --ca certs/ca.crt
    python -m flowergraph.deployment register --connection fg keys/owner0.pub        # operator, per owner
    python -m flowergraph.deployment supernode --superlink superlink.example.org:9092 --ca ca.crt \\
        --key owner0 --partition-id 0 --num-partitions 3 --data-dir /data \\
        [--key-file ckks.bin]                                                          # each data owner
    python -m flowergraph.deployment run --connection fg --method fedavg --num-clients 3 --rounds 10 --out results/x
    python -m flowergraph.deployment status --connection fg

On one machine (certificates, SuperLink, N SuperNodes, one run, status, clean-up, in one call)::

    python -m flowergraph.deployment loopback --method fedavg --num-nodes 3 --rounds 2 --out results/deploy

    from flowergraph.deployment import run_deployment
    result = run_deployment("fedavg", num_nodes=3, rounds=2, out_dir="results/deploy")
    result.ok, result.flwr_status, result.summary["final_accuracy"]

Facts this relies on (Flower 1.41, checked): the SuperLink serves Fleet, Control and Runtime APIs on one HTTPS
port; SuperNode authentication needs TLS; ``flwr supernode register KEY.pub CONNECTION`` registers a node's
public key (ECDSA, a NIST curve, OpenSSH format); a SuperNode whose key is not registered is refused and exits
non-zero after logging ``Exit Code: 305``; ``flwr run`` exits 0 even when the run failed, so the status is read
with ``flwr ls CONNECTION --run-id ID --format json``; and ``flwr supernode register --format json`` exits 0
even when registration failed (its JSON says ``"success": false``).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from .errors import ConfigError, FlowergraphError, KeyFileError

# The process and app helpers come from flowergraph.simulation, imported where they are used: it imports torch
# (seconds), which the credential, registration and stop commands do not need.

BIN_DIR = Path(sys.executable).parent
DEFAULT_CERT_HOSTS = ("127.0.0.1", "localhost")
CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY = "ca.crt", "ca.key", "server.pem", "server.key"
REFUSED_EXIT_CODE = 305  # Flower's SUPERNODE_CONNECTION_ERROR: logged when the SuperLink refuses a node's key
_RUN_ID = re.compile(r"Successfully started run (\d+)")


# --------------------------------------------------------------------------------------------------------------
# Credentials: a CA, a server certificate for the SuperLink, and one ECDSA P-384 key pair per SuperNode.
# ``cryptography`` is a dependency of flwr itself, so nothing new is installed; the equivalent openssl /
# ssh-keygen commands are in docs/deployment.md.
# --------------------------------------------------------------------------------------------------------------

def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _refuse_overwrite(paths: Sequence[Path], force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise ConfigError(f"refusing to overwrite existing {', '.join(existing)}; pass force=True (--force) or "
                          f"choose another folder")


def _san_entries(hosts: Sequence[str]):
    from cryptography import x509

    if not hosts:
        raise ConfigError("the server certificate needs at least one host (IP address or DNS name) for "
                          "subjectAltName, e.g. 127.0.0.1 or superlink.example.org")
    entries = []
    for host in hosts:
        host = str(host).strip()
        if not host or any(c.isspace() for c in host) or "/" in host or (":" in host and not _is_ip(host)):
            raise ConfigError(f"certificate host {host!r} is neither an IP address nor a DNS name")
        entries.append(x509.IPAddress(ipaddress.ip_address(host)) if _is_ip(host) else x509.DNSName(host))
    return entries


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def make_certificates(out_dir: str | os.PathLike, hosts: Sequence[str] = DEFAULT_CERT_HOSTS, *, days: int = 365,
                      force: bool = False) -> dict[str, Path]:
    """Create a CA and a SuperLink server certificate signed by it (ECDSA P-384, SHA-384).

    The server certificate's subjectAltName lists every entry of ``hosts`` (IP addresses as ``IP:``, names as
    ``DNS:``): SuperNodes and ``flwr`` check the address they connect to against it. Writes ``ca.crt`` (give it
    to every party), ``ca.key`` (keep it offline), ``server.pem`` and ``server.key`` (the SuperLink's).
    Returns the four paths by name (``ca_cert``, ``ca_key``, ``server_cert``, ``server_key``).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ConfigError(f"certificate validity days must be an integer >= 1, got {days!r}")
    hosts = list(hosts)
    san = _san_entries(hosts)
    out = Path(out_dir)
    paths = {"ca_cert": out / CA_CERT, "ca_key": out / CA_KEY, "server_cert": out / SERVER_CERT,
             "server_key": out / SERVER_KEY}
    _refuse_overwrite(list(paths.values()), force)
    out.mkdir(parents=True, exist_ok=True)

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)  # tolerate clock skew
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "flowergraph"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "flowergraph deployment CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA384()))
    server_key = ec.generate_private_key(ec.SECP384R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name).public_key(server_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA384()))
    pem, pkcs8, none = (serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption())
    paths["ca_cert"].write_bytes(ca_cert.public_bytes(pem))
    _write_private(paths["ca_key"], ca_key.private_bytes(pem, pkcs8, none))
    paths["server_cert"].write_bytes(server_cert.public_bytes(pem))
    _write_private(paths["server_key"], server_key.private_bytes(pem, pkcs8, none))
    return paths


def make_node_key(path: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
    """An ECDSA P-384 key pair in OpenSSH format: ``path`` (private, mode 600) and ``path.pub``.

    The same files as ``ssh-keygen -t ecdsa -b 384 -N "" -f path``. The private key never leaves the data
    owner; the ``.pub`` file goes to the SuperLink operator, who registers it.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = Path(path)
    public = private.with_name(private.name + ".pub")
    _refuse_overwrite([private, public], force)
    key = ec.generate_private_key(ec.SECP384R1())
    _write_private(private, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                              serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH) + b"\n")
    return private, public


def check_private_key(path: str | os.PathLike) -> Path:
    """The path of a SuperNode private key Flower will accept (OpenSSH, unencrypted EC), else KeyFileError."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(f"SuperNode private key {str(p)!r} does not exist; create one with "
                           f"`python -m flowergraph.deployment keys --out DIR --name NAME` or "
                           f"`ssh-keygen -t ecdsa -b 384 -N \"\" -f NAME`")
    try:
        key = load_ssh_private_key(p.read_bytes(), None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"SuperNode private key {str(p)!r} is not an unencrypted OpenSSH private key "
                           f"({exc}); Flower needs an ECDSA key, e.g. ssh-keygen -t ecdsa -b 384") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise KeyFileError(f"SuperNode private key {str(p)!r} is a {type(key).__name__}; Flower needs an ECDSA "
                           f"key on a NIST curve (secp256r1, secp384r1, secp521r1)")
    return p


def check_public_key(path: str | os.PathLike) -> Path:
    """The path of a SuperNode public key (OpenSSH, ECDSA), else KeyFileError."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(f"SuperNode public key {str(p)!r} does not exist")
    try:
        key = load_ssh_public_key(p.read_bytes())
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"SuperNode public key {str(p)!r} is not an OpenSSH public key ({exc})") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise KeyFileError(f"SuperNode public key {str(p)!r} is a {type(key).__name__}; Flower needs ECDSA")
    return p


def check_certificate(path: str | os.PathLike, what: str = "CA certificate") -> Path:
    from cryptography import x509

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(f"{what} {str(p)!r} does not exist")
    try:
        x509.load_pem_x509_certificate(p.read_bytes())
    except ValueError as exc:
        raise KeyFileError(f"{what} {str(p)!r} is not a PEM certificate ({exc})") from exc
    return p


# --------------------------------------------------------------------------------------------------------------
# Commands: the exact Flower command lines each party runs (the CLI prints them; the loopback runs them).
# --------------------------------------------------------------------------------------------------------------

def _check_port(port: Any, what: str) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{what} port must be an integer in [1, 65535], got {port!r}")
    return port


def superlink_command(certs_dir: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 9092,
                      database: str | os.PathLike = "state.db") -> list[str]:
    """``flower-superlink`` with TLS, SuperNode authentication and no runtime ``uv sync`` of app dependencies.

    One HTTPS port serves SuperNodes (Fleet API), ``flwr`` (Control API) and the ServerApp (Runtime API).
    """
    certs = Path(certs_dir).expanduser().resolve()
    for name in (CA_CERT, SERVER_CERT, SERVER_KEY):
        if not (certs / name).is_file():
            raise KeyFileError(f"{str(certs / name)!r} does not exist; create the certificates with "
                               f"`python -m flowergraph.deployment certs --out {certs}`")
    _check_port(port, "SuperLink")
    return [str(BIN_DIR / "flower-superlink"),
            "--ssl-ca-certfile", str(certs / CA_CERT), "--ssl-certfile", str(certs / SERVER_CERT),
            "--ssl-keyfile", str(certs / SERVER_KEY), "--enable-supernode-auth",
            "--disable-runtime-dependency-installation",
            "--host", host, "--port", str(port), "--database", str(Path(database).expanduser().resolve())]


def _quotable_path(path: Path, what: str) -> str:
    if '"' in str(path) or "\\" in str(path):
        raise ConfigError(f"{what} {str(path)!r} contains a quote or backslash, which Flower's --node-config parser "
                          f"cannot carry; use a path without them")
    return str(path)


def node_config_string(partition_id: int, num_partitions: int, data_dir: str | os.PathLike | None = None,
                       dataset: str | None = None, key_file: str | os.PathLike | None = None) -> str:
    """The ``--node-config`` value that tells a SuperNode which partition (and which local data) it owns.

    ``key_file``: the data owners' shared CKKS key file (FedGCN with ``he=true``), provisioned to data owners
    out of band; it is checked here (KeyFileError naming it when missing or not a CKKS secret context)."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigError(f"num-partitions must be an integer >= 1, got {num_partitions!r}")
    if isinstance(partition_id, bool) or not isinstance(partition_id, int) \
            or not 0 <= partition_id < num_partitions:
        raise ConfigError(f"partition-id must be an integer in [0, {num_partitions - 1}], got {partition_id!r}")
    parts = [f"partition-id={partition_id}", f"num-partitions={num_partitions}"]
    if data_dir is not None:
        path = Path(data_dir).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"data-dir {str(data_dir)!r} does not exist or is not a directory")
        parts.append(f'data-dir="{_quotable_path(path, "data-dir")}"')
    if dataset is not None:
        from .tasks.datasets import ALL_DATASETS

        if str(dataset).lower() not in {d.lower() for d in ALL_DATASETS}:
            raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {', '.join(ALL_DATASETS)}")
        parts.append(f'dataset="{dataset}"')
    if key_file is not None:
        from .privacy import ckks

        path = Path(key_file).expanduser().resolve()
        ckks.load_key_file(path)  # KeyFileError: missing, not a CKKS context, or no secret key
        parts.append(f'key-file="{_quotable_path(path, "key-file")}"')
    return " ".join(parts)


def supernode_command(superlink: str, ca_cert: str | os.PathLike, private_key: str | os.PathLike, *,
                      partition_id: int, num_partitions: int, data_dir: str | os.PathLike | None = None,
                      dataset: str | None = None, key_file: str | os.PathLike | None = None,
                      port: int = 9094) -> list[str]:
    """``flower-supernode`` over TLS, authenticated with its private key, told its partition by node config.

    ``port`` is the SuperNode's own local Runtime API (127.0.0.1); SuperNodes on one host need different ports.
    """
    if not re.fullmatch(r"\[?[A-Za-z0-9.:_-]+\]?:\d+", superlink or ""):
        raise ConfigError(f"SuperLink address {superlink!r} must be HOST:PORT, e.g. superlink.example.org:9092")
    _check_port(port, "SuperNode")
    ca = check_certificate(ca_cert)
    key = check_private_key(private_key)
    node_config = node_config_string(partition_id, num_partitions, data_dir, dataset, key_file)
    return [str(BIN_DIR / "flower-supernode"), "--superlink", superlink, "--root-certificates", str(ca.resolve()),
            "--auth-supernode-private-key", str(key.resolve()), "--port", str(port), "--node-config", node_config]


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


# --------------------------------------------------------------------------------------------------------------
# Talking to a running SuperLink with Flower's CLI.
# --------------------------------------------------------------------------------------------------------------

def flower_env(flwr_home: str | os.PathLike | None = None, **extra: str) -> dict[str, str]:
    """The environment every Flower process gets here: this venv first on PATH (the SuperLink starts
    ``flower-superexec`` by name), no telemetry, no update check, no runtime ``uv sync``."""
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1", PYTHONUNBUFFERED="1", **extra)
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    if flwr_home is not None:
        env["FLWR_HOME"] = str(Path(flwr_home).expanduser().resolve())
    return env


def _flwr_json(args: list[str], env: dict[str, str], timeout: float = 60) -> dict[str, Any]:
    """Run ``flwr ARGS --format json``; the parsed JSON (``success`` false when it could not be parsed)."""
    proc = subprocess.run([str(BIN_DIR / "flwr"), *args, "--format", "json"], env=env, capture_output=True,
                          text=True, timeout=timeout)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"success": False, "error-message": (proc.stdout + proc.stderr).strip()[-2000:]}
    return data if isinstance(data, dict) else {"success": False, "error-message": str(data)}


def wait_for_superlink(address: str, ca_cert: str | os.PathLike, *, timeout: float = 60.0,
                       proc: subprocess.Popen | None = None, log_file: Path | None = None) -> None:
    """Poll ``https://ADDRESS/health`` (verified against ``ca_cert``) until the SuperLink answers 200."""
    context = ssl.create_default_context(cafile=str(check_certificate(ca_cert)))
    deadline = time.monotonic() + timeout
    last = ""
    see = f"; see {log_file}" if log_file else ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with code {proc.returncode}{see}")
        try:
            with urllib.request.urlopen(f"https://{address}/health", timeout=2, context=context) as resp:
                if resp.status == 200:
                    return
        except OSError as exc:  # URLError, ssl.SSLError, ConnectionRefusedError
            last = str(exc)
        time.sleep(0.3)
    raise RuntimeError(f"the SuperLink at {address} did not answer https://{address}/health within "
                       f"{timeout:.0f} s (last error: {last}){see}")


def register_node(public_key: str | os.PathLike, connection: str, env: dict[str, str]) -> int:
    """Register a SuperNode's public key with the SuperLink (``flwr supernode register``); its node id."""
    key = check_public_key(public_key)
    out = _flwr_json(["supernode", "register", str(key), connection], env)
    if not out.get("success"):
        raise RuntimeError(f"registering {str(key)!r} with connection {connection!r} failed: "
                           f"{out.get('error-message', out)}")
    return int(out["node-id"])


def list_nodes(connection: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = _flwr_json(["supernode", "list", connection], env)
    if not out.get("success"):
        raise RuntimeError(f"flwr supernode list {connection} failed: {out.get('error-message', out)}")
    return list(out.get("nodes", []))


def run_status(connection: str, env: dict[str, str], run_id: int | None = None) -> str:
    """The status ``flwr ls`` reports for ``run_id`` (default: the latest run), e.g. ``finished:completed``."""
    args = ["ls", connection] + (["--run-id", str(run_id)] if run_id is not None else [])
    out = _flwr_json(args, env)
    runs = out.get("runs") or []
    if not out.get("success", True) or not runs:
        return "unknown"
    return str(runs[-1].get("status", "unknown"))


@dataclass
class RunOutcome:
    status: str  # "completed" or "failed"
    flwr_status: str  # what `flwr ls` reported, "timed out", or "stopped: <reason>"
    run_id: int | None
    log_file: Path


def submit_run(app_dir: str | os.PathLike, connection: str, run_config: dict[str, Any], *, env: dict[str, str],
               log_file: str | os.PathLike, stream: TextIO | None = None, verbose: bool = False,
               timeout: float | None = None, on_started: Callable[[int], None] | None = None,
               abort_check: Callable[[], str | None] | None = None) -> RunOutcome:
    """``flwr run APP CONNECTION --stream --run-config FILE``; stream progress; read the status with ``flwr ls``.

    ``abort_check`` is polled every second while the run streams; when it returns a reason (e.g. "SuperNode 2
    exited") the run is stopped (``flwr stop``) and reported as failed with that reason. ``timeout`` does the
    same after that many seconds. The ``flwr run`` process is always stopped before returning.
    """
    from .simulation import _display, _kill_tree, _toml_value

    stream = stream or sys.stdout
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", prefix="flowergraph-run-config-", delete=False) as f:
        f.write("".join(f"{k} = {_toml_value(v)}\n" for k, v in run_config.items()))
        config_file = Path(f.name)
    cmd = [str(BIN_DIR / "flwr"), "run", str(Path(app_dir).resolve()), connection, "--stream",
           "--run-config", str(config_file)]
    stop_reason: list[str] = []
    run_ids: list[int] = []
    done = threading.Event()
    try:
        with open(log_file, "a") as log_out:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    bufsize=1, start_new_session=True)

            def watch() -> None:
                started = time.monotonic()
                while not done.wait(1.0):
                    reason = None
                    if timeout is not None and time.monotonic() - started > timeout:
                        reason = f"timed out after {timeout:.0f} s"
                    elif abort_check is not None:
                        reason = abort_check()
                    if reason:
                        stop_reason.append(reason)
                        if run_ids:  # ask the SuperLink to stop the run, then end the log stream
                            subprocess.run([str(BIN_DIR / "flwr"), "stop", str(run_ids[0]), connection],
                                           env=env, capture_output=True, timeout=60)
                        _kill_tree(proc.pid)
                        return

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log_out.write(line)
                    log_out.flush()
                    if not run_ids and (m := _RUN_ID.search(line)):
                        run_ids.append(int(m.group(1)))
                        if on_started is not None:
                            on_started(run_ids[0])
                    shown = line if verbose else _display(line)
                    if shown:
                        stream.write(shown)
                        stream.flush()
                proc.wait()
            finally:
                done.set()
                watcher.join(timeout=120)
                if proc.poll() is None:
                    _kill_tree(proc.pid)
    finally:
        config_file.unlink(missing_ok=True)
    run_id = run_ids[0] if run_ids else None
    if stop_reason:
        return RunOutcome("failed", f"stopped: {stop_reason[0]}", run_id, log_file)
    if run_id is None:
        return RunOutcome("failed", "not started (see the log)", None, log_file)
    status = run_status(connection, env, run_id)
    deadline = time.monotonic() + 30
    while not status.startswith("finished") and time.monotonic() < deadline:  # the stream may end first
        time.sleep(1)
        status = run_status(connection, env, run_id)
    return RunOutcome("completed" if status == "finished:completed" else "failed", status, run_id, log_file)


# --------------------------------------------------------------------------------------------------------------
# Loopback: every party on this machine, each process tracked by PID and stopped at the end.
# --------------------------------------------------------------------------------------------------------------

@dataclass
class Node:
    partition_id: int
    private_key: Path
    port: int
    log_file: Path
    proc: subprocess.Popen
    node_id: int | None  # None: its key was deliberately not registered
    killed: bool = False  # stopped on purpose (kill_node): not a failure of the deployment

    @property
    def exit_code(self) -> int | None:
        return self.proc.poll()


def stop_trees(pids: Sequence[int]) -> None:
    """Stop processes and all their descendants, by PID, in parallel (each: SIGTERM, SIGKILL after 5 s)."""
    from .simulation import _kill_tree

    threads = [threading.Thread(target=_kill_tree, args=(pid,), daemon=True) for pid in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class LoopbackDeployment:
    """A SuperLink and SuperNodes on this machine, with TLS and SuperNode authentication.

    Use it as a context manager: every process it starts (and every process those start) is stopped on exit,
    also after an error. ``pids`` lists every process it saw.

        with LoopbackDeployment(log_dir="results/x") as dep:
            dep.start_superlink()
            for k in range(3):
                dep.add_node(k, 3)
            dep.wait_for_nodes(3)
            outcome = dep.run({"method": "fedavg", "num-clients": 3, "rounds": 2, "out-dir": "results/x"})
    """

    def __init__(self, log_dir: str | os.PathLike, *, host: str = "127.0.0.1",
                 work_dir: str | os.PathLike | None = None, stream: TextIO | None = None, verbose: bool = False):
        self.log_dir = Path(log_dir).resolve()
        self.host = host
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self._own_work = work_dir is None
        self.work = Path(work_dir).resolve() if work_dir else Path(tempfile.mkdtemp(prefix="flowergraph-deploy-"))
        self.connection = "fg-deploy"
        self.flwr_home = self.work / "operator-home"
        self.env = flower_env(self.flwr_home)
        self.superlink: subprocess.Popen | None = None
        self.superlink_address: str | None = None
        self.nodes: list[Node] = []
        self.pids: list[int] = []
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self.certs: dict[str, Path] = {}
        self.app_dir: Path | None = None
        self._t0 = time.monotonic()

    # -- helpers ------------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.stream.write(f"flowergraph: [{time.monotonic() - self._t0:6.1f} s] {text}\n")
        self.stream.flush()

    def _start(self, name: str, cmd: list[str], log_file: Path, env: dict[str, str]) -> subprocess.Popen:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as out:
            proc = subprocess.Popen(cmd, cwd=str(self.work), env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self._procs.append((name, proc))
        self.pids.append(proc.pid)
        return proc

    def __enter__(self) -> "LoopbackDeployment":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop every process started here (SuperNodes and SuperLink), with all their descendants, by PID."""
        from .simulation import _descendants

        count = 0
        for name, proc in self._procs:
            self.pids.extend([proc.pid] + _descendants(proc.pid))
            count += proc.poll() is None
        stop_trees([proc.pid for _, proc in self._procs])
        self._procs.clear()
        self.pids = sorted(set(self.pids))
        if count:
            self.say(f"stopped {count} Flower process tree(s) ({len(self.pids)} processes seen in all)")
        if self._own_work:
            shutil.rmtree(self.work, ignore_errors=True)

    # -- the parties --------------------------------------------------------------------------------------
    def start_superlink(self, *, port: int | None = None, cert_hosts: Sequence[str] | None = None,
                        timeout: float = 90.0) -> str:
        """Create the CA and server certificate, start the SuperLink, write the operator's connection."""
        from .simulation import _free_port

        hosts = list(cert_hosts) if cert_hosts else list(dict.fromkeys([self.host, *DEFAULT_CERT_HOSTS]))
        self.certs = make_certificates(self.work / "certs", hosts)
        port = port or _free_port()
        self.superlink_address = f"{self.host}:{port}"
        cmd = superlink_command(self.work / "certs", host=self.host, port=port,
                                database=self.work / "superlink.db")
        log_file = self.log_dir / "superlink.log"
        self.superlink = self._start("superlink", cmd, log_file, flower_env(self.work / "superlink-home"))
        wait_for_superlink(self.superlink_address, self.certs["ca_cert"], timeout=timeout, proc=self.superlink,
                           log_file=log_file)
        write_connection(self.flwr_home, self.connection, self.superlink_address, self.certs["ca_cert"])
        self.say(f"SuperLink up at {self.superlink_address} (TLS, SuperNode authentication; pid "
                 f"{self.superlink.pid}; log {log_file})")
        return self.superlink_address

    def add_node(self, partition_id: int, num_partitions: int, *, data_dir: str | os.PathLike | None = None,
                 dataset: str | None = None, key_file: str | os.PathLike | None = None,
                 register: bool = True) -> Node:
        """Create a key pair for a data owner, register its public key (unless ``register=False``), and start
        its SuperNode with ``--node-config "partition-id=K num-partitions=N [data-dir=...] [key-file=...]"``.

        ``key_file`` (CKKS, FedGCN with he=true) is copied into this owner's own folder first, as an out-of-band
        provisioning would put it on the owner's machine; the node config names the copy."""
        from .simulation import _free_port

        if self.superlink_address is None:
            raise RuntimeError("start_superlink() first")
        name = f"node{partition_id}" if register else f"unregistered{partition_id}-{len(self.nodes)}"
        private, public = make_node_key(self.work / "keys" / name)
        node_id = register_node(public, self.connection, self.env) if register else None
        port = _free_port()
        if key_file is not None:
            own = self.work / f"{name}-home" / "ckks-key.bin"
            own.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(key_file, own)
            os.chmod(own, 0o600)
            key_file = own
        cmd = supernode_command(self.superlink_address, self.certs["ca_cert"], private, partition_id=partition_id,
                                num_partitions=num_partitions, data_dir=data_dir, dataset=dataset,
                                key_file=key_file, port=port)
        log_file = self.log_dir / (f"supernode-{partition_id}.log" if register else f"{name}.log")
        proc = self._start(name, cmd, log_file, flower_env(self.work / f"{name}-home"))
        node = Node(partition_id, private, port, log_file, proc, node_id)
        self.nodes.append(node)
        what = f"registered as node {node_id}" if register else "key NOT registered"
        data = f", data-dir {data_dir}" if data_dir else ""
        data += ", CKKS key file" if key_file else ""
        self.say(f"SuperNode {name}: partition {partition_id}/{num_partitions}{data}, {what} (pid {proc.pid}, "
                 f"log {log_file})")
        return node

    def kill_node(self, node: Node) -> list[int]:
        """Kill a SuperNode and every process under it with SIGKILL, now (a data owner's machine failing);
        the run goes on without it (it is not reported as a dead node). Returns the PIDs killed."""
        from .simulation import _descendants

        pids = [node.proc.pid] + _descendants(node.proc.pid)
        self.pids.extend(pids)
        node.killed = True
        for pid in reversed(pids):  # children first: nothing is left to re-parent
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        node.proc.wait(timeout=30)
        self.say(f"killed SuperNode for partition {node.partition_id} (pids {' '.join(map(str, pids))})")
        return pids

    def wait_for_nodes(self, count: int, timeout: float = 120.0) -> None:
        """Wait until ``count`` registered SuperNodes are online (``flwr supernode list``)."""
        deadline = time.monotonic() + timeout
        online = 0
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.node_id is not None and not node.killed and node.exit_code is not None:
                    raise RuntimeError(f"SuperNode for partition {node.partition_id} exited with code "
                                       f"{node.exit_code}; log {node.log_file}:\n{_tail(node.log_file)}")
            online = sum(n.get("status") == "online" for n in list_nodes(self.connection, self.env))
            if online >= count:
                self.say(f"{online}/{count} SuperNodes online")
                return
            time.sleep(1.0)
        raise RuntimeError(f"only {online} of {count} SuperNodes came online within {timeout:.0f} s; logs in "
                           f"{self.log_dir}")

    def _dead_node(self) -> str | None:
        for node in self.nodes:
            if node.node_id is not None and not node.killed and node.exit_code is not None:
                return (f"SuperNode for partition {node.partition_id} exited with code {node.exit_code} during "
                        f"the run (log {node.log_file})")
        if self.superlink is not None and self.superlink.poll() is not None:
            return f"the SuperLink exited with code {self.superlink.returncode}"
        return None

    def run(self, run_config: dict[str, Any], *, timeout: float | None = None,
            on_started: Callable[[int], None] | None = None) -> RunOutcome:
        """Submit one run of this package's app to the SuperLink and wait for it (see :func:`submit_run`)."""
        from .simulation import write_app

        def started(run_id: int) -> None:
            self.say(f"run {run_id} submitted")
            if on_started is not None:
                on_started(run_id)

        if self.app_dir is None:
            self.app_dir = self.work / "app"
            self.app_dir.mkdir()
            write_app(self.app_dir)
        outcome = submit_run(self.app_dir, self.connection, run_config, env=self.env,
                             log_file=self.log_dir / "flower.log", stream=self.stream, verbose=self.verbose,
                             timeout=timeout, abort_check=self._dead_node,
                             on_started=started)
        self.say(f"run {outcome.run_id}: {outcome.flwr_status}")
        return outcome


@dataclass
class DeploymentResult:
    status: str  # "completed" or "failed"
    flwr_status: str  # what `flwr ls` reported (e.g. "finished:completed"), or why the run was stopped
    out_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None
    superlink_address: str = ""
    node_ports: list[int] = field(default_factory=list)
    node_ids: list[int] = field(default_factory=list)  # the id each node's registered key was given
    log_dir: Path | None = None  # superlink.log, supernode-K.log, flower.log
    wall_time_s: float = 0.0
    pids: list[int] = field(default_factory=list)  # every process seen (all stopped on return)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def _check_data_dirs(data_dir, num_nodes: int) -> list[Path | None]:
    if data_dir is None:
        return [None] * num_nodes
    dirs = [data_dir] * num_nodes if isinstance(data_dir, (str, os.PathLike)) else list(data_dir)
    if len(dirs) != num_nodes:
        raise ConfigError(f"data_dir lists {len(dirs)} folders for {num_nodes} nodes; give one folder for all "
                          f"nodes or exactly one per node")
    out = []
    for d in dirs:
        path = Path(d).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"data-dir {str(d)!r} does not exist or is not a directory")
        out.append(path)
    return out


def run_deployment(method: str = "fedavg", num_nodes: int = 3, rounds: int = 2,
                   run_config_overrides: dict[str, Any] | None = None, out_dir: str | os.PathLike | None = None,
                   data_dir: str | os.PathLike | Sequence[str | os.PathLike] | None = None, *,
                   dataset: str | None = None, key_file: str | os.PathLike | None = None, timeout: float = 900.0,
                   host: str = "127.0.0.1", check_data: bool = True, stream: TextIO | None = None,
                   verbose: bool = False) -> DeploymentResult:
    """Run one experiment on a real (loopback) Flower deployment and wait for it.

    Starts a SuperLink with TLS and SuperNode authentication, registers one fresh key per node, starts
    ``num_nodes`` SuperNodes (node ``k`` owns partition ``k``; ``data_dir`` — one folder, or one per node — is
    passed to each through its node configuration, not the run configuration), submits the run, reads its
    status with ``flwr ls`` and stops every process, also on errors, timeouts and Ctrl-C.

    FedGCN with ``he=true``: every SuperNode gets a copy of the CKKS key file ``key_file`` (default: a fresh one
    for this deployment) through its node configuration; the run configuration, which the server also
    receives, never names it.

    Raises ConfigError (before anything starts) for bad input. ``check_data`` builds the data once here first,
    so impossible settings fail in seconds. ``timeout`` bounds the whole call (start-up included).
    """
    stream = stream or sys.stdout
    started = time.monotonic()
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ConfigError(f"num_nodes must be an integer >= 1 (one SuperNode per data owner), got {num_nodes!r}")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    overrides = dict(run_config_overrides or {})
    if "num-clients" in overrides and overrides["num-clients"] != num_nodes:
        raise ConfigError(f"run config num-clients={overrides['num-clients']!r} but num_nodes={num_nodes}; in a "
                          f"deployment there is one client per SuperNode, so leave num-clients out")
    data_dirs = _check_data_dirs(data_dir, num_nodes)
    if overrides.get("key-file"):
        raise ConfigError(f"run config key-file={overrides['key-file']!r}: in a deployment the CKKS key file goes to "
                          f"each SuperNode's node config (key_file=...), never to the run config, which the server "
                          f"receives too")
    from .config import parse_run_config
    from .simulation import build_run_config, preflight

    config = build_run_config(method, num_nodes, rounds, dataset, out_dir, overrides)
    settings = parse_run_config(config)
    needs_key = settings.method == "fedgcn" and settings.he
    if key_file is not None:
        from .privacy import ckks

        ckks.load_key_file(key_file)  # KeyFileError naming the file, before anything starts
    if not config.get("out-dir"):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["out-dir"] = str(Path("results").resolve() / f"deploy-{settings.method}-{settings.dataset}-{stamp}")
    out = Path(config["out-dir"])
    if (out / "rounds.jsonl").exists():
        raise ConfigError(f"out-dir {str(out)!r} already holds the results of a run (rounds.jsonl); choose another "
                          f"so nothing is overwritten")
    if check_data:
        local = dict(config, **({"data-dir": str(data_dirs[0])} if data_dirs[0] else {}))
        info = preflight(parse_run_config(local))
        print(f"flowergraph: {settings.method} on {settings.dataset} ({info['num_nodes']} nodes), {num_nodes} "
              f"SuperNode(s), {settings.rounds} round(s); client sizes {info['client_sizes']}", file=stream,
              flush=True)
    out.mkdir(parents=True, exist_ok=True)

    result = DeploymentResult(status="failed", flwr_status="not started", out_dir=out, log_dir=out)
    dep = LoopbackDeployment(out, host=host, stream=stream, verbose=verbose)
    try:
        with dep:
            result.superlink_address = dep.start_superlink(timeout=min(90.0, timeout))
            if needs_key and key_file is None:  # provisioned to the data owners only (add_node copies it)
                from .privacy import ckks

                key_file = ckks.write_key_file(dep.work / "owners-ckks-key.bin")
                dep.say(f"created a CKKS key file for the data owners: {key_file}")
            for k in range(num_nodes):
                node = dep.add_node(k, num_nodes, data_dir=data_dirs[k], key_file=key_file if needs_key else None)
                result.node_ports.append(node.port)
                result.node_ids.append(node.node_id)
            left = timeout - (time.monotonic() - started)
            dep.wait_for_nodes(num_nodes, timeout=max(1.0, min(180.0, left)))
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                raise TimeoutError(f"the deployment took the whole {timeout:.0f} s timeout to start")
            outcome = dep.run(config, timeout=left)
            result.status, result.flwr_status, result.run_id = outcome.status, outcome.flwr_status, outcome.run_id
    except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as exc:
        result.error = str(exc)
        print(f"flowergraph: deployment failed: {exc}", file=stream, flush=True)
    finally:
        result.pids = dep.pids
        result.wall_time_s = time.monotonic() - started
    summary_file = out / "summary.json"
    if summary_file.exists():
        result.summary = json.loads(summary_file.read_text())
        if result.status == "failed" and result.summary.get("status") != "failed":
            result.summary["status"] = "failed"
            result.summary.setdefault("error", result.error or f"Flower run status {result.flwr_status!r}")
            summary_file.write_text(json.dumps(result.summary, indent=2, sort_keys=True) + "\n")
    elif result.status == "completed":
        result.status, result.error = "failed", "the ServerApp wrote no summary.json"
    return result


# --------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------

def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _exec(cmd: list[str], env: dict[str, str], dry_run: bool) -> int:
    print(" ".join(_shell_quote(c) for c in cmd), flush=True)
    if dry_run:
        return 0
    os.execve(cmd[0], cmd, env)  # replaces this process: its PID is the Flower process's PID
    return 0  # not reached


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _cmd_certs(a) -> int:
    paths = make_certificates(a.out, a.host or DEFAULT_CERT_HOSTS, days=a.days, force=a.force)
    hosts = ", ".join(a.host or DEFAULT_CERT_HOSTS)
    print(f"CA certificate  {paths['ca_cert']}   (give to every SuperNode and to whoever runs `flwr`)")
    print(f"CA private key  {paths['ca_key']}   (keep offline; needed only to issue new certificates)")
    print(f"server cert     {paths['server_cert']}   (SuperLink; subjectAltName: {hosts})")
    print(f"server key      {paths['server_key']}   (SuperLink only)")
    return 0


def _cmd_keys(a) -> int:
    names = list(a.name or [])
    if a.num_nodes is not None:
        if a.num_nodes < 1:
            raise ConfigError(f"--num-nodes must be >= 1, got {a.num_nodes}")
        names += [f"node{k}" for k in range(a.num_nodes)]
    if not names:
        raise ConfigError("give --name NAME (repeatable) or --num-nodes N")
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise ConfigError(f"key name {name!r} must be letters, digits, '.', '-' or '_'")
        private, public = make_node_key(Path(a.out) / name, force=a.force)
        print(f"{private} (private: stays with the data owner)   {public} (public: send to the SuperLink operator)")
    return 0


def _cmd_superlink(a) -> int:
    cmd = superlink_command(a.certs, host=a.host, port=a.port, database=a.database)
    return _exec(cmd, flower_env(), a.dry_run)


def _cmd_supernode(a) -> int:
    cmd = supernode_command(a.superlink, a.ca, a.key, partition_id=a.partition_id, num_partitions=a.num_partitions,
                            data_dir=a.data_dir, dataset=a.dataset, key_file=a.key_file, port=a.port)
    return _exec(cmd, flower_env(), a.dry_run)


def _cmd_connection(a) -> int:
    home = a.flwr_home or os.environ.get("FLWR_HOME") or str(Path.home() / ".flwr")
    path = write_connection(home, a.name, a.address, a.ca)
    print(f"connection {a.name!r} -> {a.address} (TLS, CA {Path(a.ca).resolve()}) written to {path}")
    return 0


def _cmd_register(a) -> int:
    env = flower_env()
    for key in a.public_key:
        node_id = register_node(key, a.connection, env)
        print(f"registered {key} as SuperNode {node_id}")
    return 0


def _cmd_wait(a) -> int:
    if a.nodes and not a.connection:
        raise ConfigError("--nodes needs --connection (the flwr connection to list SuperNodes with)")
    wait_for_superlink(a.address, a.ca, timeout=a.timeout)
    print(f"SuperLink at {a.address} is up")
    if a.nodes:
        env = flower_env()
        deadline = time.monotonic() + a.timeout
        while True:
            online = sum(n.get("status") == "online" for n in list_nodes(a.connection, env))
            if online >= a.nodes:
                print(f"{online}/{a.nodes} SuperNodes online")
                return 0
            if time.monotonic() > deadline:
                print(f"only {online}/{a.nodes} SuperNodes online after {a.timeout:.0f} s", file=sys.stderr)
                return 1
            time.sleep(1)
    return 0


def _cmd_run(a) -> int:
    from .config import parse_run_config
    from .simulation import _parse_set, build_run_config, write_app

    overrides = _parse_set(a.set)
    config = build_run_config(a.method, a.num_clients, a.rounds, a.dataset, a.out, overrides)
    settings = parse_run_config(config)
    if not config.get("out-dir"):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["out-dir"] = str(Path("results").resolve() / f"deploy-{settings.method}-{settings.dataset}-{stamp}")
    log_dir = Path(a.log_dir or config["out-dir"])
    work = Path(tempfile.mkdtemp(prefix="flowergraph-app-"))
    try:
        write_app(work)
        outcome = submit_run(work, a.connection, config, env=flower_env(), log_file=log_dir / "flower.log",
                             timeout=a.timeout, verbose=a.verbose)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"flowergraph: run {outcome.run_id}: {outcome.flwr_status}; results (on the SuperLink's machine): "
          f"{config['out-dir']}")
    return 0 if outcome.status == "completed" else 1


def _cmd_status(a) -> int:
    env = flower_env()
    out = _flwr_json(["ls", a.connection] + (["--run-id", str(a.run_id)] if a.run_id else []), env)
    if not out.get("success", False):
        print(f"flwr ls {a.connection} failed: {out.get('error-message', out)}", file=sys.stderr)
        return 1
    for run in out.get("runs", []):
        elapsed = run.get("elapsed")
        elapsed = f"{elapsed:.0f} s" if isinstance(elapsed, (int, float)) else str(elapsed)
        print(f"run {run.get('run-id')}: {run.get('status')}  (app {run.get('fab-id', '?')}, elapsed {elapsed})")
    for node in list_nodes(a.connection, env):
        print(f"SuperNode {node.get('node-id')}: {node.get('status')}")
    return 0


def _cmd_stop(a) -> int:
    stop_trees(a.pid)
    print(f"stopped process tree(s) {' '.join(map(str, a.pid))}")
    return 0


def _cmd_loopback(a) -> int:
    from .simulation import _parse_set

    overrides = _parse_set(a.set)
    result = run_deployment(a.method, a.num_nodes, a.rounds, overrides, a.out, a.data_dir or None,
                            dataset=a.dataset, key_file=a.key_file, timeout=a.timeout, verbose=a.verbose)
    s = result.summary
    acc = s.get("final_accuracy")
    print(f"flowergraph: deployment run {result.status} ({result.flwr_status}) in {result.wall_time_s:.1f} s; "
          f"rounds {s.get('rounds_completed')}/{s.get('total_rounds')}; final test accuracy "
          f"{acc if acc is None else f'{acc:.4f}'}")
    print(f"results and logs: {result.out_dir}")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m flowergraph.deployment",
                                description="Deploy flowergraph on a real Flower SuperLink and SuperNodes "
                                            "(TLS + SuperNode authentication). See docs/deployment.md.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("certs", help="operator: create a CA and the SuperLink's server certificate")
    s.add_argument("--out", required=True, help="folder for ca.crt, ca.key, server.pem, server.key")
    s.add_argument("--host", action="append", help="IP or DNS name the SuperLink is reached at (repeatable; "
                   "default: 127.0.0.1 and localhost)")
    s.add_argument("--days", type=int, default=365)
    s.add_argument("--force", action="store_true", help="overwrite existing files")
    s.set_defaults(fn=_cmd_certs)

    s = sub.add_parser("keys", help="data owner: create a SuperNode key pair (ECDSA P-384, OpenSSH)")
    s.add_argument("--out", required=True)
    s.add_argument("--name", action="append", help="key file name (repeatable)")
    s.add_argument("--num-nodes", type=int, help="create node0 ... node{N-1}")
    s.add_argument("--force", action="store_true")
    s.set_defaults(fn=_cmd_keys)

    s = sub.add_parser("superlink", help="operator: run flower-superlink with TLS + SuperNode auth (foreground)")
    s.add_argument("--certs", required=True, help="folder with ca.crt, server.pem, server.key")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    s.add_argument("--port", type=int, default=9092)
    s.add_argument("--database", default="superlink.db", help="SuperLink state (registered nodes, runs)")
    s.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    s.set_defaults(fn=_cmd_superlink)

    s = sub.add_parser("connection", help="operator: add a TLS connection to $FLWR_HOME/config.toml")
    s.add_argument("--name", required=True)
    s.add_argument("--address", required=True, help="SuperLink HOST:PORT (HOST must be in the certificate)")
    s.add_argument("--ca", required=True, help="ca.crt")
    s.add_argument("--flwr-home", default=None, help="default: $FLWR_HOME, else ~/.flwr")
    s.set_defaults(fn=_cmd_connection)

    s = sub.add_parser("register", help="operator: register SuperNode public keys (flwr supernode register)")
    s.add_argument("--connection", required=True)
    s.add_argument("public_key", nargs="+")
    s.set_defaults(fn=_cmd_register)

    s = sub.add_parser("wait", help="wait until the SuperLink answers (and N SuperNodes are online)")
    s.add_argument("--address", required=True)
    s.add_argument("--ca", required=True)
    s.add_argument("--connection", default=None, help="needed with --nodes")
    s.add_argument("--nodes", type=int, default=0, help="also wait for this many online SuperNodes")
    s.add_argument("--timeout", type=float, default=120.0)
    s.set_defaults(fn=_cmd_wait)

    s = sub.add_parser("supernode", help="data owner: run flower-supernode for one partition (foreground)")
    s.add_argument("--superlink", required=True, help="SuperLink HOST:PORT")
    s.add_argument("--ca", required=True, help="the operator's ca.crt")
    s.add_argument("--key", required=True, help="this node's private key (its .pub must be registered)")
    s.add_argument("--partition-id", type=int, required=True)
    s.add_argument("--num-partitions", type=int, required=True)
    s.add_argument("--data-dir", default=None, help="this owner's raw data (PyG layout)")
    s.add_argument("--dataset", default=None, help="override the run's dataset on this node")
    s.add_argument("--key-file", default=None, help="the data owners' CKKS key file (FedGCN he=true), provisioned "
                   "out of band; never given to the SuperLink")
    s.add_argument("--port", type=int, default=9094, help="local Runtime API port (unique per host)")
    s.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    s.set_defaults(fn=_cmd_supernode)

    s = sub.add_parser("run", help="operator: submit a run (flwr run --stream) and report its flwr ls status")
    s.add_argument("--connection", required=True)
    s.add_argument("--method", default="fedavg")
    s.add_argument("--num-clients", type=int, required=True, help="= number of SuperNodes")
    s.add_argument("--rounds", type=int, default=2)
    s.add_argument("--dataset", default=None)
    s.add_argument("--out", default=None, help="results folder, on the SuperLink's machine")
    s.add_argument("--log-dir", default=None, help="where flower.log goes here (default: --out)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--timeout", type=float, default=None)
    s.add_argument("--verbose", action="store_true")
    s.set_defaults(fn=_cmd_run)

    s = sub.add_parser("status", help="runs (flwr ls) and SuperNodes (flwr supernode list)")
    s.add_argument("--connection", required=True)
    s.add_argument("--run-id", type=int, default=None)
    s.set_defaults(fn=_cmd_status)

    s = sub.add_parser("stop", help="stop process trees by PID (what the loopback script started)")
    s.add_argument("pid", type=int, nargs="+")
    s.set_defaults(fn=_cmd_stop)

    s = sub.add_parser("loopback", help="everything on this machine: certs, SuperLink, N SuperNodes, one run")
    s.add_argument("--method", default="fedavg")
    s.add_argument("--num-nodes", type=int, default=3)
    s.add_argument("--rounds", type=int, default=2)
    s.add_argument("--dataset", default=None)
    s.add_argument("--data-dir", action="append", default=None,
                   help="data folder passed to SuperNodes by node config (once: all nodes; N times: one each)")
    s.add_argument("--key-file", default=None, help="CKKS key file copied to every SuperNode's node config "
                   "(FedGCN he=true; default: a fresh one)")
    s.add_argument("--out", default=None)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--timeout", type=float, default=900.0)
    s.add_argument("--verbose", action="store_true")
    s.set_defaults(fn=_cmd_loopback)

    a = p.parse_args(argv)
    if a.command in ("loopback", "run"):
        # SIGTERM (a job scheduler, `timeout`, kill PID) unwinds like Ctrl-C, so every process started is stopped
        signal.signal(signal.SIGTERM, _raise_interrupt)
    if getattr(a, "data_dir", None) and isinstance(a.data_dir, list) and len(a.data_dir) == 1:
        a.data_dir = a.data_dir[0]
    try:
        return a.fn(a)
    except FlowergraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every process started here was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
