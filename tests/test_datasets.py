import os
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch

from flowergraph.errors import ConfigError, DatasetUnavailableError
from flowergraph.tasks import datasets as ds
from flowergraph.tasks.federated_graph import GraphSpec, load_global_graph
from flowergraph.tasks.splits import apply_split, parse_split
from flowergraph.tasks.synthetic import CSBMParams, make_csbm


def test_cora_public_split_and_shape(cora, shared_data):
    assert (cora.num_nodes, cora.edge_index.size(1), cora.num_features, cora.num_classes) == (2708, 10556, 1433, 7)
    assert (int(cora.train_mask.sum()), int(cora.val_mask.sum()), int(cora.test_mask.sum())) == (140, 500, 1000)
    # Nothing was written into the (read-only) shared folder: PyG processed a copy in the cache.
    assert not (shared_data / "Planetoid" / "Cora" / "processed").exists()
    assert (ds.cache_dir() / "Planetoid" / "Cora" / "processed").is_dir()


def test_citeseer_and_tu_load(shared_data):
    data = load_global_graph(GraphSpec(dataset="citeseer", data_dir=str(shared_data)))  # case-insensitive
    assert (data.num_nodes, data.num_features, data.num_classes) == (3327, 3703, 6)
    mutag = ds.load_pyg_dataset("MUTAG", shared_data)
    assert len(mutag) == 188 and mutag.num_classes == 2


def test_data_dir_from_environment(shared_data, monkeypatch):
    monkeypatch.setenv("FLOWERGRAPH_DATA", str(shared_data))
    assert ds.resolve_data_dir("") == shared_data.resolve()
    assert len(ds.load_pyg_dataset("PTC_MR")) == 344


def test_per_class_and_random_splits(cora):
    data = cora.clone()
    apply_split(data, parse_split("per-class", "Planetoid"), seed=1)
    counts = np.bincount(data.y[data.train_mask].numpy(), minlength=7)
    assert counts.tolist() == [20] * 7
    assert int(data.val_mask.sum()) == 500 and int(data.test_mask.sum()) == 1000
    assert not (data.train_mask & data.val_mask).any() and not (data.val_mask & data.test_mask).any()
    apply_split(data, parse_split("random:60/20/20", "Planetoid"), seed=1)
    assert int(data.train_mask.sum()) == round(0.6 * 2708) and int(data.val_mask.sum()) == round(0.2 * 2708)
    assert int((data.train_mask | data.val_mask | data.test_mask).sum()) == 2708
    other = cora.clone()
    apply_split(other, parse_split("random:0.6/0.2/0.2", "Planetoid"), seed=1)
    assert torch.equal(other.train_mask, data.train_mask)  # same seed, same split


def test_first_per_class_split_is_the_fl_agcns_authors(cora):
    """The FL-AGCNS authors' split: training = the first T nodes of each class in node order (counted here by a
    plain loop over the labels), validation and test drawn at random from the rest; on Cora with T = 20 the
    training nodes are the public split's (nodes 0-139)."""
    data = cora.clone()
    apply_split(data, parse_split("first-per-class", "Planetoid"), seed=3)
    left, expected = [20] * 7, []
    for node, label in enumerate(data.y.tolist()):
        if left[label] > 0:
            left[label] -= 1
            expected.append(node)
    assert np.flatnonzero(data.train_mask.numpy()).tolist() == expected
    assert torch.equal(data.train_mask, cora.train_mask)
    assert int(data.val_mask.sum()) == 500 and int(data.test_mask.sum()) == 1000
    assert not (
        (data.train_mask & data.val_mask) | (data.train_mask & data.test_mask) | (data.val_mask & data.test_mask)
    ).any()
    other = cora.clone()
    apply_split(other, parse_split("first-per-class:20/500/1000", "Planetoid"), seed=4)
    assert torch.equal(other.train_mask, data.train_mask) and not torch.equal(other.test_mask, data.test_mask)
    apply_split(other, parse_split("first-per-class:5/100/200", "Planetoid"), seed=3)
    assert int(other.train_mask.sum()) == 35 and int(other.test_mask.sum()) == 200


@pytest.mark.parametrize(
    "text,match",
    [
        (
            "stratified",
            "unknown split 'stratified'; valid choices: auto, public, random, random:F/F/F, per-class, "
            "per-class:T/V/S, first-per-class, first-per-class:T/V/S",
        ),
        ("first-per-class:1.5/10/10", "first-per-class takes integers"),
        ("random:0.7/0.2/0.2", "fractions sum to 1.1 > 1"),
        ("per-class:2.5/10/10", "per-class takes integers"),
        ("random:a/b/c", "expected three numbers"),
    ],
)
def test_bad_splits(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_split(text, "Planetoid")


def test_public_split_needs_planetoid():
    with pytest.raises(ConfigError, match="public split exists only for Planetoid"):
        parse_split("public", "synthetic")


def test_synthetic_graph_statistics_match_the_model():
    p = CSBMParams(num_nodes=3000, num_classes=3, p_in=0.01, p_out=0.001, num_features=16, signal=0.5)
    data = make_csbm(p, seed=0)
    again = make_csbm(p, seed=0)
    assert torch.equal(data.edge_index, again.edge_index) and torch.equal(data.x, again.x)
    y = data.y
    src, dst = data.edge_index
    same = int((y[src] == y[dst]).sum()) // 2
    diff = int((y[src] != y[dst]).sum()) // 2
    n_c = 1000
    expected_same = 3 * p.p_in * n_c * (n_c - 1) / 2
    expected_diff = 3 * p.p_out * n_c * n_c
    assert abs(same - expected_same) < 0.05 * expected_same
    assert abs(diff - expected_diff) < 0.1 * expected_diff
    assert not torch.any(src == dst)
    # Class means: the feature mean of each class has norm ~signal * sqrt(d); the noise is N(0, I).
    for c in range(3):
        assert abs(float(data.x[y == c].mean(0).norm()) - 0.5 * 4) < 0.4
    centred = data.x - torch.stack([data.x[y == c].mean(0) for c in range(3)])[y]
    assert abs(float(centred.var()) - 1.0) < 0.05


def test_synthetic_scales_to_100k_nodes():
    data = make_csbm(CSBMParams(num_nodes=100_000, num_classes=5, p_in=1e-4, p_out=1e-5, num_features=8), seed=0)
    assert data.num_nodes == 100_000 and data.edge_index.size(1) > 100_000


def test_unknown_dataset_names_valid_choices():
    with pytest.raises(
        ConfigError,
        match=r"unknown dataset 'Corra'; valid choices: node classification Cora, "
        r"CiteSeer, PubMed, synthetic; graph classification MUTAG",
    ):
        ds.canonical_name("Corra")


def test_missing_data_dir_is_named():
    with pytest.raises(ConfigError, match="data-dir '/no/such/folder' does not exist"):
        ds.load_pyg_dataset("Cora", "/no/such/folder")


def test_offline_download_failure_says_where_to_put_files(tmp_path, monkeypatch):
    from torch_geometric.io import fs

    def offline(*args, **kwargs):  # what PyG's download (fsspec copy from GitHub) does offline
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(fs, "cp", offline)
    monkeypatch.setenv("FLOWERGRAPH_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "data"
    empty.mkdir()
    with pytest.raises(DatasetUnavailableError) as err:
        ds.load_pyg_dataset("Cora", empty)
    msg = str(err.value)
    assert "raw files not found and the download failed (URLError" in msg
    assert f"{empty.resolve()}/Planetoid/Cora/raw/ind.cora.{{x,tx,allx,y,ty,ally,graph,test.index}}" in msg
    assert list(empty.iterdir()) == []  # a failed download leaves the (maybe shared) data folder untouched


def test_read_only_data_dir_is_copied(tmp_path, shared_data, monkeypatch):
    data_dir = tmp_path / "ro"
    shutil.copytree(shared_data / "TUDataset" / "MUTAG", data_dir / "TUDataset" / "MUTAG")
    for p in sorted(data_dir.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    data_dir.chmod(0o555)
    monkeypatch.setenv("FLOWERGRAPH_CACHE", str(tmp_path / "cache"))
    try:
        assert len(ds.load_pyg_dataset("MUTAG", data_dir)) == 188
        assert sorted(os.listdir(data_dir / "TUDataset" / "MUTAG")) == ["raw"]
        assert (tmp_path / "cache" / "datasets" / "TUDataset" / "MUTAG" / "processed").is_dir()
    finally:
        for p in [data_dir, *data_dir.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def _fake_raw(root, name):
    """Empty raw files with the names PyG expects (the data check reads only the listing)."""
    from flowergraph.tasks.datasets import _PLANETOID_SUFFIXES, dataset_info

    info = dataset_info(name)
    raw = root / info.family / info.name / "raw"
    raw.mkdir(parents=True)
    names = (
        [f"ind.{name.lower()}.{s}" for s in _PLANETOID_SUFFIXES]
        if info.family == "Planetoid"
        else [f"{name}_{s}.txt" for s in ("A", "graph_indicator", "graph_labels")]
    )
    for n in names:
        (raw / n).write_text("")


def test_data_check_lists_what_is_missing_per_dataset_and_preset(tmp_path, capsys):
    from flowergraph.data import main

    for name in ("Cora", "MUTAG", "BZR"):
        _fake_raw(tmp_path, name)
    assert main(["check", str(tmp_path), "--dataset", "Cora", "--dataset", "mutag,bzr"]) == 0
    out = capsys.readouterr().out
    assert "Cora: ok  (needs Cora)" in out and "mutag,bzr: ok  (needs MUTAG, BZR)" in out
    assert main(["check", str(tmp_path), "--dataset", "CHEM"]) == 1  # a setting needs all of its datasets
    out = capsys.readouterr().out
    assert "CHEM: MISSING COX2, DHFR, PTC_MR, AIDS, NCI1" in out
    assert f"COX2         TUDataset  MISSING  {tmp_path}/TUDataset/COX2/raw/COX2_" in out  # where the files go
    assert "offline, put them at the paths shown above" in out
    repo = Path(__file__).resolve().parents[1]
    assert main(["check", str(tmp_path), "--preset", str(repo / "conf" / "fedavg-cora.toml")]) == 0
    assert main(["check", str(tmp_path), "--preset", str(repo / "conf" / "fedgcn-citeseer.toml")]) == 1
    assert "fedgcn-citeseer.toml: MISSING CiteSeer" in capsys.readouterr().out
    assert main(["check", str(tmp_path)]) == 1  # every preset of conf/: some need CiteSeer
    out = capsys.readouterr().out
    assert "fedavg-cora.toml: ok" in out and "fedstar-chem.toml: MISSING" in out
    assert main(["check", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
