"""The ServerApp: run config -> the method's Strategy, run through Flower's legacy server loop, with results
written to the output directory (config.json, rounds.jsonl, summary.json; see :mod:`flowergraph.results`).

Checkpoints (``checkpoint-every``) and resuming (``resume-from``): see :mod:`flowergraph.checkpoint`. The
server loop is :class:`flowergraph.server.FlowergraphServer` (Flower's, able to start at round k + 1); a
resumed strategy starts from the checkpoint's arrays and state (``load_state_dict``) and re-runs its
one-off phases (FedGCN's communication phase: the clients' ``context.state`` is gone with the old run).
"""

from __future__ import annotations

import time
import traceback
from logging import ERROR, INFO
from pathlib import Path
from typing import Callable

from flwr.app import Context
from flwr.common.logger import log
from flwr.common import Parameters, parameters_to_ndarrays
from flwr.server import Grid, ServerApp, ServerConfig
from flwr.server.compat import start_grid

from .checkpoint import Checkpoint, check_resumable, checkpoint_file, load_checkpoint, save_checkpoint
from .config import RunSettings, parse_run_config
from .polling import PollingGrid
from .results import RunRecorder
from .server import FlowergraphServer


def resolve_out_dir(s: RunSettings, run_id: int | str = "", checkpoint: Checkpoint | None = None) -> Path:
    if s.out_dir:
        return Path(s.out_dir).expanduser().resolve()
    if checkpoint is not None and checkpoint.run_dir is not None:
        return checkpoint.run_dir
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


def build_strategy(s: RunSettings, recorder: RunRecorder | None = None, initial_arrays=None):
    """The strategy for ``s.method`` with the run's settings (``initial_arrays``: a checkpoint's global model)."""
    from .strategies.weighted import WeightedAveraging

    evaluate_fn = server_evaluate_fn(s) if s.server_eval else None
    common = dict(num_rounds=s.rounds, evaluate_fn=evaluate_fn, recorder=recorder, fused_eval=s.fused_eval,
                  connect_timeout=s.init_timeout, round_timeout=s.init_timeout, eval_every=s.eval_every,
                  seed=s.seed, initial_parameters=initial_arrays)
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


def resume_state(s: RunSettings) -> Checkpoint | None:
    """The checkpoint named by ``resume-from`` (CheckpointError for a missing/corrupt/incompatible one)."""
    if not s.resume_from:
        return None
    ckpt = load_checkpoint(s.resume_from)
    check_resumable(ckpt, s.as_dict())
    return ckpt


class Checkpointer:
    """The server's ``on_round_end`` hook: writes a checkpoint every ``every`` rounds and after the last."""

    def __init__(self, out_dir: Path, every: int, num_rounds: int, strategy, recorder: RunRecorder,
                 config: dict) -> None:
        self.out_dir, self.every, self.num_rounds = out_dir, every, num_rounds
        self.strategy, self.recorder, self.config = strategy, recorder, config
        self.written: list[Path] = []

    def __call__(self, server_round: int, parameters: Parameters) -> None:
        if self.every <= 0 or (server_round % self.every and server_round != self.num_rounds):
            return
        ckpt = Checkpoint(server_round=server_round, arrays=parameters_to_ndarrays(parameters),
                          strategy_state=self.strategy.state_dict(), records=[dict(r) for r in self.recorder.rounds],
                          config=self.config)
        path = save_checkpoint(ckpt, checkpoint_file(self.out_dir, server_round))
        self.written.append(path)
        log(INFO, "flowergraph: checkpoint after round %d: %s", server_round, path)


def serve(s: RunSettings, launch: Callable[[FlowergraphServer, ServerConfig], None], run_id: int | str = "") -> dict:
    """Run one configured experiment: results folder, strategy, checkpoints, resume; returns the summary.

    ``launch(server, config)`` runs Flower's server loop (the ServerApp: ``start_grid(grid=..., server=...)``;
    tests: an in-process client manager)."""
    ckpt = resume_state(s)
    out_dir = resolve_out_dir(s, run_id, ckpt)
    if ckpt is not None and (out_dir / "rounds.jsonl").exists() and out_dir != ckpt.run_dir:
        raise FileExistsError(f"out-dir {str(out_dir)!r} already holds the results of another run; resume into "
                              f"the checkpoint's own run folder or an empty out-dir")
    recorder = RunRecorder(out_dir, s.as_dict(), total_rounds=s.rounds, log=lambda line: log(INFO, "%s", line),
                           resume=ckpt is not None, records=ckpt.records if ckpt else None,
                           extra_meta={"resumed_from": str(ckpt.path), "resumed_at_round": ckpt.server_round}
                           if ckpt else None)
    log(INFO, "flowergraph: method=%s dataset=%s clients=%d rounds=%d -> results in %s", s.method, s.dataset,
        s.effective_num_clients, s.rounds, out_dir)
    if ckpt is not None:
        log(INFO, "flowergraph: resuming from %s (round %d)", ckpt.path, ckpt.server_round)
    strategy = None
    try:
        strategy = build_strategy(s, recorder, initial_arrays=ckpt.arrays if ckpt else None)
        if ckpt is not None:
            strategy.load_state_dict(ckpt.strategy_state)
        checkpointer = Checkpointer(out_dir, s.checkpoint_every, s.rounds, strategy, recorder, s.as_dict())
        server = FlowergraphServer(strategy=strategy, start_round=ckpt.server_round + 1 if ckpt else 1,
                                   on_round_end=checkpointer)
        launch(server, ServerConfig(num_rounds=s.rounds, round_timeout=s.round_timeout))
        strategy.finish()
    except BaseException as exc:
        if strategy is not None:
            strategy.finish()  # rounds held back for fused evaluation are written, not lost
        recorder.finish("failed", error=f"{type(exc).__name__}: {exc}")
        log(ERROR, "flowergraph: run failed: %s\n%s", exc, traceback.format_exc())
        raise
    summary = recorder.finish("completed")
    log(INFO, "flowergraph: done; final accuracy %s; results in %s", summary.get("final_accuracy"), out_dir)
    return summary


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    s = parse_run_config(context.run_config)
    if s.poll_interval > 0:
        grid = PollingGrid(grid, min_interval=min(0.002, s.poll_interval), max_interval=s.poll_interval)
    serve(s, lambda server, config: start_grid(grid=grid, server=server, config=config), context.run_id)
