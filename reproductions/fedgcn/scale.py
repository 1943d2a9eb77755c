"""How FedGCN's pre-training (communication) phase scales with nodes and with cross-client edges.

The built-in synthetic CSBM graph at several sizes with the average degree held constant (p_in = 40/N,
p_out = 4/N: the defaults at N = 2000, expected degree ~11), 32 features, 5 classes; 10 clients, FedGCN 2-hop,
1 training round (the phase is what is measured). Two partitioners per size: ``random`` (~90% of edges cross
clients) and ``dirichlet:0.1`` (label skew, beta = 0.1: ~50% cross, as few as METIS's minimum cut on this graph,
whose only locality is its 5 classes; client sizes become unequal). METIS itself is not used by default: inside
Ray actors pymetis returns a different partition from call to call, so the clients of one run disagree on who owns
which node (see docs/results/fedgcn_scale.md). Plaintext and CKKS runs alternate within each (size, partitioner).
Every run goes through Flower's Ray
simulation inside a memory sampler (summed PSS of this process and all its descendants).

    .venv/bin/python reproductions/fedgcn/scale.py [--sizes 10000 30000 100000] [--partitioners random dirichlet:0.1]
                                                [--modes plain ckks] [--data-source cut files] [--fresh]

``--data-source``: ``cut`` (every client actor builds the global graph and cuts its part, the default) or
``files`` (the partitions are exported once beforehand, outside the measurement, with ``python -m
flowergraph.partition export``; each client actor reads only its own file: what a real data owner holds).

Completed runs are reused on a re-run (kept under ``--work``); ``--fresh`` reruns them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.common import REPO, table, write_result  # noqa: E402
from reproductions.fedgcn.he import MB, bench_run, breakdown, cpu_split, fmt_mb  # noqa: E402

from flowergraph.privacy import POLY_MODULUS_DEGREE  # noqa: E402

METIS_NOTE = (
    "**Why not METIS.** A first version of this benchmark used `partitioner=metis` as the few-cross-edges arm. Its "
    "30k and 100k CKKS runs and its 100k plaintext run failed in the communication phase (`the server asked for "
    "rows this client does not contribute to`, `a remote row arrived without its degree term`), and the 30k CKKS "
    "run passed when repeated. Cause: inside Ray actors pymetis (2025.2.2) is not deterministic. Logging "
    "`node_assignment` in each process of the failing 100k run gave three different partitions for the same "
    "graph (identical edge_index hash) and the same seed: the launcher's (also what every fresh Python process "
    "gives), and one more per client actor. In a bare Ray actor, two consecutive `metis_partition` calls on the "
    "100k graph returned two different partitions, while a subprocess started from that actor returned the "
    "launcher's. So in simulation the clients of one run can disagree on who owns which node: with FedGCN the "
    "phase fails; with FedAvg nodes would silently be trained by two clients or by none. The bug is in "
    "`flowergraph/tasks/partition.py` (not touched here; running pymetis in a fresh subprocess, or checking the "
    "partition's hash across clients, would fix or catch it). `dirichlet:0.1` gives as few cross-client edges "
    "on this graph and is deterministic."
)


def reading(runs: list[dict], features: int) -> str:
    """The interpretation, with the numbers taken from ``runs``."""
    ck = [r for r in runs if r["mode"] == "ckks"]
    if not ck:
        return ""
    groups = [r["phase"]["groups"] for r in ck]
    a_c, b_c = (
        fit([r["phase"]["row_contributions"] for r in ck], [r["phase"]["ciphertexts_up"] for r in ck])
        if len(ck) >= 2
        else (float("nan"), float("nan"))
    )
    ratios = []
    for r in sorted(ck, key=lambda r: (r["partitioner"], r["nodes"])):
        p = next(
            (
                q
                for q in runs
                if q["mode"] == "plain" and q["nodes"] == r["nodes"] and q["partitioner"] == r["partitioner"]
            ),
            None,
        )
        if p is not None:
            ratio = r["phase"]["bytes_up"] / p["phase"]["bytes_up"]
            ratios.append(f"{r['nodes'] // 1000}k `{r['partitioner']}` {ratio:.0f}x")
    return (
        "Reading: plaintext cost is linear in the rows that cross the server (row contributions, ~1.4-1.5 per "
        "cross-client edge here), each a dense float32 row of d + 1 values plus its id, and nothing else; at "
        "constant degree it grows linearly with N. CKKS cost is ciphertexts, and ciphertexts are a floor plus a "
        "linear part: a group of rows touched by the same set of clients starts a fresh ciphertext (so a client "
        "never receives sums of rows it did not request) and every contributor of a group uploads all of the "
        "group's ciphertexts. With 10 clients there are at most 2^10 - 1 = 1023 groups; these runs had "
        f"{min(groups)}-{max(groups)}, so the padding floor (fit: ~{a_c:.0f} ciphertexts up) is nearly reached at "
        f"10k nodes, and beyond it each row contribution adds (d + 1) / 2048 ciphertexts (fit: {b_c * 1000:.1f} "
        f"per 1000 rows; {(features + 1) / 2048 * 1000:.1f} expected at d = {features}). That is why CKKS bytes "
        "grow sub-linearly with N over 10k-100k and approach linear growth (~1.07 KB per row contribution against "
        "plaintext's ~148 B) at larger N, and why the CKKS / plaintext bytes ratio falls with N ("
        + ", ".join(ratios)
        + "). Phase time follows ciphertexts (per ciphertext on this machine: encrypt "
        "~1.5 ms, decrypt ~0.2 ms, server deserialise + add + serialise ~0.2 ms), plus Flower moving the bytes."
    )


DEGREE_IN, DEGREE_OUT = 0.02 * 2000, 0.002 * 2000  # p_in * N and p_out * N of the default 2000-node graph


def synthetic_overrides(nodes: int, features: int) -> dict:
    return {
        "dataset": "synthetic",
        "node.synthetic-nodes": nodes,
        "node.synthetic-p-in": DEGREE_IN / nodes,
        "node.synthetic-p-out": DEGREE_OUT / nodes,
        "node.synthetic-features": features,
    }


def parse_partitioner(text: str) -> tuple[str, float | None]:
    """``random`` / ``metis`` / ``dirichlet:BETA`` -> (partitioner, beta or None)."""
    name, _, beta = text.partition(":")
    return name, (float(beta) if beta else None)


def graph_stats(nodes: int, features: int, partitioner: str, clients: int, seed: int) -> dict:
    """Edges and cross-client edges of the partition, computed exactly as every client computes its part
    (plus the time one process takes to build the graph and the partition: each Ray actor pays it once, at its
    first phase message)."""
    from flowergraph.data import CSBMParams, GraphSpec, PartitionSpec, load_global_graph, node_assignment

    o = synthetic_overrides(nodes, features)
    gspec = GraphSpec(
        dataset="synthetic",
        seed=seed,
        synthetic=CSBMParams(
            num_nodes=nodes, p_in=o["node.synthetic-p-in"], p_out=o["node.synthetic-p-out"], num_features=features
        ),
    )
    load_global_graph.cache_clear()  # time what a fresh client actor pays
    node_assignment.cache_clear()
    start = time.perf_counter()
    data = load_global_graph(gspec)
    name, beta = parse_partitioner(partitioner)
    pspec = PartitionSpec(partitioner=name, num_clients=clients, seed=seed, **({"beta": beta} if beta else {}))
    owner = node_assignment(gspec, pspec)
    load_s = time.perf_counter() - start
    src, dst = data.edge_index.numpy()
    cross = int(np.count_nonzero(owner[src] != owner[dst])) // 2  # edge_index holds both directions
    sizes = np.bincount(owner, minlength=clients)
    stats = {
        "edges": int(src.size) // 2,
        "cross_edges": cross,
        "load_s": load_s,
        "client_sizes": f"{int(sizes.min())}-{int(sizes.max())}",
    }
    del data, owner, src, dst
    load_global_graph.cache_clear()  # the benchmark process is measured too: it must not keep the graph
    node_assignment.cache_clear()
    import gc

    gc.collect()
    return stats


def export_partitions(folder: Path, overrides: dict, clients: int) -> Path:
    """Each client's own partition file, written once by a separate process (not measured: a data owner has its
    file before the run). Reused when the folder already holds the export."""
    import subprocess

    if (folder / "manifest.json").exists():
        return folder
    sets = [f"--set={k}={v}" for k, v in overrides.items() if k.startswith("node.") or k in ("dataset", "seed")]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "flowergraph.partition",
            "export",
            "--num-clients",
            str(clients),
            "--out",
            str(folder),
            *sets,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return folder


def fit(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    b, a = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(a), float(b)


def loglog_slope(x: list[float], y: list[float]) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 30000, 100000])
    parser.add_argument(
        "--partitioners",
        nargs="+",
        default=["random", "dirichlet:0.1"],
        help="random, metis, louvain or dirichlet:BETA",
    )
    parser.add_argument("--modes", nargs="+", default=["plain", "ckks"], choices=["plain", "ckks"])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedgcn-scale"))
    parser.add_argument("--fresh", action="store_true", help="rerun even runs that completed before")
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds per run before it is stopped")
    parser.add_argument(
        "--data-source",
        nargs="+",
        default=["cut"],
        choices=["cut", "files"],
        help="clients cut the global graph, or read their own exported partition file",
    )
    parser.add_argument("--name", default="fedgcn_scale", help="docs/results/<name>.md")
    return parser.parse_args()


def setting_overrides(args, n: int, part: str) -> dict:
    pname, beta = parse_partitioner(part)
    return {
        **synthetic_overrides(n, args.features),
        "node.partitioner": pname,
        "fedgcn.hops": 2,
        **({"node.beta": beta} if beta else {}),
        "seed": args.seed,
        "node.local-steps": 1,
    }


def measure(args, settings: list[tuple[int, str]]) -> tuple[list[dict], list[dict]]:
    """Every (size, partitioner, mode, data source) run: the completed ones and the failed ones."""
    work = Path(args.work)
    total = len(settings) * len(args.modes) * len(args.data_source)
    runs, failed = [], []
    for i, (n, part) in enumerate(settings):
        stats = graph_stats(n, args.features, part, args.clients, args.seed)
        base = setting_overrides(args, n, part)
        parts_dir = None
        if "files" in args.data_source:
            parts_dir = export_partitions(work / f"parts-n{n}-{part.replace(':', '')}", base, args.clients)
        modes = args.modes if i % 2 == 0 else list(reversed(args.modes))  # alternate which mode goes first
        for mode in modes:
            for source in args.data_source:
                name = f"n{n}-{part.replace(':', '')}-{mode}" + ("-files" if source == "files" else "")
                print(
                    f"[{len(runs) + len(failed) + 1}/{total}] {name}: {stats['edges']} edges, "
                    f"{stats['cross_edges']} cross-client",
                    flush=True,
                )
                overrides = {
                    **base,
                    "fedgcn.he": mode == "ckks",
                    **({"partition-dir": str(parts_dir)} if source == "files" else {}),
                }
                r = bench_run(
                    work / name,
                    "fedgcn",
                    num_clients=args.clients,
                    rounds=1,
                    dataset="synthetic",
                    overrides=overrides,
                    fresh=args.fresh,
                    timeout=args.timeout,
                )
                r.update(name=name, nodes=n, partitioner=part, mode=mode, source=source, **stats)
                if not r["ok"] or r["phase"] is None:
                    print(
                        f"  FAILED ({r['status']}); peak {r['peak_mb']:.0f} MB after {r['wall_s']:.0f} s; "
                        f"see {r['log']}",
                        flush=True,
                    )
                    failed.append(r)
                    continue
                p = r["phase"]
                print(
                    f"  phase {p['time_s']:.1f} s, up {fmt_mb(p['bytes_up'])} MB, down {fmt_mb(p['bytes_down'])} "
                    f"MB, ciphertexts {p.get('ciphertexts_up', '-')}, peak {r['peak_mb']:.0f} MB, wall "
                    f"{r['wall_s']:.1f} s",
                    flush=True,
                )
                runs.append(r)
    return runs, failed


def runs_table(runs: list[dict]) -> str:
    rows = []
    for r in runs:
        p = r["phase"] or {}
        ok = r["ok"] and r["phase"] is not None
        rows.append(
            [
                r["nodes"],
                r["partitioner"],
                r["client_sizes"],
                "CKKS" if r["mode"] == "ckks" else "plaintext",
                "own files" if r.get("source") == "files" else "cut",
                r["edges"],
                r["cross_edges"],
                f"{r['cross_edges'] / r['edges']:.0%}",
                p.get("rows", "-"),
                p.get("row_contributions", "-"),
                f"{p['time_s']:.1f}" if ok else r["status"],
                fmt_mb(p.get("bytes_up")),
                fmt_mb(p.get("bytes_down")),
                f"{p['ciphertexts_up']} / {p['ciphertexts_down']} ({p['groups']} groups)"
                if r["mode"] == "ckks" and ok
                else "-",
                f"{r['peak_mb']:.0f}",
                f"{r['wall_s']:.0f}",
                f"{r['load_s']:.1f}",
            ]
        )
    columns = ["nodes", "partitioner", "client sizes", "mode", "client data", "edges", "cross-client edges"]
    columns += ["cross share", "rows crossing", "row contributions", "phase s", "bytes up MB", "bytes down MB"]
    columns += ["ciphertexts up / down", "peak PSS MB (all processes)", "wall s", "graph + partition s (per process)"]
    return table(columns, rows)


def mode_law(args, mode: str, rs: list[dict]) -> str:
    """The growth law of one mode's runs: bytes and phase time against row contributions (and ciphertexts), and
    their growth with N per partitioner."""
    label = "CKKS" if mode == "ckks" else "Plaintext"
    cross = [r["cross_edges"] for r in rs]
    contrib = [r["phase"]["row_contributions"] for r in rs]
    up = [r["phase"]["bytes_up"] for r in rs]
    down = [r["phase"]["bytes_down"] for r in rs]
    secs = [r["phase"]["time_s"] for r in rs]
    a_up, b_up = fit(contrib, up)
    per_edge = [u / c for u, c in zip(up, cross)]
    line = (
        f"* **{label}**: bytes up = {a_up / MB:.2f} MB + {b_up:.0f} B x row contributions "
        f"(i.e. {min(per_edge):.0f}-{max(per_edge):.0f} B up per cross-client edge across the runs; "
        f"row contributions / cross-client edges = "
        f"{min(c / e for c, e in zip(contrib, cross)):.2f}-{max(c / e for c, e in zip(contrib, cross)):.2f}); "
        f"bytes down / bytes up = {min(d / u for d, u in zip(down, up)):.2f}-"
        f"{max(d / u for d, u in zip(down, up)):.2f}."
    )
    if mode == "ckks":
        cts = [(r["phase"]["ciphertexts_up"] + r["phase"]["ciphertexts_down"]) / 1000 for r in rs]
        a_t, b_t = fit(cts, secs)
        a_c, b_c = fit(contrib, [r["phase"]["ciphertexts_up"] for r in rs])
        per_k = [t / c for t, c in zip(secs, cts)]
        line += (
            f" Phase time = {a_t:.1f} s + {b_t:.2f} s per 1000 ciphertexts (up + down) (least squares; "
            f"per run {min(per_k):.2f}-{max(per_k):.2f} s per 1000 ciphertexts). Ciphertexts up = "
            f"{a_c:.0f} + {b_c * 1000:.1f} per 1000 row contributions (a row is {args.features + 1} of "
            f"{POLY_MODULUS_DEGREE // 2} slots; the constant is the per-group padding: each group of rows "
            f"with the same client set starts a fresh ciphertext)."
        )
    else:
        a_t, b_t = fit([c / 1000 for c in contrib], secs)
        line += f" Phase time = {a_t:.1f} s + {b_t:.3f} s per 1000 row contributions."
    for part in args.partitioners:
        rp = sorted((r for r in rs if r["partitioner"] == part), key=lambda r: r["nodes"])
        if len(rp) >= 2:
            ns = [r["nodes"] for r in rp]
            line += (
                f" With `{part}`, bytes up grow as "
                f"N^{loglog_slope(ns, [r['phase']['bytes_up'] for r in rp]):.2f}"
                f" and phase time as N^{loglog_slope(ns, [r['phase']['time_s'] for r in rp]):.2f}"
                f" ({rp[0]['nodes']}-{rp[-1]['nodes']} nodes)."
            )
    return line


def growth_laws(args, runs: list[dict], settings: list[tuple[int, str]]) -> list[str]:
    """The growth laws fitted on the runs, the same size with fewer cross-client edges, and own partition files
    against every client cutting the global graph."""
    laws = []
    for mode in args.modes:
        rs = [r for r in runs if r["mode"] == mode]
        if len({r["nodes"] for r in rs}) >= 2:  # a growth law needs several sizes
            laws.append(mode_law(args, mode, rs))
    # Fixed size: the same graph with fewer cross-client edges.
    if len(args.partitioners) >= 2:
        a_part, b_part = args.partitioners[0], args.partitioners[1]
        for n in args.sizes:
            for mode in args.modes:
                same = [r for r in runs if r["nodes"] == n and r["mode"] == mode]
                ra = next((r for r in same if r["partitioner"] == a_part), None)
                rb = next((r for r in same if r["partitioner"] == b_part), None)
                if ra is None or rb is None:
                    continue
                pa, pb = ra["phase"], rb["phase"]
                laws.append(
                    f"* {n} nodes, {'CKKS' if mode == 'ckks' else 'plaintext'}, `{b_part}` vs `{a_part}`: "
                    f"cross-client edges x{rb['cross_edges'] / ra['cross_edges']:.2f}, row contributions "
                    f"x{pb['row_contributions'] / pa['row_contributions']:.2f}, bytes up "
                    f"x{pb['bytes_up'] / pa['bytes_up']:.2f}, phase time x{pb['time_s'] / pa['time_s']:.2f}"
                    + (f", ciphertexts x{pb['ciphertexts_up'] / pa['ciphertexts_up']:.2f}" if mode == "ckks" else "")
                    + "."
                )

    # The same setting with clients that cut the global graph and with clients that read only their own file.
    for n, part in settings:
        for mode in args.modes:
            same = {r.get("source"): r for r in runs if (r["nodes"], r["partitioner"], r["mode"]) == (n, part, mode)}
            if "cut" in same and "files" in same:
                c, f = same["cut"], same["files"]
                laws.append(
                    f"* {n} nodes, `{part}`, {'CKKS' if mode == 'ckks' else 'plaintext'}: own partition files "
                    f"vs every client cutting the global graph: peak {f['peak_mb']:.0f} vs {c['peak_mb']:.0f} MB "
                    f"(x{f['peak_mb'] / c['peak_mb']:.2f}; client actors "
                    f"{(f.get('peak_roles_mb') or {}).get('client actors', 0):.0f} vs "
                    f"{(c.get('peak_roles_mb') or {}).get('client actors', 0):.0f} MB at the peak), phase "
                    f"{f['phase']['time_s']:.1f} vs {c['phase']['time_s']:.1f} s, same bytes "
                    f"({f['phase']['bytes_up'] == c['phase']['bytes_up']})."
                )
    return laws


INTRO = (
    "Each run is a full Flower Ray simulation (2 client actors on 2 cores).\n\n"
    "* **cross-client edges**: undirected edges whose endpoints have different owners (from the partition, "
    "as each client computes it); **rows crossing**: distinct rows the server sums; **row contributions**: "
    "rows uploaded, summed over clients (= rows downloaded, 2-hop).\n"
    "* **phase s**: round 0's `time_s`, from the server's first phase message to the last reply. It includes "
    "each client actor's one-time graph generation + partition at its first message (last column, measured "
    "in the benchmark process; 2 actors pay it in parallel) and the CKKS layout/encryption/sums.\n"
    "* **peak PSS MB**: peak of the summed PSS of the benchmark process and all its descendants (SuperLink, "
    "ServerApp, Ray services, client actors), sampled every 1 s over the whole run.\n\n"
)


def main() -> None:
    args = parse_args()
    import torch_geometric.utils  # noqa: F401  (imported before graph_stats times a graph build)

    settings = [(n, part) for n in args.sizes for part in args.partitioners]
    runs, failed = measure(args, settings)
    mem_rows = [
        [r["name"], f"{r['peak_mb']:.0f}", breakdown(r.get("peak_roles_mb") or {}), cpu_split(r)] for r in runs + failed
    ]
    mem_table = table(
        ["run", "peak PSS MB", "at the peak, by role (MB)", "CPU s (whole run): client actors / ServerApp"], mem_rows
    )
    body = (
        f"Synthetic CSBM graph (5 classes, {args.features} features, p_in = {DEGREE_IN:g}/N, p_out = "
        f"{DEGREE_OUT:g}/N: expected degree ~11 at every size), {args.clients} clients, FedGCN 2-hop, 1 round of "
        f"1 local step, seed {args.seed}. One run per setting; plaintext and CKKS alternate within each setting. "
        + INTRO
        + runs_table(runs + failed)
        + "\n\n## Growth\n\n"
        + "\n".join(growth_laws(args, runs, settings))
        + "\n\n"
        + reading(runs, args.features)
        + "\n\n## Memory at the peak, by role\n\n"
        + mem_table
    )
    if "metis" not in [parse_partitioner(p)[0] for p in args.partitioners]:
        body += "\n\n" + METIS_NOTE
    if failed:
        body += "\n\n**Failed or stopped runs:** " + ", ".join(
            f"{r['name']} ({r['status']} after {r['wall_s']:.0f} s, peak {r['peak_mb']:.0f} MB)" for r in failed
        )
    write_result(args.name, "FedGCN pre-training phase vs graph size and cross-client edges", body)


if __name__ == "__main__":
    main()
