"""FL-AGCNS's SuperNet (paper Section 3.2) and networks decoded from codes.

**Operations.** Every graph layer maps ``hidden`` to ``hidden`` features (the reference code's hyper-parameters;
nothing in the paper fixes them) and is followed by an activation (ELU after GATConv, ReLU after every other,
as the reference code does):

=================  ==========================================================================================
GATConv            ``GATConv(h, h)``: one attention head
GINConv            ``GINConv(Linear(h, h) -> ReLU -> Linear(h, h), train_eps=True)`` (no BatchNorm, see below)
SAGEConv           ``SAGEConv(h, h)``: mean aggregation plus root weight
GCNConv            ``GCNConv(h, h)``: symmetric normalisation with self loops
SGConv             ``SGConv(h, h, K=1)``
APPNP              ``APPNP(K=1, alpha=0.1)``: one propagation step ``0.9 A_hat h + 0.1 h``; no parameters
AGNNConv           ``AGNNConv(requires_grad=True)``: one learnable temperature
ARMAConv           ``ARMAConv(h, h, num_stacks=2)``
FeaStConv          ``FeaStConv(h, h, heads=2)``
GENConv            ``GENConv(h, h, norm=None)``: softmax aggregation, 2-layer MLP without BatchNorm
GMMConv            ``GMMConv(h, h, dim=2, kernel_size=4)`` on the pseudo-coordinates
                   ``e_uv = ((deg(u)+1)^-1/2, (deg(v)+1)^-1/2)`` (out-degrees), as the reference code computes
GatedGraphConv     ``GatedGraphConv(h, num_layers=1)``
=================  ==========================================================================================

BatchNorm (the reference code's GIN MLP, PyG's GENConv default) is left out: its running statistics are buffers
that every training forward of every sampled code would overwrite, that no gradient reaches and that no client
shares, so in evaluation mode they would fit none of the codes.

**SuperNet.** The input and output structures' FC layers (``SearchSpace.structure_fc``: with ``per-option``, the
paper's, one FC layer per input structure and one per output structure, ``input.<activation>`` and
``output.<activation>``, e.g. ``output.relu.weight``; with ``shared`` one input and one output FC layer that the
five options of each share, ``input.weight``, ``output.weight``), and one module for every (layer i, predecessor
p, operation t) with ``0 <= p < i <= L``: ``12 * L (L+1) / 2`` modules (L = 6: 252). A code selects its input and
output FC layers and the modules ``(i, p_i, t_i)`` of its used layers; two codes that use the same (i, p, t), or
the same structure under ``per-option``, read and train the same tensors. Module names are
``cells.l{i}_p{p}_{Operation}`` so the state-dict keys of a code's sub-network are readable, e.g.
``cells.l2_p1_GCNConv.lin.weight``. The SuperNet has no buffers: its state is its parameters.

**Shared computation.** :meth:`SuperNet.forward_codes` runs several codes on one graph and computes each distinct
intermediate once: each input FC layer's output once, each input structure's activation once, and each layer output
once per distinct (path from the input, operation). Without dropout this gives the same outputs as separate
forwards (and the same gradients up to float summation order); with dropout in training mode every code gets its
own masks and nothing is shared.

:class:`ArchitectureNet` is the standalone network of one code, with the same module names as the SuperNet, so a
sub-network's arrays load into it and back (``from_supernet``).
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError
from ....tasks.torch_state import load_module_arrays, module_arrays
from .space import ACTIVATIONS, OPERATIONS, Code, SearchSpace


def _make_op(name: str, hidden: int) -> nn.Module:
    from torch_geometric import nn as gnn

    h = hidden
    if name == "GATConv":
        return gnn.GATConv(h, h)
    if name == "GINConv":
        return gnn.GINConv(nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h)), train_eps=True)
    if name == "SAGEConv":
        return gnn.SAGEConv(h, h)
    if name == "GCNConv":
        return gnn.GCNConv(h, h)
    if name == "SGConv":
        return gnn.SGConv(h, h, K=1)
    if name == "APPNP":
        return gnn.APPNP(K=1, alpha=0.1)
    if name == "AGNNConv":
        return gnn.AGNNConv(requires_grad=True)
    if name == "ARMAConv":
        return gnn.ARMAConv(h, h, num_stacks=2)
    if name == "FeaStConv":
        return gnn.FeaStConv(h, h, heads=2)
    if name == "GENConv":
        return gnn.GENConv(h, h, norm=None)
    if name == "GMMConv":
        return gnn.GMMConv(h, h, dim=2, kernel_size=4)
    if name == "GatedGraphConv":
        return gnn.GatedGraphConv(h, num_layers=1)
    raise ConfigError(f"unknown operation {name!r}; valid choices: {', '.join(OPERATIONS)}")


def _activation(name: str, h: torch.Tensor) -> torch.Tensor:
    if name == "sigmoid":
        return torch.sigmoid(h)
    if name == "tanh":
        return torch.tanh(h)
    if name == "relu":
        return F.relu(h)
    if name == "softmax":
        return F.softmax(h, dim=-1)
    if name == "identity":
        return h
    raise ConfigError(f"unknown activation {name!r}; valid choices: {', '.join(ACTIVATIONS)}")


def pseudo_coordinates(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """GMMConv's edge pseudo-coordinates ``[(deg(u)+1)^-1/2, (deg(v)+1)^-1/2]`` for every edge (u, v), with
    out-degrees counted in ``edge_index`` (the reference code's ``cal_edge_attr_for_gmmconv``)."""
    deg = torch.bincount(edge_index[0], minlength=num_nodes).to(torch.float32) + 1.0
    d = deg.pow(-0.5)
    return torch.stack([d[edge_index[0]], d[edge_index[1]]], dim=1)


def _apply_op(
    name: str, module: nn.Module, h: torch.Tensor, edge_index: torch.Tensor, pseudo: Callable[[], torch.Tensor]
) -> torch.Tensor:
    out = module(h, edge_index, pseudo()) if name == "GMMConv" else module(h, edge_index)
    return F.elu(out) if name == "GATConv" else F.relu(out)


#: Parameters an operation holds but never uses as configured here: ARMAConv's recursion weight serves its layers
#: 2.. of an ARMA stack, and the space's ARMAConv has one layer. They get no gradient (see ``gradient_keys``).
UNUSED_PARAMETERS: dict[str, tuple[str, ...]] = {"ARMAConv": ("weight",)}


def cell_name(layer: int, pred: int, op: int) -> str:
    """The SuperNet module name of (layer, predecessor, operation index), e.g. ``l2_p1_GCNConv``."""
    return f"l{layer}_p{pred}_{OPERATIONS[op]}"


def _structure_fcs(space: SearchSpace, in_dim: int, out_dim: int, options: Iterable[str]) -> nn.Module:
    """The FC layer(s) of the input or output structure: one ``Linear`` (``shared``) or one per option, named by
    its activation (``per-option``; ``options`` lists those to build, in :data:`ACTIVATIONS` order)."""
    if space.structure_fc == "shared":
        return nn.Linear(in_dim, out_dim)
    return nn.ModuleDict({act: nn.Linear(in_dim, out_dim) for act in options})


def _structure_fc(module: nn.Module, activation: str) -> nn.Module:
    """The FC layer the structure with ``activation`` uses (``module`` from :func:`_structure_fcs`)."""
    return module[activation] if isinstance(module, nn.ModuleDict) else module


def _structure_module(space: SearchSpace, stage: str, activation: str) -> str:
    """The module name of a structure's FC layer: ``input`` / ``output``, or ``input.relu`` under ``per-option``."""
    return stage if space.structure_fc == "shared" else f"{stage}.{activation}"


class _CodeRunner:
    """Shared forward of codes on one graph (see the module docstring, "Shared computation")."""

    def __init__(
        self,
        space: SearchSpace,
        input_fc: nn.Module,
        output_fc: nn.Module,
        cells: Mapping[str, nn.Module],
        training: bool,
    ):
        self.space, self.input_fc, self.output_fc, self.cells = space, input_fc, output_fc, cells
        self.training = training

    def run(
        self, x: torch.Tensor, edge_index: torch.Tensor, codes: Sequence[Code], share: bool = True
    ) -> list[torch.Tensor]:
        space = self.space
        p = space.dropout if self.training else 0.0
        share = share and p == 0.0
        memo: dict = {}
        pseudo = functools.cache(lambda: pseudo_coordinates(edge_index, x.size(0)))

        def get(key, fn, *args):
            if not share:
                return fn(*args)
            if key not in memo:
                memo[key] = fn(*args)
            return memo[key]

        def drop(h):
            return F.dropout(h, p, self.training) if p > 0 else h

        def conv(op: int, module: nn.Module, h: torch.Tensor) -> torch.Tensor:
            return _apply_op(OPERATIONS[op], module, drop(h), edge_index, pseudo)

        outputs = []
        for code in codes:
            code = space.check(code)
            fc_in = _structure_fc(self.input_fc, ACTIVATIONS[code[0]])
            fc = get(("fc", fc_in), lambda: fc_in(drop(x)))
            key0 = ("is", code[0])
            h: dict[int, tuple[tuple, torch.Tensor]] = {0: (key0, get(key0, _activation, ACTIVATIONS[code[0]], fc))}
            for i, pred, op in space.layers(code):
                pkey, ph = h[pred]
                key = (i, op, pkey)
                h[i] = (key, get(key, conv, op, self.cells[cell_name(i, pred, op)], ph))
            fused = space.fused_layers(code)
            if fused:
                z = h[fused[0]][1] if len(fused) == 1 else torch.stack([h[i][1] for i in fused]).mean(dim=0)
            else:
                z = h[0][1]
            act_out = ACTIVATIONS[code[-1]]
            outputs.append(_activation(act_out, _structure_fc(self.output_fc, act_out)(drop(z))))
        return outputs


def _seeded(seed: int | None, build: Callable[[], None]) -> None:
    if seed is None:
        build()
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        build()


class SuperNet(nn.Module):
    """All modules of the search space (module docstring); ``forward(x, edge_index, code)`` runs one code's
    sub-network. With ``seed`` the initial weights are a pure function of the seed."""

    def __init__(self, space: SearchSpace, in_dim: int, num_classes: int, seed: int | None = None):
        super().__init__()
        if in_dim < 1 or num_classes < 1:
            raise ConfigError(f"in_dim and num_classes must be >= 1, got {in_dim} and {num_classes}")
        self.space, self.in_dim, self.num_classes = space, int(in_dim), int(num_classes)

        def build():
            self.input = _structure_fcs(space, in_dim, space.hidden, ACTIVATIONS)
            self.cells = nn.ModuleDict()
            for i in range(1, space.num_layers + 1):
                for p in range(i):
                    for t, name in enumerate(OPERATIONS):
                        self.cells[cell_name(i, p, t)] = _make_op(name, space.hidden)
            self.output = _structure_fcs(space, space.hidden, num_classes, ACTIVATIONS)

        _seeded(seed, build)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, code: Code) -> torch.Tensor:
        return self.forward_codes(x, edge_index, [code])[0]

    def forward_codes(
        self, x: torch.Tensor, edge_index: torch.Tensor, codes: Sequence[Code], share: bool = True
    ) -> list[torch.Tensor]:
        """The outputs (``act_OS`` of the output FC layer) of each code, intermediates shared (module docstring)."""
        return _CodeRunner(self.space, self.input, self.output, self.cells, self.training).run(
            x, edge_index, codes, share
        )

    # ------------------------------------------------------------------------------------- sub-networks
    def code_modules(self, code: Code) -> list[str]:
        """Names of the modules ``code`` uses: its input FC layer, its cells in layer order, its output FC layer."""
        space = self.space
        return (
            [_structure_module(space, "input", space.input_structure(code))]
            + [f"cells.{cell_name(i, p, t)}" for i, p, t in space.layers(code)]
            + [_structure_module(space, "output", space.output_structure(code))]
        )

    def code_keys(self, codes: Code | Iterable[Code]) -> list[str]:
        """The state-dict keys of the sub-networks of ``codes`` (one code or several), in the SuperNet's
        state-dict order: what a client needs to run them. :meth:`gradient_keys` is the part they train."""
        codes = _as_codes(self.space, codes)
        prefixes = {m + "." for code in codes for m in self.code_modules(code)}
        return [k for k in self.state_dict() if any(k.startswith(p) for p in prefixes)]

    def gradient_keys(self, codes: Code | Iterable[Code]) -> list[str]:
        """The keys of ``code_keys(codes)`` that receive a gradient from a forward of ``codes``: all but the
        parameters in :data:`UNUSED_PARAMETERS`. A pure function of the codes, so every client sends the same
        names for the same codes."""
        codes = _as_codes(self.space, codes)
        unused = {
            f"cells.{cell_name(i, p, t)}.{name}"
            for code in codes
            for i, p, t in self.space.layers(code)
            for name in UNUSED_PARAMETERS.get(OPERATIONS[t], ())
        }
        return [k for k in self.code_keys(codes) if k not in unused]

    def arrays(self, codes: Code | Iterable[Code] | None = None) -> dict[str, np.ndarray]:
        """Named numpy copies of the whole SuperNet (``codes=None``) or of the sub-networks of ``codes``."""
        return module_arrays(self, None if codes is None else self.code_keys(codes))

    def load_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Copy named arrays (all or part of the SuperNet) into it; ValueError names an unknown key or a bad
        shape."""
        load_module_arrays(self, arrays)

    def parameter_count(self, code: Code) -> int:
        """Number of scalar parameters of ``code``'s network."""
        state = self.state_dict()
        return int(sum(state[k].numel() for k in self.code_keys(code)))


def _as_codes(space: SearchSpace, codes) -> list[Code]:
    if isinstance(codes, tuple) and all(isinstance(g, (int, np.integer)) for g in codes):
        return [space.check(codes)]
    codes = list(codes)
    if codes and isinstance(codes[0], (int, np.integer)):
        return [space.check(codes)]
    return [space.check(c) for c in codes]


class ArchitectureNet(nn.Module):
    """The standalone network of one code (for training from scratch, parameter counts, inference time). Module
    and state-dict names match the SuperNet's, so ``SuperNet.arrays(code)`` loads into it."""

    def __init__(self, space: SearchSpace, code: Code, in_dim: int, num_classes: int, seed: int | None = None):
        super().__init__()
        if in_dim < 1 or num_classes < 1:
            raise ConfigError(f"in_dim and num_classes must be >= 1, got {in_dim} and {num_classes}")
        self.space, self.code = space, space.check(code)
        self.in_dim, self.num_classes = int(in_dim), int(num_classes)

        def build():
            self.input = _structure_fcs(space, in_dim, space.hidden, [space.input_structure(self.code)])
            self.cells = nn.ModuleDict()
            for i, p, t in space.layers(self.code):
                self.cells[cell_name(i, p, t)] = _make_op(OPERATIONS[t], space.hidden)
            self.output = _structure_fcs(space, space.hidden, num_classes, [space.output_structure(self.code)])

        _seeded(seed, build)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return _CodeRunner(self.space, self.input, self.output, self.cells, self.training).run(
            x, edge_index, [self.code]
        )[0]

    @classmethod
    def from_supernet(cls, supernet: SuperNet, code: Code) -> "ArchitectureNet":
        """The network of ``code`` with the SuperNet's current weights (inherited, not shared: a copy)."""
        net = cls(supernet.space, code, supernet.in_dim, supernet.num_classes)
        load_module_arrays(net, supernet.arrays(code))
        return net

    def gradient_keys(self) -> list[str]:
        """The state-dict keys a training forward gives a gradient (all but :data:`UNUSED_PARAMETERS`, as
        :meth:`SuperNet.gradient_keys` of this code): what federated retraining exchanges."""
        unused = {
            f"cells.{cell_name(i, p, t)}.{name}"
            for i, p, t in self.space.layers(self.code)
            for name in UNUSED_PARAMETERS.get(OPERATIONS[t], ())
        }
        return [k for k in self.state_dict() if k not in unused]

    def describe(self) -> str:
        return self.space.describe(self.code)


def io_dims(arrays: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """``(input features, classes)`` of a SuperNet's or a network's named arrays, read from its input and output
    FC layers (either ``structure_fc``); KeyError when the arrays hold no such layer."""

    def weight(stage: str) -> np.ndarray:
        for key in arrays:
            if key.startswith(stage + ".") and key.endswith(".weight") and key.count(".") <= 2:
                return arrays[key]
        raise KeyError(f"{stage}.weight")

    return int(weight("input").shape[1]), int(weight("output").shape[0])


def build_network(
    space: SearchSpace, code: Code, in_dim: int, num_classes: int, seed: int | None = None
) -> ArchitectureNet:
    """Decode ``code`` into a runnable network with fresh weights (a pure function of ``seed`` when given)."""
    return ArchitectureNet(space, code, in_dim, num_classes, seed=seed)


@functools.cache
def _op_parameters(name: str, hidden: int) -> int:
    return int(sum(p.numel() for p in _make_op(name, hidden).parameters()))


def parameter_count(space: SearchSpace, code: Code, in_dim: int, num_classes: int) -> int:
    """Parameters of ``code``'s network: ``(F+1) h + sum over used layers of the operation's parameters +
    (h+1) C`` with F input features, h = hidden, C classes."""
    h = space.hidden
    layers = space.layers(code)
    return (in_dim + 1) * h + sum(_op_parameters(OPERATIONS[t], h) for _, _, t in layers) + (h + 1) * num_classes
