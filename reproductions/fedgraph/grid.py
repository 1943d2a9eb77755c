"""FedGraph's benchmark grid and cell runner (``reproductions/fedgraph/run.py`` is the command; its docstring says what
each variant and part is): which cells exist (:func:`cells`), their names and run configurations, and how one is
computed (:func:`run_cell`: one FedGraph run in process; :func:`layers_cell`: the FastGCN layer-size control). The
tables and figures are ``report.py``, ``learning.py`` and ``figures.py``."""

from __future__ import annotations

import time
from pathlib import Path

from reproductions._runner.cells import prepare_run_dir  # noqa: E402
from reproductions._runner.common import data_dir  # noqa: E402

DATASETS = ("Cora", "CiteSeer")
VARIANTS = (
    "fedgraph",
    "fedgraph-work",
    "fedgraph-client",
    "fedgraph-work-lambda",
    "fedgraph-work-td3",
    "fedgraph-work-floor",
    "fixed",
    "full",
    "graphsage",
    "fastgcn",
    "nonshare",
    "allshare",
    "one-round",
)
# the DDPG agent with eq. 9's delta as the server's clock (the paper), the largest client work (deterministic) or
# the slowest client's local training time (fedgraph.round-time)
# and two tests of DDPG's late relapses on the work-rewarded agent (not in the paper): TD3's update rule, and a
# floor of 0.1 under the exploration noise (the relapses came when sigma had decayed below 0.05)
DDPG_VARIANTS = (
    "fedgraph",
    "fedgraph-work",
    "fedgraph-client",
    "fedgraph-work-lambda",
    "fedgraph-work-td3",
    "fedgraph-work-floor",
)
WORK_VARIANTS = ("fedgraph-work", "fedgraph-work-lambda", "fedgraph-work-td3", "fedgraph-work-floor")
RELAPSE_TESTS = ("fedgraph-work-td3", "fedgraph-work-floor")
RELAPSE_VARIANTS = ("fedgraph-work",) + RELAPSE_TESTS  # the stability table's rows
PAPER_TARGET = {"Cora": 0.9016, "CiteSeer": 0.879}  # the paper's Lambda (Fig. 6's runs), fedgraph-work-lambda
# The commands that computed the cells stored before a cell recorded its command (from the results files they
# wrote and docs/methods/fedgraph.md), so that a table rewritten with --tables-only still says how its numbers came;
# as they were typed then, when this reproduction was benchmarks/fedgraph.py.
EARLIER_COMMANDS = {
    "default": [
        ".venv/bin/python benchmarks/fedgraph.py --budget default --split full-supervised --variants fedgraph "
        "fedgraph-work fedgraph-client fixed full graphsage fastgcn nonshare allshare one-round --rerun-stale",
        ".venv/bin/python benchmarks/fedgraph.py --budget default --split public --parts main --variants "
        "fedgraph fixed full graphsage fastgcn nonshare allshare one-round --rerun-stale",
    ],
    "paper": [
        ".venv/bin/python benchmarks/fedgraph.py --budget paper --datasets Cora --seeds 0 --variants fedgraph "
        "fixed full --vars 0.1 --parts main --rerun-stale"
    ],
    "learning": [
        ".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets Cora --seeds 0 1 2 --variants "
        "fedgraph fedgraph-work fedgraph-client --vars 0.1 --parts main",
        ".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets CiteSeer --variants "
        "fedgraph-work --seeds 0 1 --vars 0.1 --parts main",
        ".venv/bin/python benchmarks/fedgraph.py --budget learning --datasets CiteSeer --variants fedgraph "
        "--seeds 0 --vars 0.1 --parts main",
    ],
}
AGENT_VARIANTS = DDPG_VARIANTS + ("one-round",)  # episodes restart training: curves of the last one
VARS = (0.1, 0.5, 1.0)
BUDGETS = {
    "paper": {"num-clients": 20, "rounds": 300, "fedgraph.episode-rounds": 30},
    "default": {"num-clients": 5, "rounds": 30, "fedgraph.episode-rounds": 10},
    "quick": {"num-clients": 3, "rounds": 6, "fedgraph.episode-rounds": 3},
    # the agent over many episodes (the paper trains 300 and sees its returns converge within 100: Fig. 6): the
    # default budget's clients and 10-round episodes, 150 episodes
    "learning": {"num-clients": 5, "rounds": 1500, "fedgraph.episode-rounds": 10},
}
SETTINGS = {
    "method": "fedgraph",
    "node.model": "gcn",
    "node.hidden": 16,
    "node.layers": 2,
    "node.dropout": 0.5,
    "fedgraph.data": "synthesis",
    "fedgraph.lr": 0.01,
    "fedgraph.batch-size": 256,
    "fedgraph.omega": 128.0,
    "fedgraph.pca-components": 20,
    "fedgraph.target-accuracy": 0.8,
}
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
SOURCES = (
    "flowergraph/methods/fedgraph/maths/*.py",
    "flowergraph/tasks/datasets.py",
    "flowergraph/tasks/splits.py",
    "flowergraph/tasks/partition.py",
    "flowergraph/tasks/federated_graph.py",
    "flowergraph/tasks/models.py",
    "flowergraph/tasks/training.py",
    "flowergraph/methods/fedgraph/wire.py",
    "flowergraph/methods/fedgraph/client.py",
    "flowergraph/methods/fedgraph/server.py",
    "flowergraph/methods/fedgraph/__init__.py",
    "flowergraph/strategies/base.py",
    "flowergraph/strategies/updates.py",
    "flowergraph/strategies/phases.py",
)
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


def cell_name(
    dataset: str, variant: str, var: float, budget: str, seed: int, split: str, data: str = "synthesis"
) -> str:
    where = f"v{var}" if data == "synthesis" else data
    return f"{dataset}-{variant}-{where}-{budget}-s{seed}" + ("" if split == "public" else f"-{split}")


def run_config(
    dataset: str, variant: str, var: float, budget: str, seed: int, split: str = "public", data: str = "synthesis"
) -> dict:
    """The run configuration of a cell (without the machine's paths)."""
    config = {
        **SETTINGS,
        **BUDGETS[budget],
        "dataset": dataset,
        "seed": seed,
        "fedgraph.var": var,
        **{k: v[dataset] if isinstance(v, dict) else v for k, v in VARIANT_KEYS[variant].items()},
    }
    if SPLITS[split][dataset] is not None:
        config["node.split"] = SPLITS[split][dataset]
    if data != "synthesis":
        config["fedgraph.data"] = data
    return config


def cross_fraction(graphs) -> float:
    """Fraction of the clients' edge ends whose other end another client holds (cross-client edges over all)."""
    cross = sum(int(g.cross_edges.shape[1]) for g in graphs)
    return cross / max(1, cross + sum(int(g.edge_index.shape[1]) for g in graphs))


def _microseconds(seconds: float | None) -> float | None:
    """A measured time (s) to the microsecond, or None where the round has none."""
    return None if seconds is None else round(float(seconds), 6)


def run_cell(
    work: Path,
    dataset: str,
    variant: str,
    var: float,
    budget: str,
    seed: int,
    split: str = "public",
    data: str = "synthesis",
) -> dict:
    from flowergraph.simulation import run_in_process
    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.storage import read_run

    config = run_config(dataset, variant, var, budget, seed, split, data)
    out = work / cell_name(dataset, variant, var, budget, seed, split, data)
    full = {
        **config,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "state-dir": str(out / "client-state"),
        "checkpoint-every": 100 if budget == "learning" else 10,
        "checkpoint-keep": 1,
    }
    state = prepare_run_dir(out, SOURCES)  # a run folder of other code is removed, never read back
    if state != "completed":
        if state == "resume":
            full["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
        run_in_process(full)
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    # per round: round, the run's clock (s), accuracy, episode, the largest client work (GMAC) and the slowest
    # client's local training time (s) of the round; the two measured times are kept to the microsecond (their
    # further digits are timer noise and were most of the packed archive's bytes)
    curve = [
        [
            r["round"],
            _microseconds(r.get("elapsed_s") or 0.0),
            r.get("accuracy"),
            (r.get("fedgraph") or {}).get("episode", 1),
            (r.get("fedgraph") or {}).get("max_gmacs"),
            _microseconds((r.get("fedgraph") or {}).get("slowest_client_s")),
        ]
        for r in rounds
    ]
    returns = [(r.get("fedgraph") or {}).get("episode_return") for r in rounds]
    s = parse_run_config({**config, "data-dir": data_dir()})
    graphs = [client_graph_of(s, k) for k in range(s.num_clients)]
    sizes = [int(g.num_nodes) for g in graphs]
    last = rounds[-1].get("fedgraph") or {}
    # every round's policies (kappa, p per convolution) per client: what the agent chose, for the learning table
    trace = (
        [
            [[int(k), *[round(float(x), 3) for x in ps]] for k, ps in (r.get("fedgraph") or {}).get("policies") or []]
            for r in rounds
        ]
        if variant in DDPG_VARIANTS
        else None
    )
    return {
        "kind": "run",
        "dataset": dataset,
        "variant": variant,
        "var": var,
        "budget": budget,
        "seed": seed,
        "split": split,
        "data": data,
        "cross_fraction": cross_fraction(graphs),
        "labelled": [int(g.train_mask.sum()) for g in graphs],
        "curve": curve,
        "returns": [r for r in returns if r is not None],
        "client_nodes": sizes,
        "last_policies": last.get("policies"),
        "final_accuracy": curve[-1][2],
        "policy_trace": trace,
        "bytes": sum(int(r.get("bytes_down", 0)) + int(r.get("bytes_up", 0)) for r in rounds),
    }


def compute_cell(
    work: Path, dataset: str, variant: str, var: float, budget: str, seed: int, split: str, data: str
) -> dict:
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
    from flowergraph.methods.fedgraph.maths import FullBatch, LayerWise, build_model, build_view, evaluate, train_round
    from flowergraph.methods.fedgraph.maths import PAPER_TRAIN

    s = parse_run_config({**run_config(dataset, "full", 0.1, "default", seed, split), "data-dir": data_dir()})
    graph = client_graph_of(s, 0)
    view = build_view(graph)
    schemes = [("full", FullBatch())] + [(f"fastgcn-{t}", LayerWise(batch_size=256, layer_size=t)) for t in LAYER_SIZES]
    out = {}
    for name, scheme in schemes:
        model = build_model(graph.x.shape[1], graph.num_classes, seed=seed)
        generator = torch.Generator().manual_seed(seed)
        losses = [
            train_round(model, view, scheme, "nonshare", None, PAPER_TRAIN, generator).loss for _ in range(rounds)
        ]
        metrics = evaluate(model, view, "nonshare")
        out[name] = {"test_accuracy": float(metrics["test_accuracy"]), "last_loss": float(losses[-1])}
    return {
        "kind": "layers",
        "dataset": dataset,
        "seed": seed,
        "split": split,
        "budget": "default",
        "client_nodes": int(graph.num_nodes),
        "labelled": [int(graph.train_mask.sum())],
        "rounds": rounds,
        "results": out,
    }


def layers_name(dataset: str, seed: int, split: str) -> str:
    """The name of a FastGCN layer-size control cell (:func:`layers_cell`)."""
    return f"{dataset}-fastgcn-layers-s{seed}-{split}"


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
