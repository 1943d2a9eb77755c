"""The ServerApp, in the style of Flower's quickstart: a flowergraph method is a strategy class with typed
arguments, started on the grid as Flower's own strategies are."""

import json
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from flowergraph.serverapp import FedAvg, FedGCN, FedStar, NodeTask

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    # This app's own run config (pyproject.toml): flowergraph reads none of it; the strategy's arguments are the
    # whole configuration, and flowergraph's clients are told them with every message.
    method = str(context.run_config["method"])
    num_rounds = int(context.run_config["num-server-rounds"])
    data = {"dataset": str(context.run_config["dataset"]), "data_dir": str(context.run_config["data-dir"])}
    if method == "fedgcn":
        strategy = FedGCN(hops=2, task=NodeTask(lr=0.5), **data)  # 2-hop: exact for its 2-layer GCN
    elif method == "fedstar":
        strategy = FedStar(**data)  # a TU dataset per client, e.g. dataset="MUTAG,PTC_MR,BZR"
    elif method == "fedavg":
        strategy = FedAvg(**data)
    else:
        raise ValueError(f"this example runs method 'fedgcn', 'fedstar' or 'fedavg', not {method!r}")
    # No initial arrays: flowergraph asks one client for its (seeded) model.
    result = strategy.start(grid=grid, num_rounds=num_rounds)
    accuracies = {r: m.get("accuracy") for r, m in result.evaluate_metrics_clientapp.items()}
    print(f"{method} on {data['dataset']}: test accuracy per round {accuracies}")
    results_file = str(context.run_config["results-file"])
    if results_file:
        Path(results_file).write_text(
            json.dumps(
                {
                    "method": method,
                    "dataset": data["dataset"],
                    "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
                    "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
                    "num_arrays": len(result.arrays),
                },
                indent=1,
            )
        )
