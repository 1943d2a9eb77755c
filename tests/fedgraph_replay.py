"""Rebuilding a FedGraph client's round of the per-iteration exchange by hand from its recorded messages
(``tests/test_fedgraph_iteration.py``, ``tests/test_fedgraph.py``'s privacy test); imported as a plain module."""

import numpy as np
import torch

from flowergraph import wire
from flowergraph.methods.fedgraph.client import sample_seed, scheme_of
from flowergraph.clients.node import round_seed
from flowergraph.methods.fedgraph import client_graph_of, train_config_of
from flowergraph.settings import parse_run_config
from flowergraph.methods.fedgraph.maths import Rows, build_model, build_view, exchange_degrees, shared_convs, train_step
from flowergraph.tasks.torch_state import load_module_arrays, module_arrays
from flowergraph.tasks.training import make_optimizer
from flowergraph.methods.fedgraph import wire as msg

STEPS = 3  # fedgraph.local-steps of the runs replayed


def round_of(kind, ins):
    if kind == "get_properties" and wire.PHASE in ins.config:
        return wire.decode_phase(ins.config).round
    return int(ins.config.get(wire.SERVER_ROUND, -1)) if kind in ("fit", "evaluate") else None


def by_partition(proxies):
    return {int(p.context.node_config["partition-id"]): p for p in proxies}


def _views(config):
    s = parse_run_config(config)
    graphs = [client_graph_of(s, k) for k in range(s.num_clients)]
    degrees = exchange_degrees(graphs)
    return s, [build_view(g, degrees[k]) for k, g in enumerate(graphs)]


def replay(config, proxies, k, server_round):
    """Client ``k``'s round ``server_round`` rebuilt by hand from its recorded messages: the model of the begin
    message, its own samples (drawn here with its seeds), the rows it received for each of them, one
    ``train_step`` per iteration; returns the weights before every iteration and after the last, the samples, and
    the messages of the round by kind."""
    s, views = _views(config)
    view, g = views[k], views[k].graph
    msgs = [(kind, ins, res) for kind, ins, res in by_partition(proxies)[k].messages]
    msgs = [(kind, ins, res) for kind, ins, res in msgs if round_of(kind, ins) == server_round]
    phase = {}
    for kind, ins, res in msgs:
        if kind == "get_properties":
            phase.setdefault(ins.config[wire.PHASE], []).append((wire.decode_phase(ins.config), res))
    fit = next((ins, res) for kind, ins, res in msgs if kind == "fit")
    (begin_request, begin_reply), *_ = phase[msg.BEGIN]
    plan = msg.Begin.decode(begin_request.arrays, begin_request.values).plan
    model = build_model(g.num_features, g.num_classes, seed=s.seed)
    load_module_arrays(model, begin_request.model)
    model.train()
    optimizer = make_optimizer(model.parameters(), train_config_of(s))
    generator = torch.Generator().manual_seed(sample_seed(s.seed, server_round, k))
    torch.manual_seed(round_seed(s.seed, server_round, k))
    received = {}
    for request, _ in phase.get(msg.STEP, []):
        step = msg.StepRows.decode(request.arrays, request.values)
        received[step.iteration] = (step.ids, step.values)
    last = msg.unpack_parts(fit[0].config[msg.ITERATION_INBOX]).get((1,))
    received[STEPS] = last if last is not None else (np.zeros(0, np.int64), np.zeros((0, g.num_classes)))
    train_idx = torch.nonzero(g.train_mask, as_tuple=True)[0]
    scheme = scheme_of(plan, 2)
    weights, samples = [module_arrays(model)], []
    for t in range(1, STEPS + 1):
        sample = scheme.sample(view, train_idx, shared_convs("fedgraph", 2), generator)
        samples.append(sample)
        ids, values = received[t]
        table = view.remote_table(Rows(ids=ids, values=np.asarray(values)), allow_missing=True, width=g.num_classes)
        train_step(model, view, sample, {1: table}, optimizer)
        weights.append(module_arrays(model))
    return {"view": view, "weights": weights, "samples": samples, "phase": phase, "fit": fit, "received": received}


def asked(sample, view):
    """{owner: sorted global ids} of the remote neighbours in ``sample``'s sharing convolution."""
    pos = sample.remote[1]
    ids, owners = view.remote_ids[pos].numpy(), view.remote_owner[pos].numpy()
    return {int(j): np.sort(ids[owners == j]) for j in np.unique(owners)}
