"""Run any method in Flower's simulation (Ray, or the inline engine), from Python or the shell.

    python -m flowergraph.simulation --method fedavg --num-clients 3 --rounds 2 --dataset Cora --out DIR \\
        [--data-dir ../shared/datasets] [--set key=value ...]

    from flowergraph.simulation import run_simulation
    result = run_simulation("fedavg", num_clients=3, rounds=2, dataset="Cora", out="DIR")
    result.summary["final_accuracy"]

What it does: validates the configuration and builds the data once in this process (so bad input fails in
seconds, before any Flower process starts); writes a throw-away Flower app (this package + a pyproject with
every run-config key) and a private ``FLWR_HOME``; starts its own ``flower-superlink --simulation`` on a free
port; runs ``flwr run <app> --stream`` with ``num-supernodes = num-clients`` and one CPU per client; prints one
progress line per round; reads the run's status with ``flwr ls`` (``flwr run`` exits 0 even when the run
failed); stops the SuperLink and every process under it by PID; and returns/prints where the results are.
Exit status: 0 when the run completed, 1 when it failed, 2 for bad input.

With ``simulation-engine=inline`` (``--set simulation-engine=inline``) the run goes instead through Flower's
Simulation Engine with an in-process backend (:mod:`flowergraph.app.inline`) in one child process: no SuperLink,
no Ray; the same results folder, progress lines, exit statuses and summary. A child process, not this one: the
launcher's timeout and signal handling stop it by PID as they stop Ray, and this process's torch settings and
RNG, Flower's logging, signal handlers and caches stay as they were.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .settings import load_preset, natural_num_clients, option_by_key, parse_run_config, parse_set
from .settings.plan import RunPlan
from .errors import ConfigError
from .methods import methods
from .methods.registry import preflight, sizes_text  # noqa: F401 (flowergraph.simulation.preflight, as before)
from .storage.results import accuracy_text, add_launcher_times
from .app.runtime import (
    ProcessGroup,
    descendants,
    free_port,
    kill_tree,
    private_tmp,
    run_command,
    tee_output,
    write_app,
    write_run_config,
)


__all__ = [
    "SimulationResult",
    "build_run_config",
    "load_preset",
    "main",
    "preflight",
    "resume_config",
    "run_flower_app",
    "run_in_process",
    "run_inline_app",
    "run_simulation",
]


@dataclass
class SimulationResult:
    status: str  # "completed", "failed", or "checked" (check_only: validated, nothing started)
    out_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)
    log_file: Path | None = None
    wall_time_s: float = 0.0
    pids: list[int] = field(default_factory=list)  # every process the run started (all stopped on return)

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def _wait_healthy(port: int, proc: subprocess.Popen, log_file: Path, timeout: float = 60.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with code {proc.returncode}; see {log_file}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"flower-superlink did not become healthy within {timeout:.0f} s; see {log_file}")


@dataclass
class AppRun:
    status: str  # "completed" or "failed"
    flwr_status: str  # what `flwr ls` reported, e.g. "finished:completed"
    log_file: Path
    pids: list[int]


def run_flower_app(
    app_dir: str | os.PathLike,
    *,
    num_supernodes: int,
    run_config: dict[str, Any] | None = None,
    log_dir: str | os.PathLike,
    cpus_per_client: int = 1,
    ray_cpus: int | None = None,
    verbose: bool = False,
    stream: TextIO | None = None,
    timeout: float | None = None,
    extra_env: dict[str, str] | None = None,
    clock_start: float | None = None,
) -> AppRun:
    """Run any Flower app directory in simulation with a private SuperLink; stop every process afterwards.

    Writes Flower's streamed log to ``log_dir/flower.log`` and the SuperLink's to ``log_dir/superlink.log``.
    The status comes from ``flwr ls`` (``flwr run`` itself exits 0 when a run failed). Every Flower process gets
    a private temp folder (:func:`~flowergraph.app.runtime.private_tmp`), removed at the end.
    ``ray_cpus``: the CPUs Ray may use (Flower's ``init-args-num-cpus``; None: all of the machine's). Flower
    starts ``ray_cpus // cpus_per_client`` client actors, each importing torch and PyG and loading the data.
    ``timeout``: seconds before every process is stopped, counted from ``clock_start`` (``time.monotonic()``;
    default: when the app starts): a caller that spent part of its budget before (the launcher's data check) passes
    its own start, and the message names the whole timeout.
    """
    _check_cpus(cpus_per_client, ray_cpus)
    with private_tmp():
        return _run_flower_app(
            app_dir,
            num_supernodes=num_supernodes,
            run_config=run_config,
            log_dir=log_dir,
            cpus_per_client=cpus_per_client,
            ray_cpus=ray_cpus,
            verbose=verbose,
            stream=stream,
            timeout=timeout,
            extra_env=extra_env,
            clock_start=clock_start,
        )


def _tee_until(proc: subprocess.Popen, log_out, stream, *, verbose: bool, stop, seconds: float | None) -> int:
    """:func:`tee_output` of ``proc``, with a watchdog that calls ``stop()`` after ``seconds`` (None: never; at least
    1 s); ``proc``'s tree is stopped afterwards if it still runs. Returns its exit status."""
    watchdog = None
    if seconds is not None:
        watchdog = threading.Timer(max(1.0, seconds), stop)
        watchdog.daemon = True
        watchdog.start()
    try:
        return tee_output(proc, log_out, stream, verbose=verbose)
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if proc.poll() is None:
            kill_tree(proc.pid)


def _check_cpus(cpus_per_client: int, ray_cpus: int | None) -> None:
    """ConfigError unless ``cpus_per_client`` >= 1 and ``ray_cpus`` (when given) leaves room for one client."""
    if cpus_per_client < 1:
        raise ConfigError(f"cpus-per-client must be >= 1, got {cpus_per_client}")
    if ray_cpus is not None and os.environ.get("RAY_ADDRESS"):
        raise ConfigError(
            f"ray-cpus={ray_cpus} with RAY_ADDRESS={os.environ['RAY_ADDRESS']!r}: Ray refuses a CPU "
            f"count when it joins an existing cluster, whose size is what its nodes offered at `ray "
            f"start`; leave ray-cpus out (docs/ray_cluster.md)"
        )
    if ray_cpus is not None and ray_cpus < cpus_per_client:
        raise ConfigError(
            f"ray-cpus={ray_cpus} is less than cpus-per-client={cpus_per_client}: no client would "
            f"fit; give ray-cpus >= {cpus_per_client}, or leave it out to use every CPU"
        )


def _run_flower_app(
    app_dir,
    *,
    num_supernodes,
    run_config,
    log_dir,
    cpus_per_client,
    ray_cpus,
    verbose,
    stream,
    timeout,
    extra_env,
    clock_start,
) -> AppRun:
    stream = stream or sys.stdout
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "flower.log"
    work = Path(tempfile.mkdtemp(prefix="flowergraph-flwr-"))
    superlink = None
    pids: list[int] = []
    status, flwr_status = "failed", "not started"
    group = ProcessGroup().start()  # SuperLink, SuperExec, flwr-simulation, Ray and its actors carry its tag
    try:
        flwr_home = work / "flwr-home"
        flwr_home.mkdir()
        port = free_port()
        (flwr_home / "config.toml").write_text(
            f'[superlink]\ndefault = "fg"\n\n[superlink.fg]\naddress = "127.0.0.1:{port}"\ninsecure = true\n'
        )
        cmd_tail: list[str] = []
        if run_config:
            run_config_file = write_run_config(work / "run_config.toml", run_config)
            cmd_tail = ["--run-config", str(run_config_file)]
        env = dict(
            group.env(),
            FLWR_HOME=str(flwr_home),
            FLWR_TELEMETRY_ENABLED="0",
            FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
            FLWR_DISABLE_UPDATE_CHECK="1",
            RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0",
            RAY_DEDUP_LOGS="0",
            PYTHONUNBUFFERED="1",
            **(extra_env or {}),
        )
        bin_dir = Path(sys.executable).parent
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        superlink_log = log_dir / "superlink.log"
        with open(superlink_log, "ab") as sl_out:
            superlink = subprocess.Popen(
                [
                    str(bin_dir / "flower-superlink"),
                    "--insecure",
                    "--simulation",
                    "--isolation",
                    "subprocess",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--disable-runtime-dependency-installation",
                ],
                cwd=str(log_dir),
                env=env,
                stdout=sl_out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        pids.append(superlink.pid)
        _wait_healthy(port, superlink, superlink_log)
        federation = f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus_per_client}"
        if ray_cpus is not None:
            federation += f" init-args-num-cpus={ray_cpus}"
        cmd = [
            str(bin_dir / "flwr"),
            "run",
            str(Path(app_dir).resolve()),
            "fg",
            "--stream",
            "--federation-config",
            federation,
            *cmd_tail,
        ]
        timed_out = threading.Event()
        started = time.monotonic() if clock_start is None else clock_start
        with open(log_file, "a") as log_out:
            proc = subprocess.Popen(
                cmd,
                cwd=str(log_dir),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            pids.append(proc.pid)

            def stop_on_timeout() -> None:  # the watchdog: stop everything; the read loop then ends
                timed_out.set()
                pids.extend(descendants(superlink.pid))
                kill_tree(proc.pid)
                kill_tree(superlink.pid)

            _tee_until(
                proc,
                log_out,
                stream,
                verbose=verbose,
                stop=stop_on_timeout,
                seconds=None if timeout is None else timeout - (time.monotonic() - started),
            )
        if timed_out.is_set():
            flwr_status = "timed out"
            print(f"flowergraph: stopped after the {timeout:.0f} s timeout", file=stream, flush=True)
        else:
            listing = subprocess.run(
                [str(bin_dir / "flwr"), "ls", "fg", "--format", "json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            try:
                runs = json.loads(listing.stdout).get("runs", [])
            except json.JSONDecodeError:
                runs = []
            flwr_status = runs[-1].get("status", "unknown") if runs else "unknown"
            status = "completed" if flwr_status == "finished:completed" else "failed"
            if status != "completed":
                print(
                    f"flowergraph: the Flower run ended with status {flwr_status!r}; full log: {log_file}",
                    file=stream,
                    flush=True,
                )
    finally:
        if superlink is not None:
            pids.extend(descendants(superlink.pid))
            kill_tree(superlink.pid)
        pids.extend(group.stop())  # what left the SuperLink's tree (Ray's daemons), and the watchdog
        shutil.rmtree(work, ignore_errors=True)
    return AppRun(status=status, flwr_status=flwr_status, log_file=log_file, pids=sorted(set(pids)))


def run_inline_app(
    app_dir: str | os.PathLike,
    *,
    num_supernodes: int,
    run_config: dict[str, Any] | None = None,
    log_dir: str | os.PathLike,
    verbose: bool = False,
    stream: TextIO | None = None,
    timeout: float | None = None,
    extra_env: dict[str, str] | None = None,
    clock_start: float | None = None,
) -> AppRun:
    """:func:`run_flower_app` on the inline engine: the Flower app in ``app_dir`` (its pyproject names the
    ServerApp and ClientApp and gives the run config's defaults) runs in one child process
    (``python -m flowergraph.app.inline``, :mod:`flowergraph.app.inline`; with ``FLOWERGRAPH_INLINE_FORK=on`` a child
    forked from a warm process, :mod:`flowergraph.app.inline_entry`) with ``run_config`` passed as
    ``flwr run --run-config FILE`` passes it; the child is stopped by PID on return, on the timeout and on
    SIGTERM. Writes its log to ``log_dir/flower.log``; progress lines as :func:`run_flower_app`. The status is
    the child's exit status (0: completed)."""
    with private_tmp():
        return _run_inline_app(
            app_dir,
            num_supernodes=num_supernodes,
            run_config=run_config,
            log_dir=log_dir,
            verbose=verbose,
            stream=stream,
            timeout=timeout,
            extra_env=extra_env,
            clock_start=clock_start,
        )


def _run_inline_app(
    app_dir, *, num_supernodes, run_config, log_dir, verbose, stream, timeout, extra_env, clock_start
) -> AppRun:
    started = time.monotonic() if clock_start is None else clock_start
    stream = stream or sys.stdout
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "flower.log"
    work = Path(tempfile.mkdtemp(prefix="flowergraph-inline-"))
    pids: list[int] = []
    status, flwr_status = "failed", "not started"
    group = ProcessGroup().start()  # the child carries its tag; the watchdog stops it if this process dies
    try:
        from .app import inline_entry

        cmd = [
            sys.executable,
            "-m",
            "flowergraph.app.inline_entry" if inline_entry.enabled() else "flowergraph.app.inline",
            "--app-dir",
            str(Path(app_dir).resolve()),
            "--num-supernodes",
            str(num_supernodes),
        ]
        if run_config:
            cmd += ["--run-config", str(write_run_config(work / "run_config.toml", run_config))]
        package_root = str(Path(__file__).resolve().parents[1])  # the child imports this very flowergraph
        env = dict(
            group.env(),
            FLWR_TELEMETRY_ENABLED="0",
            FLWR_DISABLE_UPDATE_CHECK="1",
            PYTHONUNBUFFERED="1",
            **(extra_env or {}),
        )
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        timed_out = threading.Event()
        with open(log_file, "a") as log_out:
            proc = subprocess.Popen(
                cmd,
                cwd=str(log_dir),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            pids.append(proc.pid)

            def stop_on_timeout() -> None:
                timed_out.set()
                kill_tree(proc.pid)

            left = None if timeout is None else timeout - (time.monotonic() - started)
            code = _tee_until(proc, log_out, stream, verbose=verbose, stop=stop_on_timeout, seconds=left)
        if timed_out.is_set():
            flwr_status = "timed out"
            print(f"flowergraph: stopped after the {timeout:.0f} s timeout", file=stream, flush=True)
        else:
            status = "completed" if code == 0 else "failed"
            flwr_status = f"inline:{status}"
            if status != "completed":
                print(
                    f"flowergraph: the inline run ended with exit status {code}; full log: {log_file}",
                    file=stream,
                    flush=True,
                )
    finally:
        pids.extend(group.stop())
        shutil.rmtree(work, ignore_errors=True)
    return AppRun(status=status, flwr_status=flwr_status, log_file=log_file, pids=sorted(set(pids)))


def build_run_config(
    method: str,
    num_clients: int,
    rounds: int,
    dataset: str | None,
    out: str | os.PathLike | None,
    overrides: dict[str, Any] | None,
) -> dict[str, Any]:
    config: dict[str, Any] = dict(overrides or {})
    config.update({"method": method, "num-clients": num_clients, "rounds": rounds})
    if dataset is not None:
        config["dataset"] = dataset
    if out is not None:
        config["out-dir"] = str(Path(out).expanduser().resolve())
    for key in ("data-dir", "key-file", "resume-from", "state-dir", "partition-dir"):
        if config.get(key):
            config[key] = str(Path(str(config[key])).expanduser().resolve())
    return config


def run_simulation(
    method: str = "fedavg",
    num_clients: int | None = None,
    rounds: int = 2,
    dataset: str | None = None,
    out: str | os.PathLike | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    cpus_per_client: int = 1,
    ray_cpus: int | None = None,
    verbose: bool = False,
    stream: TextIO | None = None,
    timeout: float | None = None,
    check_only: bool = False,
) -> SimulationResult:
    """Run one federated experiment in Flower's simulation engine and wait for it.

    ``check_only``: validate the settings, the data and the results folder as a run would (the same messages),
    print what would run, and return with status ``"checked"``: nothing is started or written.

    Raises ConfigError (before anything starts) for bad input; returns a :class:`SimulationResult` whose
    ``status`` is ``"completed"`` or ``"failed"``. Every process started here is stopped before returning, and
    everything they (and this function) wrote to the temp directory is removed.
    ``num_clients`` None: one client per dataset for a graph-level method given several, else 3.
    ``cpus_per_client`` and ``ray_cpus``: see :func:`run_flower_app` (``ray_cpus=1``: one client actor, which
    runs the clients one after another and saves the other actors' start-up).
    """
    with private_tmp():
        return _run_simulation(
            method,
            num_clients,
            rounds,
            dataset,
            out,
            overrides,
            cpus_per_client=cpus_per_client,
            ray_cpus=ray_cpus,
            verbose=verbose,
            stream=stream,
            timeout=timeout,
            check_only=check_only,
        )


def run_in_process(run_config: dict[str, Any]) -> dict[str, Any]:
    """Run ``run_config`` (a run configuration, as :func:`~flowergraph.settings.parse_run_config` takes it) in this
    process and return its summary (``summary.json``'s values; with ``out-dir`` the run's files are written there).

    The real ServerApp and ClientApp code (strategy, clients, checkpoints, resume, results) with one in-process node
    per client, joined directly instead of through Flower's transport: no Ray, no child process, no serialisation,
    so a run repeats to the last digit on one machine, and its accuracies equal a Flower simulation's of the same
    settings to 1e-6. Sets this process's torch as the Flower apps do (one thread, denormals flushed:
    :func:`flowergraph.tasks.configure_torch`). ``secure-agg=secagg+`` needs Flower's transport: use
    :func:`run_simulation`.

        from flowergraph.simulation import run_in_process
        summary = run_in_process({"method": "fedgcn", "num-clients": 3, "rounds": 5, "out-dir": "results/x"})
    """
    from .app.inprocess import run_inprocess

    summary, _ = run_inprocess(run_config)
    return summary


def _run_simulation(
    method,
    num_clients,
    rounds,
    dataset,
    out,
    overrides,
    *,
    cpus_per_client,
    ray_cpus,
    verbose,
    stream,
    timeout,
    check_only=False,
) -> SimulationResult:
    stream = stream or sys.stdout
    started, started_at = time.monotonic(), time.time()
    if num_clients is None:
        num_clients = (overrides or {}).get("num-clients") or natural_num_clients(
            method, dataset or (overrides or {}).get("dataset")
        )
    config = build_run_config(method, num_clients, rounds, dataset, out, overrides)
    settings = parse_run_config(config)
    plan = RunPlan.of(settings, launcher=True)  # out-dir, the checkpoint to resume, where clients keep state
    config["out-dir"] = str(plan.out_dir)
    if plan.state_dir:
        config["state-dir"] = plan.state_dir  # the clients' checkpoints stay with the run
    settings = parse_run_config(config)
    out_dir = plan.out_dir
    _check_cpus(cpus_per_client, ray_cpus)
    info = preflight(settings)
    if check_only:
        print(
            f"flowergraph: --check: {settings.method} on {info['summary']}, {settings.effective_num_clients} "
            f"client(s), {settings.rounds} round(s), results to {out_dir}: the settings and the data are valid; "
            f"nothing was started",
            file=stream,
            flush=True,
        )
        return SimulationResult(status="checked", out_dir=out_dir)
    from .tasks.memo import release_process_caches

    release_process_caches()  # the launcher is done with the data: its clients and server load their own
    out_dir.mkdir(parents=True, exist_ok=True)
    supernodes = settings.effective_num_clients
    sizes = sizes_text(info)
    auto_bound = (
        settings.secure_agg == "secagg+"
        and settings.weighting == "train-size"
        and not settings.secagg_max_weight
        and bool(info.get("client_sizes"))
    )
    if auto_bound:  # no client's weight can exceed it, and none is far below (SecAgg+'s precision)
        config["secagg-max-weight"] = float(max(info["client_sizes"]))
        settings = parse_run_config(config)
    print(
        f"flowergraph: {settings.method} on {info['summary']}, {supernodes} client(s), {settings.rounds} "
        f"round(s){sizes}",
        file=stream,
        flush=True,
    )
    if settings.client_order != "partition":
        from .app.node_client import order_clients

        print(
            f"flowergraph: client-order={settings.client_order}: simulated nodes 0..{supernodes - 1} serve "
            f"clients {list(order_clients(settings, info.get('client_sizes')))}",
            file=stream,
            flush=True,
        )
    if auto_bound:
        print(
            f"flowergraph: SecAgg+ weights bounded by the largest client size: secagg-max-weight="
            f"{settings.secagg_max_weight:g}",
            file=stream,
            flush=True,
        )

    work = Path(tempfile.mkdtemp(prefix="flowergraph-sim-"))
    try:
        if settings.needs_key_file:
            from .privacy import ckks

            if settings.key_file:
                ckks.load_key_file(settings.key_file)  # KeyFileError before anything starts
            else:  # keys provisioned per run, for the clients only; deleted with the run's work folder
                config["key-file"] = str(ckks.write_key_file(work / "keys" / "ckks-secret.bin"))
                print(
                    f"flowergraph: created a CKKS key file for this run's clients: {config['key-file']}",
                    file=stream,
                    flush=True,
                )
        if settings.simulation_engine == "inline":
            print(
                "flowergraph: simulation-engine=inline: every client and the server in one process, no Ray",
                file=stream,
                flush=True,
            )
            from .app.generator import app_pyproject

            app_dir = work / "app"  # a pyproject naming flowergraph's apps, with every key's default
            app_dir.mkdir()
            (app_dir / "pyproject.toml").write_text(app_pyproject("flowergraph-run"))
            app_run = run_inline_app(
                app_dir,
                num_supernodes=supernodes,
                run_config=config,
                log_dir=out_dir,
                verbose=verbose,
                stream=stream,
                timeout=timeout,
                clock_start=started,
            )
        else:
            app_dir = work / "app"
            app_dir.mkdir()
            write_app(app_dir)
            app_run = run_flower_app(
                app_dir,
                num_supernodes=supernodes,
                run_config=config,
                log_dir=out_dir,
                cpus_per_client=cpus_per_client,
                ray_cpus=ray_cpus,
                verbose=verbose,
                stream=stream,
                timeout=timeout,
                clock_start=started,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    status, log_file = app_run.status, app_run.log_file
    summary = {}
    summary_file = out_dir / "summary.json"
    add_launcher_times(out_dir, started_at, time.monotonic() - started)  # the time plot starts at the launch
    if summary_file.exists():
        summary = json.loads(summary_file.read_text())
        if status == "failed" and summary.get("status") != "failed":
            summary["status"] = "failed"
            summary.setdefault("error", f"Flower run status was not finished:completed; see {log_file}")
            summary_file.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    elif status == "completed":
        status = "failed"  # the ServerApp must have written a summary
    return SimulationResult(
        status=status,
        out_dir=out_dir,
        summary=summary,
        log_file=log_file,
        wall_time_s=time.monotonic() - started,
        pids=app_run.pids,
    )


def resume_config(path: str | os.PathLike) -> dict[str, Any]:
    """The run configuration of the checkpoint at ``path`` (a file or a run folder) with ``resume-from`` set:
    ``run_simulation(..., overrides={**resume_config(path), "rounds": R})`` or ``--resume PATH --rounds R``."""
    from .storage.checkpoint import _current_names, load_checkpoint

    ckpt = load_checkpoint(path)
    known = option_by_key()
    config = {k: v for k, v in _current_names(ckpt.config, {}, str(ckpt.path)).items() if k in known}
    config["resume-from"] = str(ckpt.path)
    if ckpt.run_dir is not None:
        config["out-dir"] = str(ckpt.run_dir)
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.simulation",
        description="Run a flowergraph method in Flower's simulation (Ray, or simulation-engine=inline).",
    )
    parser.add_argument("--method", default=None, help="a registered method (default fedavg): " + ", ".join(methods()))
    parser.add_argument(
        "--num-clients",
        type=int,
        default=None,
        help="default: one per dataset for a graph-level method given several datasets, else 3",
    )
    parser.add_argument("--rounds", type=int, default=None, help="default 2")
    parser.add_argument(
        "--dataset",
        default=None,
        help="dataset name (default: the built-in synthetic graph); "
        "graph-level methods: a setting (CHEM, BIO-CHEM, ...) or a comma-separated list, one dataset "
        "per client",
    )
    parser.add_argument("--data-dir", default=None, help="raw files in PyG layout (else $FLOWERGRAPH_DATA)")
    parser.add_argument("--out", default=None, help="results folder (default: results/<method>-<dataset>-<time>)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="TOML",
        help="a run-config preset file (e.g. conf/fedgcn-cora.toml; repeatable, later files win); "
        "--method/--num-clients/--rounds/--dataset given here and --set override it",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any run-config key (repeatable), e.g. --set node.beta=1 --set node.partitioner=metis",
    )
    parser.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue the run checkpointed at PATH (a checkpoint file or the run's out-dir) with "
        "its settings, in its out-dir; --rounds sets the new total",
    )
    parser.add_argument(
        "--cpus-per-client",
        type=int,
        default=1,
        help="CPUs Flower gives each client (Ray actor); on 2 cores keep 1 (default: %(default)s)",
    )
    parser.add_argument(
        "--ray-cpus",
        type=int,
        default=None,
        help="CPUs Ray may use (default: all); Flower starts "
        "ray-cpus / cpus-per-client client actors, so 1 runs the clients one after another in one "
        "actor",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")
    parser.add_argument("--verbose", action="store_true", help="print Flower's whole log, not only progress")
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the settings, the data and the results "
        "folder (the same messages as a run), print what would run, and exit 0 without starting "
        "anything",
    )
    args = parser.parse_args(argv)
    return run_command(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = resume_config(args.resume) if args.resume else {}
    for path in args.config:
        overrides.update(load_preset(path))
    overrides.update(parse_set(args.set))
    if args.data_dir is not None:
        overrides["data-dir"] = args.data_dir

    def pick(given: Any, key: str, default: Any) -> Any:
        value = overrides.pop(key, default)
        return value if given is None else given

    method = pick(args.method, "method", "fedavg")
    num_clients = pick(args.num_clients, "num-clients", None)
    rounds = pick(args.rounds, "rounds", 2)
    dataset = pick(args.dataset, "dataset", None)
    result = run_simulation(
        method,
        num_clients,
        rounds,
        dataset,
        args.out,
        overrides,
        cpus_per_client=args.cpus_per_client,
        ray_cpus=args.ray_cpus,
        verbose=args.verbose,
        timeout=args.timeout,
        check_only=args.check,
    )
    if args.check:
        return 0
    s = result.summary
    print(
        f"flowergraph: run {result.status} in {result.wall_time_s:.1f} s; rounds {s.get('rounds_completed')}"
        f"/{s.get('total_rounds')}; {accuracy_text(s)}"
    )
    print(f"results: {result.out_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
