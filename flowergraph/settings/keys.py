"""The keys every run has (Flower-free, part of the settings' schema: it imports only the other schema modules):
:data:`COMMON_OPTIONS` and the groups docs/configuration.md lists them under. Each registered task and method adds
its own keys, named ``<owner>.<key>`` (:mod:`flowergraph.methods`)."""

from __future__ import annotations

from dataclasses import dataclass

from .choices import AGGREGATORS, CLIENT_ORDERS, DP_MODES, FLOWER_APIS, SECURE_AGG, SIMULATION_ENGINES, WEIGHTINGS
from .options import Option, Options, at_least, left_open, option, options_of, right_open, within

# Group names, in the order docs/configuration.md lists them (a method's keys follow under the method's name).
GROUPS = {
    "run": "The run",
    "federation": "Federation: sampling, averaging, evaluation",
    "reliability": "Reliability: timeouts, checkpoints, faults",
    "data-owners": "Data owners: partition files, keys, client state",
    "privacy": "Privacy and robustness of the training rounds: secure aggregation, differential privacy",
}


def _multiple(value: float) -> str | None:
    return None if value == 0 or value > 1 else "must be 0 (off) or > 1 (a multiple of the round's median norm)"


@dataclass(kw_only=True, eq=False)
class FederationOptions(Options):
    """How the federation runs, as the server decides it: the run-config keys every run has that a strategy reads
    (sampling, averaging, evaluation, timeouts, privacy of the training rounds, the dataset simulated nodes load),
    and the keyword arguments every flowergraph Strategy class takes (:mod:`flowergraph.serverapp`). Declared
    once, here: :data:`COMMON_OPTIONS` derives these keys from the fields."""

    dataset: str = option(
        "synthetic",
        "Dataset name (case-insensitive): it decides the task. Node classification: "
        "`Cora`, `CiteSeer`, `PubMed` or `synthetic` (the built-in CSBM graph); graph classification: a TU "
        "dataset, a setting (`CHEM`, `BIO-CHEM`, `BIO-CHEM-SN`, `BIO-SN-CV`) or a comma-separated list of TU "
        "datasets, one dataset per client.",
    )
    data_dir: str = option(
        "",
        "Folder with raw files in PyG layout (`<dir>/Planetoid/Cora/raw/...`); empty: "
        "`$FLOWERGRAPH_DATA`, else download into the cache. May be read-only; a node may set its own.",
    )
    seed: int = option(
        0, "Seed of the split, partition, model initialisation, local training and client sampling.", check=at_least(0)
    )
    weighting: str = option(
        "train-size",
        "Averaging weights: training-set size, reported mini-batch size, or uniform (the FedGCN reference code).",
        WEIGHTINGS,
        group="federation",
    )
    fraction_train: float = option(
        1.0,
        "Fraction of clients sampled for training each round (seeded per round by `seed`).",
        check=left_open(0.0, 1.0),
        key="fraction-fit",
        group="federation",
    )
    fraction_evaluate: float = option(
        1.0, "Fraction of clients sampled for evaluation.", check=within(0.0, 1.0), group="federation"
    )
    min_clients: int = option(
        0,
        "Fewest valid updates that still change the global model (0 means 1); below it the round keeps the old model.",
        check=at_least(0),
        group="federation",
    )
    eval_every: int = option(
        1, "Client-side evaluation every N rounds (and always after the last).", check=at_least(1), group="federation"
    )
    fused_eval: bool = option(
        True,
        "Evaluate each round's global model inside the next round's fit message (one "
        "message per client per round instead of two; same numbers). The last round is evaluated separately. "
        "Only with fraction-fit = fraction-evaluate = 1; otherwise a separate evaluate phase is used.",
        group="federation",
    )
    aggregator: str = option(
        "mean",
        "How valid updates are combined: the weighted mean (`weighting`), or a "
        "Byzantine-robust rule from Flower's aggregate functions: coordinate-wise `median`, `trimmed-mean`, "
        "`krum` (the one update closest to its neighbours), `multi-krum` (the best-scored updates averaged).",
        AGGREGATORS,
        group="federation",
    )
    aggregator_trim: float = option(
        0.1,
        "trimmed-mean: fraction of largest and of smallest values dropped per coordinate.",
        check=right_open(0.0, 0.5),
        group="federation",
    )
    aggregator_malicious: int = option(
        1,
        "krum / multi-krum: the number f of attackers assumed (Krum needs at least 2f + 3 clients per round).",
        check=at_least(0),
        group="federation",
    )
    aggregator_keep: int = option(0, "multi-krum: updates averaged (0: n - f).", check=at_least(0), group="federation")
    max_update_norm: float = option(
        0.0,
        "Refuse an update whose L2 norm (against the model the client was sent) is "
        "above this multiple of the round's median update norm, so that one client's x1e30 update cannot "
        "wreck a `mean` run; 0: off. Needs >= 3 clients per round and individual updates (not with "
        "`secure-agg`).",
        check=_multiple,
        group="federation",
    )
    server_eval: bool = option(
        False,
        "Also evaluate the global model on the global test data on the server (the "
        "server then loads the dataset; simulation/benchmarks only).",
        group="federation",
    )
    round_timeout: float = option(
        600.0,
        "Seconds a training round waits for its clients' replies (fit, evaluate, and "
        "per-round method phases); a client that has not answered by then counts as failed for that round.",
        check=at_least(0.0, False),
        group="reliability",
    )
    init_timeout: float = option(
        600.0,
        "Seconds to wait for all clients to connect and to answer the one-off start-up "
        "messages (identity, initial model, one-off method phases such as FedGCN's exchange, restoring client "
        "state); simulation start-up (Ray, torch) counts here, not in round-timeout.",
        check=at_least(0.0, False),
        group="reliability",
    )
    connect_timeout: float = option(
        60.0,
        "Seconds the server waits for `num-clients` nodes to connect before anything "
        "starts; while it waits it reports how many did (`2 of 3 clients connected`), and then the run fails "
        "naming how many came. Simulation nodes connect at once; in a deployment start the SuperNodes first, "
        "or raise this.",
        check=at_least(0.0, False),
        group="reliability",
    )
    secure_agg: str = option(
        "none",
        "Secure aggregation of the training rounds' updates: `secagg+` (Flower's "
        "SecAgg+: masked updates, the server sees only their weighted sum; >= 3 clients per round) or `ckks` "
        "(clients encrypt their weighted updates under the data owners' CKKS key; the server adds ciphertexts "
        "and one client checks that it is a sum of >= `min-secure-clients` uploads and decrypts it: works with "
        "2 clients per round; needs `key-file`).",
        SECURE_AGG,
        group="privacy",
    )
    min_secure_clients: int = option(
        2,
        "secure-agg=ckks: the fewest valid encrypted updates whose sum is decrypted "
        "(a sum of one update is that update): the run is refused when fewer clients are sampled per round, "
        "a round in which fewer arrive keeps the model, and a client refuses to decrypt a sum of fewer.",
        check=at_least(2),
        group="privacy",
    )
    dp: str = option(
        "none",
        "Differential privacy of the training rounds (Flower's DP): `central-server` (the server "
        "clips each update and adds Gaussian noise to the mean), `central-client` (clients clip, the server adds "
        "the noise; combines with secure aggregation), `local` (each client clips its own update and adds "
        "Gaussian noise before sending it).",
        DP_MODES,
        group="privacy",
    )
    dp_noise_multiplier: float = option(
        1.0,
        "Central DP: noise standard deviation / clipping norm (per sampled-client mean).",
        check=at_least(0.0),
        group="privacy",
    )
    dp_clipping_norm: float = option(
        1.0, "DP: L2 bound of each client's model update.", check=at_least(0.0, False), group="privacy"
    )
    dp_delta: float = option(
        1e-5,
        "DP: delta of the reported (epsilon, delta) budget (local DP: of each release).",
        check=left_open(0.0, 1.0),
        group="privacy",
    )
    dp_epsilon: float = option(
        0.5,
        "Local DP: epsilon of each client's release per round (noise standard deviation "
        "= sensitivity x sqrt(2 ln(1.25 / delta)) / epsilon, the classic Gaussian mechanism, which gives "
        "(epsilon, delta)-DP only for epsilon < 1; with dp=local a value >= 1 is refused).",
        check=at_least(0.0, False),
        group="privacy",
    )
    dp_sensitivity: float = option(
        1.0,
        "Local DP: L2 sensitivity the noise is calibrated to (at least dp-clipping-norm).",
        check=at_least(0.0, False),
        group="privacy",
    )


_FEDERATION = {o.key: o for o in options_of(FederationOptions, group="run")}


COMMON_OPTIONS: tuple[Option, ...] = (
    # -- the run
    Option("method", "fedavg", "Federated method (the keys of each method follow its name below)."),
    _FEDERATION["dataset"],
    Option(
        "task",
        "auto",
        "The task the run does on its dataset: `auto` (the dataset decides: node "
        "classification on `Cora`, `CiteSeer`, `PubMed`, `synthetic`; graph classification on TU datasets), or a "
        "registered task by name: `node`, `graph`, `link` (link prediction on a node dataset: docs/tasks/link.md). "
        "A dataset the task cannot use is refused, naming the tasks it supports.",
    ),
    _FEDERATION["data-dir"],
    _FEDERATION["seed"],
    Option(
        "num-clients",
        3,
        "Number of clients (must equal the number of SuperNodes / `num-partitions`).",
        check=at_least(1),
    ),
    Option("rounds", 2, "Training rounds.", check=at_least(1)),
    Option(
        "client-order",
        "partition",
        "Simulation only: which client each simulated node serves. Flower's "
        "simulation queues a round's messages in node order and its actors take them first come, first served, "
        "so a round lasts at least as long as the last-queued large client. `partition`: node k serves client "
        "k; `largest-first`: the clients with the most training examples go to the first nodes. Every client "
        "keeps its id, data and seeds, so results are the same; only the wall time changes. A deployment "
        "ignores it: each SuperNode's `partition-id` names its client.",
        CLIENT_ORDERS,
    ),
    Option(
        "simulation-engine",
        "ray",
        "Simulation only: what runs the clients. `ray`: Flower's Ray backend (one "
        "process per client actor, resource limits, a Ray cluster). `inline`: Flower's Simulation Engine with "
        "a backend that runs the ClientApp in one process, one message at a time, every message and "
        "`context` serialised as in a deployment; no Ray start-up and no actor processes, but no process "
        "isolation and no resource limits, so `inject-faults` kinds `exit` and `hang` are refused "
        "(docs/running.md). A deployment ignores it.",
        SIMULATION_ENGINES,
    ),
    Option(
        "flower-api",
        "auto",
        "Which of Flower's two stacks the run speaks. `auto`: the Message API (`train`/`evaluate`/`query` "
        "messages: docs/api.md), but the legacy adapter for `secure-agg=secagg+`, which Flower offers only there. "
        "`message`, `legacy`: that one. Same method code, same numbers.",
        FLOWER_APIS,
    ),
    # -- federation
    _FEDERATION["weighting"],
    _FEDERATION["fraction-fit"],
    _FEDERATION["fraction-evaluate"],
    _FEDERATION["min-clients"],
    _FEDERATION["eval-every"],
    _FEDERATION["fused-eval"],
    _FEDERATION["aggregator"],
    _FEDERATION["aggregator-trim"],
    _FEDERATION["aggregator-malicious"],
    _FEDERATION["aggregator-keep"],
    _FEDERATION["max-update-norm"],
    _FEDERATION["server-eval"],
    # -- reliability
    _FEDERATION["round-timeout"],
    _FEDERATION["init-timeout"],
    _FEDERATION["connect-timeout"],
    Option(
        "poll-interval",
        0.05,
        "Longest wait (s) between the server's polls for client replies; polls start "
        "after 2 ms and back off to this. 0 keeps Flower's own fixed polling (0.1 s in simulation, 3 s in "
        "deployment), which rounds every fit/evaluate phase up to that tick.",
        check=at_least(0.0),
        group="reliability",
    ),
    Option(
        "out-dir",
        "",
        "Results folder for this run; empty: `results/<method>-<dataset>-<time>` in the "
        "working directory of the ServerApp (when resuming: the checkpointed run's folder).",
        group="reliability",
    ),
    Option(
        "checkpoint-every",
        0,
        "Save the server's state (global model, strategy state, round, records) and "
        "every client's persistent state every N rounds and after the last, to "
        "`<out-dir>/checkpoints/round-K.npz` and each client's `state-dir`; 0 = off.",
        check=at_least(0),
        group="reliability",
    ),
    Option(
        "checkpoint-keep",
        0,
        "Keep only the newest N checkpoints: after writing round K the server deletes its "
        "older `round-*.npz` files and each client its older state files, keeping N + 1 of those (so a run "
        "stopped between the clients' save and the server's still resumes); files of rounds after K (a run "
        "resumed from an earlier checkpoint) are left alone; 0 = keep all.",
        check=at_least(0),
        group="reliability",
    ),
    Option(
        "resume-from",
        "",
        "Continue a run from a checkpoint file or a run's out-dir (its latest checkpoint); "
        "every setting but rounds, out-dir, checkpoint-every, checkpoint-keep, timeouts, poll-interval, data-dir, "
        "key-file, state-dir, partition-dir, inject-faults, fused-eval and client-order must equal the "
        "checkpointed run's.",
        group="reliability",
    ),
    Option(
        "inject-faults",
        "",
        "Fault injection for robustness studies: comma-separated `kind:partition@round`, "
        "e.g. `raise:1@2,nan:0@3`, `@*` = every round; kinds: `raise`, `nan`, `shape`, `exit`, `hang`, and the "
        "poisoning kinds `scale`, `flip` (docs/reliability.md).",
        group="reliability",
    ),
    # -- data owners
    Option(
        "partition-dir",
        "",
        "A folder written by `python -m flowergraph.partition export`: client k reads only "
        "its own file `client-K.npz` and never the global dataset (a node may name its own file with "
        "node-config `partition-file`); empty: every client cuts its part out of the global graph.",
        group="data-owners",
    ),
    Option(
        "key-file",
        "",
        "The data owners' CKKS key file, for runs that encrypt (`secure-agg=ckks`, "
        "FedGCN with `fedgcn.he=true`); node config may set it per node (deployment: never in the run config); the "
        "simulation launcher creates one per run when empty.",
        group="data-owners",
    ),
    Option(
        "state-dir",
        "",
        "Where each client saves its persistent state at checkpoints (node-local; node config "
        "may set it per node); empty: `$FLOWERGRAPH_CACHE/client-state` (the simulation launcher uses "
        "`<out-dir>/client-state`).",
        group="data-owners",
    ),
    # -- privacy of the training rounds
    _FEDERATION["secure-agg"],
    _FEDERATION["min-secure-clients"],
    Option(
        "secagg-num-shares",
        1.0,
        "SecAgg+: shares of each client's secret (a count, or a fraction of the sampled clients when <= 1).",
        check=at_least(0.0, False),
        group="privacy",
    ),
    Option(
        "secagg-reconstruction-threshold",
        0.67,
        "SecAgg+: shares needed to rebuild a dropped client's secret (a count, or a fraction of num-shares when <= 1).",
        check=at_least(0.0, False),
        group="privacy",
    ),
    Option(
        "secagg-clipping-range",
        8.0,
        "SecAgg+: parameters are clipped to [-range, range] before quantisation.",
        check=at_least(0.0, False),
        group="privacy",
    ),
    Option(
        "secagg-quantization-range", 4194304, "SecAgg+: quantisation levels (2^22).", check=at_least(2), group="privacy"
    ),
    Option(
        "secagg-max-weight",
        0.0,
        "SecAgg+: the largest weight a client may give its update (its training-set "
        "size with weighting=train-size); a client above it refuses the run (Flower would clip its update), a "
        "much larger bound costs precision. 0: automatic (1 with weighting=uniform; else the largest client "
        "size the simulation launcher finds in the data, or Flower's default 1000).",
        check=at_least(0.0),
        group="privacy",
    ),
    _FEDERATION["dp"],
    _FEDERATION["dp-noise-multiplier"],
    _FEDERATION["dp-clipping-norm"],
    _FEDERATION["dp-delta"],
    _FEDERATION["dp-epsilon"],
    _FEDERATION["dp-sensitivity"],
)
