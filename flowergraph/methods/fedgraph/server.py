"""FedGraph (Chen et al., IEEE TPDS): cross-client graph convolution on hidden embeddings that the server relays,
per-client sampling policies chosen by a DDPG agent, as a flowergraph strategy. It computes what the core's
in-process composition computes (:mod:`flowergraph.methods.fedgraph.maths`: ``exchange_in_process`` + ``train_round`` +
``aggregate`` + the agent; tests compare them), because both call the same functions; only where they run differs.

Protocol (messages: :mod:`flowergraph.methods.fedgraph.wire`):

1. **Degree exchange**, once before round 1 (phase ``fedgraph-degrees``, round 0 of ``rounds.jsonl``; skipped
   for ``nonshare``): every owner sends its boundary nodes' global degrees, split per requesting client; the
   server routes each client the degrees of exactly its remote neighbours (:func:`~.phases.relay`). Clients keep
   them in their state (client checkpoints save them).
2. **Embedding exchange** of round r (``staleness=same-round``; phase ``fedgraph-exchange`` in the round's
   record): for each sharing convolution k in order (``fedgraph``: k = 1; ``allshare``: 0 then 1), every owner
   computes ``h^(k)(u) W^(k)`` of its boundary nodes u with the model it trains this round (the global model,
   sent with the phase message), exactly (all neighbours, no dropout), splits it per requester; the server routes
   and delivers; no computation on the rows. With ``staleness=one-round`` there is no phase from round 2 on: each
   owner computes its rows after its local training of round r-1 with its trained model and sends them in its fit
   reply; the server routes them with round r's fit instructions (one round old; round 1 and the first round of a
   reset episode exchange same-round, having nothing older). An owner that fails a round leaves its previous rows
   in place (older still).
3. **Training**: every client gets the global model and its plan (sharing, scheme, its policy
   P_i = (kappa_i, p_i^(k))), trains ``local-steps`` iterations on fresh layered samples (Algorithm 1-2, eq. 7),
   and returns its weights with ``num_examples`` = the mini-batch size used.
4. **Aggregation** (eq. 8): the mean weighted by the clients' mini-batch sizes.
5. **Agent** (``agent=ddpg``; Algorithm 4): after aggregation, the state s'[t] is the PCA of the global and every
   client's weights; the reward r[t] (eq. 9) is ``omega ** (acc - target) - alpha (delta - beta)`` with ``acc``
   the global model's accuracy on the server's test set (the dataset's test nodes, whole graph) and ``delta`` the
   round's completion time, measured as ``round_time`` says: ``server`` (the paper's: the server's clock from the
   round's start to aggregation: exchange, training, upload; in a one-process simulation the clients' training
   adds up instead of overlapping), ``slowest-client`` (the largest local training time a client reports: the
   training part of a deployment whose clients run in parallel; the exchange is left out, every policy pays it
   alike) or ``work`` (the largest number of multiply-adds, in billions, of a client's forward passes this
   round: deterministic, so the reward carries no machine noise and a run repeats exactly; the training part of
   a parallel deployment on equal machines, up to a constant); the transition is stored, the
   networks updated, and the next action sets every client's policy for round t+1. After T rounds the episode
   ends; with ``episode-reset`` the next round restarts federated training from the initial model (a new
   episode of Algorithm 4), else training goes on. The reward is taken after aggregation, not in
   :meth:`round_closed`: with fused evaluation a round's record closes only when the next round's fit returns,
   after the next policies were needed. ``alpha=-1`` profiles alpha on round 1 (penalty 1 there).

Evaluation: clients evaluate with one exact forward using the rows received for the evaluated model: inside the
next round's fit (fused: that round's exchange used exactly that model), or after an exchange phase with the
evaluated model (``fedgraph-exchange-eval``) before a separate evaluation; with one-round staleness, with the rows
pending on the server. The last round of an episode that resets is evaluated separately (the next round trains
another model).

What the server learns: every client's weights, loss and mini-batch size per round (as in FedAvg), its
boundary nodes' global ids and degrees, and every round its boundary nodes' ``h^(k) W^(k)`` rows (allShare: also
``x W^(0)``). It never receives raw features. State: the agent (networks, targets, optimizers, replay buffer,
noise, PCA, episode position), the current policies, the initial model, alpha, the episode returns and the rows
waiting for delivery (one-round) join the checkpoint (:meth:`state_dict`).
"""

from __future__ import annotations

import math
import time
from logging import INFO, WARNING
from typing import Any, Callable, Mapping

import numpy as np
from flwr.common.logger import log

from ...strategies.nodes import Federation, Node, Scalar
from ...wire import PhaseMessage
from . import wire as msg
from ...strategies.aggregation import RoundNotAggregated, Update
from ...strategies.base import FederatedStrategy
from ...strategies.common import arrays_bytes, config_bytes
from ...strategies.phases import Phase, PhaseReply, relay
from ...strategies.policy import FederationPolicy

SHARING = ("fedgraph", "allshare", "nonshare")
SAMPLING = ("fedgraph", "full", "graphsage", "fastgcn")
AGENTS = ("ddpg", "fixed")
STALENESS = ("same-round", "one-round")
ROUND_TIMES = ("server", "slowest-client", "work", "parallel")
EXCHANGES = ("round", "iteration")
# eq. 9's delta for each fedgraph.round-time: the round record's entry it is read from
DELTA_OF = {"server": "round_time", "slowest-client": "slowest_client_s", "work": "max_gmacs", "parallel": "parallel_s"}


def _choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; valid choices: {', '.join(choices)}")
    return value


class FedGraphStrategy(FederatedStrategy):
    """FedGraph's server (module docstring). ``test_fn(round, arrays) -> (loss, {"accuracy": a})``: the server's
    test set (required with ``agent="ddpg"``). ``ddpg``: a :class:`~flowergraph.methods.fedgraph.maths.DDPGConfig`."""

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        sharing: str = "fedgraph",
        sampling: str = "fedgraph",
        agent: str = "ddpg",
        staleness: str = "same-round",
        num_convs: int = 2,
        batch_size: int = 256,
        prob: float = 1.0,
        ddpg: Any = None,
        kappa_range: tuple[int, int] = (32, 512),
        p_min: float = 0.1,
        episode_reset: bool = True,
        target_accuracy: float = 0.8,
        omega: float = 128.0,
        alpha: float = -1.0,
        beta: float = 0.0,
        round_time: str = "server",
        test_fn: Callable[[int, list[np.ndarray]], Any] | None = None,
        exchange: str = "round",
        local_steps: int = 3,
        network: str = "lan",
        seconds_per_mac: float | None = None,
        seconds_per_step: float | None = None,
        **kwargs: Any,
    ) -> None:
        from .maths import SECONDS_PER_MAC, SECONDS_PER_ROWS, SECONDS_PER_STEP, DDPGConfig, exchange_convs
        from .maths.clock import network as network_of

        super().__init__(policy, **kwargs)
        self.sharing = _choice("sharing", sharing, SHARING)
        self.sampling = _choice("sampling", sampling, SAMPLING)
        self.agent_kind = _choice("agent", agent, AGENTS)
        self.staleness = _choice("staleness", staleness, STALENESS)
        self.round_time = _choice("round_time", round_time, ROUND_TIMES)
        if self.agent_kind == "ddpg" and (self.sampling != "fedgraph" or test_fn is None):
            raise ValueError(
                "agent='ddpg' chooses FedGraph sampling policies (sampling='fedgraph') from the accuracy "
                "on the server's test set (test_fn)"
            )
        self.num_convs = int(num_convs)
        self.convs = exchange_convs(self.sharing, self.num_convs)
        self.exchange_mode = _choice("exchange", exchange, EXCHANGES)
        self.local_steps = int(local_steps)
        self.network = network_of(network)
        self.seconds_per_mac = float(SECONDS_PER_MAC if seconds_per_mac is None else seconds_per_mac)
        self.seconds_per_step = float(SECONDS_PER_STEP if seconds_per_step is None else seconds_per_step)
        # 0 per iteration: the proportional model, no fixed cost per rows computation either
        self.seconds_per_rows = SECONDS_PER_ROWS if seconds_per_step is None or seconds_per_step > 0 else 0.0
        if self.exchange_mode == "iteration":
            if self.staleness != "same-round" or len(self.convs) != 1:
                raise ValueError(
                    f"exchange='iteration' relays the rows of exactly one sharing convolution every local "
                    f"iteration, computed then (staleness='same-round'); got sharing={self.sharing!r} with "
                    f"{self.num_convs} convolutions (sharing convolutions {list(self.convs)}), "
                    f"staleness={self.staleness!r}"
                )
            self.schedule.fused = False  # evaluation needs every remote row of the evaluated model: its own exchange
        # the parallel clock's parts of the current round (methods.fedgraph.maths.clock.RoundCost)
        self._work: dict[int, int] = {}
        self._steps: dict[int, int] = {}  # local iterations
        self._rows: dict[int, int] = {}  # rows computations
        self._bytes: dict[int, int] = {}
        self._messages = 0
        self._server_cpu = 0.0  # the server's CPU seconds since the last reward (the agent's step counts in the next)
        self._last_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # exchange=iteration: the last step's rows
        self._aggregation_cpu = time.thread_time()
        self.batch_size, self.prob = int(batch_size), float(prob)
        self.ddpg = ddpg if ddpg is not None else DDPGConfig()
        self.kappa_range, self.p_min = (int(kappa_range[0]), int(kappa_range[1])), float(p_min)
        self.episode_reset = bool(episode_reset)
        self.target_accuracy, self.omega = float(target_accuracy), float(omega)
        self.alpha, self.beta = float(alpha), float(beta)
        self.test_fn = test_fn
        self.agent: Any = None  # DDPGAgent
        self.policies: list[tuple[int, tuple[float, ...]]] = [
            (self.batch_size, (self.prob,) * self.num_convs)
        ] * self.num_clients
        self.initial: dict[str, np.ndarray] | None = None  # the initial model (an episode's restart)
        self.alpha_value: float | None = None if self.alpha < 0 else self.alpha
        self.episode_return = 0.0
        self.returns: list[float] = []  # cumulative reward of every finished episode
        self.new_episode = False  # the last round ended an episode: the next round starts one
        self.last_state: np.ndarray | None = None
        self.pending: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # one-round: "conv_requester_owner" -> rows
        self.exchanged = False  # this round's rows came from a same-round exchange phase
        self._fit_start = 0.0
        if self.agent_kind == "ddpg" and self.episode_reset:  # an episode's last round: never fused (module doc)
            T = self.ddpg.episode_rounds
            self.schedule.separate |= {r for r in range(T, self.num_rounds + 1, T)}

    def __repr__(self) -> str:
        return (
            f"FedGraphStrategy(num_clients={self.num_clients}, sharing={self.sharing!r}, "
            f"sampling={self.sampling!r}, agent={self.agent_kind!r}, staleness={self.staleness!r}, "
            f"exchange={self.exchange_mode!r})"
        )

    # ----------------------------------------------------------------------------------------- relay
    def _relay(
        self,
        phase: Phase,
        clients: list[Node],
        collect: str,
        request: PhaseMessage,
        deliver: str,
        conv: int,
        counted: bool = False,
    ) -> dict[str, int]:
        """Owners answer ``collect`` with a :class:`~flowergraph.methods.fedgraph.wire.RowsUpload`; the server merges,
        per requester, what every owner sent it (routing only) and delivers it as ``deliver``. ``counted``: the
        owners' multiply-adds and the server's routing time go to the round's parallel clock."""
        import threading

        from .maths import Rows, merge_rows

        uploads: dict[int, msg.RowsUpload] = {}
        widths: set[int] = set()
        lock = threading.Lock()

        def collected(reply: PhaseReply) -> None:
            up = msg.RowsUpload.decode(reply.arrays, reply.values)
            uploads[int(reply.client)] = up
            widths.add(up.width)
            if counted:
                self._count_work(int(reply.client), up.macs, rows=1 if up.macs else 0)
            reply.arrays.clear()

        def route(proxy: Node, _reply: PhaseReply) -> PhaseMessage:
            cpu = time.thread_time()
            try:
                return _route(proxy)
            finally:
                if counted:
                    with lock:
                        self._server_cpu += time.thread_time() - cpu

        def _route(proxy: Node) -> PhaseMessage:
            me = self.partition(proxy)
            width = max(widths) if widths else 1
            parts = [
                Rows(ids=up.parts[me][0], values=np.asarray(up.parts[me][1]).reshape(-1, width))
                for up in uploads.values()
                if me in up.parts
            ]
            merged = merge_rows(parts) if parts else Rows(np.zeros(0, np.int64), np.zeros((0, width), np.float32))
            values = np.asarray(merged.values).reshape(-1, width)
            arrays, vals = msg.RowsDelivery(np.asarray(merged.ids), values, conv).encode()
            return PhaseMessage(arrays=arrays, values=vals)

        replies = relay(
            phase, clients, collect=collect, request=request, deliver=deliver, route=route, on_collect=collected
        )
        return {r.client: msg.Stored.decode(r.arrays, r.values).rows for r in replies}

    def degree_phase(self, clients: list[Node]) -> dict[str, Any]:
        phase = self.phases.begin(msg.DEGREE_PHASE, 0, timeout=self.init_timeout)
        stored = self._relay(phase, clients, msg.DEGREES, PhaseMessage(), msg.STORE_DEGREES, -1)
        stats = phase.end(elapsed_s=0.0, remote_neighbours=stored)
        del stats["failures"]  # every client must answer: a failure fails the run
        if not self.resumed:  # a resumed run's records already hold round 0
            self.book.write(dict(stats))
        return stats

    def exchange(
        self, name: str, server_round: int, clients: list[Node], model: Mapping[str, np.ndarray], counted: bool = False
    ) -> None:
        """A same-round exchange: every sharing convolution's rows, computed with ``model`` (``counted``: part of
        the round's training, so of its parallel clock; not the exchange before a separate evaluation)."""
        if not self.convs:
            return
        phase = self.phases.begin(name, server_round, timeout=self.round_timeout)
        stored: dict[str, int] = {}
        for k in self.convs:
            arrays, values = msg.RowsRequest(k, self.sharing).encode()
            stored = self._relay(
                phase,
                clients,
                msg.ROWS,
                PhaseMessage(arrays=arrays, values=values, model=model),
                msg.STORE_ROWS,
                k,
                counted,
            )
        if counted:
            self._count_phase(phase)
        self.book.add_phase(phase.end(convs=list(self.convs), remote_rows=stored))

    def _count_work(self, client: int, macs: int, steps: int = 0, rows: int = 0) -> None:
        self._work[client] = self._work.get(client, 0) + int(macs)
        self._steps[client] = self._steps.get(client, 0) + int(steps)
        self._rows[client] = self._rows.get(client, 0) + int(rows)

    def _count_phase(self, phase: Phase) -> None:
        """A training phase's bytes per client and sequential message round trips, into the parallel clock."""
        for label, size in phase.client_bytes.items():
            if label.isdigit():
                self._bytes[int(label)] = self._bytes.get(int(label), 0) + size
        self._messages += phase.sends

    def iterate(
        self, server_round: int, clients: list[Node], model: Mapping[str, np.ndarray]
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``exchange=iteration`` (the paper's cadence): the round's local iterations, each with its exchange
        through the server (phase ``fedgraph-iterations``). ``begin`` (the model, each client's plan) -> every
        client's first requests; then per iteration t: the requests routed to their owners (``iteration-rows``:
        rows computed with the owner's current weights), the rows routed to their requesters (``step``: one local
        iteration, then the next requests); the last iteration's rows are returned, per requester, for the fit
        config. Routing only: the server computes nothing on the rows."""
        from .maths import Rows, merge_rows

        (conv,) = self.convs
        weight = f"convs.{conv}.lin.weight"  # [out, in]: the rows' width is its first dimension
        steps = self.local_steps
        phase = self.phases.begin(msg.ITERATION_PHASE, server_round, timeout=self.round_timeout)
        requests: dict[int, msg.IdsByClient] = {}

        def asked(reply: PhaseReply) -> None:
            requests[int(reply.client)] = msg.IdsByClient.decode(reply.arrays, reply.values)

        def begin(proxy: Node) -> PhaseMessage:
            arrays, values = msg.Begin(self.plan(self.partition(proxy)), steps).encode()
            return PhaseMessage(arrays=arrays, values=values, model=model)

        phase.send(msg.BEGIN, clients, begin, on_reply=asked)
        rows_sent: list[int] = []
        inbox: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for t in range(1, steps + 1):
            wanted: dict[int, dict[int, np.ndarray]] = {}
            for requester, req in sorted(requests.items()):
                if req.iteration != t:
                    raise RuntimeError(
                        f"FedGraph round {server_round}: client {requester} asked for iteration {req.iteration}'s "
                        f"rows in iteration {t}"
                    )
                for owner, ids in req.parts.items():
                    wanted.setdefault(owner, {})[requester] = ids
            uploads: dict[int, msg.RowsUpload] = {}

            def collected(reply: PhaseReply) -> None:
                up = msg.RowsUpload.decode(reply.arrays, reply.values)
                uploads[int(reply.client)] = up
                self._count_work(int(reply.client), up.macs, rows=1 if up.macs else 0)

            def ask(proxy: Node, _t: int = t, _wanted: dict = wanted) -> PhaseMessage:
                arrays, values = msg.IdsByClient(_wanted[int(self.partition(proxy) or 0)], conv, _t).encode()
                return PhaseMessage(arrays=arrays, values=values)

            owners = [proxy for proxy in clients if self.partition(proxy) in wanted]
            phase.send(msg.ITERATION_ROWS, owners, ask, on_reply=collected)
            width = max((up.width for up in uploads.values()), default=int(np.asarray(model[weight]).shape[0]))
            inbox = {}
            for requester in sorted(requests):
                parts = [
                    Rows(ids=up.parts[requester][0], values=np.asarray(up.parts[requester][1]).reshape(-1, width))
                    for _, up in sorted(uploads.items())
                    if requester in up.parts
                ]
                merged = merge_rows(parts) if parts else Rows(np.zeros(0, np.int64), np.zeros((0, width), np.float32))
                inbox[requester] = (np.asarray(merged.ids), np.asarray(merged.values).reshape(-1, width))
            rows_sent.append(sum(len(ids) for ids, _ in inbox.values()))
            if t == steps:
                break
            requests = {}

            def step(proxy: Node, _t: int = t, _inbox: dict = inbox) -> PhaseMessage:
                ids, values = _inbox.get(
                    int(self.partition(proxy) or 0), (np.zeros(0, np.int64), np.zeros((0, width), np.float32))
                )
                arrays, vals = msg.StepRows(ids, values, conv, _t).encode()
                return PhaseMessage(arrays=arrays, values=vals)

            phase.send(msg.STEP, clients, step, on_reply=asked)
        self._count_phase(phase)
        self.book.add_phase(phase.end(iterations=steps, rows_per_iteration=rows_sent))
        return inbox

    # ----------------------------------------------------------------------------------------- agent
    def _start_episode(self) -> None:
        model = self.bank.global_model or {}
        state = (
            self.last_state
            if (self.last_state is not None and not self.episode_reset)
            else self.agent.observe(model, [model] * self.num_clients)
        )
        self._set_action(self.agent.start_episode(state))
        self.episode_return = 0.0
        self.new_episode = False

    def _set_action(self, action: np.ndarray) -> None:
        self.policies = [(p.kappa, tuple(p.probs)) for p in self.agent.policies(action)]

    def setup(self, federation: Federation) -> None:
        from .maths import ActionSpace, DDPGAgent

        clients = self.all_clients(federation)
        if len(clients) != self.num_clients:
            raise RuntimeError(
                f"FedGraph needs all {self.num_clients} clients (every owner sends rows, the agent "
                f"has a slot per client); {len(clients)} are connected"
            )
        if self.sharing != "nonshare":
            if self.client_state.restored:
                log(INFO, "FedGraph: the clients restored their remote degrees from the checkpoint")
            else:
                self.degree_phase(clients)
        if self.initial is None:
            self.initial = {k: np.array(v, copy=True) for k, v in (self.bank.global_model or {}).items()}
        if self.agent_kind == "ddpg" and self.agent is None:
            space = ActionSpace(
                self.num_clients, self.num_convs, self.kappa_range[0], self.kappa_range[1], self.p_min, 1.0
            )
            self.agent = DDPGAgent(space, self.ddpg, seed=self.seed)
            self._start_episode()

    def before_fit(self, server_round: int, clients: list[Node], federation: Federation) -> None:
        self._fit_start = time.perf_counter()
        self._work, self._steps, self._rows, self._bytes, self._messages = {}, {}, {}, {}, 0
        self._last_rows = {}
        restart = False
        if self.agent is not None and self.new_episode:
            if self.episode_reset:
                assert self.initial is not None
                self.bank.set_global(dict(self.initial))
                self.pending = {}
                restart = True
            self._start_episode()
        rec = self.book.start(server_round)
        rec["fedgraph"] = {
            "policies": [[k, list(p)] for k, p in self.policies],
            **({"episode": self.agent.episode} if self.agent is not None else {}),
        }
        if restart:
            rec["fedgraph"]["restarted"] = True
        if self.exchange_mode == "iteration":
            self.exchanged = True
            self._last_rows = self.iterate(server_round, self.all_clients(federation), self.bank.global_model or {})
            return
        self.exchanged = self.staleness == "same-round" or server_round == 1 or restart or not self.pending
        if self.exchanged:
            self.exchange(
                msg.EXCHANGE_PHASE,
                server_round,
                self.all_clients(federation),
                self.bank.global_model or {},
                counted=True,
            )

    def configure_fit(self, server_round: int, arrays: Any, federation: Federation):
        """The base's (which calls :meth:`before_fit`: the round's exchange), with the server's CPU time and each
        client's fit bytes and the fit's message round trip counted for the parallel clock."""
        cpu = time.thread_time()
        out = super().configure_fit(server_round, arrays, federation)
        for proxy, ins in out:
            p = self.partition(proxy)
            if p is not None:
                self._bytes[p] = self._bytes.get(p, 0) + arrays_bytes(ins.arrays) + config_bytes(ins.config)
        self._messages += 1 if out else 0
        self._server_cpu += time.thread_time() - cpu
        return out

    def aggregate_fit(self, server_round: int, results: list, failures: list):
        """The base's, with each client's fit reply bytes (evaluation metrics left out) and its reported work
        counted for the parallel clock first; the server's CPU time from here to the reward is measured."""
        from ...wire import EVAL_PREFIX, PARTITION_ID

        for proxy, res in results:
            p = self.partition(proxy)
            p = int(res.metrics.get(PARTITION_ID, -1)) if p is None else p
            metrics = {k: v for k, v in res.metrics.items() if not str(k).startswith(EVAL_PREFIX)}
            self._bytes[p] = self._bytes.get(p, 0) + arrays_bytes(res.arrays) + config_bytes(metrics)
            rows = int(res.metrics.get(msg.EXCHANGE_MACS, 0))
            steps = self.local_steps if int(res.metrics.get(msg.TRAIN_MACS, 0)) else 0
            self._count_work(p, int(res.metrics.get(msg.TRAIN_MACS, 0)) + rows, steps, len(self.convs) * bool(rows))
        self._aggregation_cpu = time.thread_time()
        return super().aggregate_fit(server_round, results, failures)

    def plan(self, partition: int | None) -> msg.RoundPlan:
        kappa, probs = self.policies[int(partition or 0)]
        return msg.RoundPlan(self.sharing, self.sampling, kappa, probs, self.staleness, self.exchange_mode)

    def _inbox(self, partition: int | None) -> dict[str, Any]:
        """One-round staleness: the rows pending for ``partition``, as a config value."""
        from .maths import Rows, merge_rows

        me = int(partition or 0)
        parts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for k in self.convs:
            mine = [
                Rows(ids=ids, values=values)
                for key, (ids, values) in sorted(self.pending.items())
                if key.split("_")[:2] == [str(k), str(me)]
            ]
            if mine:
                merged = merge_rows(mine)
                parts[k] = (np.asarray(merged.ids), np.asarray(merged.values))
        return {msg.INBOX: msg.pack_parts(parts)}

    def client_config(self, server_round: int, proxy: Node, config: dict[str, Scalar], kind: str) -> dict[str, Scalar]:
        """A fit: the client's round plan (its sampling policy, recorded in its table entry) and, before the
        exchange has run this round, its inbox of rows; a separate evaluation with stale rows: its inbox."""
        p = self.partition(proxy)
        if kind != "fit":
            return config if self.staleness == "same-round" else {**config, **self._inbox(p)}
        extra: dict[str, Any] = dict(self.plan(p).config())
        if self.exchange_mode == "iteration":  # the last local iteration's rows: the client takes it in its fit
            ids, values = self._last_rows.get(int(p or 0), (np.zeros(0, np.int64), np.zeros((0, 0), np.float32)))
            extra[msg.ITERATION_INBOX] = msg.pack_parts({self.convs[0]: (ids, values)})
        elif not self.exchanged:
            extra.update(self._inbox(p))
        self.client_entry(int(p or 0))["policy"] = [extra[msg.KAPPA], extra[msg.PROBS]]
        return {**config, **extra}

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        config = super().evaluate_config(server_round)
        config.update(
            msg.RoundPlan(
                self.sharing,
                self.sampling,
                self.batch_size,
                (self.prob,) * self.num_convs,
                self.staleness,
                self.exchange_mode,
            ).config()
        )
        return config

    def configure_evaluate(self, server_round: int, arrays: Any, federation: Federation):
        """A separate evaluation: first the rows of the evaluated model (same-round: from every connected owner, even
        to an evaluation of some clients), or the pending ones (in each client's config: :meth:`client_config`).
        exchange=iteration evaluates every round this way (its rounds exchange only sampled rows)."""
        out = super().configure_evaluate(server_round, arrays, federation)
        if out and self.staleness == "same-round":
            self.exchange(
                msg.EVAL_EXCHANGE_PHASE, server_round, self.all_clients(federation), self.bank.global_model or {}
            )
        return out

    # ------------------------------------------------------------------------------------ aggregation
    def aggregate_updates(
        self, server_round: int, updates: list[Update], weights: list[float]
    ) -> Mapping[str, np.ndarray]:
        """Eq. 8: weighted by the mini-batch sizes the clients report (``num_examples``)."""
        from .maths import aggregate

        keys = list(self.bank.global_model or {})
        if sum(u.num_examples for u in updates) <= 0:
            raise RoundNotAggregated("no client trained on a labelled node (every mini-batch size is 0)")
        return aggregate([(u.named(keys), float(u.num_examples)) for u in updates])

    def after_fit(self, server_round: int, updates: list[Update]) -> None:
        from .maths import RoundCost, reward, time_penalty_alpha

        rec = self.book.start(server_round)
        info = rec.setdefault("fedgraph", {})
        if self.staleness == "one-round":
            for u in updates:
                blob = u.metrics.get(msg.UPLOAD)
                if not isinstance(blob, bytes):
                    continue
                for (k, requester), part in msg.unpack_parts(blob).items():
                    self.pending[f"{k}_{requester}_{u.client}"] = part
        model = self.bank.global_model or {}
        info["round_time"] = time.perf_counter() - self._fit_start
        info["slowest_client_s"] = max((float(u.metrics.get(msg.LOCAL_SECONDS, 0.0)) for u in updates), default=0.0)
        info["max_gmacs"] = max((int(u.metrics.get(msg.FORWARD_MACS, 0)) for u in updates), default=0) / 1e9
        if self.test_fn is not None:
            _, metrics = self.test_fn(server_round, list(model.values()))
            info["server_accuracy"] = float(metrics["accuracy"])
        self._server_cpu += time.thread_time() - self._aggregation_cpu
        cost = RoundCost(
            work=[self._work.get(p, 0) for p in range(self.num_clients)],
            bytes=[self._bytes.get(p, 0) for p in range(self.num_clients)],
            messages=self._messages,
            server_s=self._server_cpu,
            steps=[self._steps.get(p, 0) for p in range(self.num_clients)],
            rows=[self._rows.get(p, 0) for p in range(self.num_clients)],
        )
        self._server_cpu = 0.0
        info["clock"] = cost.record(self.seconds_per_mac, self.seconds_per_step, self.seconds_per_rows)
        info["parallel_s"] = info["clock"][f"{self.network.name}_s"]
        delta = info[DELTA_OF[self.round_time]]
        if self.agent is None:
            return
        needed = {"work": msg.FORWARD_MACS, "slowest-client": msg.LOCAL_SECONDS, "parallel": msg.TRAIN_MACS}.get(
            self.round_time
        )
        silent = sorted(u.client for u in updates if needed is not None and needed not in u.metrics)
        if silent:  # a missing report would read as 0 and drop eq. 9's time term without a word
            raise ValueError(
                f"fedgraph.round-time={self.round_time!r} needs every client's {needed!r} metric in its "
                f"fit reply; client(s) {', '.join(silent)} sent none in round {server_round} (a client "
                f"that is not flowergraph's FedGraphClient must report it; valid without it: "
                f"fedgraph.round-time='server')"
            )
        if self.alpha_value is None:
            try:
                self.alpha_value = time_penalty_alpha([delta], self.beta)
            except ValueError as exc:
                log(WARNING, "FedGraph: cannot profile alpha (%s); using alpha = 1", exc)
                self.alpha_value = 1.0
        acc = info.get("server_accuracy", 0.0)
        acc = acc if math.isfinite(acc) else 0.0
        r = reward(acc, delta, self.target_accuracy, self.omega, self.alpha_value, self.beta)
        cpu = time.thread_time()  # the agent's step: the server's time of the next round (it delays that round)
        keys = list(model)
        by_partition = {u.partition: u.named(keys) for u in updates}
        state = self.agent.observe(model, [by_partition.get(p, model) for p in range(self.num_clients)])
        step = self.agent.record(r, state)
        self.episode_return += r
        info.update(
            reward=r,
            alpha=self.alpha_value,
            episode_round=self.agent.round if not step.done else self.ddpg.episode_rounds,
            critic_loss=step.critic_loss,
            actor_loss=step.actor_loss,
        )
        if step.done:
            info["episode_return"] = self.episode_return
            self.returns.append(self.episode_return)
            self.new_episode = True
            self.last_state = np.asarray(state, dtype=np.float32).copy()
        else:
            assert step.action is not None
            self._set_action(step.action)
        self._server_cpu += time.thread_time() - cpu

    # ------------------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        agent = None
        if self.agent is not None:
            arrays, values = self.agent.export_state()
            agent = {"arrays": arrays, "values": values}
        return {
            **super().state_dict(),
            "fedgraph": {
                "agent": agent,
                "policies": [[k, list(p)] for k, p in self.policies],
                "initial": self.initial,
                "alpha": self.alpha_value,
                "episode_return": self.episode_return,
                "returns": list(self.returns),
                "new_episode": self.new_episode,
                "last_state": self.last_state,
                "pending": {key: {"ids": ids, "values": values} for key, (ids, values) in self.pending.items()},
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from .maths import DDPGAgent

        super().load_state_dict(state)
        own = state.get("fedgraph")
        if own is None:
            raise RuntimeError("the checkpoint holds no FedGraph state (was it written by another method?)")
        self.agent = (
            None if own["agent"] is None else DDPGAgent.from_state(own["agent"]["arrays"], own["agent"]["values"])
        )
        self.policies = [(int(k), tuple(float(x) for x in p)) for k, p in own["policies"]]
        self.initial = None if own["initial"] is None else {k: np.asarray(v) for k, v in own["initial"].items()}
        self.alpha_value = None if own["alpha"] is None else float(own["alpha"])
        self.episode_return = float(own["episode_return"])
        self.returns = [float(r) for r in own["returns"]]
        self.new_episode = bool(own["new_episode"])
        self.last_state = None if own["last_state"] is None else np.asarray(own["last_state"], dtype=np.float32)
        self.pending = {key: (np.asarray(v["ids"]), np.asarray(v["values"])) for key, v in own["pending"].items()}
