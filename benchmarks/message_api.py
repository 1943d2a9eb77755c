"""The two faces side by side: a fedavg round on Cora with 10 clients through flowergraph's legacy face and its
Message-API face (``flower-api``), beside each face's floor, in one process, interleaved.

Every run goes through Flower's own Simulation Engine (InMemoryGrid, link state) with flowergraph's inline backend
(every message and context through Flower's protobuf bytes both ways, one client at a time), so what differs
between the rows is the face, not process starts. Rows:

* ``fedavg``: flowergraph's fedavg (GCN on Cora, 10 clients), per face;
* ``noop``: the benchmarks' no-op method (``benchmarks/noop_methods.py``: clients return what they receive: the
  strategy, the records and the transport without training), per face;
* ``Flower floor``: Flower's own strategy and a client that does nothing, per stack: legacy ``FedAvg`` (from
  ``flwr.server.strategy``) with a no-op ``NumPyClient``, and the Message API's ``FedAvg`` with a no-op
  ``@app.train()`` handler, on the same arrays (the GCN's) and 10 nodes (``benchmarks/flower_floor.py``).

Per run: the median round time of rounds 2..R (flowergraph: ``time_s`` of ``rounds.jsonl``; Flower's floors: the
interval between the centralised-evaluation callbacks Flower makes after every round), and the final accuracy
(fedavg: equal on both faces). Ratios are of medians measured in this one run.

    .venv/bin/python benchmarks/message_api.py [--rounds 6] [--repeats 3]

writes docs/results/message_api.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402
import noop_methods  # noqa: E402
from flower_floor import floor_stamps, model_arrays, round_times  # noqa: E402

import numpy as np  # noqa: E402

from flowergraph.app import client_app, server_app  # noqa: E402
from flowergraph.app.generator import write_app  # noqa: E402
from flowergraph.app.inline import run_inline  # noqa: E402
from flowergraph.storage import read_run  # noqa: E402

CLIENTS = 10


def flowergraph_run(app_dir: Path, work: Path, method: str, face: str, rounds: int) -> tuple[float, float | None]:
    out = work / f"{method}-{face}-{time.time_ns()}"
    run_inline(
        server_app.app,
        client_app.app,
        num_supernodes=CLIENTS,
        app_dir=app_dir,
        overrides={
            "method": method,
            "dataset": "Cora",
            "data-dir": data_dir(),
            "num-clients": CLIENTS,
            "rounds": rounds,
            "seed": 0,
            "out-dir": str(out),
            "flower-api": face,
        },
    )
    recs = [r for r in read_run(out)["rounds"] if r["round"] >= 2]
    return statistics.median(r["time_s"] for r in recs), recs[-1].get("accuracy")


def _gcn_arrays(app_dir: Path) -> list[np.ndarray]:
    return model_arrays({"method": "fedavg", "dataset": "Cora", "data-dir": data_dir(), "num-clients": CLIENTS})


def flower_floor(app_dir: Path, face: str, rounds: int, arrays: list[np.ndarray]) -> float:
    """Median of Flower's floor's rounds 2..R (``flower_floor.py``: its per-round evaluation callbacks)."""
    times = round_times(floor_stamps(face, rounds, arrays, CLIENTS, "inline", app_dir))
    return statistics.median(times[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args(argv)
    noop_methods.enable()  # method=noop (the runs are in this process)
    from flowergraph.tasks import configure_torch

    configure_torch()
    work = Path(tempfile.mkdtemp(prefix="fg-message-api-"))
    app_dir = write_app(work / "app")
    arrays = _gcn_arrays(app_dir)
    times: dict[tuple[str, str], list[float]] = {}
    accuracy: dict[str, float | None] = {}
    for rep in range(a.repeats):
        for face in ("legacy", "message") if rep % 2 == 0 else ("message", "legacy"):
            for method in ("fedavg", "noop"):
                t, acc = flowergraph_run(app_dir, work, method, face, a.rounds)
                times.setdefault((method, face), []).append(t)
                if method == "fedavg":
                    accuracy[face] = acc
            times.setdefault(("Flower floor", face), []).append(flower_floor(app_dir, face, a.rounds, arrays))
            print(
                f"repeat {rep + 1}/{a.repeats} {face}: "
                + ", ".join(f"{m} {times[(m, face)][-1]:.3f} s" for m in ("fedavg", "noop", "Flower floor")),
                flush=True,
            )
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [
        [
            m,
            f"{med[(m, 'legacy')]:.3f}",
            f"{med[(m, 'message')]:.3f}",
            f"{med[(m, 'message')] / med[(m, 'legacy')]:.2f}x",
            " / ".join(f"{x:.3f}" for x in times[(m, "legacy")]),
            " / ".join(f"{x:.3f}" for x in times[(m, "message")]),
        ]
        for m in ("fedavg", "noop", "Flower floor")
    ]
    ratio = med[("fedavg", "message")] / med[("fedavg", "legacy")]
    verdict = "met" if ratio <= 1.1 else "not met"
    header = ["row", "legacy face (s/round)", "Message-API face (s/round)", "Message / legacy", "legacy, each repeat"]
    header.append("Message API, each repeat")
    body = (
        render("message_api/setting", clients=CLIENTS, rounds=a.rounds, repeats=a.repeats)
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + render(
            "message_api/verdict",
            legacy=accuracy.get("legacy"),
            message=accuracy.get("message"),
            ratio=f"{ratio:.2f}",
            verdict=verdict,
        )
    )
    write_result("message_api", "The Message-API face and the legacy face, side by side", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
