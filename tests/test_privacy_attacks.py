"""Issue 19, privacy hardening: each hole of the audit as the attack (or the fault) that exposed it, run against
the code, and shown to fail now. In-process federations (the real ServerApp and ClientApp code paths); the
SecAgg+ and Flower-transport checks are in test_privacy_simulation.py."""

import json
import math

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.privacy import ckks
from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.storage.results import read_run

BASE = {"method": "fedavg", "dataset": "synthetic", "seed": 0, "fused-eval": False}


def _flat(arrays):
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def _fits(proxies):
    """Per partition: [(fit instruction arrays, reply arrays, reply metrics)] in round order."""
    return {k: [(parameters_to_ndarrays(ins.parameters), parameters_to_ndarrays(res.parameters), res.metrics)
                for kind, ins, res in proxy.messages if kind == "fit"] for k, proxy in enumerate(proxies)}


def _training(path):
    return [r for r in read_run(path)["rounds"] if r.get("round", 0) >= 1 and not r.get("phase")]


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    return str(ckks.write_key_file(tmp_path_factory.mktemp("keys") / "ckks.bin"))


# ------------------------------------------------------------------------------------- hole 1: local DP noise
def test_local_dp_noise_cannot_be_regenerated_by_the_server(tmp_path):
    """The old attack: the client seeded its noise with (run seed, round, partition id); the server has the seed
    (config.json), the round, and the partition id (a metric of every reply), so it regenerated the noise and
    subtracted it, recovering each client's local model to ~1e-6. Now the noise comes from the OS's entropy: the
    same attack is off by the noise itself, and two runs of the same config send different noise."""
    clip, eps, delta = 10.0, 0.5, 1e-5
    run = {**BASE, "num-clients": 3, "rounds": 1}
    _, plain = run_inprocess({**run, "out-dir": str(tmp_path / "plain")}, record=True)
    dp = {**run, "dp": "local", "dp-clipping-norm": clip, "dp-sensitivity": clip, "dp-epsilon": eps,
          "dp-delta": delta}
    _, noisy = run_inprocess({**dp, "out-dir": str(tmp_path / "dp")}, record=True)
    _, again = run_inprocess({**dp, "out-dir": str(tmp_path / "dp2")}, record=True)
    sigma = clip * math.sqrt(2 * math.log(1.25 / delta)) / eps
    config = read_run(tmp_path / "dp")["config"]  # what the server wrote down: the run config, seed included
    for k in range(3):
        sent, local, _ = _fits(plain)[k][0]  # the client's true local model (training is seeded: same in both)
        assert np.linalg.norm(_flat(local) - _flat(sent)) < clip  # not clipped: the DP upload is local + noise
        _, received, metrics = _fits(noisy)[k][0]
        # the attack, with only what the server holds: the seed from config.json, the round, the partition id
        pid, server_round = int(metrics[wire.PARTITION_ID]), 1
        rng = np.random.default_rng([int(config["seed"]), server_round, pid])
        recovered = [a.astype(np.float64) - rng.normal(0.0, sigma, a.shape) for a in received]
        error = _flat(recovered) - _flat(local)
        assert error.std() > 0.5 * sigma, f"partition {pid}: the server recovered the local model (error " \
                                          f"{error.std():.2e}, noise sigma {sigma:.1f})"
        # the noise is what the documentation says, and it is not a function of anything in the config
        assert abs((_flat(received) - _flat(local)).std() / sigma - 1) < 0.1
        other = _flat(_fits(again)[k][0][1]) - _flat(local)
        assert abs(np.corrcoef(_flat(received) - _flat(local), other)[0, 1]) < 0.1
