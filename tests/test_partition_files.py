"""Data owners with their own partition files: the export, the checks on loading, and runs that never read the
global dataset (their deployment test is in test_deployment.py)."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from flowergraph import data as fgdata
from flowergraph.errors import ConfigError, PartitionError
from flowergraph.storage.npzio import read_npz, write_npz
from flowergraph.storage.results import read_run
from flowergraph.tasks.federated_graph import (
    GraphSpec,
    PartitionSpec,
    build_client_graph,
    load_global_graph,
    node_assignment,
)
from flowergraph.tasks.partition_files import MEMBERS, export_partitions, load_partition_file, read_manifest

from flowergraph.app.inprocess import run_inprocess

SYN = GraphSpec(dataset="synthetic", seed=3)
PART = PartitionSpec(partitioner="louvain", num_clients=4, seed=3)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    out = tmp_path_factory.mktemp("parts")
    export_partitions(SYN, PART, out, log=None)
    return out


def test_each_file_holds_exactly_the_clients_cut(export):
    data, assignment = load_global_graph(SYN), node_assignment(SYN, PART)
    for k in range(4):
        got = load_partition_file(export / f"client-{k}.npz", dataset="synthetic", num_clients=4, client_id=k)
        want = build_client_graph(data, assignment, k, 4)
        for name in MEMBERS:
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype, name
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert (got.client_id, got.num_clients, got.num_global_nodes, got.num_classes) == (
            k,
            4,
            data.num_nodes,
            want.num_classes,
        )
    manifest = read_manifest(export, dataset="synthetic", num_clients=4)
    assert manifest["partition"] == {"partitioner": "louvain", "beta": 10000.0, "min_size": 10, "seed": 3}
    assert [f["file"] for f in manifest["files"]] == [f"client-{k}.npz" for k in range(4)]
    assert sum(f["nodes"] for f in manifest["files"]) == data.num_nodes


def test_bad_files_are_refused_naming_them(export, tmp_path):
    good = export / "client-1.npz"
    with pytest.raises(
        PartitionError,
        match=rf"partition file '{good}' was exported for client_id=1, but this "
        rf"run/node has partition-id=2",
    ):
        load_partition_file(good, client_id=2)
    with pytest.raises(PartitionError, match=r"exported for num_clients=4, but this run/node has num-clients=5"):
        load_partition_file(good, num_clients=5)
    with pytest.raises(PartitionError, match=r"exported for dataset='synthetic', but this run/node has dataset='Cora'"):
        load_partition_file(good, dataset="Cora")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(
        PartitionError,
        match=rf"partition file '{truncated}' is truncated, corrupt or not a "
        rf"partition file \(BadZipFile",
    ):
        load_partition_file(truncated)
    arrays, header = read_npz(good)
    arrays["x"][0, 0] += 1.0  # one feature changed, header kept: the digest catches it
    write_npz(tmp_path / "tampered.npz", arrays, header)
    with pytest.raises(PartitionError, match="does not match its own digest: it was altered or mixed from two exports"):
        load_partition_file(tmp_path / "tampered.npz")
    write_npz(tmp_path / "foreign.npz", {"x": np.zeros(2)}, {"format": "something-else"})
    with pytest.raises(PartitionError, match="is not a flowergraph partition file \\(format 'something-else'"):
        load_partition_file(tmp_path / "foreign.npz")
    with pytest.raises(ConfigError, match="partition file '/no/file.npz' does not exist"):
        load_partition_file("/no/file.npz")
    with pytest.raises(ConfigError, match=f"partition-dir '{tmp_path}' holds no manifest.json"):
        read_manifest(tmp_path)
    with pytest.raises(ConfigError, match="already holds partition files"):
        export_partitions(SYN, PART, export, log=None)


def test_cli_exports_and_shows(tmp_path, capsys):
    """export in a fresh interpreter; show and a bad value through main() in this process (each interpreter costs
    ~6 s of imports here)."""
    from flowergraph.partition import main

    out = tmp_path / "cli"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowergraph.partition",
            "export",
            "--num-clients",
            "3",
            "--set",
            "node.partitioner=random",
            "--set",
            "node.synthetic-nodes=300",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"manifest: {out / 'manifest.json'}" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_global_nodes"] == 300 and manifest["graph"]["synthetic"]["num_nodes"] == 300
    assert main(["show", str(out / "client-2.npz")]) == 0
    assert capsys.readouterr().out.startswith("client 2 of 3: 100 nodes, 32 features, 5 classes")
    assert (
        main(["export", "--num-clients", "3", "--set", "node.partitioner=spectral", "--out", str(tmp_path / "x")]) == 2
    )
    assert "unknown node.partitioner 'spectral'; valid choices" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.fixture
def no_global_data(monkeypatch):
    """Cutting the global graph is forbidden: a client must read its own file."""

    def refuse(*args, **kwargs):
        raise AssertionError("a client read the global dataset")

    monkeypatch.setattr(fgdata, "client_graph", refuse)


@pytest.mark.parametrize("method", ["fedavg", "fedgcn"])
def test_runs_from_partition_files_equal_runs_on_the_computed_partition(method, export, tmp_path, monkeypatch):
    base = {"method": method, "num-clients": 4, "rounds": 3, "seed": 3, "node.partitioner": "louvain"}
    run_inprocess({**base, "out-dir": str(tmp_path / "computed")})
    monkeypatch.setattr(
        fgdata,
        "client_graph",
        lambda *a, **k: (_ for _ in ()).throw(AssertionError("a client read the global dataset")),
    )
    run_inprocess({**base, "out-dir": str(tmp_path / "files"), "partition-dir": str(export)})
    # one node with a file named in its own node config, the others from the folder
    run_inprocess(
        {**base, "out-dir": str(tmp_path / "node-file"), "partition-dir": str(export)},
        node_configs=[
            {
                "partition-id": k,
                "num-partitions": 4,
                **({"partition-file": str(export / "client-0.npz")} if k == 0 else {}),
            }
            for k in range(4)
        ],
    )
    want = [r["accuracy"] for r in read_run(tmp_path / "computed")["rounds"] if r["round"] >= 1]
    for name in ("files", "node-file"):
        got = [r["accuracy"] for r in read_run(tmp_path / name)["rounds"] if r["round"] >= 1]
        assert got == want


def test_a_node_with_the_wrong_file_refuses_the_run(export, tmp_path, no_global_data):
    with pytest.raises(
        RuntimeError,
        match=r"flowergraph refused the run: partition file '.*client-2.npz' was "
        r"exported for client_id=2, but this run/node has partition-id=1",
    ):
        run_inprocess(
            {"method": "fedavg", "num-clients": 4, "rounds": 1, "out-dir": str(tmp_path / "x")},
            node_configs=[
                {
                    "partition-id": k,
                    "num-partitions": 4,
                    "partition-file": str(export / f"client-{2 if k == 1 else k}.npz"),
                }
                for k in range(4)
            ],
        )
    with pytest.raises(ConfigError, match="partition-dir '/no/dir' does not exist or is not a directory"):
        from flowergraph.settings import parse_run_config

        parse_run_config({"partition-dir": "/no/dir"})
