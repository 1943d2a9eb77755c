import math
import re

import numpy as np
import pytest
from flwr.common import (
    Code,
    EvaluateRes,
    FitRes,
    GetParametersRes,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy

from flowergraph.storage.results import RunRecorder, read_run
from flowergraph.app.loop import ClientFailure, LegacyNodes, LegacyStrategy, node_of, parameters_bytes
from flowergraph.strategies.common import config_bytes
from flowergraph.strategies.nodes import Instruction, Reply
from flowergraph.strategies.weighted import WeightedAveraging as CoreWeightedAveraging
from flowergraph.strategies import FederationPolicy

OK = Status(code=Code.OK, message="")


def WeightedAveraging(*args, **kwargs):
    """The core strategy on the legacy stack, through flowergraph's adapter (these tests speak Flower's legacy
    ClientProxy / FitRes API)."""
    return LegacyStrategy(CoreWeightedAveraging(*args, **kwargs))


class FakeProxy(ClientProxy):
    def __init__(self, cid, arrays=None):
        super().__init__(cid)
        self.arrays = arrays

    def get_properties(self, ins, timeout, group_id):
        raise NotImplementedError

    def get_parameters(self, ins, timeout, group_id):
        return GetParametersRes(status=OK, parameters=ndarrays_to_parameters(self.arrays))

    def fit(self, ins, timeout, group_id):
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


def fit_res(arrays, n, pid, **metrics):
    return FitRes(
        status=OK, parameters=ndarrays_to_parameters(arrays), num_examples=n, metrics={"partition_id": pid, **metrics}
    )


GLOBAL = [np.zeros((2, 2), dtype=np.float32), np.zeros(3, dtype=np.float32)]
A = [np.full((2, 2), 1.0, np.float32), np.array([1.0, 2.0, 3.0], np.float32)]
B = [np.full((2, 2), 5.0, np.float32), np.array([3.0, 2.0, -1.0], np.float32)]


def _strategy(weighting="train-size", **policy):
    s = WeightedAveraging(FederationPolicy(num_clients=2, **policy), weighting=weighting, initial_parameters=GLOBAL)
    s.global_arrays = GLOBAL
    return s


def test_weighted_average_matches_hand_computation():
    s = _strategy()
    params, metrics = s.aggregate_fit(
        1, [(FakeProxy("a"), fit_res(A, 1, 0, batch_size=30)), (FakeProxy("b"), fit_res(B, 3, 1, batch_size=10))], []
    )
    out = parameters_to_ndarrays(params)
    # (1 * A + 3 * B) / 4
    np.testing.assert_allclose(out[0], np.full((2, 2), (1 * 1 + 3 * 5) / 4))
    np.testing.assert_allclose(out[1], [(1 * 1 + 3 * 3) / 4, 2.0, (1 * 3 + 3 * -1) / 4])
    assert out[0].dtype == np.float32 and metrics["num_fit"] == 2


def test_uniform_and_batch_size_weighting():
    res = [(FakeProxy("a"), fit_res(A, 1, 0, batch_size=30)), (FakeProxy("b"), fit_res(B, 3, 1, batch_size=10))]
    uni = parameters_to_ndarrays(_strategy(weighting="uniform").aggregate_fit(1, res, [])[0])
    np.testing.assert_allclose(uni[1], [2.0, 2.0, 1.0])
    bat = parameters_to_ndarrays(_strategy(weighting="batch-size").aggregate_fit(1, res, [])[0])
    np.testing.assert_allclose(bat[0], np.full((2, 2), (30 * 1 + 10 * 5) / 40))


def test_malformed_updates_rejected_and_logged(caplog):
    nan = [A[0].copy(), np.array([np.nan, 0, 0], np.float32)]
    wrong_shape = [np.zeros((3, 2), np.float32), A[1]]
    s = _strategy()
    s.partition_of["d"] = 3
    with caplog.at_level("WARNING", logger="flwr"):
        params, _ = s.aggregate_fit(
            1,
            [
                (FakeProxy("a"), fit_res(A, 1, 0)),
                (FakeProxy("b"), fit_res(nan, 5, 1)),
                (FakeProxy("c"), fit_res(wrong_shape, 5, 2)),
            ],
            [ClientFailure(FakeProxy("d"), RuntimeError("boom"))],
        )
    out = parameters_to_ndarrays(params)
    np.testing.assert_array_equal(out[1], A[1])  # only the valid update counts
    assert all(np.isfinite(o).all() for o in out)
    text = caplog.text
    assert "rejected the update of client 1: array 1 holds NaN or infinite values" in text
    assert "rejected the update of client 2: array 0 has shape (3, 2), expected (2, 2)" in text
    assert "round 1: client 3 (node d) failed to train: boom" in text
    rec = s.book.pending
    assert rec["num_fit"] == 1 and rec["num_failures"] == 1
    assert [r["client"] for r in rec["rejected"]] == ["1", "2"]
    assert rec["failures"] == [{"client": "3", "reason": "boom"}]


def test_too_few_valid_updates_keep_the_global_model():
    s = _strategy(min_clients=2)
    nan = [A[0], np.array([np.inf, 0, 0], np.float32)]
    params, _ = s.aggregate_fit(1, [(FakeProxy("a"), fit_res(A, 1, 0)), (FakeProxy("b"), fit_res(nan, 1, 1))], [])
    assert params is None  # Flower keeps the previous global parameters
    assert s.book.pending["aggregated"] is False


def test_zero_weight_round_keeps_model():
    s = _strategy()
    params, _ = s.aggregate_fit(1, [(FakeProxy("a"), fit_res(A, 0, 0))], [])
    assert params is None


def test_evaluation_weighted_by_test_nodes_and_recorded(tmp_path):
    recorder = RunRecorder(tmp_path / "run", {"method": "fedavg"}, total_rounds=1, log=None)
    s = WeightedAveraging(FederationPolicy(num_clients=2, num_rounds=1), initial_parameters=GLOBAL, recorder=recorder)
    manager = SimpleClientManager()
    for cid in ("a", "b"):
        manager.register(FakeProxy(cid))
    params = ndarrays_to_parameters(GLOBAL)
    ins = s.configure_fit(1, params, manager)
    assert [p.cid for p, _ in ins] == ["a", "b"] and ins[0][1].config == {"server_round": 1}
    down_fit = 2 * (parameters_bytes(params) + config_bytes({"server_round": 1}))
    s.aggregate_fit(
        1, [(FakeProxy("a"), fit_res(A, 1, 0, train_loss=0.5)), (FakeProxy("b"), fit_res(B, 3, 1, train_loss=1.5))], []
    )
    ev = s.configure_evaluate(1, params, manager)
    assert len(ev) == 2
    res = [
        (
            FakeProxy("a"),
            EvaluateRes(
                status=OK,
                loss=1.0,
                num_examples=100,
                metrics={
                    "partition_id": 0,
                    "accuracy": 0.9,
                    "loss": 1.0,
                    "num_test": 100,
                    "val_accuracy": 0.5,
                    "num_val": 10,
                },
            ),
        ),
        (
            FakeProxy("b"),
            EvaluateRes(
                status=OK,
                loss=2.0,
                num_examples=300,
                metrics={
                    "partition_id": 1,
                    "accuracy": 0.5,
                    "loss": 2.0,
                    "num_test": 300,
                    "val_accuracy": math.nan,
                    "num_val": 0,
                },
            ),
        ),
    ]
    loss, metrics = s.aggregate_evaluate(1, res, [])
    assert metrics["accuracy"] == pytest.approx((0.9 * 100 + 0.5 * 300) / 400)
    assert loss == pytest.approx((1.0 * 100 + 2.0 * 300) / 400)
    assert metrics["val_accuracy"] == pytest.approx(0.5)  # the empty validation set is skipped
    run = read_run(tmp_path / "run")
    (row,) = run["rounds"]
    assert row["round"] == 1 and row["accuracy"] == pytest.approx(0.6)
    assert row["train_loss"] == pytest.approx((0.5 * 1 + 1.5 * 3) / 4)
    assert row["bytes_down"] == down_fit + 2 * (parameters_bytes(params) + config_bytes({"server_round": 1}))
    assert row["bytes_up"] > 2 * sum(a.nbytes for a in A)
    assert set(row["clients"]) == {"0", "1"} and row["clients"]["1"]["accuracy"] == 0.5
    assert run["summary"]["status"] == "running" and run["summary"]["final_accuracy"] == pytest.approx(0.6)
    assert recorder.finish()["status"] == "completed"


def test_eval_every_skips_rounds_but_still_records(tmp_path):
    recorder = RunRecorder(tmp_path / "run", {}, log=None)
    s = WeightedAveraging(
        FederationPolicy(num_clients=1, eval_every=2, num_rounds=3), initial_parameters=GLOBAL, recorder=recorder
    )
    manager = SimpleClientManager()
    manager.register(FakeProxy("a"))
    params = ndarrays_to_parameters(GLOBAL)
    assert s.configure_evaluate(1, params, manager) == []  # round 1 skipped, its record flushed
    assert len(s.configure_evaluate(2, params, manager)) == 1
    assert len(s.configure_evaluate(3, params, manager)) == 1  # the last round is always evaluated
    assert [r["round"] for r in read_run(tmp_path / "run")["rounds"]] == [1]


def test_initial_parameters_requested_from_a_client():
    s = WeightedAveraging(FederationPolicy(num_clients=2, connect_timeout=1))
    manager = SimpleClientManager()
    manager.register(FakeProxy("b", B))
    manager.register(FakeProxy("a", A))
    got = parameters_to_ndarrays(s.initialize_parameters(manager))
    np.testing.assert_array_equal(got[0], A[0])  # the lowest node id answers


def test_missing_clients_fail_clearly():
    s = WeightedAveraging(FederationPolicy(num_clients=3, connect_timeout=1), initial_parameters=GLOBAL)
    manager = SimpleClientManager()
    manager.register(FakeProxy("a"))
    with pytest.raises(RuntimeError, match=r"only 1 of num-clients=3 clients connected within 1 s \(connect-timeout\)"):
        s.initialize_parameters(manager)


def test_the_wait_for_clients_is_reported_while_it_lasts(monkeypatch):
    import threading

    from flowergraph.strategies import directory

    lines = []
    monkeypatch.setattr(directory, "log", lambda level, fmt, *args: lines.append(fmt % args))
    manager = SimpleClientManager()
    manager.register(FakeProxy("a"))
    late = threading.Timer(1.5, lambda: manager.register(FakeProxy("b")))
    late.start()
    directory.ClientDirectory(2).wait(LegacyNodes(manager), timeout=30)
    late.join()
    assert lines[0].startswith("flowergraph: 1 of 2 clients connected; waiting up to ")
    assert lines[-1].startswith("flowergraph: 2 of 2 clients connected after ")


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(weighting="median"), "unknown weighting 'median'; valid choices: train-size, batch-size, uniform"),
        (
            dict(policy=FederationPolicy(num_clients=2), update_kind="deltas"),
            "unknown update_kind 'deltas'; valid choices: weights, gradients, partial",
        ),
    ],
)
def test_bad_constructor_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        WeightedAveraging(**{"policy": FederationPolicy(num_clients=2), **kw})


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(fraction_fit=1.5), r"fraction_fit must be in \[0, 1\]"),
        (dict(min_clients=5), r"min_clients must be in \[0, num_clients=2\]"),
        (dict(secure_agg="rot13"), "unknown secure_agg 'rot13'; valid choices: none, secagg\\+, ckks"),
        (dict(eval_every=0), "eval_every must be >= 1, got 0"),
    ],
)
def test_bad_policies(kw, match):
    with pytest.raises(ValueError, match=match):
        FederationPolicy(num_clients=2, **kw)


def test_policy_fields_as_keyword_arguments_are_refused_naming_the_policy():
    """0.3 removed the policy's fields as keyword arguments of a strategy: ``policy=FederationPolicy(...)`` is the
    one way, and the TypeError says so (in every strategy, the subclasses' own keyword arguments too)."""
    from flowergraph.methods.fedgcn.server import FedGCNStrategy
    from flowergraph.methods.fedstar.server import FedStarStrategy

    with pytest.raises(
        TypeError,
        match=re.escape(
            "WeightedAveraging(fused_eval=, num_clients=, num_rounds=...): the policy's fields are not keyword "
            "arguments of a strategy (removed in 0.3); pass policy=FederationPolicy(fused_eval=..., "
            "num_clients=..., num_rounds=...)"
        ),
    ):
        WeightedAveraging(num_clients=2, num_rounds=3, fused_eval=True)
    with pytest.raises(TypeError, match=re.escape("WeightedAveraging(num_rounds=...): the policy's fields are not")):
        WeightedAveraging(FederationPolicy(num_clients=2), num_rounds=3)
    for cls in (FedGCNStrategy, FedStarStrategy):
        with pytest.raises(TypeError, match=re.escape(f"{cls.__name__}(num_clients=...): the policy's fields")):
            cls(num_clients=2)
    with pytest.raises(TypeError, match="unexpected keyword argument\\(s\\) num_client; the policy's fields are"):
        WeightedAveraging(FederationPolicy(num_clients=2), num_client=2)
    with pytest.raises(
        TypeError, match=re.escape("WeightedAveraging() needs policy=FederationPolicy(num_clients=...)")
    ):
        WeightedAveraging()
    s = WeightedAveraging(FederationPolicy(num_clients=2, num_rounds=3, fused_eval=True))
    assert s.policy == FederationPolicy(num_clients=2, num_rounds=3, fused_eval=True) and s.fused_eval


def test_with_dp_takes_a_dp_config_only():
    """0.3 removed ``with_dp(strategy, settings)``: anything but a DPConfig is a TypeError naming DPConfig."""
    from flowergraph.settings import parse_run_config
    from flowergraph.strategies import DPConfig, with_dp

    inner = WeightedAveraging(FederationPolicy(num_clients=3))
    with pytest.raises(
        TypeError,
        match=re.escape(
            "with_dp(strategy, config) takes a flowergraph.strategies.DPConfig, not RunSettings (0.3 removed "
            "with_dp(strategy, settings)); pass DPConfig(mode=s.dp"
        ),
    ):
        with_dp(inner, parse_run_config({"dp": "central-server", "weighting": "uniform", "num-clients": 3}))
    assert with_dp(inner, DPConfig(mode="none")) is inner
    assert with_dp(inner, DPConfig(mode="central-server", num_sampled_clients=3)) is not inner


def test_recorder_refuses_to_overwrite(tmp_path):
    RunRecorder(tmp_path, {}, log=None).write_round({"round": 1})
    with pytest.raises(FileExistsError, match="already holds the results of a run"):
        RunRecorder(tmp_path, {}, log=None)


def _eval_metrics(acc, n_test, pid, prefix=""):
    return {
        f"{prefix}accuracy": acc,
        f"{prefix}loss": 1.0 - acc,
        f"{prefix}num_test": n_test,
        f"{prefix}val_accuracy": acc,
        f"{prefix}num_val": n_test,
    }


def test_fused_evaluation_travels_in_the_next_fit_and_matches_separate(tmp_path):
    """Fused: round r's client evaluation arrives with round r+1's fit replies and is recorded as round r's;
    the last round is evaluated separately. The records equal those of the separate protocol."""
    manager = SimpleClientManager()
    for cid in ("a", "b"):
        manager.register(FakeProxy(cid))
    params = ndarrays_to_parameters(GLOBAL)
    accs = {1: (0.5, 0.7), 2: (0.6, 0.8), 3: (0.9, 0.1)}  # per round, per client
    runs = {}
    for fused in (False, True):
        recorder = RunRecorder(tmp_path / str(fused), {}, log=None)
        s = WeightedAveraging(
            FederationPolicy(num_clients=2, num_rounds=3, fused_eval=fused),
            initial_parameters=GLOBAL,
            recorder=recorder,
        )
        s.global_arrays = GLOBAL
        assert s.fused_eval is fused
        for r in (1, 2, 3):
            ins = s.configure_fit(r, params, manager)
            wants_eval = [bool(fi.config.get("evaluate_global")) for _, fi in ins]
            assert wants_eval == [fused and r > 1] * 2
            extra = [
                _eval_metrics(accs[r - 1][k], 100 * (k + 1), k, "eval_") if fused and r > 1 else {} for k in range(2)
            ]
            s.aggregate_fit(
                r,
                [
                    (FakeProxy("a"), fit_res(A, 1, 0, train_loss=0.5, **extra[0])),
                    (FakeProxy("b"), fit_res(B, 3, 1, train_loss=1.5, **extra[1])),
                ],
                [],
            )
            ev = s.configure_evaluate(r, params, manager)
            if fused and r < 3:
                assert ev == []
                continue
            assert len(ev) == 2
            s.aggregate_evaluate(
                r,
                [
                    (
                        FakeProxy(c),
                        EvaluateRes(
                            status=OK,
                            loss=0.0,
                            num_examples=100 * (k + 1),
                            metrics={"partition_id": k, **_eval_metrics(accs[r][k], 100 * (k + 1), k)},
                        ),
                    )
                    for k, c in enumerate("ab")
                ],
                [],
            )
        s.finish()
        runs[fused] = read_run(tmp_path / str(fused))["rounds"]
    for sep, fus in zip(runs[False], runs[True], strict=True):
        assert sep["round"] == fus["round"]
        assert fus["accuracy"] == pytest.approx(sep["accuracy"])
        assert fus["accuracy"] == pytest.approx((accs[sep["round"]][0] * 100 + accs[sep["round"]][1] * 200) / 300)
        assert fus["clients"]["1"]["accuracy"] == sep["clients"]["1"]["accuracy"]
    # fused sends fewer messages: two fit + (last round only) two evaluate instructions
    assert sum(r["bytes_down"] for r in runs[True]) < sum(r["bytes_down"] for r in runs[False])


@pytest.mark.parametrize(
    "kw", [dict(fraction_fit=0.5), dict(fraction_evaluate=0.5), dict(clients_per_round=1), dict(num_rounds=None)]
)
def test_fused_evaluation_needs_full_participation_and_a_known_length(kw):
    args = {"num_clients": 2, "num_rounds": 3, "fused_eval": True, **kw}
    assert WeightedAveraging(FederationPolicy(**args)).fused_eval is False


def test_a_held_round_is_written_when_the_run_ends_early(tmp_path):
    recorder = RunRecorder(tmp_path, {}, log=None)
    s = WeightedAveraging(
        FederationPolicy(num_clients=1, num_rounds=5, fused_eval=True), initial_parameters=GLOBAL, recorder=recorder
    )
    manager = SimpleClientManager()
    manager.register(FakeProxy("a"))
    s.global_arrays = GLOBAL
    s.configure_fit(1, ndarrays_to_parameters(GLOBAL), manager)
    s.aggregate_fit(1, [(FakeProxy("a"), fit_res(A, 1, 0, train_loss=0.5))], [])
    assert s.configure_evaluate(1, ndarrays_to_parameters(GLOBAL), manager) == []
    assert not (tmp_path / "rounds.jsonl").exists()  # held for round 2's fit
    s.finish()  # e.g. the run failed in round 2
    (row,) = read_run(tmp_path)["rounds"]
    assert row["round"] == 1 and row["train_loss"] == pytest.approx(0.5) and row.get("accuracy") is None


# ------------------------------------------------------------------------------------------------ defects fixed
def test_an_integer_update_of_a_float_model_is_rejected(caplog):
    """It used to pass the check, and the average was cast to the first accepted update's dtype (truncating)."""
    as_int = [np.full((2, 2), 3, np.int64), np.array([1, 2, 3], np.int64)]
    s = _strategy()
    with caplog.at_level("WARNING", logger="flwr"):
        params, _ = s.aggregate_fit(
            1, [(FakeProxy("a"), fit_res(as_int, 5, 0)), (FakeProxy("b"), fit_res(A, 1, 1))], []
        )
    out = parameters_to_ndarrays(params)
    assert (
        "rejected the update of client 0: array 0 has dtype int64, expected float32 (or another precision of "
        "its kind)" in caplog.text
    )
    assert [a.dtype for a in out] == [np.float32, np.float32]
    np.testing.assert_array_equal(out[1], A[1])  # only the float update counts
    from flowergraph.strategies.common import weighted_average

    mixed = weighted_average(
        [[np.array([1], np.int64)], [np.array([0.5], np.float32)]], [1.0, 1.0], like=[np.zeros(1, np.float32)]
    )
    assert mixed[0].dtype == np.float32 and mixed[0][0] == pytest.approx(0.75)  # the global dtype, not int64
    wide = [a.astype(np.float64) for a in B]  # another float precision (what SecAgg+ hands over) is accepted
    params, _ = _strategy().aggregate_fit(1, [(FakeProxy("a"), fit_res(wide, 1, 0))], [])
    assert [a.dtype for a in parameters_to_ndarrays(params)] == [np.float32, np.float32]


def test_batch_size_weighting_without_the_metric_fails_the_run_with_the_reason():
    """It used to be logged every round as an 'undecodable update' and the client dropped."""
    s = _strategy(weighting="batch-size")
    with pytest.raises(
        RuntimeError,
        match=r"round 3: weighting 'batch-size' needs a 'batch_size' metric from every "
        r"client, and client 1 reports none \(its metrics: partition_id, "
        r"train_loss\); use weighting 'train-size' or 'uniform'",
    ):
        s.aggregate_fit(
            3,
            [(FakeProxy("a"), fit_res(A, 1, 0, batch_size=4)), (FakeProxy("b"), fit_res(B, 3, 1, train_loss=0.2))],
            [],
        )


class EvalProxy(FakeProxy):
    """Answers a separate evaluate message with a fixed accuracy."""

    def __init__(self, cid, pid, acc):
        super().__init__(cid)
        self.pid, self.acc, self.evaluated = pid, acc, []

    def evaluate(self, ins, timeout, group_id):
        self.evaluated.append(parameters_to_ndarrays(ins.parameters))
        return EvaluateRes(
            status=OK,
            loss=1.0 - self.acc,
            num_examples=100,
            metrics={"partition_id": self.pid, **_eval_metrics(self.acc, 100, self.pid)},
        )


def test_a_client_that_ignores_fused_evaluation_is_evaluated_separately(tmp_path, caplog):
    """Client b never returns eval_* metrics: round 1's accuracy must still include it (it used to go missing
    silently), measured on the model it was sent, and later rounds use separate evaluation."""
    manager = SimpleClientManager()
    a, b = EvalProxy("a", 0, 0.0), EvalProxy("b", 1, 0.8)
    for p in (a, b):
        manager.register(p)
    recorder = RunRecorder(tmp_path, {}, log=None)
    s = WeightedAveraging(
        FederationPolicy(num_clients=2, num_rounds=3, fused_eval=True), initial_parameters=GLOBAL, recorder=recorder
    )
    s.global_arrays = GLOBAL
    sent = ndarrays_to_parameters(GLOBAL)
    s.configure_fit(1, sent, manager)
    s.aggregate_fit(1, [(a, fit_res(A, 1, 0)), (b, fit_res(B, 1, 1))], [])
    assert s.configure_evaluate(1, sent, manager) == []  # held for round 2's fit
    round2 = ndarrays_to_parameters(A)
    ins = s.configure_fit(2, round2, manager)
    assert all(i.config["evaluate_global"] for _, i in ins)
    with caplog.at_level("WARNING", logger="flwr"):
        s.aggregate_fit(2, [(a, fit_res(A, 1, 0, **_eval_metrics(0.4, 100, 0, "eval_"))), (b, fit_res(B, 1, 1))], [])
    assert "client(s) 1 ignored the fused-evaluation flag 'evaluate_global'" in caplog.text
    (row,) = read_run(tmp_path)["rounds"]
    assert row["round"] == 1 and row["accuracy"] == pytest.approx((0.4 + 0.8) / 2)
    assert row["clients"]["1"]["accuracy"] == 0.8 and row["fused_eval_fallback"] == ["1"]
    np.testing.assert_array_equal(b.evaluated[0][0], A[0])  # the model round 2's fit carried (round 1's)
    assert a.evaluated == [] and s.fused_eval is False
    assert len(s.configure_evaluate(2, round2, manager)) == 2  # separate evaluation from now on


def test_the_fused_evaluation_part_works_without_a_strategy():
    """FusedEvaluation over its own schedule and book: it holds the record of a round whose evaluation is fused,
    flags the next fit, completes the record from the fit replies (a client without eval_* metrics evaluated on
    what it was sent), hands the rows to the hook before writing the record, and turns fusion off."""
    from flowergraph.strategies import ClientDirectory, EvaluationSchedule, FusedEvaluation, RoundBook

    written, seen = [], []
    book = RoundBook(listeners=[lambda rec: written.append(dict(rec))])
    schedule = EvaluationSchedule(eval_every=1, num_rounds=3, fused=True)
    fused = FusedEvaluation(schedule, book, label=ClientDirectory(2).label)
    book.start(1)["train_loss"] = 0.5
    assert fused.hold(1) and book.held["round"] == 1 and book.pending == {}
    assert fused.flag({"server_round": 2}) == {"server_round": 2, "evaluate_global": True}
    a, b = EvalProxy("a", 0, 0.0), EvalProxy("b", 1, 0.8)
    manager = SimpleClientManager()
    for proxy in (a, b):
        manager.register(proxy)
    rec = fused.complete(
        2,
        [
            (node_of(a), Reply(A, 1, {"partition_id": 0, **_eval_metrics(0.4, 100, 0, "eval_")})),
            (node_of(b), Reply(B, 1, {"partition_id": 1})),
        ],
        {"a": Instruction(B, {}), "b": Instruction(A, {})},
        lambda r: {"server_round": r},
        lambda r, rows: seen.append((r, [e.client for e in rows], len(written))),
        federation=LegacyNodes(manager),
    )
    assert seen == [(1, ["0", "1"], 0)] and written == [rec] and book.held is None
    assert rec["accuracy"] == pytest.approx(0.6) and rec["fused_eval_fallback"] == ["1"] and rec["train_loss"] == 0.5
    np.testing.assert_array_equal(b.evaluated[0][0], A[0])  # evaluated on what its fit carried
    assert a.evaluated == [] and schedule.fused is False and not fused.hold(2)
    assert fused.flag({}) == {}
