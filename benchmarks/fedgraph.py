"""FedGraph (Chen et al., IEEE TPDS) against its baselines and ablations, in the shapes of the paper's figures:
accuracy against wall time (Fig. 7: FedGraph's DDPG policies, full batch, GraphSAGE and FastGCN sampling, all with
the same cross-client exchange), cross-client sharing (Fig. 10: FedGraph, nonShare, allShare), the DDPG learning
curve (return per episode), heterogeneity (Fig. 9: time to a target accuracy at variance 0.1, 0.5, 1), the agent
against a fixed policy, and the effect of one-round-stale rows against the same-round exchange.

Cells (each kept in ``benchmarks/cells/fedgraph.jsonl.xz`` (``common.CellStore``) with its settings and code state,
``common.CellStore``; a finished cell is skipped, a stopped run resumes from its last checkpoint under ``--work``):
``run`` (dataset, variant, var, budget, seed) is one FedGraph run (``method=fedgraph``) through flowergraph's real
ServerApp and ClientApp code in one process (:mod:`flowergraph.app.inprocess`, equal to a Flower simulation, which
``tests/test_fedgraph.py`` checks). Variants:

* ``fedgraph``: the DDPG agent's policies (episodes restart training: Algorithm 4), eq. 9's delta the server's
  clock (the paper's);
* ``fedgraph-work``: the same agent with delta = the largest forward multiply-adds of a client in the round
  (``fedgraph.round-time=work``: deterministic, no machine noise in the reward);
* ``fedgraph-client``: the same agent with delta = the slowest client's local training time
  (``fedgraph.round-time=slowest-client``: clients running in parallel);
* ``fedgraph-work-lambda``: ``fedgraph-work`` with the paper's target accuracy Lambda (Fig. 6: Cora 90.16%,
  CiteSeer 87.9%) instead of the presets' 0.8: the accuracy term is then 128^-0.1 = 0.62 (Cora) times as large
  at the same accuracy, a tilt of eq. 9's trade towards less work;
* ``fixed``: FedGraph sampling with a fixed policy (kappa = batch 256, p = 1 for every convolution);
* ``full``, ``graphsage``, ``fastgcn``: the baselines (fixed, the same exchange);
* ``nonshare``, ``allshare``: the sharing ablations (fixed policy);
* ``one-round``: FedGraph with one-round-stale rows (no exchange phase).

Work (the "Work instead of wall time" table): every round record holds the largest forward multiply-adds of any
client (``max_gmacs``) and the slowest client's local training time; the table sums work along the curves and
checks, over the fixed policies' rounds, how well work predicts the measured time.

Wall time is the run's own clock (``elapsed_s`` of every round record: exchange, local training, aggregation,
agent, evaluation; data loading and start-up excluded). Accuracy is the federated test accuracy (test-set-weighted
over clients, each with one exact forward on its rows). For ``fedgraph`` the curve and the time to the target are
taken in the last episode (from its first round), since every episode restarts training.

    .venv/bin/python benchmarks/fedgraph.py --quick              # smoke check: 3 clients, 6 rounds, minutes
    .venv/bin/python benchmarks/fedgraph.py --budget default     # conf/fedgraph-cora.toml's budget (5 clients)
    .venv/bin/python benchmarks/fedgraph.py                      # the paper's (20 clients, 300 rounds): hours
    .venv/bin/python benchmarks/fedgraph.py --tables-only        # rewrite docs/results/fedgraph*.md from cells
    .venv/bin/python benchmarks/fedgraph.py --jobs 8             # 8 cells at once (a bigger machine; the wall-time
                                                              # columns are then measured side by side)
    .venv/bin/python benchmarks/fedgraph.py --budget paper --datasets Cora --seeds 0 --variants fedgraph fixed full \
        --vars 0.1 --parts main                                   # the paper's budget, one seed (~25 min)

Split (``--split``): the paper draws "a training set, a validation set and a test set" at random without sizes and
takes batch 256 from FastGCN (its ref. [20]); the default ``full-supervised`` is FastGCN's split: 500 validation
and 1000 test nodes at random, every other node for training (Cora 1208/500/1000, CiteSeer 1827/500/1000), so a
client of the synthesis holds 158-1208 labelled Cora nodes (variance 0.1) and batch 256 is a real mini-batch.
``public`` (Planetoid's 140 training nodes: a client holds ~110, so batch 256 *is* full batch) keeps the first
cells' names.

FastGCN control (``--parts layers``): is FastGCN's failure at the paper's layer size (256) the method or our code?
Client 0 of the seed's synthesis alone (no sharing, 40 rounds of the same local iterations, Flower-free core) with
full batch and with FastGCN at layer sizes 256 ... 16384: an unbiased sampler approaches full batch as the layer
grows.

Sharing control (``--parts sharing``): FedGraph (fixed policy), nonShare and allShare on a disjoint random
partition (``fedgraph.data=random``), where 80% of the clients' edge ends cross clients, against the synthesis, where
each client holds ~80% of the nodes and a third of its edge ends cross; the tables give each setting's fraction of
cross-client edge ends, which is what sharing can recover.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (REPO, CellStore, add_jobs, ahead_level_behind, cell_cpu, data_dir, interval_text,  # noqa: E402
                    paired_figure, prepare_run_dir, pyplot, run_cells, save_figure, t_interval, table, write_result)

DATASETS = ("Cora", "CiteSeer")
VARIANTS = ("fedgraph", "fedgraph-work", "fedgraph-client", "fedgraph-work-lambda", "fedgraph-work-td3",
            "fedgraph-work-floor", "fixed", "full", "graphsage", "fastgcn", "nonshare", "allshare", "one-round")
# the DDPG agent with eq. 9's delta as the server's clock (the paper), the largest client work (deterministic) or
# the slowest client's local training time (fedgraph.round-time)
# and two tests of DDPG's late relapses on the work-rewarded agent (not in the paper): TD3's update rule, and a
# floor of 0.1 under the exploration noise (the relapses came when sigma had decayed below 0.05)
DDPG_VARIANTS = ("fedgraph", "fedgraph-work", "fedgraph-client", "fedgraph-work-lambda", "fedgraph-work-td3",
                 "fedgraph-work-floor")
WORK_VARIANTS = ("fedgraph-work", "fedgraph-work-lambda", "fedgraph-work-td3", "fedgraph-work-floor")
RELAPSE_TESTS = ("fedgraph-work-td3", "fedgraph-work-floor")
RELAPSE_VARIANTS = ("fedgraph-work",) + RELAPSE_TESTS  # the stability table's rows
LEARNING_WARMUP = 4  # blocks of LEARNING_BLOCK episodes in which every agent so far was still learning
PAPER_TARGET = {"Cora": 0.9016, "CiteSeer": 0.879}  # the paper's Lambda (Fig. 6's runs), fedgraph-work-lambda
DELTA = {"fedgraph": "the server's clock (the paper's)", "fedgraph-work": "work (GMAC, deterministic)",
         "fedgraph-client": "the slowest client's local training time",
         "fedgraph-work-lambda": "work (GMAC), the paper's Lambda",
         "fedgraph-work-td3": "work (GMAC), TD3's update rule",
         "fedgraph-work-floor": "work (GMAC), exploration noise >= 0.1"}  # eq. 9's delta (and more), per variant
# The commands that computed the cells stored before a cell recorded its command (from the results files they
# wrote and docs/methods/fedgraph.md), so that a table rewritten with --tables-only still says how its numbers came.
EARLIER_COMMANDS = {
    "default": [".venv/bin/python benchmarks/fedgraph.py --budget default --split full-supervised --variants fedgraph "
                "fedgraph-work fedgraph-client fixed full graphsage fastgcn nonshare allshare one-round --rerun-stale",
                ".venv/bin/python benchmarks/fedgraph.py --budget default --split public --parts main --variants "
                "fedgraph fixed full graphsage fastgcn nonshare allshare one-round --rerun-stale"],
    "paper": [".venv/bin/python benchmarks/fedgraph.py --budget paper --datasets Cora --seeds 0 --variants fedgraph "
              "fixed full --vars 0.1 --parts main --rerun-stale"],
    "learning": [".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets Cora --seeds 0 1 2 --variants "
                 "fedgraph fedgraph-work fedgraph-client --vars 0.1 --parts main",
                 ".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets CiteSeer --variants "
                 "fedgraph-work --seeds 0 1 --vars 0.1 --parts main",
                 ".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets CiteSeer --variants fedgraph "
                 "--seeds 0 --vars 0.1 --parts main"],
}
AGENT_VARIANTS = DDPG_VARIANTS + ("one-round",)  # episodes restart training: curves of the last one
VARS = (0.1, 0.5, 1.0)
TARGET = 0.75  # the paper's Fig. 7 statement for Cora
TARGET_HIGH = {"Cora": 0.85, "CiteSeer": 0.70}  # a second target: Cora near its curves' end, CiteSeer below
BUDGETS = {
    "paper": {"num-clients": 20, "rounds": 300, "fedgraph.episode-rounds": 30},
    "default": {"num-clients": 5, "rounds": 30, "fedgraph.episode-rounds": 10},
    "quick": {"num-clients": 3, "rounds": 6, "fedgraph.episode-rounds": 3},
    # the agent over many episodes (the paper trains 300 and sees its returns converge within 100: Fig. 6): the
    # default budget's clients and 10-round episodes, 150 episodes
    "learning": {"num-clients": 5, "rounds": 1500, "fedgraph.episode-rounds": 10},
}
LEARNING_BLOCK = 10  # episodes per row of the learning table
SETTINGS = {"method": "fedgraph", "node.model": "gcn", "node.hidden": 16, "node.layers": 2, "node.dropout": 0.5,
            "fedgraph.data": "synthesis", "fedgraph.lr": 0.01, "fedgraph.batch-size": 256,
            "fedgraph.omega": 128.0, "fedgraph.pca-components": 20, "fedgraph.target-accuracy": 0.8}
VARIANT_KEYS = {  # a value given as {dataset: value} is the dataset's (run_config)
    "fedgraph": {},
    "fedgraph-work": {"fedgraph.round-time": "work"},
    "fedgraph-client": {"fedgraph.round-time": "slowest-client"},
    "fedgraph-work-lambda": {"fedgraph.round-time": "work", "fedgraph.target-accuracy": PAPER_TARGET},
    "fedgraph-work-td3": {"fedgraph.round-time": "work", "fedgraph.agent-update": "td3"},
    "fedgraph-work-floor": {"fedgraph.round-time": "work", "fedgraph.noise-min": 0.1},
    "fixed": {"fedgraph.agent": "fixed"},
    "full": {"fedgraph.agent": "fixed", "fedgraph.sampling": "full"},
    "graphsage": {"fedgraph.agent": "fixed", "fedgraph.sampling": "graphsage"},
    "fastgcn": {"fedgraph.agent": "fixed", "fedgraph.sampling": "fastgcn"},
    "nonshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "nonshare"},
    "allshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "allshare"},
    "one-round": {"fedgraph.staleness": "one-round"},
}
SOURCES = ("flowergraph/tasks/fedgraph/*.py", "flowergraph/tasks/datasets.py", "flowergraph/tasks/splits.py",
           "flowergraph/tasks/partition.py", "flowergraph/tasks/federated_graph.py", "flowergraph/tasks/models.py",
           "flowergraph/tasks/training.py", "flowergraph/wire/fedgraph.py", "flowergraph/clients/fedgraph.py",
           "flowergraph/strategies/fedgraph.py", "flowergraph/methods/fedgraph.py", "flowergraph/strategies/base.py",
           "flowergraph/strategies/phases.py")
STORE = "fedgraph"
SPLITS = {  # --split: node.split per dataset (None: the dataset's own, Planetoid's public split)
    "full-supervised": {"Cora": "random:0.4461/0.1846/0.3693", "CiteSeer": "random:0.5491/0.1503/0.3006"},
    "public": {"Cora": None, "CiteSeer": None},
}
SHARING_VARIANTS = ("fixed", "nonshare", "allshare")
# The policy grid (``--parts policies``): fixed FedGraph policies across the agent's action range (kappa in
# [32, 512], p in [0.1, 1]): what each costs per round and in accuracy, i.e. what the agent could gain
POLICY_GRID = ((32, 0.1), (32, 1.0), (256, 0.1), (256, 1.0), (512, 1.0))
for _k, _p in POLICY_GRID:
    VARIANT_KEYS[f"fixed-k{_k}-p{_p:g}"] = {"fedgraph.agent": "fixed", "fedgraph.batch-size": _k, "fedgraph.prob": _p}
GRID_VARIANTS = tuple(f"fixed-k{k}-p{p:g}" for k, p in POLICY_GRID)
PARTS = ("main", "sharing", "layers", "policies")
LAYER_SIZES = (256, 1024, 4096, 16384)  # the paper's 256 first


def cell_name(dataset: str, variant: str, var: float, budget: str, seed: int, split: str, data: str = "synthesis"
              ) -> str:
    where = f"v{var}" if data == "synthesis" else data
    return f"{dataset}-{variant}-{where}-{budget}-s{seed}" + ("" if split == "public" else f"-{split}")


def run_config(dataset: str, variant: str, var: float, budget: str, seed: int, split: str = "public",
               data: str = "synthesis") -> dict:
    """The run configuration of a cell (without the machine's paths)."""
    config = {**SETTINGS, **BUDGETS[budget], "dataset": dataset, "seed": seed, "fedgraph.var": var,
              **{k: v[dataset] if isinstance(v, dict) else v for k, v in VARIANT_KEYS[variant].items()}}
    if SPLITS[split][dataset] is not None:
        config["node.split"] = SPLITS[split][dataset]
    if data != "synthesis":
        config["fedgraph.data"] = data
    return config


def cross_fraction(graphs) -> float:
    """Fraction of the clients' edge ends whose other end another client holds (cross-client edges over all)."""
    cross = sum(int(g.cross_edges.shape[1]) for g in graphs)
    return cross / max(1, cross + sum(int(g.edge_index.shape[1]) for g in graphs))


def run_cell(work: Path, dataset: str, variant: str, var: float, budget: str, seed: int, split: str = "public",
             data: str = "synthesis") -> dict:
    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.storage.results import read_run

    config = run_config(dataset, variant, var, budget, seed, split, data)
    out = work / cell_name(dataset, variant, var, budget, seed, split, data)
    full = {**config, "data-dir": data_dir(), "out-dir": str(out), "state-dir": str(out / "client-state"),
            "checkpoint-every": 100 if budget == "learning" else 10, "checkpoint-keep": 1}
    state = prepare_run_dir(out, SOURCES)  # a run folder of other code is removed, never read back
    if state != "completed":
        if state == "resume":
            full["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
        run_inprocess(full)
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    # per round: round, the run's clock (s), accuracy, episode, the largest client work (GMAC) and the slowest
    # client's local training time (s) of the round
    curve = [[r["round"], float(r.get("elapsed_s") or 0.0), r.get("accuracy"),
              (r.get("fedgraph") or {}).get("episode", 1), (r.get("fedgraph") or {}).get("max_gmacs"),
              (r.get("fedgraph") or {}).get("slowest_client_s")] for r in rounds]
    returns = [(r.get("fedgraph") or {}).get("episode_return") for r in rounds]
    s = parse_run_config({**config, "data-dir": data_dir()})
    graphs = [client_graph_of(s, k) for k in range(s.num_clients)]
    sizes = [int(g.num_nodes) for g in graphs]
    last = rounds[-1].get("fedgraph") or {}
    # every round's policies (kappa, p per convolution) per client: what the agent chose, for the learning table
    trace = [[[int(k), *[round(float(x), 3) for x in ps]] for k, ps in (r.get("fedgraph") or {}).get("policies") or []]
             for r in rounds] if variant in DDPG_VARIANTS else None
    return {"kind": "run", "dataset": dataset, "variant": variant, "var": var, "budget": budget, "seed": seed,
            "split": split, "data": data, "cross_fraction": cross_fraction(graphs),
            "labelled": [int(g.train_mask.sum()) for g in graphs],
            "curve": curve, "returns": [r for r in returns if r is not None], "client_nodes": sizes,
            "last_policies": last.get("policies"), "final_accuracy": curve[-1][2], "policy_trace": trace,
            "bytes": sum(int(r.get("bytes_down", 0)) + int(r.get("bytes_up", 0)) for r in rounds)}


def compute_cell(work: Path, dataset: str, variant: str, var: float, budget: str, seed: int, split: str,
                 data: str) -> dict:
    """:func:`run_cell`'s row and the seconds the cell took here (``cell_s``)."""
    started = time.perf_counter()
    row = run_cell(work, dataset, variant, var, budget, seed, split, data)
    row["cell_s"] = time.perf_counter() - started
    return row


def layers_cell(dataset: str, seed: int, split: str, rounds: int = 40) -> dict:
    """Client 0 trained alone with full batch and with FastGCN at each of LAYER_SIZES (module docstring)."""
    import torch

    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.tasks.fedgraph import FullBatch, LayerWise, build_model, build_view, evaluate, train_round
    from flowergraph.tasks.fedgraph.local import PAPER_TRAIN

    s = parse_run_config({**run_config(dataset, "full", 0.1, "default", seed, split), "data-dir": data_dir()})
    graph = client_graph_of(s, 0)
    view = build_view(graph)
    schemes = [("full", FullBatch())] + [(f"fastgcn-{t}", LayerWise(batch_size=256, layer_size=t))
                                         for t in LAYER_SIZES]
    out = {}
    for name, scheme in schemes:
        model = build_model(graph.x.shape[1], graph.num_classes, seed=seed)
        generator = torch.Generator().manual_seed(seed)
        losses = [train_round(model, view, scheme, "nonshare", None, PAPER_TRAIN, generator).loss
                  for _ in range(rounds)]
        metrics = evaluate(model, view, "nonshare")
        out[name] = {"test_accuracy": float(metrics["test_accuracy"]), "last_loss": float(losses[-1])}
    return {"kind": "layers", "dataset": dataset, "seed": seed, "split": split, "budget": "default",
            "client_nodes": int(graph.num_nodes), "labelled": [int(graph.train_mask.sum())], "rounds": rounds,
            "results": out}


def layers_table(rows: list[dict]) -> str:
    body = []
    for d in DATASETS:
        cells = [r for r in rows if r["dataset"] == d]
        if cells:
            names = ["full"] + [f"fastgcn-{t}" for t in LAYER_SIZES]
            body.append([d, len(cells), *[_mean_std([r["results"][n]["test_accuracy"] for r in cells]) for n in names]])
    return table(["dataset", "seeds", "full batch acc %", *[f"FastGCN {t} acc %" for t in LAYER_SIZES]], body)


def episode_curves(row: dict) -> list[list[list]]:
    """The curve cut into the run's episodes (FedGraph restarts training every episode), each with its times from
    the episode's start; a run without episodes (the fixed policies and baselines) is one episode."""
    curve = row["curve"]
    if row["variant"] not in AGENT_VARIANTS:
        return [curve]
    out = []
    for i, c in enumerate(curve):
        if i == 0 or c[3] != curve[i - 1][3]:
            start = curve[i - 1][1] if i > 0 and curve[i - 1][0] == c[0] - 1 else 0.0
            out.append([])
        out[-1].append([c[0], c[1] - start, *c[2:]])
    return out


def last_episode(row: dict) -> list[list]:
    """The curve from the start of the run's last episode (FedGraph restarts training every episode), times from
    that start."""
    return episode_curves(row)[-1]


def cumulative_work(curve: list[list]) -> list[float] | None:
    """The running sum of every round's largest client work (GMAC) along ``curve``; None for cells that predate
    the work count."""
    if not curve or len(curve[0]) < 5 or any(c[4] is None for c in curve):
        return None
    return np.cumsum([c[4] for c in curve]).tolist()


def cumulative_client_time(curve: list[list]) -> list[float] | None:
    """The running sum of every round's slowest client's local training time (s) along ``curve``: the training's
    critical path if every client had its own machine and messages cost nothing (all clients share one process
    here, so the run's own clock sums them instead); None for cells that predate the count."""
    if not curve or len(curve[0]) < 6 or any(c[5] is None for c in curve):
        return None
    return np.cumsum([c[5] for c in curve]).tolist()


def _points(curve: list[list], by: str) -> list[tuple[float, float | None]] | None:
    """(x, accuracy) per round of ``curve`` (one episode), x = seconds of the run's clock from its start
    (``by="time"``), cumulative work in GMAC (``by="work"``) or the cumulative slowest client's training seconds
    (``by="client"``); None for cells that predate the count."""
    xs = ([c[1] for c in curve] if by == "time" else cumulative_work(curve) if by == "work"
          else cumulative_client_time(curve))
    return None if xs is None else [(x, c[2]) for x, c in zip(xs, curve)]


def _along(row: dict, by: str) -> list[tuple[float, float | None]] | None:
    """:func:`_points` along the run's last episode."""
    return _points(last_episode(row), by)


def curve_time_to(curve: list[list], target: float = TARGET, by: str = "time") -> float | None:
    """Seconds (GMAC with ``by="work"``, the slowest clients' training seconds with ``by="client"``) along one
    episode's ``curve`` until ``target`` is reached; None if never."""
    return next((x for x, acc in _points(curve, by) or [] if acc is not None and acc >= target), None)


def accuracy_at_work(row: dict, gmacs: float) -> float | None:
    """The accuracy of the last round whose cumulative work (last episode) is within ``gmacs``."""
    return accuracy_at(row, gmacs + 1e-12, by="work")


def time_to(row: dict, target: float = TARGET, by: str = "time") -> float | None:
    """Seconds of the run's clock (GMAC with ``by="work"``, the slowest clients' training seconds with
    ``by="client"``) of the last episode until ``target`` is reached; None if never."""
    return curve_time_to(last_episode(row), target, by)


def _split(row: dict) -> str:
    return row.get("split", "public")


def _data(row: dict) -> str:
    return row.get("data", "synthesis")


def _mean_std(values: list[float], scale: float = 100.0) -> str:
    values = [scale * v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _reached(values: list[float | None], digits: int = 2) -> str:
    """The mean over the runs that reached a target, and how many did: '1.23 (2/3)' or 'never (0/3)'; '-' when
    there are no runs."""
    if not values:
        return "-"
    reached = [v for v in values if v is not None]
    if not reached:
        return f"never (0/{len(values)})"
    return f"{statistics.mean(reached):.{digits}f} ({len(reached)}/{len(values)})"


def _time_summary(rows: list[dict], target: float = TARGET, by: str = "time") -> str:
    """:func:`_reached` over ``rows``' last episodes: seconds of the run's clock (``by="time"``, 2 digits), GMAC
    (``by="work"``) or the slowest clients' training seconds (``by="client"``; both 3 digits) to ``target``."""
    return _reached([time_to(r, target, by) for r in rows], 2 if by == "time" else 3)


def accuracy_at(row: dict, budget: float, by: str = "time") -> float | None:
    """The accuracy of the last round finished within ``budget`` seconds (or GMAC, ``by="work"``) of the
    (last-episode) curve's start."""
    done = [acc for x, acc in _along(row, by) or [] if x <= budget and acc is not None]
    return done[-1] if done else None


def same_budget(runs: list[dict], row: dict) -> float | None:
    """``row``'s accuracy at the wall time of the same seed's FedGraph (DDPG) episode: the same time budget."""
    agent = [r for r in runs if r["variant"] == "fedgraph" and r["dataset"] == row["dataset"]
             and r["seed"] == row["seed"] and r["var"] == row["var"]]
    return accuracy_at(row, last_episode(agent[0])[-1][1]) if agent else None


def summary(runs: list[dict]) -> str:
    """Means over seeds at variance 0.1 on the synthesis: one row per variant, five columns per dataset."""
    runs = [r for r in runs if r["var"] == 0.1 and _data(r) == "synthesis"]
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in runs)]
    header = ["variant"]
    for d in datasets:
        header += [f"{d} acc %", f"{d} time to {TARGET:.0%} (s; reached)",
                   f"{d} time to {TARGET_HIGH[d]:.0%} (s; reached)", f"{d} acc % at FedGraph's time",
                   f"{d} MB moved"]
    body = []
    for variant in VARIANTS:
        line = [variant]
        for d in datasets:
            cell = [r for r in runs if r["dataset"] == d and r["variant"] == variant]
            line += [_mean_std([r["final_accuracy"] for r in cell]), _time_summary(cell) if cell else "-",
                     _time_summary(cell, TARGET_HIGH[d]) if cell else "-",
                     _mean_std([same_budget(runs, r) for r in cell]),
                     f"{statistics.mean(r['bytes'] for r in cell) / 1e6:.1f}" if cell else "-"]
        if any(v != "-" for v in line[1:]):
            body.append(line)
    return table(header, body)


def work_table(runs: list[dict]) -> str:
    """Per variant (synthesis, variance 0.1): the slowest client's work and local training time per round, the
    cumulative work to the targets and the accuracy at the work the DDPG agent rewarded by work spent in its last
    episode; and how well work predicts the slowest client's time (Pearson r over the fixed policies' rounds)."""
    runs = [r for r in runs if r["var"] == 0.1 and _data(r) == "synthesis" and cumulative_work(r["curve"])]
    body, notes = [], []
    for d in DATASETS:
        agent = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == "fedgraph-work"}
        pairs = []
        for variant in VARIANTS + GRID_VARIANTS:
            cells = [r for r in runs if r["dataset"] == d and r["variant"] == variant]
            if not cells:
                continue
            episodes = [last_episode(r) for r in cells]
            rounds = [c for ep in episodes for c in ep[1:] if c[5] is not None]
            clock = [b[1] - a[1] for ep in episodes for a, b in zip(ep[1:], ep[2:])]
            if variant not in AGENT_VARIANTS:
                pairs += [(c[4], c[5]) for c in rounds]
            budget = [accuracy_at_work(r, cumulative_work(last_episode(agent[r["seed"]]))[-1])
                      for r in cells if r["seed"] in agent]
            body.append([d, variant, len(cells), f"{statistics.mean(c[4] for c in rounds):.4f}",
                         f"{statistics.mean(c[5] for c in rounds):.3f}",
                         f"{statistics.mean(clock):.3f}" if clock else "-",
                         *[_time_summary(cells, t, by) for by in ("work", "client") for t in (TARGET, TARGET_HIGH[d])],
                         _mean_std(budget) if budget else "-", _mean_std([r["final_accuracy"] for r in cells])])
        if len(pairs) >= 3:
            x, y = np.asarray(pairs, dtype=float).T
            notes.append(f"{d}: r = {float(np.corrcoef(x, y)[0, 1]):.2f} over {len(pairs)} rounds")
    if not body:
        return ""
    return ("Work: the largest number of forward multiply-adds of any client in a round (GMAC; "
            "`fedgraph.round-time=work`, deterministic), summed over the rounds (the last episode for the agents). "
            "Rounds 2 onwards for the per-round means (the run's clock: the time between consecutive rounds, all "
            "clients in one process, server and messages included). How well the slowest client's work predicts "
            "its measured local training time (Pearson, fixed policies' rounds): " + "; ".join(notes) + ".\n\n" +
            "Slowest-client s: the slowest client's local training seconds summed over the rounds, the "
            "training's critical path if each client had its own machine and messages cost nothing (here all "
            "clients share one process and the run's clock sums them). " + critical_path_note(runs) + "\n\n" +
            table(["dataset", "variant", "seeds", "GMAC per round", "slowest client s per round",
                   "run's clock s per round", f"GMAC to {TARGET:.0%} (reached)", "GMAC to 2nd target (reached)",
                   f"slowest-client s to {TARGET:.0%} (reached)", "slowest-client s to 2nd target (reached)",
                   "acc % at fedgraph-work's work", "final acc %"], body))


WORK_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)  # of the work-rewarded agent's last episode, per seed


def _versus(mine: float | None, theirs: float | None) -> int:
    """+1 if ``mine`` is the higher accuracy, -1 if lower, 0 if level; no round finished yet (None) loses."""
    if mine is None or theirs is None:
        return (mine is not None) - (theirs is not None)
    return (mine > theirs) - (mine < theirs)


def equal_work_table(runs: list[dict], fractions: tuple[float, ...] = WORK_FRACTIONS) -> str:
    """Accuracy at equal work (synthesis, variance 0.1): every variant's accuracy after the same cumulative work as
    fractions of the work-rewarded agent's last episode (per seed), and the agent's seed-paired difference to the
    fixed policy and GraphSAGE at each of them: "the agent beats a fixed policy at the same budget" at more than
    the one budget of its whole episode."""
    runs = [r for r in runs if r["var"] == 0.1 and _data(r) == "synthesis" and cumulative_work(r["curve"])]
    body = []
    for d in DATASETS:
        agent = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == "fedgraph-work"}
        budgets = {s: [f * cumulative_work(last_episode(r))[-1] for f in fractions] for s, r in agent.items()}
        accs = {}
        for variant in VARIANTS:
            cells = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == variant and r["seed"] in agent}
            if not cells:
                continue
            accs[variant] = {s: [accuracy_at_work(r, b) for b in budgets[s]] for s, r in cells.items()}
            columns = list(zip(*accs[variant].values()))
            body.append([d, variant, len(cells), *[
                _mean_std(list(col)) + ("" if None not in col else f" ({sum(a is not None for a in col)}/{len(col)})")
                for col in columns]])
        for base in ("fixed", "graphsage"):
            seeds = sorted(set(accs.get("fedgraph-work", {})) & set(accs.get(base, {})))
            if not seeds:
                continue
            cells = []
            for i in range(len(fractions)):
                pairs = [(accs["fedgraph-work"][s][i], accs[base][s][i]) for s in seeds]
                diffs = [100 * (a - b) for a, b in pairs if a is not None and b is not None]
                wins = [_versus(a, b) for a, b in pairs]
                cells.append((f"{statistics.mean(diffs):+.1f}" if diffs else "-")
                             + f" ({ahead_level_behind(wins, sep='/')})")
            body.append([d, f"fedgraph-work - {base} (seed-paired, points)", len(seeds), *cells])
    if not body:
        return ""
    return ("Accuracy (%, mean ± std over seeds) after the same cumulative work (GMAC, last episode for the agents) "
            "as the given fraction of the work-rewarded agent's last episode, seed by seed; (k/n): only k of n seeds "
            "had finished a round by then. The paired rows: the agent minus the fixed policy or GraphSAGE, mean over "
            "the seeds where both had finished a round, and (ahead / level / behind; no round yet counts as "
            "behind).\n\n"
            + table(["dataset", "variant", "seeds", *[f"at {'all' if f == 1 else f'1/{round(1 / f)}'} of its work"
                                                     for f in fractions]], body))


def critical_path_note(runs: list[dict]) -> str:
    """Seed-paired differences of the agents' slowest-client seconds to the target against full batch and
    GraphSAGE (the issue's comparison, on the clock that dedicated machines would show)."""
    def by_seed(dataset: str, variant: str) -> dict[int, float]:
        times = {r["seed"]: time_to(r, by="client") for r in runs
                 if r["dataset"] == dataset and r["variant"] == variant}
        return {seed: t for seed, t in times.items() if t is not None}

    parts = []
    for d in DATASETS:
        for agent in ("fedgraph", "fedgraph-work", "fedgraph-client"):
            mine = by_seed(d, agent)
            for base in ("full", "graphsage"):
                theirs = by_seed(d, base)
                diffs = [mine[k] - theirs[k] for k in sorted(mine) if k in theirs]
                if diffs:
                    interval = t_interval(diffs)
                    summary = ("" if interval is None else
                               f"; mean {statistics.mean(diffs):+.3f}, 95% interval {interval_text(interval, 3)}")
                    shown = [round(x, 3) + 0.0 for x in diffs]  # counted as printed: -0.0002 s is level, not ahead
                    level = sum(x == 0 for x in shown)
                    parts.append(f"{d} {agent} - {base}: " + ", ".join(f"{x:+.3f}" for x in shown)
                                 + f" s ({sum(x < 0 for x in shown)} of {len(diffs)} seeds ahead"
                                 + (f", {level} level" if level else "") + f"{summary})")
    if not parts:
        return ""
    return (f"Seed-paired slowest-client seconds to {TARGET:.0%} (where 2 or more seeds pair, their mean and the 95% "
            "Student-t interval of the mean): " + "; ".join(parts) + ".")


def heterogeneity_table(runs: list[dict]) -> str:
    """Paper Fig. 9's shape: time to the target at each variance of xi, FedGraph against full batch, on the run's
    clock (the paper's measure; it depends on the machine and its load) and in work (GMAC, deterministic)."""
    body = []
    for d in DATASETS:
        for var in VARS:
            cells = {v: [r for r in runs if r["dataset"] == d and r["var"] == var and _data(r) == "synthesis"
                         and r["variant"] == v] for v in ("fedgraph", "full")}
            if not any(cells.values()):
                continue
            ratios = [min(r["client_nodes"]) / max(r["client_nodes"]) for r in cells["fedgraph"] + cells["full"]]
            body.append([d, f"{var:g}", f"{statistics.mean(ratios):.2f}" if ratios else "-",
                         *[_time_summary(cells[v]) for v in ("fedgraph", "full")],
                         *[_time_summary(cells[v], TARGET_HIGH[d]) for v in ("fedgraph", "full")],
                         *[_time_summary(cells[v], by="work") for v in ("fedgraph", "full")],
                         *[_time_summary(cells[v], TARGET_HIGH[d], by="work") for v in ("fedgraph", "full")],
                         *[_mean_std([r["final_accuracy"] for r in cells[v]]) for v in ("fedgraph", "full")]])
    return table(["dataset", "var", "smallest/largest client", f"FedGraph time to {TARGET:.0%}",
                  f"full time to {TARGET:.0%}", "FedGraph time to 2nd target", "full time to 2nd target",
                  f"FedGraph GMAC to {TARGET:.0%}", f"full GMAC to {TARGET:.0%}", "FedGraph GMAC to 2nd target",
                  "full GMAC to 2nd target", "FedGraph acc %", "full acc %"],
                 body)


def sharing_table(runs: list[dict]) -> str:
    """FedGraph (fixed policy), nonShare and allShare on the synthesis and on a disjoint random partition."""
    body = []
    for d in DATASETS:
        for data in ("synthesis", "random"):
            cells = [r for r in runs if r["dataset"] == d and _data(r) == data and r["var"] == 0.1
                     and r["variant"] in SHARING_VARIANTS]
            if not cells:
                continue
            fractions = [r["cross_fraction"] for r in cells if r.get("cross_fraction") is not None]
            acc = {v: [r["final_accuracy"] for r in cells if r["variant"] == v] for v in SHARING_VARIANTS}
            gap = sharing_gap(cells, "nonshare")
            interval = t_interval([100 * g for g in gap])  # points
            body.append([d, data, f"{statistics.mean(fractions):.2f}" if fractions else "-",
                         *[_mean_std(acc[v]) for v in SHARING_VARIANTS], _mean_std(gap) if gap else "-",
                         interval_text(interval),
                         *[_time_summary([r for r in cells if r["variant"] == v]) for v in SHARING_VARIANTS]])
    return table(["dataset", "clients' data", "cross-client edge ends", "FedGraph (fixed) acc %", "nonShare acc %",
                  "allShare acc %", "FedGraph - nonShare (points, seed-paired)", "95% interval of the mean",
                  f"FedGraph time to {TARGET:.0%}", f"nonShare time to {TARGET:.0%}", f"allShare time to {TARGET:.0%}"],
                 body)


def sharing_gap(cells: list[dict], other: str) -> list[float]:
    """FedGraph (fixed policy) minus ``other``'s final accuracy, seed by seed (in seed order), over the seeds of
    ``cells`` (one dataset and clients' data) that have both."""
    acc = {v: {r["seed"]: r["final_accuracy"] for r in cells if r["variant"] == v} for v in ("fixed", other)}
    return [acc["fixed"][k] - acc[other][k] for k in sorted(set(acc["fixed"]) & set(acc[other]))]


def sharing_figure(runs: list[dict], name: str) -> str | None:
    """The sharing gaps seed by seed (:func:`common.paired_figure`): FedGraph (fixed policy) minus nonShare and
    minus allShare, per dataset and clients' data, in points, against the issue's 5 points over nonShare."""
    rows = []
    for d in DATASETS:
        for data in ("synthesis", "random"):
            cells = [r for r in runs if r["dataset"] == d and _data(r) == data and r["var"] == 0.1]
            where = "synthesis" if data == "synthesis" else "cut partition"
            for other, label in (("nonshare", "nonShare"), ("allshare", "allShare")):
                if gap := sharing_gap(cells, other):
                    rows.append((f"{d}, {where}: FedGraph - {label}", [100 * g for g in gap], None))
    return paired_figure(rows, name, "FedGraph (fixed policy) - other (points of test accuracy)",
                         "Where sharing's gain comes from, seed-paired", target=("issue: +5 over nonShare", 5.0))


def _spearman(a: list[float], b: list[float]) -> str:
    if len(a) != len(b) or len(a) < 3:
        return "-"
    ra = np.argsort(np.argsort(np.asarray(a, dtype=float), kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(np.asarray(b, dtype=float), kind="stable"), kind="stable").astype(float)
    return f"{float(np.corrcoef(ra, rb)[0, 1]):+.2f}"


def episodes(row: dict) -> list[dict]:
    """Per finished episode of a DDPG run: its return, the accuracy after its last round, its wall time (from its
    start), each client's mean policy over its rounds (kappa, p per convolution; from ``policy_trace``), its work
    and its curve (:func:`episode_curves`)."""
    trace = row.get("policy_trace")
    out, first = [], 0
    for part in episode_curves(row):
        e, idx = part[0][3], range(first, first + len(part))
        first += len(part)
        policies = None
        if trace and all(trace[i] for i in idx):
            policies = np.mean(np.asarray([trace[i] for i in idx], dtype=float), axis=0).tolist()
        work = [c[4] for c in part] if len(part[0]) >= 5 else []
        out.append({"episode": e, "return": row["returns"][e - 1] if e - 1 < len(row["returns"]) else None,
                    "accuracy": part[-1][2], "seconds": part[-1][1], "rounds": len(part), "curve": part,
                    "policies": policies, "gmacs": sum(work) if work and None not in work else None})
    return [x for x in out if x["return"] is not None]  # a finished episode has its return


OTHER_CPU = "‡"  # marks seconds from a cell measured on another CPU model than the row it is compared with
OTHER_CPU_NOTE = (f"{OTHER_CPU}: seconds of a cell measured on another CPU model than the agent's (each cell "
                  "records its CPU); they do not compare with the agent's seconds and are left out of the counts.")


def same_cpu(a: dict, b: dict) -> bool:
    """Whether cells ``a`` and ``b`` recorded the same CPU model: only then do their seconds compare."""
    cpu = a.get("cpu") or "not recorded"
    return cpu != "not recorded" and cpu == (b.get("cpu") or "not recorded")


def references(rows: list[dict], row: dict, variants: tuple[str, ...]) -> list[dict]:
    """The default budget's cells of ``variants`` with ``row``'s dataset, seed, variance, split, data and clients."""
    return [r for r in rows if r.get("kind") == "run" and r["variant"] in variants and r["budget"] == "default"
            and r["dataset"] == row["dataset"] and r["seed"] == row["seed"] and r["var"] == row["var"]
            and _split(r) == _split(row) and _data(r) == _data(row)
            and len(r["client_nodes"]) == len(row["client_nodes"])]


def fixed_reference(rows: list[dict], row: dict) -> dict | None:
    """The fixed-policy cell (kappa 256, p = 1) matching ``row`` (:func:`references`)."""
    return next(iter(references(rows, row, ("fixed",))), None)


def _round_times(row: dict) -> list[float]:
    times = [c[1] for c in row["curve"]]
    return [b - a for a, b in zip([0.0] + times[:-1], times)]


def policy_grid_table(grid: list[dict], rows: list[dict]) -> str:
    """Per dataset and fixed policy: seconds per round (rounds 2.., mean over seeds), accuracy after 10 rounds (an
    episode of the default budget) and after the last, time to the target; the DDPG agent's rows of the same
    budget for comparison."""
    body = []
    for dataset in DATASETS:
        for variant in GRID_VARIANTS + ("fedgraph",):
            cells = [r for r in (grid if variant != "fedgraph" else rows) if r.get("kind") == "run"
                     and r["dataset"] == dataset and r["variant"] == variant and r["budget"] == grid[0]["budget"]
                     and _split(r) == _split(grid[0]) and r["var"] == 0.1 and _data(r) == "synthesis"]
            if not cells:
                continue
            per_round = [statistics.mean(_round_times(r)[1:]) for r in cells]
            label = "DDPG agent (last episode)" if variant == "fedgraph" else \
                "kappa {}, p {}".format(*variant.removeprefix("fixed-k").split("-p"))
            curves = [last_episode(r) for r in cells]
            body.append([dataset, label, len(cells), f"{statistics.mean(per_round):.3f}",
                         _mean_std([next((c[2] for c in cv if c[0] - cv[0][0] + 1 == 10), None) for cv in curves]),
                         _mean_std([r["final_accuracy"] for r in cells]), _time_summary(cells)])
    return ("Seconds per round: the run's own clock, rounds 2 onwards, mean over seeds (for the agent: over its whole "
            "run). Cells of one invocation ran one after another in one process, so their times compare; the agent's "
            "cells ran in another invocation.\n\n" +
            table(["dataset", "policy", "seeds", "s per round", "acc % after 10 rounds", "final acc %",
                   f"time to {TARGET:.0%} (s; reached)"], body))


def best_grid_at_work(grid: list[dict], block: list[dict]) -> list[float | None]:
    """Per episode of ``block``: the best accuracy any of the ``grid`` cells reached at that episode's work."""
    return [max((a for a in (accuracy_at_work(g, e["gmacs"]) for g in grid) if a is not None), default=None)
            for e in block] if grid else []


def learning_table(rows: list[dict], runs: list[dict]) -> str:
    """The agent over many episodes: blocks of LEARNING_BLOCK episodes, against the untrained agent (first block)
    and the fixed policy at the same wall time."""
    out = []
    for r in runs:
        eps = episodes(r)
        if not eps:
            continue
        fixed = fixed_reference(rows, r)
        by_work = r["variant"] in WORK_VARIANTS
        if by_work and fixed is not None and cumulative_work(fixed["curve"]) is None:
            fixed = None  # a fixed-policy cell from before the work count: no work axis
        grid = [g for g in references(rows, r, GRID_VARIANTS) if cumulative_work(g["curve"])] if by_work else []
        # accuracy at the same seconds compares only within one CPU model (work does not depend on it)
        mark = OTHER_CPU if fixed is not None and not by_work and not same_cpu(r, fixed) else ""
        body = []
        for b0 in range(0, len(eps), LEARNING_BLOCK):
            block = eps[b0:b0 + LEARNING_BLOCK]
            at = [accuracy_at_work(fixed, e["gmacs"]) if by_work else accuracy_at(fixed, e["seconds"])
                  for e in block] if fixed else []
            best = best_grid_at_work(grid, block)
            kappas = [float(np.mean([p[0] for p in e["policies"]])) for e in block if e["policies"]]
            probs = [float(np.mean([q for p in e["policies"] for q in p[1:]])) for e in block if e["policies"]]
            body.append([f"{block[0]['episode']}-{block[-1]['episode']}",
                         f"{statistics.mean(e['return'] for e in block):.2f}",
                         _mean_std([e["accuracy"] for e in block]),
                         f"{statistics.mean(e['seconds'] for e in block):.2f}",
                         f"{statistics.mean(e['gmacs'] for e in block):.3f}" if all(
                             e["gmacs"] is not None for e in block) else "-",
                         _mean_std([a for a in at if a is not None]) + mark if any(a is not None for a in at)
                         else "-",
                         (_mean_std([a for a in best if a is not None]) if any(a is not None for a in best) else "-")
                         if by_work else "",
                         f"{statistics.mean(kappas):.0f}" if kappas else "-",
                         f"{statistics.mean(probs):.2f}" if probs else "-"])
        last = [e for e in eps[-LEARNING_BLOCK:] if e["policies"]]
        per_client = np.mean([e["policies"] for e in last], axis=0) if last else None
        learned = ("" if per_client is None else
                   f"Learned policies (mean over the last {len(last)} episodes), per client (nodes: kappa, p): "
                   + "; ".join(f"{n}: {k:.0f}, {', '.join(f'{q:.2f}' for q in ps)}" for n, (k, *ps) in
                               zip(r["client_nodes"], per_client.tolist()))
                   + f". Spearman(size, kappa) {_spearman(r['client_nodes'], per_client[:, 0].tolist())}.\n")
        reward_by = DELTA[r["variant"]] + (f" {PAPER_TARGET[r['dataset']]:.2%}"
                                           if r["variant"] == "fedgraph-work-lambda" else "")
        out += [f"**{r['dataset']}, variance {r['var']:g}, seed {r['seed']}, time penalty by {reward_by}** "
                f"({len(eps)} episodes of {eps[0]['rounds']} rounds, {r['cell_s'] / 60:.0f} min"
                f"{'; ' + r['stale'] if r['stale'] else ''})\n",
                table(["episodes", "mean return", "accuracy at episode end %", "episode wall time (s)",
                       "episode work (GMAC)", f"fixed policy at the same {'work' if by_work else 'time'} %",
                       "best grid policy at the same work % (chosen on test)", "mean kappa", "mean p"], body),
                "", learned]
        if mark:
            out += [f"{OTHER_CPU}: the fixed-policy cell ran on {fixed.get('cpu') or 'a CPU it did not record'}, this "
                    f"agent on {r.get('cpu') or 'a CPU it did not record'}: accuracy at the same seconds does not "
                    "compare across CPU models.\n"]
    return "\n".join(out)


FIG7_TARGET = {"Cora": TARGET, "CiteSeer": TARGET_HIGH["CiteSeer"]}  # CiteSeer's curves level off near 75%
FIG7_AXES = (("work", "GMAC", 3), ("client", "slowest-client s", 3), ("time", "run's clock s", 2))


def trained_agent_table(rows: list[dict], runs: list[dict]) -> str:
    """Fig. 7's comparison with a trained agent: per DDPG run of many episodes, the mean over its last block of
    LEARNING_BLOCK episodes (each restarts training) of the work, the slowest client's seconds and the run's clock
    to FIG7_TARGET, against the default budget's full-batch, GraphSAGE and fixed-policy cells of the same seed, split,
    synthesis and clients, and the least work to the target among the policy grid's fixed policies (chosen on the
    test accuracy itself: an upper bound for any fixed policy of the grid); then, per axis, on how many seeds the
    agent's mean is below each baseline."""
    body, wins, marked = [], {}, False
    for r in runs:
        eps = [e["curve"] for e in episodes(r)[-LEARNING_BLOCK:]]
        if len(eps) < LEARNING_BLOCK:
            continue
        target, horizon = FIG7_TARGET[r["dataset"]], len(eps[-1])  # the baselines within an episode's rounds

        def first(v: str) -> list[list] | None:
            ref = next(iter(references(rows, r, (v,))), None)
            return ref["curve"][:horizon] if ref else None

        refs = {v: next(iter(references(rows, r, (v,))), None) for v in ("full", "graphsage", "fixed")}
        bases = {v: ref["curve"][:horizon] if ref else None for v, ref in refs.items()}
        grid = [(v, curve_time_to(c, target, "work")) for v, c in ((v, first(v)) for v in GRID_VARIANTS) if c]
        best = min(((v, w) for v, w in grid if w is not None), key=lambda g: g[1], default=None)
        line = [r["dataset"], DELTA[r["variant"]], f"{r['seed']}{' (older code)' if r['stale'] else ''}"]
        for by, _, digits in FIG7_AXES:
            mine = [curve_time_to(c, target, by) for c in eps]
            theirs = {v: curve_time_to(b, target, by) if b else None for v, b in bases.items()}
            # seconds compare only within one CPU model; work (GMAC) does not depend on the machine
            other = {v for v, ref in refs.items() if by != "work" and ref is not None and not same_cpu(r, ref)}
            marked |= bool(other & {v for v, t in theirs.items() if t is not None})
            line.append(_reached(mine, digits) + " / " + " / ".join(
                "-" if t is None else f"{t:.{digits}f}" + (OTHER_CPU if v in other else "")
                for v, t in theirs.items()))
            reached = [x for x in mine if x is not None]
            for v, t in theirs.items():
                if reached and t is not None and v != "fixed" and v not in other:
                    wins.setdefault((r["dataset"], r["variant"]), {}).setdefault((by, v), []).append(
                        statistics.mean(reached) < t)
        line.append("-" if best is None else f"{best[1]:.3f} ({best[0]})")
        body.append(line)
    if not body:
        return ""
    counts = [[d, DELTA[variant], *[" / ".join(f"{sum(c[(by, v)])} of {len(c[(by, v)])}" if (by, v) in c else "-"
                                             for v in ("full", "graphsage")) for by, _, _ in FIG7_AXES]]
              for (d, variant), c in wins.items()]
    return ("### The trained agent on Fig. 7's axes\n\nThe paper trains its agent (Fig. 6) and compares the time to "
            f"a target accuracy (Fig. 7; Cora {FIG7_TARGET['Cora']:.0%}, here CiteSeer "
            f"{FIG7_TARGET['CiteSeer']:.0%}, near where its curves level off). Agent: the mean over its last "
            f"{LEARNING_BLOCK} episodes (each restarts training from the initial model; how many reached the "
            "target), to the target from the episode's start; then the default budget's full batch / GraphSAGE / "
            "fixed policy (kappa 256, p = 1) cells of the same seed, split, synthesis and clients, from the run's "
            f"start, within an episode's {BUDGETS['learning']['fedgraph.episode-rounds']} rounds (the agent's "
            "horizon). Work (GMAC, deterministic) compares across runs; the slowest client's seconds (the training's "
            "critical path with one machine per client) and the run's clock are measured in separate runs on a "
            "shared machine, and the run's clock of the agent also holds its server test evaluation and DDPG step "
            "every round. Least grid work: the fixed policy of the grid that needs the least work to the target "
            "(chosen on the test accuracy itself).\n\n"
            + table(["dataset", "agent (time penalty by)", "seed",
                     *[f"{n} to target: agent / full / GraphSAGE / fixed" for _, n, _ in FIG7_AXES],
                     "least grid work to target (policy)"], body)
            + (f"\n\n{OTHER_CPU_NOTE}" if marked else "")
            + "\n\nSeeds on which the agent's mean is below the baseline's (full batch / GraphSAGE; cells on "
            "the agent's CPU model only for seconds):\n\n"
            + table(["dataset", "agent (time penalty by)",
                     *[f"{n}: ahead of full / GraphSAGE" for _, n, _ in FIG7_AXES]], counts) + "\n\n")


def stability_table(rows: list[dict], runs: list[dict]) -> str:
    """Per work-rewarded agent and seed: its best block of LEARNING_BLOCK episodes (least work per episode) against
    its last block, and the best grid policy at the last block's work: how much of what it learned it keeps."""
    body = []
    for r in runs:
        if r["variant"] not in RELAPSE_VARIANTS:
            continue
        eps = episodes(r)
        blocks = [eps[b:b + LEARNING_BLOCK] for b in range(0, len(eps), LEARNING_BLOCK)]
        blocks = [b for b in blocks if len(b) == LEARNING_BLOCK and all(e["gmacs"] is not None for e in b)]
        if len(blocks) < 2:
            continue
        work = [statistics.mean(e["gmacs"] for e in b) for b in blocks]
        ret = [statistics.mean(e["return"] for e in b) for b in blocks]
        best = int(np.argmin(work))
        grid = [g for g in references(rows, r, GRID_VARIANTS) if cumulative_work(g["curve"])]
        at = best_grid_at_work(grid, blocks[-1])
        last_acc = [e["accuracy"] for e in blocks[-1]]
        body.append([r["dataset"], DELTA[r["variant"]], f"{r['seed']}{' (older code)' if r['stale'] else ''}",
                     f"{work[0]:.3f}",
                     f"{blocks[best][0]['episode']}-{blocks[best][-1]['episode']}: {work[best]:.3f}",
                     f"{work[-1]:.3f}", f"{work[-1] / work[0] - 1:+.0%}",
                     f"{max(work[LEARNING_WARMUP:]):.3f}" if len(work) > LEARNING_WARMUP else "-",
                     f"{ret[best]:.2f} / {ret[-1]:.2f}", _mean_std(last_acc),
                     _mean_std([a for a in at if a is not None]) if any(a is not None for a in at) else "-"])
    if not body:
        return ""
    return ("### Does the agent keep what it learned? (work-rewarded agents)\n\nBlocks of "
            f"{LEARNING_BLOCK} episodes; work: GMAC per episode, mean over the block. \"Largest after learning\": the "
            f"largest block mean from episode {LEARNING_WARMUP * LEARNING_BLOCK + 1} on, when every agent so far had "
            "learned (a relapse shows as a value far above the best block). Accuracy: at "
            "episode end, last block; the best grid policy at the same work as in the tables below.\n\n"
            + table(["dataset", "agent (time penalty by)", "seed", "work, first block", "best block: work",
                     "work, last block", "last vs first", "largest after learning", "return best / last block",
                     "accuracy last block %", "best grid policy at the same work %"], body) + "\n\n")


def cpu_note(runs: list[dict]) -> str:
    """A warning when the cells behind a table's seconds were measured on more than one CPU model (the CPU each
    cell records), naming which cells ran on which: seconds compare only within one CPU; work does not depend
    on it. '' when every cell ran on one model (or none recorded it)."""
    by_cpu: dict[str, dict[str, list[int]]] = {}
    for r in runs:
        group = (f"{r['dataset']} {r['variant']}" + ("" if r["var"] == 0.1 else f" var {r['var']}")
                 + ("" if _data(r) == "synthesis" else f" {_data(r)}"))
        by_cpu.setdefault(r.get("cpu") or "not recorded", {}).setdefault(group, []).append(r["seed"])
    if len(by_cpu) < 2:
        return ""
    models = len(by_cpu) - ("not recorded" in by_cpu)
    return ("**Seconds from more than one CPU**: these cells were measured on " + str(models) + " CPU model"
            + ("s" if models > 1 else "") + (", some on one they did not record" if "not recorded" in by_cpu else "")
            + " (and beside different loads), so a seconds column can mix machines; compare seconds within one "
            "CPU, or use the work (GMAC) columns, which do not depend on the machine. " + "; ".join(
                f"{cpu} ({sum(map(len, groups.values()))} cells): " + ", ".join(
                    f"{g} (seeds {', '.join(map(str, sorted(seeds)))})" for g, seeds in groups.items())
                for cpu, groups in sorted(by_cpu.items())) + ".\n")


def tables(rows: list[dict], budget: str, split: str) -> str:
    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"

    if budget == "learning":
        runs = sorted((r for r in rows if r.get("budget") == budget and _split(r) == split and r.get("kind") == "run"
                       and r["variant"] in DDPG_VARIANTS),
                      key=lambda r: (r["dataset"], r["var"], r["variant"], r["seed"]))
        if not runs:
            return ""
        return (f"## Split `{split}`: the DDPG agent over many episodes\n\nEach episode restarts federated training "
                f"(Algorithm 4); exploration noise starts at sigma 0.2 and decays by 0.98 per episode (0.02 at least; "
                f"0.1 at least for the agent marked \"exploration noise >= 0.1\"), so the last blocks act almost "
                f"greedily. TD3's update rule: twin critics, delayed actor, smoothed targets (not in the paper). "
                f"\"Fixed policy at the same time\": the accuracy of the "
                f"default budget's fixed-policy cell (kappa 256, p = 1; same seed, split, synthesis and clients) after "
                f"the wall time of each episode (for the agent whose time penalty is work: after the same work; "
                f"\"best grid policy\": the best of the policy grid's fixed policies at that work, chosen on the "
                f"test accuracy itself, an upper bound for any fixed policy of the grid). "
                f"Returns are eq. 9 summed over an episode's rounds; the time penalty is profiled to 1 on the first "
                f"round, so a return compares only within one cell.\n\n"
                + trained_agent_table(rows, runs) + stability_table(rows, runs) + learning_table(rows, runs))

    layers = [r for r in rows if r.get("kind") == "layers" and _split(r) == split and budget == "default"]
    grid = [r for r in rows if r.get("budget") == budget and _split(r) == split and r.get("kind") == "run"
            and r["variant"] in GRID_VARIANTS]
    runs = sorted((r for r in rows if r.get("budget") == budget and _split(r) == split and r.get("kind") == "run"
                   and r["variant"] in VARIANTS),
                  key=lambda r: (r["dataset"], _data(r), r["var"], VARIANTS.index(r["variant"]), r["seed"]))
    if not runs:
        return ""
    labelled = {d: sorted(n for r in runs if r["dataset"] == d and r["var"] == 0.1 and _data(r) == "synthesis"
                          for n in r.get("labelled") or []) for d in DATASETS}
    labelled = ", ".join(f"{d} {ns[0]}-{ns[-1]}" for d, ns in labelled.items() if ns)
    out = [f"## Split `{split}`\n",
           (f"Labelled nodes per client (synthesis, variance 0.1): {labelled}.\n" if labelled else ""),
           (f"Target accuracy {TARGET:.0%}. Times in seconds of the run's own clock (for FedGraph's DDPG variants: "
           f"in the last episode, which restarts training; they include the server's own work: the DDPG variants also "
           f"evaluate the global model on the server's test set and update the agent every round). Accuracy: "
           f"federated test accuracy after the last round, mean ± std over seeds (each seed draws the split, the "
            f"synthesis and the initial model). \"At FedGraph's time\": the accuracy of the last round finished within "
           f"the wall time of the same seed's last DDPG episode (the same time budget).\n"),
           *filter(None, [cpu_note(runs)]), "### Summary (variance 0.1)\n", summary(runs), ""]
    work = work_table(runs + grid)
    if work:
        out += ["### Work instead of wall time (deterministic)\n", work, ""]
    equal = equal_work_table(runs)
    if equal:
        out += ["### The work-rewarded agent against fixed policies at equal work\n", equal, ""]
    if any(r["var"] != 0.1 for r in runs):
        second = ", ".join(f"{d} {t:.0%}" for d, t in TARGET_HIGH.items())
        out += [f"### Heterogeneity (paper Fig. 9's shape; 2nd target: {second})\n",
                heterogeneity_table(runs), ""]
    if any(_data(r) != "synthesis" for r in runs):
        out += ["### Where sharing's gain comes from\n", sharing_table(runs), ""]
        if figure := sharing_figure(runs, f"fedgraph_sharing_{budget}_{split}.png"):
            out += [f"![The sharing gaps seed-paired: each seed, the mean, its 95% interval, the 95% range of one run "
                    f"and the issue's target]({figure})", ""]
    if grid:
        out += ["### Fixed policies across the agent's action range (what the agent could gain)\n",
                policy_grid_table(grid, rows), ""]
    if layers:
        out += [f"### FastGCN against its layer size (client 0 alone, {layers[0]['rounds']} rounds, no sharing)\n",
                layers_table(layers), ""]
    body = [[r["dataset"], _data(r), f"{r['var']:g}", r["variant"], r["seed"],
             fmt(100 * r["final_accuracy"] if r["final_accuracy"] is not None else None), fmt(time_to(r), 2),
             fmt(last_episode(r)[-1][1]), f"{r['bytes'] / 1e6:.1f}",
             fmt(r.get("cross_fraction"), 2), r["stale"] or ""]
            for r in runs]
    out += ["### Every cell\n", table(["dataset", "data", "var", "variant", "seed", "final acc %",
                                       f"time to {TARGET:.0%} (s)", "time of the curve (s)", "MB moved",
                                       "cross-client edge ends", "note"], body)]
    ddpg = [r for r in runs if r["variant"] in DDPG_VARIANTS and r["returns"]]
    if ddpg:
        out.append("\n### DDPG: return per episode\n")
        out.append("Spearman: rank correlation between the clients' sizes and the kappa the agent gave them in the "
                   "last round (ties broken by order).\n")
        out.append(table(["dataset", "var", "variant", "seed", "returns (episode 1, 2, ...)", "client nodes",
                          "last policies (kappa, p)", "Spearman(size, kappa)"],
                         [[r["dataset"], f"{r['var']:g}", r["variant"], r["seed"],
                           ", ".join(f"{x:.2f}" for x in r["returns"]),
                           r["client_nodes"], json.dumps([[k, [round(p, 2) for p in ps]] for k, ps in
                                                          (r["last_policies"] or [])]),
                           _spearman(r["client_nodes"], [k for k, _ in r["last_policies"] or []])] for r in ddpg]))
    return "\n".join(out)


def plot(rows: list[dict], budget: str, split: str) -> str | None:
    plt = pyplot()

    every = rows
    rows = [r for r in rows if r.get("budget") == budget and _split(r) == split and _data(r) == "synthesis"
            and r.get("kind") == "run" and r["variant"] in VARIANTS]
    if not rows:
        return None
    if budget == "learning":
        return plot_learning(rows, split, every)
    runs = [r for r in rows if r["var"] == 0.1 and r["seed"] == min(x["seed"] for x in rows)]
    if not runs:
        return None
    datasets = sorted({r["dataset"] for r in runs})
    fig, grid = plt.subplots(2, len(datasets) + 1, figsize=(5 * (len(datasets) + 1), 8), squeeze=False)
    axes = grid[0]
    clocks = (("time", "wall time of the run (s)", "accuracy vs wall time"),
              ("client", "slowest client's training, summed (s)", "accuracy vs the clients' critical path"))
    for row, (by, xlabel, title) in zip(grid, clocks):
        for ax, dataset in zip(row, datasets):
            for i, r in enumerate(sorted((r for r in runs if r["dataset"] == dataset),
                                         key=lambda r: VARIANTS.index(r["variant"]))):
                points = [(x, acc) for x, acc in _along(r, by) or [] if acc is not None]
                if points:
                    ax.plot(*zip(*points), label=r["variant"], color=plt.cm.tab10(i % 10))
            ax.axhline(TARGET, color="grey", lw=0.8, ls=":")
            reach = [t for r in runs if r["dataset"] == dataset
                     for t in [time_to(r, TARGET_HIGH[dataset], by)] if t is not None]
            if reach:  # the first rounds, where the variants differ (the rest is a plateau)
                ax.set_xlim(0, 3 * max(reach))
            ax.set_xlabel(xlabel)
            ax.set_ylabel("test accuracy")
            ax.set_title(f"{dataset}: {title}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    grid[1][-1].axis("off")
    fig.suptitle(f"budget {budget}, split {split}, seed {runs[0]['seed']}, variance 0.1", fontsize=10)
    ax = axes[-1]
    for r in runs:
        if r["variant"] in DDPG_VARIANTS and r["returns"]:
            ax.plot(range(1, len(r["returns"]) + 1), r["returns"], marker="o", label=f"{r['dataset']} {r['variant']}")
    ax.set_xlabel("episode")
    ax.set_ylabel("cumulative reward")
    ax.set_title("DDPG learning curve", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    name = f"fedgraph{'' if budget == 'paper' else '_' + budget}{'' if split == 'public' else '_' + split}.png"
    return save_figure(fig, name)


TRAINED_CURVES = {"fedgraph-work": "agent, work-rewarded", "fedgraph": "agent, the paper's reward",
                  "full": "full batch", "graphsage": "GraphSAGE", "fixed-k256-p0.1": "fixed kappa 256, p 0.1"}


def trained_curves(every: list[dict], runs: list[dict], dataset: str) -> dict[str, tuple[list[float], list[float]]]:
    """Fig. 7's shape in work for a trained agent (:func:`trained_agent_table`): per curve of TRAINED_CURVES, the
    cumulative work and the accuracy per round of an episode, averaged over the last LEARNING_BLOCK episodes and the
    seeds (the baselines: the default budget's cells of the work-rewarded agent's seeds, their first rounds)."""
    out = {}
    finished = {id(r): episodes(r) for r in runs if r["dataset"] == dataset}
    agents = {v: [r for r in runs if r["dataset"] == dataset and r["variant"] == v
                  and len(finished[id(r)]) >= LEARNING_BLOCK] for v in ("fedgraph-work", "fedgraph")}
    curves = {v: [e["curve"] for r in rs for e in finished[id(r)][-LEARNING_BLOCK:]] for v, rs in agents.items()}
    horizon = min((len(c) for cs in curves.values() for c in cs), default=0)
    for v in ("full", "graphsage", "fixed-k256-p0.1"):
        curves[v] = [ref["curve"] for r in agents["fedgraph-work"] for ref in references(every, r, (v,))]
    for v, cs in curves.items():
        cs = [c[:horizon] for c in cs if len(c) >= horizon and cumulative_work(c[:horizon])]
        if horizon and cs:
            out[v] = (np.mean([cumulative_work(c) for c in cs], axis=0).tolist(),
                      np.mean([[x[2] for x in c] for c in cs], axis=0).tolist())
    return out if any(v in out for v in ("fedgraph-work", "fedgraph")) else {}


def plot_learning(rows: list[dict], split: str, every: list[dict] | None = None) -> str | None:
    """One panel per measure of eq. 9's round time: the return per episode (running mean over LEARNING_BLOCK
    episodes) of every seed; a panel with the slowest client's work per episode (the same unit for every agent);
    and per dataset Fig. 7's shape for the trained agent, accuracy against work (:func:`trained_curves`)."""
    plt = pyplot()

    runs = [r for r in rows if r["variant"] in DDPG_VARIANTS and r["returns"]]
    if not runs:
        return None
    variants = [v for v in DDPG_VARIANTS if any(r["variant"] == v for r in runs)]
    relapse = [r for r in runs if r["variant"] in RELAPSE_TESTS]  # the relapse tests, if run
    trained = {d: trained_curves(every or rows, runs, d) for d in DATASETS}
    trained = {d: c for d, c in trained.items() if c}
    panels = len(variants) + 1 + bool(relapse) + len(trained)
    cols = min(panels, 4)
    rows_ = -(-panels // cols)
    fig, grid = plt.subplots(rows_, cols, figsize=(4.6 * cols, 4 * rows_), squeeze=False)
    axes = list(grid.reshape(-1))
    for ax in axes[panels:]:
        ax.set_visible(False)
    axes = axes[:panels]

    def run_color(r: dict):  # a colour per (dataset, seed): Cora's seeds 0-2 first, CiteSeer's after them
        return plt.cm.tab10((DATASETS.index(r["dataset"]) * 3 + r["seed"]) % 10)

    def smooth(values: list[float]) -> tuple[int, np.ndarray]:
        v = np.asarray(values, dtype=float)
        if len(v) < LEARNING_BLOCK:
            return 1, v
        return LEARNING_BLOCK, np.convolve(v, np.ones(LEARNING_BLOCK) / LEARNING_BLOCK, mode="valid")

    for ax, variant in zip(axes, variants):
        for r in (r for r in runs if r["variant"] == variant):
            eps = episodes(r)
            x = [e["episode"] for e in eps]
            color = run_color(r)
            ax.plot(x, [e["return"] for e in eps], color=color, alpha=0.25, lw=0.8)
            k, mean = smooth([e["return"] for e in eps])
            ax.plot(x[k - 1:], mean, color=color, label=f"{r['dataset']} seed {r['seed']}")
        ax.set_title(f"return per episode, delta = {DELTA[variant]}", fontsize=8)
        ax.set_ylabel("return (eq. 9 summed over the episode)")
    styles = {"fedgraph": "-", "fedgraph-work": "--", "fedgraph-client": ":", "fedgraph-work-lambda": "-.",
              "fedgraph-work-td3": "-", "fedgraph-work-floor": ":"}

    def work_panel(ax, which: list[dict], title: str) -> None:
        for r in which:
            eps = [e for e in episodes(r) if e["gmacs"] is not None]
            if not eps:
                continue
            k, mean = smooth([e["gmacs"] for e in eps])
            ax.plot([e["episode"] for e in eps][k - 1:], mean, color=run_color(r),
                    ls=styles[r["variant"]], label=f"{r['dataset']} {r['variant']} seed {r['seed']}")
        ax.set_title(title, fontsize=8)
        ax.set_ylabel("GMAC per episode")

    work_panel(axes[len(variants)], [r for r in runs if r["variant"] not in RELAPSE_TESTS],
               f"slowest client's work per episode (running mean over {LEARNING_BLOCK})")
    if relapse:
        work_panel(axes[len(variants) + 1], [r for r in runs if r["variant"] in RELAPSE_VARIANTS and any(
            q["dataset"] == r["dataset"] and q["seed"] == r["seed"] for q in relapse)],
            "relapse tests: DDPG (--), TD3 (-), noise >= 0.1 (:); work per episode")
    for ax in axes[:panels - len(trained)]:
        ax.set_xlabel("episode")
    for ax, (d, curves) in zip(axes[panels - len(trained):], trained.items()):
        for i, (v, (work, acc)) in enumerate(curves.items()):
            ax.plot(work, [100 * a for a in acc], marker="o", ms=3, color=plt.cm.tab10(i), label=TRAINED_CURVES[v])
        ax.axhline(100 * FIG7_TARGET[d], color="grey", ls=":", lw=1)
        ax.set_title(f"{d}: trained agents (last {LEARNING_BLOCK} episodes) against fixed schemes, mean over seeds",
                     fontsize=8)
        ax.set_xlabel("slowest client's work, cumulative (GMAC)")
        ax.set_ylabel("test accuracy %")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    name = f"fedgraph_learning_{split}.png"
    return save_figure(fig, name)


def cells(args) -> list[tuple[str, str, float, int, str]]:
    """(dataset, variant, var, seed, data) of every cell the arguments select, in run order: Cora first."""
    out = []
    for dataset in args.datasets:
        if "main" in args.parts:
            for var in args.vars:
                for variant in args.variants:
                    if var != 0.1 and variant not in ("fedgraph", "full"):
                        continue  # heterogeneity: FedGraph against full batch
                    out += [(dataset, variant, var, seed, "synthesis") for seed in args.seeds]
        if "policies" in args.parts:
            out += [(dataset, variant, 0.1, seed, "synthesis") for variant in GRID_VARIANTS for seed in args.seeds]
        if "sharing" in args.parts:
            out += [(dataset, variant, 0.1, seed, "random") for variant in SHARING_VARIANTS for seed in args.seeds]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke check: 3 clients, 6 rounds, 1 seed")
    parser.add_argument("--budget", choices=tuple(BUDGETS), default="paper")
    parser.add_argument("--split", choices=tuple(SPLITS), default="full-supervised",
                        help="node split (module docstring); every split's stored cells go into the tables")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--vars", nargs="+", type=float, default=list(VARS),
                        help="heterogeneity levels (variance of xi); only fedgraph and full run at every level")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedgraph"), help="run folders (not in git)")
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    add_jobs(parser, "their wall-time columns are then measured side by side")
    args = parser.parse_args()
    if args.quick:
        args.budget, args.seeds, args.datasets, args.vars = "quick", args.seeds[:1], ["Cora"], [0.1]
    from flowergraph.tasks.compute import configure_torch

    configure_torch(1)
    store = CellStore(STORE, SOURCES)
    work = Path(args.work)
    b = args.budget
    if not args.tables_only and "layers" in args.parts:
        for dataset in args.datasets:
            for seed in args.seeds:
                name = f"{dataset}-fastgcn-layers-s{seed}-{args.split}"
                record = store.load(name)
                if record is not None and not (args.rerun_stale and not store.current(record)):
                    continue
                started = time.perf_counter()
                row = layers_cell(dataset, seed, args.split)
                row["cell_s"] = time.perf_counter() - started
                print(f"cell {name}: {json.dumps(row['results'])}, {row['cell_s']:.1f} s", flush=True)
                store.save(name, {"dataset": dataset, "seed": seed, "split": args.split,
                                  "layer_sizes": list(LAYER_SIZES)}, row)
    pending = []
    if not args.tables_only:
        for dataset, variant, var, seed, data in cells(args):
            record = store.load(cell_name(dataset, variant, var, b, seed, args.split, data))
            if record is None or (args.rerun_stale and not store.current(record)):
                pending.append((work, dataset, variant, var, b, seed, args.split, data))
    if pending:
        print(f"{len(pending)} cells to compute, {min(args.jobs, len(pending))} at a time", flush=True)
    failed = []
    for (_, *key), row, error in run_cells(compute_cell, pending, args.jobs):
        name = cell_name(*key)
        if error is not None:
            print(f"cell {name} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        print(f"cell {name}: final accuracy {row['final_accuracy']}, time to {TARGET:.0%} "
              f"{time_to(row)}, {row['cell_s']:.1f} s", flush=True)
        store.save(name, run_config(*key), row)
    rows = []
    for record in store.records():
        rows.append({**record["row"], "cell": record["cell"], "stale": store.flag(record),
                     "command": record.get("command"), "cpu": cell_cpu(record)})
    body = []
    for split in SPLITS:
        part = tables(rows, b, split)
        if not part:
            continue
        figure = plot(rows, b, split)
        body.append(part + (f"\n\n![accuracy vs wall time, DDPG returns]({figure})\n" if figure else ""))
    name = "fedgraph" if b == "paper" else f"fedgraph_{b}"
    recorded = store.commands(lambda row: row.get("budget") == b)
    unrecorded = any(r.get("budget") == b and not r.get("command") for r in rows)
    write_result(name, f"FedGraph: sampling baselines, sharing ablations, DDPG, heterogeneity (budget {b})",
                 "\n\n".join(body), cell_commands=recorded + (EARLIER_COMMANDS.get(b, []) if unrecorded else []))
    if failed:  # the tables above hold every cell that finished; the failed ones resume from their checkpoints
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


if __name__ == "__main__":
    main()
