"""The valid choices of the run-configuration keys that more than one layer reads (Flower-free): one definition
each, imported by the settings, the strategies and the clients."""

from __future__ import annotations

WEIGHTINGS = ("train-size", "batch-size", "uniform")
AGGREGATORS = ("mean", "median", "trimmed-mean", "krum", "multi-krum")
SECURE_AGG = ("none", "secagg+", "ckks")
CLIENT_ORDERS = ("partition", "largest-first")  # which client a simulated node serves (flowergraph.app.client_app)
FLOWER_APIS = (
    "auto",
    "message",
    "legacy",
)  # which of Flower's stacks the repository app runs (auto: the Message API, the legacy adapter for secagg+)
SIMULATION_ENGINES = (
    "ray",
    "inline",
)  # what runs a simulation's clients (flowergraph.simulation, flowergraph.app.inline)
# fault kinds that kill or stall the process they run in: the inline engine (one process) refuses them
PROCESS_FAULTS = ("exit", "hang")
DP_MODES = ("none", "central-server", "central-client", "local")
UPDATE_KINDS = ("weights", "gradients", "partial")  # what a method's clients send back (flowergraph.methods.Method)
MODEL_SCOPES = ("global", "per-group", "per-client")  # which models its server holds for the clients
