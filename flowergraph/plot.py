"""Draw accuracy-vs-round and accuracy-vs-time plots from results directories (several runs on one plot).

    python -m flowergraph.plot results/run-a results/run-b --out plots/ [--labels A B] [--metric accuracy]

writes ``plots/accuracy_vs_round.png`` and ``plots/accuracy_vs_time.png``. The curves come from each run's
``rounds.jsonl`` (see :mod:`flowergraph.storage.results`); time is the wall time since the run started: one-off phases
before the first training round (FedGCN's exchange, recorded as round 0) included, so methods that pay for a
phase up front are not flattered.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .storage.results import read_run

METRICS = ("accuracy", "val_accuracy", "server_accuracy", "mean_client_accuracy", "loss", "train_loss")


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


def plot_runs(run_dirs: list[str], out_dir: str, labels: list[str] | None = None,
              metric: str = "accuracy") -> list[Path]:
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
    for xkey, xlabel, name in (("round", "round", f"{metric}_vs_round.png"),
                               ("elapsed_s", "wall time incl. one-off phases (s)", f"{metric}_vs_time.png")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, run in enumerate(runs):
            offset = setup_time(run["rounds"]) if xkey == "elapsed_s" else 0.0
            pts = [(r.get(xkey) + offset, r.get(metric)) for r in run["rounds"]
                   if r.get("round", 0) >= 1 and r.get(metric) is not None and r.get(xkey) is not None]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=labels[i] if labels else default_label(run))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{metric.replace('_', ' ')} vs {xlabel}")
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
    parser.add_argument("--metric", default="accuracy", choices=METRICS)
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
