"""The run configuration: every key, its default, its type and its check (Flower-free).

This table is the single source of truth for ``[tool.flwr.app.config]`` in ``pyproject.toml`` (a test checks
they agree), for the README's configuration reference (``python -m flowergraph.config --markdown``) and for
validation: :func:`parse_run_config` turns Flower's ``context.run_config`` (or any mapping) into a
:class:`RunSettings` and raises :class:`~flowergraph.errors.ConfigError` naming the bad value and the valid
choices before anything is trained.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import ConfigError
from .tasks.datasets import ALL_DATASETS, dataset_info
from .tasks.models import MODELS
from .tasks.partition import PARTITIONERS
from .tasks.synthetic import CSBMParams
from .tasks.training import OPTIMIZERS, TrainConfig

# Defaults of the Flower-free building blocks are the run-config defaults (one source of truth).
_CSBM = CSBMParams()
_TRAIN = TrainConfig()

# Methods by name (DESIGN.md). ``noop`` is the benchmark floor: clients that return what they receive.
NODE_METHODS = ("fedavg", "centralized", "fedgcn")
BENCHMARK_METHODS = ("noop",)
METHODS = NODE_METHODS + BENCHMARK_METHODS
WEIGHTINGS = ("train-size", "batch-size", "uniform")


@dataclass(frozen=True)
class Option:
    key: str
    default: Any
    help: str
    choices: tuple | None = None
    check: Callable[[Any], str | None] | None = None  # returns an error text or None

    @property
    def kind(self) -> type:
        return type(self.default)


def _min(lo, inclusive=True):
    def check(v):
        ok = v >= lo if inclusive else v > lo
        return None if ok else f"must be {'>=' if inclusive else '>'} {lo}"
    return check


def _range(lo, hi):
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}]"


def _half_open_left(lo, hi):
    return lambda v: None if lo < v <= hi else f"must be in ({lo}, {hi}]"


def _half_open(lo, hi):
    return lambda v: None if lo <= v < hi else f"must be in [{lo}, {hi})"


OPTIONS: tuple[Option, ...] = (
    Option("method", "fedavg", "Federated method.", METHODS),
    Option("dataset", "synthetic", "Dataset name (case-insensitive); `synthetic` is the built-in CSBM graph.",
           ALL_DATASETS),
    Option("data-dir", "", "Folder with raw files in PyG layout (`<dir>/Planetoid/Cora/raw/...`); empty: "
           "`$FLOWERGRAPH_DATA`, else download into the cache. May be read-only."),
    Option("split", "auto", "Split preset: `public`, `random[:0.6/0.2/0.2]`, `per-class[:20/500/1000]`, `auto` "
           "(public for Planetoid, random 60/20/20 otherwise)."),
    Option("seed", 0, "Seed of the split, partition, model initialisation, local training and client sampling.",
           check=_min(0)),
    Option("num-clients", 3, "Number of clients (must equal the number of SuperNodes / `num-partitions`).",
           check=_min(1)),
    Option("rounds", 2, "Training rounds.", check=_min(1)),
    Option("partitioner", "dirichlet", "Node partitioner.", PARTITIONERS),
    Option("beta", 10000.0, "Dirichlet concentration (10000 ~ IID, 1 strongly non-IID).", check=_min(0, False)),
    Option("min-partition-size", 10, "Dirichlet: minimum nodes per client.", check=_min(1)),
    Option("model", "gcn", "Node classifier.", MODELS),
    Option("hidden", 16, "Hidden units per layer.", check=_min(1)),
    Option("layers", 2, "Graph convolution layers.", check=_min(1)),
    Option("dropout", 0.5, "Dropout after hidden layers.", check=_half_open(0.0, 1.0)),
    Option("input-dropout", 0.0, "Dropout on input features (Kipf & Welling use 0.5).", check=_half_open(0.0, 1.0)),
    Option("heads", 8, "GAT attention heads in hidden layers.", check=_min(1)),
    Option("local-steps", _TRAIN.local_steps, "Full-batch local steps (= local epochs) per round.", check=_min(1)),
    Option("optimizer", _TRAIN.optimizer, "Local optimizer (re-created each round).", OPTIMIZERS),
    Option("lr", _TRAIN.lr, "Learning rate.", check=_min(0.0, False)),
    Option("weight-decay", _TRAIN.weight_decay, "L2 weight decay.", check=_min(0.0)),
    Option("momentum", _TRAIN.momentum, "SGD momentum (restarts each round).", check=_half_open(0.0, 1.0)),
    Option("weighting", "train-size", "Averaging weights: training-node count, reported mini-batch size, or "
           "uniform (the FedGCN reference code).", WEIGHTINGS),
    Option("fraction-fit", 1.0, "Fraction of clients sampled for training each round (seeded per round by `seed`).",
           check=_half_open_left(0.0, 1.0)),
    Option("fraction-evaluate", 1.0, "Fraction of clients sampled for evaluation.", check=_range(0.0, 1.0)),
    Option("min-clients", 0, "Fewest valid updates that still change the global model (0 means 1); below it the round keeps "
           "the old model.",
           check=_min(0)),
    Option("eval-every", 1, "Client-side evaluation every N rounds (and always after the last).", check=_min(1)),
    Option("fused-eval", True, "Evaluate each round's global model inside the next round's fit message (one "
           "message per client per round instead of two; same numbers). The last round is evaluated separately. "
           "Only with fraction-fit = fraction-evaluate = 1; otherwise a separate evaluate phase is used."),
    Option("server-eval", False, "Also evaluate the global model on the global test nodes on the server "
           "(the server then loads the dataset; simulation/benchmarks only)."),
    Option("round-timeout", 600.0, "Seconds a training round waits for its clients' replies (fit and evaluate); a "
           "client that has not answered by then counts as failed for that round.", check=_min(0.0, False)),
    Option("init-timeout", 600.0, "Seconds to wait for all clients to connect and to answer the one-off start-up "
           "messages (identity, initial model, FedGCN's communication phase); simulation start-up (Ray, torch) "
           "counts here, not in round-timeout.", check=_min(0.0, False)),
    Option("poll-interval", 0.05, "Longest wait (s) between the server's polls for client replies; polls start "
           "after 2 ms and back off to this. 0 keeps Flower's own fixed polling (0.1 s in simulation, 3 s in "
           "deployment), which rounds every fit/evaluate phase up to that tick.", check=_min(0.0)),
    Option("out-dir", "", "Results folder for this run; empty: `results/<method>-<dataset>-<time>` in the "
           "working directory of the ServerApp (when resuming: the checkpointed run's folder)."),
    Option("checkpoint-every", 0, "Save the server's state (global model, strategy state, round, records) every N "
           "rounds and after the last, to `<out-dir>/checkpoints/round-K.npz`; 0 = off.", check=_min(0)),
    Option("resume-from", "", "Continue a run from a checkpoint file or a run's out-dir (its latest checkpoint); "
           "every setting but rounds, out-dir, checkpoint-every, timeouts, data-dir, key-file, inject-faults and "
           "fused-eval must equal the checkpointed run's."),
    Option("inject-faults", "", "Fault injection for robustness studies: comma-separated `kind:partition@round`, "
           "e.g. `raise:1@2,nan:0@3`; kinds: `raise`, `nan`, `shape`, `exit`, `hang` (README, Reliability)."),
    Option("hops", 2, "FedGCN: neighbour-aggregation hops exchanged before training (0 = FedAvg on local "
           "subgraphs, 1 = own nodes, 2 = own nodes and their 1-hop neighbours: exact for a 2-layer GCN).",
           (0, 1, 2)),
    Option("he", False, "FedGCN: sum the aggregations under CKKS homomorphic encryption (TenSEAL); the server "
           "holds no key."),
    Option("key-file", "", "FedGCN with he=true: the clients' CKKS key file (node config may override per node); "
           "the simulation launcher creates one per run when empty."),
    Option("synthetic-nodes", _CSBM.num_nodes, "Synthetic CSBM: nodes.", check=_min(2)),
    Option("synthetic-classes", _CSBM.num_classes, "Synthetic CSBM: classes.", check=_min(2)),
    Option("synthetic-p-in", _CSBM.p_in, "Synthetic CSBM: edge probability within a class.", check=_range(0.0, 1.0)),
    Option("synthetic-p-out", _CSBM.p_out, "Synthetic CSBM: edge probability across classes.", check=_range(0.0, 1.0)),
    Option("synthetic-features", _CSBM.num_features, "Synthetic CSBM: feature dimension.", check=_min(1)),
    Option("synthetic-signal", _CSBM.signal, "Synthetic CSBM: class-mean norm / noise norm.", check=_min(0.0)),
)
OPTION_BY_KEY = {o.key: o for o in OPTIONS}


def defaults() -> dict[str, Any]:
    return {o.key: o.default for o in OPTIONS}


def _coerce(option: Option, value: Any) -> Any:
    kind = option.kind
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{option.key}={value!r}: expected true or false")
    if kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"{option.key}={value!r}: expected an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{option.key}={value!r}: expected an integer")
    if kind is float:
        if isinstance(value, bool):
            raise ConfigError(f"{option.key}={value!r}: expected a number")
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{option.key}={value!r}: expected a number") from None
        if math.isnan(out) or math.isinf(out):
            raise ConfigError(f"{option.key}={value!r}: expected a finite number")
        return out
    if not isinstance(value, str):
        raise ConfigError(f"{option.key}={value!r}: expected a string")
    return value


def _check_option(option: Option, value: Any) -> Any:
    value = _coerce(option, value)
    if option.choices is not None:
        if option.key == "dataset":
            from .tasks.datasets import canonical_name

            return canonical_name(value)
        if value not in option.choices:
            raise ConfigError(f"unknown {option.key} {value!r}; valid choices: {', '.join(map(str, option.choices))}")
    if option.check is not None:
        problem = option.check(value)
        if problem:
            raise ConfigError(f"{option.key}={value!r}: {problem}")
    return value


class RunSettings:
    """Validated run configuration; attribute names are the keys with ``-`` replaced by ``_``."""

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

    # Specs derived from the settings, shared by the ServerApp, the ClientApp and the launcher.
    def graph_spec(self):
        from .tasks.federated_graph import GraphSpec
        from .tasks.synthetic import CSBMParams

        return GraphSpec(
            dataset=self.dataset, data_dir=self.data_dir, split=self.split, seed=self.seed,
            synthetic=CSBMParams(num_nodes=self.synthetic_nodes, num_classes=self.synthetic_classes,
                                 p_in=self.synthetic_p_in, p_out=self.synthetic_p_out,
                                 num_features=self.synthetic_features, signal=self.synthetic_signal))

    def partition_spec(self):
        from .tasks.federated_graph import PartitionSpec

        if self.method == "centralized":
            return PartitionSpec(partitioner="none", num_clients=1, seed=self.seed)
        return PartitionSpec(partitioner=self.partitioner, num_clients=self.num_clients, beta=self.beta,
                             min_size=self.min_partition_size, seed=self.seed)

    def train_config(self):
        from .tasks.training import TrainConfig

        return TrainConfig(local_steps=self.local_steps, optimizer=self.optimizer, lr=self.lr,
                           weight_decay=self.weight_decay, momentum=self.momentum)

    @property
    def effective_num_clients(self) -> int:
        """Clients the strategy trains with: 1 for ``centralized`` (one client holds the whole graph)."""
        return 1 if self.method == "centralized" else self.num_clients


def parse_run_config(raw: Mapping[str, Any], *, allow_unknown: bool = False) -> RunSettings:
    """Validate a run configuration (missing keys take their defaults).

    Raises ConfigError for an unknown key (unless ``allow_unknown``: a user's own app may add keys), a value
    of the wrong type, an unknown choice, an out-of-range number or an inconsistent combination.
    """
    values = defaults()
    for key, value in raw.items():
        option = OPTION_BY_KEY.get(key)
        if option is None:
            if allow_unknown:
                continue
            raise ConfigError(f"unknown run-config key {key!r}; valid keys: {', '.join(OPTION_BY_KEY)}")
        values[key] = _check_option(option, value)
    settings = RunSettings(values)
    _check_combination(settings)
    return settings


def _check_combination(s: RunSettings) -> None:
    info = dataset_info(s.dataset)
    if s.method in NODE_METHODS + BENCHMARK_METHODS and info.task != "node":
        raise ConfigError(f"method {s.method!r} does node classification but dataset {s.dataset!r} is a "
                          f"graph-classification dataset; valid node datasets: Cora, CiteSeer, PubMed, synthetic")
    if s.method == "fedgcn":
        if s.hops > 0 and (s.model != "gcn" or s.layers != 2):
            raise ConfigError(f"method 'fedgcn' trains a 2-layer GCN; got model={s.model!r} layers={s.layers} "
                              f"(valid: model='gcn', layers=2)")
        if s.hops > 0 and s.input_dropout > 0:
            raise ConfigError(f"input-dropout={s.input_dropout} with fedgcn: features arrive pre-aggregated, so "
                              f"input-dropout must be 0")
        if s.he and s.hops == 0:
            raise ConfigError("he=true needs hops=1 or hops=2 (hops=0 has no communication phase)")
    if s.data_dir:
        path = os.path.expanduser(s.data_dir)
        if not os.path.isdir(path):
            raise ConfigError(f"data-dir {s.data_dir!r} does not exist or is not a directory")
    if s.min_clients > s.effective_num_clients:
        raise ConfigError(f"min-clients={s.min_clients} exceeds num-clients={s.effective_num_clients}")
    sampled = max(1, int(round(s.fraction_fit * s.effective_num_clients)))
    if s.method != "centralized" and s.min_clients > sampled:
        raise ConfigError(f"min-clients={s.min_clients} but fraction-fit={s.fraction_fit} samples only {sampled} of "
                          f"num-clients={s.num_clients} per round, so the model would never change; lower "
                          f"min-clients or raise fraction-fit")
    from .faults import parse_faults

    parse_faults(s.inject_faults, num_clients=s.effective_num_clients, rounds=s.rounds)
    if s.dataset == "synthetic":
        s.graph_spec().synthetic.validate()
    from .tasks.splits import parse_split

    parse_split(s.split, info.family)


def markdown_table() -> str:
    lines = ["| key | default | meaning | choices |", "|---|---|---|---|"]
    for o in OPTIONS:
        default = f"`{o.default!r}`" if not isinstance(o.default, str) else f'`"{o.default}"`'
        choices = ", ".join(f"`{c}`" for c in o.choices) if o.choices else ""
        lines.append(f"| `{o.key}` | {default} | {o.help} | {choices} |")
    return "\n".join(lines)


def toml_table() -> str:
    """The ``[tool.flwr.app.config]`` body for pyproject.toml."""
    out = []
    for o in OPTIONS:
        v = o.default
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, str):
            text = f'"{v}"'
        else:
            text = repr(v)
        out.append(f"{o.key} = {text}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the run-configuration reference.")
    parser.add_argument("--markdown", action="store_true", help="the README table")
    parser.add_argument("--toml", action="store_true", help="the [tool.flwr.app.config] body")
    parser.add_argument("--update-readme", metavar="README", help="rewrite the table between the README's "
                        "<!-- config-table --> markers")
    args = parser.parse_args()
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
