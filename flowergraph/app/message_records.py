"""What travels on flowergraph's Message-API face: Flower's own record layout, and its mapping to the core's values.

flowergraph's methods are written once (the strategies' parts and the clients, :mod:`flowergraph.strategies`,
:mod:`flowergraph.clients`); each *face* carries their exchanges over Flower. The legacy face uses Flower's legacy
records (its fit and evaluate instructions' arrays and config, through the adapter in :mod:`flowergraph.app.loop`).
The Message-API face uses the layout of Flower's own Message-API strategies and quickstarts:

=====================  =============================================  ============================================
message type           server -> client content                       client -> server content
=====================  =============================================  ============================================
``train``              ``arrays`` (ArrayRecord), ``config``            ``arrays``, ``metrics`` (MetricRecord with
                       (ConfigRecord), [``fg.settings``]              ``num-examples``), [``fg.info``]
``evaluate``           ``arrays``, ``config``                         ``metrics`` (with ``num-examples``,
                                                                      ``loss``), [``fg.info``]
``query.fg_identity``  ``config`` (flowergraph's identity request)    ``config`` (the node's partition, model keys)
``query.fg_phase``     ``config`` (a phase: ``fg.phase`` names it),   ``config`` (the phase's reply), ``arrays``
                       ``arrays`` (its arrays, its model's)
``query.fg_model``     ``config``                                     ``arrays`` (the client's initial model)
=====================  =============================================  ============================================

* **Arrays are named.** An ArrayRecord's keys are the arrays' state-dict names where the sender knows them (the
  server: the names the config's :data:`~flowergraph.wire.KEYS` gives, else its model's; a client: the names of
  what it shares), else their positions ``"0"``, ``"1"``, ... . The order is the core's order either way.
* **Metrics** are MetricRecord values (int, float); anything else a client reports (strings, booleans, the names
  of the arrays it sent) travels in the optional ConfigRecord ``fg.info``, so that Flower's own strategies, which
  want exactly one ArrayRecord and one MetricRecord per reply, can read ours.
* **Settings.** A flowergraph Strategy class (:mod:`flowergraph.serverapp`) sends what it decided (the run-config
  keys of its arguments that differ from their defaults) with every message, as the ConfigRecord ``fg.settings``;
  a client given one builds itself from it (and its node config) and ignores the run config, which then belongs to
  the user's app. Without one (flowergraph's own ServerApp, Flower's stock strategies) the client reads the
  flowergraph keys of the run config, leaving out the keys it does not know.
* **Bookkeeping is not a metric**: a reply's partition id and the sizes it trained or evaluated on
  (:data:`BOOKKEEPING`, also prefixed ``eval_``) travel in ``fg.info``, so Flower's stock strategies do not
  average them into their metrics.
* The config of a ``train`` or ``evaluate`` message is the core's, unchanged; a config from one of Flower's own
  strategies (no :data:`~flowergraph.wire.SERVER_ROUND`, but Flower's ``server-round``) is given the core's name
  for the round too.
* Phases are ``query`` messages, as they are ``get_properties`` messages on the legacy face: Flower's client mods
  for training messages (clipping, SecAgg+) leave them alone.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict  # noqa: F401 (Array: as before)

from .. import wire
from ..wire.npy import from_numpy, to_numpy

ARRAYS, CONFIG, METRICS, INFO = "arrays", "config", "metrics", "fg.info"
SETTINGS = "fg.settings"  # what a flowergraph Strategy class decided: the clients' settings (see the table)
# What a client reports that is bookkeeping, not a metric (its partition, the sizes it evaluated or trained on):
# in ``fg.info``, never in the MetricRecord, so that Flower's own strategies average only real metrics.
BOOKKEEPING = (wire.PARTITION_ID, wire.NUM_TRAIN, wire.NUM_VAL, wire.NUM_TEST, wire.BATCH_SIZE)
NUM_EXAMPLES = "num-examples"  # Flower's Message-API strategies weigh by this key by default
FLOWER_ROUND = "server-round"  # what Flower's Message-API strategies put in a train/evaluate config
TRAIN, EVALUATE = "train", "evaluate"
IDENTITY, PHASE, MODEL = "query.fg_identity", "query.fg_phase", "query.fg_model"
ACTIONS = {IDENTITY: "fg_identity", PHASE: "fg_phase", MODEL: "fg_model"}


def positional(keys: Sequence[str]) -> bool:
    """Whether ``keys`` are the positions ``"0"``, ``"1"``, ... (the arrays travel unnamed)."""
    return list(keys) == [str(i) for i in range(len(keys))]


def array_record(arrays: Sequence[np.ndarray], names: Sequence[str] | None = None) -> ArrayRecord:
    """``arrays`` as an ArrayRecord keyed by ``names`` (positions where None or of another length)."""
    arrays = [np.asarray(a) for a in arrays]
    keys = (
        [str(k) for k in names]
        if names is not None and len(names) == len(arrays) and len(set(names)) == len(arrays)
        else [str(i) for i in range(len(arrays))]
    )
    return ArrayRecord({k: from_numpy(a) for k, a in zip(keys, arrays)})


def record_arrays(record: ArrayRecord) -> tuple[list[np.ndarray], list[str]]:
    """The arrays of ``record`` in order, and their keys (decoded by :func:`flowergraph.wire.npy.to_numpy`: each
    header parsed once, after the ``ast.parse`` lock, :mod:`flowergraph.storage._astlock`)."""
    keys = list(record.keys())
    return [to_numpy(record[k]) for k in keys], keys


def config_record(values: Mapping[str, Any]) -> ConfigRecord:
    return ConfigRecord({str(k): v for k, v in values.items()})


def values_content(values: Mapping[str, Any]) -> RecordDict:
    """A query's values (an identity request or reply, a phase message or reply: :mod:`flowergraph.wire`) as
    records: the arrays in the ArrayRecord ``arrays`` under their keys (``fg.a0``, ``fg.m0``, ...), everything
    else in the ConfigRecord ``config``."""
    arrays = {str(k): from_numpy(np.asarray(v)) for k, v in values.items() if isinstance(v, np.ndarray)}
    content = RecordDict({CONFIG: config_record({k: v for k, v in values.items() if not isinstance(v, np.ndarray)})})
    if arrays:
        content[ARRAYS] = ArrayRecord(arrays)
    return content


def content_values(content: RecordDict) -> dict[str, Any]:
    """:func:`values_content`'s values back (the arrays as numpy arrays)."""
    values = dict(content.config_records[CONFIG]) if CONFIG in content.config_records else {}
    if ARRAYS in content.array_records:
        values.update({k: to_numpy(a) for k, a in content.array_records[ARRAYS].items()})
    return values


def split_metrics(values: Mapping[str, Any]) -> tuple[dict[str, int | float], dict[str, Any]]:
    """(what a MetricRecord holds: ints and floats, booleans excluded; everything else)."""
    numbers, other = {}, {}
    for key, value in values.items():
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
            numbers[str(key)] = value.item() if isinstance(value, np.generic) else value
        else:
            other[str(key)] = value
    return numbers, other


def reply_content(
    arrays: Sequence[np.ndarray] | None,
    names: Sequence[str] | None,
    num_examples: int,
    metrics: Mapping[str, Any],
    loss: float | None = None,
) -> RecordDict:
    """A train (``arrays`` given) or evaluate reply: arrays, ``metrics`` with ``num-examples`` (and ``loss``),
    ``fg.info`` with what is not a number."""
    numbers, other = split_metrics(metrics)
    for key in list(numbers):
        if key.removeprefix(wire.EVAL_PREFIX) in BOOKKEEPING:
            other[key] = numbers.pop(key)
    numbers[NUM_EXAMPLES] = int(num_examples)
    if loss is not None:
        numbers.setdefault(wire.LOSS, float(loss))
    content = RecordDict()
    if arrays is not None:
        content[ARRAYS] = array_record(arrays, names)
    content[METRICS] = MetricRecord(numbers)
    if other:
        content[INFO] = config_record(other)
    return content


def reply_metrics(content: RecordDict) -> tuple[int, dict[str, Any]]:
    """(number of examples, the client's metrics as the core reads them) from a train or evaluate reply."""
    metrics: dict[str, Any] = {}
    if METRICS in content.metric_records:
        metrics.update(dict(content.metric_records[METRICS]))
    elif content.metric_records:  # a stock client may name its record otherwise
        metrics.update(dict(next(iter(content.metric_records.values()))))
    if INFO in content.config_records:
        metrics.update(dict(content.config_records[INFO]))
    num = metrics.pop(NUM_EXAMPLES, 0)
    return int(num), metrics


def request_settings(content: RecordDict) -> dict[str, Any] | None:
    """The server's settings a message carries (``fg.settings``), or None."""
    if SETTINGS not in content.config_records:
        return None
    return dict(content.config_records[SETTINGS])


def request_config(content: RecordDict) -> dict[str, Any]:
    """A train or evaluate message's config as the core reads it (Flower's ``server-round`` named as ours too)."""
    config = dict(content.config_records[CONFIG]) if CONFIG in content.config_records else {}
    if wire.SERVER_ROUND not in config and FLOWER_ROUND in config:
        config[wire.SERVER_ROUND] = config[FLOWER_ROUND]
    return config


def request_arrays(content: RecordDict) -> tuple[list[np.ndarray], list[str]]:
    """A train or evaluate message's arrays (the record ``arrays``, or the only ArrayRecord there is)."""
    if ARRAYS in content.array_records:
        return record_arrays(content.array_records[ARRAYS])
    if len(content.array_records) == 1:
        return record_arrays(next(iter(content.array_records.values())))
    found = ", ".join(content.array_records) or "none"
    raise ValueError(
        f"a flowergraph client wants one ArrayRecord (named {ARRAYS!r}) in a train or evaluate "
        f"message; this one has: {found}"
    )
