"""Flower-free core of FL-AGCNS (Wang et al., "FL-AGCNS: Federated Learning Framework for Automatic Graph
Convolutional Network Search"): federated GCN architecture search with a weight-sharing SuperNet and federated
evolutionary optimisation (FEO). Nothing here imports ``flwr``.

* :mod:`.space` -- the search space of paper Table 1, the (2L+2)-integer code, validity, random codes, mutation,
  crossover, readable renderings, the fixed baselines as codes.
* :mod:`.supernet` -- the SuperNet (one module per (layer, predecessor, operation)), sub-network keys and arrays,
  standalone networks decoded from codes, parameter counts.
* :mod:`.training` -- a client's loss and gradients over sampled codes, validation of codes, the server's gradient
  combination and Adam step (state exportable), reference training of a fixed code (one graph or in-process
  federated).
* :mod:`.evolution` -- the EA (ask/tell, JSON state), gamma, the population rule of Algorithm 1, the schedule.
* :mod:`.search` -- Algorithm 2 in one process over the clients' graphs (the reference a federated run must match).

Deviations and choices
----------------------
Where the paper is followed against the reference code (github 21S003018/FL-AGCNS, read at commit c0a8f29, the
authors' rework of June 2022; the code of the paper's time is its last 2021 commit, d360d44, which differs in the
structure FC layers (item 4), the warm-up (item 8: none), the final pick (item 9: by validation accuracy), the
controller's crossover rate (item 16: 0.5), the fixed baselines (:mod:`.baselines`), the split (the Planetoid
public split) and the operations' hyper-parameters; line numbers below are of d360d44's ``federal.py``):

1. **Code.** The paper's 2L+2 genes ``(IS, t_1, p_1, ..., t_L, p_L, OS)`` with ``p_i in {None, 0..i-1}``, None
   ending stage 2 (Table 1). The reference uses L+2 genes, a layer gene ``12 p + t + 1`` or 0, where 0 skips only
   that layer (its output is the input stage's), never skips layers 1-2, fixes layer 2's predecessor to layer 1
   and never varies the input structure (``MASKRANGE``).
2. **Stage-2 fusion.** The paper's mean of all used layers; the reference averages only the layers no other layer
   consumes (``local_mask``): ``SearchSpace(fusion="leaves")``.
3. **Input structure.** The paper's five ``FC(64) + activation`` options. The reference defines only
   ``Linear + ReLU`` (``set_x``), followed by a second ReLU.
4. **One FC layer per structure option** (``SearchSpace(structure_fc="per-option")``, the default since
   2026-12-01): each of the five input and five output structures has its own FC layer, as Table 1 says ("options
   composed of fully connected layers with different activation functions") and as the authors' code of the
   paper's time has it (commit d360d44, 2021-11: ``models.py`` ``x1..x5`` and ``z1..z5``). Their 2022 rework
   (c0a8f29) shares one output layer ``z`` among the five output activations, and flowergraph first followed it
   (``structure_fc="shared"``); under sharing the SuperNet scores a code with relu on the logits on an output
   layer that the other codes trained. Table 1's "out size 64" for the output structure is read as the number of
   classes (the reference's ``Linear(64, nclass)``).
5. **Outputs and loss.** ``act_OS(FC(z))`` is the network's output and the loss is ``F.cross_entropy`` of it, as in
   the reference (so sigmoid/tanh/softmax outputs are bounded logits).
6. **Operations.** Hyper-parameters and the activation after each layer (ELU after GATConv, ReLU otherwise) from
   the reference (:mod:`.supernet` lists them); the paper gives none. BatchNorm is left out of GINConv's MLP and
   GENConv's MLP (its running statistics would be shared by all codes and no client's).
7. **Predecessors.** Layer i reads ``h_{p_i}``. The reference's layers 4-6 test ``supermask[i] in [1, 12]`` (a list,
   not a range), so most codes feed them the previous layer's output while using the module of the coded
   predecessor.
8. **Warm-up.** Neither the paper nor the 2021 code (d360d44) has one: its ``ControllerSuperNet.work`` runs an FEO
   generation from its first epoch. The 2022 rework's 50 warm-up epochs (``if epoch < 50``) assign fresh random
   codes to a local variable that is never read, so they train on the initial population;
   :class:`.search.InProcessSearch` draws a fresh random training population every warm-up epoch, as intended
   (``warmup_epochs`` > 0: :data:`.evolution.WARMUP50_SCHEDULE`, the presets called "paper" until 2026-12-02;
   :data:`.evolution.PAPER_SCHEDULE` and :data:`.evolution.CODE2021_SCHEDULE` have none).
9. **Final architecture.** Algorithm 2 lines 19-22: the member of the final P with the lowest FLL
   (``final_pick="fll"``). The 2021 code (d360d44, ``federal.py``) ends ``ControllerSuperNet.work`` with
   ``self.get_best_supermask()`` (line 525), which asks the clients for every member of the final population's
   validation accuracy times ``val_rate`` (their share of the validation nodes, line 768), sums them and keeps the
   first maximum (lines 640-653: ``if accu > best_val_accu``), as ``self.output``, which ``server.py`` prints and
   saves: the highest federated validation accuracy over the final P (``final_pick="accuracy"``,
   :func:`.evolution.final_candidates`). Only the 2022 rework comments that call out (``# self.get_best_supermask()``
   in c0a8f29) and so never sets ``controller.output``; both versions also track the best validation accuracy ever
   seen, but only print it. (Corrected on 2026-12-02: this item used to say "the reference never sets an output",
   true of the rework only.)
10. **Gradient combination.** ``weighted`` (the paper, Eq. 2): ``sum_i (n_i / sum_j n_j) g_i``. The reference's
    server sums, but each client first multiplies its gradient by ``train_rate = n_i / 140`` (its share of
    Cora's training nodes), so the reference computes the same weighted combination; ``sum`` (unscaled) is an
    option. Each client averages its loss over the sampled codes (the paper's ``1/|P|``); one Adam step (lr 0.02,
    weight decay 5e-6, the authors' code's; the paper gives none) on the parameters that got a gradient
    (``adam_scope="this-step"``). The 2021 code ran under torch 1.x, whose ``zero_grad()`` left a zero tensor in
    every ``.grad`` it had once filled: its clients then sent zeros for every parameter trained once before, and
    its server's Adam kept stepping those with a zero gradient (momentum and weight decay still move them).
    ``adam_scope="once-touched"`` does that (:class:`.training.SuperNetOptimizer`).
11. **Fitness.** The paper's ``-FLL`` and ``-L_val_{G_i}`` (losses); the authors' code (2021 and 2022) uses
    validation accuracy, val-size weighted at the controller (``InProcessSearch(fitness="accuracy")``). The fitness
    does not set the final pick (item 9): the 2021 code's is ``fitness="accuracy"`` with
    ``final_pick="accuracy"``.
12. **Client EA input.** Algorithm 1 step 3: a client evolves ``P_{G_i} u P_FL``. The reference's clients never
    receive P_FL and evolve their own population only.
13. **Population rule.** gamma is the clients' share of P (Algorithm 1, Section 3.3, and the reference); quotas by
    largest remainder with client weights = training-set sizes (the paper's weight is garbled; the reference uses
    ``train_rate``); distinct networks, each source backfilling from its own ranking. The reference keeps
    ``int((1-gamma)|P|) + 1`` controller members, then clients' members interleaved and deduplicated through a
    Python set (random order), and sends each client's top ``int(train_rate |P|) + 1``.
14. **Ablation names.** The paper's ablation text swaps the gammas (ControllerEO = 1); ``ABLATIONS`` names them by
    what they keep: ``controller-eo`` is gamma = 0, ``client-eo`` gamma = 1.
15. **gamma_t.** ``0.5 * 0.99^t`` with t the 1-based epoch of Algorithm 2, warm-up epochs counted (without
    warm-up, the paper's, the first FEO at t = 1: 0.495; after 50 warm-up epochs at t = 51: 0.2995); both of the
    authors' versions use the 0-based epoch (2021: 0.5 at the first generation; 2022: 0.3025 after the warm-up),
    which ``gamma0 = 0.5 / 0.99`` reproduces (:data:`.evolution.CODE2021_SCHEDULE`).
16. **EA operators** (the paper says only "evolutionary operations"; the reference's): half of the base as parents
    (uniformly without replacement, the reference's reservoir sampling), uniform crossover with probability 0.2
    (controller; the 2022 rework's, the 2021 code's is 0.5) or 0.5 (clients, both) with another parent
    (``SearchSchedule.controller_crossover`` / ``client_crossover``; the reference may pick the parent itself),
    otherwise per-gene mutation with rate ``1/(2L+2)`` (the reference's 1/8 for 8 genes; the 2021 code's 0.1), (mu +
    lambda) truncation selection. Duplicates are removed by network (canonical code) in a deterministic order (the
    reference: a set of genotype strings, random order); both controller and clients refill to |P| with random codes
    (the reference: the controller only).
17. **Random codes.** Uniform over each gene's values (the distribution the paper's count implies): half of random
    codes then have no graph layer. ``SearchSpace(none_prob=..., min_layers=...)`` changes that (the reference:
    layers 1-2 always present, layers 3-6 skipped with probability 0.2; the 2021 code: layer 1 always, layers
    2-6 skipped with probability 1/6 to 1/2); the method's default is
    ``flagcns.min-layers=1`` (no MLP: the paper's stage-2 output of a code without layers is a mean of none).
18. **Dropout.** None, as in the paper and the reference (``SearchSpace(dropout=...)`` adds it).
19. **Retraining.** The reference's federated retraining of an architecture is, per epoch, one gradient per client,
    combined, one Adam step (FedSGD with the server's Adam), keeping the first epoch with the best federated
    validation accuracy; :func:`.training.federated_train_architecture` does exactly that.
20. **Choosing by retraining the finalists** (``flagcns.finalists`` = K > 1; not the paper, off by default): the K
    best distinct networks of the final P by the final pick (item 9; the lowest FLL) are each retrained (item 19,
    the same init seed) and the one with the best federated validation accuracy is kept
    (:func:`.training.choose_by_retraining`). Under weight sharing the SuperNet's one output layer is trained by
    every code, so FLL ranks codes with relu or softmax at the logits well, and those often stall when trained
    alone; retraining shows it.
"""

from .baselines import REFERENCE_BASELINES, ReferenceBaseline, reference_baseline
from .evolution import (
    ABLATIONS,
    CODE2021_SCHEDULE,
    FINAL_PICKS,
    PAPER_SCHEDULE,
    WARMUP50_SCHEDULE,
    Assembled,
    EAConfig,
    EvolutionaryOptimizer,
    SearchSchedule,
    assemble_population,
    best_architecture,
    best_architectures,
    distinct,
    final_candidates,
    gamma_at,
    new_rng,
    population_quotas,
    rng_from_json,
    rng_state_json,
    sample_members,
)
from .search import InProcessSearch, best_fitness_curve
from .space import (
    ACTIVATIONS,
    BASELINES,
    FUSIONS,
    NONE,
    OPERATIONS,
    STRUCTURE_FCS,
    Code,
    SearchSpace,
    baseline_code,
    code_from_layers,
)
from .supernet import ArchitectureNet, SuperNet, build_network, cell_name, parameter_count, pseudo_coordinates
from .training import (
    ADAM_SCOPES,
    COMBINE_MODES,
    LR,
    WEIGHT_DECAY,
    SuperNetOptimizer,
    TrainResult,
    architecture_gradients,
    choose_by_retraining,
    client_loss_and_gradients,
    combine_gradients,
    evaluate_codes,
    evaluate_network,
    federated_mean,
    federated_train_architecture,
    federated_train_network,
    output_metrics,
    pick_finalist,
    train_architecture,
)

__all__ = [
    "ABLATIONS",
    "PAPER_SCHEDULE",
    "CODE2021_SCHEDULE",
    "WARMUP50_SCHEDULE",
    "FINAL_PICKS",
    "final_candidates",
    "ADAM_SCOPES",
    "Assembled",
    "EAConfig",
    "EvolutionaryOptimizer",
    "SearchSchedule",
    "assemble_population",
    "best_architecture",
    "best_architectures",
    "distinct",
    "gamma_at",
    "new_rng",
    "population_quotas",
    "rng_from_json",
    "rng_state_json",
    "sample_members",
    "InProcessSearch",
    "best_fitness_curve",
    "ACTIVATIONS",
    "BASELINES",
    "FUSIONS",
    "NONE",
    "OPERATIONS",
    "STRUCTURE_FCS",
    "Code",
    "SearchSpace",
    "baseline_code",
    "code_from_layers",
    "ArchitectureNet",
    "SuperNet",
    "build_network",
    "cell_name",
    "parameter_count",
    "pseudo_coordinates",
    "COMBINE_MODES",
    "LR",
    "WEIGHT_DECAY",
    "SuperNetOptimizer",
    "TrainResult",
    "architecture_gradients",
    "client_loss_and_gradients",
    "combine_gradients",
    "evaluate_codes",
    "evaluate_network",
    "federated_mean",
    "federated_train_architecture",
    "federated_train_network",
    "output_metrics",
    "train_architecture",
    "choose_by_retraining",
    "pick_finalist",
    "REFERENCE_BASELINES",
    "ReferenceBaseline",
    "reference_baseline",
]
