"""ServerApp of the example: flowergraph's WeightedAveraging inside a plain server_fn (a legacy Flower app: the
core strategy goes through flowergraph's legacy adapter, LegacyStrategy)."""

from logging import INFO
from pathlib import Path

from flwr.app import Context
from flwr.common.logger import log
from flwr.server import ServerAppComponents, ServerConfig
from flwr.serverapp import ServerApp

from flowergraph.app.loop import LegacyStrategy
from flowergraph.storage.results import RunRecorder
from flowergraph.strategies import FederationPolicy, WeightedAveraging


def server_fn(context: Context):
    rounds = int(context.run_config["num-server-rounds"])
    out = Path(str(context.run_config["results-dir"])).expanduser().resolve() / f"run-{context.run_id}"
    log(INFO, "plugin example: results in %s", out)
    recorder = RunRecorder(out, dict(context.run_config), total_rounds=rounds)
    policy = FederationPolicy(num_clients=int(context.run_config["num-clients"]), num_rounds=rounds)
    strategy = LegacyStrategy(WeightedAveraging(policy=policy, weighting="uniform", recorder=recorder))
    return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds, round_timeout=300))


app = ServerApp(server_fn=server_fn)
