"""``client-order``: which client each simulated node serves (flowergraph.app.node_client.client_schedule).

Flower's simulation queues a round's messages in node order, so ``largest-first`` puts the clients with the most
training examples on the first nodes. Each client keeps its id, data and seeds: the server must receive the
scheduled client's identity from each node, and the run's records must not change."""

from __future__ import annotations

import json

import pytest

from flowergraph.app.node_client import client_schedule
from flowergraph.app.inprocess import run_inprocess
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config

DATASETS = ("MUTAG", "PTC_MR", "BZR")  # 188, 344, 405 graphs: largest-first is the reverse order


def _config(shared_data, tmp_path, order: str, name: str | None = None) -> dict:
    return {
        "method": "fedstar",
        "dataset": ",".join(DATASETS),
        "num-clients": 3,
        "rounds": 2,
        "seed": 3,
        "data-dir": str(shared_data),
        "out-dir": str(tmp_path / (name or order)),
        "client-order": order,
    }


def test_largest_first_sorts_clients_by_their_number_of_graphs(shared_data, tmp_path):
    """The schedule against graph counts read from the raw files (each client trains on 80% of its dataset)."""
    graphs = {
        n: len((shared_data / "TUDataset" / n / "raw" / f"{n}_graph_labels.txt").read_text().split()) for n in DATASETS
    }
    expected = tuple(sorted(range(len(DATASETS)), key=lambda k: -graphs[DATASETS[k]]))
    assert expected == (2, 1, 0)
    assert client_schedule(parse_run_config(_config(shared_data, tmp_path, "largest-first"))) == expected
    assert client_schedule(parse_run_config(_config(shared_data, tmp_path, "partition"))) == (0, 1, 2)


def test_each_node_serves_its_scheduled_client_and_the_results_do_not_change(shared_data, tmp_path):
    """What the server receives: node k's identity reply names client schedule[k] (and the fit replies come
    from that client's data: its training-set size); the rounds' records equal the partition-order run's."""
    runs = {}
    for order in ("partition", "largest-first"):
        _, proxies = run_inprocess(_config(shared_data, tmp_path, order), record=True)
        ids = [
            [res.properties["partition_id"] for kind, _, res in p.messages if kind == "get_properties"] for p in proxies
        ]
        sizes = [{res.num_examples for kind, _, res in p.messages if kind == "fit"} for p in proxies]
        ranks = [
            {
                res.properties.get("node_rank")
                for kind, ins, res in p.messages
                if kind == "get_properties" and "fg.phase" not in ins.config
            }
            for p in proxies
        ]
        runs[order] = ids, sizes, ranks
    (ids_p, sizes_p, ranks_p), (ids_l, sizes_l, ranks_l) = runs["partition"], runs["largest-first"]
    assert [set(i) for i in ids_p] == [{0}, {1}, {2}]
    assert [set(i) for i in ids_l] == [{2}, {1}, {0}]
    assert ranks_p == [{None}] * 3  # partition order: the identity reply is unchanged
    assert ranks_l == [{0}, {1}, {2}]  # each node says its place in the simulation's queue
    assert sizes_l == sizes_p[::-1] and len(set.union(*sizes_p)) == 3  # three different clients, swapped

    def records(order):
        rows = [json.loads(line) for line in (tmp_path / order / "rounds.jsonl").read_text().splitlines()]
        return [
            {k: v for k, v in r.items() if not (k.endswith("_s") or k.endswith("_at") or "time" in k)} for r in rows
        ]

    assert records("partition") == records("largest-first")
    assert any("accuracy" in k for k in records("partition")[-1])


def test_a_bad_client_order_names_the_valid_choices():
    with pytest.raises(
        ConfigError,
        match=r"unknown client-order 'biggest-first'; valid choices: partition, "
        r"largest-first",
    ):
        parse_run_config({"client-order": "biggest-first"})


def test_largest_first_without_client_sizes_is_refused(monkeypatch):
    settings = parse_run_config(
        {"method": "fedavg", "dataset": "synthetic", "num-clients": 4, "seed": 11, "client-order": "largest-first"}
    )
    import dataclasses

    import flowergraph.methods.registry as registry  # where RunSettings.task_info looks the task up

    assert settings.method_info.preflight is None  # fedavg uses its task's data check
    task = dataclasses.replace(settings.task_info, preflight=lambda s: {"summary": "no sizes"})
    monkeypatch.setattr(registry, "task_of_dataset", lambda dataset: task)
    with pytest.raises(
        ConfigError,
        match=r"client-order='largest-first': method 'fedavg' on 'synthetic' does not "
        r"report the size of each of its 4 clients \(got 0\); use "
        r"client-order='partition'",
    ):
        client_schedule(settings)


def test_a_deployment_ignores_it_each_supernode_keeps_its_partition(shared_data, tmp_path, monkeypatch):
    """Under Flower's ``flwr-clientapp`` (a deployment SuperNode's process) node k is client k whatever the run
    config says: each SuperNode's partition-id (or partition file) names its own data."""
    import sys

    monkeypatch.setattr(sys, "argv", ["/usr/bin/flwr-clientapp", "--token", "x"])
    _, proxies = run_inprocess(_config(shared_data, tmp_path, "largest-first", "deployment"), record=True)
    ids = [{res.properties["partition_id"] for kind, _, res in p.messages if kind == "get_properties"} for p in proxies]
    assert ids == [{0}, {1}, {2}]


def test_a_rounds_messages_are_sent_in_queue_order_and_results_keep_the_instruction_order():
    """flowergraph.app.loop.run_clients with one sending thread: the calls happen in ``rank`` order (the nodes'
    places in Flower's queue), the results come back in the order of the instructions (so aggregation, which
    iterates over them, does not depend on the schedule); without ranks, the instructions' order."""
    from flwr.common import Code, FitRes, Status

    from flowergraph.app.loop import run_clients

    calls = []

    class Proxy:
        def __init__(self, cid):
            self.cid = cid

        def fit(self, ins, timeout, group_id):
            calls.append(self.cid)
            return FitRes(Status(Code.OK, ""), None, 1, {"cid": self.cid})

    instructions = [(Proxy(c), None) for c in ("a", "b", "c", "d")]
    rank = {"a": (0, 3), "b": (1, 0), "c": (0, 0), "d": (0, 1)}
    results, failures = run_clients(instructions, "fit", None, 1, 1, rank=lambda p: rank[p.cid])
    assert calls == ["c", "d", "a", "b"] and not failures
    assert [res.metrics["cid"] for _, res in results] == ["a", "b", "c", "d"]
    calls.clear()
    run_clients(instructions, "fit", None, 1, 1)
    assert calls == ["a", "b", "c", "d"]
