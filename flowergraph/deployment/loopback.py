"""Every party of a deployment on this machine (a try-out, and the deployment tests): a SuperLink with TLS and
SuperNode authentication, one SuperNode per data owner, runs, and every process stopped by PID at the end."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from ..errors import ConfigError
from ..app.runtime import ProcessGroup, descendants, flower_env, free_port, stop_trees, write_app
from .commands import superlink_command, supernode_command, write_connection
from .control import RunOutcome, list_nodes, register_node, submit_run, wait_for_superlink
from .credentials import DEFAULT_CERT_HOSTS, make_certificates, make_node_key

REFUSED_EXIT_CODE = 305  # Flower's SUPERNODE_CONNECTION_ERROR: logged when the SuperLink refuses a node's key


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


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _is_superexec(pid: int) -> bool:
    import psutil

    try:
        return any("flower-superexec" in part for part in psutil.Process(pid).cmdline()[:2])
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _errors(path: Path, lines: int = 6) -> str:
    """The last ERROR lines and exception lines of a Flower log (what ended a process), or its tail."""
    text = _tail(path, 200_000).splitlines()
    picked = [line for line in text if "ERROR" in line or line.startswith(("httpx.", "sqlite3.", "Traceback"))]
    if picked:
        return f"Its last errors ({path}):\n" + "\n".join(picked[-lines:])
    return f"It logged no error; the log ({path}) ends:\n" + "\n".join(text[-lines:])


NODE_LOG_WAIT_S = 30.0  # wait_for_nodes: how long node logs are read before asking the SuperLink


class LoopbackDeployment:
    """A SuperLink and SuperNodes on this machine, with TLS and SuperNode authentication.

    Use it as a context manager: every process it starts (and every process those start) is stopped on exit,
    also after an error. ``pids`` lists every process it saw.

        with LoopbackDeployment(log_dir="results/x") as dep:
            dep.start_superlink()
            dep.add_nodes([dict(partition_id=k, num_partitions=3) for k in range(3)])
            dep.wait_for_nodes(3)
            outcome = dep.run({"method": "fedavg", "num-clients": 3, "rounds": 2, "out-dir": "results/x"})
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        host: str = "127.0.0.1",
        work_dir: str | os.PathLike | None = None,
        stream: TextIO | None = None,
        verbose: bool = False,
    ):
        self.log_dir = Path(log_dir).resolve()
        self.host = host
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self._own_work = work_dir is None
        self.work = Path(work_dir).resolve() if work_dir else Path(tempfile.mkdtemp(prefix="flowergraph-deploy-"))
        self.connection = "fg-deploy"
        self.flwr_home = self.work / "operator-home"
        self.tmp = self.work / "tmp"  # every party's temp folder (PyG's generated modules, FAB unpacking)
        self.group = ProcessGroup()  # every party carries its tag: found and stopped even if we are killed
        self.env = self.group.env(self._flower_env(self.flwr_home))
        self.superlink: subprocess.Popen | None = None
        self.superlink_address: str | None = None
        self.nodes: list[Node] = []
        self.pids: list[int] = []
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self.certs: dict[str, Path] = {}
        self.app_dir: Path | None = None
        self._t0 = time.monotonic()
        self._superexec_seen = False  # see _dead_superexec

    # -- helpers ------------------------------------------------------------------------------------------
    def _flower_env(self, home: Path) -> dict[str, str]:
        self.tmp.mkdir(parents=True, exist_ok=True)
        return flower_env(home, TMPDIR=str(self.tmp))

    def say(self, text: str) -> None:
        self.stream.write(f"flowergraph: [{time.monotonic() - self._t0:6.1f} s] {text}\n")
        self.stream.flush()

    def _start(self, name: str, cmd: list[str], log_file: Path, env: dict[str, str]) -> subprocess.Popen:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self.group.start()
        with open(log_file, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=str(self.work),
                env=self.group.env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
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
        count = 0
        for name, proc in self._procs:
            self.pids.extend([proc.pid] + descendants(proc.pid))
            count += proc.poll() is None
        stop_trees([proc.pid for _, proc in self._procs])
        self._procs.clear()
        self.pids.extend(self.group.stop())  # anything that left the trees (tagged through its environment)
        self.pids = sorted(set(self.pids))
        if count:
            self.say(f"stopped {count} Flower process tree(s) ({len(self.pids)} processes seen in all)")
        if self._own_work:
            shutil.rmtree(self.work, ignore_errors=True)

    # -- the parties --------------------------------------------------------------------------------------
    def start_superlink(
        self, *, port: int | None = None, cert_hosts: Sequence[str] | None = None, timeout: float = 90.0
    ) -> str:
        """Create the CA and server certificate, start the SuperLink, write the operator's connection."""
        hosts = list(cert_hosts) if cert_hosts else list(dict.fromkeys([self.host, *DEFAULT_CERT_HOSTS]))
        self.certs = make_certificates(self.work / "certs", hosts)
        port = port or free_port()
        self.superlink_address = f"{self.host}:{port}"
        cmd = superlink_command(self.work / "certs", host=self.host, port=port, database=self.work / "superlink.db")
        log_file = self.log_dir / "superlink.log"
        self.superlink = self._start("superlink", cmd, log_file, self._flower_env(self.work / "superlink-home"))
        wait_for_superlink(
            self.superlink_address, self.certs["ca_cert"], timeout=timeout, proc=self.superlink, log_file=log_file
        )
        deadline = time.monotonic() + 30.0  # the SuperLink starts its SuperExec just after it answers
        while not self.superexec_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        write_connection(self.flwr_home, self.connection, self.superlink_address, self.certs["ca_cert"])
        self.say(
            f"SuperLink up at {self.superlink_address} (TLS, SuperNode authentication; pid "
            f"{self.superlink.pid}; log {log_file})"
        )
        return self.superlink_address

    def add_node(
        self,
        partition_id: int,
        num_partitions: int,
        *,
        data_dir: str | os.PathLike | None = None,
        dataset: str | None = None,
        key_file: str | os.PathLike | None = None,
        partition_file: str | os.PathLike | None = None,
        register: bool = True,
    ) -> Node:
        """Create a key pair for a data owner, register its public key (unless ``register=False``), and start
        its SuperNode with ``--node-config "partition-id=K num-partitions=N [data-dir=...] [key-file=...]
        [partition-file=...] state-dir=..."``.

        ``key_file`` (CKKS) and ``partition_file`` (the owner's own data, ``python -m flowergraph.partition
        export``) are copied into this owner's own folder first, as an out-of-band provisioning would put them
        on the owner's machine; the node config names the copies. Each node saves its checkpointed state in
        its own folder (``state-dir``)."""
        if self.superlink_address is None:
            raise RuntimeError("start_superlink() first")
        name = f"node{partition_id}" if register else f"unregistered{partition_id}-{len(self.nodes)}"
        private, public = make_node_key(self.work / "keys" / name)
        node_id = register_node(public, self.connection, self.env) if register else None
        owner = dict(data_dir=data_dir, dataset=dataset, key_file=key_file, partition_file=partition_file)
        return self._launch(name, private, node_id, partition_id, num_partitions, **owner)

    def add_nodes(self, nodes: Sequence[Mapping[str, Any]]) -> list[Node]:
        """:meth:`add_node` for each of ``nodes`` (its keyword arguments: ``partition_id``, ``num_partitions``,
        ...; every one registered), with the keys' registrations run at once: each is a ``flwr supernode
        register`` process (2-7 s on a loaded machine), which :meth:`add_node` runs one after another. The nodes
        then start in the order given."""
        if self.superlink_address is None:
            raise RuntimeError("start_superlink() first")
        specs = [dict(n) for n in nodes]
        for spec in specs:
            if not spec.pop("register", True):
                raise ValueError(
                    "add_nodes registers every node; start an unregistered one with add_node(register=False)"
                )
        names = [f"node{spec['partition_id']}" for spec in specs]
        keys = [make_node_key(self.work / "keys" / name) for name in names]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(keys))) as pool:
            ids = list(pool.map(lambda key: register_node(key[1], self.connection, self.env), keys))
        return [self._launch(n, key[0], i, **spec) for n, spec, key, i in zip(names, specs, keys, ids)]

    def _launch(
        self, name: str, private: Path, node_id: int | None, partition_id: int, num_partitions: int, **owner: Any
    ) -> Node:
        """Start the SuperNode of a data owner whose key pair is ``private`` (registered as ``node_id``; None: not
        registered); ``owner``: :meth:`add_node`'s data keywords, its files copied into its own folder."""
        if unknown := sorted(set(owner) - {"data_dir", "dataset", "key_file", "partition_file"}):
            raise TypeError(f"unknown node keyword {unknown[0]!r}; valid: data_dir, dataset, key_file, partition_file")
        register = node_id is not None
        data_dir, dataset = owner.get("data_dir"), owner.get("dataset")
        key_file, partition_file = owner.get("key_file"), owner.get("partition_file")
        port = free_port()
        home = self.work / f"{name}-home"
        home.mkdir(parents=True, exist_ok=True)
        if key_file is not None:
            own = home / "ckks-key.bin"
            shutil.copyfile(key_file, own)
            os.chmod(own, 0o600)
            key_file = own
        if partition_file is not None:
            own = home / Path(partition_file).name
            shutil.copyfile(partition_file, own)
            partition_file = own
        cmd = supernode_command(
            self.superlink_address,
            self.certs["ca_cert"],
            private,
            partition_id=partition_id,
            num_partitions=num_partitions,
            data_dir=data_dir,
            dataset=dataset,
            key_file=key_file,
            partition_file=partition_file,
            state_dir=home / "state",
            port=port,
        )
        log_file = self.log_dir / (f"supernode-{partition_id}.log" if register else f"{name}.log")
        proc = self._start(name, cmd, log_file, self._flower_env(self.work / f"{name}-home"))
        node = Node(partition_id, private, port, log_file, proc, node_id)
        self.nodes.append(node)
        what = f"registered as node {node_id}" if register else "key NOT registered"
        data = f", data-dir {data_dir}" if data_dir else ""
        data += f", own partition file {partition_file.name}" if partition_file else ""
        data += ", CKKS key file" if key_file else ""
        self.say(
            f"SuperNode {name}: partition {partition_id}/{num_partitions}{data}, {what} (pid {proc.pid}, "
            f"log {log_file})"
        )
        return node

    def kill_node(self, node: Node) -> list[int]:
        """Kill a SuperNode and every process under it with SIGKILL, now (a data owner's machine failing);
        the run goes on without it (it is not reported as a dead node). Returns the PIDs killed."""
        pids = [node.proc.pid] + descendants(node.proc.pid)
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
        """Wait until ``count`` registered SuperNodes are online (``flwr supernode list``). Each ask is a ``flwr``
        process (1-2 s of CPU on a loaded machine, taken from the nodes starting beside it), so the first waits
        until each registered node's log says it connected (Flower's "SuperNode ID:" line; at most
        :data:`NODE_LOG_WAIT_S` s, then asking as before)."""
        deadline = time.monotonic() + timeout
        logs_by = min(deadline, time.monotonic() + NODE_LOG_WAIT_S)
        while time.monotonic() < logs_by and not self._nodes_say_connected(count):
            if (dead := self._dead_node()) is not None:
                raise RuntimeError(dead)
            time.sleep(0.2)
        online = 0
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.node_id is not None and not node.killed and node.exit_code is not None:
                    raise RuntimeError(
                        f"SuperNode for partition {node.partition_id} exited with code "
                        f"{node.exit_code}; log {node.log_file}:\n{_tail(node.log_file)}"
                    )
            if (dead := self._dead_superexec()) is not None:
                raise RuntimeError(dead)
            online = sum(n.get("status") == "online" for n in list_nodes(self.connection, self.env))
            if online >= count:
                self.say(f"{online}/{count} SuperNodes online")
                return
            time.sleep(1.0)
        raise RuntimeError(
            f"only {online} of {count} SuperNodes came online within {timeout:.0f} s; logs in {self.log_dir}"
        )

    def _nodes_say_connected(self, count: int) -> bool:
        """Whether at least ``count`` of the registered, living nodes' logs hold Flower's "SuperNode ID:" line."""
        said = 0
        for node in self.nodes:
            if node.node_id is not None and not node.killed:
                try:
                    said += "SuperNode ID:" in node.log_file.read_text(errors="replace")
                except OSError:
                    pass
        return said >= count

    def _dead_node(self) -> str | None:
        for node in self.nodes:
            if node.node_id is not None and not node.killed and node.exit_code is not None:
                return (
                    f"SuperNode for partition {node.partition_id} exited with code {node.exit_code} during "
                    f"the run (log {node.log_file})"
                )
        if self.superlink is not None and self.superlink.poll() is not None:
            return f"the SuperLink exited with code {self.superlink.returncode}"
        return self._dead_superexec()

    def superexec_pids(self) -> list[int]:
        """The PIDs of the SuperLink's SuperExec (Flower's process that launches every ServerApp; one, once
        started)."""
        pids = [pid for pid in descendants(self.superlink.pid) if _is_superexec(pid)] if self.superlink else []
        self._superexec_seen = self._superexec_seen or bool(pids)
        return pids

    def _dead_superexec(self) -> str | None:
        """Flower's SuperLink starts its SuperExec once and does not restart it: once that process has been seen
        and is gone, no run can start or go on."""
        if self.superexec_pids() or not self._superexec_seen:
            return None
        return (
            f"the SuperLink's SuperExec (it launches every ServerApp; Flower does not restart it) exited; no "
            f"run can start. {_errors(self.log_dir / 'superlink.log')}"
        )

    def run(
        self,
        run_config: dict[str, Any],
        *,
        timeout: float | None = None,
        on_started: Callable[[int], None] | None = None,
    ) -> RunOutcome:
        """Submit one run of this package's app to the SuperLink and wait for it (see :func:`submit_run`)."""

        def started(run_id: int) -> None:
            self.say(f"run {run_id} submitted")
            if on_started is not None:
                on_started(run_id)

        if self.app_dir is None:
            self.app_dir = self.work / "app"
            self.app_dir.mkdir()
            write_app(self.app_dir)
        outcome = submit_run(
            self.app_dir,
            self.connection,
            run_config,
            env=self.env,
            log_file=self.log_dir / "flower.log",
            stream=self.stream,
            verbose=self.verbose,
            timeout=timeout,
            abort_check=self._dead_node,
            on_started=started,
        )
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
        raise ConfigError(
            f"data_dir lists {len(dirs)} folders for {num_nodes} nodes; give one folder for all "
            f"nodes or exactly one per node"
        )
    out = []
    for d in dirs:
        path = Path(d).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"data-dir {str(d)!r} does not exist or is not a directory")
        out.append(path)
    return out


def run_deployment(
    method: str = "fedavg",
    num_nodes: int = 3,
    rounds: int = 2,
    run_config_overrides: dict[str, Any] | None = None,
    out_dir: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    *,
    dataset: str | None = None,
    key_file: str | os.PathLike | None = None,
    partition_dir: str | os.PathLike | None = None,
    timeout: float = 900.0,
    host: str = "127.0.0.1",
    check_data: bool = True,
    stream: TextIO | None = None,
    verbose: bool = False,
) -> DeploymentResult:
    """Run one experiment on a real (loopback) Flower deployment and wait for it.

    Starts a SuperLink with TLS and SuperNode authentication, registers one fresh key per node, starts
    ``num_nodes`` SuperNodes (node ``k`` owns partition ``k``; ``data_dir`` — one folder, or one per node — is
    passed to each through its node configuration, not the run configuration), submits the run, reads its
    status with ``flwr ls`` and stops every process, also on errors, timeouts and Ctrl-C.

    A method that encrypts (FedGCN with ``fedgcn.he=true``): every SuperNode gets a copy of the CKKS key file
    ``key_file`` (default: a fresh one for this deployment) through its node configuration; the run
    configuration, which the server also receives, never names it.

    ``partition_dir`` (an export of ``python -m flowergraph.partition export``): node ``k`` gets a copy of its
    own file ``client-k.npz`` only, named in its node config; it never reads the global dataset.

    Raises ConfigError (before anything starts) for bad input. ``check_data`` builds the data once here first,
    so impossible settings fail in seconds. ``timeout`` bounds the whole call (start-up included). What this
    call and its processes write to the temp directory is removed at the end.
    """
    from ..app.runtime import private_tmp

    with private_tmp():
        return _run_deployment(
            method,
            num_nodes,
            rounds,
            run_config_overrides,
            out_dir,
            data_dir,
            dataset=dataset,
            key_file=key_file,
            partition_dir=partition_dir,
            timeout=timeout,
            host=host,
            check_data=check_data,
            stream=stream,
            verbose=verbose,
        )


def _run_deployment(
    method,
    num_nodes,
    rounds,
    run_config_overrides,
    out_dir,
    data_dir,
    *,
    dataset,
    key_file,
    partition_dir,
    timeout,
    host,
    check_data,
    stream,
    verbose,
) -> DeploymentResult:
    stream = stream or sys.stdout
    started, started_at = time.monotonic(), time.time()
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ConfigError(f"num_nodes must be an integer >= 1 (one SuperNode per data owner), got {num_nodes!r}")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    overrides = dict(run_config_overrides or {})
    if "num-clients" in overrides and overrides["num-clients"] != num_nodes:
        raise ConfigError(
            f"run config num-clients={overrides['num-clients']!r} but num_nodes={num_nodes}; in a "
            f"deployment there is one client per SuperNode, so leave num-clients out"
        )
    data_dirs = _check_data_dirs(data_dir, num_nodes)
    if overrides.get("key-file"):
        raise ConfigError(
            f"run config key-file={overrides['key-file']!r}: in a deployment the CKKS key file goes to "
            f"each SuperNode's node config (key_file=...), never to the run config, which the server "
            f"receives too"
        )
    from ..settings import parse_run_config
    from ..simulation import build_run_config, preflight, sizes_text

    config = build_run_config(method, num_nodes, rounds, dataset, out_dir, overrides)
    settings = parse_run_config(config)
    needs_key = settings.needs_key_file
    partition_files: list[Path | None] = [None] * num_nodes
    if partition_dir is not None:
        from ..data import partition_file_name, read_manifest

        read_manifest(partition_dir, dataset=settings.dataset, num_clients=num_nodes)  # names a mismatch
        partition_files = [
            Path(partition_dir).expanduser().resolve() / partition_file_name(k) for k in range(num_nodes)
        ]
    if key_file is not None:
        from ..privacy import ckks

        ckks.load_key_file(key_file)  # KeyFileError naming the file, before anything starts
    if not config.get("out-dir"):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["out-dir"] = str(Path("results").resolve() / f"deploy-{settings.method}-{settings.dataset}-{stamp}")
    out = Path(config["out-dir"])
    if (out / "rounds.jsonl").exists():
        raise ConfigError(
            f"out-dir {str(out)!r} already holds the results of a run (rounds.jsonl); choose another "
            f"so nothing is overwritten"
        )
    if check_data:
        local = dict(config, **({"data-dir": str(data_dirs[0])} if data_dirs[0] else {}))
        if partition_dir is not None:
            local["partition-dir"] = str(Path(partition_dir).expanduser().resolve())
        info = preflight(parse_run_config(local))
        sizes = sizes_text(info)
        print(
            f"flowergraph: {settings.method} on {info['summary']}, {num_nodes} SuperNode(s), {settings.rounds} "
            f"round(s){sizes}",
            file=stream,
            flush=True,
        )
    out.mkdir(parents=True, exist_ok=True)

    result = DeploymentResult(status="failed", flwr_status="not started", out_dir=out, log_dir=out)
    dep = LoopbackDeployment(out, host=host, stream=stream, verbose=verbose)
    try:
        with dep:
            result.superlink_address = dep.start_superlink(timeout=min(90.0, timeout))
            if needs_key and key_file is None:  # provisioned to the data owners only (add_node copies it)
                from ..privacy import ckks

                key_file = ckks.write_key_file(dep.work / "owners-ckks-key.bin")
                dep.say(f"created a CKKS key file for the data owners: {key_file}")
            owners = [
                dict(
                    partition_id=k,
                    num_partitions=num_nodes,
                    data_dir=data_dirs[k],
                    key_file=key_file if needs_key else None,
                    partition_file=partition_files[k],
                )
                for k in range(num_nodes)
            ]
            for node in dep.add_nodes(owners):
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
    from ..storage.results import add_launcher_times

    add_launcher_times(out, started_at, result.wall_time_s)  # the time plot starts at the launch
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
