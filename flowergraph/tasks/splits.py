"""Train/validation/test split presets for node classification.

Presets (the ``split`` run-config value):

* ``public`` -- the Planetoid public split (Cora/CiteSeer/PubMed: 20 labels per class, 500 val, 1000 test).
* ``per-class`` -- 20 random training nodes per class, 500 validation, 1000 test (the "random" split of the
  Planetoid paper); ``per-class:T/V/S`` sets the three numbers.
* ``first-per-class`` -- the first 20 nodes of each class in node order for training, then 500 validation and
  1000 test nodes drawn at random from the rest (the FL-AGCNS authors' split, ``make_data.py``; on Cora its
  training nodes are the public split's); ``first-per-class:T/V/S`` sets the three numbers.
* ``random`` -- random fractions 60/20/20 of all nodes; ``random:0.6/0.2/0.2`` (or ``random:60/20/20``)
  sets them. Fractions must sum to at most 1.
* ``auto`` -- ``public`` for Planetoid datasets, ``random`` (60/20/20) otherwise.

Random splits use their own generator seeded by ``seed``: every process computes the same masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError


class MaskedNodes:
    """What a node set with features ``x`` and boolean split masks ``train_mask``, ``val_mask``, ``test_mask``
    (tensors) reports about them; node-level client data classes inherit it."""

    x: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor

    @property
    def num_features(self) -> int:
        return int(self.x.size(1))

    @property
    def num_train(self) -> int:
        return int(self.train_mask.sum())

    @property
    def num_val(self) -> int:
        return int(self.val_mask.sum())

    @property
    def num_test(self) -> int:
        return int(self.test_mask.sum())


SPLIT_CHOICES = (
    "auto",
    "public",
    "random",
    "random:F/F/F",
    "per-class",
    "per-class:T/V/S",
    "first-per-class",
    "first-per-class:T/V/S",
)


@dataclass(frozen=True)
class SplitSpec:
    kind: str  # "public" | "random" | "per-class" | "first-per-class"
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0


def parse_split(text: str, dataset_family: str) -> SplitSpec:
    """Parse a split string (see module docstring) for a dataset family ("Planetoid" or "synthetic")."""
    raw = text.strip()
    kind, _, args = raw.partition(":")
    kind = kind.strip().lower()
    if kind == "auto":
        kind, args = ("public", "") if dataset_family == "Planetoid" else ("random", "")
    if kind == "public":
        if args:
            raise ConfigError(f"split {text!r}: 'public' takes no arguments")
        if dataset_family != "Planetoid":
            raise ConfigError(
                f"split {text!r}: the public split exists only for Planetoid datasets; "
                f"valid choices here: {', '.join(c for c in SPLIT_CHOICES if c != 'public')}"
            )
        return SplitSpec("public")
    if kind not in ("random", "per-class", "first-per-class"):
        raise ConfigError(f"unknown split {text!r}; valid choices: {', '.join(SPLIT_CHOICES)}")
    default = (0.6, 0.2, 0.2) if kind == "random" else (20, 500, 1000)
    if not args:
        return SplitSpec(kind, *default)
    parts = args.replace(",", "/").split("/")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(
            f"split {text!r}: expected three numbers after ':' like "
            f"{'random:0.6/0.2/0.2' if kind == 'random' else kind + ':20/500/1000'}"
        ) from None
    if len(values) != 3 or any(v < 0 for v in values):
        raise ConfigError(f"split {text!r}: expected three non-negative numbers after ':'")
    if kind == "random":
        if any(v > 1.0 for v in values):
            values = [v / 100.0 for v in values]  # percentages, e.g. random:60/20/20
        if sum(values) > 1.0 + 1e-9:
            raise ConfigError(f"split {text!r}: fractions sum to {sum(values):g} > 1")
        if values[0] <= 0:
            raise ConfigError(f"split {text!r}: the training fraction must be > 0")
    else:
        if any(v != int(v) for v in values) or values[0] < 1:
            raise ConfigError(f"split {text!r}: {kind} takes integers T/V/S with T >= 1")
    return SplitSpec(kind, *values)


def apply_split(data, spec: SplitSpec, seed: int) -> None:
    """Set ``train_mask``/``val_mask``/``test_mask`` on ``data`` in place (public: keep PyG's masks)."""
    n = int(data.num_nodes)
    if spec.kind == "public":
        if not hasattr(data, "train_mask"):
            raise ConfigError("public split requested but the dataset carries no public masks")
        return
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5B11]))
    train = np.zeros(n, dtype=bool)
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    if spec.kind == "random":
        perm = rng.permutation(n)
        n_train = int(round(spec.a * n))
        n_val = int(round(spec.b * n))
        n_test = min(int(round(spec.c * n)), n - n_train - n_val)
        train[perm[:n_train]] = True
        val[perm[n_train : n_train + n_val]] = True
        test[perm[n_train + n_val : n_train + n_val + n_test]] = True
    else:
        per_class, n_val, n_test = int(spec.a), int(spec.b), int(spec.c)
        y = data.y.numpy()
        for k in np.unique(y):
            idx = np.flatnonzero(y == k)
            chosen = idx[:per_class] if spec.kind == "first-per-class" else rng.permutation(idx)[:per_class]
            train[chosen] = True
        rest = rng.permutation(np.flatnonzero(~train))
        if n_val + n_test > len(rest):
            raise ConfigError(
                f"{spec.kind} split asks for {n_val} validation + {n_test} test nodes but only "
                f"{len(rest)} nodes remain after the training nodes"
            )
        val[rest[:n_val]] = True
        test[rest[n_val : n_val + n_test]] = True
    data.train_mask = torch.from_numpy(train)
    data.val_mask = torch.from_numpy(val)
    data.test_mask = torch.from_numpy(test)
