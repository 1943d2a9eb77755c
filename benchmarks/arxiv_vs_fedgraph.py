"""Issue 91: FedGCN 2-hop and fedavg (conf/fedgcn-arxiv-size.toml: Adam lr 0.05) via the launcher beside the fedgraph
library's FedGCN (SGD lr 0.5, its trainer's only optimizer; fed by reproductions/fedgcn/fg_edge_list.py in its venv),
both 10 clients, hidden 16, dropout 0.5, weight decay 5e-4, 3 local steps, on one synthetic graph, split and partition
of ogbn-arxiv's sizes (and PubMed's). Each run a child under the shared runner (peak RSS of its tree and tagged
processes); time to --target from the launch; round time: median from round 2. Graphs:"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from reproductions._runner.common import REPO, table, write_result  # noqa: E402
from reproductions.fedgcn.fg_edge_list import SCRIPT, export, graph_keys, result  # noqa: E402
from scale import run_child  # noqa: E402

PRESET = REPO / "conf" / "fedgcn-arxiv-size.toml"
RATIOS = ("round_s", "to_target", "peak_gb")
SIZES = {"arxiv": (169343, 1166243, 128, 40), "pubmed": (19717, 44324, 500, 3)}  # nodes, edges, features, classes


def run(a, name: str, cmd: list[str], folder: Path) -> dict:
    res, out = run_child(cmd, folder / f"{name}.log", a, a.timeout), folder / name / "rounds.jsonl"
    if name == "fedgraph":
        acc, at, mb = result(folder / f"{name}.log")
    else:
        recs = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
        acc, at = [[r[k] for r in recs if r["round"] >= 1] for k in ("accuracy", "ended_at")]
        mb = sum(r["bytes_up"] + r["bytes_down"] for r in recs) / 1e6
    hit = next(((i, t - res["launched_at"]) for i, (t, x) in enumerate(zip(at, acc), 1) if x >= a.target), ("-", None))
    rounds = [t - s for s, t in zip(at, at[1:])] or [float("nan")]
    return {**res, "run": name, "acc": acc[-1] if acc else 0, "round_s": statistics.median(rounds), "mb": mb,
            "to_target": hit[1], "hit": hit[0]}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    for flag, default in (("--rounds", 30), ("--nodes", 0), ("--timeout", 3600)):
        p.add_argument(flag, type=int, default=default)  # --nodes: every graph this big, degree kept (a quick run)
    for flag, default in (("--fg-python", "/tmp/fg_venv/bin/python"), ("--work", "/tmp/arxiv-vs-fedgraph"),
                          ("--name", "arxiv_vs_fedgraph")):  # fmt: skip
        p.add_argument(flag, default=default)  # --name: docs/results/<name>.md
    p.add_argument("--target", type=float, default=0.90)
    a = p.parse_args()
    a.max_memory_gb, a.sample, rows, sizes = 22.0, 1.0, [], {}  # the shared runner's stop and sampling interval
    for size in a.sizes:
        keys, folder = graph_keys(*SIZES[size], scale_to=a.nodes), Path(a.work) / size
        sizes[size] = export(PRESET, keys, folder / "graph.npz")
        sets = [x for k, v in keys.items() for x in ("--set", f"{k}={v}")] + ["--rounds", str(a.rounds)]
        ours = [sys.executable, "-m", "flowergraph.simulation", "--config", str(PRESET), *sets, "--out"]
        cmds = {"fedgraph": [a.fg_python, SCRIPT, "--graph", str(folder / "graph.npz"), "--rounds", str(a.rounds)]}
        cmds.update({m: [*ours, str(folder / m), "--method", m] for m in ("fedgcn", "fedavg")})
        got = {name: run(a, name, cmd, folder) for name, cmd in cmds.items()}
        for r in got.values():
            x = {k: f"{r[k] / got['fedgraph'][k]:.2f}" if r[k] and got["fedgraph"][k] else "-" for k in RATIOS}
            cells = [f"{r['round_s']:.2f}", x["round_s"], r["to_target"] and f"{r['to_target']:.1f}" or "-", r["hit"]]
            cells += [x["to_target"], f"{r['peak_gb']:.2f}", x["peak_gb"], f"{r['mb']:.0f}", f"{r['acc']:.3f}"]
            rows.append([size, r["run"], *cells, f"{r['ended']} ({r['rc']})"])
    head = ["graph", "run", "round s (median)", "/ fedgraph", f"s to {a.target} acc", "round", "/ fedgraph", "peak GB"]
    body = table([*head, "/ fedgraph", "MB", "final acc", "ended (exit)"], rows) + f"\n\n{__doc__}\n{sizes}\n"
    write_result(a.name, "FedGCN at ogbn-arxiv's size beside the fedgraph library", body, drop=("--work",))


if __name__ == "__main__":
    main()
