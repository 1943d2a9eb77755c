"""What secure aggregation of the training rounds costs (issue 10): fedavg and FedGCN 2-hop on Cora, 10 clients,
100 rounds (the presets conf/fedavg-cora.toml and conf/fedgcn-cora.toml), with ``secure-agg`` none / secagg+ /
ckks, in Flower's Ray simulation (SecAgg+ needs Flower's transport).

Per run: final test accuracy (whole graph), the median per-round time over rounds 2..R (round 1 carries the
actors' start-up; FedGCN's one-off exchange is round 0 and not counted), its ratio to ``none`` of the same method
and seed measured in this script (the runs of one (method, seed) follow each other), bytes each way over all
rounds (SecAgg+: counted on the server's grid, every stage included), and the peak of the summed PSS over the
launcher's whole process tree (server, Ray, every client actor). Targets: accuracy within 0.5 points of none,
secagg+ <= 2x none per round, ckks <= 4x.

Two more rows put the ratios in context. ``noop`` (fedavg's preset with clients that return what they receive)
is each protocol's own floor: SecAgg+ runs four message stages per round (key advertisement, key shares, masked
update, unmasking), each paying Flower's per-stage cost, so its overhead is an additive number of seconds per
round, and the ratio to ``none`` depends on how long local training takes. ``fedstar`` (FedStar on CHEM, 7
clients, the paper's 1 local epoch of mini-batch Adam) is a setting whose rounds do real work; accuracy there is
the paper's mean client accuracy.

The deployment part (``--parts deployment``) runs fedavg on Cora over a loopback deployment with TLS and
SuperNode authentication (:class:`flowergraph.deployment.loopback.LoopbackDeployment`, 3 SuperNodes, a few
rounds) with each ``secure-agg``: the real cost, where every message (and each SecAgg+ stage) starts a ClientApp
process. A fourth run repeats SecAgg+ with ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.05`` (Flower's SuperExec polls for
pending ClientApp tasks every 1 s by default), to measure that lever on the per-stage cost.

Resumable: each finished run is kept in ``results/bench-privacy-cost/<cell>.json`` and skipped next time.

    .venv/bin/python benchmarks/privacy_cost.py [--rounds 100] [--seeds 0] [--methods fedavg,fedgcn,noop,fedstar]
        [--parts simulation,ckks-protocol,deployment] [--deploy-rounds 4]

The parts: this file is the command; ``privacy_cost_grid.py`` the cells (the runs and the timings);
``privacy_cost_report.py`` the tables, their prose filled into the templates of
``benchmarks/templates/privacy_cost/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import write_result  # noqa: E402
import noop_methods  # noqa: E402
from privacy_cost_grid import (  # noqa: E402
    CELLS,
    MODES,
    PRESETS,
    ckks_protocol_times,
    late_accuracy,
    run_cell,
    run_deployment,
)
from privacy_cost_report import ckks_protocol_section, deployment_section, simulation_section  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", default="0", help="comma-separated")
    parser.add_argument(
        "--methods", default="fedavg,fedgcn,noop,fedstar", help=f"comma-separated: {', '.join(PRESETS)}"
    )
    parser.add_argument(
        "--parts",
        default="simulation,ckks-protocol,deployment",
        help="comma-separated: simulation (the tables of the Ray simulation), ckks-protocol (CKKS's "
        "cryptography per round before and after issue 19), deployment (the loopback rows); "
        "without simulation the other parts are printed and kept in "
        "results/bench-privacy-cost/extra.md",
    )
    parser.add_argument("--deploy-rounds", type=int, default=4)
    args = parser.parse_args()
    noop_methods.enable()  # --methods noop: the launcher subprocess and its simulation get the plugin
    parts = [p.strip() for p in args.parts.split(",")]
    CELLS.mkdir(parents=True, exist_ok=True)
    deploy = ckks_protocol_section(ckks_protocol_times()) if "ckks-protocol" in parts else ""
    deploy += (
        deployment_section(run_deployment(args.deploy_rounds), args.deploy_rounds) if "deployment" in parts else ""
    )
    if "simulation" not in parts:
        (CELLS / "extra.md").write_text(deploy.strip() + "\n")
        print(deploy)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    unknown = [m for m in methods if m not in PRESETS]
    if unknown:
        parser.error(f"unknown method {unknown[0]!r}; valid choices: {', '.join(PRESETS)}")
    results = {(m, mode, s): run_cell(m, mode, s, args.rounds) for m in methods for s in seeds for mode in MODES}
    late = {
        (m, mode, s): late_accuracy(m, mode, s, args.rounds)
        for m in methods
        if m != "noop"
        for mode in MODES
        for s in seeds
    }
    body = simulation_section(results, late, methods, seeds, args.rounds) + deploy
    write_result("privacy_cost", "Secure aggregation of the training rounds: accuracy, time, bytes, memory", body)


if __name__ == "__main__":
    main()
