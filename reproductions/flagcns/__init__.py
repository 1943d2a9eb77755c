"""FL-AGCNS (Wang et al.) reproduced on flowergraph: Tables 3 and 5, the ablations, the controls and the search's
speed (``run.py``: its grid, the computing of each kind of cell, report, controls and figures), and the costs of the
Flower-free core's pieces (``core_check.py``)."""
