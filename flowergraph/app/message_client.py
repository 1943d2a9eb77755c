"""flowergraph's clients as Message-API ClientApp handlers (``@app.train()``, ``@app.evaluate()``, ``@app.query()``).

Each handler builds the node's client from the run and node configuration exactly as the legacy ClientApp does
(:func:`flowergraph.app.node_client.build_client`: the method's client with its checkpoint, DP, fault and secure-
aggregation wrappers, the node's data cached per process) and calls it; the records are those of
:mod:`flowergraph.app.message_records`. So a method's client code is written once and both faces run it.

Your own ClientApp, in Flower's style::

    from flwr.clientapp import ClientApp
    from flowergraph.app import message_client as fg

    app = ClientApp()
    app.train()(fg.train)
    app.evaluate()(fg.evaluate)
    fg.register_queries(app)   # identity, phases, initial model (the methods with phases need them)

or the ready-made one: ``app = flowergraph.app.message_client.client_app()`` (with your Message-API mods:
``client_app(mods=[fixedclipping_mod])``). The run configuration (the keys flowergraph's ServerApp reads) and the
node configuration (``partition-id``, ``num-partitions``, ...) come from the Context, as for the legacy ClientApp.

A client that refuses the run (bad node config, a missing dataset, ...) raises with
:data:`~flowergraph.wire.CONFIG_ERROR_MARKER` in its message; Flower sends that back as the reply's error and a
flowergraph strategy fails the run with it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from . import message_records as rec
from .node_client import tidy_mod

_MODULE_T0 = time.time()  # when this module was imported (message timing, flowergraph.app.timing)


def _client(context: Context, msg: Message | None = None):
    """The node's client for this message (the legacy ClientApp's, wrappers included), built from the settings the
    message carries (``fg.settings``: a flowergraph Strategy class decided them), else from the run config."""
    from ..errors import ConfigError, FlowergraphError
    from ..tasks.compute import configure_torch
    from ..wire import CONFIG_ERROR_MARKER
    from .node_client import build_client

    configure_torch()
    try:
        return build_client(context, rec.request_settings(msg.content) if msg is not None else None)
    except FlowergraphError as exc:
        raise ConfigError(f"{CONFIG_ERROR_MARKER} {exc}") from exc


def _answer(msg: Message, context: Context, here: Callable[[Message, Context], Message]) -> Message:
    """In deployment, ``msg`` is answered in the node's warm worker (:mod:`flowergraph.app.worker`: torch, PyG and
    the node's data stay loaded between messages, as in flowergraph's own ClientApp), by :data:`local_app`; here,
    by ``here``, when there is none (simulation, or no worker could be used)."""
    from . import worker

    return worker.run_message(
        msg, context, "flowergraph.app.message_client:local_app", here, label="message-api", module_t0=_MODULE_T0
    )


def train(msg: Message, context: Context) -> Message:
    """A ``train`` message: load the arrays, train, reply with the shared arrays and the metrics."""
    return _answer(msg, context, _train)


def evaluate(msg: Message, context: Context) -> Message:
    """An ``evaluate`` message: load the arrays, evaluate, reply with the metrics (``num-examples``, ``loss``)."""
    return _answer(msg, context, _evaluate)


def query(msg: Message, context: Context) -> Message:
    """``query.fg_identity`` / ``query.fg_phase``: the client's properties (identity) or a phase's reply;
    ``query.fg_model``: its initial model."""
    return _answer(msg, context, _query)


def _train(msg: Message, context: Context) -> Message:
    from .. import wire

    arrays, names = rec.request_arrays(msg.content)
    config = rec.request_config(msg.content)
    out, num_examples, metrics = _client(context, msg).fit(arrays, config)
    try:
        keys = wire.decode_keys(metrics, len(out)) if wire.KEYS in metrics else None
    except ValueError:  # the names of what the arrays encode (CKKS ciphertexts of a named model): they stay in
        keys = None  # the metrics for the server, and the arrays travel by position
    if keys is None and not rec.positional(names) and len(names) == len(out):
        keys = names  # the same arrays back, under the names they came with
    return Message(rec.reply_content(out, keys, num_examples, metrics), reply_to=msg)


def _evaluate(msg: Message, context: Context) -> Message:
    arrays, _ = rec.request_arrays(msg.content)
    loss, num_examples, metrics = _client(context, msg).evaluate(arrays, rec.request_config(msg.content))
    return Message(rec.reply_content(None, None, num_examples, metrics, loss=loss), reply_to=msg)


def _query(msg: Message, context: Context) -> Message:
    config = rec.content_values(msg.content)
    client = _client(context, msg)
    if msg.metadata.message_type == rec.MODEL:
        content = RecordDict({rec.ARRAYS: _model_record(client, config)})
    else:
        content = rec.values_content(client.get_properties(config))
    return Message(content, reply_to=msg)


def initial_arrays(run_config: dict[str, Any] | None = None, partition_id: int = 0) -> ArrayRecord:
    """The initial global model flowergraph's clients build for ``run_config`` (its flowergraph keys; none: every
    default) as client ``partition_id`` (as a flowergraph strategy asks one client for it), keyed by the model's
    state-dict names: the ``initial_arrays`` to give one of Flower's own strategies that drives flowergraph's
    handlers."""
    from ..settings import parse_run_config

    settings = dict(run_config or {})
    nodes = parse_run_config(settings, allow_unknown=True).effective_num_clients
    context = Context(
        run_id=0,
        node_id=0,
        node_config={"partition-id": int(partition_id), "num-partitions": nodes},
        state=RecordDict(),
        run_config=settings,
    )
    return _model_record(_client(context), {})


def _model_record(client, config: dict[str, Any]) -> ArrayRecord:
    """The client's initial model, keyed by the state-dict names its identity reply gives (positions if none)."""
    from .. import wire

    arrays = client.get_parameters(config)
    identity = client.get_properties(dict(wire.IDENTITY_REQUEST))
    keys = wire.decode_keys(identity, len(arrays)) if wire.KEYS in identity else None
    return rec.array_record(arrays, keys)


def register_queries(app: ClientApp, handler: Callable[[Message, Context], Message] | None = None) -> ClientApp:
    """Register :func:`query` (or ``handler``) for flowergraph's three query actions on ``app``."""
    for action in rec.ACTIONS.values():
        app.query(action)(handler or query)
    return app


def client_app(mods: list[Callable] | None = None, train_mods: list[Callable] | None = None) -> ClientApp:
    """A ClientApp with flowergraph's handlers for every message its strategies send. ``mods`` act on every
    message (as ``ClientApp(mods=...)``'s do); ``train_mods`` on the ``train`` messages only
    (``@app.train(mods=...)``): where Flower's update mods belong (``LocalDpMod``, ``fixedclipping_mod``), since
    they want one ArrayRecord in every message they see and flowergraph's ``query`` messages carry none."""
    app = ClientApp(mods=list(mods or []))
    app.train(mods=list(train_mods or []))(train)
    app.evaluate()(evaluate)
    return register_queries(app)


def is_message_face(msg: Message) -> bool:
    """Whether ``msg`` is in the Message-API layout (not the legacy ``fitins.*`` / ``evaluateins.*`` records)."""
    kind = msg.metadata.message_type
    if kind in rec.ACTIONS:
        return True
    if kind in (rec.TRAIN, rec.EVALUATE):  # Message API: arrays, and no legacy record (SecAgg+'s stages carry none)
        content = msg.content
        names = [*content.array_records, *content.config_records, *content.metric_records]
        legacy = any(name.startswith(("fitins.", "evaluateins.", "secaggplus")) for name in names)
        return bool(content.array_records) and not legacy
    return False


def _local_app(mods: list[Callable] | None = None) -> ClientApp:
    """flowergraph's handlers answering here, in this process."""
    app = ClientApp(mods=list(mods or []))
    app.train()(_train)
    app.evaluate()(_evaluate)
    return register_queries(app, _query)


local_app = _local_app([tidy_mod])  # what a node's worker runs for a Message-API ClientApp's handlers
_APP: ClientApp | None = None


def face_mod(msg: Message, context: Context, call_next: Callable[[Message, Context], Message]) -> Message:
    """The repository ClientApp's mod that serves both faces: a Message-API message goes to :func:`client_app`'s
    handlers, a legacy one on to the legacy handler (:mod:`flowergraph.app.legacy`)."""
    global _APP
    if not is_message_face(msg):
        return call_next(msg, context)
    if _APP is None:
        _APP = _local_app()  # the repository ClientApp's own mods have already sent the message to the worker
    return _APP(msg, context)
