"""flowergraph's reproductions of its papers (FedGCN, FedStar, ASFGNN, FL-AGCNS, FedGraph), one folder each, on one
shared runner (``_runner``: the cell store, resumable cells, the results pages). Beside the package, not installed
with it (pyproject.toml installs ``flowergraph*`` only); run from the repository root, e.g.
``.venv/bin/python reproductions/fedstar/run.py --tables-only``."""
