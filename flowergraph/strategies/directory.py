"""Which node holds which partition: the identity handshake, the initial model, client names in logs, seeded
sampling, and failures named by client. A part of :class:`flowergraph.strategies.FederatedStrategy`, over a
:class:`~flowergraph.strategies.nodes.Federation` (the face's nodes)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
import time
from logging import INFO, WARNING
from typing import Any, Iterable

import numpy as np
from flwr.common.logger import log

from ..errors import ClientsMissingError
from ..wire import CONFIG_ERROR_MARKER, IDENTITY_REQUEST, NODE_RANK, PARTITION_ID, decode_keys
from .nodes import Failure, Federation, Node

_PHASE_CODES = {"fit": 1, "evaluate": 2}


PROCESS_DIED = "the client's process died (Ray: ActorDiedError)"


def failure_reason(exc: BaseException | str, limit: int = 300) -> str:
    """A one-line reason from Flower's failure texts (which wrap the client's error in several layers)."""
    text = str(exc)
    if "Node Unavailable" in text:
        return "the node went offline (no heartbeat: its SuperNode stopped or lost its connection)"
    if "Message Unavailable" in text or re.search(r"sent no reply (with|to)", text):  # Flower's, the Message API's
        return "no reply in time (the message expired after round-timeout, or its node left the federation)"
    if "ActorDiedError" in text or "actor died" in text.lower():
        return PROCESS_DIED
    m = re.search(r"Message: (.*?)'?>\)?\. It originated", text, flags=re.S)
    if m:
        text = m.group(1)
    elif "The above exception was the direct cause" in text.replace("\\n", "\n"):
        # a ClientApp traceback inside Ray's error (SecAgg+'s workflow passes it as it came): its first
        # exception line is the client's own error
        plain = text.replace("\\n", "\n").replace("\\'", "'")
        m = re.search(r"(?:^|\n)\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Refused|Fault): ([^\n]+)", plain)
        if m:
            text = m.group(1)
    text = " ".join(text.split()).strip(" '>")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def distinct_failures(failures: list) -> list:
    """``failures`` without repeats of one failed message: Flower's ``SecAggPlusWorkflow`` appends a client's
    failed masked-vector reply twice (as ``Exception(msg.error)``, the same error object), which would count one
    dropout as two failures that no client can be paired with."""
    seen: set[int] = set()
    out = []
    for failure in failures:
        args = getattr(failure, "args", ())
        if isinstance(failure, BaseException) and len(args) == 1 and not isinstance(args[0], (str, bytes, int)):
            if id(args[0]) in seen:
                continue
            seen.add(id(args[0]))
        out.append(failure)
    return out


def refusal(reason: str) -> str | None:
    """The part of a failure reason after :data:`CONFIG_ERROR_MARKER` (a client refused the run), else None."""
    return reason[reason.index(CONFIG_ERROR_MARKER) :] if CONFIG_ERROR_MARKER in reason else None


class ClientDirectory:
    """Partition ids by node, labels, sampling.

    ``num_clients``: the federation's size (the strategy waits for that many nodes). ``seed`` seeds sampling:
    round r samples the same partitions in every run with this seed (and in a resumed run), whatever node ids
    Flower gave the nodes. ``clients_per_round`` caps each sample.
    """

    def __init__(self, num_clients: int, *, seed: int = 0, clients_per_round: int | None = None) -> None:
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        self.num_clients = num_clients
        self.seed = int(seed)
        self.clients_per_round = clients_per_round
        self.partition_of: dict[str, int] = {}  # node id (proxy.cid) -> partition id
        self.model_keys: dict[str, list[str]] = {}  # node id -> the names of its model's arrays (if it said)
        self.rank_of: dict[str, int] = {}  # node id -> its place in the simulation's queue (if it said: NODE_RANK)

    # ---------------------------------------------------------------------------------------------- nodes
    def wait(self, federation: Federation, timeout: float, *, report_every: float = 10.0) -> None:
        """Wait until ``num_clients`` nodes are connected, logging how many are while it waits ("2 of 3 clients
        connected"); RuntimeError naming how many came after ``timeout`` seconds."""
        need = self.num_clients
        started = time.monotonic()
        deadline = started + timeout
        last_count, last_report = -1, started
        while True:
            count = len(federation.nodes())
            if count >= need:
                if last_count >= 0:
                    log(
                        INFO,
                        "flowergraph: %d of %d clients connected after %.0f s",
                        count,
                        need,
                        time.monotonic() - started,
                    )
                return
            now = time.monotonic()
            if now >= deadline:
                raise ClientsMissingError(
                    f"only {count} of num-clients={need} clients connected within {timeout:.0f} s (connect-timeout);"
                    f" start one SuperNode per client (simulation: num-supernodes must equal num-clients), or raise "
                    f"connect-timeout"
                )
            if count != last_count or now - last_report >= report_every:
                log(
                    INFO,
                    "flowergraph: %d of %d clients connected; waiting up to %.0f s more (connect-timeout=%g)",
                    count,
                    need,
                    deadline - now,
                    timeout,
                )
                last_count, last_report = count, now
            federation.wait_for(need, timeout=max(0.0, min(report_every / 2, deadline - now)))

    def identify(self, federation: Federation, timeout: float | None) -> dict[str, int]:
        """Ask every node which partition it holds (one query to every node at once); fills ``partition_of``.

        Raises RuntimeError when two nodes claim the same partition (a misconfigured deployment) or a client
        refuses the run because of bad input; a client that does not answer is labelled by its node id."""
        proxies = sorted(federation.nodes(), key=lambda c: c.cid)
        answers: dict[str, tuple[dict[str, Any], str]] = {}  # node id -> (properties, failure reason)
        requests = [(p, dict(IDENTITY_REQUEST)) for p in proxies]
        for proxy, outcome in federation.query(requests, timeout, 0, min(32, max(1, len(proxies)))):
            failed = isinstance(outcome, BaseException)
            answers[proxy.cid] = ({}, str(outcome)) if failed else (dict(outcome), "")
        claims: dict[int, list[str]] = {}
        for proxy in proxies:
            properties, reason = answers.get(proxy.cid, ({}, "no reply"))
            pid = properties.get(PARTITION_ID)
            if pid is None:
                reason = failure_reason(reason) if reason else "no partition_id in its properties"
                if refusal(reason):
                    raise RuntimeError(f"client node {proxy.cid} {refusal(reason)}")
                log(
                    WARNING,
                    "node %s did not say which partition it holds (%s); it is labelled by its node id",
                    proxy.cid,
                    reason,
                )
                continue
            self.partition_of[proxy.cid] = int(pid)
            claims.setdefault(int(pid), []).append(proxy.cid)
            if properties.get(NODE_RANK) is not None:
                self.rank_of[proxy.cid] = int(properties[NODE_RANK])
            try:
                keys = decode_keys(properties)
            except ValueError:
                keys = None
            if keys is not None:
                self.model_keys[proxy.cid] = keys
        duplicates = {pid: nodes for pid, nodes in claims.items() if len(nodes) > 1}
        if duplicates and self.num_clients > 1:
            pid, nodes = sorted(duplicates.items())[0]
            raise RuntimeError(
                f"nodes {', '.join(nodes)} all hold partition-id={pid}; give each SuperNode its own "
                f'partition-id in 0..{self.num_clients - 1} (--node-config "partition-id=K ...")'
            )
        if self.partition_of:
            log(
                INFO,
                "clients: %s",
                ", ".join(
                    f"partition {pid} = node {cid}"
                    for cid, pid in sorted(self.partition_of.items(), key=lambda t: t[1])
                ),
            )
        return dict(self.partition_of)

    def initial_model(
        self, federation: Federation, identities: concurrent.futures.Future[Any], timeout: float | None
    ) -> tuple[list[np.ndarray], list[str] | None]:
        """One client's initial model (the first node by node id) and the names it gave its arrays in the identity
        reply (None if it gave none). ``identities``: the :meth:`identify` running meanwhile; when the model does
        not come, its error (a client's refusal of the run) is the better one."""
        proxy = sorted(federation.nodes(), key=lambda c: c.cid)[0]
        try:
            arrays = federation.get_model(proxy, timeout)
        except Exception as exc:
            identities.result()
            raise RuntimeError(
                f"client node {proxy.cid} could not send the initial model: {failure_reason(exc)}"
            ) from exc
        if not arrays:
            identities.result()
            raise RuntimeError(f"client node {proxy.cid} returned no initial parameters")
        identities.result()
        keys = self.model_keys.get(proxy.cid)
        return arrays, keys if keys is not None and len(keys) == len(arrays) else None

    def label(self, proxy: Node | None, metrics: dict[str, Any] | None = None) -> str:
        """A client's name in logs and records: its partition id, else its node id."""
        if metrics and PARTITION_ID in metrics:
            return str(int(metrics[PARTITION_ID]))
        if proxy is None:
            return "unknown"
        if proxy.cid in self.partition_of:
            return str(self.partition_of[proxy.cid])
        return f"node {proxy.cid}"

    def dispatch_rank(self, proxy: Node) -> tuple[int, int]:
        """Where a client's message goes in the order a round's messages are sent: by the place the node said it
        has in Flower's simulation queue (``client-order``), nodes that did not say after, in the order given."""
        rank = self.rank_of.get(proxy.cid)
        return (0, rank) if rank is not None else (1, 0)

    def known(self, node: Node) -> Node:
        """``node`` carrying the partition id it said it holds (unchanged when it did not say)."""
        pid = self.partition_of.get(node.cid)
        return node if pid is None or node.partition == pid else dataclasses.replace(node, partition=pid)

    def ordered(self, clients: Iterable[Node]) -> list[Node]:
        """Clients ordered by partition id (nodes that did not identify themselves last, by node id), each
        carrying its partition id."""
        return sorted(
            (self.known(c) for c in clients),
            key=lambda c: (0, self.partition_of[c.cid], "") if c.cid in self.partition_of else (1, 0, c.cid),
        )

    def sample(self, federation: Federation, fraction: float, server_round: int = 0, phase: str = "fit") -> list[Node]:
        """``round(fraction x available)`` clients (at least 1), drawn with a generator seeded by (seed, round,
        phase) over the clients ordered by partition id: the same partitions in every run."""
        available = self.ordered(federation.nodes())
        n = max(1, int(round(fraction * len(available)))) if fraction > 0 and available else 0
        if self.clients_per_round is not None:
            n = min(n, self.clients_per_round)
        if n == 0:
            return []
        if n >= len(available):
            return available
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, server_round, _PHASE_CODES[phase]]))
        return [available[i] for i in sorted(rng.choice(len(available), size=n, replace=False))]

    # ------------------------------------------------------------------------------------------- failures
    def name_failures(
        self, server_round: int, results, failures: list[Failure], what: str, sampled: list[Node]
    ) -> list[dict[str, str]]:
        """Name and log every failure; returns ``[{"client", "reason"}]``. Raises RuntimeError for a client that
        refused the run because of bad input. A failure whose node is unknown is paired with the one client
        sampled for this phase that neither replied nor failed by name, when there is exactly one of each."""
        answered = {p.cid for p, _ in results} | {f.node.cid for f in failures if f.node is not None}
        unknown = [p for p in sampled if p.cid not in answered]
        anonymous = sum(f.node is None for f in failures)
        out = []
        for failure in failures:
            proxy = failure.node
            if proxy is None and len(unknown) == 1 and anonymous == 1:
                proxy = unknown[0]
            reason = failure_reason(getattr(failure.error, "cause", failure.error))
            label = self.label(proxy)
            node = f" (node {proxy.cid})" if proxy is not None and not label.startswith("node") else ""
            if refusal(reason):
                raise RuntimeError(f"round {server_round}: client {label}{node} {refusal(reason)}")
            log(WARNING, "round %s: client %s%s failed to %s: %s", server_round, label, node, what, reason)
            out.append({"client": label, "reason": reason})
        return out
