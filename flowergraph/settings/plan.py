"""Where a run writes and what it continues (Flower-free): the one place the launchers and the ServerApp decide
the results folder, the checkpoint a run resumes from, and where clients keep their checkpointed state.

    plan = RunPlan.of(settings)          # ConfigError / CheckpointError for a bad resume or a taken folder
    plan.out_dir, plan.checkpoint, plan.state_dir
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.checkpoint import Checkpoint
    from ..methods.registry import RunSettings

RESULTS_ROOT = "results"


# what a run writes into its out-dir: a folder holding any of them (and not the run's own, resumed) is refused
RUN_FILES = ("config.json", "rounds.jsonl", "summary.json", "checkpoints", "client-state")
LAUNCHER_FILES = ("flower.log", "superlink.log")


@dataclass(frozen=True)
class RunPlan:
    """``out_dir``: the run's results folder; ``checkpoint``: what ``resume-from`` names (checked against the
    settings), or None; ``state_dir``: where clients save their state at checkpoints ('' : each client's default)."""

    out_dir: Path
    checkpoint: "Checkpoint | None"
    state_dir: str

    @property
    def resuming(self) -> bool:
        return self.checkpoint is not None

    @classmethod
    def of(cls, s: "RunSettings", run_id: int | str = "", *, launcher: bool = False) -> "RunPlan":
        """The plan of a run: ``out-dir`` (else the checkpoint's own folder when resuming, else
        ``results/<method>-<dataset>-<time>[-<run id>]``); a folder that already holds another run's results is
        refused (a resumed run continues its own). ``launcher``: a launcher that starts the clients itself keeps
        their state with the run (``<out-dir>/client-state``) when the method's clients keep state and the run
        checkpoints or resumes."""
        checkpoint = None
        if s.resume_from:
            from ..storage.checkpoint import check_resumable, load_checkpoint

            checkpoint = load_checkpoint(s.resume_from)
            check_resumable(checkpoint, s.as_dict())
        if s.out_dir:
            out_dir = Path(s.out_dir).expanduser().resolve()
        elif checkpoint is not None and checkpoint.run_dir is not None:
            out_dir = checkpoint.run_dir
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            suffix = f"-{run_id}" if run_id else ""
            out_dir = Path(RESULTS_ROOT).resolve() / f"{s.method}-{s.dataset}-{stamp}{suffix}"
        own = (
            checkpoint is not None
            and checkpoint.run_dir is not None
            and checkpoint.run_dir.resolve() == out_dir.resolve()
        )
        if (out_dir / "rounds.jsonl").exists() and not own:
            raise ConfigError(
                f"out-dir {str(out_dir)!r} already holds the results of a run (rounds.jsonl); "
                f"choose another so nothing is overwritten, or resume that run into its own "
                f"folder"
            )
        # the ServerApp's files, and the launchers' logs (a launcher checks before it writes them)
        names = RUN_FILES + (LAUNCHER_FILES if launcher else ())
        taken = [n for n in names if (out_dir / n).exists() or (out_dir / n).is_symlink()] if not own else []
        if taken:
            raise ConfigError(
                f"out-dir {str(out_dir)!r} already holds {', '.join(taken)}, which this run would "
                f"overwrite; choose an empty or new folder so nothing is overwritten"
            )
        state_dir = s.state_dir
        if not state_dir and launcher and s.method_info.is_stateful(s) and (s.checkpoint_every > 0 or checkpoint):
            state_dir = str(out_dir / "client-state")
        return cls(out_dir=out_dir, checkpoint=checkpoint, state_dir=state_dir)
