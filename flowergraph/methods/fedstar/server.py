"""FedStar (Tan et al., *Federated Learning on Non-IID Graphs via Structural Knowledge Sharing*, AAAI 2023):
graph classification across clients that own different datasets, even different domains, sharing only the
structure encoder of a feature/structure decoupled GNN. The baselines of the paper run on the same code.

Algorithm (paper Alg. 1): every round r, each sampled client m loads the global shared arrays into its model,
trains ``local_epochs`` epochs of mini-batch Adam on its own graphs (its Adam optimizer persists across rounds)
and returns the shared arrays; the server averages them weighted by the clients' training-graph counts,
``w_g = sum_m |D_m| / N w_{g,m}``. Everything else (FedStar: the feature encoder and the classifier) never
leaves the client. :class:`FedStarStrategy` is :class:`~flowergraph.strategies.weighted.WeightedAveraging`
with the run's ``weighting`` (``train-size`` by default, the paper's) and clients that keep state (``stateful_clients``:
client checkpoints save each
client's private model and Adam moments, and a resumed run restores them).

What travels is chosen by the variant (client side, :data:`flowergraph.methods.fedstar.client.VARIANTS`):

==================  ==========  ==============================================================================
variant             model       shared arrays (across datasets, layers whose shape depends on the dataset -
                                the input layer ``feat_in`` and the output layer ``out`` - always stay local)
==================  ==========  ==============================================================================
``fedstar``         decoupled   the structure encoder: ``struct_in`` (FC 32->64) and ``struct_convs.*`` (3 GCN)
``local``           GIN         nothing
``local-decoupled`` decoupled   nothing (the control for "the gain comes from the structure embeddings")
``fedavg``          GIN         every layer that can be averaged: the GIN layers and the hidden FC
``fedprox``         GIN         as ``fedavg``, with the proximal term ``mu/2 ||w - w_global||^2`` locally
``fedper``          GIN         all but the classifier: the GIN layers (the paper: "graph convolution layers")
``share-all``       decoupled   both encoders and the hidden classifier layers (ablation)
``share-feature``   decoupled   the feature encoder's GIN layers only (ablation)
==================  ==========  ==============================================================================

Wire protocol (training and evaluation messages; the client is
:class:`flowergraph.methods.fedstar.client.FedStarClient`)
--------------------------------------------------------------------------------------------------------
As :mod:`flowergraph.strategies.weighted` describes, with:

* ``get_parameters`` (INIT, one client): the shared arrays of the seeded initial model, in ``state_dict``
  order (FedStar, hidden 64, 3 layers: 8 arrays: ``struct_in.weight`` 64x32, ``struct_in.bias`` 64, and per
  GCN layer ``bias`` 64 and ``lin.weight`` 64x64, float32); none for the local variants.
* ``fit``: server -> client: the global shared arrays, config ``{"server_round": r}`` (+ ``evaluate_global``);
  client -> server: its shared arrays after training, ``num_examples`` = its number of training graphs,
  metrics ``{"partition_id", "train_loss" (mean NLL over its batches, plus the proximal term under fedprox),
  "num_train", "batch_size"}``.
* ``evaluate``: metrics ``{"partition_id", "accuracy", "loss", "num_test", "val_accuracy", "val_loss",
  "num_val"}`` of the client's model (the received shared part + its own private part) on its test and
  validation graphs. The paper reports each client's test accuracy at the last round averaged over clients:
  ``mean_client_accuracy`` in the round records (``accuracy`` is weighted by test-graph counts).

What the server learns: the shared arrays of each sampled client every round (FedStar: the structure encoder,
trained on structure embeddings only, i.e. on node degrees and random-walk return probabilities; no feature
ever reaches it), the clients' training-graph counts, losses and accuracies.
"""

from __future__ import annotations

from ...strategies.policy import FederationPolicy, resolve_policy
from ...strategies.weighted import WeightedAveraging

LOCAL_VARIANTS = ("local", "local-decoupled")


class FedStarStrategy(WeightedAveraging):
    """FedStar's server: averages the shared part weighted by training-graph counts (see the module docstring).

    ``variant``: which model part the clients share (the clients are told the same through the run
    configuration); the local variants share nothing, so the server starts from an empty model instead of
    asking a client for one. Every other argument is
    :class:`~flowergraph.strategies.FederatedStrategy`'s.
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        variant: str = "fedstar",
        weighting: str = "train-size",
        initial_parameters=None,
        **kwargs,
    ) -> None:
        if variant in LOCAL_VARIANTS and initial_parameters is None:
            initial_parameters = []  # nothing is shared: no model to ask a client for
        policy = resolve_policy(
            policy, {k: kwargs.pop(k) for k in list(kwargs) if k in FederationPolicy.field_names()}, type(self).__name__
        )
        super().__init__(
            policy.replace(stateful_clients=True), weighting=weighting, initial_parameters=initial_parameters, **kwargs
        )
        self.variant = variant

    def __repr__(self) -> str:
        return f"FedStarStrategy(num_clients={self.num_clients}, variant={self.variant!r})"
