"""ASFGNN (Zheng et al.) reproduced on flowergraph: Tables 3, 5, 6 and 7 with a control at fixed hyper-parameters
(``run.py``: its grid, the computing of a cell, parking, report, Table 6 and figures), and a check of the Flower-free
core at Table 4's hyper-parameters (``core_check.py``)."""
