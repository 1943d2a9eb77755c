"""``python -m flowergraph.deployment``: one subcommand per step of a deployment (see docs/deployment.md)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..errors import ConfigError
from ..storage.results import accuracy_text
from ..app.runtime import flower_env, run_command, stop_trees, write_app
from .commands import superlink_command, supernode_command, write_connection
from .control import _flwr_json, list_nodes, register_node, submit_run, wait_for_superlink
from .credentials import DEFAULT_CERT_HOSTS, make_certificates, make_node_key
from .loopback import run_deployment


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
    cmd = supernode_command(
        a.superlink,
        a.ca,
        a.key,
        partition_id=a.partition_id,
        num_partitions=a.num_partitions,
        data_dir=a.data_dir,
        dataset=a.dataset,
        key_file=a.key_file,
        partition_file=a.partition_file,
        state_dir=a.state_dir,
        port=a.port,
    )
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
    from ..settings import parse_run_config
    from ..settings import parse_set
    from ..simulation import build_run_config

    overrides = parse_set(a.set)
    config = build_run_config(a.method, a.num_clients, a.rounds, a.dataset, a.out, overrides)
    settings = parse_run_config(config)
    if not config.get("out-dir"):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["out-dir"] = str(Path("results").resolve() / f"deploy-{settings.method}-{settings.dataset}-{stamp}")
    log_dir = Path(a.log_dir or config["out-dir"])
    work = Path(tempfile.mkdtemp(prefix="flowergraph-app-"))
    try:
        write_app(work)
        outcome = submit_run(
            work,
            a.connection,
            config,
            env=flower_env(),
            log_file=log_dir / "flower.log",
            timeout=a.timeout,
            verbose=a.verbose,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"flowergraph: run {outcome.run_id}: {outcome.flwr_status}; results (on the SuperLink's machine): "
        f"{config['out-dir']}"
    )
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
    from ..settings import parse_set

    overrides = parse_set(a.set)
    result = run_deployment(
        a.method,
        a.num_nodes,
        a.rounds,
        overrides,
        a.out,
        a.data_dir or None,
        dataset=a.dataset,
        key_file=a.key_file,
        partition_dir=a.partition_dir,
        timeout=a.timeout,
        verbose=a.verbose,
    )
    s = result.summary
    print(
        f"flowergraph: deployment run {result.status} ({result.flwr_status}) in {result.wall_time_s:.1f} s; "
        f"rounds {s.get('rounds_completed')}/{s.get('total_rounds')}; {accuracy_text(s)}"
    )
    print(f"results and logs: {result.out_dir}")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m flowergraph.deployment",
        description="Deploy flowergraph on a real Flower SuperLink and SuperNodes "
        "(TLS + SuperNode authentication). See docs/deployment.md.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("certs", help="operator: create a CA and the SuperLink's server certificate")
    s.add_argument("--out", required=True, help="folder for ca.crt, ca.key, server.pem, server.key")
    s.add_argument(
        "--host",
        action="append",
        help="IP or DNS name the SuperLink is reached at (repeatable; default: 127.0.0.1 and localhost)",
    )
    s.add_argument("--days", type=int, default=365, help="validity of the certificates (default: %(default)s)")
    s.add_argument("--force", action="store_true", help="overwrite existing files")
    s.set_defaults(fn=_cmd_certs)

    s = sub.add_parser("keys", help="data owner: create a SuperNode key pair (ECDSA P-384, OpenSSH)")
    s.add_argument("--out", required=True, help="folder for the private keys and their .pub files")
    s.add_argument("--name", action="append", help="key file name (repeatable)")
    s.add_argument("--num-nodes", type=int, help="create node0 ... node{N-1}")
    s.add_argument("--force", action="store_true", help="overwrite existing key files")
    s.set_defaults(fn=_cmd_keys)

    s = sub.add_parser("superlink", help="operator: run flower-superlink with TLS + SuperNode auth (foreground)")
    s.add_argument("--certs", required=True, help="folder with ca.crt, server.pem, server.key")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    s.add_argument(
        "--port", type=int, default=9092, help="the one HTTPS port SuperNodes and flwr dial (default: %(default)s)"
    )
    s.add_argument("--database", default="superlink.db", help="SuperLink state (registered nodes, runs)")
    s.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    s.set_defaults(fn=_cmd_superlink)

    s = sub.add_parser("connection", help="operator: add a TLS connection to $FLWR_HOME/config.toml")
    s.add_argument("--name", required=True, help="the connection's name, as flwr commands take it")
    s.add_argument("--address", required=True, help="SuperLink HOST:PORT (HOST must be in the certificate)")
    s.add_argument("--ca", required=True, help="ca.crt")
    s.add_argument("--flwr-home", default=None, help="default: $FLWR_HOME, else ~/.flwr")
    s.set_defaults(fn=_cmd_connection)

    s = sub.add_parser("register", help="operator: register SuperNode public keys (flwr supernode register)")
    s.add_argument("--connection", required=True, help="the flwr connection of the SuperLink (see connection)")
    s.add_argument("public_key", nargs="+", help="the owners' public keys (nodeK.pub)")
    s.set_defaults(fn=_cmd_register)

    s = sub.add_parser("wait", help="wait until the SuperLink answers (and N SuperNodes are online)")
    s.add_argument("--address", required=True, help="SuperLink HOST:PORT")
    s.add_argument(
        "--ca", required=True, help="the CA certificate (ca.crt) the SuperLink's certificate is checked against"
    )
    s.add_argument("--connection", default=None, help="needed with --nodes")
    s.add_argument("--nodes", type=int, default=0, help="also wait for this many online SuperNodes")
    s.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default: %(default)s)")
    s.set_defaults(fn=_cmd_wait)

    s = sub.add_parser("supernode", help="data owner: run flower-supernode for one partition (foreground)")
    s.add_argument("--superlink", required=True, help="SuperLink HOST:PORT")
    s.add_argument("--ca", required=True, help="the operator's ca.crt")
    s.add_argument("--key", required=True, help="this node's private key (its .pub must be registered)")
    s.add_argument(
        "--partition-id", type=int, required=True, help="which client this node is: 0 .. N-1, a different one per owner"
    )
    s.add_argument(
        "--num-partitions", type=int, required=True, help="N, the number of SuperNodes (= the run's num-clients)"
    )
    s.add_argument(
        "--partition-file",
        default=None,
        help="this owner's own partition file (python -m "
        "flowergraph.partition export); the node then never reads the global dataset",
    )
    s.add_argument("--state-dir", default=None, help="where this node saves its state at checkpoints")
    s.add_argument("--data-dir", default=None, help="this owner's raw data (PyG layout)")
    s.add_argument("--dataset", default=None, help="override the run's dataset on this node")
    s.add_argument(
        "--key-file",
        default=None,
        help="the data owners' CKKS key file (FedGCN he=true), provisioned out of band; never given to the SuperLink",
    )
    s.add_argument("--port", type=int, default=9094, help="local Runtime API port (unique per host)")
    s.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    s.set_defaults(fn=_cmd_supernode)

    s = sub.add_parser("run", help="operator: submit a run (flwr run --stream) and report its flwr ls status")
    s.add_argument("--connection", required=True, help="the flwr connection of the SuperLink")
    s.add_argument("--method", default="fedavg", help="a registered method (default: %(default)s)")
    s.add_argument("--num-clients", type=int, required=True, help="= number of SuperNodes")
    s.add_argument("--rounds", type=int, default=2, help="training rounds (default: %(default)s)")
    s.add_argument("--dataset", default=None, help="dataset (default: the built-in synthetic graph)")
    s.add_argument("--out", default=None, help="results folder, on the SuperLink's machine")
    s.add_argument("--log-dir", default=None, help="where flower.log goes here (default: --out)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any run-config key (repeatable)")
    s.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")
    s.add_argument("--verbose", action="store_true", help="print Flower's whole log, not only progress")
    s.set_defaults(fn=_cmd_run)

    s = sub.add_parser("status", help="runs (flwr ls) and SuperNodes (flwr supernode list)")
    s.add_argument("--connection", required=True, help="the flwr connection of the SuperLink")
    s.add_argument("--run-id", type=int, default=None, help="one run (default: every run)")
    s.set_defaults(fn=_cmd_status)

    s = sub.add_parser("stop", help="stop process trees by PID (what the loopback script started)")
    s.add_argument("pid", type=int, nargs="+", help="the PIDs the script printed")
    s.set_defaults(fn=_cmd_stop)

    s = sub.add_parser("loopback", help="everything on this machine: certs, SuperLink, N SuperNodes, one run")
    s.add_argument("--method", default="fedavg", help="a registered method (default: %(default)s)")
    s.add_argument("--num-nodes", type=int, default=3, help="SuperNodes, one per client (default: %(default)s)")
    s.add_argument("--rounds", type=int, default=2, help="training rounds (default: %(default)s)")
    s.add_argument("--dataset", default=None, help="dataset (default: the built-in synthetic graph)")
    s.add_argument(
        "--data-dir",
        action="append",
        default=None,
        help="data folder passed to SuperNodes by node config (once: all nodes; N times: one each)",
    )
    s.add_argument(
        "--key-file",
        default=None,
        help="CKKS key file copied to every SuperNode's node config (FedGCN he=true; default: a fresh one)",
    )
    s.add_argument(
        "--partition-dir",
        default=None,
        help="an export of python -m flowergraph.partition export: node k gets only its own file",
    )
    s.add_argument(
        "--out", default=None, help="results and logs folder (default: results/deploy-<method>-<dataset>-<time>)"
    )
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any run-config key (repeatable)")
    s.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds for the whole call, start-up included (default: %(default)s)",
    )
    s.add_argument("--verbose", action="store_true", help="print Flower's whole log, not only progress")
    s.set_defaults(fn=_cmd_loopback)

    a = p.parse_args(argv)
    if getattr(a, "data_dir", None) and isinstance(a.data_dir, list) and len(a.data_dir) == 1:
        a.data_dir = a.data_dir[0]

    def command() -> int:
        try:
            return int(a.fn(a))
        except RuntimeError as exc:  # a deployment step failed (not bad input): exit 1 with the reason
            print(f"error: {exc}", file=sys.stderr)
            return 1

    # SIGTERM and SIGHUP (a job scheduler, `timeout`, kill PID) unwind like Ctrl-C: every process started stops
    return run_command(command, "every process started here")


if __name__ == "__main__":
    sys.exit(main())
