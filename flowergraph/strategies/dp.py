"""Differential privacy of the training rounds (run config ``dp``): wrappers of flowergraph's core strategy doing
what Flower's DP strategy wrappers do, with Flower's own DP arithmetic (``flwr.supercore.differential_privacy``).

* ``central-server``: :class:`CentralDPServerSide` is Flower's ``DifferentialPrivacyServerSideFixedClipping``
  (the same steps, on the core's plain values) around the method's strategy: the server clips each update
  ``theta_k - theta`` to L2 norm ``C`` (``dp-clipping-norm``), the method aggregates (the unweighted mean:
  ``weighting=uniform`` is required), and Gaussian noise with standard deviation ``z C / m`` (``z`` =
  ``dp-noise-multiplier``, ``m`` = the updates the mean was actually taken over: the clients sampled, less any update
  the wrapped strategy rejected) is added to every parameter of the new global model.
* ``central-client``: :class:`CentralDPClientSide` does Flower's ``DifferentialPrivacyClientSideFixedClipping``: the
  clients clip (Flower's ``compute_clip_model_update``, applied by :class:`flowergraph.clients.privacy.DPUpdates`
  before any encryption or masking, to the norm the server sends as ``clipping_norm``), the server adds the same
  noise. This one combines with secure aggregation (the server never needs an individual update).
* ``local``: each client clips its update and adds Gaussian noise of standard deviation
  ``S sqrt(2 ln(1.25 / delta)) / epsilon`` (Flower's ``LocalDpMod`` arithmetic: ``S`` = ``dp-sensitivity``,
  ``epsilon`` = ``dp-epsilon``); :class:`LocalDPAccounting` only records it on the server.

Every round's record in ``rounds.jsonl`` gets a ``dp`` entry: the mode, clipping norm, noise standard deviation,
the releases so far and the cumulative ``(epsilon, delta)`` of the model updates, computed with Flower's RDP
accountant (``flwr.serverapp.RdpAccountant``, Google's ``dp-accounting``) under these assumptions, stated again in
docs/privacy.md:

* client-level DP with add-or-remove-one neighbouring, **no amplification by sampling** (Flower's fixed-clipping
  accounting does the same: the sampled clients are not drawn by Poisson sampling, so a subsampling bound would
  not hold), ``delta`` = ``dp-delta``;
* central DP: one Gaussian release per aggregated round with noise multiplier ``z`` (the noise on the sum of
  clipped updates is ``z C``); ``z = 0`` gives no guarantee (``epsilon`` is reported as ``inf``);
* local DP: per client, one Gaussian release per round in which it trained, noise multiplier ``sigma / S``; the
  budget reported is that of a client that trained every round so far. Two clipped updates of one client differ
  by up to ``2 C`` in L2 norm, so under replace-one neighbouring (any two datasets of the client) the
  sensitivity is ``2 C``: the record's ``epsilon_replace_one`` is the budget with noise multiplier
  ``sigma / (2 C)``. ``dp-epsilon`` must be in (0, 1), where the classic Gaussian mechanism's formula holds (the
  settings refuse other values).

Not covered: the evaluation metrics, the training-set sizes and everything a method's own phases exchange
(FedGCN's neighbour aggregation, FedStar's nothing-else), which are outside the mechanism.

Differences from Flower's wrappers, all on failure handling: the noise is calibrated to the number of updates
the mean was taken over (Flower's uses the number sampled, which overstates the privacy of a round in which an
update was rejected: one NaN client of 3 gave a recorded epsilon of 4.73 where the noise gave 7.59); a round
with a failed client is not aggregated
(as in Flower: the noise is calibrated to ``n`` updates), but the wrapped strategy still sees it, so the round
is recorded (``aggregated: false`` with the reason) and fused evaluation results are not lost; the wrapper
passes every attribute it does not define (records, checkpoints, ``finish``) to the wrapped strategy, and its
accountant is part of the checkpointed state. The noise comes from NumPy's global generator (Flower's
choice), so runs with ``dp`` on are not bit-reproducible. The local noise (``dp=local``) is drawn by each client
from the operating system's entropy, never from anything the server knows (the run seed, the round, the
partition id): a server that could regenerate it would subtract it and recover the local model (issue 19), so
runs with local DP are not bit-reproducible either, and a resumed run does not equal the uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from logging import WARNING
from typing import Any

import numpy as np
from flwr.common.logger import log
from flwr.supercore.differential_privacy import (
    KEY_CLIPPING_NORM,
    add_gaussian_noise_inplace,
    compute_clip_model_update,
    compute_stdv,
)

from ..privacy.dp import local_noise_stddev
from ..settings.choices import DP_MODES
from .nodes import Reply

Strategy = Any  # a core strategy (flowergraph.strategies.FederatedStrategy) or another wrapper


@dataclass(frozen=True)
class DPConfig:
    """Differential privacy of the training rounds, as plain values (see the module docstring).

    ``mode``: ``"none"``, ``"central-server"``, ``"central-client"`` or ``"local"``; ``noise_multiplier`` (central:
    noise standard deviation / clipping norm), ``clipping_norm``, ``delta``; ``num_sampled_clients`` (central: the
    clients averaged per round); ``epsilon`` and ``sensitivity`` (local: each release's budget and the L2
    sensitivity its noise covers)."""

    mode: str = "none"
    noise_multiplier: float = 1.0
    clipping_norm: float = 1.0
    delta: float = 1e-5
    num_sampled_clients: int = 1
    epsilon: float = 1.0
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in DP_MODES:
            raise ValueError(f"unknown dp {self.mode!r}; valid choices: {', '.join(DP_MODES)}")


class PrivacyBudget:
    """Cumulative ``(epsilon, delta)`` of repeated Gaussian releases (Flower's RDP accountant, no sampling
    amplification, add-or-remove-one client neighbouring); ``noise_multiplier`` 0 gives ``inf``."""

    def __init__(self, noise_multiplier: float, delta: float, population: int) -> None:
        self.noise_multiplier = float(noise_multiplier)
        self.delta = float(delta)
        self.population = max(1, int(population))
        self.releases = 0
        self._accountant = None

    def _new_accountant(self):
        from flwr.serverapp import NeighboringRelation, PrivacyConfig, RdpAccountant, SamplingMethod

        return RdpAccountant(
            PrivacyConfig(
                target_delta=self.delta,
                population_size=self.population,
                neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                sampling_method=SamplingMethod.NO_AMPLIFICATION,
            )
        )

    def release(self, sample_size: int) -> None:
        self.releases += 1
        if self.noise_multiplier <= 0:
            return
        from flwr.serverapp import GaussianPrivacyEvent

        if self._accountant is None:
            self._accountant = self._new_accountant()
        size = min(max(1, int(sample_size)), self.population)
        self._accountant.compose(
            GaussianPrivacyEvent(
                noise_multiplier=self.noise_multiplier, sample_size=size, population_size=self.population
            )
        )

    @property
    def epsilon(self) -> float:
        if self.releases == 0:
            return 0.0
        if self.noise_multiplier <= 0 or self._accountant is None:
            return math.inf
        return float(self._accountant.get_epsilon(self.delta))

    def state_dict(self) -> dict[str, Any]:
        return {"releases": self.releases}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.releases, self._accountant = 0, None
        for _ in range(int(state.get("releases", 0))):  # identical events: replaying them rebuilds the accountant
            self.release(self.population)


def _jsonable(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


class _DPWrapper:
    """What the three wrappers share: delegation to the wrapped strategy, the round's ``dp`` record, the
    accountant in the checkpointed state."""

    mode = "none"
    strategy: Any
    budget: PrivacyBudget

    def __getattr__(self, name: str):  # records, checkpoints, finish(), global_arrays ...: the wrapped strategy's
        inner = self.__dict__.get("strategy")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    # the phases DP leaves alone pass straight through (configure_fit / aggregate_fit are each wrapper's own)
    def initialize_parameters(self, federation):
        return self.strategy.initialize_parameters(federation)

    def configure_evaluate(self, server_round, arrays, federation):
        return self.strategy.configure_evaluate(server_round, arrays, federation)

    def aggregate_evaluate(self, server_round, results, failures):
        return self.strategy.aggregate_evaluate(server_round, results, failures)

    def evaluate(self, server_round, arrays):
        return self.strategy.evaluate(server_round, arrays)

    def noise_stddev(self) -> float:
        raise NotImplementedError

    def _record(self, server_round: int, **extra: Any) -> dict[str, Any]:
        rec = self.strategy.book.start(server_round)
        rec["dp"] = {
            "mode": self.mode,
            "clipping_norm": self.clipping_norm,
            "noise_stddev": self.noise_stddev(),
            "releases": self.budget.releases,
            "epsilon": _jsonable(self.budget.epsilon),
            "delta": self.budget.delta,
            **extra,
        }
        return rec

    def privacy_spent(self) -> dict[str, Any]:
        """The cumulative budget so far (also in every round's ``dp`` record)."""
        return {"epsilon": self.budget.epsilon, "delta": self.budget.delta, "releases": self.budget.releases}

    def state_dict(self) -> dict[str, Any]:
        return {**self.strategy.state_dict(), "dp": self.budget.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.budget.load_state_dict(state.pop("dp", {}))
        self.strategy.load_state_dict(state)


class _CentralDP(_DPWrapper):
    clips_on_server = False
    _averaged: int | None = None  # updates the last released mean was taken over

    def __init__(
        self,
        strategy: Strategy,
        *,
        noise_multiplier: float,
        clipping_norm: float,
        num_sampled_clients: int,
        delta: float = 1e-5,
    ) -> None:
        # Flower's wrappers' checks, with their messages
        if noise_multiplier < 0:
            raise ValueError("The noise multiplier should be a non-negative value.")
        if clipping_norm <= 0:
            raise ValueError("The clipping norm should be a positive value.")
        if num_sampled_clients <= 0:
            raise ValueError("The number of sampled clients should be a positive value.")
        self.strategy = strategy
        self.noise_multiplier = noise_multiplier
        self.clipping_norm = clipping_norm
        self.num_sampled_clients = num_sampled_clients
        self.current_round_params: list[np.ndarray] = []
        self.budget = PrivacyBudget(noise_multiplier, delta, getattr(strategy, "num_clients", num_sampled_clients))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strategy!r}, z={self.noise_multiplier}, C={self.clipping_norm})"

    def noise_stddev(self) -> float:
        return compute_stdv(self.noise_multiplier, self.clipping_norm, self._averaged or self.num_sampled_clients)

    def configure_fit(self, server_round, arrays, federation):
        """The wrapped strategy's; the model the round starts from is kept (server-side clipping's reference),
        and with client-side clipping every client is told the clipping norm (Flower's ``clipping_norm`` key)."""
        self.current_round_params = [np.array(a, copy=True) for a in arrays] if arrays is not None else []
        out = self.strategy.configure_fit(server_round, arrays, federation)
        if not self.clips_on_server:
            for _, ins in out:
                ins.config.update({KEY_CLIPPING_NORM: self.clipping_norm})
        return out

    def aggregate_fit(self, server_round, results, failures):
        inner = self.strategy
        if failures:
            # as Flower's wrapper: no aggregation (the noise is calibrated to num_sampled_clients updates); unlike
            # it, the wrapped strategy records the round (and any fused evaluation), then its model is put back
            before = inner.global_arrays
            inner.aggregate_fit(server_round, results, failures)
            inner.global_arrays = before
            rec = self._record(server_round, skipped=f"{len(failures)} client(s) failed; no noisy release")
            rec["aggregated"] = False
            log(
                WARNING,
                "round %s: dp=%s skips the aggregation of a round with %d failure(s); the global model is kept",
                server_round,
                self.mode,
                len(failures),
            )
            return None, {}
        # Flower's wrappers add noise z C / n for n = the clients sampled; the mean may be over fewer when the
        # wrapped strategy rejects an update (NaN, wrong shape), and the noise must then be z C / m for the
        # release to have noise multiplier z (issue 19): clip as Flower does, aggregate, then noise with m.
        if self.clips_on_server:
            clipped = []
            for node, res in results:
                arrays = list(res.arrays)
                compute_clip_model_update(arrays, self.current_round_params, self.clipping_norm)
                clipped.append((node, Reply(arrays, res.num_examples, res.metrics, res.loss)))
            results = clipped
        parameters, metrics = inner.aggregate_fit(server_round, results, failures)
        averaged = int(metrics.get("num_fit", len(results))) if isinstance(metrics, dict) else len(results)
        extra: dict[str, Any] = {"clients": len(results), "averaged": averaged}
        if parameters is not None and averaged > 0:
            self._averaged = averaged
            parameters = [np.array(a, copy=True) for a in parameters]
            stddev = compute_stdv(self.noise_multiplier, self.clipping_norm, averaged)
            add_gaussian_noise_inplace(parameters, stddev)  # Flower's add_gaussian_noise_to_params, on arrays
            inner.global_arrays = parameters  # the released (noisy) model
            parameters = inner.global_arrays  # the bank's own list of it: the next round adopts it as is
            self.budget.release(averaged)
        if averaged != len(results):
            extra["note"] = (
                f"the mean was over {averaged} of {len(results)} updates (the others were rejected): "
                f"noise z C / {averaged}"
            )
        self._record(server_round, **extra)
        return parameters, metrics


class CentralDPServerSide(_CentralDP):
    """``dp=central-server``: Flower's server-side fixed clipping around ``strategy`` (see the module docstring)."""

    mode = "central-server"
    clips_on_server = True


class CentralDPClientSide(_CentralDP):
    """``dp=central-client``: Flower's client-side fixed clipping around ``strategy``; the clients clip (their
    ClientApp wraps them in :class:`flowergraph.clients.privacy.DPUpdates`, or a user's app adds Flower's
    ``fixedclipping_mod``)."""

    mode = "central-client"


class LocalDPAccounting(_DPWrapper):
    """``dp=local``: the clients add the noise; the server only records it and accounts for it."""

    mode = "local"

    def __init__(
        self, strategy: Strategy, *, clipping_norm: float, sensitivity: float, epsilon: float, delta: float
    ) -> None:
        self.strategy = strategy
        self.clipping_norm, self.sensitivity, self.epsilon_per_round = clipping_norm, sensitivity, epsilon
        self.stddev = local_noise_stddev(sensitivity, epsilon, delta)
        self.budget = PrivacyBudget(self.stddev / sensitivity, delta, 1)
        self.budget_replace_one = PrivacyBudget(self.stddev / (2 * clipping_norm), delta, 1)

    def __repr__(self) -> str:
        return f"LocalDPAccounting({self.strategy!r}, epsilon={self.epsilon_per_round}, C={self.clipping_norm})"

    def noise_stddev(self) -> float:
        return self.stddev

    def configure_fit(self, server_round, arrays, federation):
        return self.strategy.configure_fit(server_round, arrays, federation)

    def aggregate_fit(self, server_round, results, failures):
        out = self.strategy.aggregate_fit(server_round, results, failures)
        if results:
            self.budget.release(1)
            self.budget_replace_one.release(1)
        self._record(
            server_round,
            epsilon_per_round=self.epsilon_per_round,
            clients=len(results),
            epsilon_replace_one=_jsonable(self.budget_replace_one.epsilon),
        )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "dp_replace_one": self.budget_replace_one.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.budget_replace_one.load_state_dict(state.pop("dp_replace_one", state.get("dp", {})))
        super().load_state_dict(state)


def with_dp(strategy: Strategy, config: DPConfig) -> Strategy:
    """``strategy`` wrapped for ``config`` (unchanged for mode ``none``). TypeError for anything but a
    :class:`DPConfig` (0.3 removed ``with_dp(strategy, settings)``)."""
    if not isinstance(config, DPConfig):
        raise TypeError(
            f"with_dp(strategy, config) takes a flowergraph.strategies.DPConfig, not "
            f"{type(config).__name__} (0.3 removed with_dp(strategy, settings)); pass "
            f"DPConfig(mode=s.dp, noise_multiplier=s.dp_noise_multiplier, ...), e.g. "
            f"flowergraph.app.run_strategy.dp_config(s) for run settings s"
        )
    if config.mode == "none":
        return strategy
    if config.mode == "local":
        return LocalDPAccounting(
            strategy,
            clipping_norm=config.clipping_norm,
            sensitivity=config.sensitivity,
            epsilon=config.epsilon,
            delta=config.delta,
        )
    cls = CentralDPServerSide if config.mode == "central-server" else CentralDPClientSide
    return cls(
        strategy,
        noise_multiplier=config.noise_multiplier,
        clipping_norm=config.clipping_norm,
        num_sampled_clients=config.num_sampled_clients,
        delta=config.delta,
    )
