"""FL-AGCNS's grid (``run.py`` is the command; its docstring says what each part and budget is): the datasets, variants,
budgets and splits of the cells, the architectures the authors published, the sources a cell's code state covers, a
cell's name (:func:`cell_name`) and run configuration (:func:`run_config`); with the paper's numbers and the rows'
labels. How a cell is computed is ``compute.py``; which cells a command asks for, ``run.py``'s ``plan``; the tables
``report.py`` and ``controls.py``."""

from __future__ import annotations

DATASETS = ("Cora", "CiteSeer")
VARIANTS = ("feo", "controller-eo", "client-eo", "random-partition")
# The fitness control (``--parts fitness``): FEO ranking by federated validation accuracy, as the authors' code does
# (``federal.py``: ``process_population`` and ``aggregate_accu``), instead of the paper's validation loss (FLL, Eq. 1)
# (``--parts ablation-accuracy``: the ablations so ranked); "<variant>-accuracy" -> (variant, fitness)
FITNESS_VARIANTS = {f"{v}-accuracy": (v, "accuracy") for v in VARIANTS}
FIXED = ("gcn", "gat", "sage", "sgc", "appnp")
# The selection control (``--parts finalists``): the search with ``flagcns.finalists`` = 5 (not the paper's rule):
# its 5 lowest-FLL networks are retrained and the best by federated validation accuracy is kept
FINALISTS = 5
FINALIST_VARIANTS = {"feo-finalists": "feo"}
PRE_FINALISTS = "5637e6d4d5889bf6"  # the sources' code state just before flagcns.finalists was added
# The structure-FC control (``--parts structure-fc``): FEO with one FC layer shared by the five input and by the five
# output structures (``flagcns.structure-fc=shared``: the authors' 2022 rework, and flowergraph before 2026-12-01)
# instead of one per option (the paper's Table 1 and their 2021 code, the default)
STRUCTURE_VARIANTS = {"feo-shared-fc": "feo"}
# The Adam control (``--parts adam``): FEO with ``flagcns.adam-scope=once-touched`` (the authors' 2021 code under torch
# 1.x: every SuperNet parameter trained once keeps being stepped) instead of only the parameters the step trains
ADAM_VARIANTS = {"feo-once-touched": "feo"}
# Search budgets: the presets' (module docstring; tests/test_flagcns.py checks each against its preset) and a tiny one
BUDGETS = {
    # conf/flagcns-*-warmup50.toml (called conf/flagcns-*-paper.toml until 2026-12-02): the stored "paper" cells
    "paper": {
        "flagcns.layers": 6,
        "flagcns.population": 60,
        "flagcns.sample-size": 20,
        "flagcns.epochs": 250,
        "flagcns.warmup": 50,
        "flagcns.steps-per-epoch": 5,
        "flagcns.retrain-epochs": 50,
    },
    # conf/flagcns-*-paper.toml: the paper's (all of P per step, no warm-up; fitness and pick by FLL)
    "paper-exact": {
        "flagcns.layers": 6,
        "flagcns.population": 60,
        "flagcns.sample-size": 60,
        "flagcns.epochs": 250,
        "flagcns.warmup": 0,
        "flagcns.steps-per-epoch": 5,
        "flagcns.retrain-epochs": 50,
    },
    # conf/flagcns-*-code2021.toml: the authors' 2021 code's (d360d44)
    "code2021": {
        "flagcns.layers": 6,
        "flagcns.population": 60,
        "flagcns.sample-size": 20,
        "flagcns.epochs": 250,
        "flagcns.warmup": 0,
        "flagcns.steps-per-epoch": 5,
        "flagcns.retrain-epochs": 50,
        "flagcns.fitness": "accuracy",
        "flagcns.final-pick": "accuracy",
        "flagcns.controller-crossover": 0.5,
        "flagcns.client-crossover": 0.5,
        "flagcns.gamma0": 0.5050505050505051,
    },
    "default": {
        "flagcns.layers": 6,
        "flagcns.population": 20,
        "flagcns.sample-size": 10,
        "flagcns.epochs": 40,
        "flagcns.warmup": 10,
        "flagcns.steps-per-epoch": 5,
        "flagcns.retrain-epochs": 50,
    },
    "quick": {
        "flagcns.layers": 3,
        "flagcns.population": 8,
        "flagcns.sample-size": 4,
        "flagcns.epochs": 4,
        "flagcns.warmup": 1,
        "flagcns.steps-per-epoch": 2,
        "flagcns.retrain-epochs": 10,
    },
}
DATA = {"num-clients": 3, "node.partitioner": "metis"}
# the 20 training nodes per class: at random (flowergraph's first choice) or the first ones (the authors' code)
SPLITS = {"per-class": "per-class:20/500/1000", "first-per-class": "first-per-class:20/500/1000", "public": "public"}
SPLIT_LABELS = {
    "first-per-class": "the authors' split: the first 20 nodes of each class train (on Cora the public "
    "training nodes), 500 validation and 1000 test nodes at random",
    "per-class": "20 random training nodes per class, 500 validation and 1000 test nodes at random",
    "public": "the Planetoid public split (20 training nodes per class, 500 validation, 1000 test), as the "
    "authors' code of the paper's time (2021) reads it: the same nodes on every seed",
}
# What a cell's seed draws, by split (pymetis gives seeds 0 and 1 the same partition of Cora and of CiteSeer, seeds 2
# and 7 others: checked 2026-12-01)
SEED_DRAWS = {
    "public": "its METIS partition, though seeds 0 and 1 share one, and its search; the public split is the "
    "same on every seed",
    "first-per-class": "its validation and test nodes, its METIS partition (seeds 0 and 1 share one) and its search",
    "per-class": "its split, its METIS partition (seeds 0 and 1 share one) and its search",
}
# The paper's Table 3 (FLACC %, parameters M, inference s) and Table 5 (Cora)
PAPER3 = {
    "Cora": {
        "FL-AGCNS": (82.9, 0.105, 0.0339),
        "FL-Random": (79.8, 0.113, 0.0335),
        "gat": (79.0, 0.092, 0.0262),
        "sage": (78.8, 0.184, 0.0294),
        "gcn": (81.3, 0.102, 0.0200),
        "sgc": (78.1, 0.010, 0.0152),
        "appnp": (82.2, 0.092, 0.0216),
    },
    "CiteSeer": {
        "FL-AGCNS": (70.6, 0.250, 0.0553),
        "FL-Random": (47.4, 0.296, 0.0916),
        "gat": (68.0, 0.238, 0.0612),
        "sage": (66.6, 0.475, 0.0920),
        "gcn": (68.6, 0.260, 0.0467),
        "sgc": (67.0, 0.022, 0.0381),
        "appnp": (69.5, 0.237, 0.0572),
    },
}
# Issue 72's acceptance targets for FL-AGCNS's mean FLACC (%): within 1 point of the authors' published architectures
# retrained here on Cora (80.1-80.5), and CiteSeer's; the collapse line per dataset (a chosen code retraining under it
# counts as the relu-on-logits collapse): Cora's 75 is the issue's, 4.3 points under its target; CiteSeer's is ours,
# its target less 5 points (every retraining of a chosen or published CiteSeer code is under the Cora line)
ACCEPTANCE = {"Cora": 79.3, "CiteSeer": 65.1}
COLLAPSE = {"Cora": 75.0, "CiteSeer": 60.0}


def collapse_label() -> str:
    """The collapse lines as a table heading names them: "Cora 75%, CiteSeer 60%"."""
    return ", ".join(f"{d} {line:g}%" for d, line in COLLAPSE.items())


PAPER5 = {
    "feo": (82.9, 0.105, 0.0339),
    "controller-eo": (71.6, 0.117, 0.0434),
    "client-eo": (78.6, 0.105, 0.0489),
    "random-partition": (52.6, 0.143, 0.0526),
}
LABELS = {
    "feo": "FL-AGCNS",
    "controller-eo": "ControllerEO (only the controller's EA: gamma = 0)",
    "client-eo": "ClientEO (only the clients' EAs: gamma = 1)",
    "random-partition": "RandomPartition (FEO on a random partition)",
    "gcn": "GCN",
    "gat": "GAT",
    "sage": "SAGE",
    "sgc": "SGC",
    "appnp": "APPNP",
    "random": "FL-Random",
    **{
        f"{v}-accuracy": f"{label}, ranked by validation accuracy (the authors' code)"
        for v, label in (
            ("feo", "FL-AGCNS"),
            ("controller-eo", "ControllerEO"),
            ("client-eo", "ClientEO"),
            ("random-partition", "RandomPartition"),
        )
    },
}
REFERENCE_LABELS = {
    "gcn": "GCN, authors' network",
    "gat": "GAT, authors' network",
    "sage": "SAGE, authors' network",
    "sgc": "SGC, authors' network",
    "appnp": "APPNP, authors' network",
}
# Table 3's rows: (label, cell kind, what a cell must match, the row's key in PAPER3)
TABLE3_ROWS = (
    [("FL-AGCNS", "search", {"variant": "feo"}, "FL-AGCNS"), ("FL-Random", "random", {}, "FL-Random")]
    + [(LABELS[n], "fixed", {"architecture_name": n}, n) for n in FIXED]
    + [(REFERENCE_LABELS[n], "reference", {"architecture_name": n}, n) for n in FIXED]
)
# The architectures the authors published (github 21S003018/FL-AGCNS, README "Example", written on 2022-06-19 with the
# rework, whose operations ours are; and one from the 2021 code's res.log, below), in their 8-integer supermask
# (input, layers 1-6 as 12 * predecessor + operation (1-based; 0 = unused), output): layer j reads layer
# (g - 1) // 12 (0 = the input structure), operation (g - 1) % 12 + 1 of models.py's y_1..y_12 (Table 1's order);
# input 1 = x_1 = relu(FC(64)), output 5 = identity. Translated here with the unused layers left out and the others
# renumbered in order; predecessors as the code intends them. (As their forward executes, layer 4-6's
# predecessor is found by list membership, ``g in [12k + 1, 12(k + 1)]``, so a layer 6 with gene 55 reads layer 5,
# not layer 4: that difference is not reproduced.) Leaves (their ``local_mask``): the layers no other layer reads.
PUBLISHED = {  # (dataset, key) -> (their supermask, its translation: input, layers, output)
    # README, Cora -> L1 APPNP(IS), L4 APPNP(IS), L5 APPNP(L4), L6 AGNN(L4); leaves L1, L5, L6
    ("Cora", "readme"): (
        "1 6 0 0 6 54 55 5",
        ("relu", (("APPNP", 0), ("APPNP", 0), ("APPNP", 2), ("AGNNConv", 2)), "identity"),
    ),
    # README, "the presented in paper" -> L1 APPNP(IS), L3 APPNP(IS), L4 APPNP(L3), L5 APPNP(L4), L6 AGNN(L4);
    # leaves L1, L5, L6
    ("Cora", "paper"): (
        "1 6 0 6 42 54 55 5",
        ("relu", (("APPNP", 0), ("APPNP", 0), ("APPNP", 2), ("APPNP", 3), ("AGNNConv", 3)), "identity"),
    ),
    # The 2021 code's own result file (res.log at d360d44, "agcns: ... --code 5 5 19 31 8 51 61 5 --dataset cora"):
    # a Cora architecture of the paper's time (which run it was, the file does not say), in the 2021 supermask, where
    # input 5 = x_5 = identity(FC) (the README codes above are the June-2022 rework's) -> L1 SGConv(IS), L2 AGNN(L1),
    # L3 AGNN(L2), L4 ARMA(IS), L5 SAGE(L4), L6 GAT(L5); the 2021 SonNet averages all six (fusion `all`). (As
    # their forward executes, gene 8 is in none of the lists it is compared with, so layer 4 reads layer 3.)
    ("Cora", "log2021"): (
        "5 5 19 31 8 51 61 5",
        (
            "identity",
            (("SGConv", 0), ("AGNNConv", 1), ("AGNNConv", 2), ("ARMAConv", 0), ("SAGEConv", 4), ("GATConv", 5)),
            "identity",
        ),
    ),
    # README, CiteSeer -> L1 GCN(IS), L2 APPNP(L1), L3 APPNP(L2), L4 APPNP(L3); leaf L4
    ("CiteSeer", "readme"): (
        "1 4 18 30 42 0 0 5",
        ("relu", (("GCNConv", 0), ("APPNP", 1), ("APPNP", 2), ("APPNP", 3)), "identity"),
    ),
}
# The modules that compute a cell's numbers (data, split, partition, the search, the strategy and the clients)
SOURCES = (
    "flowergraph/methods/flagcns/maths/*.py",
    "flowergraph/tasks/datasets.py",
    "flowergraph/tasks/splits.py",
    "flowergraph/tasks/partition.py",
    "flowergraph/tasks/federated_graph.py",
    "flowergraph/tasks/torch_state.py",
    "flowergraph/tasks/compute.py",
    "flowergraph/methods/flagcns/wire.py",
    "flowergraph/methods/flagcns/client.py",
    "flowergraph/methods/flagcns/server.py",
    "flowergraph/methods/flagcns/__init__.py",
    "flowergraph/strategies/base.py",
    "flowergraph/strategies/bank.py",
    "flowergraph/strategies/aggregation.py",
)
STORE = "flagcns"


def run_config(dataset: str, variant: str, budget: str, seed: int, split: str = "per-class") -> dict:
    """The run configuration of a search cell (without the machine's paths)."""
    b = BUDGETS[budget]
    base, fitness = FITNESS_VARIANTS.get(
        variant, ({**FINALIST_VARIANTS, **STRUCTURE_VARIANTS, **ADAM_VARIANTS}.get(variant, variant), None)
    )
    finalists = FINALISTS if variant in FINALIST_VARIANTS else 1
    config = {
        "method": "flagcns",
        "dataset": dataset,
        "seed": seed,
        **DATA,
        "node.split": SPLITS[split],
        **b,
        "flagcns.ablation": base,
        "rounds": b["flagcns.epochs"] * b["flagcns.steps-per-epoch"] + finalists * b["flagcns.retrain-epochs"],
    }
    if finalists > 1:
        config["flagcns.finalists"] = finalists
    if fitness is not None:
        config["flagcns.fitness"] = fitness
    if variant in STRUCTURE_VARIANTS:
        config["flagcns.structure-fc"] = "shared"
    if variant in ADAM_VARIANTS:
        config["flagcns.adam-scope"] = "once-touched"
    if base == "random-partition":
        config["node.partitioner"] = "random"
    return config


def cell_name(base: str, split: str) -> str:
    """A cell's name: the ``per-class`` split's cells keep the names they had before splits were a dimension."""
    return base if split == "per-class" else f"{base}-{split}"
