"""FedGraph (Chen et al.) reproduced on flowergraph: the sampling baselines, the sharing ablations, DDPG and
heterogeneity (``run.py``: its grid, report, curves, learning budget, ablations and figures), issue 72's acceptance
(``acceptance.py``), the parallel clock's calibration (``clock.py``) and a check of the Flower-free core
(``core_check.py``)."""
