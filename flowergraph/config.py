"""The run configuration: every key, its default, its type and its check (Flower-free).

The keys every run has are :data:`COMMON_OPTIONS` below; each registered method adds its own, named
``<method>.<key>`` (:mod:`flowergraph.methods`). Together they are the single source of truth for
``[tool.flwr.app.config]`` in ``pyproject.toml`` (a test checks they agree), for the README's configuration
reference (``python -m flowergraph.config --markdown``, grouped as the README lists them) and for validation:
:func:`parse_run_config` turns Flower's ``context.run_config`` (or any mapping) into a :class:`RunSettings` and
raises :class:`~flowergraph.errors.ConfigError` naming the bad value and the valid choices before anything is
trained.

Renamed keys keep working for now: :data:`RENAMED` maps an old name to its new one; a run configuration, a
preset or ``--set`` that uses the old name gets a ``DeprecationWarning`` naming the new one. (``flwr run
--run-config`` itself only knows the keys in ``pyproject.toml``, which lists the new names.)
"""

from __future__ import annotations

import argparse
import os
import warnings
from types import SimpleNamespace
from typing import Any, Mapping

from .errors import ConfigError
from .options import Option, at_least, left_open, right_open, within
from .tasks.datasets import canonical_name, dataset_info
from .tasks.models import MODELS
from .tasks.partition import PARTITIONERS
from .tasks.synthetic import CSBMParams
from .tasks.training import OPTIMIZERS, TrainConfig

# Defaults of the Flower-free building blocks are the run-config defaults (one source of truth).
_CSBM = CSBMParams()
_TRAIN = TrainConfig()
WEIGHTINGS = ("train-size", "batch-size", "uniform")
AGGREGATORS = ("mean", "median", "trimmed-mean", "krum", "multi-krum")
SECURE_AGG = ("none", "secagg+", "ckks")
DP_MODES = ("none", "central-server", "central-client", "local")

# Group names, in the order the README lists them (a method's keys follow under the method's name).
GROUPS = {
    "run": "The run",
    "node-task": "Node classification (every node-level method)",
    "federation": "Federation: sampling, averaging, evaluation",
    "reliability": "Reliability: timeouts, checkpoints, faults",
    "data-owners": "Data owners: partition files, keys, client state",
    "privacy": "Privacy and robustness of the training rounds: secure aggregation, differential privacy",
    "synthetic": "Built-in synthetic graph",
}


def _method_names() -> tuple[str, ...]:
    from .methods import methods

    return tuple(methods())


COMMON_OPTIONS: tuple[Option, ...] = (
    # -- the run
    Option("method", "fedavg", "Federated method (the keys of each method follow its name below).", _method_names),
    Option("dataset", "synthetic", "Dataset name (case-insensitive); `synthetic` is the built-in CSBM graph. "
           "Graph-level methods also take a setting (`CHEM`, `BIO-CHEM`, `BIO-CHEM-SN`, `BIO-SN-CV`) or a "
           "comma-separated list of TU datasets, one dataset per client.", normalize=lambda v: normalize_dataset(v)),
    Option("data-dir", "", "Folder with raw files in PyG layout (`<dir>/Planetoid/Cora/raw/...`); empty: "
           "`$FLOWERGRAPH_DATA`, else download into the cache. May be read-only; a node may set its own."),
    Option("split", "auto", "Split preset: `public`, `random[:0.6/0.2/0.2]`, `per-class[:20/500/1000]`, `auto` "
           "(public for Planetoid, random 60/20/20 otherwise)."),
    Option("seed", 0, "Seed of the split, partition, model initialisation, local training and client sampling.",
           check=at_least(0)),
    Option("num-clients", 3, "Number of clients (must equal the number of SuperNodes / `num-partitions`).",
           check=at_least(1)),
    Option("rounds", 2, "Training rounds.", check=at_least(1)),
    # -- node classification
    Option("partitioner", "dirichlet", "Node partitioner.", PARTITIONERS, group="node-task"),
    Option("beta", 10000.0, "Dirichlet concentration (10000 ~ IID, 1 strongly non-IID).",
           check=at_least(0, False), group="node-task"),
    Option("min-partition-size", 10, "Dirichlet: minimum nodes per client.", check=at_least(1), group="node-task"),
    Option("model", "gcn", "Node classifier.", MODELS, group="node-task"),
    Option("hidden", 16, "Hidden units per layer.", check=at_least(1), group="node-task"),
    Option("layers", 2, "Graph convolution layers.", check=at_least(1), group="node-task"),
    Option("dropout", 0.5, "Dropout after hidden layers.", check=right_open(0.0, 1.0), group="node-task"),
    Option("input-dropout", 0.0, "Dropout on input features (Kipf & Welling use 0.5).", check=right_open(0.0, 1.0),
           group="node-task"),
    Option("heads", 8, "GAT attention heads in hidden layers.", check=at_least(1), group="node-task"),
    Option("local-steps", _TRAIN.local_steps, "Full-batch local steps (= local epochs) per round.",
           check=at_least(1), group="node-task"),
    Option("optimizer", _TRAIN.optimizer, "Local optimizer (re-created each round).", OPTIMIZERS, group="node-task"),
    Option("lr", _TRAIN.lr, "Learning rate.", check=at_least(0.0, False), group="node-task"),
    Option("weight-decay", _TRAIN.weight_decay, "L2 weight decay.", check=at_least(0.0), group="node-task"),
    Option("momentum", _TRAIN.momentum, "SGD momentum (restarts each round).", check=right_open(0.0, 1.0),
           group="node-task"),
    # -- federation
    Option("weighting", "train-size", "Averaging weights: training-set size, reported mini-batch size, or "
           "uniform (the FedGCN reference code).", WEIGHTINGS, group="federation"),
    Option("fraction-fit", 1.0, "Fraction of clients sampled for training each round (seeded per round by `seed`).",
           check=left_open(0.0, 1.0), group="federation"),
    Option("fraction-evaluate", 1.0, "Fraction of clients sampled for evaluation.", check=within(0.0, 1.0),
           group="federation"),
    Option("min-clients", 0, "Fewest valid updates that still change the global model (0 means 1); below it the "
           "round keeps the old model.", check=at_least(0), group="federation"),
    Option("eval-every", 1, "Client-side evaluation every N rounds (and always after the last).", check=at_least(1),
           group="federation"),
    Option("fused-eval", True, "Evaluate each round's global model inside the next round's fit message (one "
           "message per client per round instead of two; same numbers). The last round is evaluated separately. "
           "Only with fraction-fit = fraction-evaluate = 1; otherwise a separate evaluate phase is used.",
           group="federation"),
    Option("aggregator", "mean", "How valid updates are combined: the weighted mean (`weighting`), or a "
           "Byzantine-robust rule from Flower's aggregate functions: coordinate-wise `median`, `trimmed-mean`, "
           "`krum` (the one update closest to its neighbours), `multi-krum` (the best-scored updates averaged).",
           AGGREGATORS, group="federation"),
    Option("aggregator-trim", 0.1, "trimmed-mean: fraction of largest and of smallest values dropped per "
           "coordinate.", check=right_open(0.0, 0.5), group="federation"),
    Option("aggregator-malicious", 1, "krum / multi-krum: the number f of attackers assumed (Krum needs at least "
           "2f + 3 clients per round).", check=at_least(0), group="federation"),
    Option("aggregator-keep", 0, "multi-krum: updates averaged (0: n - f).", check=at_least(0), group="federation"),
    Option("server-eval", False, "Also evaluate the global model on the global test data on the server (the "
           "server then loads the dataset; simulation/benchmarks only).", group="federation"),
    # -- reliability
    Option("round-timeout", 600.0, "Seconds a training round waits for its clients' replies (fit, evaluate, and "
           "per-round method phases); a client that has not answered by then counts as failed for that round.",
           check=at_least(0.0, False), group="reliability"),
    Option("init-timeout", 600.0, "Seconds to wait for all clients to connect and to answer the one-off start-up "
           "messages (identity, initial model, one-off method phases such as FedGCN's exchange, restoring client "
           "state); simulation start-up (Ray, torch) counts here, not in round-timeout.",
           check=at_least(0.0, False), group="reliability"),
    Option("poll-interval", 0.05, "Longest wait (s) between the server's polls for client replies; polls start "
           "after 2 ms and back off to this. 0 keeps Flower's own fixed polling (0.1 s in simulation, 3 s in "
           "deployment), which rounds every fit/evaluate phase up to that tick.", check=at_least(0.0),
           group="reliability"),
    Option("out-dir", "", "Results folder for this run; empty: `results/<method>-<dataset>-<time>` in the "
           "working directory of the ServerApp (when resuming: the checkpointed run's folder).", group="reliability"),
    Option("checkpoint-every", 0, "Save the server's state (global model, strategy state, round, records) and "
           "every client's persistent state every N rounds and after the last, to "
           "`<out-dir>/checkpoints/round-K.npz` and each client's `state-dir`; 0 = off.", check=at_least(0),
           group="reliability"),
    Option("resume-from", "", "Continue a run from a checkpoint file or a run's out-dir (its latest checkpoint); "
           "every setting but rounds, out-dir, checkpoint-every, timeouts, poll-interval, data-dir, key-file, "
           "state-dir, partition-dir, inject-faults and fused-eval must equal the checkpointed run's.",
           group="reliability"),
    Option("inject-faults", "", "Fault injection for robustness studies: comma-separated `kind:partition@round`, "
           "e.g. `raise:1@2,nan:0@3`, `@*` = every round; kinds: `raise`, `nan`, `shape`, `exit`, `hang`, and the "
           "poisoning kinds `scale`, `flip` (README, Reliability).",
           group="reliability"),
    # -- data owners
    Option("partition-dir", "", "A folder written by `python -m flowergraph.partition export`: client k reads only "
           "its own file `client-K.npz` and never the global dataset (a node may name its own file with "
           "node-config `partition-file`); empty: every client cuts its part out of the global graph.",
           group="data-owners"),
    Option("key-file", "", "The data owners' CKKS key file, for runs that encrypt (`secure-agg=ckks`, "
           "FedGCN with `fedgcn.he=true`); node config may set it per node (deployment: never in the run config); the "
           "simulation launcher creates one per run when empty.", group="data-owners"),
    Option("state-dir", "", "Where each client saves its persistent state at checkpoints (node-local; node config "
           "may set it per node); empty: `$FLOWERGRAPH_CACHE/client-state` (the simulation launcher uses "
           "`<out-dir>/client-state`).", group="data-owners"),
    # -- privacy of the training rounds
    Option("secure-agg", "none", "Secure aggregation of the training rounds' updates: `secagg+` (Flower's "
           "SecAgg+: masked updates, the server sees only their weighted sum; >= 3 clients per round) or `ckks` "
           "(clients encrypt their weighted updates under the data owners' CKKS key; the server adds ciphertexts "
           "and one client decrypts the sum: works with 2 clients; needs `key-file`).", SECURE_AGG,
           group="privacy"),
    Option("secagg-num-shares", 1.0, "SecAgg+: shares of each client's secret (a count, or a fraction of the "
           "sampled clients when <= 1).", check=at_least(0.0, False), group="privacy"),
    Option("secagg-reconstruction-threshold", 0.67, "SecAgg+: shares needed to rebuild a dropped client's "
           "secret (a count, or a fraction of num-shares when <= 1).", check=at_least(0.0, False), group="privacy"),
    Option("secagg-clipping-range", 8.0, "SecAgg+: parameters are clipped to [-range, range] before quantisation.",
           check=at_least(0.0, False), group="privacy"),
    Option("secagg-quantization-range", 4194304, "SecAgg+: quantisation levels (2^22).", check=at_least(2),
           group="privacy"),
    Option("secagg-max-weight", 0.0, "SecAgg+: the largest weight a client may give its update (its training-set "
           "size with weighting=train-size); a client above it refuses the run (Flower would clip its update), a "
           "much larger bound costs precision. 0: automatic (1 with weighting=uniform; else the largest client "
           "size the simulation launcher finds in the data, or Flower's default 1000).", check=at_least(0.0),
           group="privacy"),
    Option("dp", "none", "Differential privacy of the training rounds (Flower's DP): `central-server` (the server "
           "clips each update and adds Gaussian noise to the mean), `central-client` (clients clip, the server adds "
           "the noise; combines with secure aggregation), `local` (each client clips its own update and adds "
           "Gaussian noise before sending it).", DP_MODES, group="privacy"),
    Option("dp-noise-multiplier", 1.0, "Central DP: noise standard deviation / clipping norm (per sampled-client "
           "mean).", check=at_least(0.0), group="privacy"),
    Option("dp-clipping-norm", 1.0, "DP: L2 bound of each client's model update.", check=at_least(0.0, False),
           group="privacy"),
    Option("dp-delta", 1e-5, "DP: delta of the reported (epsilon, delta) budget (local DP: of each release).",
           check=left_open(0.0, 1.0), group="privacy"),
    Option("dp-epsilon", 1.0, "Local DP: epsilon of each client's release per round (noise standard deviation "
           "= sensitivity x sqrt(2 ln(1.25 / delta)) / epsilon).", check=at_least(0.0, False),
           group="privacy"),
    Option("dp-sensitivity", 1.0, "Local DP: L2 sensitivity the noise is calibrated to (at least "
           "dp-clipping-norm).", check=at_least(0.0, False), group="privacy"),
    # -- the built-in synthetic graph
    Option("synthetic-nodes", _CSBM.num_nodes, "Synthetic CSBM: nodes.", check=at_least(2), group="synthetic"),
    Option("synthetic-classes", _CSBM.num_classes, "Synthetic CSBM: classes.", check=at_least(2), group="synthetic"),
    Option("synthetic-p-in", _CSBM.p_in, "Synthetic CSBM: edge probability within a class.", check=within(0.0, 1.0),
           group="synthetic"),
    Option("synthetic-p-out", _CSBM.p_out, "Synthetic CSBM: edge probability across classes.",
           check=within(0.0, 1.0), group="synthetic"),
    Option("synthetic-features", _CSBM.num_features, "Synthetic CSBM: feature dimension.", check=at_least(1),
           group="synthetic"),
    Option("synthetic-signal", _CSBM.signal, "Synthetic CSBM: class-mean norm / noise norm.", check=at_least(0.0),
           group="synthetic"),
)

# Keys that were renamed: old name -> new name (a DeprecationWarning names the new one).
RENAMED = {"hops": "fedgcn.hops", "he": "fedgcn.he"}


def normalize_dataset(value: str) -> str:
    """The canonical spelling of a dataset name, of a graph-level setting (``chem`` -> ``CHEM``) or of a
    comma-separated list of TU datasets (``mutag,bzr`` -> ``MUTAG,BZR``); ConfigError names the valid choices."""
    from .tasks.graphcls.data import SETTINGS, parse_graph_datasets

    text = str(value).strip()
    setting = next((k for k in SETTINGS if k.lower() == text.lower()), None)
    if setting is not None:
        return setting
    if "," in text:
        return ",".join(parse_graph_datasets(text))
    try:
        return canonical_name(text)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; graph-level settings {', '.join(SETTINGS)} (or a comma-separated list of graph "
                          f"datasets)") from None


def dataset_task(value: str) -> tuple[str, str]:
    """(task, family) of a normalised dataset value: a setting or a list is graph-level TU data."""
    from .tasks.graphcls.data import SETTINGS

    if "," in value or value in SETTINGS:
        return "graph", "TUDataset"
    info = dataset_info(value)
    return info.task, info.family


def natural_num_clients(method: str, dataset: str | None) -> int:
    """The number of clients a run has when none is given: one per dataset for a graph-level method given
    several datasets (a setting or a list), else the ``num-clients`` default."""
    from .methods import get_method

    default = next(o.default for o in COMMON_OPTIONS if o.key == "num-clients")
    if dataset and get_method(method).task == "graph":
        from .tasks.graphcls.data import parse_graph_datasets

        names = parse_graph_datasets(normalize_dataset(dataset))
        return len(names) if len(names) > 1 else default
    return default


def all_options() -> tuple[Option, ...]:
    """The common keys, then each registered method's own keys (in registration order)."""
    from .methods import methods

    out = list(COMMON_OPTIONS)
    for method in methods().values():
        out.extend(method.options)
    return tuple(out)


def option_by_key() -> dict[str, Option]:
    return {o.key: o for o in all_options()}


def __getattr__(name: str):  # OPTIONS / OPTION_BY_KEY / METHODS: computed, since plugins register late
    if name == "OPTIONS":
        return all_options()
    if name == "OPTION_BY_KEY":
        return option_by_key()
    if name == "METHODS":
        return _method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def defaults() -> dict[str, Any]:
    return {o.key: o.default for o in all_options()}


def canonical_key(key: str, *, stacklevel: int = 3) -> str:
    """``key``, or its new name when it was renamed (with a DeprecationWarning)."""
    new = RENAMED.get(key)
    if new is None:
        return key
    warnings.warn(f"run-config key {key!r} is deprecated; use {new!r}", DeprecationWarning, stacklevel=stacklevel)
    return new


def renamed_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with renamed keys under their new names; ConfigError when both names are given differently."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        new = canonical_key(key, stacklevel=4)
        if new != key and new in raw and raw[new] != value:
            raise ConfigError(f"run config sets both {key!r} (the old name of {new!r}) = {value!r} and {new!r} = "
                              f"{raw[new]!r}; use {new!r} only")
        if new == key and key in out:
            continue  # the old name already set it to the same value
        out[new] = value
    return out


class RunSettings:
    """Validated run configuration; attribute names are the common keys with ``-`` replaced by ``_``
    (``s.num_clients``); a method's keys: ``s["fedgcn.hops"]`` or ``s.of("fedgcn").hops``."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        key = name.replace("_", "-")
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"RunSettings({self._values!r})"

    def of(self, method: str | None = None) -> SimpleNamespace:
        """The keys of ``method`` (default: the run's method) without their prefix, ``-`` as ``_``."""
        prefix = f"{method or self.method}."
        return SimpleNamespace(**{k[len(prefix):].replace("-", "_"): v for k, v in self._values.items()
                                  if k.startswith(prefix)})

    @property
    def method_info(self):
        """The registered :class:`flowergraph.methods.Method` of this run."""
        from .methods import get_method

        return get_method(self.method)

    @property
    def task(self) -> str:
        return self.method_info.task

    @property
    def needs_key_file(self) -> bool:
        """Whether the data owners must hold a CKKS key file for this run (the method encrypts, or the training
        rounds are aggregated under CKKS)."""
        return self.method_info.key_file_needed(self) or self.secure_agg == "ckks"

    @property
    def secagg_weight_bound(self) -> float:
        """SecAgg+'s bound on a client's weight (Flower's ``max_weight``): ``secagg-max-weight``, or 1 with
        ``weighting=uniform``, else Flower's default 1000. A client whose weight exceeds it refuses the round
        (Flower would clip its scaled update silently)."""
        if self.secagg_max_weight > 0:
            return float(self.secagg_max_weight)
        return 1.0 if self.weighting == "uniform" else 1000.0

    @property
    def clients_per_round(self) -> int:
        """Clients sampled for training each round."""
        return max(1, int(round(self.fraction_fit * self.effective_num_clients)))

    # Specs derived from the settings, shared by the ServerApp, the ClientApp and the launcher.
    def graph_spec(self):
        from .tasks.federated_graph import GraphSpec

        return GraphSpec(
            dataset=self.dataset, data_dir=self.data_dir, split=self.split, seed=self.seed,
            synthetic=CSBMParams(num_nodes=self.synthetic_nodes, num_classes=self.synthetic_classes,
                                 p_in=self.synthetic_p_in, p_out=self.synthetic_p_out,
                                 num_features=self.synthetic_features, signal=self.synthetic_signal))

    def partition_spec(self):
        from .tasks.federated_graph import PartitionSpec

        if self.method_info.whole_graph:
            return PartitionSpec(partitioner="none", num_clients=1, seed=self.seed)
        return PartitionSpec(partitioner=self.partitioner, num_clients=self.num_clients, beta=self.beta,
                             min_size=self.min_partition_size, seed=self.seed)

    def train_config(self):
        return TrainConfig(local_steps=self.local_steps, optimizer=self.optimizer, lr=self.lr,
                           weight_decay=self.weight_decay, momentum=self.momentum)

    @property
    def effective_num_clients(self) -> int:
        """Clients the federation has: 1 for a method where one client holds the whole graph (``centralized``)."""
        return 1 if self.method_info.whole_graph else self.num_clients


def parse_run_config(raw: Mapping[str, Any], *, allow_unknown: bool = False) -> RunSettings:
    """Validate a run configuration (missing keys take their defaults).

    Raises ConfigError for an unknown key (unless ``allow_unknown``: a user's own app may add keys), a value
    of the wrong type, an unknown choice, an out-of-range number or an inconsistent combination.
    """
    by_key = option_by_key()
    values = {k: o.default for k, o in by_key.items()}
    for key, value in renamed_keys(raw).items():
        option = by_key.get(key)
        if option is None:
            if allow_unknown:
                continue
            raise ConfigError(f"unknown run-config key {key!r}; valid keys: {', '.join(by_key)}")
        values[key] = option.parse(value)
    settings = RunSettings(values)
    _check_combination(settings)
    return settings


def _check_combination(s: RunSettings) -> None:
    method = s.method_info
    task, family = dataset_task(s.dataset)
    if method.task == "node" and task != "node":
        raise ConfigError(f"method {s.method!r} does node classification but dataset {s.dataset!r} is "
                          f"graph-classification data; valid node datasets: Cora, CiteSeer, PubMed, synthetic")
    if method.task == "graph" and task != "graph":
        from .tasks.datasets import GRAPH_DATASETS
        from .tasks.graphcls.data import SETTINGS

        raise ConfigError(f"method {s.method!r} does graph classification but dataset {s.dataset!r} is a "
                          f"node-classification dataset; valid choices: settings {', '.join(SETTINGS)}, TU datasets "
                          f"{', '.join(GRAPH_DATASETS)}, or a comma-separated list of them")
    if method.task == "graph" and s.partition_dir:
        raise ConfigError(f"partition-dir={s.partition_dir!r}: partition files hold node-level data; graph-level "
                          f"method {s.method!r} reads each client's own datasets (data-dir)")
    if s.data_dir:
        path = os.path.expanduser(s.data_dir)
        if not os.path.isdir(path):
            raise ConfigError(f"data-dir {s.data_dir!r} does not exist or is not a directory")
    if s.partition_dir and not os.path.isdir(os.path.expanduser(s.partition_dir)):
        raise ConfigError(f"partition-dir {s.partition_dir!r} does not exist or is not a directory")
    if s.min_clients > s.effective_num_clients:
        raise ConfigError(f"min-clients={s.min_clients} exceeds num-clients={s.effective_num_clients}")
    sampled = max(1, int(round(s.fraction_fit * s.effective_num_clients)))
    if not method.whole_graph and s.min_clients > sampled:
        raise ConfigError(f"min-clients={s.min_clients} but fraction-fit={s.fraction_fit} samples only {sampled} of "
                          f"num-clients={s.num_clients} per round, so the model would never change; lower "
                          f"min-clients or raise fraction-fit")
    _check_privacy(s, method)
    from .faults import parse_faults

    parse_faults(s.inject_faults, num_clients=s.effective_num_clients, rounds=s.rounds)
    if s.dataset == "synthetic":
        s.graph_spec().synthetic.validate()
    from .tasks.splits import parse_split

    if task == "node":
        parse_split(s.split, family)
    if method.check is not None:
        method.check(s)


def _check_privacy(s: RunSettings, method) -> None:
    """Combinations of secure aggregation, differential privacy and robust aggregation that cannot work."""
    per_round = s.clients_per_round
    if s.secure_agg != "none" and not method.summable_updates:
        raise ConfigError(f"secure-agg={s.secure_agg!r}: method {s.method!r} declares that its updates cannot be "
                          f"summed (secure aggregation reveals only their sum)")
    if s.secure_agg == "secagg+" and per_round < 3:
        raise ConfigError(f"secure-agg='secagg+' needs at least 3 clients per round (Flower's SecAgg+ protocol), "
                          f"this run has {per_round}; use secure-agg='ckks', which works with 2")
    shares, threshold = s.secagg_num_shares, s.secagg_reconstruction_threshold

    def count(v):
        return int(v) if float(v).is_integer() else v

    for key, value in (("secagg-num-shares", shares), ("secagg-reconstruction-threshold", threshold)):
        if value > 1 and not float(value).is_integer():
            raise ConfigError(f"{key}={value!r}: give a fraction in (0, 1] or a whole count")
    if 1 < shares < 3:
        raise ConfigError(f"secagg-num-shares={count(shares)}: a count must be at least 3 (or give a fraction in "
                          f"(0, 1] of the sampled clients)")
    if shares > 1 and threshold >= shares:
        raise ConfigError(f"secagg-reconstruction-threshold={count(threshold)} must be below secagg-num-shares="
                          f"{count(shares)}")
    if s.secure_agg != "none" and s.aggregator != "mean":
        raise ConfigError(f"aggregator={s.aggregator!r} needs every client's update, but secure-agg="
                          f"{s.secure_agg!r} gives the server only their sum; valid with secure aggregation: "
                          f"aggregator='mean'")
    if s.secure_agg != "none" and s.dp == "central-server":
        raise ConfigError(f"dp='central-server' clips each client's update on the server, which secure-agg="
                          f"{s.secure_agg!r} hides; use dp='central-client' (clients clip, the server adds noise)")
    if s.secure_agg != "none" and s.weighting == "batch-size":
        raise ConfigError("weighting='batch-size' with secure aggregation: each client weighs its own update, "
                          "with its training-set size or uniformly; valid: weighting='train-size' or 'uniform'")
    if s.dp in ("central-server", "central-client") and s.weighting != "uniform":
        raise ConfigError(f"dp={s.dp!r} calibrates its noise to the unweighted mean of the sampled clients' "
                          f"clipped updates; set weighting='uniform' (got {s.weighting!r})")
    if s.dp in ("central-server", "central-client") and s.aggregator != "mean":
        raise ConfigError(f"dp={s.dp!r} adds noise calibrated to a mean; aggregator={s.aggregator!r} is not one")
    if s.dp == "local" and s.dp_sensitivity < s.dp_clipping_norm:
        raise ConfigError(f"dp='local': dp-sensitivity={s.dp_sensitivity} is below dp-clipping-norm="
                          f"{s.dp_clipping_norm}, so the noise would not cover a clipped update; set dp-sensitivity "
                          f">= dp-clipping-norm")
    if s.aggregator in ("krum", "multi-krum"):
        need = 2 * s["aggregator-malicious"] + 3
        if per_round < need:
            raise ConfigError(f"aggregator={s.aggregator!r} with aggregator-malicious={s['aggregator-malicious']} "
                              f"needs at least 2f + 3 = {need} clients per round; this run samples {per_round}")


def _groups() -> list[tuple[str, str, list[Option]]]:
    """(group key, title, options) in README order: the common groups, then one group per method."""
    from .methods import methods

    out = [(g, title, [o for o in COMMON_OPTIONS if o.group == g]) for g, title in GROUPS.items()]
    for method in methods().values():
        if method.options:
            out.append((method.name, f"`{method.name}`: {method.summary}", list(method.options)))
    return [g for g in out if g[2]]


def markdown_table() -> str:
    """The README's configuration reference: one table per group."""
    blocks = []
    for _, title, options in _groups():
        lines = [f"**{title}**", "", "| key | default | meaning | choices |", "|---|---|---|---|"]
        for o in options:
            default = f"`{o.default!r}`" if not isinstance(o.default, str) else f'`"{o.default}"`'
            choices = ", ".join(f"`{c}`" for c in o.valid_choices) if o.valid_choices else ""
            lines.append(f"| `{o.key}` | {default} | {o.help} | {choices} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a JSON string is a valid TOML basic string


def toml_table() -> str:
    """The ``[tool.flwr.app.config]`` body for pyproject.toml: common keys, then one table per method."""
    from .methods import methods

    lines = [f"{o.key} = {toml_value(o.default)}" for o in COMMON_OPTIONS]
    for method in methods().values():
        if method.options:
            lines.append(f"\n[tool.flwr.app.config.{method.name}]")
            lines += [f"{o.key[len(method.name) + 1:]} = {toml_value(o.default)}" for o in method.options]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the run-configuration reference.")
    parser.add_argument("--markdown", action="store_true", help="the README tables")
    parser.add_argument("--toml", action="store_true", help="the [tool.flwr.app.config] body")
    parser.add_argument("--update-readme", metavar="README", help="rewrite the tables between the README's "
                        "<!-- config-table --> markers")
    parser.add_argument("--update-pyproject", metavar="PYPROJECT", help="rewrite its [tool.flwr.app.config] "
                        "tables (up to the next non-config table)")
    args = parser.parse_args()
    if args.update_pyproject:
        import re
        from pathlib import Path

        path = Path(args.update_pyproject)
        text = path.read_text()
        new, n = re.subn(r"\[tool\.flwr\.app\.config\]\n.*?(?=\n\[(?!tool\.flwr\.app\.config))",
                         lambda m: "[tool.flwr.app.config]\n" + toml_table() + "\n", text, flags=re.S)
        if n != 1:
            raise SystemExit(f"{path}: expected one [tool.flwr.app.config] table followed by another table")
        path.write_text(new)
        return
    if args.update_readme:
        import re
        from pathlib import Path

        path = Path(args.update_readme)
        text = path.read_text()
        new, n = re.subn(r"(<!-- config-table -->\n).*?(\n<!-- /config-table -->)",
                         lambda m: m.group(1) + markdown_table() + m.group(2), text, flags=re.S)
        if n != 1:
            raise SystemExit(f"{path}: expected one <!-- config-table --> ... <!-- /config-table --> block")
        path.write_text(new)
        return
    print(toml_table() if args.toml else markdown_table())


if __name__ == "__main__":
    main()
