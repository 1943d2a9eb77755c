"""Run results on disk (Flower-free): the resolved configuration, per-round metrics and a summary.

An output directory holds::

    config.json     the resolved run configuration (every key, defaults filled in) + environment
    rounds.jsonl    one JSON object per round (appended as the round ends; see ``RoundRecord`` keys below)
    summary.json    status ("running" / "completed" / "failed"), rounds done, final and best accuracy,
                    total time and bytes; rewritten after every round, so a crashed run still has one

Round record keys: ``round``, ``time_s`` (wall time of the round), ``elapsed_s`` (since the first round
started), ``accuracy`` / ``loss`` (client-side test accuracy / loss, weighted by test-node counts),
``val_accuracy``, ``train_loss`` (weighted like the aggregation), ``bytes_down`` / ``bytes_up`` (payload
bytes sent to / received from clients this round: serialised arrays plus config/metric values),
``num_fit`` / ``num_failures`` / ``rejected`` (updates aggregated / failed / rejected as malformed),
``ended_at`` (wall clock, seconds since the epoch), ``clients`` (per-client metrics, keyed by partition id) and, when
enabled, ``server_accuracy`` /
``server_loss`` (the global model on the global test nodes). Methods add their own keys (e.g. FedGCN's
pre-training bytes as round 0).

Plots are drawn from these files by :mod:`flowergraph.plot`, never from memory.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


def _lost_clients(r: dict[str, Any]) -> list[str]:
    """The clients a round lost, each once, with why when their process died: ``["1 (process died)", "3"]``
    (from the record's training and evaluation ``failures``)."""
    out: dict[str, str] = {}
    for f in list(r.get("failures") or []) + list(r.get("eval_failures") or []):
        if isinstance(f, dict) and f.get("client") is not None:
            name = str(f["client"])
            died = "process died" in str(f.get("reason", ""))
            if died or name not in out:
                out[name] = f"{name} (process died)" if died else name
    return list(out.values())


class RunRecorder:
    """Writes one run's results; ``log`` receives one human-readable progress line per round.

    ``resume=True`` continues a run: with ``records`` (a checkpoint's records) ``rounds.jsonl`` is rewritten
    atomically to hold exactly those, so rounds written after the checkpoint by the interrupted run are
    dropped and written again by the resumed one (never duplicated, never lost); without ``records`` the
    existing ``rounds.jsonl`` is kept as it is. ``extra_meta`` goes into ``config.json`` (e.g. where the run
    was resumed from).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        config: dict[str, Any],
        *,
        total_rounds: int | None = None,
        log: Callable[[str], None] | None = print,
        resume: bool = False,
        records: list[dict[str, Any]] | None = None,
        extra_meta: dict[str, Any] | None = None,
    ):
        self.out_dir = Path(out_dir).expanduser().resolve()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.total_rounds = total_rounds
        self.log = log or (lambda _line: None)
        self.rounds: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}  # summary entries a method adds (set_summary)
        self.finals: list[str] = []  # round-record keys of the task's own metrics: final_<key> in the summary
        self.started = time.time()
        rounds_path = self.out_dir / "rounds.jsonl"
        if rounds_path.exists() and not resume:
            raise FileExistsError(
                f"out-dir {str(self.out_dir)!r} already holds the results of a run "
                f"(rounds.jsonl); choose another out-dir so nothing is overwritten"
            )
        if resume and records is not None:
            self.rounds = [_jsonable(dict(r)) for r in records]
            _write_atomic(rounds_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.rounds))
        elif resume and rounds_path.exists():
            self.rounds = [json.loads(line) for line in rounds_path.read_text().splitlines() if line.strip()]
        meta = {
            "config": _jsonable(config),
            "python": platform.python_version(),
            "host": platform.node(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **_jsonable(extra_meta or {}),
        }
        _write_atomic(self.out_dir / "config.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self._write_summary("running")

    def write_round(self, record: dict[str, Any]) -> None:
        record = _jsonable(record)
        self.rounds.append(record)
        with open(self.out_dir / "rounds.jsonl", "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        self.log(self.progress_line(record))
        self._write_summary("running")

    def set_summary(self, key: str, value: Any) -> None:
        """An entry of the method's own in ``summary.json`` (e.g. a search's best trial), kept from now on."""
        if key not in self.extra and key in self.summary("running"):
            raise ValueError(f"summary key {key!r} is flowergraph's own; choose another name")
        self.extra[str(key)] = _jsonable(value)
        self._write_summary("running")

    def report_final(self, names) -> None:
        """Round-record keys whose last value ``summary.json`` reports as ``final_<key>`` (a task's own metrics,
        e.g. the link task's ``auc`` and ``hits@50``); keys flowergraph already reports are left as they are."""
        own = self.summary("running")
        for name in names:
            if f"final_{name}" not in own and name not in self.finals:
                self.finals.append(str(name))
        self._write_summary("running")

    def progress_line(self, r: dict[str, Any]) -> str:
        total = f"/{self.total_rounds}" if self.total_rounds else ""
        parts = []
        for key, label in (
            ("accuracy", "acc"),
            ("val_accuracy", "val"),
            ("loss", "loss"),
            ("server_accuracy", "server acc"),
            *((name, name) for name in self.finals[:4]),
        ):
            if isinstance(r.get(key), (int, float)):
                parts.append(f"{label} {r[key]:.4f}")
        if r.get("time_s") is not None:
            parts.append(f"{r['time_s']:.2f} s")
        parts.append(f"down {human_bytes(r.get('bytes_down', 0))} up {human_bytes(r.get('bytes_up', 0))}")
        if isinstance(r.get("dp"), dict) and r["dp"].get("epsilon") is not None:
            eps = r["dp"]["epsilon"]
            parts.append(f"dp eps {eps:.3g}" if isinstance(eps, (int, float)) else f"dp eps {eps}")
        if r.get("num_failures") or r.get("rejected"):
            parts.append(f"failures {r.get('num_failures', 0)} rejected {len(r.get('rejected') or [])}")
        lost = _lost_clients(r)
        if lost:
            parts.append("lost " + ", ".join(lost))
        label = f"[round {r['round']}: {r['phase']}]" if r.get("phase") else f"[round {r['round']}{total}]"
        return f"{label} " + " | ".join(parts)

    def summary(self, status: str, error: str | None = None) -> dict[str, Any]:
        training = [r for r in self.rounds if r.get("round", 0) >= 1]
        accs = [(r["round"], r["accuracy"]) for r in training if r.get("accuracy") is not None]
        final = training[-1] if training else {}
        best = max(accs, key=lambda t: t[1]) if accs else (None, None)
        out: dict[str, Any] = {
            "status": status,
            "rounds_completed": len(training),
            "total_rounds": self.total_rounds,
            "final_accuracy": final.get("accuracy"),
            "final_mean_client_accuracy": final.get("mean_client_accuracy"),
            "final_val_accuracy": final.get("val_accuracy"),
            "final_loss": final.get("loss"),
            "final_server_accuracy": final.get("server_accuracy"),
            "best_accuracy": best[1],
            "best_round": best[0],
            "train_time_s": sum(r.get("time_s") or 0.0 for r in training),
            "phase_time_s": sum(r.get("time_s") or 0.0 for r in self.rounds if r.get("round", 0) < 1),
            "mean_round_time_s": (sum(r.get("time_s") or 0.0 for r in training) / len(training)) if training else None,
            "bytes_down": sum(r.get("bytes_down", 0) for r in self.rounds),
            "bytes_up": sum(r.get("bytes_up", 0) for r in self.rounds),
            "out_dir": str(self.out_dir),
            "serverapp_started": self.started,  # wall clock; launchers add launcher_started and wall_time_s
        }
        out.update({f"final_{name}": final.get(name) for name in self.finals})
        dp = [r["dp"] for r in training if isinstance(r.get("dp"), dict)]
        if dp:  # the privacy budget spent by the model updates (strategies/dp.py)
            out["dp"] = {
                k: dp[-1].get(k) for k in ("mode", "epsilon", "delta", "releases", "noise_stddev", "clipping_norm")
            }
        out.update(self.extra)
        if error:
            out["error"] = error
        return out

    def _write_summary(self, status: str, error: str | None = None) -> dict[str, Any]:
        summary = _jsonable(self.summary(status, error))
        _write_atomic(self.out_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return summary

    def finish(self, status: str = "completed", error: str | None = None) -> dict[str, Any]:
        return self._write_summary(status, error)


def add_launcher_times(out_dir: str | os.PathLike, started: float, wall_time_s: float) -> None:
    """Record in ``summary.json`` when the launcher started (wall clock) and how long the whole run took, start-up
    included (the time plot starts there)."""
    path = Path(out_dir) / "summary.json"
    if not path.exists():
        return
    summary = json.loads(path.read_text())
    summary.update(launcher_started=started, wall_time_s=wall_time_s)
    _write_atomic(path, json.dumps(_jsonable(summary), indent=2, sort_keys=True) + "\n")


def accuracy_text(summary: dict[str, Any]) -> str:
    """``final test accuracy A`` for a run's summary, plus ``(mean over clients M)`` when the method reports the
    per-client mean (graph classification: FedStar's metric)."""
    acc, mean = summary.get("final_accuracy"), summary.get("final_mean_client_accuracy")
    if acc is None and summary.get("final_auc") is not None:  # link prediction: AUC and Hits@K
        hits = sorted(k for k in summary if k.startswith("final_hits@"))
        more = "".join(f", {k[len('final_') :]} {summary[k]:.4f}" for k in hits if summary[k] is not None)
        return f"final test AUC {summary['final_auc']:.4f}{more}"
    text = f"final test accuracy {'n/a' if acc is None else f'{acc:.4f}'}"
    return text if mean is None else f"{text} (mean over clients {mean:.4f})"


def read_run(out_dir: str | os.PathLike) -> dict[str, Any]:
    """Load a results directory: ``{"config": ..., "rounds": [...], "summary": ...}``."""
    path = Path(out_dir)
    if not (path / "rounds.jsonl").is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a flowergraph results directory (no rounds.jsonl)")
    rounds = [json.loads(line) for line in (path / "rounds.jsonl").read_text().splitlines() if line.strip()]
    config = json.loads((path / "config.json").read_text()) if (path / "config.json").exists() else {}
    summary = json.loads((path / "summary.json").read_text()) if (path / "summary.json").exists() else {}
    return {"config": config.get("config", {}), "rounds": rounds, "summary": summary, "path": str(path)}
