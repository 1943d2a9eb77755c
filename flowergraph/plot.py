"""Draw accuracy-vs-round and accuracy-vs-time plots from results directories (several runs on one plot).

    python -m flowergraph.plot results/run-a results/run-b --out plots/ [--labels A B] [--metric accuracy]

writes ``plots/accuracy_vs_round.png`` and ``plots/accuracy_vs_time.png``. The curves come from each run's
``rounds.jsonl`` (see :mod:`flowergraph.storage.results`). Time is the wall time since the launcher started, start-up
included (Flower's and Ray's start, the clients' imports and data): the same clock as the launcher's "run completed
in N s". A run without the launcher's start time (a plain ``flwr run``) is placed from the ServerApp's start, and
older results from their first round, plus one-off phases before it (FedGCN's exchange, recorded as round 0); the
axis says which. The y axis names the accuracy: ``accuracy`` is the clients' test accuracy on their own test
nodes/graphs, weighted by their counts (see :data:`METRIC_LABELS`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .storage.results import read_run

__all__ = ["METRICS", "METRIC_LABELS", "main", "plot_runs"]

METRICS = ("accuracy", "val_accuracy", "server_accuracy", "mean_client_accuracy", "loss", "train_loss")
METRIC_LABELS = {
    "accuracy": "test accuracy (clients' test sets, weighted by size)",
    "val_accuracy": "validation accuracy (clients' validation sets, weighted)",
    "server_accuracy": "test accuracy of the global model (server, global test set)",
    "mean_client_accuracy": "test accuracy, mean over clients",
    "loss": "test loss (clients' test sets, weighted)",
    "train_loss": "training loss (weighted like the aggregation)",
}
TIME_AXES = {
    "launcher": "wall time since the launcher started (s), start-up included",
    "serverapp": "wall time since the ServerApp started (s), Flower's start-up before it excluded",
    "rounds": "wall time since round 1 started, incl. one-off phases (s); start-up excluded",
}


def default_label(run: dict) -> str:
    cfg = run["config"]
    parts = [str(cfg.get("method", "?")), str(cfg.get("dataset", "?"))]
    if cfg.get("method") not in ("centralized",):
        parts.append(f"K={cfg.get('num-clients')}")
        if cfg.get("partitioner") == "dirichlet":
            parts.append(f"beta={cfg.get('beta'):g}")
        else:
            parts.append(str(cfg.get("partitioner")))
    hops = cfg.get("fedgcn.hops", cfg.get("hops"))  # "hops" in runs made before the key was renamed
    if hops is not None and cfg.get("method") == "fedgcn":
        parts.append(f"{hops}-hop")
    return " ".join(parts)


def setup_time(rounds: list[dict]) -> float:
    """Seconds spent in one-off phases before round 1 (records with round 0, e.g. FedGCN's exchange)."""
    return float(sum(r.get("time_s") or 0.0 for r in rounds if r.get("round", 0) < 1))


def time_points(run: dict, metric: str) -> tuple[str, list[tuple[float, float]]]:
    """``(clock, [(seconds, value), ...])`` for the time plot: seconds since the launcher started when the run's
    summary has the launcher's start (``clock`` "launcher"), else since the ServerApp started ("serverapp"), else
    (older results) since round 1 started plus the one-off phases before it ("rounds"); see :data:`TIME_AXES`."""
    summary, rounds = run.get("summary") or {}, [r for r in run["rounds"] if r.get("round", 0) >= 1]
    for clock, key in (("launcher", "launcher_started"), ("serverapp", "serverapp_started")):
        origin = summary.get(key)
        if origin is not None and rounds and all(r.get("ended_at") is not None for r in rounds):
            return clock, [(r["ended_at"] - origin, r[metric]) for r in rounds if r.get(metric) is not None]
    offset = setup_time(run["rounds"])
    return "rounds", [
        (r["elapsed_s"] + offset, r[metric])
        for r in rounds
        if r.get(metric) is not None and r.get("elapsed_s") is not None
    ]


def plot_runs(
    run_dirs: list[str], out_dir: str, labels: list[str] | None = None, metric: str = "accuracy"
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid choices: {', '.join(METRICS)}")
    if labels and len(labels) != len(run_dirs):
        raise ValueError(f"{len(labels)} labels for {len(run_dirs)} runs")
    runs = [read_run(d) for d in run_dirs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    ylabel = METRIC_LABELS[metric]
    for kind, name in (("round", f"{metric}_vs_round.png"), ("time", f"{metric}_vs_time.png")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        clocks = set()
        for i, run in enumerate(runs):
            if kind == "round":
                pts = [
                    (r["round"], r[metric])
                    for r in run["rounds"]
                    if r.get("round", 0) >= 1 and r.get(metric) is not None
                ]
            else:
                clock, pts = time_points(run, metric)
                clocks.add(clock)
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=labels[i] if labels else default_label(run))
        if kind == "round":
            xlabel = "round"
        elif len(clocks) == 1:
            xlabel = TIME_AXES[clocks.pop()]
        else:
            xlabel = "wall time (s): " + "; ".join(f"{TIME_AXES[c]}" for c in sorted(clocks))
        if kind == "time" and xlabel == TIME_AXES["launcher"]:
            ax.set_xlim(left=0)  # the empty start is the start-up
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{metric.replace('_', ' ')} vs {'round' if kind == 'round' else 'wall time'}")
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flowergraph.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="results directories (each with rounds.jsonl)")
    parser.add_argument("--out", default=".", help="folder for the PNG files (default: current folder)")
    parser.add_argument("--labels", nargs="*", help="one legend label per run (default: from each config)")
    parser.add_argument(
        "--metric",
        default="accuracy",
        choices=METRICS,
        help="what the y axis shows (default: accuracy, the clients' test accuracy weighted by their test-set sizes)",
    )
    args = parser.parse_args(argv)
    try:
        paths = plot_runs(args.runs, args.out, args.labels, args.metric)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("plots: " + " ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
