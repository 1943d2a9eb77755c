"""Run settings -> the method's strategy (its Flower-facing core), as both faces run it: the method's registered
builder, server-side evaluation when ``server-eval=true``, and the DP wrapper when ``dp`` is set. The legacy
ServerApp (:mod:`flowergraph.app.server_app`) runs it in its server loop; the Message-API face
(:class:`flowergraph.app.message_server.FlowergraphStrategy`) wraps it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..settings import RunSettings

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.results import RunRecorder


def build_strategy(s: RunSettings, recorder: "RunRecorder | None" = None, initial_arrays=None):
    """The strategy of ``s.method`` with the run's settings (``initial_arrays``: a checkpoint's global model)."""
    from ..methods import StrategyArgs

    method = s.method_info
    evaluate_fn = None
    if s.server_eval:
        server_evaluate = method.server_evaluate or s.task_info.server_evaluate
        if server_evaluate is None:
            raise ConfigError(f"server-eval=true: method {s.method!r} has no server-side evaluation")
        evaluate_fn = server_evaluate(s)
    strategy = method.build_strategy(
        StrategyArgs(settings=s, recorder=recorder, initial_arrays=initial_arrays, evaluate_fn=evaluate_fn)
    )
    if s.dp != "none":
        from ..strategies.dp import with_dp

        strategy = with_dp(strategy, dp_config(s))
    return strategy


def dp_config(s: RunSettings):
    """The :class:`~flowergraph.strategies.DPConfig` the run configuration sets."""
    from ..strategies.dp import DPConfig

    return DPConfig(
        mode=s.dp,
        noise_multiplier=s.dp_noise_multiplier,
        clipping_norm=s.dp_clipping_norm,
        delta=s.dp_delta,
        num_sampled_clients=s.clients_per_round,
        epsilon=s.dp_epsilon,
        sensitivity=s.dp_sensitivity,
    )
