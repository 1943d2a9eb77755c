"""FedGraph (Chen et al., IEEE TPDS): the Flower-free core.

Cross-client graph convolution on shared hidden embeddings, policy-driven layered sampling and a DDPG agent that
chooses every client's sampling policy each round. The paper is the specification; nothing here imports Flower.

Modules (each docstring states its equations):

* :mod:`.graph` -- a client's view (cut and full adjacencies, remote neighbours), which rows cross the server
  (:class:`Rows`, :func:`export_plan`, :func:`request_plan`, :func:`split_rows`, :func:`relay`), the one-time
  degree exchange (:func:`degree_rows`), the sharing variants ``fedgraph``/``allshare``/``nonshare``.
* :mod:`.sampling` -- :class:`LayeredSample` and the schemes: :class:`SamplingPolicy` (Algorithm 2, eq. 7),
  :class:`FullBatch`, :class:`NodeWise` (GraphSAGE 25/10), :class:`LayerWise` (FastGCN, layer size 256).
* :mod:`.model` -- the GCN forward on a sample with received rows (eq. 2-4), :func:`owner_rows` (what an owner
  computes and sends), :func:`exchange_in_process`, :func:`evaluate`.
* :mod:`.local` -- :func:`train_round`: one round's local iterations (Algorithm 1) -> :class:`RoundResult`;
  :func:`train_step`: one iteration (the per-iteration exchange runs one per message).
* :mod:`.clock` -- the parallel clock (``fedgraph.round-time=parallel``): :class:`RoundCost`, :data:`NETWORKS`,
  :data:`SECONDS_PER_MAC`.
* :mod:`.server` -- :func:`aggregate` (eq. 8), :func:`reward` (eq. 9), :func:`time_penalty_alpha`.
* :mod:`.ddpg` -- :class:`DDPGAgent` (Algorithm 4: actor/critic 512-256, targets, replay buffer, noise, PCA
  state), :class:`ActionSpace`, exportable to named arrays + JSON.
* :mod:`.data` -- the paper's overlapping synthesis (:func:`synthesise`) and :func:`client_graphs` (synthesis or
  METIS/Louvain/... partitions).

One round, as the Flower side would run it (server relays, clients compute)::

    degrees: owner j sends split_rows(degree_rows(g_j), export_plan(g_j)); client i gets relay(...)[i]  (once)
    view_i = build_view(g_i, degrees_i)
    for each sharing conv k in exchange_convs(sharing, K):        # fedgraph: k = 1 only
        owner j: split_rows(owner_rows(model_j, view_j, sharing, k, tables_j), export_plan(g_j)) -> server
        client i: tables_i[k] = view_i.remote_table(relay(...)[i])
    client i: result = train_round(model_i, view_i, policy_i, sharing, tables_i)  -> (weights, result.num_samples)
    server: W_bar = aggregate([(W_i, kappa_i)]); r = reward(acc, delta, target, alpha=..., beta=...)
            a = agent.record(r_prev, agent.observe(W_bar, [W_i])).action; policies = agent.policies(a)

Deviations and choices (where the paper is silent or cannot be followed literally)
-------------------------------------------------------------------------------------
* **Model**: "a 3-layer GCN, an input layer and two convolutional layers" is read with the paper's notation
  (layer 1 is the input, h^(1) = x): two graph convolutions, 16 hidden units, ReLU, dropout 0.5 after the hidden
  convolution, the project's ``NodeClassifier("gcn")`` parameters. Weight decay 5e-4 (Kipf & Welling's; the
  paper names none); 3 local iterations per round (:data:`.local.PAPER_TRAIN`; the paper says "multiple").
* **Exchange cadence**: the paper exchanges embeddings inside every local iteration, computed with the owners'
  current W_j. Flower has no client-to-client channel, so every exchange goes through the server. Two cadences:
  once per round (owners compute ``h^(k) W^(k)`` of all their boundary nodes, exactly: all neighbours, no
  dropout, with the round's model; constants during the receiver's round; same-round or one round old), or per
  iteration (``fedgraph.exchange=iteration``: owners compute, exactly and with their current local weights, the
  rows of exactly the remote neighbours in the requesters' current samples; :func:`owner_rows` with ``ids``).
  Received rows are constants (no gradient flows back to the owner) in both.
* **Normalisation**: Q = D~^{-1/2} A~ D~^{-1/2} of the global graph for sharing convolutions; a client learns its
  remote neighbours' degrees once from their owners (a static integer per boundary node). For non-sharing
  convolutions (the first one in FedGraph, all in nonShare) the default renormalises over the client's own
  subgraph (``cut_norm="local"``: the GCN of the own subgraph; eq. 2 read literally, global weights with the
  remote terms dropped, is ``cut_norm="global"``). With every exchange exact and no sampling: allShare equals
  the centralised GCN on the whole graph, nonShare the centralised GCN on the graph without cross-client edges,
  FedGraph a centralised GCN whose first convolution runs on the cut graph and the second on the whole graph.
* **Sampling**: self loops always kept and not rescaled; |N(v)| = ceil(p |V(v)|) uniformly without
  replacement (unbiased eq. 7); remote neighbours are sampled like own ones in sharing convolutions and are
  leaves. GraphSAGE fan-outs (25, 10) are (input convolution, output convolution), GraphSAGE's S1, S2; it uses
  eq. 7's rescaling with the GCN weights. FastGCN draws ``layer_size`` nodes per convolution i.i.d. from
  q(u) ~ sum_v Q(v, u)^2 over the columns the client sees (own nodes, plus remote neighbours when sharing).
  Baselines use batch 256 like FedGraph's default.
* **Eq. 8** weights by the mini-batch size actually used, min(kappa_i, labelled nodes).
* **Eq. 9** is ``Omega ** (lambda - Lambda) - alpha (delta - beta)`` (the text's exponential), accuracies as
  fractions; alpha from profiled round times so that the mean penalty is 1 (:func:`time_penalty_alpha`).
* **DDPG**: PCA fitted once, on the first round's |C| + 1 weight vectors (at most |C| axes; missing ones are 0),
  numpy SVD; actor/critic hidden 512 and 256, action concatenated at the critic's input; actor lr 1e-4, critic
  lr 1e-3, gamma 0.99, tau 0.01, K = 64, buffer 10,000, Gaussian noise sigma 0.2 decaying 0.98 per episode to
  0.02, T = 30 rounds per episode, terminal transition at round T; kappa in [32, 512], p in [0.1, 1] (linear
  maps from [-1, 1]). All clients take part in every round (the state has a slot per client).
* **Data**: see :mod:`.data` (xi clipped to [0.1, 1], copies distinct, one remote copy per (client, node),
  symmetric cross edges, split inherited from the dataset).
"""

from .data import (
    DATA_SCHEMES,
    SynthesisedGraph,
    client_graphs,
    dealt_metis_assignment,
    dealt_metis_graph,
    synthesise,
    synthesised_graph,
)
from .ddpg import UPDATE_RULES, ActionSpace, DDPGAgent, DDPGConfig, ReplayBuffer, StepResult, WeightPCA, soft_update
from .graph import (
    CUT_NORMS,
    SHARING,
    Adjacency,
    ClientView,
    Rows,
    boundary_nodes,
    build_view,
    degree_rows,
    exchange_convs,
    exchange_degrees,
    export_plan,
    merge_rows,
    relay,
    request_plan,
    shared_convs,
    split_rows,
)
from .clock import NETWORKS, SECONDS_PER_MAC, SECONDS_PER_ROWS, SECONDS_PER_STEP, Network, RoundCost
from .local import PAPER_TRAIN, RoundResult, train_round, train_step
from .model import (
    backward_macs,
    build_model,
    evaluate,
    exchange_in_process,
    forward,
    forward_macs,
    full_forward,
    owner_rows,
    owner_rows_and_macs,
    train_macs,
)
from .sampling import (
    SCHEMES,
    ConvEdges,
    FullBatch,
    LayeredSample,
    LayerWise,
    NodeWise,
    SamplingPolicy,
    exact_sample,
    make_scheme,
)
from .server import OMEGA, aggregate, reward, time_penalty_alpha

__all__ = [
    "ActionSpace",
    "Adjacency",
    "ClientView",
    "ConvEdges",
    "CUT_NORMS",
    "DATA_SCHEMES",
    "DDPGAgent",
    "DDPGConfig",
    "FullBatch",
    "LayeredSample",
    "LayerWise",
    "NETWORKS",
    "Network",
    "NodeWise",
    "OMEGA",
    "PAPER_TRAIN",
    "ReplayBuffer",
    "RoundCost",
    "RoundResult",
    "Rows",
    "SamplingPolicy",
    "SCHEMES",
    "SECONDS_PER_MAC",
    "SECONDS_PER_ROWS",
    "SECONDS_PER_STEP",
    "SHARING",
    "StepResult",
    "SynthesisedGraph",
    "WeightPCA",
    "aggregate",
    "backward_macs",
    "boundary_nodes",
    "build_model",
    "build_view",
    "client_graphs",
    "dealt_metis_assignment",
    "dealt_metis_graph",
    "degree_rows",
    "evaluate",
    "exact_sample",
    "exchange_convs",
    "exchange_degrees",
    "exchange_in_process",
    "export_plan",
    "forward",
    "forward_macs",
    "full_forward",
    "make_scheme",
    "merge_rows",
    "owner_rows",
    "owner_rows_and_macs",
    "relay",
    "request_plan",
    "reward",
    "shared_convs",
    "soft_update",
    "split_rows",
    "synthesise",
    "synthesised_graph",
    "time_penalty_alpha",
    "train_macs",
    "train_round",
    "train_step",
    "UPDATE_RULES",
]
