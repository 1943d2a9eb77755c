"""Real deployment: one SuperLink, one SuperNode per data owner, TLS and SuperNode authentication.

Everything here uses Flower's own mechanisms (``flower-superlink``, ``flower-supernode``, ``flwr``); this module
only creates the credentials, writes the commands out correctly, and watches the processes. Each SuperNode is
told which part of the federated graph it owns through its *node configuration*
(``--node-config "partition-id=K num-partitions=N data-dir=..."``; see :mod:`flowergraph.app.client_app`).

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

from .commands import node_config_string, superlink_command, supernode_command, write_connection
from .control import RunOutcome, list_nodes, register_node, run_status, submit_run, wait_for_superlink
from .credentials import (
    CA_CERT,
    CA_KEY,
    DEFAULT_CERT_HOSTS,
    SERVER_CERT,
    SERVER_KEY,
    check_certificate,
    check_private_key,
    check_public_key,
    make_certificates,
    make_node_key,
)
from .loopback import REFUSED_EXIT_CODE, DeploymentResult, LoopbackDeployment, Node, run_deployment
from ..app.runtime import BIN_DIR, flower_env, stop_trees

__all__ = [
    "BIN_DIR",
    "CA_CERT",
    "CA_KEY",
    "DEFAULT_CERT_HOSTS",
    "DeploymentResult",
    "LoopbackDeployment",
    "Node",
    "REFUSED_EXIT_CODE",
    "RunOutcome",
    "SERVER_CERT",
    "SERVER_KEY",
    "check_certificate",
    "check_private_key",
    "check_public_key",
    "flower_env",
    "list_nodes",
    "make_certificates",
    "make_node_key",
    "main",
    "node_config_string",
    "register_node",
    "run_deployment",
    "run_status",
    "stop_trees",
    "submit_run",
    "superlink_command",
    "supernode_command",
    "wait_for_superlink",
    "write_connection",
]


def main(argv: list[str] | None = None) -> int:
    """The ``python -m flowergraph.deployment`` command line (:func:`flowergraph.deployment.cli.main`): ``argv``
    without the program name (None: ``sys.argv``); returns the exit code."""
    from .cli import main as cli_main

    return cli_main(argv)
