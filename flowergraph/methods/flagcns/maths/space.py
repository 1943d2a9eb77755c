"""FL-AGCNS's search space (paper Table 1) and its integer code.

An architecture has three stages:

1. **Input structure** (IS): ``h_0 = act_IS(W_in x + b_in)`` with ``W_in`` of shape ``[hidden, F]`` (hidden = 64)
   and ``act_IS`` one of :data:`ACTIVATIONS` (IS_1..IS_5 = sigmoid, tanh, relu, softmax over the 64 features,
   identity).
2. **Feature embedding**: L graph layers. Layer i (1-based) has a type ``t_i`` among the 12 PyG convolutions of
   :data:`OPERATIONS` and a predecessor ``p_i`` in ``{None, 0, ..., i-1}``: it computes
   ``h_i = act_t(conv_{i, p_i, t_i}(h_{p_i}))`` where ``h_0`` is the input stage's output. ``p_i = None`` ends the
   stage: layers i..L are unused (their genes are ignored), and with ``k`` the number of layers before the first
   None the stage's output is

   * ``fusion="all"`` (the paper, Table 1): ``z = mean(h_1, ..., h_k)``;
   * ``fusion="leaves"`` (the reference code): the mean over the layers that no other used layer takes as input;

   and ``z = h_0`` when ``k = 0`` (the mean of no layer; the network is then an MLP).
3. **Output structure** (OS): ``logits = act_OS(W_out z + b_out)`` with ``W_out`` of shape ``[C, hidden]`` (C =
   number of classes) and ``act_OS`` one of :data:`ACTIVATIONS`; the training loss is the cross-entropy
   ``-log softmax(logits)_y`` of these outputs (as the reference code's ``F.cross_entropy``).

**The code** is a tuple of ``2L + 2`` integers::

    (IS, t_1, p_1, t_2, p_2, ..., t_L, p_L, OS)

with ``IS, OS`` in ``0..4`` (indices into :data:`ACTIVATIONS`, i.e. IS_1..IS_5 of Table 1 are 0..4), ``t_i`` in
``0..11`` (index into :data:`OPERATIONS`, Table 1's order) and ``p_i`` in ``-1..i-1`` where ``-1`` stands for None.
Every such tuple is valid: the space holds ``5 * prod_{i=1..L} (12 (i+1)) * 5 = 25 * 12^L * (L+1)!`` codes (the
paper's count; L = 6: 3.76e11). Codes that differ only in ignored genes decode to the same network;
:meth:`SearchSpace.canonical` maps each code to one representative of its network (ignored genes set to
type 0 and predecessor None), and ``25 * sum_{k=0..L} 12^k k!`` distinct networks exist.

Everything here is pure Python/numpy (no torch): random codes, mutation and crossover draw from a
``numpy.random.Generator`` passed in by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ....errors import ConfigError

Code = tuple[int, ...]

#: Stage-1 / stage-3 activations, in Table 1's order (IS_1..IS_5, OS_1..OS_5).
ACTIVATIONS: tuple[str, ...] = ("sigmoid", "tanh", "relu", "softmax", "identity")

#: Graph layer types, in Table 1's order (LType_1..LType_12).
OPERATIONS: tuple[str, ...] = (
    "GATConv",
    "GINConv",
    "SAGEConv",
    "GCNConv",
    "SGConv",
    "APPNP",
    "AGNNConv",
    "ARMAConv",
    "FeaStConv",
    "GENConv",
    "GMMConv",
    "GatedGraphConv",
)

FUSIONS: tuple[str, ...] = ("all", "leaves")

#: How the input and output structures' FC layers are held: one FC layer per option (``per-option``: Table 1's
#: options "composed of fully connected layers with different activation functions", and the authors' code of the
#: paper's time, 2021, ``models.py``: ``x1..x5``, ``z1..z5``) or one FC layer shared by the five options
#: (``shared``: the authors' rework of 2022, which flowergraph first followed).
STRUCTURE_FCS: tuple[str, ...] = ("per-option", "shared")

#: The predecessor value that means None (stage 2 ends before this layer).
NONE = -1


@dataclass(frozen=True)
class SearchSpace:
    """The space of (2L+2)-integer codes and how they are sampled.

    * ``num_layers`` -- L (the paper: 6).
    * ``hidden`` -- width of the input structure's output and of every graph layer (the paper: 64).
    * ``fusion`` -- how stage 2's used layers are combined (module docstring): ``"all"`` (paper) or ``"leaves"``
      (reference code).
    * ``structure_fc`` -- ``"per-option"`` (the paper: each input and output structure its own FC layer) or
      ``"shared"`` (one input and one output FC layer for the five options of each; see :data:`STRUCTURE_FCS`).
      In the SuperNet, with ``shared`` every code trains the one output FC layer, so codes that put relu or
      softmax on the logits are scored on weights the other codes trained.
    * ``dropout`` -- dropout probability on the input features, on every graph layer's input and on the output
      structure's input during training (the paper and the reference code: none, 0.0).
    * ``none_prob`` -- how a predecessor gene is drawn (random codes and mutation): ``None`` draws it uniformly
      among its ``i + 1`` values, None included (uniform over the codes: then half of the random codes have no
      graph layer at all); a number q draws None with probability q and otherwise a predecessor uniformly in
      ``0..i-1``.
    * ``min_layers`` -- the first ``min_layers`` predecessor genes are never drawn as None (random codes,
      mutation); codes with fewer layers stay valid.
    """

    num_layers: int = 6
    hidden: int = 64
    fusion: str = "all"
    structure_fc: str = "per-option"
    dropout: float = 0.0
    none_prob: float | None = None
    min_layers: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.num_layers, int) or self.num_layers < 1:
            raise ConfigError(f"num_layers must be an integer >= 1, got {self.num_layers!r}")
        if not isinstance(self.hidden, int) or self.hidden < 1:
            raise ConfigError(f"hidden must be an integer >= 1, got {self.hidden!r}")
        if self.fusion not in FUSIONS:
            raise ConfigError(f"unknown fusion {self.fusion!r}; valid choices: {', '.join(FUSIONS)}")
        if self.structure_fc not in STRUCTURE_FCS:
            raise ConfigError(f"unknown structure_fc {self.structure_fc!r}; valid choices: {', '.join(STRUCTURE_FCS)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.none_prob is not None and not 0.0 <= self.none_prob <= 1.0:
            raise ConfigError(f"none_prob must be None (uniform) or a probability in [0, 1], got {self.none_prob}")
        if not 0 <= self.min_layers <= self.num_layers:
            raise ConfigError(f"min_layers must be in [0, num_layers={self.num_layers}], got {self.min_layers}")

    # ----------------------------------------------------------------------------------------------- layout
    @property
    def code_length(self) -> int:
        """``2L + 2``."""
        return 2 * self.num_layers + 2

    def gene_name(self, index: int) -> str:
        """What gene ``index`` of a code describes, e.g. ``"predecessor of layer 2"``."""
        if index == 0:
            return "input structure"
        if index == self.code_length - 1:
            return "output structure"
        layer = (index + 1) // 2
        return f"type of layer {layer}" if index % 2 == 1 else f"predecessor of layer {layer}"

    def gene_values(self, index: int) -> range:
        """The valid values of gene ``index``."""
        if not 0 <= index < self.code_length:
            raise ConfigError(f"gene index {index} out of range [0, {self.code_length - 1}]")
        if index == 0 or index == self.code_length - 1:
            return range(len(ACTIVATIONS))
        if index % 2 == 1:
            return range(len(OPERATIONS))
        layer = index // 2
        return range(NONE, layer)

    def _choices_text(self, index: int) -> str:
        values = self.gene_values(index)
        if index == 0 or index == self.code_length - 1:
            return ", ".join(f"{i} ({a})" for i, a in enumerate(ACTIVATIONS))
        if index % 2 == 1:
            return ", ".join(f"{i} ({o})" for i, o in enumerate(OPERATIONS))
        layer = index // 2
        names = [f"-1 (None: stage 2 ends before layer {layer})", "0 (the input structure)"]
        names += [f"{j} (layer {j})" for j in range(1, layer)]
        assert len(names) == len(values)
        return ", ".join(names)

    # --------------------------------------------------------------------------------------------- validity
    def check(self, code: Iterable[int]) -> Code:
        """``code`` as a tuple of Python ints, or ConfigError naming the first bad gene and its valid values."""
        try:
            genes = list(code)
        except TypeError:
            raise ConfigError(f"a code is a sequence of {self.code_length} integers, got {code!r}") from None
        if len(genes) != self.code_length:
            raise ConfigError(
                f"code {genes} has {len(genes)} integers; a space with L={self.num_layers} layers needs 2L+2 = "
                f"{self.code_length}: [IS, type_1, pred_1, ..., type_L, pred_L, OS]"
            )
        out = []
        for index, gene in enumerate(genes):
            if isinstance(gene, (bool, np.bool_)) or not isinstance(gene, (int, np.integer)):
                if isinstance(gene, (float, np.floating)) and float(gene).is_integer():
                    gene = int(gene)
                else:
                    raise ConfigError(
                        f"code[{index}] ({self.gene_name(index)}) = {gene!r} is not an integer; "
                        f"valid values: {self._choices_text(index)}"
                    )
            gene = int(gene)
            if gene not in self.gene_values(index):
                raise ConfigError(
                    f"code[{index}] ({self.gene_name(index)}) = {gene} is out of range; valid "
                    f"values: {self._choices_text(index)}"
                )
            out.append(gene)
        return tuple(out)

    def is_valid(self, code: Iterable[int]) -> bool:
        try:
            self.check(code)
        except ConfigError:
            return False
        return True

    # --------------------------------------------------------------------------------------------- decoding
    def layers(self, code: Code) -> list[tuple[int, int, int]]:
        """The used graph layers ``(i, p_i, t_i)`` (1-based i, predecessor, type index) in order: layers 1..k
        where k is the number of layers before the first None predecessor."""
        code = self.check(code)
        used = []
        for i in range(1, self.num_layers + 1):
            t, p = code[2 * i - 1], code[2 * i]
            if p == NONE:
                break
            used.append((i, p, t))
        return used

    def fused_layers(self, code: Code) -> list[int]:
        """The layers whose outputs stage 2 averages (empty: the stage passes ``h_0`` through)."""
        used = self.layers(code)
        if self.fusion == "all":
            return [i for i, _, _ in used]
        inputs = {p for _, p, _ in used}
        return [i for i, _, _ in used if i not in inputs]

    def input_structure(self, code: Code) -> str:
        return ACTIVATIONS[self.check(code)[0]]

    def output_structure(self, code: Code) -> str:
        return ACTIVATIONS[self.check(code)[-1]]

    def canonical(self, code: Code) -> Code:
        """The representative of ``code``'s network: genes of unused layers set to type 0 and predecessor None.
        Two codes decode to the same network iff their canonical forms are equal."""
        genes = list(self.check(code))
        k = len(self.layers(tuple(genes)))
        for i in range(k + 1, self.num_layers + 1):
            genes[2 * i - 1], genes[2 * i] = 0, NONE
        return tuple(genes)

    def describe(self, code: Code) -> str:
        """A readable multi-line rendering of the architecture."""
        code = self.check(code)
        used = self.layers(code)
        lines = [f"code {list(code)}", f"  IS : FC({self.hidden}) + {ACTIVATIONS[code[0]]}"]
        for i, p, t in used:
            source = "IS" if p == 0 else f"L{p}"
            lines.append(f"  L{i} : {OPERATIONS[t]}({source})")
        first = len(used) + 1
        if first == self.num_layers:
            lines.append(f"  L{first} : unused (its predecessor is None)")
        elif first < self.num_layers:
            lines.append(f"  L{first}..L{self.num_layers}: unused (predecessor of L{first} is None)")
        fused = self.fused_layers(code)
        lines.append("  S2 : " + (f"mean({', '.join(f'L{i}' for i in fused)})" if fused else "IS (no layer)"))
        lines.append(f"  OS : FC(classes) + {ACTIVATIONS[code[-1]]}")
        return "\n".join(lines)

    def short(self, code: Code) -> str:
        """A one-line rendering, e.g. ``relu | L1 GCNConv(IS), L2 GATConv(L1) | mean(L1,L2) | identity``."""
        code = self.check(code)
        used = self.layers(code)
        body = ", ".join(f"L{i} {OPERATIONS[t]}({'IS' if p == 0 else f'L{p}'})" for i, p, t in used) or "-"
        fused = self.fused_layers(code)
        fuse = f"mean({','.join(f'L{i}' for i in fused)})" if fused else "IS"
        return f"{ACTIVATIONS[code[0]]} | {body} | {fuse} | {ACTIVATIONS[code[-1]]}"

    # ----------------------------------------------------------------------------------------------- counts
    def num_codes(self) -> int:
        """``25 * prod_{i=1..L} 12 (i+1) = 25 * 12^L * (L+1)!`` (the paper's count of the space)."""
        return 25 * 12**self.num_layers * math.factorial(self.num_layers + 1)

    def num_networks(self) -> int:
        """Distinct networks: ``25 * sum_{k=0..L} 12^k k!`` (codes that differ in ignored genes counted once)."""
        return 25 * sum(12**k * math.factorial(k) for k in range(self.num_layers + 1))

    # --------------------------------------------------------------------------------------------- sampling
    def sample_gene(self, index: int, rng: np.random.Generator) -> int:
        """Draw gene ``index`` (see ``none_prob`` and ``min_layers``); IS, OS and types are uniform."""
        values = self.gene_values(index)
        if index == 0 or index == self.code_length - 1 or index % 2 == 1:
            return int(rng.integers(len(values)))
        layer = index // 2
        if layer <= self.min_layers:
            return int(rng.integers(layer))  # 0..layer-1, never None
        if self.none_prob is None:
            return int(rng.integers(layer + 1)) - 1  # -1..layer-1 uniformly
        if rng.random() < self.none_prob:
            return NONE
        return int(rng.integers(layer))

    def sample(self, rng: np.random.Generator) -> Code:
        """A random valid code, gene by gene (:meth:`sample_gene`)."""
        return tuple(self.sample_gene(i, rng) for i in range(self.code_length))

    def mutate(self, code: Code, rng: np.random.Generator, rate: float | None = None) -> Code:
        """Each gene redrawn (:meth:`sample_gene`, possibly to the same value) with probability ``rate``
        (default ``1 / (2L+2)``: one gene per mutation on average, as the reference's 1/8 for its 8 genes)."""
        code = self.check(code)
        rate = 1.0 / self.code_length if rate is None else rate
        out = []
        for index, gene in enumerate(code):
            out.append(self.sample_gene(index, rng) if rng.random() < rate else gene)
        return tuple(out)

    def crossover(self, a: Code, b: Code, rng: np.random.Generator) -> Code:
        """Uniform crossover: each gene from ``a`` or ``b`` with probability 1/2 (always a valid code: genes are
        valid position by position)."""
        a, b = self.check(a), self.check(b)
        mask = rng.random(self.code_length) < 0.5
        return tuple(int(y) if m else int(x) for x, y, m in zip(a, b, mask))

    def random_population(
        self, size: int, rng: np.random.Generator, distinct: bool = True, max_tries: int = 1000
    ) -> list[Code]:
        """``size`` random codes; with ``distinct`` their networks differ (canonical forms unique)."""
        if size < 0:
            raise ConfigError(f"population size must be >= 0, got {size}")
        if not distinct:
            return [self.sample(rng) for _ in range(size)]
        if size > self.num_networks():
            raise ConfigError(f"asked for {size} distinct networks; the space has only {self.num_networks()}")
        out: list[Code] = []
        seen: set[Code] = set()
        tries = 0
        while len(out) < size:
            code = self.sample(rng)
            key = self.canonical(code)
            if key not in seen:
                seen.add(key)
                out.append(code)
                tries = 0
            else:
                tries += 1
                if tries > max_tries:
                    raise ConfigError(
                        f"could not draw {size} distinct networks in {max_tries} tries after "
                        f"{len(out)}; lower none_prob or the population size"
                    )
        return out


def code_from_layers(
    space: SearchSpace, input_structure: str, layers: Sequence[tuple[str, int]], output_structure: str
) -> Code:
    """Build a code from names: ``layers`` lists ``(operation, predecessor)`` for layers 1..k (predecessor 0 =
    the input structure, j = layer j); the remaining layers get predecessor None."""
    if input_structure not in ACTIVATIONS:
        raise ConfigError(f"unknown input structure {input_structure!r}; valid choices: {', '.join(ACTIVATIONS)}")
    if output_structure not in ACTIVATIONS:
        raise ConfigError(f"unknown output structure {output_structure!r}; valid choices: {', '.join(ACTIVATIONS)}")
    if len(layers) > space.num_layers:
        raise ConfigError(f"{len(layers)} layers given; the space has L={space.num_layers}")
    code = [ACTIVATIONS.index(input_structure)]
    for i in range(1, space.num_layers + 1):
        if i <= len(layers):
            op, pred = layers[i - 1]
            if op not in OPERATIONS:
                raise ConfigError(f"unknown operation {op!r} for layer {i}; valid choices: {', '.join(OPERATIONS)}")
            code += [OPERATIONS.index(op), int(pred)]
        else:
            code += [0, NONE]
    code.append(ACTIVATIONS.index(output_structure))
    return space.check(code)


#: Fixed architectures of the paper's Table 3 expressed as codes: (input structure, layers, output structure).
#: Each is ``FC(64)+act -> op -> op -> FC(C)``, a two-layer chain of the named operation between the input and
#: output structures (SGC with a linear input structure, the others with relu). The paper's baselines are PyG's
#: reference models, which this space can only approximate: with ``fusion="leaves"`` stage 2 returns the second
#: layer's output (a plain chain), with ``fusion="all"`` the mean of both layers; SGConv and APPNP propagate one
#: hop per layer (K=1) as the operations are defined in the space, so two layers propagate two hops.
BASELINES: dict[str, tuple[str, tuple[tuple[str, int], ...], str]] = {
    "gcn": ("relu", (("GCNConv", 0), ("GCNConv", 1)), "identity"),
    "gat": ("relu", (("GATConv", 0), ("GATConv", 1)), "identity"),
    "sage": ("relu", (("SAGEConv", 0), ("SAGEConv", 1)), "identity"),
    "sgc": ("identity", (("SGConv", 0), ("SGConv", 1)), "identity"),
    "appnp": ("relu", (("APPNP", 0), ("APPNP", 1)), "identity"),
}


def baseline_code(name: str, space: SearchSpace) -> Code:
    """The code of a fixed baseline architecture (:data:`BASELINES`)."""
    key = name.lower()
    if key not in BASELINES:
        raise ConfigError(f"unknown baseline {name!r}; valid choices: {', '.join(BASELINES)}")
    inp, layers, out = BASELINES[key]
    return code_from_layers(space, inp, layers, out)
