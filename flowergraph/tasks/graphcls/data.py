"""Graph-level federated data for FedStar (Tan et al., AAAI 2023): settings, clients, splits, features.

Settings (paper Sec. 5.1 / App. A.3; one client per dataset)::

    CHEM        = MUTAG, BZR, COX2, DHFR, PTC_MR, AIDS, NCI1
    BIO-CHEM    = CHEM + ENZYMES, DD, PROTEINS
    BIO-CHEM-SN = BIO-CHEM + IMDB-BINARY, IMDB-MULTI, COLLAB
    BIO-SN-CV   = ENZYMES, DD, PROTEINS, IMDB-BINARY, IMDB-MULTI, COLLAB, Letter-low, Letter-med, Letter-high

The order is the client order (client k owns dataset k). The authors' code lists the social networks as COLLAB,
IMDB-BINARY, IMDB-MULTI and the letters as high, low, med: only the client numbering differs.
COLLAB is not in the offline dataset collection; :func:`parse_graph_datasets` with ``offline_only=True`` drops
it (any dataset whose raw files are not on disk) from a setting; naming it explicitly keeps it, and loading
it then fails with a :class:`DatasetUnavailableError` that says where to put its raw files.

Clients. Several datasets: client k owns dataset k (``num_clients`` must equal their number). One dataset and
``num_clients`` K > 1: its graphs are split across K clients by label with Dirichlet(beta) proportions
(:func:`flowergraph.tasks.partition.dirichlet_partition`, seeded by ``split_seed``; every client must get at
least ``min_graphs`` graphs). The authors' one-dataset code cuts random chunks instead; Dirichlet is ours.

Split (``split_method``). ``paper`` (the default): the authors' own, :func:`paper_split`: scikit-learn's
stratified ``train_test_split(test_size=0.2, shuffle=True, random_state=split_seed)`` on the client's graphs in
dataset order, then ``train_test_split(train_size=0.5, test_size=0.5, ...)`` on the held-out part (validation,
test), exactly as ``lib/setupGC.py`` of github.com/yuetan031/FedStar (da01eac) calls it with
``seed_dataSplit = 123``: the same graphs in every split, in the same order. ``per-class``: ours before, kept as an
option: for a class with n graphs, ``round(f_val n)`` go to validation, ``round(f_test n)`` to test (halves rounded
up) and the rest to training, after a shuffle seeded by (``split_seed``, the dataset name, the client's index
within its dataset). Both depend on ``split_seed`` only: the training seed never changes the split (the authors fix
the split seed and vary the training seed), and a dataset's split is the same in every setting it appears in. The
sizes of the two agree to one graph (CHEM training sets, ours: 150, 323, 373, 604, 276, 1600, 3288; the paper's
Table 5: 150, 324, 373, 604, 275, 1600, 3288), but the graphs differ: on test sets of 19-76 graphs that alone moves
the mean client accuracy by about 3 points (docs/results/fedstar.md).

Features, as in the authors' code: datasets with node labels use PyG's default ``x`` (one-hot node labels,
``use_node_attr=False``: the continuous attributes of PROTEINS, ENZYMES, BZR, COX2, DHFR, AIDS are not used);
the Letter datasets use their 2-d node coordinates (``use_node_attr=True``); IMDB-BINARY, IMDB-MULTI and
COLLAB have no node features and get one-hot degrees of width ``max_degree + 1`` with the authors' caps 135,
88 and 491 (``OneHotDegree(cap)``); a graph with a node above the cap is an error rather than a silent crash.
Output width = the dataset's number of classes (all its graphs), also for a Dirichlet client that lacks a class
(the authors count the labels seen in the training split, which equals it in their one-client-per-dataset runs).

Every graph is a PyG ``Data`` with ``x`` (float), ``edge_index``, ``y`` (long, shape [1]) and ``s``, the
structure embedding (float, [num_nodes, structure_dim], see :mod:`.structure`). Everything is memoised per
process (``functools.lru_cache``) and RWSE also on disk; nothing is recomputed per round.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import ConfigError, DatasetUnavailableError, PartitionError, did_you_mean
from ..datasets import GRAPH_DATASETS, _raw_files_present, cache_dir, dataset_info, load_pyg_dataset, resolve_data_dir
from .structure import degrees, parse_structure, rwse_cache_path, structure_dim, structure_embeddings

CHEM = ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")
BIO = ("ENZYMES", "DD", "PROTEINS")
SN = ("IMDB-BINARY", "IMDB-MULTI", "COLLAB")
CV = ("Letter-low", "Letter-med", "Letter-high")
SETTINGS: dict[str, tuple[str, ...]] = {
    "CHEM": CHEM,
    "BIO-CHEM": CHEM + BIO,
    "BIO-CHEM-SN": CHEM + BIO + SN,
    "BIO-SN-CV": BIO + SN + CV,
}
ONE_HOT_DEGREE = {"IMDB-BINARY": 135, "IMDB-MULTI": 88, "COLLAB": 491}
SPLIT_METHODS = ("paper", "per-class")
NODE_ATTRIBUTES = CV


def _valid_choices() -> str:
    return f"settings {', '.join(SETTINGS)}; TU datasets {', '.join(GRAPH_DATASETS)}"


def graph_dataset_name(name: str) -> str:
    """The canonical spelling of a TU graph dataset (case-insensitive) or a ConfigError naming the choices."""
    match = [d for d in GRAPH_DATASETS if d.lower() == str(name).strip().lower()]
    if not match:
        raise ConfigError(
            f"unknown graph dataset or setting {name!r}; valid choices: {_valid_choices()}"
            f"{did_you_mean(name, (*SETTINGS, *GRAPH_DATASETS))}"
        )
    return match[0]


def available_offline(name: str, data_dir: str | None = None) -> bool:
    """Whether the TU dataset's raw files are on disk: in the cache, or in ``data_dir`` / ``$FLOWERGRAPH_DATA``
    (``<dir>/TUDataset/<name>/raw`` or ``<dir>/<name>/raw``), so loading it needs no download."""
    info = dataset_info(graph_dataset_name(name))
    if _raw_files_present(cache_dir() / info.family / info.name / "raw", info):
        return True
    root = resolve_data_dir(data_dir)
    return root is not None and any(
        _raw_files_present(p, info) for p in (root / info.family / info.name / "raw", root / info.name / "raw")
    )


def parse_graph_datasets(text: str, *, offline_only: bool = False, data_dir: str | None = None) -> tuple[str, ...]:
    """A setting name or a comma-separated list of setting / TU names (case-insensitive) -> canonical names.

    ``offline_only``: datasets that come from a setting and whose raw files are not on disk
    (:func:`available_offline`, e.g. COLLAB) are dropped; explicitly named datasets are always kept.
    Unknown names, empty items and a dataset named twice (also through two settings) are ConfigErrors.
    """
    items = [p.strip() for p in str(text).split(",")]
    if not any(items):
        raise ConfigError(f"no graph dataset given ({text!r}); valid choices: {_valid_choices()}")
    out: list[str] = []
    settings = {k.lower(): k for k in SETTINGS}
    for item in items:
        if not item:
            raise ConfigError(f"empty dataset name in {text!r}; valid choices: {_valid_choices()}")
        if item.lower() in settings:
            names = SETTINGS[settings[item.lower()]]
            if offline_only:
                names = tuple(n for n in names if available_offline(n, data_dir))
        else:
            names = (graph_dataset_name(item),)
        for name in names:
            if name in out:
                raise ConfigError(f"dataset {name!r} appears twice in {text!r}; each client owns one dataset")
            out.append(name)
    if not out:
        raise ConfigError(f"{text!r} leaves no dataset whose raw files are on disk")
    return tuple(out)


@dataclass(frozen=True)
class GraphTaskSpec:
    """Everything that determines the clients' graphs (hashable: the memoisation key).

    ``datasets`` may be given as a string (parsed by :func:`parse_graph_datasets`) or names; ``structure`` as
    a string or kinds (:func:`.structure.parse_structure`). Validated and normalised on construction.
    """

    datasets: tuple[str, ...]
    data_dir: str = ""
    split_seed: int = 123
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)  # per-class only; the paper's split is 80/10/10
    split_method: str = "paper"
    num_clients: int | None = None
    beta: float = 10000.0
    min_graphs: int = 10
    structure: tuple[str, ...] = ("dse", "rwse")
    dse_dim: int = 16
    rwse_dim: int = 16
    rwse_disk_cache: bool = True

    def __post_init__(self):
        datasets = self.datasets if isinstance(self.datasets, str) else ",".join(self.datasets)
        object.__setattr__(self, "datasets", parse_graph_datasets(datasets))
        object.__setattr__(self, "structure", parse_structure(self.structure))
        object.__setattr__(self, "data_dir", str(self.data_dir or ""))
        split = tuple(float(f) for f in self.split)
        if len(split) != 3 or any(not 0 <= f < 1 for f in split) or split[0] <= 0 or abs(sum(split) - 1) > 1e-6:
            raise ConfigError(
                f"split {self.split!r}: expected three fractions train/val/test in [0, 1) that sum "
                f"to 1 with train > 0, e.g. (0.8, 0.1, 0.1)"
            )
        object.__setattr__(self, "split", split)
        if self.split_method not in SPLIT_METHODS:
            raise ConfigError(f"unknown split method {self.split_method!r}; valid choices: {', '.join(SPLIT_METHODS)}")
        for key in ("dse_dim", "rwse_dim", "min_graphs"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{key} must be an integer >= 1, got {value!r}")
        if not self.beta > 0:
            raise ConfigError(f"beta must be > 0, got {self.beta}")
        k = self.num_clients
        if k is not None and (not isinstance(k, (int, np.integer)) or k < 1):
            raise ConfigError(f"num_clients must be an integer >= 1, got {k!r}")
        if len(self.datasets) > 1 and k is not None and k != len(self.datasets):
            raise ConfigError(
                f"num_clients={k} but {len(self.datasets)} datasets were given "
                f"({', '.join(self.datasets)}): with several datasets each client owns one, so "
                f"num_clients must be {len(self.datasets)}"
            )

    @property
    def client_count(self) -> int:
        return len(self.datasets) if len(self.datasets) > 1 else (self.num_clients or 1)

    @property
    def structure_dim(self) -> int:
        return structure_dim(self.structure, self.dse_dim, self.rwse_dim)


@dataclass(frozen=True)
class DatasetGraphs:
    name: str
    graphs: tuple  # of torch_geometric.data.Data
    labels: np.ndarray
    num_features: int
    num_classes: int


@dataclass(frozen=True)
class ClientGraphData:
    client_id: int
    name: str  # the dataset, or "<k>-<dataset>" for a client of a Dirichlet split
    dataset: str
    train: tuple
    val: tuple
    test: tuple
    num_features: int
    num_classes: int
    structure_dim: int

    @property
    def num_train(self) -> int:
        return len(self.train)

    @property
    def num_val(self) -> int:
        return len(self.val)

    @property
    def num_test(self) -> int:
        return len(self.test)

    def split(self, which: str) -> tuple:
        if which not in ("train", "val", "test"):
            raise ConfigError(f"unknown split {which!r}; valid choices: train, val, test")
        return getattr(self, which)


def _node_features(name: str, graphs: list, edge_index: np.ndarray, num_nodes: np.ndarray) -> np.ndarray | None:
    """One-hot degrees for the featureless datasets (None: keep the dataset's own ``x``)."""
    if name not in ONE_HOT_DEGREE:
        return None
    cap = ONE_HOT_DEGREE[name]
    deg = degrees(edge_index, int(num_nodes.sum()))
    if deg.size and deg.max() > cap:
        node = int(np.argmax(deg))
        graph = int(np.searchsorted(np.cumsum(num_nodes), node, side="right"))
        raise ConfigError(
            f"dataset {name!r}: graph {graph} has a node of degree {int(deg.max())}, above the "
            f"one-hot degree cap {cap} FedStar uses for it (OneHotDegree({cap})); the raw files "
            f"differ from the TU originals"
        )
    x = np.zeros((deg.size, cap + 1), dtype=np.float32)
    x[np.arange(deg.size), deg] = 1.0
    return x


@functools.lru_cache(maxsize=None)
def dataset_graphs(
    name: str,
    data_dir: str = "",
    structure: tuple[str, ...] = ("dse", "rwse"),
    dse_dim: int = 16,
    rwse_dim: int = 16,
    rwse_disk_cache: bool = True,
) -> DatasetGraphs:
    """All graphs of one TU dataset with FedStar's features and structure embeddings (memoised per process)."""
    from torch_geometric.data import Data

    name = graph_dataset_name(name)
    structure = parse_structure(structure)
    try:
        ds = load_pyg_dataset(name, data_dir or None, use_node_attr=name in NODE_ATTRIBUTES)
    except DatasetUnavailableError as exc:
        raise DatasetUnavailableError(
            f"{exc} ({name} is not in the offline dataset collection; parse_graph_datasets(..., offline_only=True) "
            f"drops it from a setting)"
            if name == "COLLAB"
            else str(exc)
        ) from exc
    pyg = [ds[i] for i in range(len(ds))]
    num_nodes = np.array([g.num_nodes for g in pyg], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(num_nodes)])
    edge_index = (
        np.concatenate([g.edge_index.numpy() + offsets[i] for i, g in enumerate(pyg)], axis=1)
        if pyg
        else np.zeros((2, 0), dtype=np.int64)
    )
    x_all = _node_features(name, pyg, edge_index, num_nodes)
    if x_all is None and (pyg[0].x is None or pyg[0].x.shape[1] == 0):
        raise ConfigError(
            f"dataset {name!r} has no node features and no one-hot degree cap is defined for it; "
            f"featureless datasets with a cap: {', '.join(ONE_HOT_DEGREE)}"
        )
    cache = rwse_cache_path(name, rwse_dim) if rwse_disk_cache else None
    s_all = torch.from_numpy(
        structure_embeddings(edge_index, num_nodes, structure, dse_dim, rwse_dim, rwse_cache=cache)
    )
    graphs = []
    for i, g in enumerate(pyg):
        a, b = int(offsets[i]), int(offsets[i + 1])
        x = torch.from_numpy(x_all[a:b]) if x_all is not None else g.x.to(torch.float32)
        graphs.append(
            Data(x=x, edge_index=g.edge_index, y=g.y.to(torch.long).view(1), s=s_all[a:b], num_nodes=int(num_nodes[i]))
        )
    labels = np.array([int(g.y) for g in graphs], dtype=np.int64)
    return DatasetGraphs(name, tuple(graphs), labels, int(graphs[0].x.shape[1]), int(ds.num_classes))


def _seed(*parts: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(p) for p in parts]))


def stratified_split(labels: np.ndarray, fractions=(0.8, 0.1, 0.1), seed: int | tuple[int, ...] = 123):
    """Indices (train, val, test), each sorted, stratified by label (see the module docstring for rounding)."""
    labels = np.asarray(labels)
    _, f_val, f_test = fractions
    rng = _seed(*(seed if isinstance(seed, tuple) else (seed,)))
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val, n_test = int(np.floor(f_val * len(idx) + 0.5)), int(np.floor(f_test * len(idx) + 0.5))
        n_train = len(idx) - n_val - n_test
        for part, chunk in zip(parts, np.split(idx, [n_train, n_train + n_val])):
            part.append(chunk)
    return tuple(np.sort(np.concatenate(p)).astype(np.int64) if p else np.zeros(0, np.int64) for p in parts)


def paper_split(labels: np.ndarray, seed: int = 123) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The FedStar authors' split of graphs with these ``labels`` (in dataset order): indices (train, val, test)
    in the order scikit-learn returns them (see the module docstring). ValueError when a class is too small to
    stratify (scikit-learn's own message)."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    idx = np.arange(len(labels))
    train, held = train_test_split(idx, test_size=0.2, stratify=labels, shuffle=True, random_state=seed)
    val, test = train_test_split(
        held, train_size=0.5, test_size=0.5, stratify=labels[held], shuffle=True, random_state=seed
    )
    return (np.asarray(train, np.int64), np.asarray(val, np.int64), np.asarray(test, np.int64))


def _name_salt(name: str) -> int:
    return zlib.crc32(name.encode())


@functools.lru_cache(maxsize=None)
def dirichlet_clients(spec: GraphTaskSpec) -> np.ndarray:
    """For a one-dataset spec: ``assignment[i]`` = the client owning graph i (Dirichlet(beta) label split)."""
    from ..partition import dirichlet_partition

    (name,) = spec.datasets
    k = spec.client_count
    data = dataset_graphs(name, spec.data_dir, spec.structure, spec.dse_dim, spec.rwse_dim, spec.rwse_disk_cache)
    n = len(data.labels)
    if k * spec.min_graphs > n:
        raise ConfigError(
            f"num_clients={k} x min_graphs={spec.min_graphs} = {k * spec.min_graphs} exceeds the {n} graphs of {name}"
        )
    try:
        return dirichlet_partition(data.labels, k, spec.beta, min_size=spec.min_graphs, seed=spec.split_seed)
    except PartitionError:
        raise PartitionError(
            f"dataset {name!r}: no Dirichlet(beta={spec.beta}) split of its {n} graphs gave "
            f"every one of the {k} clients >= min_graphs={spec.min_graphs} graphs; lower "
            f"min_graphs or num_clients, or raise beta"
        ) from None


@functools.lru_cache(maxsize=None)
def client_graph_data(spec: GraphTaskSpec, client_id: int) -> ClientGraphData:
    """Client ``client_id``'s train/val/test graphs (memoised per process: call it every round freely)."""
    if not isinstance(client_id, (int, np.integer)) or not 0 <= client_id < spec.client_count:
        raise ConfigError(f"client_id {client_id!r} out of range; valid choices: 0..{spec.client_count - 1}")
    client_id = int(client_id)
    several = len(spec.datasets) > 1
    name = spec.datasets[client_id if several else 0]
    data = dataset_graphs(name, spec.data_dir, spec.structure, spec.dse_dim, spec.rwse_dim, spec.rwse_disk_cache)
    if several or spec.client_count == 1:
        own, label, within = np.arange(len(data.graphs)), name, 0
    else:
        own, label, within = np.flatnonzero(dirichlet_clients(spec) == client_id), f"{client_id}-{name}", client_id
    if spec.split_method == "paper":
        try:
            splits = paper_split(data.labels[own], spec.split_seed)
        except ValueError as exc:
            raise ConfigError(
                f"client {client_id} ({label}): the paper's stratified split fails on its "
                f"{len(own)} graphs ({exc}); give it more graphs or use graph.split=per-class"
            ) from None
    else:
        splits = stratified_split(data.labels[own], spec.split, seed=(spec.split_seed, _name_salt(name), within))
    train, val, test = (tuple(data.graphs[i] for i in own[s]) for s in splits)
    return ClientGraphData(
        client_id, label, name, train, val, test, data.num_features, data.num_classes, spec.structure_dim
    )
