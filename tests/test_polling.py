"""PollingGrid: what it sends, what it returns, how long it waits between polls (sleep is recorded, not timed)."""

import pytest

from flowergraph import _flower
from flowergraph.app import polling
from flowergraph.app.polling import PollingGrid


class _Meta:
    def __init__(self, reply_to):
        self.reply_to_message_id = reply_to


class _Error:
    def __init__(self, reason):
        self.reason = reason


class _Reply:
    def __init__(self, reply_to, error=None):
        self.metadata = _Meta(reply_to)
        self.error = _Error(error) if error else None

    def has_error(self):
        return self.error is not None


class FakeGrid:
    """Replies to message i after ready[i] pulls; records every call."""

    def __init__(self, ready):
        self.ready = ready
        self.pulls = 0
        self.pushed = []
        self.other = "delegated"

    def push_messages(self, messages):
        start = len(self.pushed)
        self.pushed.extend(messages)
        return [f"id{i}" for i in range(start, len(self.pushed))]

    def pull_messages(self, ids):
        self.pulls += 1
        return [
            _Reply(i, getattr(self, "fail", {}).get(i))
            for i in sorted(ids)
            if self.ready[min(int(i[2:]), len(self.ready) - 1)] <= self.pulls
        ]

    # the rest of the Grid API (delegated as is)
    def set_run(self, run):
        self.run_ = run

    def create_message(self, *a, **k):
        return ("msg", a, k)

    def get_node_ids(self):
        return [1, 2]

    def get_nodes(self):
        return []


@pytest.fixture
def sleeps(monkeypatch):
    recorded = []
    monkeypatch.setattr(polling.time, "sleep", recorded.append)
    return recorded


def test_collects_every_reply_with_backoff_capped_at_max(sleeps):
    grid = FakeGrid(ready=[1, 3, 8])
    replies = PollingGrid(grid, min_interval=0.002, max_interval=0.01).send_and_receive(["a", "b", "c"])
    assert sorted(r.metadata.reply_to_message_id for r in replies) == ["id0", "id1", "id2"]
    assert grid.pushed == ["a", "b", "c"] and grid.pulls == 8
    expected, d = [], 0.002
    for _ in range(7):
        expected.append(d)
        d = min(d * 1.5, 0.01)
    assert sleeps == pytest.approx(expected)
    assert max(sleeps) == 0.01


def test_reply_ready_at_once_never_sleeps(sleeps):
    replies = PollingGrid(FakeGrid(ready=[1])).send_and_receive(["a"])
    assert len(replies) == 1 and sleeps == []


def test_timeout_returns_what_arrived(monkeypatch, sleeps):
    clock = iter(range(0, 1000))
    monkeypatch.setattr(polling.time, "monotonic", lambda: next(clock) * 1.0)  # 1 s passes per call
    grid = FakeGrid(ready=[1, 10**6])
    replies = PollingGrid(grid).send_and_receive(["a", "b"], timeout=3.0)
    assert [r.metadata.reply_to_message_id for r in replies] == ["id0"]
    assert grid.pulls < 5


def test_delegates_the_rest_of_the_grid_api():
    grid = FakeGrid(ready=[])
    wrapped = PollingGrid(grid)
    assert wrapped.get_node_ids() == [1, 2] and wrapped.create_message(1, x=2) == ("msg", (1,), {"x": 2})
    wrapped.set_run("r")
    assert grid.run_ == "r" and wrapped.other == "delegated"


@pytest.mark.parametrize("kw", [dict(min_interval=0), dict(min_interval=0.1, max_interval=0.01), dict(backoff=0.5)])
def test_bad_intervals(kw):
    with pytest.raises(ValueError):
        PollingGrid(FakeGrid(ready=[]), **kw)


def test_recording_lists_each_exchange_only_inside_the_block(sleeps):
    fake = FakeGrid(ready=[1, 2, 1, 1])
    grid = PollingGrid(fake)
    grid.send_and_receive(["a"])
    with grid.recording() as rec:
        grid.send_and_receive(["b", "c"])
        fake.fail = {"id3": "boom"}
        grid.send_and_receive(["d"], timeout=0.0)
    grid.send_and_receive(["e"])
    assert [(sent, got) for sent, got, _ in rec.exchanges] == [(2, 2), (1, 1)]
    assert all(seconds >= 0 for _, _, seconds in rec.exchanges)
    assert rec.errors == ["boom"]


def test_object_pulls_wait_50_ms_doubling_to_half_a_second_with_flowers_give_up_time(monkeypatch):
    """fast_object_pulls changes only the three retry defaults of Flower's two pull functions (the SuperNode's,
    the ClientApp's and the ServerApp's grid's pulls of message contents), keeps the time an object that never
    arrives is waited for (tries x cap), and is idempotent."""
    from flwr.supercore.inflatable import inflatable_utils

    functions = (inflatable_utils.pull_objects, inflatable_utils.pull_and_inflate_object_from_tree)
    for fn in functions:  # as Flower made them (an earlier PollingGrid in this process may have changed them)
        monkeypatch.setattr(fn, "__kwdefaults__", dict(fn.__kwdefaults__))
        flower = polling._FLOWER_PULL_DEFAULTS.get(fn.__qualname__)
        if flower:
            fn.__kwdefaults__.update(flower)
    before = [dict(fn.__kwdefaults__) for fn in functions]
    assert polling.fast_object_pulls() and polling.fast_object_pulls()
    for fn, old in zip(functions, before, strict=True):
        new = fn.__kwdefaults__
        assert new["initial_backoff"] == polling.OBJECT_PULL_FIRST_S < old["initial_backoff"]
        assert new["backoff_cap"] == polling.OBJECT_PULL_CAP_S < old["backoff_cap"]
        assert new["max_tries_per_object"] * new["backoff_cap"] == pytest.approx(
            old["max_tries_per_object"] * old["backoff_cap"]
        )
        assert {k: v for k, v in new.items() if k not in _flower.PULL_KEYS} == {
            k: v for k, v in old.items() if k not in _flower.PULL_KEYS
        }


def test_object_pulls_of_another_flower_are_left_alone_with_a_warning(monkeypatch):
    from flwr.supercore.inflatable import inflatable_utils

    monkeypatch.setattr(inflatable_utils, "pull_objects", lambda ids, fn: {})
    with pytest.warns(RuntimeWarning, match="Flower's pace"):
        assert polling.fast_object_pulls() is False


class _Msg:
    """A message as Flower's grid leaves it after storing it: its id set in its metadata."""

    def __init__(self):
        self.metadata = type("M", (), {"message_id": ""})()


class RefusingGrid(FakeGrid):
    """Stores the messages (ids set, as Flower's push does before pushing objects), then raises Flower's
    ObjectPushError for one object, as the SuperLink's refusal of an object 'not pre-registered' does."""

    def __init__(self, ready, *, store=True):
        super().__init__(ready)
        self.store = store

    def push_messages(self, messages):
        from flwr.supercore.inflatable.inflatable_utils import ObjectPushError

        start = len(self.pushed)
        self.pushed.extend(messages)
        if self.store:
            for i, m in enumerate(messages):
                m.metadata.message_id = f"id{start + i}"
        raise ObjectPushError("283c", 1, "session")


def test_a_refused_object_of_stored_messages_still_waits_for_their_replies(sleeps):
    grid = RefusingGrid(ready=[1, 2])
    polling_grid = PollingGrid(grid)
    replies = polling_grid.send_and_receive([_Msg(), _Msg()])
    assert sorted(r.metadata.reply_to_message_id for r in replies) == ["id0", "id1"]
    assert polling_grid.refused_pushes == 1


def test_a_refused_push_of_messages_never_stored_raises():
    from flwr.supercore.inflatable.inflatable_utils import ObjectPushError

    with pytest.raises(ObjectPushError, match="283c"):
        PollingGrid(RefusingGrid(ready=[1], store=False)).send_and_receive([_Msg()])
