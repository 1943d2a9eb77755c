"""The short fixed-seed runs whose round records are stored as golden records (``tests/golden/<case>.json``).

One case per method (node and graph tasks), plus the privacy and robustness keys that run on both Flower faces:
a robust rule (median), central DP, CKKS. The 0.3 core wrote the stored records
(``python tests/golden/generate.py``, its commit in each file); the 0.4 rebuild must reproduce them
(``tests/test_message_api.py``). Imported as a plain module: tests/ is on sys.path under pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

GOLDEN = Path(__file__).resolve().parent / "golden"
# Keys of a record that are machine-dependent costs (timings): dropped before any comparison.
COSTS = ("time_s", "elapsed_s", "ended_at", "_s", "seconds", "inference_s", "evaluations", "round_time")
# The cases that read the raw datasets (../shared/datasets).
NEEDS_DATA = ("fedstar", "fedgraph", "asfgnn", "flagcns")

CASES = (
    "fedavg",
    "fedprox",
    "fedper",
    "gcfl",
    "centralized",
    "fedavg-median",
    "fedavg-dp",
    "fedavg-ckks",
    "fedgcn",
    "fedstar",
    "fedgraph",
    "asfgnn",
    "flagcns",
    "link-fedavg",
    "link-fedavg-dp",
)


def case_config(name: str, data: str | Path, tmp: Path) -> dict[str, Any]:
    """The run config of case ``name`` (``data``: the raw datasets' folder; ``tmp``: a folder for the case's
    state and key files)."""
    d = str(data)
    cases: dict[str, dict[str, Any]] = {
        "fedavg": {"method": "fedavg", "num-clients": 3, "rounds": 2},
        "fedprox": {"method": "fedprox", "num-clients": 3, "rounds": 2},
        "fedper": {"method": "fedper", "num-clients": 3, "rounds": 2},
        "gcfl": {"method": "gcfl", "num-clients": 3, "rounds": 2},
        "centralized": {"method": "centralized", "rounds": 2},
        "fedavg-median": {"method": "fedavg", "num-clients": 3, "rounds": 2, "aggregator": "median"},
        "fedavg-dp": {
            "method": "fedavg",
            "num-clients": 3,
            "rounds": 2,
            "dp": "central-server",
            "weighting": "uniform",
            "dp-noise-multiplier": 0.3,
            "dp-clipping-norm": 5.0,
        },
        "fedavg-ckks": {"method": "fedavg", "num-clients": 3, "rounds": 2, "secure-agg": "ckks"},
        "fedgcn": {"method": "fedgcn", "num-clients": 3, "rounds": 2},
        "fedstar": {
            "method": "fedstar",
            "dataset": "MUTAG,PTC_MR,BZR",
            "num-clients": 3,
            "rounds": 2,
            "seed": 2,
            "data-dir": d,
        },
        "fedgraph": {
            "method": "fedgraph",
            "dataset": "Cora",
            "num-clients": 3,
            "rounds": 2,
            "seed": 5,
            "fedgraph.alpha": 0.0,
            "fedgraph.episode-rounds": 2,
            "data-dir": d,
        },
        "asfgnn": {
            "method": "asfgnn",
            "dataset": "Cora",
            "num-clients": 2,
            "seed": 3,
            "asfgnn.search": "smac",
            "asfgnn.trials": 2,
            "asfgnn.trial-rounds": 2,
            "rounds": 6,
            "data-dir": d,
        },
        # link prediction (0.4: stored at the commit that added the task, not by the 0.3 core), plain and with
        # central DP
        "link-fedavg": {"method": "fedavg", "task": "link", "num-clients": 3, "rounds": 2},
        "link-fedavg-dp": {
            "method": "fedavg",
            "task": "link",
            "num-clients": 3,
            "rounds": 2,
            "dp": "central-server",
            "weighting": "uniform",
            "dp-noise-multiplier": 0.3,
            "dp-clipping-norm": 5.0,
        },
        # one FL-AGCNS generation (a SuperNet step, then the FEO phases) and two retraining rounds
        "flagcns": {
            "method": "flagcns",
            "dataset": "Cora",
            "num-clients": 3,
            "seed": 3,
            "flagcns.layers": 2,
            "flagcns.population": 4,
            "flagcns.sample-size": 2,
            "flagcns.epochs": 1,
            "flagcns.warmup": 0,
            "flagcns.steps-per-epoch": 1,
            "flagcns.retrain-epochs": 2,
            "data-dir": d,
        },
    }
    config = dict(cases[name])
    if name in ("fedgraph", "flagcns"):
        config["state-dir"] = str(tmp / "state")
    if name == "fedavg-ckks":
        from flowergraph.privacy import ckks

        config["key-file"] = str(ckks.write_key_file(tmp / "owners" / "ckks.bin"))
    return config


def num_nodes(name: str, config: dict[str, Any]) -> int:
    return 1 if name == "centralized" else int(config["num-clients"])


def seed_flower_dp() -> None:
    """Flower's DP noise draws from numpy's global generator, unseeded: seed it before every run of a case."""
    np.random.seed(12345)


def close(a: Any, b: Any, where: Any, rel: float = 1e-5) -> None:
    """``a`` equals ``b``, floats to ``rel`` relative (CKKS: approximate arithmetic with fresh randomness in every
    encryption, so two runs differ in the last digits of every decrypted sum)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, sorted(a), sorted(b) if isinstance(b, dict) else b)
        for k in a:
            close(a[k], b[k], (where, k), rel)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, (where, i), rel)
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert abs(a - b) <= rel * max(1.0, abs(a)), (where, a, b)
    else:
        assert a == b, (where, a, b)
