"""The clients' graphs of the ASFGNN experiments (Zheng et al., section 5.1.2 and 5.2.2-5.2.4).

Every client's data is a pure function of ``(dataset, setting, alpha, seed, client)`` (plus the data folder, the
split preset and the degree threshold): :func:`client_data`. A client holds the **induced subgraph** of its nodes
in the global graph (edges to nodes of other clients are dropped), their features, their global labels
(``0..J-1`` of the whole dataset, so every client's discriminator has the same J outputs) and the train /
validation / test masks of the global split restricted to its nodes. The paper uses "exactly the same split ...
following [35]", the Planetoid public split (20 training nodes per class, 500 validation, 1000 test): that is
``split="public"``, the default.

Settings
--------
``label`` (two clients, Table 3, Table 6, Fig. 3)
    The classes are cut into two parts (:data:`PAPER_PARTS`). Part 1 is client A's home, part 2 client B's.
    Client A takes a fraction ``alpha`` of part 1 and ``1 - alpha`` of part 2; client B takes the rest (the
    mirror: ``1 - alpha`` of part 1 and ``alpha`` of part 2). alpha = 1 gives each client its own classes only
    (Cora: 1,412 nodes vs 1,296); alpha = 0.5 gives both clients the same label mix.
    The draw is stratified by (class, split role): within every class and every role (train / val / test /
    unlabelled) a seeded permutation is cut at ``round(alpha * n)``, so each client's label distribution and its
    share of the public training labels follow alpha exactly up to rounding, and the permutation does not
    depend on alpha (raising alpha only moves nodes to their home client).

    ``sizes`` says how many nodes each client draws (ours vs the paper read literally):

    * ``disjoint`` (ours, the default): every node is held by exactly one client, as above. At alpha = 0.9 on
      Cora: A = 1,270 + 130 = 1,400 nodes (part 1 + part 2), B = 142 + 1,166 = 1,308.
    * ``paper``: the paper's own sizes (section 5.1.2): "client A is made up of alpha N1 samples from the first
      part and (1 - alpha) N1 samples from the second part", client B of (1 - alpha) N2 and alpha N2 (N1, N2:
      the part sizes, Table 2), so A holds N1 nodes and B N2 at every alpha. At alpha = 0.9 on Cora: A = 1,271
      + 141 = 1,412, B = 130 + 1,166 = 1,296. Part 2 is then asked for 141 + 1,166 = 1,307 of its 1,296 nodes,
      so at least 11 part-2 nodes are in both clients, and part 1 for 1,271 + 130 = 1,401 of its 1,412, so 11
      part-1 nodes are in neither. The paper does not say how the draws overlap beyond that; ``paper`` draws
      them with that least overlap: in every (class, role) stratum the home client takes the start of the
      stratum's permutation (as ``disjoint``) and the away client its end, so they share nodes only where the
      counts force it.
    * ``paper-independent``: the paper's sizes with each client's draw from a part independent of the other's
      (the away client's nodes come from a second permutation), so they share about N_home x N_away / N_part
      nodes of each part by chance (Cora at 0.9: ~117 of part 1 and ~127 of part 2 expected; split-seed 0 draws
      111 and 128).

    In both ``paper`` readings the part totals are exact (``round(alpha * N1)`` etc.), apportioned over the
    part's (class, role) strata by largest remainder, so each client's label distribution and split roles
    follow its fractions as in ``disjoint``. At alpha = 1 all three are the same split.
``graph`` (two clients, Table 5)
    Non-IID labels and structure: client A holds the part-1 nodes of degree <= ``degree_threshold`` (3 in the
    paper, "Co5"), client B the part-2 nodes of degree > threshold ("Co6"); degrees are counted in the global
    graph. The other nodes belong to nobody. alpha must be 1.0 (the paper has no alpha here).
``disjoint`` (``num_clients`` >= 2 clients, Fig. 4)
    Disjoint label sets: two clients get the paper's two parts; more clients get groups of classes balanced by
    node count (greedy: classes by decreasing size, each to the group with the fewest nodes so far; ties to
    the lower class / group index). alpha must be 1.0.

Class identities
----------------
PyG's Planetoid files carry class indices, not names. The names come from the class sizes of the original
datasets, which are all distinct (Cora: Case_Based 298, Genetic_Algorithms 418, Neural_Networks 818,
Probabilistic_Methods 426, Reinforcement_Learning 217, Rule_Learning 180, Theory 351; CiteSeer: Agents 596,
AI 249, DB 701, IR 668, ML 590, HCI 508). :func:`class_names` matches them and fails loudly if the files
disagree. In PyG's index order::

    Cora:     0 Theory, 1 Reinforcement_Learning, 2 Genetic_Algorithms, 3 Neural_Networks,
              4 Probabilistic_Methods, 5 Case_Based, 6 Rule_Learning
    CiteSeer: 0 AI, 1 ML, 2 IR, 3 DB, 4 Agents, 5 HCI

The paper names Cora's parts ({Theory, Reinforcement Learning, Genetic Algorithms, Probabilistic Methods},
1,412 nodes; {Neural Networks, Case Based, Rule Learning}, 1,296) but not CiteSeer's; its Table 2 sizes (1,507
and 1,805 nodes, 3 classes each) leave exactly one choice: {AI, ML, IR} (249 + 590 + 668) vs {DB, Agents, HCI}
(701 + 596 + 508).

CiteSeer placeholders: PyG's CiteSeer has 3,327 nodes, 15 more than the dataset: nodes that the citation
graph mentions but the raw files give no features or label (all-zero feature rows, label 0 by PyG's argmax, in
no public mask). They belong to no client here (:func:`placeholder_nodes`), which makes the part sizes the
paper's 1,507 / 1,805.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ....errors import ConfigError
from ....tasks.splits import MaskedNodes
from .divergence import label_counts

SETTINGS = ("label", "graph", "disjoint")
SIZES = ("disjoint", "paper", "paper-independent")  # see the module docstring
SUPPORTED_DATASETS = ("Cora", "CiteSeer")

# Class sizes of the original datasets (all distinct, so they identify PyG's class indices).
KNOWN_CLASS_SIZES: dict[str, dict[str, int]] = {
    "Cora": {
        "Case_Based": 298,
        "Genetic_Algorithms": 418,
        "Neural_Networks": 818,
        "Probabilistic_Methods": 426,
        "Reinforcement_Learning": 217,
        "Rule_Learning": 180,
        "Theory": 351,
    },
    "CiteSeer": {"Agents": 596, "AI": 249, "DB": 701, "IR": 668, "ML": 590, "HCI": 508},
}
# The paper's two-part label split (section 5.1.2), by class name; part 1 is client A's home.
PAPER_PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Cora": (
        ("Theory", "Reinforcement_Learning", "Genetic_Algorithms", "Probabilistic_Methods"),
        ("Neural_Networks", "Case_Based", "Rule_Learning"),
    ),
    "CiteSeer": (("AI", "ML", "IR"), ("DB", "Agents", "HCI")),
}
PAPER_PART_SIZES = {"Cora": (1412, 1296), "CiteSeer": (1507, 1805)}
EXPECTED_PLACEHOLDERS = {"Cora": 0, "CiteSeer": 15}
ROLES = ("train", "val", "test", "unlabelled")


@dataclass(frozen=True, eq=False)
class ClientData(MaskedNodes):
    """One client's induced subgraph. Tensors are CPU tensors; ``edge_index`` uses local indices 0..n-1."""

    dataset: str
    setting: str
    client: int  # -1 for the centralized union
    num_clients: int
    global_ids: torch.Tensor  # [n] int64
    x: torch.Tensor  # [n, d] float32
    y: torch.Tensor  # [n] int64, global class indices 0..J-1
    edge_index: torch.Tensor  # [2, E] both directions
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_classes: int  # J of the whole dataset
    owner: torch.Tensor | None = None  # centralized union only: the client that owns each node

    @cached_property
    def x_input(self) -> torch.Tensor:
        """The features as sparse CSR, the model's input in training and evaluation (computed once)."""
        from .models import sparse_csr

        return sparse_csr(self.x)

    @property
    def num_nodes(self) -> int:
        return int(self.global_ids.numel())

    @property
    def num_edges(self) -> int:
        """Undirected edges (each stored in both directions)."""
        return int(self.edge_index.size(1)) // 2

    def train_label_counts(self) -> np.ndarray:
        """``N_i``: the client's training labels per class (length J), what it sends (secretly shared)."""
        return label_counts(self.y.numpy(), self.num_classes, self.train_mask.numpy())

    def classes(self) -> tuple[int, ...]:
        """The classes present among the client's nodes."""
        return tuple(int(c) for c in torch.unique(self.y).tolist())

    def to_pyg(self):
        from torch_geometric.data import Data

        return Data(
            x=self.x,
            y=self.y,
            edge_index=self.edge_index,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
            num_nodes=self.num_nodes,
        )


# ----------------------------------------------------------------------------------------------- global graph
def _canonical_dataset(dataset: str) -> str:
    for name in SUPPORTED_DATASETS:
        if str(dataset).lower() == name.lower():
            return name
    raise ConfigError(
        f"dataset {dataset!r} is not supported by the ASFGNN splits; valid choices: {', '.join(SUPPORTED_DATASETS)}"
    )


def load_graph(dataset: str, data_dir: str | None = None, split: str = "public", seed: int = 0):
    """The global graph (PyG ``Data`` with split masks), loaded from raw files through the shared loader
    (memoised per process by :func:`flowergraph.tasks.federated_graph.load_global_graph`; never downloads when
    the raw files are in ``data_dir``)."""
    from ....tasks import federated_graph as fg

    name = _canonical_dataset(dataset)
    return fg.load_global_graph(fg.GraphSpec(dataset=name, data_dir=str(data_dir or ""), split=split, seed=int(seed)))


def placeholder_nodes(data) -> np.ndarray:
    """Node ids with an all-zero feature row: CiteSeer's 15 placeholders (no features, no real label)."""
    return np.flatnonzero((data.x.abs().sum(dim=1) == 0).numpy())


def class_names(dataset: str, data) -> tuple[str, ...]:
    """Class name of each PyG class index, identified by the class sizes (placeholders excluded).

    ConfigError when the files' class sizes are not the original dataset's (the mapping would be a guess).
    """
    name = _canonical_dataset(dataset)
    y = data.y.numpy().copy()
    keep = np.ones(y.size, dtype=bool)
    keep[placeholder_nodes(data)] = False
    sizes = np.bincount(y[keep], minlength=int(data.num_classes))
    by_size = {v: k for k, v in KNOWN_CLASS_SIZES[name].items()}
    names = []
    for index, size in enumerate(sizes.tolist()):
        if size not in by_size:
            raise ConfigError(
                f"{name}: class {index} has {size} nodes, which matches none of the original "
                f"class sizes {KNOWN_CLASS_SIZES[name]}; the raw files are not the standard ones"
            )
        names.append(by_size[size])
    if len(set(names)) != len(names):
        raise ConfigError(f"{name}: class sizes {sizes.tolist()} do not identify the classes uniquely")
    return tuple(names)


def paper_parts(dataset: str, data) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The paper's two label parts as PyG class indices (sorted), checked against Table 2's node counts."""
    name = _canonical_dataset(dataset)
    names = class_names(name, data)
    parts = tuple(tuple(sorted(names.index(c) for c in part)) for part in PAPER_PARTS[name])
    y = data.y.numpy()
    keep = np.ones(y.size, dtype=bool)
    keep[placeholder_nodes(data)] = False
    sizes = tuple(int(np.isin(y[keep], part).sum()) for part in parts)
    if sizes != PAPER_PART_SIZES[name]:
        raise ConfigError(
            f"{name}: the paper's label parts have {sizes} nodes here, the paper {PAPER_PART_SIZES[name]}"
        )
    return parts  # type: ignore[return-value]


def balanced_class_groups(class_sizes: np.ndarray, num_groups: int) -> tuple[tuple[int, ...], ...]:
    """Greedy partition of classes into ``num_groups`` groups with balanced node counts (see module doc)."""
    sizes = np.asarray(class_sizes)
    if not 1 <= num_groups <= sizes.size:
        raise ConfigError(
            f"cannot split {sizes.size} classes into {num_groups} non-empty disjoint label sets; "
            f"valid client counts: 2..{sizes.size}"
        )
    order = sorted(range(sizes.size), key=lambda c: (-int(sizes[c]), c))
    groups: list[list[int]] = [[] for _ in range(num_groups)]
    totals = [0] * num_groups
    for c in order:
        g = min(range(num_groups), key=lambda i: (totals[i], i))
        groups[g].append(c)
        totals[g] += int(sizes[c])
    return tuple(tuple(sorted(g)) for g in groups)


# ------------------------------------------------------------------------------------------------ assignments
def _check_alpha(alpha: float, setting: str) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ConfigError(f"alpha {alpha!r} is not a number; valid range [0, 1]") from None
    if not 0.0 <= a <= 1.0 or math.isnan(a):
        raise ConfigError(f"alpha {alpha!r} is outside the valid range [0, 1] (the paper uses 0.5..1.0)")
    if setting != "label" and a != 1.0:
        raise ConfigError(f"alpha {alpha!r} applies to the 'label' setting only; setting {setting!r} needs alpha=1.0")
    return a


def _roles(data) -> np.ndarray:
    role = np.full(int(data.num_nodes), 3, dtype=np.int64)
    role[data.test_mask.numpy()] = 2
    role[data.val_mask.numpy()] = 1
    role[data.train_mask.numpy()] = 0
    return role


def _cut(count: int, fraction: float) -> int:
    return math.floor(fraction * count + 0.5)


@functools.lru_cache(maxsize=32)
def client_assignment(
    dataset: str,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    num_clients: int = 2,
    data_dir: str | None = None,
    split: str = "public",
    degree_threshold: int = 3,
) -> np.ndarray:
    """``owner[v]``: the client (0..num_clients-1) that holds global node v, or -1 for none (read-only)."""
    name = _canonical_dataset(dataset)
    if setting not in SETTINGS:
        raise ConfigError(f"setting {setting!r} is unknown; valid choices: {', '.join(SETTINGS)}")
    a = _check_alpha(alpha, setting)
    num_clients = int(num_clients)
    if setting in ("label", "graph") and num_clients != 2:
        raise ConfigError(
            f"setting {setting!r} has exactly 2 clients, got num_clients={num_clients}; use setting 'disjoint' for more"
        )
    data = load_graph(name, data_dir, split, seed)
    n = int(data.num_nodes)
    y = data.y.numpy()
    owner = np.full(n, -1, dtype=np.int64)
    real = np.ones(n, dtype=bool)
    real[placeholder_nodes(data)] = False
    if int((~real).sum()) != EXPECTED_PLACEHOLDERS[name]:
        raise ConfigError(
            f"{name}: found {int((~real).sum())} all-zero feature rows, expected "
            f"{EXPECTED_PLACEHOLDERS[name]}; the raw files are not the standard ones"
        )
    if setting == "disjoint" and num_clients != 2:
        sizes = np.bincount(y[real], minlength=int(data.num_classes))
        groups = balanced_class_groups(sizes, num_clients)
        for client, group in enumerate(groups):
            owner[real & np.isin(y, group)] = client
    elif setting in ("disjoint", "graph") or a == 1.0:
        parts = paper_parts(name, data)
        if setting == "graph":
            if int(degree_threshold) < 0:
                raise ConfigError(f"degree_threshold {degree_threshold!r} must be >= 0")
            deg = np.bincount(data.edge_index[0].numpy(), minlength=n)
            owner[real & np.isin(y, parts[0]) & (deg <= int(degree_threshold))] = 0
            owner[real & np.isin(y, parts[1]) & (deg > int(degree_threshold))] = 1
        else:
            for client, part in enumerate(parts):
                owner[real & np.isin(y, part)] = client
    else:
        parts = paper_parts(name, data)
        role = _roles(data)
        for home, part in enumerate(parts):
            for c in part:
                for r in range(len(ROLES)):
                    nodes = np.flatnonzero(real & (y == c) & (role == r))
                    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA5F6, int(c), r]))
                    nodes = rng.permutation(nodes)
                    k = _cut(nodes.size, a)
                    owner[nodes[:k]] = home
                    owner[nodes[k:]] = 1 - home
    owner.setflags(write=False)
    return owner


def _apportion(total: int, sizes: np.ndarray) -> np.ndarray:
    """``total`` split over strata of ``sizes`` nodes in proportion to their sizes (largest remainder; ties to
    the lower stratum): exact sum, and no stratum gets more than its size when ``total <= sizes.sum()``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.sum() == 0:
        return np.zeros_like(sizes)
    quota = total * sizes / sizes.sum()
    counts = np.floor(quota).astype(np.int64)
    order = sorted(range(sizes.size), key=lambda i: (-(quota[i] - counts[i]), i))
    for i in order[: int(total - counts.sum())]:
        counts[i] += 1
    return counts


@functools.lru_cache(maxsize=32)
def client_members(
    dataset: str,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    num_clients: int = 2,
    data_dir: str | None = None,
    split: str = "public",
    degree_threshold: int = 3,
    sizes: str = "disjoint",
) -> np.ndarray:
    """``member[k, v]``: whether client k holds global node v (read-only bool array, ``[num_clients, n]``).
    ``sizes="disjoint"``: :func:`client_assignment`'s owners (each node in at most one client); ``paper`` and
    ``paper-independent``: the paper's client sizes at alpha (the module docstring), where a node may be in
    both clients."""
    if sizes not in SIZES:
        raise ConfigError(f"sizes {sizes!r} is unknown; valid choices: {', '.join(SIZES)}")
    name = _canonical_dataset(dataset)
    owner = client_assignment(name, setting, alpha, seed, num_clients, data_dir, split, degree_threshold)
    if sizes == "disjoint":
        member = np.stack([owner == k for k in range(int(num_clients))])
        member.setflags(write=False)
        return member
    if setting != "label":
        raise ConfigError(f"sizes {sizes!r} applies to the 'label' setting only; setting {setting!r} needs 'disjoint'")
    a = float(alpha)
    data = load_graph(name, data_dir, split, seed)
    y, role = data.y.numpy(), _roles(data)
    real = owner >= 0  # every real node has an owner in the label split
    parts = paper_parts(name, data)
    totals = [int(np.isin(y[real], part).sum()) for part in parts]  # N1, N2 (Table 2)
    member = np.zeros((2, int(data.num_nodes)), dtype=bool)
    for home, part in enumerate(parts):
        away = 1 - home
        strata = [np.flatnonzero(real & (y == c) & (role == r)) for c in part for r in range(len(ROLES))]
        keys = [(c, r) for c in part for r in range(len(ROLES))]
        n = np.array([s.size for s in strata])
        size = n.sum()
        want_home = math.floor(a * totals[home] + 0.5)  # alpha N_home samples of the home part
        want_away = math.floor((1.0 - a) * totals[away] + 0.5)  # (1 - alpha) N_away samples of it
        if want_away > size:
            raise ConfigError(
                f"sizes {sizes!r}: at alpha {alpha!r} client {away} asks part {home + 1} for {want_away} nodes, "
                f"which holds {size}; the paper's sizes need alpha >= {1 - size / totals[away]:.3f} here"
            )
        h = _apportion(want_home, n)
        if sizes == "paper":  # the least overlap: shared (or unused) nodes apportioned like the draws
            extra = want_home + want_away - size
            w = n - h + np.sign(extra) * _apportion(abs(extra), n)
            if np.any(w < 0) or np.any(w > n):
                raise ConfigError(f"sizes {sizes!r}: alpha {alpha!r} leaves a stratum without room for the draws")
        else:
            w = _apportion(want_away, n)
        for (c, r), nodes, k_home, k_away in zip(keys, strata, h, w):
            perm = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA5F6, int(c), r])).permutation(nodes)
            member[home, perm[:k_home]] = True
            if sizes == "paper":
                member[away, perm[perm.size - k_away :]] = True
            else:
                other = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA5F6, int(c), r, 1]))
                member[away, other.permutation(nodes)[:k_away]] = True
    member.setflags(write=False)
    return member


def _induced(
    data,
    nodes: np.ndarray,
    *,
    dataset: str,
    setting: str,
    client: int,
    num_clients: int,
    owner: np.ndarray | None = None,
) -> ClientData:
    from torch_geometric.utils import subgraph

    ids = torch.as_tensor(np.sort(nodes), dtype=torch.long)
    edge_index, _ = subgraph(ids, data.edge_index, relabel_nodes=True, num_nodes=int(data.num_nodes))
    return ClientData(
        dataset=dataset,
        setting=setting,
        client=client,
        num_clients=num_clients,
        global_ids=ids,
        x=data.x[ids].contiguous(),
        y=data.y[ids].to(torch.long).contiguous(),
        edge_index=edge_index.contiguous(),
        train_mask=data.train_mask[ids].contiguous(),
        val_mask=data.val_mask[ids].contiguous(),
        test_mask=data.test_mask[ids].contiguous(),
        num_classes=int(data.num_classes),
        owner=None if owner is None else torch.as_tensor(owner[np.sort(nodes)], dtype=torch.long),
    )


def client_data(
    dataset: str,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    client: int = 0,
    *,
    num_clients: int = 2,
    data_dir: str | None = None,
    split: str = "public",
    degree_threshold: int = 3,
    sizes: str = "disjoint",
) -> ClientData:
    """Client ``client``'s induced subgraph in ``setting`` (see the module docstring). Deterministic."""
    member = client_members(
        _canonical_dataset(dataset),
        setting,
        float(alpha),
        int(seed),
        int(num_clients),
        data_dir,
        split,
        int(degree_threshold),
        sizes,
    )
    if isinstance(client, bool) or not isinstance(client, (int, np.integer)) or not 0 <= client < num_clients:
        raise ConfigError(f"client {client!r} is out of range; valid choices: 0..{int(num_clients) - 1}")
    data = load_graph(dataset, data_dir, split, seed)
    nodes = np.flatnonzero(member[int(client)])
    if nodes.size == 0:
        raise ConfigError(f"client {client} holds no nodes in setting {setting!r} (alpha={alpha})")
    return _induced(
        data,
        nodes,
        dataset=_canonical_dataset(dataset),
        setting=setting,
        client=int(client),
        num_clients=int(num_clients),
    )


def all_clients(
    dataset: str,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    *,
    num_clients: int = 2,
    data_dir: str | None = None,
    split: str = "public",
    degree_threshold: int = 3,
    sizes: str = "disjoint",
) -> list[ClientData]:
    """:func:`client_data` for every client, in client order."""
    return [
        client_data(
            dataset,
            setting,
            alpha,
            seed,
            c,
            num_clients=num_clients,
            data_dir=data_dir,
            split=split,
            degree_threshold=degree_threshold,
            sizes=sizes,
        )
        for c in range(int(num_clients))
    ]


def centralized_data(
    dataset: str,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    *,
    num_clients: int = 2,
    data_dir: str | None = None,
    split: str = "public",
    degree_threshold: int = 3,
    sizes: str = "disjoint",
) -> ClientData:
    """The CM baseline's data: the induced subgraph of the union of all clients' nodes (so edges between
    clients are kept), with ``owner`` telling which client each node came from (for per-client metrics).
    ``client`` is -1. Only for ``sizes="disjoint"``: with the paper's overlapping sizes a node may have two
    owners."""
    if sizes != "disjoint":
        raise ConfigError(
            f"sizes {sizes!r}: the centralized baseline needs each node in one client (its per-client accuracy "
            f"counts every node for its owner); valid: 'disjoint'"
        )
    owner = client_assignment(
        _canonical_dataset(dataset),
        setting,
        float(alpha),
        int(seed),
        int(num_clients),
        data_dir,
        split,
        int(degree_threshold),
    )
    data = load_graph(dataset, data_dir, split, seed)
    return _induced(
        data,
        np.flatnonzero(owner >= 0),
        dataset=_canonical_dataset(dataset),
        setting=setting,
        client=-1,
        num_clients=int(num_clients),
        owner=owner,
    )
