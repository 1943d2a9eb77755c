"""The ServerApp: run config -> the method's Strategy, run through Flower's legacy server loop, with results
written to the output directory (config.json, rounds.jsonl, summary.json; see :mod:`flowergraph.results`)."""

from __future__ import annotations

import time
import traceback
from logging import ERROR, INFO
from pathlib import Path

from flwr.app import Context
from flwr.common.logger import log
from flwr.server import Grid, ServerApp, ServerConfig
from flwr.server.compat import start_grid

from .config import RunSettings, parse_run_config
from .polling import PollingGrid
from .results import RunRecorder


def resolve_out_dir(s: RunSettings, run_id: int | str = "") -> Path:
    if s.out_dir:
        return Path(s.out_dir).expanduser().resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = f"-{run_id}" if run_id else ""
    return Path("results").resolve() / f"{s.method}-{s.dataset}-{stamp}{suffix}"


def server_evaluate_fn(s: RunSettings):
    """Evaluate the global model on the global graph's test nodes (the server loads the dataset)."""
    from .tasks.federated_graph import load_global_graph
    from .tasks.models import build_node_model, set_weights
    from .tasks.training import evaluate_masks
    from .client_app import model_kwargs

    data = load_global_graph(s.graph_spec())
    model = build_node_model(in_dim=data.num_features, num_classes=data.num_classes, **model_kwargs(s))

    def evaluate(server_round, arrays):
        set_weights(model, arrays)
        r = evaluate_masks(model, lambda: model(data.x, data.edge_index), data.y, {"test": data.test_mask})
        return r["test_loss"], {"accuracy": r["test_accuracy"]}

    return evaluate


def build_strategy(s: RunSettings, recorder: RunRecorder | None = None):
    """The strategy for ``s.method`` with the run's settings."""
    from .strategies.weighted import WeightedAveraging

    evaluate_fn = server_evaluate_fn(s) if s.server_eval else None
    common = dict(num_rounds=s.rounds, evaluate_fn=evaluate_fn, recorder=recorder, fused_eval=s.fused_eval,
                  connect_timeout=s.round_timeout, round_timeout=s.round_timeout, eval_every=s.eval_every)
    if s.method == "centralized":
        return WeightedAveraging(num_clients=1, clients_per_round=1, **common)
    if s.method == "fedgcn":
        from .strategies.fedgcn import FedGCNStrategy

        return FedGCNStrategy(num_clients=s.num_clients, hops=s.hops, he=s.he, weighting=s.weighting,
                              fraction_fit=s.fraction_fit, fraction_evaluate=s.fraction_evaluate,
                              min_clients=s.min_clients or None, **common)
    if s.method in ("fedavg", "noop"):
        return WeightedAveraging(num_clients=s.num_clients, weighting=s.weighting, fraction_fit=s.fraction_fit,
                                 fraction_evaluate=s.fraction_evaluate, min_clients=s.min_clients or None,
                                 **common)
    raise AssertionError(f"method {s.method!r} passed validation but has no strategy")


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    s = parse_run_config(context.run_config)
    out_dir = resolve_out_dir(s, context.run_id)
    recorder = RunRecorder(out_dir, s.as_dict(), total_rounds=s.rounds, log=lambda line: log(INFO, "%s", line))
    log(INFO, "flowergraph: method=%s dataset=%s clients=%d rounds=%d -> results in %s", s.method, s.dataset,
        s.effective_num_clients, s.rounds, out_dir)
    if s.poll_interval > 0:
        grid = PollingGrid(grid, min_interval=min(0.002, s.poll_interval), max_interval=s.poll_interval)
    strategy = None
    try:
        strategy = build_strategy(s, recorder)
        start_grid(grid=grid, strategy=strategy,
                   config=ServerConfig(num_rounds=s.rounds, round_timeout=s.round_timeout))
        strategy.finish()
    except BaseException as exc:
        if strategy is not None:
            strategy.finish()  # rounds held back for fused evaluation are written, not lost
        recorder.finish("failed", error=f"{type(exc).__name__}: {exc}")
        log(ERROR, "flowergraph: run failed: %s\n%s", exc, traceback.format_exc())
        raise
    summary = recorder.finish("completed")
    log(INFO, "flowergraph: done; final accuracy %s; results in %s", summary.get("final_accuracy"), out_dir)
