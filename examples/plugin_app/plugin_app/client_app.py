"""ClientApp of the example: each SuperNode trains on its share of the built-in synthetic graph."""

import torch
from flwr.app import Context
from flwr.clientapp import ClientApp

from flowergraph.app.legacy import legacy_client
from flowergraph.clients import NodeClassificationClient, TrainConfig
from flowergraph.data import GraphSpec, PartitionSpec, client_graph


def client_fn(context: Context):
    torch.set_num_threads(1)
    partition_id = int(context.node_config["partition-id"])
    num_partitions = int(context.node_config["num-partitions"])
    # Louvain communities of the built-in graph, one community group per client.
    graph = client_graph(
        GraphSpec(dataset="synthetic", seed=7),
        PartitionSpec(partitioner="louvain", num_clients=num_partitions, seed=7),
        partition_id,
    )
    train = TrainConfig(local_steps=int(context.run_config["local-epochs"]), optimizer="adam", lr=0.01)
    # flowergraph's clients are plain Python; a legacy ClientApp(client_fn=...) wants Flower's NumPyClient
    return legacy_client(NodeClassificationClient(graph, train, {"kind": "sage", "hidden": 32}, seed=7))


app = ClientApp(client_fn=client_fn)
