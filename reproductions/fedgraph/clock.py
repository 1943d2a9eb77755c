"""Calibrates the parallel clock's c (``fedgraph.round-time=parallel``;
:mod:`flowergraph.methods.fedgraph.maths.clock`):
seconds per multiply-add of a FedGraph client's work on one thread of this machine.

Work is what the clock charges a client: a local iteration's forward and backward multiply-adds
(``methods.fedgraph.maths.train_macs``) and, as an owner, the rows it computes for others (``owner_rows_and_macs``).
Measured here, Flower-free, in one process with torch on one thread: for Cora and CiteSeer, on the clients of the
paper's synthesis and of dealt METIS blocks (5 clients each), every scheme of the benchmark (FedGraph policies
across the agent's action range, full batch, GraphSAGE) times every client: one training iteration (sampling,
forward, backward, Adam's step) timed alone, and the owner's rows for all its boundary nodes and for random
subsets of them. The time is the thread's CPU time (``time.thread_time``), so a pause or another process on the
core does not stretch it (a shared core's caches still may); each measurement is the minimum of ``--repeats``
timings of the same sample (the usual defence against noise in micro-timings).

The clock charges ``c x work + c0`` per local iteration and ``c x work + c1`` per rows computation; (c, c0, c1)
is the fit to every measurement that minimises the relative error (least squares weighted by 1 / seconds^2, so a
small sample's 1 ms counts as much as a full batch's 30 ms); the medians over ``--trials`` independent trials go
into ``flowergraph/methods/fedgraph/maths/clock.py``. Beside it: the issue's proportional model (c alone, the slope
through the origin over the training iterations) and, per group, how far each model is from the measured time.

    .venv/bin/python reproductions/fedgraph/clock.py   # ~5 min on one core; writes docs/results/fedgraph_clock.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402

SCHEMES = (
    ("fedgraph", 32, 0.1),
    ("fedgraph", 32, 1.0),
    ("fedgraph", 256, 0.1),
    ("fedgraph", 256, 1.0),
    ("fedgraph", 512, 1.0),
    ("full", None, None),
    ("graphsage", 256, None),
)
SPLIT = {"Cora": "random:0.4461/0.1846/0.3693", "CiteSeer": "random:0.5491/0.1503/0.3006"}
DATA = {"synthesis": {}, "metis-dealt": {"Cora": 16, "CiteSeer": 64}}


def client_views(dataset: str, data: str, seed: int):
    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.methods.fedgraph.maths import build_view, exchange_degrees

    config = {
        "method": "fedgraph",
        "dataset": dataset,
        "num-clients": 5,
        "seed": seed,
        "node.split": SPLIT[dataset],
        "data-dir": data_dir(),
    }
    if data != "synthesis":
        config.update({"fedgraph.data": "metis", "fedgraph.parts-per-client": DATA[data][dataset]})
    s = parse_run_config(config)
    graphs = [client_graph_of(s, k) for k in range(5)]
    degrees = exchange_degrees(graphs)
    return [build_view(g, degrees[g.client_id]) for g in graphs]


def scheme_of(name: str, kappa, p):
    from flowergraph.methods.fedgraph.maths import SamplingPolicy, make_scheme

    if name == "fedgraph":
        return SamplingPolicy(kappa=kappa, probs=(p, p))
    return make_scheme(name, 2, batch_size=kappa or 256)


def cpu_min(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def measure(views, dataset: str, data: str, seed: int, repeats: int, rng: np.random.Generator) -> list[dict]:
    """(kind, macs, seconds) of every training iteration and rows computation measured on ``views``."""
    import torch

    from flowergraph.methods.fedgraph.maths import (
        build_model,
        owner_rows_and_macs,
        shared_convs,
        train_macs,
        train_step,
    )
    from flowergraph.methods.fedgraph.maths import PAPER_TRAIN
    from flowergraph.tasks import make_optimizer

    out = []
    g0 = views[0].graph
    model = build_model(g0.num_features, g0.num_classes, seed=seed)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    for view in views:
        g = view.graph
        train_idx = torch.nonzero(g.train_mask, as_tuple=True)[0]
        tables = {1: torch.randn(view.num_remote, g.num_classes)}
        for name, kappa, p in SCHEMES:
            scheme = scheme_of(name, kappa, p)
            generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
            model.load_state_dict(initial)
            model.train()
            optimizer = make_optimizer(model.parameters(), PAPER_TRAIN)
            shared = shared_convs("fedgraph", 2)
            for i in range(4):  # the first is a warm-up, not recorded
                state = generator.get_state()
                sample = scheme.sample(view, train_idx, shared, generator)

                def iteration():
                    generator.set_state(state)  # the same sample every repeat (its drawing is timed too)
                    s = scheme.sample(view, train_idx, shared, generator)
                    train_step(model, view, s, tables, optimizer)

                seconds = cpu_min(iteration, repeats)
                if i:
                    label = f"k{kappa} p{p:g}" if name == "fedgraph" else name
                    out.append(
                        {
                            "kind": "train",
                            "macs": train_macs(model, sample),
                            "s": seconds,
                            "scheme": label,
                            "data": data,
                        }
                    )
        boundary = view.graph.global_ids[torch.unique(view.graph.cross_edges[0])].numpy()
        boundary = np.sort(boundary)
        model.load_state_dict(initial)
        for size in (len(boundary), 10, 100, 1000):
            ids = boundary if size >= len(boundary) else np.sort(rng.choice(boundary, size, replace=False))
            if not len(ids):
                continue
            macs = owner_rows_and_macs(model, view, "fedgraph", 1, {}, ids=ids)[1]
            seconds = cpu_min(lambda: owner_rows_and_macs(model, view, "fedgraph", 1, {}, ids=ids), repeats)
            label = "rows, all boundary nodes" if size >= len(boundary) else f"rows, {size} nodes"
            out.append({"kind": "rows", "macs": macs, "s": seconds, "scheme": label, "data": data})
    for row in out:
        row["dataset"] = dataset
    return out


def relative_fit(points: list[dict]) -> tuple[float, float, float]:
    """(c, c0, c1) minimising sum(((s - c macs - c0 [iteration] - c1 [rows computation]) / s)^2)."""
    x = np.array([p["macs"] for p in points], dtype=float)
    y = np.array([p["s"] for p in points], dtype=float)
    train = np.array([p["kind"] == "train" for p in points], dtype=float)
    a = np.stack([x / y, train / y, (1 - train) / y], axis=1)
    (c, c0, c1), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    return float(c), float(c0), float(c1)


def modelled(p: dict, c: float, c0: float, c1: float) -> float:
    return c * p["macs"] + (c0 if p["kind"] == "train" else c1)


def slope(points: list[dict]) -> float:
    x = np.array([p["macs"] for p in points], dtype=float)
    y = np.array([p["s"] for p in points], dtype=float)
    return float((x * y).sum() / (x * x).sum())


def affine(points: list[dict]) -> tuple[float, float, float]:
    """(slope, intercept, R^2) of the least-squares line."""
    x = np.array([p["macs"] for p in points], dtype=float)
    y = np.array([p["s"] for p in points], dtype=float)
    a, b = np.polyfit(x, y, 1)
    r2 = 1 - ((y - (a * x + b)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return float(a), float(b), float(r2)


def origin_r2(points: list[dict], c: float) -> float:
    y = np.array([p["s"] for p in points], dtype=float)
    x = np.array([p["macs"] for p in points], dtype=float)
    return float(1 - ((y - c * x) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="independent trials (the spread of c)")
    parser.add_argument("--repeats", type=int, default=5, help="timings per measurement (the minimum is kept)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from flowergraph.tasks import configure_torch
    from flowergraph.methods.fedgraph.maths import SECONDS_PER_MAC, SECONDS_PER_ROWS, SECONDS_PER_STEP

    configure_torch(1)
    views = {
        (d, data): client_views(d, data, args.seed)
        for d in ("Cora", "CiteSeer")
        for data in ("synthesis", "metis-dealt")
    }
    trials = []
    for trial in range(args.trials):
        rng = np.random.default_rng([args.seed, trial])
        points = []
        for (d, data), vs in views.items():
            points += measure(vs, d, data, args.seed, args.repeats, rng)
        trials.append(points)
        print(f"trial {trial}: c, c0, c1 = {relative_fit(points)}", flush=True)
    fits = [relative_fit(t) for t in trials]
    c, c0, c1 = (statistics.median(f[i] for f in fits) for i in range(3))
    origin = statistics.median(slope([p for p in t if p["kind"] == "train"]) for t in trials)
    body = [
        render_fits(trials, fits, (c, c0, c1), origin),
        render_groups(trials, (c, c0, c1), origin),
        f"The constants in `flowergraph/methods/fedgraph/maths/clock.py` (`SECONDS_PER_MAC`, `SECONDS_PER_STEP`, "
        f"`SECONDS_PER_ROWS`; the first two are the defaults of `fedgraph.seconds-per-mac` and "
        f"`fedgraph.seconds-per-step`) are {SECONDS_PER_MAC:.4g} s per multiply-add, {1e3 * SECONDS_PER_STEP:.4g} "
        f"ms per local iteration and {1e3 * SECONDS_PER_ROWS:.4g} ms per rows computation; this run's medians are "
        f"{c:.4g}, {1e3 * c0:.4g} and {1e3 * c1:.4g} ms.",
    ]
    write_result("fedgraph_clock", "FedGraph's parallel clock: c, c0 and c1", "\n\n".join(body))


def render_fits(trials: list[list[dict]], fits: list[tuple], constants: tuple, origin: float) -> str:
    c, c0, c1 = constants
    origins = [slope([p for p in t if p["kind"] == "train"]) for t in trials]
    spread = [
        ["c (s per multiply-add)", *[f"{f[0]:.4g}" for f in fits], f"{c:.4g}"],
        ["c0 (ms per local iteration)", *[f"{1e3 * f[1]:.4g}" for f in fits], f"{1e3 * c0:.4g}"],
        ["c1 (ms per rows computation)", *[f"{1e3 * f[2]:.4g}" for f in fits], f"{1e3 * c1:.4g}"],
        ["proportional model: c alone (s per MAC)", *[f"{o:.4g}" for o in origins], f"{origin:.4g}"],
    ]
    errors = []
    for name, model in (
        ("c x work + c0 / c1", lambda p: modelled(p, c, c0, c1)),
        ("c alone", lambda p: origin * p["macs"]),
    ):
        for kind in ("train", "rows"):
            ratios = [model(p) / p["s"] for t in trials for p in t if p["kind"] == kind]
            q = np.quantile(ratios, [0.05, 0.5, 0.95])
            errors.append([name, kind, len(ratios), f"{q[1]:.2f}", f"{q[0]:.2f} - {q[2]:.2f}"])
    return (
        f"**c = {c:.4g} s per multiply-add, c0 = {1e3 * c0:.3g} ms per local iteration, c1 = {1e3 * c1:.3g} ms per "
        f"rows computation** (medians over {len(trials)} trials of the fit of CPU seconds to c x work + c0 (or c1) "
        f"minimising the relative error; {1 / c / 1e9:.2f} G "
        f"multiply-adds per second). The issue's proportional model (c alone, least squares through the origin "
        f"over the training iterations) gives {origin:.4g} s per multiply-add.\n\n"
        + table(["constant", *[f"trial {i}" for i in range(len(trials))], "median"], spread)
        + "\n\nModel over measured CPU time, per measurement (median and 5-95% range):\n\n"
        + table(["model", "measurements", "count", "median ratio", "5-95%"], errors)
    )


def render_groups(trials: list[list[dict]], constants: tuple, origin: float) -> str:
    """Per dataset, data and scheme: the mean measured seconds against both models (how far each is off)."""
    groups: dict[tuple, list[dict]] = {}
    for t in trials:
        for p in t:
            groups.setdefault((p["dataset"], p["data"], p["scheme"]), []).append(p)
    rows = []
    for (d, data, scheme), ps in groups.items():
        measured = statistics.mean(p["s"] for p in ps)
        macs = statistics.mean(p["macs"] for p in ps)
        model = statistics.mean(modelled(p, *constants) for p in ps)
        rows.append(
            [
                d,
                data,
                scheme,
                f"{macs / 1e6:.2f}",
                f"{1e3 * measured:.3f}",
                f"{1e3 * model:.3f}",
                f"{model / measured:.2f}",
                f"{origin * macs / measured:.2f}",
            ]
        )
    return "Per group (mean over clients, iterations and trials): measured CPU time against the models.\n\n" + table(
        [
            "dataset",
            "clients",
            "measurement",
            "M MACs",
            "measured ms",
            "c x work + c0 / c1 ms",
            "model / measured",
            "c alone / measured",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
