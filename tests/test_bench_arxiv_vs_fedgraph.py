"""benchmarks/arxiv_vs_fedgraph.py (issue 91) on tiny graphs: the graph's keys give the sizes asked for, the
edge-list loader (reproductions/fedgcn/fg_edge_list.py) hands the fedgraph library our graph, split and partition,
and a run's rounds are read into the page's numbers (round time, time to the target from the launch)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
import arxiv_vs_fedgraph as bench  # noqa: E402
from reproductions.fedgcn import fg_edge_list  # noqa: E402

from flowergraph.data import client_graph, graph_spec, partition_spec  # noqa: E402
from flowergraph.settings import load_preset, parse_run_config  # noqa: E402

FG_PYTHON = Path(os.environ.get("FG_VENV", "/tmp/fg_venv")) / "bin" / "python"


@pytest.mark.parametrize("size", ["arxiv", "pubmed"])
def test_the_graph_keys_give_the_sizes_degree_and_homophily_asked_for(size):
    nodes, edges, features, classes = bench.SIZES[size]
    keys = fg_edge_list.graph_keys(nodes, edges, features, classes)
    per = nodes / classes
    within = keys["node.synthetic-p-in"] * classes * per * (per - 1) / 2  # expected undirected edges in a class
    across = keys["node.synthetic-p-out"] * (nodes**2 - classes * per**2) / 2
    assert within + across == pytest.approx(edges, rel=1e-9)
    assert within / (within + across) == pytest.approx(0.65)
    scaled = fg_edge_list.graph_keys(nodes, edges, features, classes, scale_to=2000)
    assert scaled["node.synthetic-nodes"] == 2000 and scaled["node.synthetic-features"] == features


def test_a_run_is_read_into_round_time_and_time_to_target(tmp_path, monkeypatch):
    """Ours from rounds.jsonl (round 0 is FedGCN's exchange: its bytes count, its accuracy does not), the library's
    from its FG_RESULT line; both from the child's launch."""
    monkeypatch.setattr(bench, "run_child", lambda *a, **k: {"launched_at": 100.0, "peak_gb": 1.0, "rc": 0})
    a = type("A", (), {"timeout": 10, "target": 0.9})()
    recs = [{"round": 0, "accuracy": None, "ended_at": 104.0, "bytes_up": 5e6, "bytes_down": 5e6}]
    recs += [{"round": r, "accuracy": x, "ended_at": 105.0 + 2 * r, "bytes_up": 0, "bytes_down": 0} for r, x in
             [(1, 0.5), (2, 0.91), (3, 0.95)]]  # fmt: skip
    (tmp_path / "fedgcn").mkdir()
    (tmp_path / "fedgcn" / "rounds.jsonl").write_text("\n".join(json.dumps(r) for r in recs))
    ours = bench.run(a, "fedgcn", [], tmp_path)
    assert (ours["hit"], ours["to_target"], ours["round_s"], ours["mb"], ours["acc"]) == (2, 9.0, 2.0, 10.0, 0.95)
    fg = {"round_acc": [0.8, 0.85], "round_at": [130.0, 136.0], "lib_theor_pretrain_comm_mb": 1.0}
    (tmp_path / "fedgraph.log").write_text("noise\nFG_RESULT " + json.dumps(fg) + "\n")
    theirs = bench.run(a, "fedgraph", [], tmp_path)
    assert (theirs["hit"], theirs["to_target"], theirs["round_s"]) == ("-", None, 6.0)
    assert theirs["mb"] == pytest.approx(2**20 / 1e6)


@pytest.mark.skipif(
    not FG_PYTHON.exists(), reason=f"{FG_PYTHON} absent: build it with ../shared/anchors/fedgraph/setup.sh"
)
def test_the_edge_list_loader_gives_each_trainer_our_clients_nodes_edges_and_split(tmp_path):
    """Each trainer of the library holds exactly our client's nodes, every edge into them (internal and
    cross-client) among the edges its own get_in_comm_indexes keeps, and the labels of our client's train and test
    nodes; its communication set is the nodes plus their neighbours."""
    keys = {**fg_edge_list.graph_keys(*bench.SIZES["arxiv"], scale_to=600), "num-clients": 4}
    path = tmp_path / "graph.npz"
    fg_edge_list.export(bench.PRESET, keys, path)
    out = subprocess.run([str(FG_PYTHON), fg_edge_list.SCRIPT, "--graph", str(path), "--check"], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    parts = [json.loads(x[len("FG_CHECK ") :]) for x in out.stdout.splitlines() if x.startswith("FG_CHECK ")]
    assert len(parts) == 4, out.stdout[-2000:] + out.stderr[-2000:]
    s = parse_run_config({**load_preset(bench.PRESET), **keys})
    gspec, pspec = graph_spec(s), partition_spec(s)
    g = np.load(path)
    for k, part in enumerate(parts):
        c = client_graph(gspec, pspec, k)
        own = c.global_ids
        assert part["nodes"] == sorted(own.tolist())
        ours = {tuple(e) for e in own[c.edge_index].t().tolist()}
        ours |= {(r, int(own[i])) for i, r in c.cross_edges.t().tolist()}
        mine = set(own.tolist())
        assert {tuple(e) for e in part["edges"] if e[1] in mine} == ours
        order = torch.argsort(own)
        assert part["train_labels"] == c.y[order][c.train_mask[order]].tolist()
        assert part["test_labels"] == c.y[order][c.test_mask[order]].tolist()
        neighbours = set(g["edge_index"][0][np.isin(g["edge_index"][1], own.numpy())].tolist())
        assert set(part["comm"]) == mine | neighbours


def test_the_page_puts_each_run_beside_the_librarys(tmp_path, monkeypatch):
    """main() with the runs stubbed: every run of every size a row, its ratios to the library's row of its size."""
    base = {"launched_at": 0.0, "ended": "exited", "rc": 0, "mb": 1.0, "acc": 0.95, "hit": 3}
    runs = {"fedgraph": (4.0, 100.0, 8.0), "fedgcn": (1.0, 30.0, 4.0), "fedavg": (0.5, None, 2.0)}
    stub = lambda a, name, cmd, folder: {**base, "run": name, **dict(zip(bench.RATIOS, runs[name]))}  # noqa: E731
    monkeypatch.setattr(bench, "run", stub)
    monkeypatch.setattr(bench, "export", lambda preset, keys, path: {"nodes": keys["node.synthetic-nodes"]})
    pages = []
    monkeypatch.setattr(bench, "write_result", lambda name, title, body, **k: pages.append((name, body)))
    monkeypatch.setattr(sys, "argv", ["x", "--nodes", "500", "--work", str(tmp_path), "--name", "demo"])
    bench.main()
    ((name, body),) = pages
    rows = [
        line.split(" | ") for line in body.splitlines() if line.startswith("| arxiv") or line.startswith("| pubmed")
    ]
    assert name == "demo" and len(rows) == 6
    fedgcn = next(r for r in rows if r[0] == "| arxiv" and r[1] == "fedgcn")
    assert fedgcn[2:8] == ["1.00", "0.25", "30.0", "3", "0.30", "4.00"] and fedgcn[8] == "0.50"
    fedavg = next(r for r in rows if r[0] == "| pubmed" and r[1] == "fedavg")
    assert fedavg[4] == "-" and fedavg[6] == "-"
    assert "{'arxiv': {'nodes': 500}, 'pubmed': {'nodes': 500}}" in body
