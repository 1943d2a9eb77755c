"""The ServerApp: run config -> the method's core strategy (looked up in the method registry), run by Flower's
Message API (:class:`flowergraph.app.message_server.FlowergraphStrategy`; the legacy adapter,
:mod:`flowergraph.app.loop`, for ``secure-agg=secagg+`` or ``flower-api=legacy``), with results written to the
output directory (config.json, rounds.jsonl, summary.json; see :mod:`flowergraph.storage.results`).

Checkpoints (``checkpoint-every``) and resuming (``resume-from``): see :mod:`flowergraph.storage.checkpoint`. Both
faces' loops start at round k + 1 of a resumed run. At a
checkpoint, a method whose clients keep state first asks every client to save its ``context.state`` to its
node-local ``state-dir``; a resumed strategy starts from the checkpoint's arrays and state
(``load_state_dict``) and asks every client to load its saved state back before anything else, so one-off
phases (FedGCN's exchange) are not run again.

Privacy of the training rounds: with ``dp`` the strategy is wrapped in a DP wrapper
(:mod:`flowergraph.strategies.dp`); with ``secure-agg=secagg+`` each training round runs through Flower's
``SecAggPlusWorkflow`` (:func:`flowergraph.app.loop.secagg_workflow`) inside the legacy server loop;
``secure-agg=ckks`` is the strategy's own (:mod:`flowergraph.strategies.secure`).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from logging import ERROR, INFO
from pathlib import Path
from typing import Any, Callable, NoReturn

import numpy as np
from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from ..settings.plan import RunPlan
from ..storage.checkpoint import Checkpoint, checkpoint_file, prune_rounds, save_checkpoint
from ..settings import RunSettings, parse_run_config
from ..errors import ClientProcessDied, FlowergraphError
from .polling import PollingGrid
from ..storage.results import RunRecorder
from .run_strategy import build_strategy
from ..tasks.compute import configure_torch


def resume_state(s: RunSettings) -> Checkpoint | None:
    """The checkpoint named by ``resume-from`` (CheckpointError for a missing/corrupt/incompatible one)."""
    return RunPlan.of(s).checkpoint


class Checkpointer:
    """The server's ``on_round_end`` hook: writes a checkpoint every ``every`` rounds and after the last (first
    the clients' state, when the method's clients keep some, then the server's); with ``keep`` > 0 it then
    deletes its checkpoints older than the newest ``keep`` (the clients prune their own files:
    :class:`flowergraph.clients.retention.KeepNewestStates`)."""

    def __init__(
        self, out_dir: Path, every: int, num_rounds: int, strategy, recorder: RunRecorder, config: dict, keep: int = 0
    ) -> None:
        self.out_dir, self.every, self.num_rounds, self.keep = out_dir, every, num_rounds, keep
        self.strategy, self.recorder, self.config = strategy, recorder, config
        self.federation = None  # set by the face that runs: its nodes, for the client checkpoint phase
        self.written: list[Path] = []

    def __call__(self, server_round: int, arrays: list[np.ndarray] | None) -> None:
        if self.every <= 0 or (server_round % self.every and server_round != self.num_rounds):
            return
        if self.federation is not None:
            self.strategy.checkpoint_clients(server_round, self.federation)
        model = self.strategy.global_arrays  # the strategy's model (a new stage's, even before it aggregates)
        ckpt = Checkpoint(
            server_round=server_round,
            arrays=list(model) if model is not None else list(arrays or []),
            strategy_state=self.strategy.state_dict(),
            records=[dict(r) for r in self.recorder.rounds],
            config=self.config,
        )
        path = save_checkpoint(ckpt, checkpoint_file(self.out_dir, server_round))
        self.written.append(path)
        log(INFO, "flowergraph: checkpoint after round %d: %s", server_round, path)
        for old in prune_rounds(path.parent, self.keep, server_round):
            log(INFO, "flowergraph: checkpoint-keep=%d: deleted %s", self.keep, old)


@dataclass
class ServerRun:
    """What a face runs (:func:`serve` hands it to ``launch``): the core ``strategy`` (DP-wrapped when the run
    says), the round to start at (> 1: resumed), the run's rounds and round timeout, and the per-round hook
    ``on_round_end(round, arrays)`` (the :class:`Checkpointer`, whose ``federation`` the face sets)."""

    strategy: Any
    start_round: int
    num_rounds: int
    round_timeout: float | None
    on_round_end: Checkpointer


def serve(s: RunSettings, launch: Callable[[ServerRun], None], run_id: int | str = "") -> dict:
    """Run one configured experiment: results folder, strategy, checkpoints, resume; returns the summary.

    ``launch(run)`` runs a face's loop on the :class:`ServerRun` (the ServerApp: the Message API's, or Flower's
    legacy loop; tests: an in-process federation)."""
    plan = RunPlan.of(s, run_id)  # the results folder and the checkpoint to resume, as the launchers decide them
    ckpt, out_dir = plan.checkpoint, plan.out_dir
    recorder = RunRecorder(
        out_dir,
        s.as_dict(),
        total_rounds=s.rounds,
        log=lambda line: log(INFO, "%s", line),
        resume=ckpt is not None,
        records=ckpt.records if ckpt else None,
        extra_meta={"resumed_from": str(ckpt.path), "resumed_at_round": ckpt.server_round} if ckpt else None,
    )
    log(
        INFO,
        "flowergraph: method=%s dataset=%s clients=%d rounds=%d -> results in %s",
        s.method,
        s.dataset,
        s.effective_num_clients,
        s.rounds,
        out_dir,
    )
    if ckpt is not None:
        log(INFO, "flowergraph: resuming from %s (round %d)", ckpt.path, ckpt.server_round)
    strategy = checkpointer = None
    try:
        strategy = build_strategy(s, recorder, initial_arrays=ckpt.arrays if ckpt else None)
        if ckpt is not None:
            strategy.load_state_dict(ckpt.strategy_state)
        checkpointer = Checkpointer(
            out_dir, s.checkpoint_every, s.rounds, strategy, recorder, s.as_dict(), keep=s.checkpoint_keep
        )
        start_round = ckpt.server_round + 1 if ckpt else 1
        launch(ServerRun(strategy, start_round, s.rounds, s.round_timeout, checkpointer))
        strategy.finish()
    except BaseException as caught:
        exc = caught
        if isinstance(exc, ClientProcessDied):  # say how to go on from here
            hint = resume_hint(
                checkpointer.written if checkpointer else [], out_dir, getattr(strategy, "client_checkpoint", None)
            )
            exc = ClientProcessDied(f"{exc}. {hint}", exc.server_round, exc.clients)
        if strategy is not None:
            strategy.finish()  # rounds held back for fused evaluation are written, not lost
        recorder.finish("failed", error=f"{type(exc).__name__}: {exc}")
        trace = "" if isinstance(exc, FlowergraphError) else "\n" + traceback.format_exc()  # bad input: its message
        log(ERROR, "flowergraph: run failed: %s%s", exc, trace)
        exc.flowergraph_logged = True  # type: ignore[attr-defined]
        if exc is caught:
            raise
        raise exc from None
    summary = recorder.finish("completed")
    log(INFO, "server done; results in %s", out_dir)  # not a progress line: the launcher prints where results are
    return summary


def resume_hint(written: list[Path], out_dir: Path, client_checkpoint: dict | None = None) -> str:
    """How to continue a run that stopped early: from its newest checkpoint whose client state files are all
    there (``client_checkpoint``: the strategy's record of the newest one), or (none) from the start."""
    written = list(written)
    incomplete = ""
    if written and client_checkpoint and client_checkpoint.get("missing"):  # some clients could not save
        incomplete = (
            f"The checkpoint {written[-1]} lacks the state of client(s) "
            f"{', '.join(map(str, client_checkpoint['missing']))}. "
        )
        written = written[:-1]
    if not written:
        return incomplete + (
            "No usable checkpoint was written: run it again from the start, with "
            "checkpoint-every=N to make it resumable"
        )
    last = written[-1]
    how = (
        f"`python -m flowergraph.simulation --resume {out_dir}`"
        if not incomplete
        else f"`python -m flowergraph.simulation --resume {last}`"
    )
    return (
        f'{incomplete}Resume from the last checkpoint ({last}): {how}, or run config resume-from="{last}" '
        f"with the run's other settings"
    )


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    try:
        s = parse_run_config(context.run_config)  # the launchers' own check: the same messages
    except FlowergraphError as exc:
        refuse(exc)
    configure_torch(threads=None)  # denormals flushed where the server aggregates or trains
    if s.poll_interval > 0:
        grid = PollingGrid(grid, min_interval=min(0.002, s.poll_interval), max_interval=s.poll_interval)

    def launch(run: ServerRun) -> None:
        if s.face == "message":  # the core, run by the Message API
            from .message_server import FlowergraphStrategy

            face = FlowergraphStrategy(run.strategy)
            run.on_round_end.federation = face.nodes_for(grid)  # the client-checkpoint phase goes to the grid's nodes
            face.start(
                grid,
                None,
                num_rounds=run.num_rounds,
                timeout=run.round_timeout or 3600.0,
                start_round=run.start_round,
                on_round_end=run.on_round_end,
            )
            return
        from .loop import run_legacy  # the legacy adapter (SecAgg+ runs only there)

        run_legacy(
            grid,
            run.strategy,
            num_rounds=run.num_rounds,
            round_timeout=run.round_timeout,
            start_round=run.start_round,
            on_round_end=run.on_round_end,
            checkpointer=run.on_round_end,
            settings=s,
        )

    try:
        serve(s, launch, context.run_id)
    except FlowergraphError as exc:  # Flower marks the run failed
        if not getattr(exc, "flowergraph_logged", False):  # refused before the run started (e.g. resume-from)
            refuse(exc)
        raise exc.with_traceback(None) from None
    finally:
        from ..tasks.compute import remove_generated_sources

        remove_generated_sources()


def refuse(exc: BaseException) -> NoReturn:
    """End the run on bad input: one ERROR line with the reason (the message the launchers print), then the
    exception again without its long traceback: Flower marks the run failed (``flwr ls``: ``finished:failed``)."""
    log(ERROR, "flowergraph: the run was refused: %s", exc)
    raise exc.with_traceback(None) from None
