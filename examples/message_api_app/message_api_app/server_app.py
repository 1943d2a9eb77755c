"""The ServerApp: a flowergraph method as a Message-API strategy, started as Flower's own strategies are."""

import json
from pathlib import Path

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp

from flowergraph.app.message_server import FlowergraphStrategy

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = dict(context.run_config)
    results_file = str(config.pop("results-file", ""))
    # Validates every key with flowergraph's messages (a bad value names the valid choices) and builds the
    # method's strategy: FedGCN's neighbour exchange, FedStar's structure-encoder sharing, ... run inside start().
    strategy = FlowergraphStrategy.from_run_config(config)
    # No initial arrays: flowergraph asks one client for its freshly built model (as its own ServerApp does).
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=int(config["rounds"]), timeout=600)
    accuracies = {r: m.get("accuracy") for r, m in result.evaluate_metrics_clientapp.items()}
    print(f"{config['method']} on {config['dataset']}: test accuracy per round {accuracies}")
    if results_file:
        Path(results_file).write_text(
            json.dumps(
                {
                    "method": config["method"],
                    "dataset": config["dataset"],
                    "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
                    "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
                    "num_arrays": len(result.arrays),
                },
                indent=1,
            )
        )
