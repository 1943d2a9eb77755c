"""Checkpoints and resume: the file format, atomic writes, bad files, and (in one process, through the real
server code path) that an interrupted run resumed from a checkpoint equals the uninterrupted run.

The same claims through Flower's Ray simulation are in test_reliability_simulation.py.
"""

import json

import numpy as np
import pytest

from flowergraph.storage.checkpoint import (
    Checkpoint,
    check_resumable,
    checkpoint_file,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from flowergraph.settings import parse_run_config
from flowergraph.errors import CheckpointError
from flowergraph.storage.results import read_run

from flowergraph.app.inprocess import run_inprocess


def _ckpt(round_=3):
    return Checkpoint(
        server_round=round_,
        arrays=[np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int64)],
        strategy_state={
            "held": {"round": 3, "accuracy": None, "clients": {"0": {"num_train": 5}}},
            "elapsed_s": 1.5,
            "agent": {"actor": [np.eye(2), np.zeros(3, np.float16)], "step": 7},
        },
        records=[{"round": 1, "accuracy": 0.5}, {"round": 2, "accuracy": 0.6}],
        config={"method": "fedavg", "node.lr": 0.5, "rounds": 3},
    )


def test_roundtrip_keeps_arrays_state_records_and_config(tmp_path):
    path = save_checkpoint(_ckpt(), checkpoint_file(tmp_path, 3))
    assert path == tmp_path / "checkpoints" / "round-000003.npz"
    got = load_checkpoint(tmp_path)  # a run folder: its latest checkpoint
    assert got.server_round == 3 and got.path == path and got.run_dir == tmp_path
    np.testing.assert_array_equal(got.arrays[0], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert [a.dtype for a in got.arrays] == [np.float32, np.int64]
    actor = got.strategy_state["agent"]["actor"]
    np.testing.assert_array_equal(actor[0], np.eye(2))
    assert actor[1].dtype == np.float16 and got.strategy_state["agent"]["step"] == 7
    assert got.strategy_state["held"] == {"round": 3, "accuracy": None, "clients": {"0": {"num_train": 5}}}
    assert got.records == _ckpt().records and got.config == _ckpt().config


def test_latest_checkpoint_of_a_folder_is_chosen(tmp_path):
    for r in (2, 10, 4):
        save_checkpoint(_ckpt(r), checkpoint_file(tmp_path, r))
    assert find_checkpoint(tmp_path).name == "round-000010.npz"
    assert find_checkpoint(tmp_path / "checkpoints").name == "round-000010.npz"
    assert load_checkpoint(tmp_path / "checkpoints" / "round-000004.npz").server_round == 4


def test_a_crash_while_writing_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = checkpoint_file(tmp_path, 3)
    save_checkpoint(_ckpt(), path)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(_ckpt(), path)
    assert path.read_bytes() == before  # untouched
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_state_that_cannot_be_stored_is_named():
    bad = Checkpoint(1, [np.zeros(1)], strategy_state={"agent": {"net": object()}})
    with pytest.raises(TypeError, match=r"checkpoint state strategy.agent.net: cannot store a object"):
        save_checkpoint(bad, "/tmp/never-written.npz")


def test_corrupt_and_missing_checkpoints_are_named(tmp_path):
    path = save_checkpoint(_ckpt(), checkpoint_file(tmp_path, 3))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(
        CheckpointError,
        match=rf"checkpoint '{path}' is corrupt or not a flowergraph checkpoint "
        r"\(BadZipFile: File is not a zip file\)",
    ):
        load_checkpoint(path)
    flipped = bytearray(data)
    flipped[80] ^= 0xFF  # a bit flip inside the first array's bytes: the zip CRC catches it
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match=rf"checkpoint '{path}' is corrupt .*Bad CRC-32 for file 'g0.npy'"):
        load_checkpoint(path)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(2))
    with pytest.raises(CheckpointError, match=rf"checkpoint '{other}' is corrupt .*KeyError"):
        load_checkpoint(other)
    with pytest.raises(CheckpointError, match=r"resume-from '/no/such/run' does not exist; give a checkpoint file"):
        load_checkpoint("/no/such/run")
    (tmp_path / "empty-run").mkdir()
    with pytest.raises(CheckpointError, match=r"holds no checkpoint .*was the run started with checkpoint-every > 0"):
        load_checkpoint(tmp_path / "empty-run")


def test_resuming_with_other_settings_is_refused_by_name():
    ckpt = _ckpt()
    check_resumable(ckpt, {"method": "fedavg", "node.lr": 0.5, "rounds": 5, "round-timeout": 9.0})  # may change
    with pytest.raises(
        CheckpointError,
        match=r"was made with other settings: node.lr=0.5 in the checkpoint but 0.1 now\. "
        r"Resume with the same settings; only rounds, out-dir",
    ):
        check_resumable(ckpt, {"method": "fedavg", "node.lr": 0.1, "rounds": 5})
    with pytest.raises(CheckpointError, match=r"is at round 3; rounds=3 must be larger to continue the run"):
        check_resumable(ckpt, {"method": "fedavg", "node.lr": 0.5, "rounds": 3})


# ------------------------------------------------------------------------------------------------------------
# Resume through the server code path, in one process (the client code is the real ClientApp's)
# ------------------------------------------------------------------------------------------------------------


def _weights(path):
    return load_checkpoint(path).arrays


def _assert_same_run(a, b, same_messages=True):
    """Same rounds, metrics (exactly: same seeds, same arithmetic) and final weights. ``same_messages``: also the
    same bytes per round (not so when the short run evaluated its last round separately, as every run does,
    where the long run evaluated it inside the next fit)."""
    ra, rb = read_run(a)["rounds"], read_run(b)["rounds"]
    assert [r["round"] for r in ra] == [r["round"] for r in rb]
    keys = ("accuracy", "val_accuracy", "loss", "train_loss", "num_fit") + (
        ("bytes_down", "bytes_up") if same_messages else ()
    )
    for x, y in zip(ra, rb):
        for key in keys:
            assert x.get(key) == y.get(key), (x["round"], key, x.get(key), y.get(key))
        if same_messages:
            assert x.get("clients") == y.get("clients")
        else:
            per_client = ("accuracy", "val_accuracy", "num_train", "fit_train_loss", "fit_weight")
            assert {c: {k: v.get(k) for k in per_client} for c, v in x.get("clients", {}).items()} == {
                c: {k: v.get(k) for k in per_client} for c, v in y.get("clients", {}).items()
            }
    for wa, wb in zip(_weights(a), _weights(b), strict=True):
        np.testing.assert_array_equal(wa, wb)


@pytest.mark.parametrize(
    "method,extra",
    [
        ("fedavg", {"fraction-fit": 0.67, "fraction-evaluate": 0.67}),  # sampling: must repeat per (seed, round)
        ("fedavg", {}),  # fused evaluation: round k's record waits in the strategy when the checkpoint is taken
        ("fedgcn", {"node.partitioner": "louvain"}),  # the clients restore their aggregations from their state files
        ("fedgcn", {"node.partitioner": "louvain", "fedgcn.he": True}),  # ... so CKKS resumes bit for bit too
    ],
)
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, method, extra):
    base = {"method": method, "num-clients": 3, "rounds": 4, "seed": 7, "checkpoint-every": 2, **extra}
    if extra.get("fedgcn.he"):
        from flowergraph.privacy import ckks

        base["key-file"] = str(ckks.write_key_file(tmp_path / "owners.key"))
    run_inprocess({**base, "out-dir": str(tmp_path / "full")})
    # (1) a run of k=2 rounds, extended to 4 in its own folder
    run_inprocess({**base, "rounds": 2, "out-dir": str(tmp_path / "short")})
    summary, _ = run_inprocess({**base, "resume-from": str(tmp_path / "short")})
    assert summary["out_dir"] == str(tmp_path / "short") and summary["rounds_completed"] == 4
    if extra.get("fedgcn.he"):  # two separate runs encrypt with different randomness: equal to CKKS precision
        assert [r.get("accuracy") for r in read_run(tmp_path / "short")["rounds"][1:]] == pytest.approx(
            [r.get("accuracy") for r in read_run(tmp_path / "full")["rounds"][1:]], abs=2e-3
        )
    else:
        _assert_same_run(tmp_path / "full", tmp_path / "short", same_messages=False)
    # (2) the uninterrupted run's own mid-run checkpoint (round 2 of 4), resumed into a new folder
    run_inprocess(
        {
            **base,
            "resume-from": str(tmp_path / "full" / "checkpoints" / "round-000002.npz"),
            "out-dir": str(tmp_path / "again"),
        }
    )
    _assert_same_run(tmp_path / "full", tmp_path / "again")
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    assert config["resumed_at_round"] == 2 and config["resumed_from"].endswith("round-000002.npz")
    if method == "fedgcn":  # the phase is not run again on resume: the clients restored what it gave them
        assert [r["round"] for r in read_run(tmp_path / "again")["rounds"]] == [0, 1, 2, 3, 4]
        assert len(list((tmp_path / "again").glob("checkpoints/*.npz"))) == 1  # round 4 (a fresh folder)


def test_resume_into_its_own_folder_drops_rounds_written_after_the_checkpoint(tmp_path):
    """A run that crashed after round 3 had checkpointed round 2: the resumed run rewrites rounds 3.. once."""
    base = {
        "method": "fedavg",
        "num-clients": 2,
        "rounds": 4,
        "seed": 1,
        "checkpoint-every": 2,
        "out-dir": str(tmp_path / "run"),
        "fused-eval": False,
    }
    run_inprocess(base)
    reference = read_run(tmp_path / "run")["rounds"]
    (tmp_path / "run" / "checkpoints" / "round-000004.npz").unlink()  # as if it died before round 4 ended
    run_inprocess({**base, "resume-from": str(tmp_path / "run")})
    lines = (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in lines] == [1, 2, 3, 4]
    assert [json.loads(line)["accuracy"] for line in lines] == [r["accuracy"] for r in reference]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["rounds_completed"] == 4


def test_sampling_depends_on_seed_and_round_not_on_node_ids(tmp_path):
    """fraction-fit < 1: the partitions sampled in round r are the same whatever ids Flower gives the nodes."""
    base = {"method": "fedavg", "num-clients": 4, "rounds": 3, "fraction-fit": 0.5, "fraction-evaluate": 0.5, "seed": 3}
    runs = {}
    for name, ids in (("a", [11, 12, 13, 14]), ("b", [94, 3, 57, 20])):
        run_inprocess({**base, "out-dir": str(tmp_path / name)}, node_ids=ids)
        runs[name] = [
            sorted(k for k, v in r["clients"].items() if "num_train" in v) for r in read_run(tmp_path / name)["rounds"]
        ]
    assert runs["a"] == runs["b"] and all(len(c) == 2 for c in runs["a"])
    assert len({tuple(c) for c in runs["a"]}) > 1  # rounds draw different samples
    run_inprocess({**base, "seed": 4, "out-dir": str(tmp_path / "c")})
    other = [sorted(k for k, v in r["clients"].items() if "num_train" in v) for r in read_run(tmp_path / "c")["rounds"]]
    assert other != runs["a"]


def test_resume_refuses_bad_checkpoints_before_training(tmp_path):
    base = {"method": "fedavg", "num-clients": 2, "rounds": 2, "checkpoint-every": 1, "out-dir": str(tmp_path / "r")}
    run_inprocess(base)
    with pytest.raises(CheckpointError, match=r"lr=0.5 in the checkpoint but 0.2 now"):
        run_inprocess({**base, "rounds": 3, "node.lr": 0.2, "resume-from": str(tmp_path / "r")})
    bad = tmp_path / "r" / "checkpoints" / "round-000002.npz"
    bad.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=rf"checkpoint '{bad}' is corrupt"):
        run_inprocess({**base, "rounds": 3, "resume-from": str(bad)})
    assert read_run(tmp_path / "r")["summary"]["rounds_completed"] == 2  # nothing was touched


def test_checkpoint_settings_are_validated():
    with pytest.raises(Exception, match=r"checkpoint-every=-1: must be >= 0"):
        parse_run_config({"checkpoint-every": -1})
    with pytest.raises(Exception, match=r"checkpoint-keep=-1: must be >= 0"):
        parse_run_config({"checkpoint-keep": -1})
    with pytest.raises(Exception, match=r"checkpoint-keep='two': expected an integer"):
        parse_run_config({"checkpoint-keep": "two"})


def test_prune_rounds_keeps_the_newest_and_never_a_later_round(tmp_path):
    from flowergraph.storage.checkpoint import prune_rounds

    for k in (1, 2, 3, 5, 9):  # 9: a round of the run this one resumed from an earlier checkpoint of
        (tmp_path / f"round-{k:06d}.npz").write_bytes(b"x")
    for other in ("round-000004.npz.tmp", "round-x.npz", "notes.txt"):
        (tmp_path / other).write_bytes(b"x")
    assert prune_rounds(tmp_path, 0, 5) == [] and len(list(tmp_path.iterdir())) == 8  # 0 keeps everything
    deleted = prune_rounds(tmp_path, 2, 5)
    assert sorted(p.name for p in deleted) == ["round-000001.npz", "round-000002.npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt",
        "round-000003.npz",
        "round-000004.npz.tmp",
        "round-000005.npz",
        "round-000009.npz",
        "round-x.npz",
    ]
    assert prune_rounds(tmp_path, 1, 9) == [tmp_path / "round-000003.npz", tmp_path / "round-000005.npz"]


def test_checkpoint_keep_bounds_server_and_client_files_and_a_run_still_resumes(tmp_path):
    """checkpoint-keep=2: the server keeps its 2 newest checkpoints, each client its 3 newest state files; a run
    that died after the clients saved its last round and before the server did resumes from the server's
    newest checkpoint (the clients still hold that round's files) and computes what the uninterrupted run does."""
    base = {"method": "fedgcn", "node.partitioner": "louvain", "num-clients": 3, "seed": 7, "checkpoint-every": 1}
    run_inprocess({**base, "rounds": 6, "out-dir": str(tmp_path / "full"), "state-dir": str(tmp_path / "sf")})
    short = {
        **base,
        "rounds": 5,
        "checkpoint-keep": 2,
        "out-dir": str(tmp_path / "short"),
        "state-dir": str(tmp_path / "ss"),
    }
    run_inprocess(short)
    assert sorted(p.name for p in (tmp_path / "short" / "checkpoints").iterdir()) == [
        "round-000004.npz",
        "round-000005.npz",
    ]
    partitions = sorted((tmp_path / "ss").glob("*/partition-*"))
    assert len(partitions) == 3
    for folder in partitions:  # written by each client on its own "machine"
        assert sorted(p.name for p in folder.iterdir()) == ["round-000003.npz", "round-000004.npz", "round-000005.npz"]
    assert len(list((tmp_path / "full" / "checkpoints").iterdir())) == 6  # the default keeps every checkpoint
    (tmp_path / "short" / "checkpoints" / "round-000005.npz").unlink()  # died before the server's save of round 5
    summary, _ = run_inprocess({**short, "rounds": 6, "resume-from": str(tmp_path / "short")})
    assert summary["rounds_completed"] == 6
    _assert_same_run(tmp_path / "full", tmp_path / "short", same_messages=False)
    assert sorted(p.name for p in (tmp_path / "short" / "checkpoints").iterdir()) == [
        "round-000005.npz",
        "round-000006.npz",
    ]


def test_launcher_resume_refuses_bad_requests_before_flower_starts(tmp_path):
    import subprocess
    import sys

    from flowergraph.errors import ConfigError
    from flowergraph.settings import parse_run_config
    from flowergraph.settings.plan import RunPlan
    from flowergraph.simulation import resume_config

    run_inprocess(
        {
            "method": "fedavg",
            "num-clients": 2,
            "rounds": 2,
            "checkpoint-every": 2,
            "seed": 4,
            "out-dir": str(tmp_path / "r"),
        }
    )
    config = resume_config(tmp_path / "r")  # the checkpointed run's settings, to continue it in its folder
    assert config["seed"] == 4 and config["out-dir"] == str(tmp_path / "r")
    assert config["resume-from"] == str(tmp_path / "r" / "checkpoints" / "round-000002.npz")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "rounds.jsonl").write_text('{"round": 1}\n')
    with pytest.raises(ConfigError, match="already holds the results of a run"):
        RunPlan.of(parse_run_config({**config, "rounds": 4, "out-dir": str(tmp_path / "other")}))
    plan = RunPlan.of(parse_run_config({**config, "rounds": 4}), launcher=True)  # its own folder: continued
    assert plan.out_dir == tmp_path / "r" and plan.resuming and plan.state_dir == ""  # fedavg's clients keep none
    with pytest.raises(ConfigError, match="already holds the results of a run"):  # a new run never overwrites
        RunPlan.of(parse_run_config({"method": "fedavg", "out-dir": str(tmp_path / "r")}))
    for args, message in (
        (
            ["--resume", str(tmp_path / "r"), "--rounds", "2"],
            "error: resume-from '"
            + str(tmp_path / "r" / "checkpoints" / "round-000002.npz")
            + "' is at round 2; rounds=2 must be larger to continue the run",
        ),
        (["--resume", str(tmp_path / "nothing")], f"error: resume-from '{tmp_path / 'nothing'}' does not exist"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "flowergraph.simulation", *args], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "r" / "flower.log").exists()  # Flower never started
