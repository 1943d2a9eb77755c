"""FL-AGCNS (Wang et al.): registration. Strategy: :mod:`flowergraph.methods.flagcns.server`; client:
:mod:`flowergraph.methods.flagcns.client`; the maths (search space, SuperNet, FEO, the in-process reference):
:mod:`flowergraph.methods.flagcns.maths`. Data: the node task's (``node.split``, ``node.partitioner``; the paper's
setting, METIS into 3 clients with 20 training nodes per class, 500 validation and 1000 test, is in the presets
``conf/flagcns-*.toml``).

Public (``__all__``): the registration :data:`FLAGCNS`, its keys :class:`FLAGCNSOptions`, and how a run's settings
read into the core (:mod:`flowergraph.methods.flagcns.maths`): :func:`space_of` (the search space), :func:`schedule_of`
(the search's schedule), :func:`client_kwargs` (a client's arguments, for a client of one's own on FL-AGCNS's
messages)."""

from __future__ import annotations

from dataclasses import dataclass

import json
from typing import TYPE_CHECKING, Any, Callable

from ...errors import ConfigError
from ...settings.options import Options, at_least, option, options_of, within
from ..registry import Client, ClientArgs, Method, register, StrategyArgs, suggest

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings

COMBINE = ("weighted", "sum")
FITNESS = ("loss", "accuracy")
FINAL_PICK = ("fll", "accuracy")  # methods/flagcns/maths/evolution.py: FINAL_PICKS
ADAM_SCOPE = ("this-step", "once-touched")  # methods/flagcns/maths/training.py: ADAM_SCOPES
FUSION = ("all", "leaves")
STRUCTURE_FC = ("per-option", "shared")  # methods/flagcns/maths/space.py: STRUCTURE_FCS
# gamma of each ablation (None: the schedule gamma0 * decay^t), named by what the population keeps (the paper's
# ablation text swaps the names: methods/flagcns/maths/evolution.py); random-partition is FL-AGCNS on a random partition
ABLATION = ("feo", "controller-eo", "client-eo", "random-partition")
FIXED = ("gcn", "gat", "sage", "sgc", "appnp")  # methods/flagcns/maths/space.py: BASELINES


@dataclass(kw_only=True, eq=False)
class FLAGCNSOptions(Options):
    """FL-AGCNS's hyper-parameters: the run-config keys ``flagcns.*`` and the keyword arguments of
    :class:`flowergraph.serverapp.FLAGCNS`."""

    layers: int = option(
        6, "Graph layers L of the search space (the paper: 6); a code has 2L+2 integers.", check=at_least(1)
    )
    hidden: int = option(
        64, "Width of the input structure and of every graph layer (the paper: 64).", check=at_least(1)
    )
    fusion: str = option(
        "all",
        "How stage 2 combines the used layers: the mean of all (`all`, the paper) or of the layers "
        "no other layer reads (`leaves`, the reference code).",
        FUSION,
    )
    structure_fc: str = option(
        "per-option",
        "The input and output structures' FC layers: one per option (`per-option`, "
        "the paper's Table 1 and the authors' code of 2021: in the SuperNet a code with relu on the logits trains "
        "its own output layer) or one shared by the five options of each (`shared`, the authors' rework of 2022).",
        STRUCTURE_FC,
    )
    min_layers: int = option(
        1,
        "Random codes and mutations never end stage 2 before this many layers. 1 (default): "
        "every architecture has a graph layer (Table 1 defines stage 2's output as the mean of the layers before "
        "the first None, which for layer 1 is the mean of none; the reference code always has layers 1-2); 0: "
        "every gene uniform, the paper's count, and half of the random codes are MLPs without a graph layer.",
        check=at_least(0),
    )
    population: int = option(20, "Population size |P| (the paper: 60).", check=at_least(1))
    sample_size: int = option(
        10,
        "Codes sampled from P for each SuperNet step (the paper's Eq. 2: all of P, "
        "sample-size = population; the authors' code, 2021 and 2022: 20 of 60).",
        check=at_least(1),
    )
    epochs: int = option(
        40,
        "Search epochs, warm-up included (the paper: 250); each is `steps-per-epoch` rounds, then "
        "one FEO generation after the warm-up.",
        check=at_least(1),
    )
    warmup: int = option(
        10,
        "Warm-up epochs: SuperNet steps on a fresh random population each epoch, no FEO (the paper "
        "and the authors' 2021 code: 0; their 2022 rework: 50).",
        check=at_least(0),
    )
    steps_per_epoch: int = option(
        5, "SuperNet steps (training rounds) per epoch (the paper's E_weight: 5).", check=at_least(1)
    )
    combine: str = option(
        "weighted",
        "How the server combines the clients' SuperNet gradients: weighted by training-set "
        "size (`weighted`, the paper's Eq. 2) or summed (`sum`).",
        COMBINE,
    )
    fitness: str = option(
        "loss",
        "What the EAs rank by: validation loss (`loss`, the paper: FLL at the controller, the "
        "local loss at each client) or validation accuracy (`accuracy`, the authors' code, 2021 and 2022).",
        FITNESS,
    )
    final_pick: str = option(
        "fll",
        "How the search's result is picked from the final population: the lowest FLL "
        "(`fll`, the paper's Algorithm 2 line 22) or the highest federated validation accuracy (`accuracy`, the "
        "authors' 2021 code: `ControllerSuperNet.get_best_supermask`). Independent of `fitness`: `fitness=accuracy` "
        "alone still picks by FLL.",
        FINAL_PICK,
    )
    controller_crossover: float = option(
        0.2,
        "Probability that a child of the controller's EA is a crossover (else a "
        "mutation); the paper gives none (the authors' 2022 rework: 0.2; their 2021 code: 0.5).",
        check=within(0.0, 1.0),
    )
    client_crossover: float = option(
        0.5, "The same for the clients' EAs (the authors' code, 2021 and 2022: 0.5).", check=within(0.0, 1.0)
    )
    adam_scope: str = option(
        "this-step",
        "Which SuperNet parameters the server's Adam steps: those the step's codes train "
        "(`this-step`) or also every parameter trained once before, with a zero gradient, so momentum and weight "
        "decay keep moving it (`once-touched`: the authors' 2021 code as it ran under torch 1.x, whose zero_grad "
        "kept zero tensors). Retraining is the same under both.",
        ADAM_SCOPE,
    )
    ablation: str = option(
        "feo",
        "The population rule: `feo` (gamma = gamma0 * gamma-decay^t, the clients' share of P), "
        "`controller-eo` (gamma = 0: only the controller's EA), `client-eo` (gamma = 1: only the clients' EAs), "
        "`random-partition` (FEO on randomly divided subgraphs: needs node.partitioner=random).",
        ABLATION,
    )
    gamma0: float = option(0.5, "gamma at t = 0 (the paper: 0.5).", check=within(0.0, 1.0))
    gamma_decay: float = option(
        0.99, "gamma's decay per epoch (the paper: 0.99).", check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]"
    )
    lr: float = option(
        0.02,
        "The server's Adam learning rate, for the SuperNet and for retraining (the reference: 0.02).",
        check=at_least(0.0, False),
    )
    weight_decay: float = option(5e-6, "The server's Adam weight decay (the reference: 5e-6).", check=at_least(0.0))
    retrain_epochs: int = option(
        50,
        "Epochs (rounds) of federated retraining of the chosen architecture from scratch "
        "(the paper: 50); the best-validation epoch gives FLACC.",
        check=at_least(1),
    )
    architecture: str = option(
        "",
        "Skip the search and retrain this architecture: a fixed baseline (`gcn`, `gat`, "
        "`sage`, `sgc`, `appnp`) or a code as a JSON list of 2L+2 integers; empty: search.",
    )
    init_seed: int = option(
        -1,
        "Seed of the retrained network's initial weights (-1: the run's `seed`, which also "
        "seeds the data split); the paper retrains 10 times.",
        check=at_least(-1),
    )
    finalists: int = option(
        1,
        "How the search's result is chosen from the final population. 1 (the paper, Algorithm 2 "
        "line 22): the best network by `final-pick` (the lowest FLL). K > 1 (not the paper): the K best networks "
        "by `final-pick` are each retrained from scratch for `retrain-epochs` rounds, one after the other, and the "
        "one with the best federated validation accuracy is kept; the run then has K x `retrain-epochs` "
        "retraining rounds. Under weight sharing FLL can rank networks with relu or softmax at the logits first, "
        "and those often stall when retrained alone (docs/methods/flagcns.md).",
        check=at_least(1),
    )


OPTIONS = options_of(FLAGCNSOptions, "flagcns")


def space_of(s: "RunSettings") -> Any:
    """The run's :class:`~flowergraph.methods.flagcns.maths.SearchSpace` (ConfigError for bad values)."""
    from .maths import SearchSpace

    o = s.of("flagcns")
    if o.min_layers > o.layers:
        raise ConfigError(f"flagcns.min-layers={o.min_layers} exceeds flagcns.layers={o.layers}; valid: 0..{o.layers}")
    return SearchSpace(
        num_layers=o.layers, hidden=o.hidden, fusion=o.fusion, structure_fc=o.structure_fc, min_layers=o.min_layers
    )


def schedule_of(s: "RunSettings") -> Any:
    """The run's :class:`~flowergraph.methods.flagcns.maths.SearchSchedule` (ConfigError naming the keys)."""
    from .maths import ABLATIONS, SearchSchedule

    o = s.of("flagcns")
    if o.sample_size > o.population:
        raise ConfigError(
            f"flagcns.sample-size={o.sample_size} exceeds flagcns.population={o.population}; valid: 1..{o.population}"
        )
    if o.warmup > o.epochs:
        raise ConfigError(f"flagcns.warmup={o.warmup} exceeds flagcns.epochs={o.epochs}; valid: 0..{o.epochs}")
    fixed = ABLATIONS.get(o.ablation) if o.ablation != "random-partition" else None
    return SearchSchedule(
        population_size=o.population,
        sample_size=o.sample_size,
        epochs=o.epochs,
        warmup_epochs=o.warmup,
        steps_per_epoch=o.steps_per_epoch,
        gamma0=o.gamma0,
        gamma_decay=o.gamma_decay,
        fixed_gamma=fixed,
        retrain_epochs=o.retrain_epochs,
        controller_crossover=o.controller_crossover,
        client_crossover=o.client_crossover,
    )


def architecture_of(s: "RunSettings") -> tuple[int, ...] | None:
    """``flagcns.architecture`` as a code (None: search); ConfigError names the bad value and the valid ones."""
    from .maths import baseline_code

    text = str(s["flagcns.architecture"]).strip()
    if not text:
        return None
    space = space_of(s)
    if text.lower() in FIXED:
        return baseline_code(text.lower(), space)
    try:
        code = json.loads(text)
    except ValueError:
        raise ConfigError(
            f"unknown flagcns.architecture {text!r}; valid choices: {', '.join(FIXED)}, a code as a "
            f"JSON list of {space.code_length} integers, or empty (search){suggest(text, FIXED)}"
        ) from None
    if not isinstance(code, list):
        raise ConfigError(f"flagcns.architecture={text!r}: a code is a JSON list of {space.code_length} integers")
    try:
        checked: tuple[int, ...] = tuple(space.check(code))
    except ConfigError as exc:
        raise ConfigError(f"flagcns.architecture={text!r}: {exc}") from None
    return checked


def search_rounds(s: "RunSettings") -> int:
    o = s.of("flagcns")
    return 0 if architecture_of(s) is not None else o.epochs * o.steps_per_epoch


def run_rounds(s: "RunSettings") -> int:
    """The rounds of an FL-AGCNS run: the search's, then each finalist's retraining (what ``rounds`` must be)."""
    o = s.of("flagcns")
    return int(search_rounds(s) + o.finalists * o.retrain_epochs)


def _check(s: "RunSettings") -> None:
    o = s.of("flagcns")
    space = space_of(s)
    schedule_of(s)
    if architecture_of(s) is None and o.population > space.num_networks():
        raise ConfigError(
            f"flagcns.population={o.population} exceeds the {space.num_networks()} distinct networks of "
            f"a space with flagcns.layers={o.layers}"
        )
    if o.finalists > 1 and architecture_of(s) is not None:
        raise ConfigError(
            f"flagcns.finalists={o.finalists} chooses among searched networks, but "
            f"flagcns.architecture={s['flagcns.architecture']!r} skips the search; valid with a fixed "
            f"architecture: flagcns.finalists=1"
        )
    if o.finalists > o.population:
        raise ConfigError(
            f"flagcns.finalists={o.finalists} exceeds flagcns.population={o.population}; valid: 1..{o.population}"
        )
    rounds = run_rounds(s)
    if s.rounds != rounds:
        if not search_rounds(s):
            how = f"flagcns.retrain-epochs = {o.retrain_epochs} (a fixed flagcns.architecture is only retrained)"
        elif o.finalists == 1:
            how = (
                f"flagcns.epochs x flagcns.steps-per-epoch + flagcns.retrain-epochs = {o.epochs} x "
                f"{o.steps_per_epoch} + {o.retrain_epochs}"
            )
        else:
            how = (
                f"flagcns.epochs x flagcns.steps-per-epoch + flagcns.finalists x flagcns.retrain-epochs = "
                f"{o.epochs} x {o.steps_per_epoch} + {o.finalists} x {o.retrain_epochs}"
            )
        raise ConfigError(
            f"rounds={s.rounds}, but an FL-AGCNS run has {how} = {rounds} rounds; leave rounds unset "
            f"(the run takes {rounds}) or set rounds={rounds}"
        )
    if o.ablation == "random-partition" and s["node.partitioner"] != "random":
        raise ConfigError(
            f"flagcns.ablation='random-partition' runs FL-AGCNS on randomly divided subgraphs: set "
            f"node.partitioner='random' (got {s['node.partitioner']!r})"
        )
    if s.aggregator != "mean":
        raise ConfigError(
            f"aggregator={s.aggregator!r}: FL-AGCNS combines gradients as flagcns.combine says; valid "
            f"with it: aggregator='mean'"
        )
    if s.secure_agg == "secagg+":
        raise ConfigError(
            "secure-agg='secagg+' would mask the SuperNet gradients only, while FL-AGCNS also sends "
            "validation losses; use secure-agg='ckks' (gradients and losses summed under CKKS)"
        )
    if s.secure_agg == "ckks":
        want = "train-size" if o.combine == "weighted" else "uniform"
        if s.weighting != want:
            raise ConfigError(
                f"secure-agg='ckks' with flagcns.combine={o.combine!r}: each client weighs its encrypted "
                f"gradient itself, so set weighting={want!r} (got {s.weighting!r})"
            )


def _strategy(args: StrategyArgs) -> "Strategy":
    from .server import FLAGCNSStrategy

    s = args.settings
    o = s.of("flagcns")
    return FLAGCNSStrategy(
        space=space_of(s),
        schedule=schedule_of(s),
        combine=o.combine,
        fitness=o.fitness,
        lr=o.lr,
        weight_decay=o.weight_decay,
        architecture=architecture_of(s),
        init_seed=None if o.init_seed < 0 else o.init_seed,
        finalists=o.finalists,
        final_pick=o.final_pick,
        adam_scope=o.adam_scope,
        **args.common(),
    )


def client_kwargs(args: ClientArgs) -> dict[str, Any]:
    """What :class:`~flowergraph.methods.flagcns.client.FLAGCNSClient` (and a client built like it) is built with."""
    s = args.settings
    o = s.of("flagcns")
    return dict(
        partition_id=args.partition_id,
        space=space_of(s),
        schedule=schedule_of(s),
        seed=s.seed,
        fitness=o.fitness,
        state=args.state,
        cache=args.cache,
        key_file=s.key_file if s.secure_agg == "ckks" else None,
        architecture=architecture_of(s),
        init_seed=None if o.init_seed < 0 else o.init_seed,
    )


def _client(args: ClientArgs) -> "Client":
    from .client import FLAGCNSClient

    return FLAGCNSClient(args.data(), **client_kwargs(args))


def _no_server_model(s: "RunSettings") -> Callable[..., Any]:
    raise ConfigError(
        "server-eval=true: FL-AGCNS's server holds a SuperNet, then a searched architecture, not the "
        "node task's model; set server-eval=false (clients evaluate the retrained architecture)"
    )


def _stateful(s: "RunSettings") -> bool:
    return architecture_of(s) is None  # the clients' EAs (a fixed architecture is only retrained)


FLAGCNS = register(
    Method(
        name="flagcns",
        summary="FL-AGCNS (Wang et al.): federated GCN architecture search (weight-sharing SuperNet, "
        "federated evolutionary optimisation), then federated retraining of the chosen architecture",
        tasks=("node",),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        stateful_clients=_stateful,
        fixed_rounds=run_rounds,
        update_kind="gradients",
        server_evaluate=_no_server_model,
        paper="Wang et al., FL-AGCNS, arXiv:2104.04141",
    )
)

__all__ = ["FLAGCNS", "FLAGCNSOptions", "client_kwargs", "schedule_of", "space_of"]
