"""Talking to a running SuperLink with Flower's CLI: health, node registration, node and run status, and
submitting a run (``flwr run --stream``) whose real status is read with ``flwr ls``."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from ..app.runtime import BIN_DIR, kill_tree, tee_output, write_run_config
from .credentials import check_certificate, check_public_key

_RUN_ID = re.compile(r"Successfully started run (\d+)")


def _flwr_json(args: list[str], env: dict[str, str], timeout: float = 60) -> dict[str, Any]:
    """Run ``flwr ARGS --format json``; the parsed JSON (``success`` false when it could not be parsed)."""
    proc = subprocess.run(
        [str(BIN_DIR / "flwr"), *args, "--format", "json"], env=env, capture_output=True, text=True, timeout=timeout
    )
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"success": False, "error-message": (proc.stdout + proc.stderr).strip()[-2000:]}
    return data if isinstance(data, dict) else {"success": False, "error-message": str(data)}


def wait_for_superlink(
    address: str,
    ca_cert: str | os.PathLike,
    *,
    timeout: float = 60.0,
    proc: subprocess.Popen | None = None,
    log_file: Path | None = None,
) -> None:
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
    raise RuntimeError(
        f"the SuperLink at {address} did not answer https://{address}/health within "
        f"{timeout:.0f} s (last error: {last}){see}"
    )


def register_node(public_key: str | os.PathLike, connection: str, env: dict[str, str]) -> int:
    """Register a SuperNode's public key with the SuperLink (``flwr supernode register``); its node id."""
    key = check_public_key(public_key)
    out = _flwr_json(["supernode", "register", str(key), connection], env)
    if not out.get("success"):
        raise RuntimeError(
            f"registering {str(key)!r} with connection {connection!r} failed: {out.get('error-message', out)}"
        )
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


def submit_run(
    app_dir: str | os.PathLike,
    connection: str,
    run_config: dict[str, Any],
    *,
    env: dict[str, str],
    log_file: str | os.PathLike,
    stream: TextIO | None = None,
    verbose: bool = False,
    timeout: float | None = None,
    on_started: Callable[[int], None] | None = None,
    abort_check: Callable[[], str | None] | None = None,
) -> RunOutcome:
    """``flwr run APP CONNECTION --stream --run-config FILE``; stream progress; read the status with ``flwr ls``.

    ``abort_check`` is polled every second while the run streams; when it returns a reason (e.g. "SuperNode 2
    exited") the run is stopped (``flwr stop``) and reported as failed with that reason. ``timeout`` does the
    same after that many seconds. The ``flwr run`` process is always stopped before returning.
    """
    stream = stream or sys.stdout
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", prefix="flowergraph-run-config-", delete=False) as f:
        config_file = Path(f.name)
    write_run_config(config_file, run_config)
    cmd = [
        str(BIN_DIR / "flwr"),
        "run",
        str(Path(app_dir).resolve()),
        connection,
        "--stream",
        "--run-config",
        str(config_file),
    ]
    stop_reason: list[str] = []
    run_ids: list[int] = []
    done = threading.Event()
    try:
        with open(log_file, "a") as log_out:
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,
            )

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
                            subprocess.run(
                                [str(BIN_DIR / "flwr"), "stop", str(run_ids[0]), connection],
                                env=env,
                                capture_output=True,
                                timeout=60,
                            )
                        kill_tree(proc.pid)
                        return

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()

            def note_run_id(line: str) -> None:
                if not run_ids and (m := _RUN_ID.search(line)):
                    run_ids.append(int(m.group(1)))
                    if on_started is not None:
                        on_started(run_ids[0])

            try:
                tee_output(proc, log_out, stream, verbose=verbose, on_line=note_run_id)
            finally:
                done.set()
                watcher.join(timeout=120)
                if proc.poll() is None:
                    kill_tree(proc.pid)
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
