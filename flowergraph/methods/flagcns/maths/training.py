"""Losses, gradients and the server's step for FL-AGCNS's SuperNet, and the reference training of a fixed code.

Notation: client i holds graph G_i with ``n_i = |train_{G_i}|`` training and ``v_i = |val_{G_i}|`` validation
nodes; ``CE_i(W, a)`` is the mean cross-entropy of code a's outputs over client i's training nodes.

* **Client** (:func:`client_loss_and_gradients`): for sampled codes S it computes
  ``L_i = (1/|S|) sum_{a in S} CE_i(W_a, a)`` (one forward per code, intermediates shared, one backward) and
  ``g_i = dL_i / dW`` restricted to the parameters the codes train (``SuperNet.gradient_keys(S)``: their
  sub-networks' parameters, ARMAConv's unused recursion weight excepted); the others have no gradient and are not
  sent.
* **Server** (:func:`combine_gradients`): ``g = sum_i (n_i / sum_j n_j) g_i`` (``mode="weighted"``, paper Eq. 2:
  with the client's ``1/|S|`` this is ``(1/|P|) sum_i (n_i / sum_j n_j) dW^P_{G_i}``) or ``g = sum_i g_i``
  (``mode="sum"``). A parameter a client did not send counts as a zero gradient from it.
* **Step** (:class:`SuperNetOptimizer`): one Adam step (lr 0.02, weight decay 5e-6: ``g + 5e-6 W``) on the
  parameters that received a gradient; the others, as torch's Adam does with a ``None`` gradient, keep their
  values and their moment estimates (and step counts) unchanged (``scope="this-step"``, the default). With
  ``scope="once-touched"`` (the authors' 2021 code as it ran under torch 1.x) every parameter that has received a
  gradient once is stepped every step after, with a zero gradient when the step's codes do not train it: its
  momentum and the weight decay keep moving it (module docstring of :mod:`flowergraph.methods.flagcns.maths`, item 10).
* **Evaluation** (:func:`evaluate_codes`): each code's mean cross-entropy and accuracy on client i's validation
  (or any) nodes, in evaluation mode without gradients; :func:`federated_mean` gives
  ``FLL_a = sum_i (v_i / sum_j v_j) L_val_i(a)`` (paper Eq. 1) and the val-size weighted accuracy.

Reference training of one code (:func:`train_architecture`, one graph; :func:`federated_train_architecture`, in
one process over the clients' graphs exactly as the reference code retrains the final architecture: every epoch
each client's full-batch gradient, their weighted combination, one Adam step; the epoch with the best (federated)
validation accuracy is kept and its test accuracy reported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ....errors import ConfigError
from ....tasks.training import mask_metrics
from ....tasks.torch_state import load_optimizer_state, module_arrays, optimizer_state
from .space import Code, SearchSpace
from .supernet import ArchitectureNet, SuperNet, _as_codes

COMBINE_MODES = ("weighted", "sum")
#: Which parameters the server's Adam steps (:class:`SuperNetOptimizer`): those that got a gradient this step
#: (``this-step``), or every one that got a gradient once (``once-touched``, the 2021 code under torch 1.x)
ADAM_SCOPES = ("this-step", "once-touched")

#: The paper's / reference code's SuperNet optimiser: Adam, learning rate 0.02, weight decay 5e-6.
LR = 0.02
WEIGHT_DECAY = 5e-6


def _tensors(graph):
    try:
        return graph.x, graph.edge_index, graph.y
    except AttributeError:
        raise ConfigError(
            f"a graph needs x, edge_index, y and train/val/test masks; got {type(graph).__name__}"
        ) from None


def _mask(graph, name: str) -> torch.Tensor:
    mask = getattr(graph, f"{name}_mask", None)
    if mask is None:
        raise ConfigError(f"the graph has no {name}_mask; valid mask names: train, val, test")
    return mask


def client_loss_and_gradients(
    supernet: SuperNet, graph, codes: Iterable[Code], share: bool = True
) -> tuple[float, dict[str, np.ndarray]]:
    """``(L_i, g_i)`` for one client (module docstring): the training loss averaged over ``codes`` and its
    gradients, named by SuperNet state-dict key, for exactly the keys ``supernet.gradient_keys(codes)``. Leaves the
    SuperNet's weights and ``.grad`` fields unchanged. A graph without training nodes gives ``(nan, {})``."""
    codes = _as_codes(supernet.space, codes)
    if not codes:
        raise ConfigError("client_loss_and_gradients needs at least one code")
    x, edge_index, y = _tensors(graph)
    mask = _mask(graph, "train")
    if int(mask.sum()) == 0:
        return math.nan, {}
    was_training = supernet.training
    supernet.train()
    supernet.zero_grad(set_to_none=True)
    outs = supernet.forward_codes(x, edge_index, codes, share=share)
    loss = torch.stack([F.cross_entropy(out[mask], y[mask]) for out in outs]).mean()
    loss.backward()
    params = dict(supernet.named_parameters())
    grads = {}
    for key in supernet.gradient_keys(codes):
        grad = params[key].grad
        grads[key] = (
            np.zeros(tuple(params[key].shape), dtype=np.float32) if grad is None else grad.detach().cpu().numpy().copy()
        )
    supernet.zero_grad(set_to_none=True)
    supernet.train(was_training)
    return float(loss.detach()), grads


@torch.no_grad()
def evaluate_codes(
    supernet: SuperNet, graph, codes: Iterable[Code], masks: Sequence[str] = ("val",), share: bool = True
) -> list[dict[str, float]]:
    """For each code, ``<mask>_loss`` (mean cross-entropy), ``<mask>_accuracy`` and ``num_<mask>`` for every
    mask name in ``masks`` (train, val, test), from one evaluation-mode forward; NaN for an empty mask."""
    codes = _as_codes(supernet.space, codes)
    x, edge_index, y = _tensors(graph)
    named = {m: _mask(graph, m) for m in masks}
    was_training = supernet.training
    supernet.eval()
    outs = supernet.forward_codes(x, edge_index, codes, share=share) if codes else []
    supernet.train(was_training)
    return [output_metrics(out, y, named) for out in outs]


def output_metrics(out: torch.Tensor, y: torch.Tensor, masks: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """``<mask>_loss`` (mean cross-entropy of ``out``, as the reference trains on its outputs), ``<mask>_accuracy``
    and ``num_<mask>`` for every named mask (NaN loss and accuracy for an empty one)."""
    return mask_metrics(out, y, masks, loss=F.cross_entropy, accuracy_dtype=torch.float64)  # type: ignore[return-value]


def federated_mean(values: Sequence[float], sizes: Sequence[float]) -> float:
    """``sum_i (s_i / sum_j s_j) value_i`` over the clients with ``s_i > 0`` (their values must be finite); NaN
    when no client has a positive size. FLL (paper Eq. 1) with validation losses and validation sizes."""
    if len(values) != len(sizes):
        raise ConfigError(f"{len(values)} values but {len(sizes)} sizes")
    if any(s < 0 for s in sizes):
        raise ConfigError(f"sizes must be >= 0, got {list(sizes)}")
    total = float(sum(s for s in sizes if s > 0))
    if total == 0:
        return math.nan
    return float(sum((s / total) * v for v, s in zip(values, sizes) if s > 0))


def combine_gradients(
    grads: Sequence[Mapping[str, np.ndarray]], sizes: Sequence[float] | None = None, mode: str = "weighted"
) -> dict[str, np.ndarray]:
    """The server's combination of the clients' gradients (module docstring): ``weighted`` (needs ``sizes``, the
    clients' training-set sizes) or ``sum``. Keys: the union of the clients' keys, in first-seen order; a missing
    key is a zero gradient. Computed in float64, returned in the clients' dtype."""
    if mode not in COMBINE_MODES:
        raise ConfigError(f"unknown gradient combination {mode!r}; valid choices: {', '.join(COMBINE_MODES)}")
    if not grads:
        raise ConfigError("combine_gradients needs the gradients of at least one client")
    if mode == "weighted":
        if sizes is None or len(sizes) != len(grads):
            raise ConfigError(
                f"mode 'weighted' needs one training-set size per client: {len(grads)} gradients, sizes {sizes!r}"
            )
        if any(s < 0 for s in sizes) or sum(sizes) <= 0:
            raise ConfigError(f"training-set sizes must be >= 0 with a positive sum, got {list(sizes)}")
        total = float(sum(sizes))
        weights = [float(s) / total for s in sizes]
    else:
        weights = [1.0] * len(grads)
    out: dict[str, np.ndarray] = {}
    dtypes: dict[str, np.dtype] = {}
    for w, g in zip(weights, grads):
        for key, value in g.items():
            value = np.asarray(value)
            if key in out:
                if value.shape != out[key].shape:
                    raise ConfigError(
                        f"gradient {key!r} has shape {value.shape} from one client and {out[key].shape} from another"
                    )
                out[key] += w * value.astype(np.float64)
            else:
                out[key] = w * value.astype(np.float64)
                dtypes[key] = value.dtype
    return {k: v.astype(dtypes[k]) for k, v in out.items()}


class SuperNetOptimizer:
    """The server's Adam over the SuperNet's parameters; :meth:`step` applies one combined gradient.

    ``scope`` (:data:`ADAM_SCOPES`): ``this-step`` steps the parameters named in the step's gradients only (the
    others keep their values and moments, as torch's Adam does with a ``None`` gradient); ``once-touched`` also
    steps, with a zero gradient, every parameter that was stepped before: what the authors' 2021 code did under
    torch 1.x, whose ``zero_grad()`` left a zero tensor (not ``None``) in every ``.grad`` it had touched, so its
    clients sent zeros for those parameters and its server's Adam stepped them (``federal.py`` at d360d44:
    ``Client.get_grad_dict``, ``Controller.aggregate_grad``). A parameter counts as stepped before when Adam holds
    state for it, so the scope needs nothing beyond the optimiser's state to resume.

    Its state (moment estimates, step counts) goes to arrays and JSON values (:meth:`state`) and back
    (:meth:`load_state`), so a resumed search steps exactly as an uninterrupted one."""

    def __init__(
        self, supernet: SuperNet, lr: float = LR, weight_decay: float = WEIGHT_DECAY, scope: str = "this-step"
    ):
        if not lr > 0:
            raise ConfigError(f"lr must be > 0, got {lr}")
        if weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {weight_decay}")
        if scope not in ADAM_SCOPES:
            raise ConfigError(f"unknown Adam scope {scope!r}; valid choices: {', '.join(ADAM_SCOPES)}")
        self.supernet, self.scope = supernet, scope
        self.params = dict(supernet.named_parameters())
        self.optimizer = torch.optim.Adam(list(self.params.values()), lr=lr, weight_decay=weight_decay)

    def touched(self) -> list[str]:
        """The parameters Adam has stepped at least once (it holds state for them), in parameter order."""
        return [k for k, p in self.params.items() if self.optimizer.state.get(p)]

    def step(self, grads: Mapping[str, np.ndarray]) -> list[str]:
        """One Adam step with ``grads`` (named by state-dict key); returns the keys of the parameters it stepped:
        those named, and under ``once-touched`` also those stepped before (with a zero gradient). The others are
        left as they are."""
        for key, value in grads.items():
            if key not in self.params:
                raise ConfigError(f"gradient for {key!r}, which is not a SuperNet parameter")
            if tuple(np.shape(value)) != tuple(self.params[key].shape):
                raise ConfigError(
                    f"gradient {key!r} has shape {tuple(np.shape(value))}, the parameter "
                    f"{tuple(self.params[key].shape)}"
                )
        stepped = list(grads)
        if self.scope == "once-touched":
            named = set(grads)
            stepped += [k for k in self.touched() if k not in named]
        for p in self.params.values():
            p.grad = None
        for key, value in grads.items():
            p = self.params[key]
            p.grad = torch.from_numpy(np.ascontiguousarray(value)).to(p.dtype).clone()
        for key in stepped[len(grads) :]:
            self.params[key].grad = torch.zeros_like(self.params[key])
        self.optimizer.step()
        for p in self.params.values():
            p.grad = None
        return stepped

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return optimizer_state(self.optimizer)

    def load_state(self, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> None:
        load_optimizer_state(self.optimizer, arrays, values)


def architecture_gradients(net: ArchitectureNet, graph) -> tuple[float, dict[str, np.ndarray]]:
    """One client's share of an epoch of federated retraining: the full-batch training cross-entropy of the
    standalone network ``net`` on ``graph`` and its gradients, named by state-dict key, for the parameters that
    received one (:meth:`ArchitectureNet.gradient_keys`). Leaves the weights and ``.grad`` fields unchanged; a
    graph without training nodes gives ``(nan, {})``."""
    x, edge_index, y = _tensors(graph)
    mask = _mask(graph, "train")
    if int(mask.sum()) == 0:
        return math.nan, {}
    was_training = net.training
    net.train()
    net.zero_grad(set_to_none=True)
    loss = F.cross_entropy(net(x, edge_index)[mask], y[mask])
    loss.backward()
    grads = {k: p.grad.detach().cpu().numpy().copy() for k, p in net.named_parameters() if p.grad is not None}
    net.zero_grad(set_to_none=True)
    net.train(was_training)
    return float(loss.detach()), grads


@torch.no_grad()
def evaluate_network(net: ArchitectureNet, graph, masks: Sequence[str] = ("val", "test")) -> dict[str, float]:
    """:func:`output_metrics` of one evaluation-mode forward of ``net`` over ``graph``."""
    x, edge_index, y = _tensors(graph)
    named = {m: _mask(graph, m) for m in masks}
    was_training = net.training
    net.eval()
    out = net(x, edge_index)
    net.train(was_training)
    return output_metrics(out, y, named)


# ----------------------------------------------------------------------------------------- reference training
@dataclass
class TrainResult:
    """Outcome of training one code: the epoch (1-based) with the best validation accuracy (the first such
    epoch), its validation and test accuracy, and the per-epoch history."""

    best_epoch: int
    val_accuracy: float
    test_accuracy: float
    parameters: int
    history: list[dict[str, float]] = field(default_factory=list)
    best_state: dict[str, np.ndarray] = field(default_factory=dict)


def train_architecture(
    space: SearchSpace,
    code: Code,
    graph,
    epochs: int = 50,
    lr: float = LR,
    weight_decay: float = WEIGHT_DECAY,
    seed: int = 0,
) -> TrainResult:
    """Train ``code``'s network from scratch on one graph: ``epochs`` full-batch Adam steps on the training
    cross-entropy; after every step, validation and test accuracy; keeps the first epoch with the best
    validation accuracy (the reference code's selection)."""
    return federated_train_architecture(
        space, code, [graph], epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed
    )


def federated_train_architecture(
    space: SearchSpace,
    code: Code,
    graphs: Sequence,
    epochs: int = 50,
    lr: float = LR,
    weight_decay: float = WEIGHT_DECAY,
    seed: int = 0,
    mode: str = "weighted",
) -> TrainResult:
    """The reference code's final training, in one process: one model; every epoch each client's full-batch
    training gradient, combined by :func:`combine_gradients` (``mode``, train-size weights), one Adam step; then
    validation/test accuracy per client, combined with validation/test-size weights (FLACC for test). Keeps the
    first epoch with the best federated validation accuracy."""
    if not graphs:
        raise ConfigError("federated_train_architecture needs at least one graph")
    code = space.check(code)
    in_dim = int(graphs[0].x.size(1))
    net = ArchitectureNet(space, code, in_dim, _num_classes(graphs), seed=seed)
    return federated_train_network(net, graphs, epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed, mode=mode)


def _num_classes(graphs: Sequence) -> int:
    return int(max(int(getattr(g, "num_classes", 0) or 0) for g in graphs) or max(int(g.y.max()) + 1 for g in graphs))


def federated_train_network(
    net: torch.nn.Module,
    graphs: Sequence,
    epochs: int = 50,
    lr: float = LR,
    weight_decay: float = WEIGHT_DECAY,
    seed: int = 0,
    mode: str = "weighted",
) -> TrainResult:
    """:func:`federated_train_architecture`'s loop for any network called as ``net(x, edge_index)`` whose output
    is given to the cross-entropy (e.g. the reference code's fixed baselines,
    :func:`~flowergraph.methods.flagcns.maths.baselines.reference_baseline`). ``seed`` seeds the training's random
    draws (dropout), not the initialisation: ``net`` comes initialised."""
    if epochs < 1:
        raise ConfigError(f"epochs must be >= 1, got {epochs}")
    if not graphs:
        raise ConfigError("federated_train_network needs at least one graph")
    params = dict(net.named_parameters())
    optimizer = torch.optim.Adam(list(params.values()), lr=lr, weight_decay=weight_decay)
    train_sizes = [int(_mask(g, "train").sum()) for g in graphs]
    history: list[dict[str, float]] = []
    best = TrainResult(
        best_epoch=0,
        val_accuracy=-math.inf,
        test_accuracy=math.nan,
        parameters=int(sum(p.numel() for p in params.values())),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for epoch in range(1, epochs + 1):
            results = [architecture_gradients(net, g) for g in graphs]
            losses = [loss for loss, _ in results]
            combined = combine_gradients([grads for _, grads in results], train_sizes, mode)
            optimizer.zero_grad(set_to_none=True)
            for key, value in combined.items():
                params[key].grad = torch.from_numpy(value).clone()
            optimizer.step()
            rows = [evaluate_network(net, g) for g in graphs]
            record = {
                "epoch": epoch,
                "train_loss": federated_mean(losses, train_sizes),
                "val_loss": federated_mean([r["val_loss"] for r in rows], [r["num_val"] for r in rows]),
                "val_accuracy": federated_mean([r["val_accuracy"] for r in rows], [r["num_val"] for r in rows]),
                "test_accuracy": federated_mean([r["test_accuracy"] for r in rows], [r["num_test"] for r in rows]),
            }
            history.append(record)
            if record["val_accuracy"] > best.val_accuracy:
                best.best_epoch, best.val_accuracy = epoch, record["val_accuracy"]
                best.test_accuracy = record["test_accuracy"]
                best.best_state = module_arrays(net)
    best.history = history
    return best


def choose_by_retraining(
    space: SearchSpace,
    codes: Sequence[Code],
    graphs: Sequence,
    epochs: int = 50,
    lr: float = LR,
    weight_decay: float = WEIGHT_DECAY,
    seed: int = 0,
    mode: str = "weighted",
) -> tuple[int, list[TrainResult]]:
    """Not the paper's rule (``flagcns.finalists`` > 1): retrain every code of ``codes`` (the finalists, e.g.
    :func:`~flowergraph.methods.flagcns.maths.evolution.best_architectures`) from scratch with
    :func:`federated_train_architecture` (the same ``seed`` for each) and keep the one whose best epoch has the
    highest federated validation accuracy (the first on ties: the lower FLL). Returns ``(its index, every
    finalist's result)``."""
    if not codes:
        raise ConfigError("choose_by_retraining needs at least one code")
    results = [
        federated_train_architecture(
            space, code, graphs, epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed, mode=mode
        )
        for code in codes
    ]
    return pick_finalist([r.val_accuracy for r in results]), results


def pick_finalist(val_accuracies: Sequence[float | None]) -> int:
    """The index of the highest validation accuracy (the first on ties; None and NaN never win)."""
    finite = [i for i, v in enumerate(val_accuracies) if v is not None and math.isfinite(v)]
    if not finite:
        raise ConfigError("no finalist has a finite validation accuracy")
    return max(finite, key=lambda i: (val_accuracies[i], -i))
