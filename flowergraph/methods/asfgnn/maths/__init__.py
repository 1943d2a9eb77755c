"""The Flower-free core of ASFGNN (Zheng et al., "ASFGNN: Automated Separated-Federated Graph Neural Network").

Modules (none imports Flower):

* :mod:`.models` -- SGNN (private GraphSAGE message passing) and FGNN (the federated L = 2 tanh discriminator)
  in one ``SFGNN`` module; the discriminator's named arrays (``fgnn.*``) apart from the private ones (``sgnn.*``).
* :mod:`.divergence` -- label counts and distributions, the base-2 Jensen-Shannon divergence, the JS mixing
  of named arrays (with an off switch) and (weighted) averaging of named arrays.
* :mod:`.data` -- the paper's client splits of Cora and CiteSeer: two-client label split with alpha, the non-IID
  graph variant, >= 2 clients with disjoint label sets; the union graph for the centralized baseline.
* :mod:`.training` -- hyper-parameters, the loss of Eq. 4, one client's local round, evaluation.
* :mod:`.reference` -- in-process reference runs of SFGNN (with / without JS), FL, SP and CM.
* :mod:`.search` -- SMAC3, grid and random search behind one ask / tell / export-state interface.

Deviations and choices (where the paper is silent or cannot be followed literally)
-----------------------------------------------------------------------------------
1. **Activation**: tanh in SGNN and FGNN ("TanH as the active function of hidden layers", 5.1.4); the SGNN's
   sigma (Algorithm 1, line 10) is tanh too, applied on every layer including the last, before the L2
   normalisation (line 12).
2. **SGNN layout**: ``h_0 = x W_0`` (no bias, Algorithm 1 line 2) then K PyG ``SAGEConv(aggr="mean")`` layers of
   width l (``W_k . CONCAT(h_v, mean h_N(v))`` = ``lin_r(h_v) + lin_l(mean)``, lin_l with a bias). FGNN:
   ``Linear(l, l) - tanh - Linear(l, J)``, softmax cross-entropy; J is the dataset's class count for every
   client.
3. **Dropout** (not placed by the paper): on the input features and on every SAGE layer's input, and on the
   FGNN's hidden layer; one rate d per client for both parts.
4. **L2 term of Eq. 4**: ``l2 * sum ||W||_F^2 / 2`` over all weight matrices (no biases), TensorFlow's
   ``l2_loss`` as in the GCN code the paper follows; the paper's ``||W||_2`` read literally (unsquared) is not
   smooth and not what that code does.
5. **Optimiser**: Adam with the client's lr (the paper writes plain gradient steps but tunes lr in the range of
   Adam in the code it follows); the optimiser state stays on the client across rounds.
6. **Rounds and local epochs**: one full-batch forward/backward per round (Algorithm 2 has one update per
   round t); T is not given, we default to T = 200 (the epoch count of GCN [35]).
7. **Label counts N_i** are the client's training labels (full batch: the "current batch" of line 6 is the
   training set). They do not change across rounds, so ``js_i`` is constant over a run.
8. **Aggregation and initialisation**: SFGNN's server averages the discriminators with 1/I (line 17, as
   written). FL (FedAvg) averages the whole model weighted by training-node counts. Line 2 ("randomly
   initialise W_l,0^i for every i") does not say whether the clients' initial discriminators are the same: we
   start them from one common random discriminator (as a server broadcast gives; the SGNNs are initialised
   per client), because averaging independently initialised discriminators mixes unrelated hidden units and
   cost 9-16 points of test accuracy on Cora (``run_clients(..., fgnn_init="client")`` keeps the other
   reading). FL clients start from one common model.
9. **Metric order**: a client's metric M_i of round t is measured on the model entering the round (line 9),
   i.e. after the previous round's mixing; the reference runs evaluate once more after the last round.
   ``M(theta) = max_t mean_i val_acc_i`` (Algorithm 4 line 11); the reported accuracy is the mean client test
   accuracy at that round.
10. **alpha split**: the paper's sizes (client A: alpha N1 from part 1 plus (1 - alpha) N1 from part 2; B:
    (1 - alpha) N2 plus alpha N2) cannot be disjoint on Cora for alpha < 1 (part 2 would need
    (1 - alpha) 1412 + alpha 1296 > 1296 nodes). We split each part between the two clients instead: A gets
    alpha of part 1 and 1 - alpha of part 2, B the rest, so the clients are disjoint and cover the graph; at
    alpha = 1 this is the paper's split exactly. The draw is stratified by class and split role (see
    :mod:`.data`). The paper's sizes themselves, overlapping, are ``sizes="paper"`` (the least overlap they
    force) and ``"paper-independent"`` (independent draws), ``asfgnn.sizes`` (Table 6's control).
11. **CiteSeer parts**: {AI, ML, IR} vs {DB, Agents, HCI}, the only 3 + 3 cut with the paper's 1,507 / 1,805
    nodes; PyG's 15 CiteSeer placeholder nodes (no features, no label) belong to no client. The induced
    subgraphs have 1,977 and 1,928 undirected edges where Table 2 lists 2,024 and 2,005 (Cora's 2,657 / 1,961
    match exactly); the paper probably counted the raw graph's self-loops or duplicates, which PyG drops.
12. **Non-IID graph variant**: degree counted in the global graph, threshold 3 for Cora and CiteSeer alike
    (the paper gives 3 for Cora and says "similarly" for CiteSeer).
13. **More than two clients** (Fig. 4): the paper does not say which classes each client gets; we balance node
    counts greedily (largest class first to the client with the fewest nodes). Two clients get the paper's parts.
14. **Splits**: the Planetoid public split restricted to each client's nodes ("the same split ... as [35]").
15. **Search**: SMAC's default HPO facade (random forest + log-EI) as the issue asks; ``facade="blackbox"``
    gives SMAC's GP + EI, the surrogate and acquisition the paper names. lr is searched log-uniformly; dropout,
    L2 uniformly; K integer; hidden ordinal. The cost is ``1 - M(theta)``.
16. **Resume of SMAC**: by replaying the recorded asks and tells into a fresh SMAC with the same scenario and
    seed (exactly the uninterrupted proposals, checked config by config), with SMAC's warm start (tell without
    ask) as a flagged fallback.
"""

from typing import TYPE_CHECKING

from ...._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .data import all_clients as all_clients, centralized_data as centralized_data
    from .training import HyperParams as HyperParams

# The public names: the paper's client splits, the hyper-parameters, and the reference loops (the submodule
# ``reference``: run_clients, run_centralized, run_config), which the Flower run is held to number for number.
_EXPORTS = {"HyperParams": "training", "all_clients": "data", "centralized_data": "data"}
__all__ = [*sorted(_EXPORTS), "reference"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
