"""ASFGNN (Zheng et al., *Automated Separated-Federated Graph Neural Network*): registration of ``asfgnn`` (SFGNN
with JS mixing and SMAC tuning; its baselines FL and SP as ``asfgnn.variant``) and ``asfgnn-cm`` (the centralized
baseline CM: one client holds the union of the data owners' graphs). Strategy: :mod:`flowergraph.methods.asfgnn.server`;
client: :mod:`flowergraph.methods.asfgnn.client`; the core (networks, JS, splits, reference loops, search drivers):
:mod:`flowergraph.methods.asfgnn.maths`. Both methods read the ``asfgnn.*`` keys."""

from __future__ import annotations

from dataclasses import dataclass

import functools
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ...errors import ConfigError
from ...settings.options import Options, at_least, option, options_of, within
from ..registry import Client, ClientArgs, Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings
    from .maths.data import ClientData
    from .maths.files import SplitSpec

VARIANTS = ("sfgnn", "fl", "sp")
SHARE = {"sfgnn": "fgnn", "fl": "all", "sp": "none"}
SETTINGS = ("label", "graph", "disjoint")
SIZES = ("disjoint", "paper", "paper-independent")
SEARCHES = ("none", "smac", "grid", "random")
SMAC_FACADES = ("hpo", "blackbox")
GRID_ORDERS = ("shuffled", "ordered")
DATASETS = ("Cora", "CiteSeer")
HIDDEN_SIZES = (64, 128, 256, 512)
DEPTHS = (1, 2, 3, 4, 5)
CM = "asfgnn-cm"


def _parse_list(text: str, kind: type) -> list[Any]:
    items = [t.strip() for t in str(text).split(",")]
    if not items or any(not t for t in items):
        raise ValueError("empty value")
    return [kind(t) for t in items]


def _list_check(kind: type, valid: Callable[[Any], bool], what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        try:
            values = _parse_list(value, kind)
        except ValueError:
            return f"expected one {kind.__name__} or a comma-separated list (one per client), {what}"
        bad = [v for v in values if not valid(v)]
        return f"{bad[0]!r} is invalid: {what}" if bad else None

    return check


@dataclass(kw_only=True, eq=False)
class ASFGNNOptions(Options):
    """ASFGNN's hyper-parameters (``asfgnn`` and ``asfgnn-cm``): the run-config keys ``asfgnn.*`` and the keyword
    arguments of :class:`flowergraph.serverapp.ASFGNN`."""

    variant: str = option(
        "sfgnn",
        "What the clients share: `sfgnn` (the discriminator, mixed with the JS weight: the "
        "paper's method), `fl` (FedAvg of the whole GraphSAGE + discriminator) or `sp` (nothing: each client "
        "alone). The centralized baseline CM is `method=asfgnn-cm`.",
        VARIANTS,
    )
    js: bool = option(
        True,
        "SFGNN: mix the server's discriminator into the client's with weight js = JS(Q_i || Q_s) "
        "(false: replace it, the paper's 'without JS' ablation).",
    )
    fgnn_init: str = option(
        "shared",
        "SFGNN: every trial starts all clients from one random discriminator sent by the "
        "server (`shared`), or each client from its own (`client`, Algorithm 2 line 2 read literally).",
        ("shared", "client"),
    )
    setting: str = option(
        "label",
        "The paper's split: `label` (2 clients, classes split into two parts, mixed by "
        "alpha), `graph` (2 clients, part-1 nodes of degree <= degree-threshold vs part-2 nodes above it) or "
        "`disjoint` (>= 2 clients with disjoint label sets).",
        SETTINGS,
    )
    alpha: float = option(
        1.0,
        "Label split: the fraction of its home classes' nodes each client holds (1: disjoint "
        "classes; 0.5: the same mix).",
        check=within(0.0, 1.0),
    )
    sizes: str = option(
        "disjoint",
        "Label split at alpha < 1: `disjoint` (ours: each node in one client; A holds alpha of part 1 and "
        "1 - alpha of part 2) or the paper's sizes read literally (A: alpha N1 + (1 - alpha) N1 nodes, B: "
        "(1 - alpha) N2 + alpha N2), which overlap: `paper` (only the nodes the sizes force into both clients) "
        "or `paper-independent` (each client's draw independent of the other's). Not for `asfgnn-cm`.",
        SIZES,
    )
    split_seed: int = option(0, "Seed of the alpha split's node draw (the training seed is `seed`).", check=at_least(0))
    degree_threshold: int = option(3, "Graph split: the degree separating the two clients' nodes.", check=at_least(0))
    search: str = option(
        "none",
        "Hyper-parameter search, each trial a federated run of trial-rounds rounds: `none` "
        "(one trial with the values below), `smac` (SMAC3 Bayesian optimisation), `grid` (the paper's grid), "
        "`random`.",
        SEARCHES,
    )
    trials: int = option(
        1, "Trials of the search (its budget); `rounds` may be at most trials x (trial-rounds + 1).", check=at_least(1)
    )
    trial_rounds: int = option(
        200,
        "Training rounds T of each trial (each trial ends with one more round that only evaluates its final model).",
        check=at_least(1),
    )
    smac_facade: str = option(
        "hpo",
        "SMAC's facade: `hpo` (random forest + log EI) or `blackbox` (Gaussian process + EI, the paper's surrogate).",
        SMAC_FACADES,
    )
    smac_initial_configs: int = option(
        0, "SMAC's initial design size (0: SMAC's default, at most 25% of the trials).", check=at_least(0)
    )
    grid_order: str = option(
        "shuffled",
        "Grid search: the grid in a seeded random order (`shuffled`) or in "
        "mixed-radix order (`ordered`: hidden size slowest).",
        GRID_ORDERS,
    )
    hidden: int = option(
        128,
        "Hidden size l (embeddings and discriminator; shared by all clients) of a run without search.",
        HIDDEN_SIZES,
    )
    depth: str = option(
        "2",
        "SGNN depth K of a run without search: one value, or one per client ('4,2': Table 4, Cora).",
        check=_list_check(int, lambda v: v in DEPTHS, "valid: 1..5"),
    )
    dropout: str = option(
        "0.5",
        "Dropout rate d (one, or one per client).",
        check=_list_check(float, lambda v: 0.0 <= v < 1.0, "valid: [0, 1)"),
    )
    l2: str = option(
        "0.005",
        "L2 weight of Eq. 4 (one, or one per client).",
        check=_list_check(float, lambda v: v >= 0.0 and math.isfinite(v), "valid: >= 0"),
    )
    lr: str = option(
        "0.01",
        "Adam learning rate (one, or one per client).",
        check=_list_check(float, lambda v: v > 0.0 and math.isfinite(v), "valid: > 0"),
    )
    local_epochs: int = option(1, "Full-batch training steps per round (the paper: 1).", check=at_least(1))


OPTIONS = options_of(ASFGNNOptions, "asfgnn")


# ------------------------------------------------------------------------------------------- settings helpers
def is_cm(s: "RunSettings") -> bool:
    return bool(s.method_info.whole_graph)


def num_owners(s: "RunSettings") -> int:
    """The data owners of the split (CM: the owners whose graphs it unites)."""
    return int(s.num_clients)


def split_spec(s: "RunSettings") -> "SplitSpec":
    from .maths.files import SplitSpec

    o = s.of("asfgnn")
    return SplitSpec(
        dataset=s.dataset,
        setting=o.setting,
        alpha=float(o.alpha),
        split_seed=int(o.split_seed),
        num_clients=num_owners(s),
        data_dir=s.data_dir or "",
        degree_threshold=int(o.degree_threshold),
        sizes=o.sizes,
    )


def client_values(s: "RunSettings", key: str) -> list[Any]:
    """One value per client (federated clients; CM: one) of a hyper-parameter key (``depth``, ...)."""
    kind = int if key == "depth" else float
    values = _parse_list(s[f"asfgnn.{key}"], kind)
    clients = 1 if is_cm(s) else int(s.num_clients)
    if len(values) == 1:
        return values * clients
    if len(values) != clients:
        raise ConfigError(
            f"asfgnn.{key}={s[f'asfgnn.{key}']!r} gives {len(values)} values; give one, or one per "
            f"client ({clients}{': asfgnn-cm trains one model' if is_cm(s) else ''})"
        )
    return values


def default_config(s: "RunSettings") -> dict[str, Any]:
    """The configuration of a run without search (``asfgnn.hidden``, ``depth``, ``dropout``, ``l2``, ``lr``)."""
    cols = {key: client_values(s, key) for key in ("depth", "dropout", "l2", "lr")}
    return {
        "hidden": int(s["asfgnn.hidden"]),
        "clients": [
            {"dropout": cols["dropout"][i], "l2": cols["l2"][i], "depth": cols["depth"][i], "lr": cols["lr"][i]}
            for i in range(len(cols["depth"]))
        ],
    }


def search_space(s: "RunSettings") -> Any:
    """The paper's search space for this run's clients (FL and CM: one set of values for all)."""
    from .maths.search import SearchSpace

    if is_cm(s):
        return SearchSpace(num_clients=1, per_client=False)
    return SearchSpace(num_clients=int(s.num_clients), per_client=s["asfgnn.variant"] != "fl")


def _check(s: "RunSettings") -> None:
    o = s.of("asfgnn")
    if s.dataset not in DATASETS:
        raise ConfigError(
            f"ASFGNN runs on the paper's splits of {' and '.join(DATASETS)}; dataset {s.dataset!r} "
            f"has none; valid choices: {', '.join(DATASETS)}"
        )
    if o.setting in ("label", "graph") and num_owners(s) != 2:
        raise ConfigError(
            f"asfgnn.setting={o.setting!r} has exactly 2 clients, got num-clients={num_owners(s)}; "
            f"use asfgnn.setting='disjoint' for more"
        )
    if o.setting != "label" and o.alpha != 1.0:
        raise ConfigError(
            f"asfgnn.alpha={o.alpha!r} applies to asfgnn.setting='label' only; setting "
            f"{o.setting!r} needs asfgnn.alpha=1.0"
        )
    if o.sizes != "disjoint" and o.setting != "label":
        raise ConfigError(
            f"asfgnn.sizes={o.sizes!r} applies to asfgnn.setting='label' only; setting {o.setting!r} needs "
            f"asfgnn.sizes='disjoint'"
        )
    if o.sizes != "disjoint" and is_cm(s):
        raise ConfigError(
            f"asfgnn.sizes={o.sizes!r}: {CM} needs each node in one owner's graph (its accuracy counts every node "
            f"for its owner); valid with {CM}: asfgnn.sizes='disjoint'"
        )
    if num_owners(s) < 2:
        raise ConfigError(f"ASFGNN's splits have at least 2 data owners, got num-clients={num_owners(s)}")
    capacity = o.trials * (o.trial_rounds + 1)
    if s.rounds > capacity:
        raise ConfigError(
            f"rounds={s.rounds} exceeds asfgnn.trials x (asfgnn.trial-rounds + 1) = {o.trials} x "
            f"({o.trial_rounds} + 1) = {capacity} (each trial ends with one evaluation round); set "
            f"rounds={capacity}"
        )
    if o.search == "none" and o.trials != 1:
        raise ConfigError(
            f"asfgnn.search='none' runs one trial with the given hyper-parameters; asfgnn.trials="
            f"{o.trials} needs asfgnn.search='smac', 'grid' or 'random'"
        )
    if o.search == "grid":
        size = search_space(s).grid_size()
        if o.trials > size:
            raise ConfigError(f"asfgnn.trials={o.trials} exceeds the grid's {size} points; valid: 1..{size}")
    if not is_cm(s):
        if o.variant != "sfgnn" and not o.js:
            raise ConfigError(
                f"asfgnn.js=false switches SFGNN's mixing off; asfgnn.variant={o.variant!r} mixes "
                f"nothing (valid: asfgnn.variant='sfgnn')"
            )
        if o.variant != "sfgnn" and o.fgnn_init != "shared":
            raise ConfigError(
                f"asfgnn.fgnn-init={o.fgnn_init!r} applies to asfgnn.variant='sfgnn' only (valid with "
                f"asfgnn.variant={o.variant!r}: 'shared')"
            )
    config = default_config(s)  # ConfigError for a list of the wrong length
    if not is_cm(s) and o.variant == "fl" and len({c["depth"] for c in config["clients"]}) != 1:
        raise ConfigError(
            f"asfgnn.variant='fl' averages the whole model, so every client needs the same depth; "
            f"asfgnn.depth={o.depth!r}"
        )
    if s.aggregator != "mean":
        raise ConfigError(
            f"aggregator={s.aggregator!r}: ASFGNN averages the discriminators (and the label counts "
            f"and metrics travelling with them); valid: aggregator='mean'"
        )
    if s.dp != "none":
        raise ConfigError(
            f"dp={s.dp!r}: ASFGNN's updates carry the clients' label counts and metrics, which "
            f"clipping and noise would corrupt; valid: dp='none'"
        )
    if s.weighting not in ("train-size", "uniform"):
        raise ConfigError(
            f"weighting={s.weighting!r}: ASFGNN weighs updates equally (FL: by training-set size with "
            f"'train-size'); valid: 'train-size', 'uniform'"
        )
    if s.partition_dir and not os.path.isfile(Path(s.partition_dir).expanduser() / "manifest.json"):
        raise ConfigError(
            f"partition-dir {s.partition_dir!r} holds no manifest.json; write one with `python -m "
            f"flowergraph.partition export --set method=asfgnn ...`"
        )


# ------------------------------------------------------------------------------------------------------ data
@functools.lru_cache(maxsize=8)
def _cached(spec: "SplitSpec", client: int, union: bool, path: str, stamp: tuple[int, int]) -> "ClientData":
    from .maths.data import centralized_data
    from .maths.files import load_asfgnn_partition

    if union:
        return centralized_data(
            spec.dataset,
            spec.setting,
            spec.alpha,
            spec.split_seed,
            num_clients=spec.num_clients,
            data_dir=spec.data_dir or None,
            split=spec.split,
            degree_threshold=spec.degree_threshold,
            sizes=spec.sizes,
        )
    if path:
        return load_asfgnn_partition(path, spec, client)
    return spec.client(client)


def asfgnn_data(s: "RunSettings", partition_id: int, partition_file: str | None = None) -> "ClientData":
    """A node's data for the run: its own partition file (node config ``partition-file``, or the run's
    ``partition-dir``), else its induced subgraph of the paper's split; CM: the union of the owners' graphs.
    Memoised per process."""
    if is_cm(s):
        return _cached(split_spec(s), -1, True, "", (0, 0))
    if not partition_file and s.partition_dir:
        from ...tasks.partition_files import partition_file_name

        partition_file = str(Path(s.partition_dir).expanduser() / partition_file_name(partition_id))
    stamp = (0, 0)
    if partition_file:
        try:
            st = os.stat(os.path.expanduser(partition_file))
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            raise ConfigError(f"partition file {partition_file!r} does not exist") from None
    return _cached(split_spec(s), int(partition_id), False, str(partition_file or ""), stamp)


def _weights_of(s: "RunSettings", sizes: list[int]) -> list[int]:
    return sizes if s["asfgnn.variant"] == "fl" and not is_cm(s) and s.weighting == "train-size" else [1] * len(sizes)


def _preflight(s: "RunSettings") -> dict[str, Any]:
    """Build every client's data once (bad input fails before Flower starts); ``client_sizes`` are the update
    weights (SecAgg+'s bound)."""
    o = s.of("asfgnn")
    if is_cm(s):
        data = asfgnn_data(s, 0)
        return {
            "summary": f"{s.dataset}, union of the {o.setting} split's {num_owners(s)} clients "
            f"({data.num_nodes} nodes)",
            "client_sizes": [1],
        }
    if s.partition_dir:
        from ...tasks.partition_files import read_manifest

        manifest = read_manifest(s.partition_dir, dataset=s.dataset, num_clients=s.num_clients)
        return {
            "summary": f"{s.dataset} ({o.setting} split, from partition files in {s.partition_dir})",
            "client_sizes": _weights_of(s, [f["nodes"] for f in manifest["files"]]),
        }
    clients = [asfgnn_data(s, k) for k in range(int(s.num_clients))]
    alpha = f", alpha {o.alpha}" if o.setting == "label" else ""
    alpha += f", the paper's sizes ({o.sizes})" if o.sizes != "disjoint" else ""
    return {
        "summary": f"{s.dataset}, {o.setting} split{alpha}: client nodes "
        f"{', '.join(str(c.num_nodes) for c in clients)}",
        "client_sizes": _weights_of(s, [c.num_train for c in clients]),
    }


def export(s: "RunSettings", out_dir: str, force: bool = False) -> Path:
    """``python -m flowergraph.partition export`` for ASFGNN's splits (each client's own file)."""
    from .maths.files import export_asfgnn_partitions

    return export_asfgnn_partitions(split_spec(s), out_dir, force=force)


# ---------------------------------------------------------------------------------------------------- builders
def _strategy(args: StrategyArgs) -> "Strategy":
    from .server import ASFGNNStrategy

    s = args.settings
    o = s.of("asfgnn")
    share = "none" if is_cm(s) else SHARE[o.variant]
    settings: dict[str, Any] = {}
    if o.search in ("smac", "random"):
        settings["seed"] = int(s.seed)
    if o.search == "smac":
        settings.update(facade=o.smac_facade, initial_design_configs=o.smac_initial_configs or None)
    if o.search == "grid":
        settings["shuffle_seed"] = int(s.seed) if o.grid_order == "shuffled" else None
    return ASFGNNStrategy(
        share=share,
        trial_rounds=o.trial_rounds,
        trials=o.trials,
        search=o.search,
        config=default_config(s) if o.search == "none" else None,
        space=search_space(s) if o.search != "none" else None,
        driver_settings=settings,
        weighting=s.weighting,
        **args.common(),
    )


def _client(args: ClientArgs) -> "Client":
    from .client import ASFGNNClient

    s = args.settings
    o = s.of("asfgnn")
    data = asfgnn_data(s, args.partition_id, args.partition_file or None)
    if is_cm(s):
        return ASFGNNClient(
            data,
            partition_id=args.partition_id,
            share="none",
            seed=s.seed,
            state=args.state,
            local_epochs=o.local_epochs,
            weighting=s.weighting,
            model_index=0,
            generator_client=-1,
        )
    share = SHARE[o.variant]
    return ASFGNNClient(
        data,
        partition_id=args.partition_id,
        share=share,
        use_js=o.js,
        fgnn_init=o.fgnn_init,
        seed=s.seed,
        state=args.state,
        local_epochs=o.local_epochs,
        weighting=s.weighting,
        model_index=0 if share == "all" else None,
    )


PAPER = "Zheng et al., ASFGNN, Peer-to-Peer Netw. Appl. 2021, doi:10.1007/s12083-021-01074-w, arXiv:2011.03248"
ASFGNN = register(
    Method(
        name="asfgnn",
        summary="ASFGNN (Zheng et al.): private GraphSAGE per client, a shared discriminator averaged "
        "with its label counts and metrics (secure aggregation) and mixed back with the JS weight, per-client "
        "hyper-parameters tuned by SMAC; FL and SP baselines via `asfgnn.variant`",
        tasks=("node",),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        stateful_clients=True,
        preflight=_preflight,
        paper=PAPER,
        extra={"export_partitions": export},
    )
)
ASFGNN_CM = register(
    Method(
        name=CM,
        summary="ASFGNN's centralized baseline CM: one GraphSAGE + discriminator on the union of the data "
        "owners' graphs (reads the asfgnn.* keys)",
        tasks=("node",),
        build_strategy=_strategy,
        build_client=_client,
        check=_check,
        stateful_clients=True,
        preflight=_preflight,
        whole_graph=True,
        paper=PAPER,
    )
)
