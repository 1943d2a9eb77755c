"""Client side of differential privacy of the training rounds (run config ``dp``), for any method.

:class:`DPUpdates` wraps a method's client and changes what its ``fit`` returns, before any encryption or
masking (:class:`flowergraph.clients.secure.SecureUpdates` wraps it in turn):

* ``central-client``: the update ``theta_k - theta`` is clipped to the L2 norm the server sends in the fit
  config as ``clipping_norm`` (Flower's ``DifferentialPrivacyClientSideFixedClipping`` sends it), with Flower's
  ``compute_clip_model_update``: what Flower's ``fixedclipping_mod`` does, but applied inside the client so that
  the clipped update is what gets encrypted under ``secure-agg=ckks`` (a mod would see the ciphertext);
* ``local``: the update is clipped to ``dp-clipping-norm`` and Gaussian noise of standard deviation
  ``S sqrt(2 ln(1.25 / delta)) / epsilon`` is added to every parameter (Flower's ``LocalDpMod`` arithmetic), drawn
  from a generator seeded by the operating system's entropy (``numpy.random.default_rng()`` with no seed, as
  Flower's ``LocalDpMod``): nothing the server knows (run seed, round, partition id, anything in the run config)
  determines it, so the server cannot regenerate the noise and subtract it. Runs with ``dp=local`` are therefore
  not bit-reproducible (and a resumed run does not equal the uninterrupted one to the bit);
* ``central-server``: nothing here (the server clips).
"""

from __future__ import annotations

import numpy as np
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM, compute_clip_model_update, get_norm

from ..privacy.dp import local_noise_stddev
from .base import Client, ClientWrapper

MODES = ("central-client", "local")


class DPUpdates(ClientWrapper):
    """See the module docstring."""

    def __init__(
        self,
        inner: Client,
        mode: str,
        partition_id: int,
        *,
        clipping_norm: float,
        sensitivity: float = 1.0,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        rng: np.random.Generator | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown client-side dp {mode!r}; valid choices: {', '.join(MODES)}")
        if clipping_norm <= 0:
            raise ValueError(f"clipping_norm must be > 0, got {clipping_norm}")
        super().__init__(inner)
        self.mode = mode
        self.partition_id = int(partition_id)
        self.clipping_norm = float(clipping_norm)
        self.stddev = local_noise_stddev(sensitivity, epsilon, delta) if mode == "local" else 0.0
        # never seeded from anything the server knows (issue 19): fresh OS entropy per wrapper (one per message)
        self._rng = rng if rng is not None else np.random.default_rng()

    def fit(self, parameters, config):
        arrays, num_examples, metrics = self.inner.fit(parameters, config)
        arrays = [np.array(a, copy=True) for a in arrays]
        received = [np.asarray(a) for a in parameters]
        if len(arrays) != len(received) or any(a.shape != b.shape for a, b in zip(arrays, received)):
            raise ValueError(
                "dp: the update does not have the shapes of the model it was trained from; it cannot be clipped"
            )
        if self.mode == "central-client":
            clip(arrays, received, float(config.get(KEY_CLIPPING_NORM, self.clipping_norm)))
            return arrays, num_examples, metrics
        clip(arrays, received, self.clipping_norm)
        noisy = [(a + self._rng.normal(0.0, self.stddev, a.shape)).astype(a.dtype) for a in arrays]
        return noisy, num_examples, metrics


def clip(arrays: list[np.ndarray], received: list[np.ndarray], norm: float) -> None:
    """``arrays`` becomes ``received + clip(arrays - received, norm)`` in place (Flower's
    ``compute_clip_model_update``; an update of norm 0 is left as it is, where Flower's divides by zero)."""
    if get_norm([np.subtract(a, b) for a, b in zip(arrays, received)]) > 0:
        compute_clip_model_update(arrays, received, norm)
