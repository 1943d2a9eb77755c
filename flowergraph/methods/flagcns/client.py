"""FL-AGCNS client (Wang et al.): a data owner's part of the federated architecture search and of the retraining
of the chosen architecture. The protocol is in :mod:`flowergraph.methods.flagcns.server`; the messages in
:mod:`flowergraph.methods.flagcns.wire`; the maths in :mod:`flowergraph.methods.flagcns.maths` (the same functions the
in-process reference :class:`~flowergraph.methods.flagcns.maths.InProcessSearch` calls).

What a client answers:

* ``fit`` in a search round (config :class:`~flowergraph.methods.flagcns.wire.SearchStep`): copy the received SuperNet
  arrays (named) into its SuperNet, compute the training loss averaged over the sampled codes and its gradients
  (:func:`~flowergraph.methods.flagcns.maths.client_loss_and_gradients`), return the gradients under the names it
  received; ``num_examples`` = its number of training nodes.
* ``fit`` / ``evaluate`` in a retraining round (config :class:`~flowergraph.methods.flagcns.wire.Retrain`): the same
  with the standalone network of the chosen code (:func:`~flowergraph.methods.flagcns.maths.architecture_gradients`);
  evaluation reports validation and test loss/accuracy and the seconds of one evaluation forward (``inference_s``).
* phase :data:`~flowergraph.methods.flagcns.wire.EVALUATE`: each requested code's validation loss and accuracy with the
  SuperNet weights that came with the message; in secure mode (the run has ``secure-agg=ckks``) only their CKKS
  encryption (:func:`~flowergraph.methods.flagcns.wire.score_vector`), whatever the request says.
* phase :data:`~flowergraph.methods.flagcns.wire.EVOLVE`: one generation of its own EA over ``P_{G_i} u P_FL``
  (Algorithm 1 step 3) on its local validation losses (or accuracies), with the whole SuperNet that came with the
  message; returns its ranked population.

State: the EA (population, fitness, random generator; JSON) lives in the node's persistent state
(:class:`~flowergraph.clients.ClientState`, entry ``flagcns-ea``), so client checkpoints save it and a resumed run
continues it. The SuperNet, the retrained network and the scores computed within one generation live in the
process cache (``ClientArgs.cache``): every message carries all the weights its computation reads, so a cache miss
(another process, a resumed run) costs time, never a different result. Scores are cached under a digest of the
weights they were computed with, so a stale entry can never be returned.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Mapping, Sequence

import numpy as np

from ... import wire
from ...wire import PhaseRequest
from . import wire as msg
from ...wire.secure import SECURE_AGG
from ...clients.base import FederatedClient
from ...clients.state import ClientState

EA_KEY = "flagcns-ea"  # values: {"ea": EvolutionaryOptimizer.state()}
FITNESS = ("loss", "accuracy")


def _digest(array: np.ndarray) -> bytes:
    a = np.ascontiguousarray(array)
    return hashlib.blake2b(a.tobytes() + str((a.dtype.str, a.shape)).encode(), digest_size=16).digest()


class FLAGCNSClient(FederatedClient):
    """One data owner (``graph``: its :class:`~flowergraph.tasks.federated_graph.ClientGraph`, or any object with
    ``x``, ``edge_index``, ``y``, split masks and ``num_classes``).

    ``space`` / ``schedule``: the run's search space and budget (the client's EA uses ``schedule.client_config()``);
    ``seed``: the run's seed (the SuperNet's initial weights, the client EA's generator, salted by partition id as
    in the reference); ``fitness``: ``loss`` (paper) or ``accuracy`` (reference code); ``architecture``: a fixed
    code to retrain without a search (its initial weights seeded by ``init_seed``); ``key_file``: the data owners'
    CKKS key in secure mode (the scores then leave the client encrypted only); ``cache``: the node's process cache.
    """

    def __init__(
        self,
        graph: Any,
        *,
        partition_id: int,
        space: Any,
        schedule: Any,
        seed: int = 0,
        fitness: str = "loss",
        state: ClientState | None = None,
        cache: Any = None,
        key_file: str | None = None,
        architecture: Sequence[int] | None = None,
        init_seed: int | None = None,
    ) -> None:
        if fitness not in FITNESS:
            raise ValueError(f"unknown fitness {fitness!r}; valid choices: {', '.join(FITNESS)}")
        self.graph = graph
        self.partition_id = int(partition_id)
        self.space, self.schedule, self.seed, self.fitness = space, schedule, int(seed), fitness
        self.state = state if state is not None else ClientState()
        self.cache = cache
        self.key_file = key_file or None
        self.architecture = None if architecture is None else space.check(architecture)
        self.init_seed = self.seed if init_seed is None else int(init_seed)
        self.in_dim, self.num_classes = int(graph.x.size(1)), int(graph.num_classes)
        self.num_train = int(graph.train_mask.sum())
        self.num_val = int(graph.val_mask.sum())
        self.mode: str | None = None
        self.net: Any = None
        self.codes: tuple = ()
        self.code: tuple | None = None
        self.keys: list[str] = []
        self.out: dict[str, np.ndarray] = {}

    # --------------------------------------------------------------------------------------------- modules
    def _cached(self, key: tuple, build, size: int | None = None) -> Any:
        if self.cache is None:
            return build()
        return self.cache.get_or_build(key, build, size=size)

    def supernet(self) -> Any:
        """This process's SuperNet for the run (weights: whatever the last message loaded; every message loads
        what it needs)."""
        from .maths import SuperNet

        return self._cached(
            ("flagcns-supernet", self.space, self.in_dim, self.num_classes),
            lambda: SuperNet(self.space, self.in_dim, self.num_classes, seed=self.seed),
        )

    def network(self, code: tuple) -> Any:
        """This process's standalone network of ``code`` (weights loaded by every message)."""
        from .maths import ArchitectureNet

        return self._cached(
            ("flagcns-network", self.space, tuple(code), self.in_dim, self.num_classes),
            lambda: ArchitectureNet(self.space, code, self.in_dim, self.num_classes, seed=self.seed),
        )

    def initial_model(self) -> dict[str, np.ndarray]:
        """The run's initial model, fresh (never the cache's, whose weights a previous message changed): the
        seeded SuperNet, or the seeded network of a fixed architecture."""
        from .maths import ArchitectureNet, SuperNet
        from ...tasks.torch_state import module_arrays

        if self.architecture is None:
            return SuperNet(self.space, self.in_dim, self.num_classes, seed=self.seed).arrays()
        return module_arrays(
            ArchitectureNet(self.space, self.architecture, self.in_dim, self.num_classes, seed=self.init_seed)
        )

    # ------------------------------------------------------------------------------------------------ wire
    def get_parameters(self, config):
        return list(self.initial_model().values())

    def model_keys(self) -> list[str]:
        """The names of :meth:`get_parameters`' arrays (the state-dict keys of the SuperNet or the network)."""
        net = self.supernet() if self.architecture is None else self.network(self.architecture)
        return list(net.state_dict())

    def load(self, arrays: list[np.ndarray], keys: list[str] | None, config: Mapping[str, Any]) -> None:
        if keys is None:
            raise ValueError(
                f"FL-AGCNS training messages name their arrays ({wire.KEYS}); got {len(arrays)} unnamed arrays"
            )
        step, retrain = msg.SearchStep.from_config(config), msg.Retrain.from_config(config)
        if step is not None:
            self.mode, self.codes, self.net = "search", tuple(self.space.check(c) for c in step.codes), self.supernet()
        elif retrain is not None:
            self.mode, self.code = "retrain", self.space.check(retrain.architecture)
            self.net = self.network(self.code)
        else:
            raise ValueError(
                f"an FL-AGCNS training message carries {msg.CODES} (search) or {msg.ARCHITECTURE} "
                f"(retraining); this one has neither"
            )
        self.keys = list(keys)
        self._load(dict(zip(keys, arrays)))

    def _load(self, arrays: Mapping[str, np.ndarray]) -> None:
        from ...tasks.torch_state import load_module_arrays

        load_module_arrays(self.net, arrays)

    def train(self, config: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        from .maths import architecture_gradients, client_loss_and_gradients

        if self.mode == "search":
            loss, grads = client_loss_and_gradients(self.net, self.graph, self.codes)
        else:
            loss, grads = architecture_gradients(self.net, self.graph)
        missing = [k for k in self.keys if k not in grads]
        if missing or len(grads) != len(self.keys):
            raise ValueError(
                f"the server sent {len(self.keys)} arrays but these codes train {len(grads)} "
                f"(first not trained: {missing[:3]}); client and server disagree on the search space"
            )
        self.out = {k: grads[k] for k in self.keys}
        metrics: dict[str, Any] = {wire.NUM_TRAIN: self.num_train}
        if config.get(SECURE_AGG) != "ckks":  # in secure mode no individual loss leaves the client
            metrics[wire.TRAIN_LOSS] = float(loss)
        return self.num_train, metrics

    def shared_arrays(self) -> dict[str, np.ndarray]:
        return self.out

    def evaluation(self) -> dict[str, Any]:
        if self.mode != "retrain":
            raise ValueError(
                "FL-AGCNS evaluates the retrained architecture only (search rounds are scored by the FEO phases)"
            )
        from .maths import evaluate_network

        start = time.perf_counter()
        r = evaluate_network(self.net, self.graph)
        seconds = time.perf_counter() - start
        return {
            wire.ACCURACY: r["test_accuracy"],
            wire.LOSS: r["test_loss"],
            wire.NUM_TEST: int(r["num_test"]),
            wire.VAL_ACCURACY: r["val_accuracy"],
            wire.VAL_LOSS: r["val_loss"],
            wire.NUM_VAL: int(r["num_val"]),
            msg.INFERENCE_S: seconds,
        }

    # ---------------------------------------------------------------------------------------------- phases
    def phase_handlers(self):
        return {msg.EVALUATE: self.answer_evaluate, msg.EVOLVE: self.answer_evolve}

    def _phase_supernet(self, request: PhaseRequest) -> dict[str, bytes]:
        """Load the SuperNet weights a phase message carries; returns a digest per array (for the score cache)."""
        if not request.model:
            raise ValueError(
                f"an FL-AGCNS {request.kind} message carries the SuperNet weights it is computed "
                f"with; this one carries none"
            )
        self.net = self.supernet()
        self._load(request.model)
        return {k: _digest(v) for k, v in request.model.items()}

    def scores(self, codes: Sequence[tuple], digests: Mapping[str, bytes]) -> tuple[list[dict[str, float]], int]:
        """Each code's validation metrics with the loaded SuperNet (cached by the digest of the arrays it reads);
        ``(rows, codes evaluated now)``."""
        from .maths import evaluate_codes

        space, net = self.space, self.net
        keyed = []
        for code in codes:
            canon = space.canonical(code)
            parts = [digests.get(k, b"?") + k.encode() for k in net.code_keys(canon)]
            keyed.append((canon, ("flagcns-score", canon, hashlib.blake2b(b"".join(parts), digest_size=16).digest())))
        found: dict[tuple, dict[str, float]] = {}
        if self.cache is not None:
            for canon, key in keyed:
                row = self.cache.get(key)
                if row is not None:
                    found[canon] = row
        missing = list({canon: None for canon, _ in keyed if canon not in found})
        if missing:
            for canon, row in zip(missing, evaluate_codes(net, self.graph, missing)):
                found[canon] = row
            if self.cache is not None:
                for canon, key in keyed:
                    if canon in missing:
                        self.cache.put(key, found[canon], size=256)
        return [found[canon] for canon, _ in keyed], len(missing)

    def _encrypted(self, request_encrypted: bool) -> bool:
        if request_encrypted and self.key_file is None:
            raise ValueError(
                "the server asked for encrypted scores but this client has no CKKS key file (secure-agg=ckks sets one)"
            )
        return self.key_file is not None

    def answer_evaluate(self, request: PhaseRequest) -> tuple[list[np.ndarray], dict[str, Any]]:
        ask = msg.EvaluateRequest.decode(request.arrays, request.values)
        digests = self._phase_supernet(request)
        rows, _ = self.scores([self.space.check(c) for c in ask.codes], digests)
        losses = np.array([r["val_loss"] for r in rows], np.float64)
        accs = np.array([r["val_accuracy"] for r in rows], np.float64)
        if self._encrypted(ask.encrypted):
            from ...privacy import ckks

            from ...wire.secure import EncryptedUpdate

            vector = msg.score_vector(losses, accs, self.num_val)
            ctx = ckks.load_key_file(self.key_file or "")
            blobs = ckks.encrypt_checked(
                ctx, vector, ckks.check_key(ctx), request.round, self.partition_id, msg.SCORES_PURPOSE
            )
            return msg.EncryptedScores(EncryptedUpdate(blobs, len(vector)), self.num_val).encode()
        return msg.Scores(losses, accs, self.num_val).encode()

    def evolution(self, population: Sequence[tuple]) -> Any:
        """This client's EA: from its persistent state, else new (seeded by the run's seed and its partition id,
        starting from ``population``, as the reference's client EAs start from the initial population)."""
        from .maths import EvolutionaryOptimizer

        saved = self.state.get_values(EA_KEY)
        if saved is not None:
            return EvolutionaryOptimizer.from_state(self.space, saved["ea"])
        return EvolutionaryOptimizer(
            self.space, self.schedule.client_config(), self.seed, salt=self.partition_id + 1, population=population
        )

    def answer_evolve(self, request: PhaseRequest) -> tuple[list[np.ndarray], dict[str, Any]]:
        ask = msg.EvolveRequest.decode(request.arrays, request.values)
        digests = self._phase_supernet(request)
        ea = self.evolution([self.space.check(c) for c in ask.population])
        pool = ea.propose(extra=[self.space.check(c) for c in ask.p_fl])
        rows, evaluated = self.scores(pool, digests)
        ea.select([-r["val_loss"] if self.fitness == "loss" else r["val_accuracy"] for r in rows])
        self.state.set_values(EA_KEY, {"ea": ea.state()}, round=request.round)
        return msg.EvolveReply(tuple(ea.ranked()), self.num_train, evaluated).encode()


class FLAGCNSNoOpClient(FLAGCNSClient):
    """FL-AGCNS's messages with no work behind them (the benchmark floor): the same arrays and values travel, but
    nothing is loaded, trained or evaluated (zero gradients and scores; the EA step returns P_FL)."""

    def _load(self, arrays: Mapping[str, np.ndarray]) -> None:
        self.shapes = {k: (np.shape(v), np.asarray(v).dtype) for k, v in arrays.items()}

    def train(self, config: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        self.out = {k: np.zeros(shape, dtype) for k, (shape, dtype) in self.shapes.items()}
        return self.num_train, {wire.NUM_TRAIN: self.num_train}

    def evaluation(self) -> dict[str, Any]:
        return {
            wire.ACCURACY: 0.0,
            wire.LOSS: 0.0,
            wire.NUM_TEST: 1,
            wire.VAL_ACCURACY: 0.0,
            wire.NUM_VAL: 1,
            msg.INFERENCE_S: 0.0,
        }

    def answer_evaluate(self, request: PhaseRequest) -> tuple[list[np.ndarray], dict[str, Any]]:
        ask = msg.EvaluateRequest.decode(request.arrays, request.values)
        zeros = np.zeros(len(ask.codes), np.float64)
        return msg.Scores(zeros, zeros, self.num_val).encode()

    def answer_evolve(self, request: PhaseRequest) -> tuple[list[np.ndarray], dict[str, Any]]:
        ask = msg.EvolveRequest.decode(request.arrays, request.values)
        return msg.EvolveReply(ask.p_fl, self.num_train, 0).encode()
