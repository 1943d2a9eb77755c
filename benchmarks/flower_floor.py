"""Flower's floor: Flower's own ``FedAvg`` with clients that do nothing, on the arrays of a flowergraph model, on
either stack and either simulation engine. What any app of that stack pays per round there; the benchmarks put
flowergraph's rounds beside it (``message_api.py`` in its own process, ``scale.py`` one child process per run).

* ``face="legacy"``: legacy ``FedAvg`` (``flwr.server.strategy``) through ``start_grid``, a ``NumPyClient`` whose
  ``fit`` returns what it received;
* ``face="message"``: the Message API's ``FedAvg`` (``flwr.serverapp.strategy``), an ``@app.train()`` handler that
  replies with the arrays it received.

Every node trains (``fraction 1.0``), nobody evaluates; Flower calls the centralised ``evaluate_fn`` once before
round 1 and after every round, and each call stamps the wall clock: round k took ``stamps[k] - stamps[k-1]``.

* ``engine="inline"``: Flower's Simulation Engine with flowergraph's inline backend
  (:func:`flowergraph.app.inline.run_inline`), in this process;
* ``engine="ray"``: Flower's ``flwr.simulation.run_simulation`` (its Ray backend, one CPU per client actor), the
  Ray processes started from this one.

As a child process (what ``scale.py`` runs, so its memory is measured alone)::

    .venv/bin/python benchmarks/flower_floor.py arrays --config '{"method": "fedavg", ...}' --out A.npz
    .venv/bin/python benchmarks/flower_floor.py run --engine inline --face message --clients 100 --rounds 5 \\
        --arrays A.npz --out floor.json

``arrays`` writes the initial model flowergraph's clients build for that run config (the arrays the floor
exchanges); ``run`` writes ``{"stamps": [...], "round_times": [...]}`` (wall-clock seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ENGINES = ("inline", "ray")
FACES = ("legacy", "message")


def model_arrays(run_config: dict) -> list[np.ndarray]:
    """The initial model flowergraph's clients build for ``run_config`` (client 0), in state-dict order."""
    from flowergraph.app import message_client

    record = message_client.initial_arrays(run_config)
    return [record[k].numpy() for k in record.keys()]


def round_times(stamps: list[float]) -> list[float]:
    """Each round's time from the stamps (the first stamp: before round 1)."""
    return [b - a for a, b in zip(stamps, stamps[1:])]


def floor_stamps(
    face: str,
    rounds: int,
    arrays: list[np.ndarray],
    clients: int,
    engine: str = "inline",
    app_dir: str | Path | None = None,
) -> list[float]:
    """Run Flower's floor for ``rounds`` rounds on ``clients`` nodes; the wall-clock stamps of Flower's
    centralised-evaluation callbacks (``rounds + 1`` of them: before round 1, after every round). ``app_dir``: a
    Flower app folder for the inline engine's run config (None: a throw-away one)."""
    if face not in FACES or engine not in ENGINES:
        raise ValueError(f"face {face!r} / engine {engine!r}: valid {FACES} / {ENGINES}")
    from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp

    stamps: list[float] = []
    server, client = ServerApp(), None
    if face == "message":
        from flwr.serverapp.strategy import FedAvg

        client = ClientApp()

        @client.train()
        def train(msg: Message, context: Context) -> Message:
            return Message(
                RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord({"num-examples": 1})}),
                reply_to=msg,
            )

        @server.main()
        def main(grid: Grid, context: Context) -> None:
            def tick(server_round, arrays):
                stamps.append(time.time())
                return None

            FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_available_nodes=clients).start(
                grid=grid,
                initial_arrays=ArrayRecord({str(i): Array(a) for i, a in enumerate(arrays)}),
                num_rounds=rounds,
                evaluate_fn=tick,
            )
    else:
        from flwr.client import NumPyClient
        from flwr.common import ndarrays_to_parameters
        from flwr.server import ServerConfig
        from flwr.server.compat import start_grid
        from flwr.server.strategy import FedAvg as LegacyFedAvg

        class Echo(NumPyClient):
            def fit(self, parameters, config):
                return parameters, 1, {}

        client = ClientApp(client_fn=lambda context: Echo().to_client())

        @server.main()
        def main(grid: Grid, context: Context) -> None:
            def tick(server_round, parameters, config):
                stamps.append(time.time())
                return None

            strategy = LegacyFedAvg(
                fraction_fit=1.0,
                fraction_evaluate=0.0,
                min_available_clients=clients,
                initial_parameters=ndarrays_to_parameters(arrays),
                evaluate_fn=tick,
            )
            start_grid(grid=grid, strategy=strategy, config=ServerConfig(num_rounds=rounds))

    if engine == "ray":
        from flwr.simulation import run_simulation

        run_simulation(
            server_app=server,
            client_app=client,
            num_supernodes=clients,
            backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
        )
    else:
        from flowergraph.app.inline import run_inline

        if app_dir is None:
            import tempfile

            from flowergraph.app.generator import app_pyproject

            app_dir = Path(tempfile.mkdtemp(prefix="fg-floor-app-"))
            (app_dir / "pyproject.toml").write_text(app_pyproject("flower-floor"))
        run_inline(server, client, num_supernodes=clients, app_dir=app_dir)
    if len(stamps) != rounds + 1:
        raise RuntimeError(f"Flower's floor made {len(stamps)} evaluation callbacks, expected {rounds + 1}")
    return stamps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Flower's floor in its own process (see the module docstring).")
    sub = parser.add_subparsers(dest="command", required=True)
    arrays = sub.add_parser("arrays", help="write the model arrays flowergraph's clients build for a run config")
    arrays.add_argument("--config", required=True, help="the run config, as JSON")
    arrays.add_argument("--out", required=True, help="an .npz file")
    run = sub.add_parser("run", help="run the floor; write its stamps and round times as JSON")
    run.add_argument("--engine", choices=ENGINES, required=True)
    run.add_argument("--face", choices=FACES, required=True)
    run.add_argument("--clients", type=int, required=True)
    run.add_argument("--rounds", type=int, required=True)
    run.add_argument("--arrays", required=True, help="an .npz file written by `arrays`")
    run.add_argument("--out", required=True, help="a .json file")
    a = parser.parse_args(argv)
    if a.command == "arrays":
        model = model_arrays(json.loads(a.config))
        np.savez(a.out, *model)
        print(f"{len(model)} arrays, {sum(x.size for x in model)} values: {a.out}")
        return 0
    with np.load(a.arrays) as f:
        model = [f[f"arr_{i}"] for i in range(len(f.files))]
    from flowergraph.app.runtime import private_tmp

    with private_tmp("fgfloor"):  # Ray's session folders, the app folder: removed at the end
        stamps = floor_stamps(a.face, a.rounds, model, a.clients, a.engine)
    Path(a.out).write_text(json.dumps({"stamps": stamps, "round_times": round_times(stamps)}) + "\n")
    print(
        f"floor {a.engine}/{a.face}, {a.clients} clients: rounds " + ", ".join(f"{t:.3f}" for t in round_times(stamps))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
