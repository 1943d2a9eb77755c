"""FedStar's baselines against FedAvg (reproductions/fedstar/report.py ``against_fedavg``): differences paired by
training seed over the seeds both methods have, with the paper's difference of means, checked against hand
numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions.fedstar import grid, report  # noqa: E402


def row(variant: str, seed: int, accuracy: float, setting: str = "CHEM") -> dict:
    return {
        "setting": setting,
        "variant": variant,
        "seed": seed,
        "accuracy": accuracy,
        "structure": "dse+rwse",
        "split_seed": grid.SPLIT_SEED,
    }


def test_baselines_are_paired_with_fedavg_by_seed():
    rows = [
        row("fedavg", 1, 75.0),
        row("fedavg", 2, 74.0),
        row("fedavg", 3, 77.0),
        row("fedprox", 1, 74.0),
        row("fedprox", 2, 73.5),
        row("fedprox", 4, 99.0),  # seed 4: no FedAvg
        row("fedper", 3, 77.0),
        row("fedavg-all", 2, 72.0),
        row("fedprox", 1, 50.0, setting="BIO-CHEM"),
    ]  # no FedAvg on BIO-CHEM: no line
    table = "\n".join(report.against_fedavg(rows))
    lines = [line for line in table.splitlines() if line.startswith("| CHEM") or line.startswith("| BIO")]
    assert lines == [
        "| CHEM | FedProx (GIN, mu 0.01) | 2 | -0.75 | 0.35 | -1.00 -0.50 | +0.04 |",  # 75.30 - 75.26
        "| CHEM | FedPer (GIN) | 1 | +0.00 | - | +0.00 | +1.83 |",  # 77.09 - 75.26
        "| CHEM | FedAvg (GIN), hidden FC shared too | 1 | -2.00 | - | -2.00 | - |",
    ]
    assert report.against_fedavg([row("fedavg", 1, 75.0)]) == []


@pytest.mark.parametrize("variant,extra", [("fedavg", {}), ("fedavg-all", {"graph.baseline-share": "all"})])
def test_the_control_is_fedavg_sharing_the_hidden_fc(variant, extra, monkeypatch):
    monkeypatch.setattr(grid, "datasets_of", lambda setting: ["MUTAG", "BZR"])
    config = grid.cell_settings("CHEM", variant, 1, "dse+rwse", grid.SPLIT_SEED, rounds=200)
    assert config["method"] == "fedavg" and "fedstar.variant" not in config
    assert {k: v for k, v in config.items() if k == "graph.baseline-share"} == extra
