"""Checks of a run configuration across keys (Flower-free): what cannot work together is refused before anything
starts, with the reason and the valid values."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..methods.registry import get_task, methods, tasks
from .choices import PROCESS_FAULTS
from .faults import parse_faults

if TYPE_CHECKING:  # pragma: no cover
    from ..methods.registry import Method, RunSettings


def check_settings(s: RunSettings) -> None:
    """Every check across keys (ConfigError naming the values and what would be valid): the method supports the
    dataset's task, folders exist, the federation's numbers fit, privacy and robustness settings can work with
    the method, the fault plan, then the task's and the method's own checks."""
    method, task = s.method_info, s.task_info
    unknown = [t for t in method.tasks if t not in tasks()]
    if unknown:
        raise ConfigError(
            f"method {s.method!r} supports task {unknown[0]!r}, which is not registered; registered "
            f"tasks: {', '.join(tasks())}"
        )
    if task.name not in method.tasks:
        does = " and ".join(get_task(t).description for t in method.tasks)
        if s.as_dict().get("task", "auto") != "auto":
            valid_methods = ", ".join(m.name for m in methods().values() if task.name in m.tasks)
            raise ConfigError(
                f"method {s.method!r} does {does}, not {task.description} (task={task.name!r}); valid "
                f"methods for task {task.name!r}: {valid_methods}"
            )
        valid = "; ".join(f"{get_task(t).description}: {get_task(t).datasets()}" for t in method.tasks)
        raise ConfigError(
            f"method {s.method!r} does {does} but dataset {s.dataset!r} is {task.description} data; "
            f"valid datasets for it: {valid}"
        )
    check_applicable_keys(s)
    if s.data_dir:
        path = os.path.expanduser(s.data_dir)
        if not os.path.isdir(path):
            raise ConfigError(f"data-dir {s.data_dir!r} does not exist or is not a directory")
    if s.partition_dir and not os.path.isdir(os.path.expanduser(s.partition_dir)):
        raise ConfigError(f"partition-dir {s.partition_dir!r} does not exist or is not a directory")
    if s.min_clients > s.effective_num_clients:
        raise ConfigError(f"min-clients={s.min_clients} exceeds num-clients={s.effective_num_clients}")
    sampled = max(1, int(round(s.fraction_fit * s.effective_num_clients)))
    if not method.whole_graph and s.min_clients > sampled:
        raise ConfigError(
            f"min-clients={s.min_clients} but fraction-fit={s.fraction_fit} samples only {sampled} of "
            f"num-clients={s.num_clients} per round, so the model would never change; lower "
            f"min-clients or raise fraction-fit"
        )
    check_privacy(s, method)
    faults = parse_faults(s.inject_faults, num_clients=s.effective_num_clients, rounds=s.rounds)
    if s.simulation_engine == "inline":
        killing = [str(f) for f in faults if f.kind in PROCESS_FAULTS]
        if killing:
            raise ConfigError(
                f"inject-faults={s.inject_faults!r}: {', '.join(killing)} would "
                f"kill or stall the one process that runs "
                f"every client and the server with simulation-engine='inline' (no process "
                f"isolation); use simulation-engine='ray' for faults of kind "
                f"{' or '.join(PROCESS_FAULTS)}"
            )
    if s.flower_api == "message" and s.secure_agg == "secagg+":  # auto takes the legacy adapter for secagg+
        raise ConfigError(
            "secure-agg='secagg+' with flower-api='message': Flower offers SecAggPlusWorkflow only on "
            "its legacy stack; use flower-api='legacy' for SecAgg+, or secure-agg='ckks' or 'none' "
            "on the Message API"
        )
    if task.check is not None:
        task.check(s)
    if method.check is not None:
        method.check(s)


def check_applicable_keys(s: RunSettings) -> None:
    """A task's key (``node.*``, ``graph.*``) set to anything but its default in a run of another task is
    refused, naming the run's task: it would be ignored. (A key at its default passes: a plain ``flwr run`` hands
    the ServerApp every key of the app's ``pyproject.toml``.) Keys of another method are not refused: a preset
    serves several methods of one setting (FedStar's carry GCFL's thresholds for ``--method gcfl``)."""
    task = s.task_info
    values = s.as_dict()
    for prefix in tasks():
        if prefix == task.name:
            continue
        other = get_task(prefix)
        changed = [(o.key, values[o.key]) for o in other.options if o.key in values and values[o.key] != o.default]
        if not changed:
            continue
        key, value = changed[0]
        own = f"{task.name}.{key.partition('.')[2]}"  # node.beta on a graph run: graph.beta is the run's own
        use = f"use {own!r}, " if any(o.key == own for o in task.options) else ""
        if s.as_dict().get("task", "auto") != "auto":  # the run named its task: say so, and list the keys it does read
            raise ConfigError(
                f"{key}={value!r} applies to {other.description} (task {prefix!r}), but task={task.name!r} makes "
                f"this run {task.description}, which ignores it; {use}remove the key, or set task={prefix!r}; "
                f"valid keys of task {task.name!r}: {', '.join(o.key for o in task.options)}"
            )
        raise ConfigError(
            f"{key}={value!r} applies to {other.description} (task {prefix!r}), but dataset "
            f"{s.dataset!r} makes this run {task.description} (task {task.name!r}), which ignores "
            f"it; {use}remove the key, or choose a dataset of task {prefix!r}: {other.datasets()}"
        )


def check_capabilities(s: RunSettings, method: Method) -> None:
    """What the method declares about its updates and models against what the run asks of them: secure
    aggregation needs summable whole updates of one global model; central DP whole weight updates of one global
    model; local DP whole weight updates; server-side evaluation and robust rules whole updates."""
    what = (
        f"method {s.method!r} declares update_kind={method.update_kind!r}, model_scope={method.model_scope!r}"
        f"{'' if method.summable_updates else ' and updates that cannot be summed'}"
    )
    if s.secure_agg != "none" and not (
        method.summable_updates and method.update_kind != "partial" and method.model_scope == "global"
    ):
        raise ConfigError(
            f"secure-agg={s.secure_agg!r} gives the server only the sum of whole updates of one global "
            f"model, but {what}; valid with this method: secure-agg='none'"
        )
    if s.dp in ("central-server", "central-client") and not (
        method.update_kind == "weights" and method.model_scope == "global"
    ):
        local = " or 'local'" if method.update_kind == "weights" else ""
        raise ConfigError(
            f"dp={s.dp!r} clips whole weight updates against one global model and adds noise to it, "
            f"but {what}; valid with this method: dp='none'{local}"
        )
    if s.dp == "local" and method.update_kind != "weights":
        raise ConfigError(
            f"dp='local' clips and noises a whole weight update against the model it was trained from, "
            f"but {what}; valid with this method: dp='none'"
        )
    if s.server_eval and method.update_kind == "partial":
        raise ConfigError(f"server-eval=true evaluates one global model, but {what}; set server-eval=false")
    if s.aggregator != "mean" and method.update_kind == "partial":
        raise ConfigError(
            f"aggregator={s.aggregator!r} compares whole updates, but {what}; valid with this method: aggregator='mean'"
        )


def check_privacy(s: RunSettings, method: Method) -> None:
    """Combinations of secure aggregation, differential privacy and robust aggregation that cannot work."""
    per_round = s.clients_per_round
    check_capabilities(s, method)
    sampling = f"num-clients={s.effective_num_clients}, fraction-fit={s.fraction_fit:g}"
    if s.secure_agg == "secagg+" and per_round < 3:
        raise ConfigError(
            f"secure-agg='secagg+' needs at least 3 clients per round (Flower's SecAgg+ protocol), "
            f"this run has {per_round}; use secure-agg='ckks', which works with 2"
        )
    if s.secure_agg == "ckks" and per_round < s.min_secure_clients:
        raise ConfigError(
            f"secure-agg='ckks' decrypts only sums of at least min-secure-clients="
            f"{s.min_secure_clients} updates (a sum of one update is that update), but this run samples "
            f"{per_round} client(s) per round ({sampling}); valid: at least {s.min_secure_clients} "
            f"clients per round (raise num-clients or fraction-fit), or secure-agg='none'"
        )
    shares, threshold = s.secagg_num_shares, s.secagg_reconstruction_threshold

    def count(v):
        return int(v) if float(v).is_integer() else v

    for key, value in (("secagg-num-shares", shares), ("secagg-reconstruction-threshold", threshold)):
        if value > 1 and not float(value).is_integer():
            raise ConfigError(f"{key}={value!r}: give a fraction in (0, 1] or a whole count")
    if 1 < shares < 3:
        raise ConfigError(
            f"secagg-num-shares={count(shares)}: a count must be at least 3 (or give a fraction in "
            f"(0, 1] of the sampled clients)"
        )
    if shares > 1 and threshold >= shares:
        raise ConfigError(
            f"secagg-reconstruction-threshold={count(threshold)} must be below secagg-num-shares={count(shares)}"
        )
    if s.secure_agg != "none" and s.aggregator != "mean":
        raise ConfigError(
            f"aggregator={s.aggregator!r} needs every client's update, but secure-agg="
            f"{s.secure_agg!r} gives the server only their sum; valid with secure aggregation: "
            f"aggregator='mean'"
        )
    if s.secure_agg != "none" and s.dp == "central-server":
        raise ConfigError(
            f"dp='central-server' clips each client's update on the server, which secure-agg="
            f"{s.secure_agg!r} hides; use dp='central-client' (clients clip, the server adds noise)"
        )
    if s.secure_agg != "none" and s.weighting == "batch-size":
        raise ConfigError(
            "weighting='batch-size' with secure aggregation: each client weighs its own update, "
            "with its training-set size or uniformly; valid: weighting='train-size' or 'uniform'"
        )
    if s.dp in ("central-server", "central-client") and s.weighting != "uniform":
        raise ConfigError(
            f"dp={s.dp!r} calibrates its noise to the unweighted mean of the sampled clients' "
            f"clipped updates; set weighting='uniform' (got {s.weighting!r})"
        )
    if s.dp in ("central-server", "central-client") and s.aggregator != "mean":
        raise ConfigError(f"dp={s.dp!r} adds noise calibrated to a mean; aggregator={s.aggregator!r} is not one")
    if s.dp == "local" and s.dp_sensitivity < s.dp_clipping_norm:
        raise ConfigError(
            f"dp='local': dp-sensitivity={s.dp_sensitivity} is below dp-clipping-norm="
            f"{s.dp_clipping_norm}, so the noise would not cover a clipped update; set dp-sensitivity "
            f">= dp-clipping-norm"
        )
    if s.dp == "local" and not s.dp_epsilon < 1:
        raise ConfigError(
            f"dp='local': dp-epsilon={s.dp_epsilon:g} is outside (0, 1), where the noise "
            f"S sqrt(2 ln(1.25 / delta)) / epsilon (the classic Gaussian mechanism, Flower's LocalDpMod) "
            f"gives (epsilon, delta)-DP; above it the release's true epsilon is larger than the one "
            f"asked for; valid: 0 < dp-epsilon < 1"
        )
    if s.aggregator == "trimmed-mean":
        trim = s.aggregator_trim
        cut = int(trim * per_round)  # Flower's trim_mean drops int(trim x n) values at each end
        if cut == 0:
            least = math.ceil(1e4 / per_round) / 1e4  # the smallest 4-digit trim with int(trim x n) >= 1
            fix = (
                f"set aggregator-trim >= {least:.4g} (and < 0.5)"
                if least < 0.5
                else "sample at least 3 clients per round"
            )
            raise ConfigError(
                f"aggregator='trimmed-mean' with aggregator-trim={trim:g} drops int({trim:g} x "
                f"{per_round}) = 0 values at each end of the {per_round} updates of a round ({sampling}): "
                f"it would be a plain mean; {fix}, or use aggregator='median'"
            )
    if s.max_update_norm > 0:
        if s.secure_agg != "none":
            raise ConfigError(
                f"max-update-norm={s.max_update_norm:g} compares each client's update norm with the "
                f"round's median, but secure-agg={s.secure_agg!r} gives the server only their sum; set "
                f"max-update-norm=0 (SecAgg+ clips each value on the client instead)"
            )
        if per_round < 3:
            raise ConfigError(
                f"max-update-norm={s.max_update_norm:g} needs at least 3 clients per round (the "
                f"median of {per_round} norm(s) cannot tell the outlier); this run samples {per_round} "
                f"({sampling})"
            )
    if s.aggregator in ("krum", "multi-krum"):
        need = 2 * s["aggregator-malicious"] + 3
        if per_round < need:
            raise ConfigError(
                f"aggregator={s.aggregator!r} with aggregator-malicious={s['aggregator-malicious']} "
                f"needs at least 2f + 3 = {need} clients per round; this run samples {per_round}"
            )
