"""FL-AGCNS's cells (``run.py``): how a cell of each kind is computed (the ``*_cell`` functions, :func:`compute_cell`)
from its settings in ``grid.py``: a search through flowergraph's real ServerApp and ClientApp code in one process,
FL-Random at the same wall time, the fixed and the authors' networks, the published architectures, the activation and
final-population controls, each retrained from scratch (:func:`retrain`), and the speed in Flower's simulation against
the no-op clients."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reproductions._runner.cells import prepare_run_dir  # noqa: E402
from reproductions._runner.common import data_dir  # noqa: E402
from reproductions.flagcns.grid import BUDGETS, DATA, PUBLISHED, SOURCES, cell_name, run_config  # noqa: E402
from benchmarks import noop_methods  # noqa: E402


def clients_of(config: dict) -> list:
    """The cell's three client graphs (as the run's clients build them)."""
    from flowergraph.data import node_graph
    from flowergraph.settings import parse_run_config

    s = parse_run_config({**config, "data-dir": data_dir()})
    return [node_graph(s, k) for k in range(s.num_clients)]


def space_of(config: dict):
    from flowergraph.methods.flagcns import space_of as space
    from flowergraph.settings import parse_run_config

    return space(parse_run_config({**config, "data-dir": data_dir()}))


def inference_seconds(space, code, graphs, state: dict | None = None, repeats: int = 10, net=None) -> float:
    """One evaluation forward over every client's subgraph (summed), median of ``repeats``; of ``code``'s network,
    or of ``net`` when given."""
    import torch

    from flowergraph.methods.flagcns.maths import ArchitectureNet
    from flowergraph.tasks import load_module_arrays

    if net is None:
        net = ArchitectureNet(space, code, graphs[0].num_features, graphs[0].num_classes, seed=0)
    if state:
        load_module_arrays(net, state)
    net.eval()
    times = []
    with torch.no_grad():
        for g in graphs:
            net(g.x, g.edge_index)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            for g in graphs:
                net(g.x, g.edge_index)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def retrain(space, code, graphs, epochs: int, retrains: int, network=None) -> dict:
    """``retrains`` federated retrainings from scratch (init seeds 0..R-1): FLACC of each (%), the parameters and
    the inference time of the first. Of ``code``'s network, or of ``network(seed)`` (a fresh network) when given."""
    from flowergraph.methods.flagcns.maths import federated_train_architecture, federated_train_network

    if network is None:
        results = [federated_train_architecture(space, code, graphs, epochs=epochs, seed=k) for k in range(retrains)]
    else:
        results = [federated_train_network(network(k), graphs, epochs=epochs, seed=k) for k in range(retrains)]
    accs = [100 * r.test_accuracy for r in results]
    return {
        "retrains": accs,
        "flacc": statistics.mean(accs),
        "flacc_std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
        "parameters": results[0].parameters,
        "best_epochs": [r.best_epoch for r in results],
        "inference_s": inference_seconds(
            space, code, graphs, results[0].best_state, net=None if network is None else network(0)
        ),
    }


def search_cell(
    work: Path, dataset: str, variant: str, budget: str, seed: int, retrains: int, split: str = "per-class"
) -> dict:
    from flowergraph.simulation import run_in_process
    from flowergraph.storage import read_run

    config = run_config(dataset, variant, budget, seed, split)
    out = work / cell_name(f"{dataset}-{variant}-{budget}-s{seed}", split)
    full = {
        **config,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "state-dir": str(out / "client-state"),
        "checkpoint-every": 25,
        "checkpoint-keep": 1,
    }
    state = prepare_run_dir(out, SOURCES)  # a run folder of other code is removed, never read back
    if state != "completed":
        if state == "resume":
            full["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
        started = time.perf_counter()
        run_in_process(full)
        meta = out / "bench.json"
        previous = json.loads(meta.read_text()) if meta.exists() else {}
        meta.write_text(json.dumps({"wall_s": previous.get("wall_s", 0.0) + time.perf_counter() - started}) + "\n")
    rounds = read_run(out)["rounds"]
    search_rounds = [r for r in rounds if r.get("stage") == "search"]
    result = rounds[-1]["flagcns"]["result"]
    gens = [r["flagcns"]["generation"] for r in search_rounds if "generation" in (r.get("flagcns") or {})]
    space, graphs = space_of(config), clients_of(config)
    code = tuple(result["architecture"])
    row = {
        "kind": "search",
        "dataset": dataset,
        "variant": variant,
        "budget": budget,
        "seed": seed,
        "split": split,
        "architecture": list(code),
        "describe": space.short(code),
        "fll": result["selection"]["fll"],
        "run_flacc": 100 * result["flacc"],
        "run_best_epoch": result["epoch"],
        "search_s": sum(r.get("time_s") or 0.0 for r in search_rounds),
        "curve": [[g["epoch"], g["best_fll"]] for g in gens if g.get("best_fll") is not None],
        "layers": len(space.layers(code)),
        "pick": result["selection"].get("pick", "fll"),
        "final_population": result["selection"].get("final_population"),
        **retrain(space, code, graphs, BUDGETS[budget]["flagcns.retrain-epochs"], retrains),
    }
    selection = result["selection"]
    if selection.get("rule") == "finalists":  # the paper's choice (the lowest FLL) from the same search, retrained too
        lowest = tuple(selection["candidates"][0]["code"])
        paper_rule = retrain(space, lowest, graphs, BUDGETS[budget]["flagcns.retrain-epochs"], retrains)
        row.update(
            {
                "selection_kept": selection["kept"],
                "by_fll": list(lowest),
                "by_fll_describe": space.short(lowest),
                "by_fll_flacc": paper_rule["flacc"],
                "by_fll_flacc_std": paper_rule["flacc_std"],
                "finalists": [
                    {
                        "architecture": c["code"],
                        "describe": c["describe"],
                        "fll": c["fll"],
                        "val": None if r is None else 100 * r["val_accuracy"],
                        "test": None if r is None else 100 * r["flacc"],
                    }
                    for c, r in zip(selection["candidates"], selection["retrained"])
                ],
            }
        )
    # the run's own retraining (init seed = the run's seed) is the reference retraining with that seed
    if seed < retrains and abs(row["retrains"][seed] - row["run_flacc"]) > 1e-6:
        raise RuntimeError(
            f"{dataset} {variant} seed {seed}: the Flower run's retraining gave FLACC "
            f"{row['run_flacc']:.4f}, the reference retraining {row['retrains'][seed]:.4f}"
        )
    return row


def random_cell(dataset: str, budget: str, seed: int, seconds: float, retrains: int, split: str = "per-class") -> dict:
    """FL-Random for ``seconds`` of wall time (the seed's FL-AGCNS search time)."""
    from flowergraph.methods.flagcns.maths import federated_train_architecture, new_rng

    config = run_config(dataset, "feo", budget, seed, split)
    space, graphs = space_of(config), clients_of(config)
    epochs = BUDGETS[budget]["flagcns.retrain-epochs"]
    rng = new_rng(seed, 0x2A)
    best, tried, start = None, 0, time.perf_counter()
    while time.perf_counter() - start < seconds or tried == 0:
        code = space.sample(rng)
        r = federated_train_architecture(space, code, graphs, epochs=epochs, seed=seed)
        tried += 1
        if best is None or r.val_accuracy > best[1]:
            best = (code, r.val_accuracy)
    code = best[0]
    return {
        "kind": "random",
        "dataset": dataset,
        "budget": budget,
        "seed": seed,
        "split": split,
        "architecture": list(code),
        "describe": space.short(code),
        "val_accuracy": 100 * best[1],
        "tried": tried,
        "budget_s": seconds,
        "used_s": time.perf_counter() - start,
        "layers": len(space.layers(code)),
        **retrain(space, code, graphs, epochs, retrains),
    }


def fixed_cell(dataset: str, name: str, budget: str, seed: int, retrains: int, split: str = "per-class") -> dict:
    from flowergraph.methods.flagcns.maths import baseline_code

    config = run_config(dataset, "feo", budget, seed, split)
    space, graphs = space_of(config), clients_of(config)
    code = baseline_code(name, space)
    return {
        "kind": "fixed",
        "dataset": dataset,
        "architecture_name": name,
        "seed": seed,
        "budget": budget,
        "split": split,
        "architecture": list(code),
        "describe": space.short(code),
        **retrain(space, code, graphs, BUDGETS[budget]["flagcns.retrain-epochs"], retrains),
    }


def reference_cell(dataset: str, name: str, budget: str, seed: int, retrains: int, split: str) -> dict:
    """The authors' network ``name`` (``methods/flagcns/maths/baselines.py``), retrained like the searched
    architecture."""
    from flowergraph.methods.flagcns.maths import reference_baseline

    graphs = clients_of(run_config(dataset, "feo", budget, seed, split))
    features, classes = graphs[0].num_features, graphs[0].num_classes
    return {
        "kind": "reference",
        "dataset": dataset,
        "architecture_name": name,
        "seed": seed,
        "budget": budget,
        "split": split,
        **retrain(
            None,
            None,
            graphs,
            BUDGETS[budget]["flagcns.retrain-epochs"],
            retrains,
            network=lambda k: reference_baseline(name, features, classes, seed=k),
        ),
    }


def published_cell(dataset: str, key: str, fusion: str, budget: str, seed: int, retrains: int, split: str) -> dict:
    """The authors' published architecture ``(dataset, key)`` (:data:`PUBLISHED`) with stage 2 fused by ``fusion``,
    retrained like the searched architecture."""
    from flowergraph.methods.flagcns.maths import code_from_layers

    config = {**run_config(dataset, "feo", budget, seed, split), "flagcns.fusion": fusion}
    space, graphs = space_of(config), clients_of(config)
    code = code_from_layers(space, *PUBLISHED[(dataset, key)][1])
    return {
        "kind": "published",
        "dataset": dataset,
        "published": key,
        "fusion": fusion,
        "seed": seed,
        "budget": budget,
        "split": split,
        "architecture": list(code),
        "describe": space.short(code),
        **retrain(space, code, graphs, BUDGETS[budget]["flagcns.retrain-epochs"], retrains),
    }


def by_activation(space, code, graphs, epochs: int, retrains: int, position: int) -> dict:
    """``code`` retrained with every activation at gene ``position`` (0: the input structure, -1: the output
    structure): FLACC over the retrainings per activation."""
    from flowergraph.methods.flagcns.maths import ACTIVATIONS, federated_train_architecture

    out = {}
    for i, act in enumerate(ACTIVATIONS):
        c = list(code)
        c[position] = i
        accs = [
            100 * federated_train_architecture(space, tuple(c), graphs, epochs=epochs, seed=k).test_accuracy
            for k in range(retrains)
        ]
        out[act] = {
            "retrains": accs,
            "flacc": statistics.mean(accs),
            "flacc_std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
        }
    return out


def gene_cell(dataset: str, budget: str, seed: int, retrains: int, split: str, code: list[int], gene: str) -> dict:
    """The searched ``code`` retrained with every activation at its ``gene``: ``output`` (the last gene) or
    ``input`` (the first)."""
    from flowergraph.methods.flagcns.maths import ACTIVATIONS

    position = {"input": 0, "output": -1}[gene]
    config = run_config(dataset, "feo", budget, seed, split)
    space, graphs = space_of(config), clients_of(config)
    return {
        "kind": f"{gene}s",
        "dataset": dataset,
        "budget": budget,
        "seed": seed,
        "split": split,
        "architecture": list(code),
        "describe": space.short(tuple(code)),
        f"chosen_{gene}": ACTIVATIONS[code[position]],
        f"by_{gene}": by_activation(space, code, graphs, BUDGETS[budget]["flagcns.retrain-epochs"], retrains, position),
    }


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation of ``xs`` and ``ys`` (average ranks for ties; pairs with a non-finite value left
    out); None with fewer than 3 pairs or a constant side."""
    import math

    from scipy.stats import spearmanr

    pairs = [
        (x, y) for x, y in zip(xs, ys) if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
    ]
    if len(pairs) < 3 or len({x for x, _ in pairs}) < 2 or len({y for _, y in pairs}) < 2:
        return None
    return float(spearmanr([x for x, _ in pairs], [y for _, y in pairs]).statistic)


def population_cell(dataset: str, budget: str, seed: int, retrains: int, split: str, members: list[dict]) -> dict:
    """The seed's search's final population (``members``: code, FLL, SuperNet validation accuracy, as its selection
    record lists them), every distinct network retrained ``retrains`` times (init seeds 0..R-1): FLACC per member
    and the Spearman correlations of FLL and of the SuperNet's validation accuracy with it."""
    config = run_config(dataset, "feo", budget, seed, split)
    space, graphs = space_of(config), clients_of(config)
    epochs = BUDGETS[budget]["flagcns.retrain-epochs"]
    seen, rows = set(), []
    for m in members:
        code = space.check(m["code"])
        if space.canonical(code) in seen:
            continue
        seen.add(space.canonical(code))
        r = retrain(space, code, graphs, epochs, retrains)
        rows.append(
            {
                "architecture": list(code),
                "fll": m["fll"],
                "val_accuracy": m["val_accuracy"],
                "retrains": r["retrains"],
                "flacc": r["flacc"],
            }
        )
    flacc = [r["flacc"] for r in rows]
    return {
        "kind": "population",
        "dataset": dataset,
        "budget": budget,
        "seed": seed,
        "split": split,
        "members": rows,
        "distinct": len(rows),
        "population": len(members),
        "population_retrains": retrains,
        "spearman_fll": spearman([r["fll"] for r in rows], flacc),
        "spearman_val_accuracy": spearman([r["val_accuracy"] for r in rows], flacc),
    }


def speed_cell(budget: str, method: str, epochs: int) -> dict:
    """``epochs`` epochs (1 warm-up) of ``method`` in Flower's simulation; times per round and per generation."""
    from flowergraph.simulation import run_simulation
    from flowergraph.storage import read_run

    noop_methods.enable()  # flagcns-noop, in this process and the simulation's
    b = {**BUDGETS[budget], "flagcns.epochs": epochs, "flagcns.warmup": 1, "flagcns.retrain-epochs": 1}
    rounds = epochs * b["flagcns.steps-per-epoch"] + 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / method
        result = run_simulation(
            method,
            num_clients=3,
            rounds=rounds,
            dataset="Cora",
            out=out,
            overrides={**DATA, **b, "data-dir": data_dir(), "seed": 0},
            timeout=3600,
        )
        if not result.ok:
            sys.exit(f"{method} simulation failed; see {result.log_file}")
        records = [r for r in read_run(out)["rounds"] if r.get("round", 0) >= 1]
    steps = b["flagcns.steps-per-epoch"]
    per_epoch: dict[int, float] = {}
    feo: list[float] = []
    for r in records:
        f = r.get("flagcns") or {}
        if r.get("stage") == "search":
            per_epoch[f["epoch"]] = per_epoch.get(f["epoch"], 0.0) + r["time_s"]
            if "flagcns-feo" in (r.get("phases") or {}):
                feo.append(r["phases"]["flagcns-feo"]["time_s"])
    generations = [per_epoch[t] for t in sorted(per_epoch) if t > 1]
    steps_s = [
        r["time_s"]
        for r in records
        if r.get("stage") == "search"
        and (r.get("flagcns") or {}).get("step") not in (None, steps)
        and (r["flagcns"]["epoch"] > 1)
    ]
    return {
        "kind": "speed",
        "budget": budget,
        "method": method,
        "epochs": epochs,
        "wall_s": result.wall_time_s,
        "generation_s": statistics.median(generations),
        "generations": generations,
        "warmup_epoch_s": per_epoch.get(1),
        "step_s": statistics.median(steps_s) if steps_s else None,
        "feo_s": statistics.median(feo) if feo else None,
        "population": b["flagcns.population"],
        "sample": b["flagcns.sample-size"],
        "layers": b["flagcns.layers"],
    }


def compute_cell(name: str, fn, args: tuple) -> dict:
    """Cell ``name``'s row, ``fn(*args)`` (one of the ``*_cell`` functions above), and the seconds it took here
    (``cell_s``)."""
    started = time.perf_counter()
    row = fn(*args)
    row["cell_s"] = time.perf_counter() - started
    return row
