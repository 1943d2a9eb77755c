"""The ClientApp: Flower's Message-API handlers, each answered by flowergraph's client for this node.

What to train (the method, the model, local training) comes with each message, as the strategy decided it; the
node's data comes from its node config (partition-id, num-partitions; in a deployment also data-dir,
partition-file, key-file). Add your own Message-API mods with ClientApp(mods=[...])."""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from flowergraph.app import message_client as flowergraph

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    return flowergraph.train(msg, context)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    return flowergraph.evaluate(msg, context)


# flowergraph's own exchanges (which node holds which partition, the initial model, method phases such as
# FedGCN's neighbour aggregation) are query messages with actions of their own
flowergraph.register_queries(app)
