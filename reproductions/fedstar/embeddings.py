"""FedStar structure-embedding precomputation time per TU dataset (DSE 16 + RWSE 16 = 32 dims).

For every graph dataset whose raw files are on disk (COLLAB is not in the offline collection), after loading it
(not timed):

* ``cold``: no RWSE cache file: DSE + RWSE computed (batched sparse x dense, float32) and the RWSE cache written;
* ``warm``: the same call with the cache file present (read + fingerprint check + DSE);
* ``per-graph powers``: the authors' method for comparison -- for every graph separately, scipy sparse
  ``T, T^2, ..., T^16`` (``T = A D^-1``, float64) and their diagonals -- and the largest absolute difference
  between its RWSE and ours.

cold and warm are the median of ``--repeats`` runs; one thread (``flowergraph.tasks.configure_torch``).

    .venv/bin/python reproductions/fedstar/embeddings.py [--repeats 3] [--no-reference] [--datasets MUTAG,DD]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402

from flowergraph.tasks import configure_torch  # noqa: E402
from flowergraph.data import parse_graph_datasets  # noqa: E402
from flowergraph.tasks.graphcls import (  # noqa: E402
    GRAPH_DATASETS,
    NODE_ATTRIBUTES,
    available_offline,
    load_pyg_dataset,
    rwse_cache_path,
    structure_embeddings,
)

K = 16


def graphs_of(name: str, root: str):
    ds = load_pyg_dataset(name, root, use_node_attr=name in NODE_ATTRIBUTES)
    edges = [ds[i].edge_index.numpy() for i in range(len(ds))]
    num_nodes = np.array([ds[i].num_nodes for i in range(len(ds))], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(num_nodes)])
    return edges, num_nodes, np.concatenate([e + offsets[i] for i, e in enumerate(edges)], axis=1)


def per_graph_powers(edges, num_nodes) -> np.ndarray:
    """The authors' way: scipy sparse matrix powers of T = A D^-1, one graph at a time, float64."""
    import scipy.sparse as sp

    out = []
    for e, n in zip(edges, num_nodes):
        a = sp.csr_matrix((np.ones(e.shape[1]), (e[0], e[1])), shape=(n, n))
        deg = np.bincount(e[0], minlength=n).astype(np.float64)
        t = a @ sp.diags(np.divide(1.0, deg, out=np.zeros(n), where=deg > 0))
        power, diags = t, [t.diagonal()]
        for _ in range(K - 1):
            power = power @ t
            diags.append(power.diagonal())
        out.append(np.stack(diags, axis=1))
    return np.concatenate(out)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true", help="skip the per-graph scipy powers column")
    parser.add_argument("--datasets", default="", help="comma-separated (default: every offline TU dataset)")
    args = parser.parse_args()
    configure_torch()
    root = data_dir()
    names = parse_graph_datasets(args.datasets) if args.datasets else tuple(GRAPH_DATASETS)
    skipped = [n for n in names if not available_offline(n, root)]
    rows = []
    for name in (n for n in names if n not in skipped):
        edges, num_nodes, edge_index = graphs_of(name, root)
        path = rwse_cache_path(name, K)

        def compute():
            return structure_embeddings(edge_index, num_nodes, ("dse", "rwse"), 16, K, rwse_cache=path)

        cold, warm = [], []
        for _ in range(args.repeats):
            path.unlink(missing_ok=True)
            seconds, emb = timed(compute)
            cold.append(seconds)
            warm.append(timed(compute)[0])
        row = [
            name,
            len(num_nodes),
            f"{num_nodes.mean():.1f}",
            int(num_nodes.max()),
            statistics.median(cold),
            statistics.median(warm),
            f"{path.stat().st_size / 2**20:.2f}",
        ]
        if not args.no_reference:
            seconds, ref = timed(lambda: per_graph_powers(edges, num_nodes))
            row += [seconds, f"{np.abs(ref - emb[:, 16:]).max():.1e}"]
        print(row, flush=True)
        rows.append(row)
    header = ["dataset", "graphs", "avg nodes", "max nodes", "cold s", "warm s", "cache MB"]
    if not args.no_reference:
        header += ["per-graph powers s", "max abs diff"]
    total = [
        "**total**",
        sum(r[1] for r in rows),
        "",
        "",
        sum(r[4] for r in rows),
        sum(r[5] for r in rows),
        f"{sum(float(r[6]) for r in rows):.2f}",
    ] + ([sum(r[7] for r in rows), ""] if not args.no_reference else [])
    body = (
        f"DSE (16) + RWSE (16) for every graph of each dataset, one thread; cold = RWSE computed and its cache "
        f"file written, warm = read back from the cache file (both: median of {args.repeats}); dataset "
        f'loading is not timed. "per-graph powers" is the authors\' method (scipy sparse T^k per graph, '
        f'float64), timed once; "max abs diff" compares its RWSE with ours (float32).\n\n'
        + table(header, rows + [total])
    )
    if skipped:
        body += f"\n\nNot measured (raw files not on disk): {', '.join(skipped)}."
    write_result("fedstar_embeddings", "FedStar structure embeddings: precomputation time", body)


if __name__ == "__main__":
    main()
