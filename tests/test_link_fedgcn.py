"""FedGCN on the link task (issue 92): which cross-client edges the silos know, the exchange's encoder against an
independent GCN on the whole graph G it stands for, and a launched run whose clients' numbers (computed from the
rows each client received in messages) equal the core's from the final model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from flowergraph.data import GraphSpec, PartitionSpec
from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.storage.results import read_run
from flowergraph.tasks.link import LinkPredictor, LinkSpec, client_link_data, cross_test_set, known_cross

REPO = Path(__file__).resolve().parents[1]
SYN = GraphSpec(dataset="synthetic", seed=0)
CUT = PartitionSpec(partitioner="dirichlet", num_clients=4, seed=0)


def _crossing(gspec, pspec):
    from flowergraph.tasks.federated_graph import load_global_graph, node_assignment

    data = load_global_graph(gspec)
    owner = torch.as_tensor(np.array(node_assignment(gspec, pspec)))
    src, dst = data.edge_index
    keep = (src < dst) & (owner[src] != owner[dst])
    return {(int(u), int(v)) for u, v in zip(src[keep], dst[keep])}


def test_known_and_test_cross_edges_split_every_cross_edge_once_and_owners_agree():
    crossing = _crossing(SYN, CUT)
    plain = cross_test_set(SYN, CUT, LinkSpec())
    assert plain.known.size(1) == 0 and {tuple(e) for e in plain.pos.t().tolist()} == crossing
    cross = cross_test_set(SYN, CUT, LinkSpec(cross_known_fraction=0.3))
    known = {tuple(e) for e in cross.known.t().tolist()}
    test = {tuple(e) for e in cross.pos.t().tolist()}
    assert known | test == crossing and not known & test
    assert abs(len(known) / len(crossing) - 0.3) < 0.03  # a seeded hash, uniform: 0.3 of ~7.5k edges
    assert cross.neg.size(1) == cross.pos.size(1)  # negatives per *test* positive
    # the same edge in either order, and another seed another choice
    u, v = cross.known
    assert known_cross(v, u, LinkSpec(cross_known_fraction=0.3)).all()
    assert not np.array_equal(
        known_cross(*plain.pos, LinkSpec(cross_known_fraction=0.3)),
        known_cross(*plain.pos, LinkSpec(cross_known_fraction=0.3, seed=1)),
    )
    # each client's view: its known cross edges, from its side, with the other endpoint's owner
    for k in range(CUT.num_clients):
        c = client_link_data(SYN, CUT, LinkSpec(cross_known_fraction=0.3), k)
        mine = {tuple(sorted((int(c.global_ids[a]), int(b)))) for a, b in c.cross_known.t().tolist()}
        assert mine == {e for e in known if k in (int(cross.owner[e[0]]), int(cross.owner[e[1]]))}
        assert (cross.owner[c.cross_known[1]] == c.cross_known_owner).all() and (c.cross_known_owner != k).all()


def test_a_data_owner_s_partition_file_knows_the_same_cross_edges(shared_data, tmp_path):
    from flowergraph.data import export_partitions
    from flowergraph.tasks.link import graph_link_data
    from flowergraph.tasks.partition_files import load_partition_file

    gspec, pspec = GraphSpec(dataset="Cora", data_dir=str(shared_data)), PartitionSpec(num_clients=3)
    lspec = LinkSpec(cross_known_fraction=0.5)
    export_partitions(gspec, pspec, tmp_path, log=None)
    for k in range(3):
        owner = graph_link_data(load_partition_file(tmp_path / f"client-{k}.npz", client_id=k), lspec)
        cut = client_link_data(gspec, pspec, lspec, k)
        key = lambda d: sorted(zip(d.cross_known[0].tolist(), d.cross_known[1].tolist()))  # noqa: E731
        assert key(owner) == key(cut) and len(key(cut)) > 0


@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_two_hop_exchange_encodes_exactly_as_a_gcn_on_the_whole_graph_g(fraction):
    """2-hop FedGCN's encoder on a client's own nodes equals PyG's GCN run on G = every client's message-passing
    edges plus the known cross edges (global ids), computed here from the global graph without FedGCN's code."""
    from flowergraph.methods.fedgcn.links import exchange, fedgcn_encode

    lspec = LinkSpec(cross_known_fraction=fraction)
    clients = [client_link_data(SYN, CUT, lspec, k) for k in range(CUT.num_clients)]
    cross = cross_test_set(SYN, CUT, lspec)
    edges = [c.global_ids[c.edge_index] for c in clients] + [cross.known, cross.known.flip(0)]
    g_edges = torch.cat(edges, dim=1)
    n = clients[0].num_global_nodes
    x = torch.zeros((n, clients[0].num_features))
    for c in clients:
        x[c.global_ids] = c.x
    model = LinkPredictor(x.size(1), "gcn", hidden=16, out=8, seed=3).eval()
    with torch.no_grad():
        z = model.encoder(x, g_edges)
        ext = exchange(clients, 2)
        for c in clients:
            mine = fedgcn_encode(ext[c.client_id])(model)
            torch.testing.assert_close(mine, z[c.global_ids], rtol=1e-4, atol=1e-5)
    if fraction == 0.0:  # no known cross edge: FedGCN is the local GCN
        with torch.no_grad():
            for c in clients:
                torch.testing.assert_close(
                    fedgcn_encode(ext[c.client_id])(model), model.encode(c.x, c.edge_index), rtol=1e-4, atol=1e-5
                )


def test_launched_fedgcn_link_run_scores_what_the_core_scores_from_its_final_model(shared_data, tmp_path):
    """fedgcn.hops=2 with task=link through the launcher: each client's round-3 AUC (its model on the rows it
    received in the exchange's messages) and the server's cross-client AUC equal the core's numbers for the final
    model, with the exchange computed in one process."""
    from flowergraph.methods.link import graph_spec, link_spec, model_kwargs, partition_spec
    from flowergraph.settings import parse_run_config
    from flowergraph.tasks.link import embed, evaluate_cross, evaluate_link
    from flowergraph.methods.fedgcn.links import exchange, fedgcn_encode
    from flowergraph.tasks.models import set_weights

    out = tmp_path / "run"
    keys = {"task": "link", "link.cross-known-fraction": 0.5, "link.hidden": 32, "link.out": 16}
    proc = subprocess.run(
        [sys.executable, "-m", "flowergraph.simulation", "--data-dir", str(shared_data), "--method", "fedgcn"]
        + ["--dataset", "Cora", "--num-clients", "3", "--rounds", "3", "--out", str(out)]
        + [
            a
            for k, v in {**keys, "simulation-engine": "inline", "server-eval": "true"}.items()
            for a in ("--set", f"{k}={v}")
        ]
        + ["--set", "checkpoint-every=3"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fedgcn-communication" in proc.stdout + proc.stderr
    run = read_run(out)
    s = parse_run_config({"method": "fedgcn", "dataset": "Cora", "data-dir": str(shared_data), **keys})
    g, p, lspec = graph_spec(s), partition_spec(s), link_spec(s)
    clients = [client_link_data(g, p, lspec, k) for k in range(3)]
    encoders = {k: fedgcn_encode(ext) for k, ext in exchange(clients, 2).items()}
    model = LinkPredictor(1433, **model_kwargs(s))
    set_weights(model, load_checkpoint(out).arrays)
    last = run["rounds"][-1]["clients"]
    for c in clients:
        r = evaluate_link(model, c, encode=encoders[c.client_id])
        assert last[str(c.client_id)]["auc"] == pytest.approx(r["test_auc"], abs=1e-6)
        assert last[str(c.client_id)]["hits@50"] == pytest.approx(r["test_hits@50"], abs=1e-6)
        plain = evaluate_link(model, c)  # the same model on the client's own graph alone scores otherwise
        assert plain["test_auc"] != pytest.approx(r["test_auc"], abs=1e-6)
    cross = evaluate_cross(
        cross_test_set(g, p, lspec), {c.client_id: embed(model, c, encoders[c.client_id]) for c in clients}
    )
    assert run["summary"]["final_server_cross_auc"] == pytest.approx(cross["cross_auc"], abs=1e-6)


def test_the_fedgcn_class_takes_a_link_task_and_refuses_one_with_no_known_cross_edge():
    from flowergraph.errors import ConfigError
    from flowergraph.serverapp import FedGCN, LinkTask

    with pytest.raises(ConfigError, match=r"FedGCN: fedgcn.hops=2 on task=link .* link.cross-known-fraction=0"):
        FedGCN(hops=2, task=LinkTask())
    assert FedGCN(hops=1, task=LinkTask(cross_known_fraction=0.5)).task.cross_known_fraction == 0.5
    assert FedGCN(hops=0, task=LinkTask()).hops == 0  # no exchange: FedAvg on links, allowed


@pytest.mark.simulation
def test_the_exchange_under_ckks_gives_the_plaintext_run_on_links(shared_data, tmp_path):
    """fedgcn.he=true on task=link through Flower's transport: the aggregations are summed under CKKS (the server
    holds no key) and the run equals the plaintext exchange's within CKKS's error."""
    import io

    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.simulation import run_simulation

    run = {
        "dataset": "Cora",
        "data-dir": str(shared_data),
        "task": "link",
        "link.cross-known-fraction": 0.5,
        "link.hidden": 32,
        "link.out": 16,
        "seed": 2,
        "fused-eval": False,
        "checkpoint-every": 1,
    }
    result = run_simulation(
        "fedgcn",
        3,
        2,
        None,
        tmp_path / "he",
        {**run, "fedgcn.he": True, "simulation-engine": "inline"},
        stream=io.StringIO(),
        timeout=600,
    )
    assert result.status == "completed", result.log_file.read_text()[-3000:]
    phase = read_run(tmp_path / "he")["rounds"][0]
    assert phase["phase"] == "fedgcn-communication" and phase["he"] is True
    run_inprocess({"method": "fedgcn", "num-clients": 3, "rounds": 2, **run, "out-dir": str(tmp_path / "plain")})
    # Round 1 starts from one model: CKKS's error (about 1e-6 of the aggregations) moves it by less than 1e-4.
    # Later rounds only approximately: Adam scales each coordinate's step to about lr whatever its gradient's
    # size, so a coordinate whose gradient is near zero can move visibly on a tiny input difference.
    he, plain = (load_checkpoint(tmp_path / p / "checkpoints" / "round-000001.npz").arrays for p in ("he", "plain"))
    for a, b in zip(he, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)
    he, plain = (read_run(tmp_path / p)["summary"]["final_auc"] for p in ("he", "plain"))
    assert he == pytest.approx(plain, abs=2e-3)
